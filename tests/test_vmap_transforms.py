"""vmap with the other transforms: per-example gradients of nn layers as
torch.func.vmap(torch.func.grad(...)) gives them, grad/jvp/jacrev/jacfwd/hessian inside
and outside vmap, and the Jacobians assembled by vmap equal to row-by-row ones."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import func, nn
from minigrad.func import vmap
from tests.test_func import close, pair
from tests.torch_ref import needs_torch, torch

TOL = dict(rtol=1e-9, atol=1e-10)


def data(*shape, seed=0, device="cpu"):
    return pair(shape, seed, device)


def torch_twin(name, module):
    """torch's module of ``name`` with ``module``'s weights (float64)."""
    sd = {k: v.numpy() for k, v in module.state_dict().items()}
    if name == "linear":
        twin = torch.nn.Linear(3, 2)
    elif name == "layer_norm":
        twin = torch.nn.LayerNorm(3)
    elif name == "attention":
        twin = torch.nn.MultiheadAttention(4, 2, batch_first=True)
        sd = {"in_proj_weight": np.concatenate([sd[f"{p}_proj.weight"] for p in "qkv"]),
              "in_proj_bias": np.concatenate([sd[f"{p}_proj.bias"] for p in "qkv"]),
              "out_proj.weight": sd["out_proj.weight"], "out_proj.bias": sd["out_proj.bias"]}
    else:
        from tests.nn.test_transformer import torch_state
        twin = torch.nn.TransformerEncoderLayer(4, 2, dim_feedforward=6, dropout=0.0,
                                                batch_first=True)
        sd = {k: v.numpy() for k, v in torch_state(module.state_dict()).items()}
    twin = twin.double()
    twin.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})
    return twin


LAYERS = {"linear": (lambda: nn.Linear(3, 2), (3,)),
          "layer_norm": (lambda: nn.LayerNorm(3), (2, 3)),
          "attention": (lambda: nn.MultiheadAttention(4, 2), (3, 4)),
          "encoder_layer": (lambda: nn.TransformerEncoderLayer(4, 2, dim_feedforward=6,
                                                               dropout=0.0), (3, 4))}


@needs_torch
@pytest.mark.parametrize("name", list(LAYERS))
def test_per_example_gradients_match_torch_func(device, name):
    mg.manual_seed(0)
    make, shape = LAYERS[name]
    module = make().double().to(device)
    twin = torch_twin(name, module)
    params = {k: v.detach() for k, v in module.named_parameters()}
    tparams = {k: v.detach() for k, v in twin.named_parameters()}
    x, tx = data(6, *shape, seed=1, device=device)
    y, ty = data(6, seed=2, device=device)

    def run(mod, call, p, xb):
        inputs = (xb[None],) * 3 if name == "attention" else (xb[None],)
        out = call(mod, p, inputs)
        return out[0] if name == "attention" else out

    def loss(p, xb, yb):
        return ((run(module, func.functional_call, p, xb).tanh().sum() - yb) ** 2)

    def tloss(p, xb, yb):
        return ((run(twin, torch.func.functional_call, p, xb).tanh().sum() - yb) ** 2)
    ours = raw = vmap(func.grad(loss), in_dims=(None, 0, 0))(params, x, y)
    theirs = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(tparams, tx, ty)
    if name == "attention":  # (torch packs q, k, v into one in_proj)
        ours = {"in_proj_weight": mg.cat([ours[f"{p}_proj.weight"] for p in "qkv"], 1),
                "in_proj_bias": mg.cat([ours[f"{p}_proj.bias"] for p in "qkv"], 1),
                "out_proj.weight": ours["out_proj.weight"],
                "out_proj.bias": ours["out_proj.bias"]}
    if name == "encoder_layer":  # (one example at a time under torch's names)
        from tests.nn.test_transformer import torch_state
        each = [torch_state({k: v[b] for k, v in ours.items()}) for b in range(6)]
        ours = {k: mg.tensor(torch.stack([sd[k] for sd in each]).numpy()) for k in each[0]}
    close(ours, theirs)
    # each per-example gradient is that example's gradient alone
    one = func.grad(loss)(params, x[3], y[3])
    for k in one:
        np.testing.assert_allclose(raw[k][3].numpy(), one[k].numpy(), **TOL)


@needs_torch
def test_transforms_inside_and_outside_vmap_match_torch(device):
    x, tx = data(4, 3, device=device)
    v, tv = data(4, 3, seed=1, device=device)

    def f(a):
        return (a.sin() * a.sum()).exp().sum()

    def tf(a):
        return (a.sin() * a.sum()).exp().sum()
    cases = [
        (lambda: vmap(func.grad(f))(x), lambda: torch.func.vmap(torch.func.grad(tf))(tx)),
        (lambda: func.grad(lambda a: vmap(f)(a).sum())(x),
         lambda: torch.func.grad(lambda a: torch.func.vmap(tf)(a).sum())(tx)),
        (lambda: vmap(func.hessian(f))(x), lambda: torch.func.vmap(torch.func.hessian(tf))(tx)),
        (lambda: vmap(func.jacrev(func.grad(f)))(x),
         lambda: torch.func.vmap(torch.func.jacrev(torch.func.grad(tf)))(tx)),
        (lambda: vmap(lambda a, t: func.jvp(f, (a,), (t,)))(x, v),
         lambda: torch.func.vmap(lambda a, t: torch.func.jvp(tf, (a,), (t,)))(tx, tv)),
        (lambda: func.jvp(lambda a: vmap(f)(a), (x,), (v,)),
         lambda: torch.func.jvp(lambda a: torch.func.vmap(tf)(a), (tx,), (tv,))),
        (lambda: vmap(lambda u: func.vjp(f, x[0])[1](u))(v[:, 0]),
         lambda: torch.func.vmap(lambda u: torch.func.vjp(tf, tx[0])[1](u))(tv[:, 0])),
        (lambda: vmap(func.vjp(f, x)[1])(v[:, 0]),  # (a batched backward pass)
         lambda: torch.func.vmap(torch.func.vjp(tf, tx)[1])(tv[:, 0])),
        (lambda: vmap(vmap(func.grad(f)))(x.reshape(2, 2, 3)),
         lambda: torch.func.vmap(torch.func.vmap(torch.func.grad(tf)))(tx.reshape(2, 2, 3))),
        (lambda: func.jacfwd(vmap(lambda a: a.sin() * a))(x),
         lambda: torch.func.jacfwd(torch.func.vmap(lambda a: a.sin() * a))(tx)),
    ]
    for ours, theirs in cases:
        close(ours(), theirs())


def _rows(f, x):
    """The Jacobian row by row: one backward pass per output element (the reference)."""
    out = f(x)
    rows = []
    for k in range(out.numel()):
        u = mg.zeros(out.numel(), dtype=out.dtype, device=out.device)
        u[k] = 1
        rows.append(func.vjp(f, x)[1](u.reshape(out.shape))[0])
    return mg.stack(rows).reshape(tuple(out.shape) + tuple(x.shape))


@pytest.mark.parametrize("chunk_size", [None, 1, 5])
def test_jacobians_by_vmap_equal_row_by_row(device, chunk_size):
    """jacrev: one forward pass and a backward pass of a batch of rows, bit for bit the rows
    of one backward pass each; jacfwd to rounding."""
    mg.manual_seed(0)
    layer = nn.Linear(4, 6).double().to(device)
    x, _ = data(3, 4, device=device)

    def f(a):
        return layer(a).tanh()
    rows = _rows(f, x)
    np.testing.assert_array_equal(func.jacrev(f, chunk_size=chunk_size)(x).numpy(),
                                  rows.numpy())
    np.testing.assert_allclose(func.jacfwd(f)(x).numpy(), rows.numpy(), **TOL)


@needs_torch
def test_jacobians_of_a_function_writing_into_a_tensor_of_its_own_match_torch():
    """vmap refuses to write a batched value into an unbatched tensor; the Jacobians then go
    one basis vector at a time, and agree with torch.func's (which batch only the tangents
    or cotangents)."""
    x, tx = data(3)

    def f(M, a):
        y = M.zeros(5, dtype=a.dtype)
        y[1:4] = a.sin() * a[0]
        return y
    for ours, theirs in ((func.jacrev, torch.func.jacrev), (func.jacfwd, torch.func.jacfwd)):
        close(ours(lambda a: f(mg, a))(x), theirs(lambda a: f(torch, a))(tx))
