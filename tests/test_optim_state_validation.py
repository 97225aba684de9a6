"""Loading an optimiser's or a scheduler's state dict checks it first, as a model's does: a
damaged dict (a key lost or renamed, a Tensor of another shape or dtype, a step count
that is not one, a param group that does not match) is refused with one ValueError naming
the entry and the key, and the optimiser is left as it was. Valid dicts, PyTorch's
included, still load."""
import copy

import numpy as np
import pytest

import minigrad as mg
from minigrad import optim
from minigrad.optim import lr_scheduler
from tests.torch_ref import needs_torch, torch

SHAPES = [(3, 2), (4,)]

# (id, optimiser name, keywords): every optimiser, with the settings that change its state
OPTIMISERS = [
    ("sgd", "SGD", dict(lr=0.1)),
    ("sgd-momentum", "SGD", dict(lr=0.1, momentum=0.9)),
    ("sgd-nesterov", "SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("adam", "Adam", dict(lr=0.01)),
    ("adam-amsgrad", "Adam", dict(lr=0.01, amsgrad=True)),
    ("adamw", "AdamW", dict(lr=0.01)),
    ("adamw-amsgrad", "AdamW", dict(lr=0.01, amsgrad=True)),
]


def _stepped(name, kw, M=mg, steps=2):
    """An optimiser of ``M`` (minigrad or torch) over two parameters, after ``steps`` steps."""
    rng = np.random.default_rng(0)
    params = [M.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
              for s in SHAPES]
    opt = getattr(M.optim, name)(params, **kw)
    for _ in range(steps):
        opt.zero_grad()
        sum((p * p).sum() for p in params).backward()
        opt.step()
    return opt


def _fresh(name, kw):
    return _stepped(name, kw, steps=0)


def _snapshot(opt):
    """What loading may not change: the state and the groups, by identity and by value."""
    state = {id(p): {k: (v.numpy().copy() if isinstance(v, mg.Tensor) else v)
                     for k, v in s.items()} for p, s in opt.state.items()}
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    return opt.state, opt.param_groups, state, groups


def _same(a, b):
    assert a[0] is b[0] and a[1] is b[1] and a[3] == b[3]
    assert a[2].keys() == b[2].keys()
    for k in a[2]:
        assert a[2][k].keys() == b[2][k].keys()
        for key in a[2][k]:
            np.testing.assert_array_equal(a[2][k][key], b[2][k][key])


def _rename(entry, old, new):
    entry[new] = entry.pop(old)


def _set(mapping, key, value):
    mapping[key] = value


# (id, which optimisers (ids), spoil(state dict), message): each refused with that message
DAMAGE = [
    ("no-exp_avg", "adam adam-amsgrad adamw adamw-amsgrad",
     lambda sd: sd["state"][1].pop("exp_avg"), r"state of parameter 1 \(group 0\) has no "
     r"'exp_avg' \(Adam(W)? with amsgrad=(True|False) keeps 'step', 'exp_avg'"),
    ("step-renamed", "adam adam-amsgrad adamw",
     lambda sd: _rename(sd["state"][0], "step", "sqep"), r"parameter 0 \(group 0\) has no 'step'"),
    ("no-exp_avg_sq", "adam adamw", lambda sd: sd["state"][0].pop("exp_avg_sq"),
     "has no 'exp_avg_sq'"),
    ("no-max_exp_avg_sq", "adam-amsgrad adamw-amsgrad",
     lambda sd: sd["state"][0].pop("max_exp_avg_sq"), "has no 'max_exp_avg_sq'"),
    ("max_exp_avg_sq-without-amsgrad", "adam adamw",
     lambda sd: _set(sd["state"][0], "max_exp_avg_sq", sd["state"][0]["exp_avg"]),
     r"has an unexpected 'max_exp_avg_sq' \(Adam(W)? with amsgrad=False keeps"),
    ("amsgrad-turned-on", "adam adamw",
     lambda sd: _set(sd["param_groups"][0], "amsgrad", True), "has no 'max_exp_avg_sq'"),
    ("unknown-key", "adam sgd-momentum", lambda sd: _set(sd["state"][1], "extra", 1.0),
     "parameter 1 \\(group 0\\) has an unexpected 'extra'"),
    ("no-momentum_buffer", "sgd-momentum sgd-nesterov",
     lambda sd: _rename(sd["state"][0], "momentum_buffer", "momentum_bufer"),
     r"has no 'momentum_buffer' \(SGD with momentum=0.9 keeps 'momentum_buffer'\)"),
    ("buffer-without-momentum", "sgd",
     lambda sd: _set(sd["state"], 0, {"momentum_buffer": mg.zeros(3, 2)}),
     r"unexpected 'momentum_buffer' \(SGD with momentum=0 keeps no state\)"),
    ("momentum-turned-off", "sgd-momentum",
     lambda sd: _set(sd["param_groups"][0], "momentum", 0), "unexpected 'momentum_buffer'"),
    ("wrong-shape", "adam sgd-momentum",
     lambda sd: _set(sd["state"][0], next(k for k in sd["state"][0] if k != "step"),
                     mg.zeros(2, 3)),
     r"of parameter 0 \(group 0\) has shape \(2, 3\), but the parameter has shape \(3, 2\)"),
    ("integer-dtype", "adam sgd-nesterov",
     lambda sd: _set(sd["state"][1], next(k for k in sd["state"][1] if k != "step"),
                     mg.zeros(4, dtype=mg.int64)),
     r"of parameter 1 \(group 0\) has dtype .*int64.*, not a floating point one"),
    ("not-a-tensor", "adam", lambda sd: _set(sd["state"][1], "exp_avg", [0.0] * 4),
     "state 'exp_avg' of parameter 1 \\(group 0\\) is a list, not a Tensor"),
    ("none-moment", "adam", lambda sd: _set(sd["state"][1], "exp_avg", None),
     "state 'exp_avg' of parameter 1 \\(group 0\\) is None"),
    ("negative-step", "adam adamw-amsgrad", lambda sd: _set(sd["state"][0], "step", -1),
     r"state 'step' of parameter 0 \(group 0\) is -1, not a whole number >= 0"),
    ("fractional-step", "adam", lambda sd: _set(sd["state"][0], "step", 1.5),
     "is 1.5, not a whole number"),
    ("text-step", "adam", lambda sd: _set(sd["state"][0], "step", "2"),
     "is '2', not a whole number"),
    ("nan-step", "adamw", lambda sd: _set(sd["state"][0], "step", float("nan")),
     "is nan, not a whole number"),
    ("vector-step", "adam", lambda sd: _set(sd["state"][0], "step", mg.ones(2)),
     "'step' of parameter 0 \\(group 0\\) is a Tensor of shape \\(2,\\)"),
    ("state-not-a-dict", "adam sgd-momentum", lambda sd: _set(sd["state"], 0, [1, 2]),
     "the state of parameter 0 \\(group 0\\) is a list, not a dict"),
    ("state-of-no-parameter", "adam sgd", lambda sd: _set(sd["state"], 9, {}),
     "state for parameter 9, which is in none"),
    ("no-lr", "adam sgd adamw", lambda sd: sd["param_groups"][0].pop("lr"),
     "parameter group 0 of the loaded state dict has no 'lr'"),
    ("lr-renamed", "sgd-momentum", lambda sd: _rename(sd["param_groups"][0], "lr", "lx"),
     "has no 'lr'"),
    ("no-momentum", "sgd sgd-momentum", lambda sd: sd["param_groups"][0].pop("momentum"),
     "has no 'momentum'"),
    ("no-betas", "adam", lambda sd: sd["param_groups"][0].pop("betas"), "has no 'betas'"),
    ("text-lr", "adam sgd", lambda sd: _set(sd["param_groups"][0], "lr", "0.1"),
     "has 'lr' = '0.1': expected a number"),
    ("three-betas", "adam adamw", lambda sd: _set(sd["param_groups"][0], "betas", [0.9] * 3),
     "'betas' = \\[0.9, 0.9, 0.9\\]: expected 2 numbers"),
    ("text-amsgrad", "adam", lambda sd: _set(sd["param_groups"][0], "amsgrad", "no"),
     "'amsgrad' = 'no': expected True or False"),
    ("text-fused", "adam sgd", lambda sd: _set(sd["param_groups"][0], "fused", "no"),
     "'fused' = 'no': expected None, True or False"),
    ("params-by-name", "adam", lambda sd: _set(sd["param_groups"][0], "params", ["a", "b"]),
     "names a parameter by 'a', not by its index"),
    ("params-twice", "sgd", lambda sd: _set(sd["param_groups"][0], "params", [0, 0]),
     "names parameter 0 again"),
    ("no-state", "adam", lambda sd: sd.pop("state"), "no 'state' entry"),
    ("groups-not-a-list", "sgd", lambda sd: _set(sd, "param_groups", {}),
     "'param_groups' is a dict, not a list"),
]

CASES = [(f"{d[0]}-{o[0]}", o[1], o[2], d[2], d[3])
         for d in DAMAGE for o in OPTIMISERS if o[0] in d[1].split()]


@pytest.mark.parametrize("name, kw, spoil, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_damaged_state_dict_is_refused_and_changes_nothing(name, kw, spoil, message):
    sd = copy.deepcopy(_stepped(name, kw).state_dict())
    spoil(sd)
    opt = _stepped(name, kw, steps=1)  # a loaded optimiser keeps its own state
    before = _snapshot(opt)
    with pytest.raises(ValueError, match=message) as caught:
        opt.load_state_dict(sd)
    assert "\n" not in str(caught.value)
    _same(before, _snapshot(opt))


def test_a_lost_moment_is_refused_at_load_not_filled_with_zeros():
    sd = _stepped("Adam", {}).state_dict()
    del sd["state"][0]["exp_avg"]
    opt = _fresh("Adam", {})
    with pytest.raises(ValueError, match="has no 'exp_avg'"):
        opt.load_state_dict(sd)
    assert not opt.state


@needs_torch
def test_torch_too_cannot_step_from_a_lost_moment():
    """PyTorch loads it and fails at its first step; minigrad refuses it at the load."""
    opt = _stepped("Adam", {}, M=torch)
    sd = copy.deepcopy(opt.state_dict())
    del sd["state"][0]["exp_avg"]
    fresh = _stepped("Adam", {}, M=torch, steps=0)
    fresh.load_state_dict(sd)
    sum((p * p).sum() for g in fresh.param_groups for p in g["params"]).backward()
    with pytest.raises(KeyError, match="exp_avg"):
        fresh.step()


@needs_torch
@pytest.mark.parametrize("spoil", [
    lambda sd: sd["param_groups"].append(copy.deepcopy(sd["param_groups"][0])),
    lambda sd: sd["param_groups"][0]["params"].append(7),
], ids=["groups", "group-size"])
@pytest.mark.parametrize("name, kw", [o[1:] for o in OPTIMISERS], ids=[o[0] for o in OPTIMISERS])
def test_refused_where_torch_refuses(name, kw, spoil):
    for M in (mg, torch):
        sd = copy.deepcopy(_stepped(name, kw, M=M).state_dict())
        spoil(sd)
        with pytest.raises(ValueError):
            _stepped(name, kw, M=M, steps=0).load_state_dict(sd)


@needs_torch
@pytest.mark.parametrize("name, kw", [o[1:] for o in OPTIMISERS], ids=[o[0] for o in OPTIMISERS])
def test_torch_state_dicts_still_load_and_continue_as_torch(name, kw):
    """PyTorch's state dict (its step a float32 Tensor, its Tensors as arrays) loads, and
    the next steps are PyTorch's."""
    ref = _stepped(name, kw, M=torch)
    sd = ref.state_dict()
    sd = {"state": {i: {k: (v.numpy().copy() if v is not None else None) for k, v in s.items()}
                    for i, s in sd["state"].items()},
          "param_groups": copy.deepcopy(sd["param_groups"])}
    ours = _stepped(name, kw, steps=0)
    for p, q in zip(ours.param_groups[0]["params"], ref.param_groups[0]["params"]):
        p.array[...] = q.detach().numpy()
    ours.load_state_dict(sd)
    for opt in (ours, ref):
        params = opt.param_groups[0]["params"]
        for _ in range(2):
            opt.zero_grad()
            sum((p * p).sum() for p in params).backward()
            opt.step()
    for p, q in zip(ours.param_groups[0]["params"], ref.param_groups[0]["params"]):
        np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_a_torch_sgd_dict_with_none_buffers_loads():
    """PyTorch's SGD may save ``momentum_buffer: None``; with or without momentum, it loads."""
    for kw in (dict(lr=0.1), dict(lr=0.1, momentum=0.9)):
        opt = _fresh("SGD", kw)
        opt.load_state_dict({"state": {0: {"momentum_buffer": None}},
                             "param_groups": copy.deepcopy(opt.state_dict()["param_groups"])})


def test_an_older_dict_without_the_newer_keywords_loads():
    sd = _stepped("Adam", dict(amsgrad=True)).state_dict()
    for key in ("maximize", "foreach", "capturable", "differentiable", "fused",
                "decoupled_weight_decay"):
        del sd["param_groups"][0][key]
    opt = _fresh("Adam", {})
    opt.load_state_dict(sd)
    assert opt.param_groups[0]["amsgrad"] is True and opt.param_groups[0]["maximize"] is False


def test_a_state_dict_round_trips_through_json_numbers():
    """A checkpoint stores the step count as a JSON number, maybe as a float: 2.0 is 2."""
    sd = _stepped("Adam", {}).state_dict()
    for s in sd["state"].values():
        s["step"] = float(s["step"])
    opt = _fresh("Adam", {})
    opt.load_state_dict(sd)
    assert [s["step"] for s in opt.state.values()] == [2, 2]


# --- schedulers -------------------------------------------------------------------------------

SCHEDULERS = [
    ("StepLR", lambda o: lr_scheduler.StepLR(o, 3)),
    ("MultiStepLR", lambda o: lr_scheduler.MultiStepLR(o, [2, 4])),
    ("ConstantLR", lambda o: lr_scheduler.ConstantLR(o)),
    ("LinearLR", lambda o: lr_scheduler.LinearLR(o)),
    ("ExponentialLR", lambda o: lr_scheduler.ExponentialLR(o, 0.9)),
    ("PolynomialLR", lambda o: lr_scheduler.PolynomialLR(o)),
    ("CosineAnnealingLR", lambda o: lr_scheduler.CosineAnnealingLR(o, 10)),
    ("CosineAnnealingWarmRestarts", lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, 5)),
    ("OneCycleLR", lambda o: lr_scheduler.OneCycleLR(o, 1.0, total_steps=20)),
    ("CyclicLR", lambda o: lr_scheduler.CyclicLR(o, 0.01, 0.1)),
    ("LambdaLR", lambda o: lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e)),
    ("MultiplicativeLR", lambda o: lr_scheduler.MultiplicativeLR(o, lambda e: 0.9)),
    ("ReduceLROnPlateau", lambda o: lr_scheduler.ReduceLROnPlateau(o)),
    ("SequentialLR", lambda o: lr_scheduler.SequentialLR(
        o, [lr_scheduler.StepLR(o, 2), lr_scheduler.ExponentialLR(o, 0.9)], [3])),
    ("ChainedScheduler", lambda o: lr_scheduler.ChainedScheduler(
        [lr_scheduler.StepLR(o, 2), lr_scheduler.ExponentialLR(o, 0.9)])),
    ("NoamLR", lambda o: lr_scheduler.NoamLR(o, 16, 4)),
    ("WarmupCosineLR", lambda o: lr_scheduler.WarmupCosineLR(o, 2, 10)),
]


