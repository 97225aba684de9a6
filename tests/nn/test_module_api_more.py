"""More of nn.Module's API against PyTorch's: the same calls on a torch module and on ours,
comparing names, returned values and exception types. Shared submodules under
remove_duplicate=False, attributes set before ``Module.__init__``, the containers' list and
dict methods (del, pop, insert, +, *, update, ...) and the names left after them, the checks
of register_buffer / register_parameter / add_module / train, load_state_dict's argument,
get_submodule / get_parameter / get_buffer, half(), hook handles as context managers, and the
transformer layers' activation given as a callable."""
from collections import OrderedDict

import numpy as np
import pytest

import minigrad as mg
from minigrad import nn
from tests.nn.test_transformer import torch_state
from tests.torch_ref import On, needs_torch, raises_as_torch, torch

pytestmark = needs_torch


def outcome(program, M):
    """What ``program(M)`` gives: ("returned", value) or ("raised", exception type)."""
    try:
        return "returned", program(M)
    except Exception as e:  # the type is what is compared
        return "raised", type(e)


def same_as_torch(program, device):
    """Run ``program`` with torch, then with minigrad on ``device``: the same value returned
    or the same exception type raised. Returns torch's outcome."""
    theirs = outcome(program, torch)
    ours = outcome(program, On(mg, device))
    assert ours == theirs
    return theirs


def keys(module):
    return list(module.state_dict())


def widths(modules):
    """Each Linear's out_features (other modules by type name): which module sits where."""
    return [m.out_features if hasattr(m, "out_features") else type(m).__name__
            for m in modules]


def linears(M, n):
    return [M.nn.Linear(1, i + 1) for i in range(n)]


# --- shared submodules and remove_duplicate ---------------------------------------------------

def shared_model(M):
    shared = M.nn.Linear(2, 2)
    shared.register_buffer("steps", M.zeros(1))
    m = M.nn.Module()
    m.a = shared
    m.tied = shared.weight                      # the same Parameter under another name
    m.b = M.nn.Sequential(shared, M.nn.ReLU())
    m.c = shared
    return m


@pytest.mark.parametrize("remove_duplicate", [True, False])
@pytest.mark.parametrize("recurse", [True, False])
def test_named_members_of_a_shared_submodule_match_torch(remove_duplicate, recurse, device):
    def program(M):
        m = shared_model(M)
        kw = dict(recurse=recurse, remove_duplicate=remove_duplicate)
        return ([n for n, _ in m.named_parameters(**kw)],
                [n for n, _ in m.named_buffers(**kw)],
                [n for n, _ in m.named_parameters(prefix="top", **kw)],
                [n for n, _ in m.named_modules(remove_duplicate=remove_duplicate)])

    _, (params, *_) = same_as_torch(program, device)
    if remove_duplicate is False and recurse:
        assert "b.0.weight" in params and "c.bias" in params


def test_remove_duplicate_false_yields_the_same_objects_under_every_name(device):
    m = shared_model(On(mg, device))
    named = dict(m.named_parameters(remove_duplicate=False))
    assert named["a.weight"] is named["b.0.weight"] is named["c.weight"] is named["tied"]
    assert len(list(m.parameters())) == 2


# --- attributes before Module.__init__ ----------------------------------------------------------

def test_plain_attributes_before_init_match_torch(device):
    def program(M):
        class Early(M.nn.Module):
            def __init__(self):
                self.width = 3                  # a plain attribute: allowed
                self.training = False           # __init__ sets it again
                self.plain_tensor = M.zeros(2)  # a Tensor is only an attribute
                super().__init__()
                self.lin = M.nn.Linear(self.width, 2)

        m = Early()
        return m.width, m.training, keys(m), tuple(m.plain_tensor.shape)

    assert same_as_torch(program, device)[0] == "returned"


@pytest.mark.parametrize("what", ["parameter", "module", "buffer", "register_parameter",
                                  "add_module"])
def test_registering_before_init_raises_attribute_error_as_torch(what, device):
    def program(M):
        class Broken(M.nn.Module):
            def __init__(self):
                if what == "parameter":
                    self.w = M.nn.Parameter(M.zeros(2))
                elif what == "module":
                    self.lin = M.nn.Linear(2, 2)
                elif what == "buffer":
                    self.register_buffer("b", M.zeros(2))
                elif what == "register_parameter":
                    self.register_parameter("w", M.nn.Parameter(M.zeros(2)))
                else:
                    self.add_module("lin", M.nn.Linear(2, 2))
                super().__init__()

        Broken()

    raises_as_torch(program, AttributeError, device)


# --- Sequential ---------------------------------------------------------------------------------

