"""A tiny model built from nn modules memorises a handful of random token sequences.

Embedding -> Linear -> ReLU -> LayerNorm -> Linear, trained with cross-entropy and plain
SGD written out here (``p -= lr * grad`` under ``no_grad``), must reach zero training error:
a smoke test that every layer passes useful gradients to the ones before it.
"""
import numpy as np

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F

VOCAB, SEQ_LEN, N_SEQ, N_CLASSES = 12, 6, 8, 8


class TinyClassifier(nn.Module):
    """Classify a whole token sequence.

    Shape:
        input (B, T) integer -> logits (B, n_classes)
    """

    def __init__(self, vocab, seq_len, d_model, hidden, n_classes):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.fc1 = nn.Linear(seq_len * d_model, hidden)
        self.act = nn.ReLU()
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, n_classes)

    def forward(self, ids):
        x = self.embed(ids)                     # (B, T, E)
        x = x.reshape(x.shape[0], -1)           # (B, T * E)
        return self.fc2(self.norm(self.act(self.fc1(x))))


def sgd_step(model, lr):
    with mg.no_grad():
        for p in model.parameters():
            p.sub_(lr * p.grad)
    model.zero_grad()


def test_tiny_model_memorises_random_sequences(device):
    rng = np.random.default_rng(0)
    ids = mg.tensor(rng.integers(0, VOCAB, size=(N_SEQ, SEQ_LEN)), device=device)
    labels = mg.tensor(rng.permutation(N_CLASSES), device=device)  # one class per sequence
    model = TinyClassifier(VOCAB, SEQ_LEN, d_model=8, hidden=32, n_classes=N_CLASSES)
    model.to(device)
    initial = {name: p.numpy().copy() for name, p in model.named_parameters()}

    losses, errors = [], N_SEQ
    for _ in range(300):
        logits = model(ids)
        loss = F.cross_entropy(logits, labels)
        loss.backward()
        losses.append(loss.item())
        errors = int((logits.argmax(-1) != labels).sum().item())
        if errors == 0 and loss.item() < 0.05:
            break
        sgd_step(model, lr=0.05)

    assert errors == 0, f"{errors} of {N_SEQ} sequences still misclassified"
    assert losses[-1] < 0.05 and losses[0] > 1.0  # about log(8) = 2.08 at the start
    assert np.isfinite(losses).all()
    # every parameter took part: it has a gradient and it moved
    for name, p in model.named_parameters():
        assert p.grad is not None and np.abs(p.grad.numpy()).sum() > 0, name
        assert not np.array_equal(p.numpy(), initial[name]), name
