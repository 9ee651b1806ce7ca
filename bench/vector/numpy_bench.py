"""numpy brute-force top-k on the vector-search benchmark's data, on one thread.

Usage: python numpy_bench.py DATA.f32 QUERIES.f32 DIM [--k 15] [--repeat N]

The counterpart of crates/assay-retrieval/examples/vector_bench.rs, on the same files (raw
little-endian float32 rows, bench/vector/gen.py). Single-threaded: OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS are set to 1 before numpy is imported, the BLAS
pool is also limited with threadpoolctl, and the JSON line reports what threadpoolctl saw
(`blas`: library, version, kernel and thread count). Each best of N passes (default 3):

- `single`: for each query, `scores = X @ q` (BLAS sgemv), `np.argpartition` for the top k,
  then those k sorted by score: queries/s;
- `batch`: `X[block] @ Q.T` (BLAS sgemm) over blocks of 8,192 rows, the top k per query of
  each block kept (argpartition along the rows), then merged and sorted: queries/s;
- `bandwidth_gbs`: `X.sum(dtype=float32)` (numpy's SIMD pairwise sum) as a second estimate
  of the read bandwidth (the Rust side's probe is the one the bound uses).

Rates are from wall-clock time (`time.perf_counter`); the `*_cpu` twins from the thread's CPU
time (`time.thread_time`), which leaves out time spent waiting for a core. Prints one JSON
line shaped like the Rust one, with the top-k ids and scores of the first 3 queries.
"""

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

try:
    from threadpoolctl import threadpool_info, threadpool_limits  # noqa: E402
except ImportError:  # pragma: no cover - the run script installs it
    threadpool_info = threadpool_limits = None

BLOCK_ROWS = 8192


def top_k_single(x: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    scores = x @ q
    idx = np.argpartition(scores, len(scores) - k)[-k:]
    return idx[np.argsort(-scores[idx], kind="stable")]


def top_k_batch(x: np.ndarray, qt: np.ndarray, k: int) -> np.ndarray:
    """Top-k rows for every column of qt, as an array (queries, k), best first."""
    nq = qt.shape[1]
    cand_ids, cand_scores = [], []
    cols = np.arange(nq)
    for start in range(0, x.shape[0], BLOCK_ROWS):
        s = x[start : start + BLOCK_ROWS] @ qt  # (rows, queries)
        kk = min(k, s.shape[0])
        part = np.argpartition(s, s.shape[0] - kk, axis=0)[-kk:]  # (kk, queries)
        cand_ids.append(part + start)
        cand_scores.append(s[part, cols])
    ids = np.concatenate(cand_ids)  # (blocks*k, queries)
    scores = np.concatenate(cand_scores)
    best = np.argpartition(scores, scores.shape[0] - k, axis=0)[-k:]
    ids, scores = ids[best, cols], scores[best, cols]
    order = np.argsort(-scores, axis=0, kind="stable")
    return ids[order, cols].T


def best_of(repeat: int, f):
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        c0, t0 = time.thread_time(), time.perf_counter()
        f()
        t1, c1 = time.perf_counter(), time.thread_time()
        wall, cpu = min(wall, t1 - t0), min(cpu, c1 - c0)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("queries")
    parser.add_argument("dim", type=int)
    parser.add_argument("--k", type=int, default=15)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    t0 = time.perf_counter()
    x = np.fromfile(args.data, dtype="<f4").reshape(-1, args.dim)
    q = np.fromfile(args.queries, dtype="<f4").reshape(-1, args.dim)
    load_seconds = time.perf_counter() - t0
    qt = np.ascontiguousarray(q.T)
    huge_pages_kib = None
    try:  # numpy asks for transparent huge pages (madvise) for large arrays on Linux
        with open("/proc/self/smaps_rollup") as f:
            for row in f:
                if row.startswith("AnonHugePages:"):
                    huge_pages_kib = int(row.split()[1])
    except OSError:
        pass
    nbytes = x.nbytes
    k = args.k

    blas = []
    if threadpool_limits is not None:
        threadpool_limits(1)
        blas = [
            {key: p.get(key) for key in ("internal_api", "version", "architecture", "num_threads")}
            for p in threadpool_info()
        ]

    probe = [0.0]

    def do_probe():
        probe[0] += float(x.sum(dtype=np.float32))

    probe_wall, probe_cpu = best_of(args.repeat, do_probe)

    # Timed passes; the answers of the last one are kept for the cross-checks.
    out = {}

    def run_single():
        out["single"] = [top_k_single(x, qv, k) for qv in q]

    def run_batch():
        out["batch"] = top_k_batch(x, qt, k)

    single_wall, single_cpu = best_of(args.repeat, run_single)
    batch_wall, batch_cpu = best_of(args.repeat, run_batch)
    single, batch = out["single"], out["batch"]
    batch_matches_single = all(set(a.tolist()) == set(b.tolist()) for a, b in zip(single, batch))

    n = len(q)
    first = single[:3]
    line = {
        "engine": "numpy",
        "numpy": np.__version__,
        "blas": blas,
        "data": args.data,
        "rows": x.shape[0],
        "dim": args.dim,
        "queries": n,
        "k": k,
        "repeat": args.repeat,
        "load_seconds": load_seconds,
        "anon_huge_pages_kib": huge_pages_kib,
        "single_seconds": single_wall,
        "single_qps": n / single_wall,
        "single_qps_cpu": n / single_cpu if single_cpu > 0 else None,
        "batch_seconds": batch_wall,
        "batch_qps": n / batch_wall,
        "batch_qps_cpu": n / batch_cpu if batch_cpu > 0 else None,
        "bandwidth_gbs": nbytes / probe_wall / 1e9,
        "bandwidth_gbs_cpu": nbytes / probe_cpu / 1e9 if probe_cpu > 0 else None,
        "batch_matches_single": batch_matches_single,
        "top_ids": [ids.tolist() for ids in first],
        "top_scores": [[float(s) for s in (x[ids] @ qv)] for ids, qv in zip(first, q)],
    }
    print(json.dumps(line))


if __name__ == "__main__":
    main()
