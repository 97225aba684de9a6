"""The pieces of the graph that autograd records: nodes, edges and saved tensors.

Every differentiable op that runs on a tensor that requires grad leaves one **node** (its
output's ``grad_fn``). A node has one **edge** per input: where that input's gradient goes,
either the node that made the input or, for a leaf, the leaf's ``AccumulateGrad`` node.
What forward needed to keep for backward is held as **saved tensors**, each with the
version of the tensor it came from, so that an in-place change made afterwards is caught.

The names follow PyTorch: ``grad_fn.next_functions`` lists ``(node, output index)`` pairs,
``AccumulateGrad.variable`` is the leaf, and nodes name themselves ``MulBackward0`` etc.
"""
import itertools
import threading
import weakref
from collections import namedtuple

from .grad_mode import PROCESS, STATE

_PLAIN = (int, float, bool, complex, type(None))  # saved as they are
SEQUENCE = itertools.count()  # numbers nodes in recording order (see engine.topological_order)

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or to read saved tensors after "
    "they were freed): the saved arrays of {op} were released by the first backward(). "
    "Pass retain_graph=True to the first backward() (or mg.grad) to keep them.")


def edge_to(t):
    """The edge that carries a gradient to tensor ``t`` (which requires grad): the pair
    (node that made ``t``, which of its outputs ``t`` is), or (the leaf's AccumulateGrad, 0);
    (None, 0) for a view made under no_grad, to which no gradient goes. The input's shape
    and dtype, which its gradient must have, are the node's ``output_meta[index]``."""
    node = t.grad_fn
    if node is None:  # a leaf: its gradient goes to its AccumulateGrad
        node = accumulator_of(t)
    return (node, t._out_idx)


def starts_backward(t):
    """Whether a backward pass can start from ``t``: it requires grad and a gradient can
    reach a node from it (not so from a view made under no_grad, which has no grad_fn and
    no AccumulateGrad, although it requires grad)."""
    return t.requires_grad and (t.grad_fn is not None or not t._made_without_grad)


def accumulator_of(leaf):
    """The leaf's AccumulateGrad node, made on first need and kept for the leaf's life
    (told when the leaf's ``.data`` was replaced, which may change its shape or dtype)."""
    node = leaf._accumulator
    if node is None:
        if leaf._made_without_grad:
            return None  # a view made under no_grad: no gradient goes to it (as PyTorch)
        node = leaf._accumulator = AccumulateGrad(leaf)
    elif node._data is not leaf.array:
        node.watch(leaf.array)
    return node


