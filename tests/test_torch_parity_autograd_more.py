"""More of autograd against PyTorch: the unused outputs of a multi-output op (their hooks
see None, their ``.grad`` stays None), the warning on reading a non-leaf's ``.grad``,
views made under no_grad of a tensor that requires grad, in-place changes of unbind's
outputs, ``expand`` to the same shape, ``cat`` with a 1-D empty tensor, and
``mg.autograd.backward``, ``detach_``, ``is_anomaly_enabled``, ``detect_anomaly(check_nan=)``
and ``mg.autograd.grad(materialize_grads=)``.

Most programs are written once against ``M`` (``minigrad`` on the tested device, or
``torch``), so both libraries run the same text."""
import re
import shutil
import warnings

import numpy as np
import pytest

import minigrad as mg
from tests.conftest import needs
from tests.torch_ref import On, needs_torch, torch

NON_LEAF_WARNING = ("The .grad attribute of a Tensor that is not a leaf Tensor is being "
                    "accessed")


def both(program, device):
    """``program(M)`` run by minigrad on ``device`` and by torch."""
    return program(On(mg, device)), program(torch)


def values(t):
    if torch is not None and isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return t.detach().numpy()


def plain(x):
    """Tensors as (shape, values, requires_grad); nodes by name; containers item by item."""
    if isinstance(x, (tuple, list)):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {k: plain(v) for k, v in x.items()}
    if isinstance(x, (mg.Tensor,) + (() if torch is None else (torch.Tensor,))):
        return (tuple(x.shape), values(x).tolist(), x.requires_grad)
    if hasattr(x, "next_functions"):  # a node
        return type(x).__name__
    return x


def same(program, device):
    """minigrad and torch give the same results (see ``plain``)."""
    ours, theirs = both(program, device)
    assert plain(ours) == plain(theirs)
    return ours


def raises_both(program, device, kind, torch_phrase, *phrases):
    """Both raise ``kind``: torch's message contains ``torch_phrase`` (a str, or a compiled
    pattern where PyTorch's builds word it differently), minigrad's each of ``phrases``
    (case-insensitive), in one line."""
    with pytest.raises(kind) as t_info:
        program(torch)
    said = str(t_info.value)
    found = torch_phrase.search(said) if isinstance(torch_phrase, re.Pattern) \
        else torch_phrase in said
    assert found, f"the case is wrong: torch said {said}"
    with pytest.raises(kind) as m_info:
        program(On(mg, device))
    message = str(m_info.value)
    assert "\n" not in message, message
    for p in phrases:
        assert p.lower() in message.lower(), f"{p!r} not in minigrad's message: {message}"
    return message


def _leaf(M, n=4):
    return M.tensor([1.0, -2.0, 3.0, 0.5][:n], requires_grad=True)


def _pieces(M, how, t):
    return {"split": lambda: t.split(2), "chunk": lambda: t.chunk(2),
            "unbind": lambda: t.unbind(0)}[how]()


# --- 1. an unused output of a multi-output op ----------------------------------------------

@needs_torch
@pytest.mark.parametrize("how", ["split", "chunk", "unbind"])
def test_an_unused_output_gets_no_gradient_and_its_hooks_see_none(device, how):
    def program(M):
        x = _leaf(M)
        pieces = _pieces(M, how, x * 2)
        first, last = pieces[0], pieces[-1]
        last.retain_grad()
        seen = []
        last.register_hook(lambda g: seen.append(None if g is None else values(g).tolist()))
        first.register_hook(lambda g: seen.append(values(g).tolist()))
        (first * 3).sum().backward()
        return last.grad, seen, x.grad
    same(program, device)


@needs_torch
def test_a_used_output_next_to_an_unused_one_keeps_its_gradient(device):
    def program(M):
        x = _leaf(M)
        a, b, c = (x * 1).split([1, 2, 1])
        a.retain_grad(), b.retain_grad(), c.retain_grad()
        (b * b).sum().backward()
        return a.grad, b.grad, c.grad, x.grad
    same(program, device)


