"""Host memory for training steps: freed arrays stay in the process for the next step.

A training step allocates and frees the same large arrays at every step. With glibc's
default settings, ``malloc`` gives an array above its mmap threshold (128 KiB at first,
raised to the largest such block freed since) pages of its own from the kernel, and gives
the free memory at the top of the heap back to the kernel once more than the trim threshold
(twice the mmap threshold) is free. Either way the next step's arrays land on fresh pages,
each of which the kernel faults in and zeroes on first touch: thousands a step, a fifth or
more of the time of a small transformer step on a two-core machine, spent before any
arithmetic. PyTorch users are told to preload jemalloc or tcmalloc for the same reason.

``keep_host_memory()``, which minigrad calls on import, sets both thresholds once: arrays
up to ``MMAP_THRESHOLD`` come from the heap, and up to ``TRIM_THRESHOLD`` of free memory
stays there, so the second step reuses the first step's pages (the peak a step needs is
held between steps, as a caching allocator holds it). It changes malloc for the whole
process (NumPy's arrays are malloc's), only where the C library is glibc. Set the
environment variable ``MINIGRAD_KEEP_HOST_MEMORY=0`` before importing minigrad to keep
glibc's defaults.

The other half of the host's tuning is set in ``minigrad/__init__.py``, before NumPy loads
OpenBLAS: ``OPENBLAS_THREAD_TIMEOUT=20``. OpenBLAS keeps the threads of a multi-threaded
product spinning for 2^28 cycles (about a tenth of a second) once it is done, ready for the
next one; meanwhile they hold cores that minigrad's threads (``kernels.run_split``:
attention over groups of heads, Adam) and the next ops need. Spinning 2^20 cycles (about
0.4 ms) still catches products that follow one another (a linear layer's two gradients,
the next layer's). The environment's own setting wins, and where NumPy was imported before
minigrad, OpenBLAS has read it already. It matters where BLAS runs more than one thread:
by default minigrad puts it on one (``threads.py``).
"""
import ctypes
import os
import sys

MMAP_THRESHOLD = 32 << 20  # glibc's own ceiling for the threshold it raises by itself
TRIM_THRESHOLD = 1 << 30
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameter numbers (malloc.h)


def keep_host_memory():
    """Have glibc's malloc serve arrays up to ``MMAP_THRESHOLD`` bytes from its heap and keep
    up to ``TRIM_THRESHOLD`` bytes of freed memory for later arrays. True where it took
    effect, False where the C library is not glibc (nothing changes there)."""
    mallopt = _glibc_mallopt()
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def keeps_by_default():
    """Whether minigrad calls ``keep_host_memory`` on import: unless the environment sets
    MINIGRAD_KEEP_HOST_MEMORY to 0 (or false, no, off)."""
    setting = os.environ.get("MINIGRAD_KEEP_HOST_MEMORY", "1").strip().lower()
    return setting not in ("0", "false", "no", "off")


def _glibc_mallopt():
    """glibc's ``mallopt`` as a ctypes function, or None on other C libraries."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # only glibc has it (musl has no mallopt thresholds)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt
