#!/usr/bin/env bash
# The whole benchmark in one command:   bash bench/run.sh [--quick] [any `python -m bench` option]
# Installs what it needs first (idempotent): wrk (Debian), and the peers' venv with mcp==2.3.0 and
# fastmcp==4.2.3 under the same uvicorn/httptools/uvloop/h11 versions as ours.
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS=${BENCH_PEERS_VENV:-.cache/venv-bench-peers}
PY=.venv/bin/python
[ -x "$PY" ] || { echo "no .venv: python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'" >&2; exit 2; }

if ! command -v wrk >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq --no-install-recommends wrk >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq --no-install-recommends wrk >/dev/null; } \
        || echo "wrk could not be installed: the load-generator check will be skipped" >&2
fi

# Same server stack as ours, so every target runs under identical uvicorn code.
pins=$("$PY" - <<'PYEOF'
import importlib.metadata as m
print(" ".join(f"{n}=={m.version(n)}" for n in ("uvicorn", "httptools", "uvloop", "h11", "orjson")))
PYEOF
)
want="mcp==2.3.0 fastmcp==4.2.3 $pins"
stamp="$PEERS/.bench-installed"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "installing the peers into $PEERS: $want" >&2
    [ -x "$PEERS/bin/python" ] || python3 -m venv "$PEERS"
    "$PEERS/bin/pip" install -q --disable-pip-version-check $want
    echo "$want" >"$stamp"
fi

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec "$PY" -m bench "$@"
