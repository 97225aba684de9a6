"""``graph_memory``: how much memory a graph holds for its backward pass, and which node
holds it.

Every node keeps the arrays its backward needs (``node.saved``): ``tanh`` its output,
``matmul`` both inputs, ``add`` nothing. They live until backward has used them (unless
``retain_graph=True``), so between forward and backward they are the graph's memory.

    mem = mg.viz.graph_memory(loss, model=model)
    mem.total            # bytes, each buffer once (a view counts as the array it views)
    mem.rows             # one GraphMemoryRow per node, in the order backward runs them
    print(mem)           # the nodes that hold memory, as a table (a table in Jupyter too)
"""
import html
import textwrap
from dataclasses import dataclass

from ..autograd import engine
from ..autograd.graph import AccumulateGrad
from .graph import as_named, held_bytes, nbytes_text, op_call, saved_records, shape_text
from .modules import ModuleTree
from .tables import html_table, text_table


@dataclass(frozen=True)
class SavedArray:
    """One array a node keeps: ``what`` is "in0" (its first input), "out" (its output),
    "const" or "tmp" (an array computed in forward)."""
    what: str
    shape: tuple
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class GraphMemoryRow:
    """One node of the graph and what it keeps for backward."""
    step: int          # 1, 2, ...: when backward runs it
    node: object       # the Function node (``t.grad_fn``)
    op: str            # its name and arguments, ``softmax(dim=-1)``
    module: str        # the module path that recorded it ("" outside modules)
    saved: tuple       # SavedArray per array it keeps (Python numbers are not listed)
    nbytes: int        # their bytes, each counted in full
    freed: bool        # backward already freed what it saved


@dataclass(frozen=True)
class GraphMemory:
    """The memory a graph holds for backward (see ``graph_memory``).

    ``total`` counts each buffer once, where two nodes keep the same array (or views of
    one), so it can be less than the sum of the rows' ``nbytes``. ``leaf_bytes`` is the
    part of it that is the leaves' own data (parameters, inputs that require grad), which
    exists with or without the graph. ``checkpoint_bytes`` is the part of it that only
    checkpointed regions keep (their inputs), which no row lists: the regions' own nodes
    keep nothing ("recomputed")."""
    total: int
    buffers: int
    leaf_bytes: int
    rows: tuple
    checkpoint_bytes: int = 0

    @property
    def freed(self):
        """Whether backward freed the graph (every node that saved something let it go)."""
        return any(r.freed for r in self.rows) and not any(r.saved for r in self.rows)

    def summary(self):
        if self.freed:
            return ("The graph holds nothing for backward: backward() freed what its nodes "
                    "saved (pass retain_graph=True to keep it).")
        text = (f"The graph holds {nbytes_text(self.total)} for backward in {self.buffers} "
                f"buffers ({nbytes_text(self.leaf_bytes)} of it the leaves' own data: "
                "parameters and inputs that require grad).")
        if self.checkpoint_bytes:
            text += (f" Checkpointed regions keep {nbytes_text(self.checkpoint_bytes)} of it "
                     "(their inputs); their ops' tensors are recomputed in backward.")
        return text

    def _table(self):
        holding = [r for r in self.rows if r.nbytes]
        header = ("step", "node", "module", "bytes", "saved")
        rows = [(str(r.step), r.node.name(), r.module or "-", nbytes_text(r.nbytes),
                 ", ".join(f"{a.what} {shape_text(a.shape)}" for a in r.saved))
                for r in holding]
        others = len(self.rows) - len(holding)
        footer = (f"{others} of the {len(self.rows)} nodes hold nothing." if holding else "")
        return header, rows, footer

    def __str__(self):
        header, rows, footer = self._table()
        lines = textwrap.wrap(self.summary(), 92)
        if rows:
            lines += [text_table(header, rows, right={0, 3}), footer]
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self):
        header, rows, footer = self._table()
        if not rows:
            return f"<p>{html.escape(self.summary())}</p>"
        return html_table(header, rows, caption=self.summary(), footer=footer)


def graph_memory(roots, *, model=None):
    """The memory the graph behind ``roots`` (a tensor, a list of them, or a dict name ->
    tensor) holds for backward: a ``GraphMemory`` with ``total`` bytes (each buffer once),
    ``buffers``, ``leaf_bytes`` and one ``GraphMemoryRow`` per node in the order backward
    runs them. ``model`` names the modules by their paths in it. Call it before
    ``backward()``, which frees what it reports (unless ``retain_graph=True``)."""
    tensors = [t for _, t in as_named(roots)]
    order = engine.topological_order([t.grad_fn for t in tensors if t.grad_fn is not None])
    nodes = [n for n in order if not isinstance(n, AccumulateGrad)]
    tree = ModuleTree(model, [n.scope for n in nodes])
    rows = tuple(_row(k, node, tree) for k, node in enumerate(nodes, 1))
    total, buffers, leaf_bytes = held_bytes(nodes)
    others = held_bytes([n for n in nodes if n.checkpoint is None])[0]
    return GraphMemory(total, buffers, leaf_bytes, rows, total - others)


def _row(step, node, tree):
    saved = tuple(SavedArray(what, tuple(arr.shape), str(arr.dtype), int(nbytes))
                  for what, arr, nbytes in saved_records(node) if hasattr(arr, "shape"))
    return GraphMemoryRow(step, node, op_call(node), tree.path(node.scope) or "", saved,
                          sum(a.nbytes for a in saved), bool(node.released))
