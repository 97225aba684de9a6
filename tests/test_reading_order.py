"""mg.autograd.reading_order: the functions one call runs through, in order, with their lines."""
import minigrad as mg
from minigrad.autograd.reading import ReadingOrder


def _order():
    x = mg.randn(3, requires_grad=True)
    w = mg.randn(3, requires_grad=True)
    return mg.autograd.reading_order(lambda: (x * w).sum().backward()), x, w


def test_a_backward_is_followed_from_the_op_to_the_leaves_grad():
    order, x, w = _order()
    assert isinstance(order, ReadingOrder)
    names = [s.name for s in order]
    wanted = ["Tensor.__mul__", "Function.apply", "Mul.forward", "Tensor.backward",
              "run_backward", "topological_order", "_Pass.run", "Mul.backward", "write_grad"]
    positions = [names.index(n) for n in wanted]
    assert positions == sorted(positions), names
    assert x.grad is not None and w.grad is not None  # (the call ran)


def test_each_function_is_listed_once_with_where_it_starts_and_the_lines_that_ran():
    order, _, _ = _order()
    assert len({(s.path, s.line) for s in order}) == len(order)
    run = next(s for s in order if s.name == "run_backward")
    assert run.path == "minigrad/autograd/engine.py"
    source = open(mg.autograd.engine.__file__).read().splitlines()
    assert source[run.line - 1].lstrip().startswith("def run_backward(")
    lines = {line for _, line in run.lines}
    assert lines and all(run.line < line <= len(source) for line in lines)
    # comprehensions and lambdas count as lines of the function that runs them
    assert not any("<" in s.name for s in order)
    assert order.lines() <= sum(len(s.lines) for s in order)
    assert order.files()[0] == "minigrad/tensor.py"


def test_the_table_names_each_function_and_the_totals():
    order, _, _ = _order()
    text = str(order)
    assert "minigrad/autograd/engine.py:" in text
    assert text.splitlines()[-1] == (f"{len(order)} functions in {len(order.files())} files, "
                                     f"{order.lines()} lines ran")
    assert "engine.py:" not in order.table(where=False)


def test_nothing_is_traced_after_the_call_or_outside_minigrad():
    import sys
    before = sys.gettrace()
    order = mg.autograd.reading_order(lambda: sorted([3, 1, 2]))
    assert len(order) == 0 and sys.gettrace() is before
