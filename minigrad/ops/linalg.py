"""Matrix product, batched and broadcasting over leading dims (1-D cases are handled by
``Tensor.matmul``, which adds and removes the missing dims around this primitive)."""
from .. import backend
from ..autograd import batching
from ..autograd.function import Primitive, ShapeError
from .elementwise import tangent_sum


class MatMul(Primitive):
    """out = x @ y;  dx = grad @ y^T,  dy = x^T @ grad  (batch dims summed by the engine)"""
    node_name = "MatmulBackward0"

    @staticmethod
    def forward(ctx, x, y):
        if x.dtype != y.dtype:
            raise RuntimeError(f"matmul: expected both operands to have the same dtype, "
                               f"got {x.dtype} and {y.dtype}")
        if x.shape[-1] != y.shape[-2]:
            raise ShapeError(f"matmul: shapes {tuple(x.shape)} and {tuple(y.shape)} "
                             "are not aligned")
        needs = ctx.needs_input_grad  # keep only what a gradient needs, as PyTorch (so a
        ctx.save_for_backward(x if needs[1] else None, y if needs[0] else None)  # weight
        return backend.matmul(ctx.xp, x, y)  # changed in place before backward: no one's
        # concern; large products on all the cores, see backend.threads)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        dx = grad @ y.transpose(-1, -2) if ctx.needs_input_grad[0] else None
        dy = x.transpose(-1, -2) @ grad if ctx.needs_input_grad[1] else None
        return dx, dy

    @staticmethod
    def jvp(ctx, dx, dy):  # dout = dx @ y + x @ dy
        x, y = ctx.inputs
        return tangent_sum(None if dx is None else dx @ y, None if dy is None else x @ dy)

    @staticmethod
    def vmap(ctx, x, y):  # (also mm, bmm, dot and mv: one matmul of the batch)
        return batched_matmul(ctx, x, y)


def batched_matmul(ctx, x, y):
    """x @ y for each batch element: a vector operand becomes a matrix (a row for x, a
    column for y) and batched operands get size-1 dims after the batch dim, so that the
    product broadcasts over the other operand's leading dims as it would without the batch."""
    nx, ny = ctx.ndim(0, x), ctx.ndim(1, y)
    if nx == 1:
        x = x.unsqueeze(-2)
    if ny == 1:
        y = y.unsqueeze(-1)
    ndim = max(nx, ny, 2)
    x = batching.pad(x, ndim) if ctx.batched[0] else x
    y = batching.pad(y, ndim) if ctx.batched[1] else y
    out = MatMul.apply(x, y)
    if ny == 1:
        out = out.squeeze(-1)
    if nx == 1:
        out = out.squeeze(-1 if ny == 1 else -2)
    return out


class Mm(MatMul):
    """out = x @ y;  dx = grad @ y^T,  dy = x^T @ grad  (two matrices: PyTorch's MmBackward0)"""


class Bmm(MatMul):
    """out = x @ y;  dx = grad @ y^T,  dy = x^T @ grad  (two batches of matrices, ``bmm``:
    PyTorch's BmmBackward0)"""
    node_name = "BmmBackward0"


class Dot(Primitive):
    """out = sum(x * y), the dot product of two vectors;  dx = grad * y,  dy = grad * x

    ``matmul`` of two 1-D tensors (PyTorch's DotBackward0)."""
    @staticmethod
    def forward(ctx, x, y):
        _same_dtypes(x, y)
        needs = ctx.needs_input_grad
        ctx.save_for_backward(x if needs[1] else None, y if needs[0] else None)
        return ctx.xp.matmul(x[None], y[:, None]).reshape(())  # (a 1 x 1 matrix product)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        needs = ctx.needs_input_grad
        return (grad * y if needs[0] else None), (grad * x if needs[1] else None)

    @staticmethod
    def jvp(ctx, dx, dy):  # dout = dx . y + x . dy
        x, y = ctx.inputs
        return tangent_sum(None if dx is None else Dot.apply(dx, y),
                           None if dy is None else Dot.apply(x, dy))

    @staticmethod
    def vmap(ctx, x, y):
        return batched_matmul(ctx, x, y)


