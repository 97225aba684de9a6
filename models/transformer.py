"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017),
with greedy decoding and beam search over a key/value cache.

    src -> embed * sqrt(d) + positions -> encoder -> memory
    tgt -> embed * sqrt(d) + positions -> decoder(memory) -> generator -> logits
"""
import math

import numpy as np

import minigrad as mg
import nn
import nn.functional as F


class Transformer(nn.Module):
    """A sequence-to-sequence Transformer over token ids, batch first.

    Args:
        src_vocab_size, tgt_vocab_size: sizes of the source and target vocabularies.
        d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
            activation, norm_first, residual: as nn.TransformerEncoderLayer (pre-LN stacks,
            norm_first=True, end with a LayerNorm).
        positional: "sinusoidal" (the paper's fixed table), "learned" (one table for the
            source, one for the target), both added to the embeddings, or "rope" (rotary
            embeddings of every self-attention's queries and keys).
        max_len: the longest sequence the positional tables hold.
        pad_id: the padding token: its embedding is zero and it is masked as a key.
        tie_embeddings: the generator shares its weight with the target embedding.
    Shape:
        src (B, S), tgt (B, T) integer -> logits (B, T, tgt_vocab_size)
    """

    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=512, nhead=8,
                 num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048, dropout=0.1,
                 activation="relu", norm_first=False, positional="sinusoidal", max_len=512,
                 pad_id=0, tie_embeddings=False, residual="add"):
        super().__init__()
        if positional not in ("sinusoidal", "learned", "rope"):
            raise ValueError(f"positional must be 'sinusoidal', 'learned' or 'rope', "
                             f"got {positional!r}")
        self.d_model, self.pad_id, self.positional = d_model, pad_id, positional
        self.src_embed = nn.Embedding(src_vocab_size, d_model, padding_idx=pad_id)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model, padding_idx=pad_id)
        self.src_pos, self.tgt_pos, rotary = _positions(positional, d_model, nhead, max_len)
        self.dropout = nn.Dropout(dropout)
        kw = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                  dropout=dropout, activation=activation, norm_first=norm_first,
                  residual=residual, rotary=rotary)
        self.encoder = nn.TransformerEncoder(lambda: nn.TransformerEncoderLayer(**kw),
                                             num_encoder_layers, _final_norm(norm_first, d_model))
        self.decoder = nn.TransformerDecoder(lambda: nn.TransformerDecoderLayer(**kw),
                                             num_decoder_layers, _final_norm(norm_first, d_model))
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

        Runs without gradients and in eval mode (the training flag is restored after). The
        tokens pad_id and bos_id are never produced. Beam search (see ``beam_search``)
        ranks finished hypotheses by their summed log-probability divided by
        length ** length_penalty, the length counting the EOS: 1.0 gives the mean
        log-probability per token (the simple average, not GNMT's ((5 + length) / 6) ** a),
        0.0 the plain sum. Decoding stops when every row (every batch element's beam_size
        hypotheses) has produced EOS, or after max_new_tokens.

        Shape:
            src (B, S) -> LongTensor (B, L) of generated ids without BOS, L <= max_new_tokens,
            each row padded with pad_id after its EOS.
        """
        was_training = self.training
        self.eval()
        try:
            with mg.no_grad():
                memory, memory_key_padding_mask = self.encode(src)
                args = (memory, memory_key_padding_mask, max_new_tokens, bos_id, eos_id)
                if beam_size == 1:
                    out = self.greedy_search(*args)
                else:
                    out = self.beam_search(*args, beam_size, length_penalty)
        finally:
            self.train(was_training)
        return mg.tensor(out, dtype=mg.int64, device=src.device)

    def _log_probs(self, tokens, memory, memory_key_padding_mask, cache, bos_id):
        """Log-probabilities of the next token after ``tokens`` (B, 1) on the host, as
        float64, with pad and BOS ruled out: (B, V)."""
        tokens = mg.tensor(tokens, dtype=mg.int64, device=memory.device)
        logits = self.decode(tokens, memory, memory_key_padding_mask, cache)[:, -1]
        logp = F.log_softmax(logits, -1).numpy().astype(np.float64)         # (B, V)
        logp[:, [self.pad_id, bos_id]] = -np.inf
        return logp

    def greedy_search(self, memory, memory_key_padding_mask, max_new_tokens, bos_id, eos_id):
        """The most likely next token at each step, until every row has produced EOS.

        Shape:
            memory (B, S, E) -> ndarray (B, L) int64, padded with pad_id after EOS
        """
        B = memory.shape[0]
        cache = nn.DecoderCache(len(self.decoder.layers))
        tokens, done, out = np.full((B, 1), bos_id), np.zeros(B, bool), []
        for _ in range(max_new_tokens):
            logp = self._log_probs(tokens, memory, memory_key_padding_mask, cache, bos_id)
            tokens = np.where(done, self.pad_id, logp.argmax(-1))[:, None]   # (B, 1)
            out.append(tokens)
            done |= tokens[:, 0] == eos_id
            if done.all():
                break
        return np.concatenate(out, axis=1) if out else np.zeros((B, 0), np.int64)

    def beam_search(self, memory, memory_key_padding_mask, max_new_tokens, bos_id, eos_id,
                    beam_size=4, length_penalty=1.0):
        """Batched beam search with length normalisation, as fairseq's.

        Each step ranks the extensions of a batch element's K live beams by their summed
        log-probability. An EOS among the K best closes a hypothesis, scored by its sum
        divided by length ** length_penalty; the K best extensions by other tokens become
        the live beams. A batch element is done once it has K closed hypotheses; at
        max_new_tokens its live beams are scored too (at that length, without an EOS).
        With K = 1 this is greedy search, whatever the length penalty.

        Shape:
            memory (B, S, E) -> ndarray (B, L) int64, padded with pad_id after EOS
        """
        B, K, L, alpha = memory.shape[0], beam_size, max_new_tokens, length_penalty
        rows = mg.tensor(np.repeat(np.arange(B), K), device=memory.device)
        memory, memory_key_padding_mask = memory[rows], memory_key_padding_mask[rows]
        cache = nn.DecoderCache(len(self.decoder.layers))
        scores = np.full((B, K), -np.inf)                # summed log-probs of the live beams
        scores[:, 0] = 0.0                               # (the K copies of BOS count once)
        beams = np.full((B, K, L), self.pad_id)          # their tokens so far
        best = np.full((B, K), -np.inf)                  # normalised scores of closed ones
        best_seqs = np.full((B, K, L), self.pad_id)
        done = np.zeros(B, bool)
        tokens = np.full((B * K, 1), bos_id)
        for t in range(1, L + 1):
            logp = self._log_probs(tokens, memory, memory_key_padding_mask, cache, bos_id)
            ext = (scores[:, :, None] + logp.reshape(B, K, -1)).reshape(B, -1)  # (B, K*V)
            top = np.argsort(-ext, axis=1, kind="stable")[:, :2 * K]  # >= K are not EOS
            top_scores = np.take_along_axis(ext, top, axis=1)                # (B, 2K)
            origin, token = np.divmod(top, ext.shape[1] // K)                # (B, 2K)
            seqs = np.take_along_axis(beams, origin[:, :, None], axis=1)     # (B, 2K, L)
            seqs[:, :, t - 1] = token
            closed = (token[:, :K] == eos_id) & ~done[:, None]
            closed_scores = np.where(closed, top_scores[:, :K] / t ** alpha, -np.inf)
            best, best_seqs = _keep_best(best, best_seqs, closed_scores, seqs[:, :K])
            done |= np.isfinite(best).all(1)
            live = np.argsort(token == eos_id, axis=1, kind="stable")[:, :K]  # (B, K)
            scores = np.take_along_axis(top_scores, live, axis=1)
            beams = np.take_along_axis(seqs, live[:, :, None], axis=1)
            if t == L:  # the beams still open compete at this length
                open_scores = np.where(done[:, None], -np.inf, scores / L ** alpha)
                best, best_seqs = _keep_best(best, best_seqs, open_scores, beams)
            if t == L or done.all():
                break
            origin = np.take_along_axis(origin, live, axis=1)
            cache.reorder(mg.tensor((np.arange(B)[:, None] * K + origin).reshape(-1),
                                    device=memory.device))
            tokens = np.take_along_axis(token, live, axis=1).reshape(B * K, 1)
        out = best_seqs[np.arange(B), best.argmax(1)]                        # (B, L)
        return out[:, :(out != self.pad_id).sum(1).max(initial=0)]  # pad is never generated


def _keep_best(best, seqs, new, new_seqs):
    """The K best by score of the finished hypotheses ``best`` (B, K) and ``new`` (B, K),
    with their sequences (B, K, L)."""
    scores = np.concatenate([best, new], axis=1)                             # (B, 2K)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :best.shape[1]]
    seqs = np.take_along_axis(np.concatenate([seqs, new_seqs], axis=1), order[:, :, None], 1)
    return np.take_along_axis(scores, order, axis=1), seqs


def _positions(kind, d_model, nhead, max_len):
    """The (src_pos, tgt_pos, rotary) modules of a positional scheme."""
    if kind == "sinusoidal":
        return (nn.SinusoidalPositionalEncoding(d_model, max_len),
                nn.SinusoidalPositionalEncoding(d_model, max_len), None)
    if kind == "learned":
        return (nn.LearnedPositionalEmbedding(max_len, d_model),
                nn.LearnedPositionalEmbedding(max_len, d_model), None)
    return None, None, nn.RotaryEmbedding(d_model // nhead)


def _final_norm(norm_first, d_model):
    return nn.LayerNorm(d_model) if norm_first else None
