"""Forward-mode AD through in-place ops and views, against torch.autograd.forward_ad and
torch.func: a write through a view reaches its base's tangent, a view sees its base's new
tangent, and jvp/jacfwd of functions that write into views give torch's derivatives."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import func
from minigrad.autograd import forward_ad as fwAD
from tests.test_ops_elementwise import params
from tests.torch_ref import On, needs_torch, torch

pytestmark = needs_torch


class Lib:
    """One library (minigrad or torch) in one dtype, with the few makers the cases use:
    ``val(shape, k)`` deterministic values (never 0), ``dual(shape, k)`` a dual tensor."""

    def __init__(self, mod, fw, dtype, device="cpu"):
        self.M, self.fw = mod, fw
        self.dtype = getattr(mod, dtype)
        self.device = device

    def val(self, shape, k=0):
        n = int(np.prod(shape))
        x = ((np.arange(n) * 7 + 3 * k) % 11 - 5.0) * 0.25 + 0.125
        return self.M.tensor(x.reshape(shape), dtype=self.dtype)

    def zeros(self, *shape):
        return self.M.zeros(*shape, dtype=self.dtype)

    def dual(self, shape, k=0):
        return self.fw.make_dual(self.val(shape, k), self.val(shape, k + 5))

    def tangent(self, t):
        return self.fw.unpack_dual(t).tangent


CASES = []


def case(fn):
    CASES.append((fn.__name__, fn))
    return fn


# --- a write through a view reaches the base -------------------------------------------

@case
def add_into_select_of_plain_base(L):
    base = L.zeros(3)
    base[1].add_(L.dual(()))
    return base,


@case
def add_into_slice_of_plain_base(L):
    base = L.zeros(4)
    v = base[1:3]
    v.add_(L.dual((2,)))
    return base, v


@case
def mul_into_slice_of_dual_base(L):
    x = L.dual((4,))
    v = x[1:]
    v.mul_(3.0)
    return x, v


@case
def sub_dual_through_slice_of_dual_base(L):
    x = L.dual((4,))
    x[::2].sub_(L.dual((2,), 1))
    return x,


@case
def div_by_dual_through_slice(L):
    x = L.dual((2, 3))
    x[:, 1:].div_(L.dual((2, 2), 2))
    return x,


@case
def copy_dual_into_column(L):
    base = L.zeros(3, 4)
    base[:, 2].copy_(L.dual((3,)))
    return base,


@case
def copy_plain_into_slice_of_dual_base(L):
    x = L.dual((4,))
    x[:2].copy_(L.val((2,), 3))
    return x,


@case
def zero_slice_of_dual_base(L):
    x = L.dual((2, 3))
    x[1:].zero_()
    return x,


@case
def fill_number_into_row_of_dual_base(L):
    x = L.dual((2, 3))
    x[0].fill_(2.0)
    return x,


@case
def fill_dual_scalar_into_row(L):
    base = L.zeros(2, 3)
    base[1].fill_(L.dual(()))
    return base,


@case
def clamp_slice_of_dual_base(L):
    x = L.dual((6,))
    x[1:5].clamp_(-0.3, 0.4)
    return x,


@case
def clamp_with_dual_bounds_in_slice(L):
    x = L.val((5,))
    x[:4].clamp_(min=L.dual((4,), 1))
    return x,


@case
def setitem_dual_into_slice(L):
    base = L.zeros(4)
    base[1:3] = L.dual((2,))
    return base,


@case
def setitem_dual_into_column(L):
    base = L.zeros(3, 2)
    base[:, 1] = L.dual((3,))
    return base,


@case
def setitem_dual_scalar_into_dual_base(L):
    x = L.dual((3,))
    x[0] = L.dual((), 4)
    return x,


@case
def setitem_plain_into_dual_base(L):
    x = L.dual((2, 2))
    x[1] = L.val((2,), 2)
    return x,


@case
def setitem_index_tensor(L):
    base = L.zeros(5)
    base[L.M.tensor([0, 3])] = L.dual((2,))
    return base,


@case
def add_into_transpose(L):
    base = L.zeros(3, 4)
    base.t()[1].add_(L.dual((3,)))
    return base,


@case
def mul_through_transpose_of_dual_base(L):
    x = L.dual((2, 3))
    x.transpose(0, 1).mul_(L.dual((3, 2), 1))
    return x,


@case
def div_through_permute(L):
    x = L.dual((2, 3, 4))
    x.permute(2, 0, 1)[1].div_(L.dual((2, 3), 3))
    return x,


@case
def mul_through_view(L):
    x = L.dual((6,))
    x.view(2, 3)[1].mul_(L.dual((3,), 2))
    return x,


@case
def add_through_reshape_view(L):
    base = L.zeros(6)
    base.reshape(3, 2)[:, 0].add_(L.dual((3,)))
    return base,


@case
def add_through_unsqueeze(L):
    base = L.zeros(3)
    base.unsqueeze(0).add_(L.dual((1, 3)))
    return base,


@case
def add_through_squeeze(L):
    base = L.zeros(1, 3)
    base.squeeze(0).add_(L.dual((3,)))
    return base,


@case
def add_through_flatten_of_slice(L):
    x = L.dual((2, 3))
    x[1:].flatten().add_(L.dual((3,), 1))
    return x,


@case
def chain_of_views(L):
    base = L.zeros(4, 5)
    v = base[1:3]
    w = v[:, 2:4]
    u = w.t()
    u.add_(L.dual((2, 2)))
    return base, v, w, u


@case
def chain_of_views_of_dual_base(L):
    x = L.dual((4, 5))
    v = x[1:3]
    w = v[:, 2:4].t()
    w.mul_(L.dual((2, 2), 1))
    return x, v, w


@case
def movedim_and_narrow(L):
    x = L.dual((2, 3, 4))
    x.movedim(0, 2).narrow(0, 1, 2).mul_(2.0)
    return x,


@case
def split_output_written(L):
    base = L.zeros(4)
    a, b = base.split(2)
    b.add_(L.dual((2,)))
    return base, a, b


@case
def unbind_output_written(L):
    x = L.dual((2, 3))
    rows = x.unbind(0)
    rows[1].mul_(L.dual((3,), 1))
    return x, rows[0], rows[1]


@case
def expand_size_one_dims_written(L):
    base = L.zeros(3)
    base.expand(1, 3).add_(L.dual((1, 3)))
    return base,


# --- views taken before the write see it ------------------------------------------------

@case
def view_before_base_add(L):
    base = L.zeros(3)
    v = base[0:2]
    base.add_(L.dual((3,)))
    return v, base


@case
def view_before_base_mul(L):
    x = L.dual((3,))
    v = x[1:]
    x.mul_(3.0)
    return v, x


@case
def view_before_base_copy(L):
    x = L.dual((2, 3))
    v = x.t()[1]
    x.copy_(L.dual((2, 3), 2))
    return v, x


@case
def view_before_sibling_write(L):
    base = L.zeros(2, 3)
    row = base[0]
    col = base[:, 1]
    col.add_(L.dual((2,)))
    return row, col, base


@case
def view_of_view_before_base_write(L):
    base = L.zeros(4, 2)
    w = base[1:][:, 1]
    base[2:].copy_(L.dual((2, 2)))
    return w, base


@case
def view_before_setitem(L):
    base = L.zeros(4)
    v = base.view(2, 2)
    base[1:3] = L.dual((2,))
    return v, base


@case
def view_before_two_writes(L):
    x = L.dual((4,))
    v = x[::2]
    x.mul_(2.0)
    x[1:3].add_(L.dual((2,), 3))
    return v, x


# --- a view with a tangent of its own, its base without -----------------------------------

@case
def make_dual_of_a_view_leaves_the_base(L):
    base = L.zeros(4)
    v = L.fw.make_dual(base[:2], L.val((2,), 1))
    w = v[0:1]
    v.mul_(3.0)
    return base, v, w


@case
def base_written_after_make_dual_of_its_view(L):
    base = L.zeros(4)
    v = base[:2]
    vd = L.fw.make_dual(v, L.val((2,), 1))
    base.add_(L.dual((4,), 2))
    return base, v, vd


@case
def unpack_dual_primal_written(L):
    x = L.dual((3,))
    primal = L.fw.unpack_dual(x).primal
    primal[1:].add_(L.dual((2,), 1))
    return x, primal


@case
def detach_written(L):
    x = L.dual((3,))
    x.detach()[0].mul_(5.0)
    return x,


def _run(lib, fw, dtype, fn, device="cpu"):
    mod = On(mg, device) if lib is mg else lib
    L = Lib(mod, fw, dtype, device)
    with fw.dual_level():
        outs = fn(L)
        return [(o.detach().clone(), None if L.tangent(o) is None else L.tangent(o).detach())
                for o in outs]


def _numpy(t):
    return t.cpu().numpy() if hasattr(t, "cpu") and not isinstance(t, mg.Tensor) else t.numpy()


# Div's jvp rule rounds as dx / y - dy * (out / y), PyTorch's as (dx - dy * out) / y: the
# same tangent to an ulp or two, out of place as well
ROUNDING = {"div_by_dual_through_slice", "div_through_permute"}


def assert_same(ours, theirs, rtol=0):
    assert len(ours) == len(theirs)
    for i, ((p, t), (tp, tt)) in enumerate(zip(ours, theirs)):
        np.testing.assert_array_equal(p.numpy(), tp.numpy(), err_msg=f"output {i}: primal")
        assert (t is None) == (tt is None), f"output {i}: tangent {t} against torch's {tt}"
        if t is not None:
            assert t.shape == tuple(tt.shape), f"output {i}"
            assert str(t.dtype) == str(tt.dtype).removeprefix("torch."), f"output {i}"
            np.testing.assert_allclose(t.numpy(), tt.numpy(), rtol=rtol, atol=0,
                                       err_msg=f"output {i}: tangent")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", params(CASES))
def test_dual_level_matches_torch(device, fn, dtype):
    import torch.autograd.forward_ad as tfw
    rtol = 4 * np.finfo(dtype).eps if fn.__name__ in ROUNDING else 0
    assert_same(_run(mg, fwAD, dtype, fn, device), _run(torch, tfw, dtype, fn), rtol)
