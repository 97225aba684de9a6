"""Memory: backward frees what the graph saved, and graphs hold no reference cycles, so
arrays and nodes go away by reference counting alone (checked with the garbage collector
off and ``weakref``), as in PyTorch."""
import gc
import weakref

import pytest

import minigrad as mg
from minigrad.autograd import Function


@pytest.fixture
def no_gc():
    """Turn the cycle collector off: what is freed here is freed by refcounting alone."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def weak(obj):
    try:
        return weakref.ref(obj)
    except TypeError:
        pytest.skip(f"{type(obj).__name__} does not support weak references")


def alive(refs):
    """The type names of the objects still alive (short, for assertion messages)."""
    return [type(r()).__name__ for r in refs if r() is not None]


def _build(device, n=64):
    """A small graph over several kinds of op. Returns (loss, leaves, intermediates)."""
    x = mg.randn(n, n, device=device, requires_grad=True)
    w = mg.randn(n, n, device=device, requires_grad=True)
    h = (x @ w).tanh()                       # MatMul saves x, w; Tanh saves its output
    s = (h * h.exp()).softmax(-1)            # Mul saves both inputs, Exp and Softmax outputs
    r = s.reshape(n * n)[: n * n // 2]       # Reshape, GetItem
    loss = (r.log() + mg.cat([h[0], w[1]]).sum()).mean()
    return loss, (x, w), (h, s, r)


# --- backward frees saved arrays --------------------------------------------------------

def test_backward_frees_saved_intermediate_array(device, no_gc):
    x = mg.randn(512, 512, device=device, requires_grad=True)
    h = x.tanh()                    # a big intermediate, saved by Tanh (output) and Mul (input)
    hh = h * h
    loss = hh.sum()
    tanh_node, mul_node = h.grad_fn, hh.grad_fn
    ref = weak(h.array)
    del h, hh
    assert ref() is not None        # the graph still needs it
    assert tanh_node.saved is not None and mul_node.saved is not None
    loss.backward()
    assert alive([ref]) == []  # freed by backward while the loss is still alive
    assert loss.grad_fn is not None
    assert tanh_node.saved is None and mul_node.saved is None
    assert x.grad.shape == (512, 512)


def test_backward_releases_saved_tensors_of_every_node(device, no_gc):
    loss, leaves, inter = _build(device)
    nodes = [t.grad_fn for t in inter] + [loss.grad_fn]
    assert any(node.saved is not None for node in nodes)
    loss.backward()
    assert all(node.saved is None for node in nodes)


def test_backward_frees_attributes_set_on_ctx(device, no_gc):
    class KeepsBuffer(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.buffer = (x * 2).array  # any array kept on ctx belongs to the graph
            return x * 3

        @staticmethod
        def backward(ctx, grad):
            assert ctx.buffer is not None
            return grad * 3

    x = mg.randn(100, device=device, requires_grad=True)
    out = KeepsBuffer.apply(x)
    ref = weak(out.grad_fn.buffer)
    out.sum().backward()
    assert alive([ref]) == []
    assert (x.grad.numpy() == 3).all()


# --- no reference cycles ---------------------------------------------------------------------

def _refs_of_graph(device, backward=False, **backward_kwargs):
    loss, leaves, inter = _build(device)
    refs = [weak(t.array) for t in leaves + inter]
    refs += [weak(t) for t in leaves + inter + (loss,)]
    refs += [weak(t.grad_fn) for t in inter + (loss,)]
    if backward:
        loss.backward(**backward_kwargs)
        refs += [weak(t.grad.array) for t in leaves]
        if backward_kwargs.get("create_graph"):
            refs += [weak(t.grad.grad_fn) for t in leaves]
            for t in leaves:  # .grad refers to a graph that refers back to the leaf
                t.grad = None
    return refs


def test_graph_without_backward_is_freed_by_refcounting(device, no_gc):
    refs = _refs_of_graph(device)
    assert alive(refs) == []


def test_graph_after_backward_is_freed_by_refcounting(device, no_gc):
    refs = _refs_of_graph(device, backward=True)
    assert alive(refs) == []


def test_graph_after_create_graph_backward_is_freed_once_grads_dropped(device, no_gc):
    refs = _refs_of_graph(device, backward=True, create_graph=True)
    assert alive(refs) == []


def test_graph_after_retain_graph_backward_is_freed_by_refcounting(device, no_gc):
    refs = _refs_of_graph(device, backward=True, retain_graph=True)
    assert alive(refs) == []


def _refs_of_higher_order(device):
    x = mg.randn(16, device=device, requires_grad=True)
    y = (x.sin() * x).sum()
    (g,) = mg.grad(y, x, create_graph=True)
    (gg,) = mg.grad((g * g).sum(), x)
    refs = [weak(x), weak(y), weak(g), weak(gg), weak(x.array), weak(g.array), weak(y.grad_fn),
            weak(g.grad_fn)]
    assert x.grad is None
    return refs


def test_mg_grad_create_graph_is_freed_by_refcounting(device, no_gc):
    refs = _refs_of_higher_order(device)
    assert alive(refs) == []


def _refs_with_retain_grad_and_hooks(device):
    x = mg.randn(8, device=device, requires_grad=True)
    y = x.exp()
    y.retain_grad()
    y.register_hook(lambda g: g * 2)
    x.register_hook(lambda g: g + 1)
    (y * y).sum().backward()
    return [weak(x), weak(y), weak(y.grad), weak(y.grad_fn), weak(y.array)]


def test_retain_grad_and_hooks_make_no_cycle(device, no_gc):
    refs = _refs_with_retain_grad_and_hooks(device)
    assert alive(refs) == []


def _refs_of_custom_function(device):
    class Square(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            out = x * x
            return out

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    x = mg.randn(32, device=device, requires_grad=True)
    out = Square.apply(x)
    refs = [weak(x), weak(out), weak(out.grad_fn), weak(out.array)]
    out.sum().backward()
    return refs


def test_custom_function_graph_is_freed_by_refcounting(device, no_gc):
    refs = _refs_of_custom_function(device)
    assert alive(refs) == []


def _refs_under_anomaly(device):
    with mg.autograd.detect_anomaly():
        loss, leaves, inter = _build(device, n=8)
        refs = [weak(t) for t in leaves + inter] + [weak(loss.grad_fn)]
        loss.backward()
    return refs


def test_anomaly_mode_graph_is_freed_by_refcounting(device, no_gc):
    refs = _refs_under_anomaly(device)
    assert alive(refs) == []


def test_create_graph_grad_cycle_is_collected_by_gc(device):
    # keeping x.grad with create_graph=True makes a cycle x -> grad -> graph -> x, as in
    # torch; the cycle collector must still be able to free it
    loss, leaves, inter = _build(device)
    loss.backward(create_graph=True)
    refs = [weak(leaves[0]), weak(leaves[0].grad), weak(leaves[0].grad.grad_fn)]
    del loss, leaves, inter
    gc.collect()
    assert alive(refs) == []


# --- retain_graph keeps saved arrays until the graph goes -------------------------------

def test_retain_graph_keeps_saved_arrays_until_graph_dropped(device, no_gc):
    x = mg.randn(256, 256, device=device, requires_grad=True)
    h = x.tanh()
    loss = (h * h).sum()
    node = weak(h.grad_fn)
    ref = weak(h.array)
    del h
    loss.backward(retain_graph=True)
    assert ref() is not None and node() is not None
    loss.backward(retain_graph=True)  # still usable
    assert ref() is not None
    del loss
    assert alive([ref, node]) == []
    assert x.grad is not None
