"""Activation checkpointing, as ``torch.utils.checkpoint``: trade compute for memory.

``checkpoint(fn, *args)`` runs ``fn`` keeping none of the tensors its ops save for
backward (the activations) but its inputs; backward runs ``fn`` again, from the same
inputs and with the random state it had the first time (dropout draws the same masks), to
get them back. It is PyTorch's non-reentrant checkpoint: the ops' graph is recorded as
usual, and their saved tensors go through ``saved_tensors_hooks`` whose pack hook keeps
only a number and whose unpack hook recomputes. So gradients are those of ``fn`` itself,
bit for bit, through ``backward`` or ``autograd.grad``, with ``create_graph=True`` and with
hooks.

Each node recorded inside is marked with the call (``node.checkpoint``, a ``Region``), so
that ``mg.viz`` draws the region as one group and the profiler tells its recomputation
apart (``STATE.recomputing`` is set while backward runs the function again).
"""
import weakref

from .. import backend
from ..autograd.grad_mode import STATE, enable_grad
from ..autograd.graph import SEQUENCE, AccumulateGrad, TensorBase, saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential"]


class _Recompute:
    """One checkpointed call: what its recomputation needs, and the saved tensors it got
    back (in the order the ops saved them the first time)."""

    def __init__(self, function, args, kwargs, rng_state):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.rng_state = rng_state
        self.count = 0          # how many tensors the first run saved
        self.recomputed = None  # the saved tensors, once recomputed

    def pack(self, tensor):
        self.count += 1
        return self.count - 1

    def unpack(self, i):
        if self.recomputed is None or i >= len(self.recomputed):
            self.recomputed = self._run_again()
        if i >= len(self.recomputed):
            raise RuntimeError(f"checkpoint: the recomputation saved {len(self.recomputed)} "
                               f"tensors where the first run saved {self.count}: the function "
                               "must do the same ops each time it runs")
        return self.recomputed[i]

    def _run_again(self):
        saved = []

        def keep(tensor):
            saved.append(tensor.detach())
            return None
        before = backend.get_rng_state() if self.rng_state is not None else None
        outer = STATE.recomputing
        try:
            if self.rng_state is not None:
                backend.set_rng_state(self.rng_state)
            STATE.recomputing = True
            start = next(SEQUENCE)
            with enable_grad(), saved_tensors_hooks(keep, lambda _: None):
                result = self.function(*self.args, **self.kwargs)
            _release(result, start)
        finally:
            STATE.recomputing = outer
            if before is not None:
                backend.set_rng_state(before)
        return saved


class Region:
    """A checkpointed call as the graph shows it: ``node.checkpoint`` of each node recorded
    in it. ``name`` is the function's (a module's class name), ``inputs`` the
    (shape, dtype, bytes) of the tensors it keeps for backward (its inputs: what it holds
    instead of its ops' saved tensors), ``parent`` the region around it when checkpoints
    nest. ``inputs_alive()`` gives the input tensors while the call can still recompute
    (until backward has freed it)."""

    def __init__(self, function, frame):
        self.name = getattr(function, "__name__", None) or type(function).__name__
        if self.name == "forward" and hasattr(function, "__self__"):  # a module's forward
            self.name = type(function.__self__).__name__
        tensors = [a for a in frame.args if isinstance(a, TensorBase)]
        self.inputs = tuple((tuple(t.shape), str(t.dtype), int(t.array.nbytes))
                            for t in tensors)
        self.parent = None
        self._frame = weakref.ref(frame)

    def inputs_alive(self):
        frame = self._frame()  # (its saved tensors' unpack hooks keep it alive)
        if frame is None:
            return ()
        return tuple(a for a in frame.args if isinstance(a, TensorBase))

    def __repr__(self):
        return f"<checkpoint region {self.name}>"


def _recorded_since(result, start):
    """The nodes that ``result`` was computed from and that were recorded since ``start``
    (a recording number), each once: a walk of the graph back to the region's inputs."""
    stack = [t.grad_fn for t in _tensors(result) if t.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen or node.seq < start or isinstance(node, AccumulateGrad):
            continue
        seen.add(id(node))
        yield node
        stack.extend(e[0] for e in node.edges if e and e[0] is not None)


def _mark(result, start, region):
    """Mark the nodes recorded since ``start`` that ``result`` was computed from with
    ``region``; a node already marked by a checkpoint inside keeps its own, which gets this
    one as its parent."""
    for node in _recorded_since(result, start):
        inner = node.checkpoint
        if inner is None:
            node.checkpoint = region
        elif inner is not region:
            while inner.parent is not None and inner.parent is not region:
                inner = inner.parent
            if inner.parent is None:
                inner.parent = region


def _release(result, start):
    """Free the graph the recomputation recorded (nodes since ``start``): only the tensors
    it saved are wanted, and its nodes (whose packed outputs point back at them) would
    otherwise wait for the garbage collector."""
    for node in list(_recorded_since(result, start)):
        if hasattr(node, "release"):
            node.release()


def _tensors(result):
    if isinstance(result, TensorBase):
        return [result]
    if isinstance(result, (tuple, list)):
        return [t for r in result for t in _tensors(r)]
    if isinstance(result, dict):
        return [t for r in result.values() for t in _tensors(r)]
    return []


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, with its activations recomputed in backward instead of
    kept (see the module docstring). ``preserve_rng_state``: the recomputation draws the
    same random numbers as the first run."""
    if use_reentrant:
        raise NotImplementedError("checkpoint: use_reentrant=True is not implemented; "
                                  "use_reentrant=False (the same gradients) is")
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not implemented")
    if not STATE.grad_enabled:  # nothing is saved: nothing to recompute
        return function(*args, **kwargs)
    state = backend.get_rng_state() if preserve_rng_state else None
    frame = _Recompute(function, args, kwargs, state)
    start = next(SEQUENCE)  # the nodes recorded from here on are the region's
    with saved_tensors_hooks(frame.pack, frame.unpack):
        result = function(*args, **kwargs)
    _mark(result, start, Region(function, frame))
    return result


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """``functions`` (a Sequential or a list of modules) run in ``segments`` chunks, each
    chunk but the last checkpointed, as PyTorch's."""
    functions = list(functions.children()) if hasattr(functions, "children") else \
        list(functions)
    size = -(-len(functions) // segments) if segments else len(functions)

    def run(chunk):
        def forward(x):
            for f in chunk:
                x = f(x)
            return x
        return forward
    chunks = [functions[i:i + size] for i in range(0, len(functions), size)]
    for chunk in chunks[:-1]:
        input = checkpoint(run(chunk), input, use_reentrant=use_reentrant, **kwargs)
    return run(chunks[-1])(input) if chunks else input
