"""Tensor ops against torch where they are easy to get subtly wrong: in-place ``**=``, ``&=``,
``|=`` and ``^=`` (results that must fit the tensor's dtype), checked conversion of fill
values and bounds, ``max``/``min`` with several dims, ``logical_*`` and ``isclose`` operands,
``int()``/``float()`` of several elements, float sizes, ``gather``/``index_select`` out of
range, and the view helpers ``narrow``, ``movedim``, ``unflatten`` and ``swapaxes``
(values, dtypes, gradients, memory shared with the base, and errors).

Every program is written once against ``M`` (minigrad on the tested device, or torch) and
the two results are compared at run time.
"""
import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"]
VALUES = {"bool": [True, False, True, False], "uint8": [0, 3, 250, 7], "int8": [-7, 3, 0, 127],
          "int32": [-7, 3, 1, 100000], "int64": [-7, 3, 1, 2 ** 40],
          "float16": [-7.5, 3.0, 0.0, float("nan")], "float32": [-7.5, 3.0, -0.0, float("inf")],
          "float64": [-7.5, 3.25, 0.0, float("-inf")]}


def _numpy(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t.numpy())


# powers other than PyTorch's special cases (2, 3, 0.5, -1, ...) come from another libm:
# they may differ in the last bit
POWER_TOL = {"float16": dict(rtol=1e-3), "float32": dict(rtol=3e-7), "float64": dict(rtol=1e-15)}


def same(ours, theirs, exact=True):
    """Equal shapes, dtypes and values (NaN equal to NaN), bit for bit unless not ``exact``
    (then to the last bit or so of a float)."""
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    a, b = ours.numpy(), _numpy(theirs)
    if exact or a.dtype.kind != "f":
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, **POWER_TOL[str(a.dtype)])


def outcome(program, M):
    """``program(M)``'s result, or the class of the exception it raised."""
    try:
        return program(M)
    except Exception as e:  # noqa: BLE001  (compared with torch's below)
        return type(e)


def assert_as_torch(program, device, exact=True):
    """``program`` gives torch's result with minigrad on ``device``, or raises what torch
    raises (in one short line)."""
    theirs = outcome(program, torch)
    if isinstance(theirs, type):
        raises_as_torch(program, theirs, device)
        return None
    ours = program(On(mg, device))
    if isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            same(o, t, exact)
    elif hasattr(theirs, "shape"):
        same(ours, theirs, exact)
    else:
        assert ours == theirs
    return ours


def values(M, dt, zero_dim=False):
    v = VALUES[dt]
    return M.tensor(v[1] if zero_dim else v, dtype=getattr(M, dt))


# --- in-place operators that must fit the tensor's dtype -------------------------------------

def _in_place(op):
    def program(x, y):
        if op == "**=":
            x **= y
        elif op == "&=":
            x &= y
        elif op == "|=":
            x |= y
        else:
            x ^= y
        return x
    return program


@needs_torch
@pytest.mark.parametrize("op", ["**=", "&=", "|=", "^="])
@pytest.mark.parametrize("dt", DTYPES)
def test_in_place_operators_keep_the_dtype_or_refuse(device, op, dt):
    """``x op= y`` writes into x (never a new tensor of the promoted dtype): a result that
    cannot be cast to x's dtype (bool from int, int from float) raises as in torch."""
    update = _in_place(op)
    exact = op != "**="
    for other in DTYPES:
        for zero_dim in (False, True):
            assert_as_torch(lambda M: update(values(M, dt), values(M, other, zero_dim)), device,
                            exact)
    for number in (2, 0, True, 2.5, float("nan")):
        assert_as_torch(lambda M: update(values(M, dt), number), device, exact)


