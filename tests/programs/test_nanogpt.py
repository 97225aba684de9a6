"""nanoGPT (github.com/karpathy/nanoGPT): its ``model.py`` unchanged (GPT with its own
LayerNorm, flash attention through ``F.scaled_dot_product_attention``, weight tying,
``configure_optimizers`` making AdamW with two parameter groups, ``generate``) on minigrad from
the same weights as on PyTorch, and a training loop written as ``train.py``'s (the cosine
learning rate with warmup set in each parameter group, gradient clipping, a checkpoint dict
of model, optimizer, model_args, iter_num, best_val_loss and config through ``torch.save``,
and a resumed run through ``torch.load``). The batches are drawn with NumPy rather than
``torch.randint``, so that both libraries see the same ones."""
import math

import numpy as np
import pytest

import minigrad as mg
from tests.programs.loader import copy_weights, load
from tests.torch_ref import needs_torch, torch

pytestmark = needs_torch
V, T, B = 11, 8, 4
# train.py's settings, shrunk
learning_rate, min_lr, warmup_iters, lr_decay_iters = 1e-2, 1e-3, 2, 6
weight_decay, beta1, beta2, grad_clip = 0.1, 0.9, 0.95, 0.5
DATA = (np.arange(400) * 3 % V).astype(np.uint16)  # (a pattern that the model learns)


def make(lib, device, **kw):
    model = load("nanogpt_model.py", lib)
    model_args = dict(n_layer=2, n_head=2, n_embd=16, block_size=T, bias=False,
                      vocab_size=V, dropout=0.0)
    model_args.update(kw)
    return model, model_args


def pair(device, dtype="float32", **kw):
    nets = []
    for lib in (torch, mg):
        module, model_args = make(lib, device, **kw)
        lib.manual_seed(1337)
        net = module.GPT(module.GPTConfig(**model_args))
        nets.append((net.double() if dtype == "float64" else net).to("cpu"))
    copy_weights(nets[0], nets[1], mg, device)
    return nets[0], nets[1].to(device)


def get_batch(lib, it, device):  # train.py's, with the start indices drawn by NumPy
    ix = np.random.RandomState(it).randint(len(DATA) - T, size=B)
    x = lib.stack([lib.from_numpy((DATA[i:i+T]).astype(np.int64)) for i in ix])
    y = lib.stack([lib.from_numpy((DATA[i+1:i+1+T]).astype(np.int64)) for i in ix])
    return x.to(device), y.to(device)


def get_lr(it):  # train.py's
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


@pytest.mark.parametrize("bias", [False, True])
def test_logits_loss_and_gradients_match(bias, device):
    ref, net = pair(device, bias=bias)
    assert net.transformer.wte.weight is net.lm_head.weight
    x, y = get_batch(torch, 0, "cpu")
    (tl, tloss), (ml, mloss) = ref(x, y), net(*get_batch(mg, 0, device))
    np.testing.assert_allclose(ml.numpy(), tl.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mloss.item(), tloss.item(), rtol=1e-6)
    tloss.backward()
    mloss.backward()
    grads = dict(net.named_parameters())
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(grads[name].grad.numpy(), p.grad.numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=name)
    assert net.get_num_params() == ref.get_num_params()
    # inference: the logits of the last position only
    net.eval(), ref.eval()
    np.testing.assert_allclose(net(get_batch(mg, 0, device)[0])[0].numpy(),
                               ref(x)[0].detach().numpy(), rtol=1e-5, atol=1e-6)


def test_generate_with_top_k_matches_greedy_through_sampling(device):
    """Sampling draws differ between libraries; with top_k=1 each draw is the argmax."""
    ref, net = pair(device)
    x = get_batch(torch, 0, "cpu")[0][:, :3]
    out = ref.generate(x, 7, top_k=1)  # past block_size: the context is cropped
    got = net.generate(mg.tensor(x.numpy(), device=device), 7, top_k=1)
    assert got.tolist() == out.tolist()


