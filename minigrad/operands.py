"""How an op reads its operands, as PyTorch does: numbers against a tensor's dtype (wrapped
or checked to fit), dtype promotion, the refusals of bool and integer operands, and the
methods that are mostly those rules (``//`` and ``%``, ``add`` with ``alpha``, ``div``
with a rounding mode, ``cat``'s and ``where``'s operands)."""
import builtins
import functools
import math

import numpy as np

from . import backend, dtypes
from .arguments import _broadcast_shape, _dim, _is_array
from .autograd.function import ShapeError, on_arrays
from .autograd.graph import TensorBase
from .conversion import _checked_range, as_array
from .ops import (Cat, FloorDivide, NonDiff, Remainder, RemainderOfNumber, RemainderScalar,
                  RoundedDiv, Where)

_PY_SCALARS = (builtins.int, builtins.float, builtins.bool)


def _py_scalar(v):
    return v.item() if isinstance(v, np.generic) else v


def as_tensor(value, like):
    """``value`` as a Tensor on the device of ``like`` (a Tensor); Tensors pass through."""
    if isinstance(value, TensorBase):
        return value
    return like._make(as_array(value, device=like.device))


def _operands(x, y, reflected=False):
    """(x, y) ready for a binary op: scalars stay Python scalars, dtypes promoted as PyTorch."""
    if isinstance(y, TensorBase) and y.array.dtype is x.array.dtype:  # the common case
        return (y, x) if reflected else (x, y)
    if type(y) in _PY_SCALARS or isinstance(y, np.generic):
        y = _py_scalar(y)
        kind = x.array.dtype.kind
        if isinstance(y, builtins.float) and kind in "biu":
            x = x.to(dtypes.get_default_dtype())
        elif type(y) is builtins.int and kind == "b":
            x = x.to(dtypes.int64)
        elif type(y) is builtins.int and kind in "iu":
            y = _wrapped(y, x.array.dtype)
    else:
        y = as_tensor(y, like=x)
        if y.array.dtype is not x.array.dtype:
            dt = dtypes.promote(x, y)
            x, y = x.to(dt), y.to(dt)
    return (y, x) if reflected else (x, y)


def _wrapped(n, dtype, op=None):
    """A Python int as a number of the integer ``dtype``: wrapped around as PyTorch's C cast
    does when out of its range (uint8: -2 is 254), where NumPy raises. With ``op`` (a bound
    or fill value, an exponent), PyTorch's checked conversion: values beyond the range raise
    (an unsigned type still takes -n for n within its range, wrapped). Anything but a Python
    int, or a dtype that is no integer type, is returned as it is."""
    if type(n) is not builtins.int or np.dtype(dtype).kind not in "iu":
        return n
    info = np.iinfo(dtype)
    if info.min <= n <= info.max or not -2 ** 63 <= n < 2 ** 64:
        return n  # (too large for any integer: NumPy's OverflowError, as PyTorch's)
    low, high = _checked_range(dtype)
    if op is not None and not low <= n <= high:
        raise RuntimeError(f"{op}: value {n} cannot be converted to {dtype} without overflow")
    return builtins.int(np.array(n, dtype=np.int64 if n < 2 ** 63 else np.uint64).astype(dtype))


def _checked_number(n, dtype, op):
    """A number as an operand of ``dtype`` where PyTorch checks that it fits (``where``'s
    scalar operand): an int as ``_wrapped`` takes it; a finite float beyond float32's range
    is a RuntimeError for float32 (PyTorch checks that one; float16 overflows to inf)."""
    if type(n) is builtins.float and np.dtype(dtype) == np.float32 and math.isfinite(n) \
            and abs(n) > np.finfo(np.float32).max:
        raise RuntimeError(f"{op}: value {n} cannot be converted to {dtype} without overflow")
    return _wrapped(n, dtype, op)


def _fitting(n, dtype, op):
    """A number as a value of ``dtype`` by PyTorch's checked conversion of a fill value, a
    clamp bound or an exponent: an int as ``_wrapped`` takes it; a float into an integer
    dtype must be finite and within its range (it is then truncated); a finite number
    beyond the largest float16 or float32 is refused by those dtypes (not rounded to inf)."""
    kind = np.dtype(dtype).kind
    if type(n) is builtins.float and kind in "iu":
        info = np.iinfo(dtype)
        if not (math.isfinite(n) and info.min <= n <= info.max):
            raise RuntimeError(f"{op}: value {n} cannot be converted to {dtype} without "
                               "overflow")
    elif type(n) in (builtins.int, builtins.float) and kind == "f" and \
            np.dtype(dtype).itemsize <= 4 and math.isfinite(n) and \
            abs(n) > builtins.float(np.finfo(dtype).max):
        raise RuntimeError(f"{op}: value {n} cannot be converted to {dtype} without overflow")
    return _wrapped(n, dtype, op)


