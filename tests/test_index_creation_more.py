"""Writes of values with extra leading size-1 dims, 0-d integer index tensors, list indices
read as tuples, and the makers of new tensors: each against PyTorch."""
import ast
import contextlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import needs_torch, raises_as_torch, torch

pytestmark = needs_torch


def _grads_match(program, *leaves):
    """Run ``program(M, *leaves)`` (it returns a tensor to sum) with minigrad and torch; the
    values and the gradients of every leaf must agree."""
    results = {}
    for M in (mg, torch):
        ts = [M.tensor(np.asarray(a, dtype=np.float32), requires_grad=True) for a in leaves]
        out = program(M, *ts)
        (out * M.arange(out.numel()).reshape(out.shape).to(out.dtype)).sum().backward()
        results[M] = (out.detach().numpy(), [t.grad.numpy() for t in ts])
    (vm, gm), (vt, gt) = results[mg], results[torch]
    np.testing.assert_allclose(vm, vt)
    for a, b in zip(gm, gt):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b)


# --- 1. values with extra leading size-1 dims ------------------------------------------------

VALUE_SHAPES = [
    ((3, 4), 1, (1, 4)), ((3, 4), 1, (1, 1, 4)), ((3, 4), 1, (1, 1)), ((3, 4), 1, (1, 1, 1)),
    ((3, 4), (1, 2), (1,)), ((3, 4), (1, 2), (1, 1)), ((3, 4), slice(0, 2), (1, 1, 4)),
    ((3, 4), slice(0, 2), (1, 2, 1)), ((3, 4), slice(1, 2), (1, 1, 1, 4)),
    ((2, 3, 4), (0, slice(None), 1), (1, 3)), ((2, 3, 4), (Ellipsis, 2), (1, 1, 3)),
    ((3, 4), "rows", (1, 1, 2, 4)), ((3, 4), "rows", (1, 1, 1, 4)), ((3, 4), "rows", (1, 2, 1)),
    ((3, 4), "mask", (1, 1, 1)), ((3, 4), "mask", (1, 12)), ((3, 4), "mask", (1, 1, 12)),
    ((2, 3, 4), "pairs", (1, 1, 2, 4)), ((2, 3, 4), "pairs", (1, 2, 1)),
]


def _index(M, spec, shape):
    if spec == "rows":
        return M.tensor([0, 2])
    if spec == "mask":
        return M.ones(shape) > 0
    if spec == "pairs":
        return (M.tensor([0, 1]), M.tensor([2, 0]))
    return spec


@pytest.mark.parametrize("shape,spec,vshape", VALUE_SHAPES)
def test_setitem_value_with_leading_ones_gradient(shape, spec, vshape):
    def program(M, base, v):
        out = base * 1
        out[_index(M, spec, shape)] = v * 2
        return out
    _grads_match(program, np.random.rand(*shape), np.random.rand(*vshape))


@pytest.mark.parametrize("vshape", [(4,), (1, 4), (3, 1), (1, 1), ()])
def test_copy_broadcast_gradient(vshape):
    def program(M, base, v):
        out = base * 1
        out.copy_(v * 3)
        return out
    _grads_match(program, np.random.rand(3, 4), np.random.rand(*vshape))


@pytest.mark.parametrize("vshape", [(1, 4), (4,), (2, 1)])
def test_copy_into_view_gradient(vshape):
    def program(M, base, v):
        out = base * 1
        out[1:3].copy_(v * 3)
        return out
    _grads_match(program, np.random.rand(3, 4), np.random.rand(*vshape))


def test_copy_of_more_dims_than_target_raises_as_torch_when_not_leading_ones(device):
    raises_as_torch(lambda M: M.zeros(3, 4).copy_(M.ones(2, 3, 4)), RuntimeError, device)


# --- 2. a 0-d integer index tensor indexes as an int ------------------------------------------

