"""Transformer layers and stacks: against PyTorch's with the same weights, masks, pre/post-LN,
gradients, and a tiny model that memorises its data."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.autograd import gradcheck
from tests.torch_ref import needs_torch, torch


def torch_state(sd):
    """Our layer's state_dict under torch.nn.Transformer*Layer's names."""
    out, qkv = {}, {}
    for key, value in sd.items():
        arr = torch.tensor(value.numpy())
        parts = key.split(".")
        attn = {"self_attn": "self_attn", "cross_attn": "multihead_attn"}.get(parts[0])
        if attn and parts[1] in ("q_proj", "k_proj", "v_proj"):
            qkv.setdefault((attn, parts[2]), {})[parts[1]] = arr
        elif attn:
            out[f"{attn}.{'.'.join(parts[1:])}"] = arr
        elif parts[0] == "ffn":
            out[".".join(parts[1:])] = arr
        else:
            out[key] = arr
    for (attn, kind), d in qkv.items():
        name = "in_proj_weight" if kind == "weight" else "in_proj_bias"
        out[f"{attn}.{name}"] = torch.cat([d["q_proj"], d["k_proj"], d["v_proj"]])
    return out


def pair(kind, norm_first, device, activation="relu", d=8, heads=2, ff=16):
    """Our layer (float64, on ``device``) and torch's (on the CPU) with the same weights."""
    mg_cls = {"enc": nn.TransformerEncoderLayer, "dec": nn.TransformerDecoderLayer}[kind]
    torch_cls = {"enc": torch.nn.TransformerEncoderLayer,
                 "dec": torch.nn.TransformerDecoderLayer}[kind]
    ours = mg_cls(d, heads, dim_feedforward=ff, dropout=0.0, activation=activation,
                  norm_first=norm_first).double().to(device)
    theirs = torch_cls(d, heads, dim_feedforward=ff, dropout=0.0, activation=activation,
                       norm_first=norm_first, batch_first=True).double()
    theirs.load_state_dict(torch_state(ours.state_dict()))
    return ours, theirs


def both(arr, device, requires_grad=True):
    return (mg.tensor(arr, device=device, requires_grad=requires_grad),
            torch.tensor(arr, requires_grad=requires_grad))


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=tol, atol=tol)


@needs_torch
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("masks", ["none", "causal", "padding", "float"])
def test_encoder_layer_matches_torch(norm_first, activation, masks, device):
    ours, theirs = pair("enc", norm_first, device, activation)
    rng = np.random.default_rng(0)
    x, tx = both(rng.standard_normal((2, 5, 8)), device)
    kw, tkw = {}, {}
    if masks == "causal":
        kw = dict(is_causal=True)
        tkw = dict(src_mask=torch.nn.Transformer.generate_square_subsequent_mask(
            5, dtype=torch.float64), is_causal=True)
    elif masks == "padding":
        pad = np.array([[False] * 5, [False, False, False, True, True]])
        kw = dict(src_key_padding_mask=mg.tensor(pad, device=device))
        tkw = dict(src_key_padding_mask=torch.tensor(pad))
    elif masks == "float":
        m = rng.standard_normal((5, 5))
        kw, tkw = dict(src_mask=mg.tensor(m, device=device)), dict(src_mask=torch.tensor(m))
    out, tout = ours(x, **kw), theirs(tx, **tkw)
    close(out, tout)
    w = rng.standard_normal(out.shape)
    (out * mg.tensor(w, device=device)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    close(x.grad, tx.grad)
    tparams = dict(theirs.named_parameters())
    close(ours.ffn.linear1.weight.grad, tparams["linear1.weight"].grad)
    close(ours.norm1.weight.grad, tparams["norm1.weight"].grad)


@needs_torch
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first, device):
    ours, theirs = pair("dec", norm_first, device)
    rng = np.random.default_rng(1)
    y, ty = both(rng.standard_normal((2, 4, 8)), device)
    m, tm = both(rng.standard_normal((2, 6, 8)), device)
    pad = np.array([[False] * 6, [False] * 4 + [True] * 2])
    out = ours(y, m, tgt_is_causal=True, memory_key_padding_mask=mg.tensor(pad, device=device))
    tout = theirs(ty, tm, tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(
        4, dtype=torch.float64), tgt_is_causal=True,
        memory_key_padding_mask=torch.tensor(pad))
    close(out, tout)
    out.sum().backward()
    tout.sum().backward()
    close(y.grad, ty.grad)
    close(m.grad, tm.grad)


