"""--compile in every demo that trains: the update captured by mg.compile and replayed gives
the same losses and metrics, bit for bit, as the eager run from the same seed, and the demo
says how many steps it replayed (or, when mg.compile gives up on a step, why, in one line).
The seq2seq demo's --compile is tested in test_seq2seq_compile.py."""
import json
import re
import warnings

import pytest

import minigrad as mg
from minigrad.demos import _cli, bert, caption, extrapolate, gpt, mlp_from_scratch, residuals
from minigrad.demos import seq2seq

REPLAYED = re.compile(r"mg\.compile(?: \((.+?)\))?: (\d+) of (\d+) steps replayed, "
                      r"(\d+) batch shape\(s\) captured")


def _runs(run, capsys):
    """``run(extra)`` without and with --compile: (eager result, compiled result, what the
    compiled run printed on stdout, on stderr, and the eager run's stdout)."""
    eager = run([])
    eager_out = capsys.readouterr().out
    compiled = run(["--compile"])
    out, err = capsys.readouterr()
    return eager, compiled, out, err, eager_out


def _replayed(err, names, steps):
    """The demo's closing line of mg.compile for each run in ``names``: every step counted,
    some replayed."""
    found = {m.group(1): (int(m.group(2)), int(m.group(3))) for m in REPLAYED.finditer(err)}
    assert sorted(found, key=str) == sorted(names, key=str), err
    for name in names:
        replays, calls = found[name]
        assert calls == steps and 0 < replays < calls, (name, err)
    assert "running eagerly" not in err and "Warning" not in err, err


def _without(metrics, *keys):
    return json.dumps({k: v for k, v in metrics.items() if k not in keys})


@pytest.mark.slow  # the demo's fixed sizes and its held-out evaluation
def test_gpt(tmp_path, capsys, device):
    """The recall task (the Markov task trains through the same ``gpt.train``)."""
    def run(extra):
        return gpt.main(["--task", "recall", "--steps", "5", "--out", str(tmp_path),
                         "--no-progress", "--device", device, *extra])
    eager, compiled, out, err, eager_out = _runs(run, capsys)
    assert _without(eager, "train_seconds") == _without(compiled, "train_seconds")
    assert out == eager_out  # the results line and the closing block
    _replayed(err, ["recall"], 5)


@pytest.mark.slow  # the demo's fixed sizes and its held-out evaluation
def test_bert(tmp_path, capsys, device):
    def run(extra):
        return bert.main(["--steps", "6", "--eval-size", "300", "--out", str(tmp_path),
                          "--no-progress", "--device", device, *extra])
    eager, compiled, out, err, eager_out = _runs(run, capsys)
    assert _without(eager, "train_seconds") == _without(compiled, "train_seconds")
    assert out == eager_out
    _replayed(err, ["bert"], 6)


def test_caption(tmp_path, capsys, device):
    """Every step's loss (final_loss is their mean) and the held-out captions agree."""
    def run(extra):
        return caption.main(["--steps", "6", "--batch-size", "8", "--d-model", "16", "--ff",
                             "32", "--layers", "1", "--held-out", "20", "--pictures", "2",
                             "--out", str(tmp_path), "--no-progress", "--device", device,
                             *extra])
    eager, compiled, out, err, eager_out = _runs(run, capsys)
    assert _without(eager, "train_seconds") == _without(compiled, "train_seconds")
    assert out.split(" steps in ")[0] == eager_out.split(" steps in ")[0]
    _replayed(err, ["caption"], 6)


@pytest.mark.slow  # the demo's fixed sizes and its held-out evaluation
def test_residuals(tmp_path, capsys, device, monkeypatch):
    """Post-LN's and mHC's losses of every step, gradient norms (the per-layer ones read from
    eager steps between the replayed ones) and held-out losses agree (pre-LN is left out for
    time: it is mHC's sublayers without the streams)."""
    variants = {name: residuals.VARIANTS[name] for name in ("post-LN", "mHC")}
    monkeypatch.setattr(residuals, "VARIANTS", variants)

    def run(extra):
        return residuals.main(["--steps", "8", "--layers", "2", "--d-model", "16", "--out",
                               str(tmp_path), "--no-progress", "--device", device, *extra])
    eager, compiled, _, err, _ = _runs(run, capsys)
    for m in (eager, compiled):
        for v in m["variants"].values():
            v.pop("wall_seconds")
    assert json.dumps(eager) == json.dumps(compiled)
    assert len(eager["variants"]["mHC"]["layer_grad_norms"]) == 5
    _replayed(err, list(variants), 8)


def test_extrapolate(tmp_path, capsys, device, monkeypatch):
    small = dict(d_model=16, nhead=2, layers=1, ff=32, batch_size=8)
    for key, value in small.items():
        monkeypatch.setitem(seq2seq.DEFAULTS, key, value)

    def run(extra):
        return extrapolate.main(["--positional", "t5", "alibi", "--steps", "8", "--eval-size",
                                 "6", "--out", str(tmp_path), "--no-progress", "--device",
                                 device, *extra])
    eager, compiled, _, err, _ = _runs(run, capsys)
    assert [_without(r, "train_seconds") for r in eager] == \
        [_without(r, "train_seconds") for r in compiled]
    _replayed(err, ["t5", "alibi"], 8)


def test_mlp_from_scratch(capsys, device):
    """The same printed losses and accuracies. Its update is written by hand, in place
    (``p.sub_(v, alpha=lr)`` under no_grad, then ``p.grad = None``), which mg.compile
    records: every step after the captures is replayed."""
    def run(extra):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a warning would fail the test
            return mlp_from_scratch.main(["--steps", "8", "--device", device, *extra])
    _, _, out, err, eager_out = _runs(run, capsys)
    assert out == eager_out
    summary = [line for line in err.splitlines() if REPLAYED.match(line)]
    assert len(summary) == 1, err
    replays, calls = map(int, REPLAYED.match(summary[0]).group(2, 3))
    assert calls == 8 and replays == calls - 3, err


def test_training_step_reports_a_fallback_in_one_line(capsys, device):
    """A step that reads its loss on the host (to return a Python number) cannot be
    replayed: TrainingStep says why on stderr once, at the call that gave up, and counts it
    in its summary."""
    w = mg.ones(3, requires_grad=True, device=device)

    def update(x):
        loss = (w * x).sum()
        loss.backward()
        return loss.item()
    step = _cli.TrainingStep(update, compiled=True, name="toy")
    x = mg.ones(3, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said by the demo, not as a Python warning
        results = [step(x) for _ in range(4)]
    step.report()
    assert results == [3.0] * 4 and w.grad.tolist() == [4.0] * 3
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("mg.compile (toy): running eagerly: the step reads a tensor's "
                               "value on the host (Tensor.item())")
    assert lines[1] == ("mg.compile (toy): 0 of 4 steps replayed, 0 batch shape(s) captured, "
                        "1 ran eagerly (why: above)")


def test_training_step_without_compile_is_the_step(capsys):
    step = _cli.TrainingStep(lambda x: x + 1, compiled=False)
    assert step(mg.ones(2)).tolist() == [2.0, 2.0] and step.replays == 0
    assert step.summary() is None
    step.report()
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("demo", [gpt, bert, caption, residuals, extrapolate, mlp_from_scratch])
def test_compile_is_an_option_of_every_training_demo(demo, capsys):
    with pytest.raises(SystemExit):
        demo.parse_args(["-h"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--compile capture the training step with mg.compile and replay it" in text
    assert demo.parse_args(["--compile"]).compile is True
    assert demo.parse_args([]).compile is False
