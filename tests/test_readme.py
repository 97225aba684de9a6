"""README.md runs as written: its ```python blocks are executed in order, in one namespace,
inside a fresh temporary folder (so the files they write land there), and none may raise.
A ```text block right after a python block is what that block prints, exactly. The picture
under the first block, docs/images/neuron.svg, is the one that block draws.

Every python block of the README runs; write commands for a shell in ```bash blocks.

    python -m tests.test_readme    # rewrite the README's output blocks and the picture
"""
import contextlib
import io
import os
import re
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PICTURE = ROOT / "docs" / "images" / "neuron.svg"
DRAWN = "neuron.svg"  # what the README's first block writes into the folder it runs in

# A python block, possibly indented (inside a list item), and the text block after it.
BLOCK = re.compile(r"^(?P<indent> *)```python\n(?P<code>.*?)^(?P=indent)```\n"
                   r"(?:\n*(?P=indent)```text\n(?P<text>.*?)^(?P=indent)```\n)?", re.M | re.S)


def blocks(markdown):
    """[(line, code, expected output or None)] for each python block, dedented."""
    found = []
    for m in BLOCK.finditer(markdown):
        line = markdown.count("\n", 0, m.start()) + 1
        text = m.group("text")
        found.append((line, textwrap.dedent(m.group("code")),
                      None if text is None else textwrap.dedent(text)))
    return found


def run_readme(folder):
    """Run every python block in ``folder``; [(line, code, expected, printed)]."""
    namespace = {"__name__": "__readme__"}
    results = []
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        for line, code, expected in blocks(README.read_text()):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"README.md, block at line {line}", "exec"), namespace)
            results.append((line, code, expected, out.getvalue()))
    finally:
        os.chdir(cwd)
    return results


def _norm(text):
    return "\n".join(line.rstrip() for line in (text or "").strip("\n").splitlines())


def svg_content(path):
    """What an SVG from Graphviz shows, without the coordinates that vary between Graphviz
    versions: its texts and its fill colours, in order."""
    svg = Path(path).read_text()
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg), re.findall(r'fill="(#\w+)"', svg)


def _need_graphviz():
    pytest.importorskip("graphviz", reason="the README draws graphs: pip install graphviz")
    if shutil.which("dot") is None:
        pytest.skip("the README renders graphs with Graphviz's `dot` program, not installed")


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory):
    _need_graphviz()
    folder = tmp_path_factory.mktemp("readme")
    return folder, run_readme(folder)


def test_every_python_block_runs(readme_run):
    _, results = readme_run
    assert len(results) == len(blocks(README.read_text())) > 0


def test_each_block_prints_what_the_readme_shows(readme_run):
    _, results = readme_run
    for line, code, expected, printed in results:
        if expected is not None:
            assert _norm(printed) == _norm(expected), \
                f"README.md, block at line {line} printed:\n{printed}"


def test_the_picture_is_the_one_the_first_block_draws(readme_run):
    folder, _ = readme_run
    assert svg_content(folder / DRAWN) == svg_content(PICTURE), \
        f"{PICTURE.relative_to(ROOT)} is stale: python -m tests.test_readme redraws it"


def test_blocks_are_found_with_their_outputs():
    """The parser sees indented blocks and pairs each text block with the code before it."""
    md = ("```python\nprint(1)\n```\n\n```text\n1\n```\n\n- item:\n\n  ```python\n"
          "  x = 2\n  ```\n\n```bash\nls\n```\n")
    assert blocks(md) == [(1, "print(1)\n", "1\n"), (11, "x = 2\n", None)]


def anchor(heading):
    """The anchor a Markdown renderer gives a heading: lower case, punctuation dropped,
    spaces as hyphens (GitHub's rule)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_anchor_follows_the_renderers_rule():
    assert anchor("Pictures of the graph (`mg.viz`)") == "pictures-of-the-graph-mgviz"
    assert anchor("nn: layers, losses, optimisers") == "nn-layers-losses-optimisers"


def test_links_lead_to_files_and_headings_in_the_repository():
    text = README.read_text()
    prose = re.sub(r"^ *```.*?^ *```", "", text, flags=re.M | re.S)
    targets = re.findall(r"\]\(([^)\s]+)\)", prose) + re.findall(r'src="([^"]+)"', prose)
    headings = {anchor(h) for h in re.findall(r"^#+ (.*)$", prose, re.M)}
    assert targets
    for target in targets:
        assert "://" not in target, f"README.md links outside the repository: {target}"
        if target.startswith("#"):
            assert target[1:] in headings, f"README.md: no heading for the link {target}"
        else:
            assert (ROOT / target).exists(), f"README.md links to a missing file: {target}"


def rewrite():
    """Run the README in a temporary folder, write each block's real output into the text
    block after it (blocks without one stay so), and copy the picture the first block drew
    to docs/images."""
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        outputs = iter(printed for *_, printed in run_readme(folder))
        shutil.copyfile(Path(folder) / DRAWN, PICTURE)

    def fill(m):
        printed, indent = next(outputs), m.group("indent")
        block = f"{indent}```python\n{m.group('code')}{indent}```\n"
        if m.group("text") is not None:
            text = textwrap.indent(printed.rstrip() + "\n", indent)
            block += f"\n{indent}```text\n{text}{indent}```\n"
        return block
    README.write_text(BLOCK.sub(fill, README.read_text()))


if __name__ == "__main__":
    sys.exit(rewrite())
