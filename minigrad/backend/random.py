"""Random numbers: one seed for every backend.

Values (``rand``, ``randn``, ``randint``, parameter initialisation, sampling) are drawn on
the host by one NumPy ``Generator`` (PCG64) and then moved to the tensor's device, so
``manual_seed(n)`` gives the same numbers on the CPU and the GPU. They are drawn once (at
initialisation, or per batch of data), where an upload costs nothing that matters.

Dropout masks are drawn on every step, so on the GPU they are made on the device: from a
counter-based stream (Philox4x32-10, Salmon et al., 2011, the generator PyTorch's CUDA
backend uses too) keyed by the same seed. Element i of the next mask is a pure function of
(seed, offset + i), so a mask is made in one kernel and backward can make it again from the
offset alone. On the CPU the masks come from the host generator, as every other draw: a
run is reproducible on each device, but a CUDA run's dropout masks differ from a CPU run's.

Either way an element is kept where a uniform 32-bit number R is at least the threshold
t = round(p 2^32), so P(kept) = 1 - p to 2^-33. On the CPU, R's top byte comes first, one
byte of the generator's raw 64-bit words an element (an eighth of the bits of a uniform
float each), and decides unless it equals t's top byte (one element in 256); R's other 24
bits are drawn, a raw word each, for those elements only, in order.
"""
import math

import numpy as np

from . import host_loops

DEFAULT_SEED = 67280421310721  # PyTorch's default CPU seed: runs are reproducible unseeded


class Source:
    """Where the next random numbers come from: the host generator and the position of the
    device's counter-based stream (its key is the seed; ``offset`` counts 4-word blocks)."""

    def __init__(self, seed):
        self.seed = int(seed) % 2 ** 64  # (a negative seed wraps around, as PyTorch's)
        self._host = np.random.Generator(np.random.PCG64(self.seed))
        self._state = None  # a fork's: where its host generator starts, until it is made
        self.offset = 0

    @property
    def host(self):
        """The host generator (a fork makes its own on its first draw)."""
        if self._host is None:
            bits = np.random.PCG64(_NO_ENTROPY)
            bits.state = self._state
            self._host = np.random.Generator(bits)
        return self._host

    def fork(self):
        """A copy that draws what this source would draw next, without moving it. It notes
        where the host generator stands and makes a generator only if it draws (attention
        forks its source in forward, and draws from a fork of the fork in backward)."""
        twin = object.__new__(Source)
        twin.seed, twin.offset = self.seed, self.offset
        twin._host = None
        twin._state = self._state if self._host is None else self._host.bit_generator.state
        return twin


_NO_ENTROPY = np.random.SeedSequence(0)  # seeds a fork's generator (its state is set next)
_source = Source(DEFAULT_SEED)


def manual_seed(seed):
    """Seed every random op, on every device."""
    global _source
    _source = Source(seed)
    return _source.host


def generator():
    """The host generator that values are drawn from."""
    return _source.host


def source():
    """The current ``Source`` (``source().fork()`` replays what comes next)."""
    return _source


def keep_mask(shape, p, xp=np, src=None):
    """A bool array of ``shape`` on ``xp``'s device, each element True with probability
    1 - p: dropout's mask, drawn from ``src`` (default: the current source).

    On the host, from the generator's raw words a byte an element first (see the module's
    docstring: eight elements a 64-bit draw). On the GPU, from the device stream in one
    kernel (``kernels.philox_keep``). Either way P(True) is exact to 2^-33."""
    src = src or _source
    n = math.prod(shape)
    threshold = min(round(p * 2.0 ** 32), 2 ** 32 - 1)
    if xp is np:
        return _host_keep(src.host.bit_generator, n, threshold).reshape(shape)
    from .kernels import philox_keep
    mask = philox_keep(xp, shape, threshold, src.seed, src.offset)
    src.offset += (n + 3) // 4
    return mask


def _host_keep(bits, n, threshold):
    """n elements, each True where its 32-bit number R >= ``threshold``: R's top byte from
    the raw words of the bit generator ``bits``, eight an element (little-endian, on any
    machine); where that byte equals the threshold's, R's low 24 bits from one more raw
    word each (its low bits), in the order of the elements."""
    top, rest = threshold >> 24, threshold & 0xFFFFFF
    words = bits.random_raw((n + 7) // 8).astype("<u8", copy=False)
    split = host_loops.keep_of_bytes(words, n, top)
    if split is None:  # (the same, pass by pass)
        first = words.view(np.uint8)[:n]
        split = first > top, np.flatnonzero(first == top)
    keep, ties = split
    if ties.size:
        keep[ties] = (bits.random_raw(ties.size) & np.uint64(0xFFFFFF)) >= rest
    return keep


def get_rng_state():
    """The random state as a dict, for checkpoints: the host generator's (NumPy's
    ``bit_generator.state``) and, under ``"device"``, the device stream's seed and offset."""
    return dict(_source.host.bit_generator.state,
                device={"seed": _source.seed, "offset": _source.offset})


def set_rng_state(state):
    state = dict(state)
    device = state.pop("device", None)
    _source.host.bit_generator.state = state
    if device is not None:
        _source.seed, _source.offset = int(device["seed"]), int(device["offset"])
