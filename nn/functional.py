"""nn.functional: the layers' math as functions of Tensors (PyTorch's names and semantics).

Everything here is written with Tensor ops, so gradients come from the engine's primitives;
no function defines a backward of its own.
"""
import math
import warnings

import numpy as np

import minigrad as mg
from minigrad import backend
from minigrad.arguments import _dim
from minigrad.fused import Attention, CrossEntropy, Dropout, LayerNorm, Linear
from minigrad.fused.attention import blocks as attention_blocks
from minigrad.fused.attention import composite as attention_composite
from minigrad.ops import GetItem


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
    minigrad.fused.Linear)."""
    return Linear.apply(input, weight, bias)


def relu(input):
    return input.relu()


def gelu(input, approximate="none"):
    return input.gelu(approximate)


def softmax(input, dim):
    if input.numel() == 0:  # nothing to normalise: the empty result, as PyTorch's
        return _empty_like(input, dim)
    return input.softmax(dim)


def log_softmax(input, dim):
    if input.numel() == 0:
        return _empty_like(input, dim)
    return input.log_softmax(dim)


def _empty_like(input, dim):
    """The (empty) result of a normalisation over ``dim`` of an empty ``input``."""
    _dim(input, dim)
    return input.clone()


def dropout(input, p=0.5, training=True):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (training
    only). The mask comes from minigrad's one generator, so a seed fixes it on any device
    (one fused op, see minigrad.fused.Dropout)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be between 0 and 1, got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    return Dropout.apply(input, p=p)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last len(normalized_shape) dims,
    with the biased variance and eps inside the square root (PyTorch's formula); one fused
    op (see minigrad.fused.LayerNorm)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    n = len(normalized_shape)
    normalized_shape = tuple(normalized_shape)
    if n > input.ndim or tuple(input.shape[input.ndim - n:]) != normalized_shape:
        raise mg.ShapeError(f"layer_norm: normalized_shape {normalized_shape} does not "
                            f"match the last dims of the input shape {input.shape}")
    for name, param in (("weight", weight), ("bias", bias)):
        if param is not None and param.shape != normalized_shape:
            raise mg.ShapeError(f"layer_norm: {name} of shape {param.shape} should have the "
                                f"shape of normalized_shape {normalized_shape}")
    if input.dtype == mg.float16:  # statistics in float32, one rounding, as PyTorch's CPU
        weight, bias = (None if p is None else p.float() for p in (weight, bias))
        return LayerNorm.apply(input.float(), weight, bias, n=n, eps=eps).half()
    return LayerNorm.apply(input, weight, bias, n=n, eps=eps)


def embedding(input, weight, padding_idx=None):
    """Rows of ``weight`` picked by the int64 or int32 tensor ``input`` (ids in
    [0, num_embeddings)); the row at ``padding_idx`` (negative counts from the end) gets no
    gradient."""
    if input.dtype not in (mg.int64, mg.int32):
        raise DTypeError(f"embedding: indices must be an int64 or int32 tensor, "
                         f"got {input.dtype}")
    if weight.ndim != 2:
        raise ArgumentError(f"embedding: weight must be 2-D (num_embeddings, embedding_dim), "
                            f"got shape {weight.shape}")
    n = weight.shape[0]
    bad = _first_out_of_range(input, n)
    if bad is not None:
        raise IndexError(f"embedding: index {bad} is out of range for {n} embeddings "
                         f"(expected ids in [0, {n}))")
    padding_idx = padding_index("embedding", padding_idx, n)
    # the rows by the ids, as weight[input] (which would check the ids again: on a GPU, a
    # second read-back)
    out = GetItem.apply(weight, index=backend.to_device(input.data, weight.device))
    if padding_idx is not None:
        # the same values, but the padding positions are cut from the graph
        out = mg.where((input == padding_idx).unsqueeze(-1), out.detach(), out)
    return out


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


def _first_out_of_range(ids, n, ignore_index=None):
    """The first of the integer ``ids`` outside [0, n) (other than ``ignore_index``), or None.
    On a GPU this reads back from the device once: whether there is one, and its value."""
    flat = ids.data.reshape(-1)
    if flat.size == 0:
        return None
    bad = (flat < 0) | (flat >= n)
    if ignore_index is not None:
        bad &= flat != ignore_index
    first = bad.argmax()  # the first True (0 when there is none)
    xp = backend.xp_of(flat)
    found, value = backend.to_host(xp.stack((bad[first].astype(flat.dtype), flat[first])))
    return int(value) if found else None


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean",
                  label_smoothing=0.0):
    """Cross-entropy of logits ``input`` (N, C) or (N, C, d1, ...) (or (C,)) against class
    indices or class probabilities ``target``, as torch.nn.functional.cross_entropy.

    Computed from log_softmax (never log of a softmax, so never log(0)). With
    ``label_smoothing`` = e the loss is (1 - e) * nll + e * (mean over classes of -log p),
    and the mean reduction divides by the summed weights of the targets, as PyTorch.

    Arguments are checked first, as PyTorch's: class-index targets are int64 (or uint8) in
    [0, C) or ``ignore_index``; ``weight`` has C entries; label_smoothing is at most 1 (as
    PyTorch, a negative or NaN label_smoothing means none).
    """
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
    return loss.reshape(target.shape) if reduction == "none" else loss


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
    if target.dtype not in (mg.int64, mg.uint8):
        raise DTypeError(f"cross_entropy: class-index targets must be int64 (or uint8), got "
                         f"{target.dtype} (class probabilities are floating point)")
    if weight is not None and weight.dtype != input.dtype:
        raise DTypeError(f"cross_entropy: weight of dtype {weight.dtype} should have the "
                         f"input's dtype {input.dtype}")
    class_dim = 0 if input.ndim == 1 else 1
    expected = input.shape[:class_dim] + input.shape[class_dim + 1:]
    if target.shape != expected:
        raise mg.ShapeError(f"cross_entropy: target of shape {target.shape} does not fit input "
                            f"of shape {input.shape} (expected {expected})")
    bad = _first_out_of_range(target, n_classes, ignore_index)
    if bad is not None:
        raise IndexError(f"cross_entropy: Target {bad} is out of bounds for {n_classes} "
                         f"classes (expected [0, {n_classes}) or ignore_index {ignore_index})")


def _check_reduction(op, reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction "
                         "(expected 'mean', 'sum' or 'none')")


def mse_loss(input, target, reduction="mean"):
    """Mean (or sum, or none) of the squared differences. As PyTorch, targets of another
    shape broadcast with a warning, and shapes that do not broadcast are an error."""
    _check_reduction("mse_loss", reduction)
    if target.shape != input.shape:
        try:
            np.broadcast_shapes(input.shape, target.shape)
        except ValueError:
            raise ArgumentError(f"mse_loss: target of shape {target.shape} does not broadcast "
                                f"with input of shape {input.shape}") from None
        warnings.warn(f"mse_loss: Using a target size {target.shape} that is different to "
                      f"the input size {input.shape}. This will likely lead to incorrect "
                      "results due to broadcasting. Please ensure they have the same size.",
                      UserWarning, stacklevel=2)
    diff = input - target
    loss = diff * diff
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """softmax(q @ k^T * scale + mask) @ v over the last two dims, as PyTorch's.

    PyTorch's convention for this function: a bool ``attn_mask`` is True where attention
    IS allowed (the opposite of MultiheadAttention's); a float mask is added to the scores.
    A row whose every key is masked gives zeros, not NaN. Dropout applies whenever
    dropout_p > 0 (as PyTorch's, whatever the training mode).

    Runs the tiled attention of minigrad.fused.Attention (the FlashAttention algorithm: no
    (T, S) matrix per head is kept, and long sequences are computed tile by tile), unless
    ``nn.attention.sdpa_kernel(SDPBackend.MATH)`` asks for the composite of Tensor ops, or
    a float mask requires grad (only the composite differentiates the mask).
    """
    _check_sdpa(query, key, value, attn_mask, dropout_p)
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    mask = None
    if attn_mask is not None:
        mask = _additive(~attn_mask if attn_mask.dtype == mg.bool else attn_mask, query)
    out, _ = attend(query, key, value, mask, 0 if is_causal else None, dropout_p, scale)
    return out


def _check_sdpa(query, key, value, attn_mask, dropout_p):
    op = "scaled_dot_product_attention"
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise ArgumentError(f"{op}: query, key and value must be at least 2-D (..., L, E), got "
                            f"shapes {query.shape}, {key.shape} and {value.shape}")
    if query.dtype.kind != "f":
        raise DTypeError(f"{op}: query, key and value must be floating point, got {query.dtype}")
    check_mask_dtype(op, "attn_mask", attn_mask)
    if not 0.0 <= dropout_p <= 1.0:
        raise ArgumentError(f"{op}: dropout_p must be between 0 and 1, got {dropout_p}")


# which implementation ``attend`` runs: "auto" (the tiled primitive) or "math" (the
# composite); set by nn.attention.sdpa_kernel
SDPA_BACKEND = ["auto"]


def attend(q, k, v, mask=None, causal=None, dropout_p=0.0, scale=None, need_weights=False):
    """Attention with an additive float ``mask`` (broadcastable to (..., T, S)) and an
    optional causal offset c (query i sees keys j <= i + c); what scaled_dot_product_attention
    and MultiheadAttention share. Returns (output, weights), the weights (..., T, S) after
    dropout only when ``need_weights`` (which needs the composite path).
    """
    check_mask_dtype("attend", "mask", mask, allow_bool=False)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    math_path = (need_weights or SDPA_BACKEND[0] == "math"
                 or (mask is not None and mask.requires_grad))
    if not math_path:
        lead = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        block = attention_blocks(math.prod(lead), q.shape[-2], k.shape[-2])
        return Attention.apply(q, k, v, mask, scale=scale, causal=causal,
                               dropout_p=dropout_p, block=block), None
    drop = (lambda w: dropout(w, dropout_p)) if dropout_p > 0.0 else None
    out, weights = attention_composite(q, k, v, mask, causal, scale, drop)
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
