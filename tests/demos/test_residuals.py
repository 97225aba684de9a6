"""minigrad.demos.residuals: the per-layer gradient norms, the shared start of the three
variants, and a short run that writes its metrics and picture."""
import json
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.demos import residuals as demo


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
    assert capsys.readouterr().out.startswith("results: held-out loss")
