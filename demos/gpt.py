"""Train models.GPT on two tasks whose best result is known in advance.

    python -m minigrad.demos.gpt [--task markov|recall|both] [--steps N] [--seed 0] [--out runs/gpt]
                        [--device cpu|cuda] [--no-progress] [--compile]

markov   sequences from a seeded random Markov chain of order 2 over 16 symbols. No model
         can beat the chain's entropy rate (computed exactly by models.markov) as its
         next-symbol loss; the held-out loss (nats per symbol, every symbol with two before
         it) is reported next to it. Target: within 3%.
recall   associative recall: 8 key-value pairs, then one of the keys; the answer is its
         value, so the model has to find the key earlier in the sequence and read the
         symbol after it. Training sequences ask all 8 keys in turn (each query followed by
         its answer; the loss is taken at every query); held-out ones ask one. Target: at
         least 99% accuracy on held-out examples.
         ``recall_attention.png`` has one heat map per layer and head: one row per held-out
         example, the attention of the answering position (the query key) over the
         sequence. The head that looks up the matching key shows as a column of bright
         cells in the orange boxes (the value right after the matching key, boxed red).

Writes metrics.json (heldout_loss, entropy_rate, recall_accuracy, ...), markov_curve.png
and recall_attention.png to --out.
"""
import json
import math
import os
import time

import numpy as np

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.models.gpt import GPT
from minigrad.models.markov import MarkovChain

from ._cli import (TrainingStep, add_compile_option, add_run_options, clipped_update, make_out_dir,
                   make_parser, naming, parse_checked, positive_int, print_written, require,
                   summary, writing_to)

N_SYMBOLS, SEQ_LEN = 16, 64                       # the Markov task
N_KEYS, N_VALUES, N_PAIRS = 16, 16, 8             # the recall task: keys, then values
DEFAULT_STEPS = {"markov": 2000, "recall": 2000}
RECALL_EXAMPLES = 8                               # rows of recall_attention.png


def markov_task(args):
    """Train on fresh chain samples; the held-out loss against the entropy rate."""
    chain = MarkovChain.random(N_SYMBOLS, order=2, alpha=0.5, seed=args.seed)
    rng, held_rng = np.random.default_rng([args.seed, 1]), np.random.default_rng([args.seed, 2])
    held_seqs = chain.sample(512, SEQ_LEN + 1, held_rng)                   # (512, T + 1)
    held_out = mg.tensor(held_seqs, device=args.device)
    model = GPT(N_SYMBOLS, d_model=64, nhead=4, num_layers=2, dim_feedforward=256,
                max_len=SEQ_LEN, positional="rope", tie_embeddings=False).to(args.device)

    def batch(step):
        return (mg.tensor(chain.sample(32, SEQ_LEN + 1, rng), device=args.device),)  # (B, T + 1)

    def loss_fn(x):
        return F.cross_entropy(model(x[:, :-1]).reshape(-1, N_SYMBOLS), x[:, 1:].reshape(-1))

    def evaluate():  # the symbols with two before them: the entropy rate is their bound
        with nn.utils.evaluating(model):
            logits = model(held_out[:, :-1])[:, 1:]                         # (B, T - 1, V)
            return F.cross_entropy(logits.reshape(-1, N_SYMBOLS),
                                   held_out[:, 2:].reshape(-1)).item()

    curve = train(model, batch, loss_fn, steps_of(args, "markov"), 3e-3, args, "markov",
                  evaluate)
    loss, rate = evaluate(), chain.entropy_rate()
    plot_curve(curve, rate, os.path.join(args.out, "markov_curve.png"))
    return {"heldout_loss": loss, "entropy_rate": rate, "loss_over_entropy_rate": loss / rate,
            # the true chain's own loss on the same held-out symbols (sampling noise)
            "chain_loss_on_heldout": float(-chain.log_prob(held_seqs).mean()),
            "markov_steps": steps_of(args, "markov")}


def steps_of(args, task):
    """The training steps of ``task``: --steps, or the task's default without it."""
    return DEFAULT_STEPS[task] if args.steps is None else args.steps


def recall_batch(n, rng, n_queries=1):
    """n sequences ``k1 v1 ... k8 v8 q1 a1 q2 a2 ...``: distinct keys, random values, then
    n_queries keys (distinct, in random order) each followed by its value.

    Returns:
        tokens (n, 2 * (N_PAIRS + n_queries)), the answers (n, n_queries) and the positions
        of the matching keys (n, n_queries). The answer to query j is the target of the
        position 2 * (N_PAIRS + j) that holds it; a model sees the pairs and that query.
    """
    keys = np.argsort(rng.random((n, N_KEYS)), axis=1)[:, :N_PAIRS]        # distinct keys
    values = N_KEYS + rng.integers(0, N_VALUES, size=(n, N_PAIRS))
    pick = np.argsort(rng.random((n, N_PAIRS)), axis=1)[:, :n_queries]    # (n, Q)
    queries = np.take_along_axis(keys, pick, axis=1)
    answers = np.take_along_axis(values, pick, axis=1)
    pairs = np.stack([keys, values], axis=2).reshape(n, 2 * N_PAIRS)
    asked = np.stack([queries, answers], axis=2).reshape(n, 2 * n_queries)
    return np.concatenate([pairs, asked], axis=1), answers, 2 * pick


