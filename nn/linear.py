"""Linear and Embedding, the two layers that are a weight matrix; Identity and Flatten,
which have none."""
import math

import minigrad as mg
from minigrad.arguments import _dim

from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter


class Linear(Module):
    """y = x @ W^T + b.

    Args:
        in_features, out_features: sizes of each input and output sample.
        bias: learn an additive bias (default True).
    Shape:
        input (*, in_features) -> output (*, out_features); ``weight`` is
        (out_features, in_features), initialised U(-1/sqrt(in), 1/sqrt(in)) as PyTorch's.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(mg.empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = (Parameter(mg.empty(out_features, device=device, dtype=dtype))
                     if bias else None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight.numel() > 0:  # (an empty weight has nothing to draw, nor a fan-in)
            init.kaiming_uniform_(self.weight, a=math.sqrt(5))  # = U(-1/sqrt(in), 1/sqrt(in))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class LazyLinear(Linear):
    """A Linear whose ``in_features`` is the size of the last dim of its first input, as
    PyTorch's LazyLinear; the call makes weight and bias as Linear does (U(-1/sqrt(in),
    1/sqrt(in))), on ``device`` and in ``dtype`` where given, else on the input's device and
    in its (floating) dtype, and the module becomes a Linear. Until that call it has no
    weight or bias: ``parameters()`` and ``state_dict()`` list none (PyTorch lists
    uninitialised placeholders), so make the optimiser, or load a checkpoint, after a first
    call on a batch.

    Args:
        out_features: size of each output sample.
        bias: learn an additive bias (default True).
    """
    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self.weight = self.bias = None
        self._lazy = dict(bias=bias, device=device, dtype=dtype)

    def forward(self, x):
        if type(self) is LazyLinear:
            self._materialize(x)
        return Linear.forward(self, x)

    def _materialize(self, x):
        if not isinstance(x, mg.Tensor) or x.ndim == 0:
            raise RuntimeError(f"LazyLinear: expected an input tensor with at least one dim "
                               f"to infer in_features from, got {type(x).__name__}"
                               f"{'' if not isinstance(x, mg.Tensor) else ' of shape ()'}")
        lazy = self.__dict__.pop("_lazy")
        dtype = lazy["dtype"] or (x.dtype if x.is_floating_point() else None)
        kw = dict(device=lazy["device"] or x.device, dtype=dtype)
        self.in_features = x.shape[-1]
        self.weight = Parameter(mg.empty(self.out_features, self.in_features, **kw))
        self.bias = Parameter(mg.empty(self.out_features, **kw)) if lazy["bias"] else None
        self.reset_parameters()
        self.__class__ = self.cls_to_become

    def extra_repr(self):
        return (f"in_features=0, out_features={self.out_features}, "
                f"bias={self._lazy['bias']}")


class Embedding(Module):
    """A lookup table: row i of ``weight`` is the vector of token i.

    Args:
        num_embeddings, embedding_dim: table size; ``weight`` is N(0, 1) initialised.
        padding_idx: this row starts at zero and never receives a gradient (negative:
            counted from the end; it must lie in [-num_embeddings, num_embeddings)).
        max_norm, norm_type: rows looked up whose norm_type-norm (default 2) exceeds
            max_norm are rescaled in ``weight`` to norm max_norm first (see F.embedding).
        scale_grad_by_freq, sparse: PyTorch's options, not implemented (True is an error).
    Shape:
        input (*) int64 or int32 ids in [0, num_embeddings) -> output (*, embedding_dim)

    ``Embedding.from_pretrained(embeddings)`` makes one whose weight is a given table.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        padding_idx = F.padding_index("Embedding", padding_idx, num_embeddings)
        if scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: scale_grad_by_freq and sparse are not "
                                      "implemented (expected False)")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(mg.empty(num_embeddings, embedding_dim, device=device,
                                             dtype=dtype), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if _weight.shape != (num_embeddings, embedding_dim):
                raise F.ArgumentError(f"Embedding: _weight of shape {_weight.shape} does not "
                                      f"match ({num_embeddings}, {embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is the 2-D tensor ``embeddings`` (num_embeddings,
        embedding_dim), sharing its memory, as PyTorch's. ``freeze`` (default True) keeps it
        out of training (requires_grad False); the ``padding_idx`` row keeps its values (it is
        not zeroed) and gets no gradient."""
        if embeddings.ndim != 2:
            raise F.ArgumentError(f"Embedding.from_pretrained: embeddings must be 2-D "
                                  f"(num_embeddings, embedding_dim), got shape "
                                  f"{embeddings.shape}")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse, _weight=embeddings,
                   _freeze=freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with mg.no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        return s


class Identity(Module):
    """Returns its input unchanged (a placeholder, as torch.nn.Identity); any arguments are
    accepted and ignored, so it can stand in for a layer that takes some."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Flatten(Module):
    """Flattens the dims start_dim..end_dim (inclusive; negative counts from the end) into
    one: (N, C, H, W) -> (N, C * H * W) with the defaults, which keep the batch dim.

    Args:
        start_dim: first dim to flatten (default 1).
        end_dim: last dim to flatten (default -1).
    """

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        for d in (self.start_dim, self.end_dim):  # (a 0-d input has one dim: 0 or -1)
            _dim(x, d)
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim ``dim`` into the dims ``unflattened_size`` (one of them may be -1):
    (N, 12) -> (N, 3, 4) with ``Unflatten(1, (3, 4))``; the inverse of ``Flatten``.

    Args:
        dim: the dim to split (negative counts from the end).
        unflattened_size: the sizes it becomes, a tuple (or list) of ints.
    """

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)) or \
                not all(isinstance(n, int) for n in unflattened_size):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, got "
                            f"{unflattened_size!r}")
        self.dim, self.unflattened_size = dim, unflattened_size

    def forward(self, x):
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
