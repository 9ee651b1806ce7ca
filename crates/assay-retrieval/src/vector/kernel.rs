//! The scoring loops of [`FlatIndex`](super::FlatIndex): dot products of stored rows with one
//! or many queries, in SIMD registers as wide as the CPU offers.
//!
//! The instruction set is picked at run time ([`pulp::Arch`]: AVX-512 or AVX2 + FMA on x86-64,
//! NEON on aarch64), so one portable binary uses the widest loads the machine has; the code
//! itself is safe Rust, written once over pulp's [`Simd`] trait. Where pulp finds no SIMD the
//! loops fall back to [`super::dot`], which the compiler vectorises for the baseline target.
//!
//! Every (row, query) score is computed the same way whatever the tile it is part of: one
//! accumulator over the full-width chunks in order, then the zero-padded last chunk, then the sum
//! of the lanes. So a batched search and a single search give bit-identical scores.
//!
//! Tiles: `R` rows × `Q` queries of accumulators, each loaded row chunk used `Q` times and each
//! query chunk `R` times, sized to fit the register file (32 registers with AVX-512 or NEON, 16
//! with AVX2). The rows of a tile are read from memory once for all queries of a batch.

// `#[inline(always)]` is what makes pulp work: code inlined into `WithSimd::with_simd` is
// compiled with the target features `vectorize` enables; out of line it would not be.
#![allow(clippy::inline_always)]

use std::array;

use pulp::{Arch, Simd, WithSimd};

/// Calls `sink(row, score)` for every row of `data` (`dim` floats each), in no particular
/// order, with the row's dot product with `query` (`dim` floats).
pub(crate) fn scan_one(data: &[f32], dim: usize, query: &[f32], sink: impl FnMut(usize, f32)) {
    debug_assert!(dim > 0 && query.len() == dim && data.len().is_multiple_of(dim));
    Arch::new().dispatch(ScanOne {
        data,
        dim,
        query,
        sink,
    });
}

/// Calls `sink(query, row, score)` for every pair of a row of `data` and a query; the rows
/// are visited in order, each once for all the queries.
pub(crate) fn scan_many(
    data: &[f32],
    dim: usize,
    queries: &[&[f32]],
    sink: impl FnMut(usize, usize, f32),
) {
    debug_assert!(
        dim > 0 && queries.iter().all(|q| q.len() == dim) && data.len().is_multiple_of(dim)
    );
    if queries.is_empty() {
        return;
    }
    Arch::new().dispatch(ScanMany {
        data,
        dim,
        queries,
        sink,
    });
}

struct ScanOne<'a, F> {
    data: &'a [f32],
    dim: usize,
    query: &'a [f32],
    sink: F,
}

impl<F: FnMut(usize, f32)> WithSimd for ScanOne<'_, F> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let ScanOne {
            data,
            dim,
            query,
            mut sink,
        } = self;
        if S::F32_LANES == 1 {
            for (row, x) in data.chunks_exact(dim).enumerate() {
                sink(row, super::dot(x, query));
            }
            return;
        }
        // One query: memory-bound. The rows are read as four streams, one from each quarter of
        // the data, a row of each per step: more reads in flight than one stream gives (the
        // hardware prefetcher stops at every 4 KiB page), measured +10% on 100k x 384.
        let rows = data.len() / dim;
        let per = rows / 4;
        let quarter = per * dim;
        for i in 0..per {
            let at = |s: usize| &data[s * quarter + i * dim..s * quarter + (i + 1) * dim];
            let scores = tile_4x1(simd, [at(0), at(1), at(2), at(3)], query);
            for (s, score) in scores.into_iter().enumerate() {
                sink(s * per + i, score);
            }
        }
        for (j, x) in data[4 * quarter..].chunks_exact(dim).enumerate() {
            sink(4 * per + j, tile_1x1(simd, x, query));
        }
    }
}

struct ScanMany<'a, 'q, F> {
    data: &'a [f32],
    dim: usize,
    queries: &'a [&'q [f32]],
    sink: F,
}

