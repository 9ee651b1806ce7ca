#!/usr/bin/env bash
# The assay-optimize sampler next to Optuna's TPESampler on the same synthetic objectives
# (see bench/README.md, "optimizer: sampler"). Writes bench/out/optimizer/{assay.jsonl,
# optuna.json,optimizer.md}. Knobs: SEEDS (20), BUDGET (1000), OVERHEAD_REPS (Rust 5, Python 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=bench/out/optimizer
VENV=$OUT/venv
mkdir -p "$OUT"
if ! "$VENV/bin/python" -c 'import optuna' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet optuna
fi
cargo build --release -p assay-optimize --examples
echo "assay-optimize: sampler_bench ..." >&2
target/release/examples/sampler_bench > "$OUT/assay.jsonl"
echo "optuna $("$VENV/bin/python" -c 'import optuna; print(optuna.__version__)'): optuna_bench.py (several minutes) ..." >&2
OVERHEAD_REPS="${OVERHEAD_REPS:-3}" "$VENV/bin/python" bench/optimizer/optuna_bench.py > "$OUT/optuna.json"
"$VENV/bin/python" bench/optimizer/report.py "$OUT/assay.jsonl" "$OUT/optuna.json" | tee "$OUT/optimizer.md"
# Model calls of `assay optimize` on examples/gaia-mini with 100 trials against the local server,
# next to the naive count (trials × cases × agents): bench/out/optimizer/calls.{json,md}.
bash bench/optimizer/calls.sh
