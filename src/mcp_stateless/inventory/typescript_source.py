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

`typescript_parse` reads the files (grammars, node helpers, imports, the SDK names recognised), `typescript_reach`
finds the code a request runs, `typescript_glue` the file's maps of SDK transports (whose findings it marks as
transport glue, see `glue`); this module holds the visitor that reports, and the entry points.
"""

from __future__ import annotations

from dataclasses import replace

from tree_sitter import Node

from . import typescript_glue
from .finding import Finding
from .kinds import TRANSPORT_GLUE
from .typescript_parse import (
    _MAX_DEPTH,
    ALWAYS_UNSOLICITED,
    FS_WRITES,
    FUNCTIONS,
    HANDLE_METHODS,
    HANDLER_CALLS,
    LOOKUPS,
    MUTATORS,
    NOTIFY,
    OUTSIDE_CALLS,
    OUTSIDE_HOOKS,
    REGISTRATIONS,
    SECRET_CALLS,
    SERVER_METHODS,
    SERVER_NAMES,
    SERVER_REQUESTS,
    SESSION_NAMES,
    STDOUT_CONSOLE,
    Source,
    _args,
    _canonical,
    _closure,
    _identifiers,
    _leaf,
    _mentions_call,
    _string_value,
    _text,
    _value_names,
    _walk,
    _walk_value,
    parse,
    resolve,
)
from .typescript_reach import (
    _enclosing_class,
    _Frame,
    _from_arguments,
    _function_name,
    _is_server_request,
    _key,
    _object_method,
    _params,
    _prepass,
    _reach_from,
)


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


class _Analyzer:
    def __init__(self, src: Source, root: Node, stdio: bool) -> None:
        self.src = src
        self.root = root
        self._args_cache: dict[tuple[int, int], set[str]] = {}
        self.stdio = stdio
        self.pre = _prepass(src, root)
        self.wiring = typescript_glue.wiring(src, root)
        self.glue_maps: set[str] = set()  # the transport maps the findings marked as glue use
        self.frames: list[_Frame] = []
        self.cap_conditions = 0
        self.found: list[Finding] = []

    def run(self) -> list[Finding]:
        try:
            self.visit(self.root)
        except RecursionError:
            return []
        self._glue_anchor()
        return self.found

    # -- helpers -----------------------------------------------------------------------------------------------
    def add(self, node: Node, kind: str, message: str, glue: bool = False) -> None:
        row, col = node.start_point
        lines = self.src.lines
        excerpt = lines[row].strip() if 0 <= row < len(lines) else ""
        self.found.append(Finding(self.src.path, row + 1, col + 1, kind, message, excerpt[:300],
                                  transport_glue=glue))

    # -- transport glue (see glue.py) --------------------------------------------------------------------------
    def _transport_map(self, node: Node | None) -> bool:
        """`node` is a map of the SDK's transports (and this function uses one: its session reads route to it)."""
        if self.wiring is None or node is None or _text(node) not in self.wiring.maps:
            return False
        self.glue_maps.add(_text(node))
        if self.frames:
            self.frames[-1].uses_transport_map = True
        return True

    def _session_read(self, node: Node, message: str, holder: Node | None) -> None:
        """A session-id-read: glue when it reads an SDK transport's own id (`transport.sessionId`); a read of the
        request's session id (`req.headers["mcp-session-id"]`) is glue when its function looks up a transport map."""
        if self.wiring is not None and holder is not None and _text(holder) in self.wiring.values:
            self.add(node, "session-id-read", message, glue=True)
            return
        if self.wiring is not None and self.frames:
            self.frames[-1].session_reads.append(len(self.found))
        self.add(node, "session-id-read", message)

    def _glue_anchor(self) -> None:
        """One finding at the declaration of the transport map(s), which the engine's fold makes the group."""
        wiring = self.wiring
        if wiring is None or not self.glue_maps:
            return
        maps = sorted(self.glue_maps, key=lambda m: (wiring.maps[m].start_point, m))
        names = ", ".join(f"`{m}`" for m in maps)
        classes = ", ".join(f"`{c}`" for c in sorted(wiring.classes))
        self.add(wiring.maps[maps[0]], TRANSPORT_GLUE,
                 f"{names} {'keeps' if len(maps) == 1 else 'keep'} the SDK's {classes} of each session by its id")

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
        if frame.uses_transport_map:
            for i in frame.session_reads:
                self.found[i] = replace(self.found[i], transport_glue=True)

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
                    self._session_read(p, "destructures `sessionId`", value)

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
                self.add(node, "session-keyed-state", "state stored under the session id as key",
                         self._transport_map(left.child_by_field_name("object")))
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
            self._session_read(node, "reads the Mcp-Session-Id header", None)
        elif key == "last-event-id":
            self.add(node, "event-replay", "reads Last-Event-ID to replay a broken stream")
        parent = node.parent
        is_target = parent is not None and parent.type == "assignment_expression" and \
            parent.child_by_field_name("left") == node
        obj = node.child_by_field_name("object")
        if not is_target and self.frames and self._session_key(node.child_by_field_name("index")) and (
                self._module_name(obj, self.pre.module_lets | self.pre.module_containers) or self._outer(obj)):
            self.add(node, "session-keyed-state", "state looked up by the session id", self._transport_map(obj))

    def _on_member_expression(self, node: Node) -> None:
        if _leaf(node) not in {"sessionId", "mcpSessionId"}:
            return
        parent = node.parent
        if parent is not None and parent.type == "assignment_expression" and parent.child_by_field_name("left") == node:
            return
        if parent is not None and parent.type == "call_expression" and parent.child_by_field_name("function") == node:
            return
        self._session_read(node, f"reads `{_text(node)}`", node.child_by_field_name("object"))

    def _on_pair(self, node: Node) -> None:
        key = _leaf(node.child_by_field_name("key"))
        value = node.child_by_field_name("value")
        if key == "eventStore" and value is not None and _text(value) not in {"undefined", "null"}:
            self.add(node, "event-replay", "an event store replays broken streams (Last-Event-ID)")
        elif key == "sessionIdGenerator" and value is not None and _text(value) not in {"undefined", "null"}:
            # glue in a module that keeps its transports by session id: the option of an SDK transport made there
            made = node.parent.parent.parent if node.parent is not None and node.parent.parent is not None else None
            self.add(node, "session-id-read", "`sessionIdGenerator`: the transport issues an Mcp-Session-Id and "
                                              "requires it on every later request",
                     self.wiring is not None and typescript_glue.constructs_transport(self.src, made))

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
                self._session_read(node, "reads the Mcp-Session-Id header", None)
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
        glue = self._transport_map(recv)
        if keyed and (owner or self._outer(recv)):
            self.add(node, "session-keyed-state", f"`{_text(recv)}` keyed by the session id", glue)
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


__all__ = ["Source", "analyze", "analyze_package", "analyze_source", "parse"]
