"""Toy sequence-to-sequence tasks, synthetic and generated offline from a seed.

    copy     3 1 4 1 5  ->  3 1 4 1 5          sequences of 1 to 16 symbols over 10
    reverse  3 1 4 1 5  ->  5 1 4 1 3
    sort     3 1 4 1 5  ->  1 1 3 4 5
    add      1 2 3 + 4 5  ->  1 6 8             two numbers of 1 to 4 digits

A task is a small class: its symbols and its ``sample(rng)``, one random (source, target)
pair of token ids. Adding a task means writing one and putting it in ``TASKS``.

Every task's inputs are split once and for all into a training part and a held-out part
(about 1 source in ``HOLDOUT`` is held out, chosen by a hash of its tokens, whatever the
seed). ``Dataset`` draws its evaluation set from the held-out part only and its training
batches from the rest only, so the two never overlap; each training batch is a pure
function of (seed, step), which is what lets a resumed run see exactly the batches an
uninterrupted one would have seen.
"""
import hashlib

import numpy as np

from minigrad.text import data as text_data
from minigrad.text.tokenizers import BOS, EOS, PAD  # noqa: F401  (the tasks' ids too)

SPECIALS = ("<pad>", "<s>", "</s>")
HOLDOUT = 10  # 1 source in HOLDOUT belongs to the held-out split


class Task:
    """A synthetic task: subclasses set ``name``, ``symbols``, ``max_src_len``,
    ``max_tgt_len`` and write ``sample``."""

    name = None
    symbols = "0123456789"
    max_src_len = max_tgt_len = 16

    @property
    def vocab(self):
        """Token strings by id: the special tokens, then the symbols."""
        return list(SPECIALS) + list(self.symbols)

    def ids(self, text):
        """The token ids of a string of symbols ("31415" -> [6, 4, 7, 4, 8])."""
        return [len(SPECIALS) + self.symbols.index(c) for c in text]

    def text(self, ids):
        """The symbols of token ids, stopping at EOS and skipping the other special tokens."""
        out = []
        for i in ids:
            if i == EOS:
                break
            if i >= len(SPECIALS):
                out.append(self.symbols[i - len(SPECIALS)])
        return "".join(out)

    def labels(self, ids):
        """Each token's string, for pictures."""
        return [self.vocab[i] for i in ids]

    def sample(self, rng):
        """One random (source ids, target ids) pair, without BOS, EOS or padding."""
        raise NotImplementedError

    def is_held_out(self, src):
        """Whether the source ``src`` (a sequence of ids) belongs to the held-out split."""
        key = f"{self.name}:{','.join(map(str, src))}".encode()
        return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") \
            % HOLDOUT == 0


class _SymbolSequences(Task):
    """Sources of 1 to ``max_len`` (16) symbols, the length and then each symbol drawn
    uniformly; the target is ``transform(source)``."""

    def __init__(self, max_len=16):
        self.max_len = self.max_src_len = self.max_tgt_len = max_len

    def sample(self, rng):
        n = int(rng.integers(1, self.max_len + 1))
        src = rng.integers(len(SPECIALS), len(self.vocab), n).tolist()
        return src, self.transform(src)


class Copy(_SymbolSequences):
    name = "copy"

    def transform(self, src):
        return list(src)


class Reverse(_SymbolSequences):
    name = "reverse"

    def transform(self, src):
        return src[::-1]


class Sort(_SymbolSequences):
    name = "sort"

    def transform(self, src):
        return sorted(src)


class Add(Task):
    """a + b for numbers of 1 to 4 digits (the digit count drawn first, so short numbers are
    as common as long ones), written most significant digit first; the target is the sum's
    digits."""

    name = "add"
    symbols = "0123456789+"
    digits = 4
    max_src_len, max_tgt_len = 2 * digits + 1, digits + 1

    def number(self, rng):
        n = int(rng.integers(1, self.digits + 1))
        return int(rng.integers(0 if n == 1 else 10 ** (n - 1), 10 ** n))

    def sample(self, rng):
        a, b = self.number(rng), self.number(rng)
        return self.ids(f"{a}+{b}"), self.ids(str(a + b))


TASKS = {task.name: task for task in (Copy(), Reverse(), Sort(), Add())}


class Dataset:
    """A task's held-out evaluation set and its stream of training batches.

    Args:
        task: a Task.
        seed: the seed of the evaluation set and of the training stream.
        eval_size: how many distinct held-out examples to evaluate on (fewer if the task
            has fewer).
    Attributes:
        eval: the list of (source ids, target ids) pairs held out for evaluation.
    """

    def __init__(self, task, seed, eval_size=1000):
        self.task, self.seed = task, seed
        rng = np.random.default_rng([seed, 1])
        seen, self.eval = set(), []
        for _ in range(50 * HOLDOUT * eval_size):  # enough draws for any task's split
            src, tgt = task.sample(rng)
            if task.is_held_out(src) and tuple(src) not in seen:
                seen.add(tuple(src))
                self.eval.append((src, tgt))
                if len(self.eval) == eval_size:
                    break

    def train_examples(self, step, batch_size):
        """The training examples of ``step``: a pure function of (seed, step)."""
        rng = np.random.default_rng([self.seed, 0, step])
        out = []
        while len(out) < batch_size:
            src, tgt = self.task.sample(rng)
            if not self.task.is_held_out(src):
                out.append((src, tgt))
        return out

    def batch(self, step, batch_size):
        """``collate(train_examples(step, batch_size))``."""
        return collate(self.train_examples(step, batch_size))


