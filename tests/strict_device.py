"""A strict stand-in for CuPy, so that a machine without a GPU runs minigrad's "cuda" paths.

``pytest --device strict`` installs this module as ``cupy`` (and a small ``cupyx`` beside
it) before any test runs; the device fixture then gives "cuda", and every cuda tensor holds
an ``ndarray`` of this module. Its values are NumPy's, but it keeps CuPy's rules, which is
what a CPU run misses and a GPU run catches:

- no implicit trip to the host: ``numpy.asarray(a)``, ``numpy.float64(a)`` and anything
  else that goes through ``__array__`` raise CuPy's TypeError ("Implicit conversion to a
  NumPy array is not allowed"); ``.get()``, ``asnumpy``, ``item()``, ``tolist()``,
  ``float()``, ``int()``, ``bool()``, ``repr`` and ``format`` read back, as CuPy's do;
- no mixing with ``numpy.ndarray`` operands, in this module's functions, ufuncs, methods
  and operators, nor through NumPy's functions (``__array_ufunc__``, ``__array_function__``):
  a TypeError as CuPy's; NumPy scalars and Python numbers mix freely, NumPy index arrays
  index (CuPy copies them to the device) and ``asarray``/``array`` upload host data;
- no NumPy RuntimeWarnings (overflow, division by zero): CuPy computes the same infs and
  nans without a word;
- reductions and full indexing give 0-d arrays, not NumPy scalars; ``ufunc.at`` takes only
  the dtypes CuPy's scatter kernels take (``cupy.add.at`` no bool, int8, int16 or uint8);
- no ``ElementwiseKernel``, ``RawModule`` or ``RawKernel``: minigrad's backend runs its
  array formulas where the real CuPy would run its CUDA kernels;
- every host read that it allows (each a synchronisation on a GPU) is counted:
  ``with host_reads() as reads:`` lists those made inside the block, each with where it came
  from (the stack's first minigrad frame), so that a test can ask for none.

It holds the arrays on one pretend device, ``cuda:0``. Numbers come out as NumPy computes
them, so it cannot show where CuPy's own kernels round differently from NumPy's."""
import builtins  # (the module's own names shadow any, all, ... once used: see __getattr__)
import functools
import sys
import types
import weakref

import numpy as np

IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly.")

# ufunc.at: the dtypes each CuPy scatter kernel supports (cupy/_core/_routines_indexing.pyx)
_I32_64 = ("int32", "int64", "uint32", "uint64")
AT_DTYPES = {
    "add": ("int32", "int64", "float16", "float32", "float64", "uint32", "uint64"),
    "subtract": ("int32", "uint32"),
    "maximum": _I32_64 + ("float32", "float64"),
    "minimum": _I32_64 + ("float32", "float64"),
    "bitwise_and": _I32_64,
    "bitwise_or": _I32_64,
    "bitwise_xor": _I32_64,
}
_AT_MESSAGE = {"add": "int32, int64, float16, float32, float64, uint32, uint64",
               "subtract": "int32, uint32,",
               "maximum": "int32, int64, float32, float64, uint32, uint64",
               "minimum": "int32, int64, float32, float64, uint32, uint64"}


def _unsupported(x):
    return TypeError(f"Unsupported type {type(x)}")


# --- moving values between the stand-in and NumPy -----------------------------------------

_wrappers = weakref.WeakValueDictionary()  # id(NumPy array) -> its ndarray (one per array)


def _wrap(x):
    """NumPy results as this module's: arrays (the same ndarray for the same NumPy array, so
    ``out=`` and ``.base`` keep their identity), NumPy scalars as 0-d arrays, and the items
    of tuples and lists."""
    if type(x) is np.ndarray:
        w = _wrappers.get(id(x))
        if w is None or w._a is not x:
            w = object.__new__(ndarray)
            w._a = x
            _wrappers[id(x)] = w
        return w
    if isinstance(x, np.generic):
        return _wrap(np.asarray(x))
    if type(x) in (tuple, list):
        return type(x)(_wrap(i) for i in x)
    if isinstance(x, tuple):  # NumPy's named results (svd's SVDResult): a tuple, as CuPy's
        return tuple(_wrap(i) for i in x)
    return x