class Node:
    """A recorded op: what backward needs to send gradients to the op's inputs.

    Attributes read by the engine and by ``minigrad.viz``:
      ``edges``            per argument of forward, where its gradient goes: the pair
                           ``(node, output index)`` (``graph.edge_to``); None for a
                           tensor that needs no gradient; False for an argument that is
                           no differentiable tensor (a number, an index, a bool mask)
      ``saved``            the ``SavedTensor`` records kept for backward (None once freed)
      ``output_meta``      ``(shape, dtype)`` of each output
      ``seq``              recording number: a node's inputs were recorded before it
      ``scope``            the nn.Module whose forward ran the op (for pictures), or None
      ``params``           the op's keyword arguments
      ``checkpoint``       the ``utils.checkpoint.Region`` the op was recorded in, or None
    """
    params = {}
    edges = ()
    output_meta = scope = trace = checkpoint = None
    _saved = None  # what ``saved`` shows, as plain tuples in SavedTensor's field order
    seq = -1
    released = False  # backward freed what it saved
    # hooks that run before the node: its outputs' tensor hooks by output index, and its
    # own register_prehook's under "node"; outputs that called retain_grad
    _pre_hooks = _retained = None
    _node_hooks = None  # register_hook's (after the node ran)
    _materialize_grads = True  # zeros for an output that got no gradient (else None)

    def name(self):
        """The node's name, as PyTorch's: ``MulBackward0``, ``AccumulateGrad``, ..."""
        return type(self).__name__

    def __repr__(self):
        return f"<{self.name()} object at {hex(id(self))}>"

    @property
    def next_functions(self):
        """``(node, output index)`` per input, as PyTorch; ``(None, 0)`` where no gradient
        goes."""
        return tuple((None, 0) if e is None else e for e in self.edges if e is not False)

    @property
    def saved(self):
        """What forward kept for backward, as ``SavedTensor`` records (None once freed)."""
        return None if self._saved is None else tuple(map(SavedTensor._make, self._saved))

    @saved.setter
    def saved(self, records):
        self._saved = None if records is None else tuple(records)

    @property
    def saved_tensors(self):
        """What forward saved, as tensors; raises if a saved tensor changed since."""
        saved = self._saved
        if saved is None:
            if self.released:
                raise RuntimeError(FREED_MESSAGE.format(op=self.name()))
            return ()
        unpacked = []
        for s in saved:  # the two common cases here; SavedTensor.unpack has them all
            tensor, array, output, counter, version, make, _ = s
            if tensor is not None and tensor.array is array and (
                    version == 0 if tensor._vc is None else tensor._vc[0] == version):
                unpacked.append(tensor)  # an input, unchanged since
            elif output is not None and counter[0] == version:
                unpacked.append(make(array, True, self, output))  # an output, unchanged
            elif type(array) in _PLAIN:
                unpacked.append(array)  # a number (x * 0.5's 0.5), or None: nothing saved
            else:
                unpacked.append(SavedTensor._make(s).unpack(self))
        return tuple(unpacked)

    # What a node saved, read by PyTorch's names: ``_saved_self`` (its first input),
    # ``_saved_other`` or ``_saved_exponent`` (its second), ``_saved_result`` (its output);
    # None when this node did not save it
    _saved_self = property(lambda self: self._saved_value("input", 0))
    _saved_other = property(lambda self: self._saved_value("input", 1))
    _saved_exponent = _saved_other
    _saved_result = property(lambda self: self._saved_value("output", 0))

    def _saved_value(self, kind, position):
        saved = self.saved
        if saved is None and self.released:
            raise RuntimeError(FREED_MESSAGE.format(op=self.name()))
        for s, value in zip(saved or (), self.saved_tensors):
            output = s.array.output if type(s.array) is Packed else s.output
            if (s.input if kind == "input" else output) == position:
                return value
        return None

    def saved_bytes(self):
        """Bytes of the arrays this node keeps for backward (0 once freed)."""
        return sum(s[1].nbytes for s in self._saved or () if hasattr(s[1], "nbytes"))

    def release(self):
        """Free what backward needed; a second backward through this node then raises."""
        if self._saved is not None:
            self._saved = None
            self.released = True

    @property
    def metadata(self):
        """A dict of the user's own, kept with the node for its life, as PyTorch's."""
        d = self.__dict__.get("_metadata")
        if d is None:
            d = self._metadata = {}
        return d

    def register_prehook(self, hook):
        """Call ``hook(grad_outputs)`` before this node runs, as PyTorch's: the gradients of
        its outputs as a tuple (None for an output that got none), after the outputs' own
        tensor hooks; a tuple it returns replaces them. Returns a handle with ``remove()``."""
        return append_hook(self._hook_table().setdefault("node", {}), hook)

    def register_hook(self, hook):
        """Call ``hook(grad_inputs, grad_outputs)`` after this node ran, as PyTorch's: the
        gradients it computed, one per entry of ``next_functions`` (None where an input
        takes none), and those it received; a tuple it returns replaces ``grad_inputs``.
        Returns a handle with ``remove()``."""
        self._hook_table().setdefault("node", {})  # (the engine's step before the node
        if self._node_hooks is None:                # runs only for nodes with a table)
            self._node_hooks = {}
        return append_hook(self._node_hooks, hook)

    def _register_output_hook(self, index, hook):
        """Call ``hook(grad)`` on the gradient of output ``index`` before this node runs (a
        tensor's ``register_hook``)."""
        return append_hook(self._hook_table().setdefault(index, {}), hook)

    def _hook_table(self):
        if self._pre_hooks is None:
            self._pre_hooks = {}
        return self._pre_hooks


