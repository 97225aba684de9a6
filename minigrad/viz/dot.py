"""Drawing a ``View`` with Graphviz: labels, styles, colours by gradient, clusters.

Op nodes are grey rounded boxes (name, arguments, output shape); parameters blue boxes,
inputs that require grad yellow ellipses, constants dashed boxes, outputs green double
boxes, and a module drawn as one node an amber 3-D box. Values (``show_values``) are
written on tensor nodes only: an op node says what it computes, the tensor it made carries
the numbers (name an intermediate among the roots, or call ``retain_grad()``, to see it).
With ``show_grad`` the tensors (and collapsed modules) are filled by the size of their
gradient's norm (the figure their labels print) on a log scale fitted to the picture's own
range (``colours.LogScale``: the larger, the darker; legend underneath), an exact zero
gradient in light grey ("zero"), NaN/inf in red. With a
``profile`` the ops (and collapsed modules) are filled instead by what they cost, time or
bytes, on the same kind of scale, each with its figure.

A checkpointed region (``minigrad.utils.checkpoint``) is a cluster with a dashed violet
border, "checkpoint: recomputed in backward", which names the inputs it keeps for
backward: its ops' own saved tensors are recomputed (their nodes say so when drawn with
``backward=True``). A region op drawn in a module that also runs ops outside the region
gets the same dashed violet border on its own node. Nested checkpoints are nested
clusters: the inner region's cluster inside the outer one's.
"""
import html
import textwrap

import numpy as np

from .. import dtypes
from .colours import NONFINITE, ZERO, LogScale, contrast, ink, legend_row
from .graph import (SMALL, GradStats, device_name, doc_rule, drawn_constant, grad_rule,
                    grad_stats, held_bytes, nbytes_text, op_call, saved_records, shape_text,
                    values_text)
from .modules import repeat_name, run_members
from .render import new_digraph

_KIND_STYLE = {
    "op": dict(shape="box", style="rounded,filled", fillcolor="#eef1f5", color="#8a94a6"),
    "module": dict(shape="box3d", style="filled", fillcolor="#fff1cc", color="#a07d1c"),
    "param": dict(shape="box", style="filled", fillcolor="#d6e9ff", color="#3d6fb6"),
    "leaf": dict(shape="ellipse", style="filled", fillcolor="#fff7b8", color="#a08a00"),
    "tensor": dict(shape="ellipse", style="filled", fillcolor="#ffffff", color="#666666"),
    "const": dict(shape="box", style="dashed,filled", fillcolor="#f7f7f7", color="#999999",
                  fontcolor="#555555"),
    "output": dict(shape="box", style="filled,bold", fillcolor="#d4f5d4", color="#2e7d32",
                   peripheries="2"),
}
RULE_WIDTH = 48  # characters per line of a derivative rule on a node
_GREY = "#444444"  # the small print
_ACTIVE = dict(fillcolor="#ffe066", color="#c79100", penwidth="3")
_DONE = dict(fillcolor="#e4e4e4", fontcolor="#888888", color="#bbbbbb")


COSTS = {"time": ("time_s", "time (forward + backward, log scale)"),
         "bytes": ("bytes", "output bytes (log scale)")}


