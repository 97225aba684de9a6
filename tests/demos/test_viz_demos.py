"""The graph-picture demos run: each writes the SVG files it says it writes, and they parse
as XML (with Graphviz's dot); without dot they write the DOT text and say how to install
Graphviz."""
import importlib
import shutil
import xml.etree.ElementTree as ET

import pytest

from .closing import assert_closing_block

pytest.importorskip("graphviz")  # the optional `viz` extra

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")

# demo -> the files it writes under --out
DEMOS = {
    "viz_neuron": ["neuron_forward.svg", "neuron_backward_graph.svg", "neuron_grads.svg"],
    "viz_attention": ["attention_forward.svg", "attention_backward.svg"],
    "viz_transformer_step": ["transformer_step_depth1.svg", "transformer_step_depth2.svg",
                             "transformer_step_backward_depth1.svg"],
    "viz_backward_walkthrough": [f"frames/step_{k:03d}.svg" for k in range(1, 10)]
    + ["index.html"],
}


def svg_text(path):
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    return " ".join("".join(root.itertext()).split())


@needs_dot
@pytest.mark.parametrize("name", sorted(DEMOS))
def test_demo_writes_svgs_that_parse(name, tmp_path, capsys):
    demo = importlib.import_module(f"minigrad.demos.{name}")
    out = tmp_path / name
    paths = demo.main(["--out", str(out)])
    expected = {str(out / f) for f in DEMOS[name]}
    assert set(map(str, paths)) == expected
    for path in expected:
        if path.endswith(".svg"):
            svg_text(path)
    printed = capsys.readouterr().out
    assert_closing_block(printed, out)  # where it wrote them, what to look at in each


@needs_dot
def test_pictures_show_what_the_docstrings_promise(tmp_path, capsys):
    from minigrad.demos import viz_attention, viz_neuron, viz_transformer_step
    viz_neuron.main(["--out", str(tmp_path / "n")])
    grads = svg_text(tmp_path / "n" / "neuron_grads.svg")
    for text in ("x1*w1 + x2*w2", "= 0.7071", "grad = -1.5", "grad = 1", "grad = 0.5"):
        assert text in grads
    assert "saved out scalar 4 B" in svg_text(tmp_path / "n" / "neuron_backward_graph.svg")
    viz_attention.main(["--out", str(tmp_path / "a")])
    forward = svg_text(tmp_path / "a" / "attention_forward.svg")
    assert "q_proj (Linear)" in forward and "safe_softmax (dim=3)" in forward
    assert "saved for backward" in svg_text(tmp_path / "a" / "attention_backward.svg")
    viz_transformer_step.main(["--out", str(tmp_path / "t")])
    depth1 = svg_text(tmp_path / "t" / "transformer_step_depth1.svg")
    assert "encoder.layers.[0-1] ×2" in depth1 and "grad norm (log scale" in depth1
    assert "after one Adam step" in capsys.readouterr().out


@needs_dot
def test_walkthrough_table_and_png(tmp_path, capsys):
    from minigrad.demos import viz_backward_walkthrough
    paths = viz_backward_walkthrough.main(["--out", str(tmp_path), "--png"])
    table = capsys.readouterr().out
    assert "in1: (4, 2) summed to (2,) (broadcast)" in table
    assert "added to fc.weight.grad (3rd use)" in table
    pngs = [p for p in paths if p.endswith(".png")]
    assert len(pngs) == 9
    for p in pngs:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_without_dot_the_demos_write_dot_text_and_say_how_to_install(
        tmp_path, monkeypatch, capsys):
    from minigrad.demos import viz_backward_walkthrough, viz_neuron
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no dot anywhere
    paths = viz_neuron.main(["--out", str(tmp_path / "n")])
    assert [p.rsplit("/", 1)[1] for p in paths] == [
        "neuron_forward.dot", "neuron_backward_graph.dot", "neuron_grads.dot"]
    assert all(open(p).read().startswith("digraph") for p in paths)
    assert viz_backward_walkthrough.main(["--out", str(tmp_path / "w")]) == []
    printed = capsys.readouterr().out
    assert "apt-get install graphviz" in printed
    assert "summed to (2,) (broadcast)" in printed  # the table needs no Graphviz
