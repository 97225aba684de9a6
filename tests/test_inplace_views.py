"""In-place operations, views and the version counter, against PyTorch.

Every case is one small program written once against the shared API and run twice: with
``M = minigrad`` (its tensors made on the tested device) and with ``M = torch`` (the CPU
reference). Either both succeed and give the same values,
gradients, versions and flags, or both raise RuntimeError (minigrad's message is matched on
a few robust words, since its wording is its own).
"""
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn as mg_nn
from tests.torch_ref import On

torch = pytest.importorskip("torch")


# --- the harness ----------------------------------------------------------------------------

def _nn(M):
    return torch.nn if M is torch else mg_nn


def _on_device(M, module):
    """``module`` moved to minigrad's tested device (torch's stays on the CPU)."""
    return module if M is torch else module.to(M.device)


def _grad(M, *args, **kwargs):
    return (torch.autograd.grad if M is torch else mg.grad)(*args, **kwargs)


def _numpy(t):
    return t.detach().numpy()


def _plain(value):
    """What a program returned, with tensors turned into (copied) NumPy arrays."""
    if isinstance(value, (mg.Tensor, torch.Tensor)):
        return np.array(_numpy(value))
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    if isinstance(value, np.dtype):
        return str(value)
    return value


def _run(M, program):
    try:
        return None, _plain(program(M))
    except Exception as e:  # compared with torch's outcome below
        return e, None


def _assert_same(got, want, where="result"):
    if isinstance(want, np.ndarray):
        assert isinstance(got, np.ndarray), f"{where}: got {got!r}, torch gives an array"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype}, torch {want.dtype}"
        assert got.shape == want.shape, f"{where}: shape {got.shape}, torch {want.shape}"
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=where)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got!r} vs {want!r}"
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, f"{where}[{i}]")
    elif isinstance(want, dict):
        assert got.keys() == want.keys(), where
        for k in want:
            _assert_same(got[k], want[k], f"{where}[{k!r}]")
    else:
        assert got == want, f"{where}: minigrad {got!r}, torch {want!r}"


def same_as_torch(program, device):
    """Both libraries run ``program`` (minigrad on ``device``) without error and return the
    same things."""
    t_err, want = _run(torch, program)
    assert t_err is None, f"the case is wrong: torch raised {t_err!r}"
    m_err, got = _run(On(mg, device), program)
    if m_err is not None:
        raise AssertionError(f"torch succeeds, minigrad raised {m_err!r}") from m_err
    _assert_same(got, want)


def raises_like_torch(program, device, torch_phrase, *patterns):
    """Both raise RuntimeError (minigrad on ``device``): torch's message contains
    ``torch_phrase`` and minigrad's matches every regular expression in ``patterns``
    (case-insensitive). Returns both."""
    t_err, _ = _run(torch, program)
    assert isinstance(t_err, RuntimeError), f"the case is wrong: torch gave {t_err!r}"
    assert torch_phrase in str(t_err), f"the case is wrong: torch said {t_err}"
    m_err, got = _run(On(mg, device), program)
    assert m_err is not None, f"torch raises ({t_err}); minigrad returned {got!r}"
    assert isinstance(m_err, RuntimeError), f"expected RuntimeError, minigrad raised {m_err!r}"
    for p in patterns:
        assert re.search(p, str(m_err), re.I), f"{p!r} not in minigrad's message: {m_err}"
    return m_err, t_err


INPLACE_WORDS = r"in[- ]?place"


def raises_version_error(program, device):
    """torch's 'modified by an inplace operation ... is at version N; expected version M':
    minigrad must say so too, naming both versions."""
    m_err, t_err = raises_like_torch(program, device, "modified by an inplace operation",
                                     INPLACE_WORDS, "version")
    now, expected = re.search(r"is at version (\d+); expected version (\d+)", str(t_err)).groups()
    for n in (now, expected):
        assert re.search(rf"\b{n}\b", str(m_err)), f"version {n} not in: {m_err}"


def _shape(*dims):
    """A shape as torch writes it, [2, 3], or as Python does, (2, 3)."""
    inner = r",\s*".join(str(d) for d in dims)
    return rf"\[{inner}\]|\({inner},?\)"


# --- in-place operations, each as a function of (M, t) -----------------------------------

def _setitem(t, index, value):
    t[index] = value


def _iadd(t, value):
    t += value
    return t


def _isub(t, value):
    t -= value
    return t


def _imul(t, value):
    t *= value
    return t


def _itruediv(t, value):
    t /= value
    return t


INPLACE_OPS = {
    "add_": lambda M, t: t.add_(1.0),
    "add_alpha": lambda M, t: t.add_(M.ones_like(t), alpha=2),
    "sub_": lambda M, t: t.sub_(0.5),
    "mul_": lambda M, t: t.mul_(2.0),
    "div_": lambda M, t: t.div_(4.0),
    "iadd": lambda M, t: _iadd(t, 1.0),
    "isub": lambda M, t: _isub(t, 1.0),
    "imul": lambda M, t: _imul(t, 3.0),
    "itruediv": lambda M, t: _itruediv(t, 2.0),
    "setitem_all": lambda M, t: _setitem(t, ..., 7.0),
    "setitem_first": lambda M, t: _setitem(t, 0, 7.0),
    "copy_": lambda M, t: t.copy_(M.full_like(t, 3.0)),
    "zero_": lambda M, t: t.zero_(),
    "fill_": lambda M, t: t.fill_(5.0),
    "clamp_": lambda M, t: t.clamp_(min=1.0, max=3.0),
    "masked_fill_": lambda M, t: t.masked_fill_(t > 2, -1.0),
}
OP_NAMES = list(INPLACE_OPS)


# --- views share the version counter (and the memory) with their base ----------------------

def _base(M):
    return M.arange(12.0).reshape(2, 1, 6).clone()


