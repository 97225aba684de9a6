"""The training-step workloads of ``benchmarks.run``, built the same way in minigrad and in
PyTorch: an encoder-decoder transformer (pre-LN, sinusoidal positions, dropout 0.1, padded
batches), label-smoothed cross-entropy, backward, Adam; and attention alone, forward and
backward. Each is built on a device, "cpu" or "cuda" (minigrad through CuPy, PyTorch's CUDA
tensors), from the same host arrays.

Both libraries get the same batch (token ids drawn from one seed, each row padded after a
random length between half and all of the sequence length) and the same model shape; the
weights are each library's own default initialisation (the time of a step does not depend on
their values).
"""
import math
import warnings

import numpy as np

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.models.transformer import Transformer

SIZES = {  # the training step at three model and batch sizes
    "tiny": dict(d_model=64, nhead=4, layers=2, ff=256, vocab=32, batch=32, length=16),
    "small": dict(d_model=128, nhead=4, layers=2, ff=512, vocab=64, batch=32, length=32),
    "medium": dict(d_model=256, nhead=8, layers=3, ff=1024, vocab=1000, batch=32, length=64),
}
DROPOUT, LABEL_SMOOTHING, PAD = 0.1, 0.1, 0


def batch(cfg, seed=0):
    """(src, tgt_in, tgt_out) int64 arrays of shape (batch, length), padded with PAD."""
    rng = np.random.default_rng(seed)
    B, L, V = cfg["batch"], cfg["length"], cfg["vocab"]
    tokens = rng.integers(1, V, size=(3, B, L + 1))
    lengths = rng.integers(L // 2, L + 1, size=(2, B, 1))
    positions = np.arange(L + 1)
    src = np.where(positions < lengths[0], tokens[0], PAD)[:, :L]
    tgt = np.where(positions < lengths[1] + 1, tokens[1], PAD)
    return src, tgt[:, :-1], tgt[:, 1:]


def minigrad_step(cfg, seed=0, device="cpu"):
    """A function running one training step of minigrad's models.Transformer on ``device``."""
    mg.manual_seed(seed)
    model = Transformer(cfg["vocab"], cfg["vocab"], d_model=cfg["d_model"], nhead=cfg["nhead"],
                        num_encoder_layers=cfg["layers"], num_decoder_layers=cfg["layers"],
                        dim_feedforward=cfg["ff"], dropout=DROPOUT, norm_first=True,
                        max_len=cfg["length"], pad_id=PAD).to(device)
    optimizer = mg.optim.Adam(model.parameters(), lr=1e-4)
    src, tgt_in, tgt_out = (mg.tensor(a, device=device) for a in batch(cfg, seed))

    def step():
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), tgt_out.reshape(-1),
                               ignore_index=PAD, label_smoothing=LABEL_SMOOTHING)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return step


def torch_step(cfg, seed=0, device="cpu"):
    """The same step in PyTorch: nn.Transformer between the same embeddings and generator."""
    import torch

    torch.manual_seed(seed)
    model = _TorchTransformer(cfg).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    src, tgt_in, tgt_out = (torch.from_numpy(a).to(device) for a in batch(cfg, seed))
    V = cfg["vocab"]

    def step():
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, V), tgt_out.reshape(-1), ignore_index=PAD,
            label_smoothing=LABEL_SMOOTHING)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return step


def _TorchTransformer(cfg):
    import torch
    from torch import nn as tnn

    class TorchTransformer(tnn.Module):
        """models.Transformer's shape in PyTorch modules."""

        def __init__(self):
            super().__init__()
            E, V = cfg["d_model"], cfg["vocab"]
            self.src_embed = tnn.Embedding(V, E, padding_idx=PAD)
            self.tgt_embed = tnn.Embedding(V, E, padding_idx=PAD)
            self.register_buffer("pe", torch.tensor(
                nn.SinusoidalPositionalEncoding(E, cfg["length"]).pe.numpy()))
            self.dropout = tnn.Dropout(DROPOUT)
            with warnings.catch_warnings():  # "enable_nested_tensor is True, but ..."
                warnings.simplefilter("ignore")
                self.transformer = tnn.Transformer(
                    E, cfg["nhead"], cfg["layers"], cfg["layers"], cfg["ff"], DROPOUT,
                    batch_first=True, norm_first=True)
            self.generator = tnn.Linear(E, V)

        def embed(self, tokens, table):
            return self.dropout(table(tokens) * math.sqrt(table.embedding_dim)
                                + self.pe[:tokens.shape[1]])

        def forward(self, src, tgt):
            T = tgt.shape[1]
            causal = torch.ones(T, T, dtype=torch.bool,  # True: may not attend
                                device=tgt.device).triu(1)
            out = self.transformer(
                self.embed(src, self.src_embed), self.embed(tgt, self.tgt_embed),
                tgt_mask=causal, src_key_padding_mask=src == PAD,
                tgt_key_padding_mask=tgt == PAD, memory_key_padding_mask=src == PAD,
                tgt_is_causal=True)
            return self.generator(out)

    return TorchTransformer()


def attention_inputs(length, heads=8, head_dim=64, seed=0):
    """q, k, v float32 arrays (1, heads, length, head_dim) and an output gradient."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, heads, length, head_dim)).astype(np.float32)
            for _ in range(4)]


def minigrad_attention(length, seed=0, composite=False, device="cpu"):
    """Forward and backward of F.scaled_dot_product_attention: the tiled primitive, or the
    composite of Tensor ops (SDPBackend.MATH) when ``composite``."""
    q, k, v, g = (mg.tensor(a, requires_grad=i < 3, device=device)
                  for i, a in enumerate(attention_inputs(length, seed=seed)))
    backend = nn.attention.SDPBackend.MATH if composite else \
        nn.attention.SDPBackend.FLASH_ATTENTION

    def step():
        with nn.attention.sdpa_kernel(backend):
            F.scaled_dot_product_attention(q, k, v).backward(g)
        q.grad = k.grad = v.grad = None
    return step


def torch_attention(length, seed=0, device="cpu"):
    import torch

    q, k, v, g = (torch.tensor(a, requires_grad=i < 3, device=device)
                  for i, a in enumerate(attention_inputs(length, seed=seed)))

    def step():
        torch.nn.functional.scaled_dot_product_attention(q, k, v).backward(g)
        q.grad = k.grad = v.grad = None
    return step


def torch_attention_kernel(length, device="cpu"):
    """The name of the kernel torch.nn.functional.scaled_dot_product_attention picks for
    torch_attention's inputs (its SDPBackend: FLASH_ATTENTION, EFFICIENT_ATTENTION, ...), or
    "unknown" where this PyTorch does not say."""
    import torch

    q, k, v = (torch.tensor(a, requires_grad=True, device=device)
               for a in attention_inputs(length)[:3])
    try:  # not a public function: read it where it exists, as it stood in PyTorch 2.x
        return torch.nn.attention.SDPBackend(torch._fused_sdp_choice(q, k, v)).name
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return "unknown"
