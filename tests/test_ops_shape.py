"""Shape ops: reshape view transpose permute .T unsqueeze squeeze flatten expand, indexing
(ints, slices, None, Ellipsis, integer arrays/lists/tensors, boolean masks, mixed), and
cat stack split chunk.

Shape ops are linear, so second order is checked on the squared output (see
``_squared`` in test_ops_elementwise), which makes each op's backward differentiated too.
Indexing is also swept with hypothesis' NumPy index strategies against a NumPy reference
(``np.add.at`` for the gradient); negative steps, which NumPy takes, are a ValueError as in
torch.
"""
import functools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, basic_indices, integer_array_indices

import minigrad as mg
from minigrad import backend, ops
from tests.test_ops_elementwise import (DTYPES, MAX_SIZE, SEEDS, SETTINGS, assert_gradcheck,
                                        assert_parity, f64, lib, params, run_error,
                                        sample)
from tests.torch_ref import needs_torch, torch


def ix(t, values):
    """An index tensor of the library (and device) of ``t``."""
    if lib(t) is torch:
        return torch.tensor(values)
    return mg.tensor(values, device=t.device)


def _embedding_gradient(grad, padding_idx, ids=((0, 4, 4, 2), (2, 0, 1, 0), (4, 4, 4, 3))):
    """The gradient of a (5, 2) embedding from ``grad`` (3, 4, 2) at ``ids``: an op of its
    own, differentiated again under create_graph (PyTorch's embedding_dense_backward)."""
    if lib(grad) is torch:
        return torch.ops.aten.embedding_dense_backward(
            grad, torch.tensor(ids), 5, -1 if padding_idx is None else padding_idx, False)
    index = backend.to_device(np.array(ids), grad.device)
    return ops.EmbeddingDenseBackward.apply(grad, index=index, shape=(5, 2),
                                            padding_idx=padding_idx)


MASK = np.array([[True, False, True, True, False]] * 3 + [[False] * 5])  # (4, 5)
ROWS = np.array([True, False, True])

