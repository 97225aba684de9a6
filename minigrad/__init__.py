"""minigrad: n-d tensors with reverse-mode autograd on NumPy (CPU) and CuPy (GPU).

The public API mirrors PyTorch's names and semantics (see README.md).
"""
import os
import sys
import warnings

# NumPy's OpenBLAS keeps its idle threads spinning for about a tenth of a second after each
# multi-threaded product, on the cores that minigrad's own threads (backend.run_split) and
# the next ops need. A spin of 2^20 cycles (about 0.4 ms) still joins products that
# follow one another; set here, before NumPy loads OpenBLAS, where NumPy is not
# imported yet and the environment sets nothing else (see backend/host.py).
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")

from . import autograd, backend, dtypes  # noqa: F401
from .autograd import (detect_anomaly, enable_grad, grad, inference_mode,  # noqa: F401
                       is_anomaly_check_nan_enabled, is_anomaly_enabled, is_grad_enabled,
                       is_inference_mode_enabled, no_grad, set_grad_enabled)
from .backend import (Device, DeviceError, cuda_is_available, get_num_threads,  # noqa: F401
                      get_rng_state, set_num_threads, set_rng_state)

device = Device  # torch.device("cuda" if torch.cuda.is_available() else "cpu")
from .autograd.function import ShapeError  # noqa: F401
from .creation import (arange, as_tensor, asarray, empty, empty_like, eye, from_numpy,  # noqa
                       full, full_like, linspace, logspace, normal, ones, ones_like, rand,
                       rand_like, randint, randint_like, randn, randn_like, randperm,
                       scalar_tensor, tensor, zeros, zeros_like)
from .creation import (BoolTensor, ByteTensor, CharTensor, DoubleTensor, FloatTensor,  # noqa
                       HalfTensor, IntTensor, LongTensor, ShortTensor, tril_indices,
                       triu_indices)
from .random import Generator, default_generator, initial_seed, manual_seed, seed  # noqa: F401
from .dtypes import (bool, cdouble, cfloat, complex64, complex128, double, float,  # noqa
                     float16, float32, float64, get_default_dtype, half, int, int8, int16,
                     int32, int64, long, set_default_dtype, short, uint8, uint16, uint32,
                     uint64)
from .dtypes import can_cast, finfo, iinfo, is_complex, promote_types, result_type  # noqa
from .dtypes import (Size, channels_last, channels_last_3d, contiguous_format,  # noqa: F401
                     memory_format, preserve_format)
from .tensor import Tensor, ValuesIndices  # noqa: F401
from .printing import set_printoptions  # noqa: F401
from .combine import (atleast_1d, atleast_2d, atleast_3d, cat, column_stack, concat,  # noqa
                      concatenate, dstack, hstack, row_stack, stack, vstack, where)
from .combine import broadcast_tensors, einsum, meshgrid  # noqa: F401
from .combine import bucketize, cdist, searchsorted, tensordot, xlogy  # noqa: F401
from . import linalg  # noqa: F401  (mg.linalg: norms and cross, as torch.linalg)
from . import optim  # noqa: F401  (after Tensor: optimisers update tensors)
from . import viz  # noqa: F401
from . import profiler  # noqa: F401  (mg.profiler.profile)

__version__ = "0.1.0"

# NumPy's floating-point warnings from inside minigrad's own ops stay silent, as PyTorch's
# are: the results are IEEE's inf and NaN, and mg.detect_anomaly() says where they appear.
warnings.filterwarnings("ignore", r"(overflow|divide by zero|invalid value|underflow) "
                        r"encountered", RuntimeWarning, r"minigrad\.")

# mg.exp(x), mg.sum(x, dim), ... are the Tensor methods of the same name (the tensor may be
# given as input=, as in PyTorch).
_FUNCTIONS = """add sub mul div pow matmul neg exp log sqrt abs tanh sigmoid relu gelu sin cos
    erf sign square rsqrt reciprocal clamp clip maximum minimum sum mean max min amax amin var std
    logsumexp softmax log_softmax argmax argmin reshape transpose permute unsqueeze squeeze
    flatten expand chunk masked_fill isnan isinf isfinite logical_and logical_or
    logical_not clone detach all any norm tril triu mm bmm gather index_select unbind isclose
    allclose equal flip roll cumsum sort argsort topk multinomial nonzero prod cumprod
    masked_select tile repeat_interleave scatter scatter_add index_add index_fill logical_xor
    swapaxes swapdims movedim moveaxis narrow unflatten numel eq ne lt gt le ge t addmm baddbmm
    outer dot mv clamp_min clamp_max broadcast_to is_floating_point absolute negative multiply
    divide subtract true_divide addcmul addcdiv lerp select diagonal trace count_nonzero
    take_along_dim diag nan_to_num aminmax std_mean var_mean diff bernoulli is_nonzero remainder
    floor_divide log1p expm1 floor ceil trunc fix round frac sinh cosh log10 log2 exp2 erfc sgn
    signbit unique bincount argwhere tensor_split hsplit vsplit rot90
    median nanmedian kthvalue mode msort nansum nanmean cummax cummin logcumsumexp
    ger inner vdot addmv dist kron diag_embed cross
    dsplit fliplr flipud take index_copy masked_scatter""".split()
from .combine import _function_of, split  # noqa: E402,F401
for _name in _FUNCTIONS:
    globals()[_name] = _function_of(_name)
del _name
# ... except those that take a number first, as in PyTorch: mg.add(2, x) is 2 + x, and
# mg.add(2, 3) a tensor (so is mg.pow(2, x), but mg.pow(2, 3) is a TypeError)
from .combine import _number_first  # noqa: E402
add, sub, mul, div, pow = (_number_first(_n) for _n in  # noqa: A001
                           ("add", "sub", "mul", "div", "pow"))
# ... and those whose input must be a tensor, as in PyTorch (mg.atan2(2.0, x): a TypeError)
from .combine import _tensor_first  # noqa: E402
atan2, arctan2, hypot, logaddexp, fmax, fmin, fmod = (_tensor_first(_n) for _n in (
    "atan2", "arctan2", "hypot", "logaddexp", "fmax", "fmin", "fmod"))


def is_tensor(obj):
    return isinstance(obj, Tensor)


# minigrad.nn, minigrad.models and minigrad.demos are the folders nn/, models/ and demos/
# at the top of the repository. Installed, they sit inside this package (setup.cfg maps
# them); run from a checkout, the checkout's own folders are found here first, so a clone
# works without installing and never mixes with another copy's.
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_CHECKOUT, "setup.cfg")) and \
        os.path.isfile(os.path.join(_CHECKOUT, "nn", "__init__.py")):
    __path__.append(_CHECKOUT)

# The layers last: they are built from everything above (mg.nn, as torch.nn after torch).
from . import nn  # noqa: E402,F401
from . import func  # noqa: E402,F401  (function transforms: mg.func.jacfwd, ...)
# mg.autograd.functional (jacobian, hessian, ...) is built from whole tensors, as func is:
# the autograd package, below the tensor, leaves it out, and it loads here
from .autograd import functional as _autograd_functional  # noqa: E402,F401
from .func import vmap  # noqa: E402,F401  (torch.vmap is torch.func.vmap)
from .compile import compile  # noqa: E402,F401,A001  (mg.compile: capture and replay a step)
from . import cuda  # noqa: E402,F401  (mg.cuda: torch.cuda's queries through CuPy)
from . import utils  # noqa: E402,F401  (mg.utils.data: datasets and loaders)
from .serialization import load, save  # noqa: E402,F401  (torch.save/torch.load)
