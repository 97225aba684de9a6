"""Layers and functions against PyTorch on options users bring from it: grouped-query
attention (``enable_gqa``), sequence-first attention and transformer layers
(``batch_first=False``), transformer layers without biases or in another dtype, linear biases
that broadcast, Embedding's ``max_norm``, and the errors and warnings PyTorch gives for bad
arguments (layer_norm, cross_entropy's uint8 targets, GELU, MultiheadAttention, dropout of
integers, losses whose target does not broadcast).

Every comparison runs the same program in both libraries, with identical weights, and checks
values and gradients; the differentiable paths are gradchecked in float64.
"""
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from tests.torch_ref import needs_torch, raises_as_torch, torch

F64 = dict(rtol=1e-10, atol=1e-12)


def rng_for(*key):
    return np.random.default_rng(abs(hash(repr(key))) % 2 ** 32)


def both(array, device, requires_grad=True):
    """The array as a minigrad tensor on ``device`` and as a torch tensor."""
    return (mg.tensor(array, device=device, requires_grad=requires_grad),
            torch.tensor(array, requires_grad=requires_grad))


def assert_close(ours, theirs, **tol):
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), **(tol or F64))


def backward_both(ours, theirs, seed=0):
    """Backpropagate one random upstream gradient through both outputs."""
    g = np.random.default_rng(seed).standard_normal(tuple(theirs.shape))
    (ours * mg.tensor(g.astype(ours.numpy().dtype), device=ours.device)).sum().backward()
    (theirs * torch.tensor(g.astype(theirs.detach().numpy().dtype))).sum().backward()


# --- scaled_dot_product_attention(enable_gqa=True) ---------------------------------------------

GQA_SHAPES = {
    "kv heads 2 of 4": ((2, 4, 3, 5), (2, 2, 6, 5), (2, 2, 6, 7)),
    "k 2, v 1 of 4": ((2, 4, 3, 5), (2, 2, 6, 5), (2, 1, 6, 7)),
    "one kv head": ((4, 3, 5), (1, 3, 5), (1, 3, 5)),
    "same heads": ((2, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 5)),
    "kv batch broadcast": ((2, 4, 3, 5), (1, 2, 3, 5), (1, 2, 3, 5)),
}


@needs_torch
@pytest.mark.parametrize("shapes", GQA_SHAPES.values(), ids=GQA_SHAPES.keys())
@pytest.mark.parametrize("options", [{}, {"is_causal": True}, {"mask": "bool"},
                                     {"mask": "float"}, {"scale": 0.3}],
                         ids=["plain", "causal", "bool mask", "float mask", "scale"])
def test_sdpa_grouped_query_attention_matches_torch(shapes, options, device):
    rng = rng_for("gqa", shapes, options)
    (q, tq), (k, tk), (v, tv) = (both(rng.standard_normal(s), device) for s in shapes)
    kwargs = {key: val for key, val in options.items() if key != "mask"}
    T, S = shapes[0][-2], shapes[1][-2]
    if options.get("mask") == "bool":
        allowed = rng.random((T, S)) < 0.6
        allowed[:, 0] = True
        m, tm = both(allowed, device, requires_grad=False)
        kwargs_m, kwargs_t = dict(attn_mask=m), dict(attn_mask=tm)
    elif options.get("mask") == "float":
        m, tm = both(rng.standard_normal((T, S)), device, requires_grad=False)
        kwargs_m, kwargs_t = dict(attn_mask=m), dict(attn_mask=tm)
    else:
        kwargs_m = kwargs_t = {}
    ours = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kwargs, **kwargs_m)
    theirs = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True,
                                                              **kwargs, **kwargs_t)
    assert ours.shape == tuple(theirs.shape)
    assert_close(ours, theirs)
    backward_both(ours, theirs)
    for a, b in ((q, tq), (k, tk), (v, tv)):
        assert a.grad.shape == tuple(b.grad.shape)
        assert_close(a.grad, b.grad)


def test_sdpa_grouped_query_attention_gradcheck(device):
    rng = rng_for("gqa gradcheck")
    q, k, v = (mg.tensor(rng.standard_normal(s), device=device, requires_grad=True)
               for s in ((1, 4, 3, 2), (1, 2, 4, 2), (1, 1, 4, 3)))
    assert mg.autograd.gradcheck(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                       enable_gqa=True), (q, k, v))


