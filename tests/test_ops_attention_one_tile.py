"""Attention when every score fits in one tile (minigrad.fused.Attention without its loop):
the same numbers as the tiled loop run over one tile (the output bit for bit, the gradients
to rounding: they start from the weights forward kept), with and without dropout;
the same numbers, bit for bit, as the online softmax as first written (running max, sum and
accumulator started at -inf, 0 and 0, every tile rescaling them) at every tiling, dropout
masks included; a value with more batch dims than query and key; a mask that would enlarge
the output."""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import minigrad as mg
from minigrad import backend
from minigrad.fused import attention
from tests.test_forward_ad import assert_jvp_rule
from tests.test_ops_attention import CASES, TILINGS, composite, fused, padding_mask, qkv
from tests.test_ops_attention import values_and_grads
from tests.test_ops_elementwise import params
from tests.torch_ref import needs_torch, torch


def _mask_of(kind, lead, T, S, device, dtype):
    return None if kind is None else padding_mask(lead, T, S, device=device, dtype=dtype,
                                                  rows=kind == "rows")


def _seeded(fn, seed=4):
    def run(*inputs):
        mg.manual_seed(seed)
        return fn(*inputs)
    return run


@pytest.fixture
def rows_first(monkeypatch):
    """The one tile laid out a row of keys a query (as on the GPU), not keys first."""
    monkeypatch.setattr(attention, "KEYS_FIRST", 0)


@pytest.mark.parametrize("T, S, causal, mask_kind", params(CASES))
@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("layout", ["rows", "keys_first"])
def test_one_tile_is_the_tiled_loop_over_one_tile(
        device, monkeypatch, T, S, causal, mask_kind, p, dtype, layout):
    """Laid out by rows, the output bit for bit; the gradients, which one tile makes from
    the weights and dropout mask that forward kept (where the loop makes them again from
    lse), to rounding. Keys first (on the CPU: each row summed key by key, the weights
    normalised before the product), the output to rounding too."""
    if layout == "rows":
        monkeypatch.setattr(attention, "KEYS_FIRST", 0)
    inputs = qkv((2, 3, T, 4), S, device=device, dtype=dtype)
    mask = _mask_of(mask_kind, (2, 3), T, S, device, dtype)
    run = _seeded(lambda q, k, v: fused(q, k, v, mask, causal, 0.4, (T, S), dropout_p=p))
    direct = values_and_grads(run, inputs)
    monkeypatch.setattr(attention, "_one_tile", lambda *args: False)  # the loop, once
    untrimmed = attention._key_blocks  # (over every key, as one tile: no causal trim)
    monkeypatch.setattr(attention, "_key_blocks",
                        lambda i0, i1, S, bk, causal, trim=False: untrimmed(i0, i1, S, bk, causal))
    looped = values_and_grads(run, inputs)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    if layout == "rows" or device != "cpu":
        np.testing.assert_array_equal(direct[0], looped[0], err_msg="out")
    else:
        np.testing.assert_allclose(direct[0], looped[0], err_msg="out", **tol)
    for name, a, b in zip(("dq", "dk", "dv"), looped[1:], direct[1:]):
        np.testing.assert_allclose(b, a, err_msg=name, **tol)


