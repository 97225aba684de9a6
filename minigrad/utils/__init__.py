"""``minigrad.utils``: PyTorch's ``torch.utils`` helpers (``data``: datasets and loaders)."""
from . import data  # noqa: F401
