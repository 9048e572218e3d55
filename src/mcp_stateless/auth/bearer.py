"""`BearerAuthenticator`: an OAuth 2.1 resource server's check of every request's access token.

JWT access tokens (RFC 9068) are verified against the signing keys of the issuer named in the token,
which must be one of the configured trusted issuers; the keys come from the JWKS its RFC 8414 / OIDC
metadata points to, are cached, and are fetched again when a token names an unknown ``kid`` (at most
once per ``min_refresh_interval`` per issuer, so a flood of made-up kids cannot hammer the issuer).
``iss``, ``exp``, ``nbf`` and ``aud`` (this server's canonical resource URI, RFC 8707) are enforced.
Tokens that are not JWTs go to RFC 7662 introspection when it is configured, with a short cache.

Nothing about a token (its value, its claims) or a client secret goes into a log line or a refusal:
refusals name the rule that failed, never the input.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
from joserfc import jws
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from ..protocol.errors import INTERNAL_ERROR
from ..protocol.oauth import authorization_server_metadata_urls
from ..protocol.principal import Challenge, Credentials, Principal
from .metadata import metadata_url, protected_resource_metadata, well_known_paths

log = logging.getLogger("mcp_stateless.auth")

# Asymmetric algorithms only: an "HS256" token would be checked against a public key as a secret.
DEFAULT_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
_AT_JWT = frozenset({"at+jwt", "application/at+jwt"})


class TokenRejected(Exception):
    """Why a token is refused; the message is safe to show (it never contains the token)."""


class IssuerUnavailable(Exception):
    """The issuer's metadata or keys could not be fetched and no cached key fits."""


@dataclass(frozen=True, slots=True)
class Introspection:
    """RFC 7662 introspection for opaque tokens, with this resource server's client credentials.

    `endpoint` None: taken from the (single) trusted issuer's metadata ``introspection_endpoint``.
    Answers are cached for `cache_seconds` (bounded by the token's own ``exp``), so a revoked token
    stops working within that time."""

    client_id: str
    client_secret: str
    endpoint: str | None = None
    cache_seconds: float = 30.0
    cache_size: int = 10_000

    def __repr__(self) -> str:  # never print the secret
        return f"Introspection(client_id={self.client_id!r}, endpoint={self.endpoint!r})"


