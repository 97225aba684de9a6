"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017),
with greedy decoding and beam search over a key/value cache.

    src -> embed * sqrt(d) + positions -> encoder -> memory
    tgt -> embed * sqrt(d) + positions -> decoder(memory) -> generator -> logits
"""
import math

import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.models import decoding
from minigrad.nn.positional import ALiBi, RelativePositionBias


class Transformer(nn.Module):
    """A sequence-to-sequence Transformer over token ids, batch first.

    Args:
        src_vocab_size, tgt_vocab_size: sizes of the source and target vocabularies.
        d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
            activation, norm_first, residual: as nn.TransformerEncoderLayer (pre-LN stacks,
            norm_first=True, end with a LayerNorm).
        positional: "sinusoidal" (the paper's fixed table), "learned" (one table for the
            source, one for the target), both added to the embeddings, "rope" (rotary
            embeddings of every self-attention's queries and keys), or a bias of every
            self-attention's scores by relative position: "alibi" (ALiBi's fixed slopes,
            |i - j| in the encoder and the decoder) or "t5" (T5's learned buckets,
            bidirectional in the encoder and causal in the decoder; each layer learns its
            own table, where T5 shares one per stack). Cross-attention has no positions.
        max_len: the longest sequence the sinusoidal and learned tables hold (rotary and
            relative biases have no limit).
        pad_id: the padding token: its embedding is zero and it is masked as a key.
        tie_embeddings: the generator shares its weight with the target embedding.
        checkpoint: recompute each encoder and decoder layer's activations in backward
            instead of keeping them (nn.TransformerEncoder's and TransformerDecoder's flag):
            less memory for one more forward pass of the layers; the gradients are the same.
    Shape:
        src (B, S), tgt (B, T) integer -> logits (B, T, tgt_vocab_size)
    """

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, nhead=8,
                 num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048, dropout=0.1,
                 activation="relu", norm_first=False, positional="sinusoidal", max_len=512,
                 pad_id=0, tie_embeddings=False, residual="add", checkpoint=False):
        super().__init__()
        if positional not in POSITIONAL:
            raise ValueError(f"positional must be one of {', '.join(map(repr, POSITIONAL))}, "
                             f"got {positional!r}")
        self.d_model, self.pad_id, self.positional = d_model, pad_id, positional
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        self.src_pos, self.tgt_pos, rotary = _positions(positional, d_model, nhead, max_len)
        self.dropout = nn.Dropout(dropout)
        kw = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                  dropout=dropout, activation=activation, norm_first=norm_first,
                  residual=residual, rotary=rotary)
        self.encoder = nn.TransformerEncoder(
            lambda: nn.TransformerEncoderLayer(**kw, position_bias=_bias(positional, nhead, True)),
            num_encoder_layers, _final_norm(norm_first, d_model), checkpoint=checkpoint)
        self.decoder = nn.TransformerDecoder(
            lambda: nn.TransformerDecoderLayer(**kw, position_bias=_bias(positional, nhead,
                                                                         False)),
            num_decoder_layers, _final_norm(norm_first, d_model), checkpoint=checkpoint)
        self.generator = nn.Linear(d_model, tgt_vocab_size)
        self._reset_embeddings()
        if tie_embeddings:
            self.generator.weight = self.tgt_embed.weight

    def _reset_embeddings(self):
        """N(0, 1/d) as fairseq, so that the sqrt(d) scaling gives unit-variance inputs, on
        the scale of the positional table (and of a tied generator's logits)."""
        for embed in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embed.weight, std=self.d_model ** -0.5)
            with mg.no_grad():
                embed.weight[self.pad_id] = 0.0

    def forward(self, src, tgt):
        memory, memory_key_padding_mask = self.encode(src)
        return self.decode(tgt, memory, memory_key_padding_mask)

    def encode(self, src):
        """The encoder's output and the source padding mask.

        Shape:
            src (B, S) -> memory (B, S, E), memory_key_padding_mask (B, S) bool (True at
            padding)
        """
        src_key_padding_mask = src == self.pad_id                            # (B, S)
        x = self._embed(src, self.src_embed, self.src_pos, 0)                # (B, S, E)
        memory = self.encoder(x, src_key_padding_mask=src_key_padding_mask)  # (B, S, E)
        return memory, src_key_padding_mask

    def decode(self, tgt, memory, memory_key_padding_mask=None, cache=None):
        """Next-token logits at every target position, attending causally to the target and
        to the memory.

        Args:
            cache: an nn.DecoderCache for incremental decoding: tgt then holds only the
                positions after ``cache.position``, whose keys and values are appended to it.
        Shape:
            tgt (B, T) integer, memory (B, S, E), memory_key_padding_mask (B, S) ->
            logits (B, T, tgt_vocab_size)
        """
        start = 0 if cache is None else cache.position
        tgt_key_padding_mask = tgt == self.pad_id                            # (B, T)
        if cache is not None:  # the keys are every position so far
            tgt_key_padding_mask = cache.extend_padding(tgt_key_padding_mask)
        x = self._embed(tgt, self.tgt_embed, self.tgt_pos, start)            # (B, T, E)
        x = self.decoder(x, memory, tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=True, cache=cache)                    # (B, T, E)
        return self.generator(x)                                             # (B, T, V)

    def _embed(self, tokens, embed, pos, start):
        x = embed(tokens) * math.sqrt(self.d_model)                          # (B, T, E)
        return self.dropout(x if pos is None else pos(x, offset=start))

    def generate(self, src, max_new_tokens, bos_id, eos_id, beam_size=1, length_penalty=1.0):
        """Decode from BOS: greedily (beam_size=1) or by beam search, over a key/value cache
        (so each new token attends to the cached prefix instead of re-running it).

        Runs without gradients and in eval mode (see nn.utils.evaluating). The tokens
        pad_id and bos_id are never produced. Beam search (see ``beam_search``) ranks
        finished hypotheses by their summed log-probability divided by
        length ** length_penalty, the length counting the EOS: 1.0 gives the mean
        log-probability per token (the simple average, not GNMT's ((5 + length) / 6) ** a),
        0.0 the plain sum. Decoding stops when every row (every batch element's beam_size
        hypotheses) has produced EOS, or after max_new_tokens.

        Shape:
            src (B, S) -> LongTensor (B, L) of generated ids without BOS, L <= max_new_tokens,
            each row padded with pad_id after its EOS.
        """
        with nn.utils.evaluating(self):
            memory, memory_key_padding_mask = self.encode(src)
            args = (memory, memory_key_padding_mask, max_new_tokens, bos_id, eos_id)
            if beam_size == 1:
                out = self.greedy_search(*args)
            else:
                out = self.beam_search(*args, beam_size, length_penalty)
        return mg.tensor(out, dtype=mg.int64, device=src.device)

    def greedy_search(self, memory, memory_key_padding_mask, max_new_tokens, bos_id, eos_id):
        """The most likely next token at each step, until every row has produced EOS
        (models.decoding.greedy_search).

        Shape:
            memory (B, S, E) -> ndarray (B, L) int64, padded with pad_id after EOS
        """
        return decoding.greedy_search(self, memory, memory_key_padding_mask, max_new_tokens,
                                      bos_id, eos_id)

    def beam_search(self, memory, memory_key_padding_mask, max_new_tokens, bos_id, eos_id,
                    beam_size=4, length_penalty=1.0):
        """Batched beam search with length normalisation, as fairseq's (see
        models.decoding.beam_search): each batch element keeps beam_size hypotheses, each
        of them a row of the decoder's cache.

        Shape:
            memory (B, S, E) -> ndarray (B, L) int64, padded with pad_id after EOS
        """
        B = memory.shape[0]
        rows = mg.tensor(np.repeat(np.arange(B), beam_size), device=memory.device)
        memory, memory_key_padding_mask = memory[rows], memory_key_padding_mask[rows]
        step, reorder = decoding.encoder_decoder_step(self, memory, memory_key_padding_mask,
                                                      banned=(self.pad_id, bos_id))
        return decoding.beam_search(step, reorder, B, beam_size, bos_id, eos_id, self.pad_id,
                                    max_new_tokens, length_penalty)


POSITIONAL = ("sinusoidal", "learned", "rope", "alibi", "t5")


def _positions(kind, d_model, nhead, max_len):
    """The (src_pos, tgt_pos, rotary) modules of a positional scheme."""
    if kind == "sinusoidal":
        return (nn.SinusoidalPositionalEncoding(d_model, max_len),
                nn.SinusoidalPositionalEncoding(d_model, max_len), None)
    if kind == "learned":
        return (nn.LearnedPositionalEmbedding(max_len, d_model),
                nn.LearnedPositionalEmbedding(max_len, d_model), None)
    if kind == "rope":
        return None, None, nn.RotaryEmbedding(d_model // nhead)
    return None, None, None


def _bias(kind, nhead, bidirectional):
    """A self-attention's relative-position bias module for ``kind``, or None."""
    if kind == "alibi":
        return ALiBi(nhead)
    if kind == "t5":
        return RelativePositionBias(nhead, bidirectional=bidirectional)
    return None


def _final_norm(norm_first, d_model):
    return nn.LayerNorm(d_model) if norm_first else None
