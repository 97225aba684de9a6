"""models.markov: the entropy rate and the Bayes-optimal masked accuracy against brute-force
enumeration of every sequence of a tiny chain, the stationary distribution, and sampling."""
import itertools

import numpy as np
import pytest

from minigrad.models.markov import MarkovChain


def brute_stationary(chain):
    """The state distribution after many steps from a uniform start: matrix powers, not a
    linear solve."""
    M = chain.state_transitions()
    return np.linalg.matrix_power(M, 2000)[0].reshape((chain.n_symbols,) * chain.order)


def sequence_probs(chain, L):
    """P(x_1 .. x_L) of every sequence of length L of the stationary chain, by enumeration:
    shape (V,) * L."""
    V, k, P = chain.n_symbols, chain.order, chain.transitions
    probs = np.zeros((V,) * L)
    start = brute_stationary(chain)
    for seq in itertools.product(range(V), repeat=L):
        p = start[seq[:k]]
        for t in range(k, L):
            p *= P[seq[t - k:t + 1]]
        probs[seq] = p
    return probs


def entropy(p):
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


@pytest.mark.parametrize("order, V, L", [(1, 3, 5), (2, 3, 6), (2, 2, 8), (3, 2, 8)])
def test_entropy_rate_is_the_conditional_entropy_of_the_next_symbol(order, V, L):
    """H(X_L | X_1..X_{L-1}) = H(X_1..X_L) - H(X_1..X_{L-1}), from the probabilities of
    every sequence; for a stationary order-k chain it is the entropy rate for every L > k,
    and H(X_1..X_L) / L tends to it."""
    chain = MarkovChain.random(V, order=order, alpha=1.0, seed=1)
    probs = sequence_probs(chain, L)
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    conditional = entropy(probs) - entropy(probs.sum(-1))
    assert chain.entropy_rate() == pytest.approx(conditional, abs=1e-10)


def test_entropy_rate_of_known_chains():
    """An i.i.d. uniform chain: log V; a deterministic cycle: 0."""
    assert MarkovChain(np.full((4, 4), 0.25)).entropy_rate() == pytest.approx(np.log(4))
    cycle = np.roll(np.eye(3), 1, axis=1)[:, None, :].repeat(3, axis=1)       # order 2
    assert MarkovChain(cycle).entropy_rate() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("V, L, m", [(3, 3, 1), (3, 7, 3), (4, 5, 2), (2, 9, 4)])
def test_masked_accuracy_is_the_bayes_accuracy_by_exhaustive_expectation(V, L, m):
    """Hide position m of a length-L sequence and guess it from every other symbol: the best
    guess for each visible context is the most likely hidden symbol, so the Bayes accuracy
    is the sum over visible contexts of max over x of P(context, x). Computed from every
    sequence's probability, it equals the two-neighbour formula."""
    chain = MarkovChain.random(V, order=1, alpha=0.7, seed=2)
    probs = np.moveaxis(sequence_probs(chain, L), m, -1).reshape(-1, V)      # (contexts, x)
    assert chain.masked_accuracy() == pytest.approx(probs.max(-1).sum(), abs=1e-10)


def test_masked_accuracy_of_known_chains():
    assert MarkovChain(np.full((5, 5), 0.2)).masked_accuracy() == pytest.approx(0.2)
    assert MarkovChain(np.roll(np.eye(4), 1, axis=1)).masked_accuracy() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="first-order"):
        MarkovChain.random(3, order=2).masked_accuracy()


@pytest.mark.parametrize("order", [1, 2, 3])
def test_stationary_distribution(order):
    chain = MarkovChain.random(4, order=order, seed=3)
    pi = chain.stationary()
    assert pi.shape == (4,) * order and pi.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(pi, brute_stationary(chain), atol=1e-12)
    np.testing.assert_allclose(pi.reshape(-1) @ chain.state_transitions(), pi.reshape(-1),
                               atol=1e-12)


