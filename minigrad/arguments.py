"""How Tensor methods read their arguments, as PyTorch does: dims (negative, tuples,
``axis=`` aliases), shapes given as ``f(2, 3)`` or ``f((2, 3))``, indices, the index tensors
of gather, scatter and their kin, and the dims and dtypes of reductions, with PyTorch's
errors for what it refuses."""
import builtins
import math
import operator

import numpy as np

from . import backend, dtypes
from .autograd.function import ShapeError, on_arrays, read_on_host
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
    dim = _alias(dim, axis)
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
    """``dim``, or its NumPy alias ``axis``: one of them, as in PyTorch."""
    if dim is not None and axis is not None:
        raise TypeError(f"got both dim={dim!r} and its alias axis={axis!r}; pass one")
    return axis if dim is None else dim


def _required_dim(op, dim, axis):
    dim = _alias(dim, axis)
    if dim is None:
        raise TypeError(f"{op}: the dim argument is required")
    return dim


def _count(t, dims):
    return math.prod(t.shape[d] for d in dims)


def _sizes_or_keyword(op, sizes, keyword, name):
    """The sizes of ``op(*sizes)``, or of its keyword form ``op(name=sizes)`` (PyTorch's
    name), one of the two."""
    if keyword is None:
        return sizes
    if sizes:
        raise TypeError(f"{op}() got the sizes {sizes} and {name}={keyword!r}; pass one")
    return (keyword,)


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


def _is_array(value):
    """Whether ``value`` is a NumPy or CuPy array (not a NumPy scalar)."""
    if type(value).__module__.startswith("cupy"):
        backend.cupy()  # registers cupy.ndarray as a backend array type
    return type(value) in backend._XP_BY_TYPE


def _has_arrays(index):
    items = index if isinstance(index, tuple) else (index,)
    return builtins.any(type(i) in backend._XP_BY_TYPE for i in items)


def _has_mask(index):
    """Whether the (converted) index holds a bool array, whose count of True values sets
    the result's shape."""
    items = index if isinstance(index, tuple) else (index,)
    return builtins.any(_is_array(i) and i.dtype == np.bool_ for i in items)


# --- dims and shapes of the other methods -----------------------------------------------------

def _is_int(v):
    """Whether ``v`` is an integer argument as PyTorch reads one (a bool is not)."""
    return isinstance(v, (builtins.int, np.integer)) and not isinstance(v, (builtins.bool,
                                                                            np.bool_))


def _int_tuple(op, name, value):
    """``value`` (an int, or a tuple or list of ints) as a tuple of ints; anything else is
    PyTorch's TypeError."""
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if not builtins.all(_is_int(v) for v in items):
        raise TypeError(f"{op}(): argument '{name}' must be an int or a tuple of ints, got "
                        f"{value!r}")
    return tuple(builtins.int(v) for v in items)


def _check_not_0d(t, op):
    if t.ndim == 0:
        raise ShapeError(f"{op}: expects at least a 1-dimensional tensor, got a 0-d tensor")


def _matrices(x, op):
    """``x``, checked to have the two dims of a matrix (``tril``, ``triu``)."""
    if x.ndim < 2:
        raise RuntimeError(f"{op}: input tensor must have at least 2 dimensions, got shape "
                           f"{tuple(x.shape)}")
    return x


def _diagonal(op, k):
    """The ``diagonal`` argument of ``tril``/``triu``: an int, as PyTorch's."""
    if not _is_int(k):
        raise TypeError(f"{op}(): argument 'diagonal' must be int, not {type(k).__name__}")
    return builtins.int(k)


def _new_size(op, size):
    """The shape of a new tensor, from ``f(2, 3)`` or ``f((2, 3))``; a negative size is a
    RuntimeError, as in PyTorch."""
    shape = _shape_arg(size)
    if any(n < 0 for n in shape):
        raise RuntimeError(f"{op}: trying to create a tensor with negative dimension "
                           f"{min(shape)}: {list(shape)}")
    return shape


def _broadcast_shape(op, x, y):
    """The shape ``x`` and ``y`` broadcast to; PyTorch's error where they do not."""
    try:
        return tuple(np.broadcast_shapes(x.shape, y.shape))
    except ValueError:
        raise ShapeError(f"{op}: shapes {tuple(x.shape)} and {tuple(y.shape)} do not "
                         "broadcast") from None


# --- reductions: their dims, and PyTorch's refusals of empty or integer inputs ----------------

