"""The recorded graph as the user sees it, against PyTorch: ``grad_fn`` names and reprs,
``next_functions`` (with AccumulateGrad nodes for leaves) and saved values.

Each expression is written once and built with ``M = minigrad`` (its tensors made on the
tested device) and with ``M = torch`` (the CPU reference).
"""
import re

import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import On

torch = pytest.importorskip("torch")
LIBRARIES = pytest.mark.parametrize("lib", ["minigrad", "torch"])


def _library(lib, device):
    """The namespace a program is built with: minigrad on ``device``, or torch."""
    return torch if lib == "torch" else On(mg, device)


def _inputs(M):
    x = M.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    w = M.tensor([[0.5, 1.0, 2.0], [1.0, 1.5, 0.25]], requires_grad=True)
    c = M.tensor([[2.0, 2.0, 2.0], [3.0, 3.0, 3.0]])
    return x, w, c


def _build(expression, M):
    x, w, c = _inputs(M)
    return expression(M, x, w, c), (x, w, c)


def _type_name(node):
    return None if node is None else type(node).__name__


def _structure(node):
    """next_functions as (type name or None, index) pairs."""
    return [(_type_name(n), i) for n, i in node.next_functions]


def _gelu(M, x):
    return torch.nn.functional.gelu(x) if M is torch else x.gelu()


