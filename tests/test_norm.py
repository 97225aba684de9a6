"""Tensor.norm / mg.norm against torch.Tensor.norm: every order, dims, keepdim, zeros (where
a local derivative is infinite and PyTorch's gradient is 0), gradcheck and the errors."""
import math

import numpy as np
import pytest

import minigrad as mg
from tests.test_ops_elementwise import assert_gradcheck, assert_parity, needs_torch, sample

INF = math.inf
ORDERS = ["fro", 2, 1, 3, 0.5, INF, -INF, -1, -2.5]
CASES = [((4,), None), ((3, 4), None), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), (0, 2)),
         ((2, 3, 4), [-1, 0]), ((2, 3, 4), 1), ((), None), ((5,), 0)]


def norm_of(p, dim, keepdim):
    return lambda x: x.norm(p, dim, keepdim)


def with_zeros(rng, shape):
    """Values with exact zeros, and one slice entirely zero (a zero norm)."""
    x = sample(rng, shape, "nonzero")
    if x.ndim:
        x[x > 1.4] = 0.0
        x[(0,) * (x.ndim - 1)] = 0.0
    return x


@needs_torch
@pytest.mark.parametrize("p", ORDERS, ids=str)
@pytest.mark.parametrize("shape, dim", CASES, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_matches_torch(device, p, shape, dim, keepdim):
    rng = np.random.default_rng(0)
    fn = norm_of(p, dim, keepdim)
    for x in (sample(rng, shape, "nonzero"), with_zeros(rng, shape)):
        assert_parity(fn, [x], device)
        assert_parity(fn, [x.astype(np.float32)], device)


@pytest.mark.parametrize("p", ["fro", 1, 3, 0.5, INF, -INF, -1], ids=str)
@pytest.mark.parametrize("shape, dim", CASES[:6], ids=str)
def test_gradcheck(device, p, shape, dim):
    extreme = p in (INF, -INF)  # amax/amin: a kink at ties, none with distinct values
    x = sample(np.random.default_rng(1), shape, "distinct" if extreme else "nonzero")
    assert_gradcheck(norm_of(p, dim, False), [x], device, second_order=not extreme)


def test_zero_norm_has_torchs_zero_gradient(device):
    for p in ("fro", 3, 0.5, -1):
        x = mg.zeros(2, 3, dtype=mg.float64, requires_grad=True, device=device)
        x.norm(p, dim=1).sum().backward()
        assert not np.isnan(x.grad.numpy()).any() and (x.grad.numpy() == 0).all(), p


@needs_torch
def test_order_zero_counts_nonzeros_and_takes_no_gradient(device):
    from tests.torch_ref import torch
    a = np.array([[0.0, 2.0, -1.0], [0.0, 0.0, 3.0]])
    x, xt = mg.tensor(a, requires_grad=True, device=device), torch.tensor(a, requires_grad=True)
    ours, theirs = x.norm(0, dim=1), xt.norm(0, dim=1)
    np.testing.assert_array_equal(ours.numpy(), theirs.detach().numpy())
    assert ours.requires_grad and theirs.requires_grad  # recorded, with no gradient:
    ours.sum().backward()
    theirs.sum().backward()
    assert x.grad is None and xt.grad is None


def test_function_form_and_dtype(device):
    x = mg.tensor([[3.0, 4.0]], device=device)
    assert mg.norm(x).item() == 5.0
    assert x.norm(dtype=mg.float64).dtype == mg.float64


@pytest.mark.parametrize("call, fragment", [
    (lambda x: x.long().norm(), "floating point"),
    (lambda x: x.norm("nuc"), "'nuc' is not supported"),
    (lambda x: x.norm("abc"), "'abc' is not supported"),
    (lambda x: x.norm("fro", dim=(0, 1, 2)), "at most 2 dims"),
    (lambda x: x.norm(2, dim=3), "out of range"),
])
def test_errors_name_the_argument(device, call, fragment):
    x = mg.ones(2, 3, 4, device=device)
    with pytest.raises((RuntimeError, IndexError), match=fragment):
        call(x)
