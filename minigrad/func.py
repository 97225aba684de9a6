"""Function transforms with ``torch.func``'s names and signatures: ``grad``,
``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``, ``hvp``, ``vmap``
and ``functional_call``.

Each takes a function of tensors (or of tuples, lists and dicts of tensors) and returns a
function, or values, built from the two modes of the same engine and from batching:

* reverse mode (``vjp``, ``grad``): one forward pass records the graph, then one backward
  pass gives u^T J for a cotangent u shaped like the output;
* forward mode (``jvp``): one forward pass with tangents gives J v (see
  ``autograd.forward_ad``);
* ``vmap`` (see ``batched.py``): a function of one example run once on a whole batch, each
  primitive through its batching rule.

``jacrev`` is vmap of reverse mode over the basis vectors of the output (every row of the
Jacobian in one batched pass), ``jacfwd`` vmap of forward mode over those of the input
(every column). For f: R^n -> R^m the work of ``jacfwd`` grows with n and that of
``jacrev`` with m: forward mode for few inputs and many outputs, reverse mode for many
inputs and few outputs (a loss). The transforms compose: ``hessian(f)`` is
``jacfwd(jacrev(f))`` (forward over reverse), ``hvp`` gives a Hessian-vector product in
one forward-over-reverse pass without forming the Hessian, and ``vmap(grad(loss))`` gives
per-example gradients: inside vmap, reverse and forward mode run on the batch's values
with every input batched (expanded where it was not), so each example has its own.
"""
import weakref

from . import autograd
from .autograd import forward_ad
from .autograd.batching import LEVELS
from .autograd.grad_mode import STATE, enable_grad
from .autograd.graph import AccumulateGrad
from .batched import (flatten as _flatten, from_values, lift, physical, rewrap, structure,
                      values_at, vmap)
from .combine import stack
from .creation import eye
from .tensor import Tensor

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "hvp",
           "vmap", "functional_call"]


# --- pytrees: tuples, lists and dicts of tensors (flattened by batched.flatten) -------------

def _tensors(leaves, who, what, floating=True):
    """ValueError unless every leaf is a Tensor, and (``floating``) a floating point or
    complex one (jvp's primals and tangents, as torch.func's)."""
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise ValueError(f"{who}: Expected {what} to be a Tensor or a tuple, list or dict "
                             f"of Tensors, got {type(leaf).__name__}")
        if floating and leaf.dtype.kind not in "fc":
            raise ValueError(f"{who}: Expected {what} to be floating point Tensors, got "
                             f"dtype {leaf.dtype}")
    return leaves


def _differentiable_inputs(leaves, who):
    """Reverse mode's inputs (vjp, grad, jacrev): Tensors that can require grad, else
    PyTorch's RuntimeError."""
    for leaf in _tensors(leaves, who, "primals", floating=False):
        if leaf.dtype.kind not in "fc":
            raise RuntimeError(f"{who}: only Tensors of floating point dtype can require "
                               f"gradients, got an input of dtype {leaf.dtype}")
    return leaves


def _argnums(argnums, nargs, who):
    """The positions ``argnums`` selects, checked as torch.func checks them."""
    many = isinstance(argnums, tuple)
    nums = argnums if many else (argnums,)
    if not nums:
        raise RuntimeError(f"{who}: argnums must be non-empty")
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"{who}: argnums must be int or Tuple[int, ...], got "
                               f"{type(a).__name__}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"{who}: Got argnums={a}, but only {nargs} positional inputs")
    nums = tuple(a % nargs for a in nums)
    if len(set(nums)) != len(nums):
        raise RuntimeError(f"{who}: argnums must be unique, got {argnums}")
    return nums, many


def _split_aux(out, has_aux, who):
    if not has_aux:
        return out, None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise RuntimeError(f"{who}: output of function must be a tuple (output, aux) when "
                           "has_aux=True")
    return out[0], out[1]


# --- reverse mode -------------------------------------------------------------------------

# This module's own copies of inputs that required no grad (leaves), by id; and the ids of
# those whose transform is still running its function. A graph that reaches one of a
# finished transform leads to nothing outside (a constant to everyone else); one of an
# enclosing transform still running is outside, as a captured tensor that requires grad is.
_COPIES = weakref.WeakValueDictionary()
_RUNNING = set()


