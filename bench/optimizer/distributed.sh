#!/usr/bin/env bash
# One study on several workers (`[optimize] storage`, `assay optimize --worker`): the wall time
# of TRIALS (40) trials with one worker against WORKERS (4) workers sharing the study in
# PostgreSQL, against a target whose every case takes about a second (the prompt-sensitive
# provider crates/assay-cli/examples/prompt_provider.rs at LATENCY_MS (250) a call: three agent
# calls and a grader call per case, one optimization case and one evaluation case; three
# agents of five prompts each, 125 combinations, so the study samples rather than enumerates).
# Also the same study in one process with the local journal, for reference. Call cache off.
# Each configuration runs REPEAT (1) times; the table goes to bench/out/optimizer/distributed.md.
#
# Needs PostgreSQL: scripts/test-pg-up starts the tests' server (from PyPI) when none answers.
# PROFILE=debug (default; the provider's latency is what is measured) or release.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/optimizer
TRIALS="${TRIALS:-40}"
WORKERS="${WORKERS:-4}"
LATENCY_MS="${LATENCY_MS:-250}"
REPEAT="${REPEAT:-1}"
PROFILE="${PROFILE:-debug}"
mkdir -p "$OUT"
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  cargo build --profile "$([ "$PROFILE" = debug ] && echo dev || echo "$PROFILE")" -p assay-cli \
    --bin assay --example prompt_provider
fi
TARGET="${CARGO_TARGET_DIR:-target}/$PROFILE"
scripts/test-pg-up >/dev/null
ADMIN=$(cat target/test-pg/url)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
"$TARGET/examples/prompt_provider" --latency-ms "$LATENCY_MS" > "$WORK/url" &
PIDS+=($!)
until [ -s "$WORK/url" ]; do sleep 0.1; done
URL=$(head -1 "$WORK/url")

# The project: three agents, five prompts each; the marked prompt (v4) is the one to find.
P="$WORK/project"
for a in planner expert finalizer; do
  mkdir -p "$P/prompts" "$P/prompt_variations/$a"
  echo "You are the $a. Be brief." > "$P/prompts/${a}_system_prompt.txt"
  for v in 1 2 3; do echo "You are the $a. Variant $v." > "$P/prompt_variations/$a/v$v.txt"; done
  echo "[[GOOD]] You are the $a. Check every fact." > "$P/prompt_variations/$a/v4.txt"
done
mkdir -p "$P/cases"
echo '{"question": "Capital of France? [key:Paris] [d:3]", "files": [], "answer": "Paris"}' > "$P/cases/opt.jsonl"
echo '{"question": "Red planet? [key:Mars] [d:3]", "files": [], "answer": "Mars"}' > "$P/cases/eval.jsonl"
cat > "$P/assay.toml" <<TOML
[providers]
openai_base_url = "$URL/v1"

[optimize]
model = "openai/fake-agent"
grader_model = "openai/fake-grader"
chain = ["planner", "expert", "finalizer"]
heartbeat_seconds = 2
TOML

database() {
  local name="assay_bench_dist_$1"
  psql "$ADMIN" -qc "DROP DATABASE IF EXISTS $name" -c "CREATE DATABASE $name" >/dev/null
  echo "${ADMIN%/*}/$name"
}
optimize() {
  local name="$1"; shift
  OPENAI_API_KEY=bench "$TARGET/assay" optimize "$P" --experiment-name "$name" \
    --optimization-trials "$TRIALS" --optimization-test-cases cases/opt.jsonl \
    --evaluation-test-cases cases/eval.jsonl --cache off --json "$@"
}
now() { date +%s.%N; }

: > "$WORK/rows"
for r in $(seq "$REPEAT"); do
  # One process, the local journal.
  t0=$(now); optimize "local$r" > "$WORK/local$r.json" 2> "$WORK/local$r.err" || { cat "$WORK/local$r.err"; exit 1; }
  echo "local 1 $(echo "$(now) - $t0" | bc -l) $WORK/local$r.json" >> "$WORK/rows"
  # One worker on the storage.
  db=$(database "one$r")
  t0=$(now); optimize "one$r" --storage "$db" > "$WORK/one$r.json" 2> "$WORK/one$r.err" || { cat "$WORK/one$r.err"; exit 1; }
  echo "storage 1 $(echo "$(now) - $t0" | bc -l) $WORK/one$r.json" >> "$WORK/rows"
  # WORKERS workers on the storage, started together.
  db=$(database "many$r")
  t0=$(now)
  pids=()
  for w in $(seq "$WORKERS"); do
    flag=(); [ "$w" -gt 1 ] && flag=(--worker)
    ASSAY_WORKER_NAME="w$w" optimize "many$r" --storage "$db" "${flag[@]}" > "$WORK/many$r-$w.json" 2> "$WORK/many$r-$w.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$WORK"/many$r-*.err; exit 1; }; done
  report=$(grep -l '"schema_version"' "$WORK"/many$r-*.json | head -1)
  echo "storage $WORKERS $(echo "$(now) - $t0" | bc -l) $report" >> "$WORK/rows"
done

python3 - "$WORK/rows" "$TRIALS" "$WORKERS" "$LATENCY_MS" <<'PY' | tee "$OUT/distributed.md"
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
trials, workers, latency = sys.argv[2], int(sys.argv[3]), sys.argv[4]
by = {}
for kind, n, wall, report in rows:
    r = json.load(open(report))
    by.setdefault((kind, int(n)), []).append((float(wall), r))
print(f"# optimizer: one study on several workers ({trials} trials, {latency} ms a call, ~1 s a case)\n")
print("| configuration | runs | wall (s, median) | trials | best params | trials per worker |")
print("|---|---:|---:|---:|---|---|")
for (kind, n), runs in sorted(by.items()):
    wall = statistics.median(w for w, _ in runs)
    r = runs[0][1]
    per = {}
    for t in r["trials"]:
        per[t.get("worker", "-")] = per.get(t.get("worker", "-"), 0) + 1
    label = "one process, local journal" if kind == "local" else f"{n} worker{'s' if n > 1 else ''}, PostgreSQL"
    print(f"| {label} | {len(runs)} | {wall:.1f} | {len(r['trials'])} | {json.dumps(r['best_params'], sort_keys=True)} | {', '.join(f'{k} {v}' for k, v in sorted(per.items()))} |")
one = statistics.median(w for w, _ in by[("storage", 1)])
many = statistics.median(w for w, _ in by[("storage", workers)])
print(f"\n{workers} workers / 1 worker: {many / one:.2f} (goal: under 0.4)")
PY
