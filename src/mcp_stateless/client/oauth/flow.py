"""`OAuth`: the client half of MCP authorization, as an `Auth` hook on every HTTP request of a `Client`.

On a 401 it finds the server's Protected Resource Metadata (the challenge's `resource_metadata`, else the
well-known URLs), the authorization server's metadata, an identity at that server (pre-registered, a Client
ID Metadata Document, an earlier registration for that issuer, or a new dynamic registration), runs the
authorization code flow with PKCE and `resource`, redeems the code and resends the request. A token about
to expire is refreshed first when a refresh token exists; a 401 for a token that was sent re-discovers (the
authorization server may have changed) and refreshes or authorizes again; a 403 `insufficient_scope` asks
for the union of the scopes held and the scopes challenged, a bounded number of times per request.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import ssl
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from ...protocol.oauth import (
    AuthChallenge,
    authorization_server_metadata_urls,
    bearer_challenge,
    protected_resource_metadata_urls,
)
from ..auth import HttpRequest
from ..errors import OAuthError
from ..http11 import Response
from .authorizers import Authorizer
from .http import OAuthHttp
from .rules import (
    ClientIdentity,
    ResourceMetadata,
    ServerMetadata,
    Tokens,
    authorization_code,
    authorization_request,
    callback_params,
    choose_scopes,
    is_metadata_document_url,
    read_registration,
    read_resource_metadata,
    read_server_metadata,
    read_token_response,
    registration_request,
    registration_scopes,
    require_secure,
    token_auth_method,
    token_error,
)
from .store import MemoryTokenStore, Records, TokenStore

log = logging.getLogger("mcp_stateless.client.oauth")


@dataclass(slots=True)
class _Grant:
    """The token a server URL is currently answered with, and where it came from."""

    issuer: str
    resource: str
    tokens: Tokens


@dataclass(frozen=True, slots=True)
class PreRegistered:
    """Client credentials registered with an authorization server out of band. `issuer`: the server they
    belong to; None uses them with whichever server the protected resource names."""

    client_id: str
    client_secret: str | None = None
    issuer: str | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"PreRegistered(client_id={self.client_id!r}, issuer={self.issuer!r})"


class OAuth:
    """OAuth 2.1 for a `Client`: `Client(url, auth=OAuth(authorizer=LoopbackAuthorizer()))`.

    `authorizer`: how the user agent visits the authorization server (None: never; a request needing a new
    authorization then fails with `OAuthError`, for commands that only use stored tokens). `store`: where
    tokens and registrations live (default: this process). Client identity, in the order tried:
    `pre_registered` credentials, then `client_metadata_url` (an HTTPS URL serving this client's metadata
    document) where the server supports those, then a registration made earlier for that issuer, then
    dynamic registration as `client_name`. `scopes`: asked for in addition to what the server names.
    `max_step_ups`: re-authorizations for `insufficient_scope` per request. `refresh`: ask for
    `offline_access` when the authorization server offers it.
    """

    def __init__(
        self,
        *,
        authorizer: Authorizer | None = None,
        store: TokenStore | None = None,
        pre_registered: PreRegistered | Sequence[PreRegistered] = (),
        client_metadata_url: str | None = None,
        client_name: str = "mcp-stateless",
        scopes: Sequence[str] = (),
        max_step_ups: int = 2,
        refresh: bool = True,
        timeout: float = 10.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if client_metadata_url is not None and not is_metadata_document_url(client_metadata_url):
            raise ValueError("client_metadata_url must be an https URL with a path")
        self.authorizer = authorizer
        self.records = Records(store if store is not None else MemoryTokenStore())
        self.pre_registered = (pre_registered,) if isinstance(pre_registered, PreRegistered) else tuple(pre_registered)
        self.client_metadata_url = client_metadata_url
        self.client_name = client_name
        self.scopes = tuple(scopes)
        self.max_step_ups = max_step_ups
        self.refresh = refresh
        self.http = OAuthHttp(timeout=timeout, ssl_context=ssl_context)
        self._grants: dict[str, _Grant] = {}
        self._servers: dict[str, ServerMetadata] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    # -- the Auth hook --------------------------------------------------------------------------------------
    async def auth_flow(self, request: HttpRequest) -> AsyncGenerator[HttpRequest, Response]:
        server_url = _server_url(request)
        grant = await self._usable_grant(server_url)
        _sign(request, grant)
        response = yield request
        step_ups = recoveries = 0
        while response.status in (401, 403):
            challenge = bearer_challenge(response.headers.get("www-authenticate")) or _EMPTY
            sent = grant.tokens if grant is not None else None
            if response.status == 401 and recoveries < _MAX_RECOVERIES:
                recoveries += 1
                grant = await self._after_401(server_url, challenge, sent)
            elif (response.status == 403 and challenge.get("error") == "insufficient_scope"
                  and step_ups < self.max_step_ups):
                step_ups += 1
                grant = await self._step_up(server_url, challenge, sent)
            else:
                return  # nothing more a new authorization can do: the caller sees this refusal
            _sign(request, grant)
            response = yield request

    async def token_for(self, server_url: str) -> Tokens | None:
        """The stored token for `server_url`, if any (after a refresh when it was about to expire)."""
        grant = await self._usable_grant(server_url)
        return grant.tokens if grant is not None else None

    async def login(self, server_url: str, challenge: str | None = None) -> Tokens:
        """Authorize for `server_url` now (what `mcp-stateless login` does): `challenge` is a
        `WWW-Authenticate` value the server sent, if one is at hand."""
        async with self._lock(server_url):
            grant = await self._authorize(server_url, bearer_challenge(challenge) or _EMPTY, ())
        return grant.tokens

    async def aclose(self) -> None:
        await self.http.aclose()

    # -- which token ----------------------------------------------------------------------------------------
    def _lock(self, server_url: str) -> asyncio.Lock:
        return self._locks.setdefault(server_url, asyncio.Lock())

    async def _usable_grant(self, server_url: str) -> _Grant | None:
        grant = self._grants.get(server_url)
        if grant is None:
            bound = await self.records.binding(server_url)
            if bound is None:
                return None
            tokens = await self.records.tokens(*bound)
            if tokens is None:
                return None
            grant = self._grants[server_url] = _Grant(bound[0], bound[1], tokens)
        if grant.tokens.expired() and grant.tokens.refresh_token:
            async with self._lock(server_url):
                current = self._grants.get(server_url)
                if current is not None and current.tokens is grant.tokens:
                    refreshed = await self._try_refresh(server_url, grant)
                    if refreshed is None:
                        return None
                    return refreshed
                return current
        return grant

    async def _after_401(self, server_url: str, challenge: AuthChallenge, sent: Tokens | None) -> _Grant:
        async with self._lock(server_url):
            current = self._grants.get(server_url)
            if current is not None and current.tokens is not sent:
                return current  # another request got a new token while this one waited
            held = sent.scopes if sent is not None else ()  # a new token keeps what the old one could do
            if sent is not None and current is not None:
                # Re-discover first: a refresh at an authorization server the resource has left is useless.
                prm = await self._resource_metadata(server_url, challenge)
                if current.issuer in prm.authorization_servers and prm.resource == current.resource:
                    refreshed = await self._try_refresh(server_url, current)
                    if refreshed is not None and refreshed.tokens.access_token != sent.access_token:
                        return refreshed
                else:
                    log.info("the authorization server of %s is no longer %s", server_url, current.issuer)
                self._grants.pop(server_url, None)
                await self.records.forget_tokens(current.issuer, current.resource)
                return await self._authorize(server_url, challenge, held, prm)
            return await self._authorize(server_url, challenge, held)

    async def _step_up(self, server_url: str, challenge: AuthChallenge, sent: Tokens | None) -> _Grant:
        async with self._lock(server_url):
            current = self._grants.get(server_url)
            if (current is not None and current.tokens is not sent
                    and set(challenge.scopes) <= set(current.tokens.scopes)):
                return current  # another request already stepped up to these scopes
            held = sent.scopes if sent is not None else ()
            return await self._authorize(server_url, challenge, held)

    # -- discovery -----------------------------------------------------------------------------------------
    async def _resource_metadata(self, server_url: str, challenge: AuthChallenge) -> ResourceMetadata:
        named = challenge.get("resource_metadata")
        urls = ([named] if named else []) + [u for u in protected_resource_metadata_urls(server_url) if u != named]
        tried: list[str] = []
        for url in urls:
            require_secure(url)  # RFC 9728 §3: the metadata is fetched over TLS (loopback excepted)
            answer = await self.http.get(url)
            if answer.status == 200:
                return read_resource_metadata(answer.json(), server_url)
            tried.append(f"{url} (HTTP {answer.status})")
        raise OAuthError(f"no protected resource metadata for {server_url}: tried {', '.join(tried)}")

    async def _server_metadata(self, issuer: str) -> ServerMetadata:
        known = self._servers.get(issuer)
        if known is not None:
            return known
        require_secure(issuer)  # RFC 8414 §2: an issuer is an https URL (loopback excepted)
        problems: list[str] = []
        for url in authorization_server_metadata_urls(issuer):
            answer = await self.http.get(url)
            if answer.status != 200:
                problems.append(f"{url} (HTTP {answer.status})")
                continue
            try:
                metadata = read_server_metadata(answer.json(), issuer)
            except OAuthError as e:
                problems.append(f"{url} ({e})")
                continue
            self._servers[issuer] = metadata
            return metadata
        raise OAuthError(f"no usable metadata for the authorization server {issuer}: {'; '.join(problems)}")

    async def _first_usable_server(self, prm: ResourceMetadata) -> ServerMetadata:
        """The first authorization server of the resource whose metadata can be trusted; each one named is
        independent (its own registration and tokens), so the next is only a fallback."""
        problems: list[str] = []
        for issuer in prm.authorization_servers:
            try:
                return await self._server_metadata(issuer)
            except OAuthError as e:
                problems.append(str(e))
        raise OAuthError("; ".join(problems))

    # -- authorization -------------------------------------------------------------------------------------
    async def _authorize(
        self, server_url: str, challenge: AuthChallenge, held: Sequence[str], prm: ResourceMetadata | None = None
    ) -> _Grant:
        if prm is None:
            prm = await self._resource_metadata(server_url, challenge)
        server = await self._first_usable_server(prm)
        issuer = server.issuer
        scopes = choose_scopes(challenge.scopes, prm, server, [*held, *self.scopes], want_refresh=self.refresh)
        if self.authorizer is None:
            raise OAuthError(f"{server_url} needs authorization at {issuer}; log in first "
                             f"(mcp-stateless login {server_url})")
        identity = await self._identity(server, registration_scopes(scopes, prm), self.authorizer.redirect_uri)
        pending = authorization_request(server, identity, self.authorizer.redirect_uri, prm.resource, scopes)
        log.info("authorizing %s at %s (scopes: %s)", server_url, issuer, " ".join(scopes) or "none")
        params = callback_params(await self.authorizer.authorize(pending.url))
        code = authorization_code(pending, params)
        tokens = await self._token_request(server, identity, {
            "grant_type": "authorization_code", "code": code, "redirect_uri": pending.redirect_uri,
            "code_verifier": pending.verifier, "resource": prm.resource}, scopes)
        if identity.kind != "registered":  # a registration is saved when made; this lets a later process refresh
            await self.records.save_client(issuer, identity)
        return await self._keep(server_url, issuer, prm.resource, tokens)

    async def _identity(
        self, server: ServerMetadata, scopes: Sequence[str], redirect_uri: str | None
    ) -> ClientIdentity:
        """Who this client is at `server`; with `redirect_uri` None, only identities that need no new
        registration (a refresh)."""
        for pre in self.pre_registered:
            if pre.issuer in (None, server.issuer):
                return ClientIdentity(pre.client_id, pre.client_secret, None, "pre-registered",
                                      (redirect_uri,) if redirect_uri else ())
        if self.client_metadata_url is not None and server.client_id_metadata_document_supported:
            return ClientIdentity(self.client_metadata_url, None, "none", "metadata-document")
        stored = await self.records.client(server.issuer)
        if stored is not None and (redirect_uri is None or stored.kind != "registered"
                                   or redirect_uri in stored.redirect_uris):
            return stored
        if redirect_uri is None:
            raise OAuthError(f"no client identity at {server.issuer} to refresh with")
        if server.registration_endpoint is None:
            raise OAuthError(f"no way to identify this client at {server.issuer}: it offers no dynamic "
                             "registration; give pre-registered credentials or a client metadata URL")
        answer = await self.http.post_json(server.registration_endpoint,
                                           registration_request(server, self.client_name, redirect_uri, scopes))
        if answer.status not in (200, 201):
            raise token_error(answer.status, answer.json(), f"dynamic client registration at {server.issuer}")
        identity = read_registration(answer.json()).with_redirects((redirect_uri,))
        await self.records.save_client(server.issuer, identity)
        log.info("registered at %s as %s", server.issuer, identity.client_id)
        return identity

    async def _token_request(
        self, server: ServerMetadata, identity: ClientIdentity, form: dict[str, str], asked: Sequence[str],
        previous: Tokens | None = None,
    ) -> Tokens:
        method = token_auth_method(identity, server)
        headers: dict[str, str] = {}
        if method == "client_secret_basic":
            # RFC 6749 §2.3.1: both parts form-urlencoded before the Basic encoding
            pair = f"{quote(identity.client_id, safe='')}:{quote(identity.client_secret or '', safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        else:
            form["client_id"] = identity.client_id
            if method == "client_secret_post":
                form["client_secret"] = identity.client_secret or ""
        answer = await self.http.post_form(server.token_endpoint, form, headers)
        if answer.status != 200:
            raise token_error(answer.status, answer.json())
        return read_token_response(answer.json(), asked, previous)

    async def _try_refresh(self, server_url: str, grant: _Grant) -> _Grant | None:
        """A refreshed grant, or None (and the stored token forgotten) when the refresh is refused."""
        tokens = grant.tokens
        if not tokens.refresh_token:
            return None
        try:
            server = await self._server_metadata(grant.issuer)
            identity = await self._identity(server, tokens.scopes, None)
            fresh = await self._token_request(server, identity, {
                "grant_type": "refresh_token", "refresh_token": tokens.refresh_token,
                "resource": grant.resource}, tokens.scopes, tokens)
        except OAuthError as e:
            log.info("refreshing the token for %s failed: %s", server_url, e)
            self._grants.pop(server_url, None)
            await self.records.forget_tokens(grant.issuer, grant.resource)
            return None
        return await self._keep(server_url, grant.issuer, grant.resource, fresh)

    async def _keep(self, server_url: str, issuer: str, resource: str, tokens: Tokens) -> _Grant:
        grant = self._grants[server_url] = _Grant(issuer, resource, tokens)
        await self.records.save_tokens(issuer, resource, tokens)
        await self.records.save_binding(server_url, issuer, resource)
        return grant


_EMPTY = AuthChallenge("bearer", {})
# A 401 is answered by at most this many refreshes or authorizations per request (a server refusing every
# fresh token must not keep the client authorizing forever).
_MAX_RECOVERIES = 2


def _server_url(request: HttpRequest) -> str:
    ep = request.endpoint
    return f"{ep.scheme}://{ep.host_header}{ep.target.split('?', 1)[0]}"


def _sign(request: HttpRequest, grant: _Grant | None) -> None:
    if grant is not None:
        request.headers["Authorization"] = f"Bearer {grant.tokens.access_token}"
    else:
        request.headers.pop("Authorization", None)


__all__ = ["OAuth", "PreRegistered"]
