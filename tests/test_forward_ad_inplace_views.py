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


@case
def add_into_a_row_of_an_expanded_base(L):
    base = L.zeros(4, 5)
    base.expand(2, 4, 5)[0].add_(L.dual((4, 5)))
    return base,


@case
def mul_a_row_of_an_expanded_dual(L):
    x = L.dual((1, 3))
    e = x.expand(4, 3)
    e[2].mul_(L.dual((3,), 1))
    return x, e


@case
def unary_in_place_ops_through_views(L):
    x = L.dual((3, 4))
    x[0].exp_()
    x[1, 1:].neg_()
    x[2].tanh_()
    x[:, 0].sigmoid_()
    x[1:, 2].abs_().add_(0.5).sqrt_().log_()
    x.t()[3].relu_()
    return x,


@case
def pow_through_a_view(L):
    x = L.dual((2, 3))
    x[1].pow_(2.0)
    x[0, :2].pow_(3)
    return x,


@case
def masked_fill_through_a_view(L):
    x = L.dual((2, 3))
    x[1].masked_fill_(L.M.tensor([True, False, True]), 0.5)
    return x,


@case
def masked_fill_with_a_dual_through_a_view(L):
    base = L.zeros(2, 3)
    base.t()[1].masked_fill_(L.M.tensor([False, True]), L.dual(()))
    return base,


@case
def index_add_of_a_dual_through_a_view(L):
    base = L.zeros(3, 4)
    base[:, 1:].index_add_(0, L.M.tensor([0, 2]), L.dual((2, 3)))
    return base,


@case
def scatter_through_a_view(L):
    x = L.dual((3, 4))
    x[1:].scatter_(1, L.M.tensor([[0], [2]]), L.dual((2, 1), 2))
    return x,


@case
def scatter_add_through_a_view(L):
    base = L.zeros(2, 5)
    base[:, ::2].scatter_add_(1, L.M.tensor([[0, 2], [1, 1]]), L.dual((2, 2)))
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
def expanded_before_base_write(L):
    x = L.dual((3,))
    e = x.expand(2, 3)
    x[1:].mul_(L.dual((2,), 1))
    return e, x


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


# The same to an ulp or two, out of place as well: Div's jvp rule rounds as
# dx / y - dy * (out / y), PyTorch's as (dx - dy * out) / y; exp and tanh in float32 are
# NumPy's, not PyTorch's
ROUNDING = {"div_by_dual_through_slice", "div_through_permute",
            "unary_in_place_ops_through_views"}


def assert_same(ours, theirs, rtol=0):
    assert len(ours) == len(theirs)
    for i, ((p, t), (tp, tt)) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(p.numpy(), tp.numpy(), rtol=rtol, atol=0,
                                   err_msg=f"output {i}: primal")
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


# --- jvp and jacfwd of functions that write into views ---------------------------------------

def _scale_a_slice(M, x):
    y = x.clone()
    v = y[:2]
    v.mul_(3.0)
    return y


def _write_into_zeros(M, x):
    y = M.zeros(x.shape[0] + 2, dtype=x.dtype)
    y[1:-1] = x * 2.0
    return y


def _view_before_write(M, x):
    y = M.zeros(5, dtype=x.dtype)
    v = y[1:4]
    y.add_(x.sum())
    return v


def _product_into_own_slice(M, x):
    y = x * 1.0
    y[0] = y[1] * y[2]
    return y


def _square_through_transpose(M, x):
    y = x.reshape(2, 2).clone()
    y.t()[0].mul_(x[:2])
    return y


def _nonlinear_chain(M, x):
    y = x.exp()
    w = y.view(2, 2)[:, 1]
    w.mul_(x[:2].sin())
    w.div_(x[2:] + 3.0)
    return y * x


def _copy_and_clamp(M, x):
    y = M.zeros(2, 4, dtype=x.dtype)
    y[0].copy_(x)
    y[1, 1:3].copy_(x[:2] * x[2:])
    y.view(8)[2:6].clamp_(-0.5, 0.5)
    return y


def _zero_and_fill(M, x):
    y = x * x
    y[1:3].zero_()
    y[0].fill_(x[3])
    return y


