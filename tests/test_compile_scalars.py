"""mg.compile records the optimisers' array work (SGD, Adam, AdamW) with their per-step
numbers (learning rate, bias corrections, step counts) read from the program's scalar
buffer, filled on the host before each replay: replays equal eager steps bit for bit
while a schedule changes the learning rate and the step count advances; the kernels give
the same bits for a 0-d float64 operand as for a Python float."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import backend, nn
from minigrad.backend import host_loops, kernels
from minigrad.compile import replayed_as_call
from minigrad.optim.optimizer import Optimizer

# --- the kernels: a slot of the buffer (a 0-d float64 array) gives a Python float's bits ----


def _numbers(rng, n):
    """Numbers as an optimiser passes them (Python floats): some near 0 and 1, some of any
    size."""
    return [float(c) for c in np.concatenate([rng.uniform(0, 1, n), 10.0 ** rng.uniform(-9, 2, n),
                                              1 - 10.0 ** rng.uniform(-8, -1, n)])]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("numba_loop", [True, False])
def test_adam_gives_the_same_bits_for_a_0d_array_as_for_a_float(dtype, numba_loop,
                                                                 monkeypatch):
    if not numba_loop:  # the NumPy formulas, as where numba is missing
        monkeypatch.setattr(host_loops, "adam", lambda *args: False)
    elif host_loops.numba is None:
        pytest.skip("numba is not installed")
    rng = np.random.default_rng(0)
    values = _numbers(rng, 40)
    for k in range(0, len(values) - 5, 3):
        beta1, beta2 = values[k] % 1, values[k + 1] % 1
        step_size, bc2_sqrt, eps = values[k + 2], values[k + 3] % 1 + 1e-3, values[k + 4]
        g0 = rng.standard_normal(257).astype(dtype)
        m0, v0 = rng.standard_normal(257).astype(dtype), rng.random(257).astype(dtype)
        outs = []
        for wrap in (float, lambda x: np.asarray(x, dtype=np.float64)):
            g, m, v = g0.copy(), m0.copy(), v0.copy()
            update = backend.adam(g, m, v, wrap(beta1), wrap(beta2), wrap(step_size),
                                  wrap(bc2_sqrt), wrap(eps), scratch=True)
            outs.append((update, m, v, g))
        for a, b in zip(*outs):
            assert a.dtype == dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_number_like_rounds_as_numpy_rounds_a_python_float(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(64).astype(dtype)
    for c in _numbers(rng, 100) + [-c for c in _numbers(rng, 30)]:
        as_array = kernels.number_like(np.asarray(c), x)
        assert (x * c).tobytes() == (x * as_array).tobytes()
        assert (x * c).dtype == (x * as_array).dtype == dtype
        out_a, out_b = np.empty_like(x), np.empty_like(x)
        kernels.add_scaled(out_a, x, x[::-1], c)
        kernels.add_scaled(out_b, x, x[::-1], np.asarray(c))
        assert out_a.tobytes() == out_b.tobytes()


# --- replays equal eager steps -------------------------------------------------------------

def _model(dtype, seed=0):
    mg.manual_seed(seed)
    model = nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 3))
    return model.to(dtype=getattr(mg, np.dtype(dtype).name))


def _batches(n, dtype, device="cpu"):
    rng = np.random.default_rng(2)
    return [(mg.tensor(rng.standard_normal((7, 5)).astype(dtype), device=device),
             mg.tensor(rng.integers(0, 3, 7), device=device)) for _ in range(n)]


OPTIMISERS = {
    "sgd": lambda ps: mg.optim.SGD(ps, lr=0.1),
    "sgd-momentum": lambda ps: mg.optim.SGD(ps, lr=0.1, momentum=0.9),
    "sgd-dampening": lambda ps: mg.optim.SGD(ps, lr=0.1, momentum=0.8, dampening=0.3),
    "sgd-nesterov": lambda ps: mg.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True,
                                            weight_decay=1e-2),
    "sgd-decay-maximize": lambda ps: mg.optim.SGD(ps, lr=0.01, weight_decay=0.1,
                                                  maximize=True),
    "adam": lambda ps: mg.optim.Adam(ps, lr=1e-2),
    "adam-decay": lambda ps: mg.optim.Adam(ps, lr=1e-2, weight_decay=0.1, maximize=True),
    "adamw": lambda ps: mg.optim.AdamW(ps, lr=1e-2, betas=(0.8, 0.99)),
    # one parameter per group: each parameter's own update (not the group's flat moments)
    "adamw-per-parameter": lambda ps: mg.optim.AdamW([{"params": [p]} for p in ps],
                                                     lr=1e-2, weight_decay=0.3),
}

SCHEDULES = {
    "none": None,
    "steplr": lambda opt: mg.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "lambdalr": lambda opt: mg.optim.lr_scheduler.LambdaLR(opt, lambda t: 1 / (1 + t)),
    "onecycle": lambda opt: mg.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05,
                                                             total_steps=20),
}


def _training_step(model, opt):
    """A classification step of ``model`` with ``opt`` (no schedule)."""
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _setup(make_opt, make_sched, dtype, schedule_first=False, device="cpu"):
    model = _model(dtype).to(device)
    opt = make_opt(list(model.parameters()))
    sched = make_sched(opt) if make_sched is not None else None

    def step(x, y):
        opt.zero_grad()
        if sched is not None and schedule_first:  # (the fill then runs after this call)
            sched.step()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if sched is not None and not schedule_first:
            sched.step()
        return loss
    return model, opt, step


def _mismatch(setup, batches, sabotage=None):
    """Train a compiled copy and an eager copy of ``setup()`` side by side: the first step
    whose parameters, losses or step counts differ (None if none do). ``sabotage(step)``
    is called after each compiled call (a planted mistake)."""
    model_a, opt_a, step_a = setup()
    model_b, opt_b, step_b = setup()
    compiled = mg.compile(step_a)
    for k, (x, y) in enumerate(batches):
        with np.errstate(all="ignore"):
            loss_a, loss_b = compiled(x, y), step_b(x, y)
        if sabotage is not None:
            sabotage(compiled)
        if loss_a.numpy().tobytes() != loss_b.numpy().tobytes():
            return f"loss of step {k}"
        for p, q in zip(model_a.parameters(), model_b.parameters()):
            if p.numpy().tobytes() != q.numpy().tobytes() or p._version != q._version:
                return f"parameters after step {k}"
        steps_a = [s.get("step") for s in opt_a.state.values()]
        steps_b = [s.get("step") for s in opt_b.state.values()]
        if steps_a != steps_b:
            return f"step counts after step {k}"
    assert compiled.replays >= len(batches) - 3, compiled.log
    return None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_replays_equal_eager_steps_bit_for_bit(name, dtype):
    assert _mismatch(lambda: _setup(OPTIMISERS[name], None, dtype), _batches(7, dtype)) is None


@pytest.mark.filterwarnings(r"ignore:Detected call of `lr_scheduler\.step\(\)`")
@pytest.mark.parametrize("schedule_first", [False, True])
@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("name", ["sgd-nesterov", "adam", "adamw", "adamw-per-parameter"])
def test_replays_follow_a_schedule_bit_for_bit(name, schedule, schedule_first):
    setup = lambda: _setup(OPTIMISERS[name], SCHEDULES[schedule], np.float32,  # noqa: E731
                           schedule_first)
    assert _mismatch(setup, _batches(8, np.float32)) is None


@pytest.mark.parametrize("name", ["sgd-nesterov", "adam", "adamw-per-parameter"])
def test_replays_equal_eager_steps_on_the_device(name, device):
    """On a device the buffer is a device array, written by one copy before the work that
    reads it (``--device strict``: the stand-in for CuPy, which refuses reads on the host)."""
    setup = lambda: _setup(OPTIMISERS[name], SCHEDULES["lambdalr"], np.float32,  # noqa: E731
                           device=device)
    assert _mismatch(setup, _batches(6, np.float32, device)) is None


def test_a_replay_with_a_stale_buffer_is_caught():
    """A planted mistake: one replay runs without the fill writing its numbers (the step
    count advances, the bias corrections stay those of the step before); the comparison
    of the tests above sees it."""
    skipped = []

    def sabotage(step):
        buffer = step.program.scalars if step.program is not None else None
        if buffer is not None and not skipped:
            write = buffer.write
            buffer.write = lambda start, numbers: skipped.append(start) or \
                setattr(buffer, "write", write)  # (skips this one write, then writes again)
    setup = lambda: _setup(OPTIMISERS["adam"], None, np.float32)  # noqa: E731
    assert _mismatch(setup, _batches(7, np.float32), sabotage) is not None
    assert skipped  # (the buffer's write was skipped at a replay)
    for name in ("sgd-momentum", "adamw"):  # the schedule's lr, left stale, is seen too
        skipped.clear()
        setup = lambda: _setup(OPTIMISERS[name], SCHEDULES["lambdalr"],  # noqa: E731
                               np.float32)
        assert _mismatch(setup, _batches(7, np.float32), sabotage) is not None


# --- what the program holds ------------------------------------------------------------------

def _step_calls(program):
    """The host calls of an optimiser's step in ``program``."""
    return [i for i in program.instructions if i.kind == "call" and i.name.endswith(".step")
            and isinstance(i.args[0], Optimizer)]


