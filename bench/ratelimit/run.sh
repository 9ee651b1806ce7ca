#!/usr/bin/env bash
# Rate-limit benchmark (issue 23): assay, promptfoo and Inspect AI against one local provider
# with token buckets on requests and on tokens, at four times the concurrency the limit allows;
# then the latency bench (a 200 ms provider with no limit, concurrency 1-16).
# See bench/README.md ("ratelimit: finishing under a provider's rate limits").
#
# The provider is crates/assay-cli/examples/ratelimit_provider.rs: OpenAI chat completions and
# Anthropic Messages, a bucket per model on requests (RPS a second, a burst of one second's
# worth) and on tokens (characters / 4 + max_tokens per request), LATENCY_MS per answer, 429s
# with retry-after, retry-after-ms and the x-ratelimit-* / anthropic-ratelimit-* headers.
# RPS x LATENCY_MS is what the limit allows in flight (40 x 100 ms = 4); every tool gets
# CONCURRENCY (16) in flight.
#
# Workloads, each run N times against freshly filled buckets (POST /reset between runs):
#   semantic-openai     assay run --banks semantic on examples/coparent, the LLM reranker over
#                       the OpenAI wire (94 reranker calls)
#   semantic-anthropic  the same over the Anthropic wire
#   simulate            assay simulate on examples/scout-quest (9 scenarios x REPEAT runs, the
#                       three roles on one Anthropic-wire model)
#   simulate-3models    the same with the three roles on three models behind one key-wide
#                       bucket (the provider's --key-wide), declared nowhere: assay has to find
#                       that they share it
#   promptfoo, inspect  the same requests (recorded from a calibration run of each workload)
#                       replayed as independent calls: the semantic prompts over the OpenAI
#                       wire, the simulation's requests (text only) over the Anthropic wire
# The token limit is TOKEN_SHARE (0.9) of what RPS requests of the workload's mean size need,
# measured in the calibration run, so the token bucket binds first.
#
# For each run: calls answered, errors, the share of requests answered 429, and the span from
# the provider's first request to its last answer against the limit's ideal: the time the
# buckets need to admit what was answered, max((answered - burst) / RPS, (tokens - token
# burst) / TPS) + LATENCY_MS. The whole process's wall time is reported beside it.
#
# Usage: bash bench/ratelimit/run.sh
#
# Environment:
#   N              runs of each tool per workload (default 3; the median is reported)
#   RPS            requests a second (default 40); LATENCY_MS per answer (default 100)
#   CONCURRENCY    calls in flight each tool is given (default 16)
#   REPEAT         runs per scenario of the simulation (default 3)
#   TOKEN_SHARE    the token limit as a share of RPS mean-sized requests (default 0.9)
#   REQUEST_BURST  the request bucket's size (default RPS: one second's worth)
#   HEADERS        what the provider sends: all (default), retry-after (only retry-after and
#                  retry-after-ms on a 429), rate (only the rate-limit headers) or none
#   SLOW_START     assay's providers.slow_start (default true; false: every limiter starts at
#                  the full concurrency, as before issue 45)
#   POOL           assay's providers.pool_shared_limits (default true; false: a limiter per
#                  model unless declared)
#   MEMORY         cold (default): each assay run starts without the limits earlier runs
#                  learned (.assay/limits.json removed), as the anchors do; warm: after the cold
#                  runs, N more runs (tool `assay-warm`), each starting from what the run before
#                  it learned, as a project's second and later runs do
#   LAT_CONCURRENCY the latency bench's levels (default "1 2 4 8 16"); LAT_MS (default 200)
#   SKIP=...       space-separated parts to skip: semantic semantic-anthropic promptfoo
#                  inspect simulate simulate-3models latency
#   BASELINE_ASSAY another assay binary (e.g. built from main) to time beside this one in the
#                  latency bench, alternating, for "no slower than before"
#   COMPARE_SLOW_START=1 also time the same binary with slow start off in the latency bench
#                  (tool `no-slow-start`), alternating
#   SKIP_BUILD=1   use the binaries already built; CARGO_TARGET_DIR as for cargo; ASSAY_BIN
#                  the assay binary to measure (default: the one built); PROFILE release
#                  (default) or debug (a quicker build: the rates are the provider's, not
#                  assay's CPU)
#   PF_VERSION     promptfoo version (default 0.121.20); INSPECT_VERSION (default 0.3.285)
# Scratch files, promptfoo (npm) and Inspect (a venv) go to bench/out/ratelimit/.
# Exits non-zero if a run of assay fails or leaves a case or a conversation without an answer.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/bench/out/ratelimit"
N="${N:-3}"
RPS="${RPS:-40}"
LATENCY_MS="${LATENCY_MS:-100}"
CONCURRENCY="${CONCURRENCY:-16}"
REPEAT="${REPEAT:-3}"
TOKEN_SHARE="${TOKEN_SHARE:-0.9}"
REQUEST_BURST="${REQUEST_BURST:-$RPS}"
LAT_CONCURRENCY="${LAT_CONCURRENCY:-1 2 4 8 16}"
LAT_MS="${LAT_MS:-200}"
HEADERS="${HEADERS:-all}"
POOL="${POOL:-true}"
SLOW_START="${SLOW_START:-true}"
PROFILE="${PROFILE:-release}"
MEMORY="${MEMORY:-cold}"
# The tool name assay's runs are recorded under, and whether they start from the limits the run
# before learned (`assay-warm`) or without them (`assay`).
ASSAY_TOOL=assay
SKIP=" ${SKIP:-} "
PF_VERSION="${PF_VERSION:-0.121.20}"
INSPECT_VERSION="${INSPECT_VERSION:-0.3.285}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