def _watched_copies(leaves):
    """Aliases of the inputs that reverse mode can differentiate with respect to: views, so
    that tangents (forward over reverse) and outer graphs (reverse over reverse) pass."""
    copies = []
    for x in leaves:
        alias = x.view(x.shape)
        if not alias.requires_grad:
            alias.requires_grad_()
            _COPIES[id(alias)] = alias
        copies.append(alias)
    return copies


def _outside(leaf):
    """Whether gradients reaching ``leaf`` matter outside the transforms: it is no copy of
    ours, or its transform is still running (an enclosing one)."""
    return _COPIES.get(id(leaf)) is not leaf or id(leaf) in _RUNNING


def _reaches_outside(t):
    """Whether ``t`` depends on a tensor that requires grad outside the transform (a
    captured parameter, an input that requires grad, an enclosing transform's input): its
    graph reaches such a leaf. Only then must results built from ``t`` stay differentiable."""
    if not t.requires_grad:
        return False
    if t.grad_fn is None:
        return _outside(t)
    todo = [t.grad_fn]
    seen = {t.grad_fn}
    while todo:
        node = todo.pop()
        if type(node) is AccumulateGrad:
            leaf = node.variable
            if leaf is not None and _outside(leaf):
                return True
            continue
        for edge in node.edges:
            if edge and edge[0] not in seen:
                seen.add(edge[0])
                todo.append(edge[0])
    return False


def _outside_part(tree, keep):
    """``tree`` with each tensor that depends on nothing outside the transform detached, as
    torch.func unwraps its results (all of them without ``keep``: grad mode was off)."""
    leaves, rebuild = _flatten(tree)
    return rebuild([x.detach() if isinstance(x, Tensor) and not (
        keep and _reaches_outside(x)) else x for x in leaves])


def vjp(func, *primals, has_aux=False):
    """``(output, vjp_fn)`` (and ``aux``): ``vjp_fn(cotangents)`` returns u^T J, one
    gradient per primal, for cotangents u shaped like the output. One forward pass; each
    call of ``vjp_fn`` is one backward pass.

    The results are differentiable with respect to what lies outside the transform only
    (tensors that require grad, captured or passed), as torch.func's: those that depend on
    nothing else are detached. Under forward mode (forward over reverse) they are kept as
    they are: their tangents ride on them."""
    return _vjp(func, primals, has_aux, "vjp")


def _vjp(func, primals, has_aux, who, integer_outputs=False, on_values=False):
    """vjp; with ``integer_outputs`` (grad's), an output of integers or bools is taken, and
    its gradient is zeros, as torch.func.grad's, where vjp refuses it."""
    leaves, rebuild = _flatten(primals)
    _differentiable_inputs(leaves, who)
    if LEVELS and not on_values:
        return _vjp_of_values(func, leaves, rebuild, has_aux, who, integer_outputs)
    grad_mode = STATE.grad_enabled
    with enable_grad():
        copies = _watched_copies(leaves)
        mine = {id(c) for c in copies} - _RUNNING
        _RUNNING.update(mine)
        try:
            out, aux = _split_aux(func(*rebuild(copies)), has_aux, "vjp")
        finally:
            _RUNNING.difference_update(mine)
    out_leaves, out_rebuild = _flatten(out)
    for o in _tensors(out_leaves, who, "the outputs of func", floating=False):
        if not integer_outputs and o.dtype.kind not in "fc":
            raise RuntimeError(f"{who}(f, ...): All outputs of f must be floating-point or "
                               f"complex Tensors, got Tensor with dtype {o.dtype}")
    tangents = bool(forward_ad.LEVELS)
    outside = tangents or any(_reaches_outside(o) for o in out_leaves)

    def vjp_fn(cotangents):
        cot_leaves, _ = _flatten(cotangents)
        if structure(cotangents) != structure(out):
            raise RuntimeError(f"vjp_fn: Expected pytree structure of cotangents to be the same "
                               f"as pytree structure of outputs to the function: cotangents: "
                               f"{structure(cotangents)}, primal output: {structure(out)}")
        for o, u in zip(out_leaves, cot_leaves):
            if u.shape != o.shape:
                raise RuntimeError(f"vjp_fn: Mismatch in shape: cotangent of shape "
                                   f"{tuple(u.shape)} for an output of shape {tuple(o.shape)}")
        # the gradients are differentiable where grad mode is on when vjp_fn is called and
        # something outside reaches them: through the function or through the cotangents
        create = tangents or STATE.grad_enabled and (
            outside or any(u.requires_grad for u in cot_leaves))
        grads = _backward(out_leaves, copies, cot_leaves, create)
        if create and not tangents:
            grads = _outside_part(grads, True)
        return rebuild(grads)

    if not tangents:
        out = _outside_part(out, grad_mode and outside)
        aux = _outside_part(aux, grad_mode)
    return (out, vjp_fn) if not has_aux else (out, vjp_fn, aux)


