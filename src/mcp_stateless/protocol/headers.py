"""Mcp-* header rules: the `=?base64?…?=` value encoding, `x-mcp-header` annotations, mirroring a body in headers."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from . import methods
from .errors import INVALID_REQUEST, McpError, header_mismatch
from .meta import META_PROTOCOL_VERSION

_SENTINEL_PREFIX = "=?base64?"
_SENTINEL_SUFFIX = "?="
# RFC 9110 tchar
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_B64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
_MAX_SAFE_INT = 2**53 - 1

# Methods whose target is mirrored in the Mcp-Name header, and where in params it lives: the method
# table's `name_param` (protocol/methods.py).
NAME_PARAM = methods.NAME_PARAM


def _is_safe_plain(value: str) -> bool:
    if value == "":
        return True
    if value[0] in " \t" or value[-1] in " \t":
        return False
    if value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX):
        return False
    return all(0x20 <= ord(c) <= 0x7E for c in value)


def encode_header_value(value: str | int | bool) -> str:
    """Client side: the header form of a string, integer or boolean value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if _is_safe_plain(value):
        return value
    return _SENTINEL_PREFIX + base64.b64encode(value.encode("utf-8")).decode("ascii") + _SENTINEL_SUFFIX


def decode_header_value(raw: str, header: str) -> str:
    """Server side: trim OWS, reject invalid characters, decode the base64 sentinel form."""
    value = raw.strip(" \t")
    for c in value:
        o = ord(c)
        if o < 0x20 or o > 0x7E:
            raise header_mismatch(f"{header} header contains invalid characters")
    if value.startswith(_SENTINEL_PREFIX) and value.endswith(_SENTINEL_SUFFIX) and len(value) >= 11:
        payload = value[len(_SENTINEL_PREFIX) : -len(_SENTINEL_SUFFIX)]
        if len(payload) % 4 or not _B64.match(payload):
            raise header_mismatch(f"{header} header has invalid base64 encoding")
        try:
            return base64.b64decode(payload, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise header_mismatch(f"{header} header has invalid base64 encoding") from None
    return value


# Header lines that may appear once (Host: RFC 9110 §7.2), or whose copies must agree (they route the
# request or decide whether it is allowed: a proxy and this server must not read different values).
_ONCE = frozenset({b"host", b"origin", b"mcp-method", b"mcp-name", b"mcp-protocol-version"})


def repeated_header(raw: Iterable[tuple[bytes, bytes]]) -> McpError | None:
    """The refusal for repeated header lines, or None: two Host lines are invalid (-32600), an Origin,
    `Mcp-Method`, `Mcp-Name`, `MCP-Protocol-Version` or `Mcp-Param-*` repeated with different values is
    a header mismatch (-32020); repeats with equal values are tolerated. `raw`: lower-case names (ASGI)."""
    seen: dict[bytes, bytes] = {}
    for name, value in raw:
        if name not in _ONCE and not name.startswith(b"mcp-param-"):
            continue
        first = seen.setdefault(name, value)
        if first is value:
            continue
        if name == b"host":
            return McpError(INVALID_REQUEST, "Host header appears more than once")
        if first.strip(b" \t") != value.strip(b" \t"):
            return header_mismatch(f"{name.decode('latin-1')} header appears twice with different values")
    return None


def _media_q(params: list[str]) -> float | None:
    for p in params:
        key, _, value = p.partition("=")
        if key.strip() == "q":
            try:
                q = float(value.strip())
            except ValueError:
                return None
            return q if 0.0 <= q <= 1.0 else None
    return 1.0


def accepted_media(accept: str) -> tuple[bool, bool]:
    """(JSON acceptable, SSE acceptable) for an Accept header value. The most specific media range that
    matches a type decides (`text/event-stream` over `text/*` over `*/*`), and `q=0` refuses it; a range
    with an invalid q-value is ignored."""
    a = accept.lower()
    if ";" not in a:  # perf: no parameters, so no q-values (the usual header): substring tests suffice
        wildcard = "*/*" in a
        return (wildcard or "application/json" in a or "application/*" in a,
                wildcard or "text/event-stream" in a or "text/*" in a)
    ranges: dict[str, float] = {}
    for part in a.split(","):
        media, *params = part.split(";")
        q = _media_q(params)
        media = media.strip()
        if q is not None and media:
            ranges[media] = max(q, ranges.get(media, 0.0))

    def ok(full: str, family: str) -> bool:
        for key in (full, family, "*/*"):
            q = ranges.get(key)
            if q is not None:
                return q > 0.0
        return False

    return ok("application/json", "application/*"), ok("text/event-stream", "text/*")


@dataclass(frozen=True, slots=True)
class ParamHeader:
    """One `x-mcp-header` annotation: the header `Mcp-Param-{name}` mirrors the argument at `path`."""

    name: str
    path: tuple[str, ...]
    type: str  # "string" | "integer" | "boolean"

    @property
    def header(self) -> str:
        return "mcp-param-" + self.name.lower()


def _walk(schema: Mapping[str, Any], path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Mapping[str, Any]]]:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return
    for key, sub in props.items():
        if isinstance(sub, Mapping):
            yield (*path, key), sub
            yield from _walk(sub, (*path, key))


