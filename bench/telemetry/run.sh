#!/usr/bin/env bash
# Telemetry export overhead (issue 31): `assay run` with OpenTelemetry export on (OTLP/HTTP to a
# local sink that answers at once) against the same run with export off, on two suites:
#
#   scale     the SIZE-case project of bench/scale/make_project.py (default 100,000: the
#             example's state and pattern cases repeated; deterministic banks, no provider;
#             every FAIL_EVERY-th state case made to fail): a case span and a retrieval span
#             with an evaluation event per exported case
#   semantic  the 94-case semantic bank of examples/coparent with the LLM reranker, against the
#             zero-latency provider of bench/harness, call cache off (every case makes its
#             reranker call): also a chat span per case and the embeddings spans
#
# Export on means the standard sampler variables a large suite would set: OTEL_TRACES_SAMPLER=
# $SAMPLER with OTEL_TRACES_SAMPLER_ARG=$SAMPLER_ARG (default parentbased_traceidratio, 0.01).
# assay applies them to passing deterministic cases only: failing cases, errors and model calls
# are always exported, which the counted runs check at the receiver.
#
# For each suite: REPEAT rounds of one run with export off and one with export on (protobuf),
# their order alternating by round; each `assay run DIR --no-save --json` is timed as a whole
# process (start to exit, the final flush included) under GNU time -v (peak RSS). Overhead =
# median(on) / median(off) - 1, and the median of the per-round ratios. Then, untimed: one run
# per protocol against a second sink that decodes what it gets (--count-spans) with -vv (the
# run's own count of spans exported, the failing case spans and model-call spans received
# against the run's failed and errored cases and the provider's requests), JSON_RUNS timed runs
# with OTEL_EXPORTER_OTLP_PROTOCOL=http/json and ALL_RUNS timed runs exporting every case
# (OTEL_TRACES_SAMPLER=always_on), for information. Every run's JSON, less the fields that differ between any two
# runs (run id, timestamps, durations), must be the same as the first export-off run's.
# See bench/README.md ("telemetry: export overhead").
#
# Usage: bash bench/telemetry/run.sh
#
# Environment:
#   REPEAT             rounds of off/on per suite (default 5; medians reported)
#   SIZE               cases of the scale suite (default 100000)
#   SUITES             which suites (default "scale semantic")
#   JSON_RUNS          timed http/json runs per suite, for information (default 1; 0 = none)
#   ALL_RUNS           timed always_on runs per suite, for information (default 1; 0 = none)
#   SAMPLER            OTEL_TRACES_SAMPLER of the export-on runs (default
#                      parentbased_traceidratio); SAMPLER_ARG its argument (default 0.01)
#   FAIL_EVERY         every K-th state case of the scale suite fails (default 100; 0 = none)
#   AIM                the overhead aim in % (default 3)
#   SKIP_BUILD=1       use the binaries already in the target directory
#   CARGO_TARGET_DIR   as for cargo (default: target/ in the workspace)
#   EXTRA_ENV          "VAR=value ..." set on the export-on runs only (e.g. to try OTEL_BSP_*)
#   KEEP_JSON=1        keep every run's --json output (bench/out/telemetry/SUITE-MODE-ROUND.json;
#                      ~83 MB each at 100,000 cases); by default removed once compared
#
# Builds `assay` as bench/harness does (release, --no-default-features) with the
# zero_latency_provider and otlp_sink examples, and copies the three binaries to
# bench/out/telemetry/bin (a rebuild in the target directory during the runs cannot change
# what is measured). Scratch files go to bench/out/telemetry/; the table to
# bench/out/telemetry.md (and stdout). Exits non-zero if a run fails or errs, if a run's JSON
# differs, if export sent nothing, or if a span was lost.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/bench/out/telemetry"
TABLE="$ROOT/bench/out/telemetry.md"
REPEAT="${REPEAT:-5}"
SIZE="${SIZE:-100000}"
SUITES="${SUITES:-scale semantic}"
JSON_RUNS="${JSON_RUNS:-1}"
ALL_RUNS="${ALL_RUNS:-1}"
SAMPLER="${SAMPLER:-parentbased_traceidratio}"
SAMPLER_ARG="${SAMPLER_ARG:-0.01}"
FAIL_EVERY="${FAIL_EVERY:-100}"
AIM="${AIM:-3}"
EXTRA_ENV="${EXTRA_ENV:-}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT/bin"