def to_digraph(view, show_values=False, show_grad=False, backward=False, rankdir="TB",
               frame=None, profile=None, cost="time"):
    """The Digraph of ``view``. ``frame`` (for explain_backward) is (active node, set of
    nodes already run, caption): the active node is highlighted, finished ones greyed.
    ``profile`` (anything with ``node_costs()``, as ``mg.profiler.profile``) colours the
    ops by ``cost``, "time" or "bytes"."""
    dot = new_digraph(
        graph_attr=dict(rankdir=rankdir, fontname="Helvetica", fontsize="11", nodesep="0.25",
                        ranksep="0.35", labelloc="t", labeljust="l"),
        node_attr=dict(fontname="Helvetica", fontsize="11", margin="0.12,0.05"),
        edge_attr=dict(color="#666666", arrowsize="0.7"))
    steps = {node: i + 1 for i, node in enumerate(view.graph.ops)}
    ids = {key: f"n{i}" for i, key in enumerate(view.nodes)}
    ctx = dict(view=view, steps=steps, show_values=show_values, show_grad=show_grad,
               backward=backward, frame=frame, costs=None, profile=profile)
    if profile is not None:
        ctx["costs"] = _costs(view, profile, cost)
        ctx["cost"] = cost
        ctx["cost_scale"] = LogScale.fit(ctx["costs"].values())
    if show_grad:
        ctx["grads"] = {key: _grads(d, ctx) for key, d in view.nodes.items()}
        ctx["scale"] = LogScale.fit(s.norm for stats in ctx["grads"].values()
                                    for s in stats if s is not None and not s.nonfinite)
    by_cluster = {}
    for key, d in view.nodes.items():
        by_cluster.setdefault(d.cluster, []).append(key)
    for key in by_cluster.get(None, []):
        dot.node(ids[key], **_node_attrs(view.nodes[key], ctx))
    for path, (parent, _) in view.clusters.items():
        if parent is None or parent not in view.clusters:
            dot.subgraph(_cluster(path, view, by_cluster, ids, ctx))
    for a, b in view.edges:
        attrs = _edge_attrs(view.nodes[a], view.nodes[b], ctx)
        if backward:  # gradients flow from the consumer back to what it read
            dot.edge(ids[b], ids[a], **attrs)
        else:
            dot.edge(ids[a], ids[b], **attrs)
    caption = _caption(view, ctx)
    if caption:
        dot.attr(label=caption)
    return dot


REGION_COLOUR = "#7b3fa0"  # the border of a checkpointed region


def _cluster(path, view, by_cluster, ids, ctx, level=0):
    parent, repeat = view.clusters[path]
    if path in view.regions:
        return _region_cluster(path, view, by_cluster, ids, ctx, level)
    fill = ["#fafafa", "#f2f5fa", "#f7f4ee", "#f1f7f1"][level % 4]
    run = repeat is not None and repeat[0] == path  # the block drawn once for N
    sub = new_digraph(name=f"cluster_{path}")
    sub.attr(label="<" + _html(view.tree.label(path, repeat), bold=True) + ">",
             style="rounded,filled",
             fillcolor=fill, color="#a07d1c" if run else "#9aa5b1",
             penwidth="2.5" if run else "1", fontsize="10", labeljust="l")
    if _under_region(parent, view):  # (not the region's violet title)
        sub.attr(fontcolor="black")
    for key in by_cluster.get(path, []):
        sub.node(ids[key], **_node_attrs(view.nodes[key], ctx))
    for child, (p, _) in view.clusters.items():
        if p == path:
            sub.subgraph(_cluster(child, view, by_cluster, ids, ctx, level + 1))
    return sub


def _region_cluster(key, view, by_cluster, ids, ctx, level):
    """A checkpointed region: dashed, with what it keeps (its inputs) under its title."""
    region = view.regions[key]
    sub = new_digraph(name=f"cluster_checkpoint_{key[1]}")
    kept = " + ".join(shape_text(s) for s, _, _ in region.inputs) or "nothing"
    total = sum(n for _, _, n in region.inputs)
    n = view.region_runs.get(key, 1)
    if n > 1:  # the blocks of a repeated run, drawn once: each is a region of its own
        lines = [_html(f"checkpoint: {region.name} ×{n}, each recomputed in backward",
                       bold=True),
                 _small(f"each keeps its inputs {kept} ({nbytes_text(total)}); their ops' "
                        "activations are not kept")]
    else:
        lines = [_html(f"checkpoint: {region.name}, recomputed in backward", bold=True),
                 _small(f"keeps its inputs {kept} ({nbytes_text(total)}); its ops' "
                        "activations are not kept")]
    sub.attr(label="<" + '<BR ALIGN="LEFT"/>'.join(lines) + '<BR ALIGN="LEFT"/>>',
             style="dashed,rounded", color=REGION_COLOUR, penwidth="2", fontsize="10",
             labeljust="l", fontcolor=REGION_COLOUR)
    for k in by_cluster.get(key, []):
        sub.node(ids[k], **_node_attrs(view.nodes[k], ctx))
    for child, (p, _) in view.clusters.items():
        if p == key:
            sub.subgraph(_cluster(child, view, by_cluster, ids, ctx, level + 1))
    return sub