def _reducible(t, op, dim):
    """``dim`` as _dims gives it, after PyTorch's errors for a max, min or arg-reduction of
    an empty tensor: IndexError over a dim of size 0, RuntimeError over every dim."""
    dims = _dims(t, dim, None)
    if t.array.size == 0:
        if dim is None or isinstance(dim, (tuple, list)) and not dim:  # (): every dim
            raise RuntimeError(f"{op}(): Expected reduction dim to be specified for an empty "
                               f"input (shape {tuple(t.shape)}); give the dim argument")
        for d in dims:
            if t.shape[d] == 0:
                raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size "
                                 f"(input shape {tuple(t.shape)})")
    return dims


def _logical_dims(t, dim, axis):
    """The axes of ``any``/``all``: as ``_dims``, except that an empty tuple or list of
    dims reduces over none (PyTorch's rule for these two, unlike ``sum``'s)."""
    given = axis if dim is None else dim
    if isinstance(given, (tuple, list)) and len(given) == 0:
        return ()
    return _dims(t, dim, axis)


def _normalisable(t, op, dtype):
    """The input of softmax or log_softmax: cast to ``dtype`` if given; integers and bools
    are refused, as in PyTorch (``dtype=`` or ``.float()`` makes them floating point)."""
    x = t if dtype is None else t.to(dtype)
    if x.array.dtype.kind != "f":
        raise NotImplementedError(f"{op}: not implemented for {x.dtype} tensors (shape "
                                  f"{tuple(t.shape)}); pass dtype= or call .float() first")
    return x


def _spread(t, op, dim, unbiased, keepdim, correction, axis, keepdims):
    """var (``op`` Var) or std (Std) of ``t`` over ``dim``: of float16 in float32, rounded
    once; ``correction`` 1 unless given (``unbiased`` False: 0)."""
    if t.dtype.kind != "f":
        raise RuntimeError(f"var/std: only floating point tensors are supported, got "
                           f"{t.dtype} (shape {t.shape})")
    if t.array.dtype == np.float16:
        return _spread(t.float(), op, dim, unbiased, keepdim, correction, axis, keepdims).half()
    if isinstance(dim, (builtins.bool, np.bool_)) and unbiased is None:
        dim, unbiased = None, dim  # var(False): PyTorch's overload var(unbiased)
    if correction is None:
        correction = 1 if unbiased is None else builtins.int(unbiased)
    dims = _dims(t, dim, axis)
    return op.apply(t, dims=dims, keepdim=_kd(keepdim, keepdims), correction=correction,
                    count=_count(t, dims), whole=(dim is None and axis is None) or t.ndim == 0)


def _arg_reduce(t, dim, keepdim, op):
    name = op._arg  # argmax or argmin
    if dim is not None and not _is_int(dim):
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__}")
    if t.array.dtype.kind == "b":
        raise RuntimeError(f"{name}(): does not support bool input (shape {tuple(t.shape)})")
    if dim is None and t.array.size == 0:
        raise IndexError(f"{name}(): Expected reduction dim to be specified for an empty "
                         f"input (shape {tuple(t.shape)})")
    if dim is None:  # over every dim; keepdim keeps each as a dim of size 1
        index = op.apply(t.reshape(-1), dim=0, keepdim=False)[1]
        return index.reshape((1,) * t.ndim) if keepdim else index
    d = _reducible(t, name, dim)[0] if t.ndim else _dim(t, dim)
    if t.ndim == 0:  # a 0-d tensor has one dim to reduce, of size 1: index 0
        return op.apply(t.reshape(1), dim=0, keepdim=False)[1]
    return op.apply(t, dim=d, keepdim=keepdim)[1]


# --- index tensors: gather, index_select, scatter, index_add, repeat_interleave ---------------

class IndexOutOfRange(IndexError, RuntimeError):
    """An index tensor's entry outside its dim (``gather``, ``index_select``): PyTorch raises
    an IndexError or a RuntimeError depending on the dim and the kernel; this is both."""


def _index_tensor(op, index, like, dim, allowed):
    """``index`` for ``gather``/``index_select``: an integer tensor of a dtype in ``allowed``
    on ``like``'s device, every entry within [0, size of ``dim``) (an IndexError otherwise,
    naming the entry: no silent wrap-around of negative indices, as PyTorch)."""
    if not isinstance(index, TensorBase) or index.dtype not in allowed:
        got = index.dtype if isinstance(index, TensorBase) else type(index).__name__
        raise RuntimeError(f"{op}: expected an index tensor of dtype "
                           f"{' or '.join(str(d) for d in allowed)}, got {got}")
    n = like.shape[dim]
    return _in_range(index, 0, n, IndexOutOfRange, f"{op}: index {{}} is out of bounds for "
                     f"dim {dim} of size {n} (input shape {tuple(like.shape)})")


