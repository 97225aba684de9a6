"""mg.compile and values read on the host: a step that reads a tensor's value (``item()``,
``bool(t)``, ``repr(t)``, ...) while it is captured may branch on it, and a replay would
repeat the branch taken at capture. Such a step runs eagerly, and says why in one line."""
import re
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.compile import CompileWarning

READS = {  # the method named in the reason -> a read of a 1-element tensor through it
    "Tensor.item()": lambda t: t.item(),
    "Tensor.__bool__()": lambda t: bool(t),
    "Tensor.__float__()": lambda t: float(t),
    "Tensor.__int__()": lambda t: int(t),
    "Tensor.tolist()": lambda t: t.tolist(),
    "Tensor.numpy()": lambda t: t.numpy(),
    "Tensor.__array__()": lambda t: np.asarray(t),
    "Tensor.__repr__()": lambda t: repr(t),
    "Tensor.__format__()": lambda t: f"{t.reshape(()):.3f}",
}


def _runs(step, values, device, compiled):
    """The step's results (as NumPy arrays) over ``values``, eagerly or compiled."""
    run = mg.compile(step) if compiled else step
    out = [run(mg.tensor([v, v], device=device)).numpy().copy() for v in values]
    return out, run


def test_a_branch_on_item_gives_eager_results_on_every_call(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        loss = (w * x).sum()
        return loss * 2 if loss.item() > 0 else loss * 3

    values = [1.0, 1.0, 1.0, -1.0, -1.0, 1.0]  # the branch turns after the captures
    eager, _ = _runs(step, values, device, compiled=False)
    with pytest.warns(CompileWarning) as caught:
        compiled, run = _runs(step, values, device, compiled=True)
    assert [float(v) for v in compiled] == [6.0, 6.0, 6.0, -9.0, -9.0, 6.0] == \
        [float(v) for v in eager]
    assert run.replays == 0
    (warning,) = caught
    assert str(warning.message) == (
        "mg.compile(step): running eagerly: the step reads a tensor's value on the host "
        "(Tensor.item()): a Python branch on it would be frozen into the replay; return the "
        "tensor from the step and read it outside")


@pytest.mark.parametrize("method", sorted(READS))
def test_every_host_read_during_a_capture_falls_back_with_its_name(device, method):
    read = READS[method]
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        loss = (w * x).sum()
        read(loss.reshape(1))
        return loss * 2

    values = [1.0, -1.0, 2.0, 3.0]
    eager, _ = _runs(step, values, device, compiled=False)
    with pytest.warns(CompileWarning, match=re.escape(f"on the host ({method}): a Python "
                                                      "branch on it would be frozen")):
        compiled, run = _runs(step, values, device, compiled=True)
    assert run.replays == 0 and len(run.log) == 1  # the first call gave up, and said why
    assert all(np.array_equal(a, b) for a, b in zip(eager, compiled))


def test_shapes_are_not_values_and_reads_after_the_step_are_free(device):
    w = mg.tensor([1.0, 2.0], device=device)  # (a result that needs grad is not replayed)

    def step(x):
        loss = (w * x).sum()
        return loss * 2 if x.shape[0] == 2 and len(x) == 2 else loss

    run = mg.compile(step)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        for v in (1.0, 2.0, 3.0, 4.0):
            loss = run(mg.tensor([v, v], device=device))
            out.append(loss.item())  # outside the step: no capture is running
    assert out == [6.0 * v for v in (1.0, 2.0, 3.0, 4.0)] and run.replays == 2


def test_reads_inside_a_call_replayed_as_a_call_are_fine(device):
    """An optimiser's step reads its numbers on the host (here ``float(lr)`` of a tensor);
    replay makes that call again, so its reads are not frozen."""
    results = []
    for compiled in (False, True):
        mg.manual_seed(0)
        model = nn.Linear(3, 1).to(device)
        opt = mg.optim.SGD(model.parameters(), lr=mg.tensor(0.1))

        def step(x):
            opt.zero_grad()
            loss = model(x).square().mean()
            loss.backward()
            opt.step()
            return loss
        run = mg.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            for v in range(5):
                run(mg.full((4, 3), float(v), device=device))
        results.append([p.numpy().copy() for p in model.parameters()])
    assert run.replays == 3
    assert all(np.array_equal(a, b) for a, b in zip(*results))
