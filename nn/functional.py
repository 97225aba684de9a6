"""nn.functional: the layers' math as functions of Tensors (PyTorch's names and semantics).

Everything here is written with Tensor ops, so gradients come from the engine's primitives;
no function defines a backward of its own but binary_cross_entropy, whose PyTorch gradient is
not the derivative of its value (see BinaryCrossEntropy).
"""
import math
import warnings

import numpy as np

import minigrad as mg
from minigrad import backend, dtypes
from minigrad.arguments import _dim
from minigrad.autograd.function import on_arrays, read_on_host
from minigrad.fused import Attention, CrossEntropy, Dropout, LayerNorm, Linear
from minigrad.fused.attention import blocks as attention_blocks
from minigrad.fused.attention import composite as attention_composite
from minigrad.operands import _fitting
from minigrad.ops import Embedding, GetItem, SetItem


class ArgumentError(mg.ShapeError, AssertionError):
    """An argument whose shape, size or value does not fit the function. A ValueError (and a
    minigrad ShapeError); also a RuntimeError and an AssertionError, the types PyTorch raises
    in these cases, so that code written for PyTorch catches it."""


class DTypeError(TypeError, NotImplementedError, AssertionError):
    """A tensor argument of a dtype the function does not take. A TypeError; also a
    RuntimeError (a NotImplementedError: "not implemented for this dtype") and an
    AssertionError, the types PyTorch raises in these cases."""


def linear(input, weight, bias=None):
    """y = x @ W^T + b, with W of shape (out_features, in_features) (one fused op, see
    minigrad.fused.Linear); b is (out_features,) or, as in PyTorch, any shape that
    broadcasts to the output. A 1-D weight without a bias gives x @ w, as PyTorch's."""
    if weight.ndim == 1:
        if bias is not None:
            raise mg.ShapeError(f"linear: a 1-D weight of shape {tuple(weight.shape)} takes no "
                                f"bias (got one of shape {tuple(bias.shape)}); the weight must "
                                "be a matrix")
        return input.matmul(weight)
    if bias is not None and bias.shape != weight.shape[:1]:
        return _linear_broadcast_bias(input, weight, bias)
    return Linear.apply(input, weight, bias)


def _linear_broadcast_bias(input, weight, bias):
    """x @ W^T + b for a bias other than (out_features,) that broadcasts to the output (a
    scalar, (1,), (N, out_features), ...), as PyTorch adds it."""
    if bias.dtype != input.dtype:
        raise RuntimeError(f"linear: expected input, weight and bias of one dtype, got "
                           f"{input.dtype}, {weight.dtype}, {bias.dtype}")
    out = Linear.apply(input, weight, None)
    try:
        fits = np.broadcast_shapes(bias.shape, out.shape) == tuple(out.shape)
    except ValueError:
        fits = False
    if not fits:
        raise mg.ShapeError(f"linear: bias of shape {bias.shape} does not broadcast to the "
                            f"output's shape {out.shape} (input {input.shape}, weight "
                            f"{weight.shape})")
    return out + bias


def relu(input, inplace=False):
    """max(x, 0) elementwise; with ``inplace`` the input itself is overwritten and returned
    (Tensor.relu_, recorded in the graph as PyTorch's)."""
    return input.relu_() if inplace else input.relu()


def relu_(input):
    return input.relu_()


def tanh(input):
    """tanh elementwise (``torch.nn.functional.tanh``, the Tensor method)."""
    return input.tanh()


def sigmoid(input):
    """1 / (1 + exp(-x)) elementwise (``torch.nn.functional.sigmoid``, the Tensor method)."""
    return input.sigmoid()


def silu(input, inplace=False):
    """x * sigmoid(x) elementwise (the swish of Ramachandran et al., 2017); with ``inplace``
    the input itself is overwritten and returned."""
    if input.dtype.kind != "f":
        raise DTypeError(f"silu: not implemented for {input.dtype} tensors (shape "
                         f"{input.shape}); call .float() first")
    if inplace:
        return input._update("silu_", silu)
    return input * input.sigmoid()


def gelu(input, approximate="none"):
    return input.gelu(approximate)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x (gradient negative_slope at 0, as PyTorch);
    with ``inplace`` the input itself is overwritten and returned."""
    _check_float_input("leaky_relu", input)
    if inplace:
        return input._update("leaky_relu_", lambda t: leaky_relu(t, negative_slope))
    return mg.where(input > 0, input, input * negative_slope)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (PyTorch's
    switch to the linear part); the gradient sigmoid(beta * x) (1 past the threshold).
    float16 is computed in float32 and rounded once."""
    _check_float_input("softplus", input)
    if input.dtype == mg.float16:
        return softplus(input.float(), beta, threshold).half()
    scaled = input * beta
    linear = scaled > threshold
    # (exp only of the kept side: an overflow there would give the other side NaN gradients)
    curve = mg.where(linear, 0.0, scaled).exp().log1p() / beta
    return mg.where(linear, input, curve)


def logsigmoid(input):
    """log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)), finite for every finite x; the
    gradient sigmoid(-x). float16 is computed in float32 and rounded once."""
    _check_float_input("logsigmoid", input)
    if input.dtype == mg.float16:
        return _log_sigmoid(input.float()).half()
    return _log_sigmoid(input)


def _inplace_or(op, input, inplace, compute):
    """``compute(input)``, or with ``inplace`` written into the input, which is returned
    (recorded in the graph as PyTorch's ``op``)."""
    return input._update(op, compute) if inplace else compute(input)


def _clamp_flat_at_bounds(x, min_val, max_val):
    """x clamped to [min_val, max_val], with gradient 1 strictly inside and 0 at the bounds
    and beyond (hardtanh's gradient in PyTorch, not clamp's, which passes at the bounds)."""
    inside = (x > min_val) & (x < max_val)
    return mg.where(inside, x, x.clamp(min_val, max_val).detach())


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient is 1 strictly between the bounds and 0
    at them and beyond, as PyTorch's."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val cannot be greater than max_val, got min_val="
                         f"{min_val} and max_val={max_val}")
    if input.dtype.kind != "f":  # (no gradient to shape: a plain clamp, in the input's dtype)
        return _inplace_or("hardtanh_", input, inplace,
                           lambda t: t.clamp(min_val, max_val).to(t.dtype))
    return _inplace_or("hardtanh_", input, inplace,
                       lambda t: _clamp_flat_at_bounds(t, min_val, max_val))


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def relu6(input, inplace=False):
    """min(max(x, 0), 6): hardtanh(x, 0, 6), with gradient 0 at 0 and 6, as PyTorch's."""
    return hardtanh(input, 0.0, 6.0, inplace)


def _elu(op, input, alpha, scale, input_scale, inplace):
    """scale * x where x > 0, else alpha * scale * (exp(input_scale * x) - 1): the ELU
    family (PyTorch's elu kernel, whose gradient at 0 is the negative side's)."""
    _check_float_input(op, input)

    def compute(x):
        positive = x > 0
        # (exp only of the negative side: an overflow there would give NaN gradients)
        negative = (mg.where(positive, 0.0, x) * input_scale).expm1() * (alpha * scale)
        # at 0 itself the line of the negative side's slope: PyTorch's second derivative
        # there is 0
        at_zero = x * (alpha * scale * input_scale)
        return mg.where(positive, x * scale, mg.where(x < 0, negative, at_zero))
    return _inplace_or(op + "_", input, inplace, compute)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1) (Clevert et al., 2015); the gradient at 0
    is alpha, as PyTorch's."""
    return _elu("elu", input, alpha, 1.0, 1.0, inplace)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """scale * elu(x, alpha) with PyTorch's constants alpha = 1.6732632423543772 and scale
    = 1.0507009873554805 (Klambauer et al., 2017)."""
    return _elu("selu", input, SELU_ALPHA, SELU_SCALE, 1.0, inplace)


def selu_(input):
    return selu(input, inplace=True)


def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x / alpha) - 1) (Barron, 2017); the gradient at 0 is
    1. alpha = 0 is an error, as PyTorch's."""
    if alpha == 0:
        raise RuntimeError("celu: alpha cannot be 0 for CELU (it divides by alpha)")
    return _elu("celu", input, alpha, 1.0, 1.0 / alpha, inplace)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def mish(input, inplace=False):
    """x * tanh(softplus(x)) (Misra, 2019)."""
    _check_float_input("mish", input)
    return _inplace_or("mish_", input, inplace, lambda x: x * softplus(x).tanh())


