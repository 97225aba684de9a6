"""``dropout`` as one op, beside the composite it equals."""
from .. import backend
from ..autograd.function import Primitive


def composite(x, keep, p):
    """x * mask / (1 - p) in plain Tensor ops, for a given bool mask ``keep``: what
    ``Dropout`` computes with the mask it draws."""
    return x * keep.to(x.dtype) * (1.0 / (1.0 - p))


class Dropout(Primitive):
    """out = x * mask / (1 - p), mask ~ Bernoulli(1 - p);  dx = grad * mask / (1 - p)

    One op instead of three, which keeps the mask as bools (a byte an element, as PyTorch)
    rather than as a scaled float copy. The mask is drawn from minigrad's one generator on
    the host, so a seed fixes it on any device.
    """
    @staticmethod
    def forward(ctx, x, p):
        xp = ctx.xp
        keep = xp.asarray(backend.keep_mask(x.shape, p))
        ctx.save_for_backward(keep)
        return backend.dropout(x, keep, 1.0 / (1.0 - p))

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return grad * keep * (1.0 / (1.0 - ctx.params["p"]))
