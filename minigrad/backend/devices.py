"""Devices: NumPy on ``"cpu"``, CuPy on ``"cuda"``.

Every op reaches its array module as ``ctx.xp`` and never imports CuPy or branches on it.
The places where NumPy and CuPy differ about devices (importing CuPy at all, host copies,
moving arrays, device checks, making a GPU current) are the named helpers of this file;
the array-level kernels that differ are in ``kernels.py``.
"""
import numpy as np

_cupy = None  # the cupy module once imported and checked
_XP_BY_TYPE = {np.ndarray: np}  # array type -> array module; cupy.ndarray joins on import


class DeviceError(RuntimeError, ValueError):
    """A device is unknown, unavailable, or two devices were mixed in one op."""


class Device(str):
    """A device name such as ``"cpu"`` or ``"cuda:0"``; a str with PyTorch's ``type``/``index``."""

    def __new__(cls, spec="cpu"):
        if isinstance(spec, Device):
            return spec
        name = str(spec).strip().lower()
        kind, _, idx = name.partition(":")
        if kind == "cpu" and not idx:
            return super().__new__(cls, "cpu")
        if kind == "cuda" and (not idx or idx.isdigit()):
            return super().__new__(cls, f"cuda:{int(idx or 0)}")
        raise DeviceError(f"unknown device {spec!r}: expected 'cpu', 'cuda' or 'cuda:N'")

    @property
    def type(self):
        return self.partition(":")[0]

    @property
    def index(self):
        return int(self.partition(":")[2]) if self.type == "cuda" else None


CPU = Device("cpu")


def cupy():
    """Import CuPy and check that a GPU is visible, or say exactly what is missing."""
    global _cupy
    if _cupy is None:
        try:
            import cupy as cp
        except ImportError as e:
            raise DeviceError(
                "device 'cuda' needs CuPy, which is not installed. Install the build that "
                "matches your CUDA toolkit, e.g. `pip install cupy-cuda12x`, or "
                "`pip install -e '.[cuda]'` from the minigrad checkout.") from e
        try:
            count = cp.cuda.runtime.getDeviceCount()
        except Exception as e:  # CUDARuntimeError when there is no driver
            raise DeviceError(f"device 'cuda' needs a CUDA GPU, but CuPy found none ({e})") from e
        if count == 0:
            raise DeviceError("device 'cuda' needs a CUDA GPU, but CuPy found none")
        _XP_BY_TYPE[cp.ndarray] = cp
        _cupy = cp
    return _cupy


def cuda_is_available():
    """True when CuPy imports and sees at least one GPU."""
    try:
        cupy()
    except DeviceError:
        return False
    return True


def array_module(device):
    """The array module (numpy or cupy) that holds arrays of ``device``."""
    return np if Device(device) == CPU else cupy()


def xp_of(array):
    """The array module of ``array``."""
    xp = _XP_BY_TYPE.get(type(array))
    if xp is None:
        raise TypeError(f"expected a NumPy or CuPy array, got {type(array).__name__}")
    return xp


def device_of(array):
    if type(array) is np.ndarray or isinstance(array, np.ndarray):  # (a subclass: vmap's)
        return CPU
    return Device(f"cuda:{array.device.id}")


def to_device(array, device):
    """``array`` moved to ``device`` (the same object when it is already there)."""
    device = Device(device)
    if device == CPU:
        return to_host(array)
    cp = cupy()
    if type(array) is cp.ndarray and array.device.id == device.index:
        return array
    with cp.cuda.Device(device.index):
        return cp.asarray(array)


# What a read from the GPU does first: checks.raise_pending, which raises the first failed
# check of values recorded on the device. checks (built on this module) sets it here.
before_read = None


def to_host(array):
    """A NumPy array with the values of ``array`` (no copy when it already is one). A read
    from the GPU first raises any failed check of values recorded there (``checks``)."""
    if type(array) is np.ndarray:
        return array
    if before_read is not None:
        before_read()
    return array.get()


def check_same_device(op, arrays):
    """Raise DeviceError naming ``op`` and both devices when ``arrays`` live on two devices."""
    first = arrays[0]
    xp = _XP_BY_TYPE.get(type(first))
    for a in arrays[1:]:
        if _XP_BY_TYPE.get(type(a)) is not xp or (xp is not np
                                                  and a.device.id != first.device.id):
            raise DeviceError(f"{op}: expected all tensors on the same device, but found "
                              f"{device_of(first)} and {device_of(a)}")


def device_context(array):
    """A context manager that makes ``array``'s GPU current (a no-op on the CPU)."""
    if type(array) is np.ndarray:
        return _NULL_CONTEXT
    return array.device


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL_CONTEXT = _NullContext()
