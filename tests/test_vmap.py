"""vmap: each batching rule against a Python loop over the batch, in_dims and out_dims,
nesting, randomness, in-place ops and the errors PyTorch gives."""
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.autograd import batching
from minigrad.autograd.function import Primitive
from minigrad.func import vmap
from tests.torch_ref import needs_torch, torch


def rand(*shape, seed=0, device="cpu"):
    return mg.tensor(np.random.default_rng(seed).standard_normal(shape), device=device)


def looped(fn, xs, in_dims):
    """fn applied to each batch element (the reference), stacked."""
    size = next(x.shape[d] for x, d in zip(xs, in_dims) if d is not None)
    outs = [fn(*[x if d is None else x.select(d, b) for x, d in zip(xs, in_dims)])
            for b in range(size)]
    return mg.stack(outs)


def same(a, b, exact=True):
    assert tuple(a.shape) == tuple(b.shape)
    if exact:
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    else:
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


W = rand(4, 3, seed=9)
# (name, shapes of the inputs (a batch of 5 in front of each batched one), in_dims, fn,
#  whether the rule gives the same bits as the loop: not where an example's whole tensor is
#  summed, which becomes a row of the batch's sum, added in another order on a GPU)
CASES = [
    ("add", [(5, 3), (3,)], (0, None), lambda x, y: x + y, True),
    ("add_both", [(5, 2, 3), (5, 3)], (0, 0), lambda x, y: x + y, True),
    ("mul_scalar", [(5, 3)], (0,), lambda x: 2.5 * x - 1, True),
    ("div_pow", [(5, 3), (5, 3)], (0, 0), lambda x, y: x / (y.abs() + 1) ** 1.5, True),
    ("unary", [(5, 4)], (0,),
     lambda x: (x.exp() + 1).log().sqrt().tanh().sigmoid().sin().cos(), True),
    ("relu_gelu", [(5, 4)], (0,), lambda x: F.gelu(x).relu() + F.gelu(x, "tanh"), True),
    ("clamp", [(5, 4)], (0,), lambda x: x.clamp(-0.5, 0.5), True),
    ("maximum", [(5, 4), (4,)], (0, None), lambda x, y: mg.maximum(x, y), True),
    ("where", [(5, 4), (4,)], (0, None), lambda x, y: mg.where(x > 0, x, y), True),
    ("masked_fill", [(5, 4)], (0,), lambda x: x.masked_fill(x < 0, 0.0), True),
    ("sum_dim", [(5, 3, 4)], (0,), lambda x: x.sum(1), True),
    ("sum_all", [(5, 3, 4)], (0,), lambda x: x.sum(), False),
    ("mean_keep", [(5, 3, 4)], (0,), lambda x: x.mean(-1, keepdim=True), True),
    ("var_std", [(5, 3, 4)], (0,), lambda x: x.var(0) + x.std(), False),
    ("max_min", [(5, 3, 4)], (0,), lambda x: x.max(1).values.sum() + x.min() + x.amax(0), False),
    ("argmax", [(5, 3, 4)], (0,), lambda x: x.argmax(-1).to(x.dtype), True),
    ("prod", [(5, 3)], (0,), lambda x: x.prod() + x.prod(0).sum(), False),
    ("logsumexp", [(5, 3, 4)], (0,), lambda x: x.logsumexp(-1), True),
    ("softmax", [(5, 3, 4)], (0,), lambda x: x.softmax(-1) + x.log_softmax(0), True),
    ("cumsum", [(5, 3, 4)], (0,), lambda x: x.cumsum(1) + x.cumprod(-1), True),
    ("norm", [(5, 3, 4)], (0,), lambda x: x.norm(dim=-1) + x.norm(p=1, dim=0).sum(), False),
    ("any_all", [(5, 3)], (0,), lambda x: (x > 0).any(-1) & (x > -1).all(), True),
    ("reshape_view", [(5, 3, 4)], (0,), lambda x: x.reshape(12).view(2, 6), True),
    ("flatten_squeeze", [(5, 3, 1)], (0,), lambda x: x.squeeze(-1).unsqueeze(0).flatten(), True),
    ("permute", [(5, 2, 3, 4)], (0,), lambda x: x.permute(2, 0, 1).transpose(0, 1), True),
    ("t_mT", [(5, 3, 4)], (0,), lambda x: x[0].t() + x.mT[:, 1], True),
    ("expand", [(5, 3, 1)], (0,), lambda x: x.expand(2, 3, 4), True),
    ("getitem_basic", [(5, 3, 4)], (0,), lambda x: x[1:, ::2] * x[..., None][0, 0], True),
    ("getitem_array", [(5, 3, 4)], (0,), lambda x: x[:, mg.tensor([2, 0, 2])], True),
    ("getitem_mask", [(5, 3, 4)], (0,), lambda x: x[mg.tensor([True, False, True])], True),
    ("gather", [(5, 3, 4)], (0,), lambda x: x.gather(1, mg.tensor([[0, 3], [1, 1], [2, 0]])),
     True),
    ("index_select", [(5, 3, 4)], (0,), lambda x: x.index_select(0, mg.tensor([2, 1])), True),
    ("sort_topk", [(5, 3, 4)], (0,),
     lambda x: x.sort(0).values + x.sort(-1, descending=True).indices + x.topk(2)[0].sum(),
     False),
    ("gather_batched_index", [(5, 3, 4)], (0,),
     lambda x: x.gather(1, x.argsort(1)[:, :2]) * x.argmax(0)[:2].to(x.dtype), True),
    ("cat_stack", [(5, 3), (3,)], (0, None),
     lambda x, y: mg.cat([x, y])[1:4] + mg.stack([x, y], 1)[:, 1], True),
    ("split_chunk", [(5, 6)], (0,), lambda x: x.split(2)[1] * x.chunk(3)[2], True),
    ("unbind", [(5, 2, 3)], (0,), lambda x: x.unbind(1)[2], True),
    ("repeat", [(5, 2)], (0,), lambda x: x.repeat(3, 2), True),
    ("tril_flip_roll", [(5, 3, 3)], (0,), lambda x: x.tril() + x.triu(1).flip(0) + x.roll(1, 1),
     True),
    ("matmul_mv", [(5, 4, 3), (3,)], (0, None), lambda x, y: x @ y, False),
    ("matmul_vm", [(5, 4), (4, 3)], (0, None), lambda x, y: x @ y, False),
    ("matmul_both", [(5, 2, 4), (5, 4, 3)], (0, 0), lambda x, y: x @ y, False),
    ("matmul_vv", [(5, 4), (5, 4)], (0, 0), lambda x, y: x @ y + x.dot(y), False),
    ("matmul_bcast", [(5, 4), (2, 4, 3)], (0, None), lambda x, y: x @ y, False),
    ("mm_bmm_mv", [(5, 2, 4), (4, 3)], (0, None),
     lambda x, y: x.mm(y).unsqueeze(0).bmm(y.T.unsqueeze(0)) + x.mv(y[:, 0]).sum(), False),
    ("linear", [(5, 2, 3)], (0,),
     lambda x: F.linear(x, W.to(x.device), W[:, 0].to(x.device)), False),
    ("linear_weight", [(5, 4, 3), (2, 3)], (0, None), lambda w, x: F.linear(x, w, w[:, 1]),
     False),
    ("layer_norm", [(5, 2, 3), (3,)], (0, None),
     lambda x, w: F.layer_norm(x, (3,), w, w.cos()), False),
    ("layer_norm_weight", [(5, 3), (2, 3)], (0, None),
     lambda w, x: F.layer_norm(x, (3,), w, w.sin()), False),
    ("attention", [(5, 2, 3, 4), (2, 4, 4)], (0, None),
     lambda q, kv: F.scaled_dot_product_attention(q, kv, kv, is_causal=True), False),
    ("attention_mask", [(5, 2, 3, 4), (5, 3, 3)], (0, 0),
     lambda q, m: F.scaled_dot_product_attention(q, q, q, attn_mask=m > 0), False),
    ("cross_entropy", [(5, 3, 4)], (0,),
     lambda x: F.cross_entropy(x, mg.tensor([1, 3, 0], device=x.device),
                               label_smoothing=0.1), False),
    ("cross_entropy_none", [(5, 3, 4)], (0,),
     lambda x: F.cross_entropy(x, mg.tensor([1, -100, 0], device=x.device),
                               reduction="none"), True),
    ("embedding", [(5, 3)], (0,),
     lambda i: F.embedding((i.abs() * 2).clamp(max=3).to(mg.int64), W.to(i.device),
                           padding_idx=1), False),
    ("cast_clone", [(5, 3)], (0,), lambda x: x.float().double().clone(), True),
    ("in_place", [(5, 3)], (0,), lambda x: x.clone().mul_(2).add_(x).relu_(), True),
    ("roll_flattened", [(5, 3, 4)], (0,), lambda x: x.roll(5) + x.roll(-2), True),
    ("index_arrays_apart", [(5, 3, 4, 3)], (0,),
     lambda x: x[IDS[:2], :, IDS[1:]] * x[0, :, IDS[:2]].T, True),
    ("index_arrays_apart_2d", [(5, 3, 4, 3)], (0,), lambda x: x[IDS2, ..., IDS2], True),
    ("index_arrays_together", [(5, 3, 4, 2)], (0,), lambda x: x[:, IDS2, 1], True),
    ("masked_select", [(5, 3, 4)], (0,), lambda x: x.masked_select(MASK.to(x.device)), True),
    ("embedding_table", [(5, 4, 3)], (0,),
     lambda w: F.embedding(mg.tensor([[1, 2], [1, 0]], device=w.device), w, padding_idx=1),
     True),
    ("scatter_add", [(5, 4, 3), (5, 2, 3)], (0, 0),
     lambda x, s: x.scatter_add(0, mg.tensor([[0, 1, 3], [0, 0, 2]], device=x.device), s),
     True),
    ("index_add", [(5, 4, 3), (2, 3)], (0, None),
     lambda x, s: x.index_add(0, mg.tensor([3, 0], device=x.device), s), True),
    ("index_put", [(5, 3, 4), (5, 4)], (0, 0), lambda x, v: _index_put(x, v), True),
    ("scatter", [(5, 3, 4), (2,)], (0, None),
     lambda x, v: x.scatter(1, mg.tensor([[0, 3], [1, 1], [2, 2]], device=x.device),
                            v.expand(3, 2)).scatter(0, mg.tensor([[0, 2]], device=x.device),
                                                    1.5), True),
    ("cross_entropy_weights", [(5, 3, 4), (5, 4)], (0, 0),
     lambda x, w: F.cross_entropy(x, mg.tensor([1, 3, -100], device=x.device),
                                  weight=w.abs() + 0.1, label_smoothing=0.1), False),
    ("cross_entropy_weights_sum", [(5, 3, 4), (5, 4)], (0, 0),
     lambda x, w: F.cross_entropy(x, mg.tensor([1, 3, 0], device=x.device),
                                  weight=w.abs(), reduction="sum"), False),
]
IDS, IDS2 = mg.tensor([2, 0, 1]), mg.tensor([[1, 2], [0, 0]])
MASK = mg.tensor(np.random.default_rng(3).standard_normal((3, 4)) > 0)


