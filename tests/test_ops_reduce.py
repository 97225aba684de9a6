"""Reductions (sum mean max min amax amin var std logsumexp) and the softmax family.

Every reduction is swept over dim=None, int dims, negative dims, tuples of dims and dim=()
with keepdim both ways, on a fixed (2, 3, 4) table and on shapes of rank 0..4 drawn by
hypothesis; each case is gradchecked (first and second order) and compared with PyTorch.
"""
import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes

import minigrad as mg
from tests.test_ops_elementwise import (DTYPES, MAX_SIZE, SEEDS, SETTINGS, assert_gradcheck,
                                        assert_matches_torch, assert_parity, f64, lib, params,
                                        run_error, sample)
from tests.torch_ref import needs_torch, to_torch, torch


def reducer(method, **extra):
    """``call(dim, keepdim)`` gives the case ``t.method(dim, keepdim=keepdim, **extra)``.

    minigrad is called as a user would (dim and keepdim left out when they are defaults);
    the torch reference is spelt the way torch accepts the same request.
    """
    def call(dim, keepdim):
        kwargs = {} if dim is None else {"dim": dim}
        if keepdim:
            kwargs["keepdim"] = True

        def ours(t):
            return getattr(t, method)(**kwargs, **extra)

        def ref(t):
            ref_kwargs = dict(kwargs, **extra)
            if keepdim and dim is None:
                ref_kwargs["dim"] = None  # torch wants dim=None spelt out next to keepdim
            if "unbiased" in ref_kwargs:  # torch has no unbiased= overload with dim=None
                ref_kwargs["correction"] = int(ref_kwargs.pop("unbiased"))
            if method in ("var", "std") and dim == ():
                # torch's forward reduces over every dim for dim=(), but its backward
                # then divides by (1 - correction): inf or a gradient N times too large
                ref_kwargs["dim"] = None
            if method == "logsumexp" and dim is None:
                ref_kwargs["dim"] = tuple(range(t.ndim))  # torch has no dim=None here
            return getattr(t, method)(**ref_kwargs)
        return ours, ref
    return call


# (name, call(dim, keepdim) -> fn, domain, least number of reduced elements for a finite result)
REDUCERS = [
    ("sum", reducer("sum"), "real", 1),
    ("mean", reducer("mean"), "real", 1),
    ("amax", reducer("amax"), "distinct", 1),
    ("amin", reducer("amin"), "distinct", 1),
    ("var", reducer("var"), "real", 2),
    ("var_correction0", reducer("var", correction=0), "real", 1),
    ("var_unbiased_false", reducer("var", unbiased=False), "real", 1),
    ("var_unbiased_true", reducer("var", unbiased=True), "real", 2),
    # std's gradient divides by std: values 0.1 apart keep torch's float32 backward, the
    # reference, away from the cancellation it shows on two nearly equal values
    ("std", reducer("std"), "distinct", 2),
    ("std_correction0", reducer("std", correction=0), "distinct", 2),
    ("std_unbiased_false", reducer("std", unbiased=False), "distinct", 2),
    ("logsumexp", reducer("logsumexp"), "real", 1),
]
DIMS = [None, 0, 1, 2, -1, -3, (0, 2), (2, 0), (-1, 0), (1,), (0, 1, 2), [0, 1], ()]
# torch's float32 std backward loses up to ~3.5e-5 (relative) when the values are close
# (measured against float64 on 2000 random pairs, where minigrad stays within 2e-7).
STD_F32_TOL = dict(rtol=1e-4, atol=1e-5)


def f32_tol(name, dtype):
    return STD_F32_TOL if name.startswith("std") and dtype == np.float32 else {}


TABLE = [(f"{name}-dim={dim}-{'keep' if keepdim else 'drop'}", call(dim, keepdim), domain)
         for (name, call, domain, _), dim, keepdim in itertools.product(
             REDUCERS, DIMS, [False, True])
         if not (name == "logsumexp" and dim == ())]  # torch rejects logsumexp(dim=())

