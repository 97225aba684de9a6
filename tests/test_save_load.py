"""``minigrad.save`` / ``minigrad.load`` as ``torch.save`` / ``torch.load``: every kind of
value round-trips with its type, tensors with their dtype, shape, requires_grad, Parameter
class and sharing (checked against PyTorch's own round trip), optimiser state continues a
run bit for bit, and files that are not checkpoints fail in one line naming the file."""
import collections
import io
import json
import math
import os
import pathlib

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.serialization import CheckpointError
from tests.torch_ref import needs_torch, torch


def round_trip(M, obj, **load_kwargs):
    buffer = io.BytesIO()
    M.save(obj, buffer)
    buffer.seek(0)
    return M.load(buffer, **load_kwargs)


def plain(x):
    """A value as plain Python with its container types, tensors as (kind, shape, dtype,
    requires_grad, values)."""
    if isinstance(x, mg.Tensor) or (torch is not None and isinstance(x, torch.Tensor)):
        kind = "Parameter" if "Parameter" in type(x).__name__ else "Tensor"
        values = x.detach().numpy() if torch is not None and isinstance(x, torch.Tensor) \
            else x.numpy()
        return (kind, tuple(x.shape), str(x.dtype).replace("torch.", ""),
                bool(x.requires_grad), values.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, [(plain(k), plain(v)) for k, v in x.items()])
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [plain(v) for v in x])
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return (type(x).__name__, x)


# one line per kind of value, written against M (minigrad or torch)
VALUES = [
    ("none", lambda M: None),
    ("bools", lambda M: [True, False]),
    ("ints", lambda M: [0, -3, 2 ** 70]),
    ("floats", lambda M: [2.5, -0.0, 1e300, float("inf"), -float("inf"), float("nan")]),
    ("strs", lambda M: ["", "a/b", "ünïcode ✓"]),
    ("tuple", lambda M: (1, (2.0, "x"), ())),
    ("nested", lambda M: {"a": [1, {"b": (None, True)}], "c": {}, 3: "int key",
                          (1, 2): "tuple key", 2.5: "float key", None: "none key"}),
    ("ordered", lambda M: collections.OrderedDict([("z", 1), ("a", 2)])),
    ("tensor", lambda M: M.arange(6.0).reshape(2, 3)),
    ("zero_dim", lambda M: M.tensor(3.5)),
    ("empty", lambda M: M.zeros(0, 3)),
    ("float16", lambda M: M.tensor([1.5, -2.25], dtype=M.float16)),
    ("float64", lambda M: M.tensor([1 / 3, 1e-300], dtype=M.float64)),
    ("int8", lambda M: M.tensor([-128, 127], dtype=M.int8)),
    ("int32", lambda M: M.tensor([[1, 2]], dtype=M.int32)),
    ("int64", lambda M: M.tensor([2 ** 62, -1])),
    ("uint8", lambda M: M.tensor([0, 255], dtype=M.uint8)),
    ("bool", lambda M: M.tensor([True, False])),
    ("transposed", lambda M: M.arange(12.0).reshape(3, 4).T),
    ("strided", lambda M: M.arange(12.0).reshape(3, 4)[:, 1::2]),
    ("expanded", lambda M: M.arange(3.0).expand(4, 3)),
    ("views", lambda M: (lambda x: [x, x[:, None], x[0].expand(2, 3), x[1, ::2]])(
        M.arange(6.0).reshape(2, 3))),
    ("requires_grad", lambda M: M.ones(2, requires_grad=True)),
    ("non_leaf", lambda M: M.ones(2, requires_grad=True) * 3),
    ("parameter", lambda M: M.nn.Parameter(M.ones(2, 2))),
    ("frozen_parameter", lambda M: M.nn.Parameter(M.ones(2), requires_grad=False)),
    ("mixed", lambda M: {"w": [M.ones(2), (M.zeros(1, dtype=M.int64), 4)], "n": 1.5}),
]


@needs_torch
@pytest.mark.parametrize("name, make", VALUES, ids=[v[0] for v in VALUES])
def test_round_trip_matches_torchs(name, make):
    ours, theirs = make(mg), make(torch)
    assert plain(round_trip(mg, ours)) == plain(round_trip(torch, theirs)) == plain(theirs)
    assert plain(ours) == plain(theirs)


def test_dtypes_and_devices_as_values():
    obj = {"dtype": mg.float16, "dtypes": [mg.int64, mg.bool], "device": mg.Device("cpu")}
    back = round_trip(mg, obj)
    assert back == obj and isinstance(back["device"], mg.Device)
    assert back["dtype"] == mg.float16 and mg.zeros(1, dtype=back["dtype"]).dtype == mg.float16


