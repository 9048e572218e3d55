"""The public namespace, derived from the package itself (httpx's exported-members idea): every public name a
user can reach on `mcp_stateless` is in `__all__` and vice versa, so nothing public leaks unlisted."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import pkgutil
import re
import subprocess
import sys
import textwrap
import tomllib
import types
from pathlib import Path

import pytest

import mcp_stateless

ROOT = Path(__file__).resolve().parents[1]
INIT = Path(mcp_stateless.__file__)


def _load_everything() -> None:
    """Resolve every lazy name and import every module of the package, so `vars()` holds all it ever will."""
    for name in mcp_stateless.__all__:
        getattr(mcp_stateless, name)
    for info in pkgutil.walk_packages(mcp_stateless.__path__, "mcp_stateless."):
        if not info.name.endswith(".__main__"):
            importlib.import_module(info.name)


def _public(namespace: dict[str, object]) -> set[str]:
    return {n for n in namespace if not n.startswith("_")}


def _static_imports() -> dict[str, tuple[str, str]]:
    """name -> (module, name imported from it) for the `if TYPE_CHECKING:` imports of __init__.py."""
    found: dict[str, tuple[str, str]] = {}
    for node in ast.walk(ast.parse(INIT.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            for alias in node.names:
                found[alias.asname or alias.name] = (f"mcp_stateless.{node.module}", alias.name)
    return found


def _import_from(module_name: str, name: str) -> object:
    """What `from module_name import name` binds: the attribute, else the submodule of that name."""
    module = importlib.import_module(module_name)
    if hasattr(module, name):
        return getattr(module, name)
    return importlib.import_module(f"{module_name}.{name}")


def test_every_public_name_is_listed_and_every_listed_name_is_there() -> None:
    _load_everything()
    public = _public(vars(mcp_stateless))
    listed = set(mcp_stateless.__all__)
    assert len(listed) == len(mcp_stateless.__all__), "duplicates in __all__"
    assert listed - {"__version__"} <= public
    unlisted = public - listed
    # the only extras allowed: submodules, which the import system sets on their parent package
    leaks = {n for n in unlisted
             if not (isinstance(vars(mcp_stateless)[n], types.ModuleType)
                     and vars(mcp_stateless)[n].__name__ == f"mcp_stateless.{n}")}
    assert leaks == set(), f"public but not in __all__: {sorted(leaks)}"
    assert "server" in unlisted and "client" in unlisted  # the rule above was really exercised


@pytest.mark.slow
def test_a_fresh_import_defines_only_private_helpers_and_imports_nothing() -> None:
    code = (
        "import sys, mcp_stateless\n"
        "print(sorted(n for n in vars(mcp_stateless) if not n.startswith('_')))\n"
        "print(sorted(m for m in sys.modules if m.startswith('mcp_stateless.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.splitlines() == ["[]", "[]"]


def test_the_typed_names_are_the_runtime_names() -> None:
    """mypy sees the TYPE_CHECKING imports; users get `__getattr__`'s objects: both must be the same names
    bound to the same objects."""
    static = _static_imports()
    assert set(static) == set(mcp_stateless.__all__) - {"__version__"}
    for name, (module_name, attr) in static.items():
        assert getattr(mcp_stateless, name) is _import_from(module_name, attr), name


def test_all_is_sorted_like_ruff_sorts_it() -> None:
    names = mcp_stateless.__all__
    # isort-style order (ruff RUF022): CONSTANTS first, then plain code-point order
    assert sorted(names, key=lambda n: (not n.isupper(), n)) == names


def test_public_classes_live_in_the_package() -> None:
    for name in mcp_stateless.__all__:
        obj = getattr(mcp_stateless, name)
        module = getattr(obj, "__module__", None) or getattr(obj, "__name__", "")
        if isinstance(obj, type) or callable(obj):
            assert module.startswith("mcp_stateless"), (name, module)


def test_unknown_names_are_attribute_errors() -> None:
    try:
        mcp_stateless.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as e:
        assert str(e) == "module 'mcp_stateless' has no attribute 'NoSuchName'"
    else:
        raise AssertionError("no AttributeError")


def test_version_values() -> None:
    assert mcp_stateless.LATEST_PROTOCOL_VERSION == "2026-07-28"
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert mcp_stateless.__version__ == pyproject["project"]["version"]
    assert mcp_stateless.__version__ == importlib.metadata.version("mcp-stateless")
    assert mcp_stateless.__version__.count(".") == 2


# The supported import paths. Everything else under `mcp_stateless` is internal and may change between
# releases; docs/architecture.md ("Public API") says the same.
PUBLIC_MODULES = (
    "mcp_stateless",
    "mcp_stateless.audit",
    "mcp_stateless.auth",
    "mcp_stateless.bridge",
    "mcp_stateless.client",
    "mcp_stateless.client.oauth",
    "mcp_stateless.conformance",
    "mcp_stateless.endpoint",
    "mcp_stateless.inventory",
    "mcp_stateless.legacy",
    "mcp_stateless.observability",
    "mcp_stateless.state",
)
DOCUMENTED = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def _resolved(module_name: str) -> types.ModuleType:
    module = importlib.import_module(module_name)
    for name in module.__all__:
        getattr(module, name)  # resolves lazy names into vars()
    return module


def _leaks(module: types.ModuleType) -> set[str]:
    """Public names of `module` that `__all__` does not list: the submodules the import system sets on a
    package, and a `from __future__` directive, are not names a user imports."""
    import __future__

    out = set()
    for name, value in vars(module).items():
        if name.startswith("_") or name in module.__all__:
            continue
        if isinstance(value, types.ModuleType) and value.__name__ == f"{module.__name__}.{name}":
            continue
        if isinstance(value, __future__._Feature):
            continue
        out.add(name)
    return out


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_a_public_module_lists_exactly_what_it_offers(module_name: str) -> None:
    module = _resolved(module_name)
    names = list(module.__all__)
    assert len(set(names)) == len(names), "duplicates in __all__"
    assert sorted(names, key=lambda n: (not n.isupper(), n)) == names, "__all__ not sorted like ruff sorts it"
    assert set(names) - {"__version__"} <= set(vars(module))
    assert _leaks(module) == set(), f"public but not in {module_name}.__all__"


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_a_public_module_offers_only_the_package_s_own_objects(module_name: str) -> None:
    module = _resolved(module_name)
    for name in module.__all__:
        obj = getattr(module, name)
        if isinstance(obj, type) or inspect_function(obj):
            assert obj.__module__.startswith("mcp_stateless"), (name, obj.__module__)


def inspect_function(obj: object) -> bool:
    return isinstance(obj, types.FunctionType)


def test_one_name_means_one_thing_across_the_public_modules() -> None:
    """`Endpoint`, `ListenEvent`, `Handler`, `Session`, ...: a name two public modules offer is the same
    object in both, so no import picks the wrong one by accident."""
    seen: dict[str, tuple[str, object]] = {}
    clashes = []
    for module_name in PUBLIC_MODULES:
        module = _resolved(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                continue
            if name in seen and seen[name][1] is not obj:
                clashes.append(f"{name}: {seen[name][0]} and {module_name}")
            seen.setdefault(name, (module_name, obj))
    assert clashes == []


def _python_sources() -> list[tuple[str, str]]:
    fence = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)
    out = [(f"{page.name} block {i + 1}", textwrap.dedent(body))
           for page in DOCUMENTED for i, (_, body) in enumerate(fence.findall(page.read_text()))]
    return out + [(f"examples/{path.name}", path.read_text()) for path in EXAMPLES]


def _package_imports(source: str) -> list[tuple[int, str, str | None]]:
    """(line, module, name) for every import of ours in `source`; name None for `import module`."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("mcp_stateless"):
            found.extend((node.lineno, node.module or "", alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, None) for alias in node.names
                         if alias.name.startswith("mcp_stateless"))
    return found


def test_docs_and_examples_import_only_the_public_paths() -> None:
    bad = []
    checked = 0
    for where, source in _python_sources():
        for line, module_name, name in _package_imports(source):
            checked += 1
            if module_name not in PUBLIC_MODULES:
                bad.append(f"{where}:{line}: {module_name} is not a public module")
            elif name is not None and name not in importlib.import_module(module_name).__all__:
                bad.append(f"{where}:{line}: {module_name} does not offer {name}")
    assert checked > 40  # the scan really saw the docs' imports
    assert bad == []


def test_the_import_scan_sees_what_a_page_imports() -> None:
    source = "import mcp_stateless.state\nfrom mcp_stateless.protocol.endpoint import Call\ndef f():\n" \
             "    from mcp_stateless import App\n"
    assert sorted(_package_imports(source)) == [(1, "mcp_stateless.state", None),
                                                (2, "mcp_stateless.protocol.endpoint", "Call"),
                                                (4, "mcp_stateless", "App")]