# max/min with an int dim return (values, indices); the softmax family takes one int dim.
DIM_OPS = [
    ("max_dim", lambda d: lambda t: t.max(d), "distinct"),
    ("max_dim_keep", lambda d: lambda t: t.max(d, keepdim=True), "distinct"),
    ("min_dim", lambda d: lambda t: t.min(d), "distinct"),
    ("min_dim_keep", lambda d: lambda t: t.min(dim=d, keepdim=True), "distinct"),
    ("softmax", lambda d: lambda t: t.softmax(d), "real"),
    ("log_softmax", lambda d: lambda t: t.log_softmax(d), "real"),
    ("softmax_function", lambda d: lambda t: lib(t).softmax(t, d), "real"),
    ("log_softmax_function", lambda d: lambda t: lib(t).log_softmax(t, dim=d), "real"),
]
TABLE += [(f"{name}-dim={d}", make(d), domain)
          for (name, make, domain), d in itertools.product(DIM_OPS, [0, 1, 2, -1, -2, -3])]

TABLE += [
    ("max_full", lambda t: t.max(), "distinct"),
    ("min_full", lambda t: t.min(), "distinct"),
    ("sum_function", lambda t: lib(t).sum(t, (0, 2)), "real"),
    ("mean_function", lambda t: lib(t).mean(t, 1, keepdim=True), "real"),
    ("var_function", lambda t: lib(t).var(t, -1), "real"),
    ("std_function", lambda t: lib(t).std(t), "real"),
    ("amax_function", lambda t: lib(t).amax(t, (1, 2)), "distinct"),
    ("max_function", lambda t: lib(t).max(t, 1), "distinct"),
    ("logsumexp_function", lambda t: lib(t).logsumexp(t, 0), "real"),
    ("var_positional_unbiased_keepdim", lambda t: t.var((0, 2), False, True), "real"),
    ("sum_positional_keepdim", lambda t: t.sum(1, True), "real"),
    ("var_correction2", lambda t: t.var(1, correction=2), "real"),
    # the numpy-style aliases
    ("sum_axis", lambda t: t.sum(axis=1), "real"),
    ("sum_axis_keepdims", lambda t: t.sum(axis=(0, 2), keepdims=True), "real"),
    ("mean_axis_keepdims", lambda t: t.mean(axis=-1, keepdims=True), "real"),
    ("var_axis", lambda t: t.var(axis=1), "real"),
    ("std_axis_keepdims", lambda t: t.std(axis=(0, 1), keepdims=True), "real"),
    ("max_axis", lambda t: t.max(axis=1), "distinct"),
    ("min_axis_keepdims", lambda t: t.min(axis=-1, keepdims=True), "distinct"),
    ("amax_axis", lambda t: t.amax(axis=1), "distinct"),
    ("amin_axis_keepdims", lambda t: t.amin(axis=(0, 2), keepdims=True), "distinct"),
    ("logsumexp_axis_keepdims", lambda t: t.logsumexp(axis=1, keepdims=True), "real"),
    ("softmax_axis", lambda t: t.softmax(axis=1), "real"),
    # composites as they appear in layers
    ("layer_norm_like", lambda t: (t - t.mean(-1, keepdim=True))
     / (t.var(-1, unbiased=False, keepdim=True) + 1e-5).sqrt(), "real"),
    ("cross_entropy_like", lambda t: -(t.log_softmax(-1)[..., 0]).mean(), "real"),
]


@pytest.mark.parametrize("fn, domain", params(TABLE))
def test_gradcheck(device, fn, domain):
    x = sample(np.random.default_rng(0), (2, 3, 4), domain)
    assert_gradcheck(fn, [x], device)


