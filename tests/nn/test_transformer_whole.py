"""nn.Transformer (encoder and decoder stacks with their final norms) against PyTorch's
with the same weights, and its square subsequent mask."""
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from tests.nn.test_transformer import torch_state
from tests.torch_ref import needs_torch, torch


def _torch_weights(ours):
    """Our Transformer's state dict in PyTorch's names (each layer's q/k/v packed)."""
    out, layers = {}, {}
    for key, value in ours.state_dict().items():
        found = re.match(r"(encoder|decoder)\.layers\.(\d+)\.(.*)", key)
        if found:
            layers.setdefault(found.groups()[:2], {})[found.group(3)] = value
        else:
            out[key] = torch.tensor(value.numpy())
    for (stack, i), state in layers.items():
        out.update({f"{stack}.layers.{i}.{k}": v for k, v in torch_state(state).items()})
    return out


@needs_torch
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("masks", ["none", "causal", "padding"])
def test_transformer_matches_torch(device, norm_first, masks):
    ours = nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, norm_first=norm_first).double()
    theirs = torch.nn.Transformer(8, 2, 2, 1, 16, dropout=0.0, norm_first=norm_first,
                                  batch_first=True).double()
    theirs.load_state_dict(_torch_weights(ours))
    ours.to(device)
    rng = np.random.default_rng(1)
    src, tgt = rng.standard_normal((3, 5, 8)), rng.standard_normal((3, 4, 8))
    kw, tkw = {}, {}
    if masks == "causal":
        kw["tgt_mask"] = nn.Transformer.generate_square_subsequent_mask(
            4, device=device, dtype=mg.float64)
        tkw["tgt_mask"] = torch.nn.Transformer.generate_square_subsequent_mask(
            4, dtype=torch.float64)
    if masks == "padding":
        pad = np.zeros((3, 5), bool)
        pad[1, 3:] = True
        kw["src_key_padding_mask"] = kw["memory_key_padding_mask"] = mg.tensor(pad,
                                                                               device=device)
        tkw["src_key_padding_mask"] = tkw["memory_key_padding_mask"] = torch.tensor(pad)
    a = mg.tensor(src, device=device, requires_grad=True)
    out = ours(a, mg.tensor(tgt, device=device), **kw)
    t = torch.tensor(src, requires_grad=True)
    ref = theirs(t, torch.tensor(tgt), **tkw)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), atol=1e-12)
    out.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), atol=1e-12)
    assert sum(p.numel() for p in ours.parameters()) == \
        sum(p.numel() for p in theirs.parameters())


@needs_torch
@pytest.mark.parametrize("size", [0, 1, 4])
def test_square_subsequent_mask_as_torch(device, size):
    ours = nn.Transformer.generate_square_subsequent_mask(size, device=device)
    theirs = torch.nn.Transformer.generate_square_subsequent_mask(size)
    assert ours.dtype == mg.float32 and ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_transformer_weights_start_xavier_uniform_and_refuses_misfits(device):
    model = nn.Transformer(16, 2, 1, 1, 32, device=device)
    for name, p in model.named_parameters():
        if p.ndim > 1:
            bound = (6 / (p.shape[0] + p.shape[1])) ** 0.5
            assert float(p.abs().max()) <= bound, name
    with pytest.raises(RuntimeError, match="batch number"):
        model(mg.zeros(2, 3, 16, device=device), mg.zeros(3, 3, 16, device=device))
    with pytest.raises(RuntimeError, match="d_model"):
        model(mg.zeros(2, 3, 8, device=device), mg.zeros(2, 3, 8, device=device))
