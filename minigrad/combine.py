"""Functions over several tensors: ``cat`` (``concat``, ``concatenate``), ``stack``, the
stacks along a dim of NumPy's names (``hstack``, ``vstack``, ``dstack``, ``column_stack``),
``atleast_1d``/``2d``/``3d``, ``where``, ``einsum``, ``meshgrid``, ``broadcast_tensors``,
and ``mg.add``/``sub``/``mul``/``div``/``pow``, which also take a number first."""
import builtins
import math
import warnings

import numpy as np

from . import backend, dtypes
from .arguments import _alias, _broadcast_shape, _dim
from .autograd.function import ShapeError, read_on_host
from .conversion import as_array
from .operands import (_PY_SCALARS, _alpha_sum, _concatenated, _float_operands, _no_keywords,
                       _operands, _promote_all, _rounded_division, _where, _where_operands)
from .ops import Div, Stack, XlogyOfNumber
from .tensor import Tensor, _tensordot

_MISSING = object()  # an argument not given (where(condition) alone)


def cat(tensors, dim=None, *, axis=None):
    """Concatenate along an existing dim (dtypes promoted as PyTorch does). As in PyTorch,
    a 1-D empty tensor (shape (0,), such as ``tensor([])``) joins tensors of any shape: it
    adds nothing, but is still an input of the node and gets an empty gradient. ``axis``:
    NumPy's name of ``dim`` (0 by default)."""
    dim = _alias(dim, axis)
    return _concatenated(_holding_a_tensor(_sequence(tensors, "cat")), 0 if dim is None else dim)


def stack(tensors, dim=None, *, axis=None):
    """Join equal-shaped tensors along a new dim (``axis``: NumPy's name of ``dim``, 0 by
    default)."""
    dim = _alias(dim, axis)
    dim = 0 if dim is None else dim
    tensors = _promote_all(_holding_a_tensor(_sequence(tensors, "stack")), "stack")
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


def _holding_a_tensor(tensors):
    """cat's or stack's ``tensors``: where none is a tensor (lists, arrays), each made one
    on the host; otherwise as they are (``_promote_all`` makes the others tensors)."""
    if builtins.any(isinstance(t, Tensor) for t in tensors):
        return tensors
    return [Tensor._make(as_array(t)) for t in tensors]


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
    if isinstance(input, Tensor) or isinstance(other, Tensor):
        input, other = _where_operands(input, other)
    else:  # two numbers: input made a tensor on condition's device (the host if none)
        device = condition.device if isinstance(condition, Tensor) else None
        input, other = _operands(Tensor._make(as_array(input, device=device)), other)
    return _where(condition, input, other)


