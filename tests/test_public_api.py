"""The public namespace, derived from the package itself (httpx's exported-members idea): every public name a
user can reach on `mcp_stateless` is in `__all__` and vice versa, so nothing public leaks unlisted."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import pkgutil
import subprocess
import sys
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