@needs_torch
@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_match_torch(norm_first, device):
    layer, tlayer = pair("enc", norm_first, device)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8).double()).to(device)
    tenc = torch.nn.TransformerEncoder(tlayer, 2, norm=torch.nn.LayerNorm(8).double(),
                                       enable_nested_tensor=False)
    sd = enc.state_dict()
    tsd = {}
    for i in range(2):
        sub = {k[len(f"layers.{i}."):]: v for k, v in sd.items() if k.startswith(f"layers.{i}.")}
        tsd.update({f"layers.{i}.{k}": v for k, v in torch_state(sub).items()})
    tsd.update({k: torch.tensor(v.numpy()) for k, v in sd.items() if k.startswith("norm.")})
    tenc.load_state_dict(tsd)
    assert list(sd) and all(k.startswith(("layers.0.", "layers.1.", "norm.")) for k in sd)
    x, tx = both(np.random.default_rng(2).standard_normal((2, 5, 8)), device)
    close(enc(x), tenc(tx))


def test_layers_are_independent_copies(device):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16).to(device)
    enc = nn.TransformerEncoder(layer, 3)
    ws = [enc.layers[i].ffn.linear1.weight for i in range(3)]
    assert ws[0] is not ws[1] and ws[1] is not ws[2]
    assert len(list(enc.parameters())) == 3 * len(list(layer.parameters()))
    enc2 = nn.TransformerEncoder(lambda: nn.TransformerEncoderLayer(8, 2, 16), 2).to(device)
    assert "layers.1.self_attn.q_proj.weight" in enc2.state_dict()


def test_encoder_layer_gradcheck(device):
    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0).double()
    layer.to(device)
    x = mg.randn(1, 3, 4, dtype=mg.float64, device=device, requires_grad=True)
    pad = mg.tensor([[False, False, True]], device=device)
    assert gradcheck(lambda t: layer(t, src_key_padding_mask=pad), (x,))


def test_decoder_causal_mask_leaks_nothing(device):
    dec = nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0).to(device)
    mem = mg.randn(1, 4, 8, device=device)
    y = mg.randn(1, 5, 8, device=device)
    out = dec(y, mem, tgt_is_causal=True).numpy()
    y2 = y.numpy().copy()
    y2[:, 3:] += 10.0  # change the future
    out2 = dec(mg.tensor(y2, device=device), mem, tgt_is_causal=True).numpy()
    np.testing.assert_allclose(out[:, :3], out2[:, :3], rtol=1e-5, atol=1e-6)
    assert not np.allclose(out[:, 3:], out2[:, 3:])


def test_tiny_encoder_memorises_sequences(device):
    """A 2-layer encoder (with an embedding and a read-out) learns to copy 8 random
    sequences to zero token errors."""
    mg.manual_seed(0)
    vocab, d, T = 6, 16, 5
    emb = nn.Embedding(vocab, d).to(device)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0), 2).to(device)
    head = nn.Linear(d, vocab).to(device)
    pos = mg.randn(T, d, device=device) * 0.5
    data = mg.randint(0, vocab, (8, T), device=device)
    params = list(emb.parameters()) + list(enc.parameters()) + list(head.parameters())
    m = [mg.zeros_like(p) for p in params]
    v = [mg.zeros_like(p) for p in params]
    for step in range(1, 301):  # Adam by hand: the optimiser package is tested elsewhere
        logits = head(enc(emb(data) + pos))
        loss = nn.functional.cross_entropy(logits.reshape(-1, vocab), data.reshape(-1))
        loss.backward()
        with mg.no_grad():
            for p, mi, vi in zip(params, m, v):
                mi.mul_(0.9).add_(p.grad * 0.1)
                vi.mul_(0.999).add_(p.grad * p.grad * 0.001)
                p.sub_(mi / (1 - 0.9 ** step) / ((vi / (1 - 0.999 ** step)).sqrt() + 1e-8)
                       * 0.01)
                p.grad = None
    with mg.no_grad():
        pred = head(enc(emb(data) + pos)).argmax(-1)
    assert (pred == data).all().item(), f"final loss {loss.item():.4f}"