# --- nodes ----------------------------------------------------------------------------------

def _node_attrs(d, ctx):
    attrs = dict(_KIND_STYLE[d.kind])
    lines = (_op_lines if d.kind == "op" else
             _module_lines if d.kind == "module" else _tensor_lines)(d, ctx)
    attrs["label"] = _label(lines)
    if d.kind == "op":
        attrs["tooltip"] = doc_rule(d.items[0].node)
    if d.key in ctx["view"].region_of and not _in_region_cluster(d, ctx["view"]):
        attrs.update(color=REGION_COLOUR, penwidth="2",
                     style=attrs["style"].replace("dashed,", "") + ",dashed")
    if ctx["costs"] is not None and d.key in ctx["costs"]:
        value, scale = ctx["costs"][d.key], ctx["cost_scale"]
        lines.append(_html(_cost_text(value, ctx["cost"]), bold=True))
        attrs["label"] = _label(lines)
        if scale is not None and value > 0:
            _fill(attrs, scale.colour(value))
    if ctx["show_grad"]:
        colour = _worst_colour(ctx["grads"][d.key], ctx["scale"])
        if colour is not None:
            _fill(attrs, colour[0])
            attrs["style"] = attrs["style"].replace("dashed,", "")
            if colour[0] == NONFINITE:
                attrs.update(color="#7a0000", penwidth="3")
    frame = ctx["frame"]
    if frame is not None:
        active, done, _ = frame
        nodes = {i.node for i in d.items if i.node is not None}
        if active in nodes:
            attrs.update(_ACTIVE)
        elif nodes and nodes <= done:
            attrs.update(_DONE)
    return attrs


def _in_region_cluster(d, view):
    """Whether drawn node ``d`` is inside its region's cluster (directly or in a module
    the cluster holds)."""
    return _under_region(d.cluster, view)


def _under_region(c, view):
    """Whether cluster ``c`` is a region's or inside one."""
    while c is not None:
        if c in view.regions:
            return True
        c = view.clusters[c][0] if c in view.clusters else None
    return False


def _label(lines):
    """An HTML-like label of ``lines``, centred. The first line (the bold name) is followed
    by a thin blank line: Graphviz spaces a line by its own font size, and the smaller
    print below would otherwise touch the name's underscores and descenders."""
    gap = '<BR ALIGN="CENTER"/><FONT POINT-SIZE="2"><BR ALIGN="CENTER"/></FONT>'
    rest = '<BR ALIGN="CENTER"/>'.join(lines[1:])
    return "<" + lines[0] + (gap + rest if rest else "") + ">"


def _fill(attrs, fill):
    """Fill a node with ``fill`` and write its text in the ink readable on it; the grey
    small print too, where grey would fall below WCAG's 4.5:1 contrast there."""
    attrs["fillcolor"], attrs["fontcolor"] = fill, ink(fill)
    if contrast(fill, _GREY) < 4.5:
        small = "#eeeeee" if attrs["fontcolor"] == "white" else "#000000"
        attrs["label"] = attrs["label"].replace(_GREY, small)