die() { echo "error: $*" >&2; exit 1; }
skip() { [[ "$SKIP" == *" $1 "* ]]; }
now_ms() { date +%s%3N; }

# ---------------------------------------------------------------------------------- build
if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    echo "== building assay, the rate-limited provider and scout-quest-mcp ($PROFILE)" >&2
    profile_flag=(--release)
    [[ "$PROFILE" == release ]] || profile_flag=(--profile "${PROFILE/debug/dev}")
    cargo build "${profile_flag[@]}" -p assay-cli --no-default-features --bin assay --example ratelimit_provider
    cargo build "${profile_flag[@]}" -p scout-quest-mcp
fi
ASSAY="${ASSAY_BIN:-$TARGET/$PROFILE/assay}"
PROVIDER="${PROVIDER_BIN:-$TARGET/$PROFILE/examples/ratelimit_provider}"
export SCOUT_QUEST_MCP="${SCOUT_QUEST_MCP:-$TARGET/$PROFILE/scout-quest-mcp}"
[[ -x "$ASSAY" && -x "$PROVIDER" && -x "$SCOUT_QUEST_MCP" ]] || die "missing binaries under $TARGET/$PROFILE"
export OPENAI_API_KEY=bench ANTHROPIC_API_KEY=bench SCOUT_QUEST_TODAY=2026-11-25

# ------------------------------------------------------------------ promptfoo and Inspect
PF="$OUT/promptfoo/node_modules/.bin/promptfoo"
if ! skip promptfoo; then
    command -v npm >/dev/null || die "npm is needed for promptfoo (or SKIP=promptfoo)"
    if [[ ! -x "$PF" ]]; then
        echo "== installing promptfoo@$PF_VERSION with npm into $OUT/promptfoo" >&2
        mkdir -p "$OUT/promptfoo"
        [[ -f "$OUT/promptfoo/package.json" ]] || echo '{"private": true}' > "$OUT/promptfoo/package.json"
        (cd "$OUT/promptfoo" && npm install --no-audit --no-fund --loglevel=error "promptfoo@$PF_VERSION")
    fi
    export PROMPTFOO_DISABLE_TELEMETRY=1 PROMPTFOO_DISABLE_UPDATE=1 PROMPTFOO_CONFIG_DIR="$OUT/promptfoo/config"
