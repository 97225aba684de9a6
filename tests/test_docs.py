"""The guides in docs/ run: every ```python block is executed in order (one namespace per
guide) and must print exactly the ```text block that follows it, so the guides cannot go
stale. ``python -m tests.test_docs docs/FILE.md`` rewrites a guide's output blocks."""
import contextlib
import io
import os
import re
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"```python\n(.*?)```(?:\n+```text\n(.*?)```)?", re.S)


def run_guide(path):
    """[(code, expected_output or None, actual_output)] for each python block of a guide."""
    namespace = {"__name__": "__guide__"}
    results = []
    cwd = os.getcwd()
    os.chdir(path.parent.parent)  # snippets run from the repository root
    try:
        for match in BLOCK.finditer(path.read_text()):
            code, expected = match.group(1), match.group(2)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{path.name}", "exec"), namespace)
            results.append((code, expected, out.getvalue()))
    finally:
        os.chdir(cwd)
    return results


NO_TORCH = "PyTorch is not installed: nothing to compare with"


def _norm(text):
    return "\n".join(line.rstrip() for line in (text or "").strip("\n").splitlines())


@pytest.mark.parametrize("guide", sorted(p.name for p in DOCS.glob("*.md")))
def test_guide_snippets_print_what_the_guide_shows(guide):
    pytest.importorskip("graphviz")
    for code, expected, actual in run_guide(DOCS / guide):
        if expected is not None and _norm(actual) != NO_TORCH:  # the guide shows torch's
            assert _norm(actual) == _norm(expected), f"snippet:\n{code}"


def test_the_comparison_with_pytorch_says_so_when_pytorch_is_missing(monkeypatch):
    """Without PyTorch the tour's comparison claims no difference: it says that there is
    nothing to compare with."""
    pytest.importorskip("graphviz")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    printed = [actual for code, _, actual in run_guide(DOCS / "autograd_tour.md")
               if "import torch" in code]
    assert printed and all(_norm(p) == NO_TORCH for p in printed), printed


def rewrite(path):
    """Run a guide and write each snippet's real output into the ```text block after it."""
    path = Path(path)
    outputs = iter(actual for _, _, actual in run_guide(path))

    def fill(match):
        actual = next(outputs)
        block = f"```python\n{match.group(1)}```"
        if actual.strip():
            block += f"\n\n```text\n{actual.rstrip()}\n```"
        return block
    path.write_text(BLOCK.sub(fill, path.read_text()))


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        rewrite(arg)
