"""Optimisers and lr schedulers: parameters after every step and lr sequences against
torch.optim, state_dict round trips and errors, zero_grad, dtypes, graph safety."""
import copy
import itertools
import math

import numpy as np
import pytest

import minigrad as mg
import minigrad.optim as optim
from minigrad.optim import lr_scheduler
from tests.torch_ref import needs_torch, torch

SHAPES = [(3, 4), (5,), (2, 3, 2)]
STEPS = 10
RTOL = {np.float32: 1e-6, np.float64: 1e-12}


def _init(dtype, seed=0):
    """Initial weights with |w| in [1, 2]. Updates of about lr per step keep them far from 0,
    where a relative tolerance would measure the one-ulp rounding differences of torch's
    fused multiply-adds instead of the update rule."""
    rng = np.random.default_rng(seed)
    return [(rng.choice([-1.0, 1.0], s) * rng.uniform(1, 2, s)).astype(dtype) for s in SHAPES]


def _grads(dtype, steps=STEPS, seed=1):
    """The gradients of each step, shared by both libraries; parameter 1 has none at step 3
    (so it must be skipped, state untouched)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(steps):
        grads = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
        if k == 3:
            grads[1] = None
        out.append(grads)
    return out


def _groups(params, grouped):
    """One param group, or two with different learning rates."""
    if not grouped:
        return list(params)
    return [{"params": list(params[:2])}, {"params": list(params[2:]), "lr": 0.03}]


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


# --- update rules against torch.optim -------------------------------------------------------

def _sgd_cases():
    cases = []
    for momentum, dampening, nesterov, wd, maximize, grouped in itertools.product(
            (0, 0.9), (0, 0.3), (False, True), (0, 0.1), (False, True), (False, True)):
        if nesterov and (momentum == 0 or dampening != 0):
            continue
        kw = dict(lr=0.01, momentum=momentum, dampening=dampening, weight_decay=wd,
                  nesterov=nesterov, maximize=maximize)
        cases.append(("SGD", kw, grouped))
    return cases


def _adam_cases():
    cases = []
    for name, amsgrad, wd, maximize, (betas, eps), grouped in itertools.product(
            ("Adam", "AdamW"), (False, True), (0, 0.1), (False, True),
            (((0.9, 0.999), 1e-8), ((0.5, 0.9), 1e-3)), (False, True)):
        kw = dict(lr=0.01, betas=betas, eps=eps, weight_decay=wd, amsgrad=amsgrad,
                  maximize=maximize)
        cases.append((name, kw, grouped))
    return cases


def _case_id(case):
    name, kw, grouped = case
    on = [f"{k}={v}" for k, v in kw.items() if k != "lr" and v not in (0, False)]
    return "-".join([name] + on + (["2groups"] if grouped else []))


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", _sgd_cases() + _adam_cases(), ids=_case_id)
def test_matches_torch_step_for_step(device, case, dtype):
    name, kw, grouped = case
    init = _init(dtype)
    ours, theirs = _mg_params(init, device), _torch_params(init)
    opt = getattr(optim, name)(_groups(ours, grouped), **kw)
    ref = getattr(torch.optim, name)(_groups(theirs, grouped), **kw)
    for k, grads in enumerate(_grads(dtype)):
        _set_grads(ours, grads, device)
        _set_torch_grads(theirs, grads)
        opt.step()
        ref.step()
        for i, (p, q) in enumerate(zip(ours, theirs)):
            assert p.dtype == dtype and p.is_leaf and p.grad_fn is None
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=RTOL[dtype],
                                       atol=0, err_msg=f"step {k}, parameter {i}")
    for p, q in zip(ours, theirs):
        assert set(opt.state[p]) == set(ref.state[q])
        for key, expected in ref.state[q].items():
            if key == "step":
                assert opt.state[p]["step"] == int(expected.item())
                continue
            expected = expected.numpy()
            np.testing.assert_allclose(opt.state[p][key].numpy(), expected, rtol=RTOL[dtype],
                                       atol=RTOL[dtype] * np.abs(expected).max(), err_msg=key)


@needs_torch
def test_matches_torch_on_a_loss_with_a_scheduler(device):
    """Gradients from each library's own backward of the same loss, lr from a schedule."""
    rng = np.random.default_rng(3)
    w0, x, y = rng.standard_normal((4, 3)), rng.standard_normal((8, 3)), rng.standard_normal((8, 4))
    w, tw = mg.tensor(w0, device=device, requires_grad=True), torch.tensor(w0, requires_grad=True)
    xm, ym = mg.tensor(x, device=device), mg.tensor(y, device=device)
    opt, ref = optim.Adam([w], lr=0.1), torch.optim.Adam([tw], lr=0.1)
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=6)
    ref_sched = torch.optim.lr_scheduler.CosineAnnealingLR(ref, T_max=6)
    for _ in range(10):
        opt.zero_grad()
        ref.zero_grad()
        ((xm @ w.T - ym) ** 2).mean().backward()
        ((torch.tensor(x) @ tw.T - torch.tensor(y)) ** 2).mean().backward()
        opt.step()
        ref.step()
        sched.step()
        ref_sched.step()
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-12)


