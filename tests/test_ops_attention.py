"""The tiled attention primitive (minigrad.fused.Attention): equal to the composite of Tensor
ops for every tiling, mask, causal offset and dropout; gradients by finite differences;
second derivatives exact in one tile and refused across tiles; and PyTorch's SDPA."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.fused.attention import TILE, Attention, blocks
from tests.test_ops_elementwise import params
from tests.torch_ref import needs_torch, torch

MATH = nn.attention.SDPBackend.MATH


def qkv(shape_q=(2, 3, 7, 4), S=9, Dv=5, seed=0, device="cpu", dtype=np.float64):
    rng = np.random.default_rng(seed)
    lead, D = shape_q[:-2], shape_q[-1]
    arrays = [rng.standard_normal(shape_q), rng.standard_normal(lead + (S, D)),
              rng.standard_normal(lead + (S, Dv))]
    return [mg.tensor(a.astype(dtype), device=device, requires_grad=True) for a in arrays]


def padding_mask(lead, T, S, seed=1, device="cpu", dtype=np.float64, rows=False):
    """An additive mask (0 / -inf) broadcastable to lead + (T, S): per key, or per
    (query, key) when ``rows``; some rows may lose every key."""
    rng = np.random.default_rng(seed)
    shape = lead + ((T if rows else 1), S)
    return mg.tensor(np.where(rng.random(shape) < 0.4, -np.inf, 0.0).astype(dtype),
                     device=device)


def composite(q, k, v, mask, causal, scale):
    with nn.attention.sdpa_kernel(MATH):
        return F.attend(q, k, v, mask, causal=causal, scale=scale)[0]


def fused(q, k, v, mask, causal, scale, block, dropout_p=0.0):
    return Attention.apply(q, k, v, mask, scale=scale, causal=causal, dropout_p=dropout_p,
                           block=block)


def values_and_grads(fn, inputs, seed=3):
    for t in inputs:
        t.grad = None
    out = fn(*inputs)
    g = np.random.default_rng(seed).standard_normal(out.shape).astype(out.dtype)
    out.backward(mg.tensor(g, device=out.device))
    return [out.numpy()] + [t.grad.numpy() for t in inputs]


# (id, T, S, causal offset, mask kind)
CASES = [
    ("plain", 7, 9, None, None),
    ("causal", 7, 9, 0, None),
    ("causal_square", 8, 8, 0, None),
    ("causal_offset_after_cache", 3, 9, 6, None),
    ("causal_negative_offset", 7, 9, -3, None),     # the first rows see no key at all
    ("key_padding", 7, 9, None, "keys"),
    ("key_padding_causal", 7, 9, 0, "keys"),
    ("full_mask", 7, 9, None, "rows"),
    ("one_query", 1, 9, None, "keys"),
    ("one_key", 7, 1, None, None),
]
TILINGS = [(2, 3), (3, 4), (4, 9), (7, 2), (1, 1), (64, 64)]


@pytest.mark.parametrize("T, S, causal, mask_kind", params(CASES))
@pytest.mark.parametrize("block", TILINGS, ids=lambda b: f"{b[0]}x{b[1]}")
def test_every_tiling_equals_the_composite(device, T, S, causal, mask_kind, block):
    inputs = qkv((2, 3, T, 4), S, device=device)
    mask = None if mask_kind is None else padding_mask(
        (2, 3), T, S, device=device, rows=mask_kind == "rows")
    ref = values_and_grads(lambda q, k, v: composite(q, k, v, mask, causal, 0.4), inputs)
    got = values_and_grads(lambda q, k, v: fused(q, k, v, mask, causal, 0.4, block), inputs)
    for name, a, b in zip(("out", "dq", "dk", "dv"), ref, got):
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=name)
        assert np.isfinite(b).all(), name  # rows without keys give zeros, never NaN


@pytest.mark.parametrize("T, S, causal, mask_kind", params(CASES[:6]))
@pytest.mark.parametrize("block", [(3, 4), (64, 64)], ids=["tiled", "one_tile"])
def test_gradcheck(device, T, S, causal, mask_kind, block):
    inputs = qkv((1, 2, T, 3), S, Dv=2, device=device)
    mask = None if mask_kind is None else padding_mask((1, 2), T, S, device=device)
    assert mg.autograd.gradcheck(lambda q, k, v: fused(q, k, v, mask, causal, 0.6, block),
                                 inputs)


@pytest.mark.parametrize("causal", [None, 0])
@pytest.mark.parametrize("block", [(2, 3), (64, 64)], ids=["tiled", "one_tile"])
def test_second_derivatives(device, causal, block):
    """Backward under create_graph differentiates the composite: exact at any tiling."""
    inputs = qkv((1, 2, 4, 3), 5, Dv=2, device=device)
    fn = lambda q, k, v: fused(q, k, v, None, causal, 0.6, block) ** 2  # noqa: E731
    assert mg.autograd.gradgradcheck(fn, inputs)


def test_second_derivatives_with_dropout_use_the_forward_masks(device):
    inputs = qkv((1, 2, 5, 3), 6, Dv=2, device=device)

    def fn(q, k, v):
        mg.manual_seed(2)
        return fused(q, k, v, None, 0, 0.6, (2, 4), dropout_p=0.4) ** 2
    assert mg.autograd.gradgradcheck(fn, inputs)


@pytest.mark.parametrize("block", [(2, 3), (7, 9)], ids=["tiled", "one_tile"])
def test_dropout_masks_are_replayed_in_backward(device, block):
    """With the seed fixed in the function, dropout is a fixed mask: gradcheck holds only if
    backward draws the very masks forward used."""
    inputs = qkv((1, 2, 7, 3), 9, Dv=2, device=device)

    def fn(q, k, v):
        mg.manual_seed(5)
        return fused(q, k, v, None, 0, 0.5, block, dropout_p=0.3)
    assert mg.autograd.gradcheck(fn, inputs)
    out = fn(*inputs).numpy()
    assert (out != fn(*inputs).numpy()).sum() == 0                       # same seed
    mg.manual_seed(6)
    assert (fused(*inputs, None, 0, 0.5, block, dropout_p=0.3).numpy() != out).any()


def test_one_tile_dropout_is_the_composite_dropout(device):
    """In one tile the mask is one draw of the (..., T, S) weights, as F.dropout's."""
    inputs = qkv((2, 2, 5, 3), 6, device=device)
    mg.manual_seed(9)
    ref = F.attend(*inputs, None, None, dropout_p=0.25, need_weights=True)[0]
    mg.manual_seed(9)
    got = fused(*inputs, None, None, 1 / np.sqrt(3), (5, 6), dropout_p=0.25)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


