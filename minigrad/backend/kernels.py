"""Array-level kernels shared by the ops, where NumPy and CuPy differ.

Scatter-add (an embedding's gradient) sums repeats in order on both devices (NumPy's
``add.at``, a sort and a kernel on the GPU), so the bits agree; the error function calls
each library's own routine; gelu, its gradient and dropout are fused CUDA kernels on the GPU
with the same formula in NumPy on the CPU; row and leading-dim sums go through BLAS on the CPU
(``row_sum``, ``lead_sum``); and ``run_split`` shares splittable CPU work among the cores.
A device array module without CUDA kernels (no ``ElementwiseKernel``/``RawModule``, such as
the tests' strict stand-in for CuPy) runs the same formulas through its own functions.
"""
import math
import queue
import threading

import numpy as np

from . import checks, host_loops, threads
from .devices import cupy, xp_of


def scatter_add(target, index, values):
    """``target[index] += values`` with repeated indices accumulated (unbuffered), in place.

    Repeats are summed one after the other in the order they come, as NumPy's ``add.at``
    sums them, on every device: the same bits on the CPU and the GPU, and from run to run
    (CuPy's own ``add.at`` adds atomically, in whatever order the threads arrive)."""
    rows = index[0] if type(index) is tuple and len(index) == 1 else index
    if type(target) is np.ndarray and type(rows) is np.ndarray and rows.dtype.kind in "iu" \
            and target.ndim > 1 and values.shape == rows.shape + target.shape[1:] and (
                host_loops.add_rows(target, rows, values) or
                math.prod(target.shape[1:]) >= 32 and _add_rows(target, rows, values)):
        return target
    xp = xp_of(target)
    if _has_kernels(xp):
        return _add_in_order(xp, target, index, rows, values)
    if xp is np or target.dtype.name in GPU_ADD_AT or target.dtype.kind not in "biu":
        xp.add.at(target, index, values)
        return target
    # a device module whose add.at takes GPU_ADD_AT only: add in a wider integer dtype, then
    # cast back, which wraps as adding in the narrow dtype does (bool: any True is True)
    wide = target.astype(np.int32 if target.dtype.kind == "b" else np.int64)
    xp.add.at(wide, index, values.astype(wide.dtype) if type(values) is type(target)
              else xp.asarray(values).astype(wide.dtype))
    target[...] = wide.astype(target.dtype) if target.dtype.kind != "b" else wide != 0
    return target


# the dtypes that CuPy's scatter-add (add.at, one atomic add per element) takes
GPU_ADD_AT = ("int32", "int64", "float16", "float32", "float64", "uint32", "uint64")


