"""The fused primitives of minigrad.fused: Linear, Dropout, LayerNorm, Gelu (and its
backward) and CrossEntropy, reached through nn.functional and Tensor.gelu.

Each op stands in for a composite of plain Tensor ops, written out below as its reference.
Every case is checked four ways: against the composite in float64 (values, gradients and
second derivatives to ~1e-12), by gradcheck and gradgradcheck, against PyTorch in float32
and float64, and for dtypes (float32 inputs give float32 outputs and gradients, to second
order). Dropout, whose mask is random, is checked against backend.keep_mask drawn after
the same seed.
"""
import math
import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import minigrad as mg
from minigrad import backend
from minigrad.backend import host_loops
import minigrad.nn.functional as F
from tests.test_ops_elementwise import (DTYPES, SEEDS, SETTINGS, assert_gradcheck,
                                        assert_parity, lib, make, params, run_error, sample)
from tests.torch_ref import needs_torch, torch

# float64 agreement of a fused op with its composite: both sum in another order, no more
CLOSE = dict(rtol=1e-12, atol=1e-12)


def functional(t):
    """torch.nn.functional for a torch tensor, minigrad's nn.functional otherwise."""
    return torch.nn.functional if lib(t) is torch else F


def const(like, array):
    """A constant (no grad) in the library, dtype and device of tensor ``like``."""
    if lib(like) is torch:
        return torch.tensor(np.asarray(array), dtype=like.dtype)
    return mg.tensor(np.asarray(array), dtype=like.dtype, device=like.device)


# --- the reference composites (plain Tensor ops) -----------------------------------------------

def linear_ref(x, weight, bias=None):
    out = x @ weight.T
    return out if bias is None else out + bias


