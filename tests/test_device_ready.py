"""What must hold on every device (``--device cuda`` runs these through CuPy): tensors made
by the device's own array module with NumPy's values, index arrays checked against the dim
they index, 0-d tensors reduced along their one dim as PyTorch does, in-place writes refused
into expanded views, checks that raise PyTorch's errors, and state moved between devices.
References are PyTorch (on the CPU) or NumPy on the host."""
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad import backend
from tests.torch_ref import needs_torch, torch


def on(x, device):
    return x.device.type == mg.Device(device).type


def torch_raises(fn):
    """The exception type PyTorch raises for ``fn(torch)``."""
    with pytest.raises(Exception) as info:
        fn(torch)
    return type(info.value)


def raises_like_torch(fn, device):
    """``fn(mg)`` (creation on ``device``) raises what ``fn(torch)`` raises."""
    expected = torch_raises(fn)
    with pytest.raises(expected):
        fn(_On(mg, device))


class _On:
    """``mg`` whose creation functions default to ``device``."""

    def __init__(self, mod, device):
        self.mod, self.device = mod, device

    def __getattr__(self, name):
        fn = getattr(self.mod, name)
        if name in ("tensor", "zeros", "ones", "empty", "full", "arange", "linspace", "eye"):
            return lambda *a, **k: fn(*a, **k, device=self.device)
        return fn


# --- creation: built on the device, with NumPy's values -----------------------------------

# ranges whose float64 values differ in the last bit between NumPy's arange (start, then
# start + i * ((start + step) - start)) and start + i * step, among others
RANGES = [(0.1, 10, 0.3), (-1, 1, 0.3), (10, 0, -1.5), (0, 1, 0.1), (1, 1.3, 0.1),
          (-3.7, 12.2, 0.7), (2, 50, 3), (5, -7, -2), (0, 0, 1), (0.5, 3, 1)]


# (an integer dtype with fractional bounds follows PyTorch's own rule, not NumPy's: see
# tests/test_index_creation_more.py)
@pytest.mark.parametrize("start, end, step, dtype", [
    (*r, dtype) for r in RANGES for dtype in (None, mg.float64, mg.float32, mg.int64)
    if dtype is not mg.int64 or all(isinstance(v, int) for v in r)])
def test_arange_gives_numpys_values_on_the_device(device, start, end, step, dtype):
    x = mg.arange(start, end, step, dtype=dtype, device=device)
    integral = all(isinstance(v, int) for v in (start, end, step))
    dt = np.dtype(dtype or (np.int64 if integral else np.float32))
    ref = np.arange(start, end, step, dtype=np.float64 if dt.kind == "f" else None).astype(dt)
    assert on(x, device) and x.dtype == dt
    np.testing.assert_array_equal(x.numpy(), ref)


LINSPACES = [(0, 1, 7), (-2, 3, 11), (0.1, 0.7, 13), (2, 5, 1), (3, 3, 4), (0, 1, 0),
             (-1e3, 7, 97), (0.5, 2.5, 5), (-1.7, 2.9, 9), (0, 10, 1000), (1e-3, 1e3, 33)]