class AccumulateGrad(Node):
    """The node at a leaf: backward adds the gradient that arrives into ``variable.grad``.

    A leaf keeps its AccumulateGrad (``t._accumulator``) for as long as it lives, and the
    node refers back to it weakly, so no reference cycle keeps a leaf's memory alive."""

    def __init__(self, variable):
        self._variable = weakref.ref(variable)
        self.seq = next(SEQUENCE)
        self.watch(variable.array)

    @property
    def variable(self):
        return self._variable()

    def watch(self, data):
        """Take the leaf's shape and dtype from ``data``, its array now."""
        self._data = data
        self.output_meta = ((data.shape, data.dtype),)


class SavedTensor(namedtuple("SavedTensor", "tensor array output counter version make input")):
    """A tensor that forward kept for backward, with the version it had then.

    ``tensor`` is the input it came from (argument number ``input`` of forward, so that
    higher-order gradients flow into it), or None for one of the node's own outputs
    (``output``: its index; rebuilt with the node as grad_fn when unpacked) and for
    constants. ``counter`` is the version counter checked on unpacking, ``version`` the
    value it must still have; ``make`` builds a Tensor around an array. (Nodes keep plain
    tuples in this field order, which are cheaper to make for every op; ``node.saved``
    shows them as SavedTensor records.)
    """
    __slots__ = ()

    def unpack(self, node):
        if type(self.array) is Packed:
            return self.array.unpack(node)
        t = self.tensor
        if t is not None:
            if t.array is not self.array and t._detached_in_place:
                raise RuntimeError(
                    f"trying to use a saved tensor (shape {tuple(self.array.shape)}, saved by "
                    f"{node.name()}) that has been detached in-place with detach_(): use "
                    "out-of-place detach() instead")
            if t.array is not self.array:
                raise RuntimeError(
                    f"a tensor (shape {tuple(self.array.shape)}) that {node.name()} saved for "
                    "backward had its .data replaced after it was saved")
            if t._version != self.version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: the tensor of shape {list(self.array.shape)} "
                    f"saved by {node.name()} is at version {t._version}; expected version "
                    f"{self.version} instead")
            return t
        if self.output is not None:
            if self.counter[0] != self.version:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: output {self.output} of {node.name()} (shape "
                    f"{list(self.array.shape)}) is at version {self.counter[0]}; expected "
                    f"version {self.version} instead")
            return self.make(self.array, True, node, self.output)
        return self.make(self.array) if hasattr(self.array, "shape") else self.array


class saved_tensors_hooks:
    """``with saved_tensors_hooks(pack_hook, unpack_hook):``, as PyTorch's: every tensor an
    op recorded inside saves for backward is given to ``pack_hook(tensor)``, and what that
    returns is kept instead; backward gets the tensor back from ``unpack_hook(packed)``
    (to print what is saved, to compress it or to keep it elsewhere). The unpacked tensor
    takes the saved one's place in the graph, so higher-order gradients still flow. As in
    PyTorch, an in-place change of a packed tensor is not detected: that is the hooks'
    business. The hooks apply on the thread that entered the block; the innermost pair
    wins."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook

    def __enter__(self):
        STATE.saved_hooks = STATE.saved_hooks + ((self.pack_hook, self.unpack_hook),)
        with _PACKING:
            object.__setattr__(PROCESS, "packing", PROCESS.packing + 1)
        return self

    def __exit__(self, *exc):
        STATE.saved_hooks = STATE.saved_hooks[:-1]
        with _PACKING:
            object.__setattr__(PROCESS, "packing", PROCESS.packing - 1)


_PACKING = threading.Lock()  # (blocks open and close on several threads at once)


class Packed:
    """What ``saved_tensors_hooks``' pack hook returned for a saved tensor, with what is
    needed to put the unpacked tensor back in the graph where the saved one was: the
    input's ``grad_fn`` and output index (or a leaf's ``AccumulateGrad``), or, for the
    node's own output, its index."""
    __slots__ = ("value", "unpack_hook", "shape", "dtype", "grad_fn", "index", "accumulator",
                 "output", "make")

    def __init__(self, tensor, hooks, output, make):
        pack, self.unpack_hook = hooks
        self.shape, self.dtype, self.output, self.make = tensor.shape, tensor.dtype, output, make
        self.grad_fn, self.index, self.accumulator = tensor.grad_fn, tensor._out_idx, None
        if tensor.grad_fn is None and tensor.requires_grad:
            self.accumulator = accumulator_of(tensor)
        self.value = pack(tensor)

    def __repr__(self):
        return f"Packed(shape={tuple(self.shape)}, dtype={self.dtype})"

    def unpack(self, node):
        t = self.unpack_hook(self.value)
        if not isinstance(t, TensorBase):
            raise TypeError(f"Output of saved tensor unpack_hook expected to be a Tensor but "
                            f"got result of type {type(t).__name__}")
        if self.output is not None:  # the node's own output: made again with it as grad_fn
            return self.make(t.array, True, node, self.output)
        if self.grad_fn is not None:
            return self.make(t.array, True, self.grad_fn, self.index)
        if self.accumulator is not None:  # a leaf: gradients go to its AccumulateGrad
            alias = self.make(t.array)
            alias._requires_grad, alias._accumulator = True, self.accumulator
            return alias
        return t


