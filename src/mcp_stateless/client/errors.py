"""Everything the client raises: one root, `ClientError`, so `except ClientError` catches every failure of a
request (an error the server answered with, a lost channel, a timeout, a cancelled task).

Each class also keeps the broader meaning it had before the root existed: `ServerError` is an `McpError`
(what a handler raises on the server side) and `RequestTimeout` a `TimeoutError`, so code that catches
those still does. Bad arguments are a caller's bug and stay `ValueError`/`TypeError`."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from ..protocol import jsonrpc
from ..protocol.errors import McpError


class ClientError(Exception):
    """The root of everything the client raises for a request that did not succeed."""


class ServerError(ClientError, McpError):
    """The server answered with a JSON-RPC error: `code`, `message`, `data` as sent (an `McpError` too)."""

    @classmethod
    def from_wire(cls, err: Any) -> ServerError:
        """The `error` member of a response; a malformed one is an internal error (as `jsonrpc` reads it)."""
        e = jsonrpc.error_from_wire(err)
        return cls(e.code, e.message, e.data)


class RequestTimeout(ClientError, TimeoutError):
    """No answer within the request's timeout (the request may still run on the server)."""


class StreamBroken(ClientError):
    """The response stream ended before the response arrived: the request may or may not have run."""


class InvalidResult(ClientError):
    """The server answered with something the protocol does not allow (e.g. an unknown resultType)."""


class TooManyRounds(ClientError):
    """The server kept answering input_required beyond the client's round limit."""


class UnsupportedServer(ClientError):
    """No protocol version (modern or legacy) in common with the server."""


class TaskCancelled(ClientError):
    """The task ended `cancelled`."""


class ChannelError(ClientError):
    """The channel could not deliver the request or lost it (base class)."""


# A proxy's answer for a request it had already passed on: the server may have run it (RFC 9110 15.6.3, 15.6.5).
GATEWAY_LOST = frozenset({502, 504})


class HttpStatusError(ChannelError):
    """An HTTP response that carries no JSON-RPC message (e.g. 404 text, 405, 5xx). `lost` names the request a
    gateway's 502 or 504 answered: a balancer whose instance died (or hung) after the request reached it, so
    its outcome is unknown and it is not re-issued, which the message says instead of quoting the proxy's page."""

    def __init__(self, status: int, body: bytes, headers: Mapping[str, str], *, lost: str | None = None) -> None:
        if lost is not None:
            message = (f"HTTP {status} {_phrase(status)}: a proxy in front of the server lost its answer to {lost}; "
                       "the request may or may not have run and was not re-issued")
        else:
            snippet = body[:200].decode("utf-8", "replace")
            message = f"HTTP {status}" + (f": {snippet}" if snippet else "")
        super().__init__(message)
        self.status = status
        self.body = body
        self.headers = dict(headers)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


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
    "RequestTimeout",
    "ServerError",
    "ServerLost",
    "StreamBroken",
    "TaskCancelled",
    "TooManyRounds",
    "UnsupportedServer",
]