@needs_torch
@pytest.mark.parametrize("start, end, steps", LINSPACES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32"])
def test_linspace_gives_torchs_values_on_the_device(device, start, end, steps, dtype):
    """PyTorch's values bit for bit: its halves from each end, each multiply-add rounded
    once, and for integers the endpoints truncated first."""
    x = mg.linspace(start, end, steps, dtype=getattr(mg, dtype), device=device)
    ref = torch.linspace(start, end, steps, dtype=getattr(torch, dtype)).numpy()
    assert on(x, device) and x.dtype == ref.dtype
    np.testing.assert_array_equal(x.numpy(), ref)


def test_linspace_of_random_endpoints_is_torchs(device):
    if torch is None:
        pytest.skip("PyTorch is not installed")
    rng = np.random.default_rng(0)
    for _ in range(60):
        start, end = (float(v) for v in rng.normal(size=2) * 10.0 ** rng.integers(-3, 4, 2))
        steps = int(rng.integers(2, 2000))
        for dtype in ("float32", "float64"):
            x = mg.linspace(start, end, steps, dtype=getattr(mg, dtype), device=device)
            ref = torch.linspace(start, end, steps, dtype=getattr(torch, dtype)).numpy()
            np.testing.assert_array_equal(x.numpy(), ref)


@needs_torch
@pytest.mark.parametrize("make", [
    lambda m: m.zeros(2, 3), lambda m: m.ones((4,), dtype=m.int32), lambda m: m.empty(0, 2),
    lambda m: m.full((2, 2), 1.5), lambda m: m.full((3,), 7), lambda m: m.full((1,), False),
    lambda m: m.full((2,), m.tensor(2.5)), lambda m: m.full((2,), m.tensor(3)),
    lambda m: m.eye(3), lambda m: m.eye(2, 4, dtype=m.float64), lambda m: m.arange(6),
    lambda m: m.arange(m.tensor(4)), lambda m: m.arange(1, m.tensor(2.5), 0.5),
    lambda m: m.linspace(m.tensor(0.0), 1, 5),
    lambda m: m.zeros_like(m.ones(2, 3, dtype=m.float64)),
    lambda m: m.ones_like(m.arange(3)), lambda m: m.full_like(m.zeros(2), 4),
], ids=["zeros", "ones int32", "empty", "full float", "full int", "full bool",
        "full 0-d float tensor", "full 0-d int tensor", "eye", "eye f64", "arange",
        "arange tensor end", "arange tensor args", "linspace tensor start", "zeros_like",
        "ones_like int", "full_like"])
def test_creation_matches_torch_on_the_device(device, make):
    x, ref = make(_On(mg, device)), make(torch)
    assert on(x, device)
    assert x.dtype == np.dtype(str(ref.dtype).replace("torch.", ""))
    assert x.shape == tuple(ref.shape)
    if x.numel():
        if x.dtype.kind == "f":
            np.testing.assert_allclose(x.numpy(), ref.numpy(), rtol=1e-6)
        else:
            np.testing.assert_array_equal(x.numpy(), ref.numpy())


@needs_torch
@pytest.mark.parametrize("make", [
    lambda m: m.arange(0, 1, 0), lambda m: m.arange(0, -1, 1), lambda m: m.arange(5, 0),
    lambda m: m.arange(0, 3, -0.5), lambda m: m.arange(0, float("inf")),
    lambda m: m.arange(float("nan")), lambda m: m.linspace(0, 1, -1),
], ids=["step 0", "end below start", "end below start, default step", "negative step up",
        "inf end", "nan end", "negative steps"])
def test_range_errors_match_torch(device, make):
    raises_like_torch(make, device)


@pytest.mark.parametrize("draw", [
    lambda d: mg.rand(3, 2, device=d), lambda d: mg.randn(5, dtype=mg.float64, device=d),
    lambda d: mg.randint(0, 100, (6,), device=d), lambda d: mg.zeros(4, device=d).uniform_(-2, 3),
    lambda d: mg.zeros(4, device=d).normal_(1.0, 0.5), lambda d: nn.Linear(3, 2).to(d).weight,
], ids=["rand", "randn", "randint", "uniform_", "normal_", "Linear init"])
def test_a_seed_gives_the_same_draws_on_every_device(device, draw):
    mg.manual_seed(11)
    here = draw(device)
    mg.manual_seed(11)
    on_host = draw("cpu")
    assert on(here, device)
    np.testing.assert_array_equal(here.numpy(), on_host.numpy())


# --- index arrays: out of range raises IndexError on every device ------------------------

def _x(m, device=None):
    x = m.arange(24.0).reshape(2, 3, 4)
    return x if device is None else x.to(device)


BAD_INDICES = [
    ("list", lambda m, x: x[[0, 5]]),
    ("list below", lambda m, x: x[[-3]]),
    ("index tensor", lambda m, x: x[m.tensor([1, 2])]),
    ("0-d index tensor", lambda m, x: x[m.tensor(2)]),
    ("second dim", lambda m, x: x[:, [0, 3]]),
    ("second dim negative", lambda m, x: x[:, [-4]]),
    ("after ellipsis", lambda m, x: x[..., [4]]),
    ("after None", lambda m, x: x[None, :, [3]]),
    ("two arrays, second bad", lambda m, x: x[[0, 1], [0, 3]]),
    ("int then array", lambda m, x: x[1, :, [0, 4]]),
    ("array, slice, int", lambda m, x: x[[2], 1:, 0]),
    ("int32 index tensor", lambda m, x: x[0, m.tensor([3], dtype=m.int32)]),
]
GOOD_INDICES = [
    ("list", lambda m, x: x[[0, 1, -1]]),
    ("index tensor", lambda m, x: x[m.tensor([1, 0, 1])]),
    ("boundaries", lambda m, x: x[:, [-3, 2]]),
    ("after ellipsis", lambda m, x: x[..., [3, -4, 0]]),
    ("after None", lambda m, x: x[None, :, [2]]),
    ("two arrays", lambda m, x: x[[0, 1], [2, -3]]),
    ("int then array", lambda m, x: x[1, :, [0, 3]]),
    ("array, slice, int", lambda m, x: x[[1], 1:, 0]),
    ("bool mask", lambda m, x: x[m.tensor([True, False])]),
    ("bool scalar and ellipsis", lambda m, x: x[True, ..., [3]]),
]


@needs_torch
@pytest.mark.parametrize("name, index", BAD_INDICES, ids=[c[0] for c in BAD_INDICES])
def test_out_of_range_index_arrays_raise_index_error(device, name, index):
    with pytest.raises(IndexError):
        index(torch, _x(torch))
    x = _x(mg, device)
    with pytest.raises(IndexError):  # on a GPU, raised by the next read
        index(_On(mg, device), x).numpy()


@needs_torch
@pytest.mark.parametrize("name, index", GOOD_INDICES, ids=[c[0] for c in GOOD_INDICES])
def test_in_range_index_arrays_match_torch(device, name, index):
    out = index(_On(mg, device), _x(mg, device))
    np.testing.assert_array_equal(out.numpy(), index(torch, _x(torch)).numpy())


@needs_torch
@pytest.mark.parametrize("name, index", BAD_INDICES[:5], ids=[c[0] for c in BAD_INDICES[:5]])
@pytest.mark.parametrize("grad", [False, True], ids=["no graph", "recorded"])
def test_out_of_range_index_arrays_raise_in_setitem(device, name, index, grad):
    def write(m, x):  # the same index, written to
        class Put:
            def __getitem__(self, i):
                x[i] = 1.0
        return index(m, Put())
    with pytest.raises(IndexError):
        write(torch, _x(torch))
    x = _x(mg, device)
    if grad:
        x = (x * 1.0).requires_grad_() * 1.0
    before = x.numpy().copy()
    with pytest.raises(IndexError):  # on a GPU, raised by the next read
        write(_On(mg, device), x)
        x.numpy()
    if device == "cpu":  # (on a GPU, as in PyTorch, what was written is unspecified)
        np.testing.assert_array_equal(x.numpy(), before)  # nothing was written


def test_index_error_names_the_dim_and_its_size(device):
    x = mg.zeros(4, 3, device=device)
    with pytest.raises(IndexError, match="3"):
        x[:, mg.tensor([0, 7], device=device)].numpy()


@needs_torch
@pytest.mark.parametrize("ids", [[0, 4], [-1, 2], [[1, 9], [0, 0]]],
                         ids=["too big", "negative", "2-d"])
def test_embedding_ids_out_of_range_raise_and_name_the_first(device, ids):
    w = mg.randn(4, 3, device=device)
    with pytest.raises(IndexError):
        torch.nn.functional.embedding(torch.tensor(ids), torch.randn(4, 3))
    first_bad = next(i for i in np.ravel(ids) if not 0 <= i < 4)
    with pytest.raises(IndexError, match=f"index {first_bad} "):
        F.embedding(mg.tensor(ids, device=device), w).numpy()


@needs_torch
def test_embedding_rows_and_gradient_match_torch(device):
    w = mg.randn(5, 3, dtype=mg.float64, device=device, requires_grad=True)
    tw = torch.tensor(w.numpy(), requires_grad=True)
    ids = [[0, 4, 4], [2, 0, 1]]
    out = F.embedding(mg.tensor(ids, device=device), w, padding_idx=1)
    ref = torch.nn.functional.embedding(torch.tensor(ids), tw, padding_idx=1)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    (out * out).sum().backward()
    (ref * ref).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)
    assert F.embedding(mg.tensor([], dtype=mg.int64, device=device), w).shape == (0, 3)