# (id, input shapes, fn); every input is a float tensor with |values| in [0.5, 2]
CASES = [
    ("reshape", [(2, 3, 4)], lambda t: t.reshape(6, 4)),
    ("reshape_tuple", [(2, 3, 4)], lambda t: t.reshape((4, 6))),
    ("reshape_infer", [(2, 3, 4)], lambda t: t.reshape(4, -1, 3)),
    ("reshape_flat", [(2, 3, 4)], lambda t: t.reshape(-1)),
    ("reshape_0d_to_2d", [()], lambda t: t.reshape(1, 1)),
    ("reshape_to_0d", [(1, 1)], lambda t: t.reshape(())),
    ("reshape_same", [(2, 3)], lambda t: t.reshape(2, 3)),
    ("reshape_function", [(2, 3, 4)], lambda t: lib(t).reshape(t, (3, 8))),
    ("view", [(2, 3, 4)], lambda t: t.view(3, 8)),
    ("view_infer", [(2, 3, 4)], lambda t: t.view(-1, 2)),
    ("transpose", [(2, 3, 4)], lambda t: t.transpose(0, 2)),
    ("transpose_negative", [(2, 3, 4)], lambda t: t.transpose(-1, -2)),
    ("transpose_same_dim", [(2, 3, 4)], lambda t: t.transpose(1, 1)),
    ("transpose_1d", [(3,)], lambda t: t.transpose(0, -1)),
    ("transpose_0d", [()], lambda t: t.transpose(0, -1)),
    ("transpose_function", [(2, 3)], lambda t: lib(t).transpose(t, 0, 1)),
    ("permute", [(2, 3, 4)], lambda t: t.permute(2, 0, 1)),
    ("permute_tuple", [(2, 3, 4)], lambda t: t.permute((1, 2, 0))),
    ("permute_negative", [(2, 3, 4, 1)], lambda t: t.permute(-1, 0, -2, 1)),
    ("permute_identity", [(2, 3)], lambda t: t.permute(0, 1)),
    ("permute_function", [(2, 3, 4)], lambda t: lib(t).permute(t, (1, 0, 2))),
    ("T_2d", [(2, 3)], lambda t: t.T),
    ("mT", [(2, 3, 4)], lambda t: t.mT),
    ("unsqueeze_0", [(2, 3)], lambda t: t.unsqueeze(0)),
    ("unsqueeze_middle", [(2, 3)], lambda t: t.unsqueeze(1)),
    ("unsqueeze_end", [(2, 3)], lambda t: t.unsqueeze(2)),
    ("unsqueeze_negative", [(2, 3)], lambda t: t.unsqueeze(-1)),
    ("unsqueeze_negative_first", [(2, 3)], lambda t: t.unsqueeze(-3)),
    ("unsqueeze_0d", [()], lambda t: t.unsqueeze(0)),
    ("unsqueeze_function", [(2, 3)], lambda t: lib(t).unsqueeze(t, 1)),
    ("squeeze_all", [(1, 3, 1, 2)], lambda t: t.squeeze()),
    ("squeeze_dim", [(1, 3, 1, 2)], lambda t: t.squeeze(2)),
    ("squeeze_negative", [(2, 3, 1)], lambda t: t.squeeze(-1)),
    ("squeeze_non_one_dim", [(1, 3, 1, 2)], lambda t: t.squeeze(1)),
    ("squeeze_tuple", [(1, 3, 1, 2)], lambda t: t.squeeze((0, 2))),
    ("squeeze_tuple_mixed", [(1, 3, 1, 2)], lambda t: t.squeeze((0, 1))),
    ("squeeze_to_0d", [(1, 1)], lambda t: t.squeeze()),
    ("squeeze_0d", [()], lambda t: t.squeeze()),
    ("squeeze_function", [(1, 3)], lambda t: lib(t).squeeze(t, 0)),
    ("flatten", [(2, 3, 4)], lambda t: t.flatten()),
    ("flatten_from_1", [(2, 3, 4)], lambda t: t.flatten(1)),
    ("flatten_0_1", [(2, 3, 4)], lambda t: t.flatten(0, 1)),
    ("flatten_negative", [(2, 3, 4, 2)], lambda t: t.flatten(-3, -2)),
    ("flatten_one_dim", [(2, 3, 4)], lambda t: t.flatten(1, 1)),
    ("flatten_0d", [()], lambda t: t.flatten()),
    ("flatten_function", [(2, 3, 4)], lambda t: lib(t).flatten(t, 1)),
    ("expand", [(3, 1)], lambda t: t.expand(3, 4)),
    ("expand_minus_one", [(3, 1)], lambda t: t.expand(-1, 4)),
    ("expand_new_dims", [(3,)], lambda t: t.expand(2, 4, 3)),
    ("expand_new_and_existing", [(1, 3, 1)], lambda t: t.expand(2, 4, -1, 5)),
    ("expand_tuple", [(3, 1)], lambda t: t.expand((2, 3, 2))),
    ("expand_0d", [()], lambda t: t.expand(2, 2)),
    ("expand_same", [(2, 3)], lambda t: t.expand(2, 3)),
    ("expand_as", [(3, 1), (2, 3, 4)], lambda t, u: t.expand_as(u)),
    ("expand_function", [(3, 1)], (lambda t: mg.expand(t, (3, 2)), lambda t: t.expand(3, 2))),
    # indexing
    ("int", [(3, 4, 5)], lambda t: t[1]),
    ("int_negative", [(3, 4, 5)], lambda t: t[-1]),
    ("ints", [(3, 4, 5)], lambda t: t[1, -2]),
    ("ints_to_0d", [(3, 4, 5)], lambda t: t[2, 0, 4]),
    ("int_0d_of_1d", [(4,)], lambda t: t[2]),
    ("slice", [(3, 4, 5)], lambda t: t[1:3]),
    ("slice_step", [(3, 4, 5)], lambda t: t[::2]),
    ("slice_steps", [(3, 4, 5)], lambda t: t[1::2, :, 1:5:3]),
    ("slice_negative_start", [(3, 4, 5)], lambda t: t[-2:]),
    ("slice_negative_bounds", [(3, 4, 5)], lambda t: t[:, -3:-1]),
    ("slice_negative_stop_step", [(3, 4, 5)], lambda t: t[:, :, :-1:2]),
    ("slice_past_end", [(3, 4, 5)], lambda t: t[1:10, -10:2]),
    ("slice_empty", [(3, 4, 5)], lambda t: t[2:1]),
    ("slice_full", [(3, 4)], lambda t: t[:]),
    ("none", [(3, 4)], lambda t: t[None]),
    ("none_middle", [(3, 4, 5)], lambda t: t[:, None, 1]),
    ("none_twice", [(3, 4)], lambda t: t[None, :, None]),
    ("ellipsis", [(3, 4, 5)], lambda t: t[..., 1]),
    ("ellipsis_none", [(3, 4, 5)], lambda t: t[..., None]),
    ("int_ellipsis_int", [(3, 4, 5)], lambda t: t[1, ..., 2]),
    ("ellipsis_only", [(3, 4)], lambda t: t[...]),
    ("empty_tuple", [(3, 4)], lambda t: t[()]),
    ("list", [(3, 4, 5)], lambda t: t[[0, 2]]),
    ("list_repeated", [(3, 4, 5)], lambda t: t[[0, 0, 2, 0]]),
    ("list_negative", [(3, 4, 5)], lambda t: t[[-1, 0, -1]]),
    ("array_2d", [(3, 4)], lambda t: t[ix(t, [[1, 0], [1, 1]])]),
    ("tensor_index", [(3, 4, 5)], lambda t: t[ix(t, [2, 2, 0])]),
    ("tensor_index_0d", [(3, 4)], lambda t: t[ix(t, 1)]),
    ("two_lists", [(3, 4, 5)], lambda t: t[[0, 1, 0], [1, 1, 3]]),
    ("three_lists", [(3, 4, 5)], lambda t: t[[0, 1, 0], [1, 1, 1], [4, 0, 4]]),
    ("broadcast_indices", [(3, 4, 5)], lambda t: t[ix(t, [[0], [2]]), ix(t, [1, 1, 3])]),
    ("slice_then_list", [(3, 4, 5)], lambda t: t[:, [1, 1, 0]]),
    ("list_then_slice", [(3, 4, 5)], lambda t: t[[2, 2], 1:3]),
    ("lists_around_slice", [(3, 4, 5)], lambda t: t[[0, 1], :, [1, 1]]),
    ("ellipsis_list", [(3, 4, 5)], lambda t: t[..., [0, 0, 4]]),
    ("none_list", [(3, 4, 5)], lambda t: t[None, [1, 1]]),
    ("int_then_list", [(3, 4, 5)], lambda t: t[1, [0, 3, 3]]),
    ("slice_int_list", [(3, 4, 5)], lambda t: t[:, 0, [1, 2]]),
    ("int_slice_list", [(3, 4, 5)], lambda t: t[1, :, [1, 1, 0]]),
    ("list_slice_int", [(3, 4, 5)], lambda t: t[[0, 1], 1:3, 2]),
    ("index_then_index", [(3, 4, 5)], lambda t: t[1:, [0, 0]][:, 1]),
    ("mask_full", [(4, 5)], lambda t: t[ix(t, MASK)]),
    ("mask_rows", [(3, 4)], lambda t: t[ix(t, ROWS)]),
    ("mask_list", [(3, 4)], lambda t: t[[True, False, True]]),
    ("mask_from_comparison", [(3, 4)], lambda t: t[t > 0]),
    ("mask_then_slice", [(3, 4, 5)], lambda t: t[ix(t, ROWS), 1:]),
    ("int_then_mask", [(3, 4, 5)], lambda t: t[0, ix(t, [True, False, True, True])]),
    ("mask_2d_of_3d", [(4, 5, 2)], lambda t: t[ix(t, MASK)]),
    ("mask_all_false", [(3, 4)], lambda t: t[ix(t, np.zeros((3, 4), bool))]),
    # embedding: rows by id, repeats accumulating their gradients
    ("embedding", [(5, 3)],
     lambda w: lib(w).nn.functional.embedding(ix(w, [[0, 4, 4], [2, 0, 1]]), w)),
    ("embedding_1d", [(4, 2)], lambda w: lib(w).nn.functional.embedding(ix(w, [3, 3, 3, 1]), w)),
    ("embedding_0d", [(4, 2)], lambda w: lib(w).nn.functional.embedding(ix(w, 2), w)),
    ("embedding_no_ids", [(4, 2)],
     lambda w: lib(w).nn.functional.embedding(ix(w, np.zeros((2, 0), np.int64)), w)),
    ("embedding_gradient", [(3, 4, 2)], lambda g: _embedding_gradient(g, None)),
    ("embedding_gradient_padding", [(3, 4, 2)], lambda g: _embedding_gradient(g, 4)),
    # cat / stack
    ("cat", [(2, 3), (1, 3), (3, 3)], lambda a, b, c: lib(a).cat([a, b, c])),
    ("cat_dim1", [(2, 1), (2, 3)], lambda a, b: lib(a).cat([a, b], dim=1)),
    ("cat_negative_dim", [(2, 3, 1), (2, 3, 2)], lambda a, b: lib(a).cat((a, b), -1)),
    ("cat_one", [(2, 3)], lambda a: lib(a).cat([a], 1)),
    ("cat_same_tensor", [(2, 3)], lambda a: lib(a).cat([a, a * 2, a], 0)),
    ("cat_with_empty", [(2, 3), (0, 3)], lambda a, b: lib(a).cat([a, b])),
    ("stack", [(2, 3), (2, 3), (2, 3)], lambda a, b, c: lib(a).stack([a, b, c])),
    ("stack_dim1", [(2, 3), (2, 3)], lambda a, b: lib(a).stack([a, b], 1)),
    ("stack_last", [(2, 3), (2, 3)], lambda a, b: lib(a).stack((a, b), dim=-1)),
    ("stack_negative_middle", [(2, 3), (2, 3)], lambda a, b: lib(a).stack([a, b], -2)),
    ("stack_0d", [(), ()], lambda a, b: lib(a).stack([a, b])),
    ("stack_same_tensor", [(3,)], lambda a: lib(a).stack([a, a])),
    # split / chunk
    ("split_int", [(5, 3)], lambda t: t.split(2)),
    ("split_int_dim1", [(3, 5)], lambda t: t.split(2, 1)),
    ("split_int_exact", [(4, 2)], lambda t: t.split(2)),
    ("split_int_larger", [(3, 2)], lambda t: t.split(5)),
    ("split_list", [(6, 2)], lambda t: t.split([1, 3, 2])),
    ("split_list_negative_dim", [(2, 6)], lambda t: t.split([4, 2], -1)),
    ("split_list_with_zero", [(3, 2)], lambda t: t.split([0, 3])),
    ("split_keyword", [(2, 6)], lambda t: t.split(4, dim=1)),
    ("split_one_piece_used", [(5, 2)], lambda t: t.split(2)[1]),
    ("split_function", [(5, 2)], lambda t: lib(t).split(t, [2, 3])),
    ("chunk", [(6, 2)], lambda t: t.chunk(3)),
    ("chunk_uneven", [(5,)], lambda t: t.chunk(3)),
    ("chunk_4_of_6", [(6,)], lambda t: t.chunk(4)),
    ("chunk_more_than_size", [(2, 3)], lambda t: t.chunk(4)),
    ("chunk_dim1", [(2, 7)], lambda t: t.chunk(3, 1)),
    ("chunk_negative_dim", [(2, 3, 4)], lambda t: t.chunk(2, dim=-1)),
    ("chunk_function", [(6, 2)], lambda t: lib(t).chunk(t, 2)),
    # composites
    ("split_heads", [(2, 3, 8)], lambda t: t.reshape(2, 3, 2, 4).transpose(1, 2).flatten(0, 1)),
    ("chunk_then_cat", [(4, 6)], lambda t: lib(t).cat(t.chunk(3, 1)[::-1], 1)),
]