VIEWS = {
    "slice": lambda x: x[1:],
    "int_index": lambda x: x[0],
    "column": lambda x: x[:, 0],
    "step_slice": lambda x: x[..., ::2],
    "new_axis": lambda x: x[..., None],
    "view": lambda x: x.view(12),
    "view_infer": lambda x: x.view(-1, 3),
    "reshape": lambda x: x.reshape(4, 3),
    "transpose": lambda x: x.transpose(0, 2),
    "T_2d": lambda x: x[:, 0].T,
    "permute": lambda x: x.permute(2, 0, 1),
    "squeeze_dim": lambda x: x.squeeze(1),
    "squeeze_all": lambda x: x.squeeze(),
    "unsqueeze": lambda x: x.unsqueeze(0),
    "detach": lambda x: x.detach(),
    "split_piece": lambda x: x.split(1)[1],
    "chunk_piece": lambda x: x.chunk(3, dim=2)[1],
    "view_of_view": lambda x: x[1:].view(6)[2:],
    "transpose_then_slice": lambda x: x.transpose(0, 2)[1:4],
}


@pytest.mark.parametrize("view", list(VIEWS))
def test_inplace_on_view_and_base_share_versions(view, device):
    def program(M):
        x = _base(M)
        v = VIEWS[view](x)
        states = [(x._version, v._version)]
        v.add_(1.0)
        states.append((x._version, v._version, x))
        x.mul_(2.0)
        states.append((x._version, v._version, v))
        v.zero_()
        states.append((x._version, v._version, x))
        return states
    same_as_torch(program, device)


@pytest.mark.parametrize("op", OP_NAMES)
@pytest.mark.parametrize("view", ["slice", "transpose"])
def test_each_inplace_op_on_a_view_bumps_the_base(op, view, device):
    def program(M):
        x = _base(M)
        v = VIEWS[view](x)
        INPLACE_OPS[op](M, v)
        return x._version, v._version, x, v
    same_as_torch(program, device)


@pytest.mark.parametrize("op", OP_NAMES)
def test_each_inplace_op_on_the_base_bumps_its_views(op, device):
    def program(M):
        x = _base(M)
        views = [x[1:], x.transpose(0, 2), x.detach(), x.view(12)]
        INPLACE_OPS[op](M, x)
        return [(v._version, v) for v in views] + [x._version]
    same_as_torch(program, device)


def test_expanded_view_shares_the_version_of_its_base(device):
    def program(M):
        x = M.zeros(1, 3)
        v = x.expand(2, 3)
        x.add_(1.0)
        v.fill_(4.0)  # allowed in torch: every element is written with the same value
        return x._version, v._version, x, v
    same_as_torch(program, device)


COPIES = {
    "clone": lambda x: x.clone(),
    "transpose_reshape": lambda x: x.transpose(0, 2).reshape(-1),
    "transpose_contiguous": lambda x: x.transpose(0, 2).contiguous(),
    "transpose_flatten": lambda x: x.transpose(0, 2).flatten(),
    "advanced_index": lambda x: x[[1, 0]],
    "mask_index": lambda x: x[x > 3],
    "arithmetic": lambda x: x + 0,
    "to_float64": lambda x: x.to(torch.float64 if isinstance(x, torch.Tensor) else mg.float64),
}


@pytest.mark.parametrize("copy", list(COPIES))
def test_inplace_on_a_copy_leaves_the_original_alone(copy, device):
    def program(M):
        x = _base(M)
        c = COPIES[copy](x)
        c.add_(1.0)
        return x._version, c._version, x, c
    same_as_torch(program, device)


# --- memory layout: contiguous(), is_contiguous(), stride() ---------------------------------

LAYOUTS = {
    "fresh": lambda M: M.randn(2, 3, 4),
    "transposed": lambda M: M.randn(2, 3, 4).transpose(1, 2),
    "permuted": lambda M: M.randn(2, 3, 4).permute(2, 0, 1),
    "mT": lambda M: M.randn(2, 3, 4).mT,
    "sliced": lambda M: M.randn(4, 6)[:, ::2],
    "row": lambda M: M.randn(4, 6)[1],
    "column": lambda M: M.randn(4, 6)[:, 1],
    "expanded": lambda M: M.randn(3, 1).expand(3, 4),
    "cloned_transpose": lambda M: M.randn(3, 4).T.clone(),
    "size_one_dims": lambda M: M.randn(1, 4, 1).transpose(0, 2),
}


@pytest.mark.parametrize("case", list(LAYOUTS))
def test_layout_and_contiguous_copies_as_torch(case, device):
    """``clone`` keeps a dense layout, ``contiguous`` makes a row-major one (the layout
    ``view`` needs), as in PyTorch."""
    def program(M):
        x = LAYOUTS[case](M)
        c = x.contiguous()
        return (x.is_contiguous(), x.stride(), x.stride(-1), c.is_contiguous(), c.stride(),
                c.view(-1).shape)
    same_as_torch(program, device)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_transpose_contiguous_view_as_in_multi_head_attention(requires_grad, device):
    """The reshape every multi-head attention written for PyTorch does: (B, H, T, D) ->
    (B, T, H * D) through ``transpose(1, 2).contiguous().view``; values and gradients."""
    def program(M):
        y = M.arange(2 * 3 * 4 * 5.0).reshape(2, 3, 4, 5)
        y.requires_grad_(requires_grad)
        merged = y.transpose(1, 2).contiguous().view(2, 4, 15)
        if not requires_grad:
            return merged, merged.is_contiguous()
        (merged * M.arange(2 * 4 * 15.0).reshape(2, 4, 15)).sum().backward()
        return merged.detach(), y.grad, type(merged.grad_fn).__name__
    same_as_torch(program, device)


# --- tensors saved for backward and then changed in place ---------------------------------
#
# Each case builds y from a leaf x (requires grad) and returns (y, target): the tensor that
# is then changed in place. Whether torch saved it decides whether backward must fail.

def _h(x):
    return x * 1  # a non-leaf copy of x that may be changed in place