def _tensor_arg(op, other):
    """``other``, which must be a tensor (PyTorch's TypeError for a number)."""
    if not isinstance(other, TensorBase):
        raise TypeError(f"{op}(): argument 'other' must be Tensor, not {type(other).__name__}")
    return other


def _described(v):
    """An operand in a message: a tensor's dtype and shape, or a number."""
    if isinstance(v, TensorBase):
        return f"a {v.dtype} tensor of shape {tuple(v.shape)}"
    return repr(v)


def _no_keywords(name, kwargs):
    if kwargs:
        raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kwargs))}'")


# --- the dtype rules of arithmetic and of the elementwise functions ---------------------------

def _float_operands(x, y, reflected=False):
    """Operands of true division: integers are divided as floats (PyTorch's rule)."""
    if isinstance(y, (builtins.int, np.integer)) and x.array.dtype.kind in "biu":
        x = x.to(dtypes.get_default_dtype())  # (the divisor is not wrapped into x's dtype)
    elif not (type(y) in _PY_SCALARS or isinstance(y, np.generic)):
        y = as_tensor(y, like=x)
        if x.array.dtype.kind in "biu" and y.array.dtype.kind in "biu":  # each straight to
            x, y = x.to(dtypes.get_default_dtype()), y.to(dtypes.get_default_dtype())  # float
    x, y = _operands(x, y, reflected)
    if not any(isinstance(t, TensorBase) and t.array.dtype.kind in "fc" for t in (x, y)):
        x, y = (t.to(dtypes.get_default_dtype()) if isinstance(t, TensorBase) else t
                for t in (x, y))
    return x, y


def _no_bool(op, x, other=None):
    """``x``, after PyTorch's refusal of subtraction and negation with bool tensors (NumPy's
    TypeError, or worse, numbers, otherwise)."""
    if x.array.dtype.kind == "b" or isinstance(other, builtins.bool) or \
            isinstance(other, TensorBase) and other.array.dtype.kind == "b":
        what = "subtraction, the `-` operator," if op == "sub" else "negation, the `-` operator,"
        raise RuntimeError(f"{op}: {what} with a bool tensor is not supported (got "
                           f"{_described(x)}{'' if other is None else ' and '}"
                           f"{'' if other is None else _described(other)}); to invert a "
                           "mask, use the `~` or `logical_not()` operator instead")
    return x


def _no_bool_power(x, y):
    """Operands of ``pow``, after PyTorch's refusal of a bool tensor to a bool tensor's power."""
    if x.array.dtype.kind == "b":
        raise NotImplementedError(f"pow: not implemented for bool tensors (got {_described(x)} "
                                  f"and {_described(y)})")
    return x, y


def _no_bool_input(t, op, error):
    """``t``, after PyTorch's refusal of bool tensors by ``op`` (with PyTorch's error type)."""
    if t.array.dtype.kind == "b":
        raise error(f"{op}: bool tensors are not supported (shape {tuple(t.shape)})")
    return t


def _clamp_operands(x, lo, hi):
    """(x, lo, hi) of a clamp with a tensor bound, all of one dtype (PyTorch's promotion);
    both bounds are tensors or None, as PyTorch's ``clamp(Tensor, Tensor?, Tensor?)``."""
    bounds = [b for b in (lo, hi) if b is not None]
    for b in bounds:
        x, _ = _operands(x, b)
    lo, hi = (None if b is None else b.to(x.dtype) for b in (lo, hi))
    return x, lo, hi


def _floating(t):
    return t if t.array.dtype.kind == "f" else t.to(dtypes.get_default_dtype())


def _rounded(t, op, kind):
    """floor, ceil, trunc or round (``kind``) of ``t``: a copy of an integer tensor, as
    PyTorch's; bool tensors refused, as PyTorch."""
    if _no_bool_input(t, op, NotImplementedError).array.dtype.kind != "f":
        return t.clone()
    return kind.apply(t, fn=op if op != "round" else "rint")


