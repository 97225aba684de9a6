"""Elementwise primitives. Each docstring gives the op and its gradient per input; ``jvp``
gives the output's tangent from the inputs' (forward mode, see ``autograd.forward_ad``).

Binary ops broadcast like NumPy; the engine sums each gradient back to its input's shape,
so no backward here undoes broadcasting. Either input of a binary op may be a Python
scalar, which gets no gradient. Gradient formulas follow PyTorch's derivatives.yaml term
for term (including the order of multiplications), so results agree to the last bit
wherever the forward does.

Backward rules are Tensor ops, so that ``create_graph=True`` only means "run backward
with grad mode on". Without it there is no graph to record, and the rules that every
backward pass runs most (``Mul``, ``Sub``, ``Neg``, ``Tanh``, ``Sigmoid``) do the same
arithmetic on the raw arrays instead (``_raw_product``, ``_raw_negative``), in the same
order, so the gradients are bit for bit the same without the cost of one Tensor op each.
"""
import math

from .. import backend
from ..autograd import batching
from ..autograd.function import Primitive, on_arrays
from ..autograd.grad_mode import STATE
from ..autograd.graph import TensorBase


_NUMBERS = (int, float, bool)
_HALF, _SINGLE = backend.np.dtype("float16"), backend.np.dtype("float32")


def tangent_sum(*terms):
    """The sum of the tangent terms that are not None (None if all are): a jvp rule's
    result, where an input without a tangent contributes nothing."""
    total = None
    for t in terms:
        if t is not None:
            total = t if total is None else total + t
    return total


class Add(Primitive):
    """out = x + y;  dx = grad,  dy = grad"""
    number_edge = None  # a number operand is a tensor in PyTorch's graph

    @staticmethod
    def forward(ctx, x, y):
        return x + y

    @staticmethod
    def backward(ctx, grad):
        return grad, grad

    @staticmethod
    def jvp(ctx, dx, dy):
        return tangent_sum(dx, dy)

    vmap = batching.elementwise


class Sub(Primitive):
    """out = x - y;  dx = grad,  dy = -grad"""
    number_edge = None  # a number operand is a tensor in PyTorch's graph

    @staticmethod
    def forward(ctx, x, y):
        return x - y

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[1]:
            return grad, None
        return grad, (-grad if STATE.grad_enabled else _raw_negative(grad))

    @staticmethod
    def jvp(ctx, dx, dy):
        return tangent_sum(dx, None if dy is None else -dy)

    vmap = batching.elementwise


class Rsub(Sub):
    """out = x - y;  dx = grad,  dy = -grad

    ``number - tensor`` (PyTorch's RsubBackward1, whose one input is the tensor)."""
    node_name = "RsubBackward1"
    number_edge = False


class Mul(Primitive):
    """out = x * y;  dx = grad * y,  dy = grad * x

    A float16 tensor times a number is multiplied in float32, as PyTorch (``_multiply``)."""
    number_edge = None  # a number operand is a tensor in PyTorch's graph

    @staticmethod
    def forward(ctx, x, y):
        needs = ctx.needs_input_grad  # keep only what a gradient needs, as PyTorch
        ctx.save_for_backward(x if needs[1] else None, y if needs[0] else None)
        if type(y) in _NUMBERS or type(x) in _NUMBERS:
            return _multiply(x, y)  # (float16 times a number: in float32)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        needs = ctx.needs_input_grad
        if STATE.grad_enabled:  # create_graph: as Tensor ops, to be differentiated again
            return (grad * y if needs[0] else None), (grad * x if needs[1] else None)
        return (_raw_product(grad, y) if needs[0] else None), \
            (_raw_product(grad, x) if needs[1] else None)

    @staticmethod
    def jvp(ctx, dx, dy):  # dout = dx * y + x * dy
        x, y = ctx.inputs
        return tangent_sum(None if dx is None else dx * y, None if dy is None else x * dy)

    vmap = batching.elementwise


