"""Tensor: an n-d array on a device (``.array``), plus the graph node that made it (``.grad_fn``).

Every differentiable method is either one ``Primitive`` from ``minigrad.ops`` (or
``minigrad.fused``) or a few lines of other Tensor methods (mean, var, squeeze, stack,
...): there is no other way to build a gradient. Semantics, names and defaults are PyTorch's.

This module holds the tensor itself: its data, gradient, graph node, version counter and
views, and how an in-place write is checked and recorded. How the methods read their
arguments lives below it: dims, shapes and indices in ``arguments``, numbers and dtype
promotion in ``operands``, data made into arrays in ``conversion``, random draws in
``random``; ``printing`` formats ``repr``.
"""
import builtins
import math
import warnings
import weakref
from collections import namedtuple

import numpy as np

from . import backend, dtypes
from .autograd import batching, engine, forward_ad, graph
from .autograd.grad_mode import STATE, no_grad
from .autograd.function import ShapeError, _new_history, _refresh_view, multiple_views_op
from .autograd.graph import TensorBase
from .arguments import (_alias, _arg_reduce, _broadcast_shape, _check_not_0d, _check_output_size,
                        _count, _diagonal, _dim, _dims, _gather_places, _has_arrays, _has_mask,
                        _in_range, _index, _index_add_args, _index_tensor, _int_tuple, _is_array,
                        _is_int, _kd, _logical_dims, _matrices, _normalisable, _one_dim, _reducible,
                        _repeat_counts, _repeat_index_on_device, _required_dim, _scatter_args,
                        _shape_arg, _sizes_or_keyword, _split_index, _spread)
from .conversion import (_legacy_type_name, _tensor_args, as_array, filled, legacy_alias,
                         legacy_array, tensor_data)
from .operands import (_PY_SCALARS, _alpha_sum, _clamp_operands, _concatenated, _described,
                       _fitting, _float_operands, _floating, _int_division, _no_bool,
                       _no_bool_input, _no_bool_power, _no_keywords, _operands, _py_scalar,
                       _rounded, _rounded_division, _scaled_sum, _tensor_arg, _times, _where,
                       _where_operands, _wrapped, as_tensor)
from .printing import tensor_repr
from .random import _categorical_weights, _multinomial_picks, _uniform_draw, host_generator
from .ops import (Abs, Add, Amax, Amin, Cast, Clamp, ClampTensor, Clone, Cos, CopySlices,
                  Cumprod, Cumsum, Div, Erf, Exp, Expand, Flip, GetItem,
                  IndexAddAlong, Log, LogSoftmax, MaskedFill, MaskedSelect, Prod, ProdDim,
                  Rsub, ScalarPow, Scatter, ScatterAdd, ScatterValue, Std, TensorPow, Var,
                  LogSumExp, MatMul, MatrixTranspose, Max, Maximum, MaxDim, Mean, MeanAll, Min,
                  Minimum, MinDim, Mm, Mul, Neg, NonDiff, Overwrite, Permute, Pow, Reciprocal,
                  Relu, Reshape, Roll, SetItem,
                  Sigmoid, Sign, Sin, Softmax, Split,
                  Sqrt, Squeeze, SqueezeDim, SqueezeDims, Sub, Sum, SumDim, Tanh,
                  ToDevice, Transpose, Unsqueeze, indexing_op, replay_view)
from .ops import (Ceil, Cosh, Expm1, Floor, Frac, Log1p, Round, RoundDecimals, Sinh, Trunc)
from .ops import (Atan2, Erfc, Exp2, Fmax, Fmin, Fmod, FmodScalar, Hypot, Log10, Log2, LogAddExp,
                  Sgn, Xlogy, XlogyScalar)
from .ops import (Bmm, Dot, Gather, IndexSelect, Mv, Repeat, ReshapeAlias, Rsqrt,
                  Sort, SplitWithSizes, SqueezeDimInPlace, Topk, Tril, Triu, UnsafeView)
from .ops.reduce import AbsSumNorm, CountNonzero, MaxAbsNorm, MinAbsNorm, PNorm
from .ops.shape import Diagonal, Unbind
from .ops.reduce import Logcumsumexp, MedianAll, NanmedianAll
from .ops.shape import (Cummax, Cummin, Kthvalue, MedianDim, Mode, NanmedianDim, Take,
                        Unfold)
from .fused import Gelu, GeluTanh
from .autograd import function
from .autograd.function import on_arrays, read_on_host

# NumPy ufunc -> the Tensor method that computes ``array <op> tensor``
_REFLECTED = {"add": "__radd__", "subtract": "__rsub__", "multiply": "__rmul__",
              "true_divide": "__rtruediv__", "divide": "__rtruediv__", "power": "__rpow__",
              "matmul": "__rmatmul__", "floor_divide": "__rfloordiv__",
              "remainder": "__rmod__", "less": "__gt__", "less_equal": "__ge__",
              "greater": "__lt__", "greater_equal": "__le__", "equal": "__eq__",
              "not_equal": "__ne__", "logical_and": "logical_and", "bitwise_and": "__and__",
              "logical_or": "logical_or", "bitwise_or": "__or__", "bitwise_xor": "__xor__",
              "logical_xor": "logical_xor"}
# what max(dim), min(dim), sort and topk return
ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])
MinMax = namedtuple("aminmax", ["min", "max"])  # (what aminmax returns)
_NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
    "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
    "instead.")
_new = object.__new__


