"""What is drawn: the recorded graph (``graph.py``) placed among the modules (``modules.py``).

Each item of the graph lands on one drawn node and in one cluster (a module drawn in
full). At ``depth=k`` every op of a module deeper than k lands on that module's single
node, with the parameters only it uses. With ``collapse_repeats`` the blocks of a run of
identical ModuleList children land on the first block's nodes (op for op, in recording
order), and the edges that chain one block to the next disappear: the block is drawn once,
marked "×N".

Reshapes in a row (``x.reshape(-1, C)`` followed by ``cross_entropy``'s own flattening
of the already flat logits, say) are drawn as one node, marked "×N": each only renames
the shape, and the drawn node keeps the last one's shape and every one's step number.

A checkpointed region (``minigrad.utils.checkpoint``: its nodes carry ``node.checkpoint``)
is a cluster of its own, ``("checkpoint", i)``, placed in the innermost module that holds
all of it: the region's nodes in that module go into it, and so do the modules inside that
run only the region's ops; a module that also runs ops outside the region keeps its
region ops (they are marked on their own in the picture). A region inside another (a
checkpoint called by a checkpointed function) is placed the same way, but inside the outer
region's cluster: the outer region holds the inner one's nodes too.
"""
from dataclasses import dataclass, field

from ..ops import Reshape
from .graph import build
from .modules import ModuleTree


@dataclass(eq=False)
class DNode:
    """A drawn node: an op, a tensor, or a collapsed module (kind "module", ``path``).
    ``items`` are the graph items drawn as it (several when blocks are merged)."""
    key: tuple
    kind: str
    cluster: object = None
    path: object = None
    repeat: object = None   # (first path, last path, n) of a merged run
    items: list = field(default_factory=list)
    out_shapes: list = field(default_factory=list)
    chain: bool = False     # reshapes in a row drawn as this one node


@dataclass
class View:
    graph: object
    tree: object
    nodes: dict        # key -> DNode, in forward order
    edges: list        # (src key, dst key), each once
    clusters: dict     # path -> (parent path or None, repeat or None), outer first
    regions: dict = field(default_factory=dict)  # checkpoint cluster key -> Region
    region_of: dict = field(default_factory=dict)  # drawn key -> its checkpoint Region
    region_runs: dict = field(default_factory=dict)  # cluster key -> regions drawn as it


def make_view(roots, model=None, depth=None, collapse_repeats=True, backward=False):
    g = build(roots)
    tree = ModuleTree(model, [n.scope for n in g.ops])
    if backward:  # constants get no gradient: the backward pass never visits them
        g.items = {k: v for k, v in g.items.items() if v.kind != "const"}
        g.edges = [e for e in g.edges if e.src in g.items]
    consumers = g.consumers()
    place = {}  # item key -> (drawn key, cluster), or None: the item is not drawn
    for key, item in g.items.items():
        if item.kind == "op":
            place[key] = _place_op(tree, item.node, depth)
    chained = _fold_reshapes(g, place, consumers)
    for key, item in g.items.items():
        if item.kind != "op":
            place[key] = _place_tensor(tree, item, place, consumers.get(key, []), g, depth)
    runs = _merge_runs(g, tree, depth) if collapse_repeats else []
    member = {}  # item key -> {run number: block number}
    for r, run in enumerate(runs):
        for key, j in run["member"].items():
            member.setdefault(key, {})[r] = j
        for key, rep in run["rep"].items():
            place[key] = place.get(rep)

    nodes = {}
    for key, item in g.items.items():
        spot = place.get(key)
        if spot is None:
            continue
        dkey, cluster = spot
        d = nodes.get(dkey)
        if d is None:
            kind = "module" if dkey[0] == "mod" else item.kind
            d = nodes[dkey] = DNode(dkey, kind, cluster, dkey[1] if kind == "module" else None)
        d.items.append(item)
        d.chain = d.chain or key in chained
    repeat_of = {run["paths"][0]: (run["paths"][0], run["paths"][-1], len(run["paths"]))
                 for run in runs}
    for d in nodes.values():  # what is drawn once for a run of blocks is named for all
        if d.kind in ("module", "param"):
            path = d.path if d.kind == "module" else tree.owner_of.get(id(d.items[0].tensor))
            d.repeat = _run_of(path, repeat_of)

    edges = {}
    for e in g.edges:
        a, b = place.get(e.src), place.get(e.dst)
        if a is None or b is None or a[0] == b[0]:
            continue
        ma, mb = member.get(e.src, {}), member.get(e.dst, {})
        if any(r in mb and mb[r] != j for r, j in ma.items()):
            continue  # one block feeding the next: drawn once, the chain is the "×N"
        edges.setdefault((a[0], b[0]), None)
        if a[0][0] == "mod" and b[0][0] != a[0] and e.shape not in nodes[a[0]].out_shapes:
            nodes[a[0]].out_shapes.append(e.shape)
    clusters = _clusters(tree, nodes, repeat_of)
    regions, region_of = _regions(tree, nodes, clusters)
    runs = {}  # regions drawn once for several (checkpointed blocks of a repeated run)
    for key, d in nodes.items():
        r = region_of.get(key)
        if r is not None:
            runs.setdefault(r, set()).update(
                i.node.checkpoint for i in d.items
                if i.node is not None and i.node.checkpoint is not None)
    region_runs = {k: len(runs[r]) for k, r in regions.items()}
    return View(g, tree, nodes, list(edges), clusters, regions, region_of, region_runs)


