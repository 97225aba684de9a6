"""``mg.compile``: capture a training step once, then replay it without building a graph.

    step = mg.compile(train_step)   # or @mg.compile above its def
    for x, y in batches:
        loss = step(x, y)

The first two calls with inputs of a given shape, dtype and device run eagerly while a
``Recorder`` writes down every array operation (forward, backward, the optimiser's update);
if both calls recorded the same program it is turned into one plain Python function (see
``Program.build``) and later calls run that instead: the same NumPy work in the same order,
so the same bits, without Tensors, graph nodes or the engine's bookkeeping.

Guards, checked on every call: the shapes, dtypes and devices of the tensor arguments and
the other arguments' values pick a program (a new one is captured for a new combination);
grad mode, the training flags of the modules the step uses and whether each parameter's
``.grad`` was set when the step began must be as at capture, or it is captured again. A
step that cannot be replayed (a value read on the host, as ``loss.item()`` or ``if t:``,
which a Python branch may depend on; NumPy work outside minigrad's ops; a random draw that
is not an op's; a returned tensor with a graph no backward in the step used, which eager
mode gives a ``grad_fn`` and replay could not) runs eagerly from then on, and says why once
(``CompileWarning``; every reason is kept in ``step.log``). The loss returned after
``loss.backward()`` replays: its graph served that backward.
"""
import inspect
import warnings

from ..autograd.grad_mode import STATE
from ..autograd.graph import TensorBase
from ..tensor import Tensor
from .program import Program  # noqa: F401
from .recorder import Recorder, replayed_as_call  # noqa: F401

__all__ = ["compile", "CompiledStep", "CompileWarning", "replayed_as_call"]


class CompileWarning(UserWarning):
    """A compiled step runs eagerly; the message says why."""


def compile(fn=None, *, replay=True, reuse=True):
    """Capture ``fn`` (a function of tensors, typically a whole training step) and replay it.

    ``replay=False`` keeps capturing and checking but always runs eagerly (to compare).
    ``reuse=False`` makes every result of the replay a new array, as eager mode does (by
    default an elementwise result is written into an input that is read for the last time
    there: see ``Program.listing``)."""
    if fn is None:
        return lambda f: CompiledStep(f, replay, reuse)
    return CompiledStep(fn, replay, reuse)


class _Entry:
    """What is known for one input signature: the first capture, then the program."""
    def __init__(self):
        self.first = self.program = self.eager = None
        self.grads_set = self.training = None
        self.modules = ()
        self.rebuild = None
        self.retried = False
        self.leaves = ()


class CompiledStep:
    """A step under ``mg.compile`` (see the module docstring). ``program`` is the last
    program built, ``listing()`` prints it, ``log`` lists why each capture or fallback
    happened, ``replays`` counts the calls that replayed."""

    def __init__(self, fn, replay=True, reuse=True):
        self.fn, self.replay, self.reuse = fn, replay, reuse
        self.entries = {}
        self.log = []
        self.replays = 0
        self.program = None
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", "step")

    # --- the call ------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        tensors, signature = [], []
        _flatten((args, kwargs), tensors, signature)
        key = (tuple(signature), STATE.grad_enabled)
        entry = self.entries.get(key)
        if entry is None:
            entry = self.entries[key] = _Entry()
            if len(self.entries) > 1:
                self._note(f"new inputs (shapes, dtypes, devices or grad mode): capturing "
                           f"for {_describe(tensors)}")
        if entry.eager is not None:
            return self.fn(*args, **kwargs)
        if entry.program is not None:
            reason = self._guard(entry)
            if reason is None:
                return self._run(entry, tensors)
            self._note(f"capturing again: {reason}")
            self.entries[key] = entry = _Entry()
        return self._capture(entry, tensors, args, kwargs)

    def _run(self, entry, tensors):
        self.replays += 1
        arrays = entry.program.fn([t.data for t in tensors], entry.program.tensors)
        return entry.rebuild([Tensor._make(a) for a in arrays])

    def _guard(self, entry):
        if _training(entry.modules) != entry.training:
            return "a module's training mode changed (train() or eval())"
        if tuple(leaf._grad is not None for leaf in entry.leaves) != entry.grads_set:
            return "a parameter's .grad was set or cleared outside the step"
        return None

    def _capture(self, entry, tensors, args, kwargs):
        if entry.first is not None:  # what replay will find when it starts
            entry.grads_set = tuple(leaf._grad is not None for leaf in entry.leaves)
        recorder = Recorder(tensors)
        with recorder:
            result = self.fn(*args, **kwargs)
        reason = recorder.broken
        if reason is None:
            reason, rebuild, outputs = _outputs(result, recorder)
        if reason is None:
            program = recorder.program
            program.outputs = outputs
            if entry.first is None:
                entry.first, entry.rebuild = program, rebuild
                entry.modules = _submodules(_modules(self.fn, args, kwargs, recorder.modules))
                entry.training = _training(entry.modules)
                entry.leaves = [i.leaf for i in program.instructions if i.kind == "grad"]
                self._note(f"captured {len(program.instructions)} operations; checking them "
                           "against the next call")
                return result
            reason = program.differs_from(entry.first)
            if reason is not None and not entry.retried:  # the first call may set things up
                entry.retried = True  # (the optimiser's state, .grad nodes): try once more
                self._note("the second call differs from the first, as it does when the "
                           "first sets up state (the optimiser's moments, the parameters' "
                           f".grad): {reason}; comparing the third with the second")
                entry.first = program
                entry.grads_set = tuple(leaf._grad is not None for leaf in entry.leaves)
                return result
            if reason is None:
                reason = _graph_returned(result, recorder.walked)
        if reason is not None:
            entry.eager = reason
            self._note(f"running eagerly: {reason}")
            warnings.warn(f"mg.compile({self.__name__}): running eagerly: {reason}",
                          CompileWarning, stacklevel=3)
            return result
        if self.replay:
            entry.program = self.program = program.build(reuse=self.reuse)
            entry.first = None  # (its arrays are no longer needed)
        return result

    def _note(self, line):
        self.log.append(line)

    # --- showing what was captured ----------------------------------------------------------
    def listing(self):
        if self.program is None:
            return "(nothing captured yet: call the step twice)"
        return self.program.listing()

    def to_dot(self):
        return self.program.to_dot()


