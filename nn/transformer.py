"""Transformer encoder and decoder layers and stacks (Vaswani et al., 2017), post-LN or
pre-LN, with ordinary residuals or manifold-constrained hyper-connections (``residual="mhc"``).

Each layer's forward is written out as its residual lines, as in PyTorch's source:

    pre-LN:   x = x + self._sa_block(self.norm1(x), ...)
    post-LN:  x = self.norm1(x + self._sa_block(x, ...))
    mHC:      x = self.hc1.write(x, self._sa_block(self.norm1(self.hc1.read(x)), ...))

Submodule names are ``self_attn``, ``cross_attn`` (PyTorch's ``multihead_attn``), ``ffn``
(holding PyTorch's ``linear1``, ``activation``, ``linear2``), ``norm1``..., ``dropout1``...;
the numerics and mask conventions are PyTorch's ``nn.TransformerEncoderLayer`` and
``nn.TransformerDecoderLayer`` with ``batch_first=True``; an unbatched (T, E) input is one
sequence, as in PyTorch.
"""
import copy
import warnings

import minigrad as mg
from minigrad import cat

from . import functional as F
from .activation import Dropout
from .attention import KVCache, MultiheadAttention
from .container import ModuleList
from .ffn import FeedForward
from .hyper import HyperConnection, collapse_streams, expand_streams
from .module import Module
from .norm import LayerNorm


def _self_attention_block(layer, x, attn_mask, key_padding_mask, is_causal, cache=None):
    """A layer's self-attention branch, before its residual: dropout(self_attn(x, x, x))."""
    x = layer.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                        need_weights=False, is_causal=is_causal, cache=cache)[0]
    return layer.dropout1(x)


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection and norm.

    Args:
        d_model, nhead: model size and number of attention heads.
        dim_feedforward, dropout, activation: the feed-forward block; activation is "relu"
            or "gelu" (another string raises RuntimeError, as PyTorch) or a callable (a
            function such as ``F.gelu``, or a Module, held as ``ffn.activation``).
        layer_norm_eps: the eps of the layer's norms (default 1e-5).
        batch_first: batched tensors are (B, T, E) (True, the default here; PyTorch's
            default is False) or (T, B, E), sequence first (False).
        norm_first: pre-LN (True) or the paper's post-LN (False, the default).
        bias: learn the biases of the attention, feed-forward and norms (default True).
        device, dtype: of the parameters.
        residual: "add" (ordinary) or "mhc" (manifold-constrained hyper-connections with
            ``n_streams`` residual streams, one nn.HyperConnection per sublayer: ``hc1``,
            ``hc2``).
        rotary: an optional nn.RotaryEmbedding used by the self-attention.
        position_bias: an optional relative-position bias of the self-attention's scores
            (nn.positional.ALiBi or RelativePositionBias; see nn.MultiheadAttention).
    Shape:
        src (B, T, E) -> (B, T, E) ((T, B, E) with batch_first=False; key padding masks
        are (B, T) either way), or unbatched (T, E) -> (T, E) with a
        src_key_padding_mask of shape (T,). With residual="mhc" also streams
        (B, T, n, E) -> (B, T, n, E), as a stack of mHC layers passes them on.
        With a ``cache`` (an nn.KVCache, for incremental decoding), src holds only the
        positions after ``cache.position`` and the self-attention sees the cached ones too.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True,
                 device=None, dtype=None, residual="add", n_streams=4, rotary=None,
                 position_bias=None):
        super().__init__()
        _check_activation(activation)
        kw = dict(bias=bias, batch_first=batch_first, device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, rotary=rotary,
                                            position_bias=position_bias, **kw)
        self.ffn = FeedForward(d_model, dim_feedforward, dropout, activation, bias,
                               device=device, dtype=dtype)
        _add_residual_parts(self, 2, d_model, dropout, norm_first, residual, n_streams,
                            layer_norm_eps, bias, device, dtype)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False,
                cache=None):
        unbatched = _is_unbatched(src, src_key_padding_mask=src_key_padding_mask)
        b = _batch_dim(self)
        if unbatched:
            src, src_key_padding_mask = src.unsqueeze(b), _batch_of_one(src_key_padding_mask)
        src_mask, src_key_padding_mask = _same_kind_masks(
            src_mask, src_key_padding_mask, src, "src_key_padding_mask and src_mask")
        x = _widen(self, src)
        attend = dict(attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                      is_causal=is_causal, cache=cache)
        if self.residual == "mhc" and self.norm_first:
            x = self.hc1.write(x, self._sa_block(self.norm1(self.hc1.read(x)), **attend))
            x = self.hc2.write(x, self._ff_block(self.norm2(self.hc2.read(x))))
        elif self.residual == "mhc":
            x = self.norm1(self.hc1.write(x, self._sa_block(self.hc1.read(x), **attend)))
            x = self.norm2(self.hc2.write(x, self._ff_block(self.hc2.read(x))))
        elif self.norm_first:
            x = x + self._sa_block(self.norm1(x), **attend)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, **attend))
            x = self.norm2(x + self._ff_block(x))
        x = _narrow(self, src, x)
        return x.squeeze(b) if unbatched else x

    _sa_block = _self_attention_block

    def _ff_block(self, x):
        return self.dropout2(self.ffn(x))


