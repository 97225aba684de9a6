"""Hooks on graph nodes, as PyTorch's: ``grad_fn.register_prehook(fn)`` sees the gradients
a node receives (after its outputs' tensor hooks) and may replace them;
``grad_fn.register_hook(fn)`` sees what the node computed and received, and may replace the
former. Each program runs in both libraries and must give the same gradients, the same
calls of the hooks and the same errors."""
import pytest

import minigrad as mg
from tests.torch_ref import needs_torch, torch


def shapes(grads):
    return [None if g is None else tuple(g.shape) for g in grads]


def values(grads):
    return [None if g is None else g.tolist() for g in grads]


# each: (acc, node, log) -> registers hooks on the AccumulateGrad of x and on y = x * w
CASES = {
    "none": lambda acc, node, log: None,
    "prehook replaces": lambda acc, node, log: node.register_prehook(lambda go: (go[0] * 7,)),
    "prehook returns None": lambda acc, node, log: node.register_prehook(
        lambda go: log.append(values(go))),
    "prehooks chain": lambda acc, node, log: (
        node.register_prehook(lambda go: (go[0] * 2,)),
        node.register_prehook(lambda go: log.append(values(go)))),
    "hook replaces": lambda acc, node, log: node.register_hook(lambda gi, go: (gi[0] * 3, None)),
    "hook sees the prehook's": lambda acc, node, log: (
        node.register_prehook(lambda go: (go[0] * 7,)),
        node.register_hook(lambda gi, go: log.append((values(gi), values(go))))),
    "removed": lambda acc, node, log: node.register_prehook(lambda go: (go[0] * 7,)).remove(),
    "leaf's node": lambda acc, node, log: (
        acc.register_prehook(lambda go: log.append(("pre", values(go)))),
        acc.register_hook(lambda gi, go: log.append(("post", values(gi), values(go))))),
    "leaf's prehook replaces": lambda acc, node, log: acc.register_prehook(
        lambda go: (go[0] * 5,)),
    "tensor hook first": lambda acc, node, log: (
        node.register_prehook(lambda go: log.append(("node", values(go)))),
        node.register_prehook(lambda go: (go[0] + 1,))),
}


def program(M, case):
    x = M.tensor([1.0, 2.0], requires_grad=True)
    y = x * M.tensor([3.0, 4.0])
    y.retain_grad()
    log = []
    y.register_hook(lambda g: log.append(("tensor", g.tolist())))
    CASES[case](y.grad_fn.next_functions[0][0], y.grad_fn, log)
    y.sum().backward()
    return x.grad.tolist(), y.grad.tolist(), log


@needs_torch
@pytest.mark.parametrize("case", sorted(CASES))
def test_node_hooks_as_torch(case):
    assert program(mg, case) == program(torch, case)


WRONG = {
    "prehook returns a list": (TypeError, lambda acc, node: node.register_prehook(
        lambda go: [go[0]])),
    "hook returns a list": (TypeError, lambda acc, node: node.register_hook(
        lambda gi, go: [gi[0], None])),
    "prehook returns two": (RuntimeError, lambda acc, node: node.register_prehook(
        lambda go: (go[0], go[0]))),
    "prehook changes the shape": (RuntimeError, lambda acc, node: node.register_prehook(
        lambda go: (go[0][:1],))),
    "hook fills a None": (RuntimeError, lambda acc, node: node.register_hook(
        lambda gi, go: (gi[0], gi[0]))),
    "hook changes the dtype": (RuntimeError, lambda acc, node: node.register_hook(
        lambda gi, go: (gi[0].double(), None))),
    "leaf's hook returns": (RuntimeError, lambda acc, node: acc.register_hook(
        lambda gi, go: (go[0],))),
}


@needs_torch
@pytest.mark.parametrize("case", sorted(WRONG))
def test_bad_returns_raise_as_torch(case):
    kind, register = WRONG[case]
    for M in (torch, mg):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        y = x * M.tensor([3.0, 4.0])
        register(y.grad_fn.next_functions[0][0], y.grad_fn)
        with pytest.raises(kind) as info:
            y.sum().backward()
        if M is mg:
            assert "hook" in str(info.value) and "\n" not in str(info.value)


