"""mg.viz.draw(..., profile=prof): ops filled by what the profiler measured, on a log scale
fitted to the graph, each with its figure, and a legend."""
import re

import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.viz.colours import LogScale
from minigrad.viz.dot import COSTS, _cost_text
from minigrad.viz.graph import held_bytes, nbytes_text
from minigrad.viz.view import make_view
from tests.conftest import needs

draws = pytest.mark.needs("graphviz")  # the DOT text is made by the graphviz package


def profiled_step(device):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 4)).to(device)
    x, y = mg.randn(32, 16, device=device), mg.randint(0, 4, (32,), device=device)
    with mg.profiler.profile(model=model) as prof:
        loss = F.cross_entropy(model(x), y)
        loss.backward(retain_graph=True)
    return model, loss, prof


def fills_and_labels(source):
    """{node id: (fill colour, label)} of the node statements of DOT text."""
    nodes = {}
    for line in source.splitlines():
        m = re.match(r'\s*(n\d+) \[(.*)\]$', line)
        if m:
            fill = re.search(r'fillcolor="([^"]+)"', m.group(2))
            nodes[m.group(1)] = (fill.group(1) if fill else None, m.group(2))
    return nodes


def expected_costs(loss, model, backward, prof, cost):
    """{node id: summed cost} of the op and module nodes drawn, computed from the profile's
    per-node figures and the nodes each drawn box stands for."""
    field = COSTS[cost][0]
    per_node = {n: getattr(c, field) for n, c in prof.node_costs().items()}
    view = make_view(loss, model=model, backward=backward)
    found = {}
    for i, (key, d) in enumerate(view.nodes.items()):
        nodes = {item.node for item in d.items if item.node is not None}
        if d.kind in ("op", "module") and nodes & per_node.keys():
            found[f"n{i}"] = sum(per_node.get(n, 0) for n in nodes)
    return found


@draws
@pytest.mark.parametrize("cost", ["time", "bytes"])
@pytest.mark.parametrize("backward", [False, True])
def test_each_costed_op_is_filled_by_its_cost_on_the_graphs_scale(device, cost, backward):
    model, loss, prof = profiled_step(device)
    drawn = fills_and_labels(mg.viz.to_dot(loss, model=model, backward=backward,
                                           profile=prof, cost=cost))
    costs = expected_costs(loss, model, backward, prof, cost)
    scale = LogScale.fit(costs.values())
    assert len(costs) >= 3 and scale is not None
    for node_id, value in costs.items():
        fill, label = drawn[node_id]
        assert f"<B>{_cost_text(value, cost)}</B>" in label
        if value > 0:
            assert fill == scale.colour(value), (node_id, value)
    positive = [v for v in costs.values() if v > 0]
    if max(positive) / min(positive) >= 10:  # a range the scale did not widen
        top = max(costs, key=costs.get)      # the costliest: the top of the palette
        assert drawn[top][0] == scale.colour(scale.hi)
    source = mg.viz.to_dot(loss, model=model, backward=backward, profile=prof, cost=cost)
    assert COSTS[cost][1] in source  # the legend


@draws
def test_bad_cost_or_profile_is_named(device):
    model, loss, prof = profiled_step(device)
    with pytest.raises(ValueError, match="cost must be one of"):
        mg.viz.draw(loss, profile=prof, cost="flops")
    with pytest.raises(TypeError, match="profile must have a node_costs"):
        mg.viz.draw(loss, profile=object())


def test_cost_figures_read_as_time_and_bytes():
    assert _cost_text(0.0123, "time") == "12.3 ms"
    assert _cost_text(2.5e-5, "time") == "25 µs"
    assert _cost_text(1536, "bytes") == "1.5 KiB"
    assert _cost_text(76.4, "bytes") == "76 B"


def test_the_caption_after_backward_says_what_the_step_saved(device):
    """Drawn after backward() freed the graph, the caption gives the profile's peak of what
    was saved during the step, not the 0 B the graph holds now; without a profile it says
    that backward() freed it."""
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 4)).to(device)
    x, y = mg.randn(32, 16, device=device), mg.randint(0, 4, (32,), device=device)
    with mg.profiler.profile(model=model) as prof:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
    peak = prof.peak_memory()[0]
    assert peak > 0
    needs("graphviz")  # the drawing
    caption = mg.viz.to_dot(loss, model=model, backward=True, profile=prof)
    assert (f"saved for backward during the profiled step: {nbytes_text(peak)} at the peak, "
            "since freed by backward()") in caption
    assert "0 B in 0 buffers" not in caption
    plain = mg.viz.to_dot(loss, model=model, backward=True)
    assert "saved for backward: freed by backward()" in plain and "0 B in 0" not in plain


@draws
def test_the_caption_before_backward_says_what_is_held_now(device):
    model, loss, prof = profiled_step(device)  # backward(retain_graph=True): still held
    total, buffers, _ = held_bytes(loss_ops(loss))
    caption = mg.viz.to_dot(loss, model=model, backward=True, profile=prof)
    assert (f"during the profiled step: {nbytes_text(prof.peak_memory()[0])} at the peak; "
            f"held now: {nbytes_text(total)} in {buffers} buffers") in caption


def loss_ops(loss):
    return make_view(loss).graph.ops
