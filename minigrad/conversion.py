"""Data as arrays, as PyTorch reads it: what ``Tensor(...)``, ``mg.tensor`` (and
``new_tensor``), the filled tensors (``zeros``, ``new_full``, ...) and the legacy
constructors (``mg.FloatTensor(...)``, ``x.new(...)``) make of their arguments. Each gives
the backend array of the new tensor; the callers wrap it."""
import builtins
import warnings

import numpy as np

from . import backend, dtypes
from .arguments import _is_array, _new_size
from .autograd.function import read_on_host
from .autograd.graph import TensorBase

# PyTorch's legacy type names (mg.FloatTensor, 'torch.cuda.LongTensor') and their dtypes
LEGACY_DTYPES = {"FloatTensor": dtypes.float32, "DoubleTensor": dtypes.float64,
                 "HalfTensor": dtypes.float16, "LongTensor": dtypes.int64,
                 "IntTensor": dtypes.int32, "ShortTensor": dtypes.int16,
                 "CharTensor": dtypes.int8, "ByteTensor": dtypes.uint8,
                 "BoolTensor": dtypes.bool}


def as_array(data, dtype=None, device=None):
    """A backend array from a Tensor, array, scalar or nested list, with PyTorch's dtypes."""
    if isinstance(data, TensorBase):
        data = data.array
    dtype = dtypes.as_dtype(dtype)
    if _is_array(data):
        arr = data if dtype is None or data.dtype == dtype else data.astype(dtype)
    else:
        try:
            arr = np.asarray(data, dtype=dtype)
        except OverflowError:  # a number beyond an integer dtype: PyTorch's checked cast
            arr = _checked_integers(np.asarray(data), dtype)
        except ValueError:
            _check_ragged(data)
            raise
        if dtype is None and arr.dtype.kind in "fc" and arr.dtype.itemsize >= 8 and \
                not isinstance(data, (np.ndarray, np.generic)):  # Python floats -> float32,
            arr = arr.astype(_python_number_dtype(arr.dtype))    # complex -> complex64
    if arr.dtype.kind in "OUSV" or arr.dtype.itemsize > 8 and arr.dtype.kind == "f" or \
            arr.dtype.itemsize > 16:  # (longdouble: no PyTorch dtype)
        raise TypeError(f"cannot make a tensor from {type(data).__name__} of dtype {arr.dtype}")
    if not arr.dtype.isnative:
        raise ValueError(f"cannot make a tensor from an array of byte order {arr.dtype.str} "
                         "(not the machine's): convert it with .astype(its dtype's "
                         "newbyteorder('='))")
    if arr.dtype == np.uint64 and dtype is None and not _is_array(data) and \
            not isinstance(data, np.generic):  # Python ints beyond int64, as PyTorch refuses
        raise ValueError(f"tensor: a Python int beyond int64's range ({np.iinfo(np.int64).max})"
                         " cannot be converted to a tensor (Overflow when unpacking long long)")
    if device is not None:
        arr = backend.to_device(arr, device)
    return arr


def _python_number_dtype(read):
    """The dtype of Python floats (``read`` float64) or complex numbers (complex128), as
    PyTorch gives them: the default dtype, or the complex dtype of its size."""
    default = dtypes.get_default_dtype()
    if read.kind == "f":
        return default
    return np.dtype(np.complex128 if default == np.float64 else np.complex64)


def _check_ragged(data, dim=0):
    """Raise PyTorch's error where the nested lists ``data`` are ragged: a sequence at
    ``dim`` (or deeper) whose length differs from its first sibling's (ValueError), or
    numbers beside sequences (TypeError)."""
    if not isinstance(data, (list, tuple)) or not data:
        return
    first = data[0]
    length = len(first) if isinstance(first, (list, tuple)) else None
    for item in data[1:]:
        found = len(item) if isinstance(item, (list, tuple)) else None
        if (found is None) != (length is None):
            raise TypeError(f"tensor: the nested lists mix numbers and sequences at dim "
                            f"{dim + 1}")
        if found != length:
            raise ValueError(f"tensor: expected sequence of length {length} at dim {dim + 1} "
                             f"(got {found})")
    for item in data:
        _check_ragged(item, dim + 1)


def _checked_integers(wide, dtype):
    """``wide`` (the numbers as NumPy reads them) cast to the integer ``dtype`` as PyTorch
    casts a tensor's data: integers within the dtype's range, or negative ones whose size
    fits an unsigned dtype (-1 is 255 in uint8), wrap around; anything else raises."""
    if wide.dtype.kind in "iu":
        low, high = _checked_range(dtype)
        bad = wide[(wide < low) | (wide > high)]
        if not bad.size:
            return wide.astype(dtype)
    else:  # floats (or numbers beyond 64 bits) out of the dtype's range
        info = np.iinfo(dtype)
        bad = np.array([v for v in wide.reshape(-1).tolist() if not info.min <= v <= info.max])
    raise RuntimeError(f"tensor: value {bad.reshape(-1)[0]} cannot be converted to {dtype} "
                       "without overflow")


