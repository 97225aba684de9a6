"""Optimizer: the base class of every optimiser, with PyTorch's param groups and state dicts.

An optimiser holds ``param_groups`` (a list of dicts: ``"params"``, a list of Tensors, plus
the hyper-parameters of that group) and ``state`` (a dict from parameter to a dict of
per-parameter buffers, made lazily on the first step that parameter has a gradient).
``state_dict()`` replaces parameters by their position counted across all groups, exactly
as ``torch.optim.Optimizer`` does, so checkpoints have PyTorch's layout::

    {"state": {0: {"momentum_buffer": Tensor}, ...},
     "param_groups": [{"lr": 0.1, ..., "params": [0, 1]}, {"lr": 0.01, ..., "params": [2]}]}

minigrad's optimisers write ``step`` in two halves. The host half (the step counts, the
parameters' versions, and the per-step numbers: learning rate, bias corrections, in
double precision) is a function given to ``compile.recorder.per_step_numbers``; the array
half is a function of raw arrays called through ``autograd.function.on_arrays``, which
changes each parameter's ``.array`` in place as ``p.add_`` and ``p.mul_`` do under
``no_grad``, without the checks that an update made from the parameter's own gradient
cannot fail, and reads each number through ``backend.kernels.number_like`` (rounded to the
parameter's dtype, so a float32 parameter never meets a float64 operand). Outside
``mg.compile`` that is one eager step; under it, the array half is recorded into the
replayed program and the numbers come from the program's scalar buffer, written by the
host half before each replay. Each change bumps the parameter's version
(``count_writes``), so a graph saved before the step refuses to backpropagate through it.

PyTorch's implementation keywords (``foreach``, ``fused``, ``capturable``, and
``differentiable``) are accepted with PyTorch's defaults and kept in ``defaults`` and in
every param group, so that state dicts have PyTorch's keys; they choose how PyTorch
computes a step, not what it computes, and minigrad's step is the same arithmetic whatever
they say. The combinations PyTorch refuses raise the same exceptions
(``check_implementation`` at construction, ``Optimizer._check_step`` at the step). With
``differentiable=True`` PyTorch records its step for autograd, so it refuses to update a
parameter that requires grad (a leaf) in place, and so does minigrad; minigrad never
records a step, so the non-leaf parameters that PyTorch then accepts stay refused here.
"""
import copy
import functools
import math
import numbers
import warnings
from collections import defaultdict

from .. import backend
from ..autograd import enable_grad
from ..arguments import _is_array
from ..tensor import Tensor
from ..compile.recorder import replayed_as_call


def _noting_the_step(step):
    """``step`` that first notes, on the optimiser, that a step was taken."""
    @functools.wraps(step)
    def noting(self, *args, **kwargs):
        self._opt_called = True
        return step(self, *args, **kwargs)
    return noting