@needs_torch
def test_sharing_matches_torchs():
    def run(M):
        base = M.arange(12.0).reshape(3, 4)
        obj = {"a": base, "again": base, "T": base.T, "row": base[1]}
        back = round_trip(M, obj)
        back["a"][1, 0] = 100.0  # a view of the same memory sees it, as in PyTorch
        return back["a"] is back["again"], back["T"][0, 1].item(), back["row"][0].item()
    assert run(mg) == run(torch) == (True, 100.0, 100.0)


def test_tied_weights_are_written_once():
    model = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5, bias=False))
    model[1].weight = model[0].weight
    buffer = io.BytesIO()
    mg.save(model.state_dict(), buffer)
    raw = buffer.getvalue()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    assert sorted(k for k in header if k != "__metadata__") == ["0.weight"]
    back = mg.load(io.BytesIO(raw))
    assert list(back) == ["0.weight", "1.weight"]
    fresh = nn.Sequential(nn.Embedding(5, 4), nn.Linear(4, 5, bias=False))
    fresh.load_state_dict(back)
    assert mg.equal(fresh[1].weight, model[0].weight)


def test_a_slice_of_a_large_array_is_written_alone():
    big = mg.zeros(1000, 10)
    buffer = io.BytesIO()
    mg.save({"a": big[:2], "b": big[5]}, buffer)
    assert len(buffer.getvalue()) < 4000
    back = mg.load(io.BytesIO(buffer.getvalue()))
    assert back["a"].shape == (2, 10) and back["b"].shape == (10,)


def test_module_state_dict_round_trips_into_a_new_model(tmp_path):
    model = nn.Sequential(nn.Linear(3, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 2))
    mg.save(model.state_dict(), tmp_path / "model.pt")
    back = mg.load(tmp_path / "model.pt")
    assert isinstance(back, collections.OrderedDict) and list(back) == list(model.state_dict())
    fresh = nn.Sequential(nn.Linear(3, 8), nn.LayerNorm(8), nn.ReLU(), nn.Linear(8, 2))
    fresh.load_state_dict(back)
    x = mg.randn(4, 3)
    assert mg.equal(fresh(x), model(x))


def _train(model, opt, x, y, steps):
    for _ in range(steps):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()


def _model():
    mg.manual_seed(1)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))


