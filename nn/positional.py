"""Positional information for transformers: the fixed sinusoidal table of the original paper,
learned absolute positions, and rotary embeddings of queries and keys."""
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
