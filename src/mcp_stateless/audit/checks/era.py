"""Step 1 and 2 of the guide: which era the server speaks (and, for a dual-era server, that the legacy leg
works); the era probe also fills the profile every later check reads."""

from __future__ import annotations

import json
from typing import Any

from ...protocol.card import BRIDGE_META_KEY, SUFFIX
from ...protocol.errors import UNSUPPORTED_PROTOCOL_VERSION
from ...protocol.versions import LATEST
from ..engine import Check, Context, Outcome
from ..legacy_session import initialize_request, request, session
from ..legacy_session import list_all as legacy_list
from ..targets import HttpTarget
from ..wire import Exchange, all_pages, comparable, modern

MIGRATE = (
    "Migrating to 2026-07-28: accept the per-request envelope (_meta protocolVersion + clientCapabilities on every "
    "request, -32602 when missing), implement server/discover, put resultType on every result, move session-backed "
    "data behind explicit handles, turn server→client requests into MRTR input_required results, replace the GET "
    "stream and resources/subscribe with subscriptions/listen, and answer GET/DELETE with 405. Keep initialize "
    "behind a legacy branch if 2025 clients must keep working (a dual-era server)."
)


async def legacy_probe(ctx: Context) -> tuple[Exchange, dict[str, Any] | None]:
    """An `initialize` on a connection (or process) of its own; the result when the server took it. On HTTP
    the session it opened is deleted again."""
    t = ctx.target
    msg = initialize_request()
    if t.kind == "http":
        ex = await t.send(msg, instance=0, mirror=False, timeout=ctx.options.call_timeout)
        sid = ex.response_headers.get("mcp-session-id")
        if sid:
            await t.send(None, instance=0, http_method="DELETE", headers={"mcp-session-id": sid}, timeout=5)
    else:
        async with t.lane() as lane:
            ex = await lane.send(msg, timeout=5)
    res = ex.result
    ok = res is not None and isinstance(res.get("protocolVersion"), str)
    return ex, res if ok else None


async def legacy_profile(ctx: Context) -> None:
    """What a 2025-only server offers, read inside a 2025 session: the legacy profile's checks need its
    capabilities and tools as the modern ones need discover's."""
    p = ctx.profile
    async with session(ctx, 0) as s:
        if not s.opened:
            return
        p.capabilities = s.capabilities
        p.legacy_sessions = bool(s.session_id) if ctx.target.kind == "http" else None
        p.legacy_get_stream = s.keeps_stream
        info = (s.init.result or {}).get("serverInfo")
        p.server_info = info if isinstance(info, dict) else {}
        if "tools" in p.capabilities:
            p.tools, _ = await legacy_list(s, "tools/list", "tools")


async def list_all(ctx: Context, method: str, key: str, *, instance: int | None = 0) -> tuple[list[Any], Exchange]:
    """Every page of a list method (at most PAGES_MAX pages)."""
    return await all_pages(lambda cursor: ctx.target.send(modern(method, {"cursor": cursor} if cursor else {}),
                                                          instance=instance, timeout=ctx.options.call_timeout), key)


async def bridged(ctx: Context) -> dict[str, Any] | None:
    """What the target fronts when it is an mcp-stateless bridge (its Server Card says so), else None: the
    report then tells state the upstream keeps from what the bridge does."""
    t = ctx.target
    if not isinstance(t, HttpTarget):
        return None
    ex = await t.get(SUFFIX, timeout=ctx.options.call_timeout)
    try:
        card = json.loads(ex.body) if ex.status == 200 else None
    except ValueError:
        return None
    fronts = ((card or {}).get("_meta") or {}).get(BRIDGE_META_KEY) if isinstance(card, dict) else None
    return fronts if isinstance(fronts, dict) else None


