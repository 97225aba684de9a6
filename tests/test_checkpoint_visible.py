"""Activation checkpointing made visible: the graph pictures draw a checkpointed region as
a cluster of its own, the explorer page marks it, and the profiler tells the
recomputation apart and reports the memory the checkpoint saved."""
import importlib.util
import re
import shutil

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.profiler import profile
from minigrad.utils.checkpoint import checkpoint
from minigrad.viz.graph import held_bytes
from tests.test_explore import (browser, element_of, item_index, js,  # noqa: F401
                                open_page, page_data)

# the pictures are written with the `graphviz` package (the optional `viz` extra), the
# explorer page also drawn by Graphviz's `dot`
needs_graphviz = pytest.mark.skipif(importlib.util.find_spec("graphviz") is None,
                                    reason="the graphviz package is missing")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")


class Net(nn.Module):
    """inp, then block (checkpointed or not), then out."""

    def __init__(self, ckpt):
        super().__init__()
        self.ckpt = ckpt
        self.inp = nn.Linear(16, 32)
        self.block = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 32))
        self.out = nn.Linear(32, 4)

    def forward(self, x):
        self.h = h = self.inp(x)  # the region's input
        h = checkpoint(self.block, h, use_reentrant=False) if self.ckpt else self.block(h)
        return self.out(h)


def _step(ckpt):
    mg.manual_seed(0)
    model = Net(ckpt)
    x = mg.randn(8, 16)
    return model, model(x).square().mean()


def _cluster_text(dot, name):
    """The text of subgraph ``name`` in DOT source, its braces matched."""
    start = dot.index(f"subgraph {name} {{")
    depth, i = 0, dot.index("{", start)
    for j in range(i, len(dot)):
        depth += {"{": 1, "}": -1}.get(dot[j], 0)
        if depth == 0:
            return dot[start:j + 1]
    raise AssertionError("unbalanced braces")


def _node_ids(text):
    return set(re.findall(r"^\s*(n\d+) \[", text, flags=re.M))