def _op_lines(d, ctx):
    node = d.items[0].node
    if ctx["backward"]:
        steps = ", ".join(str(k) for k in sorted(ctx["steps"][i.node] for i in d.items))
        lines = [_html(f"{steps}. {node.name()}", bold=True)]
        lines += [_small(line) for line in wrap_rule(grad_rule(node))]
        lines += _saved_lines(node)
        total = held_bytes([i.node for i in d.items])[0]
        if len(d.items) > 1 and total:  # the lines above are block 1's
            lines.append(_small(f"all {len(d.items)} blocks: {nbytes_text(total)} saved"))
        return lines
    if d.chain:  # reshapes in a row, drawn as one node: the last one's shape
        node = d.items[-1].node
        lines = [_html(op_call(node), bold=True, name_only=True) + _html(f" ×{len(d.items)}")]
    else:
        lines = [_html(op_call(node), bold=True, name_only=True)]
    lines.append(_small(_meta_text(node)))
    consts = [_const_text(c) for c in d.items[0].consts.values() if not drawn_constant(c)]
    if consts:
        lines.append(_small(", ".join(consts)))
    return lines


def wrap_rule(rule, width=RULE_WIDTH):
    """A derivative rule as lines of at most ``width`` characters, broken between words
    (a longer word gets a line of its own): nothing is cut off."""
    return textwrap.wrap(rule, width, break_long_words=False, break_on_hyphens=False) or [""]


def _const_text(c):
    """A constant input that has no node of its own: a scalar, or one the graph no longer
    holds (the backward pass freed what the op saved)."""
    if c is None:
        return "(a constant)"
    return "const " + values_text(c.array if hasattr(c, "array") else c)


def _meta_text(node):
    shapes = [shape_text(s) for s, _ in node.output_meta]
    text = " ".join(shapes)
    dts = {dt for _, dt in node.output_meta} - {dtypes.get_default_dtype()}
    if dts:
        text += " " + " ".join(sorted(str(dt) for dt in dts))
    if device_name(node.xp) != "cpu":
        text += " cuda"
    return text


def _saved_lines(node):
    if node.saved is None:
        return [_small("saved: freed by backward()" if node.released else "saved: nothing")]
    lines = []
    for what, arr, nbytes in saved_records(node):
        if what == "recomputed":
            lines.append(_small(f"recomputed in backward: {shape_text(arr.shape)}"))
        elif hasattr(arr, "shape"):
            lines.append(_small(f"saved {what} {shape_text(arr.shape)} {nbytes_text(nbytes)}"))
        else:  # a Python number
            lines.append(_small(f"saved {what} {values_text(arr)}"))
    return lines or [_small("saved: nothing")]


def _module_lines(d, ctx):
    tree = ctx["view"].tree
    head, _, cls = tree.label(d.path, d.repeat).partition(" (")
    lines = [_html(head, bold=True) + _html(" (" + cls if cls else "")]
    params = tree.param_count(d.path)
    outs = ", ".join(shape_text(s) for s in d.out_shapes)
    each = " each" if d.repeat is not None else ""  # drawn once for N blocks
    lines.append(_small(f"{params:,} params{each}" + (f" · out {outs}" if outs else "")))
    nodes = [i.node for i in d.items if i.node is not None]
    if ctx["backward"] and nodes:
        steps = [ctx["steps"][n] for n in nodes]
        total = held_bytes(nodes)[0]
        lines.append(_small(f"steps {min(steps)}–{max(steps)} ({len(nodes)} nodes) · "
                            f"saved {nbytes_text(total)}"))
    if ctx["show_grad"]:
        lines += _grad_lines(ctx["grads"][d.key], per_block=d.repeat is not None)
    return lines


def _tensor_lines(d, ctx):
    item = d.items[0]
    t = item.tensor
    lines = [_html(_tensor_name(d, ctx), bold=True)]
    lines.append(_small(f"{shape_text(t.shape)} {t.dtype} · {t.device}"))
    if ctx["show_values"] and t.array.size <= SMALL:
        lines.append(_html("= " + values_text(t.array)))
    if ctx["show_grad"] and (d.kind in ("param", "leaf") or t._grad is not None):
        lines += _grad_lines(ctx["grads"][d.key], per_block=len(d.items) > 1)
    return lines


