"""Making tensors: from data, filled, ranges, and random.

Filled tensors and ranges are built directly by the device's array module. Random draws
come from the one host generator in ``backend`` and are then copied to the device, on
purpose: a seed gives the same numbers on every device.
"""
import builtins
import math

import numpy as np

from . import backend, dtypes
from .arguments import _new_size
from .autograd.grad_mode import STATE
from .conversion import (LEGACY_DTYPES, _module, as_array, filled, legacy_alias, legacy_array,
                         tensor_data)
from .operands import _fitting, _py_scalar
from .random import Normal, NormalOfMean, NormalOfStd, _batched, _draw_shape, host_generator
from .tensor import Tensor


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (Python floats become float32, ints int64;
    NumPy scalars and arrays, and tensors, inside a list keep their dtype, as in PyTorch)."""
    return Tensor(tensor_data(data, dtype), device=device, requires_grad=requires_grad)


def from_numpy(array):
    """A tensor that shares ``array``'s memory (no copy; the dtype is kept, so float64 stays
    float64), as ``torch.from_numpy``: a change through either is seen by the other."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray (got {type(array).__name__})")
    return Tensor._make(array)


def _size(op, shape, size):
    """The size given as ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``."""
    if size is None:
        return shape
    if shape:
        raise TypeError(f"{op}() got multiple values for argument 'size' ({shape} and {size})")
    return (size,)


def _filled(fill, size, dtype, device, requires_grad):
    arr = filled(fill, size, dtypes.as_dtype(dtype) or dtypes.get_default_dtype(), device)
    return Tensor(arr, device=device, requires_grad=requires_grad)


def zeros(*shape, size=None, dtype=None, device=None, requires_grad=False):
    return _filled("zeros", _size("zeros", shape, size), dtype, device, requires_grad)


def ones(*shape, size=None, dtype=None, device=None, requires_grad=False):
    return _filled("ones", _size("ones", shape, size), dtype, device, requires_grad)


