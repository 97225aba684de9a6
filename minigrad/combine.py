"""Functions over several tensors: ``cat`` (``concat``, ``concatenate``), ``stack``, the
stacks along a dim of NumPy's names (``hstack``, ``vstack``, ``dstack``, ``column_stack``),
``atleast_1d``/``2d``/``3d`` and ``where``."""
import functools

from . import dtypes
from .arguments import _dim
from .autograd.function import ShapeError, read_on_host
from .ops import Cat, Stack, Where
from .tensor import Tensor, as_array, as_tensor, _checked_number, _operands

_MISSING = object()  # an argument not given (where(condition) alone)


def cat(tensors, dim=0):
    """Concatenate along an existing dim (dtypes promoted as PyTorch does). As in PyTorch,
    a 1-D empty tensor (shape (0,), such as ``tensor([])``) joins tensors of any shape: it
    adds nothing, but is still an input of the node and gets an empty gradient."""
    tensors = _promote_all(_sequence(tensors, "cat"), "cat")
    kept = [t for t in tensors if t.shape != (0,)] or tensors
    if kept[0].ndim == 1:
        kept = tensors  # (1-D tensors: the empty ones are joined as they are)
    if any(t.ndim == 0 for t in kept):
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated")
    return Cat.apply(*tensors, dim=_dim(kept[0], dim))


def stack(tensors, dim=0):
    """Join equal-shaped tensors along a new dim."""
    tensors = _promote_all(_sequence(tensors, "stack"), "stack")
    for i, t in enumerate(tensors[1:], 1):
        if t.shape != tensors[0].shape:
            raise ShapeError(f"stack: expects tensors of equal shape, got {tensors[0].shape} "
                             f"at entry 0 and {t.shape} at entry {i}")
    d = _dim(tensors[0], dim, tensors[0].ndim + 1)
    return Stack.apply(*tensors, dim=d)


concat = cat


def concatenate(tensors, axis=0, *, dim=None):
    """``cat`` under NumPy's name, which takes ``axis`` (or ``dim``)."""
    return cat(tensors, axis if dim is None else dim)


def hstack(tensors):
    """Join along the columns: 1-D tensors (and numbers, as 0-d) end to end, others along
    dim 1."""
    tensors = atleast_1d(_non_empty(tensors, "hstack"))
    return cat(tensors, 0 if tensors[0].ndim == 1 else 1)


def vstack(tensors):
    """Join along the rows: each tensor made at least 2-D (a 1-D one is one row)."""
    return cat(atleast_2d(_non_empty(tensors, "vstack")), 0)


row_stack = vstack


def dstack(tensors):
    """Join along dim 2: each tensor made at least 3-D first (``atleast_3d``)."""
    return cat(atleast_3d(_non_empty(tensors, "dstack")), 2)


def column_stack(tensors):
    """Join as columns: 0-d and 1-D tensors become columns (n, 1), the others are joined
    along dim 1."""
    tensors = _non_empty(tensors, "column_stack")
    return cat([t.reshape(t.numel(), 1) if t.ndim <= 1 else t for t in tensors], 1)


def atleast_1d(*tensors):
    """Each tensor with at least one dim (a 0-d one as shape (1,)); the tensor itself if it
    has one already. One tensor in, one out; several (or a sequence), a tuple."""
    return _atleast(tensors, lambda t: t.reshape(1) if t.ndim == 0 else t)


def atleast_2d(*tensors):
    """Each tensor with at least two dims: 0-d as (1, 1), 1-D (n,) as one row (1, n)."""
    return _atleast(tensors, lambda t: t.reshape(1, 1) if t.ndim == 0 else
                    t.unsqueeze(0) if t.ndim == 1 else t)


def atleast_3d(*tensors):
    """Each tensor with at least three dims: 0-d as (1, 1, 1), 1-D (n,) as (1, n, 1), 2-D
    (m, n) as (m, n, 1)."""
    return _atleast(tensors, lambda t: t.reshape(1, 1, 1) if t.ndim == 0 else
                    t.unsqueeze(0).unsqueeze(-1) if t.ndim == 1 else
                    t.unsqueeze(-1) if t.ndim == 2 else t)


def _atleast(tensors, fn):
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return fn(tensors[0])
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected a sequence of Tensors, got an element of type "
                            f"{type(t).__name__}")
    return tuple(fn(t) for t in tensors)


def _sequence(tensors, op):
    """``tensors`` as a list, after PyTorch's refusal of a single tensor."""
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}(): argument 'tensors' must be tuple of Tensors, not Tensor")
    return list(tensors)


def _non_empty(tensors, op):
    tensors = _sequence(tensors, op)
    if not tensors:
        raise RuntimeError(f"{op} expects a non-empty TensorList")
    return tensors


def where(condition, input=_MISSING, other=_MISSING):
    """``input`` where ``condition`` holds, else ``other`` (either may be a scalar). With
    ``condition`` alone: the indices of its nonzero elements, one int64 tensor per dim (a
    0-d condition counts as one dim of size 1), as PyTorch's ``where(condition)``."""
    if input is _MISSING and other is _MISSING:
        if not isinstance(condition, Tensor):
            raise TypeError(f"where(): argument 'condition' must be Tensor, not "
                            f"{type(condition).__name__}")
        read_on_host("where(condition)")  # (its result's shape depends on the values)
        return condition.nonzero(as_tuple=True)
    if input is _MISSING or other is _MISSING:
        raise TypeError("where() takes the condition alone, or the condition, input and "
                        "other: got input or other without the other one")
    for t, v in ((input, other), (other, input)):  # a number out of an integer tensor's
        if isinstance(t, Tensor) and not isinstance(v, Tensor):  # range: refused, as PyTorch
            _checked_number(v, t.array.dtype, "where")
    if isinstance(input, Tensor):
        input, other = _operands(input, other)
    elif isinstance(other, Tensor):
        other, input = _operands(other, input)
    else:
        input = as_tensor(as_array(input), like=condition)
        input, other = _operands(input, other)
    condition = as_tensor(condition, like=input)
    if condition.dtype not in (dtypes.bool, dtypes.uint8):
        raise RuntimeError(f"where: expected condition to be a bool tensor, got {condition.dtype} "
                           f"(shape {tuple(condition.shape)})")
    return Where.apply(condition, input, other)


def _promote_all(tensors, op):
    if not tensors:  # (PyTorch: a ValueError from cat, a RuntimeError from stack)
        raise (ValueError if op == "cat" else RuntimeError)(
            f"{op}: expected a non-empty sequence of tensors")
    tensors = [as_tensor(t, like=tensors[0]) for t in tensors]
    dt = functools.reduce(dtypes.promote_types, [t.dtype for t in tensors])
    return [t.to(dt) for t in tensors]
