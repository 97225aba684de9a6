"""More ops added after the audits: median, nanmedian, kthvalue, mode, msort, nansum,
nanmean; cummax, cummin, logcumsumexp. Values, dtypes, shapes, gradients and errors
against torch (programs written once against ``M``), gradients by gradcheck and
gradgradcheck in float64.

Where equal values tie, PyTorch's median and kthvalue may return any of their places (its
CPU selection algorithm picks one): there the values are compared, and the indices are
checked to hold those values. Everywhere else the indices are torch's."""
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck, gradgradcheck
from tests.test_torch_parity_ops_audit import assert_as_torch
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

NAN, INF = float("nan"), float("inf")
# distinct values (no ties), with NaN, in several shapes
DISTINCT = [[[3.0, -1.0, 2.5, 7.0], [0.5, 9.0, -4.0, 1.5], [2.0, 8.0, 6.0, -3.0]],
            [[1.0, NAN, 3.0, 2.0], [5.0, 4.0, -1.0, NAN], [NAN, NAN, NAN, NAN]]]
TIES = [[2.0, 1.0, 2.0, 3.0, 1.0, 2.0], [4.0, 4.0, 4.0, 4.0, 4.0, 4.0]]


def _rand(shape, device, seed=0):
    """Distinct values (no ties), so that every gradient is defined."""
    rng = np.random.default_rng(seed)
    data = rng.permutation(int(np.prod(shape))).reshape(shape) * 0.37 - 1.3
    return mg.tensor(data, dtype=mg.float64, device=device, requires_grad=True)


def _check_indices(x, out, dim, keepdim):
    idx = out.indices if keepdim else out.indices.unsqueeze(dim)
    vals = out.values if keepdim else out.values.unsqueeze(dim)
    np.testing.assert_array_equal(x.gather(dim, idx).numpy(), vals.numpy())


# --- median, nanmedian, kthvalue, mode ------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("data", DISTINCT + TIES + [[], 5.0, [[NAN, 1.0]]],
                         ids=lambda d: str(np.shape(d)))
@pytest.mark.parametrize("dt", ["float64", "float32", "int64"])
def test_median_of_all_as_torch(op, data, dt, device):
    if dt == "int64" and np.isnan(np.array(data, dtype=float)).any() or \
            (dt == "int64" and np.size(data) == 0):
        return
    assert_as_torch(lambda M: getattr(M.tensor(data, dtype=getattr(M, dt)), op)(), device)
    assert_as_torch(lambda M: getattr(M, op)(M.tensor(data, dtype=getattr(M, dt))), device)


@needs_torch
@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_median_along_a_dim_as_torch(op, dim, keepdim, device):
    for data in DISTINCT[:1] + [[[1.0, NAN, 3.0], [2.0, 0.0, 1.0]]]:
        if np.isnan(np.array(data)).sum() > 0 and dim == 0:
            continue  # (one NaN a row along dim 1 only: which NaN torch picks is its own)
        assert_as_torch(lambda M: getattr(M.tensor(data), op)(dim, keepdim), device)
        assert_as_torch(lambda M: getattr(M, op)(M.tensor(data), dim=dim, keepdim=keepdim),
                        device)


