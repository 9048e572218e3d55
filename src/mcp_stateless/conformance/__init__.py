"""Checking MCP traffic against the specification: the official wire schema, shipped with the package.

Nothing here is imported by the runtime; `jsonschema` loads only when a message is first validated.
"""

from .card import card_schema, card_violations
from .schema import (
    NOTIFICATION_DEFS,
    RESPONSE_DEFS,
    SCHEMA_VERSION,
    SchemaViolation,
    schema_document,
    server_message_violations,
    validate_as,
    validate_server_message,
    violations,
)

__all__ = [
    "NOTIFICATION_DEFS",
    "RESPONSE_DEFS",
    "SCHEMA_VERSION",
    "SchemaViolation",
    "card_schema",
    "card_violations",
    "schema_document",
    "server_message_violations",
    "validate_as",
    "validate_server_message",
    "violations",
]
