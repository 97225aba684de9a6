"""The benchmark programs run and measure what they say (no speed is asserted here)."""
import json
import os
import re
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
                         env=env, cwd=timing.ROOT, check=True).stdout
    assert 48 * 2**20 < int(out.split()[-1]) < 96 * 2**20


def test_interleaved_returns_medians_of_both():
    calls = []
    m, t = timing.interleaved(lambda: calls.append("m"), lambda: calls.append("t"), 4,
                              block=2, warmup=1)
    assert calls == ["m", "t"] + ["m", "m", "t", "t"] * 2
    assert m >= 0 and t >= 0


def test_interleaved_all_runs_each_call_in_turn_and_skips_none():
    calls = []
    times = timing.interleaved_all([lambda: calls.append("a"), None, lambda: calls.append("c")],
                                   4, block=2, warmup=1, settle=1)
    assert calls == ["a", "c"] + ["a"] * 3 + ["c"] * 3 + ["a"] * 3 + ["c"] * 3
    assert times[0] >= 0 and times[1] is None and times[2] >= 0


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
                        "--threads", "1", "--dropout", "0.1"])
    out = capsys.readouterr().out
    for text in ("training step", "tiny", "per-op overhead", "attention alone", "mem torch"):
        assert text in out
    row = results["tiny"]["0.1"]
    assert row["matmuls"] > 0 and row["minigrad_bytes"] > 0 and row["torch_bytes"] > 0
    assert results["attention_64"]["torch_s"] > 0
    assert results["device"] == "cpu" and results["gpu"] is None
    assert "TF32" not in out and "kernel" not in out  # the GPU's lines only


MICRO = dict(d_model=16, nhead=2, layers=1, ff=32, vocab=12, batch=4, length=8)


@needs_torch
def test_run_prints_every_pairing_and_the_ratio_to_the_fastest(capsys, monkeypatch):
    """minigrad and each PyTorch variant at dropout 0 and 0.1, in one table: a row per
    dropout with a time in every column, the fastest PyTorch marked, the ratio to it."""
    monkeypatch.setitem(workloads.SIZES, "tiny", MICRO)  # the table, not the size, is tested
    results = run.main(["--only", "tiny", "--repeats", "1", "--threads", "1", "--no-memory"])
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("workload"))
    assert header.split()[2:5] == ["minigrad", "nn.Transformer", "nanoGPT-style"]
    for p in ("0", "0.1"):
        row = results["tiny"][p]
        assert set(row["torch_s"]) == set(workloads.TORCH_STEPS)
        fastest = min(row["torch_s"], key=row["torch_s"].get)
        assert row["fastest_torch"] == fastest
        assert row["ratio"] == pytest.approx(row["minigrad_s"] / row["torch_s"][fastest])
        line = next(line for line in lines if line.split()[:2] == ["tiny", p])
        times = re.findall(r"(\d+\.\d)ms(\*?)", line)[:3]
        expected = [row["minigrad_s"]] + [row["torch_s"][v] for v in workloads.TORCH_STEPS]
        assert [float(t) for t, _ in times] == [round(t * 1e3, 1) for t in expected]
        assert [star for _, star in times].count("*") == 1
        assert times[1 + list(workloads.TORCH_STEPS).index(fastest)][1] == "*"
        assert f"{row['ratio']:.2f}x" in line


def _nanogpt_state(state, d_model):
    """nn.Transformer's parameters under the nanoGPT-style model's names: a self-attention's
    in_proj is its qkv, a cross-attention's splits into q and kv; norm1..3 are norms.0..2."""
    out = {}
    for name, value in state.items():
        name = re.sub(r"\.norm(\d)\.", lambda m: f".norms.{int(m[1]) - 1}.",
                      name.removeprefix("transformer."))
        if "self_attn.in_proj_" in name:
            out[name.replace("in_proj_", "qkv.")] = value
        elif "multihead_attn.in_proj_" in name:
            out[name.replace("in_proj_", "q.")] = value[:d_model]
            out[name.replace("in_proj_", "kv.")] = value[d_model:]
        else:
            out[name] = value
    return out


@needs_torch
def test_the_nanogpt_style_step_is_the_nn_transformer_step():
    """With the same weights and no dropout, the same loss, the same gradients, and after
    an Adam update the same loss again: the same model, loss and optimiser."""
    cfg = workloads.with_dropout(workloads.SIZES["tiny"], 0.0)
    theirs, ours = workloads.torch_step(cfg), workloads.nanogpt_step(cfg)  # one batch
    assert (sum(p.numel() for p in ours.model.parameters())
            == sum(p.numel() for p in theirs.model.parameters()))
    ours.model.load_state_dict(_nanogpt_state(theirs.model.state_dict(), cfg["d_model"]))
    torch.testing.assert_close(ours(), theirs(), rtol=1e-6, atol=1e-6)
    grads = _nanogpt_state({n: p.grad for n, p in theirs.model.named_parameters()},
                           cfg["d_model"])
    for name, p in ours.model.named_parameters():
        torch.testing.assert_close(p.grad, grads[name], rtol=1e-4, atol=1e-6, msg=name)
    torch.testing.assert_close(ours(), theirs(), rtol=1e-5, atol=1e-5)


