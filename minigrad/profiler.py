"""Where the time and the memory of a step go: every op's forward and every node's backward.

    with mg.profiler.profile() as prof:
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    print(prof.table(group_by="op"))          # or group_by="module"
    prof.export_chrome_trace("trace.json")    # Perfetto, chrome://tracing
    prof.memory_timeline("memory.png")        # what the graph holds over the step

While a profile is active it is one of ``PROCESS.watchers`` (``autograd/grad_mode.py``), so
``Function.apply`` takes its general path, which calls ``op_begin`` and ``op_end`` around
each op's forward; ``engine.run_backward`` walks its nodes through ``walk_backward``, which
times each node (its backward, the undoing of broadcasts, the release of what it saved),
the ops its backward runs nested inside it. Outside a profile nothing of this runs.

Each op records (an ``Event``): its name (the op class, ``MatMul``; a backward node by its
node name, ``MatmulBackward0``), its wall time (on a GPU the device is synchronised before
and after, so the time is the op's own), the bytes of its outputs, the bytes it saved for
backward and when they were freed, its FLOPs (products only: ``MatMul``, ``Linear``,
``Attention``, counted as 2 per multiply-add, masks ignored), the module whose forward ran
it (``encoder.layers.0.self_attn``, from ``STATE.scope``, as the graph pictures name it),
and the line of the user's code that ran it (the innermost frame outside minigrad; the
programs in ``minigrad.demos`` count as user code).

Activation checkpointing (``minigrad.utils.checkpoint``): the ops that backward runs again
to get a region's activations back are on the "recompute" phase (their rows in the op
table are marked "(recompute)", ``recompute_s`` is their time), and the ops of a region's
first run hold nothing for backward (saved 0): what they would have saved (each buffer
once, parameters aside), less the region's inputs that the checkpoint keeps instead (held
on the memory timeline until backward frees the region), is ``checkpoint_saved_bytes`` (a
line of the table's footer).

An op's time excludes the profiler's own work (measured, reported in the table's footer);
ops run by another thread than the one that entered the profile are not recorded.
"""
import json
import sys
import threading
import time
import weakref
from collections import namedtuple

from .autograd.grad_mode import PROCESS, STATE
from .autograd.graph import AccumulateGrad, TensorBase
from .backend import _XP_BY_TYPE
from .viz.graph import nbytes_text
from .viz.modules import ModuleTree
from .files import naming

__all__ = ["profile", "Event", "NodeCost", "ProfileTable"]

_now = time.perf_counter_ns
FORWARD, BACKWARD, RECOMPUTE = "forward", "backward", "recompute"
NO_MODULE = "(no module)"

NodeCost = namedtuple("NodeCost", "time_s bytes flops forward_s backward_s saved_bytes")
NodeCost.__doc__ = """What one graph node cost (``profile.node_costs``): ``time_s`` its
forward and backward together (``forward_s + backward_s``, each with the ops it ran inside),
``bytes`` of its forward's outputs, ``flops`` of both passes, ``saved_bytes`` it kept for
backward."""


# --- FLOPs of the products, from the shapes ------------------------------------------------------

def _product_flops(arrays, out):
    """MatMul (and Mm, Bmm, Mv, Dot) and Linear: 2 * (output elements) * (inner dim)."""
    return 2 * out.size * arrays[0].shape[-1]


