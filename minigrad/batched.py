"""``vmap``: a function of one example, run on a batch in one call, as ``torch.func.vmap``.

``vmap(f)(xs)`` opens a *level*, gives ``f`` a ``BatchedTensor`` for each batched input
(one example's shape; the whole batch underneath, in ``value``, with the batch at dim 0)
and calls ``f`` once. Every op ``f`` runs on a batched tensor goes to the op's batching rule
(see ``autograd/batching.py``), which runs the op once on the whole batch. The results'
batch dims are moved to ``out_dims``. A user's ``autograd.Function`` is batched as in
PyTorch: by its ``vmap`` staticmethod, or with ``generate_vmap_rule = True`` by running its
forward, setup_context and backward on batched tensors.

The other transforms meet vmap on the batch's values (see ``func.py``): under vmap, reverse
and forward mode run on ``physical`` tensors, every input batched at every open level
(``lift``, expanding those that were not), so each example has its own copy of everything:
``vmap(grad(loss), in_dims=(None, 0))(params, x)`` gives per-example gradients.
"""
import functools

import numpy as np

from . import backend
from .autograd import batching
from .autograd.batching import LEVELS
from .arguments import _dim, _index, _split_index
from .autograd.function import Function
from .combine import cat, stack
from .ops.inplace import SetItem
from .tensor import Tensor, ValuesIndices

_RANDOMNESS = ("error", "different", "same")
_RANDOM_RULE = []  # the random ops whose rule is running


class Level:
    """One open vmap: its depth, batch size and randomness mode."""

    def __init__(self, size, randomness):
        self.index, self.size, self.randomness = len(LEVELS), size, randomness

    def __repr__(self):
        return f"<vmap level {self.index}, size {self.size}>"


class _NoValues(np.ndarray):
    """The array of a batched tensor's ``array`` on the CPU (see ``_stand_in``): any NumPy
    function or ufunc given it raises, instead of computing on values it does not have."""

    def __array_ufunc__(self, *args, **kwargs):
        _values_read()

    def __array_function__(self, *args, **kwargs):
        _values_read()


def _values_read():
    raise RuntimeError("vmap: an operation read the values of a batched tensor's array "
                       "directly (outside the ops' batching rules); it is not supported "
                       "inside vmap")


backend._XP_BY_TYPE[_NoValues] = np


def _stand_in(t):
    """``t.array`` of a batched tensor: an array of its logical shape and dtype that holds no
    values (read-only, and on the CPU refusing any NumPy function), so code that only reads
    shapes and dtypes works; the values are in ``value``."""
    v = t.value.array
    xp = backend.xp_of(v)
    if xp is np:
        return np.lib.stride_tricks.as_strided(np.zeros((), v.dtype).view(_NoValues),
                                               v.shape[1:], (0,) * (v.ndim - 1),
                                               subok=True, writeable=False)
    return xp.broadcast_to(xp.zeros((), v.dtype), v.shape[1:])


def _no_values(what):
    def method(self, *args, **kwargs):
        raise RuntimeError(f"vmap: It looks like you're calling {what} on a Tensor. We don't "
                           f"support vmap over calling {what} on a Tensor, please try to "
                           "rewrite what you're doing with other operations.")
    return method


