"""What running the benchmarks on a CUDA GPU adds to the CPU run: checking that minigrad
(through CuPy) and PyTorch both have the GPU, float32 products without TF32 on both sides,
waiting for each library's queued work, and the peak GPU memory of a step.

Peak memory is each library's own count of the bytes its live arrays hold (allocated, not
reserved: the free blocks either library's pool keeps for later never count): PyTorch's
``torch.cuda.max_memory_allocated``, and for minigrad the bytes in use in CuPy's default
memory pool, read after every allocation through a counting allocator. On both sides what
is counted is the peak during the calls minus what was allocated before the first, so the
model and the inputs are excluded the same way and the first call's lasting allocations
(gradients, optimiser state) count, as in the CPU measurement (timing.peak_extra_memory).
"""
import os

from minigrad import backend
from benchmarks.timing import torch


class Unavailable(Exception):
    """The GPU run cannot start; the message is one line saying why."""


def open_gpu():
    """Check that both libraries can use the GPU and turn TF32 off in both; returns
    (the cupy module, the GPU's name). Raises Unavailable otherwise."""
    refuse_cupy_tf32()
    try:
        cp = backend.cupy()
    except backend.DeviceError as e:
        raise Unavailable(str(e)) from None
    if torch is None:
        raise Unavailable("PyTorch, the library minigrad is compared with, is not installed")
    if not torch.cuda.is_available():
        raise Unavailable(f"PyTorch {torch.__version__} cannot use a CUDA GPU "
                          f"(a CPU-only build, or no GPU that its CUDA runtime supports)")
    torch_tf32_off()
    return cp, gpu_name(cp)


def refuse_cupy_tf32(environ=os.environ):
    """CuPy runs float32 matrix products in TF32 when CUPY_TF32 is a positive integer: the
    comparison is full float32 on both sides, so any value but 0 is refused."""
    value = environ.get("CUPY_TF32")
    if value is not None and value.strip() != "0":
        raise Unavailable(f"CUPY_TF32={value!r} would let CuPy's float32 products use TF32; "
                          f"unset it (both libraries run float32 with TF32 off)")


def torch_tf32_off():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def precision_line():
    """How float32 runs on each side, read back from the libraries' settings."""
    return (f"float32, TF32 off: torch matmul.allow_tf32="
            f"{torch.backends.cuda.matmul.allow_tf32}, cudnn.allow_tf32="
            f"{torch.backends.cudnn.allow_tf32}, float32 matmul precision "
            f"{torch.get_float32_matmul_precision()!r}; CuPy: CUPY_TF32 "
            f"{'=' + os.environ['CUPY_TF32'] if 'CUPY_TF32' in os.environ else 'unset'}")


def gpu_name(cp):
    name = cp.cuda.runtime.getDeviceProperties(0)["name"]
    return name.decode() if isinstance(name, bytes) else name


def versions_line(cp):
    runtime = cp.cuda.runtime.runtimeGetVersion()
    return (f"CuPy {cp.__version__} (CUDA runtime {runtime // 1000}.{runtime % 1000 // 10}); "
            f"torch CUDA {torch.version.cuda}")


def cupy_sync(cp):
    """A callable waiting until the GPU has run everything queued on it."""
    return cp.cuda.Device(0).synchronize


def cupy_peak_bytes(cp, step, runs=2):
    """Peak bytes of CuPy arrays while ``runs`` calls of ``step`` run, beyond the bytes in use
    before the first (see the module docstring). Every allocation goes through a function
    that reads the default pool's bytes in use after it; the previous allocator is put back
    afterwards."""
    pool = cp.get_default_memory_pool()
    sync = cupy_sync(cp)
    sync()
    before = peak = pool.used_bytes()

    def counting_malloc(size):
        nonlocal peak
        memory = pool.malloc(size)
        peak = max(peak, pool.used_bytes())
        return memory
    previous = cp.cuda.get_allocator()
    cp.cuda.set_allocator(counting_malloc)
    try:
        for _ in range(runs):
            step()
        sync()
    finally:
        cp.cuda.set_allocator(previous)
    return peak - before


def torch_peak_bytes(step, runs=2):
    """Peak bytes of PyTorch's CUDA tensors while ``runs`` calls of ``step`` run, beyond
    those allocated before the first."""
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(runs):
        step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before
