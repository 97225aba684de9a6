"""Edge cases of nn against PyTorch: masks of a dtype that is neither bool nor floating,
embedding ids and padding_idx out of range, attention without queries, keys or batch,
unbatched MultiheadAttention, the arguments of cross_entropy and mse_loss, and their
neighbours (empty softmax, layer_norm's weight, dropout's p, Linear without inputs).

Where PyTorch refuses a case, ours raises an exception of PyTorch's type (checked by running
PyTorch) with one line that names the op and the argument; where PyTorch returns a result,
ours is compared with it, values and gradients."""
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.fused.attention import Attention, blocks
from minigrad.nn.attention import MultiheadAttention, SDPBackend, sdpa_kernel
from tests.nn.test_attention import make_mha, torch_mha_like, torch_param_grads
from tests.torch_ref import needs_torch, older_torch_reason, torch, torch_older_than

F64 = mg.float64
BACKENDS = pytest.mark.parametrize("backend", [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH],
                                   ids=["tiled", "math"])


def torch_error(fn):
    """The type of the exception PyTorch raises in ``fn`` (the test fails if it raises none)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any type: it is what we compare with
        return type(e)
    pytest.fail("PyTorch raised no exception")


def assert_raises_like_torch(ours, theirs, *words):
    """``ours`` raises an exception of the type ``theirs`` raises in PyTorch, with a one-line
    message that contains every one of ``words``; returns the message."""
    kind = torch_error(theirs)
    with pytest.raises(kind) as info:
        ours()
        mg.backend.raise_pending()  # (on a GPU an error of values comes at the next read)
    message = str(info.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)
    return message


def tensors(arrays, device, requires_grad=True):
    """minigrad and torch tensors with the values of the numpy ``arrays``."""
    ours = [mg.tensor(a, device=device, requires_grad=requires_grad) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=requires_grad) for a in arrays]
    return ours, theirs


def assert_close(ours, theirs, what="", rtol=1e-10, atol=1e-12):
    theirs = theirs.detach().numpy() if hasattr(theirs, "detach") else theirs
    assert ours.shape == tuple(theirs.shape), what
    np.testing.assert_allclose(ours.numpy(), theirs, rtol=rtol, atol=atol, err_msg=what)


def backward_with_same_weights(ours, theirs, device, seed=0):
    """Backpropagate sum(r * out) for the same random r through each pair of outputs."""
    rng = np.random.default_rng(seed)
    total, t_total = 0.0, 0.0
    for o, t in zip(ours, theirs):
        if o is None:
            continue
        r = rng.standard_normal(o.shape)
        total = total + (o * mg.tensor(r, dtype=o.dtype, device=device)).sum()
        t_total = t_total + (t * torch.tensor(r, dtype=t.dtype)).sum()
    total.backward()
    t_total.backward()


# --- masks of a dtype that is neither bool nor floating -----------------------------------------

INT_DTYPES = [np.int64, np.int32, np.uint8, np.int8]


@needs_torch
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["attn_mask", "key_padding_mask"])
def test_mha_refuses_integer_masks(name, dtype, need_weights, device):
    B, T, E = 2, 3, 4
    m = MultiheadAttention(E, 2, device=device)
    t = torch.nn.MultiheadAttention(E, 2, batch_first=True)
    shape = (T, T) if name == "attn_mask" else (B, T)
    mask = np.zeros(shape, dtype=dtype)
    mask[..., -1] = 1
    x = np.random.randn(B, T, E).astype(np.float32)
    mx, tx = mg.tensor(x, device=device), torch.tensor(x)
    assert_raises_like_torch(
        lambda: m(mx, mx, mx, need_weights=need_weights,
                  **{name: mg.tensor(mask, device=device)}),
        lambda: t(tx, tx, tx, need_weights=need_weights, **{name: torch.tensor(mask)}),
        "MultiheadAttention", name, np.dtype(dtype).name)


@needs_torch
@BACKENDS
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_sdpa_refuses_integer_masks(dtype, backend, device):
    q = np.random.randn(1, 2, 3, 4)
    (mq,), (tq,) = tensors([q], device, requires_grad=False)
    mask = np.ones((3, 3), dtype=dtype)
    with sdpa_kernel(backend):
        assert_raises_like_torch(
            lambda: F.scaled_dot_product_attention(mq, mq, mq,
                                                   attn_mask=mg.tensor(mask, device=device)),
            lambda: torch.nn.functional.scaled_dot_product_attention(
                tq, tq, tq, attn_mask=torch.tensor(mask)),
            "scaled_dot_product_attention", "attn_mask", np.dtype(dtype).name)


@pytest.mark.parametrize("dtype", [np.int64, np.bool_], ids=["int64", "bool"])
def test_attend_and_the_primitive_take_only_float_masks(dtype, device):
    """attend's mask is added to the scores: a bool or integer one would be added as 0 / 1."""
    q = mg.randn(1, 2, 3, 4, device=device)
    mask = mg.tensor(np.zeros((3, 3), dtype=dtype), device=device)
    with pytest.raises(TypeError, match=f"attend: mask must be a floating point .*{mask.dtype}"):
        F.attend(q, q, q, mask)
    with pytest.raises(TypeError, match="scaled_dot_product_attention: the mask must be float"):
        Attention.apply(q, q, q, mask, scale=0.5, causal=None, dropout_p=0.0, block=(3, 3))


# masks of two kinds together (torch deprecates mixing bool and float, but computes them)
MIXED = {
    "bool attn + float kpm": lambda T, S: (np.random.rand(T, S) < 0.3,
                                           np.random.randn(2, S)),
    "float attn + float kpm": lambda T, S: (np.random.randn(T, S), np.random.randn(2, S)),
    "bool attn + bool kpm": lambda T, S: (np.random.rand(T, S) < 0.3,
                                          np.random.rand(2, S) < 0.3),
    "float (B*H, T, S) + bool kpm": lambda T, S: (np.random.randn(4, T, S),
                                                  np.random.rand(2, S) < 0.3),
}