@needs_torch
@pytest.mark.parametrize("shapes, kind", [
    (((2, 4, 3, 5), (2, 3, 3, 5), (2, 3, 3, 5)), RuntimeError),   # 3 does not divide 4
    (((2, 4, 3, 5), (2, 2, 3, 5), (2, 3, 3, 5)), RuntimeError),
    (((3, 5), (3, 5), (3, 5)), IndexError),                       # no heads dim
], ids=["key heads", "value heads", "2-d"])
def test_sdpa_grouped_query_attention_errors_as_torch(shapes, kind, device):
    arrays = [np.ones(s) for s in shapes]
    message = raises_as_torch(
        lambda M: M.nn.functional.scaled_dot_product_attention(
            *[M.tensor(a) for a in arrays], enable_gqa=True), kind, device)
    assert "scaled_dot_product_attention" in message


# --- MultiheadAttention(batch_first=False) ------------------------------------------------------

E, H = 8, 2


def torch_mha(m, batch_first):
    """torch.nn.MultiheadAttention holding minigrad MultiheadAttention m's weights."""
    t = torch.nn.MultiheadAttention(m.embed_dim, m.num_heads, bias=m.q_proj.bias is not None,
                                    kdim=m.kdim, vdim=m.vdim, batch_first=batch_first,
                                    dtype=torch.float64)
    w = {k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()}
    with torch.no_grad():
        if t._qkv_same_embed_dim:
            t.in_proj_weight.copy_(torch.cat([w["q_proj.weight"], w["k_proj.weight"],
                                              w["v_proj.weight"]]))
        else:
            for name in ("q", "k", "v"):
                getattr(t, f"{name}_proj_weight").copy_(w[f"{name}_proj.weight"])
        t.out_proj.weight.copy_(w["out_proj.weight"])
        if t.in_proj_bias is not None:
            t.in_proj_bias.copy_(torch.cat([w["q_proj.bias"], w["k_proj.bias"],
                                            w["v_proj.bias"]]))
            t.out_proj.bias.copy_(w["out_proj.bias"])
    return t.eval()