def _in_range(index, low, high, error, message):
    """``index`` (a tensor), after the check that its entries lie in [low, high):
    ``error(message.format(entry))`` names the smallest entry below, else the largest above.
    On the CPU it is raised here; on a GPU the check runs on the device without a
    synchronisation, its error is raised at the next read on the host (``backend.checks``),
    and the index returned is wrapped into range meanwhile, as CuPy's indexing wraps it."""
    a = index.array
    if a.size == 0:
        return index
    if type(a) is np.ndarray:
        lo, hi = builtins.int(a.min()), builtins.int(a.max())
        if lo < low or hi >= high:
            raise error(message.format(lo if lo < low else hi))
        return index
    backend.checks.check(*backend.checks.out_of_range(a, low, high), error, message)
    return index._make(on_arrays(backend.wrap_index, a, high))  # (a replay wraps its own)


def _check_index_dtype(op, index):
    if not isinstance(index, TensorBase) or index.dtype not in (dtypes.int64, dtypes.int32):
        got = index.dtype if isinstance(index, TensorBase) else type(index).__name__
        raise RuntimeError(f"{op}(): expected an index tensor of dtype int32 or int64, got {got}")


def _check_index_range(op, index, n, dim, error=RuntimeError):
    """``index`` after PyTorch's error (RuntimeError; IndexError for index_add into a
    vector) for an entry outside [0, n) along ``dim`` (on a GPU: see ``_in_range``)."""
    return _in_range(index, 0, n, error, f"{op}(): index {{}} is out of bounds for "
                                         f"dimension {dim} with size {n}")


def _gather_places(x, dim, index):
    """The index arrays of ``x.gather(dim, index)`` (``index`` a checked integer tensor):
    ``index`` along ``dim``, aranges along the other dims."""
    xp = backend.xp_of(x.array)
    places = tuple(index if k == dim else  # with aranges along the other dims
                   x._make(xp.arange(n).reshape((n,) + (1,) * (index.ndim - k - 1)))
                   for k, n in enumerate(index.shape))
    return _index(places, x)


def _scatter_args(op, t, dim, index, src):
    """The operands of ``scatter``/``scatter_add`` on ``t``, after PyTorch's checks:
    (x, places, src) with x the tensor written (a 0-d t seen as 1-D), places the written
    elements' index array per dim (``index`` along dim, aranges along the others; None
    for an empty index, which writes nothing), and src cut to index's shape (or a number)."""
    d = _dim(t, dim)
    _check_index_dtype(op, index)
    if isinstance(src, TensorBase) and src.dtype != t.dtype:
        raise RuntimeError(f"{op}(): expected self.dtype to be equal to src.dtype, got "
                           f"{t.dtype} and {src.dtype}")
    backend.check_same_device(op, [t.array, index.array] +
                              ([src.array] if isinstance(src, TensorBase) else []))
    x = t.reshape(1) if t.ndim == 0 else t
    if index.numel() == 0:
        return x, None, src
    idx = index.reshape(1) if index.ndim == 0 else index
    if idx.ndim != x.ndim:
        raise RuntimeError(f"{op}(): index tensor must have the same number of dimensions as "
                           f"self tensor (index shape {tuple(index.shape)}, self shape "
                           f"{tuple(t.shape)})")
    fits = builtins.all(idx.shape[k] <= x.shape[k] for k in range(x.ndim) if k != d)
    if isinstance(src, TensorBase):
        src = src.reshape(1) if src.ndim == 0 else src
        if src.ndim != idx.ndim:
            raise RuntimeError(f"{op}(): index tensor must have the same number of dimensions "
                               f"as src tensor (index shape {tuple(index.shape)}, src shape "
                               f"{tuple(src.shape)})")
        fits = fits and builtins.all(i <= s for i, s in zip(idx.shape, src.shape))
    if not fits:
        raise RuntimeError(f"{op}(): expected index {list(idx.shape)} to be no larger than self "
                           f"{list(x.shape)} apart from dimension {d} and to be no larger than "
                           f"src {list(getattr(src, 'shape', ()))}")
    idx = _check_index_range(op, idx, x.shape[d], d)
    xp = backend.xp_of(x.array)
    places = tuple(idx.array if k == d else xp.arange(n).reshape((n,) + (1,) * (idx.ndim - k - 1))
                   for k, n in enumerate(idx.shape))
    if isinstance(src, TensorBase) and src.shape != idx.shape:
        src = src[tuple(slice(0, n) for n in idx.shape)]
    return x, places, src