def layer_norm_ref(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    n = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    dims = tuple(range(x.ndim - n, x.ndim))
    centered = x - x.mean(dims, keepdim=True)
    var = (centered * centered).mean(dims, keepdim=True)
    out = centered / (var + eps).sqrt()
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias


def gelu_ref(x):
    return x * 0.5 * (1 + (x / math.sqrt(2)).erf())


def gelu_backward_ref(grad, x):
    pdf = (x * x * -0.5).exp() / math.sqrt(2 * math.pi)
    return grad * (0.5 * (1 + (x / math.sqrt(2)).erf()) + x * pdf)


def cross_entropy_ref(x, target, weight=None, ignore_index=-100, reduction="mean",
                      label_smoothing=0.0):
    """PyTorch's cross-entropy for class indices, from log_softmax and a one-hot pick."""
    class_dim = 0 if x.ndim == 1 else 1
    C = x.shape[class_dim]
    along = (C,) + (1,) * (x.ndim - class_dim - 1)  # broadcasts along the class dim
    logp = x.log_softmax(class_dim)
    valid = target != ignore_index
    safe = mg.where(valid, target, 0)
    onehot = safe.unsqueeze(class_dim) == mg.arange(C, device=x.device).reshape(along)
    picked = (logp * onehot.to(x.dtype)).sum(class_dim)
    w_t = valid.to(x.dtype) if weight is None else valid.to(x.dtype) * weight[safe]
    per_class = logp if weight is None else logp * weight.reshape(along)
    smooth = -per_class.sum(class_dim) * valid.to(x.dtype)
    loss = -(picked * w_t) * (1 - label_smoothing) + smooth * (label_smoothing / C)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    total = w_t.sum()
    nothing = total == 0  # every target ignored: NaN, with a zero gradient
    return loss.sum() / mg.where(nothing, 1.0, total) + mg.where(nothing, float("nan"), 0.0)


# --- the cases: (id, fn for minigrad or torch, reference composite, float64 inputs) ---------

def _rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


# (id, shape of x, shape of weight, with a bias)
LINEAR = [
    ("1d", (3,), (2, 3), True),
    ("1d_nobias", (3,), (2, 3), False),
    ("2d", (4, 3), (2, 3), True),
    ("2d_nobias", (4, 3), (2, 3), False),
    ("3d", (2, 3, 3), (4, 3), True),
    ("3d_nobias", (2, 3, 3), (4, 3), False),
    ("4d", (2, 1, 2, 3), (2, 3), True),
    ("4d_nobias", (2, 1, 2, 3), (2, 3), False),
    ("1x1", (1, 1), (1, 1), True),
    ("one_row", (1, 4), (3, 4), True),
    ("one_out_feature", (3, 2), (1, 2), True),
    ("one_in_feature", (2, 2, 1), (3, 1), False),
]


def linear_case(name, x_shape, w_shape, bias):
    rng = _rng(name)
    arrays = [sample(rng, x_shape), sample(rng, w_shape)]
    arrays += [sample(rng, w_shape[:1])] if bias else []
    return (f"linear-{name}", lambda *a: functional(a[0]).linear(*a), linear_ref, arrays)


# (id, shape of x, normalized_shape, affine: w (weight) and/or b (bias), eps)
LAYER_NORM = [
    ("last1", (3, 4), (4,), "wb", 1e-5),
    ("last1_plain", (3, 4), (4,), "", 1e-5),
    ("last1_weight", (3, 4), (4,), "w", 1e-5),
    ("last1_bias", (3, 4), (4,), "b", 1e-5),
    ("last1_1d", (5,), (5,), "wb", 1e-5),
    ("last1_3d", (2, 2, 3), (3,), "wb", 1e-3),
    ("last1_4d", (2, 1, 2, 3), (3,), "w", 1e-5),
    ("last1_eps_large", (2, 3), (3,), "wb", 0.5),
    ("last1_size1", (3, 1), (1,), "wb", 1e-5),
    ("last2", (2, 2, 3), (2, 3), "wb", 1e-5),
    ("last2_plain", (2, 2, 3), (2, 3), "", 1e-5),
    ("last2_weight", (2, 2, 3), (2, 3), "w", 1e-2),
    ("last2_bias", (2, 2, 3), (2, 3), "b", 1e-5),
    ("last2_2d", (2, 3), (2, 3), "wb", 1e-2),
    ("last2_4d", (2, 1, 2, 2), (2, 2), "wb", 1e-5),
    ("last2_eps_large", (2, 2, 2), (2, 2), "", 1.0),
]


def layer_norm(x, normalized_shape, weight, bias, eps):
    if lib(x) is torch:
        return torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)
    return F.layer_norm(x, normalized_shape, weight, bias, eps)


def layer_norm_call(fn, normalized_shape, affine, eps):
    """fn(x, normalized_shape, weight, bias, eps) as a function of x and the affine tensors."""
    def call(x, *affine_tensors):
        given_ = dict(zip(affine, affine_tensors))
        return fn(x, normalized_shape, given_.get("w"), given_.get("b"), eps)
    return call


def layer_norm_case(name, x_shape, normalized_shape, affine, eps, domain="real"):
    rng = _rng(name)
    norm = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    arrays = [sample(rng, x_shape, domain)] + [sample(rng, norm) for _ in affine]
    fused = layer_norm_call(layer_norm, normalized_shape, affine, eps)
    ref = layer_norm_call(layer_norm_ref, normalized_shape, affine, eps)
    return (f"layer_norm-{name}", fused, ref, arrays)


# (id, shape of x, scale of its values)
GELU = [
    ("0d", (), 1.0),
    ("1d", (5,), 1.0),
    ("2d", (2, 3), 1.0),
    ("3d", (2, 1, 3), 1.0),
    ("wide", (8,), 4.0),
    ("near_0", (4,), 0.01),
]


def gelu(x):
    return torch.nn.functional.gelu(x) if lib(x) is torch else x.gelu()


def gelu_backward(grad, x):
    if lib(x) is torch:
        return torch.ops.aten.gelu_backward(grad, x)
    # minigrad has no gelu_backward op: its gelu's backward, as a graph (create_graph)
    x = x.view(x.shape) if x.requires_grad else x.detach().requires_grad_()
    return mg.grad(x.gelu(), x, grad, create_graph=True)[0]


