"""No host read (a device synchronisation) in an op's forward or backward, nor anywhere in a
training step, on the GPU, as PyTorch's eager CUDA ops never wait for the device.

The "cuda" here is the strict stand-in for CuPy (``tests/strict_device.py``), under
``--device strict`` and, installed for each test, under the default ``--device cpu``; the
``host_reads`` fixture records every read of a device array's values on the host, with the
first minigrad frame it came from. The reads PyTorch makes too (a result whose shape
depends on the values, a value asked for on the host) are listed in ALLOWED with the
reason; everything else must read nothing. A value check that needs the values (an index
out of range) runs on the device, and its error comes at the next read
(``minigrad/backend/checks.py``): its tests are at the end."""
import types

import numpy as np
import pytest

import minigrad as mg
from minigrad import backend, nn
import minigrad.nn.functional as F
from minigrad.demos._cli import clipped_update
from minigrad.demos.seq2seq import make_update
from minigrad.models import GPT, Transformer

CUDA = "cuda"  # the stand-in's GPU (a real one under --device cuda: the tests of ``gpu``)
V = 13         # vocabulary of the models' steps


@pytest.fixture
def reads(device, host_reads):
    """``with reads() as r:`` records the host reads made inside (``device`` puts the test
    in the --device strict run)."""
    return host_reads


@pytest.fixture
def gpu(request, device):
    """A "cuda" for the tests that need no counting: a real GPU under --device cuda (skipped
    without one), else the strict stand-in, installed for the test under --device cpu. It
    gives ``reads`` (as the fixture above) on the stand-in, an empty record on a GPU."""
    from tests import strict_device
    if device == "cuda" and not strict_device.installed():
        if not mg.cuda_is_available():
            pytest.skip("--device cuda: CuPy or a CUDA GPU is not available")
        yield _NotCounted
        return
    yield request.getfixturevalue("host_reads")


class _NotCounted(list):
    """``reads()`` on a real GPU: an empty record (reads cannot be counted there)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def assert_none(r):
    assert not r, r.report()


# --- whole training steps of the demos' models ------------------------------------------------

def seq2seq_step(dropout, label_smoothing, optimizer, foreach):
    """demos/seq2seq.py's update (forward, cross-entropy with label smoothing and
    ignore_index=PAD, zero_grad, backward, clip_grad_norm_, the optimiser's and the
    scheduler's step, the token accuracy) on a small Transformer, and its batch."""
    from minigrad.demos.tasks import PAD
    model = Transformer(V, V, d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                        dim_feedforward=64, dropout=dropout, norm_first=True,
                        pad_id=PAD).to(CUDA)
    make = mg.optim.Adam if optimizer == "Adam" else mg.optim.AdamW
    opt = make(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9, foreach=foreach)
    sched = mg.optim.lr_scheduler.WarmupCosineLR(opt, 2, 10)
    args = types.SimpleNamespace(label_smoothing=label_smoothing, clip=1.0)
    rng = np.random.default_rng(0)
    src = rng.integers(3, V, (4, 9))
    tgt = rng.integers(3, V, (4, 8))
    src[0, 6:] = tgt[1, 5:] = PAD  # padded positions: masked keys, ignored targets
    src, tgt = mg.tensor(src, device=CUDA), mg.tensor(tgt, device=CUDA)
    return make_update(model, opt, sched, args), (src, tgt[:, :-1], tgt[:, 1:])


@pytest.mark.parametrize("dropout, label_smoothing", [(0.1, 0.1), (0.0, 0.0)],
                         ids=["dropout, smoothing", "plain"])
@pytest.mark.parametrize("optimizer, foreach", [("Adam", None), ("Adam", False),
                                                ("AdamW", True)])
def test_a_seq2seq_training_step_reads_nothing_back(reads, dropout, label_smoothing,
                                                    optimizer, foreach):
    update, batch = seq2seq_step(dropout, label_smoothing, optimizer, foreach)
    with reads() as r:  # the first step (the optimiser's state made) and a later one
        for _ in range(2):
            loss, right, real = update(*batch)
    assert_none(r)
    assert np.isfinite(loss.item()) and 0 <= right.item() <= real.item() == 4 * 7 - 3


@pytest.mark.parametrize("positional, residual", [("learned", "add"), ("rope", "add"),
                                                  ("learned", "mhc")])
