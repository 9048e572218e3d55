"""`mcp-stateless contract APP`: the app's published compatibility contract, its SEP-2127 Server Card.

It prints the card `serve` would publish at `<endpoint>/server-card` with the same options (`--legacy`,
`--legacy-sse`, `--legacy-until`, `--path`), as JSON or, with `--markdown`, as a README section. Without
`--url` the remotes' URL is the template `{origin}<path>`, its variable described in the card.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from .base import CliError
from .loader import load_app
from .serve import add_legacy_options, legacy_options


def register(sub: Any) -> None:
    s = sub.add_parser(
        "contract",
        help="print an app's Server Card (SEP-2127): remotes, protocol versions, extensions, legacy retirement",
        description="Print the Server Card `serve` publishes at <endpoint>/server-card for APP with these options.",
        epilog="example:\n  mcp-stateless contract examples/echo.py:app --url https://mcp.example.com/mcp --markdown",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.set_defaults(run=run)
    s.add_argument("app", metavar="APP", help="module:attr or path/to/file.py:attr")
    s.add_argument("--url", metavar="URL", default=None,
                   help="the endpoint's public URL, e.g. https://mcp.example.com/mcp (default: the template "
                        "{origin}<path>)")
    s.add_argument("--path", default="/mcp", help="HTTP endpoint path, for the URL template (default /mcp)")
    s.add_argument("--markdown", action="store_true", help="a Markdown section instead of JSON")
    add_legacy_options(s)


def run(args: argparse.Namespace) -> int:
    from ..protocol import card, retirement
    from ..protocol.legacy import SERVED_VERSIONS

    options = legacy_options(args, os.environ)
    if args.url is not None and not args.url.startswith(("http://", "https://")):
        raise CliError(f"--url must be an http:// or https:// URL, got {args.url!r}")
    app = load_app(args.app)
    until = retirement.parse(options["legacy_until"]) if options["legacy_until"] else None
    compat = card.compatibility(tuple(app.supported_versions),
                                SERVED_VERSIONS if options["legacy"] == "serve" else (), options["legacy_sse"],
                                until, time.time())
    url = args.url if args.url is not None else card.ORIGIN_TEMPLATE + args.path
    document = card.server_card(app.card_identity(), compat, url)
    if args.markdown:
        print(card.markdown(document), end="")
    else:
        print(json.dumps(document, indent=2))
    return 0
