"""The losses beyond cross_entropy and mse_loss: nll_loss, l1_loss, smooth_l1_loss,
huber_loss, binary_cross_entropy (with logits too), kl_div, and the loss modules.

Each function is compared with torch.nn.functional on several shapes, reductions and options:
the loss's shape, dtype and values, and the gradients of its floating point inputs, in float64
(to a few ulp) and float32; the differentiable ones are gradchecked in float64. Points where a
loss has a kink (x = y, |x - y| = beta) and the saturated ends of the binary losses are in the
comparisons, since that is where a composite of Tensor ops could part from PyTorch's kernels.
Bad arguments raise what torch raises, in one short line.
"""
import itertools
import warnings
import zlib

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from tests.torch_ref import needs_torch, raises_as_torch, torch

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
TOL = {np.dtype(np.float32): dict(rtol=2e-6, atol=1e-6),
       np.dtype(np.float64): dict(rtol=1e-12, atol=1e-14)}
REDUCTIONS = ["mean", "sum", "none"]
SHAPES = {"N": (5,), "NC": (3, 4), "NCd": (2, 3, 4), "0d": ()}


def rng_for(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def compare(name, arrays, grad_of, dtype, device, kwargs=None, tensors=None, ignore_warnings=True):
    """F.<name>(*arrays, **kwargs, **tensors) in minigrad and in torch: the same shape, dtype
    and values, and the same gradients of ``arrays[i]`` for each i in ``grad_of`` under a
    random upstream gradient. ``tensors`` are keyword arrays (weights) passed as tensors."""
    kwargs, tensors = kwargs or {}, tensors or {}

    def cast(a):
        return a.astype(dtype) if a.dtype.kind == "f" else a

    ours = [mg.tensor(cast(a), device=device, requires_grad=i in grad_of)
            for i, a in enumerate(arrays)]
    theirs = [torch.tensor(cast(a), requires_grad=i in grad_of) for i, a in enumerate(arrays)]
    our_kw = {k: mg.tensor(cast(v), device=device) for k, v in tensors.items()}
    their_kw = {k: torch.tensor(cast(v)) for k, v in tensors.items()}
    with warnings.catch_warnings():
        if ignore_warnings:
            warnings.simplefilter("ignore")
        loss = getattr(F, name)(*ours, **kwargs, **our_kw)
        ref = getattr(torch.nn.functional, name)(*theirs, **kwargs, **their_kw)
    assert loss.shape == tuple(ref.shape)
    assert str(loss.dtype) == str(ref.dtype).replace("torch.", "")
    tol = TOL[np.dtype(dtype)]
    np.testing.assert_allclose(loss.numpy(), ref.detach().numpy(), err_msg=f"{name} value",
                               equal_nan=True, **tol)
    if grad_of:
        g = rng_for(name, loss.shape).standard_normal(loss.shape).astype(loss.numpy().dtype)
        (loss * mg.tensor(g, device=device)).sum().backward()
        (ref * torch.tensor(g)).sum().backward()
        for i in grad_of:
            np.testing.assert_allclose(ours[i].grad.numpy(), theirs[i].grad.numpy(),
                                       err_msg=f"{name} gradient of argument {i}",
                                       equal_nan=True, **tol)
    return loss


def f64(device, array, requires_grad=True):
    return mg.tensor(np.asarray(array, dtype=np.float64), device=device,
                     requires_grad=requires_grad)


# --- regression losses: l1, mse (with weight), smooth_l1, huber --------------------------------

def regression_pair(shape, rng, ties=None):
    """x and y with some exact ties: x = y (the kink of |x - y|), and |x - y| = ``ties``
    (the boundary of smooth_l1 and huber)."""
    x = rng.standard_normal(shape) * 1.5
    y = rng.standard_normal(shape) * 1.5
    if x.size >= 3:
        flat_x, flat_y = x.reshape(-1), y.reshape(-1)
        flat_y[0] = flat_x[0]
        if ties is not None:  # (binary fractions: exact in float32 too)
            flat_x[1:3] = [0.25, -1.5]
            flat_y[1:3] = [0.25 - ties, -1.5 + ties]
    return x, y


REGRESSION = {
    "l1_loss": [{}],
    "mse_loss": [{}],
    "smooth_l1_loss": [{"beta": 1.0}, {"beta": 0.5}, {"beta": 2.0}, {"beta": 0.0}],
    "huber_loss": [{"delta": 1.0}, {"delta": 0.5}, {"delta": 2.5}],
}
REGRESSION_CASES = [pytest.param(name, kw, shape, red, id=f"{name}-{kw}-{shape}-{red}")
                    for name, options in REGRESSION.items() for kw in options
                    for shape, red in itertools.product(SHAPES, REDUCTIONS)]


@needs_torch
@DTYPES
@pytest.mark.parametrize("name, options, shape, reduction", REGRESSION_CASES)
def test_regression_losses_match_torch(name, options, shape, reduction, dtype, device):
    rng = rng_for(name, options, shape)
    ties = options.get("beta", options.get("delta"))
    x, y = regression_pair(SHAPES[shape], rng, ties=ties)
    compare(name, [x, y], (0, 1), dtype, device, dict(reduction=reduction, **options))


@needs_torch
@DTYPES
@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_regression_losses_match_torch(name, reduction, dtype, device):
    # l1 and mse divide the weighted sum by sum(weight); huber takes the plain mean
    rng = rng_for(name, reduction)
    x, y = regression_pair((3, 4), rng, ties=1.0)
    w = rng.uniform(0.0, 2.0, size=(3, 4))
    compare(name, [x, y], (0, 1), dtype, device, dict(reduction=reduction), dict(weight=w))


@needs_torch
@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss"])
def test_regression_target_broadcasts_with_torchs_warning(name, device):
    rng = rng_for(name, "broadcast")
    x, y = rng.standard_normal((3, 4)), rng.standard_normal(4)
    with pytest.warns(UserWarning, match="target size"):
        getattr(F, name)(mg.tensor(x, device=device), mg.tensor(y, device=device))
    compare(name, [x, y], (0, 1), np.float64, device)
    compare(name, [y, x], (0, 1), np.float64, device, dict(reduction="none"))


def _torch_backward_takes_an_integer_target(name):
    """Whether this PyTorch differentiates loss ``name`` of a float64 input with an int64
    target."""
    x = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    try:
        getattr(torch.nn.functional, name)(x, torch.ones(2, dtype=torch.int64)).backward()
    except RuntimeError:
        return False
    return True


@needs_torch
@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "smooth_l1_loss", "huber_loss"])
def test_regression_losses_on_mixed_dtypes_match_torch(name, device):
    # float32 with float64: huber keeps the input's dtype, the others promote
    rng = rng_for(name, "mixed")
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    ours = getattr(F, name)(mg.tensor(x.astype(np.float32), device=device),
                            mg.tensor(y, device=device))
    ref = getattr(torch.nn.functional, name)(torch.tensor(x.astype(np.float32)),
                                             torch.tensor(y))
    assert str(ours.dtype) == str(ref.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=2e-6)
    # integer targets with float inputs (and integer l1 sums) are fine in torch too, but some
    # of its backwards refuse an integer target (huber_loss's; mse_loss's in some builds,
    # "Found dtype Long but expected Double"): there its forward is compared, and its
    # gradient with the same target values as floats
    ints = rng.integers(-3, 3, size=(3, 4))
    takes_ints = _torch_backward_takes_an_integer_target(name)
    compare(name, [x, ints], (0,) if takes_ints else (), np.float64, device)
    if not takes_ints:
        ours = mg.tensor(x, device=device, requires_grad=True)
        getattr(F, name)(ours, mg.tensor(ints, device=device)).backward()
        theirs = torch.tensor(x, requires_grad=True)
        getattr(torch.nn.functional, name)(theirs, torch.tensor(ints.astype(np.float64))).backward()
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)
    if name == "l1_loss":
        compare(name, [ints, ints[::-1].copy()], (), np.float64, device, dict(reduction="sum"))


