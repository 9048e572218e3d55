"""The Python analyzer: hidden-state dependencies found in one source file's syntax tree (`ast`; never imported).

A file is examined only when it imports an MCP SDK (`mcp`, `fastmcp`) or is in a package that does (the engine
decides); names are resolved through the file's imports, so `from mcp.server.fastmcp import FastMCP as F` and
`import mcp.types as t` are recognised. Every finding points at the line whose code does the thing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from .finding import Finding, source_lines
from .kinds import TRANSPORT_GLUE

SERVER_REQUESTS = frozenset({"create_message", "elicit", "elicit_form", "elicit_url", "list_roots", "send_ping",
                             "sample"})
ALWAYS_UNSOLICITED = frozenset({"send_resource_updated", "send_tool_list_changed", "send_resource_list_changed",
                                "send_prompt_list_changed"})
REGISTRATIONS = frozenset({"add_tool", "remove_tool", "add_prompt", "remove_prompt", "add_resource",
                           "remove_resource"})
MUTATORS = frozenset({"append", "add", "update", "pop", "clear", "extend", "insert", "remove", "discard",
                      "setdefault", "popitem", "appendleft"})
MUTABLE_CALLS = frozenset({"dict", "list", "set", "defaultdict", "deque", "OrderedDict", "Counter"})
SECRET_CALLS = frozenset({"secrets.token_hex", "secrets.token_bytes", "secrets.token_urlsafe", "os.urandom",
                          "Fernet.generate_key", "uuid.uuid4", "uuid4", "cryptography.fernet.Fernet.generate_key"})
INIT_ATTRS = frozenset({"client_params", "clientInfo", "client_info", "protocolVersion"})
MCP_ROOTS = ("mcp", "fastmcp")


# `ast.walk(tree)` as a list per file tree: a tree is walked by a dozen passes (the engine's and the analyzer's).
# Bounded, and emptied by the engine after each inventory, so a long-lived process keeps no trees.
_WALKS: dict[int, tuple[ast.AST, list[ast.AST]]] = {}
_WALKS_MAX = 4096


def _nodes(tree: ast.AST) -> list[ast.AST]:
    got = _WALKS.get(id(tree))
    if got is None or got[0] is not tree:
        if len(_WALKS) >= _WALKS_MAX:
            _WALKS.clear()
        got = _WALKS[id(tree)] = (tree, list(ast.walk(tree)))
    return got[1]


def forget_walks() -> None:
    _WALKS.clear()


def imports_mcp(tree: ast.AST) -> bool:
    for node in _nodes(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] in MCP_ROOTS for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in MCP_ROOTS:
            return True
    return False


def imported_modules(tree: ast.AST) -> set[str]:
    """Every absolute module the file imports (`from a.b import c` gives `a.b` and `a.b.c`)."""
    out: set[str] = set()
    for node in _nodes(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def uses_stdio(tree: ast.AST) -> bool:
    """The file serves over stdio: `stdio_server`, or `.run()` with no transport or `transport="stdio"`."""
    for node in _nodes(tree):
        if isinstance(node, ast.Name | ast.Attribute) and _leaf(node) == "stdio_server":
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run":
            transport = next((k.value for k in node.keywords if k.arg == "transport"), None)
            positional = node.args[0] if node.args else None
            chosen = transport or positional
            if chosen is None and not node.args:
                return True
            if isinstance(chosen, ast.Constant) and chosen.value == "stdio":
                return True
    return False


def import_aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the absolute dotted name it is bound to by the file's imports (`from a import b as c` gives
    `c -> a.b`, `import a.b` gives `a -> a`, `import a.b as c` gives `c -> a.b`)."""
    out: dict[str, str] = {}
    for node in _nodes(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _qualified(node: ast.AST, aliases: dict[str, str]) -> str:
    """The absolute dotted name an expression denotes through the imports (`F` of `from m import X as F` gives
    `m.X`; `t.X` of `import m.types as t` gives `m.types.X`), or '' for a name no import binds."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, "")
    if isinstance(node, ast.Attribute):
        base = _qualified(node.value, aliases)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _is_true(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


# The FastMCP classes of the 2025 SDKs: their HTTP app is a StreamableHTTPSessionManager, stateful unless
# `stateless_http=True` (on the constructor, the settings, or run()).
FASTMCP_CLASSES = frozenset({"mcp.server.fastmcp.FastMCP", "mcp.server.fastmcp.server.FastMCP", "mcp.server.FastMCP",
                             "fastmcp.FastMCP", "fastmcp.server.FastMCP", "fastmcp.server.server.FastMCP"})
_HTTP_RUN = frozenset({"streamable-http", "streamable_http", "http"})
_HTTP_APPS = frozenset({"streamable_http_app", "http_app"})


def _stateful_fastmcp(tree: ast.Module, aliases: dict[str, str]) -> set[str]:
    """Module-level names bound to a FastMCP server constructed without `stateless_http=True` whose settings are
    not made stateless later (`mcp.settings.stateless_http = True`)."""
    made: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(stmt.value, ast.Call) and \
                _qualified(stmt.value.func, aliases) in FASTMCP_CLASSES and \
                not _is_true(_keyword(stmt.value, "stateless_http")):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            made.update(t.id for t in targets if isinstance(t, ast.Name))
    for node in _nodes(tree):
        if isinstance(node, ast.Assign) and _is_true(node.value):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and t.attr == "stateless_http":
                    made.discard(_dotted(t.value).split(".")[0])
    return made


# Decorators that register a request handler (FastMCP's and the low-level Server's): the roots of what a request runs.
HANDLER_DECORATORS = frozenset({"tool", "call_tool", "resource", "read_resource", "prompt", "get_prompt",
                                "list_tools", "list_resources", "list_prompts", "list_resource_templates",
                                "completion", "complete"})
_FUNCTION_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _module_instances(tree: ast.Module, classes: set[str]) -> dict[str, str]:
    """Module-level name -> class of the file it is bound to an instance of (`calc = Calc()`)."""
    out: dict[str, str] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(stmt.value, ast.Call) and \
                isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in classes:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            out.update((t.id, stmt.value.func.id) for t in targets if isinstance(t, ast.Name))
    return out


def reachable_from_handlers(tree: ast.Module) -> set[int]:
    """Ids of the functions a request handler of this file runs: the handlers themselves (decorated with a
    handler decorator, or passed to `add_tool(...)`/`tool()(...)`), and, transitively, the module functions they
    call by name, the methods they call on `self` or on a module-level instance of a class of the file."""
    functions = {n.name: n for n in tree.body if isinstance(n, _FUNCTION_DEFS)}
    methods: dict[str, dict[str, ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    owner: dict[int, str] = {}
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef):
            methods[cls.name] = {m.name: m for m in cls.body if isinstance(m, _FUNCTION_DEFS)}
            owner.update((id(m), cls.name) for m in methods[cls.name].values())
    instances = _module_instances(tree, set(methods))
    # an instance made in a function (`db = Database(path)` in main) that the handlers nested there call
    for node in _nodes(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and isinstance(
                node.value.func, ast.Name) and node.value.func.id in methods:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    instances.setdefault(t.id, node.value.func.id)
    queue: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for node in _nodes(tree):
        if isinstance(node, _FUNCTION_DEFS) and any(
                _leaf(d.func if isinstance(d, ast.Call) else d) in HANDLER_DECORATORS for d in node.decorator_list):
            queue.append(node)
        elif isinstance(node, ast.Call) and (_leaf(node.func) == "add_tool" or (
                isinstance(node.func, ast.Call) and _leaf(node.func.func) in HANDLER_DECORATORS)):
            queue += [functions[a.id] for a in node.args if isinstance(a, ast.Name) and a.id in functions]
    seen: set[int] = set()
    while queue:
        fn = queue.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        own_class = owner.get(id(fn))
        for call in ast.walk(fn):
            if not isinstance(call, ast.Call):
                continue
            f = call.func
            if isinstance(f, ast.Name) and f.id in functions:
                queue.append(functions[f.id])
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                of = own_class if f.value.id in {"self", "cls"} else instances.get(f.value.id, f.value.id)
                if of is not None and f.attr in methods.get(of, {}):
                    queue.append(methods[of][f.attr])
    return seen


def _from_arguments(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """A function's parameters and the local names assigned from them (followed through later assignments):
    what a call names from its caller's arguments."""
    a = fn.args
    tainted = {p.arg for p in a.args + a.kwonlyargs + a.posonlyargs} - {"self", "cls"}
    tainted |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    assignments = [n for n in ast.walk(fn) if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.For
                                                         | ast.withitem | ast.NamedExpr)]
    for _ in range(3):  # a short chain of locals; deeper chains are not real server code
        for n in assignments:
            if isinstance(n, ast.For):
                value, targets = n.iter, [n.target]
            elif isinstance(n, ast.withitem):
                value, targets = n.context_expr, [n.optional_vars] if n.optional_vars is not None else []
            elif isinstance(n, ast.Assign):
                value, targets = n.value, n.targets
            else:
                if n.value is None:
                    continue
                value, targets = n.value, [n.target]
            if _names(value) & tainted:
                tainted |= {t.id for tgt in targets for t in ast.walk(tgt) if isinstance(t, ast.Name)}
    return tainted


