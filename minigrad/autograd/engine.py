"""The backward pass: reverse-mode differentiation over the graph of nodes (``graph.py``).

1. ``topological_order`` sorts the nodes reachable from the roots so that every node comes
   after all the nodes that consume its outputs (by their recording order, with a flat
   walk: transformer graphs are too deep for recursion).
2. Gradients are summed per node and output in ``grads_of``; a node runs once all of them
   are in. Its ``backward`` returns one gradient per input; ``_reduce_to`` sums away
   broadcast dimensions (the one place where broadcasting is undone) and casts to the
   input's dtype; each gradient is added to what the edge's node has received so far.
3. A leaf's ``AccumulateGrad`` node adds its total into ``.grad`` (or hands it back, for
   ``mg.grad``). Saved tensors are freed as each node finishes unless ``retain_graph``.

Gradients are summed in place only into arrays the engine made itself and has handed to
no one (``fresh``): what a hook, ``retain_grad`` or the caller received is never changed
afterwards.
"""
import operator

from .. import backend
from . import anomaly
from .function import ShapeError, on_arrays
from .grad_mode import PROCESS, STATE, set_grad_enabled
from .graph import FREED_MESSAGE, AccumulateGrad, TensorBase, edge_to

_SEQ = operator.attrgetter("seq")

# --- mg.compile's hook: while a step is captured, ``capture`` is the recorder; the engine's
# array work outside any op (sums of gradients) goes through ``on_arrays``, recorded then
capture = None


def _copy_add(old, g):
    """A new sum: copy, then add (an array even when 0-d)."""
    total = old.copy()
    total += g
    return total


def topological_order(roots):
    """The nodes reachable from ``roots``, consumers before producers.

    Every node is numbered when it is recorded (``seq``), after all of its inputs' nodes,
    so walking the reachable set by decreasing number visits each node after every node
    that uses it: a flat walk and one sort, with no recursion however deep the graph.
    """
    order = [r for r in dict.fromkeys(roots) if r is not None]
    seen = set(order)
    for node in order:  # grows while it is walked
        for edge in node.edges:
            if edge and edge[0] not in seen:
                seen.add(edge[0])
                order.append(edge[0])
    order.sort(key=_SEQ, reverse=True)
    return order


def run_backward(roots, root_grads, retain_graph=False, create_graph=False, targets=None,
                 allow_unused=False, on_node=None):
    """Backpropagate ``root_grads`` from the tensors ``roots``.

    Without ``targets`` the gradients accumulate into the ``.grad`` of leaves (and of
    tensors that called ``retain_grad``); with ``targets`` (a list of tensors) nothing is
    written and their gradients are returned, in order (``mg.grad``). ``on_node(node,
    grads_out, grads_in)``, if given, is called after each node's backward, in order (a
    tracer, for ``viz.explain_backward``).
    """
    if PROCESS.anomaly:
        anomaly.check_seed([edge_to(t) for t in roots], root_grads)
    pass_ = _Pass(create_graph, retain_graph, on_node)
    for t, g in zip(roots, root_grads):
        pass_.receive(*edge_to(t), g)
    order = topological_order([edge_to(t)[0] for t in roots])
    if targets is not None:  # mg.grad: (node, output) -> positions in targets
        for i, t in enumerate(targets):
            pass_.wanted.setdefault(edge_to(t), []).append(i)
        order, pass_.stops = _prune(order, {node for node, _ in pass_.wanted})
    for watcher in PROCESS.watchers:  # a profiler times each node (checked once per call)
        if hasattr(watcher, "walk_backward"):
            order = watcher.walk_backward(order, pass_.grads_of)

    anomalous = PROCESS.anomaly  # each node's gradients are checked as a whole (naming the
    PROCESS.anomaly = False      # node), not the ops its backward runs one by one
    to_targets, STATE.to_targets = STATE.to_targets, targets is not None
    try:
        with set_grad_enabled(create_graph), _quiet(anomalous):
            pass_.run(order, anomalous)
    finally:
        PROCESS.anomaly = anomalous
        STATE.to_targets = to_targets
    if targets is None:
        return None
    result = []
    for i, t in enumerate(targets):
        g = pass_.captured.get(i)
        if g is None and not allow_unused:
            raise RuntimeError(
                f"input {i} of mg.grad (shape {tuple(t.shape)}) was not used to compute the "
                "outputs; pass allow_unused=True to get None for it")
        result.append(g)
    return tuple(result)


