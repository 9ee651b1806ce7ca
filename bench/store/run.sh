#!/usr/bin/env bash
# Vector search in the knowledge-base stores: PostgreSQL + pgvector HNSW (through the store's own
# query) against the exact scan assay runs over the embeddings it reads from SQLite, on
# generated clustered vectors. recall@15 of HNSW against the exact answer, queries/s of both,
# index build time. See bench/README.md ("store").
#
# Usage: bash bench/store/run.sh
#
# Environment:
#   SIZES        row counts, space-separated (default "100000 1000000")
#   DIM          dimensions (default 384)
#   QUERIES      queries per measurement (default 200)
#   M, EFC       HNSW build parameters m and ef_construction (default 16 and 64)
#   EF_SEARCH    hnsw.ef_search values, comma-separated (default 40,64,100,200,400)
#   WORKERS      parallel maintenance workers for the index build (default 2)
#   CLIENTS      also measure both searches with this many threads at once (default 2)
#   DECAY        variance decay of the generated dimensions, i^-DECAY (default 1.0, fitted to
#                MiniLM's embeddings; 0 = isotropic noise, the worst case)
#   PG_URL       a PostgreSQL server with pgvector; default: the test server that
#                scripts/test-pg-up starts (target/test-pg/url), restarted with
#                shared_buffers = SHARED_BUFFERS so that the index stays in PostgreSQL's
#                own cache, as pgvector's documentation advises
#   SHARED_BUFFERS  default 8GB (the 1M index is ~2 GB, its table ~1.7 GB)
#
# Writes bench/out/store_results.jsonl (appended) and prints each JSON line as it comes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
SIZES="${SIZES:-100000 1000000}"
DIM="${DIM:-384}"
QUERIES="${QUERIES:-200}"
M="${M:-16}"
EFC="${EFC:-64}"
EF_SEARCH="${EF_SEARCH:-40,64,100,200,400}"
WORKERS="${WORKERS:-2}"
CLIENTS="${CLIENTS:-2}"
DECAY="${DECAY:-1.0}"

if [[ -z "${PG_URL:-}" ]]; then
    scripts/test-pg-up stop
    ASSAY_TEST_PG_OPTS="-c shared_buffers=${SHARED_BUFFERS:-8GB}" scripts/test-pg-up
    PG_URL="$(cat target/test-pg/url)"
fi

echo "== building the bench (release)" >&2
cargo build --release -p assay-retrieval --features postgres --example store_bench >&2
BIN=target/release/examples/store_bench

for n in $SIZES; do
    echo "== $n x $DIM (m=$M, ef_construction=$EFC)" >&2
    "$BIN" --url "$PG_URL" --n "$n" --dim "$DIM" --queries "$QUERIES" --m "$M" \
        --ef-construction "$EFC" --ef-search "$EF_SEARCH" --workers "$WORKERS" \
        --clients "$CLIENTS" --decay "$DECAY" \
        | tee -a "$OUT/store_results.jsonl"
done