class Div(Primitive):
    """out = x / y;  dx = grad / y,  dy = -grad * ((x / y) / y)

    A float16 tensor divided by a number is divided in float32, as ``Mul`` multiplies."""
    number_edge = None  # a number operand is a tensor in PyTorch's graph

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, y)
        if type(y) in _NUMBERS and x.dtype.char == "e":  # float16
            return (x.astype(_SINGLE) / y).astype(_HALF)
        return x / y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        dx = grad / y if ctx.needs_input_grad[0] else None
        dy = -grad * ((x / y) / y) if ctx.needs_input_grad[1] else None
        return dx, dy

    @staticmethod
    def jvp(ctx, dx, dy):  # dout = (dx - dy * out) / y, rounded as PyTorch's
        y = ctx.inputs[1]
        if dy is None:
            return dx / y
        return (-(dy * ctx.result) if dx is None else dx - dy * ctx.result) / y

    vmap = batching.elementwise


class Reciprocal(Primitive):
    """out = 1 / x;  dx = -grad * (out * out)

    PyTorch computes ``number / x`` as ``reciprocal(x) * number``, and so does
    ``Tensor.__rtruediv__``."""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.reciprocal(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return -grad * (out * out)

    @staticmethod
    def jvp(ctx, dx):
        out = ctx.result
        return -dx * (out * out)

    vmap = batching.elementwise


class Rsqrt(Primitive):
    """out = 1 / sqrt(x);  dx = -0.5 * grad * out^3

    The product in PyTorch's order, its cube rounded once as PyTorch's pow rounds it, so
    the gradient has its bits (float16 as PyTorch's CPU kernels give it for tensors of
    fewer than 32 elements; beyond, its vectorised loop rounds 1 / sqrt(x) once, where
    this rounds the square root and the reciprocal each)."""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.reciprocal(ctx.xp.sqrt(x))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        if out.dtype == ctx.xp.float16:  # (the cube rounded once, as PyTorch's pow)
            wide = out.float()
            return (grad * -0.5) * (wide * wide * wide).half()
        return (grad * -0.5) * (out * out * out)

    @staticmethod
    def jvp(ctx, dx):
        out = ctx.result
        return (dx * -0.5) * (out * out * out)

    vmap = batching.elementwise


class Remainder(Primitive):
    """out = x mod y, with the sign of y (Python's %);  dx = grad,  dy = -grad * floor(x / y)

    The floor counts as a constant. ``tensor % tensor`` (PyTorch's RemainderBackward1);
    ``tensor % number`` and ``number % tensor`` record the nodes below, as PyTorch's."""
    node_name = "RemainderBackward1"

    @staticmethod
    def forward(ctx, x, y):
        if ctx.needs_input_grad[1]:
            ctx.save_for_backward(x, y)
        return ctx.xp.remainder(x, y)

    @staticmethod
    def backward(ctx, grad):
        dy = None
        if ctx.needs_input_grad[1]:
            x, y = ctx.saved_tensors
            _no_number_dividend(x)
            dy = -grad * (x // y).detach()
        return (grad if ctx.needs_input_grad[0] else None), dy

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        if dy is None:
            return dx
        _no_number_dividend(x)
        return tangent_sum(dx, -dy * (x // y).detach())

    vmap = batching.elementwise


class RemainderScalar(Remainder):
    """out = x mod y, with the sign of y (Python's %);  dx = grad

    ``tensor % number`` (PyTorch's RemainderBackward0: one input, the tensor)."""
    node_name = "RemainderBackward0"


class RemainderOfNumber(Remainder):
    """out = x mod y for ``number % tensor``;  dy = not implemented (backward raises)

    As in PyTorch, this has no derivative: the node is PyTorch's NotImplemented (one input,
    the tensor)."""
    node_name = "NotImplemented"

    def name(self):
        return "torch::autograd::NotImplemented"


def _no_number_dividend(x):
    if not hasattr(x, "shape"):
        raise RuntimeError("derivative for remainder is not implemented for a number "
                           "divided by a tensor")


class FloorDivide(Primitive):
    """out = floor(x / y);  dx = dy = undefined: backward raises

    As in PyTorch, a float result is part of the graph but has no derivative. A float16
    tensor floor-divided by a number is divided in float32, as ``Div`` divides (``%`` and a
    number on the left round the number to float16, as PyTorch does)."""
    @staticmethod
    def forward(ctx, x, y):
        if type(y) in _NUMBERS and x.dtype.char == "e":  # float16
            return (x.astype(_SINGLE) // y).astype(_HALF)
        return ctx.xp.floor_divide(x, y)

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("derivative for floor_divide is not implemented")

    @staticmethod
    def jvp(ctx, dx, dy):
        raise RuntimeError("derivative for floor_divide is not implemented")

    vmap = batching.elementwise


def _array(xp, a):
    """``a`` as an array (NumPy makes scalars of 0-d results)."""
    return a if type(a) in backend._XP_BY_TYPE else xp.asarray(a)


def _raw_product(grad, other):
    """``grad * other`` on the raw arrays (``other`` a Tensor or a number), for a backward
    pass that records no graph."""
    b = other.array if isinstance(other, TensorBase) else other
    return grad._make(on_arrays(_multiply, grad.array, b))


def _multiply(a, b):
    """a * b, an array even when 0-d (NumPy makes a scalar of a 0-d product).

    A float16 array times a Python number is multiplied in float32 and rounded once, as
    PyTorch's kernels do; NumPy would round the number to float16 first (0.1 to
    0.0999755859375, 70000 to inf)."""
    if type(a) in _NUMBERS:
        a, b = b, a  # (the same product)
    if type(b) in _NUMBERS and a.dtype.char == "e":  # float16
        out = (a.astype(_SINGLE) * b).astype(_HALF)
    else:
        out = a * b
    return _array(backend.np, out)  # (only NumPy makes scalars)


def _raw_negative(grad):
    """``-grad`` on the raw array, for a backward pass that records no graph."""
    return grad._make(on_arrays(_negate, grad.array))


def _negate(a):
    """-a, an array even when 0-d."""
    return _array(backend.np, -a)


class Neg(Primitive):
    """out = -x;  dx = -grad"""
    @staticmethod
    def forward(ctx, x):
        return -x

    @staticmethod
    def backward(ctx, grad):
        return -grad if STATE.grad_enabled else _raw_negative(grad)

    @staticmethod
    def jvp(ctx, dx):
        return -dx

    vmap = batching.elementwise


class Pow(Primitive):
    """out = x ** y;  dx = grad * (y * x ** (y - 1)),
    dy = grad * (out * log(x)), 0 where x = 0 and y >= 0"""
    @staticmethod
    def forward(ctx, x, y):
        if isinstance(y, (int, float)):
            out = _scalar_power(x, y)
        elif y.dtype.kind in "iu" and x.dtype.kind in "iu":
            out = _integer_power(ctx.xp, x, y)
        else:
            out = ctx.xp.power(x, y)
        ctx.save_for_backward(x, y, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, y, out = ctx.saved_tensors
        dx = dy = None
        if ctx.needs_input_grad[0]:
            if not isinstance(y, (int, float)):  # a tensor exponent: 0 where y == 0
                dx = (grad * (y * x ** (y - 1))).masked_fill(y == 0, 0.0)
            elif y == 0:
                dx = grad.new_zeros(grad.shape)
            else:
                dx = grad * (y * x ** (y - 1))
        if ctx.needs_input_grad[1]:
            # PyTorch's convention: 0 ** y has gradient 0 for y >= 0 rather than NaN
            dy = grad * (out * x.log()).masked_fill((x == 0) & (y >= 0), 0.0)
        return dx, dy

    @staticmethod
    def jvp(ctx, dx, dy):  # the two terms of backward, each times its input's tangent
        x, y = ctx.inputs
        tx = ty = None
        if dx is not None:
            if not isinstance(y, (int, float)):
                tx = (dx * (y * x ** (y - 1))).masked_fill(y == 0, 0.0)
            elif y != 0:
                tx = dx * (y * x ** (y - 1))
        if dy is not None:
            ty = dy * (ctx.result * x.log()).masked_fill((x == 0) & (y >= 0), 0.0)
        return tangent_sum(tx, ty)

    vmap = batching.elementwise


class TensorPow(Pow):
    """out = x ** y;  dx = grad * (y * x ** (y - 1)), 0 where y = 0,
    dy = grad * (out * log(x)), 0 where x = 0 and y >= 0

    A tensor exponent (PyTorch's PowBackward1)."""
    node_name = "PowBackward1"


class ScalarPow(Pow):
    """out = x ** y;  dy = grad * (out * log(x)), 0 where x = 0 and y >= 0

    A number base, as ``2 ** t`` (PyTorch's PowBackward2)."""
    node_name = "PowBackward2"


def _integer_power(xp, x, y):
    """x ** y for integer arrays, as PyTorch: a negative exponent gives 0, except for the
    bases 1 and -1 (NumPy refuses negative integer exponents)."""
    negative = y < 0
    if not negative.any():
        return xp.power(x, y)
    out = xp.power(x, xp.abs(y))  # where y < 0: right for x = 1 and x = -1 only
    return xp.where(negative & (xp.abs(x) != 1), 0, out).astype(out.dtype, copy=False)


def _scalar_power(x, p):
    """x ** p for a Python exponent, with PyTorch's exact special cases. For float16, as
    PyTorch: the products in float32, rounded once, and square roots as powers (so
    (-0.0) ** 0.5 is +0.0)."""
    if x.dtype.char == "e" and p in (3, -2, 0.5, -0.5):
        return x ** p if p in (0.5, -0.5) else _scalar_power(x.astype(_SINGLE), p).astype(_HALF)
    if p == 2:
        return x * x
    if p == 3:
        return x * x * x
    if p == 0.5:
        return backend.xp_of(x).sqrt(x)
    if p == -1:
        return 1.0 / x
    if p == -2:
        return 1.0 / (x * x)
    if p == -0.5:
        return 1.0 / backend.xp_of(x).sqrt(x)
    return x ** p


class Exp(Primitive):
    """out = exp(x);  dx = grad * out"""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.exp(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out

    @staticmethod
    def jvp(ctx, dx):
        return dx * ctx.result

    vmap = batching.elementwise


class Log(Primitive):
    """out = log(x);  dx = grad / x"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / x

    @staticmethod
    def jvp(ctx, dx):
        return dx / ctx.inputs[0]

    vmap = batching.elementwise


class Log1p(Primitive):
    """out = log(1 + x);  dx = grad / (x + 1)"""
    node_name = "Log1PBackward0"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.log1p(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (x + 1)

    @staticmethod
    def jvp(ctx, dx):
        return dx / (ctx.inputs[0] + 1)

    vmap = batching.elementwise


class Expm1(Primitive):
    """out = exp(x) - 1;  dx = grad * (out + 1)"""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.expm1(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (out + 1)

    @staticmethod
    def jvp(ctx, dx):
        return dx * (ctx.result + 1)

    vmap = batching.elementwise


class Frac(Primitive):
    """out = x - trunc(x);  dx = grad"""
    @staticmethod
    def forward(ctx, x):
        return x - ctx.xp.trunc(x)

    @staticmethod
    def backward(ctx, grad):
        return grad

    @staticmethod
    def jvp(ctx, dx):
        return dx

    vmap = batching.elementwise


class Sqrt(Primitive):
    """out = sqrt(x);  dx = grad / (2 * out)"""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.sqrt(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad / (2 * out)

    @staticmethod
    def jvp(ctx, dx):
        return dx / (2 * ctx.result)

    vmap = batching.elementwise


class Abs(Primitive):
    """out = |x|;  dx = grad * sign(x)  (0 at x = 0, PyTorch's subgradient, and at NaN)"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.abs(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.sign()

    @staticmethod
    def jvp(ctx, dx):
        return dx * ctx.inputs[0].sign()

    vmap = batching.elementwise


class Tanh(Primitive):
    """out = tanh(x);  dx = grad * (1 - out * out)"""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.tanh(x)
        ctx.save_for_backward(out)  # the gradient is cheaper in terms of the output
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        if STATE.grad_enabled:  # create_graph: as Tensor ops, to be differentiated again
            return grad * (1 - out * out)
        return grad._make(on_arrays(_tanh_grad, ctx.xp, grad.array, out.array))  # one pass

    @staticmethod
    def jvp(ctx, dx):
        out = ctx.result
        return dx * (1 - out * out)

    vmap = batching.elementwise


class Sigmoid(Primitive):
    """out = 1 / (1 + exp(-x));  dx = grad * (1 - out) * out"""
    @staticmethod
    def forward(ctx, x):
        out = 1 / (1 + ctx.xp.exp(-x))  # PyTorch's formula; exp overflow gives the right 0
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        if STATE.grad_enabled:  # create_graph: as Tensor ops, to be differentiated again
            return grad * (1 - out) * out
        return grad._make(on_arrays(_sigmoid_grad, ctx.xp, grad.array, out.array))  # one pass

    @staticmethod
    def jvp(ctx, dx):
        out = ctx.result
        return dx * (1 - out) * out

    vmap = batching.elementwise


def _tanh_grad(xp, grad, out):
    """Tanh's gradient on raw arrays: grad * (1 - out * out)."""
    return _array(xp, grad * (1 - out * out))


def _sigmoid_grad(xp, grad, out):
    """Sigmoid's gradient on raw arrays: grad * (1 - out) * out."""
    return _array(xp, grad * (1 - out) * out)


def _relu_grad(xp, grad, out):
    """Relu's gradient on raw arrays, PyTorch's threshold_backward: 0 where out <= 0, else
    grad (an inf or NaN gradient too, and at a NaN input). Two passes without branches:
    grad's bits ANDed with all ones where kept and with zeros where not (on the host with
    numba, one compiled loop with the same result)."""
    fast = backend.host_loops.relu_grad(grad, out)
    if fast is not None:
        return fast
    bits = xp.dtype(f"i{grad.dtype.itemsize}")
    mask = _array(xp, out <= 0).astype(bits)
    mask -= 1                                             # 0 where dropped, -1 (all ones) kept
    xp.bitwise_and(mask, _array(xp, grad).view(bits), out=mask)
    return mask.view(grad.dtype)


class Relu(Primitive):
    """out = max(x, 0);  dx = grad where out > 0, else 0  (0 at x = 0)"""
    @staticmethod
    def forward(ctx, x):
        out = ctx.xp.maximum(x, 0)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        if STATE.grad_enabled:  # create_graph: as Tensor ops, to be differentiated again (a
            # product with the mask: the same values but for inf or NaN gradients and inputs)
            return grad * (out > 0)
        return grad._make(on_arrays(_relu_grad, ctx.xp, grad.array, out.array))

    @staticmethod
    def jvp(ctx, dx):
        return dx * (ctx.result > 0)

    vmap = batching.elementwise


class Erf(Primitive):
    """out = erf(x);  dx = 2 / sqrt(pi) * exp(-x ** 2) * grad"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return backend.erf(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2.0 / math.sqrt(math.pi) * (-(x * x)).exp() * grad

    @staticmethod
    def jvp(ctx, dx):
        x = ctx.inputs[0]
        return 2.0 / math.sqrt(math.pi) * (-(x * x)).exp() * dx

    vmap = batching.elementwise


class Sin(Primitive):
    """out = sin(x);  dx = grad * cos(x)"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.sin(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos()

    @staticmethod
    def jvp(ctx, dx):
        return dx * ctx.inputs[0].cos()

    vmap = batching.elementwise


class Sinh(Primitive):
    """out = sinh(x);  dx = grad * cosh(x)"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.sinh(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cosh()

    @staticmethod
    def jvp(ctx, dx):
        return dx * ctx.inputs[0].cosh()

    vmap = batching.elementwise


class Cosh(Primitive):
    """out = cosh(x);  dx = grad * sinh(x)"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.cosh(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.sinh()

    @staticmethod
    def jvp(ctx, dx):
        return dx * ctx.inputs[0].sinh()

    vmap = batching.elementwise


class Cos(Primitive):
    """out = cos(x);  dx = grad * -sin(x)"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.xp.cos(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * -x.sin()

    @staticmethod
    def jvp(ctx, dx):
        return dx * -ctx.inputs[0].sin()

    vmap = batching.elementwise


class Clamp(Primitive):
    """out = min(max(x, min), max);  dx = grad where min <= x <= max, else 0 (the gradient
    passes at the bounds)"""
    node_name = "ClampBackward1"

    @staticmethod
    def forward(ctx, x, min=None, max=None):
        ctx.save_for_backward(x)
        ctx.bounds = (min, max)
        if min is not None:
            x = ctx.xp.maximum(x, min)
        if max is not None:
            x = ctx.xp.minimum(x, max)
        return x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _between(grad, x, *ctx.bounds)

    @staticmethod
    def jvp(ctx, dx):
        return _between(dx, ctx.inputs[0], ctx.params.get("min"), ctx.params.get("max"))

    vmap = batching.elementwise


class ClampTensor(Primitive):
    """out = min(max(x, lo), hi) with tensor bounds (either may be None);
    dx = grad where lo <= x <= hi,  dlo = grad where x < lo (and lo < hi),
    dhi = grad where x > hi (or hi < lo): PyTorch's clamp_backward_min_max"""
    node_name = "ClampBackward0"
    number_edge = None  # an absent bound is an input of PyTorch's node too: (None, 0)

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x, lo, hi)
        out = x if lo is None else ctx.xp.maximum(x, lo)
        return out if hi is None else ctx.xp.minimum(out, hi)

    @staticmethod
    def backward(ctx, grad):
        x, lo, hi = ctx.saved_tensors
        needs = ctx.needs_input_grad
        dx = _between(grad, x, lo, hi) if needs[0] else None
        dlo = dhi = None
        if needs[1]:
            below = x < lo
            dlo = grad.where(below if hi is None else below & (lo < hi), 0.0)
        if needs[2]:
            above = x > hi
            dhi = grad.where(above if lo is None else above | (hi < lo), 0.0)
        return dx, dlo, dhi

    @staticmethod
    def jvp(ctx, dx, dlo, dhi):  # the tangent of whichever input is the result (clamp_jvp)
        x, lo, hi = ctx.inputs
        dx, dlo, dhi = (ctx.result.new_zeros(ctx.result.shape) if d is None else d
                        for d in (dx, dlo, dhi))
        if hi is None:
            return dx.where(x > lo, dlo)
        if lo is None:
            return dx.where(x < hi, dhi)
        return dhi.where(lo > hi, dlo.where(x < lo, dhi.where(x > hi, dx)))

    vmap = batching.elementwise


def _between(t, x, lo, hi):
    """``t`` where lo <= x <= hi, else 0: clamp's derivative (the bounds pass it)."""
    inside = None
    if lo is not None:
        inside = x >= lo
    if hi is not None:
        inside = x <= hi if inside is None else inside & (x <= hi)
    return t if inside is None else t.where(inside, 0.0)


class Maximum(Primitive):
    """out = max(x, y);  dx = grad where x > y, grad / 2 on ties;  dy likewise"""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.maximum(x, y)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return _split_ties(ctx, grad, x, y, x < y, x > y)

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        return _pick_ties(x, y, dx, dy, x > y)

    vmap = batching.elementwise


class Minimum(Primitive):
    """out = min(x, y);  dx = grad where x < y, grad / 2 on ties;  dy likewise"""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return ctx.xp.minimum(x, y)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return _split_ties(ctx, grad, x, y, x > y, x < y)

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.inputs
        return _pick_ties(x, y, dx, dy, x < y)

    vmap = batching.elementwise


def _split_ties(ctx, grad, x, y, x_loses, y_loses):
    shared = (grad / 2).where(x == y, grad)
    dx = shared.masked_fill(x_loses, 0.0) if ctx.needs_input_grad[0] else None
    dy = shared.masked_fill(y_loses, 0.0) if ctx.needs_input_grad[1] else None
    return dx, dy


def _pick_ties(x, y, dx, dy, x_wins):
    """max/min's tangent: dx where x wins, dy where y does, their mean on ties (PyTorch's)."""
    dx = x.new_zeros(x.shape) if dx is None else dx
    dy = y.new_zeros(y.shape) if dy is None else dy
    return ((dx + dy) / 2).where(x == y, dx.where(x_wins, dy))


class Where(Primitive):
    """out = cond ? x : y;  dx = grad where cond, else 0;  dy = grad where not cond, else 0"""
    number_edge = None  # a number operand is a tensor in PyTorch's graph

    @staticmethod
    def forward(ctx, cond, x, y):
        ctx.save_for_backward(cond)
        return ctx.xp.where(cond, x, y)

    @staticmethod
    def backward(ctx, grad):
        (cond,) = ctx.saved_tensors
        dx = grad.where(cond, 0.0) if ctx.needs_input_grad[1] else None
        dy = grad.masked_fill(cond, 0.0) if ctx.needs_input_grad[2] else None
        return None, dx, dy

    @staticmethod
    def jvp(ctx, dcond, dx, dy):
        cond, x, y = ctx.inputs
        dx = 0.0 if dx is None else dx
        dy = 0.0 if dy is None else dy
        if isinstance(dx, float) and isinstance(dy, float):
            return None
        return Where.apply(cond, dx, dy)

    vmap = batching.elementwise


class MaskedFill(Where):
    """out = cond ? x : y;  dx = grad where cond, else 0;  dy = grad where not cond, else 0

    ``y.masked_fill(cond, x)`` (PyTorch's MaskedFillBackward0: a number ``x`` is no input;
    row-major, as PyTorch's, whatever y's layout)."""
    node_name = "MaskedFillBackward0"
    number_edge = False

    @staticmethod
    def forward(ctx, cond, x, y):
        return backend.row_major(Where.forward(ctx, cond, x, y))


class Cast(Primitive):
    """out = x as dtype;  dx = grad (the engine casts it back to x's dtype)

    ``order``: the copy's memory layout, NumPy's "K" (as x's, what PyTorch's ``clone``
    keeps) or "C" (row-major, ``contiguous``)."""
    node_name = "ToCopyBackward0"

    @staticmethod
    def forward(ctx, x, dtype, order="K"):
        return x.astype(dtype, order=order)

    @staticmethod
    def backward(ctx, grad):
        return grad

    @staticmethod
    def jvp(ctx, dx):
        return dx.to(ctx.params["dtype"])

    vmap = batching.elementwise


class Clone(Cast):
    """out = a copy of x (``clone``);  dx = grad"""
    node_name = "CloneBackward0"

    @staticmethod
    def jvp(ctx, dx):
        return dx.clone()


class ToDevice(Primitive):
    """out = x copied to device;  dx = grad copied back to x's device"""
    @staticmethod
    def forward(ctx, x, device):
        ctx.source = backend.device_of(x)
        return backend.to_device(x, device)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.source)

    @staticmethod
    def jvp(ctx, dx):
        return dx.to(ctx.params["device"])

    vmap = batching.elementwise


class NonDiff(Primitive):
    """out = fn(*args) for a function whose derivative is zero where it exists (sign) or
    whose result is no float (comparisons, logic): dx = 0, as PyTorch's zeros."""
    @staticmethod
    def forward(ctx, *args, fn, **kwargs):
        return getattr(ctx.xp, fn)(*args, **kwargs)

    @staticmethod
    def backward(ctx, grad):
        zeros = grad._make(ctx.xp.zeros_like(grad.array))
        return tuple(zeros if need else None for need in ctx.needs_input_grad)

    @staticmethod
    def jvp(ctx, *tangents):  # zero (sign of a float) or no tangent (bools, integers)
        return None

    @staticmethod
    def vmap(ctx, *args, fn, **kwargs):  # (all and any reduce over ``axis``)
        if "axis" in kwargs:
            return batching.along("axis")(ctx, *args, fn=fn, **kwargs)
        return batching.elementwise(ctx, *args, fn=fn, **kwargs)


class RoundedDiv(NonDiff):
    """out = x / y rounded down (``mode`` "floor") or toward zero ("trunc"), float16
    divided in float32 and rounded once;  dx = 0,  dy = 0

    ``div(x, y, rounding_mode=...)`` of floating point operands (PyTorch's DivBackward2)."""
    node_name = "DivBackward2"
    number_edge = None  # a number operand is a tensor in PyTorch's graph

    @staticmethod
    def forward(ctx, x, y, mode):
        xp = ctx.xp
        half = x.dtype.char == "e" if isinstance(x, xp.ndarray) else y.dtype.char == "e"
        if half:
            x, y = (v.astype(_SINGLE) if isinstance(v, xp.ndarray) else v for v in (x, y))
        if mode == "floor":
            out = xp.floor_divide(x, y)
        else:
            out = xp.trunc(xp.true_divide(x, y))
        return out.astype(_HALF) if half else out

    @staticmethod
    def backward(ctx, grad):
        zeros = grad._make(on_arrays(ctx.xp.zeros_like, grad.array))  # (recorded by mg.compile)
        return tuple(zeros if need else None for need in ctx.needs_input_grad)


class Sign(NonDiff):
    """out = sign(x), 0 at NaN as in PyTorch (NumPy gives NaN), which makes |x|'s gradient
    0 there too;  dx = 0"""
    node_name = "SignBackward0"

    @staticmethod
    def forward(ctx, x, fn="sign"):
        out = ctx.xp.sign(x)
        if out.dtype.kind == "f":
            out = ctx.xp.where(out != out, out.dtype.type(0), out)
        return out


class Floor(NonDiff):
    """out = floor(x);  dx = 0"""
    node_name = "FloorBackward0"


class Ceil(NonDiff):
    """out = ceil(x);  dx = 0"""
    node_name = "CeilBackward0"


class Trunc(NonDiff):
    """out = x rounded toward zero;  dx = 0"""
    node_name = "TruncBackward0"


class Round(NonDiff):
    """out = x rounded to the nearest integer, halves to even;  dx = 0"""
    node_name = "RoundBackward0"


class RoundDecimals(NonDiff):
    """out = x rounded to ``decimals`` decimal places, as PyTorch: rint(x * 10^d) / 10^d,
    or rint(x / 10^-d) * 10^-d for negative d;  dx = 0"""
    node_name = "RoundBackward1"

    @staticmethod
    def forward(ctx, x, decimals):
        if x.dtype == _HALF:  # (in float32 and rounded once, as PyTorch's Half)
            return RoundDecimals.forward(ctx, x.astype(_SINGLE), decimals).astype(_HALF)
        xp = ctx.xp  # (a power of ten past float64's range: inf, and NaN out, as PyTorch)
        scale = x.dtype.type(10.0 ** abs(decimals) if abs(decimals) <= 308 else float("inf"))
        if decimals > 0:
            return xp.rint(x * scale) / scale
        return xp.rint(x / scale) * scale


# --- more of torch's elementwise functions ---------------------------------------------------
