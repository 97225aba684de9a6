"""Scaled dot-product attention as one primitive, tiled in the manner of FlashAttention
(Dao et al., 2022; Dao, 2023), so that the (T, S) scores of a head are never held at once.

Forward walks the queries in blocks of ``bq`` rows and, for each, the keys in blocks of
``bk``. A block's first tile of scores is a plain softmax's numerator: the row maximum m,
P = exp(S - m), its row sum and P V. Each further tile is folded in and dropped (the
"online softmax": the sums so far are rescaled by exp(old max - new max)). Only the output
and the log of each row's softmax normaliser (``lse``) are kept for backward, which makes
each tile's weights again from q, k and lse and adds the tile's share into dq, dk and dv:

    P = exp(S - lse),  dV = P^T dO,  dP = dO V^T,  dS = P * (dP - rowsum(dO * O)),
    dQ = dS K * scale,  dK = dS^T Q * scale

Memory is O(T + S) per head beyond one tile, instead of O(T S). When every score fits in
one tile (short sequences: ``blocks`` gives (T, S)) there is no loop and nothing to fold:
forward is that one tile's softmax, for every head at once, and it keeps the tile's
weights P and dropout mask (at most TILE scores), so that backward starts from them
instead of making them again; on the CPU, a tile of rows of a few keys is laid out keys
first, every row's score for a key side by side (``_keys_first_tile``), so that its passes
are vector loops over the rows. Both passes work on raw arrays, in place where they can. On
the CPU, tiled work and a large one tile (without dropout) go to the cores a group of heads
each, and each core walks its heads in groups whose tiles fit its own cache
(``_in_groups``), multiplying by contiguous copies of k^T and v^T (``_transposed``); a
causal tile stops at the last key its queries see (``_key_blocks``). These change only
BLAS's rounding (the order in which it sums a product or a row), as a different number
of cores does. The output and each gradient are laid out in memory as their input
(``_like``): heads split from a (B, T, H, D) projection, as a multi-head layer makes them,
come back as (B, T, H, D), so that the transpose and reshape that merge them are views
(as PyTorch's fused CPU kernel lays them out).
Second derivatives (backward under ``create_graph``) come from differentiating
``composite``, the same attention written with Tensor ops, with the forward's dropout
masks: exact to any order, at the composite's O(T S) memory.
"""
import math

from .. import backend
from ..autograd import batching
from ..autograd.function import Primitive, ShapeError
from ..autograd.grad_mode import STATE
from ..ops.reduce import SafeSoftmax
from .differentiate import composite_grads, saved_array, tangent_by