# --- the step's arithmetic, bit for bit ---------------------------------------------------------

def _reference_step(opt):
    """One step written the plain way, parameter by parameter: each parameter's numbers read
    from its group, the update computed as the docstrings' formulas (Adam's moments by
    ``backend.adam``, its one pass, or, with amsgrad, term by term as torch does) and
    applied with the tensor's general in-place methods ``add_`` and ``mul_``."""
    from minigrad import backend
    from minigrad.optim.adam import _lerp_
    with mg.no_grad():
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if isinstance(opt, optim.SGD):
                    _reference_sgd(p, opt.state[p], group)
                else:
                    _reference_adam(p, opt.state[p], group, backend, _lerp_)


def _reference_sgd(p, state, group):
    lr, momentum = float(group["lr"]), float(group["momentum"])
    g = -p.grad if group["maximize"] else p.grad  # torch's _single_tensor_sgd, op for op
    if group["weight_decay"] != 0:
        g = g.add(p, alpha=float(group["weight_decay"]))
    if momentum != 0:
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = mg.Tensor(g.numpy().copy(), device=g.device)
        else:
            state["momentum_buffer"].mul_(momentum).add_(
                g, alpha=1.0 - float(group["dampening"]))
        buf = state["momentum_buffer"]
        g = g.add(buf, alpha=momentum) if group["nesterov"] else buf
    p.add_(g, alpha=-lr)


def _reference_adam(p, state, group, backend, lerp_):
    lr, eps, wd = float(group["lr"]), float(group["eps"]), float(group["weight_decay"])
    beta1, beta2 = (float(b) for b in group["betas"])
    xp = backend.xp_of(p.array)
    if not state:
        state.update(step=0, exp_avg=mg.Tensor(xp.zeros_like(p.array)),
                     exp_avg_sq=mg.Tensor(xp.zeros_like(p.array)))
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = mg.Tensor(xp.zeros_like(p.array))
    g = -p.grad.array if group["maximize"] else p.grad.array
    state["step"] += 1
    if wd != 0:
        if group["decoupled_weight_decay"]:
            p.mul_(1.0 - lr * wd)
        else:
            g = g + wd * p.array
    m, v = state["exp_avg"].array, state["exp_avg_sq"].array
    step_size = lr / (1.0 - beta1 ** state["step"])
    bias_correction2_sqrt = (1.0 - beta2 ** state["step"]) ** 0.5
    if not group["amsgrad"]:
        p.add_(mg.Tensor(backend.adam(g, m, v, beta1, beta2, step_size,
                                      bias_correction2_sqrt, eps)))
        return
    lerp_(m, g, 1.0 - beta1)
    v *= beta2
    v += (1.0 - beta2) * g * g
    v = xp.maximum(state["max_exp_avg_sq"].array, v, out=state["max_exp_avg_sq"].array)
    denom = xp.sqrt(v)
    denom /= bias_correction2_sqrt
    denom += eps
    update = -step_size * m
    update /= denom
    p.add_(mg.Tensor(update))


