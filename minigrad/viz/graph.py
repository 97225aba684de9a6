"""The graph as recorded: Function nodes, the tensors they read, and the edges between them.

``build(roots)`` walks the nodes reachable from ``roots`` (in the order the backward pass
runs them) into a small model that knows nothing about pictures: one ``Item`` per op node,
leaf tensor, parameter, output, retained intermediate and identifiable constant, and one
``Edge`` per input of each op. ``modules.py`` and ``view.py`` decide what is drawn;
``dot.py`` draws it.
"""
from dataclasses import dataclass, field

import numpy as np

from .. import backend
from ..autograd import engine
from ..autograd.graph import AccumulateGrad, Packed

SMALL = 8  # tensors of at most this many elements can show their values

_SCALARS = (bool, int, float, complex)


@dataclass(eq=False)
class Item:
    """One thing in the graph. ``kind`` is "op" (``node`` is the Function node), or a tensor:
    "param", "leaf" (an input that requires grad), "output" (a root), "tensor" (an
    intermediate that called retain_grad), "const" (an input that needs no gradient)."""
    key: tuple
    kind: str
    node: object = None
    tensor: object = None
    name: str = ""
    consts: dict = field(default_factory=dict)  # op: input position -> constant or None


@dataclass(eq=False)
class Edge:
    """Input ``pos`` of ``dst`` (an op, or an output tensor when pos is None) comes from
    ``src``; ``shape`` is the shape of the tensor flowing along it."""
    src: tuple
    dst: tuple
    pos: object
    shape: tuple


class Graph:
    """Items in the order they were found, edges, and the op nodes in execution order."""

    def __init__(self):
        self.items = {}
        self.edges = []
        self.ops = []

    def add(self, item):
        return self.items.setdefault(item.key, item)

    def consumers(self):
        """key -> the keys of the items that read it."""
        out = {}
        for e in self.edges:
            out.setdefault(e.src, []).append(e.dst)
        return out


def as_named(roots):
    """``roots`` (a Tensor, a list of them, or a dict name -> Tensor) as (name, Tensor)."""
    if isinstance(roots, dict):
        return [(str(k), t) for k, t in roots.items()]
    if not isinstance(roots, (list, tuple)):
        roots = [roots]
    return [("", t) for t in roots]


def build(roots):
    """The graph of everything ``roots`` were computed from (see the module docstring)."""
    g = Graph()
    named = as_named(roots)
    nodes = [t.grad_fn for _, t in named if t.grad_fn is not None]
    g.ops = [n for n in engine.topological_order(nodes) if not isinstance(n, AccumulateGrad)]
    produced = {}  # (node, output index) -> key of the tensor item that shows that output
    for name, t in named:
        if t.grad_fn is None:
            g.add(_tensor_item(t, name))
            continue
        item = g.add(Item(("t", id(t)), "output", tensor=t, name=name))
        produced[(t.grad_fn, t._out_idx)] = item.key
    for node in g.ops:
        for i, ref in (node._retained or {}).items():
            t = ref()
            if t is not None and (node, i) not in produced:
                produced[(node, i)] = g.add(Item(("t", id(t)), "tensor", tensor=t)).key
    for node in g.ops:
        g.add(Item(("op", node), "op", node=node, consts=_constants(node)))
    for (node, i), key in produced.items():
        g.edges.append(Edge(("op", node), key, None, node.output_meta[i][0]))
    for node in reversed(g.ops):  # producers first, so items appear in forward order
        dst = ("op", node)
        for pos, edge in enumerate(node.edges):
            if not edge:
                const = g.items[dst].consts.get(pos)
                if drawn_constant(const):
                    src = g.add(Item(("t", id(const)), "const", tensor=const)).key
                    g.edges.append(Edge(src, dst, pos, tuple(const.shape)))
                continue
            target, idx = edge
            shape = target.output_meta[idx][0]
            if isinstance(target, AccumulateGrad):
                src = g.add(_tensor_item(target.variable)).key
            else:
                src = produced.get((target, idx), ("op", target))
            g.edges.append(Edge(src, dst, pos, tuple(shape)))
    first_reader = {}
    for e in g.edges:
        if e.dst[0] == "op":
            first_reader[e.src] = min(first_reader.get(e.src, e.dst[1].seq), e.dst[1].seq)
    for key in first_reader:  # a root that other ops read is an intermediate, not an output
        if g.items[key].kind == "output":
            g.items[key].kind = "tensor"
    g.items = dict(sorted(g.items.items(), key=lambda kv: _rank(kv[1], first_reader)))
    return g


def drawn_constant(const):
    """Whether a constant input gets a node of its own: a tensor of more than one element
    (a scalar is written on its op instead)."""
    return _is_tensor(const) and const.array.size > 1


