"""``mg.linalg``: PyTorch's ``torch.linalg`` norms, singular values and cross product,
built from the Tensor's own differentiable methods (``Tensor.norm`` computes every vector
norm) and one primitive, the SVD (``ops.linalg.LinalgSvd``)."""
from .arguments import _dim
from .ops.linalg import LinalgSvd
from .tensor import Tensor, _cross

__all__ = ["norm", "vector_norm", "matrix_norm", "svdvals", "cross"]

_INF = float("inf")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The ``ord``-norm of ``x`` over ``dim`` (an int, a tuple, or None: every element), as
    ``torch.linalg.vector_norm``: inf and -inf give max and min of |x|, 0 the count of
    nonzeros, any other number (sum |x|^ord)^(1/ord)."""
    _check_tensor("linalg.vector_norm", x)
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    if x.dtype.kind not in "fc":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor "
                           f"as input. Got {x.dtype} (shape {tuple(x.shape)})")
    if isinstance(dim, list):
        dim = tuple(dim)
    return x.norm(ord, dim, keepdim, dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """The ``ord``-norm of the matrices in dims ``dim`` of ``A``: 'fro' (the square root
    of the sum of squares), 'nuc' (the sum of the singular values), 2 and -2 (the largest
    and smallest singular value), 1 and -1 (the largest and smallest column sum of |A|), inf and
    -inf (the largest and smallest row sum), as ``torch.linalg.matrix_norm``."""
    _check_tensor("linalg.matrix_norm", A)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.matrix_norm: The input tensor A must have at least 2 "
                           f"dimensions (shape {tuple(A.shape)})")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
    d0, d1 = (_dim(A, d) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, "
                           f"{dim[1]})")
    x = A if dtype is None else A.to(dtype)
    if x.dtype.kind not in "fc":
        raise RuntimeError(f"linalg.matrix_norm: Expected a floating point or complex tensor "
                           f"as input. Got {x.dtype} (shape {tuple(A.shape)})")
    if ord == "fro":
        return x.norm(2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):  # from the singular values
        s = svdvals(x.movedim((d0, d1), (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        return out.unsqueeze(min(d0, d1)).unsqueeze(max(d0, d1)) if keepdim else out
    if isinstance(ord, str):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    if ord not in (1, -1, _INF, -_INF):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    summed, over = (d0, d1) if ord in (1, -1) else (d1, d0)  # (columns' sums for 1, -1)
    sums = x.abs().sum(summed, keepdim=True)
    out = sums.amax(over, keepdim=True) if ord > 0 else sums.amin(over, keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def svdvals(A, *, driver=None):
    """The singular values of the matrices in the last two dims of ``A``, descending (their
    gradient through the SVD, LinalgSvdBackward0)."""
    _check_tensor("linalg.svdvals", A)
    if A.ndim < 2:
        raise RuntimeError(f"linalg.svdvals: The input tensor A must have at least 2 "
                           f"dimensions (shape {tuple(A.shape)})")
    if A.dtype.kind not in "f":
        raise RuntimeError(f"linalg.svdvals: Expected a floating point tensor as input. Got "
                           f"{A.dtype} (shape {tuple(A.shape)})")
    return LinalgSvd.apply(A)[1]


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """``vector_norm`` or ``matrix_norm``, as ``torch.linalg.norm``: by ``dim`` (an int or
    one dim: a vector norm; two dims: a matrix norm), or without dim by ``A``'s number of
    dims when ``ord`` is given (1-D: vector, 2-D: matrix); with neither, the 2-norm of
    every element."""
    _check_tensor("linalg.norm", A)
    if isinstance(dim, (tuple, list)) and len(dim) == 1:
        dim = dim[0]
    if dim is not None and not isinstance(dim, (tuple, list)):
        if isinstance(ord, str):
            raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim}")
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None:
        if len(dim) != 2:
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or "
                               f"2. Got {list(dim)}")
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1 and not isinstance(ord, str):
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                       f"1D or 2D. Got {A.ndim}D.")


def cross(input, other, *, dim=-1):
    """The cross product along ``dim`` (of size 3), the two broadcast, as
    ``torch.linalg.cross``."""
    _check_tensor("linalg.cross", input)
    _check_tensor("linalg.cross", other)
    return _cross(input, other, dim, "linalg.cross")


def _check_tensor(op, x):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")