TILE = 1 << 20  # the most scores (all batch and head dims together) one tile holds
SHORT_ROWS = 32  # up to this many keys, a row maximum is taken keys-first (_row_max)
SPLIT_SCORES = 1 << 17  # a tile of at least this many scores goes to the cores by heads


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
        lead = _check(q, k, v, mask)
        T, S = q.shape[-2], k.shape[-2]
        if mask is None and dropout_p == 0:  # the device's own kernel, where it has one
            fast = backend.attention(q, k, v, scale, causal)
            if fast is not None:
                out, lse = fast
                ctx.save_for_backward(q, k, v, mask, out, lse, None, None, None)
                return out
        keep = _Dropout(dropout_p, q.dtype, xp)
        weights = kept = None  # the one tile's weights and dropout mask, kept for backward
        in_one_tile = _one_tile(block, T, S, causal)
        if in_one_tile and _keys_first(xp, q, k, v, mask, keep.p):
            out, lse, weights, kept = _keys_first_tile(xp, q, k, v, mask, scale, causal, keep)
            ctx.save_for_backward(q, k, v, mask, out, lse, keep.state, weights, kept)
            return out
        qs = q * xp.asarray(scale, dtype=q.dtype)  # the queries, scaled once
        if in_one_tile:
            def one_tile(qs, k, v, mask, out):
                tile = []
                out, lse = _rows(xp, qs, _transposed(xp, k), v, mask, causal, 0, T, S, keep,
                                 tile, out)
                return out, lse, *tile
            shapes = ((T, v.shape[-1]), (T, 1), (T, S), None)  # no dropout mask if split
            out, lse, weights, kept = _by_heads(xp, one_tile, (qs, k, v, mask), shapes, T * S,
                                                keep.p, like=(qs,))
        else:
            out, lse = _forward_tiles(xp, qs, k, v, mask, causal, block, lead, keep)
        ctx.save_for_backward(q, k, v, mask, out, lse, keep.state, weights, kept)
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, mask, out, lse, state, weights, kept = ctx.saved_tensors
        if STATE.grad_enabled:  # create_graph: differentiate the composite, exact to any order
            return _composite_grads(ctx, grad, q, k, v, mask, state)
        xp, params = ctx.xp, ctx.params
        scale, causal, block = params["scale"], params["causal"], params["block"]
        qa, ka, va, g, o = q.array, k.array, v.array, grad.array, out.array
        if mask is None and params["dropout_p"] == 0:
            fast = backend.attention_backward(qa, ka, va, o, lse.array, g, scale, causal)
            if fast is not None:
                needs = ctx.needs_input_grad
                return tuple(grad._make(d) if n else None for d, n in zip(fast, needs)) + (None,)
        m = None if mask is None else mask.array
        T, S = qa.shape[-2], ka.shape[-2]
        keep = _Dropout(params["dropout_p"], qa.dtype, xp, state)
        scale = xp.asarray(scale, dtype=qa.dtype)
        qs = qa * scale
        if weights is not None and _keys_first(xp, qa, ka, va, m, keep.p):  # (as forward)
            dq, dk, dv = _keys_first_grads(xp, qs, ka, va, g, weights.array,
                                           None if kept is None else kept.array, keep)
        elif weights is not None:  # one tile, whose weights forward kept
            def one_tile(qs, g, o, w, k, v, dq, dk, dv):
                return _weights_grads(xp, qs, g, _rowdot(g, o), w, k, _transposed(xp, v),
                                      None if kept is None else kept.array, keep, (dq, dk, dv))
            shapes = (qa.shape[-2:], ka.shape[-2:], va.shape[-2:])
            dq, dk, dv = _by_heads(xp, one_tile, (qs, g, o, weights.array, ka, va), shapes,
                                   T * S, keep.p, like=(qa, ka, va))
        elif _one_tile(block, T, S, causal):
            dq, dk, dv = _tile_grads(xp, qs, g, _rowdot(g, o), lse.array, ka,
                                     _transposed(xp, ka), _transposed(xp, va), m, causal,
                                     (0, T), (0, S), keep,
                                     _grads_like(xp, g.shape[:-2], qa, ka, va))
        else:
            dq, dk, dv = _backward_tiles(xp, qs, g, o, lse.array, ka, va, m, causal, block,
                                         keep)
        dq *= scale
        needs = ctx.needs_input_grad
        return tuple(grad._make(d) if n else None for d, n in zip((dq, dk, dv), needs)) + (None,)

    @staticmethod
    def jvp(ctx, dq, dk, dv, dmask):
        """The composite's tangent, with the forward's dropout masks (O(T S) memory)."""
        q, k, v, mask = ctx.inputs[:4]
        params = ctx.params
        dropout = None
        if params["dropout_p"] > 0:
            keep = _Dropout(params["dropout_p"], q.dtype, ctx.xp, saved_array(ctx, 6))
            full = q._make(keep.full(params["block"], params["causal"], _score_lead(q, k, mask),
                                     q.shape[-2], k.shape[-2]))
            dropout = lambda w: w * full  # noqa: E731

        def attention(q, k, v, mask):
            return composite(q, k, v, mask, params["causal"], params["scale"], dropout)[0]
        return tangent_by(attention, q, k, v, mask)

    @staticmethod
    def vmap(ctx, q, k, v, mask, **params):
        """The batch is one more leading dim; a batched mask lines up with the scores' dims
        from the right. Dropout with randomness "same": one element's masks (drawn as its
        forward draws them, tile by tile) for every element, applied to the weights of the
        composite (O(T S) memory), as ``jvp`` applies them."""
        same = params["dropout_p"] and batching.random_op(ctx, "attention dropout") == "same"
        if same:  # (the lead dims of one element's scores)
            one = [t[0] if b else t for t, b in zip((q, k, v, mask), ctx.batched)]
            lead = _score_lead(one[0], one[1], one[3])
        q, k, v = (ctx.expanded(i, t) for i, t in enumerate((q, k, v)))
        if ctx.batched[3]:
            mask = batching.pad(mask, q.ndim - 1)
        if not same:
            return Attention.apply(q, k, v, mask, **params)
        keep = _Dropout(params["dropout_p"], q.dtype, backend.xp_of(q.array))
        full = q._make(keep.full(params["block"], params["causal"], lead, q.shape[-2],
                                 k.shape[-2]))
        return composite(q, k, v, mask, params["causal"], params["scale"],
                         lambda w: w * full)[0]


