"""The lr schedulers against torch.optim.lr_scheduler (every lr of 40+ steps, exactly, and
the state dicts), their compositions, resuming mid-way, ReduceLROnPlateau on the same
metrics, OneCycleLR's momentum, the errors; and the implementation keywords of the
optimisers and of gradient clipping (foreach, fused, capturable, differentiable)."""
import copy
import math
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.nn.utils import clip_grad_norm_, clip_grad_value_
from minigrad.optim import lr_scheduler
from tests.torch_ref import needs_torch, raises_as_torch, torch

LRS = (0.1, 0.02)
STEPS = 45


def _optimizer(M, device, name="SGD", lrs=LRS, **kw):
    """An optimiser of ``M`` (minigrad or torch) with one parameter per lr, one group each."""
    make = (lambda: mg.zeros(1, device=device, requires_grad=True)) if M is mg else \
        (lambda: torch.zeros(1, requires_grad=True))
    return getattr(M.optim, name)([{"params": [make()], "lr": lr} for lr in lrs], lr=lrs[0], **kw)


def _momenta(opt):
    return [g["betas"] if "betas" in g else g.get("momentum") for g in opt.param_groups]


def _sequence(opt, sched, steps=STEPS, metrics=None):
    """The lrs (and momenta) of every group at construction and after each of ``steps``
    steps, each lr as ``get_last_lr()`` gives it, which must be what the groups hold."""
    seq = [(list(sched.get_last_lr()), _momenta(opt))]
    for k in range(steps):
        opt.step()
        if metrics is None:
            sched.step()
        else:
            sched.step(metrics[k])
        assert sched.get_last_lr() == [g["lr"] for g in opt.param_groups]
        seq.append((list(sched.get_last_lr()), _momenta(opt)))
    return seq


# (id, scheduler of S = M.optim.lr_scheduler on optimiser o, optimiser name, its keywords)
SCHEDULERS = [
    ("step", lambda S, o: S.StepLR(o, 3)),
    ("step-gamma", lambda S, o: S.StepLR(o, step_size=7, gamma=0.5)),
    ("multistep", lambda S, o: S.MultiStepLR(o, [5, 10, 10, 30], gamma=0.3)),
    ("multistep-unsorted", lambda S, o: S.MultiStepLR(o, milestones=(12, 3))),
    ("exponential", lambda S, o: S.ExponentialLR(o, 0.95)),
    ("exponential-up", lambda S, o: S.ExponentialLR(o, gamma=1.05)),
    ("constant", lambda S, o: S.ConstantLR(o)),
    ("constant-half", lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=10)),
    ("linear", lambda S, o: S.LinearLR(o)),
    ("linear-down", lambda S, o: S.LinearLR(o, start_factor=1.0, end_factor=0.0,
                                            total_iters=30)),
    ("linear-part", lambda S, o: S.LinearLR(o, 0.25, 0.75, 10)),
    ("multiplicative", lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95)),
    ("multiplicative-list", lambda S, o: S.MultiplicativeLR(
        o, [lambda e: 0.9 if e % 2 else 1.0, lambda e: 1.0 + 1e-2 * e])),
    ("polynomial", lambda S, o: S.PolynomialLR(o)),
    ("polynomial-square", lambda S, o: S.PolynomialLR(o, total_iters=30, power=2.0)),
    ("polynomial-sqrt", lambda S, o: S.PolynomialLR(o, 25, 0.5)),
    ("lambda", lambda S, o: S.LambdaLR(o, lambda e: 1 / (1 + e) ** 0.5)),
    ("cosine", lambda S, o: S.CosineAnnealingLR(o, T_max=10, eta_min=1e-3)),
    ("cosine-T7", lambda S, o: S.CosineAnnealingLR(o, 7)),
    ("warm-restarts", lambda S, o: S.CosineAnnealingWarmRestarts(o, 10)),
    ("warm-restarts-mult", lambda S, o: S.CosineAnnealingWarmRestarts(o, 3, T_mult=2,
                                                                      eta_min=1e-4)),
    ("warm-restarts-1", lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=1)),
    ("onecycle-sgd", lambda S, o: S.OneCycleLR(o, 0.5, total_steps=STEPS), "SGD",
     dict(momentum=0.9)),
    ("onecycle-adam-linear", lambda S, o: S.OneCycleLR(
        o, [1.0, 0.2], epochs=9, steps_per_epoch=5, pct_start=0.25, anneal_strategy="linear"),
     "Adam", {}),
    ("onecycle-three-phase", lambda S, o: S.OneCycleLR(
        o, 0.3, total_steps=STEPS, three_phase=True, div_factor=10.0, final_div_factor=100.0),
     "AdamW", {}),
    ("onecycle-three-phase-linear", lambda S, o: S.OneCycleLR(
        o, 0.3, total_steps=50, three_phase=True, anneal_strategy="linear",
        base_momentum=[0.8, 0.7], max_momentum=(0.99, 0.9)), "SGD", dict(momentum=0.5)),
    ("onecycle-no-momentum", lambda S, o: S.OneCycleLR(
        o, 0.5, total_steps=60, cycle_momentum=False, pct_start=0.5), "SGD", {}),
]

