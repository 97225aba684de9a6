"""nn.init: in-place initialisers with PyTorch's names, formulas and defaults.

Draws come from minigrad's one generator (``mg.manual_seed``); they follow PyTorch's
distributions, not its exact random numbers.
"""
import math
import warnings

import numpy as np

import minigrad as mg
from minigrad import backend


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity, as torch.nn.init.calculate_gain (``param``:
    leaky_relu's negative slope, default 0.01)."""
    if nonlinearity in ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                        "conv_transpose2d", "conv_transpose3d", "sigmoid", "identity"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError("fan in and fan out need a tensor with at least 2 dims, got shape "
                         f"{tensor.shape}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _is_empty(tensor):
    """True (with PyTorch's warning) for a tensor with no elements, which kaiming_* leave."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return True
    return False


@mg.no_grad()
def uniform_(tensor, a=0.0, b=1.0):
    return tensor.uniform_(a, b)


@mg.no_grad()
def normal_(tensor, mean=0.0, std=1.0):
    return tensor.normal_(mean, std)


@mg.no_grad()
def constant_(tensor, val):
    return tensor.fill_(val)


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio, 2010)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -a, a)


def xavier_normal_(tensor, gain=1.0):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """U(-b, b) with b = gain * sqrt(3 / fan) (He et al., 2015)."""
    if _is_empty(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu"):
    """N(0, std^2) with std = gain / sqrt(fan)."""
    if _is_empty(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return normal_(tensor, 0.0, std)


@mg.no_grad()
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0):
    """Normal draws of ``mean`` and ``std`` truncated to [a, b] (``a`` and ``b`` are values,
    not numbers of std: the usual ``trunc_normal_(w, std=0.02)`` truncates at +-2).
    PyTorch's recipe: uniform draws between the normal CDF's values at a and b, mapped
    back through the inverse CDF and clamped to [a, b]. It warns, as PyTorch, when
    ``mean`` is more than 2 std from [a, b], where the result is less exact."""
    from scipy.special import erfinv
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. "
                      "The distribution of values may be incorrect.", stacklevel=3)
    low = (1.0 + math.erf((a - mean) / std / math.sqrt(2.0))) / 2.0
    high = (1.0 + math.erf((b - mean) / std / math.sqrt(2.0))) / 2.0
    draw = backend.generator().random(tuple(tensor.shape)) * (2 * high - 2 * low) + 2 * low - 1
    draw = erfinv(draw) * (std * math.sqrt(2.0)) + mean
    return tensor.copy_(np.clip(draw, a, b).astype(tensor.dtype))


@mg.no_grad()
def eye_(tensor):
    """The identity matrix in a 2-d tensor (ones on the main diagonal, zeros elsewhere)."""
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got "
                         f"{tensor.ndim}")
    return tensor.copy_(np.eye(*tensor.shape, dtype=tensor.dtype))


@mg.no_grad()
def orthogonal_(tensor, gain=1.0):
    """A (semi-)orthogonal matrix times ``gain`` (Saxe et al., 2013), PyTorch's recipe: the
    Q of the QR factorisation of a normal draw (of ``tensor``'s rows by the product of
    its other dimensions, transposed when wider than tall), its columns' signs set by R's
    diagonal."""
    if tensor.ndim < 2:
        raise ValueError("orthogonal_: only tensors with 2 or more dimensions are supported, "
                         f"got {tensor.ndim}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = backend.generator().standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return tensor.copy_((q * gain).reshape(tuple(tensor.shape)).astype(tensor.dtype))
