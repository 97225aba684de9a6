"""Learning-rate schedulers, as ``torch.optim.lr_scheduler``: call ``step()`` once after
each ``optimizer.step()`` (``ReduceLROnPlateau.step(metric)`` once per evaluation).

A scheduler writes ``group["lr"]`` of every param group of its optimiser. At construction
it records ``group["initial_lr"]`` (the base lr), sets ``last_epoch = 0`` and already
writes the lr for the first update; each ``step()`` adds one to ``last_epoch`` and writes
the lr for the next update. ``get_last_lr()`` is the list of lrs it wrote last.

Most schedulers compute the new lr from the lr the group holds now (PyTorch's chainable
form: ``lr_t = lr_{t-1} * factor_t``), so that two schedulers of one optimiser compose,
and give the same floats as PyTorch's, operation for operation. Each docstring gives the
closed form of the schedule; ``step(epoch)`` (deprecated, as in PyTorch) jumps to
``epoch`` and uses the closed form where the scheduler has one, which may differ from the
chainable lr in the last bits.

Resuming: build the optimiser and the scheduler, then load both state dicts; or pass
``last_epoch=k`` to a scheduler whose param groups already hold ``"initial_lr"``.
"""
import functools
import math
import numbers
import types
import warnings
from bisect import bisect_right
from collections import Counter

from .optimizer import Optimizer
from ..tensor import Tensor
from ..compile.recorder import replayed_as_call

_EPOCH_DEPRECATED = ("passing an epoch to step() is deprecated (as in PyTorch): the closed form "
                     "is used instead of the chainable one, where the scheduler has one; call "
                     "step() without arguments instead")


def _copy(value):
    """``value``, or a copy of it when it is a Tensor (so that no two lrs alias)."""
    return value.clone() if isinstance(value, Tensor) else value