SAVED = {  # target was saved by y's grad_fn: backward must raise
    "mul_other": lambda M, x, a: (x * a, a),
    "mul_self_both_need_grad": lambda M, x, a: (lambda h: (h * x, h))(_h(x)),
    "div_divisor": lambda M, x, a: (x / a, a),
    "div_dividend": lambda M, x, a: (lambda h: (a / h, h))(_h(x)),
    "pow_scalar": lambda M, x, a: (lambda h: (h ** 2, h))(_h(x)),
    "pow_tensor_exponent": lambda M, x, a: (x ** a, a),
    "matmul_other": lambda M, x, a: (x @ a, a),
    "matmul_2d": lambda M, x, a: (x.reshape(1, 3) @ a.reshape(3, 1), a),
    "exp_output": lambda M, x, a: (lambda y: (y, y))(x.exp()),
    "tanh_output": lambda M, x, a: (lambda y: (y, y))(x.tanh()),
    "sigmoid_output": lambda M, x, a: (lambda y: (y, y))(x.sigmoid()),
    "relu_output": lambda M, x, a: (lambda y: (y, y))(x.relu()),
    "sqrt_output": lambda M, x, a: (lambda y: (y, y))(x.sqrt()),
    "softmax_output": lambda M, x, a: (lambda y: (y, y))(x.softmax(0)),
    "log_input": lambda M, x, a: (lambda h: (h.log(), h))(_h(x)),
    "sin_input": lambda M, x, a: (lambda h: (h.sin(), h))(_h(x)),
    "cos_input": lambda M, x, a: (lambda h: (h.cos(), h))(_h(x)),
    "abs_input": lambda M, x, a: (lambda h: (h.abs(), h))(_h(x)),
    "clamp_input": lambda M, x, a: (lambda h: (h.clamp(0.7, 1.2), h))(_h(x)),
}

NOT_SAVED = {  # target was not saved: backward works and gives torch's gradients
    "add_other": lambda M, x, a: (x + a, a),
    "sub_other": lambda M, x, a: (x - a, a),
    "add_output": lambda M, x, a: (lambda y: (y, y))(x + a),
    "mul_output": lambda M, x, a: (lambda y: (y, y))(x * a),
    "mul_self_other_constant": lambda M, x, a: (lambda h: (h * a, h))(_h(x)),
    "mul_by_python_scalar": lambda M, x, a: (lambda h: (h * 3.0, h))(_h(x)),
    "exp_input": lambda M, x, a: (lambda h: (h.exp(), h))(_h(x)),
    "tanh_input": lambda M, x, a: (lambda h: (h.tanh(), h))(_h(x)),
    "sigmoid_input": lambda M, x, a: (lambda h: (h.sigmoid(), h))(_h(x)),
    "relu_input": lambda M, x, a: (lambda h: (h.relu(), h))(_h(x)),
    "sqrt_input": lambda M, x, a: (lambda h: (h.sqrt(), h))(_h(x)),
    "log_output": lambda M, x, a: (lambda y: (y, y))(x.log()),
    "sin_output": lambda M, x, a: (lambda y: (y, y))(x.sin()),
    "sum_input": lambda M, x, a: (lambda h: (h.sum(), h))(_h(x)),
    "mean_input": lambda M, x, a: (lambda h: (h.mean(), h))(_h(x)),
    "neg_input": lambda M, x, a: (lambda h: (-h, h))(_h(x)),
    "matmul_output": lambda M, x, a: (lambda y: (y, y))(x @ a),
}


def _saved_program(case, modify):
    def program(M):
        x = M.tensor([0.5, 1.0, 1.5], requires_grad=True)
        a = M.tensor([2.0, 3.0, 4.0])
        y, target = case(M, x, a)
        modify(M, target)
        y.sum().backward()
        return x.grad, target
    return program


@pytest.mark.parametrize("case", list(SAVED))
def test_changing_a_saved_tensor_fails_backward(case, device):
    raises_version_error(_saved_program(SAVED[case], INPLACE_OPS["add_"]), device)


@pytest.mark.parametrize("op", OP_NAMES)
def test_each_inplace_op_on_a_saved_input_fails_backward(op, device):
    raises_version_error(_saved_program(SAVED["mul_other"], INPLACE_OPS[op]), device)


@pytest.mark.parametrize("op", OP_NAMES)
def test_each_inplace_op_on_a_saved_output_fails_backward(op, device):
    raises_version_error(_saved_program(SAVED["exp_output"], INPLACE_OPS[op]), device)


@pytest.mark.parametrize("case", list(NOT_SAVED))
def test_changing_a_tensor_that_was_not_saved_is_fine(case, device):
    same_as_torch(_saved_program(NOT_SAVED[case], INPLACE_OPS["add_"]), device)


@pytest.mark.parametrize("op", ["mul_", "setitem_all", "zero_", "copy_", "iadd"])
def test_other_inplace_ops_on_unsaved_tensors_are_fine(op, device):
    same_as_torch(_saved_program(NOT_SAVED["add_other"], INPLACE_OPS[op]), device)


THROUGH_VIEWS = {
    "view_of_saved": lambda M, a: a[:2].add_(1.0),
    "transpose_of_saved": lambda M, a: a.reshape(3, 1).T.mul_(2.0),
    "detached_saved": lambda M, a: a.detach().zero_(),
    "setitem_on_saved": lambda M, a: _setitem(a, 1, 0.0),
}


@pytest.mark.parametrize("how", list(THROUGH_VIEWS))
def test_changing_a_saved_tensor_through_a_view_fails_backward(how, device):
    def program(M):
        x = M.tensor([0.5, 1.0, 1.5], requires_grad=True)
        a = M.tensor([2.0, 3.0, 4.0])
        y = x * a
        THROUGH_VIEWS[how](M, a)
        y.sum().backward()
    raises_version_error(program, device)


def test_changing_the_base_of_a_saved_view_fails_backward(device):
    def program(M):
        x = M.tensor([0.5, 1.0, 1.5], requires_grad=True)
        base = M.tensor([1.0, 2.0, 3.0, 4.0])
        y = x * base[1:]
        base.mul_(2.0)
        y.sum().backward()
    raises_version_error(program, device)


def test_detached_output_changed_in_place_fails_backward(device):
    def program(M):
        x = M.tensor([0.5, 1.0, 1.5], requires_grad=True)
        y = x.exp()
        y.detach().add_(1.0)
        y.sum().backward()
    raises_version_error(program, device)