def _index_put(x, v):
    """Writes through index tensors (an index put), one with the arrays apart."""
    out = x * 1
    out[IDS[:2].to(x.device), 1] = v[0]
    out[1:, IDS[1:].to(x.device)] = v[:2]
    out[0, ..., IDS[1:].to(x.device)] = v[1:3] * 2
    return out


@pytest.mark.parametrize("name,shapes,in_dims,fn,exact", CASES, ids=[c[0] for c in CASES])
def test_rule_equals_a_loop(device, name, shapes, in_dims, fn, exact):
    xs = [rand(*s, seed=i, device=device) for i, s in enumerate(shapes)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no op may fall back to the loop)
        out = vmap(fn, in_dims=in_dims)(*xs)
    same(out, looped(fn, xs, in_dims), exact)


def _primitives(cls=Primitive):
    """minigrad's primitives (not the node classes, nor those tests define)."""
    for sub in cls.__subclasses__():
        if sub.op is sub and sub.__module__.startswith("minigrad."):
            yield sub
            yield from _primitives(sub)


# CopySlices (a write through a view, redone on the base by a chain of one element's view
# ops): inside vmap such a write goes into the batch's values (BatchedTensor._update), so
# the node is recorded on them and never meets a batched tensor
LOOPING = {"CopySlices"}