def gelu_cases(name, shape, scale):
    rng = _rng(name)
    x, grad = sample(rng, shape) * scale, sample(rng, shape)
    return [(f"gelu-{name}", gelu, gelu_ref, [x]),
            (f"gelu_backward-{name}", gelu_backward, gelu_backward_ref, [grad, x])]


# cross_entropy: every combination of input shape, class weights, label smoothing, ignored
# targets (none; some, by ignore_index=1; all, by the default -100) and reduction
C = 3
CE_SHAPES = {"NC": (3, C), "NCd": (2, C, 2), "NCdd": (1, C, 2, 2), "C": (C,)}
CE_IGNORE = {"none": -100, "some": 1, "all": -100}


def cross_entropy_case(shape_name, weighted, smoothing, ignore, reduction):
    name = f"{shape_name}-{'w' if weighted else 'nw'}-ls{smoothing}-{ignore}-{reduction}"
    rng = _rng(name)
    shape = CE_SHAPES[shape_name]
    target = rng.integers(0, C, shape[:1] + shape[2:] if len(shape) > 1 else ())
    flat = target.reshape(-1)  # a view: writes go to target
    if ignore == "some":
        flat[0], flat[-1] = 1, 0 if flat.size > 1 else 1  # (C,): its one target ignored
    elif ignore == "all":
        flat[:] = -100
    weight = rng.uniform(0.5, 2.0, C) if weighted else None
    kw = dict(ignore_index=CE_IGNORE[ignore], reduction=reduction, label_smoothing=smoothing)

    def fused(x, t):
        w = None if weight is None else const(x, weight)
        return functional(x).cross_entropy(x, t, weight=w, **kw)

    def ref(x, t):
        return cross_entropy_ref(x, t, None if weight is None else const(x, weight), **kw)
    return (f"cross_entropy-{name}", fused, ref, [sample(rng, shape) * 2, target])


CASES = ([linear_case(*row) for row in LINEAR]
         + [layer_norm_case(*row) for row in LAYER_NORM]
         + [case for row in GELU for case in gelu_cases(*row)]
         + [cross_entropy_case(*key) for key in (
             (s, w, e, i, r) for s in CE_SHAPES for w in (False, True) for e in (0.0, 0.1, 0.3)
             for i in CE_IGNORE for r in ("none", "sum", "mean"))])


# --- 1. the fused op equals its composite, to second order -------------------------------------

def _grads(outputs, inputs, create_graph):
    """mg.grad, with zeros for an input the outputs do not reach."""
    grads = mg.grad(outputs, inputs, create_graph=create_graph, allow_unused=True)
    return [mg.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]


def assert_same_as_composite(fused, ref, arrays, device, seed=0):
    """Values, gradients of sum(out * u) and second derivatives (the gradient of
    sum(grads * v)) of ``fused`` and ``ref`` agree in float64."""
    rng = np.random.default_rng(seed)
    xs, ys = make(arrays, device), make(arrays, device)
    out, expected = fused(*xs), ref(*ys)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_allclose(out.numpy(), expected.numpy(), **CLOSE)
    wrt = [i for i, x in enumerate(xs) if x.requires_grad]
    u = mg.tensor(rng.standard_normal(out.shape), device=device)
    firsts = [_grads((o * u).sum(), [zs[i] for i in wrt], True) for o, zs in
              ((out, xs), (expected, ys))]
    for i, g, h in zip(wrt, *firsts):
        np.testing.assert_allclose(g.numpy(), h.numpy(), **CLOSE, err_msg=f"input {i}")
    vs = [mg.tensor(rng.standard_normal(g.shape), device=device) for g in firsts[0]]
    seconds = []
    for grads, zs in zip(firsts, (xs, ys)):
        terms = [(g * v).sum() for g, v in zip(grads, vs) if g.requires_grad]
        total = sum(terms[1:], terms[0]) if terms else None
        seconds.append([mg.zeros_like(zs[i]) for i in wrt] if total is None
                       else _grads(total, [zs[i] for i in wrt], False))
    for i, g, h in zip(wrt, *seconds):
        np.testing.assert_allclose(g.numpy(), h.numpy(), **CLOSE, err_msg=f"input {i}, 2nd")


