"""The backward pass: reverse-mode differentiation over the graph of Function nodes.

1. ``topological_order`` sorts the nodes reachable from the roots so that every node comes
   after all the nodes that consume its outputs (by their recording order, with a flat
   walk: transformer graphs are too deep for recursion).
2. Gradients are accumulated per node and output index in a dict; a node runs once all of
   them are in. Its ``backward`` returns one gradient per input; ``_reduce_to`` sums away
   broadcast dimensions (the one place where broadcasting is undone) and casts to the
   input's dtype.
3. Leaves receive their total gradient into ``.grad`` at the end (or it is returned, for
   ``mg.grad``). Saved tensors are freed as each node finishes unless ``retain_graph``.
"""
import operator
import sys

import numpy as np

from . import function
from .grad_mode import STATE, set_grad_enabled

Tensor = None  # minigrad.tensor registers the Tensor class here when it is imported
_SEQ = operator.attrgetter("_seq")


def topological_order(roots):
    """The nodes reachable from ``roots`` (Function nodes), consumers before producers.

    Every node is numbered when it is recorded (``_seq``), after all of its inputs' nodes,
    so walking the reachable set by decreasing number visits each node after every node
    that uses it: a flat walk and one sort, with no recursion however deep the graph.
    """
    order = [r for r in dict.fromkeys(roots) if r is not None]
    seen = set(order)
    node_type = function.Function
    for node in order:  # grows while it is walked
        for edge in node._edges:
            if edge is not None:
                parent = edge[0]
                if parent not in seen and isinstance(parent, node_type):
                    seen.add(parent)
                    order.append(parent)
    order.sort(key=_SEQ, reverse=True)
    return order


def _reduce_to(grad, edge, node):
    """Sum ``grad`` over the dimensions that broadcasting added, so it has the shape (and
    dtype) of the input that ``edge`` leads to."""
    _, _, shape, dtype = edge
    gshape = grad.data.shape
    if gshape != shape:
        lead = len(gshape) - len(shape)
        if lead < 0 or any(n != 1 and n != g for n, g in zip(shape, gshape[lead:])):
            i = [e is edge for e in node._edges].index(True)
            raise function.ShapeError(
                f"{node.name()}.backward returned a gradient of shape {tuple(gshape)} for "
                f"input {i} of shape {tuple(shape)}")
        axes = tuple(range(lead)) + tuple(
            lead + k for k, n in enumerate(shape) if n == 1 and gshape[lead + k] != 1)
        grad = grad.sum(axes, keepdim=True)
        if lead:
            grad = grad.reshape(shape)
    if grad.data.dtype != dtype:
        grad = grad.to(dtype)
    return grad


def _accumulate(slot, value, owned):
    """slot + value. Outside create_graph the sum is made on arrays, and in place once the
    slot holds a sum the engine allocated itself (its id is in ``owned``): nothing else can
    see that array until the node that receives it runs."""
    if slot is None:
        return value
    if STATE.grad_enabled:  # create_graph: the sum must be part of the graph
        return slot + value
    if id(slot) in owned:
        slot.data += value.data
        return slot
    total = Tensor._make(slot.data.copy())  # copy then add: stays an array even when 0-d
    total.data += value.data
    owned.add(id(total))
    return total


def _run_hooks(hooks, grad):
    for hook in hooks:
        new = hook(grad)
        if new is not None:  # the hook's tensor may be the user's: keep our own wrapper
            grad = Tensor._make(new.data, new.requires_grad, new.grad_fn, new._out_idx)
    return grad


def run_backward(roots, root_grads, retain_graph=False, create_graph=False, targets=None,
                 allow_unused=False, on_node=None):
    """Backpropagate ``root_grads`` from ``roots``.

    Without ``targets`` the gradients accumulate into the ``.grad`` of leaves (and of
    tensors that called ``retain_grad``); with ``targets`` (a list of tensors) nothing is
    written and their gradients are returned, in order (``mg.grad``). ``on_node(node,
    grads_out, grads_in)``, if given, is called after each node's backward, in order (a
    tracer, for ``viz.explain_backward``).
    """
    node_grads = {}   # node -> [grad per output]
    leaf_grads = {}   # id(leaf) -> [leaf, grad]
    owned = set()     # ids of the gradient sums the engine allocated (see _accumulate)
    for t, g in zip(roots, root_grads):
        if t.grad_fn is None:
            slot = leaf_grads.setdefault(id(t), [t, None])
            slot[1] = _accumulate(slot[1], g, owned)
        else:
            out = node_grads.setdefault(t.grad_fn, [None] * len(t.grad_fn._out_meta))
            out[t._out_idx] = _accumulate(out[t._out_idx], g, owned)

    order = topological_order([t.grad_fn for t in roots])
    wanted = None
    if targets is not None:  # mg.grad: (node, output) or leaf -> position in targets
        wanted = {(t.grad_fn, t._out_idx) if t.grad_fn else id(t): i
                  for i, t in enumerate(targets)}
        order = _prune(order, {t.grad_fn for t in targets if t.grad_fn},
                       {id(t) for t in targets if t.grad_fn is None})

    anomaly = STATE.anomaly  # each node's gradients are checked as a whole (naming the
    STATE.anomaly = False    # node), not the ops its backward runs one by one
    try:
        with set_grad_enabled(create_graph):
            captured = _run_nodes(order, node_grads, leaf_grads, retain_graph, create_graph,
                                  wanted, anomaly, owned, on_node)
    finally:
        STATE.anomaly = anomaly
    if targets is None:
        return None
    result = []
    for i, t in enumerate(targets):
        g = captured.get(i)
        if g is None and not allow_unused:
            raise RuntimeError(
                f"input {i} of mg.grad (shape {tuple(t.shape)}) was not used to compute the "
                "outputs; pass allow_unused=True to get None for it")
        result.append(g)
    return tuple(result)


