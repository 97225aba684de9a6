"""matmul / @: PyTorch's rules for 1-D operands (a dim added and then removed), batched
products, and broadcasting of batch dims (whose gradients must be summed back)."""
import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import minigrad as mg
from tests.test_ops_elementwise import (DTYPES, SEEDS, SETTINGS, assert_gradcheck,
                                        assert_parity, lib, params, run_error, sample)
from tests.torch_ref import needs_torch, torch

# (id, shape of a, shape of b)
SHAPES = [
    ("1d@1d", (3,), (3,)),
    ("1d@2d", (3,), (3, 4)),
    ("2d@1d", (2, 3), (3,)),
    ("2d@2d", (2, 3), (3, 4)),
    ("1x1@1x1", (1, 1), (1, 1)),
    ("row@col", (1, 4), (4, 1)),
    ("col@row", (4, 1), (1, 3)),
    ("3d@3d", (2, 2, 3), (2, 3, 4)),
    ("3d@2d", (2, 2, 3), (3, 4)),
    ("2d@3d", (3, 4), (2, 4, 5)),
    ("1d@3d", (4,), (2, 4, 5)),
    ("3d@1d", (2, 3, 4), (4,)),
    ("4d@4d", (2, 3, 2, 4), (2, 3, 4, 2)),
    ("4d@1d", (2, 1, 2, 3), (3,)),
    ("1d@4d", (3,), (1, 2, 3, 2)),
    ("broadcast_4d@3d", (2, 1, 3, 4), (5, 4, 2)),
    ("broadcast_size1_batch", (1, 3, 4), (2, 4, 5)),
    ("broadcast_both_ways", (2, 1, 2, 3), (1, 3, 3, 2)),
    ("broadcast_2d@4d", (3, 4), (2, 2, 4, 5)),
]
FORMS = [
    ("operator", lambda a, b: a @ b),
    ("method", lambda a, b: a.matmul(b)),
    ("function", lambda a, b: lib(a).matmul(a, b)),
]
CASES = [(f"{name}-{form}", a, b, fn) for name, a, b in SHAPES for form, fn in FORMS]


def _inputs(shape_a, shape_b, seed=0):
    rng = np.random.default_rng(seed)
    return [sample(rng, shape_a), sample(rng, shape_b)]


@pytest.mark.parametrize("shape_a, shape_b, fn", params(CASES))
def test_gradcheck(device, shape_a, shape_b, fn):
    assert_gradcheck(fn, _inputs(shape_a, shape_b), device)


@needs_torch
@DTYPES
@pytest.mark.parametrize("shape_a, shape_b, fn", params(CASES))
def test_matches_torch(device, shape_a, shape_b, fn, dtype):
    assert_parity(fn, [x.astype(dtype) for x in _inputs(shape_a, shape_b)], device)


@st.composite
def matmul_shapes(draw):
    """Shapes of a and b for a @ b: batch dims that broadcast, and 1-D operands."""
    batch_a, batch_b = draw(mutually_broadcastable_shapes(
        num_shapes=2, min_dims=0, max_dims=2, min_side=1, max_side=3)).input_shapes
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    a = (k,) if not batch_a and draw(st.booleans()) else batch_a + (m, k)
    b = (k,) if not batch_b and draw(st.booleans()) else batch_b + (k, n)
    return a, b


@SETTINGS
@given(shapes=matmul_shapes(), seed=SEEDS)
def test_matmul_over_drawn_shapes(device, shapes, seed):
    arrays = _inputs(*shapes, seed=seed)
    assert_gradcheck(lambda a, b: a @ b, arrays, device)
    if torch is not None:
        assert_parity(lambda a, b: a @ b, arrays, device, seed=seed)
        assert_parity(lambda a, b: a @ b, [x.astype(np.float32) for x in arrays], device,
                      seed=seed)


@pytest.mark.parametrize("shape_a, shape_b", params(SHAPES))
def test_values_match_numpy(device, shape_a, shape_b):
    """np.matmul follows the same 1-D and broadcasting rules: an independent reference."""
    x, y = _inputs(shape_a, shape_b)
    out = mg.tensor(x, device=device) @ mg.tensor(y, device=device)
    assert out.shape == np.matmul(x, y).shape
    np.testing.assert_allclose(out.numpy(), np.matmul(x, y), rtol=1e-13, atol=1e-13)


def test_broadcast_batch_gradient_by_hand(device):
    """a (2, 1, 1, 1) @ b (3, 1, 1) is (2, 3, 1, 1): every a[i] meets all three b[j], so
    da[i] = sum_j b[j] and db[j] = sum_i a[i]."""
    a = mg.tensor(np.array([1.0, 2.0]).reshape(2, 1, 1, 1), device=device, requires_grad=True)
    b = mg.tensor(np.array([3.0, 4.0, 5.0]).reshape(3, 1, 1), device=device, requires_grad=True)
    (a @ b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy().ravel(), [12.0, 12.0])
    np.testing.assert_array_equal(b.grad.numpy().ravel(), [3.0, 3.0, 3.0])


def test_ndarray_on_the_left(device):
    x = np.arange(6.0).reshape(2, 3)
    t = mg.tensor(np.ones((3, 2)), device=device, requires_grad=True)
    out = x @ t
    assert isinstance(out, mg.Tensor)
    np.testing.assert_array_equal(out.numpy(), x @ np.ones((3, 2)))
    out.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), x.sum(0)[:, None].repeat(2, 1))


@needs_torch
@pytest.mark.parametrize("a, b", params([
    ("f32", np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)),
    ("int64", np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2)),
    ("1d_f32", np.ones(3, np.float32), np.ones(3, np.float32)),
]))
def test_result_dtype_matches_torch(device, a, b):
    assert_parity(lambda x, y: x @ y, [a, b], device)


ERRORS = [
    ("2d@2d", (2, 3), (4, 5)),
    ("1d@1d", (3,), (4,)),
    ("2d@1d", (2, 3), (4,)),
    ("1d@2d", (3,), (4, 5)),
    ("3d@3d_inner", (2, 2, 3), (2, 4, 5)),
    ("batch_mismatch", (2, 2, 3), (3, 3, 5)),
    ("0d@1d", (), (3,)),
    ("1d@0d", (3,), ()),
]


@pytest.mark.parametrize("shape_a, shape_b", params(ERRORS))
def test_shape_error_names_matmul_and_shapes(device, shape_a, shape_b):
    ones = functools.partial(mg.ones, device=device, requires_grad=True)
    a, b = ones(shape_a), ones(shape_b)
    run_error(lambda: a @ b, RuntimeError, ["matmul", str(shape_a), str(shape_b)])


def test_dtype_mismatch_names_matmul_and_dtypes(device):
    """torch refuses float32 @ float64 (no promotion in matmul)."""
    a = mg.ones(2, 3, device=device)
    b = mg.ones(3, 2, dtype=mg.float64, device=device)
    run_error(lambda: a @ b, RuntimeError, ["matmul", "float32", "float64"])
