"""What every benchmark here shares: interleaved timing, thread control, peak memory.

Nothing here asserts a speed: benchmarks report, tests never time.
"""
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # PyTorch is optional: minigrad alone is still timed
    torch = None


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def synced(call, sync):
    """``call`` followed by ``sync`` (None: ``call`` itself). On a GPU a call returns once its
    work is queued; with ``sync`` waiting for the device, a timed call includes running it,
    and no call leaves work behind that the next one (of either library) would wait for."""
    if call is None or sync is None:
        return call

    def call_and_wait():
        out = call()
        sync()
        return out
    return call_and_wait


def interleaved(mg_call, torch_call, repeats, block=5, warmup=2, settle=0):
    """Median seconds of each call, run in alternating blocks (see interleaved_all).
    Returns (minigrad, torch or None)."""
    return tuple(interleaved_all([mg_call, torch_call], repeats, block, warmup, settle))


def interleaved_all(calls, repeats, block=5, warmup=2, settle=0):
    """Median seconds of each call, run in turn in blocks of ``block`` timed runs so that
    all see the same machine state (None in ``calls``: not run, None in the result). Each
    block starts with ``settle`` untimed runs: the worker threads of one library (PyTorch's
    OpenMP pool, NumPy's OpenBLAS) keep spinning for a while after its last call and slow
    down the other library's first call."""
    calls = list(calls)
    for _ in range(warmup):
        for call in calls:
            if call is not None:
                call()
    times = [[] for _ in calls]
    for _ in range(max(1, repeats // block)):
        for call, runs in zip(calls, times):
            if call is None:
                continue
            for _ in range(settle):
                call()
            runs += [timed(call) for _ in range(block)]
    return [statistics.median(runs) if runs else None for runs in times]


def set_threads(n):
    """Use ``n`` threads in both libraries (None: PyTorch's default, the number of cores);
    returns the number in use. minigrad's are the threads its own split of large work runs
    on (backend.set_num_threads); BLAS stays on the one thread minigrad gives it by default,
    as users run it, unless the environment keeps BLAS's threads: then BLAS gets ``n``."""
    if torch is not None:
        if n:
            torch.set_num_threads(n)
        n = torch.get_num_threads()
    n = n or os.cpu_count()
    from minigrad.backend import set_num_threads, threads
    set_num_threads(n)
    if not threads.limits_by_default():
        try:
            from threadpoolctl import threadpool_limits
            threadpool_limits(n)
        except ImportError:  # then NumPy's BLAS keeps what OPENBLAS_NUM_THREADS said
            pass
    return n


def blas_threads():
    try:
        from threadpoolctl import threadpool_info
        return ", ".join(f"{i['internal_api']}={i['num_threads']}" for i in threadpool_info())
    except ImportError:
        return f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'default')}"


def machine_line():
    return (f"machine: {platform.machine()} {_cpu_name()} ({os.cpu_count()} cores); "
            f"python {platform.python_version()}; numpy {np.__version__}; "
            f"torch {torch.__version__ if torch else 'not installed'}")


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def peak_extra_memory(step, runs=2):
    """Bytes that ``runs`` calls of ``step`` need beyond what the process holds before the
    first: the peak resident size while they run minus the resident size before them (so
    run it in a fresh process, once the model and inputs exist). Counting from before the
    first call keeps freed memory that the allocator holds on to from hiding the peak; the
    first call's lasting allocations (gradients, optimiser state) count, in both libraries.
    Code is not counted in either: PyTorch's kernels are loaded when torch is imported, and
    minigrad's compiled loops (numba's runtime, about 65 MB once per process) are loaded
    here first. Linux only (the kernel's high-water mark, reset through clear_refs);
    elsewhere the lifetime peak from getrusage, which can only overstate."""
    if "minigrad" in sys.modules:
        from minigrad.backend import host_loops
        host_loops.load()
    rss = _status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM, the peak resident size, to the current size
        reset = True
    except OSError:
        reset = False
    for _ in range(runs):
        step()
    peak = _status("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(0, (peak - rss)) * 1024


def memory_in_child(module, argv, what):
    """The peak extra bytes that ``python -m module *argv`` prints last (a child that runs
    ``peak_extra_memory`` in a fresh process). Every allocation of 64 KB or more gets pages
    of its own, returned when freed: the resident size then follows the live arrays of
    either library, not what its allocator keeps for later. ``what`` names the
    measurement in the error of a child that fails."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    done = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True,
                          text=True, cwd=ROOT, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"memory of {what} failed:\n{done.stderr[-2000:]}")
    return int(done.stdout.split()[-1])


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # (the repository's)


def _status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])  # kB
    raise OSError(f"{field} not in /proc/self/status")
