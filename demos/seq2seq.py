"""Train an encoder-decoder Transformer, built on minigrad, on a toy sequence task.

    python -m minigrad.demos.seq2seq --task reverse            # about 2 minutes on 2 CPU cores
    python -m minigrad.demos.seq2seq --task add --device cuda  # the same program on a GPU
    python -m minigrad.demos.seq2seq --task reverse --resume   # continue runs/reverse after Ctrl-C
    python -m minigrad.demos.seq2seq --task reverse --compile  # the step captured, then replayed
    python -m minigrad.demos.seq2seq --data pairs.tsv          # your pairs: source<TAB>target
    python -m minigrad.demos.translate --ckpt runs/pairs "a sentence"   # use the model

Tasks (demos/tasks.py): copy, reverse and sort sequences of 1 to 16 symbols, add two
numbers of up to 4 digits, or dates: "the 3rd of March, 1999", "03/03/99", "3 mars 1999"
and other forms in four languages -> "1999-03-03". Dates and --data are text: a tokenizer
(byte-level BPE by default) is trained on the training split and saved with the
checkpoint (and as tokenizer.json), batches are bucketed by length, and the evaluation
adds corpus BLEU and chrF (sacrebleu) to exact match and token accuracy.

The progress bar shows the training loss, the teacher-forced token accuracy and target
tokens per second; every --eval-every steps the model decodes the held-out set with
``generate`` (greedy, from BOS, never teacher-forced) and is scored by exact match. The
output folder (--out, default runs/<task>) receives:

    metrics.json            task, steps, train_seconds, eval_exact_match, eval_token_accuracy
                            (and eval_bleu, eval_chrf for text)
    dates.tsv, tokenizer.json   the generated dates pairs; the tokenizer (text tasks)
    curves.png              training loss and accuracy, held-out accuracy
    attention.png           every layer and head's attention for one held-out example
    graph.svg               one training step's computation graph, collapsed by module
    checkpoint.safetensors  model, optimiser, scheduler, step and random state (--resume)

Every batch is a pure function of (seed, step) and the checkpoint holds the whole training
state, so a run stopped (Ctrl-C) and resumed ends with the same weights, bit for bit, as
one that never stopped.
"""
import contextlib
import json
import math
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.demos.checkpoint import (CheckpointMismatch, load_checkpoint, read_training_meta,
                                       save_checkpoint)
from minigrad.demos.textdata import TOKENIZERS, load_text_data
from minigrad.demos.tasks import BOS, EOS, PAD, TASKS, Dataset, TextTask, collate
from minigrad.models import Transformer
from minigrad.models.transformer import POSITIONAL
from minigrad.text import bleu, chrf

from ._cli import (TrainingStep, add_compile_option, add_run_options, check_out_dir, fail,
                   make_out_dir, make_parser, naming, nonneg_float, nonneg_int, positive_float,
                   positive_int, print_written, probability, require, summary, writing_to)

# What the defaults were tuned for: each task reaches its target on 2 CPU cores.
DEFAULTS = dict(d_model=64, nhead=4, layers=2, ff=256, dropout=0.0, batch_size=64, lr=2e-3,
                warmup=200, schedule="cosine", label_smoothing=0.0, clip=1.0)
TASK_DEFAULTS = {"copy": dict(steps=1500), "reverse": dict(steps=2000),
                 "sort": dict(steps=3000), "add": dict(steps=6000),
                 "dates": dict(steps=3000, vocab_size=400),
                 "data": dict(steps=5000, vocab_size=1000)}
TEXT_TASKS = ("dates", "data")
MODEL_ARGS = ("d_model", "nhead", "layers", "ff", "positional", "max_len")
CHECKPOINT = "checkpoint.safetensors"
# what --resume refuses to change (a change of size shows as weights that do not fit)
MUST_MATCH = ("nhead", "positional", "schedule")
RUN_RECORD = dict(step=int, loss=list, accuracy=list, eval=list, train_seconds=(int, float))


