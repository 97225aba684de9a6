"""Autograd semantics, as PyTorch defines them: accumulation, retain_grad, freed graphs,
deep and shared graphs, higher-order gradients, ``mg.grad``, grad modes, detach, hooks,
custom ``mg.autograd.Function`` and ``gradcheck``.

Expected values come from hand derivations (stated next to each test) or from PyTorch."""
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import Function, GradcheckError, gradcheck, gradgradcheck
from tests.torch_ref import needs_torch, torch


def t(values, device, dtype=None, requires_grad=False):
    return mg.tensor(values, dtype=dtype, device=device, requires_grad=requires_grad)


def close(actual, expected, rtol=1e-6, atol=1e-6):
    np.testing.assert_allclose(actual.numpy() if isinstance(actual, mg.Tensor) else actual,
                               expected, rtol=rtol, atol=atol)


# --- accumulation and retain_grad -----------------------------------------------------------

def test_grad_accumulates_into_leaves_across_backward_calls(device):
    x = t([1.0, 2.0, 3.0], device, requires_grad=True)
    (x * x).sum().backward()          # d/dx sum(x^2) = 2x
    close(x.grad, [2.0, 4.0, 6.0])
    (3 * x).sum().backward()          # + 3
    close(x.grad, [5.0, 7.0, 9.0])
    (x * x).sum().backward()          # + 2x again
    close(x.grad, [7.0, 11.0, 15.0])


@needs_torch
def test_accumulated_grad_matches_torch(device):
    values = [[0.5, -1.0], [2.0, 0.25]]
    x = t(values, device, requires_grad=True)
    tx = torch.tensor(values, requires_grad=True)
    for xx in (x, tx):
        (xx.exp() * xx).sum().backward()
        (xx.tanh() ** 2).mean().backward()
    close(x.grad, tx.grad.numpy(), rtol=1e-6)