@pytest.mark.parametrize("name, options", [(n, kw) for n, opts in REGRESSION.items()
                                           for kw in opts if kw.get("beta") != 0.0])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_regression_losses_gradcheck(name, options, reduction, device):
    rng = rng_for(name, options, reduction, "gradcheck")
    x, y = (f64(device, a) for a in rng.standard_normal((2, 2, 3)) * 1.5)
    fn = getattr(F, name)
    assert mg.autograd.gradcheck(lambda x, y: fn(x, y, reduction=reduction, **options), (x, y))


def test_smooth_l1_and_huber_by_hand(device):
    # z = |x - y| = 0.5, 1, 3 with beta = delta = 1: 0.5 z^2 below 1, z - 0.5 (huber: the same
    # times delta) from 1 on
    x, y = f64(device, [0.5, -1.0, 3.0]), f64(device, [0.0, 0.0, 0.0], False)
    np.testing.assert_allclose(F.smooth_l1_loss(x, y, reduction="none").numpy(),
                               [0.125, 0.5, 2.5], rtol=1e-15)
    np.testing.assert_allclose(F.huber_loss(x, y, reduction="none", delta=2.0).numpy(),
                               [0.125, 0.5, 4.0], rtol=1e-15)
    F.smooth_l1_loss(x, y, reduction="sum").backward()
    np.testing.assert_allclose(x.grad.numpy(), [0.5, -1.0, 1.0], rtol=1e-15)


# --- binary_cross_entropy ---------------------------------------------------------------------

def probabilities(shape, rng, saturated=False):
    """Probabilities in (0, 1); ``saturated`` puts exact 0s and 1s and values within 1e-12
    of them in, where PyTorch's gradient is capped (and the target gradient infinite)."""
    p = 1 / (1 + np.exp(-rng.standard_normal(shape) * 2))
    if saturated and p.size >= 6:
        p.reshape(-1)[:6] = [0.0, 1.0, 1e-13, 1 - 1e-13, 1e-50, 0.5]
    return p