def build_parser():
    p = make_parser("seq2seq", summary(__doc__))
    p.add_argument("--task", choices=sorted(TASKS) + ["dates"],
                   help="the task to learn (default reverse; with --data, your file)")
    p.add_argument("--data", metavar="PAIRS.tsv", help="train on your own pairs: a UTF-8 file "
                   "with one 'source<TAB>target' pair a line, about 1 source in 10 held out "
                   "(default: none, a --task)")
    p.add_argument("--tokenizer", choices=sorted(TOKENIZERS), default="bpe",
                   help="text tasks: byte-level BPE or characters, trained on the training "
                   "split")
    p.add_argument("--vocab-size", type=positive_int, help="text tasks: the tokenizer's "
                   "vocabulary, special tokens included (default: dates 400, --data 1000)")
    p.add_argument("--tokenizer-file", metavar="JSON", help="text tasks: use this saved "
                   "tokenizer instead of training one (default: none, train one)")
    p.add_argument("--max-src-len", type=positive_int, default=64,
                   help="text tasks: longer sources (in tokens) are left out")
    p.add_argument("--max-tgt-len", type=positive_int, default=64,
                   help="text tasks: longer targets (in tokens) are left out")
    p.add_argument("--pairs", type=positive_int, default=50000,
                   help="dates: how many pairs to generate")
    p.add_argument("--steps", type=positive_int, help="training steps (default: per task, "
                   + ", ".join(f"{t} {d['steps']}" for t, d in TASK_DEFAULTS.items()) + ")")
    p.add_argument("--batch-size", type=positive_int,
                   help=f"examples per step (default {DEFAULTS['batch_size']})")
    p.add_argument("--d-model", type=positive_int,
                   help=f"model width, a multiple of --nhead (default {DEFAULTS['d_model']})")
    p.add_argument("--nhead", type=positive_int,
                   help=f"attention heads (default {DEFAULTS['nhead']})")
    p.add_argument("--layers", type=positive_int, help="encoder and decoder layers each "
                   f"(default {DEFAULTS['layers']})")
    p.add_argument("--ff", type=positive_int,
                   help=f"feed-forward width (default {DEFAULTS['ff']})")
    p.add_argument("--dropout", type=probability,
                   help=f"dropout rate, in [0, 1) (default {DEFAULTS['dropout']})")
    p.add_argument("--positional", default="sinusoidal", choices=POSITIONAL,
                   help="positions: sinusoidal or learned tables added to the embeddings, "
                   "rotary (rope, needs an even head size), or biases of the self-attention "
                   "scores: ALiBi's fixed slopes or T5's learned relative-position buckets")
    p.add_argument("--lr", type=positive_float, help="peak learning rate of Adam under every "
                   f"schedule (default {DEFAULTS['lr']})")
    p.add_argument("--schedule", choices=["cosine", "noam", "constant"],
                   help="linear warm-up, then cosine decay to 0 / inverse square root / "
                   f"constant (default {DEFAULTS['schedule']})")
    p.add_argument("--warmup", type=nonneg_int, help="warm-up steps (default "
                   f"{DEFAULTS['warmup']}, at most a tenth of --steps)")
    p.add_argument("--label-smoothing", type=probability,
                   help="label smoothing of the loss, in [0, 1) "
                   f"(default {DEFAULTS['label_smoothing']})")
    p.add_argument("--clip", type=nonneg_float, help="gradient norm clipping, 0 for none "
                   f"(default {DEFAULTS['clip']})")
    add_compile_option(p)
    add_run_options(p, None, out_help="output folder (default runs/<task>)",
                    seed_help="seeds the data, the weights, dropout")
    p.add_argument("--resume", nargs="?", const=True, metavar="CHECKPOINT",
                   help=f"continue from CHECKPOINT (default: the output folder's {CHECKPOINT})")
    p.add_argument("--eval-every", type=positive_int, default=500,
                   help="steps between evaluations and checkpoints")
    p.add_argument("--eval-size", type=positive_int, default=1000, help="held-out examples")
    p.add_argument("--beam", type=positive_int, default=1, help="beam size of the evaluation")
    p.add_argument("--examples", type=nonneg_int, default=5, help="decoded examples to print")
    return p


