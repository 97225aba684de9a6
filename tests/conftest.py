"""Shared fixtures: ``device`` runs a test on the device chosen with ``--device`` (cpu by
default; ``--device cuda`` runs the whole suite through CuPy and skips without a GPU)."""
import numpy as np
import pytest

import minigrad as mg


def pytest_addoption(parser):
    parser.addoption("--device", default="cpu", choices=["cpu", "cuda"],
                     help="run the suite on this device (cuda needs CuPy and a GPU)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--device") == "cuda" and not mg.cuda_is_available():
        skip = pytest.mark.skip(reason="--device cuda: CuPy or a CUDA GPU is not available")
        for item in items:
            item.add_marker(skip)


@pytest.fixture
def device(request):
    return request.config.getoption("--device")


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    mg.manual_seed(0)
    np.random.seed(0)