def _inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [sample(rng, s, "nonzero") for s in shapes]


@pytest.mark.parametrize("shapes, fn", params(CASES))
def test_gradcheck(device, shapes, fn):
    assert_gradcheck(fn, _inputs(shapes), device)


@needs_torch
@DTYPES
@pytest.mark.parametrize("shapes, fn", params(CASES))
def test_matches_torch(device, shapes, fn, dtype):
    assert_parity(fn, [a.astype(dtype) for a in _inputs(shapes)], device)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3, 4)], ids=str)
def test_T_reverses_dims_like_numpy(device, shape):
    """torch deprecates .T on ndim != 2 but still reverses the dims, as NumPy does."""
    x = sample(np.random.default_rng(0), shape, "real")
    t = mg.tensor(x, device=device, requires_grad=True)
    np.testing.assert_array_equal(t.T.numpy(), x.T)
    w = np.random.default_rng(1).standard_normal(x.T.shape)
    (t.T * mg.tensor(w, device=device)).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), w.T)


def test_repeated_indices_accumulate_by_hand(device):
    x = mg.tensor(f64([1.0, 2.0, 3.0]), device=device, requires_grad=True)
    x[[0, 0, 2, 0]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 1.0])
    y = mg.tensor(f64([[1.0, 2.0], [3.0, 4.0]]), device=device, requires_grad=True)
    (y[mg.tensor([1, 1], device=device), mg.tensor([0, 0], device=device)] * 2).sum().backward()
    np.testing.assert_array_equal(y.grad.numpy(), [[0.0, 0.0], [4.0, 0.0]])