def _flatten(obj, tensors, signature):
    """The tensors in the arguments, in order, and a hashable description of the rest."""
    if isinstance(obj, TensorBase):
        d = obj.data
        same = next((i for i, t in enumerate(tensors) if t.data is d), None)
        tensors.append(obj)
        signature.append(("tensor", d.shape, str(d.dtype), type(d).__name__, same))
    elif isinstance(obj, (tuple, list)):
        signature.append((type(obj).__name__, len(obj)))
        for o in obj:
            _flatten(o, tensors, signature)
    elif isinstance(obj, dict):
        signature.append(("dict", tuple(obj)))
        for o in obj.values():
            _flatten(o, tensors, signature)
    elif obj is None or isinstance(obj, (bool, int, float, str)):
        signature.append(obj)
    else:
        signature.append(("object", id(obj)))


def _describe(tensors):
    return ", ".join(f"{tuple(t.shape)} {t.dtype}" for t in tensors) or "no tensors"


def _outputs(result, recorder):
    """(reason it cannot be replayed or None, a function rebuilding the result from the
    output arrays, the output slots)."""
    items = result if isinstance(result, (tuple, list)) else [result]
    slots = []
    for r in items:
        if r is None:
            continue
        if not isinstance(r, TensorBase):
            return (f"the step returns a {type(r).__name__}, which replay cannot recompute "
                    "(return tensors, and call .item() outside the step)"), None, None
        slot = recorder.slot_of.get(id(r.data))
        if slot is None or recorder.program.slots[slot][3] is not None:
            return ("the step returns a tensor it did not compute"), None, None
        slots.append(slot)
    kind = type(result)

    def rebuild(tensors):
        it = iter(tensors)
        made = [None if r is None else next(it) for r in items]
        if not isinstance(result, (tuple, list)):
            return made[0]
        return kind(made)
    return None, rebuild, slots


def _graph_returned(result, walked):
    """Why the step cannot be replayed when it returns a tensor with a graph that the
    caller could still use (eager mode gives it a grad_fn, replay would not), or None.
    The loss after backward has a grad_fn too, but its graph was for that backward only:
    ``walked`` holds the nodes of the step's backward passes."""
    items = result if isinstance(result, (tuple, list)) else [result]
    for r in items:
        if r is not None and r.grad_fn is not None and r.grad_fn not in walked:
            return (f"the step returns a tensor with a grad_fn ({r.grad_fn.name()}) that no "
                    "backward in the step used, and replay builds no graph (call backward in "
                    "the step, or return the tensor detached)")
    return None


def _modules(fn, args, kwargs, seen):
    """The modules whose training flags the step depends on: those it names (closure and
    globals), those passed to it, and those that ran ops while it was captured."""
    found = dict(seen)
    try:
        names = inspect.getclosurevars(fn)
        candidates = list(names.nonlocals.values()) + list(names.globals.values())
    except (TypeError, ValueError):
        candidates = []
    for c in candidates + list(args) + list(kwargs.values()):
        if hasattr(c, "training") and hasattr(c, "modules"):
            found[id(c)] = c
    return tuple(found.values())


def _submodules(modules):
    """Every module under ``modules`` once, listed at capture (not walked at each call)."""
    return tuple({id(m): m for top in modules for m in top.modules()}.values())


def _training(modules):
    return [m.training for m in modules]
