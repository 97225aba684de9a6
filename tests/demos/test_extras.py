"""Every demo after ``pip install .`` without extras: an optional package it needs (tqdm,
matplotlib, sacrebleu, graphviz) that is missing stops it before any work with one line
naming the extra to install, and no traceback; a demo that needs none runs without them.

The missing packages are simulated: the demo runs in a subprocess whose ``sys.modules``
holds None for each, so that importing one raises ModuleNotFoundError. A package that is
really missing here is named too; a program that needs Graphviz's ``dot`` program (not a
Python package) is skipped where it is not on PATH."""
import subprocess
import sys
from pathlib import Path

import pytest

from minigrad.demos import _cli
from tests.conftest import lacking, needs
from tests.demos.test_cli import PROGRAMS

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = sorted(_cli.EXTRAS)

# program -> the optional packages it cannot run without (with the arguments below)
NEEDS = {
    "bert": ["tqdm", "matplotlib"],
    "caption": ["tqdm", "matplotlib"],
    "gpt": ["tqdm", "matplotlib"],
    "residuals": ["tqdm", "matplotlib"],
    "seq2seq": ["tqdm", "matplotlib"],
    "forward_vs_reverse": ["matplotlib", "graphviz"],
    "profile": ["graphviz"],
    "viz_attention": ["graphviz"],
    "viz_backward_walkthrough": ["graphviz"],
    "viz_neuron": ["graphviz"],
    "viz_transformer_step": ["graphviz"],
}
# the quick arguments of the programs that run without any optional package
QUICK = {
    "attention_by_hand": [],
    "explore": ["--layers", "1", "--batch-size", "2"],
    "extrapolate": ["--steps", "1", "--eval-size", "4", "--positional", "t5"],
    "mlp_from_scratch": ["--steps", "1"],
}
# what the programs above need that no extra installs
PROGRAMS_NEED = {"explore": ["dot"]}
WRAPPER = """\
import runpy, sys
missing, name, *argv = sys.argv[1:]
for module in missing.split(","):
    sys.modules[module] = None  # as if not installed: importing it raises ModuleNotFoundError
sys.argv = [name, *argv]
runpy.run_module("minigrad.demos." + name, run_name="__main__", alter_sys=True)
"""


def run_without(missing, name, *argv, tmp_path):
    out = [] if name in ("mlp_from_scratch", "translate") else ["--out", str(tmp_path / "out")]
    return subprocess.run([sys.executable, "-c", WRAPPER, ",".join(missing), name, *out,
                           *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)


def assert_names_the_extra(done, name, missing):
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    extras = ",".join(sorted({_cli.EXTRAS[m] for m in missing}))
    assert lines[0].startswith(f"python -m minigrad.demos.{name}: error: ")
    assert lines[0].endswith(f"not installed: pip install 'minigrad[{extras}]'"), lines[0]
    assert all(m in lines[0] for m in missing), lines[0]


def test_every_program_is_in_one_table():
    assert set(NEEDS) | set(QUICK) | {"translate"} == set(PROGRAMS)
    assert not set(NEEDS) & set(QUICK)


@pytest.mark.parametrize("name", sorted(NEEDS))
def test_without_any_extra_a_program_that_needs_one_says_what_to_install(tmp_path, name):
    done = run_without(OPTIONAL, name, tmp_path=tmp_path)
    assert_names_the_extra(done, name, NEEDS[name])
    assert done.stdout == "" and not (tmp_path / "out").exists()  # before any work


@pytest.mark.parametrize("name, module", [(n, m) for n in sorted(NEEDS) for m in NEEDS[n]])
def test_each_missing_package_is_named_with_its_extra(tmp_path, name, module):
    done = run_without([module], name, tmp_path=tmp_path)
    assert_names_the_extra(done, name, named(NEEDS[name], module))


def test_seq2seq_on_text_needs_sacrebleu_for_its_scores(tmp_path):
    done = run_without(["sacrebleu"], "seq2seq", "--task", "dates", tmp_path=tmp_path)
    assert_names_the_extra(done, "seq2seq", named([*NEEDS["seq2seq"], "sacrebleu"], "sacrebleu"))


def named(needed, module):
    """Those of the packages ``needed`` that a program run without ``module`` names: that
    one, and any that is really missing here."""
    really = lacking(*needed)
    return [m for m in needed if m == module or m in really]


@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_program_that_needs_no_extra_runs_without_them(tmp_path, name):
    needs(*PROGRAMS_NEED.get(name, []))
    done = run_without(OPTIONAL, name, *QUICK[name], tmp_path=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_translate_needs_no_extra(tmp_path):
    """translate reads a checkpoint and decodes: it starts without the extras (a missing
    checkpoint is its only complaint here)."""
    done = run_without(OPTIONAL, "translate", "--ckpt", str(tmp_path / "none"), "x",
                       tmp_path=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "no checkpoint at" in lines[0], lines


@pytest.mark.parametrize("module", OPTIONAL)
def test_require_names_the_extra_of_each_package(monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)
    assert not _cli.installed(module)
    with pytest.raises(SystemExit) as info:
        _cli.require("gpt", module)
    assert info.value.code == (f"python -m minigrad.demos.gpt: error: {module} is not "
                               f"installed: pip install 'minigrad[{_cli.EXTRAS[module]}]'")
