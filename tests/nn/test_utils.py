"""nn.utils.clip_grad_norm_ and clip_grad_value_ against torch.nn.utils: the total norm
(its value and dtype), the clipped gradients, inf and other p-norms, None gradients,
the no-op below max_norm and error_if_nonfinite. "Parameters" are plain leaf tensors with
``.grad`` set by hand. And nn.utils.evaluating: eval mode without grad, flags restored."""
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import minigrad as mg
from minigrad import nn
from minigrad.nn.utils import clip_grad_norm_, clip_grad_value_, evaluating
from tests.torch_ref import needs_torch, torch

F32, F64 = np.float32, np.float64


def make_params(grads, device):
    """minigrad leaves with ``.grad`` = each array of ``grads`` (None: no gradient), and,
    with torch installed, torch leaves with the same gradients."""
    ours, theirs = [], []
    for g in grads:
        shape, dtype = ((), F32) if g is None else (g.shape, g.dtype)
        p = mg.zeros(shape, dtype=dtype, device=device, requires_grad=True)
        p.grad = None if g is None else mg.tensor(g, device=device)
        ours.append(p)
        if torch is not None:
            q = torch.zeros(shape, dtype=getattr(torch, np.dtype(dtype).name), requires_grad=True)
            q.grad = None if g is None else torch.tensor(g)
            theirs.append(q)
    return ours, theirs


def randn(*shape, dtype=F32, scale=3.0):
    return (np.random.standard_normal(shape) * scale).astype(dtype)


def assert_grads_equal(ours, theirs, rtol):
    for p, q in zip(ours, theirs):
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            assert p.grad.dtype == np.dtype(str(q.grad.dtype).replace("torch.", ""))
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=rtol, atol=0)


# --- clip_grad_norm_ against PyTorch ------------------------------------------------------

NORM_CASES = [
    # name, gradients, max_norm, norm_type
    ("2-norm clips", lambda: [randn(3, 4), randn(5)], 1.0, 2.0),
    ("2-norm below max is a no-op", lambda: [randn(3, 4), randn(5)], 1e6, 2.0),
    ("int max_norm and norm_type", lambda: [randn(6)], 2, 2),
    ("inf norm", lambda: [randn(3, 4), randn(5)], 0.5, math.inf),
    ("'inf' as a string", lambda: [randn(4, 2), randn(3)], 0.5, "inf"),
    ("-inf norm", lambda: [randn(4) + 10, randn(3) - 10], 1.0, -math.inf),
    ("1-norm", lambda: [randn(3, 4), randn(5)], 2.0, 1.0),
    ("3-norm", lambda: [randn(3, 4), randn(5)], 2.0, 3.0),
    ("0.5-norm", lambda: [randn(3, 4), randn(5)], 2.0, 0.5),
    ("0-norm counts nonzero norms", lambda: [randn(3), np.zeros(2, F32), randn(2)], 1.0, 0.0),
    ("float64", lambda: [randn(3, 4, dtype=F64), randn(5, dtype=F64)], 1.0, 2.0),
    ("float32 and float64", lambda: [randn(3, 4), randn(5, dtype=F64)], 1.0, 2.0),
    ("None grads skipped", lambda: [None, randn(3, 4), None, randn(2)], 1.0, 2.0),
    ("only None grads", lambda: [None, None], 1.0, 2.0),
    ("0-d grads", lambda: [np.array(3.0, F32), np.array(-4.0, F32)], 1.0, 2.0),
    ("an empty grad", lambda: [np.zeros((0, 3), F32), randn(4)], 1.0, 2.0),
    ("all-zero grads", lambda: [np.zeros(4, F32)], 1.0, 2.0),
    ("one large grad", lambda: [randn(257, 33)], 5.0, 2.0),
    ("max_norm 0 zeroes", lambda: [randn(3)], 0.0, 2.0),
]


@needs_torch
@pytest.mark.parametrize("name, grads, max_norm, norm_type", NORM_CASES,
                         ids=[c[0] for c in NORM_CASES])
def test_clip_grad_norm_matches_torch(device, name, grads, max_norm, norm_type):
    ours, theirs = make_params(grads(), device)
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    assert isinstance(total, mg.Tensor) and total.shape == () and not total.requires_grad
    assert total.dtype == np.dtype(str(expected.dtype).replace("torch.", ""))
    np.testing.assert_allclose(total.numpy(), expected.numpy(), rtol=1e-6, atol=0)
    assert_grads_equal(ours, theirs, rtol=1e-6)


