"""Elementwise ops: arithmetic with broadcasting and Python scalars, pow, unary maths,
activations, clamp, maximum/minimum, where, masked_fill and comparisons.

Each op is checked two ways (STYLE.md, "Tests"): finite differences in float64
(``gradcheck``, and ``gradgradcheck`` for second order) on shapes drawn by hypothesis, and
parity with PyTorch (values, gradients, shapes, dtypes) in float32 and float64.

The helpers at the top are shared by the other ``tests/test_ops_*.py`` files.
"""
import functools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import minigrad as mg
from tests.torch_ref import needs_torch, to_torch, torch

# --- helpers shared by the test_ops_* files ---------------------------------------------------

# gradgradcheck costs about (elements)^2 backward passes: keep generated tensors small.
MAX_SIZE = 32
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
SEEDS = st.integers(0, 2**32 - 1)
DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
# float64: both libraries round differently only in the last bits (sums in another order);
# float32: about 16 ulp, room for libm differences (exp, erf, tanh) in composites like gelu.
TOL = {np.dtype(np.float32): dict(rtol=1e-6, atol=1e-6),
       np.dtype(np.float64): dict(rtol=1e-12, atol=1e-12)}


def params(table):
    """``pytest.param`` rows from a table whose first column is the readable id."""
    return [pytest.param(*row[1:], id=row[0]) for row in table]


def lib(t):
    """The library a tensor belongs to (``mg`` or ``torch``), for function forms."""
    return torch if torch is not None and isinstance(t, torch.Tensor) else mg


def broadcastable(num_shapes, max_size=MAX_SIZE):
    """Shapes that broadcast together (rank 0..4, sides 1..4, the result kept small)."""
    return mutually_broadcastable_shapes(
        num_shapes=num_shapes, min_dims=0, max_dims=4, min_side=1, max_side=4,
    ).filter(lambda b: math.prod(b.result_shape) <= max_size).map(lambda b: b.input_shapes)


