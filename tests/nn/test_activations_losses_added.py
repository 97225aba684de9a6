"""The activations and losses added after the first ones: ReLU6, ELU, SELU, CELU, Mish,
Softsign, Hardtanh, Hardsigmoid, Hardswish, Tanhshrink, Softshrink, Hardshrink, Softmin, GLU,
PReLU, Threshold; CosineEmbeddingLoss, MarginRankingLoss, TripletMarginLoss,
HingeEmbeddingLoss, SoftMarginLoss, MultiLabelSoftMarginLoss, PoissonNLLLoss, GaussianNLLLoss.

Each is compared with torch in float64 (values and gradients, on random inputs of several
shapes and at the special values: 0, the kinks, large and small inputs), gradchecked away from
the kinks, its module's repr compared with torch's, and the losses under each reduction.
"""
import zlib

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

TOL = dict(rtol=1e-12, atol=1e-14)
# (torch's own first use of some derivatives scripts a helper, with this warning)
TORCH_JIT_WARNING = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")
SHAPES = [(), (5,), (3, 4), (2, 3, 4)]
# 0, the kinks of every activation below (+-0.5, +-1, +-2, +-3, 6), and large and small values
SPECIAL = [-800.0, -40.0, -21.0, -20.0, -6.0, -3.0, -2.0, -1.0, -0.5, -1e-20, 0.0, 1e-20, 0.5,
           1.0, 2.0, 3.0, 6.0, 20.0, 21.0, 40.0, 800.0]