@needs_torch
@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("kind", list(MIXED))
def test_mixed_mask_kinds_match_torch(kind, average, device):
    """Key 0 is never masked, so every row has a key and torch gives no NaN."""
    B, T, S, E = 2, 3, 4, 4
    attn, kpm = MIXED[kind](T, S)
    if attn.dtype == bool:
        attn[..., 0] = False
    if kpm.dtype == bool:
        kpm[:, 0] = False
    m = make_mha(E, 2, device)
    t = torch_mha_like(m)
    (q, k), (tq, tk) = tensors([np.random.randn(B, T, E), np.random.randn(B, S, E)], device)
    out = m(q, k, k, attn_mask=mg.tensor(attn, device=device),
            key_padding_mask=mg.tensor(kpm, device=device), average_attn_weights=average)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = t(tq, tk, tk, attn_mask=torch.tensor(attn), key_padding_mask=torch.tensor(kpm),
                average_attn_weights=average)
    for o, r, what in zip(out, ref, ("output", "weights")):
        assert_close(o, r, what)
    backward_with_same_weights(out, ref, device)
    assert_close(q.grad, tq.grad, "dq", rtol=1e-9)
    assert_close(k.grad, tk.grad, "dk", rtol=1e-9)


@needs_torch
@pytest.mark.parametrize("kinds", [("bool", "float"), ("float", "bool"), ("bool", "bool")])
def test_fully_masked_rows_with_mixed_masks_match_torch_without_weights(kinds, device):
    """Query 1 sees no key through attn_mask; batch row 1 has every key padded. Without
    weights torch gives zeros there, as we do (with weights torch gives NaN, we zeros)."""
    B, T, E = 2, 3, 4
    attn = np.array([[0, 0, 1], [1, 1, 1], [0, 1, 0]], bool)
    kpm = np.array([[0, 0, 1], [1, 1, 1]], bool)
    as_kind = {"bool": lambda a: a, "float": lambda a: np.where(a, -np.inf, 0.0)}
    attn, kpm = as_kind[kinds[0]](attn), as_kind[kinds[1]](kpm)
    m = make_mha(E, 2, device)
    t = torch_mha_like(m)
    (x,), (tx,) = tensors([np.random.randn(B, T, E)], device)
    out, _ = m(x, x, x, attn_mask=mg.tensor(attn, device=device),
               key_padding_mask=mg.tensor(kpm, device=device), need_weights=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref, _ = t(tx, tx, tx, attn_mask=torch.tensor(attn),
                   key_padding_mask=torch.tensor(kpm), need_weights=False)
    assert_close(out, ref)
    backward_with_same_weights([out], [ref], device)
    assert_close(x.grad, tx.grad, "dx", rtol=1e-9)


@needs_torch
@BACKENDS
def test_sdpa_float_mask_of_another_float_dtype_is_cast_to_the_query_dtype(backend, device):
    """(PyTorch refuses a float64 mask with float32 queries; we add it in float32.)"""
    q = np.random.randn(1, 2, 3, 4).astype(np.float32)
    mask = np.random.randn(3, 3)
    mq = mg.tensor(q, device=device)
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(mq, mq, mq, attn_mask=mg.tensor(mask, device=device))
    tq = torch.tensor(q)
    ref = torch.nn.functional.scaled_dot_product_attention(
        tq, tq, tq, attn_mask=torch.tensor(mask, dtype=torch.float32))
    assert out.dtype == mg.float32
    assert_close(out, ref, rtol=1e-5, atol=1e-6)


# --- Embedding ids and padding_idx --------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("bad", [-100, -1, 10, 11])
@pytest.mark.parametrize("entry", ["module", "functional"])
def test_embedding_ids_out_of_range(entry, bad, device):
    emb, t = nn.Embedding(10, 4).to(device), torch.nn.Embedding(10, 4)
    ids = np.array([[1, 2], [bad, 0]])
    if entry == "module":
        ours, theirs = (lambda: emb(mg.tensor(ids, device=device))), \
            (lambda: t(torch.tensor(ids)))
    else:
        ours = lambda: F.embedding(mg.tensor(ids, device=device), emb.weight)  # noqa: E731
        theirs = lambda: torch.nn.functional.embedding(torch.tensor(ids), t.weight)  # noqa: E731
    assert_raises_like_torch(ours, theirs, "embedding", f"index {bad}", "10 embeddings")


@needs_torch
@pytest.mark.parametrize("ids", [np.array([0, 9, 3], np.int32), np.array(9), np.zeros((2, 0), int),
                                 np.array([[9, 0], [0, 9]])],
                         ids=["int32", "0-d", "empty", "both ends"])
def test_embedding_ids_in_range_match_torch(ids, device):
    t = torch.nn.Embedding(10, 4, dtype=torch.float64)
    emb = nn.Embedding(10, 4, device=device, dtype=F64)
    emb.load_state_dict({"weight": t.weight.detach().numpy()})
    out, ref = emb(mg.tensor(ids, device=device)), t(torch.tensor(ids))
    assert_close(out, ref)
    backward_with_same_weights([out], [ref], device)
    assert_close(emb.weight.grad, t.weight.grad)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.bool_, np.uint8, np.int16],
                         ids=["float32", "bool", "uint8", "int16"])
def test_embedding_ids_of_other_dtypes_are_refused(dtype, device):
    ids = np.array([1, 0]).astype(dtype)
    emb, t = nn.Embedding(4, 2).to(device), torch.nn.Embedding(4, 2)
    assert_raises_like_torch(lambda: emb(mg.tensor(ids, device=device)),
                             lambda: t(torch.tensor(ids)), "embedding", np.dtype(dtype).name)


@needs_torch
@pytest.mark.parametrize("padding_idx", [-11, -10, -1, 0, 9, 10])
def test_padding_idx_range_and_normalisation_match_torch(padding_idx, device):
    try:
        expected = torch.nn.Embedding(10, 4, padding_idx=padding_idx).padding_idx
    except AssertionError:
        assert_raises_like_torch(lambda: nn.Embedding(10, 4, padding_idx=padding_idx),
                                 lambda: torch.nn.Embedding(10, 4, padding_idx=padding_idx),
                                 "Embedding", f"padding_idx {padding_idx}", "[-10, 10)")
        weight = mg.randn(10, 4, device=device)
        assert_raises_like_torch(
            lambda: F.embedding(mg.tensor([1], device=device), weight, padding_idx),
            lambda: torch.nn.functional.embedding(torch.tensor([1]), torch.randn(10, 4),
                                                  padding_idx),
            "embedding", f"padding_idx {padding_idx}")
        return
    assert nn.Embedding(10, 4, padding_idx=padding_idx, device=device).padding_idx == expected


