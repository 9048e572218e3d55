"""Which tools the auditor calls on its own: the deletion words of a name (any word of it, camelCase and
snake_case split) or of a description's leading verb, destructiveHint, required arguments, task-only tools and
--exclude-tool; a tool an option names is called despite a deletion word or destructiveHint, never despite
the rest."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_stateless.audit.safety import deletion_word, skip_reason


def tool(name: str, description: str = "", **extra: Any) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": {"type": "object"}, **extra}


@pytest.mark.parametrize(("t", "why"), [
    (tool("wipe"), "its name suggests deletion ('wipe' in 'wipe')"),
    (tool("deleteAllNotes"), "its name suggests deletion ('delete' in 'deleteAllNotes')"),
    (tool("drop_table"), "its name suggests deletion ('drop' in 'drop_table')"),
    (tool("cache-purge"), "its name suggests deletion ('purge' in 'cache-purge')"),
    (tool("factory_reset"), "its name suggests deletion ('reset' in 'factory_reset')"),
    (tool("KillProcess"), "its name suggests deletion ('kill' in 'KillProcess')"),
    (tool("rm"), "its name suggests deletion ('rm' in 'rm')"),
    (tool("tidy", "Removes every file in the workspace."), "its description suggests deletion (it begins 'removes')"),
    (tool("tidy", "Permanently destroys the index"), "its description suggests deletion (it begins 'destroys')"),
    (tool("housekeeping", "Empties the store once the user confirms."),
     "its description suggests deletion (it begins 'empties')"),
])
def test_a_deletion_word_is_found(t: dict[str, Any], why: str) -> None:
    assert deletion_word(t) == why


@pytest.mark.parametrize("t", [
    tool("test_trigger_tool_change", "Adds or removes test_dynamic_tool and notifies listen streams"),
    tool("toggle", "Add or remove the extra tool."),
    tool("list_eras", "The eras a server speaks"),
    tool("dropdown_options", "Options of a form"),
    tool("status", "Always fine."),
    tool("undelete_note"),
])
def test_a_word_in_passing_or_inside_another_word_is_not_a_deletion(t: dict[str, Any]) -> None:
    assert deletion_word(t) is None


def test_skip_reasons_in_order_and_what_naming_lifts() -> None:
    none: frozenset[str] = frozenset()
    assert skip_reason(tool("x"), named=none, exclude={"x"}) == "excluded (--exclude-tool)"
    needs = tool("wipe", inputSchema={"type": "object", "required": ["dir", "force"]})
    assert skip_reason(needs, named={"wipe"}, exclude=none) == "it requires arguments (dir, force)"
    task = tool("job", execution={"taskSupport": "required"})
    assert skip_reason(task, named={"job"}, exclude=none) == "it runs only as a task (taskSupport: required)"
    hinted = tool("sync", annotations={"destructiveHint": True})
    assert skip_reason(hinted, named=none, exclude=none) == (
        "it is annotated destructiveHint: true (name it with --call-tool to call it)")
    assert skip_reason(hinted, named={"sync"}, exclude=none) is None
    assert skip_reason(tool("wipe"), named={"wipe"}, exclude=none) is None
    assert skip_reason(tool("status"), named=none, exclude=none) is None