die() { echo "error: $*" >&2; exit 1; }
now() { date +%s.%N; }
[[ -x /usr/bin/time ]] || die "GNU time (/usr/bin/time) is needed for peak RSS"

# ---------------------------------------------------------------------------------- build
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    echo "== building assay, the zero-latency provider and the OTLP sink (release)" >&2
    cargo build --release -p assay-cli --no-default-features \
        --bin assay --example zero_latency_provider --example otlp_sink
fi
for b in assay examples/zero_latency_provider examples/otlp_sink; do
    [[ -x "$TARGET/release/$b" ]] || die "missing $TARGET/release/$b"
    cp "$TARGET/release/$b" "$OUT/bin/"
done
ASSAY="$OUT/bin/assay"
PROVIDER="$OUT/bin/zero_latency_provider"
SINK="$OUT/bin/otlp_sink"

# --------------------------------------------------------------------- provider and sinks
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# serve NAME URL_PREFIX CMD...: starts a server that prints its URL on its first line, into
# SERVED_URL (not in a subshell: the trap must know its pid).
serve() {
    local name="$1" prefix="$2"
    shift 2
    rm -f "$OUT/$name.url"
    "$@" > "$OUT/$name.url" 2> "$OUT/$name.log" &
    PIDS+=($!)
    for _ in $(seq 100); do
        [[ -s "$OUT/$name.url" ]] && break
        kill -0 "${PIDS[-1]}" 2>/dev/null || die "$name exited: $(cat "$OUT/$name.log")"
        sleep 0.05
    done
    SERVED_URL="$(head -n1 "$OUT/$name.url")"
    [[ "$SERVED_URL" == "$prefix"* ]] || die "$name printed no URL"
}
serve provider http://127.0.0.1: "$PROVIDER" --port 0
BASE="$SERVED_URL"
serve sink http://127.0.0.1: "$SINK" --port 0
SINK_URL="$SERVED_URL"
serve sink-count http://127.0.0.1: "$SINK" --port 0 --count-spans
COUNT_URL="$SERVED_URL"
echo "== provider $BASE, sink $SINK_URL, counting sink $COUNT_URL" >&2
stat_of() { curl -fsS "$1/stats"; }

# -------------------------------------------------------------------------------- projects
make_scale() {
    "$PYTHON" bench/scale/make_project.py examples/coparent "$OUT/scale" "$SIZE" "$FAIL_EVERY" >&2
}
# The semantic bank alone, pointed at the provider as bench/harness does, cache off.
make_semantic() {
    local dir="$OUT/semantic"
    rm -rf "$dir"
    mkdir -p "$dir/test_banks"
    cp -r examples/coparent/kb "$dir/"
    cp -r examples/coparent/test_banks/semantic "$dir/test_banks/"
    cat > "$dir/assay.toml" <<EOF
# Generated by bench/telemetry/run.sh: the co-parenting example's semantic bank against the
# zero-latency provider, every reranker call made (cache off).
[gate]
min_health = "CRITICAL"

[embedder]
model = "openai/bench-embed"
openai_base_url = "$BASE"

[semantic]
reranker = "openai/bench-rerank"
rate_limit_delay = 0

[retrieval]
score_threshold = -1.0

[providers]
cache = "off"
openai_base_url = "$BASE"
EOF
}

export OPENAI_API_KEY=bench
unset ASSAY_CACHE ASSAY_EMBEDDER ASSAY_RERANKER RUST_LOG
# Export off unless a run sets it: no OTEL_* variable from the caller's environment.
while IFS= read -r var; do unset "$var"; done < <(env | sed -n 's/^\(OTEL_[A-Za-z0-9_]*\)=.*/\1/p')

RUNS="$OUT/runs.jsonl"
: > "$RUNS"

