"""nn: layers, losses and functional ops built on minigrad Tensors, with PyTorch's names."""
from . import functional, init, utils  # noqa: F401
from .activation import (CELU, ELU, GELU, GLU, SELU, CosineSimilarity, Dropout,  # noqa
                         Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid,
                         LogSoftmax, Mish, PReLU, ReLU, ReLU6, Sigmoid, SiLU, Softmax, Softmin,
                         Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold)
from .attention import KVCache, MultiheadAttention  # noqa: F401
from .ffn import FeedForward  # noqa: F401
from .hyper import HyperConnection  # noqa: F401
from .linear import Embedding, Flatten, Identity, LazyLinear, Linear, Unflatten  # noqa: F401
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss,  # noqa: F401
                   CrossEntropyLoss, GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss, KLDivLoss,
                   L1Loss, MarginRankingLoss, MSELoss, MultiLabelSoftMarginLoss, MultiMarginLoss,
                   NLLLoss, PoissonNLLLoss, SmoothL1Loss, SoftMarginLoss, TripletMarginLoss)
from .container import (ModuleDict, ModuleList, ParameterDict, ParameterList,  # noqa: F401
                        Sequential)
from .module import IncompatibleKeys, Module, RemovableHandle  # noqa: F401
from .parameter import Buffer, Parameter  # noqa: F401
from .norm import LayerNorm  # noqa: F401
from .recurrent import (GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell,  # noqa: F401
                        RNNCellBase)
from .positional import (ALiBi, LearnedPositionalEmbedding, RelativePositionBias,  # noqa
                         RotaryEmbedding, SinusoidalPositionalEncoding)
from .functional import ArgumentError, DTypeError  # noqa: F401
from .serialization import MissingDirectoryError, PathIsDirectoryError, load, save  # noqa: F401
from .transformer import (DecoderCache, Transformer, TransformerDecoder,  # noqa: F401
                          TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer)
