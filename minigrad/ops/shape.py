"""Shape primitives: reshape, permute, expand, indexing (and masked_select), scatter and
index_add, embedding, cat, split and unbind, flip and roll.

Each is linear, so its tangent (``jvp``, forward mode) is the op applied to the tangent.
Everything else that moves data around (view, flatten, chunk, ...) is one of these in the
Tensor methods. Where PyTorch's graph names a node by the call that made it (a transpose
is a permutation, ``x[0]`` an indexing, both named otherwise), a subclass with nothing but
that name records it: ``Transpose``, ``Select``, ``Unsqueeze``, ...
"""
import numpy as np

from .. import backend
from ..autograd import batching
from ..autograd.function import Primitive
from ..autograd.graph import TensorBase


class Reshape(Primitive):
    """out = x reshaped to shape;  dx = grad reshaped to x's shape"""
    view = True

    @staticmethod
    def aliases(x, out, shape):  # a view unless the layout forced a copy
        base = out.base  # (an array's base is the array that owns the memory)
        return base is not None and (base is x or base is x.base)

    node_name = "ViewBackward0"

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape)

    @staticmethod
    def jvp(ctx, dx):  # a linear op: its tangent is the op applied to the tangent
        return Reshape.apply(dx, **ctx.params)

    @staticmethod
    def vmap(ctx, x, shape):  # each element to shape
        return ctx.op.apply(x, shape=x.shape[:1] + tuple(shape))


class ReshapeAlias(Reshape):
    """out = x reshaped to shape;  dx = grad reshaped to x's shape

    ``reshape`` of a tensor whose memory is not in row-major order but can be seen with
    the new shape without a copy (PyTorch's ReshapeAliasBackward0)."""
    node_name = "ReshapeAliasBackward0"


class UnsafeView(Reshape):
    """out = x reshaped to shape;  dx = grad reshaped to x's shape

    ``reshape`` of a row-major copy (the ``CloneBackward0`` before it), where the input's
    layout could not be seen with the new shape (PyTorch's UnsafeViewBackward0). The result
    is a tensor of its own, as in PyTorch: it shares memory with no tensor the user holds."""
    node_name = "UnsafeViewBackward0"
    view = False


class Unsqueeze(Reshape):
    """out = x with a dim of size 1 added;  dx = grad reshaped to x's shape

    ``unsqueeze`` (PyTorch's UnsqueezeBackward0)."""
    node_name = "UnsqueezeBackward0"


class Squeeze(Reshape):
    """out = x without its dims of size 1;  dx = grad reshaped to x's shape

    ``squeeze()`` (PyTorch's SqueezeBackward0)."""
    node_name = "SqueezeBackward0"


class SqueezeDim(Reshape):
    """out = x without dim if of size 1;  dx = grad reshaped to x's shape

    ``squeeze(dim)`` (PyTorch's SqueezeBackward1)."""
    node_name = "SqueezeBackward1"


class SqueezeDims(Reshape):
    """out = x without the dims given that are of size 1;  dx = grad reshaped to x's shape

    ``squeeze(dims)`` (PyTorch's SqueezeBackward2)."""
    node_name = "SqueezeBackward2"


class SqueezeDimInPlace(Reshape):
    """out = x without dim if of size 1;  dx = grad reshaped to x's shape

    The last step of ``matmul`` with a 1-D first operand (PyTorch's SqueezeBackward4, its
    in-place ``squeeze_(dim)``)."""
    node_name = "SqueezeBackward4"


class Permute(Primitive):
    """out = x with axes reordered by dims;  dx = grad with the inverse order"""
    view = True

    @staticmethod
    def forward(ctx, x, dims):
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, grad):
        dims = ctx.params["dims"]
        inverse = sorted(range(len(dims)), key=dims.__getitem__)
        return grad.permute(inverse)

    @staticmethod
    def jvp(ctx, dx):
        return Permute.apply(dx, **ctx.params)

    @staticmethod
    def vmap(ctx, x, dims):  # the batch dim stays first
        return ctx.op.apply(x, dims=(0,) + tuple(d + 1 for d in dims))