FUNCTIONS = [
    ("scale_a_slice", _scale_a_slice),
    ("write_into_zeros", _write_into_zeros),
    ("view_before_write", _view_before_write),
    ("product_into_own_slice", _product_into_own_slice),
    ("square_through_transpose", _square_through_transpose),
    ("nonlinear_chain", _nonlinear_chain),
    ("copy_and_clamp", _copy_and_clamp),
    ("zero_and_fill", _zero_and_fill),
]
X = [0.3, -0.7, 1.1, 0.45]


def _close(ours, theirs, dtype):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(),
                               rtol=4 * np.finfo(dtype).eps, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("f", params(FUNCTIONS))
def test_jacfwd_matches_torch_func(device, f, dtype):
    M = On(mg, device)
    ours = func.jacfwd(lambda x: f(M, x))(M.tensor(X, dtype=getattr(mg, dtype)))
    theirs = torch.func.jacfwd(lambda x: f(torch, x))(torch.tensor(X, dtype=getattr(torch,
                                                                                     dtype)))
    assert ours.shape == tuple(theirs.shape)
    _close(ours, theirs, dtype)


@pytest.mark.parametrize("f", params(FUNCTIONS))
def test_jvp_matches_torch_func(device, f):
    M = On(mg, device)
    v = [1.0, -2.0, 0.5, 0.25]
    out, tangent = func.jvp(lambda x: f(M, x), (M.tensor(X, dtype=mg.float64),),
                            (M.tensor(v, dtype=mg.float64),))
    t_out, t_tangent = torch.func.jvp(lambda x: f(torch, x),
                                      (torch.tensor(X, dtype=torch.float64),),
                                      (torch.tensor(v, dtype=torch.float64),))
    _close(out, t_out, "float64")
    _close(tangent, t_tangent, "float64")


# (torch.func refuses the second derivative of product_into_own_slice: "ZeroTensors are
# immutable", a limit of its own implementation)
@pytest.mark.parametrize("f", params([r for r in FUNCTIONS if r[0] != "product_into_own_slice"]))
def test_forward_over_forward_matches_torch_func(device, f):
    """jacfwd of jacfwd: the second derivatives of functions that write into views."""
    M = On(mg, device)
    ours = func.jacfwd(func.jacfwd(lambda x: f(M, x)))(M.tensor(X, dtype=mg.float64))
    theirs = torch.func.jacfwd(torch.func.jacfwd(lambda x: f(torch, x)))(
        torch.tensor(X, dtype=torch.float64))
    _close(ours, theirs, "float64")


def _grad_of_tangent(lib, fw, M, f):
    """The gradient of <jvp(v), u> with respect to x."""
    x = M.tensor(X, dtype=lib.float64, requires_grad=True)
    with fw.dual_level():
        out = f(M, fw.make_dual(x, M.tensor([1.0, -2.0, 0.5, 0.25], dtype=lib.float64)))
        tangent = fw.unpack_dual(out).tangent
        return lib.autograd.grad((tangent * 0.5).sum(), x)[0]


# the functions whose tangent depends on x (PyTorch's refuses nonlinear_chain and
# product_into_own_slice: its tangents are written in place after being saved)
@pytest.mark.parametrize("f", params([r for r in FUNCTIONS if r[0] in (
    "square_through_transpose", "copy_and_clamp", "zero_and_fill")]))
def test_reverse_over_forward_matches_torch(device, f):
    """Reverse mode through the tangents of writes into views."""
    import torch.autograd.forward_ad as tfw
    _close(_grad_of_tangent(mg, fwAD, On(mg, device), f),
           _grad_of_tangent(torch, tfw, torch, f), "float64")


def test_reverse_over_forward_sees_a_saved_value_changed_in_place(device):
    """exp's output is saved for the tangent's backward and then changed in place: refused in
    both, as a value modified by an inplace operation."""
    import torch.autograd.forward_ad as tfw
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _grad_of_tangent(torch, tfw, torch, _nonlinear_chain)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _grad_of_tangent(mg, fwAD, On(mg, device), _nonlinear_chain)


# --- where PyTorch refuses ----------------------------------------------------------------