@needs_torch
def test_a_hook_may_not_replace_the_none_gradient_of_an_unused_output(device):
    def program(M):
        x = _leaf(M)
        a, b = (x * 1).split(2)
        b.register_hook(lambda g: M.ones(2))
        a.sum().backward()
    raises_both(program, device, RuntimeError,
                "can't replace a None gradient with a non-None value",
                "can't replace a None gradient with a non-None value")


@needs_torch
def test_a_hook_returning_none_on_an_unused_output_changes_nothing(device):
    def program(M):
        x = _leaf(M)
        a, b = (x * 1).split(2)
        seen = []
        b.register_hook(lambda g: seen.append(g is None))
        a.sum().backward()
        return seen, x.grad
    same(program, device)


@needs_torch
def test_grad_of_an_unused_output_is_none_or_an_error(device):
    def unused(M):
        x = _leaf(M)
        a, b = (x * 1).split(2)
        return a.sum(), b

    def allowed(M):
        out, b = unused(M)
        return M.autograd.grad(out, [b], allow_unused=True)

    def materialized(M):
        out, b = unused(M)
        return M.autograd.grad(out, [b], materialize_grads=True)

    def refused(M):
        out, b = unused(M)
        M.autograd.grad(out, [b])

    assert plain(same(allowed, device)) == [None]
    same(materialized, device)
    raises_both(refused, device, RuntimeError, "not have been used in the graph", "not used")


@needs_torch
def test_backward_with_inputs_leaves_an_unused_output_alone(device):
    def program(M):
        x = _leaf(M)
        a, b = (x * 1).split(2)
        a.sum().backward(inputs=[b, x])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (b is no leaf: reading its .grad warns)
            return b.grad, x.grad
    same(program, device)


# --- 2. reading the .grad of a non-leaf ---------------------------------------------------

def _grad_warnings(read):
    """The non-leaf-gradient warnings that ``read()`` gives, as (category, file)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read()
    return [(w.category, w.filename) for w in caught
            if str(w.message).startswith(NON_LEAF_WARNING)]


def _retaining(M):
    y = _leaf(M) * 2
    y.retain_grad()
    return y


def _assigned(M):
    y = _leaf(M) * 2
    y.grad = M.ones(4)
    return y


CASES_WITHOUT_WARNING = {
    "a leaf that requires grad": lambda M: _leaf(M),
    "a leaf that does not": lambda M: M.ones(3) * 2,
    "a non-leaf that retains its gradient": _retaining,
    "a non-leaf whose .grad was assigned": _assigned,
}


@needs_torch
def test_reading_the_grad_of_a_non_leaf_warns_as_torch(device):
    for M in (torch, On(mg, device)):
        x = _leaf(M)
        y = x * 2
        y.sum().backward()
        assert _grad_warnings(lambda: y.grad) == [(UserWarning, __file__)], M
        for case, make in CASES_WITHOUT_WARNING.items():
            t = make(M)
            assert _grad_warnings(lambda: t.grad) == [], (case, M)


def test_minigrads_own_reads_of_non_leaf_grads_do_not_warn(device):
    """backward(inputs=) into a non-leaf, twice (the second adds to the first), and viz
    drawing a graph with the gradients of its non-leaves, read them inside minigrad."""
    M = On(mg, device)
    x = _leaf(M)
    y = x * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            (y * y).sum().backward(inputs=[y], retain_graph=True)
    np.testing.assert_allclose(values(y._grad), 2 * 2 * values(y))
    needs("graphviz")  # the drawing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hidden, loss = _hidden_and_loss(x, device)
        mg.viz.to_dot({"hidden": hidden, "loss": loss}, show_grad=True)
    assert _grad_warnings(lambda: hidden.grad) == [(UserWarning, __file__)]  # (the user's do)


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")
def test_exploring_a_graph_reads_its_non_leaf_grads_without_a_warning(device):
    hidden, loss = _hidden_and_loss(_leaf(On(mg, device)), device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mg.viz.explore(loss)
    assert _grad_warnings(lambda: hidden.grad) == [(UserWarning, __file__)]


def _hidden_and_loss(x, device):
    """A layer's non-leaf output and a loss of it, after backward."""
    hidden = mg.nn.Linear(4, 3).to(device)(x.reshape(1, 4)).tanh()
    loss = (hidden * hidden).sum()
    loss.backward(retain_graph=True)
    return hidden, loss


