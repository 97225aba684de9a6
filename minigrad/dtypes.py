"""dtypes: NumPy dtypes under PyTorch's names, the default float dtype, and type promotion."""
import builtins

import numpy as np

float16 = half = np.dtype(np.float16)
float32 = float = np.dtype(np.float32)
float64 = double = np.dtype(np.float64)
uint8 = np.dtype(np.uint8)
int8 = np.dtype(np.int8)
int16 = short = np.dtype(np.int16)
int32 = int = np.dtype(np.int32)
int64 = long = np.dtype(np.int64)
bool = np.dtype(np.bool_)  # noqa: A001  (PyTorch's name, as mg.bool)
uint16, uint32, uint64 = np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64)
complex64 = cfloat = np.dtype(np.complex64)
complex128 = cdouble = np.dtype(np.complex128)

_default_float = float32


class Size(tuple):
    """A shape, as ``torch.Size``: a tuple of ints with ``numel()``. (A tensor's ``.shape``
    is a plain tuple, equal to it.)"""

    def numel(self):
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self):
        return f"minigrad.Size({list(self)})"


class memory_format:
    """PyTorch's memory formats (``mg.contiguous_format``, ``mg.preserve_format``,
    ``mg.channels_last``), accepted where PyTorch takes one: minigrad lays tensors out
    row-major or as their input (``clone`` keeps the layout)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"minigrad.{self.name}"


contiguous_format, preserve_format = memory_format("contiguous_format"), \
    memory_format("preserve_format")
channels_last, channels_last_3d = memory_format("channels_last"), \
    memory_format("channels_last_3d")


def get_default_dtype():
    return _default_float


def set_default_dtype(dtype):
    """Set the dtype of tensors made from Python floats (float32 unless changed)."""
    global _default_float
    dtype = as_dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"the default dtype must be a floating point dtype, got {dtype}")
    _default_float = dtype


def as_dtype(dtype):
    """A NumPy dtype from a dtype, a NumPy type or a name such as "float32"."""
    if dtype is None:
        return None
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"not a dtype: {dtype!r}") from None


def is_floating(dtype):
    return dtype.kind == "f"


_CATEGORY = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def promote_types(dx, dy):
    """The dtype both operands are cast to: the higher category (bool < integer < floating
    < complex) decides, and within one category the wider dtype wins (a complex one wide
    enough for a float one's precision)."""
    cx, cy = _CATEGORY[dx.kind], _CATEGORY[dy.kind]
    if cx != cy and {dx.kind, dy.kind} != {"f", "c"}:  # (float64 with complex64: complex128)
        return dx if cx > cy else dy
    return np.promote_types(dx, dy)


def promote(x, y):
    """The result dtype of a binary op on two tensors, by PyTorch's rules: as
    ``promote_types``, except that within one category a 0-d tensor does not widen a
    dimensioned one (float32 + 0-d float64 stays float32) and of a lower one does not
    change it, and a 0-d complex one makes a dimensioned float one the complex dtype of its
    precision."""
    dx, dy = x.array.dtype, y.array.dtype
    if (x.array.ndim == 0) != (y.array.ndim == 0):
        dim, zero = (dy, dx) if x.array.ndim == 0 else (dx, dy)
        if _CATEGORY[dim.kind] >= _CATEGORY[zero.kind]:
            return dim
        if dim.kind == "f" and zero.kind == "c":  # (the complex dtype of dim's precision)
            return np.dtype(np.complex128 if dim.itemsize == 8 else np.complex64)
    return promote_types(dx, dy)


_TORCH_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char",
                "int16": "Short", "int32": "Int", "int64": "Long", "uint8": "Byte",
                "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def torch_name(dtype):
    """PyTorch's name of a dtype in its messages: Float, Long, ..."""
    return _TORCH_NAMES.get(np.dtype(dtype).name, str(dtype))


def result_type(a, b):
    """The dtype of an elementwise op on ``a`` and ``b`` (tensors or numbers), by PyTorch's
    rules: a dimensioned tensor over a 0-d one over a number, within each category."""
    first, second = _kept_dims(a), _kept_dims(b)
    return (first + second).dtype if hasattr(first, "shape") or hasattr(second, "shape") \
        else _number_dtype(a if _CATEGORY_OF_NUMBER[type(b)] <= _CATEGORY_OF_NUMBER[type(a)]
                           else b)


_CATEGORY_OF_NUMBER = {builtins.bool: 0, builtins.int: 1, builtins.float: 2, builtins.complex: 3}


def _number_dtype(n):
    return {builtins.bool: bool, builtins.int: int64, builtins.float: get_default_dtype(),
            builtins.complex: np.dtype(np.complex128 if get_default_dtype() == float64
                                       else np.complex64)}[type(n)]


def _kept_dims(t):
    """``t``, a tensor of no elements with its dims (0-d stays 0-d), or the number."""
    if not hasattr(t, "shape"):
        return t
    return t if t.ndim == 0 else t.reshape(-1)[:0]


def can_cast(src, dst):
    """PyTorch's rule for writing a result of dtype ``src`` into a tensor of dtype ``dst``
    in place: no complex into real, no floating into integral, nothing but bool into bool."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src.kind == "c" and dst.kind != "c":
        return False
    if src.kind in "fc" and dst.kind in "biu":
        return False
    return not (dst.kind == "b" and src.kind != "b")


class finfo:
    """The limits of a floating dtype (the default one if none), as ``torch.finfo``: bits,
    eps, max, min, tiny (= smallest_normal) and resolution, as Python floats."""

    def __init__(self, type=None):  # noqa: A002  (PyTorch's argument name)
        dtype = get_default_dtype() if type is None else as_dtype(type)
        if dtype.kind not in "fc":
            raise TypeError(f"torch.finfo() requires a floating point input type. Use "
                            f"torch.iinfo to handle '{type}'")
        info = np.finfo(dtype)
        self.bits, self.dtype = info.bits, info.dtype.name
        self.eps, self.max, self.min = builtins.float(info.eps), builtins.float(info.max), \
            builtins.float(info.min)
        self.tiny = self.smallest_normal = builtins.float(info.tiny)
        self.resolution = 10.0 ** -builtins.int(info.precision)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.tiny:g}, tiny={self.tiny:g}, "
                f"dtype={self.dtype})")


class iinfo:
    """The limits of an integer dtype, as ``torch.iinfo``: bits, max, min."""

    def __init__(self, type):  # noqa: A002
        dtype = as_dtype(type)
        if dtype.kind not in "iu":
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo "
                            f"to handle '{type}'")
        info = np.iinfo(dtype)
        self.bits, self.dtype = info.bits, dtype.name
        self.min, self.max = builtins.int(info.min), builtins.int(info.max)

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def is_complex(t):
    return t.dtype.kind == "c"
