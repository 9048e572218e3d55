"""The TypeScript/JavaScript analyzer: hidden-state dependencies in servers on `@modelcontextprotocol/sdk` 1.x.

Each file is parsed once with tree-sitter (TypeScript grammar for .ts/.mts/.cts, TSX for .tsx, JavaScript for
.js/.mjs/.cjs) and never run. Which files are examined is decided over the whole tree (`analyze_package`): a file
that imports or requires `@modelcontextprotocol/*`, and every file such a file imports by a relative specifier,
transitively (the helper modules of the same server). stdout writes are reported in a file reached the same way
from a file that constructs `StdioServerTransport`, since they share its stdout.

Names are resolved through the file's imports (`import {X as Y}`, `import * as ns`, `const {X: Y} = require(...)`)
for the SDK's classes and schemas; method calls distinctive of the SDK (`createMessage`, `elicitInput`,
`listRoots`, `sendRequest`, `getClientCapabilities`, ...) are recognised by name in examined files. Every finding
points at the line whose code does the thing. No input makes it raise: a file that does not parse as a whole is
analysed in the parts tree-sitter recovers.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache

import tree_sitter_javascript
import tree_sitter_typescript
from tree_sitter import Language, Node, Parser

from .finding import Finding, source_lines

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


def analyze_package(sources: dict[str, Source]) -> list[Finding]:
    """Findings of every file of a tree that is part of an MCP server (see the module docstring)."""
    examined = _closure(sources, {p for p, s in sources.items() if s.mcp})
    stdio = _closure(sources, {p for p, s in sources.items() if s.stdio})
    analyzers = {path: _Analyzer(sources[path], root, path in stdio) for path in sorted(examined)
                 if (root := sources[path].root) is not None}
    _reach_across(analyzers)
    out: list[Finding] = []
    for analyzer in analyzers.values():
        out += analyzer.run()
    return out


def _reach_across(analyzers: dict[str, _Analyzer]) -> None:
    """A method of a class of another file of the package, called by a request on an instance made here
    (`const thinking = new ThinkingServer()` of `./lib.js`): reached there, and that class's one object."""
    known = set(analyzers)
    done: set[tuple[str, str, str]] = set()
    for _ in range(3):  # a short chain of files; deeper chains are not real server code
        for path, analyzer in analyzers.items():
            for local, method_name in sorted(analyzer.pre.external_calls):
                spec, name = analyzer.src.relative_imports[local]
                target_path = resolve(path, spec, known)
                if target_path is None or (path, local, method_name) in done:
                    continue
                done.add((path, local, method_name))
                target = analyzers[target_path].pre
                if (path, local, "") not in done:
                    done.add((path, local, ""))
                    target.constructions[name] = target.constructions.get(name, 0) + \
                        analyzer.pre.external_constructions.get(local, 0)
                if (method := target.classes.get(name, {}).get(method_name)) is not None:
                    _reach_from(target, [method])


def analyze(path: str, text: str) -> list[Finding]:
    """Findings of one file on its own: examined only when it imports the SDK; stdout counts if it serves stdio."""
    src = parse(path, text)
    return analyze_source(src, stdio=src.stdio) if src.mcp else []


# -- the analysis of one file ----------------------------------------------------------------------------------
@dataclass
class _Frame:
    role: str  # "handler" (answers a request), "outside" (timer, watcher, notification handler, hook), "plain"
    oninit: bool = False
    locals: set[str] = field(default_factory=set)
    answers: set[str] = field(default_factory=set)  # names holding a client's answer to a server request
    caps: set[str] = field(default_factory=set)  # names derived from the client's initialize capabilities
    sessions: set[str] = field(default_factory=set)  # names holding a session id
    request_scoped: set[str] = field(default_factory=set)  # a handler's parameters (`extra`, `{ sendNotification }`)
    fn: Node | None = None
    reached: bool = False  # a request runs this function (a handler, or what one calls)


@dataclass
class _Prepass:
    functions: dict[str, Node] = field(default_factory=dict)
    outside: set[str] = field(default_factory=set)  # function names run from timers/watchers/notifications
    answer_names: set[str] = field(default_factory=set)
    answer_params: dict[str, set[int]] = field(default_factory=dict)
    registrations: set[str] = field(default_factory=set)  # names holding a registered tool/resource/prompt
    methods: dict[str, str] = field(default_factory=dict)  # `const req = {method: "..."}` -> method
    servers: set[str] = field(default_factory=set)
    module_lets: set[str] = field(default_factory=set)
    module_containers: set[str] = field(default_factory=set)
    classes: dict[str, dict[str, Node]] = field(default_factory=dict)  # class of the file -> its methods
    instances: dict[str, str] = field(default_factory=dict)  # `const x = new C()` -> C, for a class of the file
    constructions: dict[str, int] = field(default_factory=dict)  # class of the file -> `new C(...)` sites
    reachable: set[tuple[int, int]] = field(default_factory=set)  # _key() of the functions a request runs
    # classes imported from the package's other files: `const x = new Imported()` -> Imported, the `new` sites
    # outside what a request runs, and the (class, method) a request calls on such an instance
    external_instances: dict[str, str] = field(default_factory=dict)
    external_constructions: dict[str, int] = field(default_factory=dict)
    external_calls: set[tuple[str, str]] = field(default_factory=set)


