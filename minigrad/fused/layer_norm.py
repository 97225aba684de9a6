"""``layer_norm`` as one op, beside the composite it equals."""
from ..autograd.function import Primitive


def composite(x, weight, bias, n, eps):
    """(x - mean) / sqrt(var + eps) * w + b over the last ``n`` dims, in plain Tensor ops
    (biased variance, eps inside the square root): what ``LayerNorm`` computes."""
    dims = tuple(range(x.ndim - n, x.ndim))
    centered = x - x.mean(dims, keepdim=True)
    out = centered / ((centered * centered).mean(dims, keepdim=True) + eps).sqrt()
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


class LayerNorm(Primitive):
    """out = (x - mean) / sqrt(var + eps) * w + b over the last ``n`` dims (biased variance);
    dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = grad * w,
    dw = grad * xhat,  db = grad  (summed over the leading dims by the engine)

    Forward makes four passes and saves only its inputs; backward recomputes xhat from x.
    """
    @staticmethod
    def forward(ctx, x, weight, bias, n, eps):
        xp = ctx.xp
        axes = tuple(range(x.ndim - n, x.ndim))
        centered = x - x.mean(axis=axes, keepdims=True)
        var = xp.mean(centered * centered, axis=axes, keepdims=True)
        centered *= 1.0 / xp.sqrt(var + eps)                                 # xhat
        if weight is not None:
            centered *= weight
        if bias is not None:
            centered += bias
        ctx.save_for_backward(x, weight)
        return centered

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        n, eps = ctx.params["n"], ctx.params["eps"]
        dims = tuple(range(x.ndim - n, x.ndim))
        centered = x - x.mean(dims, keepdim=True)
        rstd = ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
        xhat = centered * rstd
        g = grad if weight is None else grad * weight
        needs = ctx.needs_input_grad
        dx = None
        if needs[0]:
            dx = rstd * (g - g.mean(dims, keepdim=True)
                         - xhat * (g * xhat).mean(dims, keepdim=True))
        dw = grad * xhat if needs[1] else None
        db = grad if needs[2] else None
        return dx, dw, db
