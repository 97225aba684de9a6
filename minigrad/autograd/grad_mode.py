"""Grad mode (``no_grad``, ``enable_grad``, ``set_grad_enabled``) and anomaly mode.

Grad mode is per thread, as in PyTorch: a ``no_grad`` block in one thread leaves recording
on in every other (anomaly mode is one switch for the process, as PyTorch's). The modes
work as context managers and as decorators, also of generator functions (the mode holds
inside the generator, not between its ``yield``s).
"""
import functools
import inspect
import threading


class _State(threading.local):
    """The modes of the calling thread (a new thread starts with grad mode on)."""
    grad_enabled = True
    scope = None  # the innermost nn.Module running forward (recorded on each node)
    saved_hooks = ()  # (pack_hook, unpack_hook) pairs of saved_tensors_hooks, innermost last
    inference = False  # inside inference_mode()
    recomputing = False  # backward is running a checkpointed function again
    # the running backward pass returns the gradients of given tensors (mg.grad, or
    # backward(inputs=...)) rather than accumulating into every leaf's .grad
    to_targets = False


class _Process:
    """Switches for the whole process: anomaly mode (one switch, as in PyTorch), and
    whatever else must see every op (``watchers``: a profiler, forward-mode AD).

    ``watched`` is true while any of them is on: ``Function.apply`` then takes its general
    path, so the fast path pays for all of them with one check. It is kept up to date on
    every change of the other two. ``packing`` counts the ``saved_tensors_hooks`` blocks
    open on any thread (each thread's own hooks are ``STATE.saved_hooks``), so that saving
    for backward checks one plain attribute while there are none.
    """
    __slots__ = ("anomaly", "check_nan", "watchers", "watched", "packing")

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)
        if name != "watched":
            object.__setattr__(self, "watched", bool(self.anomaly or self.watchers))


STATE = _State()
PROCESS = _Process()
object.__setattr__(PROCESS, "watchers", ())
object.__setattr__(PROCESS, "check_nan", True)  # anomaly mode's NaN/inf checks (check_nan=)
object.__setattr__(PROCESS, "packing", 0)
PROCESS.anomaly = False


def is_grad_enabled():
    return STATE.grad_enabled


def is_inference_mode_enabled():
    return STATE.inference


def is_anomaly_enabled():
    return PROCESS.anomaly


def is_anomaly_check_nan_enabled():
    """Whether anomaly mode, when on, raises on NaN/inf (``detect_anomaly(check_nan=)``)."""
    return PROCESS.check_nan


class _Mode:
    """Sets one flag of STATE for a ``with`` block or a decorated function, then restores
    it. Usable as ``@no_grad()`` and as bare ``@no_grad``."""
    _flag = None
    _value = None
    _modes = STATE  # where the flag lives

    def __new__(cls, fn=None, *args, **kwargs):
        if callable(fn) and cls is not set_grad_enabled:  # bare @no_grad, @inference_mode
            return cls()(fn)
        return super().__new__(cls)

    def __enter__(self):
        self._prev = getattr(self._modes, self._flag)
        setattr(self._modes, self._flag, self._value)
        return self

    def __exit__(self, *exc):
        setattr(self._modes, self._flag, self._prev)
        return False

    def _clone(self):
        return type(self)()

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def generator(*args, **kwargs):
                gen = fn(*args, **kwargs)
                with self._clone():  # each step of the generator runs under the mode
                    try:
                        request = gen.send(None)
                    except StopIteration as stop:
                        return stop.value
                while True:
                    try:
                        response = yield request
                    except GeneratorExit:
                        with self._clone():
                            gen.close()
                        raise
                    except BaseException as exc:
                        with self._clone():
                            try:
                                request = gen.throw(exc)
                            except StopIteration as stop:
                                return stop.value
                        continue
                    with self._clone():
                        try:
                            request = gen.send(response)
                        except StopIteration as stop:
                            return stop.value
            return generator

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self._clone():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_Mode):
    """Context manager and decorator: ops inside record no graph."""
    _flag, _value = "grad_enabled", False


class enable_grad(_Mode):
    """Context manager and decorator: ops inside record the graph, even within ``no_grad``."""
    _flag, _value = "grad_enabled", True


class set_grad_enabled(_Mode):
    """``set_grad_enabled(mode)`` sets grad mode at once; as a context manager (or a
    decorator) it restores the previous mode afterwards, as PyTorch's does."""
    _flag = "grad_enabled"

    def __init__(self, mode):
        self._value = bool(mode)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self._value

    def __enter__(self):
        return self

    def _clone(self):
        return enable_grad() if self._value else no_grad()

    def __call__(self, fn):
        STATE.grad_enabled = self._prev  # decorating must not change the mode now
        return super().__call__(fn)


class detect_anomaly(_Mode):
    """Raise on the first op whose forward or backward turns finite inputs into NaN/inf.

    While active every op records where the user's code created it, so the error can say
    which operation produced the first NaN/inf and where. It slows every op down: use it to
    debug, not to train. With ``check_nan=False`` the ops still record where they were
    created, but nothing is checked, as PyTorch's.
    """
    _flag, _value, _modes = "anomaly", True, PROCESS

    def __init__(self, check_nan=True):
        self.check_nan = bool(check_nan)

    def __enter__(self):
        self._prev_check_nan = PROCESS.check_nan
        PROCESS.check_nan = self.check_nan
        return super().__enter__()

    def __exit__(self, *exc):
        PROCESS.check_nan = self._prev_check_nan
        return super().__exit__(*exc)

    def _clone(self):
        return type(self)(self.check_nan)


class set_detect_anomaly(detect_anomaly):
    """``set_detect_anomaly(mode, check_nan=True)`` turns anomaly mode on or off at once; as
    a context manager (or a decorator) it restores the previous mode afterwards, as
    PyTorch's does."""

    def __init__(self, mode, check_nan=True):
        self._value, self.check_nan = bool(mode), bool(check_nan)
        self._prev, self._prev_check_nan = PROCESS.anomaly, PROCESS.check_nan
        PROCESS.check_nan, PROCESS.anomaly = self.check_nan, self._value

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        PROCESS.check_nan, PROCESS.anomaly = self._prev_check_nan, self._prev
        return False

    def _clone(self):
        return detect_anomaly(self.check_nan) if self._value else _no_anomaly()

    def __call__(self, fn):
        PROCESS.check_nan, PROCESS.anomaly = self._prev_check_nan, self._prev  # (not now)
        return super().__call__(fn)


class _no_anomaly(_Mode):
    _flag, _value, _modes = "anomaly", False, PROCESS


class inference_mode(_Mode):
    """PyTorch's ``inference_mode(mode=True)``, as a context manager or decorator: with
    mode True, ``no_grad`` (and ``is_inference_mode_enabled()`` is True); with mode False,
    grad mode on, as PyTorch's. Tensors made inside are ordinary tensors: minigrad has no
    separate inference tensors, whose later use in autograd PyTorch refuses."""

    def __init__(self, mode=True):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = STATE.grad_enabled, STATE.inference
        STATE.grad_enabled, STATE.inference = not self.mode, self.mode
        return self

    def __exit__(self, *exc):
        STATE.grad_enabled, STATE.inference = self._prev
        return False

    def _clone(self):
        return type(self)(self.mode)