def _function_name(fn: Node) -> str:
    name = fn.child_by_field_name("name")
    if name is not None and fn.type != "method_definition":
        return _text(name)
    parent = fn.parent
    if parent is not None and parent.type == "variable_declarator":
        return _text(parent.child_by_field_name("name"))
    return ""


def _is_server_request(node: Node) -> bool:
    return node.type == "call_expression" and _leaf(node.child_by_field_name("function")) in SERVER_REQUESTS


def _top_level(root: Node) -> Iterator[Node]:
    for stmt in root.named_children:
        if stmt.type == "export_statement":
            yield from (c for c in stmt.named_children if c.type in {"lexical_declaration", "variable_declaration"})
        elif stmt.type in {"lexical_declaration", "variable_declaration"}:
            yield stmt


def _is_container(value: Node | None) -> bool:
    if value is None:
        return False
    if value.type in {"array", "object"}:
        return True
    if value.type == "new_expression":
        return _leaf(value.child_by_field_name("constructor")) in CONTAINERS
    return False


def _prepass(src: Source, root: Node) -> _Prepass:
    pre = _Prepass()
    for decl in _top_level(root):
        kind = _text(decl.children[0]) if decl.children else ""
        for d in decl.named_children:
            if d.type != "variable_declarator":
                continue
            target = d.child_by_field_name("name")
            if target is None or target.type != "identifier":
                continue
            value = d.child_by_field_name("value")
            if kind in {"let", "var"} and (value is None or value.type not in FUNCTIONS):
                pre.module_lets.add(_text(target))
            if _is_container(value):
                pre.module_containers.add(_text(target))
    containers: set[str] = set()
    pending: list[tuple[str, str]] = []  # (name, container) of `name = container.get(...)`
    nodes = list(_walk(root))  # walked once, for this pass and what a request runs
    for node in nodes:
        t = node.type
        if t in FUNCTIONS:
            name = _function_name(node)
            if name:
                pre.functions[name] = node
        elif t == "variable_declarator":
            name = _text(node.child_by_field_name("name"))
            value = node.child_by_field_name("value")
            if value is None or value.type in FUNCTIONS:  # a function's body is walked on its own
                continue
            if any(_is_server_request(n) for n in _walk_value(value)):
                pre.answer_names.add(name)
            inner = value.named_children[0] if value.type == "await_expression" and value.named_children else value
            if inner.type == "call_expression":
                func = inner.child_by_field_name("function")
                if _leaf(func) in REGISTRATIONS:
                    pre.registrations.add(name)
                elif _leaf(func) == "get" and func is not None and func.type == "member_expression":
                    pending.append((name, _text(func.child_by_field_name("object"))))
            elif inner.type == "object":
                method = _object_method(inner)
                if method:
                    pre.methods[name] = method
            elif inner.type == "new_expression" and _canonical(
                    src, inner.child_by_field_name("constructor")) in {"McpServer", "Server"}:
                pre.servers.add(name)
        elif t == "call_expression":
            func = node.child_by_field_name("function")
            leaf = _leaf(func)
            args = _args(node)
            if leaf in OUTSIDE_CALLS:
                for a in args:
                    if a.type == "identifier":
                        pre.outside.add(_text(a))
                    elif a.type in FUNCTIONS:
                        pre.outside.update(_text(c.child_by_field_name("function")) for c in _walk(a)
                                           if c.type == "call_expression")
            elif leaf in {"set", "push"} and func is not None and func.type == "member_expression" and any(
                    _text(a) in pre.registrations for a in args):
                containers.add(_text(func.child_by_field_name("object")))
            if func is not None and func.type == "identifier":
                for i, a in enumerate(args):
                    if a.type not in FUNCTIONS and (_value_names(a) & pre.answer_names or _is_server_request(a)):
                        pre.answer_params.setdefault(_text(func), set()).add(i)
    pre.registrations.update(name for name, container in pending if container in containers)
    _reach(pre, nodes, src)
    return pre


def _key(node: Node) -> tuple[int, int]:
    """A node's identity (tree-sitter makes a new Node object at each access)."""
    return node.start_byte, node.end_byte


def _enclosing_class(node: Node) -> str:
    parent = node.parent
    while parent is not None and parent.type not in {"class_declaration", "class"}:
        parent = parent.parent
    return _text(parent.child_by_field_name("name")) if parent is not None else ""


def _handler_roots(pre: _Prepass, nodes: list[Node]) -> list[Node]:
    """The functions registered as request handlers: inline in `registerTool(...)`/`setRequestHandler(...)`, or
    a function of the file passed there by name."""
    out = []
    for node in nodes:
        if node.type == "call_expression" and _leaf(node.child_by_field_name("function")) in HANDLER_CALLS:
            for a in _args(node):
                if a.type in FUNCTIONS:
                    out.append(a)
                elif a.type == "identifier" and _text(a) in pre.functions:
                    out.append(pre.functions[_text(a)])
    return out