def test_grad_can_be_reset_to_none_between_steps(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    (x * x).sum().backward()
    x.grad = None
    (x * 5).sum().backward()
    close(x.grad, [5.0, 5.0])


def test_intermediates_keep_no_grad(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = x * 3
    z = y.exp()
    z.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf Tensor"):  # as PyTorch says, too
        assert y.grad is None and z.grad is None
    assert not y.is_leaf and x.is_leaf
    assert x.grad is not None


def test_retain_grad_keeps_intermediate_grad_and_accumulates(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = x * 3
    y.retain_grad()
    z = (y * y).sum()           # dz/dy = 2y = [6, 12], dz/dx = 18x = [18, 36]
    z.backward(retain_graph=True)
    close(y.grad, [6.0, 12.0])
    close(x.grad, [18.0, 36.0])
    z.backward()
    close(y.grad, [12.0, 24.0])
    close(x.grad, [36.0, 72.0])
    assert y.grad.grad_fn is None and not y.grad.requires_grad


def test_retain_grad_on_leaf_is_a_no_op(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    x.retain_grad()
    (x * 2).sum().backward()
    close(x.grad, [2.0, 2.0])


# --- freed graphs -----------------------------------------------------------------------------

def test_second_backward_through_freed_graph_raises(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match=r"retain_graph=True"):
        y.backward()


def test_second_mg_grad_through_freed_graph_raises(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = (x.exp() * x).sum()
    mg.grad(y, x)
    with pytest.raises(RuntimeError, match=r"retain_graph=True"):
        mg.grad(y, x)


def test_retain_graph_allows_second_backward(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward(retain_graph=True)
    y.backward()
    close(x.grad, [6.0, 12.0])  # 3 * 2x


# --- deep and shared graphs -------------------------------------------------------------------

def test_chain_of_10000_ops_has_no_recursion_error(device):
    x = t(1.0, device, dtype=mg.float64, requires_grad=True)
    y = x
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)  # the default: deep graphs must not depend on a higher one
    try:
        for _ in range(10_000):
            y = y * 1.0001 + 0.0
        y.backward()
        del y  # freeing a 20,000-node chain must not overflow the stack either
    finally:
        sys.setrecursionlimit(old)
    assert x.grad.dtype == np.float64
    close(x.grad, 1.0001 ** 10_000, rtol=1e-9)


def test_node_reused_gets_summed_gradient(device):
    a = t([1.0, -2.0, 3.0], device, requires_grad=True)
    (a + a).sum().backward()
    close(a.grad, [2.0, 2.0, 2.0])
    a.grad = None
    (a * a).sum().backward()
    close(a.grad, [2.0, -4.0, 6.0])


def test_0d_leaf_used_twice(device):
    # d/da (a * a + a) = 2a + 1 = 5 at a = 2; the summed gradient must still be a Tensor
    # whose .array is a backend array (with a working .numpy()), not a NumPy scalar
    a = t(2.0, device, requires_grad=True)
    (a * a + a).backward()
    assert a.grad.shape == ()
    assert isinstance(a.grad.numpy(), np.ndarray)
    close(a.grad, 5.0)
    (g,) = mg.grad(a * a, a)
    assert isinstance(g.numpy(), np.ndarray)
    close(g, 4.0)


def test_diamond_gets_summed_gradient(device):
    # w = y * z with y = 2x, z = x^2  ->  w = 2x^3, dw/dx = 6x^2
    x = t([1.0, 2.0, -0.5], device, requires_grad=True)
    y = x * 2
    z = x * x
    w = y * z
    w.sum().backward()
    close(x.grad, [6.0, 24.0, 1.5])


def test_nested_diamond_on_intermediate(device):
    # h = exp(x); out = h*h + 3h  ->  dout/dx = (2h + 3) * h
    x = t([0.0, 0.5, -1.0], device, dtype=mg.float64, requires_grad=True)
    h = x.exp()
    (h * h + 3 * h).sum().backward()
    e = np.exp([0.0, 0.5, -1.0])
    close(x.grad, (2 * e + 3) * e, rtol=1e-12)


def test_same_tensor_used_100_times(device):
    x = t([0.5, 1.5], device, requires_grad=True)
    y = x * 1.0
    total = y
    for _ in range(99):
        total = total + y
    total.sum().backward()
    close(x.grad, [100.0, 100.0])


# --- higher order --------------------------------------------------------------------------

def test_create_graph_example_with_mg_grad(device):
    # y = x^2, dy/dx = 2x, z = (dy/dx)^3 + y = 8x^3 + x^2, dz/dx = 24x^2 + 2x = 100 at x = 2
    x = t(2.0, device, requires_grad=True)
    y = x ** 2
    (dy,) = mg.grad(y, x, create_graph=True)
    close(dy, 4.0)
    assert dy.requires_grad
    z = dy ** 3 + y
    (dz,) = mg.grad(z, x)
    close(dz, 100.0)
    assert x.grad is None


def test_create_graph_with_backward(device):
    x = t(2.0, device, requires_grad=True)
    y = x ** 2
    y.backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    g = x.grad
    x.grad = None
    (g ** 3 + y).backward()
    close(x.grad, 100.0)


def test_third_derivative_of_x4(device):
    # d/dx x^4 = 4x^3, 12x^2, 24x, 24;  at x = 1.5: 13.5, 27, 36, 24
    x = t(1.5, device, dtype=mg.float64, requires_grad=True)
    y = x ** 4
    (d1,) = mg.grad(y, x, create_graph=True)
    (d2,) = mg.grad(d1, x, create_graph=True)
    (d3,) = mg.grad(d2, x, create_graph=True)
    close(d1, 13.5)
    close(d2, 27.0)
    close(d3, 36.0)
    (d4,) = mg.grad(d3, x)
    close(d4, 24.0)


@needs_torch
def test_second_derivative_matches_torch(device):
    values = [0.3, -1.2, 2.0]
    x = t(values, device, dtype=mg.float64, requires_grad=True)
    tx = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    (g,) = mg.grad((x.sin() * x.exp()).sum(), x, create_graph=True)
    (tg,) = torch.autograd.grad((tx.sin() * tx.exp()).sum(), tx, create_graph=True)
    (gg,) = mg.grad((g * g).sum(), x)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    close(g, tg.detach().numpy(), rtol=1e-12)
    close(gg, tgg.numpy(), rtol=1e-12)


# --- mg.grad --------------------------------------------------------------------------------

def test_mg_grad_returns_tuple_and_does_not_touch_grad(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    w = t([3.0, 4.0], device, requires_grad=True)
    res = mg.grad((x * w).sum(), [x, w])
    assert isinstance(res, tuple) and len(res) == 2
    close(res[0], [3.0, 4.0])
    close(res[1], [1.0, 2.0])
    assert x.grad is None and w.grad is None


def test_mg_grad_leaves_existing_grad_unchanged(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    (x * 2).sum().backward()
    (g,) = mg.grad((x * x).sum(), x, create_graph=True)
    close(g, [2.0, 4.0])
    close(x.grad, [2.0, 2.0])


def test_mg_grad_allow_unused(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    u = t([5.0], device, requires_grad=True)
    y = (x * x).sum()
    with pytest.raises(RuntimeError):
        mg.grad(y, [x, u], retain_graph=True)
    gx, gu = mg.grad(y, [x, u], allow_unused=True)
    close(gx, [2.0, 4.0])
    assert gu is None
    assert u.grad is None


def test_mg_grad_with_grad_outputs(device):
    x = t([1.0, 2.0, 3.0], device, requires_grad=True)
    y = x * x  # vector output: vector-Jacobian product v * 2x
    v = t([1.0, -1.0, 0.5], device)
    (g,) = mg.grad(y, x, grad_outputs=v)
    close(g, [2.0, -4.0, 3.0])


def test_mg_grad_several_outputs_and_inputs(device):
    # y1 = a*b, y2 = a + b^2; gradients of y1 + 2*y2 (grad_outputs weights)
    a = t([1.0, 2.0], device, requires_grad=True)
    b = t([3.0, -1.0], device, requires_grad=True)
    y1 = a * b
    y2 = a + b * b
    ga, gb = mg.grad([y1, y2], [a, b],
                     grad_outputs=[mg.ones(2, device=device), t([2.0, 2.0], device)])
    close(ga, [3.0 + 2.0, -1.0 + 2.0])          # b + 2
    close(gb, [1.0 + 12.0, 2.0 - 4.0])          # a + 4b
    assert a.grad is None and b.grad is None


def test_mg_grad_wrt_intermediate(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = x * 3
    z = (y * y).sum()
    (gy,) = mg.grad(z, y)
    close(gy, [6.0, 12.0])
    assert x.grad is None and y._grad is None


def test_mg_grad_does_not_modify_grad_outputs(device):
    # a gradient returned by mg.grad, fed back as grad_outputs of an output that gets more
    # gradient from another output, must stay as it was (torch never writes into it)
    x = t([1.0, 2.0], device, requires_grad=True)
    a = x * 1.0
    (g,) = mg.grad(a.sum() + (a * 2).sum(), a)     # [3, 3]
    close(g, [3.0, 3.0])
    y = x * 3
    z = (y * y).sum()                              # dz/dy = 2y = [6, 12]
    (gx,) = mg.grad([y, z], x, grad_outputs=[g, None])
    close(g, [3.0, 3.0])
    close(gx, [27.0, 45.0])                        # 3 * (g + 2y)


def test_mg_grad_runs_hooks_of_intermediates(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: g * 2)
    (gx,) = mg.grad((y * y).sum(), x)              # 3 * 2 * 2y
    close(gx, [36.0, 72.0])


def test_mg_grad_errors(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    c = t([1.0, 2.0], device)
    with pytest.raises(RuntimeError):
        mg.grad((x * c).sum(), c)                  # an input that does not require grad
    with pytest.raises(RuntimeError):
        mg.grad(x * 2, x)                          # non-scalar output without grad_outputs


# --- backward arguments -------------------------------------------------------------------

def test_backward_with_gradient_on_non_scalar(device):
    x = t([1.0, 2.0, 3.0], device, requires_grad=True)
    y = x * x
    y.backward(gradient=t([1.0, 0.0, -2.0], device))
    close(x.grad, [2.0, 0.0, -12.0])


def test_backward_on_non_scalar_without_gradient_raises(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    with pytest.raises(RuntimeError):
        (x * 2).backward()
    assert x.grad is None


def test_backward_gradient_with_wrong_shape_raises(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    with pytest.raises(RuntimeError):
        (x * 2).backward(gradient=t([1.0, 1.0, 1.0], device))


def test_backward_on_tensor_without_grad_raises(device):
    x = t([1.0, 2.0], device)
    with pytest.raises(RuntimeError):
        (x * 2).sum().backward()


def test_backward_on_a_leaf(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    x.backward(gradient=t([3.0, 4.0], device))
    close(x.grad, [3.0, 4.0])


def test_grad_tensor_is_accumulated_in_place(device):
    # as torch's AccumulateGrad outside create_graph: the same .grad object is updated
    x = t([1.0, 2.0], device, requires_grad=True)
    (x * 2).sum().backward()
    g = x.grad
    (x * 3).sum().backward()
    assert x.grad is g
    close(g, [5.0, 5.0])
    x.grad.zero_()
    (x * x).sum().backward()
    close(x.grad, [2.0, 4.0])


def test_backward_inputs_limits_accumulation(device):
    a = t([1.0, 2.0], device, requires_grad=True)
    b = t([3.0, 4.0], device, requires_grad=True)
    (a * b).sum().backward(inputs=[a])
    close(a.grad, [3.0, 4.0])
    assert b.grad is None


def test_backward_inputs_on_intermediate(device):
    # as torch: the non-leaf input gets .grad, the leaf behind it does not
    x = t([1.0, 2.0], device, requires_grad=True)
    y = x * 3
    (y * y).sum().backward(inputs=[y])
    close(y.grad, [6.0, 12.0])
    assert x.grad is None


# --- grad modes -------------------------------------------------------------------------------

def test_no_grad_context_manager(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    assert mg.is_grad_enabled()
    with mg.no_grad():
        assert not mg.is_grad_enabled()
        y = x * 2
    assert mg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    close(y, [2.0, 4.0])


def test_no_grad_decorator(device):
    x = t([1.0, 2.0], device, requires_grad=True)

    @mg.no_grad()
    def f(v):
        assert not mg.is_grad_enabled()
        return v * v

    y = f(x)
    assert not y.requires_grad and y.grad_fn is None
    assert mg.is_grad_enabled()
    assert f.__name__ == "f"


def test_enable_grad_inside_no_grad(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    with mg.no_grad():
        with mg.enable_grad():
            assert mg.is_grad_enabled()
            y = x * x
        assert not mg.is_grad_enabled()
        z = x * x
    assert y.requires_grad and y.grad_fn is not None
    assert not z.requires_grad
    y.sum().backward()
    close(x.grad, [2.0, 4.0])


def test_enable_grad_decorator_inside_no_grad(device):
    x = t([3.0], device, requires_grad=True)

    @mg.enable_grad()
    def f(v):
        return v * 2

    with mg.no_grad():
        y = f(x)
    assert y.requires_grad


def test_no_grad_restores_mode_after_exception():
    with pytest.raises(ZeroDivisionError):
        with mg.no_grad():
            1 / 0
    assert mg.is_grad_enabled()


def test_set_grad_enabled_context_manager(device):
    x = t([1.0], device, requires_grad=True)
    with mg.set_grad_enabled(False):
        assert not mg.is_grad_enabled()
        y = x * 2
        with mg.set_grad_enabled(True):
            z = x * 2
    assert mg.is_grad_enabled()
    assert not y.requires_grad and z.requires_grad


def test_set_grad_enabled_as_a_function(device):
    # torch.set_grad_enabled(False) called as a function switches grad mode off at once
    x = t([1.0], device, requires_grad=True)
    try:
        mg.set_grad_enabled(False)
        assert not mg.is_grad_enabled()
        assert not (x * 2).requires_grad
    finally:
        mg.set_grad_enabled(True)
    assert mg.is_grad_enabled()


def test_set_grad_enabled_as_a_decorator(device):
    x = t([1.0], device, requires_grad=True)

    @mg.set_grad_enabled(False)
    def f(v):
        return v * 2

    assert mg.is_grad_enabled()        # decorating changes nothing by itself
    y = f(x)
    assert not y.requires_grad
    assert mg.is_grad_enabled()


# --- detach and requires_grad_ ---------------------------------------------------------------

def test_detach_has_no_grad_and_shares_data(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = x * 2
    d = y.detach()
    assert not d.requires_grad and d.grad_fn is None and d.is_leaf
    close(d, [2.0, 4.0])
    dx = x.detach()
    dx.add_(10.0)  # the same memory: x changes too (as in torch)
    close(x, [11.0, 12.0])


def test_detach_stops_gradient(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    (x * x.detach()).sum().backward()  # only one factor is differentiated: grad = x
    close(x.grad, [1.0, 2.0])


def test_requires_grad_(device):
    x = t([1.0, 2.0], device)
    assert not x.requires_grad
    assert x.requires_grad_() is x
    assert x.requires_grad and x.is_leaf
    (x * 3).sum().backward()
    close(x.grad, [3.0, 3.0])
    x.requires_grad_(False)
    assert not x.requires_grad


@pytest.mark.parametrize("values", [[1, 2], [True, False]])
def test_requires_grad_on_integer_or_bool_tensor_raises(device, values):
    x = t(values, device)
    with pytest.raises(RuntimeError):
        x.requires_grad_()
    with pytest.raises(RuntimeError):
        t(values, device, requires_grad=True)


# --- hooks -----------------------------------------------------------------------------------

def test_leaf_hook_observes_total_gradient(device):
    seen = []
    x = t([1.0, 2.0], device, requires_grad=True)
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    (x * x + x).sum().backward()       # 2x + 1, delivered once (as torch)
    assert len(seen) == 1
    close(seen[0], [3.0, 5.0])
    close(x.grad, [3.0, 5.0])


def test_leaf_hook_replaces_gradient(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    x.register_hook(lambda g: g * 10)
    (x * 3).sum().backward()
    close(x.grad, [30.0, 30.0])


def test_non_leaf_hook_observes(device):
    seen = []
    x = t([1.0, 2.0], device, requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: seen.append(g.numpy().copy()))
    (y * y).sum().backward()
    assert len(seen) == 1
    close(seen[0], [6.0, 12.0])
    close(x.grad, [18.0, 36.0])
    assert y._grad is None


def test_non_leaf_hook_replaces_gradient(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = x * 3
    y.register_hook(lambda g: g * 2)
    y.retain_grad()  # as in torch, the retained grad is the one the hook returned
    (y * y).sum().backward()
    close(y.grad, [12.0, 24.0])
    close(x.grad, [36.0, 72.0])


def test_hooks_run_in_registration_order(device):
    x = t([1.0], device, requires_grad=True)
    y = x * 1.0
    y.register_hook(lambda g: g + 1)
    y.register_hook(lambda g: g * 10)
    y.sum().backward()
    close(x.grad, [20.0])  # (1 + 1) * 10


def test_hook_handle_remove(device):
    calls = []
    x = t([1.0, 2.0], device, requires_grad=True)
    handle = x.register_hook(lambda g: calls.append(1) or g * 0)
    (x * 2).sum().backward()
    assert len(calls) == 1
    close(x.grad, [0.0, 0.0])
    handle.remove()
    (x * 2).sum().backward()
    assert len(calls) == 1
    close(x.grad, [2.0, 2.0])

    y = x * 1.0
    h = y.register_hook(lambda g: calls.append(2) or g * 0)
    h.remove()
    x.grad = None
    (y * 4).sum().backward()
    assert calls == [1]
    close(x.grad, [4.0, 4.0])


def test_register_hook_on_tensor_without_grad_raises(device):
    with pytest.raises(RuntimeError):
        t([1.0], device).register_hook(lambda g: g)


# --- custom Function --------------------------------------------------------------------

class ScaledMul(Function):
    """out = alpha * x * y;  dx = grad * alpha * y,  dy = grad * alpha * x"""
    seen_needs = []

    @staticmethod
    def forward(ctx, x, y, alpha):
        ScaledMul.seen_needs.append(ctx.needs_input_grad)
        assert isinstance(x, mg.Tensor) and isinstance(y, mg.Tensor)
        ctx.save_for_backward(x, y)
        ctx.alpha = alpha
        return x * y * alpha

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        dx = grad * y * ctx.alpha if ctx.needs_input_grad[0] else None
        dy = grad * x * ctx.alpha if ctx.needs_input_grad[1] else None
        return dx, dy, None


class SinCos(Function):
    """outs = (sin x, cos x);  dx = g_sin * cos x - g_cos * sin x"""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin(), x.cos()

    @staticmethod
    def backward(ctx, g_sin, g_cos):
        (x,) = ctx.saved_tensors
        return g_sin * x.cos() - g_cos * x.sin()


class DoubleAndMask(Function):
    """outs = (2x, float mask x > 0); the mask is marked non-differentiable"""
    @staticmethod
    def forward(ctx, x):
        mask = (x > 0).float()
        ctx.mark_non_differentiable(mask)
        return x * 2, mask

    @staticmethod
    def backward(ctx, g, g_mask):
        return g * 2


class WrongMul(Function):
    """out = x * y with a wrong gradient for y at element 2"""
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        bump = mg.tensor([1.0, 1.0, 3.0, 1.0], dtype=x.dtype, device=x.device)
        return grad * y, grad * x * bump


def test_custom_function_forward_backward(device):
    x = t([1.0, 2.0], device, requires_grad=True)
    y = t([3.0, -1.0], device, requires_grad=True)
    out = ScaledMul.apply(x, y, 0.5)
    close(out, [1.5, -1.0])
    assert out.requires_grad and isinstance(out.grad_fn, ScaledMul)
    out.sum().backward()
    close(x.grad, [1.5, -0.5])
    close(y.grad, [0.5, 1.0])


def test_custom_function_needs_input_grad(device):
    ScaledMul.seen_needs.clear()
    x = t([1.0, 2.0], device, requires_grad=True)
    y = t([3.0, -1.0], device)
    ScaledMul.apply(x, y, 2.0).sum().backward()
    assert tuple(ScaledMul.seen_needs[-1]) == (True, False, False)
    close(x.grad, [6.0, -2.0])
    assert y.grad is None
    with mg.no_grad():
        out = ScaledMul.apply(x, y, 2.0)
    assert not out.requires_grad
    assert tuple(ScaledMul.seen_needs[-1]) == (False, False, False)


def test_custom_function_gradcheck(device):
    x = t([0.3, -1.1, 2.0], device, dtype=mg.float64, requires_grad=True)
    y = t([1.5, 0.2, -0.7], device, dtype=mg.float64, requires_grad=True)
    assert gradcheck(lambda a, b: ScaledMul.apply(a, b, 1.7), (x, y))
    assert gradgradcheck(lambda a, b: ScaledMul.apply(a, b, 1.7), (x, y))


def test_custom_function_multiple_outputs(device):
    x = t([0.3, -1.1, 2.0], device, dtype=mg.float64, requires_grad=True)
    s, c = SinCos.apply(x)
    close(s, np.sin([0.3, -1.1, 2.0]), rtol=1e-12)
    close(c, np.cos([0.3, -1.1, 2.0]), rtol=1e-12)
    (s * 2 + c * 3).sum().backward()
    v = np.array([0.3, -1.1, 2.0])
    close(x.grad, 2 * np.cos(v) - 3 * np.sin(v), rtol=1e-12)
    x.grad = None
    SinCos.apply(x)[1].sum().backward()  # an unused output's gradient counts as zero
    close(x.grad, -np.sin(v), rtol=1e-12)
    assert gradcheck(lambda a: SinCos.apply(a), (x,))


def test_custom_function_mark_non_differentiable(device):
    x = t([-1.0, 2.0], device, dtype=mg.float64, requires_grad=True)
    doubled, mask = DoubleAndMask.apply(x)
    assert doubled.requires_grad
    assert not mask.requires_grad and mask.grad_fn is None
    close(mask, [0.0, 1.0])
    (doubled * mask).sum().backward()
    close(x.grad, [0.0, 2.0])
    assert gradcheck(lambda a: DoubleAndMask.apply(a)[0], (x,))


def test_gradcheck_catches_wrong_backward(device):
    x = t([0.5, -1.0, 2.0, 1.5], device, dtype=mg.float64, requires_grad=True)
    y = t([1.0, 3.0, -2.0, 0.25], device, dtype=mg.float64, requires_grad=True)
    with pytest.raises(GradcheckError) as info:
        gradcheck(lambda a, b: WrongMul.apply(a, b), (x, y))
    msg = str(info.value)
    assert "input 1" in msg
    assert "(2,)" in msg
    assert gradcheck(lambda a, b: WrongMul.apply(a, b), (x, y), raise_exception=False) is False


def test_gradcheck_true_for_correct_builtin_ops(device):
    x = t([[0.2, -0.4], [1.3, 0.8]], device, dtype=mg.float64, requires_grad=True)
    assert gradcheck(lambda a: (a.tanh() * a.exp()).sum(1), (x,)) is True
    assert gradcheck(lambda a: a.sigmoid() @ a, (x,), raise_exception=False) is True


def test_gradcheck_error_is_a_runtime_error():
    assert issubclass(GradcheckError, RuntimeError)
    assert mg.autograd.GradcheckError is GradcheckError