SEQUENTIAL_PROGRAMS = {
    "del index": lambda s: s.__delitem__(1),
    "del negative": lambda s: s.__delitem__(-1),
    "del slice": lambda s: s.__delitem__(slice(1, 3)),
    "del step": lambda s: s.__delitem__(slice(None, None, 2)),
    "del reversed step": lambda s: s.__delitem__(slice(None, None, -2)),
    "del empty slice": lambda s: s.__delitem__(slice(3, 1)),
    "del past the end": lambda s: s.__delitem__(5),
    "del before the start": lambda s: s.__delitem__(-6),
    "del by name": lambda s: s.__delitem__("1"),
    "setitem": lambda s: s.__setitem__(1, s[4]),
    "setitem negative": lambda s: s.__setitem__(-1, s[0]),
    "setitem past the end": lambda s: s.__setitem__(5, s[0]),
    "setitem not a module": lambda s: s.__setitem__(0, 3),
    "setitem None": lambda s: s.__setitem__(0, None),
    "getitem past the end": lambda s: s[5],
    "getitem float": lambda s: s[1.0],
    "getitem numpy int": lambda s: s[np.int64(2)].out_features,
    "slice": lambda s: keys(s[1:4]),
    "pop": lambda s: s.pop(1).out_features,
    "pop negative": lambda s: s.pop(-1).out_features,
    "pop slice": lambda s: widths(s.pop(slice(1, 3))),
    "pop past the end": lambda s: s.pop(5),
    "pop without a key": lambda s: s.pop(),
    "insert": lambda s: s.insert(2, s[0]) is s,
    "insert at the end": lambda s: s.insert(5, s[0]) is s,
    "insert negative": lambda s: s.insert(-5, s[4]) is s,
    "insert past the end": lambda s: s.insert(6, s[0]),
    "insert before the start": lambda s: s.insert(-6, s[0]),
    "insert not a module": lambda s: s.insert(0, 3),
    "insert None": lambda s: s.insert(0, None),
    "append": lambda s: s.append(s[0]) is s,
    "append not a module": lambda s: s.append(3),
    "extend": lambda s: s.extend(list(s)[:2]) is s,
    "extend a generator": lambda s: s.extend(m for m in list(s)[:2]) is s,
    "extend not iterable": lambda s: s.extend(3),
    "extend not modules": lambda s: s.extend([3]),
}


@pytest.mark.parametrize("name", list(SEQUENTIAL_PROGRAMS))
def test_sequential_methods_match_torch(name, device):
    def program(M):
        s = M.nn.Sequential(*linears(M, 5))
        result = SEQUENTIAL_PROGRAMS[name](s)
        return result, keys(s), list(s._modules), widths(s), len(s)

    same_as_torch(program, device)


@pytest.mark.parametrize("name", ["add", "add to itself", "add a list", "add a ModuleList",
                                  "iadd", "iadd a list", "mul", "rmul", "mul by one",
                                  "mul by zero", "mul by a negative", "mul by a float", "imul",
                                  "imul by zero", "imul by a float"])
def test_sequential_operators_match_torch(name, device):
    def program(M):
        a = M.nn.Sequential(*linears(M, 2))
        b = M.nn.Sequential(M.nn.ReLU(), M.nn.Linear(1, 7))
        ops = {
            "add": lambda: a + b,
            "add to itself": lambda: a + a,
            "add a list": lambda: a + [M.nn.ReLU()],
            "add a ModuleList": lambda: a + M.nn.ModuleList([M.nn.ReLU()]),
            "iadd": lambda: a.__iadd__(b),
            "iadd a list": lambda: a.__iadd__([M.nn.ReLU()]),
            "mul": lambda: a * 3,
            "rmul": lambda: 2 * a,
            "mul by one": lambda: a * 1,
            "mul by zero": lambda: a * 0,
            "mul by a negative": lambda: a * -2,
            "mul by a float": lambda: a * 1.5,
            "imul": lambda: a.__imul__(3),
            "imul by zero": lambda: a.__imul__(0),
            "imul by a float": lambda: a.__imul__(2.0),
        }
        out = ops[name]()
        return (type(out).__name__, out is a, keys(out), widths(out), keys(a),
                [m is a[i % len(a)] for i, m in enumerate(out)] if "mul" in name else None)

    same_as_torch(program, device)


def test_sequential_keeps_the_same_module_objects(device):
    a = nn.Sequential(nn.Linear(1, 2), nn.ReLU()).to(device)
    b = nn.Sequential(nn.GELU())
    assert list(a + b) == [a[0], a[1], b[0]]
    tripled = a * 3
    assert tripled[0] is tripled[2] is tripled[4] is a[0]
    assert len(list(tripled.parameters())) == 2


