"""mg.compile: a replayed step equals the eager step bit for bit, and every guard refuses
to replay a program that no longer fits (shapes, training mode, branches on values, NumPy
work outside the ops)."""
import re
import warnings

import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad import nn
from minigrad.autograd import graph
from minigrad.compile import CompileWarning
from minigrad.models import Transformer
from minigrad.models.bert import BERT
from minigrad.models.gpt import GPT


def capture_calls(step):
    """How many calls of a one-signature step ran eagerly to capture it: two, or three where
    the first made state the second found (the optimiser's moments; the parameters'
    gradient nodes, which the first backward makes on the CPU and moving the model to a
    GPU makes before the first call)."""
    return 2 + sum("the second call differs" in line for line in step.log)


def _mlp_setup(device, seed=0):
    mg.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.2), nn.LayerNorm(16),
                          nn.Linear(16, 4)).to(device)
    opt = mg.optim.Adam(model.parameters(), lr=1e-2)
    sched = mg.optim.lr_scheduler.LambdaLR(opt, lambda t: 1.0 / (1 + t))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        opt.step()
        sched.step()
        return loss
    return model, opt, step


def _batches(n, device, shape=(8, 6), classes=4):
    rng = np.random.default_rng(1)
    return [(mg.tensor(rng.standard_normal(shape).astype(np.float32), device=device),
             mg.tensor(rng.integers(0, classes, shape[0]), device=device)) for _ in range(n)]


def _train(setup, batches, compiled):
    model, opt, step = setup
    run = mg.compile(step) if compiled else step
    losses = [run(x, y).numpy().copy() for x, y in batches]
    return model, opt, run, losses


def _same_parameters(a, b):
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert np.array_equal(p.numpy(), q.numpy()), name
        assert np.array_equal(p.grad.numpy(), q.grad.numpy()), name


def test_replay_equals_eager_bit_for_bit_with_dropout_clipping_and_a_scheduler(device):
    batches = _batches(6, device)
    eager, eager_opt, _, eager_losses = _train(_mlp_setup(device), batches, False)
    after_eager = mg.rand(3).numpy()  # where the random stream stands after the run
    model, opt, step, losses = _train(_mlp_setup(device), batches, True)
    after_compiled = mg.rand(3).numpy()
    assert step.replays == len(batches) - capture_calls(step)
    for a, b in zip(eager_losses, losses):
        assert np.array_equal(a, b)
    _same_parameters(eager, model)
    assert opt.param_groups[0]["lr"] == eager_opt.param_groups[0]["lr"] < 1e-2 / 5
    assert np.array_equal(after_eager, after_compiled)  # the masks were drawn as in eager


def _check_model_step(device, make_model, loss_of, batch):
    results = []
    for compiled in (False, True):
        mg.manual_seed(0)
        model = make_model().to(device)
        opt = mg.optim.AdamW(model.parameters(), lr=1e-3)

        def step(*inputs):
            opt.zero_grad()
            loss = loss_of(model, *inputs)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss
        run = mg.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            losses = [run(*batch).numpy().copy() for _ in range(5)]
        results.append((model, losses))
    (eager, eager_losses), (model, losses) = results
    assert run.replays == 5 - capture_calls(run)
    assert all(np.array_equal(a, b) for a, b in zip(eager_losses, losses))
    _same_parameters(eager, model)


def test_transformer_step_replays_exactly(device):
    rng = np.random.default_rng(0)
    src, tgt = (mg.tensor(rng.integers(1, 20, (4, 7)), device=device) for _ in range(2))

    def loss_of(model, src, tgt):
        logits = model(src, tgt[:, :-1])
        return F.cross_entropy(logits.reshape(-1, 20), tgt[:, 1:].reshape(-1),
                               ignore_index=0, label_smoothing=0.1)
    _check_model_step(device, lambda: Transformer(20, 20, d_model=16, nhead=2,
                                                  num_encoder_layers=1, num_decoder_layers=1,
                                                  dim_feedforward=32, dropout=0.1,
                                                  max_len=16, pad_id=0), loss_of, (src, tgt))


def test_gpt_step_replays_exactly(device):
    idx = mg.tensor(np.random.default_rng(0).integers(0, 30, (3, 9)), device=device)

    def loss_of(model, idx):
        logits = model(idx[:, :-1])
        return F.cross_entropy(logits.reshape(-1, 30), idx[:, 1:].reshape(-1))
    _check_model_step(device, lambda: GPT(30, d_model=16, nhead=2, num_layers=2,
                                          dim_feedforward=32, dropout=0.1, max_len=16),
                      loss_of, (idx,))


def test_bert_step_replays_exactly(device):
    rng = np.random.default_rng(0)
    inputs = mg.tensor(rng.integers(2, 30, (3, 8)), device=device)
    labels = mg.tensor(np.where(rng.random((3, 8)) < 0.3, rng.integers(2, 30, (3, 8)), -100),
                       device=device)
    _check_model_step(device, lambda: BERT(30, d_model=16, nhead=2, num_layers=1,
                                           dim_feedforward=32, dropout=0.1, max_len=16),
                      lambda model, ids, labels: model.loss(ids, labels), (inputs, labels))


def test_replay_builds_no_graph_and_no_nodes(device):
    _, _, step = _mlp_setup(device)
    step = mg.compile(step)
    x, y = _batches(1, device)[0]
    for _ in range(3):
        step(x, y)
    before = next(graph.SEQUENCE)
    loss = step(x, y)
    assert next(graph.SEQUENCE) == before + 1  # no node was recorded in between
    assert loss.grad_fn is None and step.replays == 4 - capture_calls(step)


