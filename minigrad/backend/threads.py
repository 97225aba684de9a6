"""The CPU's threads: products on one BLAS thread, larger work split by minigrad itself.

NumPy's OpenBLAS runs a product on as many threads as there are cores once it holds more
than about 64^3 multiply-adds, which the products of a small model (a few hundred rows
by a few hundred columns) all do. Each multi-threaded product hands out equal shares and
waits for every thread, spinning. Where another process keeps a core busy, the thread on
that core is scheduled out for a whole time slice while the others spin for it: a
transformer's training step took six times as long as on one thread (on two cores beside
one busy process), and the profiler blamed the products for most of the step.

So, as PyTorch keeps small products on one thread, ``one_blas_thread()``, which minigrad
calls on import, sets BLAS to one thread (through threadpoolctl, once) and remembers how
many it had: that is how many threads ``kernels.run_split`` shares work among (attention
over groups of heads, Adam's update), work large enough for the hand-over to pay, whose
threads sleep rather than spin while they wait; and ``matmul`` gives a product of ``WIDE``
multiply-adds or more (the products of a d_model 128 model on a batch of a thousand rows)
those threads again for its own duration, where each thread's share is long enough to be
worth a wait. OpenBLAS's thread count is one setting for the process, so that happens only
on the main thread while no other thread of the program is alive; elsewhere products stay on
one thread. (A product's last bits can depend on how many threads computed it: those of the
large ones on the number of cores, as with BLAS's own threads.)

An explicit setting wins: where the environment sets any of ``THREAD_VARIABLES`` (such as
``OPENBLAS_NUM_THREADS=1``), BLAS keeps the threads it was given, and run_split uses as
many. ``MINIGRAD_ONE_BLAS_THREAD=0`` (or false, no, off) keeps BLAS's own default.
``set_num_threads(n)`` changes run_split's number later (``n=1``: one thread for all).
"""
import os
import threading

import numpy as np

# the variables through which a user sets the threads of NumPy's BLAS (OpenBLAS reads the
# first two, MKL the last two)
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

_cores = None  # the BLAS threads before one_blas_thread; None where it did not run


def user_sets_threads(environ=None):
    """Whether the environment sets BLAS's threads itself (any of ``THREAD_VARIABLES``)."""
    environ = os.environ if environ is None else environ
    return any(environ.get(name, "").strip() for name in THREAD_VARIABLES)


def limits_by_default(environ=None):
    """Whether minigrad calls ``one_blas_thread`` on import: unless the environment sets
    BLAS's threads, or MINIGRAD_ONE_BLAS_THREAD to 0 (or false, no, off)."""
    environ = os.environ if environ is None else environ
    setting = environ.get("MINIGRAD_ONE_BLAS_THREAD", "1").strip().lower()
    return setting not in ("0", "false", "no", "off") and not user_sets_threads(environ)


def blas_controllers():
    """threadpoolctl's controllers of the BLAS libraries loaded now (NumPy's)."""
    from threadpoolctl import ThreadpoolController
    return ThreadpoolController().select(user_api="blas").lib_controllers


def one_blas_thread():
    """Run every BLAS product on one thread from now on, and keep the number of threads BLAS
    had as ``kernels.run_split``'s. Returns that number (1 where no BLAS is found)."""
    global _cores
    controllers = blas_controllers()
    cores = max([lib.num_threads for lib in controllers] or [1])
    for lib in controllers:
        lib.set_num_threads(1)
    _cores = cores
    _controllers[:] = controllers
    return cores


def set_num_threads(n):
    """Share ``run_split``'s work among ``n`` threads (as torch.set_num_threads sets its
    pool) while BLAS is on one thread; BLAS itself keeps the threads it has. ``n=1`` runs
    all of minigrad on the calling thread."""
    global _cores
    if int(n) < 1:
        raise ValueError(f"set_num_threads: expected a positive number of threads, got {n}")
    _cores = int(n)


def get_num_threads():
    """How many threads ``run_split`` shares work among now."""
    return split_threads(max([lib.num_threads for lib in blas_controllers()] or [1]))


def split_threads(blas_threads):
    """How many threads ``run_split`` shares work among, BLAS having ``blas_threads`` now:
    BLAS's own number where it runs more than one (set by the user's environment, or later
    by threadpoolctl), else the number that ``one_blas_thread`` found (1 where it did not
    run: one BLAS thread then means one core for minigrad too)."""
    if blas_threads > 1 or _cores is None:
        return blas_threads
    return _cores


# --- large products on all the cores --------------------------------------------------------

WIDE = 1 << 25  # multiply-adds from which one product runs on the cores BLAS had
_controllers = []  # NumPy's BLAS, as one_blas_thread found it


def matmul(xp, a, b, out=None):
    """``xp.matmul(a, b, out=out)``. A product of ``WIDE`` multiply-adds or more (a (1024, 128) by
    (128, 512) one and larger) runs on the threads BLAS had before ``one_blas_thread``, where
    they pay for their hand-over even beside a busy process; smaller ones stay on one thread.
    Only where minigrad put BLAS on one thread, from the main thread, while no other thread
    of the program runs (OpenBLAS's thread count is one setting for the whole process)."""
    cores = _cores
    if cores is None or cores < 2 or not _controllers or a.ndim < 1 or b.ndim < 2 or \
            type(a) is not np.ndarray or a.shape[-1] == 0 or \
            a.size // a.shape[-1] * a.shape[-1] * b.shape[-1] < WIDE or not _alone():
        return xp.matmul(a, b, out=out)
    before = [lib.num_threads for lib in _controllers]
    if max(before) > 1:  # (a threadpoolctl block of the user's: theirs to set)
        return xp.matmul(a, b, out=out)
    for lib in _controllers:
        lib.set_num_threads(cores)
    try:
        return xp.matmul(a, b, out=out)
    finally:
        for lib, n in zip(_controllers, before):
            lib.set_num_threads(n)


def _alone():
    """Whether the main thread runs this and no thread but minigrad's own is alive."""
    if threading.current_thread() is not threading.main_thread():
        return False
    return all(t is threading.main_thread() or t.name == "minigrad-split"
               for t in threading.enumerate())
