"""Guards: what a captured step depends on besides its arguments, checked before each replay.

A replay runs no Python of the step: every number the step read (a closure variable, a
global, a module attribute such as ``LeakyReLU.negative_slope`` or ``Dropout.p``, a
``max_norm`` handed to ``clip_grad_norm_``) and every tensor it reached by name is frozen
into the program. So, at the end of a capture, ``collect`` walks what the step can reach
from where it was defined and writes one check per thing it depends on:

* the step's own Python state: the globals its code names and its closure variables, the
  same for every function of the user's it reaches (and the methods of the user's
  classes), the attributes of the objects it reaches (modules with their parameters,
  buffers, submodules and hooks, config objects, lists and dicts): a number, string,
  bool or None by type and value, anything else by identity, every container by length;
* the autograd state of every tensor it reaches or reads: ``requires_grad``, whether
  ``.grad`` is set, its gradient hooks, and the shape, dtype and array type of the
  tensors the program reads (a parameter's ``.data`` may be replaced);
* minigrad's own switches: the default dtype, anomaly mode, inference mode and the
  ``saved_tensors_hooks`` blocks open on this thread.

Optimisers and schedulers are checked by identity only: their steps are replayed as calls
that read learning rates and step counts afresh. NumPy arrays are checked by identity,
shape and dtype, not by value. Library code (minigrad's, the standard library's, installed
packages') is not walked: only the user's.

The checks become one generated function (``Guards.source``), a line per check, that
returns the number of the first check that fails: about 30 ns a check. When one fails,
the step is captured again (``step.log`` names what changed, from what to what); when the
step itself changes something it depends on (``self.calls += 1``, appending to a list)
a replay could not repeat that, so it runs eagerly and says so.
"""
import argparse
import dataclasses
import functools
import math
import os
import sys
import sysconfig
import types

import numpy as np

from .. import dtypes
from ..autograd.grad_mode import PROCESS, STATE
from ..autograd.graph import TensorBase
from ..backend import _XP_BY_TYPE

MISSING = type("MISSING", (), {"__repr__": lambda self: "(missing)"})()
BUDGET = 20000  # at most this many checks; past it, what is left is checked by identity

_SCALARS = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis), range,
            slice, np.dtype, np.generic)
