"""Edges of autograd against PyTorch: function transforms nested around tensors captured
from outside, what a custom Function's backward may return, the gradient given to
backward, anomaly mode's check of that gradient, mg.compile on steps that return a graph,
and sign (and so |x|'s gradient) at NaN.

Most programs are written once against ``M`` (``minigrad`` on the tested device, or
``torch``), so both libraries run the same text."""
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.compile import CompileWarning
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

NAN, INF = float("nan"), float("inf")


def both(program, device):
    """``program(M)`` run by minigrad on ``device`` and by torch."""
    return program(On(mg, device)), program(torch)


def values(t):
    return t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def assert_same(ours, theirs):
    """The same values (NaN where torch has NaN) and requires_grad, leaf by leaf."""
    if isinstance(ours, (tuple, list)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
        return
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.requires_grad == theirs.requires_grad
    np.testing.assert_allclose(values(ours), values(theirs), rtol=1e-6, atol=1e-7)


# --- transforms nested around a captured tensor --------------------------------------------

NESTED = {
    "grad of grad of a closure": lambda M: M.func.grad(
        lambda x: M.func.grad(lambda y: (x * y).sum())(M.tensor([1.0, 2.0])).sum())(
            M.tensor([3.0, 4.0])),
    "jacrev of grad of a closure": lambda M: M.func.jacrev(
        lambda x: M.func.grad(lambda y: (x * y * y).sum())(M.tensor([1.0, 2.0])))(
            M.tensor([3.0, 4.0])),
    "grad of vjp's output with a closure": lambda M: M.func.grad(
        lambda x: M.func.vjp(lambda y: x * y, M.tensor([1.0, 2.0]))[0].sum())(
            M.tensor([3.0, 4.0])),
    "grad of vjp_fn's gradient with a closure": lambda M: M.func.grad(
        lambda x: M.func.vjp(lambda y: (x * y).exp(), M.tensor([1.0, 2.0]))[1](
            M.ones(2))[0].sum())(M.tensor([0.5, -0.5])),
    "jacrev of jacrev of a closure": lambda M: M.func.jacrev(
        lambda x: M.func.jacrev(lambda y: (x * y).sin())(M.tensor([1.0, 2.0])))(
            M.tensor([0.3, 0.4])),
    "grad of grad_and_value's value with a closure": lambda M: M.func.grad(
        lambda x: M.func.grad_and_value(lambda y: (x * y * y).sum())(
            M.tensor([1.0, 2.0]))[1])(M.tensor([3.0, 4.0])),
    "grad of grad through the input and a closure": lambda M: M.func.grad(
        lambda x: M.func.grad(lambda y: (x * y * y).sum())(x * 2).sum())(
            M.tensor([3.0, 4.0])),
    "hessian of a function with a grad inside": lambda M: M.func.hessian(
        lambda x: M.func.grad(lambda y: (x * x * y).sum())(M.tensor([1.0, 2.0])).sum())(
            M.tensor([3.0, 4.0])),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(NESTED))
def test_an_inner_transform_keeps_what_an_outer_one_differentiates(device, name):
    ours, theirs = both(NESTED[name], device)
    assert_same(ours, theirs)
    assert np.abs(values(theirs)).sum() > 0  # (zeros would hide a lost dependence)


def _backward_through_grad(M):
    """A gradient taken by grad is a function of the captured x: backward reaches x."""
    x = M.tensor([1.0, 2.0], requires_grad=True)
    g = M.func.grad(lambda y: (x * y * y).sum())(M.tensor([3.0, 4.0]))
    (g * M.tensor([1.0, -1.0])).sum().backward()
    return g, x.grad


def _backward_through_vjp(M):
    """vjp's output and vjp_fn's gradients depend on the captured x; backward reaches it."""
    x = M.tensor([1.0, 2.0], requires_grad=True)
    out, vjp_fn = M.func.vjp(lambda y: (x * y).tanh(), M.tensor([3.0, -4.0]))
    (g,) = vjp_fn(M.ones(2))
    (out.sum() + (g * g).sum()).backward()
    return out, g, x.grad


def _backward_through_an_input(M):
    """An input that requires grad is outside the transform too."""
    x = M.tensor([1.0, 2.0], requires_grad=True)
    g = M.func.grad(lambda y: (y * y * y).sum())(x)
    g.sum().backward()
    return g, x.grad


def _backward_through_a_cotangent(M):
    """vjp_fn's gradients are linear in the cotangent: differentiable with respect to it."""
    u = M.tensor([1.0, -2.0], requires_grad=True)
    _, vjp_fn = M.func.vjp(lambda y: y * y, M.tensor([3.0, 4.0]))
    (g,) = vjp_fn(u)
    g.sum().backward()
    return g, u.grad


@needs_torch
@pytest.mark.parametrize("program", [_backward_through_grad, _backward_through_vjp,
                                     _backward_through_an_input,
                                     _backward_through_a_cotangent],
                         ids=lambda p: p.__name__.strip("_"))
def test_results_are_differentiable_with_respect_to_what_is_outside(device, program):
    ours, theirs = both(program, device)
    assert_same(ours, theirs)


REQUIRES_GRAD = {
    "grad of a function of its input only": lambda M: M.func.grad(
        lambda y: (y * y).sum())(M.tensor([3.0, 4.0])),
    "vjp of its input only": lambda M: M.func.vjp(lambda y: y * 2, M.tensor([3.0, 4.0]))[0],
    "vjp returning its input": lambda M: M.func.vjp(lambda y: y, M.tensor([3.0, 4.0]))[0],
    "jacrev of its input only": lambda M: M.func.jacrev(lambda y: y.sin())(M.tensor([1.0])),
    "hessian of its input only": lambda M: M.func.hessian(
        lambda y: (y * y * y).sum())(M.tensor([3.0, 4.0])),
    "jvp of its input only": lambda M: M.func.jvp(
        lambda y: y * y, (M.tensor([3.0, 4.0]),), (M.ones(2),)),
    "outputs with and without the closure": lambda M, x: M.func.vjp(
        lambda y: (x * y, y * 2), M.tensor([3.0, 4.0]))[0],
    "jvp of a closure": lambda M, x: M.func.jvp(
        lambda y: x * y * y, (M.tensor([3.0, 4.0]),), (M.ones(2),)),
    "vjp_fn's gradients with and without the closure": lambda M, x: M.func.vjp(
        lambda y, z: (x * y * y).sum() + (z * z).sum(), M.tensor([3.0, 4.0]),
        M.tensor([1.0, 5.0]))[1](M.tensor(1.0)),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(REQUIRES_GRAD))
def test_requires_grad_of_results_as_torch(device, name):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)  # outside the transform: captured
        fn = REQUIRES_GRAD[name]
        return fn(M, x) if fn.__code__.co_argcount == 2 else fn(M)
    ours, theirs = both(program, device)
    assert_same(ours, theirs)


