"""Tokenizers: text to token ids and back, with one interface.

    tok = ByteBPETokenizer.train(texts, vocab_size=1000)   # or CharTokenizer.train(texts)
    ids = tok.encode("the 3rd of März, 1999")             # [int], no BOS or EOS
    tok.decode(ids)                                        # the text again, exactly
    tok.save("tokenizer.json"); tok = load_tokenizer("tokenizer.json")

Every tokenizer starts its vocabulary with the special tokens ``<pad> <bos> <eos> <unk>``
(ids 0, 1, 2, 3; ``pad_id``, ``bos_id``, ``eos_id``, ``unk_id``); ``decode`` leaves them
out and stops at the first ``<eos>``.

``ByteBPETokenizer`` is byte-level byte-pair encoding (Sennrich et al., 2016, on bytes as
GPT-2's): the base vocabulary is the 256 bytes, so any UTF-8 text (accents, CJK, emoji) is
encoded without ``<unk>`` and ``decode(encode(s)) == s``. Text is first cut into chunks (a
word with its leading space, a run of punctuation, a run of spaces, each digit alone; a
run longer than ``MAX_CHUNK`` characters in pieces of that length), and merges never cross
a chunk. Training repeats: merge the most frequent adjacent pair of tokens (ties: the pair
of smaller ids) into a new token. Pair counts are kept up to date incrementally: a merge
only revisits the distinct chunks that hold the pair and recounts only the pairs beside
each occurrence, so training costs about the size of the text plus the work of the merges,
not a recount per merge.

``CharTokenizer`` has one token per character seen in training; other characters become
``<unk>``.

Both save to and load from a readable JSON file. Token strings in it show bytes as GPT-2
does: a printable character per byte (a space is ``Ġ``).
"""
import heapq
import json
import re
from collections import Counter, defaultdict
from itertools import repeat
from ..files import naming

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
PAD, BOS, EOS, UNK = range(4)

# a word with an optional leading space, a digit alone, a run of other non-space
# characters with an optional leading space, or a run of spaces
_CHUNK = re.compile(r" ?[^\W\d_]+| ?\d| ?[^\s\w]+|_+|\s+")
# the longest chunk, in characters: a longer run (a line of letters without a space, a
# pasted blob) is cut into pieces of this length, as production tokenizers bound their
# pre-tokens. Training revisits a chunk at every merge of a pair it holds and encoding
# merges a chunk in time quadratic in its length, so an unbounded chunk made both
# quadratic in the longest run; ordinary words (and runs of spaces or punctuation) are far
# shorter and stay whole.
MAX_CHUNK = 64


def _chunks(text):
    """The chunks of ``text``: ``_CHUNK``'s matches, a longer one than ``MAX_CHUNK``
    characters cut into pieces of ``MAX_CHUNK`` (the last one shorter)."""
    for chunk in _CHUNK.findall(text):
        if len(chunk) <= MAX_CHUNK:
            yield chunk
        else:
            yield from (chunk[i:i + MAX_CHUNK] for i in range(0, len(chunk), MAX_CHUNK))


class Tokenizer:
    """What every tokenizer has: ``vocab`` (token strings by id), the special ids,
    ``encode``, ``decode``, ``token``, ``to_dict`` / ``from_dict``, ``save`` / ``load``."""

    kind = None
    pad_id, bos_id, eos_id, unk_id = PAD, BOS, EOS, UNK
    specials = SPECIALS

    @property
    def vocab_size(self):
        return len(self.vocab)

    def __len__(self):
        return len(self.vocab)

    def token(self, i):
        """The readable string of token ``i``."""
        if not 0 <= i < len(self.vocab):
            raise IndexError(f"{type(self).__name__}: token id {i} is outside the vocabulary "
                             f"[0, {len(self.vocab)})")
        return self.vocab[i]

    def encode(self, text):
        raise NotImplementedError

    def decode(self, ids):
        raise NotImplementedError

    def _content(self, ids):
        """The ids before the first EOS, special tokens left out; an id outside the
        vocabulary raises IndexError naming it."""
        out = []
        for i in ids:
            i = int(i)
            if i == EOS:
                break
            if not 0 <= i < len(self.vocab):
                raise IndexError(f"{type(self).__name__}.decode: token id {i} is outside the "
                                 f"vocabulary [0, {len(self.vocab)})")
            if i >= len(SPECIALS):
                out.append(i)
        return out

    def save(self, path):
        """Write the tokenizer to ``path`` as readable JSON."""
        with naming(path), open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, ensure_ascii=False, indent=1)
            f.write("\n")

    @staticmethod
    def from_dict(d):
        """The tokenizer that ``to_dict`` described (of either kind)."""
        kinds = {cls.kind: cls for cls in (ByteBPETokenizer, CharTokenizer)}
        kind = d.get("type") if isinstance(d, dict) else None
        if kind not in kinds:
            raise ValueError(f"not a minigrad tokenizer: type {kind!r}, expected one of "
                             f"{sorted(kinds)}")
        return kinds[kind]._from_dict(d)