COMBINATIONS = [
    ("sequential-warmup-cosine", lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, 0.1, total_iters=5), S.CosineAnnealingLR(o, 35)], milestones=[5])),
    ("sequential-three", lambda S, o: S.SequentialLR(
        o, [S.ConstantLR(o, 0.5, total_iters=3), S.ExponentialLR(o, 0.9), S.StepLR(o, 4)],
        [6, 20])),
    ("sequential-closed-form", lambda S, o: S.SequentialLR(
        o, [S.ExponentialLR(o, 0.9), S.MultiStepLR(o, [3, 8])], [10])),
    ("sequential-lambda", lambda S, o: S.SequentialLR(
        o, [S.LambdaLR(o, lambda e: (e + 1) / 5), S.PolynomialLR(o, 30, 2.0)], [4])),
    ("sequential-restarts", lambda S, o: S.SequentialLR(
        o, [S.LinearLR(o, 0.5, total_iters=4), S.CosineAnnealingWarmRestarts(o, 6)], [4])),
    ("chained", lambda S, o: S.ChainedScheduler([S.ExponentialLR(o, 0.95),
                                                 S.StepLR(o, 5, 0.5)])),
    ("chained-warmup-cosine", lambda S, o: S.ChainedScheduler(
        [S.LinearLR(o, 0.2, total_iters=8), S.CosineAnnealingLR(o, 40, 1e-4)])),
    ("chained-given-optimizer", lambda S, o: S.ChainedScheduler(
        [S.ConstantLR(o, 0.5, total_iters=4), S.MultiplicativeLR(o, lambda e: 0.97)],
        optimizer=o)),
    ("chained-sequential", lambda S, o: S.ChainedScheduler(
        [S.SequentialLR(o, [S.ConstantLR(o, 0.5, 3), S.ExponentialLR(o, 0.9)], [5]),
         S.StepLR(o, 4, 0.5)])),
]


def _unpack(case):
    name, build, *rest = case
    opt_name, kw = rest if rest else ("SGD", {})
    return build, opt_name, kw


ALL = SCHEDULERS + COMBINATIONS
IDS = [c[0] for c in ALL]


@needs_torch
@pytest.mark.parametrize("case", ALL, ids=IDS)
def test_lrs_and_state_dict_match_torch(device, case):
    build, opt_name, kw = _unpack(case)
    opt, ref = _optimizer(mg, device, opt_name, **kw), _optimizer(torch, None, opt_name, **kw)
    sched, ref_sched = build(lr_scheduler, opt), build(torch.optim.lr_scheduler, ref)
    assert [g.get("initial_lr") for g in opt.param_groups] == \
        [g.get("initial_lr") for g in ref.param_groups]
    ours, theirs = _sequence(opt, sched), _sequence(ref, ref_sched)
    assert ours == theirs  # PyTorch's float operations in PyTorch's order: exact
    sd, ref_sd = sched.state_dict(), ref_sched.state_dict()
    assert list(sd) == list(ref_sd) and sd == ref_sd
    group_keys = [sorted(k for k in g if k != "params") for g in opt.param_groups]
    assert group_keys == [sorted(k for k in g if k != "params") for g in ref.param_groups]


@pytest.mark.parametrize("case", ALL, ids=IDS)
def test_resume_from_state_dicts_mid_way(device, case):
    """Optimiser and scheduler state dicts saved after 17 steps, loaded into a fresh
    optimiser (other lrs) and scheduler: the rest of the schedule is the straight one's."""
    build, opt_name, kw = _unpack(case)
    opt = _optimizer(mg, device, opt_name, **kw)
    straight = _sequence(opt, build(lr_scheduler, opt))

    opt = _optimizer(mg, device, opt_name, **kw)
    sched = build(lr_scheduler, opt)
    first = _sequence(opt, sched, 17)
    opt_state, sched_state = copy.deepcopy(opt.state_dict()), copy.deepcopy(sched.state_dict())
    opt2 = _optimizer(mg, device, opt_name, lrs=(0.5, 0.5), **kw)
    sched2 = build(lr_scheduler, opt2)  # as PyTorch advises: build, then load both
    opt2.load_state_dict(opt_state)
    sched2.load_state_dict(sched_state)
    assert first + _sequence(opt2, sched2, STEPS - 17)[1:] == straight