def test_new_shapes_capture_a_new_program_and_say_so(device):
    _, _, step = _mlp_setup(device)
    step = mg.compile(step)
    for x, y in _batches(3, device) + _batches(3, device, shape=(5, 6)):
        step(x, y)
    assert any("new inputs" in line and "(5, 6)" in line for line in step.log)
    assert len(step.entries) == 2


def test_training_mode_change_captures_again(device):
    model, _, step = _mlp_setup(device)
    step = mg.compile(step)
    batches = _batches(5, device)
    for x, y in batches[:3]:
        step(x, y)
    model.eval()
    step(*batches[3])
    assert any("training mode" in line for line in step.log)
    assert step.replays == 3 - capture_calls(step)
    mg.manual_seed(0)
    eager_model, _, eager_step = _mlp_setup(device)
    for x, y in batches[:3]:
        eager_step(x, y)
    eager_model.eval()
    eager_step(*batches[3])
    for p, q in zip(model.parameters(), eager_model.parameters()):
        assert np.array_equal(p.numpy(), q.numpy())


def test_a_branch_on_a_value_falls_back_to_eager_with_a_reason(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        y = (w * x).sum()
        if y.item() > 0:  # a Python branch on a value: not capturable
            y = y * 2
        return y
    step = mg.compile(step)
    xs = [1.0, -1.0, 1.0, -1.0, 1.0]
    with pytest.warns(CompileWarning, match="Python branch"):
        out = [step(mg.tensor([v, v], device=device)).item() for v in xs]
    assert out == [6.0, -3.0, 6.0, -3.0, 6.0]
    assert step.replays == 0


def test_numpy_work_outside_the_ops_is_refused(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        noise = mg.tensor(np.random.standard_normal(2).astype(np.float32), device=device)
        return (w * x + noise).sum()
    step = mg.compile(step)
    with pytest.warns(CompileWarning, match="not computed by minigrad's ops"):
        for _ in range(4):
            step(mg.tensor([1.0, 1.0], device=device))
    assert step.replays == 0


def test_an_array_changed_in_place_behind_the_ops_back_is_refused(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)

    def step(x):
        y = w * x
        y.array *= 2  # raw array work the recorder cannot see
        return y.sum()
    step = mg.compile(step)
    with pytest.warns(CompileWarning, match="changed in place"):
        out = [step(mg.tensor([1.0, 1.0], device=device)).item() for _ in range(4)]
    assert out == [6.0] * 4


def test_returning_a_python_number_is_refused(device):
    w = mg.tensor([1.0, 2.0], requires_grad=True, device=device)
    step = mg.compile(lambda x, scale: ((w * x).sum(), scale * 2))
    with pytest.warns(CompileWarning, match="returns a float"):
        out = [step(mg.tensor([1.0, float(i)], device=device), 0.5) for i in range(3)]
    assert [(loss.item(), scale) for loss, scale in out] == [(1.0, 1.0), (3.0, 1.0), (5.0, 1.0)]


def test_listing_shows_ops_buffers_and_memory(device):
    _, _, step = _mlp_setup(device)
    step = mg.compile(step)
    for x, y in _batches(3, device):
        step(x, y)
    text = step.listing()
    for word in ("Linear", "layer_norm_backward", "dropout", "set_grad", "step_size=s[",
                 "clip_grad_norm_", "(8, 16)", "[random]", "dead-code elimination removed",
                 "without reuse"):
        assert word in text
    assert re.search(r"array +adam_(flat|param) ", text)  # (the group's at once on the CPU)
    assert re.search(r"arrays made: [\d.]+ (B|KiB|MiB) ", text)  # a unit that fits the size
    peak, total = step.program.memory()
    assert 0 < peak <= total
    assert "digraph" in step.to_dot() and "Linear" in step.to_dot()
    assert "def replay(inputs, tensors):" in step.program.source


def test_dead_code_is_removed(device):
    w = mg.tensor([1.0, 2.0], device=device)  # (a result that needs grad is not replayed)

    def step(x):
        unused = (w * x).exp()  # nothing reads it: removed from the replay
        del unused
        return (w * x).sum()
    step = mg.compile(step)
    out = [step(mg.tensor([1.0, float(i)], device=device)).item() for i in range(4)]
    assert out == [1.0, 3.0, 5.0, 7.0]
    assert step.program.removed == 2 and "REMOVED" in step.listing()  # the product and exp


def test_ops_that_read_their_class_attributes_replay_and_counts_come_back_as_tensors(device):
    """argmax and min over a dim share one forward that reads the op class's attribute;
    a step may return counts (bool sums) for the caller to read after it."""
    results = []
    for compiled in (False, True):
        mg.manual_seed(0)
        model = nn.Linear(6, 4).to(device)
        opt = mg.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            logits = model(x)
            loss = F.cross_entropy(logits, y, ignore_index=0) + logits.min(-1).values.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            real = y != 0
            return loss, ((logits.argmax(-1) == y) & real).sum(), real.sum()
        run = mg.compile(step) if compiled else step
        with warnings.catch_warnings():
            warnings.simplefilter("error", CompileWarning)
            results.append([[t.item() for t in run(x, y)] for x, y in _batches(6, device)])
    assert run.replays == 4
    assert results[0] == results[1]