@needs_torch
def test_functional_embedding_negative_padding_idx_gets_no_gradient_as_torch(device):
    w = np.random.randn(5, 3)
    (mw,), (tw,) = tensors([w], device)
    ids = np.array([4, 1, 4, 0])
    out = F.embedding(mg.tensor(ids, device=device), mw, padding_idx=-1)
    ref = torch.nn.functional.embedding(torch.tensor(ids), tw, padding_idx=-1)
    assert_close(out, ref)
    backward_with_same_weights([out], [ref], device)
    assert_close(mw.grad, tw.grad)


@needs_torch
@pytest.mark.parametrize("shape", [(10,), (10, 2, 2)], ids=["1-D", "3-D"])
def test_embedding_weight_must_be_2d(shape, device):
    assert_raises_like_torch(
        lambda: F.embedding(mg.tensor([1], device=device), mg.randn(*shape, device=device)),
        lambda: torch.nn.functional.embedding(torch.tensor([1]), torch.randn(*shape)),
        "embedding", "weight", str(shape))


# --- attention without queries, keys or batch ---------------------------------------------------

EMPTY = [(2, 0, 3), (2, 3, 0), (0, 3, 3), (2, 0, 0)]
EMPTY_IDS = ["T=0", "S=0", "B=0", "T=S=0"]


def sdpa_masks(T, S):
    return {"none": {}, "is_causal": {"is_causal": True},
            "bool mask": {"attn_mask": np.ones((T, S), bool)},
            "float mask": {"attn_mask": np.random.randn(T, S)}}


@needs_torch
@BACKENDS
@pytest.mark.parametrize("kind", list(sdpa_masks(1, 1)))
@pytest.mark.parametrize("B, T, S", EMPTY, ids=EMPTY_IDS)
def test_sdpa_without_queries_keys_or_batch_matches_torch(B, T, S, kind, backend, device):
    arrays = [np.random.randn(B, 2, T, 4), np.random.randn(B, 2, S, 4),
              np.random.randn(B, 2, S, 3)]
    ours, theirs = tensors(arrays, device)
    kwargs = sdpa_masks(T, S)[kind]
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(*ours, **{
            k: mg.tensor(v, device=device) if isinstance(v, np.ndarray) else v
            for k, v in kwargs.items()})
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, **{
        k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})
    assert_close(out, ref)
    backward_with_same_weights([out], [ref], device)
    for x, tx, what in zip(ours, theirs, "qkv"):
        assert_close(x.grad, tx.grad, "d" + what)


def test_blocks_are_never_empty():
    for T, S in [(0, 5), (5, 0), (0, 0)]:
        bq, bk = blocks(4, T, S)
        assert bq >= 1 and bk >= 1


@needs_torch
@pytest.mark.parametrize("need_weights, average", [(True, True), (True, False), (False, True)],
                         ids=["averaged", "per head", "no weights"])
@pytest.mark.parametrize("B, T, S", EMPTY, ids=EMPTY_IDS)
def test_mha_without_queries_keys_or_batch_matches_torch(B, T, S, need_weights, average, device):
    E = 4
    m = make_mha(E, 2, device)  # random biases: with no key, the output is out_proj's bias
    t = torch_mha_like(m)
    ours, theirs = tensors([np.random.randn(B, T, E), np.random.randn(B, S, E),
                            np.random.randn(B, S, E)], device)
    # (torch fails to reshape a key_padding_mask without keys when it returns no weights)
    kpm = {"key_padding_mask": np.zeros((B, S), bool)} if need_weights else {}
    out = m(*ours, need_weights=need_weights, average_attn_weights=average,
            **{k: mg.tensor(v, device=device) for k, v in kpm.items()})
    ref = t(*theirs, need_weights=need_weights, average_attn_weights=average,
            **{k: torch.tensor(v) for k, v in kpm.items()})
    assert_close(out[0], ref[0], "output")
    assert (out[1] is None) == (ref[1] is None)
    if out[1] is not None:
        assert_close(out[1], ref[1], "weights")
    backward_with_same_weights(out, ref, device)
    for x, tx, what in zip(ours, theirs, ("query", "key", "value")):
        assert_close(x.grad, tx.grad, what)
    t_grads = torch_param_grads(t, E)
    for name, p in m.named_parameters():
        assert_close(p.grad, t_grads[name], name)


# --- unbatched MultiheadAttention ---------------------------------------------------------------

def torch_mha_batch_first(m, batch_first):
    t = torch_mha_like(m)
    t.batch_first = batch_first
    return t


UNBATCHED = {
    # name: (T, S, kdim, vdim), masks(H, T, S) as numpy
    "plain": ((3, 5, None, None), lambda H, T, S: {}),
    "key_padding_mask (S,)": ((3, 5, None, None),
                              lambda H, T, S: {"key_padding_mask": np.array([0, 1, 0, 0, 1],
                                                                            bool)}),
    "float key_padding_mask": ((3, 5, None, None),
                               lambda H, T, S: {"key_padding_mask": np.random.randn(S)}),
    "bool attn_mask (T, S)": ((3, 5, None, None),
                              lambda H, T, S: {"attn_mask": np.triu(np.ones((T, S), bool), 1)}),
    "float attn_mask (H, T, S)": ((3, 5, None, None),
                                  lambda H, T, S: {"attn_mask": np.random.randn(H, T, S)}),
    "cross, kdim and vdim": ((3, 4, 6, 2), lambda H, T, S: {}),
}


@needs_torch
@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "seq_first"])
@pytest.mark.parametrize("need_weights, average", [(True, True), (True, False), (False, True)],
                         ids=["averaged", "per head", "no weights"])
@pytest.mark.parametrize("name", list(UNBATCHED))
def test_unbatched_mha_matches_torch(name, need_weights, average, batch_first, device):
    (T, S, kdim, vdim), masks = UNBATCHED[name]
    E, H = 4, 2
    m = make_mha(E, H, device, kdim, vdim)
    t = torch_mha_batch_first(m, batch_first)
    ours, theirs = tensors([np.random.randn(T, E), np.random.randn(S, kdim or E),
                            np.random.randn(S, vdim or E)], device)
    arrays = masks(H, T, S)
    out = m(*ours, need_weights=need_weights, average_attn_weights=average,
            **{k: mg.tensor(v, device=device) for k, v in arrays.items()})
    ref = t(*theirs, need_weights=need_weights, average_attn_weights=average,
            **{k: torch.tensor(v) for k, v in arrays.items()})
    assert out[0].shape == (T, E)
    assert_close(out[0], ref[0], "output")
    if need_weights:
        assert out[1].shape == ((T, S) if average else (H, T, S))
        assert_close(out[1], ref[1], "weights")
    else:
        assert out[1] is None and ref[1] is None
    backward_with_same_weights(out, ref, device)
    for x, tx, what in zip(ours, theirs, ("query", "key", "value")):
        assert_close(x.grad, tx.grad, what, rtol=1e-9)


