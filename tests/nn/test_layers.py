"""Layers (Linear, Embedding, LayerNorm, ReLU, GELU, Dropout, FeedForward) and nn.init.

Each layer is compared with its torch counterpart, with torch's weights copied in through
``load_state_dict`` (the keys are torch's), forward and every gradient, in float32 and
float64; each is gradchecked in float64, parameters included. Then the layer-specific
rules (padding_idx, the LayerNorm formula, dropout's mask and scaling), the default
initialisations and the nn.init functions, whose bounds and stds are worked out by hand.
"""
import math
from contextlib import contextmanager

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from tests.torch_ref import needs_torch, torch

DTYPES = pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
# float32: a few ulp of the sums in a matmul or a mean, and libm's erf/tanh in gelu
TOL = {np.dtype(np.float32): dict(rtol=2e-5, atol=2e-6),
       np.dtype(np.float64): dict(rtol=1e-10, atol=1e-12)}


def floats(*shape):
    return lambda rng: rng.standard_normal(shape) * 1.5


def tokens(num, *shape):
    # every id appears at least once when the shape allows it, and some repeat
    return lambda rng: rng.permutation(np.resize(np.arange(num), shape).ravel()).reshape(shape)


def torch_ffn(d_model, dim_feedforward, activation):
    """torch's equivalent of nn.FeedForward, with the same submodule names."""

    class TorchFeedForward(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear1 = torch.nn.Linear(d_model, dim_feedforward)
            self.activation = torch.nn.ReLU() if activation == "relu" else torch.nn.GELU()
            self.dropout = torch.nn.Dropout(0.0)
            self.linear2 = torch.nn.Linear(dim_feedforward, d_model)

        def forward(self, x):
            return self.linear2(self.dropout(self.activation(self.linear1(x))))

    return TorchFeedForward()


def torch_embedding_with_padding(padding_idx):
    """torch's Embedding whose padding row was overwritten: the value is still looked up,
    only its gradient is zero."""
    emb = torch.nn.Embedding(10, 4, padding_idx=padding_idx)
    with torch.no_grad():
        emb.weight[padding_idx] = 1.5
    return emb


# (id, our layer, torch's layer, input) -- the layers are built lazily (torch may be absent)
LAYERS = [
    ("linear", lambda: nn.Linear(5, 3), lambda: torch.nn.Linear(5, 3), floats(2, 4, 5)),
    ("linear_no_bias", lambda: nn.Linear(5, 3, bias=False),
     lambda: torch.nn.Linear(5, 3, bias=False), floats(4, 5)),
    ("linear_1d_input", lambda: nn.Linear(4, 2), lambda: torch.nn.Linear(4, 2), floats(4)),
    ("embedding", lambda: nn.Embedding(10, 4), lambda: torch.nn.Embedding(10, 4),
     tokens(10, 3, 5)),
    ("embedding_padding", lambda: nn.Embedding(10, 4, padding_idx=2),
     lambda: torch_embedding_with_padding(2), tokens(10, 3, 5)),
    ("embedding_negative_padding", lambda: nn.Embedding(10, 4, padding_idx=-1),
     lambda: torch_embedding_with_padding(-1), tokens(10, 2, 7)),
    ("layer_norm", lambda: nn.LayerNorm(6), lambda: torch.nn.LayerNorm(6), floats(2, 3, 6)),
    ("layer_norm_tuple", lambda: nn.LayerNorm((3, 6)), lambda: torch.nn.LayerNorm((3, 6)),
     floats(2, 3, 6)),
    ("layer_norm_no_affine", lambda: nn.LayerNorm(6, elementwise_affine=False),
     lambda: torch.nn.LayerNorm(6, elementwise_affine=False), floats(3, 6)),
    ("layer_norm_no_bias", lambda: nn.LayerNorm(6, bias=False),
     lambda: torch.nn.LayerNorm(6, bias=False), floats(3, 6)),
    ("layer_norm_eps", lambda: nn.LayerNorm(5, eps=0.3), lambda: torch.nn.LayerNorm(5, eps=0.3),
     floats(4, 5)),
    ("relu", lambda: nn.ReLU(), lambda: torch.nn.ReLU(), floats(3, 7)),
    ("gelu", lambda: nn.GELU(), lambda: torch.nn.GELU(), floats(3, 7)),
    ("gelu_tanh", lambda: nn.GELU("tanh"), lambda: torch.nn.GELU("tanh"), floats(3, 7)),
    ("dropout_eval", lambda: nn.Dropout(0.5).eval(), lambda: torch.nn.Dropout(0.5).eval(),
     floats(3, 7)),
    ("ffn_relu", lambda: nn.FeedForward(4, 8), lambda: torch_ffn(4, 8, "relu"), floats(2, 3, 4)),
    ("ffn_gelu", lambda: nn.FeedForward(4, 8, activation="gelu"),
     lambda: torch_ffn(4, 8, "gelu"), floats(2, 3, 4)),
]


def params(table):
    return [pytest.param(*row[1:], id=row[0]) for row in table]


def torch_dtype(dtype):
    return {np.dtype(np.float32): torch.float32, np.dtype(np.float64): torch.float64}[
        np.dtype(dtype)]


@needs_torch
@DTYPES
@pytest.mark.parametrize("make_ours, make_theirs, make_input", params(LAYERS))
def test_layer_matches_torch(make_ours, make_theirs, make_input, dtype, device):
    rng = np.random.default_rng(0)
    theirs = make_theirs().to(torch_dtype(dtype))
    ours = make_ours().to(device).to(dtype)
    sd = theirs.state_dict()
    assert list(ours.state_dict()) == list(sd)  # torch's keys, in torch's order
    assert ours.load_state_dict({k: v.numpy() for k, v in sd.items()}) == ([], [])

    x_np = make_input(rng)
    if x_np.dtype.kind == "f":
        x_np = x_np.astype(dtype)
    x = mg.tensor(x_np, device=device, requires_grad=x_np.dtype.kind == "f")
    tx = torch.tensor(x_np, requires_grad=x_np.dtype.kind == "f")
    out, ref = ours(x), theirs(tx)
    assert out.shape == tuple(ref.shape) and out.dtype == dtype
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), **TOL[np.dtype(dtype)])

    w = rng.standard_normal(out.shape).astype(dtype)
    (out * mg.tensor(w, device=device)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    if x.requires_grad:
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **TOL[np.dtype(dtype)])
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        assert p.grad is not None, name
        assert p.grad.dtype == dtype
        np.testing.assert_allclose(p.grad.numpy(), theirs_params[name].grad.numpy(),
                                   err_msg=name, **TOL[np.dtype(dtype)])