@needs_torch
@pytest.mark.parametrize("target", [[0, 3, 1], [2, -1, 0], [-100, 7, -100]],
                         ids=["too big", "negative", "past ignored ones"])
def test_cross_entropy_targets_out_of_range_raise_index_error(device, target):
    logits = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    with pytest.raises(IndexError):
        torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target))
    first_bad = next(i for i in target if i != -100 and not 0 <= i < 3)
    with pytest.raises(IndexError, match=f"Target {first_bad} "):
        F.cross_entropy(mg.tensor(logits, device=device),
                        mg.tensor(target, device=device)).item()


@needs_torch
def test_cross_entropy_with_ignored_targets_matches_torch(device):
    logits = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    target = [2, -100, 0, -100]
    loss = F.cross_entropy(mg.tensor(logits, device=device), mg.tensor(target, device=device))
    ref = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target))
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=1e-6)


# --- 0-d tensors: their one dim (0 or -1) is legal, as in PyTorch --------------------------

ZERO_D_OPS = [
    ("sum", lambda F, x: x.sum()), ("sum 0", lambda F, x: x.sum(0)),
    ("sum -1 keepdim", lambda F, x: x.sum(-1, keepdim=True)),
    ("sum (0,)", lambda F, x: x.sum((0,))),
    ("mean 0", lambda F, x: x.mean(0)), ("mean -1 keepdim", lambda F, x: x.mean(-1, keepdim=True)),
    ("var 0 correction 0", lambda F, x: x.var(0, correction=0)),
    ("std -1 correction 0", lambda F, x: x.std(-1, correction=0)),
    ("max", lambda F, x: x.max()), ("max 0 values", lambda F, x: x.max(0)[0]),
    ("max -1 keepdim values", lambda F, x: x.max(-1, keepdim=True)[0]),
    ("min 0 values", lambda F, x: x.min(0)[0]), ("amax 0", lambda F, x: x.amax(0)),
    ("amin -1 keepdim", lambda F, x: x.amin(-1, keepdim=True)),
    ("logsumexp 0", lambda F, x: x.logsumexp(0)),
    ("logsumexp -1 keepdim", lambda F, x: x.logsumexp(-1, keepdim=True)),
    ("softmax 0", lambda F, x: x.softmax(0)), ("softmax -1", lambda F, x: x.softmax(-1)),
    ("log_softmax 0", lambda F, x: x.log_softmax(0)),
    ("log_softmax -1", lambda F, x: x.log_softmax(-1)),
    ("F.softmax", lambda F, x: F.softmax(x, 0)),
    ("F.log_softmax", lambda F, x: F.log_softmax(x, -1)),
    ("squeeze 0", lambda F, x: x.squeeze(0)), ("unsqueeze -1", lambda F, x: x.unsqueeze(-1)),
    ("flatten", lambda F, x: x.flatten()), ("transpose", lambda F, x: x.transpose(0, -1)),
    ("permute", lambda F, x: x.permute(())),
]
ZERO_D_INDICES = [
    ("argmax", lambda x: x.argmax()), ("argmax 0", lambda x: x.argmax(0)),
    ("argmin -1 keepdim", lambda x: x.argmin(-1, keepdim=True)),
    ("max 0 indices", lambda x: x.max(0)[1]), ("min -1 indices", lambda x: x.min(-1)[1]),
    ("all 0", lambda x: x.all(0)), ("any -1 keepdim", lambda x: x.any(-1, keepdim=True)),
]


