"""flip, roll, cumsum, sort, argsort and topk against PyTorch (values, dtypes, shapes,
gradients, forward mode, node names, ties and NaN, errors), gradcheck in float64, and the
random draws randperm and multinomial: reproducible under manual_seed, the properties of
their results, their frequencies, and PyTorch's errors."""
import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

rng = np.random.default_rng(0)
NAN, INF = float("nan"), float("inf")


def r(*shape):
    return rng.standard_normal(shape)


def f32(*shape):
    return r(*shape).astype(np.float32)


def ints(*shape):
    return rng.integers(-4, 5, shape).astype(np.int64)  # (small range: many ties)


def bools(*shape):
    return rng.random(shape) < 0.5


TIES = np.array([[2.0, 1.0, 2.0, -0.0, 1.0, 3.0, 0.0, 1.0],
                 [5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0, 5.0]])
WITH_NAN = np.array([[NAN, 1.0, NAN, -INF, INF, 0.0, 1.0],
                     [3.0, NAN, -1.0, 3.0, NAN, NAN, 2.0]])

# name -> (function of (library, x), input). Sorts of inputs with ties ask torch for its
# stable sort: minigrad's sort is always stable, and then both give the same indices (torch
# takes its stable sort's dim and descending by keyword only). topk's ties are tested below.
CASES = {
    "flip": (lambda L, x: x.flip(0), r(3, 4)),
    "flip_varargs": (lambda L, x: x.flip(0, 2), r(2, 3, 4)),
    "flip_tuple_negative": (lambda L, x: L.flip(x, (-1, 0)), r(2, 3, 4)),
    "flip_list": (lambda L, x: x.flip([1]), r(2, 3)),
    "flip_no_dims": (lambda L, x: x.flip(()), r(2, 3)),
    "flip_keyword": (lambda L, x: L.flip(x, dims=(1,)), r(2, 3)),
    "flip_0d": (lambda L, x: x.flip(0), r()),
    "flip_0d_minus_one": (lambda L, x: x.flip(-1), r()),
    "flip_empty": (lambda L, x: x.flip(0, 1), np.zeros((0, 3))),
    "flip_float32": (lambda L, x: x.flip(1), f32(3, 5)),
    "flip_int64": (lambda L, x: x.flip(-1), ints(2, 5)),
    "flip_bool": (lambda L, x: x.flip(0), bools(4, 2)),
    "flip_transposed": (lambda L, x: x.transpose(0, 1).flip(0), r(3, 4)),
    "roll_flat": (lambda L, x: x.roll(1), r(3, 4)),
    "roll_flat_negative": (lambda L, x: x.roll(-5), r(3, 4)),
    "roll_flat_tuple": (lambda L, x: x.roll((2,)), r(2, 3)),
    "roll_flat_empty_dims": (lambda L, x: x.roll(2, ()), r(2, 3)),
    "roll_dim": (lambda L, x: x.roll(2, 1), r(3, 4)),
    "roll_dims": (lambda L, x: L.roll(x, (1, -2), (0, -1)), r(2, 3, 4)),
    "roll_keywords": (lambda L, x: L.roll(x, shifts=3, dims=0), r(4, 2)),
    "roll_same_dim_twice": (lambda L, x: x.roll((1, 2), (1, 1)), r(2, 5)),
    "roll_beyond_size": (lambda L, x: x.roll((7, -9), (0, 1)), r(3, 2)),
    "roll_transposed": (lambda L, x: x.transpose(0, 1).roll(1), r(3, 4)),
    "roll_0d": (lambda L, x: x.roll(1), r()),
    "roll_empty": (lambda L, x: x.roll(1, 0), np.zeros((0, 3))),
    "roll_empty_flat": (lambda L, x: x.roll(2), np.zeros((2, 0))),
    "roll_float32": (lambda L, x: x.roll(1, 0), f32(3, 2)),
    "roll_int64": (lambda L, x: x.roll(-1, 1), ints(2, 4)),
    "roll_bool": (lambda L, x: x.roll(3), bools(2, 3)),
    "cumsum": (lambda L, x: x.cumsum(0), r(3, 4)),
    "cumsum_last": (lambda L, x: x.cumsum(-1), r(3, 4)),
    "cumsum_3d": (lambda L, x: L.cumsum(x, 1), r(2, 3, 4)),
    "cumsum_keyword": (lambda L, x: L.cumsum(x, dim=2), r(2, 3, 4)),
    "cumsum_0d": (lambda L, x: x.cumsum(0), r()),
    "cumsum_0d_minus_one": (lambda L, x: x.cumsum(-1), r()),
    "cumsum_empty": (lambda L, x: x.cumsum(0), np.zeros((0, 3))),
    "cumsum_empty_dim": (lambda L, x: x.cumsum(1), np.zeros((2, 0))),
    "cumsum_float32_long": (lambda L, x: x.cumsum(1), f32(3, 3000)),
    "cumsum_float16_long": (lambda L, x: x.half().cumsum(1), r(2, 1500)),
    "cumsum_dtype": (lambda L, x: x.cumsum(0, dtype=L.float64), f32(4, 2)),
    "cumsum_int64": (lambda L, x: x.cumsum(1), ints(3, 4)),
    "cumsum_int32": (lambda L, x: x.int().cumsum(0), ints(3, 4)),
    "cumsum_int_as_float": (lambda L, x: x.cumsum(0, dtype=L.float32), ints(5)),
    "cumsum_bool": (lambda L, x: x.cumsum(-1), bools(3, 6)),
    "sort": (lambda L, x: x.sort(), r(3, 5)),
    "sort_descending_dim0": (lambda L, x: x.sort(0, True), r(4, 3)),
    "sort_keywords": (lambda L, x: L.sort(x, dim=-2, descending=True, stable=True), r(2, 5, 3)),
    "sort_ties": (lambda L, x: x.sort(stable=True), TIES),
    "sort_ties_descending": (lambda L, x: x.sort(dim=1, descending=True, stable=True), TIES),
    "sort_ties_dim0": (lambda L, x: x.sort(dim=0, stable=True), TIES),
    "sort_nan": (lambda L, x: x.sort(stable=True), WITH_NAN),
    "sort_nan_descending": (lambda L, x: x.sort(descending=True, stable=True), WITH_NAN),
    "sort_0d": (lambda L, x: x.sort(), r()),
    "sort_0d_dim0_descending": (lambda L, x: x.sort(0, True), r()),
    "sort_empty": (lambda L, x: x.sort(0), np.zeros((0, 3))),
    "sort_empty_dim": (lambda L, x: x.sort(), np.zeros((2, 0))),
    "sort_float32": (lambda L, x: x.sort(1), f32(3, 6)),
    "sort_int64": (lambda L, x: x.sort(stable=True), ints(4, 7)),
    "sort_int64_descending": (lambda L, x: x.sort(stable=True, dim=0, descending=True),
                              ints(9, 3)),
    "sort_bool": (lambda L, x: x.sort(stable=True), bools(3, 8)),
    "sort_bool_descending": (lambda L, x: x.sort(descending=True, stable=True), bools(3, 8)),
    "sort_transposed": (lambda L, x: x.transpose(0, 1).sort(-1), r(5, 3)),
    "argsort": (lambda L, x: x.argsort(), r(3, 5)),
    "argsort_descending": (lambda L, x: L.argsort(x, 0, True), r(4, 3)),
    "argsort_ties": (lambda L, x: x.argsort(stable=True, dim=1, descending=True), TIES),
    "argsort_nan": (lambda L, x: L.argsort(x, stable=True), WITH_NAN),
    "argsort_0d": (lambda L, x: x.argsort(), r()),
    "argsort_empty": (lambda L, x: x.argsort(0), np.zeros((0, 2))),
    "argsort_int64": (lambda L, x: x.argsort(dim=0, stable=True), ints(8, 2)),
    "argsort_bool": (lambda L, x: x.argsort(descending=True, stable=True), bools(2, 9)),
    "topk": (lambda L, x: x.topk(2), r(3, 5)),
    "topk_smallest_dim0": (lambda L, x: x.topk(2, 0, largest=False), r(4, 3)),
    "topk_keywords": (lambda L, x: L.topk(x, k=3, dim=1, largest=True, sorted=True), r(2, 6)),
    "topk_all": (lambda L, x: x.topk(5), r(3, 5)),
    "topk_zero": (lambda L, x: x.topk(0), r(3, 5)),
    "topk_nan": (lambda L, x: x.topk(2), np.array([[1.0, NAN, -INF, 2.0], [NAN, 0.0, 3.0, 1.0]])),
    "topk_nan_smallest": (lambda L, x: x.topk(3, largest=False), np.array([[NAN, 1.0, -INF, 2.0]])),
    "topk_0d": (lambda L, x: x.topk(1), r()),
    "topk_0d_zero": (lambda L, x: x.topk(0), r()),
    "topk_empty": (lambda L, x: x.topk(0, 0), np.zeros((0, 3))),
    "topk_empty_rows": (lambda L, x: x.topk(2, 1), np.zeros((0, 3))),
    "topk_float32": (lambda L, x: x.topk(3, largest=False), f32(2, 7)),
    "topk_int64": (lambda L, x: x.topk(2), np.array([[3, -1, 7, 0], [5, 9, -2, 4]])),
}


