"""As ``torch.nn.utils.rnn``: ``pad_sequence``."""


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Sequences of shapes (L_i, *) stacked into one tensor, padded with ``padding_value``
    to the longest: (L, B, *), or (B, L, *) with ``batch_first``; ``padding_side="left"``
    pads before each sequence. The dtype and device are the first sequence's (the padding
    value cast to it); differentiable, the sequences written in place into the padding
    (PyTorch's CopySlices)."""
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    first = sequences[0]
    if first.ndim == 0:
        raise RuntimeError("pad_sequence: each sequence must have at least one dim (its "
                           "length), got a 0-d tensor")
    longest = max(s.shape[0] for s in sequences)
    out = first.new_full((len(sequences), longest) + tuple(first.shape[1:]), padding_value)
    for i, s in enumerate(sequences):
        n = s.shape[0]
        if padding_side == "left":
            out[i, longest - n:] = s
        else:
            out[i, :n] = s
    return out if batch_first else out.transpose(0, 1)
