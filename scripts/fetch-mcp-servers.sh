#!/usr/bin/env bash
# Install the published MCP servers that the simulator's interop test runs (from the npm
# registry): @modelcontextprotocol/server-memory (stdio) and @modelcontextprotocol/server-everything
# (streamable HTTP). Needs Node.js and npm (Debian: apt-get install nodejs npm).
#
# Usage: scripts/fetch-mcp-servers.sh [DEST]
#   DEST defaults to target/test-npm. Idempotent: an existing install of these versions is kept.
# Prints DEST on stdout; progress goes to stderr.
set -euo pipefail

DEST="${1:-target/test-npm}"
PACKAGES=(@modelcontextprotocol/server-memory@2026.8.31 @modelcontextprotocol/server-everything@2026.8.31)

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "fetch-mcp-servers: installing Node.js and npm from Debian's packages" >&2
    apt-get update -qq >&2 && apt-get install -y -qq nodejs npm >&2
fi

mkdir -p "$DEST"
stamp="$DEST/.installed"
if [[ "$(cat "$stamp" 2>/dev/null)" != "${PACKAGES[*]}" ]]; then
    echo "fetch-mcp-servers: npm install ${PACKAGES[*]}" >&2
    (cd "$DEST" && [[ -f package.json ]] || echo '{"private": true}' > package.json)
    npm install --prefix "$DEST" --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >&2
    echo "${PACKAGES[*]}" > "$stamp"
fi
echo "$DEST"
