"""Sums that overflow the dtype, against PyTorch: norm (every p, dims, keepdim) and what is
built on it (normalize, cosine_similarity), clip_grad_norm_ and get_total_norm of float16
gradients, and float16 scaled_dot_product_attention whose scores pass 65504."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.nn import functional as F
from minigrad.nn import utils
from tests.torch_ref import needs_torch, torch

INF = math.inf
BIG = {  # values whose sum of powers is past the dtype's range, or is inf
    "inf_entry": ([[1.0, INF], [3.0, 4.0]], "float32"),
    "float16_squares": ([[200.0, 300.0], [3.0, 4.0]], "float16"),
    "float32_squares": ([[1e20, 1e20], [3.0, 4.0]], "float32"),
    "float32_max": ([[3e38, 3e38], [-1.0, 2.0]], "float32"),
    "float64_squares": ([[1e200, -1e200], [3.0, 4.0]], "float64"),
    "float16_plain": ([[2.0, -3.0], [0.5, 4.0]], "float16"),
}
ORDERS = ["fro", 2, 3, 2.5, 1.5, 0.5, -1, 1, INF]
DIMS = [(None, False), (1, False), (1, True), (0, True), ((0, 1), False)]


def _pair(values, dtype, grad=True):
    a = np.array(values, dtype=dtype)
    return (mg.tensor(a, requires_grad=grad),
            torch.tensor(a, requires_grad=grad))


def _same(ours, theirs, rtol=0.0):
    """Equal values (NaN where torch's is NaN, inf where torch's is inf), and equal
    dtypes; rtol > 0 allows rounding where the order of operations differs."""
    theirs = theirs.detach().numpy()
    ours = ours.detach().numpy() if isinstance(ours, mg.Tensor) else ours
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=rtol,
                               atol=0)


@needs_torch
@pytest.mark.parametrize("case", sorted(BIG))
@pytest.mark.parametrize("p", ORDERS, ids=str)
@pytest.mark.parametrize("dim, keepdim", DIMS, ids=str)
def test_norm_past_the_dtype_range_matches_torch(case, p, dim, keepdim):
    values, dtype = BIG[case]
    x, t = _pair(values, dtype)
    out, ref = x.norm(p, dim, keepdim), t.norm(p, dim, keepdim)
    _same(out, ref, rtol=1e-6 if dtype != "float16" else 0)
    w = np.linspace(0.5, 1.5, ref.numel()).reshape(tuple(ref.shape)).astype(dtype)
    (out * mg.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    # float16's gradient is rounded once from float32 here, per op in PyTorch
    rtol = 2e-3 if dtype == "float16" else 1e-6
    theirs = t.grad.numpy().astype(np.float64)
    ours = x.grad.numpy().astype(np.float64)
    assert x.grad.dtype == getattr(mg, dtype)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=rtol, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_norm_of_an_overflowing_sum_is_inf_not_zero(dtype):
    big = {"float16": 300.0, "float32": 1e20, "float64": 1e200}[dtype]
    a = np.array([big, big], dtype=dtype)
    for p in (2, 3, 2.5):
        ref = torch.tensor(a).norm(p)
        assert mg.tensor(a).norm(p).item() == ref.item(), p
    # float16 is summed in float32 (PyTorch's 360.5, where float16 squares give inf)
    assert mg.tensor(np.array([200.0, 300.0], np.float16)).norm().item() == 360.5


@pytest.mark.parametrize("p", ["fro", 3, 2.5, 1.5, 0.5, -1])
@pytest.mark.parametrize("dim", [None, 1, (0, 1)], ids=str)
def test_norm_gradcheck(p, dim):
    x = mg.tensor(np.random.default_rng(3).uniform(0.5, 2.0, (3, 4)) *
                  np.array([1, -1, 1, -1]), requires_grad=True)
    assert mg.autograd.gradcheck(lambda x: x.norm(p, dim), [x])
    assert mg.autograd.gradgradcheck(lambda x: x.norm(p, dim) ** 2, [x])


@needs_torch
@pytest.mark.parametrize("case", sorted(BIG))
def test_normalize_and_cosine_similarity_match_torch(case):
    values, dtype = BIG[case]
    for fn, tfn in ((lambda x: F.normalize(x), lambda t: torch.nn.functional.normalize(t)),
                    (lambda x: F.normalize(x, p=3.0, dim=0),
                     lambda t: torch.nn.functional.normalize(t, p=3.0, dim=0)),
                    (lambda x: F.cosine_similarity(x, x * 0.5 + 1),
                     lambda t: torch.nn.functional.cosine_similarity(t, t * 0.5 + 1))):
        x, t = _pair(values, dtype)
        out, ref = fn(x), tfn(t)
        _same(out, ref, rtol=2e-3 if dtype == "float16" else 1e-6)
        out.sum().backward()
        ref.sum().backward()
        ours, theirs = x.grad.numpy().astype(float), t.grad.numpy().astype(float)
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
        finite = np.isfinite(theirs)
        np.testing.assert_allclose(ours[finite], theirs[finite], rtol=5e-3, atol=1e-3)


def _grads(shapes, scale, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * scale).astype(dtype) for s in shapes]


def _params(grads, lib):
    params = []
    for g in grads:
        p = lib.zeros(g.shape, dtype=getattr(lib, str(g.dtype)), requires_grad=True)
        p.grad = lib.tensor(g)
        params.append(p)
    return params


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("scale", [1.0, 300.0])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, INF])
def test_clip_grad_norm_matches_torch(dtype, scale, norm_type):
    grads = _grads([(3, 4), (5,), (2, 2)], scale, dtype)
    ours, theirs = _params(grads, mg), _params(grads, torch)
    total = utils.clip_grad_norm_(ours, 1.0, norm_type)
    ref = torch.nn.utils.clip_grad_norm_(theirs, 1.0, norm_type)
    _same(total, ref)
    for p, t in zip(ours, theirs):
        _same(p.grad, t.grad)
    assert np.isfinite(total.numpy()) and np.abs(ours[0].grad.numpy()).max() > 0


@needs_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 0.0, 2.5, INF])
def test_get_total_norm_of_float16_matches_torch(norm_type):
    tensors = _grads([(4, 7), (300,), (1,)], 250.0, "float16", seed=1)
    ours = utils.get_total_norm([mg.tensor(a) for a in tensors], norm_type)
    ref = torch.nn.utils.get_total_norm([torch.tensor(a) for a in tensors], norm_type)
    _same(ours, ref)


def _sdpa_inputs(scale, seed=0):
    rng = np.random.default_rng(seed)
    q = (rng.standard_normal((2, 3, 5, 8)) * scale).astype(np.float16)
    k = (rng.standard_normal((2, 3, 6, 8)) * scale).astype(np.float16)
    v = rng.standard_normal((2, 3, 6, 8)).astype(np.float16)
    return q, k, v, rng


MASKS = {"none": None, "causal": "causal", "float": "float", "bool": "bool"}


@needs_torch
@pytest.mark.parametrize("scale", [1.0, 60.0])
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_float16_attention_matches_torch(scale, mask):
    q, k, v, rng = _sdpa_inputs(scale)
    kwargs, tkwargs = {}, {}
    if mask == "causal":
        kwargs = tkwargs = {"is_causal": True}
    elif mask is not None and mask != "none":
        m = rng.standard_normal((5, 6)).astype(np.float16)
        m = m > 0 if mask == "bool" else m
        kwargs, tkwargs = {"attn_mask": mg.tensor(m)}, {"attn_mask": torch.tensor(m)}
    ours = [mg.tensor(a, requires_grad=True) for a in (q, k, v)]
    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = F.scaled_dot_product_attention(*ours, **kwargs)
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, **tkwargs)
    assert out.dtype == mg.float16 and not np.isnan(out.numpy()).any()
    np.testing.assert_allclose(out.numpy().astype(float), ref.detach().numpy().astype(float),
                               atol=2e-3, rtol=2e-3)
    g = rng.standard_normal(tuple(ref.shape)).astype(np.float16)
    out.backward(mg.tensor(g))
    ref.backward(torch.tensor(g))
    for a, b in zip(ours, theirs):
        assert a.grad.dtype == mg.float16
        np.testing.assert_allclose(a.grad.numpy().astype(float), b.grad.numpy().astype(float),
                                   atol=4e-3, rtol=4e-3)


@needs_torch
def test_float16_attention_with_scores_past_65504_is_finite():
    q = np.full((1, 1, 2, 4), 200.0, np.float16)
    k = np.full((1, 1, 3, 4), 200.0, np.float16)
    v = np.arange(12, dtype=np.float16).reshape(1, 1, 3, 4)
    out = F.scaled_dot_product_attention(*(mg.tensor(a) for a in (q, k, v)))
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(a)
                                                             for a in (q, k, v)))
    _same(out, ref)


@needs_torch
@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("scale", [1.0, 300.0])
def test_float16_multihead_attention_matches_torch(need_weights, scale):
    """Without the weights PyTorch runs its attention kernel (float32 inside); with them,
    float16 products (NaN past 65504, for both)."""
    torch.manual_seed(0)
    ref_layer = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    state = ref_layer.state_dict()
    ours_state = {k: mg.tensor(v.numpy()) for k, v in state.items() if "in_proj" not in k}
    for i, name in enumerate("qkv"):
        ours_state[f"{name}_proj.weight"] = mg.tensor(state["in_proj_weight"][8 * i:8 * i + 8]
                                                      .numpy())
        ours_state[f"{name}_proj.bias"] = mg.tensor(state["in_proj_bias"][8 * i:8 * i + 8]
                                                    .numpy())
    layer = mg.nn.MultiheadAttention(8, 2, batch_first=True)
    layer.load_state_dict(ours_state)
    layer.half()
    ref_layer.half()
    x = (np.random.default_rng(0).standard_normal((2, 5, 8)) * scale).astype(np.float16)
    out, _ = layer(*(mg.tensor(x),) * 3, need_weights=need_weights)
    with torch.no_grad():
        ref, _ = ref_layer(*(torch.tensor(x),) * 3, need_weights=need_weights)
    ours, theirs = out.detach().numpy().astype(float), ref.numpy().astype(float)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    finite = ~np.isnan(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], atol=4e-3, rtol=4e-3)


@needs_torch
@pytest.mark.parametrize("values", [[3e19, -3e19, 3e19, -3e19], [1e30, -1e30, 0.0, 0.0],
                                    [1e20, 2e20, -1e20, 5e19], [1e19, 2e19, 3e19]],
                         ids=["variance-inf", "huge-spread", "mean-and-variance", "mean-2e19"])
def test_layer_norm_whose_float32_variance_overflows(values):
    """Where PyTorch's CPU kernel gives a number (0 when the variance is inf), minigrad gives
    the same; where it gives NaN (it loses the mean past about 1.8e19), minigrad's result is
    0 where the variance overflows, else the float64 layer norm rounded."""
    a = np.array(values, dtype=np.float32)
    ours = F.layer_norm(mg.tensor(a), (len(values),)).numpy()
    theirs = torch.nn.functional.layer_norm(torch.tensor(a), (len(values),)).numpy()
    wide = a.astype(np.float64)
    var = wide.var()
    exact = np.zeros_like(a) if var > np.finfo(np.float32).max else \
        ((wide - wide.mean()) / np.sqrt(var + 1e-5)).astype(np.float32)
    if np.isfinite(theirs).all():
        np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_allclose(ours, exact, rtol=1e-6, atol=1e-6)
