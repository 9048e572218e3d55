"""The audit report: one JSON object (`target`, `summary`, `checks`; its schema ships as
`report.schema.json`), a Markdown rendering for a pull-request comment, and JUnit XML for CI."""

from __future__ import annotations

import json
from dataclasses import asdict
from importlib import resources
from typing import Any
from xml.etree import ElementTree as ET

from .engine import Profile, Result
from .plan import INVENTORY, migration_plan, plan_lines
from .targets import Target

STEP_NAMES = {
    1: "envelope", 2: "discover", 3: "results", 4: "hidden state", 5: "MRTR", 6: "listen", 7: "HTTP routing",
    8: "failure behaviour", 9: "authentication", "balancer": "balancer test", "stdio": "stdio test",
    "restart": "restart test", "broken-stream": "broken-stream test",
}


def report(target: Target, profile: Profile, results: list[Result], seconds: float,
           tools: dict[str, Any] | None = None) -> dict[str, Any]:
    """`tools`: what the audit did to the server's tools (`called`, `skipped`, `answers`)."""
    counts = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "warn", "skip")}
    t: dict[str, Any] = {"kind": target.kind, "description": target.description, "instances": target.instances,
                         "era": profile.era, "versions": profile.versions}
    if target.url:
        t["url"] = target.url
    if profile.server_info:
        t["serverInfo"] = profile.server_info
    if profile.fronts is not None:
        t["bridge"] = profile.fronts
    rep: dict[str, Any] = {
        "target": t, "summary": {**counts, "seconds": round(seconds, 3), "ok": counts["fail"] == 0},
        "tools": {"called": [], "skipped": [], "answers": [], **(tools or {})},
        "checks": [_check(r) for r in results]}
    steps = migration_plan(profile, results)
    if steps:
        rep["migrationPlan"] = steps
    return rep


def _check(r: Result) -> dict[str, Any]:
    out = asdict(r)
    attributed = out.pop("attributed_to")
    if attributed is not None:
        out["attributedTo"] = attributed
    return out


def call_line(c: dict[str, Any]) -> str:
    """`status {} × 6 on instances 1, 2, 3 (stateless.history, mrtr.instances)`."""
    args = json.dumps(c["arguments"], ensure_ascii=False, separators=(", ", ": "))
    where = ", ".join(map(str, c["instances"]))
    checks = f" ({', '.join(c['checks'])})" if c["checks"] else ""
    return f"{c['name']} {args} × {c['calls']} on instance{'s' if len(c['instances']) > 1 else ''} {where}{checks}"


def tool_lines(rep: dict[str, Any]) -> list[str]:
    """The report's `tools` as plain lines: what was called with what, what was skipped and why, and
    every answer given to the server's questions."""
    t = rep.get("tools") or {}
    out = [f"called: {call_line(c)}" for c in t.get("called", [])]
    out += [f"skipped: {s['name']}: {s['reason']}" for s in t.get("skipped", [])]
    out += [f"answered: {a['answer']} × {a['count']}" for a in t.get("answers", [])]
    return out or ["no tool called"]


def report_schema() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(resources.files(__package__).joinpath("report.schema.json").read_text())
    return data


def step_label(step: Any) -> str:
    return f"step {step} ({STEP_NAMES[step]})" if isinstance(step, int) else STEP_NAMES.get(step, str(step))


