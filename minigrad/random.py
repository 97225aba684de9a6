"""Where random numbers come from: the global generator and ``Generator`` (each a NumPy
generator on the host, so a seed gives the same numbers on every device), the draws of an op
inside vmap (batched as its randomness asks), and the draws of ``bernoulli`` and
``multinomial``."""
import builtins
import contextlib

import numpy as np

from . import backend
from .arguments import _is_int
from .autograd import batching
from .ops.elementwise import NonDiff


class Generator:
    """A random number generator of its own, as ``torch.Generator``: ops given
    ``generator=`` draw from it rather than from the global one. It is the same kind of
    generator, so ``Generator().manual_seed(n)`` draws what ``mg.manual_seed(n)`` would.
    Its draws are made on the host, whatever ``device``, as every other draw."""

    def __init__(self, device="cpu"):
        self.device = backend.Device(device)
        self.manual_seed(backend.DEFAULT_SEED)

    def manual_seed(self, seed):
        self._source = backend.random.Source(builtins.int(seed))  # (the global one's kind)
        return self

    @property
    def host(self):
        return self._source.host

    def seed(self):
        """Seed from the operating system's entropy; returns the seed."""
        self.manual_seed(_entropy_seed())
        return self._source.seed

    def initial_seed(self):
        return self._source.seed

    def get_state(self):
        """The state, as a dict (NumPy's ``bit_generator.state``; PyTorch's is a tensor)."""
        return dict(self.host.bit_generator.state)

    def set_state(self, state):
        self.host.bit_generator.state = dict(state)
        return self


class _GlobalGenerator(Generator):
    """The global generator as a ``Generator`` (PyTorch's ``default_generator``, which
    ``manual_seed`` returns): its seed, state and draws are the global ones."""

    def __init__(self):
        self.device = backend.Device("cpu")

    @property
    def _source(self):
        return backend.random.source()

    def manual_seed(self, seed):
        backend.manual_seed(builtins.int(seed))
        return self


default_generator = _GlobalGenerator()


def manual_seed(seed):
    """Seed every random op, on every device; returns the global generator (as a
    ``Generator``, PyTorch's ``default_generator``). A negative seed wraps around 2^64."""
    return default_generator.manual_seed(seed)


get_rng_state, set_rng_state = backend.get_rng_state, backend.set_rng_state


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, **_):
    """Run the block with the global generator's state restored afterwards (PyTorch's
    ``torch.random.fork_rng``: draws inside do not move what comes after)."""
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


def initial_seed():
    """The seed of the global generator (the last ``manual_seed``'s, or the default)."""
    return backend.random.source().seed


def seed():
    """Seed the global generator from the operating system's entropy; returns the seed."""
    chosen = _entropy_seed()
    backend.manual_seed(chosen)
    return chosen


def _entropy_seed():
    return builtins.int(np.random.SeedSequence().entropy % 2 ** 63)


def host_generator(generator, checked=False):
    """Where a draw comes from: ``generator``'s own or, without one, the global generator.
    Inside vmap, as its randomness allows (unless the caller ``checked``)."""
    if batching.LEVELS and not checked:
        batching.random_draw("this random op")
    if generator is None:
        return backend.generator()
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a minigrad.Generator, not "
                        f"{type(generator).__name__}")
    return generator.host


def _draw_shape(op, shape):
    """The shape to draw and the vmap levels to batch the draw at (see
    ``batching.random_draw``): ``shape`` and none outside vmap."""
    if not batching.LEVELS:
        return shape, ()
    return batching.random_draw(op, shape)


def _batched(t, levels):
    return batching.per_element(t, levels) if levels else t


def _uniform_draw(t, op, generator, in_place=False):
    """Uniform float64 draws of ``t``'s shape on its device, for ``bernoulli``. Inside vmap
    as the open levels' randomness asks (see ``batching.random_draw``): batched at the
    levels drawing "different" values, where an in-place draw's tensor must be batched."""
    shape, levels = _draw_shape(op, tuple(t.shape))
    level = getattr(t, "level", None)
    if in_place and levels and (level is None or level.index < levels[-1].index):
        raise RuntimeError("vmap: Cannot ask for different inplace randomness on an unbatched "
                           "tensor. This will appear like same randomness.")
    draw = host_generator(generator, True).random(shape)
    return _batched(t._make(backend.to_device(draw, t.device)), levels)


