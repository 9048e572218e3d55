"""OAuth wire rules both roles read: `WWW-Authenticate` challenges (RFC 6750 / RFC 7235), the well-known
metadata URLs (RFC 9728 for a protected resource, RFC 8414 and OpenID Connect Discovery for an
authorization server) and whether a protected resource's identifier covers a server URL.

Pure functions over strings: the resource server builds what the client parses with the same rules.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
OAUTH_WELL_KNOWN = "/.well-known/oauth-authorization-server"
OIDC_WELL_KNOWN = "/.well-known/openid-configuration"

# RFC 7235 §2.1: challenges are a scheme then a token68 or comma-separated auth-params; a parameter value
# is a token or a quoted-string. Items are separated by commas, so a new scheme can follow any comma.
_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_PARAM = re.compile(rf'({_TOKEN})[ \t]*=[ \t]*("(?:[^"\\]|\\.)*"|{_TOKEN})')
_SCHEME = re.compile(rf"({_TOKEN})(?=[ \t,]|$)")
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]+=*(?=[ \t,]|$)")
_SEPARATORS = ", \t"


@dataclass(frozen=True, slots=True)
class AuthChallenge:
    """One challenge of a `WWW-Authenticate` header: its scheme (lower case) and its parameters
    (names lower case, values unquoted)."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> str | None:
        return self.params.get(name)

    @property
    def scopes(self) -> tuple[str, ...]:
        return tuple((self.params.get("scope") or "").split())


def parse_www_authenticate(header: str | None) -> list[AuthChallenge]:
    """Every challenge in a `WWW-Authenticate` value, in order. Malformed input ends the parse at the
    first unreadable part rather than raising: a client still sees whatever came before it."""
    out: list[AuthChallenge] = []
    text = header or ""
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in _SEPARATORS:
            pos += 1
        if pos >= end:
            break
        if (m := _PARAM.match(text, pos)) is not None:
            if not out:
                break  # a parameter before any scheme
            value = m.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            out[-1].params.setdefault(m.group(1).lower(), value)
            pos = m.end()
        elif (m := _SCHEME.match(text, pos)) is not None:
            out.append(AuthChallenge(m.group(1).lower(), {}))
            pos = m.end()
            while pos < end and text[pos] in " \t":
                pos += 1
            if _PARAM.match(text, pos) is None and (t := _TOKEN68.match(text, pos)) is not None:
                pos = t.end()  # a token68 credential hint carries no parameter a client reads
        else:
            break
    return out


def bearer_challenge(header: str | None) -> AuthChallenge | None:
    """The `Bearer` challenge of a `WWW-Authenticate` value, if it has one."""
    for challenge in parse_www_authenticate(header):
        if challenge.scheme == "bearer":
            return challenge
    return None


def _split(url: str) -> tuple[str, str]:
    """`scheme://authority` and the path without a trailing slash."""
    u = urlsplit(url)
    return f"{u.scheme}://{u.netloc}", u.path.rstrip("/")


def protected_resource_metadata_urls(server_url: str) -> list[str]:
    """Where a client looks for a server's Protected Resource Metadata when the 401 names none (RFC 9728
    §3.1): the path-suffixed form first (``https://h/mcp`` → ``https://h/.well-known/oauth-protected-resource/mcp``),
    then the root form."""
    origin, path = _split(server_url)
    urls = [f"{origin}{PRM_WELL_KNOWN}{path}"] if path else []
    urls.append(f"{origin}{PRM_WELL_KNOWN}")
    return urls


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """Where an authorization server's metadata is, in the order a client tries them: RFC 8414 inserts
    the well-known segment between host and path, OpenID Connect Discovery does too (as MCP asks) and
    then appends it to the issuer's path."""
    origin, path = _split(issuer)
    if not path:
        return [f"{origin}{OAUTH_WELL_KNOWN}", f"{origin}{OIDC_WELL_KNOWN}"]
    return [f"{origin}{OAUTH_WELL_KNOWN}{path}", f"{origin}{OIDC_WELL_KNOWN}{path}", f"{origin}{path}{OIDC_WELL_KNOWN}"]


def resource_covers(resource: str, server_url: str) -> bool:
    """Whether a protected resource identifier names this server: same scheme, host and port, and its
    path is the server's path or a parent of it, segment by segment (``https://h`` covers ``https://h/mcp``;
    ``https://h/m`` does not cover ``https://h/mcp``)."""
    r, s = urlsplit(resource), urlsplit(server_url)
    if r.fragment or (r.scheme.lower(), _netloc(r.scheme, r.netloc)) != (s.scheme.lower(), _netloc(s.scheme, s.netloc)):
        return False
    rpath = r.path.rstrip("/")
    spath = s.path.rstrip("/")
    return spath == rpath or spath.startswith(rpath + "/")


def _netloc(scheme: str, netloc: str) -> str:
    netloc = netloc.lower()
    default = {"https": ":443", "http": ":80"}.get(scheme.lower())
    return netloc[: -len(default)] if default and netloc.endswith(default) else netloc


def is_loopback_url(url: str) -> bool:
    """http(s) on localhost / 127.0.0.0/8 / [::1]: where plain http is acceptable (RFC 8252 §7.3)."""
    host = (urlsplit(url).hostname or "").lower()
    return host == "localhost" or host == "::1" or host.startswith("127.")


__all__ = [
    "OAUTH_WELL_KNOWN",
    "OIDC_WELL_KNOWN",
    "PRM_WELL_KNOWN",
    "AuthChallenge",
    "authorization_server_metadata_urls",
    "bearer_challenge",
    "is_loopback_url",
    "parse_www_authenticate",
    "protected_resource_metadata_urls",
    "resource_covers",
]
