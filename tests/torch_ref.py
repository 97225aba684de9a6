"""PyTorch as a reference: ``torch`` is None where it is not installed, and ``needs_torch``
skips a test cleanly then. minigrad itself never imports torch."""
import functools

import numpy as np
import pytest

import minigrad as mg

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


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
