"""What the demo programs share on their command line.

Every program builds its parser with ``make_parser`` (named ``python -m minigrad.demos.<name>``,
each option's default shown in ``-h``), checks values with the argument types below, so that
a bad value, like an unknown option, stops it before any work with one line, ``prog: error:
argument --x: ... (see -h)``, and reports a problem found later (a checkpoint that does not
fit) with ``fail``: one line,
``prog: error: ...``, exit status 1. Every program that writes files ends with the same
closing block, ``print_written``: the folder, then each file with what to look at in it.
"""
import argparse
import contextlib
import errno
import importlib.util
import math
import os
import signal
import sys
import tempfile
import textwrap
import warnings

import minigrad as mg
from minigrad import backend
from minigrad.compile import CompileWarning
from minigrad.files import naming  # noqa: F401  (the demos write through it too)


class _DefaultsShown(argparse.HelpFormatter):
    """Adds "(default: X)" to an option's help, unless the help already speaks of its
    default or the option has none (a flag, or a default worked out later)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or any(action.default is v for v in (None, False, argparse.SUPPRESS)):
            return text
        return text + " (default: %(default)s)"


def prog(name):
    """How a demo is run: ``python -m minigrad.demos.<name>``."""
    return f"python -m minigrad.demos.{name}"


class _OneLineErrors(argparse.ArgumentParser):
    """An ArgumentParser whose errors (an unknown option, a bad value, a missing one) are one
    line on stderr that points to ``-h``, not argparse's usage block; status 2 as argparse."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see -h)\n")


def summary(doc):
    """The first paragraph of a docstring ``doc``, in one line: a program's description."""
    return " ".join(doc.strip().split("\n\n")[0].split())


def make_parser(name, description):
    """The parser of ``python -m minigrad.demos.<name>``."""
    return _OneLineErrors(prog=prog(name), description=description,
                          formatter_class=_DefaultsShown)


def fail(name, message):
    """Stop demo ``name`` with one line on stderr, ``python -m minigrad.demos.<name>: error:
    <message>``, and exit status 1 (a caller of ``main`` gets SystemExit with that line)."""
    raise SystemExit(f"{prog(name)}: error: {message}")


# --- optional packages ------------------------------------------------------------------------

# the optional packages the demos use, each with the extra of setup.cfg that installs it
EXTRAS = {"tqdm": "demos", "matplotlib": "demos", "sacrebleu": "demos", "graphviz": "viz"}