def _attention_flops(arrays, out):
    """q @ k^T and weights @ v: 2 * rows * T * S * (D + Dv)."""
    q, k = arrays[0], arrays[1]
    return 2 * (out.size // out.shape[-1]) * k.shape[-2] * (q.shape[-1] + out.shape[-1])


def _attention_backward_flops(arrays, out):
    """The tiled backward, on raw arrays: it makes the scores again (q k^T) and forms dV,
    dP, dQ and dK: 2 * rows * T * S * (3 D + 2 Dv)."""
    q, k = arrays[0], arrays[1]
    return 2 * (out.size // out.shape[-1]) * k.shape[-2] * (3 * q.shape[-1] + 2 * out.shape[-1])


def _linear_backward_flops(arrays, out):
    """dx = grad @ W and dW = grad^T @ x: twice the forward's products (counted for both
    gradients, also when the input needs none)."""
    return 2 * _product_flops(arrays, out)


FORWARD_FLOPS = {"MatMul": _product_flops, "Mm": _product_flops, "Bmm": _product_flops,
                 "Dot": _product_flops, "Mv": _product_flops, "Linear": _product_flops,
                 "Attention": _attention_flops}
# ops that are no views in the graph but whose output shares their input's memory (reshape's
# last step after a row-major copy): they allocate nothing
SHARING = frozenset(("UnsafeView",))
# ops whose backward computes on raw arrays, its products out of sight: (the estimate is
# used when the backward ran no product op of its own, as under create_graph)
BACKWARD_FLOPS = {"Attention": _attention_backward_flops, "Linear": _linear_backward_flops}


# --- one recorded op or node ---------------------------------------------------------------------

class Event:
    """One op (``kind == "op"``) or one node's backward (``kind == "node"``, with the ops
    its backward ran nested inside it), on the forward track (``phase == "forward"``: every
    op run outside ``backward()``) or the backward one (``"backward"``, or ``"recompute"``
    for the ops backward runs again inside a checkpointed region).

    Read after the profile: ``name``, ``kind``, ``phase``, ``start_s`` (from the profile's start),
    ``time_s`` (wall time, the profiler's own work taken out), ``self_s`` (less the events
    nested inside), ``depth`` (0: run directly by the user's code or the engine),
    ``module`` (dotted path; "" for the outermost module; None outside modules),
    ``source`` ("file:line"), ``out_bytes``, ``saved_bytes``, ``freed_s`` (when the saved
    tensors were released; None if they were not during the profile), ``flops`` (the
    event's own), ``node`` (the graph node, while it lives; None for an op not recorded).
    """
    __slots__ = ("name", "kind", "phase", "start", "end", "overhead_mark", "inner_overhead",
                 "child_ns", "depth", "parent", "scope", "leaf", "source", "out_bytes",
                 "saved_bytes", "flops", "inner_flops", "backward_flops", "node_ref", "freed",
                 "module", "_profile", "_inputs")

    def __init__(self, name, kind, phase, parent, scope, source):
        self.name, self.kind, self.phase, self.parent, self.scope, self.source = \
            name, kind, phase, parent, scope, source
        self.depth = 0 if parent is None else parent.depth + 1
        self.child_ns = self.inner_overhead = self.out_bytes = self.saved_bytes = 0
        self.flops = self.inner_flops = self.backward_flops = 0
        self.node_ref = self.freed = self.leaf = self.module = self._inputs = None
        self.end = None

    @property
    def duration_ns(self):
        return self.end - self.start - self.inner_overhead

    @property
    def time_s(self):
        return self.duration_ns / 1e9

    @property
    def self_s(self):
        return (self.duration_ns - self.child_ns) / 1e9

    @property
    def start_s(self):
        return (self.start - self._profile._start) / 1e9

    @property
    def freed_s(self):
        return None if self.freed is None else (self.freed - self._profile._start) / 1e9

    @property
    def node(self):
        return None if self.node_ref is None else self.node_ref()

    def __repr__(self):
        where = "" if self.module is None else f" in {self.module or '(root)'}"
        return f"<{self.phase} {self.name}{where}: {_time_text(self.time_s)}>"


# --- the profile ---------------------------------------------------------------------------------

class profile:
    """Record every op and backward node run inside the ``with`` block (see the module
    docstring). ``model``: the module whose paths name the others (by default the
    outermost module that ran, as in ``mg.viz.draw``).

    Read after the block: ``events`` (``Event`` records, in the order they started),
    ``memory`` (``(time.perf_counter_ns(), bytes held for backward)`` at each change),
    ``step_s``, ``overhead_s``, and the methods below.
    """

    def __init__(self, model=None):
        self.model = model
        self.events = []
        self.memory = []       # (time ns, bytes the graph holds for backward from then on)
        self._stack = []
        self._overhead_ns = 0
        self._callers = {}     # id(module) -> each module seen running a forward
        self._held = {}        # id(buffer) -> [bytes, number of live nodes holding it]
        self._recorded = {}    # id(node) -> the Event of its forward, while the node lives
        self._holding = {}     # id(node) -> (that Event, ids of the buffers it holds)
        self._bytes_held = 0
        self._active = False
        self._start = self._end = None
        self._thread = None
        self._regions = weakref.WeakSet()  # the checkpointed calls seen running forward
        self.checkpoint_would_save = 0  # bytes their ops would have saved for backward
        self.checkpoint_kept = 0        # bytes of their inputs, which they keep instead
        self.checkpoint_regions = 0     # how many checkpointed calls ran forward
        self._would_seen = weakref.WeakValueDictionary()  # id(buffer) -> buffer, counted
        self._kept_seen = weakref.WeakValueDictionary()
        self._region_refs = []  # weak references to the regions, to release what they keep

    # --- on and off ----------------------------------------------------------------------------
    def __enter__(self):
        if self._start is not None:
            raise RuntimeError("profile: this profile has run already; make a new one")
        self._thread = threading.get_ident()
        self._active = True
        self._start = _now()
        self.memory.append((self._start, 0))
        PROCESS.watchers = PROCESS.watchers + (self,)
        return self

    def __exit__(self, *exc):
        PROCESS.watchers = tuple(w for w in PROCESS.watchers if w is not self)
        self._end = _now()
        self._active = False
        self._stack.clear()
        self._holding.clear()
        self._recorded.clear()
        self._held.clear()
        self._region_refs.clear()
        self._would_seen = self._kept_seen = None  # (nothing of the step is kept)
        self._name_modules()
        return False

    @property
    def step_s(self):
        """Wall time of the ``with`` block."""
        self._check_done("step_s")
        return (self._end - self._start) / 1e9

    @property
    def overhead_s(self):
        """Time the profiler spent on its own records (included in ``step_s``)."""
        return self._overhead_ns / 1e9

    # --- called by Function._forward_general, around each op's forward ----------------------
    def op_begin(self, cls, node, arrays):
        entered = _now()
        if threading.get_ident() != self._thread:
            return
        stack = self._stack
        parent = stack[-1] if stack else None
        scope = STATE.scope
        if scope is None and parent is not None:
            scope = parent.scope
        elif scope is not None and id(scope) not in self._callers:
            self._note_callers(scope)
        if STATE.recomputing:
            phase = RECOMPUTE
        elif parent is not None and parent.phase != FORWARD:
            phase = BACKWARD
        else:
            phase = FORWARD
        event = Event(cls.__name__, "op", phase, parent, scope, _user_line())
        event._profile = self
        event.node_ref = node  # (until op_end: the node itself)
        if event.name in FORWARD_FLOPS or cls.view or event.name in SHARING:
            event._inputs = arrays
        stack.append(event)
        self.events.append(event)
        _synchronize(node.xp)
        event.start = _now()
        self._overhead_ns += event.start - entered
        event.overhead_mark = self._overhead_ns

    def op_end(self, node, out):
        if threading.get_ident() != self._thread:
            return
        _synchronize(node.xp)
        ended = _now()  # the op's end: what follows is the profiler's own work
        event = self._pop(node)
        if event is None:
            return
        event.end = ended
        event.inner_overhead = self._overhead_ns - event.overhead_mark
        outs = out if type(out) is tuple else (out,)
        event.out_bytes = _new_bytes(node, event._inputs, outs)
        if event._inputs is not None and event.name in FORWARD_FLOPS:
            event.flops = FORWARD_FLOPS[event.name](event._inputs, outs[0])
            if event.name in BACKWARD_FLOPS:
                event.backward_flops = BACKWARD_FLOPS[event.name](event._inputs, outs[0])
        event._inputs = None  # held no longer: the profile must not keep the step's arrays
        event.node_ref = None
        if any(node.__dict__.get("needs_input_grad", ())):  # recorded: a node of the graph
            key = id(node)
            event.node_ref = weakref.ref(node, self._forget_callback(key))
            self._recorded[key] = event
            saved = node._to_save or ()
            frame = _checkpoint_frame()
            if frame is not None:  # packed by a checkpoint: it keeps the region's inputs
                if not STATE.recomputing:  # (a checkpoint nested in one run again)
                    self._checkpointed(frame, saved)
                saved = ()
            self._hold(key, event, saved, event.end)
        self._close(event)
        self._overhead_ns += _now() - ended

    def _checkpointed(self, frame, saved):
        """Count the buffers an op of a checkpointed region would have saved (each once,
        and not the parameters of the module running it), and, the first time the region
        is met, its inputs' buffers, which the checkpoint keeps: those are held for
        backward (on the memory timeline) until the region is freed."""
        scope = STATE.scope  # its parameters exist anyway: keeping them costs nothing
        own = () if scope is None else \
            {id(p.array) for p in scope._parameters.values() if p is not None}
        for item in saved:
            arr = item.array if isinstance(item, TensorBase) else item
            if type(arr) in _XP_BY_TYPE and id(arr) not in own:
                self.checkpoint_would_save += self._first_time(_base(arr))
        if frame in self._regions:
            return
        self._regions.add(frame)
        self.checkpoint_regions += 1
        inputs = [a.array for a in frame.args if isinstance(a, TensorBase)]
        for arr in inputs:
            self.checkpoint_kept += self._first_time(_base(arr), kept=True)
        key = ("checkpoint", id(frame))
        self._region_refs.append(weakref.ref(frame, self._forget_callback(key)))
        self._hold(key, _Kept(), inputs, _now())

    def _first_time(self, base, kept=False):
        """``base``'s bytes the first time it is counted (as saved by a region's op, or as
        kept by a region), else 0. (Weak references: an id may be reused once freed.)"""
        seen = self._kept_seen if kept else self._would_seen
        try:
            if seen.get(id(base)) is base:
                return 0
            seen[id(base)] = base
        except TypeError:  # an array that takes no weak reference: counted each time
            pass
        return base.nbytes

    @property
    def checkpoint_saved_bytes(self):
        """The memory activation checkpointing saved in this step: the bytes of the buffers
        the ops of the checkpointed regions would have saved for backward (each buffer
        once, the parameters of the modules that ran them aside: they exist anyway), less
        those of the regions' inputs, which the checkpoint keeps instead (negative if
        that costs more)."""
        return self.checkpoint_would_save - self.checkpoint_kept

    @property
    def recompute_s(self):
        """Time backward spent running checkpointed regions again (their ops' time)."""
        self._check_done("recompute_s")
        return sum(e.time_s for e in self.events
                   if e.phase == RECOMPUTE and (e.parent is None or e.parent.phase != RECOMPUTE))

    # --- called by engine.run_backward, once per backward call ---------------------------------
    def walk_backward(self, order, pending):
        """Yield the nodes of ``order`` to the engine, timing each one that runs (those
        with gradients in ``pending`` when their turn comes)."""
        for node in order:
            entered = _now()
            if node not in pending or threading.get_ident() != self._thread:
                yield node
                continue
            parent = self._stack[-1] if self._stack else None
            event = Event(node.name(), "node", BACKWARD, parent, node.scope, None)
            event._profile = self
            event.node_ref = weakref.ref(node)
            xp = getattr(node, "xp", None)
            if type(node) is AccumulateGrad:
                event.leaf = id(node.variable) if node.variable is not None else None
                xp = _XP_BY_TYPE.get(type(node._data))
            self._stack.append(event)
            self.events.append(event)
            _synchronize(xp)
            event.start = _now()
            self._overhead_ns += event.start - entered
            event.overhead_mark = self._overhead_ns
            yield node
            _synchronize(xp)
            event.end = ended = _now()
            self._pop(node)
            event.inner_overhead = self._overhead_ns - event.overhead_mark
            forward = self._recorded.get(id(node))
            if forward is not None:
                event.saved_bytes = forward.saved_bytes
                if event.inner_flops == 0:
                    event.flops = forward.backward_flops
            if node.released:
                self._release(id(node), event.end)
            self._close(event)
            self._overhead_ns += _now() - ended

    def _note_callers(self, scope):
        """Keep the modules whose forward is running now (the first time ``scope`` is met),
        so that module paths start from the outermost one, however deep the first op. nn
        is built on the profiler: its Module is looked up in ``sys.modules`` (loaded, as
        ``scope`` is one), not imported."""
        call = sys.modules["minigrad.nn.module"].Module.__call__.__code__
        f = sys._getframe(2)
        while f is not None:
            if f.f_code is call:
                module = f.f_locals.get("self")
                self._callers.setdefault(id(module), module)
            f = f.f_back
        self._callers.setdefault(id(scope), scope)

    # --- the stack of open events --------------------------------------------------------------
    def _pop(self, node):
        """The open event of ``node``, taken off the stack with any above it (ops whose
        forward raised); None if ``node`` has none (an op of another thread)."""
        stack = self._stack
        for i in range(len(stack) - 1, -1, -1):
            ref = stack[i].node_ref
            if ref is node or (type(ref) is weakref.ref and ref() is node):
                event = stack[i]
                del stack[i:]
                return event
        return None

    def _close(self, event):
        parent = event.parent
        if parent is not None:
            parent.child_ns += event.duration_ns
            parent.inner_flops += event.flops + event.inner_flops

    # --- memory held for backward --------------------------------------------------------------
    def _hold(self, key, event, items, when):
        """Count the buffers node ``key`` saved (each buffer once however many nodes keep
        it)."""
        ids, total = [], 0
        for item in items:
            arr = item.array if isinstance(item, TensorBase) else item
            if type(arr) not in _XP_BY_TYPE:  # None, a number
                continue
            total += arr.nbytes
            base = _base(arr)
            buffer = id(base)
            entry = self._held.get(buffer)
            if entry is None:
                self._held[buffer] = [base.nbytes, 1]
                self._bytes_held += base.nbytes
            else:
                entry[1] += 1
            ids.append(buffer)
        event.saved_bytes = total
        self._holding[key] = (event, ids)
        if ids:
            self.memory.append((when, self._bytes_held))

    def _forget_callback(self, key):
        def gone(_ref):
            if self._active:
                self._release(key, _now())
                self._recorded.pop(key, None)
        return gone

    def _release(self, key, when):
        """The node ``key`` no longer holds its saved buffers (released, or collected)."""
        holding = self._holding.pop(key, None)
        if holding is None:
            return
        event, ids = holding
        event.freed = when
        for k in ids:
            entry = self._held[k]
            entry[1] -= 1
            if entry[1] == 0:
                del self._held[k]
                self._bytes_held -= entry[0]
        if ids:
            self.memory.append((when, self._bytes_held))

    # --- after the profile: names, tables, costs, trace, timeline ------------------------------
    def _check_done(self, what):
        if self._end is None:
            raise RuntimeError(f"profile.{what}: read the profile after its with block")

    def _name_modules(self):
        """Each event's module path (and backward nodes' source lines, from their forward)."""
        self.tree = tree = ModuleTree(self.model, list(self._callers.values()))
        self._callers.clear()
        source_of = {}  # id(live node) -> where its forward ran
        for e in self.events:
            e.module = tree.path(e.scope)
            if e.leaf is not None:  # a parameter's AccumulateGrad: the module holding it
                e.module = tree.owner_of.get(e.leaf)
            e.scope = None
            node = e.node
            if e.kind == "op" and node is not None:
                source_of[id(node)] = e.source
        for e in self.events:
            node = e.node
            if e.kind == "node" and node is not None:
                e.source = source_of.get(id(node))

    def table(self, sort_by="time", group_by="op", top=20):
        """A table of the events grouped by op name (``group_by="op"``, forward ops and
        backward nodes, as PyTorch's ``key_averages()``) or by module path (``"module"``:
        self time of the module's own ops and nodes, total with its submodules'), sorted by
        ``sort_by``: "time" (self time), "total", "calls", "bytes", "saved" or "flops".
        Prints as text; shows as an HTML table in Jupyter."""
        self._check_done("table")
        if group_by not in ("op", "module"):
            raise ValueError(f"profile.table: group_by must be 'op' or 'module', got {group_by!r}")
        if sort_by not in _SORT_KEYS:
            raise ValueError(f"profile.table: sort_by must be one of {', '.join(_SORT_KEYS)}, "
                             f"got {sort_by!r}")
        if not (isinstance(top, int) and top > 0):
            raise ValueError(f"profile.table: top must be a positive int, got {top!r}")
        rows = _rows_by_op(self.events) if group_by == "op" else \
            _rows_by_module(self.events, self.tree)
        rows.sort(key=_SORT_KEYS[sort_by], reverse=True)
        return ProfileTable(rows[:top], len(rows), group_by, self)

    def node_costs(self):
        """``{node: NodeCost}`` for every graph node recorded in this profile that is still
        alive, its forward and its backward together (for drawing costs on the graph)."""
        self._check_done("node_costs")
        costs = {}
        for e in self.events:
            node = e.node
            if node is None:
                continue
            fwd_s, bwd_s, out_bytes, flops, saved = costs.get(node, (0.0, 0.0, 0, 0, 0))
            if e.kind == "op":
                fwd_s, out_bytes, saved = fwd_s + e.time_s, out_bytes + e.out_bytes, \
                    saved + e.saved_bytes
            else:
                bwd_s += e.time_s
            costs[node] = (fwd_s, bwd_s, out_bytes, flops + e.flops + e.inner_flops, saved)
        return {n: NodeCost(f + b, o, fl, f, b, s) for n, (f, b, o, fl, s) in costs.items()}

    def peak_memory(self):
        """(bytes, seconds from the start): the most the graph held for backward, and when."""
        self._check_done("peak_memory")
        when, held = max(self.memory, key=lambda m: (m[1], -m[0]))
        return held, (when - self._start) / 1e9

    def export_chrome_trace(self, path):
        """Write the profile as Chrome trace-event JSON (open it in https://ui.perfetto.dev or
        chrome://tracing): forward ops on one track, backward nodes on another, each with the
        modules they ran in as enclosing spans, and a counter of the memory held for backward.
        Returns ``path``."""
        self._check_done("export_chrome_trace")
        with naming(path), open(path, "w") as f:
            json.dump(chrome_trace(self), f)
        return path

    def memory_timeline(self, path=None, title=None):
        """Plot the bytes the graph holds for backward over the step (they rise through the
        forward and fall as backward frees each node's saved tensors), peak marked. Saves
        to ``path`` if given; returns the matplotlib Figure."""
        self._check_done("memory_timeline")
        return plot_memory(self, path, title)


# --- table rows ----------------------------------------------------------------------------------

Row = namedtuple("Row", "name calls self_s total_s bytes saved flops")

_SORT_KEYS = {"time": lambda r: r.self_s, "total": lambda r: r.total_s,
              "calls": lambda r: r.calls, "bytes": lambda r: r.bytes,
              "saved": lambda r: r.saved, "flops": lambda r: r.flops}


def _rows_by_op(events):
    rows = {}
    for e in events:
        name = e.name + " (recompute)" if e.phase == RECOMPUTE else e.name
        calls, self_s, total_s, out, saved, flops = rows.get(name, (0, 0.0, 0.0, 0, 0, 0))
        total = e.time_s if not _inside_same(e) else 0.0  # (a recursion counts once)
        rows[name] = (calls + 1, self_s + e.self_s, total_s + total, out + e.out_bytes,
                        saved + (e.saved_bytes if e.kind == "op" else 0), flops + e.flops)
    return [Row(name, *v) for name, v in rows.items()]


def _inside_same(event):
    p = event.parent
    while p is not None:
        if p.name == event.name:
            return True
        p = p.parent
    return False


def _rows_by_module(events, tree):
    own = {}
    for e in events:
        calls, self_s, out, saved, flops = own.get(e.module, (0, 0.0, 0, 0, 0))
        own[e.module] = (calls + 1, self_s + e.self_s, out + e.out_bytes,
                         saved + (e.saved_bytes if e.kind == "op" else 0), flops + e.flops)
    totals = {}
    for path, (calls, self_s, out, saved, flops) in own.items():
        chain = [NO_MODULE] if path is None else list(tree.ancestors(path))
        for p in chain:
            t = totals.setdefault(p, [0, 0.0, 0, 0, 0])
            t[0] += calls
            t[1] += self_s
            t[2] += out
            t[3] += saved
            t[4] += flops
    rows = []
    for p, (calls, total_s, out, saved, flops) in totals.items():
        self_s = own.get(None if p == NO_MODULE else p, (0, 0.0))[1]
        rows.append(Row(_module_label(tree, p), calls, self_s, total_s, out, saved, flops))
    return rows


def _module_label(tree, path):
    if path == NO_MODULE:
        return path
    return path if path else f"({type(tree.modules[path]).__name__})"


class ProfileTable:
    """The rows of ``profile.table``: ``rows`` (named tuples: name, calls, self_s, total_s,
    bytes, saved, flops), ``str()`` a terminal table, ``_repr_html_`` an HTML one."""

    def __init__(self, rows, total_rows, group_by, prof):
        self.rows, self.total_rows, self.group_by = rows, total_rows, group_by
        self.step_s = prof.step_s
        self.events = len(prof.events)
        self.overhead_s = prof.overhead_s
        self.recorded_s = sum(e.time_s for e in prof.events if e.depth == 0)
        self.checkpoint = None
        if prof.checkpoint_regions or any(e.phase == RECOMPUTE for e in prof.events):
            self.checkpoint = (prof.recompute_s, prof.checkpoint_would_save,
                               prof.checkpoint_kept)

    @property
    def header(self):
        by_op = self.group_by == "op"
        return ("op" if by_op else "module", "calls" if by_op else "events", "self", "self %",
                "total", "total %", "out bytes", "saved", "FLOP/s")

    def cells(self, row):
        step = self.step_s or 1e-30
        time_s = row.self_s if self.group_by == "op" else row.total_s  # (what row.flops covers)
        rate = row.flops / time_s if row.flops and time_s > 0 else None
        return (row.name, str(row.calls), _time_text(row.self_s),
                f"{100 * row.self_s / step:.1f}%", _time_text(row.total_s),
                f"{100 * row.total_s / step:.1f}%",
                nbytes_text(row.bytes) if row.bytes else "-",
                nbytes_text(row.saved) if row.saved else "-",
                "-" if rate is None else f"{rate / 1e9:.2f} G")

    def footer(self):
        n = max(self.events, 1)
        more = self.total_rows - len(self.rows)
        lines = []
        if more > 0:
            lines.append(f"... and {more} more rows")
        lines.append(
            f"step {_time_text(self.step_s)}: ops and backward nodes "
            f"{_time_text(self.recorded_s)} ({100 * self.recorded_s / (self.step_s or 1):.1f}%),"
            f" the rest is Python between ops")
        lines.append(
            f"profiler overhead: {self.events} events, {self.overhead_s / n * 1e6:.1f} µs each, "
            f"{_time_text(self.overhead_s)} ({100 * self.overhead_s / (self.step_s or 1):.1f}% "
            "of the step, not counted in any op)")
        if self.checkpoint is not None:
            again, would, kept = self.checkpoint
            net = (f"{nbytes_text(would - kept)} saved" if would >= kept else
                   f"{nbytes_text(kept - would)} more")
            lines.append(
                f"checkpoint: backward ran the regions again in {_time_text(again)} "
                f"({100 * again / (self.step_s or 1):.1f}% of the step, the (recompute) rows); "
                f"they kept {nbytes_text(kept)} for backward (their inputs) where their ops "
                f"would have saved {nbytes_text(would)} (parameters aside): {net}")
        return lines

    def __str__(self):
        body = [self.header] + [self.cells(r) for r in self.rows]
        widths = [max(len(line[i]) for line in body) for i in range(len(self.header))]
        out = []
        for k, line in enumerate(body):
            out.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                 for i, (c, w) in enumerate(zip(line, widths))))
            if k == 0:
                out.append("-" * len(out[0]))
        return "\n".join(out + self.footer())

    __repr__ = __str__

    def _repr_html_(self):
        import html
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.header)
        rows = "".join("<tr>" + "".join(
            f"<td style='text-align:{'left' if i == 0 else 'right'}'>{html.escape(c)}</td>"
            for i, c in enumerate(self.cells(r))) + "</tr>" for r in self.rows)
        foot = "".join(f"<p>{html.escape(line)}</p>" for line in self.footer())
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{foot}"


