"""Use a model trained by the seq2seq program on text (--data or --task dates): raw text in,
decoded text out, through the tokenizer saved in its checkpoint.

    python -m minigrad.demos.translate --ckpt runs/dates "the 3rd of March, 1999" "4/7/21"
    printf '3 mars 1999\\n12. Mai 1950\\n' | python -m minigrad.demos.translate --ckpt runs/dates

Each input (the arguments, or else the lines of standard input) is encoded, decoded with
``generate`` (greedy, or --beam N) and printed as ``input<TAB>output``, one a line.
"""
import argparse
import sys
from pathlib import Path

import minigrad as mg
from minigrad.demos.checkpoint import CheckpointMismatch, load_checkpoint, read_training_meta
from minigrad.demos.seq2seq import CHECKPOINT, build_model
from minigrad.text import BOS, EOS, Tokenizer

from ._cli import add_device_option, fail, make_parser, positive_int, summary

NAME = "translate"


def build_parser():
    p = make_parser(NAME, summary(__doc__))
    p.add_argument("texts", nargs="*", help="the inputs (default: the lines of standard input)")
    p.add_argument("--ckpt", required=True, metavar="PATH",
                   help=f"a seq2seq output folder (its {CHECKPOINT}) or a checkpoint file "
                   "(no default: required)")
    p.add_argument("--beam", type=positive_int, default=1, help="beam size")
    p.add_argument("--max-len", type=positive_int, default=128,
                   help="the most tokens to generate per input")
    add_device_option(p)
    return p


def parse_args(argv=None):
    """The command line, checked: a --ckpt with no checkpoint stops with one line."""
    p = build_parser()
    args = p.parse_args(argv)
    path = Path(args.ckpt)
    if not (path / CHECKPOINT if path.is_dir() else path).is_file():
        p.error(f"argument --ckpt: no checkpoint at {path}")
    return args


def load(path, device):
    """(model, tokenizer, longest output) from a seq2seq checkpoint of a text task (the
    longest output its positional table allows); stops with one line when the file is
    missing, unreadable or not of a text task."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT
    try:
        meta = read_training_meta(path)
        saved = meta["extra"].get("tokenizer")
        if saved is None:
            fail(NAME, f"--ckpt: {path} holds no tokenizer: it is not from a text task "
                 "(train with --data or --task dates)")
        tokenizer = Tokenizer.from_dict(saved)
        args = argparse.Namespace(**meta["extra"]["args"])
        args.device, args.dropout = device, 0.0
        model = build_model(args, tokenizer.vocab_size)
        load_checkpoint(path, model, device=device)
    except FileNotFoundError:
        fail(NAME, f"--ckpt: no checkpoint at {path}")
    except (CheckpointMismatch, ValueError, KeyError, TypeError, AttributeError) as e:
        fail(NAME, f"--ckpt: {path} is not a seq2seq checkpoint of a text task ({e})")
    except OSError as e:
        fail(NAME, f"--ckpt: cannot read {path} ({e.strerror or e})")
    return model, tokenizer, args.max_len - 1


def translate(model, tokenizer, texts, device="cpu", beam=1, max_len=128):
    """The model's output text for each input text; an input longer than the model's
    positional table stops the program with one line."""
    longest = getattr(model.src_pos, "max_len", None)  # rotary, ALiBi and T5: no table
    out = []
    for text in texts:
        ids = tokenizer.encode(text) or [tokenizer.unk_id]
        if longest is not None and len(ids) > longest:
            shown = text if len(text) <= 40 else text[:37] + "..."
            fail(NAME, f"texts: {shown!r} is {len(ids)} tokens, more than the model's "
                 f"{longest} positions")
        src = mg.tensor([ids], device=device)
        row = model.generate(src, max_len, BOS, EOS, beam_size=beam).numpy()[0].tolist()
        out.append(tokenizer.decode(row))
    return out


def main(argv=None):
    args = parse_args(argv)
    model, tokenizer, longest = load(args.ckpt, args.device)
    texts = args.texts or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        fail(NAME, "texts: none given, and standard input has no line of text")
    outputs = translate(model, tokenizer, texts, args.device, args.beam,
                        min(args.max_len, longest))
    for text, output in zip(texts, outputs):
        print(f"{text}\t{output}")
    return outputs


if __name__ == "__main__":
    main()