def installed(module):
    """Whether the top-level package ``module`` can be imported (found, and not refused)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: None in sys.modules, an import refused
        return False


def require(name, *modules):
    """Stop demo ``name`` before any work, with one line naming the extra to install, when
    one of the optional packages ``modules`` (keys of ``EXTRAS``) is missing."""
    missing = [m for m in modules if not installed(m)]
    if missing:
        extras = ",".join(sorted({EXTRAS[m] for m in missing}))
        verb = "is" if len(missing) == 1 else "are"
        fail(name, f"{' and '.join(missing)} {verb} not installed: "
             f"pip install 'minigrad[{extras}]'")


# --- argument types: each returns the value, or refuses it with one line ----------------------

def _number(kind, text):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if kind is float and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def _bounded(kind, strict, doc):
    """An argument type: a number of ``kind`` above 0 (``strict``) or at least 0."""
    def parse(text):
        value = _number(kind, text)
        if value < 0 or (strict and value == 0):
            shown = value if kind is int else f"{value:g}"
            raise argparse.ArgumentTypeError(f"must be {'>' if strict else '>='} 0, got {shown}")
        return value
    parse.__doc__ = doc
    return parse


positive_int = _bounded(int, True, "An integer > 0: a number of steps, a size, a batch.")
nonneg_int = _bounded(int, False, "An integer >= 0: a count that may be zero, a seed.")
positive_float = _bounded(float, True, "A finite number > 0: a learning rate.")
nonneg_float = _bounded(float, False, "A finite number >= 0: a clipping norm (0 for none).")


def probability(text):
    """A number in [0, 1): a dropout rate, a label smoothing."""
    value = _number(float, text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1), got {value:g}")
    return value


def fraction(text):
    """A number in [0, 1]: a share of the steps."""
    value = _number(float, text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1], got {value:g}")
    return value


def device(text):
    """``cpu``, ``cuda`` or ``cuda:N``, refused unless the machine has that device; returns
    the text as given."""
    try:
        dev = mg.Device(text)
    except mg.DeviceError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if dev.type == "cuda":
        try:
            count = backend.cupy().cuda.runtime.getDeviceCount()
        except mg.DeviceError as e:
            raise argparse.ArgumentTypeError(f"no CUDA device is available ({e})") from None
        if dev.index >= count:
            raise argparse.ArgumentTypeError(
                f"no CUDA device {dev} (this machine has {count}: cuda:0 to cuda:{count - 1})")
    return text


# --- options and checks that several programs share ---------------------------------------------

def add_run_options(parser, out, out_help=None, seed_help="seeds the data and the weights"):
    """--seed, --out (default ``out``), --device and --no-progress, the same in every
    training demo."""
    parser.add_argument("--seed", type=nonneg_int, default=0, help=seed_help)
    parser.add_argument("--out", default=out, help=out_help or "output folder")
    add_device_option(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_device_option(parser):
    parser.add_argument("--device", type=device, default="cpu", help="cpu, cuda or cuda:N")


def add_compile_option(parser):
    """--compile: the training step captured by ``mg.compile`` and replayed (``TrainingStep``)."""
    parser.add_argument("--compile", action="store_true", help="capture the training step with "
                        "mg.compile and replay it: the same losses and weights, bit for bit")


def clipped_update(loss_fn, model, optimizer, scheduler, max_norm=1.0):
    """The training update as a function of tensors: ``loss_fn(*tensors)``, backward, the
    gradients clipped to ``max_norm``, the optimiser's and the scheduler's step. It returns
    the loss and reads no value back, so that ``--compile`` captures it whole."""
    def update(*tensors):
        loss = loss_fn(*tensors)
        optimizer.zero_grad()
        loss.backward()
        mg.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        scheduler.step()
        return loss
    return update


class TrainingStep:
    """A demo's training step ``fn`` (a function of tensors that returns tensors), under
    ``mg.compile`` when ``compiled`` is true (the --compile option), else ``fn`` itself.

    Call it as ``fn``; ``eager(...)`` runs ``fn`` uncompiled (a step whose graph or
    gradients the demo looks at: a replayed step builds no graph). When ``mg.compile``
    gives up on the step (it runs eagerly from then on), one line on stderr says why, at
    once; ``report()`` prints on stderr what it did in all: how many steps were replayed, how
    many batch shapes were captured and how many ran eagerly. ``name`` tells apart the runs
    of a demo that trains several models.
    """

    def __init__(self, fn, compiled=False, name=None):
        self.fn = fn
        self.step = mg.compile(fn) if compiled else None
        self.prefix = "mg.compile" if name is None else f"mg.compile ({name})"
        self.calls = 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.step is None:
            return self.fn(*args, **kwargs)
        seen = len(self.step.log)
        with warnings.catch_warnings():  # said here in one line, not as a Python warning
            warnings.simplefilter("ignore", CompileWarning)
            result = self.step(*args, **kwargs)
        for line in self.step.log[seen:]:
            if line.startswith(_EAGER):
                print(f"{self.prefix}: {line}", file=sys.stderr)
        return result

    def eager(self, *args, **kwargs):
        self.calls += 1
        return self.fn(*args, **kwargs)

    @property
    def replays(self):
        return 0 if self.step is None else self.step.replays

    def summary(self):
        """What ``mg.compile`` did, in one line (None without --compile)."""
        if self.step is None:
            return None
        eager = sum(line.startswith(_EAGER) for line in self.step.log)
        line = (f"{self.prefix}: {self.step.replays} of {self.calls} steps replayed, "
                f"{len(self.step.entries) - eager} batch shape(s) captured")
        return line + (f", {eager} ran eagerly (why: above)" if eager else "")

    def report(self):
        """Print ``summary()`` on stderr, with --compile."""
        if self.step is not None:
            print(self.summary(), file=sys.stderr)


_EAGER = "running eagerly: "  # how mg.compile's log says that a step falls back


def parse_checked(parser, argv=None):
    """``argv`` (default: sys.argv) parsed by ``parser``, its --out checked before any work."""
    args = parser.parse_args(argv)
    check_out_dir(parser, args.out)
    return args


def check_out_dir(parser, path):
    """Refuse an output folder that is a file, or that cannot be created or written in
    (permission, a read-only file system), with one line ``prog: error: argument --out:
    ...`` and argparse's status 2 (no usage block: the command line is well formed, the
    folder is not usable); nothing is created here."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        _out_error(parser, f"{path} is a file, not a folder")
    existing = path
    while not os.path.exists(existing):  # the nearest existing folder creates the rest
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        _out_error(parser, f"cannot create {path}: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(existing) else "permission denied"
        _out_error(parser, f"cannot write in {existing} ({why})")


def _out_error(parser, message):
    parser.exit(2, f"{parser.prog}: error: argument --out: {message}\n")


def _read_only(folder):
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except (AttributeError, OSError):  # no statvfs (Windows)
        return False


def make_out_dir(name, path):
    """Create the output folder ``path`` of demo ``name`` (and its parents) and check that a
    file can be written in it, before any work; stop with one line naming --out if not."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        fail(name, f"--out: cannot write in {path} ({e.strerror or e})")


# the errors of a write that name no file: a full disk, a file over the size limit, a quota
_FULL = (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC))


@contextlib.contextmanager
def writing_to(name, out):
    """Run the block of demo ``name``, which writes in the output folder ``out``: a file
    there that cannot be written (a folder in its place, a full disk) stops the program with
    one line naming --out and the file, not a traceback. A full disk whose error names no
    file (see ``naming``) is reported naming the folder. Other errors pass through.

    Within the block a file over the size limit (``ulimit -f``) fails its write, reported
    so, instead of killing the program (SIGXFSZ is ignored, as the shell's own tools do)."""
    with _file_size_limit_as_error():
        try:
            yield
        except OSError as e:
            if e.filename is None and e.errno in _FULL:
                fail(name, f"--out: cannot write in {out} ({e.strerror or e})")
            path = None if e.filename is None else os.fsdecode(e.filename)
            if path is None or not _lies_under(path, os.fsdecode(out)):
                raise
            fail(name, f"--out: cannot write {path} ({e.strerror or e})")


@contextlib.contextmanager
def _file_size_limit_as_error():
    """SIGXFSZ ignored within the block (where the platform has it and this is the main
    thread), so that a write past ``ulimit -f`` fails with EFBIG; then put back."""
    try:
        previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    except (AttributeError, ValueError):  # no SIGXFSZ (Windows), or not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL if previous is None else previous)


def _lies_under(path, folder):
    """Whether ``path`` is ``folder`` or lies under it."""
    path, folder = os.path.abspath(path), os.path.abspath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


# --- the closing block ----------------------------------------------------------------------

def written_block(out, files):
    """The closing block of a demo: ``Wrote <out>/:``, then one line per file, its name (under
    ``out``) and what to look at in it.

    Args:
        out: the output folder.
        files: (path, what) pairs; a path is relative to ``out`` or lies under it.
    """
    out = str(out).rstrip(os.sep) or os.sep
    rows = [(_name_under(out, str(path)), what) for path, what in files]
    width = max((len(name) for name, _ in rows), default=0)
    lines = [f"Wrote {out}{os.sep}:"]
    for name, what in rows:  # the descriptions wrapped beside the names
        lines += textwrap.wrap(what, 96, initial_indent=f"  {name:<{width}}  ",
                               subsequent_indent=" " * (width + 4), break_on_hyphens=False)
    return "\n".join(lines)


def _name_under(out, path):
    """``path`` relative to ``out`` when it lies under it (given either way), else as given."""
    for base in (out, os.path.abspath(out)):
        if os.path.isabs(path) == os.path.isabs(base):
            name = os.path.relpath(path, base)
            if name != os.curdir and not name.startswith(os.pardir):
                return name
    return path


def print_written(out, files):
    """Print ``written_block(out, files)`` after a blank line: the last thing a demo says."""
    print("\n" + written_block(out, files))