def hardsigmoid(input, inplace=False):
    """min(max(x + 3, 0), 6) / 6, the piecewise linear sigmoid; the gradient 1/6 strictly
    inside (-3, 3) and 0 at the bounds, as PyTorch's."""
    _check_float_input("hardsigmoid", input)
    return _inplace_or("hardsigmoid_", input, inplace,
                       lambda x: _clamp_flat_at_bounds(x + 3, 0.0, 6.0) / 6)


def hardswish(input, inplace=False):
    """x * min(max(x + 3, 0), 6) / 6 (Howard et al., 2019); the gradient x / 3 + 1/2
    strictly inside (-3, 3), 0 at -3 and below, 1 at 3 and above, as PyTorch's."""
    _check_float_input("hardswish", input)
    return _inplace_or("hardswish_", input, inplace,
                       lambda x: x * _clamp_flat_at_bounds(x + 3, 0.0, 6.0) / 6)


def softsign(input):
    """x / (1 + |x|)."""
    return input / (input.abs() + 1)


def tanhshrink(input):
    """x - tanh(x)."""
    return input - input.tanh()


def softshrink(input, lambd=0.5):
    """x - lambd where x > lambd, x + lambd where x < -lambd, else 0 (the gradient is 0 at
    +-lambd); lambd must not be negative."""
    _check_float_input("softshrink", input)
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambda must be in range [0, inf), but found {lambd} "
                           f"(input of shape {tuple(input.shape)})")
    return mg.where(input > lambd, input - lambd,
                    mg.where(input < -lambd, input + lambd, input * 0))


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0 (the gradient is 0 at +-lambd)."""
    _check_float_input("hardshrink", input)
    return mg.where((input >= -lambd) & (input <= lambd), 0.0, input)


def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value (the gradient 0 at the threshold)."""
    def compute(x):
        out = mg.where(x <= threshold, value, x)
        return out if out.dtype == x.dtype else out.to(x.dtype)
    return _inplace_or("threshold_", input, inplace, compute)


def threshold_(input, threshold, value):
    return _threshold(input, threshold, value, inplace=True)


_threshold = threshold  # (the function, which its own argument ``threshold`` hides)


def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the halves of the input along ``dim`` (the gated
    linear unit of Dauphin et al., 2016); that dim's size must be even."""
    if input.ndim == 0:
        raise RuntimeError("glu: does not support scalars because halving size must be even "
                           "(input of shape ())")
    d = _dim(input, dim)
    _check_float_input("glu", input)
    if input.shape[d] % 2:
        raise RuntimeError(f"glu: halving dimension must be even, but dimension {d} is size "
                           f"{input.shape[d]} (input of shape {tuple(input.shape)})")
    a, b = input.chunk(2, d)
    return a * b.sigmoid()


def prelu(input, weight):
    """x where x > 0, else w * x, with a learnable slope ``weight``: one value, or one per
    channel (dim 1 of the input; a 0- or 1-d input has one channel)."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: expected `weight` to be a scalar or 1D tensor, but got "
                           f"ndim = {weight.ndim} (weight of shape {tuple(weight.shape)})")
    channels = input.shape[1] if input.ndim >= 2 else 1
    if weight.numel() != 1 and weight.numel() != channels:
        raise RuntimeError(f"prelu: mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {weight.numel()} and channel size = {channels} "
                           f"(input of shape {tuple(input.shape)})")
    if weight.numel() == 1:
        w = weight.reshape(())
    else:
        w = weight.reshape((channels,) + (1,) * (input.ndim - 2))
    return mg.where(input > 0, input, w * input)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """softmax(-x) along ``dim``, in ``dtype`` when given; ``dim`` omitted as in
    ``softmax``."""
    if dim is None:
        dim = _implicit_softmax_dim("softmin", input.ndim, _stacklevel)
    if input.numel() == 0:
        return _empty_like(input, dim, dtype)
    return (-input).softmax(dim, dtype=dtype)


def _check_float_input(op, input):
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: not implemented for {input.dtype} tensors (shape "
                         f"{tuple(input.shape)}); call .float() first")


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x_i) / sum_j exp(x_j) along ``dim``, computed in ``dtype`` when given (the input
    is cast first). Without ``dim``, PyTorch's deprecated implicit choice, with its warning:
    dim 0 for 0-, 1- and 3-d inputs, dim 1 otherwise."""
    if dim is None:
        dim = _implicit_softmax_dim("softmax", input.ndim, _stacklevel)
    if input.numel() == 0:  # nothing to normalise: the empty result, as PyTorch's
        return _empty_like(input, dim, dtype)
    return input.softmax(dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x_i - log(sum_j exp(x_j)) along ``dim`` (never the log of a softmax, which underflows),
    in ``dtype`` when given; ``dim`` omitted as in ``softmax``."""
    if dim is None:
        dim = _implicit_softmax_dim("log_softmax", input.ndim, _stacklevel)
    if input.numel() == 0:
        return _empty_like(input, dim, dtype)
    return input.log_softmax(dim, dtype=dtype)


def _implicit_softmax_dim(op, ndim, stacklevel):
    """The dim PyTorch picks when none is given (0 for 0-, 1- and 3-d inputs, else 1), with
    its deprecation warning pointing at the caller."""
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def _empty_like(input, dim, dtype=None):
    """The (empty) result of a normalisation over ``dim`` of an empty ``input``, in
    ``dtype`` if given (with nothing to compute, PyTorch refuses no dtype here)."""
    _dim(input, dim)
    return (input if dtype is None else input.to(dtype)).clone()


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (training
    only). The mask comes from minigrad's one generator, so a seed fixes it on any device
    (one fused op, see minigrad.fused.Dropout).

    As PyTorch's, the input itself is returned when nothing is dropped (eval mode, p = 0);
    with ``inplace`` the result is written into the input, which is returned (recorded in
    the graph as any in-place op: a leaf that requires grad refuses it).
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    if input.dtype.kind != "f" and p != 1.0:  # (p = 1 zeroes any input, as PyTorch's)
        raise DTypeError(f"dropout: the input must be floating point to be scaled by "
                         f"1 / (1 - p), got {input.dtype} (shape {input.shape})")
    if inplace:
        return input._update("dropout_", lambda t: dropout(t, p))
    if p == 1.0:
        return input * 0
    return Dropout.apply(input, p=p)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims,
    with the biased variance and eps inside the square root (PyTorch's formula); one fused
    op (see minigrad.fused.LayerNorm)."""
    if not isinstance(normalized_shape, (tuple, list)):  # (nn.LayerNorm takes an int)
        raise TypeError(f"layer_norm: normalized_shape must be a tuple of ints (as "
                        f"({normalized_shape!r},)), not {type(normalized_shape).__name__}")
    n = len(normalized_shape)
    normalized_shape = tuple(normalized_shape)
    if n == 0:
        raise ArgumentError(f"layer_norm: normalized_shape must have at least one dim, got "
                            f"() for input of shape {input.shape}")
    if input.dtype.kind != "f":
        raise DTypeError(f"layer_norm: not implemented for {input.dtype} tensors (shape "
                         f"{input.shape}); call .float() first")
    if n > input.ndim or tuple(input.shape[input.ndim - n:]) != normalized_shape:
        raise mg.ShapeError(f"layer_norm: normalized_shape {normalized_shape} does not "
                            f"match the last dims of the input shape {input.shape}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and param.shape != normalized_shape:
            raise mg.ShapeError(f"layer_norm: {name} of shape {param.shape} should have the "
                                f"shape of normalized_shape {normalized_shape}")
    kinds = {p.dtype for p in (weight, bias) if p is not None}
    if kinds - {input.dtype} and not (input.dtype == mg.float16 and kinds == {mg.float32}):
        given = ", ".join(f"{name} {p.dtype}" for name, p in (("weight", weight),
                                                              ("bias", bias)) if p is not None)
        raise DTypeError(f"layer_norm: weight and bias must have the input's dtype "
                         f"{input.dtype} (float16 input: or both float32), got {given}")
    if input.dtype == mg.float16:  # statistics in float32, one rounding, as PyTorch's CPU
        weight, bias = (None if p is None else p.float() for p in (weight, bias))
        return LayerNorm.apply(input.float(), weight, bias, n=n, eps=eps).half()
    return LayerNorm.apply(input, weight, bias, n=n, eps=eps)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the int64 or int32 tensor ``input`` (ids in
    [0, num_embeddings)); the row at ``padding_idx`` (negative counts from the end) gets no
    gradient. With ``max_norm``, each row picked whose ``norm_type``-norm exceeds it is
    first rescaled in ``weight`` itself (in place, outside the graph) to norm max_norm,
    as PyTorch's. ``scale_grad_by_freq`` and ``sparse`` gradients are not implemented."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse are not "
                                  "implemented (expected False)")
    if input.dtype not in (mg.int64, mg.int32):
        raise DTypeError(f"embedding: indices must be an int64 or int32 tensor, "
                         f"got {input.dtype}")
    if weight.ndim != 2:
        raise ArgumentError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                            f"got shape {weight.shape}")
    n = weight.shape[0]
    if getattr(input, "level", None) is not None:  # inside vmap: each element's own ids
        return _batched_embedding(input, weight, padding_index("embedding", padding_idx, n))
    _check_in_range(input, n, f"embedding: index {{}} is out of range for {n} embeddings "
                              f"(expected ids in [0, {n}))")
    padding_idx = padding_index("embedding", padding_idx, n)
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    # the rows by the ids (one op; weight[input] would check the ids again); on a GPU, ids
    # out of range (an error at the next read on the host) are wrapped, as CuPy wraps them
    ids = backend.to_device(input.array, weight.device)
    if type(ids) is not np.ndarray:  # (recorded by mg.compile: a replay wraps its own ids)
        ids = on_arrays(backend.wrap_index, ids, n)
    return Embedding.apply(weight, index=ids, padding_idx=padding_idx)


