"""Making tensors: from data, filled, ranges, and random (all random draws come from the one
host generator in ``backend``, so a seed gives the same numbers on every device)."""
import builtins

import numpy as np

from . import backend, dtypes
from .tensor import Tensor, as_array, _shape_arg


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (Python floats become float32, ints int64)."""
    arr = as_array(data, dtype)
    if arr is data or (isinstance(data, Tensor) and arr is data.data):
        arr = arr.copy()
    return Tensor(arr, device=device, requires_grad=requires_grad)


def _filled(fill, size, dtype, device, requires_grad):
    arr = fill(_shape_arg(size), dtypes.as_dtype(dtype) or dtypes.get_default_dtype())
    return Tensor(arr, device=device, requires_grad=requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _filled(np.zeros, size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _filled(np.ones, size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _filled(np.empty, size, dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """Filled with ``fill_value``; the dtype follows it (bool, int64 or float32) unless given."""
    if dtype is None:
        dtype = as_array(fill_value).dtype
    arr = np.full(_shape_arg((size,)), fill_value, dtype=dtypes.as_dtype(dtype))
    return Tensor(arr, device=device, requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from start to end (exclusive) by step: int64 for integer arguments, else float32."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        integral = all(isinstance(v, (builtins.int, np.integer)) for v in (start, end, step))
        dtype = dtypes.int64 if integral else dtypes.get_default_dtype()
    # computed in float64 and then cast, as PyTorch does, so float32 ranges match its values
    arr = np.arange(start, end, step, dtype=np.float64 if dtypes.as_dtype(dtype).kind == "f"
                    else None).astype(dtype)
    return Tensor(arr, device=device, requires_grad=requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    arr = np.linspace(start, end, steps).astype(dtype or dtypes.get_default_dtype())
    return Tensor(arr, device=device, requires_grad=requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    arr = np.eye(n, m, dtype=dtypes.as_dtype(dtype) or dtypes.get_default_dtype())
    return Tensor(arr, device=device, requires_grad=requires_grad)


def rand(*size, dtype=None, device=None, requires_grad=False):
    """Uniform on [0, 1)."""
    dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
    arr = backend.generator().random(_shape_arg(size), dtype=_draw_dtype(dtype)).astype(dtype)
    return Tensor(arr, device=device, requires_grad=requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    """Standard normal."""
    dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
    arr = backend.generator().standard_normal(_shape_arg(size), dtype=_draw_dtype(dtype))
    return Tensor(arr.astype(dtype), device=device, requires_grad=requires_grad)


def randint(low, high=None, size=(), dtype=None, device=None):
    """Integers uniform on [low, high) (``randint(high, size)`` also works, as in PyTorch)."""
    if high is None or isinstance(high, (tuple, list)):
        low, high, size = 0, low, size if high is None else high
    arr = backend.generator().integers(low, high, _shape_arg((size,)), dtype=np.int64)
    return Tensor(arr.astype(dtypes.as_dtype(dtype) or dtypes.int64), device=device)


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
