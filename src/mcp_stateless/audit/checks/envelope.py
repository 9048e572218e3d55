"""Steps 1, 3 and 7 of the guide: the modern envelope ladder, era-correct results, and the Streamable HTTP
routing rules (mirrored headers, POST only, no protocol session)."""

from __future__ import annotations

from ...protocol.errors import HEADER_MISMATCH, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION
from ...protocol.meta import META_CLIENT_CAPABILITIES, META_SERVER_INFO
from ..engine import Check, Context, Outcome
from ..wire import Exchange, comparable, modern

BOGUS_VERSION = "2099-01-01"


def _refused(ex: Exchange, code: int, status: int, kind: str) -> str | None:
    """None when `ex` is the error `code` (with HTTP `status` over HTTP), else what came instead."""
    if ex.error_code != code:
        return f"{ex.outcome()} instead of {code}"
    if kind == "http" and ex.status != status:
        return f"error {code} with HTTP {ex.status} instead of {status}"
    return None


async def meta_required(ctx: Context) -> Outcome:
    t = ctx.target
    no_caps = modern("tools/list")
    del no_caps["params"]["_meta"][META_CLIENT_CAPABILITIES]
    no_meta = modern("tools/list")
    del no_meta["params"]["_meta"]
    a = await t.send(no_caps, timeout=ctx.options.call_timeout)
    # Without _meta the body names no version; the header still says which era this request is.
    b = await t.send(no_meta, headers={"mcp-protocol-version": "2026-07-28"}, timeout=ctx.options.call_timeout)
    problems = [f"{what}: {p}" for what, ex in (("without clientCapabilities", a), ("without _meta", b))
                if (p := _refused(ex, INVALID_PARAMS, 400, t.kind))]
    if problems:
        return Outcome("fail", "a request missing its envelope was not refused with -32602: " + "; ".join(problems),
                       [a, b], "Refuse a request whose params._meta lacks protocolVersion or clientCapabilities "
                               "with -32602 (HTTP 400); never fill them in from an earlier request.")
    return Outcome("pass", "missing protocolVersion/clientCapabilities refused with -32602", [a, b])


async def unsupported_version(ctx: Context) -> Outcome:
    ex = await ctx.target.send(modern("tools/list", version=BOGUS_VERSION), timeout=ctx.options.call_timeout)
    problem = _refused(ex, UNSUPPORTED_PROTOCOL_VERSION, 400, ctx.target.kind)
    data = (ex.error or {}).get("data") or {}
    if problem is None and not (isinstance(data.get("supported"), list) and data.get("requested") == BOGUS_VERSION):
        problem = f"-32022 without data.supported (a list) and data.requested={BOGUS_VERSION!r}: {data}"
    if problem:
        return Outcome("fail", f"an unsupported protocol version: {problem}", [ex],
                       "Answer an unknown version with -32022 (HTTP 400) and data {supported: [...], requested}.")
    return Outcome("pass", f"unsupported version refused with -32022, supported={data['supported']}", [ex])


async def result_type(ctx: Context) -> Outcome:
    t = ctx.target
    exs = [await t.send(modern(m), timeout=ctx.options.call_timeout) for m in ("server/discover", "tools/list")]
    bad = [f"{ex.request and ex.request['method']}: {ex.outcome()}" for ex in exs
           if (ex.result or {}).get("resultType") != "complete"]
    if bad:
        return Outcome("fail", "results without resultType 'complete': " + "; ".join(bad), exs,
                       "Put resultType: 'complete' on every final result (and 'input_required' on MRTR rounds).")
    if any(META_SERVER_INFO not in ((ex.result or {}).get("_meta") or {}) for ex in exs):
        return Outcome("warn", "resultType present, but results carry no _meta serverInfo (SHOULD)", exs)
    return Outcome("pass", "results carry resultType 'complete' and serverInfo", exs)


