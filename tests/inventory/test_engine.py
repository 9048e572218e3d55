"""The engine: which files are read, suppressions, de-duplication, dependency ranges, stdio packages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_stateless.inventory import engine, report
from mcp_stateless.inventory.engine import _admits_mcp2, inventory

STATE = 'from fastmcp import FastMCP\n\nmcp = FastMCP("s")\nseen: list[str] = []\n\n\n@mcp.tool\n' \
        'def note(text: str) -> None:\n    seen.append(text)\n'


def _found(root: Path, **kw: bool) -> set[tuple[str, int, str]]:
    return {(f.file, f.line, f.kind) for f in inventory(root, **kw).findings}


def test_tests_and_vendored_dirs_are_skipped_unless_asked(tmp_path: Path) -> None:
    for rel in ("app/server.py", "tests/test_server.py", "app/test_x.py", "node_modules/x/s.py", ".venv/s.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(STATE)
    assert _found(tmp_path) == {("app/server.py", 9, "module-state")}
    assert _found(tmp_path, include_tests=True) == {(p, 9, "module-state") for p in
                                                    ("app/server.py", "app/test_x.py", "tests/test_server.py")}


def test_suppression_names_only_its_kinds(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(STATE.replace("seen.append(text)", "seen.append(text)  # mcp-stateless: "
                                                                      "ignore[process-secret]"))
    (tmp_path / "b.py").write_text(STATE.replace("    seen.append", "    # mcp-stateless: ignore\n    seen.append"))
    assert _found(tmp_path) == {("a.py", 9, "module-state")}


def test_a_package_served_over_stdio_reports_prints_in_its_other_modules(tmp_path: Path) -> None:
    (tmp_path / "main.py").write_text('from mcp.server.fastmcp import FastMCP\n\nmcp = FastMCP("m")\nmcp.run()\n')
    (tmp_path / "util.py").write_text('import sys\n\nprint("loaded")\nprint("ok", file=sys.stderr)\n')
    assert _found(tmp_path) == {("util.py", 3, "stdout-write")}
    (tmp_path / "main.py").write_text('from mcp.server.fastmcp import FastMCP\n\n'
                                      'mcp = FastMCP("m", stateless_http=True)\n'
                                      'mcp.run(transport="streamable-http")\n')
    assert _found(tmp_path) == set()


def test_dependency_range_needs_both_an_open_range_and_1x_only_imports(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("mcp>=1.0\n")
    (tmp_path / "s.py").write_text("from mcp.server.lowlevel import Server\n")
    assert _found(tmp_path) == set()
    (tmp_path / "s.py").write_text("from mcp.shared.exceptions import McpError\n")
    assert _found(tmp_path) == {("requirements.txt", 1, "dependency-range")}
    assert [_admits_mcp2(s) for s in (">=1.0", ">=1,<2", "<2.0", "==1.9.0", "~=1.9", ">=1,<3", "")] == [
        True, False, False, False, False, True, True]


def test_compiled_js_beside_ts_sources_is_not_read_and_a_missing_ts_analyzer_is_a_note(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "dist").mkdir()
    (tmp_path / "src" / "index.ts").write_text("export const a = 1;\n")
    (tmp_path / "dist" / "index.js").write_text("export const a = 1;\n")
    (tmp_path / "dist" / "index.d.ts").write_text("export declare const a: number;\n")
    inv = inventory(tmp_path)
    assert (inv.files, inv.notes) == (1, [])


def test_without_tree_sitter_the_report_is_incomplete_and_still_checks_package_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "_typescript", lambda: None)  # as when the `inventory` extra is not installed
    (tmp_path / "index.js").write_text('import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";\n'
                                       "const seen = [];\nexport const f = (x) => seen.push(x);\n")
    (tmp_path / "package.json").write_text('{"dependencies": {"@modelcontextprotocol/sdk": "latest"}}\n')
    inv = inventory(tmp_path)
    assert [(f.file, f.line, f.kind) for f in inv.findings] == [("package.json", 1, "dependency-range")]
    assert inv.notes == []
    assert inv.not_analysed == ["1 TypeScript/JavaScript file(s) (package.json ranges were checked): install the "
                                "`inventory` extra (pip install 'mcp-stateless[inventory]') for tree-sitter"]
    assert "No hidden-state dependency found." not in report.to_text(inv)
    assert json.loads(report.to_json(inv))["complete"] is False
    run = json.loads(report.to_sarif(inv, "0"))["runs"][0]
    assert run["invocations"][0]["executionSuccessful"] is False


# tree-sitter made unimportable in a real CLI process, as on a machine without the `inventory` extra
_NO_TREE_SITTER = ("import sys; sys.modules['tree_sitter'] = None; from mcp_stateless.cli import main; "
                   "sys.exit(main(sys.argv[1:]))")


@pytest.mark.slow
@pytest.mark.parametrize("fmt", [[], ["--json"], ["--sarif"]])
def test_without_tree_sitter_a_typescript_server_fails_the_gate_with_the_extra_to_install(
        tmp_path: Path, fmt: list[str]) -> None:
    """It printed "No hidden-state dependency found." and `--fail-on any` exited 0: a CI gate passed a server
    whose every finding was in the files it had not read."""
    (tmp_path / "index.ts").write_text('import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";\n'
                                       "const seen: string[] = [];\nexport const f = (x: string) => seen.push(x);\n")
    done = subprocess.run([sys.executable, "-c", _NO_TREE_SITTER, "inventory", str(tmp_path), "--fail-on", "any",
                           *fmt], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == ("mcp-stateless: error: not analysed: 1 TypeScript/JavaScript file(s) (package.json "
                           "ranges were checked): install the `inventory` extra "
                           "(pip install 'mcp-stateless[inventory]') for tree-sitter\n")
    assert "No hidden-state dependency found." not in done.stdout


def test_a_form_feed_does_not_shift_excerpts_or_suppressions(tmp_path: Path) -> None:
    """Parsers end lines only at `\\n`; a form feed (a page break in GNU-style sources) is whitespace to them."""
    (tmp_path / "b.py").write_text(STATE.replace('mcp = FastMCP("s")', '\x0c\nmcp = FastMCP("s")').replace(
        "seen.append(text)", "seen.append(text)  # mcp-stateless: ignore"))
    (tmp_path / "a.js").write_text('import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";\n'
                                   "// section\x0c\nconst seen = [];\nexport const f = (x) => { seen.push(x); };\n")
    inv = inventory(tmp_path)
    assert [(f.file, f.line, f.kind, f.excerpt) for f in inv.findings] == [
        ("a.js", 4, "module-state", "export const f = (x) => { seen.push(x); };")]
    assert inv.lines == 4 + 10


@pytest.mark.parametrize("toml", ["project = 1\n", '[project]\noptional-dependencies = ["mcp"]\n',
                                  "[project]\ndependencies = [1, {a = 1}]\n",
                                  '[project]\ndependencies = ["mcp>=1"]\noptional-dependencies = {x = "mcp"}\n'])
def test_a_malformed_pyproject_declares_only_its_well_formed_requirements(tmp_path: Path, toml: str) -> None:
    (tmp_path / "pyproject.toml").write_text(toml)
    (tmp_path / "s.py").write_text("from mcp.server.fastmcp import FastMCP\n")
    expected = {("pyproject.toml", 2, "dependency-range")} if '"mcp>=1"' in toml else set()
    assert _found(tmp_path) == expected


def test_a_javascript_package_that_ships_only_build_is_read_there_and_pythons_build_copy_is_not(
        tmp_path: Path) -> None:
    (tmp_path / "build" / "lib" / "app").mkdir(parents=True)
    (tmp_path / "build" / "index.js").write_text('import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";'
                                                 "\nconst seen = [];\nexport const f = (x) => seen.push(x);\n")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "server.py").write_text(STATE)
    (tmp_path / "build" / "lib" / "app" / "server.py").write_text(STATE)  # setuptools' copy of app/
    assert _found(tmp_path) == {("build/index.js", 3, "module-state"), ("app/server.py", 9, "module-state")}


def test_only_regular_files_inside_the_tree_are_read_and_what_was_skipped_is_said(tmp_path: Path) -> None:
    """A symlink out of the tree (its text was quoted as a finding), a symlink to /dev/zero (read forever), a FIFO
    (blocked forever) and a large data file (parsed into many times its size) are skipped and named in a note."""
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (outside / "secret.py").write_text(STATE)
    (outside / "pkg").mkdir()
    (outside / "pkg" / "mod.py").write_text(STATE)
    (tree / "server.py").write_text(STATE)
    (tree / "linked.py").symlink_to(outside / "secret.py")
    (tree / "linked_dir").symlink_to(outside / "pkg")
    (tree / "zero.py").symlink_to("/dev/zero")
    os.mkfifo(tree / "pipe.py")
    (tree / "data.json").write_bytes(b'{"a": "' + b"x" * engine.FILE_MAX + b'"}')
    inv = inventory(tree)
    assert {(f.file, f.line, f.kind) for f in inv.findings} == {("server.py", 9, "module-state")}
    assert inv.files == 1
    assert sorted(inv.notes) == ["not read (larger than 2 MiB): data.json",
                                 "not read (not a regular file): pipe.py",
                                 "not read (symbolic link): linked_dir, linked.py, zero.py"]