def test_a_gpt_training_step_reads_nothing_back(reads, positional, residual):
    """demos/gpt.py's update: AdamW, clipping, a LambdaLR schedule."""
    model = GPT(V, d_model=32, nhead=4, num_layers=2, dim_feedforward=64, dropout=0.1,
                positional=positional, residual=residual).to(CUDA)
    opt = mg.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    sched = mg.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 3))
    tokens = mg.tensor(np.random.default_rng(1).integers(0, V, (4, 10)), device=CUDA)

    def loss_fn(x):
        return F.cross_entropy(model(x[:, :-1]).reshape(-1, V), x[:, 1:].reshape(-1))
    update = clipped_update(loss_fn, model, opt, sched)
    with reads() as r:
        for _ in range(2):
            loss = update(tokens)
    assert_none(r)
    assert np.isfinite(loss.item())


@pytest.mark.parametrize("make", [
    lambda p: mg.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4),
    lambda p: mg.optim.Adam(p, amsgrad=True, maximize=True, weight_decay=0.1),
    lambda p: mg.optim.AdamW(p, foreach=False, amsgrad=True),
], ids=["SGD nesterov", "Adam amsgrad maximize", "AdamW amsgrad"])
@pytest.mark.parametrize("norm_type", [2.0, "inf"])
def test_optimisers_and_clipping_read_nothing_back(reads, make, norm_type):
    net = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.LayerNorm(8), nn.Linear(8, 3)).to(CUDA)
    opt = make(net.parameters())
    x = mg.randn(5, 6, device=CUDA)
    with reads() as r:
        for _ in range(2):
            opt.zero_grad()
            net(x).square().mean().backward()
            total = nn.utils.clip_grad_norm_(net.parameters(), 0.5, norm_type=norm_type)
            opt.step()
    assert_none(r)
    assert total.device.type == "cuda"


# --- each differentiable op, forward and backward ---------------------------------------------

def _ids(*shape, high=5):
    return mg.tensor(np.random.default_rng(2).integers(0, high, shape), device=CUDA)


def _attn(**kw):
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, **kw)


def _mha(q, k, v):
    mha = nn.MultiheadAttention(8, 2, batch_first=True, dropout=0.1).to(CUDA)
    pad = mg.tensor([[False, False, False, True]] * 2, device=CUDA)
    return mha(q[:, 0], k[:, 0], v[:, 0], key_padding_mask=pad)[0]