def test_unbatched_equals_a_batch_of_one(device):
    m = make_mha(4, 2, device)
    x = mg.randn(3, 4, dtype=F64, device=device)
    kpm = mg.tensor([False, True, False], device=device)
    out, w = m(x, x, x, key_padding_mask=kpm, average_attn_weights=False)
    out1, w1 = m(x.unsqueeze(0), x.unsqueeze(0), x.unsqueeze(0),
                 key_padding_mask=kpm.unsqueeze(0), average_attn_weights=False)
    np.testing.assert_array_equal(out.numpy(), out1.numpy()[0])
    np.testing.assert_array_equal(w.numpy(), w1.numpy()[0])


# name: (query, key, value shapes, masks as numpy, the words our message must hold)
SHAPE_ERRORS = {
    "unbatched query, 2-D key_padding_mask": (
        ((3, 4), (5, 4), (5, 4)), {"key_padding_mask": np.zeros((1, 5), bool)},
        ["key_padding_mask", "(1, 5)"]),
    "2-D query, 3-D key": (((3, 4), (1, 5, 4), (1, 5, 4)), {}, ["(3, 4)", "(1, 5, 4)"]),
    "3-D query, 2-D key": (((1, 3, 4), (5, 4), (5, 4)), {}, ["(1, 3, 4)", "(5, 4)"]),
    "1-D query": (((4,), (4,), (4,)), {}, ["query", "(4,)"]),
    "4-D query": (((1, 1, 3, 4), (1, 1, 5, 4), (1, 1, 5, 4)), {}, ["query", "(1, 1, 3, 4)"]),
    "key and value of different lengths": (((1, 3, 4), (1, 5, 4), (1, 6, 4)), {},
                                           ["key", "(1, 5, 4)", "value", "(1, 6, 4)"]),
    "unbatched key and value of different lengths": (((3, 4), (5, 4), (6, 4)), {},
                                                     ["(5, 4)", "(6, 4)"]),
    "key and value of different batch sizes": (((2, 3, 4), (2, 5, 4), (3, 5, 4)), {},
                                               ["(2, 5, 4)", "(3, 5, 4)"]),
    "query and key of different batch sizes": (((2, 3, 4), (3, 5, 4), (3, 5, 4)), {},
                                               ["(2, 3, 4)", "(3, 5, 4)"]),
    "query embed dim": (((1, 3, 6), (1, 5, 4), (1, 5, 4)), {}, ["query", "(1, 3, 6)", "4"]),
    "key embed dim": (((1, 3, 4), (1, 5, 6), (1, 5, 6)), {}, ["key", "(1, 5, 6)"]),
    "value embed dim": (((1, 3, 4), (1, 5, 4), (1, 5, 6)), {}, ["value", "(1, 5, 6)"]),
    "key_padding_mask length": (((1, 3, 4), (1, 5, 4), (1, 5, 4)),
                                {"key_padding_mask": np.zeros((1, 4), bool)},
                                ["key_padding_mask", "(1, 4)", "(1, 5)"]),
    "2-D attn_mask": (((1, 3, 4), (1, 5, 4), (1, 5, 4)), {"attn_mask": np.zeros((3, 4), bool)},
                      ["attn_mask", "(3, 4)", "(3, 5)"]),
    "3-D attn_mask": (((1, 3, 4), (1, 5, 4), (1, 5, 4)),
                      {"attn_mask": np.zeros((3, 3, 5), bool)},
                      ["attn_mask", "(3, 3, 5)", "(2, 3, 5)"]),
    "4-D attn_mask": (((1, 3, 4), (1, 5, 4), (1, 5, 4)),
                      {"attn_mask": np.zeros((1, 2, 3, 5), bool)}, ["attn_mask", "(1, 2, 3, 5)"]),
    "1-D attn_mask": (((1, 3, 4), (1, 5, 4), (1, 5, 4)), {"attn_mask": np.zeros(5, bool)},
                      ["attn_mask", "(5,)"]),
    "unbatched (1, T, S) attn_mask": (((3, 4), (5, 4), (5, 4)),
                                      {"attn_mask": np.zeros((1, 3, 5), bool)},
                                      ["attn_mask", "(1, 3, 5)", "(2, 3, 5)"]),
}


@needs_torch
@pytest.mark.parametrize("name", list(SHAPE_ERRORS))
def test_mha_shape_errors_are_torchs(name, device):
    shapes, masks, words = SHAPE_ERRORS[name]
    m = MultiheadAttention(4, 2, device=device)
    t = torch.nn.MultiheadAttention(4, 2, batch_first=True)
    arrays = [np.random.randn(*s).astype(np.float32) for s in shapes]
    assert_raises_like_torch(
        lambda: m(*[mg.tensor(a, device=device) for a in arrays],
                  **{k: mg.tensor(v, device=device) for k, v in masks.items()}),
        lambda: t(*[torch.tensor(a) for a in arrays],
                  **{k: torch.tensor(v) for k, v in masks.items()}),
        "MultiheadAttention", *words)


@needs_torch
@pytest.mark.parametrize("embed_dim, num_heads", [(4, 0), (0, 2), (-4, 2)])
def test_mha_sizes_must_be_positive(embed_dim, num_heads, device):
    assert_raises_like_torch(lambda: MultiheadAttention(embed_dim, num_heads, device=device),
                             lambda: torch.nn.MultiheadAttention(embed_dim, num_heads),
                             "MultiheadAttention", f"embed_dim={embed_dim}",
                             f"num_heads={num_heads}")


# --- cross_entropy's arguments ------------------------------------------------------------------

def ce_case(logits_shape=(3, 4), target=(0, 1, 2), dtype=np.float32):
    rng = np.random.default_rng(0)
    return rng.standard_normal(logits_shape).astype(dtype), np.array(target)