@needs_torch
def test_no_grad_gives_results_without_a_graph(device):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        with M.no_grad():
            g = M.func.grad(lambda y: (x * y).sum())(M.tensor([3.0, 4.0]))
            out, vjp_fn = M.func.vjp(lambda y: x * y * y, M.tensor([3.0, 4.0]))
        (later,) = vjp_fn(M.ones(2))  # grad mode is on again when vjp_fn runs
        return g, out, later
    ours, theirs = both(program, device)
    assert_same(ours, theirs)
    assert [t.requires_grad for t in ours] == [False, False, True]


# --- grad: a 0-d output, and aux without the transform's graph -------------------------------

@needs_torch
@pytest.mark.parametrize("output", [
    lambda x: (x * x).sum(0, keepdim=True),   # one element, but one dimension
    lambda x: (x * x).sum().reshape(1, 1),
    lambda x: x * x,
])
@pytest.mark.parametrize("transform", ["grad", "grad_and_value"])
def test_grad_needs_a_0d_output(device, output, transform):
    message = raises_as_torch(
        lambda M: getattr(M.func, transform)(output)(M.tensor([1.0, 2.0])), RuntimeError,
        device)
    assert "Expected f(*args) to return a scalar Tensor" in message
    assert "dims" in message


@needs_torch
def test_grad_of_a_number_and_of_a_0d_output(device):
    message = raises_as_torch(lambda M: M.func.grad(lambda x: 3.0)(M.tensor([1.0])),
                              RuntimeError, device)
    assert "to return a Tensor, got float" in message
    ours, theirs = both(lambda M: M.func.grad(lambda x: (x * x).sum())(M.tensor(2.0)), device)
    assert_same(ours, theirs)


AUX = {
    "no closure": lambda M, x, y: ((y * y).sum(), {"double": y * 2, "y": y}),
    "aux from the closure": lambda M, x, y: ((y * y).sum(), {"double": x * y, "y": y}),
    "aux from a constant": lambda M, x, y: ((y * y).sum(), {"double": M.ones(2) * 2, "y": y}),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(AUX))
