"""``mg.autograd.functional``: PyTorch's higher-level autograd functions (``vjp``, ``jvp``,
``jacobian``, ``hessian``, ``hvp``, ``vhp``), each built on ``mg.autograd.grad``.

They take ``inputs`` as a Tensor or a tuple of Tensors and a function of them, and return
results shaped as PyTorch's: a Tensor where the inputs (or outputs) were one Tensor, a
tuple where they were a tuple. The inputs are detached copies that require grad, so the
caller's tensors and graph are untouched; without ``create_graph=True`` every result is
detached. An output that does not depend on an input gives zeros there, or an error with
``strict=True``. ``minigrad.func`` has the composable transforms (``grad``, ``jacrev``,
``jacfwd``, ...) of torch.func.

These are user-level transforms built from whole tensors (``stack``), a layer above the
tensor, beside ``minigrad.func``: the ``autograd`` package below the tensor never imports
this module; ``minigrad``'s ``__init__`` does, after the tensor, so that
``mg.autograd.functional`` is there as in PyTorch.
"""
from ..combine import stack
from . import grad
from .grad_mode import enable_grad
from .graph import TensorBase


def _as_tuple(value, what, who):
    """(tuple of Tensors, whether ``value`` was a tuple)."""
    many = isinstance(value, tuple)
    items = value if many else (value,)
    for i, t in enumerate(items):
        if not isinstance(t, TensorBase):
            raise TypeError(f"The {what} given to {who} must be either a Tensor or a tuple of "
                            f"Tensors but the value at index {i} has type {type(t).__name__}.")
    return items, many


def _grad_inputs(inputs, create_graph):
    """Copies of ``inputs`` that require grad: leaves of their own, or (create_graph) views
    that keep the caller's graph, so that what is returned can be differentiated further."""
    if create_graph:
        return tuple(x.view_as(x) if x.requires_grad else x.detach().requires_grad_()
                     for x in inputs)
    return tuple(x.detach().requires_grad_() for x in inputs)


def _call(func, inputs, who):
    with enable_grad():
        out = func(*inputs)
    return _as_tuple(out, "outputs of the user-provided function", who)