def region_of_node(d):
    """The checkpoint Region a drawn node belongs to: every op it draws was recorded in
    one (the first's, for blocks drawn once for several), an intermediate tensor made by
    one; else None."""
    if d.kind == "tensor":
        node = d.items[0].tensor.grad_fn
        return None if node is None else node.checkpoint
    ops = [i.node for i in d.items if i.node is not None]
    if not ops or any(n.checkpoint is None for n in ops):
        return None
    return ops[0].checkpoint


def _regions(tree, nodes, clusters):
    """Add a cluster per checkpoint region to ``clusters`` (see the module docstring):
    returns ({cluster key: Region}, {drawn key: Region})."""
    region_of = {}
    members = {}  # Region -> drawn nodes, in forward order
    for key, d in nodes.items():
        r = region_of_node(d)
        if r is not None:
            region_of[key] = r
            members.setdefault(r, []).append(d)
    # a region inside another (nested checkpoints) is placed after it, inside its cluster
    members = dict(sorted(members.items(), key=lambda item: _nesting(item[0])))
    regions, cluster_of = {}, {}
    for i, (r, ds) in enumerate(members.items()):
        ckey = ("checkpoint", i)
        held = [d for d in nodes.values() if _within(region_of_node(d), r)]  # nested too
        common = None  # the innermost module holding every node of the region
        for k, d in enumerate(held):
            chain = [] if d.cluster is None else list(tree.ancestors(d.cluster))[::-1]
            if k == 0:
                common = chain
            else:
                n = 0
                while n < len(common) and n < len(chain) and common[n] == chain[n]:
                    n += 1
                common = common[:n]
        parent = common[-1] if common else None
        while parent is not None and _only_region(parent, nodes, clusters, r):
            parent = clusters[parent][0]  # a module that runs only the region: inside it
        regions[ckey], cluster_of[r] = r, ckey
        outer = cluster_of.get(r.parent)
        placed = parent
        if outer is not None and not _inside(parent, outer, clusters):
            placed = outer  # (the module holding it is around the outer region too)
        for d in ds:
            if d.cluster in (parent, placed):
                d.cluster = ckey
        for path, (p, repeat) in list(clusters.items()):
            if p in (parent, placed) and path not in regions and \
                    _only_region(path, nodes, clusters, r):
                clusters[path] = (ckey, repeat)
        clusters[ckey] = (placed, None)
    if regions:  # outer first, as the module clusters: a region before what it holds

        def depth(path):
            p, n = clusters[path][0], 0
            while p is not None:
                p, n = clusters[p][0], n + 1
            return n
        ordered = sorted(clusters.items(), key=lambda kv: depth(kv[0]))
        clusters.clear()
        clusters.update(ordered)
    return regions, region_of


def _nesting(region):
    """How many checkpoint regions ``region`` is inside."""
    n = 0
    while region.parent is not None:
        region, n = region.parent, n + 1
    return n


def _within(inner, region):
    """Whether checkpoint region ``inner`` is ``region`` or nested inside it."""
    while inner is not None and inner is not region:
        inner = inner.parent
    return inner is not None


def _inside(path, outer, clusters):
    """Whether cluster ``path`` is ``outer`` or inside it."""
    while path is not None and path != outer:
        path = clusters[path][0] if path in clusters else None
    return path is not None


def _only_region(path, nodes, clusters, region):
    """Whether the module cluster ``path`` (with those inside it) draws only ``region``'s
    nodes (or those of regions nested in it), and at least one."""
    inside = {path}
    changed = True
    while changed:
        changed = False
        for c, (p, _) in clusters.items():
            if p in inside and c not in inside:
                inside.add(c)
                changed = True
    found = [d for d in nodes.values() if d.cluster in inside]
    return all(_within(region_of_node(d), region) for d in found
               if d.kind not in ("param", "const")) and \
        any(_within(region_of_node(d), region) for d in found)


