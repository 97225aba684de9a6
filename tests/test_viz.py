"""minigrad.viz: DOT structure of known graphs, module clusters, depth and "×N", the backward
graph against the engine's real execution order and saved arrays, explain_backward, and
rendering with (and without) Graphviz's dot program."""
import math
import re
import shutil
import xml.etree.ElementTree as ET
from collections import OrderedDict

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad import viz
from minigrad.autograd import engine
from minigrad.viz.graph import held_bytes, nbytes_text

pytest.importorskip("graphviz")  # the optional `viz` extra

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")


# --- helpers ---------------------------------------------------------------------------------

def nodes_of(dot):
    """node id -> its attribute text, for every node statement of the DOT source."""
    return dict(re.findall(r"^\s*(n\d+) \[(.*)\]$", dot, re.M))


def edges_of(dot):
    return re.findall(r"^\s*(n\d+) -> (n\d+)", dot, re.M)


def label_of(dot, needle):
    """The node whose label contains ``needle`` (exactly one)."""
    found = [attrs for attrs in nodes_of(dot).values() if needle in attrs]
    assert len(found) == 1, (needle, found)
    return found[0]


def clusters_of(dot):
    return dict(re.findall(r'subgraph "?cluster_([^" ]*)"? \{\s*\n\s*.*?label=<<B>(.*?)</B>>',
                           dot))


def mlp(device):
    model = nn.Sequential(OrderedDict(fc1=nn.Linear(3, 4), act=nn.ReLU(),
                                      fc2=nn.Linear(4, 2))).to(device)
    x = mg.randn(5, 3, device=device)
    return model, model(x).sum()


class Seq2Seq(nn.Module):
    """The 2+2-layer encoder-decoder transformer of the spec, built from nn parts."""

    def __init__(self, vocab=11, d_model=16, nhead=2, dim_feedforward=32):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, d_model)
        self.tgt_embed = nn.Embedding(vocab, d_model)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward, dropout=0.0), 2, norm=nn.LayerNorm(d_model))
        self.decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(
            d_model, nhead, dim_feedforward, dropout=0.0), 2, norm=nn.LayerNorm(d_model))
        self.generator = nn.Linear(d_model, vocab)
        self.scale = d_model ** 0.5

    def forward(self, src, tgt):
        memory = self.encoder(self.src_embed(src) * self.scale)
        out = self.decoder(self.tgt_embed(tgt) * self.scale, memory, tgt_is_causal=True)
        return self.generator(out)


def seq2seq_loss(device):
    model = Seq2Seq().to(device)
    src = mg.randint(0, 11, (2, 5), device=device)
    tgt = mg.randint(0, 11, (2, 4), device=device)
    logits = model(src, tgt)
    return model, F.cross_entropy(logits.reshape(-1, 11), tgt.reshape(-1))


# --- forward graph ----------------------------------------------------------------------------

def test_small_graph_exact_nodes_edges_and_labels(device):
    x = mg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device, requires_grad=True)
    w = mg.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
    y = (x * w).softmax(-1).sum()
    dot = viz.to_dot(y, show_values=True)
    assert len(nodes_of(dot)) == 6  # x, w, mul, softmax, sum, output
    assert len(edges_of(dot)) == 5
    assert "<B>leaf</B>" in label_of(dot, f"(2, 3) float32 · {x.device}")
    assert "<B>softmax</B>(dim=1)" in dot  # the op's own arguments (dim made positive)
    assert "<B>sum</B>(dims=(0, 1), keepdim=False)" in dot
    assert "= [0.5, -1, 2]" in label_of(dot, "(3,) float32")       # values of a tiny tensor
    assert "peripheries=2" in label_of(dot, "<B>output</B>")       # outputs look different
    assert 'tooltip="out = x * y' in label_of(dot, "<B>mul</B>")   # the op's rule on hover


def test_named_roots_and_retained_intermediates_get_nodes(device):
    a = mg.tensor(2.0, device=device, requires_grad=True)
    h = a * 3.0
    h.retain_grad()
    out = h.tanh()
    assert "const 3" in label_of(viz.to_dot(out), "<B>mul</B>")  # a scalar shown on its op
    out.backward()
    dot = viz.to_dot({"a": a, "out": out}, show_values=True, show_grad=True)
    assert len(nodes_of(dot)) == 5  # a, mul, h (retained), tanh, out
    assert "(a constant)" in label_of(dot, "<B>mul</B>")  # backward freed what it saved
    h_label = label_of(dot, "<B>tensor</B>")
    assert "= 6" in h_label and "grad = " in h_label
    assert "grad = " in label_of(dot, "<B>a</B>")