@needs_torch
@DTYPES
@pytest.mark.parametrize("name, fn, domain", [pytest.param(*row, id=row[0]) for row in TABLE])
def test_matches_torch(device, name, fn, domain, dtype):
    x = sample(np.random.default_rng(0), (2, 3, 4), domain).astype(dtype)
    assert_parity(fn, [x], device, **f32_tol(name, dtype))


# --- the same over shapes of rank 0..4 (size-1 dims included) -----------------------------------

SHAPES = array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4).filter(
    lambda s: math.prod(s) <= MAX_SIZE)


def draw_dims(data, ndim):
    """None, an int (maybe negative) or a tuple of distinct dims (maybe negative, maybe ())."""
    rank = max(ndim, 1)
    kind = data.draw(st.sampled_from(["none", "int", "tuple"]), label="dim kind")
    if kind == "none":
        return None
    if kind == "int":
        return data.draw(st.integers(-rank, rank - 1), label="dim")
    dims = data.draw(st.lists(st.integers(0, rank - 1), unique=True, max_size=rank)
                     if ndim else st.sampled_from([[], [0], [-1]]), label="dims")
    return tuple(d - ndim if d < ndim and data.draw(st.booleans()) else d for d in dims)


def _count(shape, dim):
    if dim is None or dim == ():
        return math.prod(shape)
    dims = dim if isinstance(dim, tuple) else (dim,)
    return math.prod(shape[d] for d in dims) if shape else 1


@pytest.mark.parametrize("name, call, domain, least", [pytest.param(*r, id=r[0])
                                                       for r in REDUCERS])
@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_reductions_over_drawn_shapes(device, name, call, domain, least, data, seed):
    shape = data.draw(SHAPES, label="shape")
    dim = draw_dims(data, len(shape))
    keepdim = data.draw(st.booleans(), label="keepdim")
    assume(_count(shape, dim) >= least)
    assume(not (name == "logsumexp" and dim == ()))
    x = sample(np.random.default_rng(seed), shape, domain)
    fn = call(dim, keepdim)
    assert_gradcheck(fn, [x], device)
    if torch is not None:
        assert_parity(fn, [x], device, seed=seed)
        assert_parity(fn, [x.astype(np.float32)], device, seed=seed,
                      **f32_tol(name, np.float32))


@pytest.mark.parametrize("name, make, domain", params([(r[0],) + r for r in DIM_OPS]))
@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_dim_ops_over_drawn_shapes(device, name, make, domain, data, seed):
    shape = data.draw(SHAPES, label="shape")
    rank = max(len(shape), 1)
    dim = data.draw(st.integers(-rank, rank - 1), label="dim")
    x = sample(np.random.default_rng(seed), shape, domain)
    assert_gradcheck(make(dim), [x], device)
    if torch is not None:
        assert_parity(make(dim), [x], device, seed=seed)
        assert_parity(make(dim), [x.astype(np.float32)], device, seed=seed)


# --- max(dim) / min(dim): a named tuple (values, indices) -----------------------------------

@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_dim_returns_named_tuple(device, op, keepdim):
    x = np.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]])
    out = getattr(mg.tensor(x, device=device), op)(1, keepdim=keepdim)
    values, indices = out
    assert isinstance(out, tuple) and out.values is values and out.indices is indices
    expected = getattr(x, op)(1, keepdims=keepdim), getattr(x, "arg" + op)(1, keepdims=keepdim)
    np.testing.assert_array_equal(values.numpy(), expected[0])
    np.testing.assert_array_equal(indices.numpy(), expected[1])
    assert indices.dtype == np.int64 and not indices.requires_grad


@needs_torch
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_dim_0d(device, op):
    """torch: a 0-d tensor reduced over dim 0 still gives (values, indices)."""
    assert_parity(lambda t: getattr(t, op)(0), [f64(2.5)], device)
    assert_parity(lambda t: getattr(t, op)(-1, keepdim=True), [f64(2.5)], device)


# --- ties, special values and dtypes: exactly what torch does -----------------------------------

