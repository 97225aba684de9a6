"""``minigrad.utils.data`` as ``torch.utils.data``: the same program on both, compared batch
by batch (shapes, dtypes and values; shuffled orders only as sets, since the generators
differ), and the errors PyTorch raises."""
import collections
import math
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad.utils import data
from tests.torch_ref import needs_torch, torch


def plain(x):
    """A batch as plain Python: tensors as (shape, dtype name, values)."""
    if isinstance(x, mg.Tensor):
        return (tuple(x.shape), str(x.dtype), x.numpy().tolist())
    if torch is not None and isinstance(x, torch.Tensor):
        return (tuple(x.shape), str(x.dtype).replace("torch.", ""), x.numpy().tolist())
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(plain(v) for v in x) if not hasattr(x, "_fields") else \
            (type(x).__name__, [plain(v) for v in x])
    return x


def tensors(M):
    x = M.tensor(np.arange(30, dtype=np.float32).reshape(10, 3))
    y = M.tensor(np.arange(10, dtype=np.int64))
    return x, y


Point = collections.namedtuple("Point", "x y")

# one line per sample kind: what a dataset's __getitem__ gives, written against M
SAMPLES = [
    ("tensor", lambda M, i: M.tensor([float(i), 2.0 * i])),
    ("tuple", lambda M, i: (M.tensor([i, i]), i)),
    ("float", lambda M, i: i / 2),
    ("int", lambda M, i: i),
    ("bool", lambda M, i: i % 2 == 0),
    ("numpy", lambda M, i: np.full((2, 2), i, dtype=np.int32)),
    ("numpy_scalar", lambda M, i: np.float32(i)),
    ("str", lambda M, i: f"s{i}"),
    ("dict", lambda M, i: {"a": M.tensor([i]), "b": {"c": float(i), "d": [i, "x"]}}),
    ("list", lambda M, i: [i, [float(i), M.tensor(i)]]),
    ("namedtuple", lambda M, i: Point(i, M.tensor([i, i], dtype=M.float64))),
    ("zero_dim", lambda M, i: M.tensor(float(i))),
]


class Listed:
    """A map-style dataset that is not a Dataset subclass (a plain indexable, as PyTorch
    allows)."""

    def __init__(self, M, make, n):
        self.items = [make(M, i) for i in range(n)]

    def __getitem__(self, i):
        return self.items[i]

    def __len__(self):
        return len(self.items)


@needs_torch
@pytest.mark.parametrize("name, make", SAMPLES, ids=[s[0] for s in SAMPLES])
@pytest.mark.parametrize("batch_size, drop_last", [(1, False), (3, False), (3, True),
                                                   (None, False)])