_WRITE_MODE = frozenset("wax+")
_OPENERS = frozenset({"io.open", "aiofiles.open", "codecs.open", "anyio.open_file"})


def _written_path(call: ast.Call, aliases: dict[str, str]) -> tuple[str, ast.expr] | None:
    """(what, the path expression) of a call that writes a file: `open(p, "w")` (the builtin, `io`, `aiofiles`,
    `codecs`, `anyio.open_file`), `p.open("a")`, `p.write_text(...)`, `p.write_bytes(...)`; else None."""
    func = call.func
    qualified = _qualified(func, aliases)
    builtin_open = isinstance(func, ast.Name) and func.id == "open" and "open" not in aliases
    if builtin_open or qualified in _OPENERS or (
            isinstance(func, ast.Attribute) and func.attr == "open" and not _qualified(func.value, aliases)):
        method = isinstance(func, ast.Attribute) and not qualified
        path = func.value if method and isinstance(func, ast.Attribute) else (
            call.args[0] if call.args else _keyword(call, "file"))
        mode = _keyword(call, "mode") or (call.args[0] if method and call.args else
                                          call.args[1] if not method and len(call.args) > 1 else None)
        if path is not None and isinstance(mode, ast.Constant) and isinstance(mode.value, str) and \
                set(mode.value) & _WRITE_MODE:
            return f"open(..., {mode.value!r})", path
        return None
    if isinstance(func, ast.Attribute) and func.attr in {"write_text", "write_bytes"} and \
            not _qualified(func.value, aliases):
        return f".{func.attr}()", func.value
    if qualified in {"sqlite3.connect", "aiosqlite.connect"} and call.args and not (
            isinstance(call.args[0], ast.Constant) and call.args[0].value == ":memory:"):
        return f"{qualified}(), a database file", call.args[0]
    return None


_SDK_TRANSPORTS = (".StreamableHTTPSessionManager", ".StreamableHTTPServerTransport")


