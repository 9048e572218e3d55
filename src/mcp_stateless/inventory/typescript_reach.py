"""Which code a request runs, in one TypeScript/JavaScript file: the prepass (functions, frames, handlers,
module-level containers, the calls made from outside any request) and reachability from the registered handlers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from tree_sitter import Node

from .typescript_parse import (
    CONTAINERS,
    FUNCTIONS,
    HANDLER_CALLS,
    OUTSIDE_CALLS,
    REGISTRATIONS,
    SERVER_REQUESTS,
    Source,
    _args,
    _canonical,
    _identifiers,
    _leaf,
    _string_value,
    _text,
    _value_names,
    _walk,
    _walk_value,
)


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
    # transport glue: the session id reads of this function (indices into the analyzer's findings), folded into
    # the transport wiring when the function also looks up a map of SDK transports (it routes to the transport)
    session_reads: list[int] = field(default_factory=list)
    uses_transport_map: bool = False


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
