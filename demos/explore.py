"""Write the interactive graph explorer page of one training step: open it in a browser.

    python -m minigrad.demos.explore [--model seq2seq|gpt] [--out runs/explore]

``--model seq2seq`` (the default) takes one step of the encoder-decoder transformer of
``python -m minigrad.demos.seq2seq`` (2+2 pre-LN layers, d_model 64, on a batch of the
reverse task): forward, label-smoothed cross-entropy, backward, gradient clipping and
Adam. ``--model gpt`` does the same for a 12-layer GPT on random tokens. The forward runs
under ``mg.detect_anomaly()``, so every node knows the line of code that created it.

The page (``<model>_step.html``, one file with nothing to download) opens from disk in any
modern browser. Start with the model's children; click a module to open it, a node to read
its rule, shapes, values, gradient and saved tensors; press "step" to walk the backward
pass in the engine's order, and pick "gradient norm" among the overlays.
"""
import os
import time

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.models import GPT, Transformer

from ._cli import (add_device_option, fail, make_parser, nonneg_int, parse_checked, positive_int,
                   print_written, summary, writing_to)
from .tasks import PAD, TASKS, Dataset

NAME = "explore"


def build_parser():
    p = make_parser(NAME, summary(__doc__))
    p.add_argument("--model", choices=("seq2seq", "gpt"), default="seq2seq",
                   help="the model whose training step is explored")
    p.add_argument("--layers", type=positive_int, default=None,
                   help="layers (default: 2 per stack for seq2seq, 12 for gpt)")
    p.add_argument("--batch-size", type=positive_int, default=16, help="sequences in the batch")
    p.add_argument("--depth", choices=("0", "1", "2", "3", "4"), default="1",
                   help="modules deeper than this start collapsed")
    p.add_argument("--seed", type=nonneg_int, default=0, help="seeds the data and the weights")
    p.add_argument("--out", default=os.path.join("runs", "explore"), help="output folder")
    add_device_option(p)
    return p


def seq2seq_step(args):
    """The model and loss of one seq2seq training step on the reverse task."""
    task = TASKS["reverse"]
    layers = args.layers or 2
    model = Transformer(len(task.vocab), len(task.vocab), d_model=64, nhead=4,
                        num_encoder_layers=layers, num_decoder_layers=layers,
                        dim_feedforward=256, dropout=0.1, norm_first=True, max_len=64,
                        pad_id=PAD).to(args.device)
    batch = Dataset(task, args.seed, eval_size=1).batch(0, args.batch_size)
    src, tgt_in, tgt_out = (mg.tensor(a, device=args.device) for a in batch)
    with mg.detect_anomaly():
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                               ignore_index=PAD, label_smoothing=0.1)
    return model, loss


def gpt_step(args):
    """The model and loss of one GPT training step on random tokens."""
    model = GPT(64, d_model=64, nhead=4, num_layers=args.layers or 12, dim_feedforward=256,
                max_len=64).to(args.device)
    idx = mg.randint(0, 64, (args.batch_size, 33), device=args.device)
    with mg.detect_anomaly():
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 64), idx[:, 1:].reshape(-1))
    return model, loss


def parse_args(argv=None):
    """The command line, ``argv`` (default: sys.argv), parsed and checked."""
    return parse_checked(build_parser(), argv)


def main(argv=None):
    args = parse_args(argv)
    mg.manual_seed(args.seed)
    model, loss = (gpt_step if args.model == "gpt" else seq2seq_step)(args)
    path = os.path.join(args.out, f"{args.model}_step.html")
    start = time.perf_counter()
    try:
        os.makedirs(args.out, exist_ok=True)
        with writing_to(NAME, args.out):  # (a file over ``ulimit -f``: an error, said so)
            page = mg.viz.explore(loss, path, model=model, depth=int(args.depth),
                                  title=f"{args.model} training step")
    except mg.viz.GraphvizNotFound as e:
        fail(NAME, str(e).splitlines()[0] + " (apt-get install graphviz)")
    except OSError as e:
        fail(NAME, f"--out: cannot write {path} ({e.strerror or e})")
    seconds = time.perf_counter() - start
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    mg.optim.Adam(model.parameters(), lr=1e-3).step()  # the rest of the training step
    c = page.counts
    print(f"loss {loss.item():.4f}; the graph has {c['ops']} ops and {c['items']} nodes in "
          f"all ({c['drawn']} drawn with repeated blocks folded, {c['groups']} module groups)")
    print_written(args.out, [(path, f"{c['bytes'] / 1024:.0f} KiB, written in {seconds:.1f} "
                              "s: in a browser, click a module to open it, a node for its "
                              "panel, 'step' to walk the backward pass")])
    print(f"open it: file://{os.path.abspath(path)}")
    return path


if __name__ == "__main__":
    main()
