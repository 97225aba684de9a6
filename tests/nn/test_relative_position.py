"""Relative positions as biases of the attention scores: ALiBi's slopes against the paper's
values and rule, T5's bucket function against a direct transcription of T5's code (and
torch's arithmetic), the biases inside MultiheadAttention (equal to the same bias given
as attn_mask, cached decoding equal to a full pass), gradients of T5's table, and the
Transformer's positional options."""
import math

import numpy as np
import pytest

import minigrad as mg
from minigrad.models import Transformer
from minigrad.nn import MultiheadAttention
from minigrad.nn.positional import (ALiBi, RelativePositionBias, alibi_slopes,
                                    relative_position_bucket)


def paper_slopes(n):
    """Press et al.'s get_slopes, transcribed from the paper's code."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        ratio = start
        return [start * ratio ** i for i in range(n)]
    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return (get_slopes_power_of_2(closest)
            + paper_slopes(2 * closest)[0::2][:n - closest])


def test_alibi_slopes_are_the_papers_values():
    np.testing.assert_allclose(alibi_slopes(8), [2.0 ** -k for k in range(1, 9)], rtol=1e-14)
    np.testing.assert_allclose(alibi_slopes(16), [2.0 ** (-k / 2) for k in range(1, 17)],
                               rtol=1e-14)
    np.testing.assert_allclose(alibi_slopes(4), [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 12, 24, 32, 40])
def test_alibi_slopes_follow_the_papers_rule(n):
    np.testing.assert_allclose(alibi_slopes(n), paper_slopes(n), rtol=1e-12)
    with pytest.raises(ValueError, match="num_heads must be > 0, got 0"):
        alibi_slopes(0)


@pytest.mark.parametrize("offset", [0, 3])
def test_alibi_bias_is_minus_slope_times_distance(offset, device):
    bias = ALiBi(4)(3, 7, offset=offset, like=mg.zeros(1, device=device)).numpy()
    assert bias.shape == (4, 3, 7)
    for h, m in enumerate(alibi_slopes(4)):
        for i in range(3):
            for j in range(7):
                assert bias[h, i, j] == pytest.approx(-m * abs(offset + i - j))


def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """T5's _relative_position_bucket for one int, transcribed in plain Python with
    float32 rounding where T5 computes in float32."""
    f32 = np.float32
    ret, n = 0, -relative_position
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0) * num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val = max_exact + int(np.log(f32(n) / f32(max_exact)) / f32(math.log(max_distance / max_exact))
                          * f32(num_buckets - max_exact))
    return ret + min(val, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (16, 64), (8, 20), (64, 256)])
def test_t5_buckets_follow_t5s_formula(bidirectional, num_buckets, max_distance):
    rel = np.arange(-400, 401)
    ours = relative_position_bucket(rel, bidirectional, num_buckets, max_distance)
    expected = [t5_bucket(int(r), bidirectional, num_buckets, max_distance) for r in rel]
    np.testing.assert_array_equal(ours, expected)
    assert ours.min() == 0 and ours.max() == num_buckets - 1


def test_t5_buckets_match_torch():
    torch = pytest.importorskip("torch")

    def hf(relative_position, bidirectional, num_buckets, max_distance):  # T5's code
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        large = max_exact + (torch.log(relative_position.float() / max_exact)
                             / math.log(max_distance / max_exact)
                             * (num_buckets - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        return relative_buckets + torch.where(is_small, relative_position, large)
    rel = np.arange(-1000, 1001)
    for bidirectional in (True, False):
        expected = hf(torch.tensor(rel), bidirectional, 32, 128).numpy()
        np.testing.assert_array_equal(relative_position_bucket(rel, bidirectional), expected)


def test_t5_bias_reads_its_table(device):
    bias_mod = RelativePositionBias(2, bidirectional=False, num_buckets=8, max_distance=20)
    bias_mod.to(device)
    bias = bias_mod(4, 6, offset=2).numpy()
    table = bias_mod.relative_attention_bias.weight.numpy()
    for i in range(4):
        for j in range(6):
            b = relative_position_bucket(j - (2 + i), False, 8, 20)
            np.testing.assert_array_equal(bias[:, i, j], table[b])


@pytest.mark.parametrize("make", [lambda: ALiBi(4), lambda: RelativePositionBias(4)],
                         ids=["alibi", "t5"])
def test_attention_adds_the_bias_to_the_scores(make, device):
    mha = MultiheadAttention(16, 4, position_bias=make()).to(device)
    plain = MultiheadAttention(16, 4).to(device)
    plain.load_state_dict({k: v for k, v in mha.state_dict().items()
                           if not k.startswith("position_bias")})
    x = mg.randn(2, 5, 16, device=device)
    pad = mg.tensor([[False] * 5, [False, False, False, True, True]], device=device)
    bias = mha.position_bias(5, 5, 0).detach()                             # (H, T, S)
    mask = bias.unsqueeze(0).expand(2, 4, 5, 5).reshape(8, 5, 5)
    ours, w1 = mha(x, x, x, key_padding_mask=pad, average_attn_weights=False)
    ref, w2 = plain(x, x, x, key_padding_mask=pad, attn_mask=mask, average_attn_weights=False)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w1.numpy(), w2.numpy(), rtol=1e-5, atol=1e-6)
    out, _ = mha(x, x, x, key_padding_mask=pad, need_weights=False)  # the tiled path
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_t5_table_gets_gradients(device):
    bias_mod = RelativePositionBias(2, num_buckets=8, max_distance=16, dtype=mg.float64)
    mha = MultiheadAttention(8, 2, position_bias=bias_mod, dtype=mg.float64).to(device)
    x = mg.randn(1, 6, 8, dtype=mg.float64, device=device)
    weight = bias_mod.relative_attention_bias.weight

    def f(w):
        with mg.no_grad():
            weight.copy_(w)
        return mha(x, x, x, need_weights=False)[0]
    mha(x, x, x, need_weights=False)[0].sum().backward()
    assert weight.grad is not None and np.abs(weight.grad.numpy()).sum() > 0
    # finite differences of one entry agree with the gradient
    w0 = weight.detach().clone()
    eps, (b, h) = 1e-6, (1, 0)
    up, down = w0.clone(), w0.clone()
    up.array[b, h] += eps
    down.array[b, h] -= eps
    numeric = (f(up).sum().item() - f(down).sum().item()) / (2 * eps)
    assert weight.grad.numpy()[b, h] == pytest.approx(numeric, rel=1e-5, abs=1e-8)


@pytest.mark.parametrize("positional", ["alibi", "t5"])
def test_cached_decoding_equals_a_full_pass(positional, device):
    model = Transformer(12, 12, d_model=16, nhead=4, num_encoder_layers=1, num_decoder_layers=2,
                        dim_feedforward=32, dropout=0.0, norm_first=True,
                        positional=positional).to(device)
    src = mg.tensor([[5, 6, 7, 8, 0], [4, 9, 3, 0, 0]], device=device)
    tgt = mg.tensor([[1, 5, 6, 7], [1, 4, 4, 8]], device=device)
    memory, mask = model.encode(src)
    full = model.decode(tgt, memory, mask).numpy()
    cache = mg.nn.DecoderCache(2)
    steps = [model.decode(tgt[:, t:t + 1], memory, mask, cache=cache).numpy() for t in range(4)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-4, atol=1e-5)


def test_transformer_positional_options():
    model = Transformer(10, 10, d_model=16, nhead=4, num_encoder_layers=1, num_decoder_layers=1,
                        dim_feedforward=32, positional="t5")
    keys = [k for k in model.state_dict() if "relative_attention_bias" in k]
    assert keys == ["encoder.layers.0.self_attn.position_bias.relative_attention_bias.weight",
                    "decoder.layers.0.self_attn.position_bias.relative_attention_bias.weight"]
    assert model.encoder.layers[0].self_attn.position_bias.bidirectional
    assert not model.decoder.layers[0].self_attn.position_bias.bidirectional
    assert model.decoder.layers[0].cross_attn.position_bias is None
    alibi = Transformer(10, 10, d_model=16, nhead=4, num_encoder_layers=1, num_decoder_layers=1,
                        dim_feedforward=32, positional="alibi", max_len=4)
    assert alibi.src_pos is None and not any("alibi" in k for k in alibi.state_dict())
    out = alibi(mg.tensor([[3] * 9]), mg.tensor([[1] * 7]))  # longer than max_len: no table
    assert out.shape == (1, 7, 10)
    with pytest.raises(ValueError, match="positional must be one of .*'alibi', 't5', got 'x'"):
        Transformer(10, 10, positional="x")
