"""PyTorch's conveniences made of the primitives (tril, triu, mm, bmm, gather, index_select,
unbind, repeat, isclose, allclose, equal, from_numpy, concat/concatenate, hstack, vstack,
row_stack, dstack, column_stack, atleast_1d/2d/3d): values, dtypes and gradients against
PyTorch, gradcheck in float64, and PyTorch's errors for bad arguments."""
import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

rng = np.random.default_rng(0)


def r(*shape):
    return rng.standard_normal(shape)


def i64(values):
    return np.array(values, dtype=np.int64)


# name -> (function of (library, *tensors), float inputs, integer inputs (no gradient))
CASES = {
    "tril": (lambda L, x: x.tril(), [r(3, 4)], []),
    "tril_above": (lambda L, x: x.tril(1), [r(4, 3)], []),
    "tril_below_batched": (lambda L, x: L.tril(x, -1), [r(2, 3, 3)], []),
    "triu": (lambda L, x: x.triu(), [r(3, 4)], []),
    "triu_above": (lambda L, x: L.triu(x, 2), [r(2, 4, 5)], []),
    "triu_below": (lambda L, x: x.triu(-1), [r(5, 3)], []),
    "mm": (lambda L, a, b: a.mm(b), [r(3, 4), r(4, 2)], []),
    "mm_function": (lambda L, a, b: L.mm(a, b), [r(1, 4), r(4, 5)], []),
    "bmm": (lambda L, a, b: a.bmm(b), [r(2, 3, 4), r(2, 4, 5)], []),
    "gather_dim0": (lambda L, x, i: x.gather(0, i), [r(3, 4)], [i64([[0, 2, 1, 0], [2, 2, 0, 1]])]),
    "gather_dim1_repeats": (lambda L, x, i: x.gather(1, i), [r(3, 4)],
                            [i64([[0, 0, 3], [1, 2, 1], [3, 3, 3]])]),
    "gather_smaller_index": (lambda L, x, i: L.gather(x, -1, i), [r(2, 3, 4)],
                             [i64([[[1], [0]]])]),
    "gather_int32": (lambda L, x, i: x.gather(0, i.int()), [r(3, 2)], [i64([[2, 0]])]),
    "gather_empty": (lambda L, x, i: x.gather(1, i), [r(3, 4)], [np.zeros((3, 0), np.int64)]),
    "index_select": (lambda L, x, i: x.index_select(1, i), [r(3, 4)], [i64([3, 0, 3])]),
    "index_select_dim0": (lambda L, x, i: L.index_select(x, 0, i), [r(3, 2, 2)], [i64([2])]),
    "index_select_int32": (lambda L, x, i: x.index_select(-1, i.int()), [r(2, 5)], [i64([4, 1])]),
    "index_select_scalar": (lambda L, x, i: x.index_select(0, i), [r(3, 2)], [i64(1)]),
    "unbind": (lambda L, x: x.unbind(), [r(3, 2)], []),
    "unbind_last": (lambda L, x: L.unbind(x, -1), [r(2, 3)], []),
    "repeat": (lambda L, x: x.repeat(2, 3), [r(2, 3)], []),
    "repeat_new_dims": (lambda L, x: x.repeat(2, 1, 2), [r(3)], []),
    "repeat_tuple": (lambda L, x: x.repeat((1, 2, 1)), [r(2, 1, 3)], []),
    "repeat_zero": (lambda L, x: x.repeat(0, 2), [r(2, 2)], []),
    "repeat_0d": (lambda L, x: x.repeat(3), [r()], []),
    "isclose": (lambda L, a, b: a.isclose(b),
                [np.array([1.0, 2.0, np.nan, 1e-9]), np.array([1.0 + 1e-6, 2.1, np.nan, 0.0])], []),
    "isclose_nan_tol": (lambda L, a, b: L.isclose(a, b, rtol=0.1, atol=0, equal_nan=True),
                        [np.array([1.0, 2.0, np.nan]), np.array([1.05, 2.5, np.nan])], []),
    "concat": (lambda L, a, b: L.concat([a, b], 1), [r(2, 3), r(2, 1)], []),
    "concat_dim_keyword": (lambda L, a, b: L.concat((a, b), dim=-1), [r(2, 3), r(2, 1)], []),
    "concatenate": (lambda L, a, b: L.concatenate([a, b]), [r(2, 3), r(1, 3)], []),
    "concatenate_axis": (lambda L, a, b: L.concatenate([a, b], axis=1), [r(2, 3), r(2, 1)], []),
    "hstack_1d": (lambda L, a, b: L.hstack([a, b]), [r(3), r(2)], []),
    "hstack_0d_and_1d": (lambda L, a, b: L.hstack([a, b]), [r(), r(2)], []),
    "hstack_2d": (lambda L, a, b: L.hstack((a, b)), [r(2, 3), r(2, 1)], []),
    "hstack_3d": (lambda L, a, b: L.hstack([a, b]), [r(2, 3, 2), r(2, 1, 2)], []),
    "vstack_1d": (lambda L, a, b: L.vstack([a, b]), [r(3), r(3)], []),
    "vstack_mixed": (lambda L, a, b: L.vstack([a, b]), [r(3), r(2, 3)], []),
    "vstack_0d": (lambda L, a, b: L.vstack([a, b]), [r(), r()], []),
    "vstack_int": (lambda L, a, i: L.vstack([a, i]), [r(2)], [i64([1, 2])]),
    "row_stack": (lambda L, a, b: L.row_stack([a, b]), [r(2, 2), r(1, 2)], []),
    "dstack_1d": (lambda L, a, b: L.dstack([a, b]), [r(3), r(3)], []),
    "dstack_2d_3d": (lambda L, a, b: L.dstack([a, b]), [r(2, 3), r(2, 3, 2)], []),
    "dstack_0d": (lambda L, a, b: L.dstack([a, b]), [r(), r()], []),
    "column_stack": (lambda L, a, b, c: L.column_stack([a, b, c]), [r(3), r(3, 2), r(3)], []),
    "column_stack_0d": (lambda L, a, b: L.column_stack([a, b]), [r(), r()], []),
    "atleast_1d": (lambda L, a, b: L.atleast_1d(a, b), [r(), r(2, 3)], []),
    "atleast_2d": (lambda L, a, b, c: L.atleast_2d([a, b, c]), [r(), r(3), r(1, 2, 3)], []),
    "atleast_3d": (lambda L, a, b, c: L.atleast_3d((a, b, c)), [r(), r(3), r(2, 3)], []),
    "atleast_3d_one": (lambda L, a: L.atleast_3d(a), [r(4)], []),
}