class Transpose(Permute):
    """out = x with two dims swapped;  dx = grad with them swapped back

    ``transpose(d0, d1)`` (PyTorch's TransposeBackward0)."""
    node_name = "TransposeBackward0"


class MatrixTranspose(Permute):
    """out = x^T;  dx = grad^T

    ``t()``, a matrix's transpose (PyTorch's TBackward0)."""
    node_name = "TBackward0"


class Diagonal(Primitive):
    """out = the entries [i, i + offset] of dims dim1 and dim2 as the last dim (a view of
    x's memory);  dx = zeros of x's shape with grad on that diagonal"""
    view = True

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.shape = x.shape
        return diagonal_view(ctx.xp, x, offset, dim1, dim2)

    @staticmethod
    def backward(ctx, grad):
        dx = grad.new_zeros(ctx.shape)
        dx.diagonal(**ctx.params).copy_(grad)
        return dx

    @staticmethod
    def jvp(ctx, dx):
        return Diagonal.apply(dx, **ctx.params)

    @staticmethod
    def vmap(ctx, x, offset, dim1, dim2):  # the batch dim stays first
        return ctx.op.apply(x, offset=offset, dim1=dim1 + 1, dim2=dim2 + 1)


def diagonal_view(xp, x, offset, dim1, dim2):
    """The diagonal ``offset`` of dims ``dim1`` and ``dim2`` of the array ``x`` (both
    non-negative and distinct) as a view, its entries along a new last dim: the other dims,
    then one step of both dims at once per entry."""
    rows, cols = x.shape[dim1], x.shape[dim2]
    n = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    first = [slice(None)] * x.ndim  # (the view starts at the diagonal's first entry)
    if n:
        first[dim1], first[dim2] = slice(-min(offset, 0), None), slice(max(offset, 0), None)
    start = x[tuple(first)]
    others = [d for d in range(x.ndim) if d not in (dim1, dim2)]
    shape = tuple(x.shape[d] for d in others) + (n,)
    strides = tuple(x.strides[d] for d in others) + (x.strides[dim1] + x.strides[dim2],)
    return xp.lib.stride_tricks.as_strided(start, shape, strides)


class Expand(Primitive):
    """out = x broadcast to shape (a view);  dx = grad summed back over the broadcast dims"""
    view = True

    @staticmethod
    def forward(ctx, x, shape):
        lead = len(shape) - x.ndim
        if shape[lead:] == x.shape and all(n == 1 for n in shape[:lead]):
            return x[(None,) * lead + (Ellipsis,)]  # no element repeated: a plain view
        out = ctx.xp.broadcast_to(x, shape)
        flags = out.flags
        if not getattr(flags, "writeable", True):
            # NumPy makes every broadcast read-only; PyTorch refuses a write only into a
            # tensor whose elements overlap (checked at the write), so a row of an expanded
            # tensor may be written, as x's memory may
            flags.writeable = x.flags.writeable
        return out

    @staticmethod
    def backward(ctx, grad):
        return grad  # the engine sums the broadcast dims away (engine._reduce_to)

    @staticmethod
    def jvp(ctx, dx):
        return Expand.apply(dx, **ctx.params)

    @staticmethod
    def vmap(ctx, x, shape):
        x = batching.pad(x, len(shape))
        return Expand.apply(x, shape=x.shape[:1] + tuple(shape))


def is_basic_index(index):
    """True when ``index`` selects each element at most once (no integer arrays)."""
    for i in index if isinstance(index, tuple) else (index,):
        if hasattr(i, "dtype") and i.dtype.kind in "iu":
            return False
    return True


def _as_view_index(index):
    """``index`` such that basic indexing gives a view even when it picks one element
    (NumPy returns a scalar copy for ``a[0, 1]``, a 0-d view for ``a[0, 1, ...]``)."""
    items = index if isinstance(index, tuple) else (index,)
    if any(type(i) in backend._XP_BY_TYPE or i is Ellipsis for i in items):
        return index
    return items + (Ellipsis,)


