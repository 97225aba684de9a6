"""Bad input that the programs find when they run, not when they parse: a checkpoint that is
truncated, broken or of another model or schedule, a text file or tokenizer that cannot be
used, too little data, an output file with a folder in its place. Each stops the program
with one line, ``python -m minigrad.demos.<name>: error: <option>: ...`` (no traceback),
and leaves the saved files as they were; inputs that are merely small run to the end.

Most cases run ``main`` in-process (``fail`` raises SystemExit with the line); a few run
``python -m minigrad.demos.<name>`` in a subprocess to check what the shell sees."""
import io
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from minigrad import nn
from minigrad.demos import (_cli, attention_by_hand, caption, extrapolate, seq2seq, translate,
                            viz_neuron)
from minigrad.demos.checkpoint import META_KEY, read_training_meta
from minigrad.text import CharTokenizer
from tests.conftest import needs

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--d-model", "8", "--nhead", "2", "--layers", "1", "--ff", "8", "--batch-size", "2",
        "--eval-size", "2", "--examples", "0", "--no-progress"]
COPY = [*TINY, "--task", "copy"]


def one_line(info, name, start):
    """The message of ``fail`` (SystemExit): one line, ``python -m minigrad.demos.<name>:
    error: <start>...``; returns it."""
    message = str(info.value.code)
    assert "\n" not in message and "Traceback" not in message, message
    assert message.startswith(f"python -m minigrad.demos.{name}: error: {start}"), message
    return message


def fails(module, argv, start):
    """``module.main(argv)`` stops with one line that starts with ``start``; returns it."""
    with pytest.raises(SystemExit) as info:
        module.main(argv)
    return one_line(info, module.__name__.rsplit(".", 1)[1], start)