def _vjp_of_values(func, leaves, rebuild, has_aux, who, integer_outputs):
    """vjp inside vmap: reverse mode on the batch's values, each input batched at every open
    level first (expanded where it was not), so that every element has inputs of its own
    and its own gradient (per-example gradients of unbatched parameters)."""
    def of_values(*values):
        out, aux = _split_aux(func(*rebuild([rewrap(v) for v in values])), has_aux, who)
        out_leaves, out_rebuild = _flatten(out)
        out = out_rebuild([physical(lift(o)) for o in out_leaves])
        return (out, aux) if has_aux else out
    values = tuple(physical(lift(x)) for x in leaves)
    out, vjp_fn, *aux = _vjp(of_values, values, has_aux, who, integer_outputs, on_values=True)
    k = len(LEVELS)  # (a vmap opened later may batch the cotangents: see _backward)

    def batched_vjp_fn(cotangents):
        cot_leaves, cot_rebuild = _flatten(cotangents)
        grads = vjp_fn(cot_rebuild([values_at(u, k) for u in cot_leaves]))
        return rebuild([from_values(g, k) for g in grads])
    out_leaves, out_rebuild = _flatten(out)
    return (out_rebuild([rewrap(o) for o in out_leaves]), batched_vjp_fn, *aux)


def _backward(outputs, inputs, cotangents, create):
    """One backward pass: the gradients of sum(outputs * cotangents), zeros where unused.

    Cotangents batched by a vmap around a graph recorded outside it (``vmap(vjp_fn)``) run
    the backward rules' Tensor ops through their batching rules: the pass then keeps a
    graph, as with ``create``, so that the engine sums gradients with ops too."""
    pairs = [(o, u) for o, u in zip(outputs, cotangents) if o.requires_grad]
    if not pairs:
        return [x.new_zeros(x.shape) for x in inputs]
    batched = bool(LEVELS) and any(getattr(u, "level", None) is not None for _, u in pairs)
    with enable_grad():
        grads = autograd.grad([o for o, _ in pairs], inputs, [u for _, u in pairs],
                              retain_graph=True, create_graph=create or batched,
                              allow_unused=True)
    if batched and not create:
        grads = [None if g is None else g.detach() for g in grads]
    return [x.new_zeros(x.shape) if g is None else g for x, g in zip(inputs, grads)]