# name: (the op of float32 inputs that require grad, the inputs' shapes)
OPS = {
    "add, mul, sub, div": (lambda x, y: (x + y) * (x - y) / (y.abs() + 1), [(3, 4), (3, 4)]),
    "pow, sqrt, exp, log": (lambda x: (x.abs() + 1).sqrt().pow(3).exp().log(), [(3, 4)]),
    "tanh, sigmoid, relu": (lambda x: x.tanh() + x.sigmoid() + x.relu(), [(3, 4)]),
    "gelu, silu": (lambda x: F.gelu(x) + F.silu(x) + F.gelu(x, approximate="tanh"), [(3, 4)]),
    "clamp": (lambda x: x.clamp(-0.5, 0.5) + x.clamp(min=0.1), [(3, 4)]),
    "maximum, minimum": (lambda x, y: mg.maximum(x, y) + mg.minimum(x, y), [(3, 4), (3, 4)]),
    "broadcast": (lambda x, y: x * y, [(3, 1, 4), (5, 1)]),
    "sum, mean": (lambda x: x.sum(1).mean() + x.mean((0, 1)).sum(), [(2, 3, 4)]),
    "max, min along a dim": (lambda x: x.max(1)[0].sum() + x.min(-1).values.sum(), [(3, 4)]),
    "amax, amin, max": (lambda x: x.amax(0).sum() + x.amin(1).sum() + x.max(), [(3, 4)]),
    "var, std": (lambda x: x.var(1).sum() + x.std(0, correction=0).sum(), [(3, 4)]),
    "norm": (lambda x: x.norm() + x.norm(dim=1).sum(), [(3, 4)]),
    "logsumexp": (lambda x: x.logsumexp(1), [(3, 4)]),
    "prod": (lambda x: x.prod(1), [(3, 4)]),
    "cumsum": (lambda x: x.cumsum(1), [(3, 4)]),
    "softmax, log_softmax": (lambda x: F.softmax(x, -1) * F.log_softmax(x, 0), [(3, 4)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), [(2, 3, 4), (4,), (4,)]),
    "embedding": (lambda w: F.embedding(_ids(2, 3), w), [(5, 4)]),
    "embedding, padding_idx": (lambda w: F.embedding(_ids(2, 3), w, padding_idx=1), [(5, 4)]),
    "dropout": (lambda x: F.dropout(x, 0.3, training=True), [(3, 4)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(2, 3, 4), (5, 4), (5,)]),
    "matmul, bmm": (lambda x, y: (x @ y).bmm(y.transpose(1, 2)), [(2, 3, 4), (2, 4, 4)]),
    "einsum": (lambda x, y: mg.einsum("bij,bjk->bik", x, y), [(2, 3, 4), (2, 4, 5)]),
    "attention": (_attn(), [(2, 2, 4, 8)] * 3),
    "attention, causal": (_attn(is_causal=True), [(2, 2, 4, 8)] * 3),
    "attention, bool mask": (
        lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=mg.tensor([[True, True, False, True]] * 4, device=CUDA)),
        [(2, 2, 4, 8)] * 3),
    "attention, dropout": (_attn(dropout_p=0.2), [(2, 2, 4, 8)] * 3),
    "MultiheadAttention, key padding": (_mha, [(2, 1, 4, 8)] * 3),
    "index tensor": (lambda x: x[_ids(4, high=3)], [(3, 4)]),
    "index tensors, second dim": (lambda x: x[_ids(2, high=3), :, _ids(2, high=4)],
                                  [(3, 2, 4)]),
    "index tensor, negative": (lambda x: x[:, mg.tensor([-1, 0, -4], device=CUDA)], [(3, 4)]),
    "index list": (lambda x: x[[0, 2, -1]], [(3, 4)]),
    "setitem with an index tensor": (lambda x: _put(x * 1.0, _ids(2, high=3)), [(3, 4)]),
    "index_select": (lambda x: x.index_select(1, _ids(5, high=4)), [(3, 4)]),
    "gather": (lambda x: x.gather(1, _ids(3, 2, high=4)), [(3, 4)]),
    "scatter": (lambda x, s: x.scatter(1, mg.tensor([[0, 2]] * 3, device=CUDA), s),
                [(3, 4), (3, 2)]),
    "scatter_add": (lambda x, s: x.scatter_add(0, _ids(2, 4, high=3), s), [(3, 4), (2, 4)]),
    "index_add": (lambda x, s: x.index_add(0, _ids(2, high=3), s), [(3, 4), (2, 4)]),
    "index_fill": (lambda x: x.index_fill(1, mg.tensor([0, -1], device=CUDA), 2.0), [(3, 4)]),
    "take_along_dim": (lambda x: mg.take_along_dim(x, _ids(3, 1, high=4), 1), [(3, 4)]),
    "cat, stack": (lambda x, y: mg.cat([x, y], 1).sum() + mg.stack([x, y]).sum(),
                   [(3, 4), (3, 4)]),
    "split, chunk": (lambda x: x.split(2, 1)[1].sum() + x.chunk(3, 0)[2].sum(), [(3, 4)]),
    "reshape, permute, expand": (lambda x: x.reshape(4, 3).permute(1, 0).unsqueeze(0)
                                 .expand(2, 3, 4), [(3, 4)]),
    "where": (lambda x, y: mg.where(x > y, x, y), [(3, 4), (3, 4)]),
    "masked_fill": (lambda x: x.masked_fill(x > 0, -1e9).softmax(-1), [(3, 4)]),
    "masked_fill, 0-d tensor value": (lambda x, v: x.masked_fill(x > 0, v.sum()),
                                      [(3, 4), (1,)]),
    "tril, triu": (lambda x: x.tril() + x.triu(1), [(4, 4)]),
    "sort, topk": (lambda x: x.sort(1)[0].sum() + x.topk(2, 1)[0].sum(), [(3, 4)]),
    "cross_entropy": (lambda x: F.cross_entropy(x, mg.tensor([1, -100, 3], device=CUDA)),
                      [(3, 4)]),
    "cross_entropy, smoothing, weight, ignore_index": (
        lambda x, w: F.cross_entropy(x, mg.tensor([1, 0, 3], device=CUDA), weight=w.detach(),
                                     ignore_index=0, label_smoothing=0.1), [(3, 4), (4,)]),
    "cross_entropy, (N, C, d)": (lambda x: F.cross_entropy(x, _ids(2, 3, high=4)),
                                 [(2, 4, 3)]),
    "cross_entropy, probabilities": (lambda x, p: F.cross_entropy(x, p.softmax(1)),
                                     [(3, 4), (3, 4)]),
    "nll_loss": (lambda x: F.nll_loss(F.log_softmax(x, 1), mg.tensor([1, 0, -100],
                                                                     device=CUDA)), [(3, 4)]),
    "mse_loss, l1_loss": (lambda x, y: F.mse_loss(x, y) + F.l1_loss(x, y), [(3, 4), (3, 4)]),
    "binary_cross_entropy": (lambda x, y: F.binary_cross_entropy(x.sigmoid(), y.sigmoid()),
                             [(3, 4), (3, 4)]),
    "binary_cross_entropy_with_logits": (
        lambda x, y: F.binary_cross_entropy_with_logits(x, y.sigmoid()), [(3, 4), (3, 4)]),
    "kl_div": (lambda x, y: F.kl_div(F.log_softmax(x, 1), F.softmax(y, 1),
                                     reduction="batchmean"), [(3, 4), (3, 4)]),
    "repeat_interleave, output_size": (
        lambda x: x.repeat_interleave(mg.tensor([1, 0, 2], device=CUDA), 0, output_size=3),
        [(3, 4)]),
    "one_hot with num_classes": (lambda x: x * F.one_hot(_ids(3), 5)[:, :4], [(3, 4)]),
}


