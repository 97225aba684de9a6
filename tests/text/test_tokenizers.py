"""minigrad.text tokenizers: byte-level BPE round-trips any UTF-8 text (property-tested),
its incrementally counted training makes the same merges as a full recount per merge, the
JSON file gives back the same tokenizer; the character tokenizer; the special tokens."""
import json
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from minigrad.text import (BOS, EOS, PAD, UNK, ByteBPETokenizer, CharTokenizer,
                           load_tokenizer)
from minigrad.text.tokenizers import _CHUNK

CORPUS = ("the 3rd of March, 1999 - le 3 mars 1999 - 3. März 1999 - 3 de marzo de 1999\n"
          "Ça va? Grüße aus Köln. 東京は晴れです。 🙂🎉 naïve café, the theme of the thesis\n") * 5
SAMPLES = ["", "a", "  two  spaces ", "émigré façade", "日本語のテキスト", "emoji 🙂🎉👩‍👩‍👧",
           "tab\tand\nnewline\r\n", "under_score __init__", "<pad> <eos> look like specials",
           "\u0301 combining accent e\u0301", "١٢٣ arabic digits", "x²"]


@pytest.fixture(scope="module")
def bpe():
    return ByteBPETokenizer.train(CORPUS, 330)


@pytest.mark.parametrize("text", SAMPLES)
def test_bpe_round_trips_examples(bpe, text):
    ids = bpe.encode(text)
    assert bpe.decode(ids) == text
    assert all(i >= 4 for i in ids)  # bytes and merges only: never a special token


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_bpe_round_trips_any_unicode(text):
    tok = _shared_bpe()
    assert tok.decode(tok.encode(text)) == text


@settings(max_examples=30, deadline=None)
@given(st.text(min_size=1, max_size=200), st.integers(260, 320))
def test_bpe_trained_on_any_text_round_trips_it(corpus, vocab_size):
    tok = ByteBPETokenizer.train(corpus, vocab_size)
    assert tok.decode(tok.encode(corpus)) == corpus
    assert len(tok.encode(corpus)) <= len(corpus.encode("utf-8"))


_SHARED = []


def _shared_bpe():
    if not _SHARED:
        _SHARED.append(ByteBPETokenizer.train(CORPUS, 330))
    return _SHARED[0]


def naive_merges(text, n_merges):
    """BPE by the textbook: recount every pair of every chunk before each merge; ties go to
    the pair of smaller ids."""
    words = [[4 + b for b in w.encode("utf-8")] for w in _CHUNK.findall(text)]
    merges = []
    for k in range(n_merges):
        counts = Counter(p for w in words for p in zip(w, w[1:]))
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        new = 4 + 256 + k
        for i, w in enumerate(words):
            out, j = [], 0
            while j < len(w):
                if j < len(w) - 1 and (w[j], w[j + 1]) == best:
                    out.append(new)
                    j += 2
                else:
                    out.append(w[j])
                    j += 1
            words[i] = out
    return merges


@pytest.mark.parametrize("text", [CORPUS, "aaaaaaa aaaa aa", "abababab abab ba", "x"],
                         ids=["corpus", "runs", "alternating", "one"])
def test_incremental_training_makes_the_textbook_merges(text):
    n = 120
    assert ByteBPETokenizer.train(text, 260 + n).merges == naive_merges(text, n)


def test_training_learns_frequent_words(bpe):
    assert len(bpe) == 330
    assert len(bpe.encode(" thesis")) < len(" thesis")
    assert bpe.encode(" the") == [bpe.vocab.index("Ġthe")]


def test_save_and_load_give_the_same_tokenizer(bpe, tmp_path):
    path = tmp_path / "tok.json"
    bpe.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["type"] == "byte-bpe" and data["specials"] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert len(data["merges"]) == 330 - 260
    assert all("".join(pair) in bpe.vocab for pair in data["merges"])  # readable strings
    loaded = load_tokenizer(path)
    assert loaded.merges == bpe.merges and loaded.vocab == bpe.vocab
    for text in SAMPLES + [CORPUS]:
        assert loaded.encode(text) == bpe.encode(text)


def test_special_tokens_and_decode(bpe):
    assert (PAD, BOS, EOS, UNK) == (0, 1, 2, 3)
    assert bpe.vocab[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    ids = bpe.encode("ab")
    assert bpe.decode([BOS] + ids + [EOS] + bpe.encode("zz") + [PAD]) == "ab"
    assert bpe.decode([PAD, UNK] + ids) == "ab"


def test_errors_name_the_problem(bpe, tmp_path):
    with pytest.raises(IndexError, match=r"token id 330 is outside the vocabulary \[0, 330\)"):
        bpe.decode([5, 330])
    with pytest.raises(ValueError, match="vocab_size must be at least 260.*got 100"):
        ByteBPETokenizer.train("abc", 100)
    with pytest.raises(TypeError, match="expected a str, got bytes"):
        bpe.encode(b"abc")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not a tokenizer file"):
        load_tokenizer(bad)
    bad.write_text('{"type": "wordpiece"}')
    with pytest.raises(ValueError, match="bad.json: not a minigrad tokenizer: type 'wordpiece'"):
        load_tokenizer(bad)
    bad.write_bytes(b'{"type": "char", "chars": "\xff\xfe"}')
    with pytest.raises(ValueError, match="bad.json: not a tokenizer file .not UTF-8 text"):
        load_tokenizer(bad)
    for kind in ("char", "byte-bpe"):
        bad.write_text(f'{{"type": "{kind}"}}')
        with pytest.raises(ValueError, match="bad.json: not a tokenizer file .no field '"):
            load_tokenizer(bad)


def test_char_tokenizer(tmp_path):
    tok = CharTokenizer.train(["abca", "日本🙂"])
    assert tok.vocab[4] == "a"  # the most frequent first
    text = "cab日🙂"
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode("az") == [tok.vocab.index("a"), UNK]
    assert tok.decode(tok.encode("az")) == "a"  # <unk> is a special token: left out
    tok.save(tmp_path / "c.json")
    loaded = load_tokenizer(tmp_path / "c.json")
    assert loaded.vocab == tok.vocab and loaded.encode(text) == tok.encode(text)
    assert len(CharTokenizer.train("abcdef", vocab_size=6)) == 6


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_char_tokenizer_round_trips_what_it_was_trained_on(text):
    tok = CharTokenizer.train(text)
    assert tok.decode(tok.encode(text)) == text
