"""minigrad.demos.seq2seq, demos.tasks and demos.checkpoint: the held-out split never meets the
training stream, a short copy run learns to 100%, same seed gives same metrics, a run
stopped by Ctrl-C and resumed ends bit-identical to one that never stopped, a model of
another size is refused by name and shape (the command line: tests/demos/test_cli.py)."""
import json
from functools import partial
import shutil
import signal

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.demos import seq2seq
from minigrad.demos.checkpoint import CheckpointMismatch, load_checkpoint, save_checkpoint
from minigrad.demos.tasks import BOS, EOS, PAD, TASKS, Copy, Dataset, collate

TINY = ["--d-model", "16", "--nhead", "2", "--layers", "1", "--ff", "32", "--batch-size", "16",
        "--eval-size", "40", "--examples", "0", "--no-progress"]


def run(tmp_path, name, *argv, device="cpu"):
    """main() on the tiny model into tmp_path/name; returns (metrics, output folder)."""
    out = tmp_path / name
    metrics = seq2seq.main([*TINY, "--device", device, "--out", str(out), *argv])
    return metrics, out


# --- tasks and the held-out split -------------------------------------------------------------

TARGETS = [("copy", "31415", "31415"), ("reverse", "31415", "51413"),
           ("sort", "31415", "11345"), ("add", "123+4567", "4690"), ("add", "9+1", "10")]


@pytest.mark.parametrize("task, src, tgt", TARGETS)
def test_task_targets(task, src, tgt):
    task = TASKS[task]
    rng = np.random.default_rng(0)
    for _ in range(200):  # every sample is a correct example
        s, t = task.sample(rng)
        assert len(s) <= task.max_src_len and len(t) <= task.max_tgt_len
        text = task.text(s)
        if task.name == "add":
            assert int(task.text(t)) == sum(int(n) for n in text.split("+"))
        else:
            assert task.text(t) == {"copy": text, "reverse": text[::-1],
                                    "sort": "".join(sorted(text))}[task.name]
    assert task.text(task.ids(src)) == src
    assert task.text(task.ids(tgt) + [EOS, 5, 6]) == tgt


@pytest.mark.parametrize("task", sorted(TASKS))
def test_held_out_set_never_overlaps_the_training_data(task):
    """The split is by source and the same for every seed: no training batch of any seed
    holds a source of any seed's evaluation set."""
    task = TASKS[task]
    datasets = [Dataset(task, seed, eval_size=500) for seed in (0, 1)]
    held_out = set()
    for data in datasets:
        sources = {tuple(src) for src, _ in data.eval}
        assert len(sources) == len(data.eval) == 500  # distinct examples
        assert all(task.is_held_out(src) for src in sources)
        held_out |= sources
    for data in datasets:
        for step in range(150):  # 9,600 training examples per seed
            for src, _ in data.train_examples(step, 64):
                assert tuple(src) not in held_out and not task.is_held_out(src)


def test_the_split_holds_out_about_one_source_in_ten():
    rng = np.random.default_rng(0)
    sources = {tuple(TASKS["reverse"].sample(rng)[0]) for _ in range(5000)}
    share = np.mean([TASKS["reverse"].is_held_out(s) for s in sources])
    assert 0.07 < share < 0.13


def test_batches_are_a_pure_function_of_seed_and_step():
    a, b = Dataset(TASKS["sort"], 3, eval_size=10), Dataset(TASKS["sort"], 3, eval_size=10)
    for x, y in zip(a.batch(7, 32), b.batch(7, 32)):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a.batch(7, 32)[0], a.batch(8, 32)[0])
    assert a.eval == b.eval


def test_collate_pads_and_frames_with_bos_and_eos():
    src, tgt_in, tgt_out = collate([([5, 6, 7], [7, 6, 5]), ([4], [4])])
    np.testing.assert_array_equal(src, [[5, 6, 7], [4, PAD, PAD]])
    np.testing.assert_array_equal(tgt_in, [[BOS, 7, 6, 5], [BOS, 4, PAD, PAD]])
    np.testing.assert_array_equal(tgt_out, [[7, 6, 5, EOS], [4, EOS, PAD, PAD]])


# --- training ---------------------------------------------------------------------------------

def test_copy_on_short_sequences_learns_to_100_percent(tmp_path, monkeypatch, device):
    monkeypatch.setitem(seq2seq.TASKS, "copy", Copy(max_len=4))
    metrics, out = run(tmp_path, "copy", "--task", "copy", "--d-model", "32", "--ff", "64",
                       "--batch-size", "32", "--steps", "300", "--warmup", "30", "--lr", "3e-3",
                       "--eval-every", "1000", "--eval-size", "200", device=device)
    assert metrics["eval_exact_match"] == 1.0 and metrics["eval_token_accuracy"] == 1.0
    assert metrics["train_seconds"] > 0  # (its speed is the benchmarks' business)
    saved = json.loads((out / "metrics.json").read_text())
    for key in ("task", "steps", "train_seconds", "eval_exact_match", "eval_token_accuracy"):
        assert saved[key] == metrics[key]
    assert saved["task"] == "copy" and saved["steps"] == 300
    for name in ("curves.png", "attention.png", "checkpoint.safetensors"):
        assert (out / name).stat().st_size > 0
    if shutil.which("dot"):
        assert (out / "graph.svg").read_text().lstrip().startswith(("<?xml", "<svg"))


