"""How Tensor methods read their arguments, as PyTorch does: dims (negative, tuples,
``axis=`` aliases), shapes given as ``f(2, 3)`` or ``f((2, 3))``, and indices."""
import builtins
import math
import operator

import numpy as np

from . import backend
from .autograd.function import on_arrays
from .autograd.graph import TensorBase


def _dim(t, d, ndim=None):
    ndim = t.ndim if ndim is None else ndim
    n = builtins.max(ndim, 1)
    if not -n <= d < n:
        raise IndexError(f"dimension {d} is out of range for a tensor of {ndim} dims "
                         f"(expected a dim in [{-n}, {n - 1}])")
    return d % n if ndim else 0


def _dims(t, dim, axis):
    """``dim`` (or its alias ``axis``) as a sorted tuple of non-negative axes; None = all."""
    if dim is None:
        dim = axis
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(t.ndim))  # PyTorch reduces over every dim for dim=() too
    if isinstance(dim, (tuple, list)):
        dims = tuple(sorted(_dim(t, d) for d in dim))
        if len(set(dims)) != len(dims):
            raise RuntimeError(f"dim {tuple(dim)} names a dimension more than once (a tensor "
                               f"of shape {tuple(t.shape)})")
    else:
        dims = (_dim(t, dim),)
    return dims if t.ndim else ()  # a 0-d tensor's one dim is itself: no axis to reduce


def _one_dim(t, dim):
    """``dim`` as the axis of an op along one dim (softmax, log_softmax): a non-negative
    int, or for a 0-d tensor, whose one dim (0 or -1, as in PyTorch) is the tensor itself,
    the empty tuple, so that no axis reaches the array module (CuPy refuses axis 0 of a 0-d
    array, and the reductions take ``axis=()`` as "no axis")."""
    d = _dim(t, dim)
    return d if t.ndim else ()


def _kd(keepdim, keepdims):
    return keepdim if keepdims is None else keepdims


def _alias(dim, axis):
    return axis if dim is None else dim


def _required_dim(op, dim, axis):
    dim = _alias(dim, axis)
    if dim is None:
        raise TypeError(f"{op}: the dim argument is required")
    return dim


def _count(t, dims):
    return math.prod(t.shape[d] for d in dims)


