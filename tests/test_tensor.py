"""Tensor basics with PyTorch's semantics: creation and default dtypes, seeding, dtype
promotion, attributes and conversion methods, devices, in-place ops and version counters,
and repr. Expected values come from PyTorch (where installed) or are written out by hand."""
import importlib.util
import re

import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import On, needs_torch, torch


def host(x):
    return x.numpy() if isinstance(x, mg.Tensor) else x.detach().cpu().numpy()


def torch_dtype(tt):
    return np.dtype(str(tt.dtype).replace("torch.", ""))


def on(x, device):
    return x.device.type == mg.Device(device).type


# --- creation and default dtypes --------------------------------------------------------

DEFAULT_DTYPES = [
    ("python floats", lambda d: mg.tensor([1.0, 2.0], device=d), np.float32),
    ("python float scalar", lambda d: mg.tensor(3.5, device=d), np.float32),
    ("python ints", lambda d: mg.tensor([1, 2], device=d), np.int64),
    ("python bools", lambda d: mg.tensor([True, False], device=d), np.bool_),
    ("ints and floats", lambda d: mg.tensor([1, 2.5], device=d), np.float32),
    ("nested lists", lambda d: mg.tensor([[1.0], [2.0]], device=d), np.float32),
    ("numpy float64", lambda d: mg.tensor(np.array([1.0, 2.0]), device=d), np.float64),
    ("numpy float32", lambda d: mg.tensor(np.ones(2, np.float32), device=d), np.float32),
    ("numpy int32", lambda d: mg.tensor(np.arange(3, dtype=np.int32), device=d), np.int32),
    ("Tensor floats", lambda d: mg.Tensor([1.0, 2.0], device=d), np.float32),
    ("Tensor numpy f64", lambda d: mg.Tensor(np.zeros(2), device=d), np.float64),
    ("explicit dtype", lambda d: mg.tensor([1, 2], dtype=mg.float64, device=d), np.float64),
    ("zeros", lambda d: mg.zeros(2, 3, device=d), np.float32),
    ("ones", lambda d: mg.ones((2, 3), device=d), np.float32),
    ("empty", lambda d: mg.empty(4, device=d), np.float32),
    ("full int", lambda d: mg.full((2,), 3, device=d), np.int64),
    ("full float", lambda d: mg.full((2,), 3.0, device=d), np.float32),
    ("full bool", lambda d: mg.full((2,), True, device=d), np.bool_),
    ("arange int", lambda d: mg.arange(5, device=d), np.int64),
    ("arange float step", lambda d: mg.arange(0, 1, 0.1, device=d), np.float32),
    ("arange float end", lambda d: mg.arange(2.5, device=d), np.float32),
    ("linspace", lambda d: mg.linspace(0, 1, 5, device=d), np.float32),
    ("eye", lambda d: mg.eye(3, device=d), np.float32),
    ("rand", lambda d: mg.rand(3, device=d), np.float32),
    ("randn", lambda d: mg.randn(3, 2, device=d), np.float32),
    ("randint", lambda d: mg.randint(0, 5, (4,), device=d), np.int64),
    ("randn float64", lambda d: mg.randn(3, dtype=mg.float64, device=d), np.float64),
    ("zeros_like int", lambda d: mg.zeros_like(mg.arange(3, device=d)), np.int64),
    ("ones_like f64", lambda d: mg.ones_like(mg.zeros(2, dtype=mg.float64, device=d)),
     np.float64),
    ("empty_like", lambda d: mg.empty_like(mg.zeros(2, device=d)), np.float32),
    ("full_like float", lambda d: mg.full_like(mg.zeros(2, device=d), 7), np.float32),
    ("rand_like f64", lambda d: mg.rand_like(mg.zeros(2, dtype=mg.float64, device=d)),
     np.float64),
    ("randn_like", lambda d: mg.randn_like(mg.zeros(2, 2, device=d)), np.float32),
]


@pytest.mark.parametrize("name, make, dtype", DEFAULT_DTYPES, ids=[c[0] for c in DEFAULT_DTYPES])
def test_default_dtypes(device, name, make, dtype):
    x = make(device)
    assert x.dtype == np.dtype(dtype)
    assert isinstance(x.dtype, np.dtype)
    assert on(x, device)
    assert not x.requires_grad


