"""minigrad.viz, read at a glance: derivative rules wrapped (never cut) and every op's rule a
rule, the log colour scale and its legend, "zero" and "scalar", values only on tensor
nodes, reshapes in a row drawn once, the format taken from the file's suffix,
``graph_memory`` and the table ``explain_backward`` returns."""
import importlib
import math
import pkgutil
import re
import shutil

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn, viz
from minigrad.autograd.function import Function
from minigrad.viz import colours
from minigrad.viz.dot import RULE_WIDTH, wrap_rule
from minigrad.viz.graph import doc_rule, grad_rule

from .test_viz import label_of, mlp, nodes_of, seq2seq_loss

pytest.importorskip("graphviz")  # the optional `viz` extra

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")


def labels(dot):
    """The text of every node label (HTML tags and line breaks removed), by node id."""
    out = {}
    for node, attrs in nodes_of(dot).items():
        label = re.search(r"label=<(.*)>(?: \w+=|$)", attrs).group(1)
        out[node] = re.sub(r"<[^>]*>", " ", label)
    return out


# --- derivative rules -------------------------------------------------------------------------

def op_classes():
    """Every op class of the engine and the fused ops (and their node classes)."""
    for package in ("minigrad.ops", "minigrad.fused"):
        for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
            importlib.import_module(f"{package}.{info.name}")
    found, todo = set(), [Function]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return sorted((c for c in found if c.__module__.startswith(("minigrad.ops", "minigrad.fused"))
                   and not c.__name__.startswith("NonDiff")), key=lambda c: c.__name__)


@pytest.mark.parametrize("cls", op_classes(), ids=lambda c: c.__name__)
def test_every_op_states_its_gradient_rule(cls):
    node = object.__new__(cls)
    rule = doc_rule(node)
    assert not rule.rstrip().endswith((",", ":")), rule   # a whole sentence, not a fragment
    gradient = grad_rule(node)
    assert gradient != rule and re.match(r"d\w* = ", gradient), rule  # "dx = ..."
    lines = wrap_rule(rule)
    assert " ".join(lines).split() == rule.split()        # wrapped, nothing cut
    assert all(len(line) <= RULE_WIDTH or " " not in line for line in lines)


def test_backward_labels_carry_whole_rules(device):
    a = mg.randn(3, 2, 4, requires_grad=True, device=device)
    b = mg.randn(4, 5, requires_grad=True, device=device)
    loss = (a @ b).sum()
    text = " ".join(" ".join(t.split()) for t in labels(viz.to_dot(loss, backward=True)).values())
    rule = grad_rule(loss.grad_fn.next_functions[0][0])
    assert rule.endswith("(batch dims summed by the engine)")
    assert " ".join(rule.split()) in text and "…" not in text


# --- the colour scale -------------------------------------------------------------------------

def test_log_scale_is_monotone_and_fitted_to_the_range():
    values = [3e-6, 1e-4, 2e-3, 0.05, 0.9, 40.0]
    scale = colours.LogScale.fit(values + [0.0, float("nan"), None])  # those are ignored
    assert (scale.lo, scale.hi) == (3e-6, 40.0)
    positions = [scale.position(v) for v in values]
    assert positions[0] == 0 and positions[-1] == 1
    assert all(p < q for p, q in zip(positions, positions[1:]))
    # equal ratios, equal steps: the scale is logarithmic
    assert math.isclose(scale.position(1e-4) - scale.position(1e-5),
                        scale.position(1e-1) - scale.position(1e-2))
    assert scale.colour(3e-6) == colours.PALETTE[0] and scale.colour(40) == colours.PALETTE[-1]
    assert scale.colour(1e-9) == colours.PALETTE[0] and scale.colour(1e9) == colours.PALETTE[-1]
    # along the palette, from its first colour's to its last's: each channel moves one way
    hexes = [scale.colour(v) for v in np.geomspace(3e-6, 40.0, 41)]
    assert len(set(hexes)) > 30
    assert colours.LogScale.fit([0.0, None, float("inf")]) is None


def test_a_narrow_range_is_widened_to_a_decade():
    scale = colours.LogScale.fit([1.0, 1.5])
    assert math.isclose(scale.hi / scale.lo, 10.0)
    assert colours.PALETTE[0] != scale.colour(1.0) != scale.colour(1.5) != colours.PALETTE[-1]
    assert math.isclose(scale.position(math.sqrt(1.5)), 0.5)


