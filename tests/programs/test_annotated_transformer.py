"""The Annotated Transformer (github.com/harvardnlp/annotated-transformer): its model cells
(EncoderDecoder, MultiHeadedAttention, LayerNorm, PositionalEncoding, make_model, ...) and its
first example, the copy task (Batch and its masks, LabelSmoothing, SimpleLossCompute,
run_epoch with Adam and the ``rate`` schedule through LambdaLR, greedy_decode), run unchanged
on minigrad from the same weights and batches as on PyTorch (the batches drawn with NumPy,
as ``data_gen`` draws them with ``torch.randint``): the outputs, gradients, losses and
decoded sequences agree."""

import numpy as np
import pytest

import minigrad as mg
from tests.programs.loader import copy_weights, load
from tests.torch_ref import needs_torch, torch

pytestmark = needs_torch
V = 11
SIZES = dict(N=2, d_model=16, d_ff=32, h=2, dropout=0.0)  # (dropout draws differ)


def pair(device, dtype="float32"):
    """The program and its model in PyTorch and in minigrad (PyTorch's weights copied in)."""
    out = []
    for lib in (torch, mg):
        at = load("annotated_transformer.py", lib)
        lib.manual_seed(0)
        model = at.make_model(V, V, **SIZES)
        for m in model.modules():  # (make_model leaves the attention's dropout at 0.1)
            if isinstance(m, lib.nn.Dropout):
                m.p = 0.0
        out.append((at, model.double() if dtype == "float64" else model))
    copy_weights(out[0][1], out[1][1], mg, device)
    out[1][1].to(device)
    return out


def copy_data(seed, batch_size=6, length=10):
    """data_gen's batch of the copy task: random symbols from 1 to V - 1, starting with 1."""
    data = np.random.RandomState(seed).randint(1, V, size=(batch_size, length))
    data[:, 0] = 1
    return data


