"""mg.profiler.profile: times that add up, bytes that are the arrays' own, module paths,
FLOPs as PyTorch counts them, a valid Chrome trace, and an op path untouched when off."""
import json
import sys

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F
from minigrad.autograd.grad_mode import PROCESS
from minigrad.profiler import profile
from minigrad.viz.graph import held_bytes


def _mlp_step(device, n=192, d=384):
    """A step dominated by its products: per-op bookkeeping is a small part of its time."""
    x = mg.randn(n, d, device=device)
    w1 = mg.randn(d, d, device=device, requires_grad=True)
    w2 = mg.randn(d, d, device=device, requires_grad=True)

    def step():
        loss = ((x @ w1).tanh() @ w2).square().mean()
        loss.backward()
        return loss
    return step


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 3)

    def forward(self, x):
        return self.proj(x).tanh()


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        self.head = Block()

    def forward(self, x):
        return self.head(self.enc(x))


# --- off: nothing of the profiler on the op path ---------------------------------------------

def test_off_leaves_the_op_path_untouched(device, monkeypatch):
    assert not PROCESS.watched and PROCESS.watchers == ()
    x = mg.randn(3, 3, device=device, requires_grad=True)
    with profile() as prof:
        assert PROCESS.watched and prof in PROCESS.watchers
        (x * 2).sum().backward()
    assert not PROCESS.watched and PROCESS.watchers == ()
    recorded = len(prof.events)

    def refuse(*args, **kwargs):
        raise AssertionError("the profiler was called outside its with block")
    for name in ("op_begin", "op_end", "walk_backward"):
        monkeypatch.setattr(profile, name, refuse)
    y = (x.exp() @ x).relu().sum()  # the fast path of Function.apply, and the engine
    y.backward()
    assert len(prof.events) == recorded


def test_watchers_restored_after_an_error(device):
    with pytest.raises(ValueError):
        with profile():
            mg.ones(2, 3, device=device) @ mg.ones(4, 5, device=device)
    assert not PROCESS.watched and PROCESS.watchers == ()


def test_profile_runs_once():
    prof = profile()
    with prof:
        pass
    with pytest.raises(RuntimeError, match="has run already"):
        with prof:
            pass


# --- time ------------------------------------------------------------------------------------

def test_times_add_up_to_the_step(device):
    """The events run directly by the step (ops, backward nodes), plus the profiler's own
    measured work, account for the step's wall time: at least 80% of it on a step of large
    products (the rest is Python between ops), and never more than all of it."""
    step = _mlp_step(device)
    step()  # warm up
    with profile() as prof:
        step()
    top = sum(e.time_s for e in prof.events if e.depth == 0)
    accounted = top + prof.overhead_s
    assert accounted <= prof.step_s
    assert accounted >= 0.8 * prof.step_s, (top, prof.overhead_s, prof.step_s)
    for e in prof.events:  # nested times fit inside their parents
        assert e.self_s >= 0 and e.time_s >= 0
        if e.parent is not None:
            assert e.parent.start <= e.start and e.end <= e.parent.end
    table = prof.table()
    assert sum(r.self_s for r in prof.table(top=1000).rows) == pytest.approx(top, rel=1e-9)
    assert "profiler overhead" in str(table)


def test_no_time_is_counted_twice(monkeypatch):
    """On a clock that moves on at every reading, and a whole second whenever the profiler
    takes an event off its stack (its own work, so overhead), a stretch counted both in an
    event and in the overhead would take an event's self time below zero, or the accounted
    time past the step's, by a second."""
    from minigrad import profiler
    clock = [0]

    def now():
        clock[0] += 1000
        return clock[0]

    def slow_pop(self, node):
        clock[0] += 10 ** 9
        return pop(self, node)
    pop = profile._pop
    monkeypatch.setattr(profiler, "_now", now)
    monkeypatch.setattr(profile, "_pop", slow_pop)
    step = _mlp_step("cpu")
    with profile() as prof:
        step()
    assert any(e.depth > 0 for e in prof.events)  # (nested events, to be checked)
    for e in prof.events:
        assert e.self_s >= 0, e
    top = sum(e.time_s for e in prof.events if e.depth == 0)
    assert top + prof.overhead_s <= prof.step_s


