"""``Function``: one differentiable operation. Calling it records the graph node.

``MyOp.apply(*inputs, **params)`` runs ``forward`` and, when grad mode is on and an input
requires grad, returns outputs whose ``grad_fn`` is the object ``ctx`` that ``forward``
received: that object *is* the graph node (``graph.Node``). It keeps one edge per input,
the saved tensors, and the shape and dtype of each output. ``engine.py`` walks these nodes
backwards, calling ``backward(ctx, *grads)``.

Two kinds of forward share this class:
* ``Primitive`` subclasses (the engine's own ops) take and return raw arrays and reach
  NumPy or CuPy through ``ctx.xp``;
* user subclasses of ``Function`` take and return Tensors, as in PyTorch (forward runs
  with grad mode off on detached inputs).
Both write ``backward`` with Tensor ops, so ``create_graph=True`` only means "run backward
with grad mode on".

Inside ``func.vmap``, an op with a batched input goes to its batching rule instead (see
``batching``), which calls the op again on the whole batch's values.

A view op (``view = True``: reshape, permute, basic indexing, ...) also links its output
to its input (``Tensor._view_of``) and shares the input's version counter, so an in-place
change through either is seen by the other, as in PyTorch.
"""
import functools

from .. import backend
from . import anomaly, batching
from .grad_mode import PROCESS, STATE, no_grad
from .graph import FREED_MESSAGE, _PLAIN, SEQUENCE, Node, Packed, TensorBase, accumulator_of

_new = object.__new__
_NOTHING_SAVED = (None, None, None, None, 0, None, None)  # (SavedTensor's fields)
_ndarray = backend.np.ndarray
_generic = backend.np.generic
_XP_BY_TYPE = backend._XP_BY_TYPE
_VMAP_LEVELS = batching.LEVELS  # (the list itself: vmap is on while it is not empty)
# mg.compile's recorder while it captures a step (it is then one of PROCESS.watchers), else None
capture = None
# forward_ad.apply_dual while a dual level is open (forward_ad is then one of
# PROCESS.watchers), else None: forward mode plugs in here, as the recorder does above
apply_dual = None


def on_arrays(fn, *args):
    """``fn(*args)``: a backward rule's work on raw arrays (one pass, or one GPU kernel,
    instead of several Tensor ops), or an in-place op's write into a tensor's memory
    (``fn`` then returns its first argument). While ``mg.compile`` captures a step, the
    call is recorded as one instruction of the step's program, as the ops around it are."""
    if capture is None:
        return fn(*args)
    return capture.array_op(fn, args)


def read_on_host(method):
    """Called by the Tensor methods that bring values to the host (``item``, ``numpy``,
    ``bool(t)``, ...). While ``mg.compile`` captures a step, such a read makes the step run
    eagerly: a Python branch on the value would be frozen into the replay. A read is where
    the GPU's failed checks of values (an index out of range) are raised
    (``backend.checks``)."""
    if capture is not None:
        capture.read_on_host(method)
    if backend.checks._states:
        backend.checks.raise_pending()


def _no_array_module(cls, data):
    """The one-line error for a tensor whose ``.array`` is no array of a backend."""
    hint = (" (to swap a tensor's storage for another tensor's, assign it to .data)"
            if isinstance(data, TensorBase) else "")
    raise TypeError(f"{cls.__name__}: a tensor's .array is a {type(data).__name__}, not an "
                    f"array of NumPy or CuPy{hint}")


class ShapeError(ValueError, RuntimeError):
    """Operands of an op have shapes that do not fit; the message names the op."""


