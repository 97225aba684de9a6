"""GELU, exact (erf) and PyTorch's tanh approximation, each one op beside its composite.

Backward is one pass over arrays (PyTorch's gelu_backward). Under ``create_graph`` it is
the composite's gradient instead, taken by the engine, so second derivatives are exact
without a hand-written derivative of the derivative.
"""
import math

from .. import backend
from ..autograd import batching
from ..autograd.function import Primitive
from ..autograd.grad_mode import STATE
from ..autograd.function import on_arrays
from .differentiate import composite_grads, tangent_by

_BETA, _KAPPA = math.sqrt(2.0 / math.pi), 0.044715


def composite(x):
    """x * Phi(x), Phi the standard normal CDF by erf, in plain Tensor ops."""
    return x * 0.5 * (1.0 + (x * math.sqrt(0.5)).erf())


def composite_tanh(x):
    """PyTorch's approximate="tanh": 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))."""
    return 0.5 * x * (1.0 + (_BETA * (x + _KAPPA * (x * x * x))).tanh())


class Gelu(Primitive):
    """out = x * Phi(x);  dx = grad * (Phi(x) + x * phi(x))"""
    node_name = "GeluBackward0"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return backend.gelu(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if STATE.grad_enabled:  # create_graph
            return composite_grads(composite, (x,), grad, (True,))[0]
        return grad._make(ctx.xp.asarray(on_arrays(backend.gelu_backward, grad.array, x.array)))

    @staticmethod
    def jvp(ctx, dx):  # dout = dx * (Phi(x) + x * phi(x))
        x = ctx.inputs[0]
        phi = (x * x * -0.5).exp() * (1.0 / math.sqrt(2.0 * math.pi))
        return dx * (0.5 * (1.0 + (x * math.sqrt(0.5)).erf()) + x * phi)

    vmap = batching.elementwise


class GeluTanh(Primitive):
    """out = 0.5 * x * (1 + t), t = tanh(u), u = sqrt(2 / pi) * (x + 0.044715 * x^3);
    dx = grad * (0.5 (1 + t) + 0.5 x (1 - t^2) u'),  u' = sqrt(2 / pi) (1 + 3 * 0.044715 x^2)

    PyTorch's formula, term for term. Where tanh(u) is within an ulp of -1 or 1 the result
    hangs on that ulp, and NumPy's float32 tanh is not always correctly rounded there
    (PyTorch's is): t is computed in float64 and rounded once (see _tanh).
    """
    node_name = "GeluBackward0"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _tanh_forward(ctx.xp, x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        if STATE.grad_enabled:  # create_graph
            return composite_grads(composite_tanh, (x,), grad, (True,))[0]
        return grad._make(on_arrays(_tanh_backward, ctx.xp, grad.array, x.array))

    @staticmethod
    def jvp(ctx, dx):  # the composite's tangent
        return tangent_by(composite_tanh, ctx.inputs[0])

    vmap = batching.elementwise


def _tanh_forward(xp, x):
    """GeluTanh's output on raw arrays, PyTorch's formula term for term (float16 computed
    in float32 and rounded once, as PyTorch computes half precision)."""
    if x.dtype == "float16":
        return _tanh_forward(xp, x.astype("float32")).astype("float16")
    t = _tanh(xp, _BETA * (x + _KAPPA * (x * x * x)))
    return 0.5 * x * (1.0 + t)


def _tanh_backward(xp, g, x):
    """GeluTanh's dx on raw arrays, PyTorch's formula term for term (see the class)."""
    if x.dtype == "float16":
        return _tanh_backward(xp, g.astype("float32"), x.astype("float32")).astype("float16")
    x_sq = x * x
    t = _tanh(xp, _BETA * (x + _KAPPA * (x_sq * x)))
    left = 0.5 * (1.0 + t)
    right = 0.5 * x * (1.0 - t * t) * (_BETA * (1.0 + 3.0 * _KAPPA * x_sq))
    return xp.asarray(g * (left + right))  # (0-d: an array)


def _tanh(xp, u):
    """tanh(u) correctly rounded to u's dtype: computed in float64 and rounded once."""
    return xp.tanh(u.astype("float64")).astype(u.dtype) if u.dtype == "float32" else xp.tanh(u)
