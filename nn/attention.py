"""Multi-head attention with PyTorch's parameters, masks and returned weights."""
import contextlib
import math
import warnings

import minigrad as mg

from . import functional as F
from . import init
from .linear import Linear
from .module import Module


class MultiheadAttention(Module):
    """Attention from each query position to every key position in H heads of size
    D = E / H, concatenated and projected back (Vaswani et al., 2017, section 3.2.2).

    Args:
        embed_dim: the model size E.
        num_heads: the number of heads H (must divide E).
        dropout: probability of dropping an attention weight in training (default 0.0).
        bias: learn biases in the four projections (default True).
        kdim, vdim: sizes of the key and value inputs (default E), for cross-attention.
        batch_first: batched inputs and output are (B, T, E), batch first (True, the
            default here; PyTorch's default is False), or (T, B, E), sequence first (False).
        rotary: an optional RotaryEmbedding(D) applied to each head's queries and keys.
        position_bias: an optional relative-position bias (nn.positional.ALiBi or
            RelativePositionBias): called as position_bias(T, S, offset, like) for the
            (H, T, S) bias it adds to every batch element's scores.
        add_bias_kv, add_zero_attn: PyTorch's options, not implemented (True is an error).
    Shape:
        query (B, T, E), key (B, S, kdim), value (B, S, vdim) -> output (B, T, E), and
        weights (B, T, S) averaged over heads, or (B, H, T, S) if not average_attn_weights
        (with batch_first=False, query (T, B, E), key (S, B, kdim), value (S, B, vdim) ->
        output (T, B, E); the masks and weights are as with batch_first=True).
        attn_mask (T, S) or (B*H, T, S), key_padding_mask (B, S): where bool, True means
        "may not attend"; where float, added to the scores (masks of other dtypes are an
        error). is_causal=True masks the keys after each query (and is combined with
        attn_mask when both are given). A query whose every key is masked gives zeros, or
        NaN output and weights with need_weights=True (as PyTorch's). Unbatched, as
        PyTorch: query (T, E), key (S, kdim), value (S, vdim), key_padding_mask (S,),
        attn_mask (T, S) or (H, T, S) -> output (T, E) and weights (T, S) or (H, T, S).
        With a ``cache`` (a KVCache, for incremental decoding), query and key hold only the
        new positions; S counts the cached keys too, and masks are given for all S.
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=True, device=None,
                 dtype=None, rotary=None, position_bias=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"MultiheadAttention: embed_dim and num_heads must be greater "
                             f"than 0, got embed_dim={embed_dim} and num_heads={num_heads}")
        if embed_dim % num_heads != 0:  # (PyTorch's AssertionError; also a ValueError)
            raise F.ArgumentError(f"MultiheadAttention: embed_dim ({embed_dim}) must be "
                                  f"divisible by num_heads ({num_heads})")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are "
                                      "not implemented (expected False)")
        self.batch_first = batch_first
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = embed_dim if kdim is None else kdim
        self.vdim = embed_dim if vdim is None else vdim
        self.dropout = dropout
        self.q_proj = Linear(embed_dim, embed_dim, bias, device=device, dtype=dtype)
        self.k_proj = Linear(self.kdim, embed_dim, bias, device=device, dtype=dtype)
        self.v_proj = Linear(self.vdim, embed_dim, bias, device=device, dtype=dtype)
        self.out_proj = Linear(embed_dim, embed_dim, bias, device=device, dtype=dtype)
        self.rotary = rotary
        self.position_bias = position_bias
        self._reset_parameters()

    def _reset_parameters(self):
        """As torch: xavier-uniform in-projections with zero biases; out_proj keeps Linear's
        weight init, with a zero bias."""
        E = self.embed_dim
        packed = self.kdim == E and self.vdim == E
        for proj in (self.q_proj, self.k_proj, self.v_proj):
            if packed:  # torch draws one (3E, E) in_proj_weight, so the bound uses that shape
                bound = math.sqrt(6.0 / (E + 3 * E))
                init.uniform_(proj.weight, -bound, bound)
            else:
                init.xavier_uniform_(proj.weight)
        for proj in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):
            if proj.bias is not None:
                init.zeros_(proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False, cache=None):
        batched = self._check_inputs(query, key, value, key_padding_mask, attn_mask)
        seq_first = batched and not self.batch_first
        if seq_first:  # (T, B, E) in and out
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        if not batched:  # a batch of one, given back without its batch dim
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        out, weights = self._attention(query, key, value, key_padding_mask, need_weights,
                                       attn_mask, is_causal, cache)
        if weights is not None and average_attn_weights:
            weights = weights.mean(1)
        if not batched:
            out = out.squeeze(0)
            weights = None if weights is None else weights.squeeze(0)
        return (out.transpose(0, 1) if seq_first else out), weights

    def _attention(self, query, key, value, key_padding_mask, need_weights, attn_mask,
                   is_causal, cache):
        """Batched attention: output (B, T, E) and per-head weights (B, H, T, S) or None."""
        B, T, E = query.shape
        H, D = self.num_heads, self.head_dim
        start = 0 if cache is None else cache.position  # the position of the first query

        def project():  # the keys and values of the new positions
            S = key.shape[1]
            k = self.k_proj(key).reshape(B, S, H, D).transpose(1, 2)         # (B, H, S, D)
            v = self.v_proj(value).reshape(B, S, H, D).transpose(1, 2)       # (B, H, S, D)
            return self._rotate(k, start), v
        k, v = project() if cache is None else cache.update(project, T)    # (B, H, S, D)
        q = self.q_proj(query).reshape(B, T, H, D).transpose(1, 2)           # (B, H, T, D)
        q = self._rotate(q, start)
        S = k.shape[2]
        mask = self._merged_mask(attn_mask, key_padding_mask, B, T, S, q)
        if self.position_bias is not None:  # queries at start.., keys at 0..S-1
            bias = self.position_bias(T, S, start, like=q).unsqueeze(0)      # (1, H, T, S)
            mask = bias if mask is None else mask + bias
        # torch returns the weights after dropout, and so do we
        out, weights = F.attend(q, k, v, mask, causal=start if is_causal else None,
                                dropout_p=self.dropout if self.training else 0.0,
                                scale=1.0 / math.sqrt(D), need_weights=need_weights)
        out = out.transpose(1, 2).reshape(B, T, E)                           # (B, T, E)
        return self.out_proj(out), weights

    def _check_inputs(self, query, key, value, key_padding_mask, attn_mask):
        """Whether the call is batched; ArgumentError (or DTypeError) naming the argument and
        its shape where PyTorch's MultiheadAttention refuses one."""
        op = "MultiheadAttention"
        if query.ndim not in (2, 3):
            raise F.ArgumentError(f"{op}: query must be (T, E) unbatched or (B, T, E) batched, "
                                  f"got shape {query.shape}")
        batched = query.ndim == 3
        if key.ndim != query.ndim or value.ndim != query.ndim:
            raise F.ArgumentError(f"{op}: for a {query.ndim}-D query of shape {query.shape}, "
                                  f"key and value must be {query.ndim}-D too, got shapes "
                                  f"{key.shape} and {value.shape}")
        for name, x, size in (("query", query, self.embed_dim), ("key", key, self.kdim),
                              ("value", value, self.vdim)):
            if x.shape[-1] != size:
                raise F.ArgumentError(f"{op}: {name} of shape {x.shape} should have {size} "
                                      "features in its last dim")
        if key.shape[:-1] != value.shape[:-1]:
            raise F.ArgumentError(f"{op}: key of shape {key.shape} and value of shape "
                                  f"{value.shape} must have the same batch size and length")
        if batched and key.shape[1 - self.batch_first] != query.shape[1 - self.batch_first]:
            raise F.ArgumentError(f"{op}: query of shape {query.shape} and key of shape "
                                  f"{key.shape} must have the same batch size")
        F.check_mask_dtype(op, "key_padding_mask", key_padding_mask)
        F.check_mask_dtype(op, "attn_mask", attn_mask)
        if not batched and key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise F.ArgumentError(f"{op}: for an unbatched query, key_padding_mask must be "
                                  f"1-D (S,), got shape {key_padding_mask.shape}")
        return batched

    def _rotate(self, x, offset):
        return x if self.rotary is None else self.rotary(x, offset=offset)

    def _merged_mask(self, attn_mask, key_padding_mask, B, T, S, like):
        """attn_mask and key_padding_mask as one float mask to add to the scores,
        broadcastable to (B, H, T, S), or None; bool True ("may not attend") becomes -inf.
        (The causal mask is the attention's own: F.attend makes it tile by tile.)"""
        masks = []
        if attn_mask is not None and key_padding_mask is not None and \
                (attn_mask.dtype == mg.bool) != (key_padding_mask.dtype == mg.bool):
            warnings.warn("Support for mismatched key_padding_mask and attn_mask is "
                          "deprecated. Use same type for both instead.", UserWarning,
                          stacklevel=5)  # (PyTorch's words; at the caller of the module)
        if attn_mask is not None:
            if attn_mask.shape not in ((T, S), (B * self.num_heads, T, S)):
                raise F.ArgumentError(f"MultiheadAttention: attn_mask of shape "
                                      f"{attn_mask.shape} should be {(T, S)} or "
                                      f"{(B * self.num_heads, T, S)}")
            if attn_mask.ndim == 3:
                attn_mask = attn_mask.reshape(B, self.num_heads, T, S)
            masks.append(F._additive(attn_mask, like))                  # (T, S) or (B, H, T, S)
        if key_padding_mask is not None:
            if key_padding_mask.shape != (B, S):
                raise F.ArgumentError(f"MultiheadAttention: key_padding_mask of shape "
                                      f"{key_padding_mask.shape} should be {(B, S)}")
            masks.append(F._additive(key_padding_mask, like).reshape(B, 1, 1, S))
        return sum(masks[1:], masks[0]) if masks else None

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, kdim={self.kdim}, vdim={self.vdim}"
                + ("" if self.batch_first else ", batch_first=False"))