def test_every_primitive_has_a_rule_or_is_listed_as_looping():
    ops = set(_primitives())
    assert len(ops) > 100
    for op in ops:
        assert op.vmap is not None, op.__name__
        loops = op.vmap is batching.loop
        assert loops == (op.__name__ in LOOPING), op.__name__


def test_looping_warns_with_the_op_name_and_loops():
    class Twice(Primitive):  # (a primitive of a test's own, without a rule)
        @staticmethod
        def forward(ctx, x):
            return x * 2

        vmap = batching.loop
    x = rand(4, 3)
    with pytest.warns(UserWarning, match="Twice"):
        out = vmap(lambda t: Twice.apply(t))(x)
    same(out, x * 2)


# the ops whose rules came last, with their gradients: (name, shapes, in_dims, fn)
GRADIENT_CASES = [c[:4] for c in CASES if c[0] in (
    "roll_flattened", "index_arrays_apart", "index_arrays_apart_2d", "masked_select",
    "embedding_table", "scatter_add", "index_add", "index_put", "scatter")]


@pytest.mark.parametrize("name,shapes,in_dims,fn", GRADIENT_CASES,
                         ids=[c[0] for c in GRADIENT_CASES])
def test_rule_gradients_equal_a_loop(device, name, shapes, in_dims, fn):
    """vmap(grad): the rules of the ops' backward (index add, embedding's gradient, index
    put with zeros) too, bit for bit as the loop's."""
    xs = [rand(*s, seed=i, device=device) for i, s in enumerate(shapes)]
    argnums = tuple(i for i, d in enumerate(in_dims) if d is not None)
    pull = mg.func.grad(lambda *a: fn(*a).sin().sum(), argnums=argnums)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grads = vmap(pull, in_dims=in_dims)(*xs)
    for k in range(len(argnums)):
        same(grads[k], looped(lambda *a: pull(*a)[k], xs, in_dims))


