"""``linear``: x @ W^T + b as one op (PyTorch's addmm), beside the composite it equals."""
import math

from .. import backend
from ..autograd.function import Primitive, ShapeError, on_arrays
from ..autograd.grad_mode import STATE
from ..ops.elementwise import tangent_sum


def composite(x, weight, bias=None):
    """x @ W^T + b in plain Tensor ops: what ``Linear`` computes."""
    out = x @ weight.T
    return out if bias is None else out + bias


class Linear(Primitive):
    """out = x @ W^T + b;  dx = grad @ W,  dW = grad^T @ x,  db = grad summed over rows

    A primitive rather than matmul + add (PyTorch's addmm): every leading dim of x is
    flattened into rows, so forward and each gradient is one 2-D product. Composed of
    (B, T, in) @ (in, out), the weight's gradient would be B products (in, T) @ (T, out)
    summed afterwards: B times the memory, and several times slower.
    """
    node_name = "AddmmBackward0"

    @staticmethod
    def forward(ctx, x, weight, bias=None):
        if weight.ndim != 2 or x.ndim == 0 or x.shape[-1] != weight.shape[1]:
            expected = f" (expected (*, {weight.shape[1]}))" if weight.ndim == 2 else ""
            raise ShapeError(f"linear: input of shape {tuple(x.shape)} does not fit a weight of "
                             f"shape {tuple(weight.shape)}, which should be (out, in){expected}")
        if x.dtype != weight.dtype or (bias is not None and bias.dtype != x.dtype):
            dtypes = [str(a.dtype) for a in (x, weight, bias) if a is not None]
            raise RuntimeError(f"linear: expected input, weight and bias of one dtype, got "
                               f"{', '.join(dtypes)}")
        if bias is not None and bias.shape != weight.shape[:1]:
            raise ShapeError(f"linear: bias of shape {tuple(bias.shape)} does not fit a weight "
                             f"of shape {tuple(weight.shape)}")
        needs = ctx.needs_input_grad  # keep only what a gradient needs, as PyTorch
        ctx.save_for_backward(x if needs[1] else None, weight if needs[0] else None)
        out = _rows_product(ctx.xp, x, weight.T)  # (*, out)
        if bias is not None:
            backend.add_bias(out, bias)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        needs = ctx.needs_input_grad
        if not STATE.grad_enabled:  # no graph to build: the same products on raw arrays
            grads = on_arrays(_linear_backward, ctx.xp, grad.array, _data(x), _data(weight), needs)
            return tuple(None if g is None else grad._make(g) for g in grads[:len(needs)])
        n = math.prod(grad.shape[:-1])
        rows = grad.reshape(n, grad.shape[-1])                               # (rows, out)
        dx = (rows @ weight).reshape(grad.shape[:-1] + weight.shape[1:]) if needs[0] else None
        dw = rows.T @ x.reshape(n, x.shape[-1]) if needs[1] else None
        db = rows.sum(0) if len(needs) > 2 and needs[2] else None
        return dx, dw, db

    @staticmethod
    def jvp(ctx, dx, dw, db=None):  # dout = dx @ W^T + x @ dW^T + db
        x, weight = ctx.inputs[:2]
        return tangent_sum(None if dx is None else Linear.apply(dx, weight),
                           None if dw is None else Linear.apply(x, dw), db)

    @staticmethod
    def vmap(ctx, x, weight, bias=None):
        """The rows of every element through one weight; or each element's own weight (as in
        per-example gradients, where the weight is expanded): one batched product."""
        if not (ctx.batched[1] or ctx.batched[2:3] == (True,)):
            return Linear.apply(x, weight, bias)
        n = ctx.size
        x = ctx.expanded(0, x)
        rows = x.reshape((n, -1, x.shape[-1]))  # (N, M, in)
        out = rows.matmul(ctx.expanded(1, weight).transpose(1, 2))  # (N, M, out)
        if bias is not None:
            out = out + (bias.unsqueeze(1) if ctx.batched[2] else bias)
        return out.reshape(x.shape[:-1] + out.shape[-1:])


def _data(t):
    return None if t is None else t.array


def _rows_product(xp, x, w):
    """x (*, in) times w (in, out) as one 2-D product of its rows: (*, out), an array that
    owns its memory (written through a 2-D view of it), not a reshaped view of the product,
    so that a replayed step may write a later elementwise result into it (``reuse``)."""
    rows = math.prod(x.shape[:-1])  # (not reshape(-1, in): in may be 0)
    out = xp.empty(x.shape[:-1] + w.shape[1:], dtype=x.dtype)
    backend.matmul(xp, x.reshape(rows, x.shape[-1]), w, out=out.reshape(rows, w.shape[1]))
    return out


def _linear_backward(xp, grad, x, weight, needs):
    """``Linear.backward`` on raw arrays, the same array calls as its Tensor ops make (so
    the same bits): (dx, dW, db), None where ``needs`` says no gradient is wanted (and x
    or weight, which only the other's gradient reads, may be None then)."""
    n = math.prod(grad.shape[:-1])
    rows = grad.reshape(n, grad.shape[-1])
    dx = _rows_product(xp, grad, weight) if needs[0] else None
    dw = backend.matmul(xp, rows.T, x.reshape(n, x.shape[-1])) if needs[1] else None
    db = None
    if len(needs) > 2 and needs[2]:
        summed = rows.astype(xp.float32) if rows.dtype == xp.float16 else rows  # (as sum())
        db = backend.lead_sum(summed, (0,), False)
        if db is None:
            db = xp.sum(summed, axis=(0,), dtype=summed.dtype)
        db = db.astype(rows.dtype, copy=False)
    return dx, dw, db
