"""mg.compile never replays a stale value: whatever the step reads besides its arguments
(numbers in closures, globals, config objects and module attributes, tensors and modules
reached by name, autograd state, minigrad's switches) is guarded, and a change captures the
step again, or runs it eagerly where a replay could not repeat it.

Each test runs one program twice from the same seed, once with the step compiled and once
eagerly, changing the same things between calls, and asserts every call's results equal
bit for bit."""
import textwrap
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.compile import RECAPTURES, CompileWarning

SETUP = """
import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
"""


def run(source, changes, calls=6, compiled=True, inputs="inputs"):
    """Exec ``source`` (it defines ``step`` and ``inputs``), then call the step ``calls``
    times; ``changes[i](ns)`` runs before call i. Returns (results as arrays, the step,
    the namespace)."""
    mg.manual_seed(0)
    mg.set_default_dtype(mg.float32)
    ns = {"__name__": "guarded_program"}
    exec(SETUP + textwrap.dedent(source), ns)
    step = mg.compile(ns["step"]) if compiled else ns["step"]
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CompileWarning)
        for i in range(calls):
            if i in changes:
                changes[i](ns)
            out = step(*ns[inputs]) if inputs else step()
            outs = out if isinstance(out, (tuple, list)) else [out]
            results.append([o.array.copy() for o in outs if o is not None] +
                           [p.array.copy() for p in ns.get("watch", ())])
    return results, step, ns


def same_as_eager(source, changes, calls=6):
    """The compiled run equals the eager run call by call; returns the compiled step."""
    eager, _, _ = run(source, changes, calls, compiled=False)
    compiled, step, _ = run(source, changes, calls, compiled=True)
    for i, (a, b) in enumerate(zip(eager, compiled)):
        for x, y in zip(a, b):
            assert x.dtype == y.dtype and x.shape == y.shape, (i, x, y)
            np.testing.assert_array_equal(x, y, err_msg=f"call {i}: {step.log}")
    return step


def setter(name, value):
    def change(ns):
        ns[name] = value
    return change


TRAIN = """
model = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.01), nn.Dropout(0.0), nn.Linear(8, 3))
opt = mg.optim.SGD(model.parameters(), lr=0.1)
inputs = (mg.randn(5, 4), mg.randint(0, 3, (5,)))
watch = list(model.parameters())

def step(x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss
"""


# --- Python numbers the step reads ---------------------------------------------------------
def test_a_global_number_read_by_the_step():
    src = """
    scale = 2.0
    inputs = (mg.randn(3, 4),)
    def step(x):
        return (x * scale).exp()
    """
    step = same_as_eager(src, {3: setter("scale", 3.0), 5: setter("scale", 0.5)}, calls=8)
    assert step.replays == 2
    assert any("scale changed (2.0 at capture, 3.0 now)" in line for line in step.log)


def test_a_closure_number_and_an_int_turned_float():
    src = """
    def make():
        k = 2
        def step(x):
            return x * k + 1
        def set_k(v):
            nonlocal k
            k = v
        return step, set_k
    step, set_k = make()
    inputs = (mg.randn(3),)
    """
    # 2 -> 2.0 is equal in value but not in type: torch's result dtype rules may differ
    step = same_as_eager(src, {3: lambda ns: ns["set_k"](5), 5: lambda ns: ns["set_k"](2.0)},
                         calls=8)
    assert any("k changed" in line for line in step.log)


@pytest.mark.parametrize("kind", ["namespace", "dataclass", "class_instance", "class_attr",
                                  "dict", "list"])
def test_a_number_in_a_config_object(kind):
    src = {
        "namespace": "import types\ncfg = types.SimpleNamespace(p=0.5)\nget = lambda: cfg.p\n"
                     "def change(ns): ns['cfg'].p = 0.25\n",
        "dataclass": "import dataclasses\n@dataclasses.dataclass\nclass C:\n    p: float = 0.5\n"
                     "cfg = C()\nget = lambda: cfg.p\ndef change(ns): ns['cfg'].p = 0.25\n",
        "class_instance": "class C:\n    def __init__(self): self.p = 0.5\ncfg = C()\n"
                          "get = lambda: cfg.p\ndef change(ns): ns['cfg'].p = 0.25\n",
        "class_attr": "class C:\n    p = 0.5\nget = lambda: C.p\n"
                      "def change(ns): ns['C'].p = 0.25\n",
        "dict": "cfg = {'p': 0.5}\nget = lambda: cfg['p']\n"
                "def change(ns): ns['cfg']['p'] = 0.25\n",
        "list": "cfg = [0.5]\nget = lambda: cfg[0]\ndef change(ns): ns['cfg'][0] = 0.25\n",
    }[kind]
    src += """
inputs = (mg.randn(4, 3),)
def step(x):
    return (x - get()).relu().sum(0)
"""
    step = same_as_eager(src, {3: lambda ns: ns["change"](ns)})
    assert step.replays >= 2 and any("capturing again" in line for line in step.log)


