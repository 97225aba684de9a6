"""A colour scale for positive quantities that span decades: gradient sizes, times, bytes.

Colours are placed on a log scale fitted to the values of one picture, so the smallest
value in the picture gets the first colour of the palette and the largest the last,
whatever their absolute size: in a graph whose gradients run from 1e-4 to 1e-1 the nodes
spread over the whole palette instead of sharing one colour. The legend gives the values
at evenly spaced points of the scale, so the colours can be read back as numbers.

    scale = LogScale.fit([g.norm for g in stats])   # None when there is no positive value
    fill = scale.colour(0.02)                       # "#rrggbb"
    text = ink(fill)                                # "white" on dark fills, else "black"
    scale.ticks(5)                                  # [(value, colour), ...], low to high
    scale.legend_html("gradient norm")              # a Graphviz HTML-like legend row

The palette is monotone: each colour is darker than the one before (viridis, from light
yellow to dark violet), so a larger value is always a darker fill, and the colours read in
grey too.

Zero and non-finite values are not on a log scale: callers paint them apart (``ZERO``,
``NONFINITE``) and say so in words. ``colour`` clips values outside the fitted range to
the nearest end.
"""
import html
import math
from dataclasses import dataclass

# low -> high, lightest to darkest: viridis' yellow, green, teal, blue, violet
PALETTE = ("#fde725", "#5ec962", "#21918c", "#3b528b", "#440154")
ZERO = "#e8e8e8"       # an exact zero: no size to place on a log scale
NONFINITE = "#e31a1c"  # NaN or inf


@dataclass(frozen=True)
class LogScale:
    """Positive values from ``lo`` to ``hi`` mapped onto ``palette`` by their logarithm."""
    lo: float
    hi: float
    palette: tuple = PALETTE

    @classmethod
    def fit(cls, values, min_ratio=10.0, palette=PALETTE):
        """The scale spanning the positive, finite ``values`` (others are ignored), or None
        when there is none. A range narrower than ``min_ratio`` (max / min) is widened
        around its geometric middle to that ratio, so values that nearly agree get nearly
        the same colour instead of the two ends of the palette."""
        found = [float(v) for v in values
                 if v is not None and math.isfinite(v) and v > 0]
        if not found:
            return None
        lo, hi = min(found), max(found)
        if hi / lo < min_ratio:
            middle = math.sqrt(lo * hi)
            half = math.sqrt(min_ratio)
            lo, hi = middle / half, middle * half
        return cls(lo, hi, tuple(palette))

    def position(self, value):
        """Where ``value`` sits on the scale: 0 at ``lo``, 1 at ``hi``, clipped to [0, 1]."""
        if not value > 0:
            return 0.0
        span = math.log(self.hi / self.lo)
        return min(1.0, max(0.0, math.log(value / self.lo) / span)) if span > 0 else 0.5

    def colour(self, value):
        """The fill for a positive ``value``: "#rrggbb", interpolated between the palette's
        colours."""
        return _interpolate(self.palette, self.position(value))

    def ticks(self, n=5):
        """``n`` (value, colour) pairs evenly spaced in log from ``lo`` to ``hi``."""
        if n < 2:
            raise ValueError(f"LogScale.ticks: n must be at least 2, got {n}")
        return [(self.lo * (self.hi / self.lo) ** (k / (n - 1)),
                 _interpolate(self.palette, k / (n - 1))) for k in range(n)]

    def legend_html(self, title, n=5, fmt="{:.2g}", extra=()):
        """A one-row Graphviz HTML-like table: ``title``, then one cell per tick with its
        value (written by ``fmt``, a format string or a function), then the cells ``extra``
        as (text, fill) pairs (say, ("zero", ZERO))."""
        write = fmt if callable(fmt) else fmt.format
        cells = [(write(v), fill) for v, fill in self.ticks(n)] + list(extra)
        return legend_row(title, cells)


def legend_row(title, cells):
    """A Graphviz HTML-like table of one row: ``title`` then (text, fill) cells."""
    body = "".join(f'<TD BGCOLOR="{fill}"><FONT POINT-SIZE="9" COLOR="{ink(fill)}">'
                   f"{html.escape(text)}</FONT></TD>" for text, fill in cells)
    return ('<TABLE BORDER="0" CELLSPACING="1" CELLPADDING="3"><TR><TD><FONT POINT-SIZE="9">'
            f"{html.escape(title)}:</FONT></TD>{body}</TR></TABLE>")


def ink(fill):
    """The text colour readable on ``fill`` ("#rrggbb"): white or black, whichever has the
    higher contrast with it (WCAG's contrast ratio; at least 4.58:1 either way)."""
    return "white" if contrast(fill, "#ffffff") > contrast(fill, "#000000") else "black"


def luminance(colour):
    """The relative luminance of ``colour`` ("#rrggbb"), WCAG's formula: 0 black, 1 white."""
    r, g, b = (_linear(c / 255) for c in _rgb(colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a, b):
    """WCAG's contrast ratio of two colours ("#rrggbb"), from 1 to 21 (AA asks 4.5 of
    text)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _linear(c):
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _rgb(fill):
    return tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))


def _interpolate(palette, t):
    """The colour a fraction ``t`` (0..1) of the way along ``palette``, linear in RGB."""
    x = t * (len(palette) - 1)
    i = min(int(x), len(palette) - 2)
    a, b = _rgb(palette[i]), _rgb(palette[i + 1])
    f = x - i
    return "#" + "".join(f"{round(p + (q - p) * f):02x}" for p, q in zip(a, b))
