"""The backward pass of a small graph, step by step: ``mg.viz.explain_backward`` prints
one row per node the engine runs and draws one picture per step.

    python -m minigrad.demos.viz_backward_walkthrough [--png]
        [--out runs/viz/viz_backward_walkthrough]

The graph: a tanh layer over a batch of 4 inputs plus an L2 penalty on its weight,

    loss = tanh(x @ fc.weight^T + fc.bias).sum() + 0.1 * (fc.weight * fc.weight).sum()

chosen so that the three things people ask about all happen in 9 steps:

- **the order**: newest node first. The penalty was recorded last, so its three nodes
  (steps 2-4) run before the layer's (steps 5-9).
- **a broadcast summed away** (step 7): the (2,) bias was added to a (4, 2) batch, so the
  add's backward returns a (4, 2) gradient for it and the engine sums it over the batch:
  "in1: (4, 2) summed to (2,) (broadcast)".
- **gradients accumulated**: fc.weight is used three times (twice by the penalty's
  ``mul``, once through the layer's transpose), and each use adds to ``fc.weight.grad``:
  "added to fc.weight.grad (2nd use)" at step 4, "(3rd use)" at step 9.

The frames, ``frames/step_001.svg`` ... (open ``index.html`` to page through them with
the table beside them): the backward graph with the running node in gold and the
gradients it sends as gold edges; nodes that have run are grey, and what they had saved
says "freed by backward()", so the memory the graph holds is seen to drain. The caption
repeats the step's row of the table.
"""
import html
import os
import shutil

import minigrad as mg
from minigrad import nn
from minigrad.viz.explain import format_table

from . import _pictures
from ._cli import make_out_dir, naming, parse_checked, print_written, require, writing_to

NAME = "viz_backward_walkthrough"


class TanhLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x):
        # written out, not self.fc(x): nn.Linear is one fused op, whose backward would hide
        # the transpose, the product and the broadcast bias this walkthrough shows
        return (x @ self.fc.weight.T + self.fc.bias).tanh()


def make_loss():
    """The same graph every time (seeded): the model and its loss."""
    mg.manual_seed(0)
    model = TanhLayer()
    x = mg.randn(4, 3)
    loss = model(x).sum() + 0.1 * (model.fc.weight * model.fc.weight).sum()
    return model, loss


def write_index(out, steps, fmt):
    """index.html: the frames in order, each with its row of the table."""
    rows = []
    for s in steps:
        text = html.escape(format_table([s]).split("\n", 1)[1])
        rows.append(f'<section id="s{s.step}"><h2>step {s.step} of {len(steps)}</h2>'
                    f"<pre>{text}</pre>"
                    f'<img src="frames/step_{s.step:03d}.{fmt}" alt="step {s.step}"></section>')
    page = ("<!doctype html><meta charset=utf-8><title>backward, step by step</title>"
            "<style>body{font-family:sans-serif}section{margin-bottom:3em}"
            "img{max-width:100%}</style><h1>The backward pass, step by step</h1>"
            f"<pre>{html.escape(format_table(steps))}</pre>" + "".join(rows))
    path = os.path.join(out, "index.html")
    with naming(path), open(path, "w") as f:
        f.write(page)
    return path


def build_parser():
    return _pictures.build_parser(NAME, __doc__)


def parse_args(argv=None):
    return parse_checked(build_parser(), argv)


def main(argv=None):
    args = parse_args(argv)
    require(NAME, "graphviz")
    make_out_dir(NAME, args.out)
    with writing_to(NAME, args.out):
        frames = os.path.join(args.out, "frames")
        if shutil.which("dot") is None:  # the table needs no Graphviz; the frames do
            model, loss = make_loss()
            print(mg.viz.explain_backward(loss, model=model))
            print("\n(no frames: " + mg.viz.INSTALL_HELP + ")")
            return []
        model, loss = make_loss()
        steps = mg.viz.explain_backward(loss, model=model, frames=frames)
        print(steps)   # the table
        paths = [os.path.join(frames, f"step_{s.step:03d}.svg") for s in steps]
        if args.png:  # the same graph again, drawn as PNG (the table is not printed twice)
            model, loss = make_loss()
            mg.viz.explain_backward(loss, model=model, frames=frames, frame_format="png")
            paths += [os.path.join(frames, f"step_{s.step:03d}.png") for s in steps]
        paths.append(write_index(args.out, steps, "svg"))
        print("\nfc.weight.grad, the sum of its three uses:")
        print(model.fc.weight.grad)
        first, last = (os.path.basename(paths[i]) for i in (0, len(steps) - 1))
        frame_names = f"frames/{first} ... {last}"
        print_written(args.out, [
            (frame_names + (" (and .png)" if args.png else ""), "one picture per step: the "
             "running node in gold, the nodes that have run in grey, their saved arrays freed"),
            (paths[-1], "the frames in order, each beside its row of the table: open it in a "
             "browser")])
        return paths


if __name__ == "__main__":
    main()
