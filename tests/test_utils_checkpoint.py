"""utils.checkpoint: gradients equal to the un-checkpointed ones bit for bit (dropout
included), through backward, autograd.grad, create_graph and hooks; nothing but the inputs
kept in forward; the same gradients as torch's checkpoint."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.utils.checkpoint import checkpoint, checkpoint_sequential
from tests.torch_ref import needs_torch, torch


def block(M, F_, w1, w2, p=0.0):
    def run(x):
        h = F_.dropout((x @ w1).tanh(), p, training=True) if p else (x @ w1).tanh()
        return (h @ w2).sin() * x.sum()
    return run


def weights(M, seed=0):
    rng = np.random.default_rng(seed)
    return [M.tensor(rng.standard_normal(s), requires_grad=True) for s in ((3, 5), (5, 3))]


def grads(use_checkpoint, p, create_graph=False):
    mg.manual_seed(7)
    w1, w2 = weights(mg)
    x = mg.tensor(np.random.default_rng(1).standard_normal((4, 3)), requires_grad=True)
    f = block(mg, F, w1, w2, p)
    y = checkpoint(f, x, use_reentrant=False) if use_checkpoint else f(x)
    y = checkpoint(f, y, use_reentrant=False) if use_checkpoint else f(y)  # (twice: two masks)
    loss = (y ** 2).sum()
    gs = mg.autograd.grad(loss, (x, w1, w2), create_graph=create_graph)
    if create_graph:
        gs = gs + mg.autograd.grad(sum((g ** 2).sum() for g in gs), (x, w1, w2))
    return [g.detach().numpy() for g in gs]


@pytest.mark.parametrize("p", [0.0, 0.5])
@pytest.mark.parametrize("create_graph", [False, True])
def test_gradients_equal_the_plain_ones_bit_for_bit(p, create_graph):
    for ours, plain in zip(grads(True, p, create_graph), grads(False, p, create_graph)):
        np.testing.assert_array_equal(ours, plain)


def test_forward_keeps_only_the_inputs_and_backward_recomputes():
    w1, w2 = weights(mg)
    x = mg.tensor(np.ones((4, 3)), requires_grad=True)
    calls = []

    def f(t):
        calls.append(1)
        return block(mg, F, w1, w2)(t)
    packed = []
    with mg.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        y = checkpoint(f, x, use_reentrant=False)
    assert packed == []  # (checkpoint's own hooks took every saved tensor: none is kept)
    assert len(calls) == 1
    y.sum().backward()
    assert len(calls) == 2
    assert w1.grad is not None and x.grad is not None


def test_hooks_and_backward_into_leaves():
    w1, w2 = weights(mg)
    x = mg.tensor(np.ones((4, 3)), requires_grad=True)
    seen = []
    h = x * 2
    h.register_hook(lambda g: seen.append(g.shape))
    checkpoint(block(mg, F, w1, w2), h, use_reentrant=False).sum().backward()
    w1_ckpt = w1.grad.numpy().copy()
    w1.grad = None
    block(mg, F, w1, w2)(x * 2).sum().backward()
    np.testing.assert_array_equal(w1_ckpt, w1.grad.numpy())
    assert seen == [(4, 3)]


def test_checkpoint_sequential_and_no_grad():
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    x = mg.tensor(np.random.default_rng(2).standard_normal((5, 3)))
    np.testing.assert_array_equal(
        checkpoint_sequential(model, 2, x, use_reentrant=False).detach().numpy(),
        model(x).detach().numpy())
    with mg.no_grad():
        assert not checkpoint(model, x, use_reentrant=False).requires_grad


@needs_torch
def test_same_gradients_as_torch():
    import torch.utils.checkpoint as tc

    def run(M, ckpt):
        w1, w2 = weights(M)
        x = M.tensor(np.random.default_rng(1).standard_normal((4, 3)), requires_grad=True)
        y = ckpt(block(M, None, w1, w2), x, use_reentrant=False)
        (y ** 2).sum().backward()
        return [t.grad.numpy() for t in (x, w1, w2)]
    for ours, theirs in zip(run(mg, checkpoint), run(torch, tc.checkpoint)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_gpt_with_checkpointed_blocks_has_the_same_gradients():
    from minigrad.models import GPT
    idx = mg.tensor(np.random.default_rng(3).integers(0, 11, (2, 6)))
    results = []
    for flag in (False, True):
        mg.manual_seed(0)
        model = GPT(11, d_model=8, nhead=2, num_layers=2, dim_feedforward=16, dropout=0.2,
                    max_len=8, checkpoint=flag)
        F.cross_entropy(model(idx).reshape(-1, 11), idx.reshape(-1)).backward()
        results.append([p.grad.numpy() for p in model.parameters()])
    for plain, ckpt in zip(*results):
        np.testing.assert_array_equal(plain, ckpt)


def _seq2seq_grads(flag, **kw):
    from minigrad.models import Transformer
    rng = np.random.default_rng(4)
    src, tgt = mg.tensor(rng.integers(1, 13, (3, 7))), mg.tensor(rng.integers(1, 13, (3, 5)))
    src[0, -2:] = 0  # padding, masked as keys
    tgt[1, -1:] = 0
    mg.manual_seed(0)
    model = Transformer(13, 13, d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                        dim_feedforward=16, dropout=0.3, max_len=16, checkpoint=flag, **kw)
    logits = model(src, tgt)
    F.cross_entropy(logits.reshape(-1, 13), tgt.reshape(-1)).backward()
    return logits.detach().numpy(), [p.grad.numpy() for p in model.parameters()]


@pytest.mark.parametrize("kw", [{}, dict(norm_first=True, positional="t5"),
                                dict(residual="mhc", positional="rope", activation="gelu")])
def test_seq2seq_with_checkpointed_layers_has_the_same_gradients(kw):
    (plain_out, plain), (ckpt_out, ckpt) = _seq2seq_grads(False, **kw), _seq2seq_grads(True, **kw)
    np.testing.assert_array_equal(plain_out, ckpt_out)  # (the same dropout masks)
    assert len(plain) == len(ckpt)
    for a, b in zip(plain, ckpt):
        np.testing.assert_array_equal(a, b)


def test_checkpointed_stacks_keep_only_their_layers_inputs():
    mg.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 3,
                                checkpoint=True).double()
    assert enc.checkpoint and not nn.TransformerEncoder(enc.layers[0], 1).checkpoint
    x = mg.tensor(np.random.default_rng(5).standard_normal((2, 4, 8)), requires_grad=True)
    packed = []
    with mg.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        y = enc(x)
    assert packed == []  # (every layer's saved tensors went to checkpoint's own hooks)
    enc.checkpoint = False
    with mg.autograd.graph.saved_tensors_hooks(lambda t: packed.append(t) or t, lambda t: t):
        enc(x)
    assert packed  # (the plain stack keeps its activations)
    y.sum().backward()
    assert x.grad is not None


def test_checkpointed_decoder_with_masks_unbatched_and_cache():
    mg.manual_seed(0)
    layer = nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    rng = np.random.default_rng(6)
    tgt, memory = rng.standard_normal((5, 8)), rng.standard_normal((6, 8))
    mask = mg.tensor(np.triu(np.ones((5, 5), bool), 1))  # causal, True: masked
    results = []
    for flag in (False, True):
        dec = nn.TransformerDecoder(layer, 2, nn.LayerNorm(8), checkpoint=flag)
        t = mg.tensor(tgt, dtype=mg.float32, requires_grad=True)
        m = mg.tensor(memory, dtype=mg.float32, requires_grad=True)
        out = dec(t, m, tgt_mask=mask, tgt_is_causal=True)  # unbatched
        (out ** 2).sum().backward()
        results.append([out.detach().numpy(), t.grad.numpy(), m.grad.numpy()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_checkpointed_seq2seq_decodes_as_the_plain_one():
    from minigrad.models import Transformer
    src = mg.tensor(np.random.default_rng(7).integers(3, 13, (2, 6)))
    outs = []
    for flag in (False, True):
        mg.manual_seed(0)
        model = Transformer(13, 13, d_model=8, nhead=2, num_encoder_layers=1,
                            num_decoder_layers=2, dim_feedforward=16, max_len=16,
                            checkpoint=flag)
        outs.append([model.generate(src, 6, 1, 2, beam_size=b).numpy() for b in (1, 2)])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


# --- use_reentrant=True, context_fn, determinism_check, debug: as PyTorch's -------------------

def _dropout_block(M, w1, w2, p):
    def run(x):
        return (M.nn.functional.dropout((x @ w1).tanh(), p, training=True) @ w2).sin()
    return run


def _reentrant_run(M, ckpt, p, **kw):
    """Two checkpointed dropout blocks, then backward: the output, the gradients of the
    input and the weights, and the output's node name."""
    M.manual_seed(7)
    w1, w2 = weights(M)
    x = M.tensor(np.random.default_rng(1).standard_normal((4, 3)), requires_grad=True)
    f = _dropout_block(M, w1, w2, p)
    y = f(x) if ckpt is None else ckpt(f, x, **kw)
    y = f(y) if ckpt is None else ckpt(f, y, **kw)
    (y ** 2).sum().backward()
    return [t.detach().numpy() for t in (y, x.grad, w1.grad, w2.grad)], type(y.grad_fn).__name__


