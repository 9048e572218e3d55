"""The OAuth client's decisions, as pure functions: which metadata to trust, which scopes to ask for, who the
client is at this authorization server, how it authenticates at the token endpoint, what the authorization
request says and whether its response may be redeemed (PKCE, RFC 8707 `resource`, RFC 9207 `iss`).

Nothing here does I/O; `flow.py` fetches, this module judges.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from ...protocol.oauth import is_loopback_url, resource_covers
from ..errors import OAuthError

OFFLINE_ACCESS = "offline_access"
# RFC 8414 §2: without token_endpoint_auth_methods_supported the default is client_secret_basic.
_DEFAULT_AUTH_METHODS = ("client_secret_basic",)
_WITH_SECRET = ("client_secret_basic", "client_secret_post")


# ------------------------------------------------------------------------------------------------- PKCE


def pkce_pair() -> tuple[str, str]:
    """A fresh code verifier (43 characters of base64url, 256 bits) and its S256 challenge (RFC 7636)."""
    verifier = secrets.token_urlsafe(32)
    return verifier, s256(verifier)


def s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


# ---------------------------------------------------------------------------------------------- metadata


@dataclass(frozen=True, slots=True)
class ResourceMetadata:
    """What a protected resource says about itself (RFC 9728)."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None


def read_resource_metadata(doc: Any, server_url: str) -> ResourceMetadata:
    """A Protected Resource Metadata document, refused unless its `resource` names this server: a token
    asked for another resource would be handed to whoever served the document."""
    if not isinstance(doc, dict):
        raise OAuthError("the protected resource metadata is not a JSON object")
    resource = doc.get("resource")
    if not isinstance(resource, str) or not resource:
        raise OAuthError("the protected resource metadata has no resource")
    if not resource_covers(resource, server_url):
        raise OAuthError(f"the protected resource metadata is for {resource}, not for {server_url}")
    servers = doc.get("authorization_servers")
    if not isinstance(servers, list) or not servers or not all(isinstance(s, str) and s for s in servers):
        raise OAuthError("the protected resource metadata names no authorization server")
    scopes = doc.get("scopes_supported")
    return ResourceMetadata(resource, tuple(servers), _strings(scopes) if isinstance(scopes, list) else None)


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """The parts of an authorization server's metadata (RFC 8414) the flow uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    registration_endpoint: str | None
    scopes_supported: tuple[str, ...] | None
    grant_types_supported: tuple[str, ...]
    token_endpoint_auth_methods: tuple[str, ...]
    iss_parameter_supported: bool
    client_id_metadata_document_supported: bool

    @property
    def refresh_supported(self) -> bool:
        return "refresh_token" in self.grant_types_supported


def read_server_metadata(doc: Any, issuer: str) -> ServerMetadata:
    """An authorization server's metadata, refused unless its `issuer` is exactly the one the well-known URL
    was built from (RFC 8414 §3.3), its endpoints are HTTPS (or loopback) and it supports PKCE with S256."""
    if not isinstance(doc, dict):
        raise OAuthError("the authorization server metadata is not a JSON object")
    if doc.get("issuer") != issuer:
        raise OAuthError(f"the authorization server metadata names issuer {doc.get('issuer')!r}, not {issuer!r}")
    methods = doc.get("code_challenge_methods_supported")
    if not isinstance(methods, list) or "S256" not in methods:
        raise OAuthError(f"the authorization server {issuer} does not advertise PKCE with S256")
    authz, token = doc.get("authorization_endpoint"), doc.get("token_endpoint")
    if not isinstance(authz, str) or not isinstance(token, str):
        raise OAuthError(f"the authorization server {issuer} has no authorization or token endpoint")
    registration = doc.get("registration_endpoint")
    for url in (authz, token, registration):
        if isinstance(url, str):
            require_secure(url)
    scopes = doc.get("scopes_supported")
    grants = doc.get("grant_types_supported")
    auth_methods = doc.get("token_endpoint_auth_methods_supported")
    return ServerMetadata(
        issuer=issuer,
        authorization_endpoint=authz,
        token_endpoint=token,
        registration_endpoint=registration if isinstance(registration, str) else None,
        scopes_supported=_strings(scopes) if isinstance(scopes, list) else None,
        # RFC 8414 §2: the default is authorization_code and implicit, so no refresh unless it says so.
        grant_types_supported=_strings(grants) if isinstance(grants, list) else ("authorization_code",),
        token_endpoint_auth_methods=_strings(auth_methods) if isinstance(auth_methods, list) else _DEFAULT_AUTH_METHODS,
        iss_parameter_supported=doc.get("authorization_response_iss_parameter_supported") is True,
        client_id_metadata_document_supported=doc.get("client_id_metadata_document_supported") is True,
    )


def require_secure(url: str) -> None:
    """Metadata and authorization server endpoints must be HTTPS; plain HTTP only on loopback (a local
    server, a test)."""
    scheme = urlsplit(url).scheme.lower()
    if scheme == "https" or (scheme == "http" and is_loopback_url(url)):
        return
    raise OAuthError(f"refusing a non-HTTPS authorization server endpoint: {url}")


def _strings(items: list[Any]) -> tuple[str, ...]:
    return tuple(x for x in items if isinstance(x, str))


# ------------------------------------------------------------------------------------------------- scopes


def choose_scopes(
    challenged: Sequence[str],
    resource: ResourceMetadata,
    server: ServerMetadata,
    previous: Sequence[str] = (),
    *,
    want_refresh: bool = True,
) -> list[str]:
    """The scopes to ask for: the challenge's if it names any, else everything the resource lists, else
    none; always with the scopes asked before (a step-up keeps what the client had); `offline_access` only
    when the authorization server lists it (and refresh tokens are wanted), never because a resource did."""
    chosen = list(challenged) if challenged else list(resource.scopes_supported or ())
    scopes = list(dict.fromkeys([*previous, *chosen]))
    scopes = [s for s in scopes if s != OFFLINE_ACCESS]
    offers_offline = OFFLINE_ACCESS in (server.scopes_supported or ())
    if want_refresh and offers_offline and server.refresh_supported:
        scopes.append(OFFLINE_ACCESS)
    return scopes


def registration_scopes(asked: Sequence[str], resource: ResourceMetadata) -> list[str]:
    """The scopes to register a client for (RFC 7591 `scope`): what this authorization asks for plus every
    scope the resource lists. An authorization server may hold a client to its registered scopes, so a
    registration for the first request's scopes alone would make every later step-up fail with
    `invalid_scope`; each authorization request still asks only for what it needs."""
    listed = [s for s in resource.scopes_supported or () if s != OFFLINE_ACCESS]
    return list(dict.fromkeys([*asked, *listed]))


# ------------------------------------------------------------------------------------------ client identity


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """Who the client is at one authorization server. `kind`: "metadata-document" (the client_id is the URL
    of its Client ID Metadata Document, valid at any server that supports them), "pre-registered" or
    "registered" (dynamic registration); the last two belong to the issuer they were obtained from."""

    client_id: str
    client_secret: str | None = None
    auth_method: str | None = None  # what the registration answer chose, if anything
    kind: str = "registered"
    redirect_uris: tuple[str, ...] = ()  # what a registration was made for

    def __repr__(self) -> str:  # never print the secret
        return f"ClientIdentity(client_id={self.client_id!r}, kind={self.kind!r})"

    def with_redirects(self, uris: Sequence[str]) -> ClientIdentity:
        return replace(self, redirect_uris=tuple(uris))

    def to_json(self) -> dict[str, Any]:
        return {"client_id": self.client_id, "client_secret": self.client_secret,
                "auth_method": self.auth_method, "kind": self.kind, "redirect_uris": list(self.redirect_uris)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> ClientIdentity:
        return cls(str(doc["client_id"]), doc.get("client_secret"), doc.get("auth_method"),
                   str(doc.get("kind") or "registered"), tuple(doc.get("redirect_uris") or ()))


def token_auth_method(identity: ClientIdentity, server: ServerMetadata) -> str:
    """How to authenticate at the token endpoint: what the registration settled on if the server still
    supports it, else the first advertised method this client can perform (a secret allows basic or post)."""
    supported = server.token_endpoint_auth_methods
    if identity.auth_method and identity.auth_method in supported:
        return identity.auth_method
    possible = (*_WITH_SECRET, "none") if identity.client_secret else ("none",)
    for method in supported:
        if method in possible:
            return method
    raise OAuthError(f"the authorization server {server.issuer} supports token endpoint authentication "
                     f"{list(supported)}; this client can do {list(possible)}")


def registration_request(
    server: ServerMetadata, client_name: str, redirect_uri: str, scopes: Sequence[str]
) -> dict[str, Any]:
    """An RFC 7591 registration: a public client when the server allows one, `native` for a loopback
    redirect (a desktop or command-line client), refresh tokens only when the server issues them."""
    supported = server.token_endpoint_auth_methods
    method = next((m for m in ("none", *_WITH_SECRET) if m in supported), "none")
    grants = ["authorization_code", *(["refresh_token"] if server.refresh_supported else [])]
    doc: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": grants,
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": "native" if is_loopback_url(redirect_uri) else "web",
    }
    if scopes:
        doc["scope"] = " ".join(scopes)
    return doc


def read_registration(doc: Any) -> ClientIdentity:
    if not isinstance(doc, dict) or not isinstance(doc.get("client_id"), str) or not doc["client_id"]:
        raise OAuthError("the client registration answer has no client_id")
    secret = doc.get("client_secret")
    method = doc.get("token_endpoint_auth_method")
    return ClientIdentity(doc["client_id"], secret if isinstance(secret, str) and secret else None,
                          method if isinstance(method, str) else None, "registered")


def client_metadata_document(url: str, client_name: str, redirect_uris: Sequence[str]) -> dict[str, Any]:
    """The document to publish at `url` for a Client ID Metadata Document client (its client_id is `url`)."""
    return {"client_id": url, "client_name": client_name, "redirect_uris": list(redirect_uris),
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "native" if all(is_loopback_url(u) for u in redirect_uris) else "web"}


def is_metadata_document_url(url: str) -> bool:
    """A Client ID Metadata Document URL must be HTTPS with a path (the client_id is that URL)."""
    u = urlsplit(url)
    return u.scheme == "https" and bool(u.netloc) and u.path not in ("", "/")


# ------------------------------------------------------------------------------------ authorization request


@dataclass(frozen=True, slots=True)
class PendingAuthorization:
    """One authorization request in flight: what its response is checked against and redeemed with."""

    url: str
    state: str
    verifier: str
    redirect_uri: str
    resource: str
    scopes: tuple[str, ...]
    issuer: str
    iss_required: bool


def authorization_request(
    server: ServerMetadata, identity: ClientIdentity, redirect_uri: str, resource: str, scopes: Sequence[str]
) -> PendingAuthorization:
    verifier, challenge = pkce_pair()
    state = secrets.token_urlsafe(24)
    query = {"response_type": "code", "client_id": identity.client_id, "redirect_uri": redirect_uri,
             "state": state, "code_challenge": challenge, "code_challenge_method": "S256", "resource": resource}
    if scopes:
        query["scope"] = " ".join(scopes)
    sep = "&" if "?" in server.authorization_endpoint else "?"
    return PendingAuthorization(f"{server.authorization_endpoint}{sep}{urlencode(query)}", state, verifier,
                                redirect_uri, resource, tuple(scopes), server.issuer, server.iss_parameter_supported)


def callback_params(redirect_url: str) -> dict[str, str]:
    """The query of the URL the authorization server redirected to (the first of each parameter)."""
    out: dict[str, str] = {}
    for k, v in parse_qsl(urlsplit(redirect_url).query, keep_blank_values=True):
        out.setdefault(k, v)
    return out


def authorization_code(pending: PendingAuthorization, params: Mapping[str, str]) -> str:
    """The code to redeem, once the response is proven to answer this request from this server: `iss` is
    compared first and exactly (RFC 9207 §2.4: a mismatch means even its `error` is not to be believed),
    absent `iss` is refused when the server advertised it, then `state`, then the outcome."""
    iss = params.get("iss")
    if iss is not None and iss != pending.issuer:
        raise OAuthError(f"the authorization response names issuer {iss!r}, not {pending.issuer!r}")
    if iss is None and pending.iss_required:
        raise OAuthError("the authorization response lacks the iss parameter its server advertises")
    if params.get("state") != pending.state:
        raise OAuthError("the authorization response does not carry this request's state")
    if "error" in params:
        detail = params.get("error_description")
        raise OAuthError(f"authorization refused: {params['error']}" + (f" ({detail})" if detail else ""))
    code = params.get("code")
    if not code:
        raise OAuthError("the authorization response carries no code")
    return code


# ------------------------------------------------------------------------------------------------ tokens


@dataclass(frozen=True, slots=True)
class Tokens:
    """An access token for one resource from one issuer, and what came with it."""

    access_token: str
    expires_at: float | None = None  # epoch seconds
    refresh_token: str | None = None
    scopes: tuple[str, ...] = ()  # granted (or, when the server said nothing, asked for)

    def __repr__(self) -> str:  # never print a token
        refresh = self.refresh_token is not None
        return f"Tokens(expires_at={self.expires_at!r}, scopes={self.scopes!r}, refresh={refresh})"

    def expired(self, now: float | None = None, skew: float = 30.0) -> bool:
        return self.expires_at is not None and (now if now is not None else time.time()) >= self.expires_at - skew

    def to_json(self) -> dict[str, Any]:
        return {"access_token": self.access_token, "expires_at": self.expires_at,
                "refresh_token": self.refresh_token, "scopes": list(self.scopes)}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Tokens:
        expires = doc.get("expires_at")
        return cls(str(doc["access_token"]), float(expires) if isinstance(expires, int | float) else None,
                   doc.get("refresh_token"), tuple(doc.get("scopes") or ()))


def read_token_response(doc: Any, asked: Sequence[str], previous: Tokens | None = None,
                        now: float | None = None) -> Tokens:
    """A token endpoint answer (RFC 6749 §5.1). A refresh answer without a new refresh token keeps the old
    one; without `scope` the grant is what was asked."""
    if not isinstance(doc, dict):
        raise OAuthError("the token answer is not a JSON object")
    token = doc.get("access_token")
    if not isinstance(token, str) or not token:
        raise OAuthError("the token answer has no access_token")
    kind = doc.get("token_type")
    if not isinstance(kind, str) or kind.lower() != "bearer":
        raise OAuthError(f"the token answer has token_type {kind!r}, not Bearer")
    expires_in = doc.get("expires_in")
    expires_at = None
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and expires_in > 0:
        expires_at = (now if now is not None else time.time()) + float(expires_in)
    refresh = doc.get("refresh_token")
    if not isinstance(refresh, str) or not refresh:
        refresh = previous.refresh_token if previous is not None else None
    scope = doc.get("scope")
    scopes = tuple(scope.split()) if isinstance(scope, str) else tuple(asked)
    return Tokens(token, expires_at, refresh, scopes)


def token_error(status: int, doc: Any, what: str = "the token endpoint") -> OAuthError:
    """An OAuthError for a refused request to an authorization server endpoint, naming the server's error
    code and description (never anything the client sent)."""
    code = doc.get("error") if isinstance(doc, dict) else None
    detail = doc.get("error_description") if isinstance(doc, dict) else None
    text = f"{what} answered HTTP {status}" + (f": {code}" if isinstance(code, str) else "")
    if isinstance(detail, str):
        text += f" ({detail[:200]})"
    return OAuthError(text, error=code if isinstance(code, str) else None)


__all__ = [
    "OFFLINE_ACCESS",
    "ClientIdentity",
    "PendingAuthorization",
    "ResourceMetadata",
    "ServerMetadata",
    "Tokens",
    "authorization_code",
    "authorization_request",
    "callback_params",
    "choose_scopes",
    "client_metadata_document",
    "is_metadata_document_url",
    "pkce_pair",
    "read_registration",
    "read_resource_metadata",
    "read_server_metadata",
    "read_token_response",
    "registration_request",
    "require_secure",
    "s256",
    "token_auth_method",
    "token_error",
]
