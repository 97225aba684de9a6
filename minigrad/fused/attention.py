"""Scaled dot-product attention as one primitive, tiled in the manner of FlashAttention
(Dao et al., 2022; Dao, 2023), so that the (T, S) scores of a head are never held at once.

Forward walks the queries in blocks of ``bq`` rows and, for each, the keys in blocks of
``bk``: a tile's scores are made, folded into a running row maximum, row sum and weighted
sum of the values (the "online softmax": earlier partial sums are rescaled by
exp(old max - new max)), and dropped. Only the output and the log of each row's softmax
normaliser (``lse``) are kept for backward, which makes each tile's weights again from
q, k and lse and adds the tile's share into dq, dk and dv:

    P = exp(S - lse),  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),
    dQ = dS K * scale,  dK = dS^T Q * scale

Memory is O(T + S) per head beyond one tile, instead of O(T S); when every score fits in
one tile (short sequences) the loops run once. Both passes work on raw arrays, in place.
Second derivatives (backward under ``create_graph``) come from differentiating
``composite``, the same attention written with Tensor ops, with the forward's dropout
masks: exact to any order, at the composite's O(T S) memory.
"""
from .. import backend
from ..autograd.function import Primitive, ShapeError
from ..autograd.grad_mode import STATE
from ..ops.reduce import SafeSoftmax
from .differentiate import composite_grads, saved_array, tangent_by

TILE = 1 << 19  # the most scores (all batch and head dims together) one tile holds


