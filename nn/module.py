"""Module, Parameter and the containers (Sequential, ModuleList, ModuleDict), as PyTorch's.

A Module registers the Parameters, buffers and sub-Modules assigned to its attributes;
``named_parameters`` and ``state_dict`` name them by dotted attribute path
(``encoder.layers.0.self_attn.q_proj.weight``), so checkpoints line up with PyTorch's.
"""
from collections import OrderedDict, namedtuple

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
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {name!r} before Module.__init__() is called")
        params, buffers, modules = self._parameters, self._buffers, self._modules
        if isinstance(value, Parameter):
            if name not in params:  # a new name goes last; a known one keeps its place
                self._forget(name)
            params[name] = value
        elif isinstance(value, Module):
            if name not in modules:
                self._forget(name)
            modules[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter {name!r} "
                                "(nn.Parameter or None expected)")
            params[name] = None
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module "
                                f"{name!r} (nn.Module or None expected)")
            modules[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, mg.Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer {name!r}")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only called when normal lookup fails
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name):
        if not self._forget(name):
            object.__delattr__(self, name)

    def _forget(self, name):
        """Unregister ``name`` (parameter, buffer, submodule or plain attribute); True if
        it was there."""
        found = False
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                found = True
        self._non_persistent.discard(name)
        if name in self.__dict__:
            object.__delattr__(self, name)
            found = True
        return found

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be an nn.Parameter or None")
        if name not in self._parameters:
            self._forget(name)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor that is part of the module's state but not trained (moved by ``to``,
        saved in ``state_dict`` unless ``persistent=False``)."""
        if tensor is not None and not isinstance(tensor, mg.Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None")
        self._forget(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be an nn.Module or None")
        if name not in self._modules:  # a known name keeps its place
            self._forget(name)
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
        seen = set()
        modules = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mod_prefix, module in modules:
            for name, value in getattr(module, table).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
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

    def get_submodule(self, target):
        module = self
        for part in target.split(".") if target else []:
            if part not in module._modules:
                raise AttributeError(f"{type(module).__name__} has no submodule {part!r} "
                                     f"(looking up {target!r})")
            module = module._modules[part]
        return module

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

    def load_state_dict(self, state_dict, strict=True):
        """Copy ``state_dict``'s tensors into this module's parameters and buffers in place.

        Each is written as ``tensor.copy_(value)`` under no_grad, as PyTorch does: the
        Parameter objects stay the same, their versions go up, and a graph that saved one
        of them before the load refuses to backpropagate through the old values. Values
        may be Tensors or NumPy or CuPy arrays (moved to the tensor's device).

        Returns (missing_keys, unexpected_keys); with ``strict`` any of them, and always a
        shape mismatch, raises an error that names the key (and both shapes). Nothing is
        copied unless every key fits, so a failed load leaves the module unchanged.
        """
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
        with mg.no_grad():
            for key, value in values.items():
                own[key].copy_(backend.to_device(value, own[key].device))
        return IncompatibleKeys(missing, unexpected)

    # --- modes and moves --------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad = p.grad.detach().zero_() if p.grad.grad_fn is None else None

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


def _is_dtype(a):
    if isinstance(a, str) and a.split(":")[0] in ("cpu", "cuda"):
        return False
    try:
        np.dtype(a)
        return not isinstance(a, mg.Tensor)
    except TypeError:
        return False


class _Handle:
    """Returned by ``register_forward_hook``; ``remove()`` unregisters the hook."""
    _next_id = 0

    def __init__(self, table, hook):
        self.table, self.id = table, _Handle._next_id
        _Handle._next_id += 1
        table[self.id] = hook

    def remove(self):
        self.table.pop(self.id, None)


class _Listing:
    """The list side of Sequential and ModuleList: modules registered as "0", "1", ..."""

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._renumber(items)
        return self

    def _renumber(self, items):
        self._modules.clear()
        for m in items:
            self.append(m)


class Sequential(_Listing, Module):
    """Modules called one after the other: ``Sequential(a, b, c)(x) == c(b(a(x)))``."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[idx]


class ModuleList(_Listing, Module):
    """A list of modules, registered under the names "0", "1", ..."""

    def __init__(self, modules=None):
        super().__init__()
        for m in modules or []:
            self.append(m)

    def _key(self, idx):
        n = len(self)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for a ModuleList of length {n}")
        return str(idx % n)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[self._key(idx)]

    def __setitem__(self, idx, module):
        self.add_module(self._key(idx), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        del items[idx]
        self._renumber(items)


class ModuleDict(Module):
    """A dict of modules, registered under their keys."""

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

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def update(self, modules):
        for key, m in (modules.items() if hasattr(modules, "items") else modules):
            self[key] = m

    def pop(self, key):
        return self._modules.pop(key)
