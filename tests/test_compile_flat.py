"""mg.compile records backward rules op by op: a replay is a flat list of array calls (no
Tensor, no Function.apply, no graph node), equal to eager bit for bit; rules it cannot see
into are recorded whole, and work it cannot replay is refused with a reason."""
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.autograd.function import Function, Primitive
from minigrad.compile import CompileWarning
from minigrad.models import Transformer
from minigrad.tensor import Tensor
from tests.test_compile import capture_calls


def _mlp(device):
    mg.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.2), nn.LayerNorm(16),
                         nn.GELU(approximate="tanh"), nn.Linear(16, 4)).to(device)


def _data(device, seed=1):
    rng = np.random.default_rng(seed)
    return (mg.tensor(rng.standard_normal((8, 6)).astype(np.float32), device=device),
            mg.tensor(rng.integers(0, 4, 8), device=device))


def _forward_backward(model):
    def step(x, y):
        model.zero_grad()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        return loss
    return step


def _counting(monkeypatch):
    """Count Function.apply calls and Tensors made from here on."""
    counts = {"apply": 0, "tensors": 0}
    apply, make = Function.apply.__func__, Tensor._make

    def counted_apply(cls, *args, **params):
        counts["apply"] += 1
        return apply(cls, *args, **params)

    def counted_make(*args, **kwargs):
        counts["tensors"] += 1
        return make(*args, **kwargs)
    monkeypatch.setattr(Function, "apply", classmethod(counted_apply))
    monkeypatch.setattr(Tensor, "_make", staticmethod(counted_make))
    return counts


def test_a_replay_calls_no_op_and_makes_only_the_tensors_it_returns(device, monkeypatch):
    model = _mlp(device)
    step = mg.compile(_forward_backward(model))
    x, y = _data(device)
    for _ in range(4):  # (the first call makes the parameters' gradient accumulators)
        step(x, y)
    kinds = {i.kind for i in step.program.instructions}
    assert "backward" not in kinds and step.replays == 4 - capture_calls(step)  # (every rule
    # recorded op by op)
    names = {i.name for i in step.program.instructions if i.kind == "array"}
    assert {"layer_norm_backward", "dropout", "gelu_backward", "tanh_backward",
            "cross_entropy_backward"} <= names  # the fused rules' raw array work, one call each
    counts = _counting(monkeypatch)
    loss = step(x, y)
    assert counts["apply"] == 0
    assert counts["tensors"] == 1 + len(list(model.parameters()))  # the loss, each .grad
    assert loss.grad_fn is None and step.replays == 5 - capture_calls(step)


def test_replayed_gradients_equal_eager_ones_bit_for_bit(device):
    batches = [_data(device, seed) for seed in range(5)]
    results = []
    for compiled in (False, True):
        model = _mlp(device)
        step = _forward_backward(model)
        run = mg.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            losses = [run(x, y).numpy().copy() for x, y in batches]
        results.append((losses, [p.grad.numpy().copy() for p in model.parameters()]))
    assert run.replays == 5 - capture_calls(run)
    for a, b in zip(results[0][0] + results[0][1], results[1][0] + results[1][1]):
        assert np.array_equal(a, b)


def test_the_transformer_step_has_no_backward_call_but_attention(device):
    """Only the rules listed in REPLAYED_WHOLE (attention, which redraws its dropout masks
    from a saved random source) are called whole; everything else is flat."""
    mg.manual_seed(0)
    model = Transformer(20, 20, d_model=16, nhead=2, num_encoder_layers=1,
                        num_decoder_layers=1, dim_feedforward=32, dropout=0.1, max_len=16,
                        pad_id=0).to(device)
    opt = mg.optim.Adam(model.parameters(), lr=1e-3)
    src, tgt = (mg.tensor(np.random.default_rng(0).integers(1, 20, (4, 7)), device=device)
                for _ in range(2))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(src, tgt[:, :-1]).reshape(-1, 20),
                               tgt[:, 1:].reshape(-1), label_smoothing=0.1)
        loss.backward()
        opt.step()
        return loss
    step = mg.compile(step)
    for _ in range(4):
        step()
    whole = {i.name for i in step.program.instructions if i.kind == "backward"}
    assert step.replays == 4 - capture_calls(step) and whole == {"AttentionBackward0"}
    assert "with backward_pass():" in step.program.source