@pytest.mark.parametrize("norm_first", [False, True])
def test_mhc_encoder_layer_trains_and_keeps_shapes(device, norm_first):
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0,
                                       norm_first=norm_first, residual="mhc", n_streams=3)
    layer.to(device)
    x = mg.randn(2, 5, 8, device=device, requires_grad=True)
    out = layer(x)
    assert out.shape == (2, 5, 8)
    out.sum().backward()
    assert x.grad is not None and np.isfinite(x.grad.numpy()).all()
    assert layer.hc1.res_logits.grad is not None


# --- unbatched input (T, E), as PyTorch's layers and stacks accept -------------------------

def _kw(kind, rng, masks, T, S, device):
    """The same masks for our layer (on ``device``) and torch's, for an unbatched input of T
    (and S)."""
    name = "src" if kind == "enc" else "tgt"
    kw, tkw = {}, {}
    if masks in ("padding", "all"):
        pad = np.array([False] * (T - 1) + [True])
        kw[f"{name}_key_padding_mask"] = mg.tensor(pad, device=device)
        tkw[f"{name}_key_padding_mask"] = torch.tensor(pad)
        if kind == "dec":
            mpad = np.array([False] * (S - 2) + [True, True])
            kw["memory_key_padding_mask"] = mg.tensor(mpad, device=device)
            tkw["memory_key_padding_mask"] = torch.tensor(mpad)
    if masks in ("causal", "all"):
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        flag = "is_causal" if kind == "enc" else "tgt_is_causal"
        kw[flag] = tkw[flag] = True
        tkw["src_mask" if kind == "enc" else "tgt_mask"] = causal
    if masks == "float":
        m = rng.standard_normal((T, T))
        key = "src_mask" if kind == "enc" else "tgt_mask"
        kw[key], tkw[key] = mg.tensor(m, device=device), torch.tensor(m)
    return kw, tkw