class GetItem(Primitive):
    """out = x[index];  dx = zeros of x's shape with grad added at index (repeats accumulate)"""
    view = True

    @staticmethod
    def aliases(x, out, index):  # basic indexing makes a view; index arrays and masks copy
        items = index if isinstance(index, tuple) else (index,)
        return not any(type(i) in backend._XP_BY_TYPE for i in items)

    node_name = "IndexBackward0"

    @staticmethod
    def forward(ctx, x, index):
        ctx.shape, ctx.dtype = x.shape, x.dtype
        return x[_as_view_index(index)]

    @staticmethod
    def backward(ctx, grad):
        return IndexAdd.apply(grad, shape=ctx.shape, index=ctx.params["index"])

    @staticmethod
    def jvp(ctx, dx):
        return GetItem.apply(dx, **ctx.params)

    @staticmethod
    def vmap(ctx, x, index):
        """The whole batch dim, then index (``batched_index``)."""
        return ctx.op.apply(x, index=batched_index(ctx, x, index))


class Select(GetItem):
    """out = x[index];  dx = zeros of x's shape with grad added at index

    Basic indexing whose last effective part is an int (PyTorch's SelectBackward0)."""
    node_name = "SelectBackward0"


class Slice(GetItem):
    """out = x[index];  dx = zeros of x's shape with grad added at index

    Basic indexing whose last effective part is a slice (PyTorch's SliceBackward0)."""
    node_name = "SliceBackward0"


class NewAxis(GetItem):
    """out = x[index];  dx = zeros of x's shape with grad added at index

    Basic indexing whose last effective part is None (PyTorch's UnsqueezeBackward0)."""
    node_name = "UnsqueezeBackward0"


class Alias(GetItem):
    """out = x[index];  dx = zeros of x's shape with grad added at index

    Basic indexing that changes nothing, as ``x[...]`` (PyTorch's AliasBackward0)."""
    node_name = "AliasBackward0"


class Gather(GetItem):
    """out = x at index, an array per dim (``gather``: the given indices along one dim,
    aranges along the others);  dx = zeros of x's shape with grad added at index (repeats
    accumulate)

    PyTorch's GatherBackward0."""
    node_name = "GatherBackward0"


class IndexSelect(GetItem):
    """out = x at index, the entries of a vector of ints along one dim;  dx = zeros of x's
    shape with grad added at index (repeats accumulate)

    ``index_select`` (PyTorch's IndexSelectBackward0; row-major, as PyTorch's)."""
    node_name = "IndexSelectBackward0"

    @staticmethod
    def forward(ctx, x, index):
        return backend.row_major(GetItem.forward(ctx, x, index))


class Sort(GetItem):
    """out = x at index, the order that sorts x along one dim (as ``Gather``);  dx = zeros
    of x's shape with grad written at index

    The values of ``sort`` (PyTorch's SortBackward0)."""
    node_name = "SortBackward0"


class Topk(GetItem):
    """out = x at index, the places of the k largest (or smallest) along one dim (as
    ``Gather``);  dx = zeros of x's shape with grad written at index

    The values of ``topk`` (PyTorch's TopkBackward0)."""
    node_name = "TopkBackward0"


def batched_index(ctx, x, index):
    """``index`` of one element as the index of the batch (``x``, the batch at dim 0).

    Where the index arrays (and the ints among them, which NumPy then counts as arrays)
    are next to each other, NumPy puts their dims where they stand: a leading slice keeps
    the batch dim in front. Apart, NumPy moves their dims in front of every other: the
    batch dim is indexed by an array too, ``arange(batch)`` with a dim per broadcast dim
    of the others, so that it leads the broadcast dims."""
    items = index if isinstance(index, tuple) else (index,)
    arrays = [k for k, i in enumerate(items) if _is_array(i)]
    if not arrays:
        return (slice(None),) + items
    advanced = [k for k, i in enumerate(items) if _is_array(i) or _is_int(i)]
    if advanced[-1] - advanced[0] == len(advanced) - 1:
        return (slice(None),) + items
    dims = max(1 if i.dtype == bool else i.ndim for i in map(_as_array, items)
               if i is not None)
    return (_batch_rows(ctx, x, dims),) + items