def _prepare(node, grads, owned, create_graph, wanted, captured):
    """The less common steps before a node runs: zeros for unused outputs of a multi-output
    op, tensor hooks, retain_grad, and capturing the gradients mg.grad asked for."""
    for i, g in enumerate(grads):
        owned.discard(id(g))  # handed on from here: never again written in place
        if g is None:  # an unused output of a multi-output op: its gradient is zero
            shape, dtype = node._out_meta[i]
            grads[i] = Tensor._make(node.xp.zeros(shape, dtype))
            continue
        if node._hooks and i in node._hooks:
            grads[i] = g = _run_hooks(node._hooks[i], g)
        if node._retain and i in node._retain:
            _retain(node._retain[i](), g, create_graph)
        if wanted is not None and (node, i) in wanted:
            captured[wanted[(node, i)]] = g


def _run_nodes(order, node_grads, leaf_grads, retain_graph, create_graph, wanted, anomaly,
               owned, on_node=None):
    """Run each node's backward in ``order``, then hand the leaves their gradients."""
    captured = {}
    for node in order:
        grads = node_grads.pop(node, None)
        if grads is None:
            continue  # no gradient reached this node
        if len(grads) == 1 and node._hooks is None and node._retain is None and wanted is None:
            owned.discard(id(grads[0]))  # the common case, in short
        else:
            _prepare(node, grads, owned, create_graph, wanted, captured)
        if node._released:
            raise RuntimeError(function.FREED_MESSAGE.format(op=node.name()))
        in_grads = type(node).backward(node, *grads)
        if not isinstance(in_grads, tuple):
            in_grads = (in_grads,)
        if not node._raw:  # a user's backward may return tensors it keeps (or arrays)
            in_grads = tuple(_rewrap(g, e) for g, e in zip(in_grads, node._edges))
        if len(in_grads) != len(node._edges):
            raise RuntimeError(
                f"{node.name()}.backward returned {len(in_grads)} gradients, expected "
                f"{len(node._edges)} (one per input of forward, None where there is none)")
        if anomaly:
            function.check_backward(node, grads, in_grads)
        if on_node is not None:
            on_node(node, grads, in_grads)
        for edge, g in zip(node._edges, in_grads):
            if edge is None or g is None:
                continue
            target, idx, shape, dtype = edge
            data = g.data
            if data.shape != shape or data.dtype != dtype:
                g = _reduce_to(g, edge, node)
            if isinstance(target, Tensor):
                slot = leaf_grads.get(id(target))
                if slot is None:
                    leaf_grads[id(target)] = [target, g]
                else:
                    slot[1] = _accumulate(slot[1], g, owned)
            else:
                out = node_grads.get(target)
                if out is None:
                    out = node_grads[target] = [None] * len(target._out_meta)
                    out[idx] = g
                else:
                    out[idx] = _accumulate(out[idx], g, owned)
        if not retain_graph:
            node._release()

    grads = in_grads = g = data = out = slot = None  # drop what the loop held (see _own)
    for leaf, g in leaf_grads.values():
        if leaf._hooks:
            g = _run_hooks(leaf._hooks, g)
        if wanted is None:
            write_grad(leaf, g, create_graph)
        elif id(leaf) in wanted:
            captured[wanted[id(leaf)]] = g
    return captured


def _prune(order, target_nodes, target_leaves):
    """Keep the nodes from which a target can be reached (mg.grad needs no others)."""
    needed = set()
    for node in reversed(order):  # producers first
        if node in target_nodes:
            needed.add(node)
            continue
        for edge in node._edges:
            if edge is None:
                continue
            parent = edge[0]
            if isinstance(parent, Tensor):
                reaches = id(parent) in target_leaves
            else:
                reaches = parent in needed
            if reaches:
                needed.add(node)
                break
    return [n for n in order if n in needed]


def _own(g):
    """``g`` as a tensor that may become a ``.grad``. Backward may hand one array to several
    inputs (``a + b``), or a read-only broadcast view; so the array is taken as it is only
    when nothing else can reach its memory (CPython reference counts, the test PyTorch's
    AccumulateGrad makes), and copied otherwise."""
    arr = g.data
    if type(arr) is np.ndarray and arr.flags.writeable and _exclusive(arr):
        return Tensor._make(arr)
    return Tensor._make(arr.copy())


def _exclusive(arr):
    refs = 4  # the gradient tensor, _own's name, this name, getrefcount's argument
    while type(arr) is np.ndarray and sys.getrefcount(arr) <= refs:
        arr = arr.base  # a view: its base must have no other holder either
        if arr is None:
            return True
        refs = 3  # the view's .base, this name, getrefcount's argument
    return False


def _rewrap(g, edge):
    if isinstance(g, Tensor):
        return Tensor._make(g.data, g.requires_grad, g.grad_fn, g._out_idx)
    if g is None or edge is None:
        return None
    return Tensor._make(function.backend.xp_of(g).asarray(g, dtype=edge[3]))


def write_grad(t, g, create_graph):
    if create_graph:
        t.grad = g if t.grad is None else t.grad + g
    elif t.grad is None:
        t.grad = _own(g)
    elif (t.grad.grad_fn is None and t.grad.data.shape == g.data.shape
          and t.grad.data.dtype == g.data.dtype):
        t.grad.data += g.data  # in place: .grad was copied on its first write
    else:
        t.grad = t.grad.detach() + g


def _retain(t, g, create_graph):
    if t is not None:
        write_grad(t, g if create_graph else g.detach(), create_graph)
