"""add/sub with alpha, div with rounding_mode, number-first function forms, flatten of empty
tensors, argmax/argmin keepdim, requires_grad on non-leaves, norm(0), conversions,
where(condition), __index__, any/all over no dims and retain_grad through in-place ops,
each against PyTorch."""
import operator

import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import needs_torch, raises_as_torch, torch

pytestmark = needs_torch

SHAPES = [(), (0,), (3,), (2, 3), (2, 0, 3), (17,)]
FLOATS = [np.float32, np.float64, np.float16]


def _values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) > 0.5
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-9 if np.dtype(dtype).kind == "i" else 0, 10, shape).astype(dtype)
    return (rng.standard_normal(shape) * 4).astype(dtype)


def _same(m, t, ulps=0, scale=0):
    """minigrad's ``m`` equals torch's ``t``: dtype, shape, and values (within ``ulps`` of
    the larger of the values and ``scale``)."""
    t = t.detach().numpy()
    m = np.asarray(m.numpy())
    assert m.dtype == t.dtype and m.shape == t.shape
    if ulps == 0 or m.dtype.kind != "f":
        np.testing.assert_array_equal(m, t)
    else:
        spacing = np.spacing(np.maximum(np.maximum(np.abs(m), np.abs(t)),
                                        np.abs(scale)).astype(m.dtype))
        with np.errstate(invalid="ignore"):  # (inf - inf)
            close = np.abs(m.astype(np.float64) - t.astype(np.float64)) <= ulps * spacing
        assert np.all(close | (m == t) | (np.isnan(m) & np.isnan(t)))


# --- 1. add / sub with alpha --------------------------------------------------------------

@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("alpha", [0.1, 3.7, -1 / 3, 2])
def test_alpha_float(op, shape, dtype, alpha):
    """float32: rounded once, as torch's fused multiply-add: bit for bit. float64: product
    and sum rounded apart (at most an ulp from torch's fma); float16: alpha and numbers
    rounded to float16, summed exactly and rounded through float32 (a few in 10^4 an ulp
    from torch)."""
    a, b = _values(shape, dtype, 1), _values(shape, dtype, 2)
    for other_m, other_t in [(mg.tensor(b), torch.tensor(b)), (0.3, 0.3)]:
        number = not isinstance(other_t, torch.Tensor)
        # with a number, torch rounds once or twice by the element's place in its vector
        # loop (tensors of fewer than 17 elements): an ulp
        ulps = 0 if dtype == np.float32 and not number else 1
        # two roundings (float64; torch's tails): half an ulp of the product, half of the
        # result
        scale = np.abs(alpha * (0.3 if number else b))
        t = getattr(torch, op)(torch.tensor(a), other_t, alpha=alpha)
        _same(getattr(mg, op)(mg.tensor(a), other_m, alpha=alpha), t, ulps, scale)
        _same(getattr(mg.tensor(a), op)(other_m, alpha=alpha), t, ulps, scale)
        x = mg.tensor(a)
        getattr(x, op + "_")(other_m, alpha=alpha)
        _same(x, t, ulps, scale)


def test_alpha_float32_many_bit_for_bit():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(20000).astype(np.float32)
    b = (rng.standard_normal(20000) * 7).astype(np.float32)
    for alpha in (0.1, 3.7, -1 / 3, 1e-3):
        _same(mg.tensor(a).add(mg.tensor(b), alpha=alpha),
              torch.tensor(a).add(torch.tensor(b), alpha=alpha))
        _same(mg.tensor(a).sub(0.7, alpha=alpha), torch.tensor(a).sub(0.7, alpha=alpha))
        _same(mg.add(0.7, mg.tensor(b), alpha=alpha), torch.add(0.7, torch.tensor(b),
                                                                alpha=alpha))