def accumulate_grads(roots, root_grads, retain_graph=None, create_graph=False, inputs=None):
    """``backward()``: backpropagate ``root_grads`` from ``roots`` into the ``.grad`` of
    every leaf, or, given ``inputs`` (tensors, leaves or not), of those alone."""
    if retain_graph is None:
        retain_graph = create_graph
    if inputs is None:
        run_backward(roots, root_grads, retain_graph, create_graph)
        return
    inputs = [inputs] if isinstance(inputs, TensorBase) else list(inputs)
    if not inputs:
        raise RuntimeError("backward: the 'inputs' argument cannot be empty (leave it out "
                           "to accumulate into every leaf)")
    for i, t in enumerate(inputs):
        if not t.requires_grad:
            raise RuntimeError(f"backward: inputs[{i}] (shape {t.shape}) does not require "
                               "grad")
    grads = run_backward(roots, root_grads, retain_graph, create_graph, targets=inputs,
                         allow_unused=True)
    for t, g in zip(inputs, grads):
        if g is not None:
            write_grad(t, g, create_graph)


class _Pass:
    """The state of one backward pass."""

    def __init__(self, create_graph, retain_graph, on_node):
        self.create_graph, self.retain_graph, self.on_node = create_graph, retain_graph, on_node
        self.grads_of = {}   # node -> [gradient received so far, per output]
        self.fresh = {}      # id(array) -> array: gradient sums only the engine holds
        self.wanted = {}     # mg.grad: (node, output index) -> positions in its inputs
        self.captured = {}   # position -> gradient
        self.stops = ()      # mg.grad: nodes whose gradients are read but which do not run

    def receive(self, node, index, g):
        """Add gradient ``g`` to what output ``index`` of ``node`` has received."""
        slots = self.grads_of.get(node)
        if slots is None:
            slots = self.grads_of[node] = [None] * len(node.output_meta)
        if slots[index] is None:
            slots[index] = g
        else:
            self.add(slots, index, g)

    def add(self, slots, index, g):
        """Sum ``g`` into ``slots[index]``, which holds a gradient already."""
        old = slots[index]
        if self.create_graph:  # the sum is part of the graph
            slots[index] = old + g
        elif id(old.array) in self.fresh:  # a sum of ours: add in place
            on_arrays(operator.iadd, old.array, g.array)
        else:  # copy, then add (an array even when 0-d)
            total = old._make(on_arrays(_copy_add, old.array, g.array))
            self.fresh[id(total.array)] = total.array
            slots[index] = total

    def hand_out(self, g):
        """``g`` is given to someone else (a hook, retain_grad, the caller): never again
        written in place."""
        self.fresh.pop(id(g.array), None)

    def run(self, order, anomalous):
        """Run each node's backward, in ``order``, once all its gradients are in."""
        grads_of, fresh, wanted = self.grads_of, self.fresh, self.wanted
        on_node, retain_graph = self.on_node, self.retain_graph
        for node in order:
            grads = grads_of.pop(node, None)
            if grads is None:
                continue  # no gradient reached this node
            if type(node) is AccumulateGrad:
                self.accumulate(node, grads[0])
                continue
            received = grads
            if len(grads) > 1 or node._pre_hooks or node._retained or wanted:
                received = self.prepare(node, grads)  # (a new tuple)
            if node in self.stops:
                continue
            if node.released:
                raise RuntimeError(FREED_MESSAGE.format(op=node.name()))
            if capture is None:
                in_grads = type(node).backward(node, *grads)
            else:
                in_grads = capture.backward(node, grads)
            if type(in_grads) is not tuple:
                in_grads = (in_grads,)
            edges = node.edges
            if len(in_grads) != len(edges):
                in_grads = _one_per_input(node, in_grads, len(edges))
            if not node._raw:  # a user's backward may return tensors it keeps, or arrays
                in_grads = tuple(_rewrap(g, e, grads[0], node, i)
                                 for i, (g, e) in enumerate(zip(in_grads, edges)))
            if received is not grads and node._node_hooks:
                in_grads = self.post_hooks(node, in_grads, received)
            if anomalous:
                anomaly.check_backward(node, grads, in_grads)
            if on_node is not None:
                on_node(node, grads, in_grads)
            if fresh:
                for g in grads:  # handed to backward: from here on, it may be anyone's
                    if g is not None:
                        fresh.pop(id(g.array), None)
            i = 0
            for edge, g in zip(edges, in_grads):
                if edge and g is not None:
                    target, index = edge
                    shape, dtype = target.output_meta[index]  # the input's
                    data = g.array
                    if data.shape != shape or (data.dtype is not dtype and data.dtype != dtype):
                        g = _reduce_to(g, shape, dtype, node, i)  # (a new array)
                        data = None
                    slots = grads_of.get(target)
                    if slots is None:
                        slots = grads_of[target] = [None] * len(target.output_meta)
                    if slots[index] is not None:
                        self.add(slots, index, g)
                    else:
                        slots[index] = g
                        if type(target) is AccumulateGrad and (data is None or (
                                node._raw and data.base is None
                                and _unshared(data, grads, in_grads, i))):
                            fresh[id(g.array)] = g.array  # a leaf's .grad may take it as is
                i += 1
            if not retain_graph:
                node.release()

    def prepare(self, node, grads):
        """The less common steps before a node runs: tensor hooks (output by output, in the
        order their first hook was registered, as PyTorch), retain_grad, and the gradients
        mg.grad asked for, then zeros for the unused outputs of a multi-output op. An
        unused output's hooks see None, its ``.grad`` stays None and mg.grad finds no
        gradient for it, as in PyTorch; only the node's backward gets the zeros."""
        table = node._pre_hooks
        if table:
            for i, hooks in table.items():
                if hooks and i != "node":  # (tensor hooks, by output)
                    if grads[i] is not None:
                        self.hand_out(grads[i])
                    grads[i] = _run_hooks(hooks, grads[i])
        for i, g in enumerate(grads):
            if g is None:
                continue
            if node._retained and i in node._retained:
                self.hand_out(g)
                _retain(node._retained[i](), g, self.create_graph)
            for k in self.wanted.get((node, i), ()):
                self.hand_out(g)
                self.captured[k] = g
        proto = next(g for g in grads if g is not None)
        if table and table.get("node"):  # the node's own prehooks
            for g in grads:
                if g is not None:
                    self.hand_out(g)
            grads[:] = _run_node_hooks(table["node"], tuple(grads), (tuple(grads),))
        received = tuple(grads)  # (what the node's own hooks see: None for an unused output)
        if not node._materialize_grads:  # (a Function's ctx.set_materialize_grads(False))
            return received
        for i, g in enumerate(grads):
            if g is None:  # an unused output of a multi-output op: its gradient is zero
                shape, dtype = node.output_meta[i]
                grads[i] = proto._make(node.xp.zeros(shape, dtype))
        return received

    def post_hooks(self, node, in_grads, received):
        """``register_hook``'s hooks: each sees the gradients for the inputs (one per entry
        of ``next_functions``) and those the node received; a tuple returned replaces the
        former."""
        edges = node.edges
        shown = tuple(g if e else None for g, e in zip(in_grads, edges) if e is not False)
        for g in shown:
            if g is not None:
                self.hand_out(g)
        shown = _run_node_hooks(node._node_hooks, shown, (shown, tuple(received)))
        it = iter(shown)
        return tuple(g if e is False else next(it) for g, e in zip(in_grads, edges))

    def accumulate(self, node, g):
        """A leaf's total gradient: its hooks, then into ``.grad`` (or to the caller)."""
        leaf = node.variable
        if leaf is None:
            return  # the leaf itself is gone
        if leaf._hooks:
            self.hand_out(g)
            g = _run_hooks(leaf._hooks, g)
        positions = self.wanted.get((node, 0))
        if positions is not None:
            for k in positions:
                self.captured[k] = g
        elif not self.wanted and leaf._requires_grad:  # (set to False since: no .grad,
            prehooks = node._pre_hooks and node._pre_hooks.get("node")  # as PyTorch)
            if prehooks:
                self.hand_out(g)
                (g,) = _run_node_hooks(prehooks, (g,), ((g,),))
            write_grad(leaf, g, self.create_graph, id(g.array) in self.fresh)
            if leaf._post_accumulate_hooks:
                for hook in list(leaf._post_accumulate_hooks.values()):
                    if hook(leaf) is not None:
                        name = getattr(hook, "__name__", type(hook).__name__)
                        raise TypeError(f"post accumulate grad hook '{name}' returned a "
                                        "value: it must return None")
            if node._node_hooks:  # (no gradients for inputs: a leaf's node has none)
                _run_node_hooks(node._node_hooks, (), ((), (g,)))
        self.hand_out(g)