def _reach_from(pre: _Prepass, queue: list[Node]) -> None:
    while queue:
        fn = queue.pop()
        if _key(fn) in pre.reachable:
            continue
        pre.reachable.add(_key(fn))
        for call in _walk(fn):
            if call.type != "call_expression" or (func := call.child_by_field_name("function")) is None:
                continue
            if func.type == "identifier" and _text(func) in pre.functions:
                queue.append(pre.functions[_text(func)])
            elif func.type == "member_expression":
                obj = _text(func.child_by_field_name("object"))
                cls = _enclosing_class(fn) if obj == "this" else pre.instances.get(obj, "")
                if (method := pre.classes.get(cls, {}).get(_leaf(func))) is not None:
                    queue.append(method)
                elif obj in pre.external_instances:
                    pre.external_calls.add((pre.external_instances[obj], _leaf(func)))


def _outside_requests(pre: _Prepass, site: Node) -> bool:
    outer = site.parent
    while outer is not None and not (outer.type in FUNCTIONS and _key(outer) in pre.reachable):
        outer = outer.parent
    return outer is None


def _reach(pre: _Prepass, nodes: list[Node], src: Source) -> None:
    """What a request runs: the handlers, then (transitively) the file's functions they call by name and the
    methods they call on `this` or on an instance of a class of the file."""
    for node in nodes:
        if node.type in {"class_declaration", "class"} and (name := _text(node.child_by_field_name("name"))):
            body = node.child_by_field_name("body")
            pre.classes[name] = {_leaf(m.child_by_field_name("name")): m for m in (
                body.named_children if body is not None else []) if m.type == "method_definition"}
    sites: list[tuple[str, Node, bool]] = []  # (class, `new` site, imported from another file?)
    for node in nodes:
        if node.type != "new_expression" or (ctor := node.child_by_field_name("constructor")) is None:
            continue
        name = _text(ctor)
        imported = name not in pre.classes and name in src.relative_imports
        if name not in pre.classes and not imported:
            continue
        sites.append((name, node, imported))
        parent = node.parent
        if parent is not None and parent.type == "variable_declarator":
            (pre.external_instances if imported else pre.instances)[_text(parent.child_by_field_name("name"))] = name
    _reach_from(pre, _handler_roots(pre, nodes))
    # an object a request makes is that request's own; one made once outside (at load, in main) serves every caller
    for cls, site, imported in sites:
        counts = pre.external_constructions if imported else pre.constructions
        counts[cls] = counts.get(cls, 0) + 1 if _outside_requests(pre, site) else 2  # per request: never "the one"


def _from_arguments(fn: Node) -> set[str]:
    """A function's parameters and the local names assigned from them (followed through later assignments): what
    a call names from its caller's arguments."""
    bound = fn.child_by_field_name("parameters") or fn.child_by_field_name("parameter")
    tainted = {_text(n) for n in _walk(bound) if n.type in {"identifier", "shorthand_property_identifier_pattern"}} \
        if bound is not None else set()
    tainted.discard("this")
    declarators = [n for n in _walk(fn) if n.type in {"variable_declarator", "assignment_expression"}]
    for _ in range(3):  # a short chain of locals; deeper chains are not real server code
        for d in declarators:
            name = d.child_by_field_name("name" if d.type == "variable_declarator" else "left")
            value = d.child_by_field_name("value" if d.type == "variable_declarator" else "right")
            if name is not None and value is not None and _identifiers(value) & tainted:
                tainted |= {_text(n) for n in _walk(name) if n.type in {
                    "identifier", "shorthand_property_identifier_pattern"}}
    return tainted


def _object_method(obj: Node) -> str:
    for pair in obj.named_children:
        if pair.type == "pair" and _leaf(pair.child_by_field_name("key")) == "method":
            return _string_value(pair.child_by_field_name("value")) or ""
    return ""


def _params(fn: Node) -> list[str]:
    params = fn.child_by_field_name("parameters") or fn.child_by_field_name("parameter")
    if params is None:
        return []
    if params.type == "identifier":
        return [_text(params)]
    out = []
    for p in params.named_children:
        target = p.child_by_field_name("pattern") if p.type in {"required_parameter", "optional_parameter"} else p
        if target is not None and target.type == "assignment_pattern":
            target = target.child_by_field_name("left")
        out.append(_text(target) if target is not None and target.type == "identifier" else "")
    return out