# Ops whose minigrad node is the same kind as torch's: the name must be torch's.
SAME_NAME = {
    "add": lambda M, x, w, c: x + w,
    "add_scalar": lambda M, x, w, c: x + 2,
    "add_constant": lambda M, x, w, c: x + c,
    "sub": lambda M, x, w, c: x - w,
    "mul": lambda M, x, w, c: x * w,
    "mul_scalar": lambda M, x, w, c: x * 2,
    "mul_constant": lambda M, x, w, c: x * c,
    "constant_mul": lambda M, x, w, c: c * x,
    "detached_mul": lambda M, x, w, c: x.detach() * w,
    "div": lambda M, x, w, c: x / w,
    "square": lambda M, x, w, c: x.square(),
    "clone": lambda M, x, w, c: x.clone(),
    "div_scalar": lambda M, x, w, c: x / 2,
    "neg": lambda M, x, w, c: -x,
    "pow_scalar": lambda M, x, w, c: x ** 2,
    "exp": lambda M, x, w, c: x.exp(),
    "log": lambda M, x, w, c: x.log(),
    "tanh": lambda M, x, w, c: x.tanh(),
    "sigmoid": lambda M, x, w, c: x.sigmoid(),
    "relu": lambda M, x, w, c: x.relu(),
    "sin": lambda M, x, w, c: x.sin(),
    "cos": lambda M, x, w, c: x.cos(),
    "sqrt": lambda M, x, w, c: x.sqrt(),
    "abs": lambda M, x, w, c: x.abs(),
    "erf": lambda M, x, w, c: x.erf(),
    "clamp": lambda M, x, w, c: x.clamp(1.5, 4.5),
    "maximum": lambda M, x, w, c: M.maximum(x, w),
    "sum": lambda M, x, w, c: x.sum(),
    "amax_dim": lambda M, x, w, c: x.amax(1),
    "logsumexp": lambda M, x, w, c: x.logsumexp(1),
    "softmax": lambda M, x, w, c: x.softmax(1),
    "log_softmax": lambda M, x, w, c: x.log_softmax(1),
    "view": lambda M, x, w, c: x.view(6),
    "reshape": lambda M, x, w, c: x.reshape(3, 2),
    "flatten": lambda M, x, w, c: x.flatten(),
    "permute": lambda M, x, w, c: x.permute(1, 0),
    "T": lambda M, x, w, c: x.T,
    "expand": lambda M, x, w, c: x.expand(2, 2, 3),
    "to_float64": lambda M, x, w, c: x.to(M.float64),
    "split": lambda M, x, w, c: x.split(1)[1],
    "chunk": lambda M, x, w, c: x.chunk(3, 1)[2],
    "cat": lambda M, x, w, c: M.cat([x, w]),
    "where": lambda M, x, w, c: M.where(c > 2, x, w),
    "gelu": lambda M, x, w, c: _gelu(M, x),
    # named by the call, as PyTorch's graph names them
    "sum_dim": lambda M, x, w, c: x.sum(0),
    "sum_dims_keepdim": lambda M, x, w, c: x.sum((0, 1), keepdim=True),
    "mean": lambda M, x, w, c: x.mean(),
    "mean_dim": lambda M, x, w, c: x.mean(1),
    "max_all": lambda M, x, w, c: x.max(),
    "min_all": lambda M, x, w, c: x.min(),
    "max_dim": lambda M, x, w, c: x.max(1)[0],
    "transpose": lambda M, x, w, c: x.transpose(0, 1),
    "transpose_same_dim": lambda M, x, w, c: x.transpose(1, 1),
    "t": lambda M, x, w, c: x.t(),
    "matmul": lambda M, x, w, c: x @ w.T,
    "mm": lambda M, x, w, c: x.mm(w.T),
    "unsqueeze": lambda M, x, w, c: x.unsqueeze(0),
    "unsqueeze_last": lambda M, x, w, c: x.unsqueeze(-1),
    "squeeze": lambda M, x, w, c: x[None].squeeze(),
    "squeeze_dim": lambda M, x, w, c: x[None].squeeze(0),
    "squeeze_dim_not_1": lambda M, x, w, c: x.squeeze(1),
    "squeeze_dims": lambda M, x, w, c: x[None, None].squeeze((0, 1)),
    "select": lambda M, x, w, c: x[0],
    "select_last_dim": lambda M, x, w, c: x[:, 1],
    "select_after_ellipsis": lambda M, x, w, c: x[..., -1],
    "slice": lambda M, x, w, c: x[1:],
    "whole_slice": lambda M, x, w, c: x[:],
    "step_slice": lambda M, x, w, c: x[::2],
    "select_then_whole_slice": lambda M, x, w, c: x[0, :],
    "whole_slices": lambda M, x, w, c: x[0:2, :],
    "ellipsis": lambda M, x, w, c: x[...],
    "new_axis": lambda M, x, w, c: x[None],
    "advanced_index": lambda M, x, w, c: x[[1, 0]],
    "stack": lambda M, x, w, c: M.stack([x, w]),
    "stack_last_dim": lambda M, x, w, c: M.stack([x, w], dim=-1),
    "pow_tensor": lambda M, x, w, c: x ** w,
    "masked_fill": lambda M, x, w, c: x.masked_fill(c > 2, 0.0),
    "number_times": lambda M, x, w, c: 2 * x,
    "number_plus": lambda M, x, w, c: 2 + x,
    "var": lambda M, x, w, c: x.var(),
    "var_dim": lambda M, x, w, c: x.var(1, keepdim=True),
    "std": lambda M, x, w, c: x.std(),
    "std_dim_biased": lambda M, x, w, c: x.std(0, correction=0),
    "sort": lambda M, x, w, c: x.sort(1)[0],
    "sort_descending": lambda M, x, w, c: x.sort(0, descending=True)[0],
    "topk": lambda M, x, w, c: x.topk(2)[0],
    "gather": lambda M, x, w, c: x.gather(1, M.tensor([[0, 2, 1], [1, 0, 0]])),
    "index_select": lambda M, x, w, c: x.index_select(1, M.tensor([2, 0])),
    "rsqrt": lambda M, x, w, c: x.rsqrt(),
    "tril": lambda M, x, w, c: x.tril(),
    "triu": lambda M, x, w, c: x.triu(1),
    "repeat": lambda M, x, w, c: x.repeat(2, 1, 3),
    "repeat_ones": lambda M, x, w, c: x.repeat(1, 1),
    "tile": lambda M, x, w, c: x.tile((2,)),
    "split_sizes": lambda M, x, w, c: x.split([1, 2], 1)[1],
    "div_floor": lambda M, x, w, c: M.div(x, w, rounding_mode="floor"),
    "div_trunc_scalar": lambda M, x, w, c: M.div(x, 2, rounding_mode="trunc"),
    "dot": lambda M, x, w, c: x[0] @ w[1],
    "mv": lambda M, x, w, c: x @ w[0],
    "vector_matmul": lambda M, x, w, c: x[:, 0] @ w,
    "bmm": lambda M, x, w, c: x[None].bmm(w.T[None]),
    "reshape_copy": lambda M, x, w, c: x.T.reshape(6),
    "reshape_alias": lambda M, x, w, c: x.T.reshape(3, 2),
    "flatten_copy": lambda M, x, w, c: x.T.flatten(),
    "remainder": lambda M, x, w, c: x % w,
    "remainder_scalar": lambda M, x, w, c: x % 2.0,
    "remainder_constant": lambda M, x, w, c: c % x,
    "number_remainder": lambda M, x, w, c: 2.0 % x,
    "clamp_max_tensor": lambda M, x, w, c: x.clamp(max=w),
    "clamp_min_tensor": lambda M, x, w, c: x.clamp(min=w),
    "clamp_tensors": lambda M, x, w, c: x.clamp(min=c - 1, max=w),
    "clamp_max_constant": lambda M, x, w, c: x.clamp(max=c),
    "where_number": lambda M, x, w, c: M.where(c > 2, x, 0.0),
    "where_number_first": lambda M, x, w, c: M.where(c > 2, 0.5, x),
    "sum_dtype": lambda M, x, w, c: x.sum(dtype=M.float64),
    "sum_dim_dtype": lambda M, x, w, c: x.sum(0, dtype=M.float64),
    "norm_1": lambda M, x, w, c: x.norm(1),
    "norm_1_dim": lambda M, x, w, c: x.norm(1, 1),
    "norm_inf": lambda M, x, w, c: x.norm(float("inf")),
    "norm_inf_dim": lambda M, x, w, c: x.norm(float("inf"), 0, keepdim=True),
    "norm_minus_inf": lambda M, x, w, c: x.norm(float("-inf"), 1),
    "norm_0": lambda M, x, w, c: x.norm(0),
}