@pytest.mark.parametrize("change", [
    lambda ns: setattr(ns["model"][1], "negative_slope", 0.3),
    lambda ns: setattr(ns["model"][2], "p", 0.5),
    lambda ns: ns["model"].eval(),
])
def test_a_module_attribute(change):
    step = same_as_eager(TRAIN, {3: change}, calls=7)
    assert any("capturing again" in line for line in step.log), step.log


def test_a_max_norm_handed_to_clip_grad_norm_and_a_tensor_built_from_numbers():
    src = """
    model = nn.Linear(3, 2)
    opt = mg.optim.SGD(model.parameters(), lr=0.5)
    max_norm, bias = 10.0, 0.0
    inputs = (mg.randn(4, 3),)
    watch = list(model.parameters())
    def step(x):
        opt.zero_grad()
        out = model(x) + mg.full((2,), bias) + mg.tensor(bias * 2)
        loss = (out ** 2).sum()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        return loss
    """
    step = same_as_eager(src, {3: setter("max_norm", 0.01), 5: setter("bias", 1.5)}, calls=8)
    assert step.replays >= 2


# --- names rebound between calls --------------------------------------------------------------
def test_a_parameter_rebound_and_an_optimiser_made_again():
    def new_bias(ns):
        ns["model"][3].bias = mg.nn.Parameter(mg.ones(3))
        ns["watch"] = list(ns["model"].parameters())

    def new_opt(ns):
        ns["opt"] = mg.optim.Adam(ns["model"].parameters(), lr=0.01)

    step = same_as_eager(TRAIN, {4: new_bias, 8: new_opt}, calls=12)
    assert any("bias changed" in line for line in step.log)
    assert any("opt changed" in line for line in step.log)


def test_a_tensor_and_a_module_reached_by_a_global_rebound():
    src = """
    w = mg.randn(3)
    layer = nn.Linear(3, 3)
    inputs = (mg.randn(2, 3),)
    def step(x):
        return layer(x * w).detach()
    """
    step = same_as_eager(src, {3: setter("w", mg.ones(3)),
                               5: lambda ns: ns.__setitem__("layer", mg.nn.Linear(3, 3))},
                         calls=8)
    assert any("w changed" in line for line in step.log)


def test_a_tensors_data_replaced_by_an_array_of_another_shape_or_the_same():
    src = """
    w = mg.randn(3)
    layer = nn.Linear(3, 2)
    inputs = (mg.randn(2, 1), mg.randn(4, 3))
    def step(x, z):
        return (x * w).sum(-1), layer(z).detach()
    """

    def grow(ns):
        ns["w"].data = mg.tensor(np.arange(5, dtype=np.float32))

    def new_weight(ns):  # (same shape and dtype: read at each replay, nothing to capture)
        ns["layer"].weight.data = mg.full((2, 3), 0.5)

    step = same_as_eager(src, {3: grow, 6: new_weight}, calls=9)
    assert sum("capturing again" in line for line in step.log) == 1
    assert any("w.data's shape and dtype changed ((3,) float32 at capture" in line
               for line in step.log), step.log


# --- autograd state --------------------------------------------------------------------------
def test_requires_grad_switched_off_after_capture_stops_the_update():
    def freeze(ns):
        ns["model"][0].weight.requires_grad_(False)

    step = same_as_eager(TRAIN, {3: freeze}, calls=7)
    assert any("requires_grad" in line for line in step.log)


def test_an_input_that_now_requires_grad_gets_its_grad():
    src = """
    layer = nn.Linear(3, 2)
    x = mg.randn(4, 3)
    inputs = (x,)
    def step(x):
        loss = layer(x).sum()
        loss.backward()
        return loss
    """
    eager, _, ns_e = run(src, {3: lambda ns: ns["x"].requires_grad_(True)}, compiled=False)
    compiled, step, ns_c = run(src, {3: lambda ns: ns["x"].requires_grad_(True)})
    np.testing.assert_array_equal(ns_e["x"].grad.array, ns_c["x"].grad.array)
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(a[0], b[0])