def test_alpha_specials():
    a = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3e38, 1e-45], np.float32)
    b = np.array([1.0, np.inf, 1.0, -0.0, 0.0, 3e38, 1e-45], np.float32)
    for alpha in (2.0, -1.5, float("inf"), 0):
        for op in ("add", "sub"):
            _same(getattr(mg.tensor(a), op)(mg.tensor(b), alpha=alpha),
                  getattr(torch.tensor(a), op)(torch.tensor(b), alpha=alpha))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op", ["add_", "sub_"])
def test_alpha_in_place_with_no_graph_as_torch(op, dtype):
    """An update such as ``p.sub_(grad, alpha=lr)`` under no_grad writes the result in one
    pass through p's memory: torch's values (float32 bit for bit, float64 within an ulp),
    special values included, with another tensor and with itself (a view of itself that
    overlaps it in part is refused, as by torch); the version counter moves once."""
    rng = np.random.default_rng(5)
    a = np.concatenate([rng.standard_normal(3000) * 4, [np.inf, -np.inf, np.nan, 0.0, -0.0,
                                                        3e38, 1e-45]]).astype(dtype)
    b = np.concatenate([rng.standard_normal(3000), [1.0, np.inf, 1.0, -0.0, 0.0, 3e38,
                                                    1e-45]]).astype(dtype)
    ulps = 0 if dtype == np.float32 else 1
    for alpha in (0.01, -3, 2.5, float("inf"), 0.0):
        p, t = mg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        with mg.no_grad(), torch.no_grad():
            version = p._version
            getattr(p, op)(mg.tensor(b), alpha=alpha)
            getattr(t, op)(torch.tensor(b), alpha=alpha)
            assert p._version == version + 1
            _same(p, t, ulps, np.abs(alpha * b))
            p, t = mg.tensor(a), torch.tensor(a)
            getattr(p, op)(p, alpha=alpha)
            getattr(t, op)(t, alpha=alpha)
            _same(p, t, ulps, np.abs(alpha * a))
    raises_as_torch(lambda M: (lambda x: getattr(x[1:], op)(x[:-1], alpha=0.5))(
        M.tensor(a[:10])), RuntimeError, "cpu")    # a view that overlaps it in part
    raises_as_torch(lambda M: getattr(M.tensor(a, requires_grad=True), op)(M.tensor(b),
                                                                          alpha=0.5),
                    RuntimeError, "cpu")                 # a leaf, with grad mode on


@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.uint8, np.int32])
@pytest.mark.parametrize("alpha", [2, -3, 0, 100])
def test_alpha_integers(dtype, alpha):
    a, b = _values((2, 3), dtype, 1), _values((2, 3), dtype, 2)
    if dtype == np.uint8 and alpha < 0:
        alpha = 200
    for op in ("add", "sub"):
        t = getattr(torch.tensor(a), op)(torch.tensor(b), alpha=alpha)
        _same(getattr(mg.tensor(a), op)(mg.tensor(b), alpha=alpha), t)
        x = mg.tensor(a)
        getattr(x, op + "_")(mg.tensor(b), alpha=alpha)
        _same(x, t)
    _same(mg.tensor(a).add(2.5, alpha=3), torch.tensor(a).add(2.5, alpha=3))


def test_alpha_bool():
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    for alpha in (True, False, 2, 0):
        _same(mg.tensor(a).add(mg.tensor(b), alpha=alpha),
              torch.tensor(a).add(torch.tensor(b), alpha=alpha))
    _same(mg.tensor(np.array([1, 2])).add(mg.tensor(a[:2]), alpha=2),
          torch.tensor([1, 2]).add(torch.tensor(a[:2]), alpha=2))


