"""minigrad.demos.shapes and demos.caption: the pictures (seeded, inside the frame, disjoint shapes,
captions that a reader of the picture alone recovers), the vocabulary, the per-word
attention panels, and a short training run that has to learn."""
import json

import numpy as np
import pytest
from scipy import ndimage

import minigrad as mg
from minigrad.demos import caption as demo
from minigrad.demos import shapes
from minigrad.models import Captioner

from .closing import assert_closing_block


def read_scene(image):
    """The scene a picture shows, read from its pixels alone: each connected blob of bright
    pixels is a shape; its colour is the nearest of the palette; a triangle has about a
    quarter of its pixels in the top half of its bounding box (a circle or square half),
    and a square fills its box; its centre is the centre of that box."""
    blobs, n = ndimage.label(image.max(0) > 0.4)
    palette = {name: np.asarray(rgb) for name, rgb in shapes.COLOURS.items()}
    scene = []
    for k in range(1, n + 1):
        rows, cols = np.nonzero(blobs == k)
        mean = image[:, rows, cols].mean(1)
        colour = min(palette, key=lambda name: np.abs(palette[name] - mean).sum())
        height, width = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
        fill = len(rows) / (height * width)
        top = np.mean(rows + 0.5 < (rows.min() + rows.max() + 1) / 2)
        kind = "triangle" if top < 0.33 else "square" if fill > 0.95 else "circle"
        scene.append({"colour": colour, "shape": kind, "r": max(height, width) / 2,
                      "cx": (cols.min() + cols.max() + 1) / 2,
                      "cy": (rows.min() + rows.max() + 1) / 2})
    return scene


def test_the_picture_determines_the_caption():
    images, tokens, captions = shapes.batch(1000, np.random.default_rng(7))
    for image, text in zip(images, captions):
        assert " ".join(shapes.caption(read_scene(image))) == text


def test_seeded():
    first = shapes.batch(20, np.random.default_rng(3))
    second = shapes.batch(20, np.random.default_rng(3))
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert first[2] == second[2]
    assert first[2] != shapes.batch(20, np.random.default_rng(4))[2]


def test_batch_shapes_and_range():
    images, tokens, captions = shapes.batch(30, np.random.default_rng(0))
    assert images.shape == (30, 3, 32, 32) and images.dtype == np.float32
    assert tokens.shape == (30, shapes.MAX_WORDS + 2) and tokens.dtype == np.int64
    assert images.min() >= 0 and images.max() <= 1
    assert (tokens[:, 0] == shapes.BOS).all() and len(captions) == 30


def test_shapes_inside_and_apart():
    """Every shape lies whole inside the picture (drawn on a larger canvas it covers no more
    pixels), two shapes never touch, and pairs meet the separation rule."""
    rng = np.random.default_rng(1)
    counts = {1: 0, 2: 0}
    for _ in range(300):
        scene = shapes.sample_scene(rng)
        counts[len(scene)] += 1
        masks = []
        for s in scene:
            assert s["r"] <= s["cx"] <= shapes.SIZE - s["r"]
            assert s["r"] <= s["cy"] <= shapes.SIZE - s["r"]
            mask = shapes.shape_mask(s["shape"], s["cx"], s["cy"], s["r"])
            bigger = shapes.shape_mask(s["shape"], s["cx"] + 8, s["cy"] + 8, s["r"], size=48)
            assert 0 < mask.sum() == bigger.sum()
            masks.append(mask)
        if len(scene) == 2:
            grown = ndimage.binary_dilation(masks[0], np.ones((3, 3), bool))
            assert not (grown & masks[1]).any()  # not even diagonally adjacent
            assert shapes._well_separated(*scene)
    assert counts[1] > 50 and counts[2] > 150


@pytest.mark.parametrize("kind, area", [("circle", np.pi * 25), ("square", (1.7 * 5) ** 2),
                                        ("triangle", 50.0)])
