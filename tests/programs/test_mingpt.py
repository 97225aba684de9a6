"""minGPT (github.com/karpathy/minGPT): its ``mingpt/model.py`` (GPT, configure_optimizers,
generate), ``mingpt/utils.py`` (set_seed, CfgNode) and ``mingpt/trainer.py`` (the Trainer, its
DataLoader with a RandomSampler, AdamW and gradient clipping), run unchanged on minigrad from
the same weights and data as on PyTorch: the logits, gradients and training losses agree."""
import numpy as np
import pytest

import minigrad as mg
from tests.programs.loader import copy_weights, load
from tests.torch_ref import needs_torch, torch

pytestmark = needs_torch
V, T = 7, 8


def program(lib):
    utils = load("mingpt_utils.py", lib)
    model = load("mingpt_model.py", lib, {"mingpt.utils": utils})
    trainer = load("mingpt_trainer.py", lib, {"mingpt.utils": utils})
    return utils, model, trainer


def config(model_module, **kw):
    C = model_module.GPT.get_default_config()
    C.model_type, C.n_layer, C.n_head, C.n_embd = None, 2, 2, 16
    C.vocab_size, C.block_size = V, T
    C.embd_pdrop = C.resid_pdrop = C.attn_pdrop = 0.0  # (dropout draws differ between libraries)
    C.merge_from_dict(kw)
    return C


def pair(device, dtype="float32", **kw):
    """The same GPT in PyTorch and in minigrad (on ``device``): PyTorch's weights copied in."""
    models = []
    for lib in (torch, mg):
        utils, model, _ = program(lib)
        utils.set_seed(3)
        net = model.GPT(config(model, **kw))
        models.append(getattr(net, {"float32": "float", "float64": "double"}[dtype])())
    copy_weights(models[0], models[1], mg, device)
    return models[0], models[1].to(device)


def batch(lib, seed=0, device="cpu"):
    rows = np.random.RandomState(seed).randint(0, V, (3, T + 1))
    x = lib.tensor(rows[:, :-1], dtype=lib.long, device=device)
    return x, lib.tensor(rows[:, 1:], dtype=lib.long, device=device)


def test_logits_loss_and_gradients_match(device):
    ref, net = pair(device)
    (tl, tloss), (ml, mloss) = ref(*batch(torch)), net(*batch(mg, device=device))
    np.testing.assert_allclose(ml.numpy(), tl.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mloss.item(), tloss.item(), rtol=1e-6)
    tloss.backward()
    mloss.backward()
    grads = dict(net.named_parameters())
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(grads[name].grad.numpy(), p.grad.numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=name)


def test_generate_greedy_matches(device):
    ref, net = pair(device)
    ref.eval(), net.eval()
    x = batch(torch)[0][:, :3]
    out = ref.generate(x, 7)  # past block_size: the context is cropped
    got = net.generate(mg.tensor(x.numpy(), device=device), 7)
    assert got.tolist() == out.tolist()


class InOrder:
    """A dataset that hands out its examples in a fixed order, whatever the index that the
    Trainer's RandomSampler draws (the two libraries draw different indices)."""

    def __init__(self, lib, rows):
        self.lib, self.rows, self.calls = lib, rows, 0

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, idx):
        row = self.rows[self.calls % len(self.rows)]
        self.calls += 1
        return (self.lib.tensor(row[:-1], dtype=self.lib.long),
                self.lib.tensor(row[1:], dtype=self.lib.long))


@pytest.mark.filterwarnings("ignore:'pin_memory' argument")  # (PyTorch's, without a GPU)
def test_trainer_losses_match(device):
    rows = np.random.RandomState(1).randint(0, V, (10, T + 1))
    losses = {}
    nets = pair(device, "float64")
    for lib, net, dev in ((torch, nets[0], "cpu"), (mg, nets[1], device)):
        _, _, trainer = program(lib)
        C = trainer.Trainer.get_default_config()
        C.device, C.num_workers, C.max_iters, C.batch_size = dev, 0, 6, 4
        C.learning_rate, C.grad_norm_clip = 1e-2, 0.5  # (large enough to clip and move)
        run = trainer.Trainer(C, net, InOrder(lib, rows))
        seen = losses[lib.__name__] = []
        run.add_callback("on_batch_end", lambda t: seen.append(t.loss.item()))
        run.run()
    assert len(losses["minigrad"]) == 6
    np.testing.assert_allclose(losses["minigrad"], losses["torch"], rtol=1e-10)
    assert losses["torch"][-1] < losses["torch"][0]
    for name, p in nets[0].named_parameters():
        np.testing.assert_allclose(dict(nets[1].named_parameters())[name].detach().numpy(),
                                   p.detach().numpy(), rtol=1e-9, atol=1e-12, err_msg=name)