# one SUITE MODE ROUND [ENV...]: one timed `assay run` of SUITE; MODE names the configuration
# (off, on, json, ...); ENV are VAR=value set for this run only. Records wall time, peak RSS,
# the sink's requests and bytes during the run, and keeps the run's JSON as
# $OUT/SUITE-MODE-ROUND.json.
one() {
    local suite="$1" mode="$2" round="$3" start end code sink_before sink_after chat_before chat_after
    shift 3
    local json="$OUT/$suite-$mode-$round.json"
    sink_before="$(stat_of "$SINK_URL")"
    chat_before="$(stat_of "${BASE%/v1}")"
    start="$(now)"
    set +e
    env "$@" /usr/bin/time -v "$ASSAY" run "$OUT/$suite" --no-save --json > "$json" 2> "$OUT/last.err"
    code=$?
    set -e
    end="$(now)"
    sink_after="$(stat_of "$SINK_URL")"
    chat_after="$(stat_of "${BASE%/v1}")"
    # Exit 0 or 1 (the health gate) are a finished run; 2 and 3 are not.
    if [[ "$code" -gt 1 ]]; then
        tail -n 30 "$OUT/last.err" >&2
        die "$suite $mode: exit code $code"
    fi
    "$PYTHON" - "$suite" "$mode" "$round" "$(echo "$end - $start" | bc -l)" "$OUT/last.err" \
        "$sink_before" "$sink_after" "$chat_before" "$chat_after" "$json" >> "$RUNS" <<'PY' \
        || die "$suite $mode: bad run"
import json, re, sys
suite, mode, rnd, wall, err = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
sb, sa, cb, ca = (json.loads(a) for a in sys.argv[6:10])
log = json.load(open(sys.argv[10], encoding="utf-8"))
text = open(err, encoding="utf-8", errors="replace").read()
rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
s = log["summary"]
if s.get("error_count", 0):
    sys.exit(f"{s['error_count']} cases errored")
chat = ca["chat_requests"] - cb["chat_requests"]
if suite == "semantic" and chat < s["total_tests"]:
    sys.exit(f"{chat} reranker calls for {s['total_tests']} cases (cache off: one a case)")
# The run's warning when spans did not reach the sink (failed requests, a full queue, a flush
# that timed out).
lost = re.search(r"telemetry: (\d+) of (\d+) spans did not reach", text)
print(json.dumps({"suite": suite, "mode": mode, "round": rnd, "wall_s": wall,
                  "rss_mb": rss / 1024, "cases": s["total_tests"], "chat_calls": chat,
                  "sink_requests": sa["requests"] - sb["requests"],
                  "sink_bytes": sa["bytes"] - sb["bytes"],
                  "spans_lost": int(lost.group(1)) if lost else 0}))
PY
    tail -n1 "$RUNS" >&2
}

SAMPLING=(OTEL_TRACES_SAMPLER="$SAMPLER" OTEL_TRACES_SAMPLER_ARG="$SAMPLER_ARG")
ON=(OTEL_EXPORTER_OTLP_ENDPOINT="$SINK_URL" "${SAMPLING[@]}")
JSON_ON=("${ON[@]}" OTEL_EXPORTER_OTLP_PROTOCOL=http/json)
ALL_ON=(OTEL_EXPORTER_OTLP_ENDPOINT="$SINK_URL" OTEL_TRACES_SAMPLER=always_on)
# shellcheck disable=SC2206
EXTRA=($EXTRA_ENV)

COUNTS="$OUT/counts.jsonl"
: > "$COUNTS"
# counted SUITE PROTOCOL: an untimed run against the counting sink with -vv; records what the
# sink decoded and what the run says it exported.
counted() {
    local suite="$1" protocol="$2" before after calls_before calls_after
    local base="$OUT/$suite-count-${protocol#http/}"
    before="$(stat_of "$COUNT_URL")"
    calls_before="$(stat_of "${BASE%/v1}")"
    set +e
    env OTEL_EXPORTER_OTLP_ENDPOINT="$COUNT_URL" OTEL_EXPORTER_OTLP_PROTOCOL="$protocol" \
        "${SAMPLING[@]}" "$ASSAY" -vv run "$OUT/$suite" --no-save --json > "$base.json" 2> "$base.err"
    local code=$?
    set -e
    [[ "$code" -le 1 ]] || die "$suite counted run ($protocol): exit $code"
    after="$(stat_of "$COUNT_URL")"
    calls_after="$(stat_of "${BASE%/v1}")"
    "$PYTHON" - "$suite" "$protocol" "$before" "$after" "$base.err" "$base.json" \
        "$calls_before" "$calls_after" >> "$COUNTS" <<'PY' || die "$suite counted run ($protocol): bad counts"
import json, re, sys
suite, protocol = sys.argv[1], sys.argv[2]
b, a = json.loads(sys.argv[3]), json.loads(sys.argv[4])
text = open(sys.argv[5], encoding="utf-8", errors="replace").read()
log = json.load(open(sys.argv[6], encoding="utf-8"))
cb, ca = json.loads(sys.argv[7]), json.loads(sys.argv[8])
m = re.search(r"telemetry: (\d+) spans exported", text)
lost = re.search(r"telemetry: (\d+) of (\d+) spans did not reach", text)
# The run's failing cases (failed or errored) and the model calls the provider answered.
verdicts = log["notable"]["verdicts"]
failing = verdicts["failed"] + verdicts["errors"]
calls = sum(ca[k] - cb[k] for k in ("chat_requests", "embeddings_requests"))
row = {"suite": suite, "protocol": protocol,
       **{k: a[k] - b[k] for k in ("requests", "bytes", "spans", "events", "failing_cases",
                                   "model_calls", "decode_errors")},
       "cases": log["summary"]["total_tests"], "run_failing": failing, "provider_calls": calls,
       "run_says_exported": int(m.group(1)) if m else None,
       "run_says_lost": int(lost.group(1)) if lost else 0}
print(json.dumps(row))
# Lost spans are reported in the table (and fail the script at the end for protobuf); a count
# that disagrees with the run's own is a broken bench. Every failing case and every model call
# must be there, whatever the sampler.
if row["decode_errors"] or not row["spans"] or (not lost and row["spans"] != row["run_says_exported"]):
    sys.exit(f"spans miscounted: {row}")
if not lost and (row["failing_cases"] != failing or row["model_calls"] != calls):
    sys.exit(f"failing cases or model calls missing at the receiver: {row}")
PY
    tail -n1 "$COUNTS" >&2
}

