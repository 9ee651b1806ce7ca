#!/usr/bin/env bash
# Pattern-matcher benchmark: assay's PatternMatcher (Rust) against the seed's Python loop
# (000 §6.3), on a generated corpus, with the seed's rules and with 500 regexes / 2,000
# keyword groups, and against Hyperscan (libhs from C, bench/patterns/hs_bench.c) when
# libhyperscan-dev and a C compiler are installed. See bench/README.md.
#
# Usage: bash bench/patterns/run.sh
#
# Environment:
#   MESSAGES   corpus size (default 200000)
#   PY_LIMIT   messages the Python loop gets with the large rule sets (default 20000: the
#              seed loop does ~400 messages/s there, so the full corpus would take ~10 min);
#              0 = the whole corpus. The Rust engine is also run on that prefix, so the
#              checksums and the ratio compare the same messages.
#   REPEAT     timed passes of the Rust engine and of Hyperscan, best kept (default 3)
#   HYPERSCAN  1: run the Hyperscan anchor (default: if <hs/hs.h> and cc are found), 0: skip
#
# Writes into bench/out/: corpus.txt, the rule files, results.jsonl, patterns.md.
# Exits 1 if the two engines' checksums differ on any rule set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
HERE=bench/patterns
OUT=bench/out
MESSAGES="${MESSAGES:-200000}"
PY_LIMIT="${PY_LIMIT:-20000}"
REPEAT="${REPEAT:-3}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$OUT"

echo "== generating corpus and rules" >&2
"$PYTHON" "$HERE/gen_corpus.py" "$OUT/corpus.txt" --messages "$MESSAGES"
"$PYTHON" "$HERE/gen_rules.py" "$OUT"

echo "== building the Rust example" >&2
cargo build --release -p assay-retrieval --example pattern_bench
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/pattern_bench"

if [[ "$PY_LIMIT" -gt 0 && "$PY_LIMIT" -lt "$MESSAGES" ]]; then
    PREFIX="$OUT/corpus_first_${PY_LIMIT}.txt"
    head -n "$PY_LIMIT" "$OUT/corpus.txt" > "$PREFIX"
else
    PREFIX="$OUT/corpus.txt"
fi

if [[ -z "${HYPERSCAN:-}" ]]; then
    if command -v cc > /dev/null && echo '#include <hs/hs.h>' | cc -E - > /dev/null 2>&1; then
        HYPERSCAN=1
    else
        HYPERSCAN=0
        echo "== no Hyperscan (apt-get install libhyperscan-dev): skipping its anchor" >&2
    fi
fi

RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

# run LABEL ROLE ENGINE RULES CORPUS: one engine on one rule set, its JSON line tagged.
run() {
    local label="$1" role="$2" engine="$3" rules="$4" corpus="$5" line
    echo "== $label: $engine on $(wc -l < "$corpus") messages ($role)" >&2
    if [[ "$engine" == python ]]; then
        line="$("$PYTHON" "$HERE/seed_loop.py" "$rules" "$corpus")"
    elif [[ "$engine" == hyperscan ]]; then
        line="$("$PYTHON" "$HERE/hs_bench.py" "$rules" "$corpus" --mode c --repeat "$REPEAT" --out-dir "$OUT")"
    else
        line="$("$BIN" "$rules" "$corpus" --repeat "$REPEAT")"
    fi
    echo "$line" >&2
    "$PYTHON" -c 'import json,sys; d=json.loads(sys.argv[3]); d["set"]=sys.argv[1]; d["role"]=sys.argv[2]; print(json.dumps(d))' \
        "$label" "$role" "$line" >> "$RESULTS"
}

run seed compare python "$OUT/seed_rules.json" "$OUT/corpus.txt"
run seed compare assay "$OUT/seed_rules.json" "$OUT/corpus.txt"
if [[ "$HYPERSCAN" == 1 ]]; then
    # Whole corpus, interleaved with assay's runs (the machine's load drifts).
    run seed full hyperscan "$OUT/seed_rules.json" "$OUT/corpus.txt"
    run seed full assay "$OUT/seed_rules.json" "$OUT/corpus.txt"
