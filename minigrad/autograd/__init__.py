"""Automatic differentiation: ``Function``, the backward engine, grad modes and checks.

Read in this order: ``function.py`` (an op and the node it records), ``engine.py`` (the
backward pass), ``grad_mode.py`` (no_grad, detect_anomaly), ``gradcheck.py``.
"""
from .function import Function, Primitive, ShapeError  # noqa: F401
from .graph import AccumulateGrad, Node, RemovableHandle, SavedTensor, TensorBase  # noqa
from .graph import starts_backward as _starts_backward
from .grad_mode import (detect_anomaly, enable_grad, inference_mode,  # noqa: F401
                        is_anomaly_check_nan_enabled, is_anomaly_enabled, is_grad_enabled,
                        is_inference_mode_enabled, no_grad, set_detect_anomaly,
                        set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from . import engine, forward_ad  # noqa: F401
from .reading import reading_order  # noqa: F401


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs``, as a tuple.

    Nothing is written to any ``.grad``. With ``create_graph=True`` the returned gradients
    are part of a graph themselves, so they can be differentiated again. An input the
    outputs do not depend on is an error, or gets None with ``allow_unused=True``, or zeros
    with ``materialize_grads=True`` (which implies allow_unused, as in PyTorch). With
    ``is_grads_batched=True`` the first dim of each of ``grad_outputs`` is a batch of
    vectors: each gradient has that dim too, one backward pass per vector (a row of a
    Jacobian each, with the rows of the identity).
    """
    if is_grads_batched:
        return _batched_grads(outputs, inputs, grad_outputs, retain_graph, create_graph,
                              allow_unused, materialize_grads)
    if materialize_grads and allow_unused is False:
        raise ValueError("mg.grad: expected allow_unused to be True or not passed when "
                         "materialize_grads=True, but got: allow_unused=False")
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = [outputs] if isinstance(outputs, TensorBase) else list(outputs)
    inputs = [inputs] if isinstance(inputs, TensorBase) else list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    elif isinstance(grad_outputs, TensorBase):
        grad_outputs = [grad_outputs]
    if not inputs:
        raise RuntimeError("mg.grad: the 'inputs' argument cannot be empty (grad requires "
                           "non-empty inputs)")
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"mg.grad: input {i} (shape {t.shape}) does not require grad")
    roots, seeds = [], []
    for o, g in zip(outputs, grad_outputs):
        if not _starts_backward(o):
            raise RuntimeError(f"mg.grad: an output (shape {o.shape}) does not require grad "
                               "and has no grad_fn")
        roots.append(o)
        seeds.append(engine.root_grad(o, g, "mg.grad"))
    if retain_graph is None:
        retain_graph = create_graph
    result = engine.run_backward(roots, seeds, retain_graph, create_graph, targets=inputs,
                                 allow_unused=allow_unused)
    if materialize_grads:
        result = tuple(t.new_zeros(t.shape).requires_grad_(create_graph) if g is None else g
                       for t, g in zip(inputs, result))
    return result


def _batched_grads(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                   materialize_grads):
    """``grad(..., is_grads_batched=True)``: one pass per vector of the batch in
    ``grad_outputs`` (the graph kept for all but the last, as ``retain_graph`` says for that
    one), the gradients stacked along a new first dim (None for an unused input)."""
    batched = [grad_outputs] if isinstance(grad_outputs, TensorBase) else list(grad_outputs)
    sizes = {g.shape[0] if g.ndim else None for g in batched}
    if len(sizes) != 1 or None in sizes:
        raise RuntimeError(f"mg.grad: with is_grads_batched=True every grad_output needs the "
                           f"same batch size as its first dim, got shapes "
                           f"{[tuple(g.shape) for g in batched]}")
    (n,) = sizes
    if retain_graph is None:
        retain_graph = create_graph
    rows = [grad(outputs, inputs, [g[b] for g in batched],
                 retain_graph=retain_graph or b < n - 1, create_graph=create_graph,
                 allow_unused=allow_unused, materialize_grads=materialize_grads)
            for b in range(n)]
    return tuple(None if column[0] is None else _stacked(column) for column in zip(*rows))


def _stacked(tensors):
    """The tensors (of one shape) along a new first dim, written row by row into zeros:
    differentiable (each row's write is recorded) with the tensors' own methods."""
    out = tensors[0].new_zeros((len(tensors),) + tuple(tensors[0].shape))
    for i, t in enumerate(tensors):
        out[i] = t
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves (of
    ``inputs`` only, when given), as ``torch.autograd.backward``: ``t.backward(g)`` for
    several tensors in one pass. ``grad_tensors`` has one entry per tensor: a Tensor, or
    None for a one-element tensor (its gradient is 1)."""
    tensors = [tensors] if isinstance(tensors, TensorBase) else list(tensors)
    if grad_tensors is None:
        grad_tensors = [None] * len(tensors)
    elif isinstance(grad_tensors, TensorBase):
        grad_tensors = [grad_tensors]
    else:
        grad_tensors = list(grad_tensors)
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"backward: got {len(tensors)} tensors and {len(grad_tensors)} "
                           "gradients")
    for i, t in enumerate(tensors):
        if not isinstance(t, TensorBase):
            raise TypeError(f"backward: element {i} of tensors is a {type(t).__name__}, not a "
                            "Tensor")
        if not _starts_backward(t):
            raise RuntimeError(f"backward: element {i} of tensors (shape {tuple(t.shape)}) "
                               "does not require grad and does not have a grad_fn")
    seeds = [engine.root_grad(t, g, "backward") for t, g in zip(tensors, grad_tensors)]
    if tensors:
        engine.accumulate_grads(tensors, seeds, retain_graph, create_graph, inputs)