def rng_for(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def pair(array, device, requires_grad=True):
    a = np.asarray(array, dtype=np.float64)
    return (mg.tensor(a, device=device, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def same(ours, theirs, tol=TOL):
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), **tol)


def same_values_and_grads(ours, theirs, inputs, tol=TOL, seed=0):
    """``ours`` equals ``theirs`` and so do the gradients reaching each (minigrad, torch)
    pair of ``inputs`` under one random upstream gradient."""
    same(ours, theirs, tol)
    g = np.random.default_rng(seed).standard_normal(ours.shape)
    (ours * mg.tensor(g, device=ours.device)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    for x, tx in inputs:
        assert (x.grad is None) == (tx.grad is None)
        if tx.grad is not None:
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)


# --- activations --------------------------------------------------------------------------------

# name: (the call, given nn.functional, and the same as a module, given nn)
ACTIVATIONS = {
    "relu6": (lambda F, x: F.relu6(x), lambda nn: nn.ReLU6()),
    "elu": (lambda F, x: F.elu(x), lambda nn: nn.ELU()),
    "elu_alpha": (lambda F, x: F.elu(x, alpha=0.5), lambda nn: nn.ELU(0.5)),
    "selu": (lambda F, x: F.selu(x), lambda nn: nn.SELU()),
    "celu": (lambda F, x: F.celu(x), lambda nn: nn.CELU()),
    "celu_alpha": (lambda F, x: F.celu(x, alpha=2.0), lambda nn: nn.CELU(alpha=2.0)),
    "mish": (lambda F, x: F.mish(x), lambda nn: nn.Mish()),
    "softsign": (lambda F, x: F.softsign(x), lambda nn: nn.Softsign()),
    "hardtanh": (lambda F, x: F.hardtanh(x), lambda nn: nn.Hardtanh()),
    "hardtanh_bounds": (lambda F, x: F.hardtanh(x, -2.0, 3.0), lambda nn: nn.Hardtanh(-2.0, 3.0)),
    "hardsigmoid": (lambda F, x: F.hardsigmoid(x), lambda nn: nn.Hardsigmoid()),
    "hardswish": (lambda F, x: F.hardswish(x), lambda nn: nn.Hardswish()),
    "tanhshrink": (lambda F, x: F.tanhshrink(x), lambda nn: nn.Tanhshrink()),
    "softshrink": (lambda F, x: F.softshrink(x), lambda nn: nn.Softshrink()),
    "softshrink_1": (lambda F, x: F.softshrink(x, 1.0), lambda nn: nn.Softshrink(1.0)),
    "hardshrink": (lambda F, x: F.hardshrink(x), lambda nn: nn.Hardshrink()),
    "hardshrink_1": (lambda F, x: F.hardshrink(x, lambd=1.0), lambda nn: nn.Hardshrink(1.0)),
    "threshold": (lambda F, x: F.threshold(x, 1.0, 20.0), lambda nn: nn.Threshold(1.0, 20.0)),
    "threshold_0": (lambda F, x: F.threshold(x, 0.0, -1.0), lambda nn: nn.Threshold(0, -1)),
    "softmin": (lambda F, x: F.softmin(x, -1), lambda nn: nn.Softmin(-1)),
    "softmin_0": (lambda F, x: F.softmin(x, dim=0), lambda nn: nn.Softmin(dim=0)),
}
# (the tanh of mish and the softmax of softmin are not torch's to the last ulp; torch's
# hardsigmoid gradient is grad * 1/6 rounded to float32 even in float64, ours 1/6 exactly)
LOOSER = {"mish": dict(rtol=1e-11, atol=1e-13), "softmin": dict(rtol=1e-11, atol=1e-13),
          "softmin_0": dict(rtol=1e-11, atol=1e-13), "hardsigmoid": dict(rtol=5e-8, atol=1e-14)}
INPLACE = {"relu6": lambda F, x: F.relu6(x, inplace=True),
           "elu": lambda F, x: F.elu(x, 0.5, inplace=True),
           "elu_": lambda F, x: F.elu_(x, 0.5),
           "selu": lambda F, x: F.selu(x, inplace=True),
           "selu_": lambda F, x: F.selu_(x),
           "celu": lambda F, x: F.celu(x, 2.0, inplace=True),
           "celu_": lambda F, x: F.celu_(x, 2.0),
           "mish": lambda F, x: F.mish(x, inplace=True),
           "hardtanh": lambda F, x: F.hardtanh(x, -2.0, 3.0, inplace=True),
           "hardtanh_": lambda F, x: F.hardtanh_(x, -2.0, 3.0),
           "hardsigmoid": lambda F, x: F.hardsigmoid(x, inplace=True),
           "hardswish": lambda F, x: F.hardswish(x, inplace=True),
           "threshold": lambda F, x: F.threshold(x, 1.0, 20.0, inplace=True),
           "threshold_": lambda F, x: F.threshold_(x, 1.0, 20.0)}
# activations with a kink (where gradcheck does not hold) at these points
KINKS = {"relu6": (0, 6), "hardtanh": (-1, 1), "hardtanh_bounds": (-2, 3),
         "hardsigmoid": (-3, 3), "hardswish": (-3, 3), "softshrink": (-0.5, 0.5),
         "softshrink_1": (-1, 1), "hardshrink": (-0.5, 0.5), "hardshrink_1": (-1, 1),
         "threshold": (1,), "threshold_0": (0,), "elu_alpha": (0,), "celu_alpha": (0,)}


def _activation_inputs(shape, name):
    return rng_for(name, shape).standard_normal(shape) * 4


@needs_torch
@pytest.mark.parametrize("name", list(ACTIVATIONS))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_activation_matches_torch(name, shape, device):
    call = ACTIVATIONS[name][0]
    x, tx = pair(_activation_inputs(shape, name), device)
    same_values_and_grads(call(F, x), call(torch.nn.functional, tx), [(x, tx)],
                          LOOSER.get(name, TOL))


@needs_torch
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_at_special_values_and_kinks(name, device):
    """0, the kinks (the gradient there is torch's one-sided choice), large and small."""
    call = ACTIVATIONS[name][0]
    x, tx = pair(SPECIAL, device)
    same_values_and_grads(call(F, x), call(torch.nn.functional, tx), [(x, tx)],
                          LOOSER.get(name, TOL))


@needs_torch
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_module_matches_functional_and_repr(name, device):
    call, make = ACTIVATIONS[name]
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    x, tx = pair(_activation_inputs((3, 4), name), device)
    same(ours(x), theirs(tx), LOOSER.get(name, TOL))


@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_gradcheck(name, device):
    x = rng_for(name, "gradcheck").uniform(-5, 5, (3, 4))
    for k in KINKS.get(name, ()):  # (away from the kinks: more than gradcheck's step)
        x = np.where(np.abs(x - k) < 1e-3, x + 0.01, x)
    t = mg.tensor(x, device=device, requires_grad=True)
    call = ACTIVATIONS[name][0]
    assert mg.autograd.gradcheck(lambda t: call(F, t), (t,))
    assert mg.autograd.gradgradcheck(lambda t: call(F, t), (t,))


@TORCH_JIT_WARNING
@needs_torch
@pytest.mark.parametrize("name", [n for n in ACTIVATIONS if n != "hardsigmoid"])
def test_activation_second_derivative_matches_torch(name, device):
    """Double backward at the special values and kinks too (torch has none for hardsigmoid,
    whose gradient is piecewise constant: ours gives 0)."""
    call = ACTIVATIONS[name][0]
    values = np.array(SPECIAL[1:-1] + list(rng_for(name, 2).standard_normal(8) * 4))
    x, tx = pair(values, device)
    g, = mg.autograd.grad(call(F, x).sum(), x, create_graph=True)
    tg, = torch.autograd.grad(call(torch.nn.functional, tx).sum(), tx, create_graph=True)
    gg = mg.autograd.grad((g * g).sum(), x)[0].numpy() if g.requires_grad else 0 * values
    tgg = (torch.autograd.grad((tg * tg).sum(), tx, allow_unused=True)[0]
           if tg.requires_grad else None)
    tgg = 0 * values if tgg is None else tgg.numpy()
    np.testing.assert_allclose(gg, tgg, rtol=1e-10, atol=1e-12)


@TORCH_JIT_WARNING
@needs_torch
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_forward_mode_matches_torch(name, device):
    """jvp at the special values and kinks: the same one-sided choice as the gradient."""
    call = ACTIVATIONS[name][0]
    values = np.array(SPECIAL[1:-1])
    tangent = rng_for(name, "jvp").standard_normal(values.shape)
    _, ours = mg.func.jvp(lambda t: call(F, t), (mg.tensor(values, device=device),),
                          (mg.tensor(tangent, device=device),))
    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        out = call(torch.nn.functional, fwAD.make_dual(torch.tensor(values),
                                                       torch.tensor(tangent)))
        theirs = fwAD.unpack_dual(out).tangent
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **LOOSER.get(name, TOL))


