"""Forward-mode AD: a tangent travels with each value through the forward pass.

Reverse mode (``backward``) records the forward pass and then walks it backwards: one pass
gives the gradient of one output with respect to every input. Forward mode computes, next
to each value ``y = f(x)``, its *tangent* ``dy = J_f(x) dx``: the directional derivative
along the tangent ``dx`` given to the inputs. One forward pass gives one column of the
Jacobian (every output's derivative along one input direction). No graph is kept.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)   # x carries the tangent
        y = f(x)                                    # every op computes y's tangent
        value, dy = forward_ad.unpack_dual(y)       # dy = J_f(primal) @ tangent

How it works: while a dual level is active this module is registered in
``PROCESS.watchers``, so ``Function.apply`` takes its general path and calls
``apply_dual``. When an input carries a tangent, the op runs as usual and then its ``jvp``
rule (beside ``forward`` and ``backward`` in ``minigrad/ops``) maps the inputs' tangents to
the outputs'. The rules are written with Tensor ops, so a tangent is itself differentiable:
by reverse mode (``mg.grad`` of a tangent) or by an enclosing level (``func.jacfwd`` of
``func.jacfwd``). While the rule of level ``k`` runs, only the levels outside it propagate
(``_THREAD.limit``).

A tangent lives in the tensor's ``_tangents`` dict ({level: tangent}) and, for recorded ops,
also on the node (a saved output is rebuilt from its array in backward and finds its
tangent there). Leaving a level drops every tangent it made, as PyTorch does.
"""
import threading
import weakref
from collections import namedtuple

from .grad_mode import PROCESS
from .graph import TensorBase

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
LEVELS = []  # the active levels, outermost first (empty: forward mode is off)


class _Level:
    """One dual level: its depth, and the tensors and nodes holding its tangents."""

    def __init__(self, index):
        self.index = index
        self.holders = []  # weak references, for clearing on exit

    def __repr__(self):
        return f"<forward-mode AD level {self.index}>"


class _Thread(threading.local):
    limit = None     # only levels with index < limit propagate (None: all)
    capture = False  # the next op entering apply_dual is the primal run of a dual op
    node = None      # ... and its ctx, found there


_THREAD = _Thread()
_WATCHER = "forward-mode AD"  # what this module adds to PROCESS.watchers
_PUBLIC = []  # levels entered through dual_level() (PyTorch allows one at a time)


# --- levels -------------------------------------------------------------------------------

def enter_level():
    """Open a new (innermost) level and return it; forward mode is on while any is open."""
    level = _Level(len(LEVELS))
    LEVELS.append(level)
    if _WATCHER not in PROCESS.watchers:
        PROCESS.watchers = PROCESS.watchers + (_WATCHER,)
    return level


def exit_level(level):
    """Close ``level`` (the innermost): its tangents are dropped."""
    if not LEVELS or LEVELS[-1] is not level:
        raise RuntimeError("forward_ad: dual levels must be exited innermost first")
    LEVELS.pop()
    for ref in level.holders:
        holder = ref()
        if holder is not None:
            for name in ("_tangents", "_out_tangents"):
                table = holder.__dict__.get(name)
                if table is not None:
                    table.pop(level, None)
    level.holders.clear()
    if not LEVELS:
        PROCESS.watchers = tuple(w for w in PROCESS.watchers if w != _WATCHER)


class dual_level:
    """Context manager of one forward-mode level, as ``torch.autograd.forward_ad``'s:
    ``make_dual`` and ``unpack_dual`` inside it use it; leaving it drops its tangents."""

    def __enter__(self):
        if _PUBLIC:
            raise RuntimeError("Nested forward mode AD is not supported at the moment")
        self.level = enter_level()
        _PUBLIC.append(self.level)
        return self.level.index

    def __exit__(self, *exc):
        _PUBLIC.remove(self.level)
        exit_level(self.level)
        return False


def _level(level, op):
    """The level object for ``level`` (an index, or None: the innermost)."""
    if not LEVELS:
        if op == "unpack_dual":
            return None
        raise RuntimeError(f"{op}: Trying to create a dual Tensor for forward AD but no level "
                           "exists, make sure to enter_dual_level() first.")
    if level is None:
        return LEVELS[-1]
    if isinstance(level, _Level):
        return level
    if not 0 <= level < len(LEVELS):
        raise RuntimeError(f"{op}: level {level} is not an active dual level "
                           f"(there are {len(LEVELS)})")
    return LEVELS[level]


# --- dual tensors -------------------------------------------------------------------------

