"""The package is built in layers, bottom to top, and its imports say so.

A module may import (at module level or inside a function) only modules of its own layer or
a lower one, and no chain of imports may come back to where it started: then the engine
reads bottom-up, each file needing only what is below it, and no import works only because
of the order in which Python happens to load the files.

The imports are read from the source with ``ast`` (nothing is imported): every ``import``
and ``from ... import`` statement anywhere in a module, relative ones resolved, and
``from pkg import name`` counted as an import of ``pkg.name`` when that is a module. An
import of a submodule also runs its packages' ``__init__`` files, so those count too. An
import of the module's own ancestor package (``import minigrad as mg`` inside
``minigrad.nn.linear``) is no edge of the graph, as the ancestor is always loaded first;
it is allowed only from the library layer up.
"""
import ast
import os
from collections import defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Bottom to top. "pkg.*" stands for the package and every module inside it; a plain name
# for that module alone. The most specific entry names a module's layer.
LAYERS = [
    ("base", ["minigrad.dtypes", "minigrad.files", "minigrad.backend.*"]),
    ("autograd", ["minigrad.autograd", "minigrad.autograd.grad_mode", "minigrad.autograd.graph",
                  "minigrad.autograd.anomaly", "minigrad.autograd.batching",
                  "minigrad.autograd.forward_ad", "minigrad.autograd.function",
                  "minigrad.autograd.engine", "minigrad.autograd.gradcheck",
                  "minigrad.autograd.reading"]),
    ("ops", ["minigrad.arguments", "minigrad.operands", "minigrad.conversion",
             "minigrad.random", "minigrad.ops.*", "minigrad.fused.*"]),
    ("tensor", ["minigrad.tensor", "minigrad.printing", "minigrad.creation",
                "minigrad.combine", "minigrad.serialization", "minigrad.linalg"]),
    ("transforms and tools", ["minigrad.autograd.functional", "minigrad.func", "minigrad.batched",
                              "minigrad.utils.checkpoint", "minigrad.compile.*",
                              "minigrad.profiler", "minigrad.viz.*", "minigrad.cuda",
                              "minigrad.text.*"]),
    ("library", ["minigrad.nn.*", "minigrad.optim.*", "minigrad.utils", "minigrad.utils.data.*",
                 "minigrad.utils.samplers"]),
    ("models", ["minigrad.models.*"]),
    ("programs and the public API", ["minigrad", "minigrad.demos.*"]),
]
# An import of its own ancestor package is allowed from this layer up.
ANCESTOR_IMPORTS_FROM = 5

# Where each package's source lives (setup.cfg's package_dir: nn/, models/ and demos/ sit
# at the top of the repository).
SOURCES = {"minigrad": "minigrad", "minigrad.nn": "nn", "minigrad.models": "models",
           "minigrad.demos": "demos"}


def find_modules(sources):
    """{module name: path of its file} for every .py file under the sources, which map a
    package name to its folder."""
    modules = {}
    for package, folder in sources.items():
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            parts = os.path.relpath(root, folder).split(os.sep)
            prefix = ".".join([package] + [p for p in parts if p != "."])
            for name in sorted(files):
                if name.endswith(".py"):
                    stem = name[:-3]
                    module = prefix if stem == "__init__" else prefix + "." + stem
                    modules[module] = os.path.join(root, name)
    return modules


def layer_of(module, layers=LAYERS):
    """The index of the module's layer, or None when no entry of the table names it."""
    best, best_len = None, -1
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            if entry.endswith(".*"):
                base = entry[:-2]
                matches = module == base or module.startswith(base + ".")
            else:
                base, matches = entry, module == entry
            if matches and len(base) > best_len:
                best, best_len = index, len(base)
    return best


