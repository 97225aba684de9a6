"""What in-place ops record (see the in-place section of ``Tensor``): an in-place op is
computed out of place and written into the tensor's memory; these are the nodes that
describe such a write to the graph.
"""
from ..autograd import batching
from ..autograd.function import Primitive, replay_view
from .shape import GetItem, batched_index


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
        if ctx.needs_input_grad[0]:  # (zeros written where forward wrote: one recorded op)
            dx = SetItem.apply(grad, 0.0, index=index, then=then)
        if ctx.needs_input_grad[1]:
            dvalue = GetItem.apply(grad, index=index)
            if then is not None:
                dvalue = GetItem.apply(dvalue, index=then)
        return dx, dvalue

    @staticmethod
    def jvp(ctx, dx, dvalue):  # x's tangent with value's written in the same places
        x = ctx.inputs[0]
        dx = x.new_zeros(x.shape) if dx is None else dx
        return SetItem.apply(dx, 0.0 if dvalue is None else dvalue, **ctx.params)

    node_name = "IndexPutBackward0"

    @staticmethod
    def vmap(ctx, x, value, index, then):
        """Into every element: x expanded (the write is into a copy), the index and
        ``then`` as the batch's (``batched_index``: the batch dim leads the region
        written), a batched value lined up with the region's dims from the right."""
        x = ctx.expanded(0, x)
        index = batched_index(ctx, x, index)
        if then is not None:
            then = batched_index(ctx, x, then)
        if ctx.batched[1]:
            region = x.array[index]  # (only its number of dims is read)
            region = region if then is None else region[then]
            value = batching.pad(value, region.ndim - 1)
        return ctx.op.apply(x, value, index=index, then=then)


class Scatter(SetItem):
    """out = x with out[index] = src (``scatter``: index holds an array per dim);
    dx = grad with 0 where out was written,  dsrc = grad[index]

    ``scatter(dim, index, src)`` (PyTorch's ScatterBackward0)."""
    node_name = "ScatterBackward0"


class ScatterValue(SetItem):
    """out = x with out[index] = value (a number);  dx = grad with 0 where out was written

    ``scatter(dim, index, value)`` (PyTorch's ScatterBackward1)."""
    node_name = "ScatterBackward1"


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

    @staticmethod
    def jvp(ctx, dx, dvalue):  # value's tangent, broadcast to x's shape
        x = ctx.inputs[0]
        return Overwrite.apply(x.new_zeros(x.shape), 0.0 if dvalue is None else dvalue)

    @staticmethod
    def vmap(ctx, x, value):  # value broadcast to each element of x
        if ctx.batched[1]:
            value = batching.pad(value, ctx.ndim(0, x))
        return Overwrite.apply(ctx.expanded(0, x), value)


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
            replay_view(inside, chain).array[...] = True
            dbase = grad.masked_fill(inside, 0.0)
        if ctx.needs_input_grad[1]:
            dvalue = replay_view(grad, chain)
        return dbase, dvalue

    @staticmethod
    def jvp(ctx, dbase, dvalue):  # base's tangent with value's written into the view
        from ..autograd.forward_ad import written_tangent
        return written_tangent(ctx.inputs[0], dbase, ctx.params["chain"], dvalue)

    node_name = "CopySlices"

    vmap = batching.loop
