"""The seq2seq program on text: --data pairs.tsv end to end (tokenizer saved with the
checkpoint, BLEU and chrF in metrics.json, --resume, the translate program), bad files
refused in one line, the dates task's pairs, the extrapolation program."""
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minigrad.demos import extrapolate, seq2seq, translate
from minigrad.demos.checkpoint import read_training_meta
from minigrad.demos.tasks import DATE_FORMS, MONTHS, SHORT_YEAR_FORMS, date_pairs
from minigrad.text import load_tokenizer, read_pairs, split_pairs

pytest.importorskip("sacrebleu")

TINY = ["--d-model", "16", "--nhead", "2", "--layers", "1", "--ff", "32", "--batch-size", "8",
        "--eval-size", "20", "--examples", "2", "--no-progress"]


pytestmark = pytest.mark.filterwarnings("ignore:Glyph .* missing from font")


@pytest.fixture
def pairs_file(tmp_path):
    path = tmp_path / "pairs.tsv"
    rng = np.random.default_rng(0)
    words = ["cat", "dog", "bird", "naïve", "café", "日本", "🙂"]
    lines = []
    for _ in range(300):
        src = " ".join(rng.choice(words, rng.integers(1, 5)))
        lines.append(f"{src}\t{src.upper()}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_a_users_tsv_trains_resumes_and_translates(tmp_path, pairs_file, device, capsys):
    out = tmp_path / "run"
    metrics = seq2seq.main([*TINY, "--data", str(pairs_file), "--steps", "4", "--eval-every",
                            "2", "--out", str(out), "--device", device, "--vocab-size", "300"])
    for key in ("eval_exact_match", "eval_token_accuracy", "eval_bleu", "eval_chrf"):
        assert key in metrics
    assert 0 <= metrics["eval_bleu"] <= 100 and 0 <= metrics["eval_chrf"] <= 100
    assert metrics["tokenizer"] == {"kind": "byte-bpe", "vocab_size": 300}
    assert metrics["eval_history"][0]["step"] == 2 and "bleu" in metrics["eval_history"][0]
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["eval_bleu"] == metrics["eval_bleu"]
    tokenizer = load_tokenizer(out / "tokenizer.json")
    meta = read_training_meta(out / "checkpoint.safetensors")
    assert meta["extra"]["tokenizer"] == tokenizer.to_dict()
    train, _ = split_pairs(read_pairs(pairs_file))
    assert tokenizer.vocab_size == 300
    assert all(tokenizer.decode(tokenizer.encode(s)) == s for pair in train for s in pair)
    # --resume continues with the checkpoint's tokenizer
    resumed = seq2seq.main([*TINY, "--data", str(pairs_file), "--steps", "6", "--out", str(out),
                            "--device", device, "--vocab-size", "300", "--resume"])
    assert resumed["steps"] == 6
    capsys.readouterr()
    outputs = translate.main(["--ckpt", str(out), "--device", device, "cat dog", "café 🙂"])
    assert len(outputs) == 2 and all(isinstance(o, str) for o in outputs)
    assert capsys.readouterr().out.splitlines()[0].startswith("cat dog\t")


@pytest.mark.parametrize("content, message", [
    ("", r"--data: .*bad\.tsv is empty"),
    ("a b\nc d\n", r"--data: .*bad\.tsv has no tab on any line"),
    ("a\tb\nc\td\nnot a pair\n",
     r"--data: .*bad\.tsv, line 3: expected 'source<TAB>target', found no tab"),
])
def test_bad_files_stop_with_one_line(tmp_path, content, message):
    path = tmp_path / "bad.tsv"
    path.write_text(content)
    with pytest.raises(SystemExit) as e:
        seq2seq.main([*TINY, "--data", str(path), "--steps", "1", "--out", str(tmp_path / "o")])
    text = str(e.value.code)
    assert re.search(message, text) and "\n" not in text


def test_a_bad_file_gives_no_traceback_on_the_command_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("a\tb\nno tab\n")
    proc = subprocess.run([sys.executable, "-m", "minigrad.demos.seq2seq", "--data", str(path),
                           "--out", str(tmp_path / "o")], capture_output=True, text=True,
                          cwd=str(Path(__file__).resolve().parents[2]), timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines() == [
        f"python -m minigrad.demos.seq2seq: error: --data: {path}, line 2: expected "
        "'source<TAB>target', found no tab: 'no tab'"]


def test_option_conflicts(tmp_path, pairs_file):
    for argv, message in ((["--data", str(pairs_file), "--task", "copy"], "not both"),
                          (["--task", "copy", "--vocab-size", "300"], "only for --task dates")):
        with pytest.raises(SystemExit):
            seq2seq.parse_args([*argv, "--out", str(tmp_path / "o")])


def test_translate_refuses_a_symbol_task_checkpoint(tmp_path):
    out = tmp_path / "copy"
    seq2seq.main([*TINY, "--task", "copy", "--steps", "1", "--out", str(out)])
    with pytest.raises(SystemExit, match="holds no tokenizer"):
        translate.main(["--ckpt", str(out), "x"])


def test_dates_pairs_are_correct():
    months = {name.lower(): i + 1 for names in MONTHS.values() for i, name in enumerate(names)}
    months.update({name[:3].lower(): i + 1 for i, name in enumerate(MONTHS["en"])})
    pairs = date_pairs(0, 2000)
    assert pairs == date_pairs(0, 2000) and pairs != date_pairs(1, 2000)
    for src, tgt in pairs:
        date = datetime.date.fromisoformat(tgt)
        numbers = [int(n) for n in re.findall(r"\d+", src.replace("1er", "1"))]
        named = [months[w] for w in re.findall(r"[^\W\d_]+", src.lower()) if w in months]
        if named:  # day, month by name, year
            assert named == [date.month] and numbers == [date.day, date.year]
        elif numbers[0] > 999:
            assert numbers == [date.year, date.month, date.day]
        else:
            year = numbers[2] if numbers[2] > 99 else 1900 + numbers[2] + 100 * (numbers[2] < 50)
            assert [numbers[0], numbers[1], year] == [date.day, date.month, date.year]
    assert len({src for src, _ in pairs}) > 1900
    assert len(DATE_FORMS) + len(SHORT_YEAR_FORMS) == 18


def test_dates_task_runs_through_the_pairs_file(tmp_path):
    out = tmp_path / "dates"
    metrics = seq2seq.main([*TINY, "--task", "dates", "--pairs", "400", "--steps", "2",
                            "--out", str(out)])
    assert len(read_pairs(out / "dates.tsv")) == 400
    assert metrics["data"] == str(out / "dates.tsv") and "eval_chrf" in metrics
    assert (out / "attention.png").exists()


def test_extrapolate_runs(tmp_path):
    rows = extrapolate.main(["--positional", "t5", "--steps", "2", "--eval-size", "4",
                             "--out", str(tmp_path), "--no-progress"])
    assert [r["positional"] for r in rows] == ["t5"]
    assert "exact_17_20" in rows[0] and (tmp_path / "extrapolate.md").exists()


@pytest.mark.parametrize("task", ["data", "dates", "copy", "reverse", "sort", "add"])
def test_the_closing_block_says_what_to_see_in_attention_png_of_the_task_run(task):
    said = dict(seq2seq.written(task))["attention.png"]
    assert ("anti-diagonal" in said) == (task == "reverse"), said
    assert "reverse" not in said and said.startswith("every layer and head")