fi
INSPECT="$OUT/venv/bin/inspect"
if ! skip inspect; then
    if [[ ! -x "$INSPECT" ]]; then
        echo "== installing inspect-ai==$INSPECT_VERSION into $OUT/venv" >&2
        "$PYTHON" -m venv "$OUT/venv"
        "$OUT/venv/bin/pip" install -q "inspect-ai==$INSPECT_VERSION" openai anthropic
    fi
fi

# -------------------------------------------------------------------------------- provider
PROVIDER_PID=""
stop_provider() {
    if [[ -n "$PROVIDER_PID" ]]; then
        kill "$PROVIDER_PID" 2>/dev/null || true
        wait "$PROVIDER_PID" 2>/dev/null || true
        PROVIDER_PID=""
    fi
}
trap stop_provider EXIT
# start_provider ARGS...: starts the provider, sets URL.
start_provider() {
    stop_provider
    "$PROVIDER" --port 0 "$@" > "$OUT/provider.out" 2> "$OUT/provider.err" &
    PROVIDER_PID=$!
    URL=""
    for _ in $(seq 100); do
        URL="$(head -n1 "$OUT/provider.out" 2>/dev/null || true)"
        [[ "$URL" == http* ]] && break
        sleep 0.05
    done
    [[ "$URL" == http* ]] || die "the provider did not start: $(cat "$OUT/provider.err")"
}
reset() { curl -sf -X POST "$URL/reset" > /dev/null; }
stats() { curl -sf "$URL/stats"; }

# -------------------------------------------------------------------------------- projects
# semantic_project DIR WIRE: the co-parenting example with the LLM reranker on WIRE.
semantic_project() {
    local dir="$1" wire="$2"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r examples/coparent/kb examples/coparent/test_banks "$dir/"
    cat > "$dir/assay.toml" <<EOF
# Generated by bench/ratelimit/run.sh.
[gate]
min_health = "CRITICAL"

[semantic]
reranker = "$wire/bench-rerank"
rate_limit_delay = 0
concurrency = $CONCURRENCY

[retrieval]
score_threshold = -1.0

[providers]
cache = "off"
openai_base_url = "$URL/v1"
anthropic_base_url = "$URL"
max_concurrency = $CONCURRENCY
$(pool_line)
EOF
}

# The pooling key, only when it is not the default (an older assay does not know it).
pool_line() {
    [[ "$POOL" == true ]] || echo "pool_shared_limits = $POOL"
    [[ "$SLOW_START" == true ]] || echo "slow_start = $SLOW_START"
}

sim_project() {
    local dir="$1"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r examples/scout-quest/sim "$dir/sim"
    rm -rf "$dir/sim/reports"
    cat > "$dir/assay.toml" <<EOF
[providers]
cache = "off"
anthropic_base_url = "$URL"
openai_base_url = "$URL/v1"
max_concurrency = $CONCURRENCY
$(pool_line)
EOF
}

