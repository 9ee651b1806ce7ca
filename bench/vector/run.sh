#!/usr/bin/env bash
# Exact vector search benchmark: assay's FlatIndex (Rust) against numpy brute force on one
# thread, on random unit vectors (100k and 1M rows, dimensions 384 and 1024, 100 queries,
# top-15), with the single-core memory-bandwidth bound. See bench/README.md.
#
# Usage: bash bench/vector/run.sh
#
# Environment:
#   SETS     data sets, ROWSxDIM, space-separated (default: all four,
#            "100000x384 100000x1024 1000000x384 1000000x1024")
#   REPEAT   timed passes per measurement, best kept (default 3)
#   ROUNDS   times each engine is run on a data set, alternating assay, numpy, assay, ...;
#            the best of the rounds is reported (default 1; the machine is noisy, 2 helps)
#   ENGINES  which runs, in this order per round (default "assay numpy assay-thp"):
#            assay      the example as it is (its data Vec in ordinary 4 KiB pages);
#            numpy      numpy_bench.py (numpy asks for transparent huge pages for large arrays);
#            assay-thp  the example with GLIBC_TUNABLES=glibc.malloc.hugetlb=1, so glibc's
#                       malloc asks for transparent huge pages (madvise) as numpy does: a
#                       diagnostic of the page-size effect, not what a default build gets
#   KEEP     1 = append to bench/out/vector_results.jsonl instead of starting it afresh
#            (to add runs, e.g. ENGINES=assay-thp KEEP=1); the report covers the whole file
#   PYTHON   a Python 3 with numpy; default: a venv made in bench/out/venv-vector with numpy
#            and threadpoolctl from PyPI
#
# Writes into bench/out/: vector/*.f32 (5.8 GB for all four sets; kept between runs),
# vector_results.jsonl, vector.md. Exits 1 if the engines' top-15 of the first 3 queries
# differ (beyond ties at float precision) or if either engine's batched search answers
# differently from its single-query search.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
HERE=bench/vector
OUT=bench/out
DATA="$OUT/vector"
SETS="${SETS:-100000x384 100000x1024 1000000x384 1000000x1024}"
REPEAT="${REPEAT:-3}"
ROUNDS="${ROUNDS:-1}"
ENGINES="${ENGINES:-assay numpy assay-thp}"
KEEP="${KEEP:-0}"
mkdir -p "$DATA"

if [[ -z "${PYTHON:-}" ]]; then
    VENV="$OUT/venv-vector"
    PYTHON="$VENV/bin/python"
    if ! "$PYTHON" -c 'import numpy, threadpoolctl' 2>/dev/null; then
        echo "== making $VENV (numpy, threadpoolctl from PyPI)" >&2
        python3 -m venv "$VENV"
        "$PYTHON" -m pip install --quiet --disable-pip-version-check numpy threadpoolctl >&2
    fi
fi

sizes="" dims=""
for set in $SETS; do
    sizes="$sizes,${set%x*}"
    dims="$dims,${set#*x}"
done
uniq_csv() { tr ',' '\n' <<< "${1#,}" | sort -nu | paste -sd, -; }

echo "== generating data (kept if present)" >&2
"$PYTHON" "$HERE/gen.py" "$DATA" --sizes "$(uniq_csv "$sizes")" --dims "$(uniq_csv "$dims")"

echo "== building the Rust example" >&2
cargo build --release -p assay-retrieval --example vector_bench
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/examples/vector_bench"

RESULTS="$OUT/vector_results.jsonl"
[[ "$KEEP" == 1 ]] || : > "$RESULTS"
for set in $SETS; do
    rows="${set%x*}" dim="${set#*x}"
    file="$DATA/data_${rows}x${dim}.f32" queries="$DATA/queries_${dim}.f32"
    for ((round = 1; round <= ROUNDS; round++)); do
        for engine in $ENGINES; do
            echo "== $set round $round: $engine" >&2
            case "$engine" in
                assay) line="$("$BIN" "$file" "$queries" "$dim" --k 15 --repeat "$REPEAT")" ;;
                assay-thp)
                    line="$(GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$BIN" "$file" "$queries" "$dim" --k 15 --repeat "$REPEAT")" ;;
                numpy)
                    line="$("$PYTHON" "$HERE/numpy_bench.py" "$file" "$queries" "$dim" --k 15 --repeat "$REPEAT")" ;;
                *) echo "unknown engine $engine" >&2; exit 2 ;;
            esac
            "$PYTHON" -c 'import json,sys; d=json.loads(sys.argv[3]); d["set"]=sys.argv[1]; d["round"]=int(sys.argv[2]); d["engine"]=sys.argv[4]; print(json.dumps(d))' \
                "$set" "$round" "$line" "$engine" | tee -a "$RESULTS" | "$PYTHON" -c \
                'import json,sys; d=json.load(sys.stdin); print("   single %.1f q/s, batch %.1f q/s, bandwidth %.2f GB/s" % (d["single_qps"], d["batch_qps"], d["bandwidth_gbs"]))' >&2
        done
    done
done

"$PYTHON" "$HERE/report.py" "$RESULTS" "$OUT/vector.md"