impl<F: FnMut(usize, usize, f32)> WithSimd for ScanMany<'_, '_, F> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, simd: S) {
        let ScanMany {
            data,
            dim,
            queries,
            mut sink,
        } = self;
        if S::F32_LANES == 1 {
            for (row, x) in data.chunks_exact(dim).enumerate() {
                for (q, query) in queries.iter().enumerate() {
                    sink(q, row, super::dot(x, query));
                }
            }
            return;
        }
        // Groups of 4 rows, each scored against every query while it sits in L1.
        let mut groups = data.chunks_exact(4 * dim);
        let mut row = 0;
        for group in &mut groups {
            let rows: [&[f32]; 4] = split_rows(group, dim);
            let mut q0 = 0;
            // The two loops below differ only in tile width; a shared generic helper taking the
            // tile as a closure measured 24% slower (750 against 980 queries/s, 100k x 384).
            if S::F32_LANES >= 16 {
                // AVX-512 (32 registers): 16 accumulators and 8 loaded chunks.
                for qs in queries.chunks_exact(4) {
                    let scores = tile_4x4(simd, rows, [qs[0], qs[1], qs[2], qs[3]]);
                    for (r, per_query) in scores.iter().enumerate() {
                        for (j, s) in per_query.iter().enumerate() {
                            sink(q0 + j, row + r, *s);
                        }
                    }
                    q0 += 4;
                }
            } else {
                // AVX2 or NEON: 8 accumulators and 6 loaded chunks (AVX2 has 16 registers).
                for qs in queries.chunks_exact(2) {
                    let scores = tile_4x2(simd, rows, [qs[0], qs[1]]);
                    for (r, per_query) in scores.iter().enumerate() {
                        for (j, s) in per_query.iter().enumerate() {
                            sink(q0 + j, row + r, *s);
                        }
                    }
                    q0 += 2;
                }
            }
            for (q, query) in queries.iter().enumerate().skip(q0) {
                for (r, s) in tile_4x1(simd, rows, query).into_iter().enumerate() {
                    sink(q, row + r, s);
                }
            }
            row += 4;
        }
        for x in groups.remainder().chunks_exact(dim) {
            for (q, query) in queries.iter().enumerate() {
                sink(q, row, tile_1x1(simd, x, query));
            }
            row += 1;
        }
    }
}

/// The `R` rows of a group of `R * dim` floats.
#[inline(always)]
fn split_rows<const R: usize>(group: &[f32], dim: usize) -> [&[f32]; R] {
    array::from_fn(|r| &group[r * dim..(r + 1) * dim])
}

/// The zero-padded last chunks of `R` rows and of `Q` queries.
type Tails<S, const R: usize, const Q: usize> = ([<S as Simd>::f32s; R], [<S as Simd>::f32s; Q]);

