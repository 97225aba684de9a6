"""The recorder: while a step runs eagerly, every array operation it does becomes one
instruction of a ``Program``.

Three kinds of work are recorded:

* each primitive op (``Function.apply`` takes its general path while the recorder is one of
  ``PROCESS.watchers``, and hands the op to ``Recorder.forward``): the op's ``forward`` on
  raw arrays, its params, which arrays it read and which it made (and the arrays it saved
  for backward that are neither). Backward rules are written with Tensor ops, so the
  backward pass is recorded op by op the same way; the few rules that work on raw arrays
  call them through ``autograd.function.on_arrays``, recorded as one instruction each,
  and the rules listed in ``REPLAYED_WHOLE`` are recorded as one call of the whole rule;
* the engine's own array work (gradient sums, writes into ``.grad``), through the hooks
  in ``autograd/engine.py``, and the raw writes of in-place ops (``p -= lr * p.grad`` under
  no_grad, ``zero_()``, ``copy_``), through ``on_arrays`` too; a ``.grad`` the engine wrote
  and the step then cleared (``p.grad = None``) is recorded as ``clear_grad``;
* whole calls of the functions marked ``@replayed_as_call`` (the optimiser's ``zero_grad``, a
  scheduler's ``step``, gradient clipping, a user's optimiser): they read learning rates and
  step counts on the host, so replay calls them again rather than freezing their numbers;
* the per-step numbers of minigrad's optimisers (``per_step_numbers``): SGD's, Adam's and
  AdamW's ``step`` are recorded as their array work (one instruction per parameter, or per
  param group where its moments are flat), and the numbers that work reads (the learning
  rate, Adam's bias corrections, AdamW's decay factor) are slots of the program's scalar
  buffer, written on the host before each replay by a "fill" instruction: the host half of
  the step (it advances the step counts), called again. A CUDA graph freezes a kernel's
  arguments at capture, so a learning rate or a step count passed as a Python number would
  stay at its capture value; read from a device array filled before each launch, it does
  not. A step that cannot be recorded so (a closure, amsgrad) is replayed as a call.

Every array the recorder has seen is fingerprinted (a CRC of its bytes) when it is made and
checked when it is read: an array changed by code that is none of the above (``t.array *= 2``,
NumPy on ``.numpy()``) stops the capture with a one-line reason, since a replay would miss
the change. So does reading a tensor's value on the host (``loss.item()``, ``if t:``,
``print(t)``: the Tensor methods call ``autograd.function.read_on_host``), since a Python
branch on the value would be frozen into the replay.
"""
import functools
import zlib

import numpy as np

from .. import backend
from ..autograd import engine, function
from ..autograd.grad_mode import PROCESS, STATE
from ..autograd.graph import TensorBase
from ..backend import random as _random
from ..fused.attention import Attention
from .program import (Instruction, Program, ScalarRef, SlotRef, memory_owner,
                      tensor_arrays)

ACTIVE = [None]  # the recorder capturing a step, if any

# Backward rules recorded as one instruction that calls the whole rule again, with what
# the replayed forward saved: attention's, which redraws its dropout mask from a random
# source its forward saved. Every other rule of minigrad's ops is recorded op by op (its
# raw array work through ``on_arrays``); a rule of an op defined elsewhere (a user's
# Primitive) whole.
REPLAYED_WHOLE = frozenset((Attention.backward,))


def replayed_whole(op):
    """Whether the backward rule of primitive ``op`` is recorded as one call."""
    ours = op.__module__.startswith(("minigrad.ops.", "minigrad.fused."))
    return op.backward in REPLAYED_WHOLE or not ours


class Unsupported(Exception):
    """Something in the step that replay could not repeat (the message says what)."""