def contents(folder):
    """Every file under ``folder``, as {relative path: bytes}."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in Path(folder).rglob("*")
            if p.is_file()}


@pytest.fixture(scope="module")
def copy_run(tmp_path_factory):
    """The output folder of a 2-step seq2seq run on copy (its checkpoint at step 2)."""
    out = tmp_path_factory.mktemp("copy")
    seq2seq.main([*COPY, "--steps", "2", "--out", str(out)])
    return out


@pytest.fixture(scope="module")
def pairs_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("pairs") / "pairs.tsv"
    path.write_text("".join(f"{i} cat\t{i} dog\n" for i in range(200)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def text_run(tmp_path_factory, pairs_file):
    """The output folder of a 1-step seq2seq run on a pairs file (a character tokenizer)."""
    pytest.importorskip("sacrebleu")
    out = tmp_path_factory.mktemp("text")
    seq2seq.main([*TINY, "--data", str(pairs_file), "--tokenizer", "char", "--steps", "1",
                  "--out", str(out)])
    return out


# --- --resume: another model, another schedule, a finished run ----------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--nhead", "4"], "was trained with --nhead 2, not --nhead 4"),
    (["--positional", "rope"], "was trained with --positional sinusoidal, not --positional rope"),
    (["--schedule", "noam"], "was trained with --schedule cosine, not --schedule noam"),
    (["--positional", "learned"], "--positional sinusoidal, not --positional learned"),
    (["--steps", "1"], "is at step 2, past --steps 1"),
], ids=["nhead", "rope", "schedule", "learned", "steps"])
def test_resume_refuses_another_model_schedule_or_a_run_past_steps(tmp_path, copy_run, argv,
                                                                   message):
    """The weights would fit (the same shapes), but not the model, the schedule (which
    used to end in a traceback at the first step) or --steps: nothing is written."""
    out = tmp_path / "run"
    shutil.copytree(copy_run, out)
    before = contents(out)
    line = fails(seq2seq, [*COPY, "--steps", "3", *argv, "--out", str(out), "--resume"],
                 f"--resume: {out / seq2seq.CHECKPOINT} ")
    assert message in line
    assert contents(out) == before


def test_resume_with_the_same_options_continues(tmp_path, copy_run):
    out = tmp_path / "run"
    shutil.copytree(copy_run, out)
    metrics = seq2seq.main([*COPY, "--steps", "3", "--out", str(out), "--resume"])
    assert metrics["steps"] == 3


# --- broken checkpoints ------------------------------------------------------------------------

def _edit(change):
    """A function writing a copy of a checkpoint with its metadata changed by ``change``
    (the parsed JSON in, the text to store out)."""
    def write(source, path):
        tensors, metadata = nn.load(source, with_metadata=True)
        nn.save(tensors, path, metadata={META_KEY: change(json.loads(metadata[META_KEY]))})
    return write


def _without(*keys):
    def change(meta):
        inner = meta
        for key in keys[:-1]:
            inner = inner[key]
        del inner[keys[-1]]
        return json.dumps(meta)
    return change


def _setting(key, value):
    def change(meta):
        meta[key] = value
        return json.dumps(meta)
    return change


def _truncated(source, path):
    data = Path(source).read_bytes()
    Path(path).write_bytes(data[:len(data) - 50])


def _plain(source, path):
    nn.save(nn.load(source), path)


BROKEN = {
    "truncated": (_truncated, ": not a valid safetensors checkpoint"),
    "no metadata": (_plain, ": a safetensors file, but not a training checkpoint"),
    "not JSON": (_edit(lambda meta: "{oops"), ": its 'minigrad.training' metadata is not JSON"),
    "a list": (_edit(lambda meta: "[1, 2]"), "metadata is a list, not a JSON object"),
    "no optimizer": (_edit(_without("optimizer")), "metadata has no 'optimizer'"),
    "no extra": (_edit(_without("extra")), "metadata has no 'extra'"),
    "rng a string": (_edit(_setting("rng", "x")), ": 'rng' in its 'minigrad.training' metadata "
                     "is a str"),
    "rng of another kind": (_edit(_setting("rng", {"x": 1})),
                            ": the random generator's state does not fit"),
    "no param groups": (_edit(lambda meta: json.dumps(
        {**meta, "optimizer": {**meta["optimizer"], "param_groups": []}})),
        ": the optimiser's state does not fit"),
    "no run record": (_edit(_without("extra", "loss")), " is not a seq2seq checkpoint (no run "
                      "record"),
}


@pytest.mark.parametrize("kind", list(BROKEN))
def test_a_broken_checkpoint_is_one_line_naming_it(tmp_path, copy_run, kind):
    """Each of these was a traceback (KeyError, TypeError) or a line that did not name the
    file; the broken file is left as it is."""
    write, message = BROKEN[kind]
    path = tmp_path / "broken.safetensors"
    write(copy_run / seq2seq.CHECKPOINT, path)
    before = path.read_bytes()
    line = fails(seq2seq, [*COPY, "--steps", "3", "--out", str(tmp_path / "out"),
                           "--resume", str(path)], f"--resume: {path}")
    assert message in line
    assert path.read_bytes() == before


def test_read_training_meta_names_the_file_of_broken_metadata(tmp_path, copy_run):
    for kind in ("not JSON", "a list", "no optimizer", "no extra", "rng a string"):
        path = tmp_path / f"{kind}.safetensors"
        BROKEN[kind][0](copy_run / seq2seq.CHECKPOINT, path)
        with pytest.raises(ValueError, match=str(path)):
            read_training_meta(path)


def test_from_the_shell_a_broken_checkpoint_is_one_line(tmp_path, copy_run):
    path = tmp_path / "broken.safetensors"
    BROKEN["not JSON"][0](copy_run / seq2seq.CHECKPOINT, path)
    done = subprocess.run([sys.executable, "-m", "minigrad.demos.seq2seq", *COPY, "--steps",
                           "3", "--out", str(tmp_path / "out"), "--resume", str(path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert done.stderr.strip().splitlines() == [
        f"python -m minigrad.demos.seq2seq: error: --resume: {path}: its 'minigrad.training' "
        "metadata is not JSON (Expecting property name enclosed in double quotes: line 1 "
        "column 2 (char 1))"]


# --- text data and tokenizers ------------------------------------------------------------------

def test_too_few_dates_pairs_names_pairs(tmp_path):
    fails(seq2seq, [*TINY, "--task", "dates", "--pairs", "1", "--steps", "1",
                    "--out", str(tmp_path)], "--pairs: 1 dates pairs are too few to hold some out")


def test_a_vocabulary_of_special_tokens_only_is_refused(tmp_path, pairs_file):
    """--vocab-size 4 with the character tokenizer left every character unknown, silently."""
    fails(seq2seq, [*TINY, "--data", str(pairs_file), "--tokenizer", "char", "--vocab-size",
                    "4", "--steps", "1", "--out", str(tmp_path)],
          "--vocab-size: 4 leaves no room for a token beside the 4 special tokens")
    empty = tmp_path / "empty.json"
    CharTokenizer.train(["ab"], 4).save(empty)
    fails(seq2seq, [*TINY, "--data", str(pairs_file), "--tokenizer-file", str(empty),
                    "--steps", "1", "--out", str(tmp_path)],
          f"--tokenizer-file: {empty} has no token beside its 4 special tokens")


def test_a_tokenizer_file_that_is_not_utf8_is_named(tmp_path, pairs_file):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(b"\xff\xfe{}")
    fails(seq2seq, [*TINY, "--data", str(pairs_file), "--tokenizer-file", str(path),
                    "--steps", "1", "--out", str(tmp_path)],
          f"--tokenizer-file: {path}: not a tokenizer file (not UTF-8 text: invalid start "
          "byte at byte 0)")


# --- translate ---------------------------------------------------------------------------------

def test_translate_without_input_is_one_line(text_run, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n  \n"))
    fails(translate, ["--ckpt", str(text_run)],
          "texts: none given, and standard input has no line of text")


def test_translate_refuses_an_input_longer_than_the_positions(text_run, capsys):
    """A source longer than the positional table was a traceback from nn/positional.py."""
    line = fails(translate, ["--ckpt", str(text_run), "1 cat", "9 cat " * 20],
                 "texts: '9 cat 9 cat")
    assert "is 120 tokens, more than the model's 64 positions" in line
    assert capsys.readouterr().out == ""  # nothing printed for the inputs that fit


def test_translate_refuses_a_checkpoint_without_the_model_arguments(tmp_path, text_run):
    """A checkpoint whose saved arguments lack one was an AttributeError traceback."""
    path = tmp_path / "no_d_model.safetensors"

    def change(meta):
        del meta["extra"]["args"]["d_model"]
        return json.dumps(meta)
    _edit(change)(text_run / seq2seq.CHECKPOINT, path)
    line = fails(translate, ["--ckpt", str(path), "x"], f"--ckpt: {path} is not a seq2seq "
                 "checkpoint of a text task")
    assert "d_model" in line


# --- small sets run to the end -----------------------------------------------------------------

def test_extrapolate_with_an_empty_band_of_lengths(tmp_path):
    """--eval-size 1 leaves some bands of lengths without a sequence: a division by zero
    before, now "-" in the table and null in the JSON."""
    rows = extrapolate.main(["--positional", "t5", "--steps", "1", "--eval-size", "1",
                             "--out", str(tmp_path), "--no-progress"])
    empty = [key for key, value in rows[0].items() if value is None]
    assert empty and all(key.startswith("exact_") for key in empty)
    assert json.loads((tmp_path / "extrapolate.json").read_text())[0][empty[0]] is None
    assert "| - |" in (tmp_path / "extrapolate.md").read_text()


def test_extrapolate_refuses_a_scheme_given_twice(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        extrapolate.parse_args(["--positional", "t5", "rope", "t5", "--out", str(tmp_path)])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["python -m minigrad.demos.extrapolate: error: argument --positional: "
                   "t5 given twice (see -h)"]


def test_caption_with_one_held_out_picture_writes_valid_json(tmp_path):
    """With one held-out picture one of the two shape counts has no picture: it was NaN in
    metrics.json, with numpy's "Mean of empty slice" warnings on stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        metrics = caption.main(["--steps", "1", "--batch-size", "2", "--d-model", "4",
                                "--layers", "1", "--ff", "4", "--held-out", "1",
                                "--pictures", "1", "--no-progress", "--out", str(tmp_path)])
    assert not [w for w in caught if "empty slice" in str(w.message)
                or "invalid value" in str(w.message)]
    saved = json.loads((tmp_path / "metrics.json").read_text(),
                       parse_constant=lambda c: pytest.fail(f"{c} in metrics.json"))
    shares = (saved["exact_match_one_shape"], saved["exact_match_two_shapes"])
    assert None in shares and shares == (metrics["exact_match_one_shape"],
                                         metrics["exact_match_two_shapes"])