def test_backward_nodes_hold_the_ops_their_backward_runs(device):
    from minigrad.autograd.engine import topological_order
    x = mg.randn(8, 4, device=device)
    w1, w2 = (mg.randn(4, 4, device=device, requires_grad=True) for _ in range(2))
    with profile() as prof:
        loss = ((x @ w1).tanh() @ w2).square().mean()
        order = [n.name() for n in topological_order([loss.grad_fn])]
        loss.backward()
    nodes = [e for e in prof.events if e.kind == "node"]
    assert [e.name for e in nodes] == order  # every node the engine ran, in its order
    matmul_bwd = [e for e in nodes if e.name == "MmBackward0"]
    assert matmul_bwd and all(e.phase == "backward" and e.depth == 0 for e in matmul_bwd)
    for e in matmul_bwd:
        inner = [c for c in prof.events if c.parent is e and c.name == "Mm"]
        assert inner and all(c.phase == "backward" for c in inner)
    forward = [e for e in prof.events if e.phase == "forward"]
    assert [e.name for e in forward if e.name == "Mm"] == ["Mm", "Mm"]


def test_user_function_ops_nest_inside_it(device):
    class Double(mg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return (x * 2).exp().log()

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    x = mg.randn(4, device=device, requires_grad=True)
    with profile() as prof:
        Double.apply(x).sum().backward()
    outer = next(e for e in prof.events if e.name == "Double")
    inner = [e.name for e in prof.events if e.parent is outer]
    assert inner == ["Mul", "Exp", "Log"]
    assert outer.time_s >= sum(e.time_s for e in prof.events if e.parent is outer)


# --- bytes -------------------------------------------------------------------------------------

def test_bytes_are_the_arrays_nbytes(device):
    x = mg.randn(16, 32, device=device, requires_grad=True)
    w = mg.randn(32, 8, dtype=mg.float64, device=device, requires_grad=True)
    with profile() as prof:
        h = x.double() @ w
        y = h.tanh()
        sq = y * y
        loss = sq.sum()
        nodes = [h.grad_fn, y.grad_fn, sq.grad_fn]
        by_node = {id(e.node): e for e in prof.events if e.node is not None}
        saved_before = {id(n): n.saved_bytes() for n in nodes}
        held_at_peak = held_bytes([n for n in _graph(loss)])[0]
        loss.backward()
    assert by_node[id(h.grad_fn)].out_bytes == h.array.nbytes == 16 * 8 * 8
    assert by_node[id(y.grad_fn)].out_bytes == y.array.nbytes
    for n in nodes:
        assert by_node[id(n)].saved_bytes == saved_before[id(n)] > 0
        assert by_node[id(n)].freed_s is not None  # backward released them
    peak, _ = prof.peak_memory()
    assert peak == held_at_peak
    assert prof.memory[-1][1] == 0  # everything freed by the end


def test_views_allocate_no_bytes(device):
    x = mg.randn(4, 6, device=device)
    with profile() as prof:
        v = x.reshape(6, 4)         # a view: no new memory
        t = x.T                     # a view
        c = t.reshape(24)           # a copy (t is not contiguous)
    assert c.array.base is None or not np.shares_memory(c.array, x.array)
    recorded = [(e.name, e.out_bytes) for e in prof.events]
    # (the copy: a row-major clone, then seen with the new shape, as PyTorch's graph)
    assert recorded == [("Reshape", 0), ("Permute", 0), ("Clone", c.array.nbytes),
                        ("UnsafeView", 0)]
    assert v.array.nbytes == t.array.nbytes == c.array.nbytes == 96


@pytest.mark.parametrize("op", ["reshape", "transpose", "view", "getitem", "exp", "matmul"])
def test_the_profile_keeps_no_array_of_the_step(op):
    """The step's arrays are freed as without a profile (held ones would make the next
    op's memory new pages, and its time the profiler's): once the step's tensors are gone,
    nothing of them is alive while the profile is."""
    import gc
    import weakref
    run = {"reshape": lambda x: x.reshape(12, 2), "transpose": lambda x: x.T,
           "view": lambda x: x.view(2, 12), "getitem": lambda x: x[1:],
           "exp": lambda x: x.exp(), "matmul": lambda x: x @ x.T}[op]
    with profile() as prof:
        x = mg.randn(4, 6, requires_grad=True)
        out = run(x * 2)
        out.sum().backward()
        alive = [weakref.ref(a) for a in (x.array, out.array, _base_of(out.array))]
        del x, out
    gc.collect()
    assert prof.events and [r() for r in alive] == [None] * len(alive)


def _base_of(arr):
    while arr.base is not None:
        arr = arr.base
    return arr


def test_retained_graph_keeps_its_bytes(device):
    x = mg.randn(5, 5, device=device, requires_grad=True)
    with profile() as prof:
        y = x.exp().sum()
        y.backward(retain_graph=True)
    assert prof.memory[-1][1] == x.array.nbytes  # exp saved its output: not released
    assert all(e.freed_s is None for e in prof.events if e.kind == "op")


def _graph(root):
    from minigrad.autograd.engine import topological_order
    return [n for n in topological_order([root.grad_fn]) if n.edges]


# --- modules and source lines ------------------------------------------------------------------

def test_module_paths(device):
    model = Net().to(device)
    names = {id(m): name for name, m in model.named_modules()}
    ran = []
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.ReLU)):
            m.register_forward_hook(lambda mod, args, out: ran.append(names[id(mod)]))
    x = mg.randn(2, 4, device=device)
    with profile() as prof:
        model(x).sum().backward()
    leaf_ops = [e for e in prof.events if e.kind == "op" and e.name in ("Linear", "Relu")]
    assert [e.module for e in leaf_ops] == ran == ["enc.0", "enc.1", "head.proj"]
    tanh = next(e for e in prof.events if e.name == "Tanh")
    assert tanh.module == "head"
    addmm = [e.module for e in prof.events if e.name == "AddmmBackward0"]
    assert addmm == ["head.proj", "enc.0"]  # the backward of an op is its module's
    accumulate = sorted(e.module for e in prof.events if e.name == "AccumulateGrad")
    assert accumulate == ["enc.0", "enc.0", "head.proj", "head.proj"]  # weight and bias
    summed = next(e for e in prof.events if e.name == "Sum" and e.phase == "forward")
    assert summed.module is None  # outside the model
    rows = {r.name: r for r in prof.table(group_by="module", top=100).rows}
    assert set(rows) == {"(Net)", "enc", "enc.0", "enc.1", "head", "head.proj",
                         "(no module)"}
    assert rows["head"].total_s == pytest.approx(rows["head"].self_s + rows["head.proj"].total_s)
    assert rows["(Net)"].calls == rows["enc"].calls + rows["head"].calls  # totals nest
    assert rows["enc"].calls == rows["enc.0"].calls + rows["enc.1"].calls