def _captured(make_opt):
    model, opt, step = _setup(make_opt, SCHEDULES["steplr"], np.float32)
    compiled = mg.compile(step)
    for x, y in _batches(5, np.float32):
        lr = opt.param_groups[0]["lr"]  # (what the step reads: the scheduler steps after)
        compiled(x, y)
    assert compiled.replays >= 2
    return compiled, opt, lr


@pytest.mark.parametrize("name", ["sgd-momentum", "adam", "adamw-per-parameter"])
def test_the_step_is_array_work_reading_the_buffer_not_a_host_call(name):
    compiled, opt, lr = _captured(OPTIMISERS[name])
    program = compiled.program
    assert not _step_calls(program), compiled.listing()
    fills = [i for i in program.instructions if i.kind == "fill"]
    assert fills and sum(i.scalars[1] for i in fills) == len(program.scalar_names)
    assert program.scalars.host.shape == (len(program.scalar_names),)
    assert program.scalars.host.dtype == np.float64
    text = compiled.listing()
    assert f"scalar buffer s: {len(program.scalar_names)} float64 numbers" in text
    number = "-lr=s[" if name.startswith("sgd") else "step_size=s["
    assert number in text
    # the buffer holds the numbers of the last step, as eager computed them
    host, names = program.scalars.host, program.scalar_names
    beta1 = opt.param_groups[0].get("betas", (0, 0))[0]
    expected = -lr if name.startswith("sgd") else lr / (1.0 - beta1 ** 5)
    assert host[names.index(number[:-3])] == expected
    assert all(s.get("step", 5) == 5 for s in opt.state.values())


