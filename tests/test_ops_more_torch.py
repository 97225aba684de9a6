"""prod, cumprod, masked_select, tile, repeat_interleave, scatter, scatter_add and index_add
(with the in-place forms), and nn.functional's pad, cosine_similarity, softplus, leaky_relu
and logsigmoid (with their modules), against torch.

Each program is written once against ``M`` (minigrad on the tested device, or torch) and
compared: shape, dtype, values, grad_fn name and the gradients of every float64 input under
one random upstream gradient, and for the products second derivatives too, with zeros in
the input (one and several per slice). A few are gradchecked, gradgradchecked and checked in
forward mode; bad arguments raise what torch raises.
"""
import zlib

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from tests.test_forward_ad import assert_jvp_rule
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

TOL = {np.dtype(np.float16): dict(rtol=1e-3, atol=1e-3),
       np.dtype(np.float32): dict(rtol=2e-6, atol=1e-6),
       np.dtype(np.float64): dict(rtol=1e-12, atol=1e-14)}


def rng_for(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def functional(M):
    return torch.nn.functional if M is torch else F


def run(program, arrays, M, create_graph=False):
    """(output, gradients of the float inputs, their second-order gradients or None) of
    ``program(M, *tensors)`` under a fixed random upstream gradient."""
    tensors = [M.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    out = program(M, *tensors)
    wrt = [t for t in tensors if t.requires_grad]
    if not out.requires_grad:
        return out, None, None
    shape = tuple(out.shape)
    g = rng_for(shape, "upstream").standard_normal(shape).astype(_numpy(out).dtype)
    grad = (mg.autograd.grad if M is not torch else torch.autograd.grad)
    upstream = (out * M.tensor(g)).sum()
    grads = grad(upstream, wrt, create_graph=create_graph, allow_unused=True)
    second = None
    if create_graph and any(x is not None and x.requires_grad for x in grads):
        weights = [M.tensor(rng_for(tuple(x.shape), "second").standard_normal(tuple(x.shape)))
                   for x in wrt]
        total = sum((x * w).sum() for x, w in zip(grads, weights)
                    if x is not None and x.requires_grad)
        second = grad(total, wrt, allow_unused=True)
    return out, grads, second


def node_name(t):
    return type(t.grad_fn).__name__


def _numpy(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t.numpy())


def assert_matches_torch(program, arrays, device, create_graph=False, exact=False,
                         name=True):
    """``program`` with minigrad on ``device`` and with torch: equal shapes, dtypes, values
    (bit for bit with ``exact``), grad_fn names (with ``name``) and gradients."""
    ours, grads, second = run(program, arrays, On(mg, device), create_graph)
    theirs, tgrads, tsecond = run(program, arrays, torch, create_graph)
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    if exact:
        np.testing.assert_array_equal(ours.numpy(), _numpy(theirs))
    else:
        tol = TOL.get(np.dtype(ours.dtype), dict(rtol=0, atol=0))
        np.testing.assert_allclose(ours.numpy(), _numpy(theirs), **tol)
    if name and theirs.grad_fn is not None:
        assert node_name(ours) == node_name(theirs)
    assert (grads is None) == (tgrads is None)
    for pairs in ((grads, tgrads), (second, tsecond)):
        for g, t in zip(*pairs) if pairs[0] is not None else ():
            if g is None or t is None:  # (no gradient on one side: none or zeros on the other)
                assert (g is None and t is None) or not np.any(_numpy(t if g is None else g))
                continue
            np.testing.assert_allclose(g.numpy(), np.broadcast_to(_numpy(t), g.shape),
                                       **TOL[np.dtype(g.dtype)])
    return ours


def f64(*shape, key=0, zeros=0):
    """Values of ``shape`` (float64, away from 0), with ``zeros`` entries of each row set to 0."""
    signs = rng_for(shape, key, 1).choice([-1, 1], shape)
    a = rng_for(shape, key).uniform(0.5, 1.5, shape) * signs
    if zeros and a.ndim:
        rows = a.reshape(-1, a.shape[-1])
        for k, row in enumerate(rows):
            row[rng_for(shape, key, k).choice(a.shape[-1], zeros, replace=False)] = 0.0
    elif zeros:
        a = np.zeros(())
    return a


# --- prod and cumprod ------------------------------------------------------------------------

PRODUCT_SHAPES = [(), (5,), (3, 4), (2, 3, 4)]


def _dims(shape):
    return [None] + list(range(-len(shape), max(len(shape), 1)))


@needs_torch
@pytest.mark.parametrize("shape", PRODUCT_SHAPES)
@pytest.mark.parametrize("zeros", [0, 1, 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_prod(device, shape, zeros, keepdim):
    a = f64(*shape, zeros=zeros)
    for dim in _dims(shape):
        if dim is None:
            program = lambda M, x: x.prod()  # noqa: E731
        else:
            program = lambda M, x: x.prod(dim, keepdim)  # noqa: E731
        assert_matches_torch(program, [a], device, create_graph=True)
        assert_matches_torch(lambda M, x: M.prod(x * x, 0) if x.ndim else M.prod(x), [a], device,
                             create_graph=True)


@needs_torch
@pytest.mark.parametrize("shape", PRODUCT_SHAPES)
@pytest.mark.parametrize("zeros", [0, 1, 2, 3])
def test_cumprod(device, shape, zeros):
    a = f64(*shape, zeros=min(zeros, shape[-1] if shape else 1))
    for dim in _dims(shape)[1:]:
        assert_matches_torch(lambda M, x: x.cumprod(dim), [a], device, create_graph=True)
        assert_matches_torch(lambda M, x: M.cumprod(x.exp() - 1, dim=dim), [a], device)


@needs_torch
def test_products_with_zeros_in_awkward_places(device):
    rows = np.array([[0.0, 2, 3, 4], [2, 3, 4, 0], [0, 0, 2, 3], [2, 0, 3, 0], [0, 0, 0, 0],
                     [1, -2, 0, 5]])
    for program in (lambda M, x: x.prod(1), lambda M, x: x.prod(), lambda M, x: x.prod(0),
                    lambda M, x: x.cumprod(1), lambda M, x: x.cumprod(0),
                    lambda M, x: x.cumprod(1).prod(1)):
        assert_matches_torch(program, [rows], device, create_graph=True)


@pytest.mark.parametrize("program", [lambda x: x.prod(), lambda x: x.prod(1),
                                     lambda x: x.prod(0, keepdim=True), lambda x: x.cumprod(1),
                                     lambda x: x.cumprod(0), lambda x: x.cumprod(-1).sum(0)],
                         ids=["prod", "prod1", "prod0_keepdim", "cumprod1", "cumprod0",
                              "cumprod_sum"])
@pytest.mark.parametrize("zeros", [0, 1, 2])
def test_products_gradcheck_and_forward_mode(device, program, zeros):
    a = f64(3, 4, key=7, zeros=zeros)
    x = mg.tensor(a, device=device, requires_grad=True)
    assert mg.autograd.gradcheck(program, (x,))
    assert mg.autograd.gradgradcheck(program, (x,))
    assert_jvp_rule(program, [a], device)


def test_cumprod_backward_without_create_graph_is_first_order_exact(device):
    """Plain backward (no read-back of where the zeros are) against create_graph's rule."""
    a = np.array([[0.0, 2, 3, 0, 4], [2, 0, 3, 4, 0], [1, 2, 3, 4, 5]])
    x = mg.tensor(a, device=device, requires_grad=True)
    w = mg.tensor(f64(3, 5, key=3), device=device)
    plain = mg.autograd.grad((x.cumprod(1) * w).sum(), x)[0]
    graph = mg.autograd.grad((x.cumprod(1) * w).sum(), x, create_graph=True)[0]
    np.testing.assert_array_equal(plain.numpy(), graph.detach().numpy())
    # by hand: d/dx[k] of sum_i w[i] prod_{j <= i} x[j]
    for r in range(3):
        for k in range(5):
            want = sum(w.numpy()[r, i] * np.prod([a[r, j] for j in range(i + 1) if j != k])
                       for i in range(k, 5))
            assert plain.numpy()[r, k] == pytest.approx(want, abs=1e-12)


PRODUCT_DTYPES = [
    (np.array([1, 2, 3, 4], np.int32), None), (np.array([200, 2, 3], np.uint8), None),
    (np.array([True, False, True]), None), (np.array([2 ** 40, 2 ** 40, 3]), None),
    (np.array([100, 2, 3], np.int8), None), (np.array([200, 2, 3], np.uint8), "uint8"),
    (np.array([1.5, 2, 3]), "int32"), (np.array([1, 2, 3]), "float32"),
    (np.array([1, 2, 3], np.float32), "float64"),
    (np.array([60000.0, 2, 0.5], np.float16), None),  # float16: a product that overflows
    (np.array([1e-4, 1e-4, 1e4, 1e4], np.float16), None),
    (np.array([1e30, 1e30, 1e-30], np.float32), None),
]


@needs_torch
@pytest.mark.parametrize("a, dtype", PRODUCT_DTYPES, ids=lambda v: getattr(v, "dtype", v))
def test_product_dtypes(device, a, dtype):
    def cast(M):
        return None if dtype is None else getattr(M, dtype)
    for program in (lambda M, x: x.prod(dtype=cast(M)), lambda M, x: x.prod(0, dtype=cast(M)),
                    lambda M, x: x.cumprod(0, dtype=cast(M))):
        ours = program(On(mg, device), mg.tensor(a, device=device))
        theirs = program(torch, torch.tensor(a))
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@needs_torch
def test_products_float32_and_empty(device):
    a = rng_for("f32").standard_normal((6, 9)).astype(np.float32)
    for program in (lambda M, x: x.cumprod(1), lambda M, x: x.cumprod(0)):
        ours = program(On(mg, device), mg.tensor(a, device=device))
        np.testing.assert_array_equal(ours.numpy(), program(torch, torch.tensor(a)).numpy())
    for program in (lambda M, x: x.prod(1), lambda M, x: x.prod()):
        ours = program(On(mg, device), mg.tensor(a, device=device))
        np.testing.assert_allclose(ours.numpy(), program(torch, torch.tensor(a)).numpy(),
                                   rtol=1e-6)
    empty = np.zeros((0, 3))
    for program in (lambda M, x: x.prod(0), lambda M, x: x.prod(), lambda M, x: x.prod(1),
                    lambda M, x: x.cumprod(0)):
        assert_matches_torch(program, [empty], device, name=False)


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M: M.ones(2, 3).prod((0, 1)), TypeError),
    (lambda M: M.ones(2, 3).prod(1.0), TypeError),
    (lambda M: M.ones(2, 3).prod(2), IndexError),
    (lambda M: M.ones(2, 3).cumprod(), TypeError),
    (lambda M: M.ones(2, 3).cumprod(-3), IndexError),
    (lambda M: M.ones(2, dtype=M.bool).cumprod(0, dtype=M.bool), NotImplementedError),
])
def test_product_errors(device, program, kind):
    raises_as_torch(program, kind, device)


# --- masked_select -----------------------------------------------------------------------------

MASKS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((4,), (3, 4)), ((3, 1), (1, 4)), ((), ()),
         ((2, 3), ()), ((), (5,)), ((2, 0), (2, 1))]


