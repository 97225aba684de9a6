"""Text for the models: tokenizers (byte-level BPE and characters), a file of sentence
pairs as a dataset bucketed by length, and BLEU and chrF through sacrebleu."""
from .data import (PairsDataset, PairsFileError, collate, encode_pairs, read_pairs,
                   split_pairs, write_pairs)
from .metrics import bleu, chrf
from .tokenizers import (BOS, EOS, PAD, SPECIALS, UNK, ByteBPETokenizer, CharTokenizer,
                         Tokenizer, load_tokenizer)

__all__ = ["BOS", "EOS", "PAD", "SPECIALS", "UNK", "ByteBPETokenizer", "CharTokenizer",
           "Tokenizer", "load_tokenizer", "PairsDataset", "PairsFileError", "collate",
           "encode_pairs", "read_pairs", "split_pairs", "write_pairs", "bleu", "chrf"]