@needs_torch
def test_cat_promotes_dtypes_like_torch(device):
    a, b = np.ones((2, 2), np.float32), np.full((1, 2), 2.0)
    assert_parity(lambda x, y: lib(x).cat([x, y]), [a, b], device)
    assert_parity(lambda x, y: lib(x).stack([x, y]), [a[0], b[0]], device)


# --- drawn shapes ------------------------------------------------------------------------------

SHAPES = array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4).filter(
    lambda s: math.prod(s) <= MAX_SIZE)


def _draw_op(data, shape):
    """One shape op on ``shape``, with its arguments drawn, as (description, fn)."""
    nd, rank = len(shape), max(len(shape), 1)
    kind = data.draw(st.sampled_from(["permute", "transpose", "reshape", "flatten",
                                      "unsqueeze", "squeeze", "expand"]), label="op")
    if kind == "permute":
        dims = tuple(data.draw(st.permutations(range(nd))))
        return f"permute{dims}", lambda t: t.permute(dims)
    if kind == "transpose":
        d0, d1 = data.draw(st.tuples(st.integers(-rank, rank - 1), st.integers(-rank, rank - 1)))
        return f"transpose({d0}, {d1})", lambda t: t.transpose(d0, d1)
    if kind == "reshape":
        target = list(data.draw(st.permutations(shape)))
        if target and data.draw(st.booleans()):
            target[data.draw(st.integers(0, len(target) - 1))] = -1
        return f"reshape{tuple(target)}", lambda t: t.reshape(tuple(target))
    if kind == "flatten":
        start = data.draw(st.integers(-rank, rank - 1))
        end = data.draw(st.integers(start % rank, rank - 1))
        return f"flatten({start}, {end})", lambda t: t.flatten(start, end)
    if kind == "unsqueeze":
        d = data.draw(st.integers(-nd - 1, nd))
        return f"unsqueeze({d})", lambda t: t.unsqueeze(d)
    if kind == "squeeze":
        d = data.draw(st.none() | st.integers(-rank, rank - 1))
        return f"squeeze({d})", lambda t: t.squeeze() if d is None else t.squeeze(d)
    lead = tuple(data.draw(st.lists(st.integers(1, 3), max_size=4 - nd)))
    target = lead + tuple(data.draw(st.integers(1, 3)) if n == 1 else n for n in shape)
    return f"expand{target}", lambda t: t.expand(target)