# Ops that minigrad builds from other ops, or with one node where torch has several
# kinds: the node may be torch's, or the documented alternative listed here.
OTHER_NAME = {
    # an index of several parts: one node where PyTorch has one per part, named as its last
    "select_after_slice": (lambda M, x, w, c: x[1:, 0], set()),
    "slice_after_select": (lambda M, x, w, c: x[0, 1:], set()),
    "new_axis_after_select": (lambda M, x, w, c: x[1, None], set()),
    "select_after_new_axis": (lambda M, x, w, c: x[None, 1], set()),
    "rpow": (lambda M, x, w, c: 2 ** x, set()),
    "rsub": (lambda M, x, w, c: 1 - x, set()),
    "advanced_index": (lambda M, x, w, c: x[[1, 0]], set()),
}


def _torch_names(expression):
    y, _ = _build(expression, torch)
    return type(y.grad_fn).__name__, y.grad_fn.name()


@pytest.mark.parametrize("op", list(SAME_NAME))
def test_grad_fn_is_named_as_in_torch(op, device):
    type_name, name = _torch_names(SAME_NAME[op])
    y, _ = _build(SAME_NAME[op], On(mg, device))
    assert type(y.grad_fn).__name__ == type_name
    assert y.grad_fn.name() == name


@pytest.mark.parametrize("op", list(OTHER_NAME))
def test_grad_fn_of_composite_ops_has_a_torch_style_name(op, device):
    expression, alternatives = OTHER_NAME[op]
    type_name, _ = _torch_names(expression)
    y, _ = _build(expression, On(mg, device))
    got = type(y.grad_fn).__name__
    assert y.grad_fn.name() == got
    assert got in alternatives | {type_name}


@pytest.mark.parametrize("op", ["mul", "add_scalar", "sum", "exp", "view", "to_float64"])
def test_repr_names_the_grad_fn(op, device):
    def grad_fn_part(y):
        return re.search(r"grad_fn=<\w+>", repr(y)).group(0)
    want = grad_fn_part(_build(SAME_NAME[op], torch)[0])
    assert grad_fn_part(_build(SAME_NAME[op], On(mg, device))[0]) == want


