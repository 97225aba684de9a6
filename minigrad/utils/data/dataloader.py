"""The loader of ``minigrad.utils.data`` (PyTorch's ``torch.utils.data.dataloader``):
``DataLoader`` fetches each batch's samples and joins them with ``collate_fn``
(``default_collate``), in the calling process."""
import collections.abc
import copy
import math
import re

import numpy as np

import minigrad as mg
from .dataset import IterableDataset, Subset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler


# --- collating -------------------------------------------------------------------------------

_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, "
                  "dicts or lists; found {}")
_STRINGS_OR_OBJECTS = re.compile(r"[SaUO]")  # NumPy dtypes that make no tensor


def default_collate(batch):
    """One batch from a list of samples: tensors stacked on a new first dim, NumPy arrays
    and numbers made tensors (float -> float64, int -> int64, bool -> bool), str and bytes
    kept as a list, and dicts, namedtuples, tuples and lists collated per entry (a tuple
    gives a list, as in PyTorch)."""
    elem = batch[0]
    if isinstance(elem, mg.Tensor):
        return mg.stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if _STRINGS_OR_OBJECTS.search(elem.dtype.str) is not None:
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return default_collate([mg.tensor(b) for b in batch])
    if isinstance(elem, (np.bool_, np.number)):
        return mg.tensor(np.asarray(batch))
    if isinstance(elem, float):
        return mg.tensor(batch, dtype=mg.float64)
    if isinstance(elem, int):
        return mg.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        return _same_kind(elem, collated, collections.abc.MutableMapping)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if not all(len(e) == size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        collated = [default_collate(s) for s in zip(*batch)]  # (str entries stay tuples)
        if isinstance(elem, tuple):
            return collated
        return _same_kind(elem, collated, collections.abc.MutableSequence)
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


def _same_kind(elem, collated, mutable):
    """``collated`` (a dict or list) as ``elem``'s type where that type can hold it."""
    try:
        if isinstance(elem, mutable):
            clone = copy.copy(elem)
            if isinstance(collated, dict):
                clone.update(collated)
            else:
                clone[:] = collated
            return clone
        return type(elem)(collated)
    except TypeError:  # a type that cannot be made from its entries
        return collated


def default_convert(data):
    """``data`` with its NumPy arrays and NumPy scalars made tensors (through dicts,
    namedtuples, tuples and lists): what ``DataLoader`` gives with ``batch_size=None``."""
    if isinstance(data, mg.Tensor):
        return data
    if isinstance(data, np.ndarray):
        if _STRINGS_OR_OBJECTS.search(data.dtype.str) is not None:
            return data
        return mg.tensor(data)
    if isinstance(data, (np.bool_, np.number)):
        return mg.tensor(np.asarray(data))
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, collections.abc.Mapping):
        return _same_kind(data, {k: default_convert(v) for k, v in data.items()},
                          collections.abc.MutableMapping)
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence):
        return _same_kind(data, [default_convert(d) for d in data],
                          collections.abc.MutableSequence)
    return data


def _gathered(dataset, indices):
    """``default_collate`` of the samples of a ``TensorDataset`` (or a ``Subset`` of one)
    at ``indices``, each tensor's rows gathered by one indexing op rather than stacked one
    by one (the same values, dtypes and shapes, several times faster); None for other
    datasets."""
    while type(dataset) is Subset:
        indices = [int(dataset.indices[i]) for i in indices]
        dataset = dataset.dataset
    if type(dataset) is not TensorDataset:
        return None
    return [t[list(indices)] for t in dataset.tensors]


def get_worker_info():
    """None: every batch is made in the calling process."""
    return None


# --- the loader ------------------------------------------------------------------------------

class _Batches:
    """An epoch's batches, one at a time, with ``len()`` (as PyTorch's loader iterator)."""

    def __init__(self, batches, length):
        self._batches, self._length = batches, length

    def __iter__(self):
        return self

    def __next__(self):
        return next(self._batches)

    def __len__(self):
        return self._length


class DataLoader:
    """Batches of ``dataset``'s samples, made in the calling process.

    Args:
        dataset: a map-style ``Dataset`` (any object with ``__getitem__`` and ``__len__``)
            or an ``IterableDataset``.
        batch_size (int or None): samples per batch; None gives single samples. Default: 1.
        shuffle (bool): a new random order every pass (map-style datasets only).
        sampler, batch_sampler: where the indices (or the lists of indices) come from.
        num_workers (int): must be 0.
        collate_fn: joins a list of samples into a batch. Default: ``default_collate``.
        drop_last (bool): leave out the last batch when it is short.
        generator: draws the shuffled order (see the module docstring).
        pin_memory, timeout, worker_init_fn, multiprocessing_context, prefetch_factor,
            persistent_workers, pin_memory_device, in_order: PyTorch's, checked as PyTorch
            checks them; without workers they change nothing.
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if num_workers > 0:
            raise ValueError(f"DataLoader: num_workers={num_workers} is not supported: "
                             "minigrad makes batches in the calling process; use num_workers=0")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing.let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if persistent_workers:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None:
            raise ValueError("multiprocessing_context can only be used with multi-process "
                             f"loading (num_workers > 0), but got num_workers={num_workers}")
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"sampler option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = (RandomSampler(dataset, generator=generator) if shuffle
                       else SequentialSampler(dataset))
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.dataset, self.batch_size, self.drop_last = dataset, batch_size, drop_last
        self.sampler, self.batch_sampler, self.generator = sampler, batch_sampler, generator
        self.num_workers, self.pin_memory, self.timeout = num_workers, pin_memory, timeout
        self.worker_init_fn, self.prefetch_factor = worker_init_fn, prefetch_factor
        self.persistent_workers, self.pin_memory_device = persistent_workers, pin_memory_device
        self.in_order = in_order
        batching = batch_size is not None or batch_sampler is not None
        self.collate_fn = collate_fn or (default_collate if batching else default_convert)
        self._initialized = True

    def __setattr__(self, attr, val):
        if getattr(self, "_initialized", False) and attr in (
                "batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{type(self).__name__} is initialized")
        super().__setattr__(attr, val)

    def __iter__(self):
        if self._iterable:
            return self._iter_stream()
        if self.batch_sampler is not None:
            batches = (self._fetch(indices) for indices in self.batch_sampler)
        else:
            batches = (self.collate_fn(self.dataset[i]) for i in self.sampler)
        return _Batches(batches, len(self))

    def _fetch(self, indices):
        """One batch: the samples at ``indices`` (through the dataset's ``__getitems__``
        where it has one, as in PyTorch), collated."""
        if self.collate_fn is default_collate:
            batch = _gathered(self.dataset, indices)
            if batch is not None:
                return batch
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return self.collate_fn(getitems(list(indices)))
        return self.collate_fn([self.dataset[i] for i in indices])

    def _iter_stream(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            length = len(self.dataset)
            if self.batch_size is None:
                return length
            if self.drop_last:
                return length // self.batch_size
            return math.ceil(length / self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
