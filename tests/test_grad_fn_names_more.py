"""The ops recorded with PyTorch's node for them (sort, topk, gather, index_select, rsqrt,
tril/triu, repeat/tile, split with sizes, rounded division, matmul of vectors, bmm, reshape
of a non-contiguous tensor, the 1- and inf-norms): first and second derivatives in float64,
forward mode, values and gradients against PyTorch, and a compiled step's replay."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck, gradgradcheck
from tests.test_forward_ad import assert_jvp_rule
from tests.torch_ref import needs_torch, torch

# name -> (function of the float input(s), shapes of the float inputs)
CASES = {
    "sort": (lambda x: x.sort(1)[0], [(3, 4)]),
    "sort_descending": (lambda x: x.sort(0, descending=True)[0], [(3, 4)]),
    "topk": (lambda x: x.topk(2)[0], [(3, 4)]),
    "gather": (lambda x: x.gather(1, mg.tensor([[0, 3, 3], [1, 0, 2], [2, 2, 2]],
                                               device=x.device)), [(3, 4)]),
    "index_select": (lambda x: x.index_select(1, mg.tensor([3, 0, 3], device=x.device)),
                     [(3, 4)]),
    "rsqrt": (lambda x: (x * x + 0.5).rsqrt(), [(3, 4)]),
    "tril": (lambda x: x.tril(), [(3, 4)]),
    "triu": (lambda x: x.triu(1), [(2, 3, 4)]),
    "tril_below": (lambda x: x.tril(-1), [(4, 3)]),
    "repeat": (lambda x: x.repeat(2, 1, 3), [(3, 4)]),
    "repeat_ones": (lambda x: x.repeat(1, 1), [(3, 4)]),
    "tile": (lambda x: x.tile((2,)), [(3, 4)]),
    "split_sizes": (lambda x: x.split([1, 3], 1)[1], [(3, 4)]),
    "dot": (lambda x, y: x @ y, [(5,), (5,)]),
    "mv": (lambda x, y: x @ y, [(3, 5), (5,)]),
    "vector_matmul": (lambda x, y: x @ y, [(3,), (3, 4)]),
    "bmm": (lambda x, y: x.bmm(y), [(2, 3, 4), (2, 4, 5)]),
    "reshape_copy": (lambda x: x.T.reshape(12), [(3, 4)]),
    "reshape_alias": (lambda x: x.permute(2, 0, 1).reshape(4, 6), [(2, 3, 4)]),
    "flatten_copy": (lambda x: x[:, ::2].flatten(), [(3, 5)]),
    "norm_1": (lambda x: x.norm(1), [(3, 4)]),
    "norm_1_dim": (lambda x: x.norm(1, 1, keepdim=True), [(3, 4)]),
    "norm_inf": (lambda x: x.norm(float("inf")), [(3, 4)]),
    "norm_inf_dim": (lambda x: x.norm(float("inf"), 0), [(3, 4)]),
    "norm_minus_inf_dims": (lambda x: x.norm(float("-inf"), (0, 2)), [(2, 3, 4)]),
}

NAMES = {"sort": "SortBackward0", "sort_descending": "SortBackward0", "topk": "TopkBackward0",
         "gather": "GatherBackward0", "index_select": "IndexSelectBackward0",
         "rsqrt": "RsqrtBackward0", "tril": "TrilBackward0", "triu": "TriuBackward0",
         "tril_below": "TrilBackward0", "repeat": "RepeatBackward0",
         "repeat_ones": "RepeatBackward0", "tile": "RepeatBackward0",
         "split_sizes": "SplitWithSizesBackward0", "dot": "DotBackward0", "mv": "MvBackward0",
         "vector_matmul": "SqueezeBackward4", "bmm": "BmmBackward0",
         "reshape_copy": "UnsafeViewBackward0", "reshape_alias": "ReshapeAliasBackward0",
         "flatten_copy": "UnsafeViewBackward0", "norm_1": "LinalgVectorNormBackward0",
         "norm_1_dim": "LinalgVectorNormBackward0", "norm_inf": "LinalgVectorNormBackward0",
         "norm_inf_dim": "LinalgVectorNormBackward0",
         "norm_minus_inf_dims": "LinalgVectorNormBackward0"}


def _arrays(shapes, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _inputs(shapes, device, dtype=np.float64):
    return [mg.tensor(a, device=device, requires_grad=True) for a in _arrays(shapes, dtype)]


@pytest.mark.parametrize("case", list(CASES))
def test_node_is_named_as_in_torch(case, device):
    fn, shapes = CASES[case]
    y = fn(*_inputs(shapes, device))
    assert type(y.grad_fn).__name__ == y.grad_fn.name() == NAMES[case]


@pytest.mark.parametrize("case", list(CASES))
def test_first_and_second_derivatives(case, device):
    fn, shapes = CASES[case]
    inputs = _inputs(shapes, device)
    assert gradcheck(fn, inputs)
    assert gradgradcheck(fn, inputs)


@pytest.mark.parametrize("case", list(CASES))
def test_forward_mode(case, device):
    fn, shapes = CASES[case]
    assert_jvp_rule(fn, _arrays(shapes), device)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_gradients_as_torch(case, dtype, device):
    fn, shapes = CASES[case]
    arrays = _arrays(shapes, dtype, seed=1)
    ours = [mg.tensor(a, device=device, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    y, t = fn(*ours), _torch_fn(case)(*theirs)
    assert type(y.grad_fn).__name__ == t.grad_fn.name()
    tol = dict(rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-7 if dtype == np.float32 else 0)
    np.testing.assert_allclose(y.numpy(), t.detach().numpy(), **tol)
    g = np.random.default_rng(2).standard_normal(tuple(t.shape)).astype(dtype)
    y.backward(mg.tensor(g, device=device))
    t.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)


def _torch_fn(case):
    """The case written for torch (index tensors made with torch)."""
    if case == "gather":
        return lambda x: x.gather(1, torch.tensor([[0, 3, 3], [1, 0, 2], [2, 2, 2]]))
    if case == "index_select":
        return lambda x: x.index_select(1, torch.tensor([3, 0, 3]))
    return CASES[case][0]


def test_data_movement_is_exact_and_keeps_the_dtype(device):
    x = mg.tensor(np.arange(12, dtype=np.float16).reshape(3, 4), device=device,
                  requires_grad=True)
    for y in (x.sort(1, descending=True)[0], x.repeat(2, 1), x.tril(), x.T.reshape(12)):
        assert y.dtype == mg.float16
    assert np.array_equal(x.repeat(2, 1).numpy(), np.tile(x.numpy(), (2, 1)))
    assert x.repeat(1, 1).is_contiguous() and x.T.repeat(1, 1).is_contiguous()
    assert np.array_equal(x.T.reshape(12).numpy(), x.numpy().T.reshape(12))


def test_rounded_division_has_zero_gradients_as_torch(device):
    x = mg.tensor([[-3.5, 2.0], [7.25, -1.0]], device=device, requires_grad=True)
    w = mg.tensor([[2.0, -0.75], [3.0, 0.5]], device=device, requires_grad=True)
    for mode, want in (("floor", np.floor), ("trunc", np.trunc)):
        y = mg.div(x, w, rounding_mode=mode)
        assert y.grad_fn.name() == "DivBackward2"
        np.testing.assert_array_equal(y.numpy(), want(x.numpy() / w.numpy()))
        x.grad = w.grad = None
        y.sum().backward()
        assert not x.grad.numpy().any() and not w.grad.numpy().any()
    h = mg.tensor([7.0, -7.0], dtype=mg.float16, device=device, requires_grad=True)
    y = mg.div(h, 2, rounding_mode="floor")
    assert y.dtype == mg.float16 and y.grad_fn.name() == "DivBackward2"
    assert y.tolist() == [3.0, -4.0]


def test_a_copy_made_by_reshape_is_no_view(device):
    x = mg.tensor(np.arange(6.0).reshape(2, 3), device=device, requires_grad=True)
    y = x.T.reshape(6)
    assert y.grad_fn.next_functions[0][0].name() == "CloneBackward0"
    z = y * 1
    z.add_(1)  # (changes z only)
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    a = x.detach().T.reshape(3, 2)  # a view: writes reach x
    a[0, 0] = 10.0
    assert x[0, 0].item() == 10.0


def test_compiled_step_replays_the_new_ops(device):
    rng = np.random.default_rng(3)
    w = mg.tensor(rng.standard_normal((4, 3)), device=device, requires_grad=True)
    v = mg.tensor(rng.standard_normal(3), device=device, requires_grad=True)
    index = mg.tensor([[0, 2, 1], [1, 1, 0], [2, 0, 0], [0, 0, 2]], device=device)

    def step(x):
        w.grad = v.grad = None
        h = (x @ w).tril() + x[:, :3].T.reshape(12).reshape(4, 3).rsqrt()
        first, rest = h.repeat(1, 2).split([2, 4], 1)  # (each piece used)
        h = rest.index_select(1, index[0])
        loss = (h.gather(1, index).sort(1)[0] @ v).sum() + (v @ v) + h.topk(1)[0].sum()
        loss = loss + first.sum()
        loss = loss + mg.div(h, 0.5, rounding_mode="floor").sum()
        loss.backward()
        return loss

    xs = [mg.tensor(rng.random((4, 4)) + 0.5, device=device) for _ in range(4)]
    eager = []
    for x in xs:
        eager.append((step(x).numpy().copy(), w.grad.numpy().copy(), v.grad.numpy().copy()))
    run = mg.compile(step)
    for x, (loss, gw, gv) in zip(xs, eager):
        assert np.array_equal(run(x).numpy(), loss)
        assert np.array_equal(w.grad.numpy(), gw) and np.array_equal(v.grad.numpy(), gv)
    assert run.replays >= 1


@needs_torch
@pytest.mark.parametrize("dtype,n", [("float16", 31), ("float32", 5000), ("float64", 5000)])
def test_rsqrt_and_its_gradient_have_torchs_bits(dtype, n):
    rng = np.random.default_rng(5)
    for _ in range(20 if n < 32 else 1):
        a = (rng.random(n) * 100 + 1e-3).astype(dtype)
        g = rng.standard_normal(n).astype(dtype)
        x = mg.tensor(a, requires_grad=True)
        out = x.rsqrt()
        out.backward(mg.tensor(g))
        t = torch.tensor(a, requires_grad=True)
        expected = t.rsqrt()
        expected.backward(torch.tensor(g))
        np.testing.assert_array_equal(out.numpy(), expected.detach().numpy())
        np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("p", [1, float("inf"), float("-inf")])
def test_norm_node_keeps_the_bits_of_its_ops(p, dtype, device):
    """norm(1) and norm(+-inf) are one node, with the values and gradients (first and
    second order) of abs followed by sum, amax or amin."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((4, 6)).astype(dtype)
    a[0, :2] = 0.0
    a[1, 1] = -a[1, 3]  # (a tie of |x|)
    g = mg.tensor(rng.standard_normal(4).astype(dtype), device=device)
    v = mg.tensor(rng.standard_normal((4, 6)).astype(dtype), device=device)
    reduce = {1: "sum", float("inf"): "amax", float("-inf"): "amin"}[p]
    results = []
    for fn in (lambda x: x.norm(p, 1), lambda x: getattr(x.abs(), reduce)(1)):
        x = mg.tensor(a, device=device, requires_grad=True)
        y = fn(x)
        (gx,) = mg.autograd.grad(y, x, g, create_graph=True)
        (ggx,) = mg.autograd.grad((gx * v).sum(), x, allow_unused=True, materialize_grads=True)
        results.append([t.detach().numpy() for t in (y, gx, ggx)])
    for ours, composite in zip(*results):
        assert ours.dtype == composite.dtype
        np.testing.assert_array_equal(ours, composite)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_sum_with_dtype_is_one_node_with_the_bits_of_a_cast(dtype, device):
    a = np.random.default_rng(8).standard_normal((5, 7)).astype(dtype)
    for dims in (None, 0, (0, 1)):
        results = []
        for cast_first in (False, True):
            x = mg.tensor(a, device=device, requires_grad=True)
            y = (x.double() if cast_first else x).sum(dims, dtype=mg.float64)
            y.backward(mg.ones_like(y) * 0.3)
            results.append((y.numpy(), x.grad.numpy()))
        assert y.dtype == mg.float64 and x.grad.dtype == x.dtype
        for ours, cast in zip(*results):
            assert ours.dtype == cast.dtype
            np.testing.assert_array_equal(ours, cast)