@pytest.mark.parametrize("program, kind", [
    (lambda M: M.add(M.tensor([1, 2]), M.tensor([1, 2]), alpha=2.5), RuntimeError),
    (lambda M: M.sub(M.tensor([1, 2]), 2, alpha=1.0), RuntimeError),
    (lambda M: M.add(M.tensor([1.0, 2]), M.tensor([1.0, 2]), alpha=True), RuntimeError),
    (lambda M: M.add(M.tensor([1, 2]), M.tensor([1, 2]), alpha=True), RuntimeError),
    (lambda M: M.add(M.tensor([True]), M.tensor([True]), alpha=1.5), RuntimeError),
    (lambda M: M.add(M.tensor([1.0]), M.tensor([1.0]), alpha="a"), TypeError),
    (lambda M: M.add(M.tensor([1.0]), M.tensor([1.0]), alpha=None), TypeError),
    (lambda M: M.add(M.tensor([1.0]), M.tensor([1.0]), alpha=[2]), TypeError),
    (lambda M: M.add(M.tensor([1.0]), M.tensor([1.0]), alpha=1j), RuntimeError),
    (lambda M: M.add(M.tensor([1.0]), M.tensor([1.0]), alpha=1e300), RuntimeError),
    (lambda M: M.add(M.tensor([1], dtype=M.int8), M.tensor([1], dtype=M.int8), alpha=300),
     RuntimeError),
    (lambda M: M.sub(M.tensor([True]), M.tensor([True]), alpha=2), RuntimeError),
    (lambda M: M.tensor([1.0]).add(M.tensor([1.0]), 2), TypeError),
    (lambda M: M.tensor([1, 2]).add_(M.tensor([1, 2]), alpha=2.5), RuntimeError),
    (lambda M: M.tensor([1, 2]).add_(M.tensor([1.0, 2]), alpha=2), RuntimeError),
])
def test_alpha_errors(program, kind):
    raises_as_torch(program, kind, "cpu")


def test_alpha_number_dtypes():
    i8 = np.array([1, -2, 3], np.int8)
    for first, second in [(2, mg.tensor(i8)), (2.5, mg.tensor(i8)), (True, mg.tensor([1.5])),
                          (2, 3), (2.5, 2), (True, False)]:
        t_second = torch.tensor(second.numpy()) if isinstance(second, mg.Tensor) else second
        for op in ("add", "mul", "div"):
            _same(getattr(mg, op)(first, second), getattr(torch, op)(first, t_second))
    _same(mg.add(2, mg.tensor(i8), alpha=3), torch.add(2, torch.tensor(i8), alpha=3))
    _same(mg.sub(2, 3, alpha=2), torch.sub(2, 3, alpha=2))


@pytest.mark.parametrize("op", ["add", "sub"])
def test_alpha_gradients(op):
    a = mg.tensor(_values((2, 3), np.float64, 1), requires_grad=True)
    b = mg.tensor(_values((3,), np.float64, 2), requires_grad=True)
    assert mg.autograd.gradcheck(lambda a, b: getattr(a, op)(b, alpha=-2.5), (a, b))
    assert mg.autograd.gradcheck(lambda b: getattr(mg, op)(1.5, b, alpha=3.0), (b,))
    ta = torch.tensor(a.numpy(), requires_grad=True)
    tb = torch.tensor(b.numpy(), requires_grad=True)
    out = getattr(a, op)(b, alpha=0.3)
    tout = getattr(ta, op)(tb, alpha=0.3)
    assert out.grad_fn.name() == tout.grad_fn.name()
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-12)


def test_alpha_inplace_recorded():
    for M in (mg, torch):
        x = M.tensor([1.0, 2.0, 3.0], dtype=M.float64, requires_grad=True)
        y = x * 1
        y.add_(x, alpha=2.5)
        y.sum().backward()
        assert x.grad.tolist() == [3.5, 3.5, 3.5]


# --- 2. div with rounding_mode --------------------------------------------------------------

