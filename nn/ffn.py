"""The position-wise feed-forward block of a transformer."""
from .activation import GELU, Dropout, ReLU
from .linear import Linear
from .module import Module


class FeedForward(Module):
    """linear2(dropout(activation(linear1(x)))), applied at every position (Vaswani et al.,
    2017, section 3.3).

    Args:
        d_model: input and output size.
        dim_feedforward: the hidden size.
        dropout: dropout after the activation (default 0.0).
        activation: "relu" or "gelu" (an nn.ReLU or nn.GELU submodule), or a callable, as
            PyTorch's transformer layers take: a function (``F.gelu``) is kept as a plain
            attribute, a Module (``nn.GELU("tanh")``) is registered as the submodule
            ``activation``.
        bias: learn the biases of both linear layers (default True).
    Shape:
        input (*, d_model) -> output (*, d_model)
    """

    def __init__(self, d_model, dim_feedforward, dropout=0.0, activation="relu", bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(activation, str):
            if activation not in ("relu", "gelu"):
                raise ValueError(f"FeedForward: activation must be 'relu', 'gelu' or a "
                                 f"callable, got {activation!r}")
            activation = ReLU() if activation == "relu" else GELU()
        self.linear1 = Linear(d_model, dim_feedforward, bias, device=device, dtype=dtype)
        self.activation = activation
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, device=device, dtype=dtype)

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