_NAMESPACES = (types.SimpleNamespace, argparse.Namespace)
_LIBRARY_DIRS = tuple(os.path.normcase(os.path.realpath(p)) + os.sep for p in {
    sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")})


def _is_library(obj):
    """Whether a function, class or module belongs to a library (minigrad's own code but its
    demos, the standard library, an installed package): its state is not the user's."""
    module = obj.__name__ if isinstance(obj, types.ModuleType) else \
        getattr(obj, "__module__", None) or ""
    if module == "minigrad" or module.startswith("minigrad.") and \
            not module.startswith("minigrad.demos"):
        return True
    if module in sys.builtin_module_names or module.split(".")[0] in getattr(
            sys, "stdlib_module_names", ()):
        return True
    code = getattr(obj, "__code__", None)
    path = code.co_filename if code is not None else getattr(
        sys.modules.get(module), "__file__", None) or ""
    if not path:
        return module in ("builtins", "numpy") or module.startswith("numpy.")
    return os.path.normcase(os.path.realpath(path)).startswith(_LIBRARY_DIRS)


def _replays_itself(obj):
    """An optimiser or a scheduler: its methods are replayed as calls, which read its state
    afresh; so it is checked by identity, not walked."""
    cls = type(obj)
    return any(getattr(getattr(cls, name, None), "replayed_as_call", False)
               for name in ("step", "zero_grad"))


def _code_names(code):
    """The global names a code object (and the code nested in it) may read."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_code_names(const))
    return names


def _is_module(obj):
    return hasattr(obj, "_parameters") and hasattr(obj, "_modules") and \
        hasattr(obj, "training")


class Guards:
    """The checks of one capture: ``check()`` returns None when everything is as at capture,
    else a line saying what changed. ``source`` is the generated check function,
    ``paths`` names what each check reads."""

    def __init__(self, source, names, paths, reads, tensors=()):
        self.source, self.paths, self._reads = source, paths, reads
        self.tensors = tensors  # the tensors reached (for the state of their .grad)
        exec(compile(source, "<mg.compile guards>", "exec"), names)
        self._fn = names["guards"]
        self.count = len(paths)

    def check(self):
        try:
            k = self._fn()
        except Exception as e:  # (a read that fails: a closure cell emptied, ...)
            return f"a value the step reads could not be checked ({type(e).__name__}: {e})"
        if k < 0:
            return None
        try:
            now = self._reads[k]()
        except Exception:
            now = MISSING
        return f"{self.paths[k][0]} changed ({self.paths[k][1]} at capture, {_show(now)} now)"

    def listing(self):
        return "\n".join(f"{k:5d}  {path}: {expected}" for k, (path, expected)
                         in enumerate(self.paths))


def _show(value):
    if isinstance(value, TensorBase):
        return f"tensor {tuple(value.shape)} at {id(value):#x}"
    if type(value) is str and value in ("yes", "no"):
        return value
    if isinstance(value, _SCALARS) and not isinstance(value, (range, slice)):
        text = repr(value)
        return text if len(text) <= 40 else text[:37] + "..."
    if value is MISSING:
        return "missing"
    if type(value) is tuple and len(value) == 2 and type(value[0]) is tuple:  # (shape, dtype)
        return f"{value[0]} {value[1]}"
    return f"{type(value).__name__} at {id(value):#x}"


class _Writer:
    """Collects the checks and writes the generated function."""

    def __init__(self):
        self.lines, self.names, self.paths, self.reads = [], {"MISSING": MISSING}, [], []
        self.seen = {}  # id -> the path an object was first reached by
        self.tensors = []
        self.budget = BUDGET

    def bind(self, value, prefix="o"):
        name = f"{prefix}{len(self.names)}"
        self.names[name] = value
        return name

    def check(self, condition, path, expected, read, setup=None):
        """One line of the generated function: ``return k`` when ``condition`` holds."""
        k = len(self.paths)
        if setup:
            self.lines.append(f"    {setup}")
        self.lines.append(f"    if {condition}: return {k}")
        self.paths.append((path, expected))
        self.reads.append(read)
        self.budget -= 1

    def source(self):
        return "def guards():\n" + "\n".join(self.lines) + "\n    return -1\n"

    # --- one value, reached by the expression ``expr`` (which ``read`` evaluates) ---------
    def value(self, value, expr, read, path):
        """Check the value at ``expr`` and, the first time an object is met, what is in it."""
        if type(value) in (bool, type(None)) or value is Ellipsis:
            self.check(f"{expr} is not {self.bind(value, 'e')}", path, _show(value), read)
            return
        if isinstance(value, _SCALARS) and not isinstance(value, np.ndarray):
            e = self.bind(value, "e")
            if isinstance(value, float) and math.isnan(value):
                cond = "type(v) is not float or v == v"
            else:
                cond = f"type(v) is not {self.bind(type(value), 't')} or v != {e}"
            self.check(cond, path, _show(value), read, setup=f"v = {expr}")
            return
        self.check(f"{expr} is not {self.bind(value, 'e')}", path, _show(value), read)
        self.inside(value, path)

    def inside(self, obj, path):
        """What an object holds that the step may depend on (walked once per object)."""
        if id(obj) in self.seen or self.budget <= 0:
            return
        self.seen[id(obj)] = path
        self.names[f"keep{len(self.names)}"] = obj  # (ids stay unique while guarded)
        if isinstance(obj, TensorBase):
            self.tensor(obj, path)
        elif isinstance(obj, (list, tuple)):
            self.sequence(obj, path)
        elif type(obj) is dict:
            self.mapping(obj, path, lambda key: f"{path}[{key!r}]")
        elif type(obj) in _XP_BY_TYPE:
            self.array(obj, path)
        elif isinstance(obj, types.FunctionType):
            self.function(obj, path)
        elif isinstance(obj, types.MethodType):
            self.inside(obj.__self__, path.rsplit(".", 1)[0] if "." in path else path)
            self.inside(obj.__func__, path)
        elif isinstance(obj, functools.partial):
            self.inside(obj.func, path)
            self.inside(obj.args, f"{path}'s arguments")
            self.inside(obj.keywords, f"{path}'s keywords")
        elif isinstance(obj, types.ModuleType):
            if not _is_library(obj):
                self.attributes(obj, path, public_only=True)
        elif isinstance(obj, type):
            if not _is_library(obj):
                self.attributes(obj, path, public_only=True)
        elif _replays_itself(obj):
            return
        elif _is_module(obj):
            self.module(obj, path)
        elif isinstance(obj, _NAMESPACES) or dataclasses.is_dataclass(obj) or \
                not _is_library(type(obj)):
            if hasattr(obj, "__dict__"):
                self.attributes(obj, path)
            if not _is_library(type(obj)):
                self.inside(type(obj), type(obj).__qualname__)

    def tensor(self, t, path):
        """A tensor's autograd state (its values are read live, or guarded by the program)."""
        self.tensors.append(t)
        e = self.bind(t)
        self.check(f"{e}._requires_grad is not {t._requires_grad}", f"{path}.requires_grad",
                   str(t._requires_grad), lambda: t._requires_grad)
        has = _hooks(t)
        self.check(f"{self.bind(_hooks, 'f')}({e}) != {has}", f"{path}'s hooks", str(has),
                   lambda: _hooks(t))

    def sequence(self, seq, path):
        n = len(seq)
        s = self.bind(seq)
        if type(seq) is not tuple:
            self.check(f"len({s}) != {n}", f"len({path})", str(n), lambda: len(seq))
        for i, item in enumerate(seq[:1000]):
            self.value(item, f"{s}[{i}]", _item_reader(seq, i), f"{path}[{i}]")

    def mapping(self, d, path, name_of, public_only=False):
        m = self.bind(d, "d")
        self.check(f"len({m}) != {len(d)}", f"the entries of {path}", str(len(d)),
                   lambda: len(d))
        for key, item in list(d.items())[:1000]:
            if public_only and isinstance(key, str) and key.startswith("__"):
                continue
            key_expr = repr(key) if type(key) in (str, int) else self.bind(key, "k")
            self.value(item, f"{m}.get({key_expr}, MISSING)", _get_reader(d, key),
                       name_of(key))

    def attributes(self, obj, path, public_only=False):
        d = getattr(obj, "__dict__", None)
        if d is None:
            return
        if type(d) is not dict:  # a class's mappingproxy: read through it each time
            d = types.MappingProxyType(d)
            self.walk_proxy(obj, d, path, public_only)
            return
        self.mapping(d, path, lambda key: f"{path}.{key}", public_only)

    def walk_proxy(self, cls, proxy, path, public_only):
        """A class of the user's: its methods' globals, its class attributes' values."""
        o = self.bind(cls)
        for key, item in list(proxy.items()):
            if key.startswith("__"):
                continue
            if isinstance(item, (staticmethod, classmethod)):
                item = item.__func__
            elif isinstance(item, property):
                item = item.fget
            if isinstance(item, types.FunctionType):
                self.inside(item, f"{path}.{key}")  # (a method: the globals it reads)
                continue
            self.value(item, f"getattr({o}, {key!r}, MISSING)",
                       lambda key=key: getattr(cls, key, MISSING), f"{path}.{key}")

    def module(self, module, path):
        """An nn.Module: its attributes (``training``, ``p``, ``negative_slope``...), its
        parameters, buffers and submodules by identity, its hooks by count."""
        d = vars(module)
        m = self.bind(d, "d")
        self.check(f"len({m}) != {len(d)}", f"the attributes of {path}", str(len(d)),
                   lambda: len(d))
        for key, item in list(d.items()):
            if key in ("_parameters", "_buffers", "_modules"):
                self.mapping(item, f"{path}.{key[1:]}", lambda k: f"{path}.{k}")
            elif type(item) is dict or type(item).__name__ == "OrderedDict":
                self.mapping(item, f"{path}.{key}", lambda k, key=key: f"{path}.{key}[{k!r}]")
            else:
                self.value(item, f"{m}.get({key!r}, MISSING)", _get_reader(d, key),
                           f"the training mode of {path}" if key == "training" else
                           f"{path}.{key}")
        if not _is_library(type(module)):
            self.inside(type(module), type(module).__qualname__)

    def array(self, a, path):
        e = self.bind(a)
        meta = (a.shape, a.dtype)
        m = self.bind(meta, "e")
        self.check(f"({e}.shape, {e}.dtype) != {m}", f"{path}'s shape and dtype",
                   f"{a.shape} {a.dtype}", lambda: (a.shape, a.dtype))

    def function(self, fn, path):
        """A function of the user's: the globals its code names, its closure, its defaults."""
        if _is_library(fn):
            return
        code, g = fn.__code__, fn.__globals__
        gd = self.bind(g, "g")
        for name in dict.fromkeys(_code_names(code)):
            if name in g:
                self.value(g[name], f"{gd}.get({name!r}, MISSING)", _get_reader(g, name), name)
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                item = cell.cell_contents
            except ValueError:  # (not yet assigned)
                continue
            c = self.bind(cell, "c")
            self.value(item, f"{c}.cell_contents", lambda cell=cell: cell.cell_contents, name)
        for i, item in enumerate(fn.__defaults__ or ()):
            self.inside(item, f"{fn.__qualname__}'s default {i}")
        for key, item in (fn.__kwdefaults__ or {}).items():
            self.inside(item, f"{fn.__qualname__}'s default {key}")


def _item_reader(seq, i):
    return lambda: seq[i] if i < len(seq) else MISSING


def _get_reader(d, key):
    return lambda: d.get(key, MISSING)


def _hooks(t):
    """How many hooks a tensor has: its own, after-accumulation ones, its leaf node's."""
    n = len(t._hooks or ()) + len(t._post_accumulate_hooks or ())
    node = t._accumulator
    if node is not None:
        n += len(node._pre_hooks or ()) + len(node._node_hooks or ())
    return n


def collect(fn, args, kwargs, tensors=(), leaves=(), modules=(), unset_at_start=None):
    """The guards of a capture of ``fn`` called with ``args``/``kwargs``: what it reaches
    (see the module docstring), the tensors its program reads (``tensors``: shape, dtype,
    array type, autograd state) and the leaves whose ``.grad`` it writes: whether it is
    unset must be as when the captured call started (``unset_at_start``: id -> bool, for
    the tensors then reached; the others as they are now)."""
    w = _Writer()
    s = w.bind(STATE, "S")
    w.check(f"{s}.saved_hooks != {w.bind(STATE.saved_hooks, 'e')}",
            "the saved_tensors_hooks blocks open", str(len(STATE.saved_hooks)),
            lambda: len(STATE.saved_hooks))
    w.check(f"{s}.inference is not {STATE.inference}", "inference mode",
            str(STATE.inference), lambda: STATE.inference)
    p = w.bind(PROCESS, "P")
    w.check(f"{p}.anomaly is not {PROCESS.anomaly}", "anomaly mode", str(PROCESS.anomaly),
            lambda: PROCESS.anomaly)
    default = dtypes.get_default_dtype()
    w.check(f"{w.bind(dtypes.get_default_dtype, 'f')}() is not {w.bind(default, 'e')}",
            "the default dtype", str(default), dtypes.get_default_dtype)
    w.inside(fn, "the step")
    for i, a in enumerate(args):
        if not isinstance(a, TensorBase):
            w.inside(a, f"argument {i}")
    for key, a in kwargs.items():
        if not isinstance(a, TensorBase):
            w.inside(a, f"argument {key}")
    for m in modules:  # modules that ran ops in the step but were not reached by name
        w.inside(m, type(m).__name__)
    for t in tensors:  # what the program reads from tensors, at each replay
        path = w.seen.get(id(t)) or f"a tensor the step reads ({tuple(t.shape)} {t.dtype})"
        e = w.bind(t)
        meta = (t.array.shape, t.array.dtype, type(t.array))
        w.check(f"({e}.array.shape, {e}.array.dtype, type({e}.array)) != {w.bind(meta, 'e')}",
                f"{path}.data's shape and dtype", f"{meta[0]} {meta[1]}",
                lambda t=t: (t.array.shape, t.array.dtype))
        if id(t) not in w.seen:
            w.seen[id(t)] = path
            w.tensor(t, path)
    for leaf in leaves:  # the leaves whose .grad backward writes: set or not, as at capture
        path = w.seen.get(id(leaf)) or f"a tensor of shape {tuple(leaf.shape)}"
        e = w.bind(leaf)
        unset = (unset_at_start or {}).get(id(leaf), leaf._grad is None)
        w.check(f"({e}._grad is None) is not {unset}", f"whether {path}.grad is set",
                "no" if unset else "yes", lambda leaf=leaf: "no" if leaf._grad is None else "yes")
    return Guards(w.source(), w.names, w.paths, w.reads, w.tensors)
