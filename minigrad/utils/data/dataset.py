"""``minigrad.utils.data.dataset``: where PyTorch's ``torch.utils.data.dataset`` puts the
datasets; the same classes as ``minigrad.utils.data``'s."""
from . import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,  # noqa: F401
               TensorDataset, random_split)