def _unwrap(x):
    """Arguments as NumPy's: this module's arrays to their NumPy arrays; a NumPy array is
    refused as CuPy refuses one (it would be an implicit copy to the device)."""
    if type(x) is ndarray:
        return x._a
    if type(x) is np.ndarray:
        raise _unsupported(x)
    if type(x) in (tuple, list):
        return type(x)(_unwrap(i) for i in x)
    return x


def _unwrap_host(x):
    """As ``_unwrap``, but NumPy arrays are taken (uploads, index arrays)."""
    if type(x) is ndarray:
        return x._a
    if type(x) in (tuple, list):
        return type(x)(_unwrap_host(i) for i in x)
    return x


def _call(fn, args, kwargs):
    if getattr(fn, "__name__", None) in _READING_FUNCTIONS and _holds_array((args, kwargs)):
        _read(f"{fn.__name__}()")
    args, kwargs = _unwrap(args), {k: _unwrap(v) for k, v in kwargs.items()}
    with np.errstate(all="ignore"):  # CuPy never warns of overflow, 0/0 and such
        return _wrap(fn(*args, **kwargs))


def _function(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        return _call(fn, args, kwargs)
    return call


# --- counting host reads ---------------------------------------------------------------------
#
# Every way this module lets an array's values reach the host (``get()``, ``asnumpy``,
# ``item()``, ``tolist()``, ``float()``, ``int()``, ``complex()``, ``bool()``, ``repr``,
# ``str``, ``format``, pickling, NumPy's ``tobytes``/``tofile``/``dump``/``dumps``, and
# NumPy's functions whose Python result depends on the values: ``allclose``,
# ``array_equal``, ``array_equiv``) is one read, a device synchronisation on a GPU. Inside
# ``host_reads()`` each is recorded with where it came from; outside, reads cost nothing.
# So are the reads that CuPy makes itself for a result whose shape depends on the values
# (``nonzero``, ``argwhere``, ``flatnonzero``, ``unique``, ``compress``, ``extract``,
# ``bincount``, indexing with a boolean array), which NumPy's values here do not show.
# What the module refuses is unchanged.

_READING_METHODS = ("tobytes", "tofile", "dump", "dumps")
_READING_FUNCTIONS = ("allclose", "array_equal", "array_equiv",  # a Python bool
                      # a shape that depends on the values: CuPy reads a count back
                      "nonzero", "argwhere", "flatnonzero", "unique", "compress", "extract",
                      "bincount")
_observers = []  # the record lists of the open ``host_reads()`` blocks


class HostRead(tuple):
    """One read: ``how`` (e.g. "item()"), ``where`` ("module:line in function" of the stack's
    first minigrad frame, else of the frame that read) and ``stack`` (the frames, innermost
    first, outside this module)."""

    __slots__ = ()

    def __new__(cls, how, where, stack):
        return super().__new__(cls, (how, where, stack))

    how = property(lambda self: self[0])
    where = property(lambda self: self[1])
    stack = property(lambda self: self[2])

    def __repr__(self):
        return f"{self.how} at {self.where}"


class HostReads(list):
    """The reads made inside a ``host_reads()`` block, in order (HostRead items)."""

    def report(self):
        """One line per read: how and where, with the frames that led to it."""
        if not self:
            return "no host reads"
        lines = [f"{len(self)} host read(s):"]
        for r in self:
            lines.append(f"  {r.how} at {r.where}  <- " + " <- ".join(r.stack[1:5]))
        return "\n".join(lines)

    def wheres(self):
        """The distinct places (``where``) of the reads, in order of first appearance."""
        return list(dict.fromkeys(r.where for r in self))


class host_reads:
    """``with host_reads() as reads:`` records every host read of this module's arrays made
    inside the block into ``reads`` (a HostReads list). Blocks nest; each sees its own."""

    def __enter__(self):
        self.reads = HostReads()
        _observers.append(self.reads)
        return self.reads

    def __exit__(self, *exc):
        del _observers[next(i for i, o in enumerate(_observers) if o is self.reads)]
        return False


def _read(how):
    if not _observers:
        return
    frame, stack, where = sys._getframe(1), [], None
    this = __name__
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name != this:
            place = f"{name}:{frame.f_lineno} in {frame.f_code.co_name}"
            stack.append(place)
            if where is None and (name == "minigrad" or name.startswith("minigrad.")):
                where = place
        frame = frame.f_back
    record = HostRead(how, where or (stack[0] if stack else "?"), tuple(stack))
    for reads in _observers:
        reads.append(record)


def _reading(name, method):
    @functools.wraps(method)
    def call(*args, **kwargs):
        _read(f"{name}()")
        return _call(method, args, kwargs)
    return call


def _has_mask(key):
    """Whether an index holds a boolean array of this module (a selection whose size CuPy
    reads back)."""
    keys = key if type(key) is tuple else (key,)
    return builtins.any(type(k) is ndarray and k.dtype == np.bool_ and k.ndim for k in keys)


def _holds_array(x):
    if type(x) is ndarray:
        return True
    if type(x) in (tuple, list):
        return builtins.any(_holds_array(i) for i in x)
    if type(x) is dict:
        return builtins.any(_holds_array(i) for i in x.values())
    return False


# --- the array -------------------------------------------------------------------------------

class _Device:
    """The one pretend GPU: ``cuda.Device(0)``, also a context manager, as CuPy's."""

    id = 0

    def __init__(self, device=0):
        if int(device) != 0:
            raise RuntimeError(f"CUDARuntimeError: cudaErrorInvalidDevice (device {device})")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __eq__(self, other):
        return isinstance(other, _Device)

    def __hash__(self):
        return 0

    def __repr__(self):
        return "<CUDA Device 0>"

    def synchronize(self):
        pass

    use = synchronize


_DEVICE = _Device()


def _binary(name, reflected=False):
    op = getattr(np.ndarray, name)

    def method(self, other):
        if type(other) is np.ndarray:
            raise _unsupported(other)
        if not isinstance(other, (ndarray, np.generic, int, float, complex, bool)):
            return NotImplemented
        with np.errstate(all="ignore"):
            return _wrap(op(self._a, _unwrap(other)))
    method.__name__ = name
    return method


def _inplace(name):
    op = getattr(np.ndarray, name)

    def method(self, other):
        if type(other) is np.ndarray:
            raise _unsupported(other)
        with np.errstate(all="ignore"):
            op(self._a, _unwrap(other))
        return self
    method.__name__ = name
    return method


def _unary(name):
    op = getattr(np.ndarray, name)

    def method(self):
        with np.errstate(all="ignore"):
            return _wrap(op(self._a))
    method.__name__ = name
    return method


class ndarray:
    """An array on the pretend GPU: NumPy's values behind CuPy's rules."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float):
        self._a = np.empty(shape, dtype=dtype)
        _wrappers[id(self._a)] = self

    # the refusals
    def __array__(self, dtype=None, copy=None):
        raise TypeError(IMPLICIT)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return getattr(_ufunc_of(ufunc), method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return _call(func, args, kwargs)

    def __getattr__(self, name):
        # NumPy's attributes, but none of its protocols (__array_interface__ and such)
        if name.startswith("_") or name in ("ctypes",):
            raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r}")
        value = getattr(self._a, name)
        if name in _READING_METHODS or name in _READING_FUNCTIONS:
            return _reading(name, value)
        return _function(value) if callable(value) else _wrap(value)

    @property
    def data(self):
        """The memory, as CuPy's ``MemoryPointer``: ``.ptr`` its device address."""
        return types.SimpleNamespace(ptr=self._a.ctypes.data)

    # explicit reads, as CuPy allows them (each one counted: see ``host_reads``)
    def get(self, stream=None, order="C", out=None):
        _read("get()")
        return np.array(self._a, order=order)

    def item(self):
        _read("item()")
        return self._a.item()

    def tolist(self):
        _read("tolist()")
        return self._a.tolist()

    def __float__(self):
        _read("float()")
        return float(self._a)

    def __int__(self):
        _read("int()")
        return int(self._a)

    def __complex__(self):
        _read("complex()")
        return complex(self._a)

    def __bool__(self):
        _read("bool()")
        return bool(self._a)

    def __repr__(self):
        _read("repr()")
        return repr(self._a)

    def __str__(self):
        _read("str()")
        return str(self._a)

    def __format__(self, spec):
        _read("format()")
        return format(self._a, spec)

    def __reduce__(self):
        _read("pickle")
        return array, (np.array(self._a),)

    # the array's own
    @property
    def device(self):
        return _DEVICE

    @property
    def shape(self):
        return self._a.shape

    @shape.setter
    def shape(self, shape):
        self._a.shape = shape

    @property
    def dtype(self):
        return self._a.dtype

    @property
    def ndim(self):
        return self._a.ndim

    @property
    def size(self):
        return self._a.size

    @property
    def T(self):
        return _wrap(self._a.T)

    @property
    def base(self):
        return _wrap(self._a.base)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._a)))

    def __getitem__(self, key):
        if _observers and _has_mask(key):
            _read("boolean-mask indexing")
        return _wrap(self._a[_unwrap_host(key)])

    def __setitem__(self, key, value):
        if type(value) is np.ndarray and value.ndim:
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        with np.errstate(all="ignore"):  # (a cast that overflows)
            self._a[_unwrap_host(key)] = _unwrap_host(value)

    def __copy__(self):
        return _wrap(self._a.copy())

    def __deepcopy__(self, memo):
        return _wrap(self._a.copy())

    def __hash__(self):
        raise TypeError("unhashable type: 'cupy.ndarray'")

    for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and",
                  "or", "xor", "lshift", "rshift", "divmod"):
        locals()[f"__{_name}__"] = _binary(f"__{_name}__")
        locals()[f"__r{_name}__"] = _binary(f"__r{_name}__")
        if _name != "divmod":
            locals()[f"__i{_name}__"] = _inplace(f"__i{_name}__")
    for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
        locals()[f"__{_name}__"] = _binary(f"__{_name}__")
    for _name in ("neg", "pos", "abs", "invert"):
        locals()[f"__{_name}__"] = _unary(f"__{_name}__")
    del _name


