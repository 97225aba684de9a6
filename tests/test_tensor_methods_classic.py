"""Tensor methods of classic teaching programs (the Annotated Transformer, nanoGPT,
makemore, ...): index_fill, addmm, baddbmm, mv, dot, outer, clamp_min/max, the in-place
tril_, triu_, fill_diagonal_ and shape changes, data_ptr/nbytes/itemsize, mg.as_tensor and
the comparison functions; gradcheck in float64 and forward and backward against PyTorch."""
import numpy as np
import pytest

import minigrad as mg
from tests.test_ops_elementwise import (DTYPES, TOL, assert_gradcheck, assert_parity, lib,
                                        sample)
from tests.torch_ref import On, needs_torch, torch

IDX = np.array([0, 2, 0], np.int64)


def _unleafed(t):
    return t * 1  # (a non-leaf, so that an in-place op on it is recorded)


def _in_place(name, *args):
    def fn(t):
        out = _unleafed(t)
        getattr(out, name)(*args)
        return out * out
    return fn


# (id, input shapes (or int64 arrays), function of the inputs)
CASES = [
    ("index_fill_dim1", [(3, 4), IDX], lambda x, i: x.index_fill(1, i, -1.5)),
    ("index_fill_dim_neg", [(3, 4), IDX[:2]], lambda x, i: x.index_fill(-2, i, 2.0)),
    ("index_fill_value_tensor", [(3, 4), IDX, ()], lambda x, i, v: x.index_fill(1, i, v)),
    ("index_fill_3d", [(2, 3, 4), np.array([1, -1])], lambda x, i: x.index_fill(2, i, 0.5)),
    ("index_fill_0d", [(), np.array([0])], lambda x, i: x.index_fill(0, i, 3.0)),
    ("index_fill_empty", [(3, 4), np.zeros(0, np.int64)], lambda x, i: x.index_fill(0, i, 1.0)),
    ("index_fill_scalar_index", [(3, 4), np.array(1)], lambda x, i: x.index_fill(0, i, 1.0)),
    ("index_fill_fn", [(3, 4), IDX], lambda x, i: lib(x).index_fill(x, 1, i, 1.0)),
    ("index_fill_", [(3, 4), IDX, ()],
     lambda x, i, v: _unleafed(x).index_fill_(1, i, v) * x),
    ("addmm", [(4,), (3, 2), (2, 4)], lambda x, a, b: x.addmm(a, b)),
    ("addmm_scaled", [(3, 1), (3, 2), (2, 4)], lambda x, a, b: x.addmm(a, b, beta=0.5, alpha=2)),
    ("addmm_fn", [(3, 4), (3, 2), (2, 4)], lambda x, a, b: lib(x).addmm(x, a, b, alpha=-1)),
    ("baddbmm", [(2, 3, 4), (2, 3, 5), (2, 5, 4)], lambda x, a, b: x.baddbmm(a, b)),
    ("baddbmm_scaled", [(1, 4), (2, 3, 5), (2, 5, 4)],
     lambda x, a, b: lib(x).baddbmm(x, a, b, beta=2, alpha=0.25)),
    ("mv", [(3, 4), (4,)], lambda x, v: x.mv(v)),
    ("dot", [(5,), (5,)], lambda x, y: x.dot(y)),
    ("outer", [(3,), (4,)], lambda x, y: lib(x).outer(x, y)),
    ("clamp_min", [(3, 4)], lambda x: x.clamp_min(0.3)),
    ("clamp_max", [(3, 4)], lambda x: lib(x).clamp_max(x, -0.3)),
    ("clamp_min_", [(3, 4)], _in_place("clamp_min_", 0.3)),
    ("clamp_max_", [(3, 4)], _in_place("clamp_max_", -0.3)),
    ("broadcast_to", [(3, 1)], lambda x: x.broadcast_to((2, 3, 4))),
    ("tril_", [(4, 4)], _in_place("tril_")),
    ("triu_", [(2, 3, 4)], _in_place("triu_", 1)),
    ("fill_diagonal_", [(3, 4)], _in_place("fill_diagonal_", 2.0)),
    ("fill_diagonal_wrap", [(7, 2)], _in_place("fill_diagonal_", 2.0, True)),
    ("fill_diagonal_cube", [(3, 3, 3)], _in_place("fill_diagonal_", -1.0)),
    ("squeeze_", [(3, 1, 4)], _in_place("squeeze_")),
    ("squeeze_dim", [(3, 1, 4)], _in_place("squeeze_", 1)),
    ("unsqueeze_", [(3, 4)], _in_place("unsqueeze_", -1)),
    ("t_", [(3, 4)], _in_place("t_")),
    ("transpose_", [(2, 3, 4)], _in_place("transpose_", 0, 2)),
    ("addcmul", [(3, 4), (3, 1), (4,)], lambda x, a, b: x.addcmul(a, b)),
    ("addcmul_value", [(3, 4), (3, 4), (3, 4)],
     lambda x, a, b: lib(x).addcmul(x, a, b, value=-0.5)),
    ("addcdiv", [(3, 4), (3, 4), (1, 4)], lambda x, a, b: x.addcdiv(a, b, value=2)),
    ("addcmul_", [(3, 4), (3, 4), (3, 4)],
     lambda x, a, b: _unleafed(x).addcmul_(a, b, value=0.25) * x),
    ("addcdiv_", [(3, 4), (3, 4), (3, 4)], lambda x, a, b: _unleafed(x).addcdiv_(a, b) * x),
    ("lerp_small", [(3, 4), (3, 4)], lambda x, y: x.lerp(y, 0.3)),
    ("lerp_large", [(3, 4), (4,)], lambda x, y: lib(x).lerp(x, y, 0.7)),
    ("lerp_tensor", [(2, 4), (2, 4), np.array([[0.1, 0.7, -0.3, 0.6]])],
     lambda x, y, w: x.lerp(y, w)),
    ("lerp_", [(3, 4), (3, 4)], lambda x, y: _unleafed(x).lerp_(y, 0.9) * x),
    ("select", [(3, 4)], lambda x: x.select(1, 2)),
    ("select_neg", [(2, 3, 4)], lambda x: lib(x).select(x, -3, -1)),
    ("diagonal", [(3, 4)], lambda x: x.diagonal()),
    ("diagonal_offset", [(3, 4)], lambda x: x.diagonal(1)),
    ("diagonal_neg_offset", [(4, 3)], lambda x: lib(x).diagonal(x, -2)),
    ("diagonal_dims", [(2, 3, 4)], lambda x: x.diagonal(0, 2, 0)),
    ("diagonal_empty", [(3, 4)], lambda x: x.diagonal(5)),
    ("trace", [(3, 4)], lambda x: x.trace()),
    ("take_along_dim", [(3, 4), np.array([[0, 3], [2, 2], [1, 0]])],
     lambda x, i: x.take_along_dim(i, 1)),
    ("take_along_dim_broadcast", [(3, 4), np.array([[2], [0]]).reshape(1, 2)],
     lambda x, i: lib(x).take_along_dim(x, i.reshape(2, 1), 0)),
    ("take_along_dim_flat", [(3, 4), np.array([5, 0, 11])], lambda x, i: x.take_along_dim(i)),
    ("multiply", [(3, 4), (4,)], lambda x, y: lib(x).multiply(x, y)),
    ("divide", [(3, 4), (4,)], lambda x, y: x.divide(y)),
    ("true_divide", [(3, 4), (4,)], lambda x, y: x.true_divide(y)),
    ("subtract", [(3, 4), (4,)], lambda x, y: lib(x).subtract(x, y, alpha=2)),
    ("negative", [(3, 4)], lambda x: x.negative()),
    ("absolute", [(3, 4)], lambda x: lib(x).absolute(x)),
]