def _check(q, k, v, mask):
    """The lead (batch and head) dims of the output; a one-line error where the operands
    do not fit."""
    op = "scaled_dot_product_attention"
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(f"{op}: query {tuple(q.shape)}, key {tuple(k.shape)} and value "
                         f"{tuple(v.shape)} do not fit (expected (..., T, D), (..., S, D), "
                         "(..., S, Dv))")
    if not (q.dtype == k.dtype == v.dtype):
        raise ShapeError(f"{op}: expected query, key and value of one dtype, got {q.dtype}, "
                         f"{k.dtype}, {v.dtype}")
    lead = q.shape[:-2]
    if not lead == k.shape[:-2] == v.shape[:-2]:
        try:
            lead = backend.np.broadcast_shapes(lead, k.shape[:-2], v.shape[:-2])
        except ValueError:
            raise ShapeError(f"{op}: the batch dims of query {tuple(q.shape)}, key "
                             f"{tuple(k.shape)} and value {tuple(v.shape)} do not "
                             "broadcast") from None
    if mask is None:
        return lead
    if mask.dtype.kind != "f":
        raise TypeError(f"{op}: the mask must be floating point (added to the scores), got "
                        f"{mask.dtype}")
    scores = lead + (q.shape[-2], k.shape[-2])
    if not _broadcasts_to(mask.shape, scores):
        raise ShapeError(f"{op}: the mask {tuple(mask.shape)} does not broadcast to the "
                         f"scores' shape {scores}")
    return lead


def _broadcasts_to(shape, target):
    """Whether an array of ``shape`` broadcasts to ``target`` without enlarging it."""
    return len(shape) <= len(target) and all(
        n in (1, m) for n, m in zip(reversed(shape), reversed(target)))


def _one_tile(block, T, S, causal):
    """Whether one tile of (bq, bk) = ``block`` holds every score, and some query sees a
    key (then forward and backward run no loop)."""
    bq, bk = block
    return bq >= T > 0 and bk >= S > 0 and (causal is None or T + causal > 0)


def _rows(xp, qs, kt, v, mask, causal, i0, i1, bk, keep, tile=None, out=None):
    """(out, lse) of the query rows i0..i1 (``qs``: those rows, scaled) over the key blocks
    of ``bk`` keys that they can see (``kt``: the keys transposed, ``_transposed``); None
    where they see none. ``tile``, a list, when there is one key block: its weights and
    dropout mask are appended to it, and the output is written into ``out`` where given."""
    sums = ()  # (row max, row sum, weighted sum of the values) so far
    trim = tile is None and keep.p == 0
    for j0, j1 in _key_blocks(i0, i1, kt.shape[-1], bk, causal, trim):
        s, m_new = _scores(xp, qs, kt[..., j0:j1], mask, causal, i0, i1, j0, j1,
                           *((sums[0], MAX_SO_FAR) if sums else ()))
        sums = _fold(xp, s, m_new, v[..., j0:j1, :], keep, *sums, tile=tile, out=out)
    return _normalised(xp, *sums) if sums else None


def _fold(xp, s, m_new, v, keep, m=None, total=None, acc=None, tile=None, out=None):
    """Fold a tile of scores ``s``, less their running row maximum ``m_new`` (``_scores``;
    its keys' values: ``v``), into the running row maximum m, row sum ``total`` and weighted
    sum of the values ``acc``, or start them with the first tile (m None: a plain softmax's
    numerator). ``s`` is used up. ``tile``, a list: the first tile's weights (its softmax, 0
    in a row without keys) and dropout mask (None without dropout) are appended to it, and
    its weighted sum is written into ``out`` where given."""
    p = xp.exp(s, out=s)
    if m is None:
        total = backend.row_sum(p)
        if tile is not None:
            kept = keep.draw(p.shape)
            weights = backend.host_loops.normalised_weights(p, total, kept, keep.factor())
            if weights is None:  # (the same, pass by pass)
                weights = p / xp.where(total == 0, 1, total)
                if kept is not None:
                    p *= keep.scaled(kept)
            tile += [weights, kept]
            return m_new, total, xp.matmul(p, v, out=out)
        return m_new, total, xp.matmul(keep.apply(p), v)
    rescale = xp.exp(m - m_new)
    total *= rescale
    total += backend.row_sum(p)
    acc *= rescale
    acc += xp.matmul(keep.apply(p), v)
    return m_new, total, acc


def _normalised(xp, m, total, acc):
    """(out, lse) = (acc / total, m + log(total)) per row, in place in ``acc``; a row whose
    every key is masked (total 0) gives zeros and lse +inf."""
    order = _memory_order(acc)  # (NumPy walks the operands in the first one's order)
    norm = xp.where(total == 0, 1, total).transpose(order)
    xp.divide(acc.transpose(order), norm, out=acc.transpose(order))
    return acc, _lse(xp, m, total)


def _lse(xp, m, total):
    """m + log(total) per row: the log of a row's softmax normaliser; +inf where every key
    is masked (total 0)."""
    empty = total == 0
    lse = xp.log(xp.where(empty, 1, total))
    lse += m
    return xp.where(empty, xp.inf, lse)


KEYS_FIRST = 16  # on the CPU, one tile of rows of up to this many keys is laid out keys first
#                 (at 32 keys a row, the two layouts take the same time)


