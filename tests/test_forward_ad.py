"""Forward-mode AD: every primitive's jvp rule, over the gradient tests' own tables, against
finite differences in float64 and against its vjp through the transpose identity
<J v, u> = <v, J^T u>; and the low-level API (dual_level, make_dual, unpack_dual) as
torch.autograd.forward_ad's, custom Functions' jvp, and higher order."""
import inspect

import numpy as np
import pytest

import minigrad as mg
from minigrad import fused, func, ops
from minigrad.autograd import forward_ad as fwAD
from minigrad.autograd.function import Function, Primitive
from minigrad.autograd.grad_mode import PROCESS
from tests import test_ops_attention, test_ops_fused, test_ops_linalg, test_ops_reduce
from tests import test_ops_shape
from tests.test_ops_elementwise import ELEMENTWISE, _fns, _flat, params, sample
from tests.torch_ref import needs_torch, torch

EPS = 1e-6


# --- the check: finite differences and the transpose identity --------------------------------

def as_function(fn, arrays, device):
    """(f, primals): ``fn`` as a function of its floating inputs only, returning its
    floating outputs as a tuple; the other inputs (masks, indices) are held fixed."""
    fn = _fns(fn)[0]
    tensors = [mg.tensor(a, device=device) for a in arrays]
    where = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]

    def f(*floats):
        full = list(tensors)
        for i, x in zip(where, floats):
            full[i] = x
        return tuple(o for o in _flat(fn(*full)) if o.dtype.kind == "f")
    return f, [tensors[i] for i in where]


def assert_jvp_rule(fn, arrays, device, seed=0, rtol=1e-6, atol=1e-7):
    """jvp along random tangents equals the central difference, and <jvp(v), u> equals
    <v, vjp(u)> for random cotangents u (float64 throughout)."""
    arrays = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
    f, primals = as_function(fn, arrays, device)
    rng = np.random.default_rng(seed)
    v = [mg.tensor(rng.standard_normal(x.shape), device=device) for x in primals]
    out, jv = func.jvp(f, tuple(primals), tuple(v))
    with mg.no_grad():
        plus = f(*[x + EPS * d for x, d in zip(primals, v)])
        minus = f(*[x - EPS * d for x, d in zip(primals, v)])
    for i, (t, a, b) in enumerate(zip(jv, plus, minus)):
        assert t.shape == a.shape and t.dtype == a.dtype, f"output {i}"
        fd = (a.numpy() - b.numpy()) / (2 * EPS)
        np.testing.assert_allclose(t.numpy(), fd, rtol=rtol, atol=atol,
                                   err_msg=f"output {i}: jvp against finite differences")
    u = [mg.tensor(rng.standard_normal(o.shape), device=device) for o in out]
    _, vjp_fn = func.vjp(f, *primals)
    vj = vjp_fn(tuple(u))
    lhs = sum(float((t * w).sum()) for t, w in zip(jv, u))
    rhs = sum(float((d * g).sum()) for d, g in zip(v, vj))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10, atol=1e-10,
                               err_msg="<jvp(v), u> != <v, vjp(u)>")


# --- the gradient tests' tables --------------------------------------------------------------

BROADCAST = [[(2, 3)], [(2, 3), (3,)], [(2, 1, 3), (4, 1), ()]]  # shapes for 1, 2, 3 inputs


@pytest.mark.parametrize("fn, domains", params(ELEMENTWISE))
def test_elementwise(device, fn, domains):
    rng = np.random.default_rng(1)
    shapes = BROADCAST[len(domains) - 1]
    assert_jvp_rule(fn, [sample(rng, s, d) for s, d in zip(shapes, domains)], device)


@pytest.mark.parametrize("fn, domain", params(test_ops_reduce.TABLE))
def test_reductions(device, fn, domain):
    assert_jvp_rule(fn, [sample(np.random.default_rng(0), (2, 3, 4), domain)], device)


@pytest.mark.parametrize("shapes, fn", params(test_ops_shape.CASES))
def test_shape_ops(device, shapes, fn):
    assert_jvp_rule(fn, test_ops_shape._inputs(shapes), device)


@pytest.mark.parametrize("shape_a, shape_b, fn", params(test_ops_linalg.CASES[::3]))
def test_matmul(device, shape_a, shape_b, fn):
    assert_jvp_rule(fn, test_ops_linalg._inputs(shape_a, shape_b), device)


# (gelu_backward's cases take mg.grad of detached inputs: reverse mode's test, not ours)
FUSED = [case for case in test_ops_fused.FINITE if not case[0].startswith("gelu_backward")]