def online_softmax(q, k, v, mask, causal, scale, block, p):
    """The forward as first written, on raw arrays: per query block a running max, sum and
    accumulator that start at -inf, 0 and 0 and are rescaled by every key tile, the row sums
    of the kernels (``backend.row_sum``), the scores' products from the keys as the kernel
    lays them out (``attention._transposed``: on the CPU a contiguous copy of k^T, whose
    products BLAS may round otherwise than the transposed view's) and over the keys it
    makes them for (causal tiles end at the last key seen), and each tile's dropout mask
    drawn from the current source in order."""
    xp = backend.xp_of(q)
    kt = attention._transposed(xp, k)
    # (without dropout, a causal key block stops at the last key its queries see, as the
    # kernel's, except in one tile: see attention._key_blocks)
    (bq, bk), T, S, dtype = block, q.shape[-2], k.shape[-2], q.dtype
    trim = p == 0 and causal is not None and not attention._one_tile(block, T, S, causal)
    lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    out = xp.zeros(lead + (T, v.shape[-1]), dtype=dtype)
    for i0 in range(0, T, bq):
        i1 = min(T, i0 + bq)
        qs = q[..., i0:i1, :] * dtype.type(scale)
        m, total, acc = -xp.inf, 0, 0
        last = S if causal is None else max(0, min(S, i1 + causal))
        for j0 in range(0, last, bk):
            j1 = min(last if trim else S, j0 + bk)
            s = qs @ kt[..., j0:j1]
            if mask is not None:
                rows = slice(i0, i1) if mask.shape[-2] > 1 else slice(None)
                s = s + mask[..., rows, slice(j0, j1) if mask.shape[-1] > 1 else slice(None)]
            if causal is not None:
                future = xp.arange(j0, j1) > xp.arange(i0, i1)[:, None] + causal
                s = s + xp.where(future, -xp.inf, 0).astype(dtype)
            m_new = xp.maximum(m, s.max(axis=-1, keepdims=True))
            m_new = xp.where(xp.isfinite(m_new), m_new, 0)
            w = xp.exp(s - m_new)
            rescale = xp.exp(m - m_new)
            total = total * rescale + backend.row_sum(w)
            if p > 0:
                w = w * (backend.keep_mask(w.shape, p, xp).astype(dtype) * (1.0 / (1.0 - p)))
            acc = acc * rescale + w @ v[..., j0:j1, :]
            m = m_new
        if last > 0:
            out[..., i0:i1, :] = acc / xp.where(total == 0, 1, total)
    return out


@pytest.mark.parametrize("T, S, causal, mask_kind", params(CASES))
@pytest.mark.parametrize("block", TILINGS, ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_is_the_online_softmax_as_first_written_bit_for_bit(device, T, S, causal, mask_kind,
                                                            block, p, dtype, rows_first):
    """The same numbers, bit for bit, for every tiling, with the same dropout masks drawn
    from the same random stream in the same order. (With one BLAS thread: OpenBLAS may round
    a product differently with more, and the tiled loop shares heads among the cores, each
    product single-threaded, where there are more.)"""
    q, k, v = qkv((2, 3, T, 4), S, device=device, dtype=dtype)
    mask = _mask_of(mask_kind, (2, 3), T, S, device, dtype)
    threads = backend.get_num_threads()
    backend.set_num_threads(1)  # (and minigrad's own split of the heads on one thread too)
    try:
        with threadpool_limits(1, user_api="blas"):
            mg.manual_seed(8)
            got = fused(q, k, v, mask, causal, 0.4, block, dropout_p=p).numpy()
            after = mg.rand(2).numpy()  # where each leaves the random stream
            mg.manual_seed(8)
            ref = online_softmax(q.array, k.array, v.array, None if mask is None else mask.array,
                                 causal, 0.4, block, p)
    finally:
        backend.set_num_threads(threads)
    np.testing.assert_array_equal(got, backend.to_host(ref))
    np.testing.assert_array_equal(after, mg.rand(2).numpy())


# a value with more batch dims than query and key (the output takes them, as PyTorch's)
BROADCAST_VALUE = [(1, 2, 5, 3), (1, 2, 6, 3), (3, 2, 6, 2)]


def _broadcast_value_inputs(device, seed=0):
    rng = np.random.default_rng(seed)
    return [mg.tensor(rng.standard_normal(s), device=device, requires_grad=True)
            for s in BROADCAST_VALUE]


@pytest.mark.parametrize("causal", [None, 0])
@pytest.mark.parametrize("block", [(2, 4), (5, 6)], ids=["tiled", "one_tile"])
def test_value_with_more_batch_dims_equals_the_composite(device, causal, block):
    inputs = _broadcast_value_inputs(device)
    mask = padding_mask((1, 2), 5, 6, device=device)
    ref = values_and_grads(lambda q, k, v: composite(q, k, v, mask, causal, 0.5), inputs)
    got = values_and_grads(lambda q, k, v: fused(q, k, v, mask, causal, 0.5, block), inputs)
    for name, a, b in zip(("out", "dq", "dk", "dv"), ref, got):
        assert a.shape == b.shape, name
        np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=name)


