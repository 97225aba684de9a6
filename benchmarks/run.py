"""minigrad against PyTorch side by side: transformer training steps, small ops, attention.

    python -m benchmarks.run [--device cpu|cuda] [--only tiny,small,medium,chain,attention]
                             [--repeats 20] [--threads N] [--lengths 512,1024,2048,4096]
                             [--dropout 0,0.1] [--no-memory] [--json results.json]

For each training step (see benchmarks/workloads.py: forward, label-smoothed cross-entropy,
backward, Adam on the encoder-decoder transformer at the tiny, small and medium sizes), at
each dropout probability: the median time of minigrad and of PyTorch's step written two
ways, the same model on nn.Transformer and written from nn.Linear, nn.LayerNorm and
F.scaled_dot_product_attention as nanoGPT does, all timed in turn in blocks in this process
(each block after one untimed call, see timing.interleaved_all); the ratio of minigrad to
the fastest PyTorch at the same dropout; the ratio of minigrad and of that fastest to the
"floor" (the step's matrix products alone, replayed in NumPy with the same shapes); and the
peak memory of a step of each, each in a process of its own. Then the
per-op overhead chain of benchmarks.bench_engine, and attention alone (forward and
backward, batch 1, 8 heads, head_dim 64) at each sequence length, against
torch.nn.functional.scaled_dot_product_attention, with its peak memory likewise.
Both libraries run with the same number of threads (printed). Speed is reported here,
never asserted anywhere.

``--device cuda`` runs the same workloads on the GPU, side by side in this process:
minigrad through CuPy, PyTorch on its CUDA tensors (attention: its fused kernel, whose name
is printed), both in float32 with TF32 off (checked, and printed with the GPU's name).
Every call ends by waiting for the GPU (each library's own synchronize), so a timed call
includes running its work, and the untimed calls first include CuPy's compiling of its
kernels. The floor replays the products in CuPy. Peak memory is measured in this process,
from each library's own count of allocated bytes (see benchmarks/gpu.py). Without CuPy, a
GPU, or a PyTorch with CUDA, the program says so in one line and exits with status 2.
"""
import argparse
import json
import sys

import numpy as np

from minigrad import backend
from benchmarks import bench_engine, gpu, timing, workloads
from benchmarks.timing import (blas_threads, interleaved, interleaved_all, machine_line,
                               peak_extra_memory, set_threads, synced, torch)
from minigrad.demos._cli import positive_int

PROG = "python -m benchmarks.run"
STEPS = ("tiny", "small", "medium")
SECTIONS = STEPS + ("chain", "attention")


def matmul_floor(step, xp=np):
    """A function replaying, on fresh arrays, every matrix product one call of ``step``
    makes (every op reaches the matmul of its array module ``xp``, NumPy or CuPy, through
    ``ctx.xp``, so recording it sees all)."""
    calls, real = [], xp.matmul

    def recording(a, b, *args, **kwargs):
        calls.append((a.shape, b.shape, a.dtype))
        return real(a, b, *args, **kwargs)
    xp.matmul = recording
    try:
        step()
    finally:
        xp.matmul = real
    operands = [(xp.ones(sa, dt), xp.ones(sb, dt)) for sa, sb, dt in calls]

    def floor():
        for a, b in operands:
            real(a, b)
    floor.count = len(calls)
    return floor


# the library each workload runs in, by its name here: minigrad's attention also as its
# composite of Tensor ops; PyTorch's training step as each of workloads.TORCH_STEPS
LIBRARY = {"minigrad": "minigrad", "composite": "minigrad", "torch": "torch",
           **{name: "torch" for name in workloads.TORCH_STEPS}}


def maker(kind, lib, arg, device="cpu", dropout=None):
    """The step function of one workload on ``device``: attention (``arg`` its length) in
    ``lib`` "minigrad", "composite" or "torch"; the training step (``arg`` its size, at
    ``dropout``, None: the size's own) in ``lib`` "minigrad" or a name of
    workloads.TORCH_STEPS."""
    if kind == "attention":
        if lib == "composite":  # minigrad's own composite of Tensor ops (every score kept)
            return workloads.minigrad_attention(int(arg), composite=True, device=device)
        return (workloads.minigrad_attention if lib == "minigrad"
                else workloads.torch_attention)(int(arg), device=device)
    cfg = workloads.with_dropout(workloads.SIZES[arg], dropout)
    make = workloads.minigrad_step if lib == "minigrad" else workloads.TORCH_STEPS[lib]
    return make(cfg, device=device)