@needs_torch
@pytest.mark.parametrize("x_shape, mask_shape", MASKS)
def test_masked_select(device, x_shape, mask_shape):
    a = f64(*x_shape)
    mask = rng_for(mask_shape, "mask").random(mask_shape) > 0.4
    assert_matches_torch(lambda M, x: x.masked_select(M.tensor(mask)), [a], device,
                         create_graph=True)
    assert_matches_torch(lambda M, x: M.masked_select(x * x, M.tensor(mask)), [a], device,
                         create_graph=True)


@needs_torch
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_, np.float32])
def test_masked_select_dtypes(device, dtype):
    a = (rng_for("ms", dtype).standard_normal((3, 4)) * 3).astype(dtype)
    mask = rng_for("m").random((3, 4)) > 0.5
    ours = mg.tensor(a, device=device).masked_select(mg.tensor(mask, device=device))
    theirs = torch.tensor(a).masked_select(torch.tensor(mask))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M: M.ones(2, 3).masked_select(M.tensor([1, 0, 1], dtype=M.uint8)), RuntimeError),
    (lambda M: M.ones(2, 3).masked_select(M.tensor([1, 0, 1])), RuntimeError),
    (lambda M: M.ones(2, 3).masked_select(M.tensor([True, False])), RuntimeError),
    (lambda M: M.ones(2, 3).masked_select([True, False, True]), TypeError),
])
def test_masked_select_errors(device, program, kind):
    raises_as_torch(program, kind, device)