# record TOOL WORKLOAD RUN WALL_MS CASES_ANSWERED CASES ERRORS EXTRA_JSON: one result line with
# the provider's counters.
record() {
    local s
    s="$(stats)"
    "$PYTHON" - "$RESULTS" "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$s" <<'PY'
import json, sys
path, tool, workload, run, wall, answered, cases, errors, extra, stats = sys.argv[1:]
s = json.loads(stats)
c = s["config"]
lat = c["latency_ms"] / 1000
ideal_req = max(s["answered"] - c["request_burst"], 0) / c["rps"]
ideal_tok = max(s["tokens"] - c["token_burst"], 0) / c["tps"] if c["tps"] > 0 else 0
ideal = max(max(ideal_req, ideal_tok) + lat, 1e-3)
line = {
    "tool": tool, "workload": workload, "run": int(run), "wall_ms": float(wall),
    "cases_answered": int(answered), "cases": int(cases), "errors": int(errors),
    "requests": s["requests"], "answered": s["answered"], "throttled": s["throttled"],
    "throttled_pct": 100 * s["throttled"] / max(s["requests"], 1),
    "tokens": s["tokens"], "span_ms": s["span_ms"], "ideal_ms": ideal * 1000,
    "span_over_ideal": s["span_ms"] / (ideal * 1000), "wall_over_ideal": float(wall) / (ideal * 1000),
    "max_in_flight": s["max_in_flight"], "binding": "tokens" if ideal_tok > ideal_req else "requests",
    "extra": json.loads(extra or "{}"),
}
open(path, "a").write(json.dumps(line) + "\n")
print(f"   {tool:<10} {workload:<19} run {run}: {answered}/{cases} answered, {errors} errors, "
      f"{line['throttled_pct']:.1f}% 429 ({s['throttled']}/{s['requests']}), span {s['span_ms']:.0f} ms, "
      f"ideal {ideal*1000:.0f} ms ({line['binding']}), span/ideal {line['span_over_ideal']:.2f}, "
      f"wall/ideal {line['wall_over_ideal']:.2f}", file=sys.stderr)
PY
}

# run_assay_semantic WORKLOAD WIRE RUN
run_assay_semantic() {
    local workload="$1" wire="$2" run="$3" dir="$OUT/semantic-$2" start end rc=0
    [[ "$ASSAY_TOOL" == assay-warm ]] || rm -f "$dir/.assay/limits.json"
    reset
    start=$(now_ms)
    "$ASSAY" run "$dir" --banks semantic --concurrency "$CONCURRENCY" --no-save --json \
        > "$OUT/runlog.json" 2> "$OUT/assay.err" || rc=$?
    end=$(now_ms)
    [[ $rc -le 1 ]] || { tail -20 "$OUT/assay.err" >&2; die "assay run failed (exit $rc)"; }
    local counts
    counts="$("$PYTHON" - "$OUT/runlog.json" <<'PY'
import json, sys
log = json.load(open(sys.argv[1]))
cases = log["semantic"]["tests_run"]
errors = log["summary"]["error_count"]
print(cases - errors, cases, errors, json.dumps({"rate_limits": log.get("rate_limits", [])}))
PY
)"
    read -r answered cases errors extra <<< "$counts"
    record "$ASSAY_TOOL" "$workload" "$run" "$((end - start))" "$answered" "$cases" "$errors" "$extra"
    [[ "$errors" == 0 ]] || echo "   !! assay: $errors cases errored" >&2
}

# run_assay_simulate WORKLOAD RUN: simulate (one model) or simulate-3models (one per role).
run_assay_simulate() {
    local workload="$1" run="$2" dir="$OUT/simulate" start end rc=0 m=(bench-sim bench-sim bench-sim)
    [[ "$workload" == simulate-3models ]] && m=(bench-sim-target bench-sim-user bench-sim-judge)
    [[ "$ASSAY_TOOL" == assay-warm ]] || rm -f "$dir/.assay/limits.json"
    reset
    start=$(now_ms)
    "$ASSAY" simulate "$dir" --model "anthropic/${m[0]}" --simulator-model "anthropic/${m[1]}" \
        --evaluator-model "anthropic/${m[2]}" --repeat "$REPEAT" --concurrency "$CONCURRENCY" \
        --output "$OUT/sim-report.md" > "$OUT/sim.out" 2> "$OUT/sim.err" || rc=$?
    end=$(now_ms)
    [[ $rc -le 1 ]] || { tail -20 "$OUT/sim.err" >&2; die "assay simulate failed (exit $rc)"; }
    local counts
    counts="$("$PYTHON" - "$OUT/sim-report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
runs = len(r["runs"])
errors = r["summary"]["errors"]
print(runs - errors, runs, errors, json.dumps({"rate_limits": r.get("rate_limits", [])}))
PY
)"
    read -r answered cases errors extra <<< "$counts"
    record "$ASSAY_TOOL" "$workload" "$run" "$((end - start))" "$answered" "$cases" "$errors" "$extra"
}