def test_embedding_of_a_batched_table_keeps_its_padding_row_out_of_the_gradient():
    """Each element's own table, the same ids: one lookup in the tables side by side; the
    padding row gets no gradient, as in the loop."""
    tables, ids = rand(3, 5, 4), mg.tensor([1, 2, 1, 0])

    def rows(t):
        return F.embedding(ids, t, padding_idx=0)
    pull = mg.func.grad(lambda t: rows(t).tanh().sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, grads = vmap(rows)(tables), vmap(pull)(tables)
    same(out, looped(rows, [tables], (0,)))
    same(grads, looped(pull, [tables], (0,)))
    assert not grads[:, 0].numpy().any() and grads[:, 1].numpy().all()


@needs_torch
@pytest.mark.parametrize("name", ["roll", "apart", "embedding", "cross_entropy"])
def test_new_rules_as_torch_func_vmap(name):
    """The rules against torch.func.vmap of the same function."""
    x, w = rand(4, 3, 5, 2), rand(4, 5, seed=1).abs()

    def fn(M, x, w):
        ids = M.tensor([2, 0, 1])
        if name == "roll":
            return x.roll(3)
        if name == "apart":
            return x[ids[:2], :, ids[1:]] * x[1, :, ids[1:]].T
        if name == "embedding":
            return M.nn.functional.embedding(ids, x[:, :, 0], padding_idx=2)
        return M.nn.functional.cross_entropy(x[..., 0], ids, weight=w,
                                             label_smoothing=0.2)
    ours = vmap(lambda a, b: fn(mg, a, b))(x, w)
    theirs = torch.func.vmap(lambda a, b: fn(torch, a, b))(torch.tensor(x.numpy()),
                                                           torch.tensor(w.numpy()))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("masked", [False, True])
def test_attention_dropout_with_randomness_same_is_one_elements_dropout(masked):
    """randomness="same": every element gets the masks one call draws (the loop from the
    same seed each time), the values and gradients; the random source then stands where
    one call leaves it."""
    q, kv = rand(3, 2, 4, 5), rand(2, 6, 5, seed=1)
    masks = rand(3, 4, 6, seed=2) > 0

    def attend(a, m):
        return F.scaled_dot_product_attention(a, kv, kv, attn_mask=m if masked else None,
                                              dropout_p=0.4, is_causal=not masked)
    pull = mg.func.grad(lambda a, m: attend(a, m).sin().sum())
    for fn in (attend, pull):
        mg.manual_seed(7)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = vmap(fn, randomness="same")(q, masks)
        after = mg.rand(3)
        expected = []
        for b in range(3):
            mg.manual_seed(7)
            expected.append(fn(q[b], masks[b]))
        same(out, mg.stack(expected), exact=False)
        same(after, mg.rand(3))
    mg.manual_seed(7)
    out = vmap(attend, randomness="different")(q, masks)
    assert not np.allclose(out[0].numpy(), out[1].numpy())  # (each its own masks)


def test_setitem_and_backward_inside_vmap():
    x, y = rand(3, 4), rand(3, 2, seed=1)

    def write(a, b):
        out = a.clone()
        out[1:3] = b
        out[0] = 7.0
        return out
    same(vmap(write)(x, y), looped(write, [x, y], (0, 0)))
    with pytest.raises(RuntimeError, match="backward"):
        vmap(lambda a: a.sum().backward())(x)


# x[index] with index tensors of each element's own (i: (2,) into dim 0, j: (2,) into
# dim 1, k: (2, 1) into dim 2), PyTorch's placement of their dims each time
BATCHED_INDEX = [
    lambda a, i, j, k: a[i], lambda a, i, j, k: a[:, j], lambda a, i, j, k: a[i, :, k],
    lambda a, i, j, k: a[1, j], lambda a, i, j, k: a[..., k], lambda a, i, j, k: a[:, j, k],
    lambda a, i, j, k: a[0, :, k], lambda a, i, j, k: a[None, :, j, None, 2],
    lambda a, i, j, k: a[1:, j][:, :, None, i[:1]]]


@pytest.mark.parametrize("n", range(len(BATCHED_INDEX)))
def test_indexing_with_batched_index_tensors(device, n):
    """One indexing of the batch, as the loop (values and gradients) and as torch.func."""
    fn = BATCHED_INDEX[n]
    rng = np.random.default_rng(n)
    x = rand(4, 3, 5, 6, device=device)
    ids = [mg.tensor(rng.integers(0, size, shape), device=device)
           for size, shape in ((3, (4, 2)), (5, (4, 2)), (6, (4, 2, 1)))]
    pull = mg.func.grad(lambda *a: fn(*a).sin().sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, grads = vmap(fn)(x, *ids), vmap(pull)(x, *ids)
    same(out, looped(fn, [x] + ids, (0, 0, 0, 0)))
    same(grads, looped(pull, [x] + ids, (0, 0, 0, 0)))
    if torch is not None:
        theirs = torch.func.vmap(fn)(*(torch.tensor(t.numpy()) for t in [x] + ids))
        np.testing.assert_array_equal(out.numpy(), theirs.numpy())


def test_indexing_with_batched_index_tensors_nested_and_unbatched_x():
    x = rand(4, 3, 5)
    ids = mg.tensor(np.random.default_rng(0).integers(0, 5, (2, 4, 3)))
    out = vmap(vmap(lambda a, i: a[:, i]), in_dims=(None, 0))(x, ids)
    same(out, mg.stack([mg.stack([x[b][:, ids[c, b]] for b in range(4)]) for c in range(2)]))
    same(vmap(lambda i: x[0][:, i])(ids[0]), mg.stack([x[0][:, i] for i in ids[0]]))


def test_reading_values_raises():
    x = rand(3, 4)
    for fn in (lambda a: a.nonzero(), lambda a: a * float(a.sum()),
               lambda a: a.gather(0, mg.tensor([1])) if a.sum().item() else a):
        with pytest.raises(RuntimeError, match="vmap"):
            vmap(fn)(x)


@pytest.mark.parametrize("in_dims,out_dims", [(0, 0), (1, 0), (-1, 1), (2, -1), (1, 2)])
def test_in_dims_and_out_dims(device, in_dims, out_dims):
    x = rand(3, 4, 5, device=device)
    out = vmap(lambda t: t.sin() * 2, in_dims=in_dims, out_dims=out_dims)(x)
    expected = mg.stack([x.select(in_dims, b).sin() * 2 for b in range(x.shape[in_dims])],
                        out_dims)
    same(out, expected)


def test_pytrees_none_and_kwargs():
    x, y, z = rand(4, 3), rand(3, 4, seed=1), rand(3, seed=2)

    def f(pair, d, scale=1.0):
        a, b = pair
        return {"sum": (a + b + d["z"]) * scale, "aux": (d["z"], [a])}
    out = vmap(f, in_dims=((0, 1), {"z": None}), out_dims={"sum": 1, "aux": (None, 0)})(
        (x, y), {"z": z}, scale=3.0)
    same(out["sum"], ((x + y.T + z) * 3.0).T)
    assert out["aux"][0] is z
    same(out["aux"][1][0], x)
    # an output that does not depend on the batch is expanded, as PyTorch
    same(vmap(lambda a: z)(x), z.expand(4, 3))


def test_nested_vmap():
    x, y = rand(2, 3, 4), rand(5, 4, seed=1)
    out = vmap(vmap(lambda a, b: (a * b).sum(), in_dims=(0, None)), in_dims=(None, 0))(x[0], y)
    same(out, (y[:, None, :] * x[0][None]).sum(-1), exact=False)
    out = vmap(vmap(lambda a: a.softmax(-1) @ a.T))(x)
    same(out, mg.stack([mg.stack([a.softmax(-1) @ a.T for a in row]) for row in x]), False)


def test_mg_vmap_is_func_vmap_as_in_torch():
    assert mg.vmap is vmap


def test_chunk_size():
    x = rand(7, 3)
    same(vmap(lambda a: a.exp().sum(), chunk_size=3)(x), x.exp().sum(1))


@needs_torch
def test_errors_as_torch():
    x, y = rand(3, 2), rand(4, 2)
    cases = [(lambda: vmap(lambda a, b: a + b)(x, y), "same size in the mapped dimension"),
             (lambda: vmap(lambda a: a, in_dims=2)(x), "expected in_dim to satisfy"),
             (lambda: vmap(lambda a: a, in_dims=None)(x), "at least one Tensor to vmap over"),
             (lambda: vmap(lambda a, b: a, in_dims=(0,))(x, y), "in_dims"),
             (lambda: vmap(lambda a: a, in_dims=[0])(x), "expected `in_dims` to be int"),
             (lambda: vmap(lambda a, n: a, in_dims=(0, 0))(x, 3), "non-Tensor arguments"),
             (lambda: vmap(lambda a: 1.0)(x), "must only return Tensors"),
             (lambda: vmap(lambda a: a.item())(x), r"\.item\(\)"),
             (lambda: vmap(lambda a: a, out_dims=None)(x), "out_dim is None"),
             (lambda: vmap(lambda a: a, randomness="sometimes"), "randomness")]
    tx, ty = torch.zeros(3, 2), torch.zeros(4, 2)
    theirs = [lambda: torch.func.vmap(lambda a, b: a + b)(tx, ty),
              lambda: torch.func.vmap(lambda a: a, in_dims=2)(tx),
              lambda: torch.func.vmap(lambda a: a, in_dims=None)(tx),
              lambda: torch.func.vmap(lambda a, b: a, in_dims=(0,))(tx, ty),
              lambda: torch.func.vmap(lambda a: a, in_dims=[0])(tx),
              lambda: torch.func.vmap(lambda a, n: a, in_dims=(0, 0))(tx, 3),
              lambda: torch.func.vmap(lambda a: 1.0)(tx),
              lambda: torch.func.vmap(lambda a: a.item())(tx),
              lambda: torch.func.vmap(lambda a: a, out_dims=None)(tx),
              lambda: torch.func.vmap(lambda a: a, randomness="sometimes")]
    for (ours, words), their in zip(cases, theirs):
        with pytest.raises(Exception) as theirs_raised:
            their()
        with pytest.raises(type(theirs_raised.value), match=words):
            ours()


def test_randomness():
    x = mg.ones(6, 50)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: F.dropout(a, 0.5))(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: F.dropout(mg.ones(50), 0.5) + a)(x)
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda a: a + mg.randn(50))(x)
    draws = {"randn": lambda a: a * 0 + mg.randn(50), "rand_like": lambda a: mg.rand_like(a),
             "randint": lambda a: a * 0 + mg.randint(0, 1000, (50,)),
             "uniform_": lambda a: a.clone().uniform_(), "normal_": lambda a: a.clone().normal_(),
             "randperm": lambda a: a * 0 + mg.randperm(50),
             "multinomial": lambda a: a * 0 + mg.ones(50).multinomial(50),
             "multinomial of batched weights": lambda a: a.multinomial(50, replacement=True),
             "bernoulli": lambda a: (a * 0.5).bernoulli(),
             "bernoulli of unbatched probabilities": lambda a: a * mg.full((50,), 0.5).bernoulli(),
             "bernoulli_": lambda a: a.clone().bernoulli_(0.5),
             "bernoulli_ of batched probabilities": lambda a: a.clone().bernoulli_(a * 0.5)}
    for name, draw in draws.items():
        rows = vmap(draw, randomness="different")(x).numpy()
        assert all(not np.array_equal(rows[0], row) for row in rows[1:]), name
        rows = vmap(draw, randomness="same")(x).numpy()
        assert all(np.array_equal(rows[0], row) for row in rows[1:]), name
    different = vmap(lambda a: F.dropout(a, 0.5), randomness="different")(x).numpy()
    assert not all(np.array_equal(different[0], row) for row in different[1:])
    same_ = vmap(lambda a: F.dropout(a, 0.5), randomness="same")(x).numpy()
    assert all(np.array_equal(same_[0], row) for row in same_[1:])
    assert set(np.unique(same_)) <= {0.0, 2.0}


