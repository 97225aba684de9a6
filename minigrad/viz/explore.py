"""``explore``: one self-contained web page to walk a model's forward and backward graph.

    page = mg.viz.explore(loss, "graph.html", model=model)   # runs loss.backward()

The page (one HTML file, its script, style and data inlined; it loads nothing when viewed)
shows the graph of the real computation, grouped by module: modules deeper than ``depth``
start as one box each and open or close on a click, identical repeated blocks are drawn
once, marked "×N". Clicking a node shows its op and derivative rule, input and output
shapes and dtypes, statistics and a histogram of its value and of its gradient, what it
saved for backward, and the line of code that created it. The step buttons walk the
backward pass in the order the engine ran it. The page opens at the top of the graph with
its labels at 11 px ("fit" shows the whole graph); the overlays (gradient norm, time,
bytes) fill the nodes on a monotone scale, their text black or white for WCAG AA contrast.

How it is built: ``view.make_view`` places every op, with repeated blocks merged, among the
modules; each module's own contents (its ops, and its submodules as single boxes) are laid
out once by Graphviz's ``dot``, and the page composes these layouts, making room for each
module opened. ``explore`` runs the backward pass itself (as ``explain_backward`` does),
so that it can record each node's incoming gradient and the engine's order.
"""
import html
import json
import os
import re
import shutil
import subprocess
from importlib import resources

import numpy as np

from .. import backend
from ..autograd import engine
from ..autograd.anomaly import package_dirs
from ..autograd.graph import AccumulateGrad
from .graph import (_base, doc_rule, held_bytes, nbytes_text, op_call, op_name,
                    saved_records, shape_text)
from .modules import run_members
from .render import INSTALL_HELP, GraphvizNotFound, naming
from .view import make_view

BINS = 20           # histogram bars in the node panel
_PT = 72.0          # dot's plain output is in inches
_CHAR_PX = 6.6      # width of one character of the page's 11px font, about
_TOP = -1           # the group of everything outside the modules


class Explorer:
    """What ``explore`` returns: the page's ``html`` and the ``path`` it was written to
    (or None), with counts of what it holds. Shows inline in Jupyter.

    ``items`` are the graph's ops and tensors (``graph.Item``) in the page's numbering
    (the ``data-items`` of its drawn nodes); ``order`` the nodes in the order the backward
    pass ran them."""

    def __init__(self, page, path, counts, items=(), order=()):
        self.html = page
        self.path = path
        self.counts = counts  # ops, items, drawn, groups, steps, bytes
        self.items = list(items)
        self.order = list(order)

    def save(self, path):
        """Write the page to ``path`` and return the path."""
        with naming(path), open(path, "w", encoding="utf-8") as f:
            f.write(self.html)
        self.path = path
        return path

    def _repr_html_(self):
        return ('<iframe style="width:100%;height:640px;border:1px solid #ccc" srcdoc="'
                + html.escape(self.html, quote=True) + '"></iframe>')

    def __repr__(self):
        c = self.counts
        where = f" at {self.path}" if self.path else ""
        return (f"<Explorer{where}: {c['ops']} ops, {c['drawn']} nodes drawn in full, "
                f"{c['groups']} module groups, {nbytes_text(c['bytes'])}>")


