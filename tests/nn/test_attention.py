"""nn.MultiheadAttention and F.scaled_dot_product_attention: gradcheck in float64 with every
kind of mask, the math (weights sum to one, are exactly zero where masked, fully masked rows
give zeros, the causal mask leaks nothing), dropout on the weights, torch's initialisation,
and parity with torch.nn.MultiheadAttention (weights copied in) and
torch.nn.functional.scaled_dot_product_attention."""
import math
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd.gradcheck import gradcheck, gradgradcheck
from minigrad.nn import init
from minigrad.nn.attention import MultiheadAttention
from minigrad.nn.positional import RotaryEmbedding
from tests.torch_ref import needs_torch, torch

F64 = mg.float64


def rand(*shape, device, requires_grad=True, scale=1.0):
    return mg.tensor(np.random.standard_normal(shape) * scale, dtype=F64, device=device,
                     requires_grad=requires_grad)


def make_mha(E, H, device, kdim=None, vdim=None, bias=True, dropout=0.0, rotary=None):
    """A float64 MultiheadAttention with random (nonzero) biases, so that they are tested."""
    m = MultiheadAttention(E, H, dropout=dropout, bias=bias, kdim=kdim, vdim=vdim,
                           rotary=rotary, device=device, dtype=F64)
    for proj in (m.q_proj, m.k_proj, m.v_proj, m.out_proj):
        if proj.bias is not None:
            init.normal_(proj.bias, 0.0, 0.5)
    return m


# --- masks: numpy arrays, turned into minigrad kwargs (ours) and torch kwargs -------------------

def bool_mask(*shape):
    """True (may not attend) at random, but key 0 is always allowed, so no row is empty."""
    m = np.random.rand(*shape) < 0.4
    m[..., 0] = False
    return m


def padding(B, S):
    """The last two keys of batch element 1 are padding."""
    m = np.zeros((B, S), dtype=bool)
    m[1, -2:] = True
    return m


def causal(T, S):
    return np.triu(np.ones((T, S), dtype=bool), 1)


MASK_CASES = [
    # name, masks(B, H, T, S)
    ("none", lambda B, H, T, S: {}),
    ("bool attn_mask (T, S)", lambda B, H, T, S: {"attn_mask": bool_mask(T, S)}),
    ("float attn_mask (T, S)", lambda B, H, T, S: {"attn_mask": np.random.randn(T, S)}),
    ("bool attn_mask (B*H, T, S)", lambda B, H, T, S: {"attn_mask": bool_mask(B * H, T, S)}),
    ("float attn_mask (B*H, T, S)",
     lambda B, H, T, S: {"attn_mask": np.random.randn(B * H, T, S)}),
    ("bool key_padding_mask", lambda B, H, T, S: {"key_padding_mask": padding(B, S)}),
    ("float key_padding_mask", lambda B, H, T, S: {"key_padding_mask": np.random.randn(B, S)}),
    ("is_causal", lambda B, H, T, S: {"is_causal": True}),
    ("bool attn_mask + key_padding_mask + is_causal",
     lambda B, H, T, S: {"attn_mask": bool_mask(T, S), "key_padding_mask": padding(B, S),
                         "is_causal": True}),
    ("float attn_mask + bool key_padding_mask",
     lambda B, H, T, S: {"attn_mask": np.random.randn(T, S), "key_padding_mask": padding(B, S)}),
]
MASK_IDS = [name for name, _ in MASK_CASES]


def ours(masks, device):
    return {k: mg.tensor(v, device=device) if isinstance(v, np.ndarray) else v
            for k, v in masks.items()}


def theirs(masks, T, S):
    """torch's MHA wants an explicit attn_mask with is_causal: merge the causal mask into it."""
    attn, kpm = masks.get("attn_mask"), masks.get("key_padding_mask")
    if masks.get("is_causal"):
        future = causal(T, S)
        if attn is None:
            attn = future
        elif attn.dtype == bool:
            attn = attn | future
        else:
            attn = attn + np.where(future, -np.inf, 0.0)
    return {"attn_mask": None if attn is None else torch.tensor(attn),
            "key_padding_mask": None if kpm is None else torch.tensor(kpm)}