@needs_torch
@pytest.mark.parametrize("name, op", ZERO_D_OPS, ids=[c[0] for c in ZERO_D_OPS])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_0d_reductions_match_torch_with_gradients(device, name, op, dtype):
    x = mg.tensor(0.7, dtype=dtype, device=device, requires_grad=True)
    tx = torch.tensor(0.7, dtype=getattr(torch, dtype), requires_grad=True)
    out, ref = op(F, x), op(torch.nn.functional, tx)
    assert on(out, device)
    assert out.shape == tuple(ref.shape) and out.dtype == np.dtype(dtype)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-6)
    (out * 3.0).sum().backward()
    (ref * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("name, op", ZERO_D_INDICES, ids=[c[0] for c in ZERO_D_INDICES])
@pytest.mark.parametrize("value", [2.5, 0.0])
def test_0d_index_and_logic_reductions_match_torch(device, name, op, value):
    out, ref = op(mg.tensor(value, device=device)), op(torch.tensor(value))
    assert on(out, device) and out.shape == tuple(ref.shape)
    assert out.dtype == np.dtype(str(ref.dtype).replace("torch.", ""))
    assert out.tolist() == ref.tolist()


@needs_torch
@pytest.mark.parametrize("op", [lambda x: x.sum(0), lambda x: x.max(-1)[0], lambda x: x.argmax(0),
                                lambda x: x.amax(0, keepdim=True)],
                         ids=["sum", "max values", "argmax", "amax"])
def test_0d_integer_reductions_match_torch(device, op):
    out, ref = op(mg.tensor(7, device=device)), op(torch.tensor(7))
    assert out.dtype == np.dtype(str(ref.dtype).replace("torch.", ""))
    assert out.shape == tuple(ref.shape) and out.tolist() == ref.tolist()


@needs_torch
def test_0d_half_softmax_matches_torch(device):
    for op in (lambda x: x.softmax(0), lambda x: x.log_softmax(-1), lambda x: x.sum(0)):
        out, ref = op(mg.tensor(1.5, dtype=mg.float16, device=device)), \
            op(torch.tensor(1.5, dtype=torch.float16))
        assert out.dtype == np.float16 and out.shape == ()
        assert out.item() == ref.item()


@needs_torch
@pytest.mark.parametrize("op", [
    lambda x: x.sum(1), lambda x: x.softmax(1), lambda x: x.log_softmax(-2),
    lambda x: x.argmax(1), lambda x: x.max(2), lambda x: x.logsumexp(-2), lambda x: x.split(1),
    lambda x: x.chunk(1), lambda x: x.mean(1), lambda x: x.all(-2),
], ids=["sum 1", "softmax 1", "log_softmax -2", "argmax 1", "max 2", "logsumexp -2", "split",
        "chunk", "mean 1", "all -2"])
def test_0d_errors_match_torch(device, op):
    expected = torch_raises(lambda t: op(t.tensor(1.0)))
    with pytest.raises(expected):
        op(mg.tensor(1.0, device=device))


# --- in-place writes ---------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("write", [
    lambda x: x.add_(1.0), lambda x: x.mul_(2), lambda x: x.copy_(x.clone() * 0),
    lambda x: x.clamp_(0, 1), lambda x: x.__setitem__((slice(None), 0), 5.0),
], ids=["add_", "mul_", "copy_", "clamp_", "setitem"])
def test_writes_into_an_expanded_view_are_refused(device, write):
    with pytest.raises(RuntimeError):
        with torch.no_grad():
            write(torch.zeros(1, 4).expand(3, 4))
    x = mg.zeros(1, 4, device=device).expand(3, 4)
    with pytest.raises(RuntimeError, match="single memory location"):
        with mg.no_grad():
            write(x)


