"""nn.Module corners where minigrad once differed from torch: ``nn.Buffer`` and
``nn.Unflatten``, ``Module.to`` with a dtype that is not floating, ``load_state_dict``'s
messages (PyTorch's phrases), a number saved as (1,) loaded into a 0-d parameter, and a
deep copy of a Parameter (without its ``.grad``).

Every program is written once against ``M`` (minigrad on the tested device, or torch)
and the two results are compared at run time.
"""
import copy

import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import On, needs_torch, raises_as_torch, torch


def _with_buffers(M):
    class Model(M.nn.Module):
        def __init__(self):
            super().__init__()
            self.kept = M.nn.Buffer(M.arange(2.0))
            self.scratch = M.nn.Buffer(M.zeros(2), persistent=False)
            self.linear = M.nn.Linear(2, 1)
    return Model()


@needs_torch
def test_buffer_registers_on_assignment_as_torch(device):
    for M in (torch, On(mg, device)):
        model = _with_buffers(M)
        assert list(model.state_dict()) == ["kept", "linear.weight", "linear.bias"]
        assert [n for n, _ in model.named_buffers()] == ["kept", "scratch"]
        assert type(model.kept).__name__ == "Tensor" and not model.kept.requires_grad
        assert model.kept.tolist() == [0.0, 1.0]
        model.kept = M.nn.Buffer(M.ones(3), persistent=False)  # (registered again)
        assert "kept" not in model.state_dict() and model.kept.tolist() == [1.0, 1.0, 1.0]


@needs_torch
@pytest.mark.parametrize("dim, sizes, shape", [(1, (3, 1), (2, 3)), (-1, (2, -1), (2, 6)),
                                               (0, [2, 1], (2, 3)), (1, (2, 2), (5, 4, 3))])
def test_unflatten_as_torch(device, dim, sizes, shape):
    for M in (torch, On(mg, device)):
        layer = M.nn.Unflatten(dim, sizes)
        assert repr(layer) == f"Unflatten(dim={dim}, unflattened_size={sizes})"
    ours = mg.nn.Unflatten(dim, sizes)(mg.ones(*shape, device=device))
    theirs = torch.nn.Unflatten(dim, sizes)(torch.ones(*shape))
    assert tuple(ours.shape) == tuple(theirs.shape)


@needs_torch
@pytest.mark.parametrize("call", [lambda M, m: m.to(M.int64), lambda M, m: m.to(dtype=M.bool),
                                  lambda M, m: m.to("cpu", M.int32)],
                         ids=["int64", "bool", "int32"])
def test_module_to_refuses_a_dtype_that_is_not_floating(device, call):
    message = raises_as_torch(lambda M: call(M, M.nn.Linear(2, 2)), TypeError, device)
    assert "floating point" in message
    model = mg.nn.Linear(2, 2, device=device)
    with pytest.raises(TypeError):
        call(mg, model)
    assert model.weight.dtype == mg.float32  # (nothing cast before the refusal)


@needs_torch
def test_load_state_dict_speaks_torchs_phrases(device):
    def program(M):
        M.nn.Linear(2, 3).load_state_dict({"weight": M.zeros(4, 2), "foo": M.zeros(1)})
    message = raises_as_torch(program, RuntimeError, device)
    assert message.startswith("Error(s) in loading state_dict for Linear: ")
    for phrase in ('Missing key(s) in state_dict: "bias".', 'Unexpected key(s) in state_dict: '
                   '"foo".', "size mismatch for weight: copying a param with shape (4, 2) from "
                   "checkpoint, the shape in current model is (3, 2)."):
        assert phrase in message


def test_a_failed_load_leaves_the_module_unchanged(device):
    model = mg.nn.Linear(2, 3, device=device)
    before = model.bias.numpy().copy()
    with pytest.raises(RuntimeError):
        model.load_state_dict({"weight": mg.zeros(4, 2), "bias": mg.ones(3)})
    np.testing.assert_array_equal(model.bias.numpy(), before)


@needs_torch
def test_a_number_saved_as_one_element_loads_into_a_0d_parameter(device):
    def program(M):
        model = M.nn.Module()
        model.scale = M.nn.Parameter(M.tensor(2.0))
        result = model.load_state_dict({"scale": M.tensor([5.0])})
        return repr(result), tuple(model.scale.shape), model.scale.detach().tolist()
    ours = program(On(mg, device))
    assert ours == program(torch) == ("<All keys matched successfully>", (), 5.0)
    raises_as_torch(lambda M: M.nn.Linear(1, 1).load_state_dict(
        {"weight": M.ones(1), "bias": M.ones(1)}), RuntimeError, device)  # (1,) into (1, 1)