@contextmanager
def swapped(module, names, tensors):
    """Run ``module`` with the named parameters replaced by ``tensors`` (a functional call):
    each is taken off the module and set back as it was afterwards."""
    saved = []
    for name, t in zip(names, tensors):
        prefix, _, leaf = name.rpartition(".")
        owner = module.get_submodule(prefix)
        saved.append((owner, leaf, getattr(owner, leaf)))
        delattr(owner, leaf)
        setattr(owner, leaf, t)
    try:
        yield
    finally:
        for owner, leaf, original in saved:
            setattr(owner, leaf, original)  # a Parameter again: registered, the plain one gone


def gradcheck_layer(layer, x, seed=None):
    """gradcheck of ``layer(x)`` with respect to x (when floating) and every parameter."""
    names = [n for n, _ in layer.named_parameters()]
    inputs = [x] + [p for _, p in layer.named_parameters()]

    def fn(x, *ps):
        if seed is not None:
            mg.manual_seed(seed)  # the same dropout mask on every call
        with swapped(layer, names, ps):
            return layer(x)

    return mg.autograd.gradcheck(fn, inputs)


# padding_idx cuts its row from the graph on purpose, so finite differences disagree there
# (the rule is checked by hand below)
GRADCHECK_LAYERS = [row for row in LAYERS if "padding" not in row[0]]


@pytest.mark.parametrize("make_ours, make_theirs, make_input", params(GRADCHECK_LAYERS))
def test_layer_gradcheck(make_ours, make_theirs, make_input, device):
    rng = np.random.default_rng(1)
    layer = make_ours().to(device).to(np.float64)
    x_np = make_input(rng)
    x = mg.tensor(x_np, device=device, requires_grad=x_np.dtype.kind == "f")
    assert gradcheck_layer(layer, x)


def test_dropout_train_gradcheck(device):
    layer = nn.Dropout(0.4)
    x = mg.randn(3, 5, dtype=mg.float64, device=device, requires_grad=True)
    assert gradcheck_layer(layer, x, seed=3)