# --- tile and repeat_interleave ----------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("shape, dims", [((3,), (2,)), ((2, 3), (2,)), ((2, 3), (2, 2)),
                                         ((2, 3), (2, 1, 3)), ((2, 3), ()), ((2, 3), (0, 2)),
                                         ((), ()), ((), (3,)), ((2, 1, 3), (1, 2, 1))])
def test_tile(device, shape, dims):
    a = f64(*shape)
    assert_matches_torch(lambda M, x: x.tile(dims), [a], device, name=False)
    assert_matches_torch(lambda M, x: M.tile(x, dims), [a], device, name=False)
    if len(dims) > 1:
        assert_matches_torch(lambda M, x: x.tile(*dims), [a], device, name=False)


@needs_torch
@pytest.mark.parametrize("shape", [(6,), (2, 3), (2, 3, 2)])
@pytest.mark.parametrize("repeats", [0, 1, 3])
def test_repeat_interleave_int(device, shape, repeats):
    a = f64(*shape)
    for dim in [None] + list(range(-len(shape), len(shape))):
        assert_matches_torch(lambda M, x: x.repeat_interleave(repeats, dim), [a], device,
                             name=repeats != 1)
    assert_matches_torch(lambda M, x: M.repeat_interleave(x, repeats), [a], device,
                         name=repeats != 1)


@needs_torch
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_repeat_interleave_tensor(device, dtype):
    a = f64(3, 4)
    for counts, dim in (([1, 0, 2], 0), ([2, 1, 0, 3], 1), ([2, 1, 0, 3], -1), ([2], 0),
                        (2, 1), (list(range(12)), None), ([3], None)):
        def program(M, x):
            return x.repeat_interleave(M.tensor(counts, dtype=getattr(M, dtype)), dim)
        assert_matches_torch(program, [a], device, name=False)
    ours = mg.repeat_interleave(mg.tensor([1, 0, 3], device=device))
    np.testing.assert_array_equal(ours.numpy(), torch.repeat_interleave(
        torch.tensor([1, 0, 3])).numpy())
    assert ours.dtype == mg.int64


@needs_torch
def test_repeat_interleave_dtypes_and_output_size(device):
    for a in (np.array([True, False]), np.array([1, 2], np.int32), np.array(3.0)):
        ours = mg.tensor(a, device=device).repeat_interleave(2)
        theirs = torch.tensor(a).repeat_interleave(2)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    x = mg.ones(2, 3, device=device)
    assert x.repeat_interleave(2, 0, output_size=4).shape == (4, 3)
    counts = mg.tensor([1, 2], device=device)
    assert x.repeat_interleave(counts, 0, output_size=3).shape == (3, 3)
    out = x.repeat_interleave(1, 1)  # a copy, never a view of x
    out[0, 0] = 5.0
    assert x[0, 0].item() == 1.0


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M: M.ones(2, 3).tile((-1,)), RuntimeError),
    (lambda M: M.ones(2, 3).tile(2.0), TypeError),
    (lambda M: M.ones(2, 3).repeat_interleave(-1), RuntimeError),
    (lambda M: M.ones(2, 3).repeat_interleave(2.0), TypeError),
    (lambda M: M.ones(2, 3).repeat_interleave(M.tensor([1, -1]), 0), RuntimeError),
    (lambda M: M.ones(2, 3).repeat_interleave(M.tensor([1, 2, 3]), 0), RuntimeError),
    (lambda M: M.ones(2, 3).repeat_interleave(M.tensor([[1, 2]]), 0), RuntimeError),
    (lambda M: M.ones(2, 3).repeat_interleave(M.tensor([1.0, 2.0]), 0), NotImplementedError),
    (lambda M: M.ones(2, 3).repeat_interleave(2, 2), IndexError),
    (lambda M: M.ones(2, 3).repeat_interleave(2, 0, output_size=5), RuntimeError),
    (lambda M: M.tensor(3.0).repeat_interleave(2, 0), IndexError),
    (lambda M: M.tensor(3.0).repeat_interleave(M.tensor([2]), 0), IndexError),
    (lambda M: M.repeat_interleave(M.tensor([[1, 2]])), RuntimeError),
    (lambda M: M.repeat_interleave(M.tensor([1, -2])), RuntimeError),
    (lambda M: M.repeat_interleave(M.tensor([1.0, 2.0])), NotImplementedError),
])
def test_tile_and_repeat_interleave_errors(device, program, kind):
    raises_as_torch(program, kind, device)