def test_crop_block_size_and_estimate_mfu_match(device):
    ref, net = pair(device)
    for model in (ref, net):
        model.crop_block_size(5)
        assert model.config.block_size == 5 and model.transformer.wpe.weight.shape == (5, 16)
        assert isinstance(model.transformer.wpe.weight, type(model.lm_head.weight))
    x = get_batch(torch, 0, "cpu")[0][:, :5]
    np.testing.assert_allclose(net(mg.tensor(x.numpy(), device=device))[0].numpy(),
                               ref(x)[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    assert net.get_num_params() == ref.get_num_params()
    assert net.estimate_mfu(B, 0.5) == ref.estimate_mfu(B, 0.5)
    with pytest.raises(AssertionError, match="block size is only 5"):
        net(mg.tensor(get_batch(torch, 0, "cpu")[0].numpy(), device=device))


def train(lib, model, optimizer, iter_num, stop, device, losses, checkpoint_at=None,
          out_dir=None, model_args=None):
    """train.py's loop from ``iter_num`` to ``stop``: one micro step per iteration, no
    evaluation; at ``checkpoint_at`` it saves the checkpoint as train.py does."""
    best_val_loss = 1e9
    config = dict(learning_rate=learning_rate, grad_clip=grad_clip, batch_size=B)
    X, Y = get_batch(lib, iter_num, device)
    while True:
        lr = get_lr(iter_num)
        for param_group in optimizer.param_groups:
            param_group['lr'] = lr
        if iter_num == checkpoint_at:
            checkpoint = {
                'model': model.state_dict(),
                'optimizer': optimizer.state_dict(),
                'model_args': model_args,
                'iter_num': iter_num,
                'best_val_loss': best_val_loss,
                'config': config,
            }
            lib.save(checkpoint, str(out_dir / 'ckpt.pt'))
        logits, loss = model(X, Y)
        X, Y = get_batch(lib, iter_num + 1, device)
        loss.backward()
        if grad_clip != 0.0:
            lib.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        iter_num += 1
        if iter_num >= stop:
            return


def resume(lib, device, out_dir):
    """train.py's init_from='resume'."""
    module, model_args = make(lib, device)
    checkpoint = lib.load(str(out_dir / 'ckpt.pt'), map_location=device)
    checkpoint_model_args = checkpoint['model_args']
    for k in ['n_layer', 'n_head', 'n_embd', 'block_size', 'bias', 'vocab_size']:
        model_args[k] = checkpoint_model_args[k]
    gptconf = module.GPTConfig(**model_args)
    model = module.GPT(gptconf).double()
    state_dict = checkpoint['model']
    unwanted_prefix = '_orig_mod.'
    for k, v in list(state_dict.items()):
        if k.startswith(unwanted_prefix):
            state_dict[k[len(unwanted_prefix):]] = state_dict.pop(k)
    model.load_state_dict(state_dict)
    model.to(device)
    iter_num = checkpoint['iter_num']
    device_type = 'cuda' if 'cuda' in device else 'cpu'
    optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2),
                                           device_type)
    optimizer.load_state_dict(checkpoint['optimizer'])
    assert checkpoint['config']['batch_size'] == B
    return model, optimizer, iter_num


def test_training_and_resuming_match(device, tmp_path):
    losses = {}
    for lib, model, dev in zip((torch, mg), pair(device, "float64"), ("cpu", device)):
        _, model_args = make(lib, dev)
        device_type = 'cuda' if 'cuda' in dev else 'cpu'
        optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2),
                                               device_type)
        out_dir = tmp_path / lib.__name__
        out_dir.mkdir()
        whole = losses[lib.__name__] = []
        train(lib, model, optimizer, 0, 8, dev, whole, checkpoint_at=4, out_dir=out_dir,
              model_args=model_args)
        model, optimizer, iter_num = resume(lib, dev, out_dir)
        assert iter_num == 4
        resumed = whole[:4]
        train(lib, model, optimizer, iter_num, 8, dev, resumed)
        assert resumed == whole  # the resumed run is the uninterrupted one
    np.testing.assert_allclose(losses["minigrad"], losses["torch"], rtol=1e-10)
    assert losses["torch"][-1] < losses["torch"][0]
