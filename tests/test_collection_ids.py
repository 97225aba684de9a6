"""The suite's test ids are the same in every process, whatever Python's hash seed:
pytest-xdist (``pytest -n 2``) has each worker collect the suite and refuses to run when two
workers list different tests, or the same tests in another order. A parametrize id made
from an object's repr (a lambda's address) or an order taken from a set breaks that."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSIDE = "MINIGRAD_COLLECTING_IDS"  # set in the collecting processes, which skip this test


def _collect(seed):
    env = dict(os.environ, PYTHONHASHSEED=str(seed), OPENBLAS_NUM_THREADS="1")
    env[INSIDE] = "1"
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get(INSIDE) == "1", reason="inside a collection of the ids")
def test_two_processes_with_different_hash_seeds_collect_the_same_ids():
    runs = [_collect(1), _collect(2)]  # side by side: each takes tens of seconds
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    first, second = ([line for line in out.splitlines() if "::" in line] for out in outputs)
    assert len(first) > 1000
    differ = [(a, b) for a, b in zip(first, second) if a != b][:5]
    assert first == second, f"{len(first)} and {len(second)} ids; first differences: {differ}"
    _the_readme_counts(len(first))


def _the_readme_counts(collected):
    """The README's "about N tests" is the collected count, to within 5%."""
    import re
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    m = re.search(r"about ([\d,]+) tests", readme)
    assert m, "the README no longer says how many tests there are"
    stated = int(m.group(1).replace(",", ""))
    assert abs(stated - collected) <= 0.05 * collected, \
        f"the README says about {stated} tests; {collected} are collected"
