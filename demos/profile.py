"""Profile one training step of an encoder-decoder Transformer: where the time and the
memory go, op by op and module by module, forward and backward.

    python -m minigrad.demos.profile                      # the small step of the benchmarks
    python -m minigrad.demos.profile --attention math     # attention as the composite

The step (forward, label-smoothed cross-entropy, backward, Adam) runs once untimed, then
once under ``mg.profiler.profile()``. The program prints the top of the table by op and by
module, and writes to --out (default runs/profile):

    trace.json     Chrome trace events: open in https://ui.perfetto.dev or chrome://tracing;
                   forward ops and backward nodes on their own tracks, modules as spans
    memory.png     the bytes the graph holds for backward over the step, peak marked
    graph.svg      the backward graph of the step at module depth 2 (graph.dot without
                   Graphviz's dot program)

``--attention math`` runs attention as the composite of Tensor ops, which keeps every
head's (T, S) weights for backward; the default tiled kernel keeps them too while every
score fits in one tile (short sequences, as here), and beyond that only its output and one
number per query. Compare the peaks of the two memory timelines.
"""
import os

import numpy as np

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.models import Transformer
from minigrad.nn.attention import SDPBackend, sdpa_kernel
from minigrad.viz.graph import nbytes_text

from . import _pictures
from ._cli import (add_device_option, check_out_dir, make_out_dir, make_parser, naming, nonneg_int,
                   positive_int, require, writing_to)

NAME = "profile"
PAD = 0
VOCAB, LENGTH, TOP = 64, 32, 15  # the small step of the benchmarks; rows of each table
KERNELS = {"tiled": SDPBackend.FLASH_ATTENTION, "math": SDPBackend.MATH}


def build_parser():
    p = make_parser(NAME, "Profile one training step of a Transformer: a table by op and by "
                    "module, a Chrome trace, a memory timeline and the graph.")
    p.add_argument("--d-model", type=positive_int, default=128, help="model width")
    p.add_argument("--nhead", type=positive_int, default=4, help="attention heads")
    p.add_argument("--layers", type=positive_int, default=2,
                   help="encoder layers (and as many decoder layers)")
    p.add_argument("--ff", type=positive_int, default=512, help="feed-forward width")
    p.add_argument("--batch-size", type=positive_int, default=32,
                   help=f"sequences of {LENGTH} tokens per batch")
    p.add_argument("--attention", choices=sorted(KERNELS), default="tiled",
                   help="attention kernel: tiled (one op) or math (the composite)")
    p.add_argument("--seed", type=nonneg_int, default=0, help="seeds the weights and the batch")
    p.add_argument("--out", default=os.path.join("runs", NAME), help="output folder")
    add_device_option(p)
    return p


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.d_model % args.nhead:
        parser.error(f"argument --nhead: d_model {args.d_model} is not divisible by nhead "
                     f"{args.nhead}")
    check_out_dir(parser, args.out)
    return args


def training_step(args):
    """The model and a function running one training step on one fixed batch."""
    mg.manual_seed(args.seed)
    model = Transformer(VOCAB, VOCAB, d_model=args.d_model, nhead=args.nhead,
                        num_encoder_layers=args.layers, num_decoder_layers=args.layers,
                        dim_feedforward=args.ff, dropout=0.1, norm_first=True,
                        max_len=LENGTH, pad_id=PAD).to(args.device)
    optimizer = mg.optim.Adam(model.parameters(), lr=1e-4)
    rng = np.random.default_rng(args.seed)
    tokens = rng.integers(1, VOCAB, size=(2, args.batch_size, LENGTH + 1))
    src = mg.tensor(tokens[0, :, :-1], device=args.device)
    tgt_in = mg.tensor(tokens[1, :, :-1], device=args.device)
    tgt_out = mg.tensor(tokens[1, :, 1:], device=args.device)

    def step():
        logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1),
                               ignore_index=PAD, label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    return model, step


def memory_summary(prof):
    """One line: the peak of what the graph held for backward, when, and what was left."""
    peak, when = prof.peak_memory()
    backward = next((e.start_s for e in prof.events if e.kind == "node"), None)
    phase = "in the forward" if backward is None or when < backward else "in the backward"
    left = prof.memory[-1][1]
    return (f"saved for backward: peak {nbytes_text(peak)} at {when * 1e3:.1f} ms ({phase}); "
            f"{nbytes_text(left)} still held at the end of the step")


def main(argv=None):
    args = parse_args(argv)
    require(NAME, "graphviz")
    make_out_dir(NAME, args.out)
    with writing_to(NAME, args.out):
        model, step = training_step(args)
        with sdpa_kernel(KERNELS[args.attention]):
            step()  # untimed: the first call allocates what later ones reuse
            with mg.profiler.profile(model=model) as prof:
                loss = step()
        print(f"one training step: d_model {args.d_model}, {args.nhead} heads, {args.layers}+"
              f"{args.layers} layers, batch {args.batch_size} x {LENGTH}, {args.attention} "
              f"attention; loss {loss.item():.4f}\n")
        print(prof.table(group_by="op", top=TOP), "\n")
        print(prof.table(group_by="module", sort_by="total", top=TOP), "\n")
        print(memory_summary(prof), "\n")

        with naming(os.path.join(args.out, "trace.json")):
            paths = [prof.export_chrome_trace(os.path.join(args.out, "trace.json"))]
        try:
            prof.memory_timeline(os.path.join(args.out, "memory.png"),
                                 title=f"Saved for backward, {args.attention} attention")
            paths.append(os.path.join(args.out, "memory.png"))
        except ImportError as e:
            print(f"(no memory.png: {e})")
        graph = mg.viz.draw({"loss": loss}, model=model, depth=2, backward=True, profile=prof)
        paths += _pictures.save(graph, args.out, "graph")
        _pictures.report(args.out, paths, WRITTEN)
        return prof, paths


# What the demo writes, and what to look at in each
WRITTEN = {
    "trace": "every op and backward node on a time line, modules as nested spans: open it in "
             "Perfetto or chrome://tracing",
    "memory": "the bytes saved for backward through the step: up with the forward, down as "
              "backward frees them; the peak marked",
    "graph": "the backward graph at module depth 2, each node filled by its time (forward + "
             "backward) on a log scale: the expensive part at a glance",
}


if __name__ == "__main__":
    main()