def _keys_first(xp, q, k, v, mask, dropout_p):
    """Whether the one tile of scores is made keys first (``_keys_first_tile``): on the CPU,
    for rows of up to KEYS_FIRST keys, where q, k and v have the same lead dims (a mask
    broadcasting to them) and the work stays on one core (``_splits``)."""
    lead, S = q.shape[:-2], k.shape[-2]
    return (xp is backend.np and S <= KEYS_FIRST and lead == k.shape[:-2] == v.shape[:-2]
            and (mask is None or _broadcasts_to(mask.shape, lead + (q.shape[-2], S)))
            and not _splits(lead, False, q.shape[-2] * S, dropout_p))


def _keys_first_tile(xp, q, k, v, mask, scale, causal, keep):
    """(out, lse, weights, dropout mask) of the one tile, its scores laid out keys first:
    (S, ..., T), each key's scores of every query row side by side, made by the products
    k q^T a head. A row of a short sequence's scores (a dozen keys) is too short for a
    vector loop, and NumPy pays its per-row overhead once a row; keys first, each pass over
    the scores (the mask, the row maxima, exp, the row sums, the weights) runs once a key
    over every row (``host_loops.shift_keys_first``, ``weights_keys_first``; NumPy's
    formulas, the same bits, without numba). A row is summed key by key, and the output is
    the weights (dropped out) times v, as softmax, dropout and the product in turn give it.
    The weights come back as the (..., T, S) view of their keys-first memory, which
    backward reads (``_keys_first_grads``), and the dropout mask (drawn as F.dropout draws
    it for the weights) keys first, (S, R)."""
    lead, T, S, dtype = q.shape[:-2], q.shape[-2], k.shape[-2], q.dtype
    qt = xp.multiply(xp.swapaxes(q, -1, -2), xp.asarray(scale, dtype=dtype),  # q^T, scaled
                     out=xp.empty(lead + (q.shape[-1], T), dtype))
    st = xp.empty((S,) + lead + (T,), dtype)
    xp.matmul(k, qt, out=xp.moveaxis(st, 0, -2))
    flat = st.reshape(S, -1)
    first = S if causal is None else causal + 1  # (row t sees the keys before first + t)
    m = backend.host_loops.shift_keys_first(flat, mask, lead, first)
    if m is None:  # (the same, pass by pass)
        m = _shift_keys_first(xp, st, mask, first, lead, T, S)
    xp.exp(flat, out=flat)
    kept = keep.draw(lead + (T, S))  # (one draw of the weights, as F.dropout's)
    kept_flat = None if kept is None else xp.ascontiguousarray(
        xp.moveaxis(kept, -1, 0)).reshape(S, -1)
    sums = backend.host_loops.weights_keys_first(flat, kept_flat, keep.factor())
    if sums is not None:
        total, weights = sums
    else:  # (the same, pass by pass)
        total = flat.sum(axis=0)
        weights = flat / xp.where(total == 0, 1, total)
        if kept is not None:
            xp.multiply(weights, keep.scaled(kept_flat), out=flat)
    dropped = (weights if kept is None else flat).reshape(st.shape)
    out = _like(xp, q, lead + (T, v.shape[-1]))
    xp.matmul(xp.swapaxes(xp.moveaxis(dropped, 0, -2), -1, -2), v, out=out)
    lse = _lse(xp, m, total).reshape(lead + (T, 1))
    return out, lse, xp.moveaxis(weights.reshape(st.shape), 0, -1), kept_flat


def _shift_keys_first(xp, st, mask, first, lead, T, S):
    """``host_loops.shift_keys_first``'s formulas in NumPy: the mask and the causal mask
    added to the keys-first scores ``st`` (S, ..., T), each row's maximum (0 where it is not
    finite) subtracted; the maxima (R,)."""
    if mask is not None:
        full = mask.reshape((1,) * (len(lead) + 2 - mask.ndim) + mask.shape)
        st += xp.moveaxis(full, -1, 0)
    if first < S:
        future = xp.arange(S)[:, None] >= xp.arange(T) + first  # (S, T)
        st += xp.where(future, -xp.inf, 0).astype(st.dtype).reshape(
            (S,) + (1,) * len(lead) + (T,))
    m = st.max(axis=0)
    m = xp.where(xp.isfinite(m), m, 0)
    st -= m
    return m.reshape(-1)