def _check_scalar(value):
    """grad's function must return a 0-d tensor, as torch.func's: a one-element tensor of
    any other shape is refused too."""
    if not isinstance(value, Tensor):
        raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, "
                           f"got {type(value).__name__}")
    if value.ndim != 0:
        raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar "
                           f"Tensor, got tensor with {value.ndim} dims. Maybe you wanted to "
                           "use the vjp or jacrev APIs instead?")


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning ``(gradient, value)`` of ``func``, whose output must be a 0-d
    tensor, with respect to the arguments at ``argnums`` (``(gradient, (value,
    aux))`` with has_aux)."""
    def wrapper(*args, **kwargs):
        nums, many = _argnums(argnums, len(args), "grad_and_value")

        def selected(*chosen):
            full = list(args)
            for i, a in zip(nums, chosen):
                full[i] = a
            result = func(*full, **kwargs)
            _check_scalar(_split_aux(result, has_aux, "grad_and_value")[0])
            return result
        chosen = tuple(args[i] for i in nums)
        value, vjp_fn, *aux = _vjp(selected, chosen, has_aux, "grad_and_value",
                                   integer_outputs=True)
        grads = vjp_fn(value.new_ones(value.shape))
        g = grads if many else grads[0]
        return (g, (value, aux[0])) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function returning the gradient of ``func`` (a 0-d output) with respect to
    the arguments at ``argnums`` (and ``aux`` with has_aux), as torch.func.grad."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = both(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


# --- forward mode -------------------------------------------------------------------------

def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(output, jvp_out)`` (and ``aux``): ``func(*primals)`` and its directional derivative
    J v along ``tangents``, in one forward pass that carries the tangents."""
    for what, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple):  # (as torch.func: a list is refused too)
            raise RuntimeError(f"jvp(f, primals, tangents): Expected {what} to be a tuple, "
                               f"got {type(value).__name__}")
    if strict:
        raise RuntimeError("jvp(f, primals, tangents): strict=True is not implemented")
    p_leaves, rebuild = _flatten(tuple(primals))
    t_leaves, _ = _flatten(tuple(tangents))
    _tensors(p_leaves, "jvp", "primals")
    _tensors(t_leaves, "jvp", "tangents")
    if len(p_leaves) != len(t_leaves):
        raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to have "
                           f"the same python structure: {len(p_leaves)} primals, "
                           f"{len(t_leaves)} tangents")
    for p, t in zip(p_leaves, t_leaves):
        if p.shape != t.shape:
            raise RuntimeError(f"jvp(f, primals, tangents): Expected primals and tangents to "
                               f"have the same shape: primal {tuple(p.shape)}, tangent "
                               f"{tuple(t.shape)}")
    if LEVELS:
        return _jvp_of_values(func, p_leaves, t_leaves, rebuild, has_aux)
    return _jvp(func, p_leaves, t_leaves, rebuild, has_aux)


def _jvp(func, p_leaves, t_leaves, rebuild, has_aux):
    """jvp on checked, flattened primals and tangents."""
    grad_mode = STATE.grad_enabled
    level = forward_ad.enter_level()
    try:
        duals = [forward_ad.make_dual(p, t, level=level) for p, t in zip(p_leaves, t_leaves)]
        out, aux = _split_aux(func(*rebuild(duals)), has_aux, "jvp")
        out_leaves, out_rebuild = _flatten(out)
        _tensors(out_leaves, "jvp", "the outputs of func", floating=False)  # (ints: 0)
        out_tangents = []
        for o in out_leaves:
            t = forward_ad.tangent_of(o, level)
            out_tangents.append(o.new_zeros(o.shape) if t is None else t)
    finally:
        forward_ad.exit_level(level)
    result = (out_rebuild(out_leaves), out_rebuild(out_tangents)) + ((aux,) if has_aux else ())
    if forward_ad.LEVELS:  # an enclosing forward level's tangents ride on the results
        return result
    # as vjp's: a graph that leads to nothing outside (the inputs of a reverse transform
    # inside, as in hessian) is dropped
    return tuple(_outside_part(r, grad_mode) for r in result)


def _jvp_of_values(func, p_leaves, t_leaves, rebuild, has_aux):
    """jvp inside vmap: forward mode on the batch's values, primals and tangents batched at
    every open level first (expanded where they were not)."""
    def of_values(*values):
        out, aux = _split_aux(func(*rebuild([rewrap(v) for v in values])), has_aux, "jvp")
        out_leaves, out_rebuild = _flatten(out)
        out = out_rebuild([physical(lift(o)) for o in out_leaves])
        return (out, aux) if has_aux else out
    primals = [physical(lift(p)) for p in p_leaves]
    tangents = [physical(lift(t)) for t in t_leaves]
    out, tangent, *aux = _jvp(of_values, primals, tangents, lambda v: tuple(v), has_aux)
    out_leaves, out_rebuild = _flatten(out)
    tangent_leaves, _ = _flatten(tangent)
    return (out_rebuild([rewrap(o) for o in out_leaves]),
            out_rebuild([rewrap(t) for t in tangent_leaves]), *aux)