def test_a_tensor_hook_added_after_capture_is_called():
    calls = []

    def hook(ns):
        ns["model"][0].weight.register_hook(lambda g: calls.append(1) or g * 0)

    step = same_as_eager(TRAIN, {3: hook}, calls=6)
    assert calls  # (the hook ran in the compiled run too: both runs appended)
    assert any("hook" in line for line in step.log)


def test_a_module_hook_added_after_capture_is_called():
    def hook(ns):
        ns["model"][1].register_forward_hook(lambda m, i, o: o * 2)

    step = same_as_eager(TRAIN, {3: hook}, calls=6)
    assert any("capturing again" in line for line in step.log)


def test_a_saved_tensors_hooks_block_opened_after_capture():
    src = TRAIN + """
packed = []
def pack(t):
    packed.append(1)
    return t
"""
    eager, _, _ = run(src, {}, calls=3, compiled=False)
    mg.manual_seed(0)
    ns = {"__name__": "guarded_program"}
    exec(SETUP + src, ns)
    step = mg.compile(ns["step"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CompileWarning)
        step(*ns["inputs"]), step(*ns["inputs"])
        with mg.autograd.graph.saved_tensors_hooks(ns["pack"], lambda t: t):
            step(*ns["inputs"])
    assert ns["packed"], "the pack hook was not called"
    assert any("saved_tensors_hooks" in line for line in step.log)
    for p, q in zip(ns["watch"], [e for e in eager[2][1:]]):
        np.testing.assert_array_equal(p.array, q)


def test_the_default_dtype_and_anomaly_mode_are_guarded():
    src = """
    inputs = (mg.randn(3).double(),)
    def step(x):
        return x + mg.zeros(3)
    """

    def to64(ns):
        mg.set_default_dtype(mg.float64)
    try:
        step = same_as_eager(src, {3: to64}, calls=6)
    finally:
        mg.set_default_dtype(mg.float32)
    assert any("default dtype" in line for line in step.log)
    ns = run(TRAIN, {}, calls=0)[2]
    step = mg.compile(ns["step"])
    for _ in range(3):
        step(*ns["inputs"])
    with mg.autograd.detect_anomaly(), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        step(*ns["inputs"])
    assert any("anomaly mode" in line for line in step.log)
    assert any(issubclass(w.category, CompileWarning) for w in seen)


# --- what a replay cannot repeat --------------------------------------------------------------
@pytest.mark.parametrize("effect", [
    "counter += 1", "history.append(1)", "state['n'] = state['n'] + 1"])
def test_a_step_that_changes_python_state_runs_eagerly(effect):
    src = f"""
    counter, history, state = 0, [], {{'n': 0}}
    inputs = (mg.randn(3),)
    def step(x):
        global counter
        {effect}
        return x * 2
    """
    eager, _, ns_e = run(src, {}, compiled=False)
    with pytest.warns(CompileWarning, match="changes Python state"):
        ns = {"__name__": "guarded_program"}
        exec(SETUP + textwrap.dedent(src), ns)
        step = mg.compile(ns["step"])
        for _ in range(6):
            step(*ns["inputs"])
    assert (ns["counter"], ns["history"], ns["state"]) == \
        (ns_e["counter"], ns_e["history"], ns_e["state"])
    assert step.replays == 0


def test_a_value_that_changes_on_every_call_ends_in_eager_mode_with_a_reason():
    src = """
    t = 0
    inputs = (mg.randn(3),)
    def step(x):
        return x * 2 if t >= 0 else x
    """

    def tick(ns):
        ns["t"] += 1
    changes = {i: tick for i in range(3, 40)}
    eager, _, _ = run(src, changes, calls=40, compiled=False)
    with pytest.warns(CompileWarning, match="changes between calls"):
        compiled, step, _ = _run_warning(src, changes, 40)
    for a, b in zip(eager, compiled):
        np.testing.assert_array_equal(a[0], b[0])
    assert sum("capturing again" in line for line in step.log) == RECAPTURES - 1


def _run_warning(source, changes, calls):
    mg.manual_seed(0)
    ns = {"__name__": "guarded_program"}
    exec(SETUP + textwrap.dedent(source), ns)
    step = mg.compile(ns["step"])
    results = []
    for i in range(calls):
        if i in changes:
            changes[i](ns)
        results.append([step(*ns["inputs"]).array.copy()])
    return results, step, ns


def test_a_users_module_whose_forward_reads_a_global():
    src = """
    SCALE = 1.0
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
        def forward(self, x):
            return self.lin(x) * SCALE
    model = Scaled()
    inputs = (mg.randn(2, 3),)
    def step(x):
        return model(x).detach()
    """
    step = same_as_eager(src, {3: setter("SCALE", -2.0)})
    assert any("SCALE changed" in line for line in step.log)


def test_guards_are_listed_and_library_state_is_not_walked():
    _, step, _ = run(TRAIN, {}, calls=4)
    listing = step.guards()
    assert "negative_slope" in listing and "the training mode of model" in listing
    assert "opt" in listing and "lr" not in listing.split("opt", 1)[1].split("\n", 1)[0]
    assert "numpy" not in listing  # (library modules are checked by identity, not walked)


def test_a_bound_method_step_and_a_config_object_passed_as_an_argument():
    src = """
    import types
    class Trainer:
        def __init__(self):
            self.scale = 1.0
            self.layer = nn.Linear(3, 3)
        def step(self, x, cfg):
            return (self.layer(x) * self.scale + cfg.shift).detach()
    trainer = Trainer()
    cfg = types.SimpleNamespace(shift=0.0)
    inputs = (mg.randn(2, 3), cfg)
    step = trainer.step
    """

    def scale(ns):
        ns["trainer"].scale = 4.0

    def shift(ns):
        ns["cfg"].shift = -1.0
    step = same_as_eager(src, {3: scale, 6: shift}, calls=9)
    assert any("scale changed" in line for line in step.log)
    assert any("shift changed" in line for line in step.log)


def test_a_learning_rate_changed_between_calls_is_read_by_the_replay_without_capturing():
    def lr(ns):
        ns["opt"].param_groups[0]["lr"] = 0.5
    step = same_as_eager(TRAIN, {4: lr}, calls=8)
    assert not any("capturing again" in line for line in step.log) and step.replays == 5


def test_gradients_cleared_outside_the_step_before_each_call_keep_it_replaying():
    src = """
    layer = nn.Linear(3, 2)
    inputs = (mg.randn(4, 3),)
    watch = list(layer.parameters())
    def step(x):
        loss = layer(x).square().sum()
        loss.backward()
        with mg.no_grad():
            for p in layer.parameters():
                p -= 0.1 * p.grad
        return loss
    """

    def clear(ns):
        for p in ns["layer"].parameters():
            p.grad = None
    step = same_as_eager(src, {i: clear for i in range(8)}, calls=8)
    assert step.replays == 6 and len(step.log) == 1, step.log


def test_a_write_through_a_bool_mask_replays_with_the_mask_of_each_call():
    src = """
    w = mg.randn(5, requires_grad=True)
    x = mg.tensor([1.0, -1.0, 1.0, -1.0, 1.0])
    inputs = (x,)
    watch = [w]
    def step(x):
        y = x * w
        y[x > 0] = 0.0
        loss = y.sum()
        loss.backward()
        with mg.no_grad():
            w.sub_(w.grad)
        w.grad = None
        return loss
    """

    def flip(ns):
        ns["x"].array[:] = [1.0, 1.0, 1.0, 1.0, -1.0]
    step = same_as_eager(src, {4: flip}, calls=7)
    assert step.replays == 5, step.log


def test_index_fill_replays_with_the_index_of_each_call():
    w = mg.randn(5, requires_grad=True)

    def step(x, idx):
        loss = (x * w).index_fill(0, idx, 0.0).sum()
        loss.backward()
        return loss.detach()
    run = mg.compile(step)
    for ix in [[0, 1]] * 3 + [[3, -1]] * 2:
        x, idx = mg.ones(5), mg.tensor(ix)
        w.grad = None
        compiled, g_compiled = run(x, idx).numpy(), w.grad.numpy().copy()
        w.grad = None
        eager, g_eager = step(x, idx).numpy(), w.grad.numpy().copy()
        np.testing.assert_array_equal(compiled, eager)
        np.testing.assert_array_equal(g_compiled, g_eager)
    assert run.replays == 3