def test_sequential_of_named_modules_match_torch(device):
    def program(M):
        def named():
            return M.nn.Sequential(OrderedDict([("a", M.nn.Linear(1, 1)),
                                                ("b", M.nn.Linear(1, 2)),
                                                ("c", M.nn.Linear(1, 3))]))

        out = []
        s = named()
        del s[1]                                 # the names left become "0", "1"
        out.append((keys(s), widths(s)))
        s = named()
        s[1] = M.nn.ReLU()                       # keeps the name "b"
        out.append((keys(s), list(s._modules)))
        s = named()
        out.append((s.pop(0).out_features, list(s._modules)))
        s = named()
        s.append(M.nn.ReLU())
        out.append(list(s._modules))
        s = named()
        out.append((list(s[1:]._modules), type(s[1:]).__name__))
        s = named()
        out.append(outcome(lambda M: s * 2, M)[0])
        return out

    same_as_torch(program, device)


def test_sequential_insert_into_named_modules_raises_key_error_and_changes_nothing(device):
    def program(M):
        s = M.nn.Sequential(OrderedDict([("a", M.nn.Linear(1, 1)), ("b", M.nn.Linear(1, 2))]))
        s.insert(1, M.nn.ReLU())

    raises_as_torch(program, KeyError, device)
    s = nn.Sequential(OrderedDict([("a", nn.Linear(1, 1)), ("b", nn.Linear(1, 2))]))
    with pytest.raises(KeyError):
        s.insert(1, nn.ReLU())
    assert list(s._modules) == ["a", "b"]     # torch's leaves a half-moved container


def test_sequential_forward_after_del_and_insert_matches_torch(device):
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((3, 3)) for _ in range(4)]
    x = rng.standard_normal((2, 3))

    def program(M):
        layers = []
        for w in weights:
            layer = M.nn.Linear(3, 3, bias=False, dtype=M.float64)
            layer.load_state_dict({"weight": M.tensor(w)})
            layers.append(layer)
        s = M.nn.Sequential(*layers[:3])
        del s[0]
        s.insert(1, layers[3])
        s.append(M.nn.ReLU())
        return keys(s), s(M.tensor(x)).detach().cpu().numpy()

    ours, theirs = program(On(mg, device)), program(torch)
    assert ours[0] == theirs[0]
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12)


def test_sequential_dir_leaves_out_the_numbered_names(device):
    def program(M):
        s = M.nn.Sequential(M.nn.Linear(1, 1), M.nn.ReLU())
        return [k for k in dir(s) if k.isdigit()], "append" in dir(s)

    same_as_torch(program, device)


# --- ModuleList ----------------------------------------------------------------------------------

MODULE_LIST_PROGRAMS = {
    "del index": lambda ml: ml.__delitem__(1),
    "del slice": lambda ml: ml.__delitem__(slice(1, 4)),
    "del reversed step": lambda ml: ml.__delitem__(slice(None, None, -2)),
    "del all": lambda ml: ml.__delitem__(slice(None)),
    "del past the end": lambda ml: ml.__delitem__(5),
    "del by name": lambda ml: ml.__delitem__("1"),
    "del numpy int": lambda ml: ml.__delitem__(np.int64(1)),
    "pop": lambda ml: ml.pop(1).out_features,
    "pop negative": lambda ml: ml.pop(-1).out_features,
    "pop slice": lambda ml: widths(ml.pop(slice(1, 3))),
    "pop past the end": lambda ml: ml.pop(9),
    "pop without a key": lambda ml: ml.pop(),
    "insert": lambda ml: ml.insert(1, ml[4]),
    "insert at the start": lambda ml: ml.insert(0, ml[4]),
    "insert at the end": lambda ml: ml.insert(5, ml[0]),
    "insert past the end": lambda ml: ml.insert(7, ml[0]),
    "insert negative": lambda ml: ml.insert(-1, ml[0]),
    "insert None": lambda ml: ml.insert(0, None),
    "append": lambda ml: ml.append(ml[0]) is ml,
    "append not a module": lambda ml: ml.append(3),
    "extend": lambda ml: ml.extend(list(ml)[:2]) is ml,
    "extend not iterable": lambda ml: ml.extend(3),
    "extend not modules": lambda ml: ml.extend([3]),
    "iadd": lambda ml: ml.__iadd__([ml[0]]) is ml,
    "iadd a generator": lambda ml: ml.__iadd__(m for m in list(ml)[:2]) is ml,
    "iadd not iterable": lambda ml: ml.__iadd__(3),
    "setitem": lambda ml: ml.__setitem__(-2, ml[0]),
    "setitem past the end": lambda ml: ml.__setitem__(5, ml[0]),
    "setitem not a module": lambda ml: ml.__setitem__(0, 3),
    "getitem by name": lambda ml: ml["0"],
    "slice": lambda ml: (type(ml[1:3]).__name__, keys(ml[1:3])),
}


