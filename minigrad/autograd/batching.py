"""Batching rules: how a primitive runs when its inputs carry a batch dimension (``vmap``).

``func.vmap(f)(x)`` calls ``f`` once, on a *batched tensor*: a Tensor whose shape is one
example's (the logical shape) and which holds the whole batch underneath (its ``value``, the
batch at dim 0), tagged with its vmap level (see ``minigrad.batched``). While a level is
open, ``Function.apply`` hands each op with a batched input to ``dispatch``: the op's
batching rule, ``vmap(ctx, *args, **params)``, written beside its forward, backward and jvp
in ``minigrad/ops``, gets the inputs' values (batched ones with the batch at dim 0, others
as they are) and returns the op's result for the whole batch, with the batch at dim 0 of
each output. Most rules move nothing but dims: they pad operands so that logical dims line
up, shift the op's ``dim`` arguments by one, or expand an unbatched operand, then call the
primitive itself once. ``ctx`` (``BatchContext``) says which inputs are batched.

Rules here are shared by the ops: ``elementwise`` (broadcasting ops), ``along(*names)``
(ops whose parameters name dims of their first input) and ``loop`` (the fallback: the op
runs once per batch element, with a one-line warning naming it; a primitive with no rule
of its own takes it). A user's ``autograd.Function`` is batched as in PyTorch, by its own
``vmap`` staticmethod or a generated rule (see ``minigrad.batched``).

Nested ``vmap`` gives batched tensors of batched tensors: the rule of the innermost level
runs first, on values that are batched tensors of the outer levels, whose rules run when it
calls the primitive.
"""
import warnings

from .graph import TensorBase

LEVELS = []  # the open vmap levels, outermost first (empty: vmap is off)
dispatch = None  # minigrad.batched.apply_batched, the hook Function.apply calls
# minigrad.combine.stack, set by minigrad.batched: the loop stacks its results with it
# (tensor functions sit above the autograd layer, which cannot import them)
stack = None


class BatchContext:
    """What a batching rule receives as ``ctx``: the op, the batch size (``size``), which
    positional inputs carry the batch (``batched``, at their dim 0) and the level."""
    __slots__ = ("op", "size", "batched", "level")

    def __init__(self, op, size, batched, level):
        self.op, self.size, self.batched, self.level = op, size, batched, level

    def ndim(self, i, x):
        """The logical number of dims of input ``i`` (``x``), without its batch dim."""
        return x.ndim - 1 if self.batched[i] else x.ndim

    def expanded(self, i, x):
        """Input ``i`` with the batch at dim 0: expanded (a view) when it had none."""
        if self.batched[i] or not isinstance(x, TensorBase):
            return x
        return x.unsqueeze(0).expand((self.size,) + tuple(x.shape))


def pad(x, ndim):
    """A batched value (batch at dim 0) with size-1 dims after the batch dim, so that its
    logical dims line up from the right with those of an operand of ``ndim`` dims."""
    missing = ndim - (x.ndim - 1)
    if missing <= 0:
        return x
    return x.reshape(x.shape[:1] + (1,) * missing + tuple(x.shape[1:]))


def shifted(dims, ndim):
    """Logical dims (an int, a tuple of them, or None: all ``ndim``) as dims of the batched
    value: normalised, then moved past the batch dim."""
    if dims is None:
        return tuple(range(1, ndim + 1))
    if isinstance(dims, (tuple, list)):
        return tuple(d % max(ndim, 1) + 1 for d in dims)
    return dims % max(ndim, 1) + 1


def elementwise(ctx, *args, **params):
    """Broadcasting ops: batched operands get size-1 dims after their batch dim, so their
    logical dims meet the other operands' from the right, as without the batch."""
    ndim = max((ctx.ndim(i, a) for i, a in enumerate(args) if isinstance(a, TensorBase)),
               default=0)
    args = [pad(a, ndim) if b else a for a, b in zip(args, ctx.batched)]
    return ctx.op.apply(*args, **params)