def test_changes_undone_do_not_fool_the_check(device):
    def program(M):
        x = M.tensor([0.5, 1.0, 1.5], requires_grad=True)
        a = M.tensor([2.0, 3.0, 4.0])
        y = x * a
        a.add_(1.0)
        a.sub_(1.0)  # same values, but two versions later
        y.sum().backward()
    raises_version_error(program, device)


def test_mg_grad_also_checks_versions(device):
    def program(M):
        x = M.tensor([0.5, 1.0, 1.5], requires_grad=True)
        a = M.tensor([2.0, 3.0, 4.0])
        y = (x * a).sum()
        a[0] = 9.0
        return _grad(M, y, x)
    raises_version_error(program, device)


# --- in-place operations inside the graph -------------------------------------------------

def _leaves(M):
    x = M.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = M.tensor([1.5, 2.5, -0.5], requires_grad=True)
    return x, w


def _weighted_backward(M, out):
    """Backward of a weighted sum, so that every element's gradient differs."""
    weights = M.arange(1.0, out.numel() + 1.0).reshape(out.shape)
    (out * weights).sum().backward()


CHAINS = {
    "mul_add": lambda M, b, x, w: (b.mul_(w), b.add_(w)),
    "sub_div": lambda M, b, x, w: (b.sub_(w), b.div_(w)),
    "add_alpha": lambda M, b, x, w: b.add_(w, alpha=-2.0),
    "augmented": lambda M, b, x, w: _itruediv(_isub(_iadd(_imul(b, w), x), w), 2.0),
    "copy_": lambda M, b, x, w: b.copy_(w * 2),
    "zero_then_add": lambda M, b, x, w: (b.zero_(), b.add_(w)),
    "fill_": lambda M, b, x, w: b.fill_(2.0),
    "clamp_": lambda M, b, x, w: b.clamp_(min=-0.5, max=1.0),
    "masked_fill_": lambda M, b, x, w: b.masked_fill_(w > 2, 0.0),
    "setitem_graph_value": lambda M, b, x, w: _setitem(b, slice(1, None), w[1:] * 2),
    "setitem_constant": lambda M, b, x, w: _setitem(b, 0, 5.0),
    "setitem_advanced": lambda M, b, x, w: _setitem(b, [0, 2], w[:2] * w[1:]),
    "setitem_mask": lambda M, b, x, w: _setitem(b, w > 2, 0.0),
    "mul_then_mul_by_x": lambda M, b, x, w: (b.mul_(w), b.mul_(x)),
}


@pytest.mark.parametrize("chain", list(CHAINS))
def test_inplace_on_a_non_leaf_is_recorded(chain, device):
    def program(M):
        x, w = _leaves(M)
        b = x * 1
        CHAINS[chain](M, b, x, w)
        _weighted_backward(M, b)
        return b, b.is_leaf, b.requires_grad, b._version, x.grad, w.grad
    same_as_torch(program, device)


BUFFER_WRITES = {
    "setitem_slice": lambda M, buf, w: _setitem(buf, slice(1, None), w[1:] * 3),
    "setitem_int": lambda M, buf, w: _setitem(buf, 1, w.sum()),
    "setitem_advanced": lambda M, buf, w: _setitem(buf, [2, 0], w[:2]),
    "setitem_broadcast": lambda M, buf, w: _setitem(buf, slice(None), w[0]),
    "copy_": lambda M, buf, w: buf.copy_(w),
    "copy_broadcast": lambda M, buf, w: buf.copy_(w[1]),
    "add_": lambda M, buf, w: buf.add_(w),
    "mul_": lambda M, buf, w: (buf.fill_(2.0), buf.mul_(w)),
    "iadd": lambda M, buf, w: _iadd(buf, w * w),
    "masked_fill_graph_value": lambda M, buf, w: buf.masked_fill_(buf > 0, w[0]),
    "view_add_": lambda M, buf, w: buf[1:].add_(w[:2]),
    "view_copy_": lambda M, buf, w: buf[:2].copy_(w[1:]),
    "view_setitem": lambda M, buf, w: _setitem(buf[1:], 0, w[2]),
    "reshape_view_add_": lambda M, buf, w: buf.view(3, 1).add_(w.view(3, 1)),
}


@pytest.mark.parametrize("write", list(BUFFER_WRITES))
def test_writing_graph_tensors_into_a_plain_buffer(write, device):
    def program(M):
        _, w = _leaves(M)
        buf = M.tensor([1.0, -2.0, 3.0])
        BUFFER_WRITES[write](M, buf, w)
        flags = (buf.requires_grad, buf.is_leaf, buf._version)
        _weighted_backward(M, buf)
        return buf, flags, w.grad
    same_as_torch(program, device)


def test_writing_into_a_column_of_a_2d_buffer_broadcasts(device):
    def program(M):
        w = M.tensor(2.0, requires_grad=True)
        buf = M.zeros(3, 2)
        buf[:, 0] = w
        _weighted_backward(M, buf)
        return buf, buf.requires_grad, w.grad
    same_as_torch(program, device)


def test_write_into_a_view_then_backward_through_the_base(device):
    def program(M):
        _, w = _leaves(M)
        buf = M.zeros(4)
        v = buf[1:]
        v.add_(w)
        buf.sum().backward()
        return buf, buf.requires_grad, buf.is_leaf, v.requires_grad, w.grad
    same_as_torch(program, device)


NON_LEAF_VIEW_WRITES = {
    "slice_mul_": lambda M, h, w: h[1:].mul_(w[1:]),
    "transpose_add_": lambda M, h, w: h.reshape(3, 1).T.add_(w),
    "int_index_copy_": lambda M, h, w: h[0].copy_(w[2] * 4),
    "view_of_view_fill_": lambda M, h, w: h.view(3, 1)[1:].fill_(0.0),
    "slice_of_slice_setitem": lambda M, h, w: _setitem(h[1:][1:], ..., w[0]),
    "two_views": lambda M, h, w: (h[:2].mul_(w[:2]), h[1:].add_(w[1:])),
}


