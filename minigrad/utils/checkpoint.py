"""Activation checkpointing, as ``torch.utils.checkpoint``: trade compute for memory.

``checkpoint(fn, *args, use_reentrant=False)`` runs ``fn`` keeping none of the tensors its
ops save for backward (the activations) but its inputs; backward runs ``fn`` again, from
the same inputs and with the random state it had the first time (dropout draws the same
masks), to get them back. This is PyTorch's non-reentrant checkpoint: the ops' graph is
recorded as usual, and their saved tensors go through ``saved_tensors_hooks`` whose pack
hook keeps only a number and whose unpack hook recomputes. So gradients are those of
``fn`` itself, bit for bit, through ``backward`` or ``autograd.grad``, with
``create_graph=True`` and with hooks. ``context_fn`` gives two context managers, one for
the first run and one for the recomputation; ``determinism_check`` compares each
recomputed tensor's shape, dtype and device with the first run's (``CheckpointError``).

``use_reentrant=True`` is PyTorch's older variant (and, with a warning, what a call that
does not choose gets, as in PyTorch): ``fn`` runs under no_grad inside one node,
``CheckpointFunctionBackward``, whose backward runs ``fn`` again with grad on and a
backward pass of its own through it. It works with ``backward()`` only (the inner pass
also writes the ``.grad`` of the weights ``fn`` uses) and needs an input that requires
grad.

Each node recorded inside is marked with the call (``node.checkpoint``, a ``Region``), so
that ``mg.viz`` draws the region as one group and the profiler tells its recomputation
apart (``STATE.recomputing`` is set while backward runs the function again).
"""
import contextlib
import warnings
import weakref

from .. import backend
from ..autograd import backward as _backward
from ..autograd.function import Function
from ..autograd.grad_mode import STATE, enable_grad, no_grad
from ..autograd.graph import SEQUENCE, AccumulateGrad, TensorBase, saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn"]


class CheckpointError(RuntimeError):
    """The recomputation saved other tensors than the first run (PyTorch's)."""


_DEBUG_TIP = ("\nTip: To see a more detailed error message, pass `debug=True` to "
              "`checkpoint(...)`.\n")


def noop_context_fn():
    """The default ``context_fn``: nothing around either run."""
    return contextlib.nullcontext(), contextlib.nullcontext()


def _metadata(tensor):
    return {"shape": tuple(tensor.shape), "dtype": tensor.dtype, "device": tensor.device}


class _Recompute:
    """One checkpointed call: what its recomputation needs, and the saved tensors it got
    back (in the order the ops saved them the first time). ``check``: the first run's
    saved tensors' metadata, compared with the recomputed ones' (None: no check);
    ``debug``: the ops each run recorded are named in a CheckpointError."""

    def __init__(self, function, args, kwargs, rng_state, context, check, debug):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.rng_state, self.context = rng_state, context
        self.check, self.debug = check, debug
        self.count = 0          # how many tensors the first run saved
        self.recomputed = None  # the saved tensors, once recomputed
        self.ops = None         # (debug) the ops of the first run and of the recomputation

    def pack(self, tensor):
        self.count += 1
        if self.check is not None:
            self.check.append(_metadata(tensor))
        return self.count - 1

    def unpack(self, i):
        if self.recomputed is None or i >= len(self.recomputed):
            self.recomputed = self._run_again()
            self._compare()
        return self.recomputed[i]

    def _compare(self):
        """PyTorch's determinism check: no fewer tensors (always: there would be nothing to
        give back; more are not looked at, as PyTorch stops its recomputation once it has
        them all), and the same metadata."""
        if len(self.recomputed) < self.count:
            self._fail("torch.utils.checkpoint: A different number of tensors was saved "
                       "during the original forward and recomputation.\n"
                       f"Number of tensors saved during forward: {self.count}\n"
                       "Number of tensors saved during recomputation: "
                       f"{len(self.recomputed)}.\n")
        if self.check is None:
            return
        different = ""
        for i, (first, again) in enumerate(zip(self.check, self.recomputed)):
            if first != _metadata(again):
                different += (f"tensor at position {i}:\nsaved metadata: {first}\n"
                              f"recomputed metadata: {_metadata(again)}\n")
        if different:
            self._fail("torch.utils.checkpoint: Recomputed values for the following tensors "
                       f"have different metadata than during the forward pass.\n{different}.\n")

    def _fail(self, message):
        if not self.debug:
            raise CheckpointError(message + _DEBUG_TIP)
        first, again = self.ops
        raise CheckpointError(
            message + "\nThe ops recorded in the original forward (with debug=True):\n  "
            + "\n  ".join(first) + "\nThe ops recorded during recomputation:\n  "
            + "\n  ".join(again))

    def _run_again(self):
        saved = []

        def keep(tensor):
            saved.append(tensor.detach())
            return None
        with _running_again(self.rng_state):
            start = next(SEQUENCE)
            with enable_grad(), saved_tensors_hooks(keep, lambda _: None), self.context:
                result = self.function(*self.args, **self.kwargs)
            if self.debug:
                self.ops = (self.ops[0], _op_names(result, start))
            _release(result, start)
        return saved


