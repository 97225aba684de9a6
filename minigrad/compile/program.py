"""A captured step as a flat program: instructions over numbered slots ``v0, v1, ...``.

``Program.build`` turns the instructions into the source of one Python function (printed by
``listing()``): a line per instruction, ``del`` as soon as a slot is read for the last time
(so arrays are freed as early as in eager mode, or earlier), and no line for an instruction
whose results nothing reads (dead-code elimination). Running it creates no graph nodes and
no Tensors: each op's ``forward`` is called on arrays, the backward pass is the ops its
rules ran (the same forwards), under ``with backward_pass():`` as the engine runs it.
Elementwise ops are called as the ufunc their forward computes, their result written into
an input read for the last time there where nothing else can see it (buffer reuse by
liveness, see ``reuse``).

The scalar buffer: the per-step numbers of the optimisers' array work (learning rates,
Adam's ``step_size = lr / (1 - beta1**t)`` and ``sqrt(1 - beta2**t)``, AdamW's decay factor,
SGD's momentum and dampening) are not constants of their instructions but slots ``s[i]`` of
one float64 array per program (``ScalarBuffer``), which the "fill" instructions (the
optimisers' host half, see ``recorder.per_step_numbers``) write on the host before the
array work runs: before the first instruction, or after the last host call that comes
first (a scheduler's step there may change the learning rate). A CUDA graph freezes its
kernels' arguments at capture; numbers read from a device array filled before each launch
(one copy from the host) move on with the step count and the schedule.
"""
import numpy as np

from ..autograd.grad_mode import STATE
from ..autograd.graph import TensorBase
from ..backend import _XP_BY_TYPE
from ..tensor import Tensor
from . import cpu_kernels, fusion
from .reuse import plan, reusable_slots

_FIXED = frozenset(("xp", "params", "needs_input_grad", "op_name", "op"))


class ForwardCtx:
    """What an op's ``forward`` receives as ``ctx`` during replay: the same params and
    ``needs_input_grad`` as when it was captured and the op class's own attributes
    (``MaxDim._arg``). What forward saves for backward is dropped: the backward pass reads
    the arrays from their slots (see ``ReplayCtx`` for the ops whose backward needs them)."""
    saved = None
    _to_save = ()
    op = None

    def __init__(self, xp, needs, params, name, op=None):
        self.xp, self.params, self.op_name, self.op = xp, params, name, op
        if needs is not None:
            self.needs_input_grad = needs

    def __getattr__(self, name):  # only for names the ctx itself lacks: the op class's
        if name.startswith("__") or self.op is None:
            raise AttributeError(name)
        return getattr(self.op, name)

    def save_for_backward(self, *items):
        pass

    def save_for_forward(self, *items):
        pass

    def mark_non_differentiable(self, *outputs):
        pass

    def name(self):
        return self.op_name + "Backward"


class ReplayCtx(ForwardCtx):
    """The ctx of an op whose backward rule is replayed whole (``Instruction.whole``), or
    that keeps arrays on ctx that its backward reads (``Instruction.kept``): what forward
    saves is kept until backward (or ``take``) has run, then released, as the engine
    releases a node."""

    def save_for_backward(self, *items):
        self._to_save = items

    @property
    def saved_tensors(self):
        return tuple(_make(self.xp.asarray(a)) if hasattr(a, "shape") and
                     not isinstance(a, TensorBase) else a for a in self._to_save)

    def take(self, kept):
        """The arrays forward kept (``("saved", i)`` or ``("attr", name)``), released."""
        out = [self._to_save[i] if where == "saved" else self.__dict__[i] for where, i in kept]
        self.release()
        return out

    def release(self):
        for k in list(self.__dict__):
            if k not in _FIXED:
                del self.__dict__[k]


def _make(a):
    return Tensor._make(a)


class backward_pass:
    """``with backward_pass():`` around the replay of a backward pass: grad mode off and
    NumPy's floating-point warnings silenced, as the engine runs one."""

    def __enter__(self):
        self.grad, STATE.grad_enabled = STATE.grad_enabled, False
        self.quiet = np.errstate(all="ignore")
        self.quiet.__enter__()

    def __exit__(self, *exc):
        self.quiet.__exit__(*exc)
        STATE.grad_enabled = self.grad