@pytest.mark.parametrize("write", list(NON_LEAF_VIEW_WRITES))
def test_inplace_on_a_view_of_a_non_leaf_reaches_the_base(write, device):
    def program(M):
        x, w = _leaves(M)
        h = x * 2
        NON_LEAF_VIEW_WRITES[write](M, h, w)
        _weighted_backward(M, h)
        return h, h._version, x.grad, w.grad
    same_as_torch(program, device)


def test_view_taken_before_an_inplace_on_the_base_sees_the_new_graph(device):
    def program(M):
        x, w = _leaves(M)
        h = x * 2
        v = h[1:]
        h.mul_(w)
        _weighted_backward(M, v)
        return v, x.grad, w.grad
    same_as_torch(program, device)


def test_inplace_after_use_by_an_op_that_did_not_save_it(device):
    def program(M):
        x, w = _leaves(M)
        h = x * 2
        y = h + w  # add saves nothing
        h.mul_(3.0)
        (y.sum() + (h * h).sum()).backward()
        return y, h, x.grad, w.grad
    same_as_torch(program, device)


def test_inplace_result_used_twice(device):
    def program(M):
        x, w = _leaves(M)
        h = x + 0
        h.mul_(w)
        out = h * h + h
        h.add_(1.0)  # h * h saved h
        out.sum().backward()
    raises_version_error(program, device)


def test_inplace_multiply_by_itself_fails_backward(device):
    def program(M):
        x, _ = _leaves(M)
        b = x * 1
        b.mul_(b)  # mul saved b, which the same op then overwrites
        b.sum().backward()
    raises_version_error(program, device)


def test_inplace_returns_the_same_object(device):
    def program(M):
        x, w = _leaves(M)
        b = x * 1
        results = [b.add_(w) is b, b.mul_(2.0) is b, b.clamp_(min=0.0) is b, b.zero_() is b,
                   b.fill_(1.0) is b, b.copy_(w) is b, b.sub_(w) is b, b.div_(2.0) is b,
                   b.masked_fill_(b > 0, 1.0) is b]
        return results
    same_as_torch(program, device)


# --- a leaf that requires grad, changed in place ------------------------------------------

LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation"
VIEW_OF_LEAF_MESSAGE = "a view of a leaf Variable that requires grad is being used in an in-place"


def _leaf(M):
    return M.tensor([[0.5, 1.5, 2.5], [3.5, -1.0, 0.0]], requires_grad=True)


@pytest.mark.parametrize("op", OP_NAMES)
def test_inplace_on_a_leaf_that_requires_grad_raises(op, device):
    def program(M):
        INPLACE_OPS[op](M, _leaf(M))
    raises_like_torch(program, device, LEAF_MESSAGE, "leaf", "requires grad", INPLACE_WORDS)


LEAF_VIEWS = ["slice", "int_index", "transpose_2d", "view", "unsqueeze"]


def _leaf_view(name, x):
    return {"slice": lambda: x[1:], "int_index": lambda: x[0], "transpose_2d": lambda: x.T,
            "view": lambda: x.view(6), "unsqueeze": lambda: x.unsqueeze(0),
            "split_piece": lambda: x.split(1)[0]}[name]()


@pytest.mark.parametrize("op", ["add_", "setitem_first", "copy_", "iadd"])
@pytest.mark.parametrize("view", LEAF_VIEWS)
def test_inplace_on_a_view_of_a_leaf_that_requires_grad_raises(view, op, device):
    def program(M):
        INPLACE_OPS[op](M, _leaf_view(view, _leaf(M)))
    raises_like_torch(program, device, VIEW_OF_LEAF_MESSAGE, "view", "leaf", INPLACE_WORDS)


@pytest.mark.parametrize("op", OP_NAMES)
def test_inplace_on_a_leaf_under_no_grad_is_allowed(op, device):
    def program(M):
        x = _leaf(M)
        with M.no_grad():
            INPLACE_OPS[op](M, x)
        return x, x._version, x.is_leaf, x.requires_grad, x.grad_fn is None
    same_as_torch(program, device)


MULTI_VIEW_MESSAGE = "This view is the output of a function that returns multiple views"


@pytest.mark.parametrize("piece", ["split", "chunk"])
@pytest.mark.parametrize("source", ["leaf", "non_leaf"])
def test_inplace_on_a_split_piece_of_a_tensor_requiring_grad_raises(source, piece, device):
    def program(M):
        x = _leaf(M)
        t = x if source == "leaf" else x * 2
        parts = t.split(1) if piece == "split" else t.chunk(2)
        parts[1].add_(1.0)
    raises_like_torch(program, device, MULTI_VIEW_MESSAGE, "view", INPLACE_WORDS)


@pytest.mark.parametrize("view", LEAF_VIEWS + ["split_piece"])
def test_inplace_on_a_view_of_a_leaf_under_no_grad_is_allowed(view, device):
    def program(M):
        x = _leaf(M)
        with M.no_grad():
            v = _leaf_view(view, x)
            v.mul_(2.0)
        return x, x._version, v._version, x.is_leaf, x.requires_grad
    same_as_torch(program, device)


def test_inplace_on_the_detached_leaf_is_allowed(device):
    def program(M):
        x = _leaf(M)
        x.detach().add_(1.0)
        return x, x._version, x.requires_grad, x.is_leaf
    same_as_torch(program, device)


def test_view_made_under_no_grad_changed_with_grad_on_raises(device):
    def program(M):
        x = _leaf(M)
        with M.no_grad():
            v = x[1:]
        v.add_(1.0)
    raises_like_torch(program, device, "A view was created in no_grad mode", "no_grad", "view")


def test_leaf_changed_under_no_grad_then_used(device):
    def program(M):
        x = _leaf(M)
        with M.no_grad():
            x.mul_(2.0)
        (x * x).sum().backward()
        return x.grad, x._version
    same_as_torch(program, device)


# --- manual SGD steps -------------------------------------------------------------------

