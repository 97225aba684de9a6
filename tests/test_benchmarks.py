"""The benchmark programs run and measure what they say (no speed is asserted here)."""
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import minigrad as mg
from benchmarks import gpu, run, timing, workloads
from tests.torch_ref import needs_torch, torch


def test_the_floor_replays_every_matrix_product_of_a_step():
    x, w = mg.randn(3, 4, requires_grad=True), mg.randn(5, 4, requires_grad=True)

    def step():  # forward: linear + matmul; backward: two products each
        ((x @ w.T) @ w).sum().backward()
    floor = run.matmul_floor(step)
    assert floor.count == 6
    floor()
    assert np.matmul is not None and np.matmul.__name__ == "matmul"  # restored


def test_peak_extra_memory_sees_a_large_temporary():
    """In a fresh process, as benchmarks.run measures (this one's allocator may already
    hold freed memory that a temporary reuses without growing)."""
    code = ("import numpy as np; from benchmarks.timing import peak_extra_memory; "
            "print(peak_extra_memory(lambda: np.ones(64 * 2**20 // 8).sum()))")
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=run._ROOT, check=True).stdout
    assert 48 * 2**20 < int(out.split()[-1]) < 96 * 2**20


def test_interleaved_returns_medians_of_both():
    calls = []
    m, t = timing.interleaved(lambda: calls.append("m"), lambda: calls.append("t"), 4,
                              block=2, warmup=1)
    assert calls == ["m", "t"] + ["m", "m", "t", "t"] * 2
    assert m >= 0 and t >= 0


def test_workload_batches_are_padded_after_a_prefix():
    src, tgt_in, tgt_out = workloads.batch(workloads.SIZES["tiny"])
    assert src.shape == tgt_in.shape == tgt_out.shape == (32, 16)
    for row in src:
        n = (row != workloads.PAD).sum()
        assert n >= 8 and (row[:n] != workloads.PAD).all() and (row[n:] == workloads.PAD).all()
    np.testing.assert_array_equal(tgt_in[:, 1:], tgt_out[:, :-1])


@needs_torch
def test_run_prints_every_section(capsys):
    results = run.main(["--only", "tiny,chain,attention", "--repeats", "2", "--lengths", "64",
                        "--threads", "1"])
    out = capsys.readouterr().out
    for text in ("training step", "tiny", "per-op overhead", "attention alone", "mem torch"):
        assert text in out
    assert results["tiny"]["matmuls"] > 0 and results["tiny"]["minigrad_bytes"] > 0
    assert results["attention_64"]["torch_s"] > 0
    assert results["device"] == "cpu" and results["gpu"] is None
    assert "TF32" not in out and "kernel" not in out  # the GPU's lines only


@pytest.mark.parametrize("size", ["tiny"])
def test_a_minigrad_step_learns_nothing_silly(size):
    """The workload step is a real training step: the loss is finite and goes down on its
    one batch."""
    step = workloads.minigrad_step(workloads.SIZES[size])
    losses = [step().item() for _ in range(5)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]


# --- the --device option: what runs without a GPU --------------------------------------------

GPU_HERE = mg.cuda_is_available() and torch is not None and torch.cuda.is_available()


@pytest.mark.skipif(GPU_HERE, reason="this machine can run the GPU benchmark")
def test_cuda_without_a_gpu_stops_with_one_line_and_status_2():
    done = subprocess.run([sys.executable, "-m", "benchmarks.run", "--device", "cuda",
                           "--only", "tiny"], capture_output=True, text=True, cwd=run._ROOT)
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("python -m benchmarks.run: error: --device cuda: ")
    assert "CuPy" in lines[0] if not mg.cuda_is_available() else "PyTorch" in lines[0]


def _stops(capsys, argv, *words, usage=False):
    """main(argv) exits with status 2 before printing anything, with one line on stderr that
    holds every word (after the usage line, for a refused argument)."""
    with pytest.raises(SystemExit) as stop:
        run.main(argv)
    captured = capsys.readouterr()
    assert stop.value.code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert lines[0].startswith("usage: python -m benchmarks.run") if usage else len(lines) == 1
    for word in words:
        assert word in lines[-1]


