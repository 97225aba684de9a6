"""The reading order of a backward pass: which of minigrad's functions a call runs through,
in the order each is first entered, and the lines of each that ran.

    loss = (x * w).sum()
    print(mg.autograd.reading_order(loss.backward))

prints one row per function (``minigrad/autograd/engine.py:61  run_backward  (24 lines)``):
the files and functions to read, in the order that follows one ``backward()`` of the
reader's own program from the loss to the leaves' ``.grad``. It runs the call under
``sys.settrace``, watching only minigrad's own files, so it is slow; use it to read, not
in a training loop.
"""
import os
import sys
from dataclasses import dataclass, field

from .anomaly import package_dirs

_HERE = os.path.abspath(__file__)
_INNER = frozenset(("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>", "<lambda>"))


def _roots():
    """The folders of minigrad's code (the engine first, then nn and models when loaded)."""
    return package_dirs(("minigrad", "minigrad.nn", "minigrad.models"))


@dataclass
class Step:
    """One function a call ran through: where it is defined, and the lines of it that ran."""
    path: str        # relative to the repository (or installed package) root
    line: int        # where the function starts
    name: str        # its qualified name (``Tensor.backward``)
    lines: set = field(default_factory=set)  # (code, line number) of each line that ran

    def row(self, where=True):
        n = len(self.lines)
        place = f"{self.path}:{self.line}" if where else self.path
        return f"{place:36s} {self.name:28s} {n:3d} line{'s' if n != 1 else ''}"

    def __str__(self):
        return self.row()


class ReadingOrder(list):
    """The functions a call ran through (``Step``s), in the order each was first entered."""

    def files(self):
        """The files, in the order they were first entered."""
        return list(dict.fromkeys(s.path for s in self))

    def lines(self):
        """How many lines ran, in all (a line counted once, whichever function ran it)."""
        return len({(code.co_filename, line) for s in self for code, line in s.lines})

    def table(self, where=True):
        """A row per function (``where``: with the line it starts at), then the totals."""
        rows = [f"{k:3d}  {s.row(where)}" for k, s in enumerate(self, 1)]
        rows.append(f"{len(self)} functions in {len(self.files())} files, "
                    f"{self.lines()} lines ran")
        return "\n".join(rows)

    def __str__(self):
        return self.table()


def reading_order(fn, *args, **kwargs):
    """Call ``fn(*args, **kwargs)`` (``loss.backward``, or ``lambda: loss.backward()``) and
    return the ``ReadingOrder`` of minigrad's functions it ran through."""
    roots = _roots()
    base = os.path.dirname(roots[0].rstrip(os.sep))
    steps = {}  # code object -> Step

    def lines(frame, event, arg):
        if event == "line":
            steps[frame.f_code].lines.add((frame.f_code, frame.f_lineno))
        return lines

    def calls(frame, event, arg):
        code = frame.f_code
        path = code.co_filename
        if event != "call" or not path.startswith(roots) or path == _HERE:
            return None
        if code.co_name in _INNER:  # a comprehension or lambda: its caller's lines
            outer = frame.f_back.f_code if frame.f_back is not None else None
            if outer in steps:
                def inner(frame, event, arg):
                    if event == "line":
                        steps[outer].lines.add((code, frame.f_lineno))
                    return inner
                return inner
        if code not in steps:
            name = getattr(code, "co_qualname", code.co_name)
            rel = os.path.relpath(path, base).replace(os.sep, "/")
            steps[code] = Step(rel, code.co_firstlineno, name)
        return lines

    previous = sys.gettrace()
    sys.settrace(calls)
    try:
        fn(*args, **kwargs)
    finally:
        sys.settrace(previous)
    return ReadingOrder(s for s in steps.values())
