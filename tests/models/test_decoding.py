"""models.decoding: the token-by-token loop (EOS, padding, early stop, what the step sees)
and beam search (exact with enough beams, its cache reorders) over toy step functions; the
models' own decoding is tested against full passes in their test files."""
import itertools

import numpy as np
import pytest

from minigrad.models import decoding

BOS, EOS, PAD = 1, 2, 0


def markov_log_probs(V, seed):
    """A random table of next-token log-probabilities given the last token, with PAD and BOS
    ruled out (as the models' steps do)."""
    logits = np.random.default_rng(seed).standard_normal((V, V)) * 2.0
    logits[:, [PAD, BOS]] = -np.inf
    return logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)


def test_token_by_token_pads_after_eos_and_stops():
    table = np.array([5, 3, 0, 4, 2, 2])  # next token after each token; 2 is EOS
    seen = []

    def step(tokens):
        seen.append(tokens.copy())
        return np.eye(6)[table[tokens[:, -1]]]                               # (B, V)

    prefix = np.array([[1], [3], [5]], dtype=np.int32)
    out = decoding.token_by_token(step, prefix, 10, eos_id=EOS, pad_id=PAD)
    # 1 -> 3 -> 4 -> 2;  3 -> 4 -> 2;  5 -> 2: the loop stops when every row has its EOS
    np.testing.assert_array_equal(out, [[1, 3, 4, 2], [3, 4, 2, 0], [5, 2, 0, 0]])
    assert out.dtype == np.int32 and len(seen) == 3
    np.testing.assert_array_equal(seen[-1], out[:, :-1])  # every token so far, prefix first


def test_token_by_token_without_eos_runs_to_the_end_and_uses_choose():
    def step(tokens):
        return tokens[:, -1:].astype(float)

    out = decoding.token_by_token(step, np.array([[2, 7]]), 4,
                                  choose=lambda scores: scores[:, 0].astype(int) + 1)
    np.testing.assert_array_equal(out, [[2, 7, 8, 9, 10, 11]])
    assert decoding.token_by_token(step, np.array([[2]]), 0).shape == (1, 1)


def brute_force(table, length, length_penalty):
    """The best output from BOS among all closed by EOS within ``length`` tokens or left
    open at ``length``, by summed log-probability / length ** length_penalty."""
    symbols = range(EOS + 1, table.shape[0])
    best, best_seq = -np.inf, None
    candidates = [s + (EOS,) for n in range(length) for s in itertools.product(symbols, repeat=n)]
    candidates += list(itertools.product(symbols, repeat=length))
    for seq in candidates:
        prev = (BOS,) + seq[:-1]
        score = sum(table[a, b] for a, b in zip(prev, seq)) / len(seq) ** length_penalty
        if score > best:
            best, best_seq = score, seq
    return list(best_seq)


@pytest.mark.parametrize("length_penalty", [0.0, 1.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_search_with_enough_beams_is_exact_and_reorders_its_cache(seed, length_penalty):
    """With 3 symbols and 3 steps, 12 beams keep every extension of every open sequence up
    to the last step, where only same-length ones compete: each batch element gets its
    brute-force best. The step keeps a "cache" as a model does
    (each row's tokens so far, reordered by ``reorder``) and checks that it always holds
    the tokens it is given before the newest."""
    V, L, K, B = 6, 3, 12, 2
    tables = [markov_log_probs(V, seed), markov_log_probs(V, seed + 10)]
    cache = [[] for _ in range(B * K)]
    calls = []

    def step(tokens):
        assert tokens.shape == (B * K, len(calls) + 1)
        assert cache == tokens[:, :-1].tolist()
        for row, token in zip(cache, tokens[:, -1]):
            row.append(int(token))
        calls.append(tokens)
        last = tokens[:, -1].reshape(B, K)
        return np.concatenate([tables[b][last[b]] for b in range(B)])      # (B * K, V)

    def reorder(index):
        assert index.shape == (B * K,) and (index // K == np.arange(B * K) // K).all()
        cache[:] = [list(cache[i]) for i in index]

    out = decoding.beam_search(step, reorder, B, K, BOS, EOS, PAD, L, length_penalty)
    assert out.dtype == np.int64 and len(calls) <= L
    for b in range(B):
        expected = brute_force(tables[b], L, length_penalty)
        assert [t for t in out[b].tolist() if t != PAD] == expected


def test_beam_search_of_one_beam_is_token_by_token():
    table = markov_log_probs(7, 5)

    def step(tokens):
        return table[tokens[:, -1]]

    greedy = decoding.token_by_token(step, np.full((1, 1), BOS), 6, eos_id=EOS, pad_id=PAD)
    beam = decoding.beam_search(step, lambda index: None, 1, 1, BOS, EOS, PAD, 6)
    np.testing.assert_array_equal(beam, greedy[:, 1:])
