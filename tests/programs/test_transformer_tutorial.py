"""PyTorch's tutorial "Language Modeling with nn.Transformer and torchtext"
(pytorch/tutorials, beginner_source/transformer_tutorial.py): the script itself, run unchanged
but for its sizes on minigrad and on PyTorch, with the same token streams in place of
WikiText2 and the same initial weights (copied in once the script has made its model):
TransformerModel over nn.TransformerEncoder (sequence first), PositionalEncoding, batchify,
get_batch, SGD with StepLR and clipping, evaluate, and the best weights through torch.save
and torch.load. Its validation and test losses and its final weights agree."""
import numpy as np
import pytest

import minigrad as mg
from tests.programs.loader import copy_weights, in_minigrads_names, load
from tests.torch_ref import needs_torch, torch

pytestmark = needs_torch
V = 13


def stream(lib, n, shift):
    """A token stream with a pattern to learn."""
    return lib.tensor((np.arange(n) * 5 + shift) % V, dtype=lib.long)


def run(lib, initial):
    given = dict(vocab=[f"w{i}" for i in range(V)], train_data=stream(lib, 83, 0),
                 val_data=stream(lib, 23, 1), test_data=stream(lib, 23, 2))

    def same_start(module):  # PyTorch's initial weights, kept, then copied into minigrad's
        if lib is torch:
            initial.update({k: v.clone() for k, v in module.model.state_dict().items()})
        else:
            copy_weights(initial, module.model, mg, module.device)

    return load("transformer_tutorial.py", lib, given=given,
                pause=("model = TransformerModel(", same_start))


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # (PyTorch's)
@pytest.mark.xfail(reason="minigrad's attention and transformer layers are batch first by "
                          "default, where PyTorch's (and this sequence-first tutorial's) are "
                          "not", strict=True)
def test_the_tutorial_trains_as_in_pytorch():
    initial = {}
    ref = run(torch, initial)
    got = run(mg, initial)
    assert got.epochs == ref.epochs == 2 and got.train_data.shape == ref.train_data.shape
    np.testing.assert_allclose(got.best_val_loss, ref.best_val_loss, rtol=1e-5)
    np.testing.assert_allclose(got.test_loss, ref.test_loss, rtol=1e-5)
    assert ref.test_loss < np.log(V)  # (it learned something)
    assert got.scheduler.get_last_lr() == ref.scheduler.get_last_lr()
    weights = dict(got.model.state_dict())
    for name, value in in_minigrads_names(ref.model.state_dict(), set(weights)).items():
        np.testing.assert_allclose(weights[name].cpu().numpy(), value.numpy(), rtol=1e-4,
                                   atol=1e-5, err_msg=name)