@pytest.mark.parametrize("name", list(MODULE_LIST_PROGRAMS))
def test_module_list_methods_match_torch(name, device):
    def program(M):
        ml = M.nn.ModuleList(linears(M, 5))
        result = MODULE_LIST_PROGRAMS[name](ml)
        return result, keys(ml), list(ml._modules), widths(ml), len(ml)

    same_as_torch(program, device)


@pytest.mark.parametrize("name", ["add", "add a list", "add a Sequential", "add a number",
                                  "add a list of numbers", "build from a number",
                                  "build from a generator"])
def test_module_list_operators_match_torch(name, device):
    def program(M):
        a = M.nn.ModuleList(linears(M, 2))
        ops = {
            "add": lambda: a + M.nn.ModuleList([M.nn.ReLU()]),
            "add a list": lambda: a + [M.nn.Linear(1, 7)],
            "add a Sequential": lambda: a + M.nn.Sequential(M.nn.Linear(1, 7)),
            "add a number": lambda: a + 1,
            "add a list of numbers": lambda: a + [1],
            "build from a number": lambda: M.nn.ModuleList(3),
            "build from a generator": lambda: M.nn.ModuleList(m for m in a),
        }
        out = ops[name]()
        return type(out).__name__, out is a, keys(out), widths(out), keys(a)

    same_as_torch(program, device)


def test_module_list_insert_of_a_non_module_raises_type_error(device):
    """torch's ModuleList.insert stores anything (and fails later); ours refuses it as
    append does."""
    ml = nn.ModuleList([nn.Linear(1, 1)])
    with pytest.raises(TypeError):
        ml.insert(0, 3)
    assert len(ml) == 1


def test_module_list_negative_insert_raises_key_error_and_changes_nothing(device):
    ml = nn.ModuleList([nn.Linear(1, 1), nn.Linear(1, 2)])
    with pytest.raises(KeyError):
        ml.insert(-1, nn.ReLU())
    assert widths(ml) == [1, 2] and list(ml._modules) == ["0", "1"]


def test_module_list_repr_groups_repeats_as_torch(device):
    def program(M):
        ml = M.nn.ModuleList([M.nn.Linear(1, 1), M.nn.Linear(1, 1), M.nn.Linear(1, 2),
                              M.nn.ReLU(), M.nn.ReLU(), M.nn.ReLU(),
                              M.nn.Sequential(M.nn.ReLU(), M.nn.Linear(2, 2)),
                              M.nn.Sequential(M.nn.ReLU(), M.nn.Linear(2, 2))])
        outer = M.nn.Module()
        outer.layers = ml
        return repr(ml), repr(M.nn.ModuleList()), repr(M.nn.ModuleList([M.nn.ReLU()])), \
            repr(outer)

    same_as_torch(program, device)


# --- ModuleDict ----------------------------------------------------------------------------------

MODULE_DICT_PROGRAMS = {
    "replace keeps the place": lambda md, M: md.__setitem__("b", M.nn.Linear(1, 9)),
    "del then add goes last": lambda md, M: (md.__delitem__("b"),
                                             md.__setitem__("b", M.nn.Linear(1, 9))),
    "clear": lambda md, M: md.clear(),
    "pop": lambda md, M: md.pop("a").out_features,
    "pop missing": lambda md, M: md.pop("x"),
    "pop without a key": lambda md, M: md.pop(),
    "del missing": lambda md, M: md.__delitem__("x"),
    "getitem missing": lambda md, M: md["x"],
    "update dict": lambda md, M: md.update({"z": M.nn.Linear(1, 7), "a": M.nn.Linear(1, 8)}),
    "update pairs": lambda md, M: md.update([("z", M.nn.Linear(1, 7)),
                                             ["y", M.nn.Linear(1, 8)]]),
    "update ModuleDict": lambda md, M: md.update(M.nn.ModuleDict({"z": M.nn.Linear(1, 7)})),
    "update OrderedDict": lambda md, M: md.update(OrderedDict(z=M.nn.Linear(1, 7))),
    "update a number": lambda md, M: md.update(3),
    "update not pairs": lambda md, M: md.update([3]),
    "update short pair": lambda md, M: md.update([("z",)]),
    "update long pair": lambda md, M: md.update([("z", M.nn.ReLU(), 3)]),
    "update a string": lambda md, M: md.update("ab"),
    "key of a method": lambda md, M: md.__setitem__("keys", M.nn.ReLU()),
    "key with a dot": lambda md, M: md.__setitem__("a.b", M.nn.ReLU()),
    "empty key": lambda md, M: md.__setitem__("", M.nn.ReLU()),
    "key not a string": lambda md, M: md.__setitem__(1, M.nn.ReLU()),
    "value not a module": lambda md, M: md.__setitem__("z", 3),
    "contains": lambda md, M: ("a" in md, "x" in md),
}