def _format_param(name, optimizer, param):
    """One value of ``param`` per param group: a list or tuple must have one per group."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(param)} values, param_groups has "
                             f"{len(optimizer.param_groups)}.")
    else:
        param = [param] * len(optimizer.param_groups)
    return [_copy(p) for p in param]


def _group_values(optimizer, key):
    """``group[key]`` of every param group (copies of Tensors); KeyError where one lacks it."""
    return [_copy(group[key]) for group in optimizer.param_groups]


def _set_group_value(group, key, value):
    """``group[key] = value``, or, where the group holds a Tensor, that Tensor filled with it."""
    if isinstance(group[key], Tensor):
        group[key].fill_(float(value))
    else:
        group[key] = value


def _warn_get_lr_called_within_step(scheduler):
    if not scheduler._get_lr_called_within_step:
        warnings.warn("To get the last learning rate computed by the scheduler, please use "
                      "`get_last_lr()`.", UserWarning, stacklevel=3)


def _check_chainable(kind, schedulers, optimizer):
    """The checks of SequentialLR and ChainedScheduler on the schedulers they drive."""
    for index, scheduler in enumerate(schedulers):
        if not hasattr(scheduler, "optimizer"):
            raise TypeError(f"{kind} at index {index} should have `optimizer` as its attribute.")
        if isinstance(scheduler, ReduceLROnPlateau):
            raise ValueError(f"{kind} does not support `ReduceLROnPlateau` scheduler as it "
                             "requires additional kwargs to be specified when calling `step`, "
                             f"but got one at index {index} in the given schedulers sequence.")
        if optimizer != scheduler.optimizer:
            raise ValueError(f"{kind} expects all schedulers to belong to the same optimizer, "
                             f"but got scheduler {type(scheduler).__name__} at index {index} "
                             f"with another optimizer (a {type(scheduler.optimizer).__name__}) "
                             f"than the {type(optimizer).__name__} given.")


class LRScheduler:
    """Base class of the schedulers: subclasses write ``get_lr()``, the lr of each group at
    ``self.last_epoch`` (and may write ``_get_closed_form_lr()``, used by ``step(epoch)``).

    Args:
        optimizer (Optimizer): the optimiser whose learning rates are set.
        last_epoch (int): the index of the last step taken, to resume a schedule (the
            groups must then hold ``initial_lr``). Default: -1, a new schedule.
    """

    _get_lr_called_within_step = False
    _is_initial = False  # True during the step made at construction

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming a scheduler with last_epoch >= 0")
        self.base_lrs = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        """The step made at construction: with ``_is_initial`` set, the chainable schedulers
        keep the lr the groups hold (so that a resumed schedule does not advance twice)."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        """The lr of each group at ``last_epoch`` (use ``get_last_lr()`` to read it)."""
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates this scheduler wrote last, one per param group."""
        return self._last_lr

    @replayed_as_call  # mg.compile replays the whole call
    def step(self, epoch=None):
        """Advance the schedule by one step (``epoch`` jumps to that step, deprecated in
        PyTorch: it uses the closed form where the scheduler has one)."""
        if self._step_count == 1 and not self.optimizer._opt_called:
            warnings.warn("Detected call of `lr_scheduler.step()` before `optimizer.step()`: "
                          "call `optimizer.step()` first, or the first value of the learning "
                          "rate schedule is skipped", UserWarning, stacklevel=3)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATED, UserWarning, stacklevel=3)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        self._get_lr_called_within_step = True
        try:
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                if hasattr(self, "_get_closed_form_lr"):
                    values = self._get_closed_form_lr()
                else:
                    values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")

    def state_dict(self):
        """Every attribute but the optimiser."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        """Load a ``state_dict()``, checked first (``_check_state_dict``): nothing changes
        unless it fits."""
        self._check_state_dict(state_dict)
        self.__dict__.update(state_dict)

    # the entries that PyTorch's older state dicts lack (flags of a step in progress)
    _optional_state = ("_is_initial", "_get_lr_called_within_step")
    _may_be_none = ()  # the entries that may be None whatever this scheduler holds

    def _check_state_dict(self, state_dict):
        """Refuse, with a ValueError naming the scheduler and the entry, a state dict that
        lacks an entry of this scheduler's ``state_dict()`` or holds one of another kind
        (a number for a number, a list of as many values for a list, ...). Entries it
        does not know are loaded as PyTorch loads them."""
        name = type(self).__name__
        if not isinstance(state_dict, dict):
            raise TypeError(f"{name} state dict must be a dict, got "
                            f"{type(state_dict).__name__}")
        for key, own in self.state_dict().items():
            if key not in state_dict:
                if key in self._optional_state:
                    continue
                raise ValueError(f"{name} state dict has no {key!r}")
            value = state_dict[key]
            if value is None and key in self._may_be_none:
                continue
            problem = _kind_problem(own, value)
            if problem:
                shown = repr(value)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                raise ValueError(f"{name} state dict has {key!r} = {shown}: {problem}")


def _is_number(value):
    if isinstance(value, Tensor):
        return value.numel() == 1
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _kind_problem(own, value):
    """Why a saved ``value`` cannot replace this scheduler's ``own`` value (None if it can):
    of the same kind, numbers for numbers (a one-element Tensor counts as one), lists of
    as many values, each of its kind; an own None takes anything."""
    if own is None:
        return None
    if isinstance(own, bool):
        return None if isinstance(value, bool) else "expected True or False"
    if _is_number(own):
        return None if _is_number(value) else "expected a number"
    if isinstance(own, str):
        return None if isinstance(value, str) else "expected a str"
    if isinstance(own, dict):
        return None if isinstance(value, dict) else "expected a dict"
    if isinstance(own, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(own):
            return f"expected a list of {len(own)} values"
        for a, b in zip(own, value):
            problem = _kind_problem(a, b)
            if problem:
                return f"{problem} in the list"
    return None


class _LambdaState:
    """State dicts of the schedulers driven by functions: functions and lambdas are not
    saved, a callable object's ``__dict__`` is (PyTorch's rule)."""

    def state_dict(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        self._check_state_dict(state_dict)
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


def _lambdas(optimizer, lr_lambda):
    if isinstance(lr_lambda, (list, tuple)):
        if len(lr_lambda) != len(optimizer.param_groups):
            raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                             f"{len(lr_lambda)}")
        return list(lr_lambda)
    return [lr_lambda] * len(optimizer.param_groups)


class LambdaLR(_LambdaState, LRScheduler):
    """lr = base_lr * lr_lambda(last_epoch).

    Args:
        optimizer (Optimizer): the optimiser.
        lr_lambda (callable or list): a function of the step index giving the factor, or
            one such function per param group.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        return [base_lr * lmbda(self.last_epoch)
                for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaState, LRScheduler):
    """lr_t = lr_{t-1} * lr_lambda(t) for t >= 1 (the lr is left as it is at construction),
    so lr_t = base_lr * lr_lambda(1) * ... * lr_lambda(t).

    Args:
        optimizer (Optimizer): the optimiser.
        lr_lambda (callable or list): a function of the step index giving the factor of
            that step, or one such function per param group.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.optimizer = optimizer
        self.lr_lambdas = _lambdas(optimizer, lr_lambda)
        for fn in self.lr_lambdas:
            if not callable(fn):
                raise TypeError(f"lr_lambda should be a function, but got {type(fn).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * lmbda(self.last_epoch)
                for lmbda, group in zip(self.lr_lambdas, self.optimizer.param_groups)]


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (last_epoch // step_size), computed as
    ``lr_t = lr_{t-1} * gamma`` at each t > 0 that is a multiple of step_size.

    Args:
        optimizer (Optimizer): the optimiser.
        step_size (int): the number of steps between two decays.
        gamma (float): the factor of each decay. Default: 0.1.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size)
                for base_lr in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (the number of milestones <= last_epoch), computed as
    ``lr_t = lr_{t-1} * gamma ** k`` at a milestone t given k times.

    Args:
        optimizer (Optimizer): the optimiser.
        milestones (iterable of int): the steps at which the lr decays (kept as a
            ``Counter``: a milestone given twice decays twice).
        gamma (float): the factor of each decay. Default: 0.1.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self.last_epoch not in self.milestones:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        milestones = sorted(self.milestones.elements())
        return [base_lr * self.gamma ** bisect_right(milestones, self.last_epoch)
                for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = base_lr * factor while last_epoch < total_iters, base_lr after; computed as
    ``lr_0 = lr * factor`` and ``lr_t = lr_{t-1} * (1 / factor)`` at t = total_iters.

    Args:
        optimizer (Optimizer): the optimiser.
        factor (float): the factor in [0, 1] of the first total_iters steps. Default: 1/3.
        total_iters (int): the number of steps at the reduced lr. Default: 5.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if factor > 1.0 or factor < 0:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * (1.0 / self.factor) for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """lr = base_lr * (start_factor + (end_factor - start_factor) * min(t, total_iters)
    / total_iters) with t = last_epoch; computed as ``lr_0 = lr * start_factor`` and, for
    0 < t <= total_iters::

        lr_t = lr_{t-1} * (1 + (end_factor - start_factor)
                           / (total_iters * start_factor + (t - 1) * (end_factor - start_factor)))

    Args:
        optimizer (Optimizer): the optimiser.
        start_factor (float): the factor at step 0, in (0, 1]. Default: 1/3.
        end_factor (float): the factor from total_iters on, in [0, 1]. Default: 1.
        total_iters (int): the number of steps of the linear change. Default: 5.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError("Starting multiplicative factor expected to be greater than 0 and "
                             "less or equal to 1.")
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError("Ending multiplicative factor expected to be between 0 and 1.")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        change = self.end_factor - self.start_factor
        return [group["lr"] * (1.0 + change / (self.total_iters * self.start_factor
                                               + (self.last_epoch - 1) * change))
                for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (self.start_factor + (self.end_factor - self.start_factor)
                           * min(self.total_iters, self.last_epoch) / self.total_iters)
                for base_lr in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** last_epoch, computed as ``lr_t = lr_{t-1} * gamma``.

    Args:
        optimizer (Optimizer): the optimiser.
        gamma (float): the factor of each step.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** self.last_epoch for base_lr in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(t, total_iters) / total_iters) ** power with t = last_epoch,
    computed, for 0 < t <= total_iters, as::

        lr_t = lr_{t-1} * ((1 - t / total_iters) / (1 - (t - 1) / total_iters)) ** power

    Args:
        optimizer (Optimizer): the optimiser.
        total_iters (int): the step at which the lr reaches 0. Default: 5.
        power (float): the power of the polynomial. Default: 1.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        if self._is_initial or self.last_epoch > self.total_iters:
            return _group_values(self.optimizer, "lr")
        decay_factor = ((1.0 - self.last_epoch / self.total_iters)
                        / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [group["lr"] * decay_factor for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters)
                ** self.power for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from base_lr to eta_min over T_max steps, PyTorch's numbers exactly.

    The closed form is ``eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2``;
    like PyTorch, ``step()`` computes it recursively from the current ``group["lr"]``::

        lr_t = (1 + cos(pi * t / T_max)) / (1 + cos(pi * (t - 1) / T_max))
               * (lr_{t-1} - eta_min) + eta_min

    and past T_max, at each ``t - 1 - T_max`` that is a multiple of ``2 * T_max``, adds
    ``(base_lr - eta_min) * (1 - cos(pi / T_max)) / 2``, so the lr rises again (a cosine
    of period 2 * T_max, not a restart).

    Args:
        optimizer (Optimizer): the optimiser.
        T_max (int): the number of steps of the half period.
        eta_min (float): the lowest lr. Default: 0.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        t, groups = self.last_epoch, self.optimizer.param_groups
        if self._is_initial:
            return _group_values(self.optimizer, "lr")
        if self._step_count == 1 and t > 0:
            return [self.eta_min + (base_lr - self.eta_min)
                    * (1 + math.cos(t * math.pi / self.T_max)) / 2 for base_lr in self.base_lrs]
        if (t - 1 - self.T_max) % (2 * self.T_max) == 0:
            return [group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / self.T_max))
                    / 2 for base_lr, group in zip(self.base_lrs, groups)]
        return [(1 + math.cos(math.pi * t / self.T_max))
                / (1 + math.cos(math.pi * (t - 1) / self.T_max))
                * (group["lr"] - self.eta_min) + self.eta_min for group in groups]

    def _get_closed_form_lr(self):
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov & Hutter, 2017): cosine annealing restarted every T_i steps::

        lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * T_cur / T_i)) / 2

    with T_cur the steps since the last restart; T_i starts at T_0 and is multiplied by
    T_mult at each restart. ``step()`` adds one to T_cur; ``step(epoch)`` sets it from a
    (possibly fractional) epoch, as ``scheduler.step(epoch + i / iters)`` within an epoch:
    ``T_cur = epoch % T_0`` with T_mult = 1, otherwise with
    ``n = int(log(epoch / T_0 * (T_mult - 1) + 1, T_mult))`` restarts done,
    ``T_cur = epoch - T_0 * (T_mult**n - 1) / (T_mult - 1)`` and ``T_i = T_0 * T_mult**n``.

    Args:
        optimizer (Optimizer): the optimiser.
        T_0 (int): the number of steps to the first restart.
        T_mult (int): the factor of T_i at each restart (>= 1). Default: 1.
        eta_min (float): the lowest lr. Default: 0.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        if not isinstance(eta_min, (float, int)):
            raise ValueError(f"Expected float or int eta_min, but got {eta_min} of type "
                             f"{type(eta_min)}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        return [self.eta_min + (base_lr - self.eta_min)
                * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2 for base_lr in self.base_lrs]

    @replayed_as_call  # mg.compile replays the whole call
    def step(self, epoch=None):
        """One step on (``epoch`` None), or to ``epoch``, which may be fractional (no
        deprecation here: it is how SGDR is stepped within an epoch)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log((epoch / self.T_0 * (self.T_mult - 1) + 1), self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        self._get_lr_called_within_step = True
        try:
            values = self.get_lr()
        finally:
            self._get_lr_called_within_step = False
        for group, lr in zip(self.optimizer.param_groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, 2019), one lr per step (batch), not chainable.

    The lr goes from ``initial_lr = max_lr / div_factor`` up to ``max_lr`` over the first
    ``pct_start * total_steps - 1`` steps, then down to ``min_lr = initial_lr /
    final_div_factor`` at step ``total_steps - 1``; with ``three_phase``, down to initial_lr
    at step ``2 * pct_start * total_steps - 2`` and only then to min_lr. Within a phase
    from ``start`` to ``end`` (steps ``s0`` to ``s1``), with ``pct = (t - s0) / (s1 - s0)``::

        cos:     lr = end + (start - end) / 2 * (cos(pi * pct) + 1)
        linear:  lr = (end - start) * pct + start

    With cycle_momentum, the momentum (SGD's ``momentum`` or Adam's beta1) runs the other
    way, from max_momentum down to base_momentum and back (the third phase keeps it at
    max_momentum). Stepping past ``total_steps`` raises ValueError. The groups get
    ``initial_lr``, ``max_lr``, ``min_lr`` (and ``max_momentum``, ``base_momentum``).

    Args:
        optimizer (Optimizer): the optimiser.
        max_lr (float or list): the peak lr, or one per param group.
        total_steps (int): the number of steps of the cycle; or give both
        epochs (int) and steps_per_epoch (int): total_steps = epochs * steps_per_epoch.
        pct_start (float): the fraction of the cycle spent raising the lr. Default: 0.3.
        anneal_strategy (str): ``"cos"`` or ``"linear"``. Default: ``"cos"``.
        cycle_momentum (bool): cycle the momentum inversely to the lr. Default: True.
        base_momentum (float or list): the momentum at the peak lr. Default: 0.85.
        max_momentum (float or list): the momentum at the start and end. Default: 0.95.
        div_factor (float): max_lr / initial_lr. Default: 25.
        final_div_factor (float): initial_lr / min_lr. Default: 1e4.
        three_phase (bool): the three-phase schedule of the paper. Default: False.
        last_epoch (int): see ``LRScheduler`` (the index of the last batch).
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True,
                 base_momentum=0.85, max_momentum=0.95, div_factor=25.0,
                 final_div_factor=1e4, three_phase=False, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if total_steps is not None:
            if total_steps <= 0 or not isinstance(total_steps, int):
                raise ValueError(f"Expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"Expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError("Expected positive integer steps_per_epoch, but got "
                                 f"{steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("You must define either total_steps OR (epochs AND steps_per_epoch)")
        up = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr",
                       "base_momentum", "max_momentum"),
                _phase(self.total_steps - 1, "initial_lr", "min_lr", "max_momentum",
                       "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                _phase(up, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum",
                       "max_momentum"),
            ]
        if pct_start < 0 or pct_start > 1 or not isinstance(pct_start, float):
            raise ValueError(f"Expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ["cos", "linear"]:
            raise ValueError("anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        self._anneal_func_type = anneal_strategy
        max_lrs = _format_param("max_lr", self.optimizer, max_lr)
        if last_epoch == -1:
            for group, lr in zip(self.optimizer.param_groups, max_lrs):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if self.cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in self.optimizer.defaults
            max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for m_momentum, b_momentum, group in zip(max_momentums, base_momentums,
                                                         optimizer.param_groups):
                    self._set_momentum(group, m_momentum)
                    group["max_momentum"] = m_momentum
                    group["base_momentum"] = b_momentum
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, momentum):
        if self.use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum

    def _anneal_func(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        if self._anneal_func_type == "linear":
            return (end - start) * pct + start
        raise ValueError(f"Unknown _anneal_func_type: {self._anneal_func_type}")

    def get_lr(self):
        """The lr of step ``last_epoch`` (and, with cycle_momentum, the momentum, written
        into the groups here)."""
        _warn_get_lr_called_within_step(self)
        lrs = []
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"Tried to step {step_num} times. The specified number of total "
                             f"steps is {self.total_steps}")
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == last:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal_func(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal_func(group[phase["start_momentum"]],
                                                     group[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                self._set_momentum(group, momentum)
        return lrs


def _phase(end_step, start_lr, end_lr, start_momentum, end_momentum):
    """One phase of OneCycleLR: its last step and the group keys it anneals between."""
    return {"end_step": end_step, "start_lr": start_lr, "end_lr": end_lr,
            "start_momentum": start_momentum, "end_momentum": end_momentum}


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (Smith, 2017), one lr per step (batch), not
    chainable: each cycle of ``step_size_up + step_size_down`` steps takes the lr from
    base_lr up to max_lr and back. With ``cycle = floor(1 + t / total)`` and
    ``x = 1 + t / total - cycle`` (t = last_epoch)::

        scale = x / ratio if x <= ratio else (x - 1) / (ratio - 1)   (ratio = up / total)
        lr = base_lr + (max_lr - base_lr) * scale * scale_fn(cycle or t)

    ``mode`` picks ``scale_fn``: "triangular" (1), "triangular2" (halved every cycle,
    ``1 / 2**(cycle - 1)``) or "exp_range" (``gamma**t``); a ``scale_fn`` of your own is
    called with the cycle (``scale_mode="cycle"``) or the step (``"iterations"``). With
    cycle_momentum, the momentum (SGD's ``momentum`` or Adam's beta1) runs the other way,
    from max_momentum down to base_momentum at max_lr. PyTorch's
    ``torch.optim.lr_scheduler.CyclicLR``.

    Args:
        optimizer (Optimizer): the optimiser.
        base_lr (float or list): the lowest lr of the cycle, or one per param group.
        max_lr (float or list): the highest lr of the cycle, or one per param group.
        step_size_up (int): the steps from base_lr up to max_lr. Default: 2000.
        step_size_down (int): the steps back down (None: step_size_up). Default: None.
        mode (str): "triangular", "triangular2" or "exp_range". Default: "triangular".
        gamma (float): the base of "exp_range". Default: 1.
        scale_fn (callable): a scale of your own, replacing ``mode``. Default: None.
        scale_mode (str): "cycle" or "iterations", what ``scale_fn`` is given.
        cycle_momentum (bool): cycle the momentum inversely to the lr. Default: True.
        base_momentum (float or list): the momentum at max_lr. Default: 0.8.
        max_momentum (float or list): the momentum at base_lr. Default: 0.9.
        last_epoch (int): see ``LRScheduler`` (the index of the last batch).
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_group_value(group, "lr", lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ["triangular", "triangular2", "exp_range"] and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in self.optimizer.defaults
            self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
            self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for m_momentum, b_momentum, group in zip(self.max_momentums,
                                                         self.base_momentums,
                                                         optimizer.param_groups):
                    self._set_momentum(group, m_momentum)
                    group["max_momentum"] = m_momentum
                    group["base_momentum"] = b_momentum
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group, momentum):
        if self.use_beta1:
            group["betas"] = (momentum, *group["betas"][1:])
        else:
            group["momentum"] = momentum

    def _init_scale_fn(self):
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = _triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = _triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = functools.partial(_exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        """The scale of the cycle's height at ``x`` (a cycle or a step, see scale_mode)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    def get_lr(self):
        """The lr of step ``last_epoch`` (and, with cycle_momentum, the momentum, written
        into the groups here)."""
        _warn_get_lr_called_within_step(self)
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * self.scale_fn(at)
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for base_momentum, max_momentum, group in zip(
                    self.base_momentums, self.max_momentums, self.optimizer.param_groups):
                base_height = (max_momentum - base_momentum) * scale_factor
                self._set_momentum(group, max_momentum - base_height * self.scale_fn(at))
        return lrs

    def state_dict(self):
        """Every attribute but the optimiser and the scale functions: a ``scale_fn`` of
        your own is saved as its ``__dict__`` where it is a callable object (functions and
        lambdas are not saved, as in PyTorch)."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict):
        self._check_state_dict(state_dict)
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom")
        self.__dict__.update(state_dict)
        if fn is not None:
            self._scale_fn_custom.__dict__.update(fn)
        self._init_scale_fn()


def _triangular_scale_fn(x):
    return 1.0


def _triangular2_scale_fn(x):
    return 1 / (2.0 ** (x - 1))


def _exp_range_scale_fn(gamma, x):
    return gamma ** x


class SequentialLR(LRScheduler):
    """Schedulers one after another: ``schedulers[i]`` runs from ``milestones[i - 1]``
    (0 for the first) until ``milestones[i]``. At a milestone the next scheduler starts at
    its step 0 (``_update_lr(0)``: its closed form where it has one), from the lr it
    would give at step 0, not from the lr the previous one left.

    Args:
        optimizer (Optimizer): the optimiser of every scheduler.
        schedulers (list): the schedulers, built on ``optimizer`` (their construction steps
            are undone here).
        milestones (list of int): ``len(schedulers) - 1`` increasing steps.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler, but got "
                             "no scheduler.")
        _check_chainable(type(self).__name__, schedulers, optimizer)
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("Sequential Schedulers expects number of schedulers provided to be "
                             "one more than the number of milestone points, but got number of "
                             f"schedulers {len(schedulers)} and the number of milestones to be "
                             f"equal to {len(milestones)}")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for group in self.optimizer.param_groups:  # the lr back to its initial value
            _set_group_value(group, "lr", group["initial_lr"])
        self.recursive_undo()  # and the schedulers' construction steps undone
        idx = bisect_right(self._milestones, 0)
        self._schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched=None):
        """Take back the step each scheduler (nested ones too) made at construction."""
        scheds = self if sched is None else sched
        if hasattr(scheds, "_schedulers"):
            for s in scheds._schedulers:
                self.recursive_undo(s)
        elif hasattr(scheds, "last_epoch"):
            scheds.last_epoch -= 1

    @replayed_as_call  # mg.compile replays the whole call
    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self):
        """Every attribute but the optimiser, with each scheduler's own state dict."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict):
        self._check_state_dict(state_dict)
        for scheduler, saved in zip(self._schedulers, state_dict["_schedulers"]):
            scheduler._check_state_dict(saved)  # all of them, before any changes
        state_dict = dict(state_dict)
        schedulers = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for scheduler, saved in zip(self._schedulers, schedulers):
            scheduler.load_state_dict(saved)


class ChainedScheduler(LRScheduler):
    """Several schedulers of one optimiser stepped together: ``step()`` steps each in turn,
    so their chainable factors multiply (``lr_t = lr_{t-1} * f1_t * f2_t ...``).

    Args:
        schedulers (sequence): the schedulers (none of them ReduceLROnPlateau).
        optimizer (Optimizer): their optimiser. Default: that of the first scheduler.
    """

    def __init__(self, schedulers, optimizer=None):
        if len(schedulers) < 1:
            raise ValueError(f"{type(self).__name__} expects at least one scheduler to be "
                             "chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        _check_chainable(type(self).__name__, schedulers, optimizer)
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")

    @replayed_as_call  # mg.compile replays the whole call
    def step(self):
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = _group_values(self._schedulers[-1].optimizer, "lr")

    state_dict = SequentialLR.state_dict
    load_state_dict = SequentialLR.load_state_dict


class ReduceLROnPlateau(LRScheduler):
    """Reduce the lr by ``factor`` when a metric has stopped improving.

    ``step(metric)`` counts the steps without improvement: ``metric`` improves on the
    best so far when, in mode "min", ``metric < best * (1 - threshold)`` (threshold_mode
    "rel") or ``metric < best - threshold`` ("abs"); in mode "max", ``metric > best * (1 +
    threshold)`` or ``metric > best + threshold``. After more than ``patience`` such steps,
    each group's lr becomes ``max(lr * factor, min_lr)`` (unless that changes it by eps or
    less), and the count restarts after ``cooldown`` steps in which bad steps are ignored.

    Args:
        optimizer (Optimizer): the optimiser.
        mode (str): ``"min"`` or ``"max"``. Default: ``"min"``.
        factor (float): the factor of each reduction (< 1). Default: 0.1.
        patience (int): the bad steps tolerated before a reduction. Default: 10.
        threshold (float): the smallest improvement that counts. Default: 1e-4.
        threshold_mode (str): ``"rel"`` or ``"abs"``. Default: ``"rel"``.
        cooldown (int): the steps after a reduction before counting again. Default: 0.
        min_lr (float or list): the lowest lr, or one per param group. Default: 0.
        eps (float): the smallest change of lr applied. Default: 1e-8.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        self.factor = factor
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"expected {len(optimizer.param_groups)} min_lrs, got "
                                 f"{len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = _group_values(self.optimizer, "lr")
        self._init_is_better(mode=mode, threshold=threshold, threshold_mode=threshold_mode)
        self._reset()

    def _reset(self):
        """Forget the best value, the bad steps and the cooldown."""
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @replayed_as_call  # mg.compile replays the whole call
    def step(self, metrics, epoch=None):
        """Take one value of the metric (a number or a 0-d Tensor)."""
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATED, UserWarning, stacklevel=3)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad steps in the cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr(epoch)
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = _group_values(self.optimizer, "lr")

    def _reduce_lr(self, epoch):
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"The number of param groups in the `optimizer` "
                    f"({len(self.optimizer.param_groups)}) differs from when "
                    f"`ReduceLROnPlateau` was initialized ({len(self.min_lrs)}), usually due "
                    "to a new param group being added to the optimizer. Please modify the "
                    "`min_lrs` field to match the length of the `optimizer` param groups.")
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for i, group in enumerate(self.optimizer.param_groups):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, self.min_lrs[i])
            if old_lr - new_lr > self.eps:
                _set_group_value(group, "lr", new_lr)

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min" and self.threshold_mode == "abs":
            return a < best - self.threshold
        if self.mode == "max" and self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in {"min", "max"}:
            raise ValueError("mode " + mode + " is unknown!")
        if threshold_mode not in {"rel", "abs"}:
            raise ValueError("threshold mode " + threshold_mode + " is unknown!")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    _may_be_none = ("default_min_lr",)  # None where min_lr was given per group

    def load_state_dict(self, state_dict):
        self._check_state_dict(state_dict)
        for key, kinds in (("mode", ("min", "max")), ("threshold_mode", ("rel", "abs"))):
            if state_dict[key] not in kinds:
                raise ValueError(f"ReduceLROnPlateau state dict has {key!r} = "
                                 f"{state_dict[key]!r}: expected one of {kinds}")
        self.__dict__.update(state_dict)
        self._init_is_better(mode=self.mode, threshold=self.threshold,
                             threshold_mode=self.threshold_mode)


