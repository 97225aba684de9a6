"""minigrad.demos.forward_vs_reverse: the timed Jacobians agree, the plot and the graph are
written, the Newton step beats a gradient step, and a bad option is one line."""
import os

import numpy as np
import pytest

import minigrad as mg
from minigrad import func
from minigrad.demos import forward_vs_reverse as demo
from tests.conftest import needs


def test_the_demo_writes_its_plot_and_prints_the_sweeps(tmp_path, capsys):
    needs("matplotlib", "graphviz")
    results = demo.main(["--out", str(tmp_path), "--max-size", "4", "--fixed", "2",
                         "--repeats", "1"])
    assert [r[0] for r in results["n"]] == [1, 2, 4] == [r[0] for r in results["m"]]
    assert os.path.getsize(tmp_path / "jacobians.png") > 0
    assert any(p.startswith("tangent_graph") for p in os.listdir(tmp_path))
    out = capsys.readouterr().out
    assert "jacfwd ms" in out and "Newton step" in out


def test_the_newton_step_solves_the_quadratic_model(device):
    """On a quadratic, one Newton step (CG on hvp) lands on the minimum."""
    a = mg.tensor(np.array([[3.0, 1.0], [1.0, 2.0]]), device=device)
    b = mg.tensor(np.array([1.0, -1.0]), device=device)

    def loss(w):
        return 0.5 * (w * (a @ w)).sum() - (b * w).sum()
    w = demo.newton_step(loss, mg.zeros(2, dtype=mg.float64, device=device))
    np.testing.assert_allclose(w.numpy(), np.linalg.solve(a.numpy(), b.numpy()), rtol=1e-10)
    np.testing.assert_allclose(func.grad(loss)(w).numpy(), [0.0, 0.0], atol=1e-10)


@pytest.mark.needs("graphviz")
def test_the_tangent_graph_holds_the_jvp_ops():
    dot = demo.tangent_graph().source
    assert "tanh" in dot.lower() and "mul" in dot.lower()


def test_a_bad_option_is_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        demo.main(["--max-size", "0"])
    assert info.value.code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["python -m minigrad.demos.forward_vs_reverse: error: argument "
                   "--max-size: must be > 0, got 0 (see -h)"]