def _ancestors(module):
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imports_of(module, path, modules):
    """[(imported module, line)] for every import of a module of ``modules`` in the file,
    at any depth (inside functions and classes too). An import of a submodule also names
    the packages above it that are not the importer's own ancestors; an import of the
    importer's own ancestor package is listed as that package."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    is_package = os.path.basename(path) == "__init__.py"
    found = []

    def add(target, line):
        if target not in modules:
            return
        found.append((target, line))
        for package in _ancestors(target):
            if package in modules and package not in _ancestors(module) and package != module:
                found.append((package, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # a relative import starts from the importer's package
                parts = module.split(".")
                if not is_package:
                    parts = parts[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module
            for alias in node.names:
                submodule = base + "." + alias.name
                add(submodule if submodule in modules else base, node.lineno)
    return found


def check(sources, layers=LAYERS):
    """The offences of the code under ``sources`` against the layer table: a list of lines,
    empty when the imports keep the order and close no circle."""
    modules = find_modules(sources)
    offences = []
    for module in sorted(modules):
        if layer_of(module, layers) is None:
            offences.append(f"{module} has no layer: add it to the layer table in "
                            f"tests/test_layers.py (and the README's Layout)")
    graph = defaultdict(dict)  # module -> {imported module: first line}
    for module, path in sorted(modules.items()):
        mine = layer_of(module, layers)
        for target, line in imports_of(module, path, modules):
            theirs = layer_of(target, layers)
            if target == module:
                continue
            if mine is not None and theirs is not None and theirs > mine:
                if target in _ancestors(module) and mine >= ANCESTOR_IMPORTS_FROM:
                    pass  # import minigrad as mg, from the library up
                else:
                    offences.append(f"{module} imports {target} (layer {theirs} > {mine}), "
                                    f"line {line}")
            if target not in _ancestors(module):
                graph[module].setdefault(target, line)
    for circle, group in circles(graph):
        path = " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(circle, circle[1:]))
        line = f"import circle: {path} -> {circle[-1]}"
        if len(group) > len(circle) - 1:
            line += f" (one of the circles among {len(group)} modules: {', '.join(group)})"
        offences.append(line)
    return offences


def circles(graph):
    """[(circle, group)] for each strongly connected group of two or more modules in the
    graph (found by Tarjan's algorithm): the group's modules, sorted, and a shortest circle
    through its first module, as a list that starts and ends with that module."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for group in sorted(groups):
        start, members = group[0], set(group)
        # breadth first from the start, inside the group, until an edge leads back to it
        previous, frontier = {start: None}, [start]
        while not any(start in graph[v] for v in frontier):
            following = []
            for v in frontier:
                for w in sorted(graph[v]):
                    if w in members and w not in previous:
                        previous[w] = v
                        following.append(w)
            frontier = following
        v, circle = next(v for v in frontier if start in graph[v]), [start]
        while v is not None:
            circle.insert(0, v)
            v = previous[v]
        found.append((circle, group))
    return found


def _repo_sources(repo=REPO):
    return {package: os.path.join(repo, folder) for package, folder in SOURCES.items()}


def test_every_module_is_in_the_layer_table():
    modules = find_modules(_repo_sources())
    assert "minigrad.nn.module" in modules and "minigrad.autograd.engine" in modules
    missing = [m for m in modules if layer_of(m) is None]
    assert not missing, ("modules that no layer names; add them to LAYERS in "
                         "tests/test_layers.py: " + ", ".join(missing))


def test_imports_go_down_the_layers_and_close_no_circle():
    offences = check(_repo_sources())
    assert not offences, "\n" + "\n".join(offences)


# The checker itself, on small packages written for the purpose: each must be caught.

def _package(tmp_path, files):
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {"pkg": str(tmp_path / "pkg")}


TOY_LAYERS = [("low", ["pkg.low", "pkg.sub.*"]), ("high", ["pkg.high", "pkg"])]


def test_the_checker_finds_an_upward_import_inside_a_function(tmp_path):
    sources = _package(tmp_path, {
        "__init__.py": "from . import low, high\n",
        "low.py": "import os\n\n\ndef f():\n    from . import high\n    return high\n",
        "high.py": "from .low import f\n",
    })
    offences = check(sources, TOY_LAYERS)
    assert "pkg.low imports pkg.high (layer 1 > 0), line 5" in offences
    assert any(o.startswith("import circle: pkg.high") for o in offences)


def test_the_checker_finds_a_circle_within_one_layer(tmp_path):
    sources = _package(tmp_path, {
        "__init__.py": "",
        "low.py": "import pkg.sub.b\n",
        "sub/__init__.py": "",
        "sub/a.py": "from pkg.low import x\n",
        "sub/b.py": "def g():\n    from .a import y\n",
    })
    assert check(sources, TOY_LAYERS) == [
        "import circle: pkg.low (line 1) -> pkg.sub.b (line 2) -> pkg.sub.a (line 1) -> pkg.low"]


def test_the_checker_names_a_module_without_a_layer(tmp_path):
    sources = _package(tmp_path, {"__init__.py": "", "low.py": "", "new.py": "import pkg.low\n"})
    assert check(sources, TOY_LAYERS) == [
        "pkg.new has no layer: add it to the layer table in tests/test_layers.py "
        "(and the README's Layout)"]


def test_the_checker_allows_ancestor_imports_only_from_the_library_up(tmp_path):
    layers = [("low", ["pkg.low"]), ("a", []), ("b", []), ("c", []), ("d", []),
              ("library", ["pkg.lib"]), ("top", ["pkg"])]
    sources = _package(tmp_path, {"__init__.py": "from . import low, lib\n",
                                  "low.py": "import pkg as p\n", "lib.py": "import pkg\n"})
    assert check(sources, layers) == ["pkg.low imports pkg (layer 6 > 0), line 1"]


def test_the_checker_passes_a_package_in_order(tmp_path):
    sources = _package(tmp_path, {"__init__.py": "from .high import h\n",
                                  "low.py": "import os\nx = y = 1\n",
                                  "sub/__init__.py": "", "sub/a.py": "from ..low import x\n",
                                  "high.py": "from pkg.sub import a\nfrom . import low\n"})
    assert check(sources, TOY_LAYERS) == []