# --- scatter, scatter_add, index_add -----------------------------------------------------------

def _scatter_index(shape, index_shape, dim, key=0):
    """An index of ``index_shape`` into dim ``dim`` of ``shape``, no place twice in a slice
    (where scatter's result would depend on the order of the writes)."""
    rng = rng_for(shape, index_shape, dim, key)
    moved = [rng.permutation(shape[dim])[:index_shape[dim]]
             for _ in range(int(np.prod(index_shape)) // index_shape[dim])]
    rest = index_shape[:dim] + index_shape[dim + 1:]
    return np.moveaxis(np.array(moved).reshape(rest + (index_shape[dim],)), -1, dim)


SCATTERS = [((3, 4), (2, 4), 0), ((3, 4), (2, 3), 0), ((3, 4), (3, 2), 1), ((3, 4), (1, 1), 1),
            ((2, 3, 4), (2, 2, 3), 1), ((2, 3, 4), (1, 3, 4), 2), ((5,), (3,), 0)]


@needs_torch
@pytest.mark.parametrize("shape, index_shape, dim", SCATTERS)
def test_scatter(device, shape, index_shape, dim):
    index = _scatter_index(shape, index_shape, dim)
    a, src = f64(*shape), f64(*index_shape, key=1)
    bigger = f64(*[n + 1 for n in index_shape], key=2)
    for d in (dim, dim - len(shape)):
        assert_matches_torch(lambda M, x, s: x.scatter(d, M.tensor(index), s), [a, src],
                             device, create_graph=True)
        assert_matches_torch(lambda M, x, s: M.scatter(x, d, M.tensor(index), src=s), [a, src],
                             device)
        assert_matches_torch(lambda M, x: x.scatter(d, M.tensor(index), 2.5), [a], device)
        assert_matches_torch(lambda M, x: x.scatter(d, M.tensor(index), value=-1), [a], device)
        # a src larger than the index: only its first entries are written (torch's
        # backward refuses this case, so only the values are compared)
        ours = mg.tensor(a, device=device).scatter(d, mg.tensor(index, device=device),
                                                   mg.tensor(bigger, device=device))
        theirs = torch.tensor(a).scatter(d, torch.tensor(index), torch.tensor(bigger))
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    i = mg.tensor(index, device=device)
    assert_jvp_rule(lambda x, s: x.scatter(dim, i, s), [a, src], device)
    assert_jvp_rule(lambda x: x.scatter(dim, i, 0.5), [a], device)
    x = mg.tensor(a, device=device, requires_grad=True)
    s = mg.tensor(bigger, device=device, requires_grad=True)
    assert mg.autograd.gradcheck(lambda x, s: x.scatter(dim, i, s) ** 2, (x, s))


@needs_torch
@pytest.mark.parametrize("shape, index_shape, dim", SCATTERS)
def test_scatter_add(device, shape, index_shape, dim):
    rng = rng_for(shape, index_shape, "add")
    index = rng.integers(0, shape[dim], index_shape)  # repeats accumulate
    a, src = f64(*shape), f64(*index_shape, key=1)
    assert_matches_torch(lambda M, x, s: x.scatter_add(dim, M.tensor(index), s), [a, src],
                         device, create_graph=True)
    assert_matches_torch(lambda M, x, s: M.scatter_add(x * 2, dim, M.tensor(index), s * s),
                         [a, src], device, create_graph=True)
    x = mg.tensor(a, device=device, requires_grad=True)
    s = mg.tensor(src, device=device, requires_grad=True)
    i = mg.tensor(index, device=device)
    assert mg.autograd.gradcheck(lambda x, s: x.scatter_add(dim, i, s) ** 2, (x, s))
    assert_jvp_rule(lambda x, s: x.scatter_add(dim, i, s), [a, src], device)


@needs_torch
@pytest.mark.parametrize("shape, dim, index", [((4, 3), 0, [0, 2, 0]), ((4, 3), 1, [2, 2]),
                                               ((2, 3, 4), -1, [3, 0, 1, 3, 3]),
                                               ((5,), 0, [4]), ((4, 3), 0, [])])
@pytest.mark.parametrize("alpha", [1, 2.5, -1])
def test_index_add(device, shape, dim, index, alpha):
    source_shape = list(shape)
    source_shape[dim] = len(index)
    a, source = f64(*shape), f64(*source_shape, key=1)
    assert_matches_torch(
        lambda M, x, s: x.index_add(dim, M.tensor(index, dtype=M.int64), s, alpha=alpha),
        [a, source], device, create_graph=True)
    assert_matches_torch(
        lambda M, x, s: M.index_add(x, dim, M.tensor(index, dtype=M.int32), s, alpha=alpha),
        [a, source], device)
    x = mg.tensor(a, device=device, requires_grad=True)
    s = mg.tensor(source, device=device, requires_grad=True)
    i = mg.tensor(index, dtype=mg.int64, device=device)
    assert_jvp_rule(lambda x, s: x.index_add(dim, i, s, alpha=alpha), [a, source], device)
    if index:
        assert mg.autograd.gradcheck(lambda x, s: x.index_add(dim, i, s, alpha=alpha) ** 2,
                                     (x, s))


@needs_torch
def test_scatter_family_dtypes_and_0d(device):
    programs = [
        lambda M: M.zeros(3, dtype=M.int64).scatter(0, M.tensor([1]), 2.7),
        lambda M: M.zeros(3, dtype=M.uint8).scatter(0, M.tensor([1]), -1),
        lambda M: M.zeros(3, dtype=M.int64).scatter(0, M.tensor([2]), True),
        lambda M: M.zeros(3, dtype=M.bool).scatter(0, M.tensor([1]), 1),
        lambda M: M.zeros(3, dtype=M.int64).scatter_add(0, M.tensor([1, 1]), M.tensor([1, 2])),
        lambda M: M.zeros(3, dtype=M.bool).scatter_add(
            0, M.tensor([1, 1]), M.tensor([True, True])),
        lambda M: M.zeros(3, dtype=M.int64).index_add(
            0, M.tensor([0, 1, 0]), M.ones(3, dtype=M.int64), alpha=2.5),
        lambda M: M.zeros(2, 3, dtype=M.int32).index_add(
            1, M.tensor([2, 2]), M.ones(2, 2, dtype=M.int32)),
        lambda M: M.tensor(1.0).scatter(0, M.tensor(0), M.tensor(5.0)),
        lambda M: M.tensor(1.0).scatter_add(0, M.tensor([0]), M.tensor([5.0])),
        lambda M: M.tensor([1.0]).scatter(0, M.tensor(0), M.tensor(5.0)),
        lambda M: M.tensor(1.0).index_add(0, M.tensor([0]), M.tensor(2.0)),
        lambda M: M.ones(2, 3).index_add(1, M.tensor(1), M.ones(2, 1)),
        lambda M: M.ones(2, 3).scatter(0, M.zeros(0, dtype=M.int64), 1.0),
        lambda M: M.ones(2, 3).scatter(0, M.tensor([[0, 1]], dtype=M.int32), 7.0),
    ]
    for program in programs:
        ours, theirs = program(On(mg, device)), program(torch)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@needs_torch
@pytest.mark.parametrize("op", ["scatter_", "scatter_value_", "scatter_add_", "index_add_"])
def test_scatter_family_in_place(device, op):
    """The in-place forms write into the tensor (and return it) and are recorded in the
    graph: gradients reach the tensor's history and the source, as torch's, also through a
    view."""
    a, src = f64(3, 4), f64(2, 4, key=1)
    index = _scatter_index((3, 4), (2, 4), 0)

    def write(M, t, s):
        i = M.tensor(index) if op != "index_add_" else M.tensor([2, 0])
        if op == "scatter_":
            return t.scatter_(0, i, s)
        if op == "scatter_value_":
            return t.scatter_(0, i, value=0.5)
        return getattr(t, op)(0, i, s) if op == "scatter_add_" else t.index_add_(0, i, s,
                                                                                 alpha=2)

    def program(M, x, s):
        y = x * 1.0
        out = write(M, y, s)
        assert out is y
        return y * x

    def through_view(M, x, s):
        y = x * 1.0
        write(M, y[1:], s[:, :4] if op != "index_add_" else s)
        return y * x
    for p in (program, through_view):
        assert_matches_torch(p, [a, src] if p is program else [np.vstack([a, a[:1]]), src],
                             device, create_graph=True)
    with mg.no_grad():  # no graph: written in place all the same
        y = mg.tensor(a, device=device)
        write(On(mg, device), y, mg.tensor(src, device=device))
    t = torch.tensor(a)
    write(torch, t, torch.tensor(src))
    np.testing.assert_array_equal(y.numpy(), t.numpy())


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M: M.ones(2, 3).scatter(0, M.tensor([[0, 1]]).float(), 1.0), RuntimeError),
    (lambda M: M.ones(2, 3).scatter(0, M.tensor([[0, 5]]), 1.0), RuntimeError),
    (lambda M: M.ones(2, 3).scatter(0, M.tensor([[0, -1]]), 1.0), RuntimeError),
    (lambda M: M.ones(2, 3).scatter(0, M.tensor([0, 1]), 1.0), RuntimeError),
    (lambda M: M.ones(2, 3).scatter(0, M.tensor([[0, 1]]), M.ones(1, 2).double()),
     RuntimeError),
    (lambda M: M.ones(2, 3).scatter(1, M.tensor([[0, 1], [0, 1], [1, 1]]), 1.0), RuntimeError),
    (lambda M: M.ones(2, 3).scatter(0, M.tensor([[0, 1, 0, 1]]), 1.0), RuntimeError),
    (lambda M: M.ones(2, 3).scatter(0, M.tensor([[0, 1]]), M.ones(1, 1)), RuntimeError),
    (lambda M: M.ones(2, 3).scatter(0, M.tensor([[0, 1]]), M.tensor(1.0)), RuntimeError),
    (lambda M: M.ones(2, 3).scatter(2, M.tensor([[0, 1]]), 1.0), IndexError),
    (lambda M: M.ones(2, 3).scatter_add(0, M.tensor([[0, 1]]), 1.0), TypeError),
    (lambda M: M.ones(2, 3).scatter_add(0, M.tensor([[0, 5]]), M.ones(1, 2)), RuntimeError),
    (lambda M: M.ones(2, 3).scatter_add(0, M.tensor([[0, 1]]), M.ones(1, 2, dtype=M.int64)),
     RuntimeError),
    (lambda M: M.ones(2, 3).index_add(0, M.tensor([0.0, 1.0]), M.ones(2, 3)), RuntimeError),
    (lambda M: M.ones(2, 3).index_add(0, M.tensor([[0, 1]]), M.ones(2, 3)), IndexError),
    (lambda M: M.ones(2, 3).index_add(0, M.tensor([0, 1]), M.ones(2, 3).double()),
     RuntimeError),
    (lambda M: M.ones(2, 3).index_add(0, M.tensor([0, 1]), M.ones(3, 3)), RuntimeError),
    (lambda M: M.ones(2, 3).index_add(0, M.tensor([0, 1]), M.ones(2, 2)), RuntimeError),
    (lambda M: M.ones(2, 3).index_add(0, M.tensor([0, 2]), M.ones(2, 3)), RuntimeError),
    (lambda M: M.ones(2, 3).index_add(0, M.tensor([0, -1]), M.ones(2, 3)), RuntimeError),
    (lambda M: M.ones(2, 3).index_add(1, M.tensor([0]), M.ones(2)), RuntimeError),
    (lambda M: M.ones(2, 3).index_add(0, M.tensor([0]), 1.0), TypeError),
    (lambda M: M.zeros(2, 3, requires_grad=True).scatter_(0, M.tensor([[0, 1]]), 1.0),
     RuntimeError),
    (lambda M: M.zeros(2, 3).scatter_(0, M.tensor([[0, 1]]), M.ones(1, 2).double()),
     RuntimeError),
    (lambda M: M.zeros(2, 3).expand(2, 2, 3).scatter_add_(0, M.tensor([[[0, 1, 0]]]),
                                                          M.ones(1, 1, 3)), RuntimeError),
])
def test_scatter_family_errors(device, program, kind):
    raises_as_torch(program, kind, device)


