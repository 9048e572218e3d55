"""What every command group shares: the parser class, the usage error, the registration contract."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn, Protocol


class CliError(Exception):
    """A mistake on the command line or in what it names: printed as one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """Usage mistakes as one line (plus where to look), exit status 2. Subcommand parsers inherit it."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class CommandGroup(Protocol):
    """A module of the `cli` package: `register` adds its subcommands, each with `set_defaults(run=...)`
    where `run(args) -> exit status`. It imports what its commands need inside `run`, so building the
    parser stays cheap."""

    def register(self, subparsers: Any) -> None: ...