def explore(loss, path=None, *, model=None, depth=1, collapse_repeats=True, profile=None,
            retain_graph=False, title=None):
    """Write the graph of ``loss`` as an interactive web page; return an ``Explorer``.

    Runs ``loss.backward()`` (gradients accumulate into ``.grad`` as usual), recording each
    node's gradient and the engine's order; call it in place of ``loss.backward()``.

    Args:
        loss: the Tensor to differentiate (a non-scalar one gets a gradient of ones).
        path: the HTML file to write (None: write nothing, use ``.html`` or Jupyter).
        model: the nn.Module that ran: modules and parameters are named by their paths.
        depth: modules deeper than this start collapsed (root model 0, its children 1).
        collapse_repeats: draw runs of identical blocks (the layers of an encoder) once.
        profile: an object whose ``node_costs()`` maps graph nodes to costs with
            ``time_s``, ``bytes`` and ``flops``: shown in the panel and as overlays.
        retain_graph: keep the saved tensors after the backward pass.
        title: the page's title (default: the class of ``model``, or "graph").

    The source line of each op is shown when the forward ran under ``mg.detect_anomaly()``
    (which records where each op was created) or under the ``profile`` given.
    """
    if getattr(loss, "grad_fn", None) is None:
        raise RuntimeError("explore: the tensor has no grad_fn (it does not depend on "
                           "anything that requires grad), so there is no graph to explore")
    if profile is not None and not callable(getattr(profile, "node_costs", None)):
        raise TypeError(f"explore: profile must have a node_costs() method, got "
                        f"{type(profile).__name__}")
    if shutil.which("dot") is None:
        raise GraphvizNotFound(INSTALL_HELP)
    ops = [n for n in engine.topological_order([loss.grad_fn])
           if not isinstance(n, AccumulateGrad)]
    freed = [n for n in ops if n.released]
    if freed:
        raise RuntimeError(f"explore: the graph was already freed by backward() (at "
                           f"{freed[0].name()}); call explore(loss) instead of "
                           "loss.backward(): it runs the backward pass itself")
    view = make_view(loss, model=model, collapse_repeats=collapse_repeats)
    data = _PageData(view, depth, profile)
    data.record_forward()
    data.run_backward(loss, retain_graph)
    title = title or (type(model).__name__ if model is not None else "graph")
    page = _page(data.to_json(title))
    counts = dict(ops=len(ops), items=len(data.items), drawn=len(view.nodes),
                  groups=len(data.groups) - 1, steps=len(data.steps),
                  bytes=len(page.encode("utf-8")))
    items = list(view.graph.items.values())
    result = Explorer(page, None, counts, items, [items[k].node for k, _, _ in data.steps])
    if path is not None:
        result.save(str(path))
    return result


# --- the data of the page ---------------------------------------------------------------------

class _PageData:
    """Everything the page shows, gathered from the view, the forward pass (values and
    saved tensors, before backward frees them) and the backward pass (gradients, order)."""

    def __init__(self, view, depth, profile):
        self.view, self.tree = view, view.tree
        self.item_index = {key: i for i, key in enumerate(view.graph.items)}
        sources = _profiled_sources(profile)
        self.items = [_item_record(item, self.tree, sources)
                      for item in view.graph.items.values()]
        self.costs = profile.node_costs() if profile is not None else {}
        self.groups = _groups(view, depth)
        self.steps = []
        self.saved_total = 0

    # before backward: what the graph holds now
    def record_forward(self):
        known = _known_values(self.view.graph)
        for key, record in zip(self.view.graph.items, self.items):
            item = self.view.graph.items[key]
            if item.node is not None:
                node = item.node
                record["ins"] = _inputs(node, item, self.view.graph, self.tree)
                record["saved"] = [[what, _shape_of(arr), str(getattr(arr, "dtype", "")), n]
                                   for what, arr, n in saved_records(node)]
                record["val"] = [summary(known.get((node, i)))
                                 for i in range(len(node.output_meta))]
                cost = self.costs.get(node)
                if cost is not None:
                    record["cost"] = _cost(cost)
            else:
                record["val"] = [summary(item.tensor.array)]
        self.saved_total = held_bytes(self.view.graph.ops)[0]

    def run_backward(self, loss, retain_graph):
        holders, sizes = _buffer_holders(self.view.graph.ops)
        received = {}
        freed = [0]

        def on_node(node, grads_out, grads_in):
            k = self.item_index[("op", node)]
            self.items[k]["step"] = len(self.steps) + 1
            self.items[k]["grad"] = [summary(None if g is None else g.array)
                                     for g in grads_out]
            sends = []
            for edge, g in zip(node.edges, grads_in):
                if not edge or g is None:
                    continue
                target, index = edge
                received[(target, index)] = received.get((target, index), 0) + 1
                sends.append([self._target_item(target), received[(target, index)]])
            gone = 0
            if not retain_graph:
                for b in holders.pop(node, ()):
                    sizes[b][1] -= 1
                    if sizes[b][1] == 0:
                        gone += sizes[b][0]
            freed[0] += gone
            self.steps.append([k, sends, gone])

        seed = loss.new_ones(loss.shape)
        engine.run_backward([loss], [seed], retain_graph=retain_graph, on_node=on_node)
        for key, record in zip(self.view.graph.items, self.items):
            t = self.view.graph.items[key].tensor
            if t is not None and record["k"] != "const":
                record["grad"] = [summary(None if t._grad is None else t._grad.array)]
        for g in self.groups[1:]:
            g["gnorm"] = _group_grad_norm(self.tree, g)

    def _target_item(self, target):
        if isinstance(target, AccumulateGrad):
            return self.item_index.get(("t", id(target.variable)), -1)
        return self.item_index.get(("op", target), -1)

    def to_json(self, title):
        view = self.view
        drawn_index = {key: i for i, key in enumerate(view.nodes)}
        group_index = {g["path"]: i for i, g in enumerate(self.groups)}
        drawn = []
        for key, d in view.nodes.items():
            group = group_index[d.cluster] if d.cluster is not None else 0
            label, sub = _drawn_label(d, self.tree)
            drawn.append(dict(k=d.kind, g=group, items=[self.item_index[i.key] for i in d.items],
                              label=label, sub=sub, w=_width(label, sub), h=34))
            self.groups[group]["kids"].append(["d", len(drawn) - 1])
        for i, g in enumerate(self.groups[1:], 1):
            self.groups[group_index.get(g["parent"], 0)]["kids"].append(["g", i])
        edges = [[drawn_index[a], drawn_index[b]] for a, b in view.edges]
        _layout(self.groups, drawn, edges)
        for g in self.groups:
            g.pop("paths", None)
        return dict(title=title, items=self.items, drawn=drawn, groups=self.groups,
                    edges=edges, steps=self.steps, saved_total=self.saved_total,
                    profile=bool(self.costs))


