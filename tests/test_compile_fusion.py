"""mg.compile's fusion: runs of elementwise instructions replay as one compiled loop each
(numba, on the CPU). A fused replay equals the unfused replay and eager mode bit for bit,
on elementwise chains with special values and broadcasting, on an MLP and a transformer
training step and on the benchmarks' 100-op chain; functions whose bits a loop would
change stay unfused; what is read later stays materialised, nothing else is stored; and
a replay peaks at no more memory than the eager step."""
import tracemalloc
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.compile import CompileWarning, cpu_kernels, fusion
from minigrad.models import Transformer

numba = pytest.importorskip("numba")

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-30, 1e30, np.inf, -np.inf, np.nan, 88.0,
            1e-45, -3e-39]


def _bits(a):
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _values(dtype, seed, shape):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 3).astype(dtype)
    a.reshape(-1)[:len(_SPECIAL)] = np.array(_SPECIAL, dtype=dtype)[:a.size]
    return a


def _runs(fn, make_inputs, calls=4):
    """``fn`` run eagerly, compiled without fusion and compiled with it, each on inputs
    from ``make_inputs()``: (the three lists of results as arrays, the fused step)."""
    results, steps = [], []
    for mode in ("eager", "unfused", "fused"):
        run = fn if mode == "eager" else mg.compile(fn, fuse=mode == "fused")
        got = []
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("error", CompileWarning)
            for _ in range(calls):
                out = run(*make_inputs())
                got += [o.numpy().copy() for o in (out if isinstance(out, tuple) else (out,))]
        results.append(got)
        steps.append(run)
    return results, steps[2]


def _same_bits(results):
    for other in results[1:]:
        assert len(other) == len(results[0])
        for a, b in zip(results[0], other):
            assert a.dtype == b.dtype and np.array_equal(_bits(a), _bits(b))


