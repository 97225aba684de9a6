"""Train models.BERT on a Markov chain and compare its masked-token accuracy with the best
possible.

    python -m minigrad.demos.bert [--steps N] [--seed 0] [--out runs/bert] [--device cpu|cuda]
                         [--no-progress] [--compile]

The data are sequences from a seeded random first-order Markov chain over 16 symbols. BERT
is trained with its masked-language-model objective (15% of the tokens chosen, 80% of those
replaced by [MASK], 10% by a random symbol, 10% left as they are). Evaluation hides one
symbol (not the first or last) of each held-out sequence behind [MASK]: given its two
neighbours the hidden symbol is independent of the rest of the sequence, so no model can
beat the Bayes-optimal accuracy sum over (a, c) of max over x of pi(a) P(a, x) P(x, c),
which models.markov computes exactly. Target: within 1 percentage point of it.

Writes metrics.json (masked_accuracy, bayes_accuracy, ...) and bert_curve.png to --out.
"""
import json
import math
import os
import time

import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.models.bert import BERT, mask_tokens
from minigrad.models.markov import MarkovChain

from ._cli import (TrainingStep, add_compile_option, add_run_options, clipped_update, make_out_dir,
                   make_parser, naming, parse_checked, positive_int, print_written, require,
                   summary, writing_to)

PAD, MASK, N_SPECIAL = 0, 1, 2                    # symbol s is token N_SPECIAL + s
N_SYMBOLS, SEQ_LEN, BATCH = 16, 32, 64
CURVE_SIZE = 5000             # held-out masked tokens scored during training, for the curve


def make_eval_set(chain, rng, size):
    """``size`` held-out sequences with one interior symbol masked: (inputs, masked
    positions, answers, the Bayes rule's guesses argmax_x P(a, x) P(x, c))."""
    seqs = chain.sample(size, SEQ_LEN, rng)
    rows, where = np.arange(size), rng.integers(1, SEQ_LEN - 1, size=size)
    answers = seqs[rows, where]
    P = chain.transitions
    bayes_guess = (P[seqs[rows, where - 1]] * P[:, seqs[rows, where + 1]].T).argmax(-1)
    inputs = seqs + N_SPECIAL
    inputs[rows, where] = MASK
    return inputs, where, answers, bayes_guess


def masked_accuracy(model, inputs, where, answers, device, chunk=2000):
    """The fraction of the masked symbols the model's argmax gets right."""
    right = 0
    with nn.utils.evaluating(model):
        for i in range(0, len(inputs), chunk):
            logits = model(mg.tensor(inputs[i:i + chunk], device=device))    # (B, T, V)
            rows = np.arange(len(logits))
            picked = logits.numpy()[rows, where[i:i + chunk]]                # (B, V)
            right += (picked.argmax(-1) - N_SPECIAL == answers[i:i + chunk]).sum()
    return float(right / len(inputs))


def build_parser():
    parser = make_parser("bert", summary(__doc__))
    parser.add_argument("--steps", type=positive_int, default=3000, help="training steps")
    add_compile_option(parser)
    add_run_options(parser, "runs/bert")
    parser.add_argument("--eval-size", type=positive_int, default=50000,
                        help="held-out masked tokens of the final score")
    return parser


def parse_args(argv=None):
    return parse_checked(build_parser(), argv)


