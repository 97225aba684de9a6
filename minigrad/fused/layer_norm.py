"""``layer_norm`` as one op, beside the composite it equals."""
from .. import backend
from ..autograd import batching
from ..autograd.function import Primitive
from ..ops.elementwise import tangent_sum
from ..autograd.grad_mode import STATE
from ..autograd.function import on_arrays


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

    Forward saves its inputs and, on the CPU, each row's mean and rstd (as PyTorch does);
    backward makes xhat again from them. On the GPU each direction is one kernel (a block
    of threads per row, backward's making mean and rstd again); on the CPU a few NumPy
    passes.
    """
    node_name = "NativeLayerNormBackward0"  # (PyTorch's name)

    @staticmethod
    def forward(ctx, x, weight, bias, n, eps):
        y, mean, rstd = backend.layer_norm(x, weight, bias, n, eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        return backend.row_major(y)  # (whatever x's layout, as PyTorch's)

    @staticmethod
    def backward(ctx, grad):
        x, weight, mean, rstd = ctx.saved_tensors
        n, eps = ctx.params["n"], ctx.params["eps"]
        needs = ctx.needs_input_grad
        if not STATE.grad_enabled:  # one pass over raw arrays (one kernel on the GPU)
            w, mean, rstd = (None if t is None else t.array for t in (weight, mean, rstd))
            dx, gxhat = on_arrays(backend.layer_norm_backward, grad.array, x.array, w, n, eps,
                                  mean, rstd)
            return (grad._make(dx) if needs[0] else None,
                    grad._make(gxhat) if needs[1] else None, grad if needs[2] else None)
        # create_graph: the same formula in Tensor ops, so it can be differentiated again
        dims = tuple(range(x.ndim - n, x.ndim))
        centered = x - x.mean(dims, keepdim=True)
        rstd = ((centered * centered).mean(dims, keepdim=True) + eps).rsqrt()
        xhat = centered * rstd
        g = grad if weight is None else grad * weight
        dx = None
        if needs[0]:
            dx = rstd * (g - g.mean(dims, keepdim=True)
                         - xhat * (g * xhat).mean(dims, keepdim=True))
        dw = grad * xhat if needs[1] else None
        db = grad if needs[2] else None
        return dx, dw, db

    @staticmethod
    def jvp(ctx, dx, dw, db):
        """dout = dxhat * w + xhat * dw + db, with
        dxhat = rstd * (dx - mean(dx) - xhat * mean(dx * xhat))"""
        x, weight = ctx.inputs[:2]
        dims = tuple(range(x.ndim - ctx.params["n"], x.ndim))
        centered = x - x.mean(dims, keepdim=True)
        rstd = ((centered * centered).mean(dims, keepdim=True) + ctx.params["eps"]).rsqrt()
        xhat = centered * rstd
        dxhat = None
        if dx is not None:
            dxhat = rstd * (dx - dx.mean(dims, keepdim=True)
                            - xhat * (dx * xhat).mean(dims, keepdim=True))
            if weight is not None:
                dxhat = dxhat * weight
        return tangent_sum(dxhat, None if dw is None else xhat * dw, db)

    @staticmethod
    def vmap(ctx, x, weight, bias, n, eps):
        """The last n dims of each element; a batched weight or bias (each element's own)
        applied after the normalisation."""
        x = ctx.expanded(0, x)
        if not (ctx.batched[1] or ctx.batched[2]):
            return LayerNorm.apply(x, weight, bias, n=n, eps=eps)
        out = LayerNorm.apply(x, None, None, n=n, eps=eps)
        ndim = x.ndim - 1
        if weight is not None:
            out = out * (batching.pad(weight, ndim) if ctx.batched[1] else weight)
        if bias is not None:
            out = out + (batching.pad(bias, ndim) if ctx.batched[2] else bias)
        return out
