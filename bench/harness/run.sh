#!/usr/bin/env bash
# Harness-overhead benchmark: `assay run` on the bundled co-parenting example (all four banks,
# 147 cases) against a zero-latency local OpenAI-compatible provider, in cases per second,
# next to promptfoo evaluating 1,000 cases with its `echo` provider, on the same machine in
# the same session. See bench/README.md ("harness: overhead").
#
# Also measured, to separate a run's fixed cost (process start, project load, store import)
# from its cost per case: assay with its in-process built-in embedder (no reranker, no HTTP:
# the counterpart of promptfoo's in-process echo provider), the same project with every bank
# copied SCALE times (new test ids; semantic prompts made distinct, so each copy is a new
# embedding and reranker call), and promptfoo with PF_SMALL cases. Cost per case =
# (time of the large run - time of the small run) / (cases added), from the medians.
#
# Usage: bash bench/harness/run.sh
#
# Environment:
#   N                  timed runs of each engine, median reported (default 7); one warm-up
#                      run of each comes first and is not counted
#   PF_CASES           promptfoo test cases (default 1000)
#   PF_VERSION         promptfoo version installed with npm (default 0.121.20: the newest that
#                      supports Node 20; use `latest` on Node >= 22.22)
#   PF_HIGH_J          promptfoo's "best case" --max-concurrency (default 64)
#   PF_SMALL           promptfoo test cases of the small run (default 100)
#   SCALE              how many copies of every bank the scaled assay project has (default 10)
#   SKIP_BUILD=1       use the binaries already in the target directory
#   CARGO_TARGET_DIR   as for cargo (default: target/ in the workspace)
#
# Builds `assay` with --no-default-features (no candle: the `local-models` feature adds the
# local/ and hf/ embedders only; the path measured here, OpenAI-compatible HTTP embedder and
# LLM reranker, is the same code with or without it). Scratch files go to bench/out/harness/.
# Prints a table of cases/s (median, min, max) and the ratios assay / promptfoo.
# Exits non-zero if a run fails, a case errors, or assay did not use the provider.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/bench/out/harness"
N="${N:-7}"
PF_CASES="${PF_CASES:-1000}"
PF_SMALL="${PF_SMALL:-100}"
SCALE="${SCALE:-10}"
PF_VERSION="${PF_VERSION:-0.121.20}"
PF_HIGH_J="${PF_HIGH_J:-64}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"

die() { echo "error: $*" >&2; exit 1; }
now() { date +%s.%N; }

# ---------------------------------------------------------------------------------- build
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    echo "== building assay and the zero-latency provider (release)" >&2
    cargo build --release -p assay-cli --no-default-features \
        --bin assay --example zero_latency_provider
fi
ASSAY="$TARGET/release/assay"
PROVIDER="$TARGET/release/examples/zero_latency_provider"
[[ -x "$ASSAY" && -x "$PROVIDER" ]] || die "missing $ASSAY or $PROVIDER"

# ------------------------------------------------------------------------------ promptfoo
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
        echo "== installing nodejs and npm with apt-get" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
    else
        die "node and npm are needed for promptfoo"
    fi
fi
PF_DIR="$OUT/promptfoo"
PF="$PF_DIR/node_modules/.bin/promptfoo"
mkdir -p "$PF_DIR"
pf_version() {
    "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' \
        "$PF_DIR/node_modules/promptfoo/package.json" 2>/dev/null
}
installed="$(pf_version || true)"
if [[ ! -x "$PF" || ( "$PF_VERSION" != latest && "$installed" != "$PF_VERSION" ) ]]; then
    echo "== installing promptfoo@$PF_VERSION with npm (node $(node --version))" >&2
    [[ -f "$PF_DIR/package.json" ]] || echo '{"private": true}' > "$PF_DIR/package.json"
    (cd "$PF_DIR" && npm install --no-audit --no-fund --loglevel=error "promptfoo@$PF_VERSION")
fi
PF_ACTUAL="$(pf_version)" || die "promptfoo is not installed in $PF_DIR"
export PROMPTFOO_DISABLE_TELEMETRY=1 PROMPTFOO_DISABLE_UPDATE=1 PROMPTFOO_DISABLE_SHARING=1 \
    PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION=1 PROMPTFOO_SELF_HOSTED=1 \
    PROMPTFOO_CONFIG_DIR="$PF_DIR/home" NO_COLOR=1

"$PYTHON" - "$PF_DIR/config.yaml" "$PF_CASES" "$PF_DIR/config_small.yaml" "$PF_SMALL" <<'PY'
# N cases: varied vars, one prompt template, the echo provider, one `contains` each.
import json, random, sys