BCE_WEIGHTS = {"none": None, "full": lambda s: s, "last": lambda s: s[-1:]}
BCE_CASES = [pytest.param(s, w, r, id=f"{s}-{w}-{r}")
             for s, w, r in itertools.product(["N", "NC", "NCd", "0d"], BCE_WEIGHTS, REDUCTIONS)
             if not (s == "0d" and w == "last")]


@needs_torch
@DTYPES
@pytest.mark.parametrize("shape, weighted, reduction", BCE_CASES)
def test_binary_cross_entropy_matches_torch(shape, weighted, reduction, dtype, device):
    rng = rng_for("bce", shape, weighted)
    shape = SHAPES[shape]
    x, y = probabilities(shape, rng), rng.uniform(0, 1, size=shape)
    if y.size >= 2:
        y.reshape(-1)[:2] = [0.0, 1.0]  # hard labels among the soft ones
    tensors = {} if BCE_WEIGHTS[weighted] is None else \
        {"weight": rng.uniform(0.5, 2.0, size=BCE_WEIGHTS[weighted](shape))}
    compare("binary_cross_entropy", [x, y], (0, 1), dtype, device,
            dict(reduction=reduction), tensors)


@needs_torch
@DTYPES
@pytest.mark.parametrize("labels", ["soft", "hard"])
def test_binary_cross_entropy_at_0_and_1_matches_torch(labels, dtype, device):
    # the logs are clamped at -100 (the loss stays finite); the input gradient is PyTorch's,
    # (x - y) / max(x (1 - x), 1e-12), and the target gradient log((1 - x) / x) is infinite
    # at 0 and 1
    rng = rng_for("bce saturated", labels)
    x = probabilities((4, 5), rng, saturated=True)
    if dtype == np.float32:
        x = np.clip(x, 1e-30, None) * (x > 1e-40)  # (1e-50 is 0 in float32)
    y = rng.integers(0, 2, size=x.shape).astype(float) if labels == "hard" else \
        rng.uniform(0, 1, size=x.shape)
    loss = compare("binary_cross_entropy", [x, y], (0, 1), dtype, device,
                   dict(reduction="none"))
    assert np.isfinite(loss.numpy()).all() and loss.numpy().max() <= 100