def _batch_rows(ctx, x, dims):
    """``arange(batch)`` on ``x``'s device, as an index array with ``dims`` size-1 dims
    after the batch's, to broadcast with index arrays of up to ``dims`` dims."""
    return backend.xp_of(x.array).arange(ctx.size).reshape((ctx.size,) + (1,) * dims)


def _is_array(i):
    return getattr(i, "ndim", 0) > 0 or isinstance(i, (list, TensorBase))


def _is_int(i):
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)) or \
        getattr(i, "ndim", None) == 0 and i.dtype.kind in "iu"


def _as_array(i):
    """An advanced index item as an array (None for a slice, None or Ellipsis)."""
    if _is_array(i) or _is_int(i):
        return np.asarray(i) if isinstance(i, (list, int, np.integer)) else i
    return None


def indexing_op(index, shape):
    """The GetItem class of ``x[index]`` (``x`` of ``shape``), named as the last node of
    PyTorch's graph: GetItem (IndexBackward0) where the index holds an array; else by the
    last part that does something, PyTorch applying the parts in order and skipping a slice
    that keeps a whole dim (but a lone slice, as ``x[:]``, is a Slice)."""
    items = index if isinstance(index, tuple) else (index,)
    if any(getattr(i, "ndim", 0) > 0 for i in items):
        return GetItem
    if isinstance(index, slice):
        return Slice
    used = sum(1 for i in items if i is not None and i is not Ellipsis
               and not isinstance(i, (bool, np.bool_)))
    parts, dim = [], 0  # (item, the dim of x it indexes)
    for i in items:
        if i is Ellipsis:
            dim += len(shape) - used
        elif i is None or isinstance(i, (bool, np.bool_)):
            parts.append((None, dim))
        else:
            parts.append((i, dim))
            dim += 1
    for i, d in reversed(parts):
        if i is None:
            return NewAxis
        if not isinstance(i, slice):
            return Select
        if not (d < len(shape) and i.indices(shape[d]) == (0, shape[d], 1)):
            return Slice
    return Alias


class IndexAdd(Primitive):
    """out = zeros(shape) with out[index] += grad;  dgrad = dout[index]  (GetItem's gradient)"""
    @staticmethod
    def forward(ctx, grad, shape, index):
        out = ctx.xp.zeros(shape, dtype=grad.dtype)
        if is_basic_index(index):
            out[index] = grad
        else:
            backend.scatter_add(out, index, grad)
        return out

    @staticmethod
    def backward(ctx, grad):
        return GetItem.apply(grad, index=ctx.params["index"])

    @staticmethod
    def jvp(ctx, dgrad):
        return IndexAdd.apply(dgrad, **ctx.params)

    @staticmethod
    def vmap(ctx, grad, shape, index):  # GetItem's, in reverse
        return IndexAdd.apply(grad, shape=grad.shape[:1] + tuple(shape),
                              index=batched_index(ctx, grad, index))


class MaskedSelect(GetItem):
    """out = x[mask], the elements where mask (of x's shape) is True, in row-major order;
    dx = zeros of x's shape with grad written where mask is True

    ``masked_select`` (PyTorch's MaskedSelectBackward0); ``index`` is the mask."""
    node_name = "MaskedSelectBackward0"


class ScatterAdd(Primitive):
    """out = x with src added at index (``scatter_add``: index holds an array per dim;
    repeats accumulate);  dx = grad,  dsrc = grad[index]"""
    node_name = "ScatterAddBackward0"

    @staticmethod
    def forward(ctx, x, src, index):
        return backend.scatter_add(x.copy(), index, src)

    @staticmethod
    def backward(ctx, grad):
        index = ctx.params["index"]
        dsrc = GetItem.apply(grad, index=index) if ctx.needs_input_grad[1] else None
        return grad if ctx.needs_input_grad[0] else None, dsrc

    @staticmethod
    def jvp(ctx, dx, dsrc):
        x, src = ctx.inputs
        dx = x.new_zeros(x.shape) if dx is None else dx
        dsrc = src.new_zeros(src.shape) if dsrc is None else dsrc
        return ScatterAdd.apply(dx, dsrc, **ctx.params)

    @staticmethod
    def vmap(ctx, x, src, index):
        """Both batched (expanded where not); the index gets the batch's arange in front
        (the index arrays give every coordinate, so the batch's is one more)."""
        x, src = ctx.expanded(0, x), ctx.expanded(1, src)
        return ctx.op.apply(x, src, index=_with_batch_coordinate(ctx, x, index))


