"""Every fix text the inventory and the auditor print names only APIs that exist: a migration guide that
tells a team to call `ctx.handles.mint(...)`, which no release ever had, costs them an afternoon."""

from __future__ import annotations

import ast
import re
import types
import typing
from pathlib import Path
from typing import Any

import pytest

import mcp_stateless
from mcp_stateless.server.context import Context

SRC = Path(mcp_stateless.__file__).parent
FIX_SOURCES = [SRC / "inventory" / "kinds.py", *sorted((SRC / "audit" / "checks").glob("*.py"))]
# In a text (not in code): `ctx.<attr>` and `<Class>.<method>(` of the authoring API
CTX_ATTR = re.compile(r"`[^`]*?\bctx\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?")
CLASS_METHOD = re.compile(r"`(?:await )?([A-Z]\w*)\.([a-z_]\w*)\(")
# `app.<method>(` of the `App` the reader serves (`app.asgi()`)
APP_METHOD = re.compile(r"`[^`]*?\bapp\.([A-Za-z_]\w*)\(")


def _texts() -> list[tuple[str, str]]:
    out = []
    for path in FIX_SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "`" in node.value:
                out.append((path.name, node.value))
    return out


def _handle_classes() -> set[str]:
    """Example names a text may use for a `Handle` subclass of the reader's own."""
    return {"Cart", "Import", "Receipt", "Upload", "Job"}


TEXTS = _texts()


def test_the_texts_were_found() -> None:
    assert len(TEXTS) >= 20 and any(name == "kinds.py" for name, _ in TEXTS)


def _type_of(attr: str) -> Any:
    """The declared type of `Context.<attr>` (a field's annotation, a property's return), Optional unwrapped."""
    member = getattr(Context, attr)
    hint = (typing.get_type_hints(member.fget)["return"] if isinstance(member, property)
            else typing.get_type_hints(Context).get(attr, type(member)))
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType | typing._UnionGenericAlias) and len(args) == 1:  # type: ignore[attr-defined]
        hint = args[0]
    return typing.get_origin(hint) or hint


def missing_apis(text: str) -> list[str]:
    """What `text` names that the authoring API does not have."""
    out = []
    for attr, sub in CTX_ATTR.findall(text):
        if not hasattr(Context, attr):
            out.append(f"ctx.{attr}")
        elif sub and not hasattr(_type_of(attr), sub):
            out.append(f"ctx.{attr}.{sub}")
    for cls, method in CLASS_METHOD.findall(text):
        if cls in _handle_classes() and not hasattr(mcp_stateless.Handle, method):
            out.append(f"Handle.{method}")
    out += [f"App.{method}" for method in APP_METHOD.findall(text) if not hasattr(mcp_stateless.App, method)]
    return out


@pytest.mark.parametrize(("where", "text"), TEXTS, ids=[f"{n}:{i}" for i, (n, _) in enumerate(TEXTS)])
def test_a_fix_text_names_only_apis_that_exist(where: str, text: str) -> None:
    assert missing_apis(text) == [], f"{where}: {text!r}"


def test_the_checker_finds_what_does_not_exist() -> None:
    assert missing_apis("Mint one (`ctx.handles.mint(...)`)") == ["ctx.handles.mint"]
    assert missing_apis("`ctx.sessions`, `await Cart.create(ctx)`") == ["ctx.sessions", "Handle.create"]
    assert missing_apis("`ctx.principal.id`, `ctx.client_capabilities`, `await Cart.mint(ctx, data)`") == []
    assert missing_apis("mount `app.asgi()`, not `app.asgi_app()`") == ["App.asgi_app"]