def _rank(item, first_reader):
    """Where an item comes in the forward pass: an op at its recording number, an output
    just after its op, a leaf just before its first reader (so the DOT text reads in order)."""
    if item.node is not None:
        return item.node.seq
    if item.tensor is not None and item.tensor.grad_fn is not None:
        return item.tensor.grad_fn.seq + 0.5
    return first_reader.get(item.key, -1) - 0.5


def _tensor_item(t, name=""):
    if not t.requires_grad:
        return Item(("t", id(t)), "const", tensor=t, name=name)
    kind = "param" if _is_parameter(t) else "leaf"
    return Item(("t", id(t)), kind, tensor=t, name=name)


def _is_tensor(x):
    return hasattr(x, "grad_fn") and hasattr(x, "data")


def _is_parameter(t):
    # nn.Parameter lives in the nn package, which depends on minigrad: name it, not import it
    return any(c.__name__ == "Parameter" for c in type(t).__mro__)


def _constants(node):
    """Input position -> the constant at it (a Tensor that needs no gradient, or a Python
    scalar), for the inputs that carry no gradient. The engine records no edge for them, so
    they are recognised among the tensors the node saved, matched in order; None where that
    is not possible (nothing saved, or the backward pass already freed it)."""
    slots = [i for i, e in enumerate(node.edges) if not e]
    if not slots:
        return {}
    found = []
    for s in node.saved or ():
        if s.tensor is not None and not s.tensor.requires_grad:
            if not any(s.tensor is f for f in found):
                found.append(s.tensor)
        elif s.tensor is None and s.output is None and isinstance(s.array, _SCALARS):
            found.append(s.array)
    if len(found) != len(slots):
        return dict.fromkeys(slots)
    return dict(zip(slots, found))


# --- what the labels show ------------------------------------------------------------------

def op_name(node):
    """``softmax``, ``matmul``, ``log_softmax``: the class name in snake case (the function
    name for NonDiff, which wraps one)."""
    cls = node.op.__name__
    if cls == "NonDiff":
        return str(node.params.get("fn", "nondiff"))
    special = {"MatMul": "matmul", "GetItem": "getitem", "LogSumExp": "logsumexp",
               "IndexAdd": "index_add", "ToDevice": "to", "Cast": "to",
               # the ops named for PyTorch's graph: as the call that made them
               "SumDim": "sum", "MeanAll": "mean", "MatrixTranspose": "t", "Select": "getitem",
               "Slice": "getitem", "NewAxis": "getitem", "Alias": "getitem",
               "SqueezeDim": "squeeze", "SqueezeDims": "squeeze", "TensorPow": "pow",
               "ScalarPow": "pow", "SplitWithSizes": "split", "ReshapeAlias": "reshape",
               "UnsafeView": "reshape", "SqueezeDimInPlace": "squeeze", "RoundedDiv": "div",
               "Dot": "matmul", "Mv": "matmul"}
    if cls in special:
        return special[cls]
    out = cls[:1].lower()
    for prev, c in zip(cls, cls[1:]):
        out += ("_" + c.lower()) if c.isupper() and not prev.isupper() else c.lower()
    return out


def op_call(node):
    """``softmax(dim=-1)``: the op's name and its keyword arguments."""
    params = {k: v for k, v in node.params.items()
              if not (node.op.__name__ == "NonDiff" and k == "fn")}
    args = ", ".join(f"{k}={format_arg(v)}" for k, v in params.items())
    return f"{op_name(node)}({args})" if args else op_name(node)