# --- nn.functional.pad -------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("shape, pad", [((2, 3), (1, 2)), ((2, 3), (1, 2, 0, 1)),
                                        ((2, 3), (-1, 1)), ((2, 3), (-2, -1, 2, -1)),
                                        ((2, 3), ()), ((2, 3), (0, 0)), ((3,), (2, 0)),
                                        ((2, 3, 4), (1, 1, 1, 1, 1, 1)), ((2, 3), (-3, 0)),
                                        ((2, 3, 4), [0, 0, 2, 1]), ((), ())])
@pytest.mark.parametrize("value", [None, 2.5])
def test_pad_constant(device, shape, pad, value):
    a = f64(*shape)
    assert_matches_torch(lambda M, x: functional(M).pad(x, pad, value=value), [a], device,
                         create_graph=True, exact=True, name=False)
    assert_matches_torch(lambda M, x: functional(M).pad(x * x, pad, "constant", value), [a],
                         device, create_graph=True, name=False)


@needs_torch
@pytest.mark.parametrize("a, value", [(np.array([[1, 2, 3]]), 2.7), (np.array([[1, 2, 3]]), -4),
                                      (np.array([True, False]), 1),
                                      (np.array([[1, 2]], np.uint8), 7),
                                      (np.array([1.0, 2.0], np.float32), 0.1)])