def test_adam_resumed_from_a_checkpoint_continues_bit_for_bit(tmp_path):
    x, y = mg.randn(32, 4), mg.randn(32, 1)
    straight = _model()
    opt = mg.optim.Adam(straight.parameters(), lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1)
    _train(straight, opt, x, y, 10)
    first = _model()
    opt1 = mg.optim.Adam(first.parameters(), lr=1e-2, betas=(0.8, 0.99), weight_decay=0.1)
    _train(first, opt1, x, y, 4)
    mg.save({"model": first.state_dict(), "optimizer": opt1.state_dict(), "iter_num": 4},
            tmp_path / "ckpt.pt")
    ckpt = mg.load(tmp_path / "ckpt.pt")
    resumed = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    resumed.load_state_dict(ckpt["model"])
    opt2 = mg.optim.Adam(resumed.parameters(), lr=1.0)
    opt2.load_state_dict(ckpt["optimizer"])
    assert opt2.param_groups[0]["betas"] == (0.8, 0.99) and ckpt["iter_num"] == 4
    _train(resumed, opt2, x, y, 10 - ckpt["iter_num"])
    for a, b in zip(straight.parameters(), resumed.parameters()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_a_nanogpt_style_checkpoint(tmp_path):
    from minigrad.models.gpt import GPT
    mg.manual_seed(0)
    config = dict(vocab_size=11, d_model=8, nhead=2, num_layers=1, dim_feedforward=16)
    model = GPT(**config)
    opt = mg.optim.AdamW(model.parameters(), lr=1e-3)
    idx = mg.randint(0, 11, (2, 5))
    loss = model(idx).logsumexp(-1).mean()
    loss.backward()
    opt.step()
    checkpoint = {"model": model.state_dict(), "optimizer": opt.state_dict(),
                  "model_args": config, "iter_num": 1, "best_val_loss": loss.detach(),
                  "config": {"batch_size": 2, "learning_rate": 1e-3, "compile": False,
                             "dtype": "float32", "betas": (0.9, 0.95)}}
    path = str(tmp_path / "ckpt.pt")
    mg.save(checkpoint, path)
    ckpt = mg.load(path, map_location="cpu")
    assert ckpt["model_args"] == config and ckpt["config"] == checkpoint["config"]
    assert ckpt["best_val_loss"].item() == loss.item()
    fresh = GPT(**ckpt["model_args"])
    fresh.load_state_dict(ckpt["model"])
    opt2 = mg.optim.AdamW(fresh.parameters(), lr=1e-3)
    opt2.load_state_dict(ckpt["optimizer"])
    assert mg.equal(fresh(idx), model(idx))


def test_schedulers_and_the_random_state_round_trip(tmp_path):
    model = nn.Linear(2, 2)
    opt = mg.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = mg.optim.lr_scheduler.OneCycleLR(opt, 1.0, total_steps=10)
    model(mg.ones(1, 2)).sum().backward()
    opt.step()
    sched.step()
    mg.save({"opt": opt.state_dict(), "sched": sched.state_dict(),
             "rng": mg.get_rng_state()}, tmp_path / "state.pt")
    want = mg.rand(3)
    back = mg.load(tmp_path / "state.pt")
    assert back["sched"] == sched.state_dict()
    sched.load_state_dict(back["sched"])
    opt.load_state_dict(back["opt"])
    mg.set_rng_state(back["rng"])
    assert mg.equal(mg.rand(3), want)


@pytest.mark.parametrize("map_location", [None, "cpu", mg.Device("cpu"), {"cpu": "cpu"},
                                          lambda tensor, location: None,
                                          lambda tensor, location: tensor],
                         ids=["none", "cpu", "device", "dict", "callable_none",
                              "callable_tensor"])
def test_map_location_kinds(map_location):
    obj = {"w": nn.Parameter(mg.ones(2)), "n": 3}
    back = round_trip(mg, obj, map_location=map_location)
    assert back["w"].device == "cpu" and isinstance(back["w"], nn.Parameter)


@needs_torch
def test_a_cuda_map_location_without_a_gpu_fails_as_torchs():
    if mg.cuda.is_available() or torch.cuda.is_available():
        pytest.skip("a GPU is available here")
    with pytest.raises(RuntimeError) as theirs:
        round_trip(torch, {"w": torch.ones(2)}, map_location="cuda")
    with pytest.raises(type(theirs.value), match="CUDA.*map_location='cpu'"):
        round_trip(mg, {"w": mg.ones(2)}, map_location="cuda")


def test_on_the_tested_device(device):
    obj = {"w": nn.Parameter(mg.arange(4.0, device=device)), "s": mg.tensor(2, device=device)}
    back = round_trip(mg, obj)
    assert back["w"].device == mg.Device(device) and back["s"].device == mg.Device(device)
    assert isinstance(back["w"], nn.Parameter) and back["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    on_cpu = round_trip(mg, obj, map_location="cpu")
    assert on_cpu["w"].device == "cpu" and on_cpu["s"].item() == 2
    moved = round_trip(mg, {"w": mg.ones(2)}, map_location={"cpu": device})
    assert moved["w"].device == mg.Device(device)


def test_paths_and_file_objects(tmp_path):
    obj = {"w": mg.ones(3)}
    for target in (str(tmp_path / "a.pt"), tmp_path / "b.pt"):
        mg.save(obj, target)
        assert mg.load(target)["w"].tolist() == [1.0, 1.0, 1.0]
        assert mg.load(os.fspath(target))["w"].tolist() == [1.0, 1.0, 1.0]
    mg.save({"w": mg.zeros(1)}, tmp_path / "a.pt")  # replaces the file, leaves nothing else
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.pt", "b.pt"]
    assert mg.load(tmp_path / "a.pt")["w"].tolist() == [0.0]
    with open(tmp_path / "c.pt", "wb") as f:
        mg.save(obj, f)
    with open(tmp_path / "c.pt", "rb") as f:
        assert mg.load(f, weights_only=False)["w"].tolist() == [1.0, 1.0, 1.0]


def test_a_plain_safetensors_file_loads_as_its_flat_dict(tmp_path):
    nn.save({"b": mg.ones(2), "a": mg.zeros(1)}, tmp_path / "plain.safetensors")
    back = mg.load(tmp_path / "plain.safetensors")
    assert isinstance(back, collections.OrderedDict) and list(back) == ["b", "a"]


@needs_torch
def test_missing_files_and_folders_fail_as_torchs(tmp_path):
    for call in (lambda M: M.load(tmp_path / "missing.pt"),
                 lambda M: M.save({}, tmp_path / "no" / "such.pt")):
        with pytest.raises(Exception) as theirs:
            call(torch)
        with pytest.raises(type(theirs.value)):
            call(mg)


def _edited(raw, edit):
    """``raw`` with its header's metadata changed by ``edit`` (metadata -> None)."""
    import safetensors.numpy
    metadata = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])["__metadata__"]
    edit(metadata)
    return safetensors.numpy.save(safetensors.numpy.load(raw), metadata=metadata)


