"""nn.save / nn.load: safetensors checkpoints. Round trips keep names, order, dtypes, shapes
and values; a failing write leaves the previous checkpoint and no temporary file; bad files
and bad state dicts give errors that name the path or the key."""
import os

import numpy as np
import pytest

import minigrad as mg

pytest.importorskip("safetensors")
from minigrad import files  # noqa: E402
from minigrad.nn import serialization  # noqa: E402
from minigrad.nn.serialization import load, save  # noqa: E402


def on(x, device):
    return x.device.type == mg.Device(device).type


# --- round trips ----------------------------------------------------------------------------

ROUND_TRIPS = [
    ("float32", lambda d: mg.randn(3, 4, device=d)),
    ("float64", lambda d: mg.randn(2, 5, dtype=mg.float64, device=d)),
    ("float16", lambda d: mg.randn(7, dtype=mg.float16, device=d)),
    ("int64", lambda d: mg.tensor([[1, -2], [2**40, 0]], device=d)),
    ("int32", lambda d: mg.tensor([1, 2, 3], dtype=mg.int32, device=d)),
    ("uint8", lambda d: mg.tensor([0, 255], dtype=mg.uint8, device=d)),
    ("bool", lambda d: mg.tensor([[True, False, True]], device=d)),
    ("0-d float", lambda d: mg.tensor(3.5, device=d)),
    ("0-d int", lambda d: mg.tensor(7, device=d)),
    ("empty", lambda d: mg.zeros(0, device=d)),
    ("empty 2-d", lambda d: mg.zeros(3, 0, dtype=mg.float64, device=d)),
    ("4-d", lambda d: mg.randn(2, 1, 3, 2, device=d)),
    ("transposed view", lambda d: mg.randn(3, 4, device=d).T),
    ("strided slice", lambda d: mg.arange(12, device=d).reshape(3, 4)[:, ::2]),
    ("nan and inf", lambda d: mg.tensor([np.nan, np.inf, -np.inf, -0.0], device=d)),
    ("requires grad", lambda d: mg.randn(2, 2, requires_grad=True, device=d)),
]


@pytest.mark.parametrize("name, make", ROUND_TRIPS, ids=[c[0] for c in ROUND_TRIPS])
def test_round_trip(device, tmp_path, name, make):
    t = make(device)
    path = tmp_path / "ckpt.safetensors"
    save({"w": t}, path)
    out = load(path, device=device)
    assert list(out) == ["w"]
    (w,) = out.values()
    assert isinstance(w, mg.Tensor) and on(w, device)
    assert w.dtype == t.dtype and w.shape == t.shape
    np.testing.assert_array_equal(w.numpy(), t.numpy())
    assert not w.requires_grad


def test_loaded_tensors_own_writable_memory(tmp_path, device):
    save({"w": mg.ones(3, device=device)}, tmp_path / "c")
    w = load(tmp_path / "c", device=device)["w"]
    w.mul_(2.0)  # an optimizer updates loaded parameters in place
    np.testing.assert_array_equal(w.numpy(), [2.0, 2.0, 2.0])


def test_many_keys_keep_their_order(device, tmp_path):
    # safetensors lays tensors out by dtype, then name: the saved order must still come back
    names = [f"layers.{i}.{part}" for i in (10, 2, 1) for part in ("weight", "bias")]
    names += ["z.embed", "a.head", "mask", "step"]
    sd = {}
    for i, name in enumerate(names):
        if name == "mask":
            sd[name] = mg.tensor([True, False], device=device)
        elif name == "step":
            sd[name] = mg.tensor(i, device=device)
        else:
            sd[name] = mg.full((i + 1,), float(i), dtype=mg.float64 if i % 3 else None,
                               device=device)
    save(sd, tmp_path / "c")
    out = load(tmp_path / "c", device=device)
    assert list(out) == names
    for name in names:
        assert out[name].dtype == sd[name].dtype
        np.testing.assert_array_equal(out[name].numpy(), sd[name].numpy())


def test_empty_state_dict(tmp_path):
    save({}, tmp_path / "c")
    assert load(tmp_path / "c") == {}


def test_path_may_be_str_or_pathlike(tmp_path, device):
    save({"w": mg.ones(2, device=device)}, str(tmp_path / "c"))
    assert list(load(str(tmp_path / "c"))) == ["w"]
    assert list(load(tmp_path / "c")) == ["w"]


def test_save_cpu_load_on_device(device, tmp_path):
    save({"w": mg.arange(4)}, tmp_path / "c")
    w = load(tmp_path / "c", device=device)["w"]
    assert on(w, device)
    np.testing.assert_array_equal(w.numpy(), [0, 1, 2, 3])


def test_overwrite_replaces_previous_checkpoint(tmp_path, device):
    path = tmp_path / "c"
    save({"old": mg.ones(2, device=device)}, path)
    save({"new": mg.zeros(3, device=device)}, path)
    assert list(load(path, device=device)) == ["new"]
    assert os.listdir(tmp_path) == ["c"]