def recall_task(args):
    """Train on fresh sequences of 8 queries each (the loss at every query); accuracy on
    held-out sequences of one query."""
    rng, held_rng = np.random.default_rng([args.seed, 3]), np.random.default_rng([args.seed, 4])
    held_tokens, held_answers, held_where = recall_batch(2000, held_rng)
    held_tokens = held_tokens[:, :-1]                          # the pairs and the query
    model = GPT(N_KEYS + N_VALUES, d_model=64, nhead=4, num_layers=2, dim_feedforward=256,
                max_len=4 * N_PAIRS, positional="rope", tie_embeddings=False).to(args.device)

    def batch(step):
        tokens, answers, _ = recall_batch(32, rng, N_PAIRS)
        return (mg.tensor(tokens[:, :-1], device=args.device),
                mg.tensor(answers.reshape(-1), device=args.device))

    def loss_fn(tokens, answers):
        logits = model(tokens)[:, 2 * N_PAIRS::2]                            # (B, Q, V)
        return F.cross_entropy(logits.reshape(-1, N_KEYS + N_VALUES), answers)

    def evaluate():
        with nn.utils.evaluating(model):
            logits = model(mg.tensor(held_tokens, device=args.device))[:, -1]
        return float((logits.argmax(-1).numpy() == held_answers[:, 0]).mean())

    train(model, batch, loss_fn, steps_of(args, "recall"), 1e-3, args, "recall", evaluate)
    accuracy = evaluate()
    maps = last_position_attention(model, mg.tensor(held_tokens, device=args.device))
    rows, where = np.arange(len(held_tokens)), held_where[:, 0]
    on_value = np.stack([m[rows, :, where + 1].mean(0) for m in maps])      # (layers, H)
    layer, head = np.unravel_index(on_value.argmax(), on_value.shape)
    plot_recall_attention([m[:RECALL_EXAMPLES] for m in maps], held_tokens[:RECALL_EXAMPLES],
                          where[:RECALL_EXAMPLES], os.path.join(args.out, "recall_attention.png"))
    return {"recall_accuracy": accuracy, "recall_steps": steps_of(args, "recall"),
            "recall_lookup_head": {"layer": int(layer), "head": int(head),
                                   "mean_weight_on_matching_value":
                                   float(on_value[layer, head])}}


def train(model, batch, loss_fn, steps, lr, args, desc, evaluate, eval_every=100,
          losses=None):
    """AdamW with a linear warm-up and cosine decay; returns [(step, evaluate())].

    ``batch(step)`` gives a step's input tensors and ``loss_fn(*tensors)`` their loss. The
    update (the loss, backward, clipping, AdamW's and the scheduler's step) is one function
    of those tensors, so --compile captures it whole. ``losses``, a list, receives each
    step's loss (read back outside the update)."""
    from tqdm import tqdm

    optimizer = mg.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    warmup = min(100, steps // 10 + 1)
    scheduler = mg.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup)
                                               * 0.5 * (1 + math.cos(math.pi * s / steps)))

    update = TrainingStep(clipped_update(loss_fn, model, optimizer, scheduler), args.compile,
                          desc)
    curve = []
    with tqdm(total=steps, desc=desc, disable=args.no_progress, dynamic_ncols=True) as bar:
        for step in range(1, steps + 1):
            loss = update(*batch(step))
            if losses is not None:
                losses.append(loss.item())
            if step % eval_every == 0 or step == steps:
                curve.append((step, evaluate()))
                bar.set_postfix(loss=f"{loss.item():.4f}", eval=f"{curve[-1][1]:.4f}")
            bar.update()
    update.report()
    return curve


def last_position_attention(model, tokens):
    """Per layer, the (B, H, S) attention weights of the last position, by replaying the
    model's pre-LN blocks and asking each self-attention for its per-head weights."""
    assert all(block.norm_first for block in model.blocks), "the replay is of pre-LN blocks"
    maps = []
    with nn.utils.evaluating(model):
        x = model.embed(tokens)                                              # (B, T, E)
        for block in model.blocks:
            h = block.norm1(x)
            _, weights = block.self_attn(h, h, h, is_causal=True, average_attn_weights=False)
            maps.append(weights[:, :, -1].numpy())                           # (B, H, S)
            x = block(x)
    return maps


def token_names(tokens):
    return [f"k{t}" if t < N_KEYS else f"v{t - N_KEYS}" for t in tokens]


def plot_curve(curve, rate, path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5), layout="constrained")
    ax = fig.subplots()
    ax.plot(*zip(*curve), label="GPT, held-out loss")
    ax.axhline(rate, color="k", linestyle="--", label=f"entropy rate {rate:.4f}")
    ax.axhline(rate * 1.03, color="grey", linestyle=":", label="target: entropy rate + 3%")
    ax.set(xlabel="step", ylabel="nats per symbol", title="Order-2 Markov chain, 16 symbols")
    ax.legend()
    with naming(path):
        fig.savefig(path, dpi=110)