@pytest.mark.parametrize("fn, ref, arrays", params(FUSED))
def test_fused(device, fn, ref, arrays):
    assert_jvp_rule(fn, arrays, device, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("T, S, causal, mask_kind", params(test_ops_attention.CASES))
@pytest.mark.parametrize("block", [(3, 4), (64, 64)], ids=["tiled", "one_tile"])
def test_attention(device, T, S, causal, mask_kind, block):
    q, k, v = test_ops_attention.qkv((1, 2, T, 3), S, Dv=2, device=device)
    mask = None if mask_kind is None else test_ops_attention.padding_mask(
        (1, 2), T, S, device=device).numpy()

    def attention(q, k, v):
        m = None if mask is None else mg.tensor(mask, device=q.device)
        return test_ops_attention.fused(q, k, v, m, causal, 0.6, block)
    assert_jvp_rule(attention, [q.numpy(), k.numpy(), v.numpy()], device)


def test_attention_with_dropout_uses_the_forward_masks(device):
    q, k, v = test_ops_attention.qkv((1, 2, 5, 3), 6, Dv=2, device=device)

    def attention(q, k, v):
        mg.manual_seed(2)
        return test_ops_attention.fused(q, k, v, None, 0, 0.6, (2, 4), dropout_p=0.4)
    assert_jvp_rule(attention, [q.numpy(), k.numpy(), v.numpy()], device)


@pytest.mark.parametrize("p", [0.3, 0.7])
def test_dropout(device, p):
    def drop(x):
        mg.manual_seed(3)
        return mg.nn.functional.dropout(x, p)
    assert_jvp_rule(drop, [sample(np.random.default_rng(0), (4, 5))], device)


def _primitives():
    for module in (ops.elementwise, ops.reduce, ops.shape, ops.linalg, ops.inplace,
                   *(getattr(fused, name) for name in ("attention", "cross_entropy", "dropout",
                                                       "gelu", "layer_norm", "linear"))):
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Primitive) and cls is not Primitive and cls.op is cls:
                yield pytest.param(cls, id=name)


@pytest.mark.parametrize("cls", list(_primitives()))
def test_every_primitive_has_a_jvp_rule(cls):
    assert cls.jvp is not Function.jvp, f"{cls.__name__} has no jvp rule"


def test_in_place_ops_through_the_graph(device):
    """SetItem, Overwrite and CopySlices (what in-place ops record) pass tangents on."""
    def write(x, y):
        out = x * 1.0
        out[1:] = y * 2.0             # CopySlices
        out[mg.tensor([0], device=x.device)] = y[:1]  # SetItem
        return out.clone().copy_(out * 3.0)  # Overwrite
    rng = np.random.default_rng(0)
    assert_jvp_rule(write, [sample(rng, (3, 2)), sample(rng, (2, 2))], device)


# --- the low-level API, as torch.autograd.forward_ad ----------------------------------------

def _f(x, lib):
    return (x.sin() * x.exp()).sum(0) / (1 + x * x).sqrt().mean()


@needs_torch
def test_make_dual_and_unpack_dual_match_torch(device):
    rng = np.random.default_rng(0)
    p, t = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    with fwAD.dual_level():
        x = fwAD.make_dual(mg.tensor(p, device=device), mg.tensor(t, device=device))
        y = _f(x, mg)
        primal, tangent = fwAD.unpack_dual(y)
        assert fwAD.unpack_dual(primal).tangent is None
    import torch.autograd.forward_ad as tfw
    with tfw.dual_level():
        ty = _f(tfw.make_dual(torch.tensor(p), torch.tensor(t)), torch)
        tprimal, ttangent = tfw.unpack_dual(ty)
    np.testing.assert_allclose(primal.numpy(), tprimal.numpy(), rtol=1e-12)
    np.testing.assert_allclose(tangent.numpy(), ttangent.numpy(), rtol=1e-12)


def test_tangents_are_dropped_when_the_level_exits(device):
    with fwAD.dual_level():
        x = fwAD.make_dual(mg.ones(2, device=device), mg.ones(2, device=device))
        y = x * 2
        assert fwAD.unpack_dual(y).tangent is not None
    assert fwAD.unpack_dual(y) == (y, None)
    assert fwAD.unpack_dual(x).tangent is None
    assert PROCESS.watchers == () and not PROCESS.watched  # the fast path is back


def test_an_error_inside_the_level_still_closes_it(device):
    with pytest.raises(mg.ShapeError):
        with fwAD.dual_level():
            x = fwAD.make_dual(mg.ones(2, device=device), mg.ones(2, device=device))
            x @ mg.ones(3, 3, device=device)
    assert not fwAD.LEVELS and not PROCESS.watched


