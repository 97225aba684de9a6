"""models.Transformer: shapes, the key/value cache against the full recompute, greedy and beam
search against brute force, padding masks, tied weights, state_dict keys, gradients, and a
tiny model that learns to copy."""
import itertools
import time

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.autograd import gradcheck
from minigrad.models import Transformer

PAD, BOS, EOS = 0, 1, 2
SRC_VOCAB, TGT_VOCAB = 9, 8
POSITIONAL = ["sinusoidal", "learned", "rope"]


def tiny(device, dtype=mg.float64, tgt_vocab=TGT_VOCAB, **kw):
    """A small random model in eval mode (dropout 0 anyway) of the given dtype."""
    mg.manual_seed(0)
    args = dict(d_model=16, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                dim_feedforward=32, dropout=0.0, max_len=32)
    model = Transformer(SRC_VOCAB, tgt_vocab, **{**args, **kw}).to(device)
    return (model.double() if dtype == mg.float64 else model).eval()


def ids(rows, device):
    return mg.tensor(np.array(rows), dtype=mg.int64, device=device)


SRC = [[3, 4, 5, 6, 7], [8, 3, 4, PAD, PAD], [5, 5, 6, 7, PAD]]
TGT = [[BOS, 3, 4, 5, 6, 7, 3], [BOS, 6, 7, EOS, PAD, PAD, PAD], [BOS, 4, 4, 5, 3, PAD, PAD]]


def banned(logits):
    """Logits as generate sees them: pad and BOS are never produced."""
    out = np.array(logits.numpy(), dtype=np.float64)
    out[..., [PAD, BOS]] = -np.inf
    return out


@pytest.mark.parametrize("positional", POSITIONAL)
@pytest.mark.parametrize("norm_first, residual", [(False, "add"), (True, "add"), (True, "mhc")])
def test_shapes(positional, norm_first, residual, device):
    model = tiny(device, mg.float32, positional=positional, norm_first=norm_first,
                 residual=residual)
    src, tgt = ids(SRC, device), ids(TGT, device)
    memory, mask = model.encode(src)
    assert memory.shape == (3, 5, 16) and mask.shape == (3, 5) and mask.dtype == mg.bool
    assert model.decode(tgt, memory, mask).shape == (3, 7, TGT_VOCAB)
    logits = model(src, tgt)
    assert logits.shape == (3, 7, TGT_VOCAB) and logits.dtype == mg.float32
    assert (model.encoder.norm is not None) == norm_first


@pytest.mark.parametrize("dtype", [mg.float64, mg.float32])
@pytest.mark.parametrize("positional", POSITIONAL)
@pytest.mark.parametrize("norm_first, residual", [(False, "add"), (True, "add"), (False, "mhc")])
def test_kv_cache_gives_the_full_recompute(dtype, positional, norm_first, residual, device):
    """Decoding in chunks of 3, 1, 1 and 2 new tokens over a cache gives the logits of one
    full pass, padding included."""
    model = tiny(device, dtype, positional=positional, norm_first=norm_first,
                 residual=residual)
    src, tgt = ids(SRC, device), ids(TGT, device)
    memory, mask = model.encode(src)
    full = model.decode(tgt, memory, mask).numpy()                           # (B, T, V)
    cache, chunks, start = nn.DecoderCache(2), [], 0
    for size in (3, 1, 1, 2):
        chunks.append(model.decode(tgt[:, start:start + size], memory, mask, cache).numpy())
        start += size
    assert cache.position == 7 and cache.layers[0]["self_attn"].k.shape == (3, 2, 7, 8)
    assert cache.layers[1]["cross_attn"].k.shape == (3, 2, 5, 8)  # projected once
    np.testing.assert_allclose(np.concatenate(chunks, axis=1), full, atol=1e-5, rtol=0)


def test_cache_reorder_follows_the_rows(device):
    """After reorder(index) the cache continues the decoding of the rows index."""
    model = tiny(device, positional="rope")
    src, tgt = ids(SRC, device), ids(TGT, device)
    index = ids([2, 0, 0], device)
    memory, mask = model.encode(src)
    full = model.decode(tgt[index], memory[index], mask[index]).numpy()
    cache = nn.DecoderCache(2)
    model.decode(tgt[:, :4], memory, mask, cache)
    cache.reorder(index)
    step = model.decode(tgt[index][:, 4:], memory[index], mask[index], cache).numpy()
    np.testing.assert_allclose(step, full[:, 4:], atol=1e-10)


