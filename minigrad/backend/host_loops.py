"""The elementwise stages of the CPU kernels (``kernels.py``) as single compiled loops.

NumPy runs ``(x - mean) * rstd * weight + bias`` as four passes over memory, each writing an
array the next one reads. Compiled by numba, each stage below is one pass: each element goes
through the same operations, in the same order and dtype (the numbers are rounded to the
arrays' dtype first, as NumPy rounds a Python float operand; no fast-math, so no
reassociation or fused multiply-add), so the results have the same bits as the NumPy
formulas in ``kernels.py``, which still run where numba is missing or the arrays do not fit
(not C-contiguous, not float32 or float64, mixed dtypes). The reductions between the
stages (the rows' means) stay where they are: their order is BLAS's.

Each function returns False, doing nothing, where it does not apply.
"""
import math

import numpy as np

try:
    import numba
except ImportError:
    numba = None


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _fits(*arrays):
    """Whether the arrays are C-contiguous host arrays of one float dtype (float32/64)."""
    dtype = arrays[0].dtype
    return numba is not None and dtype in _FLOATS and all(
        type(a) is np.ndarray and a.dtype == dtype and a.flags.c_contiguous for a in arrays)


def load():
    """Load numba's runtime and every compiled loop below now rather than at its first use:
    each run once on a few numbers of each float dtype (as the kernels call it). The runtime
    takes about 65 MB of resident memory once per process, and each loop, read from the
    disk cache where it was compiled before, its code; a measurement of a step's memory
    loads them first, as PyTorch's kernels are loaded when torch is imported. Nothing to do
    without numba."""
    if numba is None:
        return
    for dtype in _FLOATS:
        a, r, keep = np.ones((2, 8), dtype), np.ones((2, 1), dtype), np.ones((2, 8), np.bool_)
        s = np.ones((2, 1, 2, 8), dtype)
        flat, w, one = a.reshape(-1), a[0], a[0, 0]
        relu_grad(a, a)
        dropout(a, keep, 2.0)
        keep_of_bytes(np.arange(2, dtype=np.uint64), 9, 0)
        times_kept(a.copy(), keep, 2.0)
        kept_times(a, keep, 2.0)
        adam(flat.copy(), flat.copy(), flat.copy(), flat.copy(), 0.1, 0.9, 1e-3, one, 1e-8,
             True)
        add_rows(a.copy(), np.zeros(2, np.int64), a)
        add_bias(a.copy(), w)
        adam_into([a.copy()], [a], flat.copy(), flat.copy(), [(0, a.size)], 0.1, 0.9, 1e-3,
                  one, 1e-8)
        centre(a, r)
        normalise(a.copy(), r, w, w)
        normalise(a.copy(), r, None, None)
        xhat, _ = xhat_times(a, a, r, r)
        input_grad(a, xhat, w, r, r, r)
        input_grad(a, xhat.copy(), None, r, r, r)
        score_grads(a.copy(), None, 2.0, r, a)
        score_grads(a.copy(), keep, 2.0, r, a)
        normalised_weights(a.copy(), r, None, 2.0)
        normalised_weights(a.copy(), r, keep, 2.0)
        mask_future(s.copy(), 1)
        minus_row_max(a)
        for w in (None, w):
            cross_entropy_grad(a.copy(), r[:, 0], np.zeros(2, np.int64), r[:, 0], r[:, 0], w,
                               r)
        for mask in (None, s[:, :, :1]):
            shift_rows(s.copy(), mask, 1)
            shift_rows(s.copy(), mask, None, s[..., :1].copy(), 1)
        if dtype == np.float32:
            add_scaled(a.copy(), a, a, 0.5)
            erf(a)
            gelu(a)
            gelu_grad(a, a, a.copy())


def _jit(fn=None, **options):
    """numba.njit with NumPy's error model (``@_jit`` or ``@_jit(option=...)``)."""
    if fn is None:
        return lambda f: _jit(f, **options)
    if numba is None:
        return fn
    try:  # (compiled once per machine, kept beside the module or in the user's cache)
        return numba.njit(fn, error_model="numpy", cache=True, **options)
    except RuntimeError:  # nowhere writable to keep it: compiled once per process
        return numba.njit(fn, error_model="numpy", **options)


@_jit(inline="always")
def _moments(gi, m, v, w1, lerp_small, one_minus_w1, beta2, one_minus_beta2, bc2_sqrt, eps):
    """One element's new moments and the denominator of its update."""
    d = gi - m
    if lerp_small:  # torch's lerp_, in its two forms
        mi = m + d * w1
    else:
        mi = gi - d * one_minus_w1
    vi = v * beta2 + gi * one_minus_beta2 * gi
    return mi, vi, np.sqrt(vi) / bc2_sqrt + eps


@_jit
def _adam(g, m, v, t, w1, lerp_small, one_minus_w1, beta2, one_minus_beta2, minus_step_size,
          bc2_sqrt, eps, scratch):
    for i in range(g.shape[0]):
        mi, vi, denom = _moments(g[i], m[i], v[i], w1, lerp_small, one_minus_w1, beta2,
                                 one_minus_beta2, bc2_sqrt, eps)
        m[i] = mi
        v[i] = vi
        if scratch:
            g[i] = denom
        t[i] = mi * minus_step_size / denom


def adam(g, m, v, t, w1, beta2, step_size, bc2_sqrt, eps, scratch):
    """``kernels._adam_host`` in one pass (the numbers, Python floats, NumPy float64s or 0-d
    float64 arrays, rounded to the dtype as there: each expression in double precision
    first, then the result). False where it does not apply."""
    if not _fits(g, m, v, t) or g.ndim != 1 or not all(
            isinstance(c, (int, float)) or (type(c) is np.ndarray and c.shape == ()
                                            and c.dtype == np.float64)
            for c in (w1, beta2, step_size, bc2_sqrt, eps)):
        return False
    d = g.dtype.type
    _adam(g, m, v, t, d(w1), abs(w1) < 0.5, d(1.0 - w1), d(beta2), d(1.0 - beta2),
          d(-step_size), d(bc2_sqrt), d(eps), bool(scratch))
    return True