class BatchedTensor(Tensor):
    """A tensor inside ``vmap``: the shape of one example, the batch's values in ``value``
    (batch at dim 0) and the vmap ``level`` it belongs to."""
    array = property(_stand_in)
    shape = property(lambda self: self.value.shape[1:])
    ndim = property(lambda self: self.value.ndim - 1)
    dtype = property(lambda self: self.value.dtype)
    device = property(lambda self: self.value.device)
    is_cuda = property(lambda self: self.value.is_cuda)

    def __init__(self, value, level):
        self.value, self.level = value, level

    @property
    def requires_grad(self):
        return self.value.requires_grad

    def __repr__(self):
        return f"BatchedTensor(lvl={self.level.index}, bdim=0, value=\n{self.value!r})"

    item = _no_values(".item()")
    _one_value = _no_values("int() or float()")
    numpy = _no_values(".numpy()")
    tolist = _no_values(".tolist()")
    __array__ = _no_values("np.asarray()")

    def __bool__(self):
        raise RuntimeError("vmap: It looks like you're attempting to use a Tensor in some "
                           "data-dependent control flow. We don't support that yet.")

    def detach(self):
        return BatchedTensor(self.value.detach(), self.level)

    def backward(self, *args, **kwargs):
        raise RuntimeError("backward() called inside a functorch transform. This is not "
                           "supported, please use func.grad or func.vjp instead or call "
                           "backward() outside of functorch transforms.")

    def __setitem__(self, index, value):
        """``x[index] = value`` into each element: basic indexing (ints, slices, None, ...)
        writes into the batch's values; index tensors and lists (the same for every
        element) write the index put's result (SetItem's rule)."""
        items = index if isinstance(index, tuple) else (index,)
        batching.check_inplace(self, value)
        if any(isinstance(i, Tensor) or hasattr(i, "__len__") for i in items):
            if batching.batched_index(index):
                raise NotImplementedError("vmap: x[index] = value with a batched index "
                                          "tensor is not implemented inside vmap")
            basic, advanced = _split_index(_index(index, self), self.ndim)
            if isinstance(value, Tensor) and value.dtype != self.dtype:
                value = value.to(self.dtype)
            return self._update("__setitem__", lambda t: SetItem.apply(
                t, value, index=basic, then=advanced), cast=True)
        index = (slice(None),) + items
        if type(value) is BatchedTensor:
            region = self.value[index]
            value = batching.pad(lift(value, self.level.index + 1).value, region.ndim - 1)
        self.value[index] = value

    # The methods that compute indices on the host (sort's order, a median's place) or read
    # an index tensor's values (gather's), run on the batch's values, one dim further in.
    def argsort(self, dim=-1, descending=False, *, stable=False):
        return BatchedTensor(self.value.argsort(_dim(self, dim) + 1, descending), self.level)

    def sort(self, dim=-1, descending=False, *, stable=False):
        values, indices = self.value.sort(_dim(self, dim) + 1, descending)
        return ValuesIndices(BatchedTensor(values, self.level),
                             BatchedTensor(indices, self.level))

    def topk(self, k, dim=-1, largest=True, sorted=True):
        values, indices = self.value.topk(k, _dim(self, dim) + 1, largest)
        return ValuesIndices(BatchedTensor(values, self.level),
                             BatchedTensor(indices, self.level))

    def median(self, dim=None, keepdim=False):
        if dim is None:  # (the median of all: an op with its own batching rule)
            return Tensor.median(self)
        return self._selected("median", _dim(self, dim) + 1, keepdim)

    def nanmedian(self, dim=None, keepdim=False):
        if dim is None:
            return Tensor.nanmedian(self)
        return self._selected("nanmedian", _dim(self, dim) + 1, keepdim)

    def kthvalue(self, k, dim=-1, keepdim=False):
        return self._selected("kthvalue", k, _dim(self, dim) + 1, keepdim)

    def mode(self, dim=-1, keepdim=False):
        return self._selected("mode", _dim(self, dim) + 1, keepdim)

    def cummax(self, dim):
        return self._selected("cummax", _dim(self, dim) + 1)

    def cummin(self, dim):
        return self._selected("cummin", _dim(self, dim) + 1)

    def _selected(self, name, *args):
        """``(values, indices)`` of the method ``name`` on the batch's values (its dim
        argument already one further in), both batched."""
        values, indices = getattr(self.value, name)(*args)
        return ValuesIndices(BatchedTensor(values, self.level),
                             BatchedTensor(indices, self.level))

    def gather(self, dim, index):
        return _gathered(self, dim, index)

    def _draw_in_place(self, name, *args, **kwargs):
        """An in-place random fill: with randomness "different", of the batch's values (each
        element its own draw); else one draw for every element."""
        if not batching.LEVELS or batching.random_draw(name, ())[1] == []:
            return getattr(Tensor, name)(self, *args, **kwargs)
        batching.PER_ELEMENT.append(name)
        try:
            getattr(self.value, name)(*args, **kwargs)
        finally:
            batching.PER_ELEMENT.pop()
        return self

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        return self._draw_in_place("uniform_", a, b, generator=generator)

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        return self._draw_in_place("normal_", mean, std, generator=generator)

    def _update(self, op, compute, *others, cast=False, written=None):
        """An in-place op: computed out of place, then written into the batch's values."""
        new = compute(self)
        batching.check_inplace(self, new)
        new = lift(new, self.level.index + 1)
        self.value._update(op, lambda _: new.value, cast=cast)
        return self