def test_creation_values_by_hand(device):
    assert mg.zeros(2, 3, device=device).numpy().tolist() == [[0.0] * 3] * 2
    assert mg.ones(3, device=device).numpy().tolist() == [1.0, 1.0, 1.0]
    assert mg.full((2, 2), 7, device=device).tolist() == [[7, 7], [7, 7]]
    assert mg.arange(5, device=device).tolist() == [0, 1, 2, 3, 4]
    assert mg.arange(2, 11, 3, device=device).tolist() == [2, 5, 8]
    assert mg.eye(2, 3, device=device).tolist() == [[1, 0, 0], [0, 1, 0]]
    np.testing.assert_allclose(mg.linspace(-1, 1, 5, device=device).numpy(),
                               [-1, -0.5, 0, 0.5, 1])
    assert mg.zeros((2, 3), device=device).shape == (2, 3) == mg.zeros(2, 3).shape
    assert mg.zeros_like(mg.ones(4, 5, device=device)).shape == (4, 5)
    assert mg.full_like(mg.zeros(2, device=device), 7).tolist() == [7.0, 7.0]


def test_arange_float_step_matches_torch_length_and_values(device):
    x = mg.arange(0, 1, 0.1, device=device)
    assert x.shape == (10,)
    np.testing.assert_array_equal(x.numpy(), (np.arange(10) * 0.1).astype(np.float32))


def test_requires_grad_at_creation(device):
    for x in (mg.zeros(2, device=device, requires_grad=True),
              mg.randn(2, device=device, requires_grad=True),
              mg.tensor([1.0], device=device, requires_grad=True),
              mg.ones_like(mg.zeros(2, device=device), requires_grad=True)):
        assert x.requires_grad and x.is_leaf and x.grad is None


def test_tensor_copies_but_Tensor_wraps_an_array(device):
    if device != "cpu":
        pytest.skip("sharing a host array only makes sense on the CPU")
    a = np.array([1.0, 2.0], dtype=np.float32)
    copied = mg.tensor(a)
    shared = mg.Tensor(a)
    a[0] = 10.0
    assert copied.tolist() == [1.0, 2.0]
    assert shared.tolist() == [10.0, 2.0]


def test_random_values_are_in_range(device):
    u = mg.rand(1000, device=device).numpy()
    assert (u >= 0).all() and (u < 1).all() and u.std() > 0.2
    n = mg.randn(20000, device=device).numpy().astype(np.float64)
    assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05
    k = mg.randint(3, 7, (1000,), device=device).numpy()
    assert k.min() == 3 and k.max() == 6
    k = mg.randint(4, (2, 5), device=device)  # randint(high, size), as in torch
    assert k.shape == (2, 5) and k.dtype == np.int64
    assert (k.numpy() >= 0).all() and (k.numpy() < 4).all()


CREATION_VS_TORCH = [
    ("tensor floats", lambda m: m.tensor([1.0, 2.5, -3.0])),
    ("tensor ints", lambda m: m.tensor([[1, 2], [3, 4]])),
    ("tensor bools", lambda m: m.tensor([True, False])),
    ("tensor mixed", lambda m: m.tensor([1, 2.5])),
    ("tensor scalar", lambda m: m.tensor(3)),
    ("tensor numpy f64", lambda m: m.tensor(np.array([0.1, 0.2]))),
    ("zeros", lambda m: m.zeros(2, 3)),
    ("ones tuple", lambda m: m.ones((3, 1))),
    ("zeros f64", lambda m: m.zeros(2, dtype=m.float64)),
    ("ones int32", lambda m: m.ones(2, dtype=m.int32)),
    ("full int", lambda m: m.full((2,), 3)),
    ("full float", lambda m: m.full((2, 3), 1.5)),
    ("full bool", lambda m: m.full((2,), True)),
    ("arange 5", lambda m: m.arange(5)),
    ("arange 2..9", lambda m: m.arange(2, 9)),
    ("arange step 3", lambda m: m.arange(0, 10, 3)),
    ("arange 0..1 by 0.1", lambda m: m.arange(0, 1, 0.1)),
    ("arange 1..1.3 by 0.1", lambda m: m.arange(1, 1.3, 0.1)),
    ("arange -1..1 by 0.3", lambda m: m.arange(-1, 1, 0.3)),
    ("arange 10..0 by -1.5", lambda m: m.arange(10, 0, -1.5)),
    ("arange 2.5", lambda m: m.arange(2.5)),
    ("arange 0.5..3", lambda m: m.arange(0.5, 3)),
    ("arange f64", lambda m: m.arange(0, 1, 0.25, dtype=m.float64)),
    ("linspace 0..1 x7", lambda m: m.linspace(0, 1, 7)),
    ("linspace -2..3 x11", lambda m: m.linspace(-2, 3, 11)),
    ("linspace 1 step", lambda m: m.linspace(2, 5, 1)),
    ("eye 3", lambda m: m.eye(3)),
    ("eye 2x4", lambda m: m.eye(2, 4)),
    ("zeros_like int", lambda m: m.zeros_like(m.tensor([1, 2]))),
    ("ones_like f64", lambda m: m.ones_like(m.tensor([1.0], dtype=m.float64))),
    ("full_like", lambda m: m.full_like(m.tensor([1.0, 2.0]), 7)),
    ("full_like int", lambda m: m.full_like(m.tensor([1, 2]), 7)),
]


