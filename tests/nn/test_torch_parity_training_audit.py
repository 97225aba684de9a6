"""The training loop's machinery against PyTorch: gradient norms and clipping to the last
bit (the order in which PyTorch's CPU kernels add), ``get_total_norm``,
``clip_grads_with_norm_``, ``parameters_to_vector`` and ``vector_to_parameters``,
``load_state_dict(assign=True)``, ``zero_grad(set_to_none=False)`` keeping the gradient
Tensor, ``CyclicLR`` and ``nn.init``'s ``trunc_normal_``, ``eye_`` and ``orthogonal_``."""
import copy
import math
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.optim import lr_scheduler
from tests.torch_ref import needs_torch, raises_as_torch, torch

# sizes whose tails (size % 8 for float32, % 4 for float64) take every length PyTorch's
# 2-norm kernel adds element by element, and a long one
SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 16, 21, 31, 64, 67, 1000, 4099]


def _arrays(sizes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(n) * rng.uniform(1e-2, 1e2)).astype(dtype) for n in sizes]


# PyTorch's order of adding is that of its vectorised CPU kernels, which minigrad follows
# as they run on x86 CPUs with AVX-512; elsewhere the bits may differ, and closeness is
# checked instead
SAME_ORDER = torch is not None and torch.backends.cpu.get_cpu_capability() == "AVX512"