class Function(Node):
    """Base class of differentiable operations (see the module docstring).

    Subclasses define ``forward(ctx, *args, **params)`` and ``backward(ctx, *grads)`` as
    static methods. ``backward`` returns one gradient per positional input of ``forward``
    (``None`` for inputs without one). In ``forward``: ``ctx.save_for_backward(*tensors)``,
    ``ctx.mark_non_differentiable(*outputs)``, ``ctx.needs_input_grad``; any other
    attribute set on ctx is kept for backward.
    """
    _to_save = _non_diff = None
    _raw = False   # True for Primitive: forward sees arrays instead of Tensors
    view = False   # True for ops whose output shares its input's memory (see aliases)
    # True for a view op with several outputs (split, unbind): as in PyTorch, none of them
    # may change in place while recorded, nor be used after its base changed
    multiple_views = False
    number_edge = False  # None where a number stands for a tensor operand (x + 2, as torch)
    xp = backend.np  # the array module of the inputs (set on the node only for CuPy)

    @staticmethod
    def forward(ctx, *args, **params):
        raise NotImplementedError(f"{type(ctx).op.__name__}: a Function subclass must "
                                  "implement forward (a static method)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError(f"{type(ctx).op.__name__}: a Function subclass must "
                                  "implement backward (or vjp) to be differentiated")

    @staticmethod
    def jvp(ctx, *tangents):
        """Forward mode (see ``forward_ad``): the tangent of each output from one tangent per
        positional input of forward, as PyTorch's ``Function.jvp``."""
        raise NotImplementedError

    @staticmethod
    def setup_context(ctx, inputs, output):
        """PyTorch's other way to write a Function: ``forward(*args)`` without ctx, and
        this, called after it with the inputs (a tuple) and forward's output, to save what
        backward needs on ctx."""
        raise NotImplementedError

    # The batching rule, ``vmap(ctx, *args, **params)``: the op on inputs that carry a batch
    # dimension (see ``batching``); None: the op runs once per batch element
    vmap = None

    node_name = None  # the name of the op's nodes where it is not PyTorch's usual one

    def __init_subclass__(cls, **kwargs):
        """Each op records nodes of its own node class, named as PyTorch names them
        (``Mul`` records ``MulBackward0`` nodes, a user's ``MyOp`` ``MyOpBackward``): a
        subclass of the op with nothing of its own, so ``type(y.grad_fn).__name__`` reads
        as in PyTorch."""
        super().__init_subclass__(**kwargs)
        if "op" in cls.__dict__:  # this is a node class
            return
        if "vjp" in cls.__dict__ and "backward" not in cls.__dict__:  # (PyTorch's alias)
            cls.backward = cls.__dict__["vjp"]
        cls.op = cls
        name = cls.__dict__.get("node_name") or \
            cls.__name__ + ("Backward0" if cls._raw else "Backward")
        cls.node_type = type(name, (cls,), {"op": cls, "__doc__": cls.__doc__,
                                            "__module__": cls.__module__})

    # --- called from forward ---------------------------------------------------------------
    def save_for_backward(self, *tensors):
        if not self._raw:  # (a user's Function: tensors or None, as in PyTorch)
            for i, t in enumerate(tensors):
                if t is not None and not isinstance(t, TensorBase):
                    raise TypeError(f"{self.op.__name__}: save_for_backward can only save "
                                    f"tensors (or None), but argument {i} is a "
                                    f"{type(t).__name__}; keep other values as attributes "
                                    "of ctx")
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        """Keep tensors for ``jvp``, which reads them as ``ctx.saved_tensors``."""
        self._for_forward = tensors

    def mark_non_differentiable(self, *outputs):
        self._non_diff = {id(o.array if isinstance(o, TensorBase) else o) for o in outputs}

    def mark_dirty(self, *tensors):
        raise NotImplementedError(
            f"{self.op.__name__}: mark_dirty (a Function that changes "
            "its inputs in place) is not supported; return a new tensor instead")

    def set_materialize_grads(self, value):
        """With False, backward gets None (not zeros) for an output that received no
        gradient, as PyTorch's."""
        self._materialize_grads = bool(value)

    # --- the call ----------------------------------------------------------------------------
    @classmethod
    def apply(cls, *args, **params):
        """Run forward on ``args`` (Tensors and plain values); record the node if needed.

        This is the hot path of the whole engine: plain loops, no helper calls on the way.
        """
        if _VMAP_LEVELS:  # inside vmap: an input that carries a batch runs the batching rule
            out = batching.dispatch(cls, args, params)
            if out is not None:
                return out
        node = _new(cls.node_type)
        if params:
            node.params = params
        grad_mode = STATE.grad_enabled
        arrays = []                             # what forward receives: each Tensor's array
        edges = [] if grad_mode else None       # where each input's gradient goes (Node.edges)
        needs = [] if grad_mode else None       # whether it goes anywhere (needs_input_grad)
        first = first_data = None  # the first Tensor argument: outputs are made like it
        any_grad = False
        for a in args:
            if isinstance(a, TensorBase):
                if grad_mode and a._view_of is not None and a._vc[0] != a._view_version:
                    _refresh_view(a)  # (only its graph history is stale: no_grad needs none)
                d = a.array
                if first is None:
                    first, first_data = a, d
                elif type(d) is not _ndarray or type(first_data) is not _ndarray:
                    backend.check_same_device(cls.__name__, [first_data, d])
                arrays.append(d)
                if a._requires_grad:
                    any_grad = True
                    if grad_mode:
                        target = a.grad_fn
                        if target is None:  # a leaf: its gradient goes to its AccumulateGrad
                            target = a._accumulator
                            if target is None or target._data is not d:
                                target = accumulator_of(a)
                        if target is not None:
                            edges.append((target, a._out_idx))
                            needs.append(True)
                        else:  # a view made under no_grad: no gradient goes to it
                            edges.append(None)
                            needs.append(False)
                elif grad_mode:
                    edges.append(None if d.dtype.kind in "fc" else False)
                    needs.append(False)
            else:
                arrays.append(a)
                if grad_mode:
                    edges.append(cls.number_edge)
                    needs.append(False)
        if first is None:
            raise TypeError(f"{cls.__name__}: expected at least one Tensor argument")
        record = any_grad and grad_mode
        if type(first_data) is not _ndarray:  # (the class default is NumPy)
            node.xp = _XP_BY_TYPE.get(type(first_data)) or _no_array_module(cls, first_data)
        primitive = cls._raw
        if record:
            node.needs_input_grad = tuple(needs)
        elif not primitive:  # a user's forward may read it; a primitive's backward never runs
            node.needs_input_grad = (False,) * len(args)

        try:
            if not primitive or PROCESS.watched:
                if apply_dual is not None:  # forward-mode AD: outputs that carry tangents
                    duals = apply_dual(cls, node, args, params)
                    if duals is not None:
                        return duals
                out = cls._forward_general(node, arrays, params, first, args)
            elif type(first_data) is _ndarray:
                out = cls.forward(node, *arrays, **params)
            else:  # a primitive on a GPU: with that GPU current
                with backend.device_context(first_data):
                    out = cls.forward(node, *arrays, **params)
        except (ValueError, IndexError) as e:
            raise _with_op_name(cls, e, arrays) from None

        if type(out) is tuple or (record and node._non_diff is not None):
            return node._outputs(out, args, arrays, edges if record else None, first, params)
        # one output, the common case
        result = _new(first._output_class)
        result.array = out if type(out) is _ndarray or type(out) in _XP_BY_TYPE \
            else node.xp.asarray(out)  # (NumPy makes scalars of 0-d results)
        if record:  # make ``node`` the grad_fn of the result
            node.edges = edges
            node.seq = next(SEQUENCE)
            scope = STATE.scope
            if scope is not None:
                node.scope = scope
            d = result.array
            node.output_meta = ((d.shape, d.dtype),)
            if d.dtype.kind in "fc":
                result._requires_grad = True
                result.grad_fn = node
            if node._to_save is not None:
                node._saved = _save(node._to_save, args, arrays, (out,), (result,), first._make)
                del node._to_save
        if cls.view:
            _link_views(cls, params, first, (result,))
        return result

    def _outputs(self, out, args, arrays, edges, first, params):
        """The rest of ``apply`` for an op with several outputs (``out`` a tuple) or
        non-differentiable ones: a Tensor per output, and the node's record when ``edges``
        is not None."""
        raw = out if type(out) is tuple else (out,)  # as forward returned them
        results = []
        for o in raw:
            r = _new(first._output_class)
            r.array = o if type(o) in _XP_BY_TYPE else self.xp.asarray(o)
            results.append(r)
        if edges is not None:
            self.edges = edges
            self.seq = next(SEQUENCE)
            scope = STATE.scope
            if scope is not None:
                self.scope = scope
            non_diff = self._non_diff
            for i, r in enumerate(results):
                d = r.array
                if d.dtype.kind in "fc" and (non_diff is None or id(raw[i]) not in non_diff):
                    r._requires_grad = True
                    r.grad_fn = self
                    r._out_idx = i
            self.output_meta = tuple((r.array.shape, r.array.dtype) for r in results)
            if self._to_save is not None:
                self._saved = _save(self._to_save, args, arrays, raw, results, first._make)
                del self._to_save
        if self.view:
            _link_views(self.op, params, first, results)
        return tuple(results) if type(out) is tuple else results[0]

    @classmethod
    def _forward_general(cls, node, arrays, params, first, args=()):
        """forward for user Functions (on Tensors), and for every op while the process is
        watched (anomaly mode, ``PROCESS.watchers``)."""
        if capture is not None and cls._raw:  # mg.compile records the op as it runs
            return capture.forward(cls, node, arrays, params, args)
        timers = [w for w in PROCESS.watchers if hasattr(w, "op_begin")]  # a profiler's
        for w in timers:
            w.op_begin(cls, node, arrays)
        if PROCESS.anomaly:
            node.trace = anomaly.user_frames()
        with backend.device_context(first.array), anomaly.quiet_numpy():
            if cls._raw:
                out = cls.forward(node, *arrays, **params)
            else:
                inputs = [first._make(a) if type(a) in _XP_BY_TYPE else a for a in arrays]
                with no_grad():
                    if cls.setup_context is Function.setup_context:
                        out = cls.forward(node, *inputs, **params)
                    else:  # forward(*args), then setup_context(ctx, inputs, output)
                        out = cls.forward(*inputs, **params)
                        cls.setup_context(node, tuple(args), out)
                if isinstance(out, tuple):
                    out = tuple(o.array if isinstance(o, TensorBase) else o for o in out)
                elif isinstance(out, TensorBase):
                    out = out.array
        if PROCESS.anomaly:
            anomaly.check_forward(node, arrays, out if isinstance(out, tuple) else (out,))
        for w in timers:
            w.op_end(node, out)
        return out

    _STRUCTURE = frozenset(("_to_save", "_non_diff", "params", "needs_input_grad", "edges",
                            "seq", "output_meta", "scope", "trace", "checkpoint", "xp", "_saved", "released",
                            "_pre_hooks", "_retained", "_node_hooks",
                            "_metadata", "_materialize_grads"))

    def __call__(self, *grads):
        """This node's backward run on ``grads`` (one per output), as calling PyTorch's
        ``grad_fn`` does: the gradient of each input that ``next_functions`` lists (None
        where none goes; one input's alone, not in a tuple); what forward saved stays, for
        backward to run again."""
        if len(grads) != len(self.output_meta):
            raise TypeError(f"{self.name()}: expected {len(self.output_meta)} gradient(s), one "
                            f"per output, got {len(grads)}")
        if self.released:
            raise RuntimeError(FREED_MESSAGE.format(op=self.name()))
        in_grads = type(self).backward(self, *grads)
        if type(in_grads) is not tuple:
            in_grads = (in_grads,)
        in_grads = [g if g is None or isinstance(g, TensorBase) else grads[0]._make(
            self.xp.asarray(g)) for g in in_grads]
        out = tuple(g if e else None for g, e in zip(in_grads, self.edges) if e is not False)
        return out[0] if len(out) == 1 else out

    def release(self):
        """Free the saved tensors and, for a user Function, any array or tensor its forward
        stashed on ctx (the engine's primitives keep arrays only in saved tensors)."""
        if self._saved is not None:
            self._saved = None
            self.released = True
        if not self._raw:
            d = self.__dict__
            for k in d.keys() - self._STRUCTURE:
                if type(d[k]) in _XP_BY_TYPE or isinstance(d[k], TensorBase):
                    del d[k]
                    self.released = True

    # For a view op whose output may be a copy (reshape, indexing): aliases(x, out,
    # **params) tells whether ``out`` shares ``x``'s memory; None: always a view
    aliases = None


