"""The engine's primitive ops, one ``Primitive`` class each (see ``autograd.function``)."""
from .elementwise import (Abs, Add, Cast, Clamp, Cos, Div, Erf, Exp, Log, Maximum,  # noqa: F401
                          Minimum, Mul, Neg, NonDiff, Pow, Relu, Sigmoid, SigmoidBackward,
                          Sin, Sqrt, StdSqrt, Sub, Tanh, TanhBackward, ToDevice, Where)
from .fused import (CrossEntropy, Dropout, Gelu, GeluBackward, GeluTanh,  # noqa: F401
                    GeluTanhBackward, LayerNorm)
from .linalg import Linear, MatMul  # noqa: F401
from .reduce import (Amax, Amin, LogSoftmax, LogSumExp, MaxDim, MinDim, SafeSoftmax,  # noqa
                     Softmax, Sum)
from .shape import (Cat, CopySlices, Expand, GetItem, IndexAdd, Overwrite, Permute,  # noqa: F401
                    Reshape,
                    SetItem, Split, replay_view)