def run_backward_rule(rule, ctx, *grads):
    """An op's whole backward rule on raw arrays (inside ``backward_pass``): the gradients
    come back as arrays (None where there is none); ctx's saved arrays are released."""
    out = rule(ctx, *[None if g is None else _make(g) for g in grads])
    ctx.release()
    if type(out) is not tuple:
        out = (out,)
    return tuple(None if g is None else g.array for g in out)


def call_returning_arrays(fn, args, kwargs):
    return tensor_arrays(fn(*args, **kwargs))


def tensor_arrays(result):
    """The arrays of the Tensors a replayed call returned: a Tensor, None, or a flat
    tuple/list of them (None when it is anything else)."""
    if result is None:
        return []
    if isinstance(result, TensorBase):
        return [result.array]
    if isinstance(result, (tuple, list)) and all(isinstance(r, TensorBase) for r in result):
        return [r.array for r in result]
    return None


class Constant:
    """A plain value (a number, None) passed where an op takes an operand."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Constant) and same_value(self.value, other.value)

    def __repr__(self):
        name = getattr(self.value, "__name__", None)  # (a module: np)
        return name if name is not None else str(self.value)


class SlotRef:
    """A slot read through an op's params (the indices of an embedding lookup)."""
    __slots__ = ("slot",)

    def __init__(self, slot):
        self.slot = slot

    def __eq__(self, other):
        return isinstance(other, SlotRef) and other.slot == self.slot

    def __repr__(self):
        return f"v{self.slot}"


class ScalarRef:
    """Slot ``index`` of the program's scalar buffer, a per-step number (``name``) read as a
    0-d float64 array by an optimiser's array work."""
    __slots__ = ("index", "name")

    def __init__(self, index, name):
        self.index, self.name = index, name

    def __eq__(self, other):
        return isinstance(other, ScalarRef) and other.index == self.index

    def __repr__(self):
        return f"{self.name}=s[{self.index}]"


class ScalarBuffer:
    """The per-step numbers of a program: ``host``, a float64 NumPy array with a slot per
    number, and ``array``, the same numbers where the array work reads them (``host``
    itself on the CPU; a device array, written by one copy, on a GPU). ``views`` are the
    slots as 0-d arrays, the operands the instructions are given."""

    def __init__(self, xp, size):
        self.xp, self.host = xp, np.zeros(size)
        self.array = xp.asarray(self.host)
        self.views = [self.array[i, ...] for i in range(size)]

    def write(self, start, numbers):
        """Put ``numbers`` (a fill's ``{name: float}``) into the host's slots from ``start``."""
        self.host[start:start + len(numbers)] = tuple(numbers.values())

    def send(self):
        """After the fills: the numbers where the array work reads them (on a device, one
        copy of the whole buffer from the host; on the CPU they are there already)."""
        if self.array is not self.host:
            self.array[...] = self.xp.asarray(self.host)


class Instruction:
    """One step of the program. ``kind``: "op" (a primitive's forward), "backward" (its
    backward rule), "array" (the engine's gradient sums), "grad" (a write into a leaf's
    ``.grad``), "call" (a function replayed whole, as an optimiser's ``zero_grad``) or "fill"
    (an optimiser's host half, writing the scalar buffer's slots ``scalars``: (start, count);
    ``settings``: (the function, its value at capture) that a replay checks first)."""

    def __init__(self, kind, fn, name, ins, outs, params=None, single=True, scalar=False,
                 random=False, inplace=False, effect=False, needs=None, xp=np, args=(),
                 kwargs=None, leaf=None, accumulate=False, ctx_of=None, holds=(),
                 param_slots=(), op=None, whole=False, kept=(), scalars=None,
                 settings=None):
        self.kind, self.fn, self.name, self.ins, self.outs = kind, fn, name, ins, outs
        self.params = params or {}
        self.single, self.scalar, self.random, self.inplace = single, scalar, random, inplace
        self.effect = effect or random or inplace
        self.needs, self.xp, self.args, self.kwargs = needs, xp, args, kwargs or {}
        self.leaf, self.accumulate = leaf, accumulate
        self.ctx_of = ctx_of  # for "backward": the index of its op's instruction
        self.holds = holds    # slots its op saved for it (alive until it runs)
        self.param_slots = list(param_slots)  # slots read through params (SlotRef)
        self.op = op  # for "op": the primitive's class (its forward may read class attributes)
        self.whole = whole  # for "op": its backward rule is replayed whole (a "backward")
        self.kept = list(kept)  # for "op": [(where on ctx, slot)] of arrays kept for backward
        self.scalars, self.settings = scalars, settings  # for "fill"
        self.quiet = False  # recorded during a backward pass
        self.live = True

    def made(self):
        """The slots it writes: its outputs and the arrays its forward kept."""
        return [o for o in self.outs if o is not None] + [s for _, s in self.kept]

    def reads(self):
        """The slots it reads (or keeps alive, for a backward replayed whole)."""
        return [i for i in self.ins if type(i) is int] + list(self.holds) + self.param_slots

    constant = Constant

    def signature(self):
        """What must be equal in two captures of the same step."""
        return (self.kind, self.name, self.fn if self.kind != "grad" else self.fn.func,
                tuple(self.ins), tuple(self.outs), self.single, self.scalar, self.random,
                self.inplace, self.needs, self.accumulate, self.ctx_of, tuple(self.holds),
                tuple(self.param_slots), self.whole, tuple(self.kept), self.quiet,
                self.scalars, self.settings and self.settings[1])