def _same(a, b, device, rtol=None):
    """Equal bits on the CPU (where minigrad adds as PyTorch's CPU does); close elsewhere
    (``rtol``: that of a's dtype, or wider where a holds a narrower dtype's rounding)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if device == "cpu" and SAME_ORDER:
        assert a.tobytes() == b.tobytes(), (a, b)
    else:
        rtol = rtol or (1e-5 if a.dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(a, b, rtol=rtol, equal_nan=True)


def _with_grads(lib, arrays, device=None, skip=()):
    """Parameters of ``lib`` (mg or torch) whose gradients are 1.7 * their values; the
    positions in ``skip`` have none."""
    params = []
    for i, a in enumerate(arrays):
        if lib is mg:
            p = nn.Parameter(mg.tensor(a, device=device))
            g = None if i in skip else mg.tensor(a * a.dtype.type(1.7), device=device)
        else:
            p = torch.nn.Parameter(torch.tensor(a))
            g = None if i in skip else torch.tensor(a * a.dtype.type(1.7))
        p.grad = g
        params.append(p)
    return params


# --- clip_grad_norm_ and the total norm --------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm_type", [2.0, 1, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch_bit_for_bit(device, dtype, norm_type, max_norm):
    for start in range(0, len(SIZES), 4):
        arrays = _arrays(SIZES[start:start + 5], dtype, seed=start)
        ours = _with_grads(mg, arrays, device, skip={1})
        theirs = _with_grads(torch, arrays, skip={1})
        total = nn.utils.clip_grad_norm_(ours, max_norm, norm_type=norm_type)
        expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type=norm_type)
        _same(total.numpy(), expected.numpy(), device)
        for p, q in zip(ours, theirs):
            assert (p.grad is None) == (q.grad is None)
            if p.grad is not None:
                _same(p.grad.numpy(), q.grad.numpy(), device)


@needs_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_2_norm_of_one_tensor_of_every_size_is_torchs(device, dtype):
    for n in list(range(1, 40)) + [255, 256, 257, 5003]:
        for seed in range(3):
            a = _arrays([n], dtype, seed=seed)[0]
            ours = nn.utils.get_total_norm(mg.tensor(a, device=device))
            _same(ours.numpy(), torch.nn.utils.get_total_norm(torch.tensor(a)).numpy(), device)


@needs_torch
def test_the_total_norm_of_float32_and_float64_gradients_is_torchs(device):
    rng = np.random.default_rng(2)
    for _ in range(30):
        dtypes = [(np.float32, np.float64)[k] for k in rng.integers(0, 2, int(rng.integers(2, 9)))]
        arrays = [rng.standard_normal(int(rng.integers(1, 50))).astype(d) for d in dtypes]
        ours = nn.utils.get_total_norm([mg.tensor(a, device=device) for a in arrays])
        theirs = torch.nn.utils.get_total_norm([torch.tensor(a) for a in arrays])
        # the float32 norms are rounded to float32 before the float64 total: added in
        # another order (a GPU's), they differ from PyTorch's CPU ones by float32's rounding
        _same(ours.numpy(), theirs.numpy(), device,
              rtol=1e-6 if np.float32 in dtypes else None)


@needs_torch
def test_a_large_gradient_norm_is_torchs(device):
    a = _arrays([300_001], np.float32, seed=3)[0]
    ours, theirs = _with_grads(mg, [a], device), _with_grads(torch, [a])
    _same(nn.utils.clip_grad_norm_(ours, 1.0).numpy(),
          torch.nn.utils.clip_grad_norm_(theirs, 1.0).numpy(), device)
    _same(ours[0].grad.numpy(), theirs[0].grad.numpy(), device)


@needs_torch
@pytest.mark.parametrize("values", [[np.inf, 1.0, 2.0], [np.nan, 1.0], [3e38, 3e38, 1.0],
                                    [1e-30] * 11, [0.0] * 9])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_norms_of_extreme_values_are_torchs(device, values, dtype):
    a = np.array(values, dtype=dtype)
    ours = nn.utils.get_total_norm(mg.tensor(a, device=device)).numpy()
    theirs = torch.nn.utils.get_total_norm(torch.tensor(a)).numpy()
    assert ours.dtype == theirs.dtype
    if device == "cpu":
        np.testing.assert_array_equal(ours, theirs)
    else:  # infs and nans as PyTorch's; finite norms summed in the GPU's order
        _same(ours, theirs, device)


@needs_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_get_total_norm_then_clip_grads_with_norm_is_clip_grad_norm_(device, norm_type):
    arrays = _arrays([5, 12, 3], np.float32)
    ours, theirs = _with_grads(mg, arrays, device), _with_grads(torch, arrays)
    total = nn.utils.get_total_norm([p.grad for p in ours], norm_type)
    expected = torch.nn.utils.get_total_norm([p.grad for p in theirs], norm_type)
    _same(total.numpy(), expected.numpy(), device)
    assert nn.utils.clip_grads_with_norm_(ours, 0.25, total) is None
    torch.nn.utils.clip_grads_with_norm_(theirs, 0.25, expected)
    for p, q in zip(ours, theirs):
        _same(p.grad.numpy(), q.grad.numpy(), device)
    again = _with_grads(mg, arrays, device)
    nn.utils.clip_grad_norm_(again, 0.25, norm_type)
    for p, q in zip(ours, again):
        assert np.array_equal(p.grad.numpy(), q.grad.numpy())


@needs_torch
def test_get_total_norm_of_nothing_and_of_a_non_finite_norm(device):
    assert nn.utils.get_total_norm([]).numpy() == torch.nn.utils.get_total_norm([]).numpy()
    assert nn.utils.get_total_norm([]).dtype == mg.float32

    def nan_norm(M):
        nn_utils = torch.nn.utils if M is torch else nn.utils
        return nn_utils.get_total_norm([M.tensor([1.0, float("nan")])],
                                       error_if_nonfinite=True)
    raises_as_torch(nan_norm, RuntimeError, device)


@needs_torch
def test_clip_grads_with_norm_wants_a_tensor_norm(device):
    def clip(M):
        p = M.tensor([3.0, 4.0], requires_grad=True)
        p.grad = M.tensor([3.0, 4.0])
        nn_utils = torch.nn.utils if M is torch else nn.utils
        nn_utils.clip_grads_with_norm_([p], 1.0, 5.0)
    raises_as_torch(clip, TypeError, device)


# --- parameters_to_vector, vector_to_parameters ---------------------------------------------

@needs_torch
def test_parameters_to_vector_is_torchs_and_passes_gradients_back(device):
    arrays = _arrays([6, 4, 1], np.float32)
    ours = [nn.Parameter(mg.tensor(a.reshape(-1, 2) if a.size % 2 == 0 else a, device=device))
            for a in arrays]
    theirs = [torch.nn.Parameter(torch.tensor(a.reshape(-1, 2) if a.size % 2 == 0 else a))
              for a in arrays]
    vec = nn.utils.parameters_to_vector(ours)
    expected = torch.nn.utils.parameters_to_vector(theirs)
    assert vec.shape == tuple(expected.shape) and vec.requires_grad == expected.requires_grad
    np.testing.assert_array_equal(vec.numpy(), expected.detach().numpy())
    weights = np.arange(11, dtype=np.float32)
    (vec * mg.tensor(weights, device=device)).sum().backward()
    (expected * torch.tensor(weights)).sum().backward()
    for p, q in zip(ours, theirs):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())


@needs_torch
def test_vector_to_parameters_makes_them_views_of_the_vector(device):
    def run(lib, vec):
        ps = [lib.nn.Parameter(lib.zeros(2, 3)), lib.nn.Parameter(lib.zeros(4))]
        lib.nn.utils.vector_to_parameters(vec, ps)
        before = [p.detach().clone().numpy() for p in ps]
        with lib.no_grad():
            vec[0] = 100.0  # the parameters see it (their data is the vector's memory)
        return before, [p.detach().numpy() for p in ps], [type(p).__name__ for p in ps]

    class Lib:
        def __init__(self, mod, nn_mod):
            self.mod, self.nn = mod, nn_mod

        def __getattr__(self, name):
            return getattr(self.mod, name)
    ours = run(Lib(mg, nn), mg.arange(10.0, device=device))
    theirs = run(Lib(torch, torch.nn), torch.arange(10.0))
    for a, b in zip(ours[0] + ours[1], theirs[0] + theirs[1]):
        np.testing.assert_array_equal(a, b)
    assert ours[2] == theirs[2]


@needs_torch
def test_vector_to_parameters_refuses_what_is_not_a_tensor(device):
    def bad(M):
        nn_utils = torch.nn.utils if M is torch else nn.utils
        nn_utils.vector_to_parameters([1.0, 2.0], [M.zeros(2, requires_grad=True)])
    raises_as_torch(bad, TypeError, device)


# --- Module.load_state_dict(assign=True) -------------------------------------------------------

def _net(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lib.nn.Linear(3, 2)
            self.register_buffer("count", lib.zeros(2))
    return Net()


@needs_torch
def test_load_state_dict_assign_takes_the_tensors_themselves(device):
    def run(lib, nn_mod, M):
        net = _net(type("L", (), {"nn": nn_mod, "zeros": staticmethod(M.zeros)}))
        if M is mg:
            net.to(device)
        net.lin.bias.requires_grad_(False)
        weight = M.ones(2, 3, dtype=M.float64)
        if M is mg:
            weight = weight.to(device)
        state = {"lin.weight": weight, "lin.bias": M.zeros(2), "count": M.ones(2)}
        if M is mg:
            state = {k: v.to(device) for k, v in state.items()}
            weight = state["lin.weight"]
        result = net.load_state_dict(state, assign=True)
        with M.no_grad():
            weight.add_(1)  # the module holds this tensor now
        return (str(result), type(net.lin.weight).__name__, net.lin.weight.requires_grad,
                net.lin.bias.requires_grad, net.lin.weight.is_leaf, str(net.lin.weight.dtype),
                net.lin.weight.detach().numpy().tolist(), net.count is state["count"],
                [name for name, _ in net.named_parameters()])
    ours = run(mg, nn, mg)
    theirs = run(torch, torch.nn, torch)
    assert ours[0].split("(")[-1] == theirs[0].split("(")[-1] == "<All keys matched successfully>"
    assert ours[1:5] == theirs[1:5]
    assert ours[5].split(".")[-1] == theirs[5].split(".")[-1] == "float64"
    assert ours[6:] == theirs[6:]


@needs_torch
def test_load_state_dict_assign_keeps_a_parameters_requires_grad_and_checks_shapes(device):
    lin = nn.Linear(2, 1).to(device)
    frozen = nn.Parameter(mg.ones(1, 2, device=device), requires_grad=False)
    lin.load_state_dict({"weight": frozen, "bias": mg.zeros(1, device=device)}, assign=True)
    assert lin.weight is frozen and lin.weight.requires_grad  # the module's flag, as torch
    ref = torch.nn.Linear(2, 1)
    p = torch.nn.Parameter(torch.ones(1, 2), requires_grad=False)
    ref.load_state_dict({"weight": p, "bias": torch.zeros(1)}, assign=True)
    assert ref.weight is p and ref.weight.requires_grad

    def wrong_shape(M):
        lin = (torch.nn if M is torch else nn).Linear(2, 1)
        lin.load_state_dict({"weight": M.ones(1, 3), "bias": M.zeros(1)}, assign=True)
    message = raises_as_torch(wrong_shape, RuntimeError, device)
    assert "weight" in message
    partial = nn.Linear(2, 1).to(device)
    result = partial.load_state_dict({"weight": mg.ones(1, 2, device=device)}, strict=False,
                                     assign=True)
    assert result.missing_keys == ["bias"] and partial.weight.numpy().tolist() == [[1.0, 1.0]]


# --- zero_grad(set_to_none=False) ------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("through", ["module", "optimizer"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_zero_grad_in_place_keeps_the_gradient_tensor(device, through, create_graph):
    def run(lib, nn_mod, M, x):
        lin = nn_mod.Linear(2, 1)
        if M is mg:
            lin.to(device)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch: backward(create_graph=True) on a leaf
            (lin(x) ** 2).sum().backward(create_graph=create_graph)
        before = lin.weight.grad
        if through == "module":
            lin.zero_grad(set_to_none=False)
        else:
            lib.optim.SGD(lin.parameters(), lr=0.1).zero_grad(set_to_none=False)
        g = lin.weight.grad
        result = (g is before, g.requires_grad, g.grad_fn is None, g.detach().numpy().tolist())
        lin(x).sum().backward()  # accumulates into the same zeroed Tensor
        return result + (lin.weight.grad is before, lin.weight.grad.numpy().tolist())
    ours = run(mg, nn, mg, mg.ones(1, 2, device=device))
    theirs = run(torch, torch.nn, torch, torch.ones(1, 2))
    assert ours == theirs


# --- CyclicLR -----------------------------------------------------------------------------

def _optimizer(lib, kind):
    params = [lib.nn.Parameter(lib.ones(1)) for _ in range(2)]
    groups = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(params)]
    if kind == "SGD":
        return lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    return getattr(lib.optim, kind)(groups)


class _Halving:
    """A scale function with state (saved in the scheduler's state dict)."""

    def __init__(self):
        self.base = 0.5

    def __call__(self, x):
        return self.base ** x


CYCLIC = {
    "triangular": dict(base_lr=0.01, max_lr=0.1, step_size_up=4),
    "triangular2": dict(base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3, step_size_down=5,
                        mode="triangular2"),
    "exp_range": dict(base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=4, mode="exp_range",
                      gamma=0.97),
    "scale_fn": dict(base_lr=0.01, max_lr=0.1, step_size_up=4, scale_fn=lambda x: 1 / (x + 1),
                     scale_mode="iterations"),
    "no_momentum": dict(base_lr=0.01, max_lr=0.1, step_size_up=2, cycle_momentum=False),
}


def _lib(name):
    return mg if name == "mg" else torch


class _Torchlike:
    """``torch`` or ``mg`` with ``nn`` and ``optim`` where the other has them."""

    def __init__(self, mod):
        self.mod = mod
        self.nn = torch.nn if mod is torch else nn
        self.optim = mod.optim

    def __getattr__(self, name):
        return getattr(self.mod, name)


def _cyclic_run(mod, kind, kw, steps=30, reload_at=None):
    lib = _Torchlike(mod)
    opt = _optimizer(lib, kind)
    kw = dict(kw)
    if kw.get("scale_fn") == "object":
        kw["scale_fn"] = _Halving()
    sched = lib.optim.lr_scheduler.CyclicLR(opt, **kw)
    out = [list(sched.get_last_lr())]
    for k in range(steps):
        opt.step()
        sched.step()
        out.append(list(sched.get_last_lr()) + [sched.last_epoch]
                   + [g.get("momentum", g.get("betas")) for g in opt.param_groups])
        if k == reload_at:
            state, opt_state = sched.state_dict(), opt.state_dict()
            opt = _optimizer(lib, kind)
            opt.load_state_dict(opt_state)
            sched = lib.optim.lr_scheduler.CyclicLR(opt, **kw)
            sched.load_state_dict(state)
    return out


@needs_torch
@pytest.mark.parametrize("mode", list(CYCLIC) + ["scale_fn_object"])
@pytest.mark.parametrize("kind", ["SGD", "Adam"])
@pytest.mark.parametrize("reload_at", [None, 9])
def test_cyclic_lr_matches_torch_exactly(mode, kind, reload_at):
    kw = dict(CYCLIC["triangular"], scale_fn="object") if mode == "scale_fn_object" \
        else CYCLIC[mode]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _cyclic_run(mg, kind, kw, reload_at=reload_at) == \
            _cyclic_run(torch, kind, kw, reload_at=reload_at)


@needs_torch
def test_cyclic_lr_state_dict_and_param_groups_are_torchs():
    def parts(mod):
        lib = _Torchlike(mod)
        opt = _optimizer(lib, "SGD")
        sched = lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, scale_fn=_Halving())
        state = sched.state_dict()
        groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
        return sorted(state), state["_scale_fn_custom"], groups
    assert parts(mg) == parts(torch)


