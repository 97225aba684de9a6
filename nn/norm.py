"""LayerNorm."""
import minigrad as mg

from . import functional as F
from .module import Module
from .parameter import Parameter


class LayerNorm(Module):
    """Normalise over the last dims: (x - mean) / sqrt(var + eps) * weight + bias, with the
    biased variance (Ba et al., 2016; PyTorch's formula).

    Args:
        normalized_shape: the trailing shape to normalise over (an int or a tuple).
        eps: added to the variance inside the square root (default 1e-5).
        elementwise_affine: learn ``weight`` (ones) and ``bias`` (zeros) (default True).
    Shape:
        input (*, *normalized_shape) -> output of the same shape
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        self.weight = self.bias = None
        if elementwise_affine:
            self.weight = Parameter(mg.ones(*self.normalized_shape, device=device, dtype=dtype))
            if bias:
                self.bias = Parameter(mg.zeros(*self.normalized_shape, device=device,
                                               dtype=dtype))

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")