class Tensor(TensorBase):
    """An n-dimensional array with reverse-mode automatic differentiation.

    ``Tensor(data, dtype=None, device=None, requires_grad=False)`` wraps an array (shared,
    not copied) or converts nested lists into the default float dtype (float32), as
    ``torch.Tensor`` does (``mg.tensor`` infers the dtype from the values). ``Tensor(2, 3)``
    and ``Tensor()`` are sizes, as PyTorch's legacy constructor reads them: zeros here,
    where PyTorch leaves the memory uninitialised.
    """

    def __array_ufunc__(self, ufunc, method, *inputs, out=None, **kwargs):
        """NumPy meets a Tensor. ``array + tensor`` (and the other operators) is the
        tensor's reflected operator; an in-place update of an array by a tensor, such as
        ``p.array -= lr * p.grad``, works on the values."""
        if out is not None and method == "__call__":
            values = [i.array if isinstance(i, Tensor) else i for i in inputs]
            targets = tuple(o.array if isinstance(o, Tensor) else o for o in out)
            return ufunc(*values, out=targets if len(targets) > 1 else targets[0], **kwargs)
        reflected = _REFLECTED.get(ufunc.__name__)
        if method == "__call__" and not kwargs and len(inputs) == 2 and \
                reflected is not None and inputs[1] is self:
            return getattr(self, reflected)(inputs[0])
        return NotImplemented
    _grad = None
    _tangents = None  # forward-mode AD: {dual level: tangent} (see autograd/forward_ad.py)

    def __init__(self, data=None, *sizes, dtype=None, device=None, requires_grad=False):
        if sizes or data is None or type(data) is builtins.int:
            data, dtype, device, requires_grad = _tensor_args(data, sizes, dtype, device,
                                                              requires_grad)
        if dtype is None and isinstance(data, (list, tuple)):
            dtype = dtypes.get_default_dtype()  # torch.Tensor([1, 2]) is float too
        self.array = as_array(data, dtype, device)
        if requires_grad:
            self.requires_grad_(True)

    @property
    def data(self):
        """PyTorch's ``.data``: a tensor sharing this one's values that does not require
        grad and whose in-place changes autograd does not see (no version bump, where
        ``detach()`` shares the version counter). ``t.data = other`` swaps the storage:
        ``t`` takes ``other``'s values, shape, dtype and device and keeps its identity,
        requires_grad and graph. The backend array itself is ``t.array``."""
        return Tensor._make(self.array)

    @data.setter
    def data(self, value):
        if not isinstance(value, TensorBase):
            raise TypeError(f"Variable data has to be a tensor, but got "
                            f"{type(value).__module__}.{type(value).__qualname__}")
        self.array = value.array

    @staticmethod
    def _make(data, requires_grad=False, grad_fn=None, out_idx=0):
        """The engine's fast constructor: ``data`` is already a backend array."""
        t = _new(Tensor)
        t.array = data
        if requires_grad:
            t._requires_grad = True
            t.grad_fn = grad_fn
            if out_idx:
                t._out_idx = out_idx
        return t

    # --- attributes -------------------------------------------------------------------------
    shape = property(lambda self: self.array.shape)
    ndim = property(lambda self: self.array.ndim)
    dtype = property(lambda self: self.array.dtype)
    device = property(lambda self: backend.device_of(self.array))
    is_cuda = property(lambda self: type(self.array) is not np.ndarray)
    T = property(lambda self: self.permute(*reversed(range(self.ndim))))
    mT = property(lambda self: self._matrix_transpose())

    def _matrix_transpose(self):
        if self.array.ndim == 1:  # (of a 0-d tensor: itself, as PyTorch)
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of "
                               f"matrices, got a {self.array.ndim}-D tensor")
        return self.transpose(-2, -1)

    @property
    def requires_grad(self):
        """Whether operations on this tensor are recorded for backward. Only a leaf's may be
        set to False (a computed tensor's: ``detach()``), only a float's to True."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        if value is not True and value is not False:
            raise RuntimeError(f"requires_grad must be a bool, got {type(value).__name__}")
        if self.grad_fn is not None:  # either way, as PyTorch's (requires_grad_(True) is fine)
            raise RuntimeError("you can only change requires_grad flags of leaf variables: use "
                               "detach() for a computed tensor that needs no gradient")
        if value and self.array.dtype.kind not in "fc":
            raise RuntimeError(f"only floating point tensors can require gradients, got "
                               f"dtype {self.dtype}")
        self._requires_grad = value

    @property
    def grad(self):
        """The gradient accumulated by backward (None until then). Reading it on a non-leaf
        that did not call ``retain_grad()`` warns, as in PyTorch: backward never fills it."""
        g = self._grad
        if g is None and self.grad_fn is not None and not self.retains_grad:
            warnings.warn(_NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got "
                                f"{type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"attempting to assign a gradient of size "
                                   f"'{list(value.shape)}' to a tensor of size "
                                   f"'{list(self.shape)}'")
            if value.dtype != self.dtype:
                raise RuntimeError(f"attempting to assign a gradient of dtype "
                                   f"'{value.dtype}' to a tensor of dtype '{self.dtype}'")
            if value.device != self.device:
                raise RuntimeError(f"attempting to assign a gradient on device "
                                   f"'{value.device}' to a tensor on device '{self.device}'")
        self._grad = value

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return self.array.ndim

    def numel(self):
        return int(self.array.size)

    nelement = numel

    def data_ptr(self):
        """The address of this tensor's first element (an int, as PyTorch's)."""
        return self.array.data.ptr if self.is_cuda else self.array.ctypes.data

    def storage_offset(self):
        """How many elements into its memory this tensor starts (0 but for a view that
        starts further in, as PyTorch's)."""
        root = self.array
        while isinstance(root.base, type(self.array)):
            root = root.base
        return (self.data_ptr() - Tensor._make(root).data_ptr()) // self.array.itemsize

    nbytes = property(lambda self: self.array.nbytes)
    itemsize = property(lambda self: self.array.itemsize)

    def ndimension(self):
        return self.array.ndim

    def element_size(self):
        return self.array.dtype.itemsize

    def is_floating_point(self):
        return self.array.dtype.kind == "f"

    def __len__(self):
        if self.array.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.array.shape[0]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __hash__(self):
        return id(self)

    # --- conversion -------------------------------------------------------------------------
    def numpy(self, *, force=False):
        """The values as a host NumPy array (shares memory on the CPU, as in PyTorch; a
        tensor that requires grad or lives on a GPU gives one too, as PyTorch's
        ``force=True`` does)."""
        read_on_host("Tensor.numpy()")
        return backend.to_host(self.array)

    def __array__(self, dtype=None, copy=None):
        read_on_host("Tensor.__array__()")
        return np.asarray(self.numpy(), dtype=dtype)

    def item(self):
        read_on_host("Tensor.item()")
        if self.array.size != 1:
            raise RuntimeError(f"a Tensor with {self.array.size} elements cannot be converted "
                               "to a Python scalar")
        return self.array.item()

    def tolist(self):
        read_on_host("Tensor.tolist()")
        return self.numpy().tolist()

    def __bool__(self):
        read_on_host("Tensor.__bool__()")
        if self.array.size != 1:
            raise RuntimeError(f"the truth value of a Tensor with {self.array.size} elements "
                               "is ambiguous")
        return builtins.bool(self.array.item())

    def __float__(self):
        read_on_host("Tensor.__float__()")
        return builtins.float(self._one_value())

    def __int__(self):
        read_on_host("Tensor.__int__()")
        return builtins.int(self._one_value())

    def _one_value(self):
        """The one element, for ``int()`` and ``float()``: PyTorch's ValueError otherwise."""
        if self.array.size != 1:
            raise ValueError(f"only one element tensors can be converted to Python scalars "
                             f"(got {self.array.size} elements, shape {tuple(self.shape)})")
        return self.array.item()

    def __index__(self):
        """An integer tensor of one element as a Python int (``[10, 20][t]``, ``range(t)``)."""
        if self.array.dtype.kind not in "biu" or self.array.size != 1:
            raise TypeError(f"only integer tensors of a single element can be converted to an "
                            f"index, got a {self.dtype} tensor of shape {tuple(self.shape)}")
        read_on_host("Tensor.__index__()")
        return builtins.int(self.array.item())

    def __format__(self, spec):
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``); any other prints as
        ``str`` with an empty spec and refuses one, as in PyTorch."""
        read_on_host("Tensor.__format__()")
        if self.array.ndim == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(f"unsupported format string {spec!r} passed to Tensor.__format__ "
                            f"(a tensor of shape {tuple(self.shape)}; format t.item() of a "
                            "0-d tensor)")
        return repr(self)

    def __repr__(self):
        read_on_host("Tensor.__repr__()")
        return tensor_repr(self)

    def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False,
           memory_format=None):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(other)``; differentiable.
        ``non_blocking`` and ``memory_format`` are accepted, and change nothing here."""
        for a in args:
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, str) and a.split(":")[0].lower() in ("cpu", "cuda"):
                device = a
            elif a is not None:
                dtype = a
        out = self
        if device is not None and backend.Device(device) != out.device:
            out = ToDevice.apply(out, device=backend.Device(device))
        if dtype is not None and dtypes.as_dtype(dtype) != out.dtype:
            out = Cast.apply(out, dtype=dtypes.as_dtype(dtype))
        return out.clone() if copy and out is self else out

    def cpu(self, memory_format=None):
        return self.to("cpu")

    def cuda(self, device=None, non_blocking=False, memory_format=None):
        return self.to("cuda" if device is None else f"cuda:{device}")

    def type(self, dtype=None, non_blocking=False, **kwargs):
        """With no argument, the name of this tensor's type in PyTorch's spelling,
        ``'torch.FloatTensor'`` (``'torch.cuda.FloatTensor'`` on a GPU), so that programs
        that compare it with PyTorch's strings work unchanged. Given a dtype, a legacy type
        (``mg.LongTensor``) or a name (``'torch.LongTensor'``, ``'minigrad.cuda.LongTensor'``),
        this tensor converted to it: itself where it has that type already."""
        if kwargs:  # (PyTorch's obsolete ``async`` spelling of non_blocking)
            _no_keywords("type", {k: v for k, v in kwargs.items() if k != "async"})
        if dtype is None:
            cuda = ".cuda" if self.is_cuda else ""
            return f"torch{cuda}.{dtypes.torch_name(self.dtype)}Tensor"
        if isinstance(dtype, str):
            return self.to(*_legacy_type_name(dtype))
        if isinstance(dtype, type) and hasattr(dtype, "is_cuda"):  # (mg.LongTensor: the CPU)
            return self.to("cuda" if dtype.is_cuda else "cpu", dtype.dtype)
        return self.to(dtype)

    float = lambda self: self.to(dtypes.float32)  # noqa: E731
    double = lambda self: self.to(dtypes.float64)  # noqa: E731
    half = lambda self: self.to(dtypes.float16)  # noqa: E731
    long = lambda self: self.to(dtypes.int64)  # noqa: E731
    int = lambda self: self.to(dtypes.int32)  # noqa: E731
    bool = lambda self: self.to(dtypes.bool)  # noqa: E731
    short = lambda self: self.to(dtypes.int16)  # noqa: E731
    byte = lambda self: self.to(dtypes.uint8)  # noqa: E731
    char = lambda self: self.to(dtypes.int8)  # noqa: E731

    def type_as(self, other):
        """This tensor with ``other``'s type: its dtype and its device, as PyTorch's
        ``self.type(other.type())`` (itself when it has both already)."""
        other = _tensor_arg("type_as", other)
        return self.to(other.device, other.dtype)

    def clone(self, *, memory_format=None):
        """A differentiable copy with its own memory, laid out as this tensor's
        (``memory_format=mg.contiguous_format``: row-major)."""
        if memory_format is dtypes.contiguous_format:
            return Clone.apply(self, dtype=self.dtype, order="C")
        return Clone.apply(self, dtype=self.dtype)

    def detach(self):
        """The same values, cut from the graph (memory and version counter are shared)."""
        t = Tensor._make(self.array)
        t._vc = self._shared_counter()
        return t

    def detach_(self):
        """Cut this tensor from the graph in place: it becomes a leaf that does not require
        grad (a view cannot be, as in PyTorch). A node that saved it for backward refuses to
        use it afterwards: its values no longer belong to the graph that saved them."""
        if self._view_of is not None:
            raise RuntimeError(f"detach_: can't detach views in-place (shape "
                               f"{tuple(self.shape)}); use detach() instead")
        if self.grad_fn is not None or self._requires_grad:
            # the same memory in a new array object: a node that saved this tensor finds
            # another array than it saved, and refuses it (SavedTensor.unpack)
            self.array = self.array.view()
            self._detached_in_place = True
        self.grad_fn = None
        self._requires_grad = False
        self._out_idx = 0
        return self

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        """Zeros of ``size``, of this tensor's dtype and device unless given (as the other
        ``new_*``)."""
        return self._new("zeros", _shape_arg(size), dtype, device, requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        return self._new("ones", _shape_arg(size), dtype, device, requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        return self._new("empty", _shape_arg(size), dtype, device, requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A new tensor holding a copy of ``data``, of this tensor's dtype and device unless
        given (as ``torch.Tensor.new_tensor``)."""
        device = self.device if device is None else device
        return Tensor(tensor_data(data, self.dtype if dtype is None else dtype), device=device,
                      requires_grad=requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
        if not isinstance(fill_value, Tensor):
            fill_value = _fitting(_py_scalar(fill_value), dtypes.as_dtype(dtype or self.dtype),
                                  "new_full")
        return self._new("full", _shape_arg((size,)), dtype, device, requires_grad,
                         fill_value)

    def _new(self, kind, shape, dtype, device, requires_grad, *fill):
        if dtype is None and device is None and not requires_grad:  # (the engine's calls)
            xp = backend.xp_of(self.array)
            return Tensor._make(getattr(xp, kind)(shape, *fill, dtype=self.dtype))
        dtype = self.dtype if dtype is None else dtype
        device = self.device if device is None else device
        if fill:  # (read as a number and checked to fit the dtype, as mg.full reads it)
            value = fill[0].item() if isinstance(fill[0], Tensor) else fill[0]
            fill = (_fitting(_py_scalar(value), dtypes.as_dtype(dtype), "full"),)
        return Tensor(filled(kind, (shape,), dtypes.as_dtype(dtype), device, *fill),
                      device=device, requires_grad=requires_grad)

    # --- autograd -------------------------------------------------------------------------------
    def requires_grad_(self, requires_grad=True):
        if requires_grad and self.array.dtype.kind not in "fc":
            raise RuntimeError(f"only floating point tensors can require gradients, "
                               f"got dtype {self.dtype}")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad_(False) on a non-leaf tensor: use detach()")
        self._requires_grad = builtins.bool(requires_grad)
        return self

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (as PyTorch does)."""
        if not graph.starts_backward(self):
            raise RuntimeError("backward: this tensor does not require grad and has no grad_fn "
                               "(did it come from a no_grad block or from constants only?)")
        gradient = engine.root_grad(self, gradient, "backward")
        engine.accumulate_grads([self], [gradient], retain_graph, create_graph, inputs)

    def retain_grad(self):
        """Keep ``.grad`` on this non-leaf tensor after backward (a no-op on leaves)."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad: the tensor does not require grad")
        node = self.grad_fn
        if node is not None:
            if node._retained is None:
                node._retained = {}
            node._retained[self._out_idx] = weakref.ref(self)

    @property
    def retains_grad(self):
        node = self.grad_fn
        return node is not None and node._retained is not None and \
            self._out_idx in node._retained

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a non-None return
        replaces the gradient. Returns a handle whose ``remove()`` unregisters it."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that does not require grad")
        if self.grad_fn is not None:
            return self.grad_fn._register_output_hook(self._out_idx, hook)
        if self._hooks is None:
            self._hooks = {}
        return graph.append_hook(self._hooks, hook)

    # --- arithmetic -----------------------------------------------------------------------------
    def __add__(self, other):
        if type(other) is Tensor and other.array.dtype is self.array.dtype:  # the usual case
            return Add.apply(self, other)
        return Add.apply(*_operands(self, other))

    def __radd__(self, other): return Add.apply(*_operands(self, other))  # (x first, as torch)

    def __sub__(self, other):
        if type(other) is Tensor and other.array.dtype is self.array.dtype and \
                self.array.dtype.kind != "b":  # the usual case
            return Sub.apply(self, other)
        return Sub.apply(*_operands(_no_bool("sub", self, other), other))

    def __rsub__(self, other):
        return Rsub.apply(*_operands(_no_bool("sub", self, other), other, True))

    def __mul__(self, other):
        if type(other) is Tensor and other.array.dtype is self.array.dtype:  # the usual case
            return Mul.apply(self, other)
        return Mul.apply(*_operands(self, other))

    def __rmul__(self, other): return Mul.apply(*_operands(self, other))  # (x first, as torch)
    def __truediv__(self, other): return Div.apply(*_float_operands(self, other))

    def __rtruediv__(self, other):
        if type(other) in _PY_SCALARS or isinstance(other, np.generic):
            return self.reciprocal() * other  # PyTorch's order of operations, bit for bit
        return Div.apply(*_float_operands(self, other, True))

    def __floordiv__(self, other): return _int_division("floor_divide", self, other)
    def __rfloordiv__(self, other): return _int_division("floor_divide", self, other, True)
    def __mod__(self, other): return _int_division("remainder", self, other)
    def __rmod__(self, other): return _int_division("remainder", self, other, True)
    def __ifloordiv__(self, other): return self._update("floor_divide_", lambda t: t // other)
    def __imod__(self, other): return self._update("remainder_", lambda t: t % other)
    floor_divide = __floordiv__
    remainder = __mod__
    def __neg__(self): return Neg.apply(_no_bool("neg", self))

    def __pos__(self):
        if self.array.dtype.kind == "b":
            raise RuntimeError(f"the `+` operator, on a bool tensor is not supported (shape "
                               f"{tuple(self.shape)})")
        return self

    def __abs__(self): return self.abs()
    def __matmul__(self, other): return self.matmul(other)
    def __rmatmul__(self, other): return as_tensor(other, like=self).matmul(self)

    def __pow__(self, exponent):
        if isinstance(exponent, _PY_SCALARS + (np.generic,)):
            if (self.array.dtype.kind in "biu" and isinstance(exponent, (builtins.int, np.integer))
                    and exponent < 0):
                raise RuntimeError("pow: integers to negative integer powers are not allowed")
            _wrapped(exponent, self.array.dtype, "pow")  # (raises if it does not fit)
            base, exponent = _operands(self, exponent)  # bool ** 2 is int64, int ** 0.5 float
            if base.array.dtype == np.float16:  # (an exponent beyond float16's range: refused)
                _fitting(exponent, base.array.dtype, "pow")
            if base.array.dtype.kind == "b":  # bool ** bool: x ** True is x, x ** False is True
                return base.clone() if exponent else base.new_ones(base.shape)
            return Pow.apply(base, exponent)
        return TensorPow.apply(*_no_bool_power(*_operands(self, exponent)))

    def __rpow__(self, base):
        base, x = _operands(self, base, True)  # 2 ** int64 is int64, 2.5 ** int64 float32
        base = Tensor._make(backend.xp_of(x.array).asarray(base, dtype=x.dtype))
        return ScalarPow.apply(*_no_bool_power(base, x))

    def add(self, other, *, alpha=1):
        """``self + alpha * other``; with an ``alpha``, rounded once, as PyTorch's fused
        multiply-add (see ``_alpha_sum``)."""
        if type(alpha) is builtins.int and alpha == 1:
            return self.__add__(other)
        return _alpha_sum("add", self, other, alpha)

    def sub(self, other, *, alpha=1):
        """``self - alpha * other`` (rounded as ``add``'s)."""
        if type(alpha) is builtins.int and alpha == 1:
            return self.__sub__(other)
        return _alpha_sum("sub", self, other, alpha)

    def div(self, other, *, rounding_mode=None):
        """``self / other``; ``rounding_mode`` "trunc" rounds the quotient toward zero,
        "floor" down. Rounded quotients of integers stay integers, and their gradient is 0."""
        if rounding_mode is None:
            return self.__truediv__(other)
        return _rounded_division(self, other, rounding_mode)

    mul = __mul__
    pow = __pow__
    neg = __neg__
    multiply, negative, subtract, divide = mul, neg, sub, div  # (NumPy's names, as PyTorch)

    def true_divide(self, other):
        return self.div(other)

    def absolute(self):
        return self.abs()

    def addcmul(self, tensor1, tensor2, *, value=1):
        """``self + value * tensor1 * tensor2`` (multiplied in that order, as PyTorch)."""
        return self + _times(value, tensor1) * tensor2

    def addcdiv(self, tensor1, tensor2, *, value=1):
        """``self + value * tensor1 / tensor2`` (true division; integers are refused)."""
        if all(t.array.dtype.kind in "biu" for t in (tensor1, tensor2)):
            raise RuntimeError("Integer division with addcdiv is no longer supported; use "
                               "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype)")
        return self + _times(value, tensor1) / tensor2

    def lerp(self, end, weight):
        """``self + weight * (end - self)``, computed as PyTorch does for accuracy near
        ``weight == 1``: ``end - (end - self) * (1 - weight)`` where weight >= 0.5."""
        if self.array.dtype.kind != "f":
            raise NotImplementedError(f"lerp: not implemented for "
                                      f"'{dtypes.torch_name(self.dtype)}'")
        diff = end - self
        if not isinstance(weight, Tensor):
            return self + weight * diff if abs(weight) < 0.5 else end - diff * (1 - weight)
        return (self + weight * diff).where(weight.abs() < 0.5, end - diff * (1 - weight))

    def addcmul_(self, tensor1, tensor2, *, value=1):
        return self._update("addcmul_", lambda t: t.addcmul(tensor1, tensor2, value=value),
                            tensor1, tensor2)

    def addcdiv_(self, tensor1, tensor2, *, value=1):
        return self._update("addcdiv_", lambda t: t.addcdiv(tensor1, tensor2, value=value),
                            tensor1, tensor2)

    def lerp_(self, end, weight):
        return self._update("lerp_", lambda t: t.lerp(end, weight), end, weight)

    def select(self, dim, index):
        """The slice at ``index`` along ``dim`` (a view without that dim)."""
        d = _dim(self, dim)
        n = self.shape[d]
        if not -n <= index < n:
            raise IndexError(f"select(): index {index} out of range for tensor of size "
                             f"{list(self.shape)} at dimension {d}")
        return self[(slice(None),) * d + (index,)]

    def diagonal(self, offset=0, dim1=0, dim2=1):
        """The entries ``[i, i + offset]`` of dims ``dim1`` and ``dim2``, as the last dim:
        a view, as PyTorch's (writes through it change this tensor)."""
        d1, d2 = _dim(self, dim1), _dim(self, dim2)
        if d1 == d2:
            raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        return Diagonal.apply(self, offset=builtins.int(offset), dim1=d1, dim2=d2)

    def diag(self, diagonal=0):
        """A vector's square matrix with it on diagonal ``diagonal`` (0 elsewhere), or a
        matrix's diagonal ``diagonal`` as a vector."""
        if self.ndim == 2:
            return self.diagonal(diagonal)
        if self.ndim != 1:
            raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {self.ndim}D")
        n = self.shape[0]
        m = n + abs(diagonal)
        first = builtins.max(-diagonal, 0) * m + builtins.max(diagonal, 0)
        places = backend.xp_of(self.array).arange(n) * (m + 1) + first
        return self.new_zeros(m * m).scatter(0, Tensor._make(places), self).reshape(m, m)

    def nan_to_num(self, nan=0.0, posinf=None, neginf=None):
        """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (by default 0 and
        the dtype's largest and lowest values); the gradient is 0 where they were."""
        if self.array.dtype.kind != "f":
            return self.clone()
        info = np.finfo(self.array.dtype)
        out = self.masked_fill(self.isnan(), nan)
        out = out.masked_fill(self == math.inf, info.max.item() if posinf is None else posinf)
        return out.masked_fill(self == -math.inf, info.min.item() if neginf is None else neginf)

    def nan_to_num_(self, nan=0.0, posinf=None, neginf=None):
        return self._update("nan_to_num_", lambda t: t.nan_to_num(nan, posinf, neginf))

    def aminmax(self, *, dim=None, keepdim=False):
        """``(min, max)`` over ``dim`` (every element without one), as ``amin`` and ``amax``."""
        if dim is not None and self.ndim and self.shape[_dim(self, dim)] == 0:
            raise IndexError(f"aminmax: Expected reduction dim {_dim(self, dim)} to have "
                             f"non-zero size.")
        if self.numel() == 0:
            raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as "
                               "the operation has no identity.")
        if dim is None:
            out = MinMax(self.amin(), self.amax())
            return MinMax(*(t.reshape((1,) * self.ndim) for t in out)) if keepdim else out
        return MinMax(self.amin(dim, keepdim), self.amax(dim, keepdim))

    def std_mean(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """``(std, mean)`` over ``dim``, as ``std`` and ``mean``."""
        return (self.std(dim, unbiased, keepdim, correction=correction),
                self.mean(dim, keepdim))

    def var_mean(self, dim=None, unbiased=None, keepdim=False, *, correction=None):
        """``(var, mean)`` over ``dim``, as ``var`` and ``mean``."""
        return (self.var(dim, unbiased, keepdim, correction=correction),
                self.mean(dim, keepdim))

    def diff(self, n=1, dim=-1, prepend=None, append=None):
        """The ``n``-th forward difference along ``dim`` (``x[i + 1] - x[i]``; of bools,
        whether they differ), after ``prepend`` and ``append`` join this tensor."""
        if self.ndim == 0:
            raise RuntimeError("diff expects input to be at least one-dimensional")
        d = _dim(self, dim)
        x = _concatenated([t for t in (prepend, self, append) if t is not None], d)
        for _ in range(n):
            if x.shape[d] == 0:
                break
            later, earlier = x.narrow(d, 1, x.shape[d] - 1), x.narrow(d, 0, x.shape[d] - 1)
            x = later != earlier if x.array.dtype.kind == "b" else later - earlier
        return x

    def bernoulli(self, *, generator=None):
        """0 or 1 (in this dtype) per element, 1 with this element's probability. Inside
        vmap with randomness "different", each element its own draws; "same": the same
        uniform draws for all (compared with each element's probabilities)."""
        return (_uniform_draw(self, "bernoulli", generator) < self).to(self.dtype)

    def bernoulli_(self, p=0.5, *, generator=None):
        """Fill with 1 with probability ``p`` (a number or a tensor), else 0: uniform draws
        made on the host, as ``uniform_``'s, compared with ``p`` on the device. Inside vmap,
        as ``bernoulli``; "different" needs this tensor batched (PyTorch's error)."""
        if not isinstance(p, Tensor) and not 0 <= p <= 1:
            raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        return self.copy_(_uniform_draw(self, "bernoulli_", generator, in_place=True) < p)

    def is_nonzero(self):
        """The one value of a one-element tensor, as a Python bool."""
        if self.numel() != 1:
            raise RuntimeError(f"Boolean value of Tensor with "
                               f"{'no values' if self.numel() == 0 else 'more than one value'}"
                               f" is ambiguous")
        return builtins.bool(self.item())

    def is_complex(self):
        return self.array.dtype.kind == "c"

    def count_nonzero(self, dim=None):
        """The number of nonzero elements (over ``dim``, an int or a tuple), as int64."""
        return (self != 0).sum(dim)

    def take_along_dim(self, indices, dim=None):
        """``gather`` with ``indices`` broadcast against this tensor (but along ``dim``);
        without ``dim``, of both flattened."""
        if dim is None:
            return self.reshape(-1).gather(0, indices.reshape(-1))
        d = _dim(self, dim)
        if indices.ndim != self.ndim:
            raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                               f"number of dimensions, but got {self.ndim} dimensions for input,"
                               f" and {indices.ndim} dimensions for indices")
        outer = [1 if k == d else n for k, n in enumerate(self.shape)]
        outer = list(np.broadcast_shapes(tuple(outer), tuple(
            1 if k == d else n for k, n in enumerate(indices.shape))))
        x = self.expand(*(outer[:d] + [self.shape[d]] + outer[d + 1:]))
        return x.gather(d, indices.expand(*(outer[:d] + [indices.shape[d]] + outer[d + 1:])))

    def trace(self):
        """The sum of a matrix's main diagonal."""
        if self.ndim != 2:
            raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.ndim}")
        return self.diagonal().sum()

    def new(self, *args):
        """PyTorch's legacy ``x.new(...)``: as ``mg.FloatTensor(...)`` (a size gives zeros),
        in this tensor's dtype and on its device."""
        if len(args) == 1 and isinstance(args[0], Tensor):
            return legacy_alias(self.dtype, args[0])
        return Tensor(legacy_array(self.dtype, self.device, args), device=self.device)

    def pin_memory(self):
        return self  # (host memory needs no pinning here)

    def is_pinned(self):
        return False

    def share_memory_(self):
        return self

    def matmul(self, other):
        """Matrix product with PyTorch's rules for 1-D operands and broadcast batch dims."""
        other = as_tensor(other, like=self)
        if self.array.dtype.kind == "b" or other.array.dtype.kind == "b":
            raise NotImplementedError(f"matmul: not implemented for 'Bool' (shapes "
                                      f"{tuple(self.shape)} and {tuple(other.shape)})")
        if self.ndim == 0 or other.ndim == 0:
            raise ShapeError(f"matmul: both arguments need at least 1 dimension, got shapes "
                             f"{self.shape} and {other.shape}")
        inner = other.shape[-2] if other.ndim > 1 else other.shape[0]
        if self.shape[-1] != inner:
            raise ShapeError(f"matmul: shapes {self.shape} and {other.shape} are not aligned")
        if other.ndim == 2:  # (PyTorch's graph: mm, or unsqueeze, mm and squeeze_)
            if self.ndim == 2:
                return Mm.apply(self, other)
            if self.ndim == 1:
                return SqueezeDimInPlace.apply(Mm.apply(self.unsqueeze(0), other),
                                               shape=other.shape[1:])
        elif other.ndim == 1 and self.ndim <= 2:
            return (Dot if self.ndim == 1 else Mv).apply(self, other)
        x = self.unsqueeze(0) if self.ndim == 1 else self
        y = other.unsqueeze(-1) if other.ndim == 1 else other
        out = MatMul.apply(x, y)
        if other.ndim == 1:
            out = out.squeeze(-1)
        if self.ndim == 1:
            out = out.squeeze(-2 if other.ndim > 1 else -1)
        return out

    # --- comparisons and logic (no gradient) -------------------------------------------------
    def _cmp(self, other, fn):
        if other is None or isinstance(other, str):  # (== then is False and < a TypeError,
            return NotImplemented                     # as in PyTorch)
        return NonDiff.apply(*_operands(self, other), fn=fn)

    __lt__ = lambda self, o: self._cmp(o, "less")  # noqa: E731
    __le__ = lambda self, o: self._cmp(o, "less_equal")  # noqa: E731
    __gt__ = lambda self, o: self._cmp(o, "greater")  # noqa: E731
    __ge__ = lambda self, o: self._cmp(o, "greater_equal")  # noqa: E731
    __eq__ = lambda self, o: self._cmp(o, "equal")  # noqa: E731
    __ne__ = lambda self, o: self._cmp(o, "not_equal")  # noqa: E731
    logical_and = lambda self, o: self._logical(o, "logical_and")  # noqa: E731
    logical_or = lambda self, o: self._logical(o, "logical_or")  # noqa: E731
    logical_xor = lambda self, o: self._logical(o, "logical_xor")  # noqa: E731

    def _logical(self, other, fn):
        """``logical_and``/``or``/``xor``: the other operand is a tensor (or an array), never
        a number, as in PyTorch."""
        if type(other) in _PY_SCALARS or isinstance(other, np.generic):
            raise TypeError(f"{fn}(): argument 'other' (position 1) must be Tensor, not "
                            f"{type(other).__name__}")
        return self._cmp(other, fn)

    def _bitwise(self, other, fn):
        """``&``, ``|``, ``^``: bitwise on integers (and on bools, where it is logical), as in
        PyTorch; floating point operands are refused."""
        if other is None:
            return NotImplemented
        x, y = _operands(self, other)
        if x.array.dtype.kind not in "biu":
            raise NotImplementedError(f"{fn}: not implemented for floating point operands "
                                      f"(got {_described(self)} and {_described(other)})")
        return NonDiff.apply(x, y, fn=fn)

    __and__ = __rand__ = bitwise_and = lambda self, o: self._bitwise(o, "bitwise_and")  # noqa
    __or__ = __ror__ = bitwise_or = lambda self, o: self._bitwise(o, "bitwise_or")  # noqa
    __xor__ = __rxor__ = bitwise_xor = lambda self, o: self._bitwise(o, "bitwise_xor")  # noqa
    lt, le, gt, ge, eq, ne = __lt__, __le__, __gt__, __ge__, __eq__, __ne__

    def __invert__(self):
        if self.array.dtype.kind not in "biu":
            raise TypeError(f"~ (operator.invert) is only implemented on integer and bool "
                            f"tensors, got {_described(self)}")
        return NonDiff.apply(self, fn="logical_not" if self.dtype == dtypes.bool else "invert")

    def logical_not(self): return NonDiff.apply(self, fn="logical_not")

    def sign(self):  # (the sign of a bool is itself, as in PyTorch)
        return self.clone() if self.dtype == dtypes.bool else Sign.apply(self, fn="sign")

    def isnan(self): return NonDiff.apply(self, fn="isnan")
    def isinf(self): return NonDiff.apply(self, fn="isinf")
    def isfinite(self): return NonDiff.apply(self, fn="isfinite")

    def all(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """True where every element (over dim) is nonzero; a bool tensor. ``dim=()``
        reduces over no dim (each element's truth), as PyTorch."""
        out = NonDiff.apply(self, fn="all", axis=_logical_dims(self, dim, axis),
                            keepdims=_kd(keepdim, keepdims))
        return out.to(dtypes.uint8) if self.dtype == dtypes.uint8 else out  # as PyTorch

    def any(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """True where some element (over dim) is nonzero; a bool tensor (``dim=()``: see
        ``all``)."""
        out = NonDiff.apply(self, fn="any", axis=_logical_dims(self, dim, axis),
                            keepdims=_kd(keepdim, keepdims))
        return out.to(dtypes.uint8) if self.dtype == dtypes.uint8 else out  # as PyTorch

    def argmax(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return _arg_reduce(self, _alias(dim, axis), _kd(keepdim, keepdims), MaxDim)

    def argmin(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return _arg_reduce(self, _alias(dim, axis), _kd(keepdim, keepdims), MinDim)

    # --- elementwise ------------------------------------------------------------------------
    # float functions of integer tensors compute in the default float dtype, as in PyTorch
    def exp(self): return Exp.apply(_floating(self))
    def log(self): return Log.apply(_floating(self))
    def sqrt(self): return Sqrt.apply(_floating(self))
    def abs(self): return Abs.apply(_no_bool_input(self, "abs", NotImplementedError))
    def tanh(self): return Tanh.apply(_floating(self))
    def sigmoid(self): return Sigmoid.apply(_floating(self))
    def relu(self): return Relu.apply(_no_bool_input(self, "relu", RuntimeError))
    def sin(self): return Sin.apply(_floating(self))
    def cos(self): return Cos.apply(_floating(self))
    def erf(self): return Erf.apply(_floating(self))
    def sinh(self): return Sinh.apply(_floating(self))
    def cosh(self): return Cosh.apply(_floating(self))
    def log1p(self): return Log1p.apply(_floating(self))
    def expm1(self): return Expm1.apply(_floating(self))
    def floor(self): return _rounded(self, "floor", Floor)
    def ceil(self): return _rounded(self, "ceil", Ceil)
    def trunc(self): return _rounded(self, "trunc", Trunc)
    fix = trunc

    def round(self, *, decimals=0):
        """The nearest integer, halves to even (``decimals``: to that many decimal places,
        negative ones left of the point, as PyTorch computes it); integers are kept."""
        if not isinstance(decimals, builtins.int) or isinstance(decimals, builtins.bool):
            raise TypeError(f"round(): argument 'decimals' must be int, not "
                            f"{type(decimals).__name__}")
        if decimals == 0:
            return _rounded(self, "round", Round)
        if self.array.dtype.kind != "f":
            raise NotImplementedError(f"round: decimals apply to floating point tensors, got "
                                      f"{self.dtype} (shape {tuple(self.shape)})")
        return RoundDecimals.apply(self, decimals=decimals)

    def frac(self):
        """``self - trunc(self)``, for floating point tensors; its gradient is ``grad``."""
        if self.array.dtype.kind != "f":
            raise NotImplementedError(f"frac: only floating point tensors are supported, got "
                                      f"{self.dtype} (shape {tuple(self.shape)})")
        return Frac.apply(self)

    def square(self):  # x ** 2, as PyTorch (PowBackward0; a bool squared is int64)
        return Pow.apply(self.long() if self.array.dtype.kind == "b" else self, 2)

    def rsqrt(self): return Rsqrt.apply(_floating(self))
    def reciprocal(self): return Reciprocal.apply(_floating(self))
    def maximum(self, other): return Maximum.apply(*_operands(self, _tensor_arg("maximum", other)))
    def minimum(self, other): return Minimum.apply(*_operands(self, _tensor_arg("minimum", other)))
    def log10(self): return Log10.apply(_floating(self))
    def log2(self): return Log2.apply(_floating(self))
    def exp2(self): return Exp2.apply(_floating(self))
    def erfc(self): return Erfc.apply(_floating(self))

    def sgn(self):
        """The sign of a real tensor (-1, 0 or 1; 0 at NaN): ``sign``, as PyTorch's ``sgn``
        (SgnBackward0). A bool tensor is itself."""
        return self.clone() if self.dtype == dtypes.bool else Sgn.apply(self, fn="sign")

    def signbit(self):
        """True where the sign bit is set (negative numbers, -0.0, NaNs with the bit); a
        bool tensor, not differentiable."""
        return NonDiff.apply(self, fn="signbit")

    def atan2(self, other):
        """The angle of the point (other, self) in (-pi, pi]; integers give floats."""
        return Atan2.apply(*_float_operands(self, _tensor_arg("atan2", other)))

    arctan2 = atan2

    def hypot(self, other):
        """sqrt(self^2 + other^2), for floating point tensors."""
        return Hypot.apply(*_floats_only("hypot", *_operands(self, _tensor_arg("hypot", other))))

    def logaddexp(self, other):
        """log(exp(self) + exp(other)), for floating point tensors."""
        return LogAddExp.apply(*_floats_only("logaddexp", *_operands(
            self, _tensor_arg("logaddexp", other))))

    def fmod(self, other):
        """The remainder of self / other with the sign of self (C's fmod; ``remainder`` has
        the sign of other). Integers stay integers; an integer division by zero raises."""
        x, y = _operands(self, other)
        if x.array.dtype.kind == "b" and (not isinstance(y, Tensor) or y.array.dtype.kind == "b"):
            raise NotImplementedError(f"fmod: not implemented for bool tensors (got "
                                      f"{_described(self)} and {_described(other)})")
        if x.array.dtype.kind in "iu" and (y == 0 if not isinstance(y, Tensor)
                                           else builtins.bool((y == 0).any())):
            raise RuntimeError("fmod: ZeroDivisionError (integer division by zero)")
        return (Fmod if isinstance(y, Tensor) else FmodScalar).apply(x, y)

    def xlogy(self, other):
        """self * log(other), 0 where self == 0 (NaN where other is NaN); integers give
        floats; ``other`` may be a number."""
        x, y = _float_operands(self, other)
        return (Xlogy if isinstance(y, Tensor) else XlogyScalar).apply(x, y)

    def fmax(self, other):
        """The larger of self and other, elementwise, ignoring a NaN on one side."""
        return Fmax.apply(*_operands(self, _tensor_arg("fmax", other)))

    def fmin(self, other):
        """The smaller of self and other, elementwise, ignoring a NaN on one side."""
        return Fmin.apply(*_operands(self, _tensor_arg("fmin", other)))

    def gelu(self, approximate="none"):
        """x * Phi(x), exactly with erf, or PyTorch's tanh approximation."""
        if approximate not in ("none", "tanh"):
            raise RuntimeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        if self.array.dtype.kind != "f":
            raise NotImplementedError(f"gelu: not implemented for {self.dtype} tensors (shape "
                                      f"{tuple(self.shape)}); call .float() first")
        return (Gelu if approximate == "none" else GeluTanh).apply(self)

    def clamp(self, min=None, max=None):
        """Each element limited to [min, max]; the bounds are numbers, or tensors that
        broadcast with this one (then each gets a gradient where it is the result)."""
        if min is None and max is None:
            raise RuntimeError("clamp: at least one of 'min' or 'max' must not be None")
        if isinstance(min, Tensor) or isinstance(max, Tensor):
            if all(b is None or isinstance(b, Tensor) for b in (min, max)):
                return ClampTensor.apply(*_clamp_operands(self, min, max))
            if any(isinstance(b, Tensor) and b.ndim for b in (min, max)):
                raise TypeError(f"clamp: min and max must both be tensors (or None) or both "
                                f"numbers (a 0-d tensor reads as a number), got "
                                f"{_described(min)} and {_described(max)}")
            min, max = (b.item() if isinstance(b, Tensor) else b for b in (min, max))
        x = self
        kind = self.array.dtype.kind
        if kind in "biu" and any(isinstance(b, builtins.float) for b in (min, max)):
            x = self.to(dtypes.get_default_dtype())  # a float bound makes the result float
        elif kind == "b" and all(b is None or type(b) is builtins.bool for b in (min, max)):
            raise NotImplementedError(f"clamp: not implemented for bool tensors with bool "
                                      f"bounds (shape {tuple(self.shape)})")
        # an int bound is wrapped to an integer dtype, as PyTorch's C cast; a bound beyond
        # float32's (or float16's) range is refused
        min, max = (_fitting(b, x.array.dtype, "clamp") for b in (min, max))
        return Clamp.apply(x, min=min, max=max)

    clip = clamp

    def clamp_min(self, min):
        return self.clamp(min=min)

    def clamp_max(self, max):
        return self.clamp(max=max)

    def broadcast_to(self, size):
        return self.expand(size)

    def where(self, condition, other):
        """``self`` where ``condition`` holds, else ``other`` (PyTorch's Tensor.where)."""
        return _where(condition, *_where_operands(self, other))

    def masked_fill(self, mask, value):
        """``self`` with ``value`` where ``mask`` is True; the result keeps self's dtype."""
        mask = as_tensor(mask, like=self)
        if mask.dtype != dtypes.bool:
            raise RuntimeError(f"masked_fill: only bool masks are supported, got a mask of "
                               f"dtype {mask.dtype} (shape {tuple(mask.shape)})")
        if isinstance(value, Tensor):
            if value.ndim != 0:
                raise RuntimeError(f"masked_fill: only a 0-d value tensor is supported, got "
                                   f"shape {tuple(value.shape)}")
            if self.array.dtype.kind == "f":
                return MaskedFill.apply(mask, value.to(self.dtype), self)
            value = value.item()  # (no gradient to keep: read as a number, checked as one)
        kind = self.array.dtype.kind
        if type(value) in (builtins.int, builtins.float) and kind in "iuf":
            value = _fitting(value, self.array.dtype, "masked_fill")
            if kind != "f":
                value = builtins.int(value)  # 2.5 into an int tensor is 2
        elif kind != "f":
            value = self.array.dtype.type(value).item()
        return MaskedFill.apply(mask, value, self)

    # --- reductions --------------------------------------------------------------------------
    # float16 is reduced in float32 and the result rounded once, as PyTorch does on the CPU
    # (summed in float16, 40000 + 40000 is already inf)

    def sum(self, dim=None, keepdim=False, *, axis=None, keepdims=None, dtype=None):
        if dtype is None and self.array.dtype.kind in "biu":
            dtype = dtypes.int64  # integers and bools are summed as int64, as in PyTorch
        op = Sum if dim is None and axis is None else SumDim  # (PyTorch's two node names)
        if dtype is not None:
            dtype = dtypes.as_dtype(dtype)
            if dtype != self.array.dtype and dtype.kind == self.array.dtype.kind == "f" and \
                    dtype != np.float16:  # cast inside the sum: one node, as PyTorch's
                return op.apply(self, dims=_dims(self, dim, axis),
                                keepdim=_kd(keepdim, keepdims), dtype=dtype)
        x = self if dtype is None else self.to(dtype)
        if x.array.dtype == np.float16:
            return x.float().sum(dim, keepdim, axis=axis, keepdims=keepdims).half()
        return op.apply(x, dims=_dims(self, dim, axis), keepdim=_kd(keepdim, keepdims))

    def mean(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
        """The mean over ``dim``, of a floating point tensor (or computed in ``dtype``)."""
        x = self if dtype is None else self.to(dtype)
        if x.dtype.kind != "f":
            raise RuntimeError(f"mean(): could not infer output dtype: the input (or dtype=) "
                               f"must be floating point, got {x.dtype} (shape {self.shape})")
        if x.array.dtype == np.float16:
            return x.float().mean(dim, keepdim, axis=axis, keepdims=keepdims).half()
        op = MeanAll if dim is None and axis is None else Mean  # (PyTorch's two node names)
        dims = _dims(x, dim, axis)
        return op.apply(x, dims=dims, keepdim=_kd(keepdim, keepdims), count=_count(x, dims))

    def prod(self, dim=None, keepdim=False, *, dtype=None, axis=None, keepdims=None):
        """The product of the elements (along ``dim``, one int, when given). Integers and
        bools are multiplied as int64, as ``sum`` adds them; ``dtype`` casts the input
        first. The gradient is exact where the input holds zeros (see ``ops.Prod``)."""
        dim = _alias(dim, axis)
        if dim is not None and not _is_int(dim):
            raise TypeError(f"prod(): argument 'dim' must be int, not {type(dim).__name__}")
        if dim is None and (keepdim or keepdims):
            raise TypeError("prod(): keepdim needs a dim (the product of every element is "
                            "0-d)")
        if dtype is None and self.array.dtype.kind in "biu":
            dtype = dtypes.int64
        x = self if dtype is None else self.to(dtype)
        if dim is None:
            return Prod.apply(x)
        return ProdDim.apply(x, dims=_dims(x, dim, None),
                             keepdim=builtins.bool(_kd(keepdim, keepdims)))

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
            keepdims=None):
        """Variance with Bessel's correction by default (``correction=1``), as PyTorch."""
        return _spread(self, Var, dim, unbiased, keepdim, correction, axis, keepdims)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None,
            keepdims=None):
        """Standard deviation: the square root of ``var`` (same arguments)."""
        return _spread(self, Std, dim, unbiased, keepdim, correction, axis, keepdims)

    def max(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        """Without dim: the largest value. With an int dim: (values, indices). With a
        Tensor: elementwise maximum, as torch.max(a, b)."""
        return _extreme(self, dim, keepdim, axis, keepdims, Max, MaxDim, Maximum)

    def min(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        return _extreme(self, dim, keepdim, axis, keepdims, Min, MinDim, Minimum)

    def norm(self, p="fro", dim=None, keepdim=False, dtype=None):
        """The p-norm over ``dim`` (every dim by default), as ``torch.Tensor.norm``: "fro"
        and 2 give sqrt(sum x^2), inf and -inf the largest and smallest |x|, 0 the count of
        nonzeros, any other p (sum |x|^p)^(1/p): one node each, with PyTorch's gradient
        where a derivative is infinite (0 wherever x is 0 or the norm is 0). A sum of powers
        past the dtype's range gives inf, as PyTorch; float16 is summed in float32."""
        x = self if dtype is None else self.to(dtype)
        if x.dtype.kind not in "fc":
            raise RuntimeError(f"norm: expected a floating point or complex tensor as input, "
                               f"got {x.dtype}")
        if isinstance(p, str):
            if p != "fro":
                raise RuntimeError(f"norm: order {p!r} is not supported (a number, inf, -inf "
                                   f"or 'fro')")
            if isinstance(dim, (tuple, list)) and len(dim) > 2:
                raise RuntimeError(f"norm: p='fro' takes at most 2 dims, got dim={tuple(dim)}")
            p = 2
        dims = _dims(x, dim, None)
        keepdim = builtins.bool(keepdim)
        if p == float("inf"):
            return MaxAbsNorm.apply(x, dims=_reducible(x, "amax", dims), keepdim=keepdim)
        if p == float("-inf"):
            return MinAbsNorm.apply(x, dims=_reducible(x, "amin", dims), keepdim=keepdim)
        if p == 0:  # a count: in the graph, but no gradient reaches x, as in PyTorch
            return CountNonzero.apply(x, dims=dims, keepdim=keepdim)
        if p == 1:
            return AbsSumNorm.apply(x, dims=dims, keepdim=keepdim)
        return PNorm.apply(x, p=p, dims=dims, keepdim=keepdim)

    def amax(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        dims = _reducible(self, "amax", _alias(dim, axis))
        return Amax.apply(self, dims=dims, keepdim=_kd(keepdim, keepdims))

    def amin(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        dims = _reducible(self, "amin", _alias(dim, axis))
        return Amin.apply(self, dims=dims, keepdim=_kd(keepdim, keepdims))

    def logsumexp(self, dim=None, keepdim=False, *, axis=None, keepdims=None):
        if self.array.dtype == np.float16:
            return self.float().logsumexp(dim, keepdim, axis=axis, keepdims=keepdims).half()
        return LogSumExp.apply(_floating(self), dims=_dims(self, dim, axis),
                               keepdim=_kd(keepdim, keepdims))

    def softmax(self, dim=None, dtype=None, *, axis=None):
        x = _normalisable(self, "softmax", dtype)
        if x.array.dtype == np.float16:
            return x.float().softmax(dim, axis=axis).half()
        return Softmax.apply(x, dim=_one_dim(x, _required_dim("softmax", dim, axis)))

    def log_softmax(self, dim=None, dtype=None, *, axis=None):
        x = _normalisable(self, "log_softmax", dtype)
        if x.array.dtype == np.float16:
            return x.float().log_softmax(dim, axis=axis).half()
        return LogSoftmax.apply(x, dim=_one_dim(x, _required_dim("log_softmax", dim, axis)))

    def cumsum(self, dim=None, *, dtype=None, axis=None):
        """The running sum along ``dim``: ``out[i] = x[0] + ... + x[i]``. Integers and bools
        are summed as int64, as by ``sum``; ``dtype`` casts the input first."""
        d = _dim(self, _required_dim("cumsum", dim, axis))
        if dtype is None:
            dtype = dtypes.int64 if self.array.dtype.kind in "biu" else self.dtype
        return Cumsum.apply(self, dim=d, dtype=dtypes.as_dtype(dtype))

    def cumprod(self, dim=None, *, dtype=None, axis=None):
        """The running product along ``dim``: ``out[i] = x[0] * ... * x[i]``. Integers and
        bools are multiplied as int64, as by ``cumsum``; ``dtype`` casts the input first.
        The gradient is exact where the input holds zeros (see ``ops.Cumprod``)."""
        d = _dim(self, _required_dim("cumprod", dim, axis))
        if dtype is None and self.array.dtype.kind in "biu":
            dtype = dtypes.int64
        x = self if dtype is None else self.to(dtype)
        if x.dtype == dtypes.bool:
            raise NotImplementedError(f"cumprod: not implemented for bool results (input "
                                      f"shape {tuple(self.shape)}, dtype={dtype})")
        return Cumprod.apply(x, dim=d)

    # --- shape ------------------------------------------------------------------------------
    def reshape(self, *sizes, shape=None):
        """A tensor of the given shape with these values: a view when the memory allows
        it (always a new tensor, as in PyTorch, even for the same shape)."""
        shape = _new_shape("reshape", self, _sizes_or_keyword("reshape", sizes, shape, "shape"))
        data = self.array
        if data.flags.c_contiguous:
            return Reshape.apply(self, shape=shape)
        # as PyTorch: a view of another layout, or a row-major copy seen with the shape
        if _viewable(data, shape):
            return ReshapeAlias.apply(self, shape=shape)
        return UnsafeView.apply(Clone.apply(self, dtype=self.dtype, order="C"), shape=shape)

    def view(self, *sizes, size=None, dtype=None):
        """The same memory seen with another shape. Unlike reshape, never a copy: where the
        layout (a transpose, a slice, an expand) cannot be seen with that shape, a
        RuntimeError, as in PyTorch (use reshape or contiguous() there). ``view(dtype)``:
        the same bytes read as another dtype (``_view_as_dtype``)."""
        if len(sizes) == 1 and isinstance(sizes[0], (np.dtype, type)):
            sizes, dtype = (), sizes[0]
        if dtype is not None:
            if sizes or size is not None:
                raise TypeError("view: takes a shape or a dtype, not both")
            return self._view_as_dtype(dtype)
        shape = _new_shape("view", self, _sizes_or_keyword("view", sizes, size, "size"))
        if not (self.array.flags.c_contiguous or _viewable(self.array, shape)):
            raise RuntimeError(f"view: the size {list(shape)} is not compatible with the "
                               f"input's size {list(self.shape)} and strides (at least one "
                               "dimension spans across two contiguous subspaces); use "
                               ".reshape(...) instead")
        return Reshape.apply(self, shape=shape)

    def _view_as_dtype(self, dtype):
        """The same memory read as ``dtype``, as ``torch.Tensor.view(dtype)``: no gradient;
        where the element size differs, the last dim (of stride 1) holds proportionally more
        or fewer elements."""
        dtype = dtypes.as_dtype(dtype)
        data, size = self.array, self.array.dtype.itemsize
        if dtype.itemsize != size:
            if data.ndim == 0:
                raise RuntimeError(f"view: a 0-d tensor cannot be viewed as {dtype} from "
                                   f"{self.dtype} (different element sizes)")
            if data.strides[-1] != size and data.shape[-1] != 1:
                raise RuntimeError(f"view: the last dim must have stride 1 to view {self.dtype} "
                                   f"as {dtype} (different element sizes; shape "
                                   f"{tuple(self.shape)}, strides in elements "
                                   f"{tuple(n // size for n in data.strides)})")
            if (data.shape[-1] * size) % dtype.itemsize:
                raise RuntimeError(f"view: the last dim's size {data.shape[-1]} must be "
                                   f"divisible by {dtype.itemsize // size} to view "
                                   f"{self.dtype} as {dtype}")
            if data.strides[-1] != size:  # (a last dim of 1 element: any stride will do)
                data = data.reshape(data.shape)
        return Tensor._make(data.view(dtype))

    def view_as(self, other):
        return self.view(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def t(self):
        """The transpose of a matrix (a tensor of at most 2 dims is returned as it is)."""
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but it is "
                               f"{self.ndim}D (shape {tuple(self.shape)}); use transpose or mT")
        return MatrixTranspose.apply(self, dims=tuple(reversed(range(self.ndim))))

    def contiguous(self, memory_format=None):
        """This tensor if its memory is in row-major order, else a copy that is (so that
        ``x.transpose(1, 2).contiguous().view(...)`` works, as in PyTorch)."""
        if self.array.flags.c_contiguous:
            return self
        return Clone.apply(self, dtype=self.dtype, order="C")

    def is_contiguous(self):
        """Whether the memory is in row-major order (``view`` needs no copy then)."""
        return builtins.bool(self.array.flags.c_contiguous)

    def stride(self, dim=None):
        """Steps in elements between neighbours along each dim, as PyTorch's."""
        steps = tuple(s // self.array.itemsize for s in self.array.strides)
        return steps if dim is None else steps[_dim(self, dim)]

    def permute(self, *order, dims=None):
        dims = tuple(_dim(self, d) for d in _shape_arg(
            _sizes_or_keyword("permute", order, dims, "dims")))
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(f"permute: dims {dims} are not a permutation of the {self.ndim} "
                             f"dims of a tensor of shape {self.shape}")
        return Permute.apply(self, dims=dims)

    def transpose(self, dim0, dim1):
        dims = list(range(self.ndim))
        d0, d1 = _dim(self, dim0), _dim(self, dim1)
        if self.ndim == 0:
            return self
        dims[d0], dims[d1] = dims[d1], dims[d0]
        return Transpose.apply(self, dims=tuple(dims))

    swapaxes = swapdims = transpose

    def movedim(self, source, destination):
        """The dims ``source`` (an int or a sequence of ints) moved to the places
        ``destination``, the other dims keeping their order (a view, as ``permute``)."""
        src = _int_tuple("movedim", "source", source)
        dst = _int_tuple("movedim", "destination", destination)
        if len(src) != len(dst):
            raise RuntimeError(f"movedim: Invalid source or destination dims: source "
                               f"({list(src)} dims) should contain the same number of dims as "
                               f"destination ({list(dst)} dims)")
        src = tuple(_dim(self, d) for d in src)
        dst = tuple(_dim(self, d) for d in dst)
        for name, dims, given in (("source", src, source), ("destination", dst, destination)):
            if len(set(dims)) != len(dims):
                raise RuntimeError(f"movedim: repeated dim in `{name}` ({given})")
        if self.ndim == 0:
            return self.permute(())
        order = [None] * self.ndim
        for s_, d_ in zip(src, dst):
            order[d_] = s_
        rest = iter(d for d in range(self.ndim) if d not in src)
        return self.permute(tuple(next(rest) if o is None else o for o in order))

    moveaxis = movedim

    def narrow(self, dim, start, length):
        """The ``length`` entries from ``start`` along ``dim`` (a view)."""
        if self.ndim == 0:
            raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
        d = _dim(self, dim)
        start, length = (builtins.int(v) if isinstance(v, Tensor) else v for v in (start, length))
        size = self.shape[d]
        if not -size <= start <= size:
            raise IndexError(f"narrow(): start out of range (expected to be in range of "
                             f"[{-size}, {size}], but got {start}) for dim {d} of shape "
                             f"{tuple(self.shape)}")
        if length < 0:
            raise RuntimeError(f"narrow(): length must be non-negative, got {length}")
        start = start + size if start < 0 else start
        if start + length > size:
            raise RuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dimension "
                               f"size ({size}) of dim {d} (shape {tuple(self.shape)})")
        return self[(slice(None),) * d + (slice(start, start + length),)]

    def unflatten(self, dim, sizes):
        """Dim ``dim`` split into dims of ``sizes`` (one of them may be -1), a view."""
        if self.ndim == 0:
            raise RuntimeError(f"unflatten: Dimension specified as {dim} but tensor has no "
                               "dimensions")
        d = _dim(self, dim)
        sizes = _int_tuple("unflatten", "sizes", sizes)
        if not sizes:
            raise RuntimeError("unflatten: sizes must be non-empty")
        if sizes.count(-1) > 1 or builtins.any(n < -1 for n in sizes):
            raise RuntimeError(f"unflatten: only one dimension can be inferred, and sizes must "
                               f"be >= -1, got sizes {list(sizes)}")
        known = math.prod(n for n in sizes if n != -1)
        n = self.shape[d]
        if (n != known) if -1 not in sizes else (known == 0 or n % known):
            raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to "
                               f"the size of dim {d} ({n}) in the input tensor")
        sizes = tuple(n // known if s_ == -1 else s_ for s_ in sizes)
        return self.view(self.shape[:d] + sizes + self.shape[d + 1:])

    def unsqueeze(self, dim=None, *, axis=None):
        d = _dim(self, _required_dim("unsqueeze", dim, axis), self.ndim + 1)
        return Unsqueeze.apply(self, shape=self.shape[:d] + (1,) + self.shape[d:])

    def squeeze(self, dim=None, *, axis=None):
        dim = _alias(dim, axis)
        dims = range(self.ndim) if dim is None else () if dim in ((), []) else \
            _dims(self, dim, None)  # (no dims: nothing squeezed, unlike a reduction's)
        shape = tuple(n for i, n in enumerate(self.shape) if not (i in dims and n == 1))
        op = Squeeze if dim is None else SqueezeDim if isinstance(dim, _PY_SCALARS) \
            else SqueezeDims  # (PyTorch's three node names)
        return op.apply(self, shape=shape)

    def flatten(self, start_dim=0, end_dim=-1):
        if self.ndim == 0:  # (a 0-d tensor's dims are -1 and 0, as a 1-d one's)
            for d in (start_dim, end_dim):
                if d not in (-1, 0):
                    raise IndexError(f"flatten: dimension out of range (expected to be in "
                                     f"range of [-1, 0], but got {d}) for a 0-d tensor")
            return self.reshape(1)
        s, e = _dim(self, start_dim), _dim(self, end_dim)
        if s > e:
            raise RuntimeError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                               f"(shape {tuple(self.shape)})")
        if s == e:  # no dims to flatten together: the tensor itself, as in PyTorch
            return self
        return self.reshape(self.shape[:s] + (math.prod(self.shape[s:e + 1]),) +
                            self.shape[e + 1:])  # (not -1: a size 0 leaves -1 undecided)

    def expand(self, *sizes, size=None):
        sizes = _shape_arg(_sizes_or_keyword("expand", sizes, size, "size"))
        lead = len(sizes) - self.ndim
        if lead < 0:
            raise ShapeError(f"expand: the target shape {sizes} has fewer dims than the "
                             f"tensor's shape {self.shape}")
        if -1 in sizes[:lead]:
            raise RuntimeError(f"expand: the size -1 isn't allowed in a leading, new dimension "
                               f"({sizes[:lead].index(-1)} of {sizes}, tensor shape {self.shape})")
        target = tuple(n if n != -1 else self.shape[i - lead] for i, n in enumerate(sizes))
        for i, n in enumerate(self.shape):
            if n != 1 and n != target[lead + i]:
                raise ShapeError(f"expand: cannot expand shape {self.shape} to {target} "
                                 f"(dim {lead + i}: {n} is not 1 and differs from "
                                 f"{target[lead + i]})")
        return Expand.apply(self, shape=target)  # (a new view even of the same shape, as torch)

    def expand_as(self, other):
        return self.expand(other.shape)

    def _expand_to(self, shape):
        """``expand(shape)``, or this tensor itself where it has that shape already: for
        minigrad's own rules, where a node that changes nothing is only a cost."""
        return self if tuple(shape) == self.shape else self.expand(shape)

    def split(self, split_size, dim=0):
        """Pieces of ``split_size`` along ``dim`` (the last one shorter), or of the sizes in
        a list (``mg.split(tensor, split_size_or_sections, dim)``, PyTorch's names)."""
        _check_not_0d(self, "split")
        d = _dim(self, dim)
        n = self.shape[d]
        if isinstance(split_size, _PY_SCALARS):
            step = builtins.int(split_size)
            if step < 0 or step == 0 and n != 0:
                raise RuntimeError(f"split: split_size must be positive (or 0 for a dim of "
                                   f"size 0), got {step} for dim {d} of size {n}")
            step = step or 1
            sizes = [step] * (n // step) + ([n % step] if n % step else [])
            return Split.apply(self, sizes=tuple(sizes or [0]), dim=d)
        sizes = tuple(split_size)  # (PyTorch's split_with_sizes)
        return SplitWithSizes.apply(self, sizes=sizes or (0,), dim=d)

    def chunk(self, chunks, dim=0):
        _check_not_0d(self, "chunk")
        if chunks <= 0:
            raise RuntimeError(f"chunk: expects chunks to be greater than 0, got {chunks}")
        n = self.shape[_dim(self, dim)]
        if n == 0:  # as PyTorch: ``chunks`` empty pieces
            return self.split([0] * chunks, dim)
        return self.split(-(-n // chunks), dim)

    def tensor_split(self, indices_or_sections, dim=0):
        """Views along ``dim``: ``n`` pieces as even as can be (the first ``size % n`` one
        longer), or the pieces between the given indices (a list, or a 1-d integer tensor;
        out of range ones give empty pieces, as slicing does)."""
        _check_not_0d(self, "tensor_split")
        d = _dim(self, dim)
        if isinstance(indices_or_sections, Tensor):
            if indices_or_sections.array.dtype.kind not in "iu" or indices_or_sections.ndim > 1:
                raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a "
                                   f"zero-dimensional or one-dimensional tensor of integers, "
                                   f"but got {_described(indices_or_sections)}")
            indices_or_sections = indices_or_sections.tolist()
        if isinstance(indices_or_sections, (builtins.int, np.integer)):
            n, size = builtins.int(indices_or_sections), self.shape[d]
            if n <= 0:
                raise RuntimeError(f"number of sections must be larger than 0, got {n}")
            lengths = [size // n + (i < size % n) for i in range(n)]
            cuts = [builtins.sum(lengths[:i]) for i in range(1, n)]
        else:
            cuts = [builtins.int(i) for i in indices_or_sections]
        starts, ends = [0] + cuts, cuts + [self.shape[d]]
        return tuple(self[(slice(None),) * d + (slice(a, b),)] for a, b in zip(starts, ends))

    def hsplit(self, sections):
        """``tensor_split`` along dim 1 (dim 0 of a 1-d tensor); a number of sections must
        divide the dim evenly."""
        return _split_evenly(self, "hsplit", 0 if self.ndim == 1 else 1, sections)

    def vsplit(self, sections):
        """``tensor_split`` along dim 0 of a tensor of 2 or more dims; a number of sections
        must divide the dim evenly."""
        return _split_evenly(self, "vsplit", 0, sections)

    def dsplit(self, sections):
        """``tensor_split`` along dim 2 of a tensor of 3 or more dims; a number of sections
        must divide the dim evenly."""
        return _split_evenly(self, "dsplit", 2, sections)

    def unfold(self, dimension, size, step):
        """The windows of ``size`` elements, ``step`` apart, along ``dimension``: that dim
        then counts the windows, and a new last dim runs through each. A view, as in
        PyTorch (windows that overlap share elements)."""
        d = _dim(self, dimension)
        length = self.shape[d] if self.ndim else 1
        if size < 0:
            raise RuntimeError(f"unfold: size is {size} but must be >= 0")
        if size > length:
            raise RuntimeError(f"unfold: maximum size for tensor at dimension {d} is "
                               f"{length} but size is {size}")
        if step <= 0:
            raise RuntimeError(f"unfold: step is {step} but must be > 0")
        if self.ndim == 0:  # (its one element, or none: shape (size,))
            return self.reshape(1)[:size]
        return Unfold.apply(self, dim=d, size=size, step=step)

    def fliplr(self):
        """``flip(1)`` of a tensor of 2 or more dims."""
        if self.ndim < 2:
            raise RuntimeError(f"fliplr: Input must be >= 2-d (shape {tuple(self.shape)})")
        return self.flip(1)

    def flipud(self):
        """``flip(0)`` of a tensor of 1 or more dims."""
        if self.ndim < 1:
            raise RuntimeError(f"flipud: Input must be >= 1-d (shape {tuple(self.shape)})")
        return self.flip(0)

    def take(self, index):
        """The elements of the flattened tensor at ``index`` (int64), in its shape."""
        if not isinstance(index, Tensor) or index.dtype != dtypes.int64:
            got = index.dtype if isinstance(index, Tensor) else type(index).__name__
            raise (RuntimeError if isinstance(index, Tensor) else TypeError)(
                f"take(): Expected a long tensor for index, but got {got}")
        flat = self.reshape(-1)
        return Take.apply(flat, index=_index(index, flat))

    def index_copy(self, dim, index, source):
        """A copy with the entries ``index`` along ``dim`` replaced by ``source``'s (in
        order); the gradient of ``source`` is read from those entries, this tensor's is 0
        there."""
        d = _dim(self, dim)
        index = _index_tensor("index_copy", index, self, d, (dtypes.int64,))
        if index.ndim > 1:
            raise IndexError(f"index_copy(): Index should have dimension 1 or 0 (got "
                             f"{index.ndim})")
        if self.ndim == 0:
            return self.reshape(1).index_copy(0, index.reshape(1), source.reshape(1)) \
                .reshape(())
        index = index.reshape(-1)
        source = source.reshape(1) if source.ndim == 0 else source
        expected = tuple(index.shape[0] if k == d else n for k, n in enumerate(self.shape))
        if source.ndim == self.ndim and source.shape[d] != index.shape[0]:
            raise IndexError(f"index_copy_(): Number of indices ({index.shape[0]}) should be "
                             f"equal to source.size(dim) ({source.shape[d]})")
        if tuple(source.shape) != expected:
            raise RuntimeError(f"index_copy(): source of shape {tuple(source.shape)} does not "
                               f"fit self of shape {tuple(self.shape)} with {index.shape[0]} "
                               f"indices along dim {d} (expected {expected})")
        if source.dtype != self.dtype:
            raise RuntimeError(f"index_copy(): self and source expected to have the same "
                               f"dtype, but got (self) {self.dtype} and (source) "
                               f"{source.dtype}")
        places = index.reshape((-1,) + (1,) * (self.ndim - d - 1)).expand(source.shape)
        return self.scatter(d, places, source)

    def masked_scatter(self, mask, source):
        """A copy with ``source``'s first elements (in order) written where ``mask`` (bool,
        broadcast to this tensor's shape) is True."""
        if not isinstance(mask, Tensor) or mask.dtype != dtypes.bool:
            raise RuntimeError("masked_scatter_ only supports boolean masks, but got mask "
                               f"with dtype {getattr(mask, 'dtype', type(mask).__name__)}")
        if source.dtype != self.dtype:
            raise RuntimeError(f"masked_scatter: expected self and source to have same "
                               f"dtypes but got {self.dtype} and {source.dtype}")
        mask = mask.expand(self.shape) if tuple(mask.shape) != tuple(self.shape) else mask
        count = builtins.int(mask.sum().item())
        flat = source.reshape(-1)
        if count > flat.shape[0]:
            raise RuntimeError(f"masked_scatter: expected source to have at least {count} "
                               f"elements (the mask's True count), got {flat.shape[0]}")
        if flat.shape[0] == 0:
            return self.clone()
        positions = (mask.reshape(-1).cumsum(0) - 1).clamp(min=0).reshape(self.shape)
        return flat[positions].where(mask, self)

    def rot90(self, k=1, dims=(0, 1)):
        """A copy rotated by 90 degrees ``k`` times in the plane of ``dims``, from the first
        dim towards the second (as PyTorch: flips and a transpose)."""
        dims = tuple(dims)
        if len(dims) != 2:
            raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
        if self.ndim < 2:
            raise RuntimeError(f"expected total dims >= 2, but got total dims = {self.ndim}")
        d0, d1 = _dim(self, dims[0]), _dim(self, dims[1])
        if d0 == d1:
            raise RuntimeError(f"expected rotation dims to be different, but got dim0 = "
                               f"{dims[0]} and dim1 = {dims[1]}")
        k %= 4
        if k == 1:
            return self.flip(d1).transpose(d0, d1)
        if k == 2:
            return self.flip((d0, d1))
        if k == 3:
            return self.flip(d0).transpose(d0, d1)
        return self.clone()

    def flip(self, dims, *more):
        """A copy with the order of the elements reversed along each of ``dims``
        (``x.flip(0)``, ``x.flip(0, 2)`` or ``x.flip((0, 2))``); never a view."""
        dims = _int_tuple("flip", "dims", (dims,) + more if more else dims)
        axes = tuple(_dim(self, d) for d in dims)
        if len(set(axes)) != len(axes):
            raise RuntimeError(f"flip: a dim appears more than once in dims {dims} (shape "
                               f"{tuple(self.shape)})")
        return Flip.apply(self, dims=axes if self.ndim else ())

    def roll(self, shifts, dims=None):
        """The elements moved ``shifts`` places along ``dims`` (ints, or tuples of as many),
        those pushed past the end coming back at the start. Without dims the flattened
        tensor is rolled by one shift and keeps its shape."""
        shifts = _int_tuple("roll", "shifts", shifts)
        dims = () if dims is None else _int_tuple("roll", "dims", dims)
        if not shifts:
            raise RuntimeError("roll: `shifts` required (got an empty tuple)")
        if len(shifts) != len(dims) and (dims or len(shifts) > 1):
            raise RuntimeError(f"roll: shifts and dimensions must align: {len(shifts)} shifts "
                               f"{shifts} and {len(dims)} dims {dims}")
        if not dims:
            return Roll.apply(self, shifts=shifts[0], dims=None)
        if self.ndim == 0:
            raise IndexError(f"roll: dimension specified as {dims[0]} but the tensor has no "
                             "dimensions (roll a 0-d tensor without dims)")
        total = {}  # a dim named twice is rolled by the sum of its shifts
        for d, n in zip(dims, shifts):
            axis = _dim(self, d)
            total[axis] = total.get(axis, 0) + n
        return Roll.apply(self, shifts=tuple(total.values()), dims=tuple(total))

    def __getitem__(self, index):
        if batching.LEVELS and batching.batched_index(index):  # (inside vmap)
            return batching.index_per_element(self, index)
        index = _index(index, self)
        if function.capture is not None and _has_mask(index):
            read_on_host("Tensor.__getitem__() with a bool mask")  # (its count: the shape)
        basic, advanced = _split_index(index, self.ndim)
        out = indexing_op(basic, self.shape).apply(self, index=basic)  # (named as PyTorch's)
        return out if advanced is None else GetItem.apply(out, index=advanced)

    # --- PyTorch's conveniences, each a few lines of the ops above ------------------------------
    def tril(self, diagonal=0):
        """The lower triangle of the last two dims: elements above diagonal ``diagonal`` are 0."""
        return Tril.apply(_matrices(self, "tril"), diagonal=_diagonal("tril", diagonal))

    def triu(self, diagonal=0):
        """The upper triangle of the last two dims: elements below diagonal ``diagonal`` are 0."""
        return Triu.apply(_matrices(self, "triu"), diagonal=_diagonal("triu", diagonal))

    def mm(self, mat2):
        """Matrix product of two matrices (``matmul`` without broadcasting)."""
        for name, t in (("self", self), ("mat2", mat2)):
            if t.ndim != 2:
                raise RuntimeError(f"mm: {name} must be a matrix, got shape {tuple(t.shape)}")
        return self.matmul(mat2)

    def bmm(self, mat2):
        """Batched matrix product of (b, n, m) and (b, m, p) tensors (no broadcasting)."""
        for name, t in (("batch1", self), ("batch2", mat2)):
            if t.ndim != 3:
                raise RuntimeError(f"bmm: {name} must be a 3D tensor, got shape {tuple(t.shape)}")
        if self.shape[0] != mat2.shape[0]:
            raise RuntimeError(f"bmm: batch1 and batch2 must have the same batch size, got "
                               f"shapes {tuple(self.shape)} and {tuple(mat2.shape)}")
        if self.array.dtype.kind == "b" or mat2.array.dtype.kind == "b":
            return self.matmul(mat2)  # (refused there)
        return Bmm.apply(self, mat2)

    def mv(self, vec):
        """Matrix-vector product of an (n, m) matrix and an m-vector."""
        if self.ndim != 2 or vec.ndim != 1:
            raise RuntimeError(f"vector + matrix @ vector expected, got {self.ndim}, "
                               f"{vec.ndim}, {vec.ndim}")
        return self.matmul(vec)

    def dot(self, tensor):
        """The inner product of two vectors of the same length and dtype."""
        if self.ndim != 1 or tensor.ndim != 1:
            raise RuntimeError(f"1D tensors expected, but got {self.ndim}D and {tensor.ndim}D "
                               f"tensors")
        if self.dtype != tensor.dtype:
            raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                               f"{dtypes.torch_name(self.dtype)} and "
                               f"{dtypes.torch_name(tensor.dtype)}")
        return self.matmul(tensor)

    def outer(self, vec2):
        """``out[i][j] = self[i] * vec2[j]`` of two vectors."""
        if self.ndim != 1 or vec2.ndim != 1:
            raise RuntimeError(f"outer: expected 1D tensors, got {self.ndim}D and "
                               f"{vec2.ndim}D")
        return self.unsqueeze(1) * vec2.unsqueeze(0)

    def ger(self, vec2):
        """``outer`` (its old name)."""
        return self.outer(vec2)

    def inner(self, other):
        """The sums of products over the last dims (``self * other`` where one is 0-d): shape
        ``self.shape[:-1] + other.shape[:-1]``."""
        other = _tensor_arg("inner", other)
        if self.ndim == 0 or other.ndim == 0:
            return self * other
        if self.shape[-1] != other.shape[-1]:
            raise RuntimeError(f"inner() the last dimension must match on both input tensors "
                               f"but got shapes {list(self.shape)} and {list(other.shape)}")
        return _tensordot(self, other, ([-1], [-1]))

    def vdot(self, other):
        """``dot`` of two 1-D tensors (real tensors: no conjugate to take)."""
        return self.dot(other)

    def addmv(self, mat, vec, *, beta=1, alpha=1):
        """``beta * self + alpha * (mat @ vec)`` (as ``addmm``)."""
        return _scaled_sum(self, mat.mv(vec), beta, alpha)

    def dist(self, other, p=2):
        """The p-norm of ``self - other`` (broadcast)."""
        return (self - _tensor_arg("dist", other)).norm(p)

    def kron(self, other):
        """The Kronecker product: every element of self times all of other, in blocks (the
        shorter shape padded with leading 1s)."""
        other = _tensor_arg("kron", other)
        n = builtins.max(self.ndim, other.ndim)
        a = self.reshape((1,) * (n - self.ndim) + tuple(self.shape))
        b = other.reshape((1,) * (n - other.ndim) + tuple(other.shape))
        a = a.reshape(tuple(v for k in a.shape for v in (k, 1)))
        b = b.reshape(tuple(v for k in b.shape for v in (1, k)))
        return (a * b).reshape(tuple(i * j for i, j in zip(a.shape[::2], b.shape[1::2])))

    def diag_embed(self, offset=0, dim1=-2, dim2=-1):
        """A tensor with one more dim whose diagonal (``offset``) in dims ``dim1``, ``dim2``
        holds the last dim of self, zeros elsewhere."""
        n = self.ndim + 1
        d1, d2 = (_dim_of(n, d) for d in (dim1, dim2))
        if d1 == d2:
            raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
        x = self.reshape(1) if self.ndim == 0 else self
        m = x.shape[-1]
        size = m + builtins.abs(offset)
        x = _padded_last(x, size)  # (the values first, then zeros)
        xp = backend.xp_of(x.array)
        rows = xp.arange(size).reshape(-1, 1)
        cols = xp.arange(size).reshape(1, -1)
        mask = self._make(cols - rows == offset)
        lined = x.unsqueeze(-1) if offset >= 0 else x.unsqueeze(-2)
        out = lined.expand(tuple(x.shape[:-1]) + (size, size)).where(mask, 0)
        return out.movedim((-2, -1), (d1, d2))

    def cross(self, other, dim=None):
        """The cross product along ``dim`` (of size 3; None: the first dim of size 3, as
        ``torch.cross``), the two broadcast."""
        other = _tensor_arg("cross", other)
        if dim is None:
            warnings.warn("Using cross without specifying the dim arg is deprecated (as in "
                          "PyTorch): pass dim explicitly or use linalg.cross.", UserWarning,
                          stacklevel=2)
            shape = _broadcast_shape("cross", self, other)
            dim = next((k for k, n in enumerate(shape) if n == 3), None)
            if dim is None:
                raise RuntimeError(f"no dimension of size 3 in input (shapes "
                                   f"{tuple(self.shape)} and {tuple(other.shape)})")
        return _cross(self, other, dim, "cross")

    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        """``beta * self + alpha * (mat1 @ mat2)``, self broadcast to the product's shape;
        with ``beta == 0`` self is not read (NaN in it does not spread), as in PyTorch."""
        return _scaled_sum(self, mat1.mm(mat2), beta, alpha)

    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
        """``beta * self + alpha * (batch1 @ batch2)`` of batched matrices (as ``addmm``)."""
        return _scaled_sum(self, batch1.bmm(batch2), beta, alpha)

    def gather(self, dim, index):
        """``out[i][j] = self[index[i][j]][j]`` for dim 0 (likewise for any dim), as PyTorch:
        ``index`` has self's number of dims and is no larger on the others; the gradient is
        added back into the gathered places. A 0-d tensor is one value along its one dim."""
        d = _dim(self, dim)
        if self.ndim == 0 and isinstance(index, Tensor) and index.ndim <= 1:
            return self.reshape(1).gather(0, index.reshape(-1)).reshape(index.shape)
        index = _index_tensor("gather", index, self, d, (dtypes.int64, dtypes.int32))
        if index.ndim != self.ndim or builtins.any(
                index.shape[k] > self.shape[k] for k in range(self.ndim) if k != d):
            raise RuntimeError(f"gather: index of shape {tuple(index.shape)} does not fit the "
                               f"input of shape {tuple(self.shape)} (same number of dims, no "
                               f"larger except along dim {d})")
        return Gather.apply(self, index=_gather_places(self, d, index))

    def index_select(self, dim, index):
        """The entries ``index`` (a vector of ints) along ``dim`` (of a 0-d tensor: the
        one value, for an index of one entry)."""
        d = _dim(self, dim)
        if self.ndim == 0 and isinstance(index, Tensor):
            if index.numel() != 1:
                raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, "
                                   f"got {index.numel()} value(s)")
            return self.reshape(1).index_select(0, index.reshape(1)).reshape(())
        index = _index_tensor("index_select", index, self, d, (dtypes.int64, dtypes.int32))
        if index.ndim > 1:
            raise IndexError(f"index_select: index must be a vector, got shape "
                             f"{tuple(index.shape)}")
        places = _index((slice(None),) * d + (index.reshape(-1),), self)
        return IndexSelect.apply(self, index=places)

    def unbind(self, dim=0):
        """The slices along ``dim``, each without that dim: views, all outputs of one node
        (UnbindBackward0), as in PyTorch."""
        _check_not_0d(self, "unbind")
        return Unbind.apply(self, dim=_dim(self, dim))

    def repeat(self, *sizes, repeats=None):
        """The tensor tiled ``sizes[k]`` times along dim k (new leading dims where ``sizes``
        is longer); its gradient sums the copies."""
        sizes = _shape_arg(_sizes_or_keyword("repeat", sizes, repeats, "repeats"))
        if len(sizes) < self.ndim or builtins.any(r < 0 for r in sizes):
            raise RuntimeError(f"repeat: sizes {tuple(sizes)} must be non-negative and at least "
                               f"as many as the dims of the tensor's shape {tuple(self.shape)}")
        return Repeat.apply(self, sizes=tuple(sizes))

    def tile(self, *dims):
        """The tensor repeated ``dims[k]`` times along dim k, as ``repeat``; with fewer
        dims than the tensor has, the first dims are repeated once (``x.tile((2,))``
        repeats the last dim)."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        dims = _int_tuple("tile", "dims", dims)
        return self.repeat((1,) * (self.ndim - len(dims)) + dims)

    def repeat_interleave(self, repeats=None, dim=None, *, output_size=None):
        """Each entry along ``dim`` repeated ``repeats`` times in place (of the flattened
        tensor when dim is None): an int, or an integer tensor of one count per entry (or
        one count for all). ``mg.repeat_interleave(counts)`` alone: ``arange(n)`` so
        repeated. The gradient sums the copies of each entry."""
        if repeats is None:
            counts = _repeat_counts(self, 1 if self.ndim == 0 else self.shape[0], True)
            return Tensor(np.repeat(np.arange(counts.size), counts), device=self.device)
        if dim is not None and self.ndim == 0:
            raise IndexError(f"repeat_interleave: dimension specified as {dim} but the tensor "
                             "has no dimensions")
        x = self.reshape(-1) if dim is None else self
        d = 0 if dim is None else _dim(self, dim)
        if isinstance(repeats, Tensor):
            if output_size is not None and type(repeats.array) is not np.ndarray:
                index = _repeat_index_on_device(repeats, x.shape[d], output_size)
                return x.index_select(d, index)
            index = np.repeat(np.arange(x.shape[d]), _repeat_counts(repeats, x.shape[d]))
            _check_output_size(output_size, index.size)
            return x.index_select(d, Tensor(index, device=self.device))
        if not _is_int(repeats):
            raise TypeError(f"repeat_interleave(): argument 'repeats' must be Tensor or int, "
                            f"not {type(repeats).__name__}")
        if repeats < 0:
            raise RuntimeError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
        shape = x.shape
        _check_output_size(output_size, shape[d] * repeats)
        if repeats == 1:
            return x.clone()
        copies = x.unsqueeze(d + 1).expand(shape[:d + 1] + (repeats,) + shape[d + 1:])
        return copies.contiguous().reshape(shape[:d] + (shape[d] * repeats,) + shape[d + 1:])

    def masked_select(self, mask):
        """The elements where ``mask`` (a bool tensor that broadcasts with this one) is True,
        as a 1-D tensor in row-major order; their gradient goes back to those places."""
        if not isinstance(mask, Tensor):
            raise TypeError(f"masked_select(): argument 'mask' (position 1) must be Tensor, not "
                            f"{type(mask).__name__}")
        if mask.dtype != dtypes.bool:
            raise RuntimeError(f"masked_select: expected a bool mask, got {mask.dtype} (mask "
                               f"shape {tuple(mask.shape)})")
        backend.check_same_device("masked_select", [self.array, mask.array])
        read_on_host("Tensor.masked_select()")  # (the result's shape is the mask's count)
        shape = _broadcast_shape("masked_select", self, mask)
        m = mask.array
        if m.shape != shape:
            m = backend.xp_of(m).broadcast_to(m, shape)
        return MaskedSelect.apply(self._expand_to(shape), index=m)

    def scatter(self, dim, index, src=None, *, value=None):
        """A copy with ``src[i][j]`` written at ``[index[i][j]][j]`` for dim 0 (likewise
        for any dim), or the number ``value`` at those places. ``index`` (int64 or int32)
        has this tensor's number of dims, is no larger than ``src``, nor than this tensor
        except along ``dim``. The gradient of ``src`` is gathered from the places written;
        this tensor's is 0 there."""
        if (src is None) == (value is None):
            raise TypeError("scatter(): expects one of src (a tensor or a number) or value")
        given = value if src is None else src
        x, places, given = _scatter_args("scatter", self, dim, index, given)
        if places is None:
            out = x.clone()
        elif isinstance(given, Tensor):
            out = Scatter.apply(x, given, index=places, then=None)
        else:
            out = ScatterValue.apply(x, _fitting(_py_scalar(given), x.array.dtype, "scatter"),
                                     index=places, then=None)
        return out.reshape(()) if self.ndim == 0 else out

    def scatter_add(self, dim, index, src):
        """A copy with ``src[i][j]`` added at ``[index[i][j]][j]`` for dim 0 (likewise for
        any dim; repeated places accumulate); ``index`` as in ``scatter``. The gradient of
        ``src`` is gathered from the places it was added to."""
        if not isinstance(src, Tensor):
            raise TypeError(f"scatter_add(): argument 'src' (position 3) must be Tensor, not "
                            f"{type(src).__name__}")
        x, places, src = _scatter_args("scatter_add", self, dim, index, src)
        out = x.clone() if places is None else ScatterAdd.apply(x, src, index=places)
        return out.reshape(()) if self.ndim == 0 else out

    def index_add(self, dim, index, source, *, alpha=1):
        """A copy with ``alpha * source``'s entries along ``dim`` added at the entries
        ``index`` (a vector of ints, repeats accumulate). ``source`` has this tensor's shape
        but along dim, where it has one entry per index."""
        d = _dim(self, dim)
        index, source = _index_add_args(self, d, index, source)
        if not (type(alpha) in (builtins.int, builtins.bool) and alpha == 1):
            if self.array.dtype.kind in "iu":
                alpha = builtins.int(alpha)  # (PyTorch truncates a float alpha here)
            source = source * alpha
        x = self.reshape(1) if self.ndim == 0 else self
        places = (slice(None),) * d + (index.array,)
        out = IndexAddAlong.apply(x, source.reshape(1) if source.ndim == 0 else source,
                                  index=places)
        return out.reshape(()) if self.ndim == 0 else out

    def index_fill(self, dim, index, value):
        """A copy with ``value`` (a number or a 0-d tensor) in the entries ``index`` (an
        int64 vector, negative counting from the end) along ``dim``: ``masked_fill`` with
        those entries as the mask, and so its gradients (self's is 0 there; a tensor value's
        is the sum of the gradient over the entries filled, each counted once)."""
        if not isinstance(index, Tensor):
            raise TypeError(f"index_fill(): argument 'index' (position 2) must be Tensor, not "
                            f"{type(index).__name__}")
        if isinstance(value, Tensor) and value.ndim != 0:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
        d = _dim(self, dim)
        if index.dtype != dtypes.int64:
            raise IndexError("index_fill_(): Expected dtype int64 for index.")
        if index.ndim > 1:
            raise RuntimeError("Index has to be a vector/scalar")
        backend.check_same_device("index_fill_", [self.array, index.array] +
                                  ([value.array] if isinstance(value, Tensor) else []))
        if not isinstance(value, Tensor) and self.array.dtype.kind in "iuf":
            value = _fitting(_py_scalar(value), self.array.dtype, "index_fill_")
        x = self.reshape(1) if self.ndim == 0 else self
        n = x.shape[d]
        _in_range(index, -n, n, IndexError,
                  f"index {{}} is out of bounds for dimension {d} with size {n}")
        # the mask by ops, not on raw arrays: a replayed step reads each call's index
        places = index.reshape(-1).remainder(n) if n else index.reshape(-1)
        mask = x.new_zeros(n, dtype=dtypes.bool).scatter(0, places, True)
        out = x.masked_fill(mask.reshape((n,) + (1,) * (x.ndim - d - 1)), value)
        return out.reshape(()) if self.ndim == 0 else out

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """Elementwise ``|self - other| <= atol + rtol * |other|`` (bool), as PyTorch:
        ``other`` is a tensor of this tensor's dtype."""
        if not isinstance(other, Tensor):
            raise TypeError(f"isclose(): argument 'other' (position 1) must be Tensor, not "
                            f"{type(other).__name__}")
        if other.dtype != self.dtype:
            raise RuntimeError(f"isclose: {dtypes.torch_name(self.dtype)} did not match "
                               f"{dtypes.torch_name(other.dtype)} (the two tensors must have "
                               f"the same dtype; shapes {tuple(self.shape)} and "
                               f"{tuple(other.shape)})")
        return NonDiff.apply(*_operands(self, other), fn="isclose", rtol=rtol, atol=atol,
                             equal_nan=equal_nan)

    def allclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False):
        """Whether ``isclose`` holds everywhere (a Python bool)."""
        return builtins.bool(self.isclose(other, rtol, atol, equal_nan).all())

    def equal(self, other):
        """Whether both have the same shape and the same values (a Python bool)."""
        return tuple(self.shape) == tuple(other.shape) and builtins.bool((self == other).all())

    def sort(self, dim=-1, descending=False, *, stable=False):
        """``(values, indices)`` along ``dim``, in ascending order (or ``descending``). The
        sort is always stable, whatever ``stable`` says: equal elements keep their order in
        either direction. NaN counts as the largest value. ``values`` is gathered from this
        tensor, so it carries the gradient; ``indices`` is int64."""
        indices = self.argsort(dim, descending)
        return ValuesIndices(self._gathered(dim, indices, Sort), indices)

    def argsort(self, dim=-1, descending=False, *, stable=False):
        """The int64 indices that sort the tensor along ``dim`` (see ``sort``: always stable)."""
        d = _dim(self, dim)
        if self.ndim == 0:  # one element: index 0
            return self._make(backend.xp_of(self.array).zeros((), dtype=np.int64))
        return self._make(on_arrays(_sort_order, self.array, d, builtins.bool(descending)))

    def topk(self, k, dim=-1, largest=True, sorted=True):
        """``(values, indices)`` of the ``k`` largest elements along ``dim`` (the smallest
        with ``largest=False``), largest first (smallest first), ties in their order in the
        tensor and NaN counted as the largest value, as ``sort``. They always come sorted:
        ``sorted=False`` allows any order, and this is one. ``values`` carries the gradient."""
        if not _is_int(k):
            raise TypeError(f"topk(): argument 'k' must be int, not {type(k).__name__}")
        if self.array.dtype.kind == "b":
            raise RuntimeError(f"topk: bool tensors are not supported (shape "
                               f"{tuple(self.shape)})")
        d = _dim(self, dim)
        size = self.shape[d] if self.ndim else 1
        if not 0 <= k <= size:
            raise RuntimeError(f"topk: selected index k out of range: k = {k} for dim {d} of "
                               f"size {size} (shape {tuple(self.shape)})")
        indices = self.argsort(d, descending=largest)
        if self.ndim:  # (a 0-d tensor gives its one element for k = 0 or 1, as PyTorch)
            indices = indices[(slice(None),) * d + (slice(0, k),)]
        return ValuesIndices(self._gathered(d, indices, Topk), indices)

    def median(self, dim=None, keepdim=False):
        """Without dim: the lower median of all elements (NaN if any is NaN), its gradient
        shared by the elements equal to it. With dim: ``(values, indices)`` of the lower
        median along dim (a NaN's place where the row holds one); the gradient goes to
        the returned index."""
        return _median(self, "median", dim, keepdim)

    def nanmedian(self, dim=None, keepdim=False):
        """``median`` of the non-NaN elements (NaN where there are none)."""
        return _median(self, "nanmedian", dim, keepdim)

    def kthvalue(self, k, dim=-1, keepdim=False):
        """``(values, indices)`` of the k-th smallest element along ``dim`` (k from 1; NaN
        counted as the largest value)."""
        if not _is_int(k):
            raise TypeError(f"kthvalue(): argument 'k' must be int, not {type(k).__name__}")
        return _selected(self, "kthvalue", dim, keepdim, k)

    def mode(self, dim=-1, keepdim=False):
        """``(values, indices)`` of the most frequent value along ``dim`` (the smallest of
        equally frequent ones) and the place of its last occurrence, as PyTorch."""
        return _selected(self, "mode", dim, keepdim)

    def msort(self):
        """The values sorted along dim 0 (``sort(0).values``)."""
        return self.sort(0).values

    def nansum(self, dim=None, keepdim=False, *, dtype=None):
        """``sum`` with NaN counted as 0 (whose gradient there is 0)."""
        x = self.where(self == self, 0) if self.array.dtype.kind in "fc" else self
        return x.sum(dim, keepdim, dtype=dtype)

    def nanmean(self, dim=None, keepdim=False, *, dtype=None):
        """``mean`` of the non-NaN elements (NaN where there are none)."""
        if self.array.dtype.kind not in "fc":
            raise RuntimeError(f"nanmean(): expected input to have floating point or complex "
                               f"dtype but got {self.dtype} (shape {tuple(self.shape)})")
        x = self if dtype is None else self.to(dtype)
        return x.nansum(dim, keepdim) / (x == x).sum(dim, keepdim)

    def cummax(self, dim):
        """``(values, indices)``: the running max along ``dim`` and its place (the last of
        equal ones; a NaN stays the max from where it appears). The gradient goes to the
        places."""
        return _running_extreme(self, "cummax", dim)

    def cummin(self, dim):
        """``(values, indices)``: the running min along ``dim``, as ``cummax``."""
        return _running_extreme(self, "cummin", dim)

    def logcumsumexp(self, dim):
        """``log(cumsum(exp(x), dim))``, computed stably (one node, LogcumsumexpBackward0)."""
        if self.array.dtype.kind not in "fc":
            raise NotImplementedError(f"logcumsumexp: not implemented for {self.dtype} "
                                      f"(shape {tuple(self.shape)})")
        d = _dim(self, dim)
        if self.ndim == 0:
            return Logcumsumexp.apply(self.reshape(1), dim=0).reshape(())
        return Logcumsumexp.apply(self, dim=d)

    def _gathered(self, dim, indices, op):
        """``gather(dim, indices)`` recorded as ``op`` (a Gather named for the call), also
        for a 0-d tensor (seen as one element)."""
        if self.ndim == 0:
            return self.reshape(1).gather(0, indices.reshape(1)).reshape(())
        return op.apply(self, index=_gather_places(self, _dim(self, dim), indices))

    def nonzero(self, *, as_tuple=False):
        """The indices of the nonzero elements, in row-major order: an (n, ndim) int64 tensor,
        or with ``as_tuple`` one int64 tensor per dim (a 0-d tensor then counts as one dim
        of size 1), as PyTorch. Not differentiable."""
        read_on_host("Tensor.nonzero()")  # (the result's shape is the count of nonzeros)
        data = self.array
        xp = backend.xp_of(data)
        if as_tuple:
            indices = xp.nonzero(data.reshape(1) if data.ndim == 0 else data)
            return tuple(Tensor._make(i.astype(np.int64, copy=False)) for i in indices)
        return Tensor._make(xp.argwhere(data).astype(np.int64, copy=False))

    def argwhere(self):
        """The indices of the nonzero elements, an (n, ndim) int64 tensor (``nonzero()``)."""
        return self.nonzero()

    def unique(self, sorted=True, return_inverse=False, return_counts=False, dim=None):
        """The distinct values, in ascending order (also for ``sorted=False``, which leaves
        the order free), of the flattened tensor, or the distinct slices along ``dim``; with
        ``return_inverse`` each element's (slice's) index in them, with ``return_counts``
        how often each occurs (int64 tensors). NaNs are all distinct, as PyTorch's."""
        read_on_host("Tensor.unique()")  # (the result's shape is the count of values)
        data = self.array
        xp = backend.xp_of(data)
        if dim is None:
            values, inverse, counts = xp.unique(data.reshape(-1), return_inverse=True,
                                                return_counts=True, equal_nan=False)
            inverse = inverse.reshape(self.shape)
        else:
            d = _dim(self, dim)
            if data.shape[d] == 0:  # (NumPy refuses; PyTorch gives the empty tensor)
                values, inverse, counts = data, xp.zeros(0, np.int64), xp.zeros(0, np.int64)
            else:
                values, inverse, counts = xp.unique(data, return_inverse=True,
                                                    return_counts=True, axis=d)
                inverse = inverse.reshape(-1)
        out = (Tensor._make(values),)
        if return_inverse:
            out += (Tensor._make(inverse.astype(np.int64, copy=False)),)
        if return_counts:
            out += (Tensor._make(counts.astype(np.int64, copy=False)),)
        return out[0] if len(out) == 1 else out

    def bincount(self, weights=None, minlength=0):
        """How often each value 0, 1, ... occurs in this 1-d tensor of non-negative integers
        (int64; at least ``minlength`` of them), or the sums of ``weights`` per value
        (float32 for float32 weights, else float64). Not differentiable."""
        read_on_host("Tensor.bincount()")  # (the result's size is the largest value)
        data = self.array
        if data.dtype.kind not in "biu":
            raise NotImplementedError(f"bincount: not implemented for {self.dtype} tensors "
                                      f"(shape {tuple(self.shape)})")
        if minlength < 0:
            raise RuntimeError(f"minlength should be >= 0, got {minlength}")
        if self.ndim != 1 or (data.size and builtins.int(data.min()) < 0):
            raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got "
                               f"{_described(self)}")
        xp = backend.xp_of(data)
        if weights is None:
            return Tensor._make(xp.bincount(data, minlength=minlength).astype(np.int64))
        w = as_tensor(weights, like=self).array
        if w.ndim != 1 or w.shape[0] != data.shape[0]:
            raise RuntimeError(f"weights should be 1-d and have the same length as input "
                               f"(input of shape {tuple(self.shape)}, weights of shape "
                               f"{tuple(w.shape)})")
        dtype = np.float32 if w.dtype == np.float32 else np.float64
        return Tensor._make(xp.bincount(data, weights=w.astype(np.float64),
                                        minlength=minlength).astype(dtype))

    def multinomial(self, num_samples, replacement=False, *, generator=None):
        """Indices of categories (the last dim) drawn with probabilities proportional to
        their weights: this tensor's non-negative, finite values, a vector (one
        distribution) or a matrix (one per row), not necessarily summing to 1. Returns int64
        of shape (num_samples,) or (rows, num_samples). Without ``replacement`` no index is
        drawn twice in a row, and a category of weight 0 only once every category of
        positive weight has been. Drawn on the host by minigrad's generator (as ``rand``)
        and copied to this tensor's device, so ``manual_seed`` repeats the draws. Inside
        vmap with randomness "different", each element its own draws; "same": the same
        random numbers for all (with each element's weights)."""
        if batching.LEVELS:
            return batching.multinomial(self, num_samples, replacement, generator)
        read_on_host("Tensor.multinomial()")
        weights = _categorical_weights(self, num_samples, replacement)
        rng = host_generator(generator)
        picks = _multinomial_picks(weights, num_samples, replacement,
                                   lambda kind, m: getattr(rng, kind)((weights.shape[0], m)))
        picks = picks.reshape(self.shape[:-1] + (num_samples,))
        return Tensor(picks, device=self.device)

    # --- in place -----------------------------------------------------------------------------
    # An in-place op computes its result out of place, ``compute(self)``, and writes it into
    # this tensor's memory. While a graph is recorded, the result's node becomes this
    # tensor's grad_fn (and, through a view, its base's: see _rebase), so gradients flow as
    # in PyTorch. Every write counts one version, shared with the tensor's views: backward
    # refuses a saved tensor whose version changed.

    def add_(self, other, *, alpha=1):
        if type(alpha) is not builtins.int or alpha != 1:  # (rounded once, as add's)
            if _scaled_into(self, "add_", other, alpha):
                return self
            return self._update("add_", lambda t: t.add(other, alpha=alpha), other)
        if _recording(self, other) or forward_ad.LEVELS or batching.LEVELS:
            return self._update("add_", lambda t: t + other, other)
        return _arithmetic_(self, "add_", "add", other)

    def sub_(self, other, *, alpha=1):
        _no_bool("sub_", self, other)
        if type(alpha) is not builtins.int or alpha != 1:
            if _scaled_into(self, "sub_", other, -alpha if type(alpha) in _PY_NUMBERS else None):
                return self
            return self._update("sub_", lambda t: t.sub(other, alpha=alpha), other)
        if _recording(self, other) or forward_ad.LEVELS or batching.LEVELS:
            return self._update("sub_", lambda t: t - other, other)
        return _arithmetic_(self, "sub_", "subtract", other)

    def mul_(self, other):
        if _recording(self, other) or forward_ad.LEVELS or batching.LEVELS:
            return self._update("mul_", lambda t: t * other, other)
        return _arithmetic_(self, "mul_", "multiply", other)

    def div_(self, other, *, rounding_mode=None):
        if rounding_mode is not None:
            return self._update("div_", lambda t: t.div(other, rounding_mode=rounding_mode),
                                other)
        if _recording(self, other) or forward_ad.LEVELS or batching.LEVELS:
            return self._update("div_", lambda t: t / other, other)
        return _arithmetic_(self, "div_", "true_divide", other)

    def pow_(self, exponent):
        return self._update("pow_", lambda t: t ** exponent, exponent)

    def clamp_(self, min=None, max=None):
        return self._update("clamp_", lambda t: t.clamp(min, max), min, max)

    clip_ = clamp_

    def masked_fill_(self, mask, value):
        return self._update("masked_fill_", lambda t: t.masked_fill(mask, value), value)

    def scatter_(self, dim, index, src=None, *, value=None):
        return self._update("scatter_", lambda t: t.scatter(dim, index, src, value=value), src)

    def scatter_add_(self, dim, index, src):
        return self._update("scatter_add_", lambda t: t.scatter_add(dim, index, src), src)

    def index_add_(self, dim, index, source, *, alpha=1):
        return self._update("index_add_", lambda t: t.index_add(dim, index, source, alpha=alpha),
                            source)

    def index_fill_(self, dim, index, value):
        return self._update("index_fill_", lambda t: t.index_fill(dim, index, value), value)

    def copy_(self, src):
        """Write ``src`` (broadcast to this shape, cast to this dtype) into this tensor."""
        src = as_tensor(src, like=self)
        if src.device != self.device:
            src = src.to(self.device)
        if src.ndim > self.ndim:
            raise RuntimeError(f"copy_: a source of shape {tuple(src.shape)} does not broadcast "
                               f"to the tensor's shape {tuple(self.shape)}")
        return self._update("copy_", lambda t: _overwrite(t, src), src, cast=True, written=src)

    def fill_(self, value):
        if isinstance(value, Tensor) and value.ndim != 0:
            raise RuntimeError(f"fill_: only supports a 0-dimension value tensor, but got a "
                               f"tensor with {value.ndim} dimensions (shape "
                               f"{tuple(value.shape)})")
        if self._view_of is not None and self._view_of[1] is Expand:
            self._view_of[0].fill_(value)  # every element of the expanded view is one of these
            return self
        value = _fitting(value, self.array.dtype, "fill_")
        return self._update("fill_", lambda t: _overwrite(t, value), value, cast=True)

    def zero_(self):
        return self.fill_(0)

    def uniform_(self, a=0.0, b=1.0, *, generator=None):
        """Fill with draws uniform on [a, b). Drawn on the host by minigrad's one generator
        and copied to the tensor's device, on purpose: a seed gives the same numbers on the
        CPU and the GPU."""
        draw = host_generator(generator).random(self.shape) * (b - a) + a
        return self.copy_(draw.astype(self.dtype))

    def normal_(self, mean=0.0, std=1.0, *, generator=None):
        """Fill with normal draws of ``mean`` and ``std``, drawn on the host as ``uniform_``'s."""
        draw = host_generator(generator).standard_normal(self.shape) * std + mean
        return self.copy_(draw.astype(self.dtype))

    def exponential_(self, lambd=1.0, *, generator=None):
        """Fill with exponential draws of rate ``lambd`` (mean 1 / lambd), on the host as
        ``uniform_``'s."""
        if not lambd > 0:
            raise RuntimeError(f"exponential_ expects lambd > 0.0, but found lambd={lambd}")
        draw = host_generator(generator).exponential(1.0 / lambd, self.shape)
        return self.copy_(draw.astype(self.dtype))

    def random_(self, from_=0, to=None, *, generator=None):
        """Fill with integers drawn uniformly from [from_, to - 1] (``random_(to)``: from 0;
        no bound: from 0 to the largest integer the dtype holds exactly, 2^24 for float32,
        2^53 for float64, as PyTorch's)."""
        if to is None and from_ != 0:
            from_, to = 0, from_
        if to is None:
            kind = self.array.dtype
            to = 2 if kind.kind == "b" else 2 ** (np.finfo(kind).nmant + 1) + 1 if \
                kind.kind == "f" else builtins.int(np.iinfo(kind).max) + 1
        if not from_ < to:
            raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got "
                               f"from={from_} >= to={to}")
        draw = host_generator(generator).integers(from_, to, self.shape)
        return self.copy_(draw.astype(self.dtype))

    def __setitem__(self, index, value):
        """``x[index] = value``. Recorded as PyTorch records it: through a view (slices and
        integers: the view is overwritten, ``CopySlices``), or as an index put (index
        tensors)."""
        basic, advanced = _split_index(_index(index, self), self.ndim)
        value = _fitting(value, self.array.dtype, "__setitem__") if \
            self.array.dtype.kind in "iu" else value  # (-1 into uint8: 255; inf refused)
        if isinstance(value, (list, tuple)):
            value = np.asarray(value)  # host data (NumPy's dtypes), copied to the device below
        if _is_array(value):
            value = Tensor._make(backend.to_device(value, self.device))
        if isinstance(value, Tensor) and value.dtype != self.dtype:
            value = value.to(self.dtype)
        if isinstance(value, Tensor) and value.ndim and value.shape[0] == 1:
            value = _without_leading_ones(value)  # as PyTorch reads a value: (1, 4) fits (4,)
        recording = _recording(self, value)
        if (recording or forward_ad.LEVELS) and advanced is None and not _has_arrays(basic):
            self[index].copy_(value)
        elif recording or forward_ad.LEVELS:  # (forward mode: the tangent is written too)
            self._update("__setitem__", lambda t: SetItem.apply(t, value, index=basic,
                                                                then=advanced), value, cast=True)
        else:
            _check_writable(self, "__setitem__",
                            basic if advanced is None and not _has_arrays(basic) else None)
            raw = value.array if isinstance(value, Tensor) else value
            if _is_array(raw):  # a tensor of another device is copied here
                raw = backend.to_device(raw, self.device)
            if advanced is None and not _has_arrays(basic):
                _check_no_partial_overlap(self.array[basic], "__setitem__", (raw,))
            target = self.array if advanced is None else self.array[basic]
            try:
                target[basic if advanced is None else advanced] = raw
            except ValueError as e:
                shape = tuple(raw.shape) if _is_array(raw) else np.shape(raw)
                raise RuntimeError(f"__setitem__: {e} (a value of shape {shape} written into "
                                   f"a tensor of shape {tuple(self.shape)})") from None
            self._shared_counter()[0] += 1

    def __iadd__(self, other): return self.add_(other)
    def __ipow__(self, other): return self.pow_(other)
    def __iand__(self, other): return self.bitwise_and_(other)
    def __ior__(self, other): return self.bitwise_or_(other)
    def __ixor__(self, other): return self.bitwise_xor_(other)
    def bitwise_and_(self, other): return self._update("bitwise_and_", lambda t: t & other, other)
    def bitwise_or_(self, other): return self._update("bitwise_or_", lambda t: t | other, other)
    def bitwise_xor_(self, other): return self._update("bitwise_xor_", lambda t: t ^ other, other)
    def __isub__(self, other): return self.sub_(other)
    def __imul__(self, other): return self.mul_(other)
    def __itruediv__(self, other): return self.div_(other)
    def exp_(self): return self._update("exp_", Tensor.exp)
    def log_(self): return self._update("log_", Tensor.log)
    def sqrt_(self): return self._update("sqrt_", Tensor.sqrt)
    def neg_(self): return self._update("neg_", Tensor.neg)
    def abs_(self): return self._update("abs_", Tensor.abs)
    def relu_(self): return self._update("relu_", Tensor.relu)
    def tanh_(self): return self._update("tanh_", Tensor.tanh)
    def sigmoid_(self): return self._update("sigmoid_", Tensor.sigmoid)
    def sin_(self): return self._update("sin_", Tensor.sin)
    def cos_(self): return self._update("cos_", Tensor.cos)
    def sinh_(self): return self._update("sinh_", Tensor.sinh)
    def cosh_(self): return self._update("cosh_", Tensor.cosh)
    def log1p_(self): return self._update("log1p_", Tensor.log1p)
    def expm1_(self): return self._update("expm1_", Tensor.expm1)
    def floor_(self): return self._update("floor_", Tensor.floor)
    def ceil_(self): return self._update("ceil_", Tensor.ceil)
    def trunc_(self): return self._update("trunc_", Tensor.trunc)
    def fix_(self): return self._update("fix_", Tensor.trunc)
    def frac_(self): return self._update("frac_", Tensor.frac)
    def sign_(self): return self._update("sign_", Tensor.sign)

    def round_(self, *, decimals=0):
        return self._update("round_", lambda t: t.round(decimals=decimals))

    def clamp_min_(self, min): return self._update("clamp_min_", lambda t: t.clamp(min=min), min)
    def clamp_max_(self, max): return self._update("clamp_max_", lambda t: t.clamp(max=max), max)
    def tril_(self, diagonal=0): return self._update("tril_", lambda t: t.tril(diagonal))
    def triu_(self, diagonal=0): return self._update("triu_", lambda t: t.triu(diagonal))

    def fill_diagonal_(self, fill_value, wrap=False):
        """Write ``fill_value`` on the main diagonal (all dims of equal length, or a matrix;
        a tall matrix with ``wrap`` starts again every ``cols + 1`` rows, as PyTorch)."""
        if self.ndim < 2:
            raise RuntimeError("dimensions must larger than 1")
        if self.ndim > 2 and len(set(self.shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")
        xp = backend.xp_of(self.array)
        step = builtins.sum(math.prod(self.shape[k + 1:]) for k in range(self.ndim))
        count = builtins.min(self.shape)
        if self.ndim == 2 and wrap and self.shape[0] > self.shape[1]:
            count = -(-self.numel() // step)
        mask = xp.zeros(self.numel(), dtype=dtypes.bool)
        mask[:count * step:step] = True
        mask = Tensor._make(mask.reshape(self.shape))
        return self._update("fill_diagonal_", lambda t: t.masked_fill(mask, fill_value))

    # In-place changes of shape: the tensor takes the view's array and history. A view's
    # old self becomes the source of the new view, so a later write still reaches its base.
    def squeeze_(self, dim=None):
        return self._reshape_("squeeze_", lambda t: t.squeeze(dim))

    def unsqueeze_(self, dim):
        return self._reshape_("unsqueeze_", lambda t: t.unsqueeze(dim))

    def t_(self):
        return self._reshape_("t_", Tensor.t)

    def transpose_(self, dim0, dim1):
        return self._reshape_("transpose_", lambda t: t.transpose(dim0, dim1))

    def _reshape_(self, op, view):
        if _recording(self):
            _check_not_leaf(self, op)
        was = _new(Tensor)
        was.__dict__.update(self.__dict__)
        out = view(was)
        self.array = out.array
        if self._view_of is not None and out._view_of is not None:
            self._vc, self._view_of, self._view_version = out._vc, out._view_of, out._view_version
        if out.grad_fn is not None:
            _new_history(self, out.grad_fn, out._out_idx)
        return self

    def _update(self, op, compute, *others, cast=False, written=None):
        """Write ``compute(self)`` into this tensor's memory (see the section's comment);
        ``others`` are the other tensors it reads. Arithmetic results must be castable to
        this dtype as in PyTorch; copies (``cast``) are cast whatever their dtype. A copy
        through a view passes the tensor ``written`` on to the base's node as it is."""
        data = self.array
        _check_writable(self, op)
        _check_no_partial_overlap(data, op, others)
        recording = _recording(self, *others)
        if recording:
            if self._view_of is not None:  # (PyTorch's first check, before the leaf's)
                _check_view_writable(self, op)
            _check_not_leaf(self, op)
            if self._view_of is not None and self._vc[0] != self._view_version:
                _refresh_view(self)
            before = Tensor._make(on_arrays(_copy_of, data), self.requires_grad, self.grad_fn,
                                  self._out_idx)
            if forward_ad.LEVELS:  # (the op's jvp rule reads the tangents of the old values)
                forward_ad.lend_tangents(self, before)
            new = _fitted(self, op, compute(before), cast)
        else:
            with no_grad():
                new = _fitted(self, op, compute(self), cast)
        if batching.LEVELS:  # (a batched value cannot be written into an unbatched tensor)
            batching.check_inplace(self, new)
        on_arrays(_write_values, data, new.array)
        self._shared_counter()[0] += 1
        if recording:
            _rebase(self, new, written)
        if forward_ad.LEVELS:
            forward_ad.take_tangents(self, new)
        return self


Tensor._output_class = Tensor  # what ops make, from any Tensor (an nn.Parameter too)


# --- in place: PyTorch's refusals of a write, and the history a recorded write leaves ---

def _check_writable(t, op, index=None):
    """PyTorch's refusals of an in-place write whatever it computes: into an expanded view
    (several elements share one place in memory), and into a view made under no_grad of a
    tensor that requires grad, with grad mode back on. ``index`` (basic indexing): only
    those elements are written, and only they must not overlap, as in PyTorch."""
    data = t.array
    overlap = 0 in data.strides and _expanded(data)
    if overlap and index is not None:
        region = data[index]
        overlap = _is_array(region) and _expanded(region)  # (not an array: one element)
    if not getattr(data.flags, "writeable", True) or overlap:
        raise RuntimeError(
            f"{op}: unsupported operation: more than one element of the written-to tensor "
            f"(shape {tuple(t.shape)}, an expanded view) refers to a single memory "
            "location. Please clone() the tensor before performing the operation.")
    if t._made_without_grad and STATE.grad_enabled:
        what = "a view"
        if t.grad_fn is not None:  # made with grad mode on, of a view made under no_grad
            name = t.grad_fn.name().rstrip("0123456789").removesuffix("Backward")
            what = f"output {t._out_idx} of {name} is a view of a view which"
        raise RuntimeError(f"{op}: {what} was created in no_grad mode and is being modified "
                           "inplace with grad mode enabled; move both the view and the "
                           "in-place change inside the no_grad block, or both outside")


def _expanded(data):
    """Whether some element of ``data`` is one memory location seen at several indices (a
    stride of 0 along a dim of size > 1: an expanded tensor; PyTorch's test of internal
    overlap). An empty array has no element to share, whatever its strides."""
    return data.size > 0 and builtins.any(s == 0 and n > 1
                                          for n, s in zip(data.shape, data.strides))


def _check_no_partial_overlap(written, op, others):
    """PyTorch's refusal of an in-place write that reads part, not all, of the memory it
    writes (``x[1:].add_(x[:-1])``: read before or after the write, the values would
    differ): where the written array and an input are each dense (their elements fill one
    stretch of memory, in any order of dims) and the stretches meet without being the same
    elements in the same layout. Where either is not dense PyTorch cannot tell and lets it
    be, and so does this (host arrays; the GPU's are not checked)."""
    span = _dense_span(written) if others else None
    if span is None:
        return
    for other in others:
        raw = other.array if isinstance(other, TensorBase) else other
        if raw is written or type(raw) is not np.ndarray:
            continue
        theirs = _dense_span(raw)
        if theirs is not None and theirs[0] < span[1] and span[0] < theirs[1] and (
                theirs != span or raw.strides != written.strides):
            raise RuntimeError(f"{op}: unsupported operation: some elements of the input "
                               "tensor and the written-to tensor refer to a single memory "
                               "location. Please clone() the tensor before performing the "
                               "operation.")


def _dense_span(a):
    """(first byte, end) of a host array whose elements fill one stretch of memory, each
    once (dims in any order, no negative strides); None otherwise, or with no elements."""
    if type(a) is not np.ndarray or a.size == 0:
        return None
    step = a.itemsize
    for stride, n in sorted((s, n) for s, n in zip(a.strides, a.shape) if n > 1):
        if stride != step:
            return None
        step *= n
    start = a.__array_interface__["data"][0]
    return start, start + a.nbytes


def _check_view_writable(t, op):
    """PyTorch refuses an in-place change, recorded in a graph, of one of several views
    made by one call (split, chunk, unbind), or of a view of one."""
    multi = multiple_views_op(t)
    if multi is not None:
        raise RuntimeError(f"{op}: {multi} is a view and is being modified inplace. This view "
                           "is the output of a function that returns multiple views. Such "
                           "functions do not allow the output views to be modified inplace: "
                           "use an out-of-place op instead")


def _check_not_leaf(t, op):
    """PyTorch's rule: a leaf that requires grad (or a view of one) is not changed in place
    while a graph is being recorded (its ``.grad`` would describe a value it no longer has)."""
    if t.requires_grad and t.grad_fn is None:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an "
                           "in-place operation (wrap the update in `with mg.no_grad():`)")
    base = t._base
    if base is not None and base.requires_grad and base.grad_fn is None:
        raise RuntimeError(f"{op}: a view of a leaf Variable that requires grad is being used "
                           "in an in-place operation (wrap the update in `with mg.no_grad():`)")


def _recording(t, *others):
    """Whether an in-place op on ``t`` that reads ``others`` is recorded in a graph."""
    return STATE.grad_enabled and (t.requires_grad or builtins.any(
        isinstance(o, Tensor) and o.requires_grad for o in others))


def _check_fit(t, op, shape, dtype, cast=False):
    """PyTorch's rules for writing a result of ``shape`` and ``dtype`` into ``t`` in place:
    the same shape, and a dtype that may be cast to t's (any, for a copy: ``cast``)."""
    if tuple(shape) != t.shape:
        raise RuntimeError(f"{op}: output with shape {list(t.shape)} doesn't match the "
                           f"broadcast shape {list(shape)}")
    if dtype != t.dtype and not cast and not dtypes.can_cast(dtype, t.dtype):
        raise RuntimeError(f"{op}: result type {dtypes.torch_name(dtype)} can't be cast "
                           f"to the desired output type {dtypes.torch_name(t.dtype)}")


def _fitted(t, op, new, cast):
    """``new`` checked to fit ``t`` (see _check_fit) and cast to t's dtype."""
    _check_fit(t, op, new.shape, new.dtype, cast)
    return new if new.dtype == t.dtype else new.to(t.dtype)


def _overwrite(t, value):
    """``value`` broadcast to ``t``'s shape and cast to its dtype, recorded as a function of
    ``t`` (with a zero gradient), so a tensor in a graph stays in it after ``copy_``."""
    try:
        return Overwrite.apply(t, value)
    except ShapeError:
        shape = tuple(value.shape) if isinstance(value, Tensor) else ()
        raise RuntimeError(f"the value of shape {shape} cannot be broadcast to the tensor's "
                           f"shape {tuple(t.shape)}") from None


def _rebase(t, new, written=None):
    """After an in-place op recorded as ``new``: make ``new``'s node the history of ``t``.
    When ``t`` is a view, its base changed too: the base's new node is ``CopySlices``
    (base with the view's region replaced) and ``t`` becomes that view of the new base."""
    if t._view_of is None:
        _new_history(t, new.grad_fn, new._out_idx)
        return
    chain = []
    root = t
    while root._view_of is not None:
        source, op, params, i = root._view_of
        chain.append((op, params, i))
        root = source
    chain.reverse()
    before = Tensor._make(root.array, root.requires_grad, root.grad_fn, root._out_idx)
    after = CopySlices.apply(before, new if written is None else written, chain=tuple(chain))
    _new_history(root, after.grad_fn, 0)
    view = replay_view(root, chain)
    _new_history(t, view.grad_fn, view._out_idx)
    t._view_version = t._vc[0]


def _arithmetic_(t, op, ufunc, other):
    """``t <op>= other`` with no graph to record (an optimiser's step, a manual update):
    the ufunc writes into t's memory, after PyTorch's checks of shape and dtype."""
    _check_writable(t, op)
    data = t.array
    raw = other.array if isinstance(other, Tensor) else other
    _check_no_partial_overlap(data, op, (raw,))
    if type(raw) is not np.ndarray or type(data) is not np.ndarray:  # (two host arrays: as is)
        raw = _operand_array(t, op, other, raw)
    if hasattr(raw, "dtype") and getattr(raw, "ndim", 0) > 0 or isinstance(other, Tensor):
        result = dtypes.promote_types(data.dtype, raw.dtype)  # PyTorch's promotion
    elif isinstance(raw, builtins.float) and data.dtype.kind in "biu":
        result = dtypes.get_default_dtype()  # a Python float makes an int tensor float
    elif type(raw) is builtins.int and data.dtype.kind == "b":
        result = dtypes.int64
    else:
        result = data.dtype
        if type(raw) is builtins.int and data.dtype.kind in "iu" and ufunc != "true_divide":
            raw = _wrapped(raw, data.dtype)
    if ufunc == "true_divide" and np.dtype(result).kind in "biu":
        result = dtypes.get_default_dtype()
    shape = getattr(raw, "shape", ())
    _check_fit(t, op, np.broadcast_shapes(data.shape, shape) if shape != data.shape
               else shape, result)
    on_arrays(_ufunc_into, data, raw, ufunc)
    t._shared_counter()[0] += 1
    return t


_PY_NUMBERS = (builtins.int, builtins.float)


def _scaled_into(t, op, other, alpha):
    """``t += alpha * other`` with no graph to record (``p.sub_(grad, alpha=lr)``), in one
    pass through t's memory: ``backend.add_scaled``, one rounding of the exact sum as
    ``add(alpha=)`` gives, for float32 and float64 host tensors of one shape and dtype whose
    memory does not partly overlap. False, doing nothing, elsewhere (``alpha`` a bool or
    past float32's range, another dtype or device, broadcasting, a graph to record)."""
    if type(alpha) not in _PY_NUMBERS or not isinstance(other, Tensor) or \
            _recording(t, other) or forward_ad.LEVELS or batching.LEVELS:
        return False
    data, raw = t.array, other.array
    if type(data) is not np.ndarray or type(raw) is not np.ndarray or \
            data.dtype not in (np.float32, np.float64) or raw.dtype != data.dtype or \
            raw.shape != data.shape or not abs(alpha) <= np.finfo(np.float32).max:
        return False
    if raw is not data and np.may_share_memory(raw, data):
        return False  # (the general path refuses a partial overlap, or reads all first)
    _check_writable(t, op)
    on_arrays(backend.add_scaled, data, data, raw, alpha)
    t._shared_counter()[0] += 1
    return True


def _operand_array(t, op, other, raw):
    """The operand ``raw`` of an in-place op on ``t`` as something t's array module takes:
    numbers as they are, lists as arrays, an array on t's device. A Tensor on another device
    is an error, as in an op that records a graph; a bare array is copied to t's device."""
    if isinstance(raw, _PY_SCALARS) or isinstance(raw, np.generic):
        return raw
    if isinstance(raw, (list, tuple)):
        return backend.xp_of(t.array).asarray(raw)
    if isinstance(other, Tensor):
        backend.check_same_device(op, [t.array, raw])
        return raw
    return backend.to_device(raw, t.device) if _is_array(raw) else raw


# The raw array work of the in-place ops, one function each (``on_arrays``: mg.compile
# records each call as one instruction of a step's program, named after the function).

def _ufunc_into(data, raw, ufunc):
    """``data <ufunc>= raw``, written into ``data`` (an in-place op with no graph)."""
    getattr(backend.xp_of(data), ufunc)(data, raw, out=data, casting="unsafe")
    return data


def _write_values(data, new):
    """``new``'s values written into ``data`` (an in-place op: ``_update``)."""
    data[...] = new
    return data


def _copy_of(data):
    """A copy of ``data``: a tensor's values before an in-place op recorded in a graph."""
    return data.copy()


# --- the array work of views, max/min and sort ----------------------------------------------

def _new_shape(op, x, shape):
    """The shape argument of reshape or view, as a tuple of ints; PyTorch's refusal of a
    size below -1 and of more than one -1 (NumPy reads any negative size as -1)."""
    shape = _shape_arg(shape)
    if any(n < -1 for n in shape) or shape.count(-1) > 1:
        raise RuntimeError(f"{op}: invalid shape {list(shape)} for a tensor of shape "
                           f"{tuple(x.shape)}: sizes must be >= 0, and at most one -1")
    return shape


def _viewable(data, shape):
    """Whether ``data`` (an array) can be seen with ``shape`` without a copy: PyTorch's rule
    for ``view`` (ATen's computeStride), on the array's strides. Each run of dims that is
    contiguous in memory must be made of whole dims of the new shape."""
    old, strides = data.shape, data.strides
    if data.size == 0 or not old:
        return True
    if -1 in shape:  # (reshape reports a size that does not fit)
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or data.size % known:
            return True
        shape = tuple(data.size // known if n == -1 else n for n in shape)
    view_d, chunk_stride = len(shape) - 1, strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old) - 1, -1, -1):
        tensor_numel *= old[d]
        if d == 0 or (old[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_stride):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if d > 0:
                chunk_stride, tensor_numel, view_numel = strides[d - 1], 1, 1
    return view_d == -1


def _without_leading_ones(value):
    """``value`` reshaped without its leading dims of size 1 (a view)."""
    k = 0
    while k < value.ndim and value.shape[k] == 1:
        k += 1
    return value.reshape(value.shape[k:])


def _floats_only(op, x, y):
    """Promoted operands (x, y) of ``op``, which PyTorch has for floating point only."""
    if x.array.dtype.kind != "f":
        raise NotImplementedError(f"{op}: not implemented for {x.dtype} tensors (got "
                                  f"shapes {tuple(x.shape)} and {tuple(y.shape)})")
    return x, y


def _split_evenly(t, op, dim, sections):
    """``hsplit``/``vsplit``/``dsplit`` (``op``): ``tensor_split`` along ``dim``, whose
    size a number of sections must divide."""
    need = {"vsplit": 2, "dsplit": 3}.get(op, 1)
    if t.ndim < need:
        raise RuntimeError(f"{op}: requires a tensor with at least {need} dimension"
                           f"{'s' if need > 1 else ''}, but got a tensor with {t.ndim} "
                           f"dimensions!")
    if isinstance(sections, (builtins.int, np.integer)) and \
            (sections == 0 or t.shape[dim] % sections):
        raise RuntimeError(f"{op}: attempted to split along dimension {dim}, but the size "
                           f"of the dimension {t.shape[dim]} is not divisible by the "
                           f"split_size {sections}!")
    return t.tensor_split(sections, dim)


def _extreme(t, dim, keepdim, axis, keepdims, full_op, dim_op, pair_op):
    if isinstance(dim, Tensor):
        return pair_op.apply(*_operands(t, dim))
    dim = axis if dim is None else dim
    keepdim = _kd(keepdim, keepdims)
    name = full_op.__name__.lower()  # max or min
    if dim is not None and not _is_int(dim):  # (amax/amin take several dims)
        raise TypeError(f"{name}(): argument 'dim' must be int, not {type(dim).__name__} "
                        f"(use amax/amin to reduce over several dims)")
    if dim is not None:
        _reducible(t, name, dim)
        if t.ndim == 0:  # a 0-d tensor has one dim to reduce, of size 1
            _dim(t, dim)
            values, indices = dim_op.apply(t.reshape(1), dim=0, keepdim=False)
        else:
            values, indices = dim_op.apply(t, dim=_dim(t, dim), keepdim=keepdim)
        return ValuesIndices(values, indices)
    return full_op.apply(t, dims=_reducible(t, name, dim), keepdim=keepdim)


def _sort_order(data, axis, descending):
    """The int64 indices that sort ``data`` along ``axis``, stably (equal elements keep their
    order; NaN last, as the largest value). Descending: the ascending order of the reversed
    data, reversed, and mapped back to the original positions, so that equal elements
    still keep their order."""
    xp = backend.xp_of(data)
    if not descending:
        return xp.argsort(data, axis=axis, kind="stable").astype(np.int64, copy=False)
    order = xp.flip(xp.argsort(xp.flip(data, axis), axis=axis, kind="stable"), axis)
    return (data.shape[axis] - 1 - order).astype(np.int64, copy=False)


def _no_bool_select(t, op):
    if t.array.dtype.kind == "b":
        raise NotImplementedError(f"{op}: not implemented for bool tensors (shape "
                                  f"{tuple(t.shape)})")


def _median(t, op, dim, keepdim):
    _no_bool_select(t, op)
    if dim is None:
        kind = MedianAll if op == "median" else NanmedianAll
        return kind.apply(t, dims=tuple(range(t.ndim)), keepdim=False)
    return _selected(t, op, dim, keepdim)


_SELECTION_OPS = {"median": MedianDim, "nanmedian": NanmedianDim, "kthvalue": Kthvalue,
                  "mode": Mode}


def _selected(t, op, dim, keepdim, k=None):
    """``(values, indices)`` of median, nanmedian, kthvalue or mode along ``dim``: the places
    found on the arrays, the values gathered there (the gradient goes to those places)."""
    if not _is_int(dim):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")
    _no_bool_select(t, op)
    d = _dim(t, dim)
    x = t.reshape(1) if t.ndim == 0 else t
    keepdim = builtins.bool(keepdim) and t.ndim > 0
    n = x.shape[d]
    if op == "kthvalue" and not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {d} "
                           f"(k = {k}, shape {tuple(t.shape)})")
    if n == 0:
        raise IndexError(f"{op}(): Expected reduction dim {d} to have non-zero size (shape "
                         f"{tuple(t.shape)}).")
    idx = x._make(on_arrays(_selection, x.array, d, op, k))  # (size 1 along d)
    if not keepdim:
        idx = idx.squeeze(d)
    xp = backend.xp_of(x.array)
    places = []
    for j, size in enumerate(x.shape):
        if j == d:
            places.append(idx)
            continue
        at = j if keepdim or j < d else j - 1
        places.append(x._make(xp.arange(size).reshape((size,) + (1,) * (idx.ndim - at - 1))))
    values = _SELECTION_OPS[op].apply(x, index=_index(tuple(places), x))
    return ValuesIndices(values, idx)


def _selection(data, axis, op, k):
    """The int64 places (size 1 along ``axis``) that median, nanmedian, kthvalue (the k-th
    smallest) or mode picks along ``axis``, from a stable sort (NaN last)."""
    xp = backend.xp_of(data)
    data = xp.moveaxis(data, axis, -1)
    n = data.shape[-1]
    order = xp.argsort(data, axis=-1, kind="stable")
    nans = (data != data).sum(-1, keepdims=True)
    if op == "kthvalue":
        pos = xp.full(data.shape[:-1] + (1,), k - 1)
    elif op == "median":  # (a row with a NaN: its first NaN)
        pos = xp.where(nans > 0, n - nans, (n - 1) // 2)
    elif op == "nanmedian":
        pos = xp.maximum((n - nans - 1) // 2, 0)
    else:  # mode: the longest run of equal sorted values, the first (smallest) of those
        s = xp.take_along_axis(data, order, -1)
        starts = xp.ones(s.shape, dtype=bool)
        starts[..., 1:] = s[..., 1:] != s[..., :-1]
        steps = xp.arange(n)
        first = xp.maximum.accumulate(xp.where(starts, steps, 0), axis=-1)
        pos = xp.argmax(steps - first, axis=-1)[..., None]  # (the run's last element)
    places = xp.take_along_axis(order, pos.astype(np.int64), -1)
    return backend.row_major(xp.moveaxis(places, -1, axis).astype(np.int64))


def _running_extreme(t, op, dim):
    d = _dim(t, dim)
    x = t.reshape(1) if t.ndim == 0 else t
    idx = x._make(on_arrays(_running_places, x.array, d, op == "cummax"))
    values = (Cummax if op == "cummax" else Cummin).apply(x, index=_gather_places(x, d, idx))
    if t.ndim == 0:
        values, idx = values.reshape(()), idx.reshape(())
    return ValuesIndices(values, idx)


def _running_places(data, axis, largest):
    """The int64 places of the running max (min) along ``axis``: the last of equal values,
    and every NaN (which stays the extreme), as PyTorch."""
    xp = backend.xp_of(data)
    values = (xp.maximum if largest else xp.minimum).accumulate(data, axis=axis)
    new = (data == values) | (data != data)
    n = data.shape[axis]
    steps = xp.arange(n).reshape((n,) + (1,) * (data.ndim - axis - 1))
    return backend.row_major(xp.maximum.accumulate(xp.where(new, steps, 0), axis=axis)
                             .astype(np.int64))


def _padded_last(x, size):
    """``x`` with zeros after its values along the last dim, up to ``size``."""
    if x.shape[-1] == size:
        return x
    zeros = x.new_zeros(tuple(x.shape[:-1]) + (size - x.shape[-1],))
    return _concatenated([x, zeros], -1)


def _cross(a, b, dim, op):
    if a.ndim != b.ndim:
        raise RuntimeError(f"{op}: inputs must have the same number of dimensions (shapes "
                           f"{tuple(a.shape)} and {tuple(b.shape)})")
    shape = _broadcast_shape(op, a, b)
    d = _dim(a, dim)
    if a.shape[d] != 3 or b.shape[d] != 3:
        raise RuntimeError(f"{op}: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[d]} and {b.shape[d]}")
    a, b = a.expand(shape), b.expand(shape)
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return _concatenated([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def _dim_of(ndim, dim):
    """``dim`` as a non-negative dim of a tensor with ``ndim`` dims (IndexError, as PyTorch's,
    when out of range)."""
    if not -ndim <= dim < ndim:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-ndim}, "
                         f"{ndim - 1}], but got {dim})")
    return dim % ndim


def _tensordot(a, b, dims=2):
    """The sums of products over ``dims``: an int (the last dims of a with the first
    of b) or two lists of dims, as ``torch.tensordot``."""
    b = _tensor_arg("tensordot", b)
    if _is_int(dims):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > builtins.min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got "
                               f"dims={dims} (shapes {tuple(a.shape)} and "
                               f"{tuple(b.shape)})")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if _is_int(d) else list(d) for d in dims)
        if len(da) != len(db):
            raise RuntimeError(f"both dimension lists should have same length (got "
                               f"{da} and {db})")
        da, db = [_dim(a, d) for d in da], [_dim(b, d) for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[i]} in dim {i} and second has size "
                               f"{b.shape[j]} in dim {j}")
    ka = [d for d in range(a.ndim) if d not in da]
    kb = [d for d in range(b.ndim) if d not in db]
    size = math.prod(a.shape[d] for d in da)
    left = a.permute(ka + da).reshape(-1, size)
    right = b.permute(db + kb).reshape(size, -1)
    return left.mm(right).reshape([a.shape[d] for d in ka] + [b.shape[d] for d in kb])
