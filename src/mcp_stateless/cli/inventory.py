"""`mcp-stateless inventory PATH`: list the hidden-state dependencies in a server's source, with the fix for each.

The source is read, never imported or run. The report is a migration plan in the guide's step order;
`--json`, `--markdown` and `--sarif` choose another format, `--output FILE` writes it to a file. Exit status
1 when a finding of a kind named by `--fail-on` (or `--fail-on any`) remains (a grouped transport-session-map
finding is of every kind it stands for), 2 on a usage error or when part of the tree could not be analysed (the
inventory is then incomplete, never clean).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .base import CliError


def register(sub: Any) -> None:
    help_ = "list the hidden-state dependencies in a legacy server's source, with the fix for each"
    p = sub.add_parser("inventory", help=help_, description=help_ + ". " + (__doc__ or "").split("\n\n")[1],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="Example: mcp-stateless inventory src/ --sarif --output inventory.sarif")
    p.set_defaults(run=run)
    p.add_argument("path", metavar="PATH", help="a source tree or one file")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON report")
    fmt.add_argument("--markdown", action="store_true", help="Markdown report")
    fmt.add_argument("--sarif", action="store_true", help="SARIF 2.1.0 (GitHub code scanning, editors)")
    p.add_argument("--output", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--fail-on", nargs="+", default=[], metavar="KIND", help="exit 1 if a finding of KIND (or any)")
    p.add_argument("--include-tests", action="store_true", help="inventory tests too")
    p.add_argument("--kind", nargs="+", default=[], metavar="KIND", help="report only these kinds")


def run(args: argparse.Namespace) -> int:
    from ..inventory import engine, glue, report
    from ..inventory.kinds import KINDS

    for kind in [*args.kind, *(k for k in args.fail_on if k != "any")]:
        if kind not in KINDS:
            raise CliError(f"unknown kind {kind!r}; kinds: {', '.join(sorted(KINDS))}")
    if not Path(args.path).exists():
        raise CliError(f"{args.path}: no such file or directory")
    inv = engine.inventory(args.path, include_tests=args.include_tests, kinds=set(args.kind) or None)
    if args.json:
        text = report.to_json(inv) + "\n"
    elif args.markdown:
        text = report.to_markdown(inv)
    elif args.sarif:
        import mcp_stateless

        text = report.to_sarif(inv, str(mcp_stateless.__version__)) + "\n"
    else:
        text = report.to_text(inv)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    for reason in inv.not_analysed:  # an incomplete inventory must not pass a gate: never "clean"
        sys.stderr.write(f"mcp-stateless: error: not analysed: {reason}\n")
    if inv.not_analysed:
        return 2
    fail = set(args.fail_on)
    return 1 if any("any" in fail or glue.matches(f, fail) for f in inv.findings) else 0