def _gathered(x, dim, index):
    """``x.gather(dim, index)`` where either is batched: both lifted to the innermost of
    their levels, gathered one dim further in."""
    k = max(t.level.index for t in (x, index) if type(t) is BatchedTensor) + 1
    x, index = lift(x, k), lift(index, k)
    return BatchedTensor(x.value.gather(_dim(x, dim) + 1, index.value), x.level)


def apply_batched(cls, args, params):
    """``cls.apply(*args, **params)`` where an input is batched: the op's batching rule at the
    innermost level among the inputs' (None when no input is batched)."""
    level = None
    for a in args:
        if type(a) is BatchedTensor and (level is None or a.level.index > level.index):
            level = a.level
    if level is None:
        if not getattr(cls, "random", False) or _RANDOM_RULE:
            return None
        level = LEVELS[-1]  # a random op asks the level's randomness mode all the same
    values, batched = [], []
    for a in args:
        mine = type(a) is BatchedTensor and a.level is level
        values.append(a.value if mine else a)
        batched.append(mine)
    ctx = batching.BatchContext(cls, level.size, tuple(batched), level)
    if cls._raw:
        rule = cls.vmap if cls.vmap is not None else batching.loop
    else:
        rule = _function_rule(cls)
    if getattr(cls, "random", False):  # (its rule calls the op on unbatched values)
        _RANDOM_RULE.append(cls)
        try:
            out = rule(ctx, *values, **params)
        finally:
            _RANDOM_RULE.pop()
    else:
        out = rule(ctx, *values, **params)
    if isinstance(out, tuple):
        return tuple(BatchedTensor(o, level) for o in out)
    return BatchedTensor(out, level)


batching.dispatch = apply_batched


# --- a user's autograd.Function inside vmap, as PyTorch's ----------------------------------

class VmapInfo(tuple):
    """What a Function's ``vmap`` staticmethod gets first: ``batch_size`` and
    ``randomness`` of the level (PyTorch's VmapInfo)."""
    batch_size = property(lambda self: self[0])
    randomness = property(lambda self: self[1])

    def __new__(cls, batch_size, randomness):
        return super().__new__(cls, (batch_size, randomness))


def _function_rule(cls):
    """The batching rule of a user's Function, as PyTorch's: its ``vmap`` staticmethod, or
    with ``generate_vmap_rule = True`` its forward, setup_context and backward run on
    batched tensors (``_generated``). It must be written in the setup_context style."""
    if cls.setup_context is Function.setup_context:
        raise RuntimeError("In order to use an autograd.Function with functorch transforms "
                           "(vmap, grad, jvp, jacrev, ...), it must override the "
                           "setup_context staticmethod. For more details, please see "
                           "https://pytorch.org/docs/main/notes/extending.func.html")
    if cls.vmap is not None:
        return functools.partial(_own_rule, cls)
    if getattr(cls, "generate_vmap_rule", False):
        return functools.partial(_generated_rule, cls)
    raise RuntimeError(f"You tried to vmap over {cls.__name__}, but it does not have vmap "
                       "support. Please override and implement the vmap staticmethod or set "
                       "generate_vmap_rule=True. For more details, please see "
                       "https://pytorch.org/docs/main/notes/extending.func.html")