@pytest.mark.parametrize("fn, ref, arrays", params(CASES))
def test_matches_composite(device, fn, ref, arrays):
    assert_same_as_composite(fn, ref, arrays, device)


def test_all_ignored_mean_is_nan_with_zero_gradient(device):
    x = mg.tensor(sample(_rng("all"), (3, C)), device=device, requires_grad=True)
    target = mg.tensor(np.full(3, -100), device=device)
    loss = F.cross_entropy(x, target, weight=const(x, [1.0, 2.0, 3.0]), label_smoothing=0.1)
    assert np.isnan(loss.item())
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, C)))


# --- 2. finite differences, first and second order ---------------------------------------------

def _nan_loss(name):
    """Every target ignored under the mean (the one target of a (C,) input with "some")."""
    return name.endswith("-all-mean") or (name.startswith("cross_entropy-C-")
                                          and name.endswith("-some-mean"))


# a NaN loss has no finite differences (its zero gradient is checked above)
FINITE = [case for case in CASES if not _nan_loss(case[0])]


@pytest.mark.parametrize("fn, ref, arrays", params(FINITE))
def test_gradcheck(device, fn, ref, arrays):
    assert_gradcheck(fn, arrays, device)


@st.composite
def linear_shapes(draw):
    """x (*, in), weight (out, in), and whether there is a bias; at most 12 elements in x."""
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    k, n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    return lead + (k,), (n, k), draw(st.booleans())


@SETTINGS
@given(shapes=linear_shapes().filter(lambda s: math.prod(s[0]) <= 12), seed=SEEDS)
def test_linear_over_drawn_shapes(device, shapes, seed):
    _, fn, ref, arrays = linear_case(str(seed), *shapes)
    assert_gradcheck(fn, arrays, device)
    assert_same_as_composite(fn, ref, arrays, device)


@st.composite
def layer_norm_args(draw):
    """x's shape, normalized_shape (its last 1 or 2 dims), affine and eps; x at most 12."""
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=3)))
    n = draw(st.integers(1, min(2, len(shape))))
    return (shape, shape[len(shape) - n:], draw(st.sampled_from(["", "w", "b", "wb"])),
            draw(st.sampled_from([1e-5, 1e-2, 0.5])))


@SETTINGS
@given(args=layer_norm_args().filter(lambda a: math.prod(a[0]) <= 12), seed=SEEDS)
def test_layer_norm_over_drawn_shapes(device, args, seed):
    # values 0.1 apart: no two nearly equal values, where a group of two is ill-conditioned
    _, fn, ref, arrays = layer_norm_case(str(seed), *args, domain="distinct")
    assert_gradcheck(fn, arrays, device)
    assert_same_as_composite(fn, ref, arrays, device)


# --- 3. PyTorch ----------------------------------------------------------------------------------

# float32: layer_norm and cross_entropy reduce in another order than torch (a few ulp).
# Over one element x - mean is exactly 0 here, and one ulp of x in torch, times 1/sqrt(eps).
F32_TOL = {"layer_norm": dict(rtol=1e-5, atol=1e-5), "cross_entropy": dict(rtol=2e-5, atol=2e-6),
           "layer_norm-last1_size1": dict(rtol=1e-5, atol=1e-4)}


@needs_torch
@DTYPES
@pytest.mark.parametrize("name, fn, ref, arrays", [pytest.param(*c, id=c[0]) for c in CASES])
def test_matches_torch(device, name, fn, ref, arrays, dtype):
    arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]
    tol = F32_TOL.get(name, F32_TOL.get(name.split("-")[0], {})) if dtype == np.float32 else {}
    assert_parity(fn, arrays, device, **tol)


# --- 4. dropout ----------------------------------------------------------------------------------