def along(*names, none_is_all=True):
    """The rule of an op whose parameters ``names`` are dims of its first input (``dim``,
    ``dims``): the same dims, moved past the batch dim. A None dims means every dim when
    ``none_is_all``; the others are batched first (expanded) where they were not."""
    def rule(ctx, *args, **params):
        ndim = ctx.ndim(0, args[0])
        for name in names:
            if name in params and (params[name] is not None or none_is_all):
                params[name] = shifted(params[name], ndim)
        args = [ctx.expanded(i, a) for i, a in enumerate(args)]
        return ctx.op.apply(*args, **params)
    rule.__doc__ = f"Moves {', '.join(names)} past the batch dim."
    return rule


def leading(ctx, *args, **params):
    """Ops that take any number of leading dims (every dim before the ones they work on is
    a batch of its own): the batch dim is one more; unbatched tensor inputs are expanded."""
    args = [ctx.expanded(i, a) for i, a in enumerate(args)]
    return ctx.op.apply(*args, **params)


def loop(ctx, *args, **params):
    """The fallback: the op once per batch element, the results stacked (with a warning
    naming the op: a rule of its own would run it once)."""
    warnings.warn(f"vmap: there is no batching rule for {ctx.op.__name__}; it runs once per "
                  "batch element", stacklevel=4)
    return run_per_element(ctx, args, params)


def run_per_element(ctx, args, params):
    """``ctx.op`` once per batch element on the batched inputs' slices; each output
    stacked along a new dim 0."""
    results = []
    for b in range(ctx.size):
        sliced = [a[b] if batched else a for a, batched in zip(args, ctx.batched)]
        results.append(ctx.op.apply(*sliced, **params))
    if isinstance(results[0], tuple):
        return tuple(stack(list(outs)) for outs in zip(*results))
    return stack(results)


def random_op(ctx, name):
    """The randomness of the level of a random op's rule ("error", "different" or "same");
    raises in "error" mode, as PyTorch."""
    return _allowed(ctx.level, name)


def random_draw(name, shape=None):
    """A random creation op (``rand``, ``randn``, ``uniform_``, ...) inside vmap, as the
    open levels' randomness asks: PyTorch's error for "error"; "same": one draw for every
    element. "different": given the ``shape`` of one element's draw, the shape to draw
    instead (the sizes of those levels in front) and those levels, to wrap the draw in
    (``per_element``); the ops that cannot draw so raise."""
    if PER_ELEMENT:  # (a batched tensor's values take the draw: already one per element)
        return shape, ()
    levels = [lv for lv in LEVELS if _allowed(lv, name) == "different"]
    if levels and shape is None:
        raise NotImplementedError(f"vmap: randomness='different' is not implemented for {name}")
    return (None if shape is None else tuple(lv.size for lv in levels) + tuple(shape)), levels


PER_ELEMENT = []  # non-empty while a batched tensor's values take an in-place draw
per_element = None  # minigrad.batched's: a draw with the levels' sizes in front, batched


def _allowed(level, name):
    if level.randomness == "error":
        raise RuntimeError("vmap: called random operation while in randomness error mode. "
                           "Please either use the 'same' or 'different' randomness flags on "
                           f"vmap or perform the randomness operation out of vmap ({name})")
    return level.randomness


def batched_index(index):
    """Whether an index holds a batched tensor (an index tensor of each element's own)."""
    items = index if isinstance(index, tuple) else (index,)
    return any(getattr(i, "level", None) is not None for i in items)


multinomial = None  # minigrad.batched's: Tensor.multinomial inside vmap
index_per_element = None  # minigrad.batched's: x[index] with such an index, element by element


def check_inplace(t, new):
    """An in-place op on ``t`` that is batched at fewer levels than the value written:
    PyTorch's error."""
    new_level, level = getattr(new, "level", None), getattr(t, "level", None)
    if new_level is not None and (level is None or level.index < new_level.index):
        raise RuntimeError(
            "vmap: inplace arithmetic(self, *extra_args) is not possible because there exists "
            "a Tensor `other` in extra_args that has more elements than `self`. This happened "
            "due to `other` being vmapped over but `self` not being vmapped over in a vmap. "
            "Please try to use out-of-place operators instead of inplace arithmetic.")
