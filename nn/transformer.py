"""Transformer encoder and decoder layers and stacks (Vaswani et al., 2017), post-LN or
pre-LN, with ordinary residuals or manifold-constrained hyper-connections (``residual="mhc"``).

Submodule names follow the API contract (``self_attn``, ``cross_attn``, ``ffn``,
``norm1``...); the numerics and mask conventions are PyTorch's ``nn.TransformerEncoderLayer``
and ``nn.TransformerDecoderLayer`` with ``batch_first=True``.
"""
import copy

from minigrad import cat

from .activation import Dropout
from .attention import KVCache, MultiheadAttention
from .ffn import FeedForward
from .hyper import HyperConnection, collapse_streams, expand_streams
from .module import Module, ModuleList
from .norm import LayerNorm


class _Layer(Module):
    """What encoder and decoder layers share: norms, dropouts and the residual rule."""

    def _setup(self, d_model, n_sublayers, dropout, norm_first, residual, n_streams,
               layer_norm_eps):
        if residual not in ("add", "mhc"):
            raise ValueError(f"residual must be 'add' or 'mhc', got {residual!r}")
        self.norm_first, self.residual = norm_first, residual
        for i in range(1, n_sublayers + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps))
            setattr(self, f"dropout{i}", Dropout(dropout))
            if residual == "mhc":
                setattr(self, f"hc{i}", HyperConnection(n_streams))

    def _sublayer(self, i, x, fn):
        """x + dropout(fn(norm(x))) (pre-LN), norm(x + dropout(fn(x))) (post-LN), or the same
        around hyper-connection streams (x of shape (B, T, n, E))."""
        norm, drop = getattr(self, f"norm{i}"), getattr(self, f"dropout{i}")
        if self.residual == "mhc":
            inner = (lambda h: drop(fn(norm(h)))) if self.norm_first else (lambda h: drop(fn(h)))
            x = getattr(self, f"hc{i}")(x, inner)
            return x if self.norm_first else norm(x)
        if self.norm_first:
            return x + drop(fn(norm(x)))
        return norm(x + drop(fn(x)))

    def _run(self, x, body):
        """Widen a (B, T, E) input to streams for mHC, run ``body``, and narrow it back."""
        if self.residual == "mhc" and x.ndim == 3:
            n = self.hc1.n_streams
            return collapse_streams(body(expand_streams(x, n)))
        return body(x)


class TransformerEncoderLayer(_Layer):
    """Self-attention then a feed-forward block, each with a residual connection and norm.

    Args:
        d_model, nhead: model size and number of attention heads.
        dim_feedforward, dropout, activation: the feed-forward block ("relu" or "gelu").
        norm_first: pre-LN (True) or the paper's post-LN (False, the default).
        residual: "add" (ordinary) or "mhc" (manifold-constrained hyper-connections with
            ``n_streams`` residual streams).
        rotary: an optional nn.RotaryEmbedding used by the self-attention.
    Shape:
        src (B, T, E) -> (B, T, E); with residual="mhc" also streams (B, T, n, E) -> same.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 norm_first=False, residual="add", n_streams=4, layer_norm_eps=1e-5,
                 rotary=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, rotary=rotary)
        self.ffn = FeedForward(d_model, dim_feedforward, dropout, activation)
        self._setup(d_model, 2, dropout, norm_first, residual, n_streams, layer_norm_eps)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        def attend(h):
            return self.self_attn(h, h, h, attn_mask=src_mask, need_weights=False,
                                  key_padding_mask=src_key_padding_mask,
                                  is_causal=is_causal)[0]

        def body(x):
            x = self._sublayer(1, x, attend)
            return self._sublayer(2, x, self.ffn)
        return self._run(src, body)


class TransformerDecoderLayer(_Layer):
    """Masked self-attention, cross-attention over the encoder's memory, then feed-forward,
    each with a residual connection and norm.

    Args: as TransformerEncoderLayer.
    Shape:
        tgt (B, T, E), memory (B, S, E) -> (B, T, E). With a ``cache`` (a dict of KVCaches
        under "self_attn" and "cross_attn", see DecoderCache), tgt holds only the new
        positions and tgt_mask / tgt_key_padding_mask cover the cached positions too.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 norm_first=False, residual="add", n_streams=4, layer_norm_eps=1e-5,
                 rotary=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, rotary=rotary)
        self.cross_attn = MultiheadAttention(d_model, nhead, dropout=dropout)
        self.ffn = FeedForward(d_model, dim_feedforward, dropout, activation)
        self._setup(d_model, 3, dropout, norm_first, residual, n_streams, layer_norm_eps)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False,
                cache=None):
        caches = cache or {}

        def attend_self(h):
            return self.self_attn(h, h, h, attn_mask=tgt_mask, need_weights=False,
                                  key_padding_mask=tgt_key_padding_mask,
                                  is_causal=tgt_is_causal, cache=caches.get("self_attn"))[0]

        def attend_memory(h):
            return self.cross_attn(h, memory, memory, attn_mask=memory_mask,
                                   key_padding_mask=memory_key_padding_mask,
                                   need_weights=False, is_causal=memory_is_causal,
                                   cache=caches.get("cross_attn"))[0]

        def body(x):
            x = self._sublayer(1, x, attend_self)
            x = self._sublayer(2, x, attend_memory)
            return self._sublayer(3, x, self.ffn)
        return self._run(tgt, body)


