"""mg.compile and ops whose result's shape depends on the values (nonzero, masked_select,
indexing by a bool mask, ...): a replay would repeat the shape found at capture, so such a
step runs eagerly and says which op, while ops whose shape is fixed (masked_fill, where
with three arguments, setitem of a scalar under a mask) are replayed as usual."""
import re
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.compile import CompileWarning
from minigrad.nn import functional as F

W = [1.0, 2.0, 3.0, 4.0, 5.0]
# the op named in the reason -> a step that uses it on x (the count of x > 0 sets the shape)
STEPS = {
    "Tensor.nonzero()": lambda x, w: (x > 0).nonzero().sum() * w.sum(),
    "Tensor.nonzero() as_tuple": lambda x, w: (x > 0).nonzero(as_tuple=True)[0].sum() * w.sum(),
    "where(condition)": lambda x, w: mg.where(x > 0)[0].float().sum() * w.sum(),
    "Tensor.masked_select()": lambda x, w: (x * w).masked_select(x > 0).sum(),
    "Tensor.__getitem__() with a bool mask": lambda x, w: (x * w)[x > 0].sum(),
    "Tensor.__getitem__() with a 2-D bool mask": lambda x, w: (x * w).reshape(1, 5)[
        (x > 0).reshape(1, 5)].square().sum(),
    "F.one_hot() without num_classes": lambda x, w: F.one_hot((x > 0).long().cumsum(0))
    .float().mean() * w.sum(),
}
NAMES = {  # the name the warning gives
    "Tensor.nonzero() as_tuple": "Tensor.nonzero()",
    "where(condition)": "where(condition)",
    "Tensor.__getitem__() with a 2-D bool mask": "Tensor.__getitem__() with a bool mask",
}
# the count of positive entries changes on the 3rd and 4th calls
INPUTS = [[1.0, -1.0, 1.0, -1.0, 1.0]] * 2 + [[1.0, 1.0, 1.0, 1.0, -1.0],
                                              [-1.0, -1.0, -1.0, -1.0, 1.0],
                                              [1.0, -1.0, 1.0, -1.0, 1.0]]


def _results(step, compiled, device):
    w = mg.tensor(W, requires_grad=True, device=device)

    def train(x):
        w.grad = None
        out = step(x, w)
        out.backward()
        return out.detach(), w.grad.clone()
    run = mg.compile(train) if compiled else train
    results = []
    for values in INPUTS:
        out, grad = run(mg.tensor(values, device=device))
        results.append((out.numpy().copy(), grad.numpy().copy()))
    return results, run


@pytest.mark.parametrize("op", sorted(STEPS))
def test_a_data_dependent_shape_runs_eagerly_with_its_name(op, device):
    eager, _ = _results(STEPS[op], False, device)
    name = NAMES.get(op, op)
    with pytest.warns(CompileWarning, match=re.escape(f"on the host ({name})")):
        compiled, run = _results(STEPS[op], True, device)
    assert run.replays == 0
    for (out, grad), (ref, ref_grad) in zip(compiled, eager):
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(grad, ref_grad)
    # the shapes did change: the eager results are not all one value
    assert len({float(out) for out, _ in eager}) > 1


FIXED = {  # ops whose shape never depends on the values: replayed, no warning
    "masked_fill": lambda x, w: (x * w).masked_fill(x > 0, 0.0).sum(),
    "where with three arguments": lambda x, w: mg.where(x > 0, x * w, 0.0).sum(),
    "one_hot with num_classes": lambda x, w: F.one_hot((x > 0).long(), 2).float().sum()
    + (x * w).sum(),
    "getitem with a Python bool": lambda x, w: (x * w)[True].sum(),
}


@pytest.mark.parametrize("op", sorted(FIXED))
def test_a_fixed_shape_is_replayed(op, device):
    eager, _ = _results(FIXED[op], False, device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        compiled, run = _results(FIXED[op], True, device)
    assert run.replays > 0
    for (out, grad), (ref, ref_grad) in zip(compiled, eager):
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(grad, ref_grad)


def test_setitem_of_a_scalar_under_a_mask_reads_nothing_on_the_host(device):
    """Its shape is fixed, so no host read is reported (the step may still run eagerly for
    another reason of mg.compile's)."""
    def step(x, w):
        y = x * w
        y[x > 0] = 0.0
        return y.sum()
    eager, _ = _results(step, False, device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CompileWarning)
        compiled, run = _results(step, True, device)
    assert not [w for w in caught if "on the host" in str(w.message)]
    for (out, grad), (ref, ref_grad) in zip(compiled, eager):
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(grad, ref_grad)
