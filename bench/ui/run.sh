#!/usr/bin/env bash
# Web UI benchmark: the experiment and simulation pages on big data. Generates (with
# crates/assay-cli/examples/ui_fixtures.rs) an experiment of TRIALS trials of 12 cases each
# and two simulation reports of RUNS runs × TURNS turns, starts `assay serve` (release) on
# them, requests every page N times and reports the server's own time per page (its
# `Server-Timing: app;dur=…` header: reading the files and rendering, nothing of the network)
# as the median and the largest, and the sizes of the self-contained HTML files.
# See bench/README.md ("ui: pages on big data").
#
# Usage: bash bench/ui/run.sh
#
# Environment:
#   TRIALS      trials of the experiment (default 1000)
#   RUNS        runs of each simulation report (default 500: 25 scenarios × 20 repeats)
#   TURNS       turns per conversation (default 20)
#   N           timed requests per page after one warm-up (default 15)
#   LIMIT_MS    the budget per page, server time (default 300); exits 1 when a median is over
#   SKIP_BUILD=1  use the binaries already in the target directory
#   CARGO_TARGET_DIR as for cargo
# Scratch files go to bench/out/ui/; the table to bench/out/ui.md.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/bench/out/ui"
TRIALS="${TRIALS:-1000}"
RUNS="${RUNS:-500}"
TURNS="${TURNS:-20}"
N="${N:-15}"
LIMIT_MS="${LIMIT_MS:-300}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"

die() { echo "error: $*" >&2; exit 1; }

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    echo "== building assay and the fixture generator (release)" >&2
    cargo build --release -p assay-cli --no-default-features --bin assay --example ui_fixtures
fi
ASSAY="$TARGET/release/assay"
FIXTURES="$TARGET/release/examples/ui_fixtures"
[[ -x "$ASSAY" && -x "$FIXTURES" ]] || die "missing binaries under $TARGET/release"

rm -rf "$OUT"
mkdir -p "$OUT"
PROJECT="$OUT/project"
cp -r examples/coparent "$PROJECT"
rm -rf "$PROJECT/results" "$PROJECT/.assay"
echo "== generating: $TRIALS trials; 2 reports of $RUNS runs × $TURNS turns" >&2
"$FIXTURES" "$PROJECT" --trials "$TRIALS" --runs "$RUNS" --turns "$TURNS" >&2

"$ASSAY" serve --port 0 --project "$PROJECT" >"$OUT/serve.out" 2>"$OUT/serve.log" &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
    [[ -s "$OUT/serve.out" ]] && break
    sleep 0.1
done
BASE="$(head -n1 "$OUT/serve.out" | tr -d '[:space:]')"
[[ "$BASE" == http://* ]] || die "assay serve did not print its address: $(cat "$OUT/serve.log")"

S1=20260101_000000
S2=20260102_000000
PAGES=(
    "/ui/experiments"
    "/ui/experiments/big"
    "/ui/experiments/big?sort=value1&desc=1"
    "/ui/experiments/big/trials/500"
    "/ui/experiments/big/promote"
    "/ui/experiments/big/live"
    "/ui/simulations"
    "/ui/simulations/$S1"
    "/ui/simulations/$S1/runs/scenario_000/1"
    "/ui/simulations/compare?r=$S1&r=$S2"
)

TABLE="$OUT/../ui.md"
{
    echo "| page | status | bytes | median ms | max ms |"
    echo "|---|---:|---:|---:|---:|"
} >"$TABLE"
over=0
for page in "${PAGES[@]}"; do
    url="$BASE$page"
    curl -s -o /dev/null "$url"   # warm-up: the page cache, the first read of each file
    times=()
    status=""
    bytes=""
    for _ in $(seq 1 "$N"); do
        headers="$(curl -s -D - -o "$OUT/body.html" "$url")"
        status="$(printf '%s' "$headers" | head -n1 | awk '{print $2}')"
        dur="$(printf '%s' "$headers" | tr -d '\r' | awk -F'dur=' 'tolower($0) ~ /^server-timing:/ {print $2}')"
        [[ -n "$dur" ]] || die "$page: no Server-Timing header"
        times+=("$dur")
        bytes="$(wc -c <"$OUT/body.html" | tr -d ' ')"
    done
    [[ "$status" == 200 ]] || die "$page answered $status"
    read -r median max < <(printf '%s\n' "${times[@]}" | sort -g | awk '{a[NR]=$1} END {m = (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2; printf "%.1f %.1f\n", m, a[NR]}')
    echo "| \`$page\` | $status | $bytes | $median | $max |" >>"$TABLE"
    if awk -v m="$median" -v l="$LIMIT_MS" 'BEGIN {exit !(m > l)}'; then over=1; fi
done

html_exp="$PROJECT/experiments/big/report.html"
html_sim="$PROJECT/sim/reports/report_$S1.html"
{
    echo
    echo "| file | bytes |"
    echo "|---|---:|"
    for f in "$html_exp" "$html_sim" "$PROJECT/experiments/big/report.json" "$PROJECT/sim/reports/report_$S1.json"; do
        echo "| \`${f#"$PROJECT/"}\` | $(wc -c <"$f" | tr -d ' ') |"
    done
} >>"$TABLE"
cat "$TABLE"
for f in "$html_exp" "$html_sim"; do
    size="$(wc -c <"$f" | tr -d ' ')"
    (( size < 5 * 1024 * 1024 )) || { echo "error: $f is $size bytes, over 5 MB" >&2; over=1; }
done
exit "$over"
