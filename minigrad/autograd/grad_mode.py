"""Grad mode (``no_grad``, ``enable_grad``) and anomaly mode (``detect_anomaly``)."""
import functools


class _State:
    __slots__ = ("grad_enabled", "anomaly", "scope")

    def __init__(self):
        self.grad_enabled = True
        self.anomaly = False
        self.scope = None  # the innermost nn.Module running forward (recorded on each node)


STATE = _State()


def is_grad_enabled():
    return STATE.grad_enabled


def is_anomaly_enabled():
    return STATE.anomaly


class _Mode:
    """Sets one flag of STATE for a ``with`` block or a decorated function, then restores it."""
    _flag = None
    _value = None

    def __enter__(self):
        self._prev = getattr(STATE, self._flag)
        setattr(STATE, self._flag, self._value)
        return self

    def __exit__(self, *exc):
        setattr(STATE, self._flag, self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
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

    def __call__(self, fn):
        STATE.grad_enabled = self._prev  # decorating must not change the mode now

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(self._value):
                return fn(*args, **kwargs)
        return wrapper


class detect_anomaly(_Mode):
    """Raise on the first op whose forward or backward turns finite inputs into NaN/inf.

    While active every op records where the user's code created it, so the error can say
    which operation produced the first NaN/inf and where. It slows every op down: use it to
    debug, not to train.
    """
    _flag, _value = "anomaly", True
