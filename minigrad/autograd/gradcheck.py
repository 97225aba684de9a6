"""Finite-difference checks of analytic gradients (first and second order), in float64."""
import warnings

import numpy as np

from .. import backend
from .engine import run_backward


class GradcheckError(RuntimeError):
    """The analytic gradient differs from the finite-difference one."""


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _outputs(fn, inputs):
    """The differentiable (floating point) outputs of ``fn``; integer ones are left out,
    and a bool one is an error (as PyTorch's differences of bools are)."""
    outs = [o for o in _as_tuple(fn(*inputs)) if hasattr(o, "data")]
    for k, o in enumerate(outs):
        if o.dtype.kind == "b":
            raise RuntimeError(f"gradcheck: output {k} (shape {tuple(o.shape)}) is a bool "
                               "tensor, which has no finite differences")
    return [o for o in outs if o.dtype.kind == "f"]


def _numeric(fn, inputs, i, eps):
    """d(outputs)/d(inputs[i]) by central differences: one column per input element."""
    x = inputs[i]
    base = backend.to_host(x.array).astype(np.float64)
    columns = []
    for k in range(base.size):
        values = []
        for delta in (eps, -eps):
            moved = base.copy()
            moved.flat[k] += delta
            args = list(inputs)
            args[i] = x._make(backend.to_device(moved, x.device), requires_grad=True)
            values.append(np.concatenate(
                [backend.to_host(o.array).ravel() for o in _outputs(fn, args)] or [np.zeros(0)]))
        columns.append((values[0] - values[1]) / (2 * eps))
    if not columns:
        n_out = sum(o.array.size for o in _outputs(fn, inputs))
        return np.zeros((n_out, 0))
    return np.stack(columns, axis=1)


def _analytic(fn, inputs, wrt):
    """d(outputs)/d(inputs[wrt]) by one backward pass per output element."""
    outs = _outputs(fn, inputs)
    targets = [inputs[i] for i in wrt]
    n_out = sum(o.array.size for o in outs)
    jacobians = [np.zeros((n_out, t.array.size)) for t in targets]
    row = 0
    for o in outs:
        xp = backend.xp_of(o.array)
        for k in range(o.array.size):
            if o.requires_grad:
                seed = xp.zeros(o.array.size, dtype=o.dtype)
                seed[k] = 1
                grads = run_backward([o], [o._make(seed.reshape(o.array.shape))],
                                     retain_graph=True, targets=targets, allow_unused=True)
                for jac, g in zip(jacobians, grads):
                    if g is not None:
                        jac[row] = backend.to_host(g.array).ravel()
            row += 1
    return jacobians


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """Compare the analytic gradient of ``fn`` at ``inputs`` with central differences.

    Every input that requires grad is checked, element by element, against every element of
    every floating point output. Returns True, or raises GradcheckError naming the worst
    element (or returns False with ``raise_exception=False``).
    """
    inputs = _as_tuple(inputs)
    wrt = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    if not wrt:
        raise ValueError("gradcheck: no input requires grad")
    for i in wrt:
        if inputs[i].dtype != np.float64:
            warnings.warn(f"gradcheck: input {i} is {inputs[i].dtype}, not float64; finite "
                          "differences will be imprecise", stacklevel=2)
    analytic = _analytic(fn, inputs, wrt)
    for j, i in enumerate(wrt):
        numeric = _numeric(fn, inputs, i, eps)  # grad mode stays on: gradgradcheck needs it
        excess = np.abs(analytic[j] - numeric) - (atol + rtol * np.abs(numeric))
        if excess.size and not (excess <= 0).all():
            if not raise_exception:
                return False
            bad = np.nan_to_num(excess, nan=np.inf)
            out_k, in_k = np.unravel_index(np.argmax(bad), bad.shape)
            index = np.unravel_index(in_k, inputs[i].shape) if inputs[i].ndim else ()
            raise GradcheckError(
                f"gradcheck failed for input {i} (shape {inputs[i].shape}) at index "
                f"{tuple(int(v) for v in index)}, output element {out_k}: analytic "
                f"{float(analytic[j][out_k, in_k])!r} vs numeric "
                f"{float(numeric[out_k, in_k])!r} (atol={atol}, rtol={rtol})")
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, seed=0):
    """Check second derivatives: gradcheck of the vector-Jacobian product of ``fn``.

    ``grad_outputs`` (random float64 constants by default) weight the outputs; the check is
    that the gradient of sum(grad_outputs * outputs) is itself correctly differentiated.
    """
    inputs = _as_tuple(inputs)
    wrt = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    if grad_outputs is None:
        rng = np.random.default_rng(seed)
        grad_outputs = [o._make(backend.to_device(rng.standard_normal(o.shape),
                                                  o.device))
                        for o in _outputs(fn, inputs)]
    grad_outputs = _as_tuple(grad_outputs)

    def first_derivative(*xs):
        pairs = [(o, g) for o, g in zip(_outputs(fn, xs), grad_outputs) if o.requires_grad]
        grads = run_backward([o for o, _ in pairs], [g for _, g in pairs], retain_graph=True,
                             create_graph=True, targets=[xs[i] for i in wrt], allow_unused=True)
        # a gradient that does not require grad counts as constant: if it is not, the
        # check fails, as it must for a backward that is not itself differentiable
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivative, inputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
