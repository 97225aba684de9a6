"""minigrad.demos.bert: the evaluation set and its Bayes rule, and a short run that writes its
metrics and picture (learning itself is tested in tests/models/test_bert.py)."""
import json

import numpy as np
import pytest

from minigrad.demos import bert as demo
from minigrad.models.markov import MarkovChain

from .closing import assert_closing_block


def test_eval_set_masks_one_interior_symbol():
    chain = MarkovChain.random(demo.N_SYMBOLS, order=1, seed=0)
    inputs, where, answers, guess = demo.make_eval_set(chain, np.random.default_rng(0), 4000)
    rows = np.arange(4000)
    assert ((where >= 1) & (where <= demo.SEQ_LEN - 2)).all()
    assert (inputs[rows, where] == demo.MASK).all()
    assert ((inputs == demo.MASK).sum(1) == 1).all()
    assert (inputs[inputs != demo.MASK] >= demo.N_SPECIAL).all()
    P = chain.transitions
    a, c = inputs[0, where[0] - 1] - demo.N_SPECIAL, inputs[0, where[0] + 1] - demo.N_SPECIAL
    assert guess[0] == np.argmax([P[a, x] * P[x, c] for x in range(demo.N_SYMBOLS)])
    # the Bayes rule scores the Bayes-optimal accuracy, up to sampling error
    assert (guess == answers).mean() == pytest.approx(chain.masked_accuracy(), abs=0.03)


def test_short_run_writes_metrics_and_picture(tmp_path, capsys, device):
    metrics = demo.main(["--steps", "20", "--eval-size", "1000", "--out", str(tmp_path),
                         "--no-progress", "--device", device])
    saved = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("masked_accuracy", "bayes_accuracy"):
        assert saved[key] == metrics[key]
    assert 0 <= saved["masked_accuracy"] <= 1 and 0 < saved["bayes_accuracy"] < 1
    assert (tmp_path / "bert_curve.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert printed.startswith("results: masked accuracy")
    files = assert_closing_block(printed, tmp_path, ["metrics.json", "bert_curve.png"])
    assert "first 1000 held-out" in files["bert_curve.png"]  # its subset: all 1000 here
