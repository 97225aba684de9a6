"""The base class of the schedulers, ``LRScheduler``, and what they share: reading and
writing a value of every param group, and the checks of a state dict."""
import numbers
import warnings

from ..optimizer import Optimizer
from ...tensor import Tensor
from ...compile.recorder import replayed_as_call


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
        if epoch is None:
            self.last_epoch += 1
            self._write_lrs(self.get_lr)
        else:
            self.last_epoch = epoch
            self._write_lrs(getattr(self, "_get_closed_form_lr", self.get_lr))

    def _write_lrs(self, rates):
        """Write ``rates()`` (computed as within a step: ``get_lr`` then does not warn) into
        the param groups, and note them as the last ones."""
        self._get_lr_called_within_step = True
        try:
            values = rates()
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