@needs_torch
@pytest.mark.parametrize("name", list(INPLACE))
def test_activation_inplace(name, device):
    """The input itself is returned, overwritten, and the gradient flows through the write."""
    call = INPLACE[name]
    values = np.array(SPECIAL[2:-2] + list(rng_for(name).standard_normal(6) * 4))
    x, tx = pair(values, device)
    y, ty = x * 1, tx * 1
    out, tout = call(F, y), call(torch.nn.functional, ty)
    assert out is y and tout is ty
    same_values_and_grads(out, tout, [(x, tx)], LOOSER.get(name, TOL))


@needs_torch
@pytest.mark.parametrize("make", [lambda nn: nn.ReLU6(True), lambda nn: nn.ELU(0.5, True),
                                  lambda nn: nn.SELU(True), lambda nn: nn.CELU(2.0, True),
                                  lambda nn: nn.Mish(True), lambda nn: nn.Hardtanh(-2, 3, True),
                                  lambda nn: nn.Hardsigmoid(True), lambda nn: nn.Hardswish(True),
                                  lambda nn: nn.Threshold(0.1, 20, True)])
def test_inplace_modules(make, device):
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    x, tx = pair(rng_for(repr(theirs)).standard_normal((3, 4)) * 4, device,
                 requires_grad=False)
    assert ours(x) is x and theirs(tx) is tx
    same(x, tx, LOOSER.get("mish", TOL))


@needs_torch
@pytest.mark.parametrize("shape, dim", [((4,), -1), ((4,), 0), ((2, 6), -1), ((2, 6), 0),
                                        ((2, 6), 1), ((4, 2, 2), 0), ((4, 2, 2), 1)], ids=str)
def test_glu(shape, dim, device):
    x, tx = pair(rng_for(shape, dim).standard_normal(shape) * 3, device)
    same_values_and_grads(F.glu(x, dim), torch.nn.functional.glu(tx, dim), [(x, tx)])
    ours, theirs = nn.GLU(dim), torch.nn.GLU(dim)
    assert repr(ours) == repr(theirs)
    x, tx = pair(rng_for(shape, dim).standard_normal(shape), device)
    same(ours(x), theirs(tx))
    assert mg.autograd.gradcheck(lambda t: F.glu(t, dim), (x,))
    assert repr(nn.GLU()) == repr(torch.nn.GLU())


@needs_torch
@pytest.mark.parametrize("shape, num_parameters", [
    ((), 1), ((5,), 1), ((2, 3), 1), ((2, 3), 3), ((2, 3, 4), 1), ((2, 3, 4), 3),
    ((2, 3, 2, 2), 3)], ids=str)
def test_prelu_matches_torch(shape, num_parameters, device):
    ours, theirs = On(mg, device).nn.PReLU(num_parameters), torch.nn.PReLU(num_parameters)
    assert repr(ours) == repr(theirs)
    assert ours.weight.dtype == mg.float32 and ours.weight.device.type == mg.device(device).type
    np.testing.assert_array_equal(ours.weight.numpy(), theirs.weight.detach().numpy())
    ours.double()
    theirs.double()
    w = rng_for(shape, "w").standard_normal(num_parameters)
    with mg.no_grad():
        ours.weight.copy_(mg.tensor(w))
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(w))
    values = rng_for(shape).standard_normal(shape) * 3
    if values.size:
        values.flat[0] = 0.0  # (the kink: the gradient there is the weight's side)
    x, tx = pair(values, device)
    same_values_and_grads(ours(x), theirs(tx), [(x, tx), (ours.weight, theirs.weight)])
    wt = mg.tensor(w, device=device, requires_grad=True)
    gx = mg.tensor(np.where(values == 0, 0.5, values), device=device, requires_grad=True)
    assert mg.autograd.gradcheck(F.prelu, (gx, wt))


@needs_torch
def test_prelu_init_and_parameters(device):
    ours, theirs = nn.PReLU(4, init=0.1, dtype=mg.float64), torch.nn.PReLU(4, 0.1,
                                                                          dtype=torch.float64)
    same(ours.weight, theirs.weight)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())


@needs_torch
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_clamping_activations_keep_integer_dtypes(dtype, device):
    a = np.arange(-8, 9).astype(dtype)
    x, tx = mg.tensor(a, device=device), torch.tensor(a)
    for call in (lambda F, x: F.relu6(x), lambda F, x: F.hardtanh(x),
                 lambda F, x: F.threshold(x, 1, 5)):
        out, tout = call(F, x), call(torch.nn.functional, tx)
        assert str(out.dtype) == str(tout.dtype).replace("torch.", "")
        np.testing.assert_array_equal(out.numpy(), tout.numpy())


