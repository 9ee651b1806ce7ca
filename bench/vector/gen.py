"""Writes the vector-search benchmark's data: random unit vectors as raw float32 files.

Usage: python gen.py OUT_DIR [--sizes 100000,1000000] [--dims 384,1024] [--queries 100]

For every (n, dim): OUT_DIR/data_{n}x{dim}.f32, n rows of dim float32 (little-endian, row
after row, no header), each row a seeded standard-normal vector scaled to unit length. For
every dim: OUT_DIR/queries_{dim}.f32, 100 unit vectors drawn the same way from another seed.
Rows are generated in chunks of 50,000, so the 4 GB file (1M x 1024) needs ~200 MB of RAM.
The seed of a chunk depends only on (n, dim, chunk), so a file is the same on every run.
A file already present with the right size is kept (delete it to regenerate).

Needs numpy (bench/vector/run.sh installs it into a venv under bench/out/).
"""

import argparse
import os
import sys

import numpy as np

CHUNK = 50_000


def unit_rows(rng: np.random.Generator, rows: int, dim: int) -> np.ndarray:
    x = rng.standard_normal((rows, dim), dtype=np.float32)
    # Norms in float64 so the rows are unit length to float32 precision.
    norms = np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64)).astype(np.float32)
    x /= norms[:, None]
    return x.astype("<f4", copy=False)


def write_data(path: str, n: int, dim: int) -> None:
    expected = n * dim * 4
    if os.path.exists(path) and os.path.getsize(path) == expected:
        print(f"gen: {path} present", file=sys.stderr)
        return
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        for chunk, start in enumerate(range(0, n, CHUNK)):
            rows = min(CHUNK, n - start)
            rng = np.random.default_rng([n, dim, chunk])
            unit_rows(rng, rows, dim).tofile(f)
    os.replace(tmp, path)
    print(f"gen: wrote {path} ({expected / 1e9:.2f} GB)", file=sys.stderr)


def write_queries(path: str, count: int, dim: int) -> None:
    rng = np.random.default_rng([424242, dim])
    q = unit_rows(rng, count, dim)
    tmp = path + ".partial"
    q.tofile(tmp)
    os.replace(tmp, path)
    print(f"gen: wrote {path}", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--dims", default="384,1024")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dims = [int(d) for d in args.dims.split(",")]
    for dim in dims:
        write_queries(os.path.join(args.out, f"queries_{dim}.f32"), args.queries, dim)
        for n in (int(s) for s in args.sizes.split(",")):
            write_data(os.path.join(args.out, f"data_{n}x{dim}.f32"), n, dim)


if __name__ == "__main__":
    main()