def _int_division(fn, x, y, reflected=False):
    """``//`` and ``%``: integers divided by zero raise, as in PyTorch (NumPy gives 0)."""
    x, y = _operands(x, y, reflected)
    if all(isinstance(t, builtins.bool) or isinstance(t, TensorBase) and t.array.dtype.kind == "b"
           for t in (x, y)):
        raise NotImplementedError(f"{fn}: not implemented for bool tensors (got {_described(x)} "
                                  f"and {_described(y)})")
    divisor = y.array if isinstance(y, TensorBase) else y
    if x.dtype.kind in "biu" if isinstance(x, TensorBase) else divisor.dtype.kind in "biu":
        # a number is checked on the host; a tensor's zeros are read back (one read-back)
        zero = divisor == 0 if isinstance(divisor, _PY_SCALARS) else (divisor == 0).any()
        if zero:
            raise RuntimeError(f"{fn}: ZeroDivisionError (integer division by zero)")
    if fn == "floor_divide":
        return FloorDivide.apply(x, y)
    if not isinstance(y, TensorBase):  # (PyTorch's nodes: one input, the tensor)
        return RemainderScalar.apply(x, y)
    return (Remainder if isinstance(x, TensorBase) else RemainderOfNumber).apply(x, y)


def _rounded_division(x, other, mode, reflected=False):
    """``div(x, other, rounding_mode=mode)`` (``other / x`` when ``reflected``): the quotient
    rounded toward zero ("trunc") or down ("floor"), in the promoted dtype (integers stay
    integers; float16 is divided in float32 and rounded once). As in PyTorch, recorded in
    the graph with a zero gradient for both operands."""
    if not isinstance(mode, str):
        raise TypeError(f"div(): argument 'rounding_mode' must be str or None, not "
                        f"{type(mode).__name__}")
    if mode not in ("trunc", "floor"):
        raise RuntimeError(f"div: expected rounding_mode to be one of None, 'trunc', or "
                           f"'floor' but found {mode!r}")
    a, b = _operands(x, other, reflected)
    if all(isinstance(t, builtins.bool) or isinstance(t, TensorBase) and t.array.dtype.kind == "b"
           for t in (a, b)):
        raise NotImplementedError(f"div: rounding_mode={mode!r} is not implemented for bool "
                                  f"tensors (got {_described(a)} and {_described(b)})")
    tensor = a if isinstance(a, TensorBase) else b
    dtype = tensor.dtype
    if dtype.kind in "iu":
        divisor = b.array if isinstance(b, TensorBase) else b
        if builtins.bool(divisor == 0) if isinstance(divisor, _PY_SCALARS) else \
                builtins.bool((divisor == 0).any()):
            raise RuntimeError(f"div: ZeroDivisionError (integer division by zero, "
                               f"rounding_mode={mode!r})")
        if mode == "floor":
            return NonDiff.apply(a, b, fn="floor_divide")
        raw = [v.array if isinstance(v, TensorBase) else v for v in (a, b)]
        return tensor._make(on_arrays(_trunc_divide, raw[0], raw[1]))
    return RoundedDiv.apply(a, b, mode=mode)


def _trunc_divide(x, y):
    """Integer division rounded toward zero (C's ``/``): the floor, plus one where the
    remainder is nonzero and the operands' signs differ."""
    xp = backend.xp_of(x if _is_array(x) else y)
    q = xp.floor_divide(x, y)
    fix = (xp.remainder(x, y) != 0) & ((xp.asarray(x) < 0) != (xp.asarray(y) < 0))
    return xp.asarray(q + fix.astype(q.dtype))  # (an array even of 0-d operands)


def _alpha_sum(op, x, other, alpha, reflected=False):
    """``x + alpha * other`` (op "add") or ``x - alpha * other`` ("sub"); ``reflected``:
    ``other`` comes first (``mg.add(2, x, alpha=3)`` is ``2 + 3 * x``). PyTorch's rules for
    alpha: a number (or a 0-d tensor), no float for an integer result, a bool only for a
    bool one, and in float32 (and float16) one rounding, of the exact ``x + alpha * other``.
    In float64 the product and the sum are rounded apart (PyTorch: once, a fused
    multiply-add), a difference of at most an ulp."""
    if isinstance(alpha, TensorBase) and alpha.ndim == 0:
        alpha = alpha.item()
    alpha = _py_scalar(alpha)
    if isinstance(alpha, builtins.complex):
        raise RuntimeError(f"{op}: for non-complex input tensors, argument alpha must not be a "
                           f"complex number, got {alpha!r}")
    if type(alpha) not in _PY_SCALARS:
        raise TypeError(f"{op}(): argument 'alpha' must be Number, not {type(alpha).__name__}")
    if op == "sub":
        _no_bool("sub", x, other)
    first, second = _operands(x, other, reflected)
    dtype = (first if isinstance(first, TensorBase) else second).dtype
    kind = dtype.kind
    if type(alpha) is builtins.bool and kind != "b":
        raise RuntimeError(f"{op}: a bool alpha is only supported for bool results, got alpha="
                           f"{alpha} for a result of dtype {dtype}")
    if type(alpha) is builtins.float and kind in "biu":
        raise RuntimeError(f"{op}: for integral input tensors, argument alpha must not be a "
                           f"floating point number, got alpha={alpha} for dtype {dtype}")
    if kind == "b":  # x or (alpha and other)
        return NonDiff.apply(first, second if alpha else False, fn="logical_or")
    if kind in "iu":
        alpha = _wrapped(alpha, dtype, op)
    elif np.isfinite(alpha) and abs(alpha) > np.finfo(np.float32 if dtype.itemsize <= 4
                                                      else dtype).max:
        raise RuntimeError(f"{op}: value alpha={alpha} cannot be converted to {dtype} without "
                           f"overflow")
    scaled = _times(alpha, second) if isinstance(second, TensorBase) else \
        _wrapped(second * alpha, dtype)
    out = first + scaled if op == "add" else first - scaled
    if isinstance(out, TensorBase) and dtype.kind == "f" and dtype.itemsize <= 4:
        raw = [v.array if isinstance(v, TensorBase) else v for v in (first, second)]
        on_arrays(backend.add_scaled, out.array, raw[0], raw[1],
                  alpha if op == "add" else -alpha)
    return out