@needs_torch
@pytest.mark.parametrize("name, make", CREATION_VS_TORCH, ids=[c[0] for c in CREATION_VS_TORCH])
def test_creation_matches_torch(device, name, make):
    x, ref = make(On(mg, device)), make(On(torch, "cpu"))
    assert on(x, device)
    assert x.dtype == torch_dtype(ref)
    assert x.shape == tuple(ref.shape)
    if name.startswith("linspace"):  # torch fills from both ends: equal to float32 rounding
        np.testing.assert_allclose(x.numpy(), host(ref), rtol=1e-6, atol=1e-7)
    else:
        np.testing.assert_array_equal(x.numpy(), host(ref))


# --- seeding ------------------------------------------------------------------------------

def _draw(device):
    return np.concatenate([mg.rand(5, device=device).numpy(),
                           mg.randn(5, device=device).numpy(),
                           mg.randint(0, 1000, (5,), device=device).numpy()])


def test_manual_seed_reproducible(device):
    mg.manual_seed(1234)
    a = _draw(device)
    mg.manual_seed(1234)
    b = _draw(device)
    np.testing.assert_array_equal(a, b)
    mg.manual_seed(1235)
    c = _draw(device)
    assert not np.array_equal(a, c)
    d = _draw(device)  # the stream moves on without reseeding
    assert not np.array_equal(c, d)


def test_rng_state_round_trip(device):
    mg.manual_seed(7)
    mg.randn(3, device=device)
    state = mg.get_rng_state()
    a = _draw(device)
    b = _draw(device)
    mg.set_rng_state(state)
    np.testing.assert_array_equal(_draw(device), a)
    np.testing.assert_array_equal(_draw(device), b)


def test_like_functions_use_the_seed(device):
    x = mg.zeros(4, 4, device=device)
    mg.manual_seed(3)
    a = mg.randn_like(x).numpy()
    mg.manual_seed(3)
    b = mg.randn_like(x).numpy()
    np.testing.assert_array_equal(a, b)


# --- dtype promotion --------------------------------------------------------------------