# --- Jacobians and Hessians -----------------------------------------------------------------

def _unit_vectors(leaves):
    """The rows of the identity over the flattened ``leaves`` (n their total size), as one
    (n, *leaf.shape) tensor per leaf: vmap's batch of basis vectors."""
    n = sum(x.numel() for x in leaves)
    rows = eye(n, dtype=leaves[0].dtype, device=leaves[0].device)
    out, start = [], 0
    for x in leaves:
        out.append(rows[:, start:start + x.numel()].reshape((n,) + tuple(x.shape)))
        start += x.numel()
    return out


def _select(args, argnums, who):
    nums, many = _argnums(argnums, len(args), who)
    chosen = tuple(args[i] for i in nums)

    def call(func, kwargs):
        def selected(*c):
            full = list(args)
            for i, a in zip(nums, c):
                full[i] = a
            return func(*full, **kwargs)
        return selected
    return chosen, many, call


def _structure(blocks, out_rebuild, in_rebuild, many):
    """The blocks in the shape torch.func gives: the output's structure, holding at each
    leaf the inputs' structure (a tuple over argnums when argnums is a tuple)."""
    per_output = []
    for row in blocks:
        per_output.append(in_rebuild(row) if many else in_rebuild(row)[0])
    return out_rebuild(per_output)