class TransformerDecoderLayer(Module):
    """Masked self-attention, cross-attention over the encoder's memory, then feed-forward,
    each with a residual connection and norm.

    Args: as TransformerEncoderLayer (with residual="mhc", ``hc1``, ``hc2`` and ``hc3``).
    Shape:
        tgt (B, T, E), memory (B, S, E) -> (B, T, E), or unbatched tgt (T, E), memory
        (S, E) -> (T, E) with key padding masks of shapes (T,) and (S,). With a ``cache``
        (a dict of KVCaches under "self_attn" and "cross_attn", see DecoderCache), tgt
        holds only the new positions and tgt_mask / tgt_key_padding_mask cover the cached
        positions too.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True,
                 device=None, dtype=None, residual="add", n_streams=4, rotary=None,
                 position_bias=None):
        super().__init__()
        _check_activation(activation)
        kw = dict(bias=bias, batch_first=batch_first, device=device, dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, rotary=rotary,
                                            position_bias=position_bias, **kw)
        self.cross_attn = MultiheadAttention(d_model, nhead, dropout=dropout, **kw)
        self.ffn = FeedForward(d_model, dim_feedforward, dropout, activation, bias,
                               device=device, dtype=dtype)
        _add_residual_parts(self, 3, d_model, dropout, norm_first, residual, n_streams,
                            layer_norm_eps, bias, device, dtype)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False,
                cache=None):
        unbatched = _is_unbatched(tgt, memory, tgt_key_padding_mask=tgt_key_padding_mask,
                                  memory_key_padding_mask=memory_key_padding_mask)
        b = _batch_dim(self)
        if unbatched:
            tgt, memory = tgt.unsqueeze(b), memory.unsqueeze(b)
            tgt_key_padding_mask, memory_key_padding_mask = _batch_of_one(
                tgt_key_padding_mask, memory_key_padding_mask)
        caches = cache or {}
        attend_self = dict(attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                           is_causal=tgt_is_causal, cache=caches.get("self_attn"))
        attend_memory = dict(attn_mask=memory_mask, key_padding_mask=memory_key_padding_mask,
                             is_causal=memory_is_causal, cache=caches.get("cross_attn"))
        x = _widen(self, tgt)
        if self.residual == "mhc" and self.norm_first:
            x = self.hc1.write(x, self._sa_block(self.norm1(self.hc1.read(x)), **attend_self))
            x = self.hc2.write(x, self._mha_block(self.norm2(self.hc2.read(x)), memory,
                                                  **attend_memory))
            x = self.hc3.write(x, self._ff_block(self.norm3(self.hc3.read(x))))
        elif self.residual == "mhc":
            x = self.norm1(self.hc1.write(x, self._sa_block(self.hc1.read(x), **attend_self)))
            x = self.norm2(self.hc2.write(x, self._mha_block(self.hc2.read(x), memory,
                                                             **attend_memory)))
            x = self.norm3(self.hc3.write(x, self._ff_block(self.hc3.read(x))))
        elif self.norm_first:
            x = x + self._sa_block(self.norm1(x), **attend_self)
            x = x + self._mha_block(self.norm2(x), memory, **attend_memory)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, **attend_self))
            x = self.norm2(x + self._mha_block(x, memory, **attend_memory))
            x = self.norm3(x + self._ff_block(x))
        x = _narrow(self, tgt, x)
        return x.squeeze(b) if unbatched else x

    _sa_block = _self_attention_block

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal, cache=None):
        x = self.cross_attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                            need_weights=False, is_causal=is_causal, cache=cache)[0]
        return self.dropout2(x)

    def _ff_block(self, x):
        return self.dropout3(self.ffn(x))


def _check_activation(activation):
    """A layer's activation given by name must be "relu" or "gelu" (PyTorch's RuntimeError);
    anything else is used as a callable."""
    if isinstance(activation, str) and activation not in ("relu", "gelu"):
        raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _add_residual_parts(layer, n_sublayers, d_model, dropout, norm_first, residual, n_streams,
                        layer_norm_eps, bias=True, device=None, dtype=None):
    """Register ``norm1``, ``dropout1`` (and ``hc1`` with residual="mhc"), ... for each
    sublayer of ``layer``, and its residual settings."""
    if residual not in ("add", "mhc"):
        raise ValueError(f"residual must be 'add' or 'mhc', got {residual!r}")
    layer.norm_first, layer.residual = norm_first, residual
    layer.n_streams = n_streams if residual == "mhc" else None
    for i in range(1, n_sublayers + 1):
        setattr(layer, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias,
                                             device=device, dtype=dtype))
        setattr(layer, f"dropout{i}", Dropout(dropout))
        if residual == "mhc":
            hc = HyperConnection(n_streams)
            if device is not None or dtype is not None:
                hc.to(*(a for a in (device, dtype) if a is not None))
            setattr(layer, f"hc{i}", hc)


def _widen(layer, x):
    """An mHC layer's streams: a (B, T, E) input widened to (B, T, n, E); streams given by
    the layer before in a stack (and any input of an ordinary layer) as they are."""
    if layer.residual == "mhc" and x.ndim == 3:
        return expand_streams(x, layer.n_streams)
    return x


def _narrow(layer, given, x):
    """An mHC layer's output in the form of its input ``given``: streams narrowed back to
    (B, T, E) when it was given (B, T, E)."""
    if layer.residual == "mhc" and given.ndim == 3:
        return collapse_streams(x)
    return x


def _is_unbatched(query, memory=None, **key_padding_masks):
    """Whether ``query`` is one unbatched sequence (T, E), as PyTorch's layers accept; then
    ``memory`` must be unbatched (S, E) and each key padding mask 1-D, and a batched query
    needs a batched memory (PyTorch's AssertionErrors)."""
    if query.ndim != 2:
        if memory is not None and memory.ndim == 2:
            raise AssertionError(f"For batched ({query.ndim}-D) `query`, expected `key` and "
                                 f"`value` to be {query.ndim}-D but found 2-D and 2-D "
                                 "tensors respectively")
        return False
    if memory is not None and memory.ndim != 2:
        raise AssertionError(f"For unbatched (2-D) `query`, expected `key` and `value` to be "
                             f"2-D but found {memory.ndim}-D and {memory.ndim}-D tensors "
                             "respectively")
    for name, mask in key_padding_masks.items():
        if mask is not None and mask.ndim != 1:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` "
                                 f"to be `None` or 1-D but found {mask.ndim}-D tensor instead "
                                 f"({name} of shape {tuple(mask.shape)})")
    return True


def _same_kind_masks(attn_mask, key_padding_mask, like, names):
    """The two masks as they are, or, where one is bool and the other floating point, both
    as additive float masks, with PyTorch's deprecation warning naming them (once, here,
    rather than in every attention below)."""
    if attn_mask is None or key_padding_mask is None or \
            (attn_mask.dtype == mg.bool) == (key_padding_mask.dtype == mg.bool):
        return attn_mask, key_padding_mask
    warnings.warn(f"Support for mismatched {names} is deprecated. Use same type for both "
                  "instead.", UserWarning, stacklevel=4)
    return F._additive(attn_mask, like), F._additive(key_padding_mask, like)


def _batch_dim(layer):
    """The batch dim of a layer's batched tensors: 0, or 1 where its self-attention is
    sequence first (batch_first=False)."""
    return 0 if getattr(getattr(layer, "self_attn", None), "batch_first", True) else 1


def _batch_of_one(*tensors):
    """Each tensor with a leading batch dimension of 1 (None stays None)."""
    out = tuple(None if t is None else t.unsqueeze(0) for t in tensors)
    return out if len(out) > 1 else out[0]


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
        enable_nested_tensor, mask_check: PyTorch's switches of its nested-tensor fast
            path, accepted and without effect (the results are the same).
        checkpoint: recompute each layer's activations in backward instead of keeping them
            (``utils.checkpoint``, as models.GPT's flag; PyTorch's stacks have none): less
            memory for one more forward pass of the layers; the gradients are the same.
    Shape:
        src (B, T, E) -> (B, T, E), or unbatched (T, E) -> (T, E)
    """

    def __init__(self, layer_or_factory, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True, checkpoint=False):
        super().__init__()
        self.layers = _layers(layer_or_factory, num_layers)
        self.norm = norm
        self.checkpoint = checkpoint

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=False):
        unbatched = _is_unbatched(src, src_key_padding_mask=src_key_padding_mask)
        b = _batch_dim(self.layers[0]) if len(self.layers) else 0
        if unbatched:
            src, src_key_padding_mask = src.unsqueeze(b), _batch_of_one(src_key_padding_mask)
        mask, src_key_padding_mask = _same_kind_masks(mask, src_key_padding_mask, src,
                                                      "src_key_padding_mask and mask")
        x = _widen_stack(self.layers, src)
        for layer in self.layers:
            x = _run_layer(self.checkpoint, layer, x, mask, src_key_padding_mask, is_causal)
        x = _narrow_stack(self.layers, x)
        if self.norm is not None:
            x = self.norm(x)
        return x.squeeze(b) if unbatched else x


class TransformerDecoder(Module):
    """A stack of decoder layers, then an optional final norm.

    Args: as TransformerEncoder, with TransformerDecoderLayer (``checkpoint`` leaves the
        layers of an incremental decoding call, with a ``cache``, as they are).
    Shape:
        tgt (B, T, E), memory (B, S, E) -> (B, T, E), or unbatched tgt (T, E), memory (S, E)
        -> (T, E). With a ``cache`` (a DecoderCache), tgt holds only the positions after
        ``cache.position`` (see TransformerDecoderLayer).
    """

    def __init__(self, layer_or_factory, num_layers, norm=None, checkpoint=False):
        super().__init__()
        self.layers = _layers(layer_or_factory, num_layers)
        self.norm = norm
        self.checkpoint = checkpoint

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False,
                cache=None):
        unbatched = _is_unbatched(tgt, memory, tgt_key_padding_mask=tgt_key_padding_mask,
                                  memory_key_padding_mask=memory_key_padding_mask)
        b = _batch_dim(self.layers[0]) if len(self.layers) else 0
        if unbatched:
            tgt, memory = tgt.unsqueeze(b), memory.unsqueeze(b)
            tgt_key_padding_mask, memory_key_padding_mask = _batch_of_one(
                tgt_key_padding_mask, memory_key_padding_mask)
        caches = [None] * len(self.layers) if cache is None else cache.advance(tgt.shape[1 - b])
        x = _widen_stack(self.layers, tgt)
        for layer, layer_cache in zip(self.layers, caches):
            x = _run_layer(self.checkpoint and layer_cache is None, layer, x, memory, tgt_mask,
                           memory_mask, tgt_key_padding_mask, memory_key_padding_mask,
                           tgt_is_causal, memory_is_causal, layer_cache)
        x = _narrow_stack(self.layers, x)
        if self.norm is not None:
            x = self.norm(x)
        return x.squeeze(b) if unbatched else x


class Transformer(Module):
    """The encoder-decoder of Vaswani et al. (2017), as PyTorch's ``nn.Transformer``: a
    ``TransformerEncoder`` of ``num_encoder_layers`` layers and a ``TransformerDecoder`` of
    ``num_decoder_layers``, each stack ending in a LayerNorm; every weight matrix starts
    Xavier-uniform, as PyTorch's ``_reset_parameters`` makes them. No embeddings or output
    projection (``models.Transformer`` is the whole model).

    Args: as PyTorch's (``custom_encoder``/``custom_decoder`` replace a stack); batched
        tensors are batch first (``batch_first=True``, the default here as for the layers;
        PyTorch's default is sequence first).
    Shape:
        src (B, S, E), tgt (B, T, E) -> (B, T, E); unbatched (S, E), (T, E) -> (T, E)
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=True, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                  norm_first=norm_first, bias=bias, device=device, dtype=dtype)
        norm = dict(eps=layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.encoder = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers,
            LayerNorm(d_model, **norm))
        self.decoder = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers,
            LayerNorm(d_model, **norm))
        for p in self.parameters():
            if p.ndim > 1:
                mg.nn.init.xavier_uniform_(p)
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        b = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[b] != tgt.shape[b]:
            raise RuntimeError(f"Transformer: the batch number of src {tuple(src.shape)} and "
                               f"tgt {tuple(tgt.shape)} must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src {tuple(src.shape)} and "
                               f"tgt {tuple(tgt.shape)} must be equal to d_model "
                               f"({self.d_model})")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=bool(src_is_causal))
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=bool(tgt_is_causal),
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) float mask that hides the future: -inf above the diagonal, 0 on and
        below it (added to the scores, as PyTorch's)."""
        dtype = dtype or mg.get_default_dtype()
        return mg.full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(1)


def _run_layer(checkpointed, layer, *args):
    """``layer(*args)``, checkpointed (its activations recomputed in backward) or not."""
    if not checkpointed:
        return layer(*args)
    from minigrad.utils.checkpoint import checkpoint
    return checkpoint(layer, *args, use_reentrant=False)


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


def _widen_stack(layers, x):
    """A stack of mHC layers carries the streams from layer to layer (widened once)."""
    return _widen(layers[0], x) if len(layers) else x


def _narrow_stack(layers, x):
    return collapse_streams(x) if len(layers) and layers[0].residual == "mhc" else x
