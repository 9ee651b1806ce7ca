#!/usr/bin/env bash
# Generator benchmark: `assay generate` on a generated knowledge base of ENTITIES SITUATION
# entities (in topics of ten that share a keyword, so related pairs form), two STATE
# handlers and a crisis rule and a keyword group, against the scripted generator
# (crates/assay-cli/examples/generate_provider.rs) answering every call after LATENCY_MS.
#
# For each concurrency C it reports the wall time, drafts per second, model calls per
# accepted case (every draft accepted with `assay generate review --accept all-pending`
# when that command is available, else every draft counted as accepted), and the ratio of
# the wall time to the ideal, calls × LATENCY_MS ÷ C. See bench/README.md ("generate").
#
# Usage: bash bench/generate/run.sh
#
# Environment:
#   ENTITIES      SITUATION entities (default 500)
#   PER_ENTITY    drafts asked per entity (default 2)
#   LATENCY_MS    scripted latency per call (default 200)
#   CONCURRENCY   space-separated concurrency levels (default "8 32")
#   PROFILE       release (default) or debug
#   SKIP_BUILD=1  use the binaries already in the target directory
#   CARGO_TARGET_DIR as for cargo
# Scratch files go to bench/out/generate/. Exits non-zero if a generation fails.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="$ROOT/bench/out/generate"
ENTITIES="${ENTITIES:-500}"
PER_ENTITY="${PER_ENTITY:-2}"
LATENCY_MS="${LATENCY_MS:-200}"
CONCURRENCY="${CONCURRENCY:-8 32}"
PROFILE="${PROFILE:-release}"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
mkdir -p "$OUT"

die() { echo "error: $*" >&2; exit 1; }

if [[ "${SKIP_BUILD:-0}" != 1 ]]; then
    echo "== building assay and the scripted generator ($PROFILE)" >&2
    flag=(); [[ "$PROFILE" == release ]] && flag=(--release)
    cargo build "${flag[@]}" -p assay-cli --bin assay --example generate_provider
fi
ASSAY="$TARGET/$PROFILE/assay"
PROVIDER="$TARGET/$PROFILE/examples/generate_provider"
[[ -x "$ASSAY" && -x "$PROVIDER" ]] || die "missing binaries under $TARGET/$PROFILE"

"$PROVIDER" --port 0 --latency-ms "$LATENCY_MS" > "$OUT/provider.out" 2>&1 &
PROVIDER_PID=$!
trap 'kill $PROVIDER_PID 2>/dev/null || true' EXIT
for _ in $(seq 50); do
    URL="$(head -n1 "$OUT/provider.out" 2>/dev/null || true)"
    [[ "$URL" == http* ]] && break
    sleep 0.1
done
[[ "$URL" == http* ]] || die "the provider did not start"

# The knowledge base: ENTITIES SITUATION entities in topics of ten.
make_project() {
    local dir="$1"
    rm -rf "$dir"
    mkdir -p "$dir/kb" "$dir/test_banks/semantic" "$dir/test_banks/pattern"
    python3 - "$dir" "$ENTITIES" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
words = ["harvest", "fence", "trellis", "greenhouse", "beehive", "orchard", "pond", "path",
         "shed", "compost", "seedling", "bed", "mulch", "netting", "signage", "gate"]
out = []
for i in range(n):
    topic = f"topic{i // 10:03d}"
    w = words[i % len(words)]
    out.append({
        "entity_id": f"e{i:04d}", "entity_type": "KNOWLEDGE",
        "title": f"{w.capitalize()} question {i} of {topic}", "subtype": topic,
        "concept_summary": f"What to do about the {w} in case {i}.",
        "recognition": f"A member asks about the {w} ({i}).",
        "keywords": f"{topic}, {w}{i}", "load_mode": "SITUATION", "priority": 50,
        "audience_types": ["MEMBER"], "is_active": True})
out.append({"entity_id": "h_back", "entity_type": "HANDLER", "title": "Back after a while",
            "load_mode": "STATE", "state_conditions": {"days_away": {"gte": 14}},
            "audience_types": ["MEMBER"], "is_active": True})
out.append({"entity_id": "h_new", "entity_type": "HANDLER", "title": "A new member",
            "load_mode": "STATE", "state_conditions": {"status": {"$in": ["new", "trial"]}},
            "audience_types": ["MEMBER"], "is_active": True})
json.dump(out, open(f"{d}/kb/entities.json", "w"))
json.dump({"crisis_patterns": [{"pattern": "fell (off|from) the ladder", "entities": ["e0000"],
                                "is_critical": True}],
           "keyword_boosts": [{"keywords": ["waitlist"], "entity": "e0001"}]},
          open(f"{d}/test_banks/pattern/pattern_rules.json", "w"))
json.dump({"bank_type": "SEMANTIC", "version": "1", "tests": [
    {"test_id": "S1", "prompt": "what about the harvest", "expected_primary": ["e0000"],
     "user_state": {"user_type": "MEMBER"}}]},
    open(f"{d}/test_banks/semantic/cases.json", "w"))
PY
    cat > "$dir/assay.toml" <<TOML
[retrieval]
mode = "dense"
views = "single"

[providers]
openai_base_url = "$URL/v1"
max_concurrency = 64
cache = "off"

[providers.prices]
"openai/scripted" = { input = 0.15, output = 0.6 }

[state.fields]
days_away = "integer"
status = "string"
TOML
}

printf "%-12s %9s %8s %7s %11s %14s %9s %7s\n" concurrency wall_s drafts calls drafts/s calls/accepted ideal_s ratio
for c in $CONCURRENCY; do
    dir="$OUT/project-c$c"
    make_project "$dir"
    start=$(date +%s.%N)
    OPENAI_API_KEY=bench "$ASSAY" generate "$dir" --model openai/scripted \
        --per-entity "$PER_ENTITY" --concurrency "$c" --json > "$OUT/outcome-c$c.json" 2> "$OUT/stderr-c$c.txt" \
        || die "generate failed at concurrency $c (see $OUT/stderr-c$c.txt)"
    end=$(date +%s.%N)
    accepted=""
    if OPENAI_API_KEY=bench "$ASSAY" generate review "$dir" --accept all-pending --by bench > "$OUT/review-c$c.txt" 2>&1; then
        accepted=$(python3 -c "
import json, glob
n = 0
for f in glob.glob('$dir/test_banks/drafts/*/*.json'):
    n += sum(1 for d in json.load(open(f))['drafts'] if d['status'] == 'accepted')
print(n)")
    fi
    python3 - "$OUT/outcome-c$c.json" "$start" "$end" "$c" "$LATENCY_MS" "${accepted:-}" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
c, lat = int(sys.argv[4]), int(sys.argv[5])
drafts = sum(b["drafts"] for b in o["banks"])
calls = o["calls"]["requests"]
accepted = int(sys.argv[6]) if sys.argv[6] else drafts
ideal = calls * lat / 1000 / c
print(f"{c:<12} {wall:9.1f} {drafts:8d} {calls:7d} {drafts / wall:11.1f} {calls / max(accepted, 1):14.2f} {ideal:9.1f} {wall / ideal:7.2f}")
PY
done