def _transport_names(tree: ast.Module, aliases: dict[str, str]) -> set[str]:
    """Names (plain or the attribute of `self.x = ...`) bound to the mcp SDK's Streamable HTTP session manager or
    transport, and FastMCP's `session_manager` attribute."""
    out = {"session_manager"}
    for node in _nodes(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(node.value, ast.Call):
            qualified = _qualified(node.value.func, aliases)
            if qualified.startswith("mcp.") and qualified.endswith(_SDK_TRANSPORTS):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out.update(_leaf(t) for t in targets if isinstance(t, ast.Name | ast.Attribute))
    return out


# Transport glue (see glue.py): the SDK's 2025 transports, and the maps that keep them by session id.
GLUE_CLASSES = (".SseServerTransport", ".StreamableHTTPServerTransport", ".StreamableHTTPSessionManager")
_GLUE_MODULES = frozenset({"mcp", "mcp.server", "mcp.server.sse", "mcp.server.streamable_http",
                           "mcp.server.streamable_http_manager"})  # an import through which they are named


@dataclass
class TransportWiring:
    values: dict[str, set[str]] = field(default_factory=dict)  # `transport`, `self.transport` -> its classes
    maps: dict[str, ast.AST] = field(default_factory=dict)  # `transports`, `self.transports` -> its declaration
    classes: set[str] = field(default_factory=set)  # the SDK transport classes the maps hold


def _glue_class(node: ast.AST | None, aliases: dict[str, str]) -> str:
    """The SDK transport class an expression names through the imports (`SseServerTransport`), or ''."""
    qualified = _qualified(node, aliases) if node is not None else ""
    return qualified.rsplit(".", 1)[1] if qualified.startswith("mcp.") and qualified.endswith(GLUE_CLASSES) else ""


def _annotated(annotation: ast.expr, aliases: dict[str, str]) -> tuple[set[str], bool]:
    """(the transport classes a type annotation names, whether it holds them in a container): `T`, `T | None` and
    `Optional[T]` are the value; `dict[str, T]` and the like a container of it."""
    if cls := _glue_class(annotation, aliases):
        return {cls}, False
    if isinstance(annotation, ast.BinOp):  # `T | None`
        parts = [_annotated(side, aliases) for side in (annotation.left, annotation.right)]
        return set().union(*(c for c, _ in parts)), any(container for _, container in parts)
    classes = {c for n in ast.walk(annotation) if (c := _glue_class(n, aliases))}
    plain = isinstance(annotation, ast.Subscript) and _leaf(annotation.value) == "Optional"
    return classes, bool(classes) and not plain


def transport_wiring(tree: ast.Module, aliases: dict[str, str]) -> TransportWiring | None:
    """The module's maps of SDK transports: a map a transport is stored in under a key (`transports[k] =
    transport`, the value made by the SDK's class or declared as one), or one declared to hold them
    (`transports: dict[str, StreamableHTTPServerTransport] = {}`). None when it keeps none."""
    if not any(v.endswith(GLUE_CLASSES) or v in _GLUE_MODULES for v in aliases.values()):
        return None
    found = TransportWiring()
    declarations: dict[str, ast.AST] = {}
    stores: list[tuple[ast.AST, ast.expr, ast.expr]] = []  # (statement, map expression, value stored)

    def declare(name: str, node: ast.AST, annotation: ast.expr | None, value: ast.expr | None) -> None:
        declarations.setdefault(name, node)
        classes, container = _annotated(annotation, aliases) if annotation is not None else (set(), False)
        if not classes and isinstance(value, ast.Call) and (made := _glue_class(value.func, aliases)):
            classes = {made}
        if classes and container:
            found.maps.setdefault(name, node)
            found.classes |= classes
        elif classes:
            found.values.setdefault(name, set()).update(classes)

    for cls in tree.body:  # a class attribute is read as `self.x`
        for stmt in cls.body if isinstance(cls, ast.ClassDef) else []:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                declare(f"self.{stmt.target.id}", stmt, stmt.annotation, stmt.value)
    for node in _nodes(tree):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript):
                    stores.append((node, t.value, node.value))
                elif name := _dotted(t):
                    declare(name, node, node.annotation if isinstance(node, ast.AnnAssign) else None, node.value)
        elif isinstance(node, ast.AnnAssign) and (name := _dotted(node.target)):
            declare(name, node, node.annotation, None)
        elif isinstance(node, ast.arg) and node.annotation is not None:
            declare(node.arg, node, node.annotation, None)
    for node, target, value in stores:
        made = _glue_class(value.func, aliases) if isinstance(value, ast.Call) else ""
        held = found.values.get(_dotted(value), set())
        if (made or held) and (name := _dotted(target)):
            found.maps.setdefault(name, declarations.get(name, node))
            found.classes |= {made} if made else held
    return found if found.maps else None


_ROUTES = frozenset({"starlette.routing.Route", "starlette.routing.Mount", "fastapi.routing.APIRoute"})
_ROUTE_DECORATORS = frozenset({"get", "delete", "api_route", "route", "add_route", "add_api_route"})


_SERVED = {("GET",): "the standalone server-to-client stream", ("DELETE",): "a session's termination",
           ("GET", "DELETE"): "the standalone server-to-client stream and a session's termination"}


def _listed_methods(call: ast.Call, default: set[str]) -> set[str]:
    methods = _keyword(call, "methods")
    if isinstance(methods, ast.List | ast.Tuple | ast.Set):
        return {str(m.value).upper() for m in methods.elts if isinstance(m, ast.Constant)}
    return default