class _Halving(Optimizer):
    """A user's optimiser: its step is a host call at each replay."""

    def __init__(self, params):
        super().__init__(params, {"lr": 0.1})

    @replayed_as_call
    @mg.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.sub_(p.grad * group["lr"])
                    group["lr"] *= 0.5


@pytest.mark.parametrize("make_opt", [_Halving, lambda ps: mg.optim.Adam(ps, amsgrad=True)],
                         ids=["user", "amsgrad"])
def test_an_optimiser_without_the_buffer_stays_a_host_call(make_opt):
    compiled, _, _ = _captured(make_opt)
    assert len(_step_calls(compiled.program)) == 1, compiled.listing()
    assert not compiled.program.scalar_names
    setup = lambda: _setup(make_opt, None, np.float32)  # noqa: E731
    assert _mismatch(setup, _batches(6, np.float32)) is None


def test_changed_settings_or_state_capture_again():
    model, opt, step = _setup(OPTIMISERS["adam"], None, np.float32)
    model_b, opt_b, step_b = _setup(OPTIMISERS["adam"], None, np.float32)
    compiled = mg.compile(step)
    for k, (x, y) in enumerate(_batches(12, np.float32)):
        if k == 5:
            for o in (opt, opt_b):
                o.param_groups[0]["maximize"] = True
        if k == 8:
            for o in (opt, opt_b):
                o.load_state_dict(o.state_dict())
        compiled(x, y), step_b(x, y)
        for p, q in zip(model.parameters(), model_b.parameters()):
            assert p.numpy().tobytes() == q.numpy().tobytes(), k
    assert sum("settings of" in line for line in compiled.log) == 2, compiled.log