@contextlib.contextmanager
def _running_again(rng_state):
    """While backward runs a checkpointed function again: ``STATE.recomputing`` set, and
    the random state its first run started from (``rng_state``; None: left as it is), the
    caller's put back afterwards."""
    before = backend.get_rng_state() if rng_state is not None else None
    outer = STATE.recomputing
    try:
        if rng_state is not None:
            backend.set_rng_state(rng_state)
        STATE.recomputing = True
        yield
    finally:
        STATE.recomputing = outer
        if before is not None:
            backend.set_rng_state(before)


def _op_names(result, start):
    """The names of the nodes recorded since ``start`` that ``result`` came from, in the
    order they were recorded."""
    return [n.name() for n in sorted(_recorded_since(result, start), key=lambda n: n.seq)]


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


_CHECKS = ("default", "none")


def checkpoint(function, *args, use_reentrant=None, context_fn=noop_context_fn,
               determinism_check="default", debug=False, **kwargs):
    """``function(*args, **kwargs)``, with its activations recomputed in backward instead of
    kept (see the module docstring), as PyTorch's: ``use_reentrant`` should be given
    (without it: PyTorch's warning, and the reentrant variant); ``preserve_rng_state``
    (default True): the recomputation draws the same random numbers as the first run;
    ``context_fn``, ``determinism_check`` ("default" or "none") and ``debug``: the
    non-reentrant variant only."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint: the use_reentrant parameter should be passed "
            "explicitly. Starting in PyTorch 2.9, calling checkpoint without use_reentrant "
            "will raise an exception. use_reentrant=False is recommended, but if you need to "
            "preserve the current default behavior, you can pass use_reentrant=True. Refer "
            "to docs for more details on the differences between the two variants.",
            stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when "
                             "use_reentrant=False.")
        if not any(isinstance(a, TensorBase) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be "
                          "None", stacklevel=2)
        return CheckpointFunction.apply(function, preserve, *args)
    if determinism_check not in _CHECKS:
        raise ValueError(f"determinism_check should be one of {list(_CHECKS)}, but got "
                         f"{determinism_check}")
    forward_context, recompute_context = context_fn()
    if not STATE.grad_enabled:  # nothing is saved: nothing to recompute
        with forward_context:
            return function(*args, **kwargs)
    state = backend.get_rng_state() if preserve else None
    check = [] if determinism_check == "default" else None
    frame = _Recompute(function, args, kwargs, state, recompute_context, check, debug)
    start = next(SEQUENCE)  # the nodes recorded from here on are the region's
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        result = function(*args, **kwargs)
    if debug:
        frame.ops = (_op_names(result, start), [])
    _mark(result, start, Region(function, frame))
    return result


class CheckpointFunction(Function):
    """The reentrant checkpoint (PyTorch's): forward runs the function under no_grad,
    keeping its tensor inputs; backward runs it again with grad on, from detached copies
    of them (and the random state of the first run), and backpropagates the gradients of
    its outputs through that graph into them."""

    @staticmethod
    def forward(ctx, function, preserve_rng_state, *args):
        ctx.function = function
        ctx.rng_state = backend.get_rng_state() if preserve_rng_state else None
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, TensorBase)]
        ctx.inputs = [None if i in ctx.tensor_indices else a for i, a in enumerate(args)]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_indices))
        with no_grad():
            return function(*args)

    @staticmethod
    def backward(ctx, *grads):
        if STATE.to_targets:  # (its own backward pass would write every leaf's .grad)
            raise RuntimeError(
                "When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() "
                "or passing an `inputs` parameter to .backward(). To resolve this error, you "
                "can either set use_reentrant=False, or call .backward() without passing the "
                "`inputs` argument.")
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t.detach().requires_grad_(t.requires_grad)
        with _running_again(ctx.rng_state), enable_grad():
            outputs = ctx.function(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, TensorBase) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is "
                               "not necessary")
        _backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, TensorBase) else None
                                    for a in inputs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """``functions`` (a Sequential or a list of modules) run in ``segments`` chunks, each
    chunk but the last checkpointed, as PyTorch's (without ``use_reentrant``: its
    warning, and the reentrant variant)."""
    if use_reentrant is None:
        warnings.warn(
            "torch.utils.checkpoint.checkpoint_sequential: the use_reentrant parameter "
            "should be passed explicitly. In version 2.9 we will raise an exception if "
            "use_reentrant is not passed. use_reentrant=False is recommended, but if you "
            "need to preserve the current default behavior, you can pass use_reentrant=True. "
            "Refer to docs for more details on the differences between the two variants.",
            stacklevel=2)
        use_reentrant = True
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