def test_same_seed_same_metrics(tmp_path, device):
    untimed = ("train_seconds",)
    argv = ["--task", "add", "--steps", "8", "--dropout", "0.1"]
    a, _ = run(tmp_path, "a", *argv, device=device)
    b, _ = run(tmp_path, "b", *argv, device=device)
    c, _ = run(tmp_path, "c", *argv, "--seed", "1", device=device)
    strip = lambda m: {k: v for k, v in m.items() if k not in untimed}  # noqa: E731
    assert strip(a) == strip(b)
    assert a["final_train_loss"] != c["final_train_loss"]


@pytest.fixture
def ctrl_c_interrupts():
    """Python's own Ctrl-C handler for the test: a process started in the background by a
    shell without job control inherits SIGINT ignored, and Python then installs none."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_at(monkeypatch, call):
    """Make the ``call``-th training step receive a real SIGINT (a Ctrl-C) mid-step. The tests
    raise it in the main thread, where Python runs its handler at once: sent to the process, it
    may go to another thread (NumPy's, minigrad's workers) and reach Python some time later."""
    real, calls = seq2seq.train_step, []

    def train_step(*args, **kwargs):
        calls.append(1)
        if len(calls) == call:
            signal.raise_signal(signal.SIGINT)
        return real(*args, **kwargs)
    monkeypatch.setattr(seq2seq, "train_step", train_step)


def test_a_ctrl_c_waits_for_the_step_and_a_second_one_does_not(ctrl_c_interrupts):
    done = []
    with pytest.raises(KeyboardInterrupt):
        with seq2seq._interrupt_deferred():
            signal.raise_signal(signal.SIGINT)
            done.append("rest of the step")
    assert done == ["rest of the step"]
    with pytest.raises(KeyboardInterrupt):
        with seq2seq._interrupt_deferred():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGINT)
            done.append("never")
    assert done == ["rest of the step"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_then_resume_is_bit_identical(tmp_path, monkeypatch, capsys, device,
                                             ctrl_c_interrupts):
    argv = ["--task", "reverse", "--steps", "14", "--dropout", "0.1", "--eval-every", "5"]
    _, whole = run(tmp_path, "whole", *argv, device=device)
    _interrupt_at(monkeypatch, 9)
    with pytest.raises(SystemExit) as info:
        run(tmp_path, "split", *argv, device=device)
    assert info.value.code == 130
    assert "interrupted after step 9" in capsys.readouterr().err
    monkeypatch.undo()
    _, split = run(tmp_path, "split", *argv, "--resume", device=device)
    assert "resuming from" in capsys.readouterr().err
    a = nn.load(whole / "checkpoint.safetensors", with_metadata=True)
    b = nn.load(split / "checkpoint.safetensors", with_metadata=True)
    assert list(a[0]) == list(b[0]) and any(k.startswith("optimizer.") for k in a[0])
    # the model and Adam's moments, bit for bit on the CPU. On the GPU the embeddings'
    # gradients are atomic scatter-adds, whose order (and so the last bit) varies, as
    # PyTorch's; Adam scales gradients that are only rounding noise (the key projections'
    # biases, which softmax cancels) to steps of lr, so those are left out there
    same = np.testing.assert_array_equal if device == "cpu" else \
        partial(np.testing.assert_allclose, rtol=1e-3, atol=1e-4)
    for key in a[0]:
        if device == "cpu" or "k_proj.bias" not in key:
            same(a[0][key].numpy(), b[0][key].numpy(), err_msg=key)
    meta_a, meta_b = (json.loads(m["minigrad.training"]) for m in (a[1], b[1]))
    for key in ("step", "optimizer", "scheduler", "rng"):
        assert meta_a[key] == meta_b[key], key
    same(meta_a["extra"]["loss"], meta_b["extra"]["loss"])


def test_resuming_into_another_model_size_names_the_key_and_shapes(tmp_path, device):
    _, out = run(tmp_path, "run", "--task", "copy", "--steps", "2", device=device)
    with pytest.raises(SystemExit) as info:
        run(tmp_path, "run", "--task", "copy", "--steps", "4", "--ff", "48", "--resume",
            device=device)
    message = str(info.value.code)
    assert message.startswith("python -m minigrad.demos.seq2seq: error: --resume:")
    assert "\n" not in message
    assert "encoder.layers.0.ffn.linear1.weight has shape (32, 16) in the checkpoint but " \
           "(48, 16) in the model" in message


def test_checkpoint_round_trip_and_layer_mismatch(tmp_path, device):
    args = seq2seq.parse_args([*TINY, "--task", "sort", "--steps", "10", "--device", device])
    model, opt, sched = seq2seq.build(args, TASKS["sort"])
    batch = [mg.tensor(a, device=device) for a in Dataset(TASKS["sort"], 0, 5).batch(0, 8)]
    for _ in range(3):
        seq2seq.train_step(model, opt, sched, batch, args)
    save_checkpoint(tmp_path / "c", model, opt, sched, 3, extra={"note": "hi"})
    fresh = seq2seq.build(args, TASKS["sort"])
    meta = load_checkpoint(tmp_path / "c", *fresh)
    assert meta["step"] == 3 and meta["extra"] == {"note": "hi"}
    for (k, v), w in zip(model.state_dict().items(), fresh[0].state_dict().values()):
        np.testing.assert_array_equal(v.numpy(), w.numpy(), err_msg=k)
    assert fresh[2].state_dict() == sched.state_dict()
    assert fresh[1].param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    deeper_args = seq2seq.parse_args([*TINY, "--layers", "2", "--device", device])
    deeper = seq2seq.build(deeper_args, TASKS["sort"])[0]
    with pytest.raises(CheckpointMismatch, match=r"encoder\.layers\.1\..* \(shape .*\) is "
                       r"missing from the checkpoint \(and \d+ more\)"):
        load_checkpoint(tmp_path / "c", deeper)
