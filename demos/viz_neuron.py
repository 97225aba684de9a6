"""One neuron, o = tanh(w1 x1 + w2 x2 + b), drawn as micrograd draws it: every node with its
value and, after backward, its gradient.

    python -m minigrad.demos.viz_neuron [--out runs/viz/viz_neuron] [--png]

The numbers are micrograd's own (x1 = 2, x2 = 0, w1 = -3, w2 = 1, b = 6.8814, so that
n = 0.8814 and o = tanh(n) = 0.7071). Three pictures:

- ``neuron_forward.svg``: the forward graph, left to right. Yellow ellipses are the inputs
  that require grad, grey rounded boxes the ops (``mul``, ``add``, ``tanh``), white
  ellipses the named intermediates, the green double box the output. Each tensor shows
  ``= value``.
- ``neuron_backward_graph.svg``: the graph the backward pass will run, drawn from the
  output down to the inputs and numbered in the order the engine runs it (newest node
  first: the ``mul`` of x2*w2 was recorded after that of x1*w1, so it runs as step 4,
  before step 5). Each node says
  its rule and what it keeps for backward: ``tanh`` keeps its output (its rule is
  ``1 - out * out``), each ``mul`` keeps both inputs, ``add`` keeps nothing. The caption
  totals the bytes.
- ``neuron_grads.svg``: after ``o.backward()``, every node also shows ``grad = ...``,
  coloured by its size (legend on top). Read it right to left, as the chain rule does:
  do/do = 1; do/dn = 1 - o^2 = 0.5; an ``add`` passes its gradient unchanged to both
  inputs (0.5 everywhere up to the products); a ``mul`` sends each input the *other*
  input times the gradient, so dw1 = x1 * 0.5 = 1 and dx1 = w1 * 0.5 = -1.5. w2's gradient
  is exactly 0 (x2 is 0), which the picture fills light grey ("zero" in the legend): no
  signal reaches it.
"""

import minigrad as mg

from . import _pictures
from ._cli import make_out_dir, parse_checked, require, writing_to
from ._pictures import save, report

NAME = "viz_neuron"
PICTURES = {"neuron_forward": "the forward graph, left to right: every tensor with its value",
            "neuron_backward_graph": "the graph backward runs, numbered in the engine's order, "
            "each node with its rule and what it keeps",
            "neuron_grads": "after backward: every gradient, coloured by its size; read it "
            "right to left, as the chain rule does"}


def neuron():
    """micrograd's neuron, with every intermediate named (and kept, for its gradient)."""
    x1 = mg.tensor(2.0, requires_grad=True)
    x2 = mg.tensor(0.0, requires_grad=True)
    w1 = mg.tensor(-3.0, requires_grad=True)
    w2 = mg.tensor(1.0, requires_grad=True)
    b = mg.tensor(6.8813735870195432, requires_grad=True)
    x1w1 = x1 * w1
    x2w2 = x2 * w2
    s = x1w1 + x2w2
    n = s + b
    o = n.tanh()
    nodes = {"x1": x1, "w1": w1, "x2": x2, "w2": w2, "b": b, "x1*w1": x1w1, "x2*w2": x2w2,
             "x1*w1 + x2*w2": s, "n": n, "o": o}
    for t in (x1w1, x2w2, s, n, o):
        t.retain_grad()  # intermediates keep no .grad unless asked
    return nodes


def build_parser():
    return _pictures.build_parser(NAME, __doc__)


def parse_args(argv=None):
    return parse_checked(build_parser(), argv)


def main(argv=None):
    args = parse_args(argv)
    require(NAME, "graphviz")
    make_out_dir(NAME, args.out)
    with writing_to(NAME, args.out):
        t = neuron()
        o = t["o"]
        paths = save(mg.viz.draw(t, show_values=True, rankdir="LR"), args.out, "neuron_forward",
                     args.png)
        paths += save(mg.viz.draw(t, backward=True), args.out, "neuron_backward_graph", args.png)
        o.backward()
        paths += save(mg.viz.draw(t, show_values=True, show_grad=True, rankdir="LR"), args.out,
                      "neuron_grads", args.png)
        print(f"o = tanh(w1 x1 + w2 x2 + b) = {o.item():.4f}")
        print("gradients: " + ", ".join(f"d{k} = {t[k].grad.item():g}"
                                        for k in ("x1", "w1", "x2", "w2", "b")))
        report(args.out, paths, PICTURES)
        return paths


if __name__ == "__main__":
    main()