INDICES_0D = [
    lambda T: (T(1), slice(None), T([0, 1])), lambda T: (T(1), slice(None), T(2)),
    lambda T: (slice(None), T(1), slice(None), T([0, 1])), lambda T: (T(1), None, T([0, 1])),
    lambda T: (Ellipsis, T(1), slice(None), T([0, 1])), lambda T: (T(1),),
    lambda T: (T(-1), slice(None), slice(None), T([[0], [1]])), lambda T: (T(True), T([0, 1])),
    lambda T: (T(1), slice(None), 1, T([0, 1])), lambda T: (T(0), T([2, 1])),
]


@pytest.mark.parametrize("make", INDICES_0D)
def test_zero_dim_integer_index(make):
    def program(M, x):
        return x[make(M.tensor)] * 1
    _grads_match(program, np.random.rand(2, 3, 4, 5))


@pytest.mark.parametrize("make", INDICES_0D)
def test_zero_dim_integer_index_setitem(make):
    def program(M, x, v):
        out = x * 1
        out[make(M.tensor)] = v.sum() * 1
        return out
    _grads_match(program, np.random.rand(2, 3, 4, 5), np.random.rand(3))


def test_zero_dim_integer_index_is_a_view():
    for M in (mg, torch):
        x = M.zeros(2, 3)
        x[M.tensor(1)][0] = 5.0
        assert x[1, 0].item() == 5.0


def test_zero_dim_numpy_integer_index():
    x = np.random.rand(2, 3, 4).astype(np.float32)
    got = mg.tensor(x)[np.array(1), :, mg.tensor([0, 1])]
    want = torch.tensor(x)[np.array(1), :, torch.tensor([0, 1])]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


# --- 3. a list index holding sequences, tensors, slices, None or Ellipsis ----------------------

LIST_INDICES = [
    lambda T: [[0, 1], [1, 0]], lambda T: [[0, 1], [1, 0], [0, 0]],
    lambda T: [T([0, 1]), T([1, 0])],
    lambda T: [0, slice(None)], lambda T: [slice(None), 0], lambda T: [None, 0],
    lambda T: [0, None],
    lambda T: [Ellipsis, 0], lambda T: [0, [1, 0]], lambda T: [[1, 0], 0], lambda T: [T(1), 0],
    lambda T: [T(1)], lambda T: [T([1, 0])], lambda T: [[1, 0]], lambda T: [(1, 0)],
    lambda T: [(1, 0), (0, 1)], lambda T: [np.array([1, 0]), np.array([0, 2])],
    lambda T: [np.array(1), 0], lambda T: [np.int64(1), 0], lambda T: [True, False],
    lambda T: [T([True, False])], lambda T: [T([True, False]), 0],
    lambda T: [[True, False], [0, 1]],
    lambda T: [], lambda T: [[]], lambda T: [0, 1, 1], lambda T: [1.0], lambda T: [[1.7, 0.2]],
    lambda T: [0, range(2)],
]


@pytest.mark.parametrize("make", LIST_INDICES)
def test_list_index(make):
    def program(M, x):
        return x[make(M.tensor)] * 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _grads_match(program, np.random.rand(2, 3, 4))


@pytest.mark.parametrize("make", LIST_INDICES)
def test_list_index_setitem(make):
    def program(M, x, v):
        out = x * 1
        out[make(M.tensor)] = v.sum() * 1
        return out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _grads_match(program, np.random.rand(2, 3, 4), np.random.rand(2))


def test_long_list_is_one_index():
    x = np.arange(40.0, dtype=np.float32)
    index = [[0]] * 33
    assert mg.tensor(x)[index].shape == tuple(torch.tensor(x)[index].shape) == (33, 1)


def test_uint8_tensor_index_is_a_mask_and_int8_refused(device):
    x = np.random.rand(2, 3).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.tensor(x)[torch.tensor([1, 0], dtype=torch.uint8)]
    got = mg.tensor(x)[mg.tensor([1, 0], dtype=mg.uint8)]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    raises_as_torch(lambda M: M.zeros(2, 3)[M.tensor([1, 0], dtype=M.int8)], IndexError, device)