@needs_torch
@pytest.mark.parametrize("need_weights, average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("kvdim", [None, (6, 3)], ids=["self", "kdim vdim"])
def test_multihead_attention_sequence_first_matches_torch(need_weights, average, kvdim,
                                                          device):
    rng = rng_for("mha seq first", need_weights, average, kvdim)
    kdim, vdim = kvdim or (E, E)
    m = nn.MultiheadAttention(E, H, kdim=kdim, vdim=vdim, batch_first=False,
                              dtype=mg.float64).to(device).eval()
    assert m.batch_first is False
    t = torch_mha(m, batch_first=False)
    T, S, B = 4, 5, 3
    (q, tq), (k, tk), (v, tv) = (both(rng.standard_normal(s), device)
                                 for s in ((T, B, E), (S, B, kdim), (S, B, vdim)))
    pad = np.zeros((B, S), bool)
    pad[0, -2:] = True
    mask = rng.random((T, S)) < 0.2
    mask[:, 0] = False
    kw = dict(need_weights=need_weights, average_attn_weights=average)
    out, w = m(q, k, v, key_padding_mask=mg.tensor(pad, device=device),
               attn_mask=mg.tensor(mask, device=device), **kw)
    tout, tw = t(tq, tk, tv, key_padding_mask=torch.tensor(pad), attn_mask=torch.tensor(mask),
                 **kw)
    assert out.shape == tuple(tout.shape) == (T, B, E)
    assert_close(out, tout)
    if need_weights:
        assert w.shape == tuple(tw.shape)
        assert_close(w, tw)
    else:
        assert w is None and tw is None
    backward_both(out, tout)
    for a, b in ((q, tq), (k, tk), (v, tv)):
        assert_close(a.grad, b.grad)


@needs_torch
def test_multihead_attention_sequence_first_unbatched_and_errors(device):
    m = nn.MultiheadAttention(E, H, batch_first=False, dtype=mg.float64).to(device).eval()
    t = torch_mha(m, batch_first=False)
    x, tx = both(rng_for("unbatched").standard_normal((4, E)), device)
    assert_close(m(x, x, x)[0], t(tx, tx, tx)[0])
    # the batch sizes compared are dim 1's, and the message shows the shapes as given
    q, k = mg.zeros(4, 3, E, device=device), mg.zeros(5, 2, E, device=device)
    with pytest.raises(mg.ShapeError, match=r"\(4, 3, 8\).*\(5, 2, 8\)"):
        m(q, k, k)


def test_multihead_attention_signature_is_torchs():
    """PyTorch's positional order: ..., bias, add_bias_kv, add_zero_attn, kdim, vdim."""
    m = nn.MultiheadAttention(8, 2, 0.0, False, False, False, 6, 4)
    assert (m.kdim, m.vdim, m.q_proj.bias, m.batch_first) == (6, 4, None, True)
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        nn.MultiheadAttention(8, 2, add_bias_kv=True)


@needs_torch
def test_multihead_attention_indivisible_heads_raise_as_torch(device):
    message = raises_as_torch(lambda M: M.nn.MultiheadAttention(10, 3), AssertionError, device)
    assert "(10)" in message and "(3)" in message


# --- transformer layers: batch_first=False, bias=False, dtype= --------------------------------

def torch_state(t):
    """torch's transformer state dict in minigrad's names (q/k/v apart, ffn.linear1, ...)."""
    sd = {}
    for name, value in t.state_dict().items():
        a = value.detach().numpy()
        name = name.replace("multihead_attn.", "cross_attn.")
        name = name.replace("linear1.", "ffn.linear1.").replace("linear2.", "ffn.linear2.")
        for packed in ("in_proj_weight", "in_proj_bias"):
            if name.endswith(packed):
                prefix, kind = name[:-len(packed)], packed.split("_")[-1]
                for i, p in enumerate("qkv"):
                    sd[f"{prefix}{p}_proj.{kind}"] = a[i * E:(i + 1) * E]
                break
        else:
            sd[name] = a
    return sd


def layer_pair(kind, stack, device, **options):
    """A torch transformer layer (or a stack of two, with a final norm) with random weights,
    and minigrad's with the same weights."""
    torch.manual_seed(0)
    torch_options = {"batch_first": True, **options}  # (minigrad's default is batch first)
    torch_layer = getattr(torch.nn, f"Transformer{kind}Layer")(
        E, H, 16, dropout=0.0, dtype=torch.float64, **torch_options)
    ours_layer = getattr(nn, f"Transformer{kind}Layer")(
        E, H, 16, dropout=0.0, dtype=mg.float64, **options)
    if stack:
        extra = dict(enable_nested_tensor=False) if kind == "Encoder" else {}
        t = getattr(torch.nn, f"Transformer{kind}")(
            torch_layer, 2, norm=torch.nn.LayerNorm(E, dtype=torch.float64), **extra)
        m = getattr(nn, f"Transformer{kind}")(
            ours_layer, 2, norm=nn.LayerNorm(E, dtype=mg.float64), **extra)
    else:
        t, m = torch_layer, ours_layer
    with torch.no_grad():
        for p in t.parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    m.load_state_dict({k: mg.tensor(v) for k, v in torch_state(t).items()}, strict=True)
    return m.to(device).eval(), t.eval()


@needs_torch
@pytest.mark.parametrize("kind", ["Encoder", "Decoder"])
@pytest.mark.parametrize("stack", [False, True], ids=["layer", "stack"])
@pytest.mark.parametrize("options", [
    dict(batch_first=False), dict(batch_first=False, norm_first=True),
    dict(bias=False), dict(bias=False, norm_first=True, batch_first=False),
    dict(batch_first=True, activation="gelu", layer_norm_eps=1e-3)],
    ids=["seq first", "seq first pre-LN", "no bias", "no bias pre-LN seq first", "gelu eps"])
@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
def test_transformer_options_match_torch(kind, stack, options, unbatched, device):
    m, t = layer_pair(kind, stack, device, **options)
    if options.get("bias") is False:
        assert not [n for n, _ in m.named_parameters()
                    if n.endswith("bias") and not n.startswith("norm.")]  # (the final norm's)
    rng = rng_for("transformer", kind, stack, sorted(options.items()), unbatched)
    B, T, S = 3, 5, 4
    seq_first = options.get("batch_first") is False
    shape = (lambda L: (L, E)) if unbatched else (lambda L: (L, B, E) if seq_first else (B, L, E))
    x, tx = both(rng.standard_normal(shape(T)), device)
    causal = np.triu(np.ones((T, T), bool), 1)
    pad = np.zeros((T,) if unbatched else (B, T), bool)
    pad[..., -1] = True
    masks = {"Encoder": ("mask" if stack else "src_mask", "src_key_padding_mask"),
             "Decoder": ("tgt_mask", "tgt_key_padding_mask")}[kind]
    ours_kw = {masks[0]: mg.tensor(causal, device=device), masks[1]: mg.tensor(pad, device=device)}
    torch_kw = {masks[0]: torch.tensor(causal), masks[1]: torch.tensor(pad)}
    if kind == "Encoder":
        out, tout = m(x, **ours_kw), t(tx, **torch_kw)
    else:
        mem, tmem = both(rng.standard_normal(shape(S)), device)
        out, tout = m(x, mem, **ours_kw), t(tx, tmem, **torch_kw)
    assert out.shape == tuple(tout.shape)
    assert_close(out, tout)
    backward_both(out, tout)
    assert_close(x.grad, tx.grad)
    if kind == "Decoder":
        assert_close(mem.grad, tmem.grad)


@needs_torch
def test_transformer_stack_warns_once_about_mismatched_masks_as_torch(device):
    m, t = layer_pair("Encoder", True, device)
    x, tx = both(np.ones((2, 3, E)), device, requires_grad=False)
    pad = np.zeros((2, 3), bool)
    pad[0, -1] = True
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        out = m(x, mask=mg.zeros(3, 3, dtype=mg.float64, device=device),
                src_key_padding_mask=mg.tensor(pad, device=device))
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        tout = t(tx, mask=torch.zeros(3, 3, dtype=torch.float64),
                 src_key_padding_mask=torch.tensor(pad))
    assert_close(out, tout)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


def test_transformer_layer_parameters_take_dtype(device):
    layer = nn.TransformerDecoderLayer(8, 2, 16, device=device, dtype=mg.float64)
    assert {p.dtype for p in layer.parameters()} == {mg.float64}
    mhc = nn.TransformerEncoderLayer(8, 2, 16, residual="mhc", dtype=mg.float64)
    assert {p.dtype for p in mhc.parameters()} == {mg.float64}


# --- linear: biases that broadcast ------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("input_shape, bias_shape", [
    ((4, 5), ()), ((4, 5), (1,)), ((2, 4, 5), (1,)), ((5,), ()), ((4, 5), (4, 3)),
    ((4, 5), (4, 1)), ((2, 4, 5), (4, 3)), ((2, 4, 5), (2, 1, 3))])