def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((8, 3)).astype(np.float32)
    Y = (X @ np.array([[1.0], [-2.0], [0.5]], dtype=np.float32) + 0.3).astype(np.float32)
    w = (rng.standard_normal((3, 1)) * 0.1).astype(np.float32)
    return X, Y, w


def _data_isub(p, lr):
    p.data -= lr * p.grad


def _data_add_alpha(p, lr):
    p.data.add_(p.grad, alpha=-lr)


SGD_STEPS = {
    "isub": lambda p, lr: _isub(p, lr * p.grad),
    "sub_": lambda p, lr: p.sub_(lr * p.grad),
    "add_alpha": lambda p, lr: p.add_(p.grad, alpha=-lr),
    "decay_then_sub_": lambda p, lr: _imul(p, 0.9).sub_(lr * p.grad),
    "data_isub": _data_isub,
    "data_add_alpha": _data_add_alpha,
}


@pytest.mark.parametrize("zero", ["set_to_none", "zero_"])
@pytest.mark.parametrize("step", list(SGD_STEPS))
def test_manual_sgd_updates_parameters_in_place(step, zero, device):
    def program(M):
        X, Y, w0 = _data()
        X, Y = M.tensor(X), M.tensor(Y)
        w = M.tensor(w0, requires_grad=True)
        b = M.zeros(1, requires_grad=True)
        params = [w, b]
        arrays = [_numpy(p) for p in params]  # NumPy views (on the CPU) taken before training
        for _ in range(3):
            loss = ((X @ w + b - Y) ** 2).mean()
            loss.backward()
            with M.no_grad():
                for p in params:
                    SGD_STEPS[step](p, 0.1)
            for p in params:
                if zero == "zero_":
                    p.grad.zero_()
                else:
                    p.grad = None
        result = {"params": params,
                  "same_objects": [p is q for p, q in zip(params, [w, b])],
                  "versions": [p._version for p in params],
                  "leaf": [(p.is_leaf, p.requires_grad, p.grad_fn is None) for p in params]}
        if device == "cpu":  # numpy() of a GPU tensor is a copy, in torch too
            shared = [bool(np.shares_memory(a, _numpy(p))) for a, p in zip(arrays, params)]
            result.update(arrays=arrays, shares_memory=shared)
        return result
    same_as_torch(program, device)


def test_sgd_step_on_linear_layer_parameters(device):
    def program(M):
        X, Y, _ = _data()
        M.manual_seed(0)
        layer = _on_device(M, _nn(M).Linear(3, 1))
        with M.no_grad():
            layer.weight.copy_(M.tensor([[0.1, -0.2, 0.3]]))
            layer.bias.fill_(0.0)
        before = list(layer.parameters())
        for _ in range(2):
            loss = ((layer(M.tensor(X)) - M.tensor(Y)) ** 2).mean()
            loss.backward()
            with M.no_grad():
                for p in layer.parameters():
                    p -= 0.1 * p.grad
                    p.grad = None
        after = list(layer.parameters())
        return after, [p is q for p, q in zip(before, after)], [p._version for p in after]
    same_as_torch(program, device)


# --- dtype and shape rules of in-place operations --------------------------------------

CAST_ERRORS = {
    "int_iadd_float": lambda M: _iadd(M.tensor([1, 2]), 1.5),
    "int_add_float_tensor": lambda M: M.tensor([1, 2]).add_(M.tensor([1.5, 1.5])),
    "int_itruediv": lambda M: _itruediv(M.tensor([1, 2]), 2),
    "int_div_": lambda M: M.tensor([4, 2]).div_(2),
    "int_mul_float": lambda M: M.tensor([1, 2]).mul_(0.5),
    "bool_iadd_int": lambda M: _iadd(M.tensor([True, False]), 1),
}


@pytest.mark.parametrize("case", list(CAST_ERRORS))
def test_inplace_result_that_cannot_be_cast_raises(case, device):
    raises_like_torch(CAST_ERRORS[case], device, "can't be cast to the desired output type", "cast")


def test_int_iadd_float_names_both_dtypes(device):
    def program(M):
        x = M.tensor([1, 2])
        x += 1.5
    m_err, _ = raises_like_torch(program, device, "result type Float can't be cast to the desired "
                                 "output type Long", "cast")
    assert re.search(r"float", str(m_err), re.I) and re.search(r"long|int64", str(m_err), re.I)


DTYPE_KEPT = {  # (the tensor written to, the in-place op)
    "float32_iadd_float64": (lambda M: M.ones(3),
                             lambda M, t: _iadd(t, M.ones(3, dtype=M.float64) / 3)),
    "float32_mul_float64_0d": (lambda M: M.ones(3),
                               lambda M, t: t.mul_(M.tensor(0.1, dtype=M.float64))),
    "float32_add_int_tensor": (lambda M: M.ones(3), lambda M, t: t.add_(M.tensor([1, 2, 3]))),
    "float64_iadd_float32": (lambda M: M.ones(3, dtype=M.float64),
                             lambda M, t: _iadd(t, M.ones(3) / 3)),
    "int_imul_int": (lambda M: M.tensor([1, 2]), lambda M, t: _imul(t, 2)),
    "int_add_bool": (lambda M: M.tensor([1, 2]), lambda M, t: t.add_(M.tensor([True, False]))),
    "int_copy_float_truncates": (lambda M: M.tensor([1, 2, 3]),
                                 lambda M, t: t.copy_(M.tensor([1.7, -1.7, 0.2]))),
    "bool_copy_float": (lambda M: M.tensor([True, False]),
                        lambda M, t: t.copy_(M.tensor([0.0, 2.5]))),
    "int_fill_float": (lambda M: M.tensor([1, 2, 3]), lambda M, t: t.fill_(2.7)),
    "int_setitem_float": (lambda M: M.tensor([1, 2]), lambda M, t: _setitem(t, 0, 3.9)),
    "int_masked_fill_float": (lambda M: M.tensor([1, 2, 3]),
                              lambda M, t: t.masked_fill_(M.tensor([True, False, True]), 2.5)),
    "int_clamp_int": (lambda M: M.tensor([1, 2, 3]), lambda M, t: t.clamp_(0, 2)),
    "bool_masked_fill": (lambda M: M.tensor([True, False]),
                         lambda M, t: t.masked_fill_(M.tensor([True, True]), False)),
    "float32_copy_float64": (lambda M: M.zeros(2),
                             lambda M, t: t.copy_(M.tensor([0.1, 0.2], dtype=M.float64))),
}