class Primitive(Function):
    """A Function whose forward works on raw backend arrays via ``ctx.xp`` (the engine's ops)."""
    _raw = True
    # until an op is recorded, its forward may take every input to need a gradient
    needs_input_grad = (True,) * 8


def _link_views(cls, params, source, results):
    """Make each output of a view op a view of ``source``: the same version counter, and
    how to redo the view from its source (what an in-place change through it needs)."""
    if cls.aliases is not None and not cls.aliases(source.array, results[0].array, **params):
        return
    counter = source._vc
    if counter is None:
        counter = source._vc = [0]
    # Made under no_grad of a tensor that requires grad (or from such a view), a view
    # requires grad too, as in PyTorch, but no gradient flows through it into its source
    without_grad = source._made_without_grad or (
        source._requires_grad and not STATE.grad_enabled)
    i = 0
    for r in results:
        r._vc = counter
        r._view_of = (source, cls, params, i)
        r._view_version = counter[0]
        if without_grad:
            r._made_without_grad = True
            r._requires_grad = True
        i += 1


def replay_view(t, chain):
    """Apply the view ops of ``chain`` ((op, params, output index) each, as in
    ``_view_of``) to ``t``."""
    for op, params, i in chain:
        out = op.apply(t, **params)
        t = out[i] if type(out) is tuple else out
    return t