@needs_torch
def test_binary_cross_entropy_of_a_saturated_sigmoid_matches_torch(device):
    # logits of +-30 make float32 sigmoids of exactly 0 and 1: BCE stays finite and the
    # gradient reaching the logits is torch's
    logits = np.array([[-30.0, -5.0, 0.0, 5.0, 30.0]], dtype=np.float32)
    target = np.array([[1.0, 0.0, 1.0, 1.0, 0.0]], dtype=np.float32)
    x, tx = mg.tensor(logits, device=device, requires_grad=True), \
        torch.tensor(logits, requires_grad=True)
    loss = F.binary_cross_entropy(x.sigmoid(), mg.tensor(target, device=device))
    ref = torch.nn.functional.binary_cross_entropy(tx.sigmoid(), torch.tensor(target))
    loss.backward()
    ref.backward()
    np.testing.assert_allclose(loss.item(), ref.item(), rtol=2e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy_gradcheck(reduction, device):
    rng = rng_for("bce gradcheck", reduction)
    x = f64(device, rng.uniform(0.1, 0.9, size=(2, 3)))
    y = f64(device, rng.uniform(0, 1, size=(2, 3)))
    w = f64(device, rng.uniform(0.5, 2, size=3), requires_grad=False)
    fn = lambda x, y: F.binary_cross_entropy(x, y, weight=w, reduction=reduction)  # noqa: E731
    assert mg.autograd.gradcheck(fn, (x, y))
    assert mg.autograd.gradgradcheck(fn, (x, y))


def test_binary_cross_entropy_names_its_node_as_torch(device):
    x = f64(device, [0.25, 0.5])
    loss = F.binary_cross_entropy(x, f64(device, [0.0, 1.0], False), reduction="none")
    assert type(loss.grad_fn).__name__ == "BinaryCrossEntropyBackward0"


# --- binary_cross_entropy_with_logits ---------------------------------------------------------

LOGIT_WEIGHTS = ["none", "weight", "pos_weight", "both", "pos_weight_full"]
LOGIT_CASES = [pytest.param(s, w, r, id=f"{s}-{w}-{r}")
               for s, w, r in itertools.product(["N", "NC", "NCd"], LOGIT_WEIGHTS, REDUCTIONS)]


@needs_torch
@DTYPES
@pytest.mark.parametrize("shape, weights, reduction", LOGIT_CASES)
def test_binary_cross_entropy_with_logits_matches_torch(shape, weights, reduction, dtype,
                                                        device):
    rng = rng_for("bcel", shape, weights)
    shape = SHAPES[shape]
    x, y = rng.standard_normal(shape) * 3, rng.uniform(0, 1, size=shape)
    y.reshape(-1)[:2] = [0.0, 1.0]
    x.reshape(-1)[2] = 0.0  # where |x| and min(x, 0) have their kinks
    tensors = {}
    if weights in ("weight", "both"):
        tensors["weight"] = rng.uniform(0.5, 2.0, size=shape)
    if weights in ("pos_weight", "both"):  # one per class: along the last dim
        tensors["pos_weight"] = rng.uniform(0.5, 4.0, size=shape[-1:])
    if weights == "pos_weight_full":
        tensors["pos_weight"] = rng.uniform(0.5, 4.0, size=shape)
    compare("binary_cross_entropy_with_logits", [x, y], (0, 1), dtype, device,
            dict(reduction=reduction), tensors)


@needs_torch
@DTYPES
def test_binary_cross_entropy_with_logits_is_stable_at_extreme_logits(dtype, device):
    # PyTorch's formula, min(x, 0) - log1p(exp(-|x|)): nothing overflows, and a loss of
    # exp(-40) keeps its digits
    x = np.array([-1e4, -800.0, -40.0, -20.0, -1e-3, 0.0, 1e-3, 20.0, 40.0, 800.0, 1e4])
    for y in (np.zeros_like(x), np.ones_like(x), np.full_like(x, 0.3)):
        loss = compare("binary_cross_entropy_with_logits", [x, y], (0, 1), dtype, device,
                       dict(reduction="none"), dict(pos_weight=np.full(x.shape, 2.0)))
        assert np.isfinite(loss.numpy()).all()
    tiny = F.binary_cross_entropy_with_logits(f64(device, [40.0]), f64(device, [1.0], False))
    np.testing.assert_allclose(tiny.item(), np.log1p(np.exp(-40.0)), rtol=1e-15)


@pytest.mark.parametrize("weights", LOGIT_WEIGHTS)
def test_binary_cross_entropy_with_logits_gradcheck(weights, device):
    rng = rng_for("bcel gradcheck", weights)
    x, y = f64(device, rng.standard_normal((2, 3)) * 3), f64(device, rng.uniform(0, 1, (2, 3)))
    kw = {}
    if weights in ("weight", "both"):
        kw["weight"] = f64(device, rng.uniform(0.5, 2, (2, 3)), requires_grad=False)
    if weights in ("pos_weight", "both"):
        kw["pos_weight"] = f64(device, rng.uniform(0.5, 4, 3), requires_grad=False)
    if weights == "pos_weight_full":
        kw["pos_weight"] = f64(device, rng.uniform(0.5, 4, (2, 3)), requires_grad=False)
    fn = lambda x, y: F.binary_cross_entropy_with_logits(x, y, **kw)  # noqa: E731
    assert mg.autograd.gradcheck(fn, (x, y))
    assert mg.autograd.gradgradcheck(fn, (x, y))


def test_binary_cross_entropy_with_logits_equals_bce_of_the_sigmoid(device):
    rng = rng_for("bcel vs bce")
    x, y = f64(device, rng.standard_normal((3, 4))), f64(device, rng.uniform(0, 1, (3, 4)))
    np.testing.assert_allclose(F.binary_cross_entropy_with_logits(x, y).item(),
                               F.binary_cross_entropy(x.sigmoid(), y).item(), rtol=1e-13)


# --- kl_div -----------------------------------------------------------------------------------

KL_CASES = [pytest.param(s, r, lt, id=f"{s}-{r}-log_target={lt}")
            for s, r, lt in itertools.product(["N", "NC", "NCd", "0d"],
                                              ["mean", "batchmean", "sum", "none"],
                                              [False, True])]


@needs_torch
@DTYPES
@pytest.mark.parametrize("shape, reduction, log_target", KL_CASES)
def test_kl_div_matches_torch(shape, reduction, log_target, dtype, device):
    rng = rng_for("kl", shape, log_target)
    shape = SHAPES[shape]
    x = np.log(rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])) if shape else \
        np.array(-0.5)
    p = rng.uniform(0, 1, size=shape)
    if p.size >= 2:
        p.reshape(-1)[0] = 0.0  # 0 * log 0 = 0 (the target gradient there is NaN, as torch's)
    target = np.log(p + 0.1) if log_target else p
    compare("kl_div", [x, target], (0, 1), dtype, device,
            dict(reduction=reduction, log_target=log_target))