def test_model_outputs_and_gradients_match(device):
    (t_at, ref), (m_at, net) = pair(device)
    data = copy_data(0)
    data[1, 7:] = 0  # some padding
    results = []
    for at, model, lib, dev in ((t_at, ref, torch, "cpu"), (m_at, net, mg, device)):
        src = tgt = lib.tensor(data, device=dev)
        src_mask = (src != 0).unsqueeze(-2)
        tgt_mask = (tgt[:, :-1] != 0).unsqueeze(-2) & at.subsequent_mask(9).to(dev)
        out = model.generator(model.forward(src, tgt[:, :-1], src_mask, tgt_mask))
        loss = -out.gather(-1, tgt[:, 1:].unsqueeze(-1)).sum()
        loss.backward()
        results.append((out, {k: p.grad for k, p in model.named_parameters()}))
    (t_out, t_grads), (m_out, m_grads) = results
    np.testing.assert_allclose(m_out.detach().numpy(), t_out.detach().numpy(), rtol=1e-5,
                               atol=1e-5)
    for name, g in t_grads.items():
        np.testing.assert_allclose(m_grads[name].numpy(), g.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_masks_schedule_and_positions_match():
    (t_at, _), (m_at, _) = pair("cpu")
    assert m_at.subsequent_mask(5).tolist() == t_at.subsequent_mask(5).tolist()
    assert m_at.subsequent_mask(5).dtype == mg.bool
    for step in (0, 1, 7, 400):
        assert m_at.rate(step, 16, 1.0, 4) == t_at.rate(step, 16, 1.0, 4)
    pe = m_at.PositionalEncoding(16, 0.0, max_len=50)
    np.testing.assert_allclose(pe.pe.numpy(), t_at.PositionalEncoding(16, 0.0, 50).pe.numpy(),
                               rtol=1e-6, atol=1e-6)
    x = np.random.RandomState(0).randn(2, 5, 16).astype(np.float32)
    np.testing.assert_allclose(m_at.LayerNorm(16)(mg.tensor(x)).detach().numpy(),
                               t_at.LayerNorm(16)(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_rate_schedule_through_lambda_lr_matches():
    """example_simple_model's optimizer and schedule: Adam with the rate through LambdaLR."""
    lrs = []
    for at, model in pair("cpu"):
        lib = torch if at.torch is torch else mg
        optimizer = lib.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
        lr_scheduler = at.LambdaLR(
            optimizer=optimizer,
            lr_lambda=lambda step: at.rate(
                step, model_size=model.src_embed[0].d_model, factor=1.0, warmup=3
            ),
        )
        seen = []
        for _ in range(6):
            optimizer.step()
            lr_scheduler.step()
            seen.append(optimizer.param_groups[0]["lr"])
        lrs.append(seen)
    assert lrs[1] == lrs[0] and lrs[0][2] > lrs[0][5]


def test_label_smoothing_matches(device):
    (t_at, _), (m_at, _) = pair(device)
    x = np.log(np.random.RandomState(0).dirichlet(np.ones(V), size=6)).astype(np.float32)
    target = np.array([1, 2, 0, 3, 10, 0])
    for smoothing in (0.0, 0.4):
        ref = t_at.LabelSmoothing(V, 0, smoothing)
        crit = m_at.LabelSmoothing(V, 0, smoothing)
        tx = torch.tensor(x, requires_grad=True)
        mx = mg.tensor(x, requires_grad=True, device=device)
        t_loss, m_loss = ref(tx, torch.tensor(target)), crit(mx, mg.tensor(target, device=device))
        np.testing.assert_allclose(crit.true_dist.numpy(), ref.true_dist.numpy(), rtol=1e-6)
        np.testing.assert_allclose(m_loss.item(), t_loss.item(), rtol=1e-6)
        t_loss.backward()
        m_loss.backward()
        np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)


def run_copy_task(at, lib, model, device, epochs=2, nbatches=3):
    """example_simple_model's training, smaller (warmup 4 steps, 2 epochs of 3 batches of 6),
    with data_gen's batches made from NumPy's draws; the losses run_epoch returns per epoch,
    and greedy_decode's output after training."""
    criterion = at.LabelSmoothing(size=V, padding_idx=0, smoothing=0.0)
    optimizer = lib.optim.Adam(model.parameters(), lr=0.5, betas=(0.9, 0.98), eps=1e-9)
    lr_scheduler = at.LambdaLR(
        optimizer=optimizer,
        lr_lambda=lambda step: at.rate(
            step, model_size=model.src_embed[0].d_model, factor=1.0, warmup=4
        ),
    )
    losses = []
    for epoch in range(epochs):
        batches = [lib.tensor(copy_data(100 * epoch + i), device=device)
                   for i in range(nbatches)]
        model.train()
        loss, _ = at.run_epoch(
            (at.Batch(data, data.clone(), 0) for data in batches),
            model,
            at.SimpleLossCompute(model.generator, criterion),
            optimizer,
            lr_scheduler,
            mode="train",
            train_state=at.TrainState(),
        )
        losses.append(float(loss))
        model.eval()
        loss, _ = at.run_epoch(
            (at.Batch(data, data.clone(), 0) for data in batches[:1]),
            model,
            at.SimpleLossCompute(model.generator, criterion),
            at.DummyOptimizer(),
            at.DummyScheduler(),
            mode="eval",
        )
        losses.append(float(loss))
    model.eval()
    src = lib.LongTensor([[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]]).to(device)
    max_len = src.shape[1]
    src_mask = lib.ones(1, 1, max_len).to(device)
    return losses, at.greedy_decode(model, src, src_mask, max_len=max_len,
                                    start_symbol=0).tolist()


def test_copy_task_training_and_greedy_decode_match(device):
    (t_at, ref), (m_at, net) = pair(device, "float64")
    t_losses, t_decoded = run_copy_task(t_at, torch, ref, "cpu")
    m_losses, m_decoded = run_copy_task(m_at, mg, net, device)
    np.testing.assert_allclose(m_losses, t_losses, rtol=1e-9)
    assert m_decoded == t_decoded
    assert t_losses[-2] < t_losses[0]


def test_inference_test_runs():
    """The notebook's inference_test: an untrained model's greedy prediction."""
    m_at = load("annotated_transformer.py", mg)
    m_at.inference_test()