@needs_torch
def test_softmin_implicit_dim_and_dtype(device):
    x, tx = pair(rng_for("softmin").standard_normal((2, 3)), device)
    with pytest.warns(UserWarning, match="softmin"):
        out = F.softmin(x)
    with pytest.warns(UserWarning):
        tout = torch.nn.functional.softmin(tx)
    same(out, tout)
    same(F.softmin(x.float(), 1, dtype=mg.float64),
         torch.nn.functional.softmin(tx.float(), 1, dtype=torch.float64),
         dict(rtol=1e-6, atol=1e-7))


ACTIVATION_ERRORS = [
    (lambda M: M.nn.functional.hardtanh(M.zeros(3), 2.0, 1.0), ValueError, "hardtanh"),
    (lambda M: M.nn.Hardtanh(2.0, 1.0), AssertionError, "Hardtanh"),
    (lambda M: M.nn.functional.softshrink(M.zeros(3), -1.0), RuntimeError, "softshrink"),
    (lambda M: M.nn.functional.glu(M.zeros(3, 3)), RuntimeError, "glu"),
    (lambda M: M.nn.functional.glu(M.zeros(())), RuntimeError, "glu"),
    (lambda M: M.nn.functional.glu(M.zeros(4, 2), 2), IndexError, ""),
    (lambda M: M.nn.functional.glu(M.arange(4)), NotImplementedError, "glu"),
    (lambda M: M.nn.functional.prelu(M.zeros(3, 4), M.zeros(3)), RuntimeError, "prelu"),
    (lambda M: M.nn.functional.prelu(M.zeros(3, 4), M.zeros(2, 2)), RuntimeError, "prelu"),
    (lambda M: M.nn.functional.prelu(M.zeros(3), M.zeros(3)), RuntimeError, "prelu"),
    (lambda M: M.nn.functional.celu(M.zeros(3), 0.0), RuntimeError, "celu"),
    (lambda M: M.nn.functional.elu(M.arange(3)), NotImplementedError, "elu"),
    (lambda M: M.nn.functional.mish(M.arange(3)), NotImplementedError, "mish"),
    (lambda M: M.nn.functional.hardswish(M.arange(3)), NotImplementedError, "hardswish"),
    (lambda M: M.nn.functional.hardsigmoid(M.arange(3)), NotImplementedError, "hardsigmoid"),
    (lambda M: M.nn.functional.hardshrink(M.arange(3)), NotImplementedError, "hardshrink"),
]


@needs_torch
@pytest.mark.parametrize("program, kind, op", ACTIVATION_ERRORS)
def test_activation_errors_as_torch(program, kind, op, device):
    message = raises_as_torch(program, kind, device)
    assert op in message


# --- losses -------------------------------------------------------------------------------------

REDUCTIONS = ["none", "mean", "sum"]


def _signs(rng, shape):
    return rng.choice([-1.0, 1.0], size=shape)


