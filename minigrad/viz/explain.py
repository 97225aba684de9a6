"""``explain_backward``: run a backward pass and say what each step of it did.

The engine calls a tracer after every node's backward (``run_backward(on_node=...)``), in
the order it runs them. Each call becomes one ``Step``: the op, the rule it applies (its
docstring), the shapes of the gradients in and out, where a broadcast was summed away (a
gradient returned with more elements than its input has), and where a gradient joined
others already sent to the same tensor (a tensor used twice gets the sum of both uses).
"""
import os
import shutil
from dataclasses import dataclass, field

from ..autograd import engine
from ..autograd.graph import AccumulateGrad
from .dot import to_digraph
from .render import INSTALL_HELP, GraphvizNotFound, render
from .graph import doc_rule, op_call, shape_text
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


def explain_backward(loss, *, model=None, frames=None, retain_graph=False, frame_format="svg"):
    """Run ``loss.backward()`` (gradients accumulate into ``.grad`` as usual) and return one
    ``Step`` per node the engine ran, in its order; also print them as a table.

    ``model`` names modules and parameters by their state-dict paths. With ``frames`` (a
    directory) one picture per step is written there, ``step_001.svg``, ... (or
    ``frame_format="png"``), showing the backward graph with the running node highlighted,
    the finished ones greyed and their saved tensors freed (unless ``retain_graph``).
    Frames need Graphviz's ``dot``.
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
    print(format_table(steps))
    if frames is not None:
        os.makedirs(frames, exist_ok=True)
        for k, source in enumerate(pictures, 1):
            render(source, os.path.join(frames, f"step_{k:03d}"), frame_format)
    return steps


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
    """The steps as a text table, each followed by the rule it applied."""
    rows = [("step", "backward of", "module", "grad in", "grads out", "notes")]
    for s in steps:
        outs = ", ".join("-" if g is None else shape_text(g) for g in s.grad_in)
        rows.append((str(s.step), s.op, s.module or "-",
                     ", ".join(shape_text(g) for g in s.grad_out), outs, "; ".join(s.notes)))
    columns = [0, 1, 2, 3, 4] if any(s.module for s in steps) else [0, 1, 3, 4]
    widths = {c: min(max(len(r[c]) for r in rows), cap)
              for c, cap in zip(range(5), (5, 36, 40, 18, 30))}
    lines = []
    for n, row in enumerate(rows):
        cells = [row[0].rjust(widths[0])] + [_fit(row[c], widths[c]) for c in columns[1:]]
        lines.append("  ".join(cells + [row[5]]).rstrip())
        if n:
            lines.append(" " * (widths[0] + 2) + "rule: " + steps[n - 1].rule)
    return "\n".join(lines)


def _fit(text, width):
    return (text if len(text) <= width else text[:width - 1] + "…").ljust(width)


def _nth(k):
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(k, f"{k}th")
