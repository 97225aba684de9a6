"""The device kernels of ``minigrad.backend`` (CUDA on ``--device cuda``, the array formula on
the CPU): layer norm, softmax and log-softmax, FlashAttention and dropout's Philox stream,
each against the NumPy path and PyTorch, gradients included. On the GPU the tests also
check that the kernel, not the array formula, is what ran. On the CPU: scatter-add's rows in
order, and the sums by BLAS (``row_sum``, ``lead_sum``) against exact sums."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import backend
from minigrad.fused.attention import Attention
from tests.torch_ref import needs_torch, torch

RNG = np.random.default_rng(7)


def on(device, a, requires_grad=True):
    return mg.tensor(a, device=device, requires_grad=requires_grad)


def torch_of(a):
    return torch.tensor(a, requires_grad=True)


def tol(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


# --- Philox4x32-10: a NumPy reference, checked against Random123's known answers ----------

def philox(counters, key):
    """Philox4x32-10 of (N, 4) uint32 counters under a (2,) uint32 key: (N, 4) uint32."""
    c = [counters[:, j].astype(np.uint64) for j in range(4)]
    k0, k1 = np.uint64(key[0]), np.uint64(key[1])
    m0, m1, mask = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint64(0xFFFFFFFF)
    for r in range(10):
        if r:
            k0, k1 = (k0 + np.uint64(0x9E3779B9)) & mask, (k1 + np.uint64(0xBB67AE85)) & mask
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ k0, p1 & mask, (p0 >> np.uint64(32)) ^ c[3] ^ k1,
             p0 & mask]
    return np.stack(c, axis=1).astype(np.uint32)


KNOWN_ANSWERS = [  # Random123's tests/kat_vectors: counter, key, result
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter, key, result", KNOWN_ANSWERS)
def test_philox_reference_gives_the_known_answers(counter, key, result):
    out = philox(np.array([counter], dtype=np.uint32), np.array(key, dtype=np.uint32))
    np.testing.assert_array_equal(out[0], np.array(result, dtype=np.uint32))


def reference_mask(n, p, seed, offset):
    """Elements 0..n-1 of the device stream at block ``offset``, against p."""
    blocks = offset + np.arange((n + 3) // 4, dtype=np.uint64)
    counters = np.zeros((len(blocks), 4), dtype=np.uint32)
    counters[:, 0], counters[:, 1] = blocks & 0xFFFFFFFF, blocks >> np.uint64(32)
    words = philox(counters, np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint32))
    return words.reshape(-1)[:n] >= min(round(p * 2.0 ** 32), 2 ** 32 - 1)


def needs_gpu(device):
    if device != "cuda":
        pytest.skip("the device stream and kernels run on the GPU (--device cuda)")
    return backend.cupy()


def needs_kernels(device):
    """CuPy, where minigrad's CUDA kernels run (not an array module without them, such as
    the strict stand-in of --device strict, which runs the array formulas)."""
    cp = needs_gpu(device)
    if not backend.kernels._has_kernels(cp):
        pytest.skip("the CUDA kernels need CuPy and a GPU (this array module has no kernels)")
    return cp


@pytest.mark.parametrize("seed", [0, 5, 2 ** 40 + 3, backend.DEFAULT_SEED])
def test_device_masks_are_the_philox_stream_block_after_block(device, seed):
    cp = needs_gpu(device)
    mg.manual_seed(seed)
    first = backend.keep_mask((10,), 0.3, cp)                  # blocks 0, 1, 2
    second = backend.keep_mask((3, 37), 0.6, cp)               # from block 3 on
    np.testing.assert_array_equal(first.get(), reference_mask(10, 0.3, seed % 2 ** 64, 0))
    np.testing.assert_array_equal(second.get().reshape(-1),
                                  reference_mask(111, 0.6, seed % 2 ** 64, 3))
    assert backend.source().offset == 3 + 28


def test_device_dropout_is_reproducible_and_drops_a_fraction_p(device):
    needs_gpu(device)
    x = mg.ones(400_000, device=device)
    mg.manual_seed(3)
    a = F.dropout(x, 0.3).numpy()
    mg.manual_seed(3)
    b = F.dropout(x, 0.3).numpy()
    c = F.dropout(x, 0.3).numpy()
    np.testing.assert_array_equal(a, b)
    assert (a != c).any()
    assert abs((a == 0).mean() - 0.3) < 0.004  # standard deviation 0.0007


def test_rng_state_round_trips_the_device_offset(device):
    mg.manual_seed(9)
    x = mg.ones(1000, device=device)
    F.dropout(x, 0.5)
    state = mg.get_rng_state()
    a = F.dropout(x, 0.5).numpy()
    mg.set_rng_state(state)
    np.testing.assert_array_equal(F.dropout(x, 0.5).numpy(), a)


# --- layer norm -----------------------------------------------------------------------

LN_SHAPES = [((4, 8), 1), ((3, 5, 300), 1), ((2, 1025), 1), ((6, 1), 1), ((2, 3, 4, 5), 2),
             ((7, 64), 1)]


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
@pytest.mark.parametrize("shape, n", LN_SHAPES, ids=str)
def test_layer_norm_matches_torch(device, shape, n, affine, dtype):
    x = (RNG.standard_normal(shape) * 3 + 1).astype(dtype)
    norm = shape[len(shape) - n:]
    w = RNG.standard_normal(norm).astype(dtype) if affine != "none" else None
    b = RNG.standard_normal(norm).astype(dtype) if affine == "both" else None
    g = RNG.standard_normal(shape).astype(dtype)
    mine = [on(device, a) if a is not None else None for a in (x, w, b)]
    theirs = [torch_of(a) if a is not None else None for a in (x, w, b)]
    out = F.layer_norm(mine[0], norm, mine[1], mine[2], eps=1e-5)
    ref = torch.nn.functional.layer_norm(theirs[0], norm, theirs[1], theirs[2], eps=1e-5)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), **tol(dtype))
    out.backward(mg.tensor(g, device=device))
    ref.backward(torch.tensor(g))
    # over one element x - mean is 0 exactly here; PyTorch's float32 kernel, which computes
    # x * rstd - mean * rstd, leaves ulps of x times rstd = 1 / sqrt(eps) in the weight's grad
    loose = dict(rtol=2e-5, atol=1e-3) if dtype == np.float32 and x[0].size == 1 else None
    for m, t in zip(mine, theirs):
        if m is not None:
            np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), **(loose or tol(dtype)))


def test_layer_norm_runs_the_kernel_on_the_gpu(device):
    cp = needs_kernels(device)
    x = cp.asarray(RNG.standard_normal((5, 300)).astype(np.float32))
    y = backend.layer_norm(x, None, None, 1, 1e-5)[0]
    expected = backend.layer_norm(x.get(), None, None, 1, 1e-5)[0]      # the NumPy path
    np.testing.assert_allclose(y.get(), expected, rtol=1e-5, atol=1e-5)
    assert backend.kernels._rows_on_gpu(x, 300)


# --- softmax and log-softmax ----------------------------------------------------------

SOFTMAX_SHAPES = [(3, 5), (2, 3, 300), (4, 1025), (6, 1), (2, 7, 33)]


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [-1, 0])
@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax_matches_torch(device, shape, dim, log, dtype):
    x = (RNG.standard_normal(shape) * 4).astype(dtype)
    x.reshape(-1)[::7] = -np.inf                                        # masked entries
    g = RNG.standard_normal(shape).astype(dtype)
    mine, theirs = on(device, x), torch_of(x)
    name = "log_softmax" if log else "softmax"
    out, ref = getattr(mine, name)(dim), getattr(theirs, name)(dim)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), **tol(dtype))
    out.backward(mg.tensor(g, device=device))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), **tol(dtype))


def test_softmax_runs_the_kernel_on_the_gpu(device):
    cp = needs_kernels(device)
    x = cp.asarray(RNG.standard_normal((4, 300)))
    for log in (False, True):
        y = backend.softmax(x, 1, log=log)
        assert y is not None
        e = np.exp(x.get() - x.get().max(1, keepdims=True))
        ref = e / e.sum(1, keepdims=True)
        np.testing.assert_allclose(y.get(), np.log(ref) if log else ref, rtol=1e-12)


# --- attention ------------------------------------------------------------------------

ATTENTION_CASES = [  # (B, H, T, S, D), causal offset
    ((1, 2, 70, 70, 64), None), ((2, 3, 130, 45, 32), None), ((1, 1, 200, 200, 16), 0),
    ((2, 2, 64, 129, 64), 0), ((1, 2, 100, 60, 32), -20), ((1, 1, 65, 300, 64), 40),
]


def _attention_inputs(case, device):
    (B, H, T, S, D), _ = case
    arrays = [RNG.standard_normal((B, H, L, D)).astype(np.float32) for L in (T, S, S)]
    return arrays, RNG.standard_normal((B, H, T, D)).astype(np.float32)


def _run(arrays, grad, device, causal, block):
    q, k, v = (on(device, a) for a in arrays)
    out = Attention.apply(q, k, v, None, scale=0.125, causal=causal, dropout_p=0.0,
                          block=block)
    out.backward(mg.tensor(grad, device=device))
    return [t.numpy() for t in (out, q.grad, k.grad, v.grad)]


@pytest.mark.parametrize("case", ATTENTION_CASES, ids=str)
def test_attention_kernel_matches_the_tiled_array_code(device, case):
    """On the GPU the FlashAttention kernels against the tiled NumPy code on the host (the
    same inputs): output and the three gradients."""
    cp = needs_kernels(device)
    (B, H, T, S, D), causal = case
    arrays, grad = _attention_inputs(case, device)
    assert backend.kernels._attention_fits(*(cp.asarray(a) for a in arrays))
    got = _run(arrays, grad, device, causal, (T, S))
    want = _run(arrays, grad, "cpu", causal, (32, 16))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)


@needs_torch
@pytest.mark.parametrize("case", [c for c in ATTENTION_CASES if c[1] in (None, 0)], ids=str)
def test_attention_matches_torch_sdpa(device, case):
    (B, H, T, S, D), causal = case
    arrays, grad = _attention_inputs(case, device)
    got = _run(arrays, grad, device, causal, (T, S))
    tq, tk, tv = (torch_of(a) for a in arrays)
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, scale=0.125,
                                                           is_causal=causal == 0)
    ref.backward(torch.tensor(grad))
    for g, w in zip(got, (ref, tq.grad, tk.grad, tv.grad)):
        np.testing.assert_allclose(g, w.detach().numpy(), rtol=2e-4, atol=2e-5)


# --- scatter_add: an embedding's gradient, summed in PyTorch's order --------------------------

def _rows_one_by_one(shape, rows, values):
    """target[rows] += values, one occurrence after the other (PyTorch's index_add_ order)."""
    out = np.zeros(shape, values.dtype)
    for i, v in zip(rows.reshape(-1), values.reshape((rows.size,) + shape[1:])):
        out[i] += v
    return out


@pytest.mark.parametrize("rows, width, count, low", [
    (64, (128,), (32, 32), 0), (1000, (256,), (32, 64), 0), (8, (33,), (3, 4, 5), -8),
    (5, (4, 8), (7,), -5), (4, (32,), (0,), 0), (3, (40,), (500,), 0), (6, (2,), (40,), -6)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scatter_add_sums_repeated_rows_in_order_bit_for_bit(rows, width, count, low, dtype):
    index = RNG.integers(low, rows, count)
    values = RNG.standard_normal(count + width).astype(dtype)
    expected = _rows_one_by_one((rows,) + width, index, values)
    for form in (index, (index,)):
        out = backend.scatter_add(np.zeros((rows,) + width, dtype), form, values)
        np.testing.assert_array_equal(out, expected)


def _skewed(rng, size, rows, heavy, share):
    """``size`` indices below ``rows``, ``share`` of them spread over the ``heavy`` first
    ids (padding ids that fill much of a batch), the rest uniform."""
    index = rng.integers(0, rows, size)
    picked = rng.random(size) < share
    index[picked] = rng.integers(0, heavy, int(picked.sum()))
    return index


@pytest.mark.parametrize("size, rows, heavy, share", [
    (512, 32, 1, 0.5), (2048, 1000, 1, 0.3), (2048, 1000, 9, 0.5), (300, 50, 20, 0.9),
    (4000, 4000, 100, 0.5), (600, 3, 3, 1.0), (64, 64, 1, 0.0), (1, 5, 1, 0.0)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_scatter_add_with_skewed_repeats_and_signed_zeros_is_add_at_bit_for_bit(
        size, rows, heavy, share, dtype):
    rng = np.random.default_rng(size + rows + heavy)
    index = _skewed(rng, size, rows, heavy, share) - rng.integers(0, 2, size) * rows
    values = (rng.standard_normal((size, 40)) * 10.0 ** rng.integers(-3, 4, (size, 1)))
    values = values.astype(dtype)
    values[::3] = -0.0
    for target in (np.zeros((rows, 40), dtype), rng.standard_normal((rows, 40)).astype(dtype),
                   np.full((rows, 40), -0.0, dtype)):
        expected = target.copy()
        np.add.at(expected, index, values)
        out = backend.scatter_add(target.copy(), (index,), values)
        assert out.tobytes() == expected.tobytes()  # (-0.0 and +0.0 told apart)


def _on_device_and_host(device, target, index, values):
    """scatter_add on ``device`` (read back) and NumPy's add.at on the host, of the same."""
    moved = tuple(backend.to_device(i, device) if isinstance(i, np.ndarray) else i
                  for i in (index if type(index) is tuple else (index,)))
    got = backend.scatter_add(backend.to_device(target.copy(), device),
                              moved if type(index) is tuple else moved[0],
                              backend.to_device(values, device))
    expected = target.copy()
    np.add.at(expected, index, values)
    return backend.to_host(got), expected


@pytest.mark.parametrize("size, rows, heavy, share", [
    (512, 32, 1, 0.5), (2048, 1000, 9, 0.5), (600, 3, 3, 1.0), (1, 5, 1, 0.0), (0, 4, 1, 0.0)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_scatter_add_on_the_device_is_the_hosts_bit_for_bit(device, size, rows, heavy, share,
                                                            dtype):
    """Repeated rows are summed in their order on every device (not by atomic adds, whose
    order changes from run to run): the same bits as NumPy's add.at, -0.0 included."""
    rng = np.random.default_rng(size + rows)
    index = _skewed(rng, size, rows, heavy, share) - rng.integers(0, 2, size) * rows
    values = (rng.standard_normal((size, 24)) * 10.0 ** rng.integers(-3, 4, (size, 1)))
    values = values.astype(dtype)
    values[::3] = -0.0
    for target in (np.zeros((rows, 24), dtype), np.full((rows, 24), -0.0, dtype),
                   rng.standard_normal((rows, 24)).astype(dtype)):
        for form in (index, (index,)):
            got, expected = _on_device_and_host(device, target, form, values)
            assert got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8, np.uint8,
                                   np.int16, np.bool_])
@pytest.mark.parametrize("case", ["elements", "pairs", "broadcast", "mask", "columns"])
def test_scatter_add_on_the_device_takes_every_index_and_dtype(device, case, dtype):
    """Indices other than whole rows (element pairs, a broadcast value, a mask, a slice with
    an index array) and narrow dtypes, which wrap as NumPy's do (bool: any True is True)."""
    rng = np.random.default_rng(3)
    big = dtype in (np.float32, np.float64)
    target = (rng.standard_normal((6, 5)) * 100 if big else rng.integers(0, 3, (6, 5)))
    target = target.astype(dtype)
    index, shape = {
        "elements": (rng.integers(-30, 30, 50), (50,)),
        "pairs": ((rng.integers(0, 6, 40), rng.integers(-5, 5, 40)), (40,)),
        "broadcast": ((rng.integers(0, 6, (8, 1)), rng.integers(0, 5, (1, 3))), (8, 3)),
        "mask": (rng.random((6, 5)) < 0.5, None),
        "columns": ((slice(None), rng.integers(0, 5, 9)), (6, 9)),
    }[case]
    if case == "elements":
        target = target.reshape(-1)
    if shape is None:
        shape = (int(index.sum()),)
    values = (rng.standard_normal(shape) * 100 if big else rng.integers(0, 120, shape))
    values = values.astype(dtype)
    if case == "broadcast":
        values = values[:1]  # one row, broadcast over the 8 rows of the index
    got, expected = _on_device_and_host(device, target, index, values)
    assert got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


@pytest.mark.parametrize("bad", [64, -65])
def test_scatter_add_refuses_rows_out_of_range(bad):
    with pytest.raises(IndexError, match=f"index {bad} is out of bounds"):
        backend.scatter_add(np.zeros((64, 128), np.float32), (np.array([0, bad, 3]),),
                            np.ones((3, 128), np.float32))


@needs_torch
def test_embedding_gradient_is_torchs_bit_for_bit():
    index = RNG.integers(0, 64, (32, 32))
    grad = RNG.standard_normal((32, 32, 128)).astype(np.float32)
    weight = on("cpu", np.zeros((64, 128), np.float32))
    F.embedding(mg.tensor(index), weight).backward(mg.tensor(grad))
    theirs = torch_of(np.zeros((64, 128), np.float32))
    torch.nn.functional.embedding(torch.tensor(index), theirs).backward(torch.tensor(grad))
    np.testing.assert_array_equal(weight.grad.numpy(), theirs.grad.numpy())


# --- row sums: a product with ones on the CPU ----------------------------------------------

ROW_SHAPES = [((512, 64), 1), ((2, 3, 16), 1), ((4, 1000), 1), ((3, 4, 5), 2), ((7, 1), 1),
              ((0, 8), 1), ((5,), 1), ((2, 4096), 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape, n", ROW_SHAPES, ids=str)
def test_row_sum_and_mean_are_the_sums_within_the_summation_bound(shape, n, dtype):
    x = RNG.standard_normal(shape).astype(dtype)
    axes = tuple(range(x.ndim - n, x.ndim))
    exact = x.astype(np.longdouble).sum(axis=axes, keepdims=True)
    bound = (x.size and np.abs(x).sum(axis=axes, keepdims=True)) * \
        np.finfo(dtype).eps * max(1, np.prod(shape[x.ndim - n:]))
    for got in (backend.row_sum(x, n), backend.row_sum(np.asfortranarray(x), n)):
        assert got.dtype == dtype and got.shape == x.sum(axis=axes, keepdims=True).shape
        assert np.all(np.abs(got - exact) <= bound)
    mean = backend.row_mean(x, n)
    assert mean.dtype == dtype and mean.shape == got.shape
    if x.size:
        np.testing.assert_allclose(mean, x.mean(axis=axes, keepdims=True), **tol(dtype))


def test_row_sum_is_exact_where_every_partial_sum_is():
    x = RNG.integers(-1000, 1000, (300, 77)).astype(np.float32)
    np.testing.assert_array_equal(backend.row_sum(x), x.sum(axis=-1, keepdims=True))


def test_row_sum_carries_inf_and_nan_as_numpy():
    x = np.ones((4, 6), np.float32)
    x[0, 1], x[1, 2], x[2, :2], x[3, 0] = np.inf, np.nan, (np.inf, -np.inf), -np.inf
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(backend.row_sum(x), x.sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("x", [np.arange(24, dtype=np.float16).reshape(4, 6),
                               np.arange(24).reshape(4, 6),
                               RNG.standard_normal((2, backend.kernels.ROW_SUM_BLAS + 1))],
                         ids=["float16", "int64", "long rows"])
def test_row_sum_is_numpys_own_sum_elsewhere(x):
    np.testing.assert_array_equal(backend.row_sum(x), x.sum(axis=-1, keepdims=True))
    np.testing.assert_array_equal(backend.row_mean(x), x.mean(axis=-1, keepdims=True))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape, dims", [((512, 64), (0,)), ((32, 16, 64), (0, 1)),
                                         ((20000, 8), (0,)), ((3, 1, 5), (0, 1)),
                                         ((1, 7), (0,))], ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_lead_sum_is_the_sum_over_leading_dims_within_the_bound(shape, dims, keepdims, dtype):
    x = (RNG.standard_normal(shape) + 0.5).astype(dtype)
    got = backend.lead_sum(x, dims, keepdims)
    expected = x.sum(axis=dims, keepdims=keepdims)
    assert got.dtype == dtype and got.shape == expected.shape
    count = np.prod([shape[d] for d in dims])
    exact = x.astype(np.longdouble).sum(axis=dims, keepdims=keepdims)
    bound = np.abs(x).sum(axis=dims, keepdims=keepdims) * np.finfo(dtype).eps * count
    assert np.all(np.abs(got - exact) <= bound)
    # no less accurate than NumPy's own (which adds the rows one after another)
    assert np.abs(got - exact).max() <= np.abs(expected - exact).max() * 1.01 + \
        np.finfo(dtype).eps * np.abs(exact).max()
    np.testing.assert_array_equal(mg.tensor(x).sum(dims, keepdim=keepdims).numpy(), got)


@pytest.mark.parametrize("x, dims", [
    (np.ones((4, 5), np.float16), (0,)), (np.ones((4, 5), np.int64), (0,)),
    (np.ones((4, 5), np.float32), (1,)), (np.ones((4, 5), np.float32), (0, 1)),
    (np.ones((5, 4), np.float32).T, (0,)), (np.ones((0, 5), np.float32), (0,))],
    ids=["float16", "int64", "trailing", "every dim", "not contiguous", "empty"])
def test_lead_sum_leaves_other_reductions_to_numpy(x, dims):
    assert backend.lead_sum(x, dims, False) is None
    np.testing.assert_array_equal(mg.tensor(x).sum(dims).numpy(), x.sum(axis=dims))
