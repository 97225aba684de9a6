"""Manifold-constrained hyper-connections (mHC; Xie et al., DeepSeek, 2025, building on
the hyper-connections of Zhu et al., 2024).

The residual stream is widened to n parallel streams X (B, T, n, E). Around a sublayer F:

    X' = H_res X + H_post^T F(H_pre X)

H_pre (1 x n, non-negative) reads a mixture of the streams, H_post (n x 1, non-negative)
writes the output back to every stream, and H_res (n x n) mixes the streams. H_res is kept
doubly stochastic (rows and columns sum to 1) by a Sinkhorn-Knopp projection of learned
logits, so mixing neither amplifies nor shrinks the residual signal. With one stream,
H_pre = H_post = 1 (their initial values) and H_res = [[1]]: the ordinary residual x + F(x).
"""
import minigrad as mg

from .module import Module
from .parameter import Parameter


def sinkhorn(logits, iters=20):
    """The doubly stochastic matrix exp(logits) rescaled by ``iters`` alternating row and
    column normalisations (Sinkhorn & Knopp, 1967), in log space so no exp overflows;
    differentiable. Columns sum to 1 exactly (the last step), rows to within the method's
    convergence (about 1e-7 after 20 steps from small logits)."""
    log_m = logits
    for _ in range(iters):
        log_m = log_m - log_m.logsumexp(-1, keepdim=True)   # rows
        log_m = log_m - log_m.logsumexp(-2, keepdim=True)   # columns
    return log_m.exp()


class HyperConnection(Module):
    """The mHC residual around one sublayer (see the module docstring).

    Args:
        n_streams: number of residual streams n (default 4).
        sinkhorn_iters: Sinkhorn-Knopp steps for H_res (default 20).
    Shape:
        streams (B, T, n, E) and a sublayer (B, T, E) -> (B, T, E) give (B, T, n, E).

    A layer that writes its residual lines out (as nn.TransformerEncoderLayer does) calls
    the two halves itself; where an ordinary pre-LN layer has
    ``x = x + f(norm(x))``, the mHC layer has ``x = hc.write(x, f(norm(hc.read(x))))``.
    """

    def __init__(self, n_streams=4, sinkhorn_iters=20):
        super().__init__()
        self.n_streams, self.sinkhorn_iters = n_streams, sinkhorn_iters
        # |.| keeps H_pre and H_post non-negative; they start as the plain residual's 1s
        # (H_pre = 1/n: the sublayer reads the mean of the streams)
        self.pre = Parameter(mg.full((n_streams,), 1.0 / n_streams))
        self.post = Parameter(mg.ones(n_streams))
        # logits of H_res: a strong diagonal, so mixing starts close to the identity
        self.res_logits = Parameter(mg.eye(n_streams) * 4.0)

    def h_pre(self):
        return self.pre.abs()

    def h_post(self):
        return self.post.abs()

    def h_res(self):
        return sinkhorn(self.res_logits, self.sinkhorn_iters)

    def read(self, streams):
        """The sublayer's input H_pre X: a non-negative mixture of the streams.

        Shape:
            streams (B, T, n, E) -> (B, T, E)
        """
        return (self.h_pre().unsqueeze(-1) * streams).sum(-2)

    def write(self, streams, out):
        """The streams after the sublayer: H_res X + H_post^T out, where ``out`` is what the
        sublayer made of ``read(streams)``.

        Shape:
            streams (B, T, n, E), out (B, T, E) -> (B, T, n, E)
        """
        mixed = self.h_res() @ streams                              # (B, T, n, E)
        return mixed + self.h_post().unsqueeze(-1) * out.unsqueeze(-2)

    def forward(self, streams, sublayer):
        """The residual around ``sublayer``: ``write(streams, sublayer(read(streams)))``."""
        return self.write(streams, sublayer(self.read(streams)))

    def extra_repr(self):
        return f"n_streams={self.n_streams}, sinkhorn_iters={self.sinkhorn_iters}"


def expand_streams(x, n):
    """(B, T, E) -> (B, T, n, E): every stream starts as a copy of x."""
    return x.unsqueeze(-2).expand(*x.shape[:-1], n, x.shape[-1])


def collapse_streams(streams):
    """(B, T, n, E) -> (B, T, E): the mean of the streams (so that n copies of x + F(x)
    come back as x + F(x), at the scale of an ordinary residual)."""
    return streams.mean(-2)
