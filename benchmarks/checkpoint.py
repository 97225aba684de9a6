"""Activation checkpointing: a GPT training step plain and with every block checkpointed,
minigrad beside PyTorch (torch.utils.checkpoint per block, use_reentrant=False).

    python -m benchmarks.checkpoint [--layers 8] [--seq-len 256] [--batch 16]
                                    [--d-model 64] [--repeats 10] [--threads N]
                                    [--dropout 0.0] [--no-memory]

The step is the GPT demo's (demos/gpt.py: its Markov task's model, d_model 64, 4 heads,
feed-forward 256, a 16-symbol vocabulary, untied lm_head) at a size where the activations
dominate the memory: more layers and a longer sequence (8 layers of 256 positions, batch
16, by default), with learned positions (as GPT-2 and nanoGPT): the forward pass,
cross-entropy of the next token, backward and AdamW's step. minigrad's model is
models.GPT(checkpoint=False / True); PyTorch's is written as nanoGPT's (pre-LN blocks, one
fused query/key/value projection, F.scaled_dot_product_attention with is_causal), its
blocks run plain or through torch.utils.checkpoint.

Times: medians of calls run in alternating blocks in this process (see
timing.interleaved_all), and minigrad's over PyTorch's, plain and checkpointed. Memory:
the peak resident size two steps add (timing.peak_extra_memory, counted from before the
first: minigrad keeps the first step's freed host memory for the next, see
backend/host.py; gradients and AdamW's state count), each variant in a fresh process of
its own, as benchmarks.run measures the CPU.
Speed and memory are reported here, never asserted.
"""
import argparse

import numpy as np

import minigrad as mg
from minigrad.demos._cli import positive_int
from benchmarks import timing
from benchmarks.timing import (blas_threads, interleaved_all, machine_line, peak_extra_memory,
                               set_threads, torch)

PROG = "python -m benchmarks.checkpoint"
VOCAB, HEADS, FEEDFORWARD = 16, 4, 4   # the demo's vocabulary, heads, feed-forward / d_model
VARIANTS = (("minigrad", False), ("minigrad", True), ("torch", False), ("torch", True))


