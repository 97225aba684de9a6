"""PyTorch as a reference: ``torch`` is None where it is not installed, and ``needs_torch``
skips a test cleanly then. minigrad itself never imports torch."""
import numpy as np
import pytest

try:
    import torch
except ImportError:  # pragma: no cover - depends on the machine
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def to_torch(t, requires_grad=None):
    """A torch tensor with the values (and by default requires_grad) of minigrad tensor ``t``."""
    rg = t.requires_grad if requires_grad is None else requires_grad
    return torch.tensor(np.array(t.numpy()), requires_grad=rg)
