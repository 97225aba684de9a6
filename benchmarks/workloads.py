"""The training-step workloads of ``benchmarks.run``, built the same way in minigrad and in
PyTorch: an encoder-decoder transformer (pre-LN, sinusoidal positions, dropout 0.1 unless the
config says otherwise, padded batches), label-smoothed cross-entropy, backward, Adam; and
attention alone, forward and backward. Each is built on a device, "cpu" or "cuda" (minigrad
through CuPy, PyTorch's CUDA tensors), from the same host arrays.

PyTorch's step comes two ways (``torch_steps``), both the same model and the same math: on
``nn.Transformer``, and written from ``nn.Linear``, ``nn.LayerNorm`` and
``F.scaled_dot_product_attention`` with one fused query-key-value projection, as nanoGPT
writes its blocks. The fastest of them is the baseline a user would reach for.

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

SIZES = {  # the training step at three model and batch sizes, and a wider and a deeper model
    "tiny": dict(d_model=64, nhead=4, layers=2, ff=256, vocab=32, batch=32, length=16),
    "small": dict(d_model=128, nhead=4, layers=2, ff=512, vocab=64, batch=32, length=32),
    "medium": dict(d_model=256, nhead=8, layers=3, ff=1024, vocab=1000, batch=32, length=64),
    "wide": dict(d_model=512, nhead=8, layers=2, ff=2048, vocab=1000, batch=16, length=32),
    "deep": dict(d_model=128, nhead=4, layers=6, ff=512, vocab=64, batch=32, length=32),
}
DROPOUT, LABEL_SMOOTHING, PAD = 0.1, 0.1, 0  # DROPOUT: where a config names none


def dropout_of(cfg):
    """The dropout probability of a step config (DROPOUT where it names none)."""
    return cfg.get("dropout", DROPOUT)


def with_dropout(cfg, p):
    """A copy of the step config ``cfg`` with dropout ``p`` (None: ``cfg`` as it is)."""
    return cfg if p is None else {**cfg, "dropout": p}


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
                        dim_feedforward=cfg["ff"], dropout=dropout_of(cfg), norm_first=True,
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
    return _torch_training_step(_TorchTransformer, cfg, seed, device)


def nanogpt_step(cfg, seed=0, device="cpu"):
    """The same step in PyTorch, the model written from nn.Linear, nn.LayerNorm and
    F.scaled_dot_product_attention (as nanoGPT does): same parameters, same math."""
    return _torch_training_step(_TorchNanoGPT, cfg, seed, device)


TORCH_STEPS = {"nn.Transformer": torch_step, "nanoGPT-style": nanogpt_step}


def torch_steps(cfg, seed=0, device="cpu"):
    """Every PyTorch version of the step, by name: {"nn.Transformer": step, "nanoGPT-style":
    step}, each a function running one training step at ``cfg``'s dropout."""
    return {name: make(cfg, seed, device) for name, make in TORCH_STEPS.items()}


def _torch_training_step(build, cfg, seed, device):
    """One training step of the model ``build(cfg)`` makes: forward, label-smoothed
    cross-entropy, backward, Adam. The step function carries the model as ``step.model``."""
    import torch

    torch.manual_seed(seed)
    model = build(cfg).to(device)
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
    step.model = model
    return step


def _torch_embeddings(cfg):
    """The PyTorch base class of both PyTorch models: the source and target embeddings,
    scaled and added to the sinusoidal table, then dropout; and the generator."""
    import torch
    from torch import nn as tnn

    class Embedded(tnn.Module):
        def __init__(self):
            super().__init__()
            E, V = cfg["d_model"], cfg["vocab"]
            self.src_embed = tnn.Embedding(V, E, padding_idx=PAD)
            self.tgt_embed = tnn.Embedding(V, E, padding_idx=PAD)
            self.register_buffer("pe", torch.tensor(
                nn.SinusoidalPositionalEncoding(E, cfg["length"]).pe.numpy()))
            self.dropout = tnn.Dropout(dropout_of(cfg))
            self.generator = tnn.Linear(E, V)

        def embed(self, tokens, table):
            return self.dropout(table(tokens) * math.sqrt(table.embedding_dim)
                                + self.pe[:tokens.shape[1]])
    return Embedded


