"""The ops added after the first audit: log10, log2, exp2, sgn, signbit, erfc; atan2
(arctan2), hypot, logaddexp, fmod, xlogy, fmax, fmin; unique, bincount, argwhere,
searchsorted, bucketize, tensor_split, hsplit, vsplit, rot90, cdist; and
nn.utils.rnn.pad_sequence. Gradients by gradcheck in float64 (broadcasting included, away
from the points where an op is not differentiable), values, dtypes, shapes, gradients and
errors against torch (programs written once against ``M``)."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd import gradcheck, gradgradcheck
from tests.test_torch_parity_ops_audit import assert_as_torch
from tests.torch_ref import On, needs_torch, torch

NAN, INF = float("nan"), float("inf")
SPECIAL = [0.0, -0.0, 1.0, -1.5, 2.5, INF, -INF, NAN, 1e-300, -7.0]
SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 4)), ((), (2, 2))]
UNARY = ["log10", "log2", "exp2", "erfc", "sgn"]
BINARY = ["atan2", "arctan2", "hypot", "logaddexp", "fmod", "xlogy", "fmax", "fmin"]


def _rand(shape, device, low=0.5, high=2.0, seed=0):
    rng = np.random.default_rng(seed + len(shape))
    data = rng.uniform(low, high, shape) * rng.choice([-1.0, 1.0], shape)
    return mg.tensor(data, dtype=mg.float64, device=device, requires_grad=True)


def _positive(shape, device, seed=0):
    return _rand(shape, device, seed=seed).abs().detach().requires_grad_()


# --- gradients ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["log10", "log2", "exp2", "erfc"])
def test_unary_gradients(name, device):
    x = _positive((2, 3), device) if name.startswith("log") else _rand((2, 3), device)
    fn = getattr(mg, name)
    assert gradcheck(fn, (x,))
    assert gradgradcheck(fn, (x,))


@pytest.mark.parametrize("shapes", SHAPES)
@pytest.mark.parametrize("name", BINARY)
def test_binary_gradients(name, shapes, device):
    x, y = _rand(shapes[0], device), _rand(shapes[1], device, low=2.1, high=3.0, seed=1)
    if name == "xlogy":
        y = y.abs().detach().requires_grad_()
    if name in ("fmax", "fmin"):  # (no ties: x within 2, |y| above)
        x = x.detach().requires_grad_()
    fn = getattr(mg, name)
    assert gradcheck(fn, (x, y))
    assert gradgradcheck(fn, (x, y))


def test_number_operands_gradients(device):
    x = _positive((2, 3), device)
    assert gradcheck(lambda t: mg.xlogy(t, 2.5), (x,))
    assert gradcheck(lambda t: mg.xlogy(2.5, t), (x,))
    assert gradcheck(lambda t: mg.fmod(t, 0.7), (x,))


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, 0.5, INF])
def test_cdist_gradients(p, device):
    x1, x2 = _rand((3, 2), device), _rand((4, 2), device, seed=5)
    assert gradcheck(lambda a, b: mg.cdist(a, b, p=p), (x1, x2))
    if p != INF:
        assert gradgradcheck(lambda a, b: mg.cdist(a, b, p=p), (x1, x2))
    xb, yb = _rand((2, 3, 4), device), _rand((2, 2, 4), device, seed=6)
    assert gradcheck(lambda a, b: mg.cdist(a, b, p=p), (xb, yb))


def test_forward_mode_matches_reverse_mode(device):
    """jvp with all-ones tangents equals the sum of the (elementwise) gradients."""
    import minigrad.autograd.forward_ad as fwAD
    x, y = _rand((2, 3), device), _rand((2, 3), device, low=2.1, high=3.0, seed=1)
    for name in UNARY[:4] + BINARY:
        args = (x.abs(),) if name.startswith("log") else (x,)
        if name not in UNARY:
            args += (y.abs() if name == "xlogy" else y,)
        fn = getattr(mg, name)
        with fwAD.dual_level():
            out = fn(*(fwAD.make_dual(a.detach(), mg.ones_like(a)) for a in args))
            tangent = fwAD.unpack_dual(out).tangent
        grads = mg.autograd.grad(fn(*args).sum(), args)
        np.testing.assert_allclose(tangent.numpy(), sum(grads).numpy(), rtol=1e-12)


# --- against torch --------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("name", UNARY + ["signbit"])
@pytest.mark.parametrize("dt", ["float32", "float64", "int64", "bool", "float16"])
def test_unary_values_as_torch(name, dt, device):
    values = {"bool": [True, False], "int64": [-3, 0, 2, 9]}.get(dt, SPECIAL)
    exact = name in ("sgn", "signbit")
    assert_as_torch(lambda M: getattr(M, name)(M.tensor(values, dtype=getattr(M, dt))),
                    device, exact)
    assert_as_torch(lambda M: getattr(M.tensor(values, dtype=getattr(M, dt)), name)(),
                    device, exact)


@needs_torch
@pytest.mark.parametrize("name", UNARY)
def test_unary_gradients_as_torch(name, device):
    def program(M):
        x = M.tensor([0.5, 1.0, 3.0, 0.0, -2.0], dtype=M.float64, requires_grad=True)
        out = getattr(x, name)()
        out.backward(M.tensor([1.0, -2.0, 0.5, 1.0, 1.0], dtype=M.float64))
        return out.grad_fn.name(), x.grad
    ours = program(mg)
    theirs = program(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1].numpy(), theirs[1].numpy(force=True), rtol=1e-12)


@needs_torch
@pytest.mark.parametrize("name", BINARY)
def test_binary_values_as_torch(name, device):
    x = [v for v in SPECIAL for _ in SPECIAL]
    y = [v for _ in SPECIAL for v in SPECIAL]
    assert_as_torch(lambda M: getattr(M, name)(M.tensor(x), M.tensor(y)), device, exact=False)
    assert_as_torch(lambda M: getattr(M, name)(M.tensor(x, dtype=M.float64),
                                               M.tensor(y, dtype=M.float64)), device, exact=False)
    # broadcasting, method form and dtype promotion
    assert_as_torch(lambda M: getattr(M.tensor([[1.5], [-2.0]]), name)(M.tensor([3, 4, 5])),
                    device, exact=False)
    for dx, dy in [("int64", "int64"), ("int32", "float64"), ("bool", "bool"),
                   ("float16", "float32"), ("uint8", "int8")]:
        assert_as_torch(lambda M: getattr(M, name)(M.tensor([1, 0, 3], dtype=getattr(M, dx)),
                                                   M.tensor([2, 1, 1], dtype=getattr(M, dy))),
                        device, exact=False)


@needs_torch
@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("number", [2, 2.5, -0.0, True])
def test_binary_numbers_as_torch(name, number, device):
    assert_as_torch(lambda M: getattr(M, name)(M.tensor([1.5, -3.0, 0.0]), number), device,
                    exact=False)
    assert_as_torch(lambda M: getattr(M, name)(M.tensor([1, -3, 0]), number), device,
                    exact=False)
    assert_as_torch(lambda M: getattr(M, name)(number, M.tensor([1.5, -3.0, 0.0])), device,
                    exact=False)


@needs_torch
@pytest.mark.parametrize("name", BINARY)
def test_binary_gradients_and_nodes_as_torch(name, device):
    def program(M, y_number=False):
        x = M.tensor([0.0, 1.5, -2.0, 3.0, 2.0, NAN], dtype=M.float64, requires_grad=True)
        y = 2.0 if y_number else M.tensor([1.0, 0.5, -2.0, 4.0, 2.0, 1.0], dtype=M.float64,
                                          requires_grad=True)
        out = getattr(M, name)(x, y)
        out.backward(M.ones_like(out))
        grads = [x.grad] if y_number else [x.grad, y.grad]
        return [out.grad_fn.name()] + [np.nan_to_num(g.numpy(), nan=7.0) for g in grads]
    cases = [False] + ([True] if name in ("fmod", "xlogy") else [])
    for y_number in cases:
        ours, theirs = program(mg, y_number), program(torch, y_number)
        assert ours[0] == theirs[0]
        for a, b in zip(ours[1:], theirs[1:]):
            np.testing.assert_allclose(a, b, rtol=1e-12)


@needs_torch
def test_xlogy_of_a_number_and_fmod_errors(device):
    def program(M):
        y = M.tensor([0.5, 2.0, 0.0], dtype=M.float64, requires_grad=True)
        out = M.xlogy(3, y)
        out.sum().backward()
        return out.grad_fn.name(), out, y.grad
    ours, theirs = program(mg), program(torch)
    assert ours[0] == theirs[0]
    for a, b in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy())
    assert_as_torch(lambda M: M.fmod(M.tensor([5, -5]), 0), device)
    assert_as_torch(lambda M: M.fmod(M.tensor([5, -5]), M.tensor([0, 1])), device)
    assert_as_torch(lambda M: M.fmod(M.tensor([5, -5]), M.tensor([3, 3], dtype=M.uint8)),
                    device)


@needs_torch
@pytest.mark.parametrize("values", [[3, 1, 3, 2, 1], [NAN, 1.0, NAN, -0.0, 0.0, INF],
                                    [[1, 2], [1, 2], [0, 5]], [], [True, False, True]])
def test_unique_as_torch(values, device):
    def program(M, **kwargs):
        return lambda M: M.unique(M.tensor(values), **kwargs)
    for kw in [{}, dict(return_inverse=True), dict(return_counts=True),
               dict(return_inverse=True, return_counts=True)]:
        assert_as_torch(program(None, **kw), device)
        assert_as_torch(lambda M: M.tensor(values).unique(sorted=True, **kw), device)
    if np.asarray(values).ndim == 2:
        for d in (0, 1, -1):
            assert_as_torch(lambda M: M.tensor(values).unique(
                dim=d, return_inverse=True, return_counts=True), device)
    assert_as_torch(lambda M: M.tensor(3).unique(return_inverse=True), device)


@needs_torch
def test_bincount_as_torch(device):
    x = [1, 0, 4, 1, 1]
    assert_as_torch(lambda M: M.bincount(M.tensor(x)), device)
    assert_as_torch(lambda M: M.tensor(x).bincount(minlength=8), device)
    assert_as_torch(lambda M: M.tensor(x, dtype=M.uint8).bincount(), device)
    assert_as_torch(lambda M: M.bincount(M.tensor([], dtype=M.int64)), device)
    for dt in ["float32", "float64", "float16", "int64"]:
        assert_as_torch(lambda M: M.bincount(M.tensor(x), M.tensor([.5, 1, 2, 3, 4],
                                                                   dtype=getattr(M, dt))),
                        device, exact=False)
    for bad in [lambda M: M.bincount(M.tensor([1.0])), lambda M: M.bincount(M.tensor([-1])),
                lambda M: M.bincount(M.tensor([[1]])),
                lambda M: M.bincount(M.tensor([1]), minlength=-1),
                lambda M: M.bincount(M.tensor([1]), M.tensor([1.0, 2.0]))]:
        assert_as_torch(bad, device)


@needs_torch
@pytest.mark.parametrize("values", [[[0, 1.5], [0, -0.0]], [0, 0, 3], 2.5, [[[1, 0]]]])
def test_argwhere_as_torch(values, device):
    assert_as_torch(lambda M: M.argwhere(M.tensor(values)), device)
    assert_as_torch(lambda M: M.tensor(values).argwhere(), device)


@needs_torch
def test_searchsorted_and_bucketize_as_torch(device):
    seq = [1.0, 2.0, 2.0, 5.0, INF]
    vals = [[-INF, 2.0, 3.0], [5.0, 6.0, NAN]]
    for kw in [{}, dict(right=True), dict(side="right"), dict(side="left"),
               dict(out_int32=True)]:
        assert_as_torch(lambda M: M.searchsorted(M.tensor(seq), M.tensor(vals), **kw), device)
        assert_as_torch(lambda M: M.searchsorted(M.tensor(seq), 2.0, **kw), device)
    rows = [[1, 3, 5], [0, 2, 2]]
    assert_as_torch(lambda M: M.searchsorted(M.tensor(rows), M.tensor([[3, 6], [2, -1]]),
                                             right=True), device)
    assert_as_torch(lambda M: M.searchsorted(M.tensor([1, 3]), M.tensor([[1.5, 3.0]])), device)
    for kw in [{}, dict(right=True), dict(out_int32=True)]:
        assert_as_torch(lambda M: M.bucketize(M.tensor(vals), M.tensor(seq), **kw), device)
        assert_as_torch(lambda M: M.bucketize(3, M.tensor([1, 3, 5]), **kw), device)
    for bad in [lambda M: M.searchsorted(M.tensor([1, 2]), 1, right=True, side="left"),
                lambda M: M.searchsorted(M.tensor([1, 2]), 1, side="middle"),
                lambda M: M.searchsorted(M.tensor([[1, 3]]), M.tensor([[1], [2]])),
                lambda M: M.bucketize(M.tensor([1.0]), M.tensor([[1.0]]))]:
        assert_as_torch(bad, device)


@needs_torch
@pytest.mark.parametrize("split", [1, 2, 3, 4, 7, [1, 3], [2, 2, 10], [-1], [0, 4], (1,)])
def test_tensor_split_as_torch(split, device):
    def program(M):
        x = M.arange(20.0).reshape(4, 5).requires_grad_()
        pieces = x.tensor_split(split, dim=1)
        sum(p.sum() * (i + 1) for i, p in enumerate(pieces)).backward()
        return tuple(p.detach() for p in pieces) + (x.grad,)
    assert_as_torch(program, device)
    assert_as_torch(lambda M: M.tensor_split(M.arange(7), split), device)
    assert_as_torch(lambda M: M.tensor_split(M.arange(7), M.tensor(split)), device)


@needs_torch
def test_hsplit_vsplit_as_torch(device):
    for sections in [2, 4, [1, 3], 3, 0]:
        assert_as_torch(lambda M: M.hsplit(M.arange(24).reshape(2, 4, 3), sections), device)
        assert_as_torch(lambda M: M.arange(8).hsplit(sections), device)
        assert_as_torch(lambda M: M.vsplit(M.arange(24).reshape(4, 6), sections), device)
    assert_as_torch(lambda M: M.tensor(1).hsplit(1), device)
    assert_as_torch(lambda M: M.arange(3).vsplit(1), device)


@needs_torch
@pytest.mark.parametrize("k", [-5, -1, 0, 1, 2, 3, 6])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (2, 0), (-1, 1)])
def test_rot90_as_torch(k, dims, device):
    def program(M):
        x = M.arange(24.0).reshape(2, 3, 4).requires_grad_()
        out = x.rot90(k, dims)
        (out * M.arange(24.0).reshape(out.shape)).sum().backward()
        return out.detach(), x.grad
    assert_as_torch(program, device)
    assert_as_torch(lambda M: M.rot90(M.arange(6).reshape(2, 3), k), device)


@needs_torch
def test_rot90_errors_as_torch(device):
    for bad in [lambda M: M.arange(3).rot90(), lambda M: M.ones(2, 2).rot90(1, (0, 0)),
                lambda M: M.ones(2, 2).rot90(1, (0, 1, 2)),
                lambda M: M.ones(2, 2).rot90(1, (0, 5))]:
        assert_as_torch(bad, device)


@needs_torch
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, INF])
def test_cdist_as_torch(p, device):
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(2, 4, 3)), rng.normal(size=(2, 5, 3))
    b[:, 0] = a[:, 1]  # (a distance of zero)

    def program(M):
        x1 = M.tensor(a, dtype=M.float64, requires_grad=True)
        x2 = M.tensor(b, dtype=M.float64, requires_grad=True)
        out = M.cdist(x1, x2, p=p)
        out.backward(M.tensor(rng_w, dtype=M.float64))
        return out.detach(), x1.grad, x2.grad
    rng_w = np.random.default_rng(4).normal(size=(2, 4, 5))
    if p in (0.5,):  # (torch's gradient at equal coordinates is NaN for p < 1)
        assert_as_torch(lambda M: M.cdist(M.tensor(a), M.tensor(b), p=p), device, exact=False)
        return
    ours, theirs = program(On(mg, device)), program(torch)
    for o, t in zip(ours, theirs):
        assert o.dtype == mg.float64 and o.shape == tuple(t.shape)
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-12, atol=1e-15)
    assert_as_torch(lambda M: M.cdist(M.tensor(a[0], dtype=M.float32),
                                      M.tensor(b[0], dtype=M.float32), p=p), device,
                    exact=False)


@needs_torch
def test_cdist_errors_as_torch(device):
    for bad in [lambda M: M.cdist(M.ones(3), M.ones(2, 3)),
                lambda M: M.cdist(M.ones(2, 3), M.ones(2, 4)),
                lambda M: M.cdist(M.ones(2, 3), M.ones(2, 3), p=-1.0),
                lambda M: M.cdist(M.ones(2, 3, dtype=M.int64), M.ones(2, 3, dtype=M.int64))]:
        assert_as_torch(bad, device)


@needs_torch
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_sequence_as_torch(batch_first, side, device):
    def program(M):
        from importlib import import_module
        pad = import_module(M.__name__ + ".nn.utils.rnn").pad_sequence
        seqs = [M.arange(6.0).reshape(3, 2).requires_grad_(), M.ones(1, 2),
                M.zeros(0, 2), M.full((2, 2), 5.0)]
        out = pad(seqs, batch_first=batch_first, padding_value=-1.5, padding_side=side)
        (out * M.arange(float(out.numel())).reshape(out.shape)).sum().backward()
        return out.detach(), seqs[0].grad
    assert_as_torch(lambda M: program(getattr(M, "mod", M)), device)
    assert_as_torch(lambda M: M.nn.utils.rnn.pad_sequence(
        [M.tensor([1, 2]), M.tensor([3])], padding_value=0.5), device)
    for bad in [lambda M: M.nn.utils.rnn.pad_sequence([]),
                lambda M: M.nn.utils.rnn.pad_sequence([M.ones(1)], padding_side="middle"),
                lambda M: M.nn.utils.rnn.pad_sequence([M.ones(2, 3), M.ones(2, 4)])]:
        assert_as_torch(bad, device)


def test_pad_sequence_imports():
    from minigrad.nn.utils.rnn import pad_sequence
    assert mg.nn.utils.rnn.pad_sequence is pad_sequence