def _losses():
    """name: (make the arguments from a generator (arrays, the first ones differentiable),
    the number of differentiable ones, the functional call given F, the module given nn)."""
    def cosine(rng, n=4, d=3):
        return [rng.standard_normal((n, d)), rng.standard_normal((n, d)), _signs(rng, n)]

    def ranking(rng, shape=(6,)):
        return [rng.standard_normal(shape), rng.standard_normal(shape), _signs(rng, shape)]

    def triplet(rng, shape=(4, 3)):
        return [rng.standard_normal(shape) for _ in range(3)]

    def hinge(rng, shape=(3, 4)):
        return [rng.standard_normal(shape) * 2, _signs(rng, shape)]

    def soft_margin(rng, shape=(3, 4)):
        return [rng.standard_normal(shape) * 2, _signs(rng, shape)]

    def multilabel(rng, shape=(3, 4)):
        return [rng.standard_normal(shape) * 2, rng.integers(0, 2, shape).astype(float)]

    def poisson(rng, shape=(3, 4)):
        return [rng.standard_normal(shape), rng.poisson(2.0, shape).astype(float)]

    def poisson_rate(rng, shape=(3, 4)):
        return [rng.uniform(0.1, 3.0, shape), rng.poisson(2.0, shape).astype(float)]

    def gaussian(rng, shape=(3, 4)):
        return [rng.standard_normal(shape), rng.uniform(0.1, 2.0, shape),
                rng.standard_normal(shape)]

    return {
        "cosine": (cosine, 2, lambda F, a, b, y, **k: F.cosine_embedding_loss(a, b, y, **k),
                   lambda nn, **k: nn.CosineEmbeddingLoss(**k)),
        "cosine_margin": (cosine, 2, lambda F, a, b, y, **k: F.cosine_embedding_loss(
            a, b, y, margin=0.2, **k), lambda nn, **k: nn.CosineEmbeddingLoss(margin=0.2, **k)),
        "ranking": (ranking, 2, lambda F, a, b, y, **k: F.margin_ranking_loss(a, b, y, **k),
                    lambda nn, **k: nn.MarginRankingLoss(**k)),
        "ranking_margin": (ranking, 2, lambda F, a, b, y, **k: F.margin_ranking_loss(
            a, b, y, margin=0.5, **k), lambda nn, **k: nn.MarginRankingLoss(margin=0.5, **k)),
        "triplet": (triplet, 3, lambda F, a, p, n, **k: F.triplet_margin_loss(a, p, n, **k),
                    lambda nn, **k: nn.TripletMarginLoss(**k)),
        "triplet_p1_swap": (triplet, 3, lambda F, a, p, n, **k: F.triplet_margin_loss(
            a, p, n, margin=2.0, p=1, swap=True, **k),
            lambda nn, **k: nn.TripletMarginLoss(margin=2.0, p=1, swap=True, **k)),
        "triplet_p3_eps": (triplet, 3, lambda F, a, p, n, **k: F.triplet_margin_loss(
            a, p, n, p=3, eps=1e-3, **k),
            lambda nn, **k: nn.TripletMarginLoss(p=3, eps=1e-3, **k)),
        "hinge": (hinge, 1, lambda F, x, y, **k: F.hinge_embedding_loss(x, y, **k),
                  lambda nn, **k: nn.HingeEmbeddingLoss(**k)),
        "hinge_margin": (hinge, 1, lambda F, x, y, **k: F.hinge_embedding_loss(
            x, y, margin=2.0, **k), lambda nn, **k: nn.HingeEmbeddingLoss(margin=2.0, **k)),
        "soft_margin": (soft_margin, 1, lambda F, x, y, **k: F.soft_margin_loss(x, y, **k),
                        lambda nn, **k: nn.SoftMarginLoss(**k)),
        "multilabel": (multilabel, 1, lambda F, x, y, **k: F.multilabel_soft_margin_loss(
            x, y, **k), lambda nn, **k: nn.MultiLabelSoftMarginLoss(**k)),
        "poisson": (poisson, 1, lambda F, x, y, **k: F.poisson_nll_loss(x, y, **k),
                    lambda nn, **k: nn.PoissonNLLLoss(**k)),
        "poisson_full": (poisson, 1, lambda F, x, y, **k: F.poisson_nll_loss(
            x, y, full=True, **k), lambda nn, **k: nn.PoissonNLLLoss(full=True, **k)),
        "poisson_rate": (poisson_rate, 1, lambda F, x, y, **k: F.poisson_nll_loss(
            x, y, log_input=False, eps=1e-4, **k),
            lambda nn, **k: nn.PoissonNLLLoss(log_input=False, eps=1e-4, **k)),
        "gaussian": (gaussian, 2, lambda F, x, v, y, **k: F.gaussian_nll_loss(x, y, v, **k),
                     lambda nn, **k: nn.GaussianNLLLoss(**k)),
        "gaussian_full": (gaussian, 2, lambda F, x, v, y, **k: F.gaussian_nll_loss(
            x, y, v, full=True, eps=0.05, **k),
            lambda nn, **k: nn.GaussianNLLLoss(full=True, eps=0.05, **k)),
    }


LOSSES = _losses()


def _module_call(name, module, args):
    if name.startswith("gaussian"):  # (forward(input, target, var))
        return module(args[0], args[2], args[1])
    return module(*args)


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_matches_torch(name, reduction, device):
    make, n_grad, call, module = LOSSES[name]
    arrays = make(rng_for(name, reduction))
    pairs = [pair(a, device, requires_grad=i < n_grad) for i, a in enumerate(arrays)]
    ours = call(F, *[p[0] for p in pairs], reduction=reduction)
    theirs = call(torch.nn.functional, *[p[1] for p in pairs], reduction=reduction)
    same_values_and_grads(ours, theirs, pairs[:n_grad])
    m, tm = module(nn, reduction=reduction), module(torch.nn, reduction=reduction)
    assert repr(m) == repr(tm) and m.reduction == tm.reduction == reduction
    same(_module_call(name, m, [p[0] for p in pairs]),
         _module_call(name, tm, [p[1] for p in pairs]))