def write(path, n):
    rng = random.Random(7)
    topics = ["pickup", "holidays", "school", "medical", "money", "schedule", "new partner",
              "sports", "birthday", "travel"]
    moods = ["calm", "worried", "angry", "tired", "hopeful"]
    lines = ["description: assay harness-overhead reference (echo provider)",
             "prompts:", "  - 'Co-parenting message about {{topic}} ({{mood}}): {{message}}'",
             "providers:", "  - echo", "tests:"]
    for i in range(n):
        topic, mood = rng.choice(topics), rng.choice(moods)
        verb = rng.choice(['changed', 'missed', 'moved', 'asked about'])
        message = f"case {i}: my co-parent {verb} the {topic} plan"
        lines += ["  - vars:",
                  f"      topic: {json.dumps(topic)}",
                  f"      mood: {json.dumps(mood)}",
                  f"      message: {json.dumps(message)}",
                  "    assert:",
                  "      - type: contains",
                  f"        value: {json.dumps(f'case {i}:')}"]
    open(path, "w", encoding="utf-8").write("\n".join(lines) + "\n")


write(sys.argv[1], int(sys.argv[2]))
write(sys.argv[3], int(sys.argv[4]))
PY

# ------------------------------------------------------------------------------- provider
PROVIDER_PID=""
cleanup() {
    if [[ -n "$PROVIDER_PID" ]]; then
        kill "$PROVIDER_PID" 2>/dev/null || true
        wait "$PROVIDER_PID" 2>/dev/null || true
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$PROVIDER" --port 0 > "$OUT/provider.url" 2> "$OUT/provider.log" &
PROVIDER_PID=$!
for _ in $(seq 100); do
    [[ -s "$OUT/provider.url" ]] && break
    kill -0 "$PROVIDER_PID" 2>/dev/null || die "the provider exited: $(cat "$OUT/provider.log")"
    sleep 0.05
done
BASE="$(head -n1 "$OUT/provider.url")"
[[ "$BASE" == http://127.0.0.1:*/v1 ]] || die "the provider printed no URL"
STATS_URL="${BASE%/v1}/stats"
echo "== provider at $BASE" >&2
stats() { curl -fsS "$STATS_URL"; }

# -------------------------------------------------------------------------------- projects
# make_project DIR CACHE [SCALE]: a scratch copy of examples/coparent pointed at the provider,
# with every bank copied SCALE times (default 1).
make_project() {
    local dir="$1" cache="$2" scale="${3:-1}"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r examples/coparent/kb examples/coparent/test_banks "$dir/"
    scale_banks "$dir" "$scale"
    cat > "$dir/assay.toml" <<EOF
# Generated by bench/harness/run.sh: the co-parenting example against the zero-latency provider.
[weights]
semantic = 0.60
state = 0.15
pattern = 0.15
always = 0.10

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
cache = "$cache"
openai_base_url = "$BASE"
EOF
}
# make_builtin_project DIR: a scratch copy of examples/coparent as it ships: the built-in
# embedder, in process, no reranker, no provider.
make_builtin_project() {
    local dir="$1"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r examples/coparent/kb examples/coparent/test_banks examples/coparent/assay.toml "$dir/"
}

# scale_banks DIR SCALE: every bank's cases SCALE times, copies with new test ids (`-xK`);
# a semantic copy's prompt gets a distinct ending, so it is a new query for the embedder and
# the reranker.
scale_banks() {
    "$PYTHON" - "$1/test_banks" "$2" <<'PY'
import json, pathlib, sys
root, scale = pathlib.Path(sys.argv[1]), int(sys.argv[2])
for path in root.glob("*/*.json"):
    if path.parent.name == "history" or path.name == "pattern_rules.json":
        continue
    bank = json.loads(path.read_text(encoding="utf-8"))
    cases = bank["tests"]
    copies = []
    for k in range(2, scale + 1):
        for case in cases:
            copy = dict(case, test_id=f"{case['test_id']}-x{k}")
            if path.parent.name == "semantic":
                copy["prompt"] = f"{case['prompt']} (copy {k})"
            copies.append(copy)
    bank["tests"] = cases + copies
    path.write_text(json.dumps(bank, indent=1), encoding="utf-8")
PY
}

make_project "$OUT/coparent-cache-off" off
make_project "$OUT/coparent-cache-warm" read-write
make_project "$OUT/coparent-x$SCALE-cache-off" off "$SCALE"
make_builtin_project "$OUT/coparent-builtin"
export OPENAI_API_KEY=bench
unset ASSAY_CACHE ASSAY_EMBEDDER ASSAY_RERANKER RUST_LOG

# check_run JSON_FILE MODEL...: prints total_tests; fails on errors, or when the run's semantic
# setup does not name every MODEL (a run that skipped the provider).
check_run() {
    "$PYTHON" - "$@" <<'PY'
import json, sys
log = json.load(open(sys.argv[1], encoding="utf-8"))
s = log["summary"]
setup = json.dumps(log.get("setup", {}).get("semantic", ""))
if s.get("error_count", 0) != 0:
    sys.exit(f"{s['error_count']} cases errored")
for model in sys.argv[2:]:
    if model not in setup:
        sys.exit(f"setup.semantic does not name {model}: {setup[:300]}")
print(s["total_tests"])
PY
}

TIMES="$OUT/times.tsv"
: > "$TIMES"

# timed LABEL CASES_OR_EMPTY CMD...: one timed run (stdout to $OUT/last.json), recorded. An
# empty CASES reads them from the RunLog (with `check_run`, for the models in $EXPECT).
EXPECT="bench-embed bench-rerank"
timed() {
    local label="$1" cases="$2" start end rc
    shift 2
    start="$(now)"
    set +e
    "$@" > "$OUT/last.json" 2> "$OUT/last.err"
    rc=$?
    set -e
    end="$(now)"
    if [[ "$rc" -ne 0 ]]; then
        tail -n 20 "$OUT/last.err" >&2
        die "$label: exit code $rc"
    fi
    if [[ -z "$cases" ]]; then
        # shellcheck disable=SC2086
        cases="$(check_run "$OUT/last.json" $EXPECT)" || die "$label: bad run"
    fi
    printf '%s\t%s\t%s\n' "$label" "$cases" "$(echo "$end - $start" | bc -l)" | tee -a "$TIMES" >&2
}

run_assay() { "$ASSAY" run "$1" --no-save --json; }
# run_pf J [CONFIG]: promptfoo's eval with --max-concurrency J (config.yaml by default).
run_pf() {
    (cd "$PF_DIR" && "$PF" eval -c "${2:-config.yaml}" --no-cache --no-table --no-write \
        --no-progress-bar --no-share -j "$1")
}
run_builtin() { EXPECT="builtin/hashed-ngrams" timed "$@"; }

echo "== warm-up runs (not counted)" >&2
before="$(stats)"
timed warmup-assay-off "" run_assay "$OUT/coparent-cache-off"
after="$(stats)"
echo "   provider: $before -> $after" >&2
timed warmup-assay-warm "" run_assay "$OUT/coparent-cache-warm"
timed warmup-assay-scaled "" run_assay "$OUT/coparent-x$SCALE-cache-off"
run_builtin warmup-assay-builtin "" run_assay "$OUT/coparent-builtin"
timed warmup-promptfoo-small "$PF_SMALL" run_pf 4 config_small.yaml
timed warmup-promptfoo "$PF_CASES" run_pf 4
# promptfoo prints "✓ 1,000 passed (100%)" and "0 errors (0%)" in its summary.
"$PYTHON" - "$OUT/last.json" "$PF_CASES" <<'PY' || { tail -n 30 "$OUT/last.json" >&2; die "promptfoo did not pass all $PF_CASES cases"; }
import re, sys
text, n = open(sys.argv[1], encoding="utf-8").read(), int(sys.argv[2])
passed = re.search(r"([\d,]+) passed", text)
errors = re.search(r"([\d,]+) errors", text)
ok = passed and int(passed.group(1).replace(",", "")) == n and errors and errors.group(1) == "0"
sys.exit(0 if ok else 1)
PY

# assay_config K: the K-th assay configuration of a round, timed.
assay_config() {
    case "$1" in
        0)
            local before after
            before="$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["chat_requests"])' "$(stats)")"
            timed assay-cache-off "" run_assay "$OUT/coparent-cache-off"
            after="$("$PYTHON" -c 'import json,sys; print(json.loads(sys.argv[1])["chat_requests"])' "$(stats)")"
            [[ "$after" -gt "$before" ]] || die "assay (cache off) made no chat calls to the provider"
            ;;
        1) timed assay-cache-warm "" run_assay "$OUT/coparent-cache-warm" ;;
        2) run_builtin assay-builtin "" run_assay "$OUT/coparent-builtin" ;;
        3) timed assay-scaled "" run_assay "$OUT/coparent-x$SCALE-cache-off" ;;
    esac
}

