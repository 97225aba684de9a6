"""Corners of the tensor API where minigrad once differed from torch: ``var``/``std`` with a
lone bool (PyTorch's ``var(unbiased)``) and without degrees of freedom, ``dim`` given
twice (with its alias ``axis``), ``prod(keepdim=True)`` without a dim, ``format`` of a
tensor, comparisons with a string, ``~`` of floats, ``view(dtype)``, ``flatten`` of nothing
to flatten, ragged nested lists, ``F.layer_norm``'s normalized_shape, ``mg.grad`` of a
non-leaf input (the graph behind it stays whole) and a user Function's mistakes.

Every program is written once against ``M`` (minigrad on the tested device, or torch)
and the two results are compared at run time.
"""
import warnings

import numpy as np
import pytest

import minigrad as mg
from tests.test_torch_parity_ops_audit import assert_as_torch
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

ROWS = [[1.0, 2.0, 4.0], [3.0, 5.0, 9.0]]


def _grads(program):
    """``program(M, x)`` on a float64 leaf x of ROWS, and x's gradient of its sum."""
    def run(M):
        x = M.tensor(ROWS, dtype=M.float64, requires_grad=True)
        out = program(M, x)
        out.sum().backward()
        return out.detach(), x.grad
    return run


@needs_torch
@pytest.mark.parametrize("call", [
    lambda M, x: x.var(False), lambda M, x: x.var(True), lambda M, x: x.std(False),
    lambda M, x: x.std(True), lambda M, x: M.var(x, False), lambda M, x: M.std(x, True),
    lambda M, x: x[0].var(True), lambda M, x: x.var(0, True), lambda M, x: x.std(1, False),
    lambda M, x: x.var(1, False, True)],
    ids=["var(False)", "var(True)", "std(False)", "std(True)", "M.var(x, False)",
         "M.std(x, True)", "1-d var(True)", "var(0, True)", "std(1, False)",
         "var(1, False, True)"])
def test_a_lone_bool_is_unbiased_not_a_dim(device, call):
    assert_as_torch(_grads(call), device)


@needs_torch
@pytest.mark.parametrize("call", [
    lambda M, x: x[0, :2].var(correction=5), lambda M, x: x[0, :2].var(correction=2),
    lambda M, x: x[0, :2].std(correction=5), lambda M, x: x.var(correction=6),
    lambda M, x: x.std(correction=7, keepdim=True), lambda M, x: (x * 0).var(correction=6),
    lambda M, x: x[0, 0].var(), lambda M, x: x[0, 0].std(correction=0),
    lambda M, x: x[0, :2].var(dim=0, correction=5), lambda M, x: x.var(dim=1, correction=5),
    lambda M, x: x.std(dim=1, correction=3), lambda M, x: x.var(dim=(0, 1), correction=8)],
    ids=["n 2 c 5", "n 2 c 2", "std n 2 c 5", "n 6 c 6", "std keepdim", "constant",
         "0-d", "0-d std c 0", "dim 0 c 5", "dim 1 c 5", "std dim 1 c 3", "both dims c 8"])