def test_file_is_plain_safetensors(tmp_path, device):
    """Readable without minigrad: safetensors.numpy gives the same arrays."""
    from safetensors.numpy import load_file
    sd = {"a.weight": mg.randn(2, 3, device=device), "a.bias": mg.tensor([1, 2], device=device)}
    save(sd, tmp_path / "c")
    arrays = load_file(str(tmp_path / "c"))
    assert sorted(arrays) == ["a.bias", "a.weight"]
    for name, t in sd.items():
        np.testing.assert_array_equal(arrays[name], t.numpy())


def test_foreign_file_loads_in_layout_order(tmp_path, device):
    """A file written by other tools (no key order in its metadata) loads in byte order."""
    from safetensors.numpy import save_file
    save_file({"b": np.ones(2, np.float32), "a": np.zeros(3, np.int64)}, str(tmp_path / "c"))
    out = load(tmp_path / "c", device=device)
    assert sorted(out) == ["a", "b"] and out["a"].dtype == np.int64 and on(out["a"], device)


def test_torch_reads_the_checkpoint(tmp_path, device):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file
    w = mg.randn(4, 3, device=device)
    save({"fc.weight": w}, tmp_path / "c")
    out = load_file(str(tmp_path / "c"))
    assert out["fc.weight"].dtype == torch.float32
    np.testing.assert_array_equal(out["fc.weight"].numpy(), w.numpy())


# --- atomic writes ----------------------------------------------------------------------------