def _fold_reshapes(g, place, consumers):
    """Place each reshape whose input is another reshape read by nothing else on that
    reshape's node (both drawn in full, in one module). Returns the keys folded."""
    folded = set()
    for key, item in g.items.items():  # forward order: a chain folds onto its first
        if item.kind != "op" or not _is_reshape(item.node):
            continue
        sources = [e.src for e in g.edges if e.dst == key]
        if len(sources) != 1 or sources[0][0] != "op" or consumers.get(sources[0]) != [key]:
            continue
        src = sources[0]
        if (_is_reshape(src[1]) and place[src][0][0] == "op" and place[key][0][0] == "op"
                and place[src][1] == place[key][1]):
            place[key] = place[src]
            folded.add(key)
    return folded


def _is_reshape(node):
    return issubclass(node.op, Reshape)


def _run_of(path, repeat_of):
    """The (first, last, n) of the outermost merged run that ``path`` is in, or None."""
    for first, run in repeat_of.items():
        if path is not None and (path == first or path.startswith(first + ".")):
            return run
    return None


def _place_op(tree, node, depth):
    path = tree.path(node.scope)
    folded = tree.collapsed(path, depth)
    if folded is not None:
        return ("mod", folded), tree.parent(folded)
    return ("op", node), path


def _place_tensor(tree, item, place, readers, g, depth):
    """Parameters sit in the module that holds them, or on its collapsed node when only
    that node reads them; constants likewise with their readers; intermediates with the op
    that made them; inputs and outputs outside every module."""
    key = item.key
    spots = {place[r] for r in readers if place.get(r) is not None}
    if item.kind in ("leaf", "output"):
        return key, None
    if item.kind == "tensor":
        producer = place.get(("op", item.tensor.grad_fn))
        if producer is not None and producer[0][0] == "mod":
            return producer
        return key, (producer[1] if producer else None)
    if item.kind == "param":
        owner = tree.owner_of.get(id(item.tensor))
        folded = tree.collapsed(owner, depth)
        if folded is not None:
            if spots and all(s[0] == ("mod", folded) for s in spots):
                return spots.pop()
            return key, tree.parent(folded)
        return key, owner
    # a constant: with its reader(s)
    if len(spots) == 1 and next(iter(spots))[0][0] == "mod":
        return spots.pop()
    clusters = {s[1] for s in spots}
    return key, (clusters.pop() if len(clusters) == 1 else None)


def _merge_runs(g, tree, depth):
    """For each run of identical blocks that is drawn (in full or collapsed), map the items
    of blocks 2..N onto block 1's. Returns [{"paths", "member": key -> block index,
    "rep": key -> the key of block 1's item (None: not drawn)}]."""
    ops_in = {}
    for node in reversed(g.ops):  # recording order
        path = tree.path(node.scope)
        for p in tree.ancestors(path) if path is not None else ():
            ops_in.setdefault(p, []).append(("op", node))
    params = {}  # (owner path, attribute) -> key
    for k, item in g.items.items():
        if item.kind == "param" and id(item.tensor) in tree.owner_of:
            attr = tree.name_of[id(item.tensor)].rpartition(".")[2]
            params[(tree.owner_of[id(item.tensor)], attr)] = k
    neighbours = {}
    for e in g.edges:
        neighbours.setdefault(e.src, []).append(e.dst)
        neighbours.setdefault(e.dst, []).append(e.src)
    runs = []
    for paths in tree.repeats():
        if tree.collapsed(tree.parent(paths[0]), depth) is not None:
            continue  # inside a module drawn as one node
        blocks = [ops_in.get(p, []) for p in paths]
        shapes = [[(type(k[1]).__name__, k[1].output_meta) for k in b] for b in blocks]
        if not blocks[0] or any(s != shapes[0] for s in shapes[1:]):
            continue  # never ran, or the blocks ran differently
        member, rep = {}, {}
        for j, (p, block) in enumerate(zip(paths, blocks)):
            for k, first in zip(block, blocks[0]):
                member[k] = j
                rep[k] = first
            for (owner, attr), k in params.items():
                if owner == p or owner.startswith(p + "."):
                    member[k] = j
                    rep[k] = params.get((paths[0] + owner[len(p):], attr))
        for k, item in g.items.items():  # constants and intermediates: with their block
            if item.kind in ("const", "tensor") and k not in member:
                js = {member.get(n) for n in neighbours.get(k, [])}
                if len(js) == 1 and None not in js:
                    member[k] = js.pop()
                    rep[k] = k if member[k] == 0 else None
        rep = {k: v for k, v in rep.items() if member[k] > 0}
        runs.append({"paths": paths, "member": member, "rep": rep})
    return runs


def _clusters(tree, nodes, repeat_of):
    """The modules drawn in full that hold a drawn node, with their enclosing ones."""
    found = {}
    for d in nodes.values():
        for p in tree.ancestors(d.cluster) if d.cluster is not None else ():
            found.setdefault(p, (tree.parent(p), _run_of(p, repeat_of)))
    return dict(sorted(found.items(), key=lambda kv: tree.depth(kv[0])))