echo "== $N timed rounds (engines interleaved)" >&2
for i in $(seq "$N"); do
    # The assay configurations in a rotated order: the first run after promptfoo's (which
    # churn memory and caches) is a different one each round.
    for k in 0 1 2 3; do
        assay_config $(( (k + i) % 4 ))
    done
    timed promptfoo-small-j4 "$PF_SMALL" run_pf 4 config_small.yaml
    timed promptfoo-j4 "$PF_CASES" run_pf 4
    timed "promptfoo-j$PF_HIGH_J" "$PF_CASES" run_pf "$PF_HIGH_J"
done
echo "   provider totals: $(stats)" >&2

"$PYTHON" - "$TIMES" "$PF_HIGH_J" "$PF_ACTUAL" "$SCALE" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1], encoding="utf-8")]
high, version, scale = sys.argv[2], sys.argv[3], sys.argv[4]
by, secs = {}, {}
for label, cases, s in rows:
    if label.startswith("warmup"):
        continue
    by.setdefault(label, []).append(int(cases) / float(s))
    secs.setdefault(label, []).append(float(s))
order = ["assay-cache-off", "assay-cache-warm", "assay-builtin", "assay-scaled",
         "promptfoo-small-j4", "promptfoo-j4", f"promptfoo-j{high}"]