def test_mlp_parameter_names_clusters_and_counts(device):
    model, loss = mlp(device)
    dot = viz.to_dot(loss, model=model)
    # fc1: weight, bias, linear, the constant input; act: relu; fc2: weight, bias, linear;
    # then sum and the output
    assert len(nodes_of(dot)) == 10
    assert len(edges_of(dot)) == 9
    for name, shape in [("fc1.weight", "(4, 3)"), ("fc1.bias", "(4,)"), ("fc2.weight", "(2, 4)")]:
        assert shape in label_of(dot, f"<B>{name}</B>")
    assert "(5, 3)" in label_of(dot, "<B>constant</B>")
    assert clusters_of(dot) == {"": "Sequential", "fc1": "fc1 (Linear)", "act": "act (ReLU)",
                                "fc2": "fc2 (Linear)"}


def test_names_without_a_model_come_from_the_modules_in_the_graph(device):
    attn = nn.MultiheadAttention(8, 2).to(device)
    x = mg.randn(1, 3, 8, device=device)
    out, _ = attn(x, x, x)
    dot = viz.to_dot(out)
    assert "<B>q_proj.weight</B>" in dot and "<B>out_proj.bias</B>" in dot
    assert clusters_of(dot)[""] == "MultiheadAttention"
    assert clusters_of(dot)["k_proj"] == "k_proj (Linear)"
    plain = mg.randn(3, requires_grad=True) * nn.Parameter(mg.randn(3))
    assert "<B>param</B>" in viz.to_dot(plain)  # a parameter outside any module


# --- modules: depth and repeated blocks -------------------------------------------------------

