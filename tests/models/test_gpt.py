"""models.GPT: shapes, causality, the key/value cache against the full recompute, generation
with and without the cache, sampling (seeded, temperature, top-k), tied weights, and a tiny
model that learns a pattern which needs attention."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.models import gpt
from minigrad.models.gpt import GPT

V = 11
POSITIONAL = ["learned", "rope"]


def tiny(device, dtype=mg.float64, **kw):
    mg.manual_seed(0)
    args = dict(d_model=16, nhead=2, num_layers=2, dim_feedforward=32, max_len=24)
    model = GPT(V, **{**args, **kw}).to(device)
    return (model.double() if dtype == mg.float64 else model).eval()


def ids(rows, device):
    return mg.tensor(np.array(rows), dtype=mg.int64, device=device)


IDX = [[3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 1, 8, 2, 8, 1, 8]]


@pytest.mark.parametrize("positional", POSITIONAL)
@pytest.mark.parametrize("norm_first", [True, False])
def test_shapes_and_structure(positional, norm_first, device):
    model = tiny(device, mg.float32, positional=positional, norm_first=norm_first)
    logits = model(ids(IDX, device))
    assert logits.shape == (2, 8, V) and logits.dtype == mg.float32
    assert logits.device == ids(IDX, device).device
    assert model.lm_head.weight is model.tok_emb.weight                      # tied
    names = dict(model.named_parameters())
    assert "blocks.1.self_attn.q_proj.weight" in names and "blocks.0.ffn.linear1.bias" in names
    assert ("pos_emb.weight" in names) == (positional == "learned")
    assert ("norm.weight" in names) == norm_first
    untied = tiny(device, positional=positional, tie_embeddings=False)
    assert untied.lm_head.weight is not untied.tok_emb.weight


def test_bad_positional():
    with pytest.raises(ValueError, match="positional"):
        GPT(V, positional="sinusoidal")


@pytest.mark.parametrize("positional", POSITIONAL)
def test_block_is_a_causal_encoder_layer(positional, device):
    """Without a cache a Block computes what nn.TransformerEncoderLayer does with
    is_causal=True, from the same weights."""
    model = tiny(device, positional=positional)
    block = model.blocks[0]
    layer = nn.TransformerEncoderLayer(16, 2, 32, 0.0, activation="gelu", norm_first=True,
                                       rotary=block.self_attn.rotary).to(device).double()
    layer.load_state_dict(block.state_dict())
    x = mg.randn(2, 5, 16, dtype=mg.float64, device=device)
    np.testing.assert_allclose(block(x).numpy(), layer(x, is_causal=True).numpy(), atol=1e-12)


@pytest.mark.parametrize("positional", POSITIONAL)
@pytest.mark.parametrize("norm_first", [True, False])
def test_causal(positional, norm_first, device):
    """Changing the token at position t changes no logits before t, and changes those at t."""
    model = tiny(device, positional=positional, norm_first=norm_first)
    x = np.array(IDX)
    base = model(ids(x, device)).numpy()
    for t in (0, 3, 7):
        changed = x.copy()
        changed[:, t] = (changed[:, t] + 1) % V
        out = model(ids(changed, device)).numpy()
        np.testing.assert_array_equal(out[:, :t], base[:, :t])
        assert np.abs(out[:, t] - base[:, t]).max() > 1e-6


@pytest.mark.parametrize("dtype", [mg.float64, mg.float32])
@pytest.mark.parametrize("positional", POSITIONAL)
@pytest.mark.parametrize("norm_first", [True, False])
def test_kv_cache_gives_the_full_recompute(dtype, positional, norm_first, device):
    """Running the sequence in chunks of 3, 1, 1 and 3 tokens over a cache gives the logits
    of one full pass."""
    model = tiny(device, dtype, positional=positional, norm_first=norm_first)
    x = ids(IDX, device)
    full = model(x).numpy()                                                  # (B, T, V)
    cache, chunks, start = model.new_cache(), [], 0
    for size in (3, 1, 1, 3):
        chunks.append(model(x[:, start:start + size], cache).numpy())
        start += size
    assert cache[0].position == 8 and cache[1].k.shape == (2, 2, 8, 8)
    np.testing.assert_allclose(np.concatenate(chunks, axis=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("positional", POSITIONAL)
def test_generate_with_and_without_cache(positional, device):
    """Greedy (top_k=1) and seeded sampling give the same tokens with and without the cache,
    also once the context (max_len=24) is full and the window slides."""
    model = tiny(device, positional=positional)
    prompt = ids(IDX, device)[:, :5]
    greedy = model.generate(prompt, 30, top_k=1)
    assert greedy.shape == (2, 35) and greedy.dtype == mg.int64
    np.testing.assert_array_equal(greedy.numpy()[:, :5], prompt.numpy())
    np.testing.assert_array_equal(greedy.numpy(),
                                  model.generate(prompt, 30, top_k=1, use_cache=False).numpy())
    np.testing.assert_array_equal(greedy.numpy(),
                                  model.generate(prompt, 30, temperature=0).numpy())
    # the last token is the argmax after the window of the 24 tokens before it
    logits = model(greedy[:, -25:-1]).numpy()
    np.testing.assert_array_equal(logits[:, -1].argmax(-1), greedy.numpy()[:, -1])
    sampled = []
    for use_cache in (True, False):
        mg.manual_seed(7)
        sampled.append(model.generate(prompt, 30, temperature=1.5, top_k=5,
                                      use_cache=use_cache).numpy())
    np.testing.assert_array_equal(sampled[0], sampled[1])
    mg.manual_seed(8)
    assert not np.array_equal(sampled[0], model.generate(prompt, 30, temperature=1.5).numpy())


def test_generate_restores_the_training_flag(device):
    model = tiny(device).train()
    model.generate(ids(IDX, device)[:, :2], 3)
    assert model.training and all(m.training for m in model.modules())


def test_sampling_distribution(device):
    """sample_next draws from softmax(logits / temperature) over the top_k logits only."""
    logits = mg.tensor(np.log([[0.1, 0.2, 0.3, 0.4]]).repeat(20000, axis=0), device=device)
    mg.manual_seed(0)
    freq = np.bincount(gpt.sample_next(logits), minlength=4) / 20000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.01)
    freq = np.bincount(gpt.sample_next(logits, top_k=2), minlength=4) / 20000
    np.testing.assert_allclose(freq, [0, 0, 3 / 7, 4 / 7], atol=0.01)
    freq = np.bincount(gpt.sample_next(logits, temperature=0.5), minlength=4) / 20000
    np.testing.assert_allclose(freq, np.array([1, 4, 9, 16]) / 30, atol=0.01)
    np.testing.assert_array_equal(gpt.sample_next(logits[:3], top_k=1), [3, 3, 3])


def test_gradients_reach_every_parameter(device):
    model = tiny(device, positional="learned").train()
    x = ids(IDX, device)
    F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1)).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and np.abs(p.grad.numpy()).sum() > 0, name


@pytest.mark.parametrize("positional", POSITIONAL)
def test_tiny_gpt_learns_a_repeated_motif(positional, device):
    """Sequences repeat a random motif of 4 tokens: from position 4 on, the next token is
    the one 4 back (a lookup by position that only attention can do). A tiny model reaches
    100% next-token accuracy there on fresh sequences."""
    mg.manual_seed(0)
    rng = np.random.default_rng(0)
    P, T = 4, 16
    model = GPT(8, d_model=32, nhead=2, num_layers=2, dim_feedforward=64, max_len=T,
                positional=positional).to(device)
    opt = mg.optim.Adam(model.parameters(), lr=3e-3)

    def batch(n):
        return ids(np.tile(rng.integers(0, 8, size=(n, P)), T // P), device)

    accuracy = 0.0
    for step in range(400):
        x = batch(32)
        logits = model(x[:, :-1])[:, P - 1:]                                 # (B, T - P, V)
        loss = F.cross_entropy(logits.reshape(-1, 8), x[:, P:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 24:
            x = batch(256)
            with mg.no_grad():
                pred = model(x[:, :-1])[:, P - 1:].argmax(-1).numpy()
            accuracy = (pred == x[:, P:].numpy()).mean()
            if accuracy == 1.0:
                break
    assert accuracy == 1.0, f"accuracy {accuracy} after {step + 1} steps"
    # and generation continues the motif
    out = model.generate(x[:8, :P], T - P, top_k=1).numpy()
    np.testing.assert_array_equal(out, x[:8].numpy())


# --- residual="mhc": hyper-connection streams carried from block to block ------------------

def test_mhc_gpt_at_initialisation_is_the_pre_ln_gpt(device):
    """With the weights of a pre-LN GPT and its mHC parameters at their start, an mHC GPT
    gives the same logits, up to Sinkhorn's convergence (cf. tests/nn/test_hyper.py)."""
    add = tiny(device)
    mhc = tiny(device, residual="mhc", n_streams=3)
    missing, unexpected = mhc.load_state_dict(add.state_dict(), strict=False)
    assert not unexpected and sorted(missing) == sorted(
        f"blocks.{i}.hc{j}.{p}" for i in range(2) for j in (1, 2)
        for p in ("pre", "post", "res_logits"))
    x = ids(IDX, device)
    np.testing.assert_allclose(mhc(x).numpy(), add(x).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("norm_first", [True, False])
def test_mhc_gpt_trains_a_step(device, norm_first):
    """Every parameter, the hyper-connections' too, gets a finite gradient, and one AdamW
    step lowers the loss on the batch."""
    model = tiny(device, mg.float32, residual="mhc", norm_first=norm_first).train()
    x = ids(IDX, device)
    optimizer = mg.optim.AdamW(model.parameters(), lr=1e-2)

    def loss():
        return F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1))

    before = loss()
    before.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and np.isfinite(p.grad.numpy()).all(), name
    assert np.abs(model.blocks[0].hc1.res_logits.grad.numpy()).max() > 0
    optimizer.step()
    assert loss().item() < before.item()


def test_mhc_gpt_cache_and_generate(device):
    """The key/value cache gives the full recompute with streams too, and so generation
    with and without it agrees."""
    model = tiny(device, residual="mhc")
    with mg.no_grad():  # away from the start, where mHC is the ordinary residual
        for block in model.blocks:
            block.hc1.res_logits.copy_(mg.randn(4, 4, device=device))
            block.hc2.pre.copy_(mg.rand(4, device=device))
    x = ids(IDX, device)
    full = model(x).numpy()
    cache = model.new_cache()
    chunks = [model(x[:, :5], cache).numpy(), model(x[:, 5:], cache).numpy()]
    np.testing.assert_allclose(np.concatenate(chunks, axis=1), full, atol=1e-10, rtol=0)
    prompt = x[:, :3]
    np.testing.assert_array_equal(model.generate(prompt, 25, top_k=1).numpy(),
                                  model.generate(prompt, 25, top_k=1, use_cache=False).numpy())