PROMOTION = [
    ("f32 + py float", lambda m: m.tensor([1.0, 2.0]) + 2.5),
    ("f32 * huge py float", lambda m: m.tensor([1.0]) * 1e30),
    ("py float - f32", lambda m: 2.5 - m.tensor([1.0])),
    ("f32 + py int", lambda m: m.tensor([1.5]) + 3),
    ("f64 + py float", lambda m: m.tensor([1.0], dtype=m.float64) + 0.1),
    ("f16 + py float", lambda m: m.tensor([1.0], dtype=m.float16) + 0.5),
    ("i64 + py float", lambda m: m.tensor([1, 2]) + 2.5),
    ("py float * i64", lambda m: 0.5 * m.tensor([1, 2])),
    ("i64 * py int", lambda m: m.tensor([1, 2]) * 3),
    ("i32 + py int", lambda m: m.tensor([1, 2], dtype=m.int32) + 3),
    ("i64 / i64", lambda m: m.tensor([1, 3]) / m.tensor([2, 4])),
    ("i64 / py int", lambda m: m.tensor([1, 3]) / 2),
    ("py int / i64", lambda m: 3 / m.tensor([2, 4])),
    ("i64 // py int", lambda m: m.tensor([7, -7]) // 2),
    ("f32 + f64", lambda m: m.tensor([1.0]) + m.tensor([2.0], dtype=m.float64)),
    ("f32 + 0-d f64", lambda m: m.tensor([1.0, 2.0]) + m.tensor(0.5, dtype=m.float64)),
    ("0-d f64 * f32", lambda m: m.tensor(0.5, dtype=m.float64) * m.tensor([1.0, 2.0])),
    ("0-d f32 + 0-d f64", lambda m: m.tensor(1.0) + m.tensor(0.5, dtype=m.float64)),
    ("i64 + 0-d f64", lambda m: m.tensor([1, 2]) + m.tensor(0.5, dtype=m.float64)),
    ("i32 + 0-d i64", lambda m: m.tensor([1], dtype=m.int32) + m.tensor(3)),
    ("i32 + i64", lambda m: m.tensor([1], dtype=m.int32) + m.tensor([3])),
    ("f16 + f32", lambda m: m.tensor([1.0], dtype=m.float16) + m.tensor([2.0])),
    ("i64 + f32", lambda m: m.tensor([1, 2]) + m.tensor([0.5, 0.25])),
    ("bool + py int", lambda m: m.tensor([True, False]) + 1),
    ("bool * py float", lambda m: m.tensor([True, False]) * 1.5),
    ("bool + i64", lambda m: m.tensor([True]) + m.tensor([2])),
    ("f32 ** py int", lambda m: m.tensor([2.0, 3.0]) ** 2),
    ("i64 ** py float", lambda m: m.tensor([4, 9]) ** 0.5),
    ("py float ** i64", lambda m: 2.0 ** m.tensor([1, 2])),
    ("f32 + np.float64", lambda m: m.tensor([1.0]) + np.float64(2.5)),
    ("f32 < py float", lambda m: m.tensor([1.0, 3.0]) < 2.5),
    ("f32 max f64", lambda m: m.maximum(m.tensor([1.0]), m.tensor([2.0], dtype=m.float64))),
]


@needs_torch
@pytest.mark.parametrize("name, op", PROMOTION, ids=[c[0] for c in PROMOTION])
def test_dtype_promotion_matches_torch(device, name, op):
    out, ref = op(On(mg, device)), op(On(torch, "cpu"))
    assert on(out, device)
    assert out.dtype == torch_dtype(ref)
    np.testing.assert_allclose(out.numpy(), host(ref), rtol=1e-6)


def test_dtype_promotion_by_hand(device):
    f32 = mg.tensor([1.0, 2.0], device=device)
    i64 = mg.tensor([1, 2], device=device)
    f64_0d = mg.tensor(0.5, dtype=mg.float64, device=device)
    assert (f32 + 2.5).dtype == np.float32        # Python scalars never upcast float32
    assert (f32 * 1e30).dtype == np.float32
    assert (i64 + 2.5).dtype == np.float32        # int + float scalar -> default float
    assert (i64 / i64).dtype == np.float32        # true division of ints -> float
    np.testing.assert_allclose((i64 / mg.tensor([2, 4], device=device)).numpy(), [0.5, 0.5])
    assert (f32 + f32.double()).dtype == np.float64
    assert (f32 + f64_0d).dtype == np.float32     # a 0-d operand does not widen (torch)
    assert (i64 * 3).dtype == np.int64


# --- grad only on floating point ---------------------------------------------------------

def test_integer_and_bool_tensors_never_require_grad(device):
    with pytest.raises(RuntimeError):
        mg.tensor([1, 2], device=device, requires_grad=True)
    with pytest.raises(RuntimeError):
        mg.zeros(2, dtype=mg.int64, device=device, requires_grad=True)
    with pytest.raises(RuntimeError):
        mg.tensor([True], device=device).requires_grad_()
    x = mg.tensor([-1.0, 2.0], device=device, requires_grad=True)
    for out in (x > 0, x == 2.0, x.long(), (x * 2).long(), x.argmax(), x.isnan()):
        assert not out.requires_grad and out.grad_fn is None
    y = mg.tensor([1, 2], device=device) * x   # int * float requiring grad: float result
    assert y.dtype == np.float32 and y.requires_grad


# --- attributes ---------------------------------------------------------------------------

def test_attributes(device):
    x = mg.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)
    assert x.shape == (2, 3) and isinstance(x.shape, tuple)
    assert x.ndim == 2
    assert x.dtype == np.float32
    assert x.device == mg.Device(device) and on(x, device)
    assert x.grad is None and not x.requires_grad and x.is_leaf and x.grad_fn is None
    assert type(x.array).__name__ == "ndarray" and x.array.shape == (2, 3)
    if device == "cpu":
        assert isinstance(x.array, np.ndarray)
        assert x.device == "cpu"
    w = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = x * w
    assert y.requires_grad and not y.is_leaf and y.grad_fn is not None
    assert w.is_leaf and w.grad_fn is None
    z = x * 2  # no input requires grad: a leaf without a graph, as in torch
    assert z.is_leaf and z.grad_fn is None and not z.requires_grad
    assert mg.tensor(2.0, device=device).shape == () and mg.tensor(2.0).ndim == 0


