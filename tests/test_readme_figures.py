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