@pytest.mark.parametrize("p", [0.0, 0.5])
def test_reentrant_gradients_equal_the_plain_ones_bit_for_bit(p):
    """The recomputation draws the dropout masks of the first run."""
    ours, name = _reentrant_run(mg, checkpoint, p, use_reentrant=True)
    plain, _ = _reentrant_run(mg, None, p)
    assert name == "CheckpointFunctionBackward"
    for a, b in zip(ours, plain):
        np.testing.assert_array_equal(a, b)


@needs_torch
def test_reentrant_as_torch():
    import torch.utils.checkpoint as tc
    (ours, name), (theirs, their_name) = (
        _reentrant_run(mg, checkpoint, 0.0, use_reentrant=True),
        _reentrant_run(torch, tc.checkpoint, 0.0, use_reentrant=True))
    assert name == their_name
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_without_preserve_rng_state_the_recomputation_draws_new_masks():
    for reentrant in (False, True):
        ours, _ = _reentrant_run(mg, checkpoint, 0.5, use_reentrant=reentrant,
                                 preserve_rng_state=False)
        plain, _ = _reentrant_run(mg, None, 0.5)
        np.testing.assert_array_equal(ours[0], plain[0])  # (forward: the same draws)
        assert not np.array_equal(ours[2], plain[2])