def _shape_arg(shape):
    """Accept ``f(2, 3)`` and ``f((2, 3))`` alike."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    try:
        return tuple(operator.index(s) for s in shape)
    except TypeError:  # (a float size: PyTorch's TypeError too, never a silent truncation)
        pass
    for s in shape:
        try:
            operator.index(s)
        except TypeError:
            raise TypeError(f"a size must be a tuple of ints, got {type(s).__name__} {s!r} in "
                            f"{tuple(shape)}") from None


def _index(index, like):
    """Turn Tensors and lists inside an index into arrays on ``like``'s device, each integer
    array checked against the size of the dim it indexes (see ``_check_index_arrays``)."""
    if isinstance(index, list) and _list_as_tuple(index):
        index = tuple(index)
    if isinstance(index, tuple):
        index = tuple(_index_item(i, like) for i in index)
        items = index
    else:
        index = _index_item(index, like)
        items = (index,)
    if builtins.any(type(i) in backend._XP_BY_TYPE and i.dtype.kind in "iu" for i in items):
        items = _check_index_arrays(items, like.shape)
        index = items if isinstance(index, tuple) else items[0]
    return index


def _check_index_arrays(items, shape):
    """IndexError for a value of an integer index array outside [-size, size) of the dim
    it indexes, on every device: NumPy raises it itself, CuPy would wrap the value around
    (``backend.check_index_bounds`` checks there without a read-back, the error raised at
    the next read on the host, and wraps the index into range). Returns the items to use."""
    is_array = [type(i) in backend._XP_BY_TYPE for i in items]
    used = sum(_dims_used(i, a) for i, a in zip(items, is_array)
               if i is not None and i is not Ellipsis)
    dim, out = 0, []
    for i, array in zip(items, is_array):
        if i is Ellipsis:
            dim += len(shape) - used
        elif array and i.dtype.kind in "iu":
            # (too many indices: the indexing itself says so; NumPy checks its own). The
            # check is recorded by mg.compile: a replay checks and wraps its own index
            if dim < len(shape) and type(i) is not np.ndarray:
                i = on_arrays(backend.check_index_bounds, i, shape[dim], dim)
            dim += 1
        elif i is not None:
            dim += _dims_used(i, array)
        out.append(i)
    return tuple(out)


def _split_index(index, ndim):
    """PyTorch applies the integers of an index before its arrays (as selections), where
    NumPy treats them as arrays too; the two differ when an int and an array are separated
    by a slice. Returns (basic, advanced): index with ``basic`` first, then ``advanced``
    (None when one step is enough)."""
    items = index if isinstance(index, tuple) else (index,)
    is_array = [hasattr(i, "ndim") and i.ndim > 0 for i in items]
    is_int = [isinstance(i, (builtins.int, np.integer)) and not isinstance(i, builtins.bool)
              for i in items]
    if not any(is_array) or not any(is_int) or _adjacent(items, is_array, is_int):
        return index, None
    used = sum(_dims_used(i, a) for i, a in zip(items, is_array)
               if i is not None and i is not Ellipsis)
    basic, advanced = [], []
    for i, arr, integer in zip(items, is_array, is_int):
        if i is Ellipsis:
            basic.append(Ellipsis)
            advanced.extend([slice(None)] * (ndim - used))
        elif arr:  # the dims it indexes stay for the second step
            basic.extend([slice(None)] * _dims_used(i, True))
            advanced.append(i)
        elif integer:
            basic.append(i)
        else:  # a slice or None: one dim in the result of the basic step
            basic.append(i)
            advanced.append(slice(None))
    return tuple(basic), tuple(advanced)


def _dims_used(i, is_array):
    """How many dims of the indexed tensor an index item consumes (a bool mask: its own)."""
    if is_array and i.dtype == np.bool_:
        return i.ndim
    return 0 if i is None or isinstance(i, (builtins.bool, np.bool_)) else 1  # a bool: a new dim


def _adjacent(items, is_array, is_int):
    """Whether the ints and arrays of an index form one unbroken run: then NumPy's rule
    (ints broadcast with the arrays) gives PyTorch's result in one step."""
    positions = [k for k, (a, n) in enumerate(zip(is_array, is_int)) if a or n]
    return positions[-1] - positions[0] + 1 == len(positions)


def _list_as_tuple(index):
    """PyTorch's rule for a list index: a list of fewer than 32 items that holds a sequence,
    tensor, array, slice, None or Ellipsis is a tuple of indices (``x[[rows, cols]]`` is
    ``x[rows, cols]``); any other list is one index tensor."""
    return len(index) < 32 and any(
        isinstance(i, (list, tuple, range, TensorBase, np.ndarray, slice))
        or i is None or i is Ellipsis for i in index)


def _index_item(i, like):
    if isinstance(i, slice) and isinstance(i.step, (int, np.integer)) and i.step <= 0:
        raise ValueError(f"indexing: slice step must be greater than zero, got {i.step} (use "
                         "flip for a reversed order)" if i.step else "slice step cannot be zero")
    if isinstance(i, (TensorBase, np.ndarray)) and i.ndim == 0 and i.dtype.kind in "iu" \
            and i.dtype != np.uint8:
        return builtins.int(i.item())  # a 0-d integer tensor indexes as an int (a view)
    if isinstance(i, TensorBase):
        if i.dtype in (np.int8, np.int16):
            raise IndexError(f"indexing: tensors used as indices must be long, int, byte or "
                             f"bool tensors (got {i.dtype}, shape {tuple(i.shape)})")
        data = i.array.astype(bool) if i.dtype == np.uint8 else i.array  # uint8: a mask
        return backend.to_device(data, like.device)
    if isinstance(i, (list, tuple, range, np.ndarray)):
        arr = np.asarray(i)
        if arr.size == 0 and not isinstance(i, np.ndarray):
            arr = arr.astype(np.int64)  # x[[]] selects nothing, as in PyTorch
        elif arr.dtype == np.uint8:
            arr = arr.astype(bool)  # as a uint8 tensor: a mask
        elif arr.dtype.kind in "fiu":
            arr = arr.astype(np.int64, copy=False)  # as PyTorch: a float list truncated
        return backend.to_device(arr, like.device)
    return i
