"""python -m minigrad.demos.profile: the tables, a valid trace, the timeline and the graph,
and the composite attention holding more for backward than the tiled kernel."""
import json
import os

import pytest

from minigrad.demos import profile as demo
from tests.conftest import needs
from tests.test_profiler import _trace_checks

SMALL = ["--d-model", "16", "--nhead", "2", "--layers", "1", "--ff", "32", "--batch-size", "2"]


def run(tmp_path, device, *extra):
    needs("matplotlib", "graphviz")
    out = tmp_path / "out"
    prof, paths = demo.main([*SMALL, "--out", str(out), "--device", device, *extra])
    return prof, paths, out


def test_demo_prints_tables_and_writes_its_files(tmp_path, device, capsys):
    prof, paths, out = run(tmp_path, device)
    text = capsys.readouterr().out
    assert "op " in text and "module " in text and "profiler overhead" in text
    assert "saved for backward: peak" in text and "0 B still held at the end" in text
    names = {os.path.basename(p) for p in paths}
    assert {"trace.json", "memory.png"} <= names and names & {"graph.svg", "graph.dot"}
    assert f"Wrote {out}{os.sep}:" in text
    for p in paths:
        assert os.path.getsize(p) > 0 and f"  {os.path.basename(p)}  " in text
    with open(out / "trace.json") as f:
        tracks = _trace_checks(json.load(f))
    assert len(tracks) == 2  # forward and backward
    modules = {e.module for e in prof.events}
    assert {"encoder.layers.0.self_attn", "decoder.layers.0.cross_attn",
            "generator"} <= modules


def test_math_attention_holds_the_weights(tmp_path, device):
    tiled, _, _ = run(tmp_path, device)
    math, _, _ = run(tmp_path, device, "--attention", "math")
    assert "Attention" in {e.name for e in tiled.events}
    assert "Attention" not in {e.name for e in math.events}
    assert math.peak_memory()[0] > tiled.peak_memory()[0]


def test_a_bad_value_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        demo.main(["--d-model", "16", "--nhead", "3", "--out", str(tmp_path / "out")])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["python -m minigrad.demos.profile: error: argument --nhead: d_model 16 "
                   "is not divisible by nhead 3 (see -h)"]
    assert not (tmp_path / "out").exists()