def _own_rule(cls, ctx, *args, **params):
    """``cls.vmap(info, in_dims, *args)``: (outputs, out_dims), each output's batch dim
    moved to 0 (expanded where its out_dim is None)."""
    in_dims = tuple(0 if b else None for b in ctx.batched)
    out, out_dims = cls.vmap(VmapInfo(ctx.size, ctx.level.randomness), in_dims, *args,
                             **params)
    outs = out if isinstance(out, tuple) else (out,)
    dims = out_dims if isinstance(out_dims, tuple) else (out_dims,) * len(outs)
    if len(dims) != len(outs):
        raise ValueError(f"{cls.__name__}.vmap: expected out_dims to have one entry per "
                         f"output ({len(outs)}), got {out_dims!r}")
    moved = tuple(_batch_first(o, d, ctx.size) for o, d in zip(outs, dims))
    return moved if isinstance(out, tuple) else moved[0]


def _batch_first(t, dim, size):
    """``t`` with its batch dim (``dim``; None: it has none) at 0."""
    if dim is None:
        return t.unsqueeze(0).expand((size,) + tuple(t.shape))
    return t if dim % t.ndim == 0 else t.movedim(dim, 0)


def _generated_rule(cls, ctx, *args, **params):
    if any(type(a) is BatchedTensor for a in args):
        raise NotImplementedError(
            f"vmap: {cls.__name__} has generate_vmap_rule=True and runs inside nested vmap "
            "levels, which is not implemented; give it a vmap staticmethod instead")
    return _generated(cls).apply(*args, level=ctx.level, batched=ctx.batched, **params)


_GENERATED = {}  # a user's Function with generate_vmap_rule: its generated Function


def _generated(cls):
    """The Function that runs ``cls`` on the batch's values (PyTorch's generated vmap
    rule): its forward, setup_context and backward see the batched inputs, outputs,
    saved tensors and gradients as batched tensors of the level (so each of their ops
    goes to its own rule)."""
    if cls in _GENERATED:
        return _GENERATED[cls]

    class Generated(Function):
        node_name = "Vmapped" + cls.__name__ + "Backward"  # (PyTorch's name)

        @staticmethod
        def forward(ctx, *values, level, batched, **params):
            inputs = tuple(BatchedTensor(v, level) if b else v
                           for v, b in zip(values, batched))
            out = cls.forward(*inputs, **params)
            cls.setup_context(ctx, inputs, out)
            ctx.level, saved = level, ctx._to_save or ()
            ctx.saved_batched = tuple(type(t) is BatchedTensor for t in saved)
            ctx._to_save = tuple(t.value if type(t) is BatchedTensor else t for t in saved)
            outs = out if isinstance(out, tuple) else (out,)
            values = tuple(_value_at(o, level) for o in outs)
            return values if isinstance(out, tuple) else values[0]

        @property
        def saved_tensors(self):
            return tuple(BatchedTensor(t, self.level) if b else t
                         for t, b in zip(super().saved_tensors, self.saved_batched))

        @staticmethod
        def backward(ctx, *grads):
            level, batched = ctx.level, ctx.params["batched"]
            with _opened(level):
                grads = cls.backward(ctx, *(None if g is None else BatchedTensor(g, level)
                                            for g in grads))
                grads = grads if isinstance(grads, tuple) else (grads,)
                out = []
                for g, b in zip(grads, batched):
                    if isinstance(g, Tensor):
                        g = _value_at(g, level) if b else (
                            g.value.sum(0) if type(g) is BatchedTensor and g.level is level
                            else g)
                    out.append(g)
            return tuple(out)

    Generated.__name__ = Generated.__qualname__ = "Vmapped" + cls.__name__
    _GENERATED[cls] = Generated
    return Generated


