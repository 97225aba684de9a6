"""Fusion: runs of elementwise instructions of a program become one fused instruction each.

A replayed elementwise op is one ufunc call (``reuse.plan``): one pass over memory that
reads its operands and writes a new array. A run of them, as ``(y * w + x) * 0.5``, reads
and writes an array per op where one loop could read each operand once, keep the
intermediates in registers and write only what is read later. ``groups`` finds such runs
in a built program: consecutive live instructions replayed as a ufunc each, all making a
result of one shape and dtype; a device's code generator (``cpu_kernels`` on the CPU) turns
each group into one loop.

A group keeps exactly what eager mode computes: each member is the same operation on the
same operands in the same dtype, in the same order, so an exact operation (``+ - * /``,
negation, absolute value, square root, maximum) gives the same bits in a loop as in its
ufunc. Functions whose NumPy implementation is its own (``exp``, ``tanh``, ``log``, ``sin``,
``cos``) differ from a compiled loop's in the last bit, so they end a group and run as
their ufunc. What stays materialised: every result read after the group (by a later
instruction, a ``.grad`` or a backward rule), a view's base, the step's outputs; the other
results of the group are only registers (``Group.temps``).

Also left out: an in-place write (its array is seen under another slot), float16 (its ops
compute in float32), operands of another dtype, constants that are not Python numbers (a
NumPy scalar takes part in type promotion), and results of no elements or of one number
(0-d), where there is no pass over memory to save.
"""
from collections import namedtuple

# the ufuncs a group may hold: exact IEEE operations, the same bits in a loop as in NumPy
FUSABLE = frozenset(("add", "subtract", "multiply", "divide", "negative", "absolute",
                     "sqrt", "maximum"))
FLOATS = ("float32", "float64")

Group = namedtuple("Group", "members shape dtype inputs outputs temps steps into")
Group.__doc__ = """A run of elementwise instructions replayed as one loop.

``members``: the instruction indices; ``inputs``: the slots it reads from outside, in
order; ``outputs``: the slots it writes that are read later; ``temps``: the results no
one reads after it (never stored); ``steps``: one ``(ufunc, operands, slot)`` per member,
an operand being ``("in", j)`` (``inputs[j]``), ``("step", m)`` (member m's result) or
``("const", value)`` (a number, already of the group's dtype); ``into``: {output slot:
input slot whose array it is written into (the input dies in the group)}."""


def fusable(program, k, plans):
    """Whether instruction ``k`` can join a group: replayed as a ufunc in FUSABLE, not in
    place, a float32 or float64 result of operands of its dtype and Python numbers."""
    ins = program.instructions[k]
    p = plans.get(k)
    if p is None or ins.inplace or not ins.live or p.ufunc not in FUSABLE:
        return False
    shape, dtype = program.slots[ins.outs[0]][:2]
    if str(dtype) not in FLOATS or not shape or 0 in shape:  # (a number's work is no pass)
        return False
    for i in ins.ins:
        if type(i) is int:
            if program.slots[i][1] != dtype:
                return False
        elif type(i.value) not in (int, float):
            return False
    return all(type(c) in (int, float) for c in p.constants)


def groups(program, plans, last, reusable, reuse=True):
    """The groups of ``program`` (built: ``plans`` from ``reuse.plan``, ``last`` from
    ``last_uses``, ``reusable`` from ``reuse.reusable_slots``), each of two members or more."""
    found, run = [], []

    def close():
        if len(run) > 1:
            found.append(_group(program, plans, run, last, reusable, reuse))
        run.clear()

    for k, ins in enumerate(program.instructions):
        if not ins.live:
            continue
        if not fusable(program, k, plans):
            close()
            continue
        if run:
            first = program.instructions[run[0]]
            if program.slots[first.outs[0]][:2] != program.slots[ins.outs[0]][:2] or \
                    first.quiet != ins.quiet:
                close()
        run.append(k)
    close()
    return found


def _group(program, plans, members, last, reusable, reuse):
    end = members[-1]
    shape, dtype = program.slots[program.instructions[members[0]].outs[0]][:2]
    made, inputs, steps = {}, [], []
    for m, k in enumerate(members):
        ins = program.instructions[k]
        operands = []
        for i in ins.ins:
            if type(i) is not int:
                operands.append(("const", dtype.type(i.value)))
            elif i in made:
                operands.append(("step", made[i]))
            else:
                if i not in inputs:
                    inputs.append(i)
                operands.append(("in", inputs.index(i)))
        operands += [("const", dtype.type(c)) for c in plans[k].constants]
        out = ins.outs[0]
        made[out] = m
        steps.append((plans[k].ufunc, tuple(operands), out))
    outputs = [s for s in made if last.get(s, -1) > end or s in program.outputs]
    temps = [s for s in made if s not in outputs]
    into = _dying_inputs(program, members, inputs, outputs, shape, dtype, last, reusable) \
        if reuse else {}
    return Group(list(members), shape, dtype, inputs, outputs, temps, steps, into)


def _dying_inputs(program, members, inputs, outputs, shape, dtype, last, reusable):
    """{output: input} for outputs written into the array of an input that dies in the group
    and that nothing else sees (``reuse._dying_input``'s conditions, over the group): each
    element is read before it is written, so the loop may overwrite it."""
    start, end = members[0], members[-1]
    sharing = {}
    for s, owner in enumerate(program.memory_of):
        sharing.setdefault(owner, []).append(s)
    free = [s for s in inputs if s in reusable and start <= last.get(s, -1) <= end
            and program.slots[s][:2] == (shape, dtype)
            and not any(w != s and (last.get(w, -1) >= start or w in inputs)
                        for w in sharing[program.memory_of[s]])]
    into = {}
    for out in outputs:
        if not free or not program.c_contiguous[out]:
            break
        into[out] = free.pop(0)
    return into


def describe(group, instructions):
    """One line: the ops a group replaced, and what it reads, writes and does not store."""
    names = "+".join(instructions[k].name for k in group.members)
    return (f"{names} ({len(group.members)} ops) reads "
            + ", ".join(f"v{s}" for s in group.inputs) + " -> "
            + ", ".join(f"v{s}" + (f" (into v{group.into[s]})" if s in group.into else "")
                        for s in group.outputs)
            + f"; {len(group.temps)} result(s) not stored")


def summary(program):
    """The listing's last line: what fusion did, or why it did nothing."""
    if program.fusion_note is not None:
        return program.fusion_note
    n = len(program.groups)
    members = sum(len(g.members) for g in program.groups)
    temps = sum(len(g.temps) for g in program.groups)
    return (f"fusion: {n} group{'' if n == 1 else 's'} of elementwise instructions, one "
            f"compiled loop each, replace {members} of them; {temps} of their results are "
            "never stored")