def _one_per_input(node, in_grads, n):
    """A backward's gradients when their count is not one per input of forward: trailing
    Nones beyond the inputs are dropped, as PyTorch does; anything else is an error."""
    if len(in_grads) > n and all(g is None for g in in_grads[n:]):
        return in_grads[:n]
    raise RuntimeError(
        f"{node.name()}.backward returned {len(in_grads)} gradients, expected {n} (one per "
        "input of forward, None where there is none; any beyond those must be None)")


def _unshared(data, grads, in_grads, i):
    """Whether gradient ``i`` that a primitive's backward returned is an array of its own:
    not one of the gradients it received (``Add`` passes its gradient on as it is) and not
    also returned for another input."""
    for g in grads:
        if g is not None and g.array is data:
            return False
    for k, g in enumerate(in_grads):
        if k != i and g is not None and g.array is data:
            return False
    return True


def _reduce_to(grad, shape, dtype, node, i):
    """Sum ``grad`` over the dimensions that broadcasting added, so it has the shape (and
    dtype) of input ``i`` of ``node``."""
    gshape = grad.array.shape
    if gshape != shape:
        lead = len(gshape) - len(shape)
        if lead < 0 or any(n != 1 and n != g for n, g in zip(shape, gshape[lead:])):
            raise ShapeError(
                f"{node.name()}.backward returned a gradient of shape {tuple(gshape)} for "
                f"input {i} of shape {tuple(shape)}")
        axes = tuple(range(lead)) + tuple(
            lead + k for k, n in enumerate(shape) if n == 1 and gshape[lead + k] != 1)
        grad = grad.sum(axes, keepdim=True)
        if lead:
            grad = grad.reshape(shape)
    if grad.array.dtype != dtype:
        grad = grad.to(dtype)
    return grad