class Target:
    """Where the workloads run. The CPU and the GPU differ only in the device both libraries
    get, the call that waits for a library's queued work (``syncs``, by library, "minigrad"
    or "torch"; none on the CPU) and how the peak memory of a step is measured
    (``memory(kind, arg, lib, dropout)``, bytes)."""

    def __init__(self, device, syncs, memory):
        self.device, self.syncs, self.memory = device, syncs, memory

    def step(self, kind, lib, arg, dropout=None):
        """maker's step on this device, each call ending with its library's wait."""
        return self.waiting(lib, maker(kind, lib, arg, self.device, dropout))

    def waiting(self, lib, call):
        return synced(call, self.syncs.get(LIBRARY[lib]))


def cpu_target(threads):
    """Each library's memory measured in a process of its own (see memory_in_child)."""
    return Target("cpu", {}, lambda kind, arg, lib, dropout=None: memory_in_child(
        kind, arg, lib, threads, dropout))


def gpu_target(cp):
    """minigrad through CuPy and PyTorch on the GPU, memory measured in this process."""
    def memory(kind, arg, lib, dropout=None):
        step = maker(kind, lib, arg, "cuda", dropout)
        return (gpu.torch_peak_bytes(step) if LIBRARY[lib] == "torch"
                else gpu.cupy_peak_bytes(cp, step))
    return Target("cuda", {"minigrad": gpu.cupy_sync(cp), "torch": torch.cuda.synchronize},
                  memory)


def memory_in_child(kind, arg, lib, threads, dropout=None):
    """Peak extra bytes of a step of ``lib``, measured in a fresh process."""
    argv = ["--child", kind, arg, lib, "--threads", str(threads)]
    argv += [] if dropout is None else ["--dropout", f"{dropout}"]
    return timing.memory_in_child("benchmarks.run", argv, f"{lib} {kind} {arg}")


def mb(n):
    return f"{n / 2**20:7.1f} MB"


def ratio(a, b):
    return f"{a / b:5.2f}x" if a is not None and b else "   - "


