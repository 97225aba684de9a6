"""minigrad.demos.residuals: the per-layer gradient norms, the shared start of the three
variants, and a short run that writes its metrics and picture."""
import json
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.demos import residuals as demo

from .closing import assert_closing_block


def tiny(name, device, layers=3):
    mg.manual_seed(0)
    return demo.CausalLM(16, d_model=16, nhead=2, num_layers=layers, dim_feedforward=32,
                         **demo.VARIANTS[name]).to(device)


@pytest.mark.parametrize("name", list(demo.VARIANTS))
def test_layer_grad_norms_one_finite_value_per_layer(name, device):
    model = tiny(name, device)
    idx = mg.tensor(np.random.default_rng(0).integers(0, 16, (2, 9)), device=device)
    logits = model(idx[:, :-1])                                              # (B, T, V)
    F.cross_entropy(logits.reshape(-1, 16), idx[:, 1:].reshape(-1)).backward()
    norms = demo.layer_grad_norms(model)
    assert len(norms) == 3
    assert all(isinstance(n, float) and math.isfinite(n) and n > 0 for n in norms)


def test_variants_start_from_the_same_weights(device):
    """Shared parameters are equal across the variants, and mHC with its streams all copies
    of one another at the start computes what pre-LN computes."""
    models = {name: tiny(name, device) for name in demo.VARIANTS}
    states = {name: model.state_dict() for name, model in models.items()}
    for key, value in states["pre-LN"].items():
        for name in ("post-LN", "mHC"):
            if key in states[name]:
                np.testing.assert_array_equal(states[name][key].numpy(), value.numpy())
    idx = mg.tensor(np.random.default_rng(0).integers(0, 16, (2, 8)), device=device)
    with mg.no_grad():
        np.testing.assert_allclose(models["mHC"](idx).numpy(), models["pre-LN"](idx).numpy(),
                                   atol=1e-5)


def test_short_run_writes_metrics_and_picture(tmp_path, capsys, device):
    metrics = demo.main(["--steps", "4", "--layers", "2", "--d-model", "16", "--out",
                         str(tmp_path), "--no-progress", "--device", device])
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert list(saved["variants"]) == ["post-LN", "pre-LN", "mHC"]
    assert saved["best"] == metrics["best"] in saved["variants"]
    for v in saved["variants"].values():
        assert v["heldout_loss"] > saved["entropy_rate"] > 0
        assert 0 <= v["heldout_accuracy"] <= 1 and v["wall_seconds"] >= 0
        assert len(v["train_loss"]) == 4 and math.isfinite(v["final_train_loss"])
        assert {len(norms) for norms in v["layer_grad_norms"].values()} == {2}
        assert "1" in v["layer_grad_norms"] and "4" in v["layer_grad_norms"]
    assert (tmp_path / "residuals.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert printed.startswith("results: held-out loss")
    assert_closing_block(printed, tmp_path, ["metrics.json", "residuals.png"])
    assert saved["heldout_sequences"] == demo.HELD_OUT


def test_the_curves_of_the_variants_are_told_apart(monkeypatch, tmp_path):
    """Each variant has its own line style and marker (mHC starts on top of pre-LN), its own
    offset in the per-layer panels, and the legends say which data each curve is on."""
    from matplotlib.figure import Figure

    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: saved.append(fig))
    styles = {(s["linestyle"], s["marker"]) for s in demo.STYLES.values()}
    assert len(styles) == len(demo.VARIANTS)
    norms = {"1": [1.0, 0.5], "4": [0.8, 0.4]}   # the same numbers for every variant
    variants = {name: {"train_loss": [2.8, 2.7, 2.6, 2.5], "heldout_curve": [(4, 2.5, 0.2)],
                       "heldout_loss": 2.5, "layer_grad_norms": norms}
                for name in demo.VARIANTS}
    demo.plot({"steps": 4, "layers": 2, "d_model": 16, "entropy_rate": 2.1,
               "heldout_sequences": demo.HELD_OUT, "variants": variants}, tmp_path / "x.png")
    loss_ax, first_ax, _ = saved[0].axes
    labels = [t.get_text() for t in loss_ax.get_legend().get_texts()]
    assert "pre-LN: held-out, final 2.500" in labels
    assert "mHC: training batches (smoothed)" in labels
    assert f"held-out: {demo.HELD_OUT} sequences" in loss_ax.get_title()
    xs = [tuple(line.get_xdata()) for line in first_ax.get_lines()]
    assert len(set(xs)) == len(demo.VARIANTS)                  # side by side, not on top
