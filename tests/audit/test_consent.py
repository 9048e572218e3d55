"""The auditor never consents on a user's behalf: a server that deletes everything on an accepted elicitation
is audited (on three instances, every MRTR check driving the tool's rounds), and the only answer it ever got
is decline (it was accept, with the form filled in)."""

from __future__ import annotations

from pathlib import Path

import pytest
from auditlib import KEYS, assert_clean, audit, serve


@pytest.mark.slow
def test_the_auditor_declines_an_elicitation_that_would_delete_everything(tmp_path: Path) -> None:
    log = tmp_path / "answers.log"
    cmd = serve("tests/audit/servers/confirm_wipe.py:app", state=f"sqlite:///{tmp_path / 's.db'}")
    rc, rep, _ = audit(["--launch", cmd, "--instances", "3"], tmp_path,
                       {"WIPE_LOG": str(log), "MCP_STATELESS_KEYS": KEYS})
    answers = log.read_text().splitlines()
    assert answers and set(answers) == {"decline"}, answers
    mrtr = {c["id"]: c["status"] for c in rep["checks"] if c["id"].startswith("mrtr.")}
    assert mrtr["mrtr.instances"] == "pass" and mrtr["mrtr.restart"] == "pass", rep["checks"]
    assert_clean(rc, rep)  # a declined round still exercises everything the checks need