@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_shape_ops_over_drawn_shapes(device, data, seed):
    shape = data.draw(SHAPES, label="shape")
    _, fn = _draw_op(data, shape)
    x = sample(np.random.default_rng(seed), shape, "real")
    assert_gradcheck(fn, [x], device)
    if torch is not None:
        assert_parity(fn, [x], device, seed=seed)
        assert_parity(fn, [x.astype(np.float32)], device, seed=seed)


def assert_index_matches_numpy(x, index, device, seed=0):
    """x[index] and its gradient against NumPy: a[index], and np.add.at(zeros, index, w)."""
    t = mg.tensor(x, device=device, requires_grad=True)
    out = t[index]
    expected = x[index]
    assert out.shape == expected.shape and out.dtype == expected.dtype
    np.testing.assert_array_equal(out.numpy(), expected)
    w = np.random.default_rng(seed).standard_normal(expected.shape)
    (out * mg.tensor(w, device=device)).sum().backward()
    grad = np.zeros_like(x)
    np.add.at(grad, index, w)
    np.testing.assert_allclose(t.grad.numpy(), grad, rtol=1e-15, atol=0)


def _positive_steps(index):
    """``index`` with each slice's negative step made positive."""
    def fix(i):
        if isinstance(i, slice) and i.step is not None and i.step < 0:
            return slice(i.start, i.stop, -i.step)
        return i
    return tuple(map(fix, index)) if isinstance(index, tuple) else fix(index)