# a bias on EOS's logit that makes some rows of the random model stop early, not all
EOS_BIAS = {"sinusoidal": 1.2, "learned": 0.0, "rope": 0.0}


@pytest.mark.parametrize("positional", POSITIONAL)
def test_greedy_is_the_argmax_of_the_full_recompute(positional, device):
    model = tiny(device, positional=positional)
    with mg.no_grad():
        model.generator.bias[EOS] = EOS_BIAS[positional]
    src = ids(SRC, device)
    out = model.generate(src, max_new_tokens=8, bos_id=BOS, eos_id=EOS).numpy()
    assert out.dtype == np.int64 and out.shape[0] == 3 and out.shape[1] <= 8
    assert (out == EOS).any(1).any() and (out == PAD).any(), "the test needs a row that stops"
    tgt = np.concatenate([np.full((3, 1), BOS), out[:, :-1]], axis=1)
    with mg.no_grad():
        choice = banned(model(src, ids(tgt, device))).argmax(-1)             # (B, L)
    for row, pred in zip(out, choice):
        n = list(row).index(EOS) + 1 if EOS in row else len(row)
        assert (row[:n] == pred[:n]).all() and (row[n:] == PAD).all()


def test_generate_leaves_the_training_flag_and_grad_mode_alone(device):
    model = tiny(device).train()
    model.generate(ids(SRC, device), 3, BOS, EOS, beam_size=2)
    assert model.training and all(m.training for m in model.modules())
    assert mg.is_grad_enabled()


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 1.0])
def test_beam_of_one_is_greedy(length_penalty, device):
    model = tiny(device, positional="rope")
    src = ids(SRC, device)
    greedy = model.generate(src, 8, BOS, EOS).numpy()
    with mg.no_grad():
        memory, mask = model.encode(src)
        beam = model.beam_search(memory, mask, 8, BOS, EOS, 1, length_penalty)
    np.testing.assert_array_equal(beam, greedy)


def best_by_brute_force(model, src, length, length_penalty):
    """The highest-scoring output of every row of src, among every sequence of tokens 3..V-1
    closed by EOS within ``length`` tokens or left open at ``length``, scored by one full
    pass each (the model's summed log-probabilities / length ** length_penalty)."""
    symbols = list(range(EOS + 1, model.generator.out_features))
    outputs = [s + (EOS,) for n in range(length) for s in itertools.product(symbols, repeat=n)]
    outputs += list(itertools.product(symbols, repeat=length))
    padded = np.array([list(s) + [PAD] * (length - len(s)) for s in outputs])  # (N, L)
    tgt = np.concatenate([np.full((len(outputs), 1), BOS), padded[:, :-1]], axis=1)
    lengths = np.array([len(s) for s in outputs])
    best = []
    for row in src.numpy():
        with mg.no_grad():
            src_rows = mg.tensor(np.repeat(row[None], len(outputs), 0), device=src.device)
            logp = F.log_softmax(model(src_rows, mg.tensor(tgt, device=src.device)), -1)
        logp = np.take_along_axis(logp.numpy(), padded[:, :, None], axis=2)[:, :, 0]
        score = np.where(padded != PAD, logp, 0.0).sum(1) / lengths ** length_penalty
        best.append(padded[score.argmax()])
    return np.array(best), len(outputs)