# name: (logits, target, kwargs as numpy, the words our message must hold)
CE_ERRORS = {
    "weight too short": (*ce_case(), {"weight": np.ones(3, np.float32)}, ["weight", "(3,)"]),
    "weight too long": (*ce_case(), {"weight": np.ones(5, np.float32)}, ["weight", "(5,)"]),
    "weight 2-D": (*ce_case(), {"weight": np.ones((1, 4), np.float32)}, ["weight", "(1, 4)"]),
    "weight of probability targets too short": (
        ce_case()[0], np.full((3, 4), 0.25, np.float32), {"weight": np.ones(3, np.float32)},
        ["weight", "(3,)"]),
    "weight of (C,) input": (*ce_case((4,), 1), {"weight": np.ones(3, np.float32)},
                             ["weight", "(3,)"]),
    "weight dtype": (*ce_case(), {"weight": np.ones(4)}, ["weight", "float64", "float32"]),
    "label_smoothing 1.1": (*ce_case(), {"label_smoothing": 1.1}, ["label_smoothing", "1.1"]),
    "label_smoothing inf": (*ce_case(), {"label_smoothing": float("inf")},
                            ["label_smoothing", "inf"]),
    "label_smoothing of probability targets": (
        ce_case()[0], np.full((3, 4), 0.25, np.float32), {"label_smoothing": 2.0},
        ["label_smoothing", "2.0"]),
    "target 5": (*ce_case(target=(0, 5, 1)), {}, ["Target 5", "4 classes"]),
    "target -1": (*ce_case(target=(0, -1, 1)), {}, ["Target -1"]),
    "target 5 with label smoothing": (*ce_case(target=(0, 5, 1)), {"label_smoothing": 0.1},
                                      ["Target 5"]),
    "target 5 of (N, C, d)": (*ce_case((2, 4, 3), [[0, 5, 1], [0, 0, 0]]), {}, ["Target 5"]),
    "target 5 of (C,)": (*ce_case((4,), 5), {}, ["Target 5"]),
    "target -100 with another ignore_index": (*ce_case(target=(0, -100, 1)),
                                              {"ignore_index": 2}, ["Target -100"]),
    "no classes": (*ce_case((3, 0), (0, 0, 0)), {}, ["Target 0", "0 classes"]),
    "target batch size": (*ce_case(target=(0, 1)), {}, ["target", "(2,)", "(3, 4)"]),
    "target 2-D for (N, C)": (*ce_case(target=[[0, 1, 1]]), {}, ["target", "(1, 3)"]),
    "target of (N, C, d)": (*ce_case((2, 4, 3), [[0, 1], [0, 0]]), {}, ["target", "(2, 2)"]),
    "target of (N, C, d) missing d": (*ce_case((2, 4, 3), [0, 1]), {}, ["target", "(2,)"]),
    "probability targets shape": (ce_case()[0], np.full((3, 5), 0.2, np.float32), {},
                                  ["(3, 5)", "(3, 4)"]),
    "int32 targets": (ce_case()[0], np.array([0, 1, 2], np.int32), {}, ["int32"]),
    "bool targets": (ce_case()[0], np.array([0, 1, 1], bool), {}, ["bool"]),
    "int16 targets": (ce_case()[0], np.array([0, 1, 1], np.int16), {}, ["int16"]),
    "integer input": (np.ones((3, 4), np.int64), np.array([0, 1, 2]), {}, ["input", "int64"]),
    "0-d input": (np.array(1.0, np.float32), np.array(0), {}, ["input", "0-d"]),
    "ignore_index with probability targets": (
        ce_case()[0], np.full((3, 4), 0.25, np.float32), {"ignore_index": 0},
        ["ignore_index"]),
    "reduction": (*ce_case(), {"reduction": "avg"}, ["reduction", "'avg'"]),
}


@needs_torch
@pytest.mark.parametrize("name", list(CE_ERRORS))
def test_cross_entropy_errors_are_torchs(name, device):
    logits, target, kwargs, words = CE_ERRORS[name]
    message = assert_raises_like_torch(
        lambda: F.cross_entropy(mg.tensor(logits, device=device),
                                mg.tensor(target, device=device),
                                **{k: mg.tensor(v, device=device) if isinstance(v, np.ndarray)
                                   else v for k, v in kwargs.items()}),
        lambda: torch.nn.functional.cross_entropy(
            torch.tensor(logits), torch.tensor(target),
            **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
               for k, v in kwargs.items()}),
        *words)
    assert message.startswith("cross_entropy: ") and message.count("cross_entropy") == 1
    assert "CrossEntropy" not in message


# name: (logits, target, kwargs) that torch accepts
CE_ACCEPTED = {
    # torch smooths only when label_smoothing > 0: a negative or NaN value means none
    **{f"label_smoothing {ls}": (*ce_case(), {"label_smoothing": ls})
       for ls in (-0.1, -5.0, float("nan"), float("-inf"), 1.0, 1)},
    "label_smoothing -0.5, probability targets": (
        ce_case()[0], np.array([[0.1, 0.2, 0.3, 0.4]] * 3, np.float32),
        {"label_smoothing": -0.5}),
    "uint8 targets": (ce_case()[0], np.array([0, 3, 1], np.uint8), {}),
    "ignore_index = C": (*ce_case(target=(0, 4, 1)), {"ignore_index": 4}),
    "ignore_index -1": (*ce_case(target=(0, -1, 1)), {"ignore_index": -1}),
    "ignore_index -1, smoothing and weight": (
        *ce_case(target=(-1, 3, 1)),
        {"ignore_index": -1, "label_smoothing": 0.2, "weight": np.arange(1, 5, dtype=np.float32)}),
    "ignore_index = C in (N, C, d)": (*ce_case((2, 4, 3), [[0, 4, 1], [4, 4, 2]]),
                                      {"ignore_index": 4, "reduction": "none"}),
    "float64 probability targets of float32 logits": (
        ce_case()[0], np.array([[0.1, 0.2, 0.3, 0.4]] * 3), {}),
    "float64 weight with probability targets": (
        ce_case()[0], np.array([[0.1, 0.2, 0.3, 0.4]] * 3, np.float32),
        {"weight": np.arange(1, 5, dtype=np.float64)}),
    **{f"no rows, {r}": (*ce_case((0, 4), np.zeros(0, int)), {"reduction": r})
       for r in ("mean", "sum", "none")},
}