DIVIDENDS = np.array([7.5, -7.5, 3.0, -0.0, 5.0, -5.0, np.inf, np.nan, 0.3, 1e30], np.float64)
DIVISORS = np.array([2.0, 2.0, -0.0, 3.0, np.inf, np.inf, 2.0, 1.0, 0.1, 0.1], np.float64)


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("dtype", FLOATS)
def test_div_rounding_floats(mode, dtype):
    with np.errstate(over="ignore"):  # (1e30 is inf in float16)
        a, b = DIVIDENDS.astype(dtype), DIVISORS.astype(dtype)
    _same(mg.div(mg.tensor(a), mg.tensor(b), rounding_mode=mode),
          torch.div(torch.tensor(a), torch.tensor(b), rounding_mode=mode))
    _same(mg.tensor(a).div(0.1, rounding_mode=mode), torch.tensor(a).div(0.1, rounding_mode=mode))
    _same(mg.div(7, mg.tensor(b), rounding_mode=mode),
          torch.div(7, torch.tensor(b), rounding_mode=mode))
    x = mg.tensor(a)
    x.div_(mg.tensor(b), rounding_mode=mode)
    _same(x, torch.tensor(a).div_(torch.tensor(b), rounding_mode=mode))
    for shape in [(), (0,), (2, 0), (3, 4)]:
        c, d = _values(shape, dtype, 1), _values(shape, dtype, 2)
        _same(mg.tensor(c).div(mg.tensor(d), rounding_mode=mode),
              torch.tensor(c).div(torch.tensor(d), rounding_mode=mode))


@pytest.mark.parametrize("mode", ["trunc", "floor"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8])
def test_div_rounding_integers(mode, dtype):
    a = _values((3, 4), dtype, 1)
    b = _values((4,), dtype, 2)
    b[b == 0] = 3
    _same(mg.tensor(a).div(mg.tensor(b), rounding_mode=mode),
          torch.tensor(a).div(torch.tensor(b), rounding_mode=mode))
    for n in (2, -3, 2.5):
        if dtype == np.uint8 and n == -3:
            continue
        _same(mg.tensor(a).div(n, rounding_mode=mode), torch.tensor(a).div(n, rounding_mode=mode))
    _same(mg.div(7, mg.tensor(b), rounding_mode=mode),
          torch.div(7, torch.tensor(b), rounding_mode=mode))
    zero_d = np.array(2, np.int16)  # a 0-d tensor does not widen the dtype
    _same(mg.tensor(a).div(mg.tensor(zero_d), rounding_mode=mode),
          torch.tensor(a).div(torch.tensor(zero_d), rounding_mode=mode))
    x = mg.tensor(a)
    x.div_(mg.tensor(b), rounding_mode=mode)
    _same(x, torch.tensor(a).div_(torch.tensor(b), rounding_mode=mode))
    _same(mg.tensor([True, False]).div(2, rounding_mode=mode),
          torch.tensor([True, False]).div(2, rounding_mode=mode))


@pytest.mark.parametrize("program, kind", [
    (lambda M: M.tensor([1, 2]).div(0, rounding_mode="floor"), RuntimeError),
    (lambda M: M.tensor([1, 2]).div(M.tensor([1, 0]), rounding_mode="trunc"), RuntimeError),
    (lambda M: M.tensor([True]).div(M.tensor([True]), rounding_mode="trunc"),
     NotImplementedError),
    (lambda M: M.tensor([1.0]).div(2.0, rounding_mode="round"), RuntimeError),
    (lambda M: M.tensor([1.0]).div(2.0, rounding_mode=3), TypeError),
    (lambda M: M.tensor([1.0]).div(2.0, "floor"), TypeError),
    (lambda M: M.tensor([7, 2]).div_(2), RuntimeError),
])
def test_div_rounding_errors(program, kind):
    raises_as_torch(program, kind, "cpu")


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_div_rounding_gradient_is_zero(mode):
    a = np.array([[7.3, -3.2, 1.1]])  # (no quotient near an integer: the floor's jumps)
    b = np.array([[2.0], [1.7]])
    x, y = mg.tensor(a, requires_grad=True), mg.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    out, tout = x.div(y, rounding_mode=mode), tx.div(ty, rounding_mode=mode)
    assert out.requires_grad and out.grad_fn is not None
    (out * 3).sum().backward()
    (tout * 3).sum().backward()
    _same(x.grad, tx.grad)
    _same(y.grad, ty.grad)
    assert mg.autograd.gradcheck(lambda x, y: x.div(y, rounding_mode=mode), (x, y))
    h = mg.tensor(np.array([1.0, 2.0], np.float16), requires_grad=True)
    h.div(3, rounding_mode=mode).sum().backward()
    assert h.grad.dtype == mg.float16 and h.grad.tolist() == [0.0, 0.0]


