"""Anomaly mode's checks: the first op whose forward or backward turns finite values into
NaN/inf raises, naming the op and the line of user code that created it; so does the op
whose backward would start from a gradient with NaN values given to ``backward`` (as
PyTorch's check, NaN only: an infinite gradient given on purpose passes)."""
import math
import os
import sys
import traceback

from .. import backend
from .grad_mode import PROCESS
from .graph import AccumulateGrad

_NULL = backend._NULL_CONTEXT


def user_frames():
    """The creation stack, without minigrad's own frames nor the interpreter's (runpy's, for
    ``python -m``): computed only in anomaly mode. The demos are the user's code, wherever
    they are installed."""
    library = package_dirs(("minigrad", "minigrad.nn", "minigrad.models"))
    user = package_dirs(("minigrad.demos",))
    return [f for f in traceback.extract_stack()[:-2]
            if not f.filename.startswith(library) or f.filename.startswith(user)
            if not f.filename.startswith("<frozen ") and not f.filename.endswith("runpy.py")]


_DIRS = {}  # package name -> its folder (with a trailing separator), once it is loaded


def package_dirs(names):
    """The folders of those of minigrad's packages ``names`` that are loaded (nn, models and
    demos install under minigrad but sit beside it in a checkout). They are looked up in
    ``sys.modules``, not imported: the library is built on this layer, and a package that
    is not loaded has no frame on the stack."""
    dirs = []
    for name in names:
        folder = _DIRS.get(name)
        if folder is None:
            module = sys.modules.get(name)
            if module is None:
                continue
            folder = _DIRS[name] = os.path.dirname(os.path.abspath(module.__file__)) + os.sep
        dirs.append(folder)
    return tuple(dirs)


def quiet_numpy():
    """In anomaly mode NumPy's own overflow and invalid-value warnings are silenced: the
    check that follows reports the op by name instead."""
    return backend.np.errstate(all="ignore") if PROCESS.anomaly else _NULL


def _where(trace):
    if not trace:
        return "(no user frame recorded)"
    f = trace[-1]
    return f'File "{f.filename}", line {f.lineno}, in {f.name}: {f.line}'


def _all_finite(a):
    if isinstance(a, float):
        return math.isfinite(a)
    xp = backend._XP_BY_TYPE.get(type(a))
    if xp is None or a.dtype.kind not in "fc":
        return True
    return bool(xp.isfinite(a).all())


def check_forward(node, arrays, outs):
    if not PROCESS.check_nan:
        return
    if not all(_all_finite(a) for a in arrays):
        return  # the NaN/inf came from an input: an earlier op produced it
    for i, o in enumerate(outs):
        if not _all_finite(o):
            raise RuntimeError(
                f"anomaly: {node.name()} produced NaN/inf in its output {i} from finite inputs "
                f"in forward. It was called at {_where(node.trace)}")


def check_backward(node, grads_in, grads_out):
    """Raise when ``node``'s backward made NaN/inf gradients out of finite ones."""
    if not PROCESS.check_nan:
        return
    if not all(g is None or _all_finite(g.array) for g in grads_in):
        return
    for i, g in enumerate(grads_out):
        if g is not None and not _all_finite(g.array):
            raise RuntimeError(
                f"anomaly: the backward of {node.name()} produced NaN/inf in the gradient of "
                f"its input {i} from finite gradients. The op was created at "
                f"{_where(node.trace)}")


def check_seed(edges, grads):
    """Raise when a gradient given to backward has NaN values, naming the op it goes to
    (``edges``: ``graph.edge_to`` of each root). One that goes straight into a leaf's
    ``.grad`` runs no backward, and is not checked, as in PyTorch."""
    if not PROCESS.check_nan:
        return
    for (node, index), g in zip(edges, grads):
        if type(node) is AccumulateGrad or not _has_nan(g.array):
            continue
        raise RuntimeError(
            f"anomaly: the gradient given to backward for output {index} of {node.name()} has "
            f"NaN values, so its backward would return NaN. The op was created at "
            f"{_where(node.trace)}")


def _has_nan(a):
    xp = backend._XP_BY_TYPE.get(type(a))
    if xp is None or a.dtype.kind not in "fc":
        return False
    return bool(xp.isnan(a).any())
