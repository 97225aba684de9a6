"""The training steps of benchmarks.run and the per-op chain of benchmarks.bench_engine
captured with mg.compile, beside eager minigrad and eager PyTorch, in one process with the
same threads:

    python -m benchmarks.compiled [--only tiny,small,medium,chain] [--repeats 20]
                                  [--threads 1,2]

(``--only`` also takes ``wide`` and ``deep``: a wider model, d_model 512, and a deeper one,
six encoder and six decoder layers, both of ``benchmarks.workloads.SIZES``.)

For each step: the median time (all timed in alternating blocks, so that the machine's drift
reaches each alike) of eager minigrad, of the replayed step (fused: see
minigrad/compile/fusion.py), of the replay unfused (``mg.compile(step, fuse=False)``), of
the replay unfused with numba's loops switched off altogether (``without numba``: the CPU
kernels' NumPy formulas, as where numba is not installed), and of the fastest
eager PyTorch at the same dropout (``nn.Transformer`` or the nanoGPT-style model of
``benchmarks.workloads``, each timed, the faster named), the time of the capture (the
calls before the first replay), the ratio of each minigrad time to PyTorch's, and each to
the floor (the step's matrix products alone,
as in benchmarks.run). Peak memory allocated during a call (tracemalloc), of an eager and of
a replayed step. For the chain (100 small elementwise ops, forward and backward): the time
per op, and the floor is the same chain written in NumPy (forward and its gradients by
hand). ``--threads 1,2`` runs everything once per thread count; ``--dropout`` sets the
steps' dropout (default 0.1).
"""
import argparse
import time
import tracemalloc

import numpy as np

import minigrad as mg
from minigrad.backend import host_loops
from benchmarks import bench_engine, workloads
from benchmarks.run import matmul_floor
from benchmarks.timing import blas_threads, interleaved_all, machine_line, set_threads, torch

SECTIONS = ("tiny", "small", "medium", "wide", "deep", "chain")
DEFAULT = ("tiny", "small", "medium", "chain")  # (wide and deep on request: --only wide,deep)


def peak_traced(step):
    """The peak bytes NumPy allocates during one call beyond what is held before it."""
    step()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    step()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def capture(compiled, *args):
    """Call ``compiled(*args)`` until it replays; the time that took (the capture)."""
    start = time.perf_counter()
    while compiled.replays == 0:
        compiled(*args)
    return time.perf_counter() - start


def without_numba(call):
    """``call`` run with the CPU kernels' compiled loops switched off (their NumPy formulas)."""
    def run(*args):
        kept, host_loops.numba = host_loops.numba, None
        try:
            return call(*args)
        finally:
            host_loops.numba = kept
    return run


def report(name, unit, t_eager, t_compiled, t_torch, t_floor, captured, extra="",
           t_unfused=float("nan"), t_plain=float("nan")):
    scale = {"ms": 1e3, "us": 1e6}[unit]
    print(f"{name:7s} eager {t_eager * scale:7.2f} {unit}  compiled {t_compiled * scale:7.2f} "
          f"{unit}  unfused {t_unfused * scale:7.2f} {unit}  without numba "
          f"{t_plain * scale:7.2f} {unit}  torch {t_torch * scale:7.2f} {unit}  floor "
          f"{t_floor * scale:6.2f} {unit} | "
          f"to torch: eager {t_eager / t_torch:.2f}, compiled {t_compiled / t_torch:.2f}, "
          f"unfused {t_unfused / t_torch:.2f}, without numba {t_plain / t_torch:.2f} | "
          f"to floor: eager {t_eager / t_floor:.2f}, compiled {t_compiled / t_floor:.2f} | "
          f"capture {captured * 1e3:.0f} ms{extra}", flush=True)