def _batched_or_looped(batched, one, basis):
    """``batched(*basis)``; where the function writes a batched value in place into a tensor
    of its own that has no batch (``y = zeros(n); y[0] = x``: vmap refuses that, where
    torch.func's Jacobians batch only the tangents or cotangents), ``one`` per basis vector
    instead, the results stacked alike."""
    try:
        return batched(*basis)
    except RuntimeError as e:
        if not str(e).startswith("vmap: inplace arithmetic"):
            raise
    outs = [one(*[b[k] for b in basis]) for k in range(basis[0].shape[0])]
    return tuple(stack(list(parts)) for parts in zip(*outs))


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """A function returning the Jacobian of ``func`` at its arguments by reverse mode: one
    forward pass, then the gradients of every output element at once, vmap of the backward
    pass over the basis vectors of the output (``chunk_size`` of them at a time)."""
    def wrapper(*args, **kwargs):
        chosen, many, call = _select(args, argnums, "jacrev")
        f = call(func, kwargs)
        out, vjp_fn, aux = _vjp(lambda *c: _split_aux(f(*c), has_aux, "jacrev"), chosen, True,
                                "jacrev")
        out_leaves, out_rebuild = _flatten(out)
        in_leaves, in_rebuild = _flatten(chosen)
        n = sum(o.numel() for o in out_leaves)

        def rows_of(*cotangents):  # one backward pass of a batch of cotangents
            return tuple(_flatten(vjp_fn(out_rebuild(list(cotangents))))[0])
        rows = _batched_or_looped(vmap(rows_of, chunk_size=chunk_size), rows_of,
                                  _unit_vectors(out_leaves)) if n else None
        blocks, start = [], 0
        for o in out_leaves:
            shape = tuple(o.shape)
            blocks.append([o.new_zeros(shape + tuple(x.shape)) if rows is None else
                           rows[j][start:start + o.numel()].reshape(shape + tuple(x.shape))
                           for j, x in enumerate(in_leaves)])
            start += o.numel()
        jac = _structure(blocks, out_rebuild, in_rebuild, many)
        return (jac, aux) if has_aux else jac
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """A function returning the Jacobian of ``func`` at its arguments by forward mode: the
    derivatives along every input element at once, vmap over the basis vectors of the
    inputs, each column a tangent of one forward pass of the batch."""
    def wrapper(*args, **kwargs):
        chosen, many, call = _select(args, argnums, "jacfwd")
        in_leaves, in_rebuild = _flatten(chosen)
        _tensors(in_leaves, "jacfwd", "the inputs")
        f = call(func, kwargs)
        out, aux = _split_aux(f(*chosen), has_aux, "jacfwd")
        out_leaves, out_rebuild = _flatten(out)
        n = sum(x.numel() for x in in_leaves)

        def columns_of(*tangents):
            result = jvp(lambda *c: _split_aux(f(*c), has_aux, "jacfwd")[0], chosen,
                         in_rebuild(list(tangents)))
            return tuple(_flatten(result[1])[0])
        columns = _batched_or_looped(vmap(columns_of, randomness=randomness), columns_of,
                                     _unit_vectors(in_leaves)) if n else None
        blocks = []
        for i, o in enumerate(out_leaves):
            row, start = [], 0
            for x in in_leaves:
                shape = tuple(o.shape) + tuple(x.shape)
                if columns is None:
                    row.append(o.new_zeros(shape))
                    continue
                part = columns[i][start:start + x.numel()]  # (x.numel(), *o.shape)
                row.append(part.reshape((x.numel(), o.numel())).T.reshape(shape))
                start += x.numel()
            blocks.append(row)
        jac = _structure(blocks, out_rebuild, in_rebuild, many)
        return (jac, aux) if has_aux else jac
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of ``func`` (a one-element output) as ``jacfwd(jacrev(func))``: forward
    mode over reverse mode, as torch.func.hessian."""
    return jacfwd(jacrev(func, argnums), argnums)


def hvp(func, primals, tangents):
    """``(gradient, H v)``: the gradient of ``func`` (a 0-d output) at ``primals``
    and its Hessian times ``tangents``, by forward over reverse: one forward pass with
    tangents through a reverse pass, never forming the Hessian (the cost of about two
    gradients). torch.func has no ``hvp``; its documentation writes this same
    ``jvp(grad(f), primals, tangents)``."""
    argnums = tuple(range(len(primals)))
    g, hv = jvp(grad(func, argnums), tuple(primals), tuple(tangents))
    return g, hv


# --- modules ------------------------------------------------------------------------------

def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with its parameters and buffers replaced by the tensors
    in ``parameter_and_buffer_dicts`` (names as in ``state_dict``) for this call only.

    With ``tie_weights`` a tensor given for one of several names of a shared parameter is
    used for all of them; with ``strict`` every parameter and buffer must be given, and no
    other name (without it, as in PyTorch, another name is an attribute for the call)."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        given = dict(dicts)
    else:
        given = {}
        for d in dicts:
            for k, v in d.items():
                if k in given:
                    raise ValueError(f"functional_call: {k!r} appeared in multiple "
                                     "dictionaries")
                given[k] = v
    names = _member_names(module)
    unknown = [k for k in given if k not in names]
    missing = [k for k in names if k not in given]
    if strict and (unknown or missing):
        parts = []
        if unknown:
            parts.append(f"Unexpected key(s): {', '.join(map(repr, unknown))}")
        if missing:
            parts.append(f"Missing key(s): {', '.join(map(repr, missing))}")
        raise RuntimeError(f"functional_call: Error(s) in reparametrizing for "
                           f"{type(module).__name__}: {'. '.join(parts)}.")
    if tie_weights:
        by_object = {id(names[k]): v for k, v in given.items() if names.get(k) is not None}
        given = {**{k: by_object.get(id(t), given.get(k)) for k, t in names.items()
                    if k in given or id(t) in by_object},
                 **{k: given[k] for k in unknown}}
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    kept = [_swap(module, name, value) for name, value in given.items()]
    try:
        return module(*args, **(kwargs or {}))
    finally:
        for table, key, old in reversed(kept):
            if old is _ABSENT:
                del table[key]
            else:
                table[key] = old


def _member_names(module):
    """Every parameter and buffer by its full name, shared ones under each name."""
    names = dict(module.named_parameters(remove_duplicate=False))
    names.update(module.named_buffers(remove_duplicate=False))
    return names


_ABSENT = object()  # what _swap puts back for a name the module did not have


def _swap(module, name, value):
    """Put ``value`` in place of the parameter or buffer ``name`` (another name: an
    attribute of its module); (the table, the key, what to put back)."""
    path, _, key = name.rpartition(".")
    owner = module.get_submodule(path) if path else module
    table = owner._parameters if key in owner._parameters else \
        owner._buffers if key in owner._buffers else owner.__dict__
    old = table.get(key, _ABSENT)
    table[key] = value
    return table, key, old