def test_ticks_and_legend():
    scale = colours.LogScale.fit([1e-3, 10.0])
    ticks = scale.ticks(5)
    assert [round(math.log10(v), 9) for v, _ in ticks] == [-3, -2, -1, 0, 1]
    assert [c for _, c in ticks] == [scale.colour(v) for v, _ in ticks]
    legend = scale.legend_html("time", extra=[("zero", colours.ZERO)])
    cells = re.findall(r'<TD BGCOLOR="(#\w+)"><FONT POINT-SIZE="9" COLOR="(\w+)">([^<]*)</FONT>',
                       legend)
    assert cells[:5] == [(c, colours.ink(c), f"{v:.2g}") for v, c in ticks]
    assert cells[5] == (colours.ZERO, "black", "zero") and legend.count("time:") == 1
    assert colours.ink(colours.PALETTE[-1]) == "white" and colours.ink("#ffffff") == "black"


def test_the_palette_darkens_monotonely_and_its_ink_reads_at_aa():
    """A larger value is a darker fill all along the scale, and the text on any fill
    (black or white, ``ink``) has at least WCAG AA's 4.5:1 contrast."""
    scale = colours.LogScale.fit([1e-3, 10.0])
    fills = [scale.colour(v) for v in np.geomspace(1e-3, 10.0, 200)]
    lum = [colours.luminance(f) for f in fills]
    assert all(a >= b for a, b in zip(lum, lum[1:])) and lum[0] > 0.7 and lum[-1] < 0.05
    for fill in fills + [colours.ZERO, colours.NONFINITE]:
        text = "#ffffff" if colours.ink(fill) == "white" else "#000000"
        assert colours.contrast(fill, text) >= 4.5, fill
    assert math.isclose(colours.contrast("#000000", "#ffffff"), 21)
    with pytest.raises(ValueError, match="at least 2"):
        scale.ticks(1)


def test_a_transformer_spreads_over_the_palette(device):
    model, loss = seq2seq_loss(device)
    loss.backward()
    dot = viz.to_dot(loss, model=model, depth=2, show_grad=True)
    norm = {name: np.linalg.norm(p.grad.numpy()) for name, p in model.named_parameters()
            if name in ("src_embed.weight", "generator.weight", "generator.bias")}
    fills = {name: re.search(r'fillcolor="(#\w+)"', label_of(dot, f"<B>{name}</B>")).group(1)
             for name in norm}
    assert len(set(fills.values())) == 3  # three sizes, three colours
    smallest, largest = min(norm, key=norm.get), max(norm, key=norm.get)
    assert fills[largest] == colours.PALETTE[-1]
    assert fills[smallest] != colours.PALETTE[-1]
    assert "grad norm (log scale, this graph&#x27;s range)" in dot


def test_zero_gradient_says_zero(device):
    tiny = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    wide = mg.randn(4, 5, device=device, requires_grad=True)
    other = mg.tensor([3.0], device=device, requires_grad=True)
    loss = (tiny * 0.0).sum() + (wide * 0.0).sum() + (other * 2.0).sum()
    loss.backward()
    dot = viz.to_dot({"tiny": tiny, "wide": wide, "other": other, "loss": loss}, show_grad=True)
    assert "grad = [0, 0]" in label_of(dot, "<B>tiny</B>")
    assert "grad: zero (all 20 elements)" in label_of(dot, "<B>wide</B>")
    for name in ("tiny", "wide"):
        assert f'fillcolor="{colours.ZERO}"' in label_of(dot, f"<B>{name}</B>")
    assert f'fillcolor="{colours.ZERO}"' not in label_of(dot, "<B>other</B>")
    assert "vanishing" not in dot and ">zero<" in dot   # the legend names it


# --- labels -----------------------------------------------------------------------------------

def test_scalars_say_scalar(device):
    x = mg.tensor(2.0, device=device, requires_grad=True)
    loss = (x * x).tanh()
    dot = viz.to_dot({"x": x, "loss": loss}, backward=False)
    assert "scalar float32" in label_of(dot, "<B>x</B>")
    assert "()" not in "".join(labels(dot).values())
    back = viz.to_dot(loss, backward=True)
    assert "saved out scalar 4 B" in back and "()" not in "".join(labels(back).values())
    assert "scalar" in str(viz.explain_backward(loss)).splitlines()[1]


