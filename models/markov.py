"""Markov chains with a known optimum: data whose best achievable loss and accuracy are
computed exactly, so that a trained model can be measured against them (pure NumPy).

    chain = MarkovChain.random(n_symbols=16, order=2, seed=0)
    x = chain.sample(64, 128, rng)          # (64, 128) int64, stationary sequences
    chain.entropy_rate()                    # nats per symbol: the best next-token loss
    MarkovChain.random(16, order=1).masked_accuracy()   # the best accuracy on a masked symbol

An order-k chain over V symbols is its transition tensor P of shape (V,) * (k + 1):
P[a_1, ..., a_k, b] = P(next = b | the last k symbols are a_1 ... a_k).
"""
import numpy as np


class MarkovChain:
    """A stationary Markov chain of order k over V symbols.

    Args:
        transitions: the tensor P, shape (V,) * (k + 1), whose last axis sums to 1; every
            entry positive (as from ``random``) makes the chain ergodic, with one stationary
            distribution.
    Shape:
        ``transitions`` (V,) * (k + 1); ``stationary()`` (V,) * k; ``sample`` (n, length).
    """

    def __init__(self, transitions):
        self.transitions = transitions

    @property
    def transitions(self):
        """The tensor P (float64, read-only: a new one is assigned whole, and then what is
        computed from it, the stationary distribution, is computed again)."""
        return self._transitions

    @transitions.setter
    def transitions(self, transitions):
        P = np.array(transitions, dtype=np.float64)  # a copy: the caller's array may change
        if P.ndim < 2 or len(set(P.shape)) != 1:
            raise ValueError(f"MarkovChain: transitions must have shape (V,) * (k + 1), "
                             f"got {P.shape}")
        if (P < 0).any() or not np.allclose(P.sum(-1), 1.0):
            raise ValueError("MarkovChain: every row of transitions must be a distribution")
        P.flags.writeable = False
        self._transitions = P
        self.n_symbols, self.order = P.shape[0], P.ndim - 1
        self._stationary = None  # computed on first use (a least-squares solve)

    @classmethod
    def random(cls, n_symbols=16, order=2, alpha=0.5, seed=0):
        """A chain whose rows are drawn from a symmetric Dirichlet(alpha) (smaller alpha:
        more peaked rows, a lower entropy rate), from ``seed``."""
        rng = np.random.default_rng(seed)
        V = n_symbols
        rows = rng.dirichlet(np.full(V, alpha), size=V ** order)             # (V^k, V)
        rows = np.maximum(rows, 1e-12)  # Dirichlet draws can underflow to exactly 0
        rows /= rows.sum(-1, keepdims=True)
        return cls(rows.reshape((V,) * (order + 1)))

    def state_transitions(self):
        """The chain on states (the last k symbols): M[s, s'] = P(s -> s'), where state
        (a_1..a_k) moves to (a_2..a_k, b) with probability P[a_1..a_k, b]. Shape (V^k, V^k)."""
        V, k = self.n_symbols, self.order
        rows = self.transitions.reshape(V ** k, V)                           # (V^k, V)
        M = np.zeros((V ** k, V ** k))
        # state index s = a_1 V^(k-1) + ... + a_k; its successors drop a_1 and append b
        successors = (np.arange(V ** k) % V ** (k - 1))[:, None] * V + np.arange(V)
        np.put_along_axis(M, successors, rows, axis=1)
        return M

    def stationary(self):
        """The stationary distribution over states, pi M = pi, shape (V,) * k (solved once
        per chain; a copy is returned)."""
        return self._stationary_distribution().copy()

    def _stationary_distribution(self):
        """``stationary()``, solved on the first call and kept (read-only)."""
        if self._stationary is None:
            self._stationary = self._solve_stationary()
            self._stationary.flags.writeable = False
        return self._stationary

    def _solve_stationary(self):
        M = self.state_transitions()
        n = M.shape[0]
        # pi (M - I) = 0 and sum(pi) = 1, solved together by least squares
        A = np.vstack([(M - np.eye(n)).T, np.ones((1, n))])
        b = np.zeros(n + 1)
        b[-1] = 1.0
        pi = np.linalg.lstsq(A, b, rcond=None)[0]
        return np.clip(pi, 0.0, None).reshape((self.n_symbols,) * self.order)

    def entropy_rate(self):
        """H = sum over states s of pi(s) H(P[s, :]): the entropy per symbol of a long
        sequence, in nats, i.e. the cross-entropy of the true next-symbol distribution given
        the past, the lowest loss a next-token predictor can reach (after the first k
        symbols)."""
        P = self.transitions
        conditional = -(P * np.log(P, where=P > 0, out=np.zeros_like(P))).sum(-1)  # (V,)*k
        return float((self._stationary_distribution() * conditional).sum())

    def masked_accuracy(self):
        """The Bayes-optimal accuracy of guessing one hidden symbol x from its two neighbours
        (a first-order chain): sum over (a, c) of max over x of pi(a) P(a, x) P(x, c).

        Given both neighbours, x is independent of every other symbol of the sequence, so
        no predictor that sees the rest of the sequence (unmasked) can do better."""
        if self.order != 1:
            raise ValueError(f"masked_accuracy: needs a first-order chain, got order "
                             f"{self.order}")
        P, pi = self.transitions, self._stationary_distribution()
        joint = pi[:, None, None] * P[:, :, None] * P[None, :, :]           # (a, x, c)
        return float(joint.max(axis=1).sum())

    def sample(self, n, length, rng):
        """n independent sequences of ``length`` symbols, each starting from the stationary
        distribution (so every position has the same distribution).

        Args:
            rng: a np.random.Generator (or a seed).
        Shape:
            -> (n, length) int64
        """
        rng = np.random.default_rng(rng)
        V, k = self.n_symbols, self.order
        pi = self._stationary_distribution().reshape(-1)                   # (V^k,)
        first = rng.choice(V ** k, size=n, p=pi)                            # (n,)
        out = np.zeros((n, max(length, k)), dtype=np.int64)
        for i in range(k):  # the digits of the first state, most significant first
            out[:, i] = first // V ** (k - 1 - i) % V
        cdf = np.cumsum(self.transitions.reshape(V ** k, V), axis=-1)        # (V^k, V)
        state = first
        for t in range(k, length):
            u = rng.random((n, 1))
            nxt = np.minimum((cdf[state] < u).sum(-1), V - 1)  # inverse-CDF sampling
            out[:, t] = nxt
            state = state % V ** (k - 1) * V + nxt
        return out[:, :length]

    def log_prob(self, seqs):
        """Log-probabilities of each symbol after the first k given the k before it.

        Shape:
            seqs (n, L) integer -> (n, L - k) float64
        """
        seqs = np.asarray(seqs)
        k, L = self.order, seqs.shape[1]
        context = tuple(seqs[:, i:L - k + i] for i in range(k + 1))
        return np.log(self.transitions[context])
