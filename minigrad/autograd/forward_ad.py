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
``PROCESS.watchers``, so ``Function.apply`` takes its general path, and its ``apply_dual``
is ``function.apply_dual``, which that path calls (forward mode plugs into ``Function``:
``function`` never imports this module). When an input carries a tangent, the op runs as
usual and then its ``jvp`` rule (beside ``forward`` and ``backward`` in ``minigrad/ops``)
maps the inputs' tangents to the outputs'. The rules are written with Tensor ops, so a
tangent is itself differentiable: by reverse mode (``mg.grad`` of a tangent) or by an
enclosing level (``func.jacfwd`` of ``func.jacfwd``). While the rule of level ``k`` runs,
only the levels outside it propagate (``_THREAD.limit``).

A tangent lives in the tensor's ``_tangents`` dict ({level: tangent}) and, for recorded ops,
also on the node (a saved output is rebuilt from its array in backward and finds its
tangent there). Leaving a level drops every tangent it made, as PyTorch does.

Views and in-place ops: in PyTorch a view's tangent is a view of its base's tangent, and an
in-place op updates tangents in place, so a write through a view reaches the base's tangent
and a view sees its base's new tangent. Here a tangent is never written in place: a view's
tangent is the view ops redone on the tangent of its *owner* (its base, or the nearest
tensor it was viewed from that holds a tangent of its own: a ``make_dual`` result), kept in
``_view_tangents`` with the owner's tangent it came from and redone when that changed. An
in-place op on a view gives its owner a new tangent with the view's region replaced
(``take_tangents``).
"""
import threading
import weakref
from collections import namedtuple

from . import function
from .function import Function, replay_view
from .grad_mode import PROCESS
from .graph import SavedTensor, TensorBase

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
        function.apply_dual = apply_dual
    return level


def exit_level(level):
    """Close ``level`` (the innermost): its tangents are dropped."""
    if not LEVELS or LEVELS[-1] is not level:
        raise RuntimeError("forward_ad: dual levels must be exited innermost first")
    LEVELS.pop()
    for ref in level.holders:
        holder = ref()
        if holder is not None:
            for name in ("_tangents", "_out_tangents", "_view_tangents"):
                table = holder.__dict__.get(name)
                if table is not None:
                    table.pop(level, None)
    level.holders.clear()
    if not LEVELS:
        PROCESS.watchers = tuple(w for w in PROCESS.watchers if w != _WATCHER)
        function.apply_dual = None


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
        out = tensor.view(tensor.shape)
    finally:
        _THREAD.limit = before
    # a view in memory that takes its source's tangents of the outer levels only: not of
    # this level nor of any level opened later (as PyTorch's, which are no forward views)
    out._fw_inherits = tuple(LEVELS[:limit])
    return out


def tangent_of(t, level):
    """The tangent of tensor ``t`` at ``level``, or None. A view's comes from its owner's (see
    the module's docstring); a tensor rebuilt from a node's saved output (in backward) finds
    it on the node."""
    table = t._tangents
    if table is not None:
        tangent = table.get(level)
        if tangent is not None:
            return tangent
    if t._view_of is not None:
        return _view_tangent(t, level)
    return _node_tangent(t, level)


def _node_tangent(t, level):
    node = t.grad_fn
    if node is not None:
        table = node.__dict__.get("_out_tangents")
        if table is not None and level in table:
            return table[level][t._out_idx]
    return None


def _owner(t, level):
    """``(owner, chain)``: the tensor whose tangent at ``level`` the view ``t`` shows (``t``
    itself, or the nearest of its sources with a tangent of its own, or its base), and the
    view ops ((op, params, output index) each) that make ``t`` from it."""
    chain = []
    while True:
        table = t._tangents
        if table is not None and level in table:
            break
        inherits = t._fw_inherits
        if t._view_of is None or inherits is not None and level not in inherits:
            break
        source, op, params, i = t._view_of
        chain.append((op, params, i))
        t = source
    chain.reverse()
    return t, chain


def _own_tangent(t, level):
    """The tangent ``t`` holds itself (not derived from a tensor it is a view of)."""
    table = t._tangents
    tangent = None if table is None else table.get(level)
    if tangent is None and t._view_of is None:
        tangent = _node_tangent(t, level)
    return tangent


def _view_tangent(t, level):
    """A view's tangent: its owner's, through the same view ops (redone only when the
    owner's tangent changed since)."""
    owner, chain = _owner(t, level)
    if owner is t:
        return None
    source = _own_tangent(owner, level)
    cache = t._view_tangents
    if cache is not None:
        hit = cache.get(level)
        if hit is not None and hit[0] is source:
            return hit[1]
    if source is None:
        return None
    tangent = _at_level(level, replay_view, source, chain)
    _remember(t, level, source, tangent)
    return tangent


def _remember(t, level, source, tangent):
    cache = t.__dict__.get("_view_tangents")
    if cache is None:
        cache = t._view_tangents = {}
    cache[level] = (source, tangent)
    level.holders.append(weakref.ref(t))


def _at_level(level, fn, *args):
    """``fn(*args)`` with only the levels outside ``level`` propagating (as in a jvp rule)."""
    before = _THREAD.limit
    _THREAD.limit = level.index if before is None else min(before, level.index)
    try:
        return fn(*args)
    finally:
        _THREAD.limit = before


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
    return SavedTensor(t, t.array, None, None, t._version, None, None)


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
        if out._view_of is None:
            _attach(out, level, tangent)
        else:  # a view's tangent follows its owner's (see _view_tangent)
            owner, _ = _owner(out, level)
            _remember(out, level, _own_tangent(owner, level), tangent)
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
    """After an in-place op wrote ``new``'s values into ``t``: ``t`` takes its tangents. When
    ``t`` is a view, its owner takes a tangent with t's region replaced (zeros elsewhere if
    it had none), as PyTorch's write into the base's tangent; t's is then derived from it."""
    limit = _THREAD.limit
    for level in LEVELS if limit is None else LEVELS[:limit]:
        tangent = tangent_of(new, level)
        owner, chain = _owner(t, level)
        if chain:
            if tangent is None and _own_tangent(owner, level) is None:
                continue
            tangent = _at_level(level, written_tangent, owner, _own_tangent(owner, level),
                                chain, tangent)
        elif tangent is None:
            table = t.__dict__.get("_tangents")
            if table is not None:
                table.pop(level, None)
            continue
        _attach(owner, level, tangent)
        node = owner.grad_fn  # (where a copy of owner made for a recorded op looks)
        table = None if node is None else node.__dict__.get("_out_tangents")
        if table is not None and level in table:
            outs = list(table[level])
            outs[owner._out_idx] = tangent
            table[level] = tuple(outs)


def lend_tangents(t, copy):
    """``copy`` (of ``t``'s values, made for an in-place op recorded in a graph) carries
    ``t``'s tangents, so the op's jvp rule reads them."""
    limit = _THREAD.limit
    for level in LEVELS if limit is None else LEVELS[:limit]:
        tangent = tangent_of(t, level)
        if tangent is not None:
            _attach(copy, level, tangent)


def written_tangent(base, dbase, chain, dvalue):
    """The tangent of ``base`` after ``view(base) = value``, where ``chain`` redoes the view:
    ``dbase`` (zeros when None) with the view's region replaced by ``dvalue`` (zeros when
    None). Written with Tensor ops, so an enclosing level and reverse mode follow it."""
    out = base.new_zeros(base.shape) if dbase is None else dbase.clone()
    region = replay_view(out, chain)
    if dvalue is None:
        region.zero_()
    else:
        region.copy_(dvalue)
    return out
