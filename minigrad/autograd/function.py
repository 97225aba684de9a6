"""``Function``: one differentiable operation, and the graph node it leaves behind.

Calling ``MyOp.apply(*inputs, **params)`` runs ``forward`` and, when grad mode is on and an
input requires grad, returns outputs whose ``grad_fn`` is the context object ``ctx`` that
``forward`` received. That object *is* the graph node: it keeps the saved tensors, one edge
per input (to the parent node, or to the leaf tensor that accumulates the gradient) and
the shape and dtype of each output. ``engine.py`` walks these nodes backwards.

Two kinds of forward share this class:
* ``Primitive`` subclasses (the engine's own ops) take and return raw arrays and reach
  NumPy or CuPy through ``ctx.xp``;
* user subclasses of ``Function`` take and return Tensors, as in PyTorch (forward runs
  with grad mode off on detached inputs).
Both write ``backward`` with Tensor ops, so ``create_graph=True`` only means "run backward
with grad mode on".
"""
import traceback

from .. import backend
from .grad_mode import STATE, no_grad

Tensor = None  # minigrad.tensor registers the Tensor class here when it is imported

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or to read saved tensors after "
    "they were freed): the saved arrays of {op} were released by the first backward(). "
    "Pass retain_graph=True to the first backward() (or mg.grad) to keep them.")


class ShapeError(ValueError, RuntimeError):
    """Operands of an op have shapes (or dtypes) that do not fit; the message names the op."""


class Function:
    """Base class of differentiable operations (see the module docstring).

    Subclasses define ``forward(ctx, *args, **params)`` and ``backward(ctx, *grads)`` as
    static methods. ``backward`` returns one gradient per positional input of ``forward``
    (``None`` for inputs without one). In ``forward``: ``ctx.save_for_backward(*tensors)``,
    ``ctx.mark_non_differentiable(*outputs)``, ``ctx.needs_input_grad``; any other
    attribute set on ctx is kept for backward and freed with the saved tensors.
    """
    __slots__ = ("xp", "params", "needs_input_grad", "_to_save", "_saved", "_edges",
                 "_out_meta", "_hooks", "_retain", "_trace", "_released", "_non_diff",
                 "__dict__", "__weakref__")
    _raw = False  # True for Primitive: forward sees arrays instead of Tensors

    @staticmethod
    def forward(ctx, *args, **params):
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError

    # --- called from forward ---------------------------------------------------------------
    def save_for_backward(self, *tensors):
        self._to_save = tensors

    def mark_non_differentiable(self, *outputs):
        self._non_diff = {id(o.data if isinstance(o, Tensor) else o) for o in outputs}

    # --- called from backward --------------------------------------------------------------
    @property
    def saved_tensors(self):
        saved = self._saved
        if saved is None:
            if self._released:
                raise RuntimeError(FREED_MESSAGE.format(op=self.name()))
            return ()
        return tuple(self._unpack(s) for s in saved)

    def _unpack(self, item):
        kind, value, arr, version = item
        if kind == "input":
            if value.data is not arr or value._version != version:
                raise RuntimeError(
                    f"one of the tensors needed to compute the gradient of {self.name()} "
                    f"(shape {tuple(arr.shape)}) was modified after it was saved for backward "
                    f"(in place or by assigning .data); its version is {value._version}, "
                    f"expected {version}")
            return value
        if kind == "output":  # rebuilt with this node as grad_fn, so create_graph can see it
            return Tensor._make(arr, True, self, value)
        return Tensor._make(arr) if _is_array(arr) else arr  # a constant, or a scalar

    # --- bookkeeping -----------------------------------------------------------------------
    @classmethod
    def name(cls):
        return cls.__name__

    def _release(self):
        """Free what backward needed (saved tensors and any attribute forward set)."""
        self._saved = None
        self._released = True
        self.__dict__.clear()

    def register_hook(self, idx, hook):
        if self._hooks is None:
            self._hooks = {}
        return _append_hook(self._hooks.setdefault(idx, []), hook)

    # --- the call ----------------------------------------------------------------------------
    @classmethod
    def apply(cls, *args, **params):
        ctx = object.__new__(cls)
        arrays, needs = [], []
        first = None
        any_grad = False
        for a in args:
            if isinstance(a, Tensor):
                d = a.data
                if first is None:
                    first = d
                elif type(d) is not type(first) or type(d) is not backend.np.ndarray:
                    backend.check_same_device(cls.name(), [first, d])
                arrays.append(d)
                needs.append(a.requires_grad)
                any_grad = any_grad or a.requires_grad
            else:
                arrays.append(a)
                needs.append(False)
        if first is None:
            raise TypeError(f"{cls.name()}: expected at least one Tensor argument")
        record = any_grad and STATE.grad_enabled
        xp = ctx.xp = backend._XP_BY_TYPE[type(first)]
        ctx.params = params
        ctx.needs_input_grad = tuple(needs) if record else (False,) * len(needs)
        ctx._to_save = ctx._non_diff = ctx._saved = ctx._hooks = ctx._retain = None
        ctx._released = False
        ctx._trace = _user_frames() if STATE.anomaly else None

        with backend.device_context(first):
            try:
                out = cls._run_forward(ctx, arrays, params)
            except (ValueError, IndexError) as e:
                if isinstance(e, ShapeError):
                    raise
                shapes = ", ".join(str(tuple(a.shape)) for a in arrays if hasattr(a, "shape"))
                raise ShapeError(f"{cls.name()}: {e} (input shapes: {shapes})") from None
        multi = type(out) is tuple
        raw = out if multi else (out,)
        # NumPy returns scalars, not 0-d arrays, from 0-d operations: make them arrays
        outs = [o if isinstance(o, xp.ndarray) else xp.asarray(o) for o in raw]
        if STATE.anomaly:
            _check_forward(ctx, arrays, outs)

        if record:
            ctx._edges = tuple(_edge(a) if n else None for a, n in zip(args, needs))
            ctx._out_meta = tuple((o.shape, o.dtype) for o in outs)
            if ctx._to_save is not None:
                ctx._saved = _resolve_saved(ctx._to_save, args, raw, outs)
            non_diff = ctx._non_diff or ()
            results = [Tensor._make(o, o.dtype.kind in "fc" and id(o) not in non_diff, ctx, i)
                       for i, o in enumerate(outs)]
            for r in results:  # a non-differentiable output is a constant, with no grad_fn
                if not r.requires_grad:
                    r.grad_fn = None
        else:
            results = [Tensor._make(o) for o in outs]
        ctx._to_save = None
        return tuple(results) if multi else results[0]

    @classmethod
    def _run_forward(cls, ctx, arrays, params):
        if cls._raw:
            return cls.forward(ctx, *arrays, **params)
        inputs = [Tensor._make(a) if _is_array(a) else a for a in arrays]
        with no_grad():
            out = cls.forward(ctx, *inputs, **params)
        if isinstance(out, tuple):
            return tuple(o.data if isinstance(o, Tensor) else o for o in out)
        return out.data if isinstance(out, Tensor) else out