def _value_at(t, level):
    """The values under ``level`` of ``t``: expanded over the batch where ``t`` is not
    batched at it."""
    if type(t) is BatchedTensor and t.level is level:
        return t.value
    if not isinstance(t, Tensor):
        return t
    return t.unsqueeze(0).expand((level.size,) + tuple(t.shape))


class _opened:
    """``level`` open while a generated backward runs (backward may run after its vmap
    returned: the level is opened again, where nothing inside it is open)."""

    def __init__(self, level):
        self.level, self.pushed = level, False

    def __enter__(self):
        if self.level.index < len(LEVELS) and LEVELS[self.level.index] is self.level:
            return
        if self.level.index != len(LEVELS):
            raise RuntimeError("vmap: the backward of a Function with generate_vmap_rule ran "
                               "where its vmap level cannot be opened again")
        LEVELS.append(self.level)
        self.pushed = True

    def __exit__(self, *exc):
        if self.pushed:
            LEVELS.pop()
batching.stack = stack


def index_per_element(x, index):
    """``x[index]`` where the index holds batched tensors, each element by its own index
    tensors, in one indexing of the batch's values: ``x`` and the index tensors lifted to
    the innermost of their levels, and in front of the index arrays one ``arange`` per
    level (the batch's own coordinates), so that element b reads ``x[b][index[b]]``.

    PyTorch's ints-first split (``_split_index``) is done first, as for one element. NumPy
    puts the dims of index arrays that are apart in front, where the batch's coordinates
    lead; the dims of arrays next to each other go where they stand: those of the parts
    before them, which the batch's coordinates moved behind, are moved back."""
    items = index if isinstance(index, tuple) else (index,)
    k = max(t.level.index for t in (x,) + items if type(t) is BatchedTensor) + 1
    values = physical(lift(x, k))
    ndim = values.ndim - k
    arrays, stand_ins = {}, []  # each item of one element (index tensors: their arrays)
    for i in items:
        if type(i) is BatchedTensor:
            array = physical(lift(i, k)).array
            if array.dtype == bool or array.ndim == k:
                raise NotImplementedError("vmap: indexing with a batched bool mask or 0-d "
                                          "index tensor is not implemented inside vmap")
            one = np.broadcast_to(np.zeros((), array.dtype), array.shape[k:])
            arrays[id(one)] = array
            stand_ins.append(one)
        else:
            stand_ins.append(_index(i, x) if isinstance(i, (Tensor, list)) else i)
    basic, advanced = _split_index(tuple(stand_ins), ndim)
    if advanced is not None:  # the ints first (no arrays in basic)
        values = values[(slice(None),) * k + basic]
        ndim = values.ndim - k
        stand_ins = list(advanced)
    is_array = [getattr(i, "ndim", 0) > 0 for i in stand_ins]
    dims = max(1 if i.dtype == bool else i.ndim for i, a in zip(stand_ins, is_array) if a)
    grids = [backend.xp_of(values.array).arange(n).reshape(
        (1,) * j + (n,) + (1,) * (k - j - 1 + dims)) for j, n in enumerate(values.shape[:k])]
    physical_index = tuple(grids) + tuple(
        _leading(arrays[id(i)], k, dims) if id(i) in arrays else i for i in stand_ins)
    out = values[physical_index]
    before = _dims_before_arrays(stand_ins, is_array, ndim)
    if before:  # (moved behind the arrays' dims by the batch's coordinates)
        first = k + dims
        out = out.movedim(tuple(range(first, first + before)), tuple(range(k, k + before)))
    return rewrap(out, k)


def _leading(array, k, dims):
    """An index array of the batch (k leading dims) with size-1 dims after them up to
    ``dims`` dims of its own, to broadcast with the others."""
    missing = dims - (array.ndim - k)
    return array.reshape(array.shape[:k] + (1,) * missing + array.shape[k:])