def make_dual(tensor, tangent, *, level=None):
    """A view of ``tensor`` that carries ``tangent`` at ``level`` (the innermost by default)."""
    lv = _level(level, "make_dual")
    if tensor.dtype.kind not in "fc":
        raise ValueError(f"make_dual: expected primal to be floating point, got {tensor.dtype}")
    if not isinstance(tangent, TensorBase):
        raise TypeError(f"make_dual: expected the tangent to be a Tensor, got "
                        f"{type(tangent).__name__}")
    if tangent.shape != tensor.shape:
        raise RuntimeError(
            f"make_dual: Trying to set a forward gradient that has a different size than that "
            f"of the original Tensor, this is not supported. Tensor is of size "
            f"{list(tensor.shape)} while the given forward gradient is of size "
            f"{list(tangent.shape)}.")
    if tangent_of(tensor, lv) is not None:
        raise RuntimeError(f"make_dual: Making a dual Tensor based on a Tensor that already has "
                           f"a forward gradient at the same level {lv.index} is not supported.")
    dual = _view(tensor, lv.index)
    if tangent.dtype != tensor.dtype:
        tangent = tangent.to(tensor.dtype)
    _attach(dual, lv, tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor`` at ``level``: the primal a view without that
    level's tangent, the tangent None where it has none."""
    lv = _level(level, "unpack_dual")
    if lv is None:
        return UnpackedDualTensor(tensor, None)
    tangent = tangent_of(tensor, lv)
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    return UnpackedDualTensor(_view(tensor, lv.index), tangent)


def _view(tensor, limit):
    """A view of ``tensor`` that keeps its tangents of the levels below ``limit`` only."""
    before = _THREAD.limit
    _THREAD.limit = limit if before is None else min(before, limit)
    try:
        return tensor.view(tensor.shape)
    finally:
        _THREAD.limit = before


def tangent_of(t, level):
    """The tangent of tensor ``t`` at ``level``, or None. A tensor rebuilt from a node's
    saved output (in backward) finds it on the node."""
    table = t._tangents
    if table is not None:
        tangent = table.get(level)
        if tangent is not None:
            return tangent
    node = t.grad_fn
    if node is not None:
        table = node.__dict__.get("_out_tangents")
        if table is not None and level in table:
            return table[level][t._out_idx]
    return None


def _attach(t, level, tangent):
    table = t.__dict__.get("_tangents")
    if table is None:
        table = t._tangents = {}
    table[level] = tangent
    level.holders.append(weakref.ref(t))


# --- the hook in Function.apply -------------------------------------------------------------

def apply_dual(cls, node, args, params):
    """``cls.apply(*args, **params)`` with tangents: None when no input carries one at an
    active level (the op then runs as usual). Otherwise the op runs once for its values
    (its ctx caught on the way) and once per level its jvp rule maps the inputs' tangents
    to the outputs'."""
    thread = _THREAD
    if thread.capture:  # the primal run of a dual op: hand its ctx over
        thread.capture, thread.node = False, node
        return None
    levels = LEVELS if thread.limit is None else LEVELS[:thread.limit]
    found = []
    for level in levels:
        tangents = [tangent_of(a, level) if isinstance(a, TensorBase) else None for a in args]
        if any(t is not None for t in tangents):
            found.append((level, tangents))
    if not found:
        return None
    limit = thread.limit
    thread.capture, thread.limit = True, 0
    try:
        results = cls.apply(*args, **params)
        ctx = thread.node
    finally:
        thread.capture, thread.limit, thread.node = False, limit, None
    outs = results if isinstance(results, tuple) else (results,)
    for level, tangents in found:
        thread.limit = level.index
        try:
            out_tangents = _jvp(cls, ctx, args, results, tangents)
        finally:
            thread.limit = limit
        _attach_outputs(ctx, level, outs, out_tangents)
    return results


def _jvp(cls, ctx, args, results, tangents):
    """The op's jvp rule on ``ctx``, one tangent (or None) per output."""
    from .function import Function
    if cls.jvp is Function.jvp:
        raise NotImplementedError(
            f"{cls.__name__}: You must implement the jvp function for custom "
            "autograd.Function to use it with forward mode AD.")
    if cls._raw:
        ctx.inputs, ctx.result = tuple(args), results
        try:
            out = cls.jvp(ctx, *tangents)
        finally:
            del ctx.inputs, ctx.result
    else:  # a user's Function: zeros for tensors without a tangent, as PyTorch
        tangents = [t if t is not None or not isinstance(a, TensorBase) else a.new_zeros(a.shape)
                    for a, t in zip(args, tangents)]
        out = _user_jvp(cls, ctx, tangents)
    return out if isinstance(out, tuple) else (out,)


def _user_jvp(cls, ctx, tangents):
    """A user's jvp, with ``ctx.saved_tensors`` what forward passed to save_for_forward."""
    kept = ctx.__dict__.get("_for_forward")
    if kept is None:
        return cls.jvp(ctx, *tangents)
    saved = ctx.saved
    ctx.saved = tuple(_constant(t) for t in kept)
    try:
        return cls.jvp(ctx, *tangents)
    finally:
        ctx.saved = saved


def _constant(t):
    from .graph import SavedTensor
    return SavedTensor(t, t.data, None, None, t._version, None, None)


def _attach_outputs(ctx, level, outs, tangents):
    """Give each floating output its tangent (zeros where the rule gave none), broadcast
    and cast to the output; recorded outputs also leave it on their node."""
    fitted = []
    for out, tangent in zip(outs, tangents):
        if out.dtype.kind not in "fc":
            fitted.append(None)
            continue
        if tangent is None:
            tangent = out.new_zeros(out.shape)
        if tangent.dtype != out.dtype:
            tangent = tangent.to(out.dtype)
        if tangent.shape != out.shape:
            tangent = tangent.expand(out.shape)
        _attach(out, level, tangent)
        fitted.append(tangent)
    if any(o.grad_fn is ctx for o in outs):
        table = ctx.__dict__.get("_out_tangents")
        if table is None:
            table = ctx._out_tangents = {}
        table[level] = tuple(fitted)
        level.holders.append(weakref.ref(ctx))


def tangent_by(composite, *inputs):
    """Inside a jvp rule: the tangent of ``composite(*inputs)`` at the level being computed,
    found by running the composite with that level on (its ops' own rules do the work).
    The fused ops whose derivative is long to write out use it."""
    k = _THREAD.limit
    _THREAD.limit = k + 1
    try:
        out = composite(*inputs)
    finally:
        _THREAD.limit = k
    return tangent_of(out, LEVELS[k])


def take_tangents(t, new):
    """After an in-place op wrote ``new``'s values into ``t``: ``t`` takes its tangents."""
    for level in LEVELS:
        tangent = tangent_of(new, level)
        table = t.__dict__.get("_tangents")
        if tangent is not None:
            _attach(t, level, tangent)
        elif table is not None:
            table.pop(level, None)
