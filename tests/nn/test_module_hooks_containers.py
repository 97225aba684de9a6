"""nn.ParameterList / nn.ParameterDict and nn.Module's hooks against PyTorch's, run side by
side: the same model in both libraries with the same weights, the same calls, and what the
hooks receive (gradients' values and shapes, where None stands), the order they run in,
what they return and the errors and warnings, compared at run time. Also the smaller
Module methods next to them: named_modules' memo, set_submodule, to_empty, type, repr
with extra_repr, dir and the missing-forward error."""
import copy
import warnings

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from minigrad.compile import CompileWarning
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

pytestmark = needs_torch


# --- helpers ------------------------------------------------------------------------------------

def plain(value):
    """``value`` with every tensor (torch's or ours) as ("tensor", shape, dtype name, values)
    and tuples and lists as tuples, so the two libraries' results compare."""
    if isinstance(value, (tuple, list)):
        return tuple(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if torch is not None and isinstance(value, torch.Tensor):
        array = value.detach().cpu().numpy()
    elif isinstance(value, mg.Tensor):
        array = np.asarray(value.detach().cpu().numpy())
    else:
        return value
    return ("tensor", tuple(array.shape), array.dtype.name, array)


def assert_same(theirs, ours, path="result"):
    """Equal structure, names and types; tensors of the same shape and dtype, values close."""
    if isinstance(theirs, tuple) and theirs[:1] == ("tensor",):
        assert isinstance(ours, tuple) and ours[:1] == ("tensor",), f"{path}: {ours!r}"
        assert theirs[1:3] == ours[1:3], f"{path}: {theirs[1:3]} vs {ours[1:3]}"
        np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-5, atol=1e-6, err_msg=path)
    elif isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), f"{path}: {ours!r}"
        for i, (a, b) in enumerate(zip(theirs, ours)):
            assert_same(a, b, f"{path}[{i}]")
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict) and list(ours) == list(theirs), f"{path}: {ours!r}"
        for k in theirs:
            assert_same(theirs[k], ours[k], f"{path}[{k!r}]")
    else:
        assert ours == theirs, f"{path}: {ours!r} != {theirs!r}"


def inputs(M, *shapes, requires_grad=True):
    """Tensors of fixed values (the same in both libraries) of the given shapes."""
    rng = np.random.default_rng(7)
    return [M.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=requires_grad)
            for s in shapes]


def twins(build, device):
    """(torch model, our model): ``build(M)`` in both, with our weights copied into torch's."""
    ours = build(On(mg, device))
    theirs = build(torch)
    theirs.load_state_dict({k: torch.tensor(np.asarray(v.cpu().numpy()))
                            for k, v in ours.state_dict().items()})
    return theirs, ours


def side_by_side(build, run, device):
    """``run(M, model)`` for torch's model and ours (the same weights); both must agree.
    Returns torch's result, made plain."""
    theirs_model, ours_model = twins(build, device)
    theirs = plain(run(torch, theirs_model))
    ours = plain(run(On(mg, device), ours_model))
    assert_same(theirs, ours)
    return theirs


def mlp(M):
    return M.nn.Sequential(M.nn.Linear(3, 4), M.nn.Tanh(), M.nn.Linear(4, 2))


def record_backward(log, name):
    """A full backward hook and a pre-hook that log what they receive under ``name``."""
    def hook(module, grad_input, grad_output):
        log.append(("full", name, grad_input, grad_output))

    def pre_hook(module, grad_output):
        log.append(("pre", name, grad_output))
    return hook, pre_hook