def parse_args(argv=None):
    """The command line, ``argv`` (default: sys.argv), with the defaults filled in and
    checked: a bad value stops the program with one line."""
    p = build_parser()
    args = p.parse_args(argv)
    if args.data is not None and args.task is not None:
        p.error(f"argument --data: give --data or --task, not both (--task {args.task})")
    args.task = "data" if args.data is not None else args.task or "reverse"
    for option in ("data", "tokenizer_file"):
        path = getattr(args, option)
        if path is not None and not Path(path).is_file():
            p.error(f"argument --{option.replace('_', '-')}: no file at {path}")
    for key, value in {**DEFAULTS, **TASK_DEFAULTS[args.task]}.items():
        if getattr(args, key) is None:
            setattr(args, key, value if key != "warmup" else None)
    if args.warmup is None:  # the default warm-up, shortened for short runs
        args.warmup = min(DEFAULTS["warmup"], args.steps // 10)
    if args.d_model % args.nhead:
        p.error(f"--d-model ({args.d_model}) must be a multiple of --nhead ({args.nhead})")
    if args.positional == "rope" and args.d_model // args.nhead % 2:
        p.error(f"--positional rope needs an even head size, but --d-model / --nhead is "
                f"{args.d_model} / {args.nhead} = {args.d_model // args.nhead}")
    if args.schedule != "constant" and args.warmup >= args.steps:
        p.error(f"--warmup ({args.warmup}) must be smaller than --steps ({args.steps})")
    if args.task not in TEXT_TASKS:
        for option in ("vocab_size", "tokenizer_file"):
            if getattr(args, option) is not None:
                p.error(f"argument --{option.replace('_', '-')}: only for --task dates or "
                        f"--data, not --task {args.task}")
    name = Path(args.data).stem if args.data is not None else args.task
    args.out = Path(args.out or Path("runs") / name)
    check_out_dir(p, args.out)
    if args.resume is not None and not checkpoint_path(args).is_file():
        p.error(f"argument --resume: no checkpoint at {checkpoint_path(args)}")
    return args


def checkpoint_path(args):
    """The checkpoint --resume names: its value, or the output folder's."""
    return args.out / CHECKPOINT if args.resume is True else Path(args.resume)


def build_model(args, vocab):
    """The Transformer that ``args`` (or a checkpoint's saved arguments) describe."""
    return Transformer(vocab, vocab, d_model=args.d_model, nhead=args.nhead,
                       num_encoder_layers=args.layers, num_decoder_layers=args.layers,
                       dim_feedforward=args.ff, dropout=args.dropout, norm_first=True,
                       positional=args.positional, max_len=args.max_len,
                       pad_id=PAD).to(args.device)


def build(args, task):
    """The model, its Adam optimiser and the learning-rate scheduler (seeded by the caller)."""
    args.max_len = max(64, task.max_src_len, task.max_tgt_len + 2)
    model = build_model(args, len(task.vocab))
    optimizer = mg.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    sched = mg.optim.lr_scheduler
    if args.schedule == "cosine":
        scheduler = sched.WarmupCosineLR(optimizer, args.warmup, max(args.steps, args.warmup + 1))
    elif args.schedule == "noam":  # the factor makes the peak (at the warm-up's end) args.lr
        scheduler = sched.NoamLR(optimizer, args.d_model, max(args.warmup, 1),
                                 factor=math.sqrt(args.d_model * max(args.warmup, 1)))
    else:
        warmup = max(args.warmup, 1)
        scheduler = sched.LambdaLR(optimizer, lambda t: min(1.0, (t + 1) / warmup))
    return model, optimizer, scheduler


def make_update(model, optimizer, scheduler, args):
    """The update on one batch as a function of tensors, ``update(src, tgt_in, tgt_out)``:
    forward, backward, clipping, the optimiser's and the scheduler's step. It returns tensors
    (the loss, the number of target tokens predicted right teacher-forced, the number of
    target tokens) and reads no value back, so ``mg.compile`` can capture it whole."""
    def update(src, tgt_in, tgt_out, graph_dir=None):
        logits = model(src, tgt_in)                                          # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                               ignore_index=PAD, label_smoothing=args.label_smoothing)
        if graph_dir is not None:
            write_graph(loss, model, graph_dir)
        optimizer.zero_grad()
        loss.backward()
        if args.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()
        scheduler.step()
        real = tgt_out != PAD
        right = (logits.argmax(-1) == tgt_out) & real
        return loss, right.sum(), real.sum()
    return update


def train_step(model, optimizer, scheduler, batch, args, graph_dir=None, update=None):
    """One update on ``batch`` (src, tgt_in, tgt_out Tensors) by ``update`` (``make_update``'s
    function in a ``TrainingStep``, compiled or not; default an eager one); returns the loss,
    the number of target tokens predicted right (teacher-forced) and the number of target
    tokens, read back here, outside the update. With ``graph_dir`` the step runs eagerly
    (``update.eager``) and its graph is drawn (a replayed step builds no graph)."""
    if update is None:
        update = TrainingStep(make_update(model, optimizer, scheduler, args))
    if graph_dir is not None:
        loss, right, real = update.eager(*batch, graph_dir=graph_dir)
    else:
        loss, right, real = update(*batch)
    return loss.item(), int(right.item()), int(real.item())


@contextlib.contextmanager
def _interrupt_deferred():
    """Hold a first SIGINT (Ctrl-C) that arrives inside the block until the block is done,
    so that a step is never left half applied; a second one interrupts at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    previous = signal.getsignal(signal.SIGINT)

    def handler(*sig):
        if received and callable(previous):
            previous(*sig)  # the default handler raises KeyboardInterrupt
        received.append(sig)
    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received and callable(previous):
        previous(*received[0])


def write_graph(loss, model, out_dir):
    """graph.svg: the computation graph of one training step, collapsed by module
    (minigrad.viz; needs Graphviz). A failure is reported and never stops training."""
    try:
        from minigrad import viz
        graph = viz.draw(loss, model=model, depth=2)
        return viz.render(graph, Path(out_dir) / "graph", format="svg")
    except Exception as e:  # noqa: BLE001 -- a missing picture must not cost the run
        from tqdm import tqdm
        tqdm.write(f"note: graph.svg not written ({type(e).__name__}: {e})", file=sys.stderr)


def evaluate(model, task, examples, device, beam=1, batch_size=500):
    """Decode the sources of ``examples`` with ``generate`` (from BOS, never teacher
    forced); returns (exact-match fraction, token-accuracy fraction, decoded id lists,
    scores): scores holds corpus BLEU and chrF (0 to 100, sacrebleu) of the decoded texts
    for a text task, and is empty otherwise.

    Token accuracy counts the reference tokens, EOS included, that the output has at the
    same position."""
    decoded, exact, right, total = [], 0, 0, 0
    for i in range(0, len(examples), batch_size):
        chunk = examples[i:i + batch_size]
        src = mg.tensor(collate(chunk)[0], device=device)
        out = model.generate(src, task.max_tgt_len + 1, BOS, EOS, beam_size=beam).numpy()
        for row, (_, tgt) in zip(out, chunk):
            row = row.tolist()
            pred = row[:row.index(EOS)] if EOS in row else [t for t in row if t != PAD]
            ref = list(tgt) + [EOS]
            exact += pred == list(tgt)
            right += sum(a == b for a, b in zip(row, ref))
            total += len(ref)
            decoded.append(pred)
    return exact / len(examples), right / total, decoded, text_scores(task, examples, decoded)


def text_scores(task, examples, decoded):
    """{"bleu", "chrf"} of the decoded texts against the references, for a text task."""
    if not isinstance(task, TextTask):
        return {}
    hyps = [task.text(pred) for pred in decoded]
    refs = [task.text(tgt) for _, tgt in examples]
    return {"bleu": bleu(hyps, refs), "chrf": chrf(hyps, refs)}


def describe_eval(last_eval):
    """The evaluation in words: exact match, token accuracy (, BLEU, chrF)."""
    exact, token_acc, _, scores = last_eval
    text = f"held-out exact match {exact:.1%}, token accuracy {token_acc:.1%}"
    return text + "".join(f", {k.replace('chrf', 'chrF').upper() if k == 'bleu' else 'chrF'} "
                          f"{v:.1f}" for k, v in scores.items())


def train(args, task, data, model, optimizer, scheduler, run):
    """Train from run["step"] to args.steps, evaluating and checkpointing every
    args.eval_every steps and at the end; returns the last evaluation (or None).
    Ctrl-C ends the current step, saves a checkpoint and exits with status 130."""
    from tqdm import tqdm

    bar = tqdm(total=args.steps, initial=run["step"], disable=args.no_progress,
               desc=args.task, unit="step", dynamic_ncols=True, mininterval=0.5)
    draw_graph = not (args.out / "graph.svg").exists()
    update = TrainingStep(make_update(model, optimizer, scheduler, args), args.compile)
    tokens = seconds = 0.0
    started = time.perf_counter()
    last_eval, stepping = None, False
    try:
        while run["step"] < args.steps:
            step_started = time.perf_counter()
            with _interrupt_deferred():
                stepping = True
                batch = [mg.tensor(a, device=args.device)
                         for a in data.batch(run["step"], args.batch_size)]
                loss, right, total = train_step(model, optimizer, scheduler, batch, args,
                                                args.out if draw_graph else None, update)
                run["step"] += 1
                run["loss"].append(float(f"{loss:.5g}"))
                run["accuracy"].append(float(f"{right / total:.5g}"))
                stepping = draw_graph = False
            tokens = 0.9 * tokens + total
            seconds = 0.9 * seconds + time.perf_counter() - step_started
            if run["step"] % 10 == 0 or run["step"] == args.steps:
                held = {} if last_eval is None else {k: f"{v:.1f}"
                                                     for k, v in last_eval[3].items()}
                bar.set_postfix(loss=f"{loss:.3f}", acc=f"{right / total:.1%}",
                                tok_s=f"{tokens / seconds:,.0f}", **held, refresh=False)
            bar.update(1)
            if run["step"] % args.eval_every == 0 or run["step"] == args.steps:
                last_eval = evaluate(model, task, data.eval, args.device, args.beam)
                run["eval"].append([run["step"], last_eval[0], last_eval[1],
                                    *last_eval[3].values()])
                bar.write(f"step {run['step']}: {describe_eval(last_eval)}")
                _checkpoint(args, model, optimizer, scheduler, run, started)
                started = time.perf_counter()
    except KeyboardInterrupt:
        bar.close()
        if stepping:  # a second Ctrl-C inside a step: its update may be half applied
            print(f"\ninterrupted inside step {run['step'] + 1}: no checkpoint written (the "
                  f"last one in {args.out} stays)", file=sys.stderr)
        else:
            path = _checkpoint(args, model, optimizer, scheduler, run, started)
            print(f"\ninterrupted after step {run['step']}: checkpoint saved to {path}; "
                  "continue with the same command and --resume", file=sys.stderr)
        raise SystemExit(130) from None
    bar.close()
    update.report()
    return last_eval


def _checkpoint(args, model, optimizer, scheduler, run, started):
    run["train_seconds"] += time.perf_counter() - started
    path = args.out / CHECKPOINT
    extra = dict(run, args={k: v for k, v in vars(args).items() if k not in ("out", "resume")})
    if args.tokenizer_state is not None:  # text tasks: the tokenizer travels with the model
        extra["tokenizer"] = args.tokenizer_state
    save_checkpoint(path, model, optimizer, scheduler, run["step"], extra=json.loads(
        json.dumps(extra, default=str)))
    return path


def resume(args, model, optimizer, scheduler):
    """Restore the training state from the checkpoint --resume names (``resumable`` has
    checked it against the command line); returns the run record (step, history,
    train_seconds)."""
    path = checkpoint_path(args)
    try:
        meta = load_checkpoint(path, model, optimizer, scheduler, device=args.device,
                               restore_rng=True)
    except FileNotFoundError:
        fail("seq2seq", f"--resume: no checkpoint at {path}")
    except (CheckpointMismatch, ValueError) as e:
        fail("seq2seq", f"--resume: {e}")
    except OSError as e:
        fail("seq2seq", f"--resume: cannot read {path} ({e.strerror or e})")
    saved = meta["extra"].pop("args", {})
    meta["extra"].pop("tokenizer", None)
    run = meta["extra"]
    if not all(isinstance(run.get(k), kind) for k, kind in RUN_RECORD.items()):
        fail("seq2seq", f"--resume: {path} is not a seq2seq checkpoint (no run record: "
             f"{', '.join(RUN_RECORD)})")
    for key, value in saved.items():
        if key in ("device", "no_progress", "examples", "tokenizer_state", "compile") \
                or str(getattr(args, key, None)) == str(value):
            continue
        print(f"note: --{key.replace('_', '-')} is {getattr(args, key)}, the checkpoint's run "
              f"used {value}", file=sys.stderr)
    print(f"resuming from {path} at step {meta['step']}", file=sys.stderr)
    return run


def resumable(args):
    """The metadata of the checkpoint --resume names, read before any work (a text task's
    tokenizer is in it) and checked against the command line: a checkpoint that cannot be
    read, of another task, model or schedule (``MUST_MATCH``), or past --steps, stops the
    program with one line. A model of another size is found when the weights are loaded."""
    path = checkpoint_path(args)
    try:
        meta = read_training_meta(path)
    except FileNotFoundError:
        fail("seq2seq", f"--resume: no checkpoint at {path}")
    except ValueError as e:
        fail("seq2seq", f"--resume: {e}")
    except OSError as e:
        fail("seq2seq", f"--resume: cannot read {path} ({e.strerror or e})")
    saved = meta["extra"].get("args", {})
    if not isinstance(saved, dict):
        fail("seq2seq", f"--resume: {path} is not a seq2seq checkpoint (its arguments are a "
             f"{type(saved).__name__})")
    if saved.get("task", args.task) != args.task:
        fail("seq2seq", f"--resume: {path} is a {saved['task']} run, not {args.task}")
    for key in MUST_MATCH:
        if key in saved and str(getattr(args, key)) != str(saved[key]):
            option = "--" + key.replace("_", "-")
            fail("seq2seq", f"--resume: {path} was trained with {option} {saved[key]}, not "
                 f"{option} {getattr(args, key)}")
    if meta["step"] > args.steps:
        fail("seq2seq", f"--resume: {path} is at step {meta['step']}, past --steps {args.steps}")
    return meta


def plot_curves(run, path):
    """curves.png: training loss (log scale) and accuracies against the step."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4), layout="constrained")
    ax_loss, ax_acc = fig.subplots(1, 2)
    steps = np.arange(1, len(run["loss"]) + 1)
    width = max(1, len(steps) // 100)  # a running mean over ~1% of the run
    smooth = np.convolve(run["loss"], np.ones(width) / width, mode="valid")
    ax_loss.plot(steps, run["loss"], color="#bbbbbb", lw=0.6, label="per step")
    ax_loss.plot(steps[width - 1:], smooth, color="#1f77b4", label=f"mean of {width}")
    ax_loss.set(yscale="log", xlabel="step", ylabel="training loss")
    ax_loss.legend()
    acc = np.convolve(run["accuracy"], np.ones(width) / width, mode="valid")
    ax_acc.plot(steps[width - 1:], acc, label="training tokens (teacher-forced)")
    if run["eval"]:
        ev = np.array(run["eval"])
        ax_acc.plot(ev[:, 0], ev[:, 2], "o-", label="held-out tokens (generated)")
        ax_acc.plot(ev[:, 0], ev[:, 1], "s-", label="held-out exact match (generated)")
    ax_acc.set(xlabel="step", ylabel="accuracy", ylim=(0, 1.02))
    ax_acc.legend(loc="lower right")
    with naming(path):
        fig.savefig(path, dpi=110)


def report(args, task, data, model, run, last_eval=None):
    """Final evaluation, a few decoded examples, metrics.json, curves.png, attention.png."""
    from minigrad.models.inspect import collect_attention, plot_attention

    if last_eval is None:
        last_eval = evaluate(model, task, data.eval, args.device, args.beam)
    exact, token_acc, decoded, scores = last_eval
    print(f"\n{args.task}: {describe_eval(last_eval)} "
          f"({len(data.eval)} examples, {run['step']} steps, {run['train_seconds']:.0f} s)")
    width = min(40, max(len(task.text(src)) for src, _ in data.eval[:max(args.examples, 1)]))
    for (src, tgt), pred in list(zip(data.eval, decoded))[:args.examples]:
        mark = "ok" if pred == list(tgt) else f"expected {task.text(tgt)}"
        print(f"  {task.text(src):>{width}} -> {task.text(pred):<17} {mark}")
    metrics = dict(task=args.task, steps=run["step"], train_seconds=round(run["train_seconds"], 2),
                   eval_exact_match=exact, eval_token_accuracy=token_acc,
                   eval_examples=len(data.eval),
                   final_train_loss=run["loss"][-1] if run["loss"] else None,
                   **{f"eval_{k}": v for k, v in scores.items()},
                   eval_history=[dict(step=s, exact_match=e, token_accuracy=a,
                                      **dict(zip(scores, more)))
                                 for s, e, a, *more in run["eval"]],
                   seed=args.seed, device=args.device,
                   model={k: getattr(args, k) for k in MODEL_ARGS})
    if isinstance(task, TextTask):
        metrics.update(data=data.path, pairs=data.sizes, tokenizer=dict(
            kind=task.tokenizer.kind, vocab_size=task.tokenizer.vocab_size))
    with naming(args.out / "metrics.json"):
        (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if run["loss"]:
        plot_curves(run, args.out / "curves.png")
    # one held-out example of middling length, with the model's own output as the target
    i = min(range(min(50, len(data.eval))),
            key=lambda i: abs(len(data.eval[i][0]) - task.max_src_len // 2))
    src, pred = data.eval[i][0], decoded[i]
    maps = collect_attention(model, mg.tensor([src], device=args.device),
                             mg.tensor([[BOS] + pred], device=args.device))
    with warnings.catch_warnings(record=True) as caught:  # text the font cannot draw
        warnings.simplefilter("default")
        with naming(args.out / "attention.png"):
            plot_attention(maps, task.labels(src), task.labels([BOS] + pred),
                           args.out / "attention.png")
    glyphs = [w for w in caught if "missing from font" in str(w.message)]
    for w in caught:
        if w not in glyphs:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    if glyphs:
        print(f"note: attention.png: {len(glyphs)} character(s) of the labels are not in the "
              "font, drawn as boxes", file=sys.stderr)
    print_written(args.out, [(name, what) for name, what in written(args.task)
                             if (args.out / name).exists()])
    return metrics


# What to look for in the cross-attention of each task (rows: output tokens, columns: input)
ATTENTION = {
    "copy": "the cross-attention's diagonal is the copy",
    "reverse": "the cross-attention's anti-diagonal is the reversal",
    "sort": "each output symbol's cross-attention finds that symbol in the input",
    "add": "which digits of the two numbers each digit of the sum reads",
}


def written(task):
    """What the demo writes on ``task``, with what to look at in each (graph.svg needs
    Graphviz's `dot`; tokenizer.json and dates.tsv are written for text data only)."""
    attention = "every layer and head on one held-out example"
    if task in ATTENTION:
        attention += ": " + ATTENTION[task]
    else:
        attention += ": which input tokens each output token's cross-attention reads"
    return [("attention.png", attention) if name == "attention.png" else (name, what)
            for name, what in WRITTEN]


WRITTEN = [
    ("metrics.json", "held-out exact match and token accuracy (BLEU and chrF for text), the "
                     "evaluation history"),
    ("curves.png", "training loss and teacher-forced accuracy by step; held-out accuracy of "
                   "generated sequences"),
    ("attention.png", None),  # said per task by written()
    ("graph.svg", "one training step's graph, folded by module"),
    ("tokenizer.json", "the tokenizer trained on the training split (text data only)"),
    ("dates.tsv", "the generated dates pairs, the same path as a file of your own (--task dates)"),
    ("checkpoint.safetensors", "the whole training state: continue with --resume"),
]


def main(argv=None):
    """Run the program with ``argv`` (default: the command line); returns the metrics."""
    args = parse_args(argv)
    require("seq2seq", "tqdm", "matplotlib", *(["sacrebleu"] if args.task in TEXT_TASKS else []))
    try:
        with writing_to("seq2seq", args.out):
            return _run(args)
    except KeyboardInterrupt:  # outside the training loop: nothing new to save
        print("\ninterrupted", file=sys.stderr)
        raise SystemExit(130) from None


def _run(args):
    make_out_dir("seq2seq", args.out)
    meta = None if args.resume is None else resumable(args)  # checked before any work
    args.tokenizer_state = None
    if args.task in TEXT_TASKS:
        saved = None if meta is None else meta["extra"].get("tokenizer")
        task, data, tokenizer = load_text_data(args, saved)
        tokenizer.save(args.out / "tokenizer.json")
        args.tokenizer_state = tokenizer.to_dict()
    else:
        task = TASKS[args.task]
        data = Dataset(task, args.seed, args.eval_size)
    mg.manual_seed(args.seed)
    model, optimizer, scheduler = build(args, task)
    run = dict(step=0, loss=[], accuracy=[], eval=[], train_seconds=0.0)
    if args.resume is not None:
        run = resume(args, model, optimizer, scheduler)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{args.task}: {n_params:,} parameters, {args.steps} steps of {args.batch_size}, "
          f"held-out set of {len(data.eval)}, on {args.device}", file=sys.stderr)
    last_eval = train(args, task, data, model, optimizer, scheduler, run)
    return report(args, task, data, model, run, last_eval)


if __name__ == "__main__":
    main()