def _with_batch_coordinate(ctx, x, index):
    """An index that holds an array per dim, for the batch (``x``): the batch's own
    coordinate, ``arange(batch)`` broadcast against the others, in front."""
    return (_batch_rows(ctx, x, max(i.ndim for i in index)),) + tuple(index)


class IndexAddAlong(ScatterAdd):
    """out = x with src added at index (``index_add``: the entries of a vector of ints along
    one dim; repeats accumulate);  dx = grad,  dsrc = grad[index]

    PyTorch's IndexAddBackward0 (``IndexAdd`` is GetItem's gradient)."""
    node_name = "IndexAddBackward0"


class Embedding(Primitive):
    """out = weight[index] (the rows of the ids in ``index``);  dweight = zeros of weight's
    shape with grad's rows added at their ids (repeats accumulate), those of the id
    ``padding_idx`` (None: none) left out, so that its row gets no gradient"""
    @staticmethod
    def forward(ctx, weight, index, padding_idx):
        ctx.shape = weight.shape
        return weight[index]

    @staticmethod
    def backward(ctx, grad):
        return EmbeddingDenseBackward.apply(grad, shape=ctx.shape, **ctx.params)

    @staticmethod
    def jvp(ctx, dweight):  # linear in weight, padding rows too (as PyTorch's)
        return Embedding.apply(dweight, **ctx.params)

    @staticmethod
    def vmap(ctx, weight, index, padding_idx):
        """The ids are every element's (a batch of ids comes as a one-hot product, see
        nn.functional.embedding). A batch of tables (B, V, D) is one table whose row of an
        id holds that id's row of every element, (V, B * D): its rows picked by the ids,
        then the batch moved in front. Its padding row is every element's."""
        n, rows, width = weight.shape
        table = weight.movedim(0, 1).reshape((rows, n * width))
        out = Embedding.apply(table, index=index, padding_idx=padding_idx)
        return out.reshape(out.shape[:-1] + (n, width)).movedim(-2, 0)


class EmbeddingDenseBackward(Primitive):
    """out = an embedding's weight gradient: zeros of ``shape`` with grad's rows added at
    their ids, those of ``padding_idx`` left out;  dgrad = dout's rows by id, 0 at padding"""
    @staticmethod
    def forward(ctx, grad, index, shape, padding_idx):
        return backend.embedding_backward(grad, index, shape, padding_idx)

    @staticmethod
    def backward(ctx, dout):
        index, padding_idx = ctx.params["index"], ctx.params["padding_idx"]
        rows = Embedding.apply(dout, index=index, padding_idx=None)
        if padding_idx is None:
            return rows
        return rows.masked_fill(rows._make((index == padding_idx)[..., None]), 0)

    @staticmethod
    def jvp(ctx, dgrad):
        return EmbeddingDenseBackward.apply(dgrad, **ctx.params)

    @staticmethod
    def vmap(ctx, grad, index, shape, padding_idx):
        """Embedding's, in reverse: the batch's rows (B, ..., D) side by side, (..., B * D),
        added at their ids into one (V, B * D) gradient, whose columns part again."""
        n, width = grad.shape[0], grad.shape[-1]
        rows = grad.movedim(0, -2)
        rows = rows.reshape(rows.shape[:-2] + (n * width,))
        out = EmbeddingDenseBackward.apply(rows, index=index, shape=(shape[0], n * width),
                                           padding_idx=padding_idx)
        return out.reshape((shape[0], n, width)).movedim(1, 0)