@pytest.mark.parametrize("name", list(MODULE_DICT_PROGRAMS))
def test_module_dict_methods_match_torch(name, device):
    def program(M):
        md = M.nn.ModuleDict({"c": M.nn.Linear(1, 3), "a": M.nn.Linear(1, 1),
                              "b": M.nn.Linear(1, 2)})
        result = MODULE_DICT_PROGRAMS[name](md, M)
        return (result, keys(md), list(md.keys()), widths(md.values()),
                [(k, m.out_features) for k, m in md.items()], list(md), len(md))

    same_as_torch(program, device)


@pytest.mark.parametrize("arg", ["pairs", "number", "dict"])
def test_module_dict_construction_matches_torch(arg, device):
    def program(M):
        value = {"pairs": [("b", M.nn.Linear(1, 2)), ("a", M.nn.Linear(1, 1))], "number": 3,
                 "dict": {"b": M.nn.Linear(1, 2), "a": M.nn.Linear(1, 1)}}[arg]
        return keys(M.nn.ModuleDict(value))

    same_as_torch(program, device)


# --- registration checks -------------------------------------------------------------------------

def registration_model(M):
    m = M.nn.Module()
    m.plain = 5
    m.w = M.nn.Parameter(M.zeros(2))
    m.register_buffer("b", M.zeros(2))
    m.child = M.nn.Linear(2, 2)
    m.register_buffer("empty", None)
    return m


REGISTRATIONS = {
    "buffer over a parameter": lambda m, M: m.register_buffer("w", M.zeros(1)),
    "buffer over a module": lambda m, M: m.register_buffer("child", M.zeros(1)),
    "buffer over a plain attribute": lambda m, M: m.register_buffer("plain", M.zeros(1)),
    "buffer over a method": lambda m, M: m.register_buffer("forward", M.zeros(1)),
    "buffer named training": lambda m, M: m.register_buffer("training", M.zeros(1)),
    "buffer over a buffer": lambda m, M: m.register_buffer("b", M.ones(3)),
    "buffer over an empty buffer": lambda m, M: m.register_buffer("empty", M.ones(3)),
    "buffer with a dot": lambda m, M: m.register_buffer("x.y", M.zeros(1)),
    "buffer with an empty name": lambda m, M: m.register_buffer("", M.zeros(1)),
    "buffer with a number name": lambda m, M: m.register_buffer(1, M.zeros(1)),
    "buffer not a tensor": lambda m, M: m.register_buffer("x", 3),
    "buffer a numpy array": lambda m, M: m.register_buffer("x", np.zeros(2)),
    "buffer None": lambda m, M: m.register_buffer("x", None),
    "buffer not persistent": lambda m, M: m.register_buffer("x", M.zeros(1), persistent=False),
    "buffer made persistent again": lambda m, M: (
        m.register_buffer("x", M.zeros(1), persistent=False), m.register_buffer("x", M.ones(1))),
    "parameter over a buffer": lambda m, M: m.register_parameter("b", M.nn.Parameter(M.zeros(1))),
    "parameter over a module": lambda m, M: m.register_parameter(
        "child", M.nn.Parameter(M.zeros(1))),
    "parameter over a plain attribute": lambda m, M: m.register_parameter(
        "plain", M.nn.Parameter(M.zeros(1))),
    "parameter over a parameter": lambda m, M: m.register_parameter(
        "w", M.nn.Parameter(M.zeros(3))),
    "parameter with a dot": lambda m, M: m.register_parameter("x.y", M.nn.Parameter(M.zeros(1))),
    "parameter with an empty name": lambda m, M: m.register_parameter(
        "", M.nn.Parameter(M.zeros(1))),
    "parameter with a number name": lambda m, M: m.register_parameter(
        1, M.nn.Parameter(M.zeros(1))),
    "parameter a plain tensor": lambda m, M: m.register_parameter("x", M.zeros(1)),
    "parameter None": lambda m, M: m.register_parameter("x", None),
    "module over a plain attribute": lambda m, M: m.add_module("plain", M.nn.ReLU()),
    "module over a buffer": lambda m, M: m.add_module("b", M.nn.ReLU()),
    "module over a parameter": lambda m, M: m.add_module("w", M.nn.ReLU()),
    "module over a method": lambda m, M: m.add_module("forward", M.nn.ReLU()),
    "module over a module": lambda m, M: m.add_module("child", M.nn.ReLU()),
    "module with a dot": lambda m, M: m.add_module("x.y", M.nn.ReLU()),
    "module with an empty name": lambda m, M: m.add_module("", M.nn.ReLU()),
    "module with a number name": lambda m, M: m.add_module(1, M.nn.ReLU()),
    "module not a module": lambda m, M: m.add_module("x", 3),
    "module None": lambda m, M: m.add_module("x", None),
    "register_module": lambda m, M: m.register_module("x", M.nn.ReLU()),
}


