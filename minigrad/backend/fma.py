"""``fma(x, y, z)``: ``x * y + z`` rounded once, as the fused multiply-adds of PyTorch's CPU
kernels round (``addcmul_``, ``lerp_`` and ``add(alpha=)`` of the optimisers' moments,
``linspace``'s values), on arrays of any array module (NumPy has no fused multiply-add).

float32 (and float16): the product of two float32 numbers is exact in float64; the float64
sum with ``z`` is rounded to odd (its last bit set where inexact), which makes its
rounding to float32 that of the exact ``x * y + z`` (as ``backend.add_scaled``).
float64: Boldo & Melquiond's emulation ("Emulation of FMA and correctly rounded sums:
proved algorithms using rounding to odd", IEEE TC 2008): the product split exactly into
two doubles (Dekker's product, Veltkamp's splitting), its high part added to ``z``
exactly (Knuth's two-sum), the two low parts added with rounding to odd, and that added
to the high sum with the usual rounding. Exact for operands whose products neither
overflow nor underflow (an optimiser's moments and gradients); where the plain
``x * y + z`` is not finite, that is the result.
"""
import numpy as np

from .devices import xp_of


def fma(x, y, z):
    """``x * y + z`` rounded once to the dtype of the arrays (a new array); any of them may
    be a 0-d array of that dtype (``backend.number_like``)."""
    xp = xp_of(z if hasattr(z, "dtype") else x)
    dtype = np.result_type(*(a.dtype for a in (x, y, z)))
    if dtype.itemsize < 8:
        x64, y64, z64 = (xp.asarray(a).astype(np.float64) for a in (x, y, z))
        return _round_to_odd_sum(xp, z64, x64 * y64).astype(dtype)
    plain = x * y + z
    ph, pl = _two_product(xp, x, y)
    th, tl = _two_sum(xp, z, ph)
    v = _round_to_odd_sum(xp, tl, pl)
    result = th + v
    return xp.where(xp.isfinite(plain), result, plain)


def _two_sum(xp, a, b):
    """(s, e) with s = a + b rounded and s + e = a + b exactly (Knuth)."""
    s = a + b
    back = s - a
    return s, (a - (s - back)) + (b - back)


def _split(a):
    c = 134217729.0 * a  # 2**27 + 1 (Veltkamp)
    hi = c - (c - a)
    return hi, a - hi


def _two_product(xp, a, b):
    """(p, e) with p = a * b rounded and p + e = a * b exactly (Dekker)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _round_to_odd_sum(xp, a, b):
    """a + b in float64 rounded to odd: the nearest sum, its last bit set where inexact
    and even (moved one ulp towards the exact sum)."""
    s, err = _two_sum(xp, a, b)
    s = xp.asarray(s)
    even = (s.view(np.int64) & 1) == 0
    return xp.where((err != 0) & even & xp.isfinite(s),
                    xp.nextafter(s, xp.where(err > 0, np.inf, -np.inf)), s)