class Cat(Primitive):
    """out = concatenate(xs, dim);  dxs = grad split at the inputs' sizes along dim

    As in PyTorch, a 1-D empty x (shape (0,)) among tensors of more dims is left out of
    the concatenation but stays an input: its gradient is empty too."""
    @staticmethod
    def forward(ctx, *xs, dim):
        parts = xs
        for x in xs:
            if x.shape == (0,):
                parts = [a for a in xs if a.shape != (0,)]
                if not parts or parts[0].ndim == 1:
                    parts = xs
                break
        if parts is xs:
            ctx.sizes = tuple(x.shape[dim] for x in xs)
        else:
            ctx.sizes = tuple(None if x.shape == (0,) else x.shape[dim] for x in xs)
        return backend.row_major(ctx.xp.concatenate(parts, axis=dim))  # (as PyTorch's)

    @staticmethod
    def backward(ctx, grad):
        sizes, dim = ctx.sizes, ctx.params["dim"]
        if None not in sizes:
            return Split.apply(grad, sizes=sizes, dim=dim)
        pieces = iter(Split.apply(grad, sizes=tuple(n for n in sizes if n is not None),
                                  dim=dim))
        empty = grad._make(ctx.xp.zeros((0,), grad.dtype))  # a left-out input's gradient
        return tuple(empty if n is None else next(pieces) for n in sizes)

    @staticmethod
    def jvp(ctx, *dxs):  # inputs without a tangent contribute zeros
        dxs = [x.new_zeros(x.shape) if d is None else d for x, d in zip(ctx.inputs, dxs)]
        return Cat.apply(*dxs, **ctx.params)

    @staticmethod
    def vmap(ctx, *xs, dim):
        xs = [ctx.expanded(i, x) for i, x in enumerate(xs)]
        return ctx.op.apply(*xs, dim=dim + 1)


class Stack(Cat):
    """out = stack(xs, dim), along a new dim;  dxs = grad unbound along dim"""
    @staticmethod
    def forward(ctx, *xs, dim):
        return backend.row_major(ctx.xp.stack(xs, axis=dim))

    @staticmethod
    def backward(ctx, grad):
        return grad.unbind(ctx.params["dim"])

    @staticmethod
    def jvp(ctx, *dxs):  # inputs without a tangent contribute zeros
        dxs = [x.new_zeros(x.shape) if d is None else d for x, d in zip(ctx.inputs, dxs)]
        return Stack.apply(*dxs, **ctx.params)


class Split(Primitive):
    """outs = x split into pieces of sizes along dim (views);  dx = cat(grads, dim)"""
    view = multiple_views = True

    node_name = "SplitBackward0"

    @staticmethod
    def forward(ctx, x, sizes, dim):
        if sum(sizes) != x.shape[dim]:
            raise ValueError(f"split sizes {list(sizes)} do not add up to {x.shape[dim]}, "
                             f"the size of dim {dim}")
        bounds, start = [], 0
        for n in sizes[:-1]:
            start += n
            bounds.append(start)
        return tuple(ctx.xp.split(x, bounds, axis=dim))

    @staticmethod
    def backward(ctx, *grads):
        return Cat.apply(*grads, dim=ctx.params["dim"])

    @staticmethod
    def jvp(ctx, dx):
        return Split.apply(dx, **ctx.params)

    vmap = batching.along("dim")


class SplitWithSizes(Split):
    """outs = x split into pieces of sizes along dim (views);  dx = cat(grads, dim)

    ``split`` with a list of sizes (PyTorch's SplitWithSizesBackward0)."""
    node_name = "SplitWithSizesBackward0"


class Unbind(Primitive):
    """outs = the slices of x along dim, each without that dim (views);  dx = stack(grads,
    dim)"""
    view = multiple_views = True

    node_name = "UnbindBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        lead = (slice(None),) * dim
        return tuple(x[lead + (i, Ellipsis)] for i in range(x.shape[dim]))

    @staticmethod
    def backward(ctx, *grads):
        return Stack.apply(*grads, dim=ctx.params["dim"])

    @staticmethod
    def jvp(ctx, dx):
        return Unbind.apply(dx, **ctx.params)

    vmap = batching.along("dim")


