"""Rendering with Graphviz's ``dot`` program, and what to do when it is not installed.

Building a graph (``draw``, ``to_dot``) needs only the ``graphviz`` Python package;
turning it into SVG or PNG needs the ``dot`` program. When that is missing, every way of
rendering (``render``, ``Digraph.render``/``pipe``, Jupyter's inline picture) raises
``GraphvizNotFound`` with the install commands, instead of graphviz's bare
``ExecutableNotFound``. The ``graphviz`` package itself is optional (``pip install
minigrad[viz]``): minigrad imports without it, and drawing then says what to install.
"""
import os
import shutil
from ..files import naming

try:
    import graphviz
except ImportError:
    graphviz = None

INSTALL_HELP = """Graphviz's `dot` program was not found on PATH; it is what turns a graph into \
a picture (the `graphviz` Python package only calls it). Install it with one of:
    Debian/Ubuntu:  sudo apt-get install graphviz
    macOS:          brew install graphviz
    conda:          conda install -c conda-forge graphviz
    Windows:        the installer from https://graphviz.org/download/ (tick "add to PATH")
Without it, mg.viz.to_dot(...) (or draw(...).source) still gives the DOT text, which any \
Graphviz installation or online viewer can render."""


PACKAGE_HELP = ("minigrad.viz draws with the `graphviz` Python package, which is not "
                "installed: pip install graphviz (or pip install 'minigrad[viz]').")


class GraphvizNotFound(RuntimeError):
    """Rendering needs Graphviz's ``dot`` program, and it is not installed."""


def new_digraph(**attrs):
    """A ``Digraph`` (below), or an ImportError that says how to install the package."""
    if graphviz is None:
        raise ImportError(PACKAGE_HELP)
    return Digraph(**attrs)


if graphviz is not None:
    class Digraph(graphviz.Digraph):
        """A ``graphviz.Digraph`` whose rendering (``render``, ``pipe``, Jupyter's inline
        picture) says how to install Graphviz when its ``dot`` program is missing."""

        def pipe(self, *args, **kwargs):
            try:
                return super().pipe(*args, **kwargs)
            except graphviz.ExecutableNotFound:
                raise GraphvizNotFound(INSTALL_HELP) from None

        def render(self, *args, **kwargs):
            try:
                return super().render(*args, **kwargs)
            except graphviz.ExecutableNotFound:
                raise GraphvizNotFound(INSTALL_HELP) from None


FORMATS = ("svg", "png", "pdf")


def render(graph, path, format=None):
    """Write ``graph`` (a Digraph from ``draw``, or DOT text) to ``path`` and return the path.

    The format is the path's suffix: ``render(g, "model.png")`` writes a PNG to
    ``model.png``. A path without a suffix gets ``format`` (default "svg") added:
    ``render(g, "model")`` writes ``model.svg``. The formats are "svg", "png" and "pdf";
    another suffix, or a ``format`` that disagrees with the suffix, is a ValueError."""
    if graphviz is None:
        raise ImportError(PACKAGE_HELP)
    path, format = output_path(path, format)
    if shutil.which("dot") is None:
        raise GraphvizNotFound(INSTALL_HELP)
    source = graph if isinstance(graph, str) else graph.source
    try:
        data = graphviz.Source(source).pipe(format=format)
    except graphviz.ExecutableNotFound:
        raise GraphvizNotFound(INSTALL_HELP) from None
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with naming(path), open(path, "wb") as f:
        f.write(data)
    return path


def output_path(path, format=None):
    """(path, format) for ``render``: the format from the suffix, or the suffix from the
    format (see ``render``)."""
    path = str(path)
    suffix = os.path.splitext(os.path.basename(path))[1][1:].lower()
    if format is not None and format not in FORMATS:
        raise ValueError(f"render: format={format!r} is not one of {', '.join(FORMATS)}")
    if not suffix:
        format = format or "svg"
        return f"{path}.{format}", format
    if suffix not in FORMATS:
        raise ValueError(f"render: cannot tell the format from the suffix '.{suffix}' of "
                         f"{path!r}: use .svg, .png or .pdf")
    if format is not None and format != suffix:
        raise ValueError(f"render: format={format!r} disagrees with the suffix '.{suffix}' "
                         f"of {path!r}")
    return path, suffix


