"""As ``torch.nn.utils``: gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``, and
``get_total_norm`` with ``clip_grads_with_norm_``, the two halves of ``clip_grad_norm_``),
``parameters_to_vector`` and ``vector_to_parameters``; ``evaluating(module)``, a
context for evaluation in eval mode without gradients; and ``utils.rnn.pad_sequence``.

The clipping functions change ``p.grad.array`` in place on the array's own device and in its
own dtype (a float32 gradient stays float32), and skip parameters whose ``.grad`` is None.
They are updates to data, not differentiable ops, so no graph is recorded. On the CPU the
norms add their terms in the order PyTorch's CPU kernels do, so they have PyTorch's bits.
"""
import contextlib
import math
import types
import warnings
from fractions import Fraction

import numpy as np

from minigrad import backend, no_grad
from minigrad.tensor import Tensor
from minigrad.compile.recorder import replayed_as_call
from . import rnn  # noqa: F401  (nn.utils.rnn.pad_sequence, as torch.nn.utils.rnn)


@contextlib.contextmanager
def evaluating(module):
    """Evaluate ``module`` in eval mode without recording gradients, then put back the
    training flag each of its submodules had (and the grad mode)::

        with nn.utils.evaluating(model):
            logits = model(x)

    It stands for ``model.eval()``; ``with torch.no_grad(): ...``; ``model.train(was)``,
    except that a submodule left in eval mode inside a training model stays so. The flags
    are restored even when the block raises. Yields ``module``.
    """
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with no_grad():
            yield module
    finally:
        for m, training in modes:
            m.training = training


@replayed_as_call  # mg.compile replays the whole call
def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scale the gradients so that their total norm is at most ``max_norm``; return the norm
    before clipping as a 0-d Tensor.

    The total norm is the ``norm_type``-norm of all gradients as if concatenated into one
    vector (``inf`` for the largest absolute value). Every gradient is multiplied by
    ``min(max_norm / (total_norm + 1e-6), 1)``, as in PyTorch: ``get_total_norm`` of the
    gradients, then ``clip_grads_with_norm_``.

    Args:
        parameters: a Tensor or an iterable of Tensors whose ``.grad`` is clipped
        max_norm (float): the largest total norm allowed
        norm_type (float): the p of the p-norm; ``float("inf")`` or ``"inf"`` for the max norm
        error_if_nonfinite (bool): raise RuntimeError, leaving the gradients as they are, when
            the total norm is nan or inf (otherwise the gradients are scaled by it, as PyTorch)
        foreach (bool or None): PyTorch's choice of its multi-tensor kernels, which it has on
            both of minigrad's devices (so True never raises); the same arithmetic either way
    """
    grads = _grads(parameters)
    if not grads:
        return Tensor(0.0)  # PyTorch's torch.tensor(0.0): float32, on the CPU
    total = _total_norm(grads, norm_type, error_if_nonfinite)
    _clip_with_norm(grads, max_norm, total)
    return Tensor(total)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type``-norm of ``tensors`` (a Tensor or an iterable of Tensors) as if
    concatenated into one vector, as a 0-d Tensor (``torch.nn.utils.get_total_norm``):
    the norm of their norms, in the dtype of the widest of them. ``clip_grad_norm_`` is
    this of the gradients followed by ``clip_grads_with_norm_``.

    Args:
        tensors: a Tensor or an iterable of Tensors
        norm_type (float): the p of the p-norm; ``float("inf")`` or ``"inf"`` for the max norm
        error_if_nonfinite (bool): raise RuntimeError when the norm is nan or inf
        foreach (bool or None): accepted, as in ``clip_grad_norm_``
    """
    if isinstance(tensors, Tensor):
        tensors = [tensors]
    arrays = [t.array for t in tensors]
    if not arrays:
        return Tensor(0.0)
    return Tensor(_total_norm(arrays, norm_type, error_if_nonfinite))


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Multiply every gradient of ``parameters`` by ``min(max_norm / (total_norm + 1e-6),
    1)``, in place, for a ``total_norm`` computed before (``get_total_norm``), as
    ``torch.nn.utils.clip_grads_with_norm_``. Returns None.

    Args:
        parameters: a Tensor or an iterable of Tensors whose ``.grad`` is clipped
        max_norm (float): the largest total norm allowed
        total_norm (Tensor): the total norm of the gradients
        foreach (bool or None): accepted, as in ``clip_grad_norm_``
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    grads = [p.grad.array for p in parameters if p.grad is not None]
    if not grads:
        return
    if not isinstance(total_norm, Tensor):
        raise TypeError("clip_grads_with_norm_: total_norm must be a Tensor (as "
                        f"get_total_norm returns), got {type(total_norm).__name__}")
    _clip_with_norm(grads, max_norm, total_norm.array)