def test_linear_bias_broadcasts_as_torch(input_shape, bias_shape, device):
    rng = rng_for("linear bias", input_shape, bias_shape)
    (x, tx), (w, tw), (b, tb) = (both(rng.standard_normal(s), device)
                                 for s in (input_shape, (3, 5), bias_shape))
    ours, theirs = F.linear(x, w, b), torch.nn.functional.linear(tx, tw, tb)
    assert ours.shape == tuple(theirs.shape)
    assert_close(ours, theirs)
    backward_both(ours, theirs)
    for a, c in ((x, tx), (w, tw), (b, tb)):
        assert_close(a.grad, c.grad)
    assert mg.autograd.gradcheck(F.linear, (x, w, b))


@needs_torch
def test_linear_bias_that_does_not_broadcast_raises_as_torch(device):
    for bias in ((4,), (2, 3)):  # neither broadcasts to the output (4, 3)
        message = raises_as_torch(lambda M: M.nn.functional.linear(
            M.ones(4, 5), M.ones(3, 5), M.ones(*bias)), RuntimeError, device)
        assert "linear" in message and str(bias) in message


# --- Embedding(max_norm=...) -------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("max_norm, norm_type", [(1.0, 2.0), (0.5, 3.0), (2.0, 1.0),
                                                 (100.0, 2.0)])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_max_norm_matches_torch(dtype, max_norm, norm_type, padding_idx, device):
    rng = rng_for("max_norm", dtype, max_norm, norm_type, padding_idx)
    table = (rng.standard_normal((6, 3)) * 2).astype(dtype)
    ids = np.array([[0, 2, 2], [5, 1, 0]])
    m = nn.Embedding(6, 3, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                     _weight=mg.tensor(table.copy(), device=device))
    t = torch.nn.Embedding(6, 3, padding_idx=padding_idx, max_norm=max_norm,
                           norm_type=norm_type, _weight=torch.tensor(table.copy()))
    assert repr(m) == repr(t)
    out, tout = m(mg.tensor(ids, device=device)), t(torch.tensor(ids))
    # float32: to the rounding of PyTorch's float32 norm (minigrad's is computed in float64)
    tol = F64 if dtype == np.float64 else dict(rtol=1e-6, atol=1e-7)
    assert_close(out, tout, **tol)
    assert_close(m.weight.detach(), t.weight, **tol)   # rows looked up are renormalised
    backward_both(out, tout)
    assert_close(m.weight.grad, t.weight.grad, **tol)


