"""Post-LN, pre-LN and manifold-constrained hyper-connections (mHC) on one deep, narrow model.

    python -m minigrad.demos.residuals [--steps 400] [--layers 16] [--d-model 64] [--lr 3e-3]
                              [--warmup 0.1] [--seed 0] [--out runs/residuals]
                              [--device cpu|cuda] [--no-progress] [--compile]

The same causal language model (``--layers`` transformer layers of width ``--d-model``, 4
heads, feed-forward 2 * d_model, rotary positions) is trained three times, once with each
residual rule of nn.TransformerEncoderLayer:

post-LN  x = norm(x + f(x))                    norm_first=False (the 2017 paper's)
pre-LN   x = x + f(norm(x)), a final norm      norm_first=True (GPT-2's)
mHC      pre-LN sublayers between 4 residual streams mixed by doubly stochastic matrices
         (residual="mhc", nn/hyper.py), a final norm

The task is next-symbol prediction on a seeded order-2 Markov chain over 16 symbols
(models.markov), whose entropy rate is the best loss any model can reach. Every variant
starts from the same seed (the same weights wherever the variants share a parameter), sees
the same batches in the same order, and trains with the same optimiser and schedule (AdamW,
linear warm-up over the first tenth of the steps then cosine decay, peak rate 3e-3, the total
gradient norm clipped at 1). mHC adds 48 parameters per layer, and takes two to three times as
long per step (its Sinkhorn projections). With every stream a copy of the input, H_pre
reading their mean, H_post writing 1 to each and H_res doubly stochastic, mHC starts out
computing what pre-LN computes, to rounding (the same loss and first gradients); it departs
from pre-LN only as its connection parameters learn. Worth a try: with ``--warmup 0`` or
``--lr 1e-2`` the post-LN stack stayed at a uniform guess's loss (log 16) in our runs, while
pre-LN trained as well as with the defaults.

The per-layer gradient norm is the norm of the gradient of all parameters of one layer
(``encoder.layers.i``) taken together, before clipping, recorded at a few steps.

Writes metrics.json (per variant: final train loss, held-out loss and accuracy, per-layer
gradient norms at the recorded steps, wall time) and residuals.png (loss curves; per-layer
gradient norms at the first step and at the last) to --out.
"""
import functools
import json
import math
import os
import time

import numpy as np

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.models.markov import MarkovChain

from ._cli import (TrainingStep, add_compile_option, add_run_options, check_out_dir, fraction,
                   make_out_dir, make_parser, naming, positive_float, positive_int, print_written,
                   require, summary, writing_to)

N_SYMBOLS, SEQ_LEN, BATCH = 16, 32, 32
HELD_OUT = 256                    # held-out sequences, scored along the way and at the end
NHEAD = 4
VARIANTS = {"post-LN": dict(norm_first=False, residual="add"),
            "pre-LN": dict(norm_first=True, residual="add"),
            "mHC": dict(norm_first=True, residual="mhc")}
# mHC starts out as exactly pre-LN (see the module docstring), so their curves meet: each
# variant has its own line style and marker (mHC's hollow, around pre-LN's), and in the
# per-layer panels its own small horizontal offset
STYLES = {"post-LN": dict(color="tab:red", marker="o", linestyle="-"),
          "pre-LN": dict(color="tab:blue", marker="s", linestyle="-"),
          "mHC": dict(color="tab:green", marker="D", linestyle="--", markerfacecolor="none",
                      markersize=7, markeredgewidth=1.5)}
LAYER_OFFSET = {"post-LN": -0.15, "pre-LN": 0.0, "mHC": 0.15}


class CausalLM(nn.Module):
    """A decoder-only language model over an nn.TransformerEncoder stack run causally (the
    stack carries mHC's residual streams from layer to layer).

    Args:
        vocab_size: the number of symbols.
        d_model, nhead, num_layers, dim_feedforward: sizes of the layers (GELU
            feed-forward, no dropout, rotary positions).
        norm_first, residual, n_streams: as nn.TransformerEncoderLayer; pre-LN stacks end
            with a LayerNorm.
    Shape:
        idx (B, T) integer -> logits (B, T, vocab_size)
    """

    def __init__(self, vocab_size, d_model=64, nhead=4, num_layers=16, dim_feedforward=128,
                 norm_first=True, residual="add", n_streams=4):
        super().__init__()
        self.d_model = d_model
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        rotary = nn.RotaryEmbedding(d_model // nhead)

        def layer():
            return nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout=0.0,
                                              activation="gelu", norm_first=norm_first,
                                              residual=residual, n_streams=n_streams,
                                              rotary=rotary)
        self.encoder = nn.TransformerEncoder(layer, num_layers,
                                             nn.LayerNorm(d_model) if norm_first else None)
        self.lm_head = nn.Linear(d_model, vocab_size)
        nn.init.normal_(self.tok_emb.weight, std=d_model ** -0.5)  # as models.GPT

    def forward(self, idx):
        x = self.tok_emb(idx) * math.sqrt(self.d_model)                      # (B, T, E)
        x = self.encoder(x, is_causal=True)                                  # (B, T, E)
        return self.lm_head(x)                                               # (B, T, V)