def sample(rng, shape, domain="real"):
    """Float64 values (or bools) of ``shape``, kept where ``domain`` says:

    real: standard normal; positive: in [0.5, 2] (log, sqrt, fractional powers);
    nonzero: |x| in [0.5, 2] (kinks at 0, divisors); grid: multiples of 0.1 in [-1.5, 1.5];
    offgrid: grid + 0.05, so never within 0.05 of a grid value or of +-0.5 (ties, bounds);
    distinct: all values 0.1 apart (max/min without ties); bool: a random mask.
    """
    shape = tuple(shape)
    if domain == "real":
        x = rng.standard_normal(shape)
    elif domain == "positive":
        x = rng.uniform(0.5, 2.0, shape)
    elif domain == "nonzero":
        x = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)
    elif domain == "grid":
        x = rng.integers(-15, 16, shape) * 0.1
    elif domain == "offgrid":
        x = rng.integers(-15, 15, shape) * 0.1 + 0.05
    elif domain == "distinct":
        n = math.prod(shape)
        x = ((rng.permutation(n) - n // 2) * 0.1).reshape(shape)
    elif domain == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    else:
        raise ValueError(domain)
    return np.asarray(x, dtype=np.float64)


def make(arrays, device):
    """minigrad inputs: floating arrays require grad, others (masks, indices) do not."""
    return [mg.tensor(a, device=device, requires_grad=a.dtype.kind == "f") for a in arrays]


def _fns(fn):
    """A case's function may be one callable (same code for both libraries) or a pair."""
    return (fn, fn) if callable(fn) else fn


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _squared(fn):
    # Squaring makes the first derivative depend on the inputs even for linear ops (shape
    # ops, add, ...), so gradgradcheck really differentiates each op's backward.
    def squared(*xs):
        return tuple(o * o for o in _flat(fn(*xs)) if o.dtype.kind == "f")
    return squared


def assert_gradcheck(fn, arrays, device, second_order=True):
    """gradcheck (and gradgradcheck) of the minigrad function of a case, in float64."""
    fn = _fns(fn)[0]
    xs = make([a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays], device)
    assert mg.autograd.gradcheck(fn, xs)
    if second_order:
        assert mg.autograd.gradgradcheck(_squared(fn), xs)


def torch_dtype_as_numpy(dtype):
    return torch.empty((), dtype=dtype).numpy().dtype


def assert_matches_torch(ours, ref, rtol=None, atol=None):
    """One minigrad tensor equals one torch tensor: shape, dtype, requires_grad, values."""
    assert isinstance(ours, mg.Tensor), f"expected a minigrad Tensor, got {type(ours)}"
    assert ours.shape == tuple(ref.shape), f"shape {ours.shape} != torch's {tuple(ref.shape)}"
    assert ours.dtype == torch_dtype_as_numpy(ref.dtype), \
        f"dtype {ours.dtype} != torch's {ref.dtype}"
    expected = ref.detach().numpy()
    if expected.dtype.kind == "f":
        tol = TOL[expected.dtype] if rtol is None else dict(rtol=rtol, atol=atol)
        np.testing.assert_allclose(ours.numpy(), expected, **tol)
    else:
        np.testing.assert_array_equal(ours.numpy(), expected)


def assert_parity(fn, arrays, device, rtol=None, atol=None, seed=0):
    """Forward and backward of a case agree with PyTorch on the same inputs.

    Backward is that of sum(out * w) over every differentiable output, with random
    weights ``w``; the gradient of every input is compared (None where torch has None).
    """
    fn_mg, fn_torch = _fns(fn)
    xs = make(arrays, device)
    ts = [to_torch(x) for x in xs]
    outs, refs = _flat(fn_mg(*xs)), _flat(fn_torch(*ts))
    assert len(outs) == len(refs), f"{len(outs)} outputs, torch gives {len(refs)}"
    for out, ref in zip(outs, refs):
        assert_matches_torch(out, ref, rtol, atol)
        assert out.requires_grad == ref.requires_grad
    rng = np.random.default_rng(seed)
    losses, ref_losses = [], []
    for out, ref in zip(outs, refs):
        if ref.requires_grad:
            w = rng.standard_normal(tuple(ref.shape)).astype(torch_dtype_as_numpy(ref.dtype))
            losses.append((out * mg.tensor(w, device=device)).sum())
            ref_losses.append((ref * torch.tensor(w)).sum())
    if not ref_losses:
        return
    functools.reduce(lambda a, b: a + b, losses).backward()
    functools.reduce(lambda a, b: a + b, ref_losses).backward()
    for i, (x, t) in enumerate(zip(xs, ts)):
        if t.grad is None:
            assert x.grad is None, f"input {i}: torch gives no gradient, minigrad does"
        else:
            assert x.grad is not None, f"input {i}: minigrad gives no gradient"
            assert_matches_torch(x.grad, t.grad, rtol, atol)


def run_error(fn, exc, fragments):
    """``fn()`` raises ``exc`` with every fragment in its message (case-insensitive)."""
    with pytest.raises(exc) as info:
        fn()
        mg.backend.raise_pending()  # (on a GPU an error of values comes at the next read)
    message = str(info.value).lower()
    for fragment in fragments:
        assert fragment.lower() in message, f"{fragment!r} not in {str(info.value)!r}"


# --- the cases ---------------------------------------------------------------------------------

def gelu(t, approximate="none"):
    if lib(t) is torch:
        return torch.nn.functional.gelu(t, approximate=approximate)
    return mg.gelu(t, approximate=approximate)


# (id, fn, domain of each input): the number of domains is the number of inputs, whose
# shapes broadcast together. Every op here is also checked to second order.
R, P, NZ, G, OG, B = "real", "positive", "nonzero", "grid", "offgrid", "bool"
ELEMENTWISE = [
    ("add", lambda x, y: x + y, (R, R)),
    ("add_method", lambda x, y: x.add(y), (R, R)),
    ("add_function", lambda x, y: lib(x).add(x, y), (R, R)),
    ("sub", lambda x, y: x - y, (R, R)),
    ("sub_method", lambda x, y: x.sub(y), (R, R)),
    ("mul", lambda x, y: x * y, (R, R)),
    ("mul_method", lambda x, y: x.mul(y), (R, R)),
    ("div", lambda x, y: x / y, (R, NZ)),
    ("div_method", lambda x, y: x.div(y), (R, NZ)),
    ("pow_tensor_tensor", lambda x, y: x ** y, (P, R)),
    ("pow_method", lambda x, y: x.pow(y), (P, R)),
    ("pow_function", lambda x, y: lib(x).pow(x, y), (P, R)),
    ("pow_2", lambda x: x ** 2, (R,)),
    ("pow_3", lambda x: x ** 3, (R,)),
    ("pow_0.5", lambda x: x ** 0.5, (P,)),
    ("pow_-1", lambda x: x ** -1, (NZ,)),
    ("pow_-2", lambda x: x ** -2, (NZ,)),
    ("pow_-0.5", lambda x: x ** -0.5, (P,)),
    ("pow_1.7", lambda x: x ** 1.7, (P,)),
    ("pow_0", lambda x: x ** 0, (R,)),
    ("pow_2.0_negative_base", lambda x: x ** 2.0, (NZ,)),
    ("rpow_2", lambda x: 2 ** x, (R,)),
    ("rpow_0.5", lambda x: 0.5 ** x, (R,)),
    ("rpow_e", lambda x: math.e ** x, (R,)),
    ("neg", lambda x: -x, (R,)),
    ("neg_method", lambda x: x.neg(), (R,)),
    ("scalar_add", lambda x: x + 2, (R,)),
    ("scalar_radd", lambda x: 2 + x, (R,)),
    ("scalar_sub", lambda x: x - 2.5, (R,)),
    ("scalar_rsub", lambda x: 2 - x, (R,)),
    ("scalar_mul", lambda x: x * 3, (R,)),
    ("scalar_rmul", lambda x: -1.5 * x, (R,)),
    ("scalar_div", lambda x: x / 4, (R,)),
    ("scalar_rdiv", lambda x: 2 / x, (NZ,)),
    ("scalar_rdiv_float", lambda x: 2.5 / x, (NZ,)),
    ("exp", lambda x: x.exp(), (R,)),
    ("log", lambda x: x.log(), (P,)),
    ("sqrt", lambda x: x.sqrt(), (P,)),
    ("abs", lambda x: x.abs(), (NZ,)),
    ("abs_builtin", lambda x: abs(x), (NZ,)),
    ("tanh", lambda x: x.tanh(), (R,)),
    ("sigmoid", lambda x: x.sigmoid(), (R,)),
    ("relu", lambda x: x.relu(), (NZ,)),
    ("gelu", lambda x: gelu(x), (R,)),
    ("gelu_tanh", lambda x: gelu(x, "tanh"), (R,)),
    ("sin", lambda x: x.sin(), (R,)),
    ("cos", lambda x: x.cos(), (R,)),
    ("erf", lambda x: x.erf(), (R,)),
    ("sinh", lambda x: x.sinh(), (R,)),
    ("cosh", lambda x: x.cosh(), (R,)),
    ("log1p", lambda x: x.log1p(), (P,)),
    ("log1p_near_0", lambda x: (x * 1e-3).log1p(), (R,)),
    ("expm1", lambda x: x.expm1(), (R,)),
    ("floor", lambda x: x.floor(), (OG,)),
    ("ceil", lambda x: x.ceil(), (OG,)),
    ("trunc", lambda x: x.trunc(), (OG,)),
    ("round", lambda x: x.round(), (OG,)),
    ("round_decimals", lambda x: x.round(decimals=2), (P,)),
    ("round_negative_decimals", lambda x: (x * 100).round(decimals=-1), (P,)),
    ("frac", lambda x: x.frac(), (OG,)),
    ("floor_in_a_sum", lambda x: x * 2 + x.floor() * x, (OG,)),
    ("clamp_both", lambda x: x.clamp(-0.5, 0.5), (OG,)),
    ("clamp_min", lambda x: x.clamp(min=-0.5), (OG,)),
    ("clamp_max", lambda x: x.clamp(max=0.5), (OG,)),
    ("clip", lambda x: x.clip(-0.5, 0.5), (OG,)),
    ("maximum", lambda x, y: x.maximum(y), (OG, G)),
    ("maximum_function", lambda x, y: lib(x).maximum(x, y), (OG, G)),
    ("minimum", lambda x, y: x.minimum(y), (OG, G)),
    ("max_other", lambda x, y: x.max(y), (OG, G)),
    ("min_other", lambda x, y: x.min(y), (OG, G)),
    ("where", lambda c, x, y: lib(x).where(c, x, y), (B, R, R)),
    ("where_method", lambda c, x, y: x.where(c, y), (B, R, R)),
    ("where_scalar_other", lambda c, x: lib(x).where(c, x, 0.5), (B, R)),
    ("where_scalar_input", lambda c, y: lib(y).where(c, -2.0, y), (B, R)),
    ("where_from_comparison", lambda x, y: lib(x).where(x > y, x * y, y), (OG, G)),
    ("masked_fill", lambda x, m: x.masked_fill(m, -1.5), (R, B)),
    ("masked_fill_from_comparison", lambda x: x.masked_fill(x > 0, 0.0), (NZ,)),
    ("composite", lambda x, y: ((x * y).tanh() + x.exp() / 3) ** 2 - y.sigmoid(), (R, R)),
]


@pytest.mark.parametrize("fn, domains", params(ELEMENTWISE))
@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_gradcheck(device, fn, domains, data, seed):
    shapes = data.draw(broadcastable(len(domains)), label="shapes")
    rng = np.random.default_rng(seed)
    arrays = [sample(rng, s, d) for s, d in zip(shapes, domains)]
    assert_gradcheck(fn, arrays, device)


# composite: a chain of float32 ops reaching ~50 before cancelling down to ~1 (exp(x)**2 -
# ...): one ulp of the large intermediate terms is ~4e-6, beyond the per-op tolerance.
# gelu_tanh: near x = -5 the gradient (about -1e-6) hangs on whether tanh(u) rounds to -1 or
# to the float32 below it; PyTorch's tanh says -1 (gradient 0), ours is correctly rounded
# (gradient -1.04e-6, the float64 value), which the random weights of the check scale up.
F32_TOL = {"composite": dict(rtol=1e-5, atol=1e-5), "gelu_tanh": dict(rtol=1e-6, atol=5e-6)}


@needs_torch
@DTYPES
@pytest.mark.parametrize("name, fn, domains", [pytest.param(*r, id=r[0]) for r in ELEMENTWISE])
@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_matches_torch(device, name, fn, domains, dtype, data, seed):
    shapes = data.draw(broadcastable(len(domains)), label="shapes")
    rng = np.random.default_rng(seed)
    arrays = [sample(rng, s, d) for s, d in zip(shapes, domains)]
    arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]
    tol = F32_TOL.get(name, {}) if dtype == np.float32 else {}
    assert_parity(fn, arrays, device, seed=seed, **tol)


# The function forms mg.<name>(x) against torch.<name>(x).
FUNCTION_FORMS = ["neg", "exp", "log", "sqrt", "abs", "tanh", "sigmoid", "relu", "sin", "cos",
                  "erf", "sinh", "cosh", "log1p", "expm1", "floor", "ceil", "trunc", "fix",
                  "round", "frac", "sign"]


@needs_torch
@pytest.mark.parametrize("name", FUNCTION_FORMS)
def test_function_form_matches_torch(device, name):
    x = np.random.default_rng(1).uniform(0.5, 2.0, (3, 4))
    assert_parity(lambda t: getattr(lib(t), name)(t), [x], device)


# --- exact PyTorch semantics at special points (subgradients, 0 ** y, ...) ----------------------

def f64(values):
    return np.array(values, dtype=np.float64)


SPECIAL = [
    ("relu_at_0", lambda x: x.relu(), [f64([-1.0, 0.0, 0.0, 2.0])]),
    ("abs_at_0", lambda x: x.abs(), [f64([-1.0, 0.0, -0.0, 2.0])]),
    ("maximum_ties", lambda x, y: x.maximum(y), [f64([1.0, 2.0, 3.0]), f64([1.0, 3.0, 3.0])]),
    ("minimum_ties", lambda x, y: x.minimum(y), [f64([1.0, 2.0, 3.0]), f64([1.0, 3.0, 3.0])]),
    ("maximum_ties_broadcast", lambda x, y: x.maximum(y), [f64([[1.0, 2.0], [2.0, 0.0]]),
                                                           f64([2.0])]),
    ("max_other_ties", lambda x, y: x.max(y), [f64([1.0, 2.0]), f64([1.0, 1.0])]),
    ("clamp_at_bounds", lambda x: x.clamp(-1.0, 1.0), [f64([-2.0, -1.0, 0.0, 1.0, 2.0])]),
    ("clamp_min_at_bound", lambda x: x.clamp(min=0.0), [f64([-1.0, 0.0, 1.0])]),
    ("clamp_max_at_bound", lambda x: x.clamp(max=0.0), [f64([-1.0, 0.0, 1.0])]),
    ("clamp_min_above_max", lambda x: x.clamp(1.0, -1.0), [f64([-2.0, 0.0, 2.0])]),
    ("pow_2_at_0", lambda x: x ** 2, [f64([0.0, -1.0])]),
    ("pow_0_at_0", lambda x: x ** 0, [f64([0.0, -1.0])]),
    ("pow_1.7_at_0", lambda x: x ** 1.7, [f64([0.0, 1.0])]),
    ("pow_0.5_at_0", lambda x: x ** 0.5, [f64([0.0, 4.0])]),
    ("pow_-1_at_0", lambda x: x ** -1, [f64([0.0, 4.0])]),
    ("pow_tensor_zero_base", lambda x, y: x ** y, [f64([0.0, 0.0, 0.0, 2.0]),
                                                   f64([0.0, 2.0, 0.5, 0.0])]),
    ("rpow_0_base", lambda x: 0.0 ** x, [f64([0.0, 1.0, 2.0])]),
    ("sqrt_at_0", lambda x: x.sqrt(), [f64([0.0, 1.0])]),
    ("log_at_0", lambda x: x.log(), [f64([0.0, 1.0])]),
    ("log1p_at_-1_and_tiny", lambda x: x.log1p(), [f64([-1.0, 1e-20, -1e-10, 3.0])]),
    ("expm1_tiny_and_large", lambda x: x.expm1(), [f64([1e-20, -1e-10, 50.0, -50.0])]),
    ("round_halves_to_even", lambda x: x.round(), [f64([0.5, 1.5, 2.5, -0.5, -2.5, 3.7])]),
    ("round_decimals_halves", lambda x: x.round(decimals=1), [f64([0.25, 0.35, -1.25, 12.3456])]),
    ("round_decimals_large", lambda x: x.round(decimals=-2), [f64([1234.5, 150.0, -250.0, 49.9])]),
    ("floor_ceil_trunc_at_integers", lambda x: x.floor() + x.ceil() * 2 + x.trunc() * 3,
     [f64([-2.0, -0.0, 0.0, 1.0, -1.5, 1.5])]),
    ("frac_of_negatives", lambda x: x.frac(), [f64([-1.25, -0.5, 2.75, -3.0])]),
    ("sign_at_0", lambda x: x.sign(), [f64([-2.0, -0.0, 0.0, 3.0])]),
    ("sigmoid_large", lambda x: x.sigmoid(), [f64([-800.0, -30.0, 30.0, 800.0])]),
    ("tanh_large", lambda x: x.tanh(), [f64([-30.0, 30.0])]),
    ("where_same_tensor", lambda c, x: lib(x).where(c, x, x), [np.array([True, False]),
                                                               f64([1.0, 2.0])]),
    ("where_broadcast_cond", lambda c, x, y: lib(x).where(c, x, y),
     [np.array([[True], [False]]), f64([1.0, 2.0, 3.0]), f64([[4.0], [5.0]])]),
    ("masked_fill_tensor_value", lambda x, v: x.masked_fill(x > 0, v), [f64([1.0, -1.0, 2.0]),
                                                                        f64(3.0)]),
    ("masked_fill_broadcast_mask", lambda x, m: x.masked_fill(m, 0.0),
     [f64([[1.0, 2.0], [3.0, 4.0]]), np.array([True, False])]),
]


@needs_torch
@DTYPES
@pytest.mark.parametrize("fn, arrays", params(SPECIAL))
def test_special_points_match_torch(device, fn, arrays, dtype):
    arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]
    with np.errstate(all="ignore"):
        assert_parity(fn, arrays, device)