def test_random_chain_is_seeded_and_valid():
    a, b = MarkovChain.random(16, order=2, seed=0), MarkovChain.random(16, order=2, seed=0)
    assert a.transitions.shape == (16, 16, 16)
    np.testing.assert_array_equal(a.transitions, b.transitions)
    np.testing.assert_allclose(a.transitions.sum(-1), 1.0)
    assert not np.array_equal(a.transitions, MarkovChain.random(16, order=2, seed=1).transitions)
    assert 0 < a.entropy_rate() < np.log(16)
    with pytest.raises(ValueError):
        MarkovChain(np.full((3, 4), 0.25))


def test_samples_have_the_chain_statistics():
    """Stationary samples: symbol frequencies match the stationary marginal, and the mean
    negative log-likelihood per symbol matches the entropy rate."""
    chain = MarkovChain.random(6, order=2, alpha=0.5, seed=4)
    seqs = chain.sample(400, 200, np.random.default_rng(0))
    assert seqs.shape == (400, 200) and seqs.dtype == np.int64
    np.testing.assert_array_equal(seqs, chain.sample(400, 200, 0))                # seeded
    freq = np.bincount(seqs.reshape(-1), minlength=6) / seqs.size
    np.testing.assert_allclose(freq, chain.stationary().sum(0), atol=0.01)
    nll = -chain.log_prob(seqs).mean()
    assert nll == pytest.approx(chain.entropy_rate(), abs=0.02)
    assert np.isfinite(chain.log_prob(seqs)).all()  # only transitions the chain allows


def _count_solves(monkeypatch):
    """Count the least-squares solves of the stationary distribution."""
    calls, solve = [], MarkovChain._solve_stationary

    def counted(self):
        calls.append(self)
        return solve(self)
    monkeypatch.setattr(MarkovChain, "_solve_stationary", counted)
    return calls


def test_the_stationary_distribution_is_solved_once_per_chain(monkeypatch):
    calls = _count_solves(monkeypatch)
    chain = MarkovChain.random(16, order=2, seed=0)
    assert calls == []
    for seed in range(3):
        chain.sample(4, 10, seed)
    pi = chain.stationary()
    chain.entropy_rate()
    assert calls == [chain]
    pi[...] = 0  # a copy: the chain's own is untouched
    np.testing.assert_allclose(chain.stationary().sum(), 1.0)
    MarkovChain.random(16, order=1, seed=0).masked_accuracy()
    assert len(calls) == 2


def test_samples_equal_those_with_the_distribution_solved_at_every_call(monkeypatch):
    """The kept stationary distribution gives the same tokens, seed for seed, as solving it
    afresh at every call."""
    kept, afresh = MarkovChain.random(16, order=2, seed=0), MarkovChain.random(16, order=2, seed=0)
    monkeypatch.setattr(afresh, "_stationary_distribution", afresh._solve_stationary)
    for seed in range(3):
        np.testing.assert_array_equal(kept.sample(32, 65, seed), afresh.sample(32, 65, seed))
    assert kept.entropy_rate() == afresh.entropy_rate()


def test_new_transitions_are_solved_again_and_the_kept_ones_cannot_change(monkeypatch):
    calls = _count_solves(monkeypatch)
    P = MarkovChain.random(4, order=1, seed=0).transitions.copy()
    chain = MarkovChain(P)
    before = chain.stationary()
    P[0] = [1, 0, 0, 0]  # the caller's array: the chain holds a copy
    np.testing.assert_array_equal(chain.transitions[0], MarkovChain.random(4, 1, seed=0)
                                  .transitions[0])
    with pytest.raises(ValueError, match="read-only"):
        chain.transitions[0, 0] = 1.0
    other = MarkovChain.random(4, order=1, seed=1).transitions
    chain.transitions = other
    np.testing.assert_allclose(chain.stationary(), brute_stationary(chain), atol=1e-12)
    assert len(calls) == 2 and not np.allclose(chain.stationary(), before)
    with pytest.raises(ValueError, match="distribution"):
        chain.transitions = np.full((3, 3), 0.5)