def layer_grad_norms(model):
    """The norm of each layer's gradient: all parameters of ``encoder.layers.i`` as one
    vector (a parameter without a gradient counts as zero). Returns a list of floats."""
    norms = []
    for layer in model.encoder.layers:
        square = sum(float((p.grad * p.grad).sum().item())
                     for p in layer.parameters() if p.grad is not None)
        norms.append(math.sqrt(square))
    return norms


def record_steps(steps, n=5):
    """The steps whose per-layer gradient norms are kept: the first, the last and a few
    evenly between."""
    return sorted({int(round(s)) for s in np.linspace(1, steps, n)})


def train_variant(name, chain, held_out, args):
    """Train one variant from the shared seed and data order; returns its metrics."""
    from tqdm import tqdm

    mg.manual_seed(args.seed)
    model = CausalLM(N_SYMBOLS, args.d_model, NHEAD, args.layers, 2 * args.d_model,
                     **VARIANTS[name]).to(args.device)
    rng = np.random.default_rng([args.seed, 1])  # the same batches for every variant
    optimizer = mg.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    warmup = max(1, round(args.warmup * args.steps))
    scheduler = mg.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup)
        * 0.5 * (1 + math.cos(math.pi * s / args.steps)))
    held = mg.tensor(held_out, device=args.device)

    def evaluate():  # the symbols with two before them: the entropy rate is their bound
        with nn.utils.evaluating(model):
            logits = model(held[:, :-1])[:, 1:]                              # (B, T - 1, V)
        target = held[:, 2:]
        loss = F.cross_entropy(logits.reshape(-1, N_SYMBOLS), target.reshape(-1)).item()
        accuracy = float((logits.argmax(-1).numpy() == held_out[:, 2:]).mean())
        return loss, accuracy

    def update(x, after_backward=None):
        """One step on the batch x (B, T + 1); returns the loss and the gradient's total norm
        before clipping. ``after_backward()`` looks at the gradients (an eager step only)."""
        logits = model(x[:, :-1])                                            # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, N_SYMBOLS), x[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        if after_backward is not None:
            after_backward()
        total_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        return loss, total_norm

    update = TrainingStep(update, args.compile, name)
    keep, eval_every = record_steps(args.steps), max(1, args.steps // 10)
    train_curve, held_curve, grad_norms, total_norms = [], [], {}, []

    def record_norms(step):
        grad_norms[step] = layer_grad_norms(model)

    started = time.perf_counter()
    with tqdm(total=args.steps, desc=name, disable=args.no_progress,
              dynamic_ncols=True) as bar:
        for step in range(1, args.steps + 1):
            x = mg.tensor(chain.sample(BATCH, SEQ_LEN + 1, rng), device=args.device)
            if step in keep:  # the per-layer norms, read between backward and clipping
                loss, total_norm = update.eager(x, functools.partial(record_norms, step))
            else:
                loss, total_norm = update(x)
            total_norms.append(total_norm.item())
            train_curve.append(loss.item())
            if step % eval_every == 0 or step == args.steps:
                held_curve.append((step, *evaluate()))
                bar.set_postfix(loss=f"{train_curve[-1]:.3f}", held=f"{held_curve[-1][1]:.3f}")
            bar.update()
    seconds = time.perf_counter() - started
    update.report()
    final = held_curve[-1]
    return {"heldout_loss": final[1], "heldout_accuracy": final[2],
            # the mean of the last tenth of the steps: one batch's loss is noisy
            "final_train_loss": float(np.mean(train_curve[-eval_every:])),
            "train_loss": train_curve, "heldout_curve": held_curve,
            "layer_grad_norms": {str(s): v for s, v in grad_norms.items()},
            "total_grad_norms": total_norms,
            "n_parameters": sum(p.numel() for p in model.parameters()),
            "wall_seconds": round(seconds, 1)}


def smooth(values, window):
    """A trailing moving average (the first values average what there is so far)."""
    sums = np.cumsum(np.insert(np.asarray(values, dtype=np.float64), 0, 0.0))
    idx = np.arange(1, len(values) + 1)
    return (sums[idx] - sums[np.maximum(idx - window, 0)]) / np.minimum(idx, window)


def plot(metrics, path):
    """Loss curves of the three variants, and their per-layer gradient norms at the first
    step and at the last (log scale)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.5), layout="constrained")
    loss_ax, first_ax, last_ax = fig.subplots(1, 3)
    steps, n_held = metrics["steps"], metrics["heldout_sequences"]
    for name in VARIANTS:
        m, style = metrics["variants"][name], dict(STYLES[name])
        style.setdefault("markersize", 4)
        train = m["train_loss"]
        loss_ax.plot(np.arange(1, len(train) + 1), smooth(train, max(1, steps // 50)),
                     color=style["color"], linestyle=style["linestyle"], alpha=0.4,
                     linewidth=1, label=f"{name}: training batches (smoothed)")
        held_steps, held_loss, _ = zip(*m["heldout_curve"])
        loss_ax.plot(held_steps, held_loss, **style,
                     label=f"{name}: held-out, final {m['heldout_loss']:.3f}")
        norms = m["layer_grad_norms"]
        for ax, step in ((first_ax, min(norms, key=int)), (last_ax, max(norms, key=int))):
            layers = np.arange(len(norms[step])) + LAYER_OFFSET[name]
            ax.plot(layers, norms[step], **style, label=name)
            ax.set_title(f"per-layer gradient norm, step {step}")
    rate = metrics["entropy_rate"]
    loss_ax.axhline(rate, color="k", linestyle=":", label=f"entropy rate {rate:.3f} (the best)")
    loss_ax.set(xlabel="step", ylabel="nats per symbol",
                title=f"{metrics['layers']} layers, d_model {metrics['d_model']}: loss "
                f"(held-out: {n_held} sequences)")
    loss_ax.set_ylim(rate - 0.1, math.log(N_SYMBOLS) + 0.15)  # up to a uniform guess's loss
    loss_ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    for ax in (first_ax, last_ax):
        ax.set(xlabel="layer (variants side by side)", ylabel="||grad of the layer's parameters||",
               yscale="log")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=8)
    first_ax.text(0.02, 0.02, "at step 1 mHC computes what pre-LN computes: the same norms",
                  transform=first_ax.transAxes, fontsize=7)
    with naming(path):
        fig.savefig(path, dpi=110)


def build_parser():
    parser = make_parser("residuals", summary(__doc__))
    parser.add_argument("--steps", type=positive_int, default=400,
                        help="training steps per variant")
    parser.add_argument("--layers", type=positive_int, default=16, help="transformer layers")
    parser.add_argument("--d-model", type=positive_int, default=64,
                        help=f"model width, a multiple of {2 * NHEAD} ({NHEAD} heads of an even "
                        "size, for the rotary positions)")
    parser.add_argument("--lr", type=positive_float, default=3e-3, help="peak learning rate")
    parser.add_argument("--warmup", type=fraction, default=0.1,
                        help="fraction of the steps of linear warm-up")
    add_compile_option(parser)
    add_run_options(parser, "runs/residuals")
    return parser


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.d_model % (2 * NHEAD):
        parser.error(f"argument --d-model: must be a multiple of {2 * NHEAD} ({NHEAD} heads of "
                     f"an even size, for the rotary positions), got {args.d_model}")
    check_out_dir(parser, args.out)
    return args


def main(argv=None):
    args = parse_args(argv)
    require("residuals", "tqdm", "matplotlib")
    make_out_dir("residuals", args.out)
    with writing_to("residuals", args.out):
        chain = MarkovChain.random(N_SYMBOLS, order=2, alpha=0.5, seed=args.seed)
        held_out = chain.sample(HELD_OUT, SEQ_LEN + 1, np.random.default_rng([args.seed, 2]))
        best = chain.transitions.argmax(-1)[held_out[:, :-2], held_out[:, 1:-1]]
        metrics = {"seed": args.seed, "steps": args.steps, "layers": args.layers,
                   "d_model": args.d_model, "lr": args.lr, "warmup": args.warmup,
                   "entropy_rate": chain.entropy_rate(), "heldout_sequences": HELD_OUT,
                   # the true chain on the same held-out symbols: its loss and argmax accuracy
                   "chain_loss_on_heldout": float(-chain.log_prob(held_out).mean()),
                   "chain_accuracy_on_heldout": float((best == held_out[:, 2:]).mean()),
                   "variants": {}}
        for name in VARIANTS:
            metrics["variants"][name] = train_variant(name, chain, held_out, args)
        ranked = sorted(VARIANTS, key=lambda n: metrics["variants"][n]["heldout_loss"])
        losses = [metrics["variants"][n]["heldout_loss"] for n in ranked]
        metrics["best"], metrics["margin"] = ranked[0], losses[1] - losses[0]  # over the next
        path = os.path.join(args.out, "metrics.json")
        with naming(path), open(path, "w") as f:
            json.dump(metrics, f, indent=2)
        plot(metrics, os.path.join(args.out, "residuals.png"))
        print(results_line(metrics))
        print_written(args.out, [
            ("metrics.json", "per variant: held-out loss and accuracy, the loss of every step, "
             "per-layer gradient norms, wall time"),
            ("residuals.png", "left, the loss curves (the lower the better, the entropy rate is "
             "the floor); middle and right, the gradient each layer gets: even across depth is "
             "healthy")])
        return metrics


def results_line(m):
    parts = [f"{name} {v['heldout_loss']:.4f} (acc {v['heldout_accuracy']:.1%}, "
             f"{v['wall_seconds']:.0f} s)" for name, v in m["variants"].items()]
    return (f"results: held-out loss after {m['steps']} steps (entropy rate "
            f"{m['entropy_rate']:.4f}, chain accuracy {m['chain_accuracy_on_heldout']:.1%}): "
            + ", ".join(parts) + f"; best: {m['best']} (by {m['margin']:.4f} nats)")


if __name__ == "__main__":
    main()
