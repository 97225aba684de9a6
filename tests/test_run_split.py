"""backend.run_split: work shared among the CPU's cores by threads that wait for it."""
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from minigrad.backend import kernels, run_split, threads
from tests.conftest import blas_threads


def _ranges(n):
    seen, lock = [], threading.Lock()

    def fn(i0, i1):
        with lock:
            seen.append((i0, i1, threading.get_ident(), blas_threads()))
    run_split(fn, n, np)
    return seen


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64])
def test_the_ranges_cover_every_index_once(two_cores, n):
    covered = sorted(i for i0, i1, _, _ in _ranges(n) for i in range(i0, i1))
    assert covered == list(range(n))


def test_one_range_runs_here_and_the_other_in_a_worker(two_cores):
    seen = sorted(_ranges(10))
    assert [(i0, i1) for i0, i1, _, _ in seen] == [(0, 5), (5, 10)]
    assert seen[0][2] == threading.get_ident() != seen[1][2]


def test_products_inside_are_single_threaded_and_blas_is_restored(two_cores):
    assert {threads for *_, threads in _ranges(8)} == {1}
    assert blas_threads() == 2


def test_a_users_one_blas_thread_means_one_range_here(monkeypatch):
    monkeypatch.setattr(threads, "_cores", None)  # as where OPENBLAS_NUM_THREADS=1 is set
    with threadpool_limits(1, user_api="blas"):
        assert [(i0, i1, t) for i0, i1, t, _ in _ranges(8)] == [(0, 8, threading.get_ident())]


def test_minigrads_one_blas_thread_still_splits_among_the_cores_blas_had(monkeypatch):
    monkeypatch.setattr(threads, "_cores", 2)  # as one_blas_thread leaves it on two cores
    with threadpool_limits(1, user_api="blas"):
        seen = _ranges(8)
        assert sorted((i0, i1) for i0, i1, _, _ in seen) == [(0, 4), (4, 8)]
        assert blas_threads() == 1


def test_more_blas_threads_than_one_are_followed(two_cores, monkeypatch):
    monkeypatch.setattr(threads, "_cores", 3)  # the user (or a test) gave BLAS two since
    assert sorted((i0, i1) for i0, i1, _, _ in _ranges(8)) == [(0, 4), (4, 8)]


def test_another_array_module_gets_one_range():
    calls = []
    run_split(lambda i0, i1: calls.append((i0, i1)), 5, object())  # not NumPy: a GPU's module
    assert calls == [(0, 5)]


def test_an_exception_in_a_worker_is_raised_here_after_every_range(two_cores):
    finished = []

    def fn(i0, i1):
        if i0:
            raise ValueError(f"range {i0}..{i1}")
        finished.append(i0)
    with pytest.raises(ValueError, match="range 2..4"):
        run_split(fn, 4, np)
    assert finished == [0]
    assert sorted(r[:2] for r in _ranges(4)) == [(0, 2), (2, 4)]  # the workers still serve
    assert blas_threads() == 2


def test_an_exception_here_waits_for_the_workers(two_cores):
    done = threading.Event()

    def fn(i0, i1):
        if i0 == 0:
            raise KeyError("here")
        done.set()
    with pytest.raises(KeyError):
        run_split(fn, 2, np)
    assert done.is_set()


def test_a_nested_call_runs_in_its_own_thread(two_cores):
    inner = []

    def fn(i0, i1):
        run_split(lambda j0, j1: inner.append((i0, j0, j1, threading.get_ident())), 4, np)
    run_split(fn, 2, np)
    assert sorted((i0, j0, j1) for i0, j0, j1, _ in inner) == [(0, 0, 4), (1, 0, 4)]


def test_the_workers_are_started_once(two_cores):
    _ranges(4)
    workers = kernels._workers
    before = threading.active_count()
    for _ in range(5):
        _ranges(4)
    assert kernels._workers is workers and threading.active_count() == before


@pytest.mark.parametrize("scratch", [False, True])
@pytest.mark.parametrize("beta1", [0.9, 0.3])  # both forms of torch's lerp_
def test_adam_shared_among_the_cores_is_the_same_bits(two_cores, monkeypatch, scratch,
                                                      beta1):
    rng = np.random.default_rng(0)
    g, m, v = (rng.standard_normal(kernels.ADAM_SPLIT + 1001).astype(np.float32) for _ in "gmv")
    v = v * v
    results = []
    for split_from in (kernels.ADAM_SPLIT, 1 << 62):  # shared out, then in one piece
        monkeypatch.setattr(kernels, "ADAM_SPLIT", split_from)
        gi, mi, vi = g.copy(), m.copy(), v.copy()
        update = kernels.adam(gi, mi, vi, beta1, 0.999, 1e-3, 0.3, 1e-8, scratch=scratch)
        results.append((update, mi, vi, gi))
    for shared, whole in zip(*results):
        np.testing.assert_array_equal(shared, whole)
