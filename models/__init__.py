"""models: complete networks built from nn layers (see the [seq2seq] and [models] issues)."""