def collate(examples):
    """Pad a list of (source, target) pairs into arrays, batch first.

    Returns:
        src (B, S): the sources padded with PAD; tgt_in (B, T): BOS then the targets, the
        decoder's input; tgt_out (B, T): the targets then EOS, what it should predict.
    """
    src, tgt_in, tgt_out, _, _ = text_data.collate(examples)  # the same special ids
    return src, tgt_in, tgt_out


# --- dates: a task of text, written out as a pairs file -----------------------------------------

MONTHS = {
    "en": ["January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"],
    "fr": ["janvier", "février", "mars", "avril", "mai", "juin", "juillet", "août",
           "septembre", "octobre", "novembre", "décembre"],
    "de": ["Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August",
           "September", "Oktober", "November", "Dezember"],
    "es": ["enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
           "septiembre", "octubre", "noviembre", "diciembre"],
}


def _ordinal(d):
    suffix = "th" if 10 <= d % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")
    return f"{d}{suffix}"


# Each form writes (year, month, day); two-digit years stand for 1950-2049 and numeric forms
# put the day first (03/04/99 is the 3rd of April 1999).
DATE_FORMS = [
    lambda y, m, d: f"the {_ordinal(d)} of {MONTHS['en'][m - 1]}, {y}",
    lambda y, m, d: f"{MONTHS['en'][m - 1]} {_ordinal(d)} {y}",
    lambda y, m, d: f"{MONTHS['en'][m - 1]} {d}, {y}",
    lambda y, m, d: f"{d} {MONTHS['en'][m - 1]} {y}",
    lambda y, m, d: f"{MONTHS['en'][m - 1][:3]} {d}, {y}",
    lambda y, m, d: f"{_ordinal(d)} {MONTHS['en'][m - 1].lower()} {y}",
    lambda y, m, d: f"{'1er' if d == 1 else d} {MONTHS['fr'][m - 1]} {y}",
    lambda y, m, d: f"le {'1er' if d == 1 else d} {MONTHS['fr'][m - 1]} {y}",
    lambda y, m, d: f"{d}. {MONTHS['de'][m - 1]} {y}",
    lambda y, m, d: f"am {d}. {MONTHS['de'][m - 1]} {y}",
    lambda y, m, d: f"{d} de {MONTHS['es'][m - 1]} de {y}",
    lambda y, m, d: f"{d:02d}/{m:02d}/{y}",
    lambda y, m, d: f"{d}/{m}/{y}",
    lambda y, m, d: f"{d:02d}.{m:02d}.{y}",
    lambda y, m, d: f"{y}-{m:02d}-{d:02d}",
]
SHORT_YEAR_FORMS = [  # only for 1950-2049
    lambda y, m, d: f"{d:02d}/{m:02d}/{y % 100:02d}",
    lambda y, m, d: f"{d}/{m}/{y % 100:02d}",
    lambda y, m, d: f"{d:02d}.{m:02d}.{y % 100:02d}",
]


def date_pairs(seed, n, first_year=1900, last_year=2099):
    """``n`` (surface form, ISO date) pairs drawn from ``seed``: a day uniformly from the
    years given, then one of the forms (English, French, German, Spanish, numeric)."""
    import datetime

    rng = np.random.default_rng([seed, 3])
    start = datetime.date(first_year, 1, 1).toordinal()
    days = datetime.date(last_year, 12, 31).toordinal() - start + 1
    pairs = []
    for _ in range(n):
        date = datetime.date.fromordinal(start + int(rng.integers(days)))
        y, m, d = date.year, date.month, date.day
        forms = DATE_FORMS + (SHORT_YEAR_FORMS if 1950 <= y <= 2049 else [])
        pairs.append((forms[int(rng.integers(len(forms)))](y, m, d), date.isoformat()))
    return pairs


class TextTask:
    """A task of text pairs read through a tokenizer: the interface of ``Task`` (``vocab``,
    ``text``, ``max_src_len``, ``max_tgt_len``) over token ids of ``tokenizer``."""

    def __init__(self, name, tokenizer, max_src_len, max_tgt_len):
        self.name, self.tokenizer = name, tokenizer
        self.max_src_len, self.max_tgt_len = max_src_len, max_tgt_len

    @property
    def vocab(self):
        return self.tokenizer.vocab

    def text(self, ids):
        return self.tokenizer.decode(ids)

    def labels(self, ids):
        """Each token's text (spaces shown as ▁), or its vocabulary entry where it is part of
        a character (or a special token)."""
        out = []
        for i in ids:
            text = self.tokenizer.decode([i]) if i >= len(self.tokenizer.specials) else ""
            out.append(text.replace(" ", "▁") if text and "\ufffd" not in text
                       else self.tokenizer.token(i))
        return out
