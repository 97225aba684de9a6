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

A view op (``view = True``: reshape, permute, basic indexing, ...) also links its output
to its input (``Tensor._view_of``) and shares the input's version counter, so an in-place
change through either is seen by the other, as in PyTorch.
"""
from .. import backend
from . import anomaly, forward_ad
from .grad_mode import PROCESS, STATE, no_grad
from .graph import SEQUENCE, Node, SavedTensor, TensorBase, accumulator_of

_new = object.__new__
_tuple_new = tuple.__new__
_NOTHING_SAVED = SavedTensor(None, None, None, None, 0, None, None)
_ndarray = backend.np.ndarray
_generic = backend.np.generic
_XP_BY_TYPE = backend._XP_BY_TYPE
# mg.compile's recorder while it captures a step (it is then one of PROCESS.watchers), else None
capture = None


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
    number_edge = False  # None where a number stands for a tensor operand (x + 2, as torch)
    xp = backend.np  # the array module of the inputs (set on the node only for CuPy)

    @staticmethod
    def forward(ctx, *args, **params):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    @staticmethod
    def jvp(ctx, *tangents):
        """Forward mode (see ``forward_ad``): the tangent of each output from one tangent per
        positional input of forward, as PyTorch's ``Function.jvp``."""
        raise NotImplementedError

    node_name = None  # the name of the op's nodes where it is not PyTorch's usual one

    def __init_subclass__(cls, **kwargs):
        """Each op records nodes of its own node class, named as PyTorch names them
        (``Mul`` records ``MulBackward0`` nodes, a user's ``MyOp`` ``MyOpBackward``): a
        subclass of the op with nothing of its own, so ``type(y.grad_fn).__name__`` reads
        as in PyTorch."""
        super().__init_subclass__(**kwargs)
        if "op" in cls.__dict__:  # this is a node class
            return
        cls.op = cls
        name = cls.__dict__.get("node_name") or \
            cls.__name__ + ("Backward0" if cls._raw else "Backward")
        cls.node_type = type(name, (cls,), {"op": cls, "__doc__": cls.__doc__,
                                            "__module__": cls.__module__})

    # --- called from forward ---------------------------------------------------------------
    def save_for_backward(self, *tensors):
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        """Keep tensors for ``jvp``, which reads them as ``ctx.saved_tensors``."""
        self._for_forward = tensors

    def mark_non_differentiable(self, *outputs):
        self._non_diff = {id(o.data if isinstance(o, TensorBase) else o) for o in outputs}

    # --- the call ----------------------------------------------------------------------------
    @classmethod
    def apply(cls, *args, **params):
        """Run forward on ``args`` (Tensors and plain values); record the node if needed.

        This is the hot path of the whole engine: plain loops, no helper calls on the way.
        """
        node = _new(cls.node_type)
        if params:
            node.params = params
        arrays = []
        first = first_data = None  # the first Tensor argument: outputs are made like it
        any_grad = False
        for a in args:
            if isinstance(a, TensorBase):
                if a._view_of is not None and a._vc[0] != a._view_version:
                    _refresh_view(a)
                d = a.data
                if first is None:
                    first, first_data = a, d
                elif type(d) is not _ndarray or type(first_data) is not _ndarray:
                    backend.check_same_device(cls.__name__, [first_data, d])
                arrays.append(d)
                if a.requires_grad:
                    any_grad = True
            else:
                arrays.append(a)
        if first is None:
            raise TypeError(f"{cls.__name__}: expected at least one Tensor argument")
        record = any_grad and STATE.grad_enabled
        if type(first_data) is not _ndarray:  # (the class default is NumPy)
            node.xp = _XP_BY_TYPE[type(first_data)]
        if record:  # where each input's gradient goes (see graph.Node.edges)
            edges, needs = [], []
            for a in args:
                if not isinstance(a, TensorBase):
                    edges.append(cls.number_edge)
                    needs.append(False)
                elif a.requires_grad:
                    target = a.grad_fn
                    if target is None:  # a leaf: its gradient goes to its AccumulateGrad
                        target = a._accumulator
                        if target is None or target._data is not a.data:
                            target = accumulator_of(a)
                    edges.append((target, a._out_idx))
                    needs.append(True)
                else:
                    edges.append(None if a.data.dtype.kind in "fc" else False)
                    needs.append(False)
            node.needs_input_grad = tuple(needs)
        elif not cls._raw:  # a user's forward may read it; a primitive's backward never runs
            node.needs_input_grad = (False,) * len(args)

        try:
            if not cls._raw or PROCESS.watched:
                if forward_ad.LEVELS:  # forward-mode AD: outputs that carry tangents
                    duals = forward_ad.apply_dual(cls, node, args, params)
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

        output_class = first._output_class
        if type(out) is not tuple:  # one output, the common case
            outs = (out,)  # as forward returned it: what it saved is matched against this
            if type(out) is not _ndarray and type(out) not in _XP_BY_TYPE:  # a NumPy scalar
                out = node.xp.asarray(out)
            result = _new(output_class)
            result.data = out
            if not record and not cls.view:
                return result
            results = [result]
        else:
            outs, results = out, []
            for o in out:
                if type(o) not in _XP_BY_TYPE:
                    o = node.xp.asarray(o)
                r = _new(output_class)
                r.data = o
                results.append(r)
        if record:  # make ``node`` the grad_fn of the differentiable results
            node.edges = edges
            node.seq = next(SEQUENCE)
            scope = STATE.scope
            if scope is not None:
                node.scope = scope
            non_diff = node._non_diff
            if type(out) is not tuple and non_diff is None:  # one output, the common case
                node.output_meta = ((out.shape, out.dtype),)
                if out.dtype.kind in "fc":
                    result.requires_grad = True
                    result.grad_fn = node
            else:
                meta = []
                for i, r in enumerate(results):
                    d = r.data
                    meta.append((d.shape, d.dtype))
                    if d.dtype.kind in "fc" and (non_diff is None or id(outs[i]) not in non_diff):
                        r.requires_grad = True
                        r.grad_fn = node
                        if i:
                            r._out_idx = i
                node.output_meta = tuple(meta)
            if node._to_save is not None:
                node.saved = _save(node._to_save, args, outs, results, first._make)
                del node._to_save
        if cls.view:
            _link_views(cls, params, first, results)
        return results[0] if type(out) is not tuple else tuple(results)

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
        with backend.device_context(first.data), anomaly.quiet_numpy():
            if cls._raw:
                out = cls.forward(node, *arrays, **params)
            else:
                inputs = [first._make(a) if type(a) in _XP_BY_TYPE else a for a in arrays]
                with no_grad():
                    out = cls.forward(node, *inputs, **params)
                if isinstance(out, tuple):
                    out = tuple(o.data if isinstance(o, TensorBase) else o for o in out)
                elif isinstance(out, TensorBase):
                    out = out.data
        if PROCESS.anomaly:
            anomaly.check_forward(node, arrays, out if isinstance(out, tuple) else (out,))
        for w in timers:
            w.op_end(node, out)
        return out

    _STRUCTURE = frozenset(("_to_save", "_non_diff", "params", "needs_input_grad", "edges",
                            "seq", "output_meta", "scope", "trace", "xp", "saved", "released",
                            "_pre_hooks", "_retained"))

    def release(self):
        """Free the saved tensors and, for a user Function, any array or tensor its forward
        stashed on ctx (the engine's primitives keep arrays only in saved tensors)."""
        if self.saved is not None:
            self.saved = None
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
    if cls.aliases is not None and not cls.aliases(source.data, results[0].data, **params):
        return
    counter = source._vc
    if counter is None:
        counter = source._vc = [0]
    without_grad = source.requires_grad and not STATE.grad_enabled
    i = 0
    for r in results:
        r._vc = counter
        r._view_of = (source, cls, params, i)
        r._view_version = counter[0]
        if without_grad:
            r._made_without_grad = True
        i += 1