def _bitwise_cases():
    """Every Adam and AdamW option, and SGD's, each on one group and on two."""
    cases = [c for c in _adam_cases() if c[1]["betas"] == (0.9, 0.999)]
    return cases + [c for c in _sgd_cases() if c[1]["maximize"]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", _bitwise_cases(), ids=_case_id)
def test_step_equals_the_plain_step_bit_for_bit(device, case, dtype):
    """The optimisers' lean step (numbers read once per group, bias corrections once per step
    count, the update written straight into the parameter) gives the same bits, and the same
    versions, as the plain step. Parameter 1 misses a gradient at step 4, so the parameters
    of a group reach a step count at different steps."""
    name, kw, grouped = case
    init = _init(dtype)
    ours, plain = _mg_params(init, device), _mg_params(init, device)
    opt = getattr(optim, name)(_groups(ours, grouped), **kw)
    ref = getattr(optim, name)(_groups(plain, grouped), **kw)
    for k, grads in enumerate(_grads(dtype, 6)):
        _set_grads(ours, grads, device)
        _set_grads(plain, grads, device)
        opt.step()
        _reference_step(ref)
        for i, (p, q) in enumerate(zip(ours, plain)):
            assert np.array_equal(p.numpy(), q.numpy()), f"step {k}, parameter {i}"
            assert p._version == q._version > 0, f"step {k}, parameter {i}"
    for p, q in zip(ours, plain):
        assert opt.state[p].keys() == ref.state[q].keys()
        for key, value in opt.state[p].items():
            same = value == ref.state[q][key] if key == "step" else \
                np.array_equal(value.numpy(), ref.state[q][key].numpy())
            assert same, key


@needs_torch
@pytest.mark.parametrize("case", _sgd_cases(), ids=_case_id)
def test_sgd_matches_torch_bit_for_bit_in_float32(case):
    """torch's ``add_(alpha=)`` rounds once (a fused multiply-add): so do SGD's steps."""
    _, kw, grouped = case
    init = _init(np.float32)
    ours = _mg_params(init, "cpu")
    theirs = [torch.tensor(a, requires_grad=True) for a in init]
    opt = optim.SGD(_groups(ours, grouped), **kw)
    ref = torch.optim.SGD(_groups(theirs, grouped), **kw)
    for k, grads in enumerate(_grads(np.float32, 6)):
        _set_grads(ours, grads, "cpu")
        for t, g in zip(theirs, grads):
            t.grad = None if g is None else torch.tensor(g)
        opt.step()
        ref.step()
        for i, (p, t) in enumerate(zip(ours, theirs)):
            assert np.array_equal(p.numpy(), t.detach().numpy()), f"step {k}, parameter {i}"


# --- state_dict ------------------------------------------------------------------------------

ROUND_TRIP = [
    ("SGD", dict(lr=0.01, momentum=0.9, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.01, momentum=0.5, dampening=0.2, maximize=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, betas=(0.5, 0.9), maximize=True)),
]


@pytest.mark.parametrize("name, kw", ROUND_TRIP, ids=[f"{n}-{i}" for i, (n, _) in
                                                      enumerate(ROUND_TRIP)])
def test_state_dict_round_trip_continues_exactly(device, name, kw):
    init, grads = _init(np.float32), _grads(np.float32)
    straight = _mg_params(init, device)
    opt = getattr(optim, name)(_groups(straight, True), **kw)
    for g in grads:
        _set_grads(straight, g, device)
        opt.step()

    first = _mg_params(init, device)
    opt = getattr(optim, name)(_groups(first, True), **kw)
    for g in grads[:5]:
        _set_grads(first, g, device)
        opt.step()
    saved = opt.state_dict()
    snapshot = copy.deepcopy(saved)
    resumed = [mg.tensor(p.numpy(), device=device, requires_grad=True) for p in first]
    opt2 = getattr(optim, name)(_groups(resumed, True), lr=0.5)  # lr comes from the checkpoint
    opt2.load_state_dict(saved)
    assert [g["lr"] for g in opt2.param_groups] == [0.01, 0.03]
    for g in grads[5:]:
        _set_grads(resumed, g, device)
        opt2.step()
    for p, q in zip(resumed, straight):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
    for index, state in snapshot["state"].items():  # loading copied: the saved dict is intact
        for key, value in state.items():
            if key != "step":
                np.testing.assert_array_equal(saved["state"][index][key].numpy(), value.numpy())


@needs_torch
@pytest.mark.parametrize("name, kw", [("SGD", dict(lr=0.01, momentum=0.9)),
                                      ("Adam", dict(lr=0.01, amsgrad=True)),
                                      ("AdamW", dict(lr=0.01))], ids=["SGD", "Adam", "AdamW"])
def test_state_dict_layout_is_torchs(device, name, kw):
    init = _init(np.float32)
    ours, theirs = _mg_params(init, device), _torch_params(init)
    opt = getattr(optim, name)(_groups(ours, True), **kw)
    ref = getattr(torch.optim, name)(_groups(theirs, True), **kw)
    grads = _grads(np.float32, 1)[0]
    grads[1] = None  # parameter 1 never gets a state entry
    _set_grads(ours, grads, device)
    _set_torch_grads(theirs, grads)
    opt.step()
    ref.step()
    sd, ref_sd = opt.state_dict(), ref.state_dict()
    assert sorted(sd) == sorted(ref_sd) == ["param_groups", "state"]
    assert sorted(sd["state"]) == sorted(ref_sd["state"]) == [0, 2]
    for index, state in sd["state"].items():
        assert set(state) == set(ref_sd["state"][index])
        assert all(isinstance(v, mg.Tensor) for k, v in state.items() if k != "step")
    for group, ref_group in zip(sd["param_groups"], ref_sd["param_groups"]):
        assert group["params"] == ref_group["params"]
        assert set(group) <= set(ref_group)
        assert all(group[k] == ref_group[k] for k in group)


def _two_group_adam(device, shapes=SHAPES, split=2):
    params = [mg.ones(s, device=device, requires_grad=True) for s in shapes]
    opt = optim.Adam([{"params": params[:split]}, {"params": params[split:], "lr": 0.1}])
    for p in params:
        p.grad = mg.ones(p.shape, device=device)
    opt.step()
    return opt


LOAD_ERRORS = [  # (what the target optimiser looks like, how the dict is spoiled, message)
    ("one group", lambda d: optim.Adam([mg.ones(3, device=d, requires_grad=True)]), None,
     "2 parameter groups, but the optimizer has 1"),
    ("group sizes", lambda d: _two_group_adam(d, split=1), None,
     "parameter group 0 of the loaded state dict has 2 parameters, but the optimizer's "
     "group 0 has 1"),
    ("shape", lambda d: _two_group_adam(d, shapes=[(4, 3), (5,), (2, 3, 2)]), None,
     r"state 'exp_avg' of parameter 0 \(group 0\) has shape \(3, 4\), but the parameter has "
     r"shape \(4, 3\)"),
    ("no state", _two_group_adam, lambda sd: sd.pop("state"), "no 'state' entry"),
    ("unknown index", _two_group_adam, lambda sd: sd["state"].update({7: {}}),
     "state for parameter 7, which is in none"),
]


@pytest.mark.parametrize("target, spoil, message", [c[1:] for c in LOAD_ERRORS],
                         ids=[c[0] for c in LOAD_ERRORS])
def test_load_state_dict_names_the_mismatch(device, target, spoil, message):
    sd = _two_group_adam(device).state_dict()
    if spoil is not None:
        spoil(sd)
    opt = target(device)
    before = (opt.param_groups, opt.state)
    with pytest.raises(ValueError, match=message):
        opt.load_state_dict(sd)
    assert (opt.param_groups, opt.state) == before  # nothing half-loaded


def test_load_state_dict_casts_to_the_parameters_dtype(device):
    sd = _two_group_adam(device).state_dict()
    params = [mg.ones(s, dtype=mg.float64, device=device, requires_grad=True) for s in SHAPES]
    opt = optim.Adam([{"params": params[:2]}, {"params": params[2:]}])
    opt.load_state_dict(sd)
    assert opt.state[params[0]]["exp_avg"].dtype == np.float64
    assert opt.state[params[0]]["step"] == 1
    assert opt.param_groups[1]["lr"] == 0.1 and opt.param_groups[1]["params"] == params[2:]


# --- the rest of the Optimizer API ---------------------------------------------------------

def test_zero_grad(device):
    w, b, unused = (mg.ones(2, 3, device=device, requires_grad=True),
                    mg.ones(3, device=device, requires_grad=True),
                    mg.ones(1, device=device, requires_grad=True))
    opt = optim.SGD([w, b, unused], lr=0.1)
    (w * b).sum().backward()
    grad = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is grad and w.grad.tolist() == [[0.0] * 3] * 2 and b.grad.tolist() == [0.0] * 3
    assert unused.grad is None
    opt.zero_grad()
    assert w.grad is None and b.grad is None


def test_zero_grad_of_a_gradient_with_a_graph(device):
    w = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    (w ** 3).sum().backward(create_graph=True)
    assert w.grad.grad_fn is not None
    optim.SGD([w]).zero_grad(set_to_none=False)
    assert w.grad.grad_fn is None and w.grad.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1, maximize=True),
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
    lambda ps: optim.Adam(ps, amsgrad=True, weight_decay=0.1, maximize=True),
    lambda ps: optim.AdamW(ps, amsgrad=True),
], ids=["SGD-nesterov", "SGD-dampening", "Adam", "AdamW"])
def test_float32_stays_float32_in_place(device, make):
    params = _mg_params(_init(np.float32), device)
    arrays = [p.array for p in params]
    opt = make(params)
    for grads in _grads(np.float32, 3):
        _set_grads(params, grads, device)
        opt.step()
    for p, arr in zip(params, arrays):
        assert p.array is arr and p.dtype == np.float32 and p.grad.dtype == np.float32
        for key, value in opt.state[p].items():
            if key == "step":
                assert type(value) is int
            else:
                assert isinstance(value, mg.Tensor) and value.dtype == np.float32, key
                assert value.device == p.device and not value.requires_grad


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1),
                                  lambda ps: optim.Adam(ps, lr=0.1, amsgrad=True),
                                  lambda ps: optim.AdamW(ps, lr=0.1)], ids=["SGD", "Adam", "AdamW"])