@pytest.mark.parametrize("reduction", ["mean", "batchmean", "sum", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_gradcheck(reduction, log_target, device):
    rng = rng_for("kl gradcheck", reduction, log_target)
    x = f64(device, rng.standard_normal((2, 3)))
    t = f64(device, rng.uniform(0.1, 1, (2, 3)) if not log_target else rng.standard_normal((2, 3)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (reduction="mean" warns, as PyTorch's)
        assert mg.autograd.gradcheck(
            lambda x, t: F.kl_div(x, t, reduction=reduction, log_target=log_target), (x, t))


def test_kl_div_mean_warns_and_batchmean_divides_by_the_batch(device):
    x = f64(device, np.log([[0.25, 0.75], [0.5, 0.5]]))
    p = f64(device, [[0.5, 0.5], [1.0, 0.0]], False)
    expected = 0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75) + np.log(1 / 0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        mean = F.kl_div(x, p)
    assert any("'batchmean' divides only by the batch size" in str(w.message) for w in caught)
    np.testing.assert_allclose(mean.item(), expected / 4, rtol=1e-15)
    np.testing.assert_allclose(F.kl_div(x, p, reduction="batchmean").item(), expected / 2,
                               rtol=1e-15)


# --- nll_loss ---------------------------------------------------------------------------------

C = 4
NLL_SHAPES = {"NC": (5, C), "NCd": (3, C, 2), "NCdd": (2, C, 2, 3), "NCddd": (2, C, 2, 1, 2),
              "C": (C,)}
NLL_TARGETS = ["index", "ignore_default", "ignore_class", "all_ignored", "uint8"]
NLL_CASES = [pytest.param(s, t, w, r, id=f"{s}-{t}-{w}-{r}")
             for s, t, w, r in itertools.product(NLL_SHAPES, NLL_TARGETS, ["none", "weight"],
                                                 REDUCTIONS)
             if not (s == "C" and t.startswith("ignore_"))
             and not (t == "uint8" and s not in ("NC", "C"))]


def nll_case(shape, kind, rng):
    """log-probabilities, targets and the ignore_index for one case."""
    logits = rng.standard_normal(shape) * 2
    class_dim = 0 if len(shape) == 1 else 1
    logp = logits - np.log(np.exp(logits).sum(class_dim, keepdims=True))
    target = rng.integers(0, C, size=shape[:class_dim] + shape[class_dim + 1:])
    flat = target.reshape(-1)
    ignore_index = -100
    if kind == "ignore_default":
        flat[0] = -100
    elif kind in ("ignore_class", "all_ignored"):
        ignore_index = 2
        flat[0] = 2
        if kind == "all_ignored":
            flat[:] = 2
    elif kind == "uint8":
        target = target.astype(np.uint8)
    return logp, target, ignore_index


@needs_torch
@DTYPES
@pytest.mark.parametrize("shape, kind, weighted, reduction", NLL_CASES)
def test_nll_loss_matches_torch(shape, kind, weighted, reduction, dtype, device):
    rng = rng_for("nll", shape, kind, weighted)
    logp, target, ignore_index = nll_case(NLL_SHAPES[shape], kind, rng)
    tensors = {} if weighted == "none" else {"weight": rng.uniform(0.5, 2.0, size=C)}
    compare("nll_loss", [logp, target], (0,), dtype, device,
            dict(reduction=reduction, ignore_index=ignore_index), tensors)


@pytest.mark.parametrize("shape", ["NC", "NCd", "C"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_gradcheck(shape, reduction, device):
    rng = rng_for("nll gradcheck", shape, reduction)
    logp, target, _ = nll_case(NLL_SHAPES[shape], "index", rng)
    if target.size > 1:
        target.reshape(-1)[0] = -100
    x = f64(device, logp)
    t = mg.tensor(target, device=device)
    w = f64(device, rng.uniform(0.5, 2, C), requires_grad=False)
    assert mg.autograd.gradcheck(lambda x: F.nll_loss(x, t, weight=w, reduction=reduction), (x,))


def test_nll_loss_of_log_softmax_is_cross_entropy(device):
    rng = rng_for("nll = ce")
    x = f64(device, rng.standard_normal((6, C, 2)))
    t = mg.tensor(rng.integers(0, C, (6, 2)), device=device)
    w = f64(device, rng.uniform(0.5, 2, C), requires_grad=False)
    np.testing.assert_allclose(F.nll_loss(F.log_softmax(x, 1), t, weight=w).item(),
                               F.cross_entropy(x, t, weight=w).item(), rtol=1e-13)


@needs_torch
def test_nll_loss_ignores_infinite_log_probabilities_of_ignored_targets(device):
    # an ignored position contributes nothing, even where its log-probability is -inf
    logp = np.array([[-np.inf, 0.0], [-0.5, -1.0]])
    loss = compare("nll_loss", [logp, np.array([-100, 1])], (0,), np.float64, device)
    assert np.isfinite(loss.item())


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_on_empty_batches_matches_torch(reduction, device):
    compare("nll_loss", [np.zeros((0, C)), np.zeros(0, dtype=np.int64)], (0,), np.float64,
            device, dict(reduction=reduction))
    compare("nll_loss", [np.zeros((2, C, 0)), np.zeros((2, 0), dtype=np.int64)], (0,),
            np.float64, device, dict(reduction=reduction))


# --- the deprecated size_average / reduce, and 'elementwise_mean' ------------------------------

LEGACY = [(None, False), (False, None), (False, True), (True, False), (True, None)]


@needs_torch
@pytest.mark.parametrize("size_average, reduce", LEGACY)
@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "smooth_l1_loss", "kl_div",
                                  "binary_cross_entropy", "binary_cross_entropy_with_logits"])
def test_legacy_size_average_and_reduce_match_torch(name, size_average, reduce, device):
    rng = rng_for("legacy", name)
    x, y = probabilities((3, 4), rng), rng.uniform(0, 1, (3, 4))
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        getattr(F, name)(mg.tensor(x, device=device), mg.tensor(y, device=device),
                         size_average=size_average, reduce=reduce)
    compare(name, [x, y], (0, 1), np.float64, device,
            dict(size_average=size_average, reduce=reduce))


@needs_torch
@pytest.mark.parametrize("size_average, reduce", LEGACY)
def test_legacy_flags_of_nll_loss_and_cross_entropy_match_torch(size_average, reduce, device):
    rng = rng_for("legacy nll")
    logp, target, _ = nll_case((5, C), "ignore_default", rng)
    for name in ("nll_loss", "cross_entropy"):
        compare(name, [logp, target], (0,), np.float64, device,
                dict(size_average=size_average, reduce=reduce))


@needs_torch
def test_elementwise_mean_is_mean_with_torchs_warning(device):
    x, y = np.arange(6.0).reshape(2, 3), np.ones((2, 3))
    with pytest.warns(UserWarning, match="elementwise_mean"):
        loss = F.l1_loss(mg.tensor(x, device=device), mg.tensor(y, device=device),
                         reduction="elementwise_mean")
    np.testing.assert_allclose(loss.item(), np.abs(x - y).mean())
    compare("mse_loss", [x, y], (0,), np.float64, device, dict(reduction="elementwise_mean"))


# --- errors -----------------------------------------------------------------------------------

def _f(M):
    return M.nn.functional


ERRORS = {
    # reductions
    "bad reduction": (lambda M: _f(M).l1_loss(M.ones(3), M.ones(3), reduction="avg"),
                      ValueError),
    "bad reduction (nll)": (lambda M: _f(M).nll_loss(M.zeros(2, 3), M.zeros(2).long(),
                                                     reduction="mean "), ValueError),
    "batchmean outside kl_div": (lambda M: _f(M).mse_loss(M.ones(3), M.ones(3),
                                                          reduction="batchmean"), ValueError),
    "bad reduction (kl_div)": (lambda M: _f(M).kl_div(M.ones(3), M.ones(3), reduction="avg"),
                               ValueError),
    # shapes
    "l1 shapes": (lambda M: _f(M).l1_loss(M.ones(3, 4), M.ones(2, 4)), RuntimeError),
    "smooth_l1 shapes": (lambda M: _f(M).smooth_l1_loss(M.ones(3, 4), M.ones(3, 2)),
                         RuntimeError),
    "huber shapes": (lambda M: _f(M).huber_loss(M.ones(3, 4), M.ones(5)), RuntimeError),
    "kl_div shapes": (lambda M: _f(M).kl_div(M.ones(3, 4), M.ones(2, 4),
                                             reduction="sum"), RuntimeError),
    "mse weight shape": (lambda M: _f(M).mse_loss(M.ones(3, 4), M.ones(3, 4),
                                                  weight=M.ones(4)), ValueError),
    "l1 weight shape": (lambda M: _f(M).l1_loss(M.ones(3, 4), M.ones(3, 4),
                                                weight=M.ones(3, 1)), ValueError),
    "bce target shape": (lambda M: _f(M).binary_cross_entropy(M.ones(3, 4) / 2, M.ones(4)),
                         ValueError),
    "bce weight shape": (lambda M: _f(M).binary_cross_entropy(
        M.ones(3, 4) / 2, M.ones(3, 4), weight=M.ones(2, 1, 4)), RuntimeError),
    "bcel target shape": (lambda M: _f(M).binary_cross_entropy_with_logits(
        M.ones(3, 4), M.ones(3, 1)), ValueError),
    "bcel pos_weight shape": (lambda M: _f(M).binary_cross_entropy_with_logits(
        M.ones(3, 4), M.ones(3, 4), pos_weight=M.ones(3)), RuntimeError),
    "bcel pos_weight widens": (lambda M: _f(M).binary_cross_entropy_with_logits(
        M.ones(3, 4), M.ones(3, 4), pos_weight=M.ones(2, 1, 1)), RuntimeError),
    "bcel weight shape": (lambda M: _f(M).binary_cross_entropy_with_logits(
        M.ones(3, 4), M.ones(3, 4), weight=M.ones(5)), RuntimeError),
    "nll 0-d input": (lambda M: _f(M).nll_loss(M.ones(()), M.zeros(()).long()), ValueError),
    "nll batch": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.zeros(2).long()), ValueError),
    "nll 1-d input": (lambda M: _f(M).nll_loss(M.zeros(4), M.zeros(3).long()), ValueError),
    "nll 2-d target": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.zeros(3, 1).long()),
                       RuntimeError),
    "nll spatial target": (lambda M: _f(M).nll_loss(M.zeros(2, 4, 3), M.zeros(2, 4).long()),
                           RuntimeError),
    "nll 4-d target": (lambda M: _f(M).nll_loss(M.zeros(2, 4, 3, 5), M.zeros(2, 3, 4).long()),
                       RuntimeError),
    "nll weight shape": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.zeros(3).long(),
                                                  weight=M.ones(3)), RuntimeError),
    "nll weight 2-d": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.zeros(3).long(),
                                                weight=M.ones(4, 1)), RuntimeError),
    # values
    "nll target too large": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.tensor([0, 4, 1])),
                             IndexError),
    "nll negative target": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.tensor([0, -1, 1])),
                            IndexError),
    "nll target vs ignore_index": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.tensor([0, -100, 1]),
                                                            ignore_index=1), IndexError),
    "bce input above 1": (lambda M: _f(M).binary_cross_entropy(M.ones(3) * 1.5, M.ones(3)),
                          RuntimeError),
    "bce negative input": (lambda M: _f(M).binary_cross_entropy(-M.ones(3), M.ones(3)),
                           RuntimeError),
    "bce NaN input": (lambda M: _f(M).binary_cross_entropy(M.ones(3) * float("nan"),
                                                           M.ones(3)), RuntimeError),
    "bce target above 1": (lambda M: _f(M).binary_cross_entropy(M.ones(3) / 2, M.ones(3) * 2),
                           RuntimeError),
    "smooth_l1 negative beta": (lambda M: _f(M).smooth_l1_loss(M.ones(3), M.ones(3), beta=-0.5),
                                RuntimeError),
    "huber zero delta": (lambda M: _f(M).huber_loss(M.ones(3), M.ones(3), delta=0.0),
                         RuntimeError),
    "huber negative delta": (lambda M: _f(M).huber_loss(M.ones(3), M.ones(3), delta=-1.0),
                             RuntimeError),
    # dtypes
    "mse of ints": (lambda M: _f(M).mse_loss(M.ones(3).long(), M.ones(3).long(),
                                             reduction="sum"), NotImplementedError),
    "mse of bools": (lambda M: _f(M).mse_loss(M.ones(3).bool(), M.ones(3).bool()),
                     NotImplementedError),
    "l1 mean of ints": (lambda M: _f(M).l1_loss(M.ones(3).long(), M.ones(3).long()),
                        RuntimeError),
    "l1 of bools": (lambda M: _f(M).l1_loss(M.ones(3).bool(), M.ones(3)), RuntimeError),
    "smooth_l1 of ints": (lambda M: _f(M).smooth_l1_loss(M.ones(3).long(), M.ones(3).long()),
                          NotImplementedError),
    "huber of ints": (lambda M: _f(M).huber_loss(M.ones(3).long(), M.ones(3).long()),
                      NotImplementedError),
    "huber of an int input": (lambda M: _f(M).huber_loss(M.ones(3).long(), M.ones(3)),
                              RuntimeError),
    "bce of ints": (lambda M: _f(M).binary_cross_entropy(M.ones(3).long(), M.ones(3).long()),
                    NotImplementedError),
    "bce mixed dtypes": (lambda M: _f(M).binary_cross_entropy(M.ones(3) / 2, M.ones(3).double()),
                         RuntimeError),
    "bce int target": (lambda M: _f(M).binary_cross_entropy(M.ones(3) / 2, M.ones(3).long()),
                       RuntimeError),
    "bcel of ints": (lambda M: _f(M).binary_cross_entropy_with_logits(M.ones(3).long(),
                                                                      M.ones(3)),
                     NotImplementedError),
    "bcel int target": (lambda M: _f(M).binary_cross_entropy_with_logits(M.ones(3),
                                                                         M.ones(3).long()),
                        RuntimeError),
    "kl_div of ints": (lambda M: _f(M).kl_div(M.ones(3).long(), M.ones(3)), RuntimeError),
    "kl_div int target": (lambda M: _f(M).kl_div(M.ones(3), M.ones(3).long()), RuntimeError),
    "nll int input": (lambda M: _f(M).nll_loss(M.zeros(3, 4).long(), M.zeros(3).long()),
                      NotImplementedError),
    "nll int32 target": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.zeros(3).int()),
                         RuntimeError),
    "nll uint8 spatial target": (lambda M: _f(M).nll_loss(M.zeros(2, 4, 3),
                                                          M.zeros(2, 3).to(M.uint8)),
                                 RuntimeError),
    "nll float target": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.zeros(3)), RuntimeError),
    "nll weight dtype": (lambda M: _f(M).nll_loss(M.zeros(3, 4), M.zeros(3).long(),
                                                  weight=M.ones(4).double()), RuntimeError),
    # weights that require grad: the losses have no derivative for them
    "nll weight requires grad": (lambda M: _f(M).nll_loss(
        M.zeros(3, 4), M.zeros(3).long(), weight=M.ones(4, requires_grad=True)), RuntimeError),
    "bce weight requires grad": (lambda M: _f(M).binary_cross_entropy(
        M.ones(3) / 2, M.ones(3), weight=M.ones(3, requires_grad=True)), RuntimeError),
    "bcel weight requires grad": (lambda M: _f(M).binary_cross_entropy_with_logits(
        M.ones(3), M.ones(3), weight=M.ones(3, requires_grad=True)), RuntimeError),
    "bcel pos_weight requires grad": (lambda M: _f(M).binary_cross_entropy_with_logits(
        M.ones(3), M.ones(3), pos_weight=M.ones(3, requires_grad=True)), RuntimeError),
}


