"""Matrix product, batched and broadcasting over leading dims (1-D cases are handled by
``Tensor.matmul``, which adds and removes the missing dims around this primitive)."""
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
        return ctx.xp.matmul(x, y)  # changed in place before backward is no one's concern)

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


class Mm(MatMul):
    """out = x @ y;  dx = grad @ y^T,  dy = x^T @ grad  (two matrices: PyTorch's MmBackward0)"""
