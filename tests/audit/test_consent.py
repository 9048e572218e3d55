"""The auditor never consents on a user's behalf. `confirm_wipe.py` deletes its data file on an accepted
elicitation (`wipe`) or on any model answer to its sampling request (`tidy_up`); audited on three instances,
with every MRTR check driving the rounds, the data is still there afterwards and the server only ever heard
decline. `wipe` reads like a deletion, so it is skipped (and the report says why) unless `--call-tool` names
it; an answer given with `--answer` is the one exception, and it is honoured."""

from __future__ import annotations

from pathlib import Path

import pytest
from auditlib import KEYS, assert_clean, audit, serve

pytestmark = pytest.mark.slow

APP = "tests/audit/servers/confirm_wipe.py:app"


def _run(tmp: Path, *args: str) -> tuple[int, dict[str, object], list[str], Path]:
    log, data = tmp / "answers.log", tmp / "data.txt"
    data.write_text("precious")
    cmd = serve(APP, state=f"sqlite:///{tmp / 's.db'}")
    rc, rep, _ = audit(["--launch", cmd, "--instances", "3", *args], tmp,
                       {"WIPE_LOG": str(log), "WIPE_DATA": str(data), "MCP_STATELESS_KEYS": KEYS})
    return rc, rep, log.read_text().splitlines() if log.exists() else [], data


def test_a_tool_named_like_a_deletion_is_skipped_and_sampling_is_declined(tmp_path: Path) -> None:
    rc, rep, answers, data = _run(tmp_path)
    assert data.read_text() == "precious"
    assert answers == []  # wipe never called; tidy_up never got a model answer to act on
    tools = rep["tools"]
    assert {"name": "wipe", "reason": "its name suggests deletion ('wipe' in 'wipe') (name it with --call-tool "
            "to call it)"} in tools["skipped"]
    called = {c["name"]: c for c in tools["called"]}
    assert "wipe" not in called and set(called) == {"status", "tidy_up"}
    assert called["tidy_up"]["arguments"] == {} and called["tidy_up"]["calls"] >= 2
    # The sampling question was asked and left unanswered, never answered with a made-up model reply.
    kinds = {a["answer"] for a in tools["answers"]}
    assert kinds == {"sampling declined (left unanswered)"}, tools["answers"]
    assert_clean(rc, rep)


def test_a_named_tool_is_called_and_its_elicitation_declined(tmp_path: Path) -> None:
    rc, rep, answers, data = _run(tmp_path, "--call-tool", "wipe")
    assert data.read_text() == "precious"
    assert answers and set(answers) == {"decline"}, answers
    called = {c["name"]: c for c in rep["tools"]["called"]}
    assert called["wipe"]["arguments"] == {} and "mrtr.instances" in called["wipe"]["checks"]
    assert "wipe" not in {s["name"] for s in rep["tools"]["skipped"]}
    # Every answer the report counts is a decline; the server logged fewer (a tampered-state retry is
    # refused before the tool runs).
    [given] = [a for a in rep["tools"]["answers"] if a["answer"].startswith("elicitation")]
    assert given["answer"] == "elicitation decline" and given["count"] >= len(answers)
    mrtr = {c["id"]: c["status"] for c in rep["checks"] if c["id"].startswith("mrtr.")}
    assert mrtr["mrtr.instances"] == "pass" and mrtr["mrtr.restart"] == "pass", rep["checks"]
    assert_clean(rc, rep)  # a declined round still exercises everything the checks need


def test_an_answer_given_on_the_command_line_is_the_one_sent(tmp_path: Path) -> None:
    """The exception proves the rule: the user, not the auditor, consented."""
    rc, rep, answers, data = _run(tmp_path, "--call-tool", "wipe", "--only", "mrtr.instances",
                                  "--answer", 'elicitation={"action": "accept", "content": {"confirm": true}}')
    assert not data.exists()
    assert "accept" in answers and "decline" not in answers, answers
    assert [a["answer"] for a in rep["tools"]["answers"]] == ["elicitation accept"]
    assert rc == 0
