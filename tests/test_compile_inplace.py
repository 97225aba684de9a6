"""mg.compile and in-place writes: an update written by hand under no_grad (``p -= lr *
p.grad``, ``p.add_(g, alpha=-lr)``, a momentum buffer, ``zero_()``, ``copy_``), an in-place op
recorded in a graph (``h.relu_()``) and ``p.grad = None`` after the update are recorded and
replayed bit for bit; a ``.grad`` set by hand in the step is refused with a reason."""
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.compile import CompileWarning


def _batches(device, n=6):
    rng = np.random.default_rng(1)
    return [(mg.tensor(rng.standard_normal((8, 5)).astype(np.float32), device=device),
             mg.tensor(rng.integers(0, 3, 8), device=device)) for _ in range(n)]


def _isub_then_none(params, state, lr):
    for p in params:
        p -= lr * p.grad
        p.grad = None


def _add_alpha_then_zero(params, state, lr):
    for p in params:
        p.add_(p.grad, alpha=-lr)
        p.grad.zero_()


def _momentum_and_average(params, state, lr):
    """v = 0.9 v + g; p -= lr v; an average of the weights kept with copy_ and mul_."""
    for p, v, avg in zip(params, state["velocity"], state["average"]):
        v.mul_(0.9).add_(p.grad)
        p.sub_(v, alpha=lr)
        avg.mul_(0.5).add_(p, alpha=0.5)
        p.grad = None
    state["last"].copy_(params[0])
    state["last"].div_(2)


UPDATES = [_isub_then_none, _add_alpha_then_zero, _momentum_and_average]


def _train(device, update, compiled, batches):
    mg.manual_seed(0)
    layers = [nn.Linear(5, 8).to(device), nn.Linear(8, 8).to(device),
              nn.Linear(8, 3).to(device)]
    params = [p for layer in layers for p in layer.parameters()]
    state = {"velocity": [mg.zeros_like(p) for p in params],
             "average": [mg.zeros_like(p) for p in params],
             "last": mg.zeros_like(params[0])}

    def step(x, y):
        h = layers[1](layers[0](x).tanh()).sigmoid()
        loss = F.cross_entropy(layers[2](h), y)
        loss.backward()
        with mg.no_grad():
            update(params, state, 0.1)
        return loss
    run = mg.compile(step) if compiled else step
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        losses = [run(x, y).numpy().copy() for x, y in batches]
    arrays = [p.numpy().copy() for p in params] + \
        [t.numpy().copy() for t in state["velocity"] + state["average"] + [state["last"]]] + \
        [p.grad.numpy().copy() for p in params if p.grad is not None]
    return losses + arrays, run


@pytest.mark.parametrize("update", UPDATES, ids=lambda u: u.__name__.strip("_"))
def test_a_hand_written_update_replays_bit_for_bit(device, update):
    batches = _batches(device)
    eager, _ = _train(device, update, False, batches)
    compiled, run = _train(device, update, True, batches)
    assert run.replays >= 3
    assert len(eager) == len(compiled)
    assert all(np.array_equal(a, b) for a, b in zip(eager, compiled))
    names = [i.name for i in run.program.instructions if i.kind in ("array", "grad")]
    # the raw writes, one instruction each (add_ with an alpha: rounded once, in float64)
    assert ("add_scaled" if update is _add_alpha_then_zero else "ufunc_into") in names
    assert ("clear_grad" in names) == (update is not _add_alpha_then_zero)
    assert "backward" not in {i.kind for i in run.program.instructions}  # tanh, sigmoid: flat


def test_an_in_place_op_recorded_in_a_graph_replays_bit_for_bit(device):
    batches = _batches(device)
    results = []
    for compiled in (False, True):
        mg.manual_seed(0)
        first, second = nn.Linear(5, 8).to(device), nn.Linear(8, 3).to(device)

        def step(x, y):
            h = first(x)
            h.relu_()  # recorded in the graph: the old values copied first
            h.mul_(2)
            loss = F.cross_entropy(second(h), y)
            loss.backward()
            return loss
        run = mg.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            losses = [run(x, y).numpy().copy() for x, y in batches]
        grads = [p.grad.numpy().copy() for p in (*first.parameters(), *second.parameters())]
        results.append(losses + grads)
    assert run.replays == 3, run.log  # (the second call accumulates into .grad)
    assert all(np.array_equal(a, b) for a, b in zip(*results))
    names = {i.name for i in run.program.instructions}
    assert {"copy_of", "write_values"} <= names


def test_a_grad_set_by_hand_in_the_step_is_refused(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        loss = (w * x).sum()
        loss.backward()
        w.grad = mg.ones_like(w)  # not the engine's write: replay would not repeat it
        return loss
    run = mg.compile(step)
    with pytest.warns(CompileWarning, match=r"the \.grad of a tensor of shape \(2,\) was set "
                                            "in the step outside backward"):
        for v in range(4):
            run(mg.tensor([float(v), 1.0], device=device))
            assert w.grad.tolist() == [1.0, 1.0]
    assert run.replays == 0


def test_the_mlp_from_scratch_demo_replays_with_the_eager_output(capsys, device):
    from minigrad.demos import mlp_from_scratch
    outputs = []
    for extra in ([], ["--compile"]):
        mlp_from_scratch.main(["--steps", "20", "--device", device, *extra])
        outputs.append(capsys.readouterr())
    assert outputs[0].out == outputs[1].out
    assert "mg.compile: 17 of 20 steps replayed" in outputs[1].err