@needs_torch
def test_writes_into_views_with_no_shared_element_are_allowed(device):
    for make in (lambda m: m.zeros(1, 4).expand(1, 4), lambda m: m.zeros(3, 0).T,
                 lambda m: m.zeros(3, 4)[:, 1]):
        x, ref = make(_On(mg, device)), make(torch)
        with mg.no_grad():
            x.add_(1.0)
        ref.add_(1.0)
        np.testing.assert_array_equal(x.numpy(), ref.numpy())


@needs_torch
@pytest.mark.parametrize("value", [np.float32(2.5), np.float64(-1.0), np.int64(3), np.bool_(True)],
                         ids=["float32", "float64", "int64", "bool"])
def test_setitem_takes_numpy_scalars(device, value):
    x, ref = mg.zeros(3, device=device), torch.zeros(3)
    x[1] = value
    ref[1] = value.item()
    np.testing.assert_array_equal(x.numpy(), ref.numpy())


@needs_torch
@pytest.mark.parametrize("value", [[1.5, -2.0], (3, 4), np.array([0.25, 7.0]),
                                   np.array([5, 6], dtype=np.int64)],
                         ids=["list", "tuple of ints", "float64 array", "int64 array"])
@pytest.mark.parametrize("index", [[0, 2], slice(1, 3)], ids=["index list", "slice"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_setitem_takes_host_values_recorded_or_not(device, value, index, dtype):
    """Host data written into a device tensor, cast to its dtype (NumPy's assignment is the
    reference; PyTorch refuses lists and arrays here, so its gradient is taken with the same
    values as a tensor)."""
    ref = np.zeros(4, dtype)
    ref[index] = np.asarray(value)
    plain = mg.zeros(4, dtype=dtype, device=device)
    plain[index] = value
    x = mg.zeros(4, dtype=dtype, device=device, requires_grad=True)
    recorded = x * 2.0
    recorded[index] = value
    tx = torch.zeros(4, dtype=getattr(torch, dtype), requires_grad=True)
    trecorded = tx * 2.0
    trecorded[torch.tensor(index) if isinstance(index, list) else index] = \
        torch.tensor(np.asarray(value), dtype=getattr(torch, dtype))
    for out in (plain, recorded):
        assert on(out, device) and out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out.numpy(), ref)
    (recorded * recorded).sum().backward()
    (trecorded * trecorded).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())


