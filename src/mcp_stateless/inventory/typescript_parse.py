"""Reading TypeScript/JavaScript for the analyzer: the tree-sitter grammars, the node helpers every pass uses, a
file's imports (`Source`), how a relative specifier resolves inside the package, and the names of the SDK the
analyzer recognises."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache

import tree_sitter_javascript
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser

from .finding import source_lines

MCP_PREFIX = "@modelcontextprotocol/"
FUNCTIONS = frozenset({"arrow_function", "function_expression", "function_declaration", "function",
                       "generator_function", "generator_function_declaration", "method_definition"})
SERVER_REQUESTS = frozenset({"createMessage", "elicitInput", "listRoots", "sendRequest"})
SERVER_METHODS = frozenset({"sampling/createMessage", "elicitation/create", "roots/list", "ping"})
ALWAYS_UNSOLICITED = frozenset({"sendResourceUpdated", "sendResourceListChanged", "sendToolListChanged",
                                "sendPromptListChanged"})
NOTIFY = frozenset({"notification", "sendLoggingMessage", "sendNotification"})
REGISTRATIONS = frozenset({"registerTool", "registerResource", "registerPrompt", "tool", "resource", "prompt",
                           "registerToolTask"})
HANDLE_METHODS = frozenset({"enable", "disable", "remove", "update"})
HANDLER_CALLS = REGISTRATIONS | {"setRequestHandler"}
OUTSIDE_CALLS = frozenset({"setInterval", "setTimeout", "setImmediate", "watch", "watchFile", "on", "once",
                           "addListener", "setNotificationHandler"})
OUTSIDE_HOOKS = frozenset({"oninitialized", "onclose", "onerror"})
MUTATORS = frozenset({"set", "add", "push", "delete", "clear", "splice", "unshift", "pop", "shift"})
LOOKUPS = frozenset({"get", "has"})
STDOUT_CONSOLE = frozenset({"log", "info", "debug", "dir", "table"})  # Node sends these to stdout
SECRET_CALLS = frozenset({"randomBytes", "randomUUID", "getRandomValues", "generateKeySync", "generateKeyPairSync",
                          "randomFillSync"})
SESSION_NAMES = frozenset({"sessionId", "session_id", "mcpSessionId", "sid"})
SERVER_NAMES = frozenset({"server", "mcpServer", "mcp", "srv", "lowLevelServer"})
CONTAINERS = frozenset({"Map", "Set", "WeakMap", "WeakSet", "Array"})
# Node's file modules (and fs-extra): a write through them from what a request runs is state on the instance's disk
FS_MODULES = frozenset({"fs", "node:fs", "fs/promises", "node:fs/promises", "fs-extra"})
FS_WRITES = frozenset({"writeFile", "writeFileSync", "appendFile", "appendFileSync", "createWriteStream",
                       "outputFile", "outputFileSync", "writeJson", "writeJsonSync", "writeJSON", "writeJSONSync",
                       "outputJson", "outputJsonSync"})
_MAX_DEPTH = 300  # deeper nesting is not real server code; stop before Python's recursion limit
_STRING_NODES = frozenset({"string", "template_string"})


@cache
def _parser(suffix: str) -> Parser:
    if suffix in {".ts", ".mts", ".cts"}:
        language = Language(tree_sitter_typescript.language_typescript())
    elif suffix == ".tsx":
        language = Language(tree_sitter_typescript.language_tsx())
    else:
        language = Language(tree_sitter_javascript.language())
    return Parser(language)


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", errors="replace")


def _string_value(node: Node | None) -> str | None:
    """The value of a plain string literal (or a template with no substitution), else None."""
    if node is None or node.type not in _STRING_NODES:
        return None
    if any(c.type == "template_substitution" for c in node.children):
        return None
    raw = _text(node)
    return raw[1:-1] if len(raw) >= 2 else ""


def _leaf(node: Node | None) -> str:
    """`c` of `a.b.c`, `a?.b.c`, `c`, `a["c"]`."""
    if node is None:
        return ""
    if node.type in {"identifier", "property_identifier", "type_identifier", "shorthand_property_identifier"}:
        return _text(node)
    if node.type == "member_expression":
        return _text(node.child_by_field_name("property"))
    if node.type == "subscript_expression":
        return _string_value(node.child_by_field_name("index")) or ""
    if node.type in {"parenthesized_expression", "await_expression", "non_null_expression"}:
        inner = node.named_children
        return _leaf(inner[0]) if inner else ""
    return ""


def _args(call: Node) -> list[Node]:
    args = call.child_by_field_name("arguments")
    return [a for a in args.named_children if a.type != "comment"] if args is not None else []


def _walk(node: Node, depth: int = 0) -> Iterator[Node]:
    """Every node under `node` (itself included), depth-bounded."""
    stack = [(node, depth)]
    while stack:
        n, d = stack.pop()
        yield n
        if d < _MAX_DEPTH:
            stack.extend((c, d + 1) for c in reversed(n.children))


def _walk_value(node: Node) -> Iterator[Node]:
    """The nodes of an expression's own value: a function inside it runs later, not as part of it."""
    stack = [(node, 0)]
    while stack:
        n, d = stack.pop()
        yield n
        if d < _MAX_DEPTH and (n is node or n.type not in FUNCTIONS):
            stack.extend((c, d + 1) for c in reversed(n.children))


def _value_names(node: Node) -> set[str]:
    return {_text(n) for n in _walk_value(node) if n.type in {"identifier", "shorthand_property_identifier"}}


