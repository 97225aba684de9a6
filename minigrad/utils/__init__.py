"""``minigrad.utils``: PyTorch's ``torch.utils`` helpers (``data``: datasets and loaders;
``checkpoint``: activation checkpointing)."""
from . import checkpoint, data  # noqa: F401
