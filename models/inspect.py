"""Attention maps: what every head of a models.Transformer attends to.

    maps = collect_attention(model, src, tgt)       # {"encoder_self": [per layer], ...}
    plot_attention(maps, src_tokens, tgt_tokens, "attention.png")

``collect_attention`` runs the model once and records the weights each
nn.MultiheadAttention computes itself: for the duration of the call every attention's
``forward`` is wrapped so that it is asked for ``need_weights=True,
average_attn_weights=False`` (the layers ask for no weights, to save the work), and the
caller still gets what it asked for. Nothing about attention is computed here.
"""
import contextlib
import inspect

import numpy as np

from minigrad import nn
KINDS = ("encoder_self", "decoder_self", "cross")
TITLES = {"encoder_self": "encoder self-attention", "decoder_self": "decoder self-attention",
          "cross": "cross-attention"}
# what the rows (queries) and columns (keys) of each kind of map are
AXES = {"encoder_self": ("query: source position", "key: source position"),
        "decoder_self": ("query: decoder input", "key: decoder input"),
        "cross": ("query: decoder input", "key: source position")}


def attention_modules(model):
    """(kind, layer index, nn.MultiheadAttention) for every attention of a Transformer."""
    for i, layer in enumerate(model.encoder.layers):
        yield "encoder_self", i, layer.self_attn
    for i, layer in enumerate(model.decoder.layers):
        yield "decoder_self", i, layer.self_attn
        yield "cross", i, layer.cross_attn


def collect_attention(model, src, tgt):
    """The attention weights of every layer and head for one forward pass (in eval mode,
    without gradients; the model's training flag is restored after).

    Args:
        model: a models.Transformer.
        src: (B, S) source ids; tgt: (B, T) decoder input ids (BOS, then the target).
    Returns:
        {"encoder_self": [(B, H, S, S)] * num_encoder_layers,
         "decoder_self": [(B, H, T, T)] * num_decoder_layers,
         "cross": [(B, H, T, S)] * num_decoder_layers}: host ndarrays indexed by layer,
        each row (a query) summing to 1 over the keys it may attend to.
    """
    maps = {kind: [] for kind in KINDS}
    for kind, _, _ in attention_modules(model):
        maps[kind].append(None)
    with contextlib.ExitStack() as stack, nn.utils.evaluating(model):
        for kind, i, attn in attention_modules(model):
            stack.enter_context(_recording(attn, maps[kind], i))
        model(src, tgt)
    return maps


@contextlib.contextmanager
def _recording(attn, store, index):
    """While active, every call of ``attn`` stores its per-head weights in store[index]."""
    forward = attn.forward  # the bound method (or a wrapper someone else installed)
    signature = inspect.signature(forward)

    def recording_forward(*args, **kwargs):
        call = signature.bind(*args, **kwargs)
        call.apply_defaults()
        asked = call.arguments["need_weights"], call.arguments["average_attn_weights"]
        call.arguments.update(need_weights=True, average_attn_weights=False)
        out, weights = forward(*call.args, **call.kwargs)                    # (B, H, T, S)
        store[index] = weights.numpy()
        if not asked[0]:
            return out, None
        return out, (weights.mean(1) if asked[1] else weights)

    previous = attn.__dict__.get("forward")
    object.__setattr__(attn, "forward", recording_forward)
    try:
        yield
    finally:
        if previous is None:
            object.__delattr__(attn, "forward")
        else:
            object.__setattr__(attn, "forward", previous)


def plot_attention(maps, src_tokens, tgt_tokens, path=None, index=0, kinds=KINDS):
    """A grid of heat maps, one row per (kind, layer) and one column per head, with the
    tokens as tick labels (keys across, queries down, each axis named: which sequence its
    positions come from), drawn with matplotlib's Agg canvas
    (no display needed, pyplot's state untouched).

    Args:
        maps: the dict collect_attention returns.
        src_tokens, tgt_tokens: the labels of the source and decoder-input positions of
            example ``index`` (maps are cropped to their lengths, dropping padding).
        path: where to save the picture (format from the suffix), or None.
        kinds: which of "encoder_self", "decoder_self", "cross" to draw.
    Returns:
        the matplotlib Figure.
    """
    from matplotlib.figure import Figure

    rows = [(kind, layer, maps[kind][layer]) for kind in kinds for layer in range(len(maps[kind]))]
    heads = max(w.shape[1] for _, _, w in rows)
    labels = {"encoder_self": (src_tokens, src_tokens), "decoder_self": (tgt_tokens, tgt_tokens),
              "cross": (tgt_tokens, src_tokens)}
    side = max(2.6, 0.24 * max(len(src_tokens), len(tgt_tokens)) + 1.2)
    fig = Figure(figsize=(side * heads + 0.6, side * len(rows)), layout="constrained")
    axes = np.asarray(fig.subplots(len(rows), heads, squeeze=False))
    for r, (kind, layer, weights) in enumerate(rows):
        queries, keys = labels[kind]
        for h in range(heads):
            ax = axes[r, h]
            if h >= weights.shape[1]:
                ax.set_axis_off()
                continue
            image = ax.imshow(weights[index, h, :len(queries), :len(keys)], vmin=0.0, vmax=1.0,
                              cmap="viridis", interpolation="nearest")
            ax.set_xticks(range(len(keys)), keys, fontsize=7, rotation=90)
            ax.set_yticks(range(len(queries)), queries, fontsize=7)
            ax.set_title(f"{TITLES[kind]}, layer {layer}, head {h}", fontsize=8)
            ax.set_xlabel(AXES[kind][1], fontsize=7)
            ax.set_ylabel(AXES[kind][0], fontsize=7)
    fig.colorbar(image, ax=axes, shrink=0.4, label="attention weight")
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