@pytest.mark.parametrize("name", list(REGISTRATIONS))
def test_registration_checks_match_torch(name, device):
    def program(M):
        m = registration_model(M)
        REGISTRATIONS[name](m, M)
        return (keys(m), [n for n, _ in m.named_buffers()], list(m._buffers),
                list(m._parameters), list(m._modules))

    same_as_torch(program, device)


@pytest.mark.parametrize("name", ["parameter over a plain attribute", "module over a buffer",
                                  "buffer over a parameter", "buffer with a dot"])
def test_registration_errors_are_one_short_line(name, device):
    kind = same_as_torch(lambda M: REGISTRATIONS[name](registration_model(M), M), device)[1]
    raises_as_torch(lambda M: REGISTRATIONS[name](registration_model(M), M), kind, device)


ASSIGNMENTS = {
    "parameter over a plain attribute": lambda m, M: setattr(m, "plain",
                                                             M.nn.Parameter(M.zeros(1))),
    "parameter over a buffer": lambda m, M: setattr(m, "b", M.nn.Parameter(M.zeros(1))),
    "module over a buffer": lambda m, M: setattr(m, "b", M.nn.ReLU()),
    "module over a parameter": lambda m, M: setattr(m, "w", M.nn.ReLU()),
    "tensor to a buffer": lambda m, M: setattr(m, "b", M.ones(4)),
    "tensor to an empty buffer": lambda m, M: setattr(m, "empty", M.ones(4)),
    "number to a buffer": lambda m, M: setattr(m, "b", 3),
    "tensor to a parameter": lambda m, M: setattr(m, "w", M.ones(2)),
    "number to a module": lambda m, M: setattr(m, "child", 3),
    "None to each": lambda m, M: (setattr(m, "w", None), setattr(m, "b", None),
                                  setattr(m, "child", None)),
    "del each": lambda m, M: (delattr(m, "w"), delattr(m, "b"), delattr(m, "child"),
                              delattr(m, "plain")),
    "del missing": lambda m, M: delattr(m, "nothing"),
}


@pytest.mark.parametrize("name", list(ASSIGNMENTS))
def test_attribute_assignment_matches_torch(name, device):
    def program(M):
        m = registration_model(M)
        ASSIGNMENTS[name](m, M)
        return (keys(m), list(m._buffers), list(m._parameters), list(m._modules),
                "plain" in m.__dict__)

    same_as_torch(program, device)


def test_non_persistent_buffer_stays_so_when_reassigned(device):
    def program(M):
        m = M.nn.Module()
        m.register_buffer("cache", M.zeros(1), persistent=False)
        m.cache = M.ones(2)
        m.register_buffer("slot", None)
        before = keys(m)
        m.slot = M.ones(1)
        return before, keys(m), [n for n, _ in m.named_buffers()]

    same_as_torch(program, device)


@pytest.mark.parametrize("mode", [True, False, 1, 0, None, "yes", np.bool_(True)])
def test_train_mode_must_be_a_bool_as_torch(mode, device):
    def program(M):
        net = M.nn.Sequential(M.nn.Linear(2, 2), M.nn.Dropout())
        net.train(mode)
        return [m.training for m in net.modules()]

    same_as_torch(program, device)


def test_train_calls_each_childs_train_as_torch(device):
    def program(M):
        calls = []

        class Frozen(M.nn.Module):
            def train(self, mode=True):  # always evaluates; records what it was asked
                calls.append(mode)
                return super().train(False)

        net = M.nn.Sequential(M.nn.Linear(2, 2), M.nn.Sequential(Frozen()))
        net.train()
        net.eval()
        return calls, [m.training for m in net.modules()]

    same_as_torch(program, device)


# --- load_state_dict ----------------------------------------------------------------------------

@pytest.mark.parametrize("arg", ["list", "None", "tensor", "pairs"])
def test_load_state_dict_of_a_non_mapping_raises_type_error_as_torch(arg, device):
    def program(M):
        lin = M.nn.Linear(2, 2)
        sd = lin.state_dict()
        value = {"list": [sd["weight"], sd["bias"]], "None": None, "tensor": M.zeros(2),
                 "pairs": list(sd.items())}[arg]
        lin.load_state_dict(value)

    raises_as_torch(program, TypeError, device)


def test_load_state_dict_takes_any_mapping_as_torch(device):
    import types

    def program(M):
        src, dst = M.nn.Linear(2, 2), M.nn.Linear(2, 2)
        result = dst.load_state_dict(types.MappingProxyType(dict(src.state_dict())))
        return str(result), bool((dst.weight == src.weight).all())

    same_as_torch(program, device)