def tokens(cfg, seed=0):
    """A batch of token ids (B, T + 1): inputs are [:, :-1], next tokens [:, 1:]."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, VOCAB, (cfg["batch"], cfg["seq_len"] + 1))


def _training_step(lib, model, optimizer, x):
    """One step of next-token training on ``x`` (forward, cross-entropy, backward, the
    optimiser's step), the same code for both libraries."""
    def step():
        optimizer.zero_grad()
        logits = model(x[:, :-1])
        loss = lib.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                               x[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        return loss
    return step


def minigrad_step(cfg, checkpointed, seed=0):
    """A training step of models.GPT with checkpoint=checkpointed."""
    from minigrad.models import GPT
    mg.manual_seed(seed)
    model = GPT(VOCAB, d_model=cfg["d_model"], nhead=HEADS, num_layers=cfg["layers"],
                dim_feedforward=FEEDFORWARD * cfg["d_model"], dropout=cfg["dropout"],
                max_len=cfg["seq_len"], positional="learned", tie_embeddings=False,
                checkpoint=checkpointed)
    optimizer = mg.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    return _training_step(mg, model, optimizer, mg.tensor(tokens(cfg, seed)))


def torch_model(cfg, checkpointed):
    """The same GPT written as nanoGPT's model.py, each block through
    torch.utils.checkpoint (use_reentrant=False) when ``checkpointed``."""
    from torch import nn as tnn
    from torch.utils.checkpoint import checkpoint
    F = torch.nn.functional
    E, T, p = cfg["d_model"], cfg["seq_len"], cfg["dropout"]

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = tnn.LayerNorm(E), tnn.LayerNorm(E)
            self.qkv, self.proj = tnn.Linear(E, 3 * E), tnn.Linear(E, E)
            self.fc, self.fc_out = tnn.Linear(E, FEEDFORWARD * E), tnn.Linear(FEEDFORWARD * E, E)
            self.attn_dropout, self.resid_dropout = tnn.Dropout(p), tnn.Dropout(p)
            self.mlp_dropout, self.ff_dropout = tnn.Dropout(p), tnn.Dropout(p)

        def attention(self, x):
            B, L, _ = x.shape
            q, k, v = (t.view(B, L, HEADS, E // HEADS).transpose(1, 2)
                       for t in self.qkv(x).split(E, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p if self.training else 0.0,
                                               is_causal=True)
            return self.resid_dropout(self.proj(y.transpose(1, 2).reshape(B, L, E)))

        def forward(self, x):
            x = x + self.attention(self.ln_1(x))
            h = self.fc_out(self.mlp_dropout(F.gelu(self.fc(self.ln_2(x)))))
            return x + self.ff_dropout(h)

    class NanoGPT(tnn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = tnn.Embedding(VOCAB, E), tnn.Embedding(T, E)
            self.drop = tnn.Dropout(p)
            self.blocks = tnn.ModuleList([Block() for _ in range(cfg["layers"])])
            self.ln_f = tnn.LayerNorm(E)
            self.lm_head = tnn.Linear(E, VOCAB, bias=False)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1])
            x = self.drop(self.wte(idx) * E ** 0.5 + self.wpe(pos))
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=False) if checkpointed else block(x)
            return self.lm_head(self.ln_f(x))
    return NanoGPT()


def torch_step(cfg, checkpointed, seed=0):
    """A training step of the nanoGPT-style model, plain or with checkpointed blocks."""
    torch.manual_seed(seed)
    model = torch_model(cfg, checkpointed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    return _training_step(torch, model, optimizer, torch.tensor(tokens(cfg, seed)))


def make_step(cfg, lib, checkpointed):
    return (minigrad_step if lib == "minigrad" else torch_step)(cfg, checkpointed)


def memory_in_child(args, lib, checkpointed):
    """Peak extra bytes of two steps of one variant, measured in a fresh process."""
    argv = ["--child", lib, "checkpoint" if checkpointed else "plain"] + config_argv(args)
    return timing.memory_in_child("benchmarks.checkpoint", argv, lib)


def config_argv(args):
    return ["--layers", str(args.layers), "--seq-len", str(args.seq_len), "--batch",
            str(args.batch), "--d-model", str(args.d_model), "--dropout", str(args.dropout),
            "--threads", str(args.threads_used)]


def config_of(args):
    return {"layers": args.layers, "seq_len": args.seq_len, "batch": args.batch,
            "d_model": args.d_model, "dropout": args.dropout}


def parse(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=positive_int, default=8)
    parser.add_argument("--seq-len", type=positive_int, default=256)
    parser.add_argument("--batch", type=positive_int, default=16)
    parser.add_argument("--d-model", type=positive_int, default=64,
                        help="a multiple of the 4 heads (default 64)")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--repeats", type=positive_int, default=10)
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="threads for both libraries (default: PyTorch's default)")
    parser.add_argument("--no-memory", action="store_true", help="no peak memory")
    parser.add_argument("--child", nargs=2, metavar=("LIB", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.d_model % HEADS:
        parser.error(f"--d-model must be a multiple of {HEADS}, got {args.d_model}")
    return args


def mb(n):
    return f"{n / 2**20:8.1f} MB" if n is not None else "       -   "


def main(argv=None):
    args = parse(argv)
    args.threads_used = set_threads(args.threads)
    cfg = config_of(args)
    if args.child:
        lib, variant = args.child
        print(peak_extra_memory(make_step(cfg, lib, variant == "checkpoint")))
        return None
    print(machine_line())
    print(f"threads: torch intra-op {args.threads_used if torch else '-'}; "
          f"numpy BLAS {blas_threads()}")
    print(f"GPT training step (AdamW): {args.layers} layers, d_model {args.d_model}, "
          f"{HEADS} heads, feed-forward {FEEDFORWARD * args.d_model}, batch {args.batch} x "
          f"{args.seq_len} positions, dropout {args.dropout}")
    variants = [v for v in VARIANTS if v[0] == "minigrad" or torch is not None]
    steps = [make_step(cfg, lib, ckpt) for lib, ckpt in variants]
    times = interleaved_all(steps, args.repeats, block=2, warmup=1)
    memory = [None if args.no_memory else memory_in_child(args, lib, ckpt)
              for lib, ckpt in variants]
    results = {}
    for (lib, ckpt), t, m in zip(variants, times, memory):
        results[(lib, ckpt)] = (t, m)
    for lib in ("minigrad", "torch"):
        if (lib, False) not in results:
            continue
        (t0, m0), (t1, m1) = results[(lib, False)], results[(lib, True)]
        for ckpt, (t, m) in ((False, (t0, m0)), (True, (t1, m1))):
            label = f"{lib} {'checkpointed' if ckpt else 'plain'}"
            line = f"{label:<22} {t * 1e3:9.1f} ms/step   peak {mb(m)}"
            if ckpt:
                line += f"   | time {t1 / t0:4.2f}x"
                if m0 and m1 is not None:
                    line += f", memory {m1 / m0:4.2f}x of plain"
            print(line, flush=True)
    if ("torch", False) in results:
        ratios = [f"{'checkpointed' if ckpt else 'plain'} "
                  f"{results[('minigrad', ckpt)][0] / results[('torch', ckpt)][0]:4.2f}x"
                  for ckpt in (False, True)]
        print("time, minigrad / torch: " + ", ".join(ratios))
    return results


if __name__ == "__main__":
    main()