@needs_torch
@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_arguments_raise_as_torch(case, device):
    program, kind = ERRORS[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the size-mismatch warnings come first in both)
        raises_as_torch(program, kind, device)


def test_a_weight_that_requires_grad_is_fine_without_grad_mode(device):
    w = mg.ones(4, device=device, requires_grad=True)
    with mg.no_grad():
        loss = F.nll_loss(mg.zeros(3, 4, device=device), mg.zeros(3, dtype=mg.int64,
                                                                  device=device), weight=w)
    assert loss.item() == 0.0


# --- the modules ------------------------------------------------------------------------------

MODULES = {
    "L1Loss": ({}, "regression"),
    "MSELoss": ({"reduction": "sum"}, "regression"),
    "SmoothL1Loss": ({"beta": 0.5, "reduction": "none"}, "regression"),
    "HuberLoss": ({"delta": 0.7}, "regression"),
    "BCELoss": ({"weight": np.array([1.0, 2.0, 0.5, 1.5])}, "probabilities"),
    "BCEWithLogitsLoss": ({"weight": np.array([1.0, 2.0, 0.5, 1.5]),
                           "pos_weight": np.array([3.0, 1.0, 0.5, 2.0])}, "logits"),
    "KLDivLoss": ({"reduction": "batchmean", "log_target": True}, "regression"),
    "NLLLoss": ({"weight": np.array([1.0, 2.0, 0.5, 1.5]), "ignore_index": 1}, "classes"),
    "CrossEntropyLoss": ({"weight": np.array([1.0, 2.0, 0.5, 1.5]), "ignore_index": 1,
                          "label_smoothing": 0.1}, "classes"),
}


