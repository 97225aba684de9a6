"""models.Captioner: patches and 2-D positions, shapes, the key/value cache against the full
recompute (logits, and greedy captions with and without it), cross-attention per generated
token, and the state_dict round trip."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.models import Captioner
from minigrad.models.captioner import patchify, sinusoidal_2d

V, PAD, BOS, EOS = 12, 0, 1, 2


def tiny(device, dtype=mg.float64, **kw):
    mg.manual_seed(0)
    args = dict(image_size=16, patch_size=4, d_model=16, nhead=2, num_encoder_layers=2,
                num_decoder_layers=2, dim_feedforward=32, max_len=12)
    model = Captioner(V, **{**args, **kw}).to(device)
    return (model.double() if dtype == mg.float64 else model).eval()


def images(device, B=3, size=16, dtype=mg.float64):
    data = np.random.default_rng(0).random((B, 3, size, size))
    return mg.tensor(data, dtype=dtype, device=device)


def ids(rows, device):
    return mg.tensor(np.array(rows), dtype=mg.int64, device=device)


TGT = [[BOS, 3, 4, 5, 6, EOS], [BOS, 7, 8, EOS, PAD, PAD], [BOS, 9, 10, 11, 3, 4]]


def test_patchify_is_a_strided_convolution(device):
    """Patch (i, j) holds pixels [c, 4i:4i+4, 4j:4j+4], flattened in (c, row, column) order,
    patches row by row."""
    x = images(device, B=2)
    patches = patchify(x, 4).numpy()
    assert patches.shape == (2, 16, 48)
    data = x.numpy()
    for i in range(4):
        for j in range(4):
            expected = data[:, :, 4 * i:4 * i + 4, 4 * j:4 * j + 4].reshape(2, 48)
            np.testing.assert_array_equal(patches[:, 4 * i + j], expected)


def test_sinusoidal_2d(device):
    """Rows in the first half of the channels, columns in the second: every patch distinct."""
    table = sinusoidal_2d(4, 16)
    row_table = nn.SinusoidalPositionalEncoding(8, 4, device=device).pe.numpy()
    assert table.shape == (16, 16)
    np.testing.assert_allclose(table[4 * 2 + 3], np.concatenate([row_table[2], row_table[3]]),
                               atol=1e-6)
    assert len({tuple(np.round(r, 6)) for r in table}) == 16


def test_shapes_and_names(device):
    model = tiny(device, mg.float32)
    x = images(device, dtype=mg.float32)
    memory = model.encode(x)
    assert memory.shape == (3, 16, 16) and memory.dtype == mg.float32
    logits = model(x, ids(TGT, device))
    assert logits.shape == (3, 6, V) and logits.dtype == mg.float32
    assert logits.device == x.device
    keys = model.state_dict().keys()
    for key in ("patch_embed.weight", "tok_embed.weight", "generator.bias",
                "encoder.layers.1.self_attn.q_proj.weight", "decoder.norm.weight",
                "decoder.layers.0.cross_attn.k_proj.weight"):
        assert key in keys
    assert not any("pos" in k for k in keys)  # fixed tables are not saved
    assert model.grid == 4


def test_image_size_must_divide():
    with pytest.raises(ValueError, match="divisible"):
        Captioner(V, image_size=30, patch_size=4)


def test_kv_cache_gives_the_full_recompute(device):
    """Decoding in chunks of 2, 1, 3 tokens over a cache gives the logits of one pass."""
    model = tiny(device)
    x, tgt = images(device), ids(TGT, device)
    memory = model.encode(x)
    full = model.decode(tgt, memory).numpy()
    cache, chunks, start = nn.DecoderCache(2), [], 0
    for size in (2, 1, 3):
        chunks.append(model.decode(tgt[:, start:start + size], memory, cache=cache).numpy())
        start += size
    np.testing.assert_allclose(np.concatenate(chunks, axis=1), full, atol=1e-10)


def greedy_without_cache(model, x, max_new_tokens):
    """Greedy decoding by re-running the decoder over the whole prefix at every step."""
    B = x.shape[0]
    tokens, done = np.full((B, 1), BOS), np.zeros(B, bool)
    with mg.no_grad():
        for _ in range(max_new_tokens):
            logits = model(x, ids(tokens, x.device)).numpy()[:, -1]          # (B, V)
            logits[:, [PAD, BOS]] = -np.inf
            nxt = np.where(done, PAD, logits.argmax(-1))
            tokens = np.concatenate([tokens, nxt[:, None]], axis=1)
            done |= nxt == EOS
            if done.all():
                break
    return tokens[:, 1:]


@pytest.mark.parametrize("eos_bias", [0.0, -30.0], ids=["some-eos", "no-eos"])
def test_greedy_with_and_without_cache(eos_bias, device):
    model = tiny(device)
    with mg.no_grad():
        model.generator.bias[EOS] = eos_bias
    x = images(device, B=5)
    out = model.generate(x, 8)
    assert out.dtype == mg.int64 and out.device == x.device
    np.testing.assert_array_equal(out.numpy(), greedy_without_cache(model, x, 8))
    if eos_bias < 0:
        assert out.shape == (5, 8)
    assert not np.isin(out.numpy(), [BOS]).any()
    assert model.training is False


def test_generate_restores_training_mode(device):
    model = tiny(device).train()
    model.generate(images(device), 3)
    assert model.training


@pytest.mark.parametrize("layer", [-1, 0, None])
def test_caption_with_attention(layer, device):
    """One distribution over the patches per generated token, from the layer asked for."""
    model = tiny(device)
    with mg.no_grad():
        model.generator.bias[EOS] = -30.0  # every row runs to max_new_tokens
    x = images(device)
    tokens, weights = model.caption_with_attention(x, 5, layer=layer)
    np.testing.assert_array_equal(tokens.numpy(), model.generate(x, 5).numpy())
    assert isinstance(weights, np.ndarray) and weights.shape == (3, 5, 16)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-10)
    assert (weights >= 0).all()


def test_cross_attention_is_what_decoding_saw(device):
    """The weights of the query that predicted token t equal the cross-attention computed by
    hand from the last decoder layer's inputs."""
    model = tiny(device, num_decoder_layers=1)
    x = images(device, B=2)
    tokens, weights = model.caption_with_attention(x, 4)
    seen = {}

    def hook(module, args, output):
        seen["args"] = args
    handle = model.decoder.layers[0].cross_attn.register_forward_hook(hook)
    tgt = np.concatenate([np.full((2, 1), BOS), tokens.numpy()[:, :-1]], axis=1)
    with mg.no_grad():
        model(x, ids(tgt, device))
    handle.remove()
    query, key, value = seen["args"][:3]
    with mg.no_grad():
        _, expected = model.decoder.layers[0].cross_attn(query, key, value)  # (B, T, S)
    np.testing.assert_allclose(weights, expected.numpy(), atol=1e-10)


def test_state_dict_round_trip(tmp_path, device):
    model = tiny(device)
    x, tgt = images(device), ids(TGT, device)
    path = tmp_path / "captioner.safetensors"
    nn.save(model.state_dict(), str(path))
    mg.manual_seed(1)
    other = Captioner(V, image_size=16, d_model=16, nhead=2, dim_feedforward=32,
                      max_len=12).to(device).double().eval()
    assert np.abs(other(x, tgt).numpy() - model(x, tgt).numpy()).max() > 1e-3
    result = other.load_state_dict(nn.load(str(path), device=device))
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(other(x, tgt).numpy(), model(x, tgt).numpy())
    np.testing.assert_array_equal(other.generate(x, 6).numpy(), model.generate(x, 6).numpy())