def _total_norm(arrays, norm_type, error_if_nonfinite):
    """The total norm of the non-empty list ``arrays`` as a 0-d array: the norm of each,
    then the norm of those stacked (in the widest dtype, on the first one's device)."""
    norm_type = float(norm_type)
    first = backend.device_of(arrays[0])
    xp = backend.xp_of(arrays[0])
    # PyTorch groups the tensors by device and dtype and takes their norms group after
    # group, the group that appears last first (the order of its C++ hash map); the norm
    # of the per-tensor norms is its order of evaluation (and its p=0 quirk: it counts the
    # tensors with a non-zero norm, not the non-zero elements)
    groups = {}
    for a in arrays:
        groups.setdefault((backend.device_of(a), a.dtype), []).append(a)
    norms = [backend.to_device(_vector_norm(a, norm_type), first)
             for group in reversed(groups.values()) for a in group]
    dtype = xp.result_type(*norms)
    total = _vector_norm(xp.stack([n.astype(dtype, copy=False) for n in norms]), norm_type)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def _clip_with_norm(grads, max_norm, total):
    """Multiply the gradient arrays ``grads`` by min(max_norm / (total + 1e-6), 1)."""
    max_norm = float(max_norm)
    xp = backend.xp_of(total)
    # PyTorch's max_norm / t is reciprocal(t) * max_norm (Tensor.__rtruediv__); we round
    # the same way. Multiplying by a coefficient clamped to 1 changes nothing, but a nan
    # norm must still reach the gradients, as it does in PyTorch.
    coef = xp.asarray(xp.minimum(xp.reciprocal(total + total.dtype.type(1e-6)) * max_norm, 1.0),
                      dtype=total.dtype)
    with np.errstate(invalid="ignore"):  # see _scale_
        for g in grads:
            _scale_(g, backend.to_device(coef, backend.device_of(g)).astype(g.dtype))


def _scale_(g, coef):
    """``g *= coef`` in place, with nothing read back from the device (no branch on the
    coefficient's value). A coef of 0 (an inf norm, or max_norm=0) turns an inf element
    into nan (inf * 0), as in PyTorch: NumPy warns of that product, and the caller's
    ``np.errstate(invalid="ignore")`` silences the warning; CuPy computes the same nan and
    never warns."""
    g *= coef


