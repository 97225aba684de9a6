"""minigrad.demos.attention_by_hand: the engine's numbers against NumPy and the hand formulas, the
printed claims, and the graph picture (an SVG when Graphviz's dot is installed, a clear
message when it is not)."""
import json
import shutil

import numpy as np
import pytest

from minigrad.demos import _cli, attention_by_hand as demo

Q, K, V = 2.0, np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 6.0])


def numpy_reference():
    """Scores, weights, output and d output / d query, keys in NumPy."""
    s = Q * K
    w = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
    out = w @ V
    dw = V                                   # d out / d w
    ds = w * (dw - w @ dw)                   # the softmax's vector-Jacobian product
    return s, w, out, ds @ K, ds * Q


def test_numbers_match_numpy_and_the_hand_formulas(device):
    t = demo.attention(device=device)
    s, w, out, dq, dk = numpy_reference()
    np.testing.assert_allclose(t["scores"].numpy(), [2.0, 4.0, 6.0], atol=1e-12)
    np.testing.assert_allclose(t["weights"].numpy(), w, atol=1e-12)
    assert t["out"].item() == pytest.approx(out, abs=1e-12)
    assert t["q"].grad.item() == pytest.approx(dq, abs=1e-12)
    np.testing.assert_allclose(t["keys"].grad.numpy(), dk, atol=1e-12)
    np.testing.assert_allclose(t["values"].grad.numpy(), w, atol=1e-12)
    np.testing.assert_allclose(t["weights"].grad.numpy(), V, atol=1e-12)  # d out / d w = v
    hand = demo.by_hand()
    np.testing.assert_allclose(hand["weights"], w, atol=1e-12)
    assert hand["out"] == pytest.approx(out, abs=1e-12)
    assert hand["dq"] == pytest.approx(dq, abs=1e-12)
    np.testing.assert_allclose(hand["dkeys"], dk, atol=1e-12)
    # the numbers of the worked example, to the digits usually quoted
    np.testing.assert_allclose(w, [0.016, 0.117, 0.867], atol=5e-4)
    assert out == pytest.approx(5.70, abs=5e-3)
    np.testing.assert_allclose(w, np.exp([2, 4, 6]) / np.exp([2, 4, 6]).sum(), atol=1e-6)
    assert out == pytest.approx(5.701874, abs=1e-6) and dq == pytest.approx(0.317191, abs=1e-6)


def test_report_says_what_is_right(device):
    text = demo.report(demo.attention(device=device), demo.by_hand())
    assert "[0.015876, 0.117310, 0.866813]" in text and "5.701874" in text
    assert "0.317191" in text                                                # do/dq
    assert "about [0.016, 0.117, 0.867] and the output about 5.70" in text
    assert "task" not in text and "NOT" not in text
    assert "[0.1, 0.3, 0.6] -> 5.0 would mislead" in text


needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")


@needs_dot
def test_main_writes_the_graph_and_metrics(tmp_path, capsys, device):
    pytest.importorskip("graphviz")
    metrics = demo.main(["--out", str(tmp_path), "--device", device])
    svg = (tmp_path / "attention_graph.svg").read_text()
    assert svg.lstrip().startswith("<?xml") or "<svg" in svg
    for label in ("scores = q*k", "weights = softmax", "grad = 0.3172", "5.702"):
        assert label in svg
    printed = capsys.readouterr().out
    assert printed.endswith(_cli.written_block(tmp_path, demo.written_files(
        str(tmp_path / "attention_graph.svg"), str(tmp_path / "attention_graph.dot"))) + "\n")
    assert "  attention_graph.svg  the graph" in printed
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["output"] == pytest.approx(metrics["output"]) == pytest.approx(5.701874, 1e-6)


def test_missing_dot_is_reported_clearly(tmp_path, monkeypatch, capsys, device):
    pytest.importorskip("graphviz")
    monkeypatch.setattr(shutil, "which", lambda name: None)  # as if dot were not installed
    demo.main(["--out", str(tmp_path), "--device", device])
    out = capsys.readouterr().out
    assert "No SVG written" in out and "apt-get install graphviz" in out
    assert (tmp_path / "attention_graph.dot").exists()
    assert not (tmp_path / "attention_graph.svg").exists()
    assert (tmp_path / "metrics.json").exists()