_ICON = {"pass": "✅", "fail": "❌", "warn": "⚠️", "skip": "⏭️"}


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(rep: dict[str, Any]) -> str:
    s, t = rep["summary"], rep["target"]
    head = "passed" if s["ok"] else "found problems"
    lines = [f"### mcp-stateless audit {head}", "",
             f"`{_md(t['description'])}` — era **{t['era']}**, {t['instances']} instance(s); "
             f"{s['pass']} passed, {s['fail']} failed, {s['warn']} warnings, {s['skip']} skipped in {s['seconds']} s",
             "", "| | check | where | finding |", "|---|---|---|---|"]
    for c in rep["checks"]:
        lines.append(f"| {_ICON[c['status']]} | `{c['id']}` | {step_label(c['step'])} | {_md(c['finding'])} |")
    tools = rep.get("tools") or {}
    lines += ["", "#### Tools", ""]
    if tools.get("called"):
        lines += ["| called | arguments | calls | instances | by |", "|---|---|---|---|---|"]
        for c in tools["called"]:
            lines.append(f"| `{_md(c['name'])}` | `{_md(json.dumps(c['arguments'], ensure_ascii=False))}` | "
                         f"{c['calls']} | {', '.join(map(str, c['instances']))} | {_md(', '.join(c['checks']))} |")
    else:
        lines.append("No tool was called.")
    if tools.get("skipped"):
        lines += ["", "| skipped | why |", "|---|---|"]
        lines += [f"| `{_md(s['name'])}` | {_md(s['reason'])} |" for s in tools["skipped"]]
    if tools.get("answers"):
        lines += ["", "Answers given to the server's questions: "
                  + ", ".join(f"{_md(a['answer'])} × {a['count']}" for a in tools["answers"]) + "."]
    if rep.get("migrationPlan"):
        lines += ["", "#### Migration plan", ""]
        for item in rep["migrationPlan"]:
            # A bullet, not "6. …": Markdown renumbers an ordered list from 1, and the step number is the point.
            lines.append(f"- **Step {item['step']}. {_md(item['title'])}**: " + "; ".join(_md(w) for w in item["why"]))
        lines += ["", INVENTORY[0].upper() + INVENTORY[1:] + "."]
    failing = [c for c in rep["checks"] if c["status"] in ("fail", "warn") and (c["fix"] or c["evidence"])]
    for c in failing:
        lines += ["", f"#### `{c['id']}` — {_md(c['title'])}", "", c["finding"]]
        if c["fix"]:
            lines += ["", f"**Fix:** {c['fix']}"]
        if c["evidence"]:
            lines += ["", "<details><summary>evidence</summary>", "", "```json",
                      json.dumps(c["evidence"][:3], indent=2, ensure_ascii=False), "```", "</details>"]
    return "\n".join(lines) + "\n"


def to_junit(rep: dict[str, Any]) -> str:
    s = rep["summary"]
    suites = ET.Element("testsuites", name="mcp-stateless audit")
    suite = ET.SubElement(suites, "testsuite", name=rep["target"]["description"], tests=str(len(rep["checks"])),
                          failures=str(s["fail"]), errors="0", skipped=str(s["skip"]), time=str(s["seconds"]))
    # What the audit did to the server's tools, as suite properties (a CI viewer shows them with the run).
    props = ET.SubElement(suite, "properties")
    for line in tool_lines(rep):
        kind, _, value = line.partition(": ")
        ET.SubElement(props, "property", name=f"tool.{kind}" if value else "tool.none", value=value or line)
    for item in rep.get("migrationPlan") or []:
        ET.SubElement(props, "property", name=f"plan.step{item['step']}",
                      value=f"{item['title']}: " + "; ".join(item["why"]))
    for c in rep["checks"]:
        case = ET.SubElement(suite, "testcase", name=c["id"], classname=f"audit.{step_label(c['step'])}",
                             time=str(c["seconds"]))
        if c["status"] == "fail":
            node = ET.SubElement(case, "failure", message=c["finding"], type=str(c["step"]))
            node.text = f"{c['finding']}\n\nFix: {c['fix']}\n\nEvidence:\n{json.dumps(c['evidence'], indent=2)}"
        elif c["status"] == "skip":
            ET.SubElement(case, "skipped", message=c["finding"])
        else:
            out = ET.SubElement(case, "system-out")
            out.text = c["finding"]
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


__all__ = ["call_line", "plan_lines", "report", "report_schema", "step_label", "to_junit", "to_markdown", "tool_lines"]
