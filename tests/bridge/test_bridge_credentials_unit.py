"""bridge/credentials.py in process: how a forwarding bridge tells callers apart by the `Authorization` they
send (the CLI tests drive it end to end in subprocesses, where a mutation run cannot see it)."""

from __future__ import annotations

import hashlib

import pytest

from mcp_stateless.bridge import credentials
from mcp_stateless.bridge.credentials import CREDENTIAL_CLAIM, ForwardedCredentials, credential_of
from mcp_stateless.protocol.principal import ANONYMOUS, Credentials, Principal


async def test_a_caller_is_the_digest_of_its_authorization_and_keeps_it_to_forward() -> None:
    auth = ForwardedCredentials()
    got = await auth.authenticate(Credentials("http", {"authorization": "Bearer tok-A"}))
    assert isinstance(got, Principal)
    assert got.id == "credential:" + hashlib.sha256(b"Bearer tok-A").hexdigest()[:32]
    assert dict(got.claims) == {CREDENTIAL_CLAIM: "Bearer tok-A"}
    assert credential_of(got) == "Bearer tok-A"
    assert got.scopes == frozenset() and got.expires_at is None
    again = await auth.authenticate(Credentials("http", {"authorization": "Bearer tok-A"}))
    assert again is got  # the same caller, handed out again
    other = await auth.authenticate(Credentials("http", {"authorization": "Bearer tok-B"}))
    assert isinstance(other, Principal) and other.id != got.id and credential_of(other) == "Bearer tok-B"


async def test_no_authorization_or_a_stdio_caller_is_anonymous_and_forwards_nothing() -> None:
    auth = ForwardedCredentials()
    assert await auth.authenticate(Credentials("http", {})) is ANONYMOUS
    assert await auth.authenticate(Credentials("http", {"authorization": ""})) is ANONYMOUS
    assert await auth.authenticate(Credentials("stdio", {"authorization": "Bearer tok-A"})) is ANONYMOUS
    assert credential_of(ANONYMOUS) is None
    assert credential_of(Principal("p", claims={CREDENTIAL_CLAIM: 7})) is None  # only a string is a credential


async def test_the_known_callers_are_bounded_and_start_afresh_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(credentials, "KNOWN", 3)
    auth = ForwardedCredentials()
    first = [await auth.authenticate(Credentials("http", {"authorization": f"Bearer {i}"})) for i in range(3)]
    assert len(auth._known) == 3
    fourth = await auth.authenticate(Credentials("http", {"authorization": "Bearer 3"}))
    assert list(auth._known) == ["Bearer 3"]  # cleared, then the new caller kept
    again = await auth.authenticate(Credentials("http", {"authorization": "Bearer 0"}))
    assert isinstance(first[0], Principal) and isinstance(again, Principal)
    assert again is not first[0] and again.id == first[0].id
    assert isinstance(fourth, Principal) and len(auth._known) == 2