# --- the Chrome trace ----------------------------------------------------------------------------

TRACKS = {FORWARD: 1, BACKWARD: 2}
_TID = {FORWARD: 1, BACKWARD: 2, RECOMPUTE: 2}  # (recomputed ops nest in backward's nodes)
_CAT = {FORWARD: "op", BACKWARD: "backward", RECOMPUTE: "recompute"}


def chrome_trace(prof):
    """The trace-event dict of ``prof`` (see ``profile.export_chrome_trace``)."""
    start = prof._start

    def us(ns):
        return (ns - start) / 1000

    events = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "minigrad"}}]
    for phase, tid in TRACKS.items():
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"name": phase}})
    for e in prof.events:
        args = {"module": e.module if e.module is not None else NO_MODULE,
                "self_us": round(e.self_s * 1e6, 3)}
        for key in ("source", "out_bytes", "saved_bytes", "flops"):
            value = getattr(e, key)
            if value:
                args[key] = value
        events.append({"name": e.name, "cat": _CAT[e.phase],
                       "ph": "X", "pid": 1, "tid": _TID[e.phase], "ts": us(e.start),
                       "dur": (e.end - e.start) / 1000, "args": args})
    for phase, tid in TRACKS.items():
        top = [e for e in prof.events if e.depth == 0 and e.phase == phase]
        for path, begin, end in module_spans(top, prof.tree):
            events.append({"name": _module_label(prof.tree, path), "cat": "module", "ph": "X",
                           "pid": 1, "tid": tid, "ts": us(begin), "dur": (end - begin) / 1000,
                           "args": {"module": path}})
    for when, held in prof.memory:
        events.append({"name": "saved for backward", "ph": "C", "pid": 1, "ts": us(when),
                       "args": {"MiB": held / 2 ** 20}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def module_spans(events, tree):
    """(path, start ns, end ns) of each run of consecutive ``events`` (one track, in time
    order) inside a module, for every enclosing module: spans that nest properly."""
    spans, open_ = [], []  # open_: [path, start, end], outermost first
    for e in events:
        chain = [] if e.module is None else list(tree.ancestors(e.module))[::-1]
        k = 0
        while k < len(open_) and k < len(chain) and open_[k][0] == chain[k]:
            k += 1
        spans.extend(tuple(s) for s in reversed(open_[k:]))
        del open_[k:]
        open_.extend([p, e.start, e.end] for p in chain[k:])
        for s in open_:
            s[2] = e.end
    spans.extend(tuple(s) for s in reversed(open_))
    return spans


# --- the memory timeline --------------------------------------------------------------------------

def plot_memory(prof, path=None, title=None):
    """The figure of ``profile.memory_timeline``."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("profile.memory_timeline needs matplotlib: pip install matplotlib "
                          "(or pip install 'minigrad[plot]')") from None
    start = prof._start
    times = [(t - start) / 1e6 for t, _ in prof.memory] + [(prof._end - start) / 1e6]
    held = [b / 2 ** 20 for _, b in prof.memory]
    held.append(held[-1])
    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.step(times, held, where="post", color="#1f77b4", lw=1.5)
    ax.fill_between(times, held, step="post", color="#1f77b4", alpha=0.15)
    backward = [e for e in prof.events if e.kind == "node" and e.depth == 0]
    if backward:
        b0, b1 = (backward[0].start - start) / 1e6, (backward[-1].end - start) / 1e6
        ax.axvspan(b0, b1, color="#ff7f0e", alpha=0.08, label="backward")
    peak, when = prof.peak_memory()
    ax.plot([when * 1e3], [peak / 2 ** 20], "o", color="#d62728")
    ax.annotate(f"peak {nbytes_text(peak)} at {when * 1e3:.1f} ms", (when * 1e3, peak / 2 ** 20),
                textcoords="offset points", xytext=(8, 6), color="#d62728", va="bottom",
                bbox=dict(fc="white", ec="none", alpha=0.8, pad=1))
    ax.set_xlabel("time in the step (ms)")
    ax.set_ylabel("saved for backward (MiB)")
    ax.set_title(title or "Memory the graph holds for backward")
    ax.set_xlim(0, times[-1])
    ax.set_ylim(0, max(held) * 1.25 or 1)
    if backward:
        ax.legend(loc="upper left")
    fig.tight_layout()
    if path is not None:
        with naming(path):
            fig.savefig(path, dpi=120)
    return fig


# --- helpers -------------------------------------------------------------------------------------

_SYNC = {}  # array module -> the function that waits for its device, or None


def _synchronize(xp):
    """Wait for the work queued on the device of array module ``xp`` (CuPy's current
    stream); NumPy computes synchronously, so nothing to wait for."""
    sync = _SYNC.get(xp, False)
    if sync is False:
        cuda = getattr(xp, "cuda", None)
        sync = _SYNC[xp] = None if cuda is None else \
            (lambda: cuda.get_current_stream().synchronize())
    if sync is not None:
        sync()


_INSIDE = {}  # code object -> whether it belongs to minigrad (not to the user)


def _user_line():
    """'file:line' of the innermost frame of the user's code (outside minigrad; the
    programs in minigrad.demos count as the user's)."""
    f = sys._getframe(2)
    while f is not None:
        code = f.f_code
        inside = _INSIDE.get(code)
        if inside is None:
            name = f.f_globals.get("__name__", "")
            inside = _INSIDE[code] = (name == "minigrad" or name.startswith("minigrad.")) \
                and not name.startswith("minigrad.demos.")
        if not inside:
            return f"{code.co_filename}:{f.f_lineno}"
        f = f.f_back
    return None


class _Kept:
    """The record of what a checkpointed region keeps for backward (its inputs)."""
    saved_bytes = 0
    freed = None


def _checkpoint_frame():
    """The checkpointed call whose ops are being recorded now (its pack hook is the
    innermost saved-tensors hook), or None."""
    hooks = STATE.saved_hooks
    if not hooks:
        return None
    frame = getattr(hooks[-1][0], "__self__", None)
    # (looked up, not imported: the utils package is built on the profiler; not loaded,
    # no checkpoint runs)
    checkpoint = sys.modules.get("minigrad.utils.checkpoint")
    return frame if checkpoint is not None and isinstance(frame, checkpoint._Recompute) \
        else None


def _new_bytes(node, inputs, outs):
    """Bytes of the outputs, except those of a view op that share its input's memory (a
    view allocates nothing)."""
    if type(node).view or type(node).op.__name__ in SHARING:
        source = _base(inputs[0])
        return sum(o.nbytes for o in outs if _base(o) is not source)
    return sum(getattr(o, "nbytes", 0) for o in outs)


def _base(arr):
    while getattr(arr, "base", None) is not None and hasattr(arr.base, "nbytes"):
        arr = arr.base
    return arr


def _time_text(s):
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} µs"
