"""The CPU's code generator for fused groups (``fusion.Group``): one loop nest per group,
compiled by numba, one element at a time through every member.

Each member's operation runs on values of the group's dtype (a float32 loop stays float32:
each constant is written as ``np.float32(c)``, since numba would promote a bare float
literal to float64), in the members' order, without fast-math (no reassociation, no fused
multiply-add), so each result has the bits its ufunc gives. Division by zero gives inf or
nan as in NumPy (numba's ``error_model="numpy"``); ``maximum`` propagates a NaN and, of two
equal operands (0 and -0), gives the second, as NumPy's does.

Broadcasting: the loops run over the group's shape; an input of fewer dimensions is indexed
by the trailing loop indices, and at 0 along a dimension it is broadcast in (any strides:
numba compiles a kernel per layout of its arguments). Kernels are compiled once per
process for each distinct loop (its source, constants included, is the key).
"""
import numpy as np

try:
    import numba
except ImportError:  # the replay stays unfused (Program.build says so)
    numba = None

MISSING = ("numba is not installed: elementwise runs replay unfused "
           "(pip install 'minigrad[fast]' to fuse them)")

_EXPRESSIONS = {
    "add": "{0} + {1}", "subtract": "{0} - {1}", "multiply": "{0} * {1}",
    "divide": "{0} / {1}", "negative": "-{0}", "absolute": "abs({0})",
    "sqrt": "math.sqrt({0})", "maximum": "{0} if ({0} > {1} or {0} != {0}) else {1}",
}

_KERNELS = {}  # kernel source -> compiled kernel


def available():
    return numba is not None


def indices(group, slots):
    """Each input's index into its array at loop position ``a0, a1, ...`` (the group's
    shape): the trailing loop indices, 0 along a dimension it is broadcast in."""
    nd = len(group.shape)
    out = []
    for s in group.inputs:
        shape = slots[s][0]
        lead = nd - len(shape)
        out.append(", ".join(f"a{lead + d}" if n != 1 or group.shape[lead + d] == 1 else "0"
                             for d, n in enumerate(shape)) or "()")
    return out


def source(group, slots):
    """The Python source of the group's kernel ``kernel(i0, ..., o0, ...)``: its loops run
    over the shape of the first array it writes, so one kernel serves every size of the
    same layout. An output written into a dying input's array (``group.into``) is stored
    through that input's parameter, which has no ``o`` of its own: an array read and written
    as one argument is vectorised by the compiler, where as two arguments that alias it would
    be checked at run time and looped over element by element."""
    body = []
    for m, (ufunc, operands, _) in enumerate(group.steps):
        args = []
        for kind, ref in operands:
            if kind == "in":
                args.append(f"x{ref}")
            elif kind == "step":
                args.append(f"t{ref}")
            else:  # the number as its dtype (a float literal is float64 in numba)
                args.append(f"np.{group.dtype}({_literal(float(ref))})")
        body.append(f"t{m} = " + _EXPRESSIONS[ufunc].format(*args))
    made = {out: m for m, (_, _, out) in enumerate(group.steps)}
    targets = _targets(group)
    params = [f"i{j}" for j in range(len(group.inputs))] + \
        [t for t in targets if t.startswith("o")]
    nd = len(group.shape)
    lines = [f"def kernel({', '.join(params)}):"]
    for d in range(nd):
        lines.append("    " * (d + 1) + f"for a{d} in range({targets[0]}.shape[{d}]):")
    pad = "    " * (nd + 1)
    for j, index in enumerate(indices(group, slots)):
        lines.append(pad + f"x{j} = i{j}[{index}]")
    lines += [pad + b for b in body]
    index = ", ".join(f"a{d}" for d in range(nd)) or "()"
    for target, out in zip(targets, group.outputs):
        lines.append(pad + f"{target}[{index}] = t{made[out]}")
    return "\n".join(lines)


def _targets(group):
    """The parameter each output is stored through: ``o<j>`` for a new array (numbered in
    order), or ``i<k>``, the input whose array it is written into."""
    targets, fresh = [], 0
    for out in group.outputs:
        if out in group.into:
            targets.append(f"i{group.inputs.index(group.into[out])}")
        else:
            targets.append(f"o{fresh}")
            fresh += 1
    return targets


def _literal(c):
    if c != c:
        return "np.nan"
    if c in (float("inf"), float("-inf")):
        return "np.inf" if c > 0 else "-np.inf"
    return repr(c)


def kernel(text):
    """The compiled kernel of ``text`` (compiled on first use, then kept)."""
    found = _KERNELS.get(text)
    if found is None:
        import math
        names = {"math": math, "np": np}
        exec(compile(text, "<mg.compile fused kernel>", "exec"), names)
        found = _KERNELS[text] = numba.njit(names["kernel"], error_model="numpy",
                                            fastmath=False)
    return found


def line(g, group, slots, names):
    """The replay source that runs group number ``g``: the outputs' arrays (new, or a dying
    input's), then one call of its kernel. Fills ``names`` with what the line refers to."""
    names[f"F{g}"] = kernel(source(group, slots))
    made = []
    for out in group.outputs:
        if out in group.into:
            made.append(f"v{out} = v{group.into[out]}")
        else:
            made.append(f"v{out} = np.empty({tuple(group.shape)}, np.{group.dtype})")
    args = [f"v{s}" for s in group.inputs] + \
        [f"v{s}" for s in group.outputs if s not in group.into]
    return "; ".join(made + [f"F{g}({', '.join(args)})"])


def warm(program_groups, slots):
    """Compile every group's kernel for its argument types now (at build, not first replay)."""
    for group in program_groups:
        args = [np.zeros(slots[s][0], group.dtype) for s in group.inputs] + \
            [np.zeros(group.shape, group.dtype) for s in group.outputs if s not in group.into]
        kernel(source(group, slots))(*args)
