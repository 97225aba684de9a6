"""The seq2seq program's text data: a pairs file (``--data``) or the generated dates task
(``--task dates``, written out as a pairs file first), a tokenizer trained on the training
split (or loaded, or taken from the checkpoint being resumed), the held-out split, and the
batches bucketed by length (minigrad.text)."""
import sys
from pathlib import Path

from minigrad.text import (ByteBPETokenizer, CharTokenizer, PairsDataset, PairsFileError,
                           Tokenizer, encode_pairs, load_tokenizer, read_pairs, split_pairs,
                           write_pairs)

from ._cli import fail
from .tasks import TextTask, date_pairs

TOKENIZERS = {"bpe": ByteBPETokenizer, "char": CharTokenizer}


def pairs_file(args):
    """The pairs file to read: --data, or for --task dates the generated pairs written to
    the output folder as dates.tsv."""
    if args.data is not None:
        return Path(args.data)
    path = args.out / "dates.tsv"
    write_pairs(path, date_pairs(args.seed, args.pairs))
    return path


def make_tokenizer(args, train_pairs, saved=None):
    """The tokenizer: the checkpoint's (``saved``, a dict), --tokenizer-file, or one trained
    on the training pairs' sources and targets (--tokenizer, --vocab-size)."""
    if saved is not None:
        try:
            return Tokenizer.from_dict(saved)
        except (ValueError, KeyError, TypeError) as e:
            fail("seq2seq", f"--resume: the checkpoint's tokenizer is not valid ({e})")
    if args.tokenizer_file is not None:
        try:
            tokenizer = load_tokenizer(args.tokenizer_file)
        except (OSError, ValueError) as e:  # (the error names the file)
            fail("seq2seq", f"--tokenizer-file: {e}")
        if tokenizer.vocab_size <= len(tokenizer.specials):  # every character unknown
            fail("seq2seq", f"--tokenizer-file: {args.tokenizer_file} has no token beside its "
                 f"{len(tokenizer.specials)} special tokens")
        return tokenizer
    texts = [s for pair in train_pairs for s in pair]
    try:
        tokenizer = TOKENIZERS[args.tokenizer].train(texts, args.vocab_size)
    except ValueError as e:
        fail("seq2seq", f"--vocab-size: {e}")
    specials = len(tokenizer.specials)
    if tokenizer.vocab_size <= specials:  # every character would be unknown
        fail("seq2seq", f"--vocab-size: {args.vocab_size} leaves no room for a token beside "
             f"the {specials} special tokens (give at least {specials + 1})")
    return tokenizer


def load_text_data(args, saved_tokenizer=None):
    """(task, data, tokenizer) for --data or --task dates; a bad file stops the program
    with one line naming it (and the line at fault)."""
    path = pairs_file(args)
    try:
        pairs = read_pairs(path)
    except PairsFileError as e:
        fail("seq2seq", f"--data: {e}")
    except OSError as e:
        fail("seq2seq", f"--data: cannot read {path} ({e.strerror or e})")
    train_pairs, held_out = split_pairs(pairs)
    if not train_pairs or not held_out:
        what = f"--data: {path} has {len(pairs)} pairs:" if args.data is not None \
            else f"--pairs: {args.pairs} dates pairs are"
        fail("seq2seq", f"{what} too few to hold some out (about 1 source in 10 is held out; "
             f"{len(held_out)} were)")
    tokenizer = make_tokenizer(args, train_pairs, saved_tokenizer)
    train, dropped = encode_pairs(train_pairs, tokenizer, args.max_src_len, args.max_tgt_len)
    held, dropped_eval = encode_pairs(held_out, tokenizer, args.max_src_len, args.max_tgt_len)
    if not train or not held:
        fail("seq2seq", f"--data: no pair of {path} fits --max-src-len {args.max_src_len} "
             f"and --max-tgt-len {args.max_tgt_len} tokens on the "
             f"{'training' if not train else 'held-out'} side")
    if dropped or dropped_eval:
        print(f"note: {dropped + dropped_eval} of {len(pairs)} pairs are longer than "
              f"--max-src-len {args.max_src_len} or --max-tgt-len {args.max_tgt_len} tokens "
              "and were left out", file=sys.stderr)
    data = PairsDataset(train, seed=args.seed)
    data.eval = held[:args.eval_size]
    data.path, data.sizes = str(path), dict(pairs=len(pairs), train=len(train),
                                            held_out=len(held), dropped=dropped + dropped_eval)
    every = train + held
    task = TextTask(args.task, tokenizer, max(len(s) for s, _ in every),
                    max(len(t) for _, t in every))
    return task, data, tokenizer
