"""Gradient clipping, as ``torch.nn.utils``: ``clip_grad_norm_`` and ``clip_grad_value_``;
and ``evaluating(module)``, a context for evaluation in eval mode without gradients.

The clipping functions change ``p.grad.data`` in place on the array's own device and in its
own dtype (a float32 gradient stays float32), and skip parameters whose ``.grad`` is None.
They are updates to data, not differentiable ops, so no graph is recorded.
"""
import contextlib
import math
import types
import warnings

import numpy as np

from minigrad import backend, no_grad
from minigrad.tensor import Tensor
from minigrad.compile.recorder import replayed_as_call


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
    ``min(max_norm / (total_norm + 1e-6), 1)``, as in PyTorch.

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
    norm_type = float(norm_type)
    max_norm = float(max_norm)
    if not grads:
        return Tensor(0.0)  # PyTorch's torch.tensor(0.0): float32, on the CPU
    first = backend.device_of(grads[0])
    xp = backend.xp_of(grads[0])
    # the norm of the per-gradient norms is PyTorch's order of evaluation (and its p=0 quirk:
    # it counts the gradients with a non-zero norm, not the non-zero elements)
    norms = [backend.to_device(_vector_norm(g, norm_type), first) for g in grads]
    total = _vector_norm(xp.stack(norms), norm_type)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    # PyTorch's max_norm / t is reciprocal(t) * max_norm (Tensor.__rtruediv__); we round
    # the same way. Multiplying by a coefficient clamped to 1 changes nothing, but a nan
    # norm must still reach the gradients, as it does in PyTorch.
    coef = xp.asarray(xp.minimum(xp.reciprocal(total + 1e-6) * max_norm, 1.0))
    for g in grads:
        _scale_(g, backend.to_device(coef, backend.device_of(g)).astype(g.dtype))
    return Tensor(total)


def _scale_(g, coef):
    """``g *= coef`` in place, with nothing read back from the device (no branch on the
    coefficient's value). A coef of 0 (an inf norm, or max_norm=0) turns an inf element
    into nan (inf * 0), as in PyTorch: NumPy warns of that product, and its error state
    silences the warning; CuPy computes the same nan and never warns."""
    with np.errstate(invalid="ignore"):
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
    return [p.grad.data for p in parameters if p.grad is not None]


def _vector_norm(x, p):
    """``torch.linalg.vector_norm(x, p)``: a 0-d array in ``x``'s dtype, on its device."""
    xp = backend.xp_of(x)
    if p == 2.0:
        out = xp.sqrt(xp.vdot(x, x))
    elif math.isinf(p):
        if x.size == 0:
            raise RuntimeError("clip_grad_norm_: cannot compute the inf norm of an empty "
                               "gradient, because max and min have no identity")
        out = xp.abs(x).max() if p > 0 else xp.abs(x).min()
    elif p == 0.0:
        out = (x != 0).sum(dtype=x.dtype)
    elif p == 1.0:
        out = xp.abs(x).sum()
    else:
        out = (xp.abs(x) ** p).sum() ** (1.0 / p)
    return xp.asarray(out, dtype=x.dtype)