def test_step_bumps_the_version_so_a_stale_graph_raises(device, make):
    w = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    opt = make([w])
    (w * w).sum().backward()
    stale = (w * w).sum()  # saves w before the step changes it
    opt.step()
    with pytest.raises(RuntimeError, match="modified"):
        stale.backward()


def test_step_with_a_closure_returns_its_loss(device):
    w = mg.tensor([1.0, -2.0], device=device, requires_grad=True)
    opt = optim.SGD([w], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        return loss

    with mg.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 5.0 and w.tolist() == [0.5, -1.0]


def test_add_param_group_takes_the_defaults(device):
    a = mg.ones(2, device=device, requires_grad=True)
    b = mg.ones(2, device=device, requires_grad=True)
    opt = optim.SGD([a], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": b, "lr": 0.5})
    assert opt.param_groups[1]["params"] == [b]
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0.9
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


def test_named_parameters_are_accepted(device):
    w = mg.ones(2, device=device, requires_grad=True)
    opt = optim.Adam([("layer.weight", w)])
    assert opt.param_groups[0]["params"] == [w]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["layer.weight"]


BAD_ARGS = [
    (lambda w: optim.SGD([w], lr=-1.0), ValueError, "learning rate"),
    (lambda w: optim.SGD([w], lr=0.1, nesterov=True), ValueError, "Nesterov"),
    (lambda w: optim.SGD([w], lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), ValueError,
     "Nesterov"),
    (lambda w: optim.Adam([w], betas=(0.9, 1.0)), ValueError, "beta parameter at index 1"),
    (lambda w: optim.Adam([w], eps=-1.0), ValueError, "epsilon"),
    (lambda w: optim.AdamW([w], weight_decay=-0.1), ValueError, "weight_decay"),
    (lambda w: optim.SGD(w, lr=0.1), TypeError, "iterable of Tensors"),
    (lambda w: optim.SGD([], lr=0.1), ValueError, "empty parameter list"),
    (lambda w: optim.SGD([{"params": {w}}], lr=0.1), TypeError, "ordered collections"),
    (lambda w: optim.SGD([w * 2], lr=0.1), ValueError, "non-leaf"),
    (lambda w: optim.SGD([w.numpy()], lr=0.1), TypeError, "only optimize Tensors"),
    (lambda w: optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1), ValueError,
     "more than one parameter group"),
]


@pytest.mark.parametrize("make, error, message", BAD_ARGS, ids=[m for _, _, m in BAD_ARGS])
def test_bad_arguments_raise(device, make, error, message):
    w = mg.ones(3, device=device, requires_grad=True)
    with pytest.raises(error, match=message):
        make(w)


# --- lr schedulers ---------------------------------------------------------------------------

LRS = (0.1, 0.02)
SCHED_STEPS = 30


def _noam_lambda(d_model, warmup, factor):
    return lambda e: factor * d_model ** -0.5 * min((e + 1) ** -0.5, (e + 1) * warmup ** -1.5)


SCHEDULERS = [  # (id, minigrad scheduler, the torch scheduler that must give the same lrs)
    ("lambda", lambda o: lr_scheduler.LambdaLR(o, lambda e: 0.95 ** e),
     lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.95 ** e)),
    ("lambda-list", lambda o: lr_scheduler.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)]),
     lambda o: torch.optim.lr_scheduler.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 / (e + 1)])),
    ("cosine", lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=1e-3),
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=1e-3)),
    ("cosine-T7", lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=7),
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=7)),
    ("noam", lambda o: lr_scheduler.NoamLR(o, d_model=512, warmup_steps=8, factor=2.0),
     lambda o: torch.optim.lr_scheduler.LambdaLR(o, _noam_lambda(512, 8, 2.0))),
]


