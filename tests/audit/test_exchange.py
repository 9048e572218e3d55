"""The era probe reads a JSON-RPC error in any status: a 2025 server's 400 to a request without a session
carries an error whose id is null (JSON-RPC 2.0 §5: the id could not be read), and that is still a JSON-RPC
response, not "HTTP 400 without a JSON-RPC response"."""

from __future__ import annotations

from mcp_stateless.audit.wire import Exchange, modern


def test_an_error_with_id_null_in_a_400_is_the_response() -> None:
    body = {"jsonrpc": "2.0", "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"},
            "id": None}
    ex = Exchange(modern("server/discover"), status=400, messages=[body])
    assert ex.response == body
    assert ex.error_code == -32000
    assert ex.outcome() == "error -32000 'Bad Request: No valid session ID provided'"


def test_a_result_or_error_for_another_id_is_still_not_the_response() -> None:
    req = modern("server/discover")
    other = {"jsonrpc": "2.0", "error": {"code": -32600, "message": "x"}, "id": f"{req['id']}-other"}
    ex = Exchange(req, status=400, messages=[other, {"jsonrpc": "2.0", "result": {}, "id": None}])
    assert ex.response is None
    assert ex.outcome() == "HTTP 400 without a JSON-RPC response"
