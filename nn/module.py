"""Module, Parameter and the containers (Sequential, ModuleList, ModuleDict), as PyTorch's.

A Module registers the Parameters, buffers and sub-Modules assigned to its attributes;
``named_parameters`` and ``state_dict`` name them by dotted attribute path
(``encoder.layers.0.self_attn.q_proj.weight``), so checkpoints line up with PyTorch's.
"""
import operator
from collections import OrderedDict, namedtuple
from collections.abc import Iterable, Mapping
from itertools import chain, islice

import numpy as np

import minigrad as mg
from minigrad import backend
from minigrad.tensor import _is_array


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict(strict=False)`` could not match; reads as PyTorch's does."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class Parameter(mg.Tensor):
    """A Tensor that is a module's parameter: registered when assigned to a Module attribute,
    and requiring grad by default. It shares memory with the data it is made from."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = np.empty((0,), dtype=mg.get_default_dtype())
        super().__init__(data.data if isinstance(data, mg.Tensor) else data)
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of every layer and model: subclass it, assign submodules and Parameters in
    ``__init__``, and write ``forward``; call the module to run it (with its hooks)."""

    training = True

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "training", True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            new = hook(self, args)
            if new is not None:
                args = new if isinstance(new, tuple) else (new,)
        state = mg.autograd.grad_mode.STATE
        outer, state.scope = state.scope, self  # ops recorded now belong to this module
        try:
            out = self.forward(*args, **kwargs)
        finally:
            state.scope = outer
        for hook in list(self._forward_hooks.values()):
            new = hook(self, args, out)
            if new is not None:
                out = new
        return out

    # --- registration -----------------------------------------------------------------------
    def __setattr__(self, name, value):
        """As PyTorch's: a Parameter or Module value registers (replacing a buffer, submodule
        or plain attribute of that name), a Tensor or None assigned to a registered name
        replaces it there, anything else is a plain attribute (also before ``__init__``)."""
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._remove_from(name, d, self._buffers, self._modules, self._non_persistent)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(nn.Parameter or None expected)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                self._remove_from(name, d, self._parameters, self._buffers,
                                  self._non_persistent)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module "
                                    f"'{name}' (nn.Module or None expected)")
                modules[name] = value
            elif name in d.get("_buffers", ()):
                if value is not None and not isinstance(value, mg.Tensor):
                    raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                    "(Tensor or None expected)")
                self.register_buffer(name, value, persistent=name not in self._non_persistent)
            else:
                object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only called when normal lookup fails
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    @staticmethod
    def _remove_from(name, *tables):
        """Take ``name`` out of each dict or set in ``tables`` that holds it."""
        for table in tables:
            if name in table:
                if isinstance(table, dict):
                    del table[name]
                else:
                    table.discard(name)

    def _check_new_name(self, name, kind, table):
        """PyTorch's checks of a name given to ``register_<kind>``: a string, without ".",
        not empty, and not an attribute that is something else than an entry of ``table``."""
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f"{kind} name can't contain \".\"")
        if name == "":
            raise KeyError(f"{kind} name can't be empty string \"\"")
        if hasattr(self, name) and name not in table:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Add ``param`` (an nn.Parameter, or None for an empty slot) as ``name``; a name
        already registered as a parameter keeps its place."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_new_name(name, "parameter", self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            "(nn.Parameter or None required)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"Cannot assign non-leaf Tensor to parameter '{name}'. Model "
                             "parameters must be created explicitly; compute a function of "
                             "another Tensor in forward() instead.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that is part of the module's state but not trained (moved by ``to``,
        saved in ``state_dict`` unless ``persistent=False``); None leaves an empty slot."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_new_name(name, "buffer", self._buffers)
        if tensor is not None and not isinstance(tensor, mg.Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        """Add ``module`` (or None) as the child ``name``; a known child name keeps its place."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f"module name can't contain \".\", got: {name}")
        if name == "":
            raise KeyError("module name can't be empty string \"\"")
        self._modules[name] = module

    register_module = add_module

    def register_forward_pre_hook(self, hook):
        """``hook(module, args)`` runs before forward; a non-None return replaces args."""
        return _Handle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        """``hook(module, args, output)`` runs after forward; a non-None return replaces it."""
        return _Handle(self._forward_hooks, hook)

    # --- traversal ---------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                sub = f"{prefix}.{name}" if prefix else name
                yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, table, prefix, recurse, remove_duplicate=True):
        """(dotted name, value) of each entry of ``table`` here and (with ``recurse``) in
        every submodule; with ``remove_duplicate`` a shared module or value is named once."""
        seen = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for mod_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or id(value) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def _get_name(self):
        return type(self).__name__

    def get_submodule(self, target):
        """The submodule at the dotted path ``target`` ("" is the module itself)."""
        if target == "":
            return self
        module = self
        for item in target.split("."):
            if not hasattr(module, item):
                raise AttributeError(f"{module._get_name()} has no attribute `{item}`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return module

    def get_parameter(self, target):
        """The Parameter at the dotted path ``target`` (``"encoder.0.weight"``)."""
        module, name = self._owner_of(target)
        if not isinstance(getattr(module, name), Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return getattr(module, name)

    def get_buffer(self, target):
        """The buffer at the dotted path ``target`` (None for an empty buffer slot)."""
        module, name = self._owner_of(target)
        if name not in module._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return getattr(module, name)

    def _owner_of(self, target):
        """(the submodule holding the attribute at the dotted path ``target``, its name)."""
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
        return module, name

    # --- state ----------------------------------------------------------------------------------
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (detached unless keep_vars)."""
        out = OrderedDict() if destination is None else destination
        # every path to a shared module is named, as in PyTorch (named_parameters dedupes)
        for mod_prefix, module in self.named_modules(prefix=prefix.rstrip("."),
                                                     remove_duplicate=False):
            for table in ("_parameters", "_buffers"):
                for name, value in getattr(module, table).items():
                    if value is None or (table == "_buffers" and name in module._non_persistent):
                        continue
                    key = f"{mod_prefix}.{name}" if mod_prefix else name
                    out[key] = value if keep_vars else value.detach()
        return out

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy ``state_dict``'s tensors into this module's parameters and buffers in place.

        Each is written as ``tensor.copy_(value)`` under no_grad, as PyTorch does: the
        Parameter objects stay the same, their versions go up, and a graph that saved one
        of them before the load refuses to backpropagate through the old values. Values
        may be Tensors or NumPy or CuPy arrays (moved to the tensor's device).
        ``state_dict`` must be a mapping (TypeError otherwise, as PyTorch).

        With ``assign=True`` the module takes the state dict's tensors themselves instead
        (their dtype, device and memory, as PyTorch's ``assign``): a parameter becomes an
        ``nn.Parameter`` of the value, keeping the ``requires_grad`` the module's had; a
        buffer becomes the value.

        Returns (missing_keys, unexpected_keys); with ``strict`` any of them, and always a
        shape mismatch, raises an error that names the key (and both shapes). Nothing is
        copied unless every key fits, so a failed load leaves the module unchanged.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        values = {key: _array_of(state_dict[key]) for key in own if key in state_dict}
        errors = []
        for key, value in values.items():
            shape, target = tuple(value.shape), own[key]
            if shape != target.shape:
                errors.append(f"size mismatch for {key}: copying a tensor of shape {shape} "
                              f"from the checkpoint, the shape in the model is {target.shape}")
        if strict and (missing or unexpected):
            if missing:
                errors.append("missing keys: " + ", ".join(repr(k) for k in missing))
            if unexpected:
                errors.append("unexpected keys: " + ", ".join(repr(k) for k in unexpected))
        if errors:
            raise RuntimeError(f"load_state_dict: error(s) loading the state_dict of "
                               f"{type(self).__name__}: " + "; ".join(errors))
        if assign:
            self._assign_from(state_dict, values)
        else:
            with mg.no_grad():
                for key, value in values.items():
                    own[key].copy_(backend.to_device(value, own[key].device))
        return IncompatibleKeys(missing, unexpected)

    def _assign_from(self, state_dict, keys):
        """``load_state_dict(assign=True)``: every key of ``keys`` (checked already) takes
        the state dict's value itself, a Parameter where the module holds one."""
        for mod_prefix, module in self.named_modules(remove_duplicate=False):
            for table in ("_parameters", "_buffers"):
                for name, current in list(getattr(module, table).items()):
                    key = f"{mod_prefix}.{name}" if mod_prefix else name
                    if current is None or key not in keys:
                        continue
                    value = state_dict[key]
                    if not isinstance(value, mg.Tensor):  # an array: a Tensor sharing it
                        value = mg.Tensor(keys[key])
                    if table == "_parameters":
                        if isinstance(value, Parameter):
                            value.requires_grad_(current.requires_grad)
                        else:
                            value = Parameter(value, requires_grad=current.requires_grad)
                    getattr(module, table)[name] = value

    # --- modes and moves --------------------------------------------------------------------
    def train(self, mode=True):
        """Set the training flag of this module and (through their ``train``) of every
        submodule; ``mode`` must be a bool."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Set every parameter's ``.grad`` to None (the default), or fill it with zeros in
        place (the same Tensor, no longer recording: ``detach_()`` as in PyTorch)."""
        for p in self.parameters():
            if p.grad is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def apply(self, fn):
        """Call ``fn(module)`` on every submodule (children first) and on self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """Move (or cast) every parameter and buffer in place: the Parameter objects stay the
        same, so an optimiser built before keeps working. Only floating tensors are cast."""
        for t in list(self.parameters()) + list(self.buffers()):
            moved = mg.Tensor.to(t, *args, **kwargs) if t.is_floating_point() else \
                mg.Tensor.to(t, *[a for a in args if not _is_dtype(a)],
                             device=kwargs.get("device"))
            t.data = moved.data
            if t.grad is not None:
                t.grad = t.grad.to(t.device).to(t.dtype)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else f"cuda:{device}")

    def float(self):
        return self.to(mg.float32)

    def double(self):
        return self.to(mg.float64)

    def half(self):
        return self.to(mg.float16)

    # --- printing ----------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ")
                 for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))


def _array_of(value):
    """The array behind a state-dict value: a Tensor's own array, a NumPy or CuPy array as
    it is (on its device), anything else (a list, a number) through NumPy."""
    if isinstance(value, mg.Tensor):
        return value.data
    if _is_array(value):
        return value
    return np.asarray(value)


def _typename(obj):
    """``obj``'s type as PyTorch's error messages name it: ``int``, ``numpy.ndarray``."""
    kind = type(obj)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _is_dtype(a):
    if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda"):
        return False
    try:
        np.dtype(a)
        return not isinstance(a, mg.Tensor)
    except TypeError:
        return False


class _Handle:
    """Returned by ``register_forward_hook``; ``remove()`` unregisters the hook, as does
    leaving a ``with`` block: ``with m.register_forward_hook(h): ...``."""
    _next_id = 0

    def __init__(self, table, hook):
        self.table, self.id = table, _Handle._next_id
        _Handle._next_id += 1
        table[self.id] = hook

    def remove(self):
        self.table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()


def _position(container, idx):
    """The position ``idx`` (an integer, negative from the end) of an entry of ``container``;
    IndexError outside it, TypeError for a non-integer, as PyTorch's containers."""
    size = len(container)
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size


def _renumber(container):
    """Name the modules left in ``container`` "0", "1", ... in order again (after a del)."""
    modules = list(container._modules.values())
    container._modules.clear()
    container._modules.update((str(i), m) for i, m in enumerate(modules))


def _shift_in(container, index, module):
    """PyTorch's insert: move the modules named ``index``, ``index + 1``, ... one name up,
    then put ``module`` under ``str(index)``. A name it needs that is missing (a negative
    index, a container with other names) raises KeyError before anything moves."""
    moves = range(len(container._modules), index, -1)
    for i in moves:
        if str(i - 1) not in container._modules:
            raise KeyError(str(i - 1))
    for i in moves:
        container._modules[str(i)] = container._modules[str(i - 1)]
    container._modules[str(index)] = module


def _without_digit_names(names):
    return [name for name in names if not name.isdigit()]


class _Numbered(Module):
    """A container whose modules are named "0", "1", ...: its length, its modules in order,
    ``dir()`` without the numbers, ``append`` and ``pop`` (Sequential, ModuleList)."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __dir__(self):
        return _without_digit_names(super().__dir__())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key):
        module = self[key]
        del self[key]
        return module


class Sequential(_Numbered):
    """Modules called one after the other: ``Sequential(a, b, c)(x) == c(b(a(x)))``.

    Built from modules (named "0", "1", ...) or from one OrderedDict of named modules.
    Indexing, ``del``, ``pop``, ``insert``, ``+``, ``*`` and their in-place forms behave as
    PyTorch's; a ``del`` names the modules left "0", "1", ... again.
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def _key(self, idx):
        return next(islice(self._modules, _position(self, idx), None))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        keys = list(self._modules)[idx] if isinstance(idx, slice) else [self._key(idx)]
        for key in keys:
            delattr(self, key)
        _renumber(self)

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        combined = Sequential()
        for module in chain(self, other):
            combined.append(module)
        return combined

    def __iadd__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        offset = len(self)
        for i, module in enumerate(other):
            self.add_module(str(i + offset), module)
        return self

    def _check_factor(self, other):
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")

    def __mul__(self, other):
        self._check_factor(other)
        combined = Sequential()
        for i, module in enumerate(list(self) * other):
            combined.add_module(str(i), module)
        return combined

    def __rmul__(self, other):
        return self.__mul__(other)

    def __imul__(self, other):
        self._check_factor(other)
        n = len(self)
        for i in range(n, n * other):
            self.add_module(str(i), self._modules[str(i % n)])
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        _shift_in(self, index + n if index < 0 else index, module)
        return self

    def extend(self, sequential):
        for module in sequential:
            self.append(module)
        return self

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(_Numbered):
    """A list of modules, registered under the names "0", "1", ...

    Indexing, ``del`` (of an index or a slice), ``pop``, ``insert``, ``+`` and ``+=`` behave
    as PyTorch's; a ``del`` names the modules left "0", "1", ... again.
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self += modules

    def _key(self, idx):
        return str(_position(self, idx))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        setattr(self, self._key(idx), module)

    def __delitem__(self, idx):
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, self._key(idx))
        _renumber(self)

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        combined = ModuleList()
        for i, module in enumerate(chain(self, other)):
            combined.add_module(str(i), module)
        return combined

    def insert(self, index, module):
        """Insert ``module`` before position ``index`` (0 to len(self)); a module that is
        not an nn.Module (or None) raises TypeError, as ``append`` does."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        _shift_in(self, index, module)

    def extend(self, modules):
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got "
                            + type(modules).__name__)
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self

    def __repr__(self):
        """As PyTorch's: a run of modules with the same repr is one line, ``(0-2): 3 x ...``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []  # [first, last, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [(f"({first}): {r}" if first == last
                  else f"({first}-{last}): {last - first + 1} x {r}").replace("\n", "\n  ")
                 for first, last, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules, registered under their keys (in insertion order)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        module = self[key]
        del self[key]
        return module

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Add (or replace) the modules of a mapping, or of an iterable of (key, module)
        pairs, in their order."""
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value "
                            "pairs, but got " + type(modules).__name__)
        if isinstance(modules, (OrderedDict, ModuleDict, Mapping)):
            for key, module in modules.items():
                self[key] = module
            return
        for j, pair in enumerate(modules):
            if not isinstance(pair, Iterable):
                raise TypeError(f"ModuleDict update sequence element #{j} should be Iterable; "
                                f"is{type(pair).__name__}")
            if len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length "
                                 f"{len(pair)}; 2 is required")
            self[pair[0]] = pair[1]