@pytest.mark.parametrize("name", list(LOSSES))
def test_loss_gradcheck(name, device):
    make, n_grad, call, _ = LOSSES[name]
    arrays = make(rng_for(name, "gradcheck"))
    grads = [mg.tensor(a, device=device, requires_grad=True) for a in arrays[:n_grad]]
    rest = [mg.tensor(a, device=device) for a in arrays[n_grad:]]
    assert mg.autograd.gradcheck(lambda *g: call(F, *g, *rest, reduction="sum"), grads)
    assert mg.autograd.gradgradcheck(lambda *g: call(F, *g, *rest, reduction="mean"), grads)


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_loss_kinks_and_special_targets(reduction, device):
    """The hinges exactly at their kinks (torch's clamp_min passes the gradient there),
    targets other than +-1, swap's ties, Poisson targets of 0 and 1 with ``full``."""
    T = torch.nn.functional
    # margin_ranking_loss with -y (x1 - x2) + margin = 0, hinge with x = margin
    a, b, y = np.array([1.0, 0.5, 0.0, 2.0]), np.array([0.5, 1.0, 0.0, 2.0]), \
        np.array([1.0, -1.0, 1.0, -1.0])
    p = [pair(a, device), pair(b, device), pair(y, device, False)]
    same_values_and_grads(F.margin_ranking_loss(*[q[0] for q in p], margin=0.5,
                                                reduction=reduction),
                          T.margin_ranking_loss(*[q[1] for q in p], margin=0.5,
                                                reduction=reduction), p[:2])
    x, tx = pair([1.0, 1.0, 0.0, -2.0, 3.0, 0.5], device)
    t, tt = pair([-1.0, 1.0, -1.0, 0.0, 2.0, -1.0], device, False)
    same_values_and_grads(F.hinge_embedding_loss(x, t, reduction=reduction),
                          T.hinge_embedding_loss(tx, tt, reduction=reduction), [(x, tx)])
    # cosine: a target of 0 counts nothing; parallel and opposite pairs (cos = +-1, margin)
    x1, tx1 = pair([[1.0, 2.0], [1.0, 0.0], [0.3, 0.4], [1.0, 1.0]], device)
    x2, tx2 = pair([[2.0, 4.0], [-1.0, 0.0], [0.3, 0.4], [0.0, 1.0]], device)
    y, ty = pair([1.0, -1.0, 0.0, -1.0], device, False)
    same_values_and_grads(F.cosine_embedding_loss(x1, x2, y, margin=np.sqrt(0.5),
                                                  reduction=reduction),
                          T.cosine_embedding_loss(tx1, tx2, ty, margin=np.sqrt(0.5),
                                                  reduction=reduction), [(x1, tx1), (x2, tx2)],
                          dict(rtol=1e-9, atol=1e-12))
    # triplet with swap where d(a, n) = d(p, n) (minimum's tie splits the gradient)
    anc, tanc = pair([[0.0, 0.0], [1.0, 2.0]], device)
    pos, tpos = pair([[2.0, 0.0], [1.0, 2.5]], device)
    neg, tneg = pair([[1.0, 3.0], [3.0, 2.0]], device)
    same_values_and_grads(F.triplet_margin_loss(anc, pos, neg, margin=3.0, swap=True, eps=0,
                                                reduction=reduction),
                          T.triplet_margin_loss(tanc, tpos, tneg, margin=3.0, swap=True, eps=0,
                                                reduction=reduction),
                          [(anc, tanc), (pos, tpos), (neg, tneg)])
    # Poisson with full: targets 0 and 1 get no Stirling term; large log-rates
    x, tx = pair([0.0, -1.0, 2.0, 30.0, -30.0, 0.5], device)
    t, tt = pair([0.0, 1.0, 1.5, 2.0, 7.0, 0.0], device, False)
    same_values_and_grads(F.poisson_nll_loss(x, t, full=True, reduction=reduction),
                          T.poisson_nll_loss(tx, tt, full=True, reduction=reduction), [(x, tx)])
    # soft margin: large margins (exp under- and overflowing to 0 and 1)
    x, tx = pair([-50.0, 50.0, 0.0, 700.0, -700.0], device)
    t, tt = pair([1.0, 1.0, -1.0, 1.0, -1.0], device, False)
    same_values_and_grads(F.soft_margin_loss(x, t, reduction=reduction),
                          T.soft_margin_loss(tx, tt, reduction=reduction), [(x, tx)])


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_multilabel_soft_margin_weight_and_shapes(reduction, device):
    rng = rng_for("multilabel", reduction)
    for shape, wshape in [((3, 4), (4,)), ((3, 4), (3, 4)), ((5,), (5,)), ((2, 3, 4), (4,))]:
        x, tx = pair(rng.standard_normal(shape) * 3, device)
        y, ty = pair(rng.integers(0, 2, shape), device, False)
        w, tw = pair(rng.uniform(0.5, 2.0, wshape), device, False)
        same_values_and_grads(F.multilabel_soft_margin_loss(x, y, w, reduction=reduction),
                              torch.nn.functional.multilabel_soft_margin_loss(
                                  tx, ty, tw, reduction=reduction), [(x, tx)])
        m = nn.MultiLabelSoftMarginLoss(weight=w, reduction=reduction)
        assert "weight" in dict(m.named_buffers())
        same(m(x, y), torch.nn.MultiLabelSoftMarginLoss(tw, reduction=reduction)(tx, ty))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cosine_embedding_single_pair_and_triplet_1d(reduction, device):
    rng = rng_for("1d", reduction)
    x1, tx1 = pair(rng.standard_normal(5), device)
    x2, tx2 = pair(rng.standard_normal(5), device)
    for target in (1.0, -1.0):
        y, ty = pair(target, device, False)
        x1.grad = x2.grad = tx1.grad = tx2.grad = None
        same_values_and_grads(F.cosine_embedding_loss(x1, x2, y, 0.1, reduction=reduction),
                              torch.nn.functional.cosine_embedding_loss(
                                  tx1, tx2, ty, 0.1, reduction=reduction),
                              [(x1, tx1), (x2, tx2)])
    xs = [pair(rng.standard_normal(4), device) for _ in range(3)]
    same_values_and_grads(F.triplet_margin_loss(*[x[0] for x in xs], reduction=reduction),
                          torch.nn.functional.triplet_margin_loss(*[x[1] for x in xs],
                                                                  reduction=reduction), xs)


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_gaussian_nll_var_shapes_and_clamp(reduction, device):
    """var of the input's shape, one dim short, of size 1 in one dim, a float; values below
    eps are clamped but still get their gradient (torch clamps them under no_grad)."""
    rng = rng_for("gaussian", reduction)
    x, tx = pair(rng.standard_normal((3, 4)), device)
    y, ty = pair(rng.standard_normal((3, 4)), device, False)
    for var in [rng.uniform(0, 1e-5, (3, 4)), rng.uniform(0.5, 2, (3,)),
                rng.uniform(0.5, 2, (3, 1)), rng.uniform(0.5, 2, (1, 4))]:
        v, tv = pair(var, device)
        for a in (x, tx, v, tv):
            a.grad = None
        same_values_and_grads(F.gaussian_nll_loss(x, y, v, eps=1e-6, reduction=reduction),
                              torch.nn.functional.gaussian_nll_loss(tx, ty, tv, eps=1e-6,
                                                                    reduction=reduction),
                              [(x, tx), (v, tv)])
    x.grad = tx.grad = None
    same_values_and_grads(F.gaussian_nll_loss(x, y, 0.5, full=True, reduction=reduction),
                          torch.nn.functional.gaussian_nll_loss(tx, ty, 0.5, full=True,
                                                                reduction=reduction), [(x, tx)])


