"""Transport glue: a module's wiring of the 2025 SDK's transports (a map of them by session id, its lookups, the
session id reads that route to it) is one grouped finding per module, with its count and lines, after the
application's findings of its step, in every report format; a session-keyed map of application data is not glue."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_stateless.inventory import report
from mcp_stateless.inventory.engine import inventory
from mcp_stateless.inventory.finding import Finding
from mcp_stateless.inventory.glue import fold, matches
from mcp_stateless.inventory.kinds import TRANSPORT_GLUE

from .markers import expected, expected_glue

FIXTURES = Path(__file__).parent / "fixtures"
TS = FIXTURES / "typescript" / "transport_glue.ts"
PY = FIXTURES / "python" / "transport_glue_lowlevel.py"
# (fixture, the map's line, the lines the group stands for, the application finding)
GLUE = {
    "ts": (TS, 21, [26, 28, 29, 32, 34, 38, 39, 51, 52, 59], ("transport_glue.ts", 15, "module-state")),
    "py": (PY, 14, [25, 27, 30, 37, 43], ("transport_glue_lowlevel.py", 19, "module-state")),
}


@pytest.mark.parametrize("which", sorted(GLUE))
def test_the_wiring_is_one_finding_with_its_count_and_lines_after_the_application(which: str) -> None:
    case, line, lines, app = GLUE[which]
    inv = inventory(case)
    [group] = [f for f in inv.findings if f.covers]
    assert (group.file, group.line, group.kind, group.step) == (case.name, line, TRANSPORT_GLUE, 7)
    assert group.count == len(expected_glue(case)) == {"ts": 11, "py": 6}[which]
    assert group.lines == lines
    assert {(c.file, c.line, c.kind) for c in group.covers} == expected_glue(case)
    assert f"{group.count} findings of that wiring" in group.message
    assert group.message.endswith("at lines " + ", ".join(map(str, lines)))
    # the migration plan's order: every ordinary finding (the application's first) before the group
    order = [f for step in report._by_step(inv.findings).values() for f in step]
    assert order[-1] == group and (order[0].file, order[0].line, order[0].kind) == app
    text, markdown = report.to_text(inv), report.to_markdown(inv)
    for out in (text, markdown):
        assert out.index(f"{case.name}:{app[1]}") < out.index(f"{case.name}:{line}") and group.message in out
    assert f"{len(inv.findings)} finding(s)" in text and len(inv.findings) == len(expected(case))


@pytest.mark.parametrize("which", sorted(GLUE))
def test_json_and_sarif_keep_every_line_the_group_stands_for(which: str) -> None:
    case, line, lines, _ = GLUE[which]
    inv = inventory(case)
    [doc] = [f for f in json.loads(report.to_json(inv))["findings"] if f["kind"] == TRANSPORT_GLUE]
    assert (doc["line"], doc["step"], doc["count"], doc["lines"]) == (line, 7, len(expected_glue(case)), lines)
    assert {(case.name, c["line"], c["kind"]) for c in doc["covers"]} == expected_glue(case)
    assert all(c["excerpt"] and c["message"] for c in doc["covers"])
    [result] = [r for r in json.loads(report.to_sarif(inv, "0"))["runs"][0]["results"]
                if r["ruleId"] == TRANSPORT_GLUE]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == line
    related = [(r["physicalLocation"]["region"]["startLine"], r["message"]["text"].split(":")[0])
               for r in result["relatedLocations"]]
    assert {(case.name, n, kind) for n, kind in related} == expected_glue(case)
    assert [r["id"] for r in result["relatedLocations"]] == list(range(len(related)))


def test_an_ordinary_finding_keeps_its_json_shape() -> None:
    [doc] = [f for f in json.loads(report.to_json(inventory(TS)))["findings"] if f["kind"] == "module-state"]
    assert set(doc) == {"file", "line", "column", "kind", "step", "title", "message", "excerpt", "fix"}


@pytest.mark.parametrize("case", [FIXTURES / "typescript" / "session_map_app_data",
                                  FIXTURES / "python" / "session_map_app_data.py"], ids=["ts", "py"])
def test_a_session_map_of_application_data_beside_a_transport_is_not_glue(case: Path) -> None:
    inv = inventory(case)
    assert [f for f in inv.findings if f.covers or f.kind == TRANSPORT_GLUE] == []
    assert {(f.file, f.line, f.kind) for f in inv.findings} == expected(case)
    assert "session-keyed-state" in {f.kind for f in inv.findings}


def test_a_comment_at_the_map_silences_the_group_and_one_at_a_line_drops_that_line(tmp_path: Path) -> None:
    lines = TS.read_text().splitlines(keepends=True)
    silenced = tmp_path / "silenced.ts"
    silenced.write_text("".join([*lines[:20], "// mcp-stateless: ignore[transport-session-map]\n", *lines[20:]]))
    inv = inventory(silenced)
    assert {(f.line, f.kind) for f in inv.findings} == {(15, "module-state"), (51, "get-stream")}
    one_less = tmp_path / "one_less.ts"  # the GET handler's header read (line 51) silenced: 10 left
    one_less.write_text("".join([*lines[:50], "  // mcp-stateless: ignore[session-id-read]\n", *lines[50:]]))
    [group] = [f for f in inventory(one_less).findings if f.covers]
    assert (group.count, group.lines) == (10, [26, 28, 29, 32, 34, 38, 39, 53, 60])


def test_a_kind_filter_sees_the_group_through_the_kinds_it_stands_for() -> None:
    assert [f.kind for f in inventory(TS, kinds={"session-keyed-state"}).findings] == [TRANSPORT_GLUE]
    assert [f.kind for f in inventory(TS, kinds={TRANSPORT_GLUE}).findings] == [TRANSPORT_GLUE]
    assert [f.kind for f in inventory(TS, kinds={"module-state"}).findings] == ["module-state"]


def test_a_transport_map_with_no_session_key_is_no_group(tmp_path: Path) -> None:
    (tmp_path / "named.ts").write_text(
        'import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";\n'
        "const transports = new Map();\n"
        "export function open(name: string) {\n"
        "  transports.set(name, new StreamableHTTPServerTransport({ sessionIdGenerator: undefined }));\n"
        "}\n")
    assert [(f.line, f.kind, f.covers) for f in inventory(tmp_path).findings] == [(4, "module-state", ())]


def test_fold_groups_only_under_an_anchor_of_the_same_module() -> None:
    def f(file: str, line: int, kind: str, glue: bool = False) -> Finding:
        return Finding(file, line, 1, kind, "m", "x", transport_glue=glue)
    folded = fold([f("a.ts", 3, TRANSPORT_GLUE), f("a.ts", 5, "session-id-read", True),
                   f("a.ts", 6, "module-state"), f("b.ts", 2, "session-keyed-state", True),
                   f("c.ts", 1, TRANSPORT_GLUE)])
    assert [(x.file, x.line, x.kind, x.count, x.transport_glue) for x in folded] == [
        ("a.ts", 3, TRANSPORT_GLUE, 1, False), ("a.ts", 6, "module-state", 1, False),
        ("b.ts", 2, "session-keyed-state", 1, False)]
    assert folded[0].message == "m: 1 finding of that wiring (1 session-id-read) at line 5"
    assert matches(folded[0], {"session-id-read"}) and not matches(folded[0], {"session-keyed-state"})