def cotangent(shape):
    """The same random gradient for minigrad and torch, from the output's shape."""
    return np.random.default_rng(len(shape) + int(np.prod(shape))).standard_normal(shape)


def _run(L, fn, array, device):
    on = On(mg, device) if L is mg else L
    differentiable = array.dtype.kind == "f"
    x = on.tensor(array, requires_grad=differentiable)
    out = fn(on, x)
    outs = out if isinstance(out, tuple) else (out,)
    floating = [o for o in outs if o.requires_grad]
    if floating:
        total = sum((o * on.tensor(cotangent(tuple(o.shape)), dtype=o.dtype)).sum()
                    for o in floating)
        total.backward()
    return out, outs, x.grad if differentiable else None


def _same(got, want):
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("case", list(CASES))
def test_values_dtypes_and_gradients_as_torch(case, device):
    fn, array = CASES[case]
    out, got, got_grad = _run(mg, fn, array, device)
    want_out, want, want_grad = _run(torch, fn, array, "cpu")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)
    if isinstance(want_out, tuple):  # torch's named tuples: (values, indices)
        _same(out.values, want_out.values)
        _same(out.indices, want_out.indices)
    assert (got_grad is None) == (want_grad is None)
    if got_grad is not None:
        _same(got_grad, want_grad)