def _times(value, t):
    """``value * t``, with ``t`` itself where value is the int 1."""
    return t if type(value) in (builtins.int, builtins.bool) and value == 1 else value * t


def _scaled_sum(x, product, beta, alpha):
    """``beta * x + alpha * product`` of addmm and baddbmm (``x`` unread where beta is 0)."""
    if not (type(alpha) in (builtins.int, builtins.bool) and alpha == 1):
        product = product * alpha
    if beta == 0:
        _broadcast_shape("addmm", x, product)  # (self must still fit the product's shape)
        return product
    if not (type(beta) in (builtins.int, builtins.bool) and beta == 1):
        x = x * beta
    return x + product


# --- cat's and where's operands ---------------------------------------------------------------

def _promote_all(tensors, op):
    """``tensors`` (those of cat or stack, a list holding a tensor) as tensors of their
    promoted dtype: a number, list or array among them is made a tensor on the first one's
    device (on the host where the first is not a tensor)."""
    if not tensors:  # (PyTorch: a ValueError from cat, a RuntimeError from stack)
        raise (ValueError if op == "cat" else RuntimeError)(
            f"{op}: expected a non-empty sequence of tensors")
    first = tensors[0]
    device = first.device if isinstance(first, TensorBase) else None
    maker = first if isinstance(first, TensorBase) else \
        next(t for t in tensors if isinstance(t, TensorBase))
    tensors = [t if isinstance(t, TensorBase) else maker._make(as_array(t, device=device))
               for t in tensors]
    dt = functools.reduce(dtypes.promote_types, [t.dtype for t in tensors])
    return [t.to(dt) for t in tensors]


def _concatenated(tensors, dim):
    """``cat`` of ``tensors``, a list holding a tensor (see ``_promote_all``). As in
    PyTorch, a 1-D empty tensor (shape (0,), such as ``tensor([])``) joins tensors of any
    shape: it adds nothing, but is still an input of the node and gets an empty gradient."""
    tensors = _promote_all(tensors, "cat")
    kept = [t for t in tensors if t.shape != (0,)] or tensors
    if kept[0].ndim == 1:
        kept = tensors  # (1-D tensors: the empty ones are joined as they are)
    if any(t.ndim == 0 for t in kept):
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated")
    return Cat.apply(*tensors, dim=_dim(kept[0], dim))


def _where_operands(input, other):
    """``where``'s ``input`` and ``other``, one of them a tensor, promoted to one dtype (a
    number stays a number), after PyTorch's check that a number fits the tensor's dtype."""
    for t, v in ((input, other), (other, input)):  # a number out of an integer tensor's
        if isinstance(t, TensorBase) and not isinstance(v, TensorBase):  # range: refused
            _checked_number(v, t.array.dtype, "where")
    if isinstance(input, TensorBase):
        return _operands(input, other)
    other, input = _operands(other, input)
    return input, other


def _where(condition, input, other):
    """``input`` where ``condition`` holds, else ``other`` (operands promoted already, at
    least one a tensor). A condition that is no tensor is made one on input's device (on
    the host where input is a number); it must be bool (or uint8), as in PyTorch."""
    if not isinstance(condition, TensorBase):
        if isinstance(input, TensorBase):
            condition = as_tensor(condition, like=input)
        else:
            condition = other._make(as_array(condition))
    if condition.dtype not in (dtypes.bool, dtypes.uint8):
        raise RuntimeError(f"where: expected condition to be a bool tensor, got {condition.dtype} "
                           f"(shape {tuple(condition.shape)})")
    return Where.apply(condition, input, other)
