#!/usr/bin/env bash
# The side-by-side of bench/redteam/README.md: promptfoo's indirect-prompt-injection plugin and
# `assay redteam` against the same vulnerable fixture, offline. Needs npm (promptfoo 0.121.20,
# the last release that runs on Node 20) and a built assay (ASSAY_BIN, default target/debug).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
assay="${ASSAY_BIN:-$root/target/debug/assay}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm init -y >/dev/null && npm install promptfoo@0.121.20 --no-audit --no-fund --loglevel=error >/dev/null) || {
  echo "npm install promptfoo failed" >&2; exit 3; }
pf="$work/node_modules/.bin/promptfoo"
export PROMPTFOO_DISABLE_TELEMETRY=1 PROMPTFOO_DISABLE_UPDATE=1
echo "== promptfoo $("$pf" --version 2>/dev/null | tail -1), default settings"
(cd "$here" && timeout 120 "$pf" redteam generate -c promptfooconfig.yaml -o "$work/a.yaml" --no-cache </dev/null 2>&1 | grep -v -i experimentalwarning | tail -6)
echo "== promptfoo, PROMPTFOO_DISABLE_REMOTE_GENERATION=true"
(cd "$here" && PROMPTFOO_DISABLE_REMOTE_GENERATION=true timeout 120 "$pf" redteam generate -c promptfooconfig.yaml -o "$work/b.yaml" --no-cache </dev/null 2>&1 | grep -v -i experimentalwarning | tail -4)
grep -h "requires remote generation" ~/.promptfoo/logs/promptfoo-error-*.log 2>/dev/null | tail -1 | cut -c1-300
echo "== assay redteam, the same fixture"
cp -r "$root/crates/assay-cli/tests/fixtures/redteam-kb" "$work/kb"
start=$(date +%s.%N)
"$assay" redteam "$work/kb" --families kb-injection --attempts 100 | head -3
echo "wall: $(echo "$(date +%s.%N) - $start" | bc) s"