@needs_torch
def test_value_with_more_batch_dims_matches_torch(device):
    inputs = _broadcast_value_inputs(device)
    got = values_and_grads(lambda q, k, v: mg.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True), inputs)
    ts = [torch.tensor(t.numpy(), requires_grad=True) for t in inputs]
    out = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=True)
    out.backward(torch.tensor(np.random.default_rng(3).standard_normal(out.shape)))
    for a, b in zip([out.detach().numpy()] + [t.grad.numpy() for t in ts], got):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("block", [(2, 4), (5, 6)], ids=["tiled", "one_tile"])
def test_value_with_more_batch_dims_keeps_the_dropout_masks(device, block):
    """First and second derivatives and the tangent, each with the forward's masks, which
    are drawn over the scores' batch dims (not the output's)."""
    inputs = _broadcast_value_inputs(device)
    run = _seeded(lambda q, k, v: fused(q, k, v, None, 0, 0.6, block, dropout_p=0.4))
    assert mg.autograd.gradcheck(run, inputs)
    assert mg.autograd.gradgradcheck(lambda *x: run(*x) ** 2, inputs)
    assert_jvp_rule(run, [t.numpy() for t in inputs], device)


@pytest.mark.parametrize("mask_shape", [(3, 2, 5, 6), (2, 2, 5, 6), (2, 4, 6)],
                         ids=["more_dims", "larger_dim", "wrong_rows"])
def test_a_mask_that_does_not_broadcast_to_the_scores_is_an_error(device, mask_shape):
    q, k, v = qkv((2, 5, 3), 6, Dv=2, device=device)
    mask = mg.zeros(mask_shape, dtype=mg.float64, device=device)
    for block in [(2, 4), (5, 6)]:
        with pytest.raises(mg.ShapeError, match=r"mask \(.*\) does not broadcast to the "
                                                r"scores' shape \(2, 5, 6\)"):
            fused(q, k, v, mask, None, 1.0, block)
    if torch is not None:  # PyTorch refuses it too
        ts = [torch.tensor(t.numpy()) for t in (q, k, v)]
        with pytest.raises(RuntimeError):
            torch.nn.functional.scaled_dot_product_attention(
                *ts, attn_mask=torch.zeros(mask_shape, dtype=torch.float64))


def test_batch_dims_that_do_not_broadcast_are_an_error(device):
    q, k, v = qkv((2, 5, 3), 6, Dv=2, device=device)
    k3, v3 = qkv((3, 5, 3), 6, Dv=2, device=device)[1:]
    with pytest.raises(mg.ShapeError, match=r"batch dims of query \(2, 5, 3\), key "
                                            r"\(3, 6, 3\) and value \(3, 6, 2\)"):
        fused(q, k3, v3, None, None, 1.0, (5, 6))


