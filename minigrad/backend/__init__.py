"""Backends: NumPy on ``"cpu"``, CuPy on ``"cuda"``.

Every op reaches its array module as ``ctx.xp`` and never imports CuPy or branches on it;
the few places where NumPy and CuPy really differ are the named helpers of this package,
which the rest of minigrad reaches as ``backend.<name>``:

- ``devices.py``: ``Device`` and ``DeviceError``, importing CuPy (``cupy``,
  ``cuda_is_available``), which array module holds an array or a device (``array_module``,
  ``xp_of``, ``device_of``), moving arrays (``to_device``, ``to_host``), device checks
  (``check_same_device``) and making an array's GPU current (``device_context``).
- ``kernels.py``: array-level kernels shared by the ops: ``scatter_add`` (and
  ``embedding_backward``), ``erf``, ``check_index_bounds`` (CuPy does not check index
  arrays: checked on the device, see ``checks.py``), the fused ``gelu``, ``gelu_backward``, ``dropout``, ``adam`` (the moments and
  the update), ``layer_norm`` (and its backward) and ``softmax`` (and log-softmax, and
  their backward), each one CUDA kernel on the GPU and the same formula through the array
  module elsewhere; ``attention`` and its backward (FlashAttention kernels on the GPU, None
  where the tiled array code runs instead); ``row_sum`` and ``row_mean``, the row
  reductions inside those kernels, and ``lead_sum``, sums over leading dims (both by BLAS
  on the CPU); and ``run_split``, which shares CPU work among cores.
- ``checks.py``: checks of values on the GPU without a synchronisation (``check``; an
  index out of range), raised at the next read on the host (``raise_pending``), and the
  index wrapped into range meanwhile (``wrap_index``).
- ``host_loops.py``: the elementwise stages of those kernels on the CPU as one numba loop
  each, with the bits of their NumPy formulas (where numba is installed), and two for the
  ops (``relu_grad``, ``times_kept``: attention's dropout of a tile).
- ``cuda.py``: the CUDA source of those kernels, compiled by CuPy on first use.
- ``host.py``: host memory kept for the next step (``keep_host_memory``, called on import).
- ``threads.py``: BLAS on one thread unless the user sets its threads (``one_blas_thread``,
  called on import), how many threads ``run_split`` shares work among
  (``get_num_threads``, ``set_num_threads``), and ``matmul``, which runs a large product on
  the cores BLAS had.
- ``random.py``: one seed behind every random op on every device: host draws for values,
  a counter-based device stream for dropout masks on the GPU (``manual_seed``,
  ``generator``, ``source``, ``keep_mask``, ``get_rng_state``, ``set_rng_state``).
"""
import numpy as np  # noqa: F401  (ops compare array modules against backend.np)

from .devices import (CPU, Device, DeviceError, _NULL_CONTEXT, _XP_BY_TYPE,  # noqa: F401
                      array_module, check_same_device, cuda_is_available, cupy,
                      device_context, device_of, to_device, to_host, xp_of)
from .kernels import (adam, adam_into, add_bias, add_scaled, attention,  # noqa: F401
                      attention_backward, check_index_bounds, dropout, embedding_backward,
                      erf, erfc, gelu, gelu_backward, layer_norm, layer_norm_backward, lead_sum,
                      row_major, row_mean, row_sum, run_split, scatter_add, softmax,
                      softmax_backward)
from .random import (DEFAULT_SEED, generator, get_rng_state, keep_mask,  # noqa: F401
                     manual_seed, set_rng_state, source)
from . import random as _random
from . import checks  # noqa: F401
from .fma import fma  # noqa: F401
from .checks import raise_pending, wrapped as wrap_index  # noqa: F401
from .host import keep_host_memory, keeps_by_default  # noqa: F401

from . import threads  # noqa: F401
from . import host_loops  # noqa: F401
from .threads import get_num_threads, matmul, set_num_threads  # noqa: F401

if keeps_by_default():
    keep_host_memory()
if threads.limits_by_default():
    threads.one_blas_thread()


def __getattr__(name):
    # manual_seed replaces the generator, so a copy bound here would go stale: read it live
    if name == "_generator":
        return _random.generator()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
