"""Walk a source tree, run each language's analyzer, check dependency metadata, apply suppressions.

Nothing is imported or run: files are read as text. The TypeScript/JavaScript analyzer needs tree-sitter (the
`inventory` extra) and is imported only when the tree holds such files; without it the report carries a note.
"""

from __future__ import annotations

import ast
import configparser
import os
import re
import stat
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from . import glue, npm_metadata, python_source
from .finding import Finding, source_lines
from .kinds import TRANSPORT_GLUE

if TYPE_CHECKING:
    from . import typescript_source

SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache",
                       ".ruff_cache", ".pytest_cache", "site-packages"})
TEST_DIRS = frozenset({"tests", "test", "__tests__"})
JS_SUFFIXES = frozenset({".ts", ".tsx", ".mts", ".cts", ".js", ".mjs", ".cjs"})
_SUPPRESS = re.compile(r"(?:#|//)\s*mcp-stateless:\s*ignore(?:\[([^\]]*)\])?")
# `mcp` itself, not `mcp-server-git` or `mcp_utils`
_REQ = re.compile(r"^\s*(mcp|fastmcp)(?![\w.-])\s*(\[[^\]]*\])?\s*([^;#]*)", re.I)
# A source file or metadata file larger than this is data or a bundle, not code a person wrote: skipped (and said
# so), so a 135 MB data file in the tree is not parsed into many times its size.
FILE_MAX = 2 * 1024 * 1024
# What mcp 2.x removed (importing it raises there; mcp 1.30.0 against 2.3.0, held to both by
# tests/inventory/test_dependency_layouts.py): code importing one was written for 1.x. Modules, with everything in
# them, and names of modules that remain.
MCP1_ONLY_MODULES = ("mcp.server.fastmcp", "mcp.server.websocket", "mcp.client.websocket", "mcp.shared.session",
                     "mcp.shared.progress", "mcp.shared.version", "mcp.shared.response_router",
                     "mcp.server.lowlevel.func_inspection")
MCP1_ONLY_NAMES = ("mcp.McpError", "mcp.shared.exceptions.McpError", "mcp.server.FastMCP",
                   "mcp.server.lowlevel.server.request_ctx", "mcp.client.streamable_http.streamablehttp_client",
                   "mcp.shared.context.RequestContext", "mcp.shared.memory.create_connected_server_and_client_session",
                   "mcp.server.session.InitializationState", "mcp.types.ResourceReference")
MCP1_ONLY = MCP1_ONLY_MODULES + MCP1_ONLY_NAMES
# Metadata files whose declared or locked dependencies are read (besides requirements*.txt, pyproject.toml,
# setup.py and package.json)
METADATA_NAMES = frozenset({"METADATA", "PKG-INFO", "setup.cfg", "uv.lock", "poetry.lock"})


def mcp1_only_imports(tree: ast.AST) -> set[str]:
    """The 1.x-only modules and names a file imports, each as written (`mcp.server.fastmcp`, not also
    `mcp.server.fastmcp.FastMCP`)."""
    found = {m for m in python_source.imported_modules(tree)
             if m in MCP1_ONLY_NAMES or any(m == p or m.startswith(p + ".") for p in MCP1_ONLY_MODULES)}
    return {m for m in found if not any(m != other and m.startswith(other + ".") for other in found)}


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
    return p.suffix in {".py", ".toml", ".txt", ".json"} | JS_SUFFIXES or p.name in METADATA_NAMES


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


def _line_of(lines: list[str], pattern: str, start: int = 1) -> int:
    """The first line (from `start`) matching `pattern`, else `start`."""
    rx = re.compile(pattern)
    return next((i for i, ln in enumerate(lines, 1) if i >= start and rx.search(ln)), start)


def _quoted_line(lines: list[str], req: str) -> int:
    return next((i for i, ln in enumerate(lines, 1) if f'"{req}"' in ln or f"'{req}'" in ln), 1)


def _strings(value: object) -> list[str]:
    return [r for r in value if isinstance(r, str)] if isinstance(value, list) else []


def _poetry_requirement(spec: object) -> str | None:
    """A poetry dependency (`"^1.2"`, `{version = ">=1.2", extras = [...]}`) as a PEP 440 specifier (`^1.2` is
    `>=1.2,<2`, `~1.2` is `>=1.2,<1.3`, `1.2` is `==1.2`, `*` is any); None for a path or git dependency."""
    if isinstance(spec, dict):
        spec = spec.get("version")
    if not isinstance(spec, str):
        return None
    out = []
    for alternative in spec.split("||"):
        parts = []
        for part in re.split(r"[,\s]+", alternative.strip()):
            m = re.match(r"^(\^|~(?!=))?(\d+)(?:\.(\d+))?", part)
            if part in {"", "*"}:
                continue
            if m and m.group(1) == "^":
                major = int(m.group(2))
                parts.append(f"<{major + 1}" if major else f"<0.{int(m.group(3) or 0) + 1}")
            elif m and m.group(1) == "~":
                parts.append(f"<{int(m.group(2))}.{int(m.group(3) or 0) + 1}")
            elif m and part[0].isdigit():
                parts.append(f"=={part}")
            else:
                parts.append(part)
        if not parts:
            return ""  # one alternative admits any version
        out.append(",".join(parts))
    # several alternatives admit 2.x when any does: the open one stands for them all
    return next((o for o in out if _admits_mcp2(o)), out[0] if out else "")


