"""Byte-level BPE on text with very long runs (a line of letters without a space, a pasted
blob): pre-tokenization cuts a run into pieces of at most ``MAX_CHUNK`` characters, so
training and encoding do work about linear in the input, decoding still gives the text
back, and ordinary text is cut, trained on and encoded exactly as before."""
import hashlib
import json
import random

import pytest

from minigrad.text import tokenizers
from minigrad.text.tokenizers import MAX_CHUNK, ByteBPETokenizer, _chunks

SYLLABLES = ("ka ri to na mi sel ver an dor le tha ung pre com ist ment ion ber gen wal "
             "ot ra be fu lo ste mar qui zen ho ly ap ex im ous ca ro de si").split()
EXTRA = ["Grüße aus Zürich, 3. März 1999!", "naïve café — déjà vu…", "東京は晴れ、気温は21度。",
         "emoji 🙂👍🏽 and    runs   of spaces", "snake_case_name = value__2 + x_1;",
         "tabs\there\tand\nnewlines", "((nested)) [brackets] {braces} <angle>!!!???",
         "antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
         "----==== underline ====----", "https://example.org/a/b?c=d&e=f#g"]


def corpus(n=600, seed=0):
    """Ordinary text: sentences of made-up words with Zipf's law, numbers, and a few lines
    of accents, CJK, emoji, runs of spaces, punctuation and long words."""
    rng = random.Random(seed)
    words = []
    while len(words) < 800:
        w = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 4))))
        if w not in words:
            words.append(w)
    weights = [1 / (k + 1) for k in range(len(words))]
    lines = []
    for _ in range(n):
        chosen = rng.choices(words, weights, k=rng.randint(3, 12))
        if rng.random() < 0.3:
            chosen.insert(rng.randrange(len(chosen)), str(rng.randint(0, 99999)))
        lines.append(" ".join(chosen).capitalize() + rng.choice(".!?,; "))
    return lines + EXTRA


def letters(n, seed=1):
    rng = random.Random(seed)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def digest(value):
    return hashlib.sha256(json.dumps(value).encode()).hexdigest()[:16]


# (vocab_size, number of merges, digest of the merges, digest of the corpus encoded), as the
# tokenizer gave them before long runs were cut (every chunk of this corpus is shorter)
BEFORE = [(300, 40, "ae983b20af9988a1", "701713070498362d"),
          (700, 440, "2a219a47dda1464f", "74eac01a2a7bfaa0"),
          (1200, 940, "5aeaf4d5c23aaec8", "fea96170ce7434cc")]


@pytest.mark.parametrize("vocab_size, n_merges, merges, encoded", BEFORE)
def test_ordinary_text_trains_and_encodes_as_before(vocab_size, n_merges, merges, encoded):
    texts = corpus()
    tok = ByteBPETokenizer.train(texts, vocab_size)
    assert len(tok.merges) == n_merges and digest(tok.merges) == merges
    assert digest([i for t in texts for i in tok.encode(t)]) == encoded


def test_ordinary_text_is_cut_as_before():
    for text in corpus():
        assert list(_chunks(text)) == tokenizers._CHUNK.findall(text)


RUNS = [("letters", letters(10_000)), ("digits", "7" * 5000), ("spaces", " " * 300),
        ("punctuation", "-=" * 400), ("underscores", "_" * 1000),
        ("accents", "é" * 700), ("cjk", "東京" * 300), ("emoji", "🙂👍🏽" * 200),
        ("word-then-run", " " + letters(150) + " end"), ("exact", letters(MAX_CHUNK)),
        ("one-more", letters(MAX_CHUNK + 1))]


@pytest.mark.parametrize("text", [r[1] for r in RUNS], ids=[r[0] for r in RUNS])
def test_a_long_run_is_cut_into_bounded_pieces_that_give_it_back(text):
    pieces = list(_chunks(text))
    assert all(1 <= len(p) <= MAX_CHUNK for p in pieces) and "".join(pieces) == text
    tok = ByteBPETokenizer.train(corpus(100) + [text], 500)
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode(tok.encode("before " + text + " after")) == "before " + text + " after"


REPLACE = tokenizers._replace


def _scanned(monkeypatch, kb):
    """The ids ``_replace`` goes over while training on, then encoding, a line of ``kb``
    kilobytes of letters: the work, counted instead of timed."""
    total, real, phase = [0, 0], REPLACE, [0]

    def counting(ids, pair, new):
        total[phase[0]] += len(ids)
        return real(ids, pair, new)
    monkeypatch.setattr(tokenizers, "_replace", counting)
    line = letters(kb * 1000)
    tok = ByteBPETokenizer.train(["a few ordinary words"] * 10 + [line], 1000)
    phase[0] = 1
    assert tok.decode(tok.encode(line)) == line
    return total


def test_training_and_encoding_work_is_linear_in_a_long_line(monkeypatch):
    small, large = _scanned(monkeypatch, 20), _scanned(monkeypatch, 80)
    for phase in (0, 1):  # training, encoding
        assert large[phase] < 100 * 80_000  # uncut: one 80,000-byte chunk per merge
        assert 3 < large[phase] / small[phase] < 5  # 4 times the bytes, about 4 times the work


def test_a_saved_tokenizer_round_trips_a_long_line(tmp_path):
    line = letters(5000) + " " + "é" * 200
    tok = ByteBPETokenizer.train(corpus(100) + [line], 600)
    tok.save(tmp_path / "tok.json")
    again = tokenizers.load_tokenizer(tmp_path / "tok.json")
    assert again.encode(line) == tok.encode(line) and again.decode(again.encode(line)) == line
