"""The TypeScript/JavaScript analyzer on the labelled fixtures: every `// expect: KIND` marker found at its line,
nothing else. Each fixture file is inventoried on its own, each fixture folder as a tree (package.json cannot hold
a comment, so its expected findings are listed here)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mcp_stateless.inventory import typescript_source
from mcp_stateless.inventory.engine import JS_SUFFIXES, inventory
from mcp_stateless.inventory.npm_metadata import admits_major

from ..markers import expected, expected_glue, glued

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "typescript"
CASES = sorted(p for p in FIXTURES.iterdir() if p.suffix in JS_SUFFIXES or p.is_dir())
IN_JSON = {"deps_open": {("package.json", 5, "dependency-range")},
           "deps_workspaces": {("packages/server/package.json", 6, "dependency-range")}}


def _expected(case: Path) -> set[tuple[str, int, str]]:
    return expected(case) | IN_JSON.get(case.name, set())


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fixture_findings_are_exactly_the_markers(case: Path) -> None:
    inv = inventory(case)
    assert inv.notes == []
    assert {(f.file, f.line, f.kind) for f in inv.findings} == _expected(case)
    assert glued(inv) == expected_glue(case)


def test_the_set_covers_every_kind_with_a_typescript_shape_and_the_clean_ones_are_clean() -> None:
    kinds = {k for case in CASES for _, _, k in _expected(case)}
    assert kinds == {"session-keyed-state", "session-id-read", "initialize-state", "server-request",
                     "client-answer-kept", "log-level-state", "resource-subscriptions", "unsolicited-notification",
                     "per-connection-registration", "get-stream", "event-replay", "process-secret", "module-state",
                     "stdout-write", "dependency-range", "connection-auth", "local-file-state",
                     "transport-session-map"}
    clean = [c for c in CASES if c.name.startswith("clean") or c.name == "deps_bounded"]
    assert len(clean) == 9
    assert [c.name for c in clean if _expected(c) or inventory(c).findings] == []
    assert {c.suffix for c in CASES} >= {".ts", ".tsx", ".js", ".mjs", ".cjs"}


def test_analyze_examines_a_file_only_when_it_imports_the_sdk() -> None:
    state = "const seen = [];\nexport const note = (x) => { seen.push(x); };\n"
    assert typescript_source.analyze("a.js", state) == []
    found = typescript_source.analyze("b.js", 'import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";\n'
                                               + state)
    assert [(f.line, f.kind) for f in found] == [(3, "module-state")]


def test_a_helper_is_examined_through_a_relative_import_resolved_from_js_to_ts(tmp_path: Path) -> None:
    (tmp_path / "src" / "lib").mkdir(parents=True)
    (tmp_path / "src" / "main.ts").write_text('import "@modelcontextprotocol/sdk/server/mcp.js";\n'
                                              'import { keep } from "./lib/index.js";\n')
    (tmp_path / "src" / "lib" / "index.ts").write_text('export * from "./store";\n')
    (tmp_path / "src" / "lib" / "store.ts").write_text("const kept = new Map();\n"
                                                       "export function keep(k: string) { kept.set(k, 1); }\n")
    (tmp_path / "src" / "other.ts").write_text("const kept = new Map();\n"
                                               "export function keep(k: string) { kept.set(k, 1); }\n")
    assert {(f.file, f.line, f.kind) for f in inventory(tmp_path).findings} == {
        ("src/lib/store.ts", 2, "module-state")}


@pytest.mark.parametrize(("spec", "open_"), [
    ("^1.30.0", False), ("~1.2", False), ("1.x", False), ("1", False), (">=1.9 <2", False), ("<2.0.0", False),
    ("1.2.3 - 1.9", False), ("^0.6.0", False), (">= 1.0.0 < 2", False), ("<=1.99.0", False),
    ("*", True), ("", True), ("x", True), ("latest", True), (">=1", True), (">1.0.0", True), ("^2.0.0", True),
    ("1 - 2", True), ("^1.0.0 || ^2.0.0", True), ("<3", True), ("<=2.0.0", True), ("npm:@modelcontextprotocol/sdk@*",
                                                                                    True),
])
def test_npm_ranges_that_admit_a_second_major(spec: str, open_: bool) -> None:
    assert admits_major(spec) is open_


def test_a_non_registry_specifier_is_not_judged() -> None:
    assert [admits_major(s) for s in ("file:../sdk", "workspace:*", "github:org/sdk", "git+https://x/y.git")] == [
        None, None, None, None]


def _garbage(seed: int) -> list[str]:
    rng = random.Random(seed)
    base = (FIXTURES / "registration_after_init.ts").read_text()
    alphabet = "{}()[];:=<>/\\'\"`$ \n\tabcxyz.,!?@#0123456789\x00\ufffd"
    out = ["", "\x00" * 50, "{" * 5000, "(" * 3000 + ")" * 3000, "`${" * 2000, "/*", "'unterminated", base[:-40]]
    out += [base[: rng.randrange(len(base))] for _ in range(20)]
    out += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 400))) for _ in range(40)]
    out += ['import "@modelcontextprotocol/sdk";\n' + "".join(rng.choice(alphabet) for _ in range(300))
            for _ in range(40)]
    return out


@pytest.mark.parametrize("suffix", [".ts", ".tsx", ".js", ".mjs", ".cts"])
def test_garbage_and_truncated_files_never_raise(suffix: str) -> None:
    for text in _garbage(len(suffix)):
        found = typescript_source.analyze(f"x{suffix}", text)
        assert all(f.line >= 1 and f.kind for f in found)
    deep = 'import "@modelcontextprotocol/sdk";\nconst a = ' + "[" * 20000 + "]" * 20000 + ";\n"
    assert typescript_source.analyze(f"deep{suffix}", deep) == []
