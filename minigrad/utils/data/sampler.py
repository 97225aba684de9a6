"""``minigrad.utils.data.sampler``: where PyTorch's ``torch.utils.data.sampler`` puts the
samplers; the same classes as ``minigrad.utils.data``'s."""
from ..samplers import (BatchSampler, RandomSampler, Sampler, SequentialSampler,  # noqa: F401
                        SubsetRandomSampler, WeightedRandomSampler)