class Mv(Primitive):
    """out = x @ y, a matrix times a vector;  dx = outer(grad, y),  dy = x^T @ grad

    ``matmul`` of a 2-D and a 1-D tensor (PyTorch's MvBackward0)."""
    @staticmethod
    def forward(ctx, x, y):
        _same_dtypes(x, y)
        needs = ctx.needs_input_grad
        ctx.save_for_backward(x if needs[1] else None, y if needs[0] else None)
        return ctx.xp.matmul(x, y[:, None])[:, 0]  # (an n x 1 matrix product)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        needs = ctx.needs_input_grad
        dx = grad.unsqueeze(-1) * y if needs[0] else None
        dy = Mv.apply(x.transpose(0, 1), grad) if needs[1] else None
        return dx, dy

    @staticmethod
    def jvp(ctx, dx, dy):  # dout = dx @ y + x @ dy
        x, y = ctx.inputs
        return tangent_sum(None if dx is None else Mv.apply(dx, y),
                           None if dy is None else Mv.apply(x, dy))

    @staticmethod
    def vmap(ctx, x, y):
        return batched_matmul(ctx, x, y)


def _same_dtypes(x, y):
    if x.dtype != y.dtype:
        raise RuntimeError(f"matmul: expected both operands to have the same dtype, got "
                           f"{x.dtype} and {y.dtype}")


class LinalgSvd(Primitive):
    """(U, S, Vh) = the reduced SVD of x (batched over leading dims): x = U diag(S) Vh, S
    descending;  dx = U [(skew(U^T gU) / E) S + S (skew(V^T gV) / E) + diag(gS)] Vh
    + (I - U U^T) gU S^-1 Vh + U S^-1 gV^T (I - V Vh), with E[j, k] = S[k]^2 - S[j]^2 and
    skew(X) = X - X^T (real tensors; undefined for repeated singular values where U or V
    get a gradient, as in PyTorch)

    ``linalg.svdvals`` and the matrix norms 2, -2 and 'nuc' (PyTorch's LinalgSvdBackward0)."""
    node_name = "LinalgSvdBackward0"

    @staticmethod
    def forward(ctx, x):
        u, s, vh = ctx.xp.linalg.svd(x, full_matrices=False)
        u, s, vh = (backend.row_major(a.astype(x.dtype, copy=False)) for a in (u, s, vh))
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        u, s, vh = ctx.saved_tensors
        v, ut = vh.mT, u.mT
        inner = gs.diag_embed()
        extra = None
        s_row, s_col = s.unsqueeze(-2), s.unsqueeze(-1)
        e = s_row * s_row - s_col * s_col
        e = e + e.new_ones(s.shape[-1]).diag_embed()  # (1 on the diagonal, where skew is 0)
        if gu is not None:
            utgu = ut @ gu
            inner = inner + ((utgu - utgu.mT) / e) * s_row
            extra = ((gu - u @ utgu) / s_row) @ vh
        if gvh is not None:
            gv = gvh.mT
            vtgv = vh @ gv
            inner = inner + s_col * ((vtgv - vtgv.mT) / e)
            w = gvh / s_col
            term = u @ (w - (w @ v) @ vh)
            extra = term if extra is None else extra + term
        out = u @ inner @ vh
        return out if extra is None else out + extra

    @staticmethod
    def jvp(ctx, dx):
        """dS = diag(U^T dx V); dU = U (sym(dP S) / E) + (I - U U^T) dx V S^-1;
        dV = V (sym(S dP) / E) + (I - V Vh) dx^T U S^-1, with dP = U^T dx V."""
        u, s, vh = ctx.result
        v, ut = vh.mT, u.mT
        dxv = dx @ v
        dp = ut @ dxv
        ds = dp.diagonal(0, -2, -1)
        s_row, s_col = s.unsqueeze(-2), s.unsqueeze(-1)
        e = s_row * s_row - s_col * s_col
        e = e + e.new_ones(s.shape[-1]).diag_embed()
        dps, sdp = dp * s_row, s_col * dp
        off = 1 - e.new_ones(s.shape[-1]).diag_embed()
        du = u @ (((dps + dps.mT) / e) * off) + (dxv - u @ dp) / s_row
        dxtu = dx.mT @ u
        dv = v @ (((sdp + sdp.mT) / e) * off) + (dxtu - v @ (vh @ dxtu)) / s_row
        return du, ds, dv.mT

    vmap = batching.leading
