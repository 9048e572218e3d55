"""Walk a source tree, run each language's analyzer, check dependency metadata, apply suppressions.

Nothing is imported or run: files are read as text. The TypeScript/JavaScript analyzer needs tree-sitter (the
`inventory` extra) and is imported only when the tree holds such files; without it the report carries a note.
"""

from __future__ import annotations

import ast
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from . import npm_metadata, python_source
from .finding import Finding, source_lines

if TYPE_CHECKING:
    from . import typescript_source

SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache",
                       ".ruff_cache", ".pytest_cache", "site-packages"})
TEST_DIRS = frozenset({"tests", "test", "__tests__"})
JS_SUFFIXES = frozenset({".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs"})
_SUPPRESS = re.compile(r"(?:#|//)\s*mcp-stateless:\s*ignore(?:\[([^\]]*)\])?")
_REQ = re.compile(r"^\s*(mcp|fastmcp)\s*(\[[^\]]*\])?\s*([^;#]*)", re.I)
# A source file or metadata file larger than this is data or a bundle, not code a person wrote: skipped (and said
# so), so a 135 MB data file in the tree is not parsed into many times its size.
FILE_MAX = 2 * 1024 * 1024
# Modules mcp 2.x removed (importing them raises there): code using them was written for 1.x.
MCP1_ONLY = ("mcp.server.fastmcp", "mcp.shared.exceptions.McpError")


@dataclass
class Inventory:
    root: str
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: int = 0
    lines: int = 0
    skipped: dict[str, list[str]] = field(default_factory=dict)  # why -> relative paths not read
    # Source the inventory could not analyse (a language whose analyzer is not installed): the report is then
    # incomplete, never "clean", and the CLI fails whatever --fail-on says.
    not_analysed: list[str] = field(default_factory=list)


def _wanted(p: Path) -> bool:
    return p.suffix in {".py", ".toml", ".txt", ".json"} | JS_SUFFIXES or p.name == "METADATA"


def _skip(skipped: dict[str, list[str]] | None, why: str, rel: str) -> None:
    if skipped is not None:
        skipped.setdefault(why, []).append(rel)


def _regular(path: Path, root: Path, skipped: dict[str, list[str]] | None) -> bool:
    """Only a regular file inside the tree, and not too large, is read: a symlink may point out of the tree (its
    text would be quoted in the report) or at /dev/zero; a FIFO blocks the read forever; a device never ends."""
    rel = path.relative_to(root).as_posix()
    try:
        st = path.lstat()
    except OSError:
        return False
    if stat.S_ISLNK(st.st_mode):
        _skip(skipped, "symbolic link", rel)
    elif not stat.S_ISREG(st.st_mode):
        _skip(skipped, "not a regular file", rel)
    elif st.st_size > FILE_MAX:
        _skip(skipped, f"larger than {FILE_MAX // (1024 * 1024)} MiB", rel)
    else:
        return True
    return False


def _read(path: Path) -> str | None:
    """The text of a regular file, at most FILE_MAX bytes (it may have grown since it was looked at). O_NONBLOCK
    and O_NOFOLLOW: a file swapped for a FIFO or a symlink in between is not waited on or followed."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(FILE_MAX + 1)
    if len(data) > FILE_MAX:
        return None
    return data.decode("utf-8", errors="replace")


def _is_test(rel: Path) -> bool:
    name = rel.name
    return bool(set(rel.parts[:-1]) & TEST_DIRS) or name.startswith("test_") or name.endswith("_test.py") or \
        ".test." in name or ".spec." in name


def walk(root: Path, include_tests: bool, skipped: dict[str, list[str]] | None = None) -> Iterator[Path]:
    """The files to read under `root`: regular files inside it only (os.walk does not descend symlinked
    directories; they are listed as skipped, like symlinked files, FIFOs, devices and files over FILE_MAX)."""
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        for d in dirnames:
            if (here / d).is_symlink():
                _skip(skipped, "symbolic link", (here / d).relative_to(root).as_posix())
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and (include_tests or d not in TEST_DIRS)
                             and not (here / d).is_symlink())
        for name in sorted(filenames):
            path = here / name
            if name.endswith((".d.ts", ".map")):
                continue
            if not include_tests and _is_test(path.relative_to(root)):
                continue
            if _wanted(path) and _regular(path, root, skipped):
                yield path


def _drop_compiled(paths: list[Path], root: Path) -> list[Path]:
    """With TypeScript sources present, their compiled JS under dist/ or build/ is the same code twice; Python
    under build/ is setuptools' copy of the package. A JavaScript package that ships only build/ is read there."""
    paths = [p for p in paths if not (p.suffix == ".py" and "build" in p.relative_to(root).parts[:-1])]
    has_ts = any(p.suffix in {".ts", ".tsx", ".mts", ".cts"} for p in paths)
    if not has_ts:
        return paths
    return [p for p in paths if not (p.suffix in {".js", ".mjs", ".cjs"} and
                                     {"dist", "build", "lib"} & set(p.relative_to(root).parts[:-1]))]


