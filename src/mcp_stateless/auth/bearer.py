"""`BearerAuthenticator`: an OAuth 2.1 resource server's check of every request's access token.

JWT access tokens (RFC 9068) are verified against the signing keys of the issuer named in the token,
which must be one of the configured trusted issuers; the keys come from the JWKS its RFC 8414 / OIDC
metadata points to, are cached, and are fetched again when a token names an unknown ``kid`` (at most
once per ``min_refresh_interval`` per issuer, so a flood of made-up kids cannot hammer the issuer).
``iss``, ``exp``, ``nbf`` and ``aud`` (this server's canonical resource URI, RFC 8707) are enforced.
Tokens that are not JWTs go to RFC 7662 introspection when it is configured, with a short cache.

Every fetch from an authorization server (metadata, JWKS, introspection) is time-boxed as a whole
(`timeout`, however slowly the bytes trickle) and size-capped while it is read (`max_document_bytes`), so
a slow or hostile server costs a prompt 503, never a stalled request or a memory blow-up. A token is
size-capped (`max_token_bytes`) before any work, and both caches key on its SHA-256 digest.

Nothing about a token (its value, its claims) or a client secret goes into a log line or a refusal:
refusals name the rule that failed, never the input.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
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
# A JWT access token with a generous claim set is a few KiB; far past that is an attack, refused unparsed.
DEFAULT_MAX_TOKEN_BYTES = 16 * 1024
# A metadata document, a JWKS or an introspection answer: real ones are a few KiB.
DEFAULT_MAX_DOCUMENT_BYTES = 1024 * 1024


class TokenRejected(Exception):
    """Why a token is refused; the message is safe to show (it never contains the token)."""


class IssuerUnavailable(Exception):
    """The issuer's metadata or keys could not be fetched and no cached key fits."""