# --- methods ------------------------------------------------------------------------------

def test_numpy_item_tolist(device):
    x = mg.tensor([[1.5, 2.0], [3.0, -4.0]], device=device)
    a = x.numpy()
    assert isinstance(a, np.ndarray) and a.dtype == np.float32
    np.testing.assert_array_equal(a, [[1.5, 2.0], [3.0, -4.0]])
    assert x.tolist() == [[1.5, 2.0], [3.0, -4.0]]
    assert isinstance(x.tolist()[0][0], float)
    assert mg.tensor([1, 2], device=device).tolist() == [1, 2]
    assert isinstance(mg.tensor([1, 2], device=device).tolist()[0], int)
    s = mg.tensor(2.5, device=device).item()
    assert s == 2.5 and isinstance(s, float)
    assert mg.tensor([[7]], device=device).item() == 7
    assert isinstance(mg.tensor([7], device=device).item(), int)
    with pytest.raises((RuntimeError, ValueError)):
        x.item()


def test_to_dtype_and_shortcuts(device):
    x = mg.tensor([-1.5, 2.7, 0.0], device=device)
    assert x.to(mg.float64).dtype == np.float64
    assert x.to(dtype=mg.float64).dtype == np.float64
    assert x.double().dtype == np.float64
    assert x.double().float().dtype == np.float32
    long = x.long()
    assert long.dtype == np.int64
    assert long.tolist() == [-1, 2, 0]  # truncates toward zero, as torch
    assert x.to(mg.int64).tolist() == [-1, 2, 0]
    y = mg.tensor([1, 2], device=device)
    assert y.float().dtype == np.float32 and y.float().tolist() == [1.0, 2.0]
    other = mg.zeros(1, dtype=mg.float64, device=device)
    assert x.to(other).dtype == np.float64


def test_to_device_and_cpu(device):
    x = mg.tensor([1.0, 2.0], device=device)
    y = x.to(device)
    assert on(y, device) and y.tolist() == [1.0, 2.0]
    c = x.cpu()
    assert c.device == "cpu" and isinstance(c.array, np.ndarray)
    assert c.tolist() == [1.0, 2.0]
    z = x.to(device, mg.float64)
    assert z.dtype == np.float64 and on(z, device)


def test_dtype_conversion_is_differentiable(device):
    x = mg.tensor([1.0, 2.0], dtype=mg.float64, device=device, requires_grad=True)
    y = x.float()
    assert y.requires_grad and y.dtype == np.float32
    (y * y).sum().backward()
    assert x.grad.dtype == np.float64  # the gradient comes back in the leaf's dtype
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0])
    w = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    w.cpu().sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])


def test_clone_copies_and_is_differentiable(device):
    x = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    c = x.clone()
    assert c.requires_grad and c.grad_fn is not None
    (c * 3).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    a = mg.tensor([1.0, 2.0], device=device)
    b = a.clone()
    b.add_(1.0)
    assert a.tolist() == [1.0, 2.0] and b.tolist() == [2.0, 3.0]


def test_detach_shares_memory(device):
    x = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    d = x.detach()
    assert not d.requires_grad and d.grad_fn is None
    d.mul_(10.0)
    assert x.tolist() == [10.0, 20.0]


# --- devices ---------------------------------------------------------------------------------

