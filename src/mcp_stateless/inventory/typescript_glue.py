"""Which code of a TypeScript/JavaScript file is its wiring of the SDK's 2025 transports (see `glue`): the names
bound to an SDK transport, and the maps that keep such transports by session id.

Resolved through the file's imports: a value is a transport when it is made by `new` of the SDK's
`SSEServerTransport`, `StreamableHTTPServerTransport` or `WebStandardStreamableHTTPServerTransport`, or declared
with that type; a map is a transport map when such a value is stored in it (`m.set(k, transport)`,
`m[k] = transport`) or its declared type holds the class (`new Map<string, StreamableHTTPServerTransport>()`,
`Record<string, ...>`, `{ [id: string]: ... }`). A map that holds anything else, whatever its name, is the
application's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tree_sitter import Node

from .typescript_parse import Source, _args, _canonical, _leaf, _text, _walk

TRANSPORT_CLASSES = frozenset({"SSEServerTransport", "StreamableHTTPServerTransport",
                               "WebStandardStreamableHTTPServerTransport"})
_UNWRAP = frozenset({"await_expression", "parenthesized_expression", "as_expression", "non_null_expression",
                     "satisfies_expression"})
# a declared type that is the value itself (`T`, `T | undefined`), not a container of it
_PLAIN_TYPES = frozenset({"type_identifier", "nested_type_identifier", "union_type", "literal_type",
                          "predefined_type"})


@dataclass
class Wiring:
    values: dict[str, set[str]] = field(default_factory=dict)  # `transport`, `this.transport` -> its classes
    maps: dict[str, Node] = field(default_factory=dict)  # transport map (`transports`, `this.transports`) -> anchor
    classes: set[str] = field(default_factory=set)  # the SDK transport classes the maps hold


def _imports_transport(src: Source) -> bool:
    return bool(src.namespaces) or any(name in TRANSPORT_CLASSES for name in src.imports.values())


def _type_class(src: Source, node: Node) -> str:
    """The SDK transport class a type node names (`T` imported as the class, `sdk.SSEServerTransport`), or ''."""
    if node.type == "type_identifier":
        name = src.imports.get(_text(node), "")
        return name if name in TRANSPORT_CLASSES else ""
    if node.type == "nested_type_identifier":
        obj = node.named_children[0] if node.named_children else None
        leaf = _text(node.named_children[-1]) if node.named_children else ""
        return leaf if obj is not None and _text(obj) in src.namespaces and leaf in TRANSPORT_CLASSES else ""
    return ""


def _classes_in(src: Source, node: Node | None) -> set[str]:
    return {c for n in _walk(node) if (c := _type_class(src, n))} if node is not None else set()


def _construction(src: Source, node: Node | None) -> str:
    """The SDK transport class `node` constructs (`new StreamableHTTPServerTransport(...)`, awaited or cast), or ''."""
    while node is not None and node.type in _UNWRAP:
        node = node.named_children[0] if node.named_children else None
    if node is None or node.type != "new_expression":
        return ""
    name = _canonical(src, node.child_by_field_name("constructor"))
    return name if name in TRANSPORT_CLASSES else ""


def _declared(src: Source, node: Node) -> tuple[str, set[str], bool]:
    """(the name a declaration binds, the transport classes its type or value names, whether it holds them in a
    container) of a variable declarator, class field or typed parameter; ('', ...) for anything else."""
    if node.type == "variable_declarator":
        name_node = node.child_by_field_name("name")
        name = _text(name_node) if name_node is not None and name_node.type == "identifier" else ""
    elif node.type == "public_field_definition":
        name = f"this.{_text(node.child_by_field_name('name'))}"
    elif node.type in {"required_parameter", "optional_parameter"}:
        pattern = node.child_by_field_name("pattern")
        name = _text(pattern) if pattern is not None and pattern.type == "identifier" else ""
    else:
        return "", set(), False
    annotation = node.child_by_field_name("type")
    declared = annotation.named_children[0] if annotation is not None and annotation.named_children else None
    if declared is not None and (classes := _classes_in(src, declared)):
        return name, classes, declared.type not in _PLAIN_TYPES
    value = node.child_by_field_name("value")
    if made := _construction(src, value):
        return name, {made}, False
    if value is not None and value.type == "new_expression" and _leaf(value.child_by_field_name("constructor")) in {
            "Map", "WeakMap"} and (classes := _classes_in(src, value.child_by_field_name("type_arguments"))):
        return name, classes, True
    return name, set(), False


def wiring(src: Source, root: Node) -> Wiring | None:
    """The file's transport wiring, or None when it keeps no SDK transport in a map."""
    if not _imports_transport(src):
        return None
    found = Wiring()
    declarations: dict[str, Node] = {}
    stores: list[tuple[Node, Node, Node]] = []  # (node, map expression, stored value)
    for node in _walk(root):
        t = node.type
        if t in {"variable_declarator", "public_field_definition", "required_parameter", "optional_parameter"}:
            name, classes, container = _declared(src, node)
            if not name:
                continue
            declarations.setdefault(name, node)
            if classes and container:
                found.maps.setdefault(name, node)
                found.classes |= classes
            elif classes:
                found.values.setdefault(name, set()).update(classes)
        elif t == "assignment_expression":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is None or right is None:
                continue
            if left.type in {"identifier", "member_expression"} and (made := _construction(src, right)):
                found.values.setdefault(_text(left), set()).add(made)
            elif left.type == "subscript_expression" and (target := left.child_by_field_name("object")) is not None:
                stores.append((node, target, right))
        elif t == "call_expression":
            func = node.child_by_field_name("function")
            args = _args(node)
            if func is not None and func.type == "member_expression" and _leaf(func) == "set" and len(args) == 2 and (
                    target := func.child_by_field_name("object")) is not None:
                stores.append((node, target, args[1]))
    for node, target, value in stores:
        made = _construction(src, value)
        if made or _text(value) in found.values:
            name = _text(target)
            found.maps.setdefault(name, declarations.get(name, node))
            found.classes |= {made} if made else found.values[_text(value)]
    return found if found.maps else None


def constructs_transport(src: Source, node: Node | None) -> bool:
    """`node` is `new` of an SDK transport (the options object of which a `sessionIdGenerator` is part)."""
    return bool(_construction(src, node))