@_jit
def _adam_into(g, m, v, p, w1, lerp_small, one_minus_w1, beta2, one_minus_beta2,
               minus_step_size, bc2_sqrt, eps):
    for i in range(g.shape[0]):  # (_adam's operations, the update added to p as it is made)
        mi, vi, denom = _moments(g[i], m[i], v[i], w1, lerp_small, one_minus_w1, beta2,
                                 one_minus_beta2, bc2_sqrt, eps)
        m[i] = mi
        v[i] = vi
        p[i] = p[i] + mi * minus_step_size / denom


def adam_into(params, grads, m, v, bounds, w1, beta2, step_size, bc2_sqrt, eps):
    """``adam`` of a param group whose moments ``m`` and ``v`` are flat (each parameter's at
    its ``bounds``), each parameter's update added to it as it is made, one pass a
    parameter: the bits of ``_adam`` followed by ``p += update``, without the flat copy of
    the gradients or the update's array. False, doing nothing, where it does not apply (every
    array a C-contiguous host array of one float dtype, each gradient of its parameter's
    size)."""
    if not _fits(m, v, *params, *grads) or m.ndim != 1 or not all(
            p.size == g.size == b - a for p, g, (a, b) in zip(params, grads, bounds)) \
            or not all(isinstance(c, (int, float)) or (type(c) is np.ndarray and c.shape == ()
                                                        and c.dtype == np.float64)
                       for c in (w1, beta2, step_size, bc2_sqrt, eps)):
        return False
    d = m.dtype.type
    numbers = (d(w1), abs(w1) < 0.5, d(1.0 - w1), d(beta2), d(1.0 - beta2), d(-step_size),
               d(bc2_sqrt), d(eps))
    for p, g, (start, stop) in zip(params, grads, bounds):
        _adam_into(g.reshape(-1), m[start:stop], v[start:stop], p.reshape(-1), *numbers)
    return True


@_jit
def _add_scaled(out, x, y, alpha, sums, errors):
    bits = sums.view(np.int64)
    for b0 in range(0, out.shape[0], sums.shape[0]):
        m = min(sums.shape[0], out.shape[0] - b0)
        for i in range(m):
            a = np.float64(x[b0 + i])
            p = np.float64(y[b0 + i]) * alpha    # exact: two float32 significands
            s = a + p
            back = s - a                         # (Knuth's two-sum: s + err = a + p)
            sums[i] = s
            errors[i] = (a - (s - back)) + (p - back)
        for i in range(m):                       # inexact: the last bit made odd, toward err
            e = errors[i]
            if e != 0.0 and bits[i] & 1 == 0 and math.isfinite(sums[i]):
                bits[i] += 1 if (e > 0.0) == (sums[i] > 0.0) else -1
        for i in range(m):
            out[b0 + i] = np.float32(sums[i])


def add_scaled(out, x, y, alpha):
    """``kernels.add_scaled`` of float32 arrays of one shape in one pass (the sum rounded to
    odd in double, then to float32: one rounding of the exact x + alpha * y, the bits of the
    NumPy formula there), 512 elements at a time through two small buffers, so that the
    last bit is set with integer operations on the sums' bits; False where it does not
    apply. ``alpha``: a number or a 0-d float64
    array, rounded to float32 first."""
    if not (type(x) is np.ndarray and type(y) is np.ndarray and _fits(out, x, y)) or \
            out.dtype != np.float32 or not out.shape == x.shape == y.shape or not (
            isinstance(alpha, (int, float)) or (type(alpha) is np.ndarray and alpha.shape == ()
                                                and alpha.dtype == np.float64)):
        return False
    _add_scaled(out.reshape(-1), x.reshape(-1), y.reshape(-1), float(np.float32(alpha)),
                np.empty(512), np.empty(512))
    return True


@_jit
def _add_bias(out, bias):
    for r in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[r, j] = out[r, j] + bias[j]


def add_bias(out, bias):
    """``out += bias`` with ``bias`` over out's last dim, in one pass; False, doing nothing,
    where the arrays do not fit (not C-contiguous float32/64 of one dtype, another shape)."""
    if not out.size or out.ndim < 1 or not _fits(out, bias) or bias.shape != out.shape[-1:]:
        return False
    _add_bias(out.reshape(-1, out.shape[-1]), bias)
    return True


@_jit
def _add_rows(target, rows, values):
    n = target.shape[0]
    for i in range(rows.shape[0]):
        if rows[i] < -n or rows[i] >= n:
            return False
    for i in range(rows.shape[0]):
        r = rows[i] + n if rows[i] < 0 else rows[i]
        for j in range(target.shape[1]):
            target[r, j] += values[i, j]
    return True


def add_rows(target, rows, values):
    """``target[rows] += values`` for whole rows (``kernels.scatter_add``: an embedding's
    gradient), each row added in the order it comes, as NumPy's ``add.at`` adds them (the
    same bits); False, doing nothing, where an index is out of range (``add.at`` then raises
    NumPy's IndexError) or the arrays do not fit."""
    if not _fits(target, values) or type(rows) is not np.ndarray or \
            rows.dtype.kind not in "iu" or target.ndim < 2:
        return False
    flat = target.reshape(target.shape[0], -1)
    return _add_rows(flat, rows.reshape(-1), values.reshape(rows.size, flat.shape[1]))


@_jit
def _dropout(x, keep, scale, one, zero, out):
    for i in range(x.shape[0]):
        out[i] = (one if keep[i] else zero) * x[i] * scale


_BYTE_ONES, _BYTE_HIGHS = np.uint64(0x0101010101010101), np.uint64(0x8080808080808080)