def test_cuda_without_cupy_raises_device_error(device):
    if mg.cuda_is_available():
        pytest.skip("a GPU is available: .to('cuda') works here")
    x = mg.tensor([1.0, 2.0])
    for move in (lambda: x.to("cuda"), lambda: x.cuda(), lambda: mg.zeros(2, device="cuda")):
        with pytest.raises(mg.DeviceError) as info:
            move()
        if importlib.util.find_spec("cupy") is None:
            msg = str(info.value)
            assert "CuPy" in msg
            assert "pip install" in msg


@pytest.mark.parametrize("spec", ["tpu", "gpu", "cuda:x", "cpu:0:1", ""])
def test_unknown_device_raises(device, spec):
    with pytest.raises(mg.DeviceError):
        mg.zeros(2, device=spec)
    with pytest.raises(mg.DeviceError):
        mg.tensor([1.0], device=device).to(device=spec)


def test_unknown_device_string_in_to_raises(device):
    x = mg.tensor([1.0], device=device)
    with pytest.raises(Exception, match="tpu"):
        x.to("tpu")


def test_device_names():
    assert mg.Device("cpu") == "cpu"
    assert mg.Device("CPU") == "cpu"
    assert mg.Device("cuda") == "cuda:0"
    assert mg.Device("cuda:1").index == 1 and mg.Device("cuda:1").type == "cuda"


# --- in-place ops and versions ------------------------------------------------------------

def _setitem(x):
    x[0] = 5.0
    return x


def _setitem_tensor(x):
    x[1:] = mg.tensor([7.0, 8.0], device=x.device)
    return x


INPLACE = [
    ("zero_", lambda x: x.zero_(), [0.0, 0.0, 0.0]),
    ("fill_", lambda x: x.fill_(2.5), [2.5, 2.5, 2.5]),
    ("add_", lambda x: x.add_(1.0), [2.0, 3.0, 4.0]),
    ("add_ tensor", lambda x: x.add_(mg.ones(3, device=x.device)), [2.0, 3.0, 4.0]),
    ("mul_", lambda x: x.mul_(2.0), [2.0, 4.0, 6.0]),
    ("copy_", lambda x: x.copy_(mg.tensor([9.0, 8.0, 7.0], device=x.device)), [9.0, 8.0, 7.0]),
    ("setitem", _setitem, [5.0, 2.0, 3.0]),
    ("setitem tensor", _setitem_tensor, [1.0, 7.0, 8.0]),
]
INPLACE_IDS = [c[0] for c in INPLACE]


@pytest.mark.parametrize("name, op, expected", INPLACE, ids=INPLACE_IDS)
def test_inplace_changes_values_and_bumps_version(device, name, op, expected):
    x = mg.tensor([1.0, 2.0, 3.0], device=device)
    v0 = x._version
    op(x)
    assert x._version > v0
    assert x.tolist() == expected
    v1 = x._version
    op(x)
    assert x._version > v1


@pytest.mark.parametrize("name, op, expected", INPLACE, ids=INPLACE_IDS)
def test_modifying_a_saved_input_then_backward_raises(device, name, op, expected):
    w = mg.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
    x = mg.tensor([1.0, 2.0, 3.0], device=device)
    y = (w * x).sum()               # Mul saves x for w's gradient
    op(x)
    with pytest.raises(RuntimeError):
        y.backward()


@pytest.mark.parametrize("name, op, expected", INPLACE, ids=INPLACE_IDS)
def test_modifying_a_saved_leaf_under_no_grad_then_backward_raises(device, name, op, expected):
    w = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    y = (w * w).sum()
    with mg.no_grad():
        op(w)
    assert w.tolist() == expected
    with pytest.raises(RuntimeError):
        y.backward()


def test_modifying_a_saved_input_through_detach_then_backward_raises(device):
    x = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x.sin().sum()               # Sin saves its input
    x.detach().zero_()              # shares memory and version counter with x
    with pytest.raises(RuntimeError):
        y.backward()


def test_modifying_a_saved_output_through_detach_then_backward_raises(device):
    # Exp saves its output; torch raises "modified by an inplace operation" here
    x = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x.exp()
    y.detach().zero_()
    with pytest.raises(RuntimeError):
        y.sum().backward()


def test_modifying_a_saved_intermediate_then_backward_raises(device):
    x = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x * 2
    z = (y * y).sum()               # Mul saves y
    with pytest.raises(RuntimeError):  # raised by the in-place op or by backward
        y.add_(1.0)
        z.backward()