def _add_in_order(xp, target, index, rows, values):
    """``scatter_add`` on the GPU. Every added element gets a key, the place it adds to:
    whole rows of ``target`` when ``index`` picks rows (an embedding's gradient: a key per
    row, ``width`` elements each), else single elements. The keys are sorted with their
    positions (key * n + position, so equal keys keep their order), and one thread per
    distinct key and column adds that key's values to its target one after another."""
    values = xp.asarray(values)
    whole_rows = type(rows) is type(target) and rows.dtype.kind in "iu" and target.ndim \
        and values.shape == rows.shape + target.shape[1:]
    if whole_rows:  # (out-of-range rows wrap around, as CuPy's indexing does)
        keys, width = xp.remainder(rows.reshape(-1).astype(np.int64), target.shape[0]), \
            math.prod(target.shape[1:])
    else:
        keys = xp.arange(target.size, dtype=np.int64).reshape(target.shape)[index]
        values, keys, width = xp.broadcast_to(values, keys.shape), keys.reshape(-1), 1
    n = keys.size
    if n == 0:
        return target
    if (target.size // width) * n >= 2 ** 62:  # key * n + position would overflow int64
        order = xp.argsort(keys, kind="stable")
        keys = keys[order]
    else:
        ordered = xp.sort(keys * n + xp.arange(n, dtype=np.int64))
        order, keys = ordered % n, ordered // n
    work = target if target.flags.c_contiguous else xp.ascontiguousarray(target)
    values = xp.ascontiguousarray(values, dtype=target.dtype)
    _kernel("add_in_order")(values, keys, order, n, width, work, size=n * width)
    if work is not target:
        target[...] = work
    return target


def embedding_backward(grad, index, shape, padding_idx):
    """The gradient of an embedding's weight (of ``shape``) from ``grad`` (index.shape +
    the row's shape): zeros with grad's rows added at their ids (repeats accumulate, in
    order), those of ``padding_idx`` (None: none) left out."""
    xp = xp_of(grad)
    if padding_idx is not None:
        kept = index != padding_idx
        if type(grad) is np.ndarray:  # fewer rows to add
            index, grad = index[kept], grad[kept]
        else:  # no read-back of how many rows are kept: theirs are zeros
            grad = xp.where(kept[..., None], grad, 0)
    return scatter_add(xp.zeros(shape, dtype=grad.dtype), index, grad)


def _add_rows(target, rows, values, few=8, most=64):
    """``target[rows] += values`` for whole rows (an embedding's gradient), in the order
    ``add.at`` sums them, so with the same bits (NumPy's ``add.at`` goes row by row).

    The rows are laid out on a grid, the k-th occurrence of every index in the grid's k-th
    layer (-0.0, which adds nothing, where an index has no k-th occurrence), and the layers
    are added to the indices' target rows one after another. The grid stops at the layer
    that fewer than ``few`` indices reach (and at 4 times the rows' size); each index with
    rows left (a padding id that fills half the batch) adds them in one ``add.accumulate``,
    which sums in order too. False, doing nothing, where an index is out of range (``add.at``
    then raises NumPy's IndexError) or more than ``most`` indices have rows left."""
    flat, n = rows.reshape(-1), target.shape[0]
    if flat.size and (flat.min() < -n or flat.max() >= n):
        return False
    flat = np.where(flat < 0, flat + n, flat)
    order = np.argsort(flat, kind="stable")  # each index's occurrences, in their order
    ordered = flat[order]
    first = np.empty(ordered.size, dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, ordered.size))
    column = np.cumsum(first) - 1                    # which distinct index, in sorted order
    rank = np.arange(ordered.size) - starts[column]  # which occurrence of it
    largest = np.sort(counts)[::-1]
    layers = min(int(largest[few - 1]) if largest.size >= few else 0,
                 4 * flat.size // max(1, starts.size))
    if np.count_nonzero(counts > layers) > most:
        return False
    values = values.reshape((flat.size,) + values.shape[rows.ndim:])
    indices = ordered[starts]
    if layers:
        inside = rank < layers
        grid = np.full((layers, indices.size) + values.shape[1:], -0.0, dtype=values.dtype)
        grid[rank[inside], column[inside]] = values[order[inside]]
        sums = target[indices]
        for layer in grid:
            sums += layer
        target[indices] = sums
    for start, count in zip(starts[counts > layers].tolist(), counts[counts > layers].tolist()):
        row = ordered[start]
        rest = np.concatenate((target[row][None], values[order[start + layers:start + count]]))
        target[row] = np.add.accumulate(rest, axis=0)[-1]  # target + v_k + v_k+1 + ...
    return True


def check_index_bounds(index, size, dim):
    """Check that an integer index array holds values in [-size, size) only: an IndexError
    (PyTorch's message) otherwise. Returns the index to use.

    NumPy's indexing checks this itself (a no-op here: the index is returned as it is).
    CuPy's wraps such indices around silently, and reading the bounds back would stall the
    GPU; there the check is made on the device and raised at the next read on the host
    (``checks.check``), and the index comes back wrapped into range."""
    if type(index) is np.ndarray or index.size == 0:
        return index
    bad, value = checks.out_of_range(index, -size, size)
    checks.check(bad, value, IndexError,
                 "index {} is out of bounds for dimension %d with size %d" % (dim, size))
    return checks.wrapped(index, size)


def erf(array):
    """The error function, elementwise (SciPy on the CPU, cupyx.scipy on the GPU; float32
    host arrays by ``host_loops.erf``, SciPy's results five times faster)."""
    if isinstance(array, (np.ndarray, np.generic)):  # 0-d arithmetic gives NumPy scalars
        out = host_loops.erf(array) if type(array) is np.ndarray else None
        if out is not None:
            return out
        from scipy.special import erf as _erf
    else:
        from cupyx.scipy.special import erf as _erf
    out = _erf(array)
    return out if out.dtype == array.dtype else out.astype(array.dtype)  # (SciPy has no half)


def erfc(array):
    """1 - erf, elementwise without its cancellation for large x (SciPy on the CPU,
    cupyx.scipy on the GPU), in the array's dtype."""
    if isinstance(array, (np.ndarray, np.generic)):
        from scipy.special import erfc as _erfc
    else:
        from cupyx.scipy.special import erfc as _erfc
    out = _erfc(array)
    return out if out.dtype == array.dtype else out.astype(array.dtype)


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
    # scatter_add's sums: the thread of each key's first element (in sorted order) and of
    # one column adds the key's values to its target, one after another
    "add_in_order": ("raw T values, raw int64 keys, raw int64 order, int64 n, int64 width",
                     "raw T target",
                     "long long k = i / width, c = i % width, key = keys[k];"
                     "if (k == 0 || keys[k - 1] != key) {"
                     "  T sum = target[key * width + c];"
                     "  for (long long j = k; j < n && keys[j] == key; ++j)"
                     "    sum = sum + values[order[j] * width + c];"
                     "  target[key * width + c] = sum;"
                     "}"),
    # Adam's moments in place and the parameter's update, PyTorch's formula term for term
    "adam": ("T g, float64 w1, float64 beta2, float64 step_size, float64 bc2_sqrt, "
             "float64 eps", "T m, T v, T update",
             "m = (w1 < 0.5 && w1 > -0.5) ? m + (T)w1 * (g - m) : g - (g - m) * (T)(1.0 - w1);"
             "v = v * (T)beta2 + (T)(1.0 - beta2) * g * g;"
             "update = ((T)-step_size * m) / (sqrt(v) / (T)bc2_sqrt + (T)eps)"),
}
_compiled = {}


