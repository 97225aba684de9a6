"""Buffer reuse by liveness: an elementwise instruction whose input dies where it runs
writes its result into that input's array (``multiply(a, b, out=a)``) instead of
allocating a new one.

``UFUNCS`` maps each elementwise primitive to the ufunc its ``forward`` computes (and the
constant operands it adds, as ReLU's 0); ``ARRAY_UFUNCS`` does the same for the array work
of the engine (a new gradient sum: ``copy`` then ``+=``) and of backward rules (``grad * y``).
Writing into an input changes no floating-point result: the same ufunc runs on the same
operands in the same order, so a replay stays equal to the eager step bit for bit
(``tests/test_compile_reuse.py`` checks every entry of the tables against the op it stands
for).

An input's array is reused only when nothing else can see it: the program made it (not an
input, a parameter, a fixed array, the result of a call replayed whole or of a backward
rule called whole), it owns its memory, is C-contiguous, has the result's shape and dtype,
is read for the last time by this instruction, is not returned by the step nor written
into a ``.grad``, and no array that shares its memory (a view, or the array it views) is
read later or by this instruction as another operand.
"""
import operator
from collections import namedtuple

from ..autograd import engine
from ..ops import elementwise as ew

Plan = namedtuple("Plan", "ufunc constants into")
Plan.__doc__ = """How an instruction is replayed: ``ufunc`` (its name) on the inputs then
``constants``, its result written into slot ``into``'s array (None: a new array)."""

# op class -> (name of the ufunc its forward computes, constant operands after the inputs)
UFUNCS = {
    ew.Add: ("add", ()), ew.Sub: ("subtract", ()), ew.Mul: ("multiply", ()),
    ew.Div: ("divide", ()), ew.Neg: ("negative", ()), ew.Exp: ("exp", ()),
    ew.Log: ("log", ()), ew.Sqrt: ("sqrt", ()),
    ew.Abs: ("absolute", ()), ew.Tanh: ("tanh", ()), ew.Sin: ("sin", ()),
    ew.Cos: ("cos", ()), ew.Relu: ("maximum", (0,)),
}

# the array functions of the engine and of backward rules -> the ufunc they compute
# (``_copy_add``: old.copy() += g; ``_multiply``: grad * y, ``_negate``: -grad)
ARRAY_UFUNCS = {engine._copy_add: ("add", ()), ew._multiply: ("multiply", ()),
                ew._negate: ("negative", ())}

# the engine's array functions that write into their first input (its in-place gradient
# sums: ``operator.iadd``, total += g)
IN_PLACE_UFUNCS = {operator.iadd: ("add", ())}

# instructions whose results may be written into later (see the module docstring)
_MAKERS = frozenset(("op", "array"))


def ufunc_of(ins, saving):
    """(ufunc name, trailing constants) when instruction ``ins`` can be replayed as one
    ufunc call, else None. ``saving``: its backward reads what its forward saves (the op
    must then run its own forward, which fills the ctx)."""
    if ins.scalar:
        return None
    if ins.kind == "array":
        return ARRAY_UFUNCS.get(ins.fn) or IN_PLACE_UFUNCS.get(ins.fn)
    if ins.kind != "op" or saving or ins.kept or ins.params or ins.whole:
        return None
    return UFUNCS.get(ins.op)


def reusable_slots(program):
    """The slots whose arrays only the program holds: made by an op or the engine's array
    work, owning C-contiguous memory, never returned and never handed to a ``.grad``."""
    made_by = {}
    handed_out = set(program.outputs)
    for ins in program.instructions:
        for o in ins.outs:
            if o is not None:
                made_by.setdefault(o, ins.kind)
        if ins.kind == "grad":
            handed_out.update(i for i in ins.ins if type(i) is int)
            handed_out.update(o for o in ins.outs if o is not None)
    return {s for s, (_, _, _, source, owns) in enumerate(program.slots)
            if source is None and owns and program.c_contiguous[s]
            and made_by.get(s) in _MAKERS and s not in handed_out}


def plan(program, last, saving):
    """{instruction index: Plan} for every live instruction replayed as a ufunc call (an
    in-place one writes into its first input as it did); ``last``: ``program.last_uses()``."""
    reusable = reusable_slots(program)
    sharing = {}  # memory owner -> slots viewing it
    for s, owner in enumerate(program.memory_of):
        sharing.setdefault(owner, []).append(s)
    plans = {}
    for k, ins in enumerate(program.instructions):
        found = ins.live and ufunc_of(ins, k in saving)
        if not found or _half_and_number(program, ins, found[0]):
            continue
        if ins.inplace:
            plans[k] = Plan(*found, ins.ins[0])
        else:
            plans[k] = Plan(*found, _dying_input(program, k, ins, last, reusable, sharing))
    return plans


def _half_and_number(program, ins, ufunc):
    """A float16 product or quotient with a number: its op computes in float32 (as
    PyTorch's kernels do), which the bare ufunc would not."""
    return ufunc in ("multiply", "divide") and program.slots[ins.outs[0]][1] == "float16" \
        and any(type(i) is not int and type(i.value) in ew._NUMBERS for i in ins.ins)


def _dying_input(program, k, ins, last, reusable, sharing):
    """An input of instruction ``k`` whose array it may write its result into, or None."""
    out = ins.outs[0]
    shape, dtype = program.slots[out][:2]
    if not program.c_contiguous[out]:
        return None
    operands = [i for i in ins.ins if type(i) is int]
    for s in operands:
        if s == out or s not in reusable or last.get(s) != k:
            continue
        if program.slots[s][:2] != (shape, dtype):
            continue
        others = [w for w in sharing[program.memory_of[s]] if w != s]
        if any(last.get(w, -1) > k or w in operands for w in others):
            continue
        return s
    return None