def _messages(run):
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [str(w.message) for w in caught]


@needs_torch
def test_omitting_use_reentrant_warns_as_torch_and_is_reentrant():
    import torch.utils.checkpoint as tc

    def calls(M, ckpt, sequential):
        layers = [M.nn.Linear(3, 3).double() for _ in range(2)]
        x = M.tensor(np.ones((2, 3)), requires_grad=True)
        if sequential:
            return lambda: sequential(M.nn.Sequential(*layers), 2, x)
        return lambda: ckpt(layers[0], x)
    for ours, theirs in ((calls(mg, checkpoint, None), calls(torch, tc.checkpoint, None)),
                         (calls(mg, None, checkpoint_sequential),
                          calls(torch, None, tc.checkpoint_sequential))):
        assert _messages(ours) == _messages(theirs) and len(_messages(ours)) == 1
    with pytest.warns(UserWarning, match="use_reentrant"):
        y = checkpoint(lambda t: t * 2, mg.ones(2, requires_grad=True))
    assert type(y.grad_fn).__name__ == "CheckpointFunctionBackward"


@needs_torch
def test_reentrant_errors_and_warnings_as_torch():
    import torch.utils.checkpoint as tc

    def cases(M, ckpt):
        x, w = M.ones(2, dtype=M.float64), M.ones(2, dtype=M.float64, requires_grad=True)

        def nothing_requires_grad():
            ckpt(lambda t: t.detach() * 2, w, use_reentrant=True).sum().backward()
        return [lambda: ckpt(lambda t, s: t * s, x, s=2.0, use_reentrant=True),
                lambda: ckpt(lambda t: t, x, use_reentrant=True, debug=True),
                lambda: ckpt(lambda t: t, x, use_reentrant=False, determinism_check="all"),
                nothing_requires_grad]
    for ours, theirs in zip(cases(mg, checkpoint), cases(torch, tc.checkpoint)):
        with pytest.raises((ValueError, RuntimeError)) as expected:
            theirs()
        with pytest.raises(expected.type) as raised:
            ours()
        assert str(raised.value) == str(expected.value)
    x = mg.ones(2)
    assert _messages(lambda: checkpoint(lambda t: t * w, x, use_reentrant=True)) == \
        _messages(lambda: tc.checkpoint(lambda t: t * tw, torch.ones(2), use_reentrant=True))