# --- an output file with a folder in its place -------------------------------------------------

def test_writing_to_names_a_file_under_out_it_cannot_write(tmp_path):
    (tmp_path / "metrics.json").mkdir()
    with pytest.raises(SystemExit) as info:
        with _cli.writing_to("gpt", tmp_path):
            open(tmp_path / "metrics.json", "w")
    one_line(info, "gpt", f"--out: cannot write {tmp_path / 'metrics.json'} (Is a directory)")
    with pytest.raises(FileNotFoundError):  # not under --out: not ours to explain
        with _cli.writing_to("gpt", tmp_path / "out"):
            open(tmp_path / "elsewhere" / "x")


# program -> the files that may be its first write (which one depends on Graphviz: the
# picture, its DOT text without dot, metrics.json without the graphviz package), and what
# the program needs
FIRST_WRITES = {
    "viz_neuron": (["neuron_forward.svg", "neuron_forward.dot"], ["graphviz"]),
    "attention_by_hand": (["attention_graph.dot", "metrics.json"], []),
}
IN_THE_WAY = pytest.mark.parametrize("name", sorted(FIRST_WRITES))


def _folders_in_the_way(out, name):
    files, what = FIRST_WRITES[name]
    needs(*what)
    for file in files:
        (out / file).mkdir(parents=True)
    return files


@IN_THE_WAY
def test_a_folder_in_place_of_an_output_file_is_one_line(tmp_path, name):
    """It was an IsADirectoryError traceback."""
    files = _folders_in_the_way(tmp_path, name)
    module = {"viz_neuron": viz_neuron, "attention_by_hand": attention_by_hand}[name]
    line = fails(module, ["--out", str(tmp_path)], f"--out: cannot write {tmp_path}")
    assert any(file in line for file in files) and line.endswith("(Is a directory)"), line


@IN_THE_WAY
def test_from_the_shell_a_folder_in_place_of_an_output_file_is_one_line(tmp_path, name):
    _folders_in_the_way(tmp_path, name)
    done = subprocess.run([sys.executable, "-m", f"minigrad.demos.{name}", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"python -m minigrad.demos.{name}: error: --out: cannot write {tmp_path}"), lines
