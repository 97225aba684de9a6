"""The samplers of ``minigrad.utils.data`` (PyTorch's ``torch.utils.data.sampler``): where a
``DataLoader``'s indices come from (in order, shuffled, weighted) and how they are grouped
into batches (``BatchSampler``).

Random order comes from minigrad's global generator (seeded by ``manual_seed``) unless
``generator`` is given: a ``minigrad.Generator`` (as ``torch.Generator``) or a NumPy
``Generator``. The draws are NumPy's, so an order is reproducible from the seed but is not
the one PyTorch draws from the same seed.
"""
import numpy as np

import minigrad as mg
from minigrad import backend


def _numpy_generator(generator):
    """The NumPy generator that random order is drawn from: minigrad's one generator when
    ``generator`` is None, a ``minigrad.Generator``'s own, or a NumPy ``Generator``."""
    if generator is None:
        return backend.generator()
    host = getattr(generator, "host", None)  # a minigrad.Generator draws on the host
    if isinstance(host, np.random.Generator):
        return host
    if isinstance(generator, np.random.Generator):
        return generator
    raise TypeError(f"generator must be a minigrad.Generator or a NumPy Generator (or None "
                    f"for minigrad's global one), got {type(generator).__name__}")


class Sampler:
    """Base class of the samplers: an iterable of indices (or of lists of indices)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """The indices 0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """The indices in a new random order each pass (each of them once, or ``num_samples``
    drawn with ``replacement``)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source, self.replacement = data_source, replacement
        self._num_samples, self.generator = num_samples, generator
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, rng = len(self.data_source), _numpy_generator(self.generator)
        if self.replacement:  # in draws of 32, as PyTorch: num_samples may be huge
            for start in range(0, self.num_samples, 32):
                yield from rng.integers(0, n, min(32, self.num_samples - start)).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from rng.permutation(n).tolist()
        yield from rng.permutation(n).tolist()[:self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a new random order each pass."""

    def __init__(self, indices, generator=None):
        self.indices, self.generator = indices, generator

    def __iter__(self):
        for i in _numpy_generator(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights``."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) \
                or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got "
                             f"replacement={replacement}")
        weights = np.asarray(weights.numpy() if isinstance(weights, mg.Tensor) else weights,
                             dtype=np.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights.shape)}")
        self.weights = mg.tensor(weights)
        self.num_samples, self.replacement, self.generator = num_samples, replacement, generator

    def __iter__(self):
        p = self.weights.numpy()
        choice = _numpy_generator(self.generator).choice
        yield from choice(len(p), self.num_samples, replace=self.replacement,
                          p=p / p.sum()).tolist()

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler, self.batch_size, self.drop_last = sampler, batch_size, drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


