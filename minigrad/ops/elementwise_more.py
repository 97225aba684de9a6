"""More elementwise primitives, beyond the arithmetic of ``elementwise.py`` (whose
docstring says how they are written and tested): logarithms and powers of 2 and 10,
``erfc``, ``sgn``, ``atan2``, ``hypot``, ``logaddexp``, ``fmod``, ``xlogy``, ``fmax`` and
``fmin``."""
import math

from .. import backend
from ..autograd import batching
from ..autograd.function import Primitive
from ..autograd.graph import TensorBase
from .elementwise import Sign, tangent_sum

_LN2, _LN10 = math.log(2.0), math.log(10.0)


class Log10(Primitive):
    """out = log10(x);  dx = grad / (x * ln 10)"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log10(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (x * _LN10)

    @staticmethod
    def jvp(ctx, dx):
        return dx / (ctx.inputs[0] * _LN10)

    vmap = batching.elementwise


class Log2(Primitive):
    """out = log2(x);  dx = grad / (x * ln 2)"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log2(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (x * _LN2)

    @staticmethod
    def jvp(ctx, dx):
        return dx / (ctx.inputs[0] * _LN2)

    vmap = batching.elementwise


class Exp2(Primitive):
    """out = 2 ** x;  dx = grad * out * ln 2"""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.exp2(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out * _LN2

    @staticmethod
    def jvp(ctx, dx):
        return dx * ctx.result * _LN2

    vmap = batching.elementwise


class Erfc(Primitive):
    """out = 1 - erf(x) (accurate where erf(x) is near 1);  dx = -2 / sqrt(pi) * exp(-x^2) * grad"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return backend.erfc(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return -2.0 / math.sqrt(math.pi) * (-(x * x)).exp() * grad

    @staticmethod
    def jvp(ctx, dx):
        x = ctx.inputs[0]
        return -2.0 / math.sqrt(math.pi) * (-(x * x)).exp() * dx

    vmap = batching.elementwise


class Sgn(Sign):
    """out = sgn(x), the sign of a real x (0 at 0 and NaN);  dx = 0"""
    node_name = "SgnBackward0"


class Atan2(Primitive):
    """out = atan2(x, y), the angle of the point (y, x);  dx = grad * y / (x^2 + y^2),
    dy = grad * -x / (x^2 + y^2)"""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.arctan2(x, y)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        recip = (x * x + y * y).reciprocal()
        return (grad * y * recip if ctx.needs_input_grad[0] else None,
                grad * -x * recip if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        recip = (x * x + y * y).reciprocal()
        return tangent_sum(None if dx is None else dx * y * recip,
                           None if dy is None else dy * -x * recip)

    vmap = batching.elementwise


class Hypot(Primitive):
    """out = sqrt(x^2 + y^2), without overflow;  dx = grad * x / out,  dy = grad * y / out"""
    @staticmethod
    def forward(ctx, x, y):
        out = ctx.xp.hypot(x, y)
        ctx.save_for_backward(x, y, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, y, out = ctx.saved_tensors
        return (grad * x / out if ctx.needs_input_grad[0] else None,
                grad * y / out if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        out = ctx.result
        return tangent_sum(None if dx is None else dx * x / out,
                           None if dy is None else dy * y / out)

    vmap = batching.elementwise


class LogAddExp(Primitive):
    """out = log(exp(x) + exp(y)), without overflow;  dx = grad / (1 + exp(y - x)),
    dy = grad / (1 + exp(x - y))"""
    node_name = "LogaddexpBackward0"

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.logaddexp(x, y)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return (grad / (1 + (y - x).exp()) if ctx.needs_input_grad[0] else None,
                grad / (1 + (x - y).exp()) if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        return tangent_sum(None if dx is None else dx / (1 + (y - x).exp()),
                           None if dy is None else dy / (1 + (x - y).exp()))

    vmap = batching.elementwise


class Fmod(Primitive):
    """out = x - trunc(x / y) * y, with the sign of x (C's fmod);  dx = grad,
    dy = -grad * trunc(x / y)

    The quotient counts as a constant. ``fmod(tensor, tensor)`` (PyTorch's FmodBackward1);
    ``FmodScalar`` is ``fmod(tensor, number)``."""
    node_name = "FmodBackward1"

    @staticmethod
    def forward(ctx, x, y):
        if ctx.needs_input_grad[1]:
            ctx.save_for_backward(x, y)
        return ctx.xp.fmod(x, y)

    @staticmethod
    def backward(ctx, grad):
        dy = None
        if ctx.needs_input_grad[1]:
            x, y = ctx.saved_tensors
            dy = -grad * x.div(y, rounding_mode="trunc")
        return (grad if ctx.needs_input_grad[0] else None), dy

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        return tangent_sum(dx, None if dy is None else -dy * x.div(y, rounding_mode="trunc"))

    vmap = batching.elementwise


class FmodScalar(Fmod):
    """out = fmod(x, y) for a number y;  dx = grad  (PyTorch's FmodBackward0: one input)"""
    node_name = "FmodBackward0"


def _xlogy(xp, x, y):
    """x * log(y), 0 where x == 0 unless y is NaN (PyTorch's rule); x or y may be a number,
    taken in the other's dtype."""
    dtype = (x if hasattr(x, "dtype") else y).dtype
    x, y = xp.asarray(x, dtype=dtype), xp.asarray(y, dtype=dtype)
    out = x * xp.log(y)
    return xp.where((x == 0) & ~xp.isnan(y), dtype.type(0), out)


class Xlogy(Primitive):
    """out = x * log(y), 0 where x == 0 (NaN where y is NaN);  dx = grad * log(y), 0 where
    y == 0 (PyTorch's),  dy = grad * x / y

    ``xlogy(tensor, tensor)`` (PyTorch's XlogyBackward0); a number x: XlogyBackward1, a
    number y: XlogyBackward2 (the subclasses below)."""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return _xlogy(ctx.xp, x, y)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return (grad * _log_of_nonzero(y) if ctx.needs_input_grad[0] else None,
                grad * x / y if ctx.needs_input_grad[1] else None)

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        return tangent_sum(None if dx is None else dx * _log_of_nonzero(y),
                           None if dy is None else dy * x / y)

    vmap = batching.elementwise


def _log_of_nonzero(y):
    """log(y), 0 where y == 0: xlogy's derivative in x (a tensor, or a number y)."""
    if isinstance(y, TensorBase):
        return (y != 0).to(y.dtype).xlogy(y)
    return 0.0 if y == 0 else math.log(y) if y > 0 else math.nan


class XlogyOfNumber(Xlogy):
    """out = x * log(y) for a number x;  dy = grad * x / y"""
    node_name = "XlogyBackward1"


class XlogyScalar(Xlogy):
    """out = x * log(y) for a number y;  dx = grad * xlogy(x != 0, y)"""
    node_name = "XlogyBackward2"


class Fmax(Primitive):
    """out = max(x, y), NaN only where both are NaN;  dx = grad where x >= y or y is NaN,
    dy = grad elsewhere (ties go to x, as PyTorch)"""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.fmax(x, y)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return _pick_first(ctx, grad, (x >= y) | y.isnan())

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        return _first_tangent(x, y, dx, dy, (x >= y) | y.isnan())

    vmap = batching.elementwise


class Fmin(Primitive):
    """out = min(x, y), NaN only where both are NaN;  dx = grad where x <= y or y is NaN,
    dy = grad elsewhere (ties go to x, as PyTorch)"""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.fmin(x, y)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return _pick_first(ctx, grad, (x <= y) | y.isnan())

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        return _first_tangent(x, y, dx, dy, (x <= y) | y.isnan())

    vmap = batching.elementwise


def _pick_first(ctx, grad, x_wins):
    """fmax/fmin's gradients: grad to x where ``x_wins``, to y elsewhere."""
    return (grad.masked_fill(~x_wins, 0.0) if ctx.needs_input_grad[0] else None,
            grad.masked_fill(x_wins, 0.0) if ctx.needs_input_grad[1] else None)


def _first_tangent(x, y, dx, dy, x_wins):
    """fmax/fmin's tangent: dx where ``x_wins``, dy elsewhere."""
    dx = x.new_zeros(x.shape) if dx is None else dx
    dy = y.new_zeros(y.shape) if dy is None else dy
    return dx.where(x_wins, dy)
