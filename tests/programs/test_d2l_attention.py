"""Dive into Deep Learning (github.com/d2l-ai/d2l-en): the attention and transformer
chapters' code of its ``d2l/torch.py`` library (masked_softmax, DotProductAttention,
AdditiveAttention and MultiHeadAttention over nn.LazyLinear, PositionalEncoding, the
TransformerEncoder of AddNorm and PositionWiseFFN blocks, MaskedSoftmaxCELoss), run unchanged
on minigrad from the same weights and inputs as on PyTorch: the outputs, attention weights,
gradients and a few training steps' losses agree."""
import numpy as np
import pytest

import minigrad as mg
from tests.programs.loader import copy_weights, load
from tests.torch_ref import needs_torch, torch

pytestmark = needs_torch
rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 4))
KEYS = rng.standard_normal((2, 5, 6))
VALUES = rng.standard_normal((2, 5, 8))
TOKENS = rng.integers(0, 9, (2, 6))


def both():
    return load("d2l_attention.py", torch), load("d2l_attention.py", mg)


def pair(make, *example, dtype="float32"):
    """The same d2l module in both libraries: PyTorch's made and called once on ``example``
    (its LazyLinear layers take their sizes), minigrad's the same, then given PyTorch's
    weights."""
    nets = []
    for lib, d2l in zip((torch, mg), both()):
        net = make(d2l)
        net = net.double() if dtype == "float64" else net
        net.eval()
        with lib.no_grad():
            net(*[lib.tensor(a) if isinstance(a, np.ndarray) else a for a in example])
        nets.append(net)
    copy_weights(nets[0], nets[1], mg)
    return nets


def run(net, lib, *arrays, valid=None):
    """The outputs and the gradients of the float inputs, as d2l calls the module."""
    inputs = [lib.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    args = inputs + ([] if valid is None else [lib.tensor(valid)])
    out = net(*args)
    (out * lib.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)),
                      dtype=out.dtype)).sum().backward()
    return out, [t.grad for t in inputs if t.requires_grad]


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=atol)


@pytest.mark.parametrize("valid", [None, np.array([2, 3]), np.array([[1, 2, 3], [3, 2, 1]])],
                         ids=["none", "per-row", "per-query"])
def test_masked_softmax_matches(valid):
    results = []
    for lib, d2l in zip((torch, mg), both()):
        x = lib.tensor(rng.standard_normal((2, 3, 4)) if False else X, requires_grad=True)
        out = d2l.masked_softmax(x * 1, None if valid is None else lib.tensor(valid))
        (out * lib.tensor(np.arange(24.0).reshape(2, 3, 4))).sum().backward()
        results.append((out, x.grad))
    assert_same(results[1][0], results[0][0], 1e-12, 1e-12)
    assert_same(results[1][1], results[0][1], 1e-12, 1e-12)


@pytest.mark.parametrize("kind", ["dot", "additive"])
def test_scoring_attention_matches(kind):
    queries = rng.standard_normal((2, 1, 6 if kind == "dot" else 20))
    valid = np.array([2, 4])

    def make(d2l):
        return d2l.DotProductAttention(0.0) if kind == "dot" else \
            d2l.AdditiveAttention(num_hiddens=8, dropout=0.0)
    ref, net = pair(make, queries, KEYS, VALUES, valid, dtype="float64")
    (t_out, t_grads), (m_out, m_grads) = (run(ref, torch, queries, KEYS, VALUES, valid=valid),
                                          run(net, mg, queries, KEYS, VALUES, valid=valid))
    assert_same(m_out, t_out, 1e-12, 1e-12)
    assert_same(net.attention_weights, ref.attention_weights, 1e-12, 1e-12)
    for g, w in zip(m_grads, t_grads):
        assert_same(g, w, 1e-10, 1e-12)