@pytest.mark.parametrize("length_penalty", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("positional", ["sinusoidal", "rope"])
def test_a_beam_as_wide_as_the_outputs_is_exhaustive_search(length_penalty, positional, device):
    model = tiny(device, positional=positional, tgt_vocab=6)  # 3 symbols, length 3
    src = ids(SRC, device)
    expected, n_outputs = best_by_brute_force(model, src, 3, length_penalty)
    assert n_outputs == 40
    out = model.generate(src, 3, BOS, EOS, beam_size=n_outputs,
                         length_penalty=length_penalty).numpy()
    out = np.pad(out, ((0, 0), (0, 3 - out.shape[1])), constant_values=PAD)
    np.testing.assert_array_equal(out, expected)


def test_padding_changes_nothing_at_real_positions(device):
    """Padding added to the source, or to the target, or a different batch mate, leaves
    the logits of the real positions as they were (and so generate's output)."""
    model = tiny(device, positional="learned")
    src, tgt = [[3, 4, 5]], [[BOS, 6, 7]]
    alone = model(ids(src, device), ids(tgt, device)).numpy()
    padded = model(ids([[3, 4, 5, PAD, PAD], [6, 7, 8, 3, 4]], device),
                   ids([[BOS, 6, 7, PAD], [BOS, 3, 3, 4]], device)).numpy()
    np.testing.assert_allclose(padded[:1, :3], alone, atol=1e-12)
    out = model.generate(ids([[3, 4, 5]], device), 5, BOS, EOS, beam_size=2).numpy()
    out_padded = model.generate(ids([[3, 4, 5, PAD, PAD]], device), 5, BOS, EOS,
                                beam_size=2).numpy()
    np.testing.assert_array_equal(out, out_padded)


def test_tied_embeddings_share_the_parameter(device):
    model = tiny(device, tie_embeddings=True)
    assert model.generator.weight is model.tgt_embed.weight
    names = [name for name, _ in model.named_parameters()]
    assert "tgt_embed.weight" in names and "generator.weight" not in names
    other = tiny(device, tie_embeddings=True)
    with mg.no_grad():
        other.tgt_embed.weight.fill_(0.5)
    other.load_state_dict(model.state_dict())  # both keys, as PyTorch's state_dict has them
    assert other.generator.weight is other.tgt_embed.weight
    np.testing.assert_array_equal(other.generator.weight.numpy(), model.tgt_embed.weight.numpy())


def test_state_dict_keys_are_stable_dotted_paths(device):
    keys = list(tiny(device, positional="learned", num_encoder_layers=1,
                     num_decoder_layers=1, norm_first=True).state_dict())
    for key in ["src_embed.weight", "tgt_embed.weight", "src_pos.weight", "tgt_pos.weight",
                "encoder.layers.0.self_attn.q_proj.weight", "encoder.layers.0.ffn.linear1.bias",
                "encoder.norm.weight", "decoder.layers.0.cross_attn.k_proj.weight",
                "decoder.layers.0.norm3.bias", "decoder.norm.bias", "generator.weight",
                "generator.bias"]:
        assert key in keys
    assert not any("pe" in k or "cached" in k for k in keys)  # tables are not saved
    assert keys == list(tiny(device, positional="learned", num_encoder_layers=1,
                             num_decoder_layers=1, norm_first=True).state_dict())


@pytest.mark.parametrize("positional", POSITIONAL)
def test_gradcheck_of_the_loss(positional, device):
    model = tiny(device, d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                 dim_feedforward=6, positional=positional, tie_embeddings=True)
    src, tgt = ids([[3, 4, PAD]], device), ids([[BOS, 5, 6]], device)
    target = ids([[5, 6, EOS]], device)
    params = (model.decoder.layers[0].self_attn.q_proj.weight, model.tgt_embed.weight,
              model.encoder.layers[0].ffn.linear1.bias)
    saved = [p.array.copy() for p in params]

    def loss(*values):  # gradcheck passes perturbed copies: run the model with their values
        for p, value in zip(params, values):
            p.array = value.array
        return F.cross_entropy(model(src, tgt).reshape(-1, TGT_VOCAB), target.reshape(-1))
    assert gradcheck(loss, params, atol=1e-6)
    for p, value in zip(params, saved):
        p.array = value


def test_a_tiny_model_learns_to_copy(device):
    """6 sequences of 2 to 5 symbols, copied to 100% greedy exact match with Adam."""
    mg.manual_seed(0)
    rng = np.random.default_rng(0)
    seqs = [list(rng.integers(3, 8, size=n)) for n in (2, 3, 3, 4, 5, 5)]
    src = ids([s + [PAD] * (5 - len(s)) for s in seqs], device)
    tgt_in = ids([[BOS] + s + [PAD] * (5 - len(s)) for s in seqs], device)
    tgt_out = ids([s + [EOS] + [PAD] * (5 - len(s)) for s in seqs], device)
    model = Transformer(SRC_VOCAB, TGT_VOCAB, d_model=32, nhead=2, num_encoder_layers=1,
                        num_decoder_layers=1, dim_feedforward=64, dropout=0.0).to(device)
    opt = mg.optim.Adam(model.parameters(), lr=3e-3)
    started = time.perf_counter()
    for _ in range(150):
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, TGT_VOCAB), tgt_out.reshape(-1),
                               ignore_index=PAD)
        opt.zero_grad()
        loss.backward()
        opt.step()
    out = model.generate(src, 6, BOS, EOS).numpy()
    assert out.shape == (6, 6) and (out == tgt_out.numpy()).all(), f"loss {loss.item():.4f}"
    assert time.perf_counter() - started < 20