@needs_torch
@pytest.mark.parametrize("name, fn", [
    ("FlipBackward0", lambda x: x.flip(0)),
    ("RollBackward0", lambda x: x.roll(1)),
    ("RollBackward0", lambda x: x.roll((1, 1), (0, 1))),
    ("CumsumBackward0", lambda x: x.cumsum(1)),
    ("CumsumBackward0", lambda x: x.half().cumsum(0)),
])
def test_node_names_as_torch(name, fn, device):
    a = r(2, 3)
    got = fn(mg.tensor(a, requires_grad=True, device=device)).grad_fn.name()
    assert got == fn(torch.tensor(a, requires_grad=True)).grad_fn.name() == name


GRADCHECKS = {
    "flip": (lambda x: x.flip(0, 2) * x, (2, 3, 2)),
    "flip_0d": (lambda x: x.flip(0) * x, ()),
    "roll_flat": (lambda x: x.roll(4) * x, (3, 2)),
    "roll_dims": (lambda x: x.roll((1, -1), (0, 1)) * x, (3, 4)),
    "cumsum": (lambda x: x.cumsum(0) * x, (4, 3)),
    "cumsum_last": (lambda x: x.cumsum(-1).cumsum(-1), (2, 5)),
    "cumsum_0d": (lambda x: x.cumsum(0) * x, ()),
    "sort": (lambda x: x.sort(1).values * mg.arange(4.0, dtype=mg.float64), (3, 4)),
    "sort_descending": (lambda x: x.sort(0, descending=True)[0].cumsum(0), (5, 2)),
    "topk": (lambda x: x.topk(2).values ** 2, (3, 5)),
    "topk_smallest": (lambda x: x.topk(3, 0, largest=False).values.exp(), (4, 2)),
}


