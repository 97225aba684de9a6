"""PyTorch's tutorial "Translation with a Sequence to Sequence Network and Attention"
(pytorch/tutorials, intermediate_source/seq2seq_translation_tutorial.py): its data preparation
(Lang, normalizeString, readLangs and filterPairs reading data/eng-fra.txt), EncoderRNN,
DecoderRNN and AttnDecoderRNN over nn.GRU, and its training (train, trainIters with SGD,
NLLLoss and teacher forcing drawn from Python's random) and evaluation, run unchanged on
minigrad and on PyTorch from the same few sentence pairs, Python random seed and initial
weights: the loss curves, outputs and translations agree."""
import random

import numpy as np
import pytest

import minigrad as mg
from tests.programs.loader import copy_weights, load
from tests.torch_ref import needs_torch, torch

pytestmark = needs_torch
ENG_FRA = """I am cold.\tJ'ai froid.
I am tired.\tJe suis fatigué.
He is tall.\tIl est grand.
She is happy.\tElle est heureuse.
We are late.\tNous sommes en retard.
You are kind.\tTu es gentil.
They are here.\tIls sont ici.
It is raining.\tIl pleut.
I am cold and very tired.\tJ'ai froid et je suis très fatigué.
"""
HIDDEN = 12


def program(lib, tmp_path, monkeypatch):
    """The tutorial's module, run in a folder with its data file; the losses it plots."""
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "eng-fra.txt").write_text(ENG_FRA, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    random.seed(0)
    plotted = []
    s2s = load("seq2seq_tutorial.py", lib, given=dict(showPlot=plotted.extend))
    return s2s, plotted


def models(s2s, lib):
    lib.manual_seed(0)
    encoder1 = s2s.EncoderRNN(s2s.input_lang.n_words, HIDDEN).to(s2s.device)
    attn_decoder1 = s2s.AttnDecoderRNN(HIDDEN, s2s.output_lang.n_words,
                                       dropout_p=0.0).to(s2s.device)
    return encoder1, attn_decoder1


def both(tmp_path, monkeypatch):
    (t_s2s, t_plot), (m_s2s, m_plot) = (program(torch, tmp_path, monkeypatch),
                                        program(mg, tmp_path, monkeypatch))
    t_models, m_models = models(t_s2s, torch), models(m_s2s, mg)
    for ours, theirs in zip(m_models, t_models):
        copy_weights(theirs, ours, mg, m_s2s.device)
    return (t_s2s, t_plot, t_models), (m_s2s, m_plot, m_models)


def test_data_preparation_matches(tmp_path, monkeypatch):
    (t_s2s, _, _), (m_s2s, _, _) = both(tmp_path, monkeypatch)
    assert m_s2s.pairs == t_s2s.pairs and len(m_s2s.pairs) == 8  # (one filtered out)
    assert m_s2s.pairs[1] == ["je suis fatigue .", "i am tired ."]
    assert m_s2s.input_lang.word2index == t_s2s.input_lang.word2index
    inputs, targets = m_s2s.tensorsFromPair(m_s2s.pairs[0])
    assert inputs.shape == (5, 1) and inputs.dtype == mg.long  # (4 words and EOS)
    assert targets.tolist() == [[i] for i in t_s2s.tensorsFromPair(t_s2s.pairs[0])[1].view(-1)
                                .tolist()]


def test_decoders_match(tmp_path, monkeypatch):
    (t_s2s, _, (t_enc, t_dec)), (m_s2s, _, (m_enc, m_dec)) = both(tmp_path, monkeypatch)
    outs = []
    for s2s, lib, enc, dec in ((t_s2s, torch, t_enc, t_dec), (m_s2s, mg, m_enc, m_dec)):
        hidden = enc.initHidden()
        for token in s2s.tensorFromSentence(s2s.input_lang, s2s.pairs[2][0]):
            output, hidden = enc(token, hidden)
        memory = lib.zeros(s2s.MAX_LENGTH, HIDDEN, device=s2s.device)
        memory[0] = output[0, 0]
        lib.manual_seed(0)
        simple = s2s.DecoderRNN(HIDDEN, s2s.output_lang.n_words).to(s2s.device)
        outs.append((hidden, dec(lib.tensor([[0]], device=s2s.device), hidden, memory), simple))
    copy_weights(outs[0][2], outs[1][2], mg, m_s2s.device)
    (t_hidden, t_out, t_simple), (m_hidden, m_out, m_simple) = outs
    np.testing.assert_allclose(m_hidden.detach().cpu().numpy(), t_hidden.detach().cpu().numpy(),
                               rtol=1e-5, atol=1e-6)
    for got, want in zip(m_out, t_out):
        np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(),
                                   rtol=1e-5, atol=1e-6)
    token = [[3]]
    got = m_simple(mg.tensor(token, device=m_s2s.device), m_hidden)[0]
    want = t_simple(torch.tensor(token), t_hidden)[0]
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_train_iters_matches(tmp_path, monkeypatch):
    """trainIters for 12 iterations (pairs and teacher forcing drawn from Python's random,
    seeded alike), its plotted loss every 2 iterations."""
    (t_s2s, t_plot, t_models), (m_s2s, m_plot, m_models) = both(tmp_path, monkeypatch)
    for s2s, (encoder1, attn_decoder1) in ((t_s2s, t_models), (m_s2s, m_models)):
        random.seed(1)
        s2s.trainIters(encoder1, attn_decoder1, 12, print_every=6, plot_every=2,
                       learning_rate=0.1)
    assert len(m_plot) == 6
    np.testing.assert_allclose(m_plot, t_plot, rtol=1e-5)
    assert t_plot[-1] < t_plot[0]
    for (name, w), ours in zip(t_models[1].state_dict().items(),
                               m_models[1].state_dict().values()):
        np.testing.assert_allclose(ours.cpu().numpy(), w.cpu().numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)


def test_evaluate_matches(tmp_path, monkeypatch):
    (t_s2s, _, t_models), (m_s2s, _, m_models) = both(tmp_path, monkeypatch)
    for sentence in (t_s2s.pairs[0][0], t_s2s.pairs[4][0]):
        t_words, t_att = t_s2s.evaluate(*t_models, sentence)
        m_words, m_att = m_s2s.evaluate(*m_models, sentence)
        assert m_words == t_words
        np.testing.assert_allclose(m_att.cpu().numpy(), t_att.cpu().numpy(), rtol=1e-5, atol=1e-6)
    random.seed(2)
    m_s2s.evaluateRandomly(*m_models, n=2)
