"""nn.functional.cross_entropy and mse_loss against torch.nn.functional.

cross_entropy is swept over every combination of input shape ((N, C), (N, C, d1),
(N, C, d1, d2), (C,)), target kind (class indices, some of them ignored, all ignored,
class probabilities), class weights, reduction and label smoothing: the loss and the
gradients (of the logits, and of probability targets) equal torch's in float32 and float64,
and finite differences in float64. Extreme logits (+-1e4) keep everything finite.
"""
import itertools
import zlib

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from tests.torch_ref import needs_torch, torch

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
TOL = {np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6),
       np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12)}
C = 4
SHAPES = {"NC": (5, C), "NCd": (3, C, 2), "NCdd": (2, C, 2, 3), "C": (C,)}
# smaller shapes for finite differences (two forward passes per logit)
GRAD_SHAPES = {"NC": (3, C), "NCd": (2, C, 2), "NCdd": (1, C, 2, 2), "C": (C,)}
IGNORED_CLASS = 2
# target kind -> ignore_index passed (None: the default, -100)
TARGETS = {"index": None, "ignore_default": None, "ignore_class": IGNORED_CLASS,
           "all_ignored": IGNORED_CLASS, "probs": None}
WEIGHTS = ["none", "weight"]
REDUCTIONS = ["mean", "sum", "none"]
SMOOTHINGS = [0.0, 0.1, 0.5]


def make_case(shape, kind, weighted, rng, scale=2.0):
    """Logits, target and class weights (numpy) for one case."""
    logits = rng.standard_normal(shape) * scale
    class_dim = 0 if len(shape) == 1 else 1
    target_shape = shape[:class_dim] + shape[class_dim + 1:]
    if kind == "probs":
        p = np.exp(rng.standard_normal(shape))
        target = p / p.sum(class_dim, keepdims=True)
    else:
        target = rng.integers(0, C, size=target_shape)
        flat = target.reshape(-1)
        if kind == "ignore_default":
            flat[0] = -100
            if flat.size > 1:
                flat[1] = 1  # at least one target counts
        elif kind == "ignore_class":
            flat[0] = IGNORED_CLASS
            if flat.size > 1:
                flat[1] = 3
        elif kind == "all_ignored":
            flat[:] = IGNORED_CLASS
        target = flat.reshape(target_shape)
    weight = rng.uniform(0.5, 2.0, size=C) if weighted == "weight" else None
    return logits, target, weight


def kwargs_for(kind, reduction, smoothing):
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    if TARGETS[kind] is not None:
        kw["ignore_index"] = TARGETS[kind]
    return kw


def case_id(shape_name, kind, weighted, reduction, smoothing):
    return f"{shape_name}-{kind}-{weighted}-{reduction}-ls{smoothing}"


# a (C,) input has a 0-d target: ignoring it ignores everything (the all_ignored case)
COMBOS = [pytest.param(s, k, w, r, ls, id=case_id(s, k, w, r, ls))
          for s, k, w, r, ls in itertools.product(SHAPES, TARGETS, WEIGHTS, REDUCTIONS,
                                                  SMOOTHINGS)
          if not (s == "C" and k.startswith("ignore_"))]


def ours_and_theirs(logits, target, weight, dtype, device):
    """minigrad and torch tensors for one case (logits and probability targets need grad)."""
    probs = target.dtype.kind == "f"
    x = mg.tensor(logits.astype(dtype), device=device, requires_grad=True)
    t = mg.tensor(target.astype(dtype) if probs else target, device=device, requires_grad=probs)
    w = None if weight is None else mg.tensor(weight.astype(dtype), device=device)
    tx = torch.tensor(logits.astype(dtype), requires_grad=True)
    tt = torch.tensor(target.astype(dtype) if probs else target, requires_grad=probs)
    tw = None if weight is None else torch.tensor(weight.astype(dtype))
    return (x, t, w), (tx, tt, tw)


def assert_close(ours, theirs, dtype, what):
    np.testing.assert_allclose(ours, theirs, err_msg=what, equal_nan=True,
                               **TOL[np.dtype(dtype)])