def _checked_range(dtype):
    """The integers PyTorch's checked cast takes into the integer ``dtype``: its range, and
    for an unsigned dtype the negatives of its range too (they wrap around)."""
    info = np.iinfo(dtype)
    return (-info.max if info.min == 0 else info.min), info.max


def _tensor_args(data, sizes, dtype, device, requires_grad):
    """``Tensor(...)``'s (data, dtype, device, requires_grad): ints alone are a size (the
    default dtype's zeros); other positional arguments after data are dtype, device and
    requires_grad."""
    if data is None or (type(data) is builtins.int and builtins.all(
            type(n) is builtins.int for n in sizes)):
        shape = () if data is None else (data,) + sizes
        if builtins.any(n < 0 for n in shape):
            raise RuntimeError(f"Trying to create tensor with negative dimension "
                               f"{builtins.min(shape)}: {list(shape)}")
        dtype = dtypes.as_dtype(dtype) or dtypes.get_default_dtype()
        return np.zeros(shape or (0,), dtype), dtype, device, requires_grad
    if len(sizes) > 3:
        raise TypeError(f"Tensor() takes at most 4 positional arguments ({len(sizes) + 1} given)")
    given = sizes + (dtype, device, requires_grad)[len(sizes):]
    return (data,) + given


# --- mg.tensor's data: lists that hold tensors, NumPy's dtypes and PyTorch's ------------------

def tensor_data(data, dtype=None):
    """The array of ``mg.tensor(data, dtype)``: a copy of ``data`` (Python floats become
    float32, ints int64; NumPy scalars and arrays, and tensors, inside a list keep their
    dtype, as in PyTorch)."""
    if data is None:
        raise RuntimeError("tensor: Could not infer dtype of NoneType (data is None)")
    if isinstance(data, (list, tuple)) and _holds_tensor(data):
        data, found = _numbers_of_tensors(data, dtypes.as_dtype(dtype))
        dtype = found if dtype is None else dtype
    if dtype is None and isinstance(data, (list, tuple)):
        dtype = _list_dtype(data)
    try:
        arr = as_array(data, dtype)
    except ValueError:
        _check_finite_for("tensor", data, dtype)
        raise
    if arr is data or (isinstance(data, TensorBase) and arr is data.array):
        arr = arr.copy()
    return arr


def _holds_tensor(data):
    """Whether a Tensor is anywhere in the nested list ``data``."""
    return builtins.any(isinstance(i, TensorBase) or isinstance(i, (list, tuple)) and
                        _holds_tensor(i) for i in data)


def _numbers_of_tensors(data, dtype):
    """(``data`` with each Tensor in it as its one value, the dtype PyTorch infers).

    As PyTorch, a Tensor inside a list is a number: one of one element, whatever its dims
    ([tensor(1.), tensor([2.])] has shape (2,)), keeping its dtype; any other is a
    ValueError, and so is a floating one where ``dtype`` is bool or an integer (a
    TypeError). The dtype promotes those of every item: a Tensor's or an array's own,
    bool, int64 for an int, the default dtype for a float."""
    found = []
    warned = [False]

    def number(item):
        if isinstance(item, (list, tuple)):
            return [number(i) for i in item]
        if isinstance(item, TensorBase):
            read_on_host("mg.tensor() of a list of tensors")
            if item.numel() != 1:
                raise ValueError(f"tensor: only one element tensors can be converted to Python "
                                 f"scalars, got a tensor of shape {tuple(item.shape)} in the list")
            if dtype is not None and dtype.kind in "biu" and item.dtype.kind in "fc":
                raise TypeError(f"tensor: only integer tensors of a single element can be "
                                f"converted to an index (a {item.dtype} tensor in a list made "
                                f"into {dtype})")
            if item.requires_grad and not warned[0]:
                warned[0] = True
                warnings.warn("Converting a tensor with requires_grad=True to a scalar may "
                              "lead to unexpected behavior.\nConsider using tensor.detach() "
                              "first.", UserWarning, stacklevel=4)
            item = backend.to_host(item.array).reshape(())[()]  # (a NumPy scalar: its dtype)
        found.append(_item_dtype(item))
        return item
    data = number(data)
    dtype = found[0] if found else None
    for d in found[1:]:
        dtype = dtypes.promote_types(dtype, d)
    return data, dtype


def _item_dtype(item):
    """The dtype PyTorch infers for one item of a list."""
    if isinstance(item, (np.ndarray, np.generic)):
        return item.dtype
    if isinstance(item, builtins.bool):
        return np.dtype(np.bool_)
    if isinstance(item, builtins.int):
        return np.dtype(np.int64)
    if isinstance(item, builtins.complex):
        return np.dtype(np.complex64 if dtypes.get_default_dtype() == np.float32
                        else np.complex128)
    return np.dtype(dtypes.get_default_dtype())