def test_gradcheck_restores_the_layer(device):
    layer = nn.Linear(3, 2).to(device).to(np.float64)
    before = list(layer.parameters())
    gradcheck_layer(layer, mg.randn(2, 3, dtype=mg.float64, device=device))
    assert {id(p) for p in layer.parameters()} == {id(p) for p in before}
    assert all(isinstance(p, nn.Parameter) for p in layer.parameters())


# --- Linear ----------------------------------------------------------------------------------

def test_linear_is_x_w_transposed_plus_b(device):
    lin = nn.Linear(3, 2).to(device)
    assert lin.weight.shape == (2, 3) and lin.bias.shape == (2,)
    w = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0]], np.float32)
    lin.load_state_dict({"weight": w, "bias": np.array([0.5, -2.0], np.float32)})
    x = mg.tensor([[1.0, 1.0, 1.0], [2.0, 0.0, -1.0]], device=device)
    np.testing.assert_allclose(lin(x).numpy(), [[6.5, -2.5], [-0.5, -4.0]])
    assert list(nn.Linear(3, 2, bias=False, device=device).state_dict()) == ["weight"]


# --- Embedding -------------------------------------------------------------------------------

@pytest.mark.parametrize("padding_idx, row", [(0, 0), (3, 3), (-1, 5), (-6, 0)])
def test_embedding_padding_row_starts_at_zero_and_gets_no_gradient(padding_idx, row, device):
    emb = nn.Embedding(6, 3, padding_idx=padding_idx).to(device)
    assert emb.padding_idx == row  # negative indices count from the end, as torch
    weight = emb.weight.numpy()
    np.testing.assert_array_equal(weight[row], np.zeros(3))
    assert np.all(np.delete(weight, row, axis=0) != 0)
    ids = np.array([[row, 1, row], [2, 2, 4]])
    out = emb(mg.tensor(ids, device=device))
    np.testing.assert_array_equal(out.numpy(), weight[ids])
    out.sum().backward()
    counts = np.bincount(ids.ravel(), minlength=6).astype(np.float32)
    counts[row] = 0.0  # d(sum)/d(row i) = how often i was looked up; padding gets nothing
    np.testing.assert_array_equal(emb.weight.grad.numpy(), np.repeat(counts[:, None], 3, 1))


@needs_torch
def test_embedding_negative_padding_idx_matches_torch(device):
    assert nn.Embedding(7, 2, padding_idx=-2, device=device).padding_idx == \
        torch.nn.Embedding(7, 2, padding_idx=-2).padding_idx


PADDED_IDS = [[0, 4, 4, 2], [2, 0, 1, 0], [4, 4, 4, 3]]


@needs_torch
@pytest.mark.parametrize("padding_idx", [None, 0, 4, -1, 3])
def test_embedding_backward_twice_and_forward_mode_match_torch(padding_idx, device):
    """With and without padding: the gradient (the padding row gets none), its gradient
    (create_graph), the node's name, and the tangent, which counts the padding row too
    (padding_idx only keeps the row from the gradient, in PyTorch as here)."""
    rng = np.random.default_rng(0)
    w0, up0, dw0 = (rng.standard_normal(s) for s in ((5, 3), (3, 4, 3), (5, 3)))
    w = mg.tensor(w0, device=device, requires_grad=True)
    tw = torch.tensor(w0, requires_grad=True)
    ids, tids = mg.tensor(PADDED_IDS, device=device), torch.tensor(PADDED_IDS)
    out = F.embedding(ids, w, padding_idx=padding_idx)
    ref = torch.nn.functional.embedding(tids, tw, padding_idx=padding_idx)
    assert out.grad_fn.name() == ref.grad_fn.name() == "EmbeddingBackward0"
    up, tup = mg.tensor(up0, device=device), torch.tensor(up0)
    (g,) = mg.autograd.grad((out * out * up).sum(), w, create_graph=True)
    (tg,) = torch.autograd.grad((ref * ref * tup).sum(), tw, create_graph=True)
    np.testing.assert_allclose(g.numpy(), tg.detach().numpy(), rtol=1e-12)
    assert g.grad_fn.name() == tg.grad_fn.name()
    (g * g).sum().backward()
    (tg * tg).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12)

    def f(weight):
        return F.embedding(ids, weight, padding_idx=padding_idx)
    _, tangent = mg.func.jvp(f, (mg.tensor(w0, device=device),),
                             (mg.tensor(dw0, device=device),))
    _, ttangent = torch.func.jvp(
        lambda weight: torch.nn.functional.embedding(tids, weight, padding_idx=padding_idx),
        (torch.tensor(w0),), (torch.tensor(dw0),))
    np.testing.assert_array_equal(tangent.numpy(), ttangent.numpy())


