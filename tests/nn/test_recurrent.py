"""nn.RNN, nn.GRU, nn.LSTM and their cells against PyTorch's from the same weights (PyTorch's
state dict loaded as it is): outputs, final states and the gradients of the input, the
initial state and every parameter, in float64, for each layout (layers, directions, batch
first, unbatched, no bias); gradcheck; PyTorch's reprs and errors."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from tests.torch_ref import needs_torch, raises_as_torch, torch

KINDS = ["RNN", "RNN_relu", "GRU", "LSTM"]
LAYOUTS = {
    "one layer": dict(),
    "two layers": dict(num_layers=2),
    "bidirectional": dict(bidirectional=True),
    "two layers bidirectional batch first": dict(num_layers=2, bidirectional=True,
                                                 batch_first=True),
    "no bias": dict(bias=False),
}


def make(lib, kind, **options):
    if kind == "RNN_relu":
        return lib.nn.RNN(3, 4, nonlinearity="relu", **options).double()
    return getattr(lib.nn, kind)(3, 4, **options).double()


def same_weights(ours, theirs, device):
    ours.load_state_dict({k: mg.tensor(v.detach().numpy(), device=device)
                          for k, v in theirs.state_dict().items()})
    return ours.to(device)


def run(lib, model, x, state, device="cpu"):
    """output, final state(s) and the gradients of x, the state and the parameters."""
    xs = lib.tensor(x, requires_grad=True, device=device)
    states = None if state is None else \
        [lib.tensor(s, requires_grad=True, device=device) for s in state]
    hx = None if states is None else (tuple(states) if len(states) == 2 else states[0])
    out, final = model(xs, hx)
    finals = list(final) if isinstance(final, tuple) else [final]
    rng = np.random.default_rng(9)
    total = sum((t * lib.tensor(rng.standard_normal(tuple(t.shape)), device=device)).sum()
                for t in [out] + finals)
    total.backward()
    grads = [xs.grad] + ([] if states is None else [s.grad for s in states])
    return [out] + finals, grads, {k: p.grad for k, p in model.named_parameters()}


def assert_same(ours, theirs):
    np.testing.assert_allclose(ours.detach().cpu().numpy(), theirs.detach().numpy(),
                               rtol=1e-10, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("with_state", [False, True], ids=["zero state", "given state"])
def test_sequences_match_torch(kind, layout, with_state, device):
    options = LAYOUTS[layout]
    theirs = make(torch, kind, **options)
    ours = same_weights(make(mg, kind, **options), theirs, device)
    assert repr(ours) == repr(theirs)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 5, 3) if options.get("batch_first") else (5, 2, 3))
    n = options.get("num_layers", 1) * (2 if options.get("bidirectional") else 1)
    state = None if not with_state else \
        [rng.standard_normal((n, 2, 4)) for _ in range(2 if kind == "LSTM" else 1)]
    got, want = run(mg, ours, x, state, device), run(torch, theirs, x, state)
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        assert tuple(g.shape) == tuple(w.shape)
        assert_same(g, w)
    for name, w in want[2].items():
        assert_same(got[2][name], w)


@needs_torch
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("with_state", [False, True], ids=["zero state", "given state"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
def test_projected_lstm_matches_torch(layout, with_state, batched, device):
    """LSTM with proj_size: h (and the output, and the next layer's input) 2 wide, c 4."""
    options = dict(LAYOUTS[layout], proj_size=2)
    theirs = make(torch, "LSTM", **options)
    ours = same_weights(make(mg, "LSTM", **options), theirs, device)
    assert repr(ours) == repr(theirs)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    assert [len(w) for w in ours.all_weights] == [len(w) for w in theirs.all_weights]
    rng = np.random.default_rng(4)
    shape = (2, 5, 3) if options.get("batch_first") else (5, 2, 3)
    x = rng.standard_normal(shape if batched else (5, 3))
    n = options.get("num_layers", 1) * (2 if options.get("bidirectional") else 1)
    lead = (n, 2) if batched else (n,)
    state = [rng.standard_normal(lead + (2,)), rng.standard_normal(lead + (4,))] \
        if with_state else None
    got, want = run(mg, ours, x, state, device), run(torch, theirs, x, state)
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        assert tuple(g.shape) == tuple(w.shape)
        assert_same(g, w)
    for name, w in want[2].items():
        assert_same(got[2][name], w)


@needs_torch
@pytest.mark.parametrize("kind", KINDS)
def test_unbatched_sequences_match_torch(kind, device):
    theirs = make(torch, kind, num_layers=2)
    ours = same_weights(make(mg, kind, num_layers=2), theirs, device)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3))
    state = [rng.standard_normal((2, 4)) for _ in range(2 if kind == "LSTM" else 1)]
    for s in (None, state):
        got, want = run(mg, ours, x, s, device), run(torch, theirs, x, s)
        for g, w in zip(got[0] + got[1], want[0] + want[1]):
            assert tuple(g.shape) == tuple(w.shape)
            assert_same(g, w)


