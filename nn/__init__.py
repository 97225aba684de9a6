"""nn: layers, losses and functional ops built on minigrad Tensors, with PyTorch's names."""
from . import functional, init  # noqa: F401
from .module import (IncompatibleKeys, Module, ModuleDict, ModuleList, Parameter,  # noqa: F401
                     Sequential)