@needs_torch
def test_in_place_operators_write_into_the_same_memory(device):
    for op in ("**=", "&=", "|=", "^="):
        for M in (torch, On(mg, device)):
            x = M.tensor([1, 2, 3])
            view = x[1:]
            y = _in_place(op)(x, 2)
            assert y is x
            assert view.tolist() == x[1:].tolist()
    for name in ("bitwise_and_", "bitwise_or_", "bitwise_xor_"):
        assert_as_torch(lambda M: getattr(M.tensor([5, 6, 7]), name)(M.tensor([3, 3, 3])),
                        device)
        assert_as_torch(lambda M: getattr(M.tensor([True, False]), name)(True), device)
        assert_as_torch(lambda M: getattr(M.tensor([True, False]), name)(2), device)


@needs_torch
def test_in_place_power_records_the_gradient(device):
    def program(M):
        x = M.tensor([0.5, 2.0, 3.0], dtype=M.float64, requires_grad=True)
        y = x * 1
        y **= 3
        y.sum().backward()
        return y, x.grad
    assert_as_torch(program, device)


# --- checked conversion of numbers into a dtype ----------------------------------------------

FILLS = [2, -1, 300, -300, 2 ** 40, 2.7, -1.5, 127.9, 255.9, 65504.0, 65520.0, 1e10, 1e300,
         float("inf"), float("nan"), True]


@needs_torch
@pytest.mark.parametrize("dt", DTYPES)
def test_fill_values_are_checked_as_torch(device, dt):
    mask = [True, False, True, False]
    for value in FILLS:
        assert_as_torch(lambda M: values(M, dt).masked_fill(M.tensor(mask), value), device)
        assert_as_torch(lambda M: values(M, dt).fill_(value), device)
    for value in (2, -1, 300, 2.5):  # a 0-d tensor value is read as a number
        assert_as_torch(lambda M: values(M, dt).masked_fill(M.tensor(mask), M.tensor(value)),
                        device)


@needs_torch
@pytest.mark.parametrize("dt", ["uint8", "int8", "int32", "int64", "float16", "float32",
                                "float64"])
def test_clamp_bounds_and_half_exponents_are_checked_as_torch(device, dt):
    for bound in (2, -300, 2 ** 40, 2.5, 1e10, 1e300, float("inf"), float("-inf")):
        assert_as_torch(lambda M: values(M, dt).clamp(bound), device)
        assert_as_torch(lambda M: values(M, dt).clamp(max=bound), device)
        assert_as_torch(lambda M: values(M, dt).clamp(-1, bound), device)
    for exponent in (2, 0.5, 1e10, -70000.0, float("inf"), 2 ** 20):
        if dt in ("float16", "float32", "float64"):  # (the special powers are exact)
            assert_as_torch(lambda M: values(M, dt).abs() ** exponent, device, exact=False)


@needs_torch
def test_fill_with_a_tensor_of_dims_raises(device):
    raises_as_torch(lambda M: M.zeros(4).fill_(M.tensor([1.0])), RuntimeError, device)
    raises_as_torch(lambda M: M.zeros(2, 2).fill_(M.ones(2, 2)), RuntimeError, device)
    raises_as_torch(lambda M: M.zeros(3).masked_fill(M.tensor([True, False, True]),
                                                     M.tensor([1.0])), RuntimeError, device)
    assert_as_torch(lambda M: M.zeros(3, dtype=M.int64).fill_(M.tensor(2.5)), device)


@needs_torch
def test_masked_fill_keeps_the_gradient_of_a_tensor_value(device):
    def program(M):
        x = M.tensor([1.0, 2.0, 3.0], dtype=M.float64, requires_grad=True)
        v = M.tensor(4.0, dtype=M.float64, requires_grad=True)
        out = x.masked_fill(M.tensor([True, False, True]), v)
        (out * M.tensor([1.0, 2.0, 3.0], dtype=M.float64)).sum().backward()
        return out, x.grad, v.grad
    assert_as_torch(program, device)


