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


# mg.save writes a Parameter as one and mg.load makes it one again: serialization is below
# nn, so nn hands it the class
serialization.parameter_class = Parameter