def replayed_as_call(fn=None, *, unless=None):
    """Mark ``fn`` (an optimiser's ``zero_grad``, ``clip_grad_norm_``, ...) to be recorded as
    one call that replay makes again, with the same arguments: its host-side numbers
    (learning rate, step count) are read afresh each time. Outside a capture it is ``fn`` as
    it is. ``unless(*args, **kwargs)``: true where this call can be recorded as its array
    work instead, its per-step numbers read through ``per_step_numbers`` (the optimisers'
    ``step``); the call then runs as it is while the recorder records it."""
    if fn is None:
        return lambda f: replayed_as_call(f, unless=unless)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        recorder = ACTIVE[0]
        if recorder is None or recorder.paused or \
                (unless is not None and unless(*args, **kwargs)):
            return fn(*args, **kwargs)
        return recorder.call(fn, args, kwargs)
    wrapper.replayed_as_call = True
    return wrapper


def per_step_numbers(xp, fill, settings, *args):
    """``fill(*args)``: the host half of an optimiser's step (it advances the step counts and
    the parameters' versions), returning the numbers the step's array work reads, as
    ``{name: float}`` computed in double precision. Outside a capture, that dict. While a
    step is captured, the same numbers as 0-d float64 arrays of array module ``xp``, each a
    slot of the program's scalar buffer (which a replay fills by calling ``fill`` again);
    ``settings(*args)`` is what chose the recorded array work (flags, the state arrays it
    writes): a replay first checks it is unchanged, and captures again if not. The array
    work must read the numbers through ``backend.number_like``, which rounds a Python float
    and a 0-d float64 array alike."""
    recorder = ACTIVE[0]
    if recorder is None or recorder.paused:
        return fill(*args)
    return recorder.numbers(xp, fill, settings, args)


def fingerprint(a):
    """A CRC of an array's bytes (a device array's are copied to the host: capture only)."""
    return zlib.crc32(np.ascontiguousarray(backend.to_host(a)).view(np.uint8).reshape(-1))


def _rng_position():
    src = _random.source()
    return src.host.bit_generator.state["state"]["state"], src.offset, id(src)


class _Paused:
    def __init__(self, recorder):
        self.recorder = recorder

    def __enter__(self):
        self.before, self.recorder.paused = self.recorder.paused, True

    def __exit__(self, *exc):
        self.recorder.paused = self.before


