"""What the tests of the demos check in a demo's closing block (demos/_cli.print_written)."""
import os
import re


def written_files(printed, out):
    """The files the closing block at the end of ``printed`` names, as {name: description}.
    Checks the block's form: a blank line, ``Wrote <out>/:``, then each file (its name, two
    spaces, what to look at in it; long descriptions go on indented below), and nothing
    after it."""
    lines = printed.rstrip("\n").split("\n")
    heading = f"Wrote {str(out).rstrip(os.sep)}{os.sep}:"
    assert heading in lines, f"no closing block {heading!r} in:\n{printed}"
    start = len(lines) - 1 - lines[::-1].index(heading)
    assert start == 0 or lines[start - 1] == "", "the closing block follows a blank line"
    files, name = {}, None
    for line in lines[start + 1:]:
        row = re.fullmatch(r"  (\S.*?\S)  +(\S.*)", line)
        if row and not line.startswith("   "):
            name = row.group(1)
            files[name] = row.group(2)
        else:
            assert name is not None and line.startswith("   ") and line.strip(), line
            files[name] += " " + line.strip()
    assert files, "the closing block names no file"
    return files


def assert_closing_block(printed, out, expected=None):
    """The closing block names files that exist under ``out`` (``expected``, if given: just
    those), each with a description."""
    files = written_files(printed, out)
    if expected is not None:
        assert sorted(files) == sorted(expected), files
    for name, what in files.items():
        if " ... " not in name:  # a range of frames names its first and last
            assert os.path.isfile(os.path.join(out, name.split(" (")[0])), name
        assert len(what.split()) >= 3, (name, what)
    return files