class Chain(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.mark.parametrize("depth, repeats, n_nodes, n_edges", [
    (None, False, 3 * 3 + 2, 3 * 3 + 1),  # weight, bias, linear per layer; the input; output
    (None, True, 3 + 2, 3 + 1),           # layer 0's ops drawn once for all three
    (0, False, 3 + 1, 3),                 # one node per layer, chained
    (0, True, 1 + 1, 1),                  # one node for all three
])
def test_depth_and_repeats_exact_counts(device, depth, repeats, n_nodes, n_edges):
    model = Chain().to(device)
    out = model(mg.randn(2, 4, device=device))
    dot = viz.to_dot(out, model=model, depth=depth, collapse_repeats=repeats)
    assert (len(nodes_of(dot)), len(edges_of(dot))) == (n_nodes, n_edges)
    if depth == 0:
        assert ("layers.[0-2] ×3" in dot) == repeats
        assert ("20 params each · out (2, 4)" if repeats else "20 params · out (2, 4)") in dot
    if depth is None and repeats:
        assert clusters_of(dot)["layers.0"] == "layers.[0-2] ×3 (Linear)"
        assert "<B>layers.[0-2].weight</B>" in dot


def test_transformer_at_depth_2_is_small_and_named(device):
    model, loss = seq2seq_loss(device)
    dot = viz.to_dot(loss, model=model, depth=2)
    assert len(nodes_of(dot)) < 80
    assert "encoder.layers.[0-1] ×2 (TransformerEncoderLayer)" in dot
    assert "decoder.layers.[0-1] ×2 (TransformerDecoderLayer)" in dot
    assert "<B>decoder.layers.[0-1].cross_attn</B> (MultiheadAttention)" in dot
    assert "1,088 params each · out (2, 4, 16)" in dot   # an attention block, collapsed
    full = viz.to_dot(loss, model=model, collapse_repeats=False)
    assert "<B>encoder.layers.0.self_attn.q_proj.weight</B>" in full
    assert "<B>decoder.layers.1.cross_attn.k_proj.bias</B>" in full
    clusters = clusters_of(full)
    assert clusters["encoder.layers.1.self_attn"] == \
        "encoder.layers.1.self_attn (MultiheadAttention)"
    assert clusters["decoder.norm"] == "decoder.norm (LayerNorm)"
    encoder = viz.to_dot(loss, model=model, depth=0)
    params = sum(p.numel() for p in model.encoder.parameters())
    assert f"{params:,} params · out (2, 5, 16)" in label_of(encoder, "<B>encoder</B>")


# --- gradients on the picture -----------------------------------------------------------------

def test_gradients_colour_nodes_and_nan_is_red(device):
    small = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    bad = mg.tensor([-1.0, 4.0], device=device, requires_grad=True)
    big = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    with np.errstate(invalid="ignore"):  # sqrt(-1): the NaN this test is about
        loss = (small * 1e-9).sum() + bad.sqrt().sum() + (big * 1e3).sum()
    loss.backward()
    dot = viz.to_dot({"small": small, "bad": bad, "big": big, "loss": loss}, show_grad=True)
    low, high = viz.colours.PALETTE[0], viz.colours.PALETTE[-1]
    assert f'fillcolor="{low}"' in label_of(dot, "<B>small</B>")   # the graph's smallest
    assert f'fillcolor="{high}"' in label_of(dot, "<B>big</B>")    # and its largest
    bad_label = label_of(dot, "<B>bad</B>")
    assert f'fillcolor="{viz.dot.NONFINITE}"' in bad_label and "1 NaN/inf" in bad_label
    assert "grad norm (log scale" in dot                             # the colour legend


def test_the_fill_darkens_with_the_grad_norm_the_label_prints(device):
    """One measure: the labels print each gradient's norm, the legend names the norm, and
    a larger norm is a darker fill, whatever the tensors' sizes (a big tensor with small
    entries can have the larger norm but the smaller rms)."""
    many = mg.ones(400, device=device, requires_grad=True)  # norm 0.38, rms 0.019
    few = mg.ones(9, device=device, requires_grad=True)     # norm 0.72, rms 0.24
    mid = mg.ones(9, device=device, requires_grad=True)     # norm 0.09, rms 0.03
    loss = (many * 0.019).sum() + (few * 0.24).sum() + (mid * 0.03).sum()
    loss.backward()
    dot = viz.to_dot({"many": many, "few": few, "mid": mid, "loss": loss}, show_grad=True)
    fills, norms = {}, {}
    for name, t in (("mid", mid), ("many", many), ("few", few)):
        label = label_of(dot, f"<B>{name}</B>")
        norms[name] = float(re.search(r"grad norm ([\d.e+-]+)", label).group(1))
        assert math.isclose(norms[name], np.linalg.norm(t.grad.numpy()), rel_tol=1e-2)
        fills[name] = re.search(r'fillcolor="(#\w+)"', label).group(1)
    assert norms["mid"] < norms["many"] < norms["few"]
    lum = [viz.colours.luminance(fills[n]) for n in ("mid", "many", "few")]
    assert lum[0] > lum[1] > lum[2], fills
    assert "grad norm (log scale" in dot and "rms" not in dot


def test_large_gradients_show_norm_and_max_abs(device):
    model, loss = mlp(device)
    loss.backward()
    label = label_of(viz.to_dot(loss, model=model, show_grad=True), "<B>fc1.weight</B>")
    g = model.fc1.weight.grad.numpy()
    assert f"norm {np.linalg.norm(g):.3g} · max|g| {np.abs(g).max():.3g}" in label


def test_create_graph_gradients_can_be_drawn(device):
    x = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    (g,) = mg.grad((x ** 3).sum(), x, create_graph=True)
    dot = viz.to_dot(g)
    assert "<B>leaf</B>" in dot and "<B>output</B>" in dot and len(nodes_of(dot)) > 3


# --- backward graph ---------------------------------------------------------------------------

def run_order(loss):
    """The nodes in the order the engine really runs them (its per-node tracer)."""
    ran = []
    seed = loss.new_ones(loss.shape)
    engine.run_backward([loss], [seed], retain_graph=True,
                        on_node=lambda node, g_out, g_in: ran.append(node))
    return ran


def test_backward_graph_is_numbered_in_execution_order(device):
    model, loss = seq2seq_loss(device)
    dot = viz.to_dot(loss, model=model, backward=True, collapse_repeats=False)
    drawn = sorted((int(k), name) for ks, name in re.findall(r"<B>([\d, ]+)\. (\w+)</B>", dot)
                   for k in ks.split(", "))  # "2, 3. ViewBackward0": reshapes drawn as one
    ran = run_order(loss)
    assert drawn == [(k, n.name()) for k, n in enumerate(ran, 1)]
    assert f"Backward pass: {len(ran)} nodes" in dot


def test_saved_bytes_match_the_arrays_saved(device):
    model, loss = mlp(device)
    ops = engine.topological_order([loss.grad_fn])
    buffers = {}
    for node in ops:
        for saved in node.saved or ():
            arr = saved.array
            if arr is None:  # (what no gradient reads is not kept: a None in its place)
                continue
            while getattr(arr, "base", None) is not None:
                arr = arr.base
            buffers[id(arr)] = arr.nbytes
    assert held_bytes(ops)[:2] == (sum(buffers.values()), len(buffers))
    dot = viz.to_dot(loss, model=model, backward=True)
    assert f"saved for backward: {nbytes_text(sum(buffers.values()))} in {len(buffers)}" in dot
    relu = next(n for n in ops if type(n).__name__ == "ReluBackward0")
    assert relu.saved[0].array.nbytes == 5 * 4 * 4
    assert "saved out (5, 4) 80 B" in label_of(dot, "ReluBackward")
    loss.backward()
    assert "saved: freed by backward()" in label_of(viz.to_dot(loss, backward=True), "Relu")


# --- explain_backward -------------------------------------------------------------------------

def test_explain_backward_broadcast_and_accumulation(device):
    a = mg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device, requires_grad=True)
    b = mg.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
    h = (a * b).tanh()
    loss = (h * h + a).sum()   # h feeds both inputs of one mul; a is used twice
    ref = run_order(loss)
    a.grad = b.grad = None
    steps = viz.explain_backward(loss)
    assert [s.node for s in steps] == ref
    assert [s.step for s in steps] == list(range(1, len(ref) + 1))
    by_op = {s.op: s for s in steps}
    assert by_op["tanh"].uses == [2]                           # grad of h: sum of 2 uses
    mul_ab = steps[-1]
    assert mul_ab.broadcast == [(1, (2, 3), (3,))]              # b's gradient summed away
    assert mul_ab.accumulates == [(0, "leaf", 2)]               # a's 2nd use
    assert mul_ab.rule.startswith("out = x * y;")
    assert mul_ab.grad_out == [(2, 3)] and mul_ab.grad_in == [(2, 3), (2, 3)]
    t = np.tanh(a.numpy() * b.numpy())
    np.testing.assert_allclose(b.grad.numpy(), (2 * t * (1 - t * t) * a.numpy()).sum(0),
                               rtol=1e-5)
    table = str(steps)
    assert "rule: out = tanh(x);  dx = grad * (1 - out * out)" in table
    assert "summed to (3,) (broadcast)" in table and "grad = sum of 2 uses" in table