def _dims_before_arrays(items, is_array, ndim):
    """How many dims of ``x[items]`` (``x`` of ``ndim`` dims) come before the index arrays'
    dims, where NumPy keeps them in place (the arrays, and ints among them, next to each
    other); 0 where it puts them in front."""
    advanced = [n for n, (i, a) in enumerate(zip(items, is_array))
                if a or isinstance(i, (int, np.integer)) and not isinstance(i, bool)]
    if advanced[-1] - advanced[0] + 1 != len(advanced):
        return 0
    used = sum(0 if i is None or i is Ellipsis or isinstance(i, bool) else
               (i.ndim if a and i.dtype == bool else 1) for i, a in zip(items, is_array))
    before = 0
    for i in items[:advanced[0]]:
        before += ndim - used if i is Ellipsis else (0 if isinstance(i, int) else 1)
    return before


batching.index_per_element = index_per_element


def per_element(t, levels):
    """A draw whose leading dims are the sizes of ``levels`` (outermost first), as a tensor
    batched at those levels: each element has its own values."""
    for level in levels:
        t = BatchedTensor(t, level)
    return t


batching.per_element = per_element


def multinomial(t, num_samples, replacement, generator):
    """``t.multinomial(...)`` inside vmap: the weights of every element (lifted to every
    open level) drawn from at once, with random numbers drawn once per element along the
    levels of randomness "different" and shared along those of "same"."""
    from .random import _categorical_weights, _multinomial_picks, host_generator
    _, levels = batching.random_draw("multinomial", ())  # ("error": PyTorch's error)
    k = len(LEVELS)
    values = physical(lift(t, k))                                # (S_1..S_k, *logical)
    sizes, logical = tuple(values.shape[:k]), tuple(values.shape[k:])
    if len(logical) not in (1, 2):
        raise RuntimeError(f"multinomial: input must be 1 or 2 dim, got shape {logical}")
    weights = _categorical_weights(values.reshape(-1, logical[-1]), num_samples, replacement)
    rng = host_generator(generator, True)
    drawn = tuple(lv.size if lv in levels else 1 for lv in LEVELS)  # 1: shared ("same")

    def draw(kind, m):
        numbers = getattr(rng, kind)(drawn + logical[:-1] + (m,))
        return np.broadcast_to(numbers, sizes + logical[:-1] + (m,)).reshape(-1, m)
    picks = _multinomial_picks(weights, num_samples, replacement, draw)
    picks = picks.reshape(sizes + logical[:-1] + (num_samples,))
    return rewrap(Tensor(picks, device=t.device), k)


batching.multinomial = multinomial


# --- the physical view of the other transforms ---------------------------------------------

def lift(t, k=None):
    """``t`` batched at each of the first ``k`` open levels (all by default), expanded (a
    view) at those it was not batched at."""
    k = len(LEVELS) if k is None else k
    if k == 0 or not isinstance(t, Tensor):
        return t
    level = LEVELS[k - 1]
    if type(t) is BatchedTensor and t.level is level:
        return BatchedTensor(lift(t.value, k - 1), level)
    inner = lift(t, k - 1)
    return BatchedTensor(inner.unsqueeze(0).expand((level.size,) + tuple(inner.shape)), level)


def physical(t):
    """The values under every level of a lifted tensor: one dim per level in front,
    outermost first, then the logical shape."""
    while type(t) is BatchedTensor:
        t = t.value
    return t


def rewrap(t, k=None):
    """The inverse of ``physical``: ``t``'s leading dims as the batch dims of the first
    ``k`` open levels (all by default)."""
    if not isinstance(t, Tensor):
        return t
    for level in LEVELS[:k]:
        t = BatchedTensor(t, level)
    return t


def values_at(t, k):
    """``physical(lift(t, k))`` for a tensor that may also be batched at levels opened
    after the first ``k`` (a cotangent that a vmap inside gives to a vjp_fn made outside
    it): those stay batched tensors, over the values of the first k."""
    if type(t) is BatchedTensor and t.level.index >= k:
        return BatchedTensor(values_at(t.value, k).movedim(k, 0), t.level)
    return physical(lift(t, k))


