"""The terminal report at 80 columns: a heading line per check, its finding on lines of its own below (wrapped
at the width, a long word folded, nothing cut off), the fix of each failure, the tools called and skipped."""

from __future__ import annotations

import io
import re
from typing import Any

from rich.cells import cell_len
from rich.console import Console

from mcp_stateless.cli.audit import render

LONG = ("a read-only tool's answer depends on the instance or the process: after calling bump (on instance 1), "
        "count answers {\"n\":1} on instance 1; {\"n\":0} on instance 2 | a restart of every instance changed "
        "what count answers (instance 1: {\"n\":1} before, {\"n\":0} after)")
TOKEN = "http://127.0.0.1:43125/mcp?" + "x" * 120  # one word longer than the line: folded, not cut


def _check(id_: str, step: Any, status: str, finding: str, fix: str = "") -> dict[str, Any]:
    return {"id": id_, "step": step, "title": id_, "status": status, "finding": finding, "evidence": [],
            "fix": fix, "seconds": 0.1}


def _report() -> dict[str, Any]:
    checks = [
        _check("era", 1, "pass", "dual-era: 2026-07-28 per request, and 2025-11-25 after initialize"),
        _check("results.read-tools", 4, "fail", LONG, "Keep what a tool's result reads in a store every instance "
               "shares and that outlives a process (SQLite on a shared volume, Redis, a database)."),
        _check("flow.a-rather-long-flow-name-for-a-check.instances", "broken-stream", "warn", f"no answer: {TOKEN}"),
        _check("stdio.cancel", "stdio", "skip", "skipped: stdio only (use --stdio)"),
    ]
    return {"target": {"kind": "http", "description": "http://127.0.0.1:40001/mcp → mcp-stateless serve "
                       "tests/audit/servers/counter.py:app --http 127.0.0.1:{port} × 2 (launched, round-robin proxy)",
                       "instances": 2, "era": "dual", "versions": ["2026-07-28"]},
            "summary": {"pass": 1, "fail": 1, "warn": 1, "skip": 1, "seconds": 3.2, "ok": False},
            "tools": {"called": [{"name": "count", "arguments": {"where": "a value long enough to need wrapping"
                                                                 " at eighty columns"}, "calls": 8,
                                  "instances": [1, 2], "checks": ["results.read-tools", "stateless.capabilities"]}],
                      "skipped": [{"name": "wipe", "reason": "its name suggests deletion ('wipe' in 'wipe') (name "
                                                             "it with --call-tool to call it)"}],
                      "answers": [{"answer": "elicitation decline", "count": 3}]},
            "checks": checks}


def _render(width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None, force_terminal=False)
    render(console, _report())
    return [line.rstrip() for line in console.export_text().splitlines()]


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_no_line_is_wider_than_80_columns_and_every_finding_is_whole() -> None:
    lines = _render(80)
    assert max(cell_len(line) for line in lines) <= 80
    joined = _squeezed("".join(lines))
    for c in _report()["checks"]:
        assert _squeezed(c["finding"]) in joined, c["id"]  # nothing elided or cut off, only wrapped
    assert _squeezed(_report()["checks"][1]["fix"]) in joined
    assert "…" not in "".join(lines)


def test_each_finding_starts_on_a_line_of_its_own_under_its_check() -> None:
    lines = _render(80)
    for c in _report()["checks"]:
        [at] = [n for n, line in enumerate(lines) if line.startswith(f"{c['status'].upper():<5} {c['id']}")]
        assert c["finding"][:20] not in lines[at]
        assert lines[at + 1].startswith("      " + c["finding"][:10]), (lines[at], lines[at + 1])


def test_the_tools_called_and_skipped_close_the_report() -> None:
    text = _squeezed("".join(_render(80)))
    assert _squeezed('called: count {"where": "a value long enough to need wrapping at eighty columns"} × 8 on '
                     "instances 1, 2 (results.read-tools, stateless.capabilities)") in text
    assert _squeezed("skipped: wipe: its name suggests deletion ('wipe' in 'wipe') (name it with --call-tool to "
                     "call it)") in text
    assert _squeezed("answered: elicitation decline × 3") in text


def test_a_wide_terminal_keeps_a_finding_on_one_line() -> None:
    lines = _render(400)
    assert "      " + LONG in lines