def _refresh_view(view):
    """Redo a view's history after its base was changed in place (its memory is already
    right, but its grad_fn still reads from the base's old node), as PyTorch does. PyTorch
    refuses to for a view made under no_grad and for an output of split or unbind."""
    source, cls, params, i = view._view_of
    if view._requires_grad or view._base._requires_grad:
        if view._made_without_grad:
            raise RuntimeError(
                "a view was created in no_grad mode and its base or another view of its base "
                f"has been modified inplace (view shape {tuple(view.array.shape)}); move both "
                "the view and the in-place change inside the no_grad block, or both outside")
        multi = multiple_views_op(view)
        if multi is not None:
            raise RuntimeError(
                f"{multi} is a view and its base or another view of its base has been "
                "modified inplace. This view is the output of a function that returns "
                "multiple views. Such functions do not allow the output views to be "
                "modified inplace: use an out-of-place op instead")
    view._view_version = view._vc[0]
    out = cls.apply(source, **params)  # refreshes ``source`` first if it is a view too
    out = out[i] if type(out) is tuple else out
    _new_history(view, out.grad_fn, out._out_idx, out._requires_grad)


def _new_history(t, grad_fn, out_idx, requires_grad=True):
    """Make ``t`` output ``out_idx`` of ``grad_fn`` (after an in-place op, or its base's).
    A ``retain_grad()`` made on its old node moves to the new one, so ``t.grad`` is the
    gradient of t's new value, as in PyTorch."""
    node, idx = t.grad_fn, t._out_idx
    t._requires_grad, t.grad_fn, t._out_idx = requires_grad, grad_fn, out_idx
    retained = None if node is None else node._retained
    if not retained or idx not in retained or retained[idx]() is not t:
        return
    del retained[idx]
    t.retain_grad()


