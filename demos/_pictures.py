"""What the viz demos share: their command line, and writing a graph to SVG (and PNG), or
its DOT text when Graphviz's ``dot`` program is missing."""
import os
import shutil

import minigrad as mg

from ._cli import make_parser, naming, print_written, summary


def build_parser(name, doc):
    """``--out DIR`` (default runs/viz/<name>) and ``--png``."""
    p = make_parser(name, summary(doc))
    p.add_argument("--out", default=os.path.join("runs", "viz", name),
                   help="directory for the pictures")
    p.add_argument("--png", action="store_true", help="also write PNG files")
    return p


def save(graph, out, name, png=False):
    """Render ``graph`` as out/name.svg (and .png); without Graphviz's ``dot`` program,
    write its DOT text to out/name.dot instead. Returns the paths written."""
    os.makedirs(out, exist_ok=True)
    base = os.path.join(out, name)
    if shutil.which("dot") is None:
        with naming(base + ".dot"), open(base + ".dot", "w") as f:
            f.write(graph.source)
        return [base + ".dot"]
    return [mg.viz.render(graph, base, fmt) for fmt in (("svg", "png") if png else ("svg",))]


def report(out, paths, what):
    """The closing block: each picture written under ``out`` with what to look at in it
    (``what``: {picture name without its suffix: description})."""
    if shutil.which("dot") is None:
        print("\n(DOT text only: " + mg.viz.INSTALL_HELP + ")")
    print_written(out, [(path, what[os.path.splitext(os.path.basename(path))[0]])
                        for path in paths])