def _suppressed(lines: list[str], f: Finding) -> bool:
    for index in (f.line - 1, f.line - 2):
        if 0 <= index < len(lines):
            m = _SUPPRESS.search(lines[index])
            if m and (m.group(1) is None or f.kind in {k.strip() for k in m.group(1).split(",")}):
                return True
    return False


def _admits_mcp2(spec: str) -> bool:
    """A version specifier with no upper bound below 2 (so pip may install mcp 2.x)."""
    for part in spec.replace("(", "").replace(")", "").split(","):
        part = part.strip()
        m = re.match(r"(<=|<|==|~=)\s*(\d+)(?:\.(\d+))?", part)
        if not m:
            continue
        op, major = m.group(1), int(m.group(2))
        if op == "<" and (major < 2 or (major == 2 and not (m.group(3) or "").strip("0"))):
            return False
        if op in {"<=", "=="} and major < 2:
            return False
        if op == "~=" and major < 2 and m.group(3) is not None:
            return False
    return True


def _requirements(path: Path, text: str) -> Iterator[tuple[int, str]]:
    """(line, requirement string) of every declared dependency in a metadata file."""
    name = path.name
    if name == "METADATA":
        for i, line in enumerate(source_lines(text), 1):
            if line.startswith("Requires-Dist:"):
                yield i, line.split(":", 1)[1]
    elif name.startswith("requirements") and name.endswith(".txt"):
        yield from enumerate(source_lines(text), 1)
    elif name == "pyproject.toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return
        # a malformed table (`project = 1`, a list of extras) declares nothing, and must not stop the report
        project = data.get("project")
        project = project if isinstance(project, dict) else {}
        deps = project.get("dependencies")
        reqs = [r for r in deps if isinstance(r, str)] if isinstance(deps, list) else []
        extras = project.get("optional-dependencies")
        for extra in extras.values() if isinstance(extras, dict) else []:
            if isinstance(extra, list):
                reqs.extend(r for r in extra if isinstance(r, str))
        lines = source_lines(text)
        for req in reqs:
            number = next((i for i, ln in enumerate(lines, 1) if f'"{req}"' in ln or f"'{req}'" in ln), 1)
            yield number, str(req)


def _dependency_findings(rel: str, path: Path, text: str, written_for_1: bool, sdk1: bool) -> list[Finding]:
    if path.name == "package.json":
        return npm_metadata.package_findings(rel, text, sdk1)
    out: list[Finding] = []
    lines = source_lines(text)
    for line, req in _requirements(path, text):
        m = _REQ.match(req)
        if not m or m.group(1).lower() != "mcp":
            continue
        spec = m.group(3).strip()
        if written_for_1 and _admits_mcp2(spec):
            out.append(Finding(rel, line, 1, "dependency-range",
                               f"`mcp{spec}` admits mcp 2.x, but the code imports 1.x-only modules "
                               f"({', '.join(MCP1_ONLY)})", lines[line - 1].strip() if line <= len(lines) else req))
    return out


def _typescript() -> ModuleType | None:
    try:
        from . import typescript_source
    except ImportError:  # tree-sitter (the `inventory` extra) is not installed
        return None
    return typescript_source