@pytest.mark.parametrize("case", list(DTYPE_KEPT))
def test_inplace_keeps_the_dtype_of_the_written_tensor(case, device):
    make, op = DTYPE_KEPT[case]

    def program(M):
        t = make(M)
        op(M, t)
        return t, t.dtype, t._version
    same_as_torch(program, device)


SHAPE_ERRORS = {
    "add_": lambda M, t, o: t.add_(o),
    "mul_": lambda M, t, o: t.mul_(o),
    "iadd": lambda M, t, o: _iadd(t, o),
    "isub": lambda M, t, o: _isub(t, o),
    "copy_": lambda M, t, o: t.copy_(o),
}


@pytest.mark.parametrize("op", list(SHAPE_ERRORS))
def test_inplace_cannot_grow_the_output_by_broadcasting(op, device):
    def program(M):
        SHAPE_ERRORS[op](M, M.ones(3), M.ones(2, 3))
    raises_like_torch(program, device,
                      "output with shape [3] doesn't match the broadcast shape [2, 3]",
                      _shape(3), _shape(2, 3))


def test_setitem_value_too_big_raises(device):
    def program(M):
        t = M.ones(3)
        t[...] = M.ones(2, 3)
    raises_like_torch(program, device, "expand", _shape(2, 3))


@pytest.mark.parametrize("op", list(SHAPE_ERRORS))
def test_inplace_broadcasts_the_other_operand(op, device):
    def program(M):
        t = M.ones(2, 3)
        SHAPE_ERRORS[op](M, t, M.tensor([1.0, 2.0, 3.0]))
        return t
    same_as_torch(program, device)


@pytest.mark.parametrize("op", ["add_", "mul_", "iadd", "copy_", "clamp_"])
def test_inplace_on_an_expanded_view_raises(op, device):
    def program(M):
        x = M.ones(1, 3)
        INPLACE_OPS[op](M, x.expand(2, 3))
    raises_like_torch(program, device, "more than one element of the written-to tensor "
                      "refers to a single memory location",
                      r"more than one element|single memory|overlap")


@pytest.mark.parametrize("op", ["fill_", "zero_"])
def test_fill_on_an_expanded_view_is_allowed(op, device):
    def program(M):
        x = M.ones(1, 3)
        v = x.expand(2, 3)
        INPLACE_OPS[op](M, v)
        return x, v, x._version
    same_as_torch(program, device)


# --- gradients handed out are owned by whoever holds them -------------------------------

def test_gradient_stored_by_a_leaf_hook_is_never_changed(device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(g))
        (x * 2).sum().backward()
        (x * 3).sum().backward()
        return seen, x.grad, [g is x.grad for g in seen]
    same_as_torch(program, device)