@pytest.mark.parametrize("case", list(GRADCHECKS))
def test_gradcheck(case):
    fn, shape = GRADCHECKS[case]
    x = mg.tensor(np.random.default_rng(3).standard_normal(shape), requires_grad=True)
    assert mg.autograd.gradcheck(fn, (x,))


@pytest.mark.parametrize("case", ["flip", "roll_dims", "cumsum", "sort"])
def test_gradgradcheck(case):
    fn, shape = GRADCHECKS[case]
    x = mg.tensor(np.random.default_rng(4).standard_normal(shape), requires_grad=True)
    assert mg.autograd.gradgradcheck(fn, (x,))


JVPS = {
    "flip": lambda x: x.flip(0, -1),
    "roll_flat": lambda x: x.roll(-3),
    "roll_dims": lambda x: x.roll((2, 1), (1, 0)),
    "cumsum": lambda x: x.cumsum(1),
    "cumsum_dim0": lambda x: x.cumsum(0),
    "sort_values": lambda x: x.sort(1, descending=True)[0],
    "topk_values": lambda x: x.topk(2, 0)[0],
}


@needs_torch
@pytest.mark.parametrize("case", list(JVPS))
def test_forward_mode_as_torch(case, device):
    fn = JVPS[case]
    gen = np.random.default_rng(5)
    a, v = gen.standard_normal((3, 4)), gen.standard_normal((3, 4))
    out, tangent = mg.func.jvp(fn, (mg.tensor(a, device=device),), (mg.tensor(v, device=device),))
    want_out, want_tangent = torch.func.jvp(fn, (torch.tensor(a),), (torch.tensor(v),))
    _same(out, want_out)
    _same(tangent, want_tangent)


def test_forward_mode_of_the_primitives_through_forward_ad(device):
    """The dual API: the tangent of a linear op is the op applied to the tangent."""
    gen = np.random.default_rng(6)
    a, v = gen.standard_normal((2, 5)), gen.standard_normal((2, 5))
    fwAD = mg.autograd.forward_ad
    for fn, expected in ((lambda t: t.flip(1), v[:, ::-1]),
                         (lambda t: t.roll(2, 1), np.roll(v, 2, axis=1)),
                         (lambda t: t.cumsum(1), np.cumsum(v, axis=1))):
        with fwAD.dual_level():
            x = fwAD.make_dual(mg.tensor(a, device=device), mg.tensor(v, device=device))
            tangent = fwAD.unpack_dual(fn(x)).tangent
            np.testing.assert_allclose(tangent.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("op", [lambda x: x.flip(0), lambda x: x.flip(()),
                                lambda x: x.roll(1), lambda x: x.roll(0, 1)])
def test_flip_and_roll_return_copies(op, device):
    x = mg.tensor(np.arange(6.0).reshape(2, 3), device=device)
    y = op(x)
    y.add_(100.0)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))
    before = y.numpy().copy()
    x.mul_(-1.0)
    np.testing.assert_array_equal(y.numpy(), before)


@needs_torch
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("array", [TIES, ints(5, 9), bools(3, 7), WITH_NAN])
def test_topk_takes_ties_in_their_order_as_torch_stable_sort(array, largest, device):
    """torch's topk picks among equal elements in an order of its own; minigrad's are the
    first of torch's stable sort, and the values are torch's topk values."""
    k = 3
    if array.dtype == np.bool_:
        array = array.astype(np.float64)
    x = mg.tensor(array, device=device)
    values, indices = x.topk(k, largest=largest)
    t = torch.tensor(array)
    order = torch.sort(t, descending=largest, stable=True).indices[:, :k]
    np.testing.assert_array_equal(indices.numpy(), order.numpy())
    np.testing.assert_array_equal(values.numpy(), t.topk(k, largest=largest).values.numpy())


@needs_torch
def test_topk_unsorted_picks_the_same_elements_as_torch(device):
    a = r(4, 7)
    values, indices = mg.tensor(a, device=device).topk(3, 1, sorted=False)
    want = torch.tensor(a).topk(3, 1, sorted=False)
    for got_row, want_row in zip(indices.numpy(), want.indices.numpy()):
        assert set(got_row.tolist()) == set(want_row.tolist())
    np.testing.assert_array_equal(np.sort(values.numpy(), 1), np.sort(want.values.numpy(), 1))