# --- 3. flatten of empty tensors ------------------------------------------------------------

@pytest.mark.parametrize("shape, start, end", [
    ((0, 3, 1), 1, -1), ((0, 3, 1), 0, -1), ((2, 0, 3), 0, 1), ((0, 3), 0, 0),
    ((2, 0, 3), 1, 2), ((3, 0), 1, 1), ((), 0, -1), ((2, 3, 4), 1, 2), ((0,), 0, 0)])
def test_flatten_empty(shape, start, end):
    a = np.zeros(shape, np.float32)
    _same(mg.tensor(a).flatten(start, end), torch.tensor(a).flatten(start, end))
    _same(mg.flatten(mg.tensor(a), start, end), torch.flatten(torch.tensor(a), start, end))


def test_flatten_gradient():
    x = mg.tensor(_values((2, 3, 4), np.float64), requires_grad=True)
    assert mg.autograd.gradcheck(lambda x: x.flatten(1) * 2, (x,))


# --- 4. argmax / argmin keepdim ----------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 3), (2, 3, 4)])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float16])
def test_arg_reduce_keepdim_without_dim(shape, name, dtype):
    a = _values(shape, dtype)
    for keepdim in (True, False):
        _same(getattr(mg.tensor(a), name)(keepdim=keepdim),
              getattr(torch.tensor(a), name)(keepdim=keepdim))
        _same(getattr(mg, name)(mg.tensor(a), keepdim=keepdim),
              getattr(torch, name)(torch.tensor(a), keepdim=keepdim))


@pytest.mark.parametrize("program, kind", [
    (lambda M: M.zeros(2, 3).argmax(dim=(0, 1)), TypeError),
    (lambda M: M.zeros(2, 3).argmin((0,)), TypeError),
    (lambda M: M.zeros(2, 3).argmax([0]), TypeError),
    (lambda M: M.zeros(0, 3).argmax(keepdim=True), IndexError),
])
def test_arg_reduce_errors(program, kind):
    raises_as_torch(program, kind, "cpu")


# --- 5. number-first function forms ----------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8, np.float16, bool])
@pytest.mark.parametrize("number", [2, 2.5, True])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow"])
def test_number_first(dtype, number, name):
    a = _values((2, 3), dtype)
    tensor_m, tensor_t = mg.tensor(a), torch.tensor(a)
    try:
        expected = getattr(torch, name)(number, tensor_t)
    except Exception as e:  # noqa: BLE001 - the same error type from minigrad
        with pytest.raises(type(e)):
            getattr(mg, name)(number, tensor_m)
        return
    _same(getattr(mg, name)(number, tensor_m), expected, ulps=1)


def test_number_first_zero_d_and_empty():
    for a in (np.array(1.5, np.float32), np.zeros((0, 2), np.float32)):
        for name in ("add", "sub", "mul", "div", "pow"):
            _same(getattr(mg, name)(2, mg.tensor(a)), getattr(torch, name)(2, torch.tensor(a)))


def test_pow_number_base_gradient():
    x = mg.tensor([0.5, 1.0, -2.0], dtype=mg.float64, requires_grad=True)
    assert mg.autograd.gradcheck(lambda x: mg.pow(2, x), (x,))
    assert mg.autograd.gradcheck(lambda x: mg.sub(2.5, x) * mg.div(3, x), (x,))
    tx = torch.tensor(x.numpy(), requires_grad=True)
    mg.pow(2.5, x).sum().backward()
    torch.pow(2.5, tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-14)