def test_values_only_on_tensor_nodes(device):
    x = mg.tensor([0.5, -1.0], device=device, requires_grad=True)
    h = (x * 2.0).tanh()        # tanh saves its output, mul does not: neither shows it
    h.retain_grad()
    out = (h + 1.0).exp().sum()
    dot = viz.to_dot({"x": x, "out": out}, show_values=True)
    ops = [t for node, t in labels(dot).items() if "<B>" not in t and "float32" not in t]
    assert len(ops) == 5 and not any(re.search(r"(^|\s)= ", t) for t in ops)
    assert "= [0.5, -1]" in label_of(dot, "<B>x</B>")
    assert "= [" in label_of(dot, "<B>tensor</B>")   # the retained h carries its values


def test_reshapes_in_a_row_are_drawn_once(device):
    model, loss = seq2seq_loss(device)  # logits.reshape(-1, 11), then cross_entropy's own
    dot = viz.to_dot(loss, model=model, depth=2)
    reshapes = [t for t in labels(dot).values() if "reshape" in t]
    assert len(reshapes) == 1 and "×2" in reshapes[0] and "(8, 11)" in reshapes[0]
    back = viz.to_dot(loss, model=model, backward=True, depth=2)
    assert "<B>2, 3. ViewBackward0</B>" in back
    x = mg.randn(2, 3, 4, device=device, requires_grad=True)
    flat = x.reshape(6, 4)
    named = viz.to_dot({"flat": flat, "out": flat.reshape(24).sum()})
    assert sum("reshape" in t for t in labels(named).values()) == 2  # flat is shown between


# --- render -----------------------------------------------------------------------------------

MAGIC = {"svg": b"<?xml", "png": b"\x89PNG", "pdf": b"%PDF"}


@needs_dot
@pytest.mark.parametrize("fmt", sorted(MAGIC))
def test_render_takes_the_format_from_the_suffix(tmp_path, device, fmt):
    _, loss = mlp(device)
    path = viz.render(viz.draw(loss), tmp_path / f"graph.{fmt}")
    assert path == str(tmp_path / f"graph.{fmt}")
    with open(path, "rb") as f:
        assert f.read().lstrip()[:len(MAGIC[fmt])] == MAGIC[fmt]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"graph.{fmt}"]


@needs_dot
def test_render_without_suffix_adds_the_format(tmp_path, device):
    _, loss = mlp(device)
    assert viz.render(viz.draw(loss), tmp_path / "g").endswith("g.svg")
    assert viz.render(viz.draw(loss), tmp_path / "g", format="png").endswith("g.png")


def test_render_rejects_unknown_or_conflicting_formats(tmp_path, device):
    _, loss = mlp(device)
    graph = viz.draw(loss)
    with pytest.raises(ValueError, match=r"suffix '\.jpeg'.*\.svg, \.png or \.pdf"):
        viz.render(graph, tmp_path / "g.jpeg")
    with pytest.raises(ValueError, match=r"format='svg' disagrees with the suffix '\.png'"):
        viz.render(graph, tmp_path / "g.png", format="svg")
    with pytest.raises(ValueError, match=r"format='gif' is not one of svg, png, pdf"):
        viz.render(graph, tmp_path / "g", format="gif")
    assert list(tmp_path.iterdir()) == []


# --- graph_memory -----------------------------------------------------------------------------

def test_graph_memory_counts_what_each_node_saved(device):
    w = mg.randn(32, 16, device=device, requires_grad=True)
    x = mg.randn(8, 32, device=device, requires_grad=True)
    loss = ((x @ w).tanh() + 1.0).sum()
    mem = viz.graph_memory(loss)
    # matmul keeps both inputs (each for the other's gradient), tanh its output; add and
    # sum keep nothing
    assert mem.total == x.numpy().nbytes + w.numpy().nbytes + 8 * 16 * 4
    assert (mem.buffers, mem.leaf_bytes) == (3, x.numpy().nbytes + w.numpy().nbytes)
    by_name = {r.node.name(): r for r in mem.rows}
    assert by_name["TanhBackward0"].nbytes == 8 * 16 * 4
    assert by_name["MmBackward0"].nbytes == (8 * 32 + 32 * 16) * 4
    assert {a.shape for a in by_name["MmBackward0"].saved} == {(8, 32), (32, 16)}
    assert by_name["AddBackward0"].saved == () and [r.step for r in mem.rows] == [1, 2, 3, 4]
    text = str(mem)
    assert "3 buffers" in text and "TanhBackward0" in text and "AddBackward0" not in text
    assert "2 of the 4 nodes hold nothing" in text
    html = mem._repr_html_()
    assert html.startswith("<table>") and "MmBackward0" in html
    loss.backward()
    after = viz.graph_memory(loss)
    assert after.freed and after.total == 0 and "freed" in str(after)
    # an input that needs no gradient: matmul keeps only it, for the weight's gradient
    alone = viz.graph_memory(((x.detach() @ w).tanh() + 1.0).sum())
    mm = {r.node.name(): r for r in alone.rows}["MmBackward0"]
    assert [a.shape for a in mm.saved] == [(8, 32)] and mm.nbytes == 8 * 32 * 4