@pytest.mark.parametrize("transform", ["grad", "grad_and_value", "jacrev", "vjp"])
def test_aux_carries_no_graph_of_the_transform(device, name, transform):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        fn = lambda y: AUX[name](M, x, y)  # noqa: E731
        y = M.tensor([3.0, 4.0])
        if transform == "vjp":
            aux = M.func.vjp(fn, y, has_aux=True)[2]
        else:
            aux = getattr(M.func, transform)(fn, has_aux=True)(y)[1]
        if transform == "grad_and_value":
            aux = aux[1]
        return aux["double"], aux["y"]
    ours, theirs = both(program, device)
    assert_same(ours, theirs)


# --- a custom Function's backward: one gradient per input, then only Nones --------------------

def _function(M, returns):
    """out = 2x, with a backward that returns ``returns(grad)``."""
    class Double(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            return returns(grad)
    return Double


@needs_torch
@pytest.mark.parametrize("returns", [
    lambda g: (g * 3, None),
    lambda g: (g * 3, None, None),
    lambda g: (None, None),
    lambda g: g * 3,
], ids=["one None more", "two Nones more", "only Nones", "one gradient"])
def test_trailing_nones_beyond_the_inputs_are_dropped(device, returns):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        w = M.tensor([0.5, -1.0], requires_grad=True)
        (_function(M, returns).apply(x) * w).sum().backward()
        return x.grad if x.grad is not None else M.zeros(2), w.grad
    ours, theirs = both(program, device)
    assert_same(ours, theirs)


@needs_torch
@pytest.mark.parametrize("returns", [lambda g: (g * 3, g), lambda g: (g, None, g * 0),
                                     lambda g: ()],
                         ids=["a gradient more", "a gradient after a None", "none at all"])
def test_a_wrong_number_of_gradients_is_refused(device, returns):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        _function(M, returns).apply(x).sum().backward()
    message = raises_as_torch(program, RuntimeError, device)
    assert "DoubleBackward" in message and "expected 1" in message


@needs_torch
def test_a_function_of_two_inputs_may_not_return_one_gradient(device):
    def program(M):
        class Mul(M.autograd.Function):
            @staticmethod
            def forward(ctx, x, y):
                return x * y

            @staticmethod
            def backward(ctx, grad):
                return grad * 3,
        Mul.apply(M.tensor([1.0], requires_grad=True), M.ones(1)).sum().backward()
    message = raises_as_torch(program, RuntimeError, device)
    assert "MulBackward" in message and "expected 2" in message


# --- the gradient given to backward -----------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("gradient", [2.0, 2, [1.0, 1.0], np.ones(2, np.float32)],
                         ids=["float", "int", "list", "array"])
@pytest.mark.parametrize("scalar", [True, False], ids=["0-d output", "vector output"])
def test_backward_takes_a_tensor_gradient_only(device, gradient, scalar):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        y = (x * 3).sum() if scalar else x * 3
        y.backward(gradient=gradient)
    message = raises_as_torch(program, TypeError, device)
    assert message.startswith("backward:") and "Tensor" in message


@needs_torch
def test_mg_grad_takes_tensor_grad_outputs_only(device):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        M.autograd.grad(x * 3, x, [1.0, 1.0])
    message = raises_as_torch(program, TypeError, device)
    assert message.startswith("mg.grad:") and "got float" in message


@needs_torch
def test_a_tensor_gradient_still_works(device):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        (x * 3).backward(gradient=M.tensor([2.0, -1.0]))
        (x * x).sum().backward(gradient=M.tensor(0.5))
        (g,) = M.autograd.grad(x * 4, x, M.tensor([1.0, 2.0], dtype=M.float64))
        return x.grad, g
    ours, theirs = both(program, device)
    assert_same(ours, theirs)


# --- anomaly mode: NaN in the gradient given to backward -------------------------------------