def _identifiers(node: Node) -> set[str]:
    return {_text(n) for n in _walk(node) if n.type in {"identifier", "shorthand_property_identifier"}}


def _mentions_call(node: Node, names: frozenset[str]) -> bool:
    return any(n.type == "call_expression" and _leaf(n.child_by_field_name("function")) in names
               for n in _walk(node))


@dataclass
class Source:
    """One parsed file and what the package-level decisions need from it."""

    path: str
    lines: list[str]
    root: Node | None
    imports: dict[str, str] = field(default_factory=dict)  # local name -> name imported from an MCP module
    namespaces: set[str] = field(default_factory=set)  # local names bound to a whole MCP module
    mcp: bool = False
    stdio: bool = False
    relative: list[str] = field(default_factory=list)  # relative specifiers it imports
    fs_imports: dict[str, str] = field(default_factory=dict)  # local name -> name imported from a file module
    fs_namespaces: set[str] = field(default_factory=set)  # local names bound to a whole file module
    relative_imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (specifier, name)


def _module_of(node: Node) -> str | None:
    """The specifier of `import ... from "m"`, `require("m")`, `import("m")`, `export ... from "m"`."""
    if node.type in {"import_statement", "export_statement"}:
        return _string_value(node.child_by_field_name("source"))
    if node.type == "call_expression":
        func = node.child_by_field_name("function")
        if func is not None and (func.type == "import" or _text(func) == "require"):
            args = _args(node)
            return _string_value(args[0]) if args else None
    return None


def _bind_imports(node: Node, imports: dict[str, str], namespaces: set[str]) -> None:
    if node.type == "import_statement":
        clause = next((c for c in node.children if c.type == "import_clause"), None)
        for part in clause.named_children if clause is not None else []:
            if part.type == "namespace_import" or part.type == "identifier":
                namespaces.add(_text(part.named_children[-1] if part.named_children else part))
            elif part.type == "named_imports":
                for spec in part.named_children:
                    if spec.type == "import_specifier":
                        name = _text(spec.child_by_field_name("name"))
                        alias = spec.child_by_field_name("alias")
                        imports[_text(alias) if alias is not None else name] = name
        return
    # `const X = require(m)` / `const {A, B: C} = require(m)`
    declarator = node.parent
    while declarator is not None and declarator.type in {"await_expression", "parenthesized_expression"}:
        declarator = declarator.parent
    if declarator is None or declarator.type != "variable_declarator":
        return
    pattern = declarator.child_by_field_name("name")
    if pattern is None:
        return
    if pattern.type == "identifier":
        namespaces.add(_text(pattern))
    elif pattern.type == "object_pattern":
        for p in pattern.named_children:
            if p.type == "shorthand_property_identifier_pattern":
                imports[_text(p)] = _text(p)
            elif p.type == "pair_pattern":
                imports[_text(p.child_by_field_name("value"))] = _text(p.child_by_field_name("key"))


def parse(path: str, text: str) -> Source:
    """Parse one file and read its imports; never raises."""
    src = Source(path, source_lines(text), None)
    try:
        tree = _parser(posixpath.splitext(path)[1]).parse(text.encode("utf-8", errors="replace"))
    except (ValueError, RuntimeError):
        return src
    src.root = tree.root_node
    for node in _walk(src.root):
        spec = _module_of(node)
        if spec is None:
            continue
        if spec.startswith(MCP_PREFIX):
            src.mcp = True
            _bind_imports(node, src.imports, src.namespaces)
        elif spec.startswith("."):
            src.relative.append(spec)
            named: dict[str, str] = {}
            _bind_imports(node, named, set())
            src.relative_imports.update((local, (spec, name)) for local, name in named.items())
        elif spec in FS_MODULES:
            _bind_imports(node, src.fs_imports, src.fs_namespaces)
    src.stdio = src.mcp and any(
        n.type == "new_expression" and _canonical(src, n.child_by_field_name("constructor")) == "StdioServerTransport"
        for n in _walk(src.root))
    return src


def _canonical(src: Source, node: Node | None) -> str:
    """The SDK name an expression denotes (`Y` imported as `{X as Y}` gives `X`; `ns.X` gives `X`), else ''."""
    if node is None:
        return ""
    if node.type == "identifier":
        return src.imports.get(_text(node), "")
    if node.type == "member_expression":
        obj = node.child_by_field_name("object")
        if obj is not None and obj.type == "identifier" and _text(obj) in src.namespaces:
            return _leaf(node)
    return ""


def resolve(importer: str, spec: str, known: set[str]) -> str | None:
    """The file of the tree a relative specifier names (TypeScript's `./x.js` means `./x.ts`)."""
    base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
    stem, ext = posixpath.splitext(base)
    candidates = [base]
    if ext in {".js", ".mjs", ".cjs", ".jsx"}:
        candidates += [stem + e for e in (".ts", ".tsx", ".mts", ".cts")]
    candidates += [base + e for e in (".ts", ".tsx", ".js", ".mjs", ".cjs", ".mts", ".cts")]
    candidates += [f"{base}/index{e}" for e in (".ts", ".tsx", ".js", ".mjs")]
    return next((c for c in candidates if c in known), None)


def _closure(sources: dict[str, Source], start: set[str]) -> set[str]:
    known = set(sources)
    seen = set(start)
    queue = list(start)
    while queue:
        path = queue.pop()
        for spec in sources[path].relative:
            target = resolve(path, spec, known)
            if target is not None and target not in seen:
                seen.add(target)
                queue.append(target)
    return seen
