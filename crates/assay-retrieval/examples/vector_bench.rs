//! Benchmark of exact vector search with [`FlatIndex`], against the memory-bandwidth bound.
//!
//! ```text
//! cargo run --release -p assay-retrieval --example vector_bench -- DATA.f32 QUERIES.f32 DIM [--k 15] [--repeat N]
//! ```
//!
//! `DATA.f32` and `QUERIES.f32` hold unit vectors of `DIM` float32s, little-endian, row after
//! row, no header (`bench/vector/gen.py` writes them). The data is read into one `Vec<f32>`
//! (one allocation, read through a small buffer) and handed to [`FlatIndex::from_vec`] with
//! the row numbers as ids. Then, single-threaded, each best of `N` passes (default 3):
//!
//! - `single`: every query in turn with [`VectorIndex::search`] (one pass over the data per
//!   query), queries/s;
//! - `batch`: all queries at once with [`FlatIndex::search_batch`], queries/s;
//! - `bandwidth`: a read-bandwidth probe, the sum of every float of the data array with the
//!   same run-time-chosen SIMD loads as the search (AVX-512 where the CPU has it), GB/s (1 GB = 10^9 bytes); best of at least `N` passes and of
//!   enough passes to read ~4 GB (at most 100).
//!
//! `bound_qps` is the single-query bound that bandwidth sets: `bandwidth / (rows * DIM * 4)`.
//! Rates are from wall-clock time; the `*_cpu` twins are from the thread's CPU time (Linux
//! `/proc/thread-self/schedstat`), which leaves out time spent waiting for a core on a busy
//! machine. It prints one JSON line:
//!
//! ```text
//! {"engine":"assay","rows":…,"dim":…,"queries":…,"k":…,"repeat":…,"single_qps":…,
//!  "single_qps_cpu":…,"batch_qps":…,"batch_qps_cpu":…,"bandwidth_gbs":…,"bandwidth_gbs_cpu":…,
//!  "bound_qps":…,"single_pct_of_bound":…,
//!  "batch_matches_single":…,"top_ids":[[…],[…],[…]],"top_scores":[[…],[…],[…]],…}
//! ```
//!
//! `anon_huge_pages_kib` is how much of the process's memory sat in transparent huge pages once
//! the data was read (Linux `/proc/self/smaps_rollup`): 4 KiB pages unless the allocator was
//! asked for huge pages (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1` with THP in `madvise` mode;
//! the kernel may still fall back to 4 KiB pages when memory is fragmented).
//! `top_ids`/`top_scores` are the `k` best rows (best first) of the first 3 queries, from
//! `search`; `batch_matches_single` says whether `search_batch` returned the same rows for
//! every query. The whole harness, with numpy on the same data, is `bench/vector/run.sh`.

use std::fs::File;
use std::hint::black_box;
use std::io::Read;
use std::process::ExitCode;
use std::time::Instant;

use assay_retrieval::vector::{FlatIndex, Hit, VectorIndex};

struct Args {
    data: String,
    queries: String,
    dim: usize,
    k: usize,
    repeat: usize,
}

fn parse_args() -> Result<Args, String> {
    let usage = "usage: vector_bench DATA.f32 QUERIES.f32 DIM [--k 15] [--repeat N]";
    let mut positional = Vec::new();
    let mut k = 15;
    let mut repeat = 3;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--k" | "--repeat" => {
                let value = it
                    .next()
                    .ok_or_else(|| format!("{arg} needs a value\n{usage}"))?;
                let n: usize = value
                    .parse()
                    .map_err(|_| format!("{arg}: not a number: {value}\n{usage}"))?;
                if n == 0 {
                    return Err(format!("{arg} must be at least 1\n{usage}"));
                }
                if arg == "--k" {
                    k = n;
                } else {
                    repeat = n;
                }
            }
            "-h" | "--help" => return Err(usage.to_owned()),
            _ => positional.push(arg),
        }
    }
    let [data, queries, dim]: [String; 3] = positional.try_into().map_err(|_| usage.to_owned())?;
    let dim: usize = dim
        .parse()
        .map_err(|_| format!("DIM: not a number: {dim}\n{usage}"))?;
    if dim == 0 {
        return Err(format!("DIM must be at least 1\n{usage}"));
    }
    Ok(Args {
        data,
        queries,
        dim,
        k,
        repeat,
    })
}