def test_gradient_stored_by_a_non_leaf_hook_is_never_changed(device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        seen = []
        h = x * 2
        h.register_hook(lambda g: seen.append(g))
        y = (h * h).sum()
        y.backward(retain_graph=True)
        y.backward()
        return seen, x.grad
    same_as_torch(program, device)


def test_retained_grad_of_a_non_leaf_is_replaced_not_mutated(device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        h = x * 2
        h.retain_grad()
        y = (h * h).sum()
        y.backward(retain_graph=True)
        first = h.grad
        y.backward()
        return first, h.grad, first is h.grad, x.grad
    same_as_torch(program, device)


def test_leaf_grad_is_accumulated_in_place(device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = (x * x).sum()
        y.backward(retain_graph=True)
        first = x.grad
        y.backward()
        return first, x.grad, first is x.grad
    same_as_torch(program, device)


def test_assigned_grad_receives_the_accumulation(device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        mine = M.ones(3)
        x.grad = mine
        (x * 2).sum().backward()
        return mine, x.grad is mine
    same_as_torch(program, device)


# (PyTorch itself fails this for x.view(3): its AccumulateGrad takes the view of the
# caller's gradient as the leaf's .grad, so later accumulation writes into the caller's
# tensor; minigrad copies it)
@pytest.mark.parametrize("graph", ["identity", "scale", "sum_twice"])
def test_backward_never_changes_the_gradient_passed_in(graph, device):
    build = {"identity": lambda x: x + 0, "scale": lambda x: x * 2,
             "view": lambda x: x.view(3), "sum_twice": lambda x: x + x}[graph]

    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        seed = M.tensor([1.0, -1.0, 0.5])
        build(x).backward(seed)
        build(x).backward(seed)
        x.grad.mul_(10.0)
        return seed, x.grad
    same_as_torch(program, device)


def test_backward_through_a_view_never_changes_the_gradient_passed_in(device):
    x = mg.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    seed = mg.tensor([1.0, -1.0, 0.5], device=device)
    x.view(3).backward(seed)
    x.view(3).backward(seed)
    x.grad.mul_(10.0)
    np.testing.assert_array_equal(seed.numpy(), [1.0, -1.0, 0.5])
    np.testing.assert_array_equal(x.grad.numpy(), [20.0, -20.0, 10.0])


@pytest.mark.parametrize("graph", ["identity", "scale", "sum_twice"])
def test_mg_grad_never_changes_grad_outputs(graph, device):
    build = {"identity": lambda x: x + 0, "scale": lambda x: x * 2,
             "sum_twice": lambda x: x + x}[graph]

    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        seed = M.tensor([1.0, -1.0, 0.5])
        y = build(x)
        (g1,) = _grad(M, y, x, grad_outputs=seed, retain_graph=True)
        (g2,) = _grad(M, y, x, grad_outputs=seed)
        return seed, g1, g2
    same_as_torch(program, device)


@pytest.mark.parametrize("where", ["leaf", "non_leaf"])
def test_hook_changing_the_size_raises(where, device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        t = x if where == "leaf" else x * 2
        t.register_hook(lambda g: M.ones(2))
        (t * 2).sum().backward()
    raises_like_torch(program, device, "has changed the size of value", "hook", "size|shape")


def test_assigning_grad_of_the_wrong_size_raises(device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x.grad = M.ones(2)
    raises_like_torch(program, device, "attempting to assign a gradient of size '[2]' to a "
                      "tensor of size '[3]'", "grad", _shape(2), _shape(3))


@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_assigning_grad_of_the_wrong_dtype_raises(dtype, device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x.grad = M.ones(3, dtype=getattr(M, dtype))
    names = {"float64": r"float64|double", "int64": r"int64|long"}[dtype]
    raises_like_torch(program, device, "attempting to assign a gradient with dtype", "grad", names,
                      r"float32|float")


# --- load_state_dict changes parameters in place -----------------------------------------

def _linear(M, seed=0):
    M.manual_seed(seed)
    return _on_device(M, _nn(M).Linear(2, 2))


def _state(M):
    return {"weight": M.tensor([[1.0, 2.0], [3.0, 4.0]]), "bias": M.tensor([0.5, -0.5])}


def test_load_state_dict_after_forward_fails_backward(device):
    def program(M):
        m = _linear(M)
        x = M.tensor([[1.0, -1.0]], requires_grad=True)
        y = m(x)
        m.load_state_dict(_state(M))
        y.sum().backward()
    raises_version_error(program, device)


def test_load_state_dict_into_a_later_layer_fails_backward(device):
    def program(M):
        m1, m2 = _linear(M, 0), _linear(M, 1)
        y = m2(m1(M.tensor([[1.0, -1.0]])))
        m2.load_state_dict(_state(M))
        y.sum().backward()
    raises_version_error(program, device)


def test_load_state_dict_bumps_versions_and_keeps_identity(device):
    def program(M):
        m = _linear(M)
        params = list(m.parameters())
        arrays = [_numpy(p) for p in params]
        versions = [p._version for p in params]
        m.load_state_dict(_state(M))
        after = list(m.parameters())
        result = {"same": [p is q for p, q in zip(params, after)],
                  "version_steps": [p._version - v for p, v in zip(after, versions)],
                  "values": after, "leaf": [(p.is_leaf, p.requires_grad) for p in after]}
        if device == "cpu":  # the NumPy views taken before see the loaded values
            result["arrays"] = arrays
        return result
    same_as_torch(program, device)


def test_forward_after_load_state_dict_trains_normally(device):
    def program(M):
        m = _linear(M)
        m.load_state_dict(_state(M))
        x = M.tensor([[1.0, -1.0], [0.5, 2.0]])
        m(x).pow(2).sum().backward()
        return m.weight.grad, m.bias.grad
    same_as_torch(program, device)


# --- a write that reads part of the memory it writes ----------------------------------------

def _row(M):
    return M.arange(10.0)


def _square(M):
    return M.arange(9.0).reshape(3, 3)


PARTLY_OVERLAPPING = {
    "same tensor, shifted": lambda M: (lambda x: x[1:].add_(x[:-1]))(_row(M)),
    "sub_ with alpha": lambda M: (lambda x: x[1:].sub_(x[:-1], alpha=2))(_row(M)),
    "mul_": lambda M: (lambda x: x[1:].mul_(x[:-1]))(_row(M)),
    "div_ of rows": lambda M: (lambda x: x[1:].div_(x[:2]))(_square(M)),
    "copy_": lambda M: (lambda x: x[1:].copy_(x[:-1]))(_row(M)),
    "+= operator": lambda M: (lambda x: x[1:].__iadd__(x[:-1]))(_row(M)),
    "clamp_ with a tensor": lambda M: (lambda x: x[1:].clamp_(min=x[:-1]))(_row(M)),
    "addcmul_": lambda M: (lambda x: x[1:].addcmul_(x[:-1], x[:-1]))(_row(M)),
    "lerp_": lambda M: (lambda x: x[1:].lerp_(x[:-1], 0.5))(_row(M)),
    "a transpose of itself": lambda M: (lambda x: x.add_(x.t()))(_square(M)),
    "a flat view": lambda M: (lambda x: x.view(-1)[1:4].add_(x[0]))(_square(M)),
    "setitem": lambda M: (lambda x: x.__setitem__(slice(1, None), x[:-1]))(_row(M)),
}

NOT_PARTLY_OVERLAPPING = {
    "itself": lambda M: (lambda x: x.add_(x))(_row(M)),
    "the same row seen twice": lambda M: (lambda x: (x[0].add_(x[0]), x)[1])(_square(M)),
    "interleaved, not dense": lambda M: (lambda x: (x[::2].add_(x[1::2]), x)[1])(_row(M)),
    "another tensor's memory": lambda M: (lambda x, y: (x[1:].add_(y[:-1]), x)[1])(_row(M),
                                                                              _row(M)),
    "rows apart": lambda M: (lambda x: (x[1:3].add_(x[0]), x)[1])(_square(M)),
    "with alpha, rows apart": lambda M: (lambda x: (x[1:].sub_(x[0], alpha=0.5), x)[1])(
        _square(M)),
    "masked_fill_": lambda M: (lambda x: x.masked_fill_(x > 3, 0))(_square(M)),
}


@pytest.mark.parametrize("case", sorted(PARTLY_OVERLAPPING))
def test_a_write_reading_part_of_its_memory_raises_as_torch(device, case):
    if device != "cpu":
        pytest.skip("the overlap of host arrays is checked (a device's are not)")
    raises_like_torch(PARTLY_OVERLAPPING[case], device, "refer to a single memory location",
                      r"^\S+: unsupported operation", "refer to a single memory location",
                      r"clone\(\)")


@pytest.mark.parametrize("case", sorted(NOT_PARTLY_OVERLAPPING))
def test_a_write_reading_all_or_none_of_its_memory_runs_as_torch(device, case):
    same_as_torch(NOT_PARTLY_OVERLAPPING[case], device)