def test_source_lines_point_at_the_users_code(device):
    x = mg.randn(3, device=device, requires_grad=True)
    with profile() as prof:
        line = sys._getframe().f_lineno + 1
        y = x.sigmoid().sum()
        y.backward()
    sig = next(e for e in prof.events if e.name == "Sigmoid")
    assert sig.source == f"{__file__}:{line}"
    node = next(e for e in prof.events if e.name == "SigmoidBackward0")
    assert node.source == sig.source  # a node's backward: where its op ran


# --- FLOPs -------------------------------------------------------------------------------------

def test_flops_of_the_products(device):
    a = mg.randn(3, 5, 7, device=device, requires_grad=True)
    b = mg.randn(7, 4, device=device, requires_grad=True)
    lin = nn.Linear(7, 6).to(device)
    q = mg.randn(2, 3, 10, 8, device=device, requires_grad=True)
    k = mg.randn(2, 3, 12, 8, device=device, requires_grad=True)
    v = mg.randn(2, 3, 12, 5, device=device, requires_grad=True)
    with profile() as prof:
        (a @ b).sum().backward()
        lin(a).sum().backward()
        F.scaled_dot_product_attention(q, k, v).sum().backward()
    flops = {e.name: e.flops for e in prof.events if e.kind == "op" and e.phase == "forward"
             and e.flops}
    assert flops == {"MatMul": 2 * 3 * 5 * 4 * 7, "Linear": 2 * 15 * 6 * 7,
                     "Attention": 2 * 6 * 10 * 12 * (8 + 5)}
    bwd = {e.name: e.flops + e.inner_flops for e in prof.events if e.kind == "node"}
    assert bwd["MatmulBackward0"] == 2 * flops["MatMul"]
    assert bwd["AddmmBackward0"] == 2 * flops["Linear"]
    assert bwd["AttentionBackward0"] == 2 * 6 * 10 * 12 * (3 * 8 + 2 * 5)


def test_flops_match_torch():
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode
    rng = np.random.default_rng(0)
    xs, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in
                  [(4, 6, 16), (16, 32), (10, 32)])

    def run(lib, linear, tensor):
        x = tensor(xs)
        a, b = tensor(w1, requires_grad=True), tensor(w2, requires_grad=True)
        linear(x @ a, b).sum().backward()

    with FlopCounterMode(display=False) as counter:
        run(torch, torch.nn.functional.linear, torch.tensor)
    with profile() as prof:
        run(mg, F.linear, mg.tensor)
    total = sum(e.flops for e in prof.events)
    assert total == counter.get_total_flops()


# --- outputs -----------------------------------------------------------------------------------

