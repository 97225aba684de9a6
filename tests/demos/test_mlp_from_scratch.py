"""minigrad.demos.mlp_from_scratch: a short run prints its four parts, and writes nothing."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minigrad.demos import mlp_from_scratch as demo


def test_short_run_prints_the_four_parts(tmp_path, capsys, monkeypatch, device):
    monkeypatch.chdir(tmp_path)
    demo.main(["--steps", "5", "--device", device])
    printed = capsys.readouterr().out
    for part in ("1. training a 2-64-64-2 MLP", "2. y = x^2", "3. gradcheck", "4. detect_anomaly"):
        assert part in printed
    assert "dz/dx = 100 " in printed and "passed" in printed
    assert os.listdir(tmp_path) == []


def installed_copy(site):
    """The package laid out as ``pip install .`` (not editable) installs it: minigrad.nn,
    minigrad.models and minigrad.demos inside the minigrad folder."""
    root = Path(demo.__file__).resolve().parents[1]
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(root / "minigrad", site / "minigrad", ignore=ignore)
    for package in ("nn", "models", "demos"):
        shutil.copytree(root / package, site / "minigrad" / package, ignore=ignore)


def test_installed_the_anomaly_is_reported_at_the_demos_own_line(tmp_path):
    installed_copy(tmp_path / "site")
    done = subprocess.run([sys.executable, "-m", "minigrad.demos.mlp_from_scratch", "--steps",
                           "1"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("4. detect_anomaly"))
    where = str(tmp_path / "site" / "minigrad" / "demos" / "mlp_from_scratch.py")
    assert f'It was called at File "{where}", line ' in line, line
    assert "(x.log() * 2).sum().backward()" in line and "runpy" not in line