def _partial_then(exc):
    """A stand-in for ``_write_all`` that writes half the payload, then raises ``exc``."""
    def write(fd, payload):
        os.write(fd, bytes(payload[:len(payload) // 2]))
        raise exc
    return write


CRASHES = [
    ("disk full mid-write", OSError(28, "No space left on device")),
    ("interrupt mid-write", KeyboardInterrupt()),
]


@pytest.mark.parametrize("name, exc", CRASHES, ids=[c[0] for c in CRASHES])
def test_failed_write_keeps_previous_checkpoint(tmp_path, monkeypatch, name, exc, device):
    path = tmp_path / "c"
    save({"w": mg.tensor([1.0, 2.0], device=device)}, path)
    before = path.read_bytes()
    monkeypatch.setattr(files, "_write_all", _partial_then(exc))
    with pytest.raises(type(exc)):
        save({"w": mg.randn(1000, device=device)}, path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c"]  # no temporary file left behind
    np.testing.assert_array_equal(load(path, device=device)["w"].numpy(), [1.0, 2.0])


@pytest.mark.parametrize("step", ["fsync", "replace"])
def test_failure_before_rename_keeps_previous_checkpoint(tmp_path, monkeypatch, step, device):
    path = tmp_path / "c"
    save({"w": mg.ones(2, device=device)}, path)
    before = path.read_bytes()

    def boom(*args):
        raise OSError(5, f"simulated {step} failure")
    monkeypatch.setattr(serialization.os, step, boom)
    with pytest.raises(OSError, match="simulated"):
        save({"w": mg.zeros(5, device=device)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c"]


def test_first_failed_write_leaves_nothing(tmp_path, monkeypatch, device):
    monkeypatch.setattr(files, "_write_all", _partial_then(OSError(28, "full")))
    with pytest.raises(OSError):
        save({"w": mg.ones(2, device=device)}, tmp_path / "c")
    assert os.listdir(tmp_path) == []


def test_invalid_state_dict_writes_nothing(tmp_path, device):
    path = tmp_path / "c"
    save({"w": mg.ones(2, device=device)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save({"w": mg.zeros(2, device=device), "step": 3}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["c"]


@pytest.mark.parametrize("where", ["missing folder", "file as folder", "relative"])
def test_missing_directory_names_the_path(tmp_path, monkeypatch, where, device):
    """A FileNotFoundError (as open()) that is also torch.save's RuntimeError, naming the
    path asked for, not the temporary file."""
    (tmp_path / "file").write_bytes(b"x")
    monkeypatch.chdir(tmp_path)
    path = {"missing folder": tmp_path / "no" / "c", "file as folder": tmp_path / "file" / "c",
            "relative": os.path.join("no", "c")}[where]
    with pytest.raises(FileNotFoundError) as info:
        save({"w": mg.ones(2, device=device)}, path)
    assert isinstance(info.value, RuntimeError)
    assert info.value.filename == os.fspath(path) and os.fspath(path) in str(info.value)
    assert ".tmp" not in str(info.value)
    assert sorted(os.listdir(tmp_path)) == ["file"]


def test_missing_directory_is_a_runtime_error_in_torch_too(tmp_path):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.save({"w": torch.ones(2)}, tmp_path / "no" / "c")


def test_saving_onto_a_directory_names_it_and_writes_nothing(tmp_path, device):
    target = tmp_path / "folder"
    target.mkdir()
    with pytest.raises(IsADirectoryError) as info:
        save({"w": mg.ones(2, device=device)}, target)
    assert isinstance(info.value, RuntimeError) and info.value.filename == os.fspath(target)
    assert sorted(os.listdir(tmp_path)) == ["folder"] and os.listdir(target) == []


# --- errors -------------------------------------------------------------------------------

BAD_STATE_DICTS = [  # (name, the state dict made on a device, message)
    ("not a dict", lambda d: [mg.ones(2, device=d)],
     r"expected a dict of name -> Tensor, got list"),
    ("int key", lambda d: {0: mg.ones(2, device=d)}, r"keys must be str, got 0 of type int"),
    ("int value", lambda d: {"step": 3}, r"key 'step' holds a int"),
    ("ndarray value", lambda d: {"w": np.ones(2)}, r"key 'w' holds a ndarray"),
    ("None value", lambda d: {"b": None}, r"key 'b' holds a NoneType"),
    ("nested dict", lambda d: {"opt": {"lr": mg.ones(1, device=d)}},
     r"key 'opt' holds a nested dict"),
]


@pytest.mark.parametrize("name, make, message", BAD_STATE_DICTS,
                         ids=[c[0] for c in BAD_STATE_DICTS])
def test_bad_state_dict_raises_type_error(tmp_path, name, make, message, device):
    with pytest.raises(TypeError, match=message):
        save(make(device), tmp_path / "c")


def test_reserved_key(tmp_path, device):
    with pytest.raises(ValueError, match="__metadata__"):
        save({"__metadata__": mg.ones(1, device=device)}, tmp_path / "c")


def _valid_bytes():
    from safetensors.numpy import save as st_save
    return st_save({"w": np.arange(10, dtype=np.float32), "b": np.ones(3)})


BAD_FILES = [
    ("truncated", lambda: _valid_bytes()[:-5]),
    ("header only", lambda: _valid_bytes()[:20]),
    ("empty file", lambda: b""),
    ("random bytes", lambda: np.random.default_rng(0).bytes(256)),
    ("text", lambda: b"this is not a checkpoint\n" * 4),
    ("pickle", lambda: __import__("pickle").dumps({"w": [1.0, 2.0]})),
]


@pytest.mark.parametrize("name, make", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_file_raises_value_error_naming_path(tmp_path, name, make):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(make())
    with pytest.raises(ValueError, match="not a valid safetensors checkpoint") as info:
        load(path)
    assert str(path) in str(info.value)


def test_unsupported_dtype_is_named(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file
    save_file({"w": torch.ones(2, dtype=torch.bfloat16)}, str(tmp_path / "c"))
    with pytest.raises(ValueError, match="BF16"):
        load(tmp_path / "c")


def test_missing_file_passes_through(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.safetensors")


def test_unknown_device_fails_before_reading(tmp_path):
    with pytest.raises(mg.DeviceError):
        load(tmp_path / "nope", device="tpu")


# --- metadata -------------------------------------------------------------------------------

def test_metadata_round_trip(device, tmp_path):
    meta = {"step": "12", "state": '{"lr": 0.001, "betas": [0.9, 0.98]}', "": "empty key"}
    save({"w": mg.ones(2, device=device)}, tmp_path / "c", metadata=meta)
    tensors, loaded = load(tmp_path / "c", device=device, with_metadata=True)
    assert loaded == meta and list(tensors) == ["w"] and on(tensors["w"], device)
    assert list(load(tmp_path / "c")) == ["w"]  # without the flag: the dict alone


def test_metadata_is_plain_safetensors_metadata(tmp_path, device):
    from safetensors import safe_open
    save({"w": mg.ones(2, device=device)}, tmp_path / "c", metadata={"note": "hello"})
    with safe_open(str(tmp_path / "c"), framework="numpy") as f:
        assert f.metadata()["note"] == "hello"


def test_no_metadata_gives_an_empty_dict(tmp_path, device):
    from safetensors.numpy import save_file
    save({"w": mg.ones(2, device=device)}, tmp_path / "a")
    save_file({"w": np.ones(2)}, str(tmp_path / "b"))
    for name in ("a", "b"):
        assert load(tmp_path / name, device=device, with_metadata=True)[1] == {}


BAD_METADATA = [
    ("not a dict", ["a"], TypeError, "metadata must be a dict of str -> str, got list"),
    ("int value", {"step": 3}, TypeError, r"map str to str .*'step': int"),
    ("int key", {3: "x"}, TypeError, "map str to str"),
    ("reserved key", {"minigrad.key_order": "[]"}, ValueError, "reserved"),
]


@pytest.mark.parametrize("name, meta, exc, message", BAD_METADATA,
                         ids=[c[0] for c in BAD_METADATA])
def test_bad_metadata_writes_nothing(tmp_path, name, meta, exc, message, device):
    with pytest.raises(exc, match=message):
        save({"w": mg.ones(2, device=device)}, tmp_path / "c", metadata=meta)
    assert os.listdir(tmp_path) == []