@needs_torch
@pytest.mark.parametrize("name", list(CE_ACCEPTED))
def test_cross_entropy_accepted_neighbours_match_torch(name, device):
    logits, target, kwargs = CE_ACCEPTED[name]
    x = mg.tensor(logits, device=device, requires_grad=True)
    tx = torch.tensor(logits, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no warning on the way
        loss = F.cross_entropy(x, mg.tensor(target, device=device), **{
            k: mg.tensor(v, device=device) if isinstance(v, np.ndarray) else v
            for k, v in kwargs.items()})
    ref = torch.nn.functional.cross_entropy(tx, torch.tensor(target), **{
        k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()})
    assert loss.dtype == np.dtype(str(ref.dtype).replace("torch.", ""))
    np.testing.assert_allclose(loss.numpy(), ref.detach().numpy(), rtol=2e-6, atol=1e-6,
                               equal_nan=True)
    if loss.numel():
        backward_with_same_weights([loss], [ref], device)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=2e-5, atol=1e-6)


# --- mse_loss -----------------------------------------------------------------------------------

# PyTorch before 2.13 fails its own mse_loss backward for a 0-d input and a (1,) target
OLD_TORCH_MSE_BACKWARD = "Found dtype Double but expected Float"


def skip_where_older_torch_fails_mse_backward(error):
    """Skip (rather than fail) where the torch reference's own backward raised the error of
    PyTorch before 2.13; any other error is the caller's to raise."""
    if OLD_TORCH_MSE_BACKWARD in str(error) and torch_older_than((2, 13)):
        pytest.skip(older_torch_reason(
            (2, 13), "mse_loss's backward works for a 0-d input with a broadcast (1,) "
            f"target (older versions raise '{OLD_TORCH_MSE_BACKWARD}')"))


@needs_torch
@pytest.mark.parametrize("shapes", [((3, 1), (3,)), ((), (1,)), ((3,), (2, 3))], ids=str)
def test_mse_loss_warns_as_torch_when_the_target_broadcasts(shapes, device):
    a, b = (np.random.randn(*s) for s in shapes)
    (x, y), (tx, ty) = tensors([a, b], device)
    with pytest.warns(UserWarning, match=r"mse_loss: Using a target size .* different"):
        loss = F.mse_loss(x, y)
    with pytest.warns(UserWarning, match="different to the input size"):
        ref = torch.nn.functional.mse_loss(tx, ty)
    assert_close(loss, ref)
    r = np.random.default_rng(0).standard_normal(loss.shape)
    try:
        (ref * torch.tensor(r, dtype=ref.dtype)).sum().backward()
    except RuntimeError as e:  # the reference's own backward
        skip_where_older_torch_fails_mse_backward(e)
        raise
    (loss * mg.tensor(r, dtype=loss.dtype, device=device)).sum().backward()
    assert_close(x.grad, tx.grad)
    assert_close(y.grad, ty.grad)