@pytest.mark.parametrize("S", [1, 5, attention.SHORT_ROWS, attention.SHORT_ROWS + 1, 40])
def test_row_max_is_numpys_for_short_and_long_rows(device, S):
    """Short rows are reduced keys-first: the same maxima, rows of -inf and NaN included."""
    xp = backend.xp_of(mg.zeros(1, device=device).array)
    s = np.random.default_rng(S).standard_normal((2, 3, 7, S)).astype(np.float32)
    s[0, 1, 2] = -np.inf
    s[1, 2, 3, S // 2] = np.nan
    got = backend.to_host(attention._row_max(xp, xp.asarray(s)))
    np.testing.assert_array_equal(got, s.max(axis=-1, keepdims=True))


@pytest.mark.parametrize("shape_k, mask_kind, causal", [
    ((2, 4, 9, 4), None, None), ((2, 4, 9, 4), "keys", None), ((2, 4, 9, 4), "rows", 0),
    ((2, 1, 9, 4), "keys", None), ((4, 9, 4), None, -2)],
    ids=["plain", "key-mask", "row-mask-causal", "one-key-head", "key-without-batch"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_one_tile_over_groups_of_heads_on_two_cores_is_bit_for_bit(
        two_cores, monkeypatch, shape_k, mask_kind, causal, dtype, rows_first):
    """A large one tile (here: any, SPLIT_SCORES lowered) goes to the cores a group of heads
    each, forward and backward: the same bits as all heads at once, broadcast heads and
    masks included; with dropout it stays in one piece (its masks are drawn in order)."""
    rng = np.random.default_rng(0)
    q, k, v = (mg.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
               for shape in ((2, 4, 7, 4), shape_k, shape_k))
    mask = _mask_of(mask_kind, (2, 4), 7, 9, "cpu", dtype)
    splits = []
    real_split = backend.run_split
    monkeypatch.setattr(backend, "run_split",
                        lambda fn, n, xp: (splits.append(n), real_split(fn, n, xp)))
    runs = {}
    for name, least in (("at once", 1 << 60), ("split", 1)):
        monkeypatch.setattr(attention, "SPLIT_SCORES", least)
        for p in (0.0, 0.3):
            splits.clear()
            run = _seeded(lambda q, k, v: fused(q, k, v, mask, causal, 0.4, (7, 9),
                                                dropout_p=p))
            runs[name, p] = values_and_grads(run, [q, k, v])
            assert splits == ([4, 4] if name == "split" and p == 0 else []), (name, p)
    for p in (0.0, 0.3):
        for what, a, b in zip(("out", "dq", "dk", "dv"), runs["at once", p], runs["split", p]):
            np.testing.assert_array_equal(a, b, err_msg=f"{what}, dropout {p}")


def _heads_of_projections(rng, B, H, T, D, dtype):
    """Leaves of (B, T, H, D), as a multi-head layer's projections, and their heads moved
    to dim 1 by a transpose (views, not contiguous): q, k, v."""
    leaves = [mg.tensor(rng.standard_normal((B, T, H, D)).astype(dtype), requires_grad=True)
              for _ in range(3)]
    return leaves, [t.transpose(1, 2) for t in leaves]


@pytest.mark.parametrize("block", [(7, 7), (3, 4)], ids=["one_tile", "tiled"])
@pytest.mark.parametrize("p", [0.0, 0.3], ids=["p0", "p0.3"])
@pytest.mark.parametrize("split", [False, True], ids=["at_once", "split"])
def test_output_and_gradients_are_laid_out_as_the_heads_came_in(
        two_cores, monkeypatch, block, p, split):
    """Heads split from (B, T, H, D) come back in that layout: the output and each gradient
    takes its input's dim order, so that the transpose and reshape that put the heads
    together again are views, not copies; the numbers are those of contiguous inputs, bit
    for bit, on one core and split over two."""
    monkeypatch.setattr(attention, "SPLIT_SCORES", 1 if split else 1 << 60)
    rng = np.random.default_rng(0)
    leaves, views = _heads_of_projections(rng, 2, 4, 7, 5, np.float32)
    mask = _mask_of("keys", (2, 4), 7, 7, "cpu", np.float32)
    run = _seeded(lambda q, k, v: fused(q, k, v, mask, None, 0.4, block, dropout_p=p))
    arriving = []
    for t in views:
        t.register_hook(arriving.append)
    out = run(*views)
    assert out.transpose(1, 2).is_contiguous(), out.stride()
    g = np.random.default_rng(3).standard_normal(out.shape).astype(np.float32)
    out.backward(mg.tensor(g))
    assert len(arriving) == 3
    for grad in arriving:
        assert grad.transpose(1, 2).is_contiguous(), grad.stride()
    plain = [mg.tensor(np.ascontiguousarray(t.detach().numpy()), requires_grad=True)
             for t in views]
    expected = values_and_grads(run, plain, seed=3)
    assert all(t.is_contiguous() for t in plain)
    got = [out.numpy()] + [t.grad.numpy().transpose(0, 2, 1, 3) for t in leaves]
    for what, a, b in zip(("out", "dq", "dk", "dv"), expected, got):
        np.testing.assert_array_equal(a, b, err_msg=what)
