"""``minigrad.cuda``: PyTorch's ``torch.cuda`` queries, answered through CuPy.

With CuPy and a GPU, each function asks CuPy (``backend.cupy()``). Without them it answers
as PyTorch's CPU-only build answers: ``is_available()`` is False, ``device_count()`` 0, the
memory queries 0, ``empty_cache()`` and the seeding functions do nothing harmful, and the
functions that need a device raise (``current_device``, ``synchronize``,
``get_device_name``, ``get_device_capability``: an AssertionError there; ``set_device`` and
``reset_peak_memory_stats``: an AttributeError there), here as one error class,
``CudaNotAvailableError``, that is both those and minigrad's ``DeviceError``.

Two differences from PyTorch, both from CuPy:

- memory is counted in CuPy's default memory pool (``used_bytes``: what live arrays hold;
  ``memory_reserved`` adds the free blocks the pool keeps). CuPy keeps no peak, so
  ``max_memory_allocated`` counts the peak from the first call of it or of
  ``reset_peak_memory_stats`` on, through an allocator that reads the pool after each
  allocation (set then, and costing a Python call per allocation from then on);
- ``set_device`` makes CuPy's current device, but a tensor made with ``device="cuda"``
  still goes to ``cuda:0``: name the index (``"cuda:1"``) to place tensors elsewhere.

``manual_seed`` and ``manual_seed_all`` seed minigrad's one generator, which draws for every
device (``backend/random.py``), so ``torch.cuda.manual_seed(s)`` after
``torch.manual_seed(s)`` changes nothing.
"""
from . import backend
from .backend import Device, DeviceError


class CudaNotAvailableError(DeviceError, AssertionError):
    """A CUDA query that needs a GPU ran without CuPy or a GPU (PyTorch's CPU build raises
    an AssertionError for these)."""


class _CudaNotAvailableAttributeError(CudaNotAvailableError, AttributeError):
    # PyTorch's CPU build raises AttributeError from set_device and reset_peak_memory_stats
    pass


def _cupy(fn, error=CudaNotAvailableError):
    """CuPy, or ``error`` naming ``fn`` and what is missing, in one line."""
    try:
        return backend.cupy()
    except DeviceError as e:
        raise error(f"minigrad.cuda.{fn}(): {e}") from None


def _index(device):
    """The GPU index that ``device`` names (None, an int, "cuda", "cuda:N" or a Device);
    None means the current device."""
    if device is None:
        return None
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    device = Device(device)
    if device.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")
    return device.index


def _device(cp, index):
    """CuPy's device object for ``index`` (the current device when None)."""
    return cp.cuda.Device() if index is None else cp.cuda.Device(index)


def is_available():
    """True when CuPy imports and sees at least one GPU."""
    return backend.cuda_is_available()


def device_count():
    """The number of GPUs CuPy sees; 0 without CuPy or a GPU."""
    if not is_available():
        return 0
    return int(backend.cupy().cuda.runtime.getDeviceCount())


def current_device():
    """The index of CuPy's current GPU."""
    return int(_cupy("current_device").cuda.Device().id)


def set_device(device):
    """Make ``device`` (an int, "cuda:N" or a Device) CuPy's current GPU; a negative index
    does nothing, as in PyTorch."""
    index = _index(device)
    if index is not None and index < 0:
        return
    cp = _cupy("set_device", _CudaNotAvailableAttributeError)
    _device(cp, index).use()


def synchronize(device=None):
    """Wait until the GPU (default: the current one) has run everything queued on it."""
    index = _index(device)
    _device(_cupy("synchronize"), index).synchronize()
    backend.raise_pending()  # a failed check of values on the GPU (backend.checks)


def get_device_name(device=None):
    """The GPU's name, e.g. ``"NVIDIA H100 80GB HBM3"``."""
    index = _index(device)
    cp = _cupy("get_device_name")
    index = _device(cp, index).id
    name = cp.cuda.runtime.getDeviceProperties(index)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_device_capability(device=None):
    """The GPU's compute capability as (major, minor), e.g. (9, 0) for an H100."""
    index = _index(device)
    cp = _cupy("get_device_capability")
    props = cp.cuda.runtime.getDeviceProperties(_device(cp, index).id)
    return int(props["major"]), int(props["minor"])


def is_bf16_supported(including_emulation=True):
    """False: minigrad has no bfloat16 dtype (NumPy has none), on any device."""
    return False


def manual_seed(seed):
    """Seed minigrad's one generator (the same for every device; see the module docstring)."""
    backend.manual_seed(int(seed))


manual_seed_all = manual_seed


# --- memory -------------------------------------------------------------------------------

_peaks = {}  # GPU index -> the most bytes in use seen since counting began or was reset
_counting = [None]  # the allocator that counts, once set


def _pool_bytes(device, what):
    """The default memory pool's ``used_bytes`` or ``total_bytes`` on ``device``, or None
    without CuPy (no GPU: PyTorch's CPU build answers 0)."""
    index = _index(device)
    if not is_available():
        return None
    cp = backend.cupy()
    with _device(cp, index) as d:
        return d.id, int(getattr(cp.get_default_memory_pool(), what)())


def memory_allocated(device=None):
    """Bytes held by live arrays on the GPU (CuPy's default pool, in use); 0 without one."""
    found = _pool_bytes(device, "used_bytes")
    return 0 if found is None else found[1]


def memory_reserved(device=None):
    """Bytes the pool holds from the GPU, in use or kept free for reuse; 0 without one."""
    found = _pool_bytes(device, "total_bytes")
    return 0 if found is None else found[1]


def max_memory_allocated(device=None):
    """The most bytes in use since the peak was first asked for or last reset; 0 without a
    GPU. The first call starts the count (CuPy keeps no peak), so it answers the bytes in
    use now."""
    found = _pool_bytes(device, "used_bytes")
    if found is None:
        return 0
    index, used = found
    _count_peaks()
    _peaks[index] = max(_peaks.get(index, 0), used)
    return _peaks[index]


def reset_peak_memory_stats(device=None):
    """Start the peak of ``max_memory_allocated`` again from the bytes in use now."""
    found = _pool_bytes(device, "used_bytes")
    if found is None:
        _cupy("reset_peak_memory_stats", _CudaNotAvailableAttributeError)
    index, used = found
    _count_peaks()
    _peaks[index] = used


def empty_cache():
    """Give the pool's free blocks back to the GPU (arrays in use stay); nothing without one."""
    if is_available():
        backend.cupy().get_default_memory_pool().free_all_blocks()


def _count_peaks():
    """Route CuPy's allocations through a function that notes the pool's bytes in use after
    each (once; the allocator in place before is the one it calls)."""
    cp = backend.cupy()
    if _counting[0] is not None and cp.cuda.get_allocator() is _counting[0]:
        return
    pool, previous = cp.get_default_memory_pool(), cp.cuda.get_allocator()

    def counting_malloc(size):
        memory = previous(size)
        index = memory.device_id
        _peaks[index] = max(_peaks.get(index, 0), int(pool.used_bytes()))
        return memory
    _counting[0] = counting_malloc
    cp.cuda.set_allocator(counting_malloc)