def test_mse_loss_of_equal_shapes_does_not_warn(device):
    x = mg.randn(3, 2, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.mse_loss(x, x * 2)


@needs_torch
def test_mse_loss_shapes_that_do_not_broadcast(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns before it fails
        assert_raises_like_torch(
            lambda: F.mse_loss(mg.randn(3, device=device), mg.randn(4, device=device)),
            lambda: torch.nn.functional.mse_loss(torch.randn(3), torch.randn(4)),
            "mse_loss", "(3,)", "(4,)")


@needs_torch
def test_mse_loss_reduction_error(device):
    x = mg.randn(3, device=device)
    assert_raises_like_torch(lambda: F.mse_loss(x, x, reduction="avg"),
                             lambda: torch.nn.functional.mse_loss(torch.ones(3), torch.ones(3),
                                                                  reduction="avg"),
                             "mse_loss", "'avg'", "reduction")


# --- neighbours: softmax, layer_norm, dropout, Linear, SDPA's arguments -------------------------

@needs_torch
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape, dim", [((3, 0), 1), ((3, 0), 0), ((0, 3), 1), ((0,), 0)],
                         ids=str)
def test_softmax_of_empty_tensors_matches_torch(fn, shape, dim, device):
    (x,), (tx,) = tensors([np.zeros(shape)], device)
    out, ref = getattr(F, fn)(x, dim), getattr(torch.nn.functional, fn)(tx, dim)
    assert_close(out, ref)
    out.sum().backward()
    assert x.grad.shape == shape


@needs_torch
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_of_an_empty_tensor_checks_dim(fn, device):
    assert_raises_like_torch(lambda: getattr(F, fn)(mg.zeros(3, 0, device=device), 2),
                             lambda: getattr(torch.nn.functional, fn)(torch.zeros(3, 0), 2),
                             "2")


@needs_torch
@pytest.mark.parametrize("name, shape", [("weight", (4,)), ("bias", (4,)), ("weight", (1, 3))])
def test_layer_norm_weight_and_bias_must_have_normalized_shape(name, shape, device):
    x = np.random.randn(2, 3).astype(np.float32)
    assert_raises_like_torch(
        lambda: F.layer_norm(mg.tensor(x, device=device), (3,),
                             **{name: mg.ones(*shape, device=device)}),
        lambda: torch.nn.functional.layer_norm(torch.tensor(x), (3,),
                                               **{name: torch.ones(*shape)}),
        "layer_norm", name, str(shape), "(3,)")


@needs_torch
@pytest.mark.parametrize("x_shape, normalized_shape", [((3,), (1, 3)), ((2, 3), (4,))],
                         ids=["more dims than the input", "wrong size"])
def test_layer_norm_normalized_shape_must_end_the_input_shape(x_shape, normalized_shape,
                                                              device):
    assert_raises_like_torch(
        lambda: F.layer_norm(mg.zeros(*x_shape, device=device), normalized_shape),
        lambda: torch.nn.functional.layer_norm(torch.zeros(*x_shape), normalized_shape),
        "layer_norm", str(normalized_shape), str(x_shape))


@needs_torch
@pytest.mark.parametrize("shape, normalized_shape", [((0, 3), (3,)), ((2, 0), (0,))],
                         ids=["no rows", "no features"])
def test_layer_norm_of_empty_tensors_matches_torch(shape, normalized_shape, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's mean of nothing (no values)
        out = F.layer_norm(mg.zeros(*shape, device=device), normalized_shape)
    ref = torch.nn.functional.layer_norm(torch.zeros(*shape), normalized_shape)
    assert_close(out, ref)


@needs_torch
@pytest.mark.parametrize("p", [-0.5, 1.5])
def test_dropout_p_outside_0_1(p, device):
    assert_raises_like_torch(lambda: F.dropout(mg.ones(3, device=device), p),
                             lambda: torch.nn.functional.dropout(torch.ones(3), p),
                             "dropout", str(p))
    assert_raises_like_torch(lambda: nn.Dropout(p), lambda: torch.nn.Dropout(p), str(p))


@needs_torch
@BACKENDS
@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_sdpa_dropout_p_outside_0_1(p, backend, device):
    q = mg.randn(1, 2, 3, 4, device=device)
    tq = torch.randn(1, 2, 3, 4)
    with sdpa_kernel(backend):
        assert_raises_like_torch(
            lambda: F.scaled_dot_product_attention(q, q, q, dropout_p=p),
            lambda: torch.nn.functional.scaled_dot_product_attention(tq, tq, tq, dropout_p=p),
            "scaled_dot_product_attention", "dropout_p", str(p))


@needs_torch
@BACKENDS
@pytest.mark.parametrize("S", [3, 600], ids=["one tile", "tiled"])
def test_sdpa_dropout_p_1_gives_zeros_as_torch(S, backend, device):
    arrays = [np.random.randn(1, 2, S, 4) for _ in range(3)]
    ours, theirs = tensors(arrays, device)
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(*ours, dropout_p=1.0)
    ref = torch.nn.functional.scaled_dot_product_attention(*theirs, dropout_p=1.0)
    assert_close(out, ref)
    backward_with_same_weights([out], [ref], device)
    for x, tx in zip(ours, theirs):
        assert_close(x.grad, tx.grad)


@needs_torch
@pytest.mark.parametrize("name, q_shape, dtype, words", [
    ("1-D", (4,), np.float32, ["2-D", "(4,)"]),
    ("integer", (1, 3, 4), np.int64, ["floating point", "int64"]),
])
def test_sdpa_query_errors(name, q_shape, dtype, words, device):
    q = np.ones(q_shape, dtype=dtype)
    mq = mg.tensor(q, device=device)
    tq = torch.tensor(q)
    assert_raises_like_torch(
        lambda: F.scaled_dot_product_attention(mq, mq, mq),
        lambda: torch.nn.functional.scaled_dot_product_attention(tq, tq, tq),
        "scaled_dot_product_attention", *words)


@needs_torch
def test_linear_without_input_features_matches_torch(device):
    """in_features = 0: the weight is empty, the bias U(0, 0) = 0, the output the bias."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that initialising nothing is a no-op
        t = torch.nn.Linear(0, 3)
    lin = nn.Linear(0, 3).to(device)
    assert lin.weight.shape == (3, 0)
    x = np.zeros((2, 0), np.float32)
    assert_close(lin(mg.tensor(x, device=device)), t(torch.tensor(x)))


def test_load_state_dict_result_reads_as_torchs():
    torch = pytest.importorskip("torch")
    ours, theirs = nn.Linear(2, 3), torch.nn.Linear(2, 3)
    assert repr(ours.load_state_dict(ours.state_dict())) == \
        repr(theirs.load_state_dict(theirs.state_dict())) == "<All keys matched successfully>"
    assert str(ours.load_state_dict(ours.state_dict())) == "<All keys matched successfully>"
    partial = ours.load_state_dict({"weight": ours.weight.detach()}, strict=False)
    expected = theirs.load_state_dict({"weight": theirs.weight.detach()}, strict=False)
    assert (partial.missing_keys, partial.unexpected_keys) == \
        (expected.missing_keys, expected.unexpected_keys) == (["bias"], [])
    assert "missing_keys=['bias']" in repr(partial)


# --- refusals PyTorch makes of an argument's combination or dtype --------------------------------

@needs_torch
@pytest.mark.parametrize("mask_dtype", ["bool", "float"])
def test_sdpa_refuses_a_mask_with_is_causal_as_torch(mask_dtype, device):
    q = np.random.randn(1, 2, 3)
    mask = np.ones((2, 2), bool) if mask_dtype == "bool" else np.zeros((2, 2))
    (mq,), (tq,) = tensors([q], device, requires_grad=False)
    assert_raises_like_torch(
        lambda: F.scaled_dot_product_attention(mq, mq, mq, attn_mask=mg.tensor(mask, device=device),
                                               is_causal=True),
        lambda: torch.nn.functional.scaled_dot_product_attention(
            tq, tq, tq, attn_mask=torch.tensor(mask), is_causal=True),
        "scaled_dot_product_attention", "attn_mask", "is_causal", "(2, 2)")
    out = F.scaled_dot_product_attention(mq, mq, mq, is_causal=True)        # either alone: fine
    assert_close(out, torch.nn.functional.scaled_dot_product_attention(tq, tq, tq, is_causal=True),
                 rtol=1e-6, atol=1e-7)


@needs_torch
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_refuses_a_class_weight_that_requires_grad_as_torch(smoothing, device):
    (x,), (tx,) = tensors([np.random.randn(3, 4)], device)
    target = np.array([0, 1, 2])
    w = mg.ones(4, dtype=F64, device=device, requires_grad=True)
    tw = torch.ones(4, dtype=torch.float64, requires_grad=True)
    assert_raises_like_torch(
        lambda: F.cross_entropy(x, mg.tensor(target, device=device), weight=w,
                                label_smoothing=smoothing),
        lambda: torch.nn.functional.cross_entropy(tx, torch.tensor(target), weight=tw,
                                                  label_smoothing=smoothing),
        "cross_entropy", "weight")
    with mg.no_grad():  # nothing to differentiate: allowed, as in PyTorch
        loss = F.cross_entropy(x, mg.tensor(target, device=device), weight=w,
                               label_smoothing=smoothing)
    with torch.no_grad():
        t_loss = torch.nn.functional.cross_entropy(tx, torch.tensor(target), weight=tw,
                                                   label_smoothing=smoothing)
    assert_close(loss, t_loss)
    probs = np.random.dirichlet(np.ones(4), size=3)  # class probabilities: weight has a grad
    F.cross_entropy(x, mg.tensor(probs, device=device), weight=w).backward()
    torch.nn.functional.cross_entropy(tx, torch.tensor(probs), weight=tw).backward()
    assert_close(w.grad, tw.grad)


LAYER_NORM_DTYPES = [  # (input, weight, bias); None: no such parameter
    ("float64", "float32", "float32"), ("float32", "float64", "float64"),
    ("float32", "float16", "float16"), ("float64", "float32", None), ("float32", None, "float64"),
    ("float16", "float32", "float16"), ("float16", "float64", "float64"),
]


@needs_torch
@pytest.mark.parametrize("dtypes", LAYER_NORM_DTYPES, ids=["-".join(map(str, d)) for d in
                                                           LAYER_NORM_DTYPES])
def test_layer_norm_refuses_parameters_of_another_dtype_as_torch(dtypes):
    x_dtype, w_dtype, b_dtype = dtypes
    x = np.random.randn(2, 3)
    ours = [None if d is None else mg.tensor(a, dtype=d) for a, d in
            ((x, x_dtype), (np.ones(3), w_dtype), (np.zeros(3), b_dtype))]
    theirs = [None if d is None else torch.tensor(a, dtype=getattr(torch, d)) for a, d in
              ((x, x_dtype), (np.ones(3), w_dtype), (np.zeros(3), b_dtype))]
    assert_raises_like_torch(lambda: F.layer_norm(ours[0], (3,), *ours[1:]),
                             lambda: torch.nn.functional.layer_norm(theirs[0], (3,), *theirs[1:]),
                             "layer_norm", "dtype", x_dtype)


@needs_torch
@pytest.mark.parametrize("params", ["float32", "float16"])
def test_layer_norm_of_float16_takes_float32_or_float16_parameters_as_torch(params):
    x = np.random.randn(2, 3).astype(np.float16)
    w, b = np.random.randn(3), np.random.randn(3)
    ours = F.layer_norm(mg.tensor(x), (3,), mg.tensor(w, dtype=params), mg.tensor(b, dtype=params))
    theirs = torch.nn.functional.layer_norm(
        torch.tensor(x), (3,), torch.tensor(w, dtype=getattr(torch, params)),
        torch.tensor(b, dtype=getattr(torch, params)))
    assert ours.dtype == mg.float16
    np.testing.assert_allclose(ours.numpy().astype(np.float32), theirs.float().numpy(), atol=2e-3)


@needs_torch
@pytest.mark.parametrize("input_shape", [(2, 3), (3,), (4, 2, 3)])
def test_linear_with_a_vector_weight_is_a_product_with_it_as_torch(input_shape, device):
    (x, w), (tx, tw) = tensors([np.random.randn(*input_shape), np.random.randn(3)], device)
    out, t_out = F.linear(x, w), torch.nn.functional.linear(tx, tw)
    assert_close(out, t_out)
    g = np.random.randn(*t_out.shape)
    out.backward(mg.tensor(g, device=device))
    t_out.backward(torch.tensor(g))
    assert_close(x.grad, tx.grad)
    assert_close(w.grad, tw.grad)
    assert_raises_like_torch(
        lambda: F.linear(x, w, mg.zeros(1, dtype=F64, device=device)),
        lambda: torch.nn.functional.linear(tx, tw, torch.zeros(1, dtype=torch.float64)),
        "linear", "weight", "(3,)")


@needs_torch
@pytest.mark.parametrize("kinds", [("bool", "float"), ("float", "bool"), ("bool", "bool"),
                                   ("float", "float")])
def test_mha_warns_of_masks_of_two_kinds_as_torch(kinds, device):
    """A bool attn_mask with a float key_padding_mask (or the reverse) is deprecated in
    PyTorch, which says so; the masks still combine, with the same numbers."""
    m = make_mha(4, 2, device)
    t = torch_mha_like(m)
    q = np.random.randn(1, 3, 4)
    (mq,), (tq,) = tensors([q], device, requires_grad=False)
    attn = np.triu(np.ones((3, 3), bool), 1)
    pad = np.array([[False, False, True]])
    masks = [(a if kind == "bool" else np.where(a, -np.inf, 0.0)) for a, kind in
             zip((attn, pad), kinds)]
    caught = []
    makers = ((mg, mq, lambda a: mg.tensor(a, device=device)), (torch, tq, torch.tensor))
    for lib, x, make in makers:
        module = m if lib is mg else t
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            out, _ = module(x, x, x, attn_mask=make(masks[0]), key_padding_mask=make(masks[1]))
        caught.append([str(w.message) for w in seen if "mismatched" in str(w.message)])
        if lib is mg:
            ours = out
    assert caught[0] == caught[1] and len(caught[0]) == (kinds[0] != kinds[1])
    assert_close(ours, out, rtol=1e-9, atol=1e-12)


BCE_DTYPES = [("float64", "float32", None, None), ("float32", "float64", None, None),
              ("float32", "float16", None, None), ("float64", "float32", "float64", "float32"),
              ("float32", "float32", "float64", "float64"), ("float16", "float32", None, None)]


@needs_torch
@pytest.mark.parametrize("dtypes", BCE_DTYPES, ids=["-".join(map(str, d)) for d in BCE_DTYPES])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_bce_with_logits_takes_the_targets_dtype_as_torch(dtypes, reduction):
    """PyTorch's loss is written into the target's dtype step by step (its in-place ops),
    so a float64 input with a float32 target gives float32, with the same roundings."""
    x_dt, t_dt, w_dt, p_dt = dtypes
    x, t = np.random.randn(4, 3) * 3, np.random.rand(4, 3)
    w, pw = np.random.rand(3), np.random.rand(3) * 2

    def run(M, nnf):
        def make(a, d):
            return None if d is None else M.tensor(a, dtype=getattr(M, d))
        xx = make(x, x_dt)
        xx.requires_grad_()
        out = nnf.binary_cross_entropy_with_logits(xx, make(t, t_dt), weight=make(w, w_dt),
                                                   pos_weight=make(pw, p_dt), reduction=reduction)
        out.sum().backward()
        return out, xx.grad
    (ours, g), (theirs, tg) = run(mg, F), run(torch, torch.nn.functional)
    assert str(ours.dtype) == str(theirs.dtype).replace("torch.", "")
    tol = dict(rtol=2e-3, atol=1e-3) if "float16" in dtypes else dict(rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ours.numpy().astype(np.float64),
                               theirs.detach().numpy().astype(np.float64), **tol)
    np.testing.assert_allclose(g.numpy().astype(np.float64), tg.numpy().astype(np.float64), **tol)