class _RequiredParameter:
    """The default of a hyper-parameter that every param group must give itself."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


class Optimizer:
    """Base class of all optimisers.

    Args:
        params: an iterable of Tensors, of ``(name, Tensor)`` pairs, or of dicts, each a
            param group with ``"params"`` and any hyper-parameters that differ from
            ``defaults``.
        defaults (dict): the hyper-parameters of a group that does not set them.
    """

    _opt_called = False  # set by the first step (a scheduler warns if it steps first)
    _loaded = 0  # how many times load_state_dict replaced the state (mg.compile checks it)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _noting_the_step(cls.__dict__["step"])

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got a {type(params).__name__}")
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def __repr__(self):
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {v}" for k, v in sorted(group.items()) if k != "params"]
        return "\n".join(lines) + "\n)"

    def add_param_group(self, param_group):
        """Add a group (a dict with ``"params"``) whose missing hyper-parameters take the
        defaults; a parameter may belong to one group only."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets changes between runs; use a list")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names and len(names) != len(params):
            raise ValueError("all optimizer params should be with/without names; "
                             "some param names are missing")
        param_group["params"] = params
        if names:
            param_group["param_names"] = names
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params "
                                f"is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len(params) != len(set(params)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters",
                          stacklevel=3)
        seen = set()
        for group in self.param_groups:
            seen.update(group["params"])
            if ("param_names" in group) != ("param_names" in param_group):
                raise ValueError("all optimizer param groups should be with/without names")
        if not seen.isdisjoint(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    @replayed_as_call  # mg.compile replays the whole call
    def zero_grad(self, set_to_none=True):
        """Set every parameter's ``.grad`` to None (the default), or to zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()  # the same Tensor, no longer recording
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def step(self, closure=None):
        """Update every parameter that has a gradient; returns ``closure()``'s loss if given."""
        raise NotImplementedError

    def _layout(self, i):
        """What the array work of a step recorded by mg.compile depends on besides a group's
        flags (see ``compile.recorder.per_step_numbers``): the number of param groups,
        group ``i``'s parameters, how many times ``load_state_dict`` replaced the state, and
        the tensors of its parameters' state (a moment replaced by hand, ``state[p]
        ["exp_avg"] = ...``, is another array for the update to read). A replay checks it
        is unchanged, and captures again if not. (The recorded program holds the tensors it
        saw, so their ids cannot be reused by others while it lives.)"""
        params = self.param_groups[i]["params"]
        state = self.state
        return (len(self.param_groups), tuple(map(id, params)), self._loaded,
                tuple(id(v) for p in params if p in state
                      for k, v in state[p].items() if k != "step" and isinstance(v, Tensor)))

    def _check_step(self, group):
        """PyTorch's refusals, at the step, of its implementation keywords: ``fused`` needs
        floating-point parameters (RuntimeError); ``differentiable`` (of the defaults, as
        PyTorch reads it) runs PyTorch's step with grad recording on, so that its in-place
        update of a leaf that requires grad raises RuntimeError. Checked before anything
        changes (PyTorch may have written some state by then)."""
        if not (group.get("fused") or group.get("capturable") or group.get("differentiable")
                or self.defaults.get("differentiable")):
            return  # the usual case: nothing to refuse
        params = [p for p in group["params"] if p.grad is not None]
        if group.get("fused"):
            for p in params:
                if not p.is_floating_point():
                    raise RuntimeError(
                        "`fused=True` requires all the params to be floating point Tensors of "
                        f"supported devices: {_FUSED_DEVICES} but {p.dtype} and "
                        f"{p.device.type}")
            return
        self._check_unfused_step(group, params)
        if self.defaults.get("differentiable") and any(p.requires_grad for p in params):
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")

    def _check_unfused_step(self, group, params):
        """Refusals of a subclass's step without ``fused`` (Adam's ``capturable``)."""

    @staticmethod
    def _closure_loss(closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # --- checkpoints ------------------------------------------------------------------------
    def state_dict(self):
        """The optimiser's state, parameters replaced by their index (PyTorch's layout).

        As in PyTorch, the state Tensors are the optimiser's own (not copies): save or
        ``copy.deepcopy`` the dict before stepping again if you need a snapshot.
        """
        index = {}
        param_groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            param_groups.append(packed)
        state = {index[id(p)] if isinstance(p, Tensor) else p: s for p, s in self.state.items()}
        return {"state": state, "param_groups": param_groups}

    def load_state_dict(self, state_dict):
        """Load a ``state_dict()``: groups and parameters are matched by position.

        The hyper-parameters of each group are replaced by the saved ones; state Tensors are
        copied onto each parameter's device and floating dtype; ``step`` becomes an int.
        The whole dict is checked first, as a model's ``load_state_dict`` checks its keys
        and shapes, and nothing changes unless it fits: ValueError, naming the group or the
        parameter and the key, when the number of groups or of parameters in a group
        differs, a group lacks a hyper-parameter or holds one of the wrong type, or a
        parameter's state lacks a key that this optimiser's step keeps (for the settings of
        its group), holds one it does not, or holds a Tensor of another shape, a dtype that
        is not floating point or a ``step`` that is not a whole number >= 0. The keywords
        that PyTorch's own loading fills in when a group lacks them (a dict saved by an
        older PyTorch: ``maximize``, ``foreach``, ...) take this optimiser's values.
        """
        if not isinstance(state_dict, dict):
            raise TypeError(f"optimizer state dict must be a dict, got "
                            f"{type(state_dict).__name__}")
        for key, kind in (("state", dict), ("param_groups", list)):
            if key not in state_dict:
                raise ValueError(f"optimizer state dict has no {key!r} entry")
            if not isinstance(state_dict[key], kind):
                raise ValueError(f"optimizer state dict's {key!r} is a "
                                 f"{type(state_dict[key]).__name__}, not a {kind.__name__}")
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError(f"loaded state dict has {len(saved_groups)} parameter groups, "
                             f"but the optimizer has {len(groups)}")
        params = {}  # saved index -> (parameter, group number)
        for i, (group, saved) in enumerate(zip(groups, saved_groups)):
            self._check_group(i, group, saved)
            for index, p in zip(saved["params"], group["params"]):
                if index in params:
                    raise ValueError(f"parameter group {i} of the loaded state dict names "
                                     f"parameter {index} again")
                params[index] = (p, i)
        for group, saved in zip(groups, saved_groups):
            for name in self._filled_on_load:
                if name in self.defaults and name not in saved:
                    saved[name] = group.get(name, self.defaults[name])
        state = defaultdict(dict)
        for index, saved_state in state_dict["state"].items():
            if index not in params:
                raise ValueError(f"loaded state dict has state for parameter {index}, which "
                                 "is in none of its parameter groups")
            p, i = params[index]
            where = f"parameter {index} (group {i})"
            if not isinstance(saved_state, dict):
                raise ValueError(f"the state of {where} is a {type(saved_state).__name__}, "
                                 "not a dict")
            self._check_state_keys(saved_state, saved_groups[i], where)
            state[p] = {key: _cast(value, p, key, where) for key, value in saved_state.items()}
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
            if "param_names" in group and "param_names" not in saved:
                saved["param_names"] = group["param_names"]
        self.state = state
        self._loaded += 1
        self.param_groups = saved_groups

    # the hyper-parameters that PyTorch's ``__setstate__`` fills in where a saved group lacks
    # them (they were added to PyTorch after its first checkpoints); every other one of
    # ``defaults`` must be in each saved group
    _filled_on_load = ("nesterov", "maximize", "foreach", "capturable", "differentiable",
                       "fused", "decoupled_weight_decay")
    # the state keys that may hold None (PyTorch's SGD saves a missing momentum buffer so)
    _may_be_none = ()

    def _state_keys(self, group):
        """The keys of a parameter's state once a step with ``group``'s settings has made
        it; None (any keys) for an optimiser that does not say."""
        return None

    def _check_group(self, i, group, saved):
        """Refuse saved param group ``i`` unless it is a dict with as many parameters as
        ``group`` and every hyper-parameter of ``defaults``, each of its default's kind."""
        where = f"parameter group {i} of the loaded state dict"
        if not isinstance(saved, dict) or not isinstance(saved.get("params"), list):
            raise ValueError(f"{where} is not a dict with a list of 'params'")
        if len(group["params"]) != len(saved["params"]):
            raise ValueError(f"{where} has {len(saved['params'])} parameters, but the "
                             f"optimizer's group {i} has {len(group['params'])}")
        for index in saved["params"]:
            if not _is_whole(index):
                raise ValueError(f"{where} names a parameter by {index!r}, not by its index")
        for name, default in self.defaults.items():
            if name not in saved:
                if name in self._filled_on_load:
                    continue
                raise ValueError(f"{where} has no {name!r}")
            problem = _kind_problem(default, saved[name])
            if problem:
                raise ValueError(f"{where} has {name!r} = {saved[name]!r}: {problem}")

    def _check_state_keys(self, state, group, where):
        """Refuse the saved ``state`` of one parameter unless it is empty (no step yet) or
        has exactly the keys this optimiser's step keeps for ``group``'s settings."""
        if not state:
            return
        for key in state:
            if not isinstance(key, str):
                raise ValueError(f"the state of {where} has a key {key!r} that is not a str")
        keys = self._state_keys(group)
        if keys is None:
            return
        own = f"{type(self).__name__}{_settings(group)} keeps "
        own += ", ".join(map(repr, keys)) if keys else "no state"
        for key in keys:
            if key not in state:
                raise ValueError(f"the state of {where} has no {key!r} ({own})")
        for key, value in state.items():
            if key in keys:
                if value is None and key not in self._may_be_none:
                    raise ValueError(f"state {key!r} of {where} is None")
            elif not (value is None and key in self._may_be_none):
                raise ValueError(f"the state of {where} has an unexpected {key!r} ({own})")


def _settings(group):
    """The settings of ``group`` that choose a step's state keys, as `` with amsgrad=True``."""
    shown = [f"{k}={group[k]!r}" for k in ("amsgrad", "momentum") if k in group]
    return f" with {', '.join(shown)}" if shown else ""


def _is_whole(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _kind_problem(default, value):
    """Why ``value`` cannot stand for a hyper-parameter whose default is ``default`` (None
    if it can): a flag is a bool, a number a real number (or a one-element Tensor, as an
    lr may be), a tuple one of as many numbers, and PyTorch's keywords whose default is
    None are None or a bool."""
    if isinstance(default, bool) or default is None:
        ok = isinstance(value, bool) or (default is None and value is None)
        return None if ok else ("expected True or False" if default is not None
                                else "expected None, True or False")
    if isinstance(default, tuple):
        if not isinstance(value, (list, tuple)) or len(value) != len(default):
            return f"expected {len(default)} numbers"
        return next((_kind_problem(d, v) for d, v in zip(default, value)
                     if _kind_problem(d, v)), None)
    if isinstance(value, Tensor):
        return None if value.numel() == 1 else "expected a number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "expected a number"
    return None


def _cast(value, param, key, where):
    """A copy of one saved state value for ``param``: ``step`` as an int, Tensors on its
    device and dtype; ValueError naming ``where`` and ``key`` for a value that cannot be."""
    if key == "step":
        return _step_count(value, where)
    if value is None:
        return None
    if _is_array(value):  # a checkpoint format that stores arrays (host or device)
        value = Tensor(value)
    if not isinstance(value, Tensor):
        raise ValueError(f"state {key!r} of {where} is a {type(value).__name__}, not a Tensor")
    if value.shape != param.shape:
        raise ValueError(f"state {key!r} of {where} has shape {tuple(value.shape)}, but the "
                         f"parameter has shape {tuple(param.shape)}")
    if not (value.is_floating_point() or value.array.dtype.kind == param.array.dtype.kind == "c"):
        raise ValueError(f"state {key!r} of {where} has dtype {value.dtype}, not a floating "
                         "point one")
    arr = backend.to_device(value.array, param.device)
    dtype = param.dtype if param.is_floating_point() else arr.dtype
    return Tensor(arr.astype(dtype, copy=True))


def _step_count(value, where):
    """A saved step count as an int: a whole number >= 0, given as a number or as a
    one-element Tensor (PyTorch keeps a float32 one)."""
    shown = value
    if _is_array(value):
        value = Tensor(value)
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError(f"state 'step' of {where} is a Tensor of shape "
                             f"{tuple(value.shape)}, not a single number")
        value = shown = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not math.isfinite(value) or value < 0 or value != int(value):
        raise ValueError(f"state 'step' of {where} is {shown!r}, not a whole number >= 0")
    return int(value)


_FUSED_DEVICES = ["mps", "cuda", "xpu", "hpu", "cpu", "mtia", "privateuseone"]


def check_implementation(defaults):
    """PyTorch's refusals, at construction, of its implementation keywords together:
    ``fused`` with ``differentiable`` or with ``foreach``, RuntimeError."""
    if defaults.get("fused"):
        if defaults.get("differentiable"):
            raise RuntimeError("`fused` does not support `differentiable`")
        if defaults.get("foreach"):
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")


# --- the in-place changes of a step ----------------------------------------------------------
# An update computed from a parameter's gradient has the parameter's shape, dtype and device,
# so of p.add_'s checks only the refusal of a write into an expanded view is left
# (``_check_writable``, before the step changes anything); the arithmetic is the same ufunc
# into p's memory, the same bits, written by the step's array work on ``p.array``.

def count_writes(params, n):
    """One more version of each parameter of ``params`` (shared with its views) per in-place
    change of the step, ``n`` of them, as ``p.add_`` and ``p.mul_`` count: done by the host
    half of the step (``per_step_numbers``' fill), since the array work that writes the
    parameters is replayed without the host."""
    for p in params:
        p._shared_counter()[0] += n


CAPTURABLE_DEVICES = ["cuda", "xpu", "hpu", "privateuseone", "xla"]  # (as PyTorch names them)


def check_foreach_and_capturable(group, params, tensors="params and state_steps"):
    """PyTorch's refusals of an unfused step, as its optimisers word them: ``foreach`` with
    ``differentiable``, and ``capturable`` with parameters on the CPU (``tensors``: what its
    message says must be on a supported device)."""
    if group["foreach"] and group["differentiable"] and params:
        raise AssertionError("_foreach ops don't support autograd")
    if group.get("capturable") and any(p.device.type == "cpu" for p in params):
        raise AssertionError(f"If capturable=True, {tensors} must be on supported devices: "
                             f"{CAPTURABLE_DEVICES}.")


def state_zeros(p):
    """A state tensor of zeros with parameter ``p``'s shape, dtype and device."""
    return Tensor(backend.xp_of(p.array).zeros_like(p.array))