# --- gradcheck ----------------------------------------------------------------------------------

GRAD_CASES = [
    # name, (T, S, kdim, vdim), masks(B, H, T, S), rotary
    *[(name, (3, 3, None, None), masks, False) for name, masks in MASK_CASES],
    ("cross-attention, kdim and vdim", (3, 4, 5, 2), lambda B, H, T, S: {}, False),
    ("cross-attention with key_padding_mask", (2, 4, 5, 3),
     lambda B, H, T, S: {"key_padding_mask": padding(B, S)}, False),
    ("fully masked row", (3, 3, None, None),  # zeros without the weights (NaN with them)
     lambda B, H, T, S: {"attn_mask": np.array([[0, 0, 1], [1, 1, 1], [0, 1, 1]], bool),
                         "need_weights": False},
     False),
    ("rotary", (3, 3, None, None), lambda B, H, T, S: {}, True),
    ("rotary + is_causal", (3, 3, None, None), lambda B, H, T, S: {"is_causal": True}, True),
]


@pytest.mark.parametrize("name, sizes, masks, rotary", GRAD_CASES,
                         ids=[c[0] for c in GRAD_CASES])
def test_gradcheck(name, sizes, masks, rotary, device):
    B, E, H = 2, 4, 2
    T, S, kdim, vdim = sizes
    m = make_mha(E, H, device, kdim, vdim, rotary=RotaryEmbedding(E // H) if rotary else None)
    q = rand(B, T, E, device=device)
    k = rand(B, S, kdim or E, device=device)
    v = rand(B, S, vdim or E, device=device)
    kwargs = ours(masks(B, H, T, S), device)
    assert gradcheck(lambda q, k, v: m(q, k, v, **kwargs), (q, k, v))


def test_gradcheck_through_a_float_mask(device):
    """A float attn_mask is added to the scores, so it gets their gradient (as a learned
    relative-position bias would)."""
    m = make_mha(4, 2, device)
    q, k, v = (rand(1, 3, 4, device=device) for _ in range(3))
    mask = rand(3, 3, device=device)
    assert gradcheck(lambda q, k, v, mask: m(q, k, v, attn_mask=mask), (q, k, v, mask))


def test_second_order(device):
    m = make_mha(4, 2, device)
    q, k, v = (rand(1, 2, 4, device=device) for _ in range(3))
    mask = mg.tensor([[False, True], [False, False]], device=device)
    assert gradgradcheck(lambda q, k, v: m(q, k, v, attn_mask=mask)[0], (q, k, v))


# --- the math -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, masks", MASK_CASES, ids=MASK_IDS)
def test_weights_sum_to_one_and_are_zero_where_masked(name, masks, device):
    B, H, T, S, E = 2, 2, 4, 5, 8
    m = make_mha(E, H, device)
    q, kv = rand(B, T, E, device=device), rand(B, S, E, device=device)
    arrays = masks(B, H, T, S)
    _, w = m(q, kv, kv, average_attn_weights=False, **ours(arrays, device))
    w = w.numpy()                                                            # (B, H, T, S)
    np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-12)
    blocked = np.zeros((B, H, T, S), dtype=bool)
    if arrays.get("attn_mask") is not None and arrays["attn_mask"].dtype == bool:
        blocked |= arrays["attn_mask"].reshape(-1, H, T, S) if arrays["attn_mask"].ndim == 3 \
            else arrays["attn_mask"]
    kpm = arrays.get("key_padding_mask")
    if kpm is not None and kpm.dtype == bool:
        blocked |= kpm[:, None, None, :]
    if arrays.get("is_causal"):
        blocked |= causal(T, S)
    assert (w[blocked] == 0.0).all()
    assert (w[~blocked] > 0.0).all()


def test_averaged_weights_are_the_mean_over_heads(device):
    m = make_mha(8, 4, device)
    x = rand(2, 3, 8, device=device)
    _, per_head = m(x, x, x, average_attn_weights=False)
    _, mean = m(x, x, x)
    assert per_head.shape == (2, 4, 3, 3) and mean.shape == (2, 3, 3)
    np.testing.assert_allclose(mean.numpy(), per_head.numpy().mean(1), rtol=1e-12)


@pytest.mark.parametrize("mask_kind", ["attn_mask", "key_padding_mask", "float attn_mask"])
def test_fully_masked_row_gives_zeros_and_no_nan_gradient_without_the_weights(
        mask_kind, device):
    """Without the weights, as F.scaled_dot_product_attention; with them, NaN (PyTorch's
    MultiheadAttention computes them with a plain softmax)."""
    B, T, E = 2, 3, 4
    m = make_mha(E, 2, device, bias=False)
    q, k, v = (rand(B, T, E, device=device) for _ in range(3))
    if mask_kind == "attn_mask":      # query 1 may attend nothing
        kwargs = {"attn_mask": mg.tensor([[0, 0, 1], [1, 1, 1], [0, 1, 0]], dtype=mg.bool,
                                         device=device)}
        dead = (slice(None), 1)
    elif mask_kind == "key_padding_mask":   # batch element 1 is all padding
        kwargs = {"key_padding_mask": mg.tensor([[0, 0, 1], [1, 1, 1]], dtype=mg.bool,
                                                device=device)}
        dead = (1, slice(None))
    else:
        rows = np.zeros((T, T))
        rows[1] = -np.inf
        kwargs = {"attn_mask": mg.tensor(rows, device=device)}
        dead = (slice(None), 1)
    out, w = m(q, k, v, need_weights=False, **kwargs)
    assert w is None and (out.numpy()[dead] == 0.0).all() and np.isfinite(out.numpy()).all()
    out.sum().backward()
    for t in [q, k, v, *m.parameters()]:
        assert np.isfinite(t.grad.numpy()).all()
    assert (q.grad.numpy()[dead] == 0.0).all()
    out, w = m(q, k, v, **kwargs)
    assert np.isnan(out.numpy()[dead]).all() and np.isnan(w.numpy()[dead]).all()
    alive = np.ones(w.shape, bool)
    alive[dead] = False
    assert np.isfinite(w.numpy()[alive]).all()


def test_causal_mask_leaks_nothing(device):
    B, T, E = 2, 6, 8
    m = make_mha(E, 2, device)
    x = rand(B, T, E, device=device)
    out, _ = m(x, x, x, is_causal=True)
    for j in range(1, T):             # change token j: outputs before j must not move
        changed = x.detach().numpy().copy()
        changed[:, j] += np.random.randn(B, E) * 10
        y = mg.tensor(changed, device=device)
        out2, _ = m(y, y, y, is_causal=True)
        np.testing.assert_array_equal(out2.numpy()[:, :j], out.numpy()[:, :j])
        assert not np.allclose(out2.numpy()[:, j:], out.numpy()[:, j:])
    # and no gradient flows from an output to a later input
    out[:, 2].sum().backward()
    assert (x.grad.numpy()[:, 3:] == 0.0).all() and (x.grad.numpy()[:, :3] != 0.0).any()


def test_rotary_is_applied_to_each_heads_queries_and_keys(device):
    """MHA(rotary) = out_proj(SDPA(rope(q heads), rope(k heads), v heads))."""
    B, T, E, H = 2, 5, 8, 2
    rope = RotaryEmbedding(E // H)
    m = make_mha(E, H, device, rotary=rope)
    x = rand(B, T, E, device=device)
    out, _ = m(x, x, x, is_causal=True)

    def heads(t):
        return t.reshape(B, T, H, E // H).transpose(1, 2)
    q, k, v = heads(m.q_proj(x)), heads(m.k_proj(x)), heads(m.v_proj(x))
    o = F.scaled_dot_product_attention(rope(q), rope(k), v, is_causal=True)
    expected = m.out_proj(o.transpose(1, 2).reshape(B, T, E))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)
    plain = make_mha(E, H, device)
    plain.load_state_dict(m.state_dict())   # the rotary embedding adds no state
    assert not np.allclose(plain(x, x, x, is_causal=True)[0].numpy(), out.numpy())


def test_dropout_drops_the_returned_weights_in_training_only(device):
    B, T, E, H, p = 2, 6, 8, 2, 0.5
    m = make_mha(E, H, device, dropout=p)
    x = rand(B, T, E, device=device)
    m.eval()
    out_eval, w_eval = m(x, x, x, average_attn_weights=False)
    out_again, _ = m(x, x, x)
    np.testing.assert_array_equal(out_eval.numpy(), out_again.numpy())
    m.train()
    out, w = m(x, x, x, average_attn_weights=False)
    kept = w.numpy() != 0.0
    assert 0.2 < kept.mean() < 0.8
    # as torch: the weights returned are the dropped-out ones, scaled by 1 / (1 - p) ...
    np.testing.assert_allclose(w.numpy()[kept], w_eval.numpy()[kept] / (1 - p), rtol=1e-12)
    # ... and they are the ones the output is made of
    v = m.v_proj(x).reshape(B, T, H, E // H).transpose(1, 2)
    expected = m.out_proj((w @ v).transpose(1, 2).reshape(B, T, E))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-12, atol=1e-12)


@needs_torch
def test_torch_also_returns_the_dropped_out_weights():
    torch.manual_seed(0)
    t = torch.nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True, dtype=torch.float64)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    t.eval()
    _, w_eval = t(x, x, x, average_attn_weights=False)
    t.train()
    _, w = t(x, x, x, average_attn_weights=False)
    kept = w != 0
    assert 0.2 < kept.double().mean() < 0.8
    torch.testing.assert_close(w[kept], w_eval[kept] * 2)


def test_need_weights_false_and_the_state_dict(device):
    m = make_mha(8, 2, device, kdim=3, vdim=5)
    q, kv = rand(2, 4, 8, device=device), rand(2, 7, 3, device=device)
    out, w = m(q, kv, rand(2, 7, 5, device=device), need_weights=False)
    assert out.shape == (2, 4, 8) and w is None
    assert list(m.state_dict()) == [f"{p}.{n}" for p in ("q_proj", "k_proj", "v_proj", "out_proj")
                                    for n in ("weight", "bias")]
    assert m.k_proj.weight.shape == (8, 3) and m.v_proj.weight.shape == (8, 5)
    assert list(MultiheadAttention(8, 2, bias=False, device=device).state_dict()) == [
        "q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight"]


@pytest.mark.parametrize("make, message", [
    (lambda d: MultiheadAttention(6, 4), "divisible"),
    (lambda d: MultiheadAttention(4, 2, device=d)(*[mg.zeros(1, 3, 4, device=d)] * 3,
                                                  attn_mask=mg.zeros(3, 2, device=d)),
     "attn_mask"),
    (lambda d: MultiheadAttention(4, 2, device=d)(*[mg.zeros(2, 3, 4, device=d)] * 3,
                                                  attn_mask=mg.zeros(2, 3, 3, device=d)),
     r"\(4, 3, 3\)"),
    (lambda d: MultiheadAttention(4, 2, device=d)(*[mg.zeros(2, 3, 4, device=d)] * 3,
                                                  key_padding_mask=mg.zeros(3, 2, device=d)),
     "key_padding_mask"),
], ids=["embed_dim % num_heads", "attn_mask (T, S)", "attn_mask (B*H, T, S)", "kpm"])
def test_errors(make, message, device):
    with pytest.raises((ValueError, mg.ShapeError), match=message):
        make(device)


def test_initialisation_follows_torch(device):
    E = 64
    m = MultiheadAttention(E, 4, device=device)
    packed = math.sqrt(6.0 / (E + 3 * E))   # xavier on torch's (3E, E) in_proj_weight
    for proj in (m.q_proj, m.k_proj, m.v_proj):
        w = np.abs(proj.weight.numpy())
        assert w.max() <= packed and w.max() > 0.95 * packed
        assert (proj.bias.numpy() == 0).all()
    assert np.abs(m.out_proj.weight.numpy()).max() <= 1 / math.sqrt(E)
    assert (m.out_proj.bias.numpy() == 0).all()
    cross = MultiheadAttention(E, 4, kdim=16, vdim=32, device=device)
    for proj, fan_in in ((cross.q_proj, E), (cross.k_proj, 16), (cross.v_proj, 32)):
        bound = math.sqrt(6.0 / (fan_in + E))  # separate matrices: xavier on each
        w = np.abs(proj.weight.numpy())
        assert w.max() <= bound and w.max() > 0.9 * bound


@needs_torch
def test_initialisation_bounds_match_torchs(device):
    torch.manual_seed(0)
    t = torch.nn.MultiheadAttention(64, 4, batch_first=True)
    m = MultiheadAttention(64, 4, device=device)
    ours_max = max(np.abs(p.weight.numpy()).max() for p in (m.q_proj, m.k_proj, m.v_proj))
    assert abs(ours_max - t.in_proj_weight.abs().max().item()) < 0.01
    t = torch.nn.MultiheadAttention(64, 4, kdim=16, vdim=32, batch_first=True)
    m = MultiheadAttention(64, 4, kdim=16, vdim=32, device=device)
    for ours_proj, name in ((m.k_proj, "k_proj_weight"), (m.v_proj, "v_proj_weight")):
        assert abs(np.abs(ours_proj.weight.numpy()).max()
                   - getattr(t, name).abs().max().item()) < 0.02


# --- parity with torch.nn.MultiheadAttention ----------------------------------------------------

def torch_mha_like(m):
    """torch.nn.MultiheadAttention(batch_first=True) holding m's weights."""
    E = m.embed_dim
    bias = m.q_proj.bias is not None
    t = torch.nn.MultiheadAttention(E, m.num_heads, bias=bias, kdim=m.kdim, vdim=m.vdim,
                                    batch_first=True, dtype=torch.float64)
    w = {name: torch.tensor(p.numpy()) for name, p in m.named_parameters()}
    qkv = [w[f"{p}_proj.weight"] for p in "qkv"]
    if t._qkv_same_embed_dim:
        sd = {"in_proj_weight": torch.cat(qkv)}
    else:
        sd = dict(zip(["q_proj_weight", "k_proj_weight", "v_proj_weight"], qkv))
    sd["out_proj.weight"] = w["out_proj.weight"]
    if bias:
        sd["in_proj_bias"] = torch.cat([w[f"{p}_proj.bias"] for p in "qkv"])
        sd["out_proj.bias"] = w["out_proj.bias"]
    t.load_state_dict(sd)
    return t


def torch_param_grads(t, E):
    """t's parameter gradients under minigrad's names."""
    grads = {"out_proj.weight": t.out_proj.weight.grad}
    if t._qkv_same_embed_dim:
        grads.update(zip(["q_proj.weight", "k_proj.weight", "v_proj.weight"],
                         t.in_proj_weight.grad.split(E)))
    else:
        grads.update({f"{p}_proj.weight": getattr(t, f"{p}_proj_weight").grad for p in "qkv"})
    if t.in_proj_bias is not None:
        grads.update(zip(["q_proj.bias", "k_proj.bias", "v_proj.bias"],
                         t.in_proj_bias.grad.split(E)))
        grads["out_proj.bias"] = t.out_proj.bias.grad
    return grads


KINDS = {
    # name: (T, S, kdim, vdim, bias)
    "self": (4, 4, None, None, True),
    "cross kdim vdim": (3, 5, 6, 2, True),
    "no bias": (4, 4, None, None, False),
}


@needs_torch
@pytest.mark.parametrize("average", [True, False], ids=["averaged", "per head"])
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("name, masks", MASK_CASES, ids=MASK_IDS)
def test_parity_with_torch(name, masks, kind, average, device):
    B, E, H = 2, 8, 2
    T, S, kdim, vdim, bias = KINDS[kind]
    m = make_mha(E, H, device, kdim, vdim, bias=bias)
    t = torch_mha_like(m)
    q, k, v = rand(B, T, E, device=device), rand(B, S, kdim or E, device=device), \
        rand(B, S, vdim or E, device=device)
    tq, tk, tv = (torch.tensor(x.numpy(), requires_grad=True) for x in (q, k, v))
    arrays = masks(B, H, T, S)
    out, w = m(q, k, v, average_attn_weights=average, **ours(arrays, device))
    with warnings.catch_warnings():   # torch deprecates a bool and a float mask together
        warnings.simplefilter("ignore")
        t_out, t_w = t(tq, tk, tv, average_attn_weights=average, **theirs(arrays, T, S))
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.numpy(), t_w.detach().numpy(), rtol=1e-10, atol=1e-12)

    r_out, r_w = np.random.randn(*out.shape), np.random.randn(*w.shape)
    ((out * mg.tensor(r_out, device=device)).sum() + (w * mg.tensor(r_w, device=device)).sum()
     ).backward()
    ((t_out * torch.tensor(r_out)).sum() + (t_w * torch.tensor(r_w)).sum()).backward()
    for x, tx in ((q, tq), (k, tk), (v, tv)):
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    t_grads = torch_param_grads(t, E)
    for pname, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), t_grads[pname].numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=pname)


