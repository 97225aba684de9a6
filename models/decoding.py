"""Decoding loops shared by the models: one token at a time (greedy, or sampled by a chooser)
and batched beam search. Each takes a ``step`` function that runs the model on the newest
tokens (over whatever cache the model keeps) and gives the next token's scores, so the same
loops serve models.Transformer, models.Captioner and models.GPT.

    step(tokens) -> scores        tokens: ndarray (B, t), every token so far
    choose(scores) -> ndarray (B,) the next token of each row (greedy: the argmax)

``encoder_decoder_step`` makes the step of a model with ``decode(tgt, memory,
memory_key_padding_mask, cache)`` (Transformer and Captioner), over an nn.DecoderCache.
"""
import numpy as np

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F


def argmax(scores):
    """The greedy choice: the highest score of each row (ndarray (B, V) -> (B,))."""
    return scores.argmax(-1)


def token_by_token(step, prefix, max_new_tokens, choose=argmax, eos_id=None, pad_id=0):
    """Extend each row of ``prefix`` by up to ``max_new_tokens`` tokens, one at a time: the
    token ``choose(step(tokens))`` is appended to every row. With ``eos_id``, a row that has
    produced it gets ``pad_id`` after, and the loop stops once every row has.

    Shape:
        prefix (B, T0) integer ndarray -> ndarray (B, T0 + L), L <= max_new_tokens
    """
    tokens = np.asarray(prefix)
    done = np.zeros(tokens.shape[0], bool)
    for _ in range(max_new_tokens):
        chosen = np.asarray(choose(step(tokens)))                            # (B,)
        if eos_id is not None:
            chosen = np.where(done, pad_id, chosen)
            done |= chosen == eos_id
        tokens = np.concatenate([tokens, chosen[:, None].astype(tokens.dtype)], axis=1)
        if done.all():
            break
    return tokens


def beam_search(step, reorder, batch_size, beam_size, bos_id, eos_id, pad_id, max_new_tokens,
                length_penalty=1.0):
    """Batched beam search with length normalisation, as fairseq's.

    ``step(tokens)`` gives the log-probabilities (B * K, V) of the next token of each of the
    B * K rows (batch element b's K beams are rows b * K ... b * K + K - 1), given their
    tokens so far (B * K, t); ``reorder(index)`` tells the model's cache that row i now
    continues the old row ``index[i]`` (an integer ndarray (B * K,)).

    Each step ranks the extensions of a batch element's K live beams by their summed
    log-probability. An EOS among the K best closes a hypothesis, scored by its sum
    divided by length ** length_penalty (the length counting the EOS); the K best
    extensions by other tokens become the live beams. A batch element is done once it has
    K closed hypotheses; at max_new_tokens its live beams are scored too (at that length,
    without an EOS). With K = 1 this is greedy search, whatever the length penalty.

    Returns:
        ndarray (B, L) int64: each batch element's best hypothesis without BOS, padded with
        pad_id after its EOS (pad_id must never be generated).
    """
    B, K, L, alpha = batch_size, beam_size, max_new_tokens, length_penalty
    scores = np.full((B, K), -np.inf)                # summed log-probs of the live beams
    scores[:, 0] = 0.0                               # (the K copies of BOS count once)
    beams = np.full((B, K, L), pad_id)               # their tokens so far
    best = np.full((B, K), -np.inf)                  # normalised scores of closed ones
    best_seqs = np.full((B, K, L), pad_id)
    done = np.zeros(B, bool)
    bos = np.full((B * K, 1), bos_id)
    for t in range(1, L + 1):
        logp = step(np.concatenate([bos, beams[:, :, :t - 1].reshape(B * K, -1)], axis=1))
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
        reorder((np.arange(B)[:, None] * K + origin).reshape(-1))
    out = best_seqs[np.arange(B), best.argmax(1)]                            # (B, L)
    return out[:, :(out != pad_id).sum(1).max(initial=0)]  # pad is never generated


def _keep_best(best, seqs, new, new_seqs):
    """The K best by score of the finished hypotheses ``best`` (B, K) and ``new`` (B, K),
    with their sequences (B, K, L)."""
    scores = np.concatenate([best, new], axis=1)                             # (B, 2K)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :best.shape[1]]
    seqs = np.take_along_axis(np.concatenate([seqs, new_seqs], axis=1), order[:, :, None], 1)
    return np.take_along_axis(scores, order, axis=1), seqs


def encoder_decoder_step(model, memory, memory_key_padding_mask, banned=()):
    """The ``step`` and ``reorder`` of a model with ``decode(tgt, memory,
    memory_key_padding_mask, cache)``, ``decoder.layers`` and ``pad_id``, over a new
    nn.DecoderCache: each step decodes only the newest token and gives the next token's
    log-probabilities on the host, as float64, with the tokens ``banned`` ruled out.

    Shape:
        memory (N, S, E), memory_key_padding_mask (N, S) or None;
        step: tokens ndarray (N, t) -> ndarray (N, V)
    """
    cache = nn.DecoderCache(len(model.decoder.layers))
    banned = list(banned)

    def step(tokens):
        newest = mg.tensor(tokens[:, -1:], dtype=mg.int64, device=memory.device)    # (N, 1)
        logits = model.decode(newest, memory, memory_key_padding_mask, cache)[:, -1]
        logp = F.log_softmax(logits, -1).numpy().astype(np.float64)                # (N, V)
        logp[:, banned] = -np.inf
        return logp

    def reorder(index):
        cache.reorder(mg.tensor(index, device=memory.device))

    return step, reorder


def greedy_search(model, memory, memory_key_padding_mask, max_new_tokens, bos_id, eos_id):
    """Greedy decoding of an encoder-decoder model (see ``encoder_decoder_step``) from BOS:
    the most likely next token at each step, never pad_id nor BOS, until every row has
    produced EOS.

    Shape:
        memory (B, S, E) -> ndarray (B, L) int64 without BOS, padded with pad_id after EOS
    """
    step, _ = encoder_decoder_step(model, memory, memory_key_padding_mask,
                                   banned=(model.pad_id, bos_id))
    bos = np.full((memory.shape[0], 1), bos_id, dtype=np.int64)
    return token_by_token(step, bos, max_new_tokens, eos_id=eos_id, pad_id=model.pad_id)[:, 1:]
