"""Optimisers and learning-rate schedulers, as ``torch.optim``: ``SGD``, ``Adam``, ``AdamW``,
``RMSprop``, ``Adagrad``, ``Adamax``, ``NAdam``, ``RAdam`` and ``lr_scheduler`` (PyTorch's
schedulers, ``StepLR`` to ``OneCycleLR`` and ``CyclicLR``, ``SequentialLR``,
``ChainedScheduler`` and ``ReduceLROnPlateau``; minigrad's ``NoamLR``, ``WarmupCosineLR``).

Read ``optimizer.py`` first (param groups, state, checkpoints), then ``sgd.py``, ``adam.py``;
``rmsprop.py``, ``adagrad.py``, ``adamax.py``, ``nadam.py`` and ``radam.py`` follow the
same pattern (``backend.fma``: the fused multiply-adds with which PyTorch's CPU kernels
round some of their operations; ``_complex.py``: complex parameters stepped as real ones).
"""
from . import lr_scheduler  # noqa: F401
from .adagrad import Adagrad  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .adamax import Adamax  # noqa: F401
from .nadam import NAdam  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .radam import RAdam  # noqa: F401
from .rmsprop import RMSprop  # noqa: F401
from .sgd import SGD  # noqa: F401