def _annotations(node: Any) -> Iterator[Any]:
    """Every `x-mcp-header` value anywhere in a schema (used to find misplaced ones)."""
    if isinstance(node, Mapping):
        for k, v in node.items():
            if k == "x-mcp-header":
                yield v
            yield from _annotations(v)
    elif isinstance(node, list):
        for v in node:
            yield from _annotations(v)


def param_headers(input_schema: Mapping[str, Any]) -> tuple[ParamHeader, ...]:
    """The valid `x-mcp-header` annotations of a tool's input schema; raises ValueError when any is invalid."""
    found: list[ParamHeader] = []
    seen: set[str] = set()
    for path, sub in _walk(input_schema, ()):
        if "x-mcp-header" not in sub:
            continue
        name = sub["x-mcp-header"]
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise ValueError(f"x-mcp-header at {'.'.join(path)} must be a non-empty RFC 9110 token")
        typ = sub.get("type")
        if typ not in ("string", "integer", "boolean"):
            raise ValueError(f"x-mcp-header at {'.'.join(path)} must annotate a string, integer or boolean")
        if name.lower() in seen:
            raise ValueError(f"x-mcp-header {name!r} is used twice (names are case-insensitive)")
        seen.add(name.lower())
        found.append(ParamHeader(name, path, typ))
    if sum(1 for _ in _annotations(input_schema)) != len(found):
        raise ValueError("x-mcp-header may only annotate properties reachable through `properties`")
    return tuple(found)


_MISSING = object()


def _lookup(arguments: Any, path: tuple[str, ...]) -> Any:
    node = arguments
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return _MISSING
        node = node[key]
    return node


def check_param_headers(
    specs: tuple[ParamHeader, ...], arguments: Any, headers: Mapping[str, str]
) -> McpError | None:
    """Compare each annotated argument with its `Mcp-Param-*` header (after decoding)."""
    for spec in specs:
        value = _lookup(arguments, spec.path)
        raw = headers.get(spec.header)
        label = "Mcp-Param-" + spec.name
        if value is _MISSING or value is None:
            if raw is not None:
                return header_mismatch(f"{label} header is present but the argument is absent")
            continue
        if raw is None:
            return header_mismatch(f"{label} header is missing for argument {'.'.join(spec.path)}")
        try:
            decoded = decode_header_value(raw, label)
        except McpError as e:
            return e
        if not _matches(spec.type, value, decoded):
            return header_mismatch(f"{label} header does not match the argument {'.'.join(spec.path)}")
    return None


def _matches(typ: str, value: Any, decoded: str) -> bool:
    if isinstance(value, bool):
        return decoded == ("true" if value else "false")
    if isinstance(value, int):
        try:
            return int(decoded) == value
        except ValueError:
            return False
    if isinstance(value, float) and value.is_integer() and typ == "integer":
        try:
            return int(decoded) == int(value)
        except ValueError:
            return False
    if isinstance(value, str):
        return decoded == value
    return False


def value_at(arguments: Any, path: tuple[str, ...]) -> Any:
    """The argument at `path`, or None when it is absent (client side mirroring)."""
    v = _lookup(arguments, path)
    return None if v is _MISSING else v


def mirror_headers(
    method: str, params: Mapping[str, Any], specs: tuple[ParamHeader, ...] = ()
) -> dict[str, str]:
    """The HTTP headers that mirror a modern request's body: `MCP-Protocol-Version` (from `_meta`), `Mcp-Method`,
    `Mcp-Name` for the methods in `NAME_PARAM`, and for tools/call one `Mcp-Param-*` per annotated argument
    that is present (`specs`, from the tool's `x-mcp-header` annotations). A server checks exactly these."""
    out: dict[str, str] = {}
    meta = params.get("_meta")
    version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, Mapping) else None
    if isinstance(version, str):
        out["MCP-Protocol-Version"] = version
    out["Mcp-Method"] = method
    key = NAME_PARAM.get(method)
    name = params.get(key) if key is not None else None
    if not isinstance(name, str):
        return out
    out["Mcp-Name"] = encode_header_value(name)
    if method == "tools/call" and specs:
        arguments = params.get("arguments")
        for spec in specs:
            v = value_at(arguments, spec.path)
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if isinstance(v, str | int | bool):  # None (absent or null) and other types: no header
                out["Mcp-Param-" + spec.name] = encode_header_value(v)
    return out


__all__ = [
    "NAME_PARAM",
    "ParamHeader",
    "accepted_media",
    "check_param_headers",
    "decode_header_value",
    "encode_header_value",
    "mirror_headers",
    "param_headers",
    "repeated_header",
    "value_at",
]
