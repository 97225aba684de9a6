"""``dropout`` as one op, beside the composite it equals."""
from .. import backend
from ..autograd import batching
from ..autograd.function import Primitive
from ..autograd.grad_mode import STATE
from ..autograd.function import on_arrays
from .differentiate import saved_array


def composite(x, keep, p):
    """x * mask / (1 - p) in plain Tensor ops, for a given bool mask ``keep``: what
    ``Dropout`` computes with the mask it draws."""
    return x * keep.to(x.dtype) * (1.0 / (1.0 - p))


class Dropout(Primitive):
    """out = x * mask / (1 - p), mask ~ Bernoulli(1 - p);  dx = grad * mask / (1 - p)

    One op instead of three, which keeps the mask as bools (a byte an element, as PyTorch)
    rather than as a scaled float copy. The mask is drawn on the tensor's device (see
    ``backend.random``), so a seed fixes it.
    """
    @staticmethod
    def forward(ctx, x, p):
        keep = backend.keep_mask(x.shape, p, ctx.xp)
        ctx.save_for_backward(keep)
        return backend.dropout(x, keep, 1.0 / (1.0 - p))

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        scale = 1.0 / (1.0 - ctx.params["p"])
        if not STATE.grad_enabled:  # one pass (the forward's kernel) over raw arrays
            dx = on_arrays(backend.dropout, grad.array, keep.array, scale)
            return grad._make(ctx.xp.asarray(dx))
        return grad * keep * scale

    @staticmethod
    def jvp(ctx, dx):  # the same mask on the tangent
        keep = dx._make(saved_array(ctx, 0))
        return dx * keep * (1.0 / (1.0 - ctx.params["p"]))

    random = True  # (vmap asks its randomness mode, even for an unbatched x)

    @staticmethod
    def vmap(ctx, x, p):
        """randomness "different": one mask drawn for the whole batch; "same": one mask of
        an element's shape, for every element."""
        if batching.random_op(ctx, "dropout") == "different":
            return Dropout.apply(ctx.expanded(0, x), p=p)
        mask = Dropout.apply(x.new_ones(x.shape[1:] if ctx.batched[0] else x.shape), p=p)
        return ctx.expanded(0, x) * mask