# --- 3. a view made under no_grad of a tensor that requires grad ---------------------------

NO_GRAD_VIEWS = {
    "slice": lambda x: x[1:],
    "select": lambda x: x[0],
    "view": lambda x: x.view(2, 2),
    "unsqueeze": lambda x: x.unsqueeze(0),
    "expand": lambda x: x.expand(2, 4),
    "transpose": lambda x: x.view(2, 2).t(),
    "split piece": lambda x: x.split(2)[1],
    "unbind piece": lambda x: x.unbind(0)[1],
}


@needs_torch
@pytest.mark.parametrize("base", ["leaf", "non_leaf"])
@pytest.mark.parametrize("view", sorted(NO_GRAD_VIEWS))
def test_a_view_made_under_no_grad_requires_grad_but_passes_no_gradient_on(device, view, base):
    def program(M):
        x = _leaf(M)
        src = x if base == "leaf" else x * 1
        with M.no_grad():
            v = NO_GRAD_VIEWS[view](src)
            others = [src * 1, src.detach(), src.clone()]  # no views: no grad
        flags = (v.requires_grad, v.grad_fn is None, v.is_leaf)
        out = (v * 2).sum()
        nodes = out.grad_fn.next_functions
        out.backward()
        return flags, out.requires_grad, nodes, x.grad, v.grad, others
    same(program, device)


@needs_torch
def test_a_view_of_a_no_grad_view_is_recorded_with_no_edge(device):
    def program(M):
        x = _leaf(M)
        with M.no_grad():
            v = x[1:]
        u = v[1:]
        (u * 2).sum().backward()
        return u.requires_grad, u.is_leaf, u.grad_fn, u.grad_fn.next_functions, x.grad
    same(program, device)


@needs_torch
def test_gradients_with_respect_to_a_no_grad_view_and_through_it(device):
    def program(M):
        x = _leaf(M)
        with M.no_grad():
            v = x[1:]
        out = (v * v).sum()
        return M.autograd.grad(out, [v, x], allow_unused=True, retain_graph=True)
    same(program, device)

    def from_the_view(M):  # it requires grad, yet backward cannot start from it
        x = _leaf(M)
        with M.no_grad():
            v = x[1:]
        v.backward(M.ones(3))
    raises_both(from_the_view, device, RuntimeError, "does not require grad and does not "
                "have a grad_fn", "does not require grad", "grad_fn")


@needs_torch
def test_in_place_on_a_view_of_a_no_grad_view_raises(device):
    def program(M):
        x = _leaf(M)
        with M.no_grad():
            v = x[1:]
        v[1:].mul_(2.0)
    raises_both(program, device, RuntimeError,
                "is a view of a view which was created in no_grad mode",
                "output 0 of Slice is a view of a view which was created in no_grad mode")


@needs_torch
@pytest.mark.parametrize("base", ["leaf", "non_leaf"])
def test_a_no_grad_view_used_after_its_base_changed_raises(device, base):
    def program(M):
        x = _leaf(M)
        src = x if base == "leaf" else x * 1
        with M.no_grad():
            v = src[1:]
            src.mul_(2.0)
        v * 2
    raises_both(program, device, RuntimeError, "A view was created in no_grad mode and its "
                "base or another view of its base has been modified inplace",
                "created in no_grad mode and its base or another view of its base has been "
                "modified inplace")


# --- 4. in-place changes of the outputs of unbind ------------------------------------------

@needs_torch
def test_unbind_is_one_node_with_an_output_per_slice(device):
    def program(M):
        x = M.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
        rows = (x * 1).unbind(1)
        same_node = all(r.grad_fn is rows[0].grad_fn for r in rows)
        (rows[0] * rows[2]).sum().backward()
        return same_node, [r.grad_fn for r in rows], rows[0].grad_fn.next_functions, x.grad
    same(program, device)