def test_repr_of_leaves_and_constants(device):
    for M in (On(mg, device), torch):
        x, _, c = _inputs(M)
        assert "requires_grad=True" in repr(x) and "grad_fn" not in repr(x)
        assert "requires_grad" not in repr(c) and "grad_fn" not in repr(c)


@pytest.mark.parametrize("op", list(SAME_NAME))
def test_next_functions_have_torch_structure(op, device):
    want = _structure(_build(SAME_NAME[op], torch)[0].grad_fn)
    y, _ = _build(SAME_NAME[op], On(mg, device))
    nodes = y.grad_fn.next_functions
    assert isinstance(nodes, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in nodes)
    assert _structure(y.grad_fn) == want


@LIBRARIES
def test_accumulate_grad_holds_the_leaf(lib, device):
    M = _library(lib, device)
    x, w, c = _inputs(M)
    (acc, i), (nothing, j) = (x * c).grad_fn.next_functions
    assert type(acc).__name__ == "AccumulateGrad" and acc.variable is x and i == 0
    assert nothing is None and j == 0
    (a, _), (b, _) = (x * w).grad_fn.next_functions
    assert a.variable is x and b.variable is w


@LIBRARIES
def test_a_leaf_used_twice_has_one_accumulate_grad(lib, device):
    M = _library(lib, device)
    x, _, _ = _inputs(M)
    (a, _), (b, _) = (x * x).grad_fn.next_functions
    assert a is b


@LIBRARIES
def test_next_functions_chain_through_the_graph(lib, device):
    M = _library(lib, device)
    x, w, _ = _inputs(M)
    h = x * w
    y = h.exp().sum()
    (exp_node, i), = y.grad_fn.next_functions
    assert type(exp_node).__name__ == "ExpBackward0" and i == 0
    (mul_node, _), = exp_node.next_functions
    assert mul_node is h.grad_fn


@LIBRARIES
def test_outputs_of_one_node_are_told_apart_by_index(lib, device):
    M = _library(lib, device)
    x, _, _ = _inputs(M)
    a, b = x.split(1)
    (na, ia), (nb, ib) = (a + b).grad_fn.next_functions
    assert na is nb and type(na).__name__ == "SplitBackward0" and (ia, ib) == (0, 1)


@LIBRARIES
def test_no_grad_fn_without_a_graph(lib, device):
    M = _library(lib, device)
    x, _, c = _inputs(M)
    with M.no_grad():
        y = x * 2
    for t in (x, c, y, (x * 2).detach(), c * 2):
        assert t.grad_fn is None
    assert x.is_leaf and y.is_leaf and not (x * 2).is_leaf


# --- the node left by an in-place operation ----------------------------------------------

def _setitem(t, index, value):
    t[index] = value


def _iadd(t, value):
    t += value
    return t


INPLACE_NODES = {
    "add_": lambda M, b, w: b.add_(w),
    "sub_": lambda M, b, w: b.sub_(w),
    "mul_": lambda M, b, w: b.mul_(w),
    "div_": lambda M, b, w: b.div_(w),
    "iadd": lambda M, b, w: _iadd(b, w),
    "clamp_": lambda M, b, w: b.clamp_(1.5, 4.5),
    "masked_fill_": lambda M, b, w: b.masked_fill_(w > 1, 0.0),
    "zero_": lambda M, b, w: b.zero_(),
    "copy_": lambda M, b, w: b.copy_(w),
    "setitem": lambda M, b, w: _setitem(b, 0, w[1]),
    "view_add_": lambda M, b, w: b[0].add_(w[1]),
}


def _inplace_graph(op, M):
    x, w, _ = _inputs(M)
    b = x * 1
    INPLACE_NODES[op](M, b, w)
    return b


# Where minigrad records an in-place op with a node of another name: masked_fill is a
# where, and fill_/zero_ are one overwrite op (torch's copy_ node)
INPLACE_OTHER_NAME = {"zero_": "CopyBackwards"}