@needs_dot
def test_explain_backward_writes_one_frame_per_step(tmp_path, device):
    model, loss = mlp(device)
    steps = viz.explain_backward(loss, model=model, frames=tmp_path / "frames")
    files = sorted(p.name for p in (tmp_path / "frames").iterdir())
    assert files == [f"step_{k:03d}.svg" for k in range(1, len(steps) + 1)]
    svg = (tmp_path / "frames" / "step_003.svg").read_text(encoding="utf-8")
    text = "".join(ET.fromstring(svg).itertext())
    assert "step 3 of" in text and "#ffe066" in svg   # the caption and the active node


# --- rendering --------------------------------------------------------------------------------

@needs_dot
def test_render_svg_with_dot_parses_as_xml(tmp_path, device):
    model, loss = seq2seq_loss(device)
    path = viz.render(viz.draw(loss, model=model, depth=2), tmp_path / "seq2seq")
    assert path.endswith("seq2seq.svg")
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    assert "encoder.layers.[0-1] ×2 (TransformerEncoderLayer)" in "".join(root.itertext())
    svg = viz.draw(loss, model=model, backward=True).pipe(format="svg")
    ET.fromstring(svg)


def test_missing_dot_says_how_to_install_it(tmp_path, monkeypatch, device):
    model, loss = mlp(device)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no dot anywhere
    graph = viz.draw(loss, model=model)      # building the graph needs no dot
    assert "fc1.weight" in viz.to_dot(loss, model=model)
    for attempt in (lambda: viz.render(graph, tmp_path / "g"),
                    lambda: graph.pipe(format="svg"),
                    lambda: graph.render(tmp_path / "g2"),
                    lambda: viz.explain_backward(loss, frames=tmp_path / "frames")):
        with pytest.raises(RuntimeError) as info:
            attempt()
        message = str(info.value)
        for needed in ("apt-get install graphviz", "brew install graphviz",
                       "conda install -c conda-forge graphviz", "graphviz.org",
                       "mg.viz.to_dot"):
            assert needed in message
    assert model.fc1.weight.grad is None  # explain_backward failed before running backward
