"""backend.threads: BLAS on one thread by default, a user's thread setting left alone.

The threads are set once per process, on import, so each case runs in a fresh process
(other OpenBLAS variables of the environment, such as OPENBLAS_CORETYPE, are kept)."""
import json
import os
import subprocess
import sys

import pytest

from minigrad.backend import threads

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_REPORT = """
import json, sys
if sys.argv[1] == "numpy first":
    import numpy
import minigrad
from minigrad.backend import threads
from threadpoolctl import threadpool_info
print(json.dumps(dict(
    blas=[i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"],
    cores=threads._cores, split=minigrad.backend.kernels._Workers().cores(),
    variables={k: v for k, v in __import__("os").environ.items() if k.endswith("_THREADS")})))
"""

_NUMPY_ALONE = """
import json, numpy
from threadpoolctl import threadpool_info
print(json.dumps([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]))
"""


def _env(**variables):
    env = {k: v for k, v in os.environ.items()
           if k not in threads.THREAD_VARIABLES and k != "MINIGRAD_ONE_BLAS_THREAD"}
    env.update(variables)
    return env


def _run(code, env, *args):
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=_ROOT,
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[-1])


def _report(order="minigrad first", **variables):
    return _run(_REPORT, _env(**variables), order)


def _numpy_alone(**variables):
    return _run(_NUMPY_ALONE, _env(**variables))


@pytest.mark.parametrize("order", ["minigrad first", "numpy first"])
def test_without_a_variable_blas_runs_one_thread_and_run_split_the_cores(order):
    default = max(_numpy_alone())
    got = _report(order)
    assert set(got["blas"]) == {1}
    assert got["cores"] == got["split"] == default
    assert got["variables"] == {}  # nothing set for child processes to inherit


@pytest.mark.parametrize("name", threads.THREAD_VARIABLES)
@pytest.mark.parametrize("value", ["1", "2"])
def test_a_users_variable_is_left_alone(name, value):
    expected = _numpy_alone(**{name: value})
    got = _report(**{name: value})
    assert got["blas"] == expected and got["cores"] is None
    assert got["split"] == max(expected)  # run_split follows the user's BLAS threads
    assert got["variables"] == {name: value}


@pytest.mark.parametrize("value", ["0", "off", "False"])
def test_minigrads_own_variable_keeps_blas_default(value):
    expected = _numpy_alone()
    got = _report(MINIGRAD_ONE_BLAS_THREAD=value)
    assert got["blas"] == expected and got["cores"] is None and got["split"] == max(expected)


@pytest.mark.parametrize("environ, sets, limits", [
    ({}, False, True),
    ({"OPENBLAS_NUM_THREADS": "1"}, True, False),
    ({"OMP_NUM_THREADS": "4"}, True, False),
    ({"MKL_NUM_THREADS": "2"}, True, False),
    ({"OPENBLAS_NUM_THREADS": ""}, False, True),  # empty: unset, as OpenBLAS reads it
    ({"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": "1048576"}, False, True),
    ({"MINIGRAD_ONE_BLAS_THREAD": "no"}, False, False),
    ({"MINIGRAD_ONE_BLAS_THREAD": "1"}, False, True),
])
def test_which_environments_set_the_threads(environ, sets, limits):
    assert threads.user_sets_threads(environ) is sets
    assert threads.limits_by_default(environ) is limits


@pytest.mark.parametrize("blas, cores, split", [
    (1, None, 1), (2, None, 2), (1, 2, 2), (1, 4, 4), (3, 2, 3), (1, 1, 1)])
def test_split_threads(monkeypatch, blas, cores, split):
    monkeypatch.setattr(threads, "_cores", cores)
    assert threads.split_threads(blas) == split


def test_set_num_threads_sets_run_splits_threads(monkeypatch):
    import numpy as np
    from threadpoolctl import threadpool_limits
    from minigrad.backend import run_split, get_num_threads, set_num_threads
    monkeypatch.setattr(threads, "_cores", threads._cores)  # restored afterwards
    with threadpool_limits(1, user_api="blas"):
        for n, ranges in ((1, [(0, 6)]), (2, [(0, 3), (3, 6)]), (3, [(0, 2), (2, 4), (4, 6)])):
            set_num_threads(n)
            seen = []
            run_split(lambda i0, i1: seen.append((i0, i1)), 6, np)
            assert get_num_threads() == n and sorted(seen) == ranges
    with pytest.raises(ValueError, match="positive"):
        set_num_threads(0)