def bench_steps(names, args, target, results):
    variants = ["minigrad"] + (list(workloads.TORCH_STEPS) if torch else [])
    width = max(map(len, variants)) + 2
    print("\ntraining step (forward, label-smoothed cross-entropy, backward, Adam)\n"
          "PyTorch two ways, the same model: on nn.Transformer, and nanoGPT-style (nn.Linear, "
          "nn.LayerNorm,\nF.scaled_dot_product_attention); 'ratio': minigrad to the fastest "
          "PyTorch (*) at the same dropout;\n'torch/floor' and 'mem torch': that fastest's")
    print(f"{'workload':<8} {'dropout':>7} " + "".join(f"{v:>{width - 1}} " for v in variants)
          + f"{'ratio':>6}   {'floor':>9} {'mg/floor':>8} {'torch/floor':>11}"
          + ("" if args.no_memory else
             f"   {'mem minigrad':>12} {'mem torch':>10} {'ratio':>6}"))
    for name in names:
        block = 2 if name == "medium" else 5
        repeats = max(block, args.repeats // (4 if name == "medium" else 1))
        rows = [[target.step("step", lib, name, p) for lib in variants] for p in args.dropout]
        times = iter(interleaved_all([call for row in rows for call in row], repeats,
                                     block=block, settle=1))
        results[name] = {}
        for p, calls in zip(args.dropout, rows):
            by_variant = {lib: next(times) for lib in variants}
            floor = matmul_floor(calls[0], backend.array_module(target.device))
            f, _ = interleaved(target.waiting("minigrad", floor), None, repeats, block=block)
            row = step_row(by_variant, f, floor.count)
            if not args.no_memory:
                row["minigrad_bytes"] = target.memory("step", name, "minigrad", p)
                fastest = row["fastest_torch"]
                row["torch_bytes"] = target.memory("step", name, fastest, p) if fastest else None
            print(step_line(name, p, row, variants, width), flush=True)
            results[name][f"{p:g}"] = {"dropout": p, **row}


def step_row(times, floor_s, matmuls):
    """The numbers of one step at one dropout: minigrad's time, each PyTorch variant's, the
    fastest of these, minigrad's ratio to it, and the floor (``times``: seconds by name)."""
    theirs = {lib: t for lib, t in times.items() if lib != "minigrad"}
    fastest = min(theirs, key=theirs.get) if theirs else None
    m = times["minigrad"]
    return {"minigrad_s": m, "torch_s": theirs, "fastest_torch": fastest,
            "ratio": m / theirs[fastest] if fastest else None, "floor_s": floor_s,
            "matmuls": matmuls}


def step_line(name, p, row, variants, width):
    """One line of the training-step table: ``row`` of step_row, memory where it has it."""
    times = {"minigrad": row["minigrad_s"], **row["torch_s"]}
    fastest, m, f = row["fastest_torch"], row["minigrad_s"], row["floor_s"]
    cells = "".join(f"{times[v] * 1e3:{width - 3}.1f}ms" + ("*" if v == fastest else " ")
                    for v in variants)
    t = times.get(fastest)
    line = (f"{name:<8} {p:>7g} {cells}{ratio(m, t):>6}   {f * 1e3:7.1f}ms {ratio(m, f):>8} "
            f"{ratio(t, f):>11}")
    if "minigrad_bytes" in row:
        theirs = row["torch_bytes"]
        line += (f"   {mb(row['minigrad_bytes']):>12} {mb(theirs) if theirs else '-':>10} "
                 f"{ratio(row['minigrad_bytes'], theirs):>6}")
    return line


def bench_chain(args, target, results):
    x, w, tx, tw = bench_engine.chain_inputs(device=target.device)
    m, t = interleaved(target.waiting("minigrad", lambda: bench_engine.chain_minigrad(x, w)),
                       target.waiting("torch", (lambda: bench_engine.chain_torch(tx, tw))
                                      if torch else None),
                       max(20, args.repeats * 5), block=20)
    n = bench_engine.CHAIN_OPS
    print(f"\nper-op overhead (chain of {n} small ops, forward and backward): minigrad "
          f"{m / n * 1e6:.2f} us/op, torch {t / n * 1e6 if t else float('nan'):.2f} us/op, "
          f"ratio {ratio(m, t).strip()}")
    results["chain"] = {"minigrad_s_per_op": m / n, "torch_s_per_op": t / n if t else None}


COMPOSITE_UP_TO = 2048  # minigrad's composite is timed up to this length (its memory is T^2)


def bench_attention(lengths, args, target, results):
    print("\nattention alone, forward and backward (batch 1, 8 heads, head_dim 64) vs "
          "torch's scaled_dot_product_attention; 'composite': minigrad's SDPBackend.MATH")
    kernels = {}
    if target.device != "cpu" and torch:
        kernels = {L: workloads.torch_attention_kernel(L, target.device) for L in lengths}
        print("torch's kernel (SDPBackend), by length: "
              + ", ".join(f"{L} {name}" for L, name in kernels.items()))
    print(f"{'length':>6} {'minigrad':>10} {'torch':>10} {'ratio':>6} {'composite':>10}   "
          f"{'mem minigrad':>12} {'mem torch':>10} {'ratio':>6} {'mem composite':>13}")
    for L in lengths:
        mine = target.step("attention", "minigrad", L)
        theirs = target.step("attention", "torch", L) if torch else None
        repeats = max(2, args.repeats // 4)
        m, t = interleaved(mine, theirs, repeats, block=2, warmup=1, settle=1)
        c = None
        if L <= COMPOSITE_UP_TO:
            c, _ = interleaved(target.step("attention", "composite", L), None, repeats,
                               block=1, warmup=1)
        row = {"minigrad_s": m, "torch_s": t, "composite_s": c}
        if L in kernels:
            row["torch_kernel"] = kernels[L]
        line = (f"{L:>6} {m * 1e3:8.1f}ms {t * 1e3 if t else float('nan'):8.1f}ms "
                f"{ratio(m, t):>6} " + (f"{c * 1e3:8.1f}ms" if c else f"{'-':>10}"))
        if not args.no_memory:
            row["minigrad_bytes"] = target.memory("attention", str(L), "minigrad")
            row["torch_bytes"] = (target.memory("attention", str(L), "torch")
                                  if torch else None)
            row["composite_bytes"] = (target.memory("attention", str(L), "composite")
                                      if c else None)
            line += (f"   {mb(row['minigrad_bytes']):>12} "
                     f"{mb(row['torch_bytes']) if torch else '-':>10} "
                     f"{ratio(row['minigrad_bytes'], row['torch_bytes']):>6} "
                     f"{mb(row['composite_bytes']) if c else '-':>13}")
        print(line, flush=True)
        results[f"attention_{L}"] = row


def int_list(text):
    """Comma-separated integers > 0: sequence lengths."""
    return [positive_int(part) for part in text.split(",")]


def probabilities(text):
    """Comma-separated dropout probabilities, each in [0, 1)."""
    values = []
    for part in text.split(","):
        try:
            value = float(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {part!r}") from None
        if not 0 <= value < 1:
            raise argparse.ArgumentTypeError(f"a dropout probability is in [0, 1), got {part}")
        values.append(value)
    return values


def sections(text):
    """Comma-separated names among SECTIONS."""
    names = text.split(",")
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {', '.join(map(repr, unknown))}: expected names among {','.join(SECTIONS)}")
    return names


def parse(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where both libraries run: cpu (default), or cuda: minigrad "
                             "through CuPy, PyTorch on CUDA, float32 with TF32 off")
    parser.add_argument("--only", type=sections, default=list(SECTIONS),
                        help=f"which workloads, comma-separated (default: {','.join(SECTIONS)})")
    parser.add_argument("--repeats", type=positive_int, default=20,
                        help="timed calls of each workload (medium and attention: a quarter, "
                             "chain: five times; default: 20)")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="threads for both libraries (default: PyTorch's default)")
    parser.add_argument("--lengths", type=int_list, default=[512, 1024, 2048, 4096],
                        help="attention's sequence lengths (default: 512,1024,2048,4096)")
    parser.add_argument("--dropout", type=probabilities, default=[0.0, 0.1],
                        help="the training steps' dropout probabilities, comma-separated "
                             "(default: 0,0.1)")
    parser.add_argument("--no-memory", action="store_true", help="no peak memory")
    parser.add_argument("--json", help="also write the numbers to this file")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "ARG", "LIB"),
                        help=argparse.SUPPRESS)  # measure one step's memory, print it
    return parser.parse_args(argv)


