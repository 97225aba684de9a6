"""The attention example worked by hand, computed by the engine: one query, three keys.

    python -m minigrad.demos.attention_by_hand [--out DIR] [--device cpu|cuda]

"I love NLP" with one-number embeddings: the query of "love" is q = 2, the keys of the
three words are k = [1, 2, 3] and their values v = [2, 4, 6]. Attention scores each key by
q * k (the dot product; with one dimension the 1/sqrt(d) scaling is 1), turns the scores
into weights by a softmax, and returns the weighted sum of the values. The program prints
each step as minigrad computes it, the gradient of the output with respect to the query
(and the keys and values) from ``backward()``, checks every number against the formula
worked out by hand in plain Python, and draws the graph with the value and gradient of
every node (``attention_graph.svg`` in --out, with the DOT text beside it).
"""
import json
import math
import os
import textwrap

import minigrad as mg

from ._cli import (add_device_option, make_out_dir, make_parser, naming, parse_checked,
                   print_written, summary, writing_to)

QUERY, KEYS, VALUES = 2.0, [1.0, 2.0, 3.0], [2.0, 4.0, 6.0]
WORDS = ["I", "love", "NLP"]
ROUNDED_WEIGHTS = [0.1, 0.3, 0.6]             # a rounded hand calculation that misleads


def attention(q=QUERY, keys=KEYS, values=VALUES, device="cpu"):
    """Every step of the attention of one query over the keys, by the engine, after
    ``out.backward()``: a dict of the tensors q, keys, values, scores, weights, out (in
    float64; the intermediates keep their gradients)."""
    def leaf(x):
        return mg.tensor(x, dtype=mg.float64, device=device, requires_grad=True)
    q, k, v = leaf(q), leaf(keys), leaf(values)
    scores = q * k                                         # (3,) q . k_i for 1-d embeddings
    weights = scores.softmax(0)                            # (3,)
    out = (weights * v).sum()                              # ()
    for t in (scores, weights, out):  # so that every node of the picture shows its gradient
        t.retain_grad()
    out.backward()
    return {"q": q, "keys": k, "values": v, "scores": scores, "weights": weights, "out": out}


def by_hand(q=QUERY, keys=KEYS, values=VALUES):
    """The same numbers from the formulas, in plain Python floats:
    s_i = q k_i, w_i = e^(s_i) / sum_j e^(s_j), o = sum_i w_i v_i, and by the chain rule
    (dw_i/ds_j = w_i (delta_ij - w_j)):
    do/dq = sum_i w_i k_i (v_i - o), do/dk_i = q w_i (v_i - o), do/dv_i = w_i."""
    scores = [q * k for k in keys]
    exps = [math.exp(s) for s in scores]
    weights = [e / sum(exps) for e in exps]
    out = sum(w * v for w, v in zip(weights, values))
    return {"scores": scores, "weights": weights, "out": out,
            "dq": sum(w * k * (v - out) for w, k, v in zip(weights, keys, values)),
            "dkeys": [q * w * (v - out) for w, v in zip(weights, values)],
            "dvalues": weights}


def fmt(xs, digits=6):
    return "[" + ", ".join(f"{x:.{digits}f}" for x in xs) + "]"


