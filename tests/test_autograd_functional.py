"""``mg.autograd.functional`` against ``torch.autograd.functional``: the same function of
the same float64 inputs must give the same values, the same nesting (Tensor, tuple, tuple
of tuples), the same ``requires_grad`` on what comes back (with and without
``create_graph``), and the same errors."""
import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import needs_torch, torch


def data(M):
    rng = np.random.default_rng(0)
    x, y, A = (M.tensor(rng.standard_normal(s)) for s in ((3,), (3,), (2, 3)))
    return x, y, A


# each: M -> the call, on minigrad or torch
CASES = {
    "vjp": lambda M, F, x, y, A, cg: F.vjp(lambda a: a.sin() * 2, x, y, create_graph=cg),
    "vjp of tuples": lambda M, F, x, y, A, cg: F.vjp(
        lambda a, b: ((a * b).exp(), a.sum() * b), (x, y), (x, y), create_graph=cg),
    "vjp, v None for one element": lambda M, F, x, y, A, cg: F.vjp(
        lambda a: (a.sin() * a).sum(), x, create_graph=cg),
    "vjp, an input unused": lambda M, F, x, y, A, cg: F.vjp(
        lambda a, b: a * 2, (x, y), x, create_graph=cg),
    "jvp": lambda M, F, x, y, A, cg: F.jvp(lambda a: a.sin() * 2, x, y, create_graph=cg),
    "jvp of tuples": lambda M, F, x, y, A, cg: F.jvp(
        lambda a, b: ((a * b).exp(), a.sum() * b), (x, y), (y, x), create_graph=cg),
    "jacobian": lambda M, F, x, y, A, cg: F.jacobian(lambda a: a.sin() * 2, x,
                                                     create_graph=cg),
    "jacobian of tuples": lambda M, F, x, y, A, cg: F.jacobian(
        lambda a, b: ((a * b).exp(), a.sum() * b), (x, y), create_graph=cg),
    "jacobian of a matrix": lambda M, F, x, y, A, cg: F.jacobian(
        lambda a: a @ a.T, A, create_graph=cg),
    "jacobian, inputs a tuple": lambda M, F, x, y, A, cg: F.jacobian(
        lambda a, b: a * b, (x, y), create_graph=cg),
    "jacobian, outputs a tuple": lambda M, F, x, y, A, cg: F.jacobian(
        lambda a: (a * 2, a.sum()), x, create_graph=cg),
    "jacobian, an input unused": lambda M, F, x, y, A, cg: F.jacobian(
        lambda a, b: a * 2, (x, y), create_graph=cg),
    "jacobian, a constant output": lambda M, F, x, y, A, cg: F.jacobian(
        lambda a: M.ones(2, dtype=M.float64), x, create_graph=cg),
    "jacobian, forward-mode": lambda M, F, x, y, A, cg: F.jacobian(
        lambda a: a.exp() * a, x, vectorize=True, strategy="forward-mode"),
    "hessian": lambda M, F, x, y, A, cg: F.hessian(lambda a: (a.sin() * a).sum(), x,
                                                   create_graph=cg),
    "hessian of tuples": lambda M, F, x, y, A, cg: F.hessian(
        lambda a, b: (a.sin() * b.exp()).sum(), (x, y), create_graph=cg),
    "hessian of a matrix": lambda M, F, x, y, A, cg: F.hessian(
        lambda a: (a.exp() @ a.T).sum(), A, create_graph=cg),
    "hvp": lambda M, F, x, y, A, cg: F.hvp(lambda a: (a.sin() * a).sum(), x, y,
                                           create_graph=cg),
    "hvp of tuples": lambda M, F, x, y, A, cg: F.hvp(
        lambda a, b: (a.sin() * b.exp()).sum(), (x, y), (y, x), create_graph=cg),
    "vhp of tuples": lambda M, F, x, y, A, cg: F.vhp(
        lambda a, b: (a.sin() * b.exp()).sum(), (x, y), (y, x), create_graph=cg),
}


def assert_same(ours, theirs):
    assert isinstance(ours, tuple) == isinstance(theirs, tuple), (ours, theirs)
    if isinstance(theirs, tuple):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
        return
    assert ours.requires_grad == theirs.requires_grad
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12,
                               atol=1e-14)
    assert ours.shape == tuple(theirs.shape)


@needs_torch
@pytest.mark.parametrize("create_graph", [False, True], ids=["plain", "create_graph"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_as_torch(case, create_graph):
    ours = CASES[case](mg, mg.autograd.functional, *data(mg), create_graph)
    theirs = CASES[case](torch, torch.autograd.functional, *data(torch), create_graph)
    assert_same(ours, theirs)


BAD = {
    "an input unused, strict": lambda M, F, x, y, A: F.jacobian(lambda a, b: a * 2, (x, y),
                                                                strict=True),
    "inputs a list": lambda M, F, x, y, A: F.vjp(lambda a: a * 2, [x], y),
    "v None for several elements": lambda M, F, x, y, A: F.vjp(lambda a: a * 2, x),
    "v of another shape": lambda M, F, x, y, A: F.vjp(lambda a: a * 2, x, A),
    "hessian of several elements": lambda M, F, x, y, A: F.hessian(lambda a: a * 2, x),
    "forward-mode without vectorize": lambda M, F, x, y, A: F.jacobian(
        lambda a: a * 2, x, strategy="forward-mode"),
    "outputs a list": lambda M, F, x, y, A: F.jacobian(lambda a: [a], x),
    "forward-mode with create_graph": lambda M, F, x, y, A: F.jacobian(
        lambda a: a * 2, x, create_graph=True, vectorize=True, strategy="forward-mode"),
}


@needs_torch
@pytest.mark.parametrize("case", sorted(BAD))
def test_errors_as_torch(case):
    with pytest.raises(Exception) as theirs:
        BAD[case](torch, torch.autograd.functional, *data(torch))
    with pytest.raises(type(theirs.value)) as ours:
        BAD[case](mg, mg.autograd.functional, *data(mg))
    assert "\n" not in str(ours.value)


def test_the_callers_tensors_are_untouched():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    mg.autograd.functional.jacobian(lambda a: a * a, x)
    mg.autograd.functional.hessian(lambda a: (a * a * a).sum(), x)
    assert x.grad is None and x.grad_fn is None


def test_create_graph_differentiates_through_to_the_caller():
    x = mg.tensor([1.0, 2.0], dtype=mg.float64, requires_grad=True)
    jac = mg.autograd.functional.jacobian(lambda a: a ** 3, x, create_graph=True)
    jac.sum().backward()  # d/dx of sum(diag(3 x^2)) = 6 x
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_the_hessian_is_the_jacobian_of_the_gradient_and_matches_func():
    A = mg.tensor(np.random.default_rng(1).standard_normal((2, 3)))

    def f(a):
        return (a.exp() @ a.T).sum()
    H = mg.autograd.functional.hessian(f, A)
    np.testing.assert_allclose(H.numpy(), mg.func.hessian(f)(A).numpy(), rtol=1e-12)
    np.testing.assert_allclose(H.numpy().reshape(6, 6), H.numpy().reshape(6, 6).T, rtol=1e-12)
