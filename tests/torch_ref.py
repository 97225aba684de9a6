"""PyTorch as a reference: ``torch`` is None where it is not installed, and ``needs_torch``
skips a test cleanly then (``needs_torch_at_least`` where an older torch behaves otherwise).
minigrad itself never imports torch."""
import functools
import inspect
import re

import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
# (major, minor) of the installed torch; (0, 0) without one
TORCH_VERSION = (0, 0) if torch is None else tuple(
    int(n) for n in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())


def torch_older_than(version):
    """True where torch is missing or older than ``version``, a (major, minor) pair."""
    return TORCH_VERSION < version


def older_torch_reason(version, behaviour):
    """Why a test is skipped: it needs ``behaviour``, which PyTorch has from ``version``."""
    found = "not installed" if torch is None else torch.__version__
    return (f"needs PyTorch {version[0]}.{version[1]} or newer, where {behaviour}; "
            f"PyTorch here: {found}")


def needs_torch_at_least(version, behaviour):
    """Skips a test whose PyTorch reference ``behaviour`` is that of ``version`` or newer."""
    return pytest.mark.skipif(torch_older_than(version),
                              reason=older_torch_reason(version, behaviour))


def to_torch(t, requires_grad=None):
    """A torch tensor with the values (and by default requires_grad) of minigrad tensor ``t``."""
    rg = t.requires_grad if requires_grad is None else requires_grad
    return torch.tensor(np.array(t.numpy()), requires_grad=rg)


class On:
    """``mod`` (minigrad or torch) whose tensor makers (``tensor``, ``zeros``, ``arange``, ...)
    and layers (``nn.Linear``, ``nn.LayerNorm``, ... : those that take ``device``) default
    to ``device``: a program written once against ``M`` runs minigrad as ``On(mg, device)``
    on the tested device while torch stays the CPU reference."""

    CREATORS = frozenset("tensor zeros ones empty full arange linspace eye rand randn "
                         "randint randperm".split())

    def __init__(self, mod, device):
        self.mod, self.device = mod, device

    def __getattr__(self, name):
        fn = getattr(self.mod, name)
        if name == "nn" and self.device != "cpu":
            return _LayersOn(fn, self.device)
        return functools.partial(fn, device=self.device) if name in self.CREATORS else fn


class _LayersOn:
    """``nn`` whose layers that take ``device`` make their parameters on ``device`` unless
    told otherwise (a subclass of each with that default, so ``isinstance`` and subclassing
    work as with the layer itself)."""

    def __init__(self, nn, device):
        self._nn, self._device = nn, device

    def __getattr__(self, name):
        value = getattr(self._nn, name)
        if isinstance(value, type) and issubclass(value, self._nn.Module) and \
                "device" in inspect.signature(value.__init__).parameters:
            return _layer_on(value, self._device)
        return value


@functools.lru_cache(maxsize=None)
def _layer_on(cls, device):
    signature = inspect.signature(cls.__init__)

    def __init__(self, *args, **kwargs):
        if "device" not in signature.bind_partial(self, *args, **kwargs).arguments:
            kwargs["device"] = device
        cls.__init__(self, *args, **kwargs)
    return type(cls.__name__, (cls,), {"__init__": __init__, "__qualname__": cls.__qualname__,
                                       "__module__": cls.__module__})

    def __repr__(self):
        return f"{self.mod.__name__} on {self.device}"


def raises_as_torch(program, kind, device):
    """Run ``program(M)`` with torch, then with minigrad on ``device``: both must raise
    ``kind``, minigrad in one short line. Returns minigrad's message."""
    import minigrad as mg
    with pytest.raises(kind):
        program(torch)
    with pytest.raises(kind) as info:
        program(On(mg, device))
        mg.backend.raise_pending()  # (on a GPU an error of values comes at the next read)
    message = str(info.value)
    assert "\n" not in message and len(message) < 300, message
    return message