@needs_torch
def test_in_place_on_an_unbatched_tensor_with_a_batched_value_raises_as_torch():
    x, y = rand(3, 2), mg.zeros(2)
    with pytest.raises(RuntimeError) as theirs:
        torch.func.vmap(lambda a, b: b.mul_(a), in_dims=(0, None))(torch.zeros(3, 2),
                                                                    torch.zeros(2))
    with pytest.raises(RuntimeError) as ours:
        vmap(lambda a, b: b.mul_(a), in_dims=(0, None))(x, y)
    assert str(ours.value).startswith(str(theirs.value)[:60])
    # a batched tensor may take an unbatched value in place
    out = vmap(lambda a, b: a.clone().add_(b), in_dims=(0, None))(x, rand(2, seed=1))
    same(out, x + rand(2, seed=1))


RANDOM_OPS = {"randperm": lambda a: mg.randperm(50),
              "multinomial": lambda a: a.multinomial(5),
              "bernoulli": lambda a: a.bernoulli(),
              "bernoulli_": lambda a: a.clone().bernoulli_(0.5)}


@pytest.mark.parametrize("name", RANDOM_OPS)
def test_randperm_multinomial_bernoulli_raise_in_error_mode_as_torch(name):
    x = mg.full((3, 50), 0.5)
    with pytest.raises(RuntimeError) as ours:
        vmap(RANDOM_OPS[name])(x)
    message = ("vmap: called random operation while in randomness error mode. Please either "
               "use the 'same' or 'different' randomness flags on vmap or perform the "
               "randomness operation out of vmap")
    assert str(ours.value).startswith(message)
    if torch is not None:
        theirs = {"randperm": lambda a: torch.randperm(50),
                  "multinomial": lambda a: a.multinomial(5), "bernoulli": lambda a: a.bernoulli(),
                  "bernoulli_": lambda a: a.clone().bernoulli_(0.5)}[name]
        with pytest.raises(RuntimeError) as raised:
            torch.func.vmap(theirs)(torch.full((3, 50), 0.5))
        assert str(raised.value).startswith(message)