def load_tokenizer(path):
    """The tokenizer saved at ``path`` (a ByteBPETokenizer or a CharTokenizer)."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not a tokenizer file (not UTF-8 text: {e.reason} at byte "
                         f"{e.start})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not a tokenizer file (invalid JSON: {e})") from None
    try:
        return Tokenizer.from_dict(d)
    except KeyError as e:
        raise ValueError(f"{path}: not a tokenizer file (no field {e.args[0]!r})") from None
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: {e}") from None


# --- byte-level BPE ---------------------------------------------------------------------------

def _byte_symbols():
    """GPT-2's printable stand-in for each byte: printable Latin-1 bytes stand for
    themselves, the others are moved to code points from 256 up."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_SYMBOL = _byte_symbols()
SYMBOL_BYTE = {s: b for b, s in BYTE_SYMBOL.items()}


def _readable(data):
    return "".join(BYTE_SYMBOL[b] for b in data)


class ByteBPETokenizer(Tokenizer):
    """Byte-level BPE (see the module docstring).

    Args:
        merges: the learned merges in order, each a pair of token ids; merge k makes token
            ``4 + 256 + k``.
    """

    kind = "byte-bpe"

    def __init__(self, merges=()):
        self.merges = [tuple(m) for m in merges]
        self._bytes = [s.encode() for s in SPECIALS] + [bytes([b]) for b in range(256)]
        self.ranks = {}
        for rank, (a, b) in enumerate(self.merges):
            if not (0 <= a < len(self._bytes) and 0 <= b < len(self._bytes)):
                raise ValueError(f"merge {rank} ({a}, {b}) names a token that does not exist "
                                 "yet")
            self.ranks[(a, b)] = rank
            self._bytes.append(self._bytes[a] + self._bytes[b])
        self.vocab = list(SPECIALS) + [_readable(t) for t in self._bytes[len(SPECIALS):]]
        self._cache = {}

    @classmethod
    def train(cls, texts, vocab_size):
        """Learn merges from ``texts`` (a string or an iterable of strings) until the
        vocabulary has ``vocab_size`` tokens (fewer if no pair is left to merge)."""
        base = len(SPECIALS) + 256
        if vocab_size < base:
            raise ValueError(f"ByteBPETokenizer.train: vocab_size must be at least {base} "
                             f"(4 special tokens and 256 bytes), got {vocab_size}")
        counts = Counter()
        for text in [texts] if isinstance(texts, str) else texts:
            counts.update(_chunks(text))
        return cls(_learn_merges(counts, vocab_size - base))

    def encode(self, text):
        if not isinstance(text, str):
            raise TypeError(f"ByteBPETokenizer.encode: expected a str, got "
                            f"{type(text).__name__}")
        out = []
        for chunk in _chunks(text):
            ids = self._cache.get(chunk)
            if ids is None:
                ids = self._cache[chunk] = self._merge(chunk)
            out.extend(ids)
        return out

    def _merge(self, chunk):
        """The token ids of one chunk: its bytes, then the merges applied by rank (the
        lowest-ranked pair present first; the search over pairs runs in C)."""
        base = len(SPECIALS)
        ids = [base + b for b in chunk.encode("utf-8")]
        ranks, never = self.ranks, len(self.merges)
        while len(ids) > 1:
            rank = min(map(ranks.get, zip(ids, ids[1:]), repeat(never)))
            if rank == never:
                break
            ids = _replace(ids, self.merges[rank], base + 256 + rank)[0]
        return ids

    def decode(self, ids):
        data = b"".join(self._bytes[i] for i in self._content(ids))
        return data.decode("utf-8", errors="replace")

    def to_dict(self):
        readable = self.vocab
        return {"type": self.kind, "specials": list(SPECIALS),
                "merges": [[readable[a], readable[b]] for a, b in self.merges]}

    @classmethod
    def _from_dict(cls, d):
        ids = {s: i for i, s in enumerate(SPECIALS)}
        ids.update({BYTE_SYMBOL[b]: len(SPECIALS) + b for b in range(256)})
        merges = []
        for k, pair in enumerate(d["merges"]):
            a, b = pair
            if a not in ids or b not in ids:
                raise ValueError(f"merge {k} {pair!r} names a token not made before it")
            merges.append((ids[a], ids[b]))
            ids.setdefault(a + b, len(ids))
        return cls(merges)


