"""Activations, normalisations over a dim, cosine similarity and dropout as modules."""
from . import functional as F
from .module import Module


class _Elementwise(Module):
    """An activation that may overwrite its input (``inplace=True``) and return it."""

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Elementwise):
    """max(x, 0) elementwise (gradient 0 at 0, as PyTorch).

    Args:
        inplace: overwrite the input and return it (default False).
    """

    def forward(self, x):
        return F.relu(x, inplace=self.inplace)


class GELU(Module):
    """x * Phi(x) elementwise (Hendrycks & Gimpel, 2016).

    Args:
        approximate: "none" (exact, with erf) or "tanh" (PyTorch's tanh approximation).
    """

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):  # (a RuntimeError too, as PyTorch's)
            raise F.ArgumentError(f"GELU: approximate must be 'none' or 'tanh', got "
                                  f"{approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(_Elementwise):
    """x * sigmoid(x) elementwise (the swish).

    Args:
        inplace: overwrite the input and return it (default False).
    """

    def forward(self, x):
        return F.silu(x, inplace=self.inplace)


class LeakyReLU(_Elementwise):
    """x where x > 0, else negative_slope * x, elementwise.

    Args:
        negative_slope: the slope for x <= 0 (default 0.01).
        inplace: overwrite the input and return it (default False).
    """

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                          else "")


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta elementwise, x itself where beta * x > threshold.

    Args:
        beta: the sharpness (default 1.0).
        threshold: beyond it (beta * x), the identity (default 20.0).
    """

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class LogSigmoid(Module):
    """log(sigmoid(x)) elementwise, computed stably."""

    def forward(self, x):
        return F.logsigmoid(x)


class CosineSimilarity(Module):
    """The cosine of the angle between x1 and x2 along ``dim`` (broadcast together).

    Args:
        dim: the dim of the vectors (default 1).
        eps: the smallest norm divided by (default 1e-8).
    """

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class Sigmoid(Module):
    """1 / (1 + exp(-x)) elementwise."""

    def forward(self, x):
        return x.sigmoid()


class Tanh(Module):
    """tanh(x) elementwise."""

    def forward(self, x):
        return x.tanh()


class Softmax(Module):
    """exp(x_i) / sum_j exp(x_j) along ``dim``: each slice along it becomes a probability
    distribution.

    Args:
        dim: the dim to normalise; None is PyTorch's deprecated implicit choice (dim 0 for
            0-, 1- and 3-d inputs, else 1), with its warning.
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """x_i - log(sum_j exp(x_j)) along ``dim`` (the log of Softmax, computed stably).

    Args:
        dim: as Softmax's.
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.log_softmax(x, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class Dropout(Module):
    """Zero elements with probability p in training, scaling the rest by 1 / (1 - p);
    the identity in eval mode.

    Args:
        p: probability of an element to be zeroed (default 0.5).
        inplace: write the result into the input and return it (default False).
    """

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be between 0 and 1, got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, x):
        return F.dropout(x, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
