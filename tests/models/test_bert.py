"""models.BERT: shapes, bidirectional attention, padding, the tied masked-language-model head,
BERT's 80/10/10 masking (its proportions on a large seeded batch and its labels), and a tiny
model that learns to fill in a masked token."""
import numpy as np
import pytest

import minigrad as mg
import minigrad.nn.functional as F
from minigrad.models.bert import BERT, mask_tokens

PAD, MASK, V = 0, 1, 12
SPECIAL = (PAD, MASK)


def tiny(device, dtype=mg.float64, **kw):
    mg.manual_seed(0)
    args = dict(d_model=16, nhead=2, num_layers=2, dim_feedforward=32, max_len=16)
    model = BERT(V, **{**args, **kw}).to(device)
    return (model.double() if dtype == mg.float64 else model).eval()


def ids(rows, device):
    return mg.tensor(np.array(rows), dtype=mg.int64, device=device)


IDX = [[3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 10, 8, 2, 8, 11, 8]]


@pytest.mark.parametrize("norm_first", [False, True])
def test_shapes_and_structure(norm_first, device):
    model = tiny(device, mg.float32, norm_first=norm_first)
    logits = model(ids(IDX, device))
    assert logits.shape == (2, 8, V) and logits.dtype == mg.float32
    assert model.decoder.weight is model.tok_emb.weight                      # tied
    names = dict(model.named_parameters())
    for name in ("encoder.layers.1.self_attn.q_proj.weight", "head_dense.weight",
                 "head_norm.weight", "decoder.bias", "emb_norm.weight", "pos_emb.weight"):
        assert name in names
    assert (model.encoder.norm is not None) == norm_first
    np.testing.assert_array_equal(model.tok_emb.weight.numpy()[PAD], 0.0)


@pytest.mark.parametrize("norm_first", [False, True])
def test_bidirectional(norm_first, device):
    """Changing the token at position t changes the logits at every position, before and
    after t."""
    model = tiny(device, norm_first=norm_first)
    x = np.array(IDX)
    base = model(ids(x, device)).numpy()
    for t in (0, 4, 7):
        changed = x.copy()
        changed[:, t] = changed[:, t] % (V - 2) + 2
        diff = np.abs(model(ids(changed, device)).numpy() - base).max(-1)    # (B, T)
        assert (diff > 1e-6).all(), diff


def test_padding_is_not_attended(device):
    """Whatever stands at a padded position, the other positions' logits do not change."""
    model = tiny(device)
    x = np.array(IDX)
    x[1, 6:] = PAD
    base = model(ids(x, device)).numpy()
    mask = ids(x, device) == PAD
    other = x.copy()
    other[1, 6:] = [5, 7]
    out = model(ids(other, device), key_padding_mask=mask).numpy()
    np.testing.assert_allclose(out[:, :6], base[:, :6], atol=1e-12)
    np.testing.assert_allclose(out[0], base[0], atol=1e-12)


def test_masking_scheme_proportions_and_labels(device):
    """On 200 000 seeded tokens: 15% of the non-special tokens are chosen; of those 80%
    become [MASK], 10% a random non-special token and 10% stay; special tokens are never
    chosen; labels hold the original token exactly where chosen and -100 elsewhere."""
    rng = np.random.default_rng(0)
    x = rng.integers(2, V, size=(1000, 200))
    x[:, 150:] = PAD                                                         # padding
    x[:, 0] = MASK                                        # a special token inside the text
    mg.manual_seed(0)
    inputs, labels = mask_tokens(ids(x, device), MASK, V, special_ids=SPECIAL, p=0.15)
    assert inputs.dtype == labels.dtype == mg.int64 and inputs.shape == labels.shape == x.shape
    inputs, labels = inputs.numpy(), labels.numpy()
    chosen = labels != -100
    special = np.isin(x, SPECIAL)
    assert not (chosen & special).any()
    np.testing.assert_array_equal(labels[chosen], x[chosen])
    np.testing.assert_array_equal(inputs[~chosen], x[~chosen])               # untouched
    n_ordinary = V - len(SPECIAL)
    frac = chosen.sum() / (~special).sum()
    masked = (inputs[chosen] == MASK).mean()
    kept = (inputs[chosen] == x[chosen]).mean()  # includes a random draw of the same token
    randomised = ((inputs[chosen] != MASK) & (inputs[chosen] != x[chosen])).mean()
    # a few standard deviations of each estimate (n = 149 000 and about 22 000)
    assert frac == pytest.approx(0.15, abs=0.003)
    assert masked == pytest.approx(0.8, abs=0.01)
    assert kept == pytest.approx(0.1 + 0.1 / n_ordinary, abs=0.006)
    assert randomised == pytest.approx(0.1 * (1 - 1 / n_ordinary), abs=0.006)
    assert not np.isin(inputs[chosen & (inputs != MASK)], SPECIAL).any()   # random: ordinary
    mg.manual_seed(0)
    again = mask_tokens(ids(x, device), MASK, V, special_ids=SPECIAL, p=0.15)
    np.testing.assert_array_equal(again[0].numpy(), inputs)                  # seeded
    np.testing.assert_array_equal(again[1].numpy(), labels)


def test_loss_counts_only_the_chosen_positions(device):
    model = tiny(device)
    x = ids(IDX, device)
    labels = np.full((2, 8), -100)
    labels[0, 2], labels[1, 5] = 4, 8
    loss = model.loss(x, ids(labels, device)).item()
    logp = F.log_softmax(model(x), -1).numpy()
    assert loss == pytest.approx(-(logp[0, 2, 4] + logp[1, 5, 8]) / 2, abs=1e-10)


def test_tiny_bert_fills_in_a_masked_token(device):
    """Sequences count up (mod 10): a masked token is the one between its neighbours. Trained
    with mask_tokens, a tiny model fills in a single [MASK] at any position every time."""
    mg.manual_seed(0)
    rng = np.random.default_rng(0)
    T = 12
    model = BERT(V, d_model=32, nhead=2, num_layers=2, dim_feedforward=64, max_len=T,
                 pad_id=PAD, mask_id=MASK).to(device)
    opt = mg.optim.Adam(model.parameters(), lr=3e-3)

    def batch(n):
        return (rng.integers(0, 10, size=(n, 1)) + np.arange(T)) % 10 + 2

    accuracy = 0.0
    for step in range(600):
        inputs, labels = mask_tokens(ids(batch(32), device), MASK, V, SPECIAL)
        loss = model.loss(inputs, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 25 == 24:
            x, rows = batch(256), np.arange(256)
            where = rng.integers(0, T, size=256)
            masked = x.copy()
            masked[rows, where] = MASK
            with mg.no_grad():
                pred = model(ids(masked, device)).argmax(-1).numpy()[rows, where]
            accuracy = (pred == x[rows, where]).mean()
            if accuracy == 1.0:
                break
    assert accuracy == 1.0, f"accuracy {accuracy} after {step + 1} steps"
