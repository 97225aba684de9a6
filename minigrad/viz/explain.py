"""``explain_backward``: run a backward pass and say what each step of it did.

The engine calls a tracer after every node's backward (``run_backward(on_node=...)``), in
the order it runs them. Each call becomes one ``Step``: the op, the rule it applies (its
docstring), the shapes of the gradients in and out, where a broadcast was summed away (a
gradient returned with more elements than its input has), and where a gradient joined
others already sent to the same tensor (a tensor used twice gets the sum of both uses).
The steps come back as a ``BackwardSteps`` list, which prints as a table (and shows as one
in Jupyter) and says whether the backward pass consumed the graph.
"""
import os
import shutil
import textwrap
from dataclasses import dataclass, field

from ..autograd import engine
from ..autograd.graph import AccumulateGrad
from .dot import to_digraph
from .render import INSTALL_HELP, GraphvizNotFound, render
from .graph import doc_rule, op_call, shape_text
from .tables import html_table, text_table
from .view import make_view


@dataclass
class Step:
    """One node's backward, as the engine ran it."""
    step: int                  # 1, 2, ... in execution order
    node: object               # the Function node (``t.grad_fn``)
    op: str                    # its name and arguments, ``softmax(dim=-1)``
    module: str                # the module path that recorded it ("" outside modules)
    rule: str                  # its forward formula and gradient rule (the docstring)
    grad_out: list             # shape of the gradient arriving for each output
    grad_in: list              # shape of the gradient returned for each input (None: none)
    uses: list                 # per output: how many gradients were summed into it
    broadcast: list = field(default_factory=list)    # (input, gradient shape, input shape)
    accumulates: list = field(default_factory=list)  # (input, tensor name, k-th use)

    @property
    def notes(self):
        out = []
        for i, n in enumerate(self.uses):
            if n > 1:
                out.append(f"grad{'' if len(self.uses) == 1 else i} = sum of {n} uses")
        for i, got, shape in self.broadcast:
            out.append(f"in{i}: {shape_text(got)} summed to {shape_text(shape)} (broadcast)")
        for i, name, k in self.accumulates:
            out.append(f"in{i}: added to {name}.grad ({_nth(k)} use)")
        return out


class BackwardSteps(list):
    """The ``Step`` of each node the backward pass ran, in its order (a list), with
    ``retain_graph`` as it ran. ``print(steps)`` shows them as a table, each row followed by
    the rule the node applied, and a last line that says whether the graph was consumed;
    Jupyter shows the same as an HTML table."""

    def __init__(self, steps, retain_graph):
        super().__init__(steps)
        self.retain_graph = retain_graph

    @property
    def consumed(self):
        """Whether the backward pass freed the graph's saved arrays (``retain_graph`` was
        False): a second backward through it raises."""
        return not self.retain_graph

    def graph_status(self):
        if self.consumed:
            return ("The graph was consumed: each node freed its saved arrays once it had "
                    "run, so a second backward through it raises (explain_backward(..., "
                    "retain_graph=True) keeps them).")
        return ("The graph was kept (retain_graph=True): its nodes still hold their saved "
                "arrays, and backward can run through it again.")

    def __str__(self):
        return "\n".join([format_table(self)] + textwrap.wrap(self.graph_status(), RULE_LINE))

    __repr__ = __str__

    def _repr_html_(self):
        header, rows, rules = _table(self)
        return html_table(header, rows, footer=self.graph_status(),
                          notes={k: [r] for k, r in enumerate(rules)})