# --- 4. creation ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["zeros", "ones", "empty", "rand", "randn"])
@pytest.mark.parametrize("size", [(2, 3), [4], ()])
def test_size_keyword(name, size):
    got, want = getattr(mg, name)(size=size), getattr(torch, name)(size=size)
    assert got.shape == tuple(want.shape) and str(got.dtype) == str(want.dtype).split(".")[1]


@pytest.mark.parametrize("call", [
    lambda M: M.full(size=(2, 3), fill_value=2), lambda M: M.arange(end=5),
    lambda M: M.arange(start=1, end=5), lambda M: M.arange(1, end=5, step=2),
    lambda M: M.randint(high=5, size=(3,)), lambda M: M.randint(low=1, high=5, size=(3,)),
    lambda M: M.randint(5, size=(2, 2)), lambda M: M.randint(3, 5, (4,), dtype=M.int32),
])
def test_keyword_creation(call):
    got, want = call(mg), call(torch)
    assert got.shape == tuple(want.shape) and str(got.dtype) == str(want.dtype).split(".")[1]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("args", [(5,), (2, 5)])
def test_randint_like(dtype, args):
    got = mg.randint_like(mg.zeros(3, 4, dtype=getattr(mg, dtype)), *args)
    want = torch.randint_like(torch.zeros(3, 4, dtype=getattr(torch, dtype)), *args)
    assert got.shape == tuple(want.shape) and str(got.dtype) == dtype == str(want.dtype)[6:]
    low, high = (0, args[0]) if len(args) == 1 else args
    assert ((got.numpy() >= low) & (got.numpy() < high)).all()


DATA = [
    lambda M: [np.array([1., 2.]), np.array([3., 4.])], lambda M: [np.float64(1.5), 2.0],
    lambda M: [2.0, np.float64(1.5)], lambda M: [1, np.float64(1.5)],
    lambda M: [[1.0], [np.float64(2)]],
    lambda M: [M.tensor(1., dtype=M.float64), M.tensor(2., dtype=M.float64)],
    lambda M: [M.tensor(1., dtype=M.float64), 1.0], lambda M: [M.tensor(1.), 1],
    lambda M: [np.array([1., 2.], dtype=np.float32)], lambda M: [np.int32(1), 1.0],
    lambda M: [np.int32(1)], lambda M: [np.array([1, 2]), np.array([3, 4])], lambda M: [1.5, 2.5],
    lambda M: [[1, 2], [3, 4]], lambda M: [True, False], lambda M: (np.float64(1.0), 2),
]


@pytest.mark.parametrize("make", DATA)
@pytest.mark.filterwarnings("ignore:Creating a tensor from a list of numpy")
def test_tensor_dtype_inference(make):
    got, want = mg.tensor(make(mg)), torch.tensor(make(torch))
    assert str(got.dtype) == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("value", [np.float64(1.5), np.int32(3), np.bool_(True), np.float32(2.5),
                                   1.5, 3, True])
def test_full_dtype_of_numpy_scalars(value):
    got, want = mg.full((2,), value), torch.full((2,), value)
    assert str(got.dtype) == str(want.dtype).split(".")[1]


@pytest.mark.parametrize("value", [(1.5, "float64"), (3, "int32"), (True, "bool")])
def test_full_dtype_of_zero_dim_tensor(value):
    v, dt = value
    got = mg.full((2,), mg.tensor(v, dtype=getattr(mg, dt)))
    want = torch.full((2,), torch.tensor(v, dtype=getattr(torch, dt)))
    assert str(got.dtype) == str(want.dtype).split(".")[1]


@pytest.mark.parametrize("name", ["rand", "randn"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
def test_random_draws_refuse_non_floating_dtypes(name, dtype, device):
    raises_as_torch(lambda M: getattr(M, name)(2, dtype=getattr(M, dtype)),
                    NotImplementedError, device)
    raises_as_torch(lambda M: getattr(M, name + "_like")(M.zeros(2, dtype=getattr(M, dtype))),
                    NotImplementedError, device)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "int8", "uint8", "float32"])
