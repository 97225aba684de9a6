"""Activations and small layers: Softmax, LogSoftmax (and F.softmax / F.log_softmax with
``dtype=`` and the implicit dim), SiLU, Sigmoid, Tanh, Flatten, Identity, the ``inplace=``
of ReLU and Dropout, F.one_hot, F.normalize and Embedding.from_pretrained.

Each is compared with torch on several shapes and options (values, dtypes and input
gradients; float64 to a few ulp, float32 to about 1e-6), the differentiable ones are
gradchecked in float64, and bad arguments raise what torch raises. In-place calls return the
input itself, as torch's, and their writes are recorded in the graph.
"""
import itertools
import warnings
import zlib

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from tests.torch_ref import needs_torch, raises_as_torch, torch

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
TOL = {np.dtype(np.float32): dict(rtol=2e-6, atol=1e-6),
       np.dtype(np.float64): dict(rtol=1e-12, atol=1e-14)}
SHAPES = [(), (5,), (3, 4), (2, 3, 4), (2, 3, 2, 2)]


def rng_for(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def pair(array, dtype, device, requires_grad=True):
    """The same values as a minigrad tensor on ``device`` and a torch tensor."""
    a = np.asarray(array).astype(dtype)
    return (mg.tensor(a, device=device, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def same_values_and_grads(ours, theirs, x, tx, dtype, seed=0):
    """``ours`` equals ``theirs`` (shape, dtype, values) and so do the gradients reaching
    x and tx under one random upstream gradient."""
    assert ours.shape == tuple(theirs.shape)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    tol = TOL[np.dtype(dtype)]
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), **tol)
    g = np.random.default_rng(seed).standard_normal(ours.shape).astype(ours.numpy().dtype)
    (ours * mg.tensor(g, device=ours.device)).sum().backward()
    (theirs * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)


def f64(device, array, requires_grad=True):
    return mg.tensor(np.asarray(array, dtype=np.float64), device=device,
                     requires_grad=requires_grad)


# --- softmax and log_softmax --------------------------------------------------------------------

@needs_torch
@DTYPES
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_softmax_without_dim_takes_torchs_implicit_dim(name, shape, dtype, device):
    # dim 0 for 0-, 1- and 3-d inputs, dim 1 otherwise, with the deprecation warning
    x, tx = pair(rng_for(name, shape).standard_normal(shape) * 2, dtype, device)
    with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name}") as caught:
        ours = getattr(F, name)(x)
    assert caught[0].filename == __file__  # the warning points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(torch.nn.functional, name)(tx)
    same_values_and_grads(ours, theirs, x, tx, dtype)
    expected_dim = 0 if len(shape) in (0, 1, 3) else 1
    np.testing.assert_allclose(ours.detach().numpy(),
                               getattr(F, name)(x.detach(), expected_dim).numpy(), rtol=0)


@needs_torch
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("source, target", [(np.float32, "float64"), (np.float64, "float32"),
                                            (np.int64, "float64"), (np.int64, "float32")],
                         ids=["f32->f64", "f64->f32", "int->f64", "int->f32"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_dtype_casts_first_as_torch(name, source, target, dim, device):
    rng = rng_for(name, "dtype", dim)
    values = rng.integers(-4, 4, size=(3, 4)) if source == np.int64 else \
        rng.standard_normal((3, 4))
    floating = source != np.int64
    x, tx = pair(values, source, device, requires_grad=floating)
    ours = getattr(F, name)(x, dim, dtype=getattr(mg, target))
    theirs = getattr(torch.nn.functional, name)(tx, dim, dtype=getattr(torch, target))
    if floating:
        same_values_and_grads(ours, theirs, x, tx, np.dtype(target))
    else:
        assert str(ours.dtype) == target
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), **TOL[np.dtype(target)])