def test_broadcast_batch_dims_sum_their_gradients(device):
    q = qkv((2, 3, 5, 4), 6, device=device)[0]
    k, v = qkv((1, 3, 5, 4), 6, device=device, seed=1)[1:]
    for block in [(2, 2), (5, 6)]:
        ref = values_and_grads(lambda q, k, v: composite(q, k, v, None, None, 0.5), [q, k, v])
        got = values_and_grads(lambda q, k, v: fused(q, k, v, None, None, 0.5, block),
                               [q, k, v])
        for a, b in zip(ref, got):
            assert a.shape == b.shape
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", ["fused", "math"])
def test_heads_of_size_zero_weigh_every_key_the_same(device, backend):
    """Head size 0 with the default scale (1 / sqrt(0): inf, as PyTorch's): every score is
    a sum of no products, 0, so each query's output is the mean of the values, and the
    gradients of q and k are empty."""
    rng = np.random.default_rng(3)
    q = mg.tensor(np.zeros((2, 3, 4, 0)), device=device, requires_grad=True)
    k = mg.tensor(np.zeros((2, 3, 6, 0)), device=device, requires_grad=True)
    v = mg.tensor(rng.standard_normal((2, 3, 6, 5)), device=device, requires_grad=True)
    kind = nn.attention.SDPBackend.MATH if backend == "math" else \
        nn.attention.SDPBackend.FLASH_ATTENTION
    with nn.attention.sdpa_kernel(kind):
        out = F.scaled_dot_product_attention(q, k, v)
    expected = np.broadcast_to(v.numpy().mean(axis=-2, keepdims=True), out.shape)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-12, atol=1e-15)
    out.sum().backward()
    assert q.grad.shape == q.shape and k.grad.shape == k.shape
    np.testing.assert_allclose(v.grad.numpy(), np.full(v.shape, 4 / 6), rtol=1e-12)