# (id, p, shape)
DROPOUT = [
    ("p0.1", 0.1, (4, 5)),
    ("p0.5", 0.5, (3, 2, 4)),
    ("p0.9", 0.9, (50,)),
    ("p0.5_0d", 0.5, ()),
]


@DTYPES
@pytest.mark.parametrize("p, shape", params(DROPOUT))
def test_dropout_is_the_generators_mask_after_the_same_seed(device, p, shape, dtype):
    x = mg.tensor(sample(_rng("dropout"), shape).astype(dtype), device=device,
                  requires_grad=True)
    mg.manual_seed(1234)
    out = F.dropout(x, p, training=True)
    mg.manual_seed(1234)
    keep = mg.tensor(backend.keep_mask(shape, p, backend.xp_of(x.array)), device=device)
    expected = x.detach() * keep / (1 - p)
    tol = dict(rtol=1e-6, atol=0) if dtype == np.float32 else dict(rtol=1e-15, atol=0)
    assert out.dtype == dtype and out.shape == x.shape
    np.testing.assert_allclose(out.numpy(), expected.numpy(), **tol)
    u = mg.tensor(sample(_rng("u"), shape).astype(dtype), device=device)
    (out * u).sum().backward()
    assert x.grad.dtype == dtype
    np.testing.assert_allclose(x.grad.numpy(), (u * keep / (1 - p)).numpy(), **tol)


@pytest.mark.parametrize("p, shape", params(DROPOUT))
def test_dropout_gradcheck(device, p, shape):
    def seeded(x):  # the same mask at every evaluation
        mg.manual_seed(99)
        return F.dropout(x, p)
    assert_gradcheck(seeded, [sample(_rng("dropout"), shape)], device)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 4)])
def test_keep_mask_shapes_seeds_and_probability(shape):
    mg.manual_seed(5)
    a = backend.keep_mask(shape, 0.3)
    mg.manual_seed(5)
    b = backend.keep_mask(shape, 0.3)
    assert a.shape == shape and a.dtype == np.bool_
    np.testing.assert_array_equal(a, b)
    assert backend.keep_mask(shape, 0.0).all()
    mask = backend.keep_mask((400_000,), 0.3)
    assert abs(mask.mean() - 0.7) < 0.004   # standard deviation 0.0007