def module_inputs(kind, rng):
    if kind == "classes":
        return rng.standard_normal((5, C)), rng.integers(0, C, size=5)
    x = rng.standard_normal((5, C))
    if kind == "probabilities":
        return 1 / (1 + np.exp(-x)), rng.uniform(0, 1, (5, C))
    if kind == "logits":
        return x, rng.uniform(0, 1, (5, C))
    return x, rng.standard_normal((5, C))


@needs_torch
@pytest.mark.parametrize("name", list(MODULES))
def test_loss_modules_match_torch(name, device):
    options, kind = MODULES[name]
    ours = getattr(nn, name)(**{k: mg.tensor(v, device=device) if isinstance(v, np.ndarray)
                                else v for k, v in options.items()})
    theirs = getattr(torch.nn, name)(**{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                        for k, v in options.items()})
    assert repr(ours) == repr(theirs)
    assert ours.reduction == theirs.reduction
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())  # the weights: buffers
    assert list(ours.parameters()) == []
    x, y = module_inputs(kind, rng_for("module", name))
    ox = mg.tensor(x, device=device, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    loss, ref = ours(ox, mg.tensor(y, device=device)), theirs(tx, torch.tensor(y))
    np.testing.assert_allclose(loss.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-14)
    loss.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(ox.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-14)


@needs_torch
@pytest.mark.parametrize("name", ["L1Loss", "MSELoss", "SmoothL1Loss", "KLDivLoss", "BCELoss",
                                  "BCEWithLogitsLoss", "NLLLoss", "CrossEntropyLoss"])
@pytest.mark.parametrize("size_average, reduce", LEGACY)
def test_loss_modules_read_the_legacy_flags_as_torch(name, size_average, reduce):
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        ours = getattr(nn, name)(size_average=size_average, reduce=reduce)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(torch.nn, name)(size_average=size_average, reduce=reduce)
    assert ours.reduction == theirs.reduction


def test_loss_modules_check_the_reduction_when_called(device):
    loss = nn.L1Loss(reduction="avg")  # accepted when built, as PyTorch's
    with pytest.raises(ValueError, match="l1_loss: 'avg' is not a valid value for reduction"):
        loss(mg.ones(2, device=device), mg.ones(2, device=device))


def test_loss_module_weights_move_with_the_module(device):
    loss = nn.BCEWithLogitsLoss(pos_weight=mg.tensor([2.0, 1.0], device=device))
    loss.to(mg.float64)
    assert loss.pos_weight.dtype == mg.float64 and loss.weight is None
    value = loss(f64(device, [[0.0, 0.0]]), f64(device, [[1.0, 1.0]], False))
    np.testing.assert_allclose(value.item(), 1.5 * np.log(2), rtol=1e-15)
