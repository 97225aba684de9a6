"""``repr`` and ``str`` of a tensor print exactly what PyTorch prints for the same values: the
choice of format (integers, whole floats, fixed point, scientific), the alignment, the line
wrapping and indentation of nested rows, the summary of large tensors, the suffixes and their
wrapping, and the options of ``set_printoptions``. The one difference allowed is the documented
spelling of dtypes: minigrad names them as NumPy does (``dtype=float64``, not
``dtype=torch.float64``)."""
import math
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import printing
from tests.torch_ref import On

torch = pytest.importorskip("torch")

NAN, INF = math.nan, math.inf


# one suffix at the end of a repr, after ", " or on a line of its own
SUFFIX = re.compile(r"(?:, |,\n *)((?:device|size|dtype|grad_fn|requires_grad)="
                    r"(?:\([^)]*\)|<\w+>|'[^']*'|[\w.]+))$")


def expected_repr(t):
    """torch's repr of ``t`` with its dtype spelled as minigrad spells it (``dtype=float64``).
    The shorter spelling can fit on a line that torch's did not: the suffixes are then laid
    out again by torch's own rule, for the text minigrad prints."""
    text = repr(t)
    if "dtype=torch." not in text:
        return text
    body, suffixes = text[:-1], []
    while (found := SUFFIX.search(body)) is not None:
        suffixes.insert(0, found.group(1).replace("dtype=torch.", "dtype="))
        body = body[:found.start()]
    return torch._tensor_str._add_suffixes(body, suffixes, len("tensor("), force_newline=False)


@pytest.fixture(autouse=True)
def default_printing():
    """Each test starts and ends with the default print options and default dtype, in both."""
    saved = dict(printing._PRINT_OPTIONS)
    torch.set_printoptions(profile="default", sci_mode=None)
    yield
    printing._PRINT_OPTIONS.clear()
    printing._PRINT_OPTIONS.update(saved)
    torch.set_printoptions(profile="default", sci_mode=None)
    mg.set_default_dtype(mg.float32)
    torch.set_default_dtype(torch.float32)