RESUMABLE = [c for c in SCHEDULERS if "list" not in c[0]]


@needs_torch
@pytest.mark.parametrize("case", RESUMABLE, ids=[c[0] for c in RESUMABLE])
def test_resume_with_last_epoch_as_torch(device, case):
    """A scheduler built with last_epoch=20 on an optimiser that loaded the groups (with
    their initial_lr) after 20 steps: the lrs from there on are PyTorch's."""
    build, opt_name, kw = _unpack(case)

    def resumed(M, dev):
        opt = _optimizer(M, dev, opt_name, **kw)
        _sequence(opt, build(M.optim.lr_scheduler, opt), 20)
        fresh = _optimizer(M, dev, opt_name, **kw)
        fresh.load_state_dict(opt.state_dict())
        sched = build(_with_last_epoch(M.optim.lr_scheduler, 20), fresh)
        assert sched.last_epoch == 21  # (the construction's step is the 21st)
        return _sequence(fresh, sched, 20)

    assert resumed(mg, device) == resumed(torch, None)


def _with_last_epoch(S, last_epoch):
    """``S`` whose scheduler classes all get ``last_epoch``."""
    class WithLastEpoch:
        def __getattr__(self, name):
            cls = getattr(S, name)
            return lambda *a, **kw: cls(*a, last_epoch=last_epoch, **kw)
    return WithLastEpoch()


@needs_torch
@pytest.mark.parametrize("make", [
    lambda S, o: S.StepLR(o, 4, last_epoch=3),
    lambda S, o: S.OneCycleLR(o, 0.1, total_steps=10, last_epoch=2),
    lambda S, o: S.CosineAnnealingWarmRestarts(o, 5, last_epoch=0),
], ids=["StepLR", "OneCycleLR", "CosineAnnealingWarmRestarts"])
def test_resuming_needs_initial_lr_as_torch(device, make):
    message = raises_as_torch(lambda M: make(M.optim.lr_scheduler, _sgd(M, momentum=0.9)),
                              KeyError, device)
    assert "initial_lr" in message


# --- step(epoch): the closed forms --------------------------------------------------------

CLOSED_FORMS = [c for c in SCHEDULERS if c[0].split("-")[0] in (
    "step", "multistep", "exponential", "constant", "linear", "polynomial", "cosine")]


@needs_torch
@pytest.mark.parametrize("case", CLOSED_FORMS, ids=[c[0] for c in CLOSED_FORMS])
def test_step_with_an_epoch_uses_the_closed_form_as_torch(device, case):
    build, opt_name, kw = _unpack(case)
    runs = []
    for M, dev in ((mg, device), (torch, None)):
        opt = _optimizer(M, dev, opt_name, **kw)
        sched = build(M.optim.lr_scheduler, opt)
        lrs = []
        for epoch in (0, 1, 5, 3, 10, 11, 30, 2, 40, 7):
            opt.step()
            with pytest.warns(UserWarning, match="deprecated"):
                sched.step(epoch)
            lrs.append((sched.last_epoch, sched.get_last_lr()))
        runs.append(lrs)
    assert runs[0] == runs[1]


@needs_torch
@pytest.mark.parametrize("T_0, T_mult, iters", [(5, 1, 4), (3, 2, 3), (2, 3, 5), (4, 2, 1)])
def test_warm_restarts_with_fractional_epochs_as_torch(device, T_0, T_mult, iters):
    """SGDR stepped within epochs, ``step(epoch + i / iters)``, then on with ``step()``."""
    runs = []
    for M, dev in ((mg, device), (torch, None)):
        opt = _optimizer(M, dev)
        sched = M.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0, T_mult, eta_min=1e-3)
        seen = []
        for epoch in range(14):
            for i in range(iters):
                opt.step()
                sched.step(epoch + i / iters)
                seen.append((sched.get_last_lr(), sched.T_cur, sched.T_i, sched.last_epoch))
        for _ in range(10):
            opt.step()
            sched.step()
            seen.append((sched.get_last_lr(), sched.T_cur, sched.T_i, sched.last_epoch))
        runs.append(seen)
    assert runs[0] == runs[1]


# --- ReduceLROnPlateau ---------------------------------------------------------------------

def _falling(n=60):
    """Improves fast, then by less than the default relative threshold, then plateaus with
    ties and small bumps."""
    out = [1.0 / (1 + k) for k in range(10)]
    out += [out[-1] * (1 - 5e-5 * k) for k in range(1, 6)]
    return out + [0.09 + 0.01 * ((7 * k) % 5 - 2) for k in range(n - len(out))]


