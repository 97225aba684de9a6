"""``minigrad.utils.data.dataloader``: where PyTorch's ``torch.utils.data.dataloader`` puts the
loader (``from torch.utils.data.dataloader import DataLoader``); the same objects as
``minigrad.utils.data``'s."""
from . import DataLoader, default_collate, default_convert, get_worker_info  # noqa: F401
