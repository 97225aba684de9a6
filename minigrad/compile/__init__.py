"""``mg.compile``: capture a training step once, then replay it without building a graph.

    step = mg.compile(train_step)   # or @mg.compile above its def
    for x, y in batches:
        loss = step(x, y)

The first two calls with inputs of a given shape, dtype and device run eagerly while a
``Recorder`` writes down every array operation (forward, backward, the optimiser's update);
if both calls recorded the same program it is turned into one plain Python function (see
``Program.build``) and later calls run that instead: the same NumPy work in the same order,
so the same bits, without Tensors, graph nodes or the engine's bookkeeping.

What picks a program: the shapes, dtypes, devices and ``requires_grad`` of the tensor
arguments, the other arguments' values, and grad mode (a new combination is captured
anew). What a program depends on beyond that is guarded (``guards.py``): the numbers,
modules, parameters and tensors the step reaches by name, their autograd state and hooks,
and minigrad's switches; each is checked before every replay, and a change captures the
step again (``step.log`` says what changed). A step that cannot be replayed (a value read
on the host, as ``loss.item()`` or ``if t:``, which a Python branch may depend on; an op
whose result's shape depends on values, as ``nonzero()``; NumPy work outside minigrad's
ops; a random draw that is not an op's; hooks or ``retain_grad`` in its backward; Python
state it changes itself, which a replay would not change; a returned tensor with a graph
no backward in the step used, which eager mode gives a ``grad_fn`` and replay could not)
runs eagerly from then on, and says why once (``CompileWarning``; every reason is kept in
``step.log``). So does a step whose guards keep failing (``RECAPTURES`` captures of one
input signature). The loss returned after ``loss.backward()`` replays: its graph served
that backward.

The optimisers' per-step numbers (learning rate, Adam's bias corrections from the step
count, AdamW's decay factor) live in a small float64 scalar buffer per program, written on
the host before the array work of the step reads it (``per_step_numbers`` in
``recorder.py``, ``ScalarBuffer`` in ``program.py``): the optimiser's update is replayed
as array work like the rest of the step, not as a Python call, which is what a CUDA graph
needs (it freezes its kernels' arguments at capture, so a number passed as a Python float
would keep its capture value). ``step.listing()`` shows each slot (``step_size=s[3]``).
"""
import warnings

from ..autograd.grad_mode import STATE
from ..autograd.graph import TensorBase
from ..tensor import Tensor
from .guards import collect
from .program import Program  # noqa: F401
from .recorder import Recorder, replayed_as_call  # noqa: F401

__all__ = ["compile", "CompiledStep", "CompileWarning", "replayed_as_call"]


RECAPTURES = 8  # captures of one input signature after which a step runs eagerly


class CompileWarning(UserWarning):
    """A compiled step runs eagerly; the message says why."""


def compile(fn=None, *, replay=True, reuse=True, fuse=True):
    """Capture ``fn`` (a function of tensors, typically a whole training step) and replay it.

    ``replay=False`` keeps capturing and checking but always runs eagerly (to compare).
    ``step.guards()`` lists what a replay checks first (see ``guards.py``).
    ``reuse=False`` makes every result of the replay a new array, as eager mode does (by
    default an elementwise result is written into an input that is read for the last time
    there: see ``Program.listing``). ``fuse=False`` replays each elementwise op as its own
    ufunc call (by default, on the CPU with numba installed, runs of them are one compiled
    loop each: see ``fusion.py``)."""
    if fn is None:
        return lambda f: CompiledStep(f, replay, reuse, fuse)
    return CompiledStep(fn, replay, reuse, fuse)


class _Entry:
    """What is known for one input signature: the first capture, then the program and the
    guards it is replayed under."""
    def __init__(self, captures=0):
        self.first = self.program = self.eager = self.guards = None
        self.rebuild = None
        self.retried = False
        self.captures = captures  # how many times this signature was captured before


class CompiledStep:
    """A step under ``mg.compile`` (see the module docstring). ``program`` is the last
    program built, ``listing()`` prints it, ``log`` lists why each capture or fallback
    happened, ``replays`` counts the calls that replayed."""

    def __init__(self, fn, replay=True, reuse=True, fuse=True):
        self.fn, self.replay, self.reuse, self.fuse = fn, replay, reuse, fuse
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
            reason = entry.guards.check() or entry.program.settings_changed()
            if reason is None:
                return self._run(entry, tensors)
            entry = self._recapture(key, entry, reason)
            if entry.eager is not None:
                return self.fn(*args, **kwargs)
        return self._capture(entry, tensors, args, kwargs)

    def _run(self, entry, tensors):
        self.replays += 1
        arrays = entry.program.fn([t.array for t in tensors], entry.program.tensors)
        return entry.rebuild([Tensor._make(a) for a in arrays])

    def _recapture(self, key, entry, reason):
        """A guard failed: capture again, or run eagerly once it keeps failing."""
        entry = self.entries[key] = _Entry(entry.captures + 1)
        if entry.captures < RECAPTURES:
            self._note(f"capturing again: {reason}")
        else:
            self._eager(entry, f"{reason}; this is the {entry.captures}th capture of these "
                        "inputs (a value the step reads changes between calls: pass it as "
                        "a tensor argument to have it read at each replay)")
        return entry

    def _eager(self, entry, reason):
        entry.eager = reason
        self._note(f"running eagerly: {reason}")
        warnings.warn(f"mg.compile({self.__name__}): running eagerly: {reason}",
                      CompileWarning, stacklevel=4)

    def _capture(self, entry, tensors, args, kwargs):
        recorder = Recorder(tensors)
        before = collect(self.fn, args, kwargs)  # the step's Python state as it starts
        unset = {id(t): t._grad is None for t in before.tensors + tensors}
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
                return result
            if reason is None:
                reason = _graph_returned(result, recorder.walked)
            if reason is None:
                changed = before.check()
                if changed is not None:
                    reason = (f"the step changes Python state that a replay would not "
                              f"change: {changed}")
        if reason is not None:
            self._eager(entry, reason)
            return result
        if self.replay:
            leaves = [i.leaf for i in program.instructions if i.kind == "grad"]
            entry.program = self.program = program.build(reuse=self.reuse, fuse=self.fuse)
            note = program.fusion_note
            if self.fuse and note is not None and note not in self.log:
                self._note(note)
            entry.guards = collect(self.fn, args, kwargs, program.tensors, leaves,
                                   recorder.modules.values(), unset)
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

    def guards(self):
        """What each replay of the last program checks before it runs, a line per check."""
        entry = next((e for e in self.entries.values() if e.program is self.program), None)
        if entry is None or entry.guards is None:
            return "(nothing captured yet: call the step twice)"
        return entry.guards.listing()


def _flatten(obj, tensors, signature):
    """The tensors in the arguments, in order, and a hashable description of the rest."""
    if isinstance(obj, TensorBase):
        d = obj.array
        same = next((i for i, t in enumerate(tensors) if t.array is d), None)
        tensors.append(obj)
        signature.append(("tensor", d.shape, str(d.dtype), type(d).__name__, same,
                          obj._requires_grad, bool(obj._hooks or obj._post_accumulate_hooks)))
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
        slot = recorder.slot_of.get(id(r.array))
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