names = {"assay-cache-off": "assay, cache off (real HTTP calls)",
         "assay-cache-warm": "assay, cache on and warm",
         "assay-builtin": "assay, built-in embedder in process (no HTTP, no reranker)",
         "assay-scaled": f"assay, cache off, every bank x{scale}",
         "promptfoo-small-j4": f"promptfoo {version} echo, -j 4, small config",
         "promptfoo-j4": f"promptfoo {version} echo, -j 4 (default)",
         f"promptfoo-j{high}": f"promptfoo {version} echo, -j {high}"}
cases = {label: int(c) for label, c, _ in rows}
med = {k: statistics.median(v) for k, v in by.items()}
print(f"\n| engine | cases/run | runs | median cases/s | min | max | median s/run |")
print("|---|---:|---:|---:|---:|---:|---:|")
for k in order:
    v = by[k]
    print(f"| {names[k]} | {cases[k]} | {len(v)} | {med[k]:,.1f} | {min(v):,.1f} "
          f"| {max(v):,.1f} | {statistics.median(secs[k]):.4f} |")
pf_best = max(med["promptfoo-j4"], med[f"promptfoo-j{high}"])
print()
for k in ["assay-cache-off", "assay-cache-warm", "assay-builtin"]:
    print(f"{names[k]}: {med[k] / med['promptfoo-j4']:.1f}x promptfoo -j 4, "
          f"{med[k] / pf_best:.1f}x promptfoo's best median")
# Per round ratio (same round, neighbouring in time), median: less sensitive to drifting load.
rounds = len(by["assay-cache-off"])
for k in ["assay-cache-off", "assay-cache-warm", "assay-builtin"]:
    rs = [by[k][i] / max(by["promptfoo-j4"][i], by[f"promptfoo-j{high}"][i]) for i in range(rounds)]
    print(f"{names[k]}: per-round ratio to promptfoo's better setting, median "
          f"{statistics.median(rs):.1f}x (min {min(rs):.1f}, max {max(rs):.1f})")


# Cost per case: the difference of the median wall times over the cases added.
def per_case(small, large):
    added = cases[large] - cases[small]
    return (statistics.median(secs[large]) - statistics.median(secs[small])) / added


a = per_case("assay-cache-off", "assay-scaled")
p = per_case("promptfoo-small-j4", "promptfoo-j4")
fixed_a = statistics.median(secs["assay-cache-off"]) - a * cases["assay-cache-off"]
fixed_p = statistics.median(secs["promptfoo-j4"]) - p * cases["promptfoo-j4"]
print(f"\ncost per case: assay (cache off, real HTTP) {a * 1e6:,.1f} us ({1 / a:,.0f} cases/s), "
      f"promptfoo -j 4 {p * 1e6:,.1f} us ({1 / p:,.0f} cases/s): {p / a:.1f}x")
print(f"fixed cost per run: assay {fixed_a * 1e3:.1f} ms, promptfoo {fixed_p * 1e3:.0f} ms")
goal = med["assay-cache-off"] / pf_best
print(f"\ngoal (>= 100x promptfoo's cases/s, cache off, whole runs): "
      f"{'MET' if goal >= 100 else 'NOT MET'} ({goal:.1f}x); per case: {p / a:.1f}x")
PY