for suite in $SUITES; do
    case "$suite" in
        scale) make_scale ;;
        semantic) make_semantic ;;
        *) die "unknown suite $suite (scale or semantic)" ;;
    esac
    echo "== $suite: warm-up (off, on; not counted)" >&2
    one "$suite" warmup-off 0
    one "$suite" warmup-on 0 "${ON[@]}" "${EXTRA[@]}"
    echo "== $suite: $REPEAT rounds, off and on interleaved (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    for r in $(seq "$REPEAT"); do
        if (( r % 2 )); then
            one "$suite" off "$r"
            one "$suite" on "$r" "${ON[@]}" "${EXTRA[@]}"
        else
            one "$suite" on "$r" "${ON[@]}" "${EXTRA[@]}"
            one "$suite" off "$r"
        fi
    done
    for r in $(seq "$JSON_RUNS"); do
        one "$suite" json "$r" "${JSON_ON[@]}" "${EXTRA[@]}"
    done
    for r in $(seq "$ALL_RUNS"); do
        one "$suite" all "$r" "${ALL_ON[@]}" "${EXTRA[@]}"
    done
    echo "== $suite: counted runs (untimed, decoding sink, -vv)" >&2
    counted "$suite" http/protobuf
    counted "$suite" http/json
done
LOAD_AFTER="$(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------------ same results, the table
"$PYTHON" - "$OUT" "$RUNS" "$COUNTS" "$AIM" "$LOAD_AFTER" "$REPEAT" "$EXTRA_ENV" \
    "$SAMPLER $SAMPLER_ARG" > "$TABLE.tmp" <<'PY'
import glob, json, os, platform, statistics, subprocess, sys
from datetime import datetime

out, runs_file, counts_file, aim, load_after, repeat, extra, sampler = sys.argv[1:9]
aim = float(aim)
runs = [json.loads(l) for l in open(runs_file, encoding="utf-8")]
counts = [json.loads(l) for l in open(counts_file, encoding="utf-8")]
suites = list(dict.fromkeys(r["suite"] for r in runs))