def _typescript_findings(ts: ModuleType, texts: dict[str, str], notes: list[str]) -> list[Finding]:
    """Each file parsed once; which are examined is decided over the tree (typescript_source.analyze_package)."""
    sources: dict[str, typescript_source.Source] = {}
    for rel, text in texts.items():
        try:
            sources[rel] = ts.parse(rel, text)
        except Exception as e:  # the analyzer never raises by design; a bug in it must not stop the report
            notes.append(f"{rel}: not analyzed ({type(e).__name__})")
    try:
        found: list[Finding] = ts.analyze_package(sources)
    except Exception as e:
        notes.append(f"TypeScript/JavaScript files not analyzed ({type(e).__name__})")
        return []
    return found


def inventory(root: str | Path, *, include_tests: bool = False, kinds: set[str] | None = None) -> Inventory:
    base = Path(root)
    result = Inventory(str(root))
    single = base.is_file()
    top = base.parent if single else base
    if single:  # the path the user named is read even through a symlink (it is their choice), within FILE_MAX
        paths = [base.resolve()] if base.stat().st_size <= FILE_MAX else []
        top = base.resolve().parent
        if not paths:
            _skip(result.skipped, f"larger than {FILE_MAX // (1024 * 1024)} MiB", base.name)
    else:
        paths = _drop_compiled(list(walk(base, include_tests, result.skipped)), base)
    texts: dict[Path, str] = {}
    for p in paths:
        if _wanted(p) and (text := _read(p)) is not None:
            texts[p] = text
    py = {p: t for p, t in texts.items() if p.suffix == ".py"}
    trees: dict[Path, ast.Module] = {}  # every Python file that parses, parsed once
    for p, t in py.items():
        try:
            trees[p] = ast.parse(t)
        except (SyntaxError, ValueError, RecursionError):
            continue
    mcp_files = {p for p, tree in trees.items() if python_source.imports_mcp(tree)}
    stdio_files = {p for p in mcp_files if python_source.uses_stdio(trees[p])}
    written_for_1 = any(any(m.startswith(MCP1_ONLY) for m in python_source.imported_modules(tree))
                        for tree in trees.values())
    sdk1 = any(npm_metadata.imports_sdk1(t) for p, t in texts.items() if p.suffix in JS_SUFFIXES)
    js_texts: dict[str, str] = {}
    found: list[Finding] = []
    per_file_lines: dict[str, list[str]] = {}
    for p, text in texts.items():
        rel = p.relative_to(top).as_posix()
        lines = source_lines(text)
        per_file_lines[rel] = lines
        if p.suffix == ".py":
            result.files += 1
            result.lines += len(lines)
            tree = trees.get(p)
            if tree is None:  # does not parse: nothing can be told of it
                continue
            found += python_source.analyze_tree(rel, text, tree)
            # analyze_tree() already reports the stdout writes of a file that itself serves stdio; the package's
            # other modules share its stdout.
            if stdio_files and p not in stdio_files:
                found += python_source.stdout_writes(rel, lines, tree)
        elif p.suffix in JS_SUFFIXES:
            result.files += 1
            result.lines += len(lines)
            js_texts[rel] = text
        else:
            found += _dependency_findings(rel, p, text, written_for_1, sdk1)
    if js_texts:
        ts = _typescript()  # imported only when the tree holds such a file
        if ts is None:
            result.not_analysed.append(f"{len(js_texts)} TypeScript/JavaScript file(s) (package.json ranges were "
                                       "checked): install the `inventory` extra "
                                       "(pip install 'mcp-stateless[inventory]') for tree-sitter")
        else:
            found += _typescript_findings(ts, js_texts, result.notes)
    for why, rels in result.skipped.items():
        shown = ", ".join(rels[:5]) + (f" and {len(rels) - 5} more" if len(rels) > 5 else "")
        result.notes.append(f"not read ({why}): {shown}")
    seen: set[tuple[str, int, str]] = set()
    for f in sorted(found, key=lambda f: (f.file, f.line, f.column, f.kind)):
        key = (f.file, f.line, f.kind)
        if key in seen or _suppressed(per_file_lines.get(f.file, []), f):
            continue
        if kinds and f.kind not in kinds:
            continue
        seen.add(key)
        result.findings.append(f)
    return result