def _kernel(name):
    if name not in _compiled:
        inputs, output, body = _KERNELS[name]
        _compiled[name] = cupy().ElementwiseKernel(inputs, output, body, f"minigrad_{name}")
    return _compiled[name]


def _on_host(*arrays):
    return all(isinstance(a, (np.ndarray, np.generic)) for a in arrays)


def _has_kernels(xp):
    """Whether array module ``xp`` compiles CUDA kernels (CuPy does; NumPy, and an array
    module without them, such as the tests' stand-in for CuPy, run the array formulas)."""
    return xp is not np and hasattr(xp, "ElementwiseKernel") and hasattr(xp, "RawModule")


def _on_gpu(*arrays):
    """Whether ``arrays`` are device arrays that minigrad's CUDA kernels can run on."""
    return not _on_host(*arrays) and _has_kernels(xp_of(arrays[0]))


def gelu(x):
    """x * Phi(x), Phi the standard normal CDF (exact, by erf)."""
    if _on_gpu(x):
        return _kernel("gelu")(x)
    if x.dtype == np.float16:  # in float32, rounded once at the end (as PyTorch's half)
        return gelu(x.astype(np.float32)).astype(np.float16)
    out = host_loops.gelu(x) if type(x) is np.ndarray else None
    if out is not None:
        return out
    out = erf(x * _SQRT_HALF)
    out += 1.0
    out *= x
    out *= 0.5
    return out


def gelu_backward(grad, x):
    """grad * (Phi(x) + x * phi(x)), the derivative of gelu times grad."""
    if _on_gpu(grad, x):
        return _kernel("gelu_backward")(grad, x)
    if x.dtype == np.float16:
        return gelu_backward(grad.astype(np.float32), x.astype(np.float32)).astype(np.float16)
    pdf = np.exp(-0.5 * x * x)
    pdf *= x * _INV_SQRT_2PI                                                 # x * phi(x)
    if type(grad) is np.ndarray and host_loops.gelu_grad(grad, x, pdf) is not None:
        return pdf  # (the rest in one pass, same bits)
    cdf = erf(x * _SQRT_HALF)
    cdf += 1.0
    cdf *= 0.5
    cdf += pdf
    cdf *= grad
    return cdf


def dropout(x, keep, scale):
    """x * scale where ``keep`` (bool), else 0."""
    if _on_gpu(x, keep):
        return _kernel("dropout")(x, keep, x.dtype.type(scale))
    out = host_loops.dropout(x, keep, scale)
    if out is not None:
        return out
    out = keep.astype(x.dtype)  # (a bool operand would make NumPy cast in its slow loop)
    out *= x
    out *= scale
    return out


def add_bias(out, bias):
    """``out += bias`` for a bias over the last dim (a linear layer's): on the host one
    compiled pass over the rows (NumPy's broadcasting add runs its loop once a row, slow
    for the short rows of a small layer), the same bits."""
    if not host_loops.add_bias(out, bias):
        out += bias
    return out


def add_scaled(out, x, y, alpha):
    """``x + alpha * y`` written into ``out``, as PyTorch's ``add(x, y, alpha=alpha)``:
    ``x``, ``y`` (arrays or numbers) and ``alpha`` rounded to out's dtype first, then, for
    float32 and float16, one rounding of the exact result (its fused multiply-add; float16
    from the float32 result, as its float16 arithmetic runs in float32). The product is
    exact in float64, and the float64 sum is rounded to odd (its last bit set where
    inexact), which makes the float32 rounding of it that of the exact sum. In float64 the
    product and the sum are rounded apart (at most an ulp from PyTorch's). ``alpha`` may be
    a 0-d float64 array (a slot of a compiled step's scalar buffer), read on the device."""
    xp = xp_of(out)
    if out.dtype.itemsize > 4:
        out[...] = xp.asarray(y, dtype=out.dtype) * number_like(alpha, out) + x
        return out
    if type(alpha) in (int, float, np.ndarray) and alpha == 1 and \
            getattr(x, "dtype", None) == getattr(y, "dtype", None) == out.dtype:
        return xp.add(x, y, out=out)  # (a plain sum is rounded once already; a device
        # array's alpha is not read on the host: the formula below gives the same sum)
    if host_loops.add_scaled(out, x, y, alpha):  # (one pass, same bits)
        return out
    x, y = (xp.asarray(v, dtype=out.dtype).astype(np.float64) for v in (x, y))
    p = y * number_like(alpha, out).astype(np.float64)
    s = x + p
    back = s - x  # (Knuth's two-sum: s + err is exactly x + p)
    err = (x - (s - back)) + (p - back)
    even = (s.view(np.int64) & 1) == 0
    s = xp.where((err != 0) & even & xp.isfinite(s),
                 xp.nextafter(s, xp.where(err > 0, np.inf, -np.inf)), s)
    out[...] = s.astype(np.float32)
    return out