class Recorder:
    """Records one eager call of a step into ``self.program``; ``self.broken`` holds the
    reason when something in it cannot be replayed (the call itself still runs to the end)."""

    def __init__(self, input_tensors):
        self.walked = set()    # the nodes the step's backward passes ran
        self.program = Program()
        self.slot_of = {}      # id(array) -> slot
        self.arrays = []       # slot -> array (kept alive: ids stay unique during the capture)
        self.belief = []       # slot -> fingerprint of what replay will hold there
        self.paused = False
        self.broken = None
        self.modules = {}      # id -> module that ran ops (their training flags are guarded)
        self.node_index = {}   # id(node) -> (index of its op's instruction, node)
        self.in_rule = 0       # > 0 while a backward rule is recorded op by op
        self.walking = 0       # > 0 while the engine walks a backward pass
        self.grads = {}        # id(tensor) -> (tensor, its .grad as replay will leave it)
        self.scalar_of = {}    # id(0-d array) -> (its ScalarRef, the array: kept alive)
        for i, t in enumerate(input_tensors):
            self._new_slot(t.array, ("input", i))

    # --- switching on and off ---------------------------------------------------------------
    def __enter__(self):
        if ACTIVE[0] is not None:
            raise RuntimeError("mg.compile: a step is already being captured (compiled steps "
                               "cannot call each other while they capture)")
        ACTIVE[0] = self
        function.capture = engine.capture = self
        PROCESS.watchers = PROCESS.watchers + (self,)  # (the engine calls walk_backward)
        if PROCESS.anomaly:
            self.unsupported("anomaly mode is on, and a replay would not check the step "
                             "for NaN or its backward for errors")
        return self

    def __exit__(self, *exc):
        ACTIVE[0] = None
        function.capture = engine.capture = None
        PROCESS.watchers = tuple(w for w in PROCESS.watchers if w is not self)
        if exc[0] is None and self.broken is None:
            self._settle_grads("the end of the step")
            self._check_all("the end of the step")
        return False

    def unsupported(self, what):
        if self.broken is None:
            self.broken = what
        self.paused = True  # the call goes on eagerly; nothing more is recorded

    # --- slots --------------------------------------------------------------------------------
    def _new_slot(self, array, source=None):
        slot = len(self.arrays)
        if source is not None and source[0] == "tensor" and id(source[1]) not in self.grads:
            self.grads[id(source[1])] = (source[1], source[1]._grad)
        self.arrays.append(array)
        self.belief.append(fingerprint(array))
        self.slot_of[id(array)] = slot
        base = getattr(array, "base", None)
        self.program.add_slot(array, source, None if base is None else self.slot_of.get(id(base)))
        return slot

    def _known(self, array):
        slot = self.slot_of.get(id(array))
        return slot is not None and self.arrays[slot] is array

    def _ref(self, array, tensor=None):
        """The slot of an array an instruction reads (a new one, bound to where it came
        from, the first time it is seen: never inside a backward rule, whose arrays all
        come from the step's ops)."""
        slot = self.slot_of.get(id(array))
        if slot is None:
            if self.in_rule:
                raise Unsupported("a backward rule read an array that no recorded op made "
                                  "(raw array work outside on_arrays?)")
            return self._new_slot(array, ("tensor", tensor) if tensor is not None
                                  else ("array", array))
        if fingerprint(array) != self.belief[slot]:
            raise Unsupported(f"an array of the step ({self.program.describe(slot)}) was "
                              "changed in place by code outside minigrad's ops before it was "
                              "read again; replay would miss that change")
        return slot

    def _check_all(self, where):
        for slot, a in enumerate(self.arrays):
            if fingerprint(a) != self.belief[slot]:
                self.unsupported(f"an array of the step ({self.program.describe(slot)}) was "
                                 f"changed in place by code outside minigrad's ops (seen at "
                                 f"{where}); replay would miss that change")
                return

    def _settle_grads(self, where):
        """The ``.grad`` of each tensor of the step as the step left it, against what replay
        will leave there: a gradient the engine wrote and the step then cleared (``p.grad =
        None`` after an update) is recorded as ``clear_grad``; any other change of a
        ``.grad`` outside the engine stops the capture."""
        for key, (t, expected) in list(self.grads.items()):
            now = t._grad
            if now is expected:
                continue
            if now is None:
                self._append(Instruction("grad", functools.partial(clear_grad, t), "clear_grad",
                                         [], [], effect=True, leaf=t))
                self.grads[key] = (t, None)
            else:
                self.unsupported(f"the .grad of a tensor of shape {tuple(t.shape)} was set in "
                                 f"the step outside backward (seen at {where}); replay would "
                                 "not set it")
                return

    def _outputs(self, outs, written=False):
        """Slots for what an instruction returned: an array it was given back keeps its
        slot (a gradient passed on as it is, or a sum made in place: ``written``, and then
        everything sharing its memory is fingerprinted again)."""
        slots = []
        for o in outs:
            if o is None:
                slots.append(None)
                continue
            slot = self.slot_of.get(id(o))
            slots.append(slot if slot is not None and self.arrays[slot] is o
                         else self._new_slot(o))
        if written:
            self._refresh_aliases([o for o in outs if o is not None])
        return slots

    def _refresh_aliases(self, written):
        for slot, a in enumerate(self.arrays):
            if any(type(a) is type(w) and backend.xp_of(a).may_share_memory(a, w)
                   for w in written):
                self.belief[slot] = fingerprint(a)

    # --- what the hooks call ------------------------------------------------------------------
    def forward(self, cls, node, arrays, params, args):
        """Run one primitive's forward and record it."""
        if self.paused:
            return cls.forward(node, *arrays, **params)
        if STATE.saved_hooks:
            self.unsupported("a saved_tensors_hooks block is open, and a replay would not "
                             "call its pack and unpack hooks")
            return cls.forward(node, *arrays, **params)
        try:
            ins = []
            for a, arg in zip(arrays, args):
                if type(a) in backend._XP_BY_TYPE:
                    ins.append(self._ref(a, arg if isinstance(arg, TensorBase) else None))
                else:
                    ins.append(Instruction.constant(a))
            recorded_params, read = self._params(cls, params)
        except Unsupported as e:
            self.unsupported(str(e))
            return cls.forward(node, *arrays, **params)
        before = _rng_position()
        out = cls.forward(node, *arrays, **params)
        random = _rng_position() != before
        single = type(out) is not tuple
        outs = [out] if single else list(out)
        outs = [o if type(o) in backend._XP_BY_TYPE else node.xp.asarray(o) for o in outs]
        scalar = single and type(out) not in backend._XP_BY_TYPE
        out_slots = self._outputs(outs)
        whole = replayed_whole(cls)
        self.node_index[id(node)] = (len(self.program.instructions), node)
        self._append(Instruction(
            "op", cls.forward, cls.__name__, ins, out_slots, params=recorded_params,
            param_slots=read, single=single,
            scalar=scalar, random=random, needs=getattr(node, "needs_input_grad", None),
            xp=node.xp, op=cls, whole=whole, kept=() if whole else self._kept(node)))
        scope = STATE.scope
        if scope is not None:
            self.modules[id(scope)] = scope
        return outs[0] if single else tuple(outs)

    def _kept(self, node):
        """What forward kept on ``ctx`` for backward that no slot holds yet (dropout's
        mask): [(where, new slot)], read back from the ctx at each replay."""
        kept = []
        for i, item in enumerate(node._to_save or ()):
            if type(item) in backend._XP_BY_TYPE and not self._known(item):
                kept.append((("saved", i), self._new_slot(item)))
        for name, value in vars(node).items():
            if type(value) in backend._XP_BY_TYPE and not self._known(value):
                kept.append((("attr", name), self._new_slot(value)))
        return kept

    def _append(self, instruction):
        instruction.quiet = self.walking > 0
        self.program.append(instruction)

    def _params(self, cls, params):
        """The params as recorded: an array the step computed (the indices of an
        embedding lookup) becomes a ``SlotRef`` read afresh at each replay."""
        recorded, read = {}, []

        def ref(a):
            if isinstance(a, TensorBase):
                raise Unsupported(f"{cls.__name__} was given a tensor as a parameter")
            if type(a) in backend._XP_BY_TYPE and id(a) in self.slot_of:
                slot = self._ref(a)
                read.append(slot)
                return SlotRef(slot)
            return a
        for k, v in params.items():
            recorded[k] = type(v)(ref(a) for a in v) if type(v) in (tuple, list) else ref(v)
        return recorded, read

    def array_op(self, fn, args):
        """Array work outside the ops (the engine's gradient sums, a fused backward's
        ``on_arrays``, an in-place write): run ``fn(*args)`` and record it. Arguments that
        are not arrays are recorded as constants; it returns an array (the first argument,
        for a write into it), a tuple of arrays, or None, which is not recorded (an array
        changed in place by such a call is caught by its fingerprint)."""
        if self.paused:
            return fn(*args)
        try:
            ins = [self.scalar_of[id(a)][0] if id(a) in self.scalar_of else
                   self._ref(a) if type(a) in backend._XP_BY_TYPE else Instruction.constant(a)
                   for a in args]
        except Unsupported as e:
            self.unsupported(str(e))
            return fn(*args)
        out = fn(*args)
        if out is None:  # it made nothing (a GPU kernel that does not apply on the CPU)
            return out
        single = type(out) is not tuple
        outs = [out] if single else list(out)
        scalar = single and type(out) not in backend._XP_BY_TYPE
        if scalar:  # (NumPy makes a scalar of a 0-d result; replay makes it an array too)
            out = outs[0] = np.asarray(out)
        inplace = outs[0] is args[0]
        out_slots = self._outputs(outs, written=inplace)
        if inplace:  # (an optimiser's update writes its other arrays too: the moments)
            self._refresh_aliases([a for a in args[1:] if type(a) in backend._XP_BY_TYPE])
        self._append(Instruction("array", fn, fn.__name__.strip("_"), ins, out_slots,
                                 inplace=inplace, single=single, scalar=scalar))
        return out

    def numbers(self, xp, fill, settings, args):
        """``per_step_numbers`` while recording: call ``fill``, put its numbers in new slots
        of the scalar buffer, and record the call as a "fill" instruction."""
        program = self.program
        if program.scalar_xp not in (None, xp):
            self.unsupported("the step's optimisers keep their parameters on different "
                             "devices (the program has one scalar buffer)")
            return fill(*args)
        with _Paused(self):  # (an lr held in a Tensor is read on the host: fine here)
            numbers = fill(*args)
            key = settings(*args)
        start = len(program.scalar_names)
        out = {}
        for k, (name, value) in enumerate(numbers.items()):
            a = xp.asarray(value, dtype=np.float64)
            self.scalar_of[id(a)] = (ScalarRef(start + k, name), a)
            out[name] = a
        program.scalar_xp = xp
        program.scalar_names += list(numbers)
        self._append(Instruction("fill", fill, fill.__name__.strip("_"), [], [], args=args,
                                 effect=True, scalars=(start, len(numbers)),
                                 settings=(settings, key)))
        return out

    def read_on_host(self, method):
        """A tensor's value read on the host (``method``, e.g. "Tensor.item()") while the step
        is recorded: a Python branch on it would be frozen into the replay, so the step
        runs eagerly. Inside a call replayed as a call (an optimiser's step) reads are fine:
        replay makes the call again."""
        if not self.paused:
            self.unsupported(f"the step reads a tensor's value on the host ({method}): a "
                             "Python branch on it would be frozen into the replay; return "
                             "the tensor from the step and read it outside")

    def walk_backward(self, order, grads_of):
        """The engine starts a backward pass (``order``: its nodes): the gradients it
        starts from get their slots, and what is recorded until the walk ends is marked
        as the backward pass (replayed, as it runs, with grad mode off and NumPy quiet)."""
        hooked = None if self.paused else next((n for n in order if _runs_hooks(n)), None)
        if hooked is not None:
            self.unsupported(f"the step's backward runs a hook or fills a retained gradient "
                             f"(at {hooked.name()}), which a replay would skip")
        if not self.paused:  # (unsupported pauses the recorder)
            try:
                for slots in grads_of.values():
                    for g in slots:
                        if g is not None:
                            self._ref(g.array, g)
            except Unsupported as e:
                self.unsupported(str(e))
        return self._walk(order)

    def _walk(self, order):
        self.walking += 1
        try:
            for node in order:
                self.walked.add(node)
                yield node
        finally:
            self.walking -= 1

    def backward(self, node, grads):
        """Run an op's backward rule: its ops are recorded one by one, as forward's are
        (or, for a rule in ``REPLAYED_WHOLE``, the whole rule as one instruction)."""
        rule = type(node).backward
        if self.paused or not node._raw:  # a user Function's backward: its ops are recorded
            return rule(node, *grads)
        found = self.node_index.get(id(node))
        if STATE.grad_enabled:
            self.unsupported("a backward pass with create_graph=True (replay builds no graph)")
        elif found is None or found[1] is not node:
            self.unsupported(f"the backward of {node.name()}, an op that ran before the step "
                             "began")
        if self.paused:
            return rule(node, *grads)
        if replayed_whole(type(node).op):
            return self._whole_rule(node, grads, found[0])
        self.in_rule += 1
        try:
            out = rule(node, *grads)
        finally:
            self.in_rule -= 1
        for g in out if type(out) is tuple else (out,):
            if g is not None and not self._known(g.array):
                self.unsupported(f"the backward of {node.name()} made a gradient outside "
                                 "minigrad's ops (raw array work outside on_arrays?)")
        return out

    def _whole_rule(self, node, grads, index):
        """A backward rule recorded as one instruction, which calls it again at replay with
        the ctx of its op's replayed forward."""
        rule = type(node).backward
        try:
            ins = [Instruction.constant(None) if g is None else self._ref(g.array, g)
                   for g in grads]
        except Unsupported as e:
            self.unsupported(str(e))
            return rule(node, *grads)
        holds = sorted({slot for s in node.saved or () for slot in self._holding(s.array)}
                       | set(self.program.instructions[index].param_slots))
        with _Paused(self):
            out = rule(node, *grads)
        outs = out if type(out) is tuple else (out,)
        out_slots = self._outputs([None if g is None else g.array for g in outs])
        self._append(Instruction("backward", rule, node.name(), ins, out_slots,
                                 ctx_of=index, holds=holds))
        return out

    def write_grad(self, leaf, g, owned):
        """The engine writes a leaf's gradient: record it, then write it."""
        if self.paused:
            return _write_grad_eagerly(leaf, g, owned)
        old = leaf._grad
        if old is not None and (old.grad_fn is not None or old.array.shape != g.shape
                                or old.array.dtype != g.dtype):
            self.unsupported("a .grad that is part of a graph or of another shape or dtype")
            return _write_grad_eagerly(leaf, g, owned)
        accumulate = old is not None
        try:
            ins = [self._ref(g)] + ([self._ref(old.array, old)] if accumulate else [])
        except Unsupported as e:
            self.unsupported(str(e))
            return _write_grad_eagerly(leaf, g, owned)
        write = functools.partial(set_grad, leaf, owned=owned)
        out = write(*[self.arrays[i] for i in ins])
        self.grads[id(leaf)] = (leaf, leaf._grad)
        out_slots = self._outputs([out], written=accumulate)
        name = ("accumulate" if accumulate else "set") + "_grad"
        self._append(Instruction("grad", write, name, ins, out_slots, effect=True,
                                 leaf=leaf, accumulate=accumulate))

    def _holding(self, array):
        """The slots an array saved for a backward keeps alive: its own and, for a view, the
        one whose memory it uses (which replay must then not write into)."""
        for a in (array, memory_owner(array)):
            slot = self.slot_of.get(id(a))
            if slot is not None and self.arrays[slot] is a:
                yield slot

    def call(self, fn, args, kwargs):
        """A ``@replayed_as_call`` function: run it as one instruction."""
        args = tuple(list(a) if _is_iterator(a) else a for a in args)
        self._settle_grads(f"the call of {fn.__qualname__}")  # (calls read .grad)
        self._check_all(f"the call of {fn.__qualname__}")
        for a in list(args) + list(kwargs.values()):
            if isinstance(a, TensorBase) and id(a.array) in self.slot_of:
                self.unsupported(f"{fn.__qualname__} was passed a tensor computed in the step")
        with _Paused(self):
            result = fn(*args, **kwargs)
        for key, (t, _) in self.grads.items():  # replay makes the call again (zero_grad)
            self.grads[key] = (t, t._grad)
        arrays = tensor_arrays(result)
        if arrays is None:
            self.unsupported(f"{fn.__qualname__} returned a {type(result).__name__}, which "
                             "replay cannot recompute")
            return result
        if self.broken is None:
            for slot, a in enumerate(self.arrays):  # it may change any array: they are now
                self.belief[slot] = fingerprint(a)  # what replay will hold after it too
            out_slots = [self._new_slot(a) for a in arrays]
            self._append(Instruction("call", fn, fn.__qualname__, [], out_slots,
                                     args=args, kwargs=kwargs, effect=True))
        return result


def _runs_hooks(node):
    """Whether a backward pass through ``node`` calls a user's hook or fills a retained
    ``.grad`` (a leaf's node: the leaf's gradient hooks and after-accumulation hooks)."""
    if node._pre_hooks or node._node_hooks or node._retained:
        return True
    leaf = getattr(node, "variable", None)
    return leaf is not None and bool(leaf._hooks or leaf._post_accumulate_hooks)


def _is_iterator(a):
    return hasattr(a, "__next__") and hasattr(a, "__iter__")


def set_grad(leaf, g, old=None, owned=False):
    """A leaf's ``.grad`` after backward (the engine's ``write_grad`` on raw arrays): ``g``
    itself (or a copy, when someone else holds it), or ``old`` with ``g`` added in place."""
    if old is not None:
        old += g
        return old
    data = g if owned else g.copy()
    leaf._grad = leaf._make(data)
    return data


def clear_grad(leaf):
    """``leaf.grad = None``, where the step cleared a gradient the engine wrote."""
    leaf._grad = None


def _write_grad_eagerly(leaf, g, owned):
    recorder, engine.capture = engine.capture, None
    try:
        engine.write_grad(leaf, leaf._make(g), False, owned)
    finally:
        engine.capture = recorder
