"""RFC 6570 URI templates, matched in reverse: which variables produce a given URI.

Supported expressions: `{var}` (simple, no `/`), `{+var}` (reserved, may span `/`), `{#var}`, `{/var}`,
`{.var}`, `{;var}` and `{?a,b}` / `{&a}` query forms, with comma lists in simple expressions.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote

_EXPR = re.compile(r"\{([+#./;?&]?)([A-Za-z0-9_.,%*:]+)\}")
_VARNAME = re.compile(r"^[A-Za-z0-9_.%]+$")


class UriTemplate:
    __slots__ = ("_query_vars", "_regex", "template", "variables")

    def __init__(self, template: str) -> None:
        self.template = template
        self.variables: list[str] = []
        self._query_vars: list[str] = []
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
        out = {n: unquote(m.group(_g(n))) for n in self.variables if n not in self._query_vars}
        if self._query_vars and "?" in uri:
            query = uri.split("?", 1)[1].split("#", 1)[0]
            for k, v in parse_qsl(query, keep_blank_values=True):
                if k in self._query_vars:
                    out[k] = v
        return out

    def __repr__(self) -> str:
        return f"UriTemplate({self.template!r})"


def _g(name: str) -> str:
    return "v_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
