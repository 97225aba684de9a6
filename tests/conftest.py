"""Shared fixtures: ``device`` runs a test on the device chosen with ``--device`` (cpu by
default; ``--device cuda`` runs the whole suite through CuPy and skips without a GPU;
``--device strict`` runs the tests that take ``device`` on "cuda" through the strict
stand-in for CuPy of ``tests/strict_device.py``, which needs no GPU and refuses what CuPy
refuses); ``two_cores`` runs it with BLAS (and so ``backend.run_split``) on two threads.
``needs`` (a function, and the marker ``@pytest.mark.needs(...)``) skips a test where an
optional package or Graphviz's ``dot`` program that it needs is missing."""
import importlib
import shutil

import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

import minigrad as mg
from minigrad.backend import kernels


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", choices=["cpu", "cuda", "strict"],
                     help="run the suite on this device (cuda needs CuPy and a GPU; strict "
                          "runs the tests that take the device fixture on cuda through a "
                          "stand-in for CuPy that refuses implicit host conversions)")


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*what): skip unless each optional package (a "
                            "module name) or \"dot\" (Graphviz's program) is here")
    if config.getoption("--device") == "strict":
        from tests.strict_device import install
        install()


def pytest_collection_modifyitems(config, items):
    if config.getoption("--device") == "strict":  # the tests that run on the device
        kept = [item for item in items if "device" in getattr(item, "fixturenames", ())]
        dropped = [item for item in items if "device" not in getattr(item, "fixturenames", ())]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept
    if config.getoption("--device") == "cuda" and not mg.cuda_is_available():
        skip = pytest.mark.skip(reason="--device cuda: CuPy or a CUDA GPU is not available")
        for item in items:
            item.add_marker(skip)


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        needs(*mark.args)


def lacking(*what):
    """Those of ``what`` that this machine lacks: each an optional Python package (its module
    name: one that cannot be imported is missing) or "dot", Graphviz's program, on PATH."""
    return [w for w in what if not _here(w)]


def _here(what):
    if what == "dot":
        return shutil.which("dot") is not None
    try:
        importlib.import_module(what)
    except ImportError:
        return False
    return True


def needs(*what):
    """Skip the calling test, with one line naming what is missing, unless each of ``what``
    (as for ``lacking``) is here."""
    missing = lacking(*what)
    if missing:
        pytest.skip("; ".join("Graphviz's dot program is not on PATH" if m == "dot" else
                              f"the {m} Python package is not installed" for m in missing))


@pytest.fixture
def device(request):
    chosen = request.config.getoption("--device")
    return "cuda" if chosen == "strict" else chosen


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    mg.manual_seed(0)
    np.random.seed(0)


def blas_threads():
    """The most threads of a BLAS library that run_split manages (those loaded when it was
    first used; a library loaded later, such as PyTorch's by another test, is not NumPy's)."""
    if kernels._workers is not None:
        return max([lib.num_threads for lib in kernels._workers.blas] or [1])
    return max([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] or [1])


@pytest.fixture
def two_cores():
    """BLAS (and so run_split) on two threads, or a skip where BLAS will not run two."""
    with threadpool_limits(2, user_api="blas"):
        if blas_threads() < 2:
            pytest.skip("BLAS runs one thread here")
        yield


@pytest.fixture
def strict():
    """The strict stand-in for CuPy (``tests/strict_device.py``) as minigrad's CuPy for one
    test, on any machine: the module, as ``cp``."""
    from minigrad import backend
    from tests import strict_device
    uninstall = strict_device.install()
    try:
        yield backend.cupy()
    finally:
        uninstall()


@pytest.fixture
def host_reads(request):
    """Counting device synchronisations: ``with host_reads() as reads:`` lists every read of
    a device array's values back to the host made inside the block (``reads.report()`` says
    how and where). The "cuda" of these tests is the strict stand-in for CuPy, under
    ``--device strict`` and, installed for the test, under ``--device cpu``; with a real GPU
    (``--device cuda``) reads cannot be counted, and the test is skipped."""
    from tests import strict_device
    chosen = request.config.getoption("--device")
    if chosen == "cuda":
        pytest.skip("counting host reads needs the strict stand-in for CuPy (--device strict)")
    uninstall = None if strict_device.installed() else strict_device.install()
    try:
        yield strict_device.host_reads
    finally:
        if uninstall is not None:
            uninstall()


@pytest.fixture(autouse=True)
def _no_pending_device_checks():
    """A check of values that failed on a GPU (``backend.checks``) and that no read has
    raised yet belongs to its test: dropped at the test's end."""
    yield
    from minigrad.backend import checks
    checks.forget()
