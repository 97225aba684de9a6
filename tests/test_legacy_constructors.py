"""PyTorch's legacy constructors (mg.FloatTensor(...), ...), isinstance against them, and
Tensor.type() with no argument, a dtype, a legacy type or its name; each against PyTorch."""
import numpy as np
import pytest

import minigrad as mg
from tests.torch_ref import On, needs_torch, torch

pytestmark = needs_torch

NAMES = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor",
         "CharTensor", "ByteTensor", "BoolTensor"]
DATA = [[1.7, 2.2, 0.0], [-1, 3], [-1.5, 0.25], [[1, 2], [3, 4]], (2, 3), [], [[True, False]],
        np.array([1, 2]), [[0.5], [7.0]], ()]


def _same(ours, ref):
    assert isinstance(ours, mg.Tensor)
    assert tuple(ours.shape) == tuple(ref.shape)
    assert ours.dtype == ref.numpy().dtype
    np.testing.assert_array_equal(ours.numpy(), ref.numpy())


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("data", DATA, ids=repr)
def test_from_data(name, data):
    try:
        ref = getattr(torch, name)(data)
    except RuntimeError:  # (-1.5 into uint8)
        with pytest.raises(RuntimeError, match="cannot be converted"):
            getattr(mg, name)(data)
        return
    _same(getattr(mg, name)(data), ref)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("size", [(), (0,), (3,), (2, 3), (2, 0, 4), (np.int64(2),)], ids=repr)
def test_from_size_is_zeros(name, size):
    """PyTorch leaves the memory uninitialised; minigrad fills it with zeros."""
    ours, ref = getattr(mg, name)(*size), getattr(torch, name)(*size)
    assert tuple(ours.shape) == tuple(ref.shape) and ours.dtype == ref.numpy().dtype
    assert not ours.numpy().any()


@pytest.mark.parametrize("name", ["FloatTensor", "LongTensor", "BoolTensor"])
def test_from_a_tensor_of_its_dtype_shares_memory(name):
    dtype = getattr(mg, name).dtype
    x = mg.tensor([1, 0, 3]).to(dtype)
    y = getattr(mg, name)(x)
    assert y.data_ptr() == x.data_ptr() and y.dtype == x.dtype
    y[0] = 0
    assert x.tolist() == y.tolist()


def test_from_a_tensor_keeps_the_graph():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = mg.FloatTensor(x)
    assert y.requires_grad
    (y * y).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]


@pytest.mark.parametrize("name", NAMES)
def test_isinstance(name):
    cls = getattr(mg, name)
    for dtype in ["float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8",
                  "bool"]:
        ref = torch.zeros(2, dtype=getattr(torch, dtype))
        assert isinstance(mg.zeros(2, dtype=dtype), cls) == isinstance(ref, getattr(torch, name))
    assert isinstance(mg.nn.Parameter(mg.zeros(2)), mg.FloatTensor)
    assert not isinstance(np.zeros(2, np.float32), cls) and not isinstance(cls, mg.Tensor)
    assert cls.dtype == torch.empty((), dtype=getattr(torch, name).dtype).numpy().dtype


def test_isinstance_of_a_device_tensor(device):
    t = mg.zeros(2, device=device)
    assert isinstance(t, mg.FloatTensor) == (device == "cpu")
    assert isinstance(t, mg.Tensor)


def test_repr_and_name():
    assert repr(mg.FloatTensor) == "<class 'minigrad.FloatTensor'>"
    assert mg.LongTensor.__name__ == torch.LongTensor.__name__


BAD = [((2.5,), TypeError), ((True,), TypeError), ((None,), TypeError), ((["a"],), ValueError),
       (([1, "a"],), TypeError), (([[1, 2], [3]],), ValueError), ((2, -1), RuntimeError),
       ((2, 3.0), TypeError), ((2, "a"), TypeError)]


@pytest.mark.parametrize("name", ["FloatTensor", "LongTensor"])
@pytest.mark.parametrize("args, error", BAD, ids=repr)
def test_errors(name, args, error):
    with pytest.raises(error):
        getattr(torch, name)(*args)
    with pytest.raises(error):
        getattr(mg, name)(*args)


@pytest.mark.parametrize("args, error", [((mg.tensor([1, 2]),), TypeError),
                                         (([300],), RuntimeError)])
def test_errors_of_dtype(args, error):
    with pytest.raises(error):
        mg.ByteTensor(*args) if isinstance(args[0], list) else mg.FloatTensor(*args)


@pytest.mark.parametrize("data", [[1, 2], 2])
def test_refuses_a_cuda_device(data):
    with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu"):
        mg.FloatTensor(data, device="cuda")
    assert mg.FloatTensor(data, device="cpu").shape == torch.FloatTensor(data, device="cpu").shape


# --- Tensor.type ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32", "int16",
                                   "int8", "uint8", "bool"])
def test_type_names_the_type_as_torch(device, dtype):
    t = On(mg, device).zeros(2, dtype=getattr(mg, dtype))
    ref = torch.zeros(2, dtype=getattr(torch, dtype)).type()
    assert t.type() == (ref if device == "cpu" else ref.replace("torch.", "torch.cuda.", 1))