def empty(*shape, size=None, dtype=None, device=None, requires_grad=False):
    return _filled("empty", _size("empty", shape, size), dtype, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """Filled with ``fill_value``; the dtype follows it (bool, int64 or float32) unless given.
    The fill value is read as a number, as in PyTorch: a NumPy scalar or a 0-d tensor of any
    integer dtype gives int64, of any floating dtype the default dtype."""
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if dtype is None:
        if isinstance(fill_value, builtins.bool):
            dtype = dtypes.bool
        elif isinstance(fill_value, (builtins.int, np.integer)):
            dtype = dtypes.int64
        elif isinstance(fill_value, (complex, np.complexfloating)):
            dtype = as_array(fill_value).dtype
        else:  # floats and NumPy's bool_ (which PyTorch reads as a float)
            dtype = dtypes.get_default_dtype()
    # PyTorch's checked conversion: NaN or 300 into uint8, 70000 into float16 are refused
    dtype = dtypes.as_dtype(dtype)
    fill_value = _fitting(_py_scalar(fill_value), dtype, "full")
    arr = filled("full", (size,), dtype, device, fill_value)
    return Tensor(arr, device=device, requires_grad=requires_grad)


def arange(start=None, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """Values from start to end (exclusive) by step: int64 for integer arguments, else float32.
    With an integer dtype, start, end and step are first truncated to integers, as PyTorch
    does (int64 counts the values after truncating, other integer dtypes before)."""
    if start is None and end is None:
        raise TypeError("arange() missing required argument 'end'")
    if end is None:
        start, end = 0, start
    elif start is None:
        start = 0
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    integral = all(isinstance(v, (builtins.int, np.integer)) for v in (start, end, step))
    if dtype is None:
        dtype = dtypes.int64 if integral else dtypes.get_default_dtype()
    dtype = dtypes.as_dtype(dtype)
    n = _range_length(start, end, step)
    xp = _module(device)
    if dtype.kind in "iu" and not integral:
        first, stride = builtins.int(start), builtins.int(step)
        if dtype == np.int64:
            if stride == 0:
                raise ValueError(f"arange: step must be nonzero (step {step} is 0 as {dtype})")
            sign = 1 if stride > 0 else -1
            n = builtins.max((builtins.int(end) - first + stride - sign) // stride, 0)
        arr = xp.arange(n, dtype=np.int64) * stride + first
    elif integral and dtype.kind != "f":
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
    """``steps`` values evenly spaced from start to end (both included), by PyTorch's
    formula: step = (end - start) / (steps - 1), the first half start + i * step and the
    second end - (steps - 1 - i) * step, each one multiply-add rounded once (as the fused
    multiply-add of PyTorch's CPU kernel), in the dtype (for integer dtypes: from the
    endpoints truncated to integers, in float64, and truncated)."""
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
    xp = _module(device)
    i = xp.arange(steps, dtype=np.float64)
    if dtype.kind in "iu" or dtype.kind == "b":
        start, end = float(builtins.int(start)), float(builtins.int(end))
    if steps == 1:
        values = xp.full(1, start, dtype=np.float64)
    elif dtype == np.float64 or dtype.kind in "iub":
        step = (float(end) - float(start)) / (steps - 1)
        step, first, last = (xp.asarray(v, dtype=np.float64) for v in (step, start, end))
        values = xp.where(i < steps // 2, backend.fma(step, i, first),
                          backend.fma(-step, steps - 1 - i, last))
    elif dtype == np.float16:  # each operation rounded to float16, as PyTorch's Half
        half = np.float16
        first, last = half(start), half(end)
        step = (last - first) / half(steps - 1)
        values = xp.where(i < steps // 2, first + step * i.astype(half),
                          last - step * (steps - 1 - i).astype(half))
    else:  # float32: the step in float32, each product exact in float64
        first, last = np.float32(start), np.float32(end)
        step = float((last - first) / np.float32(steps - 1))
        values = xp.where(i < steps // 2, float(first) + step * i,
                          float(last) - step * (steps - 1 - i))
    return Tensor(values.astype(dtype), device=device, requires_grad=requires_grad)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False):
    """``steps`` values from base^start to base^end, their exponents evenly spaced: base to
    the power of ``linspace``'s values (in float64), then cast."""
    exponents = linspace(start, end, steps, dtype=dtypes.float64, device=device).array
    dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
    return Tensor((float(base) ** exponents).astype(dtype), device=device,
                  requires_grad=requires_grad)


def scalar_tensor(s, dtype=None, device=None, requires_grad=False):
    """A 0-d tensor of the number ``s``, of the default dtype unless ``dtype`` says."""
    dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
    return tensor(s, dtype=dtype, device=device, requires_grad=requires_grad)


def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """``obj`` as a tensor, sharing its memory where it can (``as_tensor``), always a copy
    with ``copy=True``; ``copy=False`` refuses where a copy is needed."""
    out = as_tensor(obj, dtype=dtype, device=device)
    shares = out is obj or (isinstance(obj, np.ndarray) and isinstance(out.array, np.ndarray)
                            and np.shares_memory(out.array, obj))
    if copy and (shares or out is obj):
        out = out.clone()
    elif copy is False and not shares and not isinstance(obj, Tensor):
        raise ValueError(f"asarray: a copy is needed for a {type(obj).__name__} (copy=False)")
    return out.requires_grad_(requires_grad) if requires_grad else out


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"eye: {name} must be greater or equal to 0, got {v}")
    arr = _module(device).eye(n, m, dtype=dtypes.as_dtype(dtype) or dtypes.get_default_dtype())
    return Tensor(arr, device=device, requires_grad=requires_grad)


# Random draws come from the one host generator and are copied to the device, on purpose:
# a seed gives the same numbers on the CPU and on the GPU.

def _floating_draw(op, dtype):
    """The dtype of a draw of ``op`` (rand, randn): PyTorch's NotImplementedError for any
    but a floating dtype."""
    dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
    if dtype.kind not in "fc":
        raise NotImplementedError(f"{op}: not implemented for '{dtypes.torch_name(dtype)}' "
                                  f"(dtype {dtype}; draws need a floating dtype)")
    return dtype


def rand(*shape, size=None, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform on [0, 1). Drawn on the host by minigrad's one generator and copied to
    ``device``, so a seed gives the same numbers on the CPU and the GPU."""
    dtype = _floating_draw("rand", dtype)
    shape, levels = _draw_shape("rand", _new_size("rand", _size("rand", shape, size)))
    arr = host_generator(generator, True).random(shape, dtype=_draw_dtype(dtype)).astype(dtype)
    return _batched(Tensor(arr, device=device, requires_grad=requires_grad), levels)


def randn(*shape, size=None, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal, drawn on the host as ``rand``'s."""
    dtype = _floating_draw("randn", dtype)
    shape, levels = _draw_shape("randn", _new_size("randn", _size("randn", shape, size)))
    arr = host_generator(generator, True).standard_normal(shape, dtype=_draw_dtype(dtype))
    return _batched(Tensor(arr.astype(dtype), device=device, requires_grad=requires_grad),
                    levels)


def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Normal draws of mean ``mean`` and standard deviation ``std``, drawn on the host as
    ``randn``'s. A tensor mean or std (or both): the shape the two broadcast to, in that
    tensor's dtype and on its device; numbers alone: ``size`` is needed. As in PyTorch, a
    mean or std that requires grad makes a result that requires grad, whose gradient to
    them is zero (``random.Normal``)."""
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal(): with a number mean and std, give size as well")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        out = randn(size, generator=generator, dtype=dtype, device=device) * std + mean
        return out.requires_grad_(requires_grad)
    if size is not None:
        raise TypeError("normal(): size is given only with a number mean and std")
    if not isinstance(std, Tensor) and std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    like = tensors[0]
    if not like.is_floating_point():
        raise NotImplementedError(f"normal: mean and std must be floating point, got "
                                  f"{like.dtype}")
    try:
        shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    except ValueError:
        raise RuntimeError(f"normal: the shapes of mean {tuple(mean.shape)} and std "
                           f"{tuple(std.shape)} do not broadcast") from None
    draw = randn(*shape, generator=generator, dtype=like.dtype, device=like.device)
    sample = draw * _detached(std) + _detached(mean)
    if any(t.requires_grad for t in tensors) and STATE.grad_enabled:
        node = (Normal if len(tensors) == 2 else
                NormalOfMean if isinstance(mean, Tensor) else NormalOfStd)
        return node.apply(sample, mean, std)
    return sample.requires_grad_(requires_grad)


def _detached(x):
    return x.detach() if isinstance(x, Tensor) else x


def randint(low=None, high=None, size=(), *, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Integers uniform on [low, high) (``randint(high, size)`` also works, as in PyTorch),
    drawn on the host as ``rand``'s."""
    if isinstance(high, (tuple, list)):
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    elif low is None:
        low = 0
    if high is None:
        raise TypeError("randint() missing required argument 'high'")
    return _randint("randint", low, high, size, dtypes.as_dtype(dtype) or dtypes.int64,
                    device, requires_grad, generator)


def randint_like(t, low=0, high=None, *, dtype=None, device=None, requires_grad=False):
    """``randint`` with the shape (and by default dtype, device) of ``t``:
    ``randint_like(t, high)`` or ``randint_like(t, low, high)``."""
    if high is None:
        low, high = 0, low
    return _randint("randint_like", low, high, t.shape, dtypes.as_dtype(dtype) or t.dtype,
                    device or t.device, requires_grad)


def _randint(op, low, high, size, dtype, device, requires_grad, generator=None):
    low, high = (v.item() if isinstance(v, Tensor) else v for v in (low, high))
    if not low < high:
        raise RuntimeError(f"{op}: random_ expects 'from' to be less than 'to', but got "
                           f"from={low} >= to={high}")
    if dtype.kind in "iu":  # every value must be one of the dtype's, as PyTorch checks
        info = np.iinfo(dtype)
        for name, v in (("from (low)", low), ("to - 1 (high - 1)", high - 1)):
            if not info.min <= v <= info.max:
                raise RuntimeError(f"{op}: {name} = {v} is out of bounds for {dtype} "
                                   f"([{info.min}, {info.max}])")
    shape, levels = _draw_shape(op, _new_size(op, (size,)))
    arr = host_generator(generator, True).integers(low, high, shape, dtype=np.int64)
    return _batched(Tensor(arr.astype(dtype), device=device, requires_grad=requires_grad),
                    levels)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """The integers 0, ..., n - 1 in a random order (int64 unless ``dtype``), drawn on the
    host as ``rand``'s. Inside vmap with randomness "different", each element its own
    permutation; "same": one for all."""
    if isinstance(n, Tensor):
        n = n.item()
    if type(n) is not builtins.int and not isinstance(n, np.integer):
        raise TypeError(f"randperm(): argument 'n' must be int, not {type(n).__name__}")
    (n,) = _new_size("randperm", (n,))
    dtype = dtypes.as_dtype(dtype) or dtypes.int64
    if dtype.kind == "b":
        raise NotImplementedError("randperm: not implemented for bool (dtype=bool)")
    # the largest value, n - 1, must be exact in dtype
    largest = np.iinfo(dtype).max if dtype.kind in "iu" else 2 ** (np.finfo(dtype).nmant + 1)
    if n - 1 > largest:
        raise RuntimeError(f"randperm: n = {n} is too large for dtype {dtype} (its values "
                           f"reach n - 1, and {dtype} holds integers up to {largest} exactly)")
    shape, levels = _draw_shape("randperm", (n,))
    rng = host_generator(generator, True)
    if levels:  # one permutation per element: each row of the draw shuffled on its own
        arr = rng.permuted(np.broadcast_to(np.arange(n), shape), axis=-1)
    else:
        arr = rng.permutation(n)
    return _batched(Tensor(arr.astype(dtype), device=device, requires_grad=requires_grad),
                    levels)


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


# --- legacy constructors: mg.FloatTensor(...), mg.LongTensor(...), ... -------------------------
class _LegacyTensorType(type):
    """The type of ``mg.FloatTensor`` and its kin, PyTorch's legacy constructors. Each is a
    dtype on the CPU, not a subclass of Tensor: ``isinstance(t, mg.FloatTensor)`` asks
    whether ``t`` is a float32 tensor on the CPU, as in PyTorch (``isinstance(t, mg.Tensor)``
    is untouched by it)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.array.dtype == cls.dtype and not obj.is_cuda

    def __repr__(cls):
        return f"<class 'minigrad.{cls.__name__}'>"

    def __call__(cls, *args, device=None):
        """``T()`` (empty), ``T(2, 3)`` (a size: zeros, where PyTorch leaves the memory
        uninitialised), ``T([[1, 2]])`` (data, converted to the dtype), ``T(tensor)`` (the
        same memory, which must have the dtype already)."""
        if device is not None and backend.Device(device).type != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                               f"{backend.Device(device).type} was passed")
        if len(args) == 1 and isinstance(args[0], Tensor):
            return legacy_alias(cls.dtype, args[0])
        return Tensor(legacy_array(cls.dtype, None, args))


def _legacy_type(name):
    return _LegacyTensorType(name, (), {"dtype": LEGACY_DTYPES[name], "is_cuda": False,
                                        "__module__": "minigrad"})


FloatTensor = _legacy_type("FloatTensor")
DoubleTensor = _legacy_type("DoubleTensor")
HalfTensor = _legacy_type("HalfTensor")
LongTensor = _legacy_type("LongTensor")
IntTensor = _legacy_type("IntTensor")
ShortTensor = _legacy_type("ShortTensor")
CharTensor = _legacy_type("CharTensor")
ByteTensor = _legacy_type("ByteTensor")
BoolTensor = _legacy_type("BoolTensor")


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing its memory where it can: a tensor of that dtype and
    device is returned itself, a NumPy array of that dtype on the CPU is shared (as
    ``from_numpy``); anything else is copied (as ``tensor``)."""
    dtype = dtypes.as_dtype(dtype)
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype)
    if isinstance(data, np.ndarray) and (dtype is None or dtype == data.dtype) and \
            (device is None or backend.Device(device).type == "cpu"):
        return from_numpy(data)
    return tensor(data, dtype=dtype, device=device)


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (row, column) indices of the lower triangle of a ``row`` x ``col`` matrix (below
    diagonal ``offset``), as a (2, N) tensor in row-major order."""
    return _triangle_indices(np.tril_indices(row, offset, col), dtype, device)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    """As ``tril_indices``, of the upper triangle (above diagonal ``offset``)."""
    return _triangle_indices(np.triu_indices(row, offset, col), dtype, device)


def _triangle_indices(rows_cols, dtype, device):
    dtype = dtypes.as_dtype(dtype) or dtypes.int64
    if dtype.kind not in "iu":
        raise RuntimeError(f"\"tril_indices\" not implemented for "
                           f"'{dtypes.torch_name(dtype)}'")
    return Tensor(np.stack(rows_cols).astype(dtype).reshape(2, -1), device=device)
