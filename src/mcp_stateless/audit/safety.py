"""Which tools the auditor may call on its own: safe by default. A tool that needs arguments, is declared
destructive, must run as a task, was excluded, or whose name or description says it deletes something is
left alone unless an option names it (`--call-tool`, `--read-tool`, `--mrtr-tool`, `--task-tool`,
`--listen-trigger`, or a flow). A probe stands for "unrelated earlier calls"; it must never be the call that
empties a team's test database."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

# Verbs (and the nouns of their acts) whose tools the auditor does not call unasked. Each is matched as a
# whole word, in the listed forms only ("eras" is the plural of era, not a form of erase).
_STEMS = {
    "delete": ("delete", "deletes", "deleted", "deleting", "deletion", "del"),
    "remove": ("remove", "removes", "removed", "removing", "removal", "rm"),
    "drop": ("drop", "drops", "dropped", "dropping"),
    "destroy": ("destroy", "destroys", "destroyed", "destroying", "destruction"),
    "purge": ("purge", "purges", "purged", "purging"),
    "reset": ("reset", "resets", "resetting"),
    "wipe": ("wipe", "wipes", "wiped", "wiping"),
    "kill": ("kill", "kills", "killed", "killing"),
    "erase": ("erase", "erases", "erased", "erasing"),
    "clear": ("clear", "clears", "cleared", "clearing"),
    "truncate": ("truncate", "truncates", "truncated", "truncating"),
    "empty": ("empty", "empties", "emptied", "emptying"),
    "flush": ("flush", "flushes", "flushed", "flushing"),
    "revoke": ("revoke", "revokes", "revoked", "revoking"),
    "terminate": ("terminate", "terminates", "terminated", "terminating"),
    "uninstall": ("uninstall", "uninstalls", "uninstalled", "uninstalling"),
    "unlink": ("unlink", "unlinks", "unlinked", "unlinking"),
    "shutdown": ("shutdown", "shutdowns"),
    "nuke": ("nuke", "nukes", "nuked", "nuking"),
}
DELETION_WORDS: dict[str, str] = {form: verb for verb, forms in _STEMS.items() for form in forms}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"[A-Za-z]+")


def _words(text: str) -> list[str]:
    """`deleteAll_items-now` → delete, all, items, now."""
    return [w.lower() for part in _WORD.findall(text) for w in _CAMEL.split(part) if w]


def deletion_word(tool: Mapping[str, Any]) -> str | None:
    """Why a tool reads as one that deletes: a deletion word in its name (any word of it), or as the verb
    its description begins with (its first word, after an adverb such as "Permanently"); else None. The
    description is read only at its start because a description mentions deletion in passing far more
    often than it names the tool's purpose there ("Adds or removes a tool" toggles, it does not delete)."""
    name = str(tool.get("name", ""))
    for w in _words(name):
        if w in DELETION_WORDS:
            return f"its name suggests deletion ({w!r} in {name!r})"
    head = _words(str(tool.get("description") or ""))[:2]
    if head and head[0].endswith("ly") and len(head) > 1:
        head = head[1:]
    if head and head[0] in DELETION_WORDS:
        return f"its description suggests deletion (it begins {head[0]!r})"
    return None


def skip_reason(tool: Mapping[str, Any], *, named: Collection[str], exclude: Collection[str]) -> str | None:
    """Why the auditor will not call `tool` with no arguments on its own, or None when it may. `named`: the
    tools an option named, which lifts the deletion and destructiveHint rules (never the others)."""
    name = tool.get("name")
    if name in exclude:
        return "excluded (--exclude-tool)"
    schema = tool.get("inputSchema") or {}
    required = schema.get("required") if isinstance(schema, dict) else None
    if required:
        return f"it requires arguments ({', '.join(map(str, required))})"
    if ((tool.get("execution") or {}).get("taskSupport")) == "required":
        return "it runs only as a task (taskSupport: required)"
    if name in named:
        return None
    if (tool.get("annotations") or {}).get("destructiveHint") is True:
        return "it is annotated destructiveHint: true (name it with --call-tool to call it)"
    why = deletion_word(tool)
    if why is not None:
        return f"{why} (name it with --call-tool to call it)"
    return None


__all__ = ["DELETION_WORDS", "deletion_word", "skip_reason"]
