#!/usr/bin/env bash
# Issue 20, "HNSW candidates in runs": a run's semantic stage on a PostgreSQL store of N
# generated entities, with its candidates from the HNSW index against the exact path, through
# the harness's own code; then `assay kb check-index` and `assay run` on the same project.
# See bench/README.md ("hnsw-runs").
#
# Usage: bash bench/hnsw-runs/run.sh
#
# Environment:
#   N            entities (default 1000000)
#   QUERIES      messages, one semantic case each (default 200)
#   EF_SEARCH    hnsw.ef_search values, comma-separated (default 100,200,400); the last one is
#                the one the `assay run` comparison uses
#   M, EFC       HNSW build parameters (default 16 and 64: the store's own)
#   WORKERS      parallel maintenance workers for the index build (default 2)
#   LOAD         1 (default): (re)load the database; 0: measure what it holds
#   PG_URL       a PostgreSQL server with pgvector (its database is left alone: the bench uses
#                the database `assay_hnsw_bench` on it); default: the test server that
#                scripts/test-pg-up starts, restarted with shared_buffers = SHARED_BUFFERS
#   SHARED_BUFFERS  default 6GB (at 1M the table is ~1.7 GB and the index ~2 GB)
#
# Writes bench/out/hnsw_runs.jsonl (appended) and prints each JSON line as it comes.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
N="${N:-1000000}"
QUERIES="${QUERIES:-200}"
EF_SEARCH="${EF_SEARCH:-100,200,400}"
M="${M:-16}"
EFC="${EFC:-64}"
WORKERS="${WORKERS:-2}"
LOAD="${LOAD:-1}"

if [[ -z "${PG_URL:-}" ]]; then
    if [[ "$LOAD" == 1 ]]; then
        scripts/test-pg-up stop
    fi
    ASSAY_TEST_PG_OPTS="-c shared_buffers=${SHARED_BUFFERS:-6GB}" scripts/test-pg-up
    PG_URL="$(cat target/test-pg/url)"
fi
BASE="${PG_URL%/*}"
DB_URL="$BASE/assay_hnsw_bench"

echo "== building assay and the bench (release)" >&2
cargo build --release -p assay-cli --bin assay --example hnsw_runs_bench >&2
BIN=target/release/examples/hnsw_runs_bench

if [[ "$LOAD" == 1 ]]; then
    # A database of the bench's own (the load empties it).
    "$BIN" create-database --url "$PG_URL" --database assay_hnsw_bench >&2
    echo "== loading $N entities and building the index (m=$M, ef_construction=$EFC)" >&2
    "$BIN" load --url "$DB_URL" --n "$N" --m "$M" --ef-construction "$EFC" --workers "$WORKERS" \
        | tee -a "$OUT/hnsw_runs.jsonl"
fi

DIR="$(mktemp -d)"
trap 'rm -rf "$DIR"' EXIT
echo "== measuring ($QUERIES queries, ef_search $EF_SEARCH)" >&2
"$BIN" measure --url "$DB_URL" --dir "$DIR" --queries "$QUERIES" --ef-search "$EF_SEARCH" \
    --assay target/release/assay \
    | tee -a "$OUT/hnsw_runs.jsonl"