def from_values(t, k):
    """The inverse of ``values_at``."""
    if type(t) is BatchedTensor and t.level.index >= k:
        return BatchedTensor(from_values(t.value.movedim(0, k), k), t.level)
    return rewrap(t, k)


# --- vmap --------------------------------------------------------------------------------

def _name(func):
    return getattr(func, "__name__", repr(func))


def flatten(tree):
    """(leaves, rebuild) of a pytree, tuples (named ones too), lists and dicts of tensors (a
    leaf is anything else): the leaves in order, and a function that puts a list of as many
    values back into the same structure."""
    if isinstance(tree, (tuple, list)):
        parts = [flatten(t) for t in tree]
        kind = type(tree)
    elif isinstance(tree, dict):
        keys = list(tree)
        parts = [flatten(tree[k]) for k in keys]
    else:
        return [tree], lambda values: values[0]
    counts = [len(leaves) for leaves, _ in parts]
    leaves = [leaf for p, _ in parts for leaf in p]

    def rebuild(values):
        out, start = [], 0
        for (_, part), n in zip(parts, counts):
            out.append(part(values[start:start + n]))
            start += n
        if isinstance(tree, dict):
            return dict(zip(keys, out))
        if kind is list:
            return out
        return kind(*out) if hasattr(kind, "_fields") else tuple(out)  # (a named tuple's
    return leaves, rebuild                                             # type kept: max(dim))


def structure(tree):
    """The shape of a pytree as text, each leaf a ``*``: ``(*,)``, ``[*, {'a': *}]``, ``*``
    (two trees of the same structure give the same text)."""
    if isinstance(tree, (tuple, list)):
        inner = ", ".join(structure(t) for t in tree)
        if isinstance(tree, list):
            return f"[{inner}]"
        return f"({inner},)" if len(tree) == 1 else f"({inner})"
    if isinstance(tree, dict):
        return "{" + ", ".join(f"{k!r}: {structure(v)}" for k, v in tree.items()) + "}"
    return "*"


