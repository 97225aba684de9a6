"""A whole training step of a small encoder-decoder transformer (models.Transformer, 2+2
layers, d_model 16, 2 heads, the 2017 post-LN layout): forward, cross-entropy loss,
backward, gradient clipping and one Adam step. Its graph has a few hundred ops; folded by
module it fits on a page.

    python -m minigrad.demos.viz_transformer_step [--out runs/viz/viz_transformer_step] [--png]

- ``transformer_step_depth1.svg``: ``depth=1``, after ``backward()``, with ``show_grad``.
  The model's own children are clusters (``src_embed (Embedding)``, ``encoder
  (TransformerEncoder)``, ``generator (Linear)``, ...); everything deeper is folded into
  amber 3-D boxes that give the parameter count and output shape. The two encoder layers
  are one box, ``encoder.layers.[0-1] ×2``: identical blocks are drawn once, with one
  gradient line per block ([0], [1]). Every box and parameter is filled by the norm of its
  gradient, the figure its label prints, on a log scale from this graph's smallest (light
  yellow) to its largest (dark violet): the darker, the larger (legend on top); an exact
  zero is light grey, a NaN red. Below the model: the loss, as
  cross-entropy builds it (``log_softmax``, pick the targets, mask the padding, mean).
- ``transformer_step_depth2.svg``: ``depth=2``: the layers open up into their sublayers
  (``self_attn``, ``norm1``, ``ffn``, ``cross_attn``, ...) with the residual ``add`` s
  between them, so the encoder-decoder wiring shows: the encoder's output (the memory)
  goes into each decoder layer's ``cross_attn``. Compare the gradient sizes of the
  sublayers, block by block.
- ``transformer_step_backward_depth1.svg``: the backward graph at ``depth=1``, drawn
  before ``backward()``: the loss's nodes run first (1, 2, ...), then the generator, the
  decoder, the target embedding, the encoder and the source embedding; each folded box
  says which steps it runs (``steps 13–208 (196 nodes)``) and how much memory its saved
  tensors hold, and the caption gives the total.

``backward(retain_graph=True)`` keeps the saved arrays only so that the pictures can
still print the scalar constants the ops saved (``const 4`` = sqrt(d_model)); a training
loop would not pass it.
"""
import re

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.autograd import engine
from minigrad.models import Transformer

from . import _pictures
from ._cli import make_out_dir, parse_checked, require, writing_to
from ._pictures import save, report

NAME = "viz_transformer_step"
PICTURES = {"transformer_step_depth1": "after backward, folded by module: each box filled by "
            "the size of its gradient (legend on top)",
            "transformer_step_depth2": "the layers opened into their sublayers: the encoder's "
            "output feeds each decoder layer's cross_attn",
            "transformer_step_backward_depth1": "the backward graph before it runs: the steps "
            "each module runs and the memory it holds"}
PAD, VOCAB = 0, 12


def count_nodes(graph):
    return len(re.findall(r"^\s*n\d+ \[", graph.source, re.M))


def batch():
    """Two source sequences and their targets (BOS ... EOS, padded with 0)."""
    src = mg.tensor([[5, 7, 3, 9, 4, 2], [8, 6, 11, 2, 0, 0]])
    tgt = mg.tensor([[1, 5, 7, 3, 9], [1, 8, 6, 11, 2]])
    return src, tgt[:, :-1], tgt[:, 1:]  # source, decoder input, next tokens


def build_parser():
    return _pictures.build_parser(NAME, __doc__)


def parse_args(argv=None):
    return parse_checked(build_parser(), argv)


def main(argv=None):
    args = parse_args(argv)
    require(NAME, "graphviz")
    make_out_dir(NAME, args.out)
    with writing_to(NAME, args.out):
        mg.manual_seed(0)
        model = Transformer(VOCAB, VOCAB, d_model=16, nhead=2, num_encoder_layers=2,
                            num_decoder_layers=2, dim_feedforward=32, dropout=0.0, pad_id=PAD)
        optimizer = mg.optim.Adam(model.parameters(), lr=1e-3)
        src, tgt_in, tgt_out = batch()
        logits = model(src, tgt_in)                                      # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), ignore_index=PAD)
        ops = len(engine.topological_order([loss.grad_fn]))
        roots = {"loss": loss}

        pictures = {"transformer_step_backward_depth1":
                    mg.viz.draw(roots, model=model, depth=1, backward=True)}
        loss.backward(retain_graph=True)
        for depth in (1, 2):  # the gradients as backward left them, before clipping
            pictures[f"transformer_step_depth{depth}"] = mg.viz.draw(
                roots, model=model, depth=depth, show_grad=True)
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        with nn.utils.evaluating(model):
            after = F.cross_entropy(model(src, tgt_in).reshape(-1, VOCAB), tgt_out.reshape(-1),
                                    ignore_index=PAD)

        print(f"loss {loss.item():.4f} -> {after.item():.4f} after one Adam step "
              f"(gradient norm {norm.item():.3f}, clipped to 1)")
        print(f"the graph has {ops} ops; drawn: " + ", ".join(
            f"{name.replace('transformer_step_', '')} {count_nodes(g)} nodes"
            for name, g in pictures.items()))
        paths = []
        for name in ("transformer_step_depth1", "transformer_step_depth2",
                     "transformer_step_backward_depth1"):
            paths += save(pictures[name], args.out, name, args.png)
        report(args.out, paths, PICTURES)
        return paths


if __name__ == "__main__":
    main()
