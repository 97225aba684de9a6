"""Automatic differentiation: ``Function``, the backward engine, grad modes and checks.

Read in this order: ``function.py`` (an op and the node it records), ``engine.py`` (the
backward pass), ``grad_mode.py`` (no_grad, detect_anomaly), ``gradcheck.py``.
"""
from .function import Function, Primitive, ShapeError  # noqa: F401
from .graph import AccumulateGrad, Node, RemovableHandle, SavedTensor, TensorBase  # noqa
from .grad_mode import (detect_anomaly, enable_grad, is_anomaly_enabled,  # noqa: F401
                        is_grad_enabled, no_grad, set_grad_enabled)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: F401
from . import engine, forward_ad  # noqa: F401


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """The gradients of ``outputs`` with respect to ``inputs``, as a tuple.

    Nothing is written to any ``.grad``. With ``create_graph=True`` the returned gradients
    are part of a graph themselves, so they can be differentiated again.
    """
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
        if not o.requires_grad:
            raise RuntimeError(f"mg.grad: an output (shape {o.shape}) does not require grad "
                               "and has no grad_fn")
        roots.append(o)
        seeds.append(engine.root_grad(o, g, "mg.grad"))
    if retain_graph is None:
        retain_graph = create_graph
    return engine.run_backward(roots, seeds, retain_graph, create_graph, targets=inputs,
                               allow_unused=allow_unused)