def test_pad_constant_dtypes(device, a, value):
    ours = F.pad(mg.tensor(a, device=device), (1, 2), value=value)
    theirs = torch.nn.functional.pad(torch.tensor(a), (1, 2), value=value)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


PADS = [((2, 5), (2, 3)), ((2, 3, 5), (1, 4)), ((2, 5), (-1, 2)), ((3, 4, 5), (1, 2, 3, 1)),
        ((2, 3, 4, 5), (1, 2, 0, 3)), ((2, 3, 4, 5), (2, 1, 3, 2, 1, 2)),
        ((1, 2, 3, 4, 5), (1, 1, 2, 2, 1, 0)), ((2, 5), (-2, -1)), ((0, 3, 4), (1, 2))]


@needs_torch
@pytest.mark.parametrize("shape, pad", PADS)
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes(device, shape, pad, mode):
    if mode == "reflect" and max(pad) >= min(shape[-len(pad) // 2:]):
        pad = tuple(min(p, 1) for p in pad)
    a = f64(*shape)
    assert_matches_torch(lambda M, x: functional(M).pad(x, pad, mode=mode), [a], device,
                         create_graph=True, exact=True, name=False)
    if a.size:
        x = mg.tensor(a, device=device, requires_grad=True)
        assert mg.autograd.gradcheck(lambda x: F.pad(x, pad, mode=mode) ** 2, (x,))


@needs_torch
def test_pad_modes_dtypes(device):
    for a, mode in ((np.array([[1, 2, 3]]), "reflect"), (np.array([[1, 2, 3]]), "circular"),
                    (np.array([[True, False, True]]), "circular"),
                    (np.array([[1, 2, 3]], np.int32), "replicate")):
        ours = F.pad(mg.tensor(a, device=device), (2, 1), mode=mode)
        theirs = torch.nn.functional.pad(torch.tensor(a), (2, 1), mode=mode)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    x = F.pad(mg.ones(2, 3, device=device), (1, 1), mode="reflect", value=0)
    assert x.shape == (2, 5)


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M, F: F.pad(M.ones(2, 3), (1,)), RuntimeError),
    (lambda M, F: F.pad(M.ones(2, 3), (1, 1, 1, 1, 1, 1)), RuntimeError),
    (lambda M, F: F.pad(M.ones(2, 3), (1.0, 1)), TypeError),
    (lambda M, F: F.pad(M.ones(2, 3), (True, 1)), TypeError),
    (lambda M, F: F.pad(M.ones(2, 3), (-3, -1)), RuntimeError),
    (lambda M, F: F.pad(M.ones(2, 3), (1, 1), mode="bogus"), NotImplementedError),
    (lambda M, F: F.pad(M.ones(2, 3), (1, 1), mode="reflect", value=3), RuntimeError),
    (lambda M, F: F.pad(M.ones(2, 3), (3, 1), mode="reflect"), RuntimeError),
    (lambda M, F: F.pad(M.ones(2, 3), (1, 1, 1, 1), mode="reflect"), NotImplementedError),
    (lambda M, F: F.pad(M.ones(3), (1, 1), mode="replicate"), NotImplementedError),
    (lambda M, F: F.pad(M.ones(1, 1, 2, 3), (1, 1), mode="circular"), NotImplementedError),
    (lambda M, F: F.pad(M.ones(2, 3), (), mode="reflect"), NotImplementedError),
    (lambda M, F: F.pad(M.ones(2, 3), (4, 1), mode="circular"), RuntimeError),
    (lambda M, F: F.pad(M.ones(2, 3), (-2, -2), mode="circular"), RuntimeError),
    (lambda M, F: F.pad(M.ones(2, 3), (-3, 0), mode="reflect"), RuntimeError),
    (lambda M, F: F.pad(M.zeros(2, 0), (1, 1), mode="reflect"), RuntimeError),
    (lambda M, F: F.pad(M.zeros(2, 0, 3), (1, 1), mode="replicate"), RuntimeError),
    (lambda M, F: F.pad(M.tensor([[True, False]]), (1, 1), mode="reflect"),
     NotImplementedError),
])
def test_pad_errors(device, program, kind):
    raises_as_torch(lambda M: program(M, functional(M if M is torch else mg)), kind, device)