def test_load_state_dict_takes_numpy_arrays_where_torch_refuses_them(device):
    """A deliberate difference: torch accepts only tensors as values; minigrad's documented
    rule also takes NumPy (and CuPy) arrays, so checkpoints cross without a conversion."""
    def program(M):
        lin = M.nn.Linear(2, 2)
        lin.load_state_dict({"weight": np.ones((2, 2), np.float32),
                             "bias": np.zeros(2, np.float32)})
        return lin.weight.sum().item()

    with pytest.raises(RuntimeError):
        program(torch)
    assert program(On(mg, device)) == 4.0


def test_failed_load_still_copies_nothing(device):
    lin = nn.Linear(2, 2).to(device)
    before = lin.weight.numpy().copy()
    with pytest.raises(RuntimeError):
        lin.load_state_dict({"weight": np.ones((2, 2), np.float32)})  # bias missing
    np.testing.assert_array_equal(lin.weight.numpy(), before)


# --- get_submodule, get_parameter, get_buffer ----------------------------------------------------

TARGETS = ["", "0", "1", "0.weight", "1.running", "1.count", "1.empty", "0.nobias", "2",
           "0.nope", "nope.x", "0.weight.x", "1.training", "1.forward", "top", "top.x"]


def lookup_model(M):
    net = M.nn.Sequential(M.nn.Linear(2, 2), M.nn.Module())
    net[1].register_buffer("running", M.zeros(2))
    net[1].register_buffer("count", M.zeros(1, dtype=M.int64))
    net[1].register_buffer("empty", None)
    net[0].register_parameter("nobias", None)
    net.top = M.nn.Parameter(M.zeros(3))
    return net


def describe(value):
    return type(value).__name__ if not hasattr(value, "shape") else tuple(value.shape)


@pytest.mark.parametrize("getter", ["get_submodule", "get_parameter", "get_buffer"])
@pytest.mark.parametrize("target", TARGETS)
def test_getters_match_torch(getter, target, device):
    def program(M):
        net = lookup_model(M)
        found = getattr(net, getter)(target)
        return describe(found)

    same_as_torch(program, device)


def test_getters_return_the_objects_themselves(device):
    net = lookup_model(On(mg, device))
    assert net.get_submodule("") is net and net.get_submodule("1") is net[1]
    assert net.get_parameter("0.weight") is net[0].weight
    assert net.get_parameter("top") is net.top
    assert net.get_buffer("1.running") is net[1].running
    assert net.get_buffer("1.empty") is None


def test_getter_errors_are_one_short_line(device):
    raises_as_torch(lambda M: lookup_model(M).get_parameter("1.running"), AttributeError, device)
    raises_as_torch(lambda M: lookup_model(M).get_buffer("0.nope"), AttributeError, device)
    raises_as_torch(lambda M: lookup_model(M).get_submodule("0.weight"), AttributeError, device)


# --- half, float, double ------------------------------------------------------------------------

@pytest.mark.parametrize("cast", ["half", "float", "double"])
def test_casts_change_floating_parameters_and_buffers_as_torch(cast, device):
    def program(M):
        net = lookup_model(M)
        weight = net[0].weight
        assert getattr(net, cast)() is net
        return ([(k, str(v.dtype).replace("torch.", "")) for k, v in net.state_dict().items()],
                net[0].weight is weight)

    same_as_torch(program, device)


def test_half_keeps_the_parameters_and_casts_their_grads(device):
    lin = nn.Linear(2, 2).to(device)
    weight = lin.weight
    lin(mg.ones(1, 2, device=device)).sum().backward()
    assert lin.half() is lin and lin.weight is weight
    assert weight.dtype == mg.float16 and weight.grad.dtype == mg.float16
    out = lin(mg.ones(1, 2, dtype=mg.float16, device=device))
    assert out.dtype == mg.float16


# --- hook handles ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["forward", "forward_pre"])
def test_hook_handles_are_context_managers_as_torch(kind, device):
    def program(M):
        lin = M.nn.Linear(2, 2)
        calls = []
        register = getattr(lin, f"register_{kind}_hook")
        with register(lambda *args: calls.append("inside")) as handle:
            lin(M.zeros(1, 2))
            entered = hasattr(handle, "remove")
        lin(M.zeros(1, 2))
        handle.remove()                         # removing again is harmless
        return calls, entered

    assert same_as_torch(program, device) == ("returned", (["inside"], True))


def test_a_hook_is_removed_when_the_block_raises(device):
    lin = nn.Linear(2, 2).to(device)
    calls = []
    with pytest.raises(ValueError):
        with lin.register_forward_hook(lambda *args: calls.append(1)):
            raise ValueError("leave the block")
    lin(mg.zeros(1, 2, device=device))
    assert calls == []


# --- transformer activations ---------------------------------------------------------------------

