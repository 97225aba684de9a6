"""minigrad installs as one package, ``minigrad``: a wheel built from this checkout, installed
(not editable) into a fresh virtual environment, imports as minigrad, minigrad.nn,
minigrad.models and minigrad.demos.* from a folder that holds a user's own ``nn.py``,
``models.py`` and ``demos/``, and ``python -m minigrad.demos.seq2seq`` trains there.

The environment is made with ``--system-site-packages`` and a ``.pth`` file naming this
Python's own site-packages folders (where this Python is itself a virtual environment,
its packages are not the system's), so NumPy and the other dependencies come from this
Python and nothing is downloaded; the build runs offline (``--no-index
--no-build-isolation``). Where that cannot work here, the test skips and says why. It
takes up to about a minute (marked ``slow``; it runs by default).
"""
import json
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What a build must not copy from the checkout: its history and what runs left behind.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "runs", "*.egg-info",
                                    "__pycache__", ".pytest_cache", ".hypothesis", "notebooks")

# A user's folder: modules named like minigrad's parts, which must not be picked up.
USER_FILES = {
    "nn.py": "raise ImportError('the user\\'s own nn.py was imported')\n",
    "models.py": "raise ImportError('the user\\'s own models.py was imported')\n",
    "demos/__init__.py": "raise ImportError('the user\\'s own demos/ was imported')\n",
    "demos/seq2seq.py": "raise ImportError('the user\\'s own demos/seq2seq.py was imported')\n",
}

IMPORT_EVERYTHING = """
import importlib, pkgutil, sys
import minigrad, minigrad.nn, minigrad.models, minigrad.demos
from minigrad import nn
from minigrad.models import Transformer
assert nn.Linear is minigrad.nn.Linear and nn is minigrad.nn
demos = [m.name for m in pkgutil.iter_modules(minigrad.demos.__path__)]
for name in demos:
    importlib.import_module("minigrad.demos." + name)
for module in ("minigrad", "minigrad.nn", "minigrad.models", "minigrad.demos"):
    print(module, sys.modules[module].__file__)
print("demos", " ".join(demos))
"""

# The smallest run of the demo that still trains, evaluates and writes what it writes.
TINY_SEQ2SEQ = ["--steps", "3", "--batch-size", "4", "--d-model", "8", "--nhead", "2",
                "--layers", "1", "--ff", "16", "--warmup", "0", "--eval-every", "3",
                "--eval-size", "4", "--examples", "1", "--no-progress"]


def _run(args, cwd, env, what, timeout=120):
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, f"{what} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _clean_env():
    """This environment without anything that points Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(OPENBLAS_NUM_THREADS="1", MPLBACKEND="Agg", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python of a fresh environment with minigrad installed from a wheel, environment)."""
    try:
        import setuptools
    except ImportError:
        pytest.skip("building the wheel offline needs setuptools in this Python")
    if int(setuptools.__version__.split(".")[0]) < 64:
        pytest.skip(f"the build needs setuptools>=64, this Python has {setuptools.__version__}")
    if subprocess.run([sys.executable, "-m", "pip", "--version"],
                      capture_output=True).returncode != 0:
        pytest.skip("pip is not available to this Python")

    tmp = tmp_path_factory.mktemp("install")
    env = _clean_env()
    source = tmp / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    try:
        # without its own pip: the environment runs this Python's pip, which installs into it
        venv.EnvBuilder(system_site_packages=True, with_pip=False).create(tmp / "env")
    except Exception as e:  # noqa: BLE001 (any failure here is the platform's, not ours)
        pytest.skip(f"cannot make a virtual environment here: {e}")
    python = tmp / "env" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _sees_these_packages(python, env)
    deps = subprocess.run([str(python), "-c", "import numpy, scipy, safetensors, threadpoolctl"],
                          cwd=tmp, env=env, capture_output=True, text=True)
    if deps.returncode != 0:
        pytest.skip("minigrad's dependencies cannot be reached offline from a new virtual "
                    f"environment here: {deps.stderr.strip().splitlines()[-1]}")
    pip = [str(python), "-m", "pip", "--no-input", "--disable-pip-version-check"]
    built = subprocess.run(pip + ["wheel", "--no-deps", "--no-index", "--no-build-isolation",
                                  "-w", str(tmp / "wheels"), str(source)],
                           cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    if built.returncode != 0:
        pytest.skip(f"the wheel could not be built offline here:\n{built.stderr[-2000:]}")
    wheel, = (tmp / "wheels").glob("minigrad-*.whl")
    _run(pip + ["install", "--no-deps", "--no-index", str(wheel)], tmp, env, "pip install")
    return python, env


def _sees_these_packages(python, env):
    """Make the environment of ``python`` see this Python's site-packages folders, after its
    own: a ``.pth`` file listing them (``--system-site-packages`` reaches only the base
    installation's, not those of a virtual environment that runs the tests)."""
    own = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
               python.parent, env, "asking the environment for its site-packages").strip()
    folders = [*site.getsitepackages(), *([site.getusersitepackages()]
                                          if site.ENABLE_USER_SITE else [])]
    Path(own, "_tests_this_python.pth").write_text(
        "".join(f"{f}\n" for f in folders if os.path.isdir(f)))


@pytest.fixture
def user_folder(tmp_path):
    for name, text in USER_FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.slow
def test_everything_imports_from_the_installed_package(installed, user_folder):
    python, env = installed
    out = _run([str(python), "-c", IMPORT_EVERYTHING], user_folder, env, "importing minigrad")
    files = dict(line.split(" ", 1) for line in out.splitlines())
    env_dir = python.parent.parent.resolve()
    for module in ("minigrad", "minigrad.nn", "minigrad.models", "minigrad.demos"):
        assert env_dir in Path(files[module]).resolve().parents, \
            f"{module} came from {files[module]}, not from the fresh install in {env_dir}"
    assert "seq2seq" in files["demos"].split()


@pytest.mark.slow
def test_a_demo_runs_from_the_installed_package(installed, user_folder):
    python, env = installed
    out_dir = user_folder / "run"
    out = _run([str(python), "-m", "minigrad.demos.seq2seq", "--task", "reverse",
                "--out", str(out_dir)] + TINY_SEQ2SEQ, user_folder, env, "the seq2seq demo")
    metrics = json.loads((out_dir / "metrics.json").read_text())
    assert metrics["steps"] == 3, out
    assert (out_dir / "checkpoint.safetensors").is_file(), out