def _replace(ids, pair, new):
    """``ids`` with every non-overlapping occurrence of ``pair``, left to right, as ``new``;
    returns (that list, the positions of the occurrences in ``ids``, the positions of
    ``new`` in the list). The occurrences are found with ``list.index`` (in C), so a pair
    that a long chunk holds rarely costs little."""
    a, b = pair
    out, at, made = [], [], []
    start, i, stop = 0, 0, len(ids) - 1  # an occurrence starts before the last id
    while True:
        try:
            i = ids.index(a, i, stop)
        except ValueError:
            break
        if ids[i + 1] == b:
            out.extend(ids[start:i])
            at.append(i)
            made.append(len(out))
            out.append(new)
            i += 2
            start = i
        else:
            i += 1
    out.extend(ids[start:])
    return out, at, made


def _pairs(ids):
    return Counter(zip(ids, ids[1:]))


def _around(positions, after, n):
    """The positions of the pairs (of a list with ``n`` pairs) that touch the tokens at
    ``positions``: of a merged pair at i, the pairs at i - 1, i and i + 1 (``after`` = 1);
    of a new token at j, those at j - 1 and j (``after`` = 0). Only these pairs' counts
    change with a merge."""
    if len(positions) == 1:  # the usual case, without a set
        i = positions[0]
        return range(max(i - 1, 0), min(i + after + 1, n))
    return sorted({k for i in positions for k in range(max(i - 1, 0), min(i + after + 1, n))})


def _learn_merges(chunk_counts, n_merges):
    """BPE's merges over distinct chunks with their counts, with incremental pair counts:
    ``pair_count`` (the corpus count of every adjacent pair), ``where`` (the chunks that
    hold it) and a heap of (-count, pair) whose stale entries are skipped when popped."""
    base = len(SPECIALS)
    words = [[base + b for b in w.encode("utf-8")] for w in chunk_counts]
    freq = list(chunk_counts.values())
    pair_count, where = defaultdict(int), defaultdict(set)
    for w, (ids, f) in enumerate(zip(words, freq)):
        for pair, n in _pairs(ids).items():
            pair_count[pair] += n * f
            where[pair].add(w)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        neg, pair = heapq.heappop(heap)
        if pair_count.get(pair, 0) != -neg:
            continue  # stale: the count changed since this entry was pushed
        if -neg <= 0:
            break
        new = base + 256 + len(merges)
        merges.append(pair)
        delta = defaultdict(int)  # the change of each pair's count by this merge
        for w in where.pop(pair):
            old = words[w]
            merged, at, made = _replace(old, pair, new)
            if not at:
                continue  # merged away since (``where`` keeps chunks that no longer hold it)
            f = freq[w]
            for k in _around(at, 1, len(old) - 1):
                delta[old[k], old[k + 1]] -= f
            for k in _around(made, 0, len(merged) - 1):
                p = merged[k], merged[k + 1]
                delta[p] += f
                where[p].add(w)
            words[w] = merged
        pair_count.pop(pair, None)
        for p, d in delta.items():  # only the pairs whose count changed: a fresh heap entry
            if d == 0 or p == pair:
                continue
            c = pair_count.get(p, 0) + d
            if c > 0:
                pair_count[p] = c
                heapq.heappush(heap, (-c, p))
            else:
                pair_count.pop(p, None)
    return merges


# --- characters -------------------------------------------------------------------------------

class CharTokenizer(Tokenizer):
    """One token per character (of those given; any other becomes ``<unk>``).

    Args:
        chars: the characters of the vocabulary, in id order after the special tokens.
    """

    kind = "char"

    def __init__(self, chars):
        chars = list(dict.fromkeys(chars))
        for c in chars:
            if len(c) != 1:
                raise ValueError(f"CharTokenizer: tokens must be single characters, got {c!r}")
        self.vocab = list(SPECIALS) + chars
        self._ids = {c: len(SPECIALS) + i for i, c in enumerate(chars)}

    @classmethod
    def train(cls, texts, vocab_size=None):
        """The characters of ``texts``, most frequent first (ties in code-point order),
        at most ``vocab_size`` tokens in all when given."""
        counts = Counter()
        for text in [texts] if isinstance(texts, str) else texts:
            counts.update(text)
        chars = sorted(counts, key=lambda c: (-counts[c], c))
        if vocab_size is not None:
            chars = chars[:max(0, vocab_size - len(SPECIALS))]
        return cls(chars)

    def encode(self, text):
        if not isinstance(text, str):
            raise TypeError(f"CharTokenizer.encode: expected a str, got {type(text).__name__}")
        return [self._ids.get(c, UNK) for c in text]

    def decode(self, ids):
        return "".join(self.vocab[i] for i in self._content(ids))

    def to_dict(self):
        return {"type": self.kind, "specials": list(SPECIALS),
                "chars": self.vocab[len(SPECIALS):]}

    @classmethod
    def _from_dict(cls, d):
        return cls(d["chars"])