def _batched_embedding(input, weight, padding_idx):
    """embedding of ids batched by vmap, in ops with batching rules (the ids are not read
    on the host): each id against every row's, then one product with the weight."""
    ids = mg.arange(weight.shape[0], device=weight.device)
    one_hot = (input.unsqueeze(-1) == ids).to(weight.dtype)
    if padding_idx is not None:  # (its row gets no gradient)
        weight = mg.where((ids == padding_idx).unsqueeze(-1), weight.detach(), weight)
    return one_hot @ weight


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rescale in place each row of ``weight`` indexed by ``input`` whose norm exceeds
    ``max_norm`` by max_norm / (norm + 1e-7), as PyTorch's embedding_renorm_."""
    xp = backend.xp_of(weight.array)
    ids = backend.to_device(backend.xp_of(input.array).unique(input.array), weight.device)
    picked = weight.array[ids.astype("int64")]
    # each norm accurately (in float64) and rounded once to the weight's dtype, the scale
    # from it in float64, rounded once more, and the product in the weight's dtype
    norms = xp.linalg.norm(picked.astype("float64"), ord=norm_type, axis=1)
    norms = norms.astype(picked.dtype).astype("float64")
    scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(picked.dtype)
    rows = weight._make(ids.astype("int64"))
    with mg.no_grad():
        weight[rows] = weight._make(picked * scale[:, None])


def padding_index(op, padding_idx, num_embeddings):
    """``padding_idx`` in [0, num_embeddings) (a negative one counts from the end), or None;
    outside [-num_embeddings, num_embeddings) it is an error, as in PyTorch."""
    if padding_idx is None:
        return None
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ArgumentError(f"{op}: padding_idx {padding_idx} is out of range for "
                            f"{num_embeddings} embeddings (expected [{-num_embeddings}, "
                            f"{num_embeddings}))")
    return padding_idx + num_embeddings if padding_idx < 0 else padding_idx


def _check_in_range(ids, n, message, ignore_index=None, kind=IndexError):
    """``kind``(message.format(first)), an IndexError unless told, where ``first`` is the
    first of the integer ``ids`` outside [0, n) (other than ``ignore_index``). On the CPU it is raised here; on a GPU
    the check runs on the device and the error is raised at the next read on the host
    (``backend.checks``): no synchronisation. With n = 0 (no row to wrap an id into) it is
    read at once on every device."""
    if getattr(ids, "level", None) is not None:  # (ids batched by vmap: each element's own)
        return
    flat = ids.array.reshape(-1)
    if flat.size == 0:
        return
    bad, value = backend.checks.first_out_of_range(flat, n, ignore_index)
    if type(flat) is np.ndarray or n == 0:
        if bad:
            raise kind(message.format(int(value)))
    else:
        backend.checks.check(bad, value, kind, message)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Cross-entropy of logits ``input`` (N, C) or (N, C, d1, ...) (or (C,), with a 0-d or
    one-element target) against class indices or class probabilities ``target``, as
    torch.nn.functional.cross_entropy.

    Computed from log_softmax (never log of a softmax, so never log(0)). With
    ``label_smoothing`` = e the loss is (1 - e) * nll + e * (mean over classes of -log p),
    and the mean reduction divides by the summed weights of the targets, as PyTorch.

    Arguments are checked first, as PyTorch's: class-index targets are int64 (or uint8 for
    an (N, C) or (C,) input) in [0, C) or ``ignore_index``; ``weight`` has C entries;
    label_smoothing is at most 1 (as PyTorch, a negative or NaN label_smoothing means
    none). ``size_average`` and ``reduce``
    are PyTorch's deprecated spelling of ``reduction``.
    """
    reduction = _reduction("cross_entropy", reduction, size_average, reduce)
    label_smoothing = _check_cross_entropy(input, target, weight, ignore_index, reduction,
                                           label_smoothing)
    class_dim = 0 if input.ndim == 1 else 1
    n_classes = input.shape[class_dim]
    if target.dtype.kind == "f":  # class probabilities, same shape as input
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / n_classes
        logp = input.log_softmax(class_dim)
        w = None
        if weight is not None:  # broadcast the class weights along the class dim
            w = weight.reshape((n_classes,) + (1,) * (input.ndim - class_dim - 1))
        terms = logp * target if w is None else logp * target * w
        loss = -terms.sum(class_dim)
        if reduction == "mean":
            return loss.sum() / (loss.numel() if input.ndim > 1 else 1)
        return loss.sum() if reduction == "sum" else loss

    if input.ndim == 1:  # one sample: (C,) with a 0-d target
        rows, targets = input.reshape(1, n_classes), target.reshape(1)
    else:  # (N, C, d1, ...) -> rows (N * d1 * ..., C)
        moved = input if input.ndim == 2 else input.permute(0, *range(2, input.ndim), 1)
        rows, targets = moved.reshape(target.numel(), n_classes), target.reshape(-1)
    loss = CrossEntropy.apply(rows, targets, weight, ignore_index=ignore_index,
                              label_smoothing=label_smoothing, reduction=reduction)
    if reduction == "none":
        return loss.reshape(() if input.ndim == 1 else target.shape)
    return loss


def _check_cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing):
    """Every argument of cross_entropy checked, as PyTorch does (with its exception types);
    returns label_smoothing as the op takes it (0.0 for a negative or NaN one)."""
    _check_reduction("cross_entropy", reduction)
    if input.dtype.kind != "f":
        raise DTypeError(f"cross_entropy: input must be floating point logits, got {input.dtype}")
    if input.ndim == 0:
        raise ArgumentError("cross_entropy: input must be (C,) or (N, C, ...) logits, "
                            "got a 0-d tensor")
    if label_smoothing > 1.0:
        raise ArgumentError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, "
                            f"got {label_smoothing}")
    n_classes = input.shape[0 if input.ndim == 1 else 1]
    if weight is not None and weight.shape != (n_classes,):
        raise ArgumentError(f"cross_entropy: weight of shape {weight.shape} should be "
                            f"({n_classes},), one weight for each of the {n_classes} classes")
    if target.dtype.kind == "f":
        _check_probability_target(input, target, ignore_index)
    else:
        _check_class_target(input, target, weight, ignore_index, n_classes)
    return float(label_smoothing) if label_smoothing > 0.0 else 0.0


def _check_probability_target(input, target, ignore_index):
    if target.shape != input.shape:
        raise mg.ShapeError(f"cross_entropy: probability targets of shape {target.shape} "
                            f"do not match the input shape {input.shape}")
    if ignore_index != -100:
        raise ArgumentError(f"cross_entropy: ignore_index ({ignore_index}) is not supported "
                            "for class-probability (floating point) targets")


def _check_class_target(input, target, weight, ignore_index, n_classes):
    if target.dtype != mg.int64 and not (target.dtype == mg.uint8 and input.ndim <= 2):
        raise DTypeError(f"cross_entropy: class-index targets must be int64 (or uint8 for a "
                         f"(N, C) or (C,) input), got {target.dtype} for input of shape "
                         f"{input.shape} (class probabilities are floating point)")
    _check_not_differentiable("cross_entropy", "weight", weight)
    if weight is not None and weight.dtype != input.dtype:
        raise DTypeError(f"cross_entropy: weight of dtype {weight.dtype} should have the "
                         f"input's dtype {input.dtype}")
    class_dim = 0 if input.ndim == 1 else 1
    expected = input.shape[:class_dim] + input.shape[class_dim + 1:]
    if target.shape != expected and not (input.ndim == 1 and target.shape == (1,)):
        raise mg.ShapeError(f"cross_entropy: target of shape {target.shape} does not fit input "
                            f"of shape {input.shape} (expected {expected})")
    _check_in_range(target, n_classes, f"cross_entropy: Target {{}} is out of bounds for "
                    f"{n_classes} classes (expected [0, {n_classes}) or ignore_index "
                    f"{ignore_index})", ignore_index)


# --- more losses ------------------------------------------------------------------------------
# Each loss below is written with differentiable Tensor ops (its gradients are the engine's but
# binary_cross_entropy's), checks its arguments as PyTorch does, with PyTorch's exception
# types, and ends in the reduction:
# "mean" (the mean of the elementwise losses, or their weighted mean where it says so), "sum"
# or "none" (the elementwise losses). ``size_average`` and ``reduce`` are PyTorch's deprecated
# spelling of ``reduction``, read as PyTorch reads them.

def _check_reduction(op, reduction, allowed=("mean", "sum", "none")):
    if reduction not in allowed:
        names = ", ".join(repr(r) for r in allowed[:-1]) + f" or {allowed[-1]!r}"
        raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction "
                         f"(expected {names})")


def legacy_reduction(size_average, reduce, stacklevel=3):
    """The reduction that PyTorch's deprecated ``size_average`` and ``reduce`` flags stand
    for (None counts as True): "mean" if both hold, "sum" if only ``reduce`` does, else
    "none"; with PyTorch's deprecation warning."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{reduction}' instead.", UserWarning, stacklevel=stacklevel)
    return reduction