def main(argv=None):
    args = parse_args(argv)
    require("bert", "tqdm", "matplotlib")
    make_out_dir("bert", args.out)
    with writing_to("bert", args.out):
        mg.manual_seed(args.seed)
        chain = MarkovChain.random(N_SYMBOLS, order=1, alpha=0.5, seed=args.seed)
        rng, held_rng = np.random.default_rng([args.seed, 1]), np.random.default_rng([args.seed, 2])
        eval_set = make_eval_set(chain, held_rng, args.eval_size)
        inputs, where, answers, bayes_guess = eval_set
        bayes_rule = float((bayes_guess == answers).mean())
        bayes = chain.masked_accuracy()
        vocab = N_SPECIAL + N_SYMBOLS
        model = BERT(vocab, d_model=64, nhead=4, num_layers=2, dim_feedforward=256,
                     max_len=SEQ_LEN, pad_id=PAD, mask_id=MASK).to(args.device)
        started = time.perf_counter()
        subset = [a[:CURVE_SIZE] for a in eval_set]
        curve = train(model, chain, rng, args, vocab, subset[:3])
        accuracy = masked_accuracy(model, inputs, where, answers, args.device)
        metrics = {"masked_accuracy": accuracy, "bayes_accuracy": bayes,
                   "gap_points": 100 * (bayes - accuracy),
                   "bayes_rule_accuracy_on_eval": bayes_rule,
                   "eval_masked_tokens": args.eval_size,
                   "standard_error_points": 100 * math.sqrt(bayes * (1 - bayes) / args.eval_size),
                   "steps": args.steps, "seed": args.seed,
                   "train_seconds": round(time.perf_counter() - started, 1)}
        path = os.path.join(args.out, "metrics.json")
        with naming(path), open(path, "w") as f:
            json.dump(metrics, f, indent=2)
        subset_bayes_rule = float((subset[3] == subset[2]).mean())
        plot_curve(curve, bayes, subset_bayes_rule, len(subset[0]),
                   os.path.join(args.out, "bert_curve.png"))
        gap = metrics["gap_points"]
        print(f"results: masked accuracy {accuracy:.2%} vs Bayes-optimal {bayes:.2%} (gap "
              f"{gap:.2f} points, target <= 1: {'met' if gap <= 1 else 'NOT met'}; the Bayes rule "
              f"scores {bayes_rule:.2%} on the same {args.eval_size} held-out tokens)")
        print_written(args.out, [
            ("metrics.json", "masked accuracy against the Bayes-optimal one, the gap in points and "
             "its standard error"),
            ("bert_curve.png", f"masked accuracy by step on the first {len(subset[0])} held-out "
             "tokens, climbing to the Bayes-optimal line")])
        return metrics


def train(model, chain, rng, args, vocab, eval_set, eval_every=250):
    """AdamW with warm-up and cosine decay on fresh masked batches; returns
    [(step, masked accuracy on eval_set = (inputs, where, answers))]."""
    from tqdm import tqdm

    optimizer = mg.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    warmup = min(200, args.steps // 10 + 1)
    scheduler = mg.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / warmup) * 0.5
        * (1 + math.cos(math.pi * s / args.steps)))

    update = TrainingStep(clipped_update(model.loss, model, optimizer, scheduler),
                          args.compile, "bert")
    curve = []
    with tqdm(total=args.steps, desc="bert", disable=args.no_progress,
              dynamic_ncols=True) as bar:
        for step in range(1, args.steps + 1):
            seqs = mg.tensor(chain.sample(BATCH, SEQ_LEN, rng) + N_SPECIAL, device=args.device)
            # the masking draws on the host (NumPy): it stays outside the captured update
            loss = update(*mask_tokens(seqs, MASK, vocab, special_ids=(PAD, MASK)))
            if step % eval_every == 0 or step == args.steps:
                curve.append((step, masked_accuracy(model, *eval_set, args.device)))
                bar.set_postfix(loss=f"{loss.item():.3f}", acc=f"{curve[-1][1]:.4f}")
            bar.update()
    update.report()
    return curve


def plot_curve(curve, bayes, subset_bayes_rule, n, path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5), layout="constrained")
    ax = fig.subplots()
    ax.plot(*zip(*curve), label=f"BERT, masked accuracy on {n} held-out tokens")
    ax.axhline(subset_bayes_rule, color="tab:green", linestyle="-.",
               label=f"the Bayes rule on the same tokens {subset_bayes_rule:.4f}")
    ax.axhline(bayes, color="k", linestyle="--", label=f"Bayes-optimal {bayes:.4f}")
    ax.axhline(bayes - 0.01, color="grey", linestyle=":", label="target: 1 point below")
    ax.set(xlabel="step", ylabel="accuracy", title="One masked symbol, first-order chain")
    ax.legend()
    with naming(path):
        fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