def _put(x, index):
    x[index] = 0.5
    return x


@pytest.mark.parametrize("name", list(OPS))
def test_an_ops_forward_and_backward_read_nothing_back(reads, name):
    op, shapes = OPS[name]
    rng = np.random.default_rng(3)
    inputs = [mg.tensor(rng.standard_normal(s).astype(np.float32), device=CUDA,
                        requires_grad=True) for s in shapes]
    with reads() as r:
        out = op(*inputs)
        (out * out.detach()).sum().backward()
    assert_none(r)
    assert any(t.grad is not None for t in inputs)


# --- the reads PyTorch makes too --------------------------------------------------------------

# name: (the program, why it reads the device's values on the host)
ALLOWED = {
    "nonzero": (lambda x: x.nonzero(), "the result's shape depends on the values"),
    "masked_select": (lambda x: x.masked_select(x > 0), "the result's shape depends on the "
                      "values"),
    "boolean-mask indexing": (lambda x: x[x > 0], "the result's shape depends on the values"),
    "repeat_interleave, tensor counts": (
        lambda x: x.repeat_interleave(mg.tensor([1, 0, 2], device=CUDA), 0),
        "the result's shape is the counts' sum (output_size spares it, as in PyTorch)"),
    "one_hot without num_classes": (lambda x: F.one_hot((x > 0).long()),
                                    "the number of classes is the largest value plus one"),
    "a 0-d index tensor": (lambda x: x[mg.tensor(1, device=CUDA)],
                           "a 0-d integer index is an integer (a view), as in PyTorch"),
    "item": (lambda x: x.sum().item(), "the user asks for the value on the host"),
    "tolist": (lambda x: x.tolist(), "the user asks for the values on the host"),
    "numpy": (lambda x: x.detach().numpy(), "the user asks for the values on the host"),
    "bool of a tensor": (lambda x: bool(x.sum() > 0), "a Python branch on a value"),
    "printing": (lambda x: repr(x), "the values are printed"),
    "clip_grad_norm_, error_if_nonfinite": (
        lambda x: nn.utils.clip_grad_norm_([x], 1.0, error_if_nonfinite=True),
        "whether the norm is finite decides whether to raise"),
    "multinomial": (lambda x: x.softmax(-1).multinomial(1), "draws come from the one host "
                    "generator that seeds every device (see the README's GPU section)"),
}


@pytest.mark.parametrize("name", list(ALLOWED))
def test_the_reads_pytorch_makes_too_are_counted(reads, name):
    """Each of these reads back, as PyTorch's does (the reason beside it): the reads that
    remain, each expected, while the tests above ask for none."""
    program, reason = ALLOWED[name]
    x = mg.tensor(np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32),
                  device=CUDA, requires_grad=True)
    x.grad = mg.ones(3, 4, device=CUDA)
    with reads() as r:
        program(x)
    assert r and reason