def _lr_sequence(opt, sched, steps=SCHED_STEPS):
    """The lr of every group for the first update and after each of ``steps`` steps."""
    seq = [list(sched.get_last_lr())]
    for _ in range(steps):
        opt.step()
        sched.step()
        assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
        seq.append(list(sched.get_last_lr()))
    return seq


def _sgd_groups(device, lrs=LRS):
    return optim.SGD([{"params": [mg.zeros(1, device=device, requires_grad=True)], "lr": lr}
                      for lr in lrs], lr=lrs[0])


@needs_torch
@pytest.mark.parametrize("make, make_torch", [c[1:] for c in SCHEDULERS],
                         ids=[c[0] for c in SCHEDULERS])
def test_scheduler_matches_torch(device, make, make_torch):
    opt = _sgd_groups(device)
    ref = torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": lr}
                           for lr in LRS], lr=LRS[0])
    sched, ref_sched = make(opt), make_torch(ref)
    assert [g["initial_lr"] for g in opt.param_groups] == list(LRS)
    ours, theirs = _lr_sequence(opt, sched), _lr_sequence(ref, ref_sched)
    assert ours == theirs  # the same float operations in the same order: exact
    assert sched.last_epoch == ref_sched.last_epoch == SCHED_STEPS


def test_noam_formula(device):
    opt = _sgd_groups(device, lrs=(1.0,))
    sched = lr_scheduler.NoamLR(opt, d_model=64, warmup_steps=4)
    lrs = [lr for (lr,) in _lr_sequence(opt, sched, 10)]
    expected = [64 ** -0.5 * min(s ** -0.5, s * 4 ** -1.5) for s in range(1, 12)]
    assert lrs == pytest.approx(expected, rel=1e-15)
    assert max(lrs) == lrs[3]  # the peak is the warmup_steps-th update


