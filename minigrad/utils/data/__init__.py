"""``minigrad.utils.data``: PyTorch's ``torch.utils.data`` (datasets, samplers, loaders).

A map-style ``Dataset`` gives the sample at an index; a sampler gives the indices (in order,
or shuffled), ``BatchSampler`` groups them, and ``DataLoader`` fetches each batch's samples
and joins them with ``collate_fn`` (``default_collate`` stacks tensors, makes tensors of
numbers and recurses into tuples, lists and dicts, as PyTorch's does). An
``IterableDataset`` gives its samples as a stream instead. The datasets are in
``dataset.py``, the samplers in ``sampler.py``, collating and the loader in ``dataloader.py``,
as in PyTorch.

Batches are made in the calling process: ``num_workers`` must be 0 (a larger number is
refused rather than silently run in one process).

Random order comes from minigrad's global generator (seeded by ``manual_seed``) unless
``generator`` is given: a ``minigrad.Generator`` (as ``torch.Generator``) or a NumPy
``Generator``. The draws are NumPy's, so a shuffled order or a ``random_split`` is
reproducible from the seed but is not the permutation PyTorch draws from the same seed.
"""
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset,
                      Subset, TensorDataset, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)
from .dataloader import DataLoader, default_collate, default_convert, get_worker_info

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "Subset",
           "ConcatDataset", "ChainDataset", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DataLoader",
           "default_collate", "default_convert", "random_split", "get_worker_info"]
