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

The schedulers are grouped by family: ``base.py`` (``LRScheduler``), ``factor.py`` (a
factor of the step: lambda, multiplicative, step, multi-step, constant, linear,
exponential, polynomial, Noam), ``annealing.py`` (cosine, warm restarts, warm-up cosine,
one-cycle, cyclic), ``combined.py`` (sequential, chained) and ``plateau.py``.
"""
from .base import LRScheduler  # noqa: F401
from .factor import (ConstantLR, ExponentialLR, LambdaLR, LinearLR, MultiplicativeLR,  # noqa
                     MultiStepLR, NoamLR, PolynomialLR, StepLR)
from .annealing import (CosineAnnealingLR, CosineAnnealingWarmRestarts, CyclicLR,  # noqa: F401
                        OneCycleLR, WarmupCosineLR)
from .combined import ChainedScheduler, SequentialLR  # noqa: F401
from .plateau import ReduceLROnPlateau  # noqa: F401
# CyclicLR's scale functions, where pickles made when they were defined here find them
from .annealing import (_exp_range_scale_fn, _triangular2_scale_fn,  # noqa: F401
                        _triangular_scale_fn)
