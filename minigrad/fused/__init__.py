"""Fused ops: the layers' hot composites as one primitive each, for speed and memory.

Each module holds a fused op beside the ``composite`` of plain Tensor ops that it must
equal (the tests check them against each other, and against PyTorch):

    linear.py         Linear          x @ W^T + b, rows flattened into one 2-D product
    layer_norm.py     LayerNorm       a few passes; backward reuses the rows' mean and rstd
    gelu.py           Gelu, GeluTanh  one pass each way
    dropout.py        Dropout         keeps its mask as bools
    cross_entropy.py  CrossEntropy    log_softmax, pick, smoothing, weights, reduction
    attention.py      Attention       tiled (FlashAttention): never holds (T, S) scores

One primitive makes fewer passes over memory, keeps fewer arrays alive between forward and
backward and records one graph node instead of five to twenty. Backward is written with
Tensor ops or, where it runs on raw arrays (gelu, attention), differentiates the composite
under ``create_graph`` (``differentiate.py``), so second derivatives are exact.
"""
from .attention import Attention  # noqa: F401
from .cross_entropy import CrossEntropy  # noqa: F401
from .dropout import Dropout  # noqa: F401
from .gelu import Gelu, GeluTanh  # noqa: F401
from .layer_norm import LayerNorm  # noqa: F401
from .linear import Linear  # noqa: F401