REFUSED = [
    ("write_into_an_expanded_base", lambda L: L.zeros(4).expand(3, 4).add_(L.dual((3, 4))),
     "single memory location"),
    ("write_into_an_expanded_dual", lambda L: L.dual((4,)).expand(3, 4).mul_(2.0),
     "single memory location"),
    ("dual_into_an_integer_view", lambda L: L.M.zeros(3, dtype=L.M.int64)[0].add_(L.dual(())),
     "can't be cast to the desired output type Long"),
    ("make_dual_of_a_view_of_a_dual", lambda L: L.fw.make_dual(L.dual((3,))[1:], L.val((2,))),
     "already has a forward gradient"),
    ("make_dual_of_a_view_after_a_write", lambda L: _make_dual_after_write(L),
     "already has a forward gradient"),
    ("shapes_that_do_not_broadcast", lambda L: L.zeros(3)[1:].add_(L.dual((3,))), ""),
]


def _make_dual_after_write(L):
    base = L.zeros(3)
    base[1:].add_(L.dual((2,)))
    return L.fw.make_dual(base[:2], L.val((2,)))


@pytest.mark.parametrize("fn, fragment", params(REFUSED))
def test_refused_as_torch(device, fn, fragment):
    import torch.autograd.forward_ad as tfw
    with pytest.raises(RuntimeError, match=fragment):
        with tfw.dual_level():
            fn(Lib(torch, tfw, "float64"))
    with pytest.raises(RuntimeError, match=fragment):
        with fwAD.dual_level():
            fn(Lib(On(mg, device), fwAD, "float64"))
    assert not fwAD.LEVELS


@case
def dual_copied_into_integer_view(L):
    base = L.M.zeros(3, dtype=L.M.int64)
    base[:2].copy_(L.dual((2,)))
    base[2:] = L.dual((1,), 1)
    return base,


@case
def float32_dual_into_float64_base(L):
    base = L.M.zeros(3, dtype=L.M.float64)
    base[1:].add_(L.fw.make_dual(L.M.ones(2), L.M.ones(2) * 3))
    return base,


@case
def float64_dual_copied_into_float32_base(L):
    base = L.M.zeros(3, dtype=L.M.float32)
    base[1:].copy_(L.val((2,)) * 1.0)
    base[:2].copy_(L.fw.make_dual(L.M.ones(2, dtype=L.M.float64) / 3,
                                  L.M.ones(2, dtype=L.M.float64) / 7))
    return base,


# --- with a graph recorded (inputs that require grad) ---------------------------------------

def _grad_view_mul(L):
    p = L.val((3,)).requires_grad_()
    y = p * 1
    y[:2].mul_(L.dual((2,), 1))
    return y,


def _dual_mul_by_grad(L):
    x = L.dual((3,))
    x.mul_(L.val((3,), 2).requires_grad_())
    return x,


def _dual_view_mul_by_grad(L):
    x = L.dual((3,))
    v = x[1:]
    v.mul_(L.val((2,), 2).requires_grad_())
    return x, v


def _grad_base_dual_add(L):
    p = L.val((2, 3)).requires_grad_()
    y = p.exp()
    v = y.t()
    y[1].add_(L.dual((3,)))
    return y, v


RECORDED = [
    ("grad_view_mul", _grad_view_mul),
    ("grad_base_dual_add", _grad_base_dual_add),
    ("dual_mul_by_grad", _dual_mul_by_grad),
    ("dual_view_mul_by_grad", _dual_view_mul_by_grad),
]


@pytest.mark.parametrize("fn", params(RECORDED))
def test_recorded_in_place_matches_torch(device, fn):
    import torch.autograd.forward_ad as tfw
    assert_same(_run(mg, fwAD, "float64", fn, device), _run(torch, tfw, "float64", fn))


def test_duals_of_an_exited_level_take_no_tangent_from_their_base(device):
    """make_dual's and unpack_dual's results are views in memory only: a later level's
    tangent, written into their base, does not reach them (as in PyTorch)."""
    import torch.autograd.forward_ad as tfw

    def run(M, fw):
        base = M.zeros(3, dtype=M.float64)
        with fw.dual_level():
            x = fw.make_dual(base, M.ones(3, dtype=M.float64))
            p = fw.unpack_dual(x).primal
        with fw.dual_level():
            base.add_(fw.make_dual(M.ones(3, dtype=M.float64), M.arange(3.0, dtype=M.float64)))
            return [fw.unpack_dual(t).tangent for t in (x, p, x[1:], base)]
    ours, theirs = run(On(mg, device), fwAD), run(torch, tfw)
    assert [t is None for t in ours] == [t is None for t in theirs] == [True] * 3 + [False]
    np.testing.assert_array_equal(ours[3].numpy(), theirs[3].numpy())