def _refresh_view(view):
    """Redo a view's history after its base was changed in place (its memory is already
    right, but its grad_fn still reads from the base's old node), as PyTorch does."""
    source, cls, params, i = view._view_of
    view._view_version = view._vc[0]
    out = cls.apply(source, **params)  # refreshes ``source`` first if it is a view too
    out = out[i] if type(out) is tuple else out
    view.requires_grad, view.grad_fn, view._out_idx = out.requires_grad, out.grad_fn, \
        out._out_idx


def _with_op_name(cls, error, arrays):
    """The error ``forward`` raised, reworded to name the op and the input shapes."""
    if type(error) not in (ValueError, IndexError):  # ours (ShapeError, DeviceError, ...)
        return error
    if str(error).startswith(f"{cls.__name__}: "):  # reworded already (forward_ad's inner call)
        return error
    shapes = ", ".join(str(tuple(a.shape)) for a in arrays if hasattr(a, "shape"))
    kind = IndexError if isinstance(error, IndexError) else ShapeError
    return kind(f"{cls.__name__}: {error} (input shapes: {shapes})")


def _save(items, args, raw, results, make):
    """Turn what forward saved into ``SavedTensor`` records.

    An array that is an input's data is kept as that input Tensor (so higher-order
    gradients flow into it) with its version; one that is output ``i`` keeps only its
    array (no reference cycle through the node) and the output's version counter; anything
    else is a constant.
    """
    saved = []  # (on the hot path of every op that saves: plain loops, no helpers)
    for item in items:
        if item is None:  # an input whose value no gradient needs
            saved.append(_NOTHING_SAVED)
            continue
        arr = item.data if isinstance(item, TensorBase) else item
        for k, a in enumerate(args):
            if isinstance(a, TensorBase) and a.data is arr:
                vc = a._vc
                saved.append(_tuple_new(SavedTensor, (a, arr, None, None,
                                                      0 if vc is None else vc[0], None, k)))
                break
        else:
            for i, o in enumerate(raw):
                if o is arr:  # the output tensor shares the version counter checked here
                    counter = results[i]._vc = [0]
                    saved.append(_tuple_new(SavedTensor, (None, results[i].data, i, counter, 0,
                                                          make, None)))
                    break
            else:
                if isinstance(arr, _generic):
                    arr = backend.np.asarray(arr)  # a NumPy scalar would upcast float32 math
                position = None
                for k, a in enumerate(args):
                    if a is item:  # a plain value passed to forward (a scalar exponent)
                        position = k
                        break
                saved.append(_tuple_new(SavedTensor, (None, arr, None, None, 0, make, position)))
    return tuple(saved)