@replayed_as_call  # mg.compile replays the whole call
def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient elementwise into ``[-clip_value, clip_value]``, in place.

    Args:
        parameters: a Tensor or an iterable of Tensors whose ``.grad`` is clipped
        clip_value (float): the largest absolute value a gradient element may keep
        foreach (bool or None): as in ``clip_grad_norm_``: accepted, the same result
    """
    clip_value = float(clip_value)
    for g in _grads(parameters):
        backend.xp_of(g).clip(g, -clip_value, clip_value, out=g)


def _grads(parameters):
    """The ``.grad`` arrays of a Tensor or an iterable of Tensors, skipping None."""
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        parameters = list(parameters)  # a generator can be read only once
        if is_generator and not parameters:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.",
                          stacklevel=3)
    return [p.grad.array for p in parameters if p.grad is not None]


def _vector_norm(x, p):
    """``torch.linalg.vector_norm(x, p)``: a 0-d array in ``x``'s dtype, on its device.

    On the host the sums are added in PyTorch's CPU order, so the norm has its bits: the
    2-norm of float32 and float64 (``_sum_of_squares``) in PyTorch's vector lanes, the
    other p-norms one element after the other. float16 is reduced in float32 and rounded
    once, as PyTorch (squared in float16, a gradient of 300 is already inf)."""
    if x.dtype == np.float16:
        return _vector_norm(x.astype(np.float32), p).astype(np.float16)
    xp = backend.xp_of(x)
    host = xp is np and x.dtype in (np.float32, np.float64)
    if p == 2.0:
        if host:
            return np.asarray(np.sqrt(_sum_of_squares(x.reshape(-1))), dtype=x.dtype)
        out = xp.sqrt(xp.vdot(x, x))
    elif math.isinf(p):
        if x.size == 0:
            raise RuntimeError("clip_grad_norm_: cannot compute the inf norm of an empty "
                               "gradient, because max and min have no identity")
        out = xp.abs(x).max() if p > 0 else xp.abs(x).min()
    elif p == 0.0:
        out = (x != 0).sum(dtype=x.dtype)
    elif p == 1.0:
        out = _sequential_sum(xp.abs(x)) if host else xp.abs(x).sum()
    else:
        powers = xp.abs(x) ** x.dtype.type(p)
        root = x.dtype.type(1.0) / x.dtype.type(p)
        out = (_sequential_sum(powers) if host else powers.sum()) ** root
    return xp.asarray(out, dtype=x.dtype)


def _sequential_sum(a):
    """The sum of the elements of the host array ``a``, added one after the other from the
    first (PyTorch's order for a reduction of fewer than 32768 elements on the CPU)."""
    if a.size == 0:
        return a.dtype.type(0)
    return np.add.accumulate(a.reshape(-1))[-1]


_LANES = {np.dtype(np.float32): 8, np.dtype(np.float64): 4}


def _sum_of_squares(x):
    """The sum of squares of the 1-d float32 or float64 host array ``x`` in the order of
    PyTorch's CPU kernel for the 2-norm: ``x`` is read in rows of 8 (float32) or 4
    (float64) elements whose squares are added lane by lane into one row of sums, the sums
    are added from the first, then the rest of ``x`` (fewer than a row) is added element
    by element, as PyTorch's compiled loop does: where four or more are left, the first
    four as ``s + v * v`` (two roundings), and every other one as a fused multiply-add
    (one rounding)."""
    width = _LANES[x.dtype]
    body = x.size - x.size % width
    rest = x[body:]
    plain = 4 if rest.size >= 4 else 0
    parts = []
    if body:
        rows = x[:body].reshape(-1, width)
        parts.append(np.einsum("ij,ij->j", rows, rows))  # row after row: each lane in order
    if plain:
        parts.append(rest[:plain] * rest[:plain])
    total = x.dtype.type(0)
    if parts:  # the lanes, then those squares, added one after the other
        total = np.add.accumulate(np.concatenate(parts) if len(parts) > 1 else parts[0])[-1]
    for v in rest[plain:]:
        total = _fma(v, v, total)
    return total


def _fma(a, b, c):
    """``a * b + c`` rounded once to the dtype of the NumPy scalars ``a``, ``b`` and ``c``
    (float32 or float64), as a fused multiply-add. Where a value is not finite the
    result is too, and the plain expression gives it."""
    kind = type(c)
    a, b, c = float(a), float(b), float(c)
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return kind(a * b + c)
    p = a * b
    if kind is np.float32:  # the product is exact in float64; the sum is rounded to odd
        s = p + c
        back = s - p
        err = (p - (s - back)) + (c - back)
        if err != 0 and math.isfinite(s) and int(np.float64(s).view(np.int64)) & 1 == 0:
            s = math.nextafter(s, math.inf if err > 0 else -math.inf)
        return np.float32(s)
    if abs(p) < 1e300 and (p == 0 or abs(p) > 1e-280):  # Dekker's exact product p + e
        a_hi, b_hi = _split(a), _split(b)
        a_lo, b_lo = a - a_hi, b - b_hi
        e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
        return kind(math.fsum((p, e, c)))  # fsum: the sum rounded once
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return kind(float(exact))  # Fraction rounds to the nearest double
    except OverflowError:
        return kind(math.copysign(math.inf, exact))


def _split(x):
    """The high half of the float ``x`` (Veltkamp's split: ``x - hi`` is exact and fits
    in 26 bits)."""
    t = 134217729.0 * x
    return t - (t - x)


def parameters_to_vector(parameters):
    """The parameters (an iterable of Tensors, all on one device) flattened and joined
    into one 1-d Tensor, as ``torch.nn.utils.parameters_to_vector``: a new Tensor through
    which gradients flow back to the parameters."""
    import minigrad as mg
    vec, device = [], None
    for param in parameters:
        device = _check_param_device(param, device)
        vec.append(param.view(-1))
    return mg.cat(vec)


def vector_to_parameters(vec, parameters):
    """Give each parameter, in order, the next ``numel()`` elements of the 1-d Tensor
    ``vec`` as its data (a view of ``vec``'s memory, shaped as the parameter), as
    ``torch.nn.utils.vector_to_parameters``."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected Tensor, but got: {_typename(vec)}")
    device, pointer = None, 0
    for param in parameters:
        device = _check_param_device(param, device)
        num_param = param.numel()
        param.array = vec[pointer:pointer + num_param].view_as(param).array
        pointer += num_param


def _check_param_device(param, device):
    """``param``'s device, or TypeError where it is not ``device`` (the device of the
    parameters before it; None for the first)."""
    if device is not None and param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not "
                        "supported.")
    return param.device


def _typename(obj):
    kind = type(obj)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