@pytest.mark.parametrize("op", list(INPLACE_NODES))
def test_inplace_op_replaces_the_grad_fn_as_in_torch(op, device):
    want = _inplace_graph(op, torch).grad_fn
    got = _inplace_graph(op, On(mg, device)).grad_fn
    assert _type_name(got) in (_type_name(want), INPLACE_OTHER_NAME.get(op))
    if _type_name(want) == "CopySlices":
        # the base's old node comes first in both; torch's second edge is the view op's
        # input, minigrad's the node of the new value written through the view
        assert _structure(got)[0] == _structure(want)[0]
        assert len(_structure(got)) == len(_structure(want))
    elif op not in INPLACE_OTHER_NAME:
        assert _structure(got) == _structure(want)


def test_write_into_a_buffer_makes_copy_slices(device):
    def build(M):
        _, w, _ = _inputs(M)
        buf = M.zeros(3)
        buf[1:] = w[0, 1:] * 3
        return buf.grad_fn
    want, got = build(torch), build(On(mg, device))
    assert _type_name(got) == _type_name(want) == "CopySlices"
    assert _structure(got) == _structure(want)


# --- saved values --------------------------------------------------------------------------

def _saved(M, attr, expression):
    x, w, c = _inputs(M)
    y = expression(M, x, w, c)
    value = getattr(y.grad_fn, attr)
    return value, (x, w, c, y)


SAVED = [
    ("mul_self", "_saved_self", lambda M, x, w, c: x * w),
    ("mul_other", "_saved_other", lambda M, x, w, c: x * w),
    ("mul_constant_other", "_saved_other", lambda M, x, w, c: x * c),
    ("div_self", "_saved_self", lambda M, x, w, c: x / w),
    ("div_other", "_saved_other", lambda M, x, w, c: x / w),
    ("exp_result", "_saved_result", lambda M, x, w, c: x.exp()),
    ("tanh_result", "_saved_result", lambda M, x, w, c: x.tanh()),
    ("log_self", "_saved_self", lambda M, x, w, c: x.log()),
    ("pow_self", "_saved_self", lambda M, x, w, c: x ** 2),
    ("pow_exponent", "_saved_exponent", lambda M, x, w, c: x ** 2),
]


def _value(v):
    if isinstance(v, (mg.Tensor, torch.Tensor)):
        return v.detach().numpy()
    return v


@pytest.mark.parametrize("name,attr,expression", SAVED, ids=[s[0] for s in SAVED])
def test_saved_values_are_readable_as_in_torch(name, attr, expression, device):
    want, _ = _saved(torch, attr, expression)
    got, _ = _saved(On(mg, device), attr, expression)
    np.testing.assert_allclose(_value(got), _value(want), rtol=1e-6)


@LIBRARIES
def test_saved_leaf_is_the_leaf_itself(lib, device):
    M = _library(lib, device)
    x, w, _ = _inputs(M)
    y = x * w
    assert y.grad_fn._saved_self is x and y.grad_fn._saved_other is w


@LIBRARIES
def test_unsaved_input_reads_as_none(lib, device):
    M = _library(lib, device)
    x, _, c = _inputs(M)
    assert (x * c).grad_fn._saved_self is None  # x's value is not needed: c has no grad


def test_saved_values_are_gone_after_backward(device):
    def program(M):
        x, w, _ = _inputs(M)
        y = x * w
        y.sum().backward()
        return y.grad_fn._saved_self
    for M in (torch, On(mg, device)):
        with pytest.raises(RuntimeError, match=r"(?i)freed|released") as err:
            program(M)
        assert re.search(r"retain_graph", str(err.value))


def test_held_bytes_tells_buffers_apart_whose_base_is_made_on_each_read(strict):
    """Buffers are told apart by identity. An array module may hand out a new object for an
    array's ``.base`` on each read (the strict stand-in keeps none alive), so the count must
    hold each buffer while it counts: three views of three buffers are three buffers, two
    views of one are one."""
    from types import SimpleNamespace
    from minigrad.viz.graph import held_bytes
    bases = [strict.zeros(16, dtype=np.float32) for _ in range(3)]
    views = [b[:8] for b in bases] + [bases[0][8:]]
    del bases  # only the views keep their buffers now
    nodes = [SimpleNamespace(checkpoint=None, edges=(), saved=[SimpleNamespace(array=v)])
             for v in views]
    total, buffers, leaf = held_bytes(nodes)
    assert (total, buffers, leaf) == (3 * 64, 3, 0)