def _item_record(item, tree, sources):
    if item.node is not None:
        node = item.node
        record = dict(k="op", title=op_call(node), op=op_name(node), fn=node.name(),
                      rule=doc_rule(node), mod=tree.path(node.scope) or "",
                      outs=[[shape_text(s), str(dt)] for s, dt in node.output_meta],
                      src=_source_line(node) or sources.get(node))
        if node.checkpoint is not None:  # recorded in a checkpointed region
            record["ckpt"] = node.checkpoint.name
        return record
    t = item.tensor
    name = item.name or tree.name_of.get(id(t)) or {"param": "parameter", "leaf": "input",
                                                    "output": "output", "const": "constant",
                                                    "tensor": "tensor"}[item.kind]
    return dict(k=item.kind, title=name, mod=tree.owner_of.get(id(t), ""),
                outs=[[shape_text(t.shape), str(t.dtype)]], src=None)


def _profiled_sources(profile):
    """{node: "file:line"} where a profile (``mg.profiler.profile``) recorded the user's
    line that ran each op: the source lines without anomaly mode."""
    found = {}
    for event in getattr(profile, "events", ()):
        node = getattr(event, "node", None)
        if getattr(event, "kind", None) == "op" and node is not None and event.source:
            found.setdefault(node, event.source)
    return found


def _source_line(node):
    """Where the user's code created the node (recorded under mg.detect_anomaly()): the
    innermost line outside minigrad's nn and models, then the layer's line that ran the op
    when that is a different one."""
    if not node.trace:
        return None
    library = package_dirs(("minigrad.nn", "minigrad.models"))
    mine = [f for f in node.trace if not f.filename.startswith(library)] or node.trace
    lines = [_frame_text(mine[-1])]
    if node.trace[-1] is not mine[-1]:
        lines.append("via " + _frame_text(node.trace[-1]))
    return "\n".join(lines)


def _frame_text(f):
    return f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}: {f.line}"


def _inputs(node, item, graph, tree):
    """One line per input of an op: position, shape, dtype, and where it comes from."""
    out = []
    for pos, edge in enumerate(node.edges):
        if edge:
            target, idx = edge
            shape, dtype = target.output_meta[idx]
            if isinstance(target, AccumulateGrad):
                v = target.variable
                source = tree.name_of.get(id(v), "leaf") if v is not None else "leaf"
            else:
                source = target.name()
            out.append([f"in{pos}", shape_text(shape), str(dtype), source])
            continue
        const = item.consts.get(pos)
        if hasattr(const, "shape"):
            out.append([f"in{pos}", shape_text(const.shape), str(const.dtype), "constant"])
        else:
            out.append([f"in{pos}", "", "", "no gradient" if edge is None else "not a tensor"])
    return out


def _shape_of(arr):
    if hasattr(arr, "shape"):
        return shape_text(arr.shape)
    return repr(arr) if isinstance(arr, (bool, int, float)) else type(arr).__name__


