"""The figures the README states about the code are what the code is now: each is computed
here and compared with the sentence that states it (change the README when one moves)."""
import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

BACKWARD_FILES = ["minigrad/autograd/graph.py", "minigrad/autograd/function.py",
                  "minigrad/ops/elementwise.py", "minigrad/autograd/engine.py"]


def code_lines(path):
    """(lines in all, lines of code): code leaves out blank lines, comments and
    docstrings."""
    source = (ROOT / path).read_text(encoding="utf-8")
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(getattr(body[0], "value", None), ast.Constant) and \
                isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        code.update(range(tok.start[0], tok.end[0] + 1))
    return len(source.splitlines()), len(code - docstrings)


def test_the_size_of_the_backward_pass_files():
    m = re.search(r"in four files \(([\d,]+)\s+lines, ([\d,]+) of them code", README)
    assert m, "the README no longer states the four files' size"
    total = sum(code_lines(p)[0] for p in BACKWARD_FILES)
    code = sum(code_lines(p)[1] for p in BACKWARD_FILES)
    stated = [int(g.replace(",", "")) for g in m.groups()]
    assert stated == [total, code], f"the README says {stated}, the files have {[total, code]}"


def _layout():
    m = re.search(r"^## Layout\n\n```\n(.*?)^```", README, re.M | re.S)
    assert m, "the README has no Layout block"
    return m.group(1)


def test_the_layout_names_every_module_of_the_engine_and_every_program():
    layout = _layout()
    words = set(re.findall(r"[\w.]+", layout)) | {w.rstrip("/") for w in layout.split()}
    engine = sorted(p.name for p in (ROOT / "minigrad").iterdir()
                    if (p.suffix == ".py" and p.name != "__init__.py") or
                    (p.is_dir() and (p / "__init__.py").exists()))
    missing = [name for name in engine if name not in words and name + "/" not in layout]
    assert not missing, f"the Layout block does not name {missing}"
    programs = sorted(p.stem for p in (ROOT / "demos").glob("*.py")
                      if "def main(" in p.read_text(encoding="utf-8"))
    named = set(re.findall(r"\w+", layout[layout.index("demos/"):]))
    missing = [p for p in programs if p not in named and not p.startswith("viz_")]
    assert not missing, f"the Layout block does not name the programs {missing}"
    for folder in ("minigrad/autograd", "minigrad/compile", "minigrad/optim",
                   "minigrad/optim/lr_scheduler", "minigrad/utils/data", "nn"):
        files = sorted(p.name for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py")
        assert [f for f in files if f not in words] == [], folder


NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten "
                                      "eleven twelve thirteen fourteen fifteen".split())}


def test_the_tour_notebook_and_the_guide_have_the_questions_the_readme_counts():
    import json
    m = re.search(r"(\w+) of the tour's (\w+) questions", README)
    assert m, "the README no longer counts the tour's questions"
    in_notebook, in_guide = (NUMBERS[w] for w in m.groups())
    guide = (ROOT / "docs" / "autograd_tour.md").read_text(encoding="utf-8")
    assert len(re.findall(r"^## ", guide, re.M)) == in_guide
    cells = json.loads((ROOT / "notebooks" / "01_autograd_tour.ipynb").read_text("utf-8"))
    titles = [c["source"][0] for c in cells["cells"] if c["cell_type"] == "markdown"
              and c["source"] and re.match(r"## \d+\.", c["source"][0])]
    assert len(titles) == in_notebook


def _explorer_rows():
    """{(model, folded): (ops, nodes, drawn, modules, KiB)} as the explore demo makes them."""
    import minigrad as mg
    from minigrad.demos import explore
    rows = {}
    for model_name in ("seq2seq", "gpt"):
        args = explore.parse_args(["--model", model_name, "--out", "unused"])
        for folded in (True, False):  # (explore runs the backward pass: a graph each)
            mg.manual_seed(args.seed)
            build = explore.gpt_step if model_name == "gpt" else explore.seq2seq_step
            model, loss = build(args)
            c = mg.viz.explore(loss, None, model=model, depth=int(args.depth),
                               title=f"{model_name} training step",
                               collapse_repeats=folded).counts
            rows[model_name, folded] = (c["ops"], c["items"], c["drawn"], c["groups"],
                                        round(c["bytes"] / 1024))
    return rows


def test_the_explorer_table_counts_what_the_explore_demo_draws():
    pytest = __import__("pytest")
    pytest.importorskip("graphviz")
    table = re.findall(r"^\| (seq2seq, 2\+2 layers|same, not folded.*?|GPT, 12 layers|same, "
                       r"not folded) \| (\d+) \| (\d+) \| (\d+) in (\d+) modules \| (\d+) KiB",
                       README, re.M)
    assert len(table) == 4, "the README's explorer table has changed shape"
    rows = _explorer_rows()
    expected = [rows["seq2seq", True], rows["seq2seq", False], rows["gpt", True],
                rows["gpt", False]]
    stated = [tuple(int(v) for v in row[1:]) for row in table]
    assert stated == expected


def test_the_bytes_a_replayed_step_allocates_with_and_without_reuse():
    """The listing's last line for the benchmarks' three transformer steps, as the README
    quotes it."""
    import minigrad as mg
    from benchmarks import workloads
    m = re.search(r"transformer allocates ([\d.]+) MiB instead of ([\d.]+) MiB, the small "
                  r"one ([\d.]+) instead of\s+([\d.]+) MiB, the medium one ([\d.]+) instead "
                  r"of ([\d.]+) MiB\. The most alive at once is the\s+same either way, "
                  r"([\d.]+) MiB for the tiny step, ([\d.]+) MiB for the small one and "
                  r"([\d.]+) MiB\s+for the medium one", README)
    assert m, "the README no longer states the bytes a replayed step allocates"
    stated = iter(m.groups())
    for name in ("tiny", "small", "medium"):
        step = mg.compile(workloads.minigrad_step(workloads.SIZES[name]))
        while step.replays == 0:
            step()
        line = next(t for t in step.listing().splitlines() if t.startswith("arrays made"))
        made, without, alive, alive_without = re.findall(r"([\d.]+) MiB", line)
        assert (made, without) == (next(stated), next(stated)), (name, line)
        assert alive == alive_without, (name, line)
        stated_alive = m.groups()[6 + ("tiny", "small", "medium").index(name)]
        assert alive == stated_alive, (name, line)
