"""RMSprop, Adagrad, Adamax, NAdam and RAdam against torch.optim: parameters and state after
every step over 20+ steps, in float32 and float64, with two param groups of different
settings; every option; torch's errors for invalid arguments; state_dict layout, round trip
and resuming; zero_grad; a parameter without a gradient skipped; a compiled training step.

Bit-exactness: minigrad's steps make PyTorch's operations in PyTorch's order with its
roundings (the fused multiply-adds of its CPU kernels, ``minigrad.backend.fma``), so each
operation of a step gives PyTorch's bits (``test_fma_is_torchs_rounding``). One operation
cannot be matched: PyTorch's CPU ``sqrt``, as built here (its AVX-512 kernels), is not
correctly rounded (about 0.6% of its float32 and float64 results are one ulp off the
correctly rounded square root that NumPy returns), so
a step's denominator may differ by an ulp, and its update by an ulp of the update. The
parameters are then compared within ``MAX_ULPS`` ulps (of values in [0.5, 3]), and most
of their elements must still be bit-identical (``MIN_SAME``; measured here: 2 ulps at
most, 96.7% or more identical). Given torch's own ``sqrt`` (patched in for NumPy's),
every step is bit-identical (``test_bit_for_bit_given_torchs_sqrt``).
"""
import copy

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad import optim
from tests.torch_ref import needs_torch, torch

SHAPES = [(3, 4), (5,), (2, 3, 2), (40,)]
STEPS = 22
MAX_ULPS = 3     # the most a parameter or a state value may differ from torch's, in ulps
MIN_SAME = 0.95  # the least fraction of all compared elements bit-identical to torch's


def _init(dtype, seed=0):
    """Initial weights with |w| in [1, 2]: updates of about lr per step keep them far from
    0, where ulps measure the rounding of the update, not of a cancellation."""
    rng = np.random.default_rng(seed)
    return [(rng.choice([-1.0, 1.0], s) * rng.uniform(1, 2, s)).astype(dtype) for s in SHAPES]