# --- cosine_similarity ---------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("shape1, shape2, dim", [((3, 4), (3, 4), 1), ((3, 4), (3, 4), 0),
                                                 ((3, 4), (4,), -1), ((3, 4), (3, 1), 1),
                                                 ((2, 3, 4), (3, 4), 1), ((4,), (4,), 0),
                                                 ((), (), 0), ((5, 3), (1, 3), -1)])
def test_cosine_similarity(device, shape1, shape2, dim):
    a, b = f64(*shape1), f64(*shape2, key=1)
    for eps in (1e-8, 0.5):
        assert_matches_torch(lambda M, x, y: functional(M).cosine_similarity(x, y, dim, eps),
                             [a, b], device, create_graph=True)
    x = mg.tensor(a, device=device, requires_grad=True)
    y = mg.tensor(b, device=device, requires_grad=True)
    assert mg.autograd.gradcheck(lambda x, y: F.cosine_similarity(x, y, dim), (x, y))


@needs_torch
def test_cosine_similarity_small_norms_and_dtypes(device):
    """Below eps the norm is clamped in the value but not in the gradient, as torch."""
    a = np.array([[1e-9, 2e-9, 0.0], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0]])
    b = np.array([[1.0, 2.0, 0.5], [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    assert_matches_torch(lambda M, x, y: functional(M).cosine_similarity(x, y), [a, b], device)
    for x, y in ((np.array([1, 2]), np.array([1.0, 3.0], np.float32)),
                 (np.array([1, 2]), np.array([1.0, 3.0])),
                 (np.array([True, False]), np.array([1.0, 3.0], np.float32)),
                 (np.array([1.0, 2.0], np.float16), np.array([1.0, 3.0], np.float16))):
        ours = F.cosine_similarity(mg.tensor(x, device=device), mg.tensor(y, device=device), 0)
        theirs = torch.nn.functional.cosine_similarity(torch.tensor(x), torch.tensor(y), 0)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(),
                                   **TOL[np.dtype(ours.numpy().dtype)])


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M, F: F.cosine_similarity(M.tensor([1, 2]), M.tensor([1, 3]), 0), RuntimeError),
    (lambda M, F: F.cosine_similarity(M.ones(2, 3), M.ones(2, 2)), RuntimeError),
    (lambda M, F: F.cosine_similarity(M.ones(2, 3), M.ones(2, 3), 2), IndexError),
])
def test_cosine_similarity_errors(device, program, kind):
    raises_as_torch(lambda M: program(M, functional(M if M is torch else mg)), kind, device)