@pytest.mark.parametrize("args", [(0, 5, 1.5), (0.5, 5, 1), (0, 4.5, 1), (0.7, 5.9, 1.9),
                                  (-0.5, -5.5, -1.5), (5, 0, -1.5), (3, 1.2, -1), (0, 5, 0.5)])
def test_arange_fractional_arguments_with_integer_dtype(dtype, args):
    def run(M):
        try:
            return M.arange(*args, dtype=getattr(M, dtype)).tolist()
        except (ValueError, RuntimeError) as e:
            return type(e)
    step_is_zero = dtype != "float32" and int(args[-1]) == 0
    assert run(mg) == (_torch_arange_in_a_child(args, dtype) if step_is_zero else run(torch))


def _torch_arange_in_a_child(args, dtype):
    """torch.arange(*args, dtype)'s list or exception type, asked of a child process: with a
    step that is 0 in an integer dtype, some PyTorch builds divide by it and die of SIGFPE,
    which would take the test process with them. Skips when the child dies."""
    code = (f"import torch\ntry:\n    print(torch.arange(*{args!r}, dtype=torch.{dtype}).tolist())"
            "\nexcept (ValueError, RuntimeError) as e:\n    print(type(e).__name__)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    if done.returncode < 0:
        pytest.skip(f"PyTorch {torch.__version__} dies of signal {-done.returncode} on "
                    f"torch.arange{args} with dtype {dtype}: no reference")
    assert done.returncode == 0, done.stderr
    answer = done.stdout.strip()
    return {"ValueError": ValueError, "RuntimeError": RuntimeError}.get(answer) or \
        ast.literal_eval(answer)


# --- 5. error types -------------------------------------------------------------------------

@pytest.mark.parametrize("program", [
    lambda M: M.eye(-1), lambda M: M.eye(2, -1), lambda M: M.randint(5, 5, (3,)),
    lambda M: M.randint(5, 4, (3,)), lambda M: M.randint(0, (3,)),
    lambda M: M.tensor(float("nan"), dtype=M.int32), lambda M: M.tensor([1.0, float("nan")],
                                                                        dtype=M.int64),
    lambda M: M.tensor(float("inf"), dtype=M.int64),
])
def test_runtime_errors(program, device):
    raises_as_torch(program, RuntimeError, device)


# --- a value's leading size-1 dims, copy_'s broadcast, flatten of a 0-d tensor -------------

@pytest.mark.parametrize("value_shape, index", [
    ((1, 1, 4), 1), ((1, 4), "mask"), ((1, 1, 4), "mask"), ((1, 1), ...), ((1, 3, 4), ...),
    ((1, 2, 4), slice(0, 2))])
@pytest.mark.parametrize("grad", [False, True])
def test_setitem_reads_a_value_without_its_leading_ones_as_torch(value_shape, index, grad):
    results = []
    for M in (torch, mg):
        target = M.zeros(3, 4)
        if index == "mask":
            where = M.zeros(3, 4, dtype=M.bool)
            where[0] = True
        else:
            where = index
        value = M.ones(*value_shape) * 1.5
        if grad:
            value.requires_grad_(True)
        target[where] = value * 2 if grad else value
        if grad:
            (target * M.arange(12.0).reshape(3, 4)).sum().backward()
            results.append((target.detach().numpy(), value.grad.numpy()))
        else:
            results.append((target.numpy(),))
    for ours, theirs in zip(results[1], results[0]):
        np.testing.assert_array_equal(ours, theirs)


def _same_result_or_error(program, kind):
    """``program(M)`` raises ``kind`` in both libraries, or gives the same values."""
    try:
        theirs = program(torch).numpy()
    except kind:
        raises_as_torch(program, kind, "cpu")
        return
    np.testing.assert_array_equal(program(mg).numpy(), theirs)


@pytest.mark.parametrize("shape, src", [((3, 4), (1, 1, 3, 4)), ((4,), (1, 4)), ((), (1,)),
                                        ((3, 4), (4,)), ((2, 3, 4), (3, 1)), ((3, 4), (2, 4))])
def test_copy_broadcasts_the_source_only_to_the_target_shape_as_torch(shape, src):
    _same_result_or_error(
        lambda M: M.zeros(shape).copy_(M.arange(float(np.prod(src))).reshape(src)),
        RuntimeError)


@pytest.mark.parametrize("dims", [(0, -1), (-1, 0), (0, 0), (1, -1), (0, 1), (-2, -1)])
def test_flatten_of_a_0d_tensor_takes_dims_0_and_minus_1_as_torch(dims):
    _same_result_or_error(lambda M: M.tensor(2.0).flatten(*dims), IndexError)


# --- normal: PyTorch's overloads --------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("args", ["M.zeros(2, 1), M.ones(3)", "M.zeros(2), 1.0",
                                  "0.0, M.ones(2, dtype=M.float64)", "2, 3, size=(4,)",
                                  "1.0, 0.5, (2, 3)"], ids=str)