# --- the counter itself -----------------------------------------------------------------------

def test_every_explicit_read_is_counted_with_where_it_came_from(reads, strict_module):
    cp = strict_module
    a = cp.arange(4.0)
    with reads() as r:
        a.get(), cp.asnumpy(a), a[1].item(), a.tolist(), float(a[1]), int(a[1]), bool(a[1])
        complex(a[1]), repr(a), str(a), f"{a[1]:.1f}", a.tobytes(), cp.allclose(a, a)
        a.nonzero(), cp.unique(a), a[a > 1]  # CuPy reads the count back
        a.sum(), a * 2, a[cp.asarray([1])], len(a), a.shape, a > 1  # none of these reads
    assert [x.how for x in r] == ["get()", "asnumpy()", "item()", "tolist()", "float()",
                                  "int()", "bool()", "complex()", "repr()", "str()",
                                  "format()", "tobytes()", "allclose()", "nonzero()",
                                  "unique()", "boolean-mask indexing"]
    assert all("test_sync_free" in x.where for x in r)  # (no minigrad frame: the caller)
    t = mg.arange(3.0, device=CUDA)
    with reads() as r:
        t.sum().item()
    assert len(r) == 1 and r[0].where.startswith("minigrad.tensor:") and "in item" in r[0].where
    with reads() as outer:
        with reads() as inner:
            t.numpy()
        t.tolist()
    assert len(inner) == 1 and len(outer) == 2 and "to_host" in inner.wheres()[0]


def test_the_counter_refuses_what_the_stand_in_refuses(reads, strict_module):
    a = strict_module.arange(3.0)
    with reads() as r:
        with pytest.raises(TypeError, match="Implicit conversion"):
            np.asarray(a)
        with pytest.raises(TypeError, match="Unsupported type"):
            a + np.ones(3)
    assert not r


def test_a_read_planted_in_an_op_is_caught(reads, monkeypatch):
    """The tests above can fail: an op that reads back a value (here softmax's backward,
    as a kernel that checked its input on the host would) shows up, named."""
    from minigrad.backend import kernels
    real = kernels.softmax_backward

    def reads_back(*args, **kwargs):
        out = real(*args, **kwargs)
        if out is not None and bool(out.any()):  # a planted read
            pass
        return out
    monkeypatch.setattr(backend, "softmax_backward", reads_back)
    x = mg.randn(3, 4, device=CUDA, requires_grad=True)
    with reads() as r:
        F.softmax(x, -1).square().sum().backward()
    assert len(r) == 1 and r[0].how == "bool()" and "reads_back" in r[0].stack[0]


@pytest.fixture
def strict_module(host_reads):
    return backend.cupy()


# --- value checks on the device: raised at the next read ---------------------------------------

BAD = {  # name: (the program on x (3, 4) of device d, the error, its message)
    "index tensor": (lambda x, d: x[mg.tensor([0, 5], device=d)],
                     IndexError, "index 5 is out of bounds for {} 0 with size 3"),
    "index list, second dim": (lambda x, d: x[:, [1, -5]], IndexError,
                               "index -5 is out of bounds for {} 1 with size 4"),
    "embedding": (lambda x, d: F.embedding(mg.tensor([[1, 7], [9, 0]], device=d), x),
                  IndexError, "embedding: index 7 is out of range for 3 embeddings"),
    "cross_entropy": (lambda x, d: F.cross_entropy(x, mg.tensor([0, -100, 4], device=d),
                                                   label_smoothing=0.1),
                      IndexError, "cross_entropy: Target 4 is out of bounds for 4 classes"),
    "nll_loss": (lambda x, d: F.nll_loss(x, mg.tensor([0, -1, 1], device=d)), IndexError,
                 "nll_loss: Target -1 is out of bounds"),
    "gather": (lambda x, d: x.gather(1, mg.tensor([[0], [4], [1]], device=d)), IndexError,
               "gather: index 4 is out of bounds for dim 1 of size 4"),
    "index_select": (lambda x, d: x.index_select(0, mg.tensor([3], device=d)), IndexError,
                     "index_select: index 3 is out of bounds for dim 0 of size 3"),
    "scatter_add": (lambda x, d: x.scatter_add(0, mg.tensor([[0, 3, 0, 0]], device=d),
                                               mg.ones(1, 4, device=d)),
                    RuntimeError, "scatter_add(): index 3 is out of bounds for dimension 0"),
    "index_fill": (lambda x, d: x.index_fill(1, mg.tensor([-5], device=d), 0.0), IndexError,
                   "index -5 is out of bounds for dimension 1 with size 4"),
    "binary_cross_entropy": (lambda x, d: F.binary_cross_entropy(x / 6 - 0.5, x.detach() / 12),
                             RuntimeError, "binary_cross_entropy: all elements of input should "
                             "be between 0 and 1"),
    "repeat_interleave": (lambda x, d: x.repeat_interleave(mg.tensor([1, 0, 2], device=d), 0,
                                                           output_size=4),
                          RuntimeError, "repeat_interleave: invalid output_size, expected 3 "
                          "but got 4"),
    "one_hot": (lambda x, d: F.one_hot(mg.tensor([0, 2, 5], device=d), 4) * x[:, :1],
                RuntimeError, "one_hot: class values must be smaller than num_classes (4), "
                "got 5"),
}


