"""The sans-IO inbound core (protocol/inbound.py): one id rule, one in-flight table, both eras."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_stateless.protocol.envelope import MethodTable, Notification, Rejection, Request
from mcp_stateless.protocol.inbound import Cancel, Inbound, InflightTable
from mcp_stateless.protocol.jsonrpc import as_request_id
from mcp_stateless.protocol.legacy import LegacyNotification, LegacyRequest, LegacyResponse

PV = "2026-07-28"
TABLE = MethodTable({"tools/call", "tools/list"})


def call(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": PV,
                                 "io.modelcontextprotocol/clientCapabilities": {}}}}


def cancel(rid: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


@pytest.mark.parametrize("value", [True, False, 1.0, 0.0, None, [1], {"a": 1}])
def test_not_an_id(value: Any) -> None:
    assert as_request_id(value) is None


@pytest.mark.parametrize("value", [0, 1, -7, 2**64, 10**40, "", "1", "true"])
def test_an_id(value: Any) -> None:
    got = as_request_id(value)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("not_an_id", [True, 1.0])
@pytest.mark.parametrize("legacy", [False, True])
def test_cancel_with_a_non_id_names_nothing(legacy: bool, not_an_id: Any) -> None:
    # `True == 1` and `1.0 == 1` hash alike: a plain dict would hand back request 1 for either
    core: Inbound[str] = Inbound(legacy=True) if legacy else Inbound(TABLE)
    first = core.receive(call(1))
    assert isinstance(first, LegacyRequest if legacy else Request) and first.id == 1
    core.inflight.start(1, "task-1")
    decision = core.receive(cancel(not_an_id))
    assert decision == Cancel(None, None)
    assert core.inflight.get(1) == "task-1" and len(core.inflight) == 1
    assert core.receive(cancel(1)) == Cancel(1, "task-1")
    assert len(core.inflight) == 0


@pytest.mark.parametrize("legacy", [False, True])
def test_ids_of_different_types_are_different_requests(legacy: bool) -> None:
    core: Inbound[str] = Inbound(legacy=True) if legacy else Inbound(TABLE)
    for rid in (1, "1", 2**64):
        assert not isinstance(core.receive(call(rid)), Rejection)
        core.inflight.start(rid, f"t{rid!r}")
    assert core.receive(cancel("1")) == Cancel("1", "t'1'")
    assert core.receive(cancel(2**64)) == Cancel(2**64, f"t{2**64!r}")
    assert core.inflight.get(1) == "t1"


@pytest.mark.parametrize("legacy", [False, True])
def test_an_id_already_in_flight_is_refused(legacy: bool) -> None:
    core: Inbound[str] = Inbound(legacy=True) if legacy else Inbound(TABLE)
    core.receive(call(7))
    core.inflight.start(7, "first")
    again = core.receive(call(7))
    assert isinstance(again, Rejection) and again.status == 400
    assert again.body() == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -32600, "message": "request id 7 is already in flight"}}
    # once cancelled, the id is free again; the first task finishing later does not drop the second
    core.receive(cancel(7))
    assert isinstance(core.receive(call(7)), Request | LegacyRequest)
    core.inflight.start(7, "second")
    assert core.inflight.finish(7, "first") is False
    assert core.inflight.get(7) == "second"
    assert core.inflight.finish(7, "second") is True and len(core.inflight) == 0


def test_kinds_per_era() -> None:
    modern: Inbound[str] = Inbound(TABLE)
    legacy: Inbound[str] = Inbound(legacy=True)
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    answer = {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert isinstance(modern.receive(note), Notification)
    assert isinstance(legacy.receive(note), LegacyNotification)
    refused = modern.receive(answer)
    assert isinstance(refused, Rejection) and refused.error is not None and refused.error.code == -32600
    assert legacy.receive(answer) == LegacyResponse(3, {}, None)
    for core in (modern, legacy):
        bad = core.receive([call(1)])
        assert isinstance(bad, Rejection) and bad.body() == {"jsonrpc": "2.0", "error": {
            "code": -32600, "message": "Batches are not supported"}}


def test_table_guards_its_keys() -> None:
    table: InflightTable[str] = InflightTable()
    table.start(1, "one")
    assert True not in table and 1.0 not in table and 1 in table
    assert table.cancel(True) is None and table.get(1.0) is None
    assert list(table) == ["one"]


def test_a_modern_connection_needs_the_method_table() -> None:
    with pytest.raises(ValueError, match=r"^a modern connection needs the endpoint's method table$"):
        Inbound()


def test_the_connection_honours_the_endpoints_versions_not_the_default() -> None:
    from mcp_stateless.protocol.versions import MODERN_VERSIONS

    core: Inbound[str] = Inbound(TABLE, versions=("2099-01-01",))
    got = core.receive(call(1))  # asks for MODERN_VERSIONS[0], which this endpoint does not support
    assert isinstance(got, Rejection) and (got.status, got.error.code) == (400, -32022)  # unsupported version
    assert PV in MODERN_VERSIONS
    assert isinstance(Inbound(TABLE).receive(call(1)), Request)