@needs_torch
@pytest.mark.parametrize("op", ["median", "nanmedian", "mode"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_ties_give_torch_values_and_an_index_of_them(op, keepdim, device):
    x = mg.tensor(TIES, device=device)
    ours = getattr(x, op)(1, keepdim)
    theirs = getattr(torch.tensor(TIES), op)(1, keepdim)
    np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    _check_indices(x, ours, 1, keepdim)
    if op == "mode":  # (mode's index is the last occurrence, as torch's)
        np.testing.assert_array_equal(ours.indices.numpy(), theirs.indices.numpy())


@needs_torch
@pytest.mark.parametrize("k", [1, 2, 3, 4])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue_as_torch(k, dim, keepdim, device):
    data = DISTINCT[0]
    if k > np.shape(data)[dim]:
        assert_as_torch(lambda M: M.tensor(data).kthvalue(k, dim, keepdim), device)
        return
    assert_as_torch(lambda M: M.tensor(data).kthvalue(k, dim, keepdim), device)
    assert_as_torch(lambda M: M.kthvalue(M.tensor(data), k, dim=dim, keepdim=keepdim), device)
    x = mg.tensor(TIES, device=device)
    ours = x.kthvalue(k, 1, keepdim)
    theirs = torch.tensor(TIES).kthvalue(k, 1, keepdim)
    np.testing.assert_array_equal(ours.values.numpy(), theirs.values.numpy())
    _check_indices(x, ours, 1, keepdim)


@needs_torch
@pytest.mark.parametrize("data", [[1, 3, 3, 1, 2], [[5, 5, 2, 2], [7, 1, 9, 1]],
                                  [[2.0, 1.0, 2.0], [3.0, 1.0, 0.5]], [4.0]])
@pytest.mark.parametrize("keepdim", [False, True])
def test_mode_as_torch(data, keepdim, device):
    assert_as_torch(lambda M: M.tensor(data).mode(-1, keepdim), device)
    assert_as_torch(lambda M: M.mode(M.tensor(data), dim=0, keepdim=keepdim), device)


@needs_torch
def test_zero_dim_and_empty_as_torch(device):
    for op in ("median", "nanmedian", "mode"):
        assert_as_torch(lambda M: getattr(M.tensor(3.5), op)(0), device)
        assert_as_torch(lambda M: getattr(M.tensor(3.5), op)(-1, True), device)
        assert_as_torch(lambda M: getattr(M.zeros(0, 3), op)(1), device)  # (empty result)
        assert_as_torch(lambda M: getattr(M.zeros(2, 0), op)(1), device)  # IndexError
    assert_as_torch(lambda M: M.tensor(3.5).kthvalue(1), device)
    assert_as_torch(lambda M: M.msort(M.tensor(3.5)), device)
    assert_as_torch(lambda M: M.zeros(0, 2).median(), device)


@needs_torch
def test_errors_as_torch(device):
    raises_as_torch(lambda M: M.tensor([1.0, 2.0]).kthvalue(3), RuntimeError, device)
    raises_as_torch(lambda M: M.tensor([1.0, 2.0]).kthvalue(0), RuntimeError, device)
    raises_as_torch(lambda M: M.tensor([1.0, 2.0]).kthvalue(1.5), TypeError, device)
    raises_as_torch(lambda M: M.tensor([1.0, 2.0]).median(2), IndexError, device)
    raises_as_torch(lambda M: M.tensor([True, False]).median(), NotImplementedError, device)
    raises_as_torch(lambda M: M.tensor([1, 2]).nanmean(), RuntimeError, device)
    raises_as_torch(lambda M: M.tensor([1, 2]).logcumsumexp(0), NotImplementedError, device)
    raises_as_torch(lambda M: M.tensor([1.0, 2.0]).cummax(1), IndexError, device)


def _grads(program, M, data):
    x = M.tensor(data, dtype=M.float64, requires_grad=True)
    out = program(x)
    out = out.values if isinstance(out, tuple) else out
    weights = M.arange(out.numel(), dtype=M.float64).reshape(out.shape) + 1
    (out * weights).sum().backward()
    return out.grad_fn.name(), x.grad


GRAD_PROGRAMS = {
    "median": lambda x: x.median(), "nanmedian": lambda x: x.nanmedian(),
    "median_dim": lambda x: x.median(1), "nanmedian_dim": lambda x: x.nanmedian(1, True),
    "kthvalue": lambda x: x.kthvalue(2, 0), "mode": lambda x: x.mode(1),
    "msort": lambda x: x.msort(), "nansum": lambda x: x.nansum(1),
    "nanmean": lambda x: x.nanmean(0), "nanmean_all": lambda x: x.nanmean(),
    "cummax": lambda x: x.cummax(1), "cummin": lambda x: x.cummin(0),
    "logcumsumexp": lambda x: x.logcumsumexp(1)}


@needs_torch
@pytest.mark.parametrize("name", list(GRAD_PROGRAMS))
def test_gradients_and_node_names_as_torch(name, device):
    data = [[1.0, NAN, 3.0, -2.0], [0.5, 2.0, 2.0, 7.0]] if name.startswith("nan") else \
        [[1.0, 4.0, 3.0, -2.0], [0.5, 2.0, 2.5, 7.0], [6.0, -1.0, 2.0, 0.0]]
    program = GRAD_PROGRAMS[name]
    ours = _grads(program, On(mg, device), data)
    theirs = _grads(program, torch, data)
    if name != "nansum":  # (torch's NansumBackward0 is here a where and a sum)
        assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(), rtol=1e-12)


@needs_torch
def test_ties_share_the_gradient_of_the_median_of_all(device):
    for data in (TIES, [[NAN, 1.0, NAN]], [[1.0, 1.0]]):
        for op in ("median", "nanmedian"):
            ours = _grads(GRAD_PROGRAMS[op], On(mg, device), data)
            theirs = _grads(GRAD_PROGRAMS[op], torch, data)
            np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", list(GRAD_PROGRAMS))
def test_gradcheck(name, device):
    x = _rand((3, 4), device)
    fn = GRAD_PROGRAMS[name]

    def f(t):
        out = fn(t)
        return out.values if isinstance(out, tuple) else out
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_forward_mode_matches_reverse_mode(device):
    import minigrad.autograd.forward_ad as fwAD
    x = _rand((3, 4), device)
    t = _rand((3, 4), device, seed=1).detach()
    for fn in (lambda a: a.median(), lambda a: a.nanmedian(), lambda a: a.logcumsumexp(1),
               lambda a: a.median(0).values, lambda a: a.cummax(1).values):
        with fwAD.dual_level():
            tangent = fwAD.unpack_dual(fn(fwAD.make_dual(x.detach(), t))).tangent
        out = fn(x)
        (grad,) = mg.autograd.grad(out, (x,), mg.ones_like(out))
        np.testing.assert_allclose(tangent.sum().item(), (grad * t).sum().item(), rtol=1e-10)


def test_vmap_matches_a_loop(device):
    x = _rand((3, 4, 5), device)
    for fn in (lambda a: a.median(), lambda a: a.nanmedian(), lambda a: a.logcumsumexp(0),
               lambda a: a.logcumsumexp(1)):
        batched = mg.vmap(fn)(x)
        looped = mg.stack([fn(x[i]) for i in range(3)])
        np.testing.assert_allclose(batched.detach().numpy(), looped.detach().numpy(),
                                   rtol=1e-12)


# --- nansum, nanmean, msort -----------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("op", ["nansum", "nanmean"])
def test_nan_reductions_as_torch(op, dim, keepdim, device):
    for data in DISTINCT:
        if dim is None:
            assert_as_torch(lambda M: getattr(M.tensor(data), op)(), device, exact=False)
            continue
        assert_as_torch(lambda M: getattr(M.tensor(data), op)(dim, keepdim), device,
                        exact=False)
        assert_as_torch(lambda M: getattr(M, op)(M.tensor(data), dim=dim, keepdim=keepdim),
                        device, exact=False)
    assert_as_torch(lambda M: M.nansum(M.tensor([[1, 2], [3, 4]]), 0), device)
    assert_as_torch(lambda M: M.nansum(M.tensor([True, True])), device)
    assert_as_torch(lambda M: M.tensor([1, 2]).nanmean(dtype=M.float32), device)
    assert_as_torch(lambda M: M.zeros(0, 2).nanmean(0), device)


@needs_torch
def test_msort_as_torch(device):
    for data in DISTINCT + TIES + [[[3, 1], [2, 2], [0, 5]]]:
        assert_as_torch(lambda M: M.msort(M.tensor(data)), device)
        assert_as_torch(lambda M: M.tensor(data).msort(), device)


# --- cummax, cummin, logcumsumexp -----------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cummax_cummin_as_torch(op, dim, device):
    for data in DISTINCT + [TIES, [[1, 3, 3, 2], [0, 0, -1, 5]], [[True, False, True]],
                            [[NAN, 1.0, NAN, 2.0], [-INF, INF, 0.0, INF]]]:
        assert_as_torch(lambda M: getattr(M.tensor(data), op)(dim), device)
        assert_as_torch(lambda M: getattr(M, op)(M.tensor(data), dim=dim), device)
    assert_as_torch(lambda M: getattr(M.tensor(2.5), op)(0), device)
    assert_as_torch(lambda M: getattr(M.zeros(0, 3), op)(dim), device)


@needs_torch
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dt", ["float64", "float32"])
def test_logcumsumexp_as_torch(dim, dt, device):
    for data in DISTINCT + [[[1000.0, -1000.0, 999.0], [-INF, -INF, 0.0]],
                            [[-800.0, -700.0, 600.0], [INF, 1.0, NAN]]]:
        assert_as_torch(lambda M: M.tensor(data, dtype=getattr(M, dt)).logcumsumexp(dim),
                        device, exact=False)
        assert_as_torch(lambda M: M.logcumsumexp(M.tensor(data, dtype=getattr(M, dt)), dim),
                        device, exact=False)
    assert_as_torch(lambda M: M.tensor(2.5).logcumsumexp(0), device, exact=False)
    assert_as_torch(lambda M: M.zeros(0, 3).logcumsumexp(dim), device)


@needs_torch
def test_logcumsumexp_gradient_is_stable_as_torch(device):
    data = [[-800.0, -700.0, 600.0, 1.0], [500.0, -500.0, 0.0, 2.0]]

    def program(M):
        x = M.tensor(data, dtype=M.float64, requires_grad=True)
        out = x.logcumsumexp(1)
        out.backward(M.tensor([[1.0, -2.0, 0.5, 3.0], [-1.0, 0.0, 2.0, 1.0]],
                              dtype=M.float64))
        return x.grad
    np.testing.assert_allclose(program(On(mg, device)).numpy(), program(torch).numpy(),
                               rtol=1e-12, atol=1e-300)


# --- products, cross, diag_embed (priority 3) -----------------------------------------------

def _values_and_grads(program, M, shapes, seed=3):
    rng = np.random.default_rng(seed)
    xs = [M.tensor(rng.standard_normal(s), dtype=M.float64, requires_grad=True)
          for s in shapes]
    out = program(M, *xs)
    weights = M.arange(out.numel(), dtype=M.float64).reshape(out.shape) - 1.5
    (out * weights).sum().backward()
    return out, [x.grad for x in xs]


def _as_torch(program, shapes, device):
    """Values, shapes, dtypes and gradients of ``program`` as torch's (float64), or the
    exception class torch raises."""
    try:
        theirs = _values_and_grads(program, torch, shapes)
    except Exception as e:  # noqa: BLE001  (then minigrad raises the same class)
        raises_as_torch(lambda M: program(M, *(M.ones(s, dtype=M.float64) for s in shapes)),
                        type(e), device)
        return
    ours = _values_and_grads(program, On(mg, device), shapes)
    assert tuple(ours[0].shape) == tuple(theirs[0].shape)
    assert str(ours[0].dtype) == str(theirs[0].dtype).replace("torch.", "")
    np.testing.assert_allclose(ours[0].detach().numpy(), theirs[0].detach().numpy(),
                               rtol=1e-12, atol=1e-14)
    for g, h in zip(ours[1], theirs[1]):
        assert (g is None) == (h is None)
        if g is not None:
            np.testing.assert_allclose(g.numpy(), h.numpy(), rtol=1e-12, atol=1e-14)


PRODUCTS = [
    ("ger", lambda M, a, b: M.ger(a, b), [(3,), (4,)]),
    ("ger_method", lambda M, a, b: a.ger(b), [(3,), (2,)]),
    ("inner", lambda M, a, b: M.inner(a, b), [(2, 3), (4, 3)]),
    ("inner_3d", lambda M, a, b: a.inner(b), [(2, 1, 3), (3,)]),
    ("inner_0d", lambda M, a, b: M.inner(a, b), [(), (4, 2)]),
    ("inner_bad", lambda M, a, b: M.inner(a, b), [(2, 3), (4, 2)]),
    ("vdot", lambda M, a, b: M.vdot(a, b), [(3,), (3,)]),
    ("vdot_bad", lambda M, a, b: M.vdot(a, b), [(3,), (2,)]),
    ("addmv", lambda M, a, b, c: M.addmv(a, b, c), [(2,), (2, 3), (3,)]),
    ("addmv_scaled", lambda M, a, b, c: a.addmv(b, c, beta=0.5, alpha=-2.0),
     [(1,), (2, 3), (3,)]),
    ("dist", lambda M, a, b: M.dist(a, b), [(2, 3), (3,)]),
    ("dist_1", lambda M, a, b: a.dist(b, 1), [(2, 3), (2, 3)]),
    ("dist_inf", lambda M, a, b: M.dist(a, b, p=float("inf")), [(4,), (4,)]),
    ("dist_3", lambda M, a, b: M.dist(a, b, 3), [(2, 2), (2, 1)]),
    ("kron", lambda M, a, b: M.kron(a, b), [(2, 3), (4,)]),
    ("kron_3d", lambda M, a, b: a.kron(b), [(2, 3), (2, 1, 2)]),
    ("kron_0d", lambda M, a, b: M.kron(a, b), [(), (2,)]),
    ("tensordot", lambda M, a, b: M.tensordot(a, b), [(2, 3, 4), (3, 4, 5)]),
    ("tensordot_lists", lambda M, a, b: M.tensordot(a, b, dims=([0, 2], [2, 0])),
     [(2, 3, 4), (4, 5, 2)]),
    ("tensordot_0", lambda M, a, b: M.tensordot(a, b, dims=0), [(2,), (3,)]),
    ("tensordot_1", lambda M, a, b: M.tensordot(a, b, 1), [(2, 3), (3, 2)]),
    ("tensordot_bad", lambda M, a, b: M.tensordot(a, b, dims=3), [(2,), (3,)]),
    ("tensordot_mismatch", lambda M, a, b: M.tensordot(a, b, dims=([0], [0])),
     [(2,), (3,)]),
    ("diag_embed", lambda M, a: M.diag_embed(a), [(2, 3)]),
    ("diag_embed_offset", lambda M, a: a.diag_embed(1), [(2, 3)]),
    ("diag_embed_neg", lambda M, a: M.diag_embed(a, -2, 0, 2), [(2, 3)]),
    ("diag_embed_swapped", lambda M, a: M.diag_embed(a, offset=1, dim1=2, dim2=0), [(2, 3)]),
    ("diag_embed_1d", lambda M, a: M.diag_embed(a), [(3,)]),
    ("diag_embed_same", lambda M, a: M.diag_embed(a, 0, 1, 1), [(2, 3)]),
    ("diag_embed_range", lambda M, a: M.diag_embed(a, 0, 3, 0), [(2, 3)]),
    ("cross", lambda M, a, b: M.cross(a, b, dim=1), [(4, 3), (4, 3)]),
    ("cross_dim0", lambda M, a, b: a.cross(b, dim=0), [(3, 2), (3, 1)]),
    ("cross_bad", lambda M, a, b: M.cross(a, b, dim=1), [(3, 2), (3, 2)]),
    ("linalg_cross", lambda M, a, b: M.linalg.cross(a, b), [(2, 3), (1, 3)]),
    ("linalg_cross_dim", lambda M, a, b: M.linalg.cross(a, b, dim=0), [(3, 2), (3, 2)]),
    ("linalg_cross_ndim", lambda M, a, b: M.linalg.cross(a, b), [(2, 3), (3,)]),
]


@needs_torch
@pytest.mark.parametrize("name, program, shapes", PRODUCTS, ids=[p[0] for p in PRODUCTS])
def test_products_as_torch(name, program, shapes, device):
    _as_torch(program, shapes, device)


@pytest.mark.parametrize("name, program, shapes",
                         [p for p in PRODUCTS if not p[0].endswith(
                             ("bad", "mismatch", "same", "range", "ndim"))],
                         ids=lambda p: p if isinstance(p, str) else "")
def test_products_gradcheck(name, program, shapes, device):
    rng = np.random.default_rng(7)
    xs = tuple(mg.tensor(rng.standard_normal(s), dtype=mg.float64, device=device,
                         requires_grad=True) for s in shapes)
    fn = lambda *a: program(mg, *a)  # noqa: E731
    assert gradcheck(fn, xs)
    if "inf" not in name:
        assert gradgradcheck(fn, xs)


# --- mg.linalg (priority 4) -----------------------------------------------------------------

NORMS = []
for _o in [None, 2, 1, INF, -INF, 0, 3, 0.5]:
    _p = 2 if _o is None else _o
    NORMS += [(f"vector_norm_{_o}", lambda M, a, p=_p: M.linalg.vector_norm(a, p), [(2, 3)]),
              (f"vector_norm_dims_{_o}", lambda M, a, p=_p:
               M.linalg.vector_norm(a, p, dim=(0, 2), keepdim=True), [(2, 3, 4)]),
              (f"norm_1d_{_o}", lambda M, a, o=_o: M.linalg.norm(a, o), [(5,)]),
              (f"norm_dim_{_o}", lambda M, a, o=_o: M.linalg.norm(a, o, dim=1), [(2, 5)])]
for _o in ["fro", "nuc", 2, -2, 1, -1, INF, -INF, 3]:
    NORMS += [(f"matrix_norm_{_o}", lambda M, a, o=_o: M.linalg.matrix_norm(a, o), [(2, 3, 4)]),
              (f"matrix_norm_dims_{_o}", lambda M, a, o=_o:
               M.linalg.matrix_norm(a, o, dim=(2, 0), keepdim=True), [(2, 3, 4)]),
              (f"norm_2d_{_o}", lambda M, a, o=_o: M.linalg.norm(a, o), [(3, 4)]),
              (f"norm_dims_{_o}", lambda M, a, o=_o: M.linalg.norm(a, o, dim=(0, 1)),
               [(3, 4, 2)])]
NORMS += [("norm_all", lambda M, a: M.linalg.norm(a), [(3, 4, 2)]),
          ("norm_keepdim", lambda M, a: M.linalg.norm(a, keepdim=True), [(3, 4, 2)]),
          ("norm_ord_3d", lambda M, a: M.linalg.norm(a, 2), [(3, 4, 2)]),
          ("norm_fro_one_dim", lambda M, a: M.linalg.norm(a, "fro", dim=1), [(3, 4)]),
          ("matrix_norm_1d", lambda M, a: M.linalg.matrix_norm(a), [(3,)]),
          ("vector_norm_int", lambda M, a: M.linalg.vector_norm(a.long()), [(3,)]),
          ("svdvals", lambda M, a: M.linalg.svdvals(a), [(3, 4, 2)]),
          ("svdvals_wide", lambda M, a: M.linalg.svdvals(a), [(2, 5)]),
          ("svdvals_1d", lambda M, a: M.linalg.svdvals(a), [(5,)])]


@needs_torch
@pytest.mark.parametrize("name, program, shapes", NORMS, ids=[p[0] for p in NORMS])
def test_linalg_norms_as_torch(name, program, shapes, device):
    _as_torch(program, shapes, device)


_NO_ORDER_3 = {"matrix_norm_3", "matrix_norm_dims_3", "norm_2d_3", "norm_dims_3"}


@pytest.mark.parametrize("name, program, shapes",
                         [p for p in NORMS if p[0].endswith(("fro", "nuc", "_2", "_-2", "_1",
                                                             "_3", "None", "svdvals"))
                          and "1d" not in p[0] and p[0] not in _NO_ORDER_3],
                         ids=lambda p: p if isinstance(p, str) else "")
def test_linalg_norms_gradcheck(name, program, shapes, device):
    x = _rand(shapes[0], device)
    assert gradcheck(lambda a: program(mg, a), (x,))
    assert gradgradcheck(lambda a: program(mg, a), (x,))


def test_svd_gradients_of_the_singular_vectors(device):
    """The whole SVD rule (U's and V's gradients too), through functions that do not
    depend on the signs of the singular vectors; forward mode as reverse mode."""
    import minigrad.autograd.forward_ad as fwAD
    from minigrad.ops.linalg import LinalgSvd

    def f(a):
        u, s, vh = LinalgSvd.apply(a)
        return mg.cat([(u * u * s.unsqueeze(-2)).flatten(), (vh * vh).sum(-2).flatten()])
    for shape in [(4, 3), (3, 4), (2, 3, 3)]:
        x = _rand(shape, device, seed=len(shape))
        assert gradcheck(f, (x,))
        assert gradgradcheck(f, (x,))
        t = _rand(shape, device, seed=9).detach()
        with fwAD.dual_level():
            tangent = fwAD.unpack_dual(f(fwAD.make_dual(x.detach(), t))).tangent
        out = f(x)
        (grad,) = mg.autograd.grad(out, (x,), mg.ones_like(out))
        np.testing.assert_allclose(tangent.sum().item(), (grad * t).sum().item(), rtol=1e-9)
    x = _rand((3, 4, 2), device)
    batched = mg.vmap(lambda a: mg.linalg.svdvals(a))(x)
    np.testing.assert_allclose(batched.detach().numpy(),
                               mg.linalg.svdvals(x).detach().numpy(), rtol=1e-12)


# --- flips, splits, take, index_copy, masked_scatter (priority 5) ---------------------------

MASK = [[True, False], [False, True], [True, True]]
PICKS = [
    ("fliplr", lambda M, a: M.fliplr(a), [(2, 3, 4)]),
    ("fliplr_1d", lambda M, a: M.fliplr(a), [(3,)]),
    ("flipud", lambda M, a: a.flipud(), [(2, 3)]),
    ("flipud_0d", lambda M, a: M.flipud(a), [()]),
    ("dsplit", lambda M, a: M.dsplit(a, 2)[1], [(2, 3, 4)]),
    ("dsplit_indices", lambda M, a: a.dsplit([1, 3])[1], [(2, 3, 4)]),
    ("dsplit_2d", lambda M, a: M.dsplit(a, 2)[0], [(2, 3)]),
    ("dsplit_uneven", lambda M, a: M.dsplit(a, 3)[0], [(2, 3, 4)]),
    ("take", lambda M, a: M.take(a, M.tensor([[0, 5], [5, -1]])), [(2, 3)]),
    ("take_0d", lambda M, a: a.take(M.tensor(0)), [()]),
    ("take_range", lambda M, a: M.take(a, M.tensor([6])), [(2, 3)]),
    ("take_int32", lambda M, a: M.take(a, M.tensor([0], dtype=M.int32)), [(2, 3)]),
    ("index_copy", lambda M, a, b: M.index_copy(a, 0, M.tensor([2, 0]), b), [(3, 2), (2, 2)]),
    ("index_copy_dim1", lambda M, a, b: a.index_copy(1, M.tensor([1]), b), [(3, 2), (3, 1)]),
    ("index_copy_0d", lambda M, a, b: a.index_copy(0, M.tensor(1), b), [(3,), ()]),
    ("index_copy_count", lambda M, a, b: a.index_copy(1, M.tensor([1]), b), [(3, 2), (3, 2)]),
    ("index_copy_shape", lambda M, a, b: a.index_copy(1, M.tensor([1]), b), [(3, 2), (2, 1)]),
    ("masked_scatter", lambda M, a, b: a.masked_scatter(M.tensor(MASK), b), [(3, 2), (2, 3)]),
    ("masked_scatter_row", lambda M, a, b: M.masked_scatter(a, M.tensor([True, False]), b),
     [(3, 2), (5,)]),
    ("masked_scatter_none", lambda M, a, b: a.masked_scatter(M.tensor([False, False]), b),
     [(3, 2), (5,)]),
    ("masked_scatter_short", lambda M, a, b: a.masked_scatter(M.tensor([True, True]), b),
     [(3, 2), (5,)]),
    ("masked_scatter_int_mask", lambda M, a, b: a.masked_scatter(M.tensor([1, 0]), b),
     [(3, 2), (5,)]),
]


@needs_torch
@pytest.mark.parametrize("name, program, shapes", PICKS, ids=[p[0] for p in PICKS])
def test_picks_as_torch(name, program, shapes, device):
    _as_torch(program, shapes, device)


def test_picks_gradcheck(device):
    x, y = _rand((3, 2), device), _rand((2, 3), device, seed=1)
    index = mg.tensor([2, 0], device=device)
    mask = mg.tensor(MASK, device=device)
    for fn, args in [(lambda a: a.take(mg.tensor([[0, 5], [5, 1]], device=device)), (x,)),
                     (lambda a, b: a.index_copy(0, index, b[:, :2]), (x, y)),
                     (lambda a, b: a.masked_scatter(mask, b), (x, y)),
                     (lambda a: a.fliplr().flipud(), (x,))]:
        assert gradcheck(fn, args)
        assert gradgradcheck(fn, args)


# --- Tensor.unfold --------------------------------------------------------------------------

UNFOLDS = [((2, 5), 1, 2, 1), ((2, 5), 1, 2, 2), ((2, 5), 0, 1, 2), ((7,), 0, 3, 2),
           ((3, 4, 2), -2, 4, 1), ((3, 0), 1, 0, 1), ((2, 5), 1, 6, 1), ((2, 5), 1, 2, 0),
           ((2, 5), 1, -1, 1), ((2, 5), 2, 1, 1), ((), 0, 1, 1), ((), 0, 0, 3), ((), 0, 2, 1)]


@needs_torch
@pytest.mark.parametrize("shape, dim, size, step", UNFOLDS)
def test_unfold_as_torch(shape, dim, size, step, device):
    _as_torch(lambda M, a: a.unfold(dim, size, step), [shape], device)

    if -len(shape) <= dim < max(len(shape), 1) and np.prod(shape) > 0 and \
            0 <= size <= (shape[dim] if shape else 1) and step > 0:
        ours = On(mg, device).zeros(shape).unfold(dim, size, step).stride()
        assert ours == torch.zeros(shape).unfold(dim, size, step).stride()


@needs_torch
def test_unfold_is_a_view_as_torch(device):
    def program(M):
        base = M.arange(12.0).reshape(2, 6)
        windows = base.unfold(1, 3, 2)
        base[0, 2] = -5.0  # (in two windows)
        windows[1, 1, 0] = 50.0
        return windows, base
    assert_as_torch(program, device)


def test_unfold_gradcheck(device):
    x = _rand((3, 6), device)
    for dim, size, step in [(1, 3, 1), (1, 2, 3), (0, 2, 1)]:
        assert gradcheck(lambda a: a.unfold(dim, size, step), (x,))
        assert gradgradcheck(lambda a: a.unfold(dim, size, step), (x,))
    assert mg.vmap(lambda a: a.unfold(0, 2, 1))(x).shape == (3, 5, 2)


@needs_torch
def test_unfold_write_through_the_view_carries_the_gradient_as_torch(device):
    def program(M):
        a = M.arange(6.0, dtype=M.float64, requires_grad=True)
        b = a * 1
        windows = b.unfold(0, 2, 2)
        windows[1] *= 3
        b.sum().backward()
        return b.detach(), a.grad
    assert_as_torch(program, device)


@needs_torch
def test_cross_without_dim_warns_and_takes_the_first_dim_of_size_3(device):
    x, y = _rand((2, 3, 3), device), _rand((2, 3, 3), device, seed=1)
    with pytest.warns(UserWarning, match="dim"):
        ours = mg.cross(x, y)
    with pytest.warns(UserWarning, match="dim"):
        theirs = torch.cross(torch.tensor(x.detach().numpy()), torch.tensor(y.detach().numpy()))
    np.testing.assert_allclose(ours.detach().numpy(), theirs.numpy(), rtol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        raises_as_torch(lambda M: M.cross(M.ones(2, 2), M.ones(2, 2)), RuntimeError, device)


# --- vmap of the ops that pick places ---------------------------------------------------------

VMAPPED = {"median(1)": lambda t: t.median(1), "median()": lambda t: t.median(),
           "nanmedian(-1, keepdim)": lambda t: t.nanmedian(-1, True),
           "kthvalue(2, 0)": lambda t: t.kthvalue(2, 0), "mode(1)": lambda t: t.mode(1),
           "cummax(1)": lambda t: t.cummax(1), "cummin(0)": lambda t: t.cummin(0)}


@pytest.mark.parametrize("name", sorted(VMAPPED))
def test_vmap_of_ops_that_pick_places_is_the_loop(device, name):
    """vmap gives each element's values and places, and gradients through them, as a loop
    over the elements does (ties included: small integers)."""
    fn = VMAPPED[name]
    x = mg.tensor(np.random.default_rng(5).integers(0, 4, (3, 4, 5)).astype(np.float64),
                  device=device)
    ours, loop = mg.func.vmap(fn)(x), [fn(x[i]) for i in range(3)]
    parts = range(2) if isinstance(ours, tuple) else [None]
    for j in parts:
        got = ours if j is None else ours[j]
        expected = np.stack([(out if j is None else out[j]).numpy() for out in loop])
        np.testing.assert_array_equal(got.numpy(), expected)

    def total(t):
        out = fn(t)
        return (out if not isinstance(out, tuple) else out[0]).sum()
    grads = mg.func.vmap(mg.func.grad(total))(x)
    np.testing.assert_array_equal(grads.numpy(),
                                  np.stack([mg.func.grad(total)(x[i]).numpy() for i in range(3)]))
