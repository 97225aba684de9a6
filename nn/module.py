"""Module, the base class of every layer and model, with its hooks, as PyTorch's.

A Module registers the Parameters (``parameter.py``), buffers and sub-Modules assigned to
its attributes; ``named_parameters`` and ``state_dict`` name them by dotted attribute path
(``encoder.layers.0.self_attn.q_proj.weight``), so checkpoints line up with PyTorch's. The
containers (Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict) are in
``container.py``.
"""
import os
import sys
import warnings
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

import minigrad as mg
from minigrad import backend
from minigrad.autograd.graph import RemovableHandle
from minigrad.autograd import function as _function
from minigrad.autograd.grad_mode import STATE
from minigrad.arguments import _is_array

from .parameter import Buffer, Parameter


class IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict(strict=False)`` could not match; reads as PyTorch's does."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys!r}, "
                f"unexpected_keys={self.unexpected_keys!r})")

    __str__ = __repr__



class Module:
    """Base class of every layer and model: subclass it, assign submodules and Parameters in
    ``__init__``, and write ``forward``; call the module to run it (with its hooks)."""

    training = True
    dump_patches = False
    call_super_init = False

    def __init__(self):
        for name, value in (("_parameters", OrderedDict()), ("_buffers", OrderedDict()),
                            ("_non_persistent", set()), ("_modules", OrderedDict()),
                            ("training", True)):
            object.__setattr__(self, name, value)
        self._init_hooks()

    def _init_hooks(self, only_missing=False):
        """The tables of hooks, empty (with ``only_missing``, only those not there yet)."""
        d = self.__dict__
        for name in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
                     "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
                     "_backward_hooks", "_backward_pre_hooks"):
            if not (only_missing and name in d):
                d[name] = OrderedDict()
        if not (only_missing and "_is_full_backward_hook" in d):
            d["_is_full_backward_hook"] = None

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_hooks(only_missing=True)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks or self._backward_hooks \
                or self._backward_pre_hooks:
            return self._call_with_hooks(args, kwargs)
        state = STATE
        outer, state.scope = state.scope, self  # ops recorded now belong to this module
        try:
            return self.forward(*args, **kwargs)
        finally:
            state.scope = outer

    def _call_with_hooks(self, args, kwargs):
        """``__call__`` of a module with hooks, as PyTorch's: forward pre-hooks, the backward
        hooks' identity nodes around the Tensor inputs, forward, forward hooks, the identity
        nodes around the Tensor outputs; ``always_call`` hooks run even when it raises."""
        if _function.capture is not None:  # hooks are Python run at each call: no replay
            _function.capture.unsupported(f"a call of a {type(self).__name__} with hooks")
        result = None
        called = set()  # the always_call hooks that ran
        try:
            full_hooks, old_hooks = [], []
            pre_hooks = list(self._backward_pre_hooks.values())
            if self._backward_hooks:
                if self._is_full_backward_hook:
                    full_hooks = list(self._backward_hooks.values())
                else:
                    old_hooks = list(self._backward_hooks.values())
            with_kwargs = self._forward_pre_hooks_with_kwargs
            for hook_id, hook in list(self._forward_pre_hooks.items()):
                if hook_id in with_kwargs:
                    new = hook(self, args, kwargs)
                    if new is not None:
                        if not (isinstance(new, tuple) and len(new) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple "
                                               f"of (new_args, new_kwargs), but got {new}.")
                        args, kwargs = new
                else:
                    new = hook(self, args)
                    if new is not None:
                        args = new if isinstance(new, tuple) else (new,)
            backward_hook = None
            if full_hooks or pre_hooks:
                backward_hook = _BackwardHook(self, full_hooks, pre_hooks)
                args = backward_hook.setup_input_hook(args)
            state = STATE
            outer, state.scope = state.scope, self
            try:
                result = self.forward(*args, **kwargs)
            finally:
                state.scope = outer
            always, with_kwargs = self._forward_hooks_always_called, self._forward_hooks_with_kwargs
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in always:
                    called.add(hook_id)
                if hook_id in with_kwargs:
                    new = hook(self, args, kwargs, result)
                else:
                    new = hook(self, args, result)
                if new is not None:
                    result = new
            if backward_hook is not None:
                if not isinstance(result, (mg.Tensor, tuple)):
                    _warn_at_user("For backward hooks to be called, module output should be a "
                                  f"Tensor or a tuple of Tensors but received {type(result)}")
                result = backward_hook.setup_output_hook(result)
            if old_hooks:
                self._set_old_backward_hooks(old_hooks, args, result)
            return result
        except Exception:
            always, with_kwargs = self._forward_hooks_always_called, self._forward_hooks_with_kwargs
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id not in always or hook_id in called:
                    continue
                try:
                    if hook_id in with_kwargs:
                        new = hook(self, args, kwargs, result)
                    else:
                        new = hook(self, args, result)
                    if new is not None:
                        result = new
                except Exception as e:
                    _warn_at_user("module forward hook with ``always_call=True`` raised an "
                                  "exception that was silenced as another error was raised in "
                                  f"forward: {e}")
            raise

    def _set_old_backward_hooks(self, hooks, args, result):
        """``register_backward_hook``'s hooks: on the node that made the (first) output, with
        its gradients, and PyTorch's warnings where those are not the module's."""
        var = result
        while not isinstance(var, mg.Tensor):
            if isinstance(var, dict):
                var = next(v for v in var.values() if isinstance(v, mg.Tensor))
            else:
                var = var[0]
        grad_fn = var.grad_fn
        if grad_fn is None:
            return
        for hook in hooks:
            grad_fn.register_hook(_with_module(hook, self))
        _warn_old_backward_hook(args, result, grad_fn)

    # --- registration -----------------------------------------------------------------------
    def __setattr__(self, name, value):
        """As PyTorch's: a Parameter, Module or ``nn.Buffer`` value registers (replacing a
        parameter, buffer, submodule or plain attribute of that name), a Tensor or None
        assigned to a registered name replaces it there, anything else is a plain attribute
        (also before ``__init__``)."""
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
            elif isinstance(value, Buffer):
                if d.get("_buffers") is None:
                    raise AttributeError("cannot assign buffer before Module.__init__() call")
                self._remove_from(name, d, self._parameters, self._modules)
                self.register_buffer(name, value, persistent=value.persistent)
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

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` runs before forward; a non-None return replaces args (a
        value that is not a tuple is made one). With ``with_kwargs``: ``hook(module, args,
        kwargs)``, which may return a new ``(args, kwargs)``. ``prepend`` runs it before the
        hooks already registered. Returns a handle with ``remove()``."""
        handle = RemovableHandle(self._forward_pre_hooks,
                                 extra_dict=self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """``hook(module, args, output)`` runs after forward; a non-None return replaces the
        output. With ``with_kwargs``: ``hook(module, args, kwargs, output)``; with
        ``always_call`` it also runs when the call raises; ``prepend`` runs it before the
        hooks already registered. Returns a handle with ``remove()``."""
        handle = RemovableHandle(self._forward_hooks, extra_dict=[
            self._forward_hooks_with_kwargs, self._forward_hooks_always_called])
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` runs when the gradients of the module's outputs are
        in: a tuple with one entry per positional output (None for one that is no Tensor or
        got no gradient). A tuple it returns replaces ``grad_output``. As in PyTorch, forward
        then gets (and the caller receives) new Tensors for the Tensors passed in (and out)."""
        handle = RemovableHandle(self._backward_pre_hooks)
        self._backward_pre_hooks[handle.id] = hook
        if prepend:
            self._backward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` runs when the gradients of the module's
        positional Tensor inputs are computed (None for an argument that is no Tensor); a
        tuple it returns replaces ``grad_input``. When no input requires grad it runs with
        the outputs' gradients (``grad_input`` all None, and it must return None); when no
        output requires grad it does not run. Forward must not change its inputs in place
        (PyTorch refuses it; here the change is not caught)."""
        if self._is_full_backward_hook is False:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        self._is_full_backward_hook = True
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        if prepend:
            self._backward_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_backward_hook(self, hook):
        """Deprecated, as in PyTorch (use ``register_full_backward_hook``): ``hook(module,
        grad_input, grad_output)`` with the gradients of the node that made the output,
        which are the module's only when its forward is a single op."""
        if self._is_full_backward_hook is True:
            raise RuntimeError("Cannot use both regular backward hooks and full backward hooks "
                               "on a single Module. Please use only one of them.")
        self._is_full_backward_hook = False
        handle = RemovableHandle(self._backward_hooks)
        self._backward_hooks[handle.id] = hook
        return handle

    # --- traversal ---------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) of this module and every submodule, depth first; a module
        in ``memo`` (a set of modules, filled as it goes with ``remove_duplicate``) and
        everything under it is left out, so a shared module is named once."""
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                sub = f"{prefix}.{name}" if prefix else name
                yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self, remove_duplicate=True):
        for _, m in self.named_modules(remove_duplicate=remove_duplicate):
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

    def set_submodule(self, target, module, strict=False):
        """Put ``module`` at the dotted path ``target``: it replaces the module there, or
        (unless ``strict``) becomes a new child of the module the path leads to."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and not hasattr(parent, name):
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if hasattr(parent, name) and not isinstance(getattr(parent, name), Module):
            raise AttributeError(f"`{name}` is not an nn.Module")
        setattr(parent, name, module)

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
        """Parameters and persistent buffers by dotted name (detached unless keep_vars), and
        each module's extra state (``get_extra_state``) under ``<prefix>_extra_state``:
        each module's own entries (``_save_to_state_dict``), then its children's, under
        ``prefix`` plus their names. Every path to a shared module is named, as in PyTorch
        (``named_parameters`` dedupes)."""
        out = OrderedDict() if destination is None else destination
        self._save_to_state_dict(out, prefix, keep_vars)
        for name, child in self._modules.items():
            if child is not None:
                child.state_dict(destination=out, prefix=f"{prefix}{name}.", keep_vars=keep_vars)
        return out

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        """This module's own entries of the state dict (not its children's), as PyTorch's: a
        module may override it (and ``_load_from_state_dict``) to save more or otherwise."""
        for name, value in self._entries():
            destination[prefix + name] = value if keep_vars else value.detach()
        if _has_extra_state(self):
            destination[prefix + _EXTRA_STATE] = self.get_extra_state()

    def _entries(self):
        """(name, tensor) of this module's own parameters and persistent buffers (not
        None), in the order of the state dict."""
        for table in ("_parameters", "_buffers"):
            for name, value in getattr(self, table).items():
                if value is not None and not (table == "_buffers" and name in self._non_persistent):
                    yield name, value

    def get_extra_state(self):
        """What else a module keeps in its state dict (any value, under ``_extra_state``):
        override it with ``set_extra_state``, as in PyTorch."""
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never "
                           "be called: override get_extra_state (and set_extra_state)")

    def set_extra_state(self, state):
        """Take back what ``get_extra_state`` gave (called by ``load_state_dict``)."""
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never "
                           "be called: override set_extra_state (and get_extra_state)")

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

        Each module reads its own keys (``_load_from_state_dict``, which a module may
        override, as in PyTorch), then its children theirs. Returns (missing_keys,
        unexpected_keys); with ``strict`` any of them, and always a shape mismatch, raises
        an error that names the key (and both shapes). Nothing is copied (and no extra
        state set) unless every key fits, so a failed load leaves the module unchanged.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        state_dict = OrderedDict(state_dict)  # (a module's override may change its copy)
        missing, unexpected, errors = [], [], []
        _LOADING.append([])  # the writes, made once every module has read its keys

        def load(module, prefix, local):
            module._load_from_state_dict(local, prefix, {}, True, missing, unexpected, errors)
            for name, child in module._modules.items():
                if child is not None:
                    inner = f"{prefix}{name}."
                    load(child, inner, {k: v for k, v in local.items() if k.startswith(inner)})
        try:
            load(self, "", state_dict)
            writes = _LOADING[-1]
        finally:
            _LOADING.pop()
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ".")
        if errors:  # (PyTorch's phrases, on one line)
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                               + " ".join(errors))
        with mg.no_grad():
            for write in writes:
                write(assign)
        return IncompatibleKeys(missing, unexpected)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Read this module's own keys from ``state_dict`` (those under ``prefix``), as
        PyTorch's: a key it has not is noted in ``missing_keys``, a key under ``prefix`` that
        is none of its entries nor under a child's name in ``unexpected_keys`` (with
        ``strict``), a shape that does not fit in ``error_msgs``; the writes wait until
        every module has read its keys (``load_state_dict``)."""
        own = {prefix + name: value for name, value in self._entries()}
        extra = prefix + _EXTRA_STATE
        if _has_extra_state(self):
            own[extra] = None
        for key, target in own.items():
            if key not in state_dict:
                missing_keys.append(key)
            elif key == extra:
                _LOADING[-1].append(lambda assign, value=state_dict[key]:
                                    self.set_extra_state(value))
            else:
                value = _array_of(state_dict[key])
                if tuple(value.shape) == (1,) and target.shape == ():  # (a number saved as
                    value = value.reshape(())                           # (1,), as PyTorch)
                if tuple(value.shape) != target.shape:
                    error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                      f"{tuple(value.shape)} from checkpoint, the shape in "
                                      f"current model is {target.shape}.")
                    continue
                _LOADING[-1].append(self._writer(key[len(prefix):], target, state_dict[key],
                                                 value))
        if strict:
            for key in state_dict:
                if key.startswith(prefix) and key not in own:
                    name = key[len(prefix):].split(".", 1)[0]
                    if name not in self._modules and prefix + name not in own:
                        unexpected_keys.append(key)

    def _writer(self, name, target, given, value):
        """The write of a checked state-dict ``value`` into entry ``name`` (``target``):
        ``write(assign)`` copies it in place, or with ``assign`` makes the module hold the
        state dict's value itself (``given``; an array becomes a Tensor sharing it), a
        Parameter where the module holds one, keeping its ``requires_grad``."""
        def write(assign):
            if not assign:
                target.copy_(backend.to_device(value, target.device))
                return
            held = given if isinstance(given, mg.Tensor) else mg.Tensor(value)
            if name in self._parameters:
                if isinstance(held, Parameter):
                    held.requires_grad_(target.requires_grad)
                else:
                    held = Parameter(held, requires_grad=target.requires_grad)
                self._parameters[name] = held
            else:
                self._buffers[name] = held
        return write

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
        same, so an optimiser built before keeps working. Only floating tensors are cast, to
        a floating dtype (another is a TypeError, as PyTorch's)."""
        for dtype in [a for a in args if _is_dtype(a)] + [kwargs.get("dtype")]:
            if dtype is not None and mg.dtypes.as_dtype(dtype).kind not in "fc":
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, "
                                f"but got desired dtype={mg.dtypes.as_dtype(dtype)}")
        for t in list(self.parameters()) + list(self.buffers()):
            moved = mg.Tensor.to(t, *args, **kwargs) if t.is_floating_point() else \
                mg.Tensor.to(t, *[a for a in args if not _is_dtype(a)],
                             device=kwargs.get("device"))
            t.array = moved.array
            if t.grad is not None:
                t.grad = t.grad.to(t.device).to(t.dtype)
        return self

    def to_empty(self, *, device, recurse=True):
        """Give every parameter and buffer (of this module only, without ``recurse``) new,
        uninitialised memory on ``device``, keeping shapes and dtypes (PyTorch's
        ``to_empty``, for a model to be filled by ``load_state_dict`` afterwards)."""
        for t in list(self.parameters(recurse)) + list(self.buffers(recurse)):
            t.array = mg.empty(t.shape, dtype=t.dtype, device=device).array
        return self

    def type(self, dst_type):
        """Cast every parameter and buffer (floating or not) to ``dst_type``, in place."""
        for t in list(self.parameters()) + list(self.buffers()):
            t.array = mg.Tensor.type(t, dst_type).array
            if t.grad is not None:
                t.grad = mg.Tensor.type(t.grad, dst_type)
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
        """As PyTorch's: ``Name(extra)`` when ``extra_repr`` is one line and there are no
        children, else its lines, then ``(name): child`` per child, one a line."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + repr(m).replace("\n", "\n  ")
                       for name, m in self._modules.items()]
        lines = extra_lines + child_lines
        head = self._get_name() + "("
        if len(extra_lines) == 1 and not child_lines:
            return head + extra_lines[0] + ")"
        if lines:
            return head + "\n  " + "\n  ".join(lines) + "\n)"
        return head + ")"

    def __dir__(self):
        """Attributes, parameters, buffers and submodules, without names that are no Python
        identifiers (a container's "0", "1", ...), as PyTorch's."""
        keys = set(super().__dir__()) | set(self._parameters) | set(self._buffers) \
            | set(self._modules)
        return sorted(key for key in keys if not key[0].isdigit())


_EXTRA_STATE = "_extra_state"  # a module's key for what get_extra_state gives
_LOADING = []  # per load_state_dict in progress: the writes its modules' reads checked


def _has_extra_state(module):
    """Whether ``module``'s class defines ``get_extra_state`` (Module's own raises)."""
    return type(module).get_extra_state is not Module.get_extra_state


def _array_of(value):
    """The array behind a state-dict value: a Tensor's own array, a NumPy or CuPy array as
    it is (on its device), anything else (a list, a number) through NumPy."""
    if isinstance(value, mg.Tensor):
        return value.array
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


class _BackwardHookFunction(mg.autograd.Function):
    """The identity, whose backward runs a module's full backward hooks (PyTorch's
    ``BackwardHookFunction``); its nodes are named ``BackwardHookFunctionBackward``."""
    node_name = "BackwardHookFunctionBackward"

    @staticmethod
    def forward(ctx, *tensors, hooks, outputs):
        ctx.hooks = hooks
        if outputs:  # the pre-hooks see None for an output that got no gradient
            ctx.set_materialize_grads(False)
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        hooks = ctx.hooks
        return hooks.at_outputs(grads) if ctx.params["outputs"] else hooks.at_inputs(grads)


class _BackwardHook:
    """One call's full backward hooks (PyTorch's ``torch.utils.hooks.BackwardHook``): an
    identity node on the Tensors passed in that require grad, one on those returned; the
    latter sees the outputs' gradients (and runs the pre-hooks), the former the inputs'
    (and runs the hooks with both)."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = -1
        self.input_tensors_index = self.output_tensors_index = None
        self.wrapped_inputs = self.wrapped_outputs = ()
        self.zero_inputs = ()  # (position, shape, dtype, device) of inputs needing no grad

    def _apply_on_tensors(self, args, outputs):
        """``args`` with each Tensor that requires grad replaced by the identity node's
        output, and the positions of its Tensors (None when nothing is recorded)."""
        tensors_idx = [i for i, a in enumerate(args) if isinstance(a, mg.Tensor)]
        wrapped = [i for i in tensors_idx if args[i].requires_grad]
        if not wrapped or not STATE.grad_enabled:
            return args, None, ()
        new = _BackwardHookFunction.apply(*[args[i] for i in wrapped], hooks=self,
                                          outputs=outputs)
        arg_list = list(args)
        for i, t in zip(wrapped, new):
            arg_list[i] = t
        out = tuple(arg_list) if type(args) is tuple else type(args)(*arg_list)
        return out, tensors_idx, tuple(wrapped)

    def setup_input_hook(self, args):
        res, self.input_tensors_index, self.wrapped_inputs = self._apply_on_tensors(args, False)
        self.n_inputs = len(args)
        if self.input_tensors_index is not None:
            self.zero_inputs = tuple((i, args[i].shape, args[i].dtype, args[i].device)
                                     for i in self.input_tensors_index
                                     if i not in self.wrapped_inputs)
        return res

    def setup_output_hook(self, result):
        is_tuple = isinstance(result, tuple)
        args = result if is_tuple else (result,)
        res, self.output_tensors_index, self.wrapped_outputs = \
            self._apply_on_tensors(args, True)
        self.n_outputs = len(args)
        return res if is_tuple else res[0]

    def at_outputs(self, grads):
        """The gradients of the outputs are in: run the pre-hooks (and, when no input
        requires grad, the hooks); pass the gradients on."""
        grad_outputs = [None] * self.n_outputs
        for i, g in zip(self.wrapped_outputs, grads):
            grad_outputs[i] = g
        self.grad_outputs = tuple(grad_outputs)
        expected = len(self.grad_outputs)
        for hook in self.pre_hooks:
            new = hook(self.module, self.grad_outputs)
            if new is None:
                continue
            if len(new) != expected:
                raise RuntimeError("Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(new)}, but expected {expected}")
            self.grad_outputs = new
        grad_outputs = self.grad_outputs
        if self.input_tensors_index is None:
            _warn_at_user("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients. See "
                          "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                          "#torch.nn.Module.register_full_backward_hook for more details.")
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_inputs, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple)
                                            and all(g is None for g in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
            self.grad_outputs = None
        return tuple(grad_outputs[i] for i in self.wrapped_outputs)

    def at_inputs(self, grads):
        """The gradients of the inputs are computed: run the hooks on them (zeros for a
        Tensor input that needs none, as PyTorch's) and pass on what they return."""
        if self.grad_outputs is None:  # reached without passing through the outputs
            return grads
        res = [None] * self.n_inputs
        for i, g in zip(self.wrapped_inputs, grads):
            res[i] = g
        for i, shape, dtype, device in self.zero_inputs:
            res[i] = mg.zeros(shape, dtype=dtype, device=device)
        res = tuple(res)
        for hook in self.hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            if len(out) != len(res):
                raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                   f"got {len(out)}, but expected {len(res)}")
            res = out
        self.grad_outputs = None
        return tuple(res[i] for i in self.wrapped_inputs)