fi
for set in large large_no_wordb; do
    case "$set" in
        large) rules="$OUT/large_rules.json" ;;
        large_no_wordb) rules="$OUT/large_rules_no_wordb.json" ;;
    esac
    run "$set" compare python "$rules" "$PREFIX"
    run "$set" compare assay "$rules" "$PREFIX"
    if [[ "$HYPERSCAN" == 1 ]]; then
        run "$set" full hyperscan "$rules" "$OUT/corpus.txt"
    fi
    if [[ "$PREFIX" != "$OUT/corpus.txt" || "$HYPERSCAN" == 1 ]]; then
        run "$set" full assay "$rules" "$OUT/corpus.txt"
    fi
done

"$PYTHON" - "$RESULTS" "$OUT/patterns.md" <<'PY'
import json
import sys

rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
titles = {
    "seed": "seed (000 §5.5)",
    "large": "large",
    "large_no_wordb": "large, `\\b` removed",
}
order = ["seed", "large", "large_no_wordb"]


def pick(set_, engine, role):
    for r in rows:
        if r["set"] == set_ and r["engine"] == engine and r["role"] == role:
            return r
    return None


def full_assay(set_):
    return pick(set_, "assay", "full") or pick(set_, "assay", "compare")


ok = True
lines = [
    "| rule set | crisis regexes / keyword groups | messages | python msgs/s | assay msgs/s "
    "| ratio | checksums |",
    "|---|---|---:|---:|---:|---:|---|",
]
for s in order:
    py, rs = pick(s, "python-seed-loop", "compare"), pick(s, "assay", "compare")
    if py is None or rs is None:
        continue
    same = py["checksum"] == rs["checksum"] and py["matched_entity_total"] == rs["matched_entity_total"]
    ok &= same
    lines.append(
        f"| {titles[s]} | {rs['crisis_rules']:,} / {rs['keyword_groups']:,} | {rs['messages']:,} "
        f"| {py['messages_per_second']:,.0f} | {rs['messages_per_second']:,.0f} "
        f"| {rs['messages_per_second'] / py['messages_per_second']:,.0f}× "
        f"| {'equal' if same else 'DIFFER'} ({rs['checksum']}) |"
    )
lines.append("")
seed = full_assay("seed")
lines.append(
    f"assay on the whole corpus ({seed['messages']:,} messages, best of {seed['repeat']}): "
    f"seed rules {seed['messages_per_second']:,.0f} msgs/s (matcher built in "
    f"{seed['build_seconds'] * 1000:.1f} ms)."
)
for s in ["large", "large_no_wordb"]:
    r = full_assay(s)
    if r is None:
        continue
    lines.append(
        f"- {titles[s]}: {r['messages_per_second']:,.0f} msgs/s on {r['messages']:,} messages "
        f"(built in {r['build_seconds'] * 1000:.0f} ms): cost per message "
        f"{seed['messages_per_second'] / r['messages_per_second']:.1f}× the seed rules' "
        f"for {r['crisis_rules'] // seed['crisis_rules']}× the regexes and "
        f"{r['keyword_groups'] // seed['keyword_groups']}× the keyword groups."
    )
hs_lines = []
for s in order:
    hs, rs = pick(s, "hyperscan-c", "full"), pick(s, "assay", "full")
    if hs is None or rs is None:
        continue
    same = hs["checksum"] == rs["checksum"] and hs["matched_entity_total"] == rs["matched_entity_total"]
    ok &= same
    cpu = ""
    if hs.get("cpu_messages_per_second") and rs.get("cpu_messages_per_second"):
        cpu = f" | {rs['cpu_messages_per_second'] / hs['cpu_messages_per_second']:.2f}×"
    hs_lines.append(
        f"| {titles[s]} | {rs['messages']:,} | {hs['messages_per_second']:,.0f} "
        f"| {rs['messages_per_second']:,.0f} | {rs['messages_per_second'] / hs['messages_per_second']:.2f}×"
        f"{cpu or ' | '} | {'equal' if same else 'DIFFER'} ({rs['checksum']}) |"
    )
if hs_lines:
    lines.append("")
    lines.append(
        "| rule set | messages | hyperscan msgs/s | assay msgs/s | ratio (wall) | ratio (CPU) "
        "| checksums |"
    )
    lines.append("|---|---:|---:|---:|---:|---:|---|")
    lines.extend(hs_lines)
lines.append("")
lines.append(
    "Checksums: " + ("equal for every rule set." if ok else "DIFFERENT, see results.jsonl.")
)
text = "\n".join(lines) + "\n"
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.write(text)
print(text)
sys.exit(0 if ok else 1)
PY