def format_arg(v, limit=28):
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, slice):
        parts = ["" if p is None else str(p) for p in (v.start, v.stop, v.step)]
        return ":".join(parts[:2] if v.step is None else parts)
    if isinstance(v, np.dtype) or isinstance(v, type):
        return getattr(v, "name", getattr(v, "__name__", str(v)))
    if hasattr(v, "shape") and hasattr(v, "dtype"):  # an array (an index)
        if v.size <= 4:
            return str(backend.to_host(v).tolist())
        return f"array{tuple(v.shape)}"
    if isinstance(v, tuple):
        text = "(" + ", ".join(format_arg(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    elif v is Ellipsis:
        text = "..."
    else:
        text = str(v)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def doc_rule(node):
    """The first paragraph of the op's docstring: its forward formula and gradient rule."""
    doc = type(node).__doc__ or ""
    para = doc.strip().split("\n\n")[0]
    return " ".join(line.strip() for line in para.splitlines())


def grad_rule(node):
    """The gradient half of ``doc_rule``, e.g. ``dx = grad * out`` (the style guide's
    docstrings put ";  " between the forward formula and the gradient)."""
    rule = doc_rule(node)
    for sep in (";  ", ";"):
        if sep in rule:
            return rule.split(sep, 1)[1].strip()
    return rule


def shape_text(shape):
    """``(2, 3)``, ``(3,)``, and ``scalar`` for the shape ``()``."""
    if len(shape) == 0:
        return "scalar"
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def device_name(xp):
    return "cpu" if xp is np else "cuda"


def values_text(arr):
    """The values of a tiny array (or a Python scalar), for a label: ``[0.5, -1.25]``."""
    if isinstance(arr, _SCALARS):
        return str(arr) if isinstance(arr, bool) else format_arg(arr)
    values = np.asarray(backend.to_host(arr))
    return _nested(values.tolist())


def _nested(v):
    if isinstance(v, list):
        return "[" + ", ".join(_nested(x) for x in v) + "]"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def saved_output(node, i):
    """Output i's array if the node saved it (so a label can show it), else None."""
    for s in node.saved or ():
        if s.output == i:
            return s.array
    return None


@dataclass
class GradStats:
    """What a label says about one gradient."""
    size: int
    norm: float       # over the finite elements
    max_abs: float
    rms: float
    nonfinite: int    # NaN and inf elements
    values: object    # the host array when it is tiny, else None


def grad_stats(g):
    if g is None:
        return None
    a = np.asarray(backend.to_host(g.array), dtype=np.float64)
    finite = np.isfinite(a)
    ok = a[finite]
    norm = float(np.sqrt((ok * ok).sum())) if ok.size else 0.0
    return GradStats(int(a.size), norm, float(np.abs(ok).max()) if ok.size else 0.0,
                     norm / np.sqrt(max(ok.size, 1)), int(a.size - finite.sum()),
                     a if a.size <= SMALL else None)


def saved_records(node):
    """(what, array, nbytes) for each tensor the node holds for backward: ``what`` is "in0"
    (its first input), "out", "const" or "tmp" (an array computed in forward); "packed"
    for one a saved_tensors_hooks pack hook took, "recomputed" for one a checkpoint will
    compute again in backward (nbytes 0: neither is held by the node)."""
    out = []
    named = set()  # edges already matched: for w * w the second saved w is in1
    for s in node.saved or ():
        source, arr = s.tensor, s.array
        if arr is None:  # an optional input not given (a bias, class weights)
            continue
        if source is not None:
            what = "const"
            for i, e in enumerate(node.edges):
                if i not in named and e and _feeds(e, source):
                    what = f"in{i}"
                    named.add(i)
                    break
        elif s.output is not None:
            what = "out" if len(node.output_meta) == 1 else f"out{s.output}"
        elif type(arr) is Packed:  # kept by a saved_tensors_hooks pack hook
            what = "recomputed" if node.checkpoint is not None else "packed"
        else:
            what = "const" if isinstance(arr, _SCALARS) else "tmp"
        out.append((what, arr, getattr(arr, "nbytes", 0)))
    return out


def held_bytes(nodes):
    """The memory the saved tensors of ``nodes`` keep alive, with the inputs of the
    checkpointed regions they were recorded in: each buffer counted once (a view counts
    as the array it views). Returns (bytes, number of buffers, bytes of them
    that belong to leaf tensors, which exist anyway). The buffers are told apart by
    identity, so each is held here until the sums are made (an id is unique only while
    its object lives)."""
    seen, leaves = {}, {}
    regions = {n.checkpoint for n in nodes if n.checkpoint is not None}
    for region in regions:  # a checkpoint keeps its inputs instead of its ops' tensors
        for t in region.inputs_alive():
            base = _base(t.array)
            seen[id(base)] = base
            if t.grad_fn is None and t.requires_grad:
                leaves[id(base)] = base
    for node in nodes:
        for e in node.edges:
            if e and isinstance(e[0], AccumulateGrad) and e[0].variable is not None:
                base = _base(e[0].variable.array)
                leaves[id(base)] = base
        for s in node.saved or ():
            base = _base(s.array)
            if hasattr(base, "nbytes"):
                seen[id(base)] = base
    total = sum(b.nbytes for b in seen.values())
    return total, len(seen), sum(b.nbytes for i, b in seen.items() if i in leaves)


def _feeds(edge, t):
    """Whether ``edge`` carries the gradient of tensor ``t``."""
    node, index = edge
    if isinstance(node, AccumulateGrad):
        return node.variable is t
    return node is t.grad_fn and index == t._out_idx


def _base(arr):
    while getattr(arr, "base", None) is not None:
        arr = arr.base
    return arr


def nbytes_text(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
