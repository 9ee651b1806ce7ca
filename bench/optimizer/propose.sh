#!/usr/bin/env bash
# Issue 21: model calls `assay optimize` spends to reach an improvement with reflective proposals
# (`--propose-rounds`), against a search over the hand-written prompts only, on a scripted
# project served by crates/assay-cli/examples/prompt_provider.rs: three agents with three
# hand-written prompts each (27 combinations); one class of cases ([needs:UNITS]) is answered
# right only when the finalizer's prompt carries an instruction no hand-written prompt has, and
# the scripted proposer writes it when shown a failing case of that class. Each configuration
# runs in a fresh copy of the project (an empty call cache), so every request counts.
# Writes bench/out/optimizer/propose.{json,md}.
#
# Usage: bash bench/optimizer/propose.sh   (PROFILE=dev for a debug build)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/optimizer
PROFILE="${PROFILE:-release}"
mkdir -p "$OUT"
cargo build --profile "$PROFILE" -p assay-cli --bin assay --example prompt_provider
DIRNAME=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
TARGET="${CARGO_TARGET_DIR:-target}/$DIRNAME"
WORK=$(mktemp -d)
trap 'kill "$PROVIDER_PID" 2>/dev/null || true; rm -rf "$WORK"' EXIT

line() { printf '{"question": "%s [key:%s] [d:%s]", "files": [], "answer": "%s"}\n' "$1" "$2" "$3" "$2"; }

make_project() {
  local p="$1" url="$2"
  mkdir -p "$p/prompts" "$p/cases"
  for a in planner expert finalizer; do
    tail=""
    [ "$a" = finalizer ] && tail=" End with FINAL ANSWER: <answer>."
    mkdir -p "$p/prompt_variations/$a"
    printf 'You are the %s. Be brief.%s\n' "$a" "$tail" > "$p/prompts/${a}_system_prompt.txt"
    printf 'You are the %s. Be thorough.%s\n' "$a" "$tail" > "$p/prompt_variations/$a/v1.txt"
    printf '[[GOOD]] You are the %s. Check every fact.%s\n' "$a" "$tail" > "$p/prompt_variations/$a/v2.txt"
  done
  {
    line "Capital of France?" Paris 3; line "Largest planet?" Jupiter 1
    line "Author of Hamlet?" Shakespeare 2; line "Chemical symbol of gold?" Au 3
    line "Longest river in Africa?" Nile 2; line "Fastest land animal?" Cheetah 3
    line "[needs:UNITS] Length of a marathon?" "42.195 km" 1
    line "[needs:UNITS] Boiling point of water at sea level?" "100 degrees C" 1
    line "[needs:UNITS] Mass of a litre of water?" "1 kg" 1
    line "[needs:UNITS] Height of the Eiffel Tower?" "330 m" 2
  } > "$p/cases/opt.jsonl"
  {
    line "Red planet?" Mars 1; line "Smallest prime?" 2 2; line "Largest ocean?" Pacific 3
    line "[needs:UNITS] Height of Everest?" "8849 m" 1
    line "[needs:UNITS] Speed of light?" "299792 km/s" 1
    line "[needs:UNITS] Length of a football pitch?" "105 m" 2
    line "[needs:UNITS] Weight of a blue whale?" "150 tonnes" 1
    line "[needs:UNITS] Depth of the Mariana Trench?" "10994 m" 3
    line "[needs:UNITS] Body temperature?" "37 degrees C" 1
    line "[needs:UNITS] Distance to the Moon?" "384400 km" 2
  } > "$p/cases/eval.jsonl"
  cat > "$p/assay.toml" <<TOML
[providers]
openai_base_url = "$url/v1"

[optimize]
model = "openai/fake-agent"
grader_model = "openai/fake-grader"
chain = ["planner", "expert", "finalizer"]

[optimize.propose]
model = "openai/fake-proposer"
TOML
}

"$TARGET/examples/prompt_provider" > "$WORK/url" &
PROVIDER_PID=$!
until [ -s "$WORK/url" ]; do sleep 0.1; done
URL=$(head -1 "$WORK/url")

# name | trials | propose rounds
CONFIGS="hand-written-27 27 0
hand-written-10 10 0
propose-10+1 10 1
propose-27+1 27 1
propose-10+3 10 3"
echo "$CONFIGS" | while read -r name trials rounds; do
  p="$WORK/$name"
  make_project "$p" "$URL"
  before=$(curl -sf "$URL/stats")
  extra=()
  [ "$rounds" != 0 ] && extra=(--propose-rounds "$rounds")
  OPENAI_API_KEY=bench "$TARGET/assay" optimize "$p" --experiment-name bench \
    --optimization-trials "$trials" "${extra[@]}" \
    --optimization-test-cases cases/opt.jsonl --evaluation-test-cases cases/eval.jsonl \
    --json > "$WORK/$name.json" 2> "$WORK/$name.stderr" || { cat "$WORK/$name.stderr" >&2; exit 1; }
  after=$(curl -sf "$URL/stats")
  python3 - "$name" "$trials" "$rounds" "$WORK/$name.json" "$before" "$after" >> "$WORK/rows.jsonl" <<'PY'
import json, sys
name, trials, rounds, path, before, after = sys.argv[1:]
r = json.load(open(path)); b = json.loads(before); a = json.loads(after)
d = {k: a[k] - b[k] for k in ("agent", "grader", "proposer")}
hw = r.get("hand_written") or {}
print(json.dumps({
    "config": name, "trials": int(trials), "propose_rounds": int(rounds),
    "trials_run": len(r["trials"]),
    "proposals": len(r.get("proposals", [])),
    "accepted": sum(1 for p in r.get("proposals", []) if p["status"] == "accepted"),
    "agent_requests": d["agent"], "grader_requests": d["grader"], "proposer_requests": d["proposer"],
    "requests_total": d["agent"] + d["grader"] + d["proposer"],
    "optimization_correct": r["trials"][r["best_trial"]]["metrics"]["factually_correct_count"] if r.get("best_trial") is not None else None,
    "optimization_cases": r["baseline"]["data"]["cases"],
    "evaluation_correct": r["evaluation"]["metrics"]["factually_correct_count"],
    "evaluation_baseline_correct": r["evaluation_baseline"]["metrics"]["factually_correct_count"],
    "evaluation_cases": r["evaluation"]["data"]["cases"],
    "verdict_vs_hand_written": hw.get("verdict"),
}))
PY
done
python3 - "$WORK/rows.jsonl" "$OUT/propose.json" <<'PY' | tee "$OUT/propose.md"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
json.dump(rows, open(sys.argv[2], "w"), indent=2)
print("| configuration | trials run | proposals (accepted) | agent + grader + proposer requests | best on optimization | evaluation (baseline) | vs best hand-written |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['config']} | {r['trials_run']} | {r['proposals']} ({r['accepted']}) | {r['agent_requests']} + {r['grader_requests']} + {r['proposer_requests']} = {r['requests_total']} | {r['optimization_correct']}/{r['optimization_cases']} | {r['evaluation_correct']}/{r['evaluation_cases']} ({r['evaluation_baseline_correct']}) | {r['verdict_vs_hand_written'] or '-'} |")
PY