class _NoCupy:
    """Stands in for backend.cupy where CuPy must not be reached at all."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        raise AssertionError("CuPy was imported")


def test_cupy_missing_is_one_line(capsys, monkeypatch):
    def missing():
        raise mg.DeviceError("device 'cuda' needs CuPy, which is not installed")
    monkeypatch.setattr(gpu.backend, "cupy", missing)
    monkeypatch.delenv("CUPY_TF32", raising=False)
    _stops(capsys, ["--device", "cuda"], "--device cuda:", "needs CuPy")


@pytest.mark.parametrize("value", ["1", "", "2", "yes"])
def test_cupy_tf32_is_refused_before_cupy_is_imported(capsys, monkeypatch, value):
    no_cupy = _NoCupy()
    monkeypatch.setattr(gpu.backend, "cupy", no_cupy)
    monkeypatch.setenv("CUPY_TF32", value)
    _stops(capsys, ["--device", "cuda"], f"CUPY_TF32={value!r}", "TF32")
    assert no_cupy.calls == 0


def test_cupy_tf32_zero_or_unset_is_accepted():
    assert gpu.refuse_cupy_tf32({}) is None
    assert gpu.refuse_cupy_tf32({"CUPY_TF32": "0"}) is None
    with pytest.raises(gpu.Unavailable, match="CUPY_TF32='1'"):
        gpu.refuse_cupy_tf32({"CUPY_TF32": "1"})


@needs_torch
def test_pytorch_without_cuda_is_one_line(capsys, monkeypatch):
    monkeypatch.setattr(gpu.backend, "cupy", lambda: _fake_cupy())
    monkeypatch.delenv("CUPY_TF32", raising=False)
    monkeypatch.setattr(gpu.torch.cuda, "is_available", lambda: False)
    _stops(capsys, ["--device", "cuda"], f"PyTorch {torch.__version__} cannot use a CUDA GPU")


def test_pytorch_missing_is_one_line(capsys, monkeypatch):
    monkeypatch.setattr(gpu.backend, "cupy", lambda: _fake_cupy())
    monkeypatch.delenv("CUPY_TF32", raising=False)
    monkeypatch.setattr(gpu, "torch", None)
    _stops(capsys, ["--device", "cuda"], "PyTorch", "not installed")


@pytest.mark.parametrize("argv, words", [
    (["--device", "tpu"], ["argument --device", "invalid choice: 'tpu'"]),
    (["--device", "cuda:0"], ["argument --device", "invalid choice"]),
    (["--only", "tiny,medum"], ["argument --only", "unknown 'medum'", "tiny,small,medium"]),
    (["--lengths", "512,x"], ["argument --lengths", "expected an integer, got 'x'"]),
    (["--lengths", "0"], ["argument --lengths", "must be > 0, got 0"]),
    (["--repeats", "-1"], ["argument --repeats", "must be > 0, got -1"]),
    (["--threads", "0"], ["argument --threads", "must be > 0, got 0"]),
])
def test_arguments_are_checked_before_any_work(capsys, argv, words):
    _stops(capsys, argv, *words, usage=True)


def test_arguments_default_to_every_workload_on_the_cpu():
    args = run.parse([])
    assert args.device == "cpu" and args.only == list(run.SECTIONS)
    assert args.lengths == [512, 1024, 2048, 4096] and args.repeats == 20
    args = run.parse(["--device", "cuda", "--only", "medium,attention", "--lengths", "4096"])
    assert (args.device, args.only, args.lengths) == ("cuda", ["medium", "attention"], [4096])


def test_synced_calls_then_waits():
    events = []
    call = timing.synced(lambda: events.append("call") or 7, lambda: events.append("wait"))
    assert call() == 7 and events == ["call", "wait"]
    plain = events.append
    assert timing.synced(plain, None) is plain and timing.synced(None, plain) is None


def test_every_timed_region_ends_with_its_librarys_wait(monkeypatch):
    events, ticks = [], iter(range(10**6))

    def clock():
        events.append("clock")
        return next(ticks)
    monkeypatch.setattr(timing.time, "perf_counter", clock)
    mine = timing.synced(lambda: events.append("m"), lambda: events.append("wait m"))
    theirs = timing.synced(lambda: events.append("t"), lambda: events.append("wait t"))
    timing.interleaved(mine, theirs, 4, block=2, warmup=1, settle=1)
    assert events[:4] == ["m", "wait m", "t", "wait t"]  # warm-up, waited for, untimed
    clocks = [i for i, e in enumerate(events) if e == "clock"]
    regions = [events[a + 1:b] for a, b in zip(clocks[::2], clocks[1::2])]
    assert len(regions) == 8
    assert regions == [["m", "wait m"]] * 2 + [["t", "wait t"]] * 2 + [["m", "wait m"]] * 2 \
        + [["t", "wait t"]] * 2


def _fake_cupy():
    """A stand-in for the parts of CuPy that benchmarks.gpu uses: a memory pool counting the
    bytes of its live blocks, the current allocator, the device's synchronize."""
    pool = SimpleNamespace(used=0, blocks=[])

    def malloc(size):
        pool.used += size
        return SimpleNamespace(size=size)

    def free(block):
        pool.used -= block.size
    pool.malloc, pool.free, pool.used_bytes = malloc, free, lambda: pool.used
    cp = SimpleNamespace(pool=pool, waits=0, __version__="0.test")
    state = {"allocator": pool.malloc}

    def synchronize():
        cp.waits += 1
    cp.get_default_memory_pool = lambda: pool
    cp.cuda = SimpleNamespace(
        get_allocator=lambda: state["allocator"],
        set_allocator=lambda f: state.update(allocator=f),
        alloc=lambda size: state["allocator"](size),
        Device=lambda i=0: SimpleNamespace(synchronize=synchronize),
        runtime=SimpleNamespace(runtimeGetVersion=lambda: 13000,
                                getDeviceProperties=lambda i: {"name": b"Fake GPU"}))
    return cp


