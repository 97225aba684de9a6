"""A file of sentence pairs as training data: read, split, tokenized, bucketed, padded.

    pairs = read_pairs("pairs.tsv")              # [(source, target)], one pair a line
    train, held_out = split_pairs(pairs)         # about 1 source in 10 held out, by hash
    data = PairsDataset(train, tokenizer, max_src_len=64, max_tgt_len=64, seed=0)
    src, tgt_in, tgt_out = data.batch(step, batch_size=64)

The file is UTF-8 text, ``source<TAB>target`` per line; blank lines are skipped. A line
without a tab, with more than one, or with an empty side is refused with its number.
"""
import hashlib

import numpy as np

from .tokenizers import BOS, EOS, PAD, naming

HOLDOUT = 10  # 1 source in HOLDOUT is held out
POOL = 50     # batches sorted by length together (bucketing)


class PairsFileError(ValueError):
    """A pairs file that cannot be read as ``source<TAB>target`` lines; the message names
    the file and, for a bad line, its number."""


def read_pairs(path):
    """The (source, target) string pairs of a TSV file, in file order.

    Raises:
        PairsFileError: the file is empty (or only blank lines), has no tab at all, or a
            line is malformed (no tab, more than one, an empty side, not UTF-8).
        OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.split(b"\n")
    if not raw.strip():
        raise PairsFileError(f"{path} is empty: expected one 'source<TAB>target' pair a line")
    if b"\t" not in raw:
        raise PairsFileError(f"{path} has no tab on any line: expected 'source<TAB>target' "
                             "per line (tab-separated, not spaces or commas)")
    pairs = []
    for number, line in enumerate(lines, 1):
        try:
            text = line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as e:
            raise PairsFileError(f"{path}, line {number}: not UTF-8 text ({e.reason} at "
                                 f"byte {e.start})") from None
        if not text.strip():
            continue
        parts = text.split("\t")
        if len(parts) != 2:
            what = "no tab" if len(parts) == 1 else f"{len(parts) - 1} tabs"
            raise PairsFileError(f"{path}, line {number}: expected 'source<TAB>target', found "
                                 f"{what}: {_shorten(text)!r}")
        if not parts[0].strip() or not parts[1].strip():
            side = "source" if not parts[0].strip() else "target"
            raise PairsFileError(f"{path}, line {number}: the {side} is empty: "
                                 f"{_shorten(text)!r}")
        pairs.append((parts[0], parts[1]))
    return pairs


def write_pairs(path, pairs):
    """Write (source, target) pairs as ``source<TAB>target`` lines (UTF-8)."""
    with naming(path), open(path, "w", encoding="utf-8", newline="\n") as f:
        for src, tgt in pairs:
            f.write(f"{src}\t{tgt}\n")


def _shorten(text, n=60):
    return text if len(text) <= n else text[:n] + "..."


def is_held_out(source):
    """Whether ``source`` belongs to the held-out split (a hash of its text: the same for
    every seed and every file it appears in)."""
    digest = hashlib.blake2b(source.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % HOLDOUT == 0


def split_pairs(pairs):
    """(training pairs, held-out pairs): a pair is held out when its source is
    (``is_held_out``), so a source never lands on both sides."""
    train, held_out = [], []
    for pair in pairs:
        (held_out if is_held_out(pair[0]) else train).append(pair)
    return train, held_out


def encode_pairs(pairs, tokenizer, max_src_len=None, max_tgt_len=None):
    """(examples, dropped): the pairs as (source ids, target ids), those longer than the
    limits (in tokens; the target without EOS) left out and counted."""
    examples, dropped = [], 0
    for src, tgt in pairs:
        s, t = tokenizer.encode(src), tokenizer.encode(tgt)
        if (max_src_len and len(s) > max_src_len) or (max_tgt_len and len(t) > max_tgt_len):
            dropped += 1
        else:
            examples.append((s, t))
    return examples, dropped


class PairsDataset:
    """Tokenized pairs served as batches bucketed by length.

    Each epoch the examples are shuffled (from the seed and the epoch), taken ``POOL``
    batches at a time, sorted by length within the pool and cut into batches, and the
    batches are shuffled: a batch holds examples of similar length, so little of it is
    padding. ``batch(step, batch_size)`` is a pure function of (seed, step, batch_size).

    Args:
        examples: (source ids, target ids) pairs (see ``encode_pairs``).
        seed: the seed of the order.
    """

    def __init__(self, examples, seed=0):
        if not examples:
            raise ValueError("PairsDataset: no examples (every pair was longer than the "
                             "length limits, or there were none)")
        self.examples, self.seed = list(examples), seed
        self._epoch = None

    def batches_per_epoch(self, batch_size):
        return -(-len(self.examples) // batch_size)

    def epoch_batches(self, epoch, batch_size):
        """The batches (lists of example indices) of ``epoch``, in the order served."""
        if self._epoch != (epoch, batch_size):
            rng = np.random.default_rng([self.seed, 2, epoch])
            order = rng.permutation(len(self.examples))
            batches = []
            pool = POOL * batch_size
            for p in range(0, len(order), pool):
                chunk = sorted(order[p:p + pool], key=self._length)
                batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
            self._batches = [batches[i] for i in rng.permutation(len(batches))]
            self._epoch = (epoch, batch_size)
        return self._batches

    def _length(self, i):
        src, tgt = self.examples[i]
        return (len(src), len(tgt))

    def train_examples(self, step, batch_size):
        """The examples of training step ``step``."""
        n = self.batches_per_epoch(batch_size)
        batch = self.epoch_batches(step // n, batch_size)[step % n]
        return [self.examples[i] for i in batch]

    def batch(self, step, batch_size):
        """``collate(train_examples(step, batch_size))[:3]``: src, tgt_in, tgt_out."""
        return collate(self.train_examples(step, batch_size))[:3]


def collate(examples):
    """Pad (source ids, target ids) pairs into arrays, batch first.

    Returns:
        src (B, S) padded with PAD; tgt_in (B, T): BOS then the target; tgt_out (B, T): the
        target then EOS; src_padding_mask (B, S) and tgt_padding_mask (B, T): bool, True at
        padding (what the model masks as keys, and the loss ignores).
    """
    S = max(len(src) for src, _ in examples)
    T = max(len(tgt) for _, tgt in examples) + 1
    src = np.full((len(examples), S), PAD, np.int64)
    tgt_in = np.full((len(examples), T), PAD, np.int64)
    tgt_out = np.full((len(examples), T), PAD, np.int64)
    for i, (s, t) in enumerate(examples):
        src[i, :len(s)] = s
        tgt_in[i, :len(t) + 1] = [BOS] + list(t)
        tgt_out[i, :len(t) + 1] = list(t) + [EOS]
    return src, tgt_in, tgt_out, src == PAD, tgt_out == PAD