def test_embedding_rejects_float_indices(device):
    emb = nn.Embedding(4, 2).to(device)
    with pytest.raises(TypeError):
        emb(mg.tensor([0.0, 1.0], device=device))


# --- LayerNorm -------------------------------------------------------------------------------

@DTYPES
def test_layer_norm_output_has_mean_0_and_variance_1(dtype, device):
    x = mg.tensor(np.random.default_rng(2).standard_normal((4, 5, 16)) * 3 + 2, dtype=dtype,
                  device=device)
    out = nn.LayerNorm(16).to(device).to(dtype)(x).numpy().astype(np.float64)
    np.testing.assert_allclose(out.mean(-1), 0.0, atol=1e-6)
    # the biased variance of x is ~9, so eps shrinks the result by ~eps / 9
    np.testing.assert_allclose(out.var(-1), 1.0, atol=2e-5)


def test_layer_norm_affine_is_applied_after_normalising(device):
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((3, 4)), rng.standard_normal(4), rng.standard_normal(4)
    ln = nn.LayerNorm(4).to(device).to(np.float64)
    ln.load_state_dict({"weight": w, "bias": b})
    normalised = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ln(mg.tensor(x, device=device)).numpy(), normalised * w + b,
                               rtol=1e-12, atol=1e-12)


def test_layer_norm_eps_is_inside_the_square_root(device):
    # x = (a, -a): mean 0, biased variance a^2, so y = a / sqrt(a^2 + eps) = 0.3015...
    # (with eps outside the root it would be a / (a + eps) = 0.990...)
    a, eps = 1e-3, 1e-5
    x = mg.tensor([[a, -a]], dtype=mg.float64, device=device)
    out = nn.LayerNorm(2, eps=eps).to(device).to(np.float64)(x)
    expected = a / math.sqrt(a * a + eps)
    np.testing.assert_allclose(out.numpy(), [[expected, -expected]], rtol=1e-12)


def test_layer_norm_of_a_constant_row_is_zero_with_finite_gradient(device):
    x = mg.full((2, 5), 3.0, device=device, requires_grad=True)
    out = nn.LayerNorm(5).to(device)(x)
    np.testing.assert_array_equal(out.numpy(), np.zeros((2, 5)))
    (out * mg.arange(5, device=device)).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("shape, expected", [(6, (6,)), ((6,), (6,)), ([3, 6], (3, 6))])
def test_layer_norm_normalized_shape_int_or_tuple(shape, expected, device):
    ln = nn.LayerNorm(shape).to(device)
    assert ln.normalized_shape == expected
    assert ln.weight.shape == expected and ln.bias.shape == expected
    x = np.random.default_rng(4).standard_normal((2, 3, 6))
    dims = tuple(range(3 - len(expected), 3))
    ref = (x - x.mean(dims, keepdims=True)) / np.sqrt(x.var(dims, keepdims=True) + 1e-5)
    out = ln.to(np.float64)(mg.tensor(x, device=device))
    np.testing.assert_allclose(out.numpy(), ref, rtol=1e-12, atol=1e-12)


def test_layer_norm_without_affine_has_no_parameters(device):
    ln = nn.LayerNorm(4, elementwise_affine=False).to(device)
    assert ln.weight is None and ln.bias is None
    assert list(ln.parameters()) == [] and list(ln.state_dict()) == []
    x = mg.randn(3, 4, device=device)
    np.testing.assert_allclose(ln(x).numpy(), F.layer_norm(x, (4,)).numpy())


def test_layer_norm_rejects_a_shape_that_does_not_match(device):
    with pytest.raises(mg.ShapeError):
        nn.LayerNorm(5).to(device)(mg.randn(2, 4, device=device))


# --- activations -----------------------------------------------------------------------------