# --- reductions over dims -----------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_take_one_int_dim(device, op):
    """max(dim)/min(dim) take one int (values and indices); several dims are amax's."""
    def x(M):
        return M.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    for dim in ((0, 1), (1,), [0], (), 1.0):
        raises_as_torch(lambda M: getattr(x(M), op)(dim), TypeError, device)
        raises_as_torch(lambda M: getattr(x(M), op)(dim=dim, keepdim=True), TypeError, device)
    for dim in (0, 1, -1, np.int64(1)):
        assert_as_torch(lambda M: tuple(getattr(x(M), op)(dim)), device)
        assert_as_torch(lambda M: tuple(getattr(x(M), op)(dim, keepdim=True)), device)
    assert_as_torch(lambda M: getattr(x(M), op)(), device)
    assert_as_torch(lambda M: getattr(x(M), op)(x(M).flip(0)), device)


@needs_torch
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_of_an_empty_tensor_over_every_dim_raises(device, op):
    for shape in ((0,), (2, 0), (0, 3)):
        raises_as_torch(lambda M: getattr(M.zeros(shape), op)(dim=()), RuntimeError, device)
        raises_as_torch(lambda M: getattr(M.zeros(shape), op)(), RuntimeError, device)
    assert_as_torch(lambda M: getattr(M.zeros(2, 0), op)(dim=0), device)
    raises_as_torch(lambda M: getattr(M.zeros(2, 0), op)(dim=1), IndexError, device)


# --- operands that must be tensors, of one dtype ------------------------------------------

@needs_torch
@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical_ops_take_tensors_only(device, op):
    for number in (1, 0.5, True, np.float64(1.0)):
        raises_as_torch(lambda M: getattr(M.tensor([1.0, 0.0]), op)(number), TypeError, device)
        if hasattr(mg, op):  # (the function form, where minigrad has one)
            raises_as_torch(lambda M: getattr(M, op)(M.tensor([1, 0]), number), TypeError,
                            device)
    for dt in ("bool", "int32", "float32"):
        assert_as_torch(lambda M: getattr(values(M, dt), op)(values(M, "float64")), device)
        assert_as_torch(lambda M: getattr(values(M, dt), op)(values(M, "uint8", True)), device)


@needs_torch
@pytest.mark.parametrize("op", ["isclose", "allclose"])
def test_isclose_needs_one_dtype(device, op):
    for dt in DTYPES:
        for other in DTYPES:
            assert_as_torch(lambda M: getattr(values(M, dt), op)(values(M, other)), device)
            assert_as_torch(lambda M: getattr(values(M, dt), op)(values(M, other, True)),
                            device)
    raises_as_torch(lambda M: M.tensor([1.0, 2.0]).isclose(2.0), TypeError, device)
    raises_as_torch(lambda M: M.tensor([1.0, 2.0]).allclose(1), TypeError, device)
    assert_as_torch(lambda M: M.tensor([1.0, float("nan")]).isclose(
        M.tensor([1.0 + 1e-9, float("nan")]), equal_nan=True), device)


# --- Python numbers from tensors, and sizes ---------------------------------------------------

@needs_torch
def test_int_and_float_of_several_elements_raise_value_error(device):
    for convert in (int, float):
        raises_as_torch(lambda M: convert(M.ones(2, 3)), ValueError, device)
        raises_as_torch(lambda M: convert(M.tensor([])), ValueError, device)
        assert_as_torch(lambda M: convert(M.tensor([[-3.7]])), device)
        assert_as_torch(lambda M: convert(M.tensor(7)), device)
    raises_as_torch(lambda M: M.ones(2).item(), RuntimeError, device)
    raises_as_torch(lambda M: bool(M.ones(2)), RuntimeError, device)


@needs_torch
def test_sizes_must_be_integers(device):
    for make in (lambda M: M.zeros(2.0), lambda M: M.ones(2, 3.0), lambda M: M.empty((2.5,)),
                 lambda M: M.randn(2, 1.0), lambda M: M.zeros(2, M.tensor(2.0))):
        raises_as_torch(make, TypeError, device)
    for make in (lambda M: M.ones(3, 4).reshape(2.0, 6), lambda M: M.ones(3, 4).view(12.0),
                 lambda M: M.ones(3, 1).expand(3, 4.0), lambda M: M.ones(3, 4).repeat(1.0, 2),
                 lambda M: M.ones(3, 4).new_zeros(2.0)):
        raises_as_torch(make, TypeError, device)
    assert_as_torch(lambda M: M.zeros(np.int64(2), M.tensor(3)), device)
    assert_as_torch(lambda M: M.ones(6).reshape(M.tensor(3), 2), device)