def _einsum(equation):
    def fn(*xs):
        return lib(xs[0]).einsum(equation, *xs)
    fn.equation = equation
    return fn


def _summed_tolerance(equation, arrays, dtype, seed=0):
    """The tolerance of an einsum case. A sum of products rounds by a few ulps of the
    magnitudes summed, in whatever order it runs (another contraction path, another BLAS),
    and an element may cancel far below them: atol is 4 ulps of the largest sum of |terms|
    in the result and in the gradients that ``assert_parity`` compares (those of
    sum(out * w), w its weights), never below TOL's. Those sums are the same einsum of the
    |inputs|, and its gradients of sum(out * |w|), in float64."""
    xs = [torch.tensor(np.abs(a).astype(np.float64), requires_grad=True) for a in arrays]
    out = torch.einsum(equation, *xs)
    w = np.random.default_rng(seed).standard_normal(tuple(out.shape))  # assert_parity's
    (out * torch.tensor(np.abs(w))).sum().backward()
    largest = max(float(t.detach().abs().max()) for t in [out, *(x.grad for x in xs)]
                  if t.numel())
    tol = TOL[np.dtype(dtype)]
    return dict(rtol=tol["rtol"], atol=max(tol["atol"], 4 * np.finfo(dtype).eps * largest))


EINSUMS = [("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("ii", [(3, 3)]),
           ("ii->i", [(3, 3)]), ("ij->ji", [(2, 3)]), ("...j,jk->...k", [(5, 2, 3), (3, 4)]),
           ("bi,bj->bij", [(1, 3), (4, 2)]), ("i,j->ij", [(3,), (4,)]),
           ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("i,i->", [(3,), (3,)]),
           ("ij->", [(2, 3)]), ("ijk,ikl,lm->jm", [(2, 3, 4), (2, 4, 5), (5, 6)]),
           ("bij,bjk->bik", [(2, 3, 4), (1, 4, 5)]), ("ij,j->i", [(3, 1), (4,)]),
           ("...ii->...i", [(2, 3, 3)]), ("i...,i...->...", [(3, 2), (3, 2)]),
           ("ab,ab,ab->a", [(2, 3), (2, 3), (2, 3)]), ("b i d, b j d -> b i j", [(2, 3, 4)] * 2)]
CASES += [("einsum " + eq, shapes, _einsum(eq)) for eq, shapes in EINSUMS]


def _inputs(shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [s if isinstance(s, np.ndarray) else sample(rng, s, "nonzero") for s in shapes]


@pytest.mark.parametrize("shapes, fn", [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_gradcheck(device, shapes, fn):
    assert_gradcheck(fn, _inputs(shapes), device)


@needs_torch
@DTYPES
@pytest.mark.parametrize("shapes, fn", [pytest.param(*row[1:], id=row[0]) for row in CASES])
def test_matches_torch(device, shapes, fn, dtype):
    arrays = [a if a.dtype.kind != "f" else a.astype(dtype) for a in _inputs(shapes)]
    tol = _summed_tolerance(fn.equation, arrays, dtype) if hasattr(fn, "equation") else {}
    assert_parity(fn, arrays, device, **tol)


# --- index_fill: dtypes and errors ----------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("dtype", ["float16", "int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("value", [2, 1.5, True, "tensor"])
def test_index_fill_dtypes(device, dtype, value):
    def program(M):
        x = M.arange(12).reshape(3, 4).to(getattr(M, dtype))
        v = M.tensor(2.5) if value == "tensor" else value
        return x.index_fill(1, M.tensor([0, 3]), v)
    ref, ours = program(torch), program(On(mg, device))
    assert ours.dtype == ref.numpy().dtype
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


def test_index_fill_value_of_another_dtype_gets_its_own_gradient(device):
    v = mg.tensor(2.0, dtype=mg.float64, device=device, requires_grad=True)
    x = mg.ones(3, 4, device=device, requires_grad=True)
    out = x.index_fill(1, mg.tensor([0, 0, 2], device=device), v)
    assert out.dtype == mg.float32
    (out * mg.arange(12.0, device=device).reshape(3, 4)).sum().backward()
    assert v.grad.dtype == mg.float64 and v.grad.item() == 30.0  # (columns 0 and 2, once each)


INDEX_FILL_ERRORS = [
    (lambda M, x: x.index_fill(1, M.tensor([0, 2]).int(), 1.0), IndexError),
    (lambda M, x: x.index_fill(1, M.tensor([0, 2]).float(), 1.0), IndexError),
    (lambda M, x: x.index_fill(1, M.tensor([[0], [2]]), 1.0), RuntimeError),
    (lambda M, x: x.index_fill(1, M.tensor([4]), 1.0), IndexError),
    (lambda M, x: x.index_fill(1, M.tensor([-5]), 1.0), IndexError),
    (lambda M, x: x.index_fill(2, M.tensor([0]), 1.0), IndexError),
    (lambda M, x: x.index_fill(1, M.tensor([0]), M.tensor([1.0])), RuntimeError),
    (lambda M, x: x.index_fill(1, [0], 1.0), TypeError),
    (lambda M, x: x.to(M.uint8).index_fill(1, M.tensor([0]), 300), RuntimeError),
]


@needs_torch
@pytest.mark.parametrize("program, error", INDEX_FILL_ERRORS)
def test_index_fill_errors(device, program, error):
    with pytest.raises(error):
        program(torch, torch.zeros(3, 4))
    M = On(mg, device)
    with pytest.raises(error):
        program(M, M.zeros(3, 4))
        mg.backend.raise_pending()  # (on a GPU an index's error comes at the next read)


def test_index_fill_in_place_writes_through_a_view(device):
    base = mg.zeros(3, 4, device=device)
    base[1:].index_fill_(1, mg.tensor([1], device=device), 5.0)
    assert base.tolist() == [[0, 0, 0, 0], [0, 5, 0, 0], [0, 5, 0, 0]]


# --- in-place shape changes -------------------------------------------------------------------
@needs_torch
@pytest.mark.parametrize("name, args, shape", [("squeeze_", (), (1, 3, 1)),
                                               ("squeeze_", (0,), (1, 3, 1)),
                                               ("unsqueeze_", (1,), (2, 3)),
                                               ("t_", (), (2, 3)), ("t_", (), (3,)),
                                               ("transpose_", (-1, 0), (2, 3, 4))])
def test_shape_changes_in_place_keep_the_object(device, name, args, shape):
    ours, ref = mg.zeros(*shape, device=device), torch.zeros(*shape)
    assert getattr(ours, name)(*args) is ours and getattr(ref, name)(*args) is ref
    assert ours.shape == tuple(ref.shape) and ours.stride() == ref.stride()


def test_shape_change_in_place_of_a_view_writes_to_its_base(device):
    base = mg.zeros(2, 3, device=device)
    v = base[0]
    v.unsqueeze_(0)
    v.mul_(0).add_(7)
    assert v.shape == (1, 3) and base.tolist() == [[7, 7, 7], [0, 0, 0]]


def test_shape_change_in_place_of_a_leaf_that_requires_grad_is_refused():
    x = mg.zeros(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x.unsqueeze_(0)
    with mg.no_grad():
        x.unsqueeze_(0)
    assert x.shape == (1, 2) and x.requires_grad


@needs_torch
@pytest.mark.parametrize("shape", [(3,), (2, 3, 2)])
def test_fill_diagonal_refuses_as_torch(shape):
    with pytest.raises(RuntimeError):
        torch.zeros(shape).fill_diagonal_(1)
    with pytest.raises(RuntimeError):
        mg.zeros(shape).fill_diagonal_(1)


# --- attributes, conversions, functions -----------------------------------------------------
@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint8", "bool"])
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
def test_sizes_in_bytes(device, dtype, shape):
    ours, ref = mg.zeros(shape, dtype=getattr(mg, dtype), device=device), \
        torch.zeros(shape, dtype=getattr(torch, dtype))
    assert (ours.nbytes, ours.itemsize, ours.element_size()) == \
        (ref.nbytes, ref.itemsize, ref.element_size())


def test_data_ptr_is_shared_by_views():
    x = mg.zeros(2, 3)
    assert isinstance(x.data_ptr(), int) and x.data_ptr() != 0
    assert x[0].data_ptr() == x.data_ptr() and x.t().data_ptr() == x.data_ptr()
    assert x[1].data_ptr() == x.data_ptr() + 3 * x.itemsize
    assert x.clone().data_ptr() != x.data_ptr()


def test_as_tensor_shares_what_it_can(device):
    a = np.arange(3, dtype=np.float32)
    t = mg.as_tensor(a)
    a[0] = 9
    assert t.tolist() == [9, 1, 2] and mg.as_tensor(t) is t
    assert mg.as_tensor(a, dtype=mg.float64).dtype == mg.float64
    assert mg.as_tensor([1, 2]).dtype == mg.int64
    moved = mg.as_tensor(t, device=device)
    assert moved.device == mg.Device(device) and (moved is t) == (device == "cpu")


@needs_torch
@pytest.mark.parametrize("name", ["eq", "ne", "lt", "gt", "le", "ge"])
def test_comparison_functions(device, name):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    ours = getattr(mg, name)(mg.tensor(x, device=device), 2)
    np.testing.assert_array_equal(ours.numpy(), getattr(torch, name)(torch.tensor(x), 2).numpy())


@needs_torch
def test_dot_refuses_as_torch():
    for a, b in [((2, 2), (2,)), ((3,), (2,))]:
        with pytest.raises(RuntimeError):
            torch.ones(a).dot(torch.ones(b))
        with pytest.raises(RuntimeError):
            mg.ones(a).dot(mg.ones(b))
    with pytest.raises(RuntimeError):
        mg.ones(2).dot(mg.ones(2, dtype=mg.float64))


@needs_torch
@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
def test_count_nonzero(device, dim):
    x = np.array([[0.0, 1.5, 0.0], [2.0, -1.0, 0.0]], np.float32)
    ours = mg.tensor(x, device=device, requires_grad=True).count_nonzero(dim)
    ref = torch.tensor(x, requires_grad=True).count_nonzero(dim)
    assert ours.dtype == mg.int64 and not ours.requires_grad
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@needs_torch
@pytest.mark.parametrize("program, error", [
    (lambda M: M.zeros(3, 4).select(0, 3), IndexError),
    (lambda M: M.zeros(3, 4).select(2, 0), IndexError),
    (lambda M: M.zeros(3, 4).diagonal(0, 1, 1), RuntimeError),
    (lambda M: M.zeros(3).trace(), RuntimeError),
    (lambda M: M.zeros(3).diagonal(), IndexError),
    (lambda M: M.zeros(3, dtype=M.int64).lerp(M.zeros(3, dtype=M.int64), 0.5),
     NotImplementedError),
    (lambda M: M.zeros(3, dtype=M.int64).addcdiv(M.ones(3, dtype=M.int64),
                                                 M.ones(3, dtype=M.int64)), RuntimeError),
    (lambda M: M.zeros(3, 4).take_along_dim(M.zeros(3, dtype=M.int64), 1), RuntimeError),
])
def test_conveniences_refuse_as_torch(device, program, error):
    with pytest.raises(error):
        program(torch)
    with pytest.raises(error):
        program(On(mg, device))


@needs_torch
@pytest.mark.parametrize("args", [(2, 3), ([1, 2],), (), ("tensor",)])
def test_new_is_the_legacy_constructor_of_the_dtype(device, args):
    def program(M):
        x = M.zeros(2, dtype=M.int32)
        return x.new(*(x if a == "tensor" else a for a in args))
    ours, ref = program(On(mg, device)), program(torch)
    assert ours.dtype == ref.numpy().dtype and ours.device == mg.Device(device)
    np.testing.assert_array_equal(ours.numpy(), np.zeros_like(ref.numpy()) if args == (2, 3)
                                  else ref.numpy())


def test_memory_conveniences_return_the_tensor(device):
    t = mg.zeros(2, device=device)
    assert t.pin_memory() is t and t.share_memory_() is t and t.is_pinned() is False


@needs_torch
@pytest.mark.parametrize("equation, shapes", [("ij,jk->ik", [(2, 3), (2, 4)]),
                                              ("ij->k", [(2, 3)]), ("ij,jk->ii", [(2, 3), (3, 4)]),
                                              ("ij", [(2, 3), (3, 4)]), ("ijk", [(2, 3)]),
                                              ("ij,jk->ik", [(2, 3)])])
def test_einsum_refuses_as_torch(device, equation, shapes):
    with pytest.raises(RuntimeError):
        torch.einsum(equation, *[torch.zeros(s) for s in shapes])
    with pytest.raises(RuntimeError):
        mg.einsum(equation, *[mg.zeros(s, device=device) for s in shapes])


@needs_torch
def test_einsum_takes_a_list(device):
    a, b = np.ones((2, 3)), np.ones((3, 4))
    ours = mg.einsum("ij,jk", [mg.tensor(a, device=device), mg.tensor(b, device=device)])
    ref = torch.einsum("ij,jk", [torch.tensor(a), torch.tensor(b)])
    assert ours.dtype == ref.numpy().dtype
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


# --- set_printoptions -------------------------------------------------------------------------
@pytest.fixture
def printing():
    from minigrad.printing import _PRINT_OPTIONS
    saved = dict(_PRINT_OPTIONS)
    yield
    _PRINT_OPTIONS.update(saved)
    if torch is not None:
        torch.set_printoptions(profile="default", sci_mode=None)


@needs_torch
@pytest.mark.parametrize("options", [dict(precision=2), dict(precision=6), dict(profile="short"),
                                     dict(profile="full"), dict(sci_mode=True, precision=3),
                                     dict(precision=1, profile="default")], ids=repr)
def test_set_printoptions_as_torch(printing, options):
    x = [[1.23456789, 2.5], [3.0, 100.125]]
    mg.set_printoptions(**options)
    torch.set_printoptions(**options)
    assert repr(mg.tensor(x)) == repr(torch.tensor(x))


def test_set_printoptions_summarises_above_the_threshold(printing):
    mg.set_printoptions(threshold=5, edgeitems=2)
    assert repr(mg.arange(10.0)) == "tensor([0., 1.,  ..., 8., 9.])"  # (as torch spaces it)
    mg.set_printoptions(threshold=float("inf"))
    assert "..." not in repr(mg.arange(2000))


# --- Generator ----------------------------------------------------------------------------------
DRAWS = [lambda M, g, d: M.randn(2, 3, generator=g, device=d),
         lambda M, g, d: M.rand((4,), generator=g, device=d),
         lambda M, g, d: M.randint(0, 10, (5,), generator=g, device=d),
         lambda M, g, d: M.randperm(6, generator=g, device=d),
         lambda M, g, d: M.multinomial(M.tensor([0.1, 0.5, 0.4], device=d), 4, True, generator=g),
         lambda M, g, d: M.multinomial(M.tensor([0.1, 0.5, 0.4], device=d), 2, generator=g),
         lambda M, g, d: M.zeros(3, device=d).uniform_(-1, 1, generator=g),
         lambda M, g, d: M.zeros(3, device=d).normal_(2, 3, generator=g)]


@pytest.mark.parametrize("draw", DRAWS)
def test_generator_draws_what_the_global_seed_would(device, draw):
    ours = draw(mg, mg.Generator().manual_seed(2147483647), device)
    mg.manual_seed(2147483647)
    np.testing.assert_array_equal(ours.numpy(), draw(mg, None, device).numpy())
    assert ours.device == mg.Device(device)


@pytest.mark.parametrize("draw", DRAWS)
def test_generator_leaves_the_global_one_alone(device, draw):
    mg.manual_seed(3)
    expected = mg.rand(4)
    mg.manual_seed(3)
    draw(mg, mg.Generator().manual_seed(5), device)
    np.testing.assert_array_equal(mg.rand(4).numpy(), expected.numpy())


def test_generator_state_seed_and_errors():
    g = mg.Generator()
    assert g.initial_seed() == 67280421310721  # (PyTorch's default seed)
    assert g.manual_seed(7) is g and g.initial_seed() == 7
    state = g.get_state()
    first = mg.rand(3, generator=g)
    assert g.set_state(state) is g
    np.testing.assert_array_equal(mg.rand(3, generator=g).numpy(), first.numpy())
    chosen = g.seed()
    assert isinstance(chosen, int) and g.initial_seed() == chosen
    with pytest.raises(TypeError):
        mg.rand(2, generator=np.random.default_rng(0))


def test_global_seed():
    mg.manual_seed(11)
    assert mg.initial_seed() == 11
    chosen = mg.seed()
    assert mg.initial_seed() == chosen
    expected = mg.rand(2)
    mg.manual_seed(chosen)
    np.testing.assert_array_equal(mg.rand(2).numpy(), expected.numpy())


@needs_torch
def test_generator_is_called_as_torch():
    """makemore's first lines, in both libraries."""
    for M in (torch, mg):
        g = M.Generator().manual_seed(2147483647)
        p = M.rand(27, generator=g)
        p = p / p.sum()
        ix = M.multinomial(p, num_samples=1, replacement=True, generator=g).item()
        assert 0 <= ix < 27 and g.initial_seed() == 2147483647
    assert mg.Generator().initial_seed() == torch.Generator().initial_seed()


def _amin_amax(x, dim=None, keepdim=False):
    """torch's reference for minigrad's aminmax: (amin, amax), the same values and the same
    gradient (split evenly among ties), since torch.aminmax has a derivative only in recent
    PyTorch (older versions raise "derivative for aten::aminmax is not implemented")."""
    dims = tuple(range(x.dim())) if dim is None else dim
    return x.amin(dims, keepdim=keepdim), x.amax(dims, keepdim=keepdim)


# --- more conveniences --------------------------------------------------------------------------
MORE = [
    ("diag_vector", [(3,)], lambda x: x.diag()),
    ("diag_vector_above", [(3,)], lambda x: lib(x).diag(x, 1)),
    ("diag_vector_below", [(3,)], lambda x: x.diag(-2)),
    ("diag_matrix", [(3, 4)], lambda x: lib(x).diag(x, 1)),
    ("nan_to_num", [np.array([np.nan, np.inf, -np.inf, 1.5, -0.5])], lambda x: x.nan_to_num()),
    ("nan_to_num_given", [np.array([np.nan, np.inf, -np.inf, 1.5])],
     lambda x: lib(x).nan_to_num(x, 1.0, posinf=2.0, neginf=-3.0)),
    ("nan_to_num_", [np.array([np.nan, np.inf, 1.5])],
     lambda x: _unleafed(x).nan_to_num_(nan=0.5) * x.nan_to_num()),
    ("aminmax", [(3, 4)], lambda x: tuple(x.aminmax()) if lib(x) is mg else _amin_amax(x)),
    ("aminmax_dim", [(3, 4)], lambda x: tuple(mg.aminmax(x, dim=1, keepdim=True))
     if lib(x) is mg else _amin_amax(x, 1, keepdim=True)),
    ("aminmax_keepdim", [(3, 4)], lambda x: tuple(x.aminmax(keepdim=True))
     if lib(x) is mg else _amin_amax(x, keepdim=True)),
    ("std_mean", [(3, 4)], lambda x: lib(x).std_mean(x, 1)),
    ("std_mean_all", [(3, 4)], lambda x: x.std_mean() if lib(x) is mg else torch.std_mean(x)),
    ("var_mean", [(3, 4)], lambda x: lib(x).var_mean(x, 0, keepdim=True, correction=0)),
    ("diff", [(3, 5)], lambda x: x.diff()),
    ("diff_n2_dim0", [(4, 3)], lambda x: lib(x).diff(x, n=2, dim=0)),
    ("diff_prepend", [(3, 4), (3, 1), (3, 2)], lambda x, a, b: x.diff(prepend=a, append=b)),
    ("diff_too_many", [(3,)], lambda x: x.diff(n=4)),
]
MORE_CASES = [pytest.param(*row[1:], id=row[0]) for row in MORE]


# (finite differences are not finite at inf: nan_to_num's gradcheck has finite inputs below)
@pytest.mark.parametrize("shapes, fn", [pytest.param(*row[1:], id=row[0]) for row in MORE
                                        if not row[0].startswith("nan_to_num")])
def test_more_gradcheck(device, shapes, fn):
    assert_gradcheck(fn, _inputs(shapes), device)


@needs_torch
@DTYPES
@pytest.mark.parametrize("shapes, fn", MORE_CASES)
def test_more_match_torch(device, shapes, fn, dtype):
    arrays = [a if a.dtype.kind != "f" else a.astype(dtype) for a in _inputs(shapes)]
    assert_parity(fn, arrays, device)


def test_nan_to_num_gradcheck_on_finite_values(device):
    assert_gradcheck(lambda x: x.nan_to_num(posinf=1.0), _inputs([(3, 4)]), device)


@needs_torch
@pytest.mark.parametrize("program", [
    lambda M: M.diff(M.tensor([True, False, False, True])),
    lambda M: M.diff(M.tensor([1, 4, 9, 16]), n=2),
    lambda M: M.tensor([1, 2]).nan_to_num(),
    lambda M: M.tensor([float("nan"), float("inf")], dtype=M.float16).nan_to_num(),
    lambda M: M.tril_indices(3, 3), lambda M: M.triu_indices(3, 4, 1),
    lambda M: M.tril_indices(4, 2, -1, dtype=M.int32), lambda M: M.triu_indices(0, 3),
    lambda M: M.stack(M.meshgrid(M.arange(3), M.arange(2), indexing="ij")),
    lambda M: M.stack(M.meshgrid(M.arange(3), M.arange(2), M.arange(4), indexing="xy")),
    lambda M: M.stack(M.meshgrid([M.tensor(1.0), M.arange(2.0)], indexing="ij")),
    lambda M: M.stack(M.broadcast_tensors(M.zeros(3, 1), M.arange(2.0), M.ones(()))),
    lambda M: M.stack(M.aminmax(M.tensor([[1, 5], [3, 2]]))),
    lambda M: M.tensor([M.tensor([[0.0]]).is_nonzero(), M.tensor([2]).is_nonzero()]),
])
def test_values_as_torch(device, program):
    ref, ours = program(torch), program(On(mg, device))
    assert ours.dtype == ref.numpy().dtype
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@needs_torch
@pytest.mark.parametrize("program, error", [
    (lambda M: M.zeros(2, 2, 2).diag(), RuntimeError),
    (lambda M: M.zeros(()).diff(), RuntimeError),
    (lambda M: M.zeros(0).aminmax(), RuntimeError),
    (lambda M: M.zeros(2, 0).aminmax(dim=1), IndexError),
    (lambda M: M.zeros(2).is_nonzero(), RuntimeError),
    (lambda M: M.zeros(0).is_nonzero(), RuntimeError),
    (lambda M: M.meshgrid(M.zeros(2, 2), indexing="ij"), RuntimeError),
    (lambda M: M.meshgrid(M.zeros(2), indexing="yx"), RuntimeError),
    (lambda M: M.broadcast_tensors(M.zeros(2), M.zeros(3)), RuntimeError),
    (lambda M: M.tril_indices(3, 3, dtype=M.float32), RuntimeError),
    (lambda M: M.zeros(2).bernoulli_(1.5), RuntimeError),
])
def test_more_refuse_as_torch(device, program, error):
    with pytest.raises(error):
        program(torch)
    with pytest.raises(error):
        program(On(mg, device))


def test_meshgrid_without_indexing_warns_and_is_ij():
    with pytest.warns(UserWarning, match="indexing"):
        x, y = mg.meshgrid(mg.arange(3), mg.arange(2))
    assert x.shape == (3, 2) and y.tolist() == [[0, 1]] * 3


@pytest.mark.parametrize("p", [0.0, 1.0, 0.3, "tensor"])
def test_bernoulli(device, p):
    x = mg.zeros(2000, device=device)
    probs = mg.full((2000,), 0.3, device=device)
    out = probs.bernoulli() if p == "tensor" else x.bernoulli_(p)
    assert out.dtype == mg.float32 and out.device == mg.Device(device)
    assert set(out.tolist()) <= {0.0, 1.0}
    share = out.mean().item()
    assert abs(share - (0.3 if p == "tensor" else p)) < 0.05
    g = mg.Generator().manual_seed(4)
    first = mg.bernoulli(probs, generator=g)
    np.testing.assert_array_equal(first.numpy(),
                                  probs.bernoulli(generator=g.manual_seed(4)).numpy())


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64", None])
def test_finfo_as_torch(dtype):
    ours = mg.finfo() if dtype is None else mg.finfo(getattr(mg, dtype))
    ref = torch.finfo() if dtype is None else torch.finfo(getattr(torch, dtype))
    for name in "bits eps max min tiny smallest_normal resolution dtype".split():
        assert getattr(ours, name) == getattr(ref, name), name
    assert repr(ours) == repr(ref)


@needs_torch
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8"])
def test_iinfo_as_torch(dtype):
    ours, ref = mg.iinfo(getattr(mg, dtype)), torch.iinfo(getattr(torch, dtype))
    assert (ours.bits, ours.max, ours.min, ours.dtype) == (ref.bits, ref.max, ref.min, ref.dtype)
    assert repr(ours) == repr(ref)


@needs_torch
def test_info_refuses_as_torch():
    for M in (torch, mg):
        with pytest.raises(TypeError):
            M.finfo(M.int64)
        with pytest.raises(TypeError):
            M.iinfo(M.float32)
        with pytest.raises(TypeError):
            M.iinfo(M.bool)


@needs_torch
@pytest.mark.parametrize("a", ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"])
@pytest.mark.parametrize("b", ["bool", "int8", "int64", "float16", "float64"])
def test_promote_types_and_can_cast_as_torch(a, b):
    ours = mg.promote_types(getattr(mg, a), getattr(mg, b))
    assert ours == torch.empty((), dtype=torch.promote_types(getattr(torch, a),
                                                             getattr(torch, b))).numpy().dtype
    assert mg.can_cast(getattr(mg, a), getattr(mg, b)) == \
        torch.can_cast(getattr(torch, a), getattr(torch, b))
    assert mg.is_complex(mg.zeros(1, dtype=getattr(mg, a))) is False


def test_shape_change_in_place_of_a_parameter_keeps_it_trainable():
    w = mg.nn.Parameter(mg.ones(3))
    with mg.no_grad():
        w.unsqueeze_(0)
    for _ in range(2):
        (w * w).sum().backward()
        with mg.no_grad():
            w -= 0.1 * w.grad
        w.grad = None
    assert w.shape == (1, 3) and w.is_leaf and np.allclose(w.numpy(), 0.64)
