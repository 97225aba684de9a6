"""minigrad/tensor.py holds what a tensor is: it builds on the argument and operand rules
below it, never on the public functions made of tensors (creation, combine), and it stays
the largest module of the core (layers base to tensor), not one of the argument checks."""
import ast
from pathlib import Path

import minigrad

PACKAGE = Path(minigrad.__file__).parent
# the modules above the core: transforms and tools, the library and the public API
ABOVE_THE_CORE = {"__init__.py", "func.py", "batched.py", "cuda.py", "profiler.py",
                  "autograd/functional.py"}
ABOVE_THE_CORE_PACKAGES = {"compile", "viz", "text", "utils", "optim"}


def _imported_modules(path, package):
    """Every module that ``path`` imports, at module level or inside a function, as an
    absolute dotted name (``from . import x`` counts as importing ``package.x``)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            names.append(base)
            names += [f"{base}.{a.name}" for a in node.names]  # (a submodule, if it is one)
    return names


def _core_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in ABOVE_THE_CORE or relative.split("/")[0] in ABOVE_THE_CORE_PACKAGES:
            continue
        yield relative, len(path.read_text().splitlines())


def test_the_import_finder_sees_relative_absolute_and_function_level_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import minigrad.dtypes\nfrom . import creation\n"
                      "def f():\n    from .combine import cat\n    from ..x import y\n")
    found = _imported_modules(source, "minigrad")
    assert {"minigrad.dtypes", "minigrad.creation", "minigrad.combine"} <= set(found)


def test_tensor_imports_neither_creation_nor_combine():
    imported = _imported_modules(PACKAGE / "tensor.py", "minigrad")
    assert imported  # (the finder reads the file)
    for above in ("minigrad.creation", "minigrad.combine"):
        assert above not in imported, f"minigrad/tensor.py imports {above}"


def test_tensor_is_the_largest_module_of_the_core():
    sizes = dict(_core_modules())
    assert {"tensor.py", "arguments.py", "ops/elementwise.py"} <= set(sizes)
    assert "func.py" not in sizes and "compile/program.py" not in sizes
    largest = max(sizes, key=sizes.get)
    assert largest == "tensor.py", (f"{largest} ({sizes[largest]} lines) is larger than "
                                    f"tensor.py ({sizes['tensor.py']} lines)")
