"""User-defined ``mg.autograd.Function``s written the other ways PyTorch allows: with
``setup_context``, with ``vjp`` for ``backward``, with ``ctx.set_materialize_grads(False)``
and with ``@once_differentiable``; each against torch."""
import pytest

import minigrad as mg
from tests.torch_ref import needs_torch, torch


def square_with_setup_context(M):
    class Square(M.autograd.Function):
        @staticmethod
        def forward(x, power=2.0):
            return x ** power

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, power = inputs
            ctx.save_for_backward(x, output)
            ctx.power = power

        @staticmethod
        def backward(ctx, g):
            x, out = ctx.saved_tensors
            return g * ctx.power * out / x, None

    x = M.tensor([1.0, 3.0], dtype=M.float64, requires_grad=True)
    y = Square.apply(x, 3.0)
    y.sum().backward()
    g, = M.autograd.grad(Square.apply(x, 3.0).sum(), x, create_graph=True)
    g2, = M.autograd.grad(g.sum(), x)
    return y.tolist(), x.grad.tolist(), g.tolist(), g2.tolist(), y.grad_fn.name()


def vjp_for_backward(M):
    class Twice(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def vjp(ctx, g):
            return g * 2

    x = M.tensor([1.0, 2.0], requires_grad=True)
    Twice.apply(x).sum().backward()
    return x.grad.tolist()


def grads_not_materialized(M):
    seen = []

    class Two(M.autograd.Function):
        @staticmethod
        def forward(ctx, x, materialize):
            ctx.set_materialize_grads(materialize)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((g1 is None, g2 is None))
            total = 0
            if g1 is not None:
                total = total + g1 * 2
            if g2 is not None:
                total = total + g2 * 3
            return total, None

    out = []
    for materialize in (True, False):
        x = M.tensor([1.0], requires_grad=True)
        a, b = Two.apply(x, materialize)
        b.sum().backward()
        out.append(x.grad.tolist())
    return out, seen


def once_differentiable_program(M):
    class Exp(M.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        @M.autograd.function.once_differentiable
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y

    x = M.tensor([0.5, 1.0], dtype=M.float64, requires_grad=True)
    Exp.apply(x).sum().backward()
    first = x.grad.tolist()
    g, = M.autograd.grad(Exp.apply(x).sum(), x, create_graph=True)
    return first, g.tolist(), g.requires_grad


@needs_torch
@pytest.mark.parametrize("program", [square_with_setup_context, vjp_for_backward,
                                     grads_not_materialized, once_differentiable_program])
def test_as_torch(program):
    assert program(mg) == program(torch)


@needs_torch
def test_differentiating_a_once_differentiable_backward_again_raises_as_torch():
    for M in (torch, mg):
        class Exp(M.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.exp()

            @staticmethod
            @M.autograd.function.once_differentiable
            def backward(ctx, g):
                x, = ctx.saved_tensors
                return g * x.exp()

        x = M.tensor([1.0], dtype=M.float64, requires_grad=True)
        v = M.tensor([2.0], dtype=M.float64, requires_grad=True)  # a gradient that needs one
        g, = M.autograd.grad(Exp.apply(x), x, grad_outputs=v, create_graph=True)
        assert g.requires_grad
        with pytest.raises(RuntimeError, match="once_differentiable"):
            g.sum().backward()


def test_mark_dirty_is_refused_in_one_line():
    class AddOne(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = mg.tensor([1.0], requires_grad=True)
    with pytest.raises(NotImplementedError, match="^AddOne: mark_dirty"):
        AddOne.apply(x.clone())
