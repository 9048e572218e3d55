"""The flow-file format (parser and shipped schema agree), the report renderings, and the command line's
usage errors — no server needed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from junitparser import Failure, JUnitXml, Skipped

from mcp_stateless.audit import FlowError, flow_schema, load_flow, parse_flow, report_schema, to_junit, to_markdown

HERE = Path(__file__).resolve().parent
EXE = str(Path(sys.executable).with_name("mcp-stateless"))


@pytest.mark.parametrize("path", sorted((HERE / "flows").iterdir()), ids=lambda p: p.name)
def test_shipped_flows_parse_and_match_the_schema(path: Path) -> None:
    flow = load_flow(path)
    raw = yaml.safe_load(path.read_text()) if path.suffix == ".yaml" else json.loads(path.read_text())
    jsonschema.validate(raw, flow_schema())
    assert flow.name == raw["name"] and len(flow.steps) == len(raw["steps"])


BAD: list[tuple[Any, str]] = [
    ({"steps": []}, "1 to 50 steps"),
    ({"name": "x", "steps": [{"call": "a", "save": {"h": "id"}}, {"call": "b", "arguments": {"h": "{g}"}}]},
     "step 2: uses ['g'] before a step saved it"),
    ({"name": "x", "steps": [{"call": "a", "restart": "all"}]}, "exactly one of"),
    ({"name": "x", "steps": [{"restart": "sometimes"}]}, "restart is `all` or `last`"),
    ({"name": "x", "steps": [{"call": "a", "expect": "maybe"}]}, "expect is ok, error"),
    ({"name": "x", "steps": [{"call": "a", "drop_after": 0.2, "expect": "ok"}]}, "no outcome to expect"),
    ({"name": "x", "steps": [{"sleep": 99}]}, "sleep is a number of seconds from 0 to 30"),
    ({"name": "x", "steps": [{"call": "a", "retries": 3}]}, "unknown keys ['retries']"),
    ({"name": "no spaces", "steps": [{"call": "a"}]}, "name is 1–40 letters"),
]


@pytest.mark.parametrize(("data", "message"), BAD, ids=[m for _, m in BAD])
def test_a_bad_flow_is_refused_by_parser_and_schema(data: Any, message: str) -> None:
    with pytest.raises(FlowError) as e:
        parse_flow(data, "bad.json")
    assert message in str(e.value) and str(e.value).startswith("bad.json")
    if "before a step saved it" not in message:  # a reference to an unsaved value is beyond JSON Schema
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(data, flow_schema())


def test_flow_file_errors_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text("{not json")
    with pytest.raises(FlowError, match=r"f\.json: not JSON"):
        load_flow(tmp_path / "f.json")
    with pytest.raises(FlowError, match=r"missing\.yaml: No such file"):
        load_flow(tmp_path / "missing.yaml")


def _report() -> dict[str, Any]:
    ev = {"request": {"http": "POST", "instance": 1, "body": '{"id":1}'},
          "response": {"status": 200, "body": '{"result":{}}'}}
    checks = [
        {"id": "era", "step": 1, "title": "Era", "status": "pass", "finding": "modern", "evidence": [ev], "fix": "",
         "seconds": 0.1},
        {"id": "flow.cart.instances", "step": 4, "title": "Flow | cart", "status": "fail",
         "finding": "add_to_cart failed: no such cart", "evidence": [ev], "fix": "Keep carts in shared state.",
         "seconds": 0.5},
        {"id": "stdio.cancel", "step": "stdio", "title": "stdio", "status": "skip", "finding": "skipped: stdio only",
         "evidence": [], "fix": "", "seconds": 0.0},
    ]
    rep = {"target": {"kind": "http", "description": "srv × 3", "instances": 3, "era": "modern",
                      "versions": ["2026-07-28"]},
           "summary": {"pass": 1, "fail": 1, "warn": 0, "skip": 1, "seconds": 0.6, "ok": False},
           "tools": {"called": [{"name": "status", "arguments": {}, "calls": 3, "instances": [1, 2],
                                 "checks": ["stateless.history", "mrtr.instances"]},
                                {"name": "add_to_cart", "arguments": {"cart": "c1", "sku": "x|y"}, "calls": 1,
                                 "instances": [3], "checks": ["flow.cart.instances"]}],
                     "skipped": [{"name": "drop_table", "reason": "its name suggests deletion ('drop' in "
                                  "'drop_table') (name it with --call-tool to call it)"}],
                     "answers": [{"answer": "elicitation decline", "count": 4}]},
           "checks": checks}
    jsonschema.validate(rep, report_schema())
    return rep


def test_markdown_lists_every_check_and_the_fix_of_each_failure() -> None:
    md = to_markdown(_report())
    assert md.startswith("### mcp-stateless audit found problems\n")
    assert "| ❌ | `flow.cart.instances` | step 4 (hidden state) | add_to_cart failed: no such cart |" in md
    assert "| ⏭️ | `stdio.cancel` | stdio test | skipped: stdio only |" in md
    assert "#### `flow.cart.instances` — Flow \\| cart" in md and "**Fix:** Keep carts in shared state." in md


def test_markdown_lists_every_tool_called_with_its_arguments_and_every_tool_skipped() -> None:
    md = to_markdown(_report())
    assert "| `status` | `{}` | 3 | 1, 2 | stateless.history, mrtr.instances |" in md
    assert '| `add_to_cart` | `{"cart": "c1", "sku": "x\\|y"}` | 1 | 3 | flow.cart.instances |' in md
    assert ("| `drop_table` | its name suggests deletion ('drop' in 'drop_table') (name it with --call-tool to "
            "call it) |") in md
    assert "Answers given to the server's questions: elicitation decline × 4." in md


def test_junit_carries_the_tools_as_suite_properties(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text(to_junit(_report()))
    suite = next(iter(JUnitXml.fromfile(str(path))))
    props = [(p.name, p.value) for p in suite.properties()]
    assert props == [
        ("tool.called", "status {} × 3 on instances 1, 2 (stateless.history, mrtr.instances)"),
        ("tool.called", 'add_to_cart {"cart": "c1", "sku": "x|y"} × 1 on instance 3 (flow.cart.instances)'),
        ("tool.skipped", "drop_table: its name suggests deletion ('drop' in 'drop_table') (name it with "
                         "--call-tool to call it)"),
        ("tool.answered", "elicitation decline × 4"),
    ]


def test_junit_is_read_by_a_junit_parser(tmp_path: Path) -> None:
    path = tmp_path / "r.xml"
    path.write_text(to_junit(_report()))
    suite = next(iter(JUnitXml.fromfile(str(path))))
    assert (suite.tests, suite.failures, suite.skipped) == (3, 1, 1)
    cases = {c.name: c for c in suite}
    failure = cases["flow.cart.instances"].result[0]
    assert isinstance(failure, Failure) and failure.message == "add_to_cart failed: no such cart"
    assert "Fix: Keep carts in shared state." in (failure.text or "")
    assert isinstance(cases["stdio.cancel"].result[0], Skipped) and cases["era"].result == []


def test_the_schema_refuses_a_report_without_a_step() -> None:
    rep = _report()
    del rep["checks"][0]["step"]
    with pytest.raises(jsonschema.ValidationError, match="'step' is a required property"):
        jsonschema.validate(rep, report_schema())


@pytest.mark.slow
@pytest.mark.parametrize(("args", "message"), [
    ([], "give URLs, or --launch COMMAND, or --stdio COMMAND (exactly one)"),
    (["http://127.0.0.1:1/mcp", "--stdio", "x"], "exactly one"),
    (["--launch", "python server.py"], 'needs "{port}" in the command'),
    (["--launch", "x {port}", "--instances", "0"], "--instances must be between 1 and 16"),
    (["ftp://host/mcp"], "not an http(s) URL"),
    (["--stdio", "x", "--principal", "alice"], "--principal takes NAME=TOKEN"),
    (["--stdio", "x", "--task-tool", "job={oops"], "the arguments are not JSON"),
    (["--stdio", "x", "--flow", "/nonexistent/flow.yaml"], "/nonexistent/flow.yaml: No such file"),
])
def test_usage_errors_exit_2_with_one_line(args: list[str], message: str) -> None:
    p = subprocess.run([EXE, "audit", *args], capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and message in p.stderr and p.stdout == ""


@pytest.mark.slow
def test_an_unreachable_target_fails_the_era_check_and_exits_1(tmp_path: Path) -> None:
    from services import free_port

    out = tmp_path / "r.json"
    p = subprocess.run([EXE, "audit", f"http://127.0.0.1:{free_port()}/mcp", "--json", str(out), "--quiet"],
                       capture_output=True, text=True, timeout=60)
    rep = json.loads(out.read_text())
    jsonschema.validate(rep, report_schema())
    assert p.returncode == 1
    era = rep["checks"][0]
    assert era["id"] == "era" and era["status"] == "fail" and "cannot connect" in era["finding"]
    assert {c["status"] for c in rep["checks"][1:]} == {"skip"}


@pytest.mark.slow
def test_a_launch_command_that_dies_is_a_usage_error_with_its_output(tmp_path: Path) -> None:
    p = subprocess.run([EXE, "audit", "--launch", f"{sys.executable} -c \"import sys; print('boom'); sys.exit(3)\" "
                        "{port}", "--instances", "2"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "exited with status 3" in p.stderr and "boom" in p.stderr


def test_the_flows_in_docs_audit_md_are_the_tested_ones() -> None:
    """docs/audit.md shows flow files from tests/audit/flows; they must stay the same text."""
    import re

    doc = (HERE.parents[1] / "docs" / "audit.md").read_text()
    blocks = re.findall(r"```yaml\n(name: .*?)```", doc, re.S)
    assert len(blocks) == 2
    for block in blocks:
        flow = parse_flow(yaml.safe_load(block), "docs/audit.md")
        shipped = (HERE / "flows" / f"{flow.name}.yaml").read_text()
        assert block.strip() in shipped
