"""A bad day gives one clear line, never a traceback or a silent wrong resume: a damaged
checkpoint is refused on --resume naming the entry; a full disk (or a file over ``ulimit
-f``) while a checkpoint, a picture or any other file is written is one line naming the
file and the cause, the previous checkpoint intact; a save killed by SIGKILL leaves a
temporary file that the next save removes; an --out on a read-only file system is one
line.

The full file systems are small tmpfs mounts where the tests may mount (root on Linux),
skipped elsewhere; the same failures are also simulated in-process (a write that raises
ENOSPC, /dev/full) and through ``RLIMIT_FSIZE``, which need no privilege."""
import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import minigrad as mg
from minigrad import nn
from minigrad.demos import _cli, seq2seq
from minigrad.text.data import write_pairs
from minigrad.text.tokenizers import ByteBPETokenizer
from minigrad.viz.explore import Explorer
from tests.conftest import needs

serialization = sys.modules[nn.save.__module__]

ROOT = Path(__file__).resolve().parents[2]
PROG = "python -m minigrad.demos.seq2seq: error: "
TINY = ["--d-model", "16", "--nhead", "2", "--layers", "1", "--ff", "32", "--batch-size", "16",
        "--eval-size", "40", "--examples", "0", "--no-progress", "--task", "copy"]
POSIX = pytest.mark.skipif(os.name != "posix", reason="needs POSIX")


def shell(*argv, preexec_fn=None, name="seq2seq"):
    """``python -m minigrad.demos.<name> argv`` in a subprocess; returns (status, the
    non-blank lines of stderr)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-m", f"minigrad.demos.{name}", *map(str, argv)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
                          preexec_fn=preexec_fn)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


def trained(out, steps=2):
    """A tiny copy run of ``steps`` steps in ``out``; returns its checkpoint's path."""
    seq2seq.main([*TINY, "--steps", str(steps), "--out", str(out)])
    return out / seq2seq.CHECKPOINT


def one_line(info):
    message = str(info.value.code)
    assert message.startswith(PROG) and "\n" not in message, message
    return message


# --- a damaged checkpoint ---------------------------------------------------------------------

def _rename_in_header(path, old, new):
    raw = path.read_bytes()
    assert len(old) == len(new) and raw.count(old) >= 1
    path.write_bytes(raw.replace(old, new, 1))


def _edit_meta(path, edit):
    tensors, meta = nn.load(path, with_metadata=True)
    training = json.loads(meta["minigrad.training"])
    edit(training, tensors)
    nn.save(tensors, path, metadata={"minigrad.training": json.dumps(training)})


DAMAGE = [
    ("renamed-tensor", lambda p: _rename_in_header(p, b'optimizer.state.5.exp_avg"',
                                                    b'optimvzer.state.5.exp_avg"'),
     "holds a tensor 'optimvzer.state.5.exp_avg'"),
    ("lost-tensor", lambda p: _edit_meta(p, lambda m, t: t.pop("optimizer.state.5.exp_avg")),
     "the state of parameter 5 (group 0) has no 'exp_avg'"),
    ("step-renamed", lambda p: _edit_meta(
        p, lambda m, t: m["optimizer"]["state"]["3"].update(sqep=m["optimizer"]["state"]["3"]
                                                            .pop("step"))),
     "the state of parameter 3 (group 0) has no 'step'"),
    ("negative-step", lambda p: _edit_meta(
        p, lambda m, t: m["optimizer"]["state"]["0"].update(step=-2)),
     "state 'step' of parameter 0 (group 0) is -2"),
    ("lr-renamed", lambda p: _edit_meta(
        p, lambda m, t: m["optimizer"]["param_groups"][0].update(lx=m["optimizer"]
                                                                ["param_groups"][0].pop("lr"))),
     "parameter group 0 of the loaded state dict has no 'lr'"),
    ("scheduler-key-lost", lambda p: _edit_meta(p, lambda m, t: m["scheduler"].pop("last_epoch")),
     "the scheduler's state does not fit (ValueError: WarmupCosineLR state dict has no "
     "'last_epoch')"),
]