@needs_torch
def test_functional_embedding_max_norm_and_unsupported_options(device):
    table = rng_for("F.embedding").standard_normal((5, 4)) * 3
    w, tw = both(table, device, requires_grad=False)
    ids = np.array([4, 0, 4])
    out = F.embedding(mg.tensor(ids, device=device), w, max_norm=1.5)
    tout = torch.nn.functional.embedding(torch.tensor(ids), tw, max_norm=1.5)
    assert_close(out, tout)
    assert_close(w, tw)
    pretrained = nn.Embedding.from_pretrained(mg.tensor(table, device=device), max_norm=1.0)
    assert pretrained.max_norm == 1.0
    for option in ("scale_grad_by_freq", "sparse"):
        with pytest.raises(NotImplementedError, match=option):
            nn.Embedding(5, 4, **{option: True})


# --- bad arguments: PyTorch's errors and warnings ---------------------------------------------

@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M: M.nn.functional.layer_norm(M.ones(2, 3), ()), RuntimeError),
    (lambda M: M.nn.functional.layer_norm(M.ones(2, 3, dtype=M.int64), (3,)),
     NotImplementedError),
    (lambda M: M.nn.GELU(approximate="fast")(M.ones(2)), RuntimeError),
    (lambda M: M.nn.functional.cross_entropy(M.zeros(2, 3, 4),
                                             M.zeros(2, 4, dtype=M.uint8)), RuntimeError),
    (lambda M: M.nn.functional.mse_loss(M.ones(3, 4), M.ones(3, 3)), RuntimeError),
], ids=["layer_norm ()", "layer_norm int", "GELU approximate", "cross_entropy uint8 (N,C,d)",
        "mse_loss shapes"])
def test_bad_arguments_raise_as_torch(program, kind, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raises_as_torch(program, kind, device)


@needs_torch
def test_loss_warns_before_refusing_a_target_that_does_not_broadcast(device):
    for M in (torch, mg):
        with pytest.warns(UserWarning, match="target size"), pytest.raises(RuntimeError):
            M.nn.functional.l1_loss(M.ones(3, 4), M.ones(3, 3))


@needs_torch
def test_cross_entropy_targets_as_torch(device):
    rng = rng_for("ce targets")
    x, tx = both(rng.standard_normal((4, 5)), device)
    # uint8 class indices for an (N, C) input
    t8 = np.array([0, 4, 2, 1], dtype=np.uint8)
    ours = F.cross_entropy(x, mg.tensor(t8, device=device))
    theirs = torch.nn.functional.cross_entropy(tx, torch.tensor(t8))
    assert_close(ours, theirs)
    # a (C,) input with a one-element target, forward as PyTorch's (a 0-d loss)
    for reduction in ("mean", "sum", "none"):
        ours = F.cross_entropy(x[0], mg.tensor([3], device=device), reduction=reduction)
        theirs = torch.nn.functional.cross_entropy(tx[0], torch.tensor([3]), reduction=reduction)
        assert ours.shape == tuple(theirs.shape) == ()
        assert_close(ours, theirs)


@needs_torch
@pytest.mark.parametrize("inplace", [False, True])
def test_dropout_everything_of_an_integer_tensor_as_torch(inplace, device):
    ours = F.dropout(mg.tensor([1, 2, 3], device=device), 1.0, inplace=inplace)
    theirs = torch.nn.functional.dropout(torch.tensor([1, 2, 3]), 1.0, inplace=inplace)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    with pytest.raises(RuntimeError):
        F.dropout(mg.tensor([1, 2, 3], device=device), 0.5)