def _trace_checks(trace):
    """Phases, fields and nesting of a trace-event file, per track."""
    events = trace["traceEvents"]
    assert {e["ph"] for e in events} <= {"X", "M", "C"}
    tracks = {}
    for e in events:
        assert isinstance(e["name"], str) and e["pid"] == 1
        if e["ph"] == "X":
            assert e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["args"], dict)
            tracks.setdefault(e["tid"], []).append(e)
        elif e["ph"] == "C":
            assert all(v >= 0 for v in e["args"].values())
    for spans in tracks.values():  # every span inside the one that encloses its start
        spans.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_ = []
        for e in spans:
            while open_ and open_[-1]["ts"] + open_[-1]["dur"] <= e["ts"] + 1e-6 and \
                    not (open_[-1]["ts"] <= e["ts"] and e["dur"] == 0):
                open_.pop()
            if open_:
                top = open_[-1]
                assert e["ts"] + e["dur"] <= top["ts"] + top["dur"] + 1e-6, (e, top)
            open_.append(e)
    return tracks


def test_chrome_trace_is_valid_and_nested(device, tmp_path):
    model = Net().to(device)
    with profile() as prof:
        model(mg.randn(2, 4, device=device)).sum().backward()
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    with open(path) as f:
        trace = json.load(f)
    tracks = _trace_checks(trace)
    names = {e["args"]["name"]: e["tid"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    fwd, bwd = tracks[names["forward"]], tracks[names["backward"]]
    assert names["forward"] != names["backward"]
    spans = {e["name"] for e in fwd if e["cat"] == "module"}
    assert spans == {"(Net)", "enc", "enc.0", "enc.1", "head", "head.proj"}
    assert {e["cat"] for e in bwd} == {"backward", "module"}
    linear = next(e for e in fwd if e["name"] == "Linear" and e["args"]["module"] == "head.proj")
    span = next(e for e in fwd if e["cat"] == "module" and e["name"] == "head.proj")
    assert span["ts"] <= linear["ts"] and linear["ts"] + linear["dur"] <= span["ts"] + span["dur"]


def test_trace_checker_refuses_bad_nesting():
    bad = {"traceEvents": [
        {"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 10, "args": {}},
        {"name": "b", "ph": "X", "pid": 1, "tid": 1, "ts": 5, "dur": 10, "args": {}}]}
    with pytest.raises(AssertionError):
        _trace_checks(bad)


def test_table_text_html_and_arguments(device):
    step = _mlp_step(device, n=8, d=8)
    with pytest.raises(RuntimeError, match="after its with block"):
        with profile() as prof:
            prof.table()
    with profile() as prof:
        step()
    table = prof.table(top=3)
    text = str(table)
    assert text.splitlines()[0].split()[:3] == ["op", "calls", "self"]
    assert len(table.rows) == 3 and "more rows" in text and "<table>" in table._repr_html_()
    by_calls = prof.table(sort_by="calls", top=100).rows
    assert [r.calls for r in by_calls] == sorted((r.calls for r in by_calls), reverse=True)
    for bad, match in [(dict(group_by="layer"), "group_by"), (dict(sort_by="speed"), "sort_by"),
                       (dict(top=0), "top")]:
        with pytest.raises(ValueError, match=match):
            prof.table(**bad)


def test_node_costs(device):
    x = mg.randn(6, 6, device=device, requires_grad=True)
    with profile() as prof:
        y = x @ x
        loss = y.sum()
        loss.backward()
    costs = prof.node_costs()
    c = costs[y.grad_fn]
    assert c.forward_s > 0 and c.backward_s > 0 and c.time_s == c.forward_s + c.backward_s
    assert c.bytes == y.array.nbytes and c.flops == 3 * 2 * 6 ** 3
    assert c.saved_bytes == 2 * x.array.nbytes  # x, twice (as Node.saved_bytes counts)
    assert costs[loss.grad_fn].flops == 0
    assert x._accumulator in costs


def test_memory_timeline(device, tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    step = _mlp_step(device, n=16, d=16)
    with profile() as prof:
        step()
    fig = prof.memory_timeline(str(tmp_path / "memory.png"))
    assert (tmp_path / "memory.png").stat().st_size > 0
    peak, when = prof.peak_memory()
    marked = [line for line in fig.axes[0].lines if list(line.get_xdata()) == [when * 1e3]]
    assert marked and marked[0].get_ydata()[0] == peak / 2 ** 20
    held = [b for _, b in prof.memory]
    top = held.index(peak)
    assert held[:top + 1] == sorted(held[:top + 1])  # rises through forward
    assert held[top:] == sorted(held[top:], reverse=True) and held[-1] == 0  # falls in backward
