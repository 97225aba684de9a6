"""Activations and dropout as modules."""
from . import functional as F
from .module import Module


class ReLU(Module):
    """max(x, 0) elementwise (gradient 0 at 0, as PyTorch)."""

    def forward(self, x):
        return F.relu(x)


class GELU(Module):
    """x * Phi(x) elementwise (Hendrycks & Gimpel, 2016).

    Args:
        approximate: "none" (exact, with erf) or "tanh" (PyTorch's tanh approximation).
    """

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Dropout(Module):
    """Zero elements with probability p in training, scaling the rest by 1 / (1 - p);
    the identity in eval mode.

    Args:
        p: probability of an element to be zeroed (default 0.5).
    """

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be between 0 and 1, got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"
