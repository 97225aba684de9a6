"""The schedules that anneal the lr along a curve, once or in cycles: cosine annealing
(``CosineAnnealingLR``, with warm restarts ``CosineAnnealingWarmRestarts``, after a linear
warm-up ``WarmupCosineLR``), the 1cycle policy (``OneCycleLR``) and cyclical learning
rates (``CyclicLR``)."""
import functools
import math
import types

from ..optimizer import Optimizer
from ...compile.recorder import replayed_as_call
from .base import (LRScheduler, _format_param, _group_values, _set_group_value,
                   _warn_get_lr_called_within_step)


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
        self._write_lrs(self.get_lr)


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