def test_relu_and_gelu_values_by_hand(device):
    x = mg.tensor([-2.0, 0.0, 1.0], dtype=mg.float64, device=device)
    np.testing.assert_array_equal(nn.ReLU()(x).numpy(), [0.0, 0.0, 1.0])
    phi = [0.5 * (1 + math.erf(v / math.sqrt(2))) for v in (-2.0, 0.0, 1.0)]
    np.testing.assert_allclose(nn.GELU()(x).numpy(), [-2.0 * phi[0], 0.0, phi[2]], rtol=1e-12)
    tanh = [0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
            for v in (-2.0, 0.0, 1.0)]
    np.testing.assert_allclose(nn.GELU("tanh")(x).numpy(), tanh, rtol=1e-12)


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError):
        nn.GELU("erf")
    with pytest.raises(ValueError):
        nn.Dropout(1.5)
    with pytest.raises(ValueError):
        nn.Dropout(-0.1)
    with pytest.raises(ValueError):
        nn.FeedForward(4, 8, activation="tanh")


# --- Dropout ---------------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_dropout_zeros_a_fraction_p_and_scales_the_rest(p, device):
    n = 200_000
    x = mg.ones(n, device=device, requires_grad=True)
    out = nn.Dropout(p)(x)
    values = out.numpy()
    zeros = values == 0
    # the fraction of zeros is binomial: its std is sqrt(p (1-p) / n) < 0.0012
    assert abs(zeros.mean() - p) < 0.01
    np.testing.assert_allclose(values[~zeros], 1.0 / (1.0 - p), rtol=1e-6)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), values)  # d out / d x = mask / (1 - p)


def test_dropout_is_the_identity_in_eval_mode_and_for_p_0(device):
    x = mg.randn(4, 5, device=device)
    layer = nn.Dropout(0.5)
    assert layer.eval()(x).numpy().tolist() == x.numpy().tolist()
    assert nn.Dropout(0.0)(x).numpy().tolist() == x.numpy().tolist()
    assert F.dropout(x, 0.5, training=False).numpy().tolist() == x.numpy().tolist()
    assert layer.train()(x).numpy().tolist() != x.numpy().tolist()


def test_dropout_p_1_gives_zeros_and_zero_gradient(device):
    x = mg.randn(4, 5, device=device, requires_grad=True)
    out = nn.Dropout(1.0)(x)
    np.testing.assert_array_equal(out.numpy(), np.zeros((4, 5)))
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((4, 5)))


def test_dropout_is_reproducible_with_manual_seed(device):
    x = mg.ones(1000, device=device)
    layer = nn.Dropout(0.5)
    mg.manual_seed(123)
    a = layer(x).numpy()
    b = layer(x).numpy()
    mg.manual_seed(123)
    c = layer(x).numpy()
    np.testing.assert_array_equal(a, c)
    assert not np.array_equal(a, b)  # the generator moves on between calls


def test_dropout_masks_are_independent_across_elements(device):
    # in a small tensor, all-kept (or all-dropped) must stay rare: 64 draws of 6 elements
    layer = nn.Dropout(0.5)
    x = mg.ones(6, device=device)
    all_same = sum(len(set(layer(x).numpy().tolist())) == 1 for _ in range(64))
    assert all_same <= 8  # expected 64 * 2 / 64 = 2


def test_feed_forward_dropout_follows_train_and_eval(device):
    ffn = nn.FeedForward(8, 32, dropout=0.5).to(device)
    x = mg.randn(4, 8, device=device)
    ffn.eval()
    np.testing.assert_array_equal(ffn(x).numpy(), ffn(x).numpy())
    expected = ffn.linear2(ffn.linear1(x).relu()).numpy()
    np.testing.assert_allclose(ffn(x).numpy(), expected, rtol=1e-6)
    ffn.train()
    assert not np.allclose(ffn(x).numpy(), expected)