def test_graph_memory_of_a_model_counts_shared_buffers_once(device):
    model, loss = mlp(device)
    w = model.fc2.weight
    loss = loss + (w * w).sum()          # mul saves fc2.weight twice; fc2 saves it too
    mem = viz.graph_memory(loss, model=model)
    seen = {}
    for r in mem.rows:
        for s in r.node.saved or ():
            if hasattr(s.array, "nbytes"):
                base = s.array if s.array.base is None else s.array.base
                seen[id(base)] = base.nbytes
    assert mem.total == sum(seen.values()) < sum(r.nbytes for r in mem.rows)
    assert {r.module for r in mem.rows} >= {"fc1", "act", "fc2"}
    loss.backward(retain_graph=True)     # kept: still held
    assert viz.graph_memory(loss, model=model).total == mem.total


# --- explain_backward -------------------------------------------------------------------------

def test_explain_backward_returns_a_table_and_consumes_the_graph(device, capsys):
    a = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    loss = (a.exp() * a).sum()
    steps = viz.explain_backward(loss)
    assert capsys.readouterr().out == ""            # returned, not printed
    assert isinstance(steps, list) and len(steps) == 3 and steps.consumed
    text = str(steps)
    assert text == repr(steps)
    assert text.splitlines()[0].split() == ["step", "backward", "of", "grad", "in", "grads",
                                            "out", "notes"]
    assert "rule: out = exp(x);  dx = grad * out" in text
    assert "The graph was consumed" in text and "retain_graph=True" in text
    html = steps._repr_html_()
    assert html.startswith("<table>") and "out = x * y;  dx = grad * y" in html
    assert "The graph was consumed" in html
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_explain_backward_can_keep_the_graph(device):
    a = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    loss = (a.exp() * a).sum()
    steps = viz.explain_backward(loss, retain_graph=True)
    assert not steps.consumed and "The graph was kept (retain_graph=True)" in str(steps)
    first = a.grad.numpy().copy()
    loss.backward()                                  # the graph is still there
    np.testing.assert_allclose(a.grad.numpy(), 2 * first, rtol=1e-6)


def test_explain_backward_wraps_long_rules(device):
    model = nn.LayerNorm(4).to(device)
    loss = model(mg.randn(2, 4, device=device, requires_grad=True)).sum()
    steps = viz.explain_backward(loss, model=model)
    text = str(steps)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "rule: out = (x - mean)" in line)
    block = [lines[start]] + [ln for ln in lines[start + 1:]
                              if ln.startswith(" " * 12) and "rule:" not in ln]
    assert all(len(line) <= 92 for line in block)
    assert " ".join(" ".join(block).split()[1:]) == " ".join(steps[-1].rule.split())


@needs_dot
def test_the_small_print_keeps_clear_of_the_bold_name_above_it():
    """In the rendered SVG the line under a node's bold name starts at least 11 px lower:
    the name's underscores and descenders (out_proj) keep clear of the shape below."""
    attn = nn.MultiheadAttention(8, num_heads=2)
    x = mg.randn(1, 3, 8)
    loss = attn(x, x, x)[0].sum()
    svg = viz.draw(loss, model=attn, backward=True).pipe(format="svg").decode()
    texts = [(float(y), float(size), text) for y, size, text in re.findall(
        r'<text [^>]*y="([-\d.]+)"[^>]*font-size="([\d.]+)"[^>]*>([^<]*)</text>', svg)]
    gaps = []
    for i, (y, _, text) in enumerate(texts):
        if "_proj." in text:  # a parameter's name; the next line drawn is its shape
            below = next(t for t in texts[i + 1:] if t[1] > 2 and t[2].strip())
            gaps.append(below[0] - y)
    assert len(gaps) >= 4 and min(gaps) >= 11, gaps