class _Analyzer:
    def __init__(self, src: Source, root: Node, stdio: bool) -> None:
        self.src = src
        self.root = root
        self._args_cache: dict[tuple[int, int], set[str]] = {}
        self.stdio = stdio
        self.pre = _prepass(src, root)
        self.frames: list[_Frame] = []
        self.cap_conditions = 0
        self.found: list[Finding] = []

    def run(self) -> list[Finding]:
        try:
            self.visit(self.root)
        except RecursionError:
            return []
        return self.found

    # -- helpers -----------------------------------------------------------------------------------------------
    def add(self, node: Node, kind: str, message: str) -> None:
        row, col = node.start_point
        lines = self.src.lines
        excerpt = lines[row].strip() if 0 <= row < len(lines) else ""
        self.found.append(Finding(self.src.path, row + 1, col + 1, kind, message, excerpt[:300]))

    @property
    def frame(self) -> _Frame | None:
        return self.frames[-1] if self.frames else None

    def _local(self, name: str) -> bool:
        return any(name in f.locals for f in self.frames)

    def _module_name(self, node: Node | None, names: set[str]) -> str:
        """The module-level name (of `names`) an expression denotes, when no enclosing function shadows it."""
        if node is None or node.type != "identifier" or not self.frames:
            return ""
        name = _text(node)
        return name if name in names and not self._local(name) else ""

    def _session_key(self, node: Node | None) -> bool:
        if node is None:
            return False
        if node.type == "identifier":
            name = _text(node)
            return name in SESSION_NAMES or any(name in f.sessions for f in self.frames)
        if node.type == "member_expression":
            return _leaf(node) in {"sessionId", "session_id", "mcpSessionId"}
        if node.type == "subscript_expression":
            return (_string_value(node.child_by_field_name("index")) or "").lower() == "mcp-session-id"
        if node.type == "call_expression":  # req.header("mcp-session-id"), c.req.header(...), headers.get(...)
            args = _args(node)
            return _leaf(node.child_by_field_name("function")) in {"get", "header", "getHeader"} and bool(args) \
                and (_string_value(args[0]) or "").lower() == "mcp-session-id"
        if node.type == "template_string":  # a composite key with the session id in it
            return any(self._session_key(sub.named_children[0]) for sub in node.named_children
                       if sub.type == "template_substitution" and sub.named_children)
        if node.type in {"parenthesized_expression", "as_expression", "non_null_expression", "binary_expression"}:
            first = node.named_children[0] if node.named_children else None
            return self._session_key(first)
        return False

    def _answer(self, node: Node) -> bool:
        if any(_is_server_request(n) for n in _walk_value(node)):
            return True
        names = _value_names(node)
        return any(names & f.answers for f in self.frames)

    def _caps(self, node: Node) -> bool:
        if _mentions_call(node, frozenset({"getClientCapabilities"})):
            return True
        names = _identifiers(node)
        return any(names & f.caps for f in self.frames)

    def _serverish(self, node: Node | None) -> bool:
        if node is None:
            return False
        if node.type == "identifier":
            return _text(node) in SERVER_NAMES or _text(node) in self.pre.servers
        if node.type == "member_expression":
            return _leaf(node) in {"server", "mcpServer"} or (
                _leaf(node) in SERVER_NAMES and self._serverish(node.child_by_field_name("object")))
        return False

    def _request_scoped(self, notifier: Node) -> bool:
        """`extra.sendNotification` of the request being handled (even from a timer inside its handler): the SDK
        sends it as part of that request, on its response stream."""
        if notifier.type != "identifier":
            return False
        name = _text(notifier)
        frame = next((f for f in reversed(self.frames) if name in f.locals), None)
        return frame is not None and name in frame.request_scoped

    def _outside(self) -> bool:
        return any(f.role == "outside" for f in self.frames)

    def _in_handler_or_outside(self) -> bool:
        return any(f.role in {"handler", "outside"} for f in self.frames)

    # -- the walk ----------------------------------------------------------------------------------------------
    def visit(self, node: Node, depth: int = 0) -> None:
        if depth > _MAX_DEPTH:
            return
        t = node.type
        if t in FUNCTIONS:
            self._function(node, depth)
            return
        if t == "if_statement":
            self._if(node, depth)
            return
        handler = getattr(self, f"_on_{t}", None)
        if handler is not None:
            handler(node)
        for child in node.children:
            self.visit(child, depth + 1)

    def _function(self, fn: Node, depth: int) -> None:
        parent = fn.parent
        role = "plain"
        oninit = session_hook = False
        name = _function_name(fn)
        if parent is not None and parent.type == "arguments" and parent.parent is not None:
            leaf = _leaf(parent.parent.child_by_field_name("function"))
            role = "handler" if leaf in HANDLER_CALLS else "outside" if leaf in OUTSIDE_CALLS else role
        elif parent is not None and parent.type == "assignment_expression":
            hook = _leaf(parent.child_by_field_name("left"))
            if hook in OUTSIDE_HOOKS:
                role, oninit = "outside", hook == "oninitialized"
        elif parent is not None and parent.type == "pair" and _leaf(parent.child_by_field_name("key")) in {
                "oninitialized", "onclose", "onsessioninitialized", "onsessionclosed"}:
            role = "outside"
            session_hook = _leaf(parent.child_by_field_name("key")).startswith("onsession")
        if name and name in self.pre.outside:
            role = "outside"
        params = _params(fn)
        frame = _Frame(role, oninit, set(params), fn=fn, reached=role == "handler" or _key(fn) in self.pre.reachable)
        frame.answers = {params[i] for i in self.pre.answer_params.get(name, set()) if i < len(params) and params[i]}
        # the transport's session callbacks are given the session id
        frame.sessions = {p for p in params if p in SESSION_NAMES or (session_hook and p)}
        bound = fn.child_by_field_name("parameters") or fn.child_by_field_name("parameter")
        if role == "handler" and bound is not None:
            frame.request_scoped = {_text(n) for n in _walk(bound) if n.type in {
                "identifier", "shorthand_property_identifier_pattern"}}
            frame.locals |= frame.request_scoped
        self.frames.append(frame)
        saved, self.cap_conditions = self.cap_conditions, 0
        for child in fn.children:
            if child.type not in {"formal_parameters"}:
                self.visit(child, depth + 1)
        self.cap_conditions = saved
        self.frames.pop()

    def _if(self, node: Node, depth: int) -> None:
        condition = node.child_by_field_name("condition")
        if condition is not None and self.frames:
            names = _identifiers(condition)
            if _mentions_call(condition, frozenset({"getClientVersion"})) or names & {"clientInfo", "clientVersion"}:
                self.add(node, "connection-auth", "a decision taken from the client's self-reported info")
        conditional = condition is not None and self._caps(condition)
        for child in node.children:
            if child.type == "parenthesized_expression":
                self.visit(child, depth + 1)
                continue
            self.cap_conditions += conditional
            self.visit(child, depth + 1)
            self.cap_conditions -= conditional

    def _on_variable_declarator(self, node: Node) -> None:
        name = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        frame = self.frame
        if frame is None:
            if value is not None:
                self._secret(node, value)
            return
        if name is None:
            return
        if name.type == "identifier":
            n = _text(name)
            frame.locals.add(n)
            if value is not None and value.type not in FUNCTIONS:
                if self._answer(value):
                    frame.answers.add(n)
                if self._caps(value):
                    frame.caps.add(n)
                if self._session_key(value):
                    frame.sessions.add(n)
        else:
            # `const { roots } = await server.listRoots()`: each bound name holds part of the answer
            answer = value is not None and value.type not in FUNCTIONS and self._answer(value)
            caps = value is not None and value.type not in FUNCTIONS and self._caps(value)
            for p in _walk(name):
                if p.type in {"identifier", "shorthand_property_identifier_pattern"}:
                    frame.locals.add(_text(p))
                    if answer:
                        frame.answers.add(_text(p))
                    if caps:
                        frame.caps.add(_text(p))
                if p.type == "shorthand_property_identifier_pattern" and _text(p) == "sessionId":
                    frame.sessions.add("sessionId")
                    self.add(p, "session-id-read", "destructures `sessionId`")

    def _secret(self, node: Node, value: Node) -> None:
        inner = value
        # randomBytes(32).toString("hex"), (await x()).y: the call the value is made from
        while inner.type in {"await_expression", "parenthesized_expression", "member_expression"} or (
                inner.type == "call_expression" and _leaf(inner.child_by_field_name("function")) in {
                    "toString", "slice", "substring", "toUpperCase", "toLowerCase", "replace", "replaceAll"}):
            if inner.type == "call_expression":
                func = inner.child_by_field_name("function")
                nxt = func.child_by_field_name("object") if func is not None else None
            elif inner.type == "member_expression":
                nxt = inner.child_by_field_name("object")
            else:
                nxt = inner.named_children[0] if inner.named_children else None
            if nxt is None:
                return
            inner = nxt
        if inner.type == "call_expression" and _leaf(inner.child_by_field_name("function")) in SECRET_CALLS:
            leaf = _leaf(inner.child_by_field_name("function"))
            self.add(node, "process-secret", f"`{leaf}()` at module load: a different key per process")

    def _on_assignment_expression(self, node: Node) -> None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is None or right is None:
            return
        if not self.frames:
            if left.type == "identifier":
                self._secret(node, right)
            return
        self._write(node, left, right)

    def _on_augmented_assignment_expression(self, node: Node) -> None:
        left = node.child_by_field_name("left")
        right = node.child_by_field_name("right")
        if left is not None and right is not None and self.frames:
            self._write(node, left, right)

    def _on_update_expression(self, node: Node) -> None:
        target = node.child_by_field_name("argument")
        if self._module_name(target, self.pre.module_lets):
            self.add(node, "module-state", f"module-level `{_text(target)}` written by a function")
        elif target is not None and (shared := self._instance_state(target)):
            self.add(node, "module-state", f"{shared} written")

    def _write(self, node: Node, left: Node, right: Node) -> None:
        frame = self.frames[-1]
        if left.type == "identifier" and self._answer(right) and not self._module_name(left, self.pre.module_lets):
            frame.answers.add(_text(left))
        written = self._module_name(left, self.pre.module_lets)
        if left.type in {"subscript_expression", "member_expression"}:
            base = left.child_by_field_name("object")
            while base is not None and base.type in {"subscript_expression", "member_expression"}:
                base = base.child_by_field_name("object")
            owner = self._module_name(base, self.pre.module_lets | self.pre.module_containers)
            if left.type == "subscript_expression" and self._session_key(left.child_by_field_name("index")) and (
                    owner or self._outer(base) or self._outer(left.child_by_field_name("object"))):
                self.add(node, "session-keyed-state", "state stored under the session id as key")
                return
            written = owner
        if not written:
            this_field = left.child_by_field_name("object") if left.type == "subscript_expression" else left
            if this_field is None or this_field.type != "member_expression" or \
                    _text(this_field.child_by_field_name("object")) != "this":
                return
            kept = left.type == "subscript_expression" or node.type == "augmented_assignment_expression" or bool(
                _identifiers(right) & self._from_arguments())
            if kept and (shared := self._instance_state(this_field)):
                self.add(node, "module-state", f"{shared} written")
            return
        if _mentions_call(right, frozenset({"getClientCapabilities", "getClientVersion"})) or self._caps(right):
            self.add(node, "initialize-state", f"initialize-time client data kept in `{written}`")
        elif self._answer(right):
            self.add(node, "client-answer-kept", f"a client's answer stored in module-level `{written}`")
        else:
            self.add(node, "module-state", f"module-level `{written}` written by a function")

    def _instance_state(self, field: Node) -> str:
        """`this.f` of an object every caller shares, in what a request runs: a method (not the constructor) of a
        class of the file constructed once, reached from a handler; or a handler written inside a method (an
        arrow function keeps the method's `this`), where `this` is the server object itself."""
        if field.type != "member_expression" or _text(field.child_by_field_name("object")) != "this":
            return ""
        at = next((i for i in range(len(self.frames) - 1, -1, -1) if (fn := self.frames[i].fn) is not None
                   and fn.type in {"method_definition", "function_declaration", "function_expression",
                                   "function"}), None)
        if at is None or (method := self.frames[at].fn) is None or method.type != "method_definition":
            return ""  # `this` of a plain function is not an object of a class
        cls = _enclosing_class(method)
        name = _leaf(method.child_by_field_name("name"))
        if any(f.role == "handler" for f in self.frames[at + 1:]):
            return f"`this.{_leaf(field)}` of the `{cls}` object serving every request, in a handler,"
        if at == len(self.frames) - 1 and name != "constructor" and self.frames[at].reached and \
                self.pre.constructions.get(cls) == 1:
            return f"`{cls}.{_leaf(field)}` of the one `{cls}` object every caller shares, by `{name}` (a " \
                   "request runs it),"
        return ""

    def _outer(self, base: Node | None) -> bool:
        """An object that outlives the call: made by an enclosing function (a per-server map in a factory), or a
        field of `this` (a server class's map)."""
        if base is not None and base.type == "member_expression":
            return _text(base.child_by_field_name("object")) == "this"
        if base is None or base.type != "identifier" or len(self.frames) < 2:
            return False
        name = _text(base)
        return name not in self.frames[-1].locals and any(name in f.locals for f in self.frames[:-1])

    def _on_subscript_expression(self, node: Node) -> None:
        key = (_string_value(node.child_by_field_name("index")) or "").lower()
        if key == "mcp-session-id":
            self.add(node, "session-id-read", "reads the Mcp-Session-Id header")
        elif key == "last-event-id":
            self.add(node, "event-replay", "reads Last-Event-ID to replay a broken stream")
        parent = node.parent
        is_target = parent is not None and parent.type == "assignment_expression" and \
            parent.child_by_field_name("left") == node
        obj = node.child_by_field_name("object")
        if not is_target and self.frames and self._session_key(node.child_by_field_name("index")) and (
                self._module_name(obj, self.pre.module_lets | self.pre.module_containers) or self._outer(obj)):
            self.add(node, "session-keyed-state", "state looked up by the session id")

    def _on_member_expression(self, node: Node) -> None:
        if _leaf(node) not in {"sessionId", "mcpSessionId"}:
            return
        parent = node.parent
        if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == node:
            return
        if parent is not None and parent.type == "call_expression" and parent.child_by_field_name("function") == node:
            return
        self.add(node, "session-id-read", f"reads `{_text(node)}`")

    def _on_pair(self, node: Node) -> None:
        key = _leaf(node.child_by_field_name("key"))
        value = node.child_by_field_name("value")
        if key == "eventStore" and value is not None and _text(value) not in {"undefined", "null"}:
            self.add(node, "event-replay", "an event store replays broken streams (Last-Event-ID)")
        elif key == "sessionIdGenerator" and value is not None and _text(value) not in {"undefined", "null"}:
            self.add(node, "session-id-read", "`sessionIdGenerator`: the transport issues an Mcp-Session-Id and "
                                              "requires it on every later request")

    def _on_shorthand_property_identifier(self, node: Node) -> None:
        if _text(node) == "eventStore":
            self.add(node, "event-replay", "an event store replays broken streams (Last-Event-ID)")

    def _on_class_declaration(self, node: Node) -> None:
        heritage = next((c for c in node.children if c.type == "class_heritage"), None)
        body = node.child_by_field_name("body")
        methods = {_leaf(m.child_by_field_name("name")) for m in body.named_children} if body is not None else set()
        if (heritage is not None and "EventStore" in _text(heritage)) or "replayEventsAfter" in methods:
            self.add(node, "event-replay", f"`{_text(node.child_by_field_name('name'))}` stores events for "
                                           "Last-Event-ID replay")

    _on_class = _on_class_declaration

    def _on_new_expression(self, node: Node) -> None:
        ctor = node.child_by_field_name("constructor")
        name = _canonical(self.src, ctor) or _leaf(ctor)
        if name == "SSEServerTransport" and _canonical(self.src, ctor):
            self.add(node, "get-stream", "`SSEServerTransport`: the HTTP+SSE transport")
        elif name.endswith("EventStore"):
            self.add(node, "event-replay", f"`{name}`: events kept for Last-Event-ID replay")
        elif _canonical(self.src, ctor) in {"McpServer", "Server"}:
            for n in _walk(node):
                if n.type == "pair" and _leaf(n.child_by_field_name("key")) == "logging" and n.parent is not None \
                        and n.parent.parent is not None and _leaf(n.parent.parent.child_by_field_name("key")) == \
                        "capabilities":
                    self.add(n, "log-level-state", "the logging capability: the SDK keeps each session's "
                                                   "`logging/setLevel` level and filters `sendLoggingMessage` by it")

    def _on_call_expression(self, node: Node) -> None:
        func = node.child_by_field_name("function")
        if func is None:
            return
        leaf = _leaf(func)
        recv = func.child_by_field_name("object") if func.type == "member_expression" else None
        args = _args(node)
        first = args[0] if args else None
        self._file_write(node, func, first)
        if leaf in SERVER_REQUESTS and func.type == "member_expression":
            when = "outside any request (a hook, timer or notification handler)" if self._outside() else \
                "while handling a call"
            self.add(node, "server-request", f"`{leaf}` asks the client {when}")
        elif leaf in {"ping", "request"} and self._serverish(recv):
            method = "ping" if leaf == "ping" else _object_method(first) if first is not None and \
                first.type == "object" else self.pre.methods.get(_text(first), "")
            if method in SERVER_METHODS:
                self.add(node, "server-request", f"`{method}` request to the client")
        elif leaf in ALWAYS_UNSOLICITED:
            self.add(node, "unsolicited-notification", f"`{leaf}` notifies outside the client's request")
        elif leaf in NOTIFY and (leaf != "notification" or self._serverish(recv)) and (
                self._outside() or not self.frames) and not self._request_scoped(recv if recv is not None else func):
            self.add(node, "unsolicited-notification", f"`{leaf}` from a timer, watcher or hook, outside a request")
        elif leaf in REGISTRATIONS and (leaf.startswith("register") or self._serverish(recv)) and (
                self.cap_conditions or any(f.oninit for f in self.frames) or self._in_handler_or_outside()):
            why = "on the client's capabilities" if self.cap_conditions else "after initialize"
            self.add(node, "per-connection-registration", f"`{leaf}` registered {why}")
        elif leaf in HANDLE_METHODS and recv is not None and _text(recv) in self.pre.registrations:
            self.add(node, "per-connection-registration", f"`{_text(recv)}.{leaf}()` changes the catalogue at run time")
        elif func.type == "identifier" and leaf.startswith("register") and (
                any(f.oninit for f in self.frames) or self._in_handler_or_outside()):
            # a helper that registers (the helpers' own bodies are plain functions, so this is where it shows)
            self.add(node, "per-connection-registration", f"`{leaf}` registers at run time, per connection")
        elif leaf in {"getClientCapabilities", "getClientVersion"}:
            self.add(node, "initialize-state", f"`{leaf}()` reads what the client sent in initialize")
        elif leaf == "setRequestHandler" and first is not None:
            self._request_handler(node, first, args)
        elif leaf in MUTATORS | LOOKUPS and recv is not None and self.frames:
            self._container_call(node, leaf, recv, args)
        elif leaf in {"get", "header", "getHeader"} and first is not None:
            header = (_string_value(first) or "").lower()
            if header == "mcp-session-id":
                self.add(node, "session-id-read", "reads the Mcp-Session-Id header")
            elif header == "last-event-id":
                self.add(node, "event-replay", "reads Last-Event-ID to replay a broken stream")
        # `all` and `use` route every method to the handler, GET included.
        self._route(node, leaf, args)
        if self.stdio and func.type == "member_expression":
            obj = _text(recv)
            if (obj == "console" and leaf in STDOUT_CONSOLE) or (obj == "process.stdout" and leaf == "write"):
                self.add(node, "stdout-write", f"`{_text(func)}` writes to stdout, the stdio protocol channel")

    def _from_arguments(self) -> set[str]:
        """What the enclosing functions name from their callers' arguments (each function computed once)."""
        out: set[str] = set()
        for f in self.frames:
            if f.fn is not None:
                key = _key(f.fn)
                if key not in self._args_cache:
                    self._args_cache[key] = _from_arguments(f.fn)
                out |= self._args_cache[key]
        return out

    def _fs_call(self, func: Node) -> str:
        """The file-module function a callee denotes through the imports (`fs.writeFileSync`, `fs.promises.
        writeFile`, `writeFile` of `import { writeFile } from "node:fs/promises"`), else ''."""
        if func.type == "identifier":
            return self.src.fs_imports.get(_text(func), "")
        if func.type != "member_expression":
            return ""
        obj = func.child_by_field_name("object")
        if obj is not None and obj.type == "member_expression" and _leaf(obj) == "promises":
            obj = obj.child_by_field_name("object")
        if obj is None or obj.type != "identifier":
            return ""
        # `import { promises as fs } from "fs"`: the local is the promises namespace
        namespace = _text(obj) in self.src.fs_namespaces or self.src.fs_imports.get(_text(obj)) == "promises"
        return _leaf(func) if namespace else ""

    def _file_write(self, node: Node, func: Node, path: Node | None) -> None:
        """A file written, from what a request runs, at a path the call's arguments do not name: the server's own
        state on this instance's disk (a path from the arguments is the user's file, which the tool is for)."""
        name = self._fs_call(func)
        if name not in FS_WRITES or path is None or not any(f.reached for f in self.frames):
            return
        if _identifiers(path) & self._from_arguments():
            return
        self.add(node, "local-file-state", f"`{_text(path)[:60]}` written (`{name}`) by what a request runs: each "
                                           "instance keeps its own file")

    def _route(self, node: Node, leaf: str, args: list[Node]) -> None:
        """GET or DELETE routed to the 2025 transport by an HTTP framework: Express's and Hono's `app.get`,
        `app.delete`, `app.all`, `app.use` (every method), Hono's `app.on(["GET", ...], path, handler)`."""
        methods: set[str] = {"GET", "DELETE"} if leaf in {"all", "use"} else {leaf.upper()} if leaf in {
            "get", "delete"} else set()
        if leaf == "on" and len(args) >= 2:
            listed = args[0].named_children if args[0].type == "array" else [args[0]]
            methods = {(_string_value(m) or "").upper() for m in listed} & {"GET", "DELETE"}
            args = args[1:]
        first = args[0] if args else None
        if not methods or first is None or _string_value(first) is None or not any(
                self._serves_mcp(a) for a in args[1:]):
            return
        path = _string_value(first)
        if leaf in {"all", "use"}:
            self.add(node, "get-stream", f"{leaf}() {path} routes every method to the transport: GET opens the "
                                         "standalone server-to-client stream, DELETE ends a session")
        elif methods == {"GET"}:
            self.add(node, "get-stream", f"GET {path}: the standalone server-to-client stream")
        elif methods == {"DELETE"}:
            self.add(node, "get-stream", f"DELETE {path}: a session's termination, routed to the transport")
        else:
            self.add(node, "get-stream", f"GET and DELETE {path}: the standalone server-to-client stream and a "
                                         "session's termination, routed to the transport")

    def _serves_mcp(self, handler: Node) -> bool:
        """A route handler (inline, or a function of the file by name) that hands the request to a transport."""
        if handler.type == "identifier":
            handler = self.pre.functions.get(_text(handler), handler)
        return handler.type in FUNCTIONS and _mentions_call(handler, frozenset({"handleRequest",
                                                                               "handlePostMessage"}))

    def _request_handler(self, node: Node, schema: Node, args: list[Node]) -> None:
        name = _canonical(self.src, schema) or _leaf(schema)
        handler = next((a for a in args[1:] if a.type in FUNCTIONS), None)
        stores = handler is not None and any(
            n.type in {"assignment_expression", "augmented_assignment_expression"} or (
                n.type == "call_expression" and _leaf(n.child_by_field_name("function")) in MUTATORS)
            for n in _walk(handler))
        if name == "SetLevelRequestSchema" and stores:
            self.add(node, "log-level-state", "`logging/setLevel` handler keeps a level for later requests")
        elif name in {"SubscribeRequestSchema", "UnsubscribeRequestSchema"} and stores:
            self.add(node, "resource-subscriptions", f"`{name}` handler keeps resource subscriptions")

    def _container_call(self, node: Node, leaf: str, recv: Node, args: list[Node]) -> None:
        owner = self._module_name(recv, self.pre.module_containers | self.pre.module_lets)
        keyed = bool(args) and self._session_key(args[0])
        if keyed and (owner or self._outer(recv)):
            self.add(node, "session-keyed-state", f"`{_text(recv)}` keyed by the session id")
        elif owner and leaf in MUTATORS:
            if any(self._answer(a) for a in args):
                self.add(node, "client-answer-kept", f"a client's answer kept in module-level `{owner}`")
            else:
                self.add(node, "module-state", f"module-level `{owner}` mutated by a function")
        elif leaf in MUTATORS and (shared := self._instance_state(recv)):
            self.add(node, "module-state", f"{shared} mutated")


def analyze_source(src: Source, *, stdio: bool) -> list[Finding]:
    """Findings of one parsed file, examined as part of an MCP server."""
    if src.root is None:
        return []
    return _Analyzer(src, src.root, stdio).run()