@needs_torch
@pytest.mark.parametrize("mask_kind", ["attn_mask", "key_padding_mask"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_parity_with_torch(mask_kind, need_weights, device):
    """torch's MHA gives NaN for a fully masked row when it returns weights, and (through its
    SDPA) zeros before out_proj when it does not: so do we, gradients too."""
    B, T, E, H = 2, 3, 8, 2
    m = make_mha(E, H, device)
    t = torch_mha_like(m)
    q, k, v = (rand(B, T, E, device=device) for _ in range(3))
    tq, tk, tv = (torch.tensor(x.numpy(), requires_grad=True) for x in (q, k, v))
    mask = np.array([[0, 0, 1], [1, 1, 1], [0, 1, 0]], bool) if mask_kind == "attn_mask" \
        else np.array([[0, 0, 1], [1, 1, 1]], bool)
    out, w = m(q, k, v, need_weights=need_weights,
               **{mask_kind: mg.tensor(mask, device=device)})
    t_out, t_w = t(tq, tk, tv, need_weights=need_weights, **{mask_kind: torch.tensor(mask)})
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert np.isnan(out.numpy()).any() == need_weights
    if need_weights:
        np.testing.assert_allclose(w.numpy(), t_w.detach().numpy(), rtol=1e-10, atol=1e-12)
    r = np.random.randn(*out.shape)
    (out * mg.tensor(r, device=device)).sum().backward()
    (t_out * torch.tensor(r)).sum().backward()
    for x, tx in ((q, tq), (k, tk), (v, tv)):
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def torch_rope(x, base=10000):
    """GPT-NeoX rotary embedding written independently in torch: feature i pairs with
    i + D/2, turned by pos * base^(-2i/D)."""
    T, D = x.shape[-2], x.shape[-1]
    inv = 1.0 / base ** (torch.arange(0, D, 2, dtype=torch.float64) / D)
    angles = torch.outer(torch.arange(T, dtype=torch.float64), inv)         # (T, D/2)
    x1, x2 = x[..., :D // 2], x[..., D // 2:]
    cos, sin = angles.cos(), angles.sin()
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


@needs_torch
def test_rotary_parity_with_torch(device):
    B, T, E, H = 2, 5, 8, 2
    D = E // H
    m = make_mha(E, H, device, rotary=RotaryEmbedding(D))
    t = torch_mha_like(m)
    x = rand(B, T, E, device=device)
    tx = torch.tensor(x.numpy(), requires_grad=True)
    out, _ = m(x, x, x, is_causal=True)

    Wq, Wk, Wv = t.in_proj_weight.split(E)
    bq, bk, bv = t.in_proj_bias.split(E)

    def heads(y):
        return y.reshape(B, T, H, D).transpose(1, 2)
    q = torch_rope(heads(torch.nn.functional.linear(tx, Wq, bq)))
    k = torch_rope(heads(torch.nn.functional.linear(tx, Wk, bk)))
    v = heads(torch.nn.functional.linear(tx, Wv, bv))
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    t_out = t.out_proj(o.transpose(1, 2).reshape(B, T, E))
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    out.sum().backward()
    t_out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


# --- F.scaled_dot_product_attention against torch -----------------------------------------------

SDPA_CASES = [
    # name, (q shape, k shape), kwargs(L, S) as numpy masks
    ("no mask", ((2, 2, 3, 4), (2, 2, 5, 4)), lambda L, S: {}),
    ("bool mask, True = allowed", ((2, 2, 3, 4), (2, 2, 5, 4)),
     lambda L, S: {"attn_mask": ~bool_mask(L, S)}),
    ("bool mask per batch and head", ((2, 2, 3, 4), (2, 2, 5, 4)),
     lambda L, S: {"attn_mask": ~bool_mask(2, 2, L, S)}),
    ("float mask", ((2, 2, 3, 4), (2, 2, 5, 4)),
     lambda L, S: {"attn_mask": np.random.randn(L, S)}),
    ("is_causal, L == S", ((2, 2, 4, 4), (2, 2, 4, 4)), lambda L, S: {"is_causal": True}),
    ("is_causal, L < S", ((2, 2, 3, 4), (2, 2, 5, 4)), lambda L, S: {"is_causal": True}),
    ("scale", ((2, 2, 3, 4), (2, 2, 5, 4)), lambda L, S: {"scale": 0.3}),
    ("3-d inputs", ((2, 3, 4), (2, 5, 4)), lambda L, S: {"attn_mask": ~bool_mask(L, S)}),
    ("fully masked row, bool", ((2, 2, 3, 4), (2, 2, 5, 4)),
     lambda L, S: {"attn_mask": np.array([[1, 1, 0, 0, 1], [0] * 5, [1] * 5], bool)}),
    ("fully masked row, float -inf", ((2, 2, 3, 4), (2, 2, 5, 4)),
     lambda L, S: {"attn_mask": np.where(np.arange(L)[:, None] == 1, -np.inf,
                                         np.random.randn(L, S))}),
]


@needs_torch
@pytest.mark.parametrize("name, shapes, kwargs", SDPA_CASES, ids=[c[0] for c in SDPA_CASES])
def test_sdpa_parity_with_torch(name, shapes, kwargs, device):
    q_shape, k_shape = shapes
    q, k, v = rand(*q_shape, device=device), rand(*k_shape, device=device), \
        rand(*k_shape, device=device)
    tq, tk, tv = (torch.tensor(x.numpy(), requires_grad=True) for x in (q, k, v))
    args = kwargs(q_shape[-2], k_shape[-2])
    out = F.scaled_dot_product_attention(q, k, v, **ours(args, device))
    t_args = {n: torch.tensor(a) if isinstance(a, np.ndarray) else a for n, a in args.items()}
    t_out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **t_args)
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-10, atol=1e-12)
    r = np.random.randn(*out.shape)
    (out * mg.tensor(r, device=device)).sum().backward()
    (t_out * torch.tensor(r)).sum().backward()
    for x, tx in ((q, tq), (k, tk), (v, tv)):
        assert np.isfinite(x.grad.numpy()).all()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.5}],
                         ids=["plain", "is_causal", "scale"])
def test_sdpa_gradcheck(kwargs, device):
    q, k, v = (rand(1, 2, 3, 2, device=device) for _ in range(3))
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kwargs),
                     (q, k, v))


@needs_torch
def test_float32_parity_with_torch_and_masks_of_another_dtype(device):
    """In the default float32, a float64 float mask does not promote the result."""
    B, T, E, H = 2, 4, 8, 2
    m = MultiheadAttention(E, H, device=device)
    t = torch_mha_like(m).float()
    x = mg.randn(B, T, E, device=device)
    mask = np.random.randn(T, T)
    out, w = m(x, x, x, attn_mask=mg.tensor(mask, device=device))
    assert out.dtype == mg.float32 and w.dtype == mg.float32
    tx = torch.tensor(x.numpy())
    t_out, t_w = t(tx, tx, tx, attn_mask=torch.tensor(mask, dtype=torch.float32))
    np.testing.assert_allclose(out.numpy(), t_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.numpy(), t_w.detach().numpy(), rtol=1e-5, atol=1e-6)