def _rising(n=60):
    return [-m for m in _falling(n)]


PLATEAU = [
    dict(), dict(mode="max"), dict(patience=0), dict(patience=2, cooldown=3, factor=0.5),
    dict(threshold_mode="abs", threshold=0.01, patience=1),
    dict(mode="max", threshold_mode="abs", threshold=0.05, patience=1),
    dict(min_lr=[0.05, 1e-3], factor=0.5, patience=1),
    dict(min_lr=0.009, patience=0, factor=0.3),
    dict(eps=0.02, patience=0, factor=0.5), dict(threshold=0.0, patience=1, cooldown=1),
]


@needs_torch
@pytest.mark.parametrize("metrics", [_falling, _rising], ids=["falling", "rising"])
@pytest.mark.parametrize("kw", PLATEAU, ids=lambda kw: "-".join(f"{k}={v}" for k, v in
                                                                kw.items()) or "defaults")
def test_reduce_on_plateau_as_torch(device, kw, metrics):
    values = metrics()
    runs = []
    for M, dev in ((mg, device), (torch, None)):
        opt = _optimizer(M, dev)
        sched = M.optim.lr_scheduler.ReduceLROnPlateau(opt, **kw)
        seen = []
        for k, value in enumerate(values):
            opt.step()
            sched.step(M.tensor(value) if k % 3 == 0 else value)  # a 0-d tensor or a float
            seen.append((sched.get_last_lr(), sched.best, sched.num_bad_epochs,
                         sched.cooldown_counter, sched.last_epoch, sched.in_cooldown))
        runs.append((seen, sched.state_dict()))
    (ours, sd), (theirs, ref_sd) = runs
    assert ours == theirs
    assert list(sd) == list(ref_sd) and sd == ref_sd


def test_reduce_on_plateau_resumes_from_its_state_dict(device):
    values = _falling()
    opt = _optimizer(mg, device)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=1, cooldown=2, mode="min")
    straight = _sequence(opt, sched, len(values), values)
    opt = _optimizer(mg, device)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=1, cooldown=2)
    first = _sequence(opt, sched, 25, values)
    opt_state, sched_state = copy.deepcopy(opt.state_dict()), copy.deepcopy(sched.state_dict())
    opt2 = _optimizer(mg, device)
    sched2 = lr_scheduler.ReduceLROnPlateau(opt2, mode="max")  # the mode comes from the dict
    opt2.load_state_dict(opt_state)
    sched2.load_state_dict(sched_state)
    assert sched2.mode_worse == math.inf
    assert first + _sequence(opt2, sched2, len(values) - 25, values[25:])[1:] == straight


@needs_torch
def test_reduce_on_plateau_with_an_epoch_and_a_new_group_as_torch(device):
    """step(metric, epoch) warns and sets last_epoch; a group added later takes the scalar
    min_lr (a list of min_lrs raises RuntimeError instead)."""
    runs = []
    for M, dev in ((mg, device), (torch, None)):
        opt = _optimizer(M, dev, lrs=(0.1,))
        sched = M.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=0.004)
        with pytest.warns(UserWarning, match="deprecated"):
            sched.step(1.0, epoch=7)
        opt.add_param_group({"params": [M.zeros(1, requires_grad=True)], "lr": 0.05})
        for value in (2.0, 3.0, 4.0):
            sched.step(value)
        runs.append((sched.last_epoch, sched.get_last_lr(), sched.min_lrs))
    assert runs[0] == runs[1]
    assert runs[0][0] == 10 and runs[0][2] == [0.004, 0.004]

    def grows(M):
        opt = M.optim.SGD([M.zeros(1, requires_grad=True)], lr=0.1)
        sched = M.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0, min_lr=[0.0])
        opt.add_param_group({"params": [M.zeros(1, requires_grad=True)]})
        sched.step(1.0)
        sched.step(2.0)
    assert "param groups" in raises_as_torch(grows, RuntimeError, device)


# --- OneCycleLR's momentum -----------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("opt_name, kw", [("SGD", dict(momentum=0.9)),
                                          ("SGD", dict(momentum=0.9, nesterov=True)),
                                          ("Adam", dict(betas=(0.5, 0.9))), ("AdamW", {})],
                         ids=["SGD", "SGD-nesterov", "Adam", "AdamW"])