def test_feed_forward_structure(device):
    ffn = nn.FeedForward(4, 16).to(device)
    assert [n for n, _ in ffn.named_parameters()] == [
        "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]
    assert ffn.linear1.weight.shape == (16, 4) and ffn.linear2.weight.shape == (4, 16)


# --- default initialisation ------------------------------------------------------------------

def test_linear_default_init_is_uniform_within_one_over_sqrt_in(device):
    lin = nn.Linear(256, 128, device=device)
    bound = 1 / math.sqrt(256)
    for p in (lin.weight, lin.bias):
        v = p.numpy()
        assert np.abs(v).max() <= bound
    w = lin.weight.numpy()
    assert np.abs(w).max() > 0.99 * bound  # fills the interval
    assert abs(w.mean()) < 0.01 * bound * 10
    np.testing.assert_allclose(w.std(), bound / math.sqrt(3), rtol=0.02)  # U(-b, b): b/sqrt3
    assert lin.weight.dtype == np.float32
    assert nn.Linear(3, 2, device=device, dtype=mg.float64).weight.dtype == np.float64


def test_embedding_default_init_is_standard_normal(device):
    w = nn.Embedding(1000, 64, device=device).weight.numpy()
    assert abs(w.mean()) < 0.02  # the std of the mean is 1/sqrt(64000) = 0.004
    np.testing.assert_allclose(w.std(), 1.0, rtol=0.02)
    assert np.abs(w).max() > 3.5  # a normal, not a bounded distribution


def test_layer_norm_default_init_is_ones_and_zeros(device):
    ln = nn.LayerNorm((2, 3), device=device)
    np.testing.assert_array_equal(ln.weight.numpy(), np.ones((2, 3)))
    np.testing.assert_array_equal(ln.bias.numpy(), np.zeros((2, 3)))
    assert ln.eps == 1e-5


def test_initialisation_follows_manual_seed(device):
    mg.manual_seed(7)
    a = nn.Linear(4, 4, device=device).weight.numpy()
    mg.manual_seed(7)
    b = nn.Linear(4, 4, device=device).weight.numpy()
    np.testing.assert_array_equal(a, b)


# --- nn.init ---------------------------------------------------------------------------------

# (id, init call, shape, expected bound of a uniform or std of a normal, worked out by hand)
SQRT5_GAIN = math.sqrt(2 / (1 + 5))  # leaky_relu gain with a = sqrt(5)
INITS = [
    ("xavier_uniform", lambda t: nn.init.xavier_uniform_(t), (64, 32),
     "uniform", math.sqrt(6 / (64 + 32))),
    ("xavier_uniform_gain", lambda t: nn.init.xavier_uniform_(t, gain=2.0), (64, 32),
     "uniform", 2 * math.sqrt(6 / 96)),
    ("xavier_uniform_conv", lambda t: nn.init.xavier_uniform_(t), (16, 8, 3, 3),
     "uniform", math.sqrt(6 / (72 + 144))),
    ("xavier_normal", lambda t: nn.init.xavier_normal_(t), (200, 100),
     "normal", math.sqrt(2 / 300)),
    ("xavier_normal_gain", lambda t: nn.init.xavier_normal_(t, gain=0.5), (200, 100),
     "normal", 0.5 * math.sqrt(2 / 300)),
    ("kaiming_uniform", lambda t: nn.init.kaiming_uniform_(t), (128, 144),
     "uniform", math.sqrt(6 / 144)),
    ("kaiming_uniform_fan_out", lambda t: nn.init.kaiming_uniform_(t, mode="fan_out"),
     (128, 144), "uniform", math.sqrt(6 / 128)),
    ("kaiming_uniform_conv", lambda t: nn.init.kaiming_uniform_(t), (64, 16, 3, 3),
     "uniform", math.sqrt(6 / 144)),
    ("kaiming_uniform_sqrt5", lambda t: nn.init.kaiming_uniform_(t, a=math.sqrt(5)),
     (128, 144), "uniform", SQRT5_GAIN * math.sqrt(3 / 144)),
    ("kaiming_uniform_relu", lambda t: nn.init.kaiming_uniform_(t, nonlinearity="relu"),
     (128, 144), "uniform", math.sqrt(2) * math.sqrt(3 / 144)),
    ("kaiming_uniform_tanh", lambda t: nn.init.kaiming_uniform_(t, nonlinearity="tanh"),
     (128, 144), "uniform", 5 / 3 * math.sqrt(3 / 144)),
    ("kaiming_normal", lambda t: nn.init.kaiming_normal_(t), (200, 150),
     "normal", math.sqrt(2 / 150)),
    ("kaiming_normal_fan_out", lambda t: nn.init.kaiming_normal_(t, mode="fan_out"),
     (200, 150), "normal", math.sqrt(2 / 200)),
    ("kaiming_normal_leaky", lambda t: nn.init.kaiming_normal_(t, a=0.2), (64, 8, 5, 5),
     "normal", math.sqrt(2 / (1 + 0.04)) / math.sqrt(200)),
    ("uniform", lambda t: nn.init.uniform_(t, -0.3, 0.3), (100, 100), "uniform", 0.3),
    ("normal", lambda t: nn.init.normal_(t, std=0.02), (100, 100), "normal", 0.02),
]


@pytest.mark.parametrize("init, shape, kind, expected", params(INITS))
def test_init_bounds_and_std(init, shape, kind, expected, device):
    t = nn.Parameter(mg.zeros(*shape, device=device))
    assert init(t) is t  # in place, and it returns the tensor
    assert t.requires_grad and t.grad_fn is None and t.dtype == np.float32
    v = t.numpy().astype(np.float64)
    assert abs(v.mean()) < 0.05 * expected
    if kind == "uniform":
        assert np.abs(v).max() <= expected * (1 + 1e-6)
        assert np.abs(v).max() > 0.99 * expected
        np.testing.assert_allclose(v.std(), expected / math.sqrt(3), rtol=0.03)
    else:
        np.testing.assert_allclose(v.std(), expected, rtol=0.03)


def test_constant_zeros_ones(device):
    t = mg.empty(2, 3, device=device)
    assert nn.init.constant_(t, 0.25) is t
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 0.25))
    np.testing.assert_array_equal(nn.init.zeros_(t).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(nn.init.ones_(t).numpy(), np.ones((2, 3)))


def test_fan_needs_two_dims(device):
    with pytest.raises(ValueError):
        nn.init.xavier_uniform_(mg.zeros(5, device=device))
    with pytest.raises(ValueError):
        nn.init.kaiming_uniform_(mg.zeros(5, 5, device=device), mode="fan_avg")


GAINS = [("linear", None, 1.0), ("conv1d", None, 1.0), ("conv2d", None, 1.0),
         ("conv3d", None, 1.0), ("sigmoid", None, 1.0),
         ("tanh", None, 5 / 3), ("relu", None, math.sqrt(2)),
         ("leaky_relu", None, math.sqrt(2 / (1 + 0.01 ** 2))),
         ("leaky_relu", 0.2, math.sqrt(2 / 1.04)), ("leaky_relu", 0, math.sqrt(2)),
         ("selu", None, 0.75)]


@pytest.mark.parametrize("nonlinearity, param, expected", GAINS)
def test_calculate_gain(nonlinearity, param, expected):
    assert nn.init.calculate_gain(nonlinearity, param) == pytest.approx(expected, rel=1e-15)


@needs_torch
@pytest.mark.parametrize("nonlinearity, param, expected", GAINS)
def test_calculate_gain_matches_torch(nonlinearity, param, expected):
    assert nn.init.calculate_gain(nonlinearity, param) == \
        torch.nn.init.calculate_gain(nonlinearity, param)


def test_calculate_gain_rejects_unknown_names():
    with pytest.raises(ValueError):
        nn.init.calculate_gain("softplus")


# --- LazyLinear ---------------------------------------------------------------------------------

@needs_torch
def test_lazy_linear_takes_its_size_from_the_first_input_as_torch(device):
    torch.manual_seed(0)  # (its weights are drawn at the first call)
    ours, theirs = nn.LazyLinear(4), torch.nn.LazyLinear(4)
    assert repr(ours) == repr(theirs) and list(ours.parameters()) == []
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    theirs(torch.tensor(x))
    ours(mg.tensor(x, device=device))
    assert type(ours) is nn.Linear and repr(ours) == repr(theirs)
    assert ours.weight.shape == (4, 3) and ours.bias.shape == (4,)
    assert ours.weight.device == mg.tensor(x, device=device).device
    ours.load_state_dict({k: mg.tensor(v.detach().numpy(), device=device)
                          for k, v in theirs.state_dict().items()})
    np.testing.assert_allclose(ours(mg.tensor(x, device=device)).detach().numpy(),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-6,
                               atol=1e-7)  # (an output near 0: a sum's rounding, absolute)


def test_lazy_linear_draws_as_linear_in_the_inputs_dtype(device):
    mg.manual_seed(0)
    eager = nn.Linear(3, 2)
    mg.manual_seed(0)
    lazy = nn.LazyLinear(2)
    lazy(mg.ones(1, 3))
    assert lazy.weight.tolist() == eager.weight.tolist()
    assert lazy.bias.tolist() == eager.bias.tolist()
    wide = nn.LazyLinear(2, bias=False)
    out = wide(mg.ones(5, 3, dtype=mg.float64, device=device))
    assert wide.weight.dtype == mg.float64 and wide.bias is None and out.shape == (5, 2)
    with pytest.raises(RuntimeError, match="at least one dim"):
        nn.LazyLinear(2)(mg.tensor(1.0))
