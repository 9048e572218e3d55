"""The inventory's report formats: a migration plan for the terminal, JSON, Markdown and SARIF 2.1.0."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from .engine import Inventory
from .finding import Finding
from .kinds import KINDS, STEP_TITLES

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _by_step(findings: list[Finding]) -> dict[int, list[Finding]]:
    """The findings by step; within a step the application's findings first, then the grouped transport glue."""
    out: dict[int, list[Finding]] = {}
    for f in sorted(findings, key=lambda f: (f.step, bool(f.covers), f.file, f.line)):
        out.setdefault(f.step, []).append(f)
    return out


def summary(inv: Inventory) -> dict[str, Any]:
    return {
        "files": inv.files,
        "lines": inv.lines,
        "findings": len(inv.findings),
        "byKind": dict(sorted(Counter(f.kind for f in inv.findings).items())),
        "byStep": {str(k): v for k, v in sorted(Counter(f.step for f in inv.findings).items())},
    }


def _json_finding(f: Finding) -> dict[str, Any]:
    out: dict[str, Any] = {"file": f.file, "line": f.line, "column": f.column, "kind": f.kind, "step": f.step,
                           "title": f.rule.title, "message": f.message, "excerpt": f.excerpt, "fix": f.fix}
    if f.covers:  # a grouped finding: what it stands for, each with its own line, kind and code
        out |= {"count": f.count, "lines": f.lines,
                "covers": [{"line": c.line, "column": c.column, "kind": c.kind, "message": c.message,
                            "excerpt": c.excerpt} for c in f.covers]}
    return out


def to_json(inv: Inventory) -> str:
    return json.dumps({
        "root": inv.root,
        "summary": summary(inv),
        "notes": inv.notes,
        "complete": not inv.not_analysed,
        "notAnalysed": inv.not_analysed,
        "findings": [_json_finding(f) for f in inv.findings],
    }, indent=2)


def to_text(inv: Inventory) -> str:
    lines = [f"Inventory of {inv.root}: {len(inv.findings)} finding(s) in {inv.files} file(s), {inv.lines} lines"]
    lines += [f"note: {n}" for n in inv.notes]
    lines += [f"NOT ANALYSED: {n}" for n in inv.not_analysed]
    for step, group in _by_step(inv.findings).items():
        lines.append("")
        lines.append(f"Step {step}. {STEP_TITLES[step]}")
        for kind in dict.fromkeys(f.kind for f in group):  # in order of first appearance
            lines.append(f"  [{kind}] {KINDS[kind].title}")
            lines.append(f"    fix: {KINDS[kind].fix}")
            for f in group:
                if f.kind == kind:
                    lines.append(f"    {f.file}:{f.line}:{f.column}  {f.message}")
                    lines.append(f"        {f.excerpt}")
    if inv.not_analysed:  # what was not read may hold every finding: never call that clean
        lines.append("")
        lines.append(f"Incomplete: {len(inv.findings)} finding(s) in what was analysed; the rest was not analysed.")
    elif not inv.findings:
        lines.append("No hidden-state dependency found.")
    return "\n".join(lines) + "\n"


def to_markdown(inv: Inventory) -> str:
    out = [f"# Inventory of `{inv.root}`", "",
           f"{len(inv.findings)} finding(s) in {inv.files} file(s), {inv.lines} lines.", ""]
    out += [f"> {n}" for n in inv.notes]
    out += [f"> **Not analysed** (the inventory is incomplete): {n}" for n in inv.not_analysed]
    for step, group in _by_step(inv.findings).items():
        out += [f"## Step {step}. {STEP_TITLES[step]}", ""]
        for kind in dict.fromkeys(f.kind for f in group):
            out += [f"### `{kind}`: {KINDS[kind].title}", "", f"Fix: {KINDS[kind].fix}", ""]
            out += [f"- `{f.file}:{f.line}` {f.message}: `{f.excerpt.replace('`', chr(39))}`"
                    for f in group if f.kind == kind]
            out.append("")
    return "\n".join(out)


def _sarif_location(f: Finding) -> dict[str, Any]:
    return {"physicalLocation": {
        "artifactLocation": {"uri": f.file, "uriBaseId": "SRCROOT"},
        "region": {"startLine": f.line, "startColumn": f.column, "snippet": {"text": f.excerpt}}}}


def to_sarif(inv: Inventory, version: str) -> str:
    kind_ids = sorted(KINDS)  # every finding's kind is one of them
    index = {k: i for i, k in enumerate(kind_ids)}
    rules = [{"id": k, "name": k.title().replace("-", ""),
              "shortDescription": {"text": KINDS[k].title},
              "fullDescription": {"text": KINDS[k].title},
              "help": {"text": KINDS[k].fix, "markdown": KINDS[k].fix},
              "properties": {"step": KINDS[k].step, "stepTitle": STEP_TITLES[KINDS[k].step]}}
             for k in kind_ids]
    results = []
    for f in inv.findings:
        digest = hashlib.sha256(f"{f.kind}\0{f.file}\0{f.excerpt}".encode()).hexdigest()[:32]
        result: dict[str, Any] = {
            "ruleId": f.kind, "ruleIndex": index[f.kind], "level": "warning",
            "message": {"text": f"{f.message}. Fix: {f.fix}"},
            "locations": [_sarif_location(f)],
            # Our own key: GitHub derives its primaryLocationLineHash itself and would misread one we computed.
            "partialFingerprints": {"mcpStatelessFinding/v1": digest},
        }
        if f.covers:  # a grouped finding: each line it stands for, as a related location
            result["relatedLocations"] = [_sarif_location(c) | {"id": i, "message": {"text": f"{c.kind}: {c.message}"}}
                                          for i, c in enumerate(f.covers)]
        results.append(result)
    return json.dumps({
        "$schema": SARIF_SCHEMA, "version": "2.1.0",
        "runs": [{"tool": {"driver": {"name": "mcp-stateless inventory", "version": version,
                                      "rules": rules}},
                  # a run that could not analyse part of the tree did not succeed, whatever it found
                  "invocations": [{"executionSuccessful": not inv.not_analysed,
                                   "toolExecutionNotifications": [
                                       {"level": "error", "message": {"text": f"not analysed: {n}"}}
                                       for n in inv.not_analysed]}],
                  "results": results}],
    }, indent=2)
