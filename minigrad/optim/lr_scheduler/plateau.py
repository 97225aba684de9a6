"""``ReduceLROnPlateau``: the lr reduced when a metric stops improving."""
import math
import warnings

from ..optimizer import Optimizer
from ...compile.recorder import replayed_as_call
from .base import LRScheduler, _EPOCH_DEPRECATED, _group_values, _set_group_value


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