def _pyproject(text: str) -> Iterator[tuple[int, str]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    lines = source_lines(text)
    # a malformed table (`project = 1`, a list of extras) declares nothing, and must not stop the report
    project = data.get("project")
    project = project if isinstance(project, dict) else {}
    reqs = _strings(project.get("dependencies"))
    extras = project.get("optional-dependencies")
    for extra in extras.values() if isinstance(extras, dict) else []:
        reqs += _strings(extra)
    groups = data.get("dependency-groups")  # PEP 735
    for group in groups.values() if isinstance(groups, dict) else []:
        reqs += _strings(group)
    for req in reqs:
        yield _quoted_line(lines, req), req
    tool = data.get("tool")
    poetry = tool.get("poetry") if isinstance(tool, dict) else None
    if not isinstance(poetry, dict):
        return
    tables = [poetry.get("dependencies"), poetry.get("dev-dependencies")]
    group_tables = poetry.get("group")
    for group in group_tables.values() if isinstance(group_tables, dict) else []:
        tables.append(group.get("dependencies") if isinstance(group, dict) else None)
    for table in tables:
        for name, spec in table.items() if isinstance(table, dict) else []:
            converted = _poetry_requirement(spec)
            if name.lower() == "mcp" and converted is not None:
                yield _line_of(lines, r'^\s*"?mcp"?\s*='), f"mcp{converted}"


def _setup_cfg(text: str) -> Iterator[tuple[int, str]]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return
    values = [parser.get("options", "install_requires", fallback="")]
    if parser.has_section("options.extras_require"):
        values += [v for _, v in parser.items("options.extras_require")]
    lines = source_lines(text)
    for value in values:
        for req in (r.strip() for r in value.splitlines()):
            if req and not req.startswith("#"):
                yield _line_of(lines, rf"^\s*{re.escape(req)}\s*(?:#.*)?$"), req


def _setup_py(tree: ast.Module | None) -> Iterator[tuple[int, str]]:
    """`setup(install_requires=[...], extras_require={...})`, the lists written inline or bound to a module-level
    name."""
    if tree is None:
        return
    bound = {t.id: stmt.value for stmt in tree.body if isinstance(stmt, ast.Assign) for t in stmt.targets
             if isinstance(t, ast.Name)}

    def listed(node: ast.expr) -> Iterator[tuple[int, str]]:
        node = bound.get(node.id, node) if isinstance(node, ast.Name) else node
        for elt in node.elts if isinstance(node, ast.List | ast.Tuple) else []:
            if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                yield elt.lineno, elt.value

    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and python_source._leaf(call.func) == "setup"):
            continue
        for k in call.keywords:
            if k.arg == "install_requires":
                yield from listed(k.value)
            elif k.arg == "extras_require":
                extras = bound.get(k.value.id, k.value) if isinstance(k.value, ast.Name) else k.value
                for v in extras.values if isinstance(extras, ast.Dict) else []:
                    yield from listed(v)


