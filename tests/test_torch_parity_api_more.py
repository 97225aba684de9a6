"""PyTorch's smaller API pieces, against torch: the global generator that ``manual_seed``
returns (and negative seeds), ``random.fork_rng``, ``logspace``, ``scalar_tensor``,
``asarray``, ``result_type``, ``Size``, memory formats, ``storage_offset``,
``numpy(force=)``, ``random_`` and ``exponential_``, ``StackDataset`` and the length of a
loader's iterator.

Programs are written once against ``M`` (minigrad on the tested device, or torch); random
draws are compared by their range and moments (the generators differ)."""
import numpy as np
import pytest

import minigrad as mg
from tests.test_torch_parity_ops_audit import assert_as_torch
from tests.torch_ref import On, needs_torch, raises_as_torch, torch


@needs_torch
def test_manual_seed_returns_the_global_generator(device):
    for M in (torch, On(mg, device)):
        g = M.manual_seed(0)
        assert isinstance(g, M.Generator) and g is M.default_generator
        assert g.initial_seed() == 0 == M.initial_seed()
        first = M.randn(3, generator=g).tolist()
        M.manual_seed(0)
        assert M.randn(3).tolist() == first  # (the generator is the global one)
        assert M.manual_seed(-1).initial_seed() == 2 ** 64 - 1 == M.initial_seed()
        M.default_generator.manual_seed(7)
        assert M.initial_seed() == 7


@needs_torch
def test_fork_rng_restores_the_global_state(device):
    for M in (torch, On(mg, device)):
        M.manual_seed(3)
        expected = M.rand(4).tolist()
        M.manual_seed(3)
        with M.random.fork_rng():
            M.rand(10)
        assert M.rand(4).tolist() == expected
        M.manual_seed(3)
        with M.random.fork_rng(enabled=False):
            M.rand(10)
        assert M.rand(4).tolist() != expected
        state = M.random.get_rng_state()
        a = M.rand(2).tolist()
        M.random.set_rng_state(state)
        assert M.rand(2).tolist() == a