class Repeat(Primitive):
    """out = x tiled sizes[k] times along dim k (new leading dims where sizes is longer), a
    new row-major tensor;  dx = grad with its copies summed"""
    @staticmethod
    def forward(ctx, x, sizes):
        ctx.shape = x.shape
        out = ctx.xp.tile(x, sizes)
        return out if out.flags.c_contiguous else ctx.xp.ascontiguousarray(out)

    @staticmethod
    def backward(ctx, grad):
        sizes, shape = ctx.params["sizes"], ctx.shape
        shape = (1,) * (len(sizes) - len(shape)) + tuple(shape)
        # (r0, n0, r1, n1, ...): summed over the dims of the copies
        grad = grad.reshape(tuple(v for r, n in zip(sizes, shape) for v in (r, n)))
        dims = tuple(2 * k for k, r in enumerate(sizes) if r != 1)
        if dims:
            grad = grad.sum(dims, keepdim=True)
        return grad.reshape(ctx.shape)

    @staticmethod
    def jvp(ctx, dx):
        return Repeat.apply(dx, **ctx.params)

    @staticmethod
    def vmap(ctx, x, sizes):  # the batch dim repeated once
        x = batching.pad(x, len(sizes))
        return Repeat.apply(x, sizes=(1,) + tuple(sizes))


class Tril(Primitive):
    """out = x with the elements above diagonal ``diagonal`` of its last two dims set to 0;
    dx = tril(grad, diagonal)"""
    @staticmethod
    def forward(ctx, x, diagonal):
        n, m = x.shape[-2:]
        keep = ctx.xp.tri(n, m, diagonal, dtype=np.bool_)
        return ctx.xp.where(keep, x, x.dtype.type(0))

    @staticmethod
    def backward(ctx, grad):
        return Tril.apply(grad, **ctx.params)

    @staticmethod
    def jvp(ctx, dx):
        return Tril.apply(dx, **ctx.params)

    vmap = batching.leading


class Triu(Primitive):
    """out = x with the elements below diagonal ``diagonal`` of its last two dims set to 0;
    dx = triu(grad, diagonal)"""
    @staticmethod
    def forward(ctx, x, diagonal):
        n, m = x.shape[-2:]
        below = ctx.xp.tri(n, m, diagonal - 1, dtype=np.bool_)
        return ctx.xp.where(below, x.dtype.type(0), x)

    @staticmethod
    def backward(ctx, grad):
        return Triu.apply(grad, **ctx.params)

    @staticmethod
    def jvp(ctx, dx):
        return Triu.apply(dx, **ctx.params)

    vmap = batching.leading


class Flip(Primitive):
    """out = x with the order of its elements reversed along dims (a copy);  dx = grad
    reversed along the same dims"""
    @staticmethod
    def forward(ctx, x, dims):
        reverse = tuple(slice(None, None, -1) if d in dims else slice(None)
                        for d in range(x.ndim))
        return x[reverse + (Ellipsis,)].copy()  # (the slice is a view; PyTorch's flip copies)

    @staticmethod
    def backward(ctx, grad):
        return Flip.apply(grad, **ctx.params)

    @staticmethod
    def jvp(ctx, dx):
        return Flip.apply(dx, **ctx.params)

    vmap = batching.along("dims")


class Roll(Primitive):
    """out = x with its elements shifted by shifts along dims, those pushed past the end
    coming back at the start (dims None: the flattened x, its shape kept);  dx = grad
    rolled back by -shifts"""
    @staticmethod
    def forward(ctx, x, shifts, dims):
        if dims is None:
            return ctx.xp.roll(x.reshape(-1), shifts, axis=0).reshape(x.shape)
        return backend.row_major(ctx.xp.roll(x, shifts, axis=dims))

    @staticmethod
    def backward(ctx, grad):
        p = ctx.params
        back = -p["shifts"] if p["dims"] is None else tuple(-s for s in p["shifts"])
        return Roll.apply(grad, shifts=back, dims=p["dims"])

    @staticmethod
    def jvp(ctx, dx):
        return Roll.apply(dx, **ctx.params)

    @staticmethod
    def vmap(ctx, x, shifts, dims):
        if dims is None:  # a roll of each element flattened, its shape kept
            flat = Roll.apply(x.reshape((x.shape[0], -1)), shifts=(shifts,), dims=(1,))
            return flat.reshape(x.shape)
        return Roll.apply(x, shifts=shifts, dims=batching.shifted(dims, x.ndim - 1))