def test_sort_and_topk_return_values_and_indices_by_name(device):
    x = mg.tensor(r(2, 4), device=device)
    out = x.sort()
    assert isinstance(out, mg.ValuesIndices) and out.values is out[0] and out.indices is out[1]
    assert x.topk(2).indices.dtype == mg.int64
    assert x.argsort().dtype == mg.int64 and mg.argsort(x).shape == (2, 4)


def test_sort_gradient_reaches_the_places_the_values_came_from(device):
    x = mg.tensor([[3.0, 1.0, 2.0]], requires_grad=True, device=device)
    values, indices = x.sort(descending=True)
    (values * mg.tensor([[10.0, 20.0, 30.0]], device=device)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[10.0, 30.0, 20.0]])
    assert not indices.requires_grad


# --- errors ------------------------------------------------------------------------------------

BAD = {
    "flip_dim_out_of_range": (lambda L: L.ones(2, 3).flip(2), IndexError),
    "flip_0d_dim_out_of_range": (lambda L: L.tensor(1.0).flip(1), IndexError),
    "flip_repeated_dim": (lambda L: L.ones(2, 3).flip(0, -2), RuntimeError),
    "flip_float_dim": (lambda L: L.ones(2, 3).flip(0.5), TypeError),
    "flip_without_dims": (lambda L: L.ones(2, 3).flip(), TypeError),
    "roll_shifts_without_dims": (lambda L: L.ones(2, 3).roll((1, 2)), RuntimeError),
    "roll_more_shifts_than_dims": (lambda L: L.ones(2, 3).roll((1, 2), 0), RuntimeError),
    "roll_more_dims_than_shifts": (lambda L: L.ones(2, 3).roll(1, (0, 1)), RuntimeError),
    "roll_no_shifts": (lambda L: L.ones(2, 3).roll(()), RuntimeError),
    "roll_dim_out_of_range": (lambda L: L.ones(2, 3).roll(1, 5), IndexError),
    "roll_0d_with_dim": (lambda L: L.tensor(1.0).roll(1, 0), IndexError),
    "roll_float_shift": (lambda L: L.ones(2, 3).roll(1.5), TypeError),
    "roll_bool_shift": (lambda L: L.ones(2, 3).roll(True), TypeError),
    "roll_float_dim": (lambda L: L.ones(2, 3).roll(1, 0.0), TypeError),
    "cumsum_dim_out_of_range": (lambda L: L.ones(2, 3).cumsum(2), IndexError),
    "cumsum_0d_dim_out_of_range": (lambda L: L.tensor(1.0).cumsum(1), IndexError),
    "cumsum_without_dim": (lambda L: L.ones(2, 3).cumsum(), TypeError),
    "sort_dim_out_of_range": (lambda L: L.ones(2, 3).sort(2), IndexError),
    "sort_0d_dim_out_of_range": (lambda L: L.tensor(1.0).sort(1), IndexError),
    "sort_stable_positional": (lambda L: L.ones(2, 3).sort(0, True, True), TypeError),
    "argsort_dim_out_of_range": (lambda L: L.ones(2, 3).argsort(-3), IndexError),
    "argsort_stable_positional": (lambda L: L.ones(2, 3).argsort(0, True, True), TypeError),
    "topk_k_too_large": (lambda L: L.ones(2, 3).topk(4), RuntimeError),
    "topk_k_negative": (lambda L: L.ones(2, 3).topk(-1), RuntimeError),
    "topk_0d_k_two": (lambda L: L.tensor(1.0).topk(2), RuntimeError),
    "topk_empty_dim": (lambda L: L.ones(0, 3).topk(1, 0), RuntimeError),
    "topk_dim_out_of_range": (lambda L: L.ones(2, 3).topk(1, 2), IndexError),
    "topk_float_k": (lambda L: L.ones(2, 3).topk(2.0), TypeError),
    "topk_bool": (lambda L: L.tensor([True, False]).topk(1), RuntimeError),
    "multinomial_negative_weight": (lambda L: L.tensor([1.0, -1.0]).multinomial(1),
                                    RuntimeError),
    "multinomial_inf_weight": (lambda L: L.tensor([1.0, INF]).multinomial(1), RuntimeError),
    "multinomial_nan_weight": (lambda L: L.tensor([1.0, NAN]).multinomial(1, True),
                               RuntimeError),
    "multinomial_zero_row": (lambda L: L.tensor([[1.0, 1.0], [0.0, 0.0]]).multinomial(1),
                             RuntimeError),
    "multinomial_too_many": (lambda L: L.tensor([1.0, 0.0, 3.0]).multinomial(4), RuntimeError),
    "multinomial_no_categories": (lambda L: L.ones(2, 0).multinomial(1), RuntimeError),
    "multinomial_zero_samples": (lambda L: L.ones(3).multinomial(0), RuntimeError),
    "multinomial_negative_samples": (lambda L: L.multinomial(L.ones(3), -1, True),
                                     RuntimeError),
    "multinomial_float_samples": (lambda L: L.ones(3).multinomial(2.0), TypeError),
    "multinomial_integer_weights": (lambda L: L.tensor([1, 2]).multinomial(1), RuntimeError),
    "multinomial_bool_weights": (lambda L: L.tensor([True, False]).multinomial(1),
                                 RuntimeError),
    "multinomial_0d": (lambda L: L.tensor(1.0).multinomial(1), RuntimeError),
    "multinomial_3d": (lambda L: L.ones(2, 2, 2).multinomial(1), RuntimeError),
    "randperm_negative": (lambda L: L.randperm(-1), RuntimeError),
    "randperm_float_n": (lambda L: L.randperm(5.0), TypeError),
    "randperm_bool": (lambda L: L.randperm(3, dtype=L.bool), NotImplementedError),
    "randperm_uint8_too_large": (lambda L: L.randperm(300, dtype=L.uint8), RuntimeError),
    "randperm_float16_too_large": (lambda L: L.randperm(3000, dtype=L.float16), RuntimeError),
}