def _run_node_hooks(hooks, grads, args):
    """Call each of a node's hooks with ``args`` (its first item ``grads``, a tuple, as the
    hook before sees it); a tuple returned replaces ``grads``, checked as PyTorch checks it:
    as many items, None where there was none, the same shapes and dtypes."""
    for hook in list(hooks.values()):
        new = hook(*args)
        if new is None:
            continue
        name = getattr(hook, "__name__", type(hook).__name__)
        if type(new) is not tuple:
            raise TypeError(f"expected tuple, but hook '{name}' returned "
                            f"'{type(new).__name__}'")
        if len(new) != len(grads):
            raise RuntimeError(f"hook '{name}' has returned an incorrect number of values "
                               f"(got {len(new)}, but expected {len(grads)})")
        for old, g in zip(grads, new):
            if g is not None:
                _check_replacement(name, old, g)
        grads = new
        args = (new,) + args[1:]
    return grads


def _check_replacement(name, old, new):
    """A hook named ``name`` returned ``new`` for the gradient ``old``: it must be one of the
    same shape and dtype, and may not fill a gradient that is None."""
    if old is None:
        raise RuntimeError(f"hook '{name}' can't replace a None gradient with a non-None "
                           f"value (it returned shape {tuple(new.shape)} for an output that "
                           "gets no gradient)")
    if tuple(new.shape) != tuple(old.shape):
        raise RuntimeError(f"hook '{name}' has changed the size of value: it returned shape "
                           f"{tuple(new.shape)} for a gradient of shape {tuple(old.shape)}")
    if new.dtype != old.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value: it returned "
                           f"{new.dtype} for a gradient of dtype {old.dtype}")