def number_like(x, like):
    """A number ``x`` (a Python float, or a 0-d float64 array: a slot of a compiled step's
    scalar buffer) as an operand of like's dtype: a 0-d array of it, rounded once, as NumPy
    rounds a Python float operand of a float32 array. A 0-d float64 array operand would
    instead make NumPy compute in float64 (NEP 50); rounded first, both give the same bits."""
    return xp_of(like).asarray(x, dtype=like.dtype)


ADAM_SPLIT = 1 << 16  # the fewest elements of a host Adam step that run_split shares out


def adam(g, m, v, beta1, beta2, step_size, bc2_sqrt, eps, scratch=False):
    """Adam's step on raw arrays: the moments ``m`` and ``v`` updated in place (m lerps to
    g by 1 - beta1, as torch's lerp_; v = beta2 v + (1 - beta2) g^2) and the parameter's
    update -step_size * m / (sqrt(v) / bc2_sqrt + eps) returned. One kernel on the GPU; on
    the host, for ``ADAM_SPLIT`` elements or more (a param group's flat moments), stretches
    of the arrays on the cores at once (``run_split``: the same operations on each element).
    ``scratch``: ``g`` is the caller's to overwrite (it then holds the denominator)."""
    w1 = 1.0 - beta1
    if _on_gpu(g):
        update = cupy().empty_like(g)
        _kernel("adam")(g, w1, beta2, step_size, bc2_sqrt, eps, m, v, update)
        return update
    update = xp_of(g).empty_like(g)
    args = (w1, beta2, step_size, bc2_sqrt, eps, scratch)
    if not _on_host(g) or g.size < ADAM_SPLIT \
            or not all(a.flags.c_contiguous for a in (g, m, v)):
        _adam_host(g, m, v, update, *args)
        return update
    flat = [a.reshape(-1) for a in (g, m, v, update)]
    run_split(lambda i0, i1: _adam_host(*(a[i0:i1] for a in flat), *args), g.size, np)
    return update


def adam_into(params, grads, m, v, bounds, beta1, beta2, step_size, bc2_sqrt, eps):
    """``adam`` of a param group with flat moments (``bounds``: each parameter's stretch of
    them), each parameter's update added to it in the same pass, where the group is on the
    host and numba is installed (``host_loops.adam_into``: the same bits as ``adam`` and
    ``p += update``). False, doing nothing, elsewhere."""
    return host_loops.adam_into(params, grads, m, v, bounds, 1.0 - beta1, beta2, step_size,
                                bc2_sqrt, eps)


def _adam_host(g, m, v, t, w1, beta2, step_size, bc2_sqrt, eps, scratch):
    """``adam`` on host arrays, the update written into ``t`` (also every intermediate's
    scratch: the same values, fewer allocations); one pass where numba is installed. The
    numbers (Python floats or 0-d float64 arrays) are combined in double precision, then
    rounded to the arrays' dtype (``number_like``)."""
    if host_loops.adam(g, m, v, t, w1, beta2, step_size, bc2_sqrt, eps, scratch):
        return
    np.subtract(g, m, out=t)
    if abs(w1) < 0.5:  # torch's lerp_, in its two forms (the second exact at weight 1)
        t *= number_like(w1, t)
        m += t
    else:
        t *= number_like(1.0 - w1, t)
        np.subtract(g, t, out=m)
    v *= number_like(beta2, v)
    np.multiply(g, number_like(1.0 - beta2, g), out=t)
    t *= g
    v += t
    denom = np.sqrt(v, out=g if scratch else None)
    denom /= number_like(bc2_sqrt, denom)
    denom += number_like(eps, denom)
    np.multiply(m, number_like(-step_size, m), out=t)  # torch's addcdiv_: p + (value * m) / denom
    t /= denom


# --- the CPU's cores for work that splits into independent pieces ------------------------

