"""Array-level kernels shared by the ops, where NumPy and CuPy differ.

Scatter-add and the error function call each library's own routine; gelu, its gradient and
dropout are fused CUDA kernels on the GPU with the same formula in NumPy on the CPU; and
``run_split`` shares splittable CPU work among the cores.
"""
import numpy as np

from .devices import cupy


def scatter_add(target, index, values):
    """``target[index] += values`` with repeated indices accumulated (unbuffered), in place."""
    if type(target) is np.ndarray:
        np.add.at(target, index, values)
    else:
        import cupyx
        cupyx.scatter_add(target, index, values)
    return target


def check_index_bounds(index, size, dim):
    """Raise IndexError when an integer index array holds a value outside [-size, size).

    NumPy's indexing checks this itself (a no-op here); CuPy's wraps such indices around
    silently, so on the GPU the bounds are read back (one synchronisation)."""
    if type(index) is np.ndarray or index.size == 0:
        return
    low, high = int(index.min()), int(index.max())
    if low < -size or high >= size:
        bad = low if low < -size else high
        raise IndexError(f"index {bad} is out of bounds for dimension {dim} with size {size}")


def erf(array):
    """The error function, elementwise (SciPy on the CPU, cupyx.scipy on the GPU)."""
    if isinstance(array, (np.ndarray, np.generic)):  # 0-d arithmetic gives NumPy scalars
        from scipy.special import erf as _erf
    else:
        from cupyx.scipy.special import erf as _erf
    return _erf(array)


# --- fused elementwise kernels: one pass on the GPU, the same formula in NumPy -------------
#
# On CuPy each is one cupy.ElementwiseKernel (compiled once, on first use); on NumPy the same
# arithmetic runs as a few in-place passes. The NumPy side is what the tests check on every
# machine; the CUDA source is the same formula in C.

_SQRT_HALF, _INV_SQRT_2PI = 0.7071067811865476, 0.3989422804014327
_KERNELS = {  # name: (inputs, output, CUDA body)
    "gelu": ("T x", "T y", "y = x * (T)0.5 * ((T)1 + erf(x * (T)0.7071067811865476))"),
    "gelu_backward": ("T g, T x", "T dx",
                      "T cdf = (T)0.5 * ((T)1 + erf(x * (T)0.7071067811865476));"
                      "T pdf = exp((T)-0.5 * x * x) * (T)0.3989422804014327;"
                      "dx = g * (cdf + x * pdf)"),
    "dropout": ("T x, bool keep, T scale", "T y", "y = keep ? x * scale : (T)0"),
}
_compiled = {}


def _kernel(name):
    if name not in _compiled:
        inputs, output, body = _KERNELS[name]
        _compiled[name] = cupy().ElementwiseKernel(inputs, output, body, f"minigrad_{name}")
    return _compiled[name]


def _on_host(*arrays):
    return all(isinstance(a, (np.ndarray, np.generic)) for a in arrays)


def gelu(x):
    """x * Phi(x), Phi the standard normal CDF (exact, by erf)."""
    if not _on_host(x):
        return _kernel("gelu")(x)
    out = erf(x * _SQRT_HALF)
    out += 1.0
    out *= x
    out *= 0.5
    return out


def gelu_backward(grad, x):
    """grad * (Phi(x) + x * phi(x)), the derivative of gelu times grad."""
    if not _on_host(grad, x):
        return _kernel("gelu_backward")(grad, x)
    pdf = np.exp(-0.5 * x * x)
    pdf *= x * _INV_SQRT_2PI                                                 # x * phi(x)
    cdf = erf(x * _SQRT_HALF)
    cdf += 1.0
    cdf *= 0.5
    cdf += pdf
    cdf *= grad
    return cdf


def dropout(x, keep, scale):
    """x * scale where ``keep`` (bool), else 0."""
    if not _on_host(x, keep):
        return _kernel("dropout")(x, keep, x.dtype.type(scale))
    out = x * keep
    out *= scale
    return out


# --- the CPU's cores for work that splits into independent pieces ------------------------

_threadpools = None


def run_split(fn, n, xp):
    """fn(i0, i1) over contiguous ranges that cover 0..n. On NumPy there are as many ranges
    as BLAS has threads, run in threads of their own with every product single-threaded:
    NumPy releases the GIL in products and ufuncs, so the elementwise work, which would
    otherwise keep one core busy while the others wait, is shared by the cores too. On CuPy
    one range (the GPU is parallel already)."""
    global _threadpools
    workers = 1
    if xp is np and n > 1:
        from threadpoolctl import ThreadpoolController
        _threadpools = _threadpools or ThreadpoolController()
        blas = _threadpools.select(user_api="blas")
        workers = min(n, max([i["num_threads"] for i in blas.info()] or [1]))
    if workers < 2:
        fn(0, n)
        return
    from concurrent.futures import ThreadPoolExecutor
    bounds = [n * w // workers for w in range(workers + 1)]
    with blas.limit(limits=1), ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(fn, bounds[:-1], bounds[1:]):  # re-raises a worker's exception
            pass