def test_batches_match_torch(name, make, batch_size, drop_last):
    ours = data.DataLoader(Listed(mg, make, 7), batch_size=batch_size, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(Listed(torch, make, 7), batch_size=batch_size,
                                         drop_last=drop_last)
    assert len(ours) == len(theirs)
    assert [plain(b) for b in ours] == [plain(b) for b in theirs]


@needs_torch
@pytest.mark.parametrize("n, batch_size, drop_last", [(10, 3, False), (10, 3, True),
                                                      (9, 3, True), (2, 5, False),
                                                      (2, 5, True), (0, 4, False)])
def test_tensor_dataset_loader_lengths_and_order(n, batch_size, drop_last):
    def run(M, DL):
        x, y = tensors(M)
        ds = DL.TensorDataset(x[:n], y[:n])
        loader = DL.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
        return len(ds), len(loader), [plain(b) for b in loader]
    assert run(mg, data) == run(torch, torch.utils.data)


@needs_torch
def test_shuffle_draws_every_index_once_per_pass_and_follows_the_seed():
    x, y = tensors(mg)
    loader = data.DataLoader(data.TensorDataset(x, y), batch_size=4, shuffle=True)
    mg.manual_seed(3)
    first = [b[1].tolist() for b in loader]
    assert sorted(sum(first, [])) == list(range(10)) and [len(b) for b in first] == [4, 4, 2]
    second = [b[1].tolist() for b in loader]
    assert second != first  # a new order each pass
    mg.manual_seed(3)
    assert [b[1].tolist() for b in loader] == first
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    a = [b[1].tolist() for b in data.DataLoader(data.TensorDataset(x, y), 3, True,
                                                generator=g1)]
    b = [b[1].tolist() for b in data.DataLoader(data.TensorDataset(x, y), 3, True,
                                                generator=g2)]
    assert a == b


def test_samplers():
    assert list(data.SequentialSampler(range(4))) == [0, 1, 2, 3]
    assert sorted(data.RandomSampler(range(5))) == [0, 1, 2, 3, 4]
    s = data.RandomSampler(range(3), num_samples=7)
    drawn = list(s)  # two whole passes, then 1 of a third
    assert len(s) == 7 and sorted(set(drawn)) == [0, 1, 2] and sorted(drawn)[:6] != [0] * 6
    assert sorted(collections.Counter(drawn).values()) == [2, 2, 3]
    r = list(data.RandomSampler(range(3), replacement=True, num_samples=20))
    assert len(r) == 20 and set(r) <= {0, 1, 2}
    assert sorted(data.SubsetRandomSampler([5, 7, 9])) == [5, 7, 9]
    w = list(data.WeightedRandomSampler([0.0, 1.0, 0.0], 5))
    assert w == [1] * 5
    assert list(data.BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(data.BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    assert len(data.BatchSampler(range(7), 3, False)) == 3


def test_sampler_with_replacement_draws_as_it_goes():
    """As PyTorch's, a RandomSampler with replacement draws its indices 32 at a time, so a
    huge num_samples (minGPT's Trainer asks for 1e10 and stops when it likes) costs nothing."""
    it = iter(data.RandomSampler(range(5), replacement=True, num_samples=int(1e10)))
    first = [next(it) for _ in range(70)]
    assert set(first) <= set(range(5)) and len(set(first)) == 5
    assert len(list(data.RandomSampler(range(5), replacement=True, num_samples=70))) == 70


def test_modules_where_pytorch_puts_the_loader():
    from minigrad.utils.data.dataloader import DataLoader
    from minigrad.utils.data.dataset import Dataset, TensorDataset  # noqa: F401
    from minigrad.utils.data.sampler import BatchSampler, RandomSampler
    assert DataLoader is data.DataLoader and Dataset is data.Dataset
    assert RandomSampler is data.RandomSampler and BatchSampler is data.BatchSampler


@needs_torch
def test_sampler_and_batch_sampler_give_torchs_batches():
    def run(M, DL):
        x, y = tensors(M)
        ds = DL.TensorDataset(x, y)
        a = DL.DataLoader(ds, batch_size=4, sampler=[9, 1, 5, 3, 0])
        b = DL.DataLoader(ds, batch_sampler=[[2, 3], [8], [0, 1, 4]])
        c = DL.DataLoader(ds, batch_size=2, collate_fn=lambda batch: len(batch))
        return [plain(x) for x in a], len(b), [plain(x) for x in b], list(c)
    assert run(mg, data) == run(torch, torch.utils.data)


@pytest.mark.parametrize("drop_last", [False, True])
def test_tensor_dataset_batches_gathered_at_once_equal_the_stacked_samples(drop_last):
    x, y = mg.randn(23, 3, 2), mg.randint(0, 5, (23,))
    for ds in (data.TensorDataset(x, y), data.random_split(data.TensorDataset(x, y),
                                                           [0.6, 0.4])[0]):
        sampler = list(data.RandomSampler(ds))
        fast = data.DataLoader(ds, batch_size=4, sampler=sampler, drop_last=drop_last)
        slow = data.DataLoader(ds, batch_size=4, sampler=sampler, drop_last=drop_last,
                               collate_fn=lambda batch: data.default_collate(batch))
        assert [plain(b) for b in fast] == [plain(b) for b in slow]


@needs_torch
def test_a_datasets_getitems_is_used_as_torch_uses_it():
    def run(DL):
        class Batched(DL.Dataset):
            def __getitem__(self, i):
                raise AssertionError("__getitems__ should be used")

            def __getitems__(self, indices):
                return [(i, float(i)) for i in indices]

            def __len__(self):
                return 5
        return ([plain(b) for b in DL.DataLoader(Batched(), batch_size=2)],
                [plain(b) for b in DL.DataLoader(DL.Subset(Batched(), [4, 1, 3]), 2)])
    assert run(data) == run(torch.utils.data)


class Stream:
    """An IterableDataset of ``n`` numbers (with a length, or without)."""

    def __init__(self, n, sized=True):
        self.n, self.sized = n, sized

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        if not self.sized:
            raise TypeError("object of type 'Stream' has no len()")
        return self.n


@needs_torch
@pytest.mark.parametrize("batch_size, drop_last", [(3, False), (3, True), (None, False)])
def test_iterable_dataset_matches_torch(batch_size, drop_last):
    def run(DL):
        ds = type("S", (Stream, DL.IterableDataset), {})(7)
        loader = DL.DataLoader(ds, batch_size=batch_size, drop_last=drop_last)
        return len(loader), [plain(b) for b in loader]
    assert run(data) == run(torch.utils.data)


@needs_torch
def test_datasets_match_torch():
    def run(M, DL):
        x, y = tensors(M)
        ds = DL.TensorDataset(x, y)
        sub = DL.Subset(ds, [4, 0, 2])
        cat = DL.ConcatDataset([sub, DL.Subset(ds, [9])])
        added = sub + DL.Subset(ds, [8])
        return (len(ds), plain(ds[3]), len(sub), plain(sub[1]), len(cat), plain(cat[3]),
                plain(cat[-1]), plain(cat[-4]), cat.cumulative_sizes, plain(added[3]))
    assert run(mg, data) == run(torch, torch.utils.data)


@needs_torch
@pytest.mark.parametrize("n, lengths", [(10, [3, 7]), (10, [0.3, 0.3, 0.4]),
                                        (11, [0.5, 0.5]), (7, [0.1, 0.2, 0.7]),
                                        (5, [5, 0]), (3, [0.1, 0.9]),
                                        (30, [0.25, 0.25, 0.25, 0.25])])
def test_random_split_sizes_match_torch_and_the_splits_are_disjoint(n, lengths):
    sizes = _torch_sizes(n, lengths)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = data.random_split(list(range(n)), lengths)
    assert any("Length of split at index" in str(w.message) for w in caught) == \
        (0 in sizes and isinstance(lengths[0], float))
    assert [len(s) for s in ours] == sizes
    seen = [s[j] for s in ours for j in range(len(s))]
    assert sorted(seen) == list(range(n))


def _torch_sizes(n, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [len(s) for s in torch.utils.data.random_split(list(range(n)), lengths)]


@needs_torch
def test_a_generator_drives_shuffling_and_splits_as_in_torch():
    def run(M, DL):
        splits = DL.random_split(range(10), [3, 7], generator=M.Generator().manual_seed(42))
        again = DL.random_split(range(10), [3, 7], generator=M.Generator().manual_seed(42))
        loader = DL.DataLoader(range(6), batch_size=4, shuffle=True,
                               generator=M.Generator().manual_seed(1))
        batches = [b.tolist() for b in loader]
        return ([len(s) for s in splits], list(splits[0]) == list(again[0]),
                sorted(sum(batches, [])), [len(b) for b in batches])
    assert run(mg, data) == run(torch, torch.utils.data)


def test_random_split_follows_the_generator():
    a = data.random_split(range(20), [0.5, 0.5], generator=np.random.default_rng(1))
    b = data.random_split(range(20), [0.5, 0.5], generator=np.random.default_rng(1))
    assert a[0].indices == b[0].indices
    mg.manual_seed(2)
    c = data.random_split(range(20), [10, 10])
    mg.manual_seed(2)
    assert data.random_split(range(20), [10, 10])[1].indices == c[1].indices


# (what, call against (M, DL)): both must raise the same error type with the same message
ERRORS = [
    ("split_sum", lambda M, DL: DL.random_split(range(5), [2, 2])),
    ("split_fraction", lambda M, DL: DL.random_split(range(5), [1.5, -0.5])),
    ("workers_negative", lambda M, DL: DL.DataLoader(range(3), num_workers=-1)),
    ("sampler_shuffle", lambda M, DL: DL.DataLoader(range(3), sampler=[0], shuffle=True)),
    ("batch_sampler_excl", lambda M, DL: DL.DataLoader(range(3), batch_sampler=[[0]],
                                                       batch_size=2)),
    ("none_drop_last", lambda M, DL: DL.DataLoader(range(3), batch_size=None,
                                                   drop_last=True)),
    ("batch_size_zero", lambda M, DL: DL.DataLoader(range(3), batch_size=0)),
    ("drop_last_type", lambda M, DL: DL.BatchSampler(range(3), 2, 1)),
    ("timeout", lambda M, DL: DL.DataLoader(range(3), timeout=-1)),
    ("prefetch", lambda M, DL: DL.DataLoader(range(3), prefetch_factor=2)),
    ("persistent", lambda M, DL: DL.DataLoader(range(3), persistent_workers=True)),
    ("num_samples", lambda M, DL: DL.RandomSampler(range(3), num_samples=0)),
    ("replacement", lambda M, DL: DL.RandomSampler(range(3), replacement=1)),
    ("iterable_shuffle", lambda M, DL: DL.DataLoader(
        type("S", (Stream, DL.IterableDataset), {})(3), shuffle=True)),
    ("iterable_no_len", lambda M, DL: len(DL.DataLoader(
        type("S", (Stream, DL.IterableDataset), {})(3, sized=False)))),
    ("tensor_sizes", lambda M, DL: DL.TensorDataset(M.zeros(3), M.zeros(4))),
    ("concat_empty", lambda M, DL: DL.ConcatDataset([])),
    ("concat_index", lambda M, DL: DL.ConcatDataset([range(3)])[-4]),
    ("collate_unequal", lambda M, DL: DL.default_collate([[1, 2], [3]])),
    ("collate_object", lambda M, DL: DL.default_collate([object(), object()])),
    ("collate_strings", lambda M, DL: DL.default_collate([np.array(["a"]), np.array(["b"])])),
    ("dataset_getitem", lambda M, DL: DL.Dataset()[0]),
    ("set_after_init", lambda M, DL: setattr(DL.DataLoader(range(3)), "batch_size", 2)),
]


@needs_torch
@pytest.mark.parametrize("name, call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_as_torch(name, call):
    with pytest.raises(Exception) as theirs:
        call(torch, torch.utils.data)
    with pytest.raises(type(theirs.value)) as ours:
        call(mg, data)
    want = str(theirs.value).replace("torch.", "").replace("<class '", "").split("'")[0]
    assert str(ours.value).replace("minigrad.", "").startswith(want[:40])


def test_workers_are_refused_in_one_line():
    with pytest.raises(TypeError, match="minigrad.Generator or a NumPy Generator"):
        list(data.RandomSampler(range(3), generator=object()))
    with pytest.raises(ValueError, match=r"num_workers=2 is not supported.*num_workers=0"):
        data.DataLoader(range(3), num_workers=2)
    assert data.get_worker_info() is None


def test_a_classic_training_loop():
    x = mg.randn(64, 3)
    y = x @ mg.tensor([[1.0], [-2.0], [0.5]])
    loader = data.DataLoader(data.TensorDataset(x, y), batch_size=16, shuffle=True)
    model = mg.nn.Linear(3, 1)
    opt = mg.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(30):
        for xb, yb in loader:
            opt.zero_grad()
            loss = ((model(xb) - yb) ** 2).mean()
            loss.backward()
            opt.step()
    assert loss.item() < 1e-3 and math.isfinite(loss.item())


def test_batches_stay_on_the_tested_device(device):
    x = mg.arange(12.0, device=device).reshape(6, 2)
    y = mg.arange(6, device=device)
    ds = data.TensorDataset(x, y)
    for loader in (data.DataLoader(ds, batch_size=4, shuffle=True),
                   data.DataLoader(ds, batch_size=4, collate_fn=data.default_collate),
                   data.DataLoader(data.Subset(ds, [5, 0, 3]), batch_size=2,
                                   collate_fn=lambda batch: data.default_collate(batch))):
        batches = list(loader)
        assert all(b.device == mg.Device(device) for xy in batches for b in xy)
        ys = [v for _, yb in batches for v in yb.tolist()]
        assert ys == [v / 2 for xb, _ in batches for v in xb[:, 0].tolist()]


@needs_torch
def test_classes_live_in_pytorchs_modules():
    """Each class and function sits in the submodule PyTorch puts it in (so ``from
    torch.utils.data.sampler import RandomSampler`` keeps working with the import changed),
    and the package's namespace holds its public names and submodules, no stray imports."""
    import torch.utils.data as tdata
    for name in data.__all__:
        theirs = getattr(tdata, name).__module__.replace("torch", "minigrad", 1)
        if "._utils." not in theirs:  # (PyTorch's private collate and worker modules)
            assert getattr(data, name).__module__ == theirs, name
    public = {n for n in vars(data) if not n.startswith("_")}
    assert public == set(data.__all__) | {"dataset", "sampler", "dataloader"}