TIES = f64([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, -1.0, 0.0, -1.0]])
SPECIAL = [
    # ties share the gradient equally in full reductions and in amax/amin
    ("max_full_ties", lambda t: t.max(), [TIES]),
    ("min_full_ties", lambda t: t.min(), [TIES]),
    ("amax_ties", lambda t: t.amax(1), [TIES]),
    ("amax_ties_keep", lambda t: t.amax(0, keepdim=True), [TIES]),
    ("amin_ties", lambda t: t.amin((0, 1)), [TIES]),
    ("amin_ties_dim1", lambda t: t.amin(-1), [TIES]),
    # max(dim) sends the gradient to the returned index only
    ("max_dim_ties", lambda t: t.max(1), [TIES]),
    ("min_dim_ties", lambda t: t.min(0), [TIES]),
    ("argmax_ties", lambda t: t.argmax(1), [TIES]),
    ("argmin_ties_keep", lambda t: t.argmin(0, keepdim=True), [TIES]),
    ("argmax_full", lambda t: t.argmax(), [TIES]),
    # stability
    ("softmax_large", lambda t: t.softmax(-1), [f64([[1000.0, 1001.0, 999.0], [-5.0, 0, 5]])]),
    ("log_softmax_large", lambda t: t.log_softmax(-1), [f64([[-1000.0, 0.0, 1000.0]])]),
    ("log_softmax_neg_inf", lambda t: t.log_softmax(0), [f64([0.0, -np.inf, 1.0])]),
    ("logsumexp_large", lambda t: t.logsumexp(-1), [f64([[1000.0, 1000.0], [-1000.0, 0.0]])]),
    ("logsumexp_all_neg_inf", lambda t: t.logsumexp(0), [f64([-np.inf, -np.inf])]),
    ("std_constant", lambda t: t.std(0), [f64([[2.0, 1.0], [2.0, 3.0]])]),
    ("var_single_element", lambda t: t.var(0), [f64([[2.0, 1.0]])]),
    # empty tensors
    ("sum_empty", lambda t: t.sum(0), [np.zeros((0, 3))]),
    ("mean_empty_dim", lambda t: t.mean(1), [np.zeros((0, 3))]),
    ("amax_over_nonempty_dim", lambda t: t.amax(1), [np.zeros((0, 3))]),
    # dtypes
    ("sum_int", lambda t: t.sum(), [np.array([1, 2, 3], np.int32)]),
    ("sum_int_dim", lambda t: t.sum(0), [np.array([[1, 2], [3, 4]], np.int64)]),
    ("sum_bool", lambda t: t.sum(), [np.array([True, False, True])]),
    ("sum_dtype_f64", lambda t: t.sum(dtype=lib(t).float64), [np.array([1.5, 2.0], np.float32)]),
    ("amax_int", lambda t: t.amax(0), [np.array([[1, 5], [3, 4]], np.int64)]),
    ("logsumexp_int", lambda t: t.logsumexp(0), [np.array([1, 2, 3], np.int64)]),
    ("mean_f32", lambda t: t.mean(), [np.array([1.5, 2.0], np.float32)]),
    ("max_dim_int", lambda t: t.max(1), [np.array([[1, 5], [3, 4]], np.int64)]),
    ("max_full_int", lambda t: t.max(), [np.array([[1, 5], [3, 4]], np.int32)]),
]


@needs_torch
@pytest.mark.parametrize("fn, arrays", params(SPECIAL))
def test_special_cases_match_torch(device, fn, arrays):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns about degrees of freedom <= 0
        assert_parity(fn, arrays, device)
        if arrays[0].dtype == np.float64:
            assert_parity(fn, [arrays[0].astype(np.float32)], device)