def _tensor_name(d, ctx):
    item, tree = d.items[0], ctx["view"].tree
    name = item.name or tree.name_of.get(id(item.tensor))
    if d.kind == "param" and name and len(d.items) > 1 and d.repeat is not None:
        owner = tree.owner_of[id(item.tensor)]
        return repeat_name(owner, d.repeat) + "." + name.rpartition(".")[2]
    default = {"param": "param", "leaf": "leaf", "output": "output", "const": "constant",
               "tensor": "tensor"}[d.kind]
    return name or default


# --- gradients ------------------------------------------------------------------------------

def _grads(d, ctx):
    """Gradient statistics per block: one entry, or one per merged block."""
    if d.kind == "module":
        tree = ctx["view"].tree
        paths = [d.path] if d.repeat is None else run_members(d.path, d.repeat)
        return [_combine([grad_stats(p.grad) for p in tree.modules[p].parameters()])
                for p in paths]
    return [grad_stats(i.tensor._grad) for i in d.items if i.tensor is not None]


def _combine(stats):
    stats = [s for s in stats if s is not None]
    if not stats:
        return None
    norm = float(np.sqrt(sum(s.norm ** 2 for s in stats)))
    size = sum(s.size - s.nonfinite for s in stats)
    return GradStats(sum(s.size for s in stats), norm, max(s.max_abs for s in stats),
                     norm / np.sqrt(max(size, 1)), sum(s.nonfinite for s in stats), None)


def _grad_lines(stats, per_block=False):
    lines = []
    for k, s in enumerate(stats):
        prefix = f"[{k}] " if per_block else ""
        if s is None:
            lines.append(_small(prefix + "grad: none"))
            continue
        if s.values is not None:
            text = "grad = " + values_text(s.values)
        elif s.norm == 0 and not s.nonfinite:
            text = f"grad: zero (all {s.size:,} elements)"
        else:
            text = f"grad norm {s.norm:.3g} · max|g| {s.max_abs:.3g}"
        if s.nonfinite:
            text += f" · {s.nonfinite} NaN/inf"
        lines.append(_html(prefix + text) if not per_block else _small(prefix + text))
    return lines


def grad_colour(s, scale):
    """(fill, font colour) for a gradient's statistics on the picture's ``scale`` (a
    ``LogScale``), or None without a gradient: red for NaN/inf, ``ZERO`` for all zeros."""
    if s is None:
        return None
    if s.nonfinite:
        fill = NONFINITE
    elif s.norm == 0 or scale is None:
        fill = ZERO
    else:
        fill = scale.colour(s.norm)
    return fill, ink(fill)


def _worst_colour(stats, scale):
    """The colour of the block farthest from the middle of the picture's range (NaN/inf
    first, then an all-zero gradient): for blocks drawn once for several."""
    present = [s for s in stats if s is not None]
    if not present:
        return None
    bad = [s for s in present if s.nonfinite] or [s for s in present if s.norm == 0]
    if bad or scale is None:
        return grad_colour((bad or present)[0], scale)
    return grad_colour(max(present, key=lambda s: abs(scale.position(s.norm) - 0.5)), scale)


def _costs(view, profile, cost):
    """{view key: the summed cost of the graph nodes it draws} for op and module nodes."""
    if cost not in COSTS:
        raise ValueError(f"draw: cost must be one of {sorted(COSTS)}, got {cost!r}")
    if not callable(getattr(profile, "node_costs", None)):
        raise TypeError(f"draw: profile must have a node_costs() method (a "
                        f"mg.profiler.profile), got {type(profile).__name__}")
    field = COSTS[cost][0]
    per_node = {node: getattr(c, field) or 0 for node, c in profile.node_costs().items()}
    costs = {}
    for key, d in view.nodes.items():
        if d.kind in ("op", "module"):
            nodes = {i.node for i in d.items if i.node is not None}
            if nodes & per_node.keys():
                costs[key] = sum(per_node.get(n, 0) for n in nodes)
    return costs


