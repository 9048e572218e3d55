"""RFC 6570 URI templates, matched in reverse: which variables produce a given URI.

Supported expressions: `{var}` (simple, no `/`), `{+var}` (reserved, may span `/`), `{#var}`, `{/var}`,
`{.var}`, `{;var}` and `{?a,b}` / `{&a}` query forms, with comma lists in simple expressions.

Values are percent-decoded first and checked after, so that an encoded `%2e%2e%2f` cannot smuggle what
the template forbids: a decoded value never holds a `/` (except `{+var}` and `{#var}`), and no value is
or contains a dot segment (`.` or `..` between slashes): a handler may safely join it onto a path.
Query values (`{?a}`) are data, not path parts, and are kept as sent.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

_EXPR = re.compile(r"\{([+#./;?&]?)([A-Za-z0-9_.,%*:]+)\}")
_VARNAME = re.compile(r"^[A-Za-z0-9_.%]+$")


class UriTemplate:
    __slots__ = ("_query_vars", "_regex", "_spanning", "template", "variables")

    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query_vars: list[str] = []
        self._spanning: set[str] = set()  # variables whose values may hold "/" ({+var}, {#var})
        pattern = ["^"]
        pos = 0
        for m in _EXPR.finditer(template):
            pattern.append(re.escape(template[pos : m.start()]))
            pos = m.end()
            op, names_s = m.group(1), m.group(2)
            names = [n.split(":")[0].rstrip("*") for n in names_s.split(",")]
            for n in names:
                if not _VARNAME.match(n):
                    raise ValueError(f"invalid variable name {n!r} in template {template!r}")
            if op in ("?", "&"):
                self._query_vars.extend(names)
                self.variables.extend(names)
                pattern.append(r"(?:[?&][^#]*)?")
                continue
            value = {"+": r"[^?#]*", "#": r"[^?]*"}.get(op, r"[^/?#,]*")
            prefix = {"#": "#", "/": "/", ".": r"\.", ";": ";"}.get(op, "")
            groups = []
            if op in ("+", "#"):
                self._spanning.update(names)
            for i, n in enumerate(names):
                self.variables.append(n)
                sep = "," if i else ""
                if op == ";":
                    groups.append(f"{sep}(?:{re.escape(n)}=?(?P<{_g(n)}>{value}))")
                else:
                    groups.append(f"{sep}(?P<{_g(n)}>{value})")
            pattern.append(prefix + "".join(groups))
        pattern.append(re.escape(template[pos:]))
        pattern.append("$")
        self._regex = re.compile("".join(pattern))

    def match(self, uri: str) -> dict[str, str] | None:
        m = self._regex.match(uri)
        if m is None:
            return None
        out: dict[str, str] = {}
        for n in self.variables:
            if n in self._query_vars:
                continue
            value = unquote(m.group(_g(n)))
            if ("/" in value and n not in self._spanning) or _has_dot_segment(value):
                return None
            out[n] = value
        if self._query_vars and "?" in uri:
            query = uri.split("?", 1)[1].split("#", 1)[0]
            for k, v in parse_qsl(query, keep_blank_values=True):
                if k in self._query_vars:  # query values are data, not path parts: kept as sent
                    out[k] = v
        return out

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"


def _has_dot_segment(value: str) -> bool:
    return any(seg in (".", "..") for seg in value.split("/")) if "." in value else False


def _g(name: str) -> str:
    return "v_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