class _Workers:
    """Threads that wait for pieces of work (``run_split``), started on first use and kept:
    handing a piece to one costs a queue put and a wake-up (about 15 us), where starting a
    thread pool for every call cost 200 us. ``lock`` lets one call at a time share them."""

    def __init__(self):
        self.blas = threads.blas_controllers()
        self.lock = threading.Lock()
        self.jobs, self.done = [], queue.SimpleQueue()  # a queue per worker; their results

    def cores(self):
        """How many threads to share work among: as many as BLAS has (the user's setting),
        or, BLAS being on minigrad's one thread, as many as it had (``threads``)."""
        return threads.split_threads(max([lib.num_threads for lib in self.blas] or [1]))

    def run(self, fn, bounds):
        """fn(bounds[w], bounds[w + 1]) for every w: the first range in this thread, the
        others in workers, every product single-threaded meanwhile; re-raises the first
        exception of any range once all have finished."""
        while len(self.jobs) < len(bounds) - 2:
            self.jobs.append(queue.SimpleQueue())
            threading.Thread(target=self._serve, args=(self.jobs[-1],), daemon=True,
                             name="minigrad-split").start()
        threads = [lib.num_threads for lib in self.blas]
        for lib in self.blas:
            lib.set_num_threads(1)
        try:
            for jobs, i0, i1 in zip(self.jobs, bounds[1:-1], bounds[2:]):
                jobs.put((fn, i0, i1))
            errors = [_call(fn, bounds[0], bounds[1])]
            errors += [self.done.get() for _ in bounds[2:]]
        finally:
            for lib, n in zip(self.blas, threads):
                lib.set_num_threads(n)
        for error in errors:
            if error is not None:
                raise error

    def _serve(self, jobs):
        while True:
            self.done.put(_call(*jobs.get()))


def _call(fn, i0, i1):
    """fn(i0, i1), and the exception it raised (None if none)."""
    try:
        fn(i0, i1)
    except BaseException as error:  # handed to the caller of run_split, which re-raises it
        return error
    return None


_workers = None