ndarray.__module__ = "cupy"
ndarray.__qualname__ = ndarray.__name__ = "ndarray"


# --- ufuncs ----------------------------------------------------------------------------------

class ufunc:
    """A NumPy ufunc under CuPy's rules, its methods included (``at`` with CuPy's dtypes)."""

    def __init__(self, np_ufunc):
        self._u = np_ufunc
        self.__name__ = np_ufunc.__name__
        self.nin, self.nout, self.nargs = np_ufunc.nin, np_ufunc.nout, np_ufunc.nargs

    def __call__(self, *args, **kwargs):
        return _call(self._u, args, _out(kwargs))

    def reduce(self, *args, **kwargs):
        return _call(self._u.reduce, args, _out(kwargs))

    def accumulate(self, *args, **kwargs):
        return _call(self._u.accumulate, args, _out(kwargs))

    def reduceat(self, a, indices, *args, **kwargs):
        return _wrap(self._u.reduceat(_unwrap(a), _unwrap_host(indices),
                                      *_unwrap(args), **_unwrap(_out(kwargs))))

    def outer(self, *args, **kwargs):
        return _call(self._u.outer, args, _out(kwargs))

    def at(self, a, indices, b=None):
        if type(a) is not ndarray:
            raise _unsupported(a)
        name = self.__name__
        if name not in AT_DTYPES:
            raise NotImplementedError(f"cupy.{name}.at is not supported")
        if a.dtype.name not in AT_DTYPES[name]:
            kinds = _AT_MESSAGE.get(name, ", ".join(AT_DTYPES[name]))
            raise TypeError(f"cupy.{name}.at only supports {kinds} as data type")
        with np.errstate(all="ignore"):
            if b is None:
                self._u.at(a._a, _unwrap_host(indices))
            else:
                self._u.at(a._a, _unwrap_host(indices), _unwrap(b))

    def __repr__(self):
        return f"<ufunc '{self.__name__}'>"


