"""Host memory kept between steps (backend/host.py): a step that allocates and frees the same
arrays again finds its pages already there, instead of the kernel faulting fresh ones in."""
import os
import subprocess
import sys

import pytest

from minigrad.backend import host

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# a "step" of 16 arrays of 4 MiB, made and freed five times after a first one: the page
# faults of the five (each a fresh page the kernel zeroes), per step
STEP_FAULTS = """
import resource
import numpy as np
import minigrad

def step():
    arrays = [np.ones(1 << 20, np.float32) for _ in range(16)]
    return sum(float(a[0]) for a in arrays)

step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) // 5)
"""

needs_glibc = pytest.mark.skipif(host._glibc_mallopt() is None,
                                 reason="the C library is not glibc")


def _faults_per_step(setting):
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("MINIGRAD_KEEP_HOST_MEMORY", None)
    if setting is not None:
        env["MINIGRAD_KEEP_HOST_MEMORY"] = setting
    out = subprocess.run([sys.executable, "-c", STEP_FAULTS], env=env, capture_output=True,
                         text=True, check=True)
    return int(out.stdout)


@needs_glibc
def test_a_repeated_step_reuses_its_pages():
    # 64 MiB a step: 16,384 pages of 4 KiB, every one faulted in again with glibc's defaults
    assert _faults_per_step(None) < 200


@needs_glibc
@pytest.mark.parametrize("setting", ["0", "off"])
def test_the_environment_keeps_glibcs_defaults(setting):
    assert _faults_per_step(setting) > 4000


@pytest.mark.parametrize("value, keeps", [(None, True), ("1", True), ("0", False),
                                          ("false", False), (" OFF ", False), ("yes", True)])
def test_the_setting_is_read_from_the_environment(monkeypatch, value, keeps):
    if value is None:
        monkeypatch.delenv("MINIGRAD_KEEP_HOST_MEMORY", raising=False)
    else:
        monkeypatch.setenv("MINIGRAD_KEEP_HOST_MEMORY", value)
    assert host.keeps_by_default() is keeps


def test_it_does_nothing_without_glibc(monkeypatch):
    monkeypatch.setattr(host, "_glibc_mallopt", lambda: None)
    assert host.keep_host_memory() is False


@needs_glibc
def test_it_reports_that_it_took_effect():
    assert host.keep_host_memory() is True


# --- OpenBLAS's idle threads: set before NumPy loads it, never over the user's setting ---

def _timeout_after(code, setting=None):
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop("OPENBLAS_THREAD_TIMEOUT", None)
    if setting is not None:
        env["OPENBLAS_THREAD_TIMEOUT"] = setting
    code += "\nimport os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip()


def test_importing_minigrad_first_shortens_openblas_spin():
    assert _timeout_after("import minigrad") == "20"


def test_the_users_own_timeout_wins():
    assert _timeout_after("import minigrad", setting="24") == "24"


def test_after_numpy_nothing_is_set():
    # OpenBLAS has read its settings when NumPy loaded it: setting it then would only mislead
    assert _timeout_after("import numpy, minigrad") == "None"