# ------------------------------------------------------------- promptfoo and Inspect runs
# write_replays DUMP PREFIX: from the provider's dump, PREFIX.jsonl with one
# {"wire", "model", "max_tokens", "messages": [{"role", "content"}...]} per request (system
# first; tool traffic flattened to text).
write_replays() {
    "$PYTHON" - "$1" "$2.jsonl" <<'PY'
import json, sys
def text(content):
    if isinstance(content, str):
        return content
    parts = []
    for block in content or []:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "tool_use":
            parts.append(f"[calls {block.get('name')} with {json.dumps(block.get('input'))}]")
        elif kind == "tool_result":
            c = block.get("content")
            parts.append(f"[tool result: {c if isinstance(c, str) else json.dumps(c)}]")
    return "\n".join(p for p in parts if p) or "(no text)"
out = open(sys.argv[2], "w")
for line in open(sys.argv[1]):
    d = json.loads(line)
    b = d["body"]
    messages = []
    system = b.get("system")
    if isinstance(system, list):
        system = "\n".join(x.get("text", "") for x in system)
    for m in b.get("messages", []):
        if m.get("role") == "system":
            system = m.get("content")
            continue
        role = "assistant" if m.get("role") == "assistant" else "user"
        content = text(m.get("content")) if d["wire"] == "anthropic" else (m.get("content") or "(no text)")
        if m.get("role") == "tool":
            content = f"[tool result: {m.get('content')}]"
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"] += "\n" + content
        else:
            messages.append({"role": role, "content": content})
    if system:
        messages.insert(0, {"role": "system", "content": system})
    max_tokens = b.get("max_tokens") or b.get("max_completion_tokens") or 1024
    out.write(json.dumps({"wire": d["wire"], "model": b.get("model"), "max_tokens": max_tokens,
                          "messages": messages}) + "\n")
PY
}

# run_promptfoo WORKLOAD REPLAYS RUN
run_promptfoo() {
    local workload="$1" replays="$2" run="$3" dir="$OUT/promptfoo-$1" start end rc=0
    mkdir -p "$dir"
    "$PYTHON" - "$replays" "$dir" "$URL" <<'PY'
import json, sys
replays, d, url = sys.argv[1:]
rows = [json.loads(l) for l in open(replays)]
wire, model = rows[0]["wire"], rows[0]["model"]
max_tokens = max(r["max_tokens"] for r in rows)
if wire == "openai":
    provider = {"id": f"openai:chat:{model}",
                "config": {"apiBaseUrl": f"{url}/v1", "apiKey": "bench", "max_tokens": max_tokens, "temperature": 0}}
else:
    provider = {"id": f"anthropic:messages:{model}",
                "config": {"apiBaseUrl": url, "apiKey": "bench", "max_tokens": max_tokens, "temperature": 0}}
config = {"description": "rate-limit bench", "prompts": ["{{ messages | dump }}"], "providers": [provider],
          "tests": [{"vars": {"messages": r["messages"]}} for r in rows]}
json.dump(config, open(f"{d}/promptfooconfig.json", "w"))
PY
    reset
    start=$(now_ms)
    (cd "$dir" && ANTHROPIC_BASE_URL="$URL" "$PF" eval -c promptfooconfig.json --no-cache --no-table \
        --no-write --no-progress-bar --no-share -j "$CONCURRENCY" -o "$dir/out.json") \
        > "$dir/stdout.txt" 2> "$dir/stderr.txt" || rc=$?
    end=$(now_ms)
    local counts
    counts="$("$PYTHON" - "$dir/out.json" "$replays" <<'PY'
import json, sys
cases = sum(1 for _ in open(sys.argv[2]))
try:
    r = json.load(open(sys.argv[1]))
    st = r["results"]["stats"]
    errors = st.get("errors", 0)
    answered = st.get("successes", 0) + st.get("failures", 0)
except Exception as e:
    answered, errors = 0, cases
print(answered, cases, errors, "{}")
PY
)"
    read -r answered cases errors extra <<< "$counts"
    record promptfoo "$workload" "$run" "$((end - start))" "$answered" "$cases" "$errors" "$extra"
    [[ $rc -le 100 ]] || echo "   (promptfoo exit $rc)" >&2
}