@_jit
def _keep_of_bytes(first, words, top, keep, marks, marks8, ties):
    for i in range(first.shape[0]):
        keep[i] = first[i] > top
    # the ties: a word of eight bytes x ^ top... has a zero byte where one equals top (marked
    # a word at a time, as a vector loop), then the marks read eight at a time
    pattern = np.uint64(top) * _BYTE_ONES
    for w in range(words.shape[0]):
        x = words[w] ^ pattern
        marks[w] = ((x - _BYTE_ONES) & ~x & _BYTE_HIGHS) != 0
    n = 0
    for m in range(marks8.shape[0]):
        if marks8[m]:
            for w in range(8 * m, min(8 * m + 8, words.shape[0])):
                if marks[w]:
                    for i in range(8 * w, min(8 * w + 8, first.shape[0])):
                        if first[i] == top:
                            if n == ties.shape[0]:
                                return -1
                            ties[n] = i
                            n += 1
    return n


def keep_of_bytes(words, n, top):
    """(keep, ties) of ``random.keep_mask``'s first pass over the first ``n`` bytes of the
    64-bit ``words`` (little-endian): ``bytes > top`` (bool) and the positions of the bytes
    equal to ``top``: vector loops, and a scan of the words that hold such bytes. None
    without numba, for words not in the machine's byte order (a big-endian machine), or in
    the unlikely case of more ties than room was made for."""
    if numba is None or not words.dtype.isnative:
        return None
    first = words.view(np.uint8)[:n]
    keep = np.empty(n, np.bool_)
    marks = np.zeros(-(-words.size // 8) * 8, np.uint8)
    ties = np.empty(n // 64 + 64, np.intp)  # (one in 256 expected)
    found = _keep_of_bytes(first, words, np.uint8(top), keep, marks, marks.view(np.uint64),
                           ties)
    return None if found < 0 else (keep, ties[:found])


def dropout(x, keep, scale):
    """``kernels.dropout``: keep (as 0 or 1) * x * scale; the new array, or None."""
    if not _fits(x) or type(keep) is not np.ndarray or keep.dtype != np.bool_ \
            or not keep.flags.c_contiguous or keep.shape != x.shape \
            or type(scale) not in (int, float):
        return None
    out = np.empty_like(x)
    d = x.dtype.type
    _dropout(x.reshape(-1), keep.reshape(-1), d(scale), d(1), d(0), out.reshape(-1))
    return out


@_jit
def _normalise(centered, rstd, weight, bias, has_weight, has_bias):
    for r in range(centered.shape[0]):
        s = rstd[r]
        for j in range(centered.shape[1]):
            y = centered[r, j] * s
            if has_weight:
                y = y * weight[j]
            if has_bias:
                y = y + bias[j]
            centered[r, j] = y


def normalise(centered, rstd, weight, bias):
    """Layer norm's last stage, in place: ``centered * rstd * weight + bias`` (``rstd`` one
    per row; ``weight`` and ``bias`` per column, or None). False where it does not apply."""
    arrays = [a for a in (centered, rstd, weight, bias) if a is not None]
    if not centered.size or not _fits(*arrays) or any(
            a is not None and a.size * rstd.size != centered.size for a in (weight, bias)):
        return False
    rows = rstd.size
    flat = centered.reshape(rows, -1)
    none = flat[0]  # (a placeholder of the right type where weight or bias is None)
    _normalise(flat, rstd.reshape(-1), none if weight is None else weight.reshape(-1),
               none if bias is None else bias.reshape(-1), weight is not None,
               bias is not None)
    return True


@_jit
def _xhat_times(grad, x, mean, rstd, xhat, gxhat):
    for r in range(x.shape[0]):
        mu, s = mean[r], rstd[r]
        for j in range(x.shape[1]):
            h = (x[r, j] - mu) * s
            xhat[r, j] = h
            gxhat[r, j] = grad[r, j] * h


@_jit
def _input_grad(grad, xhat, weight, has_weight, mean_g, mean_gxhat, rstd):
    for r in range(grad.shape[0]):  # (into xhat: one array read and written, which the
        a, b, s = mean_g[r], mean_gxhat[r], rstd[r]  # compiler vectorises; as two arguments
        for j in range(grad.shape[1]):  # that alias, it would check and run element-wise)
            g = grad[r, j] * weight[j] if has_weight else grad[r, j]
            xhat[r, j] = ((g - a) - xhat[r, j] * b) * s


def xhat_times(grad, x, mean, rstd):
    """(xhat, grad * xhat) with xhat = (x - mean) * rstd, in one pass; None where it does
    not apply."""
    if not x.size or not _fits(grad, x, mean, rstd) or grad.shape != x.shape:
        return None
    rows = mean.size
    xhat, gxhat = np.empty_like(x), np.empty_like(x)
    _xhat_times(grad.reshape(rows, -1), x.reshape(rows, -1), mean.reshape(-1),
                rstd.reshape(-1), xhat.reshape(rows, -1), gxhat.reshape(rows, -1))
    return xhat, gxhat


def input_grad(grad, xhat, weight, mean_g, mean_gxhat, rstd):
    """Layer norm's dx = ((grad * weight - mean_g) - xhat * mean_gxhat) * rstd in one pass,
    written into ``xhat``'s array (returned)."""
    rows = rstd.size
    flat = xhat.reshape(rows, -1)
    w = flat[0] if weight is None else weight.reshape(-1)
    _input_grad(grad.reshape(rows, -1), flat, w, weight is not None, mean_g.reshape(-1),
                mean_gxhat.reshape(-1), rstd.reshape(-1))
    return xhat


def fits_input_grad(grad, xhat, weight, mean_g, mean_gxhat, rstd):
    arrays = [a for a in (grad, xhat, weight, mean_g, mean_gxhat, rstd) if a is not None]
    return _fits(*arrays) and (weight is None or weight.size * rstd.size == grad.size)


@_jit
def _times_kept(w, keep, scale, zero, out, in_place):
    if in_place:  # (w read and written as one argument: see _input_grad)
        for i in range(w.shape[0]):
            w[i] = w[i] * (scale if keep[i] else zero)
    else:
        for i in range(w.shape[0]):
            out[i] = w[i] * (scale if keep[i] else zero)


def _is_mask_of(keep, x):
    """Whether ``keep`` is a C-contiguous bool host array of ``x``'s shape."""
    return type(keep) is np.ndarray and keep.dtype == np.bool_ and keep.flags.c_contiguous \
        and keep.shape == x.shape


def times_kept(w, keep, scale):
    """``w *= keep.astype(w.dtype) * scale`` in place, in one pass (attention's dropout of a
    tile); False where it does not apply."""
    if not _fits(w) or not _is_mask_of(keep, w) or type(scale) not in (int, float):
        return False
    d = w.dtype.type
    _times_kept(w.reshape(-1), keep.reshape(-1), d(scale), d(0), w.reshape(-1), True)
    return True


def kept_times(w, keep, scale):
    """``w * (keep.astype(w.dtype) * scale)`` as a new array, in one pass; None where it does
    not apply."""
    if not _fits(w) or not _is_mask_of(keep, w) or type(scale) not in (int, float):
        return None
    out = np.empty_like(w)
    d = w.dtype.type
    _times_kept(w.reshape(-1), keep.reshape(-1), d(scale), d(0), out.reshape(-1), False)
    return out


@_jit
def _relu_grad(grad, out, zero, result):
    for i in range(grad.shape[0]):
        result[i] = zero if out[i] <= zero else grad[i]


def relu_grad(grad, out):
    """Relu's gradient: grad where out > 0 (or NaN), else +0, in one pass; None where it
    does not apply."""
    if not _fits(grad, out) or grad.shape != out.shape:
        return None
    result = np.empty_like(grad)
    _relu_grad(grad.reshape(-1), out.reshape(-1), grad.dtype.type(0), result.reshape(-1))
    return result


@_jit
def _centre(x, mean, centered, squares):
    for r in range(x.shape[0]):
        mu = mean[r]
        for j in range(x.shape[1]):
            c = x[r, j] - mu
            centered[r, j] = c
            squares[r, j] = c * c


def centre(x, mean):
    """(x - mean, its squares) in one pass, ``mean`` one per row (layer norm's first
    stage, before BLAS sums the squares); None where it does not apply."""
    if not x.size or not _fits(x, mean) or x.size % mean.size:
        return None
    rows = mean.size
    centered, squares = np.empty_like(x), np.empty_like(x)
    _centre(x.reshape(rows, -1), mean.reshape(-1), centered.reshape(rows, -1),
            squares.reshape(rows, -1))
    return centered, squares


@_jit
def _score_grads(ds, keep, scale, zero, rowdot, w, has_keep):
    for r in range(ds.shape[0]):
        b = rowdot[r]
        for j in range(ds.shape[1]):
            d = ds[r, j] * (scale if keep[r, j] else zero) if has_keep else ds[r, j]
            ds[r, j] = (d - b) * w[r, j]


NO_MASK = np.zeros((1, 1), np.bool_)  # (what a loop's ``keep`` is where there is none)


def score_grads(ds, keep, scale, rowdot, w):
    """Attention's dS = (dP * (keep * scale) - rowdot) * w in place in ``ds`` (``keep`` the
    tile's bool dropout mask or None, ``rowdot`` one per row); False where it does not
    apply."""
    if type(rowdot) is np.ndarray:  # (a tile's rows of the whole rowdot: copied)
        rowdot = np.ascontiguousarray(rowdot)
    if not ds.size or not _fits(ds, w, rowdot) or w.shape != ds.shape \
            or rowdot.shape != ds.shape[:-1] + (1,) or type(scale) not in (int, float) \
            or (keep is not None and not _is_mask_of(keep, ds)):
        return False
    rows = rowdot.size
    d = ds.dtype.type
    _score_grads(ds.reshape(rows, -1), NO_MASK if keep is None else keep.reshape(rows, -1),
                 d(scale), d(0), rowdot.reshape(-1), w.reshape(rows, -1), keep is not None)
    return True


_BITS = {  # float dtype: (its integers, -inf, the bits below the sign, inf's bits, 0)
    np.dtype(d): (i, np.dtype(d).type(-np.inf), i(np.iinfo(i).max),
                  np.dtype(d).type(np.inf).view(i), np.dtype(d).type(0))
    for d, i in ((np.float32, np.int32), (np.float64, np.int64))}


@_jit(inline="always")
def _row_max(s, bits, q, minus_inf, sign_free, inf_bits):
    """NumPy's max of row q of ``s``: its largest value, or its first NaN where it holds
    one; -inf for an empty row. A comparison of floats that must treat NaN as NumPy does
    does not vectorise, so the maximum is taken over ``bits`` (the row as integers, which
    do): each number's bits as an integer key that orders as the numbers do (below the
    sign, the bits of a negative number flipped: -0 just below +0), the largest key turned
    back into its number; a NaN, which has no place in that order, is found from the
    largest magnitude, whose bits then exceed infinity's."""
    if bits.itemsize == 4:
        top32, magnitude32 = _largest_key32(bits, q, sign_free)
        if magnitude32 > inf_bits:
            return s[q, _first_nan(s, q)]
        return np.int32(top32).view(np.float32) if s.shape[1] else minus_inf
    top64, magnitude64 = _largest_key64(bits, q, sign_free)
    if magnitude64 > inf_bits:
        return s[q, _first_nan(s, q)]
    return np.int64(top64).view(np.float64) if s.shape[1] else minus_inf


@_jit(inline="always")
def _largest_key32(bits, q, sign_free):
    """(the bits of the largest key of row q of int32 ``bits``, its largest magnitude);
    numba's integers widen to 64 bits unless each step says int32 (16 lanes, not 8)."""
    top = np.int32(~sign_free)  # the smallest key
    magnitude = np.int32(0)
    for j in range(bits.shape[1]):
        b = np.int32(bits[q, j])
        key = np.int32(b ^ np.int32(np.int32(b >> np.int32(31)) & sign_free))
        top = key if key > top else top
        m = np.int32(b & sign_free)
        magnitude = m if m > magnitude else magnitude
    return np.int32(top ^ np.int32(np.int32(top >> np.int32(31)) & sign_free)), magnitude


@_jit(inline="always")
def _largest_key64(bits, q, sign_free):
    """``_largest_key32`` for int64 ``bits``."""
    top = ~sign_free
    magnitude = sign_free & 0
    for j in range(bits.shape[1]):
        b = bits[q, j]
        key = b ^ ((b >> 63) & sign_free)
        top = key if key > top else top
        m = b & sign_free
        magnitude = m if m > magnitude else magnitude
    return top ^ ((top >> 63) & sign_free), magnitude


@_jit(inline="always")
def _first_nan(s, q):
    """The index of the first NaN in row q of ``s`` (-1: none)."""
    for j in range(s.shape[1]):
        if s[q, j] != s[q, j]:
            return j
    return -1


@_jit(inline="always")
def _finite_max(s, bits, q, prev, use_prev, minus_inf, sign_free, inf_bits, zero):
    """max(s[q]) (and ``prev`` where ``use_prev``, as ``np.maximum``), or 0 where that is
    not finite (NaN included)."""
    top = _row_max(s, bits, q, minus_inf, sign_free, inf_bits)
    if use_prev:
        top = prev if (prev > top or prev != prev) else top
    return top if np.isfinite(top) else zero


@_jit
def _minus_row_max(x, bits, minus_inf, sign_free, inf_bits, out):
    for q in range(x.shape[0]):
        top = _row_max(x, bits, q, minus_inf, sign_free, inf_bits)
        for j in range(x.shape[1]):
            out[q, j] = x[q, j] - top


def minus_row_max(x):
    """``x - x.max(axis=-1, keepdims=True)`` as a new array, each row in one pass (softmax's
    shift): NumPy's bits (a maximum of +-0 may be either zero, which changes only the sign
    of a zero that exp makes 1 either way). None where it does not apply."""
    if not x.size or x.ndim < 1 or not _fits(x):
        return None
    out = np.empty_like(x)
    bits, minus_inf, magnitude, inf_bits, _ = _BITS[x.dtype]
    n = x.shape[-1]
    _minus_row_max(x.reshape(-1, n), x.view(bits).reshape(-1, n), minus_inf, magnitude,
                   inf_bits, out.reshape(-1, n))
    return out


@_jit(inline="always")
def _mask_row(a, h, t, Am, Hm, Tm):
    """The row of ``mask_rows``' 2-D mask for batch a, head h, query t."""
    return ((a if Am > 1 else 0) * Hm + (h if Hm > 1 else 0)) * Tm + (t if Tm > 1 else 0)


def mask_rows(mask, shape, dtype):
    """(rows, A, H, T): a float ``mask`` that broadcasts to scores of ``shape`` (..., H, T,
    S) as a C-contiguous 2-D array of rows of keys, (batch, heads, rows) rows, each of the
    three dims 1 or the scores' (A: the batch dims before the heads' together) and the last
    1 or S; (an empty array, 0, 0, 0) for no mask. None where the mask is not a host array of
    ``dtype`` or its batch dims do not map onto the scores'."""
    if mask is None:
        return np.empty((0, 0), dtype), 0, 0, 0
    lead = shape[:-2]
    if type(mask) is not np.ndarray or mask.dtype != dtype or mask.ndim > len(shape):
        return None
    full = (1,) * (len(shape) - mask.ndim) + mask.shape
    outer = full[:-3]  # (the batch dims before the heads')
    if any(n not in (1, m) for n, m in zip(full, shape)) or \
            outer not in ((1,) * len(outer), lead[:-1]):
        return None
    return (np.ascontiguousarray(mask).reshape(-1, full[-1]), math.prod(outer),
            full[-3] if lead else 1, full[-2])


@_jit
def _shift_rows(s, bits, heads, rows, mask, Am, Hm, Tm, first, prev, mode, minus_inf,
                sign_free, inf_bits, zero, m):
    S, Sm = s.shape[1], mask.shape[1]
    q = 0  # (the row of s: batch a, head h, query r)
    for a in range(s.shape[0] // (heads * rows)):
        for h in range(heads):
            for r in range(rows):
                if Am:
                    mq = _mask_row(a, h, r, Am, Hm, Tm)
                    if Sm > 1:
                        for j in range(S):
                            s[q, j] = s[q, j] + mask[mq, j]
                    else:
                        c = mask[mq, 0]
                        for j in range(S):
                            s[q, j] = s[q, j] + c
                for j in range(max(0, first + r), S):
                    s[q, j] = s[q, j] + minus_inf
                if mode == 2:
                    shift = prev[q]
                else:
                    shift = _finite_max(s, bits, q, prev[q], mode == 1, minus_inf, sign_free,
                                        inf_bits, zero)
                    m[q] = shift
                for j in range(S):
                    s[q, j] = s[q, j] - shift
                q += 1


def shift_rows(s, mask=None, first=None, prev=None, mode=0):
    """Attention's tile of scores ``s`` (..., T, S), in place and in one pass a row: the
    ``mask`` tile added (broadcast to ``s``; None: none), then -inf from key ``first + r`` on
    in row r (the causal mask; None: none), then, by ``mode``: 0, the row's maximum taken
    and subtracted; 1, the maximum of that and ``prev`` (the rows' maximum so far); 2,
    ``prev`` subtracted (the rows' lse). A maximum that is not finite (every key masked, or a
    NaN in the row) is 0. The same bits as NumPy's ``s += mask``, ``mask_future``,
    ``s.max(-1)``, ``np.maximum``, ``np.where(np.isfinite(m), m, 0)`` and ``s -= m``. Returns
    the maximum (..., T, 1) (mode 2: ``prev``), or None, doing nothing, where it does not
    apply (numba missing, ``s`` not C-contiguous float32/64, a mask of another dtype or
    whose batch dims do not map onto ``s``'s)."""
    if not s.size or s.ndim < 2 or not _fits(s) or (first is not None and type(first) is not int):
        return None
    lead, (T, S) = s.shape[:-2], s.shape[-2:]
    heads = lead[-1] if lead else 1
    rows = mask_rows(mask, s.shape, s.dtype)
    if rows is None:
        return None
    mask, *dims = rows
    if prev is not None:  # (a tile's rows of a whole lse may be a strided view: copied)
        if type(prev) is not np.ndarray or prev.shape != s.shape[:-1] + (1,):
            return None
        prev = np.ascontiguousarray(prev)
        if not _fits(s, prev):
            return None
    m = prev if mode == 2 else np.empty(s.shape[:-1] + (1,), s.dtype)
    bits, minus_inf, magnitude, inf_bits, zero = _BITS[s.dtype]
    _shift_rows(s.reshape(-1, S), s.view(bits).reshape(-1, S), heads, T, mask, *dims,
                S if first is None else min(first, S), (m if prev is None else prev).reshape(-1),
                mode, minus_inf, magnitude, inf_bits, zero, m.reshape(-1))
    return m


# --- attention's short rows, keys first -----------------------------------------------------
#
# A row of scores as long as a tiny model's sequence (16 keys) is too short for a
# vector loop along it, and NumPy's per-row passes pay their overhead once per row. So the
# one tile of short rows is laid out keys first: (S, R) for R rows of queries (every batch
# and head), each key's scores of every row side by side. Then a row's maximum, sum or
# rowdot is a vector of R, and each pass below is a vector loop over R, once per key.


@_jit
def _shift_keys_first(st, mask, heads, rows, Am, Hm, Tm, first, minus_inf, zero, m):
    S, R = st.shape
    Sm = mask.shape[1]
    for r in range(R):
        m[r] = minus_inf
    for s in range(S):
        x = st[s]
        if Am:  # the mask: one number for the rows of every head (a padding mask), of a
            j = s if Sm > 1 else 0  # head, or one a row
            r0 = 0
            for a in range(R // (heads * rows)):
                if Hm == 1 and Tm == 1:
                    c = mask[_mask_row(a, 0, 0, Am, Hm, Tm), j]
                    for r in range(r0, r0 + heads * rows):
                        x[r] = x[r] + c
                    r0 += heads * rows
                    continue
                for h in range(heads):
                    mq = _mask_row(a, h, 0, Am, Hm, Tm)
                    if Tm > 1:
                        for t in range(rows):
                            x[r0 + t] = x[r0 + t] + mask[mq + t, j]
                    else:
                        c = mask[mq, j]
                        for t in range(rows):
                            x[r0 + t] = x[r0 + t] + c
                    r0 += rows
        stop = min(rows, s - first + 1)  # causal: row t sees key s where s < first + t
        if stop > 0:
            for r0 in range(0, R, rows):
                for t in range(stop):
                    x[r0 + t] = x[r0 + t] + minus_inf
        for r in range(R):
            m[r] = x[r] if (x[r] > m[r] or x[r] != x[r]) else m[r]
    for r in range(R):
        m[r] = m[r] if (m[r] - m[r] == zero) else zero  # (not finite: 0)
    for s in range(S):
        x = st[s]
        for r in range(R):
            x[r] = x[r] - m[r]


def shift_keys_first(st, mask, lead, first):
    """``shift_rows`` for scores laid out keys first: ``st`` (S, R), R the rows of the
    scores' dims ``lead`` + (T,); ``mask`` a float tile that broadcasts to ``lead`` + (T, S)
    (None: none); -inf from key ``first + t`` on in row t (``first`` >= S: none); then each
    row's maximum (a NaN where the row has one, as NumPy's), or 0 where that is not finite,
    subtracted. Returns the maxima (R,), or None, doing nothing, where this does not apply.
    The same bits as NumPy's ``st += mask`` and ``st += where(future, -inf, 0)`` (keys
    first), ``st.max(axis=0)``, ``where(isfinite(m), m, 0)`` and ``st -= m``, but for a
    score of -0 past no causal limit, which NumPy's added 0 makes +0 (see ``mask_future``)."""
    if not st.size or st.ndim != 2 or not _fits(st):
        return None
    S, R = st.shape
    T = R // math.prod(lead)
    rows = mask_rows(mask, lead + (T, S), st.dtype)
    if rows is None:
        return None
    mask, *dims = rows
    m = np.empty(R, st.dtype)
    _shift_keys_first(st, mask, lead[-1] if lead else 1, T, *dims, min(first, S),
                      st.dtype.type(-np.inf), st.dtype.type(0), m)
    return m


@_jit
def _weights_keys_first(p, keep, has_keep, scale, zero, one, total, weights):
    S, R = p.shape
    for r in range(R):
        total[r] = p[0, r]
    for s in range(1, S):
        for r in range(R):
            total[r] += p[s, r]
    for s in range(S):
        for r in range(R):
            w = p[s, r] / (total[r] if total[r] != zero else one)
            weights[s, r] = w
            if has_keep:
                p[s, r] = w * (scale if keep[s, r] else zero)


def weights_keys_first(p, keep, scale):
    """For exp'd scores ``p`` (S, R) laid out keys first: (total, weights), the rows' sums
    (R,) (each key's added in turn, as NumPy's ``p.sum(axis=0)``) and a new array of the
    weights ``w = p / where(total == 0, 1, total)``; with a dropout mask ``keep`` (bool,
    (S, R); None: none), ``p = w * (keep * scale)`` in place. One pass after the sums,
    NumPy's bits; None where this does not apply."""
    if not p.size or not _fits(p) or p.ndim != 2 or (
            keep is not None and not _is_mask_of(keep, p)) or type(scale) not in (int, float):
        return None
    total, weights = np.empty(p.shape[1], p.dtype), np.empty_like(p)
    d = p.dtype.type
    _weights_keys_first(p, NO_MASK if keep is None else keep, keep is not None, d(scale),
                        d(0), d(1), total, weights)
    return total, weights


@_jit
def _score_grads_keys_first(ds, keep, scale, zero, wz, w, has_keep, rowdot):
    S, R = ds.shape
    for r in range(R):
        rowdot[r] = wz[0, r] * ds[0, r]
    for s in range(1, S):
        for r in range(R):
            rowdot[r] += wz[s, r] * ds[s, r]
    for s in range(S):
        for r in range(R):
            d = ds[s, r] * (scale if keep[s, r] else zero) if has_keep else ds[s, r]
            ds[s, r] = (d - rowdot[r]) * w[s, r]


def score_grads_keys_first(ds, keep, scale, wz, w):
    """``score_grads`` laid out keys first, ``ds`` (dP) and the weights ``w`` (S, R),
    ``keep`` bool (S, R) or None, with rowsum(dO * O) taken as (wz * dP).sum(axis=0) (the
    same sum, O being wz V: ``wz`` the weights dropped out): dS = (dP * keep * scale -
    rowdot) * w in place; NumPy's bits. False where it does not apply."""
    if not ds.size or not _fits(ds, w, wz) or not ds.shape == w.shape == wz.shape or \
            ds.ndim != 2 or type(scale) not in (int, float) or \
            (keep is not None and not _is_mask_of(keep, ds)):
        return False
    d = ds.dtype.type
    _score_grads_keys_first(ds, NO_MASK if keep is None else keep, d(scale), d(0), wz, w,
                            keep is not None, np.empty(ds.shape[1], ds.dtype))
    return True


@_jit
def _normalised_weights(p, total, keep, has_keep, scale, zero, one, weights):
    for r in range(p.shape[0]):
        t = total[r] if total[r] != zero else one
        for j in range(p.shape[1]):
            weights[r, j] = p[r, j] / t
            if has_keep:
                p[r, j] = p[r, j] * (scale if keep[r, j] else zero)


def normalised_weights(p, total, keep, scale):
    """A tile's weights ``p / where(total == 0, 1, total)`` (a new array) and, with a dropout
    mask ``keep`` (bool; None: none), ``p *= keep * scale`` in place: one pass, NumPy's bits.
    None where it does not apply."""
    if not p.size or not _fits(p, total) or total.shape != p.shape[:-1] + (1,) or (
            keep is not None and not _is_mask_of(keep, p)) or type(scale) not in (int, float):
        return None
    rows = total.size
    weights = np.empty_like(p)
    d = p.dtype.type
    _normalised_weights(p.reshape(rows, -1), total.reshape(-1),
                        NO_MASK if keep is None else keep.reshape(rows, -1), keep is not None,
                        d(scale), d(0), d(1), weights.reshape(rows, -1))
    return weights


@_jit
def _cross_entropy_grad(p, a, target, base, pick, w, has_w, smooth, coef, zero):
    for r in range(p.shape[0]):
        t = target[r]
        for j in range(p.shape[1]):
            c = zero
            if smooth:
                c = c + (base[r] * w[j] if has_w else base[r])
            if j == t:
                c = c + pick[r]
            p[r, j] = (p[r, j] * a[r] - c) * coef[r]


def cross_entropy_grad(p, a, target, base, pick, w, coef):
    """Cross-entropy's dx = (p * a - const) * coef in place in ``p`` (the softmax, (M, C)),
    in one pass, with const = 0 + base * w (``base`` per row, the smoothing's e / C * v;
    None without smoothing; ``w`` the class weights or None) plus ``pick`` at each row's
    ``target``: the bits of ``_target_terms``' (M, C) const and the NumPy formula, without
    making const. ``a``, ``pick``: one per row; ``coef`` one per row (M, 1) or one for all
    (0-d). False where it does not apply."""
    M = p.shape[0] if p.ndim == 2 else -1
    if isinstance(coef, np.generic):  # (a 0-d result of NumPy's arithmetic)
        coef = np.asarray(coef)
    if type(coef) is np.ndarray and coef.shape in ((), (M, 1)) and coef.dtype == p.dtype:
        coef = np.ascontiguousarray(np.broadcast_to(coef.reshape(-1), (M,)))
    rows = [x for x in (a, base, pick, coef) if x is not None]
    if not p.size or not _fits(p, *rows, *([] if w is None else [w])) or \
            any(x.shape != (M,) for x in rows) or (w is not None and w.shape != p.shape[1:]) \
            or type(target) is not np.ndarray or target.shape != (M,) or \
            target.dtype.kind not in "iu":
        return False
    _cross_entropy_grad(p, a, target, a if base is None else base, pick,
                        a if w is None else w, w is not None, base is not None, coef,
                        p.dtype.type(0))
    return True


@_jit
def _mask_future(s, first, minus_inf):
    for m in range(s.shape[0]):
        for r in range(s.shape[1]):
            for j in range(max(0, first + r), s.shape[2]):
                s[m, r, j] = s[m, r, j] + minus_inf


def mask_future(s, first):
    """Attention's causal mask in place: row r of each (rows, keys) tile of ``s`` gets -inf
    added to its keys from column ``first + r`` on (those in its future), touching only
    them. NumPy's formula adds a mask of 0 and -inf to every score: the masked ones get the
    same bits; the others, left as they are, differ only where a score is -0 (adding 0
    makes it +0, which no result of attention can tell apart). False where it does not
    apply."""
    if not s.size or s.ndim < 2 or not _fits(s) or type(first) is not int:
        return False
    _mask_future(s.reshape(-1, s.shape[-2], s.shape[-1]), first, s.dtype.type(-np.inf))
    return True


# --- erf of float32 arrays ------------------------------------------------------------------
#
# SciPy's erf runs element by element in double precision (about 15 ns an element, thirty
# times NumPy's exp), which made GELU the slowest op of a GPT step. ``erf`` below computes
# it in double precision too, by formulas that vectorise, and rounds to float32:
#
#   erf(a) = 1 - exp(-a^2) * erfcx(a)  for a = |x| >= 0.5 (erfcx(a) = exp(a^2) erfc(a),
#            smooth: a polynomial of degree 28 on [0, 4.5]; past 4.5 erf rounds to 1),
#   erf(a) = 2/sqrt(pi) * sum (-1)^n a^(2n+1) / (n! (2n+1)), n < 12, below (where 1 - erfc
#            would lose the digits of a small erf; the next term is 1e-17 of the sum),
#
# with exp(-a^2) as 2^-j * exp(r), |r| <= ln(2) / 2, by its Taylor series to r^13 (a^2 is
# exact in double for a float32 a). Its relative error is below 1e-14, so rounded to float32
# it gives SciPy's result (SciPy's erf is computed in double and rounded too) unless the true
# value lies within 1e-14 of a rounding boundary: there is no such float32. Every one of the
# 2^32 float32 values gives SciPy's bits (checked once, in 71 s); ``tests/test_host_loops.py``
# checks every 997th bit pattern. Fused multiply-adds are allowed here (they change only the
# double's last bits); no other fast-math.

ERFCX_POWERS = np.array([  # erfcx(a) = sum c_n u^n, u = (a - 2.25) / 2.25, a in [0, 4.5]
    0.23108725873039185, -0.19909463131967745, 0.1619626762667208, -0.12532034830492322,
    0.09275089265441516, -0.06595314764104204, 0.045221194675020865, -0.02998729011440671,
    0.019280411075008566, -0.012045227936156918, 0.007325616484132205, -0.004344262939494996,
    0.002515560228758048, -0.001423935710003737, 0.0007892833343671737, -0.0004294708331014486,
    0.00022830901382313998, -0.00011739743368935997, 6.1008979748619056e-05,
    -3.388669030544086e-05, 1.594020645677587e-05, -4.32947940512921e-06,
    2.830579208474795e-06, -4.029293760247932e-06, 1.474416358248096e-06,
    6.930702958801991e-07, -1.8334629435102577e-07, -3.3323740806016836e-07,
    1.288388058659723e-07])
"""A Chebyshev fit of ``scipy.special.erfcx`` at 4000 Chebyshev nodes of [0, 4.5] (degree
28), written in powers of u: relative error below 1e-14 over the interval."""
EXP_TAYLOR = np.array([1.0 / math.factorial(n) for n in range(14)])
ERF_TAYLOR = np.array([2.0 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1))
                       for n in range(12)])  # erf(a) = a * sum c_n (a^2)^n
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10  # (fdlibm's split)


FMA = {"contract"}  # the one fast-math flag the erf loops allow


@_jit(fastmath=FMA, inline="always")
def _polynomial(c, u):
    p = c[c.shape[0] - 1]
    for n in range(c.shape[0] - 2, -1, -1):
        p = p * u + c[n]
    return p


@_jit(fastmath=FMA, inline="always")
def _erf(v):
    """erf of one float32 ``v``, in double precision (NaN for NaN)."""
    a = abs(np.float64(v))
    c = min(a, 4.5)
    ecx = _polynomial(ERFCX_POWERS, (c - 2.25) * (1.0 / 2.25))
    y = -(c * c)
    k = np.floor(y * 1.4426950408889634 + 0.5)                  # exp(y) = 2^k exp(r)
    r = (y - k * _LN2_HI) - k * _LN2_LO
    j = np.int64(-k)                                            # 0 <= j <= 30: 2^-j exactly
    scale = ((0.5 if j & 1 else 1.0) * (0.25 if j & 2 else 1.0) *
             (0.0625 if j & 4 else 1.0) * (2.0 ** -8 if j & 8 else 1.0) *
             (2.0 ** -16 if j & 16 else 1.0))
    tail = 1.0 - _polynomial(EXP_TAYLOR, r) * scale * ecx
    near_zero = a * _polynomial(ERF_TAYLOR, a * a)
    e = math.copysign(near_zero if a < 0.5 else tail, v)
    return e if a == a else np.float64(v)


@_jit(fastmath=FMA)
def _erf32(x, out):
    for i in range(x.shape[0]):
        out[i] = np.float32(_erf(x[i]))


@_jit(fastmath=FMA)
def _gelu32(x, out):
    root_half, one, half = np.float32(0.7071067811865476), np.float32(1), np.float32(0.5)
    for i in range(x.shape[0]):
        cdf = np.float32(_erf(x[i] * root_half)) + one          # (float32 operations, in
        out[i] = cdf * x[i] * half                              # ``kernels.gelu``'s order)


@_jit(fastmath=FMA)
def _gelu_grad32(grad, x, xpdf):
    root_half, one, half = np.float32(0.7071067811865476), np.float32(1), np.float32(0.5)
    for i in range(x.shape[0]):  # (a multiply-add here is of (cdf + 1) * 0.5, exact anyway)
        cdf = (np.float32(_erf(x[i] * root_half)) + one) * half
        xpdf[i] = (cdf + xpdf[i]) * grad[i]


def erf(x):
    """``scipy.special.erf`` of a float32 host array, vectorised (see above): a new array,
    or None where it does not apply (another dtype, not C-contiguous, no numba)."""
    if not _fits(x) or x.dtype != np.float32:
        return None
    out = np.empty_like(x)
    _erf32(x.reshape(-1), out.reshape(-1))
    return out


def gelu(x):
    """``kernels.gelu`` of a float32 host array in one pass: ((erf(x * sqrt(1/2)) + 1) * x)
    * 0.5, each operation rounded to float32 as there; a new array, or None where it does
    not apply."""
    if not _fits(x) or x.dtype != np.float32:
        return None
    out = np.empty_like(x)
    _gelu32(x.reshape(-1), out.reshape(-1))
    return out


def gelu_grad(grad, x, xpdf):
    """The rest of ``kernels.gelu_backward`` in one pass, given ``xpdf`` = x * phi(x) (made
    by NumPy's exp): (((erf(x * sqrt(1/2)) + 1) * 0.5) + xpdf) * grad, each operation
    rounded to float32 as there, written into ``xpdf`` (returned); None where it does not
    apply."""
    if not _fits(grad, x, xpdf) or x.dtype != np.float32 or not \
            grad.shape == x.shape == xpdf.shape:
        return None
    _gelu_grad32(grad.reshape(-1), x.reshape(-1), xpdf.reshape(-1))
    return xpdf