@needs_torch
@pytest.mark.parametrize("p", [0.0, 0.1])
def test_dropout_of_the_config_reaches_every_dropout_of_each_step(monkeypatch, p):
    """Every nn.Dropout of the three models, and the attention-weight dropout of each
    PyTorch model's F.scaled_dot_product_attention calls (one per attention), is ``p``."""
    cfg = workloads.with_dropout(MICRO, p)
    model = workloads.minigrad_step(cfg).__closure__  # the model is a free variable of step
    mine = next(c.cell_contents for c in model if isinstance(c.cell_contents, mg.nn.Module))
    assert {m.p for m in mine.modules() if isinstance(m, mg.nn.Dropout)} == {p}
    sdpa, seen = torch.nn.functional.scaled_dot_product_attention, []

    def recording(*args, **kwargs):
        seen.append(kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0))
        return sdpa(*args, **kwargs)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    for name, step in workloads.torch_steps(cfg).items():
        dropouts = [m.p for m in step.model.modules() if isinstance(m, torch.nn.Dropout)]
        assert dropouts and set(dropouts) == {p}, name
        seen.clear()
        assert np.isfinite(step().item())
        assert seen == [p] * 3 * cfg["layers"], name  # encoder self; decoder self and cross


def test_the_default_step_config_keeps_its_dropout():
    assert "dropout" not in workloads.SIZES["tiny"]
    assert workloads.dropout_of(workloads.SIZES["tiny"]) == workloads.DROPOUT == 0.1
    assert workloads.with_dropout(workloads.SIZES["tiny"], None) is workloads.SIZES["tiny"]
    assert workloads.dropout_of(workloads.with_dropout(workloads.SIZES["tiny"], 0.0)) == 0.0


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
                           "--only", "tiny"], capture_output=True, text=True, cwd=timing.ROOT)
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
    (["--dropout", "0,x"], ["argument --dropout", "expected a number, got 'x'"]),
    (["--dropout", "1"], ["argument --dropout", "in [0, 1), got 1"]),
    (["--dropout", "-0.1"], ["argument --dropout", "in [0, 1), got -0.1"]),
])
def test_arguments_are_checked_before_any_work(capsys, argv, words):
    _stops(capsys, argv, *words, usage=True)


def test_arguments_default_to_every_workload_on_the_cpu():
    args = run.parse([])
    assert args.device == "cpu" and args.only == list(run.SECTIONS)
    assert args.lengths == [512, 1024, 2048, 4096] and args.repeats == 20
    assert args.dropout == [0.0, 0.1]
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
    target.waiting("composite", lambda: None)()
    assert cp.waits == 2
    assert run.open_target("cpu", 1)[1:] == ([], {})


@needs_torch
def test_a_target_with_waits_and_its_own_meter_runs_every_section(tmp_path, monkeypatch):
    """The GPU's Target differs from the CPU's only in its device, its waits and its meter:
    run every section with counting waits and a recording meter, on the CPU."""
    waits, measured = {"minigrad": 0, "torch": 0}, []

    def wait(lib):
        return lambda: waits.__setitem__(lib, waits[lib] + 1)

    def meter(kind, arg, lib, dropout=None):
        measured.append((kind, arg, lib, dropout))
        return 1000 + len(measured)
    target = run.Target("cpu", {"minigrad": wait("minigrad"), "torch": wait("torch")}, meter)
    monkeypatch.setattr(run, "open_target", lambda device, threads: (
        target, ["device: a stand-in"], {"gpu": "stand-in", "tf32": False}))
    monkeypatch.setitem(workloads.SIZES, "tiny", MICRO)
    path = tmp_path / "results.json"
    results = run.main(["--device", "cuda", "--only", "tiny,chain,attention", "--repeats", "2",
                        "--lengths", "32", "--threads", "1", "--dropout", "0.1",
                        "--json", str(path)])
    fastest = results["tiny"]["0.1"]["fastest_torch"]
    assert fastest in workloads.TORCH_STEPS
    assert measured == [("step", "tiny", "minigrad", 0.1), ("step", "tiny", fastest, 0.1),
                        ("attention", "32", "minigrad", None), ("attention", "32", "torch", None),
                        ("attention", "32", "composite", None)]
    # every call of either library waited: steps, floor, chain, attention, composite
    assert waits["minigrad"] > waits["torch"] > 20
    for lib, library in [("minigrad", "minigrad"), ("composite", "minigrad"),
                         *((name, "torch") for name in workloads.TORCH_STEPS)]:
        before = dict(waits)
        target.waiting(lib, lambda: None)()
        assert waits[library] == before[library] + 1 and sum(waits.values()) == \
            sum(before.values()) + 1, lib
    row = results["tiny"]["0.1"]
    assert row["minigrad_bytes"] == 1001 and row["torch_bytes"] == 1002
    assert results["attention_32"]["composite_bytes"] == 1005
    assert json.loads(path.read_text())["gpu"] == "stand-in"
    assert results["device"] == "cuda" and results["tf32"] is False