@needs_torch
def test_tensor_of_none_raises(device):
    raises_as_torch(lambda M: M.tensor(None), RuntimeError, device)


@needs_torch
def test_new_tensor_nelement_ndimension(device):
    assert_as_torch(lambda M: M.tensor([1.0, 2.0]).new_tensor([1, 2]), device)
    assert_as_torch(lambda M: M.tensor([1, 2]).new_tensor([1.5, 2.5]), device)
    assert_as_torch(lambda M: M.tensor([1.0]).new_tensor([[1, 2]], dtype=M.int32), device)
    assert_as_torch(lambda M: M.tensor([1.0]).new_tensor(3.5), device)
    for M in (torch, On(mg, device)):
        x = M.tensor([1.0, 2.0])
        y = x.new_tensor(np.array([5.0, 6.0]), requires_grad=True)
        assert y.requires_grad and y.grad_fn is None and y.dtype == x.dtype
        assert M.ones(2, 3, 4).nelement() == 24 and M.ones(2, 3, 4).ndimension() == 3
        assert M.tensor(1.0).nelement() == 1 and M.tensor(1.0).ndimension() == 0


# --- index tensors out of range -------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("shape", [(3,), (3, 2), (2, 3, 4)])
def test_index_select_and_gather_out_of_range_raise_as_torch(device, shape):
    """torch raises an IndexError or a RuntimeError depending on the dim (and its kernel);
    minigrad raises an error that is both, for every dim."""
    for d in range(len(shape)):
        for i in (shape[d], -1):
            program = lambda M: M.ones(shape).index_select(d, M.tensor([0, i]))  # noqa: E731
            kind = outcome(program, torch)
            assert isinstance(kind, type) and issubclass(kind, Exception)
            raises_as_torch(program, kind, device)
            index = np.zeros(shape, np.int64)
            index.reshape(-1)[0] = i
            raises_as_torch(lambda M: M.ones(shape).gather(d, M.tensor(index)), RuntimeError,
                            device)


# --- view helpers ------------------------------------------------------------------------------

def _base(M):
    return M.arange(24.0, dtype=M.float64).reshape(2, 3, 4)


VIEWS = {
    "narrow": lambda x: x.narrow(1, 1, 2),
    "narrow_negative_start": lambda x: x.narrow(-1, -3, 2),
    "narrow_empty": lambda x: x.narrow(1, 3, 0),
    "narrow_tensor_start": lambda x: x.narrow(2, x.new_tensor(1, dtype=x.dtype).long(), 3),
    "movedim": lambda x: x.movedim(0, -1),
    "movedim_tuple": lambda x: x.movedim((0, 1), (2, 0)),
    "movedim_list": lambda x: x.movedim([2], [0]),
    "movedim_same": lambda x: x.movedim(1, 1),
    "moveaxis": lambda x: x.moveaxis(-1, 0),
    "unflatten": lambda x: x.unflatten(2, (2, 2)),
    "unflatten_inferred": lambda x: x.unflatten(-1, (2, -1)),
    "unflatten_one": lambda x: x.unflatten(1, [3]),
    "unflatten_ones": lambda x: x.unflatten(0, (1, 2, 1)),
    "unflatten_transposed": lambda x: x.transpose(0, 2).unflatten(0, (2, 2)),
    "swapaxes": lambda x: x.swapaxes(0, 2),
    "swapdims": lambda x: x.swapdims(-1, 1),
}