/// Reads a raw little-endian float32 file into one `Vec<f32>` of exactly its size.
fn read_f32(path: &str, dim: usize) -> Result<Vec<f32>, String> {
    let mut file = File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let bytes = file.metadata().map_err(|e| format!("{path}: {e}"))?.len();
    let bytes = usize::try_from(bytes).map_err(|_| format!("{path}: too large"))?;
    if bytes % (4 * dim) != 0 {
        return Err(format!(
            "{path}: {bytes} bytes is not a whole number of {dim}-float rows"
        ));
    }
    let mut out = vec![0f32; bytes / 4];
    let mut buf = vec![0u8; 1 << 20];
    let mut filled = 0;
    for slot in out.chunks_mut(buf.len() / 4) {
        let want = &mut buf[..slot.len() * 4];
        file.read_exact(want).map_err(|e| format!("{path}: {e}"))?;
        for (x, b) in slot.iter_mut().zip(want.chunks_exact(4)) {
            *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        filled += slot.len();
    }
    debug_assert_eq!(filled, out.len());
    Ok(out)
}

/// Sum of every element, with the widest SIMD loads the CPU has (pulp's run-time choice, as
/// the search uses) and 4 independent accumulators, so the loop is limited by reading memory;
/// returned so it cannot be optimised away.
fn sum_all(data: &[f32]) -> f32 {
    struct Sum<'a>(&'a [f32]);
    impl pulp::WithSimd for Sum<'_> {
        type Output = f32;
        #[allow(clippy::inline_always)] // compiled with the features pulp enables
        #[inline(always)]
        fn with_simd<S: pulp::Simd>(self, simd: S) -> f32 {
            let (head, tail) = S::as_simd_f32s(self.0);
            let zero = simd.splat_f32s(0.0);
            let mut acc = [zero; 4];
            let mut quads = head.chunks_exact(4);
            for q in &mut quads {
                for i in 0..4 {
                    acc[i] = simd.add_f32s(acc[i], q[i]);
                }
            }
            for x in quads.remainder() {
                acc[0] = simd.add_f32s(acc[0], *x);
            }
            let lanes = simd.add_f32s(simd.add_f32s(acc[0], acc[1]), simd.add_f32s(acc[2], acc[3]));
            simd.reduce_sum_f32s(lanes) + tail.iter().sum::<f32>()
        }
    }
    pulp::Arch::new().dispatch(Sum(data))
}

/// CPU time of the calling thread in seconds, from `/proc/thread-self/schedstat` (Linux; its
/// first field is nanoseconds on the CPU). `None` where that file is missing.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 / 1e9)
}

/// `AnonHugePages` of this process in KiB, from `/proc/self/smaps_rollup` (Linux): how much
/// of the data array sits in transparent huge pages. `None` where that file is missing.
fn anon_huge_pages_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = text.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Timings of the best of several runs.
#[derive(Clone, Copy)]
struct Best {
    /// Fastest wall-clock seconds.
    wall: f64,
    /// Fewest CPU seconds of this thread (NaN where unknown): on a shared machine this leaves
    /// out the time the thread waited for a core, not the time it waited for memory.
    cpu: f64,
}