@needs_torch
@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_raise_as_torch(case, device):
    fn, kind = BAD[case]
    message = raises_as_torch(fn, kind, device)
    op = case.split("_")[0]
    if kind is RuntimeError:  # minigrad's own messages name the op
        assert op in message, message


def test_multinomial_errors_name_the_argument():
    with pytest.raises(RuntimeError, match=r"multinomial.*input.*< 0"):
        mg.tensor([1.0, -1.0]).multinomial(1)
    with pytest.raises(RuntimeError, match=r"multinomial.*input.*sum to 0"):
        mg.tensor([[0.0, 0.0]]).multinomial(1)
    with pytest.raises(RuntimeError, match=r"multinomial.*num_samples = 3 > 2"):
        mg.tensor([1.0, 1.0]).multinomial(3)
    with pytest.raises(RuntimeError, match=r"multinomial.*num_samples = 0"):
        mg.tensor([1.0, 1.0]).multinomial(0, replacement=True)


# --- randperm and multinomial ----------------------------------------------------------------

def _draws(make, seed):
    mg.manual_seed(seed)
    return make().numpy()


@pytest.mark.parametrize("make", [
    lambda: mg.randperm(50),
    lambda: mg.multinomial(mg.tensor(np.linspace(0.0, 1.0, 30)), 12),
    lambda: mg.tensor([[1.0, 2.0, 3.0], [5.0, 0.0, 1.0]]).multinomial(20, replacement=True),
])
def test_draws_repeat_under_manual_seed(make):
    first, again, other_seed = _draws(make, 7), _draws(make, 7), _draws(make, 8)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other_seed)
    mg.manual_seed(7)
    make()
    assert not np.array_equal(first, make().numpy())  # (the stream moves on)


@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
def test_randperm_is_a_permutation(n, device):
    p = mg.randperm(n, device=device)
    assert p.dtype == mg.int64 and p.shape == (n,) and p.device == mg.Device(device)
    np.testing.assert_array_equal(np.sort(p.numpy()), np.arange(n))


@pytest.mark.parametrize("dtype", [mg.int32, mg.uint8, mg.float32, mg.float64, mg.float16])
def test_randperm_dtypes(dtype):
    n = 256 if dtype == mg.uint8 else 100
    p = mg.randperm(n, dtype=dtype)
    assert p.dtype == dtype
    np.testing.assert_array_equal(np.sort(p.numpy().astype(np.int64)), np.arange(n))
    assert mg.randperm(3, dtype=mg.float32, requires_grad=True).requires_grad
    assert mg.randperm(2049, dtype=mg.float16).shape == (2049,)  # (the largest torch allows)