def _run_hooks(hooks, grad):
    """Call each hook on the gradient in turn; a non-None return replaces it. An unused
    output's gradient is None: its hooks are called with None and may not replace it."""
    for hook in list(hooks.values()):
        new = hook(grad)
        if new is not None:
            _check_replacement(getattr(hook, "__name__", type(hook).__name__), grad, new)
            grad = new
    return grad


def _prune(order, target_nodes):
    """(the nodes from which a target can be reached, in ``order``: mg.grad needs no
    others; the targets' nodes among them from which no other target can be reached).
    Those last give their gradient to mg.grad and are neither run nor released, as in
    PyTorch: a graph behind a non-leaf input stays whole for a later backward."""
    needed, runs = set(), set()
    for node in reversed(order):  # producers first
        if any(edge and edge[0] in needed for edge in node.edges):
            needed.add(node)
            runs.add(node)
        elif node in target_nodes:
            needed.add(node)
    return [n for n in order if n in needed], needed - runs


def _rewrap(g, edge, proto, node, i):
    """A user backward's gradient ``g`` for input ``i`` as a Tensor of the input's dtype
    (it may return arrays or numbers)."""
    if g is None or not edge:
        return None
    if hasattr(g, "grad_fn"):
        return g
    if not (isinstance(g, (int, float, complex)) or hasattr(g, "__array__")):
        raise RuntimeError(f"{node.name()}: backward returned a {type(g).__name__} as the "
                           f"gradient of input {i}; expected a Tensor or None")
    node, index = edge
    dtype = node.output_meta[index][1]
    return proto._make(backend.xp_of(proto.array).asarray(g, dtype=dtype))


def write_grad(t, g, create_graph, owned=False):
    """Add ``g`` into leaf ``t``'s ``.grad`` as PyTorch does: the first gradient is taken as
    it is if nobody else holds it (``owned``) and copied otherwise; later ones are added in
    place (under create_graph, out of place, so the sum stays differentiable; into a
    ``.grad`` that create_graph made, in place too: it keeps its graph, as in PyTorch)."""
    if capture is not None and not create_graph:
        capture.write_grad(t, g.array, owned)
        return
    old = t._grad
    if create_graph:
        t._grad = g if old is None else old + g
    elif old is None:
        t._grad = g._make(g.array if owned else g.array.copy())
    elif old.array.shape == g.array.shape and old.array.dtype == g.array.dtype:
        old.array += g.array
        if old.grad_fn is not None:  # (a change in place to a tensor a graph may hold)
            old._shared_counter()[0] += 1
    else:
        t._grad = old.detach() + g


def _retain(t, g, create_graph):
    """retain_grad's gradient: a copy the first time, then new sums (never in place)."""
    if t is None:
        return
    if capture is not None:
        capture.unsupported("retain_grad")
    if not create_graph:
        g = g._make(g.array.copy())
    t._grad = g if t._grad is None else t._grad + g


def root_grad(t, gradient, op):
    """The gradient that starts backward from ``t``: ones for a one-element ``t``, else the
    caller's ``gradient``, a Tensor (same shape; cast to ``t``'s dtype)."""
    xp = backend.xp_of(t.array)
    if gradient is None:
        if t.array.size != 1:
            raise RuntimeError(f"{op}: grad can be implicitly created only for outputs with one "
                               f"element, but the output has shape {t.shape}; pass gradient=")
        return t._make(xp.ones(t.array.shape, dtype=t.dtype))
    if not isinstance(gradient, TensorBase):  # a number or an array, as PyTorch refuses
        raise TypeError(f"{op}: gradients can be either Tensors or None, but got "
                        f"{type(gradient).__name__}")
    if gradient.shape != t.shape:
        raise ShapeError(f"{op}: gradient has shape {gradient.shape} but the output has shape "
                         f"{t.shape}")
    if gradient.dtype != t.dtype:
        gradient = gradient.to(t.dtype)
    return gradient


def _quiet(anomalous):
    """NumPy's overflow and division warnings are silenced in backward (a zero gradient
    times an infinite local derivative is PyTorch's NaN without a word); anomaly mode
    reports NaN/inf itself, naming the node."""
    return backend.np.errstate(all="ignore")