def _run(L, fn, floats, ints, device):
    on = On(mg, device) if L is mg else L
    ts = [on.tensor(a, requires_grad=True) for a in floats] + [on.tensor(a) for a in ints]
    out = fn(on, *ts)
    outs = out if isinstance(out, tuple) else (out,)
    floating = [o for o in outs if o.requires_grad]
    if floating:
        total = sum((o * on.tensor(np.linspace(-1, 2, max(o.numel(), 1))[:o.numel()]
                                   .reshape(tuple(o.shape)), dtype=o.dtype)).sum()
                    for o in floating)
        total.backward()
    return outs, [t.grad for t in ts[:len(floats)]]


@needs_torch
@pytest.mark.parametrize("case", list(CASES))
def test_values_dtypes_and_gradients_as_torch(case, device):
    fn, floats, ints = CASES[case]
    got, got_grads = _run(mg, fn, floats, ints, device)
    want, want_grads = _run(torch, fn, floats, ints, "cpu")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        assert str(g.dtype) == str(w.dtype).replace("torch.", "")
        np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-12, atol=1e-12)
    for g, w in zip(got_grads, want_grads):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-12, atol=1e-12)


GRADCHECKS = {
    "tril": (lambda x: x.tril(-1), (3, 4)),
    "triu": (lambda x: x.triu(1), (2, 3, 3)),
    "mm": (lambda x: x.mm(x.T), (3, 2)),
    "bmm": (lambda x: x.bmm(x.transpose(1, 2)), (2, 3, 2)),
    "gather": (lambda x: x.gather(1, mg.tensor([[0, 0], [2, 1]])), (2, 3)),
    "index_select": (lambda x: x.index_select(0, mg.tensor([1, 1, 0])), (2, 3)),
    "unbind": (lambda x: x.unbind(1)[1] * x.unbind(1)[0], (3, 2)),
    "repeat": (lambda x: x.repeat(2, 1, 3), (2, 2)),
    "hstack": (lambda x: mg.hstack([x, x * x]), (2, 3)),
    "vstack": (lambda x: mg.vstack([x[0], x * x]), (2, 3)),
    "dstack": (lambda x: mg.dstack([x, x.exp()]), (2, 3)),
    "column_stack": (lambda x: mg.column_stack([x[:, 0], x * x]), (2, 3)),
}


@pytest.mark.parametrize("case", list(GRADCHECKS))
def test_gradcheck(case):
    fn, shape = GRADCHECKS[case]
    x = mg.tensor(np.random.default_rng(3).standard_normal(shape), requires_grad=True)
    assert mg.autograd.gradcheck(fn, (x,))