class Primitive(Function):
    """A Function whose forward works on raw backend arrays via ``ctx.xp`` (the engine's ops)."""
    _raw = True


def _is_array(a):
    return type(a) in backend._XP_BY_TYPE


def _edge(t):
    """Where the gradient of input ``t`` goes: its grad_fn's output, or the leaf itself."""
    if t.grad_fn is not None:
        return (t.grad_fn, t._out_idx, t.data.shape, t.data.dtype)
    return (t, 0, t.data.shape, t.data.dtype)


def _resolve_saved(items, args, raw, outs):
    """Turn what forward saved into ("input"|"output"|"const", ref, array, version) records.

    A saved array that is an input's data is kept as that input Tensor (so higher-order
    gradients flow into it); one that is an output is rebuilt with this node as grad_fn;
    anything else is a constant. Only arrays are kept for outputs, so no cycle forms.
    """
    resolved = []
    for item in items:
        arr = item.data if isinstance(item, Tensor) else item
        record = None
        for a in args:
            if isinstance(a, Tensor) and a.data is arr:
                record = ("input", a, arr, a._version)
                break
        else:
            for i, o in enumerate(raw):
                if o is arr:
                    record = ("output", i, outs[i], 0)
                    break
        if record is None and isinstance(arr, backend.np.generic):
            arr = backend.np.asarray(arr)  # a NumPy scalar would upcast float32 math
        resolved.append(record or ("const", None, arr, 0))
    return tuple(resolved)


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""
    __slots__ = ("_hooks", "_hook")

    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _append_hook(hooks, hook):
    if not callable(hook):
        raise TypeError(f"register_hook expects a callable, got {type(hook).__name__}")
    hooks.append(hook)
    return RemovableHandle(hooks, hook)


# --- anomaly mode --------------------------------------------------------------------------

_PACKAGE_DIR = __file__.rsplit("/autograd/", 1)[0]


def _user_frames():
    """The creation stack, without minigrad's own frames (computed only in anomaly mode)."""
    return [f for f in traceback.extract_stack()[:-2] if not f.filename.startswith(_PACKAGE_DIR)]


def _where(trace):
    if not trace:
        return "(no user frame recorded)"
    f = trace[-1]
    return f'File "{f.filename}", line {f.lineno}, in {f.name}: {f.line}'


def _all_finite(a):
    xp = backend._XP_BY_TYPE.get(type(a))
    if xp is None or a.dtype.kind not in "fc":
        return True
    return bool(xp.isfinite(a).all())


def _check_forward(ctx, arrays, outs):
    if not all(_all_finite(a) for a in arrays if _is_array(a)):
        return  # the NaN/inf came from an input: an earlier op produced it
    for i, o in enumerate(outs):
        if not _all_finite(o):
            raise RuntimeError(
                f"anomaly: {ctx.name()} produced NaN/inf in its output {i} from finite inputs "
                f"in forward. It was called at {_where(ctx._trace)}")


def check_backward(node, grads_in, grads_out):
    """Raise when ``node``'s backward made NaN/inf gradients out of finite ones."""
    if not all(g is None or _all_finite(g.data) for g in grads_in):
        return
    for i, g in enumerate(grads_out):
        if g is not None and not _all_finite(g.data):
            raise RuntimeError(
                f"anomaly: the backward of {node.name()} produced NaN/inf in the gradient of "
                f"its input {i} from finite gradients. The op was created at "
                f"{_where(node._trace)}")