@pytest.mark.parametrize("spoil, message", [d[1:] for d in DAMAGE], ids=[d[0] for d in DAMAGE])
def test_a_damaged_checkpoint_is_refused_in_one_line(tmp_path, spoil, message):
    path = trained(tmp_path / "run")
    spoil(path)
    with pytest.raises(SystemExit) as info:
        seq2seq.main([*TINY, "--steps", "4", "--out", str(tmp_path / "run"), "--resume"])
    line = one_line(info)
    assert line.startswith(PROG + f"--resume: {path}: ") and message in line, line


def test_a_renamed_key_stops_the_program_from_the_shell(tmp_path):
    path = trained(tmp_path / "run")
    _rename_in_header(path, b'optimizer.state.5.exp_avg"', b'optimvzer.state.5.exp_avg"')
    status, lines = shell(*TINY, "--steps", "4", "--out", tmp_path / "run", "--resume")
    assert status == 1 and len(lines) == 1, lines
    assert lines[0].startswith(PROG + "--resume: ") and "optimvzer.state.5.exp_avg" in lines[0]


def test_a_checkpoint_whose_scheduler_is_of_another_kind_is_refused(tmp_path):
    path = trained(tmp_path / "run")
    _edit_meta(path, lambda m, t: m["scheduler"].update(last_epoch="2"))
    with pytest.raises(SystemExit) as info:
        seq2seq.main([*TINY, "--steps", "4", "--out", str(tmp_path / "run"), "--resume"])
    assert "has 'last_epoch' = '2': expected a number" in one_line(info)


# --- nn.save: a failed write names the file, keeps the previous one ---------------------------

def _state():
    return {"w": mg.arange(4096, dtype=mg.float32), "b": mg.ones(3)}


def _temporaries(folder):
    return sorted(n for n in os.listdir(folder) if n.endswith(".tmp"))


def _full_on_write(monkeypatch, err=errno.ENOSPC):
    def write(fd, data):
        raise OSError(err, os.strerror(err))
    monkeypatch.setattr(serialization.os, "write", write)


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EFBIG])
def test_save_on_a_full_disk_names_the_file_and_keeps_the_previous_one(tmp_path, monkeypatch,
                                                                        err):
    path = tmp_path / "checkpoint.safetensors"
    nn.save({"old": mg.ones(2)}, path)
    before = path.read_bytes()
    _full_on_write(monkeypatch, err)
    with pytest.raises(OSError) as info:
        nn.save(_state(), path)
    assert info.value.errno == err and info.value.filename == str(path)
    assert str(path) in str(info.value) and os.strerror(err) in str(info.value)
    assert path.read_bytes() == before and _temporaries(tmp_path) == []


@contextlib.contextmanager
def tmpfs(size, options=""):
    """A tmpfs of ``size`` mounted on a new folder (skips the test where mounting is not
    allowed: not root, not Linux, a container without the capability)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root on Linux")
    folder = tempfile.mkdtemp(prefix="minigrad-full-")
    opts = f"size={size}" + (f",{options}" if options else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", folder],
                          capture_output=True, text=True)
    if done.returncode != 0:
        os.rmdir(folder)
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield Path(folder)
    finally:
        subprocess.run(["umount", folder], check=True)
        os.rmdir(folder)


def test_save_on_a_really_full_file_system(tmp_path):
    with tmpfs("64k") as disk:
        path = disk / "checkpoint.safetensors"
        nn.save({"old": mg.ones(2)}, path)
        before = path.read_bytes()
        with pytest.raises(OSError) as info:
            nn.save({"w": mg.zeros(64 * 1024)}, path)  # 256 KiB
        assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
        assert path.read_bytes() == before and _temporaries(disk) == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("write", [
    lambda path: ByteBPETokenizer.train("a few words of text", 270).save(path),
    lambda path: write_pairs(path, [("a", "b")] * 3),
    lambda path: Explorer("<html>" + "x" * 10000, None, {}).save(path),
    lambda path: _profile().export_chrome_trace(path),
], ids=["tokenizer", "pairs", "page", "trace"])
def test_the_library_names_the_file_a_full_disk_refuses(write):
    with pytest.raises(OSError) as info:
        write("/dev/full")  # every write there fails with ENOSPC
    assert info.value.errno == errno.ENOSPC and info.value.filename == "/dev/full"


def _profile():
    x = mg.randn(64, 64, requires_grad=True)
    with mg.profiler.profile() as prof:
        (x.tanh() * x).sum().backward()
    return prof


# --- temporaries of a killed save -------------------------------------------------------------

KILLED_SAVE = """
import os, signal, sys
from minigrad import files, nn
import minigrad as mg
def half(fd, payload):
    os.write(fd, bytes(payload[:100]))
    os.kill(os.getpid(), signal.SIGKILL)
