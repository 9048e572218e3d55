"""The packaged wire-schema validator: valid messages pass, each kind of mistake is named exactly."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from mcp_stateless.conformance import schema

TEXT_RESULT: dict[str, Any] = {"jsonrpc": "2.0", "id": 1,
                               "result": {"resultType": "complete", "content": [{"type": "text", "text": "hi"}]}}


def test_the_official_schema_ships_with_the_package() -> None:
    doc = schema.schema_document()
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for definition in [*schema.RESPONSE_DEFS.values(), *schema.NOTIFICATION_DEFS.values()]:
        assert definition in doc["$defs"], definition


def test_a_valid_result_passes_and_a_wrong_one_names_the_problem() -> None:
    schema.validate_server_message(TEXT_RESULT, "tools/call")
    bad = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hi"}]}}  # no resultType
    with pytest.raises(schema.SchemaViolation) as e:
        schema.validate_server_message(bad, "tools/call")
    assert e.value.definition == "CallToolResultResponse"
    assert e.value.problems == [f"result: {bad['result']!r} is not valid under any of the given schemas"]
    assert str(e.value).startswith("message is not a valid CallToolResultResponse: result: ")
    # the generic result shape is checked too, and alone when the method is unknown
    assert schema.server_message_violations(bad) == [
        ("JSONRPCResultResponse", ["result: 'resultType' is a required property"])]


def test_errors_notifications_and_requests() -> None:
    err = {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "bad"}}
    schema.validate_server_message(err)
    assert schema.server_message_violations({**err, "result": {}}) == [
        ("JSONRPCErrorResponse", ["an error response must not carry a result"])]
    assert schema.server_message_violations({"jsonrpc": "2.0", "id": 4, "method": "sampling/createMessage"}) == [
        ("JSONRPCNotification", ["the server must not send requests"])]
    assert schema.server_message_violations({"jsonrpc": "2.0", "method": "notifications/nope"}) == [
        ("JSONRPCNotification", ["unknown notification method 'notifications/nope'"])]
    schema.validate_server_message({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t"}}
    [(definition, problems)] = schema.server_message_violations(progress)
    assert definition == "ProgressNotification" and any("progress" in p for p in problems), problems
    assert schema.server_message_violations([TEXT_RESULT]) == [
        ("JSONRPCMessage", ["expected a JSON object, got list"])]


def test_unknown_definition_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="NoSuchThing"):
        schema.violations({}, "NoSuchThing")


@pytest.mark.slow
def test_jsonschema_loads_only_when_a_message_is_validated() -> None:
    code = (
        "import sys\n"
        "from mcp_stateless.conformance import schema\n"
        "assert 'jsonschema' not in sys.modules\n"
        "schema.schema_document()\n"
        "assert 'jsonschema' not in sys.modules\n"
        "schema.validate_as({'jsonrpc': '2.0', 'method': 'notifications/tools/list_changed'},"
        " 'ToolListChangedNotification')\n"
        "assert 'jsonschema' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