# --- softplus, leaky_relu, logsigmoid -----------------------------------------------------------

EXTREMES = np.array([0.0, -1.0, 1.0, 19.9, 20.0, 20.1, 25.0, 30.0, -30.0, -800.0, 800.0,
                     1e-20, -1e-20, 2.5, -2.5])


@needs_torch
@pytest.mark.parametrize("name, kwargs", [("softplus", {}), ("softplus", dict(beta=2)),
                                          ("softplus", dict(beta=0.5, threshold=3)),
                                          ("softplus", dict(beta=-1.0)),
                                          ("leaky_relu", {}),
                                          ("leaky_relu", dict(negative_slope=0.2)),
                                          ("leaky_relu", dict(negative_slope=-0.5)),
                                          ("logsigmoid", {})])
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (2, 3, 4)])
def test_activations(device, name, kwargs, shape):
    a = f64(*shape) * 6
    assert_matches_torch(lambda M, x: getattr(functional(M), name)(x, **kwargs), [a], device,
                         create_graph=True, name=False)
    assert_matches_torch(lambda M, x: getattr(functional(M), name)(x, **kwargs), [EXTREMES],
                         device, name=False)
    x = mg.tensor(a, device=device, requires_grad=True)
    assert mg.autograd.gradcheck(lambda x: getattr(F, name)(x, **kwargs), (x,))
    assert_jvp_rule(lambda x: getattr(F, name)(x, **kwargs), [a], device)


@needs_torch
@pytest.mark.parametrize("name", ["softplus", "leaky_relu", "logsigmoid"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_activations_low_precision(device, name, dtype):
    a = (rng_for(name, dtype).standard_normal(50) * 8).astype(dtype)
    ours = getattr(F, name)(mg.tensor(a, device=device))
    theirs = getattr(torch.nn.functional, name)(torch.tensor(a))
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **TOL[np.dtype(dtype)])


@needs_torch
def test_leaky_relu_in_place(device):
    def program(M, x):
        y = x * 1.0
        out = functional(M).leaky_relu(y, 0.2, inplace=True)
        assert out is y
        return y * x
    assert_matches_torch(program, [f64(3, 4)], device, create_graph=True, name=False)
    assert_matches_torch(lambda M, x: functional(M).leaky_relu(x * 1.0, 0.3, True), [f64(5)],
                         device, name=False)


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M, F: F.softplus(M.tensor([1, 2])), NotImplementedError),
    (lambda M, F: F.leaky_relu(M.tensor([1, -2])), NotImplementedError),
    (lambda M, F: F.leaky_relu(M.tensor([True])), NotImplementedError),
    (lambda M, F: F.logsigmoid(M.tensor([1, 2])), NotImplementedError),
    (lambda M, F: F.leaky_relu(M.ones(2, requires_grad=True), 0.2, True), RuntimeError),
])
def test_activation_errors(device, program, kind):
    raises_as_torch(lambda M: program(M, functional(M if M is torch else mg)), kind, device)


# --- modules ------------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("make", [lambda nn: nn.Softplus(), lambda nn: nn.Softplus(2, 5),
                                  lambda nn: nn.Softplus(beta=0.5), lambda nn: nn.LeakyReLU(),
                                  lambda nn: nn.LeakyReLU(0.2, True),
                                  lambda nn: nn.LeakyReLU(negative_slope=0.3),
                                  lambda nn: nn.LogSigmoid(), lambda nn: nn.CosineSimilarity(),
                                  lambda nn: nn.CosineSimilarity(0, 1e-6)])
def test_modules(device, make):
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    a, b = f64(3, 4) * 4, f64(3, 4, key=1)
    if isinstance(ours, nn.CosineSimilarity):
        got = ours(mg.tensor(a, device=device), mg.tensor(b, device=device))
        want = theirs(torch.tensor(a), torch.tensor(b))
    else:
        got = ours(mg.tensor(a, device=device) * 1.0)
        want = theirs(torch.tensor(a) * 1.0)
    np.testing.assert_allclose(got.numpy(), want.numpy(), **TOL[np.dtype(np.float64)])


# --- graph nodes named as torch's ---------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("program", [
    lambda M, x: x.prod(), lambda M, x: x.prod(1), lambda M, x: x.cumprod(0),
    lambda M, x: x.masked_select(x > 0), lambda M, x: x.scatter(0, M.tensor([[1, 0, 1]]), x[:1]),
    lambda M, x: x.scatter(1, M.tensor([[1], [0]]), 2.0),
    lambda M, x: x.scatter_add(0, M.tensor([[1, 0, 1]]), x[:1]),
    lambda M, x: x.index_add(0, M.tensor([1]), x[:1]),
    lambda M, x: x.repeat_interleave(2, 0),
], ids=["prod", "prod_dim", "cumprod", "masked_select", "scatter", "scatter_value",
        "scatter_add", "index_add", "repeat_interleave"])
def test_grad_fn_names(device, program):
    a = np.array([[1.0, -2.0, 3.0], [4.0, 5.0, -6.0]])
    ours = program(On(mg, device), mg.tensor(a, device=device, requires_grad=True))
    theirs = program(torch, torch.tensor(a, requires_grad=True))
    assert node_name(ours) == node_name(theirs)
    assert ours.grad_fn.name() == theirs.grad_fn.name()