def test_repeated_input_accumulates(device):
    """d(x * x + x)/dx = 2x + 1 (hand math): both uses of x add up."""
    x = mg.tensor(f64([1.0, -2.0, 3.0]), device=device, requires_grad=True)
    (x * x + x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, -3.0, 7.0])


# --- dtypes: results as PyTorch's promotion rules give them -------------------------------------

def i64(values):
    return np.array(values, dtype=np.int64)


def f32(values):
    return np.array(values, dtype=np.float32)


DTYPE_CASES = [
    ("f32_plus_int_scalar", lambda x: x + 2, [f32([1.0, 2.0])]),
    ("f32_times_float_scalar", lambda x: x * 2.5, [f32([1.0, 2.0])]),
    ("float_scalar_minus_f32", lambda x: 2.5 - x, [f32([1.0, 2.0])]),
    ("float_scalar_over_f32", lambda x: 2.5 / x, [f32([1.0, 2.0])]),
    ("f32_pow_float_scalar", lambda x: x ** 1.5, [f32([1.0, 2.0])]),
    ("float_scalar_pow_f32", lambda x: 1.5 ** x, [f32([1.0, 2.0])]),
    ("f64_plus_float_scalar", lambda x: x + 2.5, [f64([1.0, 2.0])]),
    ("f32_plus_f64", lambda x, y: x + y, [f32([1.0, 2.0]), f64([3.0, 4.0])]),
    ("f64_times_f32", lambda x, y: x * y, [f64([1.0, 2.0]), f32([3.0, 4.0])]),
    ("f32_plus_0d_f64", lambda x, y: x + y, [f32([1.0, 2.0]), f64(3.0)]),
    ("0d_f32_plus_f64", lambda x, y: x + y, [f32(1.0), f64([3.0, 4.0])]),
    ("f32_maximum_f64", lambda x, y: x.maximum(y), [f32([1.0, 5.0]), f64([3.0, 4.0])]),
    ("int_plus_f32", lambda x, y: x + y, [i64([1, 2]), f32([3.0, 4.0])]),
    ("int_plus_0d_f64", lambda x, y: x + y, [i64([1, 2]), f64(3.0)]),
    ("int_over_int", lambda x, y: x / y, [i64([1, 2]), i64([2, 4])]),
    ("int_over_int_scalar", lambda x: x / 2, [i64([1, 3])]),
    ("int_scalar_over_int", lambda x: 3 / x, [i64([1, 2])]),
    ("int_plus_float_scalar", lambda x: x + 2.5, [i64([1, 2])]),
    ("int_times_int_scalar", lambda x: x * 3, [i64([1, 2])]),
    ("int_minus_int", lambda x, y: x - y, [i64([1, 2]), i64([5, 7])]),
    ("int_pow_int_scalar", lambda x: x ** 2, [i64([1, 3])]),
    ("int_pow_float_scalar", lambda x: x ** 0.5, [i64([1, 4])]),
    ("int_scalar_pow_int", lambda x: 2 ** x, [i64([1, 3])]),
    ("int32_plus_int64", lambda x, y: x + y, [np.array([1], np.int32), i64([2])]),
    ("bool_plus_int_scalar", lambda m: m + 1, [np.array([True, False])]),
    ("bool_plus_bool", lambda m, n: m + n, [np.array([True, False]), np.array([True, True])]),
    ("f32_lt_f32", lambda x, y: x < y, [f32([1.0, 2.0]), f32([2.0, 1.0])]),
    ("f32_le_scalar", lambda x: x <= 1.0, [f32([1.0, 2.0])]),
    ("f32_gt_broadcast", lambda x, y: x > y, [f32([[1.0], [2.0]]), f32([1.5, 0.5, 3.0])]),
    ("f64_ge_int", lambda x, y: x >= y, [f64([1.0, 2.0]), i64([2, 2])]),
    ("f32_eq_scalar", lambda x: x == 2, [f32([1.0, 2.0])]),
    ("f32_ne_f64", lambda x, y: x != y, [f32([1.0, 2.0]), f64([1.0, 3.0])]),
    ("scalar_lt_f32", lambda x: 1.5 < x, [f32([1.0, 2.0])]),
    ("exp_f32", lambda x: x.exp(), [f32([1.0, 2.0])]),
    ("where_f32_f64", lambda c, x, y: lib(x).where(c, x, y), [np.array([True, False]),
                                                              f32([1.0, 2.0]), f64([3.0, 4.0])]),
    ("masked_fill_f32", lambda x: x.masked_fill(x > 1, 2.5), [f32([1.0, 2.0])]),
    ("clamp_int", lambda x: x.clamp(0, 2), [i64([-1, 1, 3])]),
    ("clamp_int_float_bound", lambda x: x.clamp(0.5), [i64([-1, 1, 3])]),
    ("clamp_int_float_max", lambda x: x.clamp(max=2.5), [i64([-1, 1, 3])]),
    ("exp_int", lambda x: x.exp(), [i64([1, 2])]),
    ("log_int", lambda x: x.log(), [i64([1, 2])]),
    ("sqrt_int", lambda x: x.sqrt(), [i64([1, 4])]),
    ("sin_int", lambda x: x.sin(), [i64([1, 2])]),
    ("cos_int", lambda x: x.cos(), [i64([1, 2])]),
    ("tanh_int", lambda x: x.tanh(), [i64([1, 2])]),
    ("sigmoid_int", lambda x: x.sigmoid(), [i64([1, 2])]),
    ("erf_int", lambda x: x.erf(), [i64([1, 2])]),
    ("relu_int", lambda x: x.relu(), [i64([-1, 2])]),
    ("maximum_int_f32", lambda x, y: x.maximum(y), [i64([1, 5]), f32([3.0, 4.0])]),
    ("where_int_float_scalar", lambda c, x: lib(x).where(c, x, 0.5), [np.array([True, False]),
                                                                      i64([1, 2])]),
    ("where_int_int_scalar", lambda c, x: lib(x).where(c, x, 2), [np.array([True, False]),
                                                                  i64([1, 2])]),
    ("masked_fill_int_float_value", lambda x: x.masked_fill(x > 1, 2.5), [i64([1, 2])]),
    ("abs_int", lambda x: x.abs(), [i64([-1, 1])]),
    ("neg_int", lambda x: -x, [i64([-1, 1])]),
]