def values(shape, scale=1.0, seed=0):
    """Seeded random values of ``shape`` (normal, times ``scale``) as nested lists."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).tolist()


def of(data, dtype=None, **kw):
    """A maker of the tensor of ``data`` (and ``dtype``, a name) in module ``M``."""
    return lambda M: M.tensor(data, dtype=None if dtype is None else getattr(M, dtype), **kw)


# Each case makes the same tensor in minigrad and in torch (M is the module).
CASES = {
    # the audit's cases
    "sci_1e10": of([1e10, 1.0]),
    "sci_1e5": of([1e5, 1.0]),
    "sci_1e8": of([1e8, 1.0]),
    "sci_above_1e8": of([2e8, 3.0]),
    "sci_1e16": of([1e16, 1.0]),
    "sci_small": of([1e-4]),
    "sci_small_mixed": of([1e-5, 0.5, 2.0]),
    "nan_ints": of([NAN, 1.0, 2.0]),
    "inf": of([INF, -INF]),
    "inf_and_whole": of([INF, -INF, 1.0, 22.0]),
    "negative_zero": of([-0.0, 1.5]),
    "negative_zero_whole": of([-0.0, 1.0]),
    "arange_1001": lambda M: M.arange(1001),
    "arange_30": lambda M: M.arange(30),
    "arange_100_float": lambda M: M.arange(100.0),
    # integers and bools
    "ints": of([1, -2, 300]),
    "int_big": of([2 ** 62, -(2 ** 63), 7]),
    "int32": of(list(range(-20, 20)), "int32"),
    "int16": of([[1, -300], [32767, 0]], "int16"),
    "int8": of([-128, 127, 0], "int8"),
    "uint8": of([0, 255, 17], "uint8"),
    "bools": of([True, False, True]),
    "bools_2d": of([[True], [False]]),
    "bools_summarised": lambda M: M.arange(1200) % 3 == 0,
    # floats
    "fixed": of([1.5, 2.25, -3.125]),
    "whole": of([1.0, -20.0, 300.0]),
    "fixed_mixed_widths": of([[-1.5, 200.25], [1e-3, 3.0]]),
    "thousandfold": of([1.0, 1000.0]),
    "over_thousandfold": of([1.0, 1000.5]),
    "zeros": lambda M: M.zeros(2, 3),
    "zeros_signed": of([0.0, -0.0]),
    "all_nan": of([NAN, NAN, NAN]),
    "all_inf": of([INF, -INF, INF]),
    "nan_inf_zero": of([NAN, INF, 0.0, -INF]),
    "nan_fixed": of([NAN, 0.5, -12.25]),
    "nan_sci": of([NAN, 1e-9, 1.0]),
    "huge": of([3e38, -1.0]),
    "tiny": of([1e-30, 1e-38]),
    "float16": of([1.5, 2.25, 1000.0], "float16"),
    "float16_inf_tiny": of([70000.0, 1e-7, 1.0], "float16"),
    "float64": of([0.1, 1e-300, 1e300], "float64"),
    "float64_fixed": of([1 / 3, 2 / 3], "float64"),
    "random_1": of(values((5, 7))),
    "random_small": of(values((4, 6), 1e-3, seed=1)),
    "random_large": of(values((3, 9), 1e6, seed=2)),
    "random_huge": of(values((13,), 1e12, seed=3)),
    "random_tiny": of(values((2, 3, 4), 1e-9, seed=4), "float64"),
    "random_f16": of(values((6, 6), 10, seed=5), "float16"),
    "random_wide_rows": of(values((3, 40), 100, seed=6)),
    # 0-d
    "scalar": of(3.14159),
    "scalar_whole": of(3.0),
    "scalar_sci": of(1e-7),
    "scalar_big": of(123456789.0),
    "scalar_nan": of(NAN),
    "scalar_neg_inf": of(-INF),
    "scalar_int": of(7),
    "scalar_bool": of(False),
    "scalar_float64": of(2.5, "float64"),
    "scalar_int32": of(-4, "int32"),
    # empty
    "empty": lambda M: M.zeros(0),
    "empty_2d": lambda M: M.zeros(0, 3),
    "empty_3d_int": lambda M: M.zeros(2, 0, 3, dtype=M.int64),
    "empty_bool": of([], "bool"),
    "empty_float64": of([], "float64"),
    "empty_int32": lambda M: M.arange(5, dtype=M.int32)[3:3],
    # nested and wrapped
    "2d": lambda M: M.arange(12.0).reshape(3, 4),
    "2d_wrapped": lambda M: M.arange(60.0).reshape(3, 20) / 7,
    "3d": lambda M: M.arange(24).reshape(2, 3, 4),
    "3d_wrapped": lambda M: M.arange(120.0).reshape(2, 3, 20) - 50,
    "4d": lambda M: M.arange(48).reshape(2, 2, 3, 4),
    "column": lambda M: M.arange(5.0).reshape(5, 1),
    "single_row": lambda M: M.arange(25).reshape(1, 25),
    # summarised
    "summarised_1d_float": lambda M: M.arange(1001.0) / 3,
    "summarised_2d": lambda M: M.arange(2000.0).reshape(40, 50),
    "summarised_2d_narrow": lambda M: M.arange(1500).reshape(1500, 1),
    "summarised_2d_wide": lambda M: M.arange(1500).reshape(1, 1500),
    "summarised_3d": lambda M: M.arange(3000).reshape(10, 15, 20),
    "summarised_4d": lambda M: M.arange(1296.0).reshape(6, 6, 6, 6) - 600,
    "summarised_edges_decide": lambda M: M.cat([M.tensor([1.0, 2.0, 3.0]), M.full((1000,), 0.5),
                                                M.tensor([4.0, 5.0, 6.0])]),
    "summarised_sci": lambda M: M.arange(2000.0) * 1e6,
    # suffixes
    "requires_grad": of([1.0, 2.0], requires_grad=True),
    "requires_grad_wrapped": lambda M: M.arange(30.0, requires_grad=True),
    "requires_grad_2d": lambda M: M.ones(3, 12, requires_grad=True),
    "grad_fn": lambda M: M.arange(40.0, requires_grad=True) * 2,
    "grad_fn_scalar": lambda M: M.tensor([1.0, 2.0], requires_grad=True).sum(),
    "dtype_and_grad_fn": lambda M: (M.arange(60.0, dtype=M.float64, requires_grad=True)
                                    * 1.5).reshape(3, 20),
    "dtype_wrapped": lambda M: M.arange(18, dtype=M.int32) * 1000,
    "dtype_fits_as_numpy_spells_it": of([1.0] * 14, "float64"),
    "dtype_wrapped_float64": of([1.0] * 15, "float64"),
    "empty_with_grad_fn": lambda M: M.zeros(0, 3, requires_grad=True) * 2,
    "empty_float64_requires_grad": lambda M: M.zeros(1, 0, dtype=M.float64, requires_grad=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_repr_as_torch(case):
    assert repr(CASES[case](mg)) == expected_repr(CASES[case](torch))


@pytest.mark.parametrize("case", ["fixed", "2d_wrapped", "summarised_3d", "grad_fn", "scalar"])
def test_str_as_torch(case):
    assert str(CASES[case](mg)) == expected_repr(CASES[case](torch))


def test_the_audits_examples_print_as_torch_prints_them():
    """What an audit found printed otherwise, written out."""
    assert repr(mg.tensor([1e10, 1.0])) == "tensor([1.0000e+10, 1.0000e+00])"
    assert repr(mg.tensor([1e-4])) == "tensor([1.0000e-04])"
    assert repr(mg.tensor([NAN, 1.0, 2.0])) == "tensor([nan, 1., 2.])"
    assert repr(mg.tensor([INF, -INF])) == "tensor([inf, -inf])"
    assert repr(mg.tensor([-0.0, 1.5])) == "tensor([-0.0000, 1.5000])"
    assert repr(mg.arange(1001)) == "tensor([   0,    1,    2,  ...,  998,  999, 1000])"
    first_line = repr(mg.arange(30)).split("\n")[0]
    assert first_line == ("tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, "
                          "16, 17,")
    assert repr(mg.arange(100.0)).split("\n")[0].count(".") == 14


def test_a_suffix_wraps_by_the_length_of_the_text_printed():
    """The dtype suffix goes to a new line when it would pass the line width as minigrad
    spells it: ``dtype=float64`` still fits where torch's ``dtype=torch.float64`` did not."""
    assert repr(mg.ones(14, dtype=mg.float64)) == \
        "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.], dtype=float64)"
    assert repr(mg.ones(15, dtype=mg.float64)) == \
        "tensor([1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1., 1.],\n" \
        "       dtype=float64)"
    assert "\n" in repr(torch.ones(14, dtype=torch.float64))


