"""The command line of every demo program: each bad argument stops the program before any
work with one line naming the option (no traceback, no silent default), ``-h`` names the
program as it is run and gives every option a help line with its default.

Most cases parse in-process (each demo's ``parse_args``); a few per program run
``python -m minigrad.demos.<name>`` in a subprocess to check what the shell sees."""
import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from minigrad import demos
import minigrad as mg
from minigrad.demos import _cli, seq2seq
from minigrad.demos.checkpoint import save_checkpoint
from tests import strict_device

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted(m.name for m in pkgutil.iter_modules(demos.__path__)
                  if not m.name.startswith("_")
                  and hasattr(importlib.import_module(f"minigrad.demos.{m.name}"), "main"))
# a GPU that a child process can use too (the strict stand-in of --device strict is this
# process's only)
CUDA = mg.cuda_is_available() and not strict_device.installed()

# option -> bad values with a piece of the message each must give
BAD_VALUES = {
    "--steps": [("0", "must be > 0, got 0"), ("-3", "must be > 0, got -3"),
                ("ten", "expected an integer, got 'ten'")],
    "--batch-size": [("0", "must be > 0, got 0"), ("-8", "must be > 0, got -8")],
    "--lr": [("0", "must be > 0, got 0"), ("-0.001", "must be > 0, got -0.001"),
             ("nan", "must be a finite number"), ("inf", "must be a finite number")],
    "--d-model": [("0", "must be > 0, got 0")],
    "--nhead": [("0", "must be > 0, got 0")],
    "--layers": [("0", "must be > 0, got 0")],
    "--ff": [("-1", "must be > 0, got -1")],
    "--dropout": [("1", "must lie in [0, 1), got 1"), ("-0.1", "must lie in [0, 1), got -0.1")],
    "--label-smoothing": [("1.0", "must lie in [0, 1), got 1"), ("-0.5", "got -0.5")],
    "--warmup": [("-1", "got -1")],
    "--clip": [("-1", "must be >= 0, got -1")],
    "--eval-size": [("0", "must be > 0, got 0")],              # an empty held-out set
    "--held-out": [("0", "must be > 0, got 0")],
    "--pictures": [("0", "must be > 0, got 0")],
    "--beam": [("0", "must be > 0, got 0")],
    "--vocab-size": [("0", "must be > 0, got 0")],
    "--max-src-len": [("0", "must be > 0, got 0")],
    "--max-tgt-len": [("-2", "must be > 0, got -2")],
    "--max-len": [("0", "must be > 0, got 0")],
    "--pairs": [("0", "must be > 0, got 0")],
    "--data": [("/no/such/pairs.tsv", "no file at /no/such/pairs.tsv")],
    "--tokenizer-file": [("/no/such.json", "no file at /no/such.json")],
    "--ckpt": [("/no/such/run", "no checkpoint at /no/such/run")],
    "--examples": [("-1", "must be >= 0, got -1")],
    "--eval-every": [("0", "must be > 0, got 0")],
    "--max-size": [("0", "must be > 0, got 0")],
    "--fixed": [("0", "must be > 0, got 0")],
    "--repeats": [("0", "must be > 0, got 0")],
    "--seed": [("-1", "must be >= 0, got -1"), ("1.5", "expected an integer, got '1.5'")],
    "--device": [("tpu", "unknown device 'tpu'"), ("cuda:99", "no CUDA device")]
    + ([] if CUDA else [("cuda", "no CUDA device is available")]),
}
# the same option with another meaning in one program
PROGRAM_BAD_VALUES = {
    ("residuals", "--warmup"): [("1.5", "must lie in [0, 1], got 1.5")],
    ("seq2seq", "--warmup"): [("0.5", "expected an integer, got '0.5'")],
}
# values that do not fit together: (program, argv, the option named, a piece of the message)
CROSS = [
    ("caption", ["--d-model", "30"], "--d-model", "must be a multiple of the 4 heads, got 30"),
    ("residuals", ["--d-model", "36"], "--d-model", "must be a multiple of 8"),
    ("seq2seq", ["--d-model", "30", "--nhead", "4"], "--d-model",
     "must be a multiple of --nhead (4)"),
    ("seq2seq", ["--d-model", "6", "--nhead", "2", "--positional", "rope"], "--positional",
     "rope needs an even head size"),
    ("seq2seq", ["--steps", "10", "--warmup", "10"], "--warmup", "must be smaller than --steps"),
    ("seq2seq", ["--resume", "no/such.safetensors"], "--resume",
     "no checkpoint at no/such.safetensors"),
    ("seq2seq", ["--resume"], "--resume", "checkpoint.safetensors"),
]
# the neighbours of those values are accepted
GOOD = [
    ("caption", ["--d-model", "32", "--held-out", "1", "--pictures", "1"]),
    ("residuals", ["--d-model", "40", "--warmup", "0"]),
    ("residuals", ["--warmup", "1", "--steps", "1"]),
    ("seq2seq", ["--d-model", "8", "--nhead", "2", "--positional", "rope", "--steps", "1"]),
    ("seq2seq", ["--steps", "10", "--warmup", "9", "--dropout", "0", "--clip", "0",
                 "--examples", "0", "--label-smoothing", "0.99"]),
    ("seq2seq", ["--steps", "1", "--schedule", "constant", "--warmup", "5"]),
    ("mlp_from_scratch", ["--steps", "1", "--lr", "1e-9", "--seed", "0"]),
    ("gpt", ["--steps", "1", "--seed", "12345678901234567890"]),
]