@needs_torch
@pytest.mark.parametrize("name", list(VIEWS))
def test_view_helpers_match_torch_and_share_memory(device, name):
    view = VIEWS[name]

    def values_and_base(M):
        x = _base(M)
        v = view(x)
        shared = v.numel() > 0
        if shared:
            v.mul_(-1)  # written through the view into the base
        return v, x, M.tensor(v.stride())

    assert_as_torch(values_and_base, device)

    def gradients(M):
        x = M.tensor(np.arange(24.0).reshape(2, 3, 4) / 7, requires_grad=True)
        out = view(x * 1)
        w = M.tensor(np.random.default_rng(len(name)).standard_normal(tuple(out.shape)))
        (out * w).sum().backward()
        return out, x.grad
    assert_as_torch(gradients, device)
    x = mg.tensor(np.arange(24.0).reshape(2, 3, 4) / 7, device=device, requires_grad=True)
    assert mg.autograd.gradcheck(lambda t: view(t * 1), (x,))


@needs_torch
def test_view_helpers_in_place_through_a_graph(device):
    def program(M):
        x = M.tensor(np.arange(24.0).reshape(2, 3, 4) / 5, requires_grad=True)
        y = x * 1
        y.narrow(1, 0, 2).movedim(0, -1).mul_(3)
        y.unflatten(2, (2, 2))[:, :, 1].add_(1)
        (y * y).sum().backward()
        return y, x.grad
    assert_as_torch(program, device)


BAD_VIEWS = {
    "narrow_0d": (lambda M: M.tensor(1.0).narrow(0, 0, 1), RuntimeError),
    "narrow_start_out": (lambda M: _base(M).narrow(1, -4, 1), IndexError),
    "narrow_start_past": (lambda M: _base(M).narrow(1, 4, 0), IndexError),
    "narrow_too_long": (lambda M: _base(M).narrow(1, 2, 2), RuntimeError),
    "narrow_negative_length": (lambda M: _base(M).narrow(1, 0, -1), RuntimeError),
    "narrow_dim_out": (lambda M: _base(M).narrow(3, 0, 1), IndexError),
    "movedim_repeated": (lambda M: _base(M).movedim((0, 0), (1, 2)), RuntimeError),
    "movedim_repeated_destination": (lambda M: _base(M).movedim((0, 1), (2, -1)),
                                     RuntimeError),
    "movedim_lengths": (lambda M: _base(M).movedim((0, 1), (1,)), RuntimeError),
    "movedim_out": (lambda M: _base(M).movedim(0, 3), IndexError),
    "unflatten_product": (lambda M: _base(M).unflatten(2, (3, -1)), RuntimeError),
    "unflatten_product_exact": (lambda M: _base(M).unflatten(2, (3, 2)), RuntimeError),
    "unflatten_two_inferred": (lambda M: _base(M).unflatten(2, (-1, -1)), RuntimeError),
    "unflatten_empty_sizes": (lambda M: _base(M).unflatten(2, ()), RuntimeError),
    "unflatten_0d": (lambda M: M.tensor(2.0).unflatten(0, (1,)), RuntimeError),
    "unflatten_dim_out": (lambda M: _base(M).unflatten(3, (1,)), IndexError),
    "swapaxes_out": (lambda M: _base(M).swapaxes(0, 3), IndexError),
}


@needs_torch
@pytest.mark.parametrize("case", list(BAD_VIEWS))
def test_view_helpers_bad_arguments_raise_as_torch(device, case):
    program, kind = BAD_VIEWS[case]
    raises_as_torch(program, kind, device)


@needs_torch
def test_view_helpers_of_0d_and_empty_tensors(device):
    assert_as_torch(lambda M: M.tensor(2.0).movedim(0, 0), device)
    assert_as_torch(lambda M: M.tensor(2.0).movedim(-1, 0), device)
    assert_as_torch(lambda M: M.tensor(2.0).swapaxes(0, -1), device)
    assert_as_torch(lambda M: M.zeros(0, 4).unflatten(1, (2, 2)), device)
    assert_as_torch(lambda M: M.zeros(0, 4).narrow(1, 1, 2), device)
    assert_as_torch(lambda M: M.zeros(0, 4).movedim(0, 1), device)


