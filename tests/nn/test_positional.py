"""nn.SinusoidalPositionalEncoding, nn.LearnedPositionalEmbedding and nn.RotaryEmbedding:
table values computed by hand, caching, offsets and length errors, gradcheck in float64, and
the RoPE properties (scores depend only on the relative position, norms are preserved)
against an independent complex-number reference."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd.gradcheck import gradcheck
from minigrad.nn.positional import (LearnedPositionalEmbedding, RotaryEmbedding,
                                    SinusoidalPositionalEncoding)

F64 = mg.float64


def rand(*shape, device, requires_grad=True):
    return mg.tensor(np.random.standard_normal(shape), dtype=F64, device=device,
                     requires_grad=requires_grad)


# --- sinusoidal ---------------------------------------------------------------------------------

@pytest.mark.parametrize("pos, col, expected", [
    (0, 0, 0.0),                                    # sin(0)
    (0, 1, 1.0),                                    # cos(0)
    (1, 0, math.sin(1.0)),
    (1, 1, math.cos(1.0)),
    (3, 2, math.sin(3 / 10000 ** (2 / 6))),         # i = 1: 10000^(2i/d)
    (3, 3, math.cos(3 / 10000 ** (2 / 6))),
    (7, 4, math.sin(7 / 10000 ** (4 / 6))),         # i = 2
    (7, 5, math.cos(7 / 10000 ** (4 / 6))),
    (49, 5, math.cos(49 / 10000 ** (4 / 6))),
])
def test_sinusoidal_values_by_hand(pos, col, expected, device):
    pe = SinusoidalPositionalEncoding(6, max_len=50, device=device)
    assert pe.pe.shape == (50, 6)
    assert pe.pe.numpy()[pos, col] == pytest.approx(expected, abs=1e-6)


def test_sinusoidal_odd_d_model(device):
    pe = SinusoidalPositionalEncoding(5, max_len=10, device=device).pe.numpy()
    assert pe.shape == (10, 5)
    assert pe[4, 4] == pytest.approx(math.sin(4 / 10000 ** (4 / 5)), abs=1e-6)
    assert pe[4, 3] == pytest.approx(math.cos(4 / 10000 ** (2 / 5)), abs=1e-6)


@pytest.mark.parametrize("offset", [0, 3])
def test_sinusoidal_forward_adds_the_table(offset, device):
    m = SinusoidalPositionalEncoding(8, max_len=20, device=device)
    x = rand(2, 5, 8, device=device)
    out = m(x, offset=offset)
    assert out.dtype == F64
    table = m.pe.numpy()[offset:offset + 5]
    np.testing.assert_allclose(out.numpy(), x.numpy() + table, rtol=1e-12)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((2, 5, 8)))


def test_sinusoidal_gradcheck(device):
    m = SinusoidalPositionalEncoding(4, max_len=10, device=device)
    assert gradcheck(lambda x: m(x, offset=2), (rand(2, 3, 4, device=device),))


def test_sinusoidal_table_is_built_once(monkeypatch, device):
    m = SinusoidalPositionalEncoding(8, max_len=30, device=device)
    table = m.pe
    before = table.numpy().copy()

    def no_recompute(*args, **kwargs):
        raise AssertionError("the table is recomputed in forward")
    monkeypatch.setattr(np, "sin", no_recompute)
    monkeypatch.setattr(np, "cos", no_recompute)
    for T, offset in ((4, 0), (7, 2), (1, 29)):
        m(rand(1, T, 8, device=device), offset=offset)
        assert m.pe is table
    np.testing.assert_array_equal(m.pe.numpy(), before)
    assert "pe" in dict(m.named_buffers()) and "pe" not in m.state_dict()


@pytest.mark.parametrize("make", [lambda d: SinusoidalPositionalEncoding(4, max_len=6, device=d),
                                  lambda d: LearnedPositionalEmbedding(6, 4, device=d)],
                         ids=["sinusoidal", "learned"])
def test_too_long_names_max_len(make, device):
    m = make(device)
    m(mg.zeros(1, 6, 4, device=device))
    m(mg.zeros(1, 2, 4, device=device), offset=4)
    with pytest.raises(ValueError, match="max_len=6"):
        m(mg.zeros(1, 7, 4, device=device))
    with pytest.raises(ValueError, match="max_len=6"):
        m(mg.zeros(1, 2, 4, device=device), offset=5)


# --- learned ------------------------------------------------------------------------------------

@pytest.mark.parametrize("offset", [0, 2])
def test_learned_adds_rows_of_its_weight(offset, device):
    m = LearnedPositionalEmbedding(10, 4, device=device, dtype=F64)
    assert m.weight.shape == (10, 4) and list(m.state_dict()) == ["weight"]
    x = rand(3, 5, 4, device=device)
    out = m(x, offset=offset)
    np.testing.assert_allclose(out.numpy(), x.numpy() + m.weight.numpy()[offset:offset + 5],
                               rtol=1e-12)
    out.sum().backward()
    expected = np.zeros((10, 4))
    expected[offset:offset + 5] = 3.0              # summed over the batch of 3
    np.testing.assert_array_equal(m.weight.grad.numpy(), expected)


def test_learned_gradcheck(device):
    m = LearnedPositionalEmbedding(6, 4, device=device, dtype=F64)
    x = rand(2, 3, 4, device=device)
    assert gradcheck(lambda x, w: x + w[1:4], (x, m.weight))  # the same op as forward
    assert gradcheck(lambda x: m(x, offset=1), (x,))


# --- rotary -------------------------------------------------------------------------------------

def rope_reference(x, offset=0, base=10000):
    """NeoX RoPE as complex rotations: z_i = x_i + j x_{i + D/2} times e^{j pos theta_i}."""
    D = x.shape[-1]
    theta = base ** (-np.arange(0, D, 2) / D)
    pos = np.arange(offset, offset + x.shape[-2])[:, None]
    z = (x[..., :D // 2] + 1j * x[..., D // 2:]) * np.exp(1j * pos * theta)
    return np.concatenate([z.real, z.imag], axis=-1)


@pytest.mark.parametrize("shape, offset, base", [
    ((5, 8), 0, 10000),
    ((2, 3, 6, 4), 0, 10000),
    ((2, 3, 6, 4), 7, 10000),
    ((1, 2, 3, 16), 100, 500),
])
def test_rotary_matches_complex_reference(shape, offset, base, device):
    rope = RotaryEmbedding(shape[-1], base=base)
    x = rand(*shape, device=device)
    out = rope(x, offset=offset)
    assert out.shape == x.shape and out.dtype == F64
    np.testing.assert_allclose(out.numpy(), rope_reference(x.numpy(), offset, base),
                               rtol=1e-12, atol=1e-12)


def test_rotary_score_depends_only_on_relative_position(device):
    D = 8
    rope = RotaryEmbedding(D)
    q = rand(1, D, device=device, requires_grad=False)
    k = rand(1, D, device=device, requires_grad=False)

    def score(m, n):
        return (rope(q, offset=m) * rope(k, offset=n)).sum().item()
    for shift in (0, 1, 3, -2, 17):
        values = [score(m, m - shift) for m in (20, 25, 40, 113)]
        np.testing.assert_allclose(values, values[0], rtol=1e-10, atol=1e-12)
    assert abs(score(20, 20) - score(20, 19)) > 1e-6      # but it does depend on m - n
    np.testing.assert_allclose(score(5, 5), (q * k).sum().item(), rtol=1e-12)


def test_rotary_preserves_norms_and_is_the_identity_at_zero(device):
    rope = RotaryEmbedding(6)
    x = rand(2, 9, 6, device=device)
    out = rope(x).numpy()
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x.numpy(), axis=-1),
                               rtol=1e-12)
    np.testing.assert_allclose(out[:, 0], x.numpy()[:, 0], rtol=1e-15)


@pytest.mark.parametrize("offset", [0, 4])
def test_rotary_gradcheck(offset, device):
    rope = RotaryEmbedding(4, base=100)
    assert gradcheck(lambda x: rope(x, offset=offset), (rand(2, 3, 4, device=device),))


def test_rotary_tables_are_cached_and_grown_on_demand(device):
    rope = RotaryEmbedding(4)
    rope(rand(1, 5, 4, device=device))
    table = rope.cos_cached
    assert table.shape[0] >= 5
    rope(rand(2, 3, 4, device=device), offset=1)             # fits: the same table
    assert rope.cos_cached is table
    x = rand(1, 3, 4, device=device)
    out = rope(x, offset=20)                                  # grows
    assert rope.cos_cached.shape[0] >= 23 and rope.cos_cached is not table
    np.testing.assert_allclose(out.numpy(), rope_reference(x.numpy(), 20), rtol=1e-12,
                               atol=1e-12)
    for T in (24, 25, 26):          # decoding one position at a time: not one rebuild a step
        rope(rand(1, 1, 4, device=device), offset=T - 1)
    assert rope.cos_cached.shape[0] >= 26
    grown = rope.cos_cached
    rope(rand(1, 1, 4, device=device), offset=26)
    assert rope.cos_cached is grown
    assert rope.state_dict() == {} and not list(rope.parameters())


def test_rotary_follows_the_input_dtype(device):
    rope = RotaryEmbedding(4)
    x32 = mg.randn(1, 3, 4, device=device)
    assert rope(x32).dtype == mg.float32
    x64 = rand(1, 3, 4, device=device)
    assert rope(x64).dtype == F64
    np.testing.assert_allclose(rope(x64).numpy(), rope_reference(x64.numpy()), rtol=1e-13,
                               atol=1e-13)


def test_rotary_errors(device):
    with pytest.raises(ValueError, match="head_dim must be even, got 5"):
        RotaryEmbedding(5)
    with pytest.raises(mg.ShapeError, match="head_dim=4"):
        RotaryEmbedding(4)(mg.zeros(2, 3, 6, device=device))
