"""Parameter: a Tensor that is a module's parameter, as PyTorch's ``nn.Parameter``."""
import numpy as np

import minigrad as mg
from minigrad import serialization


class Parameter(mg.Tensor):
    """A Tensor that is a module's parameter: registered when assigned to a Module attribute,
    and requiring grad by default. It shares memory with the data it is made from."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = np.empty((0,), dtype=mg.get_default_dtype())
        super().__init__(data.array if isinstance(data, mg.Tensor) else data)
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        """A Parameter of a copy of the values (its ``.grad`` left behind, as PyTorch's)."""
        if id(self) not in memo:
            memo[id(self)] = type(self)(self.detach().clone(), self.requires_grad)
        return memo[id(self)]


class _BufferType(type):
    """``isinstance(t, Buffer)``: whether ``t`` was made by ``Buffer``."""

    def __instancecheck__(cls, value):
        return isinstance(value, mg.Tensor) and getattr(value, "_is_buffer", False)


class Buffer(metaclass=_BufferType):
    """A tensor marked to become a module's buffer when assigned to a Module attribute
    (``self.running_mean = nn.Buffer(mg.zeros(4))``), as PyTorch's ``nn.Buffer``:
    ``register_buffer`` by assignment, kept in the state dict unless ``persistent=False``.
    ``Buffer(data)`` is ``data`` detached (a plain Tensor sharing its memory)."""

    def __new__(cls, data=None, *, persistent=True):
        if data is None:
            data = mg.empty(0)
        t = data.detach().requires_grad_(data.requires_grad)
        t._is_buffer, t.persistent = True, persistent
        return t


# mg.save writes a Parameter as one and mg.load makes it one again: serialization is below
# nn, so nn hands it the class
serialization.parameter_class = Parameter