def run_split(fn, n, xp):
    """fn(i0, i1) over contiguous ranges that cover 0..n. On NumPy there are as many ranges
    as ``threads.split_threads`` says (the cores BLAS had before minigrad set it to one
    thread, or the threads a user gave BLAS), one in the calling thread and the others in
    ``_Workers``, with every product single-threaded: NumPy releases the GIL in products and
    ufuncs, so elementwise work, which would otherwise keep one core busy while the others
    wait, is shared by the cores too. One range, in the calling thread, on CuPy (the GPU is
    parallel already), for n = 1, with one thread (a user's setting), and when another call
    is sharing the workers (a nested or concurrent one)."""
    global _workers
    if xp is not np or n < 2:
        fn(0, n)
        return
    _workers = _workers or _Workers()
    workers = min(n, _workers.cores())
    if workers < 2 or not _workers.lock.acquire(blocking=False):
        fn(0, n)
        return
    try:
        _workers.run(fn, [n * w // workers for w in range(workers + 1)])
    finally:
        _workers.lock.release()


# --- row-wise kernels: layer norm and softmax over the last axis ---------------------------
#
# On the GPU, one CUDA block per row (cuda.py) for float32 and float64; elsewhere (the CPU,
# other dtypes, empty arrays) the same formula through the array module.

ROW_SUM_BLAS = 4096  # the longest row that row_sum adds by a product with ones
_ones = {}  # (length, dtype) -> a vector of ones, for row_sum and lead_sum


def row_sum(x, n=1):
    """``x.sum(axis=last n dims, keepdims=True)``, for the row reductions inside the fused
    kernels (layer norm's means, attention's and softmax's normalisers).

    NumPy's reduction over a short last axis runs its inner loop once per row, and costs
    three to six times a BLAS product for the rows of a transformer (16 to 1024 elements).
    So on the host, rows of float32 or float64 are summed as one matrix-vector product with
    a vector of ones: the same sum, accumulated in the rows' dtype in BLAS's order rather
    than NumPy's pairwise one (they differ in the last bits, as PyTorch's own order does)."""
    ones = _ones_for(x, n)
    if ones is None:
        return x.sum(axis=tuple(range(x.ndim - n, x.ndim)), keepdims=True)
    return _rows_times(x, n, ones)


def row_mean(x, n=1):
    """``x.mean(axis=last n dims, keepdims=True)``: ``row_sum`` divided by the row length."""
    ones = _ones_for(x, n)
    if ones is None:
        return x.mean(axis=tuple(range(x.ndim - n, x.ndim)), keepdims=True)
    total = _rows_times(x, n, ones)
    total /= ones.size
    return total


def lead_sum(x, dims, keepdims):
    """``x.sum(axis=dims, keepdims=keepdims)`` when ``dims`` are the leading dims of a
    contiguous host array of float32 or float64 (a bias's gradient, summed over batch and
    positions), or None: then NumPy's reduction applies.

    NumPy adds such rows one after another; a product of ones with the rows as a matrix
    (BLAS) sums them several times faster, and more accurately (in several running sums)."""
    k = len(dims)
    if type(x) is not np.ndarray or x.dtype.char not in "fd" or not 0 < k < x.ndim or \
            dims != tuple(range(k)) or not x.size or not x.flags.c_contiguous:
        return None
    count = math.prod(x.shape[:k])
    ones = _ones.get((count, x.dtype.char))
    if ones is None:
        ones = _ones[count, x.dtype.char] = np.ones(count, dtype=x.dtype)
    return _product(ones, x.reshape(count, -1), ((1,) * k if keepdims else ()) + x.shape[k:])


def _ones_for(x, n):
    """The vector of ones that ``row_sum`` multiplies ``x``'s rows of its last ``n`` dims
    by, or None where NumPy's own reduction runs (the GPU, other dtypes, empty rows)."""
    width = math.prod(x.shape[x.ndim - n:])
    if type(x) is not np.ndarray or x.dtype.char not in "fd" or not 0 < width <= ROW_SUM_BLAS:
        return None
    ones = _ones.get((width, x.dtype.char))
    if ones is None:
        ones = _ones[width, x.dtype.char] = np.ones(width, dtype=x.dtype)
    return ones


def _rows_times(x, n, vector):
    """The rows of ``x``'s last ``n`` dims times ``vector`` (BLAS), shaped as a keepdims
    reduction."""
    return _product(x.reshape(-1, vector.size), vector, x.shape[:x.ndim - n] + (1,) * n)


def _product(a, b, shape):
    """a @ b in a new array of ``shape`` (its own memory, not a view of the product's)."""
    out = np.empty(shape, dtype=a.dtype)
    np.matmul(a, b, out=out.reshape(-1))
    return out


def _rows_on_gpu(x, n):
    """Whether ``x``'s rows of ``n`` go to a CUDA row kernel."""
    return _on_gpu(x) and x.dtype.name in ("float32", "float64") and x.size and n


def _launch_rows(name, x, n, args):
    threads = 256 if n >= 256 else max(32, -(-n // 32) * 32)
    from .cuda import function
    function(name, x.dtype)((x.size // n,), (threads,), args)


def _contiguous(xp, *arrays):
    return [None if a is None else xp.ascontiguousarray(a) for a in arrays]


def row_major(a):
    """``a``, or a row-major (C-contiguous) copy where its layout is another: the result of
    an op that PyTorch makes contiguous whatever its input's layout (cat, softmax,
    masked_fill, ...), so that ``.view`` works on it as in PyTorch."""
    return a if a.flags.c_contiguous else xp_of(a).ascontiguousarray(a)


def layer_norm(x, weight, bias, n, eps):
    """(y, mean, rstd): y = (x - mean) * rstd * weight + bias over the last ``n`` dims, with
    rstd = 1 / sqrt(var + eps) (biased variance); ``weight`` and ``bias`` (of those dims'
    shape) may be None. ``mean`` and ``rstd`` (..., 1), kept for ``layer_norm_backward``,
    are None on the GPU, whose backward kernel makes them again."""
    width = math.prod(x.shape[x.ndim - n:])
    if not _rows_on_gpu(x, width):
        mean = row_mean(x, n)
        both = host_loops.centre(x, mean)  # (one pass, same bits)
        if both is not None:
            centered, squares = both
            rstd = _rstd(row_mean(squares, n), eps)
        else:
            centered = x - mean
            rstd = _row_rstd(centered, n, eps)
        if host_loops.normalise(centered, rstd, weight, bias):  # (one pass, same bits)
            return centered, mean, rstd
        centered *= rstd                                                     # xhat
        if weight is not None:
            centered *= weight
        if bias is not None:
            centered += bias
        return centered, mean, rstd
    xp = cupy()
    x, weight, bias = _contiguous(xp, x, weight, bias)
    y = xp.empty_like(x)
    _launch_rows("layer_norm_forward", x, width, (
        x, x if weight is None else weight, x if bias is None else bias, y, np.int32(width),
        x.dtype.type(eps), np.int32(weight is not None), np.int32(bias is not None)))
    return y, None, None


def layer_norm_backward(grad, x, weight, n, eps, mean=None, rstd=None):
    """(dx, grad * xhat) of layer_norm, on raw arrays: dx = rstd * (g - mean(g) - xhat *
    mean(g * xhat)) with g = grad * weight; ``mean`` and ``rstd`` as layer_norm gave them
    (None: made again from x)."""
    width = math.prod(x.shape[x.ndim - n:])
    if not _rows_on_gpu(x, width):
        if mean is None:
            mean = row_mean(x, n)
        both = host_loops.xhat_times(grad, x, mean, rstd) if rstd is not None else None
        if both is not None:  # (one pass, same bits; dx below likewise)
            xhat, gxhat = both
            mean_g = _row_mean_times(grad, weight, n)
            mean_gxhat = _row_mean_times(gxhat, weight, n)
            if host_loops.fits_input_grad(grad, xhat, weight, mean_g, mean_gxhat, rstd):
                return host_loops.input_grad(grad, xhat, weight, mean_g, mean_gxhat,
                                             rstd), gxhat
            return _layer_norm_input_grad(grad, xhat, weight, mean_g, mean_gxhat, rstd), gxhat
        xhat = x - mean                                                      # centred
        if rstd is None:
            rstd = _row_rstd(xhat, n, eps)
        xhat *= rstd
        gxhat = grad * xhat
        # mean(g) and mean(g * xhat) with g = grad * weight: grad's and gxhat's rows times
        # the weight, without making g * xhat
        mean_g, mean_gxhat = _row_mean_times(grad, weight, n), _row_mean_times(gxhat, weight, n)
        return _layer_norm_input_grad(grad, xhat, weight, mean_g, mean_gxhat, rstd), gxhat
    xp = cupy()
    grad, x, weight = _contiguous(xp, grad, x, weight)
    dx, gxhat = xp.empty_like(x), xp.empty_like(x)
    _launch_rows("layer_norm_backward", x, width, (
        grad, x, x if weight is None else weight, dx, gxhat, np.int32(width),
        x.dtype.type(eps), np.int32(weight is not None), np.int32(1)))
    return dx, gxhat


def _layer_norm_input_grad(grad, xhat, weight, mean_g, mean_gxhat, rstd):
    """dx = ((grad * weight - mean_g) - xhat * mean_gxhat) * rstd (xhat is overwritten)."""
    dx = grad.copy() if weight is None else grad * weight
    dx -= mean_g
    xhat *= mean_gxhat
    dx -= xhat
    dx *= rstd
    return dx


def _row_rstd(centered, n, eps):
    """1 / sqrt(var + eps) of each row of the last ``n`` dims, from the centred rows."""
    return _rstd(row_mean(centered * centered, n), eps)


def _rstd(var, eps):
    """1 / sqrt(var + eps)."""
    xp = xp_of(var)
    return xp.divide(1.0, xp.sqrt(var + eps))


def _row_mean_times(x, weight, n):
    """row_mean(x * weight, n) (weight None: row_mean(x, n)), on the host as one product of
    the rows with the weight (BLAS), without making x * weight."""
    if weight is None:
        return row_mean(x, n)
    if _ones_for(x, n) is None or weight.dtype != x.dtype:
        return row_mean(x * weight, n)
    total = _rows_times(x, n, weight.reshape(-1))
    total /= weight.size
    return total


def softmax(x, axis, log=False):
    """softmax (or log_softmax) of ``x`` along ``axis``, shifted by the max; NumPy's path
    is the ops' own formula (a row of -inf gives NaN, as PyTorch)."""
    if not (axis == x.ndim - 1 and _rows_on_gpu(x, x.shape[-1] if x.ndim else 0)):
        return None
    xp = cupy()
    (x,) = _contiguous(xp, x)
    y = xp.empty_like(x)
    _launch_rows("softmax_forward", x, x.shape[-1], (x, y, np.int32(x.shape[-1]),
                                                     np.int32(log)))
    return y


def softmax_backward(grad, y, axis, log=False):
    """The gradient of softmax (or log_softmax) from its output ``y`` over the last axis:
    y * (grad - rowsum(grad * y)), or grad - exp(y) * rowsum(grad); None for another axis
    (the op then uses its own formula)."""
    if not (y.ndim and axis == y.ndim - 1):
        return None
    if not _rows_on_gpu(y, y.shape[-1]):
        if log:
            dx = xp_of(y).exp(y)
            dx *= row_sum(grad)
            return xp_of(y).subtract(grad, dx, out=dx)
        dx = grad * y
        dx = xp_of(y).subtract(grad, row_sum(dx), out=dx)
        dx *= y
        return dx
    xp = cupy()
    grad, y = _contiguous(xp, grad, y)
    dx = xp.empty_like(y)
    _launch_rows("softmax_backward", y, y.shape[-1], (grad, y, dx, np.int32(y.shape[-1]),
                                                      np.int32(log)))
    return dx


# --- attention: the FlashAttention kernels of cuda.py ------------------------------------

_NO_CAUSAL = -2147483647


def attention(q, k, v, scale, causal):
    """(out, lse) of softmax(q k^T * scale) v with no (T, S) scores held, or None where no
    kernel applies: the CPU, dtypes other than float32, head sizes other than cuda.HEAD_DIMS,
    broadcast lead dims or a value size unlike the key's. ``lse`` (..., T, 1) is the log of
    each row's normaliser (+inf for a row that sees no key, whose output is zeros)."""
    if not _attention_fits(q, k, v):
        return None
    xp = cupy()
    q, k, v = _contiguous(xp, q, k, v)
    T, S, D = q.shape[-2], k.shape[-2], q.shape[-1]
    heads = q.size // (T * D)
    out = xp.empty_like(q)
    lse = xp.empty(q.shape[:-1] + (1,), dtype=q.dtype)
    from .cuda import function
    function(f"attention_forward<{D}>")(
        (-(-T // 64), heads), (64,),
        (q, k, v, out, lse, np.int32(T), np.int32(S), np.float32(scale), _causal(causal)))
    return out, lse


def attention_backward(q, k, v, out, lse, grad, scale, causal):
    """(dq, dk, dv) for ``attention``'s (out, lse), by three kernels: dq over the keys,
    dv and dk over the queries; None where ``attention`` has no kernel."""
    if not _attention_fits(q, k, v):
        return None
    xp = cupy()
    q, k, v, out, grad = _contiguous(xp, q, k, v, out, grad)
    T, S, D = q.shape[-2], k.shape[-2], q.shape[-1]
    heads = q.size // (T * D)
    delta = (grad * out).sum(axis=-1)                                       # rowsum(dO * O)
    dq, dk, dv = xp.empty_like(q), xp.empty_like(k), xp.empty_like(v)
    args = (q, k, v, grad, lse, delta)
    tail = (np.int32(T), np.int32(S), np.float32(scale), _causal(causal))
    from .cuda import function
    function(f"attention_backward_dq<{D}>")((-(-T // 64), heads), (64,), args + (dq,) + tail)
    for want_dk, target in ((0, dv), (1, dk)):
        function(f"attention_backward_kv<{D}, {want_dk}>")(
            (-(-S // 64), heads), (64,), args + (target,) + tail)
    return dq, dk, dv


def _attention_fits(q, k, v):
    from .cuda import HEAD_DIMS
    return (_on_gpu(q) and q.dtype.name == k.dtype.name == v.dtype.name == "float32"
            and q.shape[-1] in HEAD_DIMS and v.shape[-1] == q.shape[-1]
            and q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and q.size > 0 and k.size > 0)


def _causal(causal):
    if causal is None:
        return np.int32(_NO_CAUSAL)
    return np.int32(max(-(2 ** 31) + 2, min(2 ** 31 - 1, causal)))


# --- dropout masks on the GPU ------------------------------------------------------------

def philox_keep(xp, shape, threshold, seed, offset):
    """A bool array of ``shape`` on the GPU: element i is True where the i-th 32-bit word of
    the Philox4x32-10 stream keyed by ``seed`` from block ``offset`` is >= ``threshold``."""
    if not _has_kernels(xp):
        return _philox_words(xp, math.prod(shape), seed, offset).reshape(shape) >= threshold
    from .cuda import philox_keep as kernel
    keep = xp.empty(shape, dtype=bool)
    if keep.size:
        kernel()(np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32),
                 np.uint64(offset % 2 ** 64), np.uint32(threshold), keep)
    return keep


def _philox_words(xp, n, seed, offset, chunk=1 << 14):
    """The first ``n`` 32-bit words (as uint64) of the Philox4x32-10 stream of ``philox_keep``
    through the array module, for an array module without CUDA kernels: the same words as
    the kernel's (cuda.PHILOX_BODY), four from each 64-bit counter block. ``chunk`` blocks
    at a time, each round in place, so that the ten rounds run in the cache."""
    u, low, shift = np.uint64, np.uint64(0xFFFFFFFF), np.uint64(32)
    blocks = (n + 3) // 4
    words = xp.empty((blocks, 4), dtype=np.uint64)
    scratch = xp.empty((6, min(chunk, blocks)), dtype=np.uint64)
    for b0 in range(0, blocks, chunk):
        m = min(chunk, blocks - b0)
        c0, c1, c2, c3, p0, p1 = (a[:m] for a in scratch)
        counter = xp.arange(b0, b0 + m, dtype=np.uint64) + u(offset % 2 ** 64)
        xp.bitwise_and(counter, low, out=c0)
        xp.right_shift(counter, shift, out=c1)
        c2[...], c3[...] = 0, 0
        k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
        for r in range(10):
            if r:
                k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
            xp.multiply(c0, u(0xD2511F53), out=p0)  # (32 x 32 bits: exact in 64)
            xp.multiply(c2, u(0xCD9E8D57), out=p1)
            xp.right_shift(p1, shift, out=c0)         # c0 = hi(p1) ^ c1 ^ k0
            c0 ^= c1
            c0 ^= u(k0)
            xp.bitwise_and(p1, low, out=c1)           # c1 = lo(p1)
            xp.right_shift(p0, shift, out=c2)         # c2 = hi(p0) ^ c3 ^ k1
            c2 ^= c3
            c2 ^= u(k1)
            xp.bitwise_and(p0, low, out=c3)           # c3 = lo(p0)
        for j, c in enumerate((c0, c1, c2, c3)):
            words[b0:b0 + m, j] = c
    return words.reshape(-1)[:n]