def module(name):
    return importlib.import_module(f"minigrad.demos.{name}")


def options(name):
    """The value-taking options of a program: {option string: argparse action}."""
    return {a.option_strings[-1]: a for a in module(name).build_parser()._actions
            if a.option_strings and a.nargs != 0}


def out_args(name, tmp_path):
    return ["--out", str(tmp_path / "out")] if "--out" in options(name) else []


def bad_value_cases():
    for name in PROGRAMS:
        for option, action in options(name).items():
            values = BAD_VALUES.get(option, [])
            values = values + PROGRAM_BAD_VALUES.get((name, option), [])
            if action.choices:
                values = values + [("bogus", "invalid choice: 'bogus'")]
            for value, message in values:
                yield pytest.param(name, option, value, message, id=f"{name} {option} {value}")


def assert_argparse_error(err, name, option, message):
    """stderr is one line ``prog: error: ... (see -h)`` (no usage block) that names the
    option and says ``message``."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"python -m minigrad.demos.{name}: error: "), err
    assert lines[0].endswith(" (see -h)"), lines[0]
    assert option in lines[0] and message in lines[0], lines[0]


def assert_one_line_error(err, name, option, message):
    """stderr is one line ``prog: error: ...`` (no usage block) that names the option and
    says ``message``: what a well-formed command line whose --out cannot be used gets."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"python -m minigrad.demos.{name}: error: "), err
    assert option in lines[0] and message in lines[0], lines[0]


def parse_fails(name, argv, capsys):
    """parse_args(argv) stops with argparse's status 2; returns stderr."""
    with pytest.raises(SystemExit) as info:
        module(name).parse_args(argv)
    assert info.value.code == 2
    return capsys.readouterr().err


# --- the table, in-process --------------------------------------------------------------------