def _TorchTransformer(cfg):
    import torch
    from torch import nn as tnn

    class TorchTransformer(_torch_embeddings(cfg)):
        """models.Transformer's shape in PyTorch modules."""

        def __init__(self):
            super().__init__()
            with warnings.catch_warnings():  # "enable_nested_tensor is True, but ..."
                warnings.simplefilter("ignore")
                self.transformer = tnn.Transformer(
                    cfg["d_model"], cfg["nhead"], cfg["layers"], cfg["layers"], cfg["ff"],
                    dropout_of(cfg), batch_first=True, norm_first=True)

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


def _TorchNanoGPT(cfg):
    """_TorchTransformer's model written out as nanoGPT writes its blocks: the same
    parameters (a self-attention's query, key and value projections fused into one
    nn.Linear, a cross-attention's key and value into another), the same pre-LN layers,
    dropout at the same places, each attention one F.scaled_dot_product_attention call."""
    import torch
    from torch import nn as tnn
    F = torch.nn.functional
    E, H, p = cfg["d_model"], cfg["nhead"], dropout_of(cfg)

    def attend(q, k, v, mask, training):
        """Multi-head attention of q (B, T, E) over k, v (B, S, E); mask (B, 1, T, S) or
        broadcastable, True where a query may attend."""
        B, T = q.shape[:2]

        def heads(x):                                             # (B, L, E) -> (B, H, L, D)
            return x.view(B, x.shape[1], H, E // H).transpose(1, 2)
        out = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), attn_mask=mask,
                                             dropout_p=p if training else 0.0)
        return out.transpose(1, 2).reshape(B, T, E)

    class SelfAttention(tnn.Module):
        def __init__(self):
            super().__init__()
            self.qkv, self.out_proj = tnn.Linear(E, 3 * E), tnn.Linear(E, E)

        def forward(self, x, mask):
            return self.out_proj(attend(*self.qkv(x).split(E, dim=2), mask, self.training))

    class CrossAttention(tnn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.kv, self.out_proj = (tnn.Linear(E, E), tnn.Linear(E, 2 * E),
                                              tnn.Linear(E, E))

        def forward(self, x, memory, mask):
            k, v = self.kv(memory).split(E, dim=2)
            return self.out_proj(attend(self.q(x), k, v, mask, self.training))

    class Layer(tnn.Module):
        """A pre-LN layer: x + dropout(sublayer(norm(x))) for each sublayer, the last the
        feed-forward linear2(dropout(relu(linear1(x))))."""

        def __init__(self, cross):
            super().__init__()
            self.self_attn = SelfAttention()
            self.multihead_attn = CrossAttention() if cross else None
            self.linear1, self.linear2 = tnn.Linear(E, cfg["ff"]), tnn.Linear(cfg["ff"], E)
            self.norms = tnn.ModuleList(tnn.LayerNorm(E) for _ in range(3 if cross else 2))
            self.dropout = tnn.Dropout(p)

        def forward(self, x, mask, memory=None, memory_mask=None):
            x = x + self.dropout(self.self_attn(self.norms[0](x), mask))
            if self.multihead_attn is not None:
                x = x + self.dropout(self.multihead_attn(self.norms[1](x), memory, memory_mask))
            h = self.linear1(self.norms[-1](x)).relu()
            return x + self.dropout(self.linear2(self.dropout(h)))

    class Stack(tnn.Module):
        def __init__(self, cross):
            super().__init__()
            self.layers = tnn.ModuleList(Layer(cross) for _ in range(cfg["layers"]))
            self.norm = tnn.LayerNorm(E)

        def forward(self, x, *masks):
            for layer in self.layers:
                x = layer(x, *masks)
            return self.norm(x)

    class NanoGPTTransformer(_torch_embeddings(cfg)):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = Stack(cross=False), Stack(cross=True)

        def forward(self, src, tgt):
            T = tgt.shape[1]
            src_keys = (src != PAD)[:, None, None, :]                          # (B, 1, 1, S)
            causal = torch.ones(T, T, dtype=torch.bool, device=tgt.device).tril()
            tgt_mask = (tgt != PAD)[:, None, None, :] & causal                 # (B, 1, T, T)
            memory = self.encoder(self.embed(src, self.src_embed), src_keys)
            x = self.decoder(self.embed(tgt, self.tgt_embed), tgt_mask, memory, src_keys)
            return self.generator(x)

    return NanoGPTTransformer()


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
