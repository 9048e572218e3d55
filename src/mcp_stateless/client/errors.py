"""Everything the client raises besides `McpError` (a JSON-RPC error the server answered with)."""

from __future__ import annotations

from collections.abc import Mapping


class ClientError(Exception):
    """Something the client itself detected (a broken stream, a bad result, too many MRTR rounds)."""


class StreamBroken(ClientError):
    """The response stream ended before the response arrived: the request may or may not have run."""


class InvalidResult(ClientError):
    """The server answered with something the protocol does not allow (e.g. an unknown resultType)."""


class TooManyRounds(ClientError):
    """The server kept answering input_required beyond the client's round limit."""


class UnsupportedServer(ClientError):
    """No protocol version (modern or legacy) in common with the server."""


class TaskCancelled(Exception):
    """The task ended `cancelled`."""


class ChannelError(Exception):
    """The channel could not deliver the request or lost it (base class)."""


class HttpStatusError(ChannelError):
    """An HTTP response that carries no JSON-RPC message (e.g. 404 text, 405, 5xx)."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        snippet = body[:200].decode("utf-8", "replace")
        super().__init__(f"HTTP {status}" + (f": {snippet}" if snippet else ""))
        self.status = status
        self.body = body
        self.headers = dict(headers)


class AuthenticationError(HttpStatusError):
    """The server refused the credentials (HTTP 401) or their scope (HTTP 403). `www_authenticate` is the
    challenge it sent (e.g. ``Bearer resource_metadata="…"``), what an OAuth flow starts from."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        super().__init__(status, body, headers)
        self.www_authenticate: str | None = self.headers.get("www-authenticate")


class OAuthError(ClientError):
    """The authorization flow could not obtain a token: metadata refused (wrong resource or issuer, no PKCE),
    the authorization response refused (state, `iss`), the user or the token endpoint said no. `error` is the
    OAuth error code when the authorization server sent one."""

    def __init__(self, message: str, *, error: str | None = None) -> None:
        super().__init__(message)
        self.error = error


class ServerLost(ChannelError):
    """The stdio server exited (or the stream broke) while the request was in flight."""


__all__ = [
    "AuthenticationError",
    "ChannelError",
    "ClientError",
    "HttpStatusError",
    "InvalidResult",
    "OAuthError",
    "ServerLost",
    "StreamBroken",
    "TaskCancelled",
    "TooManyRounds",
    "UnsupportedServer",
]