@needs_torch
@pytest.mark.parametrize("kind", ["RNNCell", "GRUCell", "LSTMCell"])
@pytest.mark.parametrize("batched", [True, False])
def test_cells_match_torch(kind, batched, device):
    theirs = getattr(torch.nn, kind)(3, 4).double()
    ours = getattr(nn, kind)(3, 4).double()
    ours.load_state_dict({k: mg.tensor(v.detach().numpy()) for k, v in
                          theirs.state_dict().items()})
    ours.to(device)
    assert repr(ours) == repr(theirs)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3) if batched else (3,))
    h = [rng.standard_normal((2, 4) if batched else (4,))
         for _ in range(2 if kind == "LSTMCell" else 1)]
    results = []
    for lib, model, dev in ((mg, ours, device), (torch, theirs, "cpu")):
        xs = lib.tensor(x, requires_grad=True, device=dev)
        hs = [lib.tensor(v, requires_grad=True, device=dev) for v in h]
        out = model(xs, tuple(hs) if len(hs) == 2 else hs[0])
        outs = list(out) if isinstance(out, tuple) else [out]
        sum(o.sum() * (i + 1) for i, o in enumerate(outs)).backward()
        results.append(outs + [xs.grad] + [v.grad for v in hs] + [model.weight_hh.grad])
    for g, w in zip(*results):
        assert_same(g, w)


@pytest.mark.parametrize("kind", KINDS + ["LSTM projected"])
def test_gradcheck(kind):
    mg.manual_seed(0)
    options = dict(proj_size=3) if kind.endswith("projected") else {}
    model = make(mg, kind.split()[0], num_layers=2, bidirectional=True, **options)
    x = mg.tensor(np.random.default_rng(3).standard_normal((3, 2, 3)), requires_grad=True)
    assert mg.autograd.gradcheck(lambda x: model(x)[0], (x,))


def test_dropout_between_layers_and_its_warning(device):
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.GRU(3, 4, dropout=0.5)
    model = nn.LSTM(3, 4, num_layers=2, dropout=0.5).to(device)
    x = mg.randn(5, 2, 3, device=device)
    model.eval()
    assert model(x)[0].tolist() == model(x)[0].tolist()
    model.train()
    mg.manual_seed(0)
    a = model(x)[0]
    mg.manual_seed(0)
    assert model(x)[0].tolist() == a.tolist()
    mg.manual_seed(1)
    assert model(x)[0].tolist() != a.tolist()


@needs_torch
@pytest.mark.parametrize("program, kind", [
    (lambda M: M.nn.GRU(3, 4)(M.ones(5, 2, 2)), RuntimeError),
    (lambda M: M.nn.GRU(3, 4)(M.ones(5, 2, 3), M.zeros(1, 3, 4)), RuntimeError),
    (lambda M: M.nn.GRU(3, 4)(M.ones(5, 2, 3), M.zeros(2, 4)), RuntimeError),
    (lambda M: M.nn.GRU(3, 4)(M.ones(1, 5, 2, 3)), ValueError),
    (lambda M: M.nn.LSTM(3, 4)(M.ones(5, 2, 3), (M.zeros(1, 2, 4), M.zeros(1, 2, 5))),
     RuntimeError),
    (lambda M: M.nn.RNN(3, 4, nonlinearity="gelu"), ValueError),
    (lambda M: M.nn.RNN(3, 0), ValueError),
    (lambda M: M.nn.LSTM(3, 4, num_layers=0), ValueError),
    (lambda M: M.nn.GRU(3, 4, dropout=1.5), ValueError),
    (lambda M: M.nn.GRUCell(3, 4)(M.ones(2, 2)), RuntimeError),
    (lambda M: M.nn.GRUCell(3, 4)(M.ones(2, 3), M.zeros(3, 4)), RuntimeError),
    (lambda M: M.nn.LSTM(3, 4)(M.ones(5, 2, 3), (M.zeros(1, 2, 5), M.zeros(1, 2, 4))),
     RuntimeError),
    (lambda M: M.nn.LSTM(3, 4, proj_size=2)(M.ones(5, 2, 3), (M.zeros(1, 2, 4),
                                                              M.zeros(1, 2, 4))), RuntimeError),
    (lambda M: M.nn.LSTM(3, 4, proj_size=2)(M.ones(5, 2, 3), (M.zeros(1, 2, 2),
                                                              M.zeros(1, 2, 2))), RuntimeError),
    (lambda M: M.nn.LSTM(3, 4, proj_size=-1), ValueError),
    (lambda M: M.nn.LSTM(3, 4, proj_size=4), ValueError),
    (lambda M: M.nn.GRU(3, 4, proj_size=2), ValueError),
    (lambda M: M.nn.RNN(3, 4, proj_size=2), ValueError),
    (lambda M: M.nn.LSTMCell(3, 4)(M.ones(2, 3), (M.zeros(2, 4), M.zeros(3, 4))),
     RuntimeError),
    (lambda M: M.nn.RNNCell(3, 4)(M.ones(2, 3), M.zeros(2, 5)), RuntimeError),
    (lambda M: M.nn.LSTMCell(3, 4)(M.ones(2, 3), (M.zeros(2, 4), M.zeros(2, 5))),
     RuntimeError),
], ids=["input size", "state batch", "state dims", "4-D input", "cell state size",
        "nonlinearity", "hidden size 0", "no layers", "dropout", "cell input size",
        "cell state batch", "lstm h size", "projected h size", "projected c size",
        "negative proj_size", "proj_size not smaller", "proj_size of a GRU",
        "proj_size of an RNN", "cell c batch", "cell h size", "cell c size"])
def test_errors_as_torch(program, kind, device):
    message = raises_as_torch(program, kind, device)
    try:
        program(torch)
    except kind as error:
        assert message == str(error)