def _seed_program(op, seed, use_grad=False):
    def program(M):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        with M.autograd.detect_anomaly():
            y = op(x)
            if use_grad:
                return M.autograd.grad(y, x, M.tensor(seed))[0]
            y.backward(M.tensor(seed))
        return x.grad
    return program


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's anomaly mode warns on entry
@pytest.mark.parametrize("op, node", [
    (lambda x: x * 3, "MulBackward0"),
    (lambda x: (x * 3).exp(), "ExpBackward0"),
    (lambda x: x.reshape(2, 1), "ReshapeAliasBackward0|ViewBackward0"),
], ids=["mul", "exp", "reshape"])
@pytest.mark.parametrize("use_grad", [False, True], ids=["backward", "mg.grad"])
def test_nan_in_the_gradient_given_to_backward_names_the_op(device, op, node, use_grad):
    seed = [[NAN], [1.0]] if "Reshape" in node else [NAN, 1.0]
    program = _seed_program(op, seed, use_grad)
    with pytest.raises(RuntimeError):
        program(torch)
    with pytest.raises(RuntimeError, match=f"anomaly: .*({node}).*NaN") as info:
        program(On(mg, device))
    assert "\n" not in str(info.value)
    assert not mg.autograd.is_anomaly_enabled()


@needs_torch
@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("op, seed", [
    (lambda x: x, [NAN, 1.0]),          # straight into a leaf: no backward runs
    (lambda x: x * 3, [INF, 1.0]),      # infinite on purpose: passed on, as torch does
    (lambda x: x * 3, [1.0, 2.0]),
], ids=["leaf", "inf", "finite"])
def test_other_gradients_given_to_backward_pass(device, op, seed):
    ours, theirs = both(_seed_program(op, seed), device)
    assert_same(ours, theirs)


def test_nan_given_to_backward_outside_anomaly_mode_passes(device):
    x = mg.tensor([1.0, 2.0], requires_grad=True, device=device)
    (x * 3).backward(mg.tensor([NAN, 1.0], device=device))
    assert np.isnan(x.grad.numpy()[0]) and x.grad.numpy()[1] == 3.0


# --- mg.compile: a step that returns a graph runs eagerly -------------------------------------

def test_a_step_returning_a_graph_runs_eagerly_and_says_why(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)
    step = mg.compile(lambda x: (x * w).sum())
    with pytest.warns(CompileWarning, match="grad_fn") as caught:
        outs = [step(mg.tensor([1.0, float(i)], device=device)) for i in range(4)]
    assert len(caught) == 1
    assert [o.requires_grad for o in outs] == [True] * 4
    assert [o.item() for o in outs] == [1.0, 3.0, 5.0, 7.0]
    assert step.replays == 0
    assert any("SumBackward0" in line and "replay builds no graph" in line for line in step.log)
    outs[-1].backward()  # the graph is there, as eagerly
    assert w.grad.tolist() == [1.0, 3.0]