@needs_torch
@pytest.mark.parametrize("source", ["leaf", "non_leaf"])
@pytest.mark.parametrize("op", ["mul_", "add_", "setitem"])
def test_in_place_on_an_output_of_unbind_raises(device, source, op):
    def program(M):
        x = _leaf(M)
        piece = (x if source == "leaf" else x * 1).unbind(0)[1]
        if op == "setitem":
            piece[...] = 2.0
        else:
            getattr(piece, op)(2.0)
    named = () if op == "setitem" else ("output 1 of Unbind",)  # (setitem: through a view)
    raises_both(program, device, RuntimeError,
                "is a view and is being modified inplace", *named,
                "is a view and is being modified inplace", "function that returns multiple views")


@needs_torch
@pytest.mark.parametrize("how", ["split", "unbind"])
def test_in_place_on_a_view_of_such_an_output_raises(device, how):
    def program(M):
        x = _leaf(M)
        piece = _pieces(M, how, x * 1)[0]
        piece.view(-1).mul_(2.0)
    # the view's node is named View or ViewBackward0, depending on the PyTorch build
    raises_both(program, device, RuntimeError,
                re.compile(r"Output 0 of View(Backward0)? is a view and is being modified inplace"),
                "output 0 of View is a view and is being modified inplace")


@needs_torch
@pytest.mark.parametrize("how", ["split", "unbind"])
@pytest.mark.parametrize("change", ["base", "sibling_no_grad", "itself_no_grad"])
def test_such_an_output_used_after_its_base_changed_raises(device, how, change):
    def program(M):
        x = _leaf(M)
        y = x * 1
        pieces = _pieces(M, how, y)
        if change == "base":
            y.mul_(2.0)
        else:
            with M.no_grad():
                pieces[-1 if change == "sibling_no_grad" else 0].mul_(2.0)
        pieces[0] * 1
    raises_both(program, device, RuntimeError, "its base or another view of its base has "
                "been modified inplace", "output 0 of", "its base or another view of its "
                "base has been modified inplace")


@needs_torch
def test_in_place_recorded_by_its_operand_on_an_output_of_unbind_raises(device):
    def program(M):
        w = _leaf(M)
        piece = M.zeros(3).unbind(0)[0]
        piece.mul_(w[0])
    raises_both(program, device, RuntimeError, "function that returns multiple views",
                "function that returns multiple views")

    def recording_nothing(M):  # under no_grad, or of a tensor outside any graph: allowed
        x, plain = _leaf(M), M.tensor([1.0, 2.0, 3.0])
        with M.no_grad():
            x.unbind(0)[1].mul_(10.0)
        plain.unbind(0)[1].mul_(10.0)
        return x, x._version, plain, plain._version
    same(recording_nothing, device)


# --- 5. expand to the same shape -------------------------------------------------------------

@needs_torch
@pytest.mark.parametrize("how", ["expand", "expand_as", "expand_minus_one"])
def test_expand_to_the_same_shape_is_a_new_view_with_a_node(device, how):
    def program(M):
        x = _leaf(M)
        y = {"expand": lambda: x.expand(*x.shape), "expand_as": lambda: x.expand_as(x),
             "expand_minus_one": lambda: x.expand(-1)}[how]()
        flags = (y is x, y.is_leaf, y._base is x, y.grad_fn)
        (y * y).sum().backward()
        return flags, y.grad_fn.next_functions, x.grad
    same(program, device)


@needs_torch
@pytest.mark.parametrize("shape", [(3,), (1, 3), (1, 1, 3)])
def test_an_expand_that_repeats_no_element_is_writable(device, shape):
    def program(M):
        z = M.ones(3)
        y = z.expand(*shape)
        y.add_(1.0)
        return y is z, z, y, z._version, y._version
    same(program, device)


