"""`mcp-stateless audit`: find hidden state in any MCP server — run the migration guide's tests (several
instances behind a non-sticky balancer, interleaved stdio calls, restarts between calls sharing a handle)
against it and report each finding with its evidence and the fix.

    report = await audit(LaunchedTarget("python server.py --port {port}", instances=3))
"""

from .checks import CHECKS
from .engine import Check, Options, Outcome, Profile, Progress, Result
from .flow import Flow, FlowError, flow_checks, flow_schema, load_flow, parse_flow
from .report import report, report_schema, to_junit, to_markdown
from .run import audit, plan
from .targets import HttpTarget, LaunchedTarget, StdioTarget, Target, TargetError

__all__ = [
    "CHECKS",
    "Check",
    "Flow",
    "FlowError",
    "HttpTarget",
    "LaunchedTarget",
    "Options",
    "Outcome",
    "Profile",
    "Progress",
    "Result",
    "StdioTarget",
    "Target",
    "TargetError",
    "audit",
    "flow_checks",
    "flow_schema",
    "load_flow",
    "parse_flow",
    "plan",
    "report",
    "report_schema",
    "to_junit",
    "to_markdown",
]