def _keys_first_grads(xp, qs, k, v, g, weights, kept, keep):
    """(dq / scale, dk, dv) of the one tile from the weights ``_keys_first_tile`` made (and
    its dropout mask ``kept``, keys first (S, R)), every product into or from keys-first
    memory: dV = (P z)^T dO, dP^T = V dO^T, dS (``host_loops.score_grads_keys_first``:
    its rowsum(dO * O) is the sum over the keys of P z dP, forward's output being P z V),
    dQ = dS K, dK = dS^T Q. ``qs``: the queries, scaled."""
    lead, T, S = qs.shape[:-2], qs.shape[-2], k.shape[-2]
    keys_first = (S,) + lead + (T,)
    w = xp.moveaxis(weights, -1, 0).reshape(S, -1)
    kept_t = None if kept is None else kept.reshape(S, -1)
    wz = w if kept_t is None else backend.host_loops.kept_times(w, kept_t, keep.factor())
    if wz is None:  # (the same, pass by pass)
        wz = w * keep.scaled(kept_t)
    dq, dk, dv = _grads_like(xp, lead, qs, k, v)
    xp.matmul(xp.moveaxis(wz.reshape(keys_first), 0, -2), g, out=dv)
    ds = xp.empty(keys_first, qs.dtype)
    xp.matmul(v, xp.ascontiguousarray(xp.swapaxes(g, -1, -2)), out=xp.moveaxis(ds, 0, -2))
    flat = ds.reshape(S, -1)
    if not backend.host_loops.score_grads_keys_first(flat, kept_t, keep.factor(), wz, w):
        rowdot = (wz * flat).sum(axis=0)  # (the same, pass by pass)
        if kept_t is not None:
            flat *= keep.scaled(kept_t)
        flat -= rowdot
        flat *= w
    ds = xp.moveaxis(ds, 0, -2)                    # (..., S, T): dS^T a head
    return xp.matmul(xp.swapaxes(ds, -1, -2), k, out=dq), xp.matmul(ds, qs, out=dk), dv


def _forward_tiles(xp, qs, k, v, mask, causal, block, lead, keep):
    """(out, lse) block of queries by block of queries, over groups of heads."""
    (bq, bk), T, S = block, qs.shape[-2], k.shape[-2]
    out = _like(xp, qs, lead + (T, v.shape[-1]))
    lse = xp.empty(_score_lead(qs, k, mask) + (T, 1), dtype=qs.dtype)

    def heads(h0, h1):  # the heads h0..h1 (the last lead dim) of every array
        qh, kh, vh, mh, oh, lh = (_heads(a, h0, h1) for a in (qs, k, v, mask, out, lse))
        kt = _transposed(xp, kh)
        for i0 in range(0, T, bq):
            i1 = min(T, i0 + bq)
            rows = _rows(xp, qh[..., i0:i1, :], kt, vh, mh, causal, i0, i1, bk, keep)
            oh[..., i0:i1, :], lh[..., i0:i1, :] = (0, xp.inf) if rows is None else rows
    _over_heads(_in_groups(heads, lead, bq * bk, xp), lead, block, T, S, keep.p, xp)
    return out, lse


def _tile_grads(xp, qs, g, rowdot, lse, k, kt, vt, mask, causal, rows, cols, keep,
                outs=(None, None, None)):
    """One tile's shares in (dq / scale, dk, dv): queries ``rows`` = (i0, i1) (their
    scaled queries qs, gradients g, rowdot and lse), keys ``cols`` = (j0, j1) (k, and the
    keys and values transposed: kt, vt); written into ``outs`` where given."""
    s, _ = _scores(xp, qs, kt, mask, causal, *rows, *cols, lse, LESS_LSE)
    w = xp.exp(s, out=s)                           # the tile's weights P
    return _weights_grads(xp, qs, g, rowdot, w, k, vt, keep.draw(w.shape), keep, outs)


def _weights_grads(xp, qs, g, rowdot, w, k, vt, kept, keep, outs=(None, None, None)):
    """(dq / scale, dk, dv) of a tile from its weights ``w`` and forward's dropout mask
    ``kept`` (bool, None without dropout; ``keep``: the _Dropout that drew it): made again
    from lse (``_tile_grads``), or as forward kept them (one tile). ``vt``: the values
    transposed. Each is written into its array of ``outs`` where one is given."""
    z = None
    wz = w if kept is None else backend.host_loops.kept_times(w, kept, keep.factor())
    if wz is None:  # (the same, pass by pass)
        z = keep.scaled(kept)
        wz = w * z
    dq, dk, dv = outs
    dv = xp.matmul(xp.swapaxes(wz, -1, -2), g, out=dv)
    ds = xp.matmul(g, vt)                          # dP
    if not backend.host_loops.score_grads(ds, kept, keep.factor(), rowdot, w):  # (one pass,
        if kept is not None:                                                     # same bits)
            ds *= keep.scaled(kept) if z is None else z
        ds -= rowdot
        ds *= w                                    # dS (dq, dk: the scale)
    return xp.matmul(ds, k, out=dq), xp.matmul(xp.swapaxes(ds, -1, -2), qs, out=dk), dv


def _rowdot(g, o):
    """rowsum(dO * O) (..., T, 1), the term of dS that does not depend on the keys; taken
    in the output's memory order (a view of the result in its own order)."""
    order = _memory_order(o)
    back = sorted(range(o.ndim), key=order.__getitem__)
    return backend.row_sum(g.transpose(order) * o.transpose(order)).transpose(back)


