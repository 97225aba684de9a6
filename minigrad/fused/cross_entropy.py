"""``cross_entropy`` of logits against class indices (label smoothing, class weights,
ignored targets) as one op, beside the composite it equals."""
from .. import backend
from ..autograd.function import Primitive
from ..autograd.function import on_arrays
from ..autograd.grad_mode import STATE
from ..ops.reduce import minus_max, softmax_array
from .differentiate import tangent_by


def composite(x, target, weight=None, ignore_index=-100, reduction="mean",
              label_smoothing=0.0):
    """PyTorch's cross-entropy of (M, C) logits against (M,) class indices, in plain Tensor
    ops (log_softmax and a one-hot pick): what ``CrossEntropy`` computes."""
    C, e = x.shape[1], label_smoothing
    logp = x.log_softmax(1)
    valid = target != ignore_index
    safe = target.masked_fill(~valid, 0)
    classes = x._make(backend.xp_of(x.array).arange(C))
    picked = (logp * (safe.unsqueeze(1) == classes).to(x.dtype)).sum(1)
    v = valid.to(x.dtype)
    w_t = v if weight is None else v * weight[safe]
    per_class = logp if weight is None else logp * weight
    loss = -(picked * w_t) * (1 - e) - per_class.sum(1) * v * (e / C)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.sum() / w_t.sum()