# run_inspect WORKLOAD REPLAYS RUN
run_inspect() {
    local workload="$1" replays="$2" run="$3" dir="$OUT/inspect-$1" start end rc=0
    mkdir -p "$dir"
    rm -rf "$dir/logs"
    cat > "$dir/task.py" <<'PY'
import json, os
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import (ChatMessageAssistant, ChatMessageSystem, ChatMessageUser,
                              GenerateConfig)
from inspect_ai.solver import generate

ROLES = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}

@task
def bench():
    rows = [json.loads(l) for l in open(os.environ["RL_REPLAYS"])]
    samples = [Sample(id=i, input=[ROLES[m["role"]](content=m["content"]) for m in r["messages"]])
               for i, r in enumerate(rows)]
    return Task(dataset=samples, solver=generate(),
                config=GenerateConfig(max_tokens=max(r["max_tokens"] for r in rows), temperature=0))
PY
    local model wire
    model="$("$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["model"])' "$replays")"
    wire="$("$PYTHON" -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["wire"])' "$replays")"
    # Inspect's openai provider speaks the Responses API unless told otherwise; the provider
    # (like most OpenAI-compatible servers) speaks chat completions.
    local base="$URL" extra=()
    [[ "$wire" == openai ]] && base="$URL/v1" extra=(-M responses_api=false)
    reset
    start=$(now_ms)
    (cd "$dir" && RL_REPLAYS="$replays" INSPECT_LOG_DIR="$dir/logs" "$INSPECT" eval task.py \
        --model "$wire/$model" "${extra[@]}" --model-base-url "$base" \
        --max-connections "$CONCURRENCY" --log-format json --display none --no-fail-on-error) \
        > "$dir/stdout.txt" 2> "$dir/stderr.txt" || rc=$?
    end=$(now_ms)
    local counts
    counts="$("$PYTHON" - "$dir/logs" "$replays" <<'PY'
import glob, json, sys
cases = sum(1 for _ in open(sys.argv[2]))
logs = sorted(glob.glob(f"{sys.argv[1]}/*.json"))
answered, errors = 0, cases
if logs:
    log = json.load(open(logs[-1]))
    samples = log.get("samples") or []
    errors = sum(1 for s in samples if s.get("error"))
    answered = len(samples) - errors
    errors += cases - len(samples)
print(answered, cases, errors, "{}")
PY
)"
    read -r answered cases errors extra <<< "$counts"
    record inspect "$workload" "$run" "$((end - start))" "$answered" "$cases" "$errors" "$extra"
    [[ $rc == 0 ]] || echo "   (inspect exit $rc)" >&2
}

# ---------------------------------------------------------------------- the rate-limited runs
# calibrate WORKLOAD: one run with no limit, recording the requests; prints the mean tokens of
# a request.
mean_tokens() {
    curl -sf "$URL/stats" | "$PYTHON" -c 'import json,sys; s=json.load(sys.stdin); print(s["tokens"]/max(s["answered"],1))'
}

