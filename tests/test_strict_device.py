"""The strict stand-in for CuPy (``tests/strict_device.py``, ``pytest --device strict``): it
refuses what CuPy refuses, so a CPU-only run catches what only a GPU run used to catch. Here
it is installed for one test at a time: an op with a host conversion planted in it passes on
the CPU and fails on the stand-in's "cuda", as it fails on a GPU."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import backend
from minigrad.backend import DeviceError
from minigrad.ops.elementwise import Tanh
from tests import strict_device


def test_cuda_tensors_hold_the_stand_ins_arrays(strict):
    t = mg.arange(6.0, device="cuda").reshape(2, 3)
    assert type(t.array) is strict.ndarray and t.device == "cuda:0"
    assert backend.xp_of(t.array) is strict and mg.cuda_is_available()
    np.testing.assert_array_equal(t.numpy(), np.arange(6.0).reshape(2, 3))


def test_the_stand_in_refuses_implicit_host_conversions_as_cupy(strict):
    a = strict.arange(4.0)
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.float64(a[1:2]) + np.zeros(1)
    mixed_ops = [lambda: a + np.ones(4), lambda: np.ones(4) * a,
                 lambda: strict.add(a, np.ones(4)), lambda: np.concatenate([a, np.ones(1)]),
                 lambda: strict.add.at(a, [0], np.ones(1))]
    for mixed in mixed_ops:
        with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
            mixed()
    # what CuPy allows: explicit reads, uploads, NumPy scalars and index arrays
    assert a.get().tolist() == [0.0, 1.0, 2.0, 3.0] and float(a[1]) == 1.0 and a.sum().item() == 6
    assert type(a.sum()) is strict.ndarray and type(np.exp(a)) is strict.ndarray
    assert (a * np.float32(2))[np.array([3])].item() == 6.0
    np.testing.assert_array_equal(strict.asnumpy(strict.asarray(np.ones(2))), [1.0, 1.0])


def test_the_stand_ins_scatter_add_takes_cupys_dtypes_only(strict):
    for dtype in (np.int32, np.int64, np.float16, np.float32, np.float64, np.uint32, np.uint64):
        a = strict.zeros(3, dtype=dtype)
        strict.add.at(a, strict.asarray([1, 1]), strict.ones(2, dtype=dtype))
        assert a.tolist() == [0, 2, 0]
    for dtype in (np.bool_, np.int8, np.int16, np.uint8):
        with pytest.raises(TypeError, match="cupy.add.at only supports int32, int64, float16"):
            strict.add.at(strict.zeros(3, dtype=dtype), strict.asarray([1]), True)


@pytest.mark.parametrize("dtype", ["bool", "int8", "int16", "uint8", "int32", "float16"])
def test_scatter_add_of_every_dtype_on_the_stand_in_is_the_cpus(strict, dtype):
    """backend.scatter_add adds through a wider dtype where CuPy's add.at has no atomic add,
    with the CPU's result (integers wrap, bool is an or)."""
    values = np.array([100, 100, 100, -3], dtype=np.int64).astype(dtype)
    index = np.array([0, 2, 2, 2])
    want = backend.scatter_add(np.ones(4, dtype=dtype), index, values)
    got = backend.scatter_add(strict.ones(4, dtype=dtype), strict.asarray(index),
                              strict.asarray(values))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.get(), want)


def _planted_forward(ctx, x):
    np.asarray(x)  # the planted bug: an implicit trip to the host (free on the CPU)
    out = ctx.xp.tanh(x)
    ctx.save_for_backward(out)
    return out


def test_a_host_conversion_planted_in_an_op_passes_on_the_cpu_and_fails_on_the_stand_in(
        strict, monkeypatch):
    monkeypatch.setattr(Tanh, "forward", staticmethod(_planted_forward))
    x = np.linspace(-2, 2, 5)
    np.testing.assert_allclose(mg.tensor(x).tanh().numpy(), np.tanh(x))
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        mg.tensor(x, device="cuda").tanh()
    monkeypatch.undo()
    np.testing.assert_allclose(mg.tensor(x, device="cuda").tanh().numpy(), np.tanh(x))


def test_tensors_on_two_devices_are_refused_on_the_stand_in(strict):
    a, b = mg.ones(3), mg.ones(3, device="cuda")
    with pytest.raises(DeviceError, match="cuda:0 and cpu|cpu and cuda:0"):
        a + b
    np.testing.assert_array_equal((a.to("cuda") + b).numpy(), [2.0, 2.0, 2.0])


def test_dropout_masks_on_the_stand_in_are_the_gpus_philox_stream(strict):
    """Without CUDA kernels the device stream runs through the array module: the same bits
    as the GPU's kernel (the reference of tests/test_cuda_kernels.py)."""
    from tests.test_cuda_kernels import reference_mask
    mg.manual_seed(5)
    mask = backend.keep_mask((3, 37), 0.6, strict)
    np.testing.assert_array_equal(mask.get().reshape(-1), reference_mask(111, 0.6, 5, 0))
    assert backend.source().offset == 28


def test_installing_the_stand_in_is_undone(strict):
    assert backend.cupy() is strict
    strict_device.install()()  # a second install and its undo leave the first in place
    assert backend.cupy() is strict
