"""The inventory on the two published npm servers, pinned and unpacked by scripts/inventory-servers.sh (built JS in
dist/, never imported, never run).

Every expected finding was checked by reading the server's code; each is true except the one marked FALSE (a
test-only reset of module state, not a handler writing it), kept so a change in what the analyzer reports is a
deliberate one. A transport module's wiring of the SDK's transports is one grouped finding; what it stands for is
held line by line too (_EVERYTHING_GLUE). The `tasks/get` and `tasks/result` requests are server-to-client
requests polling the client's task, counted as true server-request findings.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_stateless.inventory import report
from mcp_stateless.inventory.engine import inventory
from services import need

SERVERS = Path(__file__).resolve().parents[3] / ".cache" / "inventory-servers"

_EVERYTHING: dict[str, list[tuple[str, tuple[int, ...]]]] = {
    # a module map of the session's registered resources; `.remove()` of a registration at run time
    "dist/resources/session.js": [("per-connection-registration", (46,)), ("module-state", (47, 56))],
    # subscribe/unsubscribe handlers keeping session-id sets per URI; resources/updated from a 5 s interval;
    # the interval timers keyed by session id
    "dist/resources/subscriptions.js": [("resource-subscriptions", (27, 46)), ("session-id-read", (31, 50)),
                                        ("module-state", (42,)), ("unsolicited-notification", (82,)),
                                        ("session-keyed-state", (98, 102, 116, 117, 119))],
    # the logging capability (the SDK keeps each session's setLevel level); conditional tools registered in
    # oninitialized; the transport's session id read there
    "dist/server/index.js": [("log-level-state", (46,)), ("per-connection-registration", (73,)),
                             ("session-id-read", (77,))],
    # log messages from a 5 s interval; the interval timers keyed by session id
    "dist/server/logging.js": [("unsolicited-notification", (38,)),
                               ("session-keyed-state", (41, 45, 59, 60, 62))],
    # roots asked after initialize and on roots/list_changed, kept per session; log messages sent from there
    "dist/server/roots.js": [("initialize-state", (23,)), ("server-request", (31,)),
                             ("session-keyed-state", (34, 56, 63)), ("unsolicited-notification", (36, 43))],
    "dist/tools/get-roots-list.js": [("initialize-state", (34,)), ("per-connection-registration", (38,)),
                                     ("session-id-read", (40,))],
    # a resource registered from inside a tool call
    "dist/tools/gzip-file-as-resource.js": [("per-connection-registration", (72,))],
    # task state in a module map (another instance cannot resolve the task)
    "dist/tools/simulate-research-query.js": [("initialize-state", (166,)), ("module-state", (199, 224))],
    "dist/tools/toggle-simulated-logging.js": [("session-id-read", (31,)), ("session-keyed-state", (33, 35, 40))],
    "dist/tools/toggle-subscriber-updates.js": [("session-id-read", (34,)), ("session-keyed-state", (36, 38, 43))],
    "dist/tools/trigger-elicitation-request-async.js": [("initialize-state", (35,)),
                                                        ("per-connection-registration", (41,)),
                                                        ("server-request", (79, 123, 162))],
    "dist/tools/trigger-elicitation-request.js": [("initialize-state", (35,)), ("per-connection-registration", (39,)),
                                                  ("server-request", (40,))],
    "dist/tools/trigger-sampling-request-async.js": [("initialize-state", (42,)),
                                                     ("per-connection-registration", (48,)),
                                                     ("server-request", (77, 123, 157))],
    "dist/tools/trigger-sampling-request.js": [("initialize-state", (39,)), ("per-connection-registration", (43,)),
                                               ("server-request", (65,))],
    # 63 FALSE: `__resetIssuedErrorPathElicitations`, a test-only reset; 116-124 a module set keyed by a string
    # built from the session id
    "dist/tools/trigger-url-elicitation.js": [("module-state", (63,)), ("initialize-state", (81,)),
                                              ("per-connection-registration", (85,)), ("session-id-read", (88,)),
                                              ("session-keyed-state", (116, 119, 124)), ("server-request", (135,))],
    # the HTTP+SSE transport; its map of transports by session id, one grouped finding (15, see _EVERYTHING_GLUE)
    "dist/transports/sse.js": [("transport-session-map", (15,)), ("get-stream", (28,))],
    # an event store class, used for resumability, Last-Event-ID read; the GET stream (112) and the DELETE that
    # ends a session (138) routed to the transport; the transports kept by session id, one grouped finding (39)
    "dist/transports/streamableHttp.js": [("event-replay", (7, 54, 57, 127)), ("transport-session-map", (39,)),
                                          ("get-stream", (112, 138))],
}
# What each transport module's grouped finding stands for, each line hand-checked true: the session ids read to
# find the session's transport (`req.query.sessionId`, the mcp-session-id header, `transport.sessionId`), the
# `sessionIdGenerator` of the transport that issues them (streamableHttp.js 56), and the map's gets, sets, has
# and deletes. 27 findings that were listed one by one before they were grouped.
_EVERYTHING_GLUE: dict[str, list[tuple[str, tuple[int, ...]]]] = {
    "dist/transports/sse.js": [("session-id-read", (21, 22, 24, 29, 32, 36, 46)),
                               ("session-keyed-state", (23, 29, 38, 48))],
    "dist/transports/streamableHttp.js": [("session-id-read", (45, 56, 67, 114, 139)),
                                          ("session-keyed-state", (47, 49, 62, 68, 70, 115, 134, 140, 153, 197, 198))],
}
_FILESYSTEM: dict[str, list[tuple[str, tuple[int, ...]]]] = {
    # the roots/list answer replaces the global allowed directories (578); roots asked on list_changed (590) and
    # after initialize (601, 604)
    "dist/index.js": [("client-answer-kept", (578,)), ("server-request", (590, 604)), ("initialize-state", (601,))],
    # lib's global allowed directories, replaced by setAllowedDirectories()
    "dist/lib.js": [("module-state", (13,))],
}


def _flat(table: dict[str, list[tuple[str, tuple[int, ...]]]]) -> set[tuple[str, int, str]]:
    return {(file, line, kind) for file, rows in table.items() for kind, lines in rows for line in lines}


EXPECTED = {"server-everything-2026.8.31": _flat(_EVERYTHING), "server-filesystem-2026.8.31": _flat(_FILESYSTEM)}
EXPECTED_GLUE = {"server-everything-2026.8.31": _flat(_EVERYTHING_GLUE), "server-filesystem-2026.8.31": set()}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_published_server_findings(name: str) -> None:
    root = SERVERS / name
    need(root, "the published npm servers (scripts/inventory-servers.sh)")
    inv = inventory(root)
    assert inv.notes == []
    assert {(f.file, f.line, f.kind) for f in inv.findings} == EXPECTED[name]
    assert {(c.file, c.line, c.kind) for f in inv.findings for c in f.covers} == EXPECTED_GLUE[name]


def test_server_everything_lists_its_transport_wiring_last_in_its_step() -> None:
    root = SERVERS / "server-everything-2026.8.31"
    need(root, "the published npm servers (scripts/inventory-servers.sh)")
    inv = inventory(root)
    groups = [(f.file, f.line, f.count) for f in inv.findings if f.covers]
    assert groups == [("dist/transports/sse.js", 15, 11), ("dist/transports/streamableHttp.js", 39, 16)]
    assert [(f.file, f.line, f.kind) for f in report._by_step(inv.findings)[7]] == [
        ("dist/transports/sse.js", 28, "get-stream"), ("dist/transports/streamableHttp.js", 112, "get-stream"),
        ("dist/transports/streamableHttp.js", 138, "get-stream"),
        ("dist/transports/sse.js", 15, "transport-session-map"),
        ("dist/transports/streamableHttp.js", 39, "transport-session-map")]
    assert len(inv.findings) == 78


def test_the_hand_check_is_at_least_90_percent_true() -> None:
    false = {("dist/tools/trigger-url-elicitation.js", 63, "module-state")}
    total = sum(len(v) for v in EXPECTED.values())  # a grouped finding counts once
    assert false <= EXPECTED["server-everything-2026.8.31"]
    assert (total - len(false)) / total >= 0.9
    assert total == 83
    assert sum(len(v) for v in EXPECTED_GLUE.values()) == 27