@needs_torch
def test_repeat_and_sum_backward_with_unit_sizes_after_expand_changed(device):
    """(Both expand to a shape that may be their own inside minigrad.)"""
    def program(M):
        x = M.tensor([[1.0, 2.0]], requires_grad=True)
        y = x.repeat(1, 1) * x.sum(0, keepdim=True)
        y.sum().backward()
        e = x.expand(1, 2)
        return y, x.grad, e is x, e.grad_fn
    same(program, device)


# --- 6. cat with a 1-D empty tensor ------------------------------------------------------------

CATS = {
    "after": (lambda m, e: [m, e], 0),
    "before, dim 1": (lambda m, e: [e, m], 1),
    "around, dim -1": (lambda m, e: [e, m, e], -1),
}


@needs_torch
@pytest.mark.parametrize("empty_grad", [True, False])
@pytest.mark.parametrize("case", sorted(CATS))
def test_cat_keeps_a_1d_empty_tensor_as_an_input(device, case, empty_grad):
    parts, dim = CATS[case]

    def program(M):
        m = M.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
        e = M.zeros(0, requires_grad=empty_grad)
        out = M.cat(parts(m, e), dim)
        nodes = out.grad_fn.next_functions
        (out * out).sum().backward()
        return out, nodes, m.grad, e.grad
    same(program, device)


@needs_torch
def test_cat_of_empty_tensors_only_and_grad_of_the_empty_one(device):
    def program(M):
        e, f = M.zeros(0, requires_grad=True), M.zeros(0, requires_grad=True)
        m = M.ones(2, 3, requires_grad=True)
        both_empty = M.cat([e, f])
        (g,) = M.autograd.grad(M.cat([m, e]).sum(), [e])
        return both_empty, both_empty.grad_fn.next_functions, g
    same(program, device)


# --- 7. missing names ------------------------------------------------------------------------

@needs_torch
def test_autograd_backward_of_several_tensors(device):
    def program(M):
        x = _leaf(M, 3)
        M.autograd.backward([(x * 2).sum(), x * x], [None, M.tensor([1.0, 0.0, 2.0])])
        first = x.grad
        x.grad = None
        M.autograd.backward((x * x).sum(), grad_tensors=M.tensor(3.0))
        return first, x.grad
    same(program, device)


@needs_torch
def test_autograd_backward_into_inputs_only(device):
    def program(M):
        x = _leaf(M, 3)
        w = M.tensor([2.0, 1.0, 0.0], requires_grad=True)
        y = x * w
        M.autograd.backward([(y * y).sum()], inputs=[w, y])
        M.autograd.backward([], inputs=None)  # nothing to do
        return x.grad, w.grad, y.grad
    same(program, device)


@needs_torch
def test_autograd_backward_keeps_the_graph_when_asked(device):
    def program(M):
        x = _leaf(M, 3)
        y = (x * x).sum()
        M.autograd.backward(y, retain_graph=True)
        M.autograd.backward(y, create_graph=False)
        return x.grad
    same(program, device)


AUTOGRAD_BACKWARD_ERRORS = {
    "fewer gradients": (lambda M, x: M.autograd.backward([(x * 2).sum(), x * 1], [None]),
                        RuntimeError, "got 2 tensors and 1 gradients"),
    "a tensor without grad": (lambda M, x: M.autograd.backward([(x * 2).sum(), M.ones(1)]),
                              RuntimeError, "element 1 of tensors does not require grad"),
    "a number as gradient": (lambda M, x: M.autograd.backward([(x * 2).sum()], [2.0]),
                             TypeError, "gradients can be either Tensors or None"),
    "no implicit gradient": (lambda M, x: M.autograd.backward([x * 2]), RuntimeError,
                             "grad can be implicitly created only"),
}


@needs_torch
@pytest.mark.parametrize("case", sorted(AUTOGRAD_BACKWARD_ERRORS))
def test_autograd_backward_refuses_as_torch(device, case):
    program, kind, phrase = AUTOGRAD_BACKWARD_ERRORS[case]
    raises_both(lambda M: program(M, _leaf(M, 3)), device, kind, phrase)


