"""Schedulers made of other schedulers: one after another (``SequentialLR``) or all of
them at each step (``ChainedScheduler``)."""
from bisect import bisect_right

from ...compile.recorder import replayed_as_call
from .base import LRScheduler, _group_values, _set_group_value
from .plateau import ReduceLROnPlateau


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