def once_differentiable(backward):
    """Decorates a Function's ``backward`` that is not differentiable itself, as PyTorch's:
    it runs without recording a graph, and with ``create_graph=True`` the gradients it
    returns (where a gradient it received requires grad) raise if they are differentiated
    again, instead of giving a silent zero."""
    @functools.wraps(backward)
    def wrapper(ctx, *grads):
        create_graph = STATE.grad_enabled
        with no_grad():
            out = backward(ctx, *grads)
        if not create_graph:
            return out
        deps = [g for g in grads if isinstance(g, TensorBase) and g.requires_grad]
        if not deps:
            return out
        many = isinstance(out, tuple)
        out = tuple(_DelayedError.apply(g, *deps) if isinstance(g, TensorBase) else g
                    for g in (out if many else (out,)))
        return out if many else out[0]
    return wrapper


class _DelayedError(Function):
    """The node after a ``once_differentiable`` backward's gradients: its own backward
    raises."""

    @staticmethod
    def forward(ctx, g, *deps):
        return g.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")


def multiple_views_op(view):
    """The words "output i of Name" for a view that is (a view of) an output of split or
    unbind, as PyTorch names it in its errors (after the view's own node, or the op that
    made it where no graph was recorded); None for any other view."""
    t = view
    while t._view_of is not None:
        source, cls, _, i = t._view_of
        if cls.multiple_views:
            node = view.grad_fn
            name = cls.node_type.__name__ if node is None else node.name()
            if node is not None:
                i = view._out_idx
            return f"output {i} of {name.rstrip('0123456789').removesuffix('Backward')}"
        t = source
    return None