def _locked(text: str, name: str) -> Iterator[tuple[int, str, str]]:
    """(line, what, requirement) of a lock file: the root project's declared `mcp` range (uv.lock records it), and
    the `mcp` version the lock installs (as `==version`)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    lines = source_lines(text)
    packages = data.get("package")
    for package in packages if isinstance(packages, list) else []:
        if not isinstance(package, dict):
            continue
        if str(package.get("name", "")).lower() == "mcp" and isinstance(package.get("version"), str):
            line = _line_of(lines, r'^name\s*=\s*"mcp"\s*$')
            yield _line_of(lines, r"^version\s*=", line), "locked", f"mcp=={package['version']}"
        metadata = package.get("metadata")
        root = isinstance(package.get("source"), dict) and {"editable", "virtual", "directory"} & set(
            package["source"])
        if name == "uv.lock" and root and isinstance(metadata, dict):
            for dep in metadata.get("requires-dist", []) if isinstance(metadata.get("requires-dist"), list) else []:
                if isinstance(dep, dict) and str(dep.get("name", "")).lower() == "mcp":
                    spec = str(dep.get("specifier", ""))
                    yield _line_of(lines, r'\{\s*name\s*=\s*"mcp".*specifier'), "declared", f"mcp{spec}"


def _requirements(path: Path, text: str, tree: ast.Module | None = None) -> Iterator[tuple[int, str]]:
    """(line, requirement string) of every declared dependency in a metadata file."""
    name = path.name
    if name in {"METADATA", "PKG-INFO"}:
        for i, line in enumerate(source_lines(text), 1):
            if line.startswith("Requires-Dist:"):
                yield i, line.split(":", 1)[1]
    elif name.startswith("requirements") and name.endswith(".txt"):
        yield from enumerate(source_lines(text), 1)
    elif name == "pyproject.toml":
        yield from _pyproject(text)
    elif name == "setup.cfg":
        yield from _setup_cfg(text)
    elif name == "setup.py":
        yield from _setup_py(tree)


def _locked_major(spec: str) -> int:
    """The major of a locked `==1.26.0`; 0 when it is not a plain version."""
    m = re.match(r"^==\s*(\d+)", spec)
    return int(m.group(1)) if m else 0


def _written_for_1_text(imports: dict[str, set[str]]) -> str:
    """`mcp.server.fastmcp in server.py`, naming only what the code imports (at most three, and the files)."""
    names = sorted({m for found in imports.values() for m in found})
    files = sorted(rel for rel, found in imports.items() if found)
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    where = ", ".join(files[:2]) + (f" and {len(files) - 2} more files" if len(files) > 2 else "")
    return f"{shown} in {where}"


def _dependency_findings(rel: str, path: Path, text: str, mcp1: dict[str, set[str]], sdk1: str,
                         tree: ast.Module | None = None) -> list[Finding]:
    """`mcp1`: file -> the 1.x-only imports it has; `sdk1`: where the code imports `@modelcontextprotocol/sdk`."""
    if path.name == "package.json":
        return npm_metadata.package_findings(rel, text, sdk1)
    if not any(mcp1.values()):
        return []
    imports = _written_for_1_text(mcp1)
    out: list[Finding] = []
    lines = source_lines(text)

    def excerpt(line: int, fallback: str) -> str:
        return lines[line - 1].strip() if 0 < line <= len(lines) else fallback

    if path.name in {"uv.lock", "poetry.lock"}:
        for line, what, req in _locked(text, path.name):
            spec = req[3:]
            if what == "locked" and not _locked_major(spec) >= 2:
                continue  # a locked 1.x version installs 1.x
            if what == "declared" and not _admits_mcp2(spec):
                continue
            message = (f"the lock installs `{req}`" if what == "locked" else f"`{req}` (as locked) admits mcp 2.x") \
                + f", but the code imports 1.x-only modules ({imports})"
            out.append(Finding(rel, line, 1, "dependency-range", message, excerpt(line, req)))
        return out
    for line, req in _requirements(path, text, tree):
        m = _REQ.match(req)
        if not m or m.group(1).lower() != "mcp":
            continue
        spec = m.group(3).strip()
        if _admits_mcp2(spec):
            out.append(Finding(rel, line, 1, "dependency-range",
                               f"`mcp{spec}` admits mcp 2.x, but the code imports 1.x-only modules ({imports})",
                               excerpt(line, req)))
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
    try:
        return _inventory(root, include_tests=include_tests, kinds=kinds)
    finally:
        python_source.forget_walks()


def _inventory(root: str | Path, *, include_tests: bool, kinds: set[str] | None) -> Inventory:
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
    mcp1 = {p.relative_to(top).as_posix(): removed for p, tree in trees.items()
            if (removed := mcp1_only_imports(tree))}
    sdk1 = next((f"{spec} in {p.relative_to(top).as_posix()}" for p, t in texts.items() if p.suffix in JS_SUFFIXES
                 and (spec := npm_metadata.sdk1_import(t))), "")
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
            if p.name == "setup.py":
                found += _dependency_findings(rel, p, text, mcp1, sdk1, tree)
            # analyze_tree() already reports the stdout writes of a file that itself serves stdio; the package's
            # other modules share its stdout.
            if stdio_files and p not in stdio_files:
                found += python_source.stdout_writes(rel, lines, tree)
        elif p.suffix in JS_SUFFIXES:
            result.files += 1
            result.lines += len(lines)
            js_texts[rel] = text
        else:
            found += _dependency_findings(rel, p, text, mcp1, sdk1)
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
    kept: list[Finding] = []
    # of two findings of one line and kind, the ordinary one is kept: it stays in view, not folded into glue
    for f in sorted(found, key=lambda f: (f.file, f.line, f.column, f.kind, f.transport_glue)):
        key = (f.file, f.line, f.kind)
        if key in seen:
            continue
        seen.add(key)
        # a transport-glue anchor's suppression is judged on the grouped finding: it silences the whole group
        if f.kind == TRANSPORT_GLUE or not _suppressed(per_file_lines.get(f.file, []), f):
            kept.append(f)
    for f in glue.fold(kept):
        if f.covers and _suppressed(per_file_lines.get(f.file, []), f):
            continue
        if kinds and not glue.matches(f, kinds):
            continue
        result.findings.append(f)
    return result