def test_every_program_is_found():
    assert {"seq2seq", "gpt", "bert", "caption", "residuals", "mlp_from_scratch",
            "attention_by_hand", "viz_neuron"} <= set(PROGRAMS)
    assert not {"shapes", "tasks", "checkpoint"} & set(PROGRAMS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_every_option_taking_a_value_has_bad_values_in_the_table(name):
    untested = [option for option, action in options(name).items()
                if option not in BAD_VALUES and not action.choices
                and option not in ("--out", "--resume")]  # tested on their own below
    assert untested == []


@pytest.mark.parametrize("name, option, value, message", list(bad_value_cases()))
def test_a_bad_value_is_one_line_naming_the_option(tmp_path, capsys, name, option, value,
                                                   message):
    err = parse_fails(name, [*out_args(name, tmp_path), option, value], capsys)
    assert_argparse_error(err, name, f"argument {option}: ", message)
    assert not (tmp_path / "out").exists()  # nothing done


@pytest.mark.parametrize("name, argv, option, message", CROSS,
                         ids=[f"{c[0]} {' '.join(c[1])}" for c in CROSS])
def test_values_that_do_not_fit_together(tmp_path, capsys, name, argv, option, message):
    err = parse_fails(name, [*out_args(name, tmp_path), *argv], capsys)
    assert_argparse_error(err, name, option, message)


@pytest.mark.parametrize("name, argv", GOOD, ids=[f"{g[0]} {' '.join(g[1])}" for g in GOOD])
def test_the_neighbours_of_bad_values_are_accepted(tmp_path, name, argv):
    args = module(name).parse_args([*out_args(name, tmp_path), *argv])
    for option, value in zip(argv, argv[1:]):
        if option.startswith("--") and not value.startswith("--"):
            given = getattr(args, option[2:].replace("-", "_"))
            assert given == type(given)(value)


def test_steps_given_are_the_steps_run_and_none_given_is_the_default():
    from minigrad.demos import gpt

    assert gpt.steps_of(gpt.parse_args(["--steps", "1"]), "markov") == 1
    assert gpt.steps_of(gpt.parse_args([]), "recall") == gpt.DEFAULT_STEPS["recall"]
    assert seq2seq.parse_args(["--task", "sort", "--steps", "1"]).steps == 1
    assert seq2seq.parse_args(["--task", "sort"]).steps == seq2seq.TASK_DEFAULTS["sort"]["steps"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_main_parses_through_the_checked_parser(monkeypatch, name):
    class Parsed(Exception):
        pass

    def parse_args(argv=None):
        raise Parsed

    monkeypatch.setattr(module(name), "parse_args", parse_args)
    with pytest.raises(Parsed):
        module(name).main([])


# --- the output folder ------------------------------------------------------------------------

WITH_OUT = [name for name in PROGRAMS if "--out" in options(name)]


@pytest.mark.parametrize("name", WITH_OUT)
def test_an_out_that_is_a_file_is_refused(tmp_path, capsys, name):
    (tmp_path / "file").write_text("")
    err = parse_fails(name, ["--out", str(tmp_path / "file")], capsys)
    assert_one_line_error(err, name, "argument --out: ", "file is a file, not a folder")
    err = parse_fails(name, ["--out", str(tmp_path / "file" / "sub")], capsys)
    assert_one_line_error(err, name, "argument --out: ", f"{tmp_path / 'file'} is a file")


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX permissions")
@pytest.mark.parametrize("name", WITH_OUT)
def test_an_out_that_cannot_be_written_is_refused(tmp_path, capsys, name):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        try:  # root (or a file system without permissions) writes there all the same
            (locked / "tried").mkdir()
        except PermissionError:
            pass
        else:
            pytest.skip("a folder without write permission is writable here (root)")
        for out in (locked, locked / "new"):
            err = parse_fails(name, ["--out", str(out)], capsys)
            assert_one_line_error(err, name, "argument --out: ", f"cannot write in {locked}")
    finally:
        locked.chmod(0o700)


def test_an_out_without_write_permission_is_refused_whoever_runs_the_tests(tmp_path, capsys,
                                                                           monkeypatch):
    """As above, with the permission check answered as for a user without access (root
    has access to every folder)."""
    real_access, locked = os.access, tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(_cli.os, "access",
                        lambda path, mode: path != str(locked) and real_access(path, mode))
    for out in (locked, locked / "new" / "deeper"):
        err = parse_fails("gpt", ["--out", str(out)], capsys)
        assert_one_line_error(err, "gpt", "argument --out: ",
                              f"cannot write in {locked} (permission denied)")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_folder_that_cannot_be_created_stops_with_one_line():
    """What the parser's check cannot know (here: /proc takes no new folder, even from
    root) is found when the folder is made, before any work."""
    with pytest.raises(SystemExit) as info:
        _cli.make_out_dir("gpt", "/proc/minigrad-demo-out")
    message = info.value.code
    assert message.startswith("python -m minigrad.demos.gpt: error: --out: cannot write in "
                              "/proc/minigrad-demo-out (") and "\n" not in message


def test_make_out_dir_makes_the_folder_and_its_parents(tmp_path):
    _cli.make_out_dir("gpt", tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir() and list((tmp_path / "a" / "b").iterdir()) == []
    _cli.make_out_dir("gpt", tmp_path / "a" / "b")  # an existing folder is fine


# --- -h ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", PROGRAMS)
def test_help_names_the_program_and_every_option(capsys, name):
    with pytest.raises(SystemExit) as info:
        module(name).parse_args(["-h"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: python -m minigrad.demos.{name} ")
    parser = module(name).build_parser()
    formatter = parser._get_formatter()
    for action in parser._actions:
        assert action.help, f"{action.option_strings} has no help"
        if action.nargs == 0:  # -h and flags: nothing to default
            continue
        shown = " ".join(formatter._expand_help(action).split())
        assert "default" in shown, f"{action.option_strings}: {shown!r}"
        if action.default is not None:
            assert str(action.default) in shown, f"{action.option_strings}: {shown!r}"


# --- what the shell sees ----------------------------------------------------------------------

def shell(name, *argv, tmp_path):
    done = subprocess.run([sys.executable, "-m", f"minigrad.demos.{name}", *map(str, argv)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout == ""
    return done


def shell_cases():
    """A few cases per program: a bad number, a device it does not have, an --out it cannot
    use."""
    for name in PROGRAMS:
        opts = options(name)
        number = next(((o, BAD_VALUES[o][0]) for o in ("--steps", "--eval-size", "--seed")
                       if o in opts), None)
        if number:
            yield pytest.param(name, [number[0], number[1][0]], number[0], id=f"{name} number")
        if "--device" in opts:
            yield pytest.param(name, ["--device", "cuda:99" if CUDA else "cuda"], "--device",
                               id=f"{name} device")
        if "--out" in opts:
            yield pytest.param(name, ["--out", "FILE"], "--out", id=f"{name} out")


@pytest.mark.parametrize("name, argv, option", list(shell_cases()))
def test_from_the_shell_a_bad_argument_is_one_line(tmp_path, name, argv, option):
    (tmp_path / "file").write_text("")
    argv = [str(tmp_path / "file") if a == "FILE" else a for a in argv]
    done = shell(name, *argv, tmp_path=tmp_path)
    assert done.returncode == 2
    check = assert_one_line_error if option == "--out" else assert_argparse_error
    check(done.stderr, name, f"argument {option}: ", "")
    if option == "--device" and not CUDA:
        assert "no CUDA device is available" in done.stderr


BAD_COMMAND_LINES = {  # what argparse itself refuses: {piece of the message: argv}
    "unrecognized arguments: --no-such-option": ["--no-such-option"],
    "unrecognized arguments: --no-such-option=1": ["--no-such-option=1"],
}
REQUIRED = {"translate": ["--ckpt", "nowhere"]}  # the options a program cannot run without


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("message", list(BAD_COMMAND_LINES))
def test_from_the_shell_an_unknown_option_is_one_line_pointing_to_help(tmp_path, name, message):
    done = shell(name, *REQUIRED.get(name, []), *BAD_COMMAND_LINES[message], tmp_path=tmp_path)
    assert done.returncode == 2
    assert_argparse_error(done.stderr, name, "", message)


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_value_missing_after_an_option_is_one_line(capsys, name):
    option = next(o for o in ("--seed", "--device", "--out", "--steps") if o in options(name))
    err = parse_fails(name, [option], capsys)
    assert_argparse_error(err, name, f"argument {option}: ", "expected one argument")


def test_a_required_option_left_out_is_one_line(tmp_path):
    done = shell("translate", "some text", tmp_path=tmp_path)
    assert done.returncode == 2
    assert_argparse_error(done.stderr, "translate", "--ckpt", "the following arguments are "
                          "required")


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_description_in_help_is_whole_sentences(capsys, name):
    description = module(name).build_parser().description
    assert description.endswith(".") and "  " not in description, description


def test_from_the_shell_a_checkpoint_that_does_not_fit_is_one_line(tmp_path, device):
    """A found but unusable --resume is reported when it is read: one line that names the
    file and, for a model of another size, the first key that differs."""
    if device != "cpu" and not CUDA:
        pytest.skip("the shell's process has no GPU (the strict stand-in is this process's)")
    tiny = ["--d-model", "16", "--nhead", "2", "--layers", "1", "--ff", "32", "--task", "copy",
            "--out", str(tmp_path), "--eval-size", "5", "--no-progress", "--steps", "4",
            "--device", device]
    args = seq2seq.parse_args(tiny)
    model, optimizer, scheduler = seq2seq.build(args, seq2seq.TASKS["copy"])
    path = tmp_path / seq2seq.CHECKPOINT
    save_checkpoint(path, model, optimizer, scheduler, 0, extra={"args": {"task": "copy"}})
    (tmp_path / "junk.safetensors").write_bytes(b"not a checkpoint")
    cases = [(["--ff", "48", "--resume"],
              f"{path} does not fit this model: encoder.layers.0.ffn.linear1.weight has shape "
              "(32, 16) in the checkpoint but (48, 16) in the model"),
             (["--resume", tmp_path / "junk.safetensors"], str(tmp_path / "junk.safetensors")),
             (["--task", "sort", "--resume", path], f"{path} is a copy run, not sort")]
    for argv, message in cases:
        done = shell("seq2seq", *tiny, *argv, tmp_path=tmp_path)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert done.returncode == 1 and len(lines) == 1, done.stderr
        assert lines[0].startswith("python -m minigrad.demos.seq2seq: error: --resume: ")
        assert message in lines[0]


# --- the closing block ------------------------------------------------------------------------

def test_the_closing_block_names_each_file_under_the_folder(tmp_path):
    long = "what to look at, " * 10
    text = _cli.written_block(tmp_path, [("metrics.json", "the numbers"),
                                         (tmp_path / "a.png", long),
                                         (os.path.join("elsewhere", "b.svg"), "kept as given")])
    lines, width = text.split("\n"), len(os.path.join("elsewhere", "b.svg"))
    assert lines[0] == f"Wrote {tmp_path}{os.sep}:"
    assert lines[1] == "  " + "metrics.json".ljust(width) + "  the numbers"
    assert lines[2].startswith("  " + "a.png".ljust(width) + "  what to look at,")
    wrapped = lines[3:-1]                         # a long description goes on below
    assert wrapped and all(x.startswith(" " * (width + 4)) and len(x) <= 100 for x in wrapped)
    assert " ".join(x.strip() for x in lines[2:-1]).split(None, 1)[1] == long.strip()
    assert lines[-1] == f"  {os.path.join('elsewhere', 'b.svg')}  kept as given"
