"""The training steps of benchmarks.run captured with mg.compile, beside eager minigrad and
eager PyTorch (nn.Transformer), in one process with the same threads:

    python -m benchmarks.compiled [--only tiny,small,medium] [--repeats 20] [--threads N]

For each step: the median time of eager minigrad, of the replayed step and of PyTorch, the
time of the capture (the three calls before the first replay), the ratio of each minigrad
time to PyTorch's, and each to the floor (the step's matrix products alone, as in
benchmarks.run). Peak memory allocated during a call (tracemalloc)
(of an eager and of a replayed step).
"""
import argparse
import statistics
import time
import tracemalloc

import minigrad as mg
from benchmarks import workloads
from benchmarks.run import matmul_floor
from benchmarks.timing import blas_threads, machine_line, set_threads, torch
from minigrad.demos._cli import positive_int


def median_time(call, repeats):
    call()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_traced(step):
    """The peak bytes NumPy allocates during one call beyond what is held before it."""
    step()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    step()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def bench(name, repeats):
    cfg = workloads.SIZES[name]
    eager = workloads.minigrad_step(cfg)
    floor = matmul_floor(eager)
    compiled = mg.compile(workloads.minigrad_step(cfg))
    start = time.perf_counter()
    while compiled.replays == 0:
        compiled()
    capture = time.perf_counter() - start
    t_eager, t_compiled = median_time(eager, repeats), median_time(compiled, repeats)
    t_floor = median_time(floor, repeats)
    t_torch = median_time(workloads.torch_step(cfg), repeats) if torch else float("nan")
    mem_eager, mem_compiled = peak_traced(eager), peak_traced(compiled)
    print(f"{name:7s} eager {t_eager * 1e3:7.2f} ms  compiled {t_compiled * 1e3:7.2f} ms  "
          f"torch {t_torch * 1e3:7.2f} ms  floor {t_floor * 1e3:6.2f} ms | to torch: eager "
          f"{t_eager / t_torch:.2f}, compiled {t_compiled / t_torch:.2f} | to floor: eager "
          f"{t_eager / t_floor:.2f}, compiled {t_compiled / t_floor:.2f} | capture "
          f"{capture * 1e3:.0f} ms | peak memory eager {mem_eager / 2**20:.1f} MiB, compiled "
          f"{mem_compiled / 2**20:.1f} MiB")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compiled")
    parser.add_argument("--only", default="tiny,small,medium")
    parser.add_argument("--repeats", type=positive_int, default=20)
    parser.add_argument("--threads", type=positive_int, default=None)
    args = parser.parse_args(argv)
    if args.threads:
        set_threads(args.threads)
    print(machine_line(), f"| BLAS threads: {blas_threads()}")
    for name in args.only.split(","):
        if name not in workloads.SIZES:
            parser.error(f"--only: unknown step {name!r} (choose from tiny, small, medium)")
        bench(name, args.repeats)


if __name__ == "__main__":
    main()