@pytest.mark.parametrize("make_opt", [lambda ps: mg.optim.SGD(ps, lr=0.1, momentum=0.9),
                                      lambda ps: mg.optim.AdamW(ps, lr=1e-2)],
                         ids=["sgd", "adamw"])
def test_a_param_group_added_is_captured_again(make_opt):
    def setup():
        model = _model(np.float32)
        first, second = model[0], model[2]
        opt = make_opt(list(first.parameters()))
        return model, opt, _training_step(model, opt), second
    model, opt, step, second = setup()
    model_b, opt_b, step_b, second_b = setup()
    compiled = mg.compile(step)
    for k, (x, y) in enumerate(_batches(9, np.float32)):
        if k == 5:  # (the second layer is trained from now on)
            opt.add_param_group({"params": list(second.parameters())})
            opt_b.add_param_group({"params": list(second_b.parameters())})
        compiled(x, y), step_b(x, y)
        for p, q in zip(model.parameters(), model_b.parameters()):
            assert p.numpy().tobytes() == q.numpy().tobytes(), k
    assert any("settings of" in line for line in compiled.log), compiled.log
    assert compiled.replays >= 3


def _replace_moments(opt, model):
    """The optimiser's state tensors replaced by new ones, as a user may do by hand."""
    for p in model.parameters():
        for key, value in list(opt.state[p].items()):
            if isinstance(value, mg.Tensor):
                opt.state[p][key] = value * 0.5


def _swap_params(opt, model):
    """Two parameters of the same shape swapped in the group (its length unchanged)."""
    params = opt.param_groups[0]["params"]
    params[0], params[-1] = params[-1], params[0]


@pytest.mark.parametrize("edit", [_replace_moments, _swap_params], ids=["moments replaced",
                                                                       "parameters swapped"])
@pytest.mark.parametrize("name", ["sgd-momentum", "adam", "adamw-per-parameter"])
def test_state_or_parameters_replaced_by_hand_capture_again(name, edit):
    """What the recorded update reads changed without load_state_dict: the replay must not
    update the old arrays (a stale replay); it captures again and stays equal to eager."""
    def setup():
        model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
        model.to(dtype=mg.float32)
        return model, OPTIMISERS[name](list(model.parameters()))
    mg.manual_seed(0)
    model, opt = setup()
    mg.manual_seed(0)
    model_b, opt_b = setup()
    compiled, eager = mg.compile(_training_step(model, opt)), _training_step(model_b, opt_b)
    rng = np.random.default_rng(5)
    for k in range(9):
        x = mg.tensor(rng.standard_normal((6, 4)).astype(np.float32))
        y = mg.tensor(rng.integers(0, 4, 6))
        if k == 5:
            edit(opt, model), edit(opt_b, model_b)
        compiled(x, y), eager(x, y)
        for p, q in zip(model.parameters(), model_b.parameters()):
            assert p.numpy().tobytes() == q.numpy().tobytes(), k
    assert compiled.replays >= 4