@needs_torch
def test_cyclic_lr_resumes_from_last_epoch():
    def run(mod):
        lib = _Torchlike(mod)
        opt = _optimizer(lib, "SGD")
        sched = lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=3)
        for _ in range(5):
            opt.step()
            sched.step()
        resumed = lib.optim.lr_scheduler.CyclicLR(opt, 0.01, 0.1, step_size_up=3, last_epoch=5)
        out = [resumed.get_last_lr()]
        for _ in range(6):
            opt.step()
            resumed.step()
            out.append(resumed.get_last_lr())
        return out
    assert run(mg) == run(torch)


@needs_torch
def test_cyclic_lr_refuses_as_torch():
    def bad_mode(mod):
        lr_mod = torch.optim.lr_scheduler if mod is torch else lr_scheduler
        lr_mod.CyclicLR(_optimizer(_Torchlike(mod), "SGD"), 0.01, 0.1, mode="cosine")

    def wrong_length(mod):
        lr_mod = torch.optim.lr_scheduler if mod is torch else lr_scheduler
        lr_mod.CyclicLR(_optimizer(_Torchlike(mod), "SGD"), [0.01], 0.1)

    def no_momentum(mod):
        lib = _Torchlike(mod)

        class Plain(lib.optim.Optimizer):
            def __init__(self, params):
                super().__init__(params, dict(lr=0.1))
        lib.optim.lr_scheduler.CyclicLR(Plain([lib.nn.Parameter(lib.ones(1))]), 0.01, 0.1)

    def not_an_optimizer(mod):
        lr_mod = torch.optim.lr_scheduler if mod is torch else lr_scheduler
        lr_mod.CyclicLR(object(), 0.01, 0.1)

    for program, kind in [(bad_mode, ValueError), (wrong_length, ValueError),
                          (no_momentum, ValueError), (not_an_optimizer, TypeError)]:
        with pytest.raises(kind):
            program(torch)
        with pytest.raises(kind) as info:
            program(mg)
        assert "\n" not in str(info.value)