def _list_dtype(data):
    """The dtype PyTorch gives a tensor made from the list ``data`` where NumPy's would
    differ: float64 when a float64 NumPy scalar, array or tensor is in it (NumPy's float64
    from Python floats alone becomes the default dtype); None to let NumPy decide."""
    found = [False]

    def walk(item):
        if isinstance(item, (list, tuple)):
            for i in item:
                if type(i) is not builtins.float and type(i) is not builtins.int:
                    walk(i)
        elif isinstance(item, (np.ndarray, np.generic, TensorBase)) and item.dtype == np.float64:
            found[0] = True
    walk(data)
    return np.float64 if found[0] else None


def _check_finite_for(op, data, dtype):
    """PyTorch's RuntimeError for a NaN or an infinity made into an integer tensor."""
    dtype = dtypes.as_dtype(dtype)
    if dtype is None or dtype.kind not in "iu":
        return
    try:
        values = np.asarray(data.array if isinstance(data, TensorBase) else data, dtype=np.float64)
    except (ValueError, TypeError):
        return
    if not np.isfinite(values).all():
        raise RuntimeError(f"{op}: value cannot be converted to type {dtype} without overflow "
                           f"(a NaN or an infinity in data of shape {values.shape})")


# --- filled tensors, made on their device -----------------------------------------------------

def _module(device):
    """The array module of ``device`` (None: the CPU): filled tensors and ranges are built
    there directly, with no copy from the host."""
    return backend.array_module(backend.CPU if device is None else device)


def filled(kind, size, dtype, device, *fill):
    """The array of a new tensor of ``size`` (``f(2, 3)`` or ``f((2, 3))``) and ``dtype``
    on ``device``: "zeros", "ones", "empty", or "full" of the value ``fill``."""
    return getattr(_module(device), kind)(_new_size(kind, size), *fill, dtype=dtype)


# --- legacy constructors: mg.FloatTensor(...), x.new(...), x.type('torch.LongTensor') ---------

def legacy_array(dtype, device, args):
    """The array of a legacy constructor's tensor of ``dtype`` on ``device`` (also
    ``Tensor.new``'s), from ``args`` other than one tensor (see ``legacy_alias``):
    ``T()`` empty, ``T(2, 3)`` a size (zeros, where PyTorch leaves the memory
    uninitialised), ``T([[1, 2]])`` data, converted to the dtype."""
    if len(args) == 1 and not _legacy_size(args[0]):
        return _legacy_data(dtype, args[0])
    for i, n in enumerate(args):
        if not _legacy_size(n):
            raise TypeError(f"new(): argument 'size' failed to unpack the object at pos "
                            f"{i + 1} with error \"type must be tuple of ints,but got "
                            f"{type(n).__name__}\"")
    return filled("zeros", (_new_size("new", args or (0,)),), dtypes.as_dtype(dtype), device)


def legacy_alias(dtype, t):
    """A legacy constructor given one tensor ``t``: the same memory (an alias, as
    PyTorch's), which must have ``dtype`` already."""
    if t.dtype != dtype:
        raise TypeError(f"expected TensorOptions(dtype={dtypes.torch_name(dtype)}) "
                        f"(got TensorOptions(dtype={dtypes.torch_name(t.dtype)}))")
    return t.view(t.shape)


def _legacy_size(n):
    return isinstance(n, (builtins.int, np.integer)) and not isinstance(n, builtins.bool)


def _legacy_data(dtype, data):
    if not isinstance(data, (list, tuple, np.ndarray)):
        raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
    _check_no_strings(data, dtype)
    return tensor_data(data, dtype)


def _check_no_strings(data, dtype):
    """PyTorch's errors for a string among the numbers: found while it reads the shape
    (along the first items) a ValueError, found later a TypeError."""
    first = data
    while isinstance(first, (list, tuple)) and len(first):
        first = first[0]
        if isinstance(first, str):
            raise ValueError("too many dimensions 'str'")

    def strings(items):
        return builtins.any(isinstance(i, str) or isinstance(i, (list, tuple)) and strings(i)
                            for i in items)
    if isinstance(data, (list, tuple)) and strings(data):
        if dtype.kind == "f":
            raise TypeError("must be real number, not str")
        raise TypeError("'str' object cannot be interpreted as an integer")


def _legacy_type_name(name):
    """(device, dtype) of a legacy type's name: 'torch.LongTensor', 'minigrad.cuda.LongTensor'."""
    parts = name.split(".")
    dtype = LEGACY_DTYPES.get(parts[-1])
    if dtype is None or parts[0] not in ("torch", "minigrad") or \
            parts[1:-1] not in ([], ["cuda"]):
        raise ValueError(f"invalid type: {name!r}")
    return ("cuda" if len(parts) == 3 else "cpu"), dtype