def test_inplace_ops_take_host_arrays_and_lists(device):
    x = mg.zeros(3, device=device)
    x.add_(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    x.mul_(mg.tensor([2.0, 2.0, 2.0], device=device))
    x[0:2] = np.array([7.0, 8.0])
    x[2:] = [9.0]
    assert on(x, device) and x.tolist() == [7.0, 8.0, 9.0]


def test_inplace_op_with_a_tensor_of_another_device_raises(device):
    if device == "cpu":
        pytest.skip("needs a second device")
    with pytest.raises(RuntimeError, match="same device"):
        mg.zeros(3).add_(mg.ones(3, device=device))
    with pytest.raises(RuntimeError, match="same device"):
        mg.zeros(3, device=device).mul_(mg.ones(3))


# --- integer division by zero ------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("op", [
    lambda m: m.tensor([4, 3]) // 0, lambda m: m.tensor([4, 3]) % 0,
    lambda m: m.tensor([4, 3]) // m.tensor([1, 0]), lambda m: 5 // m.tensor([2, 0]),
    lambda m: m.tensor([4, 3], dtype=m.int32) // m.tensor(0, dtype=m.int32),
], ids=["// 0", "% 0", "// tensor with a zero", "number // tensor", "int32 // 0-d zero"])
def test_integer_division_by_zero_raises(device, op):
    expected = torch_raises(op)
    with pytest.raises(expected):
        op(_On(mg, device))


@needs_torch
@pytest.mark.parametrize("op", [
    lambda m: m.tensor([7, -7]) // 2, lambda m: m.tensor([7, -7]) % 3,
    lambda m: 9 // m.tensor([2, -4]), lambda m: m.tensor([7, 8]) // m.tensor([2, 3]),
    lambda m: m.tensor([7.0, 1.0]) // 0,
], ids=["// 2", "% 3", "number // tensor", "tensor // tensor", "float // 0"])
def test_integer_division_matches_torch(device, op):
    out, ref = op(_On(mg, device)), op(torch)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