class MedianDim(GetItem):
    """out = x at index, the lower median's place along one dim (as ``Gather``);  dx = zeros
    of x's shape with grad written at index

    The values of ``median(dim)`` (PyTorch's MedianBackward1)."""
    node_name = "MedianBackward1"


class NanmedianDim(GetItem):
    """out = x at index, the lower median's place among the numbers (not NaN) along one dim
    (as ``Gather``);  dx = zeros of x's shape with grad written at index

    The values of ``nanmedian(dim)`` (PyTorch's NanmedianBackward1)."""
    node_name = "NanmedianBackward1"


class Kthvalue(GetItem):
    """out = x at index, the place of the k-th smallest along one dim (as ``Gather``);
    dx = zeros of x's shape with grad written at index

    The values of ``kthvalue`` (PyTorch's KthvalueBackward0)."""
    node_name = "KthvalueBackward0"


class Mode(GetItem):
    """out = x at index, the place of the most frequent value along one dim (as ``Gather``);
    dx = zeros of x's shape with grad written at index

    The values of ``mode`` (PyTorch's ModeBackward0)."""
    node_name = "ModeBackward0"


class Cummax(GetItem):
    """out = x at index, the place of the running max along one dim (as ``Gather``);
    dx = zeros of x's shape with grad added at index (repeats accumulate)

    The values of ``cummax`` (PyTorch's CummaxBackward0)."""
    node_name = "CummaxBackward0"


class Cummin(GetItem):
    """out = x at index, the place of the running min along one dim (as ``Gather``);
    dx = zeros of x's shape with grad added at index (repeats accumulate)

    The values of ``cummin`` (PyTorch's CumminBackward0)."""
    node_name = "CumminBackward0"


class Take(GetItem):
    """out = x.reshape(-1)[index];  dx = zeros with grad added at index (repeats accumulate)

    ``take`` (PyTorch's TakeBackward0; given the flattened tensor)."""
    node_name = "TakeBackward0"


class Unfold(Primitive):
    """out = the windows of ``size`` elements, ``step`` apart, along ``dim``: that dim
    counts the windows and a new last dim runs through each (a view of x's memory);
    dx = zeros of x's shape with each window's grad added back where it was read (windows
    that overlap add up)

    ``Tensor.unfold`` (PyTorch's UnfoldBackward0)."""
    view = True
    node_name = "UnfoldBackward0"

    @staticmethod
    def forward(ctx, x, dim, size, step):
        ctx.shape = x.shape
        count = (x.shape[dim] - size) // step + 1
        shape = x.shape[:dim] + (count,) + x.shape[dim + 1:] + (size,)
        strides = x.strides[:dim] + (x.strides[dim] * step,) + x.strides[dim + 1:] + \
            (x.strides[dim],)
        return ctx.xp.lib.stride_tricks.as_strided(x, shape, strides)

    @staticmethod
    def backward(ctx, grad):
        dim, size, step = ctx.params["dim"], ctx.params["size"], ctx.params["step"]
        count = grad.shape[dim]
        xp = backend.xp_of(grad.array)
        places = (xp.arange(count)[:, None] * step + xp.arange(size)[None, :]).reshape(-1)
        windows = grad.movedim(-1, dim + 1)
        windows = windows.reshape(ctx.shape[:dim] + (count * size,) + ctx.shape[dim + 1:])
        return grad.new_zeros(ctx.shape).index_add(dim, grad._make(places), windows)

    @staticmethod
    def jvp(ctx, dx):
        return Unfold.apply(dx, **ctx.params)

    @staticmethod
    def vmap(ctx, x, dim, size, step):  # the batch dim stays first
        return ctx.op.apply(x, dim=dim + 1, size=size, step=step)
