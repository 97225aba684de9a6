"""Manifold-constrained hyper-connections: Sinkhorn projection, gradients, and the reduction
to the ordinary residual."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd import gradcheck
from minigrad.nn.hyper import HyperConnection, collapse_streams, expand_streams, sinkhorn


@pytest.mark.parametrize("n", [1, 2, 4, 6])
@pytest.mark.parametrize("scale", [0.1, 1.0, 4.0])
def test_sinkhorn_is_doubly_stochastic(device, n, scale):
    logits = mg.randn(n, n, dtype=mg.float64, device=device) * scale
    h = sinkhorn(logits, iters=50).numpy()
    assert (h >= 0).all()
    np.testing.assert_allclose(h.sum(0), np.ones(n), atol=1e-12)   # the last step: columns
    np.testing.assert_allclose(h.sum(1), np.ones(n), atol=1e-6)    # rows, to convergence


def test_sinkhorn_of_large_logits_stays_finite(device):
    logits = mg.tensor([[500.0, -500.0], [-500.0, 500.0]], dtype=mg.float64, device=device)
    h = sinkhorn(logits).numpy()
    assert np.isfinite(h).all()
    np.testing.assert_allclose(h, np.eye(2), atol=1e-12)


def test_sinkhorn_gradcheck(device):
    logits = mg.randn(3, 3, dtype=mg.float64, device=device, requires_grad=True)
    assert gradcheck(lambda m: sinkhorn(m, iters=5), (logits,))


def test_default_h_res_is_close_to_identity(device):
    hc = HyperConnection(4).to(device)
    h = hc.h_res().numpy()
    assert (np.diag(h) > 0.9).all()
    np.testing.assert_allclose(h.sum(0), 1.0, atol=1e-6)
    np.testing.assert_allclose(h.sum(1), 1.0, atol=1e-6)


def test_one_stream_is_the_ordinary_residual(device):
    layer = nn.Linear(5, 5).to(device)
    hc = HyperConnection(1).to(device)
    x = mg.randn(2, 3, 5, device=device)
    out = collapse_streams(hc(expand_streams(x, 1), layer))
    expected = x + layer(x)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_identity_mixing_reads_and_writes_as_told(device):
    """With H_res = I (huge diagonal logits), streams evolve independently: stream k gets
    H_post[k] * F(sum_j H_pre[j] X_j) added."""
    hc = HyperConnection(3).to(device)
    with mg.no_grad():
        hc.res_logits.copy_(mg.eye(3, device=device) * 1000.0)
        hc.pre.copy_(mg.tensor([0.2, 0.3, 0.5], device=device))
        hc.post.copy_(mg.tensor([1.0, 2.0, 0.0], device=device))
    streams = mg.randn(2, 4, 3, 5, device=device)
    f = nn.Linear(5, 5).to(device)
    out = hc(streams, f).numpy()
    s = streams.numpy()
    read = 0.2 * s[:, :, 0] + 0.3 * s[:, :, 1] + 0.5 * s[:, :, 2]
    y = f(mg.tensor(read, device=device)).numpy()
    for k, w in enumerate([1.0, 2.0, 0.0]):
        np.testing.assert_allclose(out[:, :, k], s[:, :, k] + w * y, rtol=1e-5, atol=1e-5)


def test_hyper_connection_gradcheck(device):
    hc = HyperConnection(3, sinkhorn_iters=4).double().to(device)
    f = nn.Linear(4, 4).double().to(device)
    streams = mg.randn(2, 3, 4, dtype=mg.float64, device=device, requires_grad=True)
    params = [p.detach().requires_grad_() for p in (hc.pre, hc.post, hc.res_logits)]

    def fn(s, pre, post, res):  # the module itself, run with the checked tensors as weights
        hc._parameters.update(pre=pre, post=post, res_logits=res)
        return hc(s, f)

    assert gradcheck(fn, [streams] + params)


def _add_and_mhc(cls, norm_first, device, n_streams=4):
    """An ordinary layer and an mHC one with its weights (the mHC parameters at their start)."""
    kw = dict(dim_feedforward=16, dropout=0.0, norm_first=norm_first)
    add = cls(8, 2, **kw).double().to(device)
    mhc = cls(8, 2, residual="mhc", n_streams=n_streams, **kw).double().to(device)
    missing, unexpected = mhc.load_state_dict(add.state_dict(), strict=False)
    assert not unexpected and missing and all(k.startswith("hc") for k in missing)
    return add, mhc


@pytest.mark.parametrize("norm_first", [True, False])
@pytest.mark.parametrize("n_streams", [1, 4])
def test_mhc_layers_at_initialisation_are_the_ordinary_ones(device, norm_first, n_streams):
    """At its start H_pre averages identical streams, H_res (doubly stochastic) mixes them
    into themselves and H_post writes the sublayer's output to each: the ordinary residual,
    up to Sinkhorn's convergence."""
    x = mg.randn(2, 5, 8, dtype=mg.float64, device=device)
    m = mg.randn(2, 3, 8, dtype=mg.float64, device=device)
    add, mhc = _add_and_mhc(nn.TransformerEncoderLayer, norm_first, device, n_streams)
    np.testing.assert_allclose(mhc(x, is_causal=True).numpy(), add(x, is_causal=True).numpy(),
                               rtol=1e-6, atol=1e-6)
    add, mhc = _add_and_mhc(nn.TransformerDecoderLayer, norm_first, device, n_streams)
    np.testing.assert_allclose(mhc(x, m, tgt_is_causal=True).numpy(),
                               add(x, m, tgt_is_causal=True).numpy(), rtol=1e-6, atol=1e-6)


def test_mhc_stack_at_initialisation_is_the_ordinary_one(device):
    """A stack passes the streams from layer to layer, and still starts as pre-LN."""
    add, mhc = _add_and_mhc(nn.TransformerEncoderLayer, True, device)
    add_stack, mhc_stack = nn.TransformerEncoder(add, 3), nn.TransformerEncoder(mhc, 3)
    x = mg.randn(2, 5, 8, dtype=mg.float64, device=device)
    np.testing.assert_allclose(mhc_stack(x).numpy(), add_stack(x).numpy(),
                               rtol=1e-6, atol=1e-6)


def test_read_and_write_are_the_two_halves_of_forward(device):
    hc = HyperConnection(3).to(device)
    with mg.no_grad():
        hc.pre.copy_(mg.tensor([0.2, -0.3, 0.5], device=device))   # |.|: read with 0.3
        hc.res_logits.copy_(mg.randn(3, 3, device=device))
    streams = mg.randn(2, 4, 3, 5, device=device)
    f = nn.Linear(5, 5).to(device)
    read = hc.read(streams).numpy()
    s = streams.numpy()
    np.testing.assert_allclose(read, 0.2 * s[:, :, 0] + 0.3 * s[:, :, 1] + 0.5 * s[:, :, 2],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(hc(streams, f).numpy(),
                                  hc.write(streams, f(hc.read(streams))).numpy())
