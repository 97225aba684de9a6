"""How a tensor prints, exactly as PyTorch prints it: ``tensor([...], dtype=..., grad_fn=<...>)``,
under the options of ``set_printoptions``. PyTorch's rules:

- One format serves all the numbers of a tensor (a complex tensor has one for the real parts and
  one for the imaginary parts), chosen from the values shown: integers and bools print as Python
  prints them; floating values print in scientific notation (``1.0000e+10``) when the finite
  non-zero values span more than three decades, pass 1e8 or fall below 1e-4 (or as ``sci_mode``
  says), else as ``3.`` when they are all whole, else with ``precision`` digits (``3.1416``).
  Every number is right-aligned to the widest finite non-zero one, so nan, inf and zeros do not
  widen the columns.
- A tensor of more than ``threshold`` elements is summarised: its ``edgeitems`` first and last
  items along each dim, with ``...`` between; only those choose the format.
- A row wraps before it passes ``linewidth``; each nested row is indented under its bracket, and
  separated from the next by as many line breaks as it has dims.
- The suffixes follow the values (device, size, dtype, grad_fn or requires_grad), each moved to
  a new line when it would pass ``linewidth``.

minigrad's own spellings stay: a dtype as NumPy names it (``dtype=float64``), a device as
``Device`` names it."""
import math

import numpy as np

from . import dtypes

_PRINT_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
                   "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
                   "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}
# the options in force, changed by set_printoptions
_PRINT_OPTIONS = dict(_PRINT_PROFILES["default"], sci_mode=None)

_PREFIX = "tensor("


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """How tensors print, as PyTorch's: digits after the point, the element count above
    which a tensor is summarised by its ``edgeitems`` first and last items per dim, the
    line width, scientific notation (True, False, or None: chosen by the values); a
    ``profile`` ("default", "short", "full") sets the first four at once, and the options
    given override it. ``sci_mode`` is always set, so leaving it out restores None."""
    if profile is not None:
        _PRINT_OPTIONS.update(_PRINT_PROFILES[profile])
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                 linewidth=linewidth)
    _PRINT_OPTIONS.update({k: v for k, v in given.items() if v is not None})
    _PRINT_OPTIONS["sci_mode"] = sci_mode


# --- the format of the numbers -------------------------------------------------------------

def _spans_decades(finite):
    """Whether finite non-zero values call for scientific notation: their magnitudes span more
    than three decades, pass 1e8 or fall below 1e-4 (compared in float64, as PyTorch does)."""
    magnitudes = np.abs(finite.astype(np.float64))
    low, high = magnitudes.min(), magnitudes.max()
    return bool(high / low > 1000.0 or high > 1.0e8 or low < 1.0e-4)


class _NumberFormat:
    """The one format of a tensor's real numbers, chosen from ``shown``, the values printed:
    ``text(v)`` is a number right-aligned to ``width``."""

    def __init__(self, shown, options):
        self.precision = options["precision"]
        self.floating = shown.dtype.kind == "f"
        self.whole, self.scientific, self.width = True, False, 1
        flat = shown.ravel()
        if not self.floating:
            self.width = max([1] + [len(str(v)) for v in flat.tolist()])
            return
        finite = flat[np.isfinite(flat) & (flat != 0)]
        if finite.size == 0:  # only zeros, nan and inf: they print as "0.", "nan", "inf"
            return
        self.whole = bool(np.all(finite == np.ceil(finite)))
        sci_mode = options["sci_mode"]
        self.scientific = _spans_decades(finite) if sci_mode is None else bool(sci_mode)
        self.width = max(len(self.plain(v)) for v in finite.tolist())

    def plain(self, v):
        """``v`` unpadded: ``3.1416``, ``3.`` (a whole float), ``3.1416e+00``, ``nan``, ``7``."""
        if not self.floating:
            return str(v)
        if self.scientific:
            return f"{v:.{self.precision}e}"
        if self.whole:
            return f"{v:.0f}" + ("." if math.isfinite(v) else "")
        return f"{v:.{self.precision}f}"

    def text(self, v):
        return self.plain(v).rjust(self.width)


class _ComplexFormat:
    """The format of a complex tensor's numbers: its real parts and its imaginary parts each
    have their own ``_NumberFormat``; ``width`` counts both and the ``j``."""

    def __init__(self, shown, options):
        self.real = _NumberFormat(shown.real, options)
        self.imag = _NumberFormat(shown.imag, options)
        self.width = self.real.width + self.imag.width + 1

    def text(self, v):
        real = self.real.text(v.real)
        imag = (self.imag.text(v.imag) + "j").lstrip()
        return real + imag if imag[0] in "+-" else real + "+" + imag


