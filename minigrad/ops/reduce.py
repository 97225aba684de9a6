"""Reduction primitives, the running sum (cumsum), and the softmax family (primitives for
stability and memory).
Each has ``backward`` (reverse mode) and ``jvp`` (forward mode: the output's tangent).

``dims`` is always a tuple of non-negative axes (the Tensor methods normalise ``dim``). A 0-d
input's one dim is the tensor itself: its ``dims`` (and softmax's ``dim``) is the empty tuple,
so that no axis reaches the array module for a 0-d array (CuPy refuses axis 0 there).
A gradient is given the reduced axes back as size-1 dims (``_keep``) and then broadcast.
"""
from .. import backend
from ..autograd import batching

from ..autograd.function import Primitive, on_arrays
from ..autograd.grad_mode import STATE
from .shape import Cat


def _keep(grad, shape, dims, keepdim):
    """Reshape a reduced gradient to ``shape`` with size 1 on ``dims`` (keepdim form)."""
    if keepdim:
        return grad
    return grad.reshape(tuple(1 if i in dims else n for i, n in enumerate(shape)))


def _shift(xp, x, axis):
    """The max over ``axis`` (kept), which softmax and logsumexp subtract for stability;
    0 over an empty axis (whose softmax is empty and logsumexp -inf, as in PyTorch)."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    if x.size == 0 and x.ndim and any(x.shape[a] == 0 for a in axes):
        return xp.zeros([1 if i in axes else n for i, n in enumerate(x.shape)], x.dtype)
    return xp.max(x, axis=axis, keepdims=True)


def _total(xp, e, axis):
    """The sum of ``e`` over ``axis`` (an int or a tuple of axes), kept: by
    ``backend.row_sum`` when the axes are the last ones (a product with ones on the CPU)."""
    axes = axis if isinstance(axis, tuple) else (axis,)
    if axes and sorted(axes) == list(range(e.ndim - len(axes), e.ndim)):
        return backend.row_sum(e, len(axes))
    return xp.sum(e, axis=axis, keepdims=True)


class Sum(Primitive):
    """out = sum(x, dims);  dx = grad broadcast back over dims

    With ``dtype``, x is cast to it first (the engine casts dx back to x's dtype)."""
    @staticmethod
    def forward(ctx, x, dims, keepdim, dtype=None):
        ctx.shape = x.shape
        if dtype is not None:
            x = x.astype(dtype)
        out = backend.lead_sum(x, dims, keepdim)  # (over leading dims: by BLAS on the CPU)
        if out is None:
            out = ctx.xp.sum(x, axis=dims, keepdims=keepdim, dtype=x.dtype)  # (NumPy widens ints)
        return out

    @staticmethod
    def backward(ctx, grad):
        p = ctx.params
        return _keep(grad, ctx.shape, p["dims"], p["keepdim"]).expand(ctx.shape)

    @staticmethod
    def jvp(ctx, dx):
        p = ctx.params
        return dx.sum(p["dims"], keepdim=p["keepdim"], dtype=p.get("dtype"))

    vmap = batching.along("dims")


class SumDim(Sum):
    """out = sum(x, dims);  dx = grad broadcast back over dims

    ``sum(dim)`` (PyTorch's SumBackward1)."""
    node_name = "SumBackward1"


class Mean(Sum):
    """out = sum(x, dims) / count;  dx = grad / count broadcast back over dims

    ``mean(dim)`` (PyTorch's MeanBackward1); ``count`` is how many elements each output
    sums."""
    node_name = "MeanBackward1"

    @staticmethod
    def forward(ctx, x, dims, keepdim, count):
        return Sum.forward(ctx, x, dims, keepdim) / count

    @staticmethod
    def backward(ctx, grad):
        return Sum.backward(ctx, grad / ctx.params["count"])

    @staticmethod
    def jvp(ctx, dx):
        return Sum.jvp(ctx, dx) / ctx.params["count"]


class MeanAll(Mean):
    """out = sum(x) / count;  dx = grad / count broadcast to x's shape

    ``mean()`` (PyTorch's MeanBackward0)."""
    node_name = "MeanBackward0"


class Var(Primitive):
    """out = sum((x - mean(x))^2, dims) / (count - correction);
    dx = grad * 2 (x - mean(x)) / (count - correction)

    The mean and the sum of squares are ``Mean``'s and ``Sum``'s own, of float32 in float64
    and rounded once, as PyTorch accumulates them; ``count`` is how many elements each
    output reduces; no degrees of freedom left (count <= correction) gives inf or NaN, as
    PyTorch. ``whole``: taken over the whole tensor with no dim given, where PyTorch's
    gradient without degrees of freedom is inf (NaN where x is its mean) rather than
    2 (x - mean) / (count - correction)."""
    @staticmethod
    def forward(ctx, x, dims, keepdim, correction, count, whole=False):
        ctx.save_for_backward(x)
        return _wide_var(ctx, x, dims, keepdim, correction, count).astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _var_grad(x, grad, ctx.params)

    @staticmethod
    def jvp(ctx, dx):
        x, p = ctx.inputs[0], ctx.params
        diff = x - x.mean(p["dims"], keepdim=True)
        return (diff * dx).sum(p["dims"], keepdim=p["keepdim"]) * _dof_scale(p)

    vmap = batching.along("dims")


class Std(Var):
    """out = sqrt(var(x, dims));  dx = var's dx with grad / (2 out), 0 where out = 0 (a zero
    spread gets a zero gradient rather than NaN, as in PyTorch)"""
    @staticmethod
    def forward(ctx, x, dims, keepdim, correction, count, whole=False):
        wide = _wide_var(ctx, x, dims, keepdim, correction, count)
        out = ctx.xp.sqrt(wide).astype(x.dtype, copy=False)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        return _var_grad(x, (grad / (2 * out)).masked_fill(out == 0, 0.0), ctx.params)

    @staticmethod
    def jvp(ctx, dx):
        out = ctx.result
        return (Var.jvp(ctx, dx) / (2 * out)).masked_fill(out == 0, 0.0)


def _wide_var(ctx, x, dims, keepdim, correction, count):
    """The variance of ``x`` over ``dims``, of float32 in float64 (not rounded back)."""
    if x.dtype == _SINGLE:
        x = x.astype(_DOUBLE)
    diff = x - Mean.forward(ctx, x, dims, True, count)
    return Sum.forward(ctx, diff * diff, dims, keepdim) / max(0, count - correction)


_SINGLE, _DOUBLE = backend.np.dtype("float32"), backend.np.dtype("float64")


def _var_grad(x, grad, params):
    """var's dx from the gradient of its output: 2 / (count - correction) * grad * (x -
    mean(x)), as Tensor ops (to be differentiated again)."""
    grad = _keep(grad, x.shape, params["dims"], params["keepdim"])
    if params.get("whole") and params["count"] <= params["correction"]:
        return grad * x.new_full(x.shape, float("inf")).masked_fill(x == x.mean(),
                                                                     float("nan"))
    diff = x - x.mean(params["dims"], keepdim=True)
    return (_dof_scale(params) * grad) * diff  # (PyTorch's order of the products)


def _dof_scale(params):
    """2 / (count - correction) (inf at 0; forward's clamp at 0 is not PyTorch's here)."""
    dof = params["count"] - params["correction"]
    return 2.0 / dof if dof else float("inf")


# The running sum adds float32 in float64 and float16 in float32, and rounds each total
# once, as PyTorch does on the CPU: a long float32 running sum stays accurate.
_RUNNING_TOTAL = {backend.np.dtype("float32"): backend.np.dtype("float64"),
                  backend.np.dtype("float16"): backend.np.dtype("float32")}


class Cumsum(Primitive):
    """out[i] = x[0] + ... + x[i] along dim, in dtype (a 0-d x: x itself);  dx = the running
    sum of grad (cast to x's dtype) along dim taken from the end, grad.flip(dim).cumsum(dim)
    .flip(dim)"""
    @staticmethod
    def forward(ctx, x, dim, dtype):
        ctx.dtype = x.dtype
        x = x.astype(dtype, copy=False)
        out = ctx.xp.cumsum(x.reshape(1) if x.ndim == 0 else x, axis=dim,
                            dtype=_RUNNING_TOTAL.get(dtype, dtype))
        return backend.row_major(out.reshape(x.shape).astype(dtype, copy=False))

    @staticmethod
    def backward(ctx, grad):
        dim = ctx.params["dim"]
        return grad.to(ctx.dtype).flip(dim).cumsum(dim).flip(dim)

    @staticmethod
    def jvp(ctx, dx):
        return Cumsum.apply(dx, **ctx.params)

    vmap = batching.along("dim")


class Prod(Primitive):
    """out = the product of x's elements;  dx = grad * the product of the other elements
    (out / x where x has no zero, else running products from both ends)

    ``prod()`` (PyTorch's ProdBackward0)."""
    node_name = "ProdBackward0"

    @staticmethod
    def forward(ctx, x):
        out = _product(ctx.xp, x.reshape(-1), 0, False)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        if x.ndim == 0:
            return grad
        return grad * _others_product(x.reshape(-1), out.reshape(1), 0).reshape(x.shape)

    @staticmethod
    def jvp(ctx, dx):
        x = ctx.inputs[0]
        if x.ndim == 0:
            return dx
        others = _others_product(x.reshape(-1), ctx.result.reshape(1), 0)
        return (dx.reshape(-1) * others).sum()

    @staticmethod
    def vmap(ctx, x):  # the product of each element's values
        return ProdDim.apply(x.reshape(x.shape[:1] + (-1,)), dims=(1,), keepdim=False)


class ProdDim(Primitive):
    """out = the product of x's elements along dim;  dx = grad * the product of the other
    elements along dim (out / x in a slice without zeros, else running products from both
    ends)

    ``prod(dim)`` (PyTorch's ProdBackward1); ``dims`` is (dim,), or () for a 0-d x."""
    node_name = "ProdBackward1"

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        if not dims:
            out = x.copy()
        else:
            out = _product(ctx.xp, x, dims[0], keepdim)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
        if not dims:
            return grad
        return _keep(grad, x.shape, dims, keepdim) * \
            _others_product(x, _keep(out, x.shape, dims, keepdim), dims[0])

    @staticmethod
    def jvp(ctx, dx):
        x, dims, keepdim = ctx.inputs[0], ctx.params["dims"], ctx.params["keepdim"]
        if not dims:
            return dx
        others = _others_product(x, _keep(ctx.result, x.shape, dims, keepdim), dims[0])
        return (dx * others).sum(dims, keepdim=keepdim)

    vmap = batching.along("dims")


_HALF = backend.np.dtype("float16")


def _product(xp, x, axis, keepdim):
    """The product of ``x`` along ``axis`` in x's dtype; float16 rounded at each step, as
    PyTorch multiplies it (NumPy's reduction would keep a float32 product)."""
    if x.dtype != _HALF or x.shape[axis] == 0:
        return xp.asarray(x.prod(axis=axis, keepdims=keepdim, dtype=x.dtype))
    rows = xp.moveaxis(x, axis, 0)  # one multiply per row, in order (CuPy's cumprod is a
    out = rows[:1].copy()           # parallel scan: 1e-4 * 1e-4 * 1e4 * 1e4 gave inf * 0)
    for i in range(1, rows.shape[0]):
        out *= rows[i:i + 1]
    return xp.moveaxis(out, 0, axis) if keepdim else out.reshape(out.shape[1:])  # (an array)


def _others_product(x, out, dim):
    """At each element of ``x``, the product of the other elements of its slice along
    ``dim`` (``out``: the slice products, kept as size-1 dims), as PyTorch: out / x where
    the slice holds no zero, else the product of the running products from the start and
    from the end that stop short of the element (exact with zeros, and differentiable)."""
    n = x.shape[dim]
    if n <= 1:
        return x.new_ones(x.shape)
    zero = x == 0
    quotient = out / x.masked_fill(zero, 1)
    return _exclusive_products(x, dim).where(zero.any(dim, keepdim=True), quotient)


def _exclusive_products(x, dim):
    """The product of the elements before each one along ``dim`` times that of the
    elements after it (n >= 2 along dim)."""
    n = x.shape[dim]
    lead = (slice(None),) * dim
    ones = x.new_ones(x.shape[:dim] + (1,) + x.shape[dim + 1:])
    before = Cat.apply(ones, x[lead + (slice(0, n - 1),)], dim=dim).cumprod(dim)
    after = Cat.apply(ones, x[lead + (slice(1, n),)].flip(dim), dim=dim).cumprod(dim).flip(dim)
    return before * after


class Cumprod(Primitive):
    """out = the running product along dim, x[0] * ... * x[i] (a 0-d x: x itself);
    dx = the running sum of grad * out from the end, over x (where x has zeros: each
    element's products taken without it)

    float32 is multiplied in float64 and float16 in float32, each output rounded once, as
    PyTorch does on the CPU."""
    @staticmethod
    def forward(ctx, x, dim):
        out = (x.reshape(1) if x.ndim == 0 else x).cumprod(
            axis=dim, dtype=_RUNNING_TOTAL.get(x.dtype, x.dtype))
        out = out.reshape(x.shape).astype(x.dtype, copy=False)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        dim = ctx.params["dim"]
        if x.ndim == 0 or x.shape[dim] <= 1:
            return grad
        return _cumprod_grad(x, out, grad, dim)

    @staticmethod
    def jvp(ctx, dx):  # out * cumsum(dx / x) before the first zero, dx there times the
        x, out, dim = ctx.inputs[0], ctx.result, ctx.params["dim"]  # products after it
        if x.ndim == 0:
            return dx
        zero = x == 0
        count = zero.cumsum(dim)
        before, first = count == 0, zero & (count == 1)
        plain = out * (dx / x.where(before, 1)).cumsum(dim)
        return plain.where(before, x.where(~first, dx).cumprod(dim))

    vmap = batching.along("dim")


def _cumprod_grad(x, out, grad, dim):
    """Cumprod's dx, as Tensor ops. Before the first zero of a slice (everywhere in a slice
    without one): the running sum from the end of grad * out, over x (out is 0 from the
    first zero on); at the first zero: the sum of grad times the running products with that
    zero taken as 1; after it: 0, written (under create_graph) as that zero times the
    gradient of the products with it taken as 1, so that second derivatives are right."""
    w = (grad * out).flip(dim).cumsum(dim).flip(dim)
    zero = x == 0
    if STATE.grad_enabled and not bool(zero.any()):  # (second derivatives: PyTorch's rule)
        return w / x
    count = zero.cumsum(dim)
    before, first = count == 0, zero & (count == 1)
    ones_at_first = x.masked_fill(first, 1)
    products = ones_at_first.cumprod(dim)
    at_first = (grad * products).masked_fill(before, 0).sum(dim, keepdim=True)
    dx = (w / x.where(before, 1)).where(before, at_first.where(first, 0))
    if STATE.grad_enabled:  # (a zero times the rest: 0, with the right derivative)
        rest = _cumprod_grad(ones_at_first, products, grad, dim)
        first_zero = x.where(first, 0).sum(dim, keepdim=True)
        dx = dx + (first_zero * rest).masked_fill(count == 0, 0).masked_fill(first, 0)
    return dx


class Amax(Primitive):
    """out = max(x, dims);  dx = grad / count where x == out (ties share the gradient equally)"""
    _reduce = "max"

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        out = getattr(ctx.xp, ctx._reduce)(x, axis=dims, keepdims=keepdim)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        return _extreme_grad(grad, x, out, ctx.params["dims"], ctx.params["keepdim"])

    @staticmethod
    def jvp(ctx, dx):
        return _extreme_tangent(dx, ctx.inputs[0], ctx.result, ctx.params["dims"],
                                ctx.params["keepdim"])

    vmap = batching.along("dims")


def _extreme_grad(grad, a, out, dims, keepdim):
    """The gradient of ``out``, the max (or min) of ``a`` over ``dims``, with respect to
    ``a``: shared equally by the tied extremes, 0 elsewhere."""
    mask = a == _keep(out, a.shape, dims, keepdim)
    count = mask.sum(dims, keepdim=True)
    return (_keep(grad, a.shape, dims, keepdim) / count) * mask


def _extreme_tangent(da, a, out, dims, keepdim):
    """The tangent of that max (or min) from ``a``'s tangent: its mean over the tied
    extremes."""
    mask = a == _keep(out, a.shape, dims, keepdim)
    return da.where(mask, 0.0).sum(dims, keepdim=keepdim) / mask.sum(dims, keepdim=keepdim)


class Amin(Amax):
    """out = min(x, dims);  dx = grad / count where x == out (ties share the gradient equally)"""
    _reduce = "min"


class Max(Amax):
    """out = max(x);  dx = grad / count where x == out (ties share the gradient equally; a
    NaN maximum: where x is NaN), else 0

    ``max()`` (PyTorch's MaxBackward1, whose rule differs from amax's at a NaN)."""
    node_name = "MaxBackward1"

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        mask = (x == out) | ((x != x) & (out != out))  # (NaN != NaN)
        return (grad / mask.sum()).expand(x.shape).where(mask, 0.0)

    @staticmethod
    def vmap(ctx, x, dims, keepdim):
        """amax (amin) over each element: this op's backward counts the ties of the whole
        tensor it is given, which would be the whole batch."""
        op = Amin if issubclass(ctx.op, Min) else Amax
        return op.apply(x, dims=batching.shifted(dims, x.ndim - 1), keepdim=keepdim)


class Min(Max):
    """out = min(x);  dx = grad / count where x == out (ties share the gradient equally; a
    NaN minimum: where x is NaN), else 0

    ``min()`` (PyTorch's MinBackward1)."""
    node_name = "MinBackward1"
    _reduce = "min"


class MaxDim(Primitive):
    """(values, indices) = max(x, dim);  dx = grad at the returned index, 0 elsewhere"""
    _arg = "argmax"
    node_name = "MaxBackward0"

    @staticmethod
    def forward(ctx, x, dim, keepdim):
        xp = ctx.xp
        idx = getattr(xp, ctx._arg)(x, axis=dim, keepdims=True)
        values = xp.take_along_axis(x, idx, axis=dim)
        positions = xp.arange(x.shape[dim]).reshape([-1] + [1] * (x.ndim - 1 - dim))
        ctx.save_for_backward(positions == idx)  # where the gradient goes
        ctx.shape = x.shape
        if not keepdim:
            idx, values = idx.squeeze(dim), values.squeeze(dim)
        idx = idx.astype(xp.int64)
        ctx.mark_non_differentiable(idx)
        return values, idx

    @staticmethod
    def backward(ctx, grad, _grad_idx):
        (selected,) = ctx.saved_tensors
        dim, keepdim = ctx.params["dim"], ctx.params["keepdim"]
        return _keep(grad, ctx.shape, (dim,), keepdim).where(selected, 0.0)

    @staticmethod
    def jvp(ctx, dx):  # the tangent at the returned index (none for the indices)
        dim, keepdim = ctx.params["dim"], ctx.params["keepdim"]
        idx = _keep(ctx.result[1], dx.shape, (dim,), keepdim)
        positions = ctx.xp.arange(dx.shape[dim]).reshape([-1] + [1] * (dx.ndim - 1 - dim))
        return dx.where(idx == dx._make(positions), 0.0).sum(dim, keepdim=keepdim), None

    vmap = batching.along("dim")


class MinDim(MaxDim):
    """(values, indices) = min(x, dim);  dx = grad at the returned index, 0 elsewhere"""
    _arg = "argmin"
    node_name = "MinBackward0"


class LogSumExp(Primitive):
    """out = log(sum(exp(x), dims)), computed around the max;  dx = grad * exp(x - out)"""
    node_name = "LogsumexpBackward0"

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        xp = ctx.xp
        m = _shift(xp, x, dims)
        m = xp.where(xp.isfinite(m), m, 0)  # an all -inf slice gives -inf, not NaN
        out = xp.log(_total(xp, xp.exp(x - m), dims)) + m
        if not keepdim:
            out = out.squeeze(dims)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
        return _keep(grad, x.shape, dims, keepdim) * (x - _keep(out, x.shape, dims, keepdim)).exp()

    @staticmethod
    def jvp(ctx, dx):  # the tangent averaged with the softmax weights
        x, dims, keepdim = ctx.inputs[0], ctx.params["dims"], ctx.params["keepdim"]
        weights = (x - _keep(ctx.result, x.shape, dims, keepdim)).exp()
        return (dx * weights).sum(dims, keepdim=keepdim)

    vmap = batching.along("dims")


class Softmax(Primitive):
    """out = exp(x - max) / sum(exp(x - max));  dx = out * (grad - sum(grad * out))

    A primitive rather than a composite: the max shift keeps exp finite, and backward
    needs only the output, so one array is saved instead of four. Over the last dim on the
    GPU each direction is one kernel (``backend.softmax``).
    """
    @staticmethod
    def forward(ctx, x, dim):
        out = softmax_array(ctx.xp, x, dim)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return _softmax_backward(ctx, grad, log=False)

    @staticmethod
    def jvp(ctx, dx):  # dout = out * (dx - sum(dx * out))
        out, dim = ctx.result, ctx.params["dim"]
        return out * (dx - (dx * out).sum(dim, keepdim=True))

    vmap = batching.along("dim")


def softmax_array(xp, x, dim):
    """Softmax's forward on a raw array ``x`` (``xp`` its array module): a new array."""
    out = backend.softmax(x, dim)
    if out is None:
        e = minus_max(xp, x, dim)
        e = xp.exp(e, out=e)
        e /= _total(xp, e, dim)
        out = e
    return backend.row_major(out)  # (whatever x's layout, as PyTorch's)


def minus_max(xp, x, dim):
    """x less its max over ``dim`` (a new array): over the last dim of a host array, each
    row in one compiled pass (``host_loops.minus_row_max``, NumPy's bits)."""
    if dim in (-1, x.ndim - 1):
        shifted = backend.host_loops.minus_row_max(x)
        if shifted is not None:
            return shifted
    return xp.asarray(x - _shift(xp, x, dim))  # (an array even where x is 0-d)


class SafeSoftmax(Softmax):
    """softmax in which a row that is entirely -inf gives zeros instead of NaN (attention
    with every key masked; PyTorch's _safe_softmax);  dx = out * (grad - sum(grad * out))"""
    @staticmethod
    def forward(ctx, x, dim):
        xp = ctx.xp
        m = _shift(xp, x, dim)
        e = xp.exp(x - xp.where(xp.isfinite(m), m, 0))
        total = _total(xp, e, dim)
        out = e / xp.where(total == 0, 1, total)
        ctx.save_for_backward(out)
        return out


class LogSoftmax(Primitive):
    """out = x - max - log(sum(exp(x - max)));  dx = grad - exp(out) * sum(grad)

    A primitive for stability: log(softmax(x)) underflows to -inf where this stays finite.
    """
    @staticmethod
    def forward(ctx, x, dim):
        out = backend.softmax(x, dim, log=True)
        if out is None:
            xp = ctx.xp
            out = minus_max(xp, x, dim)
            out -= xp.log(_total(xp, xp.exp(out), dim))
        out = backend.row_major(out)  # (whatever x's layout, as PyTorch's)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return _softmax_backward(ctx, grad, log=True)

    @staticmethod
    def jvp(ctx, dx):  # dout = dx - sum(dx * exp(out))
        out, dim = ctx.result, ctx.params["dim"]
        return dx - (dx * out.exp()).sum(dim, keepdim=True)

    vmap = batching.along("dim")


def _softmax_backward(ctx, grad, log):
    """softmax: dx = out * (grad - sum(grad * out)); log_softmax: dx = grad - exp(out) *
    sum(grad). One kernel on the GPU over the last dim; Tensor ops elsewhere, and always
    under create_graph (so they can be differentiated again)."""
    (out,) = ctx.saved_tensors
    dim = ctx.params["dim"]
    if not STATE.grad_enabled:
        dx = on_arrays(backend.softmax_backward, grad.array, out.array, dim, log)
        if dx is not None:
            return grad._make(dx)
    if log:
        return grad - out.exp() * grad.sum(dim, keepdim=True)
    return out * (grad - (grad * out).sum(dim, keepdim=True))


# --- norms that are one node, as PyTorch's LinalgVectorNormBackward0 -----------------------

class CountNonzero(Primitive):
    """out = the number of nonzero elements over ``dims`` (``norm(0)``), in x's dtype;
    dx = None: in the graph, as PyTorch's, but no gradient reaches x (its .grad stays None)."""
    node_name = "LinalgVectorNormBackward0"

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        return (x != 0).sum(axis=dims, keepdims=keepdim).astype(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        return (None,)

    @staticmethod
    def jvp(ctx, dx):
        return None

    vmap = batching.along("dims")


class AbsSumNorm(Primitive):
    """out = sum(|x|, dims) (``norm(1)``);  dx = grad broadcast back over dims * sign(x)

    float16 is summed in float32 and rounded once, as ``sum``."""
    node_name = "LinalgVectorNormBackward0"

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        ctx.save_for_backward(x)
        a = ctx.xp.abs(x)
        if a.dtype != ctx.xp.float16:
            return Sum.forward(ctx, a, dims, keepdim)
        return Sum.forward(ctx, a.astype(ctx.xp.float32), dims, keepdim).astype(ctx.xp.float16)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
        return _keep(grad, x.shape, dims, keepdim).expand(x.shape) * x.sign()

    @staticmethod
    def jvp(ctx, dx):
        p = ctx.params
        return (dx * ctx.inputs[0].sign()).sum(p["dims"], keepdim=p["keepdim"])

    vmap = batching.along("dims")


class MaxAbsNorm(Primitive):
    """out = max(|x|, dims) (``norm(inf)``);  dx = grad / count * sign(x) where |x| == out
    (ties share the gradient equally), else 0"""
    node_name = "LinalgVectorNormBackward0"
    _reduce = "max"

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        out = getattr(ctx.xp, ctx._reduce)(ctx.xp.abs(x), axis=dims, keepdims=keepdim)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):  # amax's rule on |x|, times d|x|/dx
        x, out = ctx.saved_tensors
        dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
        return _extreme_grad(grad, x.abs(), out, dims, keepdim) * x.sign()

    @staticmethod
    def jvp(ctx, dx):
        x = ctx.inputs[0]
        return _extreme_tangent(dx * x.sign(), x.abs(), ctx.result, ctx.params["dims"],
                                ctx.params["keepdim"])

    vmap = batching.along("dims")


class MinAbsNorm(MaxAbsNorm):
    """out = min(|x|, dims) (``norm(-inf)``);  dx = grad / count * sign(x) where |x| == out
    (ties share the gradient equally), else 0"""
    node_name = "LinalgVectorNormBackward0"
    _reduce = "min"


class PNorm(Primitive):
    """out = sum(|x|^p, dims)^(1/p) (``norm(p)`` for any other p);
    dx = grad * x |x|^(p-2) / out^(p-1), 0 where out = 0 (for p < 1 also where x = 0)

    PyTorch's formula (its norm_backward), one node: where the sum overflows (out = inf)
    the gradient of a finite x is 0, not the 0 * inf = NaN of a chain of pow and sum.
    float16 is summed in float32 and the norm rounded once; its gradient is float16 ops,
    as PyTorch's."""
    node_name = "LinalgVectorNormBackward0"

    @staticmethod
    def forward(ctx, x, p, dims, keepdim):
        from .elementwise import _scalar_power
        xp = ctx.xp
        wide = x.astype(xp.float32) if x.dtype == xp.float16 else x
        a = xp.asarray(xp.abs(wide))  # (NumPy makes a scalar of a 0-d result)
        s = xp.asarray(Sum.forward(ctx, _scalar_power(a, p), dims, keepdim))
        out = _scalar_power(s, 1.0 / p)
        if p < 0:  # an empty slice sums to 0: its norm is 0 (no zero entry sends s to inf)
            out = xp.where(s == 0, 0, out)
        out = out.astype(x.real.dtype)  # (complex x: a real norm)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        p, dims, keepdim = ctx.params["p"], ctx.params["dims"], ctx.params["keepdim"]
        grad, out = _keep(grad, x.shape, dims, keepdim), _keep(out, x.shape, dims, keepdim)
        if p == 2:
            return grad * (x / out).masked_fill(out == 0, 0.0)
        if p < 1:  # |x|^(p-1) is infinite at x = 0, where PyTorch's gradient is 0
            scaled = x.sign() * (x.abs() ** (p - 1)).masked_fill(x == 0, 0.0)
            return scaled * grad * out ** (1 - p)
        if p < 2:
            scaled = x.sign() * x.abs() ** (p - 1)
        else:
            scaled = x * x.abs() ** (p - 2)
        return scaled * (grad / out ** (p - 1)).masked_fill(out == 0, 0.0)

    @staticmethod
    def jvp(ctx, dx):  # dout = sum(x |x|^(p-2) dx) / out^(p-1), 0 where out = 0
        x, out = ctx.inputs[0], ctx.result
        p, dims, keepdim = ctx.params["p"], ctx.params["dims"], ctx.params["keepdim"]
        if p == 2:
            dot = (x * dx).sum(dims, keepdim=keepdim)
        elif p < 1:
            scaled = x.sign() * (x.abs() ** (p - 1)).masked_fill(x == 0, 0.0)
            return (scaled * dx).sum(dims, keepdim=keepdim) * out ** (1 - p)
        else:
            dot = (x.sign() * x.abs() ** (p - 1) * dx).sum(dims, keepdim=keepdim)
        return (dot / out ** (p - 1)).masked_fill(out == 0, 0.0)

    vmap = batching.along("dims")


class MedianAll(Primitive):
    """out = the lower median of x over dims (NaN where x holds a NaN);  dx = grad / count
    where x == out (ties share the gradient equally; a NaN median: where x is NaN), else 0

    ``median()`` (PyTorch's MedianBackward0; its rule is max()'s)."""
    node_name = "MedianBackward0"
    _skip_nan = False

    @staticmethod
    def forward(ctx, x, dims, keepdim):
        xp = ctx.xp
        rest = [n for i, n in enumerate(x.shape) if i not in dims]
        flat = xp.moveaxis(x, dims, tuple(range(x.ndim - len(dims), x.ndim)))
        flat = flat.reshape(tuple(rest) + (-1,))
        n = flat.shape[-1]
        if n == 0:
            out = xp.full(rest, xp.nan, dtype=x.dtype)
        else:
            s = xp.sort(flat, axis=-1)  # (NaN last)
            nans = (flat != flat).sum(-1, keepdims=True)
            if ctx._skip_nan:
                pos = xp.maximum((n - nans - 1) // 2, 0)
            else:
                pos = xp.where(nans > 0, n - 1, (n - 1) // 2)
            out = xp.take_along_axis(s, pos, -1)[..., 0]
        if keepdim:
            out = out.reshape([1 if i in dims else n for i, n in enumerate(x.shape)])
        out = backend.row_major(xp.asarray(out))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
        kept = _keep(out, x.shape, dims, keepdim)
        mask = (x == kept) | ((x != x) & (kept != kept))
        count = mask.sum(dims, keepdim=True)
        return (_keep(grad, x.shape, dims, keepdim) / count) * mask

    @staticmethod
    def jvp(ctx, dx):
        x, out = ctx.inputs[0], ctx.result
        dims, keepdim = ctx.params["dims"], ctx.params["keepdim"]
        kept = _keep(out, x.shape, dims, keepdim)
        mask = (x == kept) | ((x != x) & (kept != kept))
        return dx.where(mask, 0.0).sum(dims, keepdim=keepdim) / mask.sum(dims, keepdim=keepdim)

    vmap = batching.along("dims")


class NanmedianAll(MedianAll):
    """out = the lower median of x's non-NaN elements over dims (NaN if there are none);
    dx = grad / count where x == out, else 0

    ``nanmedian()`` (PyTorch's NanmedianBackward0)."""
    node_name = "NanmedianBackward0"
    _skip_nan = True


class Logcumsumexp(Primitive):
    """out = log(exp(x[0]) + ... + exp(x[i])) at each i along dim, one logaddexp a step
    (stable);  dx = at each j, the sum over i >= j of grad[i] exp(x[j] - out[i]), in log space
    with grad's positive and negative parts apart, as PyTorch does

    ``logcumsumexp`` (PyTorch's LogcumsumexpBackward0)."""
    node_name = "LogcumsumexpBackward0"

    @staticmethod
    def forward(ctx, x, dim):
        xp = ctx.xp
        out = xp.moveaxis(x.copy(), dim, 0)
        for i in range(1, out.shape[0]):
            out[i] = xp.logaddexp(out[i - 1], out[i])
        out = backend.row_major(xp.moveaxis(out, 0, dim))
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        dim = ctx.params["dim"]
        log_abs, lowest = grad.abs().log(), _lowest(grad)  # (not -inf: no NaN from -inf - -inf)
        parts = [log_abs.where(g, lowest) - out for g in (grad > 0, grad < 0)]
        pos, neg = (Logcumsumexp.apply(p.flip(dim), dim=dim).flip(dim) for p in parts)
        return (pos + x).exp() - (neg + x).exp()

    @staticmethod
    def jvp(ctx, dx):
        x, out = ctx.inputs[0], ctx.result
        dim = ctx.params["dim"]
        log_abs = dx.abs().log() + x
        pos, neg = (Logcumsumexp.apply(log_abs.where(g, _lowest(dx)), dim=dim)
                    for g in (dx > 0, dx < 0))
        return (pos - out).exp() - (neg - out).exp()

    vmap = batching.along("dim")


def _lowest(t):
    """The dtype's lowest finite value, which stands for log(0) in logcumsumexp's rules, as
    in PyTorch's."""
    return float(backend.np.finfo(t.array.dtype).min)