def _reduction(op, reduction, size_average=None, reduce=None, allowed=("mean", "sum", "none")):
    """``reduction`` checked, or the one the legacy flags give; the deprecated
    "elementwise_mean" is "mean", with PyTorch's warning."""
    if size_average is not None or reduce is not None:
        return legacy_reduction(size_average, reduce, stacklevel=4)
    if reduction == "elementwise_mean":
        warnings.warn("reduction='elementwise_mean' is deprecated. Please use reduction='mean' "
                      "instead.", UserWarning, stacklevel=3)
        return "mean"
    _check_reduction(op, reduction, allowed)
    return reduction


def _reduce(loss, reduction):
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def _weighted_reduce(op, loss, reduction, weight, input, mean_by_weight=True):
    """``loss * weight`` reduced; ``weight`` has the input's shape (a ValueError otherwise,
    as PyTorch's), and the mean divides by sum(weight) (``mean_by_weight``) or counts the
    elements."""
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != input.shape:
        raise ValueError(f"{op}: weight of shape {weight.shape} must have the input's shape "
                         f"{input.shape}")
    loss = loss * weight
    if reduction == "mean" and mean_by_weight:
        return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def _check_pair(op, input, target):
    """``target`` broadcast against ``input``: shapes that differ give PyTorch's warning, and
    shapes that do not broadcast an error."""
    if target.shape == input.shape:
        return
    warnings.warn(f"{op}: Using a target size {target.shape} that is different to the input "
                  f"size {input.shape}. This will likely lead to incorrect results due to "
                  "broadcasting. Please ensure they have the same size.", UserWarning,
                  stacklevel=3)
    try:
        np.broadcast_shapes(input.shape, target.shape)
    except ValueError:
        raise ArgumentError(f"{op}: target of shape {target.shape} does not broadcast with "
                            f"input of shape {input.shape}") from None


def _check_floating(op, *tensors):
    """DTypeError unless one of ``tensors`` is floating point (the result type of the op)."""
    if not any(t.dtype.kind == "f" for t in tensors):
        dtypes_ = " and ".join(str(t.dtype) for t in tensors)
        raise DTypeError(f"{op}: not implemented for {dtypes_} tensors (expected floating "
                         "point)")


def _check_not_differentiable(op, name, tensor):
    """PyTorch's refusal of a class weight that requires grad while grad mode is on: the loss
    has no derivative for it."""
    if tensor is not None and tensor.requires_grad and mg.is_grad_enabled():
        raise RuntimeError(f"{op}: the loss is not differentiable with respect to {name}, "
                           f"which cannot have requires_grad=True")


def _check_broadcasts_to(op, name, tensor, shape):
    """ArgumentError unless ``tensor`` broadcasts to ``shape`` (the loss is scaled in place
    by it in PyTorch, so it may not widen the result)."""
    try:
        fits = np.broadcast_shapes(tensor.shape, shape) == tuple(shape)
    except ValueError:
        fits = False
    if not fits:
        raise ArgumentError(f"{op}: {name} of shape {tensor.shape} does not broadcast to the "
                            f"input's shape {tuple(shape)}")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(x - y)^2 elementwise, then reduced; with ``weight`` (the input's shape) the terms
    are w * (x - y)^2 and the mean divides by sum(w). As PyTorch, targets of another shape
    broadcast with a warning, and shapes that do not broadcast are an error."""
    reduction = _reduction("mse_loss", reduction, size_average, reduce)
    _check_pair("mse_loss", input, target)
    _check_floating("mse_loss", input, target)
    diff = input - target
    return _weighted_reduce("mse_loss", diff * diff, reduction, weight, input)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|x - y| elementwise, then reduced (gradient 0 where x = y, as PyTorch); with
    ``weight`` (the input's shape) the terms are w * |x - y| and the mean divides by
    sum(w). Targets of another shape broadcast with a warning."""
    reduction = _reduction("l1_loss", reduction, size_average, reduce)
    _check_pair("l1_loss", input, target)
    return _weighted_reduce("l1_loss", (input - target).abs(), reduction, weight, input)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """With z = |x - y|: 0.5 * z^2 / beta where z < beta, z - 0.5 * beta elsewhere, then
    reduced (Girshick's Fast R-CNN loss). ``beta`` = 0 is the L1 loss; a negative beta is
    an error."""
    reduction = _reduction("smooth_l1_loss", reduction, size_average, reduce)
    _check_pair("smooth_l1_loss", input, target)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss: beta must not be negative, got {beta}")
    if beta == 0.0:
        return _reduce((input - target).abs(), reduction)
    _check_floating("smooth_l1_loss", input, target)
    z = (input - target).abs()
    return _reduce(mg.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """With z = |x - y|: 0.5 * z^2 where z < delta, delta * (z - 0.5 * delta) elsewhere,
    then reduced; equal to delta * smooth_l1_loss with beta = delta. The result has the
    input's dtype, as PyTorch's. With ``weight`` (the input's shape) the terms are scaled
    by it and the mean counts the elements."""
    reduction = _reduction("huber_loss", reduction)
    _check_pair("huber_loss", input, target)
    if not delta > 0:
        raise RuntimeError(f"huber_loss: delta must be positive, got {delta}")
    if input.dtype.kind != "f":
        raise DTypeError(f"huber_loss: the input must be floating point, got {input.dtype}")
    z = (input - target).abs()
    loss = mg.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta))
    if loss.dtype != input.dtype:
        loss = loss.to(input.dtype)
    return _weighted_reduce("huber_loss", loss, reduction, weight, input, mean_by_weight=False)