/// The full-width chunks of `R` rows and `Q` queries (all of one length, so the same count of
/// chunks: the loops index them without bounds checks) and their zero-padded last chunks.
struct Chunks<'a, S: Simd, const R: usize, const Q: usize> {
    n: usize,
    xs: [&'a [S::f32s]; R],
    qs: [&'a [S::f32s]; Q],
    /// `None` when the length is a whole number of chunks.
    tails: Option<Tails<S, R, Q>>,
}

#[inline(always)]
fn chunks<'a, S: Simd, const R: usize, const Q: usize>(
    simd: S,
    rows: [&'a [f32]; R],
    queries: [&'a [f32]; Q],
) -> Chunks<'a, S, R, Q> {
    let rows = rows.map(S::as_simd_f32s);
    let queries = queries.map(S::as_simd_f32s);
    let n = queries[0].0.len();
    let tails = (!queries[0].1.is_empty()).then(|| {
        (
            rows.map(|(_, tail)| simd.partial_load_f32s(tail)),
            queries.map(|(_, tail)| simd.partial_load_f32s(tail)),
        )
    });
    Chunks {
        n,
        xs: rows.map(|(head, _)| &head[..n]),
        qs: queries.map(|(head, _)| &head[..n]),
        tails,
    }
}

// The tiles below are unrolled by hand: one variable per accumulator, which LLVM keeps in a
// register (an array of accumulators was written back to the stack on every step). Each runs
// `step!` over the full chunks, then once over the padded tails, then sums the lanes.

/// Dot products of 4 rows with 4 queries, `[row][query]` (AVX-512: 16 accumulators).
#[inline(always)]
fn tile_4x4<S: Simd>(simd: S, rows: [&[f32]; 4], queries: [&[f32]; 4]) -> [[f32; 4]; 4] {
    let c = chunks::<S, 4, 4>(simd, rows, queries);
    let ([x0, x1, x2, x3], [q0, q1, q2, q3]) = (c.xs, c.qs);
    let z = simd.splat_f32s(0.0);
    let [mut a00, mut a01, mut a02, mut a03] = [z; 4];
    let [mut a10, mut a11, mut a12, mut a13] = [z; 4];
    let [mut a20, mut a21, mut a22, mut a23] = [z; 4];
    let [mut a30, mut a31, mut a32, mut a33] = [z; 4];
    macro_rules! step {
        ($x:expr, $q:expr) => {{
            let [x0, x1, x2, x3] = $x;
            let [q0, q1, q2, q3] = $q;
            a00 = simd.mul_add_e_f32s(x0, q0, a00);
            a01 = simd.mul_add_e_f32s(x0, q1, a01);
            a02 = simd.mul_add_e_f32s(x0, q2, a02);
            a03 = simd.mul_add_e_f32s(x0, q3, a03);
            a10 = simd.mul_add_e_f32s(x1, q0, a10);
            a11 = simd.mul_add_e_f32s(x1, q1, a11);
            a12 = simd.mul_add_e_f32s(x1, q2, a12);
            a13 = simd.mul_add_e_f32s(x1, q3, a13);
            a20 = simd.mul_add_e_f32s(x2, q0, a20);
            a21 = simd.mul_add_e_f32s(x2, q1, a21);
            a22 = simd.mul_add_e_f32s(x2, q2, a22);
            a23 = simd.mul_add_e_f32s(x2, q3, a23);
            a30 = simd.mul_add_e_f32s(x3, q0, a30);
            a31 = simd.mul_add_e_f32s(x3, q1, a31);
            a32 = simd.mul_add_e_f32s(x3, q2, a32);
            a33 = simd.mul_add_e_f32s(x3, q3, a33);
        }};
    }
    for i in 0..c.n {
        step!([x0[i], x1[i], x2[i], x3[i]], [q0[i], q1[i], q2[i], q3[i]]);
    }
    if let Some((x, q)) = c.tails {
        step!(x, q);
    }
    let s = |a| simd.reduce_sum_f32s(a);
    [
        [s(a00), s(a01), s(a02), s(a03)],
        [s(a10), s(a11), s(a12), s(a13)],
        [s(a20), s(a21), s(a22), s(a23)],
        [s(a30), s(a31), s(a32), s(a33)],
    ]
}

/// Dot products of 4 rows with 2 queries, `[row][query]` (AVX2: 8 accumulators).
#[inline(always)]
fn tile_4x2<S: Simd>(simd: S, rows: [&[f32]; 4], queries: [&[f32]; 2]) -> [[f32; 2]; 4] {
    let c = chunks::<S, 4, 2>(simd, rows, queries);
    let ([x0, x1, x2, x3], [q0, q1]) = (c.xs, c.qs);
    let z = simd.splat_f32s(0.0);
    let [
        mut a00,
        mut a01,
        mut a10,
        mut a11,
        mut a20,
        mut a21,
        mut a30,
        mut a31,
    ] = [z; 8];
    macro_rules! step {
        ($x:expr, $q:expr) => {{
            let [x0, x1, x2, x3] = $x;
            let [q0, q1] = $q;
            a00 = simd.mul_add_e_f32s(x0, q0, a00);
            a01 = simd.mul_add_e_f32s(x0, q1, a01);
            a10 = simd.mul_add_e_f32s(x1, q0, a10);
            a11 = simd.mul_add_e_f32s(x1, q1, a11);
            a20 = simd.mul_add_e_f32s(x2, q0, a20);
            a21 = simd.mul_add_e_f32s(x2, q1, a21);
            a30 = simd.mul_add_e_f32s(x3, q0, a30);
            a31 = simd.mul_add_e_f32s(x3, q1, a31);
        }};
    }
    for i in 0..c.n {
        step!([x0[i], x1[i], x2[i], x3[i]], [q0[i], q1[i]]);
    }
    if let Some((x, q)) = c.tails {
        step!(x, q);
    }
    let s = |a| simd.reduce_sum_f32s(a);
    [
        [s(a00), s(a01)],
        [s(a10), s(a11)],
        [s(a20), s(a21)],
        [s(a30), s(a31)],
    ]
}

/// Dot products of 4 rows with one query.
#[inline(always)]
fn tile_4x1<S: Simd>(simd: S, rows: [&[f32]; 4], query: &[f32]) -> [f32; 4] {
    let c = chunks::<S, 4, 1>(simd, rows, [query]);
    let ([x0, x1, x2, x3], [q]) = (c.xs, c.qs);
    let z = simd.splat_f32s(0.0);
    let [mut a0, mut a1, mut a2, mut a3] = [z; 4];
    macro_rules! step {
        ($x:expr, $q:expr) => {{
            let [x0, x1, x2, x3] = $x;
            let [q] = $q;
            a0 = simd.mul_add_e_f32s(x0, q, a0);
            a1 = simd.mul_add_e_f32s(x1, q, a1);
            a2 = simd.mul_add_e_f32s(x2, q, a2);
            a3 = simd.mul_add_e_f32s(x3, q, a3);
        }};
    }
    for i in 0..c.n {
        step!([x0[i], x1[i], x2[i], x3[i]], [q[i]]);
    }
    if let Some((x, q)) = c.tails {
        step!(x, q);
    }
    [a0, a1, a2, a3].map(|a| lane_sum::<S>(simd, a))
}

/// The sum of the lanes of `a`, pairwise (halves added until one lane is left): the same
/// additions in the same order as pulp's `reduce_sum_f32s` on x86 (so single and batched
/// scores stay bit-identical; a test checks it), written out for the single-query scan, where
/// pulp's AVX-512 version, which calls its intrinsics out of line, cost ~20% of the scan
/// (measured on 100k x 384: 71 → 87-98 queries/s). In the batched tiles pulp's version is
/// faster (970 against 560 queries/s), so they keep it.
#[inline(always)]
fn lane_sum<S: Simd>(simd: S, a: S::f32s) -> f32 {
    let lanes: &[f32] = pulp::bytemuck::cast_slice(std::slice::from_ref(&a));
    if lanes.len() > 16 {
        return simd.reduce_sum_f32s(a);
    }
    let mut buf = [0f32; 16];
    buf[..lanes.len()].copy_from_slice(lanes);
    let mut width = 8;
    while width > 0 {
        for i in 0..width {
            buf[i] += buf[i + width];
        }
        width /= 2;
    }
    buf[0]
}

/// The dot product of one row with one query.
#[inline(always)]
fn tile_1x1<S: Simd>(simd: S, row: &[f32], query: &[f32]) -> f32 {
    let c = chunks::<S, 1, 1>(simd, [row], [query]);
    let mut a = simd.splat_f32s(0.0);
    for i in 0..c.n {
        a = simd.mul_add_e_f32s(c.xs[0][i], c.qs[0][i], a);
    }
    if let Some(([x], [q])) = c.tails {
        a = simd.mul_add_e_f32s(x, q, a);
    }
    lane_sum::<S>(simd, a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        (0..n)
            .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
            .collect()
    }

    /// Runs `op` with instruction set `level` (0 portable, 1 AVX2, 2 AVX-512), `None` where
    /// this CPU lacks it.
    fn at_level<Op: WithSimd>(level: u8, op: Op) -> Option<Op::Output> {
        match level {
            0 => Some(op.with_simd(pulp::Scalar::new())),
            #[cfg(target_arch = "x86_64")]
            1 => pulp::x86::V3::try_new().map(|simd| Simd::vectorize(simd, op)),
            #[cfg(target_arch = "x86_64")]
            2 => pulp::x86::V4::try_new().map(|simd| Simd::vectorize(simd, op)),
            _ => None,
        }
    }

    #[test]
    fn every_shape_and_instruction_set_gives_the_dot_product_and_batch_equals_single() {
        for level in 0..=2 {
            // Dimensions below, at and around the SIMD widths; row counts that leave tails
            // of the 4-row tiles and of the four single-query streams.
            for dim in [1, 3, 8, 15, 16, 17, 33, 384, 385] {
                for rows in [1, 3, 4, 5, 9, 18] {
                    let data = values(rows * dim, 11);
                    let queries: Vec<Vec<f32>> = (0..7).map(|q| values(dim, 100 + q)).collect();
                    let refs: Vec<&[f32]> = queries.iter().map(Vec::as_slice).collect();
                    let mut many = vec![vec![f32::NAN; rows]; refs.len()];
                    let op = ScanMany {
                        data: &data,
                        dim,
                        queries: &refs,
                        sink: |q: usize, r: usize, s: f32| many[q][r] = s,
                    };
                    if at_level(level, op).is_none() {
                        continue;
                    }
                    for (q, query) in refs.iter().enumerate() {
                        let mut one = vec![f32::NAN; rows];
                        let op = ScanOne {
                            data: &data,
                            dim,
                            query,
                            sink: |r: usize, s: f32| one[r] = s,
                        };
                        at_level(level, op);
                        assert_eq!(
                            one, many[q],
                            "level {level}, dim {dim}, rows {rows}, query {q}"
                        );
                        for (r, s) in one.iter().enumerate() {
                            let x = &data[r * dim..(r + 1) * dim];
                            let exact: f64 = x
                                .iter()
                                .zip(query.iter())
                                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                                .sum();
                            assert!(
                                (f64::from(*s) - exact).abs() < 1e-4,
                                "level {level}, dim {dim}, row {r}: {s} vs {exact}"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_dispatching_entry_points_score_every_row_once() {
        let dim = 20;
        let data = values(7 * dim, 5);
        let query = values(dim, 9);
        let mut seen = vec![0; 7];
        scan_one(&data, dim, &query, |r, _| seen[r] += 1);
        assert_eq!(seen, vec![1; 7]);
        let mut pairs = vec![vec![0; 7]; 3];
        scan_many(&data, dim, &[&query, &query, &query], |q, r, _| {
            pairs[q][r] += 1;
        });
        assert_eq!(pairs, vec![vec![1; 7]; 3]);
    }

    #[test]
    fn no_queries_no_calls() {
        scan_many(&[1.0, 2.0], 2, &[], |_, _, _| panic!("no query, no score"));
    }
}
