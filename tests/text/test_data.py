"""minigrad.text data: reading a pairs file (errors name the line), the held-out split,
batches bucketed by length with padding masks, and BLEU / chrF through sacrebleu."""
import numpy as np
import pytest

from minigrad.text import (BOS, EOS, PAD, CharTokenizer, PairsDataset, PairsFileError, collate,
                           encode_pairs, read_pairs, split_pairs, write_pairs)
from minigrad.text.data import is_held_out


def write(tmp_path, content, name="pairs.tsv"):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def test_read_pairs(tmp_path):
    path = write(tmp_path, "a b\tc\n\nd\té f\r\n  \ng\th")
    assert read_pairs(path) == [("a b", "c"), ("d", "é f"), ("g", "h")]
    pairs = [("x", "y"), ("日本", "🙂 z")]
    write_pairs(tmp_path / "out.tsv", pairs)
    assert read_pairs(tmp_path / "out.tsv") == pairs


@pytest.mark.parametrize("content, message", [
    ("", r"empty\.tsv is empty"),
    ("\n \n", r"empty\.tsv is empty"),
    ("a b\nc d\n", r"has no tab on any line"),
    ("a\tb\nno tab here\nc\td\n", r"line 2: expected 'source<TAB>target', found no tab"),
    ("a\tb\nc\td\te\n", r"line 2: expected 'source<TAB>target', found 2 tabs"),
    ("a\tb\n\t x\n", r"line 2: the source is empty"),
    ("a\tb\nc\td\nx\t  \n", r"line 3: the target is empty"),
    (b"a\tb\n\xff\tc\n", r"line 2: not UTF-8 text"),
])
def test_read_pairs_errors_name_the_line(tmp_path, content, message):
    path = write(tmp_path, content, "empty.tsv")
    with pytest.raises(PairsFileError, match=message):
        read_pairs(path)


def test_split_keeps_each_source_on_one_side():
    rng = np.random.default_rng(0)
    pairs = [(f"s{rng.integers(3000)}", "t") for _ in range(6000)]
    train, held = split_pairs(pairs)
    assert {s for s, _ in train}.isdisjoint({s for s, _ in held})
    assert len(train) + len(held) == len(pairs)
    assert 0.07 < len(held) / len(pairs) < 0.13
    assert all(is_held_out(s) for s, _ in held)


def test_encode_pairs_drops_long_pairs():
    tok = CharTokenizer.train("abcdef")
    examples, dropped = encode_pairs([("ab", "c"), ("abcd", "e"), ("a", "bcdef")], tok,
                                     max_src_len=3, max_tgt_len=4)
    assert dropped == 2 and examples == [(tok.encode("ab"), tok.encode("c"))]


def make_examples(n, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.integers(4, 20, rng.integers(1, 40)).tolist(),
             rng.integers(4, 20, rng.integers(1, 40)).tolist()) for _ in range(n)]


def test_batches_are_a_pure_function_of_seed_and_step_and_cover_each_epoch():
    examples = make_examples(1000)
    a, b = PairsDataset(examples, seed=3), PairsDataset(examples, seed=3)
    for step in (0, 5, 17, 3):
        for x, y in zip(a.batch(step, 64), b.batch(step, 64)):
            np.testing.assert_array_equal(x, y)
    n = a.batches_per_epoch(64)
    seen = [tuple(map(tuple, e)) for step in range(n) for e in a.train_examples(step, 64)]
    assert sorted(seen) == sorted(tuple(map(tuple, e)) for e in examples)  # each once
    other = PairsDataset(examples, seed=4)
    assert any(not np.array_equal(x, y) for x, y in zip(a.batch(0, 64), other.batch(0, 64)))


def test_bucketing_cuts_padding():
    examples = make_examples(3200)
    data = PairsDataset(examples, seed=0)

    def padding(batches):
        src = [collate(b)[3] for b in batches]
        return sum(m.sum() for m in src) / sum(m.size for m in src)
    n = data.batches_per_epoch(64)
    bucketed = padding([data.train_examples(s, 64) for s in range(n)])
    unsorted = padding([examples[i:i + 64] for i in range(0, len(examples), 64)])
    assert bucketed < unsorted / 4


def test_collate_pads_and_masks():
    src, tgt_in, tgt_out, src_mask, tgt_mask = collate([([5, 6, 7], [8]), ([9], [10, 11])])
    np.testing.assert_array_equal(src, [[5, 6, 7], [9, PAD, PAD]])
    np.testing.assert_array_equal(tgt_in, [[BOS, 8, PAD], [BOS, 10, 11]])
    np.testing.assert_array_equal(tgt_out, [[8, EOS, PAD], [10, 11, EOS]])
    np.testing.assert_array_equal(src_mask, src == PAD)
    np.testing.assert_array_equal(tgt_mask, [[False, False, True], [False, False, False]])


def test_empty_dataset_is_refused():
    with pytest.raises(ValueError, match="PairsDataset: no examples"):
        PairsDataset([])


def test_bleu_and_chrf_are_sacrebleus():
    sacrebleu = pytest.importorskip("sacrebleu")
    from minigrad.text import bleu, chrf
    hyps = ["the cat sat on the mat", "1999-03-03", "a b c d"]
    refs = ["the cat sat on a mat", "1999-03-03", "a b x d"]
    assert bleu(hyps, refs) == sacrebleu.corpus_bleu(hyps, [refs]).score
    assert chrf(hyps, refs) == sacrebleu.corpus_chrf(hyps, [refs]).score
    assert bleu(refs, refs) == pytest.approx(100.0) and chrf(refs, refs) == pytest.approx(100.0)
    assert 0 < bleu(hyps, refs) < 100
    with pytest.raises(ValueError, match="3 hypotheses but 2 references"):
        bleu(hyps, refs[:2])
