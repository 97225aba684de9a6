"""Writes into expanded tensors, as PyTorch's: refused only where the written-to tensor has
elements that share one memory location (a stride of 0 along a dim of size > 1); a row, a
slice or a view of an expanded tensor without such a dim may be written, and the write lands
in the memory the expanded tensor was made from."""
import numpy as np
import pytest

import minigrad as mg
from tests.test_ops_elementwise import params
from tests.torch_ref import On, needs_torch, torch

pytestmark = needs_torch


def _base(M, shape):
    return M.arange(float(np.prod(shape))).reshape(shape) * 0.5 - 1.0


# (name, the base's shape, the write; the base after it is compared)
WRITES = [
    ("select_of_a_new_dim", (4, 5), lambda e: e.expand(2, 4, 5)[0].add_(1.0)),
    ("row_of_a_broadcast_dim", (1, 5), lambda e: e.expand(4, 5)[0].add_(1.0)),
    ("last_row", (1, 5), lambda e: e.expand(4, 5)[3].mul_(3.0)),
    ("size_one_slice", (1, 5), lambda e: e.expand(4, 5)[1:2].sub_(1.0)),
    ("dims_of_size_one_only", (5,), lambda e: e.expand(1, 5).add_(1.0)),
    ("row_of_a_transpose", (3, 1), lambda e: e.expand(3, 4).t()[0].mul_(2.0)),
    ("slice_of_a_select", (4, 5), lambda e: e.expand(2, 4, 5)[1][1:3].sub_(1.0)),
    ("setitem_into_a_select", (4, 5), lambda e: e.expand(2, 4, 5)[0].__setitem__(1, 3.0)),
    ("copy_into_a_select", (1, 5), lambda e: e.expand(4, 5)[2].copy_(e[0] * 2.0)),
    ("fill_an_expanded", (1, 5), lambda e: e.expand(4, 5).fill_(2.0)),
    ("zero_an_expanded", (1, 5), lambda e: e.expand(4, 5).zero_()),
    ("fill_a_select", (1, 5), lambda e: e.expand(4, 5)[0].fill_(2.0)),
    ("narrow_to_one_row", (4,), lambda e: e.expand(3, 4).narrow(0, 1, 1).add_(1.0)),
    ("view_of_a_select", (1, 6), lambda e: e.expand(4, 6)[0].view(2, 3).mul_(3.0)),
    ("empty", (0,), lambda e: e.expand(3, 0).add_(1.0)),
    ("expand_of_an_expand", (1, 1, 3), lambda e: e.expand(1, 2, 3).expand(2, 2, 3)[0, 0].add_(1.0)),
    ("step_slice_of_a_row", (1, 6), lambda e: e.expand(4, 6)[0, ::2].add_(1.0)),
    ("clamp_a_row", (1, 5), lambda e: e.expand(4, 5)[3].clamp_(-0.5, 0.5)),
    ("element_of_an_expanded_scalar", (), lambda e: e.expand(3)[1].add_(2.0)),
    ("tensor_operand", (1, 3), lambda e: e.expand(2, 3)[1].add_(e[0] * 2.0)),
]

# (name, the base's shape, the write) refused: the written-to tensor overlaps itself
REFUSED = [
    ("column_of_a_broadcast_dim", (1, 5), lambda e: e.expand(4, 5)[:, 0].add_(1.0)),
    ("two_rows", (1, 5), lambda e: e.expand(4, 5)[1:3].add_(1.0)),
    ("whole_expanded", (1, 5), lambda e: e.expand(4, 5).add_(1.0)),
    ("column_of_a_transpose", (3, 1), lambda e: e.expand(3, 4).t()[:, 0].mul_(2.0)),
    ("copy_into_an_expanded", (1, 5), lambda e: e.expand(4, 5).copy_(e.expand(4, 5) * 1.0)),
    ("expanded_scalar", (), lambda e: e.expand(3).mul_(2.0)),
    ("setitem_ellipsis", (1, 5), lambda e: e.expand(4, 5).__setitem__(Ellipsis, 1.0)),
    ("setitem_column", (1, 5), lambda e: e.expand(4, 5).__setitem__((slice(None), 1), 1.0)),
]


@pytest.mark.parametrize("shape, write", params(WRITES))
def test_write_matches_torch(device, shape, write):
    ours, theirs = _base(On(mg, device), shape), _base(torch, shape)
    write(ours)
    write(theirs)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("shape, write", params(REFUSED))
def test_refused_as_torch(device, shape, write):
    for base in (_base(torch, shape), _base(On(mg, device), shape)):
        with pytest.raises(RuntimeError, match="single memory location"):
            write(base)


# (PyTorch's backward refuses a fill_ of a whole expanded tensor: its CopySlices writes the
# gradient through the overlapping view; minigrad fills the source instead)
@pytest.mark.parametrize("shape, write", params(
    [r for r in WRITES if r[0] not in ("fill_an_expanded", "zero_an_expanded", "empty")]))
def test_gradient_through_the_write_matches_torch(device, shape, write):
    """The write recorded in a graph (CopySlices of the base through expand and the view)."""
    def run(M, lib):
        p = _base(M, shape).requires_grad_()
        e = p * 1.5
        write(e)
        (e.sin() * (M.arange(float(e.numel())).reshape(e.shape) + 1.0)).sum().backward()
        return p.grad
    ours, theirs = run(On(mg, device), mg), run(torch, torch)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6, atol=1e-7)


def test_a_broadcast_of_read_only_memory_stays_read_only():
    x = mg.tensor(np.zeros(5))
    x.array.flags.writeable = False
    with pytest.raises(RuntimeError, match="single memory location"):
        x.expand(3, 5)[0].add_(1.0)


# x[index] = value checks only the elements written, as PyTorch's (Tensor.__setitem__ checks
# the whole tensor for now: these are refused)
SETITEM = [
    ("a_row", (1, 5), lambda e: e.expand(4, 5).__setitem__(1, 3.0)),
    ("one_element", (1, 5), lambda e: e.expand(4, 5).__setitem__((2, 3), 3.0)),
    ("a_size_one_slice", (5,), lambda e: e.expand(3, 5).__setitem__(slice(0, 1), 3.0)),
]


@pytest.mark.parametrize("shape, write", params(SETITEM))
def test_setitem_matches_torch(device, shape, write):
    ours, theirs = _base(On(mg, device), shape), _base(torch, shape)
    write(theirs)
    write(ours)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_setitem_of_a_dual_into_a_row_of_an_expanded_tensor(device):
    import torch.autograd.forward_ad as tfw
    from minigrad.autograd import forward_ad as fwAD

    def run(M, fw):
        base = M.zeros(1, 3, dtype=M.float64)
        with fw.dual_level():
            base.expand(2, 3)[1] = fw.make_dual(M.ones(3, dtype=M.float64),
                                                M.arange(3.0, dtype=M.float64))
            return fw.unpack_dual(base).tangent
    np.testing.assert_array_equal(run(On(mg, device), fwAD).numpy(), run(torch, tfw).numpy())