def _cost_text(value, cost):
    if cost == "bytes":
        return nbytes_text(int(round(value)))
    return f"{value * 1e3:.3g} ms" if value >= 1e-4 else f"{value * 1e6:.3g} µs"


# --- edges and caption ----------------------------------------------------------------------

def _edge_attrs(src, dst, ctx):
    """Parameter edges in blue; in a frame, the gradients the active node sends in gold
    and those already sent in grey."""
    attrs = {}
    if src.kind in ("param", "const"):
        attrs["color"] = "#7f9cc4" if src.kind == "param" else "#aaaaaa"
    if ctx["frame"] is not None:
        active, done, _ = ctx["frame"]
        senders = {i.node for i in dst.items if i.node is not None}
        if active in senders:
            attrs.update(color="#c79100", penwidth="2.5")
        elif senders and senders <= done:
            attrs.update(color="#bbbbbb")
    return attrs


def _caption(view, ctx):
    lines = []
    if ctx["frame"] is not None:
        lines.append(_html(ctx["frame"][2], bold=True))
    if ctx["backward"]:
        lines.append(_html(f"Backward pass: {len(view.graph.ops)} nodes, numbered in the "
                           "order they run", bold=True))
        lines.append(_html(_saved_text(view.graph.ops, ctx["profile"])))
    legends = []
    if ctx["costs"] is not None:
        title, cost = COSTS[ctx["cost"]][1], ctx["cost"]
        legends.append(legend_row(title, []) if ctx["cost_scale"] is None else
                       ctx["cost_scale"].legend_html(title, fmt=lambda v: _cost_text(v, cost)))
    if ctx["show_grad"]:
        legends.append(grad_legend(ctx["scale"]))
    if not legends:  # text only: each line flush left
        return "<" + "".join(line + '<BR ALIGN="LEFT"/>' for line in lines) + ">" \
            if lines else None
    # Graphviz takes text or one table as a label: the lines and the legends as its rows
    rows = [f'<TR><TD ALIGN="LEFT" BALIGN="LEFT">{line}</TD></TR>' for line in lines]
    rows += [f'<TR><TD ALIGN="LEFT">{legend}</TD></TR>' for legend in legends]
    return '<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0">' + "".join(rows) + "</TABLE>>"


def _saved_text(ops, profile):
    """What the graph holds for backward. Drawn after backward(), the graph holds nothing
    any more: a profile of the step tells what it held (its peak); without one, say that
    it was freed rather than print 0 B."""
    total, buffers, leaf = held_bytes(ops)
    now = (f"{nbytes_text(total)} in {buffers} buffers ({nbytes_text(leaf)} of it the "
           "leaves' own data: parameters and inputs that require grad)")
    peak = getattr(profile, "peak_memory", None)
    freed = total == 0 and any(getattr(n, "released", False) for n in ops)
    if peak is not None:
        held = nbytes_text(peak()[0])
        return (f"saved for backward during the profiled step: {held} at the peak"
                + (", since freed by backward()" if freed else f"; held now: {now}"))
    if freed:
        return ("saved for backward: freed by backward() (draw the graph before backward(), "
                "or pass profile=, to see how much it held)")
    return f"saved for backward: {now}"


def grad_legend(scale):
    """The legend of the gradient colours: the picture's log scale of gradient norms (lowest
    to highest in this graph: the larger, the darker), then zero and NaN/inf."""
    special = [("zero", ZERO), ("NaN/inf", NONFINITE)]
    if scale is None:
        return legend_row("grad norm", special)
    return scale.legend_html("grad norm (log scale, this graph's range)", extra=special)


def _html(text, bold=False, name_only=False):
    text = html.escape(str(text), quote=False)
    if name_only and "(" in text:  # bold the op's name, not its arguments
        name, _, rest = text.partition("(")
        return f"<B>{name}</B>({rest}"
    return f"<B>{text}</B>" if bold else text


def _small(text):
    return f'<FONT POINT-SIZE="9" COLOR="{_GREY}">{html.escape(str(text), quote=False)}</FONT>'