async def header_mismatch(ctx: Context) -> Outcome:
    t = ctx.target
    wrong = await t.send(modern("tools/list"), headers={"mcp-method": "prompts/list"},
                         timeout=ctx.options.call_timeout)
    missing = modern("tools/list")
    gone = await t.send(missing, headers={"mcp-protocol-version": None}, timeout=ctx.options.call_timeout)
    problems = [f"Mcp-Method disagreeing with the body: {p}"
                for p in [_refused(wrong, HEADER_MISMATCH, 400, "http")] if p]
    # A dual-era server may take a request without the header for a 2025-03-26 client's (its legacy branch
    # then refuses it); a modern-only one must refuse it as a mismatch.
    legacy_routed = ctx.profile.era == "dual" and gone.status == 400 and gone.result is None
    if not legacy_routed and (p := _refused(gone, HEADER_MISMATCH, 400, "http")):
        problems.append(f"no MCP-Protocol-Version header: {p}")
    if problems:
        return Outcome("fail", "headers that do not mirror the body were accepted: " + "; ".join(problems),
                       [wrong, gone], "Check MCP-Protocol-Version, Mcp-Method and Mcp-Name against the body on "
                                      "every POST and refuse a mismatch with -32020 (HTTP 400).")
    how = "left to the legacy branch, which refused it" if legacy_routed else "refused with -32020"
    return Outcome("pass", f"a header disagreeing with the body is refused with -32020; a missing one is {how}",
                   [wrong, gone])


async def post_only(ctx: Context) -> Outcome:
    t = ctx.target
    get = await t.send(None, http_method="GET", headers={"accept": "text/event-stream"}, timeout=5)
    delete = await t.send(None, http_method="DELETE", timeout=5)
    bad = [f"{ex.http_method} gave {ex.failure or ex.status}" for ex in (get, delete) if ex.status != 405]
    if bad and ctx.profile.era == "dual" and all(ex.status in (400, 404, 405) for ex in (get, delete)):
        return Outcome("pass", "GET/DELETE without a session are refused (dual-era: legacy sessions keep GET)",
                       [get, delete])
    if bad:
        return Outcome("fail", "the endpoint is not POST-only: " + "; ".join(bad), [get, delete],
                       "Answer GET and DELETE on a modern-only endpoint with 405 (Allow: POST); change events "
                       "move to subscriptions/listen.")
    return Outcome("pass", "GET and DELETE answered 405", [get, delete])


async def session_id(ctx: Context) -> Outcome:
    t = ctx.target
    plain = await t.send(modern("tools/list"), instance=0, timeout=ctx.options.call_timeout)
    bogus = await t.send(modern("tools/list"), instance=0, headers={"mcp-session-id": "audit-no-such-session"},
                         timeout=ctx.options.call_timeout)
    problems = []
    for ex in (plain, bogus):
        if "mcp-session-id" in ex.response_headers:
            problems.append(f"a modern response carried Mcp-Session-Id {ex.response_headers['mcp-session-id']!r}")
    if bogus.result is None:
        problems.append(f"a modern request with an unknown Mcp-Session-Id gave {bogus.outcome()}")
    elif comparable(bogus.result) != comparable(plain.result):
        problems.append("a modern request with an Mcp-Session-Id header got a different answer")
    if problems:
        return Outcome("fail", "; ".join(problems), [plain, bogus],
                       "Ignore Mcp-Session-Id on modern requests and never mint one: there is no protocol "
                       "session in 2026-07-28 (keep sessions for the legacy branch only).")
    return Outcome("pass", "Mcp-Session-Id ignored on modern requests and never minted", [plain, bogus])


HTTP = frozenset({"modern", "http"})
CHECKS = (
    Check("envelope.meta-required", 1, "A request without its _meta envelope is refused (-32602)", meta_required),
    Check("envelope.unsupported-version", 1, "An unsupported version is refused with -32022 and the supported list",
          unsupported_version),
    Check("envelope.result-type", 3, "Results carry resultType and serverInfo", result_type),
    Check("http.header-mismatch", 7, "Routing headers must mirror the body (-32020)", header_mismatch, needs=HTTP),
    Check("http.post-only", 7, "GET and DELETE answered 405", post_only, needs=HTTP),
    Check("http.session-id", 7, "Mcp-Session-Id ignored and never minted", session_id, needs=HTTP),
)
