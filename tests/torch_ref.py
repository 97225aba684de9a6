"""PyTorch as a reference: ``torch`` is None where it is not installed, and ``needs_torch``
skips a test cleanly then (``needs_torch_at_least`` where an older torch behaves otherwise).
minigrad itself never imports torch."""
import functools
import re

import numpy as np
import pytest

import minigrad as mg

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


class MinigradOn:
    """minigrad as a namespace whose tensor makers (``tensor``, ``zeros``, ``arange``, ...)
    put their tensors on ``device``: programs written once against ``M`` (minigrad or torch)
    run minigrad on the tested device while torch stays the CPU reference."""

    MAKERS = frozenset("tensor zeros ones empty full arange linspace eye rand randn "
                       "randint".split())

    def __init__(self, device):
        self.device = device

    def __getattr__(self, name):
        value = getattr(mg, name)
        return functools.partial(value, device=self.device) if name in self.MAKERS else value

    def __repr__(self):
        return f"minigrad on {self.device}"
