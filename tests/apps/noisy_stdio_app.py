"""A stdio server that writes a lot to its stderr, as 1.x servers do (a page of warnings per request): 3,000
numbered lines when imported (about 100 KiB, more than a pipe holds, so a client that does not drain the
pipe stalls it) and one more line per tool call.

Serve it with `mcp-stateless serve tests/apps/noisy_stdio_app.py:app --stdio`.
"""

from __future__ import annotations

import sys

from mcp_stateless import App

NOISE_LINES = 3000

for n in range(NOISE_LINES):
    print(f"noise {n:04d}: a warning the server writes on its stderr, which is not for the user", file=sys.stderr)
sys.stderr.flush()

app = App("noisy", "1.0.0")


@app.tool()
def hello(name: str) -> str:
    """Greet, after one more line of noise."""
    print(f"noise: greeting {name}", file=sys.stderr, flush=True)
    return f"hello {name}"
