"""Random numbers: one host generator for every backend.

Random numbers are drawn on the host by one NumPy ``Generator`` (PCG64) and then moved to
the tensor's device, so ``manual_seed(n)`` gives the same numbers on the CPU and the GPU.
"""
import math

import numpy as np

DEFAULT_SEED = 67280421310721  # PyTorch's default CPU seed: runs are reproducible unseeded

_generator = np.random.Generator(np.random.PCG64(DEFAULT_SEED))


def manual_seed(seed):
    """Seed the one generator behind every random op, on every device."""
    global _generator
    _generator = np.random.Generator(np.random.PCG64(int(seed)))
    return _generator


def generator():
    """The host generator every random op draws from."""
    return _generator


def keep_mask(shape, p, generator=None):
    """A host bool array of ``shape``, each element True with probability 1 - p: dropout's
    mask, from the generator's raw 32-bit draws (one 64-bit draw makes two elements, twice as
    fast as uniform floats; P(True) is exact to 2^-33)."""
    n = math.prod(shape)
    bits = (generator or _generator).bit_generator.random_raw((n + 1) // 2)
    threshold = np.uint32(min(round(p * 2.0 ** 32), 2 ** 32 - 1))
    return (bits.view(np.uint32)[:n] >= threshold).reshape(shape)


def get_rng_state():
    """The generator's state (a dict, as NumPy's ``bit_generator.state``), for checkpoints."""
    return _generator.bit_generator.state


def set_rng_state(state):
    _generator.bit_generator.state = state