@needs_torch
@pytest.mark.parametrize("fn, arrays", params(DTYPE_CASES))
def test_result_dtype_matches_torch(device, fn, arrays):
    assert_parity(fn, arrays, device)


COMPARISONS = [
    ("lt", lambda x, y: x < y),
    ("le", lambda x, y: x <= y),
    ("gt", lambda x, y: x > y),
    ("ge", lambda x, y: x >= y),
    ("eq", lambda x, y: x == y),
    ("ne", lambda x, y: x != y),
]


@pytest.mark.parametrize("fn", params(COMPARISONS))
def test_comparison_is_bool_without_grad(device, fn):
    x = mg.tensor(f64([[1.0, 2.0, 3.0]]), device=device, requires_grad=True)
    y = mg.tensor(f64([[2.0], [3.0]]), device=device, requires_grad=True)
    for out in (fn(x, y), fn(x, 2.0), fn(2.0, x)):
        assert out.dtype == np.bool_
        assert not out.requires_grad and out.grad_fn is None
    expected = fn(np.array([[1.0, 2.0, 3.0]]), np.array([[2.0], [3.0]]))
    np.testing.assert_array_equal(fn(x, y).numpy(), expected)


# --- errors ------------------------------------------------------------------------------------

BROADCAST_ERRORS = [
    ("add", lambda x, y: x + y),
    ("sub", lambda x, y: x - y),
    ("mul", lambda x, y: x * y),
    ("div", lambda x, y: x / y),
    ("pow", lambda x, y: x ** y),
    ("maximum", lambda x, y: x.maximum(y)),
    ("minimum", lambda x, y: x.minimum(y)),
    ("where", lambda x, y: mg.where(x > 0, x, y)),
]