async def era(ctx: Context) -> Outcome:
    t, p = ctx.target, ctx.profile
    disc = await t.send(modern("server/discover"), instance=0, timeout=ctx.options.call_timeout)
    res = disc.result
    is_modern = res is not None and isinstance(res.get("supportedVersions"), list)
    if res is not None and is_modern:
        p.versions = [v for v in res["supportedVersions"] if isinstance(v, str)]
        caps = res.get("capabilities")
        p.capabilities = caps if isinstance(caps, dict) else {}
        info = (res.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo")
        p.server_info = info if isinstance(info, dict) else {}
    elif disc.error_code == UNSUPPORTED_PROTOCOL_VERSION:
        is_modern = True
        p.versions = list((disc.error or {}).get("data", {}).get("supported") or [])
    legacy, lres = await legacy_probe(ctx)
    if is_modern and lres is not None:
        p.era = "dual"
    elif is_modern:
        p.era = "modern"
    elif lres is not None:
        p.era = "legacy"
    if p.era in ("modern", "dual"):
        p.tools, _ = await list_all(ctx, "tools/list", "tools")
        p.fronts = await bridged(ctx)
    if p.era == "legacy":
        await legacy_profile(ctx)
        info = (lres or {}).get("serverInfo") or {}
        return Outcome("fail", f"legacy-only server ({info.get('name', '?')}): it answers initialize "
                               f"({(lres or {}).get('protocolVersion')}) and not server/discover "
                               f"({disc.outcome()}), so no 2026-07-28 client can use it",
                       [disc, legacy], MIGRATE)
    if p.era == "unknown":
        return Outcome("fail", f"neither era answered: server/discover gave {disc.outcome()}, initialize gave "
                               f"{legacy.outcome()}", [disc, legacy],
                       "Serve MCP at this URL (check the path, e.g. /mcp) or command.")
    if LATEST not in p.versions:
        return Outcome("fail", f"modern server without {LATEST}: it supports {p.versions}", [disc],
                       f"Add {LATEST} to the supported versions.")
    if p.era == "dual":
        return Outcome("pass", f"dual-era: {LATEST} per request, and {lres and lres.get('protocolVersion')} "
                               "after initialize", [disc, legacy])
    return Outcome("pass", f"modern-only {LATEST} server; initialize is refused ({legacy.outcome()})",
                   [disc, legacy])


async def legacy_leg(ctx: Context) -> Outcome:
    """A dual-era server's legacy branch: initialize, then tools/list inside that session."""
    if ctx.profile.era != "dual":
        return Outcome("skip", "skipped: not a dual-era server")
    async with session(ctx, 0) as s:
        first = s.init
        listed = await s.send(request("tools/list")) if s.opened else s.init
    tools = (listed.result or {}).get("tools")
    if not isinstance(tools, list):
        return Outcome("fail", f"initialize succeeded but tools/list in that session gave {listed.outcome()}",
                       [first, listed], "Serve the methods a legacy session negotiated after initialize.")
    names = sorted(x.get("name", "") for x in tools)
    modern_names = sorted(x.get("name", "") for x in ctx.profile.tools)
    if names != modern_names:
        return Outcome("warn", f"the legacy leg lists other tools than the modern one: {names} vs {modern_names}",
                       [listed])
    return Outcome("pass", f"legacy session works: initialize then tools/list ({len(names)} tools)",
                   [first, listed])


def _missing(res: dict[str, Any]) -> list[str]:
    out = []
    if res.get("resultType") != "complete":
        out.append(f"resultType is {res.get('resultType')!r}, not 'complete'")
    if LATEST not in (res.get("supportedVersions") or []):
        out.append(f"supportedVersions lacks {LATEST}")
    if not isinstance(res.get("capabilities"), dict):
        out.append("capabilities is not an object")
    ttl = res.get("ttlMs")
    if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
        out.append("ttlMs (required, integer ≥ 0) is missing or invalid")
    if res.get("cacheScope") not in ("public", "private"):
        out.append("cacheScope (required, public|private) is missing or invalid")
    return out


async def discover(ctx: Context) -> Outcome:
    ex = await ctx.target.send(modern("server/discover"), timeout=ctx.options.call_timeout)
    res = ex.result
    if res is None:
        return Outcome("fail", f"server/discover gave {ex.outcome()}", [ex], "Implement server/discover.")
    problems = _missing(res)
    if problems:
        return Outcome("fail", "server/discover result: " + "; ".join(problems), [ex],
                       "Return resultType 'complete', supportedVersions, capabilities, ttlMs and cacheScope.")
    if comparable(res) is None:
        return Outcome("fail", "empty discover result", [ex])
    return Outcome("pass", f"server/discover: versions {res['supportedVersions']}, capabilities "
                           f"{sorted(res['capabilities'])}", [ex])


CHECKS = (
    Check("era", 1, "Era: server/discover and the legacy initialize probe", era, needs=frozenset()),
    Check("era.legacy-leg", 1, "Dual-era: the legacy branch still serves 2025 clients", legacy_leg),
    Check("discover", 2, "server/discover advertises versions, capabilities and cache hints", discover),
)
