"""`mcp-stateless inventory` run as a real subprocess on the fixtures: formats, exit statuses, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from services import need

# Every test here starts a process (a server, a client, a tool): the fast lane leaves them out.
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "inventory" / "fixtures" / "python"
SARIF_SCHEMA = Path(__file__).resolve().parents[2] / ".cache" / "sarif-schema" / "sarif-2.1.0-rtm.5.json"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcp_stateless.cli", "inventory", *args],
                          capture_output=True, text=True, timeout=60)


def test_json_report_shape_and_exit_zero_without_fail_on() -> None:
    r = _run(str(FIXTURES / "module_state_fastmcp3.py"), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == {"root", "complete", "notAnalysed", "summary", "notes", "findings"}
    assert (doc["complete"], doc["notAnalysed"]) == (True, [])  # a Python file: nothing needs the extra
    assert doc["summary"]["byKind"] == {"module-state": 1}
    assert doc["summary"]["byStep"] == {"4": 1}
    [f] = doc["findings"]
    assert (f["file"], f["line"], f["column"], f["kind"], f["step"]) == ("module_state_fastmcp3.py", 9, 5,
                                                                          "module-state", 4)
    assert f["excerpt"] == "history.append(thought)  # expect: module-state"
    assert set(f) == {"file", "line", "column", "kind", "step", "title", "message", "excerpt", "fix"}


def test_fail_on_a_present_kind_exits_1_and_on_an_absent_kind_exits_0() -> None:
    target = str(FIXTURES / "roots_kept_global.py")
    assert _run(target, "--fail-on", "client-answer-kept").returncode == 1
    assert _run(target, "--fail-on", "any").returncode == 1
    assert _run(target, "--fail-on", "event-replay").returncode == 0
    assert _run(str(FIXTURES / "clean_fastmcp_tools.py"), "--fail-on", "any").returncode == 0


def test_usage_errors_exit_2() -> None:
    assert _run(str(FIXTURES), "--fail-on", "no-such-kind").returncode == 2
    assert _run(str(FIXTURES / "absent")).returncode == 2


def test_kind_filter_and_output_file(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = _run(str(FIXTURES / "roots_kept_global.py"), "--json", "--kind", "server-request", "--output", str(out))
    assert r.returncode == 0 and r.stdout == ""
    assert [f["kind"] for f in json.loads(out.read_text())["findings"]] == ["server-request"]


def test_a_gate_on_a_kind_the_transport_glue_stands_for_still_fails() -> None:
    """The transports' session map is one grouped finding: `--fail-on session-keyed-state` must still see it."""
    target = str(FIXTURES.parent / "typescript" / "transport_glue.ts")
    assert _run(target, "--fail-on", "session-keyed-state").returncode == 1
    assert _run(target, "--fail-on", "transport-session-map").returncode == 1
    assert _run(target, "--fail-on", "local-file-state").returncode == 0
    doc = json.loads(_run(target, "--json", "--kind", "transport-session-map").stdout)
    [f] = doc["findings"]
    assert (f["line"], f["kind"], f["count"], f["lines"]) == (21, "transport-session-map", 11,
                                                              [26, 28, 29, 32, 34, 38, 39, 51, 52, 59])
    assert doc["summary"]["byKind"] == {"transport-session-map": 1}


def test_sarif_has_rules_results_and_fingerprints() -> None:
    r = _run(str(FIXTURES / "roots_kept_global.py"), "--sarif")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "mcp-stateless inventory"
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert [(res["ruleId"], res["locations"][0]["physicalLocation"]["region"]["startLine"]) for res in
            run["results"]] == [("server-request", 10), ("client-answer-kept", 11)]
    for res in run["results"]:
        assert rule_ids[res["ruleIndex"]] == res["ruleId"]
        assert len(res["partialFingerprints"]["mcpStatelessFinding/v1"]) == 32


def test_sarif_fingerprints_survive_lines_moving(tmp_path: Path) -> None:
    """Code scanning matches a finding across commits by its fingerprint: a line added above must not change it."""
    def fingerprints(path: Path) -> list[str]:
        doc = json.loads(_run(str(path), "--sarif").stdout)
        return [res["partialFingerprints"]["mcpStatelessFinding/v1"] for res in doc["runs"][0]["results"]]
    source = (FIXTURES / "roots_kept_global.py").read_text()
    moved = tmp_path / "roots_kept_global.py"
    moved.write_text("# a comment added above\n\n" + source)
    assert fingerprints(moved) == fingerprints(FIXTURES / "roots_kept_global.py") != []


def test_markdown_and_text_group_by_step() -> None:
    md = _run(str(FIXTURES / "roots_kept_global.py"), "--markdown").stdout
    assert md.index("## Step 5.") < md.index("`client-answer-kept`")
    text = _run(str(FIXTURES / "log_level_lowlevel.py")).stdout
    assert "Step 4. Remove hidden protocol state" in text and "[log-level-state]" in text


@pytest.mark.parametrize("target", ["roots_kept_global.py", "clean_fastmcp_tools.py", ".", "../typescript"])
def test_sarif_validates_against_the_sarif_2_1_0_schema(target: str) -> None:
    need(SARIF_SCHEMA, "the SARIF 2.1.0 schema (scripts/setup.sh)")
    schema = json.loads(SARIF_SCHEMA.read_text())
    doc = json.loads(_run(str(FIXTURES / target), "--sarif").stdout)
    errors = [e.message for e in jsonschema.Draft4Validator(schema).iter_errors(doc)]
    assert errors == []
    assert jsonschema.Draft4Validator(schema).is_valid({"version": "2.1.0", "runs": [{"tool": {}}]}) is False