def _grads(dtype, steps=STEPS, seed=1):
    """The gradients of each step, shared by both libraries; parameter 1 has none at step 3
    (it must be skipped, its state untouched)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(steps):
        grads = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
        if k == 3:
            grads[1] = None
        out.append(grads)
    return out


def _groups(params, settings):
    """Two param groups: the first two parameters with ``settings[0]``, the others with
    ``settings[1]`` (each a dict of hyper-parameters)."""
    return [dict(params=list(params[:2]), **settings[0]),
            dict(params=list(params[2:]), **settings[1])]


def _mg_params(init, device):
    return [mg.tensor(a, device=device, requires_grad=True) for a in init]


def _set_grads(params, grads, device):
    for p, g in zip(params, grads):
        p.grad = None if g is None else mg.tensor(g, device=device)


def _torch_params(init):
    return [torch.tensor(a, requires_grad=True) for a in init]


def _set_torch_grads(params, grads):
    for p, g in zip(params, grads):
        p.grad = None if g is None else torch.tensor(g)


CASES = [  # (optimiser, keywords of the constructor, settings of the two groups)
    ("RMSprop", {}, ({}, {"lr": 0.03})),
    ("RMSprop", {}, ({"alpha": 0.9, "eps": 1e-3}, {"alpha": 0.3})),
    ("RMSprop", {}, ({"weight_decay": 0.1}, {"maximize": True})),
    ("RMSprop", {"momentum": 0.9}, ({}, {"momentum": 0.5, "lr": 0.003})),
    ("RMSprop", {"centered": True}, ({}, {"alpha": 0.3})),
    ("RMSprop", {"centered": True, "momentum": 0.5},
     ({"weight_decay": 0.05, "maximize": True}, {"eps": 1e-3})),
    ("RMSprop", {"lr": 0.02, "alpha": 0.95, "eps": 1e-6, "weight_decay": 0.01,
                 "momentum": 0.8, "centered": True, "maximize": True, "foreach": False,
                 "differentiable": False, "capturable": False}, ({}, {"centered": False})),
    ("Adagrad", {}, ({}, {"lr": 0.03})),
    ("Adagrad", {"lr_decay": 0.1}, ({}, {"lr_decay": 0.01, "eps": 1e-3})),
    ("Adagrad", {"weight_decay": 0.1}, ({"maximize": True}, {"weight_decay": 0})),
    ("Adagrad", {"initial_accumulator_value": 0.5}, ({"lr": 0.1}, {})),
    ("Adagrad", {"lr": 0.05, "lr_decay": 0.02, "weight_decay": 0.01,
                 "initial_accumulator_value": 0.1, "eps": 1e-6, "maximize": True,
                 "foreach": False, "differentiable": False}, ({}, {"lr_decay": 0})),
    ("Adamax", {}, ({}, {"lr": 0.03})),
    ("Adamax", {"betas": (0.5, 0.9)}, ({"eps": 1e-3}, {"betas": (0.9, 0.99)})),
    ("Adamax", {"weight_decay": 0.1}, ({"maximize": True}, {"betas": (0.3, 0.999)})),
    ("Adamax", {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.01,
                "maximize": True, "foreach": False, "differentiable": False,
                "capturable": False}, ({}, {"weight_decay": 0})),
    ("NAdam", {}, ({}, {"lr": 0.03})),
    ("NAdam", {"betas": (0.5, 0.9)}, ({"eps": 1e-3}, {"momentum_decay": 0.1})),
    ("NAdam", {"weight_decay": 0.1}, ({"maximize": True}, {"decoupled_weight_decay": True})),
    ("NAdam", {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.01,
               "momentum_decay": 0.01, "decoupled_weight_decay": True, "maximize": True,
               "foreach": False, "differentiable": False, "capturable": False},
     ({}, {"weight_decay": 0})),
    ("RAdam", {}, ({}, {"lr": 0.03})),
    ("RAdam", {"betas": (0.5, 0.9)}, ({"eps": 1e-3}, {"betas": (0.9, 0.99)})),
    ("RAdam", {"weight_decay": 0.1}, ({"maximize": True}, {"decoupled_weight_decay": True})),
    ("RAdam", {"lr": 0.01, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.01,
               "decoupled_weight_decay": True, "maximize": True, "foreach": False,
               "differentiable": False, "capturable": False}, ({}, {"weight_decay": 0})),
]


def _case_id(case):
    name, kw, groups = case
    shown = [f"{k}={v}" for k, v in kw.items()] + [
        f"g{i}:{k}={v}" for i, g in enumerate(groups) for k, v in g.items()]
    return "-".join([name] + shown)


def _ulps(ours, theirs):
    """How many ulps (of torch's values) each element of ``ours`` is from ``theirs``."""
    theirs = np.asarray(theirs)
    return np.abs(ours.astype(np.float64) - theirs) / np.spacing(np.abs(theirs))


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_matches_torch_step_for_step(device, case, dtype):
    name, kw, settings = case
    init = _init(dtype)
    ours, theirs = _mg_params(init, device), _torch_params(init)
    opt = getattr(optim, name)(_groups(ours, settings), **kw)
    ref = getattr(torch.optim, name)(_groups(theirs, settings), **kw)
    same = total = 0
    for k, grads in enumerate(_grads(dtype)):
        _set_grads(ours, grads, device)
        _set_torch_grads(theirs, grads)
        opt.step()
        ref.step()
        for i, (p, q) in enumerate(zip(ours, theirs)):
            assert p.dtype == dtype and p.is_leaf and p.grad_fn is None
            a, b = p.numpy(), q.detach().numpy()
            assert _ulps(a, b).max() <= MAX_ULPS, f"step {k}, parameter {i}"
            same, total = same + np.sum(a == b), total + a.size
    assert same >= MIN_SAME * total, f"{same} of {total} elements bit-identical"
    for p, q in zip(ours, theirs):
        assert set(opt.state[p]) == set(ref.state[q])
        for key, expected in ref.state[q].items():
            if key in ("step", "mu_product"):  # (numbers here, 0-d Tensors in torch)
                assert opt.state[p][key] == expected.item(), key
                continue
            got, expected = opt.state[p][key].numpy(), expected.numpy()
            assert got.dtype == dtype
            # (a sum of a few terms each an ulp off: within ulps of its largest value)
            np.testing.assert_allclose(got, expected, rtol=0, err_msg=key,
                                       atol=MAX_ULPS * np.spacing(np.abs(expected).max()))


def _torch_sqrt(x, out=None):
    """NumPy's sqrt computed by torch (its rounding: see the module's docstring)."""
    r = torch.from_numpy(np.ascontiguousarray(x)).sqrt().numpy()
    if out is None:
        return r
    out[...] = r
    return out


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_bit_for_bit_given_torchs_sqrt(monkeypatch, case, dtype):
    """With torch's sqrt in place of NumPy's, the parameters and every state value are
    torch's, bit for bit, after every step: what remains of the step is PyTorch's
    arithmetic exactly."""
    name, kw, settings = case
    init = _init(dtype)
    ours, theirs = _mg_params(init, "cpu"), _torch_params(init)
    opt = getattr(optim, name)(_groups(ours, settings), **kw)
    ref = getattr(torch.optim, name)(_groups(theirs, settings), **kw)
    monkeypatch.setattr(np, "sqrt", _torch_sqrt)
    for k, grads in enumerate(_grads(dtype)):
        _set_grads(ours, grads, "cpu")
        _set_torch_grads(theirs, grads)
        opt.step()
        ref.step()
        for i, (p, q) in enumerate(zip(ours, theirs)):
            np.testing.assert_array_equal(p.numpy(), q.detach().numpy(),
                                          err_msg=f"step {k}, parameter {i}")
            for key, expected in ref.state[q].items():
                if key in ("step", "mu_product"):
                    assert opt.state[p][key] == expected.item(), key
                else:
                    np.testing.assert_array_equal(opt.state[p][key].numpy(),
                                                  expected.numpy(), err_msg=key)


@needs_torch
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
@pytest.mark.parametrize("name, kw", [
    ("RMSprop", dict(momentum=0.5, centered=True, weight_decay=0.1)),
    ("Adagrad", dict(initial_accumulator_value=0.3, weight_decay=0.1)),
    ("Adamax", dict(weight_decay=0.1, maximize=True)),
    ("NAdam", dict(weight_decay=0.1)),
    ("RAdam", dict(weight_decay=0.1, betas=(0.5, 0.9)))],
    ids=["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_complex_parameters_step_as_torchs_real_views(name, kw, dtype):
    rng = np.random.default_rng(0)
    init = (rng.uniform(1, 2, 6) + 1j * rng.uniform(1, 2, 6)).astype(dtype)
    p, q = mg.tensor(init, requires_grad=True), torch.tensor(init, requires_grad=True)
    opt, ref = getattr(optim, name)([p], **kw), getattr(torch.optim, name)([q], **kw)
    for _ in range(10):
        g = (rng.standard_normal(6) + 1j * rng.standard_normal(6)).astype(dtype)
        p.grad, q.grad = mg.tensor(g), torch.tensor(g)
        opt.step()
        ref.step()
    assert p.dtype == dtype
    real = np.finfo(dtype).dtype
    got, expected = p.numpy().view(real), q.detach().numpy().view(real)
    assert _ulps(got, expected).max() <= MAX_ULPS


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_fma_is_torchs_rounding(dtype):
    """The operations of the steps, one at a time, give PyTorch's bits: its addcmul_,
    lerp_ (both forms) and add(alpha=) round once (fused multiply-adds), its addcdiv_ as
    ``self + value * t1 / t2``."""
    from minigrad.backend import fma
    rng = np.random.default_rng(0)
    s, a, b = (rng.standard_normal(20000).astype(dtype) for _ in range(3))
    s[:100] *= 1e-20
    a[100:200] *= 1e20
    d = np.abs(b) + 0.1
    S, A, D = (torch.tensor(x) for x in (s, a, d))
    num = lambda x: np.asarray(x, dtype)  # noqa: E731
    cases = [
        (S.clone().addcmul_(A, A, value=0.37), fma(num(0.37) * a, a, s)),
        (S.addcmul(A, A, value=-1), fma(-a, a, s)),
        (S.clone().lerp_(A, 0.1), fma(num(0.1), a - s, s)),
        (S.clone().lerp_(A, 0.7), fma(num(0.7) - 1, a - s, a)),
        (S.clone().add_(A, alpha=0.37), fma(a, num(0.37), s)),
        (S.clone().addcdiv_(A, D, value=-0.37), s + num(-0.37) * a / d),
    ]
    for i, (expected, got) in enumerate(cases):
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, expected.numpy(), err_msg=f"case {i}")


@needs_torch
@pytest.mark.parametrize("name, kw", [
    ("RMSprop", dict(momentum=0.9, centered=True)), ("RMSprop", {}),
    ("Adagrad", dict(lr_decay=0.1, initial_accumulator_value=0.2)),
    ("Adamax", dict(betas=(0.5, 0.9))), ("NAdam", dict(decoupled_weight_decay=True)),
    ("RAdam", dict(weight_decay=0.1))],
    ids=["RMSprop-all", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_state_dict_layout_is_torchs(device, name, kw):
    init = _init(np.float32)
    ours, theirs = _mg_params(init, device), _torch_params(init)
    settings = ({}, {"lr": 0.03})
    opt = getattr(optim, name)(_groups(ours, settings), **kw)
    ref = getattr(torch.optim, name)(_groups(theirs, settings), **kw)
    grads = _grads(np.float32, 1)[0]
    grads[1] = None  # parameter 1 gets no state from the step (Adagrad has it from the start)
    _set_grads(ours, grads, device)
    _set_torch_grads(theirs, grads)
    opt.step()
    ref.step()
    sd, ref_sd = opt.state_dict(), ref.state_dict()
    assert sorted(sd) == sorted(ref_sd) == ["param_groups", "state"]
    assert sorted(sd["state"]) == sorted(ref_sd["state"])
    for index, state in sd["state"].items():
        ref_state = ref_sd["state"][index]
        assert set(state) == set(ref_state)
        assert state["step"] == int(ref_state["step"].item()) and type(state["step"]) is int
        for key, value in state.items():
            if key == "mu_product":  # a float32 number, as torch's 0-d float32 Tensor
                assert type(value) is float and value == ref_state[key].item()
            elif key != "step":
                assert isinstance(value, mg.Tensor)
                np.testing.assert_array_equal(value.numpy(), ref_state[key].numpy())
    for group, ref_group in zip(sd["param_groups"], ref_sd["param_groups"]):
        assert group == ref_group


ROUND_TRIP = [
    ("RMSprop", dict(momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(alpha=0.9, maximize=True)),
    ("Adagrad", dict(lr_decay=0.05, initial_accumulator_value=0.1)),
    ("Adagrad", dict(weight_decay=0.1, maximize=True)),
    ("Adamax", dict(betas=(0.5, 0.9), weight_decay=0.1)),
    ("Adamax", dict(maximize=True)),
    ("NAdam", dict(betas=(0.5, 0.9), weight_decay=0.1, momentum_decay=0.05)),
    ("NAdam", dict(decoupled_weight_decay=True, weight_decay=0.1, maximize=True)),
    ("RAdam", dict(betas=(0.5, 0.9), weight_decay=0.1)),
    ("RAdam", dict(decoupled_weight_decay=True, weight_decay=0.1, maximize=True)),
]


@pytest.mark.parametrize("name, kw", ROUND_TRIP, ids=[f"{n}-{i}" for i, (n, _) in
                                                      enumerate(ROUND_TRIP)])
def test_state_dict_round_trip_continues_exactly(device, name, kw):
    init, grads = _init(np.float32), _grads(np.float32, 10)
    settings = ({"lr": 0.01}, {"lr": 0.03})
    straight = _mg_params(init, device)
    straight_opt = getattr(optim, name)(_groups(straight, settings), **kw)
    for g in grads:
        _set_grads(straight, g, device)
        straight_opt.step()

    first = _mg_params(init, device)
    opt = getattr(optim, name)(_groups(first, settings), **kw)
    for g in grads[:5]:
        _set_grads(first, g, device)
        opt.step()
    saved = opt.state_dict()
    snapshot = copy.deepcopy(saved)
    resumed = [mg.tensor(p.numpy(), device=device, requires_grad=True) for p in first]
    opt2 = getattr(optim, name)(_groups(resumed, ({}, {})), lr=0.5)  # lr: from the checkpoint
    opt2.load_state_dict(saved)
    assert [g["lr"] for g in opt2.param_groups] == [0.01, 0.03]
    assert opt2.state_dict()["param_groups"] == snapshot["param_groups"]
    for g in grads[5:]:
        _set_grads(resumed, g, device)
        opt2.step()
    for p, q in zip(resumed, straight):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    for p, q in zip(resumed, straight):
        assert opt2.state[p]["step"] == straight_opt.state[q]["step"]
    for index, state in snapshot["state"].items():  # loading copied: the saved dict is intact
        for key, value in state.items():
            if key not in ("step", "mu_product"):
                np.testing.assert_array_equal(saved["state"][index][key].numpy(), value.numpy())


@needs_torch
@pytest.mark.parametrize("name, kw", ROUND_TRIP[::2], ids=["RMSprop", "Adagrad", "Adamax", "NAdam",
                                                             "RAdam"])
def test_resumes_from_torchs_state_dict(name, kw):
    """A torch checkpoint (its float32 0-d ``step`` Tensors) loads, and the next steps are
    torch's."""
    init, grads = _init(np.float64), _grads(np.float64, 8)
    settings = ({"lr": 0.01}, {"lr": 0.03})
    theirs = _torch_params(init)
    ref = getattr(torch.optim, name)(_groups(theirs, settings), **kw)
    for g in grads[:4]:
        _set_torch_grads(theirs, g)
        ref.step()
    saved = ref.state_dict()
    ours = _mg_params([q.detach().numpy() for q in theirs], "cpu")
    opt = getattr(optim, name)(_groups(ours, ({}, {})), **kw)
    opt.load_state_dict({"state": {i: {k: mg.tensor(v.numpy()) for k, v in s.items()}
                                   for i, s in saved["state"].items()},
                         "param_groups": saved["param_groups"]})
    for g in grads[4:]:
        _set_grads(ours, g, "cpu")
        _set_torch_grads(theirs, g)
        opt.step()
        ref.step()
    for p, q in zip(ours, theirs):
        assert _ulps(p.numpy(), q.detach().numpy()).max() <= MAX_ULPS
        assert opt.state[p]["step"] == int(ref.state[q]["step"].item())
        if "mu_product" in ref.state[q]:
            assert opt.state[p]["mu_product"] == ref.state[q]["mu_product"].item()


@pytest.mark.parametrize("spoil, message", [
    (lambda s: s.pop("mu_product"), "the state of parameter 0 has no 'mu_product'"),
    (lambda s: s.update(mu_product="x"), "state 'mu_product' of parameter 0 is 'x', not a "
                                         "finite number"),
    (lambda s: s.update(mu_product=mg.ones(2)), r"is a Tensor of shape \(2,\)"),
], ids=["missing", "not a number", "shape"])
def test_nadam_load_state_dict_checks_mu_product(device, spoil, message):
    w = mg.ones(3, device=device, requires_grad=True)
    w.grad = mg.ones(3, device=device)
    opt = optim.NAdam([w])
    opt.step()
    sd = opt.state_dict()
    spoil(sd["state"][0])
    target = optim.NAdam([mg.ones(3, device=device, requires_grad=True)])
    with pytest.raises(ValueError, match=message):
        target.load_state_dict(sd)
    assert not target.state  # nothing half-loaded
    sd["state"][0]["mu_product"] = mg.tensor(0.5)  # a one-element Tensor, as torch saves
    target.load_state_dict(sd)
    assert target.state[target.param_groups[0]["params"][0]]["mu_product"] == 0.5


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_load_state_dict_refuses_another_layout(device, name):
    w = mg.ones(3, device=device, requires_grad=True)
    w.grad = mg.ones(3, device=device)
    opt = getattr(optim, name)([w])
    opt.step()
    sd = opt.state_dict()
    own = {"RMSprop": "square_avg", "Adagrad": "sum", "Adamax": "exp_inf",
           "NAdam": "exp_avg_sq", "RAdam": "exp_avg_sq"}[name]
    sd["state"][0]["max_exp_avg_sq" if "Adam" in name else "exp_avg_sq"] = \
        sd["state"][0].pop(own)
    with pytest.raises(ValueError, match="has no"):
        getattr(optim, name)([mg.ones(3, device=device, requires_grad=True)]).load_state_dict(sd)


def test_rmsprop_state_follows_its_settings(device):
    params = [mg.ones(3, device=device, requires_grad=True) for _ in range(3)]
    opt = optim.RMSprop([{"params": [params[0]]},
                         {"params": [params[1]], "momentum": 0.9},
                         {"params": [params[2]], "centered": True}])
    for p in params:
        p.grad = mg.ones(3, device=device)
    opt.step()
    assert [sorted(opt.state[p]) for p in params] == [
        ["square_avg", "step"], ["momentum_buffer", "square_avg", "step"],
        ["grad_avg", "square_avg", "step"]]


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_a_parameter_without_grad_is_skipped(device, name):
    a = mg.ones(3, device=device, requires_grad=True)
    b = mg.ones(2, device=device, requires_grad=True)
    opt = getattr(optim, name)([a, b], lr=0.1)
    a.grad = mg.ones(3, device=device)
    before = b._version
    opt.step()
    assert np.all(a.numpy() < 1) and np.array_equal(b.numpy(), np.ones(2, np.float32))
    assert b._version == before
    if name != "Adagrad":
        assert b not in opt.state
    else:  # Adagrad makes every parameter's state at construction, as PyTorch
        assert opt.state[b]["step"] == 0
        np.testing.assert_array_equal(opt.state[b]["sum"].numpy(), np.zeros(2, np.float32))


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_zero_grad(device, name):
    w = mg.ones(3, device=device, requires_grad=True)
    opt = getattr(optim, name)([w])
    (w * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(3, np.float32))
    opt.zero_grad()
    assert w.grad is None
    opt.step()  # no gradient: nothing changes
    np.testing.assert_array_equal(w.numpy(), np.ones(3, np.float32))


@pytest.mark.parametrize("name", ["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam"])
def test_step_bumps_the_version_and_returns_the_closures_loss(device, name):
    w = mg.ones(3, device=device, requires_grad=True)
    opt = getattr(optim, name)([w])

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss
    before = w._version
    loss = opt.step(closure)
    assert float(loss.item()) == 3.0 and w._version > before
    assert w.dtype == mg.float32


@needs_torch
@pytest.mark.parametrize("name, kw", [
    ("RMSprop", dict(momentum=0.9)), ("Adagrad", {}), ("Adamax", {}), ("NAdam", {}),
    ("NAdam", dict(weight_decay=0.1, decoupled_weight_decay=True)), ("RAdam", {}),
    ("RAdam", dict(weight_decay=0.1, decoupled_weight_decay=True))],
    ids=["RMSprop", "Adagrad", "Adamax", "NAdam", "NAdamW", "RAdam", "RAdamW"])
def test_a_step_counts_torchs_in_place_changes(name, kw):
    """A step bumps a parameter's version once per in-place change PyTorch's step makes."""
    counts = []
    for lib in (mg, torch):
        w = lib.ones(3, requires_grad=True)
        opt = getattr(lib.optim, name)([w], **kw)
        before = w._version
        for _ in range(2):
            w.grad = lib.ones(3)
            opt.step()
        counts.append(w._version - before)
    assert counts[0] == counts[1]


BAD_ARGS = [  # (constructor, keywords, exception, torch's message)
    ("RMSprop", dict(lr=-1e-3), ValueError, "Invalid learning rate: -0.001"),
    ("RMSprop", dict(eps=-1.0), ValueError, "Invalid epsilon value: -1.0"),
    ("RMSprop", dict(momentum=-0.5), ValueError, "Invalid momentum value: -0.5"),
    ("RMSprop", dict(weight_decay=-0.1), ValueError, "Invalid weight_decay value: -0.1"),
    ("RMSprop", dict(alpha=-0.1), ValueError, "Invalid alpha value: -0.1"),
    ("Adagrad", dict(lr=-1e-3), ValueError, "Invalid learning rate: -0.001"),
    ("Adagrad", dict(lr_decay=-1.0), ValueError, "Invalid lr_decay value: -1.0"),
    ("Adagrad", dict(weight_decay=-0.1), ValueError, "Invalid weight_decay value: -0.1"),
    ("Adagrad", dict(initial_accumulator_value=-1.0), ValueError,
     "Invalid initial_accumulator_value value: -1.0"),
    ("Adagrad", dict(eps=-1.0), ValueError, "Invalid epsilon value: -1.0"),
    ("Adagrad", dict(fused=True, differentiable=True), RuntimeError,
     "`fused` does not support `differentiable`"),
    ("Adagrad", dict(fused=True, foreach=True), RuntimeError,
     "`fused` and `foreach` cannot be `True` together."),
    ("Adamax", dict(lr=-1e-3), ValueError, "Invalid learning rate: -0.001"),
    ("Adamax", dict(eps=-1.0), ValueError, "Invalid epsilon value: -1.0"),
    ("Adamax", dict(betas=(1.0, 0.9)), ValueError, "Invalid beta parameter at index 0: 1.0"),
    ("Adamax", dict(betas=(0.9, -0.1)), ValueError,
     "Invalid beta parameter at index 1: -0.1"),
    ("Adamax", dict(weight_decay=-0.1), ValueError, "Invalid weight_decay value: -0.1"),
    ("NAdam", dict(lr=-1e-3), ValueError, "Invalid learning rate: -0.001"),
    ("NAdam", dict(eps=-1.0), ValueError, "Invalid epsilon value: -1.0"),
    ("NAdam", dict(betas=(-0.1, 0.9)), ValueError, "Invalid beta parameter at index 0: -0.1"),
    ("NAdam", dict(betas=(0.9, 1.0)), ValueError, "Invalid beta parameter at index 1: 1.0"),
    ("NAdam", dict(weight_decay=-0.1), ValueError, "Invalid weight_decay value: -0.1"),
    ("NAdam", dict(momentum_decay=-0.1), ValueError, "Invalid momentum_decay value: -0.1"),
    ("RAdam", dict(lr=-1e-3), ValueError, "Invalid learning rate: -0.001"),
    ("RAdam", dict(eps=-1.0), ValueError, "Invalid epsilon value: -1.0"),
    ("RAdam", dict(betas=(-0.1, 0.9)), ValueError, "Invalid beta parameter at index 0: -0.1"),
    ("RAdam", dict(betas=(0.9, 1.0)), ValueError, "Invalid beta parameter at index 1: 1.0"),
    ("RAdam", dict(weight_decay=-0.1), ValueError, "Invalid weight_decay value: -0.1"),
]


@pytest.mark.parametrize("name, kw, error, message", BAD_ARGS,
                         ids=[f"{n}-{m}" for n, _, _, m in BAD_ARGS])
def test_bad_arguments_raise_as_torch(device, name, kw, error, message):
    with pytest.raises(error) as ours:
        getattr(optim, name)([mg.ones(3, device=device, requires_grad=True)], **kw)
    assert str(ours.value) == message
    if torch is not None:
        with pytest.raises(error) as theirs:
            getattr(torch.optim, name)([torch.ones(3, requires_grad=True)], **kw)
        assert str(theirs.value) == message


STEP_ERRORS = [  # refused at the step, as torch refuses them on the CPU
    ("RMSprop", dict(capturable=True), AssertionError,
     "If capturable=True, params and state_steps must be on supported devices: "
     "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla']."),
    ("RMSprop", dict(foreach=True, differentiable=True), AssertionError,
     "_foreach ops don't support autograd"),
    ("Adagrad", dict(foreach=True, differentiable=True), AssertionError,
     "_foreach ops don't support autograd"),
    ("Adamax", dict(capturable=True), AssertionError,
     "If capturable=True, params and state_steps must be on supported devices: "
     "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla']."),
    ("Adamax", dict(foreach=True, differentiable=True), AssertionError,
     "_foreach ops don't support autograd"),
    ("NAdam", dict(capturable=True), AssertionError,
     "If capturable=True, params, mu_products and state_steps must be on supported "
     "devices: ['cuda', 'xpu', 'hpu', 'privateuseone', 'xla']."),
    ("NAdam", dict(foreach=True, differentiable=True), AssertionError,
     "_foreach ops don't support autograd"),
    ("RAdam", dict(capturable=True), AssertionError,
     "If capturable=True, params and state_steps must be on supported devices: "
     "['cuda', 'xpu', 'hpu', 'privateuseone', 'xla']."),
    ("RAdam", dict(foreach=True, differentiable=True), AssertionError,
     "_foreach ops don't support autograd"),
]


@pytest.mark.parametrize("name, kw, error, message", STEP_ERRORS,
                         ids=[f"{n}-{'-'.join(kw)}" for n, kw, _, _ in STEP_ERRORS])
def test_step_refusals_are_torchs(name, kw, error, message):
    def attempt(lib):
        w = lib.ones(3, requires_grad=True)
        w.grad = lib.ones(3)
        opt = getattr(lib.optim, name)([w], **kw)
        with pytest.raises(error) as caught:
            opt.step()
        return str(caught.value)
    assert attempt(mg) == message
    if torch is not None:
        assert attempt(torch) == message


# --- mg.compile ------------------------------------------------------------------------------

OPTIMISERS = {
    "rmsprop": lambda ps: optim.RMSprop(ps, lr=1e-2),
    "rmsprop-all": lambda ps: optim.RMSprop(ps, lr=1e-2, momentum=0.9, centered=True,
                                            weight_decay=0.01, maximize=False),
    "adagrad": lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.05, weight_decay=0.01,
                                        initial_accumulator_value=0.1),
    "adamax": lambda ps: optim.Adamax(ps, lr=1e-2, betas=(0.8, 0.99), weight_decay=0.01),
    "nadam": lambda ps: optim.NAdam(ps, lr=1e-2, weight_decay=0.01, momentum_decay=0.05),
    "nadamw": lambda ps: optim.NAdam(ps, lr=1e-2, weight_decay=0.1,
                                     decoupled_weight_decay=True),
    # (beta2 = 0.9: rho_t passes 5 at the sixth step, so that replays cross from the
    # unrectified update to the rectified one)
    "radam": lambda ps: optim.RAdam(ps, lr=1e-2, betas=(0.8, 0.9), weight_decay=0.01),
    "radamw": lambda ps: optim.RAdam(ps, lr=1e-2, weight_decay=0.1,
                                     decoupled_weight_decay=True),
}


def _setup(make_opt, device, dtype=np.float32):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)).to(device)
    if dtype == np.float64:
        model = model.double()
    opt = make_opt(list(model.parameters()))
    sched = optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1 + t))  # lr changes each step

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss
    return model, opt, step


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_compiled_training_step_equals_eager(device, name, dtype):
    rng = np.random.default_rng(1)
    batches = [(mg.tensor(rng.standard_normal((7, 5)).astype(dtype), device=device),
                mg.tensor(rng.integers(0, 3, 7), device=device)) for _ in range(8)]
    model_a, opt_a, step_a = _setup(OPTIMISERS[name], device, dtype)
    model_b, opt_b, step_b = _setup(OPTIMISERS[name], device, dtype)
    compiled = mg.compile(step_a)
    for k, (x, y) in enumerate(batches):
        loss_a, loss_b = compiled(x, y), step_b(x, y)
        assert loss_a.numpy().tobytes() == loss_b.numpy().tobytes(), f"loss of step {k}"
        for p, q in zip(model_a.parameters(), model_b.parameters()):
            assert p.numpy().tobytes() == q.numpy().tobytes(), f"parameters after step {k}"
            assert p._version == q._version
        assert [s["step"] for s in opt_a.state.values()] == \
            [s["step"] for s in opt_b.state.values()]
    assert compiled.replays >= len(batches) - 3, compiled.log