def _function_of(name):
    """``mg.<name>``: the Tensor method of that name as a function, whose tensor may also be
    given as ``input=`` (PyTorch's name), as in ``mg.sum(input=x, dim=1)``."""
    method = getattr(Tensor, name)

    def function(*args, **kwargs):
        if "input" in kwargs:
            if args:
                raise TypeError(f"{name}() got multiple values for argument 'input'")
            args = (kwargs.pop("input"),)
        return method(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = method.__doc__
    return function


def split(tensor, split_size_or_sections, dim=0):
    """``tensor.split(split_size_or_sections, dim)``, under PyTorch's names for the function."""
    return Tensor.split(tensor, split_size_or_sections, dim)


def _number_first(name):
    """``mg.<name>`` (add, sub, mul, div, pow): the Tensor method, which also takes a number
    as its first argument, as PyTorch's functions do (a number and a tensor: the tensor's
    reflected op; two numbers: the first as a tensor, except for pow, whose second argument
    PyTorch calls ``exponent``)."""
    method = getattr(Tensor, name)

    def function(input, other=None, **kwargs):
        if name == "pow" and "exponent" in kwargs:
            if other is not None:
                raise TypeError("pow() got multiple values for argument 'exponent'")
            other = kwargs.pop("exponent")
        if other is None:
            raise TypeError(f"{name}() missing its second argument "
                            f"'{'exponent' if name == 'pow' else 'other'}'")
        if isinstance(input, Tensor):
            return method(input, other, **kwargs)
        if type(input) not in _PY_SCALARS and not isinstance(input, np.generic) or \
                name == "pow" and not isinstance(other, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                            f"{type(input).__name__}")
        if not isinstance(other, Tensor):
            return method(Tensor(as_array(input)), other, **kwargs)
        if name in ("add", "sub"):
            alpha = kwargs.pop("alpha", 1)
            _no_keywords(name, kwargs)
            return _alpha_sum(name, other, input, alpha, reflected=True)
        if name == "div":
            mode = kwargs.pop("rounding_mode", None)
            _no_keywords(name, kwargs)
            if mode is None:  # (a true division: the operator's reciprocal(x) * number
                return Div.apply(*_float_operands(other, input, True))  # is `/` only)
            return _rounded_division(other, input, mode, reflected=True)
        _no_keywords(name, kwargs)
        return getattr(other, "__rmul__" if name == "mul" else "__rpow__")(input)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = method.__doc__
    return function


def einsum(equation, *operands):
    """Sums of products over the subscripts of ``equation`` ("ij,jk->ik", "...ij,...jk",
    "ii->i"), as PyTorch's: a subscript repeated in one operand takes its diagonal, one that
    is in no other operand nor in the output is summed first, and each pair of operands is
    contracted by one ``matmul`` (batch subscripts, kept ones, summed ones). Operands of
    different dtypes are promoted (PyTorch refuses that where it contracts them)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    terms, out = _einsum_terms(equation.replace(" ", ""), operands)
    dtype = operands[0].dtype
    for t in operands[1:]:
        dtype = dtypes.promote_types(dtype, t.dtype)
    pending = []
    for x, term in zip(operands, terms):
        x = x.to(dtype)
        for letter in dict.fromkeys(term):  # (a repeated subscript: the diagonal)
            while term.count(letter) > 1:
                p = term.index(letter)
                q = term.index(letter, p + 1)
                x = x.diagonal(0, p, q)
                term = term[:p] + term[p + 1:q] + term[q + 1:] + letter
        pending.append((x, term))
    x, tx = pending[0]
    for k in range(1, len(pending) + 1):
        later = out + "".join(t for _, t in pending[k + 1:])
        y, ty = pending[k] if k < len(pending) else (None, "")
        x, tx = _einsum_sum(x, tx, later + ty)
        if y is None:
            break
        y, ty = _einsum_sum(y, ty, later + tx)
        x, tx = _einsum_pair(x, tx, y, ty, later)
    return x.permute(*[tx.index(c) for c in out]) if tx != out else x


def _einsum_terms(equation, operands):
    """The subscripts of each operand and of the output, with ``...`` written out as
    letters of its own (counted from the right, so that its dims broadcast)."""
    inputs, arrow, out = equation.partition("->")
    inputs = inputs.split(",")
    if len(inputs) != len(operands):
        raise RuntimeError(f"einsum(): {'more' if len(operands) > len(inputs) else 'fewer'} "
                           f"operands were provided than specified in the equation")
    dots = 0
    terms = []
    for term, x in zip(inputs, operands):
        letters = term.replace("...", "")
        n = x.ndim - len(letters)
        if n < 0 or (n and "..." not in term):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                               f"({len(letters)}) does not match the number of dimensions "
                               f"({x.ndim}) for operand {len(terms)}"
                               f"{'' if '...' in term else ' and no ellipsis was given'}")
        dots = builtins.max(dots, n)
        terms.append(term.replace("...", "".join(chr(0x100 + i) for i in range(n, 0, -1))))
    ellipsis = "".join(chr(0x100 + i) for i in range(dots, 0, -1))
    if not arrow:
        counts = "".join(terms)
        out = ellipsis + "".join(sorted(c for c in set(counts) if c.isalpha() and
                                        counts.count(c) == 1 and ord(c) < 0x100))
    else:
        out = out.replace("...", ellipsis)
        for c in out:
            if out.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in "
                                   f"the output")
            if not builtins.any(c in t for t in terms):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   f"equation for any input operand")
    sizes = {}
    for i, (term, x) in enumerate(zip(terms, operands)):
        for c, n in zip(term, x.shape):
            if sizes.get(c, 1) != n and n != 1:
                if c in sizes and sizes[c] != 1:
                    raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {i} "
                                       f"which does not broadcast with previously seen size "
                                       f"{sizes[c]}")
            sizes[c] = builtins.max(sizes.get(c, 1), n)
    return terms, out


def _einsum_sum(x, term, kept):
    """``x`` summed over its subscripts that are not in ``kept``."""
    gone = [i for i, c in enumerate(term) if c not in kept]
    if not gone:
        return x, term
    return x.sum(tuple(gone)), "".join(c for c in term if c in kept)


def _einsum_pair(x, tx, y, ty, kept):
    """The contraction of two operands by one matmul: (batch, left, summed) @
    (batch, summed, right), where batch subscripts are in both and kept."""
    batch = [c for c in tx if c in ty and c in kept]
    summed = [c for c in tx if c in ty and c not in kept]
    left = [c for c in tx if c not in ty]
    right = [c for c in ty if c not in tx]
    size = {c: builtins.max(x.shape[tx.index(c)], y.shape[ty.index(c)]) for c in summed}
    x = x.permute(*[tx.index(c) for c in batch + left + summed])
    y = y.permute(*[ty.index(c) for c in batch + summed + right])
    x = x.expand(*x.shape[:len(batch) + len(left)], *[size[c] for c in summed])
    y = y.expand(*y.shape[:len(batch)], *[size[c] for c in summed], *y.shape[-len(right):]
                 if right else ())
    nb = len(batch)
    left_shape, right_shape = x.shape[nb:nb + len(left)], y.shape[nb + len(summed):]
    c = math.prod(size[c] for c in summed)
    out = x.reshape(*x.shape[:nb], math.prod(left_shape), c).matmul(
        y.reshape(*y.shape[:nb], c, math.prod(right_shape)))
    return out.reshape(*out.shape[:nb], *left_shape, *right_shape), "".join(batch + left + right)


def meshgrid(*tensors, indexing=None):
    """Grids from vectors: output i holds ``tensors[i]`` along dim i, repeated along the
    others ("ij"); with "xy", the first two inputs take each other's dims (as NumPy's)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass the "
                      "indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t.ndim}D tensor")
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        tensors = (tensors[1], tensors[0]) + tuple(tensors[2:])
    shape = tuple(t.numel() for t in tensors)
    grids = [t.reshape(tuple(-1 if k == i else 1 for k in range(len(shape)))).expand(shape)
             for i, t in enumerate(tensors)]
    if swap:
        grids = [grids[1], grids[0]] + grids[2:]
    return tuple(grids)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common broadcast shape (views)."""
    shape = tensors[0].shape
    for t in tensors[1:]:
        shape = _broadcast_shape("broadcast_tensors", Tensor._make(np.empty(shape)), t)
    return tuple(t.expand(shape) for t in tensors)


def _tensor_first(name):
    """``mg.<name>`` for a binary function whose ``input`` must be a tensor, as PyTorch's
    (a number there is a TypeError)."""
    method = _function_of(name)

    def function(*args, **kwargs):
        first = args[0] if args else kwargs.get("input")
        if not isinstance(first, Tensor):
            raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                            f"{type(first).__name__}")
        return method(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = method.__doc__
    return function


def xlogy(input, other):
    """``input * log(other)``, 0 where input == 0 (NaN where other is NaN); either may be
    a number (PyTorch's XlogyBackward1 for a number input)."""
    if isinstance(input, Tensor):
        return input.xlogy(other)
    if not isinstance(other, Tensor) or \
            not (type(input) in _PY_SCALARS or isinstance(input, np.generic)):
        raise TypeError(f"xlogy(): expected a tensor and a number or two tensors, got "
                        f"{type(input).__name__} and {type(other).__name__}")
    x, y = _float_operands(other, input, True)
    return XlogyOfNumber.apply(x, y)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None):
    """For each of ``values``, the index in ``sorted_sequence`` (ascending along its last
    dim) before which it would be inserted to keep it sorted: the first such place, or with
    ``right`` (``side="right"``) the last. A sequence of several dims searches each of its
    rows for the values of the same leading indices. int64 (int32 with ``out_int32``)."""
    if side not in (None, "left", "right"):
        raise RuntimeError(f"searchsorted(): side can only be 'left' or 'right' but got "
                           f"{side}")
    if side == "left" and right:
        raise RuntimeError("searchsorted(): side and right can't be set to opposites, "
                           "got side of left while right was True")
    side = side or ("right" if right else "left")
    seq = sorted_sequence.array
    xp = backend.xp_of(seq)
    number = not isinstance(values, Tensor)
    vals = xp.asarray(as_array(values, device=sorted_sequence.device))
    if seq.ndim > 1 and (number or seq.shape[:-1] != vals.shape[:-1]):
        raise RuntimeError(f"searchsorted(): boundaries tensor should be 1 dimension or "
                           f"the first N-1 dimensions of boundaries tensor and input value "
                           f"tensor must match, but we got boundaries tensor "
                           f"{list(seq.shape)} and input value tensor {list(vals.shape)}")
    if seq.ndim <= 1:
        out = xp.searchsorted(seq.reshape(-1), vals.reshape(-1), side=side)
    else:  # (one search per row)
        rows, width = seq.reshape(-1, seq.shape[-1]), vals.shape[-1]
        flat = vals.reshape(-1, width)
        out = xp.stack([xp.searchsorted(r, v, side=side) for r, v in zip(rows, flat)]) \
            if len(rows) else xp.zeros((0, width), np.int64)
    out = out.reshape(vals.shape).astype(np.int32 if out_int32 else np.int64)
    return Tensor._make(out)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The index of the bucket of each of ``input`` among the ascending 1-d ``boundaries``:
    i where boundaries[i-1] < x <= boundaries[i] (with ``right``: boundaries[i-1] <= x <
    boundaries[i]), i.e. ``searchsorted(boundaries, input, right=right)``."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def cdist(x1, x2, p=2.0, compute_mode=None):
    """The p-norm distances between the rows of ``x1`` (..., P, M) and those of ``x2``
    (..., R, M): a (..., P, R) tensor, differentiable (built from Tensor ops). As PyTorch,
    the gradient is 0 where a distance is 0; ``p`` is 0 (count of differing entries), a
    positive number or inf."""
    if x1.ndim < 2 or x2.ndim < 2:
        raise RuntimeError(f"cdist only supports at least 2D tensors, X1 got: {x1.ndim}D, X2 "
                           f"got: {x2.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    if x1.array.dtype.kind != "f" or x2.array.dtype.kind != "f":
        raise RuntimeError(f"cdist only supports floating-point dtypes, X1 got: {x1.dtype}, "
                           f"X2 got: {x2.dtype}")
    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()  # (..., P, R, M)
    if p == 0:  # (sign: 1 where an entry differs, recorded with a zero gradient; NaN counts)
        return diff.sign().where(diff == diff, 1.0).sum(-1)
    if p == 1:
        return diff.sum(-1)
    if p == math.inf:
        return diff.amax(-1) if diff.shape[-1] else diff.sum(-1)
    total = (diff * diff).sum(-1) if p == 2 else (diff ** p).sum(-1)
    positive = total > 0  # (the root's gradient at 0 is infinite: taken where it is not)
    root = total.where(positive, 1.0)
    root = root.sqrt() if p == 2 else root ** (1.0 / p)
    return root.where(positive, 0.0)


def tensordot(a, b, dims=2):
    """The sums of products of ``a`` and ``b`` over ``dims``: an int (the last ``dims``
    dims of a with the first of b) or two lists of dims, as ``torch.tensordot`` (a function
    only, as in PyTorch)."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        bad = b if isinstance(a, Tensor) else a
        raise TypeError(f"tensordot(): argument '{'other' if isinstance(a, Tensor) else 'input'}"
                        f"' must be Tensor, not {type(bad).__name__}")
    return _tensordot(a, b, dims)