@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_basic_indexing_matches_numpy(device, data, seed):
    """ints, slices (positive steps: torch has no others), None and Ellipsis in any
    combination."""
    shape = data.draw(array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4),
                      label="shape")
    index = data.draw(basic_indices(shape, allow_newaxis=True, allow_ellipsis=True).map(
        _positive_steps), label="index")
    x = sample(np.random.default_rng(seed), shape, "real")
    assert_index_matches_numpy(x, index, device, seed)
    assert_gradcheck(lambda t: t[index], [x], device)


@SETTINGS
@given(data=st.data(), seed=SEEDS)
def test_integer_array_indexing_matches_numpy(device, data, seed):
    """Integer arrays on leading dims, broadcast together, with repeats accumulating."""
    shape = data.draw(array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
                      label="shape")
    index = data.draw(integer_array_indices(shape, result_shape=array_shapes(
        min_dims=0, max_dims=2, max_side=3)), label="index")
    x = sample(np.random.default_rng(seed), shape, "real")
    assert_index_matches_numpy(x, index, device, seed)
    assert_gradcheck(lambda t: t[index], [x], device)


@pytest.mark.parametrize("index", params([
    ("reverse", (slice(None, None, -1),)),
    ("reverse_step_2", (slice(None), slice(None, None, -2))),
    ("negative_step_bounds", (slice(-1, 0, -1), 2)),
]))
def test_negative_steps_are_a_value_error_as_in_torch(device, index):
    """NumPy takes negative steps; torch refuses them with a ValueError, and so does
    minigrad, reading or writing."""
    x = mg.tensor(sample(np.random.default_rng(0), (3, 4), "real"), device=device)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[index]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[index] = 0.0
    if torch is not None:
        with pytest.raises(ValueError):
            torch.zeros(3, 4)[index]