def test_cyclic_lr_state_dict_copies_nothing_it_should_not():
    opt = _optimizer(_Torchlike(mg), "SGD")
    sched = lr_scheduler.CyclicLR(opt, 0.01, 0.1)
    state = sched.state_dict()
    assert "optimizer" not in state and "_scale_fn_ref" not in state
    copy.deepcopy(state)  # plain data: no bound methods or optimiser inside
    given = dict(state)
    sched.load_state_dict(given)
    assert given == state  # the caller's dict is left as it was


# --- nn.init -------------------------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("kw", [dict(), dict(std=0.02), dict(mean=0.5, std=1.0, a=-0.5, b=1.0)])
def test_trunc_normal_draws_torchs_distribution_in_place(kw):
    mg.manual_seed(0)
    torch.manual_seed(0)
    p = nn.Parameter(mg.empty(100_000))
    assert nn.init.trunc_normal_(p, **kw) is p
    assert p.requires_grad and p.is_leaf and p.grad_fn is None and p.dtype == mg.float32
    ref = torch.nn.init.trunc_normal_(torch.empty(100_000), **kw).numpy()
    ours = p.numpy()
    a, b = kw.get("a", -2.0), kw.get("b", 2.0)
    assert a <= ours.min() and ours.max() <= b
    scale = kw.get("std", 1.0)
    assert abs(ours.mean() - ref.mean()) < 0.02 * scale
    assert abs(ours.std() - ref.std()) < 0.02 * scale


