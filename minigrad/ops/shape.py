"""Shape primitives: reshape, permute, expand, indexing, cat and split.

Everything else that moves data around (view, transpose, squeeze, unsqueeze, flatten,
stack, chunk, ...) is one of these in the Tensor methods.
"""
from .. import backend
from ..autograd.function import Primitive


class Reshape(Primitive):
    """out = x reshaped to shape;  dx = grad reshaped to x's shape"""
    view = True

    @staticmethod
    def aliases(x, out, shape):  # a view unless the layout forced a copy
        return out.base is not None and backend.xp_of(x).may_share_memory(x, out)

    node_name = "ViewBackward0"

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape)


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


class Expand(Primitive):
    """out = x broadcast to shape (a view);  dx = grad summed back over the broadcast dims"""
    view = True

    @staticmethod
    def forward(ctx, x, shape):
        return ctx.xp.broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, grad):
        return grad  # the engine sums the broadcast dims away (engine._reduce_to)


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


class Cat(Primitive):
    """out = concatenate(xs, dim);  dxs = grad split at the inputs' sizes along dim"""
    @staticmethod
    def forward(ctx, *xs, dim):
        ctx.sizes = tuple(x.shape[dim] for x in xs)
        return ctx.xp.concatenate(xs, axis=dim)

    @staticmethod
    def backward(ctx, grad):
        return Split.apply(grad, sizes=ctx.sizes, dim=ctx.params["dim"])


class Split(Primitive):
    """outs = x split into pieces of sizes along dim (views);  dx = cat(grads, dim)"""
    view = True

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


class SetItem(Primitive):
    """out = x with out[index][then] = value (``then``: the index arrays PyTorch applies
    after the integers and slices, or None);  dx = grad with 0 where out was written,
    dvalue = grad[index][then]"""
    @staticmethod
    def forward(ctx, x, value, index, then):
        out = x.copy()
        if then is None:
            out[index] = value
        else:
            out[index][then] = value  # basic indexing gives a view: this writes into out
        return out

    @staticmethod
    def backward(ctx, grad):
        index, then = ctx.params["index"], ctx.params["then"]
        dx = dvalue = None
        if ctx.needs_input_grad[0]:
            written = ctx.xp.zeros(grad.shape, dtype=bool)
            if then is None:
                written[index] = True
            else:
                written[index][then] = True
            dx = grad.masked_fill(grad._make(written), 0.0)
        if ctx.needs_input_grad[1]:
            dvalue = GetItem.apply(grad, index=index)
            if then is not None:
                dvalue = GetItem.apply(dvalue, index=then)
        return dx, dvalue

    node_name = "IndexPutBackward0"


class Overwrite(Primitive):
    """out = value broadcast to x's shape and cast to x's dtype (``copy_``, ``fill_``);
    dx = 0,  dvalue = grad (summed back over the broadcast dims by the engine)"""
    node_name = "CopyBackwards"

    @staticmethod
    def forward(ctx, x, value):
        out = ctx.xp.empty_like(x)
        out[...] = value
        return out

    @staticmethod
    def backward(ctx, grad):
        dx = grad.new_zeros(grad.shape) if ctx.needs_input_grad[0] else None
        return dx, grad if ctx.needs_input_grad[1] else None


class CopySlices(Primitive):
    """A base tensor after an in-place write through one of its views: out = base with
    view(out) = value, where ``chain`` redoes the view from the base (the write itself has
    already happened in the base's memory);  dbase = grad with 0 inside the view,
    dvalue = view(grad)"""
    @staticmethod
    def forward(ctx, base, value, chain):
        return base

    @staticmethod
    def backward(ctx, grad):
        chain = ctx.params["chain"]
        dbase = dvalue = None
        if ctx.needs_input_grad[0]:
            inside = grad._make(ctx.xp.zeros(grad.shape, dtype=bool))
            replay_view(inside, chain).data[...] = True
            dbase = grad.masked_fill(inside, 0.0)
        if ctx.needs_input_grad[1]:
            dvalue = replay_view(grad, chain)
        return dbase, dvalue

    node_name = "CopySlices"


def replay_view(t, chain):
    """Apply the view ops of ``chain`` ((op, params, output index) each) to ``t``."""
    for op, params, i in chain:
        out = op.apply(t, **params)
        t = out[i] if type(out) is tuple else out
    return t