# --- errors ------------------------------------------------------------------------------------

BAD_DIMS = [
    ("transpose", lambda t: t.transpose(0, 2)),
    ("transpose_negative", lambda t: t.transpose(-3, 0)),
    ("permute", lambda t: t.permute(0, 2)),
    ("unsqueeze", lambda t: t.unsqueeze(3)),
    ("unsqueeze_negative", lambda t: t.unsqueeze(-4)),
    ("squeeze", lambda t: t.squeeze(2)),
    ("flatten", lambda t: t.flatten(2)),
    ("flatten_end", lambda t: t.flatten(0, -3)),
    ("cat", lambda t: mg.cat([t, t], 2)),
    ("stack", lambda t: mg.stack([t, t], 3)),
    ("stack_negative", lambda t: mg.stack([t, t], -4)),
    ("split", lambda t: t.split(1, 2)),
    ("chunk", lambda t: t.chunk(2, -3)),
    ("index_out_of_range", lambda t: t[2]),
    ("index_negative_out_of_range", lambda t: t[:, -4]),
    ("index_list_out_of_range", lambda t: t[[0, 5]]),
    ("too_many_indices", lambda t: t[0, 0, 0]),
]


@pytest.mark.parametrize("fn", params(BAD_DIMS))
def test_bad_dim_raises_index_error(device, fn):
    with pytest.raises(IndexError):
        fn(mg.ones(2, 3, device=device, requires_grad=True))
        mg.backend.raise_pending()  # (on a GPU an index tensor's error comes at the next read)


ERRORS = [
    ("cat_sizes", lambda ones: mg.cat([ones(2, 3), ones(2, 4)]), ["cat", "(2, 3)", "(2, 4)"]),
    ("cat_ndim", lambda ones: mg.cat([ones(2, 3), ones(2, 3, 1)], 1),
     ["cat", "(2, 3)", "(2, 3, 1)"]),
    ("cat_0d", lambda ones: mg.cat([ones(()), ones(())]), ["cat"]),
    ("cat_empty_list", lambda ones: mg.cat([]), ["cat"]),
    ("stack_sizes", lambda ones: mg.stack([ones(2, 3), ones(3, 2)]),
     ["stack", "(2, 3)", "(3, 2)"]),
    ("stack_empty_list", lambda ones: mg.stack([]), ["stack"]),
    ("reshape", lambda ones: ones(2, 3).reshape(4, 2), ["reshape", "(2, 3)"]),
    ("view_two_unknown", lambda ones: ones(2, 3).view(-1, -1), ["view", "[-1, -1]", "(2, 3)"]),
    ("expand", lambda ones: ones(2, 3).expand(3, 3), ["expand", "(2, 3)", "(3, 3)"]),
    ("expand_fewer_dims", lambda ones: ones(2, 3).expand(3), ["expand", "(2, 3)"]),
    ("permute_repeated", lambda ones: ones(2, 3).permute(0, 0), ["permute"]),
    ("permute_too_few", lambda ones: ones(2, 3, 4).permute(0, 1), ["permute"]),
    ("split_sizes", lambda ones: ones(5).split([1, 3]), ["split", "5"]),
    ("flatten_start_after_end", lambda ones: ones(2, 3, 4).flatten(2, 1), ["flatten"]),
]


@pytest.mark.parametrize("fn, fragments", params(ERRORS))
def test_error_names_op_and_shapes(device, fn, fragments):
    ones = functools.partial(mg.ones, device=device, requires_grad=True)
    run_error(lambda: fn(ones), (RuntimeError, ValueError), fragments)