def _labels(dot):
    """node id -> its bold name."""
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^\s*(n\d+) \[label=<<B>([^<]*)</B>", dot, flags=re.M)}


@needs_graphviz
def test_picture_draws_the_region_as_one_dashed_cluster():
    model, loss = _step(True)
    dot = mg.viz.to_dot(loss, model=model)
    region = _cluster_text(dot, "cluster_checkpoint_0")
    head = region.split("\n", 2)[1]
    assert "checkpoint: Sequential, recomputed in backward" in head and "dashed" in head
    assert "keeps its inputs (8, 32) (1.0 KiB)" in head
    labels = _labels(dot)
    inside = _node_ids(region)
    ops_inside = sorted(labels[n] for n in inside if not labels[n].startswith("block."))
    assert ops_inside == ["linear", "linear", "tanh"]  # the block's ops, its parameters
    assert {labels[n] for n in inside if labels[n].startswith("block.")} == {
        "block.0.weight", "block.0.bias", "block.2.weight", "block.2.bias"}
    for name in ("inp", "out"):  # the ops outside the region are outside the cluster
        assert not inside & _node_ids(_cluster_text(dot, f"cluster_{name}"))
    assert "cluster_block" in region  # the module that ran only the region: inside it
    assert "checkpoint" not in mg.viz.to_dot(_step(False)[1], model=Net(False))


@needs_graphviz
def test_backward_picture_shows_the_inputs_as_what_is_saved():
    model, loss = _step(True)
    dot = mg.viz.to_dot(loss, model=model, backward=True)
    region = _cluster_text(dot, "cluster_checkpoint_0")
    assert "saved in" not in region and "recomputed in backward: (8, 32)" in region
    ops = [n for n in _ops(loss)]
    outside = [n for n in ops if n.checkpoint is None]
    assert len(outside) < len(ops)
    # what the graph holds: the ops outside the region's tensors, and the region's input
    assert mg.viz.graph_memory(loss, model=model).total == \
        held_bytes(outside)[0] + model.h.array.nbytes
    memory = mg.viz.graph_memory(loss, model=model)
    assert memory.checkpoint_bytes == model.h.array.nbytes
    assert "Checkpointed regions keep 1.0 KiB of it" in str(memory)
    plain_model, plain = _step(False)
    plain_memory = mg.viz.graph_memory(plain, model=plain_model)
    assert plain_memory.total > memory.total and plain_memory.checkpoint_bytes == 0
    assert "Checkpointed" not in str(plain_memory)


def _ops(loss):
    from minigrad.autograd import engine
    from minigrad.autograd.graph import AccumulateGrad
    return [n for n in engine.topological_order([loss.grad_fn])
            if not isinstance(n, AccumulateGrad)]


@needs_graphviz
def test_a_region_inside_a_module_is_a_cluster_inside_it():
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return checkpoint(lambda t: t.tanh() * 3, self.lin(x), use_reentrant=False).sum()

    model = Mixed()
    dot = mg.viz.to_dot(model(mg.randn(2, 4)), model=model)
    outer = _cluster_text(dot, "cluster_")
    region = _cluster_text(outer, "cluster_checkpoint_0")
    assert "checkpoint: &lt;lambda&gt;, recomputed in backward" in region
    labels = _labels(dot)
    assert sorted(labels[n] for n in _node_ids(region)) == ["mul", "tanh"]


class Nested(nn.Module):
    """A checkpointed block whose own second layer is checkpointed too."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.out = nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 2)

    def block(self, x):
        return checkpoint(self.b, self.a(x).tanh(), use_reentrant=False).sin()

    def forward(self, x):
        return self.out(checkpoint(self.block, x, use_reentrant=False)).sum()


@needs_graphviz
def test_nested_regions_are_nested_clusters():
    """The inner region's cluster inside the outer's (each with its own ops), in the
    picture and in the explorer's groups; plain functions nest the same way."""
    mg.manual_seed(0)
    model = Nested()
    loss = model(mg.randn(3, 4))
    dot = mg.viz.to_dot(loss, model=model)
    outer = _cluster_text(dot, "cluster_checkpoint_0")
    inner = _cluster_text(outer, "cluster_checkpoint_1")
    assert "checkpoint: block, recomputed" in outer.split("\n", 2)[1]
    assert "checkpoint: Linear, recomputed" in inner.split("\n", 2)[1]
    assert "cluster_a" in outer and "cluster_b" in inner and "cluster_out" not in outer
    labels = _labels(dot)
    assert sorted(labels[n] for n in _node_ids(outer) - _node_ids(inner)
                  if not labels[n].startswith("a.")) == ["linear", "sin", "tanh"]
    assert sorted(labels[n] for n in _node_ids(inner) if not labels[n].startswith("b.")) == \
        ["linear"]
    groups = page_data(mg.viz.explore(loss, model=model))["groups"]
    regions = [i for i, g in enumerate(groups) if g.get("ckpt")]
    assert len(regions) == 2 and groups[regions[1]]["parent"] == regions[0]

    x = mg.randn(3, 4, requires_grad=True)
    y = checkpoint(lambda t: checkpoint(lambda u: u.sin() * 2, t * 3,
                                        use_reentrant=False).cos(), x, use_reentrant=False)
    dot = mg.viz.to_dot(y.sum())
    outer = _cluster_text(dot, "cluster_checkpoint_0")
    inner = _cluster_text(outer, "cluster_checkpoint_1")
    labels = _labels(dot)
    assert sorted(labels[n] for n in _node_ids(outer) - _node_ids(inner)) == ["cos", "mul"]
    assert sorted(labels[n] for n in _node_ids(inner)) == ["mul", "sin"]


@needs_graphviz
@needs_dot
def test_explorer_marks_the_region():
    model, loss = _step(True)
    data = page_data(mg.viz.explore(loss, model=model))
    marked = {i for i, it in enumerate(data["items"]) if it.get("ckpt")}
    ops = {i: it for i, it in enumerate(data["items"]) if it["k"] == "op"}
    assert sorted(ops[i]["op"] for i in marked) == ["linear", "linear", "tanh"]
    assert all(ops[i]["mod"].startswith("block") for i in marked)
    assert all(data["items"][i]["ckpt"] == "Sequential" for i in marked)
    groups = [g for g in data["groups"] if g.get("ckpt")]
    assert len(groups) == 1 and "recomputed in backward" in groups[0]["full"]
    gi = data["groups"].index(groups[0])
    block = [i for i, g in enumerate(data["groups"]) if g["path"] == "block"]
    assert block and data["groups"][block[0]]["parent"] == gi  # the block inside it
    assert not any(g.get("ckpt") for g in
                   page_data(mg.viz.explore(_step(False)[1], model=Net(False)))["groups"])
    # the page ran backward through the checkpoint: the gradients of the plain model
    plain_model, plain = _step(False)
    plain.backward()
    for (name, p), q in zip(model.named_parameters(), plain_model.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, err_msg=name)


def _profiled(ckpt):
    model, _ = _step(ckpt)
    x = mg.randn(8, 16)
    with profile(model=model) as prof:
        loss = model(x).square().mean()
        region_bytes = _region_saved_bytes(loss, model)
        loss.backward()
    return prof, model, region_bytes


def _region_saved_bytes(loss, model):
    """Bytes the block's nodes hold for backward, read from the graph itself (not the
    profiler): every buffer they saved, once, the parameters (which exist anyway) aside."""
    params = {id(p.array) for p in model.parameters()}
    block = set(model.block.modules())
    buffers = {}
    for node in _ops(loss):
        if node.scope in block:
            for s in node.saved:
                arr = s.array
                if type(arr).__name__ == "ndarray" and id(arr) not in params:
                    while arr.base is not None:
                        arr = arr.base
                    buffers[id(arr)] = arr.nbytes
    return sum(buffers.values())


def test_profiler_tells_the_recomputation_apart_and_the_memory_saved():
    plain, plain_model, plain_region = _profiled(False)
    prof, model, ckpt_region = _profiled(True)
    assert plain_region > 0 and ckpt_region == 0  # the checkpoint keeps none of it
    kept = model.h.array.nbytes  # the region's input, which the checkpoint keeps instead
    assert prof.checkpoint_saved_bytes == plain_region - kept > 0
    # tanh's output is saved by tanh and by the next linear: one buffer, counted once
    assert plain_region == kept + 8 * 64 * 4
    # the memory timeline holds the region's input instead of its activations
    assert prof.peak_memory()[0] < plain.peak_memory()[0]
    assert prof.memory[-1][1] == 0  # all released by the end of backward
    again = [e for e in prof.events if e.phase == "recompute"]
    assert sorted(e.name for e in again) == ["Linear", "Linear", "Tanh"]
    assert all(e.parent is not None and e.parent.phase == "backward" for e in again)
    assert prof.recompute_s > 0
    assert prof.recompute_s == sum(e.time_s for e in again)
    # the region's first run holds nothing for backward; the recomputation is listed apart
    first = [e for e in prof.events if e.phase == "forward" and
             (e.module or "").startswith("block")]
    assert len(first) == 3 and all(e.saved_bytes == 0 for e in first)
    table = prof.table(top=50)
    names = {r.name: r for r in table.rows}
    assert names["Tanh (recompute)"].calls == 1 and names["Linear (recompute)"].calls == 2
    assert names["Linear"].calls == 4 and names["Tanh"].calls == 1
    line = [s for s in str(table).splitlines() if s.startswith("checkpoint:")]
    assert len(line) == 1 and "(recompute)" in line[0]
    assert f"{prof.checkpoint_saved_bytes / 1024:.1f} KiB saved" in line[0]
    trace = mg.profiler.chrome_trace(prof)["traceEvents"]
    assert sum(e.get("cat") == "recompute" for e in trace) == 3
    # without a checkpoint: nothing of it
    assert plain.recompute_s == 0 and plain.checkpoint_saved_bytes == 0
    assert not any("recompute" in r.name for r in plain.table(top=50).rows)
    assert "checkpoint:" not in str(plain.table())


def test_browser_shows_the_region_and_its_ops_say_so(browser, tmp_path):
    model, loss = _step(True)
    page = mg.viz.explore(loss, model=model)
    open_page(browser, page, tmp_path)
    js(browser, "document.getElementById('btn-open-all').click();")
    frames = js(browser, "return [...document.querySelectorAll('.frame.ckpt')].map("
                         "f => [f.querySelector('text').textContent, "
                         "getComputedStyle(f.querySelector('rect.box')).strokeDasharray])")
    assert len(frames) == 1 and "checkpoint: Sequential" in frames[0][0]
    assert frames[0][1] not in ("", "none")  # dashed
    tanh = next(it.node for it in page.items
                if it.node is not None and it.node.scope is model.block[1])
    browser.find_element("id", element_of(browser, item_index(page, tanh))).click()
    assert "Sequential: recomputed in backward" in browser.find_element("id", "p-ckpt").text
    head = next(it.node for it in page.items
                if it.node is not None and it.node.scope is model.inp)
    browser.find_element("id", element_of(browser, item_index(page, head))).click()
    assert not browser.find_elements("id", "p-ckpt")
    browser.save_screenshot(str(tmp_path / "page.png"))
    errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
    assert errors == []


@needs_graphviz
def test_checkpointed_repeated_blocks_are_drawn_once_and_say_so():
    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(
                nn.Sequential(nn.Linear(6, 6), nn.Tanh()) for _ in range(3))

        def forward(self, x):
            for layer in self.layers:
                x = checkpoint(layer, x, use_reentrant=False)
            return x.sum()

    model = Stack()
    loss = model(mg.randn(2, 6))
    dot = mg.viz.to_dot(loss, model=model)
    assert dot.count("subgraph cluster_checkpoint_") == 1
    assert "checkpoint: Sequential ×3, each recomputed in backward" in dot
    dot = mg.viz.to_dot(loss, model=model, collapse_repeats=False)
    assert dot.count("subgraph cluster_checkpoint_") == 3
    assert dot.count("checkpoint: Sequential, recomputed in backward") == 3
