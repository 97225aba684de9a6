"""Byte-level BPE on a pairs file with one very long line: training and encoding time and
peak memory, against the same file without that line.

    python -m benchmarks.bpe [--lines 2000] [--long-kb 100,1000] [--vocab-size 1000]

The ordinary file is ``--lines`` pairs of sentences (``source<TAB>target``: made-up
words of two made-up languages from a seeded generator, see ``ordinary_lines``); each long
case adds one line of ``--long-kb`` kilobytes of letters without a space, as a pasted blob
or a broken export gives. ``ByteBPETokenizer.train`` learns ``--vocab-size`` tokens from
the sources and targets (as ``python -m minigrad.demos.seq2seq --data`` does), then the
tokenizer encodes every text once and checks that decoding gives each back. Each case runs
in a process of its own, which reports its time and its peak resident memory
(``ru_maxrss``, which includes the interpreter and NumPy: the "idle" row is that floor).
Pre-tokenization cuts a run longer than ``tokenizers.MAX_CHUNK`` characters into pieces,
and a merge in training only recounts the pairs around it, so the work grows linearly
with the long line (random letters cost more per byte than words, which repeat). Speed is
reported, never asserted.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

# the syllables of two made-up languages, the sources' and the targets'
SOURCE = ("ka ri to na mi sel ver an dor le tha ung pre com ist ment ion ber gen wal "
          "ot ra be fu lo ste mar qui zen ho ly ap ex im ous ca ro de si").split()
TARGET = ("ein sch ung lich ver ge be keit tra mo ur ach ist auf wel der die aus vor "
          "hei zu ne fa ro bil mit ter che").split()


def lexicon(syllables, n, rng):
    """``n`` made-up words of one to four syllables, the most frequent first."""
    words = {}
    while len(words) < n:
        word = "".join(rng.choice(syllables) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        words.setdefault(word, None)
    return list(words)


def ordinary_lines(n, seed=0):
    """``n`` pairs of one or two sentences in each language: words drawn from a lexicon of
    20,000 with Zipf's law (as a language's, a long tail of rare words), a number now and
    then, punctuation; about 150 bytes a pair."""
    rng = random.Random(seed)
    languages = []
    for syllables in (SOURCE, TARGET):
        words = lexicon(syllables, 20000, rng)
        languages.append((words, [1 / (rank + 1) for rank in range(len(words))]))

    def text(words, weights):
        sentences = []
        for _ in range(rng.choice((1, 1, 2))):
            chosen = rng.choices(words, weights, k=rng.randint(5, 16))
            if rng.random() < 0.3:
                chosen.insert(rng.randrange(len(chosen)), str(rng.randint(1, 2000)))
            sentences.append(" ".join(chosen).capitalize() + rng.choice(".!?,;"))
        return " ".join(sentences)
    return [f"{text(*languages[0])}\t{text(*languages[1])}" for _ in range(n)]


def long_line(kb, seed=1):
    """One pair whose source is ``kb`` kilobytes of letters without a space."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(rng.choice(letters) for _ in range(kb * 1000)) + "\tx"


def write_file(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


CHILD = """
import json, resource, sys, time
from minigrad.text import ByteBPETokenizer
path, vocab_size, idle = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "idle"
texts = [s for line in open(path, encoding="utf-8").read().splitlines()
         for s in line.split("\\t")]
train = encode = 0.0
if not idle:
    start = time.perf_counter()
    tok = ByteBPETokenizer.train(texts, vocab_size)
    train = time.perf_counter() - start
    start = time.perf_counter()
    ids = [tok.encode(t) for t in texts]
    encode = time.perf_counter() - start
    assert all(tok.decode(i) == t for i, t in zip(ids, texts)), "decode(encode(s)) != s"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
print(json.dumps(dict(train=train, encode=encode, peak_mb=peak)))
"""


def measure(path, vocab_size, idle=False):
    """(train seconds, encode seconds, peak MB) of one process on the file at ``path``."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", CHILD, path, str(vocab_size),
                           "idle" if idle else "run"], capture_output=True, text=True,
                          env=env, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.bpe", description=__doc__.split(
        "\n")[0])
    p.add_argument("--lines", type=int, default=2000, help="ordinary pairs (default: 2000)")
    p.add_argument("--long-kb", default="100,1000",
                   help="sizes of the long line, in KB, one case each (default: 100,1000)")
    p.add_argument("--vocab-size", type=int, default=1000, help="tokens (default: 1000)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    sizes = [int(s) for s in args.long_kb.split(",") if s]
    lines = ordinary_lines(args.lines)
    with tempfile.TemporaryDirectory() as folder:
        cases = [("ordinary", lines)] + [(f"+ {kb} KB line", lines + [long_line(kb)])
                                         for kb in sizes]
        print(f"byte-level BPE, vocab {args.vocab_size}, {args.lines} ordinary pairs "
              f"(each case in its own process)")
        print(f"{'file':<16}{'size':>10}{'train s':>10}{'encode s':>10}{'peak MB':>10}"
              f"{'time x':>9}{'memory x':>10}")
        idle = measure_file(folder, "idle", lines, args.vocab_size, idle=True)
        print(f"{'idle':<16}{'':>10}{'':>10}{'':>10}{idle['peak_mb']:>10.0f}")
        base = None
        for name, case in cases:
            size = sum(len(line.encode()) + 1 for line in case)
            r = measure_file(folder, name, case, args.vocab_size)
            total = r["train"] + r["encode"]
            if base is None:
                base = (total, r["peak_mb"])
            print(f"{name:<16}{size / 1000:>8.0f}KB{r['train']:>10.2f}{r['encode']:>10.2f}"
                  f"{r['peak_mb']:>10.0f}{total / base[0]:>8.2f}x{r['peak_mb'] / base[1]:>9.2f}x")


def measure_file(folder, name, lines, vocab_size, idle=False):
    path = os.path.join(folder, name.replace(" ", "_").replace("+", "plus") + ".tsv")
    write_file(path, lines)
    return measure(path, vocab_size, idle)


if __name__ == "__main__":
    main()