@needs_torch
def test_eye_orthogonal_and_calculate_gain_as_torch(device):
    w = mg.empty(2, 3, device=device)
    assert nn.init.eye_(w) is w
    np.testing.assert_array_equal(w.numpy(), torch.nn.init.eye_(torch.empty(2, 3)).numpy())
    for shape, gain in [((64, 32), 2.0), ((3, 2, 4), 1.0), ((5, 5), 0.5)]:
        w = nn.init.orthogonal_(mg.empty(*shape, device=device), gain=gain).numpy()
        flat = w.reshape(shape[0], -1)
        small = flat.T @ flat if flat.shape[0] >= flat.shape[1] else flat @ flat.T
        np.testing.assert_allclose(small, gain ** 2 * np.eye(len(small)), atol=1e-5)
    for name in ["conv_transpose1d", "conv_transpose2d", "linear", "tanh", "selu", "relu"]:
        assert nn.init.calculate_gain(name) == torch.nn.init.calculate_gain(name)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == \
        torch.nn.init.calculate_gain("leaky_relu", 0.2)
    for program in [lambda M: M.nn.init.calculate_gain("leaky_relu", "x"),
                    lambda M: M.nn.init.calculate_gain("softmax"),
                    lambda M: M.nn.init.eye_(M.empty(2, 2, 2)),
                    lambda M: M.nn.init.orthogonal_(M.empty(3)),
                    lambda M: M.nn.init.kaiming_uniform_(M.empty(2, 3), mode="fan_avg")]:
        with pytest.raises(ValueError):
            program(torch)
        with pytest.raises(ValueError) as info:
            program(_Torchlike(mg))
        assert "\n" not in str(info.value)


@needs_torch
def test_kaiming_of_an_empty_tensor_warns_and_leaves_it(device):
    for init in ("kaiming_uniform_", "kaiming_normal_"):
        with pytest.warns(UserWarning, match="zero-element"):
            getattr(torch.nn.init, init)(torch.empty(0, 3))
        w = mg.empty(0, 3, device=device)
        with pytest.warns(UserWarning, match="zero-element"):
            assert getattr(nn.init, init)(w) is w
    w = mg.empty(4, 3, device=device)
    nn.init.kaiming_uniform_(w, mode="FAN_OUT")  # the mode's case does not matter, as torch
    assert np.abs(w.numpy()).max() <= math.sqrt(6.0 / (1 + 0.0) / 4)
