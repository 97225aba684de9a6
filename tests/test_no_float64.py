"""No float64 creeps into float32 work: a float32 training step of each model creates no
float64 array in any op's output, saved tensors or gradients, nor in the optimiser state.

(NumPy promotes silently: a bool mask times a Python float, or a float64 table added to a
float32 activation, is float64, and every op after it then runs at half speed.)
"""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd.function import Primitive
from minigrad.models.gpt import GPT
from minigrad.models.transformer import Transformer


def primitives():
    found, todo = [], [Primitive]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return found


def _arrays(value):
    items = value if isinstance(value, (tuple, list)) else (value,)
    for item in items:
        data = item.array if isinstance(item, mg.Tensor) else item
        if hasattr(data, "dtype"):
            yield data


@pytest.fixture
def float64_arrays(monkeypatch):
    """The (op, what) of every float64 array an op's forward returns or saves, or its
    backward returns, while the test runs."""
    found = []

    def watch(cls, name):
        original = getattr(cls, name)

        def watched(ctx, *args, **kwargs):
            out = original(ctx, *args, **kwargs)
            saved = ctx._to_save if name == "forward" else ()
            for what, value in (("output" if name == "forward" else "gradient", out),
                                ("saved", saved or ())):
                for arr in _arrays(value):
                    if arr.dtype == np.float64:
                        found.append((cls.__name__, what, tuple(arr.shape)))
            return out
        monkeypatch.setattr(cls, name, staticmethod(watched))

    for cls in primitives():
        for name in ("forward", "backward"):
            if name in vars(cls):
                watch(cls, name)
    return found


def train_step(model, loss_fn):
    optimizer = mg.optim.AdamW(model.parameters(), lr=1e-3)
    loss = loss_fn()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss, optimizer


def assert_float32(model, optimizer, loss):
    assert loss.dtype == np.float32
    for name, p in model.named_parameters():
        assert p.dtype == np.float32, name
        assert p.grad is None or p.grad.dtype == np.float32, name
    for state in optimizer.state.values():
        for key, value in state.items():
            assert getattr(value, "dtype", np.float32) == np.float32, key


def test_a_transformer_training_step_stays_float32(float64_arrays, device):
    mg.manual_seed(0)
    model = Transformer(20, 20, d_model=16, nhead=2, num_encoder_layers=2,
                        num_decoder_layers=2, dim_feedforward=32, dropout=0.1,
                        norm_first=True, max_len=16).to(device)
    rng = np.random.default_rng(0)
    src, tgt = (mg.tensor(np.where(rng.random((3, 9)) < 0.2, 0, rng.integers(1, 20, (3, 9))),
                          device=device)
                for _ in range(2))

    def loss_fn():
        logits = model(src, tgt[:, :-1])
        return F.cross_entropy(logits.reshape(-1, 20), tgt[:, 1:].reshape(-1),
                               ignore_index=0, label_smoothing=0.1)
    loss, optimizer = train_step(model, loss_fn)
    assert float64_arrays == []
    assert_float32(model, optimizer, loss)


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_a_gpt_training_step_stays_float32(float64_arrays, positional, device):
    mg.manual_seed(0)
    model = GPT(12, d_model=16, nhead=2, num_layers=2, dim_feedforward=32, dropout=0.1,
                max_len=8, positional=positional).to(device)
    idx = mg.tensor(np.random.default_rng(1).integers(0, 12, (2, 9)), device=device)

    def loss_fn():
        return F.cross_entropy(model(idx[:, :-1]).reshape(-1, 12), idx[:, 1:].reshape(-1))
    loss, optimizer = train_step(model, loss_fn)
    assert float64_arrays == []
    assert_float32(model, optimizer, loss)


def test_the_watch_sees_float64(float64_arrays, device):
    """The fixture is not blind: float64 work is reported."""
    x = mg.tensor(np.ones(3), device=device, requires_grad=True)       # float64 on purpose
    (x * 2.0).sum().backward()
    assert ("Mul", "output", (3,)) in float64_arrays