@pytest.mark.parametrize("warmup, total, eta_min", [(5, 20, 1e-4), (0, 12, 0.0), (4, 5, 0.01)])
def test_warmup_cosine_formula(device, warmup, total, eta_min):
    def expected(t, base):
        if t < warmup:
            return base * t / warmup
        progress = min(1.0, (t - warmup) / (total - warmup))
        return eta_min + (base - eta_min) * 0.5 * (1 + math.cos(math.pi * progress))

    opt = _sgd_groups(device)
    sched = lr_scheduler.WarmupCosineLR(opt, warmup_steps=warmup, total_steps=total,
                                        eta_min=eta_min)
    seq = _lr_sequence(opt, sched)
    for t, lrs in enumerate(seq):
        assert lrs == pytest.approx([expected(t, base) for base in LRS], rel=1e-12, abs=1e-15)
    assert seq[warmup] == pytest.approx(list(LRS), rel=1e-15)
    assert seq[total] == seq[-1] == pytest.approx([eta_min] * 2, abs=1e-15)
    if warmup:
        assert seq[0] == [0.0, 0.0]


def test_warmup_cosine_rejects_bad_steps(device):
    for warmup, total in [(10, 5), (5, 5), (-1, 5)]:
        with pytest.raises(ValueError, match="warmup_steps < total_steps"):
            lr_scheduler.WarmupCosineLR(_sgd_groups(device), warmup, total)


