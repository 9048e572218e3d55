"""Validation of a Server Card (SEP-2127) against its JSON schema (package data:
`schemas/server-card-v1.json`, from the experimental Server Card extension). `jsonschema` loads on
first use."""

from __future__ import annotations

import functools
import json
from importlib.resources import files
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jsonschema

_MAX_REPORTED = 5


@functools.cache
def card_schema() -> dict[str, Any]:
    """The Server Card schema, parsed once."""
    text = files(__package__).joinpath("schemas", "server-card-v1.json").read_text(encoding="utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    import jsonschema

    # The schema document only defines types; a card is its `ServerCard` definition.
    root = {**card_schema(), "$ref": "#/$defs/ServerCard"}
    return jsonschema.Draft202012Validator(root, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def card_violations(document: Any) -> list[str]:
    """What is wrong with `document` as a Server Card (at most five problems, by location); [] if valid."""
    errors = sorted(_validator().iter_errors(document), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors[:_MAX_REPORTED]]


__all__ = ["card_schema", "card_violations"]