class _Issuer:
    """One trusted issuer: its metadata and its signing keys, fetched lazily and refreshed on demand."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.metadata: dict[str, Any] | None = None
        self.keys: KeySet | None = None
        self.fetched_at = float("-inf")
        self.lock = asyncio.Lock()

    def metadata_urls(self) -> list[str]:
        return authorization_server_metadata_urls(self.issuer)


class BearerAuthenticator:
    """Authenticates ``Authorization: Bearer`` tokens for the resource `resource` (its canonical URI,
    e.g. ``https://mcp.example.com/mcp``), issued by any of `issuers`.

    `required_scopes`: every request needs them (403 ``insufficient_scope`` otherwise); also the
    ``scope`` a 401 advertises. `scopes_supported`: listed in the metadata document (default: the
    required ones). Principal.id is ``issuer#subject``; scopes come from ``scope`` or ``scp``; all
    claims are kept on the principal for handlers.
    """

    def __init__(
        self,
        resource: str,
        issuers: Sequence[str],
        *,
        required_scopes: Sequence[str] = (),
        scopes_supported: Sequence[str] | None = None,
        introspection: Introspection | None = None,
        algorithms: Sequence[str] = DEFAULT_ALGORITHMS,
        leeway: float = 30.0,
        min_refresh_interval: float = 30.0,
        timeout: float = 5.0,
        verified_cache_size: int = 4096,
    ) -> None:
        if not issuers:
            raise ValueError("BearerAuthenticator needs at least one trusted issuer")
        if not resource.startswith(("https://", "http://")):
            raise ValueError("resource must be the server's absolute canonical URI")
        self.resource = resource
        self._issuers = {i: _Issuer(i) for i in issuers}
        self.required_scopes = frozenset(required_scopes)
        self._scope_list = list(dict.fromkeys(required_scopes))
        self._introspection = introspection
        self._introspected: OrderedDict[str, tuple[float, Principal | None]] = OrderedDict()
        # perf: a verified JWT's principal, until its exp: the signature check (~130 µs for RS256) is paid
        # once per token, not once per request. Bounded (oldest dropped); only verified tokens get in.
        self._verified: OrderedDict[str, tuple[float, Principal]] = OrderedDict()
        self._verified_size = verified_cache_size
        self._algorithms = list(algorithms)
        self._leeway = leeway
        self._min_refresh = min_refresh_interval
        self._timeout = timeout
        self._http: httpx.AsyncClient | None = None
        self._metadata_url = metadata_url(resource)
        doc = orjson.dumps(protected_resource_metadata(
            resource, list(issuers), scopes_supported if scopes_supported is not None else self._scope_list))
        # Served by the HTTP transport as GET routes (RFC 9728), see `HttpTransport`.
        self.metadata_routes: Mapping[str, bytes] = {p: doc for p in well_known_paths(resource)}
        scope = f', scope="{" ".join(self._scope_list)}"' if self._scope_list else ""
        self._bare = Challenge(401, f'Bearer resource_metadata="{self._metadata_url}"{scope}',
                               "Authentication required")

    # -- the Authenticator protocol ---------------------------------------------------------
    async def authenticate(self, credentials: Credentials) -> Principal | Challenge:
        header = credentials.headers.get("authorization")
        if header is None:
            return self._bare
        kind, _, token = header.partition(" ")
        token = token.strip()
        if kind.lower() != "bearer" or not token:
            return self._invalid("the Authorization header must be 'Bearer <token>'")
        # perf: a token seen before is answered here, without the coroutine of `verify`
        hit = self._verified.get(token)
        if hit is not None and hit[0] + self._leeway >= time.time():
            principal = hit[1]
        else:
            try:
                principal = await self.verify(token)
            except TokenRejected as e:
                return self._invalid(str(e))
            except IssuerUnavailable as e:
                log.warning("authorization server unavailable: %s", e)
                return Challenge(503, "", "Authorization server unavailable; try again later", INTERNAL_ERROR)
        if self.required_scopes and not principal.has_scopes(self.required_scopes):
            return self.scope_challenge(self.required_scopes)
        return principal

    def scope_challenge(self, scopes: frozenset[str] | Sequence[str]) -> Challenge:
        """The 403 that asks the client to step up to `scopes` (plus the server-wide ones)."""
        wanted = " ".join(dict.fromkeys([*self._scope_list, *sorted(scopes)]))
        return Challenge(403, f'Bearer error="insufficient_scope", scope="{wanted}", '
                              f'resource_metadata="{self._metadata_url}"',
                         f"Insufficient scope: needs {wanted}")

    def _invalid(self, why: str) -> Challenge:
        scope = f', scope="{" ".join(self._scope_list)}"' if self._scope_list else ""
        return Challenge(401, f'Bearer error="invalid_token", resource_metadata="{self._metadata_url}"{scope}',
                         f"Invalid access token: {why}")

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    # -- verification -----------------------------------------------------------------------
    async def verify(self, token: str) -> Principal:
        """The principal a token stands for, or `TokenRejected` / `IssuerUnavailable`."""
        hit = self._verified.get(token)
        if hit is not None:
            if hit[0] + self._leeway >= time.time():
                return hit[1]
            del self._verified[token]
        if token.count(".") != 2:
            if self._introspection is not None:
                return await self._introspect(token)
            raise TokenRejected("not a JWT")
        try:
            compact = jws.extract_compact(token.encode("ascii"))
            header = compact.headers()
            claims = orjson.loads(compact.payload)
        except (JoseError, ValueError, UnicodeError, orjson.JSONDecodeError):
            raise TokenRejected("malformed JWT") from None
        if not isinstance(claims, dict):
            raise TokenRejected("malformed JWT claims")
        typ = header.get("typ")
        if not isinstance(typ, str) or typ.lower() not in _AT_JWT:
            raise TokenRejected("not an access token (typ must be at+jwt)")
        iss = claims.get("iss")
        issuer = self._issuers.get(iss) if isinstance(iss, str) else None
        if issuer is None:
            raise TokenRejected("issuer not trusted")
        kid = header.get("kid")
        key_set = await self._keys_for(issuer, kid if isinstance(kid, str) else None)
        try:
            jws.deserialize_compact(token, key_set, algorithms=self._algorithms)
        except JoseError:
            raise TokenRejected("bad signature") from None
        self._check_claims(claims)
        principal = self._principal(issuer.issuer, claims)
        nbf = claims.get("nbf")
        if nbf is None or nbf - self._leeway <= time.time():  # _check_claims made sure exp is a number
            self._verified[token] = (float(claims["exp"]), principal)
            if len(self._verified) > self._verified_size:
                self._verified.popitem(last=False)
        return principal

    def _check_claims(self, claims: Mapping[str, Any]) -> None:
        now = time.time()
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or isinstance(exp, bool):
            raise TokenRejected("no exp claim")
        if exp + self._leeway < now:
            raise TokenRejected("expired")
        nbf = claims.get("nbf")
        if nbf is not None and (not isinstance(nbf, int | float) or nbf - self._leeway > now):
            raise TokenRejected("not valid yet")
        aud = claims.get("aud")
        audiences = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if self.resource not in audiences:
            raise TokenRejected("audience is not this resource")

    def _principal(self, iss: str, claims: Mapping[str, Any]) -> Principal:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise TokenRejected("no sub claim")
        scope = claims.get("scope")
        if isinstance(scope, str):
            scopes = frozenset(scope.split())
        else:
            scp = claims.get("scp")
            scopes = frozenset(s for s in scp if isinstance(s, str)) if isinstance(scp, list) else frozenset()
        exp = claims.get("exp")  # checked to be a number by _check_claims before any principal is made
        until = float(exp) + self._leeway if isinstance(exp, int | float) else None
        return Principal(f"{iss}#{sub}", scopes, dict(claims), until)

    # -- keys -------------------------------------------------------------------------------
    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)
        return self._http

    async def _get_json(self, url: str) -> dict[str, Any]:
        resp = await self._client().get(url, headers={"accept": "application/json"})
        if resp.status_code != 200:
            raise IssuerUnavailable(f"GET {url}: HTTP {resp.status_code}")
        body = resp.json()
        if not isinstance(body, dict):
            raise IssuerUnavailable(f"GET {url}: not a JSON object")
        return body

    async def _metadata(self, issuer: _Issuer) -> dict[str, Any]:
        if issuer.metadata is not None:
            return issuer.metadata
        failures: list[str] = []
        for url in issuer.metadata_urls():
            try:
                doc = await self._get_json(url)
            except (httpx.HTTPError, ValueError, IssuerUnavailable) as e:
                failures.append(f"{url}: {type(e).__name__}")
                continue
            # RFC 8414 §3.3: a document for another issuer must not be used.
            if doc.get("issuer") != issuer.issuer:
                failures.append(f"{url}: issuer mismatch")
                continue
            issuer.metadata = doc
            return doc
        raise IssuerUnavailable(f"no metadata for {issuer.issuer} ({'; '.join(failures)})")

    async def _keys_for(self, issuer: _Issuer, kid: str | None) -> KeySet:
        if issuer.keys is not None and _has_kid(issuer.keys, kid):
            return issuer.keys
        async with issuer.lock:
            if issuer.keys is not None and _has_kid(issuer.keys, kid):
                return issuer.keys  # another request refreshed while this one waited
            if time.monotonic() - issuer.fetched_at < self._min_refresh:
                if issuer.keys is None:
                    raise IssuerUnavailable(f"keys of {issuer.issuer} not fetched (retrying later)")
                raise TokenRejected("unknown signing key")
            issuer.fetched_at = time.monotonic()
            try:
                meta = await self._metadata(issuer)
                uri = meta.get("jwks_uri")
                if not isinstance(uri, str):
                    raise IssuerUnavailable(f"{issuer.issuer} metadata has no jwks_uri")
                fresh = KeySet.import_key_set(await self._get_json(uri))  # type: ignore[arg-type]
            except (httpx.HTTPError, ValueError, JoseError) as e:
                raise IssuerUnavailable(f"JWKS of {issuer.issuer}: {type(e).__name__}") from None
            issuer.keys = fresh
            log.info("fetched %d signing keys of %s", len(fresh.keys), issuer.issuer)
        if not _has_kid(fresh, kid):
            raise TokenRejected("unknown signing key")
        return fresh

    # -- introspection ----------------------------------------------------------------------
    async def _introspect(self, token: str) -> Principal:
        conf = self._introspection
        assert conf is not None
        now = time.monotonic()
        hit = self._introspected.get(token)
        if hit is not None and hit[0] > now:
            if hit[1] is None:
                raise TokenRejected("inactive")
            return hit[1]
        endpoint = conf.endpoint
        if endpoint is None:
            issuer = next(iter(self._issuers.values()))
            endpoint = (await self._metadata(issuer)).get("introspection_endpoint")
            if not isinstance(endpoint, str):
                raise IssuerUnavailable("the issuer advertises no introspection_endpoint")
        basic = base64.b64encode(f"{conf.client_id}:{conf.client_secret}".encode()).decode("ascii")
        try:
            resp = await self._client().post(endpoint, data={"token": token},
                                             headers={"authorization": f"Basic {basic}", "accept": "application/json"})
        except httpx.HTTPError as e:
            raise IssuerUnavailable(f"introspection: {type(e).__name__}") from None
        if resp.status_code != 200:
            raise IssuerUnavailable(f"introspection: HTTP {resp.status_code}")
        try:
            answer = resp.json()
        except ValueError:
            raise IssuerUnavailable("introspection: not JSON") from None
        principal: Principal | None = None
        until = now + conf.cache_seconds
        if isinstance(answer, dict) and answer.get("active") is True:
            # RFC 7662 `iss` is optional: absent, the token is the introspecting issuer's; present, it must be a
            # trusted one (an answer naming another issuer is not credited to ours).
            iss = answer.get("iss", next(iter(self._issuers)))
            claims = dict(answer)
            # RFC 7662 `sub` is optional; a client_credentials token's subject is its client
            if "sub" not in claims and isinstance(answer.get("client_id"), str):
                claims["sub"] = answer["client_id"]
            try:
                if not isinstance(iss, str) or iss not in self._issuers:
                    raise TokenRejected("introspected token of an untrusted issuer")
                self._check_claims(claims)
                principal = self._principal(iss, claims)
            except TokenRejected:
                principal = None
            exp = answer.get("exp")
            if isinstance(exp, int | float):
                until = min(until, now + (exp - time.time()))
        self._introspected[token] = (until, principal)
        if len(self._introspected) > conf.cache_size:  # bounded: drop the oldest answers
            self._introspected.popitem(last=False)
        if principal is None:
            raise TokenRejected("inactive")
        return principal


def _has_kid(keys: KeySet, kid: str | None) -> bool:
    if kid is None:
        return len(keys.keys) == 1
    return any(k.kid == kid for k in keys.keys)
