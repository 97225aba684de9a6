"""A decoder-only language model in the manner of GPT-2 (Radford et al., 2019), written like
karpathy/nanoGPT's model.py out of minigrad's nn layers, with sampling over a key/value
cache.

    idx -> token embedding + positions -> N causal blocks -> LayerNorm -> lm_head -> logits
"""
import math

import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.models import decoding
from minigrad.nn.hyper import collapse_streams, expand_streams
from minigrad.utils.checkpoint import checkpoint


class Block(nn.TransformerEncoderLayer):
    """A transformer layer whose self-attention is causal and can run over a KVCache: the
    encoder layer itself (``self_attn ffn norm1 norm2``, its residual lines, pre-LN when
    norm_first, mHC with residual="mhc"), with ``is_causal=True`` always.

    Args: as nn.TransformerEncoderLayer.
    Shape:
        x (B, T, E) -> (B, T, E) (with residual="mhc" also streams (B, T, n, E) -> same).
        With a ``cache`` (an nn.KVCache), x holds only the positions after
        ``cache.position`` and attends to the cached ones too.
    """

    def forward(self, x, cache=None):
        return super().forward(x, is_causal=True, cache=cache)


class GPT(nn.Module):
    """A causal language model: logits of the next token at every position.

    Args:
        vocab_size: the number of token ids.
        d_model, nhead, num_layers, dim_feedforward, dropout: sizes of the blocks (GELU
            feed-forward, as GPT-2).
        max_len: the context length: the most positions the model sees at once.
        positional: "learned" (a position table added to the embeddings, as GPT-2) or
            "rope" (rotary embeddings of every attention's queries and keys).
        norm_first: pre-LN blocks and a final LayerNorm (True, as GPT-2), or post-LN.
        residual: "add" (ordinary residuals) or "mhc" (manifold-constrained
            hyper-connections with ``n_streams`` streams, carried from block to block).
        tie_embeddings: lm_head shares its weight with the token embedding (as GPT-2; the
            demos untie it, which learned both of their tasks markedly faster).
        checkpoint: recompute each block's activations in backward instead of keeping
            them (``utils.checkpoint``): less memory for one more forward pass of the
            blocks; the gradients are the same.
    Shape:
        idx (B, T) integer, T <= max_len -> logits (B, T, vocab_size)
    """

    def __init__(self, vocab_size, d_model=128, nhead=4, num_layers=4, dim_feedforward=512,
                 dropout=0.0, max_len=256, positional="learned", norm_first=True,
                 tie_embeddings=True, residual="add", n_streams=4, checkpoint=False):
        super().__init__()
        if positional not in ("learned", "rope"):
            raise ValueError(f"positional must be 'learned' or 'rope', got {positional!r}")
        self.vocab_size, self.d_model, self.max_len = vocab_size, d_model, max_len
        self.residual, self.n_streams = residual, n_streams
        self.checkpoint = checkpoint
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        learned = positional == "learned"
        self.pos_emb = nn.LearnedPositionalEmbedding(max_len, d_model) if learned else None
        rotary = None if learned else nn.RotaryEmbedding(d_model // nhead)
        self.dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([
            Block(d_model, nhead, dim_feedforward, dropout, activation="gelu",
                  norm_first=norm_first, residual=residual, n_streams=n_streams,
                  rotary=rotary) for _ in range(num_layers)])
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        # N(0, 1/d), scaled by sqrt(d) in forward, as models.Transformer: unit-variance
        # inputs on the scale of the position table, and logits of about unit variance from
        # a tied lm_head. (GPT-2's N(0, 0.02) embeddings, next to layers with PyTorch's
        # default init, learned associative recall far slower in our measurements.)
        nn.init.normal_(self.tok_emb.weight, std=d_model ** -0.5)
        if tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, idx, cache=None):
        """Next-token logits at every position.

        Args:
            cache: from ``new_cache()``, for incremental decoding: idx then holds only the
                positions after those already in the cache, whose keys and values it keeps.
        """
        start = 0 if cache is None else cache[0].position
        caches = [None] * len(self.blocks) if cache is None else cache
        x = self.embed(idx, start)                                           # (B, T, E)
        if self.residual == "mhc":  # the blocks pass the streams on: widened once
            x = expand_streams(x, self.n_streams)                            # (B, T, n, E)
        for block, kv in zip(self.blocks, caches):
            if self.checkpoint and kv is None:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x, kv)
        if self.residual == "mhc":
            x = collapse_streams(x)                                          # (B, T, E)
        return self.lm_head(self.norm(x))                                    # (B, T, V)

    def embed(self, idx, start=0):
        """The blocks' input: token embeddings, with the positions start, start + 1, ...
        added when they are learned.

        Shape:
            idx (B, T) integer -> (B, T, E)
        """
        x = self.tok_emb(idx) * math.sqrt(self.d_model)                      # (B, T, E)
        if self.pos_emb is not None:
            x = self.pos_emb(x, offset=start)
        return self.dropout(x)

    def new_cache(self):
        """An empty key/value cache: one nn.KVCache per block."""
        return [nn.KVCache() for _ in self.blocks]

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, use_cache=True):
        """Continue each row of ``idx`` by sampling one token at a time.

        Each step samples from softmax(logits / temperature) of the last position, keeping
        only the top_k most likely tokens when given (top_k=1 or temperature=0: greedy).
        Random draws come from minigrad's generator, so ``mg.manual_seed`` makes sampling
        reproducible. With ``use_cache`` each new token costs one position's forward over
        the cached keys and values; without it the whole context is re-run (the same
        logits, to rounding). The context is the last max_len tokens: when it is full, the
        window slides and the cache is rebuilt from it. Runs without gradients, in eval mode
        (see nn.utils.evaluating); the loop is models.decoding.token_by_token, choosing
        with sample_next.

        Shape:
            idx (B, T) integer -> (B, T + max_new_tokens) int64: the prompt and its
            continuation.
        """
        context = {"cache": None}

        def step(tokens):  # the logits of the next token after each row of tokens
            cache = context["cache"]
            if cache is not None and cache[0].position < self.max_len:
                x = tokens[:, -1:]                               # only the newest token
            else:  # the whole context, which fills a new cache
                cache = context["cache"] = self.new_cache() if use_cache else None
                x = tokens[:, -self.max_len:]
            return self(mg.tensor(x, dtype=idx.dtype, device=idx.device), cache)[:, -1]

        def choose(logits):
            return sample_next(logits, temperature, top_k)

        with nn.utils.evaluating(self):
            tokens = decoding.token_by_token(step, idx.numpy(), max_new_tokens, choose)
        return mg.tensor(tokens, dtype=idx.dtype, device=idx.device)


def sample_next(logits, temperature=1.0, top_k=None):
    """One token id per row from softmax(logits / temperature) restricted to the top_k
    largest logits, drawn on the host by inverse-CDF sampling from minigrad's generator;
    the argmax when top_k=1 or temperature=0.

    Shape:
        logits (B, V) -> ndarray (B,) int64
    """
    logits = logits.numpy().astype(np.float64)                               # (B, V)
    if top_k == 1 or temperature == 0:
        return logits.argmax(-1)
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = np.sort(logits, axis=-1)[:, -top_k, None]                      # (B, 1)
        logits = np.where(logits < kth, -np.inf, logits)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    cdf = np.cumsum(probs, axis=-1)                                          # (B, V)
    u = mg.backend.generator().random((logits.shape[0], 1)) * cdf[:, -1:]
    return np.minimum((cdf <= u).sum(-1), logits.shape[-1] - 1)  # the first cdf > u