def test_the_benchmark_runs_each_setting_in_its_own_environment(monkeypatch):
    from benchmarks import threads as bench
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    monkeypatch.setenv("OMP_NUM_THREADS", "4")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    envs = {name: bench.environment(name) for name in bench.SETTINGS}
    assert all(env["OPENBLAS_CORETYPE"] == "Haswell" and "OMP_NUM_THREADS" not in env
               for env in envs.values())
    assert envs["old default"]["MINIGRAD_ONE_BLAS_THREAD"] == "0"
    assert not threads.user_sets_threads(envs["new default"])
    assert threads.limits_by_default(envs["new default"])
    assert envs["single thread"]["OPENBLAS_NUM_THREADS"] == "1"
    rows = bench.table({("busy", "old default"): [6.0, 8.0], ("busy", "new default"): [2.2],
                        ("busy", "single thread"): [2.0, 2.0, 3.0]}, ["busy"])
    assert [(r["setting"], r["ratio"]) for r in rows] == [
        ("old default", 3.5), ("new default", 1.1), ("single thread", 1.0)]


_BENCHMARK_THREADS = """
import json
from threadpoolctl import threadpool_info
from benchmarks.timing import set_threads
from minigrad.backend import get_num_threads
set_threads(2)
print(json.dumps(dict(split=get_num_threads(),
                      blas=[i["num_threads"] for i in threadpool_info()
                            if i["user_api"] == "blas" and "numpy" in i["filepath"]])))
"""


@pytest.mark.parametrize("variables, blas", [({}, 1), ({"MINIGRAD_ONE_BLAS_THREAD": "0"}, 2)])
def test_the_benchmarks_threads_are_minigrads_split_and_blas_as_users_get_it(variables, blas):
    got = _run(_BENCHMARK_THREADS, _env(**variables))
    if not got["blas"] or (max(_numpy_alone()) < 2 and blas == 2):
        pytest.skip("NumPy's BLAS is not a library of its own here, or runs one thread")
    assert got["split"] == 2 and set(got["blas"]) == {blas}


class _Blas:
    """A stand-in for threadpoolctl's controller of NumPy's BLAS: counts its settings."""
    def __init__(self, n=1):
        self.num_threads, self.set = n, []

    def set_num_threads(self, n):
        self.set.append(n)
        self.num_threads = n


def _products(monkeypatch, cores=2, blas=1):
    import numpy as np
    lib = _Blas(blas)
    monkeypatch.setattr(threads, "_controllers", [lib])
    monkeypatch.setattr(threads, "_cores", cores)
    rng = np.random.default_rng(0)
    small = rng.standard_normal((64, 64)).astype(np.float32)
    large = rng.standard_normal((1024, 128)).astype(np.float32), \
        rng.standard_normal((128, 512)).astype(np.float32)
    assert 1024 * 128 * 512 >= threads.WIDE > 64 ** 3
    return np, lib, small, large


def test_a_large_product_runs_on_the_cores_and_gives_blas_back_its_one_thread(monkeypatch):
    np, lib, small, (a, b) = _products(monkeypatch)
    monkeypatch.setattr(threads, "_alone", lambda: True)  # (threads other tests left alive)
    assert np.array_equal(threads.matmul(np, small, small), np.matmul(small, small))
    assert lib.set == []  # a small product: one thread, nothing switched
    out = threads.matmul(np, a, b)
    assert lib.set == [2, 1] and lib.num_threads == 1
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["users_setting", "blas_already_wide", "one_core",
                                  "another_thread"])
def test_a_large_product_leaves_blas_alone(monkeypatch, case):
    import threading
    np, lib, _, (a, b) = _products(monkeypatch, cores=None if case == "users_setting" else
                                   1 if case == "one_core" else 2,
                                   blas=2 if case == "blas_already_wide" else 1)
    if case == "another_thread":
        done = []
        worker = threading.Thread(target=lambda: done.append(threads.matmul(np, a, b)))
        worker.start()
        worker.join()
        assert done
    else:
        threads.matmul(np, a, b)
    assert lib.set == []


def test_a_thread_of_the_programs_own_means_not_alone():
    import threading
    seen, release = [], threading.Event()
    other = threading.Thread(target=release.wait, name="a-users-thread")
    other.start()
    try:
        seen.append(threads._alone())
    finally:
        release.set()
        other.join()
    assert seen == [False]
