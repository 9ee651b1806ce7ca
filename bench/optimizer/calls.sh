#!/usr/bin/env bash
# Model calls of `assay optimize` on examples/gaia-mini (7 agents × 4 prompts, 10 optimization
# and 10 evaluation cases) with TRIALS (100) trials against the local OpenAI-compatible server
# crates/assay-cli/examples/prompt_provider.rs, next to the naive count (trials × cases × agents).
# The saving comes from the call cache (identical chain prefixes across trials) and from not
# re-running duplicate trials. Writes bench/out/optimizer/calls.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/optimizer
TRIALS="${TRIALS:-100}"
PROFILE="${PROFILE:-release}"
mkdir -p "$OUT"
cargo build --profile "$PROFILE" -p assay-cli --bin assay --example prompt_provider
DIRNAME=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
TARGET="${CARGO_TARGET_DIR:-target}/$DIRNAME"
WORK=$(mktemp -d)
trap 'kill "$PROVIDER_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$TARGET/examples/prompt_provider" > "$WORK/url" &
PROVIDER_PID=$!
until [ -s "$WORK/url" ]; do sleep 0.1; done
URL=$(head -1 "$WORK/url")
cp -r examples/gaia-mini "$WORK/project"
rm -rf "$WORK/project/experiments" "$WORK/project/.assay"
cat > "$WORK/project/assay.toml" <<TOML
[providers]
openai_base_url = "$URL/v1"

[optimize]
model = "openai/fake-agent"
grader_model = "openai/fake-grader"
TOML
OPENAI_API_KEY=bench "$TARGET/assay" optimize "$WORK/project" --experiment-name bench \
  --optimization-trials "$TRIALS" --json > "$WORK/report.json" 2> "$WORK/stderr" \
  || { cat "$WORK/stderr" >&2; exit 1; }
curl -sf "$URL/stats" > "$WORK/stats.json"
python3 - "$WORK/report.json" "$WORK/stats.json" "$TRIALS" > "$OUT/calls.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1])); stats = json.load(open(sys.argv[2])); trials = int(sys.argv[3])
agents = len(report["agents"]); opt = report["baseline"]["data"]["cases"]
ev = report["evaluation"]["data"]["cases"]
outcomes = {}
for t in report["trials"]:
    outcomes[t["outcome"]] = outcomes.get(t["outcome"], 0) + 1
naive_study = trials * opt * agents
print(json.dumps({
    "trials": trials, "agents": agents, "optimization_cases": opt, "evaluation_cases": ev,
    "trial_outcomes": outcomes,
    "naive_agent_calls_study": naive_study,
    "agent_requests_total": stats["agent"], "grader_requests_total": stats["grader"],
    "target_calls_through_wrapper": report["usage"]["target"]["calls"],
    "target_cache_hits": report["usage"]["target"]["cache_hits"],
    "share_of_naive": stats["agent"] / naive_study,
}, indent=2))
PY
python3 - "$OUT/calls.json" <<'PY' | tee "$OUT/calls.md"
import json, sys
c = json.load(open(sys.argv[1]))
print(f"| trials | agents × cases | naive agent calls (trials × cases × agents) | agent requests sent (all 3 steps) | share | grader requests | trial outcomes |")
print("|---|---|---|---|---|---|---|")
print(f"| {c['trials']} | {c['agents']} × {c['optimization_cases']} | {c['naive_agent_calls_study']} | {c['agent_requests_total']} | {c['share_of_naive']:.1%} | {c['grader_requests_total']} | {c['trial_outcomes']} |")
PY
