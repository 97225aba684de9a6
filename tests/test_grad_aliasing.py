"""A ``.grad`` never shares memory with another tensor: the engine takes a gradient array
without copying only when nothing else can reach it (engine._own)."""
import numpy as np
import pytest

import minigrad as mg


def _shares(a, b):
    return np.shares_memory(a.numpy(), b.numpy())


def _leaves(device, n=2, shape=(3, 4)):
    return [mg.randn(*shape, device=device, requires_grad=True) for _ in range(n)]


CASES = [
    ("add", lambda a, b: a + b),
    ("transposes", lambda a, b: a.T + b.T),
    ("reshapes", lambda a, b: a.reshape(12) + b.reshape(12)),
    ("expand", lambda a, b: a[:1].expand(3, 4) + b),
    ("same grad three ways", lambda a, b: a + b + a.detach()),
]


@pytest.mark.parametrize("name,fn", CASES, ids=[c[0] for c in CASES])
def test_leaf_grads_do_not_share_memory(device, name, fn):
    a, b = _leaves(device)
    fn(a, b).sum().backward()
    assert not _shares(a.grad, b.grad)
    before = b.grad.numpy().copy()
    a.grad.add_(1.0)  # writing one gradient leaves the other alone
    np.testing.assert_array_equal(b.grad.numpy(), before)


def test_seed_gradient_is_not_adopted(device):
    (a,) = _leaves(device, 1)
    seed = mg.ones(3, 4, device=device)
    (a + 0).backward(gradient=seed)
    assert not _shares(a.grad, seed)
    a.grad.mul_(5.0)
    np.testing.assert_array_equal(seed.numpy(), np.ones((3, 4)))


def test_hook_result_is_not_adopted(device):
    (a,) = _leaves(device, 1)
    kept = mg.full((3, 4), 2.0, device=device)
    a.register_hook(lambda g: kept)
    (a * 3).sum().backward()
    assert not _shares(a.grad, kept)
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 4), 2.0))


def test_custom_backward_returning_a_saved_tensor(device):
    class Scale(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x, c):
            ctx.save_for_backward(c)
            return x * c

        @staticmethod
        def backward(ctx, grad):
            (c,) = ctx.saved_tensors
            return c, None  # deliberately returns the tensor it saved

    (a,) = _leaves(device, 1)
    c = mg.full((3, 4), 3.0, device=device)
    Scale.apply(a, c).sum().backward()
    assert not _shares(a.grad, c)
    a.grad.zero_()
    np.testing.assert_array_equal(c.numpy(), np.full((3, 4), 3.0))


def test_grad_is_writable_after_broadcast_backward(device):
    (a,) = _leaves(device, 1)
    a.sum().backward()  # the gradient of sum is a broadcast (read-only) view of ones
    a.grad.mul_(2.0)
    np.testing.assert_array_equal(a.grad.numpy(), np.full((3, 4), 2.0))
