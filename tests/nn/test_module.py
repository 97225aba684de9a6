"""nn.Module and the containers: registration by attribute, dotted names and their order
(checked against a torch model built the same way), shared parameters, state_dict and
load_state_dict (strict and not, shape errors, atomic failure), train/eval, zero_grad,
to(dtype), apply, Sequential/ModuleList/ModuleDict, forward hooks and repr."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from tests.torch_ref import On, needs_torch, needs_torch_at_least, torch


def build_net(lib, zeros):
    """The same nested model in nn (``lib=nn``) or torch.nn: own parameters, a ModuleList of
    blocks, a ModuleDict, a Sequential, and buffers persistent and not."""

    class Block(lib.Module):
        def __init__(self):
            super().__init__()
            self.proj = lib.Linear(4, 6)
            self.scale = lib.Parameter(zeros(6))  # registered after a submodule
            self.norm = lib.LayerNorm(6)

        def forward(self, x):
            return self.norm(self.proj(x)) * self.scale

    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.embed = lib.Embedding(10, 4)
            self.blocks = lib.ModuleList([Block(), Block()])
            self.heads = lib.ModuleDict({"b": lib.Linear(6, 2), "a": lib.Linear(6, 3, bias=False)})
            self.gain = lib.Parameter(zeros(1))
            self.seq = lib.Sequential(lib.Linear(6, 6), lib.ReLU())
            self.register_buffer("steps", zeros(1))
            self.register_buffer("cache", zeros(2), persistent=False)

    return Net()


def mg_net(device):
    return build_net(nn, lambda *s: mg.zeros(*s, device=device)).to(device)


def torch_net():
    return build_net(torch.nn, torch.zeros)


# Written out by hand: a module's own parameters come first, then each child's, in the
# order the attributes were assigned (torch's order, checked below).
PARAM_NAMES = [
    "gain",
    "embed.weight",
    "blocks.0.scale", "blocks.0.proj.weight", "blocks.0.proj.bias",
    "blocks.0.norm.weight", "blocks.0.norm.bias",
    "blocks.1.scale", "blocks.1.proj.weight", "blocks.1.proj.bias",
    "blocks.1.norm.weight", "blocks.1.norm.bias",
    "heads.b.weight", "heads.b.bias", "heads.a.weight",
    "seq.0.weight", "seq.0.bias",
]
MODULE_NAMES = ["", "embed", "blocks", "blocks.0", "blocks.0.proj", "blocks.0.norm", "blocks.1",
                "blocks.1.proj", "blocks.1.norm", "heads", "heads.b", "heads.a", "seq", "seq.0",
                "seq.1"]


# --- registration --------------------------------------------------------------------------

def test_attributes_register_parameters_buffers_and_modules(device):
    m = nn.Module()
    m.w = nn.Parameter(mg.ones(2, 3, device=device))
    m.plain = mg.ones(2, device=device)            # a plain Tensor is only an attribute
    m.register_buffer("buf", mg.zeros(3, device=device))
    m.child = nn.Linear(3, 2, device=device)
    assert [n for n, _ in m.named_parameters()] == ["w", "child.weight", "child.bias"]
    assert [n for n, _ in m.named_buffers()] == ["buf"]
    assert [n for n, _ in m.named_children()] == ["child"]
    assert m.w.requires_grad and isinstance(m.w, nn.Parameter)
    assert list(m.state_dict()) == ["w", "buf", "child.weight", "child.bias"]
    # reassigning a Parameter name to None keeps the slot empty; del removes it
    m.w = None
    assert m.w is None and [n for n, _ in m.named_parameters()] == ["child.weight", "child.bias"]
    del m.child
    assert list(m.named_parameters()) == [] and not hasattr(m, "child")


def test_plain_attributes_can_be_deleted():
    m = nn.Module()
    m.count = 1
    del m.count
    assert not hasattr(m, "count")


def test_assigning_a_tensor_to_a_parameter_name_raises_type_error(device):
    m = nn.Linear(2, 2, device=device)
    with pytest.raises(TypeError, match="weight"):
        m.weight = mg.zeros(2, 2, device=device)


def test_assigning_before_init_raises_attribute_error():
    class Broken(nn.Module):
        def __init__(self):
            self.layer = nn.Linear(2, 2)  # before super().__init__()

    with pytest.raises(AttributeError):
        Broken()


def test_parameter_shares_memory_and_requires_grad(device):
    t = mg.zeros(3, device=device)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf
    with mg.no_grad():
        p.fill_(2.0)
    np.testing.assert_array_equal(t.numpy(), [2.0, 2.0, 2.0])
    assert not nn.Parameter(mg.zeros(3, device=device), requires_grad=False).requires_grad


# --- names and order -----------------------------------------------------------------------

def test_named_parameters_dotted_names_and_order(device):
    net = mg_net(device)
    assert [n for n, _ in net.named_parameters()] == PARAM_NAMES
    assert [n for n, _ in net.named_modules()] == MODULE_NAMES
    assert [n for n, _ in net.named_children()] == ["embed", "blocks", "heads", "seq"]
    assert [n for n, _ in net.named_buffers()] == ["steps", "cache"]
    assert len(list(net.parameters())) == len(PARAM_NAMES)
    assert net.get_submodule("blocks.1.proj") is net.blocks[1].proj


@needs_torch
def test_names_and_order_match_torch(device):
    ours, theirs = mg_net(device), torch_net()
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (_, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert p.shape == tuple(q.shape)


def shared_net(lib):
    """Two Linear layers sharing one weight (and the same module registered twice)."""
    net = lib.Module()
    net.a = lib.Linear(3, 3)
    net.b = lib.Linear(3, 3)
    net.b.weight = net.a.weight
    net.again = net.a
    return net


def test_parameters_deduplicate_shared_parameters(device):
    net = shared_net(nn).to(device)
    names = [n for n, _ in net.named_parameters()]
    assert names == ["a.weight", "a.bias", "b.bias"]
    assert len(list(net.parameters())) == 3
    assert len({id(p) for p in net.parameters()}) == 3
    assert [n for n, _ in net.named_modules()] == ["", "a", "b"]
    assert set(net.state_dict()) >= {"a.weight", "a.bias", "b.weight", "b.bias"}


def test_state_dict_names_every_path_of_a_shared_module(device):
    # as torch: a module registered twice is saved under both names, so that a torch
    # checkpoint of the same model loads strictly
    net = shared_net(nn).to(device)
    assert list(net.state_dict()) == ["a.weight", "a.bias", "b.weight", "b.bias",
                                      "again.weight", "again.bias"]


def test_reassigning_a_parameter_keeps_its_place(device):
    # torch replaces the entry in place: the names keep their order
    lin = nn.Linear(2, 3, device=device)
    lin.weight = nn.Parameter(mg.zeros(3, 2, device=device))
    assert [n for n, _ in lin.named_parameters()] == ["weight", "bias"]
    assert list(lin.state_dict()) == ["weight", "bias"]


@needs_torch
def test_shared_parameters_match_torch(device):
    ours, theirs = shared_net(nn).to(device), shared_net(torch.nn)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert list(ours.state_dict()) == list(theirs.state_dict())


# --- state_dict and load_state_dict ---------------------------------------------------------

def test_state_dict_holds_parameters_and_persistent_buffers_detached(device):
    net = mg_net(device)
    sd = net.state_dict()
    assert "cache" not in sd and "steps" in sd
    assert list(sd) == ["gain", "steps", "embed.weight"] + PARAM_NAMES[2:]
    named = dict(net.named_parameters())
    for key, value in sd.items():
        assert isinstance(value, mg.Tensor) and not value.requires_grad
        source = named[key] if key in named else net.steps
        np.testing.assert_array_equal(value.numpy(), source.numpy())
    kept = net.state_dict(keep_vars=True)
    assert kept["embed.weight"] is net.embed.weight


def test_load_state_dict_copies_values_in_place(device):
    src, dst = mg_net(device), mg_net(device)
    with mg.no_grad():
        src.steps.fill_(7.0)
        src.gain.fill_(3.0)
    before = dst.embed.weight
    result = dst.load_state_dict(src.state_dict())
    assert result == ([], []) and result.missing_keys == [] and result.unexpected_keys == []
    assert dst.embed.weight is before  # copied into the same Parameter
    for (k, a), (_, b) in zip(src.state_dict().items(), dst.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=k)
    # the copy is by value: changing the source afterwards leaves the destination alone
    with mg.no_grad():
        src.gain.fill_(-1.0)
    assert dst.gain.item() == 3.0


def test_load_state_dict_non_strict_returns_named_tuple(device):
    net = nn.Sequential(nn.Linear(2, 3), nn.LayerNorm(3)).to(device)
    sd = net.state_dict()
    del sd["1.bias"]
    sd["1.extra"] = mg.zeros(1, device=device)
    result = net.load_state_dict(sd, strict=False)
    assert isinstance(result, tuple) and result._fields == ("missing_keys", "unexpected_keys")
    assert result.missing_keys == ["1.bias"] and result.unexpected_keys == ["1.extra"]
    missing, unexpected = result
    assert (missing, unexpected) == (["1.bias"], ["1.extra"])


@needs_torch
def test_load_state_dict_non_strict_keys_match_torch(device):
    ours, theirs = mg_net(device), torch_net()
    sd_ours, sd_theirs = ours.state_dict(), theirs.state_dict()
    for sd, zeros in ((sd_ours, On(mg, device).zeros), (sd_theirs, torch.zeros)):
        del sd["blocks.1.norm.bias"], sd["steps"]
        sd["blocks.2.scale"] = zeros(6)
        sd["junk"] = zeros(1)
    got, expected = ours.load_state_dict(sd_ours, strict=False), \
        theirs.load_state_dict(sd_theirs, strict=False)
    # the same keys (torch lists them module by module, so the order is not compared)
    assert sorted(got.missing_keys) == sorted(expected.missing_keys)
    assert sorted(got.unexpected_keys) == sorted(expected.unexpected_keys)


@pytest.mark.parametrize("strict", [True, False])
def test_shape_mismatch_names_key_and_both_shapes(device, strict):
    net = nn.Sequential(nn.Linear(3, 2)).to(device)
    sd = net.state_dict()
    sd["0.weight"] = mg.zeros(4, 3, device=device)
    with pytest.raises(RuntimeError) as info:
        net.load_state_dict(sd, strict=strict)
    message = str(info.value)
    assert "0.weight" in message and "4, 3" in message and "2, 3" in message


@pytest.mark.parametrize("strict", [True, False])
def test_strict_mismatches_raise_naming_the_keys(device, strict):
    net = nn.Sequential(nn.Linear(3, 2)).to(device)
    sd = net.state_dict()
    del sd["0.bias"]
    sd["0.other"] = mg.zeros(2, device=device)
    if strict:
        with pytest.raises(RuntimeError, match=r"0\.bias[\s\S]*0\.other"):
            net.load_state_dict(sd)
    else:
        assert net.load_state_dict(sd, strict=False) == (["0.bias"], ["0.other"])


@pytest.mark.parametrize("problem", ["shape", "missing", "unexpected"])
def test_failed_load_leaves_module_unchanged(device, problem):
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2)).to(device)
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    sd = {k: mg.full(v.shape, 5.0, device=device) for k, v in net.state_dict().items()}
    if problem == "shape":
        sd["1.bias"] = mg.zeros(3, device=device)  # the last key: the others came first
    elif problem == "missing":
        del sd["1.bias"]
    else:
        sd["2.weight"] = mg.zeros(1, device=device)
    with pytest.raises(RuntimeError):
        net.load_state_dict(sd)
    for key, value in net.state_dict().items():
        np.testing.assert_array_equal(value.numpy(), before[key], err_msg=key)


@needs_torch
def test_load_state_dict_is_an_in_place_change_as_torch(device):
    """Every parameter and buffer loaded gets one version more, as torch's (which copies
    with ``copy_`` under no_grad); non-persistent buffers are not touched."""
    ours, theirs = mg_net(device), torch_net()

    def versions(net):
        return {k: v._version for k, v in net.state_dict(keep_vars=True).items()}

    ours_before, theirs_before = versions(ours), versions(theirs)
    cache_before = ours.cache._version
    ours.load_state_dict(ours.state_dict())
    theirs.load_state_dict(theirs.state_dict())
    ours_after, theirs_after = versions(ours), versions(theirs)
    assert list(ours_after) == list(theirs_after)
    for key in ours_after:
        assert ours_after[key] - ours_before[key] == theirs_after[key] - theirs_before[key] == 1
    assert ours.cache._version == cache_before


@needs_torch
def test_backward_through_a_graph_saved_before_a_load_raises_as_torch(device):
    ours = nn.Linear(4, 3).to(device)
    theirs = torch.nn.Linear(4, 3)
    x = mg.randn(2, 4, device=device, requires_grad=True)
    tx = torch.randn(2, 4, requires_grad=True)
    loss, tloss = (ours(x) ** 2).sum(), (theirs(tx) ** 2).sum()
    ours.load_state_dict(ours.state_dict())
    theirs.load_state_dict(theirs.state_dict())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tloss.backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    (ours(x) ** 2).sum().backward()  # a graph made after the load is fine
    assert x.grad is not None


def test_failed_load_changes_no_version(device):
    net = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2)).to(device)
    before = [p._version for p in net.parameters()]
    sd = net.state_dict()
    sd["1.weight"] = mg.zeros(2, 3, device=device)
    with pytest.raises(RuntimeError, match=r"1\.weight.*\(2, 3\).*\(2, 2\)"):
        net.load_state_dict(sd)
    assert [p._version for p in net.parameters()] == before


def test_load_state_dict_takes_tensors_on_any_device_and_casts(device):
    """A Tensor value is copied from its own array (moved to the parameter's device, cast to
    its dtype as copy_ does); lists and 0-d values go through NumPy."""
    net = nn.Linear(2, 2).to(device)
    weight = mg.tensor([[1.5, 2.0], [3.0, 4.0]], dtype=mg.float64)          # on the CPU
    net.load_state_dict({"weight": weight, "bias": [0.25, -1.0]})
    assert net.weight.dtype == mg.float32 and net.weight.device == mg.Device(device)
    np.testing.assert_array_equal(net.weight.numpy(), weight.numpy().astype(np.float32))
    np.testing.assert_array_equal(net.bias.numpy(), [0.25, -1.0])
    scalar = nn.Module()
    scalar.t = nn.Parameter(mg.zeros(()))
    scalar.load_state_dict({"t": 2.5})
    assert scalar.t.item() == 2.5


def test_load_state_dict_takes_cupy_arrays(device):
    """A CuPy array is taken as it is (NumPy cannot convert it), and moved to the tensor's
    device, whichever that is."""
    if not mg.cuda_is_available():
        pytest.skip("needs CuPy and a CUDA GPU")
    cp = mg.backend.cupy()
    net = nn.Linear(2, 2).to(device)
    w = cp.arange(4, dtype=cp.float32).reshape(2, 2)
    net.load_state_dict({"weight": w, "bias": cp.ones(2, cp.float64)})
    np.testing.assert_array_equal(net.weight.numpy(), cp.asnumpy(w))
    np.testing.assert_array_equal(net.bias.numpy(), [1.0, 1.0])
    bad = {"weight": cp.zeros((3, 2), cp.float32), "bias": cp.ones(2, cp.float32)}
    with pytest.raises(RuntimeError, match=r"weight.*\(3, 2\)"):
        net.load_state_dict(bad)


def test_load_state_dict_accepts_numpy_arrays(device):
    net = nn.Linear(2, 2).to(device)
    w = np.arange(4, dtype=np.float32).reshape(2, 2)
    net.load_state_dict({"weight": w, "bias": np.ones(2, np.float32)})
    np.testing.assert_array_equal(net.weight.numpy(), w)
    np.testing.assert_array_equal(net.bias.numpy(), [1.0, 1.0])


@needs_torch
def test_load_torch_state_dict(device):
    theirs = torch_net()
    ours = mg_net(device)
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    for k, v in theirs.state_dict().items():
        np.testing.assert_array_equal(ours.state_dict()[k].numpy(), v.numpy(), err_msg=k)


# --- modes, gradients, casting, apply -------------------------------------------------------

def test_train_and_eval_recurse(device):
    net = mg_net(device)
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    assert net.train() is net and all(m.training for m in net.modules())
    net.blocks.eval()
    assert net.training and not net.blocks[0].norm.training and net.seq.training
    net.train(False)
    assert not any(m.training for m in net.modules())


def test_zero_grad(device):
    net = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1)).to(device)
    net(mg.randn(4, 3, device=device)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    for p in net.parameters():
        assert p.grad is not None and p.grad.shape == p.shape
        np.testing.assert_array_equal(p.grad.numpy(), np.zeros(p.shape))
    net(mg.randn(4, 3, device=device)).sum().backward()
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_to_dtype_keeps_parameter_identity(device):
    net = mg_net(device)
    before = list(net.parameters())
    net.seq(mg.randn(2, 6, device=device)).sum().backward()
    assert net.to(mg.float64) is net
    after = list(net.parameters())
    assert all(a is b for a, b in zip(before, after)) and len(before) == len(after)
    for p in after:
        assert isinstance(p, nn.Parameter) and p.dtype == np.float64
        assert p.requires_grad and p.is_leaf and p.device == net.gain.device
    assert net.steps.dtype == np.float64
    assert net.seq[0].weight.grad.dtype == np.float64
    out = net.seq(mg.randn(2, 6, dtype=mg.float64, device=device))
    assert out.dtype == np.float64
    net.float()
    assert all(p.dtype == np.float32 for p in net.parameters())
    assert all(a is b for a, b in zip(before, net.parameters()))


def test_to_device_keeps_parameter_identity(device):
    net = nn.Linear(2, 2)
    w = net.weight
    net.to(device)
    assert net.weight is w and str(net.weight.device).startswith(device)


def record_apply_order(net, names):
    order = []
    net.apply(lambda m: order.append(names[id(m)]))
    return order


def test_apply_visits_children_first(device):
    net = mg_net(device)
    names = {id(m): n for n, m in net.named_modules()}
    order = record_apply_order(net, names)
    assert order == ["embed", "blocks.0.proj", "blocks.0.norm", "blocks.0", "blocks.1.proj",
                     "blocks.1.norm", "blocks.1", "blocks", "heads.b", "heads.a", "heads",
                     "seq.0", "seq.1", "seq", ""]
    assert net.apply(lambda m: None) is net


@needs_torch
def test_apply_order_matches_torch(device):
    ours, theirs = mg_net(device), torch_net()
    ours_names = {id(m): n for n, m in ours.named_modules()}
    theirs_names = {id(m): n for n, m in theirs.named_modules()}
    assert record_apply_order(ours, ours_names) == record_apply_order(theirs, theirs_names)


def test_apply_can_initialise(device):
    net = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3)).to(device)

    def init(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.5)
            nn.init.zeros_(m.bias)

    net.apply(init)
    for p in net.parameters():
        assert p.requires_grad
    np.testing.assert_array_equal(net[2].weight.numpy(), np.full((3, 3), 0.5))


# --- containers ----------------------------------------------------------------------------

def test_sequential(device):
    a, r, b = nn.Linear(3, 4, device=device), nn.ReLU(), nn.Linear(4, 2, device=device)
    seq = nn.Sequential(a, r, b).to(device)
    assert len(seq) == 3 and list(seq) == [a, r, b]
    assert seq[0] is a and seq[-1] is b and seq[1] is r
    x = mg.randn(5, 3, device=device)
    np.testing.assert_allclose(seq(x).numpy(), b(r(a(x))).numpy(), rtol=1e-6)
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and list(head) == [a, r]
    tail = seq[1:]
    assert [n for n, _ in tail.named_children()] == ["1", "2"]  # slices keep the names
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    c = nn.Linear(2, 2, device=device)
    assert seq.append(c) is seq and len(seq) == 4 and seq[3] is c
    assert "3.weight" in seq.state_dict()


def test_sequential_extend_and_insert(device):
    a, c = nn.Linear(2, 2, device=device), nn.Linear(2, 2, device=device)
    b, d = nn.ReLU(), nn.GELU()
    seq = nn.Sequential(a)
    assert seq.extend([b, c]) is seq
    assert seq.insert(1, d) is seq
    assert list(seq) == [a, d, b, c]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2", "3"]
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias", "3.weight", "3.bias"]


def test_sequential_from_ordered_dict(device):
    from collections import OrderedDict
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.ReLU())])).to(device)
    assert [n for n, _ in seq.named_parameters()] == ["fc.weight", "fc.bias"]
    assert seq[0] is seq.fc and isinstance(seq[1], nn.ReLU)
    assert seq(mg.randn(1, 2, device=device)).shape == (1, 3)


def test_module_list(device):
    layers = [nn.Linear(2, 2, device=device) for _ in range(3)]
    ml = nn.ModuleList(layers[:2])
    assert len(ml) == 2 and list(ml) == layers[:2]
    assert ml[0] is layers[0] and ml[-1] is layers[1]
    ml.append(layers[2])
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    sliced = ml[1:]
    assert isinstance(sliced, nn.ModuleList) and list(sliced) == layers[1:]
    extra = [nn.ReLU(), nn.GELU()]
    assert ml.extend(extra) is ml and len(ml) == 5 and ml[4] is extra[1]
    new = nn.Linear(2, 2, device=device)
    ml.insert(1, new)
    assert list(ml) == [layers[0], new, layers[1], layers[2]] + extra
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3", "4", "5"]
    assert [n for n, _ in ml.named_parameters()] == [
        f"{i}.{w}" for i in range(4) for w in ("weight", "bias")]
    with pytest.raises(IndexError):
        ml[6]
    with pytest.raises(IndexError):
        ml[-7]
    del ml[0]
    assert list(ml) == [new, layers[1], layers[2]] + extra
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2", "3", "4"]


def test_module_list_setitem_keeps_the_position(device):
    a, b, c, d = (nn.Linear(2, 2, device=device) for _ in range(4))
    ml = nn.ModuleList([a, b, c])
    ml[0] = d
    ml[-2] = a
    assert ml[0] is d and ml[1] is a
    assert list(ml) == [d, a, c]  # iteration (and so a forward loop) keeps the list order
    assert [n for n, _ in ml.named_children()] == ["0", "1", "2"]
    assert list(ml.state_dict())[:2] == ["0.weight", "0.bias"]
    del ml[0]
    assert list(ml) == [a, c]


@needs_torch
def test_module_list_names_match_torch(device):
    def build(lib):
        ml = lib.ModuleList([lib.Linear(2, 2), lib.Linear(2, 3)])
        ml.insert(0, lib.Linear(2, 4))
        ml.extend([lib.ReLU(), lib.Linear(2, 5)])
        ml.insert(4, lib.Linear(2, 6))
        del ml[1]
        return ml

    ours, theirs = build(nn).to(device), build(torch.nn)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]


def test_module_dict(device):
    a, b = nn.Linear(2, 2, device=device), nn.Linear(2, 3, device=device)
    md = nn.ModuleDict({"b": b, "a": a})
    assert len(md) == 2 and list(md) == ["b", "a"] and list(md.keys()) == ["b", "a"]
    assert md["a"] is a and "a" in md and "c" not in md
    assert list(md.values()) == [b, a] and list(md.items()) == [("b", b), ("a", a)]
    c = nn.ReLU()
    md["c"] = c
    md.update({"d": nn.Linear(3, 1, device=device)})
    assert list(md) == ["b", "a", "c", "d"]
    assert [n for n, _ in md.named_parameters()] == [
        "b.weight", "b.bias", "a.weight", "a.bias", "d.weight", "d.bias"]
    assert md.pop("b") is b and "b" not in md
    del md["c"]
    assert list(md) == ["a", "d"]


# --- hooks ------------------------------------------------------------------------------------

def test_forward_hooks_see_and_replace(device):
    lin = nn.Linear(2, 2).to(device)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append(("pre", m, len(args))))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append(("post", m, out.shape)))
    x = mg.randn(3, 2, device=device)
    lin(x)
    assert calls == [("pre", lin, 1), ("post", lin, (3, 2))]
    h1.remove()
    h2.remove()
    lin(x)
    assert len(calls) == 2
    h2.remove()  # removing twice is harmless


def test_forward_pre_hook_can_replace_args_and_hook_can_replace_output(device):
    lin = nn.Linear(2, 2).to(device)
    x = mg.randn(3, 2, device=device)
    expected = lin(x * 2).numpy() + 1
    h_pre = lin.register_forward_pre_hook(lambda m, args: args[0] * 2)  # non-tuple return
    h_out = lin.register_forward_hook(lambda m, args, out: out + 1)
    np.testing.assert_allclose(lin(x).numpy(), expected, rtol=1e-6)
    h_pre.remove()
    h_pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))  # tuple return
    np.testing.assert_allclose(lin(x).numpy(), expected, rtol=1e-6)
    h_pre.remove()
    h_out.remove()
    np.testing.assert_allclose(lin(x).numpy(), (x @ lin.weight.T + lin.bias).numpy(), rtol=1e-6)


def test_hooks_run_in_registration_order_and_on_submodules(device):
    seq = nn.Sequential(nn.Linear(2, 2), nn.ReLU()).to(device)
    order = []
    seq[0].register_forward_hook(lambda m, a, o: order.append("linear"))
    seq.register_forward_hook(lambda m, a, o: order.append("seq-1"))
    seq.register_forward_hook(lambda m, a, o: order.append("seq-2"))
    seq.register_forward_pre_hook(lambda m, a: order.append("seq-pre"))
    seq(mg.randn(1, 2, device=device))
    assert order == ["seq-pre", "linear", "seq-1", "seq-2"]


# --- repr ----------------------------------------------------------------------------------

def small_model(lib):
    class Net(lib.Module):
        def __init__(self):
            super().__init__()
            self.embed = lib.Embedding(10, 4, padding_idx=0)
            self.body = lib.Sequential(lib.Linear(4, 8), lib.ReLU(), lib.GELU(approximate="tanh"),
                                       lib.Linear(8, 2, bias=False))
            self.heads = lib.ModuleList([lib.Linear(2, 2)])

    return Net()


REPR = """Net(
  (embed): Embedding(10, 4, padding_idx=0)
  (body): Sequential(
    (0): Linear(in_features=4, out_features=8, bias=True)
    (1): ReLU()
    (2): GELU(approximate='tanh')
    (3): Linear(in_features=8, out_features=2, bias=False)
  )
  (heads): ModuleList(
    (0): Linear(in_features=2, out_features=2, bias=True)
  )
)"""


def test_repr_small_model(device):
    assert repr(small_model(nn).to(device)) == REPR


@needs_torch
def test_repr_matches_torch(device):
    assert repr(small_model(nn).to(device)) == repr(small_model(torch.nn))


@needs_torch
@needs_torch_at_least((2, 13), "LayerNorm's repr shows bias=True")
def test_layer_norm_repr_matches_torch(device):
    for args in [(8,), ((2, 3),), (4, 1e-6, False)]:
        assert repr(nn.LayerNorm(*args).to(device)) == repr(torch.nn.LayerNorm(*args))