def _log_sigmoid(x):
    """log(sigmoid(x)) = min(x, 0) - log(1 + exp(-|x|)), finite for every finite x, with the
    gradient sigmoid(-x) everywhere (the kinks of min and |x| at 0 cancel; ``where`` picks
    one side so that neither leaks a one-sided derivative)."""
    nonneg = x >= 0
    neg_abs = mg.where(nonneg, -x, x)
    return mg.where(nonneg, 0.0, x) - neg_abs.exp().log1p()


class BinaryCrossEntropy(mg.autograd.Function):
    """l = (y - 1) * max(log(1 - x), -100) - y * max(log(x), -100) elementwise, with
    PyTorch's gradients, which are not the derivatives of the clamped logs:
    dl/dx = (x - y) / max(x * (1 - x), eps) with eps = 1e-12, and dl/dy = -logit(x) =
    log((1 - x) / x). Near x = 0 and x = 1 they differ from the derivatives of l (dl/dx is
    capped at about 1e12, dl/dy is infinite where the loss is 100): the one function here
    with a backward of its own, for that reason. Backward and jvp are Tensor ops, so they
    differentiate again."""
    node_name = "BinaryCrossEntropyBackward0"
    EPS = float(np.float32(1e-12))  # PyTorch's cap, a float32 constant (not quite 1e-12)

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        return (y - 1) * (-x).log1p().clamp(min=-100.0) - y * x.log().clamp(min=-100.0)

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        dx = dy = None
        if ctx.needs_input_grad[0]:
            dx = grad * (x - y) / ((1 - x) * x).clamp(min=BinaryCrossEntropy.EPS)
        if ctx.needs_input_grad[1]:
            dy = -(x / (1 - x)).log() * grad
        return dx, dy

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.saved_tensors
        eps = BinaryCrossEntropy.EPS
        return dx * (x - y) / ((1 - x) * x).clamp(min=eps) - (x / (1 - x)).log() * dy


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """-w * (y * log(x) + (1 - y) * log(1 - x)) elementwise for probabilities x and targets y
    in [0, 1], then reduced; each log is clamped at -100, as PyTorch's, so x = 0 or 1 gives a
    finite loss. ``input`` and ``target`` have one shape and one dtype; ``weight`` broadcasts
    to that shape."""
    reduction = _reduction("binary_cross_entropy", reduction, size_average, reduce)
    op = "binary_cross_entropy"
    if target.shape != input.shape:
        raise ValueError(f"{op}: Using a target size {target.shape} that is different to the "
                         f"input size {input.shape} is deprecated. Please ensure they have "
                         "the same size.")
    if input.dtype.kind != "f" or target.dtype != input.dtype:
        raise DTypeError(f"{op}: input and target must have one floating point dtype, got "
                         f"{input.dtype} and {target.dtype}")
    if weight is not None:
        _check_not_differentiable(op, "weight", weight)
        _check_broadcasts_to(op, "weight", weight, input.shape)
    for name, t in (("input", input), ("target", target)):
        _check_between_0_and_1(t, f"{op}: all elements of {name} should be between 0 and 1")
    loss = BinaryCrossEntropy.apply(input, target)
    if weight is not None:
        loss = loss * weight.to(loss.dtype)
    return _reduce(loss, reduction)


def _check_between_0_and_1(t, message):
    """RuntimeError(message) unless every element of ``t`` lies in [0, 1] (NaN does not): at
    once on the CPU; on a GPU checked there and raised at the next read on the host
    (``backend.checks``), as PyTorch's CUDA kernel asserts it on the device."""
    d = t.array
    outside = ~((d >= 0) & (d <= 1)).all()
    if type(d) is np.ndarray:
        if outside:
            raise RuntimeError(message)
    else:
        backend.checks.check(outside, backend.xp_of(d).zeros((), np.int64), RuntimeError,
                             message)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """binary_cross_entropy of sigmoid(x), computed from the logits x without forming the
    sigmoid: (1 - y) * x - l * log(sigmoid(x)), with l = 1 + (pos_weight - 1) * y (1 without
    ``pos_weight``), times ``weight``, then reduced. Stable for any finite logit;
    ``pos_weight`` (one weight per class, along the last dim) and ``weight`` broadcast to the
    input's shape."""
    reduction = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    op = "binary_cross_entropy_with_logits"
    if target.shape != input.shape:
        raise ValueError(f"{op}: Target size {target.shape} must be the same as input size "
                         f"{input.shape}")
    if input.dtype.kind != "f" or target.dtype.kind != "f":
        raise DTypeError(f"{op}: input and target must be floating point, got {input.dtype} "
                         f"and {target.dtype}")
    for name, w in (("weight", weight), ("pos_weight", pos_weight)):
        if w is not None:
            _check_not_differentiable(op, name, w)
            _check_broadcasts_to(op, name, w, input.shape)
    # PyTorch's steps, each of its in-place ones rounding into the dtype it writes into: the
    # loss is the target's dtype, the log-sigmoid the input's
    log_sigmoid = _log_sigmoid(input)
    if pos_weight is not None:
        log_sigmoid = (log_sigmoid * ((pos_weight - 1) * target + 1)).to(input.dtype)
    loss = ((1 - target) * input).to(target.dtype)
    loss = (loss - log_sigmoid).to(target.dtype)
    if weight is not None:
        loss = (loss * weight).to(target.dtype)
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """The pointwise Kullback-Leibler divergence of log-probabilities ``input`` (log q) from
    ``target`` p: p * (log p - log q), with 0 * log 0 = 0 (or exp(t) * (t - log q) for a
    log-probability target t, ``log_target``), then reduced. "batchmean" divides the sum by
    the batch size (the first dim), the mean of the KL divergences of the samples; "mean"
    divides by the number of elements, with PyTorch's warning."""
    if size_average is not None or reduce is not None:
        reduction = legacy_reduction(size_average, reduce)
    else:
        if reduction == "mean":
            warnings.warn("reduction: 'mean' divides the total loss by both the batch size and "
                          "the support size.'batchmean' divides only by the batch size, and "
                          "aligns with the KL div math definition.'mean' will be changed to "
                          "behave the same as 'batchmean' in the next major release.",
                          UserWarning, stacklevel=2)
        reduction = _reduction("kl_div", reduction, allowed=("mean", "batchmean", "sum", "none"))
    if input.dtype.kind != "f" or target.dtype.kind != "f":
        raise DTypeError(f"kl_div: integral inputs are not supported, got {input.dtype} and "
                         f"{target.dtype}")
    if log_target:
        loss = target.exp() * (target - input)
    else:  # p log p (0 where p = 0, NaN where p < 0), as torch.xlogy(p, p)
        loss = mg.where(target == 0, 0.0, target * target.log()) - target * input
    if reduction == "batchmean":
        total = loss.sum()
        return total / input.shape[0] if input.ndim else total
    return _reduce(loss, reduction)


def _reduction_of(op, reduction, size_average, reduce):
    """The reduction of a loss whose PyTorch code checks the string itself (no deprecated
    "elementwise_mean"); the legacy flags as elsewhere."""
    if size_average is not None or reduce is not None:
        return legacy_reduction(size_average, reduce, stacklevel=4)
    _check_reduction(op, reduction)
    return reduction


def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                          reduction="mean"):
    """1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1 (0 for other
    y), with cos along the last dim (the squared norms get 1e-12 added, as PyTorch's), then
    reduced. A 1-d target takes 2-d inputs (one row per target), a 0-d target 1-d inputs."""
    op = "cosine_embedding_loss"
    reduction = _reduction(op, reduction, size_average, reduce)
    shapes = (f"(input1 {tuple(input1.shape)}, input2 {tuple(input2.shape)}, target "
              f"{tuple(target.shape)})")
    if target.ndim not in (0, 1):
        raise RuntimeError(f"{op}: 0D or 1D target tensor expected, multi-target not "
                           f"supported {shapes}")
    if input1.ndim != target.ndim + 1 or input2.ndim != target.ndim + 1:
        raise RuntimeError(f"{op}: {target.ndim}D target tensor expects {target.ndim + 1}D "
                           f"input tensors {shapes}")
    d = target.ndim
    eps = 1e-12
    prod_sum = (input1 * input2).sum(d)
    mag_square1 = (input1 * input1).sum(d) + eps
    mag_square2 = (input2 * input2).sum(d) + eps
    cos = prod_sum / (mag_square1 * mag_square2).sqrt()
    pos = mg.where(target == 1, 1 - cos, 0.0)
    neg = mg.where(target == -1, (cos - margin).clamp_min(0), 0.0)
    return _reduce(pos + neg, reduction)