@pytest.mark.parametrize("n", [1, 5, 8, 9, 1000, 100_003])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_keep_mask_is_the_generators_raw_bits_against_p(monkeypatch, n, p, compiled):
    """Element i's 32-bit number: byte i of the raw words (little-endian) on top, and where
    that byte equals the threshold's, 24 bits from the next raw word (its low bits), for
    those elements in order; kept where it is at least round(p 2^32). With the compiled
    pass and without it."""
    if not compiled:
        monkeypatch.setattr(host_loops, "keep_of_bytes", lambda *args: None)
    mg.manual_seed(11)
    mask = backend.keep_mask((n,), p)
    mg.manual_seed(11)
    bits = backend.generator().bit_generator
    threshold = min(round(p * 2.0 ** 32), 2 ** 32 - 1)
    words = bits.random_raw((n + 7) // 8)
    first = [(int(words[i // 8]) >> (8 * (i % 8))) & 0xFF for i in range(n)]
    ties = [i for i in range(n) if first[i] == threshold >> 24]
    low = dict(zip(ties, (int(w) & 0xFFFFFF for w in bits.random_raw(len(ties)))))
    expected = [(first[i] << 24 | low.get(i, 0)) >= threshold if i in low
                else first[i] > threshold >> 24 for i in range(n)]
    np.testing.assert_array_equal(mask, expected)
    assert n < 100_000 or 0 < len(ties) < n / 128, len(ties)  # (the rare path is taken)
    mg.manual_seed(11)  # the generator moves on exactly past those draws
    backend.keep_mask((n,), p)
    after = backend.generator().bit_generator.random_raw()
    mg.manual_seed(11)
    bits = backend.generator().bit_generator
    bits.random_raw((n + 7) // 8 + len(ties))
    assert bits.random_raw() == after


@pytest.mark.parametrize("chunk", [1, 7, 250, 1 << 14])
def test_the_numpy_formula_of_the_device_stream_is_the_same_in_any_chunks(chunk):
    from minigrad.backend.kernels import _philox_words
    from tests.test_cuda_kernels import reference_mask
    words = _philox_words(np, 1001, 2 ** 33 + 9, 2 ** 32 - 100, chunk)
    np.testing.assert_array_equal(words >= 2 ** 31, reference_mask(1001, 0.5, 2 ** 33 + 9,
                                                                   2 ** 32 - 100))


def test_a_fork_draws_what_the_source_draws_next_without_moving_it(device):
    """What attention's backward relies on: a fork (and a fork of the fork) draws the very
    masks the source draws next, on either device, and leaves the source where it was."""
    xp = backend.xp_of(mg.zeros(1, device=device).array)
    mg.manual_seed(21)
    backend.keep_mask((3,), 0.5, xp)                   # the source is not at its start
    fork = backend.source().fork()
    twin = fork.fork()                                 # forked before the fork drew
    before = backend.get_rng_state()
    ahead = backend.keep_mask((7, 5), 0.3, xp, fork)
    assert backend.get_rng_state() == before
    mine = backend.keep_mask((7, 5), 0.3, xp)
    again = backend.keep_mask((7, 5), 0.3, xp, twin)
    for other in (ahead, again):
        np.testing.assert_array_equal(backend.to_host(other), backend.to_host(mine))
    np.testing.assert_array_equal(                     # a fork goes on from where it drew
        backend.to_host(backend.keep_mask((4,), 0.3, xp, fork)),
        backend.to_host(backend.keep_mask((4,), 0.3, xp)))


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_drops_a_fraction_p(device, p):
    out = F.dropout(mg.ones(200_000, device=device), p).numpy()
    # the fraction's standard deviation is sqrt(p (1 - p) / n) < 0.0012
    assert abs((out == 0).mean() - p) < 0.006
    np.testing.assert_allclose(out[out != 0], 1 / (1 - p), rtol=1e-6)


@pytest.mark.parametrize("p, training", params([("p0", 0.0, True), ("eval", 0.5, False),
                                                ("eval_p0", 0.0, False)]))
def test_dropout_off_returns_the_input(device, p, training):
    x = mg.randn(3, 4, device=device, requires_grad=True)
    assert F.dropout(x, p, training=training) is x


def test_dropout_p1_zeroes_everything(device):
    x = mg.randn(3, 4, device=device, requires_grad=True)
    out = F.dropout(x, 1.0)
    out.sum().backward()
    np.testing.assert_array_equal(out.numpy(), np.zeros((3, 4)))
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 4)))


# --- 5. dtypes: float32 stays float32, to second order -------------------------------------------

DROPOUT_F32 = [("dropout", lambda x: F.dropout(x, 0.3), None, [sample(_rng("d"), (3, 4))])]


@pytest.mark.parametrize("fn, ref, arrays", params(CASES + DROPOUT_F32))
def test_float32_stays_float32(device, fn, ref, arrays):
    xs = make([a.astype(np.float32) if a.dtype.kind == "f" else a for a in arrays], device)
    out = fn(*xs)
    assert out.dtype == np.float32
    wrt = [x for x in xs if x.requires_grad]
    u = mg.tensor(np.ones(out.shape, np.float32), device=device)
    grads = _grads((out * u).sum(), wrt, True)
    assert [g.dtype for g in grads] == [np.float32] * len(wrt)
    terms = [(g * g).sum() for g in grads if g.requires_grad]
    if terms:
        seconds = _grads(sum(terms[1:], terms[0]), wrt, False)
        assert [g.dtype for g in seconds] == [np.float32] * len(wrt)


@pytest.mark.parametrize("values", [[-1, 0, 2], [True, False]])
def test_gelu_of_integers_and_bools_is_refused_as_torch(device, values):
    x = mg.tensor(values, device=device)  # (exp makes them floats; gelu does not, as PyTorch)
    assert x.exp().dtype == mg.get_default_dtype()
    for approximate in ("none", "tanh"):
        with pytest.raises(NotImplementedError, match=rf"gelu: .*{x.dtype}.*\(shape \(\d,\)\)"):
            F.gelu(x, approximate=approximate)


# --- 6. errors -----------------------------------------------------------------------------------

def t(device, shape, dtype=np.float64):
    return mg.tensor(np.ones(shape, dtype), device=device, requires_grad=True)


def ce(d, shape, target, **kw):
    return F.cross_entropy(t(d, shape), mg.tensor(np.array(target), device=d), **kw)


# (id, fn of the device, exception, fragments of its message)
ERRORS = [
    ("linear_in_features", lambda d: F.linear(t(d, (2, 3)), t(d, (4, 5))), mg.ShapeError,
     ["linear", "(2, 3)", "(4, 5)"]),
    ("linear_in_features_1d", lambda d: F.linear(t(d, (3,)), t(d, (2, 4))), mg.ShapeError,
     ["linear", "(3,)", "(2, 4)"]),
    ("linear_in_features_3d", lambda d: F.linear(t(d, (2, 2, 3)), t(d, (3, 2))), mg.ShapeError,
     ["linear", "(2, 2, 3)", "(3, 2)"]),
    ("linear_0d_input", lambda d: F.linear(t(d, ()), t(d, (2, 3))), mg.ShapeError,
     ["linear", "()", "(2, 3)"]),
    ("linear_1d_weight_with_bias", lambda d: F.linear(t(d, (2, 3)), t(d, (3,)), t(d, (1,))),
     mg.ShapeError, ["linear", "(3,)", "(1,)"]),  # (without a bias it is x @ w, as torch's)
    ("linear_weight_dtype", lambda d: F.linear(t(d, (2, 3), np.float32), t(d, (4, 3))),
     RuntimeError, ["linear", "float32", "float64"]),  # a dtype mismatch, as torch's
    ("linear_input_dtype", lambda d: F.linear(t(d, (2, 3)), t(d, (4, 3), np.float32)),
     RuntimeError, ["linear", "float64", "float32"]),
    ("linear_bias_dtype", lambda d: F.linear(t(d, (2, 3)), t(d, (4, 3)),
                                             t(d, (4,), np.float32)),
     RuntimeError, ["linear", "float64", "float32"]),
    ("linear_bias_shape", lambda d: F.linear(t(d, (2, 3)), t(d, (4, 3)), t(d, (3,))),
     mg.ShapeError, ["linear", "bias", "(3,)", "(4, 3)"]),
    ("linear_bias_2d", lambda d: F.linear(t(d, (2, 3)), t(d, (4, 3)), t(d, (3, 4))),
     mg.ShapeError, ["linear", "bias", "(3, 4)", "(2, 4)"]),  # ((2, 4) broadcasts, as torch)
    ("ce_target_too_large", lambda d: ce(d, (3, 4), [0, 4, 1]), IndexError,
     ["target 4", "4 classes"]),
    ("ce_target_negative", lambda d: ce(d, (3, 4), [0, -1, 1]), IndexError,
     ["target -1", "4 classes"]),
    ("ce_target_too_large_3d", lambda d: ce(d, (1, 3, 2), [[0, 7]]), IndexError,
     ["target 7", "3 classes"]),
    ("ce_target_too_large_1d", lambda d: ce(d, (5,), 5), IndexError, ["target 5", "5 classes"]),
    ("ce_target_out_of_range_other_ignore", lambda d: ce(d, (2, 3), [-100, 1], ignore_index=1),
     IndexError, ["target -100", "3 classes"]),
    ("layer_norm_last_dim", lambda d: F.layer_norm(t(d, (2, 3, 4)), (3,)), mg.ShapeError,
     ["layer_norm", "(3,)", "(2, 3, 4)"]),
    ("layer_norm_last_2_dims", lambda d: F.layer_norm(t(d, (2, 3, 4)), (4, 3)), mg.ShapeError,
     ["layer_norm", "(4, 3)", "(2, 3, 4)"]),
    ("layer_norm_int_shape", lambda d: F.layer_norm(t(d, (2, 3)), 3), TypeError,
     ["layer_norm", "normalized_shape", "int"]),
    ("layer_norm_more_dims_than_input", lambda d: F.layer_norm(t(d, (4,)), (2, 4)),
     mg.ShapeError, ["layer_norm", "(2, 4)", "(4,)"]),
]


@pytest.mark.parametrize("fn, exc, fragments", params(ERRORS))
def test_error_names_op_and_operands(device, fn, exc, fragments):
    run_error(lambda: fn(device), exc, fragments)


def test_ignored_target_out_of_range_is_no_error(device):
    loss = ce(device, (2, 3), [7, 1], ignore_index=7, reduction="none")
    assert loss.numpy()[0] == 0.0


# --- edge cases this file found broken in the first fused ops (fixed since) -----------------

def test_linear_0d_weight_is_a_shape_error(device):
    run_error(lambda: F.linear(t(device, (3,)), t(device, ())), mg.ShapeError, ["linear", "()"])


@pytest.mark.parametrize("x_shape, w_shape", params([("no_in_features", (2, 0), (4, 0)),
                                                     ("no_out_features", (2, 3), (0, 3))]))
def test_linear_with_zero_features_matches_composite(device, x_shape, w_shape):
    rng = _rng("zero")
    arrays = [sample(rng, x_shape), sample(rng, w_shape), sample(rng, w_shape[:1])]
    assert_same_as_composite(F.linear, linear_ref, arrays, device)


def test_zero_total_weight_with_smoothing_has_no_finite_nonzero_gradient(device):
    x = mg.tensor(sample(_rng("zero_weight"), (2, 3)), device=device, requires_grad=True)
    target = mg.tensor(np.array([0, 0]), device=device)
    loss = F.cross_entropy(x, target, weight=const(x, [0.0, 1.0, 1.0]), label_smoothing=0.1)
    assert np.isnan(loss.item())
    loss.backward()
    grad = x.grad.numpy()
    assert np.isnan(grad).all() or (grad == 0).all(), grad


@needs_torch
@pytest.mark.parametrize("x_shape, normalized_shape", [
    ((3, 4), (4,)), ((5,), (5,)), ((2, 2, 3), (2, 3)), ((2, 1, 2, 3), (3,)), ((3, 1), (1,)),
    ((0, 4), (4,))], ids=["2d", "1d", "last2", "4d", "size1", "no_rows"])
def test_layer_norm_keeps_the_mean_and_rstd_of_torchs_native_layer_norm(
        x_shape, normalized_shape):
    """Forward keeps each row's mean and 1 / sqrt(var + eps), as aten's native_layer_norm
    returns them, and backward from them gives what recomputing them from x gives, bit for
    bit."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape) * 3 + 1
    w, b = rng.standard_normal(normalized_shape), rng.standard_normal(normalized_shape)
    y, mean, rstd = backend.layer_norm(x, w, b, len(normalized_shape), 1e-3)
    ty, tmean, trstd = torch.ops.aten.native_layer_norm(
        torch.tensor(x), list(normalized_shape), torch.tensor(w), torch.tensor(b), 1e-3)
    for mine, theirs in ((y, ty), (mean, tmean), (rstd, trstd)):
        assert mine.shape == tuple(theirs.shape)
        np.testing.assert_allclose(mine, theirs.numpy(), rtol=1e-12, atol=1e-12)
    grad = rng.standard_normal(x_shape)
    kept = backend.layer_norm_backward(grad, x, w, len(normalized_shape), 1e-3, mean, rstd)
    again = backend.layer_norm_backward(grad, x, w, len(normalized_shape), 1e-3)
    for a, b_ in zip(kept, again):
        np.testing.assert_array_equal(a, b_)