def test_max_ties_share_gradient_by_hand(device):
    """max() over [1, 3, 3] sends 1/2 to each 3; max(dim) all of it to the first 3."""
    x = mg.tensor(f64([1.0, 3.0, 3.0]), device=device, requires_grad=True)
    x.max().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.5, 0.5])
    y = mg.tensor(f64([1.0, 3.0, 3.0]), device=device, requires_grad=True)
    y.max(0).values.backward()
    np.testing.assert_array_equal(y.grad.numpy(), [0.0, 1.0, 0.0])


def test_sum_over_empty_dims_reduces_everything(device):
    """torch: sum(dim=()) reduces over every dim (not over none)."""
    x = mg.tensor(f64([[1.0, 2.0], [3.0, 4.0]]), device=device)
    assert x.sum(dim=()).shape == () and x.sum(dim=()).item() == 10.0
    assert x.sum(dim=(), keepdim=True).shape == (1, 1)
    assert x.mean(dim=()).item() == 2.5


def test_var_is_unbiased_by_default(device):
    """var([1, 2, 3, 4]) = 5/3 (Bessel's correction), 5/4 with correction=0 (hand math)."""
    x = mg.tensor(f64([1.0, 2.0, 3.0, 4.0]), device=device)
    assert x.var().item() == pytest.approx(5 / 3, rel=1e-15)
    assert x.var(correction=0).item() == pytest.approx(5 / 4, rel=1e-15)
    assert x.var(unbiased=False).item() == pytest.approx(5 / 4, rel=1e-15)
    assert x.std().item() == pytest.approx(math.sqrt(5 / 3), rel=1e-15)


# --- errors ------------------------------------------------------------------------------------

BAD_DIMS = [
    ("sum", lambda t: t.sum(2)),
    ("sum_negative", lambda t: t.sum(-3)),
    ("sum_tuple", lambda t: t.sum((0, 3))),
    ("mean", lambda t: t.mean(2)),
    ("var", lambda t: t.var(2)),
    ("std", lambda t: t.std(-3)),
    ("max", lambda t: t.max(2)),
    ("min", lambda t: t.min(-3)),
    ("amax", lambda t: t.amax(2)),
    ("amin", lambda t: t.amin((0, -3))),
    ("logsumexp", lambda t: t.logsumexp(2)),
    ("softmax", lambda t: t.softmax(2)),
    ("log_softmax", lambda t: t.log_softmax(-3)),
    ("argmax", lambda t: t.argmax(2)),
    ("sum_of_0d", lambda t: t.sum().sum(1)),
]


@pytest.mark.parametrize("fn", params(BAD_DIMS))
def test_bad_dim_raises_index_error(device, fn):
    x = mg.ones(2, 3, device=device, requires_grad=True)
    with pytest.raises(IndexError):
        fn(x)


@pytest.mark.parametrize("fn", params([
    ("sum", lambda t: t.sum((0, 0))),
    ("sum_negative_alias", lambda t: t.sum((1, -1))),
    ("amax", lambda t: t.amax((0, -2))),
    ("var", lambda t: t.var((1, 1))),
]))
def test_repeated_dim_raises(device, fn):
    x = mg.ones(2, 3, device=device)
    run_error(lambda: fn(x), (RuntimeError, ValueError), ["dim"])


def test_mean_of_integers_raises(device):
    with pytest.raises((TypeError, RuntimeError)):
        mg.tensor([1, 2, 3], device=device).mean()


def test_max_of_empty_raises(device):
    with pytest.raises((RuntimeError, ValueError)):
        mg.zeros(0, 3, device=device).max()


@needs_torch
def test_max_dim_indices_match_torch_layout(device):
    """indices are int64 positions along the reduced dim: x[arange, indices] == values."""
    x = sample(np.random.default_rng(3), (3, 5), "distinct")
    values, indices = mg.tensor(x, device=device).max(1)
    ref = to_torch(mg.tensor(x)).max(1)
    assert_matches_torch(indices, ref.indices)
    np.testing.assert_array_equal(x[np.arange(3), indices.numpy()], values.numpy())