def report(t, hand):
    """The worked example as text: each step by the engine, checked against ``hand``."""
    w, out = t["weights"].tolist(), t["out"].item()
    rounded_out = sum(r * v for r, v in zip(ROUNDED_WEIGHTS, VALUES))
    engine = [out, t["q"].grad.item()] + w + t["keys"].grad.tolist()
    formulas = [hand["out"], hand["dq"]] + hand["weights"] + hand["dkeys"]
    worst = max(abs(a - b) for a, b in zip(engine, formulas))
    return "\n".join([
        'Attention by hand: "I love NLP", the query of "love" attends to all three words',
        f"  query q = {QUERY:g}   keys k = {KEYS}   values v = {VALUES}",
        "",
        "1. scores   s_i = q * k_i                   = " + fmt(t["scores"].tolist(), 1),
        "2. weights  w_i = e^s_i / sum_j e^s_j       = " + fmt(w),
        f"             (= [e^2, e^4, e^6] / {sum(math.exp(s) for s in hand['scores']):.4f};"
        f" they sum to {sum(w):.6f})",
        f"3. output   o = sum_i w_i v_i               = {out:.6f}",
        f"4. backward do/dq = sum_i w_i k_i (v_i - o)  = {t['q'].grad.item():.6f}",
        "             do/dk_i = q w_i (v_i - o)       = " + fmt(t["keys"].grad.tolist()),
        "             do/dv_i = w_i                   = " + fmt(t["values"].grad.tolist()),
        f"   Worked by hand in plain Python: the same numbers (largest difference "
        f"{worst:.1e}).",
    ] + [""] + textwrap.wrap(
        f"The correct weights are about {fmt(w, 3)} and the output about {out:.2f}. "
        f"A rounded hand calculation such as {ROUNDED_WEIGHTS} -> {rounded_out:.1f} "
        f"would mislead: softmax is exponential, so each step of 2 in the score multiplies "
        f'a weight by e^2 = {math.exp(2):.1f}; "NLP" takes {w[2]:.0%} of the attention, '
        f"not 60%, and the output is {out:.2f}, not {rounded_out:.1f} (off by "
        f"{out - rounded_out:.2f}, {(out - rounded_out) / out:.0%}). Weights merely "
        f"proportional to the scores, [2, 4, 6] / 12, would give "
        f"{sum(s / 12 * v for s, v in zip(hand['scores'], VALUES)):.2f}, further off "
        f"still. The output is an average weighted by w, so every error in the weights "
        f"goes straight into it.", width=88))


def draw(t, out_dir):
    """The graph with values and gradients on every node: the DOT text always, and an SVG
    when Graphviz's ``dot`` is installed. Returns (svg path or None, dot path, message)."""
    os.makedirs(out_dir, exist_ok=True)
    names = {'q ("love")': t["q"], "keys": t["keys"], "values": t["values"],
             "scores = q*k": t["scores"], "weights = softmax": t["weights"],
             "out": t["out"]}
    try:
        graph = mg.viz.draw(names, show_values=True, show_grad=True, rankdir="LR")
    except ImportError as err:  # the graphviz Python package
        return None, None, f"No graph drawn: {err}"
    dot_path = os.path.join(out_dir, "attention_graph.dot")
    with naming(dot_path), open(dot_path, "w") as f:
        f.write(graph.source)
    try:
        svg = mg.viz.render(graph, os.path.join(out_dir, "attention_graph.svg"))
    except mg.viz.GraphvizNotFound as err:
        return None, dot_path, f"No SVG written ({dot_path} has the DOT text).\n{err}"
    return svg, dot_path, f"Graph with values and gradients: {svg}"


def build_parser():
    parser = make_parser("attention_by_hand", summary(__doc__))
    parser.add_argument("--out", default="runs/attention_by_hand",
                        help="output folder of the graph and metrics.json")
    add_device_option(parser)
    return parser


def parse_args(argv=None):
    return parse_checked(build_parser(), argv)


def main(argv=None):
    args = parse_args(argv)
    make_out_dir("attention_by_hand", args.out)
    with writing_to("attention_by_hand", args.out):
        t, hand = attention(device=args.device), by_hand()
        print(report(t, hand))
        svg, dot_path, message = draw(t, args.out)
        if svg is None:
            print("\n" + message)
        metrics = {"scores": t["scores"].tolist(), "weights": t["weights"].tolist(),
                   "output": t["out"].item(), "grad_query": t["q"].grad.item(),
                   "grad_keys": t["keys"].grad.tolist(), "grad_values": t["values"].grad.tolist(),
                   "hand": hand, "graph_svg": svg}
        path = os.path.join(args.out, "metrics.json")
        with naming(path), open(path, "w") as f:
            json.dump(metrics, f, indent=2)
        print_written(args.out, written_files(svg, dot_path))
        return metrics


def written_files(svg, dot_path):
    """What the program wrote, with what to look at in each."""
    files = [("metrics.json", "every number above, and the same worked by hand (\"hand\")")]
    if svg:
        files.append((svg, "the graph, left to right: each node's value and its gradient; "
                      "q's gradient is do/dq"))
    if dot_path:
        files.append((dot_path, "the same graph as DOT text"))
    return files


if __name__ == "__main__":
    main()