COMPLEX = [[1 + 2j, -3.5 - 1j], [0j, 1e-5 + 100j]]


@pytest.mark.parametrize("data", [COMPLEX, [1 + 2j, 3 - 1j], 2 - 0.5j, [[1 + 1j] * 20] * 2],
                         ids=["2d", "whole", "scalar", "wrapped"])
def test_complex_as_torch(data):
    """Python complex numbers make complex64 (the default dtype's), complex128 named."""
    assert repr(mg.tensor(data)) == expected_repr(torch.tensor(data))
    assert repr(mg.tensor(data, dtype=mg.complex128)) == expected_repr(
        torch.tensor(data, dtype=torch.complex128))


OPTIONS = [
    dict(precision=0), dict(precision=2), dict(precision=6), dict(precision=10),
    dict(threshold=0), dict(threshold=5), dict(threshold=10, edgeitems=1),
    dict(threshold=5, edgeitems=2), dict(threshold=5, edgeitems=0), dict(edgeitems=0),
    dict(threshold=20, edgeitems=5),
    dict(threshold=math.inf), dict(linewidth=20), dict(linewidth=40), dict(linewidth=120),
    dict(linewidth=30, precision=2), dict(sci_mode=True), dict(sci_mode=False),
    dict(sci_mode=True, precision=2), dict(profile="short"), dict(profile="full"),
    dict(profile="short", precision=5, linewidth=50),
]
OPTION_CASES = ["sci_1e10", "sci_small", "nan_ints", "negative_zero", "arange_30", "int_big",
                "bools", "fixed_mixed_widths", "zeros_signed", "all_nan", "float16", "float64",
                "random_1", "random_wide_rows", "scalar", "scalar_int", "empty_2d", "3d",
                "summarised_2d", "summarised_3d", "summarised_sci", "requires_grad_wrapped",
                "dtype_and_grad_fn", "dtype_wrapped"]


@pytest.mark.parametrize("case", OPTION_CASES)
@pytest.mark.parametrize("options", OPTIONS, ids=repr)
def test_set_printoptions_as_torch(options, case):
    mg.set_printoptions(**options)
    torch.set_printoptions(**options)
    assert repr(CASES[case](mg)) == expected_repr(CASES[case](torch))


def test_options_add_up_and_sci_mode_resets_as_torch():
    """Options given one call after another add up, but each call sets ``sci_mode`` (to None
    when left out); a profile resets the four others."""
    for options in [dict(precision=2), dict(sci_mode=True), dict(linewidth=40), {},
                    dict(sci_mode=False, threshold=5), dict(profile="default")]:
        mg.set_printoptions(**options)
        torch.set_printoptions(**options)
        for case in ["random_small", "summarised_1d_float", "sci_1e5", "2d_wrapped"]:
            assert repr(CASES[case](mg)) == expected_repr(CASES[case](torch)), (options, case)


@pytest.mark.parametrize("case", ["fixed", "float64", "empty", "empty_float64", "scalar_float64",
                                  "dtype_and_grad_fn", "ints", "complex"])
def test_with_float64_default_as_torch(case):
    """With float64 the default dtype, float64 goes unnamed and float32 is named."""
    mg.set_default_dtype(mg.float64)
    torch.set_default_dtype(torch.float64)
    if case == "complex":
        assert repr(mg.tensor(COMPLEX)) == expected_repr(torch.tensor(COMPLEX))
        return
    assert repr(CASES[case](mg)) == expected_repr(CASES[case](torch))
    assert repr(CASES[case](mg).float()) == expected_repr(CASES[case](torch).float())


@pytest.mark.parametrize("case", ["fixed", "2d", "int8", "requires_grad", "grad_fn_scalar",
                                  "empty_2d", "scalar", "summarised_2d"])
def test_repr_on_the_device(case, device):
    """On a GPU the same text, with the device first among the suffixes (cases whose suffixes
    stay on the line of the values)."""
    ours = repr(CASES[case](On(mg, device)))
    expected = expected_repr(CASES[case](torch))
    if mg.Device(device).type != "cpu":
        cut = re.search(r"(, (size|dtype|grad_fn|requires_grad)=.*)?\)$", expected, re.S).start()
        expected = f"{expected[:cut]}, device='{mg.Device(device)}'{expected[cut:]}"
    assert ours == expected
