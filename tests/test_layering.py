"""The package's layers and the imports allowed between them, read from the source with `ast`.

Every import counts: at module level, inside functions, and under `if TYPE_CHECKING:` (a typing-only
import is still a dependency a reader and mypy must follow). Layers are the subpackages of
`mcp_stateless`; the package `__init__` is the lazy public façade over all of them and is not a layer.

    protocol      sans-IO rules and the endpoint seam; imports nothing of ours
    conformance   the wire schema and its validator: protocol
    state         records and topics per engine: protocol
    tasks         the Tasks extension: protocol, state
    server        the App framework: protocol, state, tasks, transports and observability (its one HTTP
                  assembly, server/compose.py)
    observability metrics and traces as middleware at the endpoint seam: protocol, state, tasks
    transports    HTTP and stdio, over the endpoint seam: protocol
    client        the client: protocol
    auth          the OAuth resource server (bearer tokens, protected resource metadata): protocol
    audit         the hidden-state auditor (checks any server through the client's channels): protocol, client,
                  conformance
    inventory     static analysis of a legacy server's source (reads files, imports nothing of ours)
    cli           the command line, on top: anything
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "mcp_stateless"
PACKAGE = "mcp_stateless"

ALLOWED: dict[str, frozenset[str]] = {
    "protocol": frozenset(),
    "conformance": frozenset({"protocol"}),
    "state": frozenset({"protocol"}),
    "tasks": frozenset({"protocol", "state"}),
    "server": frozenset({"protocol", "state", "tasks", "transports", "observability"}),
    "transports": frozenset({"protocol"}),
    "client": frozenset({"protocol"}),
    "auth": frozenset({"protocol"}),
    "audit": frozenset({"protocol", "client", "conformance"}),
    "observability": frozenset({"protocol", "state", "tasks"}),
    "inventory": frozenset(),
    "bridge": frozenset({"protocol", "client", "state"}),
    "cli": frozenset({"protocol", "conformance", "state", "tasks", "server", "transports", "client", "auth",
                      "audit", "observability", "inventory", "bridge"}),
}
# Third-party packages that make up the server stack: the layers a client or a transport is built from
# must not need them.
SERVER_STACK = frozenset({"pydantic", "jsonschema", "referencing"})
NO_SERVER_STACK = ("protocol", "transports", "client", "state", "tasks", "auth")


@dataclass(frozen=True)
class Edge:
    source: str  # dotted module
    line: int
    target: str  # dotted module (absolute)

    def __str__(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _edges() -> Iterator[Edge]:
    for path in sorted(SRC.rglob("*.py")):
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Edge(module, node.lineno, alias.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = package.split(".")
                    base = ".".join(base_parts[: len(base_parts) - node.level + 1])
                    base = f"{base}.{node.module}" if node.module else base
                else:
                    base = node.module or ""
                if node.module is None:  # `from . import x`: each x may be a subpackage of its own
                    for alias in node.names:
                        yield Edge(module, node.lineno, f"{base}.{alias.name}")
                else:
                    yield Edge(module, node.lineno, base)


EDGES = list(_edges())


def _layer(module: str) -> str | None:
    """The subpackage a module of ours belongs to; None for the package façade and for other packages."""
    parts = module.split(".")
    if parts[0] != PACKAGE or len(parts) < 2:
        return None
    return parts[1]


def _cross_layer() -> list[tuple[str, str, Edge]]:
    out: list[tuple[str, str, Edge]] = []
    for e in EDGES:
        src, dst = _layer(e.source), _layer(e.target)
        if src is not None and dst is not None and src != dst:
            out.append((src, dst, e))
    return out


def _subpackages() -> set[str]:
    return {p.name for p in SRC.iterdir() if p.is_dir() and any(p.glob("*.py"))}


def test_every_subpackage_has_a_rule() -> None:
    stray = sorted(p.name for p in SRC.glob("*.py") if p.name != "__init__.py")
    assert stray == [], f"modules outside any layer: {stray}"
    assert _subpackages() == set(ALLOWED)


def test_every_subpackage_is_a_real_package() -> None:
    """An `__init__.py` each: a namespace package by accident hides from tools and from this test."""
    assert sorted(name for name in _subpackages() if not (SRC / name / "__init__.py").exists()) == []


def test_the_scan_sees_every_kind_of_import() -> None:
    """Function-level and TYPE_CHECKING imports are found (so the rules below are about all of them)."""
    from_cli = {e.target for e in EDGES if e.source == "mcp_stateless.cli.loader"}
    assert "mcp_stateless.server.app" in from_cli  # inside load_app() and under TYPE_CHECKING


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer: str) -> None:
    bad = [str(e) for src, dst, e in _cross_layer() if src == layer and dst not in ALLOWED[layer]]
    assert bad == [], f"{layer} may import only {sorted(ALLOWED[layer]) or 'nothing of ours'}:\n" + "\n".join(bad)


@pytest.mark.parametrize("layer", NO_SERVER_STACK)
def test_layer_needs_no_server_stack(layer: str) -> None:
    bad = [str(e) for e in EDGES if _layer(e.source) == layer and e.target.split(".")[0] in SERVER_STACK]
    assert bad == [], "\n".join(bad)


def _components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan): each is a cycle of layers."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members: list[str] = []
            while True:
                top = stack.pop()
                members.append(top)
                if top == node:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(found)


def test_no_cycle_between_subpackages() -> None:
    graph: dict[str, set[str]] = {}
    for src, dst, _e in _cross_layer():
        graph.setdefault(src, set()).add(dst)
    cycles = _components(graph)
    detail = [str(e) for src, dst, e in _cross_layer()
              if any(src in c and dst in c for c in cycles)]
    assert cycles == [], f"layers importing each other: {cycles}\n" + "\n".join(detail)


def test_the_cycle_finder_finds_cycles() -> None:
    assert _components({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _components({"a": {"b"}, "b": set()}) == []