def explain_backward(loss, *, model=None, frames=None, retain_graph=False, frame_format="svg"):
    """Run ``loss.backward()`` (gradients accumulate into ``.grad`` as usual) and return
    the ``Step`` of each node the engine ran, in its order, as ``BackwardSteps``: a list
    that prints as a table (``print(steps)``; in Jupyter it shows as one) and says whether
    the graph was consumed.

    As with ``backward``, the pass frees each node's saved arrays once it has run, unless
    ``retain_graph=True``. ``model`` names modules and parameters by their state-dict
    paths. With ``frames`` (a directory) one picture per step is written there,
    ``step_001.svg``, ... (or ``frame_format="png"``), showing the backward graph with the
    running node highlighted, the finished ones greyed and their saved tensors freed
    (unless ``retain_graph``). Frames need Graphviz's ``dot``.
    """
    if loss.grad_fn is None:
        raise RuntimeError("explain_backward: the tensor has no grad_fn (it does not depend "
                           "on anything that requires grad), so there is no backward pass")
    if frames is not None and shutil.which("dot") is None:
        raise GraphvizNotFound(INSTALL_HELP)  # before the gradients are touched
    view = make_view(loss, model=model, backward=True, collapse_repeats=False)
    received = {(loss.grad_fn, loss._out_idx): 1}  # gradients each tensor got so far
    steps, pictures, done = [], [], set()

    def on_node(node, grads_out, grads_in):
        steps.append(_record(len(steps) + 1, node, grads_out, grads_in, received, view.tree))
        if frames is not None:  # drawn now: what earlier steps freed shows as freed
            caption = _frame_caption(steps[-1], len(view.graph.ops))
            pictures.append(to_digraph(view, backward=True, frame=(node, done, caption)).source)
        done.add(node)

    seed = loss.new_ones(loss.shape)
    engine.run_backward([loss], [seed], retain_graph=retain_graph, on_node=on_node)
    if frames is not None:
        os.makedirs(frames, exist_ok=True)
        for k, source in enumerate(pictures, 1):
            render(source, os.path.join(frames, f"step_{k:03d}"), frame_format)
    return BackwardSteps(steps, retain_graph)


def _record(k, node, grads_out, grads_in, received, tree):
    uses = [received.get((node, i), 0) for i in range(len(grads_out))]
    record = Step(k, node, op_call(node), tree.path(node.scope) or "", doc_rule(node),
                  [tuple(g.shape) for g in grads_out],
                  [None if g is None else tuple(g.shape) for g in grads_in], uses)
    for i, (edge, g) in enumerate(zip(node.edges, grads_in)):
        if not edge or g is None:
            continue
        target, index = edge
        shape = tuple(target.output_meta[index][0])
        if tuple(g.shape) != shape:
            record.broadcast.append((i, tuple(g.shape), shape))
        key = (target, index)
        received[key] = received.get(key, 0) + 1
        if isinstance(target, AccumulateGrad) and received[key] > 1:
            leaf = target.variable
            record.accumulates.append((i, tree.name_of.get(id(leaf), "leaf"), received[key]))
    return record


def _frame_caption(step, total):
    grads = ", ".join(shape_text(s) for s in step.grad_out)
    return "; ".join([f"step {step.step} of {total}: {step.node.name()}, "
                      f"grad in {grads}"] + step.notes)


def format_table(steps):
    """The steps as a text table, each followed by the rule it applied (wrapped between
    words, never cut)."""
    header, rows, rules = _table(steps)
    width = len(header[0]) + 2
    notes = {k: textwrap.wrap("rule: " + rule, max(40, RULE_LINE - width),
                              subsequent_indent="      ", break_long_words=False,
                              break_on_hyphens=False) for k, rule in enumerate(rules)}
    return text_table(header, rows, right={0}, notes=notes)


RULE_LINE = 92  # characters per line of the rules under the table's rows


def _table(steps):
    """(header, rows, rules): the table's cells (the module column only when some step
    ran inside a module) and each row's rule."""
    with_module = any(s.module for s in steps)
    header = ("step", "backward of") + (("module",) if with_module else ()) + (
        "grad in", "grads out", "notes")
    rows = []
    for s in steps:
        outs = ", ".join("-" if g is None else shape_text(g) for g in s.grad_in)
        cells = (str(s.step), s.op) + ((s.module or "-",) if with_module else ()) + (
            ", ".join(shape_text(g) for g in s.grad_out), outs, "; ".join(s.notes))
        rows.append(cells)
    return header, rows, [s.rule for s in steps]


def _nth(k):
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(k, f"{k}th")