def _dims_for(dims, tree, where):
    """One dim per leaf of ``tree`` from ``dims``: an int or None for the whole subtree, or
    a tree of the same structure (a prefix of it)."""
    if dims is None or isinstance(dims, int):
        return [dims] * len(flatten(tree)[0])
    if isinstance(dims, (tuple, list)) and isinstance(tree, (tuple, list)) and \
            len(dims) == len(tree):
        return [d for sub, t in zip(dims, tree) for d in _dims_for(sub, t, where)]
    if isinstance(dims, dict) and isinstance(tree, dict) and dims.keys() == tree.keys():
        return [d for k in tree for d in _dims_for(dims[k], tree[k], where)]
    raise ValueError(f"{where}: {'in_dims' if 'in' in where else 'out_dims'} is not "
                     f"compatible with the structure of "
                     f"{'inputs' if 'in' in where else 'outputs'}: dims {dims!r} for "
                     f"{type(tree).__name__}")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a dim of its inputs, as ``torch.func.vmap``: ``in_dims`` says
    which dim of each input (None: not mapped; a tuple with one entry per positional
    argument, each an int, None or a tree matching that argument), ``out_dims`` where the
    mapped dim goes in each output. ``randomness`` ("error", "different", "same") says what
    random ops inside do; ``chunk_size`` runs the batch that many at a time."""
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or "
                           f"'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. "
                         f"(got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        where = f"vmap({_name(func)}, in_dims={in_dims}, ...)(<inputs>)"
        if not args:
            raise ValueError(f"{where}: got no inputs. Maybe you forgot to add inputs, or you "
                             "are trying to vmap over a function with no inputs. The latter "
                             "is unsupported.")
        if not (in_dims is None or isinstance(in_dims, (int, tuple))):
            raise ValueError(f"{where}: expected `in_dims` to be int or a (potentially nested) "
                             f"tuple matching the structure of inputs, got: {type(in_dims)}.")
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(f"{where}: expected one in_dim per positional input: in_dims has "
                             f"{len(in_dims)}, inputs {len(args)}")
        leaves, rebuild = flatten(args)
        dims = _dims_for(in_dims, args, where)
        size = _batch_size(leaves, dims, where)
        if chunk_size is None or chunk_size >= size:
            return _run(func, leaves, rebuild, dims, size, kwargs, out_dims, randomness)
        chunks = []
        for start in range(0, size, chunk_size):
            n = min(chunk_size, size - start)
            part = [x.narrow(d, start, n) if d is not None else x for x, d in zip(leaves, dims)]
            chunks.append(_run(func, part, rebuild, dims, n, kwargs, out_dims, randomness))
        return _concatenated(chunks, out_dims, where)
    return wrapped


def _batch_size(leaves, dims, where):
    sizes = []
    for x, d in zip(leaves, dims):
        if d is None:
            continue
        if not isinstance(d, int):
            raise ValueError(f"{where}: Got in_dim={d} for an input but in_dim must be either "
                             "an integer dimension or None.")
        if not isinstance(x, Tensor):
            raise ValueError(f"{where}: Got in_dim={d} for an input but the input is of type "
                             f"{type(x)}. We cannot vmap over non-Tensor arguments, please use "
                             "None as the respective in_dim")
        if not -x.ndim <= d < x.ndim:
            raise ValueError(f"{where}: Got in_dim={d} for some input, but that input is a "
                             f"Tensor of dimensionality {x.ndim} so expected in_dim to satisfy "
                             f"-{x.ndim} <= in_dim < {x.ndim}.")
        sizes.append(x.shape[d])
    if not sizes:
        raise ValueError(f"{where}: at least one input must be batched: vmap: Expected at "
                         "least one Tensor to vmap over")
    if any(n != sizes[0] for n in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                         f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0]


def _run(func, leaves, rebuild, dims, size, kwargs, out_dims, randomness):
    """One call of ``func`` under a new level, its outputs unbatched to ``out_dims``."""
    level = Level(size, randomness)
    LEVELS.append(level)
    try:
        inputs = [x if d is None else BatchedTensor(x.movedim(d, 0), level)
                  for x, d in zip(leaves, dims)]
        out = func(*rebuild(inputs), **kwargs)
        where = f"vmap({_name(func)}, ...)"
        out_leaves, out_rebuild = flatten(out)
        odims = _dims_for(out_dims, out, where + " out")
        results = [_unbatched(o, d, level, func) for o, d in zip(out_leaves, odims)]
    finally:
        LEVELS.pop()
    return out_rebuild(results)


def _unbatched(out, dim, level, func):
    """An output of ``func`` with the level's batch dim at ``dim``."""
    if not isinstance(out, Tensor):
        if dim is None:
            return out
        raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` must only return Tensors, "
                         f"got type {type(out)}. Did you mean to set out_dims= to None for "
                         "output?")
    batched = type(out) is BatchedTensor and out.level is level
    if dim is None:
        if batched:
            raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` can not return a "
                             "BatchedTensor when out_dim is None")
        return out
    value = out.value if batched else out.unsqueeze(0).expand((level.size,) + tuple(out.shape))
    if not -value.ndim <= dim < value.ndim:
        raise IndexError(f"vmap: out_dims={dim} is out of range for an output of "
                         f"{value.ndim - 1} dims (expected -{value.ndim} <= dim < {value.ndim})")
    return value.movedim(0, dim)


def _concatenated(chunks, out_dims, where):
    leaves = [flatten(c)[0] for c in chunks]
    _, rebuild = flatten(chunks[0])
    dims = _dims_for(out_dims, chunks[0], where + " out")
    return rebuild([parts[0] if d is None else cat(list(parts), dim=d)
                    for parts, d in zip(zip(*leaves), dims)])