# --- nn: gradient clipping and state on every device -------------------------------------

@needs_torch
@pytest.mark.parametrize("grads, max_norm", [
    ([[1.0, float("inf")], [3.0, -4.0]], 1.0), ([[1.0, 2.0], [3.0, -4.0]], 0.0),
    ([[1.0, float("nan")], [float("-inf"), 2.0]], 1.0), ([[3.0, 4.0], [0.0, 0.0]], 1.0),
], ids=["inf gradient", "max_norm 0", "nan and -inf", "finite"])
def test_clip_grad_norm_matches_torch_without_warnings(device, grads, max_norm):
    params = [mg.zeros(2, device=device, requires_grad=True) for _ in grads]
    refs = [torch.zeros(2, requires_grad=True) for _ in grads]
    for p, r, g in zip(params, refs, grads):
        p.grad = mg.tensor(g, device=device)
        r.grad = torch.tensor(g)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total = nn.utils.clip_grad_norm_(params, max_norm)
    ref_total = torch.nn.utils.clip_grad_norm_(refs, max_norm)
    np.testing.assert_array_equal(total.numpy(), ref_total.numpy())
    for p, r in zip(params, refs):
        assert on(p.grad, device)
        np.testing.assert_allclose(p.grad.numpy(), r.grad.numpy(), rtol=1e-6)


def _model(device):
    mg.manual_seed(3)
    return nn.Sequential(nn.Linear(3, 4), nn.LayerNorm(4)).to(device)


@pytest.mark.parametrize("source", ["cpu", "same"], ids=["from the host", "from the device"])
@pytest.mark.parametrize("kind", ["tensors", "arrays"])
def test_load_state_dict_lands_on_the_models_device(device, source, kind):
    saved = _model("cpu" if source == "cpu" else device).state_dict()
    values = {k: (v if kind == "tensors" else v.array) for k, v in saved.items()}
    model = _model(device)
    for p in model.parameters():
        p.array[...] = 0
    model.load_state_dict(values)
    for k, v in model.state_dict().items():
        assert on(v, device)
        np.testing.assert_array_equal(v.numpy(), saved[k].numpy())


def test_save_and_load_between_devices(device, tmp_path):
    model = _model(device)
    nn.save(model.state_dict(), tmp_path / "ckpt.safetensors")
    loaded = nn.load(tmp_path / "ckpt.safetensors", device=device)
    on_host = nn.load(tmp_path / "ckpt.safetensors")
    for k, v in model.state_dict().items():
        assert on(loaded[k], device) and on(on_host[k], "cpu")
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())
        np.testing.assert_array_equal(on_host[k].numpy(), v.numpy())
    fresh = _model("cpu")
    fresh.load_state_dict(loaded)
    for k, v in fresh.state_dict().items():
        assert on(v, "cpu")
        np.testing.assert_array_equal(v.numpy(), loaded[k].numpy())


def test_optimizer_state_given_as_arrays_lands_on_the_parameters_device(device):
    model = _model(device)
    opt = mg.optim.Adam(model.parameters(), lr=0.1)
    model(mg.randn(2, 3, device=device)).sum().backward()
    opt.step()
    state = opt.state_dict()
    as_arrays = {"param_groups": state["param_groups"],
                 "state": {i: {k: (v.array if isinstance(v, mg.Tensor) else v)
                               for k, v in s.items()} for i, s in state["state"].items()}}
    fresh = mg.optim.Adam(_model(device).parameters(), lr=0.1)
    fresh.load_state_dict(as_arrays)
    for (p, s), (_, ref) in zip(fresh.state.items(), opt.state.items()):
        assert s["step"] == ref["step"] == 1
        for key in ("exp_avg", "exp_avg_sq"):
            assert isinstance(s[key], mg.Tensor) and s[key].device == p.device
            np.testing.assert_array_equal(s[key].numpy(), ref[key].numpy())
            assert backend.xp_of(s[key].array) is backend.xp_of(p.array)