class RemovableHandle:
    """Returned by every ``register_*hook`` (of tensors, graph nodes and modules), as
    PyTorch's: ``remove()`` unregisters the hook, as does leaving a ``with`` block. Hooks
    are kept in dicts keyed by their handle's ``id``, in the order they were registered."""
    next_id = 0

    def __init__(self, hooks_dict, *, extra_dict=None):
        self.hooks_dict = hooks_dict
        self.id = RemovableHandle.next_id
        RemovableHandle.next_id += 1
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, dict):
            extra_dict = (extra_dict,)
        self.extra_dict = tuple(extra_dict)

    def remove(self):
        for table in (self.hooks_dict,) + self.extra_dict:
            table.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.remove()


def append_hook(hooks, hook):
    """Add ``hook`` to the dict ``hooks``; its handle."""
    if not callable(hook):
        raise TypeError(f"register_hook expects a callable, got {type(hook).__name__}")
    handle = RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


class TensorBase:
    """What the graph knows of a tensor: its array (``data``) and the attributes below.
    ``minigrad.Tensor`` adds the maths; ``Function.apply`` and the engine need only this.

    Class-level defaults, shared until a tensor sets its own (most never do)."""
    data = None
    _requires_grad = False  # (``requires_grad`` reads it; Tensor's setter checks the value)
    grad_fn = None     # the node that made this tensor (None: a leaf)
    _out_idx = 0       # which output of grad_fn this tensor is
    _vc = None         # version counter: a one-element list once needed, shared with views
    _view_of = None    # for a view: (source tensor, view op, its params, output index)
    _view_version = 0  # for a view: the version its grad_fn was recorded at
    _made_without_grad = False  # a view made under no_grad of a tensor that requires grad
    _tangents = None   # forward-mode AD: {dual level: tangent} (see autograd/forward_ad.py)
    _view_tangents = None  # forward-mode AD, a view: {level: (owner's tangent, tangent)}
    _fw_inherits = None  # forward-mode AD, a view made by make_dual or unpack_dual: the only
    #                      levels whose tangents it takes from its source (None: every level)
    _detached_in_place = False  # detach_() cut it from the graph that may have saved it
    _accumulator = None  # a leaf's AccumulateGrad, once an op has recorded an edge to it
    _hooks = None      # gradient hooks of a leaf
    _post_accumulate_hooks = None  # a leaf's hooks called after its .grad was written
    _output_class = None  # the class of the tensors that ops make from this one

    @property
    def requires_grad(self):
        """Whether operations on this tensor are recorded for backward."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self._requires_grad = value

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` each time backward has added into this leaf's ``.grad``
        (after its gradient hooks and its node's prehooks), as PyTorch's: where an
        optimiser can update a parameter as soon as its gradient is complete. Returns a
        handle with ``remove()``."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient")
        if self.grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf "
                               "tensors")
        if self._post_accumulate_hooks is None:
            self._post_accumulate_hooks = {}
        return append_hook(self._post_accumulate_hooks, hook)

    @property
    def _version(self):
        """How many in-place changes this tensor's memory has seen (shared with its views)."""
        vc = self._vc
        return 0 if vc is None else vc[0]

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def _base(self):
        """The tensor whose memory this view shares (None when not a view), as PyTorch."""
        t = self
        while t._view_of is not None:
            t = t._view_of[0]
        return None if t is self else t

    def _shared_counter(self):
        """This tensor's version counter, created on first need."""
        vc = self._vc
        if vc is None:
            vc = self._vc = [0]
        return vc
