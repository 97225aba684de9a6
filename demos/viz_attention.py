"""One multi-head attention block (nn.MultiheadAttention, 16 features, 4 heads, causal
self-attention over a batch of 2 sequences of 5), drawn forward and backward.

    python -m minigrad.demos.viz_attention [--out runs/viz/viz_attention] [--png]

minigrad normally runs the attention core as one tiled op (``attention``, see
minigrad.fused.Attention); this demo asks for the composite of Tensor ops instead
(``nn.attention.sdpa_kernel(SDPBackend.MATH)``), so that each step has a node of its own.

- ``attention_forward.svg``: the forward graph. Each ``Linear`` is a cluster named after
  its path (``q_proj (Linear)``, ...) holding its parameters (blue boxes, named by their
  state-dict keys) and its one fused op, ``linear`` (x @ W^T + b). Follow the shapes down
  the middle: the projections are split into heads by
  ``reshape`` (2, 5, 4, 4) and ``permute`` (2, 4, 5, 4); ``q @ k^T`` makes the (2, 4, 5, 5)
  scores (one 5 x 5 table per head), scaled by ``const 0.5`` = 1/sqrt(head_dim), masked
  by adding the causal mask, and normalised by ``safe_softmax(dim=3)`` (a softmax that
  gives a fully masked row zeros instead of NaN); ``weights @ v`` is merged back to
  (2, 5, 16) and sent through ``out_proj``. The input x (yellow) feeds all three
  projections.
- ``attention_backward.svg``: the backward graph, drawn before ``backward()`` runs, from
  the loss down to the parameters and numbered in the engine's order (out_proj first,
  then the attention core, then v_proj, q_proj and k_proj as their branches finish). Each
  node lists the arrays it keeps for backward, with shape and bytes: each ``matmul`` and
  ``linear`` keeps both inputs, ``safe_softmax`` its output (the (2, 4, 5, 5) weights), ``add``,
  ``reshape`` and ``permute`` nothing. The caption totals the memory the graph holds,
  and how much of it is the leaves' own data (weights and x, which exist anyway).
"""

import minigrad as mg
from minigrad import nn
from minigrad.autograd import engine
from minigrad.viz.graph import held_bytes, nbytes_text, shape_text

from . import _pictures
from ._cli import make_out_dir, parse_checked, require, writing_to
from ._pictures import save, report

NAME = "viz_attention"
PICTURES = {"attention_forward": "the forward graph: the projections as clusters, the "
            "attention core step by step; follow the shapes down the middle",
            "attention_backward": "the backward graph in the engine's order, each node with "
            "the arrays it keeps; the total in the caption"}


def memory_summary(loss, model):
    """What the graph keeps for backward: the total, then per module (a buffer that two
    modules keep, like x, is counted in each)."""
    nodes = engine.topological_order([loss.grad_fn])
    total, buffers, leaf = held_bytes(nodes)
    lines = [f"saved for backward: {nbytes_text(total)} in {buffers} buffers "
             f"({nbytes_text(leaf)} of it the leaves' own data: weights and x)"]
    path_of = {id(m): name for name, m in model.named_modules()}
    groups = {}
    for node in reversed(nodes):  # in forward order
        path = path_of.get(id(node.scope))
        label = "(the loss)" if path is None else path or "(attention core)"
        groups.setdefault(label, []).append(node)
    for label, group in groups.items():
        held = held_bytes(group)
        lines.append(f"  {label:20s} {nbytes_text(held[0]):>9s} "
                     f"({nbytes_text(held[0] - held[2])} besides the leaves' data)")
    return "\n".join(lines)


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
        attn = nn.MultiheadAttention(16, num_heads=4)
        x = mg.randn(2, 5, 16, requires_grad=True)                       # (batch, time, features)
        with nn.attention.sdpa_kernel(nn.attention.SDPBackend.MATH):  # every step a node
            out, _ = attn(x, x, x, is_causal=True, need_weights=False)
        loss = (out * out).mean()
        roots = {"x": x, "loss": loss}
        paths = save(mg.viz.draw(roots, model=attn), args.out, "attention_forward", args.png)
        paths += save(mg.viz.draw(roots, model=attn, backward=True), args.out,
                      "attention_backward", args.png)
        print(memory_summary(loss, attn))
        loss.backward()
        print(f"after backward: x.grad {shape_text(x.grad.shape)}, "
              f"q_proj.weight.grad {shape_text(attn.q_proj.weight.grad.shape)}; "
              "the saved arrays are freed")
        report(args.out, paths, PICTURES)
        return paths


if __name__ == "__main__":
    main()