files._write_all = half
nn.save({"w": mg.zeros(1000)}, sys.argv[1])
"""


@POSIX
def test_the_next_save_removes_the_temporary_of_a_killed_one(tmp_path):
    path = tmp_path / "checkpoint.safetensors"
    nn.save({"old": mg.ones(2)}, path)
    done = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(path)], cwd=ROOT)
    assert done.returncode == -signal.SIGKILL
    left = _temporaries(tmp_path)
    assert len(left) == 1 and left[0].startswith(".checkpoint.safetensors.")
    assert nn.load(path)["old"].tolist() == [1.0, 1.0]  # the previous one intact
    unrelated = [".checkpoint.safetensors.xyz.tmp", ".other.safetensors.0123456789ab.tmp",
                 "checkpoint.safetensors.0123456789ab.tmp", "notes.tmp"]
    for name in unrelated:
        (tmp_path / name).write_text("not ours")
    nn.save({"new": mg.ones(2)}, path)
    assert _temporaries(tmp_path) == sorted(unrelated)
    assert list(nn.load(path)) == ["new"]


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX locks")
def test_a_temporary_being_written_is_left_alone(tmp_path):
    """A save in progress (another process's, its temporary locked) keeps its file."""
    import fcntl
    busy = tmp_path / ".checkpoint.safetensors.0123456789ab.tmp"
    busy.write_bytes(b"half")
    with open(busy, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        nn.save({"w": mg.ones(2)}, tmp_path / "checkpoint.safetensors")
        assert busy.exists()
    nn.save({"w": mg.ones(2)}, tmp_path / "checkpoint.safetensors")
    assert not busy.exists()


# --- the demos: a failed write is one line naming the file ------------------------------------

def test_a_full_disk_at_the_checkpoint_is_one_line_in_process(tmp_path, monkeypatch):
    out = tmp_path / "run"
    path = trained(out)
    before = path.read_bytes()
    _full_on_write(monkeypatch)
    with pytest.raises(SystemExit) as info:
        seq2seq.main([*TINY, "--steps", "4", "--out", str(out), "--resume"])
    assert one_line(info) == PROG + f"--out: cannot write {path} (No space left on device)"
    assert path.read_bytes() == before and _temporaries(out) == []


@pytest.mark.parametrize("picture", ["curves.png", "attention.png"])
def test_a_full_disk_at_a_picture_is_one_line(tmp_path, monkeypatch, picture):
    """matplotlib's write fails with an error that names no file; the program names it."""
    from matplotlib.figure import Figure
    real = Figure.savefig

    def savefig(self, fname, *args, **kwargs):
        if os.path.basename(str(fname)) == picture:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(self, fname, *args, **kwargs)
    monkeypatch.setattr(Figure, "savefig", savefig)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as info:
        seq2seq.main([*TINY, "--steps", "2", "--out", str(out)])
    assert one_line(info) == PROG + f"--out: cannot write {out / picture} (No space left on " \
                                    "device)"


def test_a_full_disk_whose_error_names_no_file_still_is_one_line(tmp_path):
    """What ``naming`` did not wrap: one line naming the folder."""
    with pytest.raises(SystemExit) as info:
        with _cli.writing_to("seq2seq", tmp_path):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert one_line(info) == PROG + f"--out: cannot write in {tmp_path} (No space left on device)"


def _file_size_limit(limit):
    def preexec():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write with EFBIG, not die
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return preexec


@POSIX
@pytest.mark.parametrize("ignored", [True, False], ids=["sigxfsz-ignored", "sigxfsz-default"])
def test_a_file_over_the_size_limit_is_one_line_from_the_shell(tmp_path, ignored):
    """``ulimit -f``: the checkpoint (about 100 KB) is refused at 40 KB. With SIGXFSZ left
    as the shell leaves it, the program itself ignores it while it writes."""
    preexec = _file_size_limit(40_000)
    if not ignored:
        def preexec(inner=preexec):
            inner()
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    out = tmp_path / "run"
    status, lines = shell(*TINY, "--steps", "2", "--out", out, preexec_fn=preexec)
    expected = PROG + f"--out: cannot write {out / seq2seq.CHECKPOINT} (File too large)"
    assert status == 1 and lines[-1] == expected, lines
    assert _temporaries(out) == []


def test_a_really_full_disk_is_one_line_from_the_shell():
    """At the checkpoint (64 KiB), at a picture (200 KiB: the checkpoint and curves.png fit,
    attention.png does not)."""
    for size, file in (("64k", seq2seq.CHECKPOINT), ("200k", "attention.png")):
        with tmpfs(size) as disk:
            status, lines = shell(*TINY, "--steps", "2", "--out", disk / "run")
            assert status == 1, lines
            assert lines[-1] == PROG + f"--out: cannot write {disk / 'run' / file} (No space " \
                                       "left on device)", lines


def test_a_read_only_out_is_one_line():
    with tmpfs("64k", "ro") as disk:
        status, lines = shell(*TINY, "--steps", "2", "--out", disk / "run")
        assert status == 2 and lines == [f"{PROG}argument --out: cannot write in {disk} "
                                         "(read-only file system)"], lines


# every program that writes files, on a full disk: (program, fast arguments, what it needs
# to write all its files: without Graphviz a program that draws writes less, which fits)
DRAWS, PLOTS = ["graphviz", "dot"], ["tqdm", "matplotlib"]
PROGRAMS = [
    ("attention_by_hand", [], DRAWS), ("bert", ["--steps", "1"], PLOTS),
    ("forward_vs_reverse", [], ["matplotlib", *DRAWS]), ("gpt", ["--steps", "1"], PLOTS),
    ("profile", [], DRAWS), ("residuals", ["--steps", "1", "--warmup", "0"], PLOTS),
    ("viz_attention", [], DRAWS), ("viz_neuron", [], DRAWS), ("viz_transformer_step", [], DRAWS),
    ("viz_backward_walkthrough", [], DRAWS), ("explore", [], ["dot"]),
    ("caption", ["--steps", "1", "--d-model", "32", "--held-out", "1", "--pictures", "1"],
     PLOTS),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, argv, what", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_every_program_on_a_full_disk_is_one_line(name, argv, what):
    needs(*what)
    with tmpfs("8k") as disk:
        status, lines = shell(*argv, "--out", disk / name, name=name)
        prog = f"python -m minigrad.demos.{name}: error: --out: cannot write {disk / name}"
        assert status == 1 and lines[-1].startswith(prog), lines
        assert lines[-1].endswith("(No space left on device)"), lines


def test_the_file_size_limit_signal_is_put_back(tmp_path):
    if not hasattr(signal, "SIGXFSZ"):
        pytest.skip("no SIGXFSZ")
    before = signal.getsignal(signal.SIGXFSZ)
    with _cli.writing_to("seq2seq", tmp_path):
        assert signal.getsignal(signal.SIGXFSZ) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGXFSZ) == before


def test_a_refused_checkpoint_leaves_model_optimiser_and_scheduler_as_they_were(tmp_path):
    from minigrad.demos.checkpoint import load_checkpoint
    from minigrad.demos.tasks import TASKS
    path = trained(tmp_path / "run")
    _edit_meta(path, lambda m, t: t.pop("optimizer.state.5.exp_avg"))
    args = seq2seq.parse_args([*TINY, "--steps", "4"])
    model, optimizer, scheduler = seq2seq.build(args, TASKS["copy"])
    weights = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    state, groups, last = optimizer.state, optimizer.param_groups, scheduler.state_dict()
    with pytest.raises(ValueError, match="parameter 5 .* has no 'exp_avg'"):
        load_checkpoint(path, model, optimizer, scheduler)
    assert all((v.numpy() == weights[k]).all() for k, v in model.state_dict().items())
    assert optimizer.state is state and optimizer.param_groups is groups
    assert scheduler.state_dict() == last
