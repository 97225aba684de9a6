"""models.inspect: collect_attention returns every layer and head's weights, the ones the
layers compute themselves (checked by calling each attention directly on the inputs it
saw), with the right shapes, rows summing to 1, causal and padding zeros; the model is left
as it was; plot_attention draws one labelled heat map per layer and head."""
import numpy as np
import pytest

import minigrad as mg
from minigrad.models import Transformer
from minigrad.models.inspect import KINDS, attention_modules, collect_attention, plot_attention

PAD, BOS = 0, 1
H = 2


def model_and_batch(device, **kw):
    mg.manual_seed(0)
    model = Transformer(9, 8, d_model=16, nhead=H, num_encoder_layers=2, num_decoder_layers=3,
                        dim_feedforward=32, dropout=0.1, **kw).to(device)
    src = mg.tensor([[3, 4, 5, 6, 7], [8, 3, 4, PAD, PAD]], device=device)
    tgt = mg.tensor([[BOS, 3, 4, 5], [BOS, 6, PAD, PAD]], device=device)
    return model, src, tgt


ARCHS = [dict(norm_first=True), dict(norm_first=False), dict(positional="rope"),
         dict(norm_first=True, residual="mhc")]


@pytest.mark.parametrize("kw", ARCHS, ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_shapes_rows_and_masks(device, kw):
    model, src, tgt = model_and_batch(device, **kw)
    maps = collect_attention(model, src, tgt)
    assert sorted(maps) == sorted(KINDS)
    assert [len(maps[k]) for k in KINDS] == [2, 3, 3]
    shapes = {"encoder_self": (2, H, 5, 5), "decoder_self": (2, H, 4, 4), "cross": (2, H, 4, 5)}
    for kind in KINDS:
        for w in maps[kind]:
            assert isinstance(w, np.ndarray) and w.shape == shapes[kind]
            np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)
    for w in maps["decoder_self"]:  # causal, and the padded target keys of row 1
        assert (np.triu(w, k=1) == 0).all()
        assert (w[1, :, :, 2:] == 0).all()
    for w in maps["encoder_self"] + maps["cross"]:  # the padded source keys of row 1
        assert (w[1, :, :, 3:] == 0).all()


def test_same_weights_as_calling_the_layers_directly(device):
    """Each attention, called by hand on the inputs it received (seen by a forward hook)
    with the model's masks, gives exactly the weights collect_attention returned."""
    model, src, tgt = model_and_batch(device)
    seen, handles = {}, []
    for kind, i, attn in attention_modules(model):
        def hook(module, args, output, key=(kind, i)):
            seen[key] = args
        handles.append(attn.register_forward_hook(hook))
    maps = collect_attention(model, src, tgt)
    for handle in handles:
        handle.remove()
    masks = {"encoder_self": dict(key_padding_mask=src == PAD),
             "decoder_self": dict(key_padding_mask=tgt == PAD, is_causal=True),
             "cross": dict(key_padding_mask=src == PAD)}
    model.eval()
    with mg.no_grad():
        for kind, i, attn in attention_modules(model):
            _, direct = attn(*seen[kind, i], need_weights=True, average_attn_weights=False,
                             **masks[kind])
            np.testing.assert_array_equal(maps[kind][i], direct.numpy(), err_msg=f"{kind} {i}")


def test_the_model_is_left_as_it_was(device):
    model, src, tgt = model_and_batch(device)
    model.eval()
    with mg.no_grad():
        before = model(src, tgt).numpy()
    model.train()
    collect_attention(model, src, tgt)
    assert model.training
    assert all("forward" not in attn.__dict__ for _, _, attn in attention_modules(model))
    model.eval()
    with mg.no_grad():
        np.testing.assert_array_equal(model(src, tgt).numpy(), before)


def test_callers_still_get_what_they_asked_for(device):
    """While recording, an attention called with need_weights / averaging gets them."""
    model, src, tgt = model_and_batch(device)
    attn = model.encoder.layers[0].self_attn
    x = mg.randn(2, 5, 16, device=device)
    model.eval()
    _, averaged = attn(x, x, x)
    from minigrad.models.inspect import _recording
    store = [None]
    with _recording(attn, store, 0):
        out, again = attn(x, x, x)
        _, none = attn(x, x, x, need_weights=False)
    np.testing.assert_array_equal(again.numpy(), averaged.numpy())
    assert none is None and store[0].shape == (2, H, 5, 5)


def test_plot_attention_draws_a_labelled_grid(tmp_path, device):
    model, src, tgt = model_and_batch(device)
    maps = collect_attention(model, src, tgt)
    src_tokens, tgt_tokens = ["3", "4", "5", "6", "7"], ["<s>", "3", "4", "5"]
    fig = plot_attention(maps, src_tokens, tgt_tokens, tmp_path / "attention.png")
    assert (tmp_path / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == (2 + 3 + 3) * H
    cross = [ax for ax in panels if ax.get_title().startswith("cross-attention, layer 0")][0]
    assert (cross.get_ylabel(), cross.get_xlabel()) == ("query: decoder input",
                                                        "key: source position")
    encoder = [ax for ax in panels if ax.get_title().startswith("encoder self-attention")][0]
    assert (encoder.get_ylabel(), encoder.get_xlabel()) == ("query: source position",
                                                            "key: source position")
    assert [t.get_text() for t in cross.get_xticklabels()] == src_tokens
    assert [t.get_text() for t in cross.get_yticklabels()] == tgt_tokens
    # example 1 is cropped to its own (shorter) tokens
    fig = plot_attention(maps, ["8", "3", "4"], ["<s>", "6"], None, index=1, kinds=["cross"])
    image = [ax for ax in fig.axes if ax.get_images()][0].get_images()[0]
    assert image.get_array().shape == (2, 3)