def open_target(device, threads):
    """The Target of ``device`` and the header lines that describe it; on a GPU that either
    library cannot use, one line on stderr and exit status 2."""
    if device == "cpu":
        return cpu_target(threads), [], {}
    try:
        cp, name = gpu.open_gpu()
    except gpu.Unavailable as e:
        print(f"{PROG}: error: --device cuda: {' '.join(str(e).split())}", file=sys.stderr)
        raise SystemExit(2) from None
    header = [f"device: cuda, {name}; {gpu.versions_line(cp)}",
              f"precision: {gpu.precision_line()}",
              "timing: every call ends with its library's device synchronize; untimed calls "
              "first (CuPy compiles its kernels on first use)",
              "memory: peak bytes allocated on the GPU (not reserved) during two calls, less "
              "those allocated before the first (model and inputs excluded on both sides; "
              "the first call's gradients and optimiser state count): torch "
              "max_memory_allocated, minigrad the bytes in use in CuPy's memory pool"]
    return gpu_target(cp), header, {"gpu": name, "tf32": False}


def main(argv=None):
    args = parse(argv)
    threads = set_threads(args.threads)
    if args.child:
        kind, arg, lib = args.child
        print(peak_extra_memory(maker(kind, lib, arg, dropout=args.dropout[0])))
        return None
    target, header, about = open_target(args.device, threads)
    only = args.only
    print(machine_line())
    print(f"threads: torch intra-op {threads if torch else '-'}; numpy BLAS {blas_threads()}")
    for line in header:
        print(line)
    results = {"device": args.device, "gpu": None, **about, "threads": threads}
    names = [n for n in STEPS if n in only]
    if names:
        bench_steps(names, args, target, results)
    if "chain" in only:
        bench_chain(args, target, results)
    if "attention" in only:
        bench_attention(args.lengths, args, target, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()