workload_runs() {
    local workload="$1"
    local wire="${workload#semantic-}"
    echo "== $workload: calibration run (no limit) to size the token bucket and record the requests" >&2
    local key_wide=()
    [[ "$workload" == simulate-3models ]] && key_wide=(--key-wide)
    start_provider --rps 100000 --latency-ms 0 --dump "$OUT/$workload.dump.jsonl"
    if [[ "$workload" == simulate* ]]; then
        sim_project "$OUT/simulate"
        run_assay_simulate "$workload" 0 > /dev/null
    else
        semantic_project "$OUT/semantic-$wire" "$wire"
        run_assay_semantic "$workload" "$wire" 0
    fi
    local mean tps
    mean="$(mean_tokens)"
    tps="$("$PYTHON" -c "print(round($RPS * $mean * $TOKEN_SHARE))")"
    write_replays "$OUT/$workload.dump.jsonl" "$OUT/$workload.replay"
    echo "== $workload: $RPS requests/s (burst $REQUEST_BURST), $tps tokens/s (mean request $mean tokens), $LATENCY_MS ms, concurrency $CONCURRENCY, headers $HEADERS${key_wide:+, one bucket for every model}" >&2
    start_provider --rps "$RPS" --request-burst "$REQUEST_BURST" --tps "$tps" --latency-ms "$LATENCY_MS" \
        --headers "$HEADERS" "${key_wide[@]}"
    if [[ "$workload" == simulate* ]]; then
        sim_project "$OUT/simulate"
    else
        semantic_project "$OUT/semantic-$wire" "$wire"
    fi
    for i in $(seq "$N"); do
        if [[ "$workload" == simulate* ]]; then
            run_assay_simulate "$workload" "$i"
        else
            run_assay_semantic "$workload" "$wire" "$i"
        fi
        if [[ "$workload" != semantic-anthropic && "$workload" != simulate-3models ]]; then
            skip promptfoo || run_promptfoo "$workload" "$OUT/$workload.replay.jsonl" "$i"
            skip inspect || run_inspect "$workload" "$OUT/$workload.replay.jsonl" "$i"
        fi
    done
    if [[ "$MEMORY" == warm ]]; then
        # Each warm run starts from the limits the run before it learned (the first from the
        # last cold run's).
        ASSAY_TOOL=assay-warm
        for i in $(seq "$N"); do
            if [[ "$workload" == simulate* ]]; then
                run_assay_simulate "$workload" "$i"
            else
                run_assay_semantic "$workload" "$wire" "$i"
            fi
        done
        ASSAY_TOOL=assay
    fi
}

skip semantic || workload_runs semantic-openai
skip semantic || skip semantic-anthropic || workload_runs semantic-anthropic
skip simulate || workload_runs simulate
skip simulate-3models || workload_runs simulate-3models

# ---------------------------------------------------------------------------- latency bench
if ! skip latency; then
    echo "== latency: no limit, $LAT_MS ms a call, concurrency $LAT_CONCURRENCY" >&2
    start_provider --rps 100000 --latency-ms "$LAT_MS"
    semantic_project "$OUT/semantic-latency" openai
    # tool=binary=project
    binaries=("assay=$ASSAY=$OUT/semantic-latency")
    [[ -n "${BASELINE_ASSAY:-}" ]] && binaries+=("baseline=$BASELINE_ASSAY=$OUT/semantic-latency")
    if [[ "${COMPARE_SLOW_START:-0}" == 1 ]]; then
        # The same binary with slow start off: every limiter at the full concurrency at once.
        rm -rf "$OUT/semantic-latency-nss"
        cp -r "$OUT/semantic-latency" "$OUT/semantic-latency-nss"
        sed -i 's/^\[providers\]$/[providers]\nslow_start = false/' "$OUT/semantic-latency-nss/assay.toml"
        binaries+=("no-slow-start=$ASSAY=$OUT/semantic-latency-nss")
    fi
    for c in $LAT_CONCURRENCY; do
        for dir in "$OUT/semantic-latency" "$OUT/semantic-latency-nss"; do
            [[ -d "$dir" ]] || continue
            sed -i "s/^concurrency = .*/concurrency = $c/; s/^max_concurrency = .*/max_concurrency = $c/" \
                "$dir/assay.toml"
        done
        for i in $(seq "$N"); do
          for triple in "${binaries[@]}"; do
            tool="${triple%%=*}" rest="${triple#*=}"
            bin="${rest%%=*}" dir="${rest#*=}"
            reset
            start=$(now_ms)
            "$bin" run "$dir" --banks semantic --no-save --json \
                > "$OUT/runlog.json" 2> "$OUT/assay.err" || [[ $? -le 1 ]] || die "$tool run failed"
            end=$(now_ms)
            s="$(stats)"
            "$PYTHON" - "$RESULTS" "$c" "$i" "$((end - start))" "$LAT_MS" "$s" "$OUT/runlog.json" "$tool" <<'PY'