def test_randperm_is_uniform():
    counts = np.zeros((4, 4))
    for _ in range(4000):
        counts[np.arange(4), mg.randperm(4).numpy()] += 1
    np.testing.assert_allclose(counts / 4000, 0.25, atol=0.04)  # (sd 0.007)


@pytest.mark.parametrize("weights, num_samples, replacement", [
    ([1.0, 2.0, 3.0], 2, False),
    ([1.0, 2.0, 3.0], 3, False),
    ([1.0, 2.0, 3.0], 7, True),
    ([[1.0, 0.0, 1.0, 5.0], [0.1, 0.2, 0.3, 0.4]], 4, False),
    ([[1.0, 0.0, 1.0, 5.0], [0.1, 0.2, 0.3, 0.4]], 9, True),
])
@pytest.mark.parametrize("dtype", [mg.float32, mg.float64, mg.float16])
def test_multinomial_shapes_dtypes_and_range(weights, num_samples, replacement, dtype, device):
    w = mg.tensor(weights, dtype=dtype, device=device, requires_grad=dtype != mg.float16)
    out = w.multinomial(num_samples, replacement)
    rows = () if w.ndim == 1 else (w.shape[0],)
    assert out.shape == rows + (num_samples,) and out.dtype == mg.int64
    assert out.device == mg.Device(device) and not out.requires_grad
    picks = out.numpy().reshape(-1, num_samples)
    assert picks.min() >= 0 and picks.max() < w.shape[-1]
    if not replacement:
        assert all(len(set(row)) == num_samples for row in picks.tolist())


def test_multinomial_of_no_rows_as_torch():
    assert mg.ones(0, 4).multinomial(2).shape == (0, 2)
    if torch is not None:
        assert torch.ones(0, 4).multinomial(2).shape == (0, 2)


def test_multinomial_never_draws_a_zero_weight_while_positive_ones_remain():
    w = mg.tensor([[0.0, 1.0, 0.0, 2.0, 0.0, 0.5, 0.0]]).expand(2000, 7)
    first = w.multinomial(3).numpy()
    assert set(first.reshape(-1).tolist()) == {1, 3, 5}
    whole = w.multinomial(7).numpy()
    assert np.all(np.sort(whole[:, :3], 1) == [1, 3, 5])  # then the zero-weight ones
    assert {frozenset(row) for row in whole.tolist()} == {frozenset(range(7))}
    assert set(whole[:, 3].tolist()) == {0, 2, 4, 6}  # (those in a random order)
    with_replacement = w.multinomial(20, replacement=True).numpy()
    assert set(with_replacement.reshape(-1).tolist()) == {1, 3, 5}
    assert set(mg.tensor([0.0, 0.0, 4.0]).multinomial(5, True).tolist()) == {2}


def test_multinomial_frequencies_follow_the_weights():
    weights = np.array([1.0, 2.0, 3.0, 4.0])  # (need not sum to 1)
    p = weights / weights.sum()
    n = 20000
    draws = mg.tensor(weights).multinomial(n, replacement=True).numpy()
    np.testing.assert_allclose(np.bincount(draws, minlength=4) / n, p, atol=0.02)  # (sd 0.004)
    # without replacement: the first draw follows the weights, the second the weights of
    # what is left, P(second = j) = sum over i != j of p_i p_j / (1 - p_i)
    pairs = mg.tensor(weights).expand(n, 4).multinomial(2).numpy()
    second = [sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)]
    np.testing.assert_allclose(np.bincount(pairs[:, 0], minlength=4) / n, p, atol=0.02)
    np.testing.assert_allclose(np.bincount(pairs[:, 1], minlength=4) / n, second, atol=0.02)
    # rows of a matrix are distributions of their own
    rows = mg.tensor([[9.0, 1.0], [1.0, 3.0]]).multinomial(n, replacement=True).numpy()
    np.testing.assert_allclose((rows == 0).mean(1), [0.9, 0.25], atol=0.02)