def blocks(lead, T, S, tile=None):
    """(bq, bk): the query and key block sizes for ``lead`` (batch times heads) rows of
    (T, S) scores: one tile when everything fits in ``tile`` scores (default TILE). Never 0,
    even for no queries or no keys (the loops then run no times)."""
    tile = TILE if tile is None else tile
    if lead * T * S <= tile:
        return max(1, T), max(1, S)
    bk = min(S, 512)
    return max(16, min(T, tile // max(1, lead * bk))), bk


class Attention(Primitive):
    """out = dropout(P) @ v, P = softmax(q @ k^T * scale + mask);  dv = dropout(P)^T @ grad,
    dS = P * (dropout(grad @ v^T) - rowsum(grad * out)),  dq = dS @ k * scale,
    dk = dS^T @ q * scale  (tiled, see the module docstring; mask and dropout are constants)

    Args (keywords): scale; causal: None, or the offset c such that query i may attend to
    key j only where j <= i + c (0: PyTorch's is_causal); dropout_p; block (bq, bk).
    A row whose every key is masked gives zeros (PyTorch's _safe_softmax).
    """
    @staticmethod
    def forward(ctx, q, k, v, mask, scale, causal, dropout_p, block):
        xp = ctx.xp
        if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
            raise ShapeError(f"scaled_dot_product_attention: query {tuple(q.shape)}, key "
                             f"{tuple(k.shape)} and value {tuple(v.shape)} do not fit "
                             "(expected (..., T, D), (..., S, D), (..., S, Dv))")
        if not (q.dtype == k.dtype == v.dtype):
            raise ShapeError(f"scaled_dot_product_attention: expected query, key and value "
                             f"of one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
        if mask is not None and mask.dtype.kind != "f":
            raise TypeError(f"scaled_dot_product_attention: the mask must be floating point "
                            f"(added to the scores), got {mask.dtype}")
        T, S = q.shape[-2], k.shape[-2]
        if mask is None and dropout_p == 0:  # the device's own kernel, where it has one
            fast = backend.attention(q, k, v, scale, causal)
            if fast is not None:
                out, lse = fast
                ctx.save_for_backward(q, k, v, mask, out, lse, None)
                return out
        bq, bk = block
        lead = backend.np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
        out = xp.empty(lead + (T, v.shape[-1]), dtype=q.dtype)
        lse = xp.empty(lead + (T, 1), dtype=q.dtype)
        keep = _Dropout(dropout_p, q.dtype, xp)
        scale = xp.asarray(scale, dtype=q.dtype)

        def heads(h0, h1):  # the heads h0..h1 (the last lead dim) of every array
            qh, kh, vh, mh, oh, lh = (_heads(a, h0, h1) for a in (q, k, v, mask, out, lse))
            rows = oh.shape[:-2]
            for i0 in range(0, T, bq):
                i1 = min(T, i0 + bq)
                qs = qh[..., i0:i1, :] * scale  # the block's queries, scaled once
                m = xp.full(rows + (i1 - i0, 1), -xp.inf, dtype=q.dtype)    # running max
                total = xp.zeros(rows + (i1 - i0, 1), dtype=q.dtype)        # running sum
                acc = xp.zeros(rows + (i1 - i0, v.shape[-1]), dtype=q.dtype)
                for j0, j1 in _key_blocks(i0, i1, S, bk, causal):
                    s = _scores(xp, qs, kh[..., j0:j1, :], mh, causal, i0, i1, j0, j1)
                    m_new = xp.maximum(m, s.max(axis=-1, keepdims=True))
                    m_new = xp.where(xp.isfinite(m_new), m_new, 0)  # all -inf so far: not NaN
                    s -= m_new
                    p = xp.exp(s, out=s)
                    rescale = xp.exp(m - m_new)
                    total *= rescale
                    total += p.sum(axis=-1, keepdims=True)
                    acc *= rescale
                    acc += xp.matmul(keep.apply(p), vh[..., j0:j1, :])
                    m = m_new
                empty = total == 0                     # every key masked: zeros, not NaN
                oh[..., i0:i1, :] = acc / xp.where(empty, 1, total)
                lh[..., i0:i1, :] = xp.where(empty, xp.inf,
                                             m + xp.log(xp.where(empty, 1, total)))
        _over_heads(heads, lead, block, T, S, dropout_p, xp)
        ctx.save_for_backward(q, k, v, mask, out, lse, keep.state)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, mask, out, lse, state = ctx.saved_tensors
        if STATE.grad_enabled:  # create_graph: differentiate the composite, exact to any order
            return _composite_grads(ctx, grad, q, k, v, mask, state)
        xp, params = ctx.xp, ctx.params
        scale, causal, (bq, bk) = params["scale"], params["causal"], params["block"]
        qa, ka, va, g, o = q.data, k.data, v.data, grad.data, out.data
        if mask is None and params["dropout_p"] == 0:
            fast = backend.attention_backward(qa, ka, va, o, lse.data, g, params["scale"],
                                              causal)
            if fast is not None:
                needs = ctx.needs_input_grad
                return tuple(_tensor(d) if n else None for d, n in zip(fast, needs)) + (None,)
        m = None if mask is None else mask.data
        T, S, lead = qa.shape[-2], ka.shape[-2], o.shape[:-2]
        keep = _Dropout(params["dropout_p"], qa.dtype, xp, state)
        rowdot = (g * o).sum(axis=-1, keepdims=True)                        # (..., T, 1)
        scale = xp.asarray(scale, dtype=qa.dtype)
        dq = xp.zeros(lead + qa.shape[-2:], dtype=qa.dtype)
        dk = xp.zeros(lead + ka.shape[-2:], dtype=qa.dtype)
        dv = xp.zeros(lead + va.shape[-2:], dtype=qa.dtype)

        def heads(h0, h1):  # the heads h0..h1 (the last lead dim) of every array
            qh, kh, vh, mh, gh, rh, lh, dqh, dkh, dvh = (_heads(a, h0, h1) for a in (
                qa, ka, va, m, g, rowdot, lse.data, dq, dk, dv))
            for i0 in range(0, T, bq):
                i1 = min(T, i0 + bq)
                qs_i, g_i = qh[..., i0:i1, :] * scale, gh[..., i0:i1, :]
                for j0, j1 in _key_blocks(i0, i1, S, bk, causal):
                    k_j, v_j = kh[..., j0:j1, :], vh[..., j0:j1, :]
                    s = _scores(xp, qs_i, k_j, mh, causal, i0, i1, j0, j1)
                    s -= lh[..., i0:i1, :]
                    w = xp.exp(s, out=s)                           # the tile's weights P
                    z = keep.tile(w.shape)                         # forward's dropout mask
                    wz = w if z is None else w * z
                    dvh[..., j0:j1, :] += xp.matmul(xp.swapaxes(wz, -1, -2), g_i)
                    ds = xp.matmul(g_i, xp.swapaxes(v_j, -1, -2))  # dP
                    if z is not None:
                        ds *= z
                    ds -= rh[..., i0:i1, :]
                    ds *= w                                        # dS (dq, dk: the scale)
                    dqh[..., i0:i1, :] += xp.matmul(ds, k_j)
                    dkh[..., j0:j1, :] += xp.matmul(xp.swapaxes(ds, -1, -2), qs_i)
        _over_heads(heads, lead, (bq, bk), T, S, params["dropout_p"], xp)
        dq *= scale
        needs = ctx.needs_input_grad
        return tuple(_tensor(d) if n else None for d, n in zip((dq, dk, dv), needs)) + (None,)

    @staticmethod
    def jvp(ctx, dq, dk, dv, dmask):
        """The composite's tangent, with the forward's dropout masks (O(T S) memory)."""
        q, k, v, mask = ctx.inputs[:4]
        params = ctx.params
        dropout = None
        if params["dropout_p"] > 0:
            keep = _Dropout(params["dropout_p"], q.dtype, ctx.xp, saved_array(ctx, 6))
            full = q._make(keep.full(params["block"], params["causal"], ctx.result.shape[:-2],
                                     q.shape[-2], k.shape[-2]))
            dropout = lambda w: w * full  # noqa: E731

        def attention(q, k, v, mask):
            return composite(q, k, v, mask, params["causal"], params["scale"], dropout)[0]
        return tangent_by(attention, q, k, v, mask)


def _heads(a, h0, h1):
    """a[..., h0:h1, :, :] where ``a`` has that dim (unbroadcast), else all of ``a``."""
    if a is None or a.ndim < 3 or a.shape[-3] == 1:
        return a
    return a[..., h0:h1, :, :]


def _over_heads(fn, lead, block, T, S, dropout_p, xp):
    """fn(0, H) at once, or over groups of the H heads on the CPU's cores (see
    backend.run_split) when the work is tiled: then each tile is too large for the
    interpreter's overhead to matter, and its elementwise work is worth sharing. Not with
    dropout, whose masks must be drawn in one order."""
    H = lead[-1] if lead else 1
    tiled = block[0] < T or block[1] < S
    if tiled and dropout_p == 0 and H > 1:
        backend.run_split(fn, H, xp)
    else:
        fn(0, H)


def composite(q, k, v, mask=None, causal=None, scale=1.0, dropout=None):
    """The same attention as Tensor ops, every score kept: (output, weights). What
    nn.functional runs for SDPBackend.MATH or when the weights are wanted, and what
    Attention differentiates for second derivatives. ``dropout`` maps the weights.
    Without keys (S = 0) the weights are empty and the output zeros, as PyTorch's."""
    xp = backend.xp_of(q.data)
    T, S = q.shape[-2], k.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * scale                               # (..., T, S)
    if causal is not None:
        future = xp.arange(S) > xp.arange(T)[:, None] + causal
        scores = scores + xp.where(future, -xp.inf, 0).astype(scores.dtype)
    if mask is not None:
        scores = scores + mask
    if S == 0:  # no key to normalise over: the (empty) scores are the weights
        weights = scores
    else:       # all keys masked: zeros
        weights = SafeSoftmax.apply(scores, dim=scores.ndim - 1)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights


def _composite_grads(ctx, grad, q, k, v, mask, state):
    """dq, dk, dv as a graph of their own (backward under create_graph): the composite,
    recomputed with the forward's dropout masks, differentiated by the engine."""
    params = ctx.params
    dropout = None
    if params["dropout_p"] > 0:
        keep = _Dropout(params["dropout_p"], q.dtype, ctx.xp, state)
        full = keep.full(params["block"], params["causal"], grad.shape[:-2], q.shape[-2],
                         k.shape[-2])
        dropout = lambda w: w * full  # noqa: E731

    def attention(q, k, v):
        return composite(q, k, v, mask, params["causal"], params["scale"], dropout)[0]
    return composite_grads(attention, (q, k, v), grad, ctx.needs_input_grad[:3]) + (None,)


def _key_blocks(i0, i1, S, bk, causal):
    """(j0, j1) of the key blocks that queries i0..i1-1 can see (all, unless causal)."""
    last = S if causal is None else max(0, min(S, i1 + causal))
    return [(j0, min(S, j0 + bk)) for j0 in range(0, last, bk)]


def _scores(xp, qs, k, mask, causal, i0, i1, j0, j1):
    """The tile of scores qs @ k^T (qs: the query rows i0..i1, already scaled; k: the key
    rows j0..j1), plus the mask's tile and the causal mask's."""
    s = xp.matmul(qs, xp.swapaxes(k, -1, -2))
    if mask is not None:
        rows = slice(i0, i1) if mask.shape[-2] != 1 else slice(None)
        cols = slice(j0, j1) if mask.shape[-1] != 1 else slice(None)
        s = _iadd(s, mask[..., rows, cols])
    if causal is not None and j1 - 1 > i0 + causal:  # some key in the tile is in the future
        future = xp.arange(j0, j1) > xp.arange(i0, i1)[:, None] + causal
        s = _iadd(s, xp.where(future, -xp.inf, 0).astype(s.dtype))
    return s


def _iadd(s, m):
    """s + m in place where the shapes allow (a mask may broadcast s to more dims)."""
    if backend.np.broadcast_shapes(s.shape, m.shape) == s.shape:
        s += m
        return s
    return s + m


def _tensor(arr):
    from ..tensor import Tensor
    return Tensor._make(arr)


class _Dropout:
    """The dropout masks of attention's tiles, drawn from minigrad's random source in
    forward and drawn again, tile for tile, from a copy of where it stood, in backward."""

    def __init__(self, p, dtype, xp, state=None):
        self.p, self.dtype, self.xp = p, dtype, xp
        self.state = None
        if p > 0:
            if state is None:  # forward: remember where the source stood, and draw from it
                self.state = backend.source().fork()
                self.rng = backend.source()
            else:              # backward: a copy of that source of our own
                self.rng = state.fork()

    def _mask(self, shape):
        mask = backend.keep_mask(shape, self.p, self.xp, self.rng).astype(self.dtype)
        mask *= 1.0 / (1.0 - self.p) if self.p < 1 else 0.0  # p = 1 drops everything
        return mask

    def apply(self, w):
        """Forward: w times the tile's mask, in place (w unchanged without dropout)."""
        if self.p == 0:
            return w
        w *= self._mask(w.shape)
        return w

    def tile(self, shape):
        """Backward: the next tile's mask, or None without dropout."""
        return None if self.p == 0 else self._mask(shape)

    def full(self, block, causal, lead, T, S):
        """The masks of every tile, in forward's order, as one (lead..., T, S) array."""
        bq, bk = block
        full = self.xp.zeros(lead + (T, S), dtype=self.dtype)
        for i0 in range(0, T, bq):
            i1 = min(T, i0 + bq)
            for j0, j1 in _key_blocks(i0, i1, S, bk, causal):
                full[..., i0:i1, j0:j1] = self._mask(lead + (i1 - i0, j1 - j0))
        return full
