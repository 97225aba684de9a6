"""minigrad.demos.gpt: the recall data, the attention replay, and a short run of both tasks that
writes its metrics and pictures (learning itself is tested in tests/models/test_gpt.py)."""
import json

import numpy as np

import minigrad as mg
from minigrad.demos import gpt as demo
from minigrad.models.gpt import GPT


def test_recall_batch():
    tokens, answers, where = demo.recall_batch(50, np.random.default_rng(0), n_queries=3)
    P = demo.N_PAIRS
    assert tokens.shape == (50, 2 * P + 6) and answers.shape == where.shape == (50, 3)
    keys, values = tokens[:, 0:2 * P:2], tokens[:, 1:2 * P:2]
    assert (keys < demo.N_KEYS).all() and (values >= demo.N_KEYS).all()
    assert all(len(set(row)) == P for row in keys)                          # distinct keys
    rows = np.arange(50)[:, None]
    np.testing.assert_array_equal(tokens[:, 2 * P::2], tokens[rows, where])  # the queries
    np.testing.assert_array_equal(answers, tokens[rows, where + 1])         # their values
    np.testing.assert_array_equal(tokens[:, 2 * P + 1::2], answers)


def test_attention_replay_is_the_model(device):
    """The replayed weights are distributions over the positions up to the last one, and the
    replayed blocks give the model's own output."""
    model = GPT(32, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, max_len=17,
                positional="rope").to(device)
    tokens = mg.tensor(demo.recall_batch(3, np.random.default_rng(0))[0][:, :-1], device=device)
    maps = demo.last_position_attention(model, tokens)
    assert len(maps) == 2 and maps[0].shape == (3, 2, 17)
    np.testing.assert_allclose(maps[1].sum(-1), 1.0, atol=1e-5)


def test_short_run_writes_metrics_and_pictures(tmp_path, capsys, device):
    metrics = demo.main(["--steps", "20", "--out", str(tmp_path), "--no-progress",
                         "--device", device])
    saved = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("heldout_loss", "entropy_rate", "recall_accuracy"):
        assert saved[key] == metrics[key]
    assert saved["heldout_loss"] > saved["entropy_rate"] > 0
    assert (tmp_path / "markov_curve.png").stat().st_size > 0
    assert (tmp_path / "recall_attention.png").stat().st_size > 0
    assert capsys.readouterr().out.startswith("results: held-out loss")
