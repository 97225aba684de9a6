"""Pictures of computation graphs: forward and backward, grouped by module, with gradients.

    import minigrad as mg
    g = mg.viz.draw(loss, model=model, depth=2)    # a graphviz.Digraph (inline in Jupyter)
    mg.viz.render(g, "model.png")                  # .svg, .png or .pdf; needs Graphviz's `dot`
    text = mg.viz.to_dot(loss, model=model)         # DOT text: needs no `dot`
    print(mg.viz.graph_memory(loss, model=model))   # what the graph holds for backward
    print(mg.viz.explain_backward(loss))            # the backward pass, step by step
    mg.viz.explore(loss, "graph.html", model=model)  # one page to walk both graphs in a browser

``roots`` is a tensor, a list of tensors, or a dict name -> tensor (the names label the
nodes; an intermediate tensor given here, or one that called ``retain_grad()``, gets a node
of its own with its value and gradient). The pieces: ``graph.py`` reads the recorded
nodes, ``modules.py`` names them after the modules that ran them, ``view.py`` collapses
modules and repeated blocks, ``dot.py`` draws (with the log colour scale of
``colours.py``), ``render.py`` calls Graphviz, ``memory.py`` measures what the graph holds,
``explain.py`` narrates the backward pass and ``explore.py`` writes the interactive page.
"""
from .colours import LogScale  # noqa: F401
from .dot import to_digraph
from .explain import BackwardSteps, Step, explain_backward, format_table  # noqa: F401
from .explore import Explorer, explore  # noqa: F401
from .memory import GraphMemory, GraphMemoryRow, graph_memory  # noqa: F401
from .render import INSTALL_HELP, GraphvizNotFound, render  # noqa: F401
from .view import make_view

__all__ = ["draw", "to_dot", "render", "explain_backward", "graph_memory", "explore",
           "LogScale", "GraphvizNotFound"]


def draw(roots, *, model=None, show_values=False, show_grad=False, backward=False,
         depth=None, collapse_repeats=True, rankdir="TB", profile=None, cost="time"):
    """The graph that computed ``roots``, as a ``graphviz.Digraph``.

    Args:
        roots: a Tensor, a list of Tensors, or a dict name -> Tensor.
        model: the nn.Module that ran; parameters are named by their state-dict paths and
            modules by their dotted paths. Without it, the modules found in the graph are
            used (a root containing all of them is searched for).
        show_values: print the values of tensors with at most 8 elements on their nodes
            (tensor nodes only: name an intermediate in ``roots``, or call its
            ``retain_grad()``, to give it a node).
        show_grad: after ``backward()``, put each tensor's gradient (values when tiny,
            else norm and max-abs, and any NaN/inf count) on its node and colour nodes
            by its norm on a log scale fitted to this graph's range (light yellow the
            smallest, dark violet the largest: the larger, the darker; legend underneath),
            light grey for an exact zero, red for NaN/inf.
        backward: draw the backward graph: the nodes the backward pass runs, numbered in
            execution order, each with its derivative rule and the tensors it keeps saved
            (shape and bytes), and the total memory they hold (``graph_memory`` gives the
            same figures as numbers).
        depth: draw modules deeper than ``depth`` as one node each (parameter count and
            output shape); the root model is depth 0, ``encoder`` 1, ``encoder.layers.0`` 2.
        collapse_repeats: draw runs of identical blocks in a ModuleList (the layers of an
            encoder) once, marked "×N".
        rankdir: "TB" (top to bottom) or "LR" (left to right).

    A region run under ``mg.utils.checkpoint.checkpoint`` is a dashed violet cluster,
    "checkpoint: <function>, recomputed in backward", which names the inputs it keeps for
    backward; with ``backward=True`` its nodes say their tensors are recomputed.
        profile: a finished ``mg.profiler.profile`` (anything with ``node_costs()``) of
            the code that built ``roots``: each op, and each module drawn as one node, is
            filled by what it cost on a log scale fitted to this graph (legend underneath)
            and shows the figure.
        cost: with ``profile``, "time" (forward plus backward) or "bytes" (output bytes).
    """
    view = make_view(roots, model=model, depth=depth, collapse_repeats=collapse_repeats,
                     backward=backward)
    return to_digraph(view, show_values=show_values, show_grad=show_grad, backward=backward,
                      rankdir=rankdir, profile=profile, cost=cost)


def to_dot(roots, *, model=None, show_values=False, show_grad=False, backward=False,
           depth=None, collapse_repeats=True, rankdir="TB", profile=None, cost="time"):
    """The DOT source text of ``draw(...)``; needs no Graphviz program."""
    return draw(roots, model=model, show_values=show_values, show_grad=show_grad,
                backward=backward, depth=depth, collapse_repeats=collapse_repeats,
                rankdir=rankdir, profile=profile, cost=cost).source