def _layers(layer_or_factory, num_layers):
    """num_layers independent layers: deep copies of a layer, or calls of a factory."""
    if isinstance(layer_or_factory, Module):
        return ModuleList([copy.deepcopy(layer_or_factory) for _ in range(num_layers)])
    return ModuleList([layer_or_factory() for _ in range(num_layers)])


class TransformerEncoder(Module):
    """A stack of encoder layers, then an optional final norm.

    Args:
        layer_or_factory: a TransformerEncoderLayer (deep-copied num_layers times) or a
            function that makes one.
        num_layers: how many layers; they are ``layers.0``, ``layers.1``, ...
        norm: an optional final LayerNorm (needed after pre-LN layers).
    Shape:
        src (B, T, E) -> (B, T, E)
    """

    def __init__(self, layer_or_factory, num_layers, norm=None):
        super().__init__()
        self.layers = _layers(layer_or_factory, num_layers)
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=False):
        x = _widen(self.layers, src)
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, is_causal)
        x = _narrow(self.layers, x)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """A stack of decoder layers, then an optional final norm.

    Args: as TransformerEncoder, with TransformerDecoderLayer.
    Shape:
        tgt (B, T, E), memory (B, S, E) -> (B, T, E). With a ``cache`` (a DecoderCache),
        tgt holds only the positions after ``cache.position`` (see TransformerDecoderLayer).
    """

    def __init__(self, layer_or_factory, num_layers, norm=None):
        super().__init__()
        self.layers = _layers(layer_or_factory, num_layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False,
                cache=None):
        caches = [None] * len(self.layers) if cache is None else cache.advance(tgt.shape[1])
        x = _widen(self.layers, tgt)
        for layer, layer_cache in zip(self.layers, caches):
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                      memory_key_padding_mask, tgt_is_causal, memory_is_causal, layer_cache)
        x = _narrow(self.layers, x)
        return x if self.norm is None else self.norm(x)


class DecoderCache:
    """What a TransformerDecoder keeps between incremental decoding calls: per layer, the
    self-attention's keys and values of every position so far, and the cross-attention's
    keys and values of the memory (projected once).

    Args:
        num_layers: the decoder's number of layers.
    Shape:
        layers: one dict per layer, {"self_attn": KVCache(), "cross_attn": KVCache(static=True)};
        position: the number of target positions decoded so far; key_padding_mask: (B,
        position) bool, the padding of those positions as kept by ``extend_padding``.
    """

    def __init__(self, num_layers):
        self.layers = [{"self_attn": KVCache(), "cross_attn": KVCache(static=True)}
                       for _ in range(num_layers)]
        self.position = 0
        self.key_padding_mask = None

    def extend_padding(self, mask):
        """The key padding mask of every position so far: the kept one with ``mask`` (B, T)
        of the new positions appended (and kept)."""
        if self.key_padding_mask is not None:
            mask = cat([self.key_padding_mask, mask], dim=1)
        self.key_padding_mask = mask
        return mask

    def advance(self, T):
        """Count T new positions; returns the per-layer caches."""
        self.position += T
        return self.layers

    def reorder(self, index):
        """Keep the batch rows ``index`` (an integer tensor) of every layer's cache."""
        if self.key_padding_mask is not None:
            self.key_padding_mask = self.key_padding_mask[index]
        for layer in self.layers:
            for kv in layer.values():
                kv.reorder(index)


def _widen(layers, x):
    """A stack of mHC layers carries the streams from layer to layer (widened once)."""
    if len(layers) and layers[0].residual == "mhc":
        return expand_streams(x, layers[0].hc1.n_streams)
    return x


def _narrow(layers, x):
    if len(layers) and layers[0].residual == "mhc":
        return collapse_streams(x)
    return x