@needs_torch
def test_loss_legacy_flags(device):
    x, tx = pair(rng_for("legacy").standard_normal(6), device)
    y, ty = pair(_signs(rng_for("legacy"), 6), device, False)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        out = F.hinge_embedding_loss(x, y, size_average=False)
    with pytest.warns(UserWarning):
        tout = torch.nn.functional.hinge_embedding_loss(tx, ty, size_average=False)
    same(out, tout)
    with pytest.warns(UserWarning, match="reduction='none'"):
        m = nn.SoftMarginLoss(reduce=False)
    assert m.reduction == "none"
    with pytest.warns(UserWarning):
        out = F.poisson_nll_loss(x, y.abs(), reduce=False)
    with pytest.warns(UserWarning):
        tout = torch.nn.functional.poisson_nll_loss(tx, ty.abs(), reduce=False)
    same(out, tout)


LOSS_ERRORS = [
    (lambda M: M.nn.functional.cosine_embedding_loss(M.zeros(2, 3), M.zeros(2, 3),
                                                     M.ones(2, 1)), RuntimeError),
    (lambda M: M.nn.functional.cosine_embedding_loss(M.zeros(3), M.zeros(3), M.ones(3)),
     RuntimeError),
    (lambda M: M.nn.functional.cosine_embedding_loss(M.zeros(2, 3), M.zeros(2, 3), M.ones(())),
     RuntimeError),
    (lambda M: M.nn.functional.margin_ranking_loss(M.zeros(3), M.zeros(3, 1), M.ones(3)),
     RuntimeError),
    (lambda M: M.nn.functional.triplet_margin_loss(M.zeros(2, 3), M.zeros(2, 3), M.zeros(3)),
     RuntimeError),
    (lambda M: M.nn.functional.triplet_margin_loss(M.zeros(3), M.zeros(3), M.zeros(3),
                                                   margin=0.0), ValueError),
    (lambda M: M.nn.TripletMarginLoss(margin=-1.0), ValueError),
    (lambda M: M.nn.functional.gaussian_nll_loss(M.zeros(3, 4), M.zeros(3, 4), M.ones(4)),
     ValueError),
    (lambda M: M.nn.functional.gaussian_nll_loss(M.zeros(3, 4), M.zeros(3, 4), -M.ones(3, 4)),
     ValueError),
    (lambda M: M.nn.functional.gaussian_nll_loss(M.zeros(3), M.zeros(3), -1.0), ValueError),
    (lambda M: M.nn.functional.gaussian_nll_loss(M.zeros(3), M.zeros(3), M.ones(3),
                                                 reduction="max"), ValueError),
    (lambda M: M.nn.functional.poisson_nll_loss(M.zeros(3), M.zeros(3), reduction="max"),
     ValueError),
    (lambda M: M.nn.functional.poisson_nll_loss(M.zeros(3), M.zeros(3),
                                                reduction="elementwise_mean"), ValueError),
    (lambda M: M.nn.functional.multilabel_soft_margin_loss(M.zeros(2, 3), M.zeros(2, 3),
                                                           reduction="max"), ValueError),
    (lambda M: M.nn.functional.hinge_embedding_loss(M.zeros(3), M.ones(3), reduction="max"),
     ValueError),
    (lambda M: M.nn.functional.soft_margin_loss(M.zeros(3), M.ones(3), reduction="avg"),
     ValueError),
]