@needs_torch
@pytest.mark.parametrize("pair", [((2, 3), (2, 3)), ((2, 3), (3, 2)), ((2,), (2, 1))])
def test_equal_and_allclose_are_python_bools_as_torch(pair, device):
    a = np.arange(np.prod(pair[0]), dtype=np.float64).reshape(pair[0])
    b = a.reshape(pair[1]) if np.prod(pair[1]) == a.size else None
    for other in (b, None if b is None else b + 1e-9):
        if other is None:
            continue
        x, y = mg.tensor(a, device=device), mg.tensor(other, device=device)
        xt, yt = torch.tensor(a), torch.tensor(other)
        assert x.equal(y) is xt.equal(yt) is mg.equal(x, y) is torch.equal(xt, yt)
        if a.shape == other.shape:
            assert x.allclose(y) is xt.allclose(yt)


BAD = {
    "cat_of_a_tensor": (lambda L: L.cat(L.ones(2, 2)), TypeError),
    "stack_of_a_tensor": (lambda L: L.stack(L.ones(2, 2)), TypeError),
    "hstack_of_a_tensor": (lambda L: L.hstack(L.ones(2, 2)), TypeError),
    "hstack_empty": (lambda L: L.hstack([]), RuntimeError),
    "vstack_empty": (lambda L: L.vstack(()), RuntimeError),
    "dstack_empty": (lambda L: L.dstack([]), RuntimeError),
    "column_stack_empty": (lambda L: L.column_stack([]), RuntimeError),
    "hstack_dims_differ": (lambda L: L.hstack([L.ones(2), L.ones(2, 2)]), RuntimeError),
    "vstack_sizes_differ": (lambda L: L.vstack([L.ones(2), L.ones(3)]), RuntimeError),
    "column_stack_rows_differ": (lambda L: L.column_stack([L.ones(2), L.ones(3)]), RuntimeError),
    "tril_1d": (lambda L: L.ones(3).tril(), RuntimeError),
    "triu_0d": (lambda L: L.tensor(1.0).triu(), RuntimeError),
    "mm_3d": (lambda L: L.ones(2, 2, 2).mm(L.ones(2, 2)), RuntimeError),
    "mm_1d_other": (lambda L: L.ones(2, 2).mm(L.ones(2)), RuntimeError),
    "mm_mismatch": (lambda L: L.ones(2, 3).mm(L.ones(2, 3)), RuntimeError),
    "bmm_2d": (lambda L: L.ones(2, 2).bmm(L.ones(2, 2, 2)), RuntimeError),
    "bmm_batches": (lambda L: L.ones(2, 2, 3).bmm(L.ones(3, 3, 2)), RuntimeError),
    "gather_float_index": (lambda L: L.ones(2, 2).gather(0, L.ones(2, 2)), RuntimeError),
    "gather_out_of_range": (lambda L: L.ones(2, 2).gather(0, L.tensor([[0, 2]])), Exception),
    "gather_negative": (lambda L: L.ones(2, 2).gather(0, L.tensor([[0, -1]])), Exception),
    "gather_dims": (lambda L: L.ones(2, 2).gather(0, L.tensor([0, 1])), RuntimeError),
    "gather_too_big": (lambda L: L.ones(2, 2).gather(0, L.tensor([[0, 1, 0]])), RuntimeError),
    "index_select_2d": (lambda L: L.ones(3, 2).index_select(0, L.tensor([[0, 1]])), Exception),
    "index_select_out_of_range": (lambda L: L.ones(3, 2).index_select(0, L.tensor([3])),
                                  IndexError),
    "index_select_negative": (lambda L: L.ones(3, 2).index_select(0, L.tensor([-1])),
                              IndexError),
    "index_select_float": (lambda L: L.ones(3, 2).index_select(0, L.tensor([0.0])),
                           RuntimeError),
    "unbind_0d": (lambda L: L.tensor(1.0).unbind(), Exception),
    "repeat_fewer_dims": (lambda L: L.ones(2, 2).repeat(2), RuntimeError),
    "repeat_negative": (lambda L: L.ones(2).repeat(-1), RuntimeError),
}


@needs_torch
@pytest.mark.parametrize("case", list(BAD))
def test_bad_arguments_raise_as_torch(case, device):
    fn, kind = BAD[case]
    raises_as_torch(fn, kind, device)


def test_from_numpy_shares_memory_and_keeps_the_dtype():
    a = np.arange(6.0).reshape(2, 3)
    t = mg.from_numpy(a)
    assert t.dtype == mg.float64 and t.shape == (2, 3)
    a[0, 0] = 7.0
    t[1, 2] = -1.0
    assert t[0, 0].item() == 7.0 and a[1, 2] == -1.0
    assert mg.from_numpy(np.array([1, 2], dtype=np.int32)).dtype == mg.int32
    with pytest.raises(TypeError, match="from_numpy"):
        mg.from_numpy([1.0, 2.0])