@needs_torch
def test_heads_of_size_zero_match_torch():
    q, k = np.zeros((1, 2, 3, 0), np.float32), np.zeros((1, 2, 5, 0), np.float32)
    v = np.random.default_rng(4).standard_normal((1, 2, 5, 3)).astype(np.float32)
    ours = F.scaled_dot_product_attention(mg.tensor(q), mg.tensor(k), mg.tensor(v)).numpy()
    theirs = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


def test_float32_stays_float32(device):
    q, k, v = qkv((1, 2, 6, 4), 6, device=device, dtype=np.float32)
    out = fused(q, k, v, None, 0, 0.5, (2, 2))
    out.sum().backward()
    assert out.dtype == q.grad.dtype == k.grad.dtype == v.grad.dtype == np.float32


def test_blocks_hold_at_most_one_tile_of_scores():
    assert blocks(8, 64, 64) == (64, 64)                     # everything in one tile
    bq, bk = blocks(8, 4096, 4096)
    assert 8 * bq * bk <= TILE and bq < 4096 and bk < 4096


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3}],
                         ids=["plain", "causal", "scale"])
def test_sdpa_long_sequence_tiles_and_equals_the_composite(kwargs, device):
    """Long enough that the automatic path tiles: equal to the composite to 1e-5 (float32)."""
    q, k, v = qkv((1, 4, 800, 16), 800, Dv=16, device=device, dtype=np.float32)
    assert blocks(4, 800, 800) != (800, 800)
    ref = values_and_grads(lambda q, k, v: _sdpa_math(q, k, v, **kwargs), [q, k, v])
    got = values_and_grads(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs),
                           [q, k, v])
    for a, b in zip(ref, got):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def _sdpa_math(*args, **kwargs):
    with nn.attention.sdpa_kernel(MATH):
        return F.scaled_dot_product_attention(*args, **kwargs)


def test_sdpa_kernel_restores_the_backend_and_rejects_unknown_ones():
    with nn.attention.sdpa_kernel(MATH):
        assert F.SDPA_BACKEND[0] == "math"
    assert F.SDPA_BACKEND[0] == nn.attention.SDPBackend.FLASH_ATTENTION
    with pytest.raises(ValueError, match="sdpa_kernel"):
        with nn.attention.sdpa_kernel("cudnn"):
            pass


def test_shapes_and_dtypes_are_checked(device):
    q, k, v = qkv((1, 2, 4, 3), 5, device=device)
    with pytest.raises(mg.ShapeError, match=r"query \(1, 2, 4, 3\), key \(1, 2, 5, 2\)"):
        fused(q, k[..., :2], v, None, None, 1.0, (4, 5))
    with pytest.raises(mg.ShapeError, match="one dtype"):
        fused(q, k.to(mg.float32), v, None, None, 1.0, (4, 5))


@needs_torch
@pytest.mark.parametrize("T, S, causal, mask_kind", params(CASES[:7]))
@pytest.mark.parametrize("block", [(3, 4), (64, 64)], ids=["tiled", "one_tile"])
def test_matches_torch_sdpa(T, S, causal, mask_kind, block, device):
    inputs = qkv((2, 3, T, 4), S, device=device, dtype=np.float32)
    mask = None if mask_kind is None else padding_mask((2, 3), T, S, device=device,
                                                       dtype=np.float32)
    got = values_and_grads(lambda q, k, v: fused(q, k, v, mask, causal, 0.5, block), inputs)
    ts = [torch.tensor(t.numpy(), requires_grad=True) for t in inputs]
    bias = torch.zeros(T, S)
    if causal is not None:
        bias = bias.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1 + causal),
                                float("-inf"))
    if mask is not None:
        bias = bias + torch.tensor(mask.numpy())
    out = torch.nn.functional.scaled_dot_product_attention(*ts, attn_mask=bias, scale=0.5)
    g = np.random.default_rng(3).standard_normal(out.shape).astype(np.float32)
    out.backward(torch.tensor(g))
    ref = [out.detach().numpy()] + [t.grad.numpy() for t in ts]
    for a, b in zip(ref, got):
        finite = np.isfinite(a)  # torch gives NaN where a row has no key; we give zeros
        np.testing.assert_allclose(b[finite], a[finite], rtol=1e-5, atol=1e-5)