def test_the_engine_benchmarks_chain_is_flat_and_replays_exactly(device):
    """tanh's rule does its raw array work through on_arrays: no rule is called whole; the
    gradients accumulate over calls as in eager mode."""
    from benchmarks.bench_engine import CHAIN_OPS, chain_minigrad
    rng = np.random.default_rng(0)
    xa, wa = rng.standard_normal((2, 8, 8)).astype(np.float32)
    grads = []
    for compiled in (False, True):
        x, w = (mg.tensor(a, requires_grad=True, device=device) for a in (xa, wa))
        run = mg.compile(chain_minigrad) if compiled else chain_minigrad
        for _ in range(5):
            run(x, w)
        grads.append((x.grad.numpy(), w.grad.numpy()))
    assert run.replays == 2
    kinds = [i.kind for i in run.program.instructions]
    assert "backward" not in kinds
    rounds = CHAIN_OPS // 5  # one tanh a round
    assert sum(i.name == "tanh_grad" for i in run.program.instructions) == rounds
    assert np.array_equal(grads[0][0], grads[1][0]) and np.array_equal(grads[0][1], grads[1][1])


class _Cube(Primitive):
    """A user's primitive whose backward works on raw arrays: recorded whole."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad._make(3 * x.array * x.array * grad.array)


def test_a_users_primitive_with_a_raw_backward_is_replayed_whole(device):
    w = mg.tensor([1.0, 2.0, -1.0], requires_grad=True, device=device)

    def step(x):
        w.grad = None
        loss = _Cube.apply(w * x).sum()
        loss.backward()
        return loss
    step = mg.compile(step)
    for v in (1.0, 2.0, 3.0, 4.0, 5.0):
        step(mg.tensor([v, v, v], device=device))
        assert np.array_equal(w.grad.numpy(), 3 * (w.numpy() * v) ** 2 * v)
    assert step.replays == 3
    assert [i.name for i in step.program.instructions if i.kind == "backward"] == \
        ["_CubeBackward0"]


def test_create_graph_inside_a_step_runs_eagerly_with_a_reason(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        (g,) = mg.autograd.grad((w * w * x).sum(), [w], create_graph=True)
        return (g * g).sum()
    step = mg.compile(step)
    with pytest.warns(CompileWarning, match="create_graph"):
        out = [step(mg.tensor([1.0, float(v)], device=device)).item() for v in range(4)]
    assert out == [4.0 + 16.0 * v * v for v in range(4)] and step.replays == 0


def test_softmax_and_sigmoid_rules_are_flat_and_replay_exactly(device):
    """Their no-grad rules go through on_arrays. Softmax's kernel applies over the last axis
    only: over dim 0 it returns None, which records nothing, and the rule's Tensor ops are
    recorded instead."""
    rng = np.random.default_rng(0)
    xa, wa = rng.standard_normal((2, 4, 6)).astype(np.float32)

    def step(x, w):
        y = (x * w).softmax(-1) + (x - w).log_softmax(0) * (x + w).sigmoid()
        (y * y).sum().backward()

    grads = []
    for compiled in (False, True):
        x, w = (mg.tensor(a, requires_grad=True, device=device) for a in (xa, wa))
        run = mg.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            for _ in range(5):
                run(x, w)
        grads.append((x.grad.numpy(), w.grad.numpy()))
    assert run.replays == 2
    names = [i.name for i in run.program.instructions]
    assert "sigmoid_grad" in names and names.count("softmax_backward") == 1
    assert "backward" not in {i.kind for i in run.program.instructions}
    assert all(i.outs != [None] for i in run.program.instructions)
    assert np.array_equal(grads[0][0], grads[1][0]) and np.array_equal(grads[0][1], grads[1][1])