CHAINS = [  # (name, input shapes, function): every fusable ufunc, constants, broadcasting
    ("arith", [(5, 7), (5, 7)], lambda x, y: ((x + y) * 0.5 - y / x) * 3),
    ("unary", [(5, 7), (5, 7)], lambda x, y: (-(x * y)).abs().sqrt() + 1),
    ("relu", [(5, 7), (5, 7)], lambda x, y: (x * y - 0.5).relu() + (y - x).relu()),
    ("relu_of_minus_zero", [(5, 7)], lambda x: (x * 1.0).relu() * 3),  # NumPy's: +0
    ("row", [(5, 7), (7,)], lambda x, b: (x * b + b) / 2 - b),
    ("column", [(5, 7), (5, 1)], lambda x, s: (x - s) * s + 1e30),
    ("scalar", [(3, 5, 7), ()], lambda x, s: x * s * s - s),
    ("int_constant", [(6, 4), (6, 4)], lambda x, y: (x * 3 + y * 2) / 7),
    ("inf_constant", [(6, 4), (6, 4)], lambda x, y: (x * float("inf") + y) - float("-inf")),
    ("two_results", [(5, 7), (5, 7)], lambda x, y: ((x * y) + 1, (x * y) * y - x)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name,shapes,fn", CHAINS, ids=[c[0] for c in CHAINS])
def test_a_fused_chain_equals_unfused_and_eager_bit_for_bit(name, shapes, fn, dtype):
    arrays = [_values(dtype, i, s) for i, s in enumerate(shapes)]
    results, step = _runs(fn, lambda: [mg.tensor(a) for a in arrays])
    _same_bits(results)
    assert results[0][0].dtype == dtype
    assert step.replays >= 2 and step.program.groups, step.listing()


def test_numbers_keep_float32_as_numpy_does():
    """A Python float is rounded to float32 before the float32 operation (numba alone would
    compute in float64): 1/3 as float32, times x, differs from x/3 rounded once."""
    x = mg.tensor(np.linspace(1, 2, 101, dtype=np.float32))
    results, step = _runs(lambda x: (x * (1 / 3) + 0.1) * 0.7, lambda: [x])
    _same_bits(results)
    exact = ((x.numpy().astype(np.float64) * (1 / 3) + 0.1) * 0.7).astype(np.float32)
    assert not np.array_equal(results[2][0], exact)  # (so the test would see float64)
    assert step.program.groups


def test_functions_numpy_computes_its_own_way_stay_unfused():
    """exp, tanh, log, sin, cos: NumPy's own implementations differ from a compiled loop's
    in the last bit for some inputs, so each runs as its ufunc between two groups."""
    x = mg.tensor(_values(np.float32, 0, (8, 9)))
    results, step = _runs(lambda x: ((x * 2 + 1).tanh() * 3 - 1).exp() * 0.5 + 2, lambda: [x])
    _same_bits(results)
    program = step.program
    fused = {k for g in program.groups for k in g.members}
    names = {program.instructions[k].name for k in fused}
    assert len(program.groups) == 3 and not names & {"Tanh", "Exp"}, step.listing()


def test_only_what_is_read_later_is_stored_and_the_listing_shows_the_groups():
    x, y = (mg.tensor(_values(np.float32, i, (4, 6))) for i in range(2))
    results, step = _runs(lambda x, y: ((x * y + x) * 2 - y, (x * y).exp()), lambda: [x, y])
    _same_bits(results)
    program = step.program
    (group,) = program.groups
    made = [program.instructions[k].outs[0] for k in group.members]
    assert set(group.outputs) | set(group.temps) == set(made)
    # stored: the first result and the second x * y (exp reads it after the group)
    assert len(group.outputs) == 2 and len(group.temps) == 3
    text = step.listing()
    assert "fused    F0: Mul+Add+Mul+Sub+Mul (5 ops)" in text
    assert text.count("[in F0") == 5
    assert "fusion: 1 group of elementwise instructions, one compiled loop each, replace 5 " \
        "of them; 3 of their results are never stored" in text
    assert "F0(" in program.source


def _chain_step(x, w):
    y = x
    for _ in range(20):
        y = ((y * w + x).tanh() - w) * 0.5
    y.sum().backward()


def test_the_100_op_chain_fuses_and_equals_unfused_and_eager_bit_for_bit():
    rng = np.random.default_rng(0)
    xa, wa = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    grads, programs = [], []
    for mode in ("eager", "unfused", "fused"):
        x, w = (mg.tensor(a, requires_grad=True) for a in (xa, wa))
        run = _chain_step if mode == "eager" else mg.compile(_chain_step, fuse=mode == "fused")
        for _ in range(4):
            x.grad = w.grad = None
            run(x, w)
        grads.append([x.grad.numpy().copy(), w.grad.numpy().copy()])
        programs.append(getattr(run, "program", None))
    _same_bits(grads)
    assert len(programs[2].groups) >= 40 and not programs[1].groups
    assert programs[1].listing().endswith("\nfusion: off (fuse=False)")


def _mlp(fuse):
    mg.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = mg.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(1)
    x = mg.tensor(rng.standard_normal((16, 12)).astype(np.float32))
    y = mg.tensor(rng.standard_normal((16, 3)).astype(np.float32))

    def step():
        opt.zero_grad()
        out = model(x)
        h = (out * 0.5 + out.relu()) / 1.5 - y  # an elementwise run the loss reads
        loss = (h * h).mean() + (h.abs() * 0.01).sum()
        loss.backward()
        opt.step()
        return loss
    return model, step if fuse is None else mg.compile(step, fuse=fuse)


def test_an_mlp_step_fused_equals_unfused_and_eager_bit_for_bit():
    runs = []
    for fuse in (None, False, True):
        model, step = _mlp(fuse)
        losses = [step().numpy().copy() for _ in range(5)]
        runs.append(losses + [p.numpy().copy() for p in model.parameters()]
                    + [p.grad.numpy().copy() for p in model.parameters()])
    _same_bits(runs)
    assert step.program.groups


def test_the_transformer_step_fused_equals_unfused_and_eager_bit_for_bit():
    rng = np.random.default_rng(0)
    src, tgt = (mg.tensor(rng.integers(1, 20, (4, 7))) for _ in range(2))
    runs = []
    for fuse in (None, False, True):
        mg.manual_seed(0)
        model = Transformer(20, 20, d_model=16, nhead=2, num_encoder_layers=1,
                            num_decoder_layers=1, dim_feedforward=32, dropout=0.1,
                            max_len=16, pad_id=0)
        opt = mg.optim.Adam(model.parameters(), lr=1e-3)

        def step():
            opt.zero_grad()
            logits = model(src, tgt[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, 20), tgt[:, 1:].reshape(-1),
                                   ignore_index=0, label_smoothing=0.1)
            loss.backward()
            opt.step()
            return loss
        run = step if fuse is None else mg.compile(step, fuse=fuse)
        losses = [run().numpy().copy() for _ in range(5)]
        runs.append(losses + [p.numpy().copy() for p in model.parameters()])
    _same_bits(runs)
    assert run.replays == 2
    # (its one elementwise run was the cross-entropy's gradient, now a single compiled pass
    # of its own: what is left to fuse is the chains of the tests above)
    assert not run.program.groups


def _peak(step):
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    step()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def test_a_fused_replay_peaks_at_no_more_memory_than_eager():
    x = mg.tensor(np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32))
    w = mg.tensor(np.ones(256, np.float32), requires_grad=True)

    def fn():
        w.grad = None
        y = ((x * w + 1) * 0.5 - x) / 3
        (y * y).sum().backward()
        return y
    compiled = mg.compile(fn)
    for _ in range(3):
        fn(), compiled()
    assert compiled.program.groups
    eager_peak, fused_peak = _peak(fn), _peak(compiled)
    assert fused_peak <= eager_peak, (fused_peak, eager_peak)
    peak, total = compiled.program.memory()
    unfused = mg.compile(fn, fuse=False)
    for _ in range(3):
        unfused()
    assert total < unfused.program.memory()[1] and peak <= unfused.program.memory()[0]


def test_identical_groups_share_one_compiled_kernel():
    x = mg.tensor(np.ones((3, 4), np.float32))
    first = mg.compile(lambda x: (x * 2 + 1) * 3)
    for _ in range(3):
        first(x)
    kernels = len(cpu_kernels._KERNELS)
    second = mg.compile(lambda x: (x * 2 + 1) * 3)
    for _ in range(3):
        second(mg.tensor(np.ones((5, 6), np.float32)))  # (another size, the same loop)
    assert second.program.groups and len(cpu_kernels._KERNELS) == kernels


def test_without_numba_the_replay_is_unfused_and_says_so_once(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "numba", None)
    x = mg.tensor(np.ones((3, 4), np.float32))
    step = mg.compile(lambda x: (x * 2 + 1) * 3)
    for _ in range(4):
        out = step(x)
    assert step.replays == 2 and not step.program.groups
    assert np.array_equal(out.numpy(), np.full((3, 4), 9, np.float32))
    assert step.log.count(cpu_kernels.MISSING) == 1 and cpu_kernels.MISSING in step.listing()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ufunc", sorted(fusion.FUSABLE))
def test_each_fusable_ufunc_in_a_compiled_loop_equals_numpy_bit_for_bit(ufunc, dtype):
    """Over many values (and the special ones), each operand order and a broadcast row."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((400, 250)) * np.exp(rng.uniform(-30, 30, (400, 250))))
    x = x.astype(dtype)
    x.reshape(-1)[:len(_SPECIAL)] = np.array(_SPECIAL, dtype)
    y = x[::-1].copy()
    row = y[7].copy()
    arity = getattr(np, ufunc).nin
    cases = [(x,)] if arity == 1 else [(x, y), (y, x), (x, row), (row, x)]
    for inputs in cases:
        slots = [(a.shape, a.dtype) for a in inputs]
        shape = np.broadcast_shapes(*(a.shape for a in inputs))
        steps = [(ufunc, tuple(("in", j) for j in range(arity)), len(inputs))]
        group = fusion.Group([0], shape, np.dtype(dtype), list(range(arity)), [arity], [],
                             steps, {})
        kernel = cpu_kernels.kernel(cpu_kernels.source(group, slots + [(shape, dtype)]))
        got = np.empty(shape, dtype)
        kernel(*inputs, got)
        with np.errstate(all="ignore"):
            expected = getattr(np, ufunc)(*inputs)
        assert np.array_equal(_bits(got), _bits(expected)), (ufunc, [a.shape for a in inputs])
