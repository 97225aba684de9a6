"""Learning-rate schedulers, as ``torch.optim.lr_scheduler``: call ``step()`` once after
each ``optimizer.step()``.

A scheduler writes ``group["lr"]`` of every param group of its optimiser. At construction
it records ``group["initial_lr"]`` (the base lr), sets ``last_epoch = 0`` and already
writes the lr for the first update; each ``step()`` adds one to ``last_epoch`` and writes
the lr for the next update. ``get_last_lr()`` is the list of lrs it wrote last.
"""
import math
import types
import warnings

from .optimizer import Optimizer
from ..compile.recorder import replayed_as_call


class LRScheduler:
    """Base class of the schedulers: subclasses write ``get_lr()``, the lr of each group at
    ``self.last_epoch``.

    Args:
        optimizer (Optimizer): the optimiser whose learning rates are set.
        last_epoch (int): the index of the last step taken, to resume a schedule (the
            groups must then hold ``initial_lr``). Default: -1, a new schedule.
    """

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming a scheduler with last_epoch >= 0")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._step_count = 0
        self._is_initial = True  # torch's recursive get_lr keeps the lr at construction
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates this scheduler wrote last, one per param group."""
        return self._last_lr

    @replayed_as_call  # mg.compile replays the whole call
    def step(self, epoch=None):
        """Advance the schedule by one step (``epoch`` jumps to that step, deprecated in
        PyTorch: it uses the closed form where the scheduler has one)."""
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            warnings.warn("passing an epoch to step() is deprecated (as in PyTorch)",
                          UserWarning, stacklevel=2)
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", self.get_lr)
            values = closed_form()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute but the optimiser."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(last_epoch).

    Args:
        optimizer (Optimizer): the optimiser.
        lr_lambda (callable or list): a function of the step index giving the factor, or
            one such function per param group.
        last_epoch (int): see ``LRScheduler``.
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(optimizer.param_groups):
                raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got "
                                 f"{len(lr_lambda)}")
            self.lr_lambdas = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(optimizer.param_groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base_lr * lmbda(self.last_epoch)
                for lmbda, base_lr in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        """As PyTorch: functions and lambdas are not saved, callable objects' ``__dict__`` is."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")}
        state["lr_lambdas"] = [None if isinstance(fn, types.FunctionType) else fn.__dict__.copy()
                               for fn in self.lr_lambdas]
        return state

    def load_state_dict(self, state_dict):
        state_dict = dict(state_dict)
        lr_lambdas = state_dict.pop("lr_lambdas")
        self.__dict__.update(state_dict)
        for fn, saved in zip(self.lr_lambdas, lr_lambdas):
            if saved is not None:
                fn.__dict__.update(saved)


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
        t, groups = self.last_epoch, self.optimizer.param_groups
        if self._is_initial:
            return [group["lr"] for group in groups]
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


class NoamLR(LRScheduler):
    """The schedule of "Attention Is All You Need" (Vaswani et al., 2017, section 5.3)::

        lr = base_lr * factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)

    with ``step = last_epoch + 1``: the first update (at construction, before any
    ``step()``) already uses step 1. The lr rises linearly for ``warmup_steps`` updates,
    peaks at ``step = warmup_steps``, then decays as ``step**-0.5``. The paper's schedule
    is base_lr = 1 with factor = 1 (Adam, betas (0.9, 0.98), eps 1e-9).

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

    def get_lr(self):
        return [base_lr * self._scale(self.last_epoch + 1) for base_lr in self.base_lrs]

    _get_closed_form_lr = get_lr


class WarmupCosineLR(LRScheduler):
    """Linear warm-up from 0 to base_lr, then a cosine decay to eta_min. With
    ``t = last_epoch`` (0 at construction, so the first update uses lr 0 when
    warmup_steps > 0, as Hugging Face's ``get_cosine_schedule_with_warmup``)::

        lr = base_lr * t / warmup_steps                                   t < warmup_steps
        lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * p)) / 2        otherwise, with
        p = min(1, (t - warmup_steps) / (total_steps - warmup_steps))

    so lr = base_lr at t = warmup_steps, eta_min at t = total_steps, and eta_min after.

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

    def get_lr(self):
        t = self.last_epoch
        if t < self.warmup_steps:
            return [base_lr * t / self.warmup_steps for base_lr in self.base_lrs]
        progress = min(1.0, (t - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return [self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * progress)) / 2
                for base_lr in self.base_lrs]

    _get_closed_form_lr = get_lr
