"""Making tensors: from data, filled, ranges, and random.

Filled tensors and ranges are built directly by the device's array module. Random draws
come from the one host generator in ``backend`` and are then copied to the device, on
purpose: a seed gives the same numbers on every device.
"""
import builtins
import math

import numpy as np

from . import backend, dtypes
from .tensor import Tensor, _shape_arg, _wrapped, as_array


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (Python floats become float32, ints int64)."""
    arr = as_array(data, dtype)
    if arr is data or (isinstance(data, Tensor) and arr is data.data):
        arr = arr.copy()
    return Tensor(arr, device=device, requires_grad=requires_grad)


def from_numpy(array):
    """A tensor that shares ``array``'s memory (no copy; the dtype is kept, so float64 stays
    float64), as ``torch.from_numpy``: a change through either is seen by the other."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(array).__name__})")
    return Tensor._make(array)


def _module(device):
    """The array module of ``device`` (None: the CPU): filled tensors and ranges are built
    there directly, with no copy from the host."""
    return backend.array_module(backend.CPU if device is None else device)


def _new_shape(op, size):
    """The shape of a new tensor, from ``f(2, 3)`` or ``f((2, 3))``; a negative size is a
    RuntimeError, as in PyTorch."""
    shape = _shape_arg(size)
    if any(n < 0 for n in shape):
        raise RuntimeError(f"{op}: trying to create a tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    return shape


def _filled(fill, size, dtype, device, requires_grad):
    make = getattr(_module(device), fill)
    arr = make(_new_shape(fill, size), dtypes.as_dtype(dtype) or dtypes.get_default_dtype())
    return Tensor(arr, device=device, requires_grad=requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _filled("zeros", size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _filled("ones", size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _filled("empty", size, dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """Filled with ``fill_value``; the dtype follows it (bool, int64 or float32) unless given."""
    if dtype is None:
        dtype = as_array(fill_value).dtype
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    fill_value = _wrapped(fill_value, dtypes.as_dtype(dtype), "full")
    arr = _module(device).full(_new_shape("full", (size,)), fill_value,
                               dtype=dtypes.as_dtype(dtype))
    return Tensor(arr, device=device, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from start to end (exclusive) by step: int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    integral = all(isinstance(v, (builtins.int, np.integer)) for v in (start, end, step))
    if dtype is None:
        dtype = dtypes.int64 if integral else dtypes.get_default_dtype()
    dtype = dtypes.as_dtype(dtype)
    n = _range_length(start, end, step)
    xp = _module(device)
    if integral and dtype.kind != "f":
        arr = xp.arange(start, end, step, dtype=np.int64)
    else:  # in float64 and then cast, as PyTorch does, so float32 ranges match its values
        arr = _float_range(xp, start, step, n)
    return Tensor(arr.astype(dtype, copy=False), device=device, requires_grad=requires_grad)


def _range_length(start, end, step):
    """How many values arange gives, with PyTorch's errors for a range it cannot make."""
    if not all(math.isfinite(v) for v in (start, end, step)):
        raise RuntimeError(f"arange: unsupported range: {start} -> {end} by {step}")
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign "
                           f"(start {start}, end {end}, step {step})")
    return max(math.ceil((end - start) / step), 0)


def _float_range(xp, start, step, n):
    """NumPy's float64 arange, computed with ``xp`` so that every device gives the same
    values: start, start + step, then start + i * delta with delta = (start + step) - start
    (each array op rounds once, as NumPy's loop does)."""
    out = xp.arange(n, dtype=np.float64)  # 0, 1, ..., n - 1: exact
    out *= float(start + step) - float(start)
    out += start
    if n > 0:
        out[0] = start
    if n > 1:
        out[1] = start + step
    return out


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """``steps`` values evenly spaced from start to end (both included), computed in float64
    as NumPy's linspace (start + i * step, the last value exactly end) and then cast."""
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    out = _module(device).arange(steps, dtype=np.float64)
    delta = float(end) - float(start)
    step = delta / (steps - 1) if steps > 1 else 0.0
    if step == 0.0 and steps > 1:  # (a step that underflows: scale after dividing, as NumPy)
        out /= steps - 1
    out *= step if step != 0.0 else delta
    out += start
    if steps > 1:
        out[-1] = end
    arr = out.astype(dtypes.as_dtype(dtype) or dtypes.get_default_dtype())
    return Tensor(arr, device=device, requires_grad=requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    arr = _module(device).eye(n, m, dtype=dtypes.as_dtype(dtype) or dtypes.get_default_dtype())
    return Tensor(arr, device=device, requires_grad=requires_grad)


# Random draws come from the one host generator and are copied to the device, on purpose:
# a seed gives the same numbers on the CPU and on the GPU.

def rand(*size, dtype=None, device=None, requires_grad=False):
    """Uniform on [0, 1). Drawn on the host by minigrad's one generator and copied to
    ``device``, so a seed gives the same numbers on the CPU and the GPU."""
    dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
    arr = backend.generator().random(_new_shape("rand", size),
                                     dtype=_draw_dtype(dtype)).astype(dtype)
    return Tensor(arr, device=device, requires_grad=requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    """Standard normal, drawn on the host as ``rand``'s."""
    dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
    arr = backend.generator().standard_normal(_new_shape("randn", size),
                                              dtype=_draw_dtype(dtype))
    return Tensor(arr.astype(dtype), device=device, requires_grad=requires_grad)


def randint(low, high=None, size=(), dtype=None, device=None):
    """Integers uniform on [low, high) (``randint(high, size)`` also works, as in PyTorch),
    drawn on the host as ``rand``'s."""
    if high is None or isinstance(high, (tuple, list)):
        low, high, size = 0, low, size if high is None else high
    arr = backend.generator().integers(low, high, _new_shape("randint", (size,)),
                                       dtype=np.int64)
    return Tensor(arr.astype(dtypes.as_dtype(dtype) or dtypes.int64), device=device)


def randperm(n, *, dtype=None, device=None, requires_grad=False):
    """The integers 0, ..., n - 1 in a random order (int64 unless ``dtype``), drawn on the
    host as ``rand``'s."""
    if isinstance(n, Tensor):
        n = n.item()
    if type(n) is not builtins.int and not isinstance(n, np.integer):
        raise TypeError(f"randperm(): argument 'n' must be int, not {type(n).__name__}")
    (n,) = _new_shape("randperm", (n,))
    dtype = dtypes.as_dtype(dtype) or dtypes.int64
    if dtype.kind == "b":
        raise NotImplementedError("randperm: not implemented for bool (dtype=bool)")
    # the largest value, n - 1, must be exact in dtype
    largest = np.iinfo(dtype).max if dtype.kind in "iu" else 2 ** (np.finfo(dtype).nmant + 1)
    if n - 1 > largest:
        raise RuntimeError(f"randperm: n = {n} is too large for dtype {dtype} (its values "
                           f"reach n - 1, and {dtype} holds integers up to {largest} exactly)")
    arr = backend.generator().permutation(n).astype(dtype)
    return Tensor(arr, device=device, requires_grad=requires_grad)


def _draw_dtype(dtype):
    return np.float32 if dtype == np.float32 else np.float64


def _like(maker):
    def like(t, dtype=None, device=None, requires_grad=False, **kwargs):
        return maker(*t.shape, **kwargs, dtype=dtype or t.dtype, device=device or t.device,
                     requires_grad=requires_grad)
    like.__name__ = maker.__name__ + "_like"
    like.__doc__ = f"``{maker.__name__}`` with the shape (and by default dtype, device) of ``t``."
    return like


zeros_like, ones_like, empty_like = _like(zeros), _like(ones), _like(empty)
rand_like, randn_like = _like(rand), _like(randn)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False):
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)
