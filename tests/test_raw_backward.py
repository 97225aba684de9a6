"""Backward rules that compute on raw arrays when no graph is built (``Mul``, ``Sub``,
``Neg``, ``Tanh``, ``Sigmoid``, ``Linear``) must give exactly the gradients of their Tensor
form, which runs under ``create_graph=True``: the same bits, dtype and shape."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F

DTYPES = [np.float16, np.float32, np.float64]


def _both_ways(fn, *inputs, seed=0):
    """Gradients of ``fn(*inputs)`` for a random output gradient: without and with
    create_graph."""
    out = fn(*inputs)
    g = mg.tensor(np.asarray(np.random.default_rng(seed).standard_normal(out.shape), out.dtype))
    wanted = [t for t in inputs if isinstance(t, mg.Tensor) and t.requires_grad]
    raw = mg.grad(out, wanted, grad_outputs=g, retain_graph=True)
    tensor_form = mg.grad(out, wanted, grad_outputs=g, create_graph=True)
    return raw, tensor_form


def _same_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    assert type(a.array) is np.ndarray and type(b.array) is np.ndarray
    assert a.numpy().tobytes() == b.detach().numpy().tobytes()


def _t(shape, dtype, seed, grad=True):
    a = np.random.default_rng(seed).standard_normal(shape) * 2
    return mg.tensor(np.asarray(a, dtype=dtype), requires_grad=grad)


CASES = {
    "x * y": (lambda x, y: x * y, [(3, 4), (3, 4)]),
    "x * y broadcast": (lambda x, y: x * y, [(2, 3, 4), (4,)]),
    "x * 0.1": (lambda x: x * 0.1, [(3, 4)]),
    "0.3 * x": (lambda x: 0.3 * x, [(5,)]),
    "0-d x * 0-d y": (lambda x, y: x * y, [(), ()]),
    "0-d x * 2.5": (lambda x: x * 2.5, [()]),
    "x - y": (lambda x, y: x - y, [(3, 4), (1, 4)]),
    "2 - x": (lambda x: 2 - x, [(3, 4)]),
    "0-d x - y": (lambda x, y: x - y, [(), ()]),
    "-x": (lambda x: -x, [(2, 3)]),
    "-(0-d x)": (lambda x: -x, [()]),
    "tanh": (lambda x: x.tanh(), [(4, 5)]),
    "sigmoid": (lambda x: x.sigmoid(), [(4, 5)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(2, 3, 5), (4, 5), (4,)]),
    "linear, 1-d x": (lambda x, w, b: F.linear(x, w, b), [(5,), (4, 5), (4,)]),
    "linear, no bias": (lambda x, w: F.linear(x, w), [(6, 5), (4, 5)]),
    "linear, no rows": (lambda x, w, b: F.linear(x, w, b), [(0, 5), (4, 5), (4,)]),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", list(CASES))
def test_raw_gradients_equal_the_tensor_form_bit_for_bit(case, dtype):
    fn, shapes = CASES[case]
    inputs = [_t(s, dtype, seed) for seed, s in enumerate(shapes)]
    raw, tensor_form = _both_ways(fn, *inputs)
    for a, b in zip(raw, tensor_form):
        _same_bits(a, b)


@pytest.mark.parametrize("needs", [(True, False, True), (False, True, True),
                                   (True, True, False), (False, False, True)])
def test_linear_raw_gradients_only_for_the_inputs_that_need_them(needs):
    x, w, b = (_t(s, np.float32, k, grad) for k, (s, grad) in
               enumerate(zip([(3, 5), (4, 5), (4,)], needs)))
    out = F.linear(x, w, b)
    g = mg.tensor(np.ones(out.shape, np.float32))
    out.backward(g)
    for t, wanted in zip((x, w, b), needs):
        assert (t.grad is not None) == wanted
    expected_x = g.numpy() @ w.numpy()
    if needs[0]:
        np.testing.assert_array_equal(x.grad.numpy(), expected_x)
    if needs[2]:
        np.testing.assert_allclose(b.grad.numpy(), np.full(4, 3.0, np.float32))


@pytest.mark.parametrize("case", ["x * y", "x - y", "-x", "tanh", "sigmoid", "linear"])
def test_second_derivatives_still_run_through_the_tensor_form(case):
    fn, shapes = CASES[case]
    inputs = [_t(s, np.float64, seed) for seed, s in enumerate(shapes)]
    assert mg.autograd.gradgradcheck(fn, tuple(inputs))