@pytest.mark.parametrize("program, kind", [
    (lambda M: M.pow(2, 3), TypeError),
    (lambda M: M.pow([1, 2], M.tensor([1.0])), TypeError),
    (lambda M: M.add([1, 2], M.tensor([1.0])), TypeError),
    (lambda M: M.add("a", M.tensor([1.0])), TypeError),
    (lambda M: M.sub(True, M.tensor([True])), RuntimeError),
    (lambda M: M.div(2, M.tensor([1.0]), rounding_mode="nope"), RuntimeError),
    (lambda M: M.mul(2, M.tensor([1.0]), alpha=2), TypeError),
])
def test_number_first_errors(program, kind):
    raises_as_torch(program, kind, "cpu")


# --- 6. requires_grad on non-leaves ------------------------------------------------------------

def test_requires_grad_setter():
    for M in (mg, torch):
        a = M.tensor([1.0, 2.0], requires_grad=True)
        y = a * 2
        with pytest.raises(RuntimeError):
            y.requires_grad = False
        assert y.requires_grad  # (setting True here: torch raises, minigrad allows it)
        a.requires_grad = False
        assert not a.requires_grad and a.is_leaf
        with M.no_grad():
            z = a * 2
        z.requires_grad = False
        z.requires_grad = True
        assert z.requires_grad and z.is_leaf
        with pytest.raises(RuntimeError):
            M.tensor([1, 2]).requires_grad = True
        t = M.tensor([1, 2])
        t.requires_grad = False
        assert not t.requires_grad
        for bad in (1, None, "a"):
            with pytest.raises(RuntimeError):
                M.tensor([1.0]).requires_grad = bad


# --- 7. norm(0) --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (0, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_norm_zero(shape, dtype):
    a = _values(shape, dtype)
    if a.size:
        a.reshape(-1)[::2] = 0
    x, tx = mg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    calls = [dict(), dict(dim=0, keepdim=True)] if len(shape) else [dict()]
    for kwargs in calls:
        out, tout = x.norm(0, **kwargs), tx.norm(0, **kwargs)
        _same(out, tout)
        assert out.requires_grad == tout.requires_grad
        assert out.grad_fn.name() == tout.grad_fn.name()
        (out * 2).sum().backward()
        (tout * 2).sum().backward()
        assert x.grad is None and tx.grad is None  # no gradient reaches x, as in torch
    assert not mg.tensor(a).norm(0).requires_grad
    assert mg.autograd.gradcheck(lambda x: x.norm(0) + x.sum(),
                                 (mg.tensor(a.astype(np.float64), requires_grad=True),))


# --- 8. conversions, where(condition), __index__, any/all(()) ------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int64, bool, np.float16])
def test_conversions(dtype):
    a = _values((2, 3), dtype)
    for name in ("short", "byte", "char"):
        _same(getattr(mg.tensor(a), name)(), getattr(torch.tensor(a), name)())
    for other in (np.zeros(1, np.float64), np.zeros((), np.int8), np.zeros(2, bool)):
        _same(mg.tensor(a).type_as(mg.tensor(other)), torch.tensor(a).type_as(torch.tensor(other)))
    raises_as_torch(lambda M: M.tensor(a).type_as(3), TypeError, "cpu")
    x = mg.tensor(_values((3,), np.float64), requires_grad=True)
    assert mg.autograd.gradcheck(lambda x: x.type_as(mg.tensor([1.0], dtype=mg.float64)) * 2,
                                 (x,))


@pytest.mark.parametrize("a", [np.array([[0, 1], [2, 0]]), np.array(3), np.array(0.0),
                               np.array([True, False, True]), np.zeros((0, 2)),
                               np.zeros((2, 3, 2))])
def test_where_condition_alone(a):
    got, want = mg.where(mg.tensor(a)), torch.where(torch.tensor(a))
    assert isinstance(got, tuple) and len(got) == len(want)
    for m, t in zip(got, want):
        _same(m, t)


def test_where_errors():
    raises_as_torch(lambda M: M.where(M.tensor([True]), M.tensor([1.0])), TypeError, "cpu")