def test_what_carries_a_tangent(device):
    """As PyTorch: an op with a dual input has a tangent (zeros for x * 0 and sign); bools,
    indices and detach() have none."""
    with fwAD.dual_level():
        x = fwAD.make_dual(mg.tensor([1.0, -2.0], device=device),
                           mg.tensor([1.0, 1.0], device=device))
        np.testing.assert_array_equal(fwAD.unpack_dual(x * 0).tangent.numpy(), [0.0, 0.0])
        np.testing.assert_array_equal(fwAD.unpack_dual(x.sign()).tangent.numpy(), [0.0, 0.0])
        assert fwAD.unpack_dual(x > 0).tangent is None
        assert fwAD.unpack_dual(x.max(0).indices).tangent is None
        assert fwAD.unpack_dual(x.detach()).tangent is None
        np.testing.assert_array_equal(fwAD.unpack_dual(x + 1.0).tangent.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("call, exc, fragment", params([
    ("no_level", lambda d: fwAD.make_dual(mg.ones(2, device=d), mg.ones(2, device=d)),
     RuntimeError, "no level exists"),
]))
def test_make_dual_needs_a_level(device, call, exc, fragment):
    with pytest.raises(exc, match=fragment):
        call(device)


def test_make_dual_errors(device):
    with fwAD.dual_level():
        with pytest.raises(RuntimeError, match=r"size \[3\].*size \[2\]"):
            fwAD.make_dual(mg.ones(3, device=device), mg.ones(2, device=device))
        x = fwAD.make_dual(mg.ones(2, device=device), mg.ones(2, device=device))
        with pytest.raises(RuntimeError, match="already has a forward gradient"):
            fwAD.make_dual(x, mg.ones(2, device=device))
        with pytest.raises(RuntimeError, match="Nested forward mode AD"):
            with fwAD.dual_level():
                pass


# --- custom Functions ----------------------------------------------------------------------

class Mul(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_forward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, grad):
        raise AssertionError("not called by forward mode")

    @staticmethod
    def jvp(ctx, dx, dy):
        x, y = ctx.saved_tensors
        return dx * y + x * dy


class NoJvp(mg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_custom_function_jvp_gets_zeros_for_inputs_without_tangent(device):
    x, y = mg.tensor([1.0, 2.0], device=device), mg.tensor([3.0, -1.0], device=device)
    with fwAD.dual_level():
        out = Mul.apply(fwAD.make_dual(x, mg.ones(2, device=device)), y)
        np.testing.assert_array_equal(fwAD.unpack_dual(out).tangent.numpy(), [3.0, -1.0])


def test_custom_function_without_jvp_raises_as_torch(device):
    with fwAD.dual_level():
        x = fwAD.make_dual(mg.ones(2, device=device), mg.ones(2, device=device))
        with pytest.raises(NotImplementedError, match="NoJvp: You must implement the jvp"):
            NoJvp.apply(x)
    NoJvp.apply(mg.ones(2, device=device))  # no tangent: no jvp needed


# --- higher order ----------------------------------------------------------------------------

def test_reverse_over_forward(device):
    """mg.grad of a tangent: d/dx <grad f(x), v> = H v, here for f = sum(x^3): 6 x v."""
    x = mg.tensor([0.5, -1.0, 2.0], dtype=mg.float64, device=device, requires_grad=True)
    v = mg.tensor([1.0, 2.0, -1.0], dtype=mg.float64, device=device)
    with fwAD.dual_level():
        y = (fwAD.make_dual(x, v) ** 3).sum()
        (hv,) = mg.grad(fwAD.unpack_dual(y).tangent, x)
    np.testing.assert_allclose(hv.numpy(), 6 * x.numpy() * v.numpy(), rtol=1e-12)


def test_forward_over_forward(device):
    """jvp of a jvp (two nested levels): the second directional derivative v^T H v."""
    x = mg.tensor([0.5, -1.0, 2.0], dtype=mg.float64, device=device)
    v = mg.tensor([1.0, 2.0, -1.0], dtype=mg.float64, device=device)

    def first(x):
        return func.jvp(lambda x: (x.sin() * x).sum(), (x,), (v,))[1]
    _, second = func.jvp(first, (x,), (v,))
    xs, vs = x.numpy(), v.numpy()
    expected = ((2 * np.cos(xs) - xs * np.sin(xs)) * vs * vs).sum()
    np.testing.assert_allclose(second.item(), expected, rtol=1e-12)
