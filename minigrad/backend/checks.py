"""Checks of values on the GPU without a synchronisation: raised at the next read instead.

An op whose arguments are wrong only by their values (an index outside its dim, a target
outside the classes) cannot know it on the GPU without reading the values back, which
stalls the queue of kernels. PyTorch's CUDA kernels check such values on the device and
report a failure asynchronously, at the next call that waits for the GPU. minigrad does
the same: on a device array, ``check(bad, value, error, message)`` records the check on
the device (a few small kernels, no read), and the first failed one is raised, as
``error(message.format(value))`` (the CPU's type and message), by the next read of a value
on the host: ``Tensor.item()``, ``.numpy()``, ``.tolist()``, ``bool(t)``, ``float(t)``,
``int(t)``, printing, a copy to the CPU (``backend.to_host``) or ``mg.cuda.synchronize()``
(``raise_pending``). Meanwhile the op runs on indices wrapped into range (``wrapped``),
as CuPy's own indexing wraps them, so nothing outside the array is touched.

``CUDA_LAUNCH_BLOCKING=1`` in the environment, PyTorch's switch for the same purpose, makes
every check read its result at once (one synchronisation each) and so raise in the op
itself. On the CPU (NumPy arrays) the callers check on the host and raise in the op, as
before.
"""
import os

import numpy as np

from . import devices
from .devices import xp_of

_messages = {}   # (error, message) -> its code; _by_code: code -> (error, message)
_by_code = []
_states = {}     # device id -> int64 device array [code of the first failed check or -1, value]


def blocking():
    """Whether each check reads its result back at once (``CUDA_LAUNCH_BLOCKING=1``)."""
    return os.environ.get("CUDA_LAUNCH_BLOCKING", "0").strip() not in ("", "0")


def check(bad, value, error, message):
    """Record a check on the device: ``bad`` (a 0-d bool device array) says it failed and
    ``value`` (a 0-d integer device array) is what ``message`` names, in
    ``error(message.format(value))``, raised by the next read on the host (see the module's
    docstring). The first failure is kept; later ones are dropped, as PyTorch reports one."""
    key = (error, message)
    code = _messages.get(key)
    if code is None:
        code = _messages[key] = len(_by_code)
        _by_code.append(key)
    xp = xp_of(bad)
    dev = bad.device.id
    state = _states.get(dev)
    mine = xp.stack((xp.where(bad, code, -1), value.astype(np.int64)))
    if state is None:
        _states[dev] = xp.where(mine[0] >= 0, mine, -1)
    else:
        _states[dev] = xp.where(state[0] >= 0, state, mine)
    if blocking():
        raise_pending()


def raise_pending():
    """Raise the first failed check recorded since the last call (one read per device that
    has any); a no-op where none was recorded."""
    while _states:
        dev, state = _states.popitem()
        code, value = (int(v) for v in state.get())
        if code >= 0:
            error, message = _by_code[code]
            _states.clear()
            raise error(message.format(value))


devices.before_read = raise_pending  # backend.to_host: a read raises a failed check first


def forget():
    """Drop the checks recorded and not yet read (nothing is raised)."""
    _states.clear()


def pending():
    """Whether checks were recorded on the device that no read has looked at yet."""
    return bool(_states)


def wrapped(index, size):
    """A device index array wrapped into [0, size) (what CuPy's indexing does with an index
    outside it, whose check failed); a NumPy array (checked on the host, in range) or a
    size of 0 is left as it is."""
    if type(index) is np.ndarray or not size:
        return index
    return xp_of(index).remainder(index, size)


def out_of_range(index, low, high):
    """A check's (bad, value) for an integer device array that should hold values in
    [low, high): whether one is outside, and the smallest one below or else the largest."""
    xp = xp_of(index)
    lo, hi = index.min(), index.max()
    below = lo < low
    return below | (hi >= high), xp.where(below, lo, hi)


def first_out_of_range(flat, n, ignore_index=None):
    """A check's (bad, value) for a 1-d integer device array that should hold values in
    [0, n) (or ``ignore_index``): whether one is outside, and the first such."""
    bad = (flat < 0) | (flat >= n)
    if ignore_index is not None:
        bad &= flat != ignore_index
    first = bad.argmax()  # the first True (0 when there is none)
    return bad[first], flat[first]