def _reads_slot(value):
    return isinstance(value, SlotRef) or (type(value) in (tuple, list) and
                                          any(isinstance(v, SlotRef) for v in value))


def _param_source(value, k, key, names):
    """Python source for a param that reads slots (a SlotRef, or a tuple holding some)."""
    if isinstance(value, SlotRef):
        return f"v{value.slot}"
    parts = []
    for j, v in enumerate(value):
        if isinstance(v, SlotRef):
            parts.append(f"v{v.slot}")
        else:
            names[f"k{k}_{key}_{j}"] = v
            parts.append(f"k{k}_{key}_{j}")
    return ("[" + ", ".join(parts) + "]") if type(value) is list else \
        ("(" + ", ".join(parts) + ",)")


def _size(nbytes):
    """A number of bytes as people read it: 512 B, 3.5 KiB, 12.25 MiB."""
    if nbytes < 1024:
        return f"{nbytes} B"
    if nbytes < 2**20:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{nbytes / 2**20:.2f} MiB"


def memory_owner(array):
    """The array whose memory ``array`` uses (itself, or the array it views)."""
    while type(getattr(array, "base", None)) in _XP_BY_TYPE:
        array = array.base
    return array


def same_value(a, b):
    """Equality of recorded values: arrays by dtype, shape and value, tensors by identity."""
    if a is b:
        return True
    if isinstance(a, TensorBase) or isinstance(b, TensorBase):
        return False
    if type(a) in _XP_BY_TYPE or type(b) in _XP_BY_TYPE:
        return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape and
                bool(_XP_BY_TYPE[type(a)].array_equal(a, b, equal_nan=True)))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and \
            all(same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and \
            all(same_value(a[k], b[k]) for k in a)
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


class Program:
    """The instructions of one captured call and its slots (shape, dtype, where each comes
    from: ``("input", i)``, ``("tensor", t)`` read from a tensor at each replay, ``("array",
    a)``/``("constant", a)`` fixed, or None: made by an instruction)."""

    def __init__(self):
        self.instructions = []
        self.slots = []        # (shape, dtype, nbytes, source, owns_memory)
        self.bases = {}        # slot of a view -> slot of the array it views
        self.memory_of = []    # slot -> id of the array owning its memory (during capture)
        self.c_contiguous = []  # slot -> whether its array was C-contiguous
        self.on_host = []      # slot -> whether its array was a NumPy array
        self.plans = {}        # instruction -> reuse.Plan (replayed as one ufunc call)
        self.groups = []       # fusion.Group: runs of elementwise instructions, one loop each
        self.fusion_note = None  # why nothing was fused, where fusion was asked for
        self.outputs = []
        self.scalar_names = []  # slot of the scalar buffer -> the number's name
        self.scalar_xp = None   # the array module of the scalar buffer
        self.scalars = None     # the ScalarBuffer (made by build)
        self.fills = []         # the "fill" instructions (listed by build)
        self.fn = None
        self.source = None
        self.removed = 0

    def add_slot(self, array, source, base_slot=None):
        owns = array.base is None
        self.slots.append((array.shape, array.dtype, array.nbytes, source, owns))
        self.memory_of.append(id(memory_owner(array)))
        self.c_contiguous.append(bool(array.flags.c_contiguous))
        self.on_host.append(type(array) is np.ndarray)
        if base_slot is not None:
            self.bases[len(self.slots) - 1] = base_slot

    def append(self, instruction):
        self.instructions.append(instruction)

    def describe(self, slot):
        shape, dtype, _, source, _ = self.slots[slot]
        where = "made by " + next((i.name for i in self.instructions if slot in i.outs), "?") \
            if source is None else {"input": "an input", "tensor": "read from a tensor",
                                    "array": "a fixed array", "constant": "a constant"}[source[0]]
        return f"v{slot}: {tuple(shape)} {dtype}, {where}"

    # --- two captures of the same step must agree ------------------------------------------
    def differs_from(self, other):
        """None when ``other`` (the previous call's capture) recorded the same program,
        else a line saying where they part; the sources of the slots are then resolved."""
        if len(self.instructions) != len(other.instructions):
            return (f"the step ran {len(other.instructions)} array operations in one call and "
                    f"{len(self.instructions)} in the next (a Python branch on values?)")
        for k, (a, b) in enumerate(zip(self.instructions, other.instructions)):
            if a.signature() != b.signature() or not same_value(a.params, b.params) or \
                    not same_value(a.args, b.args) or not same_value(a.kwargs, b.kwargs) or \
                    a.leaf is not b.leaf or a.fn is not b.fn and a.kind != "grad":
                return (f"operation {k} differs between two calls ({b.name} then {a.name}, "
                        "or its arguments: a Python branch or number that depends on values?)")
        for slot, (a, b) in enumerate(zip(self.slots, other.slots)):
            if a[:3] != b[:3] or (a[3] is None) != (b[3] is None) or \
                    (a[3] is not None and a[3][0] != b[3][0]):
                return f"slot v{slot} differs between two calls ({self.describe(slot)})"
            if a[3] is None or a[3][0] == "input":
                continue
            kind, value = a[3]
            earlier = b[3][1]
            if value is earlier:
                continue  # the same tensor (a parameter) or array both times: read live
            arr, prev = (value.array, earlier.array) if kind == "tensor" else (value, earlier)
            if not same_value(arr, prev):
                return (f"{self.describe(slot)}: its values differ between two calls but it "
                        "was not computed by minigrad's ops in the step (NumPy, a random "
                        "draw or a Python number made into a tensor?)")
            self.slots[slot] = a[:3] + (("constant", arr),) + a[4:]
        return None

    def settings_changed(self):
        """None when every fill's settings (what chose the recorded array work: the flags of
        a param group, the optimiser's groups, parameters and loaded state) are as at
        capture, else a line saying which changed."""
        for ins in self.fills:
            settings, key = ins.settings
            if settings(*ins.args) != key:
                return (f"the settings of {ins.name} changed (a flag of a param group, its "
                        "parameters, the groups, or the state loaded)")
        return None

    # --- optimising and generating the replay function ---------------------------------------
    def eliminate_dead_code(self):
        """Mark live what the outputs, the effects (writes into .grad, calls, random draws)
        and the backward rules replayed whole need; the rest is not replayed."""
        needed = set(self.outputs)
        for ins in self.instructions:
            ins.live = False
        for k in range(len(self.instructions) - 1, -1, -1):
            ins = self.instructions[k]
            if not (ins.live or ins.effect or any(o in needed for o in ins.made())):
                continue
            ins.live = True
            needed.update(ins.reads())
            if ins.ctx_of is not None:  # its op's forward fills the ctx it reads
                self.instructions[ins.ctx_of].live = True
        self.removed = sum(not i.live for i in self.instructions)
        return self.removed

    def last_uses(self):
        """slot -> index of the last live instruction that reads it (or its view)."""
        last = {}
        for k, ins in enumerate(self.instructions):
            if not ins.live:
                continue
            for s in ins.reads() + ins.made():
                last[s] = k
        for view, base in self.bases.items():  # a base lives as long as its views
            if view in last:
                last[base] = max(last.get(base, -1), last[view])
        return last

    def reused(self):
        """{instruction: the slot whose array it writes its result into} where that slot
        dies there (buffer reuse; not the in-place writes the step itself made), a fused
        group's member by the group's choice."""
        fused = {k for g in self.groups for k in g.members}
        out = {k: p.into for k, p in self.plans.items()
               if p.into is not None and not self.instructions[k].inplace and k not in fused}
        for g in self.groups:
            for k in g.members:
                if self.instructions[k].outs[0] in g.into:
                    out[k] = g.into[self.instructions[k].outs[0]]
        return out

    def memory(self, reuse=True):
        """(peak bytes of the arrays the program makes, freed at last use; bytes it makes in
        all). ``reuse``: a result written into a dying input's array (``plans``) takes that
        array over rather than making one; ``reuse=False`` counts as if every result were
        a new array."""
        last = self.last_uses()
        into = {self.instructions[k].outs[0]: s for k, s in self.reused().items()} \
            if reuse else {}
        taken = set(into.values())
        temps = {s for g in self.groups for s in g.temps}  # (never stored)
        owned = {s for s, slot in enumerate(self.slots)
                 if slot[3] is None and slot[4] and s not in temps}
        alive, peak, total = 0, 0, 0
        frees = {}
        for s in owned:
            if s in last and s not in self.outputs:
                frees.setdefault(last[s], []).append(s)
        made = set()
        for k, ins in enumerate(self.instructions):
            if not ins.live:
                continue
            for o in ins.made():
                if o in owned and o not in made:
                    made.add(o)
                    if o not in into:
                        alive += self.slots[o][2]
                        total += self.slots[o][2]
            peak = max(peak, alive)
            for s in frees.get(k, ()):
                if s not in taken:  # (else its array lives on as the result)
                    alive -= self.slots[s][2]
        return peak, total

    def build(self, reuse=True, fuse=True):
        """Generate, compile and keep ``self.fn(inputs, tensors)``: the replay function.
        Elementwise instructions become one ufunc call each, written into an input that
        dies there (``reuse.plan``; ``reuse=False``: each result in a new array), and runs
        of them on the host one compiled loop each (``fusion``; ``fuse=False``: none)."""
        self.eliminate_dead_code()
        last = self.last_uses()
        saving = {i.ctx_of for i in self.instructions if i.live and i.ctx_of is not None}
        self.plans = plan(self, last, saving)
        if not reuse:
            self.plans = {k: p._replace(into=None) if not self.instructions[k].inplace else p
                          for k, p in self.plans.items()}
        self.groups, self.fusion_note = [], None
        if not fuse:
            self.fusion_note = "fusion: off (fuse=False)"
        elif not cpu_kernels.available():
            self.fusion_note = cpu_kernels.MISSING
        else:
            self.groups = [g for g in fusion.groups(self, self.plans, last,
                                                    reusable_slots(self), reuse)
                           if all(self.on_host[s] for s in g.inputs + g.outputs)]
            cpu_kernels.warm(self.groups, self.slots)
        group_at = {g.members[0]: (n, g) for n, g in enumerate(self.groups)}
        fused_in = {k: n for n, g in enumerate(self.groups) for k in g.members[1:]}
        temps = {s for g in self.groups for s in g.temps}
        names = {"run_backward_rule": run_backward_rule, "backward_pass": backward_pass,
                 "call_returning_arrays": call_returning_arrays, "np": np}
        self.scalars = None
        if self.scalar_names:
            self.scalars = ScalarBuffer(self.scalar_xp, len(self.scalar_names))
            names["scalars"] = self.scalars
            names.update((f"s{i}", v) for i, v in enumerate(self.scalars.views))
        self.fills = [ins for ins in self.instructions if ins.kind == "fill"]
        fills_after = {}  # the last host call before a fill (-1: none) -> the fills there
        after = -1
        for k, ins in enumerate(self.instructions):
            if ins.kind == "call" and ins.live:
                after = k
            elif ins.kind == "fill":
                fills_after.setdefault(after, []).append(k)
        lines, tensors = [], []
        inputs = sorted((src[1], s) for s, (*_, src, _) in enumerate(self.slots)
                        if src is not None and src[0] == "input")
        lines.append("def replay(inputs, tensors):")
        if inputs:
            lines.append("    " + ", ".join(f"v{s}" for _, s in inputs) + ", = inputs")
        for s, (*_, src, _) in enumerate(self.slots):
            if src is None or src[0] == "input" or s not in last:
                continue
            if src[0] == "tensor":
                lines.append(f"    v{s} = tensors[{len(tensors)}].array")
                tensors.append(src[1])
            else:
                names[f"c{s}"] = src[1]
                lines.append(f"    v{s} = c{s}")
        lines += self._fill_lines(fills_after.get(-1, ()), "    ", names)
        dies_at = {}  # instruction -> the slots read (or viewed) for the last time there
        for s, k in last.items():
            if s not in self.outputs:
                dies_at.setdefault(k, []).append(s)
        indent, quiet = "    ", False
        for k, ins in enumerate(self.instructions):
            if ins.live and ins.quiet != quiet:  # entering or leaving a backward pass
                quiet = ins.quiet
                if quiet:
                    lines.append("    with backward_pass():  # grad mode off, NumPy quiet")
                indent = "        " if quiet else "    "
            if not ins.live:
                lines.append(f"{indent}# {k}: {ins.name} (removed: nothing reads its result)")
                continue
            if ins.kind == "fill":
                lines.append(f"{indent}# {k}: {ins.name} (filled above)")
            elif k in group_at:
                n, g = group_at[k]
                lines.append(indent + cpu_kernels.line(n, g, self.slots, names) +
                             f"  # fused {n}: {ins.name}")
            elif k in fused_in:
                lines.append(f"{indent}# {k}: {ins.name} (in fused {fused_in[k]})")
            else:
                lines.append(indent + self._line(k, ins, names, k in saving))
            lines += self._fill_lines(fills_after.get(k, ()), indent, names)
            dead = sorted(s for s in dies_at.get(k, ()) if s not in temps)
            if dead:
                lines.append(indent + "del " + ", ".join(f"v{s}" for s in dead))
        lines.append("    return (" + "".join(f"v{s}, " for s in self.outputs) + ")")
        self.source = "\n".join(lines)
        self.tensors = tensors
        code = compile(self.source, "<mg.compile replay>", "exec")
        exec(code, names)
        self.fn = names["replay"]
        return self

    def _fill_lines(self, fills, indent, names):
        """The lines of the fill instructions ``fills``: each optimiser's host half called
        again, its numbers written into the scalar buffer; then the buffer sent where the
        array work reads it."""
        lines = []
        for k in fills:
            ins = self.instructions[k]
            names[f"f{k}"], names[f"a{k}"] = ins.fn, ins.args
            lines.append(f"{indent}scalars.write({ins.scalars[0]}, f{k}(*a{k}))  # {ins.name}")
        return lines + [indent + "scalars.send()"] if lines else lines

    def _line(self, k, ins, names, saving=False):
        """The source line of instruction ``k`` (``saving``: a backward replayed whole reads
        what its forward saves)."""
        def arg(j, i):
            if type(i) is int:
                return f"v{i}"
            if type(i) is ScalarRef:
                return f"s{i.index}"
            names[f"a{k}_{j}"] = i.value
            return f"a{k}_{j}"
        args = ", ".join(arg(j, i) for j, i in enumerate(ins.ins))
        if k in self.plans:
            return self._ufunc_line(k, ins, args, names)
        outs = ", ".join("_" if o is None else f"v{o}" for o in ins.outs)
        if len(ins.outs) == 1 and (not ins.single or ins.kind in ("backward", "call")):
            outs += ","  # (one output of a call that returns a tuple)
        names[f"f{k}"] = ins.fn
        if ins.kind == "op":
            kept = ins.kept
            ctx_class = ReplayCtx if saving or kept else ForwardCtx
            ins.ctx = ctx_class(ins.xp, ins.needs, ins.params, ins.name, ins.op)
            names[f"x{k}"] = ins.ctx
            kw = ""
            if ins.params:
                names[f"k{k}"] = ins.params
                kw = f", **k{k}"
            if ins.param_slots:  # params that hold arrays of the step: made afresh
                fresh = ", ".join(f"{key!r}: {_param_source(value, k, key, names)}"
                                  for key, value in ins.params.items() if _reads_slot(value))
                prefix = f"x{k}.params = p{k} = {{**k{k}, {fresh}}}; "
                kw = f", **p{k}"
            else:
                prefix = ""
            call = f"f{k}(x{k}, {args}{kw})"
            if ins.scalar:
                call = f"np.asarray({call})"
            line = prefix + f"{outs} = {call}  # {ins.name}"
            if kept:  # what backward reads from ctx: taken into slots, the ctx released
                names[f"w{k}"] = [where for where, _ in kept]
                line += f"\n{'        ' if ins.quiet else '    '}" + \
                    "".join(f"v{s}, " for _, s in kept) + f"= x{k}.take(w{k})"
            return line
        if ins.kind == "backward":
            return f"{outs} = run_backward_rule(f{k}, x{ins.ctx_of}, {args})  # {ins.name}"
        if ins.kind == "call":
            names[f"a{k}"], names[f"k{k}"] = ins.args, ins.kwargs
            call = f"call_returning_arrays(f{k}, a{k}, k{k})"
            return (f"{outs} = {call}" if ins.outs else call) + f"  # {ins.name}"
        call = f"f{k}({args})"
        if ins.scalar:
            call = f"np.asarray({call})"
        return (f"{outs} = {call}" if ins.outs else call) + f"  # {ins.name}"

    def _ufunc_line(self, k, ins, args, names):
        """An elementwise instruction as one ufunc call (into a dying input's array)."""
        name, constants, into = self.plans[k]
        names[f"u_{name}"] = getattr(ins.xp, name)
        args += "".join(f", {c!r}" for c in constants)
        if into is None:
            return f"v{ins.outs[0]} = u_{name}({args})  # {ins.name}"
        where = "in place" if ins.inplace else f"into v{into}"
        return f"v{ins.outs[0]} = u_{name}({args}, out=v{into})  # {ins.name}, {where}"

    # --- showing it ------------------------------------------------------------------------
    def listing(self):
        """The program as a table: one line per instruction (what it reads and makes, with
        shapes), each fused group above the instructions it replaced, what dead-code
        elimination removed, and the memory it needs."""
        rows, reused = [], self.reused()
        group_at = {g.members[0]: n for n, g in enumerate(self.groups)}
        fused_in = {k: n for n, g in enumerate(self.groups) for k in g.members}
        for k, ins in enumerate(self.instructions):
            if k in group_at:
                n = group_at[k]
                rows.append(f"      fused    F{n}: " +
                            fusion.describe(self.groups[n], self.instructions))
            made = ", ".join(f"v{o} {tuple(self.slots[o][0])}" for o in ins.outs if o is not None)
            if ins.kind == "fill":
                start, count = ins.scalars
                made = f"s[{start}:{start + count}] " + ", ".join(
                    self.scalar_names[start:start + count])
            read = ", ".join(f"v{i}" if type(i) is int else repr(i) for i in ins.ins)
            notes = [n for n, on in (("random", ins.random), ("in place", ins.inplace),
                                     ("REMOVED", not ins.live)) if on]
            if k in fused_in:
                notes.append(f"in F{fused_in[k]}")
            if k in reused:
                notes.append(f"into v{reused[k]}")
            rows.append((f"{k:4d}  {ins.kind:8s} {ins.name:26s} {read:24s} -> {made}"
                         + (f"   [{', '.join(notes)}]" if notes else "")).rstrip())
        peak, total = self.memory()
        peak_new, total_new = self.memory(reuse=False)
        kinds = {}
        for ins in self.instructions:
            kinds[ins.kind] = kinds.get(ins.kind, 0) + 1
        summary = (f"{len(self.instructions)} instructions ("
                   + ", ".join(f"{n} {k}" for k, n in kinds.items())
                   + f"), {len(self.slots)} slots; dead-code elimination removed {self.removed}"
                   f"; {len(reused)} results written into a dying input's array\n"
                   f"arrays made: {_size(total)} ({_size(total_new)} without reuse), at most "
                   f"{_size(peak)} alive at once ({_size(peak_new)} without reuse; each freed "
                   "after its last read)\n" + fusion.summary(self))
        if self.scalar_names:
            summary += (f"\nscalar buffer s: {len(self.scalar_names)} float64 numbers, "
                        "written on the host before the array work that reads them (the "
                        "optimisers' per-step numbers)")
        return "\n".join(rows + [summary])

    def to_dot(self):
        """The program as Graphviz source: instructions in order, an edge per slot read."""
        out = ["digraph program {", '  rankdir=TB; node [shape=box, fontsize=10];']
        made_by = {}
        for k, ins in enumerate(self.instructions):
            if not ins.live:
                continue
            colour = {"op": "#dbe9f6", "backward": "#f6e3db", "array": "#eeeeee",
                      "grad": "#e2f2dc", "call": "#fff2c2", "fill": "#f2e2f6"}[ins.kind]
            out.append(f'  i{k} [label="{k}: {ins.name}", style=filled, fillcolor="{colour}"];')
            for i in ins.ins:
                if type(i) is int and i in made_by:
                    shape = "x".join(map(str, self.slots[i][0]))
                    out.append(f'  i{made_by[i]} -> i{k} [label="v{i} {shape}", fontsize=8];')
            for o in ins.outs:
                if o is not None:
                    made_by[o] = k
        out.append("}")
        return "\n".join(out)
