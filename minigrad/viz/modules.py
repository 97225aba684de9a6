"""Where the graph sits among the nn.Modules: module paths, parameter names, depth, and
repeated blocks.

Every node records the innermost module whose forward made it (``node.scope``). A module
is named by its dotted path in ``model`` (``encoder.layers.0.self_attn``), as in its
state dict. Without a model, the modules found in the graph are searched for one that
contains all the others; that one is the root (path ""), and names are paths inside it.

Depth counts the modules with a forward of their own: the root is 0, ``encoder`` is 1,
``encoder.layers.0`` is 2 (a ModuleList or ModuleDict only holds modules, and is not a
level of its own).
"""
_CONTAINERS = ("ModuleList", "ModuleDict")


class ModuleTree:
    """Paths, names and nesting of the modules a graph was recorded in."""

    def __init__(self, model, scopes):
        self.modules = {}      # path -> module
        self.path_of = {}      # id(module) -> path
        self.name_of = {}      # id(parameter or buffer) -> dotted name
        self.owner_of = {}     # id(parameter or buffer) -> path of the module holding it
        self.roots = set()
        self._depth = {}
        tops = [("", model)] if model is not None else []
        taken = {""} if model is not None else set()
        known = set() if model is None else {id(m) for m in model.modules()}
        outside = [s for s in dict.fromkeys(scopes) if s is not None and id(s) not in known]
        tops += _outermost(outside, taken, single_root=model is None)
        for name, module in tops:
            self._add(name, module)

    def _add(self, top, module):
        self.roots.add(top)
        for sub, m in module.named_modules():
            path = _join(top, sub)
            self.modules.setdefault(path, m)
            self.path_of.setdefault(id(m), path)
        for table in (module.named_parameters(), module.named_buffers()):
            for name, t in table:
                self.name_of.setdefault(id(t), name)  # inside its tree (the model's: a key)
                self.owner_of.setdefault(id(t), _join(top, name.rpartition(".")[0]))

    # --- nesting ----------------------------------------------------------------------------
    def path(self, module):
        """The module's path, or None for no module (or one that is not in the tree)."""
        return None if module is None else self.path_of.get(id(module))

    def parent(self, path):
        """The nearest enclosing module with a forward of its own, or None for a root."""
        if path in self.roots:
            return None
        parts = path.split(".")
        for k in range(len(parts) - 1, 0, -1):
            candidate = ".".join(parts[:k])
            if candidate in self.modules and not self.is_container(candidate):
                return candidate
        return "" if "" in self.roots else None

    def is_container(self, path):
        return type(self.modules[path]).__name__ in _CONTAINERS

    def depth(self, path):
        if path not in self._depth:
            parent = self.parent(path)
            self._depth[path] = 0 if parent is None else self.depth(parent) + 1
        return self._depth[path]

    def ancestors(self, path):
        """path, its parent, ..., up to its root."""
        while path is not None:
            yield path
            path = self.parent(path)

    def collapsed(self, path, depth):
        """The module drawn as one node that contains ``path`` at this depth, or None when
        ``path`` is drawn in full (depth None draws everything)."""
        if path is None or depth is None:
            return None
        found = None
        for p in self.ancestors(path):
            if self.depth(p) > depth:
                found = p
        return found

    def label(self, path, repeat=None):
        """``encoder.layers.0 (TransformerEncoderLayer)``; with repeat = (first, last, n):
        ``encoder.layers.[0-1] ×2 (TransformerEncoderLayer)``."""
        cls = type(self.modules[path]).__name__
        if path == "":
            return cls
        if repeat is not None:  # the block itself is marked ×N; a module inside it is not
            times = f" ×{repeat[2]}" if path == repeat[0] else ""
            return f"{repeat_name(path, repeat)}{times} ({cls})"
        return f"{path} ({cls})"

    def param_count(self, path):
        return sum(int(p.array.size) for p in self.modules[path].parameters())

    # --- repeated blocks --------------------------------------------------------------------
    def repeats(self):
        """Runs of two or more consecutive children of a ModuleList that are the same module
        class with the same structure (the layers of an encoder built from deep copies):
        a list of lists of paths, outer runs first."""
        runs = []
        for path, m in self.modules.items():
            if type(m).__name__ != "ModuleList":
                continue
            run = []
            for key, child in m._modules.items():
                child_path = _join(path, key)
                if child is not None and run and _signature(child) == run[-1][1]:
                    run.append((child_path, _signature(child)))
                    continue
                if len(run) > 1:
                    runs.append([p for p, _ in run])
                run = [(child_path, _signature(child))] if child is not None else []
            if len(run) > 1:
                runs.append([p for p, _ in run])
        return sorted(runs, key=lambda r: r[0].count("."))


def repeat_name(path, repeat):
    """``encoder.layers.0.norm1`` inside the run (``encoder.layers.0``, ``...1``, n) ->
    ``encoder.layers.[0-1].norm1``."""
    first, last, _ = repeat
    head, _, i = first.rpartition(".")
    j = last.rpartition(".")[2]
    return f"{head}.[{i}-{j}]" + path[len(first):]


def run_members(path, repeat):
    """The paths that ``path`` (inside the first block of a run) stands for, one per block."""
    first, _, n = repeat
    head, _, i = first.rpartition(".")
    return [f"{head}.{int(i) + k}" + path[len(first):] for k in range(n)]


def _signature(module):
    """Module classes and parameter shapes of the whole subtree, by relative path."""
    return tuple((path, type(m).__name__,
                  tuple((n, tuple(p.shape)) for n, p in m._parameters.items() if p is not None))
                 for path, m in module.named_modules())


def _outermost(scopes, taken, single_root):
    """The modules among ``scopes`` that no other one contains, with the names of the
    trees they start: "" when there is a single one (and ``single_root``), else the class
    name (``Linear``, ``Linear_2``, ...)."""
    inside = {}
    for s in scopes:
        for m in s.modules():
            if m is not s:
                inside[id(m)] = s
    tops = [s for s in scopes if id(s) not in inside]
    if single_root and len(tops) == 1:
        return [("", tops[0])]
    named = []
    for s in tops:
        name, n = type(s).__name__, 1
        while name in taken:
            n += 1
            name = f"{type(s).__name__}_{n}"
        taken.add(name)
        named.append((name, s))
    return named


def _join(a, b):
    return f"{a}.{b}" if a and b else a or b
