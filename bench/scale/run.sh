#!/usr/bin/env bash
# Memory and time of `assay run` as the number of cases grows (issue 20, "streamed results").
# See bench/README.md ("scale: a million cases in bounded memory").
#
# For each size in SIZES, a copy of examples/coparent whose state and pattern banks hold that
# many cases (bench/scale/make_project.py; the deterministic banks only, so what is measured is
# assay, not an embedder or a provider), then `assay run` under GNU time's -v: peak RSS, wall
# time, the size of the summary JSON and of the run log. BEFORE, when set, is another assay
# binary (e.g. built from an older commit) measured the same way on the same projects,
# alternating with this one, for "no worse than before".
#
# Usage: bash bench/scale/run.sh
#
# Environment:
#   SIZES        case counts (default "100000 1000000")
#   REPEAT       runs of each binary at each size (default 3; the median is reported)
#   BEFORE       an older assay binary to measure beside this one (optional)
#   ASSAY_BIN    the binary to measure (default: target/release/assay, built unless SKIP_BUILD=1)
#   WORK         scratch folder for the generated projects (default: a temporary one)
# Appends one JSON line per run to bench/out/scale.jsonl and prints a Markdown table.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
SIZES="${SIZES:-100000 1000000}"
REPEAT="${REPEAT:-3}"
OUT=bench/out
mkdir -p "$OUT"
if [[ -z "${ASSAY_BIN:-}" ]]; then
    if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
        cargo build --release -p assay-cli --bin assay >&2
    fi
    ASSAY_BIN="$ROOT/target/release/assay"
fi
WORK="${WORK:-$(mktemp -d)}"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT

BINS=("new=$ASSAY_BIN")
if [[ -n "${BEFORE:-}" ]]; then
    BINS+=("before=$BEFORE")
fi

RESULTS="$WORK/results.jsonl"
: > "$RESULTS"
for n in $SIZES; do
    python3 bench/scale/make_project.py examples/coparent "$WORK/p$n" "$n" >&2
    for r in $(seq 1 "$REPEAT"); do
        for entry in "${BINS[@]}"; do
            name="${entry%%=*}"
            bin="${entry#*=}"
            rm -rf "$WORK/p$n/results"
            # Exit 0 or 1 (the health gate) are both a finished run; 2 and 3 are not.
            set +e
            /usr/bin/time -v "$bin" run "$WORK/p$n" > "$WORK/stdout" 2> "$WORK/time"
            code=$?
            set -e
            if [[ "$code" -gt 1 ]]; then
                echo "$name failed at $n cases (exit $code):" >&2
                tail -20 "$WORK/time" >&2
                exit 1
            fi
            python3 - "$name" "$n" "$r" "$WORK/time" "$WORK/p$n/results" >> "$RESULTS" <<'EOF'
import json, os, re, sys
name, n, r, time_file, results = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
text = open(time_file).read()
rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text).group(1)
secs = 0.0
for part in wall.split(":"):
    secs = secs * 60 + float(part)
sizes = {"summary": 0, "run_log": 0}
for f in os.listdir(results):
    path = os.path.join(results, f)
    if f.startswith("results_") and f.endswith(".json"):
        sizes["summary"] += os.path.getsize(path)
    elif f.startswith("cases_"):
        sizes["run_log"] += os.path.getsize(path)
print(json.dumps({"binary": name, "cases": n, "run": r, "rss_mb": rss_kb / 1024,
                  "wall_s": secs, "us_per_case": secs / n * 1e6,
                  "summary_mb": sizes["summary"] / 1e6, "run_log_mb": sizes["run_log"] / 1e6}))
EOF
            tail -1 "$RESULTS" >&2
        done
    done
done
cat "$RESULTS" >> "$OUT/scale.jsonl"

python3 - "$RESULTS" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
keys = sorted({(r["binary"], r["cases"]) for r in rows}, key=lambda k: (k[1], k[0] != "new"))
print("| binary | cases | peak RSS (MB, median) | wall (s, median) | µs a case | summary JSON (MB) | run log (MB) |")
print("|---|---:|---:|---:|---:|---:|---:|")
for b, n in keys:
    rs = [r for r in rows if r["binary"] == b and r["cases"] == n]
    med = lambda k: statistics.median(r[k] for r in rs)
    print(f"| {b} | {n:,} | {med('rss_mb'):.0f} | {med('wall_s'):.2f} | {med('us_per_case'):.1f} "
          f"| {med('summary_mb'):.2f} | {med('run_log_mb'):.1f} |")
EOF