class CrossEntropy(Primitive):
    """loss_i = (1 - e) * -w_t log p[i, t] + e / C * v * sum_c -w_c log p[i, c], p = softmax(x);
    dx_i = coef_i * (a_i * p_i - (1 - e) * w_t onehot(t_i) - e / C * v * w),
    a_i = (1 - e) * w_t + e / C * v * sum(w)

    Label-smoothed, weighted cross-entropy of logits x (M, C) against class indices t (M,),
    PyTorch's: e = label_smoothing, w the class weights (or ones), v = (t != ignore_index)
    and w_t = v * w[t]; the loss is reduced by 'none', 'sum' or 'mean' (divided by
    sum(w_t)), and coef_i is the incoming gradient, divided by sum(w_t) for 'mean'.

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
        # targets are in range (nn.functional checks them; on a GPU its error comes at the
        # next read on the host, and meanwhile they are wrapped into range, as CuPy wraps)
        safe = backend.wrap_index(xp.where(valid, target, 0), C)
        v = valid.astype(x.dtype)  # (a bool times a Python float would be float64)
        w_t = v if weight is None else v * weight[safe]
        logp = backend.softmax(x, 1, log=True)  # one kernel on the GPU
        if logp is None:
            logp = minus_max(xp, x, 1)
            logp -= xp.log(backend.row_sum(xp.exp(logp)))
        loss = -(1.0 - e) * w_t * logp[xp.arange(M), safe]
        if e:
            per_class = logp if weight is None else logp * weight
            loss -= (e / C) * v * backend.row_sum(per_class)[:, 0]
        ctx.save_for_backward(x, target, weight)
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum()
        # every target ignored: NaN (0 / 0) as PyTorch, whose gradient is 0 (see backward)
        total = w_t.sum()
        some = total != 0
        return xp.where(some, loss.sum() / xp.where(some, total, 1), xp.nan).astype(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        x, target, weight = ctx.saved_tensors
        params = ctx.params
        M, C = x.shape
        w = None if weight is None else weight.array
        terms = (params["ignore_index"], params["label_smoothing"], params["reduction"])
        if not STATE.grad_enabled:  # no graph to build: on raw arrays, one pass on the CPU
            dx = on_arrays(_cross_entropy_backward, ctx.xp, x.array, target.array, w, *terms,
                           grad.array)
            return grad._make(dx), None, None
        a, const, total = on_arrays(_target_terms, ctx.xp, x.dtype, C, target.array, w,
                                    *terms[:2])
        return (x.softmax(1) * a - const) * _coef(grad, total, M, terms[2]), None, None

    @staticmethod
    def jvp(ctx, dx, dtarget, dweight):  # the composite's tangent
        x, target, weight = ctx.inputs[:3]
        p = ctx.params
        return tangent_by(lambda x, w: composite(x, target, w, p["ignore_index"], p["reduction"],
                                                 p["label_smoothing"]), x, weight)

    @staticmethod
    def vmap(ctx, x, target, weight, ignore_index, label_smoothing, reduction):
        x, target = ctx.expanded(0, x), ctx.expanded(1, target)  # (N, M, C), (N, M)
        if ctx.batched[2]:  # each element's own class weights (N, C): the composite's terms
            C, e = x.shape[-1], label_smoothing
            logp = x.log_softmax(-1)
            valid = target != ignore_index
            safe = target.masked_fill(~valid, 0)
            picked = logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)
            v = valid.to(x.dtype)
            w_t = v * weight.gather(1, safe)
            per_class = (logp * weight.unsqueeze(1)).sum(-1)
            loss = -(picked * w_t) * (1 - e) - per_class * v * (e / C)
            if reduction == "none":
                return loss
            return loss.sum(1) if reduction == "sum" else loss.sum(1) / w_t.sum(1)
        n, m = target.shape[0], target.shape[1]
        loss = CrossEntropy.apply(x.reshape((n * m, x.shape[-1])), target.reshape((n * m,)),
                                  weight, ignore_index=ignore_index,
                                  label_smoothing=label_smoothing, reduction="none")
        loss = loss.reshape((n, m))
        if reduction == "none":
            return loss
        if reduction == "sum":
            return loss.sum(1)
        valid = target != ignore_index  # "mean": divided by each element's total weight
        w_t = valid.to(x.dtype) if weight is None else \
            valid.to(x.dtype) * weight[target.where(valid, 0)]
        return loss.sum(1) / w_t.sum(1)


def _coef(grad, total, M, reduction):
    """What dx is multiplied by: the incoming gradient, per row for 'none', divided by the
    total weight for 'mean'."""
    if reduction == "none":
        return grad.reshape(M, 1)
    return grad if reduction == "sum" else grad / total


def _cross_entropy_backward(xp, x, t, w, ignore, e, reduction, grad):
    """CrossEntropy's dx on raw arrays, the same operations as its Tensor ops: softmax(x)
    (``softmax_array``, Softmax's forward), then (p * a - const) * coef; on the CPU the
    last in one pass (``host_loops.cross_entropy_grad``: the same bits, no const made)."""
    M, C = x.shape
    p = softmax_array(xp, x, 1)
    a, const, total = _target_terms(xp, x.dtype, C, t, w, ignore, e, make_const=False)
    coef = _coef(grad, total, M, reduction)
    if backend.host_loops.cross_entropy_grad(p, a[:, 0], const.target, const.smoothing,
                                             const.picked, w, coef):
        return p
    p *= a
    p -= const.made()
    p *= coef
    return p


def _total_weight(xp, dtype, v, w_t):
    """The divisor of 'mean', sum(w_t); as PyTorch: every target ignored, 1 (the gradient is
    0, as a and const are); targets of zero weight only, NaN (0 / 0) everywhere."""
    total = w_t.sum()
    return xp.where(total != 0, total, xp.where(v.any(), xp.nan, 1)).astype(dtype)


def _target_terms(xp, dtype, C, t, w, ignore, e, make_const=True):
    """What CrossEntropy's dx takes from the targets, on raw arrays: (a (M, 1), const
    (M, C), the divisor of 'mean'), dx = (softmax(x) * a - const) * grad / divisor. Without
    ``make_const``, const as its parts (``_Const``), made on demand."""
    M = t.shape[0]
    valid = t != ignore
    safe = backend.wrap_index(xp.where(valid, t, 0), C)
    v = valid.astype(dtype)
    w_t = v if w is None else v * w[safe]
    total_w = C if w is None else w.sum()
    a = ((1.0 - e) * w_t + (e / C) * v * total_w)[:, None]                  # (M, 1)
    const = _Const(xp, dtype, C, w, safe, (e / C) * v if e else None, (1.0 - e) * w_t)
    return a, const.made() if make_const else const, _total_weight(xp, dtype, v, w_t)


class _Const:
    """dx's constant part: (1 - e) * w_t at each row's target (``picked``), and e / C * v * w
    everywhere (``smoothing`` = e / C * v per row; None without smoothing)."""

    def __init__(self, xp, dtype, C, w, target, smoothing, picked):
        self.xp, self.dtype, self.C, self.w = xp, dtype, C, w
        self.target, self.smoothing, self.picked = target, smoothing, picked

    def made(self):
        """The (M, C) array."""
        xp, M = self.xp, self.target.shape[0]
        const = xp.zeros((M, self.C), dtype=self.dtype)
        if self.smoothing is not None:
            const += self.smoothing[:, None] * (1.0 if self.w is None else self.w)
        const[xp.arange(M), self.target] += self.picked
        return const
