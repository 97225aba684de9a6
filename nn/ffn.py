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
        activation: "relu" or "gelu".
    Shape:
        input (*, d_model) -> output (*, d_model)
    """

    def __init__(self, d_model, dim_feedforward, dropout=0.0, activation="relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"FeedForward: activation must be 'relu' or 'gelu', "
                             f"got {activation!r}")
        self.linear1 = Linear(d_model, dim_feedforward)
        self.activation = ReLU() if activation == "relu" else GELU()
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model)

    def forward(self, x):
        return self.linear2(self.dropout(self.activation(self.linear1(x))))
