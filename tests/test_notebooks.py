"""Every notebook in notebooks/ runs from a clean kernel without an error, as a reader would
run it (its own folder as the working directory), through nbclient, Jupyter's own runner.
The kernel imports this checkout's minigrad. The notebooks are committed without outputs."""
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
TIMEOUT = 180  # seconds per cell: each notebook takes under a minute on two cores


def read(path):
    nbformat = pytest.importorskip("nbformat", reason="needs nbformat (the test extra)")
    return nbformat.read(path, as_version=4)


def test_there_are_notebooks():
    assert [p.name for p in NOTEBOOKS][:4] == ["01_autograd_tour.ipynb",
                                               "02_transformer_graph.ipynb",
                                               "03_seq2seq_attention.ipynb",
                                               "04_vmap_per_sample_gradients.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_clean(path):
    """No outputs and no execution counts: a reader sees their own results."""
    nb = read(path)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert nb.metadata.kernelspec.name == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_without_error(path, tmp_path):
    nb = read(path)
    nbclient = pytest.importorskip("nbclient", reason="needs nbclient (the test extra)")
    pytest.importorskip("ipykernel", reason="needs ipykernel (the test extra)")
    if any("mg.viz.draw" in cell.source for cell in nb.cells):
        pytest.importorskip("graphviz", reason="the notebook draws graphs (the viz extra)")
        if shutil.which("dot") is None:
            pytest.skip("the notebook draws graphs: needs Graphviz's dot program")
    if any("plot_attention" in cell.source or "matplotlib" in cell.source
           for cell in nb.cells):
        pytest.importorskip("matplotlib", reason="the notebook plots (the plot extra)")
    # the notebook's own folder, as Jupyter would run it, copied so that nothing it writes
    # lands in the checkout; the kernel imports this checkout's minigrad
    workdir = tmp_path / "notebooks"
    workdir.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        OPENBLAS_NUM_THREADS=os.environ.get("OPENBLAS_NUM_THREADS", "1"))
    client = nbclient.NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute(env=env)  # raises CellExecutionError, naming the cell, on any error
    errors = [out for cell in nb.cells if cell.cell_type == "code"
              for out in cell.outputs if out.output_type == "error"]
    assert errors == []