def _out(kwargs):
    out = kwargs.get("out")
    if type(out) is tuple and len(out) == 1:  # NumPy's __array_ufunc__ passes a tuple
        kwargs = dict(kwargs, out=out[0])
    return kwargs


@functools.lru_cache(maxsize=None)
def _ufunc_of(np_ufunc):
    return ufunc(np_ufunc)


# --- the module's namespace ------------------------------------------------------------------

def asarray(a, dtype=None, order=None, *, blocking=False):
    """``a`` on the device: this module's array as it is (cast to ``dtype``), host data
    copied (as CuPy's upload makes new device memory)."""
    if type(a) is ndarray:
        return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)
    return _wrap(np.array(_unwrap_host(a), dtype=dtype, order=order or "K", copy=True))


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    if type(obj) is ndarray and copy is False:
        return asarray(obj, dtype)
    return _wrap(np.array(_unwrap_host(obj), dtype=dtype, copy=True, order=order, ndmin=ndmin))


asanyarray = asarray


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if type(a) is not ndarray:
        return np.asarray(a, order=order)
    _read("asnumpy()")
    return np.array(a._a, order=order)


def get_array_module(*args):
    return sys.modules[__name__] if builtins.any(type(a) is ndarray for a in args) else np


class _Namespace(types.ModuleType):
    """A NumPy submodule (``linalg``, ``fft``, ``random``) with its functions under CuPy's
    rules."""

    def __init__(self, name, module):
        super().__init__(name)
        self._module = module

    def __getattr__(self, name):
        return _attribute(getattr(self._module, name))


