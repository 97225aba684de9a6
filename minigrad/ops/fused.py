"""Composites of the nn layers promoted to primitives for speed and memory.

Each op here could be written with Tensor ops (nn.functional's reference composites in
``tests/test_ops_fused.py`` are), and gives the same numbers; as one primitive it makes fewer
passes over memory, keeps fewer arrays alive between forward and backward, and records one
graph node instead of five to twenty. Backward is still written with Tensor ops, so second
derivatives come out of the engine as for every other op: what backward needs that is not
an input or an output is recomputed from the inputs, never saved as a constant (a constant
would be right to first order only).
"""
import math

from .. import backend
from ..autograd.function import Primitive


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


class Gelu(Primitive):
    """out = x * Phi(x) (Phi the standard normal CDF, by erf);
    dx = grad * (Phi(x) + x * phi(x))  (GeluBackward, one op)"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return backend.gelu(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return GeluBackward.apply(grad, x)


class GeluBackward(Primitive):
    """out = grad * (Phi(x) + x * phi(x)), Gelu's gradient as one op (PyTorch's
    gelu_backward);  dgrad = g * (Phi(x) + x * phi(x)),  dx = g * grad * phi(x) * (2 - x^2)"""
    @staticmethod
    def forward(ctx, grad, x):
        ctx.save_for_backward(grad, x)
        return backend.gelu_backward(grad, x)

    @staticmethod
    def backward(ctx, g):
        grad, x = ctx.saved_tensors
        pdf = (-0.5 * x * x).exp() * (1.0 / math.sqrt(2.0 * math.pi))
        dgrad = None
        if ctx.needs_input_grad[0]:
            dgrad = g * (0.5 * (1.0 + (x * math.sqrt(0.5)).erf()) + x * pdf)
        dx = g * grad * pdf * (2.0 - x * x) if ctx.needs_input_grad[1] else None
        return dgrad, dx


_BETA, _KAPPA = math.sqrt(2.0 / math.pi), 0.044715


class GeluTanh(Primitive):
    """out = 0.5 * x * (1 + t), t = tanh(u), u = sqrt(2 / pi) * (x + 0.044715 * x^3)
    (PyTorch's approximate="tanh");  dx = grad * (0.5 (1 + t) + 0.5 x (1 - t^2) u')

    PyTorch's formula, term for term. Where tanh(u) is within an ulp of -1 or 1 the result
    hangs on that ulp, and NumPy's float32 tanh is not always correctly rounded there
    (PyTorch's is): t is computed in float64 and rounded once (see _tanh).
    """
    node_name = "GeluBackward0"

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        t = _tanh(ctx.xp, _BETA * (x + _KAPPA * (x * x * x)))
        return 0.5 * x * (1.0 + t)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return GeluTanhBackward.apply(grad, x)


class GeluTanhBackward(Primitive):
    """out = grad * f'(x), f' = 0.5 (1 + t) + 0.5 x (1 - t^2) u', u' = beta (1 + 3 kappa x^2)
    (PyTorch's gelu_backward);  dgrad = g * f'(x),
    dx = g * grad * (1 - t^2) (u' + 0.5 x (u'' - 2 t u'^2)), u'' = 6 beta kappa x"""
    @staticmethod
    def forward(ctx, grad, x):
        ctx.save_for_backward(grad, x)
        x_sq = x * x
        t = _tanh(ctx.xp, _BETA * (x + _KAPPA * (x_sq * x)))
        left_derivative = 0.5 * (1.0 + t)
        right_derivative = 0.5 * x * (1.0 - t * t) * (_BETA * (1.0 + 3.0 * _KAPPA * x_sq))
        return grad * (left_derivative + right_derivative)

    @staticmethod
    def backward(ctx, g):
        grad, x = ctx.saved_tensors
        t = (_BETA * (x + _KAPPA * (x * x * x))).tanh()
        du = _BETA * (1.0 + 3.0 * _KAPPA * x * x)
        dgrad = None
        if ctx.needs_input_grad[0]:
            dgrad = g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)
        dx = None
        if ctx.needs_input_grad[1]:
            ddu = (6.0 * _BETA * _KAPPA) * x
            dx = g * grad * (1.0 - t * t) * (du + 0.5 * x * (ddu - 2.0 * t * du * du))
        return dgrad, dx


def _tanh(xp, u):
    """tanh(u) correctly rounded to u's dtype: computed in float64 and rounded once."""
    return xp.tanh(u.astype("float64")).astype(u.dtype) if u.dtype == "float32" else xp.tanh(u)


class CrossEntropy(Primitive):
    """Label-smoothed, weighted cross-entropy of logits x (M, C) against class indices t (M,),
    PyTorch's: with p = softmax(x), e = label_smoothing, w the class weights (or ones),
    v = (t != ignore_index) and w_t = v * w[t],

        loss_i = (1 - e) * -w_t log p[i, t] + e / C * v * sum_c -w_c log p[i, c]

    reduced by 'none', 'sum' or 'mean' (divided by sum(w_t));
    dx_i = coef_i * (a_i * p_i - (1 - e) * w_t onehot(t_i) - e / C * v * w),
    a_i = (1 - e) * w_t + e / C * v * sum(w)

    One primitive for log_softmax, the pick of the target, the smoothing term, the weights
    and the reduction: no (M, C) one-hot or scatter of the target, and backward recomputes
    the softmax from x instead of keeping log p.
    """
    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, label_smoothing, reduction):
        xp = ctx.xp
        M, C = x.shape
        e = label_smoothing
        valid = target != ignore_index
        safe = xp.where(valid, target, 0)
        if ((safe < 0) | (safe >= C)).any():
            bad = target[valid & ((target < 0) | (target >= C))][0]
            raise IndexError(f"cross_entropy: target {int(bad)} is out of bounds for "
                             f"{C} classes")
        v = valid.astype(x.dtype)  # (a bool times a Python float would be float64)
        w_t = v if weight is None else v * weight[safe]
        logp = x - x.max(axis=1, keepdims=True)
        logp -= xp.log(xp.exp(logp).sum(axis=1, keepdims=True))
        loss = -(1.0 - e) * w_t * logp[xp.arange(M), safe]
        if e:
            per_class = logp if weight is None else logp * weight
            loss -= (e / C) * v * per_class.sum(axis=1)
        ctx.save_for_backward(x, target, weight)
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum()
        total = w_t.sum()
        # every target ignored: NaN (0 / 0) as PyTorch, whose gradient is 0 (see backward)
        return loss.sum() / total if total != 0 else xp.asarray(xp.nan, dtype=x.dtype)

    @staticmethod
    def backward(ctx, grad):
        x, target, weight = ctx.saved_tensors
        xp, params = ctx.xp, ctx.params
        e, ignore, reduction = params["label_smoothing"], params["ignore_index"], \
            params["reduction"]
        M, C = x.shape
        t, w = target.data, None if weight is None else weight.data
        valid = t != ignore
        safe = xp.where(valid, t, 0)
        v = valid.astype(x.dtype)
        w_t = v if w is None else v * w[safe]
        # the constant part: (1 - e) * w_t at the target, e / C * v * w everywhere
        const = xp.zeros((M, C), dtype=x.dtype)
        if e:
            const += (e / C) * v[:, None] * (1.0 if w is None else w)
        const[xp.arange(M), safe] += (1.0 - e) * w_t
        total_w = C if w is None else w.sum()
        a = ((1.0 - e) * w_t + (e / C) * v * total_w)[:, None]              # (M, 1)
        if reduction == "none":
            coef = grad.reshape(M, 1)
        elif reduction == "sum":
            coef = grad
        else:
            total = w_t.sum()
            if total == 0:  # as PyTorch: every target ignored, a zero gradient (a and
                # const are 0); targets of zero weight, NaN (0 / 0) everywhere
                total = xp.nan if v.any() else 1
            coef = grad / total
        return (x.softmax(1) * a - const) * coef, None, None