def caught(run):
    """``run()``'s result and the (category name, message) of each warning it gave."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = run()
    return result, [(w.category.__name__, str(w.message)) for w in seen]


# --- ParameterList -------------------------------------------------------------------------------

def test_parameter_list_registers_wraps_and_indexes_as_torch(device):
    def program(M):
        a, b, c = inputs(M, (2, 3), (3,), (1,), requires_grad=False)
        pl = M.nn.ParameterList([a, M.nn.Parameter(b)])
        pl.append(c)
        pl.extend([M.ones(2)])
        pl += [M.zeros(1, 1)]
        pl[1] = M.full((4,), 2.0)              # a Tensor put in is made a Parameter
        pl.append("not a tensor")              # kept as it is, not a parameter
        m = M.nn.Module()
        m.params = pl
        return (len(pl), list(m.state_dict()), [n for n, _ in m.named_parameters()],
                [type(p).__name__ for p in pl], [getattr(p, "requires_grad", None) for p in pl],
                pl[-2], pl[0], len(pl[1:4]), type(pl[::2]).__name__, [p for p in pl[:2]],
                "0" in dir(pl), pl[-1])

    theirs = side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)
    assert theirs[0] == 6 and theirs[3][:5] == ("Parameter",) * 5


def test_a_parameter_list_shares_the_memory_of_the_tensor_put_in(device):
    def program(M):
        t = M.zeros(3)
        pl = M.nn.ParameterList([t])
        with M.no_grad():
            t.add_(1.0)
        return pl[0], pl[0].is_leaf

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


@pytest.mark.parametrize("case", ["extend a tensor", "extend a number", "index out of range",
                                  "set out of range", "call it", "index by a string"])
def test_parameter_list_errors_match_torch(case, device):
    def program(M):
        pl = M.nn.ParameterList([M.zeros(2)])
        if case == "extend a tensor":
            pl.extend(M.zeros(3))
        elif case == "extend a number":
            pl.extend(3)
        elif case == "index out of range":
            pl[1]
        elif case == "set out of range":
            pl[-2] = M.zeros(1)
        elif case == "call it":
            pl(M.zeros(1))
        else:
            pl["0"]

    kind = {"extend a tensor": TypeError, "extend a number": TypeError,
            "index out of range": IndexError, "set out of range": IndexError,
            "call it": RuntimeError, "index by a string": TypeError}[case]
    raises_as_torch(program, kind, device)


def test_a_parameter_list_model_trains_as_torch(device):
    def build(M):
        class Mix(M.nn.Module):
            def __init__(self):
                super().__init__()
                self.weights = M.nn.ParameterList(
                    [M.nn.Parameter(M.ones(3, 3) * (i + 1) / 7) for i in range(3)])

            def forward(self, x):
                for w in self.weights:
                    x = M.tanh(x @ w)
                return x
        return Mix()

    def run(M, model):
        (x,) = inputs(M, (2, 3))
        model(x).pow(2).sum().backward()
        return ([n for n, _ in model.named_parameters()], x.grad,
                [p.grad for p in model.parameters()])

    side_by_side(build, run, device)


# --- ParameterDict -------------------------------------------------------------------------------

def test_parameter_dict_orders_keys_wraps_tensors_and_names_as_torch(device):
    def program(M):
        a, b, c = inputs(M, (2,), (3,), (1,), requires_grad=False)
        plain_dict = M.nn.ParameterDict({"zeta": a, "alpha": b})          # sorted keys
        ordered = M.nn.ParameterDict(
            __import__("collections").OrderedDict([("zeta", a), ("alpha", b)]))
        pairs = M.nn.ParameterDict([("q", c), ("b", a)])
        pairs["new"] = M.ones(2)
        pairs["obj"] = 3                         # not a tensor: an attribute, not a parameter
        m = M.nn.Module()
        m.pd = pairs
        return (list(plain_dict), list(ordered), list(pairs.keys()),
                [type(v).__name__ for v in pairs.values()],
                [(k, type(v).__name__) for k, v in pairs.items()],
                list(m.state_dict()), [n for n, _ in m.named_parameters()],
                len(pairs), "q" in pairs, "zz" in pairs, pairs["q"], pairs.get("zz", 5),
                list(reversed(pairs)))

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


def test_parameter_dict_mapping_methods_match_torch(device):
    def program(M):
        a, b, c = inputs(M, (2,), (3,), (1,), requires_grad=False)
        pd = M.nn.ParameterDict([("a", a), ("b", b)])
        got = [pd.setdefault("c", c), pd.setdefault("a", c)]
        got.append(pd.pop("b"))
        got.append(pd.popitem())
        copied = pd.copy()
        copied["d"] = M.zeros(1)
        merged = pd | copied
        pd |= M.nn.ParameterDict([("e", M.ones(1))])
        made = pd.fromkeys(["x", "y"], M.zeros(2))
        keys = [list(pd), list(copied), list(merged), list(made)]
        del pd["a"]
        keys.append(list(pd))
        pd.update({"y": M.ones(1), "x": M.ones(1)})
        keys.append(list(pd))
        pd.clear()
        return got, keys, len(pd), list(pd.state_dict()), type(merged).__name__

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


@pytest.mark.parametrize("case", ["non-string key", "key with a dot", "update a number",
                                  "update with a triple", "update with a number item",
                                  "missing key", "call it"])
def test_parameter_dict_errors_match_torch(case, device):
    def program(M):
        pd = M.nn.ParameterDict()
        if case == "non-string key":
            pd[1] = M.zeros(1)
        elif case == "key with a dot":
            pd["a.b"] = M.zeros(1)
        elif case == "update a number":
            pd.update(3)
        elif case == "update with a triple":
            pd.update([("a", M.zeros(1), 1)])
        elif case == "update with a number item":
            pd.update([1])
        elif case == "missing key":
            pd["nope"]
        else:
            pd(M.zeros(1))

    kind = {"non-string key": TypeError, "key with a dot": KeyError,
            "update a number": TypeError, "update with a triple": ValueError,
            "update with a number item": TypeError, "missing key": AttributeError,
            "call it": RuntimeError}[case]
    raises_as_torch(program, kind, device)


def test_parameter_containers_load_torch_state_dicts(device):
    def build(M):
        m = M.nn.Module()
        m.pl = M.nn.ParameterList([M.zeros(2), M.zeros(1, 3)])
        m.pd = M.nn.ParameterDict({"w": M.zeros(4)})
        return m

    theirs = build(torch)
    for p in theirs.parameters():
        torch.nn.init.uniform_(p)
    ours = build(On(mg, device))
    result = ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert repr(result) == "<All keys matched successfully>"
    assert_same(plain(dict(theirs.state_dict())), plain(dict(ours.state_dict())))


# --- forward hooks ---------------------------------------------------------------------------

def test_forward_pre_hook_with_kwargs_replaces_args_and_kwargs_as_torch(device):
    def build(M):
        class Scale(M.nn.Module):
            def forward(self, x, scale=1.0, shift=0.0):
                return x * scale + shift
        return Scale()

    def run(M, model):
        seen = []

        def pre(module, args, kwargs):
            seen.append((len(args), dict(kwargs)))
            return (args[0] * 2,), {**kwargs, "shift": 1.0}

        def hook(module, args, kwargs, output):
            seen.append(("after", dict(kwargs), args[0]))
            return output - 0.5
        model.register_forward_pre_hook(pre, with_kwargs=True)
        model.register_forward_hook(hook, with_kwargs=True)
        (x,) = inputs(M, (2,), requires_grad=False)
        return model(x, scale=3.0), seen

    side_by_side(build, run, device)


def test_forward_pre_hook_with_kwargs_must_return_a_pair(device):
    def program(M):
        lin = M.nn.Linear(2, 2)
        lin.register_forward_pre_hook(lambda m, args, kwargs: args, with_kwargs=True)
        lin(M.zeros(1, 2))

    message = raises_as_torch(program, RuntimeError, device)
    assert "(new_args, new_kwargs)" in message


def test_prepend_puts_hooks_first_as_torch(device):
    def run(M, model):
        order = []
        for prepend in (False, True, False):
            tag = f"{len(order)}{'p' if prepend else ''}"
            order.append(tag)
            model.register_forward_pre_hook(lambda *a, t=tag: order.append("pre" + t),
                                            prepend=prepend)
            model.register_forward_hook(lambda *a, t=tag: order.append("fwd" + t),
                                        prepend=prepend)
            model.register_full_backward_pre_hook(lambda *a, t=tag: order.append("bpre" + t),
                                                  prepend=prepend)
            model.register_full_backward_hook(lambda *a, t=tag: order.append("bwd" + t),
                                              prepend=prepend)
        (x,) = inputs(M, (1, 3))
        model(x).sum().backward()
        return order

    side_by_side(mlp, run, device)


def test_a_forward_hook_returning_a_value_replaces_the_output(device):
    def run(M, model):
        model[0].register_forward_hook(lambda m, args, out: out * 2)
        model.register_forward_pre_hook(lambda m, args: args[0] + 1)   # not a tuple: wrapped
        (x,) = inputs(M, (2, 3))
        out = model(x)
        out.sum().backward()
        return out, x.grad

    side_by_side(mlp, run, device)


@pytest.mark.parametrize("where", ["forward", "pre-hook", "hook"])
def test_always_call_hooks_run_when_the_call_raises(where, device):
    def program(M):
        class Boom(M.nn.Module):
            def forward(self, x):
                if where == "forward":
                    raise ValueError("in forward")
                return x
        seen = []
        m = Boom()
        if where == "pre-hook":
            m.register_forward_pre_hook(lambda *a: (_ for _ in ()).throw(ValueError("pre")))
        m.register_forward_hook(lambda mod, args, out: seen.append(("first", out)),
                                always_call=True)
        if where == "hook":
            m.register_forward_hook(lambda *a: (_ for _ in ()).throw(ValueError("hook")))
        m.register_forward_hook(lambda mod, args, kwargs, out: seen.append(("kw", kwargs, out)),
                                always_call=True, with_kwargs=True)
        m.register_forward_hook(lambda *a: seen.append("plain"))
        try:
            m(M.zeros(1), )
        except ValueError as e:
            return str(e), seen

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


def test_an_always_call_hook_that_raises_too_is_a_warning(device):
    def program(M):
        class Boom(M.nn.Module):
            def forward(self, x):
                raise ValueError("in forward")
        m = Boom()

        def bad(*args):
            raise KeyError("also")
        m.register_forward_hook(bad, always_call=True)

        def run():
            with pytest.raises(ValueError, match="in forward"):
                m(M.zeros(1))
        return caught(run)[1]

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


def test_removing_a_hook_handle_clears_its_flags(device):
    def program(M):
        lin = M.nn.Linear(1, 1)
        handle = lin.register_forward_hook(lambda *a: None, with_kwargs=True, always_call=True)
        pre = lin.register_forward_pre_hook(lambda *a: None, with_kwargs=True)
        handle.remove()
        pre.remove()
        return (len(lin._forward_hooks), len(lin._forward_hooks_with_kwargs),
                len(lin._forward_hooks_always_called), len(lin._forward_pre_hooks_with_kwargs),
                type(handle).__name__, isinstance(handle.id, int))

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


# --- full backward hooks -------------------------------------------------------------------------

def test_full_backward_hooks_see_the_gradients_and_order_of_torch(device):
    def run(M, model):
        log = []
        for name, module in model.named_modules():
            hook, pre_hook = record_backward(log, name or "top")
            module.register_full_backward_hook(hook)
            module.register_full_backward_pre_hook(pre_hook)
        (x,) = inputs(M, (5, 3))
        out = model(x)
        out.pow(2).sum().backward()
        return log, x.grad, [p.grad for p in model.parameters()], type(out.grad_fn).__name__

    log, *_, node = side_by_side(mlp, run, device)
    assert node == "BackwardHookFunctionBackward"
    assert [entry[:2] for entry in log][:2] == [("pre", "top"), ("pre", "2")]


def test_backward_hooks_with_several_inputs_and_outputs_match_torch(device):
    """Non-Tensor arguments and outputs are None, an integer input and one that needs no
    gradient get zeros, an output that got no gradient is None, as in torch."""
    def build(M):
        class Pick(M.nn.Module):
            def forward(self, x, idx, scale, n, bias=None):
                return x[idx] * scale * n, idx + 1, "label", (x * bias).sum()
        return Pick()

    def run(M, model):
        log = []
        hook, pre_hook = record_backward(log, "pick")
        model.register_full_backward_hook(hook)
        model.register_full_backward_pre_hook(pre_hook)
        x, scale, bias = inputs(M, (4,), (), (4,))
        scale.requires_grad_(False)
        out = model(x, M.tensor([0, 2]), scale, 3, bias=bias)
        out[0].sum().backward()
        return log, x.grad, bias.grad, [getattr(o, "requires_grad", None) for o in out]

    side_by_side(build, run, device)


def test_an_unused_input_gets_a_zero_gradient_as_torch(device):
    def build(M):
        class FirstOnly(M.nn.Module):
            def forward(self, x, y):
                return x * 2, y * 3
        return FirstOnly()

    def run(M, model):
        log = []
        model.register_full_backward_hook(record_backward(log, "m")[0])
        x, y = inputs(M, (2,), (3,))
        a, _ = model(x, y)
        a.sum().backward()
        return log, x.grad, y.grad

    side_by_side(build, run, device)


def test_returned_gradients_replace_grad_input_and_grad_output(device):
    def run(M, model):
        model[0].register_full_backward_hook(lambda m, gi, go: (gi[0] * 10,))
        model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * -3,))
        model[1].register_full_backward_hook(lambda m, gi, go: None)
        (x,) = inputs(M, (2, 3))
        model(x).sum().backward()
        return x.grad, [p.grad for p in model.parameters()]

    side_by_side(mlp, run, device)


def test_a_hook_returning_none_entries_stops_those_gradients(device):
    def run(M, model):
        model.register_full_backward_hook(lambda m, gi, go: (None,))
        (x,) = inputs(M, (2, 3))
        model(x).sum().backward()
        return x.grad, [p.grad for p in model.parameters()]

    side_by_side(mlp, run, device)


@pytest.mark.parametrize("kind", ["full", "pre"])
def test_returning_the_wrong_number_of_gradients_raises_as_torch(kind, device):
    def program(M):
        lin = M.nn.Linear(2, 2)
        if kind == "full":
            lin.register_full_backward_hook(lambda m, gi, go: (gi[0], None))
        else:
            lin.register_full_backward_pre_hook(lambda m, go: (go[0], go[0]))
        lin(M.ones(1, 2, requires_grad=True)).sum().backward()

    message = raises_as_torch(program, RuntimeError, device)
    assert "invalid number" in message and "got 2, but expected 1" in message


def test_hooks_fire_on_the_outputs_when_no_input_requires_grad(device):
    def run(M, model):
        log = []
        model[0].register_full_backward_hook(record_backward(log, "first")[0])
        (x,) = inputs(M, (2, 3), requires_grad=False)
        _, warned = caught(lambda: model(x).sum().backward())
        return log, warned, model[0].bias.grad

    log, warned, _ = side_by_side(mlp, run, device)
    assert log[0][2] == (None,) and warned[0][0] == "UserWarning"


def test_a_hook_without_input_gradients_must_return_none(device):
    def program(M):
        lin = M.nn.Linear(2, 2)
        lin.register_full_backward_hook(lambda m, gi, go: (M.ones(1, 2),))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lin(M.ones(1, 2)).sum().backward()

    message = raises_as_torch(program, RuntimeError, device)
    assert "no input requires gradient" in message


def test_no_hook_fires_without_a_graph(device):
    def build(M):
        class Detached(M.nn.Module):
            def forward(self, x):
                return x.detach() * 2
        return Detached()

    def run(M, model):
        calls = []
        model.register_full_backward_hook(lambda *a: calls.append("full"))
        model.register_full_backward_pre_hook(lambda *a: calls.append("pre"))
        (x,) = inputs(M, (2,))
        out = model(x)                            # the output needs no gradient
        with M.no_grad():
            quiet = model(x)
        (x * 2).sum().backward()
        return calls, out.requires_grad, quiet.requires_grad, quiet.grad_fn is None

    side_by_side(build, run, device)


def test_a_list_output_warns_and_its_hooks_never_fire(device):
    def build(M):
        class Listed(M.nn.Module):
            def forward(self, x):
                return [x * 2]
        return Listed()

    def run(M, model):
        calls = []
        model.register_full_backward_hook(lambda *a: calls.append("full"))
        (x,) = inputs(M, (2,))
        out, warned = caught(lambda: model(x))
        out[0].sum().backward()
        return calls, warned, x.grad

    side_by_side(build, run, device)


def test_hooks_are_taken_when_forward_runs(device):
    """As in torch: a hook removed after the forward still fires for that graph; one added
    after it does not, and a removed one never fires for a later call."""
    def run(M, model):
        calls = []
        (x,) = inputs(M, (1, 3))
        early = model.register_full_backward_hook(lambda *a: calls.append("early"))
        out = model(x)
        early.remove()
        model.register_full_backward_hook(lambda *a: calls.append("late"))
        out.sum().backward()
        model(x).sum().backward()
        return calls

    side_by_side(mlp, run, device)


def test_hooks_fire_for_each_call_of_a_shared_module_and_each_backward(device):
    def build(M):
        class Twice(M.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = M.nn.Linear(3, 3)

            def forward(self, x):
                return self.lin(M.tanh(self.lin(x)))
        return Twice()

    def run(M, model):
        log = []
        hook, pre_hook = record_backward(log, "lin")
        model.lin.register_full_backward_hook(hook)
        model.lin.register_full_backward_pre_hook(pre_hook)
        (x,) = inputs(M, (2, 3))
        loss = model(x).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        return log, x.grad

    log, _ = side_by_side(build, run, device)
    assert len(log) == 8


def test_forward_hooks_see_the_inputs_given_to_forward(device):
    def run(M, model):
        seen = []
        model.register_full_backward_hook(lambda *a: None)
        model.register_forward_hook(
            lambda m, args, out: seen.append((type(args[0].grad_fn).__name__,
                                              type(out.grad_fn).__name__)))
        (x,) = inputs(M, (1, 3))
        out = model(x)
        return seen, type(out.grad_fn).__name__, out

    seen, *_ = side_by_side(mlp, run, device)
    assert seen[0][0] == "BackwardHookFunctionBackward"


@pytest.mark.parametrize("first", ["full", "old"])
def test_full_and_deprecated_backward_hooks_do_not_mix(first, device):
    def program(M):
        lin = M.nn.Linear(1, 1)
        if first == "full":
            lin.register_full_backward_hook(lambda *a: None)
            lin.register_backward_hook(lambda *a: None)
        else:
            lin.register_backward_hook(lambda *a: None)
            lin.register_full_backward_hook(lambda *a: None)

    assert "Cannot use both" in raises_as_torch(program, RuntimeError, device)


def test_the_deprecated_backward_hook_warns_and_sees_the_output_gradient(device):
    def build(M):
        class Double(M.nn.Module):
            def forward(self, x):
                return x * 2
        return Double()

    def run(M, model):
        log = []
        model.register_backward_hook(lambda m, gi, go: log.append((m is model, go)))
        (x,) = inputs(M, (3,))
        out, warned = caught(lambda: model(x * 1))
        out.sum().backward()
        return log, warned, x.grad

    log, warned, _ = side_by_side(build, run, device)
    assert warned and warned[0][0] == "FutureWarning"


def test_hooked_modules_in_a_compiled_step_run_eagerly_with_their_hooks(device):
    model = nn.Linear(3, 2).to(device)
    calls = []
    model.register_forward_hook(lambda *a: calls.append("forward"))
    model.register_full_backward_hook(lambda *a: calls.append("backward"))

    def step(x):
        model.zero_grad()
        loss = model(x).sum()
        loss.backward()
        return loss

    run = mg.compile(step)
    x = mg.ones(4, 3, device=device, requires_grad=True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(4):
            run(x)
    assert calls == ["forward", "backward"] * 4
    assert any(issubclass(w.category, CompileWarning) and "hooks" in str(w.message)
               for w in seen)


def test_a_module_without_hooks_keeps_the_plain_call(device):
    lin = nn.Linear(2, 2).to(device)
    handle = lin.register_full_backward_hook(lambda *a: None)
    handle.remove()
    out = lin(mg.ones(1, 2, device=device, requires_grad=True))
    assert type(out.grad_fn).__name__ != "BackwardHookFunctionBackward"
    clone = copy.deepcopy(lin)                    # the hook tables are copied, not shared
    clone.register_forward_hook(lambda m, a, o: o * 0)
    assert not lin._forward_hooks and float(clone(mg.ones(1, 2, device=device)).abs().sum()) == 0


# --- smaller Module methods ----------------------------------------------------------------------

def test_named_modules_memo_prefix_and_duplicates_match_torch(device):
    def program(M):
        m = mlp(M)
        m.add_module("again", m[0])
        return ([n for n, _ in m.named_modules(memo={m[0]}, prefix="p")],
                [n for n, _ in m.named_modules(memo={m[1]}, remove_duplicate=False)],
                [n for n, _ in m.named_modules(remove_duplicate=False)],
                len(list(m.modules())), len(list(m.modules(remove_duplicate=False))))

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


@pytest.mark.parametrize("case", ["replace", "add", "strict add", "not a module value",
                                  "over a parameter", "empty", "missing parent"])
def test_set_submodule_matches_torch(case, device):
    def program(M):
        m = mlp(M)
        target = {"replace": "0", "add": "extra", "strict add": "extra",
                  "not a module value": "0", "over a parameter": "0.weight", "empty": "",
                  "missing parent": "7.x"}[case]
        value = 3 if case == "not a module value" else M.nn.Linear(3, 5)
        m.set_submodule(target, value, strict=case == "strict add")
        return [n for n, _ in m.named_modules()], m[0].out_features

    ours = On(mg, device)
    if case in ("replace", "add"):
        assert same_outcome(program, ours)
        return
    kind = ValueError if case in ("not a module value", "empty") else AttributeError
    raises_as_torch(program, kind, device)


def same_outcome(program, ours):
    theirs = program(torch)
    assert program(ours) == theirs
    return True


def test_repr_with_extra_repr_and_children_matches_torch(device):
    def program(M):
        class Block(M.nn.Module):
            def __init__(self, lines):
                super().__init__()
                self.lines = lines

            def extra_repr(self):
                return self.lines
        one, two = Block("k=1"), Block("k=1\nj=2")
        parent = Block("depth=2")
        parent.child = Block("")
        parent.inner = two
        return repr(one), repr(two), repr(parent), repr(Block(""))

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


def test_a_module_without_forward_raises_as_torch(device):
    message = raises_as_torch(lambda M: M.nn.Module()(M.zeros(1)), NotImplementedError, device)
    with pytest.raises(NotImplementedError) as theirs:
        torch.nn.Module()(torch.zeros(1))
    assert message == str(theirs.value)


def test_to_empty_and_type_keep_the_parameter_objects(device):
    def program(M):
        m = mlp(M)
        m.register_buffer("steps", M.zeros(2, dtype=M.int64))
        weight = m[0].weight
        same = m.to_empty(device="cpu") is m and m[0].weight is weight
        shapes = [(tuple(p.shape), str(p.dtype).replace("torch.", "")) for p in m.parameters()]
        m.type(M.float64)
        kinds = [str(t.dtype).replace("torch.", "") for t in m.state_dict().values()]
        return same, shapes, kinds, m[0].weight is weight

    if device != "cpu":
        pytest.skip("to_empty(device='cpu') moves the model to the CPU")
    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)


def test_dir_leaves_out_numbered_names_as_torch(device):
    def program(M):
        m = M.nn.Module()
        m.add_module("0", M.nn.Linear(1, 1))
        m.layer = M.nn.Linear(1, 1)
        m.register_buffer("steps", M.zeros(1))
        d = dir(m)
        return "0" in d, "layer" in d, "steps" in d, d == sorted(d), \
            "0" in dir(M.nn.ParameterList([M.zeros(1)]))

    side_by_side(lambda M: M.nn.Module(), lambda M, _: program(M), device)