def _grads(outputs, inputs, grad_outputs, create_graph, strict, who, retain=None):
    """d(outputs . grad_outputs)/d(inputs), zeros (or, strict, an error) where an input
    takes no part."""
    wanted = [o for o in outputs if o.requires_grad]
    if not wanted:
        found = (None,) * len(inputs)
    else:
        g_out = [g for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        found = grad(wanted, inputs, g_out, retain_graph=True if retain is None else retain,
                     create_graph=create_graph, allow_unused=True)
    out = []
    for i, (x, g) in enumerate(zip(inputs, found)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function given to {who} "
                                   f"is independent of input {i}. This is not allowed in "
                                   "strict mode.")
            g = x.new_zeros(x.shape)
        out.append(g)
    return tuple(out)


def _finish(values, many, create_graph):
    values = tuple(v if create_graph else v.detach() for v in values)
    return values if many else values[0]


def _vector(v, like, what, who):
    """``v`` as a tuple matching ``like``; None means ones for a single one-element
    tensor, as PyTorch allows."""
    if v is None:
        if len(like) != 1 or like[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if the {what} of the "
                               f"user-provided function given to {who} is a single Tensor "
                               "with a single element.")
        return (like[0].new_ones(like[0].shape).detach(),)
    items, _ = _as_tuple(v, "v", who)
    if len(items) != len(like):
        raise RuntimeError(f"{who}: v has {len(items)} tensors, the {what} have {len(like)}")
    for i, (a, b) in enumerate(zip(items, like)):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"{who}: mismatch in shape: v[{i}] has a shape of "
                               f"{tuple(a.shape)} and the {what}[{i}] {tuple(b.shape)}")
    return items


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``: the vector-Jacobian product, shaped as ``inputs``."""
    inputs, many_in = _as_tuple(inputs, "inputs", "vjp")
    inputs = _grad_inputs(inputs, create_graph)
    outputs, many_out = _call(func, inputs, "vjp")
    v = _vector(v, outputs, "outputs", "vjp")
    grads = _grads(outputs, inputs, v, create_graph, strict, "vjp")
    return _finish(outputs, many_out, create_graph), _finish(grads, many_in, create_graph)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)``: the Jacobian-vector product, shaped as the outputs (by two
    reverse passes: the vjp with a free vector u is linear in u, and its vjp along ``v``
    is J v, as PyTorch computes it)."""
    inputs, many_in = _as_tuple(inputs, "inputs", "jvp")
    inputs = _grad_inputs(inputs, create_graph)
    v = _vector(v, inputs, "inputs", "jvp")
    outputs, many_out = _call(func, inputs, "jvp")
    with enable_grad():
        u = tuple(o.new_zeros(o.shape).requires_grad_() for o in outputs)
        g = _grads(outputs, inputs, u, True, strict, "jvp")
    jv = _grads(g, u, v, create_graph, strict, "jvp")
    return _finish(outputs, many_out, create_graph), _finish(jv, many_out, create_graph)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: for each output and input, a tensor of shape
    output.shape + input.shape (a Tensor, a tuple, or a tuple of tuples by output then
    input, as PyTorch nests them). Row by row, one reverse pass per output element;
    ``vectorize`` and ``strategy`` are accepted as PyTorch's and give the same values."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         'Hint: If your function has a forward-mode implementation, use '
                         '"forward-mode"')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError('jacobian: strategy="forward-mode" requires vectorize=True '
                                  '(as in PyTorch)')
    if strategy == "forward-mode" and create_graph:
        raise NotImplementedError('jacobian: create_graph=True and strategy="forward-mode" '
                                  'are not supported together (as in PyTorch)')
    inputs, many_in = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _grad_inputs(inputs, create_graph)
    outputs, many_out = _call(func, inputs, "jacobian")
    blocks = []
    for o in outputs:
        rows = []
        for k in range(o.numel()):
            e = o.new_zeros(o.numel())
            e.array[k] = 1
            rows.append(_grads((o,), inputs, (e.reshape(o.shape),), create_graph, strict,
                               "jacobian"))
        per_input = []
        for i, x in enumerate(inputs):
            if rows:
                block = stack([r[i] for r in rows]).reshape(tuple(o.shape) + tuple(x.shape))
            else:  # an empty output
                block = x.new_zeros(tuple(o.shape) + tuple(x.shape))
            per_input.append(block if create_graph else block.detach())
        blocks.append(tuple(per_input) if many_in else per_input[0])
    return tuple(blocks) if many_out else blocks[0]


def _single_output(func, who):
    def checked(*inputs):
        out = func(*inputs)
        if not isinstance(out, TensorBase):
            raise RuntimeError(f"The function given to {who} should return a single Tensor")
        if out.numel() != 1:
            raise RuntimeError(f"The Tensor returned by the function given to {who} should "
                               f"contain a single element (it has shape {tuple(out.shape)})")
        return out.reshape(())
    return checked


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of ``func`` (one-element output) at ``inputs``: a Tensor of shape
    input.shape * 2, or a tuple of tuples over pairs of inputs."""
    f = _single_output(func, "hessian")
    _, many = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*xs):
        return _grads((f(*xs),), xs, (None,), True, strict, "hessian")
    jac = jacobian(gradient, inputs, create_graph, strict, vectorize, outer_jacobian_strategy)
    return jac if many else jac[0]


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)``, shaped as ``inputs``, for a one-element output."""
    return _hessian_product(func, inputs, v, create_graph, strict, "vhp")


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), H v)``, shaped as ``inputs``, for a one-element output (equal to
    ``vhp`` where the Hessian is symmetric, as for twice continuously differentiable
    functions)."""
    return _hessian_product(func, inputs, v, create_graph, strict, "hvp")


def _hessian_product(func, inputs, v, create_graph, strict, who):
    inputs, many = _as_tuple(inputs, "inputs", who)
    inputs = _grad_inputs(inputs, create_graph)
    v = _vector(v, inputs, "inputs", who)
    (out,), _ = _call(_single_output(func, who), inputs, who)
    g = _grads((out,), inputs, (None,), True, strict, who)
    product = _grads(g, inputs, v, create_graph, strict, who)
    return _finish((out,), False, create_graph), _finish(product, many, create_graph)
