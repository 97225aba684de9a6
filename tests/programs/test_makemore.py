"""makemore (github.com/karpathy/makemore): its ``makemore.py`` models (Bigram, MLP, RNN and
GRU cells, the causal bag of words, the Transformer), CharDataset, generate and evaluate, run
unchanged on minigrad from the same weights and words as on PyTorch, and a few steps of its
training loop (AdamW, ``zero_grad(set_to_none=True)``) with the same batches: the logits,
gradients, losses and generated words agree."""
import types

import numpy as np
import pytest

import minigrad as mg
from tests.programs.loader import copy_weights, load
from tests.torch_ref import needs_torch, torch

pytestmark = needs_torch
WORDS = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "harper", "evelyn",
         "abigail", "ella", "luna"]
KINDS = ["bigram", "mlp", "rnn", "gru", "bow", "transformer"]


def dataset(mm):
    chars = sorted(list(set(''.join(WORDS))))
    return mm.CharDataset(WORDS, chars, max(len(w) for w in WORDS))


def build(mm, kind, data):
    """As makemore's main builds its model (sizes shrunk)."""
    config = mm.ModelConfig(vocab_size=data.get_vocab_size(),
                            block_size=data.get_output_length(),
                            n_layer=2, n_head=2, n_embd=8, n_embd2=12)
    if kind == 'transformer':
        return mm.Transformer(config)
    elif kind == 'bigram':
        return mm.Bigram(config)
    elif kind == 'mlp':
        return mm.MLP(config)
    elif kind == 'rnn':
        return mm.RNN(config, cell_type='rnn')
    elif kind == 'gru':
        return mm.RNN(config, cell_type='gru')
    elif kind == 'bow':
        return mm.BoW(config)


def pair(kind, device, dtype="float32"):
    out = []
    for lib in (torch, mg):
        mm = load("makemore.py", lib)
        mm.args = types.SimpleNamespace(device="cpu" if lib is torch else device)  # (main's)
        lib.manual_seed(0)
        model = build(mm, kind, dataset(mm))
        if kind == "bigram":  # (its logits start at zero: give them values)
            with lib.no_grad():
                model.logits.copy_(lib.tensor(np.random.RandomState(0).randn(
                    *model.logits.shape).astype(np.float32)))
        out.append((mm, model.double() if dtype == "float64" else model))
    copy_weights(out[0][1], out[1][1], mg, device)
    out[1][1].to(device)
    return out


def whole_set(lib, mm, device):
    data = dataset(mm)
    x, y = zip(*(data[i] for i in range(len(data))))
    return lib.stack(x).to(device), lib.stack(y).to(device)


@pytest.mark.parametrize("kind", KINDS)
def test_logits_loss_and_gradients_match(kind, device):
    (t_mm, ref), (m_mm, net) = pair(kind, device)
    (tl, tloss), (ml, mloss) = (ref(*whole_set(torch, t_mm, "cpu")),
                                net(*whole_set(mg, m_mm, device)))
    np.testing.assert_allclose(ml.detach().numpy(), tl.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(mloss.item(), tloss.item(), rtol=1e-6)
    tloss.backward()
    mloss.backward()
    grads = dict(net.named_parameters())
    for name, p in ref.named_parameters():
        np.testing.assert_allclose(grads[name].grad.numpy(), p.grad.numpy(), rtol=1e-4,
                                   atol=1e-6, err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
def test_training_evaluate_and_generate_match(kind, device):
    """main's loop for a few steps, its batches in a fixed order (its InfiniteDataLoader
    draws them at random); then evaluate over the whole set as one batch, and greedy
    generation from <START>."""
    # (the bag of words makes float32 weights itself: float64 fails in PyTorch too)
    dtype, rtol = ("float32", 1e-5) if kind == "bow" else ("float64", 1e-10)
    losses, evaluated, words = {}, {}, {}
    for (mm, model), lib, dev in zip(pair(kind, device, dtype), (torch, mg),
                                     ("cpu", device)):
        optimizer = lib.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01,
                                    betas=(0.9, 0.99), eps=1e-8)
        X_all, Y_all = whole_set(lib, mm, dev)
        seen = losses[lib.__name__] = []
        for step in range(4):
            X, Y = X_all[step * 3:step * 3 + 3], Y_all[step * 3:step * 3 + 3]
            logits, loss = model(X, Y)
            model.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            seen.append(loss.item())
        data = dataset(mm)
        evaluated[lib.__name__] = mm.evaluate(model, data, batch_size=len(data))
        X_init = lib.zeros(3, 1, dtype=lib.long).to(dev)
        X_samp = mm.generate(model, X_init, 6, top_k=None, do_sample=False).to('cpu')
        words[lib.__name__] = [data.decode([i for i in row if i != 0]) for row in
                               X_samp[:, 1:].tolist()]
    np.testing.assert_allclose(losses["minigrad"], losses["torch"], rtol=rtol)
    np.testing.assert_allclose(evaluated["minigrad"], evaluated["torch"], rtol=rtol)
    assert words["minigrad"] == words["torch"]


def test_bag_of_words_in_float64_fails_as_in_pytorch():
    for (mm, model), lib in zip(pair("bow", "cpu", "float64"), (torch, mg)):
        with pytest.raises(RuntimeError):
            model(*whole_set(lib, mm, "cpu"))


def test_char_dataset_and_create_datasets_split(tmp_path):
    (t_mm, _), (m_mm, _) = pair("bigram", "cpu")
    t_data, m_data = dataset(t_mm), dataset(m_mm)
    assert m_data.get_vocab_size() == t_data.get_vocab_size()
    for i in range(len(WORDS)):
        for a, b in zip(m_data[i], t_data[i]):
            assert a.tolist() == b.tolist() and a.dtype == mg.long
    assert m_data.decode(m_data.encode("mia").tolist()) == "mia"
    names = tmp_path / "names.txt"
    names.write_text("\n".join(WORDS * 2) + "\n\n")
    mg.manual_seed(0)
    train, test = m_mm.create_datasets(str(names))
    assert len(train) + len(test) == 2 * len(WORDS) and len(test) == 2
    assert sorted(train.words + test.words) == sorted(WORDS * 2)
    loader = m_mm.InfiniteDataLoader(train, batch_size=5, pin_memory=True, num_workers=0)
    for _ in range(5):  # (past the end of the data set: its sampler draws 1e10 indices)
        X, Y = loader.next()
        assert X.shape == Y.shape == (5, train.get_output_length()) and X.dtype == mg.long