@needs_torch
@pytest.mark.parametrize("max_norm", [1.0, 0.3, 0.017473736868434217, 0.0648074037018509])
def test_clip_coefficient_rounds_as_torch(device, max_norm):
    # the total norm is exactly 5, so the coefficient alone decides the bits: PyTorch computes
    # reciprocal(5 + 1e-6) * max_norm, which for the last two differs from max_norm / (5 + 1e-6)
    grads = [np.array([3.0, 4.0, 0.0], F32), np.array([[0.0]], F32)]
    ours, theirs = make_params(grads, device)
    clip_grad_norm_(ours, max_norm)
    torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


@needs_torch
@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shapes=st.lists(st.lists(st.integers(0, 5), max_size=3), min_size=1, max_size=4),
       max_norm=st.floats(0.01, 100.0), norm_type=st.sampled_from([1.0, 2.0, 2.5, math.inf]),
       seed=st.integers(0, 2**16))
def test_clip_grad_norm_over_drawn_shapes(shapes, max_norm, norm_type, seed, device):
    rng = np.random.default_rng(seed)
    grads = [rng.standard_normal(s).astype(F32) * 2 for s in shapes]
    if norm_type == math.inf and any(g.size == 0 for g in grads):
        grads = [g for g in grads if g.size] or [np.ones(1, F32)]
    ours, theirs = make_params(grads, device)
    total = clip_grad_norm_(ours, max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    np.testing.assert_allclose(total.numpy(), expected.numpy(), rtol=1e-5, atol=1e-7)
    for p, q in zip(ours, theirs):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)


# --- clip_grad_norm_ semantics ------------------------------------------------------------

def test_below_max_norm_leaves_grads_bit_identical(device):
    g = randn(4, 5)
    (p,), _ = make_params([g], device)
    total = clip_grad_norm_([p], max_norm=1e3)
    np.testing.assert_array_equal(p.grad.numpy(), g)
    np.testing.assert_allclose(total.item(), np.linalg.norm(g.astype(F64)), rtol=1e-6)


def test_clipped_norm_is_max_norm_and_in_place(device):
    ps, _ = make_params([randn(3, 4), randn(7)], device)
    arrays = [p.grad.array for p in ps]
    clip_grad_norm_(ps, 1.0)
    assert all(p.grad.array is a for p, a in zip(ps, arrays))  # same arrays, changed in place
    assert all(p.grad.dtype == F32 for p in ps)
    after = math.sqrt(sum(float((p.grad.numpy().astype(F64) ** 2).sum()) for p in ps))
    assert after == pytest.approx(1.0, rel=1e-5)