@needs_torch
@pytest.mark.parametrize("args", [(0, 2, 5), (-1, 1, 7, 2.0), (0.5, 3.3, 11), (2, 2, 1),
                                  (0, 1, 0)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logspace_as_torch(device, args, dtype):
    def program(M):
        return M.logspace(*args, dtype=getattr(M, dtype))
    ours, theirs = program(On(mg, device)), program(torch)
    assert ours.dtype == getattr(mg, dtype) and tuple(ours.shape) == tuple(theirs.shape)
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=4e-7)


@needs_torch
@pytest.mark.parametrize("value, dtype", [(3, None), (2.5, None), (True, None), (4, "int32"),
                                          (1.5, "float64")])
def test_scalar_tensor_as_torch(device, value, dtype):
    assert_as_torch(lambda M: M.scalar_tensor(value, dtype=dtype and getattr(M, dtype)),
                    device)


@needs_torch
def test_asarray_shares_or_copies_as_torch(device):
    for M in (torch, On(mg, device)):
        a = np.arange(3.0)
        shared, copied = M.asarray(a), M.asarray(a, copy=True)
        a[0] = 9.0
        if device == "cpu":
            assert shared.tolist() == [9.0, 1.0, 2.0]
        assert copied.tolist() == [0.0, 1.0, 2.0]
        t = M.ones(2)
        assert M.asarray(t) is t and M.asarray(t, copy=True) is not t
        assert M.asarray([1, 2]).dtype == M.int64 and M.asarray([1.5]).dtype == M.float32
        assert M.asarray([1.0], requires_grad=True).requires_grad


@needs_torch
def test_result_type_as_torch(device):
    def operands(M):
        return [M.tensor([1, 2]), M.tensor([1.0]), M.tensor(2.5, dtype=M.float64),
                M.tensor([True]), M.tensor(3, dtype=M.int8), 1.5, 2, True, 1j]
    ours, theirs = operands(On(mg, device)), operands(torch)
    for i in range(len(ours)):
        for j in range(len(ours)):
            if not (hasattr(theirs[i], "shape") or hasattr(theirs[j], "shape")):
                continue  # (torch wants a tensor among the two)
            expected = str(torch.result_type(theirs[i], theirs[j])).replace("torch.", "")
            assert str(mg.result_type(ours[i], ours[j])) == expected, (i, j)


@needs_torch
def test_size_and_memory_formats_as_torch(device):
    for M in (torch, On(mg, device)):
        size = M.Size([2, 3, 4])
        assert size.numel() == 24 and size == (2, 3, 4) and isinstance(size, tuple)
        assert M.Size([]).numel() == 1
        x = M.ones(2, 3).t()
        assert x.clone(memory_format=M.contiguous_format).is_contiguous()
        assert not x.clone().is_contiguous() and not x.clone(
            memory_format=M.preserve_format).is_contiguous()
        assert x.contiguous(memory_format=M.contiguous_format).is_contiguous()


@needs_torch
def test_storage_offset_and_numpy_force_as_torch(device):
    for M in (torch, On(mg, device)):
        x = M.arange(12.0).reshape(3, 4)
        assert [x.storage_offset(), x[1:, 2:].storage_offset(), x.t().storage_offset(),
                x[2].storage_offset(), x[:, 1].storage_offset()] == [0, 6, 0, 8, 1]
        assert x.requires_grad_().numpy(force=True).shape == (3, 4)


@needs_torch
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool"])
def test_random_fill_ranges_as_torch(device, dtype):
    """random_(from, to), random_(to) and random_() draw integers from the ranges
    PyTorch's do."""
    for M in (torch, On(mg, device)):
        x = M.zeros(4000, dtype=getattr(M, dtype))
        if dtype != "bool":
            values = set(x.random_(2, 6).tolist())
            assert values == {2, 3, 4, 5}
            assert set(x.random_(3).tolist()) == {0, 1, 2}
        top = x.random_().max().item()
        assert {"bool": top == 1, "uint8": 200 < top <= 255}.get(dtype, top > 2 ** 20)
        with pytest.raises(RuntimeError):
            x.random_(5, 5)


@needs_torch
def test_exponential_fill_as_torch(device):
    for M in (torch, On(mg, device)):
        x = M.zeros(20000, dtype=M.float64).exponential_(4.0)
        assert x.min().item() >= 0 and abs(x.mean().item() - 0.25) < 0.02
        with pytest.raises(RuntimeError):
            x.exponential_(-1.0)


@needs_torch
def test_stack_dataset_and_loader_iterator_length_as_torch(device):
    import torch.utils.data as tdata
    import minigrad.utils.data as mdata
    for M, data in ((torch, tdata), (On(mg, device), mdata)):
        pairs = data.StackDataset(M.arange(5), M.arange(5) * 2)
        assert len(pairs) == 5 and [t.item() for t in pairs[3]] == [3, 6]
        named = data.StackDataset(x=M.arange(5), y=M.arange(5) * 2)
        assert {k: v.item() for k, v in named[1].items()} == {"x": 1, "y": 2}
        batches = iter(data.DataLoader(named, batch_size=2))
        assert len(batches) == 3
        assert [b["y"].tolist() for b in batches] == [[0, 2], [4, 6], [8]]
        with pytest.raises(ValueError):
            data.StackDataset(M.arange(3), M.arange(4))
        with pytest.raises(ValueError):
            data.StackDataset(M.arange(3), y=M.arange(3))


@needs_torch
def test_complex_promotion_as_torch(device):
    """A float tensor with a complex one: the complex dtype wide enough for both, except
    that a 0-d complex one gives the complex dtype of the dimensioned float one's precision
    and a 0-d float one leaves a dimensioned complex one as it is (as a Python complex
    number: a 0-d complex)."""
    def pairs(M):
        t = M.tensor
        return [(t([1.0], dtype=M.float32), t(1j, dtype=M.complex128)),
                (t([1.0], dtype=M.float64), t(1j, dtype=M.complex64)),
                (t([1]), t(1j, dtype=M.complex128)),
                (t([1j], dtype=M.complex64), t(1.0, dtype=M.float64)),
                (t([1j], dtype=M.complex64), t([1.0], dtype=M.float64)),
                (t([2.5], dtype=M.float64), 1j), (t(2.5, dtype=M.float64), 1j),
                (t([2.5]), 1j), (t([2]), 1j)]
    for (a, b), (c, d) in zip(pairs(On(mg, device)), pairs(torch)):
        assert str((a + b).dtype) == str((c + d).dtype).replace("torch.", "")
        assert str(mg.result_type(a, b)) == str(torch.result_type(c, d)).replace("torch.", "")