def _categorical_weights(t, num_samples, replacement):
    """The weights of ``multinomial`` as a float64 host matrix (one row per distribution),
    after PyTorch's checks of the weights and of ``num_samples``."""
    if t.array.dtype.kind != "f":
        raise RuntimeError(f"multinomial: input must be floating point weights, got "
                           f"{t.dtype} (shape {tuple(t.shape)})")
    if t.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: input must be 1 or 2 dim, got shape "
                           f"{tuple(t.shape)}")
    if not _is_int(num_samples):
        raise TypeError(f"multinomial(): argument 'num_samples' must be int, not "
                        f"{type(num_samples).__name__}")
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample num_samples = {num_samples} <= 0 "
                           "samples")
    n = t.shape[-1]
    if not replacement and num_samples > n:
        raise RuntimeError(f"multinomial: cannot sample num_samples = {num_samples} > {n} "
                           f"categories without replacement (input shape {tuple(t.shape)})")
    weights = backend.to_host(t.array).astype(np.float64).reshape(-1, n)
    if not np.all(np.isfinite(weights) & (weights >= 0)):
        raise RuntimeError(f"multinomial: input (the weights, shape {tuple(t.shape)}) "
                           "contains either `inf`, `nan` or element < 0")
    if np.any(weights.sum(axis=1) <= 0):
        raise RuntimeError(f"multinomial: invalid distribution in input (shape "
                           f"{tuple(t.shape)}): a row's weights sum to 0")
    return weights


def _multinomial_picks(weights, num_samples, replacement, draw):
    """``multinomial``'s draws: weights (rows, n) float64 -> picks (rows, num_samples)
    int64, with ``draw(kind, m)`` the (rows, m) random numbers of the generator's method
    ``kind`` ("random" or "standard_exponential")."""
    rows, n = weights.shape
    if rows == 0:
        return np.zeros((0, num_samples), np.int64)
    if replacement:  # inverse transform: uniform draws scaled to each row's total
        totals = np.cumsum(weights, axis=1)
        points = draw("random", num_samples) * totals[:, -1:]
        picks = np.stack([np.searchsorted(t, p, side="right") for t, p in zip(totals, points)])
        last = n - 1 - np.argmax(weights[:, ::-1] > 0, axis=1, keepdims=True)
        picks = np.minimum(picks, last)  # (a draw rounded up to the total)
    else:  # a race: category i arrives at time E_i / w_i (E_i exponential); the first
        # num_samples to arrive are drawn, as one at a time without replacement would
        # draw them. Categories of weight 0 come after every other, in a random order.
        arrivals = draw("standard_exponential", n)
        with np.errstate(divide="ignore"):
            keys = np.where(weights > 0, weights / arrivals, -arrivals)
        picks = np.argsort(-keys, axis=1, kind="stable")[:, :num_samples]
    return picks.astype(np.int64)


class Normal(NonDiff):
    """out = sample, ``normal``'s values (draw * std + mean, computed by ``normal``) when
    mean or std is a tensor that requires grad;  dmean = 0,  dstd = 0: no gradient reaches
    them through a sample, as PyTorch's NormalBackward gives (zeros, not the
    reparameterised draw's). PyTorch numbers the node by which of mean and std is a
    tensor (the subclasses)."""
    node_name = "NormalBackward3"

    @staticmethod
    def forward(ctx, sample, mean, std):
        return sample.copy()

    vmap = batching.elementwise


class NormalOfMean(Normal):
    """``normal`` with a tensor mean and a number std (see Normal)."""
    node_name = "NormalBackward1"


class NormalOfStd(Normal):
    """``normal`` with a number mean and a tensor std (see Normal)."""
    node_name = "NormalBackward2"