class NoamLR(LRScheduler):
    """The schedule of "Attention Is All You Need" (Vaswani et al., 2017, section 5.3)::

        lr = base_lr * factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)

    with ``step = last_epoch + 1``: the first update (at construction, before any
    ``step()``) already uses step 1. The lr rises linearly for ``warmup_steps`` updates,
    peaks at ``step = warmup_steps``, then decays as ``step**-0.5``. The paper's schedule
    is base_lr = 1 with factor = 1 (Adam, betas (0.9, 0.98), eps 1e-9). minigrad's own
    (PyTorch writes it as a LambdaLR).

    Args:
        optimizer (Optimizer): the optimiser.
        d_model (int): the model width.
        warmup_steps (int): the number of warm-up updates (> 0).
        factor (float): an extra scale. Default: 1.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, d_model, warmup_steps, factor=1.0, last_epoch=-1):
        if d_model <= 0 or warmup_steps <= 0:
            raise ValueError(f"NoamLR needs d_model > 0 and warmup_steps > 0, got d_model="
                             f"{d_model} and warmup_steps={warmup_steps}")
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.factor = factor
        super().__init__(optimizer, last_epoch)

    def _scale(self, step):
        return self.factor * self.d_model ** -0.5 * min(step ** -0.5,
                                                        step * self.warmup_steps ** -1.5)

    def _get_closed_form_lr(self):
        return [base_lr * self._scale(self.last_epoch + 1) for base_lr in self.base_lrs]

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        return self._get_closed_form_lr()


class WarmupCosineLR(LRScheduler):
    """Linear warm-up from 0 to base_lr, then a cosine decay to eta_min. With
    ``t = last_epoch`` (0 at construction, so the first update uses lr 0 when
    warmup_steps > 0, as Hugging Face's ``get_cosine_schedule_with_warmup``)::

        lr = base_lr * t / warmup_steps                                   t < warmup_steps
        lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * p)) / 2        otherwise, with
        p = min(1, (t - warmup_steps) / (total_steps - warmup_steps))

    so lr = base_lr at t = warmup_steps, eta_min at t = total_steps, and eta_min after.
    minigrad's own (no PyTorch class of this name).

    Args:
        optimizer (Optimizer): the optimiser.
        warmup_steps (int): the number of warm-up steps (>= 0).
        total_steps (int): the step at which the lr reaches eta_min (> warmup_steps).
        eta_min (float): the final lr. Default: 0.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, warmup_steps, total_steps, eta_min=0.0, last_epoch=-1):
        if not 0 <= warmup_steps < total_steps:
            raise ValueError(f"WarmupCosineLR needs 0 <= warmup_steps < total_steps, got "
                             f"warmup_steps={warmup_steps} and total_steps={total_steps}")
        self.warmup_steps = warmup_steps
        self.total_steps = total_steps
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def _get_closed_form_lr(self):
        t = self.last_epoch
        if t < self.warmup_steps:
            return [base_lr * t / self.warmup_steps for base_lr in self.base_lrs]
        progress = min(1.0, (t - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * progress)) / 2
                for base_lr in self.base_lrs]

    def get_lr(self):
        _warn_get_lr_called_within_step(self)
        return self._get_closed_form_lr()