@needs_torch
@pytest.mark.parametrize("program, kind", LOSS_ERRORS)
def test_loss_errors_as_torch(program, kind, device):
    raises_as_torch(program, kind, device)


# --- multi_margin_loss --------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("shape, target_shape", [((3, 4), (3,)), ((5, 3), (5,)), ((4,), ()),
                                                 ((4,), (1,)), ((), ())], ids=str)
def test_multi_margin_loss_matches_torch(shape, target_shape, p, reduction, device):
    rng = rng_for(shape, p, reduction)
    n_classes = shape[-1] if shape else 1
    target = rng.integers(0, n_classes, target_shape)
    w = rng.uniform(0.5, 2.0, n_classes)
    for weight in (None, w):
        x, tx = pair(rng.standard_normal(shape), device)
        kw = dict(p=p, margin=0.7, reduction=reduction)
        ours = F.multi_margin_loss(x, mg.tensor(target, device=device),
                                   weight=None if weight is None else mg.tensor(weight,
                                                                                device=device),
                                   **kw)
        theirs = torch.nn.functional.multi_margin_loss(
            tx, torch.tensor(target), weight=None if weight is None else torch.tensor(weight),
            **kw)
        same_values_and_grads(ours, theirs, [(x, tx)])
        m = nn.MultiMarginLoss(p, 0.7, None if weight is None else mg.tensor(weight,
                                                                            device=device),
                               reduction=reduction)
        tm = torch.nn.MultiMarginLoss(p, 0.7, None if weight is None else torch.tensor(weight),
                                      reduction=reduction)
        assert repr(m) == repr(tm)
        same(m(x, mg.tensor(target, device=device)), tm(tx, torch.tensor(target)))


@needs_torch
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss_at_the_hinge(p, device):
    """margin - x[y] + x[i] exactly 0: torch's gradient there is 0 (its z > 0 test)."""
    x, tx = pair([[1.0, 0.0, 0.5, -1.0], [0.0, 2.0, 1.0, 2.5]], device)
    target = [0, 1]
    ours = F.multi_margin_loss(x, mg.tensor(target, device=device), p=p, reduction="sum")
    theirs = torch.nn.functional.multi_margin_loss(tx, torch.tensor(target), p=p,
                                                   reduction="sum")
    same_values_and_grads(ours, theirs, [(x, tx)])


@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss_gradcheck(p, device):
    x = mg.tensor(rng_for("mm", p).standard_normal((3, 5)), device=device, requires_grad=True)
    t = mg.tensor([0, 4, 2], device=device)
    w = mg.tensor([0.5, 1.0, 2.0, 1.5, 1.0], device=device, dtype=mg.float64)
    assert mg.autograd.gradcheck(lambda x: F.multi_margin_loss(x, t, p=p, weight=w), (x,))
    assert mg.autograd.gradgradcheck(lambda x: F.multi_margin_loss(x, t, p=p), (x,))


MULTI_MARGIN_ERRORS = [
    (lambda M: M.nn.functional.multi_margin_loss(M.zeros(3, 4), M.tensor([0, 1, 4])),
     RuntimeError),
    (lambda M: M.nn.functional.multi_margin_loss(M.zeros(3, 4), M.tensor([0, 1, -1])),
     RuntimeError),
    (lambda M: M.nn.functional.multi_margin_loss(M.zeros(3, 4), M.tensor([0, 1])),
     RuntimeError),
    (lambda M: M.nn.functional.multi_margin_loss(M.zeros(3, 4), M.tensor([0.0, 1.0, 2.0])),
     RuntimeError),
    (lambda M: M.nn.functional.multi_margin_loss(M.zeros(3, 4), M.tensor([0, 1, 2]), p=3),
     ValueError),
    (lambda M: M.nn.functional.multi_margin_loss(M.zeros(3, 4), M.tensor([0, 1, 2]),
                                                 weight=M.ones(2, 2)), ValueError),
    (lambda M: M.nn.functional.multi_margin_loss(M.zeros(3, 4), M.tensor([0, 1, 2]),
                                                 weight=M.ones(3)), RuntimeError),
    (lambda M: M.nn.functional.multi_margin_loss(M.zeros(2, 3, 4), M.tensor([0, 1])),
     RuntimeError),
    (lambda M: M.nn.MultiMarginLoss(p=3), ValueError),
    (lambda M: M.nn.MultiMarginLoss(weight=M.ones(2, 2)), ValueError),
]


@needs_torch
@pytest.mark.parametrize("program, kind", MULTI_MARGIN_ERRORS)
def test_multi_margin_loss_errors_as_torch(program, kind, device):
    raises_as_torch(program, kind, device)
