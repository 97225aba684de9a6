"""minigrad.func against torch.func: grad, grad_and_value, vjp, jvp, jacrev, jacfwd, hessian,
hvp and functional_call, on plain functions (tuples, dicts, argnums, has_aux), on nn layers
(Linear, LayerNorm, MultiheadAttention, a transformer encoder layer) and on a small
minigrad.models.Transformer (jacfwd == jacrev, the Hessian of its loss)."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import func, nn
import minigrad.nn.functional as F
from minigrad.models import Transformer
from tests.torch_ref import needs_torch, torch

TOL = dict(rtol=1e-9, atol=1e-10)


def pair(shape, seed=0, device="cpu"):
    a = np.random.default_rng(seed).standard_normal(shape)
    return mg.tensor(a, device=device), (torch.tensor(a) if torch is not None else None)


def close(ours, theirs):
    if isinstance(ours, dict):
        assert ours.keys() == theirs.keys()
        for k in ours:
            close(ours[k], theirs[k])
    elif isinstance(ours, (tuple, list)):
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            close(a, b)
    else:
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), **TOL)


def f(x, y):  # works for both libraries
    return ((x * y.sin()).tanh() @ y.T).exp().sum() / (1 + (x * x).sum())


def vec(x, y):
    return (x.sin() * y).sum(0) + x.softmax(-1)[0]


@needs_torch
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
def test_grad_hessian_jacobians_match_torch(device, argnums):
    (x, tx), (y, ty) = pair((2, 3), 0, device), pair((2, 3), 1, device)
    close(func.grad(f, argnums)(x, y), torch.func.grad(f, argnums)(tx, ty))
    close(func.hessian(f, argnums)(x, y), torch.func.hessian(f, argnums)(tx, ty))
    close(func.jacrev(vec, argnums)(x, y), torch.func.jacrev(vec, argnums)(tx, ty))
    close(func.jacfwd(vec, argnums)(x, y), torch.func.jacfwd(vec, argnums)(tx, ty))


@needs_torch
def test_dicts_tuples_and_aux_match_torch(device):
    (x, tx), (y, ty) = pair((3,), 0, device), pair((3,), 1, device)

    def g(p, scale):
        out = {"a": (p["w"] * p["b"].exp()).sum() * scale, "b": p["w"] ** 2}
        return out["a"], out["b"]

    def loss(p, scale):
        a, b = g(p, scale)
        return a + b.sum(), b

    ours, theirs = {"w": x, "b": y}, {"w": tx, "b": ty}
    close(func.grad(loss, has_aux=True)(ours, 2.0), torch.func.grad(loss, has_aux=True)(
        theirs, 2.0))
    close(func.grad_and_value(loss, has_aux=True)(ours, 2.0),
          torch.func.grad_and_value(loss, has_aux=True)(theirs, 2.0))
    close(func.jacrev(g)(ours, 2.0), torch.func.jacrev(g)(theirs, 2.0))
    close(func.jacfwd(g)(ours, 2.0), torch.func.jacfwd(g)(theirs, 2.0))
    out, jv = func.jvp(lambda p: g(p, 2.0), (ours,), ({"w": y, "b": x},))
    tout, tjv = torch.func.jvp(lambda p: g(p, 2.0), (theirs,), ({"w": ty, "b": tx},))
    close((out, jv), (tout, tjv))
    out, fn = func.vjp(lambda p: g(p, 2.0), ours)
    tout, tfn = torch.func.vjp(lambda p: g(p, 2.0), theirs)
    close(fn((out[0] * 0 + 1, x)), tfn((tout[0] * 0 + 1, tx)))


def test_hvp_is_the_hessian_times_the_vector(device):
    x, _ = pair((4,), 0, device)
    v, _ = pair((4,), 1, device)

    def h(x):
        return (x.sin() * x.exp()).sum() * x.cos().sum()
    g, (hv,) = func.hvp(h, (x,), (v,))
    np.testing.assert_allclose(hv.numpy(), func.hessian(h)(x).numpy() @ v.numpy(), **TOL)
    np.testing.assert_allclose(g[0].numpy(), func.grad(h)(x).numpy(), **TOL)


def test_errors_name_the_transform(device):
    x, _ = pair((3,), 0, device)
    with pytest.raises(RuntimeError, match="Expected f\\(\\*args\\) to return a scalar"):
        func.grad(lambda x: x * 2)(x)
    with pytest.raises(RuntimeError, match="only 1 positional inputs"):
        func.grad(lambda x: x.sum(), argnums=1)(x)
    with pytest.raises(RuntimeError, match="same shape"):
        func.jvp(lambda x: x, (x,), (mg.ones(2, device=device, dtype=mg.float64),))
    with pytest.raises(RuntimeError, match="tuple \\(output, aux\\)"):
        func.grad(lambda x: x.sum(), has_aux=True)(x)
    for primals, tangents in (([x], (x,)), ((x,), [x]), (x, x)):  # tuples only, as torch.func
        with pytest.raises(RuntimeError, match="jvp.*Expected (primals|tangents) to be a tuple"):
            func.jvp(lambda x: x, primals, tangents)


# --- nn layers through functional_call ---------------------------------------------------------

def layers(device):
    mg.manual_seed(0)
    return {
        "linear": (nn.Linear(3, 2), (2, 3)),
        "layer_norm": (nn.LayerNorm(3), (2, 3)),
        "attention": (nn.MultiheadAttention(4, 2), (1, 3, 4)),
    }


def _call(module, x):
    out = module(x, x, x)[0] if isinstance(module, nn.MultiheadAttention) else module(x)
    return out


@pytest.mark.parametrize("name", ["linear", "layer_norm", "attention"])
def test_jacfwd_equals_jacrev_on_parameters(device, name):
    module, shape = layers(device)[name]
    module = module.double().to(device)
    params = {k: v.detach() for k, v in module.named_parameters()}
    x, _ = pair(shape, 2, device)

    def out(p):
        return _call_with(module, p, x)
    close(func.jacfwd(out)(params), func.jacrev(out)(params))


def _call_with(module, p, x):
    if isinstance(module, nn.MultiheadAttention):
        return func.functional_call(module, p, (x, x, x))[0]
    return func.functional_call(module, p, (x,))


@needs_torch
@pytest.mark.parametrize("name", ["linear", "layer_norm", "attention"])
def test_layers_match_torch_func(device, name):
    """hessian, jvp and vjp of a loss of the layer's parameters, as torch.func's with the
    same weights (MultiheadAttention: torch packs q, k, v into one in_proj)."""
    module, shape = layers(device)[name]
    module = module.double().to(device)
    torch_module = {"linear": lambda: torch.nn.Linear(3, 2),
                    "layer_norm": lambda: torch.nn.LayerNorm(3),
                    "attention": lambda: torch.nn.MultiheadAttention(4, 2, batch_first=True),
                    }[name]().double()
    sd = {k: v.numpy() for k, v in module.state_dict().items()}
    if name == "attention":
        sd = {"in_proj_weight": np.concatenate([sd[f"{p}_proj.weight"] for p in "qkv"]),
              "in_proj_bias": np.concatenate([sd[f"{p}_proj.bias"] for p in "qkv"]),
              "out_proj.weight": sd["out_proj.weight"], "out_proj.bias": sd["out_proj.bias"]}
    torch_module.load_state_dict({k: torch.tensor(v) for k, v in sd.items()})
    x, tx = pair(shape, 2, device)
    key = "out_proj.weight" if name == "attention" else "weight"
    params = {key: dict(module.named_parameters())[key].detach()}
    tparams = {key: dict(torch_module.named_parameters())[key].detach()}

    def loss(p):
        return (_call_with(module, p, x).tanh() ** 2).sum()

    def tloss(p):
        out = torch.func.functional_call(torch_module, p, (tx, tx, tx) if name == "attention"
                                         else (tx,))
        out = out[0] if name == "attention" else out
        return (out.tanh() ** 2).sum()
    close(func.hessian(loss)(params), torch.func.hessian(tloss)(tparams))
    v = {key: params[key].sin()}
    close(func.jvp(loss, (params,), (v,)),
          torch.func.jvp(tloss, (tparams,), ({key: tparams[key].sin()},)))
    value, fn = func.vjp(loss, params)
    tvalue, tfn = torch.func.vjp(tloss, tparams)
    close((value, fn(value.new_ones(()))), (tvalue, tfn(torch.ones((), dtype=torch.float64))))


@needs_torch
def test_transformer_encoder_layer_matches_torch_func(device):
    from tests.nn.test_transformer import pair as layer_pair
    ours, theirs = layer_pair("enc", True, device, d=4, heads=2, ff=6)
    x, tx = pair((1, 3, 4), 3, device)
    p = {"ffn.linear1.bias": dict(ours.named_parameters())["ffn.linear1.bias"].detach()}
    tp = {"linear1.bias": dict(theirs.named_parameters())["linear1.bias"].detach()}

    def loss(p):
        return (func.functional_call(ours, p, (x,)) ** 2).sum()

    def tloss(p):
        return (torch.func.functional_call(theirs, p, (tx,)) ** 2).sum()
    np.testing.assert_allclose(func.hessian(loss)(p)["ffn.linear1.bias"]["ffn.linear1.bias"]
                               .numpy(), torch.func.hessian(tloss)(tp)["linear1.bias"]
                               ["linear1.bias"].detach().numpy(), **TOL)
    # (torch has no forward mode through its CPU attention kernel: its jacrev is the reference)
    close(func.jacfwd(lambda x: ours(x))(x), torch.func.jacrev(lambda x: theirs(x))(tx))


def test_small_transformer(device):
    """jacfwd == jacrev of the logits, and the Hessian of the loss with respect to one
    parameter is symmetric and equals reverse over reverse."""
    mg.manual_seed(0)
    model = Transformer(6, 5, d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                        dim_feedforward=6, dropout=0.0, max_len=8).double().to(device).eval()
    src = mg.tensor([[3, 4, 5]], device=device)
    tgt = mg.tensor([[1, 3, 4]], device=device)
    target = mg.tensor([3, 4, 2], device=device)
    name = "decoder.layers.0.ffn.linear2.bias"
    p = {name: dict(model.named_parameters())[name].detach()}

    def logits(p):
        return func.functional_call(model, p, (src, tgt))[0, -1]

    def loss(p):
        out = func.functional_call(model, p, (src, tgt))
        return F.cross_entropy(out.reshape(-1, 5), target)
    close(func.jacfwd(logits)(p), func.jacrev(logits)(p))
    h = func.hessian(loss)(p)[name][name].numpy()
    np.testing.assert_allclose(h, h.T, **TOL)
    np.testing.assert_allclose(h, func.jacrev(func.jacrev(loss))(p)[name][name].numpy(), **TOL)


def test_functional_call_restores_the_module_and_checks_keys(device):
    module = nn.Linear(2, 2).to(device)
    before = module.weight
    w = mg.zeros(2, 2, device=device)
    out = func.functional_call(module, {"weight": w}, mg.ones(1, 2, device=device))
    np.testing.assert_array_equal(out.numpy(), module.bias.detach().numpy()[None])
    assert module.weight is before
    with pytest.raises(RuntimeError, match="Unexpected key.*'nope'"):
        func.functional_call(module, {"nope": w}, mg.ones(1, 2, device=device), strict=True)
    with pytest.raises(RuntimeError, match="Missing key.*'bias'"):
        func.functional_call(module, {"weight": w}, mg.ones(1, 2, device=device), strict=True)


@needs_torch
def test_functional_call_takes_other_names_as_attributes_for_the_call_as_torch(device):
    """Not strict: a name that is no parameter or buffer is an attribute of its module
    while the call runs (gone after it); one under a module that does not exist is an
    AttributeError."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            return self.lin(x) * getattr(self, "scale", 1.0)
    model = Scaled().to(device)
    x, scale = mg.randn(1, 3, device=device), mg.tensor(10.0, device=device)
    plain = func.functional_call(model, {}, (x,))
    scaled = func.functional_call(model, {"scale": scale}, (x,))
    np.testing.assert_allclose(scaled.numpy(), 10 * plain.numpy(), rtol=1e-6)
    assert "scale" not in model.__dict__
    for M, call in ((mg, func.functional_call), (torch, torch.func.functional_call)):
        module = (model if M is mg else torch.nn.Linear(3, 2))
        inputs = x if M is mg else torch.randn(1, 3)
        target = "lin.weight" if M is mg else "weight"
        given = {target: (mg.zeros(2, 3, device=device) if M is mg else torch.zeros(2, 3)),
                 "nope.extra": scale if M is mg else torch.tensor(1.0)}
        with pytest.raises(AttributeError, match="nope"):
            call(module, given, (inputs,))