# --- var and std of float32 and float16: accumulated in float64, rounded once -----------------

@needs_torch
@pytest.mark.parametrize("dt", ["float16", "float32"])
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_and_std_round_once_as_torch(device, dt, op):
    rng = np.random.default_rng(5)
    for shape in ((3,), (7,), (1000,), (5, 37), (64, 3), (2, 3, 4)):
        a = (rng.standard_normal(shape) * 7 + 3).astype(dt)
        for dim in (None, 0, -1, (0, -1)):
            for correction in (0, 1, 2):
                assert_as_torch(lambda M: getattr(M.tensor(a), op)(dim, correction=correction,
                                                                   keepdim=True), device)


@needs_torch
@pytest.mark.parametrize("op", ["var", "std"])
def test_var_and_std_gradients_after_rounding_once(device, op):
    a = np.random.default_rng(6).standard_normal((3, 5)) * 4 + 1

    def program(M):
        x = M.tensor(a, dtype=M.float32, requires_grad=True)
        out = getattr(x, op)(1)
        (out * M.tensor([1.0, -2.0, 0.5])).sum().backward()
        return out, x.grad
    theirs = program(torch)
    ours = program(On(mg, device))
    same(ours[0], theirs[0])
    np.testing.assert_allclose(ours[1].numpy(), _numpy(theirs[1]), rtol=2e-6, atol=1e-6)
    x = mg.tensor(a, device=device, requires_grad=True)
    assert mg.autograd.gradcheck(lambda t: getattr(t, op)(1), (x,))
    assert mg.autograd.gradcheck(lambda t: getattr(t, op)(), (x,))


# --- operators refused on some dtypes and shapes ------------------------------------------

@needs_torch
def test_operators_refused_as_torch(device):
    raises_as_torch(lambda M: +M.tensor([True, False]), RuntimeError, device)
    for dt in ("uint8", "int32", "float16", "float64"):
        assert_as_torch(lambda M: +values(M, dt), device)
    raises_as_torch(lambda M: M.tensor([[True]]) @ M.tensor([[True]]), NotImplementedError,
                    device)
    raises_as_torch(lambda M: M.tensor([True, False]).matmul(M.tensor([True, True])),
                    NotImplementedError, device)
    assert_as_torch(lambda M: M.tensor([[1, 2]]) @ M.tensor([[3], [4]]), device)
    raises_as_torch(lambda M: M.ones(3).mT, RuntimeError, device)
    assert_as_torch(lambda M: M.arange(6.0).reshape(1, 2, 3).mT, device)


@needs_torch
@pytest.mark.parametrize("dt", ["uint8", "int8", "int32", "int64", "float16", "float32"])
def test_setitem_numbers_are_checked_as_torch(device, dt):
    def write(value):
        def program(M):
            x = M.arange(3, dtype=getattr(M, dt))
            x[0] = value
            x[1:] = value
            return x
        return program
    for value in (-1, 300, -300, 2 ** 40, 2.7, -1.5, 255.9, 1e10, float("inf"), float("nan"),
                  True):
        assert_as_torch(write(value), device)


@needs_torch
@pytest.mark.parametrize("call", ["swapaxes(X, 0, 2)", "swapdims(X, 1, 2)",
                                  "movedim(X, 0, -1)", "moveaxis(X, (0, 1), (2, 0))",
                                  "narrow(X, 1, 1, 2)", "unflatten(X, 2, (2, 2))",
                                  "logical_xor(X > 3, X < 10)"])
def test_function_forms_as_torch(device, call):
    assert_as_torch(lambda M: eval("M." + call, {"M": M, "X": M.arange(24).reshape(2, 3, 4)}),
                    device)
    assert mg.numel(mg.ones(2, 3)) == torch.numel(torch.ones(2, 3)) == 6