@needs_torch
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_of_empty_inputs_matches_torch(name, device):
    for values, kw in [(np.zeros((0, 3)), {}), (np.zeros((0, 3), dtype=np.int64), {}),
                       (np.zeros((2, 0), dtype=np.int64), {"dtype": "float64"})]:
        x = mg.tensor(values, device=device)
        ours = getattr(F, name)(x, 1, **{k: getattr(mg, v) for k, v in kw.items()})
        theirs = getattr(torch.nn.functional, name)(torch.tensor(values), 1,
                                                    **{k: getattr(torch, v) for k, v in
                                                       kw.items()})
        assert ours.shape == tuple(theirs.shape)
        assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")


@needs_torch
@pytest.mark.parametrize("module", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_softmax_modules_match_torch(module, dim, device):
    shape = (2, 3, 4)
    x, tx = pair(rng_for(module, dim).standard_normal(shape), np.float64, device)
    ours, theirs = getattr(nn, module)(dim), getattr(torch.nn, module)(dim)
    assert repr(ours) == repr(theirs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = ours(x)
    messages = [str(w.message) for w in caught]
    if dim is None:
        function = {"Softmax": "softmax", "LogSoftmax": "log_softmax"}[module]
        assert len(messages) == 1
        assert messages[0].startswith(f"Implicit dimension choice for {function} ")
        assert caught[0].filename == __file__  # the warning points at the module's caller
    else:
        assert messages == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = theirs(tx)
    same_values_and_grads(out, ref, x, tx, np.float64)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_gradcheck(name, device):
    x = f64(device, rng_for(name, "gradcheck").standard_normal((2, 3, 2)))
    assert mg.autograd.gradcheck(lambda x: getattr(F, name)(x, 1), (x,))
    assert mg.autograd.gradcheck(lambda x: getattr(F, name)(x, -1, dtype=mg.float64), (x,))


# --- SiLU, Sigmoid, Tanh ------------------------------------------------------------------------

ELEMENTWISE = {"SiLU": "silu", "Sigmoid": "sigmoid", "Tanh": "tanh"}


@needs_torch
@DTYPES
@pytest.mark.parametrize("module", list(ELEMENTWISE))
@pytest.mark.parametrize("shape", SHAPES[:4], ids=str)
def test_elementwise_modules_match_torch(module, shape, dtype, device):
    values = rng_for(module, shape).standard_normal(shape) * 4
    if values.size >= 3:
        values.reshape(-1)[:3] = [0.0, -800.0, 800.0]  # saturation: nothing overflows
    x, tx = pair(values, dtype, device)
    ours, theirs = getattr(nn, module)(), getattr(torch.nn, module)()
    assert repr(ours) == repr(theirs)
    same_values_and_grads(ours(x), theirs(tx), x, tx, dtype)


@needs_torch
@DTYPES
@pytest.mark.parametrize("name", ["silu", "sigmoid", "tanh"])
def test_elementwise_functions_match_torch(name, dtype, device):
    x, tx = pair(rng_for(name).standard_normal((4, 5)) * 3, dtype, device)
    same_values_and_grads(getattr(F, name)(x), getattr(torch.nn.functional, name)(tx), x, tx,
                          dtype)


@needs_torch
def test_functional_relu_inplace_as_torch(device):
    x, tx = pair(rng_for("relu_").standard_normal(6), np.float64, device)
    h, th = x * 1, tx * 1
    assert F.relu_(h) is h and torch.nn.functional.relu_(th) is th
    same_values_and_grads(h, th, x, tx, np.float64)


@needs_torch
def test_sigmoid_and_tanh_of_integers_are_float32_as_torch(device):
    values = np.arange(-3, 3)
    for module in ("Sigmoid", "Tanh"):
        ours = getattr(nn, module)()(mg.tensor(values, device=device))
        theirs = getattr(torch.nn, module)()(torch.tensor(values))
        assert ours.dtype == mg.float32 and theirs.dtype == torch.float32
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


def test_silu_gradcheck(device):
    x = f64(device, rng_for("silu gradcheck").standard_normal((3, 4)) * 3)
    assert mg.autograd.gradcheck(F.silu, (x,))
    assert mg.autograd.gradgradcheck(F.silu, (x,))


@needs_torch
def test_silu_inplace_returns_its_input_as_torch(device):
    x, tx = pair(rng_for("silu inplace").standard_normal(6), np.float64, device)
    h, th = x * 1, tx * 1
    out, tout = F.silu(h, inplace=True), torch.nn.functional.silu(th, inplace=True)
    assert out is h and tout is th
    same_values_and_grads(out, tout, x, tx, np.float64)
    assert repr(nn.SiLU(inplace=True)) == repr(torch.nn.SiLU(inplace=True)) == \
        "SiLU(inplace=True)"


# --- ReLU and Dropout in place ------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("how", ["function", "module"])
def test_relu_inplace_writes_and_returns_its_input(how, device):
    x, tx = pair(rng_for("relu", how).standard_normal((3, 4)), np.float64, device)
    h, th = x * 2, tx * 2
    if how == "function":
        out, tout = F.relu(h, inplace=True), torch.nn.functional.relu(th, inplace=True)
    else:
        out, tout = nn.ReLU(inplace=True)(h), torch.nn.ReLU(inplace=True)(th)
    assert out is h and tout is th
    assert h._version == th._version == 1  # one write, counted as torch counts it
    assert out.grad_fn.__class__.__name__ == "ReluBackward0"
    assert tout.grad_fn.__class__.__name__ == "ReluBackward0"
    same_values_and_grads(out, tout, x, tx, np.float64)


@needs_torch
def test_relu_and_dropout_keep_torchs_reprs():
    for ours, theirs in [(nn.ReLU(), torch.nn.ReLU()), (nn.ReLU(True), torch.nn.ReLU(True)),
                         (nn.Dropout(), torch.nn.Dropout()),
                         (nn.Dropout(0.2, True), torch.nn.Dropout(0.2, True))]:
        assert repr(ours) == repr(theirs)


def test_relu_out_of_place_leaves_the_input_alone(device):
    x = mg.tensor([-1.0, 2.0], device=device)
    out = nn.ReLU()(x)
    assert out is not x and x.tolist() == [-1.0, 2.0] and x._version == 0


def test_relu_inplace_on_a_leaf_that_requires_grad_needs_no_grad(device):
    x = mg.tensor([-1.0, 2.0], device=device, requires_grad=True)
    with mg.no_grad():
        assert F.relu(x, inplace=True) is x
    assert x.tolist() == [0.0, 2.0]


@pytest.mark.parametrize("p", [0.3, 0.5, 0.9])
@pytest.mark.parametrize("how", ["function", "module"])
def test_dropout_inplace_writes_the_same_result_into_its_input(p, how, device):
    rng = rng_for("dropout", p, how)
    values = rng.uniform(1.0, 2.0, size=(20, 30))  # never 0: zeros are exactly the dropped
    x = f64(device, values)
    h = x * 1
    mg.manual_seed(3)
    reference = F.dropout(x.detach(), p)
    mg.manual_seed(3)
    out = F.dropout(h, p, inplace=True) if how == "function" else \
        nn.Dropout(p, inplace=True)(h)
    assert out is h and h._version == 1
    np.testing.assert_array_equal(out.detach().numpy(), reference.numpy())
    kept = out.detach().numpy() != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(out.detach().numpy()[kept], values[kept] / (1 - p), rtol=1e-15)
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), kept / (1 - p), rtol=1e-15)


