"""Positional information for transformers: the fixed sinusoidal table of the original paper,
learned absolute positions, rotary embeddings of queries and keys, and relative positions as
biases of the attention scores (ALiBi's fixed slopes, T5's learned buckets)."""
import numpy as np

import minigrad as mg

from .linear import Embedding
from .module import Module


class SinusoidalPositionalEncoding(Module):
    """Adds the fixed table PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] =
    cos(pos / 10000^(2i/d)) to its input (Vaswani et al., 2017, section 3.5).

    Args:
        d_model: the embedding size d.
        max_len: the number of positions in the table (default 5000).
    Shape:
        input (B, T, d_model) -> output (B, T, d_model), positions offset..offset+T-1;
        ``pe`` is the (max_len, d_model) table, a buffer left out of the state_dict.
    """

    def __init__(self, d_model, max_len=5000, device=None, dtype=None):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        position = np.arange(max_len)[:, None]                               # (max_len, 1)
        div = np.power(10000.0, np.arange(0, d_model, 2) / d_model)          # 10000^(2i/d)
        table = np.zeros((max_len, d_model))
        table[:, 0::2] = np.sin(position / div)
        table[:, 1::2] = np.cos(position / div[:d_model // 2])  # an odd d_model has no last cos
        self.register_buffer("pe", mg.tensor(table, dtype=dtype or mg.get_default_dtype(),
                                             device=device), persistent=False)

    def forward(self, x, offset=0):
        _check_length(self, offset, x.shape[1], self.max_len)
        return x + self.pe[offset:offset + x.shape[1]].to(x.dtype)

    def extra_repr(self):
        return f"{self.d_model}, max_len={self.max_len}"


class LearnedPositionalEmbedding(Embedding):
    """Adds a learned vector per position: an Embedding whose indices are the positions.

    Args:
        max_len: the number of positions that can be embedded.
        d_model: the embedding size; ``weight`` is (max_len, d_model), N(0, 1) initialised
            as nn.Embedding's.
    Shape:
        input (B, T, d_model) -> output (B, T, d_model): x + weight[offset:offset + T]
    """

    def __init__(self, max_len, d_model, device=None, dtype=None):
        super().__init__(max_len, d_model, device=device, dtype=dtype)
        self.max_len, self.d_model = max_len, d_model

    def forward(self, x, offset=0):
        _check_length(self, offset, x.shape[1], self.max_len)
        return x + self.weight[offset:offset + x.shape[1]]


class RotaryEmbedding(Module):
    """Rotates each pair of features of a query or key by an angle proportional to its
    position, so that q(m) . k(n) depends on m - n only (RoFormer, Su et al., 2021).

    Pairs follow GPT-NeoX's "rotate half" layout: feature i is paired with feature
    i + head_dim/2, both turned by the angle pos * base^(-2i/head_dim).

    Args:
        head_dim: the size D of each head (even).
        base: the wavelength base (default 10000).
    Shape:
        input (..., T, head_dim) -> output of the same shape, at positions offset..offset+T-1.
        The cos and sin tables (``cos_cached``, ``sin_cached``, left out of the state_dict)
        are built for the input's dtype and device and grown when a longer input comes.
    """

    def __init__(self, head_dim, base=10000):
        super().__init__()
        if head_dim % 2 != 0:
            raise ValueError(f"RotaryEmbedding: head_dim must be even, got {head_dim}")
        self.head_dim, self.base = head_dim, base
        self.inv_freq = 1.0 / np.power(float(base), np.arange(0, head_dim, 2) / head_dim)
        self.register_buffer("cos_cached", None, persistent=False)
        self.register_buffer("sin_cached", None, persistent=False)

    def forward(self, x, offset=0):
        if x.shape[-1] != self.head_dim:
            raise mg.ShapeError(f"RotaryEmbedding: the last dim of the input (shape {x.shape}) "
                                f"must be head_dim={self.head_dim}")
        T = x.shape[-2]
        self._grow(offset + T, x)
        cos = self.cos_cached[offset:offset + T]                             # (T, D)
        sin = self.sin_cached[offset:offset + T]                             # (T, D)
        return x * cos + _rotate_half(x) * sin

    def _grow(self, length, like):
        """Rebuild the tables when they are too short (then at least doubling them), or not
        of ``like``'s dtype and device."""
        cached = self.cos_cached
        n = 0 if cached is None else cached.shape[0]
        if n >= length and cached.dtype == like.dtype and cached.device == like.device:
            return
        n = max(length, 2 * n) if n < length else n
        angles = np.outer(np.arange(n), self.inv_freq)                       # (n, D/2)
        angles = np.concatenate([angles, angles], axis=1)                    # (n, D)
        self.cos_cached = mg.tensor(np.cos(angles), dtype=like.dtype, device=like.device)
        self.sin_cached = mg.tensor(np.sin(angles), dtype=like.dtype, device=like.device)

    def extra_repr(self):
        return f"{self.head_dim}, base={self.base}"


def _rotate_half(x):
    """(x1, x2) -> (-x2, x1) on the two halves of the last dim: a quarter turn of each pair."""
    x1, x2 = x.chunk(2, dim=-1)
    return mg.cat([-x2, x1], dim=-1)


def _check_length(module, offset, T, max_len):
    if offset < 0 or offset + T > max_len:
        raise ValueError(f"{type(module).__name__}: positions {offset}..{offset + T - 1} do not "
                         f"fit in max_len={max_len}")


# --- relative positions as biases of the attention scores ---------------------------------------

def alibi_slopes(num_heads):
    """ALiBi's head slopes (Press et al., 2022): for n heads, a power of two, the geometric
    sequence 2^(-8/n), 2^(-16/n), ..., 2^(-8); otherwise the slopes of the largest power of
    two m < n, then every other slope of 2m heads for the remaining n - m heads (the
    paper's rule, as in its code). Returns a float64 ndarray (num_heads,)."""
    if num_heads <= 0:
        raise ValueError(f"alibi_slopes: num_heads must be > 0, got {num_heads}")

    def power_of_two(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]
    m = 2 ** int(np.floor(np.log2(num_heads)))
    slopes = power_of_two(m)
    if m < num_heads:
        slopes += power_of_two(2 * m)[0::2][:num_heads - m]
    return np.array(slopes)


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32,
                             max_distance=128):
    """T5's bucket of each relative position (key position - query position; Raffel et
    al., 2020): exact buckets for the distances below half the buckets, logarithmically
    wider ones up to ``max_distance``, and the last bucket beyond. Bidirectional: half the
    buckets for keys after the query; otherwise (causal) keys after the query share bucket 0.
    Computed in float32, as T5 does. Returns an int64 ndarray of the input's shape."""
    rel = np.asarray(relative_position, dtype=np.int64)
    buckets = np.zeros_like(rel)
    if bidirectional:
        num_buckets //= 2
        buckets += (rel > 0) * num_buckets
        rel = np.abs(rel)
    else:
        rel = -np.minimum(rel, 0)
    max_exact = num_buckets // 2
    with np.errstate(divide="ignore"):
        large = max_exact + (np.log(rel.astype(np.float32) / np.float32(max_exact))
                             / np.float32(np.log(max_distance / max_exact))
                             * np.float32(num_buckets - max_exact)).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return buckets + np.where(rel < max_exact, rel, large)


def _distances(T, S, offset):
    """(T, S) int64: key position j minus query position offset + i."""
    return np.arange(S)[None, :] - (offset + np.arange(T))[:, None]


class ALiBi(Module):
    """Attention with linear biases (Press et al., 2022): each head h adds
    -slope_h * |i - j| to the score of query position i for key position j, and positions
    enter the model nowhere else. No parameters; nothing to outgrow at longer inputs.

    Args:
        num_heads: H; the slopes are ``alibi_slopes(H)`` (float64 buffer ``slopes``, left
            out of the state_dict).
    Shape:
        forward(T, S, offset=0, like) -> (H, T, S) bias, queries at positions
        offset..offset+T-1, keys at 0..S-1, of ``like``'s dtype and device (without
        ``like``: the default dtype, on the module's device).
    """

    def __init__(self, num_heads, device=None):
        super().__init__()
        self.num_heads = num_heads
        self.register_buffer("slopes", mg.tensor(alibi_slopes(num_heads), dtype=mg.float64,
                                                 device=device), persistent=False)

    def forward(self, T, S, offset=0, like=None):
        device = self.slopes.device if like is None else like.device
        slopes = self.slopes.to(device)
        keys = mg.arange(S, dtype=slopes.dtype, device=device)
        queries = mg.arange(offset, offset + T, dtype=slopes.dtype, device=device)
        distances = (keys[None, :] - queries[:, None]).abs()                   # (T, S)
        bias = -slopes[:, None, None] * distances[None]                        # (H, T, S)
        return bias.to(like.dtype if like is not None else mg.get_default_dtype())

    def extra_repr(self):
        return f"num_heads={self.num_heads}"


class RelativePositionBias(Module):
    """T5's learned relative-position biases (Raffel et al., 2020): each head learns one
    scalar per bucket of the relative position (``relative_position_bucket``), added to the
    attention scores.

    Args:
        num_heads: H.
        bidirectional: True for an encoder (keys on both sides), False for a causal decoder.
        num_buckets, max_distance: T5's 32 and 128.
    Shape:
        forward(T, S, offset=0, like) -> (H, T, S) bias; ``relative_attention_bias`` is an
        Embedding(num_buckets, H), initialised N(0, 1) as nn.Embedding.
    """

    def __init__(self, num_heads, bidirectional=True, num_buckets=32, max_distance=128,
                 device=None, dtype=None):
        super().__init__()
        self.num_heads, self.bidirectional = num_heads, bidirectional
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.relative_attention_bias = Embedding(num_buckets, num_heads, device=device,
                                                 dtype=dtype)

    def forward(self, T, S, offset=0, like=None):
        buckets = relative_position_bucket(_distances(T, S, offset), self.bidirectional,
                                           self.num_buckets, self.max_distance)
        weight = self.relative_attention_bias.weight
        bias = self.relative_attention_bias(mg.tensor(buckets, device=weight.device))  # (T,S,H)
        bias = bias.permute(2, 0, 1)                                                   # (H,T,S)
        return bias if like is None else bias.to(like.dtype)

    def extra_repr(self):
        return (f"num_heads={self.num_heads}, bidirectional={self.bidirectional}, "
                f"num_buckets={self.num_buckets}, max_distance={self.max_distance}")
