"""Activation checkpointing, as ``torch.utils.checkpoint``: trade compute for memory.

``checkpoint(fn, *args)`` runs ``fn`` keeping none of the tensors its ops save for
backward (the activations) but its inputs; backward runs ``fn`` again, from the same
inputs and with the random state it had the first time (dropout draws the same masks), to
get them back. It is PyTorch's non-reentrant checkpoint: the ops' graph is recorded as
usual, and their saved tensors go through ``saved_tensors_hooks`` whose pack hook keeps
only a number and whose unpack hook recomputes. So gradients are those of ``fn`` itself,
bit for bit, through ``backward`` or ``autograd.grad``, with ``create_graph=True`` and with
hooks.
"""
from .. import backend
from ..autograd.grad_mode import STATE, enable_grad
from ..autograd.graph import saved_tensors_hooks

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
        try:
            if self.rng_state is not None:
                backend.set_rng_state(self.rng_state)
            with enable_grad(), saved_tensors_hooks(keep, lambda _: None):
                self.function(*self.args, **self.kwargs)
        finally:
            if before is not None:
                backend.set_rng_state(before)
        return saved


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
    with saved_tensors_hooks(frame.pack, frame.unpack):
        return function(*args, **kwargs)


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
