"""The `mcp-stateless` command line: one module per command group, each registering its subcommands.

`serve` (serve.py) runs an app over stdio or Streamable HTTP; `contract` (contract.py) prints its Server
Card; discover, tools, call, resources, read, prompts, prompt, listen and complete (client.py) and task
(task.py) talk to a server, with the token `login` (login.py) stored; audit (audit.py) checks one for
hidden state; install (install.py) registers an app with an MCP host; inventory (inventory.py) lists
hidden state in a legacy server's source. Each subcommand carries its `run(args) -> exit status`; `main`
only parses and dispatches, so adding a group (inventory, bridge) is
one module and one line below.
"""

from __future__ import annotations

import argparse
import sys

from . import audit, bridge, client, contract, install, inventory, login, serve, task
from .base import CliError, CommandGroup, Parser
from .config import ServeConfig

GROUPS: tuple[CommandGroup, ...] = (serve, bridge, contract, client, task, login, audit, install, inventory)


class _Version(argparse.Action):
    """`--version`, resolved only when asked (reading package metadata costs every other command time)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        import mcp_stateless

        print(f"mcp-stateless {mcp_stateless.__version__}")
        parser.exit(0)


def build_parser() -> Parser:
    p = Parser(
        prog="mcp-stateless",
        description="Serve an MCP (2026-07-28, stateless) application over Streamable HTTP or stdio.",
        epilog="Example: mcp-stateless serve examples/echo.py:app --http 127.0.0.1:8000",
    )
    p.add_argument("--version", action=_Version, nargs=0, help="print the installed version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return p


# The status a shell reports for a command killed by SIGPIPE (128 + 13): `mcp-stateless tools URL | head`
# ends the way `cat big | head` does, quietly, and a pipeline under `set -o pipefail` still sees it.
BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    try:
        status = _dispatch(argv)
        sys.stdout.flush()  # a closed pipe shows here rather than at interpreter exit
    except BrokenPipeError:
        _silence_stdout()
        return BROKEN_PIPE
    return status


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush of what is still buffered does not
    print a second BrokenPipeError ("Exception ignored ...") on the way out."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to flush later
        pass


def _dispatch(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help()
        return 2
    try:
        status: int = run(args)
    except CliError as e:
        print(f"mcp-stateless: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status


__all__ = ["CliError", "ServeConfig", "build_parser", "main"]
