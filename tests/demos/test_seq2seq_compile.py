"""``python -m minigrad.demos.seq2seq --compile``: the training step captured by mg.compile
and replayed gives the same losses and weights, bit for bit, as the eager step (same seed),
and the option is listed in ``-h``."""
import json
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad.demos import seq2seq
from minigrad.demos._cli import TrainingStep
from minigrad.demos.tasks import TASKS, Dataset
from tests.test_compile import capture_calls

TINY = ["--d-model", "16", "--nhead", "2", "--layers", "1", "--ff", "32", "--batch-size", "16",
        "--eval-size", "40", "--examples", "0", "--no-progress", "--task", "copy",
        "--dropout", "0.1"]


def _train(device, compiled, steps=6):
    """``steps`` updates on one batch (dropout, clipping and the warm-up schedule change at
    every step); returns the losses, accuracies, parameters and the update function."""
    args = seq2seq.parse_args([*TINY, "--steps", "20", "--device", device])
    mg.manual_seed(0)
    model, optimizer, scheduler = seq2seq.build(args, TASKS["copy"])
    update = TrainingStep(seq2seq.make_update(model, optimizer, scheduler, args), compiled)
    batch = [mg.tensor(a, device=device) for a in Dataset(TASKS["copy"], 0, 5).batch(0, 16)]
    history = [seq2seq.train_step(model, optimizer, scheduler, batch, args, update=update)
               for _ in range(steps)]
    return history, [p.numpy().copy() for p in model.parameters()], update


def test_compiled_steps_equal_eager_steps_bit_for_bit(device):
    eager, eager_params, _ = _train(device, False)
    compiled, params, update = _train(device, True)
    assert update.replays == 6 - capture_calls(update.step)
    assert compiled == eager  # losses (float32 read back exactly), right and total counts
    for p, q in zip(eager_params, params):
        assert np.array_equal(p, q)


def test_a_run_with_compile_ends_with_the_same_weights_and_metrics(tmp_path, device, capsys):
    safetensors = pytest.importorskip("safetensors.numpy")
    metrics, tensors = [], []
    for name, extra in (("eager", []), ("compiled", ["--compile"])):
        out = tmp_path / name
        m = seq2seq.main([*TINY, "--steps", "10", "--device", device, "--out", str(out), *extra])
        metrics.append({k: v for k, v in m.items() if k != "train_seconds"})
        tensors.append(safetensors.load_file(str(out / seq2seq.CHECKPOINT)))
    assert json.dumps(metrics[0]) == json.dumps(metrics[1])
    assert sorted(tensors[0]) == sorted(tensors[1])
    for key in tensors[0]:
        assert np.array_equal(tensors[0][key], tensors[1][key]), key
    err = capsys.readouterr().err
    replayed = re.search(r"mg\.compile: (\d+) of 10 steps replayed, (\d+) batch shape\(s\) "
                         r"captured\n", err)
    assert replayed and 0 < int(replayed.group(1)) < 10 and int(replayed.group(2)) > 0, err
    assert "running eagerly" not in err and "Warning" not in err, err


def test_a_step_whose_graph_is_drawn_runs_eagerly_under_compile(tmp_path, device, monkeypatch):
    """With ``graph_dir`` the step runs uncompiled (``TrainingStep.eager``): it builds the
    graph that is drawn, and mg.compile neither captures nor replays it."""
    drawn = []
    monkeypatch.setattr(seq2seq, "write_graph", lambda loss, model, out: drawn.append(loss))
    args = seq2seq.parse_args([*TINY, "--steps", "20", "--device", device])
    mg.manual_seed(0)
    model, optimizer, scheduler = seq2seq.build(args, TASKS["copy"])
    update = TrainingStep(seq2seq.make_update(model, optimizer, scheduler, args), True)
    batch = [mg.tensor(a, device=device) for a in Dataset(TASKS["copy"], 0, 5).batch(0, 16)]
    seq2seq.train_step(model, optimizer, scheduler, batch, args, tmp_path, update)
    assert len(drawn) == 1 and drawn[0].grad_fn is not None
    assert update.step.log == [] and update.replays == 0 and update.calls == 1


def test_compile_is_listed_with_its_help(capsys):
    with pytest.raises(SystemExit):
        seq2seq.parse_args(["-h"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--compile capture the training step with mg.compile and replay it" in text
    assert seq2seq.parse_args(["--compile"]).compile is True
    assert seq2seq.parse_args([]).compile is False