@dataclass(frozen=True, slots=True)
class Introspection:
    """RFC 7662 introspection for opaque tokens, with this resource server's client credentials.

    `endpoint` None: taken from the (single) trusted issuer's metadata ``introspection_endpoint``.
    `issuer`: the trusted issuer whose endpoint this is (default: the first trusted issuer). A token
    introspected there is that issuer's: an answer naming another issuer in ``iss`` is refused, never
    credited to the issuer it names (even a trusted one).
    Answers are cached for `cache_seconds` (bounded by the token's own ``exp``), so a revoked token
    stops working within that time."""

    client_id: str
    client_secret: str
    endpoint: str | None = None
    cache_seconds: float = 30.0
    cache_size: int = 10_000
    issuer: str | None = None

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
        max_token_bytes: int = DEFAULT_MAX_TOKEN_BYTES,
        max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
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
        if introspection is not None and introspection.issuer is not None and introspection.issuer not in issuers:
            raise ValueError("Introspection.issuer must be one of the trusted issuers")
        self._introspecting_issuer = (introspection.issuer if introspection is not None and introspection.issuer
                                      else next(iter(issuers)))
        # Keyed by the token's digest (a cache of whole tokens is as large as the tokens sent). Successes and
        # refusals are bounded apart, so a flood of made-up tokens evicts only other refusals.
        self._introspected: OrderedDict[bytes, tuple[float, Principal]] = OrderedDict()
        self._introspect_refused: OrderedDict[bytes, float] = OrderedDict()
        # perf: a verified JWT's principal, until its exp: the signature check (~130 µs for RS256) is paid
        # once per token, not once per request. Bounded (oldest dropped); only verified tokens get in.
        self._verified: OrderedDict[bytes, tuple[float, Principal]] = OrderedDict()
        self._verified_size = verified_cache_size
        self._algorithms = list(algorithms)
        self._leeway = leeway
        self._min_refresh = min_refresh_interval
        self._timeout = timeout
        self._max_token = max_token_bytes
        self._max_document = max_document_bytes
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
        if len(header) > self._max_token + 32:  # before any parsing: "Bearer " and some whitespace fit
            return self._invalid(f"token larger than {self._max_token} bytes")
        kind, _, token = header.partition(" ")
        token = token.strip()
        if kind.lower() != "bearer" or not token:
            return self._invalid("the Authorization header must be 'Bearer <token>'")
        # perf: a token seen before is answered here, without the coroutine of `verify`
        hit = self._verified.get(_digest(token))
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
        if len(token) > self._max_token:
            raise TokenRejected(f"token larger than {self._max_token} bytes")
        key = _digest(token)
        hit = self._verified.get(key)
        if hit is not None:
            if hit[0] + self._leeway >= time.time():
                return hit[1]
            del self._verified[key]
        if token.count(".") != 2:
            if self._introspection is not None:
                return await self._introspect(token, key)
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
            self._verified[key] = (float(claims["exp"]), principal)
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

    async def _fetch_json(self, what: str, method: str, url: str, **kw: Any) -> dict[str, Any]:
        """One JSON object from an authorization server, or `IssuerUnavailable`: the whole exchange within
        `timeout` (httpx's own timeout is per read, so a server trickling a byte a second never trips it)
        and the body capped while it is read (a declared or streamed 300 MiB JWKS is not buffered)."""
        cap = self._max_document
        try:
            async with asyncio.timeout(self._timeout), self._client().stream(method, url, **kw) as resp:
                if resp.status_code != 200:
                    raise IssuerUnavailable(f"{what}: HTTP {resp.status_code}")
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > cap:
                    raise IssuerUnavailable(f"{what}: body larger than {cap} bytes")
                chunks: list[bytes] = []
                size = 0
                async for chunk in resp.aiter_bytes():  # decoded: a compressed bomb is capped too
                    size += len(chunk)
                    if size > cap:
                        raise IssuerUnavailable(f"{what}: body larger than {cap} bytes")
                    chunks.append(chunk)
        except TimeoutError:
            raise IssuerUnavailable(f"{what}: no complete answer within {self._timeout:g} s") from None
        except httpx.HTTPError as e:
            raise IssuerUnavailable(f"{what}: {type(e).__name__}") from None
        try:
            body = orjson.loads(b"".join(chunks))
        except orjson.JSONDecodeError:
            raise IssuerUnavailable(f"{what}: not JSON") from None
        if not isinstance(body, dict):
            raise IssuerUnavailable(f"{what}: not a JSON object")
        return body

    async def _get_json(self, url: str) -> dict[str, Any]:
        return await self._fetch_json(f"GET {url}", "GET", url, headers={"accept": "application/json"})

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
                jwks = await self._get_json(uri)
                if not isinstance(jwks.get("keys"), list):  # RFC 7517 §5: a JWK Set is {"keys": [...]}
                    raise IssuerUnavailable(f"JWKS of {issuer.issuer} has no \"keys\" list")
                fresh = KeySet.import_key_set(jwks)  # type: ignore[arg-type]
            except (httpx.HTTPError, ValueError, JoseError, KeyError, TypeError, AttributeError) as e:
                # A malformed key set is the issuer's fault: unavailable (503), not an internal error.
                raise IssuerUnavailable(f"JWKS of {issuer.issuer}: {type(e).__name__}") from None
            issuer.keys = fresh
            log.info("fetched %d signing keys of %s", len(fresh.keys), issuer.issuer)
        if not _has_kid(fresh, kid):
            raise TokenRejected("unknown signing key")
        return fresh

    # -- introspection ----------------------------------------------------------------------
    async def _introspect(self, token: str, key: bytes) -> Principal:
        conf = self._introspection
        assert conf is not None
        now = time.monotonic()
        hit = self._introspected.get(key)
        if hit is not None and hit[0] > now:
            return hit[1]
        refused = self._introspect_refused.get(key)
        if refused is not None and refused > now:
            raise TokenRejected("inactive")
        endpoint = conf.endpoint
        if endpoint is None:
            issuer = self._issuers[self._introspecting_issuer]
            endpoint = (await self._metadata(issuer)).get("introspection_endpoint")
            if not isinstance(endpoint, str):
                raise IssuerUnavailable("the issuer advertises no introspection_endpoint")
        basic = base64.b64encode(f"{conf.client_id}:{conf.client_secret}".encode()).decode("ascii")
        answer = await self._fetch_json("introspection", "POST", endpoint, data={"token": token},
                                        headers={"authorization": f"Basic {basic}", "accept": "application/json"})
        principal: Principal | None = None
        until = now + conf.cache_seconds
        if answer.get("active") is True:
            # RFC 7662 `iss` is optional: absent, the token is the introspecting issuer's; present, it must be
            # that issuer (an endpoint of issuer A cannot vouch for a token of issuer B, even a trusted one).
            iss = answer.get("iss", self._introspecting_issuer)
            claims = dict(answer)
            # RFC 7662 `sub` is optional; a client_credentials token's subject is its client
            if "sub" not in claims and isinstance(answer.get("client_id"), str):
                claims["sub"] = answer["client_id"]
            try:
                if iss != self._introspecting_issuer:
                    raise TokenRejected("introspected token of another issuer")
                self._check_claims(claims)
                principal = self._principal(iss, claims)
            except TokenRejected:
                principal = None
            exp = answer.get("exp")
            if isinstance(exp, int | float):
                until = min(until, now + (exp - time.time()))
        if principal is None:
            self._introspect_refused[key] = until
            if len(self._introspect_refused) > conf.cache_size:  # bounded: drop the oldest refusals
                self._introspect_refused.popitem(last=False)
            raise TokenRejected("inactive")
        self._introspect_refused.pop(key, None)
        self._introspected[key] = (until, principal)
        if len(self._introspected) > conf.cache_size:  # bounded: drop the oldest answers
            self._introspected.popitem(last=False)
        return principal


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _has_kid(keys: KeySet, kid: str | None) -> bool:
    if kid is None:
        return len(keys.keys) == 1
    return any(k.kid == kid for k in keys.keys)