def _edges(values, edgeitems):
    """The values a summarised tensor shows: along each dim longer than ``2 * edgeitems``,
    only its first and last ``edgeitems``."""
    if values.ndim == 0:
        return values
    keep = [np.concatenate([np.arange(edgeitems), np.arange(n - edgeitems, n)])
            if n > 2 * edgeitems else np.arange(n) for n in values.shape]
    return values[np.ix_(*keep)]


def _number_format(values, options, summarise):
    """The format of the numbers of ``values``, chosen from those shown."""
    shown = _edges(values, options["edgeitems"]) if summarise else values
    kind = _ComplexFormat if values.dtype.kind == "c" else _NumberFormat
    return kind(shown, options)


# --- the layout ----------------------------------------------------------------------------

def _shown_indices(n, options, summarise):
    """The indices shown along a dim of size ``n``; None stands for the ellipsis."""
    e = options["edgeitems"]
    if summarise and n > 2 * e:
        return list(range(e)) + [None] + list(range(n - e, n))
    return list(range(n))


def _row(values, indent, number, options, summarise):
    """A 1-D ``values`` whose bracket is at column ``indent``: as many items a line as fit in
    the line width (each counted with its ", "), the following lines under the first item."""
    if summarise and not options["edgeitems"]:
        return "[...]"
    row = values.tolist()
    items = [" ..." if i is None else number.text(row[i])
             for i in _shown_indices(len(row), options, summarise)]
    per_line = max(1, math.floor((options["linewidth"] - indent) / (number.width + 2)))
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"


def _nested(values, indent, number, options, summarise):
    """``values`` whose outer bracket is at column ``indent``: a number (0-d), a row (1-D),
    or its sub-tensors one under the other, after one line break per dim they have."""
    if values.ndim == 0:
        return number.text(values.item())
    if values.ndim == 1:
        return _row(values, indent, number, options, summarise)
    parts = ["..." if i is None else _nested(values[i], indent + 1, number, options, summarise)
             for i in _shown_indices(len(values), options, summarise)]
    return "[" + ("," + "\n" * (values.ndim - 1) + " " * (indent + 1)).join(parts) + "]"


def _with_suffixes(text, suffixes, indent, linewidth):
    """``text`` and its suffixes, each after ", " or, when it would pass the line width, on a
    new line indented to ``indent``; then the closing parenthesis. The lengths are counted as
    PyTorch counts them (the line so far plus two, then each suffix plus two)."""
    used = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if used + len(suffix) + 2 > linewidth:
            text += ",\n" + " " * indent + suffix
            used = indent + len(suffix)
        else:
            text += ", " + suffix
            used += len(suffix) + 2
    return text + ")"


# --- repr ----------------------------------------------------------------------------------

def _implied_dtypes(empty):
    """The dtypes a repr does not name: the default float dtype, and for a tensor with
    values, int64, bool and the complex dtype that matches the default."""
    default = dtypes.get_default_dtype()
    if empty:
        return (default,)
    complex_default = np.dtype(np.complex128 if default == dtypes.float64 else np.complex64)
    return default, complex_default, dtypes.int64, dtypes.bool


def _suffixes(t, values, options):
    """What the values do not show: a device other than the CPU, the size of an empty tensor
    (but a 1-D one) or of any when ``edgeitems`` is 0, a dtype the values do not imply, the
    node that made it or that it requires grad."""
    suffixes = []
    if t.is_cuda:
        suffixes.append(f"device='{t.device}'")
    empty = values.size == 0
    if (values.ndim != 1) if empty else not options["edgeitems"]:
        suffixes.append(f"size={tuple(values.shape)}")
    if t.dtype not in _implied_dtypes(empty):
        suffixes.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return suffixes


def tensor_repr(t):
    """``repr(t)`` (and ``str(t)``): its values, read on the host and laid out as PyTorch lays
    them out, and the suffixes for what they do not show."""
    options = dict(_PRINT_OPTIONS)
    values = t.numpy()
    indent = len(_PREFIX)
    if values.size == 0:
        body = "[]"
    else:
        summarise = values.size > options["threshold"]
        number = _number_format(values, options, summarise)
        body = _nested(values, indent, number, options, summarise)
    return _with_suffixes(_PREFIX + body, _suffixes(t, values, options), indent,
                          options["linewidth"])
