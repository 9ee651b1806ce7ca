#!/usr/bin/env bash
# MiniLM embedding throughput: assay's candle `local/` embedder (Rust) against
# sentence-transformers on PyTorch CPU, same model directory, same 1,000 sentences, batch 32,
# 1 and 2 threads. See bench/README.md.
#
# Usage: bash bench/embed/run.sh
#
# Environment:
#   THREADS     thread counts, space-separated (default "1 2")
#   ROUNDS      times each engine is run per thread count, alternating assay, sentence-
#               transformers, assay, ...; the best round is reported (default 2)
#   EMBED_VENV  the Python venv with torch and sentence-transformers (default
#               /tmp/assay-embed-venv; made if it cannot import them: `pip install torch`
#               (the PyPI Linux wheel is the CUDA build and needs its nvidia-* wheels even to
#               import on a CPU, ~3 GB) then `pip install sentence-transformers`)
#
# Writes into bench/out/: embed/sentences.txt, embed_results.jsonl, embed.md.
# Exits 1 if the first 3 embeddings of the two engines are not within cosine 0.999.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
HERE=bench/embed
OUT=bench/out
THREADS="${THREADS:-1 2}"
ROUNDS="${ROUNDS:-2}"
VENV="${EMBED_VENV:-/tmp/assay-embed-venv}"
PY="$VENV/bin/python"
mkdir -p "$OUT/embed"

echo "== model" >&2
MODEL_DIR="$(bash scripts/fetch-test-model.sh)"

echo "== sentences" >&2
SENTENCES="$OUT/embed/sentences.txt"
python3 "$HERE/sentences.py" "$SENTENCES"

if ! "$PY" -c 'import torch, sentence_transformers' 2>/dev/null; then
    echo "== making $VENV (torch, sentence-transformers from PyPI; several GB)" >&2
    python3 -m venv "$VENV"
    "$PY" -m pip install --quiet --disable-pip-version-check torch >&2
    "$PY" -m pip install --quiet --disable-pip-version-check sentence-transformers >&2
fi

echo "== building the Rust example and the assay CLI (for the cross-check)" >&2
cargo build --release -p assay-providers --example embed_bench -p assay-cli --bin assay
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/release"

RESULTS="$OUT/embed_results.jsonl"
: > "$RESULTS"
tag() { "$PY" -c 'import json,sys; d=json.loads(sys.argv[2]); d["round"]=int(sys.argv[1]); print(json.dumps(d))' "$@"; }
for ((round = 1; round <= ROUNDS; round++)); do
    for t in $THREADS; do
        echo "== round $round, $t thread(s): assay" >&2
        line="$(RAYON_NUM_THREADS="$t" "$TARGET/examples/embed_bench" --model-dir "$MODEL_DIR" \
            --file "$SENTENCES" --batch-size 32)"
        line="$("$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); d["engine"]="assay"; d["threads"]=int(sys.argv[2]); print(json.dumps(d))' "$line" "$t")"
        tag "$round" "$line" | tee -a "$RESULTS" | cut -c1-300 >&2
        echo "== round $round, $t thread(s): sentence-transformers" >&2
        line="$("$PY" "$HERE/st_bench.py" "$MODEL_DIR" "$SENTENCES" --threads "$t" --batch-size 32 2>/dev/null)"
        tag "$round" "$line" | tee -a "$RESULTS" | cut -c1-300 >&2
    done
done

echo "== cross-check: assay embed on the first 3 sentences" >&2
project="$(mktemp -d)"
trap 'rm -rf "$project"' EXIT
mapfile -t first < <(head -n 3 "$SENTENCES")
"$TARGET/assay" embed --embedder "local/$MODEL_DIR" --document --json --project "$project" "${first[@]}" \
    > "$OUT/embed/assay_first3.json"

"$PY" "$HERE/report.py" "$RESULTS" "$OUT/embed/assay_first3.json" "$OUT/embed.md"