def _scheduled(build, steps=3):
    opt = optim.SGD([mg.zeros(1, requires_grad=True)], lr=0.1, momentum=0.9)
    sched = build(opt)
    for _ in range(steps):
        opt.step()
        if isinstance(sched, lr_scheduler.ReduceLROnPlateau):
            sched.step(1.0)
        else:
            sched.step()
    return opt, sched


def _sched_snapshot(sched):
    return copy.deepcopy({k: v for k, v in sched.__dict__.items()
                          if k not in ("optimizer", "_schedulers")})


def _counter(sd):
    """The entry that counts the steps (ChainedScheduler has none: its last lrs instead)."""
    return "last_epoch" if "last_epoch" in sd else "_last_lr"


SCHED_DAMAGE = [
    ("missing", lambda sd: sd.pop(_counter(sd)), "state dict has no '(last_epoch|_last_lr)'"),
    ("wrong-type", lambda sd: _set(sd, _counter(sd), "3"),
     "has '(last_epoch|_last_lr)' = '3': expected a (number|list of 1 values)"),
    ("a-list-too-short", lambda sd: _set(sd, "_last_lr", []),
     "has '_last_lr' = \\[\\]: expected a list of 1 values"),
]
SCHED_CASES = [(f"{s[0]}-{d[0]}", s[1], d[1], d[2]) for s in SCHEDULERS for d in SCHED_DAMAGE]