def _x(device=CUDA):
    return mg.tensor(np.arange(12.0, dtype=np.float32).reshape(3, 4), device=device,
                     requires_grad=True)


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_index_is_raised_at_the_next_read_with_the_cpus_error(gpu, name):
    program, error, message = BAD[name]
    message = message.replace("(", r"\(").replace(")", r"\)")
    # the CPU raises in the op (NumPy's own message, "axis", for indexing)
    with pytest.raises(error, match=message.format("axis")) as on_cpu:
        program(_x("cpu"), "cpu")
    message = message.format("dimension")
    with gpu() as r:
        out = program(_x(), CUDA)              # no read, no error yet: the GPU runs on
        (out * 1.0).sum().backward()           # (the op ran on indices wrapped into range)
    assert not r and backend.checks.pending()
    with pytest.raises(error, match=message) as on_gpu:
        out.sum().item()                       # the next read raises it
    assert type(on_gpu.value) is type(on_cpu.value) and "\n" not in str(on_gpu.value)
    out.sum().item()  # raised once: a later read is fine


@pytest.mark.parametrize("sync", [
    lambda t: t.numpy(), lambda t: t.tolist(), lambda t: float(t.sum()), lambda t: repr(t),
    lambda t: t.to("cpu"), lambda t: mg.cuda.synchronize(),
], ids=["numpy", "tolist", "float", "repr", "to cpu", "cuda.synchronize"])
def test_every_sync_point_raises_a_pending_error(gpu, sync):
    x = _x()
    x[mg.tensor([3], device=CUDA)]
    other = mg.ones(2, device=CUDA)  # any read raises it, as PyTorch's next sync does
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0"):
        sync(other)
    assert not backend.checks.pending()


def test_the_first_failure_is_the_one_raised(gpu):
    x = _x()
    x[mg.tensor([7], device=CUDA)]
    x[mg.tensor([1], device=CUDA)]  # fine
    x[:, mg.tensor([9], device=CUDA)]
    with pytest.raises(IndexError, match="index 7 is out of bounds for dimension 0"):
        x.sum().item()


def test_cuda_launch_blocking_raises_in_the_op(gpu, monkeypatch):
    """PyTorch's switch for debugging asynchronous errors: each check reads at once."""
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    x = _x()
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0"):
        x[mg.tensor([5], device=CUDA)]
    with gpu() as r:
        x[mg.tensor([2], device=CUDA)]
    assert type(r) is _NotCounted or (len(r) == 1 and "checks" in r[0].where)


def test_in_range_indices_give_the_cpus_values_and_gradients(gpu):
    """Wrapping into range changes nothing for indices in range (negative ones included)."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    ids = np.array([[0, 4, -1], [2, -5, 1]])
    results = []
    for dev in ("cpu", CUDA):
        x = mg.tensor(w, device=dev, requires_grad=True)
        out = x[mg.tensor(ids, device=dev)] * 2.0 + F.embedding(
            mg.tensor(ids % 5, device=dev), x, padding_idx=2)
        loss = out.square().sum() + F.cross_entropy(x, mg.tensor([2, 0, -100, 1, 2],
                                                                 device=dev))
        loss.backward()
        results.append((out.numpy(), loss.item(), x.grad.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6)