def flatten(v, path=""):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from flatten(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from flatten(x, f"{path}[{i}]")
    else:
        yield path, v


# The fields that differ between export-off runs (run id, timestamps, durations) are not
# compared; every run (export on, JSON, the counted runs) must equal the first off run in all
# the others.
problems = []
for suite in suites:
    files = sorted(glob.glob(f"{out}/{suite}-*.json"))
    # Timings are never compared (a case's duration_ms can repeat by chance across the off
    # runs and still differ in another).
    docs = {os.path.basename(f): {k: v for k, v in flatten(json.load(open(f, encoding="utf-8")))
                                  if not k.endswith("duration_ms")} for f in files}
    offs = [d for n, d in docs.items() if "-off-" in n or "-warmup-off-" in n]
    volatile = set()
    for d in offs[1:]:
        volatile |= {k for k in set(d) | set(offs[0]) if d.get(k) != offs[0].get(k)}
    for name, d in docs.items():
        diff = {k for k in set(d) | set(offs[0]) if d.get(k) != offs[0].get(k)} - volatile
        if diff:
            problems.append(f"{suite}: {name} differs from export off in {sorted(diff)[:8]}")
    print(f"<!-- {suite}: fields that vary between runs and are not compared: "
          f"{sorted(volatile)} -->", file=sys.stderr)
if problems:
    sys.exit("\n".join(problems))

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
lines = [f"# telemetry: export overhead ({datetime.now():%Y-%m-%d %H:%M})", "",
         f"{os.cpu_count()} CPUs ({cpu}), {rustc}, load average after the runs {load_after}; "
         f"REPEAT={repeat}" + (f", export-on runs with {extra}" if extra else "") + ".", "",
         "| suite | cases | export | runs | median wall (s) | min | max | overhead (medians) "
         "| overhead (median of rounds) | peak RSS (MB, median) | requests / run | MB sent / run "
         "| spans lost (all runs) |",
         "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
verdicts = []
for suite in suites:
    rs = [r for r in runs if r["suite"] == suite]
    by = {m: [r for r in rs if r["mode"] == m] for m in ("off", "on", "json", "all")}
    med = {m: statistics.median(r["wall_s"] for r in v) for m, v in by.items() if v}
    rounds = {}
    for r in by["off"] + by["on"]:
        rounds.setdefault(r["round"], {})[r["mode"]] = r["wall_s"]
    per_round = [v["on"] / v["off"] - 1 for v in rounds.values() if len(v) == 2]
    for mode, label in (("off", "off"), ("on", f"on (protobuf, {sampler})"),
                        ("json", f"on (JSON, {sampler}), info"),
                        ("all", "on (protobuf, always_on), info")):
        v = by.get(mode) or []
        if not v:
            continue
        walls = [r["wall_s"] for r in v]
        over = "" if mode == "off" else f"{(med[mode] / med['off'] - 1) * 100:+.1f} %"
        over_r = (f"{statistics.median(per_round) * 100:+.1f} % "
                  f"({min(per_round) * 100:+.1f} … {max(per_round) * 100:+.1f})"
                  if mode == "on" and per_round else "")
        reqs = statistics.median(r["sink_requests"] for r in v)
        mb = statistics.median(r["sink_bytes"] for r in v) / 1e6
        lines.append(f"| {suite} | {v[0]['cases']:,} | {label} | {len(v)} | {med[mode]:.3f} "
                     f"| {min(walls):.3f} | {max(walls):.3f} | {over} | {over_r} "
                     f"| {statistics.median(r['rss_mb'] for r in v):.0f} "
                     f"| {reqs:g} | {mb:.2f} | {sum(r['spans_lost'] for r in v):,} |")
    if by["on"] and by["off"]:
        o = (med["on"] / med["off"] - 1) * 100
        verdicts.append(f"{suite}: {o:+.1f} % ({'within' if o < aim else 'ABOVE'} the {aim:g} % aim)")
lines += ["", "Spans delivered (untimed runs against the decoding sink, `-vv`):", "",
          "| suite | protocol | requests | bytes | spans received | events | the run's count exported "
          "| the run's count lost | failing cases received / in the run | model-call spans received "
          "/ provider requests |",
          "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
for c in counts:
    said = c["run_says_exported"]
    lines.append(f"| {c['suite']} | {c['protocol']} | {c['requests']} | {c['bytes']:,} "
                 f"| {c['spans']:,} | {c['events']:,} | {'–' if said is None else f'{said:,}'} "
                 f"| {c['run_says_lost']:,} | {c['failing_cases']:,} / {c['run_failing']:,} "
                 f"| {c['model_calls']:,} / {c['provider_calls']:,} |")
lines += ["", "Every run's JSON equals the export-off run's (less run id, timestamps, durations).",
          "", "Verdict: " + "; ".join(verdicts)]
print("\n".join(lines))
PY
mv "$TABLE.tmp" "$TABLE"
cat "$TABLE"
# A 100,000-case run's --json is ~83 MB (every case): the compared copies go unless asked.
if [[ "${KEEP_JSON:-0}" != 1 ]]; then
    for suite in $SUITES; do rm -f "$OUT/$suite"-*.json; done
fi
# Spans lost over protobuf (the default) fail the bench; over JSON they are reported only.
"$PYTHON" - "$RUNS" "$COUNTS" <<'PY' || die "spans were lost over http/protobuf"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
counts = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
lost = sum(r["spans_lost"] for r in runs if r["mode"] in ("on", "warmup-on"))
lost += sum(c["run_says_lost"] for c in counts if c["protocol"] == "http/protobuf")
sys.exit(1 if lost else 0)
PY