@pytest.mark.parametrize("build, spoil, message", [c[1:] for c in SCHED_CASES],
                         ids=[c[0] for c in SCHED_CASES])
def test_a_damaged_scheduler_state_dict_is_refused(build, spoil, message):
    _, sched = _scheduled(build)
    sd = copy.deepcopy(sched.state_dict())
    spoil(sd)
    _, other = _scheduled(build, steps=1)
    before = _sched_snapshot(other)
    with pytest.raises(ValueError, match=message):
        other.load_state_dict(sd)
    after = _sched_snapshot(other)
    assert after.keys() == before.keys()
    assert after["_last_lr"] == before["_last_lr"]
    assert after.get("last_epoch") == before.get("last_epoch")


@pytest.mark.parametrize("build", [s[1] for s in SCHEDULERS], ids=[s[0] for s in SCHEDULERS])
def test_a_valid_scheduler_state_dict_still_loads(build):
    _, sched = _scheduled(build)
    sd = copy.deepcopy(sched.state_dict())
    _, other = _scheduled(build, steps=1)
    other.load_state_dict(sd)
    assert other.state_dict().keys() == sd.keys()
    assert getattr(other, "last_epoch", None) == getattr(sched, "last_epoch", None)


@pytest.mark.parametrize("name", ["SequentialLR", "ChainedScheduler"])
def test_a_damaged_inner_scheduler_is_refused_before_any_change(name):
    build = dict(SCHEDULERS)[name]
    _, sched = _scheduled(build)
    sd = copy.deepcopy(sched.state_dict())
    del sd["_schedulers"][1]["gamma"]
    _, other = _scheduled(build, steps=1)
    before = [s.last_epoch for s in other._schedulers], other.get_last_lr()
    with pytest.raises(ValueError, match="ExponentialLR state dict has no 'gamma'"):
        other.load_state_dict(sd)
    assert ([s.last_epoch for s in other._schedulers], other.get_last_lr()) == before


def test_plateau_scheduler_wrong_kinds():
    _, sched = _scheduled(dict(SCHEDULERS)["ReduceLROnPlateau"])
    sd = copy.deepcopy(sched.state_dict())
    sd["mode"] = 1
    with pytest.raises(ValueError, match="'mode' = 1: expected a str"):
        sched.load_state_dict(sd)
    sd = copy.deepcopy(sched.state_dict())
    sd["threshold_mode"] = "relative"
    with pytest.raises(ValueError, match="'threshold_mode' = 'relative': expected one of"):
        sched.load_state_dict(sd)
    assert sched.threshold_mode == "rel"
    sd = copy.deepcopy(sched.state_dict())
    sd["default_min_lr"] = None  # min_lr given per group
    sched.load_state_dict(sd)