import json, math, sys
path, c, run, wall, lat, stats, runlog, tool = sys.argv[1:]
s, c, lat = json.loads(stats), int(c), float(lat)
log = json.load(open(runlog))
calls = s["answered"]
ideal = math.ceil(calls / c) * lat
line = {"tool": tool, "workload": f"latency-c{c}", "run": int(run), "wall_ms": float(wall),
        "requests": s["requests"], "answered": calls, "throttled": s["throttled"],
        "span_ms": s["span_ms"], "ideal_ms": ideal, "span_over_ideal": s["span_ms"] / ideal,
        "wall_over_ideal": float(wall) / ideal, "errors": log["summary"]["error_count"]}
open(path, "a").write(json.dumps(line) + "\n")
print(f"   latency {tool:<8} c={c:<3} run {run}: {calls} calls, span {s['span_ms']:.0f} ms, wall {wall} ms, "
      f"ideal {ideal:.0f} ms (ceil(calls/c) x {lat:.0f}), span/ideal {line['span_over_ideal']:.3f}, "
      f"wall/ideal {line['wall_over_ideal']:.3f}", file=sys.stderr)
PY
          done
        done
    done
fi
stop_provider

# -------------------------------------------------------------------------------- summary
"$PYTHON" - "$RESULTS" <<'PY' | tee "$OUT/summary.md"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(xs): return statistics.median(xs) if xs else float("nan")
groups = {}
for r in rows:
    if r["run"] == 0:
        continue
    groups.setdefault((r["workload"], r["tool"]), []).append(r)
print("| workload | tool | runs | answered | errors | 429 share | span / ideal (median) | wall / ideal (median) | span (ms) | ideal (ms) |")
print("|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
for (w, t), rs in groups.items():
    if w.startswith("latency"):
        continue
    ans = f"{min(r['cases_answered'] for r in rs)}-{max(r['cases_answered'] for r in rs)} of {rs[0]['cases']}"
    print(f"| {w} | {t} | {len(rs)} | {ans} | {sum(r['errors'] for r in rs)} | "
          f"{med([r['throttled_pct'] for r in rs]):.1f}% | {med([r['span_over_ideal'] for r in rs]):.2f} | "
          f"{med([r['wall_over_ideal'] for r in rs]):.2f} | {med([r['span_ms'] for r in rs]):.0f} | "
          f"{med([r['ideal_ms'] for r in rs]):.0f} |")
if any(w.startswith("latency") for (w, t) in groups):
    print()
    print("| concurrency | binary | calls | ideal (ms) | span (ms, median) | span / ideal | wall (ms, median) | wall / ideal |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for (w, t), rs in groups.items():
        if not w.startswith("latency"):
            continue
        print(f"| {w[len('latency-c'):]} | {t} | {rs[0]['answered']} | {rs[0]['ideal_ms']:.0f} | "
              f"{med([r['span_ms'] for r in rs]):.0f} | {med([r['span_over_ideal'] for r in rs]):.3f} | "
              f"{med([r['wall_ms'] for r in rs]):.0f} | {med([r['wall_over_ideal'] for r in rs]):.3f} |")
PY
"$PYTHON" - "$RESULTS" <<'PY'
import json, sys
bad = [r for r in map(json.loads, open(sys.argv[1])) if r["tool"].startswith("assay") and r.get("errors")]
if bad:
    sys.exit(f"assay left {len(bad)} run(s) with errors")
PY
