"""minigrad.demos.gpt: the recall data, the attention replay, and a short run of both tasks that
writes its metrics and pictures (learning itself is tested in tests/models/test_gpt.py)."""
import json

import numpy as np

import minigrad as mg
from minigrad.demos import gpt as demo
from minigrad.models.gpt import GPT

from .closing import assert_closing_block


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
    printed = capsys.readouterr().out
    assert printed.startswith("results: held-out loss")
    assert_closing_block(printed, tmp_path, ["metrics.json", "markov_curve.png",
                                             "recall_attention.png"])


def test_the_recall_picture_labels_rows_columns_and_boxes(monkeypatch, tmp_path):
    """One heat map per layer and head, one row per example named by its query and answer,
    the matching key and its value boxed."""
    from matplotlib.figure import Figure

    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: saved.append(fig))
    tokens, _, where = demo.recall_batch(3, np.random.default_rng(0))
    tokens, where = tokens[:, :-1], where[:, 0]
    maps = [np.full((3, 2, tokens.shape[1]), 1 / tokens.shape[1]) for _ in range(2)]
    demo.plot_recall_attention(maps, tokens, where, tmp_path / "recall.png")
    panels = [ax for ax in saved[0].axes if ax.get_images()]
    assert len(panels) == 2 * 2                                       # layers x heads
    rows = [t.get_text() for t in panels[0].get_yticklabels()]
    assert rows == [" → ".join(demo.token_names(row[[w, w + 1]]))
                    for row, w in zip(tokens, where)]
    columns = [t.get_text() for t in panels[2].get_xticklabels()]  # the bottom row
    assert columns[:2] == ["key 1", "value 1"] and columns[-1] == "query"
    assert panels[0].get_ylabel().startswith("layer 0") and panels[2].get_ylabel().startswith(
        "layer 1")
    assert panels[2].get_xlabel()
    boxes = [(p.get_xy(), p.get_edgecolor()) for p in panels[0].patches]
    assert len(boxes) == 2 * 3                                        # key and value per row
    assert {xy for xy, _ in boxes} == {(c - 0.5, i - 0.5) for i, w in enumerate(where)
                                       for c in (w, w + 1)}