def _index_add_args(t, d, index, source):
    """``index_add``'s index (as a vector) and source, after PyTorch's checks: an int32 or
    int64 vector within [0, size of dim), and a source of t's dtype and shape but along
    dim, where it has one entry per index."""
    op = "index_add_"
    _check_index_dtype(op, index)
    if index.ndim > 1:
        raise IndexError(f"{op}(): index is supposed to be a vector, got shape "
                         f"{tuple(index.shape)}")
    if not isinstance(source, TensorBase):
        raise TypeError(f"index_add(): argument 'source' (position 3) must be Tensor, not "
                        f"{type(source).__name__}")
    if source.dtype != t.dtype:
        raise RuntimeError(f"{op}(): self ({t.dtype}) and source ({source.dtype}) must have "
                           "the same dtype")
    backend.check_same_device(op, [t.array, index.array, source.array])
    index = index.reshape(-1)
    if d >= builtins.max(source.ndim, 1):
        raise RuntimeError(f"{op}(): indexing dim {d} is out of bounds of the source tensor of "
                           f"shape {tuple(source.shape)}")
    entries = source.shape[d] if source.ndim else 1
    if index.shape[0] != entries:
        raise RuntimeError(f"{op}(): number of indices ({index.shape[0]}) should be equal to "
                           f"source.size(dim) ({entries}), for dim {d}")
    outer = [n for k, n in enumerate(t.shape) if k != d]
    if builtins.max(source.ndim, 1) != builtins.max(t.ndim, 1) or \
            [n for k, n in enumerate(source.shape) if k != d] != outer:
        raise RuntimeError(f"{op}(): source tensor shape must match self tensor shape, "
                           f"excluding the specified dimension: got self shape "
                           f"{tuple(t.shape)} and source shape {tuple(source.shape)}")
    # PyTorch's kernel for a vector (or 0-d) self raises IndexError, its others RuntimeError
    error = IndexError if t.ndim <= 1 else RuntimeError
    index = _check_index_range(op, index, t.shape[d] if t.ndim else 1, d, error)
    return index, source


def _repeat_counts(repeats, n, alone=False, check=True):
    """The counts of ``repeat_interleave`` as a host int64 array, after PyTorch's checks:
    an int32 or int64 tensor of one dim (or, with an input, 0-d), one count per entry of
    the ``n`` entries or one for all, none negative (``check=False``: the checks of the
    dtype and shape only, and nothing read)."""
    if repeats.dtype not in (dtypes.int64, dtypes.int32):
        raise NotImplementedError(f"repeat_interleave: repeats must be an int32 or int64 "
                                  f"tensor, got {repeats.dtype}")
    if repeats.ndim != 1 if alone else repeats.ndim > 1:
        what = "a 1-D" if alone else "a 0-d or 1-D"
        raise RuntimeError(f"repeat_interleave: repeats must be {what} tensor, got shape "
                           f"{tuple(repeats.shape)}")
    if repeats.ndim == 1 and repeats.shape[0] not in ((n,) if alone else (1, n)):
        raise RuntimeError(f"repeat_interleave: repeats must have the same size as input along "
                           f"dim, got {repeats.shape[0]} counts for {n} entries")
    if not check:
        return None
    read_on_host("Tensor.repeat_interleave()")
    counts = backend.to_host(repeats.array).astype(np.int64)
    if (counts < 0).any():
        raise RuntimeError(f"repeat_interleave: repeats can not be negative, got "
                           f"{builtins.int(counts.min())}")
    return counts


def _check_output_size(output_size, size):
    if output_size is not None and output_size != size:
        raise RuntimeError(f"repeat_interleave: invalid output_size, expected {size} but got "
                           f"{output_size}")


def _repeat_index_on_device(repeats, n, output_size):
    """``repeat_interleave``'s index on a GPU when ``output_size`` is given: made there
    without reading the counts back, as PyTorch's; a negative count or an output_size
    other than their sum is raised at the next read on the host (``backend.checks``)."""
    _repeat_counts(repeats, n, check=False)
    counts = on_arrays(_repeat_index, repeats.array, n, output_size)
    return repeats._make(counts)


def _repeat_index(counts, n, output_size):
    """The entries 0..n-1, entry i ``counts[i]`` times (one count: each that many times), as
    ``output_size`` indices (cut or padded with n where the counts sum otherwise, flagged)."""
    xp = backend.xp_of(counts)
    counts = xp.broadcast_to(counts.reshape(-1).astype(np.int64), (n,))
    low, total = counts.min() if n else xp.zeros((), np.int64), counts.sum()
    backend.checks.check(low < 0, low, RuntimeError,
                         "repeat_interleave: repeats can not be negative, got {}")
    backend.checks.check(total != output_size, total, RuntimeError,
                         f"repeat_interleave: invalid output_size, expected {{}} but got "
                         f"{output_size}")
    ends = xp.cumsum(xp.maximum(counts, 0))
    index = xp.searchsorted(ends, xp.arange(output_size, dtype=np.int64), side="right")
    return xp.minimum(index, max(n - 1, 0))  # (in range while an error is pending)
