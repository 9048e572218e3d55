"""A 2025-era stdio server (official Python SDK `mcp` 1.30.0, FastMCP) whose one tool is slow and counts its
runs, so a test can kill what is between the caller and it mid-call and tell whether the call ran again.

    <mcp 1.30.0 venv python> counted_slow.py

Tool: `slow {ledger, seconds}` appends `started PID` to the file `ledger` the moment it runs, sleeps
`seconds`, appends `finished PID` and returns `slept in PID`. The ledger's `started` lines are the number of
times the upstream ran the call; the PID tells which process (so which bridge instance) ran it.
"""

import os

import anyio
from mcp.server.fastmcp import FastMCP

server = FastMCP("counted-slow")


def note(ledger: str, what: str) -> None:
    with open(ledger, "a") as f:
        f.write(f"{what} {os.getpid()}\n")


@server.tool()
async def slow(ledger: str, seconds: float) -> str:
    """Note the run in `ledger`, sleep `seconds`, note its end."""
    note(ledger, "started")
    await anyio.sleep(seconds)
    note(ledger, "finished")
    return f"slept in {os.getpid()}"


if __name__ == "__main__":
    server.run("stdio")