def test_cupy_peak_counts_allocated_bytes_beyond_those_before():
    cp = _fake_cupy()
    held = [cp.cuda.alloc(4096)]  # the inputs: before the first call, not counted
    default = cp.cuda.get_allocator()

    def step():  # a temporary of 1000 bytes, then 10 bytes that stay (like a gradient)
        cp.pool.free(cp.cuda.alloc(1000))
        held.append(cp.cuda.alloc(10))
    # second call: 10 from the first still held, then 1000 more at once
    assert gpu.cupy_peak_bytes(cp, step, runs=2) == 1010
    assert cp.cuda.get_allocator() is default and cp.waits == 2  # restored; waited
    assert gpu.cupy_peak_bytes(cp, lambda: None) == 0


def test_cupy_peak_puts_the_allocator_back_when_a_step_fails():
    cp = _fake_cupy()
    default = cp.cuda.get_allocator()

    def failing():
        cp.cuda.alloc(8)
        raise ValueError("step failed")
    with pytest.raises(ValueError, match="step failed"):
        gpu.cupy_peak_bytes(cp, failing)
    assert cp.cuda.get_allocator() is default


def test_gpu_name_is_text():
    assert gpu.gpu_name(_fake_cupy()) == "Fake GPU"


@needs_torch
def test_the_gpu_header_names_the_gpu_and_says_tf32_off(monkeypatch):
    cp = _fake_cupy()
    monkeypatch.setattr(gpu, "open_gpu", lambda: (cp, gpu.gpu_name(cp)))
    monkeypatch.delenv("CUPY_TF32", raising=False)
    gpu.torch_tf32_off()  # PyTorch's defaults on the CPU already: nothing else changes
    target, header, about = run.open_target("cuda", 1)
    assert header[0].startswith("device: cuda, Fake GPU; CuPy 0.test (CUDA runtime 13.0)")
    assert header[1] == ("precision: float32, TF32 off: torch matmul.allow_tf32=False, "
                         "cudnn.allow_tf32=False, float32 matmul precision 'highest'; "
                         "CuPy: CUPY_TF32 unset")
    assert about == {"gpu": "Fake GPU", "tf32": False}
    assert target.device == "cuda" and target.syncs["torch"] is torch.cuda.synchronize
    target.syncs["minigrad"]()
    target.syncs["composite"]()
    assert cp.waits == 2
    assert run.open_target("cpu", 1)[1:] == ([], {})


@needs_torch
def test_a_target_with_waits_and_its_own_meter_runs_every_section(tmp_path, monkeypatch):
    """The GPU's Target differs from the CPU's only in its device, its waits and its meter:
    run every section with counting waits and a recording meter, on the CPU."""
    waits, measured = {"minigrad": 0, "torch": 0}, []

    def wait(lib):
        return lambda: waits.__setitem__(lib, waits[lib] + 1)

    def meter(kind, arg, lib):
        measured.append((kind, arg, lib))
        return 1000 + len(measured)
    target = run.Target("cpu", {"minigrad": wait("minigrad"), "composite": wait("minigrad"),
                                "torch": wait("torch")}, meter)
    monkeypatch.setattr(run, "open_target", lambda device, threads: (
        target, ["device: a stand-in"], {"gpu": "stand-in", "tf32": False}))
    path = tmp_path / "results.json"
    results = run.main(["--device", "cuda", "--only", "tiny,chain,attention", "--repeats", "2",
                        "--lengths", "32", "--threads", "1", "--json", str(path)])
    assert measured == [("step", "tiny", "minigrad"), ("step", "tiny", "torch"),
                        ("attention", "32", "minigrad"), ("attention", "32", "torch"),
                        ("attention", "32", "composite")]
    # every call of either library waited: steps, floor, chain, attention, composite
    assert waits["minigrad"] > waits["torch"] > 20
    assert results["tiny"]["minigrad_bytes"] == 1001 and results["tiny"]["torch_bytes"] == 1002
    assert results["attention_32"]["composite_bytes"] == 1005
    assert json.loads(path.read_text())["gpu"] == "stand-in"
    assert results["device"] == "cuda" and results["tf32"] is False


@needs_torch
def test_torch_attention_kernel_names_an_sdp_backend():
    name = workloads.torch_attention_kernel(32)
    assert name in torch.nn.attention.SDPBackend.__members__ and name != "ERROR"