@needs_torch
@pytest.mark.parametrize("source", ["leaf", "non_leaf"])
def test_detach_in_place(device, source):
    def program(M):
        x = _leaf(M, 3)
        y = x if source == "leaf" else x * 2
        out = y.detach_()
        z = y * 3
        return out is y, y.requires_grad, y.is_leaf, y.grad_fn, z.requires_grad, y._version
    same(program, device)


@needs_torch
@pytest.mark.parametrize("view", ["slice", "view_of_plain"])
def test_detach_in_place_of_a_view_raises(device, view):
    def program(M):
        base = _leaf(M, 3) * 2 if view == "slice" else M.ones(3)
        base[1:].detach_()
    raises_both(program, device, RuntimeError, "Can't detach views in-place",
                "can't detach views in-place")


@needs_torch
def test_detach_in_place_of_a_saved_tensor_breaks_its_backward(device):
    def program(M):
        x = _leaf(M, 3)
        y = x * 2
        z = y * y
        y.detach_()
        z.sum().backward()
    raises_both(program, device, RuntimeError, "detached in-place", "detached in-place")


@needs_torch
def test_detach_in_place_of_a_base_keeps_its_views_in_the_graph(device):
    def program(M):
        x = _leaf(M, 3)
        y = x * 2
        v = y[1:]
        y.detach_()
        (v * v).sum().backward()
        return v.requires_grad, v.grad_fn, x.grad
    same(program, device)


@needs_torch
def test_is_anomaly_enabled_and_check_nan(device):
    def program(M):
        states = [M.is_anomaly_enabled()]
        with M.autograd.detect_anomaly():
            states.append((M.is_anomaly_enabled(), M.is_anomaly_check_nan_enabled()))
            with M.autograd.detect_anomaly(check_nan=False):
                states.append((M.is_anomaly_enabled(), M.is_anomaly_check_nan_enabled()))
            states.append(M.is_anomaly_check_nan_enabled())
        states.append((M.is_anomaly_enabled(), M.is_anomaly_check_nan_enabled()))
        return states
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch's "Anomaly Detection has been enabled")
        same(program, device)


@needs_torch
def test_detect_anomaly_without_check_nan_lets_nan_gradients_through(device):
    def program(M, check_nan):
        x = M.tensor([0.0, 4.0], requires_grad=True)
        with M.autograd.detect_anomaly(check_nan=check_nan):
            (x.sqrt() * 0).sum().backward()
        return x.grad

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours, theirs = both(lambda M: program(M, False), device)
        np.testing.assert_array_equal(values(ours), values(theirs))
        assert np.isnan(values(ours)[0])
        for M in (torch, On(mg, device)):
            with pytest.raises(RuntimeError, match="(?i)nan"):
                program(M, True)


def test_detect_anomaly_without_check_nan_as_a_decorator(device):
    x = mg.tensor([-1.0], device=device, requires_grad=True)

    @mg.autograd.detect_anomaly(check_nan=False)
    def quiet():
        assert mg.is_anomaly_enabled() and not mg.is_anomaly_check_nan_enabled()
        return x.log()

    @mg.autograd.detect_anomaly
    def checked():
        return x.log()

    assert np.isnan(values(quiet())[0])
    with pytest.raises(RuntimeError, match="Log"):
        checked()
    assert not mg.is_anomaly_enabled() and mg.is_anomaly_check_nan_enabled()


@needs_torch
@pytest.mark.parametrize("create_graph", [False, True])
def test_grad_materializes_zeros_for_unused_inputs(device, create_graph):
    def program(M):
        x, z = _leaf(M, 3), M.tensor([[1.0, 2.0]], requires_grad=True)
        return M.autograd.grad((x * x).sum(), [z, x], materialize_grads=True,
                               create_graph=create_graph)
    same(program, device)


@needs_torch
def test_grad_refuses_materialize_grads_without_allow_unused(device):
    def program(M):
        x, z = _leaf(M, 3), _leaf(M, 2)
        M.autograd.grad((x * x).sum(), [z], allow_unused=False, materialize_grads=True)
    raises_both(program, device, ValueError, "Expected allow_unused to be True or not passed",
                "allow_unused")