def check_against_torch(logits, target, weight, kw, dtype, device, tol_dtype=None):
    (x, t, w), (tx, tt, tw) = ours_and_theirs(logits, target, weight, dtype, device)
    loss = F.cross_entropy(x, t, weight=w, **kw)
    ref = torch.nn.functional.cross_entropy(tx, tt, weight=tw, **kw)
    assert loss.shape == tuple(ref.shape) and loss.dtype == dtype
    tol_dtype = dtype if tol_dtype is None else tol_dtype
    assert_close(loss.numpy(), ref.detach().numpy(), tol_dtype, "loss")
    g = np.random.default_rng(5).standard_normal(loss.shape).astype(dtype)
    (loss * mg.tensor(g, device=device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    assert_close(x.grad.numpy(), tx.grad.numpy(), tol_dtype, "input grad")
    if t.requires_grad:
        assert_close(t.grad.numpy(), tt.grad.numpy(), tol_dtype, "target grad")
    return loss, x


@needs_torch
@DTYPES
@pytest.mark.parametrize("shape_name, kind, weighted, reduction, smoothing", COMBOS)
def test_cross_entropy_matches_torch(shape_name, kind, weighted, reduction, smoothing, dtype,
                                     device):
    rng = np.random.default_rng(zlib.crc32(f"{shape_name}{kind}{weighted}".encode()))
    logits, target, weight = make_case(SHAPES[shape_name], kind, weighted, rng)
    check_against_torch(logits, target, weight, kwargs_for(kind, reduction, smoothing),
                        dtype, device)


@pytest.mark.parametrize("shape_name, kind, weighted, reduction, smoothing", COMBOS)
def test_cross_entropy_gradcheck(shape_name, kind, weighted, reduction, smoothing, device):
    if kind == "all_ignored" and reduction == "mean":
        pytest.skip("0 / 0: the loss is NaN, as torch's (see test_all_targets_ignored)")
    rng = np.random.default_rng(7)
    logits, target, weight = make_case(GRAD_SHAPES[shape_name], kind, weighted, rng)
    probs = kind == "probs"
    x = mg.tensor(logits, device=device, requires_grad=True)
    t = mg.tensor(target, device=device, requires_grad=probs)
    w = None if weight is None else mg.tensor(weight, device=device)
    kw = kwargs_for(kind, reduction, smoothing)
    assert mg.autograd.gradcheck(lambda x, t: F.cross_entropy(x, t, weight=w, **kw), [x, t])


# --- by hand -------------------------------------------------------------------------------

def test_cross_entropy_by_hand(device):
    # logits (0, ln 3) -> p = (1/4, 3/4); -log p[1] = log(4/3), -log p[0] = log 4
    x = mg.tensor([[0.0, np.log(3.0)], [0.0, np.log(3.0)]], dtype=mg.float64, device=device,
                  requires_grad=True)
    target = mg.tensor([1, 0], device=device)
    loss = F.cross_entropy(x, target)
    np.testing.assert_allclose(loss.item(), (np.log(4 / 3) + np.log(4)) / 2, rtol=1e-12)
    loss.backward()  # (softmax - onehot) / N
    np.testing.assert_allclose(x.grad.numpy(), [[0.125, -0.125], [-0.375, 0.375]], rtol=1e-12)
    # label smoothing e: (1 - e) nll + e * mean over classes of -log p
    smooth = F.cross_entropy(x, target, reduction="none", label_smoothing=0.2).numpy()
    uniform = (np.log(4) + np.log(4 / 3)) / 2
    np.testing.assert_allclose(smooth, [0.8 * np.log(4 / 3) + 0.2 * uniform,
                                        0.8 * np.log(4) + 0.2 * uniform], rtol=1e-12)


@pytest.mark.parametrize("shape", [(2, C, 3), (2, C, 2, 3), (1, C, 3, 1, 2)], ids=str)
def test_cross_entropy_spatial_dims_pick_the_right_class(shape, device):
    # a numpy reference: -log_softmax over dim 1, read at each position's target class
    rng = np.random.default_rng(17)
    logits = rng.standard_normal(shape)
    target = rng.integers(0, C, size=(shape[0],) + shape[2:])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    expected = -np.take_along_axis(logp, target[:, None], axis=1)[:, 0]
    loss = F.cross_entropy(mg.tensor(logits, device=device), mg.tensor(target, device=device),
                           reduction="none")
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-12)


def test_cross_entropy_weighted_mean_divides_by_the_summed_weights(device):
    x = mg.tensor([[0.0, np.log(3.0)], [0.0, np.log(3.0)]], dtype=mg.float64, device=device)
    w = mg.tensor([1.0, 3.0], dtype=mg.float64, device=device)
    loss = F.cross_entropy(x, mg.tensor([1, 0], device=device), weight=w)
    np.testing.assert_allclose(loss.item(), (3 * np.log(4 / 3) + np.log(4)) / 4, rtol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_all_targets_ignored(reduction, device):
    x = mg.randn(3, 4, device=device, requires_grad=True)
    loss = F.cross_entropy(x, mg.tensor([-100, -100, -100], device=device),
                           reduction=reduction, label_smoothing=0.1)
    if reduction == "mean":
        assert np.isnan(loss.item())  # 0 / 0, as torch
    else:
        np.testing.assert_array_equal(loss.numpy(), np.zeros(loss.shape))
    # no target counts, so no logit gets a gradient (torch's gradient is zero, even when
    # the mean is NaN: a batch of padding must not poison the weights)
    loss.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((3, 4)))


# --- extreme logits -------------------------------------------------------------------------

EXTREME = [pytest.param(k, r, ls, id=f"{k}-{r}-ls{ls}")
           for k, r, ls in itertools.product(["index", "ignore_class", "probs"], REDUCTIONS,
                                             SMOOTHINGS)]


@DTYPES
@pytest.mark.parametrize("kind, reduction, smoothing", EXTREME)
def test_extreme_logits_stay_finite(kind, reduction, smoothing, dtype, device):
    rng = np.random.default_rng(11)
    logits, target, weight = make_case((6, C, 2), kind, "weight", rng)
    logits = np.where(rng.random(logits.shape) < 0.5, -1e4, 1e4) + logits
    x = mg.tensor(logits.astype(dtype), device=device, requires_grad=True)
    t = mg.tensor(target.astype(dtype) if kind == "probs" else target, device=device)
    w = mg.tensor(weight.astype(dtype), device=device)
    kw = kwargs_for(kind, reduction, smoothing)
    loss = F.cross_entropy(x, t, weight=w, **kw)
    loss.sum().backward()
    assert np.isfinite(loss.numpy()).all()
    assert np.isfinite(x.grad.numpy()).all()
    if torch is not None:
        check_against_torch(logits, target, weight, kw, dtype, device)


@needs_torch
def test_one_hot_logits_of_1e4_match_torch_exactly_enough(device):
    # the target's logit is 2e4 below the best: p = exp(-2e4) underflows, -log p must not
    logits = np.array([[1e4, -1e4, 0.0], [-1e4, 1e4, 1e4]])
    check_against_torch(logits, np.array([1, 0]), None, dict(label_smoothing=0.1),
                        np.float32, device)


# --- errors ----------------------------------------------------------------------------------

def test_cross_entropy_errors(device):
    x = mg.randn(3, 4, device=device)
    with pytest.raises(ValueError):
        F.cross_entropy(x, mg.tensor([0, 1, 2], device=device), reduction="avg")
    with pytest.raises(mg.ShapeError):
        F.cross_entropy(x, mg.tensor([0, 1], device=device))
    with pytest.raises(mg.ShapeError):
        F.cross_entropy(x, mg.rand(3, 5, device=device))


# --- mse_loss --------------------------------------------------------------------------------

MSE_SHAPES = [(), (5,), (3, 4), (2, 3, 4)]


@needs_torch
@DTYPES
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", MSE_SHAPES, ids=str)
def test_mse_loss_matches_torch(shape, reduction, dtype, device):
    rng = np.random.default_rng(13)
    a, b = rng.standard_normal(shape).astype(dtype), rng.standard_normal(shape).astype(dtype)
    x = mg.tensor(a, device=device, requires_grad=True)
    y = mg.tensor(b, device=device, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    loss = F.mse_loss(x, y, reduction=reduction)
    ref = torch.nn.functional.mse_loss(tx, ty, reduction=reduction)
    assert loss.shape == tuple(ref.shape) and loss.dtype == dtype
    assert_close(loss.numpy(), ref.detach().numpy(), dtype, "loss")
    g = rng.standard_normal(loss.shape).astype(dtype)
    (loss * mg.tensor(g, device=device)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    assert_close(x.grad.numpy(), tx.grad.numpy(), dtype, "input grad")
    assert_close(y.grad.numpy(), ty.grad.numpy(), dtype, "target grad")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss_by_hand_and_gradcheck(reduction, device):
    x = mg.tensor([1.0, 2.0, 4.0], dtype=mg.float64, device=device, requires_grad=True)
    y = mg.tensor([0.0, 2.0, 1.0], dtype=mg.float64, device=device, requires_grad=True)
    expected = {"mean": 10.0 / 3, "sum": 10.0, "none": [1.0, 0.0, 9.0]}[reduction]
    np.testing.assert_allclose(F.mse_loss(x, y, reduction=reduction).numpy(), expected)
    assert mg.autograd.gradcheck(lambda x, y: F.mse_loss(x, y, reduction=reduction), [x, y])


def test_mse_loss_rejects_unknown_reduction(device):
    x = mg.randn(3, device=device)
    with pytest.raises(ValueError):
        F.mse_loss(x, x, reduction="avg")