@needs_torch
def test_torch_attention_kernel_names_an_sdp_backend():
    name = workloads.torch_attention_kernel(32)
    assert name in torch.nn.attention.SDPBackend.__members__ and name != "ERROR"


@needs_torch
def test_compiled_rows_compare_with_the_fastest_pytorch_step(capsys, monkeypatch):
    """benchmarks.compiled: a row per step and one for the chain, each minigrad time over
    PyTorch's and over the floor; the PyTorch time is the fastest version's, named."""
    from benchmarks import compiled
    monkeypatch.setitem(workloads.SIZES, "tiny", MICRO)
    compiled.main(["--only", "tiny,chain", "--repeats", "1", "--threads", "1"])
    out = capsys.readouterr().out
    tiny = next(line for line in out.splitlines() if line.startswith("tiny"))
    chain = next(line for line in out.splitlines() if line.startswith("chain"))
    for row in (tiny, chain):
        assert re.search(r"to torch: eager \d+\.\d\d, compiled \d+\.\d\d", row)
        assert re.search(r"to floor: eager \d+\.\d\d, compiled \d+\.\d\d", row)
    assert tiny.rsplit("torch: ", 1)[1] in workloads.TORCH_STEPS


@needs_torch
def test_compiled_takes_the_faster_pytorch_version(capsys, monkeypatch):
    import time
    from benchmarks import compiled
    steps = {"slow": lambda: time.sleep(0.004), "fast": lambda: None}
    monkeypatch.setitem(workloads.SIZES, "tiny", MICRO)
    monkeypatch.setattr(workloads, "torch_steps", lambda cfg: steps)
    compiled.main(["--only", "tiny", "--repeats", "5", "--threads", "1"])
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("tiny"))
    assert row.endswith("torch: fast")


@pytest.mark.parametrize("argv", [["--dropout", "1.5"], ["--only", "huge"],
                                  ["--threads", "two"]])
def test_compiled_arguments_are_checked(capsys, argv):
    from benchmarks import compiled
    with pytest.raises(SystemExit) as e:
        compiled.main(argv)
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and last.startswith(f"python -m benchmarks.compiled: error: {argv[0]}")


@needs_torch
def test_vmap_rows_time_vmap_and_the_loop_in_both_libraries(capsys):
    """benchmarks.vmap: a row for per-example gradients and one for jacrev, each with the
    four times and the ratios; vmap and the loop compute the same gradients."""
    from benchmarks import vmap as bench
    bench.main(["--repeats", "1", "--threads", "1"])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert [r.split("  ")[0] for r in rows] == ["per-example grads, batch 64", "jacrev 16 -> 64"]
    for row in rows:
        for label in ("minigrad vmap", "minigrad loop", "torch vmap", "torch loop"):
            assert re.search(label + r" +\d+\.\d\d ms", row)
    by_vmap, by_loop = bench.per_example(mg, mg.func, *bench.mlp(mg, np.random.default_rng(0)))
    batched, looped = by_vmap(), by_loop()
    for k in batched:
        np.testing.assert_allclose(batched[k].numpy(), np.stack([g[k].numpy() for g in looped]),
                                   rtol=1e-5, atol=1e-6)


@needs_torch
def test_checkpoint_rows_time_and_measure_both_libraries_plain_and_checkpointed(capsys):
    """benchmarks.checkpoint: a row for each library plain and checkpointed, with its time
    and peak memory (measured in a child process), the checkpointed rows with the ratios,
    then minigrad's time over PyTorch's; both variants of each library compute the same
    loss."""
    from benchmarks import checkpoint as bench
    argv = ["--layers", "2", "--seq-len", "8", "--batch", "2", "--d-model", "8",
            "--repeats", "1", "--threads", "1"]
    results = bench.main(argv)
    *rows, ratios = capsys.readouterr().out.splitlines()[3:]
    assert re.fullmatch(r"time, minigrad / torch: plain \d+\.\d\dx, checkpointed \d+\.\d\dx",
                        ratios)
    assert [r.split("  ")[0] for r in rows] == ["minigrad plain", "minigrad checkpointed",
                                                "torch plain", "torch checkpointed"]
    for row in rows:
        assert re.search(r"\d+\.\d ms/step   peak +\d+\.\d MB", row)
    assert all("| time" in r for r in rows[1::2]) and not any("| time" in r for r in rows[::2])
    assert len(results) == 4 and all(m >= 0 for _, m in results.values())
    cfg = bench.config_of(bench.parse(argv))
    for lib in ("minigrad", "torch"):
        plain, ckpt = (bench.make_step(cfg, lib, c)().item() for c in (False, True))
        assert plain == ckpt