@pytest.mark.parametrize("make", [
    lambda o: lr_scheduler.CosineAnnealingLR(o, T_max=10, eta_min=1e-3),
    lambda o: lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e),
    lambda o: lr_scheduler.NoamLR(o, d_model=16, warmup_steps=5),
    lambda o: lr_scheduler.WarmupCosineLR(o, warmup_steps=5, total_steps=25),
], ids=["cosine", "lambda", "noam", "warmup-cosine"])
def test_scheduler_state_dict_round_trip(device, make):
    opt = _sgd_groups(device)
    straight = _lr_sequence(opt, make(opt))

    opt = _sgd_groups(device)
    sched = make(opt)
    first = _lr_sequence(opt, sched, 12)
    opt_state, sched_state = copy.deepcopy(opt.state_dict()), sched.state_dict()
    opt2 = _sgd_groups(device, lrs=(0.5, 0.5))
    sched2 = make(opt2)  # as PyTorch advises: build the scheduler, then load both
    opt2.load_state_dict(opt_state)
    sched2.load_state_dict(sched_state)
    assert sched2.last_epoch == 12 and sched2.base_lrs == list(LRS)
    assert first + _lr_sequence(opt2, sched2, SCHED_STEPS - 12)[1:] == straight


def test_lambda_scheduler_state_dict_leaves_functions_out(device):
    sched = lr_scheduler.LambdaLR(_sgd_groups(device), lambda e: 1.0)
    assert sched.state_dict()["lr_lambdas"] == [None, None]
    assert "optimizer" not in sched.state_dict()