def plot_recall_attention(maps, tokens, where, path):
    """One heat map per (layer, head), layers down and heads across: in each, one row per
    held-out example (labelled by its query and answer) and one column per position of the
    sequence, coloured by the answering position's attention; the matching key is outlined
    in red and its value in orange, so a lookup head shows as a column of bright orange
    boxes."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    n_layers, n_heads = len(maps), maps[0].shape[1]
    n, length = tokens.shape
    slots = [f"{'key' if p % 2 == 0 else 'value'} {p // 2 + 1}" for p in range(2 * N_PAIRS)]
    slots += ["query"] * (length - len(slots))
    rows = [" → ".join(token_names(row[[w, w + 1]])) for row, w in zip(tokens, where)]
    fig = Figure(figsize=(3.3 * n_heads + 1.2, 0.26 * n * n_layers + 1.4 * n_layers + 0.6),
                 layout="constrained")
    axes = fig.subplots(n_layers, n_heads, squeeze=False, sharex=True, sharey=True)
    for layer in range(n_layers):
        for h in range(n_heads):
            ax, weights = axes[layer, h], maps[layer][:, h]                 # (n, length)
            image = ax.imshow(weights, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto",
                              interpolation="nearest")
            for i, w in enumerate(where):
                for col, colour in ((w, "tab:red"), (w + 1, "tab:orange")):
                    ax.add_patch(Rectangle((col - 0.5, i - 0.5), 1, 1, fill=False,
                                           edgecolor=colour, linewidth=2))
            on_value = weights[np.arange(n), where + 1].mean()
            ax.set_title(f"layer {layer}, head {h}\nmean weight on the value: {on_value:.2f}",
                         fontsize=9)
            ax.set_xticks(range(length), slots, fontsize=7, rotation=90)
            ax.set_yticks(range(n), rows, fontsize=7)
            if h == 0:
                ax.set_ylabel(f"layer {layer}: example (query → answer)", fontsize=8)
            if layer == n_layers - 1:
                ax.set_xlabel("position attended to (the 8 pairs, then the query)", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight of the answering position")
    fig.suptitle("Associative recall: where the answering position looks (red box: the "
                 "matching key, orange box: its value)", fontsize=10)
    with naming(path):
        fig.savefig(path, dpi=110)


def build_parser():
    parser = make_parser("gpt", summary(__doc__))
    parser.add_argument("--task", default="both", choices=["markov", "recall", "both"],
                        help="which task to train")
    parser.add_argument("--steps", type=positive_int, help="training steps of each task "
                        "(default: " + ", ".join(f"{n} for {t}" for t, n in DEFAULT_STEPS.items())
                        + ")")
    add_compile_option(parser)
    add_run_options(parser, "runs/gpt")
    return parser


def parse_args(argv=None):
    return parse_checked(build_parser(), argv)


def main(argv=None):
    args = parse_args(argv)
    require("gpt", "tqdm", "matplotlib")
    make_out_dir("gpt", args.out)
    with writing_to("gpt", args.out):
        mg.manual_seed(args.seed)
        metrics, started = {"seed": args.seed}, time.perf_counter()
        if args.task in ("markov", "both"):
            metrics.update(markov_task(args))
        if args.task in ("recall", "both"):
            metrics.update(recall_task(args))
        metrics["train_seconds"] = round(time.perf_counter() - started, 1)
        path = os.path.join(args.out, "metrics.json")
        with naming(path), open(path, "w") as f:
            json.dump(metrics, f, indent=2)
        print(results_line(metrics))
        print_written(args.out, written_files(args.task))
        return metrics


def written_files(task):
    """What the run wrote, with what to look at in each."""
    files = [("metrics.json", "the numbers above, and the lookup head (recall_lookup_head)")]
    if task in ("markov", "both"):
        files.append(("markov_curve.png", "held-out loss by step, down to the entropy rate "
                      "(the best any model can do)"))
    if task in ("recall", "both"):
        files.append(("recall_attention.png", "where the answering position looks: a lookup "
                      "head is bright in the orange boxes (the value after the matching key)"))
    return files


def results_line(m):
    parts = []
    if "heldout_loss" in m:
        gap = m["loss_over_entropy_rate"] - 1
        parts.append(f"held-out loss {m['heldout_loss']:.4f} nats vs entropy rate "
                     f"{m['entropy_rate']:.4f} ({gap:+.1%}; target <= +3%: "
                     f"{'met' if gap <= 0.03 else 'NOT met'})")
    if "recall_accuracy" in m:
        acc = m["recall_accuracy"]
        parts.append(f"recall accuracy {acc:.1%} (target >= 99%: "
                     f"{'met' if acc >= 0.99 else 'NOT met'})")
    return "results: " + "; ".join(parts)


if __name__ == "__main__":
    main()