def test_index():
    for M in (mg, torch):
        assert [10, 20][M.tensor(1)] == 20
        assert [10, 20][M.tensor([1])] == 20
        assert [10, 20][M.tensor(True)] == 20
        assert operator.index(M.tensor([[3]], dtype=M.uint8)) == 3
        assert list(range(M.tensor(3))) == [0, 1, 2]
        for bad in (M.tensor(1.0), M.tensor([1, 0]), M.tensor([])):
            with pytest.raises(TypeError):
                operator.index(bad)
    x = mg.arange(6).reshape(2, 3)  # a tensor index still indexes as a tensor
    assert x[mg.tensor([1])].shape == (1, 3)
    assert x[mg.tensor(1)].shape == (3,)


@pytest.mark.parametrize("shape", [(), (0,), (2, 3), (2, 0, 3)])
@pytest.mark.parametrize("dtype", [np.float32, bool, np.uint8, np.int64])
@pytest.mark.parametrize("name", ["any", "all"])
def test_any_all_no_dims(shape, dtype, name):
    a = _values(shape, dtype)
    tm, tt = mg.tensor(a), torch.tensor(a)
    for dim in ((), []):
        for keepdim in (False, True):
            _same(getattr(tm, name)(dim, keepdim), getattr(tt, name)(dim, keepdim))
    _same(getattr(mg, name)(tm, ()), getattr(torch, name)(tt, ()))
    _same(getattr(tm, name)(), getattr(tt, name)())


# --- 9. retain_grad through in-place ops ----------------------------------------------------

def _retain_programs():
    def plain(M, p):
        y = p * 1
        y.retain_grad()
        y.mul_(2)
        y.sum().backward()
        return [y]

    def used_after(M, p):
        y = p * 1
        y.retain_grad()
        y.mul_(2)
        (y * 3).sum().backward()
        return [y]

    def used_before_and_after(M, p):
        y = p * 1
        y.retain_grad()
        w = y * 5
        y.add_(1.5)
        (w.sum() + (y * y).sum()).backward()
        return [y]

    def through_view(M, p):
        y = p * 1
        y.retain_grad()
        y[:2].mul_(2)
        (y.sum() * 3).backward()
        return [y]

    def view_retained(M, p):
        y = p * 1
        v = y[:2]
        v.retain_grad()
        v.mul_(2)
        (y.sum() * 3).backward()
        return [v]

    def view_retained_used(M, p):
        y = p * 1
        v = y[:2]
        v.retain_grad()
        v.mul_(2)
        (v * v).sum().backward()
        return [v]

    def twice(M, p):
        y = p * 1
        y.retain_grad()
        y.mul_(2)
        y.exp_()
        y.sum().backward()
        return [y]

    return [plain, used_after, used_before_and_after, through_view, view_retained,
            view_retained_used, twice]


@pytest.mark.parametrize("program", _retain_programs(), ids=lambda f: f.__name__)
def test_retain_grad_after_inplace(program):
    a = _values((4,), np.float64)
    p, tp = mg.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    for m, t in zip(program(mg, p), program(torch, tp)):
        assert m.retains_grad == t.retains_grad
        if t.grad is None:
            assert m.grad is None
        else:
            np.testing.assert_allclose(m.grad.numpy(), t.grad.numpy(), rtol=1e-14)
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-14)


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 0, 3), (2, 3, 4)])
@pytest.mark.parametrize("fill", ["random", "zeros", "ones"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_nonzero_and_where_of_a_condition_alone_match_torch(shape, fill, dtype):
    rng = np.random.default_rng(len(shape))
    values = {"random": rng.integers(0, 2, shape), "zeros": np.zeros(shape),
              "ones": np.ones(shape)}[fill].astype(dtype)
    ours, theirs = mg.tensor(values), torch.tensor(values)
    got, want = ours.nonzero(), theirs.nonzero()
    assert got.dtype == np.int64 and got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    for got, want in ((mg.nonzero(ours, as_tuple=True), theirs.nonzero(as_tuple=True)),
                      (mg.where(ours), torch.where(theirs))):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.dtype == np.int64
            np.testing.assert_array_equal(g.numpy(), w.numpy())
