"""`mcp-stateless inventory`: a static analysis of a 2025-era MCP server's source tree (never imported, never run).

It lists every place the code relies on earlier traffic or on one process's memory, each with the migration step
it belongs to and its replacement in the stateless model. Python sources are read with `ast`, TypeScript and
JavaScript with tree-sitter; each analyzer turns one file into `Finding`s of the kinds in `kinds.py`.
"""

from .engine import Inventory, inventory
from .finding import Finding
from .kinds import KINDS, Kind

__all__ = ["KINDS", "Finding", "Inventory", "Kind", "inventory"]