@pytest.mark.parametrize("three_phase", [False, True], ids=["two-phase", "three-phase"])
def test_onecycle_drives_the_momentum_as_torch(device, opt_name, kw, three_phase):
    """The momentum (SGD's, or Adam's beta1) that OneCycleLR writes at each step, and the
    parameters that the optimiser makes with it, equal PyTorch's."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(30)]
    runs = []
    for M in (mg, torch):
        w = mg.tensor(w0, device=device, requires_grad=True) if M is mg else \
            torch.tensor(w0, requires_grad=True)
        opt = getattr(M.optim, opt_name)([w], lr=0.1, **kw)
        sched = M.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=30,
                                                three_phase=three_phase, base_momentum=0.6,
                                                max_momentum=0.95)
        seen, params = [], []
        for g in grads:  # 30 steps: up to last_epoch == total_steps
            w.grad = M.tensor(g, device=device) if M is mg else torch.tensor(g)
            opt.step()
            sched.step()
            group = opt.param_groups[0]
            seen.append((group["lr"], group.get("momentum"), group.get("betas"),
                         group["max_momentum"], group["base_momentum"]))
            params.append(np.array(w.detach().numpy()))
        runs.append((seen, params))
    (ours, ours_w), (theirs, theirs_w) = runs
    assert ours == theirs
    assert min(m[1] or m[2][0] for m in ours) == pytest.approx(0.6)
    for a, b in zip(ours_w, theirs_w):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


@needs_torch
def test_onecycle_raises_past_total_steps_as_torch(device):
    def past(M):
        opt = M.optim.SGD([M.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
        sched = M.optim.lr_scheduler.OneCycleLR(opt, 0.1, epochs=2, steps_per_epoch=3)
        for _ in range(7):  # up to last_epoch == total_steps (6) is allowed
            opt.step()
            sched.step()
    assert "Tried to step 7 times" in raises_as_torch(past, ValueError, device)


# --- errors --------------------------------------------------------------------------------

def _sgd(M, **kw):
    return M.optim.SGD([M.zeros(1, requires_grad=True)], lr=0.1, **kw)


def _on(opt, build):
    """``build(opt)``: a program that needs one optimiser twice."""
    return build(opt)


def _constant_factor_0(M, S):
    sched = S.ConstantLR(_sgd(M), factor=0.0, total_iters=2)
    sched.step()
    sched.step()  # 1 / factor at total_iters


ERRORS = [  # (id, program of M, exception)
    ("not-an-optimizer", lambda M, S: S.StepLR([M.zeros(1)], 3), TypeError),
    ("constant-factor", lambda M, S: S.ConstantLR(_sgd(M), factor=1.5), ValueError),
    ("constant-factor-0", _constant_factor_0, ZeroDivisionError),
    ("linear-start", lambda M, S: S.LinearLR(_sgd(M), start_factor=0), ValueError),
    ("linear-end", lambda M, S: S.LinearLR(_sgd(M), end_factor=1.5), ValueError),
    ("lambdas-count", lambda M, S: S.LambdaLR(_sgd(M), [lambda e: 1, lambda e: 1]), ValueError),
    ("multiplicative-callable", lambda M, S: S.MultiplicativeLR(_sgd(M), 0.9), TypeError),
    ("multiplicative-count", lambda M, S: S.MultiplicativeLR(_sgd(M), []), ValueError),
    ("restarts-T0", lambda M, S: S.CosineAnnealingWarmRestarts(_sgd(M), 0), ValueError),
    ("restarts-T0-float", lambda M, S: S.CosineAnnealingWarmRestarts(_sgd(M), 2.5), ValueError),
    ("restarts-T0-str", lambda M, S: S.CosineAnnealingWarmRestarts(_sgd(M), "2"), TypeError),
    ("restarts-Tmult", lambda M, S: S.CosineAnnealingWarmRestarts(_sgd(M), 2, 0), ValueError),
    ("restarts-eta", lambda M, S: S.CosineAnnealingWarmRestarts(_sgd(M), 2, eta_min="0"),
     ValueError),
    ("restarts-negative-epoch", lambda M, S: S.CosineAnnealingWarmRestarts(_sgd(M), 2).step(-1),
     ValueError),
    ("onecycle-no-steps", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, epochs=3), ValueError),
    ("onecycle-total", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, total_steps=0), ValueError),
    ("onecycle-total-float", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, 10.0), ValueError),
    ("onecycle-epochs", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, epochs=0, steps_per_epoch=2),
     ValueError),
    ("onecycle-steps-per-epoch", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, epochs=2,
                                                           steps_per_epoch=-1), ValueError),
    ("onecycle-pct", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, 10, pct_start=1.5), ValueError),
    ("onecycle-pct-int", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, 10, pct_start=1), ValueError),
    ("onecycle-anneal", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, 10, anneal_strategy="exp"),
     ValueError),
    ("onecycle-max-lrs", lambda M, S: S.OneCycleLR(_sgd(M), [0.1, 0.2], 10), ValueError),
    ("onecycle-momenta", lambda M, S: S.OneCycleLR(_sgd(M), 0.1, 10, max_momentum=[0.9, 0.8]),
     ValueError),
    ("onecycle-no-momentum", lambda M, S: S.OneCycleLR(
        M.optim.Optimizer([M.zeros(1, requires_grad=True)], {"lr": 0.1}), 0.1, 10), ValueError),
    ("onecycle-not-an-optimizer", lambda M, S: S.OneCycleLR(None, 0.1, 10), TypeError),
    ("sequential-empty", lambda M, S: S.SequentialLR(_sgd(M), [], []), ValueError),
    ("sequential-milestones", lambda M, S: _on(_sgd(M), lambda o: S.SequentialLR(
        o, [S.StepLR(o, 2)], [3])), ValueError),
    ("sequential-plateau", lambda M, S: _on(_sgd(M), lambda o: S.SequentialLR(
        o, [S.ReduceLROnPlateau(o)], [])), ValueError),
    ("sequential-no-optimizer", lambda M, S: S.SequentialLR(_sgd(M), [object()], []), TypeError),
    ("sequential-other-optimizer", lambda M, S: S.SequentialLR(
        _sgd(M), [S.ExponentialLR(_sgd(M), 0.9)], []), ValueError),
    ("sequential-epoch", lambda M, S: _on(_sgd(M), lambda o: S.SequentialLR(
        o, [S.StepLR(o, 2)], []).step(3)), TypeError),
    ("chained-empty", lambda M, S: S.ChainedScheduler([]), ValueError),
    ("chained-other-optimizer", lambda M, S: S.ChainedScheduler(
        [S.StepLR(_sgd(M), 2), S.StepLR(_sgd(M), 2)]), ValueError),
    ("chained-plateau", lambda M, S: S.ChainedScheduler([S.ReduceLROnPlateau(_sgd(M))]),
     ValueError),
    ("plateau-factor", lambda M, S: S.ReduceLROnPlateau(_sgd(M), factor=1.0), ValueError),
    ("plateau-mode", lambda M, S: S.ReduceLROnPlateau(_sgd(M), mode="avg"), ValueError),
    ("plateau-threshold-mode", lambda M, S: S.ReduceLROnPlateau(_sgd(M), threshold_mode="x"),
     ValueError),
    ("plateau-min-lrs", lambda M, S: S.ReduceLROnPlateau(_sgd(M), min_lr=[0.1, 0.2]),
     ValueError),
    ("plateau-not-an-optimizer", lambda M, S: S.ReduceLROnPlateau("sgd"), TypeError),
    ("plateau-metric", lambda M, S: S.ReduceLROnPlateau(_sgd(M)).step("low"), ValueError),
]


@needs_torch
@pytest.mark.parametrize("program, kind", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_as_torch(device, program, kind):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raises_as_torch(lambda M: program(M, M.optim.lr_scheduler), kind, device)


@needs_torch
def test_get_lr_outside_step_warns_as_torch(device):
    """get_lr() called directly warns (the lr of the last step is get_last_lr()); a
    CosineAnnealingLR resumed with last_epoch gives the closed form there, as PyTorch."""
    runs = []
    for M, dev in ((mg, device), (torch, None)):
        opt = _optimizer(M, dev)
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"] * 2
        sched = M.optim.lr_scheduler.CosineAnnealingLR(opt, 10, last_epoch=4)
        with pytest.warns(UserWarning, match="get_last_lr"):
            runs.append((sched.get_lr(), sched.get_last_lr()))
    assert runs[0] == runs[1]


@needs_torch
def test_a_tensor_lr_is_filled_in_place_as_torch(device):
    runs = []
    for M in (mg, torch):
        lr = mg.tensor(0.1, device=device) if M is mg else torch.tensor(0.1)
        opt = M.optim.SGD([M.zeros(1, requires_grad=True)], lr=lr)
        sched = M.optim.lr_scheduler.StepLR(opt, 2, 0.3)
        seen = []
        for _ in range(7):
            opt.step()
            sched.step()
            assert opt.param_groups[0]["lr"] is lr and sched.get_last_lr()[0] is not lr
            seen.append(float(sched.get_last_lr()[0]))
        runs.append((seen, float(sched.base_lrs[0])))
    assert runs[0] == runs[1]


# --- the optimisers' implementation keywords -----------------------------------------------

KEYWORDS = [
    ("SGD", dict(momentum=0.9)), ("SGD", dict(foreach=True, momentum=0.9, nesterov=True)),
    ("SGD", dict(fused=True, maximize=True)), ("SGD", dict(foreach=False, differentiable=False)),
    ("Adam", {}), ("Adam", dict(foreach=True)), ("Adam", dict(fused=True, amsgrad=True)),
    ("Adam", dict(fused=True, capturable=True, weight_decay=0.1)),
    ("Adam", dict(foreach=False, decoupled_weight_decay=True)),
    ("AdamW", dict(fused=False, foreach=True)), ("AdamW", dict(fused=True, capturable=True)),
]


KEYWORD_IDS = ["-".join([n] + [f"{k}={v}" for k, v in kw.items()]) for n, kw in KEYWORDS]


@needs_torch
@pytest.mark.parametrize("name, kw", KEYWORDS, ids=KEYWORD_IDS)
def test_implementation_keywords_are_kept_and_change_no_number(device, name, kw):
    """foreach, fused, capturable and differentiable sit in the defaults and the groups (so
    in the state dict) as in PyTorch, and the parameters after a few steps are the bits of
    the optimiser without them."""
    rng = np.random.default_rng(0)
    init = [rng.standard_normal(s) for s in ((3, 2), (4,))]
    grads = [[rng.standard_normal(a.shape) for a in init] for _ in range(4)]
    plain_kw = {k: v for k, v in kw.items()
                if k not in ("foreach", "fused", "capturable", "differentiable")}
    results = []
    for kwargs in (kw, plain_kw):
        params = [mg.tensor(a, device=device, requires_grad=True) for a in init]
        opt = getattr(mg.optim, name)([{"params": params[:1]}, {"params": params[1:],
                                                                "lr": 0.05}], **kwargs)
        for gs in grads:
            for p, g in zip(params, gs):
                p.grad = mg.tensor(g, device=device)
            opt.step()
        results.append((opt, [p.numpy() for p in params]))
    (opt, ours), (_, plain) = results
    for a, b in zip(ours, plain):
        np.testing.assert_array_equal(a, b)
    ref = getattr(torch.optim, name)([{"params": [torch.zeros(3, 2, requires_grad=True)]},
                                      {"params": [torch.zeros(4, requires_grad=True)],
                                       "lr": 0.05}], **kw)
    assert list(opt.defaults.items()) == list(ref.defaults.items())
    assert opt.state_dict()["param_groups"] == ref.state_dict()["param_groups"]


def test_a_checkpoint_without_the_keywords_loads_with_the_defaults(device):
    opt = mg.optim.Adam([mg.ones(2, device=device, requires_grad=True)], fused=True)
    state = opt.state_dict()
    for key in ("foreach", "fused", "capturable", "differentiable"):
        del state["param_groups"][0][key]
    opt2 = mg.optim.Adam([mg.ones(2, device=device, requires_grad=True)], foreach=True)
    opt2.load_state_dict(state)
    group = opt2.param_groups[0]
    assert (group["foreach"], group["fused"], group["capturable"], group["differentiable"]) == \
        (True, None, False, False)


def _stepped(M, name, **kw):
    p = M.zeros(2, requires_grad=True)
    p.grad = M.ones(2)
    getattr(M.optim, name)([p], **kw).step()


def _fused_integer_step(M):
    p = M.zeros(2, dtype=M.int64)
    p.grad = M.zeros(2, dtype=M.int64)
    M.optim.Adam([p], fused=True).step()


KEYWORD_ERRORS = [  # (id, program of M, exception, device to run minigrad on)
    ("SGD-fused-differentiable", lambda M: _sgd(M, fused=True, differentiable=True),
     RuntimeError, None),
    ("SGD-fused-foreach", lambda M: _sgd(M, fused=True, foreach=True), RuntimeError, None),
    ("SGD-capturable", lambda M: _sgd(M, capturable=True), TypeError, None),
    ("Adam-fused-differentiable", lambda M: M.optim.Adam(
        [M.zeros(1, requires_grad=True)], fused=True, differentiable=True), RuntimeError, None),
    ("AdamW-fused-differentiable", lambda M: M.optim.AdamW(
        [M.zeros(1, requires_grad=True)], fused=True, differentiable=True), RuntimeError, None),
    ("AdamW-fused-foreach", lambda M: M.optim.AdamW(
        [M.zeros(1, requires_grad=True)], fused=True, foreach=True), RuntimeError, None),
    ("Adam-capturable-on-the-cpu", lambda M: _stepped(M, "Adam", capturable=True),
     AssertionError, "cpu"),
    ("AdamW-capturable-foreach-on-the-cpu", lambda M: _stepped(M, "AdamW", capturable=True,
                                                               foreach=True),
     AssertionError, "cpu"),
    ("Adam-foreach-differentiable", lambda M: _stepped(M, "Adam", foreach=True,
                                                       differentiable=True),
     AssertionError, None),
    ("Adam-differentiable-leaf", lambda M: _stepped(M, "Adam", differentiable=True),
     RuntimeError, None),
    ("SGD-differentiable-leaf", lambda M: _stepped(M, "SGD", differentiable=True, momentum=0.9),
     RuntimeError, None),
    ("Adam-fused-integer-parameter", lambda M: _fused_integer_step(M), RuntimeError, None),
]


@needs_torch
@pytest.mark.parametrize("program, kind, where", [c[1:] for c in KEYWORD_ERRORS],
                         ids=[c[0] for c in KEYWORD_ERRORS])
def test_keyword_combinations_raise_as_torch(device, program, kind, where):
    raises_as_torch(program, kind, where or device)


@needs_torch
def test_adam_step_count_is_an_int_where_torch_keeps_a_tensor(device):
    """PyTorch keeps ``step`` as a 0-d float32 Tensor; minigrad keeps a Python int (its
    flat group step, the checkpoints' JSON metadata and the compiled step's host numbers
    read it so), and loads either into an int, continuing the same."""
    w = mg.ones(3, device=device, requires_grad=True)
    tw = torch.ones(3, requires_grad=True)
    opt, ref = mg.optim.Adam([w], lr=0.1), torch.optim.Adam([tw], lr=0.1)
    for _ in range(3):
        w.grad, tw.grad = mg.ones(3, device=device), torch.ones(3)
        opt.step()
        ref.step()
    ref_step = ref.state[tw]["step"]
    assert ref_step.dtype == torch.float32 and ref_step.shape == ()
    assert type(opt.state[w]["step"]) is int and opt.state[w]["step"] == ref_step.item() == 3
    state = opt.state_dict()
    state["state"][0]["step"] = mg.tensor(3.0)  # as PyTorch writes it
    w2 = mg.tensor(w.numpy(), device=device, requires_grad=True)
    opt2 = mg.optim.Adam([w2], lr=0.1)
    opt2.load_state_dict(state)
    assert type(opt2.state[w2]["step"]) is int and opt2.state[w2]["step"] == 3


# --- clipping's foreach --------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("foreach", [None, True, False])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf])
def test_clipping_accepts_foreach_as_torch(device, foreach, norm_type):
    rng = np.random.default_rng(3)
    grads = [rng.standard_normal(s).astype(np.float32) * 3 for s in ((4, 5), (7,), (2, 3, 2))]
    results = []
    for kw in (dict(foreach=foreach), {}):
        ours = [mg.zeros(g.shape, device=device, requires_grad=True) for g in grads]
        for p, g in zip(ours, grads):
            p.grad = mg.tensor(g, device=device)
        total = clip_grad_norm_(ours, 1.0, norm_type, **kw)
        clip_grad_value_(ours[:2], 0.05, **kw)
        results.append((total.numpy(), [p.grad.numpy() for p in ours]))
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_array_equal(a, b)
    theirs = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, g in zip(theirs, grads):
        p.grad = torch.tensor(g)
    total = torch.nn.utils.clip_grad_norm_(theirs, 1.0, norm_type, foreach=foreach)
    torch.nn.utils.clip_grad_value_(theirs[:2], 0.05, foreach=foreach)
    np.testing.assert_allclose(results[0][0], total.numpy(), rtol=1e-6)
    for a, p in zip(results[0][1], theirs):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-6, atol=1e-7)


@needs_torch
@pytest.mark.parametrize("order", ["scheduler first", "optimizer first"])
def test_stepping_the_scheduler_before_the_optimizer_warns_as_torch(order):
    """PyTorch warns once, at the first scheduler step, if no optimizer step came before it
    (the first value of the schedule is then skipped); in the right order, nothing."""
    def run(lib, optim, sched):
        p = lib.zeros(2, requires_grad=True)
        opt = optim.SGD([p], lr=0.1)
        s = sched.LambdaLR(opt, lambda k: 0.5 ** k)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                (p * p).sum().backward()
                if order == "scheduler first":
                    s.step()
                    opt.step()
                else:
                    opt.step()
                    s.step()
        return [str(w.message) for w in caught if "before `optimizer.step()`" in str(w.message)]
    ours = run(mg, mg.optim, lr_scheduler)
    theirs = run(torch, torch.optim, torch.optim.lr_scheduler)
    assert len(ours) == len(theirs) == (1 if order == "scheduler first" else 0)
