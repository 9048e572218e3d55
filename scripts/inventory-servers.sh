#!/usr/bin/env bash
# The published MCP servers `tests/inventory` inventories, pinned exactly and unpacked (never imported, never run)
# into .cache/inventory-servers/<name>-<version>/: a PyPI wheel's files, an npm package's `package/` folder.
# Fetched here, by the test setup, never by the inventory tool. Idempotent: a present folder is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/inventory-servers
mkdir -p "$dest"
npm=tools/node/node_modules/.bin/npm
[ -x "$npm" ] || npm=npm

pypi=(mcp-server-sqlite==2025.4.25 mcp-server-git==2026.7.10 mcp-server-time==2026.7.10
      office-word-mcp-server==1.1.11)
npmjs=(@modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31)

for spec in "${pypi[@]}"; do
    name=${spec%%==*} version=${spec##*==}
    out="$dest/$name-$version"
    [ -d "$out" ] && continue
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" "$spec"
    mkdir -p "$out.part"
    python3 -m zipfile -e "$tmp"/*.whl "$out.part"
    mv "$out.part" "$out"
    rm -rf "$tmp"
done

for spec in "${npmjs[@]}"; do
    name=${spec%@*} version=${spec##*@}
    out="$dest/${name##*/}-$version"
    [ -d "$out" ] && continue
    tmp=$(mktemp -d)
    (cd "$tmp" && "$OLDPWD/$npm" pack --silent "$spec" >/dev/null 2>&1 || npm pack --silent "$spec" >/dev/null)
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    mv "$tmp/package" "$out"
    rm -rf "$tmp"
done
ls "$dest"
