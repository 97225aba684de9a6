"""Activations, normalisations over a dim, cosine similarity and dropout as modules."""
import minigrad as mg

from . import functional as F
from .init import constant_
from .module import Module
from .parameter import Parameter


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


def _inplace_str(inplace):
    return ", inplace=True" if inplace else ""


class Hardtanh(_Elementwise):
    """x clamped to [min_val, max_val] elementwise (gradient 0 at the bounds, as PyTorch).

    Args:
        min_val: the lower bound (default -1.0).
        max_val: the upper bound (default 1.0), greater than min_val.
        inplace: overwrite the input and return it (default False).
    """

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__(inplace)
        self.min_val, self.max_val = min_val, max_val
        if not max_val > min_val:  # (an AssertionError, as PyTorch's)
            raise F.ArgumentError(f"Hardtanh: max_val ({max_val}) must be greater than "
                                  f"min_val ({min_val})")

    def forward(self, x):
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + _inplace_str(self.inplace)


class ReLU6(Hardtanh):
    """min(max(x, 0), 6) elementwise (gradient 0 at 0 and 6, as PyTorch).

    Args:
        inplace: overwrite the input and return it (default False).
    """

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class _WithAlpha(_Elementwise):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def extra_repr(self):
        return f"alpha={self.alpha}" + _inplace_str(self.inplace)


class ELU(_WithAlpha):
    """x where x > 0, else alpha * (exp(x) - 1), elementwise.

    Args:
        alpha: the negative side's saturation value (default 1.0).
        inplace: overwrite the input and return it (default False).
    """

    def forward(self, x):
        return F.elu(x, self.alpha, self.inplace)


class CELU(_WithAlpha):
    """x where x > 0, else alpha * (exp(x / alpha) - 1), elementwise.

    Args:
        alpha: the negative side's saturation value (default 1.0), not 0.
        inplace: overwrite the input and return it (default False).
    """

    def forward(self, x):
        return F.celu(x, self.alpha, self.inplace)


class SELU(_Elementwise):
    """scale * elu(x, alpha) elementwise, with the self-normalising constants (see F.selu).

    Args:
        inplace: overwrite the input and return it (default False).
    """

    def forward(self, x):
        return F.selu(x, self.inplace)


class Mish(_Elementwise):
    """x * tanh(softplus(x)) elementwise.

    Args:
        inplace: overwrite the input and return it (default False).
    """

    def forward(self, x):
        return F.mish(x, self.inplace)


class _QuietInplace(_Elementwise):
    """An in-place-capable activation whose repr does not show ``inplace``, as PyTorch's."""

    def extra_repr(self):
        return ""


class Hardsigmoid(_QuietInplace):
    """min(max(x + 3, 0), 6) / 6 elementwise.

    Args:
        inplace: overwrite the input and return it (default False; not in the repr, as
            PyTorch's).
    """

    def forward(self, x):
        return F.hardsigmoid(x, self.inplace)


class Hardswish(_QuietInplace):
    """x * min(max(x + 3, 0), 6) / 6 elementwise.

    Args:
        inplace: overwrite the input and return it (default False; not in the repr, as
            PyTorch's).
    """

    def forward(self, x):
        return F.hardswish(x, self.inplace)


class Softsign(Module):
    """x / (1 + |x|) elementwise."""

    def forward(self, x):
        return F.softsign(x)


class Tanhshrink(Module):
    """x - tanh(x) elementwise."""

    def forward(self, x):
        return F.tanhshrink(x)


class _WithLambd(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def extra_repr(self):
        return str(self.lambd)


class Softshrink(_WithLambd):
    """x - lambd above lambd, x + lambd below -lambd, else 0, elementwise.

    Args:
        lambd: the half-width of the zero band (default 0.5), not negative.
    """

    def forward(self, x):
        return F.softshrink(x, self.lambd)


class Hardshrink(_WithLambd):
    """x where |x| > lambd, else 0, elementwise.

    Args:
        lambd: the half-width of the zero band (default 0.5).
    """

    def forward(self, x):
        return F.hardshrink(x, self.lambd)


class Threshold(_Elementwise):
    """x where x > threshold, else value, elementwise.

    Args:
        threshold: the value to compare with.
        value: what replaces the elements at or below the threshold.
        inplace: overwrite the input and return it (default False).
    """

    def __init__(self, threshold, value, inplace=False):
        super().__init__(inplace)
        self.threshold, self.value = threshold, value

    def forward(self, x):
        return F.threshold(x, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + _inplace_str(self.inplace)


class Softmin(Module):
    """exp(-x_i) / sum_j exp(-x_j) along ``dim`` (Softmax of -x).

    Args:
        dim: as Softmax's.
    """

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmin(x, self.dim, _stacklevel=5)

    def extra_repr(self):
        return f"dim={self.dim}"


class GLU(Module):
    """a * sigmoid(b) for the two halves a, b of the input along ``dim``.

    Args:
        dim: the dim to halve (default -1); its size must be even.
    """

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.glu(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """x where x > 0, else weight * x, with a learnable slope: one for all channels or one per
    channel (dim 1 of the input).

    Args:
        num_parameters: 1 or the number of channels (default 1).
        init: the slopes' initial value (default 0.25).
        device, dtype: the weight's, as the factory functions take them.
    """

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(mg.empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        constant_(self.weight, self.init)

    def forward(self, x):
        return F.prelu(x, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"