def _with_op_name(cls, error, arrays):
    """The error ``forward`` raised, reworded to name the op and the input shapes."""
    if type(error) not in (ValueError, IndexError):  # ours (ShapeError, DeviceError, ...)
        return error
    if str(error).startswith(f"{cls.__name__}: "):  # reworded already (forward_ad's inner call)
        return error
    shapes = ", ".join(str(tuple(a.shape)) for a in arrays if hasattr(a, "shape"))
    kind = IndexError if isinstance(error, IndexError) else ShapeError
    return kind(f"{cls.__name__}: {error} (input shapes: {shapes})")


def _save(items, args, arrays, raw, results, make):
    """Turn what forward saved into records: tuples in the field order of ``SavedTensor``
    (tensor, array, output, counter, version, make, input).

    An array that is an input's data is kept as that input Tensor (so higher-order
    gradients flow into it) with its version; one that is output ``i`` keeps only its
    array (no reference cycle through the node) and the output's version counter; anything
    else is a constant (with its argument's position when it is one of forward's plain
    arguments: a scalar exponent). ``arrays`` is what forward received for ``args``.
    """
    saved = []  # (on the hot path of every op that saves: plain loops, no helpers)
    n = len(arrays)
    for item in items:
        if item is None:  # an input whose value no gradient needs
            saved.append(_NOTHING_SAVED)
            continue
        arr = item.array if isinstance(item, TensorBase) else item
        k = 0  # which argument it is (n: none)
        for a in arrays:
            if a is arr:
                break
            k += 1
        if k < n and isinstance(args[k], TensorBase):
            vc = args[k]._vc
            saved.append((args[k], arr, None, None, 0 if vc is None else vc[0], None, k))
            continue
        for i, o in enumerate(raw):
            if o is arr:  # the output tensor shares the version counter checked here
                counter = results[i]._vc = [0]
                saved.append((None, results[i].array, i, counter, 0, make, None))
                break
        else:
            if isinstance(arr, _generic):
                arr = backend.np.asarray(arr)  # a NumPy scalar would upcast float32 math
            saved.append((None, arr, None, None, 0, make, k if k < n else None))
    if PROCESS.packing and STATE.saved_hooks:
        return _pack(saved, STATE.saved_hooks[-1], make, results)
    return tuple(saved)


def _pack(saved, hooks, make, results):
    """The records of ``_save`` with each tensor (an input, one of ``results``, or a
    constant array as a Tensor) given to a ``saved_tensors_hooks`` pair's pack hook (see
    ``graph.Packed``)."""
    out = []
    for tensor, arr, output, counter, version, _, k in saved:
        if type(arr) in _PLAIN or arr is None or type(arr) not in _XP_BY_TYPE:
            # (no array: a number, or an op's own record such as a random stream's state)
            out.append((tensor, arr, output, counter, version, make, k))
            continue
        if tensor is None:
            tensor = make(arr) if output is None else results[output]
        out.append((None, Packed(tensor, hooks, output, make), None, None, 0, None, k))
    return tuple(out)