def test_no_degrees_of_freedom_as_torch(device, call):
    """Without degrees of freedom the variance is inf (NaN for a constant); its gradient
    is inf (NaN where x is its mean) over the whole tensor with no dim given, and
    2 (x - mean) / (n - correction) with a dim, as PyTorch's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (torch: degrees of freedom <= 0)
        assert_as_torch(_grads(call), device)


@needs_torch
@pytest.mark.parametrize("program", [
    lambda M: M.ones(2, 3).sum(dim=0, axis=1), lambda M: M.ones(2, 3).mean(dim=0, axis=0),
    lambda M: M.ones(2, 3).prod(keepdim=True), lambda M: M.ones(2, 3).prod(0, axis=0),
    lambda M: M.ones(2, 3).var(dim=0, axis=1)],
    ids=["sum", "mean", "prod keepdim", "prod", "var"])
def test_dim_twice_or_keepdim_without_dim_raises_as_torch(device, program):
    raises_as_torch(program, TypeError, device)


@needs_torch
def test_axis_alone_is_dim(device):
    assert_as_torch(lambda M: M.arange(6.0).reshape(2, 3).sum(axis=1), device)
    assert_as_torch(lambda M: M.arange(6.0).reshape(2, 3).prod(axis=1), device)


@needs_torch
def test_format_of_a_tensor_as_torch(device):
    for M in (torch, On(mg, device)):
        assert f"{M.tensor(2.5):.2f}" == "2.50"
        assert f"{M.tensor(3):>4}" == "   3"
        assert f"{M.tensor([2.5, 1.0])}" == str(M.tensor([2.5, 1.0]))
    raises_as_torch(lambda M: f"{M.tensor([2.5]):.2f}", TypeError, device)


@needs_torch
def test_comparison_with_a_string_as_torch(device):
    for M in (torch, On(mg, device)):
        x = M.tensor([1.0, 2.0])
        assert (x == "a") is False and (x != "a") is True
        assert (x == None) is False  # noqa: E711  (as torch: no elementwise comparison)
    raises_as_torch(lambda M: M.tensor([1.0]) < "a", TypeError, device)


@needs_torch
def test_invert_of_floats_raises_as_torch(device):
    message = raises_as_torch(lambda M: ~M.tensor([1.0, 2.0]), TypeError, device)
    assert "float32" in message
    assert_as_torch(lambda M: ~M.tensor([1, -2]), device)
    assert_as_torch(lambda M: ~M.tensor([True, False]), device)


@needs_torch
@pytest.mark.parametrize("source, target", [
    ("float32", "int32"), ("float32", "int16"), ("float32", "float64"), ("float64", "uint8"),
    ("int64", "float64"), ("bool", "uint8"), ("uint8", "bool"), ("float32", "float32"),
    ("int32", "float32")])
def test_view_as_another_dtype_as_torch(device, source, target):
    """The same bytes read as another dtype: the last dim scales with the element size."""
    def program(M):
        x = M.arange(8).reshape(2, 4).to(getattr(M, source))
        if source == "bool":
            x = M.tensor([[True, False, True, True]])
        return x.view(getattr(M, target))
    assert_as_torch(program, device)


@needs_torch
def test_view_as_another_dtype_shares_memory_and_has_no_gradient(device):
    for M in (torch, On(mg, device)):
        x = M.tensor([1, 2, 3], dtype=M.int32)
        v = x.view(M.float32)
        v[0] = 0.5
        assert x.tolist() == [1056964608, 2, 3]
        leaf = M.tensor([1.0, 2.0], requires_grad=True)
        assert not leaf.view(M.int32).requires_grad
        assert not leaf.view(M.float32).requires_grad and leaf.view(M.float32).grad_fn is None


@needs_torch
@pytest.mark.parametrize("program", [
    lambda M: M.arange(6.0).reshape(2, 3).view(M.float64),   # last dim 3: not divisible
    lambda M: M.arange(6.0).reshape(2, 3).t().view(M.int16),  # last dim strided
    lambda M: M.zeros(()).view(M.int16)],                     # 0-d, another element size
    ids=["size", "stride", "0-d"])
def test_view_as_another_dtype_refuses_as_torch(device, program):
    raises_as_torch(program, RuntimeError, device)


@needs_torch
def test_flatten_of_nothing_to_flatten_is_the_tensor(device):
    for M in (torch, On(mg, device)):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        assert x.flatten() is x and M.flatten(x) is x
        y = M.ones(2, 3)
        assert y.flatten(1, 1) is y and y.flatten(-1, 1) is y
        assert y.flatten(0, 1).shape == (6,)
        assert M.zeros(()).flatten().shape == (1,)


@needs_torch
@pytest.mark.parametrize("data, kind", [
    ([[1], [2, 3]], ValueError), ([[1, 2], [3]], ValueError),
    ([[[1, 2], [3, 4]], [[1, 2], [3]]], ValueError), ([1, [2]], TypeError),
    ([[1], 2], TypeError)], ids=["short first", "short last", "deeper", "number first",
                                 "list first"])
def test_ragged_lists_raise_as_torch(device, data, kind):
    message = raises_as_torch(lambda M: M.tensor(data), kind, device)
    assert message.startswith("tensor:")
    if kind is ValueError:
        assert message == "tensor: " + str(pytest.raises(ValueError, torch.tensor, data).value)


@needs_torch
def test_layer_norm_takes_a_tuple_as_torch(device):
    raises_as_torch(lambda M: M.nn.functional.layer_norm(M.ones(2, 5), 5), TypeError, device)
    assert_as_torch(lambda M: M.nn.functional.layer_norm(M.ones(2, 5) * M.arange(5.0), [5]),
                    device)
    assert_as_torch(lambda M: M.nn.LayerNorm(5)(M.arange(10.0).reshape(2, 5)).detach(), device)


# --- mg.grad of a non-leaf input: the graph behind it stays whole ------------------------------

@needs_torch
def test_grad_of_a_non_leaf_leaves_the_graph_behind_it(device):
    """mg.grad stops at a non-leaf input: the nodes behind it neither run nor release their
    saved tensors, so a later backward through them works, as in PyTorch."""
    def program(M):
        x = M.tensor([1.0, 2.0], dtype=M.float64, requires_grad=True)
        y = x.exp()
        first = M.autograd.grad((y * 2).sum(), y)
        second = M.autograd.grad((y * 3).sum(), x)
        y.sum().backward()
        return first[0], second[0], x.grad
    assert_as_torch(program, device)


@needs_torch
def test_grad_of_a_non_leaf_and_what_lies_behind_it(device):
    """Inputs at and behind a non-leaf: the node runs for the one behind it (and releases
    its saved tensors, retain_graph being False)."""
    def program(M):
        x = M.tensor([1.0, 2.0], dtype=M.float64, requires_grad=True)
        y = x.sin()
        z = y * y
        gy, gx = M.autograd.grad(z.sum(), (y, x))
        return gy, gx
    assert_as_torch(program, device)
    for M in (torch, On(mg, device)):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        M.autograd.grad((y * 2).sum(), (y, x))
        with pytest.raises(RuntimeError):
            M.autograd.grad((y * 2).sum(), x)  # ExpBackward0 ran and released its result


@needs_torch
def test_grad_of_a_hooked_non_leaf_twice(device):
    def program(M):
        x = M.tensor([1.0, 2.0], dtype=M.float64, requires_grad=True)
        y = x * x
        y.register_hook(lambda g: g * 10)
        a = M.autograd.grad((y * 3).sum(), y)[0]
        b = M.autograd.grad((y * 3).sum(), x)[0]
        return a, b
    assert_as_torch(program, device)


# --- a user Function's mistakes --------------------------------------------------------------

def _function(M, forward, backward=None):
    """A Function subclass of ``M`` with these static methods (no backward when None)."""
    body = {"forward": staticmethod(forward)}
    if backward is not None:
        body["backward"] = staticmethod(backward)
    return type("Op", (M.autograd.Function,), body)


@needs_torch
def test_function_without_backward_says_so(device):
    def program(M):
        op = _function(M, lambda ctx, a: a * 2)
        op.apply(M.tensor([1.0, 2.0], requires_grad=True)).sum().backward()
    message = raises_as_torch(program, NotImplementedError, device)
    assert "backward" in message


@needs_torch
def test_function_backward_returning_no_tensor_raises_as_torch(device):
    def program(M):
        op = _function(M, lambda ctx, a: a * 2, lambda ctx, g: "not a tensor")
        op.apply(M.tensor([1.0, 2.0], requires_grad=True)).sum().backward()
    message = raises_as_torch(program, RuntimeError, device)
    assert "str" in message and "input 0" in message


@needs_torch
def test_function_saves_only_tensors_as_torch(device):
    def forward(ctx, a):
        ctx.save_for_backward(a, None, 3.0)
        return a * 2

    def program(M):
        _function(M, forward, lambda ctx, g: g).apply(M.tensor([1.0], requires_grad=True))
    message = raises_as_torch(program, TypeError, device)
    assert "argument 2" in message and "float" in message


def test_function_may_save_none_and_tensors(device):
    def forward(ctx, a):
        ctx.save_for_backward(a, None)
        return a * 2

    def backward(ctx, g):
        a, nothing = ctx.saved_tensors
        assert nothing is None
        return g * 2 + a * 0
    x = mg.tensor([1.0, 2.0], requires_grad=True, device=device)
    _function(mg, forward, backward).apply(x).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


# --- PyTorch's keyword names ---------------------------------------------------------------

KEYWORD_FORMS = {
    "split(split_size=)": lambda M, x: x.split(split_size=2, dim=1),
    "M.split(split_size_or_sections=)": lambda M, x: M.split(x, split_size_or_sections=[1, 2],
                                                             dim=1),
    "M.split(tensor=)": lambda M, x: M.split(tensor=x, split_size_or_sections=2),
    "permute(dims=)": lambda M, x: x.permute(dims=(1, 0)),
    "reshape(shape=)": lambda M, x: x.reshape(shape=(3, 2)),
    "view(size=)": lambda M, x: x.view(size=(3, 2)),
    "view(dtype=)": lambda M, x: x.view(dtype=M.int32),
    "expand(size=)": lambda M, x: x[None].expand(size=(2, 2, 3)),
    "repeat(repeats=)": lambda M, x: x.repeat(repeats=(1, 2)),
    "squeeze(axis=)": lambda M, x: x[None].squeeze(axis=0),
    "unsqueeze(axis=)": lambda M, x: x.unsqueeze(axis=0),
    "M.cat(axis=)": lambda M, x: M.cat([x, x], axis=1),
    "M.stack(axis=)": lambda M, x: M.stack([x, x], axis=1),
    "M.cat(tensors=, dim=)": lambda M, x: M.cat(tensors=[x, x], dim=1),
    "M.exp(input=)": lambda M, x: M.exp(input=x),
    "M.sum(input=, dim=)": lambda M, x: M.sum(input=x, dim=1),
    "M.max(input=, dim=)": lambda M, x: M.max(input=x, dim=1)[0],
    "M.matmul(input=, other=)": lambda M, x: M.matmul(input=x, other=x.t()),
    "M.reshape(input=, shape=)": lambda M, x: M.reshape(input=x, shape=(3, 2)),
    "M.permute(input=, dims=)": lambda M, x: M.permute(input=x, dims=(1, 0)),
    "M.softmax(input=, dim=)": lambda M, x: M.softmax(input=x, dim=1),
    "M.clamp(input=, min=)": lambda M, x: M.clamp(input=x, min=1.0),
    "M.gather(input=, dim=, index=)": lambda M, x: M.gather(input=x, dim=1,
                                                           index=M.tensor([[0], [1]])),
    "M.pow(input=, exponent=)": lambda M, x: M.pow(input=x, exponent=2),
    "M.pow(2, x)": lambda M, x: M.pow(2, x),
    "M.add(input=, other=, alpha=)": lambda M, x: M.add(input=x, other=x, alpha=2),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(KEYWORD_FORMS))
def test_keyword_forms_as_torch(device, name):
    """The same results (exp and softmax come from another libm: to the last bit or so)."""
    assert_as_torch(lambda M: KEYWORD_FORMS[name](M, M.arange(6.0).reshape(2, 3)), device,
                    exact=False)


@needs_torch
@pytest.mark.parametrize("program", [
    lambda M: M.exp(M.ones(2), input=M.ones(2)), lambda M: M.ones(2, 3).reshape(3, shape=(3, 2)),
    lambda M: M.ones(2).unsqueeze(), lambda M: M.add(M.ones(2))],
    ids=["input twice", "shape twice", "no dim", "no other"])
def test_keyword_forms_refuse_as_torch(device, program):
    raises_as_torch(program, TypeError, device)


# --- transforms and graph nodes --------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("cotangent", [
    lambda M: (M.ones(2),), lambda M: [M.ones(2)], lambda M: {"a": M.ones(2)}],
    ids=["tuple", "list", "dict"])
def test_vjp_refuses_cotangents_of_another_structure(device, cotangent):
    def program(M):
        _, vjp_fn = M.func.vjp(lambda x: x ** 2, M.tensor([1.0, 2.0]))
        return vjp_fn(cotangent(M))
    message = raises_as_torch(program, RuntimeError, device)
    assert "primal output: *" in message


@needs_torch
def test_vjp_of_nested_outputs_as_torch(device):
    def program(M):
        _, vjp_fn = M.func.vjp(lambda x: (x ** 2, {"a": x * 3}), M.tensor([1.0, 2.0]))
        return vjp_fn((M.ones(2), {"a": M.ones(2)}))
    assert_as_torch(program, device)
    raises_as_torch(lambda M: M.func.vjp(lambda x: (x ** 2, {"a": x}), M.ones(2))[1](
        (M.ones(2), {"b": M.ones(2)})), RuntimeError, device)


@needs_torch
def test_vmap_keeps_a_named_tuple(device):
    for M in (torch, On(mg, device)):
        result = M.func.vmap(lambda x: x.max(0))(M.arange(24.0).reshape(2, 3, 4))
        assert result.values.shape == result.indices.shape == (2, 4)
        assert result.values.tolist() == result[0].tolist()


@needs_torch
def test_gradcheck_refuses_a_bool_output_and_skips_integers(device):
    for M in (torch, On(mg, device)):
        x = M.tensor([1.0, -2.0], dtype=M.float64, requires_grad=True)
        with pytest.raises(RuntimeError):
            M.autograd.gradcheck(lambda a: a > 0, (x,))
        with pytest.raises(RuntimeError):
            M.autograd.gradcheck(lambda a: (a * 2, a > 0), (x,))
        assert M.autograd.gradcheck(lambda a: (a * 2).long(), (x,))


@needs_torch
def test_grad_with_batched_grad_outputs_as_torch(device):
    def program(M):
        x = M.tensor([1.0, 2.0], dtype=M.float64, requires_grad=True)
        y = M.tensor([1.0, 2.0, 3.0], dtype=M.float64, requires_grad=True)
        out = (x[:, None] * y[None, :] ** 2).sum(1)
        jx, jy = M.autograd.grad(out, (x, y), M.eye(2, dtype=M.float64), is_grads_batched=True)
        cube, = M.autograd.grad(x ** 3, x, M.eye(2, dtype=M.float64), is_grads_batched=True,
                                create_graph=True)
        second, = M.autograd.grad(cube.sum(), x)
        return jx, jy, cube.detach(), second
    assert_as_torch(program, device)


@needs_torch
@pytest.mark.parametrize("make", [
    lambda M, x: x * 3, lambda M, x: x * x, lambda M, x: x.exp(), lambda M, x: 1 - x,
    lambda M, x: x.sum(), lambda M, x: x[1:], lambda M, x: M.where(x > 1, x, 0.0)],
    ids=["x * 3", "x * x", "exp", "1 - x", "sum", "slice", "where"])
def test_calling_a_grad_fn_runs_its_backward_as_torch(device, make):
    def program(M):
        x = M.tensor([1.0, 2.0], dtype=M.float64, requires_grad=True)
        y = make(M, x)
        grads = y.grad_fn(M.ones(y.shape, dtype=M.float64))
        y.sum().backward()  # (its saved tensors are still there)
        grads = grads if isinstance(grads, tuple) else (grads,)
        return tuple(g.detach() for g in grads if g is not None) + (x.grad,)
    assert_as_torch(program, device)


@needs_torch
def test_next_functions_of_number_minus_tensor_as_torch(device):
    for M in (torch, On(mg, device)):
        x = M.tensor([1.0, 2.0], requires_grad=True)
        (node, index), = (1 - x).grad_fn.next_functions
        assert type(node).__name__ == "AccumulateGrad" and index == 0
        y = M.add(1, x)  # (alpha 1: no product node)
        assert all(n is None or type(n).__name__ == "AccumulateGrad"
                   for n, _ in y.grad_fn.next_functions)


@needs_torch
def test_grad_added_into_a_grad_with_a_graph_keeps_it(device):
    """A backward after one with create_graph adds into ``.grad`` in place: the graph that
    create_graph made stays, as in PyTorch."""
    def program(M):
        x = M.tensor([1.0, 2.0], dtype=M.float64, requires_grad=True)
        (x ** 3).sum().backward(create_graph=True)
        (x * 5).sum().backward()
        assert x.grad.requires_grad
        second, = M.autograd.grad(x.grad.sum(), x)
        return x.grad.detach(), second
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (torch: a reference cycle)
        assert_as_torch(program, device)


# --- creation and layouts ----------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("data", [[1 + 2j], [1.0, 2j], 3j, [[1, 2.5j], [0, 1]]],
                         ids=["list", "mixed", "number", "nested"])
def test_python_complex_numbers_make_complex64_as_torch(device, data):
    for default in ("float32", "float64"):
        mg.set_default_dtype(getattr(mg, default))
        torch.set_default_dtype(getattr(torch, default))
        try:
            assert str(mg.tensor(data, device=device).dtype) == \
                str(torch.tensor(data).dtype).replace("torch.", "")
        finally:
            mg.set_default_dtype(mg.float32)
            torch.set_default_dtype(torch.float32)


LAYOUT_OPS = {
    "cat": lambda M, x: M.cat([x, x], 1), "stack": lambda M, x: M.stack([x, x]),
    "softmax": lambda M, x: x.softmax(-1), "softmax(0)": lambda M, x: x.softmax(0),
    "log_softmax": lambda M, x: x.log_softmax(-1),
    "masked_fill": lambda M, x: x.masked_fill(x > 2, 0.0),
    "layer_norm": lambda M, x: M.nn.functional.layer_norm(x, (3,)),
    "cumsum": lambda M, x: x.cumsum(1), "roll": lambda M, x: x.roll(1, 0),
    "index_select": lambda M, x: x.index_select(1, M.tensor([0, 1]))}


@needs_torch
@pytest.mark.parametrize("name", sorted(LAYOUT_OPS))
def test_results_of_a_transposed_input_are_row_major_as_torch(device, name):
    """These ops give a row-major result whatever their input's layout, as PyTorch's, so
    that ``.view`` works on it; the values and gradients are the same."""
    def program(M):
        x = (M.arange(12.0, dtype=M.float64).reshape(3, 4) ** 1.5).T.requires_grad_()
        y = LAYOUT_OPS[name](M, x)
        assert y.is_contiguous()
        (y * M.arange(float(y.numel()), dtype=M.float64).view(y.shape)).sum().backward()
        return y.detach().view(-1).numpy(), x.grad.numpy()
    for ours, theirs in zip(program(On(mg, device)), program(torch)):  # (sums in another
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-20)  # order: an ulp)


# --- diagonal is a view; round's decimals ------------------------------------------------------

@needs_torch
def test_diagonal_is_a_view_as_torch(device):
    def program(M):
        m = M.zeros(3, 3)
        m.diagonal().fill_(1.0)
        w = M.zeros(3, 4)
        d = w.diagonal(1)
        w.fill_(4.0)
        z = M.zeros(3, 3, dtype=M.float64, requires_grad=True) * 1
        a = M.tensor([1.0, 2.0, 3.0], dtype=M.float64, requires_grad=True)
        z.diagonal().copy_(a)
        (z * M.arange(9.0, dtype=M.float64).view(3, 3)).sum().backward()
        return m, d, z.detach(), a.grad
    assert_as_torch(program, device)


@needs_torch
@pytest.mark.parametrize("offset, dim1, dim2", [(0, 0, 1), (1, 1, 2), (-1, 2, 0), (2, -1, -3),
                                                (5, 0, 1), (-4, 1, 2)])
def test_diagonal_values_and_gradients_as_torch(device, offset, dim1, dim2):
    def program(M):
        x = M.arange(60.0, dtype=M.float64).reshape(3, 4, 5).requires_grad_()
        y = x.diagonal(offset, dim1, dim2)
        (y * (M.arange(float(y.numel()), dtype=M.float64).view(y.shape) + 1)).sum().backward()
        return y.detach(), x.grad
    assert_as_torch(program, device)
    x = mg.randn(3, 4, 5, dtype=mg.float64, requires_grad=True, device=device)
    assert mg.autograd.gradgradcheck(lambda t: t.diagonal(offset, dim1, dim2) ** 2, (x,))


@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("decimals", [1, 2, -1, 50, 400, -400])
def test_round_to_decimals_as_torch(device, dtype, decimals):
    """float16 is rounded in float32 (once), a power of ten past float64's range is inf."""
    assert_as_torch(lambda M: M.round(M.tensor([2.35, 10.55, -0.125, 1234.5678],
                                               dtype=getattr(M, dtype)), decimals=decimals),
                    device)