def test_resuming_a_scheduler_needs_initial_lr(device):
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.LambdaLR(_sgd_groups(device), lambda e: 1.0, last_epoch=5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("beta1", [0.9, 0.3, 0.0])
def test_the_adam_kernel_is_the_formula_bit_for_bit(dtype, beta1):
    """backend.adam on the host (one scratch array) against Adam's update written out as
    NumPy expressions, over a few steps: moments and update equal to the last bit."""
    from minigrad.backend.kernels import adam
    rng = np.random.default_rng(0)
    m, v = rng.standard_normal(257).astype(dtype), rng.random(257).astype(dtype)
    m_ref, v_ref = m.copy(), v.copy()
    for step in range(1, 5):
        g = rng.standard_normal(257).astype(dtype)
        step_size, bc2 = 1e-3 / (1 - beta1 ** step), (1 - 0.999 ** step) ** 0.5
        update = adam(g, m, v, beta1, 0.999, step_size, bc2, 1e-8)
        w1 = 1.0 - beta1
        if w1 < 0.5:
            m_ref = m_ref + w1 * (g - m_ref)
        else:
            m_ref = g - (g - m_ref) * (1.0 - w1)
        v_ref = v_ref * 0.999 + (1.0 - 0.999) * g * g
        expected = (-step_size * m_ref) / ((np.sqrt(v_ref) / bc2) + 1e-8)
        assert update.dtype == dtype
        np.testing.assert_array_equal(m, m_ref)
        np.testing.assert_array_equal(v, v_ref)
        np.testing.assert_array_equal(update, expected)


@pytest.mark.parametrize("name, kw", [
    ("Adam", dict(lr=0.01)), ("Adam", dict(lr=0.01, weight_decay=0.1, maximize=True)),
    ("AdamW", dict(lr=0.01, betas=(0.5, 0.9)))], ids=["Adam", "Adam-wd-maximize", "AdamW"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_adam_steps_a_group_at_once_bit_for_bit(monkeypatch, name, kw, dtype):
    """On the CPU a group whose parameters all have gradients steps at once over flat
    moments (each parameter's state views them): the same bits as one parameter at a time,
    through a missing gradient (one at a time, then at once again once the step counts
    agree) and a state_dict reload (at once again, from the loaded state)."""
    init, grads = _init(dtype), _grads(dtype, 8)
    grads[3][1] = None  # parameter 1 falls one step behind from here
    runs, at_once = [], optim.Adam._step_together
    for together in (True, False):
        seen = []

        def spy(*args):  # which way each step went
            seen.append(together and at_once(*args))
            return seen[-1]
        monkeypatch.setattr(optim.Adam, "_step_together", spy)
        params = _mg_params(init, "cpu")
        opt = getattr(optim, name)(params, **kw)
        for k, g in enumerate(grads):
            if k == 5:  # a checkpoint reloaded into a fresh optimiser, then at once again
                state = opt.state_dict()
                opt = getattr(optim, name)(params, **kw)
                opt.load_state_dict(state)
                for s in opt.state.values():
                    s["step"] = 5  # (the step counts made equal again)
            _set_grads(params, g, "cpu")
            opt.step()
        runs.append((params, opt, seen))
    (ours, opt, seen), (plain, ref, plain_seen) = runs
    assert seen == [True] * 3 + [False] * 2 + [True] * 3 and not any(plain_seen)
    flat = opt.state[ours[0]]["exp_avg"].array.base  # the moments: views of one array
    assert flat is not None and all(opt.state[p]["exp_avg"].array.base is flat for p in ours)
    for p, q in zip(ours, plain):
        np.testing.assert_array_equal(p.numpy(), q.numpy())
        assert p._version == q._version
        assert list(opt.state[p]) == list(ref.state[q]) == ["step", "exp_avg", "exp_avg_sq"]
        for key in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(opt.state[p][key].numpy(), ref.state[q][key].numpy())
