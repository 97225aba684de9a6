"""How the tiled attention kernel walks the CPU: groups of heads whose tiles fit the core's
cache, products from contiguous k^T and v^T, causal key blocks that end at the last key
their queries see. Each changes only BLAS's rounding: the results are tested against the
untrimmed walk over every head at once, against PyTorch and against float64."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.fused import attention
from tests.test_ops_attention import composite, fused, qkv, values_and_grads
from tests.torch_ref import needs_torch, torch


@pytest.fixture
def one_thread(monkeypatch):
    """The walk in one range of heads on the calling thread, whatever the number of
    threads (with more, the heads are first shared among them, and the tiles of each come
    in any order)."""
    monkeypatch.setattr(attention.backend, "run_split", lambda fn, n, xp: fn(0, n))


def _recording(monkeypatch):
    """The (heads, queries, keys) of every tile of scores the kernel makes."""
    tiles = []
    real = attention._scores

    def scores(xp, qs, kt, *args):
        tiles.append((qs.shape[-3] if qs.ndim > 2 else 1, qs.shape[-2], kt.shape[-1]))
        return real(xp, qs, kt, *args)
    monkeypatch.setattr(attention, "_scores", scores)
    return tiles


def _as_before(monkeypatch):
    """The walk as it was: every head at once, the transposed views, untrimmed blocks."""
    monkeypatch.setattr(attention, "GROUP_SCORES", 1 << 60)
    monkeypatch.setattr(attention, "_transposed", lambda xp, a: xp.swapaxes(a, -1, -2))
    untrimmed = attention._key_blocks
    monkeypatch.setattr(attention, "_key_blocks",
                        lambda i0, i1, S, bk, causal, trim=False: untrimmed(i0, i1, S, bk,
                                                                            causal))


@pytest.mark.parametrize("causal", [None, 0])
def test_the_cpu_walks_groups_of_heads_that_fit_its_cache(monkeypatch, causal, one_thread):
    q, k, v = qkv((2, 6, 32, 4), 48, dtype=np.float32)
    monkeypatch.setattr(attention, "GROUP_SCORES", 2 * 8 * 16 * 2)  # two heads of 2 x 8 x 16
    tiles = _recording(monkeypatch)
    values_and_grads(lambda q, k, v: fused(q, k, v, None, causal, 0.5, (8, 16)), [q, k, v])
    assert {heads for heads, _, _ in tiles} == {2}
    tiles.clear()
    monkeypatch.setattr(attention, "GROUP_SCORES", 1 << 60)
    values_and_grads(lambda q, k, v: fused(q, k, v, None, causal, 0.5, (8, 16)), [q, k, v])
    assert {heads for heads, _, _ in tiles} == {6}


def test_causal_blocks_end_at_the_last_key_their_queries_see(monkeypatch, one_thread):
    q, k, v = qkv((1, 2, 64, 4), 64)
    tiles = _recording(monkeypatch)
    fused(q, k, v, None, 0, 0.5, (16, 64))
    assert [keys for _, _, keys in tiles] == [16, 32, 48, 64]
    tiles.clear()
    fused(q, k, v, None, 0, 0.5, (16, 64), dropout_p=0.2)  # masks drawn for whole tiles
    assert [keys for _, _, keys in tiles] == [64] * 4


@pytest.mark.parametrize("mask_kind", [None, "keys"])
@pytest.mark.parametrize("causal", [None, 0, 5])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_the_cpu_walk_equals_every_head_at_once_to_rounding(monkeypatch, causal, mask_kind,
                                                           dtype):
    """Groups of one head, contiguous transposes and trimmed blocks against the walk over
    every head at once: float32 within 2e-6, float64 within 1e-14."""
    q, k, v = qkv((2, 3, 40, 8), 56, Dv=8, dtype=dtype)
    mask = None
    if mask_kind:
        mask = mg.tensor(np.where(np.random.default_rng(1).random((2, 1, 1, 56)) < 0.3,
                                  -np.inf, 0).astype(dtype))
    monkeypatch.setattr(attention, "GROUP_SCORES", 2 * 8 * 16)  # one head a group
    run = lambda q, k, v: fused(q, k, v, mask, causal, 0.3, (8, 16))  # noqa: E731
    got = values_and_grads(run, [q, k, v])
    with monkeypatch.context() as before:
        _as_before(before)
        ref = values_and_grads(run, [q, k, v])
    tol = dict(rtol=2e-6, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-14, atol=1e-14)
    for name, a, b in zip(("out", "dq", "dk", "dv"), ref, got):
        np.testing.assert_allclose(b, a, err_msg=name, **tol)


@needs_torch
@pytest.mark.parametrize("causal", [None, 0])
def test_a_long_sequence_matches_torch_and_float64(causal):
    """float32 at the automatic blocks of 8 heads of 1024 positions (tiled, a head a
    group): within 2e-5 of PyTorch's SDPA and of the float64 composite."""
    T, S = 1024, 1024
    q, k, v = qkv((1, 8, T, 64), S, Dv=64, dtype=np.float32)
    block = attention.blocks(8, T, S)
    assert block != (T, S)
    got = values_and_grads(lambda q, k, v: fused(q, k, v, None, causal, 0.125, block),
                           [q, k, v])
    q64, k64, v64 = (mg.tensor(t.numpy().astype(np.float64), requires_grad=True)
                     for t in (q, k, v))
    exact = values_and_grads(lambda q, k, v: composite(q, k, v, None, causal, 0.125),
                             [q64, k64, v64])
    ts = [torch.tensor(t.numpy(), requires_grad=True) for t in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*ts, is_causal=causal == 0,
                                                           scale=0.125)
    out.backward(torch.tensor(np.random.default_rng(3).standard_normal(out.shape)
                              .astype(np.float32)))
    theirs = [out.detach().numpy()] + [t.grad.numpy() for t in ts]
    for name, a, b, c in zip(("out", "dq", "dk", "dv"), got, theirs, exact):
        np.testing.assert_allclose(a, c, rtol=2e-5, atol=2e-5, err_msg=f"{name} vs float64")
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5, err_msg=f"{name} vs torch")


def test_transposed_is_a_contiguous_copy_on_the_cpu_only():
    a = np.arange(24.0).reshape(2, 3, 4)
    t = attention._transposed(np, a)
    assert t.flags.c_contiguous and not np.shares_memory(t, a)
    np.testing.assert_array_equal(t, a.swapaxes(-1, -2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("first", [-3, 0, 2, 9])
def test_the_compiled_causal_mask_is_numpys_formula(dtype, first):
    """host_loops.mask_future against adding the mask of 0 and -inf: the same bits, special
    values included, except that a -0 it does not mask stays -0 (the formula makes it +0)."""
    pytest.importorskip("numba")
    from minigrad.backend import host_loops
    rng = np.random.default_rng(first + 5)
    s = rng.standard_normal((2, 3, 6, 8)).astype(dtype)
    s.reshape(-1)[:7] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-30], dtype)
    future = np.arange(8) >= np.arange(6)[:, None] + first
    ref = s + np.where(future, -np.inf, 0).astype(dtype)
    got = s.copy()
    assert host_loops.mask_future(got, first)
    bits = f"u{s.itemsize}"
    np.testing.assert_array_equal(got[..., future].view(bits), ref[..., future].view(bits))
    np.testing.assert_array_equal(got[..., ~future].view(bits), s[..., ~future].view(bits))
    np.testing.assert_array_equal(got, ref)  # (as values: -0 == +0, NaN where NaN)
    assert not host_loops.mask_future(s.astype(np.float16), first)
    assert not host_loops.mask_future(s[..., ::2], first)  # not contiguous