def _backward_tiles(xp, qs, g, o, lse, k, v, mask, causal, block, keep):
    """(dq / scale, dk, dv) summed tile by tile, over groups of heads (each group's
    ``_rowdot`` made in its own thread, whose products run on one core)."""
    (bq, bk), T, S = block, qs.shape[-2], k.shape[-2]
    lead = g.shape[:-2]
    dq, dk, dv = _grads_like(xp, lead, qs, k, v, zeros=True)

    def heads(h0, h1):  # the heads h0..h1 (the last lead dim) of every array
        qh, kh, vh, mh, gh, oh, lh, dqh, dkh, dvh = (_heads(a, h0, h1) for a in (
            qs, k, v, mask, g, o, lse, dq, dk, dv))
        rh = _rowdot(gh, oh)
        kt, vt = _transposed(xp, kh), _transposed(xp, vh)
        for i0 in range(0, T, bq):
            i1 = min(T, i0 + bq)
            queries = (qh[..., i0:i1, :], gh[..., i0:i1, :], rh[..., i0:i1, :],
                       lh[..., i0:i1, :])
            for j0, j1 in _key_blocks(i0, i1, S, bk, causal, keep.p == 0):
                dq_t, dk_t, dv_t = _tile_grads(xp, *queries, kh[..., j0:j1, :],
                                               kt[..., j0:j1], vt[..., j0:j1], mh, causal,
                                               (i0, i1), (j0, j1), keep)
                dqh[..., i0:i1, :] += dq_t
                dkh[..., j0:j1, :] += dk_t
                dvh[..., j0:j1, :] += dv_t
    _over_heads(_in_groups(heads, lead, bq * bk, xp), lead, block, T, S, keep.p, xp)
    return dq, dk, dv


GROUP_SCORES = 1 << 17  # on the CPU, the most scores the tiles of one group of heads hold