def _edit_index(edit):
    """An edit of the metadata that changes the JSON index by ``edit`` (index -> None)."""
    def edit_metadata(metadata):
        index = json.loads(metadata["minigrad.index"])
        edit(index)
        metadata["minigrad.index"] = json.dumps(index)
    return edit_metadata


def _damaged_index(raw):
    """``raw`` with its index's second tensor, a view, moved past the end of its buffer."""
    return _edited(raw, _edit_index(lambda index: index["tensors"][1].update(offset=10 ** 6)))


def _saved(obj):
    buffer = io.BytesIO()
    mg.save(obj, buffer)
    return buffer.getvalue()


def _torch_file():
    buffer = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buffer)
    return buffer.getvalue()


GOOD = _saved({"x": mg.arange(4.0), "xT": mg.arange(4.0).reshape(2, 2).T})
FOREIGN = [
    ("text", lambda: b"hello, world", "not a valid minigrad checkpoint"),
    ("empty", lambda: b"", "not a valid minigrad checkpoint"),
    ("truncated", lambda: GOOD[:len(GOOD) - 7], "not a valid minigrad checkpoint"),
    ("header_only", lambda: GOOD[:20], "not a valid minigrad checkpoint"),
    ("bad_view", lambda: _damaged_index(_saved({"a": (b := mg.arange(4.0)), "b": b[1:]})),
     "damaged minigrad checkpoint index"),
    ("pickle", lambda: b"\x80\x02}q\x00.", "PyTorch"),
    ("index_not_json", lambda: _edited(GOOD, lambda m: m.update({"minigrad.index": "{"})),
     "damaged minigrad checkpoint index"),
    ("index_bad_node", lambda: _edited(GOOD, _edit_index(
        lambda index: index.update(object={"dict": [["x", {"tensor": 7}]]}))),
     "damaged minigrad checkpoint index"),
    ("newer", lambda: _edited(GOOD, _edit_index(lambda index: index.update(version=99))),
     "newer minigrad"),
]


@pytest.mark.parametrize("name, make, message", FOREIGN, ids=[f[0] for f in FOREIGN])
def test_foreign_or_damaged_files_fail_in_one_line_naming_the_file(tmp_path, name, make,
                                                                   message):
    path = tmp_path / f"{name}.pt"
    path.write_bytes(make())
    with pytest.raises(CheckpointError) as e:
        mg.load(path)
    assert isinstance(e.value, RuntimeError) and isinstance(e.value, ValueError)
    assert str(path) in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


@needs_torch
def test_a_pytorch_file_is_refused_without_unpickling(tmp_path):
    path = tmp_path / "torch.pt"
    path.write_bytes(_torch_file())
    with pytest.raises(CheckpointError, match="PyTorch.*never unpickles"):
        mg.load(path)


@pytest.mark.parametrize("obj, where", [({"m": nn.Linear(2, 2)}, "/m"),
                                        ([1, lambda: 0], "/1"),
                                        ({"a": {"b": np.ones(2)}}, "/a/b"),
                                        ({object(): 1}, "top")],
                         ids=["module", "function", "ndarray", "object_key"])
def test_unsupported_values_are_refused_naming_where(obj, where):
    with pytest.raises(TypeError, match=where):
        mg.save(obj, io.BytesIO())


def test_a_header_length_that_starts_as_a_pickle_does_still_loads():
    for n in range(300):  # the header's length, whose first byte is the file's, grows with n
        raw = _saved({"s": "x" * n, "t": mg.ones(1)})
        if raw[:1] == b"\x80":
            assert mg.load(io.BytesIO(raw))["s"] == "x" * n
            return
    pytest.fail("no header length with 0x80 as its first byte was made")


def test_refused_saves_leave_no_file(tmp_path):
    with pytest.raises(TypeError):
        mg.save({"f": print}, tmp_path / "x.pt")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TypeError, match="never unpickles"):
        mg.load(io.BytesIO(GOOD), pickle_module=object())


def test_the_index_is_readable_json():
    header = json.loads(GOOD[8:8 + int.from_bytes(GOOD[:8], "little")])
    index = json.loads(header["__metadata__"]["minigrad.index"])
    assert index["format"] == "minigrad.save" and index["object"]["dict"][0][0] == "x"
    assert pathlib.PurePath("x").name in header