def _with_module(hook, module):
    """``hook(module, grad_input, grad_output)`` as a hook of a graph node."""
    def node_hook(grad_input, grad_output):
        return hook(module, grad_input, grad_output)
    node_hook.__name__ = getattr(hook, "__name__", type(hook).__name__)
    return node_hook


def _warn_old_backward_hook(inputs, result, grad_fn):
    """PyTorch's warnings for ``register_backward_hook`` when the node's gradients are not
    (all) the module's."""
    def warn(message):
        _warn_at_user(message, FutureWarning)

    if not isinstance(result, mg.Tensor):
        if not (isinstance(result, tuple) and all(isinstance(r, mg.Tensor) for r in result)):
            return warn("Using non-full backward hooks on a Module that does not return a "
                        "single Tensor or a tuple of Tensors is deprecated and will be removed "
                        "in future versions. This hook will be missing some of the grad_output. "
                        "Please use register_full_backward_hook to get the documented behavior.")
    else:
        result = (result,)
    if not isinstance(inputs, mg.Tensor):
        if not (isinstance(inputs, tuple) and all(isinstance(i, mg.Tensor) for i in inputs)):
            return warn("Using non-full backward hooks on a Module that does not take as input a "
                        "single Tensor or a tuple of Tensors is deprecated and will be removed "
                        "in future versions. This hook will be missing some of the grad_input. "
                        "Please use register_full_backward_hook to get the documented behavior.")
    else:
        inputs = (inputs,)
    out_grad_fn = {r.grad_fn for r in result if r.grad_fn is not None}
    if not out_grad_fn or (len(out_grad_fn) == 1 and grad_fn not in out_grad_fn):
        warn("Using a non-full backward hook when outputs are nested in python data structure "
             "is deprecated and will be removed in future versions. This hook will be missing "
             "some grad_output.")
    elif len(out_grad_fn) > 1:
        warn("Using a non-full backward hook when outputs are generated by different autograd "
             "Nodes is deprecated and will be removed in future versions. This hook will be "
             "missing some grad_output. Please use register_full_backward_hook to get the "
             "documented behavior.")
    else:
        inputs_grad_fn = {i.grad_fn for i in inputs if i.grad_fn is not None}
        next_functions = {n[0] for n in grad_fn.next_functions}
        if inputs_grad_fn != next_functions:
            warn("Using a non-full backward hook when the forward contains multiple autograd "
                 "Nodes is deprecated and will be removed in future versions. This hook will be "
                 "missing some grad_input. Please use register_full_backward_hook to get the "
                 "documented behavior.")


_Handle = RemovableHandle
_OUR_FILES = (os.path.dirname(os.path.abspath(mg.__file__)) + os.sep,
              os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _warn_at_user(message, category=UserWarning):
    """``warnings.warn`` naming the first line outside minigrad (the user's call)."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_OUR_FILES):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)