def test_single_tensor_and_generator(device):
    (p,), _ = make_params([np.array([3.0, 4.0], F32)], device)
    assert clip_grad_norm_(p, 1.0).item() == pytest.approx(5.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    ps, _ = make_params([np.array([6.0, 8.0], F32)], device)
    assert clip_grad_norm_((q for q in ps), 1.0).item() == pytest.approx(10.0)
    np.testing.assert_allclose(ps[0].grad.numpy(), [0.6, 0.8], rtol=1e-5)


def test_total_norm_lives_on_the_grads_device(device):
    ps, _ = make_params([randn(3)], device)
    assert clip_grad_norm_(ps, 1.0).device.type == mg.Device(device).type


def test_no_grads_gives_zero():
    total = clip_grad_norm_([], 1.0)
    assert total.dtype == F32 and total.shape == () and total.item() == 0.0
    with pytest.warns(UserWarning, match="empty generator"):
        clip_grad_norm_((p for p in []), 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clip_grad_norm_([], 1.0)  # an empty list is not worth a warning


NONFINITE = [
    ("nan", np.array([1.0, np.nan], F32), 2.0),
    ("inf", np.array([1.0, np.inf], F32), 2.0),
    ("inf, inf norm", np.array([1.0, -np.inf], F32), math.inf),
]


@pytest.mark.parametrize("name, bad, norm_type", NONFINITE, ids=[c[0] for c in NONFINITE])
def test_error_if_nonfinite(device, name, bad, norm_type):
    ps, _ = make_params([randn(3), bad], device)
    before = [p.grad.numpy().copy() for p in ps]
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(ps, 1.0, norm_type=norm_type, error_if_nonfinite=True)
    for p, b in zip(ps, before):  # nothing was scaled
        np.testing.assert_array_equal(p.grad.numpy(), b)


ZERO_OR_NAN_COEF = NONFINITE + [
    # the coefficient is 0 though the norm is finite: inf * 0 must still give nan
    ("max_norm 0", np.array([1.0, np.inf, -2.0], F32), 2.0, 0.0),
    ("0-norm with inf, max_norm 0", np.array([np.inf, 0.0, -3.0], F32), 0.0, 0.0),
    ("-inf norm with inf, max_norm 0", np.array([np.inf, 0.5], F32), -math.inf, 0.0),
    ("-inf norm with inf", np.array([np.inf, 0.5], F32), -math.inf, 0.1),
]


@needs_torch
@pytest.mark.parametrize("name, bad, norm_type, max_norm",
                         [c + (1.0,) if len(c) == 3 else c for c in ZERO_OR_NAN_COEF],
                         ids=[c[0] for c in ZERO_OR_NAN_COEF])
def test_nonfinite_norm_scales_as_torch_without_the_flag(device, name, bad, norm_type,
                                                         max_norm):
    """torch's results (nan for inf * 0), with no warning from any backend."""
    ours, theirs = make_params([randn(3), bad], device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
    np.testing.assert_array_equal(total.numpy(), expected.numpy())
    for p, q in zip(ours, theirs):  # nan norm: all nan; inf norm: zeros and nan
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


@needs_torch
def test_inf_norm_of_an_empty_grad_raises_as_torch(device):
    ours, theirs = make_params([np.zeros(0, F32)], device)
    with pytest.raises(RuntimeError):
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, norm_type=math.inf)
    with pytest.raises(RuntimeError, match="inf norm"):
        clip_grad_norm_(ours, 1.0, norm_type=math.inf)


# --- clip_grad_value_ -----------------------------------------------------------------------

VALUE_CASES = [
    # name, gradients, clip_value
    ("float32", lambda: [randn(3, 4), randn(5)], 0.5),
    ("float64", lambda: [randn(3, 4, dtype=F64)], 1.0),
    ("int clip_value", lambda: [randn(6)], 1),
    ("None grads skipped", lambda: [None, randn(4), None], 0.1),
    ("nothing to clip", lambda: [randn(4, scale=0.01)], 1.0),
    ("nan and inf", lambda: [np.array([np.nan, np.inf, -np.inf, 0.2], F32)], 1.0),
    ("0-d and empty", lambda: [np.array(-7.0, F32), np.zeros((2, 0), F32)], 2.0),
    ("negative clip_value", lambda: [randn(5)], -0.5),
]


@needs_torch
@pytest.mark.parametrize("name, grads, clip_value", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_clip_grad_value_matches_torch(device, name, grads, clip_value):
    ours, theirs = make_params(grads(), device)
    arrays = [p.grad.array if p.grad is not None else None for p in ours]
    assert clip_grad_value_(ours, clip_value) is None
    torch.nn.utils.clip_grad_value_(theirs, clip_value)
    assert all(a is None or p.grad.array is a for p, a in zip(ours, arrays))  # in place
    for p, q in zip(ours, theirs):
        if p.grad is not None:
            assert p.grad.dtype == q.grad.numpy().dtype
            np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


def test_clip_grad_value_single_tensor_and_generator(device):
    (p,), _ = make_params([np.array([-3.0, 0.5, 3.0], F32)], device)
    clip_grad_value_(p, 1.0)
    np.testing.assert_array_equal(p.grad.numpy(), [-1.0, 0.5, 1.0])
    ps, _ = make_params([np.array([5.0], F32)], device)
    clip_grad_value_((q for q in ps), 2.0)
    np.testing.assert_array_equal(ps[0].grad.numpy(), [2.0])


# --- evaluating ------------------------------------------------------------------------------

def _net(device):
    net = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Sequential(nn.Dropout(0.5)))
    net.to(device)
    net[2].eval()  # a submodule kept in eval mode inside a training model
    return net


def _flags(net):
    return [m.training for m in net.modules()]


def test_evaluating_runs_in_eval_mode_without_grad_and_restores_each_flag(device):
    net = _net(device)
    before = _flags(net)
    assert before == [True, True, True, False, False]
    x = mg.randn(5, 3, device=device)
    with evaluating(net) as model:
        assert model is net and not any(_flags(net)) and not mg.is_grad_enabled()
        out = net(x)
        np.testing.assert_array_equal(out.numpy(), net[0](x).numpy())  # no dropout
        assert not out.requires_grad
    assert _flags(net) == before and mg.is_grad_enabled()


def test_evaluating_restores_after_an_error_and_keeps_an_outer_no_grad(device):
    net = _net(device)
    before = _flags(net)
    with pytest.raises(ValueError, match="inside"):
        with evaluating(net):
            raise ValueError("inside")
    assert _flags(net) == before and mg.is_grad_enabled()
    with mg.no_grad():
        with evaluating(net):
            pass
        assert not mg.is_grad_enabled()
    net.eval()
    with evaluating(net):
        pass
    assert not any(_flags(net))
