"""Optimisers and learning-rate schedulers, as ``torch.optim``: ``SGD``, ``Adam``, ``AdamW``
and ``lr_scheduler`` (PyTorch's schedulers, ``StepLR`` to ``OneCycleLR`` and ``CyclicLR``,
``SequentialLR``, ``ChainedScheduler`` and ``ReduceLROnPlateau``; minigrad's ``NoamLR``,
``WarmupCosineLR``).

Read ``optimizer.py`` first (param groups, state, checkpoints), then ``sgd.py``, ``adam.py``.
"""
from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401