w, tw = mg.ones(2, requires_grad=True), torch.ones(2, requires_grad=True) if torch else None


@needs_torch
@pytest.mark.parametrize("how", ["autograd.grad", "backward(inputs=)"])
def test_reentrant_refuses_a_backward_to_chosen_inputs_as_torch(how):
    """Its inner backward pass would write the .grad of every leaf inside it: PyTorch's
    error, and no .grad written; a non-reentrant checkpoint gives the gradient."""
    import torch.utils.checkpoint as tc
    messages = []
    for M, ckpt in ((torch, tc.checkpoint), (mg, checkpoint)):
        v = M.tensor([0.5, -1.0, 2.0], requires_grad=True)
        x = M.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = ckpt(lambda t: (t * v).sin(), x, use_reentrant=True).sum()
        with pytest.raises(RuntimeError) as raised:
            M.autograd.grad(y, x) if how == "autograd.grad" else y.backward(inputs=[x])
        messages.append(str(raised.value))
        assert v.grad is None and x.grad is None
        y = ckpt(lambda t: (t * v).sin(), x, use_reentrant=False).sum()
        (g,) = M.autograd.grad(y, x)
        assert np.allclose(g.detach().numpy(), (v * (x * v).cos()).detach().numpy())
    assert messages[0] == messages[1]


@needs_torch
def test_context_fn_wraps_the_first_run_and_the_recomputation_as_torch():
    import contextlib
    import torch.utils.checkpoint as tc

    def run(M, ckpt):
        seen = []

        @contextlib.contextmanager
        def note(what):  # (PyTorch stops its recomputation early by an exception)
            seen.append(what + " in")
            try:
                yield
            finally:
                seen.append(what + " out")

        def f(t):
            seen.append("run")
            return t.sin() * 2
        x = M.ones(3, dtype=M.float64, requires_grad=True)
        y = ckpt(f, x, use_reentrant=False,
                 context_fn=lambda: (note("forward"), note("recompute")))
        seen.append("backward")
        y.sum().backward()
        return seen, x.grad.numpy()
    (ours, g), (theirs, tg) = run(mg, checkpoint), run(torch, tc.checkpoint)
    assert ours == theirs == ["forward in", "run", "forward out", "backward",
                              "recompute in", "run", "recompute out"]
    np.testing.assert_allclose(g, tg)


@needs_torch
def test_determinism_check_as_torch():
    import torch.utils.checkpoint as tc
    from minigrad.utils.checkpoint import CheckpointError

    def run(M, ckpt, **kw):
        calls = []

        def f(t):  # the recomputation takes a different shape
            calls.append(1)
            return (t[:len(calls) + 1] * 2).sin().sum()
        x = M.ones(4, dtype=M.float64, requires_grad=True)
        ckpt(f, x, use_reentrant=False, **kw).backward()
        return x.grad
    with pytest.raises(tc.CheckpointError) as expected:
        run(torch, tc.checkpoint)
    with pytest.raises(CheckpointError) as raised:
        run(mg, checkpoint)
    ours, theirs = str(raised.value).splitlines(), str(expected.value).splitlines()
    assert ours[:2] == theirs[:2] and ours[0].startswith("torch.utils.checkpoint: Recomputed")
    assert ours[1] == "tensor at position 0:"  # (the metadata in each library's own types)
    assert ours[2].startswith("saved metadata: {'shape': (2,), ") and \
        ours[3].startswith("recomputed metadata: {'shape': (3,), ")
    with pytest.raises(CheckpointError, match=r"(?s)debug=True.*MulBackward0.*SinBackward0"):
        run(mg, checkpoint, debug=True)
    with pytest.raises(RuntimeError) as unchecked:  # (the ops get what came back)
        run(mg, checkpoint, determinism_check="none")
    assert not isinstance(unchecked.value, CheckpointError)
