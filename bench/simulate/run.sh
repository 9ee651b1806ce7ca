#!/usr/bin/env bash
# Conversation-simulator benchmark: `assay simulate` on the scout-quest example (nine
# scenarios × REPEAT runs) against the scripted two-format provider
# (crates/assay-cli/examples/sim_provider.rs) answering every model call after LATENCY_MS,
# with the example's real MCP server (a fresh SQLite database and server process per run).
#
# For each concurrency C (model calls in flight) it reports the wall time next to the ideal,
# total model latency ÷ C (model calls counted by the provider × LATENCY_MS ÷ C), and their
# ratio. A scenario run's calls are sequential (each turn needs the previous answer); assay
# keeps more conversations open than C (--runs-in-flight, default 2C) so that calls, not whole
# runs, are what is scheduled. For reference it also reports the makespan of the best schedule
# of whole runs on C slots (LPT: longest run first onto the freest slot), the floor when only C
# conversations are open at once (RUNS_IN_FLIGHT=C), and the strict ideal: the larger of the
# ideal and the longest run's chain of calls (its calls one after another).
# See bench/README.md ("simulate: concurrency").
#
# Usage: bash bench/simulate/run.sh
#
# Environment:
#   REPEAT        runs per scenario (default 3)
#   LATENCY_MS    simulated model latency per call (default 50; 0 measures assay's fixed cost)
#   CONCURRENCY   space-separated concurrency levels (default "1 4 8")
#   N             timed runs per level, median reported (default 3)
#   RUNS_IN_FLIGHT conversations open at once (default: assay's, twice C)
#   SKIP_BUILD=1  use the binaries already in the target directory
#   CARGO_TARGET_DIR as for cargo
# Scratch files go to bench/out/simulate/. Exits non-zero if a run fails or a scenario errors.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/bench/out/simulate"
REPEAT="${REPEAT:-3}"
LATENCY_MS="${LATENCY_MS:-50}"
CONCURRENCY="${CONCURRENCY:-1 4 8}"
N="${N:-3}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
mkdir -p "$OUT"

die() { echo "error: $*" >&2; exit 1; }

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    echo "== building assay, scout-quest-mcp and the scripted provider (release)" >&2
    cargo build --release -p assay-cli --no-default-features --bin assay --example sim_provider
    cargo build --release -p scout-quest-mcp
fi
ASSAY="$TARGET/release/assay"
PROVIDER="$TARGET/release/examples/sim_provider"
export SCOUT_QUEST_MCP="$TARGET/release/scout-quest-mcp"
[[ -x "$ASSAY" && -x "$PROVIDER" && -x "$SCOUT_QUEST_MCP" ]] || die "missing binaries under $TARGET/release"

"$PROVIDER" --port 0 --latency-ms "$LATENCY_MS" > "$OUT/provider.out" 2>&1 &
PROVIDER_PID=$!
trap 'kill $PROVIDER_PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    URL="$(head -n1 "$OUT/provider.out" 2>/dev/null || true)"
    [[ "$URL" == http* ]] && break
    sleep 0.1
done
[[ "$URL" == http* ]] || die "the provider did not start"

PROJECT="$OUT/project"
rm -rf "$PROJECT"
mkdir -p "$PROJECT"
cp -r examples/scout-quest/sim "$PROJECT/sim"
rm -rf "$PROJECT/sim/reports"
cat > "$PROJECT/assay.toml" <<EOF
[providers]
anthropic_base_url = "$URL"
cache = "off"
EOF
export ANTHROPIC_API_KEY=bench SCOUT_QUEST_TODAY=2026-11-25

requests() { curl -sf "$URL/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'; }
# The provider's span since the last read: "first_ms last_ms" (Unix ms of the first request and
# the last answer).
span() { curl -sf "$URL/stats" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["first_ms"], d["last_ms"])'; }

printf '%-12s %10s %10s %10s %10s %12s %10s %10s %12s\n' concurrency "wall_ms" "calls" "ideal_ms" "wall/ideal" "schedule_ms" "wall/sched" "strict_ms" "wall/strict"
for c in $CONCURRENCY; do
    walls=()
    heads=()
    tails=()
    for i in $(seq "$N"); do
        before=$(requests)
        span > /dev/null
        start=$(date +%s%N)
        "$ASSAY" simulate "$PROJECT" --model anthropic/coach --simulator-model anthropic/sim \
            --evaluator-model anthropic/judge --repeat "$REPEAT" --concurrency "$c" \
            ${RUNS_IN_FLIGHT:+--runs-in-flight "$RUNS_IN_FLIGHT"} \
            --output "$OUT/report_c$c.md" > "$OUT/stdout_c$c.txt" 2> "$OUT/stderr_c$c.txt" \
            || { cat "$OUT/stderr_c$c.txt" >&2; die "assay simulate failed (concurrency $c)"; }
        end=$(date +%s%N)
        read -r first last < <(span)
        after=$(requests)
        walls+=("$(( (end - start) / 1000000 ))")
        # Before the first model call (process start, setup, preflight) and after the last
        # answer (judging's end is the last answer; then reports and exit).
        heads+=("$(( first - start / 1000000 ))")
        tails+=("$(( end / 1000000 - last ))")
        calls=$((after - before))
    done
    python3 - "$OUT/report_c$c.json" "$c" "$LATENCY_MS" "$calls" "${walls[@]}" <<'PY'
import json, statistics, sys
report = json.load(open(sys.argv[1]))
c, latency, calls = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
walls = [float(w) for w in sys.argv[5:]]
if report["summary"]["errors"]:
    sys.exit(f"{report['summary']['errors']} scenario run(s) errored")
# Model calls per run: assistant turns (each tool round is a call), simulated-user turns, judge.
def run_calls(run):
    t = run["transcript"]["turns"]
    assistant = sum(1 + len(turn.get("tool_calls", [])) for turn in t if turn["role"] == "assistant")
    user = sum(1 for turn in t if turn["role"] == "user") - 1
    return assistant + user + run["judgement"]["calls"]
durations = sorted((run_calls(r) * latency for r in report["runs"]), reverse=True)
# The best schedule of whole runs on c slots, approximated from below and above: the lower
# bound max(total / c, longest run), and LPT (longest run first onto the freest slot), which is
# within 4/3 of the optimum and usually equal to it for runs this alike.
slots = [0.0] * c
for d in durations:
    slots[slots.index(min(slots))] += d
schedule = max(slots)
ideal = calls * latency / c
# The strict ideal: no schedule of calls ends before the calls' total latency ÷ c, nor before
# the longest conversation's chain of calls (each waits for the one before it).
strict = max(ideal, durations[0])
wall = statistics.median(walls)
# LATENCY_MS=0 measures assay's fixed cost alone: every ideal is 0 and the ratios undefined.
ratio = lambda a, b: a / b if b else float("nan")
print(f"{c:<12} {wall:>10.0f} {calls:>10} {ideal:>10.0f} {ratio(wall, ideal):>10.2f} {schedule:>12.0f} {ratio(wall, schedule):>10.2f} {strict:>10.0f} {ratio(wall, strict):>12.2f}")
print(f"  walls (ms): {' '.join(f'{w:.0f}' for w in walls)}", file=sys.stderr)
PY
    echo "  before the first model call (ms): ${heads[*]}; after the last answer (ms): ${tails[*]}" >&2
done