def test_randperm_different_is_a_permutation_per_element_and_same_one_for_all():
    x = mg.ones(8, 3)
    rows = vmap(lambda a: mg.randperm(20, dtype=mg.int32), randomness="different")(x)
    assert rows.shape == (8, 20) and rows.dtype == mg.int32
    rows = rows.numpy()
    assert all(np.array_equal(np.sort(r), np.arange(20)) for r in rows)
    assert len({tuple(r) for r in rows}) == 8
    # nested: "same" outside, "different" inside: equal along the outer dim only
    grid = vmap(vmap(lambda a: mg.randperm(20), randomness="different"),
                randomness="same")(mg.ones(3, 4, 2)).numpy()
    assert grid.shape == (3, 4, 20)
    assert all(np.array_equal(grid[0], g) for g in grid[1:])
    assert len({tuple(r) for r in grid[0]}) == 4
    grid = vmap(vmap(lambda a: mg.randperm(20), randomness="same"),
                randomness="different")(mg.ones(3, 4, 2)).numpy()
    assert all(np.array_equal(g[0], r) for g in grid for r in g[1:])
    assert len({tuple(g[0]) for g in grid}) == 3


def test_multinomial_inside_vmap_draws_from_each_elements_weights():
    w = mg.tensor([[[1.0, 0.0, 0.0, 3.0], [0.0, 2.0, 2.0, 0.0]],
                   [[0.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]]])  # (2 elements, 2 rows, 4)
    for mode in ("different", "same"):
        picks = vmap(lambda a: a.multinomial(20000, replacement=True), randomness=mode)(w)
        assert picks.shape == (2, 2, 20000) and picks.dtype == mg.int64
        freq = np.stack([np.bincount(p, minlength=4) for p in picks.numpy().reshape(4, -1)])
        expected = (w / w.sum(-1, keepdim=True)).numpy().reshape(4, 4)
        np.testing.assert_allclose(freq / 20000, expected, atol=0.02)
        # without replacement: no category twice, those of weight 0 last
        picks = vmap(lambda a: a.multinomial(2), randomness=mode)(w).numpy()
        assert picks.shape == (2, 2, 2)
        assert {tuple(sorted(p)) for p in picks[:, 1]} <= {(0, 1), (0, 2), (0, 3), (1, 2),
                                                           (1, 3), (2, 3)}
        assert set(picks[0, 0]) == {0, 3} and set(picks[0, 1]) == {1, 2}
        assert picks[1, 0, 0] == 2
    # unbatched weights: "different" draws each element its own
    rows = vmap(lambda a: mg.ones(30).multinomial(30), randomness="different")(mg.ones(5, 1))
    assert len({tuple(r) for r in rows.numpy()}) == 5
    assert all(np.array_equal(np.sort(r), np.arange(30)) for r in rows.numpy())
    with pytest.raises(RuntimeError, match="1 or 2 dim"):
        vmap(lambda a: a.multinomial(1), randomness="same")(mg.ones(2, 3, 4, 5))


