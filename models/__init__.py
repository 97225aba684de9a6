"""models: complete networks built from nn layers (see the [seq2seq] and [models] issues)."""
from .transformer import Transformer  # noqa: F401