def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None,
                        reduction="mean"):
    """max(0, -y * (x1 - x2) + margin) elementwise (y = 1: x1 should rank higher, y = -1:
    x2), then reduced. The three tensors have one number of dims."""
    op = "margin_ranking_loss"
    reduction = _reduction(op, reduction, size_average, reduce)
    if input1.ndim != input2.ndim or input1.ndim != target.ndim:
        raise RuntimeError(f"{op}: all input tensors should have the same number of dims, got "
                           f"input1 {tuple(input1.shape)}, input2 {tuple(input2.shape)}, target "
                           f"{tuple(target.shape)}")
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The p-norm of x1 - x2 + eps along the last dim (of the broadcast shape)."""
    dim = max(x1.ndim, x2.ndim) - 1
    return (x1 - x2 + eps).norm(p, dim, keepdim)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)), d the pairwise p-norm distance along the last dim
    (with ``eps`` added to the difference); with ``swap``, d(a, n) is min(d(a, n), d(p, n))
    (Balntas et al., 2016). Then reduced. ``margin`` must be positive."""
    op = "triplet_margin_loss"
    reduction = _reduction(op, reduction, size_average, reduce)
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"{op}: the anchor, positive, and negative tensors are expected to "
                           f"have the same number of dimensions, but got: anchor "
                           f"{tuple(anchor.shape)}, positive {tuple(positive.shape)}, and "
                           f"negative {tuple(negative.shape)}")
    dist_pos = pairwise_distance(anchor, positive, p, eps)
    dist_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = mg.minimum(dist_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + dist_pos - dist_neg).clamp_min(0), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """x where y = 1, max(0, margin - x) where y = -1 elementwise (both terms for any other
    y, as PyTorch's), then reduced."""
    reduction = _reduction("hinge_embedding_loss", reduction, size_average, reduce)
    margin_clamp = mg.where(target != 1, (margin - input).clamp_min(0), 0.0)
    output_self = mg.where(target != -1, input, 0.0)
    return _reduce(margin_clamp + output_self, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y * x)) elementwise, the two-class logistic loss for y in {1, -1}, then
    reduced."""
    reduction = _reduction("soft_margin_loss", reduction, size_average, reduce)
    _check_floating("soft_margin_loss", input, target)
    return _reduce((-input * target).exp().log1p(), reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """-(y log sigmoid(x) + (1 - y) log sigmoid(-x)), times ``weight`` (broadcast), averaged
    over the classes (the last dim): one loss per sample, then reduced."""
    reduction = _reduction_of("multilabel_soft_margin_loss", reduction, size_average, reduce)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """The negative log-likelihood of ``target`` under Poisson(rate): exp(x) - y * x for a
    log-rate x (``log_input``), else x - y * log(x + eps); with ``full``, plus Stirling's
    y log y - y + log(2 pi y) / 2 where y > 1. Then reduced."""
    reduction = _reduction_of("poisson_nll_loss", reduction, size_average, reduce)
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + mg.where(target <= 1, 0.0, stirling)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """The negative log-likelihood of ``target`` under N(input, var): (log(var) + (x - y)^2 /
    var) / 2, plus log(2 pi) / 2 with ``full``, then reduced. ``var`` (a float, the input's
    shape, or one dim short of it or of size 1 there) is clamped at ``eps`` without cutting
    its gradient, as PyTorch's; a negative var is an error."""
    op = "gaussian_nll_loss"
    if isinstance(var, float):
        if var < 0:
            raise ValueError(f"{op}: var has negative entry/entries (var = {var})")
        var = var * mg.ones_like(input)
    elif bool((var < 0).any()):
        raise ValueError(f"{op}: var has negative entry/entries (var of shape "
                         f"{tuple(var.shape)})")
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and
                  sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError(f"{op}: var is of incorrect size: var of shape {tuple(var.shape)} "
                             f"for input of shape {tuple(input.shape)}")
    _check_reduction(op, reduction)
    var = var.clone()
    with mg.no_grad():
        var.clamp_(min=eps)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """The multi-class hinge loss of class scores x (C of them, along the last dim) and
    class indices y: sum over i != y of w[y] * max(0, margin - x[y] + x[i])^p, divided by C,
    one loss per sample (``target``'s shape), then reduced. p is 1 or 2; the gradient is 0
    where the hinge is exactly 0, as PyTorch's."""
    op = "multi_margin_loss"
    reduction = _reduction(op, reduction, size_average, reduce)
    if p != 1 and p != 2:
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got p={p}")
    if weight is not None and weight.ndim != 1:
        raise ValueError(f"{op}: weight must be one-dimensional, got weight of shape "
                         f"{tuple(weight.shape)}")
    if input.ndim > 2 or (input.ndim >= 1 and input.shape[-1] == 0):
        raise RuntimeError(f"{op}: expected non-empty vector or matrix with optional 0-dim "
                           f"batch size, but got input of shape {tuple(input.shape)}")
    n_classes = input.shape[-1] if input.ndim else 1
    x = input.reshape(-1, n_classes)
    n = x.shape[0]
    if target.dtype != mg.int64:
        raise RuntimeError(f"{op}: expected target of scalar type int64, got {target.dtype} "
                           f"(target of shape {tuple(target.shape)})")
    if target.ndim > 1 or target.numel() != n:
        raise RuntimeError(f"{op}: target should be 1-D with size equal to the number of input "
                           f"samples ({n}), got target of shape {tuple(target.shape)} for input "
                           f"of shape {tuple(input.shape)}")
    if weight is not None and weight.numel() != n_classes:
        raise RuntimeError(f"{op}: inconsistent weight size, expected {n_classes} but got "
                           f"weight of shape {tuple(weight.shape)}")
    _check_in_range(target, n_classes, f"{op}: target out of range: {{}} (for {n_classes} "
                    "classes)", kind=RuntimeError)
    t = target.reshape(n, 1)
    z = margin - x.gather(1, t) + x
    others = mg.arange(n_classes, device=input.device) != t
    hinge = mg.where((z > 0) & others, z, 0.0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight[target.reshape(n)].reshape(n, 1)
    loss = (hinge.sum(1) / n_classes).reshape(target.shape)
    return _reduce(loss, reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """The negative log-likelihood of log-probabilities ``input`` (N, C), (N, C, d1, ...) or
    (C,) at the class indices ``target`` (N,), (N, d1, ...) or () (int64; uint8 too for
    (N, C) and (C,) inputs): -w[y] * input[..., y, ...] for each target y, 0 where y is
    ``ignore_index``. The mean
    divides the sum by the summed weights w[y] of the targets not ignored (NaN when there
    are none, as PyTorch's); ``weight`` has one entry per class (default 1)."""
    reduction = _reduction("nll_loss", reduction, size_average, reduce)
    _check_nll_loss(input, target, weight, ignore_index)
    n_classes = input.shape[0 if input.ndim == 1 else 1]
    if input.ndim == 1:  # one sample: (C,) with a 0-d (or one-element) target
        rows, targets = input.reshape(1, n_classes), target.reshape(1)
    else:  # (N, C, d1, ...) -> rows (N * d1 * ..., C)
        moved = input if input.ndim == 2 else input.permute(0, *range(2, input.ndim), 1)
        rows, targets = moved.reshape(-1, n_classes), target.reshape(-1)
    targets = targets.long()
    keep = targets != ignore_index
    safe = mg.where(keep, targets, 0)  # ignored positions read class 0, then count for nothing
    picked = rows.gather(1, safe.unsqueeze(1)).squeeze(1)
    w = keep.to(input.dtype) if weight is None else mg.where(keep, weight[safe], 0.0)
    loss = mg.where(keep, -picked * w, 0.0)
    if reduction == "none":
        return loss.reshape(() if input.ndim == 1 else target.shape)
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / w.sum()


def _check_nll_loss(input, target, weight, ignore_index):
    """nll_loss's arguments checked as PyTorch checks them, with its exception types."""
    op = "nll_loss"
    if input.ndim < 1:
        raise ArgumentError(f"{op}: input must have 1 or more dimensions, got a 0-d tensor")
    if input.ndim == 1:
        if target.ndim > 1 or target.numel() != 1:
            raise ArgumentError(f"{op}: a 1-D input (C,) takes a 0-d (or one-element) target, "
                                f"got target of shape {target.shape}")
    else:
        batch = target.shape[0] if target.ndim else 0
        if batch != input.shape[0]:
            raise ArgumentError(f"{op}: Expected input batch_size ({input.shape[0]}) to match "
                                f"target batch_size ({batch}) (input {input.shape}, target "
                                f"{target.shape})")
        expected = input.shape[:1] + input.shape[2:]
        if target.shape != expected:
            raise ArgumentError(f"{op}: target of shape {target.shape} does not fit input of "
                                f"shape {input.shape} (expected {expected})")
    if input.dtype.kind != "f":
        raise DTypeError(f"{op}: input must be floating point log-probabilities, got "
                         f"{input.dtype}")
    if target.dtype != mg.int64 and not (target.dtype == mg.uint8 and input.ndim <= 2):
        raise DTypeError(f"{op}: target must be int64 class indices (or uint8 for a (N, C) or "
                         f"(C,) input), got {target.dtype} for input of shape {input.shape}")
    n_classes = input.shape[0 if input.ndim == 1 else 1]
    if weight is not None:
        if weight.shape != (n_classes,):
            raise ArgumentError(f"{op}: weight of shape {weight.shape} should be ({n_classes},), "
                                f"one weight for each of the {n_classes} classes")
        if weight.dtype != input.dtype:
            raise DTypeError(f"{op}: weight of dtype {weight.dtype} should have the input's "
                             f"dtype {input.dtype}")
        _check_not_differentiable(op, "weight", weight)
    _check_in_range(target, n_classes, f"{op}: Target {{}} is out of bounds for {n_classes} "
                    f"classes (expected [0, {n_classes}) or ignore_index {ignore_index})",
                    ignore_index)


def one_hot(tensor, num_classes=-1):
    """An int64 tensor of shape (*tensor.shape, num_classes), 1 at each index of the int64
    ``tensor`` and 0 elsewhere. num_classes = -1 takes one more than the largest index;
    negative indices, indices >= num_classes and an empty tensor without num_classes are
    errors, as in PyTorch."""
    if not isinstance(num_classes, (int, np.integer)) or isinstance(num_classes, bool):
        raise TypeError(f"one_hot: num_classes must be an int, got "
                        f"{type(num_classes).__name__}")
    if tensor.dtype != mg.int64:
        raise DTypeError(f"one_hot: the index tensor must be int64, got {tensor.dtype}")
    if tensor.numel() == 0:
        if num_classes <= 0:
            raise RuntimeError(f"one_hot: cannot infer the number of classes from an empty "
                               f"tensor (shape {tensor.shape}); pass num_classes")
        return mg.zeros(tensor.shape + (num_classes,), dtype=mg.int64, device=tensor.device)
    if num_classes == -1:  # (the result's last dim is read from the values)
        read_on_host("F.one_hot() without num_classes")
    flat = tensor.array.reshape(-1)
    negative = "one_hot: class values must be non-negative, got {}"
    too_big = f"one_hot: class values must be smaller than num_classes ({num_classes}), got {{}}"
    if num_classes != -1 and type(flat) is not np.ndarray:
        # on a GPU, checked there and raised at the next read (backend.checks), as PyTorch
        # leaves it to its CUDA kernel's assert: no synchronisation
        low, high = flat.min(), flat.max()
        backend.checks.check(low < 0, low, RuntimeError, negative)
        backend.checks.check(high >= num_classes, high, RuntimeError, too_big)
    else:
        low, high = (int(v) for v in backend.to_host(backend.xp_of(flat).stack((flat.min(),
                                                                               flat.max()))))
        if low < 0:
            raise RuntimeError(negative.format(low))
        if num_classes == -1:
            num_classes = high + 1
        elif num_classes <= high:
            raise RuntimeError(too_big.format(high))
    classes = mg.arange(num_classes, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).to(mg.int64)


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """x / max(||x||_p, eps) along ``dim`` (each slice scaled to unit p-norm; a slice whose
    norm is below eps is divided by eps, so zeros stay zeros)."""
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps)) along ``dim``, x1 and x2 broadcast
    together (integer inputs cast to the floating result dtype). As in PyTorch, each norm is
    clamped at eps in place without recording it: the gradient goes through the norm as if
    unclamped."""
    dtype = dtypes.promote(x1, x2)
    if dtype.kind != "f":
        raise RuntimeError(f"cosine_similarity: expected common dtype to be floating point, "
                           f"yet common dtype is {dtype}")
    x1, x2 = (x if x.dtype.kind == "f" else x.to(dtype) for x in (x1, x2))
    try:
        shape = tuple(np.broadcast_shapes(x1.shape, x2.shape))
    except ValueError:
        raise mg.ShapeError(f"cosine_similarity: shapes {tuple(x1.shape)} and "
                            f"{tuple(x2.shape)} do not broadcast") from None
    x1, x2 = x1._expand_to(shape), x2._expand_to(shape)
    normalised = []
    for x in (x1, x2):
        norm = x.norm(2, dim, keepdim=True).clone()
        with mg.no_grad():
            norm.clamp_(min=eps)
        normalised.append(x / norm)
    return (normalised[0] * normalised[1]).sum(dim)


def pad(input, pad, mode="constant", value=None):
    """``input`` padded on its last dims, ``pad`` = (left, right) of the last dim, then of
    the one before, and so on. "constant" fills with ``value`` (0 by default; a negative
    pad cuts); "reflect" mirrors the entries next to each edge (the edge not repeated),
    "replicate" repeats the edge, "circular" wraps around. These three pad 1, 2 or 3 dims
    of an input with one or two more, as in PyTorch. Gradients sum over the copies."""
    pairs = _pad_pairs(input, pad)
    if mode == "constant":
        return _constant_pad(input, pairs, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"pad: unrecognised padding mode {mode!r} (expected "
                                  "'constant', 'reflect', 'replicate' or 'circular')")
    if value is not None and value != 0:
        raise RuntimeError(f"pad: padding mode {mode!r} doesn't take in value argument (got "
                           f"{value})")
    k = len(pairs)
    if k not in (1, 2, 3) or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(f"pad: padding size {2 * k} is not supported for "
                                  f"{input.ndim}D input tensor in mode {mode!r} (1 to 3 dims "
                                  "padded, of an input with 1 or 2 more dims)")
    if mode != "circular" and input.dtype == mg.bool:
        raise DTypeError(f"pad: mode {mode!r} is not implemented for bool tensors")
    batched = input.ndim == k + 2
    if mode != "circular" and any(n == 0 for n in input.shape[1 if batched else 0:]):
        raise RuntimeError(f"pad: expected a {k + 1}D or {k + 2}D (batch mode) tensor with "
                           f"possibly 0 batch size and other non-zero dimensions, got shape "
                           f"{tuple(input.shape)}")
    out = input
    for d, left, right in pairs:
        out = _index_pad(out, d, left, right, mode)
    return out


def _pad_pairs(input, pad):
    """``pad`` as (dim, left, right) triples, after PyTorch's checks of its length."""
    pad = tuple(pad)
    for i, p in enumerate(pad):
        if not isinstance(p, (int, np.integer)) or isinstance(p, bool):
            raise TypeError(f"pad(): argument 'pad' (position 2) must be tuple of ints, but "
                            f"found element of type {type(p).__name__} at pos {i}")
    if len(pad) % 2:
        raise RuntimeError(f"pad: padding length must be divisible by 2, got {len(pad)}")
    if len(pad) > 2 * input.ndim:
        raise RuntimeError(f"pad: padding length should be less than or equal to two times "
                           f"the input dimension but got padding length {len(pad)} and input "
                           f"of dimension {input.ndim}")
    return [(input.ndim - 1 - i, int(pad[2 * i]), int(pad[2 * i + 1]))
            for i in range(len(pad) // 2)]


def _constant_pad(input, pairs, value):
    """The input cut where a pad is negative, written into a tensor of ``value``."""
    shape = list(input.shape)
    crop, region = [slice(None)] * input.ndim, [slice(None)] * input.ndim
    for d, left, right in pairs:
        n = shape[d]
        kept = n - max(-left, 0) - max(-right, 0)
        if kept < 0:
            raise RuntimeError(f"pad: the negative padding ({left}, {right}) cuts more than "
                               f"the {n} entries of dim {d} (input shape "
                               f"{tuple(input.shape)})")
        crop[d] = slice(max(-left, 0), max(-left, 0) + kept)
        region[d] = slice(max(left, 0), max(left, 0) + kept)
        shape[d] = kept + max(left, 0) + max(right, 0)
    # PyTorch reads the value as a double, then checks that it fits the dtype (so -1 into
    # uint8 is refused here, where full takes it)
    value = _fitting(float(value), input.array.dtype, "pad")
    filled = mg.full(tuple(shape), value, dtype=input.dtype, device=input.device)
    if any(s != slice(None) for s in crop):
        input = input[tuple(crop)]
    return SetItem.apply(filled, input, index=tuple(region), then=None)


def _index_pad(x, d, left, right, mode):
    """``x`` padded along dim ``d`` by picking entries: mirrored ("reflect"), the edge's
    ("replicate") or wrapped around ("circular")."""
    n = x.shape[d]
    if mode == "reflect" and (left >= n or right >= n):
        raise RuntimeError(f"pad: padding size should be less than the corresponding input "
                           f"dimension, but got padding ({left}, {right}) at dimension {d} "
                           f"of input {tuple(x.shape)}")
    if mode == "circular" and (left > n or right > n):
        raise RuntimeError(f"pad: padding ({left}, {right}) of dim {d} of size {n} causes "
                           "wrapping around more than once")
    if n + left + right < 1:
        raise RuntimeError(f"pad: input (size {n} at dim {d}) is too small for the padding "
                           f"({left}, {right}): the output size would be {n + left + right}")
    at = np.arange(-left, n + right)
    if mode == "reflect":
        at = np.abs(at)
        at = np.where(at >= n, 2 * (n - 1) - at, at)
    elif mode == "replicate":
        at = np.clip(at, 0, n - 1)
    else:  # around the part kept after the negative pads, as PyTorch
        start, kept = max(-left, 0), n - max(-left, 0) - max(-right, 0)
        at = start + (np.arange(n + left + right) - max(left, 0)) % kept
    index = backend.to_device(at.astype(np.int64), x.device)
    return GetItem.apply(x, index=(slice(None),) * d + (index,))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v over the last two dims, as PyTorch's.

    PyTorch's convention for this function: a bool ``attn_mask`` is True where attention
    IS allowed (the opposite of MultiheadAttention's); a float mask is added to the scores.
    A row whose every key is masked gives zeros, not NaN. Dropout applies whenever
    dropout_p > 0 (as PyTorch's, whatever the training mode). With ``enable_gqa``
    (grouped-query attention), key and value may have fewer heads (dim -3) than the query,
    a number that divides the query's: each of their heads serves that many consecutive
    query heads.

    Runs the tiled attention of minigrad.fused.Attention (the FlashAttention algorithm: no
    (T, S) matrix per head is kept, and long sequences are computed tile by tile), unless
    ``nn.attention.sdpa_kernel(SDPBackend.MATH)`` asks for the composite of Tensor ops, or
    a float mask requires grad (only the composite differentiates the mask).
    """
    _check_sdpa(query, key, value, attn_mask, dropout_p, is_causal)
    if enable_gqa:
        key, value = _repeat_kv_heads(query, key, value)
    mask = None
    if attn_mask is not None:
        mask = _additive(~attn_mask if attn_mask.dtype == mg.bool else attn_mask, query)
    out, _ = attend(query, key, value, mask, 0 if is_causal else None, dropout_p, scale)
    return out


def _check_sdpa(query, key, value, attn_mask, dropout_p, is_causal):
    op = "scaled_dot_product_attention"
    if is_causal and attn_mask is not None:
        raise ArgumentError(f"{op}: attn_mask must be None when is_causal=True (the causal "
                            f"mask is the mask), got attn_mask of shape {attn_mask.shape}")
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise ArgumentError(f"{op}: query, key and value must be at least 2-D (..., L, E), got "
                            f"shapes {query.shape}, {key.shape} and {value.shape}")
    if query.dtype.kind != "f":
        raise DTypeError(f"{op}: query, key and value must be floating point, got {query.dtype}")
    check_mask_dtype(op, "attn_mask", attn_mask)
    if not 0.0 <= dropout_p <= 1.0:
        raise ArgumentError(f"{op}: dropout_p must be between 0 and 1, got {dropout_p}")


def _repeat_kv_heads(query, key, value):
    """Key and value with each head (dim -3) repeated to the query's number of heads, as
    PyTorch's grouped-query attention (``enable_gqa``)."""
    op = "scaled_dot_product_attention"
    if min(query.ndim, key.ndim, value.ndim) < 3:
        raise IndexError(f"{op}: enable_gqa needs query, key and value with a heads dim "
                         f"(..., H, L, E), got shapes {query.shape}, {key.shape} and "
                         f"{value.shape}")
    heads = query.shape[-3]
    if heads % key.shape[-3] or heads % value.shape[-3]:
        raise ArgumentError(f"{op}: Number of heads in key and value must divide the number "
                            f"of heads in query (enable_gqa), got query {query.shape}, key "
                            f"{key.shape} and value {value.shape}")
    return tuple(t if t.shape[-3] == heads else
                 t.repeat_interleave(heads // t.shape[-3], dim=-3) for t in (key, value))


# which implementation ``attend`` runs: "auto" (the tiled primitive) or "math" (the
# composite); set by nn.attention.sdpa_kernel
SDPA_BACKEND = ["auto"]


def default_scale(head_dim):
    """Attention's default scale, 1 / sqrt(head_dim); inf for heads of size 0, as PyTorch's
    (their scores, sums of no products, are 0: every key weighs the same)."""
    return 1.0 / math.sqrt(head_dim) if head_dim else math.inf


def attend(q, k, v, mask=None, causal=None, dropout_p=0.0, scale=None, need_weights=False):
    """Attention with an additive float ``mask`` (broadcastable to (..., T, S)) and an
    optional causal offset c (query i sees keys j <= i + c); what scaled_dot_product_attention
    and MultiheadAttention share. Returns (output, weights), the weights (..., T, S) after
    dropout only when ``need_weights`` (which needs the composite path). A row whose every
    key is masked gives zeros, but NaN when the weights are wanted (PyTorch's
    MultiheadAttention computes them with a plain softmax).
    """
    check_mask_dtype("attend", "mask", mask, allow_bool=False)
    scale = default_scale(q.shape[-1]) if scale is None else scale
    if not need_weights and q.dtype == mg.float16 and q.device.type == "cpu":
        # PyTorch's CPU kernel keeps float16 scores and softmax in float32 (no overflow past
        # 65504) and rounds the output once; its weights, where wanted, are float16 ops
        mask = None if mask is None else mask.float()
        out, _ = attend(q.float(), k.float(), v.float(), mask, causal, dropout_p, scale)
        return out.half(), None
    math_path = (need_weights or SDPA_BACKEND[0] == "math"
                 or (mask is not None and mask.requires_grad))
    if not math_path:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        block = attention_blocks(math.prod(lead), q.shape[-2], k.shape[-2])
        return Attention.apply(q, k, v, mask, scale=scale, causal=causal,
                               dropout_p=dropout_p, block=block), None
    drop = (lambda w: dropout(w, dropout_p)) if dropout_p > 0.0 else None
    out, weights = attention_composite(q, k, v, mask, causal, scale, drop, safe=not need_weights)
    return out, (weights if need_weights else None)


def check_mask_dtype(op, name, mask, allow_bool=True):
    """DTypeError unless ``mask`` is None, floating point or (where allowed) bool: an integer
    mask is neither "may attend" nor an amount to add, so PyTorch refuses it too."""
    if mask is None or mask.dtype.kind == "f" or (allow_bool and mask.dtype == mg.bool):
        return
    kind = "bool or floating point" if allow_bool else "floating point (additive)"
    raise DTypeError(f"{op}: {name} must be a {kind} tensor, got {mask.dtype}")


def _additive(mask, like):
    """The mask in ``like``'s dtype, a bool one (True: may not attend) as 0 / -inf."""
    if mask.dtype != mg.bool:
        return mask.to(like.dtype)
    zeros = mg.zeros(mask.shape, dtype=like.dtype, device=like.device)
    return zeros.masked_fill(mask, float("-inf"))
