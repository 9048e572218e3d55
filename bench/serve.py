"""Run one benchmark target: `python bench/serve.py TARGET --port P --stack h11|fast [--sse]` or `--stdio`.

Every HTTP target runs under the same uvicorn settings: one process, no access log, warning log level,
loopback only; `--stack h11` is plain uvicorn (h11 + asyncio), `--stack fast` is httptools + uvloop.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import targets


def serve_http(target: str, port: int, stack: str, sse: bool) -> None:
    import uvicorn

    app = targets.asgi_app(target, json_response=not sse)
    fast = stack == "fast"
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        http="httptools" if fast else "h11",
        loop="uvloop" if fast else "asyncio",
        log_level="warning",
        access_log=False,
        lifespan="on",
        server_header=False,
        date_header=False,
        timeout_graceful_shutdown=2,
        backlog=16384,
        limit_concurrency=None,
        timeout_keep_alive=600,
    )


def serve_stdio(target: str) -> None:
    if target == "ours":
        from mcp_stateless.transports.stdio import serve_stdio as run

        run(targets.build_ours_stdio())
    elif target == "mcp":
        server = targets.build_mcp()
        asyncio.run(server.run_stdio_async())
    elif target == "fastmcp":
        server = targets.build_fastmcp()
        asyncio.run(server.run_stdio_async(show_banner=False))
    else:
        raise SystemExit(f"no stdio target {target!r}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("target", choices=targets.TARGETS)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--stack", choices=("h11", "fast"), default="h11")
    p.add_argument("--sse", action="store_true", help="peers: json_response=False (progress goes over SSE)")
    p.add_argument("--stdio", action="store_true")
    a = p.parse_args()
    if a.stdio:
        serve_stdio(a.target)
    else:
        serve_http(a.target, a.port, a.stack, a.sse)


if __name__ == "__main__":
    main()