class KVCache:
    """The keys and values one attention keeps between calls, for incremental decoding: each
    new position then costs attention over the cache instead of re-running the prefix.

    Args:
        static: False for self-attention (every call appends the keys and values of its new
            positions, and its queries and keys sit after the cached ones, for rotary
            positions and the causal mask); True for cross-attention over a fixed memory
            (its keys and values are projected on the first call and reused after).
    Shape:
        k, v: (B, H, S, D), or None before the first call; position: the number of query
        positions seen so far.
    """

    def __init__(self, static=False):
        self.static = static
        self.k = self.v = None
        self.position = 0

    def update(self, project, T):
        """The keys and values to attend over after a call with T new queries: ``project()``
        (the new positions' keys and values) appended to the cached ones, or the stored
        ones of a static cache."""
        if not (self.static and self.k is not None):
            k, v = project()
            if self.k is not None:
                k, v = mg.cat([self.k, k], dim=2), mg.cat([self.v, v], dim=2)
            self.k, self.v = k, v
        self.position += T
        return self.k, self.v

    def reorder(self, index):
        """Keep the rows ``index`` (an integer tensor of batch rows): beam search's way of
        following each new beam from the beam it extends."""
        if self.k is not None:
            self.k, self.v = self.k[index], self.v[index]


class SDPBackend:
    """The implementations of attention that ``sdpa_kernel`` chooses between (PyTorch's
    names): FLASH_ATTENTION, the tiled primitive minigrad.fused.Attention (the default), and
    MATH, the composite of Tensor ops (every score kept; twice differentiable at any size)."""
    FLASH_ATTENTION = "auto"
    MATH = "math"


@contextlib.contextmanager
def sdpa_kernel(backend):
    """Within the block, scaled_dot_product_attention and MultiheadAttention run on
    ``backend`` (an SDPBackend value), as torch.nn.attention.sdpa_kernel."""
    if backend not in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
        raise ValueError("sdpa_kernel: expected SDPBackend.FLASH_ATTENTION or "
                         f"SDPBackend.MATH, got {backend!r}")
    before = F.SDPA_BACKEND[0]
    F.SDPA_BACKEND[0] = backend
    try:
        yield
    finally:
        F.SDPA_BACKEND[0] = before