def test_a_tensor_no_backward_used_runs_eagerly_beside_the_loss(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        w.grad = None
        loss = (x * w).sum()
        loss.backward()
        return loss, w * 2  # made after backward: its graph is the caller's
    step = mg.compile(step)
    with pytest.warns(CompileWarning, match=r"grad_fn \(MulBackward0\)"):
        outs = [step(mg.tensor([1.0, 1.0], device=device)) for _ in range(4)]
    assert all(doubled.requires_grad for _, doubled in outs) and step.replays == 0


def test_a_training_step_returning_its_loss_still_replays(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        w.grad = None
        y = x * w
        loss = (y * y).sum()
        loss.backward()
        return loss, y  # both served the step's backward
    step = mg.compile(step)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        outs = [step(mg.tensor([1.0, float(i)], device=device)) for i in range(4)]
    assert step.replays == 2
    assert [loss.item() for loss, _ in outs] == [1.0 + 4.0 * i * i for i in range(4)]
    assert w.grad.tolist() == [2.0, 4.0 * 3 * 3]  # 2 y x


def test_a_step_without_grad_mode_replays(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)
    step = mg.compile(lambda x: (x * w).sum())
    with warnings.catch_warnings(), mg.no_grad():
        warnings.simplefilter("error", CompileWarning)
        outs = [step(mg.tensor([1.0, float(i)], device=device)).item() for i in range(4)]
    assert outs == [1.0, 3.0, 5.0, 7.0] and step.replays == 2


# --- sign at NaN, and |x|'s gradient ---------------------------------------------------------

SPECIAL = [NAN, -0.0, 0.0, -2.5, 3.0, INF, -INF, 1e-30]


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_sign_is_zero_at_nan(device, dtype):
    ours, theirs = both(lambda M: M.tensor(SPECIAL, dtype=getattr(M, dtype)).sign(), device)
    np.testing.assert_array_equal(values(ours), values(theirs))
    np.testing.assert_array_equal(np.signbit(values(ours)), np.signbit(values(theirs)))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")


@needs_torch
def test_sign_of_a_0d_nan_and_of_integers(device):
    for program in (lambda M: M.tensor(NAN).sign(), lambda M: M.tensor([-3, 0, 2]).sign(),
                    lambda M: M.tensor(NAN, requires_grad=True).sign()):
        ours, theirs = both(program, device)
        np.testing.assert_array_equal(values(ours), values(theirs))
        assert ours.requires_grad == theirs.requires_grad


@needs_torch
def test_abs_gradient_and_tangent_at_nan(device):
    def program(M):
        x = M.tensor(SPECIAL, requires_grad=True)
        (x.abs() * M.arange(len(SPECIAL))).sum().backward()
        tangent = M.func.jvp(M.abs, (M.tensor(SPECIAL),), (M.ones(len(SPECIAL)),))[1]
        return x.grad, tangent
    (grad, tangent), (grad_t, tangent_t) = both(program, device)
    np.testing.assert_array_equal(values(grad), values(grad_t))
    np.testing.assert_array_equal(values(tangent), values(tangent_t))
    assert values(grad)[0] == 0 and values(tangent)[0] == 0


@needs_torch
def test_a_leaf_that_stopped_requiring_grad_gets_no_grad_but_its_hooks_run(device):
    """requires_grad_(False) after the graph was recorded: backward still runs the leaf's
    hooks, and leaves its .grad alone, as PyTorch."""
    for M in (On(mg, device), torch):
        x = M.ones(2, requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g.shape))
        y = (x * x).sum()
        x.requires_grad_(False)
        y.backward()
        assert x.grad is None and len(seen) == 1


@needs_torch
@pytest.mark.parametrize("op", ["matmul", "mm_t", "bmm", "linear", "linear_3d"])
def test_a_weight_changed_in_place_after_forward_is_fine_when_its_gradient_does_not_read_it(
        op, device):
    """Products keep only what a gradient reads, as PyTorch: with an input that needs no
    gradient, the weight is not kept, so changing it in place (an optimiser's update under
    no_grad) before backward is no error, and the weight's gradient is the same."""
    def run(M, On_):
        p = On_.ones(2, 3, dtype=M.float64, requires_grad=True) if op != "bmm" else \
            On_.ones(2, 3, 3, dtype=M.float64, requires_grad=True)
        x = On_.tensor(np.arange(12.0).reshape(4, 3)) if op != "bmm" else \
            On_.tensor(np.arange(12.0).reshape(2, 2, 3))
        nnf = M.nn.functional
        out = {"matmul": lambda: x @ p.T, "mm_t": lambda: x.mm(p.t()),
               "bmm": lambda: x.bmm(p), "linear": lambda: nnf.linear(x, p),
               "linear_3d": lambda: nnf.linear(x.reshape(2, 2, 3), p)}[op]()
        with M.no_grad():
            p.mul_(0.5)
        out.sum().backward()
        return p.grad.numpy()
    np.testing.assert_array_equal(run(mg, On(mg, device)), run(torch, torch))


@needs_torch
def test_repeat_by_ones_is_a_copy_and_new_tensors_take_dtype_device_and_grad(device):
    for M in (On(mg, device), torch):
        x = M.tensor([1.0, 2.0, 3.0])
        x.repeat(1).mul_(10)
        x.reshape(1, 3).repeat(1, 1).mul_(10)
        assert x.tolist() == [1.0, 2.0, 3.0]
        z = x.new_zeros(2, dtype=M.int64)
        o = x.new_ones((2, 2), requires_grad=True)
        f = x.new_full((2,), 7, dtype=M.float64)
        assert str(z.dtype).endswith("int64") and o.requires_grad and f.tolist() == [7.0, 7.0]
        assert str(f.dtype).endswith("float64") and x.new_empty(0, 3).shape == (0, 3)
        q = M.tensor(7).div(M.tensor(-2), rounding_mode="trunc")
        assert q.item() == -3 and repr(q + 1) == repr(M.tensor(-2))


@needs_torch
def test_retain_grad_on_a_view_survives_an_in_place_change_of_its_base(device):
    for M in (On(mg, device), torch):
        x = M.ones(2, 2, requires_grad=True)
        h = x * 1
        v = h[0]
        v.retain_grad()
        h.mul_(2)
        (v * v).sum().backward()
        assert v.grad.tolist() == [4.0, 4.0]