@needs_torch
def test_deep_copy_of_a_parameter_leaves_its_grad(device):
    for M in (torch, On(mg, device)):
        layer = M.nn.Linear(2, 2)
        layer(M.ones(1, 2)).sum().backward()
        twin = copy.deepcopy(layer)
        assert twin.weight.grad is None and layer.weight.grad is not None
        assert type(twin.weight) is type(layer.weight) and twin.weight.requires_grad
        assert twin.weight.tolist() == layer.weight.tolist()
        frozen = M.nn.Parameter(M.ones(2), requires_grad=False)
        assert not copy.deepcopy(frozen).requires_grad
        shared = [frozen, frozen]
        a, b = copy.deepcopy(shared)
        assert a is b


# --- the per-module state-dict protocol --------------------------------------------------------

def _with_extra_state(M):
    class Counter(M.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = M.nn.Linear(1, 1)
            self.seen = 5

        def get_extra_state(self):
            return {"seen": self.seen}

        def set_extra_state(self, state):
            self.seen = state["seen"]
    return Counter()


@needs_torch
def test_extra_state_is_saved_and_loaded_as_torch(device):
    for M in (torch, On(mg, device)):
        model = _with_extra_state(M)
        state = model.state_dict()
        assert list(state) == ["_extra_state", "linear.weight", "linear.bias"]
        state["_extra_state"] = {"seen": 9}
        other = _with_extra_state(M)
        assert repr(other.load_state_dict(state)) == "<All keys matched successfully>"
        assert other.seen == 9
        del state["_extra_state"]
        with pytest.raises(RuntimeError, match="_extra_state"):
            _with_extra_state(M).load_state_dict(state)


def _renaming(M):
    class Renaming(M.nn.Module):  # an old checkpoint's key read under its new name
        def __init__(self):
            super().__init__()
            self.w = M.nn.Parameter(M.zeros(2))

        def _load_from_state_dict(self, state_dict, prefix, *args):
            if prefix + "old_w" in state_dict:
                state_dict[prefix + "w"] = state_dict.pop(prefix + "old_w")
            self.version = state_dict.pop(prefix + "version", None)  # (its own key: read
            super()._load_from_state_dict(state_dict, prefix, *args)  # here, or unexpected)

        def _save_to_state_dict(self, destination, prefix, keep_vars):
            super()._save_to_state_dict(destination, prefix, keep_vars)
            destination[prefix + "version"] = M.tensor(2)
    return M.nn.Sequential(Renaming())


@needs_torch
def test_a_module_may_override_how_it_saves_and_loads_as_torch(device):
    for M in (torch, On(mg, device)):
        model = _renaming(M)
        assert list(model.state_dict()) == ["0.w", "0.version"]
        result = model.load_state_dict({"0.old_w": M.ones(2), "0.version": M.tensor(2)})
        assert repr(result) == "<All keys matched successfully>"
        assert model[0].w.tolist() == [1.0, 1.0] and model[0].version.item() == 2
        plain = M.nn.Sequential(M.nn.Linear(1, 1))
        with pytest.raises(RuntimeError, match="Unexpected key"):
            plain.load_state_dict(dict(plain.state_dict(), **{"0.version": M.tensor(2)}))


@needs_torch
def test_unexpected_keys_come_module_by_module_as_torch(device):
    def program(M):
        model = M.nn.Sequential(M.nn.Linear(2, 3))
        state = dict(model.state_dict(), **{"0.zz": M.zeros(1), "foo": M.zeros(3)})
        return tuple(model.load_state_dict(state, strict=False))
    assert program(On(mg, device)) == program(torch) == ([], ["foo", "0.zz"])
    for M in (torch, On(mg, device)):
        assert repr(M.nn.Linear(1, 1).load_state_dict({"weight": M.ones(1, 1)}, strict=False)
                    ).startswith("_IncompatibleKeys(missing_keys=['bias']")


@needs_torch
def test_state_dict_prefix_as_torch(device):
    for M in (torch, On(mg, device)):
        model = M.nn.Sequential(M.nn.Linear(1, 1))
        assert list(model.state_dict(prefix="model.")) == ["model.0.weight", "model.0.bias"]
