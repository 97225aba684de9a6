"""The engine's primitive ops, one ``Primitive`` class each (see ``autograd.function``),
its derivative rule in its docstring and its ``backward``, its forward-mode rule ``jvp`` and
its batching rule ``vmap`` (see ``autograd.batching``):

    elementwise.py  arithmetic, exp/log/..., comparisons (no gradient), where, casts
    reduce.py       sum, prod, max, median, cumsum, cumprod, logcumsumexp, softmax and
                    log_softmax
    linalg.py       matmul, mm, bmm, dot, mv, svd
    shape.py        reshape, permute, expand, indexing (gather, index_select, sort, topk,
                    median/kthvalue/mode along a dim, cummax/cummin, take), masked_select,
                    scatter, index_add, embedding, cat/split, repeat, tril/triu, flip,
                    roll, unfold
    inplace.py      what an in-place op records: SetItem, Overwrite, CopySlices

Every other differentiable method of Tensor is a few lines of these. The layers' hot
composites, fused into one op each for speed, live in ``minigrad.fused``.
"""
from .elementwise import (Abs, Add, Cast, Ceil, Clamp, ClampTensor, Clone, Cos, Cosh,  # noqa
                          Div, Erf, Exp, Expm1, Floor, FloorDivide, Frac, Log, Log1p, MaskedFill,
                          Maximum, Minimum, Mul, Neg, NonDiff, Pow, Reciprocal, Relu,
                          Remainder, RemainderOfNumber, RemainderScalar, Round,
                          RoundDecimals, RoundedDiv, Rsqrt, Rsub, ScalarPow,
                          Sigmoid, Sign, Sin, Sinh, Sqrt, Sub, Tanh, TensorPow, ToDevice, Trunc,
                          Where)
from .elementwise_more import (Atan2, Erfc, Exp2, Fmax, Fmin, Fmod, FmodScalar,  # noqa: F401
                               Hypot, Log10, Log2, LogAddExp, Sgn, Xlogy, XlogyOfNumber,
                               XlogyScalar)
from .linalg import Bmm, Dot, MatMul, Mm, Mv  # noqa: F401
from .reduce import (Amax, Amin, Cumprod, Cumsum, LogSoftmax, LogSumExp, Max, MaxDim,  # noqa
                     Mean, MeanAll, Min, MinDim, Prod, ProdDim, SafeSoftmax, Softmax, Std, Sum,
                     SumDim, Var)
from .shape import (Alias, Cat, Diagonal, Embedding, EmbeddingDenseBackward, Expand, Flip,  # noqa
                    Gather, GetItem, IndexAdd, IndexAddAlong, IndexSelect, MaskedSelect,
                    MatrixTranspose, NewAxis, Permute, Repeat, Reshape, ReshapeAlias, Roll,
                    ScatterAdd, Select, Slice, Sort, Split, SplitWithSizes, Squeeze,
                    SqueezeDim, SqueezeDimInPlace, SqueezeDims, Stack, Topk, Transpose, Tril,
                    Triu, UnsafeView, Unsqueeze, indexing_op)
from .inplace import (CopySlices, Overwrite, Scatter, ScatterValue, SetItem,  # noqa: F401
                      replay_view)