def bench_step(name, repeats, dropout):
    cfg = workloads.with_dropout(workloads.SIZES[name], dropout)
    eager = workloads.minigrad_step(cfg)
    floor = matmul_floor(eager)
    compiled = mg.compile(workloads.minigrad_step(cfg))
    captured = capture(compiled)
    unfused = mg.compile(workloads.minigrad_step(cfg), fuse=False)
    capture(unfused)
    replay = mg.compile(workloads.minigrad_step(cfg), fuse=False)
    plain = without_numba(replay)
    without_numba(capture)(replay)
    torch_steps = workloads.torch_steps(cfg) if torch else {}
    t_eager, t_compiled, t_unfused, t_plain, t_floor, *t_torch = interleaved_all(
        [eager, compiled, unfused, plain, floor] + list(torch_steps.values()), repeats, block=5)
    t_torch, fastest = min(zip(t_torch, torch_steps), default=(float("nan"), "-"))
    mem_eager, mem_compiled = peak_traced(eager), peak_traced(compiled)
    report(name, "ms", t_eager, t_compiled, t_torch, t_floor, captured,
           f" | peak memory eager {mem_eager / 2**20:.1f} MiB, compiled "
           f"{mem_compiled / 2**20:.1f} MiB | torch: {fastest}", t_unfused, t_plain)


def chain_numpy(x, w, rounds=bench_engine.CHAIN_OPS // 5):
    """bench_engine's chain on bare NumPy arrays: forward, then the gradients of x and w."""
    kept, y = [], x
    for _ in range(rounds):
        t = np.tanh(y * w + x)
        kept.append((y, t))
        y = (t - w) * 0.5
    g, gx, gw = np.ones_like(y), np.zeros_like(x), np.zeros_like(w)
    for y_in, t in reversed(kept):
        g = g * 0.5
        gw -= g
        g = g * (1 - t * t)
        gx += g
        gw += g * y_in
        g = g * w
    gx += g
    return gx, gw


def bench_chain(repeats):
    n = bench_engine.CHAIN_OPS
    repeats *= 10  # (a call takes a millisecond or so)
    x, w, tx, tw = bench_engine.chain_inputs()
    xa, wa = x.numpy().copy(), w.numpy().copy()
    cx, cw = bench_engine.chain_inputs()[:2]
    compiled = mg.compile(bench_engine.chain_minigrad)
    captured = capture(compiled, cx, cw)
    ux, uw = bench_engine.chain_inputs()[:2]
    unfused = mg.compile(bench_engine.chain_minigrad, fuse=False)
    capture(unfused, ux, uw)
    calls = [lambda: bench_engine.chain_minigrad(x, w), lambda: compiled(cx, cw),
             lambda: unfused(ux, uw), lambda: chain_numpy(xa, wa),
             (lambda: bench_engine.chain_torch(tx, tw)) if torch else None]
    t_eager, t_compiled, t_unfused, t_floor, t_torch = (
        t / n if t else float("nan") for t in interleaved_all(calls, repeats, block=20))
    # (the chain calls none of the CPU kernels, so without numba is the unfused replay)
    report("chain", "us", t_eager, t_compiled, t_torch, t_floor, captured, " (times per op)",
           t_unfused, t_unfused)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compiled")
    parser.add_argument("--only", default=",".join(DEFAULT),
                        help=f"sections, of {', '.join(SECTIONS)} (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--dropout", type=float, default=workloads.DROPOUT,
                        help="dropout of the training steps (default: %(default)s)")
    parser.add_argument("--threads", default=None,
                        help="threads for both libraries; a list (1,2) runs each in turn")
    args = parser.parse_args(argv)
    only = args.only.split(",")
    for name in only:
        if name not in SECTIONS:
            parser.error(f"--only: unknown section {name!r} (choose from {', '.join(SECTIONS)})")
    try:
        threads = [int(n) for n in args.threads.split(",")] if args.threads else [None]
    except ValueError:
        parser.error(f"--threads: expected numbers separated by commas, got {args.threads!r}")
    if args.repeats < 1 or any(n is not None and n < 1 for n in threads):
        parser.error("--repeats and --threads must be positive")
    if not 0 <= args.dropout < 1:
        parser.error(f"--dropout: expected a probability in [0, 1), got {args.dropout}")
    print(machine_line())
    for n in threads:
        set_threads(n)
        print(f"BLAS threads: {blas_threads()}; torch threads: "
              f"{torch.get_num_threads() if torch else '-'}")
        for name in only:
            if name == "chain":
                bench_chain(args.repeats)
            else:
                bench_step(name, args.repeats, args.dropout)


if __name__ == "__main__":
    main()