def test_bernoulli_inside_vmap_draws_with_each_elements_probabilities():
    p = mg.tensor([[0.1] * 20000, [0.5] * 20000, [0.9] * 20000])
    for mode in ("different", "same"):
        out = vmap(lambda a: a.bernoulli(), randomness=mode)(p)
        assert out.shape == (3, 20000) and out.dtype == p.dtype
        assert set(np.unique(out.numpy())) <= {0.0, 1.0}
        np.testing.assert_allclose(out.numpy().mean(1), [0.1, 0.5, 0.9], atol=0.02)
        filled = vmap(lambda a: a.clone().bernoulli_(a), randomness=mode)(p)
        np.testing.assert_allclose(filled.numpy().mean(1), [0.1, 0.5, 0.9], atol=0.02)
    # "same": one uniform draw for all, compared with each element's probabilities
    out = vmap(lambda a: a.bernoulli(), randomness="same")(p).numpy()
    assert (out[0] <= out[1]).all() and (out[1] <= out[2]).all()
    # in place on an unbatched tensor, "different" cannot give each element its own draws
    with pytest.raises(RuntimeError, match="different inplace randomness on an unbatched"):
        vmap(lambda a: a + mg.zeros(4).bernoulli_(0.5), randomness="different")(mg.ones(3, 4))
    same = vmap(lambda a: a * 0 + mg.zeros(4).bernoulli_(0.5), randomness="same")(mg.ones(3, 4))
    assert all(np.array_equal(same.numpy()[0], r) for r in same.numpy()[1:])


def test_random_draws_outside_vmap_are_those_of_the_generator():
    mg.manual_seed(3)
    perm, picks = mg.randperm(10).numpy(), mg.tensor([1.0, 2.0, 3.0]).multinomial(2).numpy()
    coins = mg.full((2, 5), 0.3).bernoulli().numpy()
    mg.manual_seed(3)
    rng = mg.backend.generator()
    np.testing.assert_array_equal(perm, rng.permutation(10))
    arrivals = rng.standard_exponential((1, 3))
    np.testing.assert_array_equal(picks, np.argsort(-(np.array([1.0, 2.0, 3.0]) / arrivals),
                                                    axis=1)[0, :2])
    np.testing.assert_array_equal(coins, rng.random((2, 5)) < 0.3)


# --- a user's autograd.Function inside vmap, as PyTorch's ----------------------------------

