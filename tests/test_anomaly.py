"""``mg.autograd.detect_anomaly()``: the first op that turns finite values into NaN/inf, in
forward or in backward, raises an error naming the op and the user's line that created it;
ops that only pass an existing inf along do not; outside the context nothing is checked."""
import os
import sys

import numpy as np
import pytest

import minigrad as mg

THIS_FILE = os.path.basename(__file__)

# NumPy warns about overflow and invalid values; those are the point of these tests
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def here():
    """The line number of the caller."""
    return sys._getframe(1).f_lineno


def test_log_of_negative_names_op_and_line_in_forward(device):
    x = mg.tensor([1.0, -2.0], device=device, requires_grad=True)
    with mg.autograd.detect_anomaly():
        y = x * 2                    # finite: fine
        with pytest.raises(RuntimeError) as info:
            line = here() + 1
            y.log()
    msg = str(info.value)
    assert "Log" in msg
    assert THIS_FILE in msg
    assert str(line) in msg
    assert not mg.autograd.is_anomaly_enabled()


def test_exp_overflow_in_float32_forward(device):
    x = mg.tensor([1.0, 100.0], device=device)    # exp(100) ~ 2.7e43 > float32 max 3.4e38
    with mg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError) as info:
            x.exp()
    assert "Exp" in str(info.value)
    assert THIS_FILE in str(info.value)


def test_forward_check_does_not_need_requires_grad(device):
    x = mg.tensor([-1.0], device=device)
    with mg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="Sqrt"):
            x.sqrt()


def test_first_bad_op_is_named_not_a_later_one(device):
    # 0 * inf would be NaN in Mul, but the first op to produce a non-finite value is Exp
    x = mg.tensor([0.0, 200.0], device=device, requires_grad=True)
    with mg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError) as info:
            (x.exp() * 0.0).sum()
    assert "Exp" in str(info.value)
    assert "Mul" not in str(info.value)


def test_sqrt_at_zero_names_sqrt_in_backward(device):
    x = mg.tensor([0.0], device=device, requires_grad=True)
    with mg.autograd.detect_anomaly():
        line = here() + 1
        y = x.sqrt()                 # the forward is finite: sqrt(0) = 0
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()       # d sqrt / dx = 1 / (2 sqrt(0)) = inf
    msg = str(info.value)
    assert "Sqrt" in msg
    assert THIS_FILE in msg
    assert str(line) in msg


def test_backward_anomaly_in_one_line(device):
    x = mg.tensor([0.0], device=device, requires_grad=True)
    with mg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="Sqrt"):
            x.sqrt().sum().backward()


def test_masked_fill_with_inf_then_softmax_does_not_raise(device):
    # -inf as a mask value is data, not an accident: every row keeps finite entries, so
    # softmax is finite, and so are all the gradients
    x = mg.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]], device=device, requires_grad=True)
    mask = mg.tensor([[False, True, False], [True, False, False]], device=device)
    with mg.autograd.detect_anomaly():
        p = x.masked_fill(mask, float("-inf")).softmax(-1)
        (p * p).sum().backward()
    probs = p.numpy()
    assert np.isfinite(probs).all()
    assert probs[0, 1] == 0 and probs[1, 0] == 0
    np.testing.assert_allclose(probs.sum(-1), [1.0, 1.0], rtol=1e-6)
    assert np.isfinite(x.grad.numpy()).all()


def test_ops_propagating_existing_inf_do_not_raise(device):
    x = mg.tensor([float("inf"), 1.0], device=device, requires_grad=True)
    with mg.autograd.detect_anomaly():
        y = x * 2 + 1               # inf in, inf out: the anomaly is upstream
        z = y.exp()
        assert np.isinf(z.numpy()[0])
        # a non-finite incoming gradient passed through backward is not a new anomaly
        w = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
        (w * 3).backward(gradient=mg.tensor([float("inf"), 1.0], device=device))
    assert np.isinf(w.grad.numpy()[0]) and w.grad.numpy()[1] == 3.0


def test_nothing_is_checked_outside_the_context(device):
    assert not mg.autograd.is_anomaly_enabled()
    x = mg.tensor([-1.0, 0.0], device=device, requires_grad=True)
    y = x.log()                     # nan, -inf: no error
    assert np.isnan(y.numpy()[0]) and np.isneginf(y.numpy()[1])
    z = mg.tensor([0.0], device=device, requires_grad=True)
    z.sqrt().sum().backward()       # inf gradient: no error
    assert np.isposinf(z.grad.numpy()[0])


def test_graph_built_outside_is_not_checked_in_forward_but_backward_is(device):
    # anomaly mode applies to what runs inside the context: a backward run inside it is
    # checked even though the forward ran outside
    x = mg.tensor([0.0], device=device, requires_grad=True)
    y = x.sqrt().sum()
    with mg.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="Sqrt"):
            y.backward()


def test_context_restores_state(device):
    assert not mg.autograd.is_anomaly_enabled()
    with mg.autograd.detect_anomaly():
        assert mg.autograd.is_anomaly_enabled()
        with mg.autograd.detect_anomaly():
            assert mg.autograd.is_anomaly_enabled()
        assert mg.autograd.is_anomaly_enabled()
    assert not mg.autograd.is_anomaly_enabled()
    with pytest.raises(RuntimeError):
        with mg.autograd.detect_anomaly():
            mg.tensor([-1.0], device=device).log()
    assert not mg.autograd.is_anomaly_enabled()


def test_finite_computation_runs_unchanged_under_anomaly(device):
    values = [[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]
    x = mg.tensor(values, device=device, requires_grad=True)
    with mg.autograd.detect_anomaly():
        loss = (x.tanh() * x.exp()).sum()
        loss.backward()
    v = np.array(values, dtype=np.float64)
    np.testing.assert_allclose(loss.item(), (np.tanh(v) * np.exp(v)).sum(), rtol=1e-5)
    expected = (1 - np.tanh(v) ** 2) * np.exp(v) + np.tanh(v) * np.exp(v)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)


class _InfGrad(mg.autograd.Function):
    """out = 2x, with a backward that (wrongly) turns finite gradients into inf"""
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        inf = mg.tensor([float("inf")], dtype=grad.dtype, device=grad.device)
        return grad * inf


def test_custom_function_backward_anomaly_names_the_function(device):
    x = mg.tensor([1.0, 2.0], device=device, requires_grad=True)
    with mg.autograd.detect_anomaly():
        line = here() + 1
        y = _InfGrad.apply(x)
        with pytest.raises(RuntimeError) as info:
            y.sum().backward()
    msg = str(info.value)
    assert "_InfGrad" in msg
    assert THIS_FILE in msg and str(line) in msg