/// Best of `repeat` runs of `f`.
fn best_of(repeat: usize, mut f: impl FnMut()) -> Best {
    let mut best = Best {
        wall: f64::INFINITY,
        cpu: f64::INFINITY,
    };
    for _ in 0..repeat {
        let cpu0 = thread_cpu_seconds();
        let start = Instant::now();
        f();
        let wall = start.elapsed().as_secs_f64();
        let cpu = match (cpu0, thread_cpu_seconds()) {
            (Some(a), Some(b)) => b - a,
            _ => f64::NAN,
        };
        best.wall = best.wall.min(wall);
        best.cpu = best.cpu.min(cpu);
    }
    best
}

fn rows_of(hits: &[Hit]) -> Vec<usize> {
    hits.iter().map(|h| h.row).collect()
}

fn run(args: &Args) -> Result<(), String> {
    let load = Instant::now();
    let data = read_f32(&args.data, args.dim)?;
    let queries = read_f32(&args.queries, args.dim)?;
    let load_seconds = load.elapsed().as_secs_f64();
    let huge_pages_kib = anon_huge_pages_kib();
    let rows = data.len() / args.dim;
    let bytes = (data.len() * 4) as f64;

    // Bandwidth probe on the data array, before it moves into the index: enough passes for
    // about a second (at least `repeat`), since one pass over a small array is brief.
    let mut probe = 0f32;
    let passes = args.repeat.max((4e9 / bytes).ceil() as usize).min(100);
    let probe_time = best_of(passes, || probe += sum_all(black_box(&data)));
    black_box(probe);
    let bandwidth = bytes / probe_time.wall;

    let index = FlatIndex::from_vec(args.dim, data, (0..rows).map(|r| r.to_string()).collect())
        .map_err(|e| format!("{}: {e}", args.data))?;
    let queries: Vec<&[f32]> = queries.chunks_exact(args.dim).collect();

    // Timed passes; the answers of the last one are kept for the cross-checks (collecting
    // them costs nothing next to a pass over the data).
    let mut single: Vec<Vec<Hit>> = Vec::new();
    let single_time = best_of(args.repeat, || {
        single = queries
            .iter()
            .map(|q| index.search(black_box(q), args.k, None))
            .collect();
    });
    let mut batch: Vec<Vec<Hit>> = Vec::new();
    let batch_time = best_of(args.repeat, || {
        batch = index.search_batch(black_box(&queries), args.k);
    });
    let batch_matches_single = single
        .iter()
        .zip(&batch)
        .all(|(s, b)| rows_of(s) == rows_of(b));

    let n = queries.len() as f64;
    let bound_qps = bandwidth / bytes;
    let single_qps = n / single_time.wall;
    let finite = |x: f64| if x.is_finite() { Some(x) } else { None };
    let first = &single[..single.len().min(3)];
    let line = serde_json::json!({
        "engine": "assay",
        "data": args.data,
        "rows": rows,
        "dim": args.dim,
        "queries": queries.len(),
        "k": args.k,
        "repeat": args.repeat,
        "load_seconds": load_seconds,
        "anon_huge_pages_kib": huge_pages_kib,
        "single_seconds": single_time.wall,
        "single_qps": single_qps,
        "single_qps_cpu": finite(n / single_time.cpu),
        "batch_seconds": batch_time.wall,
        "batch_qps": n / batch_time.wall,
        "batch_qps_cpu": finite(n / batch_time.cpu),
        "bandwidth_gbs": bandwidth / 1e9,
        "bandwidth_gbs_cpu": finite(bytes / probe_time.cpu / 1e9),
        "bound_qps": bound_qps,
        "single_pct_of_bound": 100.0 * single_qps / bound_qps,
        "batch_matches_single": batch_matches_single,
        "top_ids": first.iter().map(|h| rows_of(h)).collect::<Vec<_>>(),
        "top_scores": first.iter().map(|h| h.iter().map(|x| x.score).collect::<Vec<_>>()).collect::<Vec<_>>(),
    });
    println!("{line}");
    Ok(())
}

fn main() -> ExitCode {
    match parse_args().and_then(|args| run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}