def test_masks(kind, area):
    mask = shapes.shape_mask(kind, 16.0, 16.0, 5.0)
    assert abs(mask.sum() - area) < 0.15 * area
    rows, cols = np.nonzero(mask)
    assert rows.min() >= 11 and rows.max() <= 20 and cols.min() >= 11 and cols.max() <= 20


def test_render_colours():
    scene = [{"colour": "green", "shape": "square", "cx": 10.0, "cy": 10.0, "r": 5.0}]
    image = shapes.render(scene)  # no rng: no noise
    np.testing.assert_allclose(image[:, 10, 10], shapes.COLOURS["green"], atol=1e-6)
    assert image[:, 0, 0].sum() == 0


def test_vocabulary_round_trip():
    assert len(set(shapes.VOCAB)) == len(shapes.VOCAB)
    assert shapes.VOCAB[:3] == ("<pad>", "<s>", "</s>")
    words = "a white triangle left of a purple circle".split()
    ids = shapes.encode(words)
    assert len(ids) == shapes.MAX_WORDS + 2 and ids[0] == shapes.BOS
    assert ids[len(words) + 1] == shapes.EOS
    assert shapes.decode(ids) == " ".join(words)
    assert shapes.decode(ids[1:] + [shapes.VOCAB.index("red")]) == " ".join(words)  # EOS ends
    _, tokens, captions = shapes.batch(200, np.random.default_rng(2))
    assert [shapes.decode(t) for t in tokens] == captions
    assert max(len(c.split()) for c in captions) == shapes.MAX_WORDS


def test_one_attention_panel_per_generated_word(device):
    mg.manual_seed(0)
    model = Captioner(len(shapes.VOCAB), d_model=16, nhead=2, dim_feedforward=32).to(device)
    with mg.no_grad():
        model.generator.bias[shapes.EOS] = -30.0  # every caption runs to MAX_NEW words
        model.generator.bias[shapes.VOCAB.index("red")] = 5.0
    images, _, captions = shapes.batch(3, np.random.default_rng(0))
    panels = demo.word_attention(model, images, device)
    assert len(panels) == 3
    for row in panels:
        assert [word for word, _ in row] == ["red"] * demo.MAX_NEW
        for _, weights in row:
            assert weights.shape == (8, 8)
            np.testing.assert_allclose(weights.sum(), 1.0, atol=1e-5)
    panels[1] = panels[1][:3]  # rows of different lengths
    fig = demo.plot_caption_attention(images, panels, captions)
    drawn = [ax for ax in fig.axes if ax.images]
    assert len(drawn) == 3 * (1 + demo.MAX_NEW) - (demo.MAX_NEW - 3)
    assert [ax.get_title() for ax in drawn[1:1 + demo.MAX_NEW]] == ["red"] * demo.MAX_NEW


def test_short_run_learns(tmp_path, capsys, device):
    """A small model trained for 300 steps already captions most words right (a caption-blind
    guess gets about 40% of the tokens)."""
    metrics = demo.main(["--steps", "300", "--batch-size", "32", "--d-model", "32",
                         "--ff", "64", "--layers", "1", "--lr", "3e-3", "--held-out", "200",
                         "--out", str(tmp_path), "--no-progress", "--device", device])
    saved = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("exact_match", "token_accuracy", "steps", "train_seconds", "final_loss"):
        assert saved[key] == metrics[key]
    assert saved["token_accuracy"] > 0.65 and saved["final_loss"] < 0.6
    assert 0 <= saved["exact_match"] <= 1 and saved["steps"] == 300
    assert (tmp_path / "caption_attention.png").stat().st_size > 0
    assert (tmp_path / "curves.png").stat().st_size > 0
    printed = capsys.readouterr().out
    assert printed.startswith("results: exact-match captions")
    files = assert_closing_block(printed, tmp_path, ["metrics.json", "curves.png",
                                                     "caption_attention.png"])
    assert f"first {demo.QUICK_EVAL} held-out" in files["curves.png"]  # its subset