def _known_values(graph):
    """(node, output index) -> the array of that output, where the graph still holds it:
    saved by the op itself or by an op that read it, or a tensor given as a root."""
    known = {}
    for node in graph.ops:
        for s in node.saved or ():
            if s.tensor is not None and s.tensor.grad_fn is not None:
                known.setdefault((s.tensor.grad_fn, s.tensor._out_idx), s.array)
            elif s.output is not None:
                known.setdefault((node, s.output), s.array)
    for item in graph.items.values():
        t = item.tensor
        if t is not None and t.grad_fn is not None:
            known.setdefault((t.grad_fn, t._out_idx), t.array)
    return known


def summary(arr):
    """Statistics and a histogram of an array (None: not known), for the panel."""
    if arr is None or not hasattr(arr, "dtype"):
        return None
    a = np.asarray(backend.to_host(arr))
    if a.dtype.kind not in "biuf":
        return dict(n=int(a.size), dtype=str(a.dtype))
    a = a.astype(np.float64).ravel()
    ok = a[np.isfinite(a)]
    out = dict(n=int(a.size), bad=int(a.size - ok.size))
    if ok.size:
        counts, edges = np.histogram(ok, bins=BINS)
        out.update(mean=float(ok.mean()), std=float(ok.std()), min=float(ok.min()),
                   max=float(ok.max()), norm=float(np.sqrt((ok * ok).sum())),
                   hist=counts.tolist(), lo=float(edges[0]), hi=float(edges[-1]))
    return out


def _cost(cost):
    def read(name):
        v = cost.get(name) if isinstance(cost, dict) else getattr(cost, name, None)
        return None if v is None else float(v)
    return dict(time_s=read("time_s"), bytes=read("bytes"), flops=read("flops"))


def _buffer_holders(ops):
    """node -> the saved buffers it holds, and buffer -> [bytes, number of holders, the
    buffer]; the leaves' own arrays are left out (they outlive the graph). Buffers are told
    apart by identity, so each is kept in ``sizes`` (an id is unique only while its object
    lives)."""
    leaves = {}
    for node in ops:
        for e in node.edges:
            if e and isinstance(e[0], AccumulateGrad) and e[0].variable is not None:
                base = _base(e[0].variable.array)
                leaves[id(base)] = base
    holders, sizes = {}, {}
    for node in ops:
        mine = {id(b): b for b in (_base(s.array) for s in node.saved or ())
                if hasattr(b, "nbytes") and id(b) not in leaves}
        holders[node] = list(mine)
        for b, arr in mine.items():
            sizes.setdefault(b, [arr.nbytes, 0, arr])[1] += 1
    return holders, sizes


# --- module groups ----------------------------------------------------------------------------

def _groups(view, depth):
    """The top level (index 0) and one group per module drawn in full, outer first: its
    path, label, parent, whether it starts open, and (later) its layout."""
    tree = view.tree
    groups = [dict(path=None, parent=None, label="", sub="", open=True, kids=[], depth=-1)]
    depth_of = {None: -1}
    for path, (parent, repeat) in view.clusters.items():
        if path in view.regions:  # a checkpointed region: a group of its own, open
            region = view.regions[path]
            kept = " + ".join(shape_text(s) for s, _, _ in region.inputs) or "nothing"
            total = sum(n for _, _, n in region.inputs)
            depth_of[path] = depth_of.get(parent, -1) + 1
            n = view.region_runs.get(path, 1)
            name = f"{region.name} ×{n}" if n > 1 else region.name  # (each: one region)
            each = "each " if n > 1 else ""
            groups.append(dict(path=path, parent=parent, ckpt=True,
                               label=f"checkpoint: {name}",
                               full=f"checkpoint: {name}, {each}recomputed in backward",
                               sub=f"{each}recomputed in backward · keeps its inputs {kept} "
                                   f"({nbytes_text(total)})",
                               open=True, kids=[], depth=depth_of[path], paths=[]))
            continue
        depth_of[path] = tree.depth(path)
        cls = type(tree.modules[path]).__name__
        label = tree.label(path, repeat).rpartition(" (")[0] or cls
        outer = parent
        while outer in view.regions:  # named inside the module around the region
            outer = view.clusters[outer][0]
        if outer:
            label = label[len(outer) + 1:] if label.startswith(outer + ".") else label
        each = " each" if repeat is not None else ""
        sub = f"{cls} · {tree.param_count(path):,} params{each}"
        paths = run_members(path, repeat) if repeat is not None and repeat[0] == path \
            else [path]
        groups.append(dict(path=path, parent=parent, label=label, full=tree.label(path, repeat),
                           sub=sub, open=tree.depth(path) <= depth, kids=[],
                           depth=tree.depth(path), paths=paths))
    return groups


