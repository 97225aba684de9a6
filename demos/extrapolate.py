"""Which positional schemes extrapolate: train reverse on sequences of 1 to 16 symbols, then
decode sequences of 17 to 32, once per scheme.

    python -m minigrad.demos.extrapolate                        # every scheme, ~2 min each
    python -m minigrad.demos.extrapolate --positional alibi t5 --steps 1000
    python -m minigrad.demos.extrapolate --compile             # each update captured, replayed

Each scheme trains the seq2seq demo's default model (d_model 64, 4 heads, 2+2 pre-LN
layers) with the same seed, batches and schedule; only the positions differ:

    sinusoidal  the fixed table added to the embeddings (defined at every position)
    learned     a learned table added to the embeddings: its rows past the training
                lengths (17 and on) never receive a gradient and keep their random
                initial values; the table has 64 rows, so the longer inputs do run
    rope        rotary embeddings of the self-attention's queries and keys
    alibi       ALiBi's fixed linear biases of the self-attention scores
    t5          T5's learned relative-position buckets (exact up to distance 7 or 8, then
                logarithmic buckets up to 128)

The held-out sets are 500 sequences of 1 to 16 symbols (from the training split's held-out
part) and 500 of 17 to 32; the table gives exact match per band of lengths and the token
accuracy on 17 to 32, and is written to ``extrapolate.json`` and ``extrapolate.md`` (a band
that a small --eval-size leaves without a sequence shows as "-", null in the JSON).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import minigrad as mg
from minigrad.demos import seq2seq
from minigrad.demos.tasks import Dataset, Reverse
from minigrad.models.transformer import POSITIONAL

from ._cli import (TrainingStep, add_compile_option, add_run_options, check_out_dir, make_out_dir,
                   make_parser, naming, positive_int, print_written, summary, writing_to)

TRAIN_LEN, TEST_LEN = 16, 32
BANDS = ((1, 16), (17, 20), (21, 24), (25, 32))


def build_parser():
    p = make_parser("extrapolate", summary(__doc__))
    p.add_argument("--positional", nargs="+", choices=POSITIONAL, default=list(POSITIONAL),
                   help="the schemes to compare")
    p.add_argument("--steps", type=positive_int, default=2000, help="training steps per scheme")
    p.add_argument("--eval-size", type=positive_int, default=500,
                   help="held-out sequences per set")
    add_compile_option(p)
    add_run_options(p, "runs/extrapolate")
    return p


def long_examples(seed, n, task):
    """``n`` (source, target) pairs of TRAIN_LEN + 1 to TEST_LEN symbols."""
    rng = np.random.default_rng([seed, 4])
    out = []
    for _ in range(n):
        length = int(rng.integers(TRAIN_LEN + 1, TEST_LEN + 1))
        src = rng.integers(3, len(task.vocab), length).tolist()
        out.append((src, src[::-1]))
    return out


def model_args(args, positional):
    """The seq2seq demo's defaults, with ``positional``."""
    return argparse.Namespace(**{**seq2seq.DEFAULTS, "warmup": min(
        seq2seq.DEFAULTS["warmup"], args.steps // 10)}, positional=positional, steps=args.steps,
        device=args.device)


def run_scheme(args, positional, short, long):
    """Train one scheme; returns its row of the table."""
    task = Reverse(TRAIN_LEN)
    margs = model_args(args, positional)
    mg.manual_seed(args.seed)
    data = Dataset(task, args.seed, eval_size=1)
    model, optimizer, scheduler = seq2seq.build(margs, Reverse(TEST_LEN))
    update = TrainingStep(seq2seq.make_update(model, optimizer, scheduler, margs), args.compile,
                          positional)
    started = time.perf_counter()
    for step in range(args.steps):
        batch = [mg.tensor(a, device=args.device) for a in data.batch(step, margs.batch_size)]
        loss, _, _ = seq2seq.train_step(model, optimizer, scheduler, batch, margs, update=update)
        if not args.no_progress and (step + 1) % 100 == 0:
            print(f"  {positional}: step {step + 1}, loss {loss:.4f}", file=sys.stderr)
    seconds = time.perf_counter() - started
    update.report()
    row = dict(positional=positional, steps=args.steps, seed=args.seed,
               train_seconds=round(seconds, 1), final_loss=loss)
    for (lo, hi) in BANDS:  # a small --eval-size may leave a band empty: None, shown as "-"
        examples = [e for e in (short if hi <= TRAIN_LEN else long) if lo <= len(e[0]) <= hi]
        row[f"exact_{lo}_{hi}"] = seq2seq.evaluate(model, Reverse(TEST_LEN), examples,
                                                   args.device)[0] if examples else None
    row["token_accuracy_17_32"] = seq2seq.evaluate(model, Reverse(TEST_LEN), long,
                                                   args.device)[1]
    return row


def table(rows):
    """The results as a Markdown table."""
    head = ["positions"] + [f"exact {lo}-{hi}" for lo, hi in BANDS] + ["tokens 17-32",
                                                                       "train time"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["positional"]] + [_percent(r[f"exact_{lo}_{hi}"]) for lo, hi in BANDS]
        cells += [f"{r['token_accuracy_17_32']:.1%}", f"{r['train_seconds']:.0f} s"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _percent(value):
    return "-" if value is None else f"{value:.1%}"


def parse_args(argv=None):
    """The command line, checked (the output folder included)."""
    p = build_parser()
    args = p.parse_args(argv)
    twice = sorted({s for s in args.positional if args.positional.count(s) > 1})
    if twice:
        p.error(f"argument --positional: {', '.join(twice)} given twice")
    args.out = Path(args.out)
    check_out_dir(p, args.out)
    return args


def main(argv=None):
    args = parse_args(argv)
    make_out_dir("extrapolate", args.out)
    with writing_to("extrapolate", args.out):
        short = Dataset(Reverse(TRAIN_LEN), args.seed, args.eval_size).eval
        long = long_examples(args.seed, args.eval_size, Reverse(TEST_LEN))
        rows = []
        for positional in args.positional:
            rows.append(run_scheme(args, positional, short, long))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
            with naming(args.out / "extrapolate.json"):
                (args.out / "extrapolate.json").write_text(json.dumps(rows, indent=2) + "\n")
        text = table(rows)
        with naming(args.out / "extrapolate.md"):
            (args.out / "extrapolate.md").write_text(text + "\n")
        print(f"\ntrained on lengths 1-{TRAIN_LEN}, {args.steps} steps, seed {args.seed}:\n{text}")
        print_written(args.out, [
            ("extrapolate.md", "the table above: exact match on the training lengths, token "
                               "accuracy and exact match beyond them, per scheme"),
            ("extrapolate.json", "the same figures as data")])
        return rows


if __name__ == "__main__":
    main()