def test_modifying_an_unsaved_input_keeps_gradients_right(device):
    # Add saves nothing, so changing its operand afterwards cannot corrupt a gradient
    w = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    b = mg.tensor([3.0, 4.0], device=device)
    y = (w + b).sum()
    b.add_(1.0)
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("name, op, expected", INPLACE, ids=INPLACE_IDS)
def test_inplace_on_leaf_requiring_grad_raises_unless_no_grad(device, name, op, expected):
    w = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    with pytest.raises(RuntimeError):
        op(w)
    assert w.tolist() == [1.0, 2.0, 3.0]
    with mg.no_grad():
        op(w)
    assert w.tolist() == expected
    assert w.requires_grad and w.is_leaf


def test_optimizer_style_update_under_no_grad(device):
    w = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    (w * w).sum().backward()
    with mg.no_grad():
        w.add_(w.grad * -0.1)       # SGD step: w - 0.1 * 2w
    w.grad = None
    np.testing.assert_allclose(w.numpy(), [0.8, 1.6], rtol=1e-6)
    (w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [1.6, 3.2], rtol=1e-6)


# --- repr ---------------------------------------------------------------------------------

REPRS = [  # expected strings are what torch prints for the same tensors on the CPU
    (lambda M: M.tensor([1.0, 2.0], requires_grad=True), "tensor([1., 2.], requires_grad=True)"),
    (lambda M: M.tensor([1.0, 2.0]), "tensor([1., 2.])"),
    (lambda M: M.tensor([1, 2]), "tensor([1, 2])"),
    (lambda M: M.tensor([True, False]), "tensor([ True, False])"),
    (lambda M: M.tensor(2.0, requires_grad=True), "tensor(2., requires_grad=True)"),
    (lambda M: M.tensor([[1.0, 2.0], [3.0, 4.0]]), "tensor([[1., 2.],\n        [3., 4.]])"),
    (lambda M: M.tensor([1.5, 2.25]), "tensor([1.5000, 2.2500])"),
    (lambda M: M.tensor(3.5), "tensor(3.5000)"),
]


def repr_on(expected, device):
    """torch's repr of a tensor on ``device``, from ``expected``, its repr on the CPU: a
    GPU's name comes first among the extras (device, size, dtype, grad_fn or requires_grad)."""
    if mg.Device(device).type == "cpu":
        return expected
    extras = re.search(r"(, (size|dtype|grad_fn|requires_grad)=.*)?\)$", expected, re.S).start()
    return f"{expected[:extras]}, device='{mg.Device(device)}'{expected[extras:]}"


@pytest.mark.parametrize("make, expected", REPRS,
                         ids=[r[1].replace("\n", "").replace(" ", "") for r in REPRS])
def test_repr_like_torch(make, expected, device):
    assert repr(make(On(mg, device))) == repr_on(expected, device)


EMPTY_REPRS = {
    "float_1d": lambda M: M.zeros(0),
    "float_2d": lambda M: M.zeros(0, 2),
    "int64": lambda M: M.tensor([], dtype=M.int64),
    "int64_3d": lambda M: M.zeros(2, 0, 3, dtype=M.int64),
    "bool": lambda M: M.tensor([], dtype=M.bool),
    "float64_requires_grad": lambda M: M.zeros(1, 0, dtype=M.float64, requires_grad=True),
    "int32_slice": lambda M: M.arange(4, dtype=M.int32)[2:2],
    "float_grad_fn": lambda M: M.zeros(0, 3, requires_grad=True) * 2,
}


@needs_torch
@pytest.mark.parametrize("case", list(EMPTY_REPRS))
def test_repr_of_empty_tensors_like_torch(case, device):
    """An empty tensor has no values to imply its dtype or shape: PyTorch names both."""
    expected = repr(EMPTY_REPRS[case](torch)).replace("torch.", "")
    assert repr(EMPTY_REPRS[case](On(mg, device))) == repr_on(expected, device)


def test_repr_shows_non_default_dtype_and_grad_fn(device):
    assert "float64" in repr(mg.tensor([1.0], dtype=mg.float64, device=device))
    r = repr(mg.tensor([1.0], device=device, requires_grad=True) * 2)
    assert r == repr_on("tensor([2.], grad_fn=<MulBackward0>)", device)