def _group_grad_norm(tree, group):
    total, seen = 0.0, set()
    for path in group["paths"]:
        for p in tree.modules[path].parameters():
            if p.grad is not None and id(p) not in seen:
                seen.add(id(p))
                g = np.asarray(backend.to_host(p.grad.array), dtype=np.float64)
                g = g[np.isfinite(g)]
                total += float((g * g).sum())
    return float(np.sqrt(total)) if seen else None


def _drawn_label(d, tree):
    item = d.items[0]
    if item.node is not None:
        shapes = " ".join(shape_text(s) for s, _ in item.node.output_meta)
        return _clip(op_call(item.node), 40), shapes
    t = item.tensor
    name = item.name or tree.name_of.get(id(t)) or d.kind
    if d.kind == "param":
        name = name.rpartition(".")[2]
    return _clip(name, 40), f"{shape_text(t.shape)} {t.dtype}"


def _width(label, sub):
    return round(max(len(label), len(sub), 4) * _CHAR_PX + 18)


def _clip(text, n):
    return text if len(text) <= n else text[:n - 1] + "…"


# --- layout by Graphviz -----------------------------------------------------------------------

def _layout(groups, drawn, edges):
    """Lay out each group's own children (its drawn nodes, and its submodules as boxes) with
    one run of ``dot``; store, per group, its size and each child's centre."""
    for g in groups[1:]:
        g["w"] = _width(g["label"], g["sub"]) + 10
        g["h"] = 38
        g["hw"] = round((len(g["label"]) + len(g["sub"]) + 3) * _CHAR_PX + 20)
    where = {}  # ("d", i) or ("g", i) -> the group it is a child of
    for gi, g in enumerate(groups):
        for kid in g["kids"]:
            where[tuple(kid)] = gi
    parent_of = {i: where.get(("g", i), 0) for i in range(1, len(groups))}

    def child_in(node_key, gi):
        """The child of group gi that holds ``node_key`` (a ("d", i)), or None."""
        key = node_key
        while key is not None:
            up = where.get(key)
            if up == gi:
                return key
            key = ("g", up) if up else None
        return None

    sources = []
    for gi, g in enumerate(groups):
        lines = [f"digraph g{gi} {{", 'graph [rankdir=TB, nodesep=0.3, ranksep=0.4];',
                 'node [shape=box, fixedsize=true, label=""];']
        for kind, i in g["kids"]:
            size = drawn[i] if kind == "d" else groups[i]
            lines.append(f'{kind}{i} [width={size["w"] / _PT:.3f}, '
                         f'height={size["h"] / _PT:.3f}];')
        pairs = {}
        for a, b in edges:
            ka, kb = child_in(("d", a), gi), child_in(("d", b), gi)
            if ka and kb and ka != kb:
                pairs.setdefault((ka, kb), None)
        lines += [f"{a[0]}{a[1]} -> {b[0]}{b[1]};" for a, b in pairs]
        sources.append("\n".join(lines + ["}"]))
    text = subprocess.run(["dot", "-Tplain"], input="\n".join(sources), capture_output=True,
                          text=True, check=True).stdout
    for gi, block in enumerate(re.split(r"^stop$", text, flags=re.M)[:len(groups)]):
        pos = {}
        height = 0.0
        for line in block.strip().splitlines():
            parts = line.split()
            if parts[0] == "graph":
                groups[gi]["iw"] = round(float(parts[2]) * _PT)
                height = float(parts[3]) * _PT
                groups[gi]["ih"] = round(height)
            elif parts[0] == "node":
                pos[parts[1]] = [round(float(parts[2]) * _PT, 1),
                                 round(height - float(parts[3]) * _PT, 1)]
        groups[gi]["pos"] = [pos[f"{k}{i}"] for k, i in groups[gi]["kids"]]
    for i in range(1, len(groups)):
        groups[i]["parent"] = parent_of[i]


# --- the page ---------------------------------------------------------------------------------

def _page(data):
    template = resources.files(__package__).joinpath("explore_page.html").read_text("utf-8")
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    text = text.replace("</", "<\\/")  # never closes the script element early
    page = template.replace("/*DATA*/null", text, 1)
    return page.replace("{{TITLE}}", html.escape(data["title"]), 1)