def test_normal_shapes_and_dtypes_as_torch(args, device):
    M = mg
    got = eval(f"M.normal({args})")
    M = torch
    want = eval(f"M.normal({args})")
    assert tuple(got.shape) == tuple(want.shape) and str(got.dtype) == str(want.dtype)[6:]


def test_normal_draws_the_same_values_whether_mean_requires_grad_or_not(device):
    mg.manual_seed(3)
    mean = mg.full((4000,), 3.0, device=device, requires_grad=True)
    x = mg.normal(mean, 0.5)
    assert abs(x.mean().item() - 3.0) < 0.05 and abs(x.std().item() - 0.5) < 0.05
    assert x.requires_grad and x.device == mean.device
    mg.manual_seed(3)
    assert mg.normal(mean.detach(), 0.5).tolist() == x.tolist()
    mg.manual_seed(1)
    a = mg.normal(0.0, 1.0, size=(3,))
    mg.manual_seed(1)
    assert a.tolist() == mg.normal(0.0, 1.0, size=(3,)).tolist()


@needs_torch
@pytest.mark.parametrize("args", ["m, 2.0", "0.5, s", "m, s", "m.detach(), s.detach()",
                                  "m, s.detach()", "m[:1], s"], ids=str)
@pytest.mark.parametrize("grad_mode", ["enabled", "no_grad"])
def test_normal_takes_a_zero_gradient_as_torch(args, grad_mode, device):
    """A mean or std that requires grad gives a result that requires grad, with PyTorch's
    node (NormalBackward1/2/3 by which is a tensor) and zero gradients of their shapes."""
    seen = []
    for M, dev in ((torch, "cpu"), (mg, device)):
        m = M.zeros(2, 3, dtype=M.float64, device=dev).requires_grad_()
        s = M.ones(3, dtype=M.float64, device=dev).requires_grad_()
        with M.no_grad() if grad_mode == "no_grad" else contextlib.nullcontext():
            y = eval(f"M.normal({args})")
        name = type(y.grad_fn).__name__ if M is torch else y.grad_fn and y.grad_fn.name()
        seen.append((y.requires_grad, name if y.grad_fn else None, tuple(y.shape)))
        if y.requires_grad:
            (y * 3).sum().backward()
        seen.append([None if t.grad is None else (tuple(t.grad.shape), t.grad.abs().sum().item())
                     for t in (m, s)])
    assert seen[:2] == seen[2:]


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M: M.normal(0.0, 1.0), TypeError),
    (lambda M: M.normal(0.0, -1.0, (2,)), RuntimeError),
    (lambda M: M.normal(M.zeros(2), -1.0), RuntimeError),
    (lambda M: M.normal(M.zeros(2, dtype=M.long), 1.0), NotImplementedError),
    (lambda M: M.normal(M.zeros(2), M.ones(3)), RuntimeError),
    (lambda M: M.normal(M.zeros(2), 1.0, (2,)), TypeError),
], ids=["no size", "negative std", "negative std tensor mean", "integer mean", "shapes",
        "size with a tensor"])
def test_normal_errors_as_torch(program, kind, device):
    raises_as_torch(program, kind, device)
