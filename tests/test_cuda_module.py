"""``minigrad.cuda`` as ``torch.cuda``: without a GPU, the answers of PyTorch's CPU build
(checked against the installed torch where it is that build); through the strict stand-in
for CuPy, the CuPy path; the memory queries through a small fake pool."""
import types

import pytest

import minigrad as mg
from minigrad.backend import devices
from tests.torch_ref import needs_torch, torch

no_gpu = pytest.mark.skipif(mg.cuda.is_available(), reason="a GPU is available here")
torch_cpu_build = pytest.mark.skipif(torch is None or torch.cuda.is_available(),
                                     reason="needs PyTorch's CPU-only build as the reference")

# (function, args): what returns a value on a CPU-only build, and what raises
ANSWERS = [("is_available", ()), ("device_count", ()), ("memory_allocated", ()),
           ("memory_allocated", (0,)), ("max_memory_allocated", ()), ("memory_reserved", ()),
           ("empty_cache", ()), ("manual_seed", (3,)), ("manual_seed_all", (3,)),
           ("set_device", (-1,)), ("is_bf16_supported", ())]
RAISES = [("current_device", ()), ("synchronize", ()), ("get_device_name", ()),
          ("get_device_name", (0,)), ("set_device", (0,)), ("set_device", ("cpu",)),
          ("reset_peak_memory_stats", ()), ("get_device_capability", ())]


@no_gpu
@needs_torch
@torch_cpu_build
@pytest.mark.parametrize("name, args", ANSWERS)
def test_answers_as_torchs_cpu_build(name, args):
    assert getattr(mg.cuda, name)(*args) == getattr(torch.cuda, name)(*args)


@no_gpu
@needs_torch
@torch_cpu_build
@pytest.mark.parametrize("name, args", RAISES)
def test_raises_the_kind_of_error_torchs_cpu_build_raises(name, args):
    with pytest.raises(Exception) as theirs:
        getattr(torch.cuda, name)(*args)
    with pytest.raises(type(theirs.value)) as ours:
        getattr(mg.cuda, name)(*args)
    message = str(ours.value)
    assert "\n" not in message
    assert name in message or "Expected a cuda device" in message


@no_gpu
def test_without_a_gpu_the_error_says_what_is_missing_and_is_a_device_error():
    with pytest.raises(mg.DeviceError, match=r"minigrad\.cuda\.synchronize\(\): .*CuPy"):
        mg.cuda.synchronize()
    assert isinstance(mg.cuda.CudaNotAvailableError("x"), AssertionError)


def test_manual_seed_seeds_minigrads_one_generator():
    mg.cuda.manual_seed(5)
    a = mg.randn(4)
    mg.manual_seed(5)
    b = mg.randn(4)
    mg.cuda.manual_seed_all(5)
    c = mg.randn(4)
    assert mg.equal(a, b) and mg.equal(b, c)


def test_through_the_stand_in_the_cupy_path_answers(strict):
    assert mg.cuda.is_available() and mg.cuda.device_count() == 1
    assert mg.cuda.current_device() == 0
    mg.cuda.synchronize()
    mg.cuda.synchronize(0)
    mg.cuda.synchronize("cuda:0")
    mg.cuda.set_device(0)
    mg.cuda.set_device("cuda")
    assert mg.cuda.current_device() == 0


def test_on_the_tested_device(device):
    if device == "cpu":
        pytest.skip("the CuPy path runs on --device cuda or --device strict")
    assert mg.cuda.is_available() and mg.cuda.device_count() >= 1
    assert 0 <= mg.cuda.current_device() < mg.cuda.device_count()
    x = mg.ones(3, device=device) * 2
    mg.cuda.synchronize()
    assert x.sum().item() == 6.0


class _FakePool:
    """CuPy's MemoryPool's bytes: ``used`` in use, ``free`` kept for reuse."""

    def __init__(self):
        self.used, self.free = 0, 0

    def used_bytes(self):
        return self.used

    def total_bytes(self):
        return self.used + self.free

    def free_all_blocks(self):
        self.free = 0

    def malloc(self, size):
        self.used += size
        return types.SimpleNamespace(device_id=0, size=size)


@pytest.fixture
def fake_cupy(strict, monkeypatch):
    """The stand-in with a memory pool, an allocator and device properties, as CuPy has."""
    pool = _FakePool()
    cuda = types.SimpleNamespace(**vars(strict.cuda))
    allocator = [pool.malloc]
    cuda.get_allocator = lambda: allocator[0]
    cuda.set_allocator = lambda fn: allocator.__setitem__(0, fn)
    cuda.runtime = types.SimpleNamespace(
        getDeviceCount=lambda: 1,
        getDeviceProperties=lambda i: {"name": b"Fake GPU", "major": 9, "minor": 0})
    fake = types.SimpleNamespace(cuda=cuda, get_default_memory_pool=lambda: pool)
    monkeypatch.setattr(devices, "_cupy", fake)
    monkeypatch.setattr(mg.cuda, "_peaks", {})
    monkeypatch.setattr(mg.cuda, "_counting", [None])
    return fake, pool, allocator


def test_memory_queries_read_cupys_pool_and_count_the_peak(fake_cupy):
    fake, pool, allocator = fake_cupy
    pool.used, pool.free = 100, 50
    assert mg.cuda.memory_allocated() == 100 and mg.cuda.memory_reserved() == 150
    assert mg.cuda.max_memory_allocated() == 100  # the count starts here
    allocator[0](400)  # an allocation through the counting allocator
    pool.used -= 400
    assert mg.cuda.memory_allocated() == 100 and mg.cuda.max_memory_allocated(0) == 500
    mg.cuda.reset_peak_memory_stats()
    assert mg.cuda.max_memory_allocated() == 100
    mg.cuda.empty_cache()
    assert mg.cuda.memory_reserved() == 100
    assert mg.cuda.get_device_name() == "Fake GPU" and mg.cuda.get_device_name(0) == "Fake GPU"
    assert mg.cuda.get_device_capability() == (9, 0) and not mg.cuda.is_bf16_supported()


def test_device_and_the_thread_count_are_named_as_torch_names_them():
    import minigrad as mg
    dev = mg.device("cuda" if mg.cuda.is_available() else "cpu")
    assert str(dev) == ("cuda:0" if mg.cuda.is_available() else "cpu")
    assert mg.zeros(2, device=dev).device == dev
    from minigrad import backend
    assert (mg.set_num_threads, mg.get_num_threads) == (backend.set_num_threads,
                                                       backend.get_num_threads)
