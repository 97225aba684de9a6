"""The schedules that scale the base lr by a factor of the step: by functions of yours
(``LambdaLR``, ``MultiplicativeLR``), in steps (``StepLR``, ``MultiStepLR``), by a
constant or a linear ramp for a while (``ConstantLR``, ``LinearLR``), by a power
(``ExponentialLR``, ``PolynomialLR``), and the Transformer's warm-up (``NoamLR``)."""
import types
from bisect import bisect_right
from collections import Counter

from .base import LRScheduler, _group_values, _warn_get_lr_called_within_step


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