@pytest.mark.parametrize("p, training", [(0.5, False), (0.0, True), (0.0, False)])
@pytest.mark.parametrize("inplace", [False, True])
def test_dropout_returns_its_input_itself_when_nothing_is_dropped(p, training, inplace,
                                                                  device):
    # as torch's: eval mode and p = 0 give back the very tensor (even a leaf needing grad)
    x = mg.randn(3, 4, device=device, requires_grad=True)
    assert F.dropout(x, p, training, inplace) is x
    module = nn.Dropout(p, inplace)
    module.train(training)
    assert module(x) is x


def test_dropout_inplace_with_p_1_zeroes_its_input(device):
    x = f64(device, [1.0, -2.0, 3.0])
    h = x * 1
    assert F.dropout(h, 1.0, inplace=True) is h
    assert h.tolist() == [0.0, 0.0, 0.0]
    h.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


# --- Flatten and Identity -----------------------------------------------------------------------

FLATTEN = [(1, -1), (0, -1), (0, 1), (1, 2), (-2, -1), (2, 2), (0, 0), (-1, -1)]


@needs_torch
@pytest.mark.parametrize("start_dim, end_dim", FLATTEN)
@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5), (2, 0, 3)], ids=str)
def test_flatten_matches_torch(start_dim, end_dim, shape, device):
    x, tx = pair(rng_for("flatten", shape).standard_normal(shape), np.float64, device)
    ours, theirs = nn.Flatten(start_dim, end_dim), torch.nn.Flatten(start_dim, end_dim)
    assert repr(ours) == repr(theirs)
    out, ref = ours(x), theirs(tx)
    assert out.shape == tuple(ref.shape)
    if x.numel():
        same_values_and_grads(out, ref, x, tx, np.float64)