def _leaf(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    return ""


def _names(node: ast.AST) -> set[str]:
    return {_leaf(n) for n in ast.walk(node) if isinstance(n, ast.Name | ast.Attribute)}


def _is_session_key(node: ast.AST) -> bool:
    """A key that identifies the session: `ctx.session`, `id(session)`, `*.session_id`, the Mcp-Session-Id header."""
    if isinstance(node, ast.Attribute) and node.attr in {"session", "session_id", "mcp_session_id"}:
        return True
    if isinstance(node, ast.Name) and node.id in {"session", "session_id"}:
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id" and node.args:
        return _is_session_key(node.args[0])
    return False


def stdout_writes(path: str, lines: list[str], tree: ast.Module) -> list[Finding]:
    """stdout writes of a parsed file (the engine keeps them only for a package served over stdio)."""
    out: list[Finding] = []
    elsewhere = _not_stdio_branches(tree)
    for node in _nodes(tree):
        if not isinstance(node, ast.Call) or id(node) in elsewhere:
            continue
        name = _dotted(node.func)
        what = ""
        if name == "print" and not any(k.arg == "file" for k in node.keywords):
            what = "print() to stdout"
        elif name == "sys.stdout.write":
            what = "sys.stdout.write()"
        elif name.endswith("StreamHandler") and any(_dotted(a) == "sys.stdout" for a in node.args):
            what = "logging handler on stdout"
        elif name == "logging.basicConfig" and any(
                k.arg == "stream" and _dotted(k.value) == "sys.stdout" for k in node.keywords):
            what = "logging.basicConfig(stream=sys.stdout)"
        if what:
            out.append(_finding(path, lines, node, "stdout-write", what))
    return out


_HTTP_TRANSPORTS = frozenset({"sse", "http", "streamable-http", "streamable_http"})


def _transport_test(test: ast.expr) -> tuple[str, bool] | None:
    """(transport name, equal?) for a test such as `transport == "sse"` or `"stdio" != args.transport`."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq | ast.NotEq)):
        return None
    for side in (test.left, test.comparators[0]):
        if isinstance(side, ast.Constant) and isinstance(side.value, str):
            return side.value, isinstance(test.ops[0], ast.Eq)
    return None


def _not_stdio_branches(tree: ast.Module) -> set[int]:
    """Ids of the nodes in branches taken only when the server does not serve stdio (a multi-transport main),
    where stdout is not the protocol channel."""
    ids: set[int] = set()
    for node in _nodes(tree):
        if not isinstance(node, ast.If) or (got := _transport_test(node.test)) is None:
            continue
        name, equal = got
        if name in _HTTP_TRANSPORTS:
            branch = node.body if equal else node.orelse
        elif name == "stdio":
            branch = node.orelse if equal else node.body
        else:
            continue
        ids |= {id(sub) for stmt in branch for sub in ast.walk(stmt)}
    return ids


def _finding(path: str, lines: list[str], node: ast.AST, kind: str, message: str, glue: bool = False) -> Finding:
    line = getattr(node, "lineno", 1)
    excerpt = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return Finding(path, line, getattr(node, "col_offset", 0) + 1, kind, message, excerpt, transport_glue=glue)


class _Visitor(ast.NodeVisitor):
    def __init__(self, path: str, lines: list[str], module_mutables: set[str],
                 class_mutables: dict[str, set[str]], aliases: dict[str, str] | None = None,
                 stateful_servers: set[str] | None = None, reachable: set[int] | None = None,
                 tree: ast.Module | None = None) -> None:
        self.path = path
        self._args_cache: dict[int, set[str]] = {}
        self._starting_cache: dict[int, bool] = {}
        self.transports = _transport_names(tree, aliases or {}) if tree is not None else set()
        # every function of the file by name (a nested endpoint is named in the function that defines it)
        self.module_functions = {n.name: n for n in _nodes(tree) if isinstance(n, _FUNCTION_DEFS)} if tree else {}
        # methods of the file's module-level classes, and the module-level instance of each (the last one bound)
        self.method_class: dict[int, str] = {}
        self.instances: dict[str, str] = {}
        if tree is not None:
            for cls in tree.body:
                if isinstance(cls, ast.ClassDef):
                    self.method_class.update((id(m), cls.name) for m in cls.body if isinstance(m, _FUNCTION_DEFS))
            self.instances = {c: n for n, c in _module_instances(tree, set(self.method_class.values())).items()}
        self.reachable = reachable or set()
        self.aliases = aliases or {}
        self.stateful_servers = stateful_servers or set()
        self.lines = lines
        self.module_mutables = module_mutables
        self.class_mutables = class_mutables
        self.classes: list[str] = []
        self.found: list[Finding] = []
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        self.globals: list[set[str]] = []
        self.answers: list[set[str]] = []  # per function: local names holding a client's answer
        self.handler_depth: list[bool] = []
        self.lifespans: set[str] = set()
        self.wiring = transport_wiring(tree, self.aliases) if tree is not None else None
        self.glue_maps: set[str] = set()  # the transport maps the findings marked as glue use
        # per function: its session id reads (indices into found) and whether it uses a transport map
        self.session_reads: list[list[int]] = []
        self.uses_transport_map: list[bool] = []

    def add(self, node: ast.AST, kind: str, message: str, glue: bool = False) -> None:
        self.found.append(_finding(self.path, self.lines, node, kind, message, glue))

    # -- transport glue (see glue.py) --------------------------------------------------------------------------
    def _transport_map(self, node: ast.expr) -> bool:
        """`node` is a map of the SDK's transports (and this function uses one: its session reads route to it)."""
        name = _dotted(node)
        if self.wiring is None or name not in self.wiring.maps:
            return False
        self.glue_maps.add(name)
        if self.uses_transport_map:
            self.uses_transport_map[-1] = True
        return True

    def _session_read(self, node: ast.AST, message: str, holder: ast.expr | None) -> None:
        """A session-id-read: glue when it reads an SDK transport's own id (`transport.mcp_session_id`); a read of
        the request's (`request.headers.get("mcp-session-id")`) is glue when its function uses a transport map."""
        if self.wiring is not None and holder is not None and _dotted(holder) in self.wiring.values:
            self.add(node, "session-id-read", message, glue=True)
            return
        if self.wiring is not None and self.session_reads:
            self.session_reads[-1].append(len(self.found))
        self.add(node, "session-id-read", message)

    def glue_anchor(self) -> None:
        """One finding at the declaration of the transport map(s), which the engine's fold makes the group."""
        wiring = self.wiring
        if wiring is None or not self.glue_maps:
            return
        maps = sorted(self.glue_maps, key=lambda m: (getattr(wiring.maps[m], "lineno", 0), m))
        names = ", ".join(f"`{m}`" for m in maps)
        classes = ", ".join(f"`{c}`" for c in sorted(wiring.classes))
        self.add(wiring.maps[maps[0]], TRANSPORT_GLUE,
                 f"{names} {'keeps' if len(maps) == 1 else 'keep'} the SDK's {classes} of each session by its id")

    # -- functions ---------------------------------------------------------------------------------------------
    def _serves_mcp(self, endpoint: ast.expr | ast.FunctionDef | ast.AsyncFunctionDef | None) -> bool:
        """An endpoint that hands the request to the SDK's transport: `manager.handle_request` itself, or a
        function (of the file, by name, or this one) that calls it."""
        def hands(n: ast.AST) -> bool:
            return isinstance(n, ast.Attribute) and n.attr == "handle_request" and _leaf(n.value) in self.transports
        if endpoint is None:
            return False
        if hands(endpoint):
            return True
        fn = self.module_functions.get(endpoint.id) if isinstance(endpoint, ast.Name) else endpoint
        return fn is not None and isinstance(fn, (*_FUNCTION_DEFS, ast.Lambda)) and any(
            hands(n) for n in ast.walk(fn))

    def _route_methods(self, node: ast.AST, how: str, path: str, methods: set[str]) -> None:
        if methods == {"*"}:
            self.add(node, "get-stream", f"{how} {path} routes every method to the transport: GET opens the "
                                         "standalone server-to-client stream, DELETE ends a session")
            return
        served = [m for m in ("GET", "DELETE") if m in methods]
        if served:
            self.add(node, "get-stream", f"{' and '.join(served)} {path} ({how}) routed to the transport: "
                                         + _SERVED[tuple(served)])

    def _route(self, node: ast.Call) -> None:
        """GET or DELETE routed to the transport by Starlette or FastAPI: `Route(path, endpoint, methods=[...])`
        (a function endpoint's default is GET), `Mount(path, app=...)` (every method), `app.add_route(...)`."""
        qualified = _qualified(node.func, self.aliases)
        leaf = _leaf(node.func)
        path = node.args[0] if node.args else _keyword(node, "path")
        if not (isinstance(path, ast.Constant) and isinstance(path.value, str)):
            return
        if qualified in _ROUTES or (isinstance(node.func, ast.Attribute) and leaf in {"add_route",
                                                                                       "add_api_route"}):
            mount = qualified.endswith(".Mount")
            endpoint = node.args[1] if len(node.args) > 1 else _keyword(node, "app" if mount else "endpoint")
            if self._serves_mcp(endpoint):
                self._route_methods(node, leaf, path.value, {"*"} if mount else _listed_methods(node, {"GET"}))

    def _route_decorator(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, dec: ast.expr) -> None:
        """`@app.get(path)`, `@app.delete(path)`, `@app.api_route(path, methods=[...])`, `@app.route(...)` on a
        function that hands the request to the transport."""
        if not (isinstance(dec, ast.Call) and isinstance(dec.func, ast.Attribute) and dec.func.attr in
                _ROUTE_DECORATORS and dec.args and isinstance(dec.args[0], ast.Constant) and
                isinstance(dec.args[0].value, str) and self._serves_mcp(fn)):
            return
        leaf = dec.func.attr
        methods = {leaf.upper()} if leaf in {"get", "delete"} else _listed_methods(dec, {"GET"})
        self._route_methods(dec, f"@{_dotted(dec.func)}", dec.args[0].value, methods)

    def _visit_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for dec in node.decorator_list:
            self._route_decorator(node, dec)
            target = dec.func if isinstance(dec, ast.Call) else dec
            leaf = _leaf(target)
            if leaf == "set_logging_level":
                self.add(dec, "log-level-state", "`logging/setLevel` handler keeps a level for later requests")
            elif leaf in {"subscribe_resource", "unsubscribe_resource"}:
                self.add(dec, "resource-subscriptions", f"`{leaf}` handler keeps resource subscriptions")
            elif leaf in {"tool", "prompt", "resource"} and self.handler_depth and self.handler_depth[-1]:
                self.add(dec, "per-connection-registration", f"`{leaf}` registered inside `{self.functions[-1].name}`")
        handler = bool(node.decorator_list) or any(a.arg in {"ctx", "context"} for a in node.args.args)
        self.functions.append(node)
        self.globals.append(set())
        self.answers.append(set())
        self.handler_depth.append(handler)
        self.session_reads.append([])
        self.uses_transport_map.append(False)
        self.generic_visit(node)
        self.functions.pop()
        self.globals.pop()
        self.answers.pop()
        self.handler_depth.pop()
        reads = self.session_reads.pop()
        if self.uses_transport_map.pop():
            for i in reads:
                self.found[i] = replace(self.found[i], transport_glue=True)

    visit_FunctionDef = _visit_function
    visit_AsyncFunctionDef = _visit_function

    def visit_Yield(self, node: ast.Yield) -> None:
        fn = self.functions[-1] if self.functions else None
        if fn is not None and "lifespan" in fn.name and node.value is not None and any(
                _is_empty_container(n) for n in ast.walk(node.value)):
            self.add(node, "lifespan-client-state", f"`{fn.name}` yields a container every client writes into")
        self.generic_visit(node)

    def visit_If(self, node: ast.If) -> None:
        if self.functions and _names(node.test) & {"clientInfo", "client_info"}:
            self.add(node, "connection-auth", "a decision taken from the client's self-reported info")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        if self.globals:
            self.globals[-1].update(node.names)

    # -- helpers -----------------------------------------------------------------------------------------------
    def _nonlocal_target(self, target: ast.AST) -> str:
        """The name of the module/process-wide object an assignment writes, or ''."""
        if not self.functions:
            return ""
        if isinstance(target, ast.Name) and target.id in self.globals[-1]:
            return target.id
        if isinstance(target, ast.Subscript | ast.Attribute):
            base = target.value
            while isinstance(base, ast.Subscript | ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in self.module_mutables and base.id not in _locals(
                    self.functions[-1]):
                return base.id
        return ""

    def _class_state(self, base: ast.expr) -> str:
        """`Cls.attr` or `self.attr` in a method of `Cls`, where `attr` is a mutable class attribute: '' if not."""
        if not self.functions or not isinstance(base, ast.Attribute):
            return ""
        owner = _dotted(base.value)
        if owner == "self" and self.classes:
            owner = self.classes[-1]
        if base.attr in self.class_mutables.get(owner, set()):
            return f"{owner}.{base.attr}"
        return ""

    def _instance_state(self, base: ast.expr) -> str:
        """`self.attr` of an object every caller shares, in what a request runs: a method (not `__init__`) of a
        class with a module-level instance (`calc = Calc()`), reached from a handler; or a handler nested in a
        method (`@self.server.call_tool()` in `__init__`), where `self` is the server object itself."""
        if not (isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) and base.value.id == "self"
                and self.functions):
            return ""
        method = next((f for f in reversed(self.functions) if id(f) in self.method_class), None)
        if method is None:
            return ""
        cls = self.method_class[id(method)]
        nested_handler = any(self.handler_depth[i] for i, f in enumerate(self.functions)
                             if f is not method and self.functions.index(method) < i)
        if nested_handler:
            return f"`self.{base.attr}` of the `{cls}` object serving every request, in a handler,"
        instance = self.instances.get(cls)
        if method is self.functions[-1] and method.name != "__init__" and id(method) in self.reachable and instance:
            return f"`{cls}.{base.attr}` of the one `{instance}` every caller shares, by `{method.name}` (a request " \
                   "runs it),"
        return ""

    def _from_arguments(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
        if id(fn) not in self._args_cache:
            self._args_cache[id(fn)] = _from_arguments(fn)
        return self._args_cache[id(fn)]

    def _starting(self) -> bool:
        """The write is in the function that starts the server (it runs uvicorn or the stdio transport itself):
        configuration done once per process before any request, the same on every instance, not cross-call
        state. A handler nested in that function is a function of its own, judged on its own."""
        fn = self.functions[-1] if self.functions else None
        if fn is None:
            return False
        if id(fn) not in self._starting_cache:
            self._starting_cache[id(fn)] = any(
                isinstance(node, ast.Call) and (_qualified(node.func, self.aliases).startswith(
                    ("uvicorn.", "hypercorn.")) or _leaf(node.func) == "stdio_server") for node in ast.walk(fn))
        return self._starting_cache[id(fn)]

    def _closure_state(self, base: ast.expr) -> bool:
        """`db.items` in a handler nested in the function that made `db`: process-lifetime state, no handle."""
        if not (self.handler_depth and self.handler_depth[-1]) or len(self.functions) < 2:
            return False
        root = base
        while isinstance(root, ast.Attribute | ast.Subscript):
            root = root.value
        if not isinstance(root, ast.Name) or root.id in _locals(self.functions[-1]):
            return False
        return any(root.id in _locals(outer) for outer in self.functions[:-1])

    def _answer_call(self, value: ast.AST) -> bool:
        for n in ast.walk(value):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in SERVER_REQUESTS:
                return True
        return False

    # -- statements --------------------------------------------------------------------------------------------
    def visit_Assign(self, node: ast.Assign) -> None:
        self._assignment(node, node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._assignment(node, [node.target], node.value)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._assignment(node, [node.target], node.value)
        self.generic_visit(node)

    def _handler_table(self, node: ast.stmt, target: ast.expr) -> None:
        """The low-level Server's handler table filled by hand: `app.request_handlers[types.X] = fn`."""
        if not (isinstance(target, ast.Subscript) and _leaf(target.value) == "request_handlers"):
            return
        request = _qualified(target.slice, self.aliases)
        if request in {"mcp.types.SubscribeRequest", "mcp.types.UnsubscribeRequest"}:
            self.add(node, "resource-subscriptions", f"a `{request.rsplit('.', 1)[1]}` handler keeps resource "
                                                     "subscriptions")
        elif request == "mcp.types.SetLevelRequest":
            self.add(node, "log-level-state", "a `logging/setLevel` handler keeps a level for later requests")

    def _assignment(self, node: ast.stmt, targets: list[ast.expr], value: ast.expr) -> None:
        for target in targets:
            self._handler_table(node, target)
        if not self.functions:
            call = value if isinstance(value, ast.Call) else None
            if call is not None and _dotted(call.func) in SECRET_CALLS:
                self.add(node, "process-secret", f"`{_dotted(call.func)}()` at import: a different key per process")
            return
        reads_answer = self._answer_call(value) or bool(_names(value) & self.answers[-1])
        for target in targets:
            if isinstance(target, ast.Name) and self._answer_call(value) and target.id not in self.globals[-1]:
                self.answers[-1].add(target.id)
            if isinstance(target, ast.Subscript) and _is_session_key(target.slice):
                self.add(node, "session-keyed-state", "state stored under the session as key",
                         self._transport_map(target.value))
                continue
            if isinstance(target, ast.Subscript) and (owned := self._class_state(target.value)):
                self.add(node, "module-state", f"class-level `{owned}` written by a function")
                continue
            field = target.value if isinstance(target, ast.Subscript) else target
            on_self = isinstance(field, ast.Attribute) and isinstance(field.value, ast.Name) and \
                field.value.id == "self"
            kept = on_self and (isinstance(node, ast.AugAssign) or isinstance(target, ast.Subscript) or (
                bool(self.functions) and bool(_names(value) & self._from_arguments(self.functions[-1]))))
            if kept and (shared := self._instance_state(field)):
                self.add(node, "module-state", f"{shared} written")
                continue
            written = self._nonlocal_target(target)
            is_self = isinstance(target, ast.Attribute) and _dotted(target.value) == "self"
            if (written or is_self) and _names(value) & INIT_ATTRS:
                self.add(node, "initialize-state", "client info/capabilities from initialize kept")
            elif written and reads_answer:
                self.add(node, "client-answer-kept", f"a client's answer stored in `{written}`")
            elif written and not self._starting():
                self.add(node, "module-state", f"module-level `{written}` written by a function")

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            if isinstance(target, ast.Subscript) and _is_session_key(target.slice):
                self.add(node, "session-keyed-state", "state removed under the session as key",
                         self._transport_map(target.value))
            elif self._nonlocal_target(target):
                self.add(node, "module-state", f"module-level `{self._nonlocal_target(target)}` written")
        self.generic_visit(node)

    # -- calls -------------------------------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = _dotted(func)
        leaf = _leaf(func)
        if isinstance(func, ast.Attribute):
            if (leaf in SERVER_REQUESTS and leaf != "sample") or (leaf == "sample" and "ctx" in name):
                self.add(node, "server-request", f"`{leaf}` asks the client while handling a call")
            elif leaf in ALWAYS_UNSOLICITED:
                self.add(node, "unsolicited-notification", f"`{leaf}` notifies outside the client's request")
            elif leaf == "send_log_message" and not (self.handler_depth and self.handler_depth[-1]):
                self.add(node, "unsolicited-notification", "`send_log_message` outside a request handler")
            elif leaf in REGISTRATIONS and self.handler_depth and self.handler_depth[-1]:
                self.add(node, "per-connection-registration", f"`{leaf}` at run time")
            elif leaf in MUTATORS and self.functions:
                base = func.value
                if isinstance(base, ast.Name) and base.id in self.module_mutables and base.id not in _locals(
                        self.functions[-1]):
                    if node.args and _is_session_key(node.args[0]):
                        self.add(node, "session-keyed-state", f"`{base.id}` keyed by the session",
                                 self._transport_map(base))
                    elif node.args and (_names(node.args[0]) & self.answers[-1] or self._answer_call(node.args[0])):
                        self.add(node, "client-answer-kept", f"a client's answer kept in `{base.id}`")
                    elif not self._starting():
                        self.add(node, "module-state", f"module-level `{base.id}` mutated by a function")
                elif owned := self._class_state(base):
                    self.add(node, "module-state", f"class-level `{owned}`, one object for every instance, mutated "
                                                   "by a function")
                elif self._closure_state(base):
                    self.add(node, "module-state", f"`{_dotted(base)}`, shared by every call, mutated by a handler")
                elif shared := self._instance_state(base):
                    self.add(node, "module-state", f"{shared} mutated")
            elif leaf == "get" and node.args and isinstance(node.args[0], ast.Constant) and isinstance(
                    node.args[0].value, str) and node.args[0].value.lower() == "mcp-session-id":
                self._session_read(node, "reads the Mcp-Session-Id header", None)
        self._stateful_http(node, func)
        self._file_write(node)
        self._route(node)
        if leaf in {"SseServerTransport", "sse_app"}:
            self.add(node, "get-stream", f"`{leaf}`: the HTTP+SSE transport")
        if leaf.endswith("EventStore"):
            self.add(node, "event-replay", f"`{leaf}`: events kept for Last-Event-ID replay")
        for k in node.keywords:
            if k.arg == "transport" and isinstance(k.value, ast.Constant) and k.value.value == "sse":
                self.add(node, "get-stream", "transport=\"sse\": the HTTP+SSE transport")
            if k.arg == "event_store" and not (isinstance(k.value, ast.Constant) and k.value.value is None):
                self.add(node, "event-replay", "an event store replays broken streams")
        self.generic_visit(node)

    def _file_write(self, node: ast.Call) -> None:
        """A file written, from what a request runs, at a path the call's arguments do not name: the server's own
        state on this instance's disk (a path from the arguments is the user's file, which the tool is for)."""
        runs = [f for f in self.functions if id(f) in self.reachable]
        if not runs or (got := _written_path(node, self.aliases)) is None:
            return
        what, path = got
        from_args = set().union(*(self._from_arguments(f) for f in self.functions))
        if _names(path) & from_args:
            return
        self.add(node, "local-file-state", f"`{ast.unparse(path)[:60]}` written ({what}) by `{runs[-1].name}`, "
                                           "which a request runs: each instance keeps its own file")

    def _stateful_http(self, node: ast.Call, func: ast.expr) -> None:
        """A 2025 session manager in its default stateful mode: each instance keeps its own sessions, issues an
        Mcp-Session-Id, requires it on every later request and serves the standalone GET stream."""
        qualified = _qualified(func, self.aliases)
        if qualified.startswith("mcp.") and qualified.endswith(".StreamableHTTPSessionManager"):
            stateless = _keyword(node, "stateless")
            if stateless is None or (isinstance(stateless, ast.Constant) and stateless.value is False):
                self.add(node, "session-id-read", "`StreamableHTTPSessionManager` without `stateless=True`: each "
                                                  "instance keeps its sessions and requires their Mcp-Session-Id")
            elif not isinstance(stateless, ast.Constant):
                configured = ast.unparse(stateless)[:40]
                self.add(node, "session-id-read", f"`StreamableHTTPSessionManager(stateless={configured})`: stateful "
                                                  "(per-instance sessions, Mcp-Session-Id required) unless the "
                                                  "configuration says otherwise")
            return
        if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id in self.stateful_servers) or _is_true(_keyword(node, "stateless_http")):
            return
        transport = _keyword(node, "transport") or (node.args[0] if node.args else None)
        serves_http = func.attr in _HTTP_APPS or (func.attr == "run" and isinstance(transport, ast.Constant)
                                                   and transport.value in _HTTP_RUN)
        if serves_http:
            self.add(node, "session-id-read", f"`{func.value.id}.{func.attr}` serves Streamable HTTP in FastMCP's "
                                              "default stateful mode (no `stateless_http=True`): each instance "
                                              "keeps its sessions and requires their Mcp-Session-Id")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in {"session_id", "mcp_session_id"} and isinstance(node.ctx, ast.Load):
            self._session_read(node, f"reads `{_dotted(node)}`", node.value)
        if node.attr == "last_event_id":
            self.add(node, "event-replay", "reads Last-Event-ID")
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str) and \
                node.slice.value.lower() == "mcp-session-id":
            self._session_read(node, "reads the Mcp-Session-Id header", None)
        if isinstance(node.ctx, ast.Load) and _is_session_key(node.slice) and self.functions:
            self.add(node, "session-keyed-state", "state looked up by the session", self._transport_map(node.value))
            self.visit(node.value)
            return
        self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if any(_leaf(b).endswith("EventStore") for b in node.bases):
            self.add(node, "event-replay", f"`{node.name}` stores events for Last-Event-ID replay")
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()


def _is_empty_container(node: ast.AST) -> bool:
    if isinstance(node, ast.Dict):
        return not node.keys
    if isinstance(node, ast.List | ast.Set):
        return not node.elts
    return isinstance(node, ast.Call) and _leaf(node.func) in MUTABLE_CALLS and not node.args


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function binds itself (parameters and plain assignments not declared global)."""
    declared = {n for g in ast.walk(fn) if isinstance(g, ast.Global) for n in g.names}
    out = {a.arg for a in fn.args.args + fn.args.kwonlyargs + fn.args.posonlyargs}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
    return out - declared


def _is_mutable_value(value: ast.expr) -> bool:
    return isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp) or (
        isinstance(value, ast.Call) and _leaf(value.func) in MUTABLE_CALLS)


def _class_mutables(tree: ast.Module) -> dict[str, set[str]]:
    """Per module-level class: its mutable class attributes (one object shared by every instance), except those
    the class rebinds per instance (`self.x = ...` in a method)."""
    out: dict[str, set[str]] = {}
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        attrs: set[str] = set()
        for stmt in cls.body:
            if isinstance(stmt, ast.Assign) and _is_mutable_value(stmt.value):
                attrs.update(t.id for t in stmt.targets if isinstance(t, ast.Name))
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and _is_mutable_value(stmt.value) \
                    and isinstance(stmt.target, ast.Name):
                attrs.add(stmt.target.id)
        rebound = {t.attr for n in ast.walk(cls) if isinstance(n, ast.Assign) for t in n.targets
                   if isinstance(t, ast.Attribute) and _dotted(t.value) == "self"}
        if attrs - rebound:
            out[cls.name] = attrs - rebound
    return out


def _module_mutables(tree: ast.Module) -> set[str]:
    out: set[str] = set()
    for stmt in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        if value is None:
            continue
        if _is_mutable_value(value):
            out.update(t.id for t in targets if isinstance(t, ast.Name))
    return out


def analyze_tree(path: str, text: str, tree: ast.Module) -> list[Finding]:
    """Findings of one parsed Python file (the engine parses each file once and hands the tree here)."""
    if not imports_mcp(tree):
        return []
    lines = source_lines(text)
    try:
        aliases = import_aliases(tree)
        visitor = _Visitor(path, lines, _module_mutables(tree), _class_mutables(tree), aliases,
                           _stateful_fastmcp(tree, aliases), reachable_from_handlers(tree), tree)
        visitor.visit(tree)
        visitor.glue_anchor()
        found = visitor.found
        if uses_stdio(tree):
            found += stdout_writes(path, lines, tree)
    except RecursionError:
        return []
    return found


def analyze(path: str, text: str) -> list[Finding]:
    """Findings of one Python file; a file that does not parse, or uses no MCP SDK, yields none."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return []
    return analyze_tree(path, text, tree)
