#!/usr/bin/env bash
# Retrieval quality on bench/retrieval/eval_set.jsonl and on the example's semantic bank, for
# each embedder (built-in, MiniLM) × mode (single-view dense, multi-view dense, hybrid).
#
# Usage: [NO_BUILD=1] bench/retrieval/run.sh [--profile release|dev] [--tuned]
#   --tuned  also runs `assay kb tune --write` for each embedder × mode and measures again.
# Writes bench/out/retrieval/<embedder>_<mode>[_tuned].json and prints a table.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE=release
TUNED=0
while (($#)); do
  case "$1" in
    --profile) PROFILE="$2"; shift 2 ;;
    --tuned) TUNED=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
export RAYON_NUM_THREADS="${RAYON_NUM_THREADS:-1}"
if [[ "$PROFILE" == release ]]; then
  BIN=target/release
  BUILD=(cargo build --release -p assay-cli --bin assay --example retrieval_eval)
else
  BIN=target/debug
  BUILD=(cargo build -p assay-cli --bin assay --example retrieval_eval)
fi
# NO_BUILD=1 uses the binaries already in $BIN.
[[ "${NO_BUILD:-0}" == 1 ]] || "${BUILD[@]}" >&2
MODEL_DIR="${ASSAY_TEST_MODEL_DIR:-target/test-models/all-minilm-l6-v2}"
[[ -s "$MODEL_DIR/model.safetensors" ]] || scripts/fetch-test-model.sh "$MODEL_DIR" >/dev/null
MODEL_DIR="$(cd "$MODEL_DIR" && pwd)"
OUT=bench/out/retrieval
mkdir -p "$OUT"
EVAL="$PWD/bench/retrieval/eval_set.jsonl"

declare -A EMBEDDERS=([builtin]="builtin/hashed-ngrams" [minilm]="local/$MODEL_DIR")
declare -A MODES=([single_dense]="dense single" [multi_dense]="dense multi" [hybrid]="hybrid multi" [hybrid_single]="hybrid single")

measure() { # name embedder project
  local name="$1" embedder="$2" project="$3"
  "$BIN/examples/retrieval_eval" "$project" "$EVAL" --embedder "$embedder" >"$OUT/$name.eval.json"
  "$BIN/assay" run "$project" --banks semantic --json --no-save --embedder "$embedder" \
    >"$OUT/$name.run.json" || [[ $? == 1 ]]
  python3 - "$OUT/$name" <<'PY'
import json, sys
base = sys.argv[1]
e = json.load(open(base + ".eval.json"))
r = json.load(open(base + ".run.json"))["semantic"]
out = {"eval": {k: e[k] for k in ("embedder", "mode", "views", "score_threshold", "lexical_weight", "messages", "pipeline", "ranking", "rank_p50_us")},
       "bank": {"score": r["average_score"], "hard_fails": r["hard_fails"], "ir": r.get("ir")}}
json.dump(out, open(base + ".json", "w"), indent=2)
PY
}

for emb in builtin minilm; do
  for mode in single_dense multi_dense hybrid hybrid_single; do
    read -r m v <<<"${MODES[$mode]}"
    dir="$(mktemp -d)"
    cp -r examples/coparent "$dir/p"
    rm -rf "$dir/p/.assay" "$dir/p/results"
    printf '\n[retrieval]\nmode = "%s"\nviews = "%s"\n' "$m" "$v" >>"$dir/p/assay.toml"
    measure "${emb}_${mode}" "${EMBEDDERS[$emb]}" "$dir/p"
    if ((TUNED)); then
      "$BIN/assay" kb tune --project "$dir/p" --embedder "${EMBEDDERS[$emb]}" --write \
        >"$OUT/${emb}_${mode}.tune.txt"
      measure "${emb}_${mode}_tuned" "${EMBEDDERS[$emb]}" "$dir/p"
    fi
    rm -rf "$dir"
  done
done

python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = sorted(f[:-5] for f in os.listdir(out) if f.endswith(".json") and not f.endswith((".eval.json", ".run.json")))
print(f"{'config':<28} {'top1':>6} {'top3':>6} {'MRR':>6} | {'rank top3':>9} {'rank MRR':>8} | {'bank':>5} {'hard':>4} {'nDCG@6':>6} | threshold weight")
for name in rows:
    d = json.load(open(os.path.join(out, name + ".json")))
    e, b = d["eval"], d["bank"]
    p, r = e["pipeline"], e["ranking"]
    nd = b["ir"]["ndcg_at_6"] if b.get("ir") else float("nan")
    print(f"{name:<28} {p['top1']*100:6.1f} {p['top3']*100:6.1f} {p['mrr']:6.3f} | {r['top3']*100:9.1f} {r['mrr']:8.3f} | {b['score']:5.1f} {b['hard_fails']:4d} {nd:6.3f} | {e['score_threshold']:.3f} {e['lexical_weight']:.2f}")
PY
