"""The Host/Origin verdicts the HTTP edge keeps: each is what the policy says for that bind, Host and Origin
(a loopback bind and a public one answer the same headers differently), and a client inventing Host values
cannot grow them past their bound."""

from __future__ import annotations

from mcp_stateless.protocol.security import OriginPolicy
from mcp_stateless.transports.http import guards

LOOPBACK = {"server": ("127.0.0.1", 8000)}
PUBLIC = {"server": ("10.0.0.5", 8000)}


def test_each_verdict_is_the_policys_for_its_bind_host_and_origin() -> None:
    o = guards.Origins(None)
    cases = [
        (LOOPBACK, {"host": "127.0.0.1:8000"}, None),
        (LOOPBACK, {"host": "evil.example"}, "Host header is not allowed"),
        (PUBLIC, {"host": "evil.example"}, None),  # a public bind cannot know its names
        (LOOPBACK, {"host": "localhost:8000", "origin": "http://evil.example"}, "Origin is not allowed"),
        (PUBLIC, {"host": "api.example", "origin": "http://evil.example"}, "Origin is not allowed"),
        (LOOPBACK, {"host": "localhost:8000", "origin": "http://localhost:3000"}, None),
    ]
    for _ in range(2):  # the second pass answers from what the first one kept
        for scope, headers, why in cases:
            refused = o.refusal(scope, headers)
            assert (None if refused is None else refused.message) == why, (scope, headers)
            assert refused is None or refused.code == -32600


def test_a_configured_policy_is_used_whatever_the_bind() -> None:
    o = guards.Origins(OriginPolicy.loopback(extra_hosts=["api.example"]))
    assert o.refusal(PUBLIC, {"host": "api.example"}) is None
    refused = o.refusal(PUBLIC, {"host": "other.example"})
    assert refused is not None and refused.message == "Host header is not allowed"


def test_invented_hosts_keep_the_verdicts_bounded() -> None:
    o = guards.Origins(None)
    for n in range(3 * guards._VERDICTS_MAX):
        refused = o.refusal(LOOPBACK, {"host": f"h{n}.example"})
        assert refused is not None and refused.message == "Host header is not allowed"
        assert len(o._verdicts) <= guards._VERDICTS_MAX
    assert o.refusal(LOOPBACK, {"host": "127.0.0.1"}) is None