@needs_torch
def test_unused_outputs_are_none_to_the_hooks_as_torch():
    def run(M):
        z = M.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
        parts = z.unbind(0)
        log = []
        parts[0].grad_fn.register_prehook(lambda go: log.append(shapes(go)))
        parts[0].grad_fn.register_hook(lambda gi, go: log.append((shapes(gi), shapes(go))))
        parts[1].sum().backward()
        return log, z.grad.tolist()
    assert run(mg) == run(torch)
    assert run(mg)[0][0] == [None, (2,), None]


@needs_torch
def test_grad_inputs_follow_next_functions_as_torch():
    def run(M):
        a = M.tensor([1.0, 2.0], requires_grad=True)
        log = []
        for y in (a * 2, 2 * a, a + M.tensor([1.0, 1.0]), a.exp(), a[0], a.sum()):
            y.grad_fn.register_hook(lambda gi, go: log.append(shapes(gi)))
            y.sum().backward()
        return log
    assert run(mg) == run(torch)


@needs_torch
def test_autograd_grad_runs_no_leaf_node_hooks_as_torch():
    def run(M):
        a = M.tensor([1.0, 2.0], requires_grad=True)
        y = a * 3
        y.grad_fn.next_functions[0][0].register_prehook(lambda go: (go[0] * 10,))
        return M.autograd.grad(y.sum(), a)[0].tolist()
    assert run(mg) == run(torch) == [3.0, 3.0]


class Double(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def test_a_prehook_changes_what_reaches_the_leaves():
    x = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()
    y.grad_fn.register_prehook(lambda go: (go[0] * 0,))
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


def test_hooks_on_a_user_function_survive_its_backward():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(values(gi)))
    y.sum().backward(retain_graph=True)
    y.sum().backward()
    assert seen == [[[2.0, 2.0]], [[2.0, 2.0]]]
    assert x.grad.tolist() == [4.0, 4.0]


def test_metadata_is_the_nodes_own_dict_for_its_life():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    for y in (x.exp(), Double.apply(x)):
        y.grad_fn.metadata["step"] = 3
        y.sum().backward()  # (frees what the node saved, not its metadata)
        assert y.grad_fn.metadata == {"step": 3}
    a, b = (x * 2).grad_fn, (x * 2).grad_fn
    a.metadata["mine"] = True
    assert b.metadata == {} and a.next_functions[0][0].metadata == {}
    assert isinstance(a, mg.autograd.graph.Node)


def post_accumulate_program(M):
    log = []
    x = M.tensor([1.0, 2.0], requires_grad=True)
    first = x.register_post_accumulate_grad_hook(lambda t: log.append(("x", t.grad.tolist())))
    (x * x).sum().backward()
    M.autograd.grad((x * x).sum(), x)  # no .grad written: no call
    first.remove()
    (x * 3).sum().backward()
    log.append(("x.grad", x.grad.tolist()))

    z = M.tensor([1.0, 2.0], requires_grad=True)

    def sgd_in_backward(t):  # the optimiser step as soon as the gradient is complete
        with M.no_grad():
            t -= 0.5 * t.grad
        t.grad = None
    z.register_post_accumulate_grad_hook(sgd_in_backward)
    (z * z).sum().backward()
    log.append(("z", z.tolist(), z.grad))

    w = M.tensor([1.0], requires_grad=True)
    w.register_post_accumulate_grad_hook(lambda t: log.append("post"))
    w.register_hook(lambda g: log.append("tensor hook"))
    node = (w * 2).grad_fn.next_functions[0][0]
    node.register_prehook(lambda go: log.append("node prehook"))
    node.register_hook(lambda gi, go: log.append("node hook"))
    (w * 2).sum().backward()
    return log


@needs_torch
def test_post_accumulate_grad_hooks_as_torch():
    assert post_accumulate_program(mg) == post_accumulate_program(torch)


@needs_torch
def test_post_accumulate_grad_hook_refusals_as_torch():
    for M in (torch, mg):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="non-leaf"):
            (x * 2).register_post_accumulate_grad_hook(lambda t: None)
        with pytest.raises(RuntimeError, match="doesn't require gradient"):
            M.tensor([1.0]).register_post_accumulate_grad_hook(lambda t: None)
        x.register_post_accumulate_grad_hook(lambda t: 5)
        with pytest.raises(TypeError):
            (x * 2).sum().backward()
