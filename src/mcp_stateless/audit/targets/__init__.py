"""What the auditor talks to: instances of one server over Streamable HTTP (given as URLs, or launched by the
auditor on free loopback ports), or one server process over stdio.

The auditor is the non-sticky balancer: `send` gives each request to the next instance in turn, so two
consecutive calls never reach the same process when there are several. A `Lane` is one dedicated
connection (HTTP: a single keep-alive connection to one instance; stdio: a process of its own), for checks
that ask whether a server remembers anything about the connection a request arrived on. Only the given
targets get traffic; every process the auditor starts, it stops.

`base` holds what every target shares (the protocols, the bounded reads, the record); `http`, `launched` and
`stdio` one kind of target each.
"""

from .base import BODY_MAX, MESSAGES_MAX, TOO_LARGE, Lane, Restart, Stream, Target, TargetError
from .http import HttpTarget
from .launched import LaunchedTarget, free_port
from .stdio import StdioTarget

__all__ = ["BODY_MAX", "MESSAGES_MAX", "TOO_LARGE", "HttpTarget", "Lane", "LaunchedTarget", "Restart", "StdioTarget",
           "Stream", "Target", "TargetError", "free_port"]
