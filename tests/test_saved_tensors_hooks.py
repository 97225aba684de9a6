"""``mg.autograd.graph.saved_tensors_hooks(pack, unpack)``, as PyTorch's: what ops save for
backward inside the block goes through ``pack``, and backward reads it back through
``unpack``. Each program runs in both libraries (in float64) and must give the same
gradients (to 1e-12), hook calls and errors."""
import numpy as np
import pytest

import minigrad as mg
from tests.conftest import needs
from tests.torch_ref import needs_torch, torch


def hooks(M, pack, unpack=lambda p: p):
    return M.autograd.graph.saved_tensors_hooks(pack, unpack)


def leaf(M, values=(1.0, 2.0)):
    return M.tensor(list(values), dtype=M.float64, requires_grad=True)


def what_is_packed(M):
    x, log = leaf(M), []

    def pack(t):
        log.append(("pack", tuple(t.shape), t.requires_grad, t.grad_fn is not None))
        return t.detach()

    def unpack(p):
        log.append(("unpack", tuple(p.shape)))
        return p
    with hooks(M, pack, unpack):
        y = x.exp()           # saves its output
        z = (y * x).sum()     # saves both inputs
    z.backward()
    return sorted(log), x.grad.tolist()


def second_order(M, pack):
    out = []
    for f in (lambda x: (x * x * x).sum(), lambda x: (x.exp().tanh() * x.sin()).sum()):
        x = leaf(M)
        with hooks(M, pack):
            y = f(x)
        g, = M.autograd.grad(y, x, create_graph=True)
        out.append((g.tolist(), M.autograd.grad(g.sum(), x)[0].tolist()))
    return out


def nested(M):
    x, log = leaf(M), []
    with hooks(M, lambda t: ("outer", t), lambda p: (log.append(p[0]), p[1])[1]):
        with hooks(M, lambda t: ("inner", t), lambda p: (log.append(p[0]), p[1])[1]):
            y = x.exp()
        w = x.sin()
    (y + w).sum().backward()
    return sorted(log), x.grad.tolist()


def nothing_recorded(M):
    x, log = leaf(M), []
    with hooks(M, lambda t: (log.append("packed"), t)[1]):
        with M.no_grad():
            x.exp()
        M.tensor([1.0]).exp()
    return log


def unpack_changes_values(M):
    x = leaf(M)
    with hooks(M, lambda t: t.detach() * 2):
        (x * x).sum().backward()
    return x.grad.tolist()


def layers(M):
    M.manual_seed(0)
    x = M.tensor([[1.0, 2.0, 4.0], [0.5, -1.0, 3.0]], dtype=M.float64, requires_grad=True)
    w = M.tensor([0.5, -2.0, 1.5], dtype=M.float64, requires_grad=True)
    count = []
    with hooks(M, lambda t: (count.append(1), t.detach())[1]):
        out = M.nn.functional.layer_norm(x, (3,), w).relu()
        loss = M.nn.functional.cross_entropy(out, M.tensor([2, 0]))
    loss.backward()
    return x.grad.tolist(), w.grad.tolist()


def saved_result(M):
    x = leaf(M)
    with hooks(M, lambda t: t.detach(), lambda p: p * 1):
        y = x.exp()
    r = y.grad_fn._saved_result
    return r.tolist(), r.grad_fn is not None


PROGRAMS = {
    "what is packed": what_is_packed,
    "second order, packed as is": lambda M: second_order(M, lambda t: t),
    "second order, packed detached": lambda M: second_order(M, lambda t: t.detach()),
    "nested blocks: the innermost": nested,
    "nothing recorded, nothing packed": nothing_recorded,
    "unpack changes the values": unpack_changes_values,
    "layer norm and cross-entropy": layers,
    "_saved_result": saved_result,
}


@needs_torch
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_saved_tensors_hooks_as_torch(name):
    assert_same(PROGRAMS[name](mg), PROGRAMS[name](torch))


def assert_same(ours, theirs):
    """Equal structure and non-numbers; numbers to 1e-12."""
    if isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            assert_same(a, b)
    elif isinstance(theirs, float):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)
    else:
        assert ours == theirs


@needs_torch
def test_unpack_must_give_a_tensor_as_torch():
    for M in (torch, mg):
        x = leaf(M)
        with hooks(M, lambda t: t, lambda p: 3):
            y = x.exp()
        with pytest.raises(TypeError, match="unpack_hook expected to be a Tensor"):
            y.sum().backward()


def test_the_hooks_end_with_the_block():
    x, log = leaf(mg), []
    with hooks(mg, lambda t: (log.append(1), t)[1]):
        x.exp()
    x.sin()
    assert log == [1]


def test_a_transformer_step_matches_one_without_hooks():
    def step(packing):
        mg.manual_seed(0)
        layer = mg.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).double()
        x = mg.randn(2, 5, 8, dtype=mg.float64)
        if packing:
            with hooks(mg, lambda t: t.numpy().copy(), lambda p: mg.tensor(p)):
                loss = layer(x).pow(2).mean()
        else:
            loss = layer(x).pow(2).mean()
        loss.backward()
        return [p.grad.numpy() for p in layer.parameters()]
    for a, b in zip(step(True), step(False)):
        np.testing.assert_array_equal(a, b)


def test_the_picture_names_packed_records():
    from minigrad.viz.graph import saved_records
    x = mg.randn(3, 4, requires_grad=True)
    with hooks(mg, lambda t: t.detach()):
        y = x.exp().relu()
    assert [what for what, _, _ in saved_records(y.grad_fn)] == ["packed"]
    needs("graphviz")  # the picture itself
    assert "digraph" in mg.viz.to_dot(y.sum(), show_values=True)
