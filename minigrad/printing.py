"""How a tensor prints, as PyTorch's ``repr``: ``tensor([...], dtype=..., grad_fn=<...>)``,
with the options of ``set_printoptions`` (digits, summarising, line width, scientific
notation). The values are formatted by NumPy's ``array2string``."""
import math
import sys

import numpy as np

from . import dtypes

# set by set_printoptions; None keeps the printing default
_PRINT_OPTIONS = dict(precision=None, threshold=None, edgeitems=None, linewidth=None,
                      sci_mode=None)
_PRINT_PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
                   "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
                   "full": dict(precision=4, threshold=sys.maxsize, edgeitems=3, linewidth=80)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """How tensors print, as PyTorch's: digits after the point, the element count above
    which a tensor is summarised by its ``edgeitems`` first and last items per dim, the
    line width, scientific notation (True, False, or None: chosen by the values); a
    ``profile`` ("default", "short", "full") sets the first four at once."""
    if profile is not None:
        _PRINT_OPTIONS.update(_PRINT_PROFILES[profile])
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems,
                 linewidth=linewidth)
    _PRINT_OPTIONS.update({k: v for k, v in given.items() if v is not None})
    if threshold is not None and threshold == math.inf:
        _PRINT_OPTIONS["threshold"] = sys.maxsize
    _PRINT_OPTIONS["sci_mode"] = sci_mode


def tensor_repr(t):
    """``repr(t)``: its values (read on the host), and what they do not show: a device other
    than the CPU, the size of an empty tensor, a dtype the values do not imply, the node
    that made it or that it requires grad."""
    values = t.numpy()
    finite = values[np.isfinite(values)] if values.dtype.kind == "f" else values
    fixed = values.dtype.kind == "f" and not np.array_equal(finite, np.round(finite))
    options = {k: v for k, v in _PRINT_OPTIONS.items() if v is not None}
    if options.pop("sci_mode", None) and values.dtype.kind == "f":
        digits = options.get("precision", 4)
        options["formatter"] = {"float_kind": lambda v: f"{v:.{digits}e}"}
    options.setdefault("precision", 4)
    if "linewidth" in options:
        options["max_line_width"] = options.pop("linewidth")
    body = np.array2string(values, separator=", ", prefix="tensor(",
                           floatmode="fixed" if fixed else "maxprec", **options)
    extras = []
    if t.is_cuda:
        extras.append(f"device='{t.device}'")
    if values.size == 0 and values.ndim != 1:  # PyTorch prints "[]" and the size
        extras.append(f"size={values.shape}")
    # dtypes the values imply, so not named; an empty tensor implies only the default
    implied = (dtypes.get_default_dtype(),) if values.size == 0 else \
        (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool)
    if t.dtype not in implied:
        extras.append(f"dtype={t.dtype}")
    if t.grad_fn is not None:
        extras.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        extras.append("requires_grad=True")
    return "tensor(" + ", ".join([body] + extras) + ")"