@pytest.mark.parametrize("op, fn", [pytest.param(r[0], r[1], id=r[0]) for r in BROADCAST_ERRORS])
def test_broadcast_error_names_op_and_shapes(device, op, fn):
    x = mg.ones(2, 3, device=device, requires_grad=True)
    y = mg.ones(4, device=device)
    run_error(lambda: fn(x, y), RuntimeError, [op, "(2, 3)", "(4,)"])


def test_integer_to_negative_integer_power_raises(device):
    """torch: "Integers to negative integer powers are not allowed" (as NumPy)."""
    with pytest.raises((RuntimeError, ValueError)):
        mg.tensor([1, 2], device=device) ** -1


def test_clamp_needs_a_bound(device):
    with pytest.raises((ValueError, TypeError, RuntimeError)):
        mg.ones(3, device=device).clamp()


def test_gelu_rejects_unknown_approximation(device):
    run_error(lambda: mg.ones(3, device=device).gelu(approximate="erf"), RuntimeError, ["erf"])


# --- the harness itself can fail ---------------------------------------------------------------

class _WrongSquare(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x  # should be 2 * x


def test_harness_rejects_wrong_gradient(device):
    x = mg.tensor(f64([1.0, 2.0]), device=device, requires_grad=True)
    with pytest.raises(mg.autograd.GradcheckError):
        mg.autograd.gradcheck(_WrongSquare.apply, [x])


@needs_torch
def test_harness_rejects_wrong_value(device):
    off_by_ulps = (lambda t: t * 2.0, lambda t: t * (2.0 + 1e-9))
    with pytest.raises(AssertionError):
        assert_parity(off_by_ulps, [f64([1.0, 2.0])], device)