def _attribute(value):
    if isinstance(value, np.ufunc):
        return _ufunc_of(value)
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)) \
            or type(value).__name__ == "_ArrayFunctionDispatcher":
        return _function(value)
    return value  # dtypes, scalar types, constants


linalg = _Namespace("cupy.linalg", np.linalg)
fft = _Namespace("cupy.fft", np.fft)
random = _Namespace("cupy.random", np.random)


class _Stream:
    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


cuda = types.SimpleNamespace(
    Device=_Device,
    Stream=lambda *args, **kwargs: _Stream(),
    get_current_stream=lambda: _Stream(),
    runtime=types.SimpleNamespace(getDeviceCount=lambda: 1),
)


def __getattr__(name):
    # numpy's function, ufunc, dtype or constant of that name; no CUDA kernels
    if name in ("ElementwiseKernel", "ReductionKernel", "RawKernel", "RawModule", "fuse"):
        raise AttributeError(f"the strict stand-in for CuPy has no {name}")
    value = _attribute(getattr(np, name))
    globals()[name] = value
    return value


def _as_strided(x, shape=None, strides=None, **kwargs):
    """``cupy.lib.stride_tricks.as_strided``: a view of x's memory with other strides."""
    return _wrap(np.lib.stride_tricks.as_strided(_unwrap(x), shape, strides, **kwargs))


lib = types.SimpleNamespace(stride_tricks=types.SimpleNamespace(as_strided=_as_strided))


# --- installing it ---------------------------------------------------------------------------

def _cupyx():
    from scipy import special
    cupyx = types.ModuleType("cupyx")
    cupyx.scipy = types.ModuleType("cupyx.scipy")
    cupyx.scipy.special = types.ModuleType("cupyx.scipy.special")
    cupyx.scipy.special.erf = _ufunc_of(special.erf)
    cupyx.scipy.special.erfc = _ufunc_of(special.erfc)
    return {"cupyx": cupyx, "cupyx.scipy": cupyx.scipy,
            "cupyx.scipy.special": cupyx.scipy.special}


def installed():
    """Whether this module is the CuPy of this process (a child process never has it)."""
    return sys.modules.get("cupy") is sys.modules[__name__]


def install():
    """Make this module minigrad's CuPy: ``import cupy`` finds it, and minigrad's backend
    forgets any CuPy it had found. Returns a function that undoes it."""
    from minigrad.backend import devices
    this = sys.modules[__name__]
    saved_modules = {n: sys.modules.get(n) for n in ("cupy", "cupyx", "cupyx.scipy",
                                                     "cupyx.scipy.special")}
    saved_cupy = devices._cupy
    sys.modules.update({"cupy": this, **_cupyx()})
    if saved_cupy is not None:
        devices._XP_BY_TYPE.pop(saved_cupy.ndarray, None)
    devices._cupy = None
    devices.cupy()

    def uninstall():
        devices._XP_BY_TYPE.pop(ndarray, None)
        devices._cupy = saved_cupy
        if saved_cupy is not None:
            devices._XP_BY_TYPE[saved_cupy.ndarray] = saved_cupy
        for n, module in saved_modules.items():
            if module is None:
                sys.modules.pop(n, None)
            else:
                sys.modules[n] = module
    return uninstall
