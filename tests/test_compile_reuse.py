"""mg.compile's buffer reuse: an elementwise instruction replays as the ufunc its op's forward
computes, written into an input that dies there. Each ufunc equals the forward it stands for
bit for bit, a replay with reuse equals eager mode and a replay without it bit for bit, and
no array that anything else can see (an input, a parameter, a returned tensor, a ``.grad``,
the base of a live view) is ever written into."""
import operator
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.autograd.function import Primitive
from minigrad.compile import CompileWarning
from minigrad.compile.program import ForwardCtx
from minigrad.compile.reuse import ARRAY_UFUNCS, IN_PLACE_UFUNCS, UFUNCS

_SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-30, 1e30, np.inf, -np.inf, np.nan, 88.0]


def _operands(dtype, seed, shape=(4, 12)):
    """Random values with the special ones (zeros, infinities, NaN, huge and tiny) mixed in."""
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(shape) * 3).astype(dtype)
    a.reshape(-1)[:len(_SPECIAL)] = np.array(_SPECIAL, dtype=dtype)
    return a


def _bits(a):
    a = np.asarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _forward(cls, *inputs):
    needs = tuple(isinstance(i, np.ndarray) for i in inputs)
    return cls.forward(ForwardCtx(np, needs, {}, cls.__name__, cls), *inputs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls", list(UFUNCS), ids=lambda c: c.__name__)
def test_each_ufunc_written_in_place_equals_its_ops_forward_bit_for_bit(cls, dtype):
    name, constants = UFUNCS[cls]
    arity = getattr(np, name).nin - len(constants)
    x, y = _operands(dtype, 0), _operands(dtype, 1)[::-1].copy()
    cases = [(x,)] if arity == 1 else [(x, y), (x, 0.5), (2, y), (x, y[:1])]  # (broadcast)
    with np.errstate(all="ignore"):
        for inputs in cases:
            expected = _forward(cls, *inputs)
            j = next(i for i, a in enumerate(inputs)
                     if isinstance(a, np.ndarray) and a.shape == expected.shape)
            into = inputs[j].copy()
            args = list(inputs)
            args[j] = into
            got = getattr(np, name)(*args, *constants, out=into)
            assert got is into and got.dtype == expected.dtype
            assert np.array_equal(_bits(got), _bits(expected)), (cls.__name__, inputs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("fn", list(ARRAY_UFUNCS), ids=lambda f: f.__name__)
def test_each_array_function_equals_its_ufunc_written_in_place_bit_for_bit(fn, dtype):
    """The engine's gradient sums and the backward rules' array work (``grad * y``,
    ``-grad``), replayed as one ufunc written into the first operand's array."""
    name, constants = ARRAY_UFUNCS[fn]
    ufunc = getattr(np, name)
    x, y = _operands(dtype, 0), _operands(dtype, 1)
    scalar = np.asarray(dtype(-2.5))
    cases = [(x,)] if ufunc.nin == 1 else [(x, y), (x, 0.5), (x, y[:1]), (scalar, scalar)]
    with np.errstate(all="ignore"):
        for inputs in cases:
            expected = fn(*inputs)
            assert type(expected) is np.ndarray and expected.dtype == dtype  # (even 0-d)
            into = inputs[0].copy()
            if into.shape != expected.shape:
                continue  # (a result that cannot be written into its first operand)
            got = ufunc(into, *inputs[1:], *constants, out=into)
            assert np.array_equal(_bits(got), _bits(expected)), (name, inputs)
    if ufunc.nin == 1:
        assert type(fn(scalar)) is np.ndarray


def test_the_engines_in_place_gradient_sum_equals_its_ufunc_bit_for_bit():
    old, g = _operands(np.float32, 0), _operands(np.float32, 1)
    with np.errstate(all="ignore"):
        (name, _), = IN_PLACE_UFUNCS.values()
        expected = operator.iadd(old.copy(), g)
        into = old.copy()
        assert np.array_equal(_bits(getattr(np, name)(into, g, out=into)), _bits(expected))


def _compare_runs(make, device, n=5):
    """Run the step that ``make(device)`` returns eagerly, compiled, and compiled without
    reuse, from the same start: every result, parameter and gradient must agree bit for
    bit. The compiled step (with reuse)."""
    results, steps = [], []
    for mode in ("eager", "reuse", "new arrays"):
        mg.manual_seed(0)
        step, params = make(device)
        run = step if mode == "eager" else mg.compile(step, reuse=mode == "reuse")
        arrays = []
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            for i in range(n):
                out = run(mg.tensor(np.full((3, 4), 0.5 + i, np.float32), device=device))
                arrays += [o.numpy().copy() for o in (out if isinstance(out, tuple) else (out,))]
        arrays += [p.numpy().copy() for p in params] + [p.grad.numpy().copy() for p in params]
        results.append(arrays)
        steps.append(run)
    for other in results[1:]:
        assert len(other) == len(results[0])
        assert all(np.array_equal(_bits(a), _bits(b)) for a, b in zip(results[0], other))
    assert steps[1].replays == steps[2].replays >= 2  # (the rest captured)
    return steps[1]


def test_a_chain_replays_into_dying_inputs_and_equals_eager_bit_for_bit(device):
    def make(device):
        w = mg.randn(3, 4, requires_grad=True, device=device)
        b = mg.randn(4, requires_grad=True, device=device)

        def step(x):
            w.grad = b.grad = None
            y = ((x * w + b).tanh() - w).exp() / 3.0
            z = -(y.sqrt() + y.relu().log().abs().sin().cos())
            loss = (z * z).sum()
            loss.backward()
            return loss
        return step, [w, b]
    step = _compare_runs(make, device)
    text = step.listing()
    assert "into v" in text and "without reuse" in text
    assert ", into v" in step.program.source and "out=" in step.program.source
    reused = step.program.reused()
    assert len(reused) >= 8
    peak, total = step.program.memory()
    peak_new, total_new = step.program.memory(reuse=False)
    assert total < total_new and peak <= peak_new


def test_a_linear_layers_output_and_input_gradient_are_written_into(device):
    """A linear layer's output (made whole, not a reshaped product) takes the Relu after it,
    and its input gradients from two layers are summed into one of them; replay equals
    eager and the replay without reuse bit for bit."""
    def make(device):
        layers = [mg.nn.Linear(4, n).to(device) for n in (4, 6, 5)]

        def step(x):
            for layer in layers:
                layer.zero_grad()
            h = layers[0](x.reshape(3, 1, 4))
            loss = layers[1](h).relu().sum() + layers[2](h).sum()
            loss.backward()
            return loss
        return step, [p for layer in layers for p in layer.parameters()]
    step = _compare_runs(make, device)
    source = step.program.source
    assert "# Relu, into v" in source and "# copy_add, into v" in source, source


def test_no_reuse_of_what_others_see_returned_tensors_grads_parameters_and_live_views(device):
    def make(device):
        w = mg.randn(3, 4, requires_grad=True, device=device)

        def step(x):
            w.grad = None
            t = x * w               # returned: never written into
            view = (x + w)[0]        # a view alive until the end: its base is not either
            u = (x + w).exp()        # (the same sum again: a new array, dies at exp)
            s = (t.exp() + view * 2).sum() + u.sum()
            s.backward()
            g2 = w.grad * 2         # w.grad is handed out: never written into
            return t, s, g2, (view * 1).detach(), (w * 1).detach()  # (no graph: replayed)
        return step, [w]
    step = _compare_runs(make, device)
    program = step.program
    inputs_and_tensors = {s for s, slot in enumerate(program.slots) if slot[3] is not None}
    grads = {i for ins in program.instructions if ins.kind == "grad" for i in ins.ins}
    for k, s in program.reused().items():
        assert s not in inputs_and_tensors and s not in grads and s not in program.outputs
        views = [v for v, base in program.bases.items() if base == s]
        assert all(program.last_uses().get(v, -1) <= k for v in views)


def test_a_noncontiguous_or_broadcast_operand_gets_a_new_array(device):
    def make(device):
        w = mg.randn(4, 3, requires_grad=True, device=device)

        def step(x):
            w.grad = None
            t = (w * 2).transpose(0, 1)         # a view: not written into
            y = (t + x).tanh() * x[:1]          # broadcasting the last input
            loss = y.sum()
            loss.backward()
            return loss
        return step, [w]
    step = _compare_runs(make, device)
    program = step.program
    for k, s in program.reused().items():
        assert program.slots[s][4] and program.c_contiguous[s]
        out = program.instructions[k].outs[0]
        assert program.slots[s][:2] == program.slots[out][:2]


def test_reuse_false_makes_every_result_a_new_array(device):
    w = mg.randn(3, 4, device=device)  # (a result that needs grad is not replayed)

    def step(x):
        return ((x * w).exp() + 1).tanh().sum()
    run = mg.compile(step, reuse=False)
    for _ in range(3):
        run(mg.ones(3, 4, device=device))
    assert run.replays == 1 and not run.program.reused()
    assert "out=" not in run.program.source and "u_exp(" in run.program.source


class _SavesAView(Primitive):
    """A user's primitive (its backward is replayed whole) that saves a view of its input."""
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.reshape(-1))
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        (flat,) = ctx.saved_tensors
        return grad * flat.reshape(tuple(grad.shape))


def test_an_array_a_whole_backward_saved_a_view_of_is_not_written_into(device):
    def make(device):
        w = mg.randn(3, 4, requires_grad=True, device=device)

        def step(x):
            w.grad = None
            h = w * x                # viewed by what _SavesAView saves for its backward
            y = _SavesAView.apply(h)
            z = h.exp()              # h's last read in the forward
            loss = (y * z).sum()
            loss.backward()
            return loss
        return step, [w]
    step = _compare_runs(make, device)
    assert [i.name for i in step.program.instructions if i.kind == "backward"] == \
        ["_SavesAViewBackward0"]