CONVERSIONS = [lambda M: M.float64, lambda M: M.LongTensor, lambda M: "torch.IntTensor",
               lambda M: "torch.FloatTensor", lambda M: M.BoolTensor, lambda M: "torch.ByteTensor"]


@pytest.mark.parametrize("to", CONVERSIONS)
def test_type_converts(device, to):
    x = np.array([1.5, -2.0, 0.0], np.float32)
    ours = mg.tensor(x, device=device).type(to(mg), non_blocking=True)
    ref = torch.tensor(x).type(to(torch))
    on_cpu = isinstance(to(mg), (str, type))  # (names and legacy types are the CPU's)
    assert ours.device == mg.Device("cpu" if on_cpu else device)
    _same(ours.cpu(), ref)


@pytest.mark.parametrize("here, there", [("cpu", "device"), ("device", "cpu"),
                                         ("device", "device")])
def test_type_as_takes_the_others_device_and_dtype(device, here, there):
    """``type_as`` is ``self.type(other.type())``: a mask made on the CPU joins the tensor
    it is combined with on the GPU (``subsequent_mask(n).type_as(tgt.data)``)."""
    at = {"cpu": "cpu", "device": device}
    x = mg.tensor([[1, 0], [1, 1]], dtype=mg.uint8, device=at[here])
    other = mg.zeros(3, dtype=mg.int64, device=at[there])
    out = x.type_as(other)
    assert out.device == other.device and out.dtype == mg.int64
    assert out.tolist() == [[1, 0], [1, 1]]
    assert (out & (other[:2] == 0)).device == other.device
    same = x.type_as(mg.zeros(1, dtype=mg.uint8, device=at[here]))
    assert same is x


def test_type_is_itself_when_the_same(device):
    t = mg.zeros(2, device=device)
    assert t.type(mg.float32) is t and t.type(dtype=mg.float32) is t
    if device == "cpu":
        assert t.type("torch.FloatTensor") is t and t.type("minigrad.FloatTensor") is t


def test_type_by_name_moves_to_the_named_device(device):
    t = mg.zeros(2).type(f"minigrad.{'cuda.' if device != 'cpu' else ''}LongTensor")
    assert t.device == mg.Device(device) and t.dtype == mg.int64
    assert mg.zeros(2, device=device).type("torch.DoubleTensor").device == mg.Device("cpu")


def test_type_is_differentiable():
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    y = x.type(mg.float64)
    (y * y).sum().backward()
    assert x.grad.dtype == mg.float32 and x.grad.tolist() == [2.0, 4.0]


@pytest.mark.parametrize("name", ["FloatTensor", "torch.float64", "float", "numpy.LongTensor",
                                  "torch.cuda.x.LongTensor"])
def test_type_refuses_other_names(name):
    with pytest.raises(ValueError, match="invalid type"):
        mg.zeros(2).type(name)
    if not name.startswith(("torch.cuda", "numpy")):
        with pytest.raises(ValueError, match="invalid type"):
            torch.zeros(2).type(name)


# --- mg.Tensor(...) as torch.Tensor(...) --------------------------------------------------------
@pytest.mark.parametrize("args", [(2, 3), (3,), (), (2, 0, 4), ([1, 2],), ([[1.5], [2]],)],
                         ids=repr)
def test_tensor_class_reads_sizes_and_data_as_torch(args):
    ours, ref = mg.Tensor(*args), torch.Tensor(*args)
    assert tuple(ours.shape) == tuple(ref.shape) and ours.dtype == ref.numpy().dtype
    if args and isinstance(args[0], list):
        np.testing.assert_array_equal(ours.numpy(), ref.numpy())
    else:
        assert not ours.numpy().any()


def test_tensor_class_sizes_make_parameters():
    w = mg.nn.Parameter(mg.Tensor(4, 3))
    assert w.shape == (4, 3) and w.requires_grad and w.dtype == mg.float32
    mg.nn.init.uniform_(w, -0.1, 0.1)
    assert w.abs().max().item() <= 0.1


def test_tensor_class_keeps_its_keywords_and_positional_dtype():
    assert mg.Tensor(2, 3, dtype=mg.float64).dtype == mg.float64
    assert mg.Tensor(2, requires_grad=True).requires_grad
    assert mg.Tensor(np.arange(3), mg.float64).dtype == mg.float64
    assert mg.add(2, 3).dtype == mg.int64 and mg.add(2, 3).item() == 5
    with pytest.raises(RuntimeError):
        mg.Tensor(2, -1)


@pytest.mark.parametrize("call", [lambda t: t.to("cpu", non_blocking=True),
                                  lambda t: t.to(mg.float64, non_blocking=True, copy=True),
                                  lambda t: t.cpu(), lambda t: t.pin_memory().to("cpu")])
def test_to_accepts_non_blocking(call):
    t = mg.ones(2)
    assert call(t).tolist() == [1.0, 1.0]
