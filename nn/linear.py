"""Linear and Embedding: the two layers that are a weight matrix."""
import math

import minigrad as mg

from . import functional as F
from . import init
from .module import Module, Parameter


class Linear(Module):
    """y = x @ W^T + b.

    Args:
        in_features, out_features: sizes of each input and output sample.
        bias: learn an additive bias (default True).
    Shape:
        input (*, in_features) -> output (*, out_features); ``weight`` is
        (out_features, in_features), initialised U(-1/sqrt(in), 1/sqrt(in)) as PyTorch's.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(mg.empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = (Parameter(mg.empty(out_features, device=device, dtype=dtype))
                     if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight.numel() > 0:  # (an empty weight has nothing to draw, nor a fan-in)
            init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # = U(-1/sqrt(in), 1/sqrt(in))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Embedding(Module):
    """A lookup table: row i of ``weight`` is the vector of token i.

    Args:
        num_embeddings, embedding_dim: table size; ``weight`` is N(0, 1) initialised.
        padding_idx: this row starts at zero and never receives a gradient (negative:
            counted from the end; it must lie in [-num_embeddings, num_embeddings)).
    Shape:
        input (*) int64 or int32 ids in [0, num_embeddings) -> output (*, embedding_dim)
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        padding_idx = F.padding_index("Embedding", padding_idx, num_embeddings)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.weight = Parameter(mg.empty(num_embeddings, embedding_dim, device=device,
                                         dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with mg.no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


class Identity(Module):
    """Returns its input unchanged (a placeholder, as torch.nn.Identity)."""

    def forward(self, x):
        return x