def _cube(M, how):
    """out = k x^3 with a backward of half the true gradient (so that it shows it ran),
    batched by its own ``vmap`` staticmethod or by a generated rule (``how``)."""
    class Cube(M.autograd.Function):
        @staticmethod
        def forward(x, k):
            return x ** 3 * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])
            ctx.k = inputs[1]

        @staticmethod
        def backward(ctx, grad):
            x, = ctx.saved_tensors
            return 1.5 * x ** 2 * grad * ctx.k, None

        if how == "vmap":
            @staticmethod
            def vmap(info, in_dims, x, k):
                seen.append((info.batch_size, info.randomness, in_dims))
                return Cube.apply(x.movedim(in_dims[0], -1), k), -1
        else:
            generate_vmap_rule = True
    seen = []
    Cube.seen = seen
    return Cube


@needs_torch
@pytest.mark.parametrize("how", ["vmap", "generate_vmap_rule"])
def test_a_functions_vmap_rule_as_torch(how):
    """The values, per-example gradients (the Function's own backward inside vmap), the
    gradient of a vmap's output taken after it, and the node's name, as torch.func's."""
    x = rand(4, 3)
    ours, theirs = _cube(mg, how), _cube(torch, how)
    tx = torch.tensor(x.numpy())
    out = vmap(lambda a: ours.apply(a, 2.0))(x)
    expected = torch.func.vmap(lambda a: theirs.apply(a, 2.0))(tx)
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-15)
    if how == "vmap":
        assert ours.seen == [(4, "error", (0, None))] == theirs.seen

    pull = mg.func.grad(lambda a: ours.apply(a, 2.0).sin().sum())
    tpull = torch.func.grad(lambda a: theirs.apply(a, 2.0).sin().sum())
    np.testing.assert_allclose(vmap(pull)(x).numpy(), torch.func.vmap(tpull)(tx).numpy(),
                               rtol=1e-13)
    np.testing.assert_allclose(vmap(pull)(x).numpy(), looped(pull, [x], (0,)).numpy(),
                               rtol=1e-13)

    y, ty = x.detach().requires_grad_(), tx.clone().requires_grad_()
    out = vmap(lambda a: ours.apply(a, 2.0).cos())(y)
    (out * out).sum().backward()
    tout = torch.func.vmap(lambda a: theirs.apply(a, 2.0).cos())(ty)
    (tout * tout).sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-13)
    node = vmap(lambda a: ours.apply(a, 2.0))(y).grad_fn
    tnode = torch.func.vmap(lambda a: theirs.apply(a, 2.0))(ty).grad_fn
    while type(tnode).__name__.startswith(("Permute", "Movedim")):
        tnode = tnode.next_functions[0][0]
    while type(node).__name__.startswith("Permute"):
        node = node.next_functions[0][0]
    assert type(node).__name__ == type(tnode).__name__


def test_a_generated_vmap_rule_inside_nested_vmap_says_it_is_not_implemented():
    cube = _cube(mg, "generate_vmap_rule")
    with pytest.raises(NotImplementedError, match="nested vmap"):
        vmap(vmap(lambda a: cube.apply(a, 2.0)))(rand(2, 3, 4))


def test_a_functions_vmap_rule_gets_the_randomness_and_may_return_unbatched():
    class Mean(mg.autograd.Function):
        @staticmethod
        def forward(x):
            return x.mean()

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def vmap(info, in_dims, x):
            assert info.randomness == "same"
            return x.mean(), None  # (one value for every element: expanded)
    x = rand(4, 3)
    same(vmap(Mean.apply, randomness="same")(x), x.mean().expand(4), exact=False)


@needs_torch
def test_a_function_without_a_vmap_rule_raises_torchs_error():
    def functions(M):
        class WithContext(M.autograd.Function):  # forward(ctx, x): no setup_context
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, grad):
                return grad * 2

        class NoRule(M.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 2

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad):
                return grad * 2
        return WithContext, NoRule
    x = rand(3, 2)
    for ours, theirs in zip(functions(mg), functions(torch)):
        with pytest.raises(RuntimeError) as expected:
            torch.func.vmap(theirs.apply)(torch.zeros(3, 2))
        with pytest.raises(RuntimeError) as raised:
            vmap(ours.apply)(x)
        assert str(raised.value) == str(expected.value)


def test_the_rules_module_imports_nothing_above_the_autograd_layer():
    """autograd/batching.py, imports inside functions included: the autograd package and
    the base modules only (the loop's stack is set from minigrad.batched)."""
    import ast
    import inspect
    tree = ast.parse(inspect.getsource(batching))
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [("." * n.level) + (n.module or "") for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom)]
    assert names
    for name in names:
        own_package = name.startswith(".") and not name.startswith("..")
        assert own_package or name == "warnings" or \
            name.startswith(("..backend", "..dtypes", "..files")), name
    assert batching.stack is mg.stack
