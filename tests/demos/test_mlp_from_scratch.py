"""minigrad.demos.mlp_from_scratch: a short run prints its four parts, and writes nothing."""
import os

from minigrad.demos import mlp_from_scratch as demo


def test_short_run_prints_the_four_parts(tmp_path, capsys, monkeypatch, device):
    monkeypatch.chdir(tmp_path)
    demo.main(["--steps", "5", "--device", device])
    printed = capsys.readouterr().out
    for part in ("1. training a 2-64-64-2 MLP", "2. y = x^2", "3. gradcheck", "4. detect_anomaly"):
        assert part in printed
    assert "dz/dx = 100 " in printed and "passed" in printed
    assert os.listdir(tmp_path) == []