@needs_torch
@pytest.mark.parametrize("kind", ["enc", "dec"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masks", ["none", "padding", "causal", "float", "all"])
def test_unbatched_layer_matches_torch(kind, norm_first, masks, device):
    ours, theirs = pair(kind, norm_first, device)
    rng = np.random.default_rng(3)
    x, tx = both(rng.standard_normal((5, 8)), device)
    m, tm = both(rng.standard_normal((6, 8)), device)
    kw, tkw = _kw(kind, rng, masks, 5, 6, device)
    out = ours(x, **kw) if kind == "enc" else ours(x, m, **kw)
    tout = theirs(tx, **tkw) if kind == "enc" else theirs(tx, tm, **tkw)
    assert out.shape == tuple(tout.shape) == (5, 8)
    close(out, tout)
    w = rng.standard_normal(out.shape)
    (out * mg.tensor(w, device=device)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    close(x.grad, tx.grad)
    if kind == "dec":
        close(m.grad, tm.grad)
    close(ours.norm1.weight.grad, dict(theirs.named_parameters())["norm1.weight"].grad)


@needs_torch
@pytest.mark.parametrize("norm_first", [False, True])
def test_unbatched_stacks_match_torch(norm_first, device):
    rng = np.random.default_rng(4)
    layer, tlayer = pair("enc", norm_first, device)
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8).double()).to(device)
    tenc = torch.nn.TransformerEncoder(tlayer, 2, norm=torch.nn.LayerNorm(8).double(),
                                       enable_nested_tensor=False)
    dlayer, tdlayer = pair("dec", norm_first, device)
    dec = nn.TransformerDecoder(dlayer, 2, norm=nn.LayerNorm(8).double()).to(device)
    tdec = torch.nn.TransformerDecoder(tdlayer, 2, norm=torch.nn.LayerNorm(8).double())
    for ours, theirs in ((enc, tenc), (dec, tdec)):
        tsd = {}
        for i in range(2):
            sub = {k[len(f"layers.{i}."):]: v for k, v in ours.state_dict().items()
                   if k.startswith(f"layers.{i}.")}
            tsd.update({f"layers.{i}.{k}": v for k, v in torch_state(sub).items()})
        tsd.update({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()
                    if k.startswith("norm.")})
        theirs.load_state_dict(tsd)
    x, tx = both(rng.standard_normal((5, 8)), device)
    m, tm = both(rng.standard_normal((6, 8)), device)
    kw, tkw = _kw("enc", rng, "all", 5, 6, device)
    tkw["mask"] = tkw.pop("src_mask")  # the stack's name of it
    close(enc(x, **kw), tenc(tx, **tkw))
    kw, tkw = _kw("dec", rng, "all", 5, 6, device)
    close(dec(x, m, **kw), tdec(tx, tm, **tkw))


@pytest.mark.parametrize("residual", ["add", "mhc"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_unbatched_is_a_batch_of_one(device, residual, norm_first):
    """(T, E) gives the row of (1, T, E): for mHC too, whose streams PyTorch does not have."""
    kw = dict(dim_feedforward=16, dropout=0.0, norm_first=norm_first, residual=residual,
              n_streams=3)
    enc = nn.TransformerEncoder(lambda: nn.TransformerEncoderLayer(8, 2, **kw), 2).to(device)
    dec = nn.TransformerDecoder(lambda: nn.TransformerDecoderLayer(8, 2, **kw), 2).to(device)
    x, m = mg.randn(5, 8, device=device), mg.randn(4, 8, device=device)
    pad = mg.tensor([False, False, False, True], device=device)
    src_pad = mg.tensor([False] * 4 + [True], device=device)
    for module, args, kwargs in (
            (enc, (x,), dict(src_key_padding_mask=src_pad)),
            (enc.layers[0], (x,), dict(is_causal=True)),
            (dec, (x, m), dict(memory_key_padding_mask=pad, tgt_is_causal=True)),
            (dec.layers[1], (x, m), dict(memory_key_padding_mask=pad))):
        out = module(*args, **kwargs)
        batched = module(*[a.unsqueeze(0) for a in args],
                         **{k: v.unsqueeze(0) if isinstance(v, mg.Tensor) else v
                            for k, v in kwargs.items()})
        assert out.shape == (5, 8) and batched.shape == (1, 5, 8)
        np.testing.assert_array_equal(out.numpy(), batched.numpy()[0])


@needs_torch
@pytest.mark.parametrize("case", ["2-D padding of unbatched", "batched memory",
                                  "unbatched memory", "2-D memory padding"])
def test_unbatched_shape_errors_as_torch(case, device):
    """PyTorch's layers raise AssertionError for mixed batched and unbatched arguments."""
    for kind in ("enc", "dec"):
        if kind == "enc" and case != "2-D padding of unbatched":
            continue
        ours, theirs = pair(kind, False, device)
        x, m = np.zeros((5, 8)), np.zeros((6, 8))
        kw = {}
        if case == "2-D padding of unbatched":
            kw = {f"{'src' if kind == 'enc' else 'tgt'}_key_padding_mask": np.zeros((1, 5), bool)}
        elif case == "batched memory":
            m = np.zeros((1, 6, 8))
        elif case == "unbatched memory":
            x = np.zeros((1, 5, 8))
        else:
            kw = {"memory_key_padding_mask": np.zeros((1, 6), bool)}
        args = (x,) if kind == "enc" else (x, m)
        with pytest.raises(AssertionError) as expected:
            theirs(*[torch.tensor(a) for a in args], **{k: torch.tensor(v) for k, v in kw.items()})
        with pytest.raises(AssertionError) as got:
            ours(*[mg.tensor(a, device=device) for a in args],
                 **{k: mg.tensor(v, device=device) for k, v in kw.items()})
        assert str(got.value).startswith(str(expected.value).split(" but ")[0])


def test_state_dict_keys_are_stable(device):
    """Checkpoints written before keep loading: the layers' keys, mHC's included."""
    def keys(layer):
        return sorted({k.rsplit(".", 1)[0] for k in layer.state_dict()})

    attn = ["self_attn.k_proj", "self_attn.out_proj", "self_attn.q_proj", "self_attn.v_proj"]
    ffn = ["ffn.linear1", "ffn.linear2"]
    cross = [k.replace("self_attn", "cross_attn") for k in attn]
    enc = nn.TransformerEncoderLayer(8, 2, 16).to(device)
    dec = nn.TransformerDecoderLayer(8, 2, 16).to(device)
    assert keys(enc) == sorted(attn + ffn + ["norm1", "norm2"])
    assert keys(dec) == sorted(attn + cross + ffn + ["norm1", "norm2", "norm3"])
    mhc = nn.TransformerDecoderLayer(8, 2, 16, residual="mhc").to(device)
    assert [k for k in mhc.state_dict() if k.startswith("hc")] == [
        f"hc{i}.{p}" for i in (1, 2, 3) for p in ("pre", "post", "res_logits")]