def _in_groups(fn, lead, scores, xp):
    """fn(h0, h1) for the heads h0..h1 (the last lead dim), as a loop over groups of heads
    on the CPU: as many heads a group as keep its tiles (``scores`` a head, times the other
    lead dims) within GROUP_SCORES, at least one. Such a tile (a head's 256 x 512 scores in
    float32: 512 KB) stays in the core's own cache (L2) from the product that makes it,
    through the elementwise passes over it, to the products that read it, and BLAS runs a
    head's products faster than NumPy's loop over a stack of heads (the same numbers: that
    loop multiplies them one head at a time); a tile of every head (MBs) makes each pass a
    trip to the shared cache or memory. On the GPU, every head at once."""
    if xp is not backend.np:
        return fn
    per_head = math.prod(lead[:-1]) * scores
    group = max(1, GROUP_SCORES // max(1, per_head))

    def groups(h0, h1):
        for g0 in range(h0, h1, group):
            fn(g0, min(h1, g0 + group))
    return groups


def _transposed(xp, a):
    """a with its last two dims swapped: on the CPU a contiguous copy (O(S D) a head), from
    which BLAS makes the products of the scores and of dP up to a sixth faster than from
    the transposed view (the same sums, which BLAS may round otherwise: it picks its
    kernels by the operands' layout); the view elsewhere."""
    t = xp.swapaxes(a, -1, -2)
    return xp.ascontiguousarray(t) if xp is backend.np else t


def _like(xp, a, shape, zeros=False):
    """An empty array (zeros) of ``shape`` and ``a``'s dtype whose dims lie in memory in the
    order of ``a``'s (NumPy's order "K"): attention's output and gradients laid out as its
    inputs. Heads split from a (B, T, H, D) projection come back in that layout, so that
    putting them together again (transpose, reshape) is a view rather than a copy."""
    return (xp.zeros_like if zeros else xp.empty_like)(a, shape=shape)


def _grads_like(xp, lead, *inputs, zeros=False):
    """Arrays (empty, or zeros) for the gradients of ``inputs`` over the ``lead`` dims of the
    output, each laid out as its input (``_like``)."""
    return [_like(xp, a, lead + a.shape[-2:], zeros) for a in inputs]


def _heads(a, h0, h1):
    """a[..., h0:h1, :, :] where ``a`` has that dim (unbroadcast), else all of ``a``."""
    if a is None or a.ndim < 3 or a.shape[-3] == 1:
        return a
    return a[..., h0:h1, :, :]


def _splits(lead, tiled, scores, dropout_p):
    """Whether the work over the heads (the last of the ``lead`` dims) goes to the CPU's
    cores in groups (backend.run_split): when it is tiled, or one tile of at least
    SPLIT_SCORES scores (``scores`` a head): then the interpreter's overhead and the
    hand-over to another thread are small beside the elementwise work shared. Not with
    dropout, whose masks must be drawn in one order."""
    H = lead[-1] if lead else 1
    return (dropout_p == 0 and H > 1
            and (tiled or math.prod(lead) * scores >= SPLIT_SCORES))


def _over_heads(fn, lead, block, T, S, dropout_p, xp):
    """fn(0, H) at once, or over groups of the H heads on the CPU's cores (``_splits``)."""
    H = lead[-1] if lead else 1
    if _splits(lead, block[0] < T or block[1] < S, T * S, dropout_p):
        backend.run_split(fn, H, xp)
    else:
        fn(0, H)


def _by_heads(xp, fn, inputs, shapes, scores, dropout_p, like):
    """fn(*inputs, *outs) -> arrays of the inputs' lead dims + ``shapes`` (None for a
    result that is None), for the one tile of ``scores`` scores a head: at once, or over
    groups of heads on the CPU's cores where ``_splits`` says so, each group's results
    written into arrays made beforehand. At once where another input's lead dims do not
    broadcast to the first's. fn writes its first results into ``outs``, made laid out as
    the arrays ``like`` (``_like``; their heads where split)."""
    lead = inputs[0].shape[:-2]
    H = lead[-1] if lead else 1
    every = _broadcast_lead(*inputs)  # (the results')
    made = [_like(xp, a, every + shape) for a, shape in zip(like, shapes)]
    if not _splits(lead, False, scores, dropout_p) or any(
            a is not None and not _broadcasts_to(a.shape[:-2], lead) for a in inputs[1:]):
        return fn(*inputs, *made)
    outs = made + [None if shape is None else xp.empty(lead + shape, dtype=inputs[0].dtype)
                   for shape in shapes[len(made):]]
    whole = []  # the results, when run_split runs every head at once (one core)

    def heads(h0, h1):
        parts = fn(*(_heads(a, h0, h1) for a in inputs + tuple(made)))
        if h1 - h0 == H:
            whole.append(parts)
            return
        for out, part in zip(outs[len(made):], parts[len(made):]):
            if out is not None:
                out[..., h0:h1, :, :] = part
    backend.run_split(heads, H, xp)
    return whole[0] if whole else outs


def composite(q, k, v, mask=None, causal=None, scale=1.0, dropout=None, safe=True):
    """The same attention as Tensor ops, every score kept: (output, weights). What
    nn.functional runs for SDPBackend.MATH or when the weights are wanted, and what
    Attention differentiates for second derivatives. ``dropout`` maps the weights.
    Without keys (S = 0) the weights are empty and the output zeros, as PyTorch's.
    ``safe=False``: a row whose every key is masked gives NaN (a plain softmax), as the
    weights of PyTorch's MultiheadAttention do, instead of zeros."""
    xp = backend.xp_of(q.array)
    T, S = q.shape[-2], k.shape[-2]
    scores = (q * scale) @ k.transpose(-2, -1)  # (..., T, S); q scaled first, as PyTorch
    if causal is not None:
        future = xp.arange(S) > xp.arange(T)[:, None] + causal
        scores = scores + xp.where(future, -xp.inf, 0).astype(scores.dtype)
    if mask is not None:
        scores = scores + mask
    if S == 0:  # no key to normalise over: the (empty) scores are the weights
        weights = scores
    elif safe:  # all keys masked: zeros
        weights = SafeSoftmax.apply(scores, dim=scores.ndim - 1)
    else:
        weights = scores.softmax(-1)
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
        full = keep.full(params["block"], params["causal"], _score_lead(q, k, mask),
                         q.shape[-2], k.shape[-2])
        dropout = lambda w: w * full  # noqa: E731

    def attention(q, k, v):
        return composite(q, k, v, mask, params["causal"], params["scale"], dropout)[0]
    return composite_grads(attention, (q, k, v), grad, ctx.needs_input_grad[:3]) + (None,)


def _score_lead(q, k, mask):
    """The lead dims of the (..., T, S) scores (and of lse and the dropout masks): those of
    q, k and the mask broadcast (the value's may broadcast the output further)."""
    return _broadcast_lead(q, k, mask)


def _broadcast_lead(*arrays):
    """The lead dims (all but the last two) of ``arrays`` (None: none) broadcast together
    (``_check`` has seen that they do)."""
    leads = [a.shape[:-2] for a in arrays if a is not None]
    n = max(map(len, leads))
    padded = [(1,) * (n - len(lead)) + lead for lead in leads]
    return tuple(max(dims) if 0 not in dims else 0 for dims in zip(*padded))


def _memory_order(a):
    """The axes of ``a`` from the largest stride to the smallest: ``a.transpose`` of it is
    C-contiguous where ``a`` is a permutation of a contiguous array."""
    return sorted(range(a.ndim), key=lambda i: -a.strides[i])


def _row_max(xp, s):
    """The maximum of each row of ``s`` (..., 1). NumPy reduces a short row slowly (its
    loop runs once per row), so rows of up to SHORT_ROWS keys are reduced keys-first, from a
    copy with the key axis leading: one pass per key over every row at once (exact)."""
    if s.shape[-1] > SHORT_ROWS:
        return s.max(axis=-1, keepdims=True)
    return xp.ascontiguousarray(xp.moveaxis(s, -1, 0)).max(axis=0)[..., None]


def _key_blocks(i0, i1, S, bk, causal, trim=False):
    """(j0, j1) of the key blocks that queries i0..i1-1 can see (all, unless causal).
    ``trim``: the last block ends at the last key that any of them sees, so that most of the
    masked half of causal scores is never made (twice the work otherwise: a block of 64
    queries of 256 positions sees 64 to 256 keys). The keys left out are masked for every
    one of those queries and their weights are exactly 0, so the results are the same to
    rounding: BLAS sums a shorter row or product in another order (with the other changes
    of the CPU walk, within 2e-6 in float32 and 1e-14 in float64 of the walk without them).
    Not with dropout, whose masks are drawn for whole tiles, nor for the one tile whose
    weights forward keeps for backward."""
    last = S if causal is None else max(0, min(S, i1 + causal))
    end = last if trim else S
    return [(j0, min(end, j0 + bk)) for j0 in range(0, last, bk)]


ROW_MAX, MAX_SO_FAR, LESS_LSE = 0, 1, 2  # what _scores subtracts from each row


def _scores(xp, qs, kt, mask, causal, i0, i1, j0, j1, prev=None, less=ROW_MAX):
    """(s, m): the tile of scores qs @ kt (qs: the query rows i0..i1, already scaled; kt:
    the key rows j0..j1, transposed), plus the mask's tile and the causal mask's, less m
    per row: ``less`` ROW_MAX, the row's maximum; MAX_SO_FAR, the maximum of that and
    ``prev`` (the rows' maximum over the tiles before); a maximum that is not finite (every
    key masked so far) is 0; LESS_LSE, ``prev`` (the rows' lse). On the CPU, after the
    product, one compiled pass a row (``host_loops.shift_rows``, the same bits)."""
    s = xp.matmul(qs, kt)
    tile = None
    if mask is not None:
        rows = slice(i0, i1) if mask.shape[-2] != 1 else slice(None)
        cols = slice(j0, j1) if mask.shape[-1] != 1 else slice(None)
        tile = mask[..., rows, cols]
    future = causal is not None and j1 - 1 > i0 + causal  # some key in the tile is
    first = i0 + causal + 1 - j0 if future else None      # in the future
    m = backend.host_loops.shift_rows(s, tile, first, prev, less)
    if m is not None:
        return s, m
    if tile is not None:
        s = _iadd(s, tile)
    if future and not backend.host_loops.mask_future(s, first):  # (only those, in place)
        future = xp.arange(j0, j1) > xp.arange(i0, i1)[:, None] + causal
        s = _iadd(s, xp.where(future, -xp.inf, 0).astype(s.dtype))
    if less == LESS_LSE:
        s -= prev
        return s, prev
    m = _row_max(xp, s) if less == ROW_MAX else xp.maximum(prev, _row_max(xp, s))
    m = xp.where(xp.isfinite(m), m, 0)  # every key masked so far: not NaN
    s -= m
    return s, m


def _iadd(s, m):
    """s + m in place where the shapes allow (a mask may broadcast s to more dims)."""
    if backend.np.broadcast_shapes(s.shape, m.shape) == s.shape:
        s += m
        return s
    return s + m


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
        return self.scaled(self.draw(shape))

    def scaled(self, keep):
        """The bool mask ``keep`` as the factors of dropout: 1 / (1 - p) or 0."""
        mask = keep.astype(self.dtype)
        mask *= self.factor()
        return mask

    def factor(self):
        return 1.0 / (1.0 - self.p) if self.p < 1 else 0.0  # p = 1 drops everything

    def draw(self, shape):
        """The next tile's bool mask (forward's, or in backward the same again), or None
        without dropout."""
        return None if self.p == 0 else backend.keep_mask(shape, self.p, self.xp, self.rng)

    def apply(self, w):
        """Forward: w times the next tile's mask, in place (w unchanged without dropout)."""
        keep = self.draw(w.shape)
        if keep is not None and not backend.host_loops.times_kept(w, keep, self.factor()):
            w *= self.scaled(keep)
        return w

    def full(self, block, causal, lead, T, S):
        """The masks of every tile, in forward's order, as one (lead..., T, S) array."""
        bq, bk = block
        full = self.xp.zeros(lead + (T, S), dtype=self.dtype)
        for i0 in range(0, T, bq):
            i1 = min(T, i0 + bq)
            for j0, j1 in _key_blocks(i0, i1, S, bk, causal):
                full[..., i0:i1, j0:j1] = self._mask(lead + (i1 - i0, j1 - j0))
        return full