def test_multi_head_attention_matches():
    x = rng.standard_normal((2, 4, 12))
    valid = np.array([3, 2])
    ref, net = pair(lambda d2l: d2l.MultiHeadAttention(12, 3, 0.0), x, x, x, valid,
                    dtype="float64")
    assert net.num_heads == 3 and net.hparams == ref.hparams  # (save_hyperparameters)
    (t_out, t_grads), (m_out, m_grads) = (run(ref, torch, x, x, x, valid=valid),
                                          run(net, mg, x, x, x, valid=valid))
    assert_same(m_out, t_out, 1e-12, 1e-12)
    for g, w in zip(m_grads, t_grads):
        assert_same(g, w, 1e-10, 1e-12)


def test_positional_encoding_matches():
    t_d2l, m_d2l = both()
    ref, net = t_d2l.PositionalEncoding(16, 0.0, 60), m_d2l.PositionalEncoding(16, 0.0, 60)
    assert_same(net.P, ref.P, 1e-6, 1e-6)
    x = rng.standard_normal((2, 7, 16)).astype(np.float32)
    assert_same(net(mg.tensor(x)), ref(torch.tensor(x)), 1e-6, 1e-6)


def encoder(d2l):
    return d2l.TransformerEncoder(vocab_size=9, num_hiddens=8, ffn_num_hiddens=16, num_heads=2,
                                  num_blks=2, dropout=0.0)


def test_transformer_encoder_matches():
    valid = np.array([4, 6])
    ref, net = pair(encoder, TOKENS, torch.tensor(valid))
    t_out, m_out = ref(torch.tensor(TOKENS), torch.tensor(valid)), \
        net(mg.tensor(TOKENS), mg.tensor(valid))
    assert_same(m_out, t_out)
    for got, want in zip(net.attention_weights, ref.attention_weights):
        assert_same(got, want)


def test_sequence_mask_and_masked_loss_match():
    t_d2l, m_d2l = both()
    pred = rng.standard_normal((3, 4, 10))
    label = rng.integers(0, 10, (3, 4))
    valid = np.array([4, 2, 0])
    losses = []
    for lib, d2l in ((torch, t_d2l), (mg, m_d2l)):
        p = lib.tensor(pred, requires_grad=True)
        loss = d2l.MaskedSoftmaxCELoss()(p, lib.tensor(label), lib.tensor(valid))
        loss.sum().backward()
        losses.append((loss, p.grad))
        masked = d2l.sequence_mask(lib.tensor(np.ones((3, 4))), lib.tensor(valid), value=-1)
        assert masked.tolist() == [[1] * 4, [1, 1, -1, -1], [-1] * 4]
    assert_same(losses[1][0], losses[0][0], 1e-12, 1e-12)
    assert_same(losses[1][1], losses[0][1], 1e-12, 1e-12)


def test_training_an_encoder_classifier_matches():
    """A few Adam steps of the encoder with a LazyLinear head, under MaskedSoftmaxCELoss:
    predict each token back."""
    valid = np.array([5, 3])
    nets, losses = [], {}
    for lib, d2l in zip((torch, mg), both()):
        net = lib.nn.Sequential()
        net.add_module("enc", encoder(d2l))
        nets.append(net)
    for lib, d2l, net in zip((torch, mg), both(), nets):
        head = lib.nn.LazyLinear(9)
        with lib.no_grad():
            head(net.enc(lib.tensor(TOKENS), lib.tensor(valid)))
        net.add_module("head", head)
    copy_weights(nets[0], nets[1], mg)
    for lib, d2l, net in zip((torch, mg), both(), nets):
        optimizer = lib.optim.Adam(net.parameters(), lr=0.01)
        loss_fn = d2l.MaskedSoftmaxCELoss()
        seen = losses[lib.__name__] = []
        x, v = lib.tensor(TOKENS), lib.tensor(valid)
        for _ in range(4):
            optimizer.zero_grad()
            loss = loss_fn(net.head(net.enc(x, v)), x, v).sum()
            loss.backward()
            optimizer.step()
            seen.append(loss.item())
    np.testing.assert_allclose(losses["minigrad"], losses["torch"], rtol=1e-5)
    assert losses["torch"][-1] < losses["torch"][0]