def scaled_tanh(lib):
    """An activation module with a parameter, written alike in both libraries."""
    M = mg if lib is nn else torch

    class ScaledTanh(lib.Module):
        def __init__(self):
            super().__init__()
            self.gain = lib.Parameter(M.tensor([1.5], dtype=M.float64))

        def forward(self, x):
            return (x * self.gain).tanh()

    return ScaledTanh()


ACTIVATIONS = {
    "relu": ("relu", "relu"),
    "gelu": ("gelu", "gelu"),
    "F.relu": (lambda: nn.functional.relu, lambda: torch.nn.functional.relu),
    "F.gelu": (lambda: nn.functional.gelu, lambda: torch.nn.functional.gelu),
    "GELU module": (lambda: nn.GELU(), lambda: torch.nn.GELU()),
    "tanh GELU module": (lambda: nn.GELU("tanh"), lambda: torch.nn.GELU("tanh")),
    "a function": (lambda: mg.tanh, lambda: torch.tanh),
    "a module with a parameter": (lambda: scaled_tanh(nn), lambda: scaled_tanh(torch.nn)),
}


def make_activation(spec):
    return spec if isinstance(spec, str) else spec()


@pytest.mark.parametrize("kind", ["enc", "dec"])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_layer_activation_callables_match_torch(kind, name, device):
    ours_spec, theirs_spec = ACTIVATIONS[name]
    mg_cls = {"enc": nn.TransformerEncoderLayer, "dec": nn.TransformerDecoderLayer}[kind]
    torch_cls = {"enc": torch.nn.TransformerEncoderLayer,
                 "dec": torch.nn.TransformerDecoderLayer}[kind]
    ours = mg_cls(8, 2, dim_feedforward=16, dropout=0.0,
                  activation=make_activation(ours_spec)).double().to(device)
    theirs = torch_cls(8, 2, dim_feedforward=16, dropout=0.0,
                       activation=make_activation(theirs_spec), batch_first=True).double()
    assert sorted(torch_state(ours.state_dict())) == sorted(theirs.state_dict())
    theirs.load_state_dict(torch_state(ours.state_dict()))
    rng = np.random.default_rng(0)
    x, mem = rng.standard_normal((2, 5, 8)), rng.standard_normal((2, 3, 8))
    args = [mg.tensor(x, device=device)] + ([mg.tensor(mem, device=device)]
                                            if kind == "dec" else [])
    targs = [torch.tensor(x)] + ([torch.tensor(mem)] if kind == "dec" else [])
    np.testing.assert_allclose(ours(*args).numpy(), theirs(*targs).detach().numpy(),
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name", ["F.gelu", "GELU module", "a function"])
def test_callable_activation_keeps_the_state_dict_keys_of_a_named_one(name, device):
    named = nn.TransformerEncoderLayer(8, 2, 16, activation="relu")
    given = nn.TransformerEncoderLayer(8, 2, 16, activation=make_activation(ACTIVATIONS[name][0]))
    assert keys(given) == keys(named)


def test_a_function_activation_is_a_plain_attribute_a_module_is_a_submodule(device):
    layer = nn.TransformerEncoderLayer(8, 2, 16, activation=nn.functional.gelu)
    assert layer.ffn.activation is nn.functional.gelu
    assert [n for n, _ in layer.ffn.named_children()] == ["linear1", "dropout", "linear2"]
    gelu = nn.GELU("tanh")
    layer = nn.TransformerDecoderLayer(8, 2, 16, activation=gelu)
    assert layer.ffn.activation is gelu
    assert "ffn.activation.gain" in keys(nn.TransformerEncoderLayer(
        8, 2, 16, activation=scaled_tanh(nn)))


@pytest.mark.parametrize("kind", ["TransformerEncoderLayer", "TransformerDecoderLayer"])
@pytest.mark.parametrize("activation", ["tanh", "ReLU", "GELU", ""])
def test_an_unknown_activation_name_raises_runtime_error_as_torch(kind, activation, device):
    message = raises_as_torch(lambda M: getattr(M.nn, kind)(8, 2, 16, activation=activation),
                              RuntimeError, device)
    assert "relu/gelu" in message


def test_a_non_callable_activation_fails_in_forward_as_torch(device):
    def program(M):
        layer = M.nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, activation=5)
        return layer(M.zeros(1, 2, 4))

    raises_as_torch(program, TypeError, device)


def test_feed_forward_takes_callables_and_keeps_its_value_error(device):
    ffn = nn.FeedForward(4, 8, activation=nn.functional.gelu).to(device)
    x = mg.randn(2, 4, device=device)
    expected = ffn.linear2(nn.functional.gelu(ffn.linear1(x)))
    np.testing.assert_allclose(ffn(x).numpy(), expected.numpy(), rtol=1e-6)
    assert keys(ffn) == keys(nn.FeedForward(4, 8))
    with pytest.raises(ValueError):
        nn.FeedForward(4, 8, activation="tanh")