@needs_torch
def test_flatten_defaults_keep_the_batch_dim(device):
    assert repr(nn.Flatten()) == repr(torch.nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert nn.Flatten()(mg.zeros(2, 3, 4, 5, device=device)).shape == (2, 60)
    assert nn.Flatten()(mg.zeros(7, 3, device=device)).shape == (7, 3)
    assert nn.Flatten(0)(mg.zeros((), device=device)).shape == (1,)


def test_flatten_gradcheck(device):
    x = f64(device, rng_for("flatten gradcheck").standard_normal((2, 3, 2)))
    assert mg.autograd.gradcheck(nn.Flatten(), (x,))


@needs_torch
def test_identity_takes_and_ignores_any_arguments(device):
    ours, theirs = nn.Identity(54, unused="argument", p=0.1), \
        torch.nn.Identity(54, unused="argument", p=0.1)
    assert repr(ours) == repr(theirs) == "Identity()"
    assert list(ours.parameters()) == [] and ours.state_dict() == {}
    x = mg.randn(3, device=device)
    assert ours(x) is x


# --- one_hot ------------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 2)], ids=str)
@pytest.mark.parametrize("num_classes", [-1, 6, 11])
def test_one_hot_matches_torch(shape, num_classes, device):
    values = rng_for("one_hot", shape).integers(0, 6, size=shape)
    ours = F.one_hot(mg.tensor(values, device=device), num_classes)
    theirs = torch.nn.functional.one_hot(torch.tensor(values), num_classes)
    assert ours.dtype == mg.int64 and ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@needs_torch
def test_one_hot_of_an_empty_tensor_with_num_classes(device):
    ours = F.one_hot(mg.zeros((2, 0), dtype=mg.int64, device=device), 3)
    theirs = torch.nn.functional.one_hot(torch.zeros((2, 0), dtype=torch.int64), 3)
    assert ours.shape == tuple(theirs.shape) == (2, 0, 3) and ours.dtype == mg.int64


# --- normalize ----------------------------------------------------------------------------------

NORMALIZE = [(2.0, 1), (1.0, 1), (3.0, 0), (float("inf"), -1), (2.0, (1, 2)), (0.5, 1)]


@needs_torch
@DTYPES
@pytest.mark.parametrize("p, dim", NORMALIZE, ids=str)
def test_normalize_matches_torch(p, dim, dtype, device):
    values = rng_for("normalize", p, dim).standard_normal((3, 4, 2))
    values[1] = 0.0  # a zero slice: divided by eps, so it stays zero (gradient 1 / eps)
    x, tx = pair(values, dtype, device)
    ours = F.normalize(x, p=p, dim=dim)
    theirs = torch.nn.functional.normalize(tx, p=p, dim=dim)
    same_values_and_grads(ours, theirs, x, tx, dtype)


@needs_torch
@pytest.mark.parametrize("eps", [1e-12, 0.5, 10.0])
def test_normalize_eps_matches_torch(eps, device):
    x, tx = pair(rng_for("eps", eps).standard_normal((4, 3)), np.float64, device)
    same_values_and_grads(F.normalize(x, eps=eps), torch.nn.functional.normalize(tx, eps=eps),
                          x, tx, np.float64)


@needs_torch
def test_normalize_by_default_rows_of_unit_length(device):
    x = F.normalize(f64(device, [[3.0, 4.0], [0.0, 0.0]], requires_grad=False))
    np.testing.assert_allclose(x.numpy(), [[0.6, 0.8], [0.0, 0.0]], rtol=1e-15)


@pytest.mark.parametrize("p, dim", NORMALIZE, ids=str)
def test_normalize_gradcheck(p, dim, device):
    x = f64(device, rng_for("normalize gradcheck", p).standard_normal((2, 3, 2)) + 0.1)
    assert mg.autograd.gradcheck(lambda x: F.normalize(x, p=p, dim=dim), (x,))


# --- Embedding.from_pretrained ------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("freeze", [True, False])
@pytest.mark.parametrize("padding_idx", [None, 1, -1])
def test_embedding_from_pretrained_matches_torch(freeze, padding_idx, device):
    table = rng_for("pretrained").standard_normal((5, 3))
    ids = np.array([[0, 1, 4], [1, 1, 2]])
    ours = nn.Embedding.from_pretrained(mg.tensor(table, device=device), freeze=freeze,
                                        padding_idx=padding_idx)
    theirs = torch.nn.Embedding.from_pretrained(torch.tensor(table), freeze=freeze,
                                                padding_idx=padding_idx)
    assert repr(ours) == repr(theirs)
    assert ours.weight.requires_grad is theirs.weight.requires_grad is (not freeze)
    # the padding row keeps its pretrained values: only its gradient is cut
    np.testing.assert_array_equal(ours.weight.detach().numpy(), table)
    out, ref = ours(mg.tensor(ids, device=device)), theirs(torch.tensor(ids))
    np.testing.assert_array_equal(out.detach().numpy(), ref.detach().numpy())
    assert out.requires_grad is ref.requires_grad is (not freeze)
    if not freeze:
        g = rng_for("pretrained grad").standard_normal(out.shape)
        (out * mg.tensor(g, device=device)).sum().backward()
        (ref * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(),
                                   rtol=1e-15)


def test_embedding_from_pretrained_shares_the_tables_memory(device):
    table = mg.zeros(4, 2, device=device)
    emb = nn.Embedding.from_pretrained(table)
    with mg.no_grad():
        table[2] = 7.0
    assert emb.weight[2].tolist() == [7.0, 7.0]
    assert isinstance(emb.weight, nn.Parameter)
    assert [name for name, _ in emb.named_parameters()] == ["weight"]


def test_embedding_from_pretrained_trains_when_not_frozen(device):
    emb = nn.Embedding.from_pretrained(mg.ones(3, 2, device=device), freeze=False)
    opt = mg.optim.SGD(emb.parameters(), lr=0.5)
    emb(mg.tensor([0, 0, 2], device=device)).sum().backward()
    opt.step()
    assert emb.weight.tolist() == [[0.0, 0.0], [1.0, 1.0], [0.5, 0.5]]


# --- errors -------------------------------------------------------------------------------------

def _f(M):
    return M.nn.functional


ERRORS = {
    "softmax bad dim": (lambda M: _f(M).softmax(M.ones(2, 3), 2), IndexError),
    "softmax of ints": (lambda M: _f(M).softmax(M.ones(2, 3).long(), 1), NotImplementedError),
    "softmax to an int dtype": (lambda M: _f(M).softmax(M.ones(2, 3), 1, dtype=M.int64),
                                NotImplementedError),
    "log_softmax of ints": (lambda M: _f(M).log_softmax(M.ones(3).long(), 0),
                            NotImplementedError),
    "Softmax module bad dim": (lambda M: M.nn.Softmax(3)(M.ones(2, 3)), IndexError),
    "silu of ints": (lambda M: _f(M).silu(M.ones(3).long()), NotImplementedError),
    "SiLU inplace on a leaf": (lambda M: M.nn.SiLU(inplace=True)(M.ones(3, requires_grad=True)),
                               RuntimeError),
    "relu inplace on a leaf": (lambda M: _f(M).relu(M.ones(3, requires_grad=True),
                                                    inplace=True), RuntimeError),
    "relu inplace of bools": (lambda M: _f(M).relu(M.ones(3).bool(), inplace=True),
                              RuntimeError),
    "dropout inplace on a leaf": (lambda M: _f(M).dropout(M.ones(3, requires_grad=True),
                                                          inplace=True), RuntimeError),
    "Dropout module inplace on a leaf": (lambda M: M.nn.Dropout(inplace=True)(
        M.ones(3, requires_grad=True)), RuntimeError),
    "dropout of ints": (lambda M: _f(M).dropout(M.ones(3).long(), 0.5), RuntimeError),
    "dropout inplace of ints": (lambda M: _f(M).dropout(M.ones(3).long(), 0.5, inplace=True),
                                RuntimeError),
    "dropout p above 1": (lambda M: _f(M).dropout(M.ones(3), 1.5, inplace=True), ValueError),
    "Dropout p below 0": (lambda M: M.nn.Dropout(-0.1, inplace=True), ValueError),
    "Flatten of a 1-d input": (lambda M: M.nn.Flatten()(M.ones(3)), IndexError),
    "Flatten of a 0-d input": (lambda M: M.nn.Flatten()(M.ones(())), IndexError),
    "Flatten end before start": (lambda M: M.nn.Flatten(2, 1)(M.ones(2, 3, 4)), RuntimeError),
    "Flatten dim out of range": (lambda M: M.nn.Flatten(1, 5)(M.ones(2, 3, 4)), IndexError),
    "one_hot of int32": (lambda M: _f(M).one_hot(M.arange(3).int()), RuntimeError),
    "one_hot of floats": (lambda M: _f(M).one_hot(M.arange(3).float()), RuntimeError),
    "one_hot negative": (lambda M: _f(M).one_hot(M.tensor([0, -1, 2])), RuntimeError),
    "one_hot too few classes": (lambda M: _f(M).one_hot(M.arange(3), 2), RuntimeError),
    "one_hot zero classes": (lambda M: _f(M).one_hot(M.arange(3), 0), RuntimeError),
    "one_hot negative num_classes": (lambda M: _f(M).one_hot(M.arange(3), -2), RuntimeError),
    "one_hot empty without num_classes": (lambda M: _f(M).one_hot(M.zeros(0).long()),
                                          RuntimeError),
    "one_hot empty with zero classes": (lambda M: _f(M).one_hot(M.zeros(0).long(), 0),
                                        RuntimeError),
    "one_hot float num_classes": (lambda M: _f(M).one_hot(M.arange(3), 3.0), TypeError),
    "normalize bad dim": (lambda M: _f(M).normalize(M.ones(3)), IndexError),
    "normalize of ints": (lambda M: _f(M).normalize(M.ones(2, 3).long()), RuntimeError),
    "from_pretrained 1-d": (lambda M: M.nn.Embedding.from_pretrained(M.ones(3)),
                            AssertionError),
    "from_pretrained 3-d": (lambda M: M.nn.Embedding.from_pretrained(M.ones(3, 2, 2)),
                            AssertionError),
    "from_pretrained padding_idx": (lambda M: M.nn.Embedding.from_pretrained(
        M.ones(3, 2), padding_idx=3), AssertionError),
    "from_pretrained ints to train": (lambda M: M.nn.Embedding.from_pretrained(
        M.ones(3, 2).long(), freeze=False), RuntimeError),
}


@needs_torch
@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_arguments_raise_as_torch(case, device):
    program, kind = ERRORS[case]
    raises_as_torch(program, kind, device)


@pytest.mark.parametrize("shape, num_classes",
                         list(itertools.product([(4,), (2, 3)], [-1, 5])))
def test_one_hot_by_hand(shape, num_classes, device):
    ids = np.arange(int(np.prod(shape))).reshape(shape) % 4
    out = F.one_hot(mg.tensor(ids, device=device), num_classes).numpy()
    n = 4 if num_classes == -1 else num_classes
    np.testing.assert_array_equal(out, np.eye(n, dtype=np.int64)[ids])
