//! Exact vector search: cosine similarity over L2-normalised vectors (so a dot product), held
//! contiguously, scanned in one pass with a fixed-size top-k and no per-row allocation.
//!
//! [`VectorIndex`] is the seam for other backends (PostgreSQL + pgvector). The scoring loops
//! are in [`kernel`]: SIMD chosen at run time (AVX-512, AVX2, NEON), bit-identical scores for
//! single and batched searches.

use std::cmp::Ordering;

mod kernel;

/// A search result: the row and its similarity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Row index in insertion order.
    pub row: usize,
    /// Cosine similarity (dot product of normalised vectors).
    pub score: f32,
}

/// A vector does not fit the index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VectorError {
    /// Wrong length.
    #[error("vector for `{id}` has dimension {found}, the index has {expected}")]
    Dimension {
        /// The vector's id.
        id: String,
        /// The index's dimension.
        expected: usize,
        /// The vector's.
        found: usize,
    },
}

/// Nearest-neighbour search over stored vectors.
pub trait VectorIndex: Send + Sync {
    /// Vector length.
    fn dimension(&self) -> usize;
    /// Number of rows.
    fn len(&self) -> usize;
    /// Whether there are no rows.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The id of a row.
    fn id(&self, row: usize) -> &str;
    /// The `k` rows most similar to `query` among those `allow` accepts (all when `None`),
    /// best first.
    fn search(&self, query: &[f32], k: usize, allow: Option<&[bool]>) -> Vec<Hit>;
}

/// Vectors in one contiguous `Vec<f32>`, searched exactly.
#[derive(Debug, Clone, Default)]
pub struct FlatIndex {
    dimension: usize,
    data: Vec<f32>,
    ids: Vec<String>,
}

const LANES: usize = 16;

/// Dot product with independent accumulators so the compiler can keep several SIMD registers
/// busy (a single running sum would serialise on the add latency).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let ca = a.chunks_exact(LANES);
    let cb = b.chunks_exact(LANES);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    let mut acc = [0f32; LANES];
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let mut sum = 0f32;
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    // A plain sum of the lanes: LLVM keeps the accumulator loop at full SIMD width with it,
    // where a hand-written pairwise reduction made it emit 2-wide code (measured: +31% per
    // query; bench/README.md).
    sum + acc.iter().sum::<f32>()
}

/// Scales a vector to unit length in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = dot(v, v).sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

/// A fixed-capacity list of the best hits seen so far, best first; equal scores by row, so the
/// result does not depend on the order rows are offered in.
struct TopK {
    k: usize,
    hits: Vec<Hit>,
}

impl TopK {
    fn new(k: usize) -> TopK {
        TopK {
            k,
            hits: Vec::with_capacity(k + 1),
        }
    }

    #[inline]
    fn offer(&mut self, row: usize, score: f32) {
        if self.hits.len() == self.k {
            match self.hits.last() {
                Some(last) if score > last.score || (score == last.score && row < last.row) => {}
                _ => return,
            }
        }
        if score.is_nan() {
            return;
        }
        let at = self
            .hits
            .partition_point(|h| h.score > score || (h.score == score && h.row < row));
        self.hits.insert(at, Hit { row, score });
        self.hits.truncate(self.k);
    }
}

impl FlatIndex {
    /// An empty index for vectors of `dimension`.
    pub fn new(dimension: usize) -> FlatIndex {
        FlatIndex {
            dimension,
            data: Vec::new(),
            ids: Vec::new(),
        }
    }

    /// An index with room for `rows` vectors.
    pub fn with_capacity(dimension: usize, rows: usize) -> FlatIndex {
        FlatIndex {
            dimension,
            data: Vec::with_capacity(dimension * rows),
            ids: Vec::with_capacity(rows),
        }
    }

    /// An index over `data`, `dimension` floats per row, one id per row (no copy).
    pub fn from_vec(
        dimension: usize,
        data: Vec<f32>,
        ids: Vec<String>,
    ) -> Result<FlatIndex, VectorError> {
        if dimension == 0 || data.len() != dimension * ids.len() {
            return Err(VectorError::Dimension {
                id: format!("({} rows)", ids.len()),
                expected: dimension * ids.len(),
                found: data.len(),
            });
        }
        Ok(FlatIndex {
            dimension,
            data,
            ids,
        })
    }

    /// Adds a vector (expected to be normalised) and returns its row.
    pub fn push(&mut self, id: impl Into<String>, vector: &[f32]) -> Result<usize, VectorError> {
        let id = id.into();
        if vector.len() != self.dimension {
            return Err(VectorError::Dimension {
                id,
                expected: self.dimension,
                found: vector.len(),
            });
        }
        self.data.extend_from_slice(vector);
        self.ids.push(id);
        Ok(self.ids.len() - 1)
    }

    /// The vector of a row.
    pub fn vector(&self, row: usize) -> &[f32] {
        &self.data[row * self.dimension..(row + 1) * self.dimension]
    }

    /// Searches many queries at once, each like [`VectorIndex::search`] without a mask (same
    /// scores, same order): every row is read from memory once for the whole batch and scored
    /// against all the queries while it is in registers. A query whose length is not the
    /// index's dimension gets no hits.
    pub fn search_batch(&self, queries: &[&[f32]], k: usize) -> Vec<Vec<Hit>> {
        let mut tops: Vec<TopK> = queries.iter().map(|_| TopK::new(k)).collect();
        let valid: Vec<usize> = (0..queries.len())
            .filter(|&q| queries[q].len() == self.dimension)
            .collect();
        if self.dimension == 0 || k == 0 || valid.is_empty() {
            return tops.into_iter().map(|t| t.hits).collect();
        }
        let valid_queries: Vec<&[f32]> = valid.iter().map(|&q| queries[q]).collect();
        kernel::scan_many(
            &self.data,
            self.dimension,
            &valid_queries,
            |q, row, score| {
                tops[valid[q]].offer(row, score);
            },
        );
        tops.into_iter().map(|t| t.hits).collect()
    }
}

impl VectorIndex for FlatIndex {
    fn dimension(&self) -> usize {
        self.dimension
    }

    fn len(&self) -> usize {
        self.ids.len()
    }

    fn id(&self, row: usize) -> &str {
        &self.ids[row]
    }

    fn search(&self, query: &[f32], k: usize, allow: Option<&[bool]>) -> Vec<Hit> {
        let mut top = TopK::new(k);
        if query.len() != self.dimension || self.dimension == 0 || k == 0 {
            return Vec::new();
        }
        match allow {
            None => kernel::scan_one(&self.data, self.dimension, query, |row, score| {
                top.offer(row, score);
            }),
            Some(mask) => kernel::scan_one(&self.data, self.dimension, query, |row, score| {
                if mask.get(row).copied().unwrap_or(false) {
                    top.offer(row, score);
                }
            }),
        }
        top.hits
    }
}

impl FlatIndex {
    /// The similarity of `query` to every row, in row order (empty when the dimension does not
    /// match): for callers that pool several rows per item.
    pub fn scores(&self, query: &[f32]) -> Vec<f32> {
        if query.len() != self.dimension || self.dimension == 0 {
            return Vec::new();
        }
        let mut out = vec![0.0f32; self.ids.len()];
        kernel::scan_one(&self.data, self.dimension, query, |row, score| {
            if let Some(slot) = out.get_mut(row) {
                *slot = score;
            }
        });
        out
    }
}

/// Orders hits best first, ties by row (for callers that merge results).
pub fn sort_hits(hits: &mut [Hit]) {
    hits.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(Ordering::Equal)
            .then(a.row.cmp(&b.row))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(v: &[f32]) -> Vec<f32> {
        let mut v = v.to_vec();
        normalize(&mut v);
        v
    }

    fn brute(index: &FlatIndex, q: &[f32], k: usize) -> Vec<usize> {
        let mut all: Vec<Hit> = (0..index.len())
            .map(|r| Hit {
                row: r,
                score: dot(index.vector(r), q),
            })
            .collect();
        sort_hits(&mut all);
        all.into_iter().take(k).map(|h| h.row).collect()
    }

    fn pseudo_random(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                let v: Vec<f32> = (0..dim)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1_442_695_040_888_963_407);
                        ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
                    })
                    .collect();
                unit(&v)
            })
            .collect()
    }

    #[test]
    fn dot_matches_the_naive_sum() {
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..37).map(|i| 1.0 - i as f32 * 0.01).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-3);
    }

    #[test]
    fn search_finds_the_exact_top_k() {
        let vectors = pseudo_random(500, 24, 7);
        let mut index = FlatIndex::new(24);
        for (i, v) in vectors.iter().enumerate() {
            index.push(format!("e{i}"), v).unwrap();
        }
        let queries = pseudo_random(5, 24, 99);
        for q in &queries {
            let hits = index.search(q, 15, None);
            assert_eq!(
                hits.iter().map(|h| h.row).collect::<Vec<_>>(),
                brute(&index, q, 15)
            );
            assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        }
        let refs: Vec<&[f32]> = queries.iter().map(Vec::as_slice).collect();
        for (q, hits) in queries.iter().zip(index.search_batch(&refs, 15)) {
            assert_eq!(
                hits.iter().map(|h| h.row).collect::<Vec<_>>(),
                brute(&index, q, 15)
            );
            // Same rows, same scores to the bit, as the single search.
            assert_eq!(hits, index.search(q, 15, None));
        }
        // A query of the wrong length gets nothing and does not disturb the others.
        let mixed: Vec<&[f32]> = vec![&queries[0], &[1.0, 0.0], &queries[1]];
        let answers = index.search_batch(&mixed, 3);
        assert!(answers[1].is_empty());
        assert_eq!(answers[0], index.search(&queries[0], 3, None));
        assert_eq!(answers[2], index.search(&queries[1], 3, None));
    }

    #[test]
    fn equal_scores_are_ordered_by_row_in_single_and_batched_searches() {
        // 23 identical rows (more than a multiple of the four scan streams) and one better.
        let mut index = FlatIndex::new(3);
        for i in 0..23 {
            index
                .push(format!("same{i}"), &unit(&[1.0, 1.0, 0.0]))
                .unwrap();
        }
        index.push("best", &unit(&[1.0, 0.9, 0.1])).unwrap();
        let q = unit(&[1.0, 0.9, 0.1]);
        let hits = index.search(&q, 5, None);
        assert_eq!(
            hits.iter().map(|h| h.row).collect::<Vec<_>>(),
            vec![23, 0, 1, 2, 3]
        );
        assert_eq!(index.search_batch(&[&q], 5), vec![hits]);
    }

    #[test]
    fn the_mask_filters_rows() {
        let mut index = FlatIndex::new(2);
        index.push("a", &unit(&[1.0, 0.0])).unwrap();
        index.push("b", &unit(&[0.9, 0.1])).unwrap();
        index.push("c", &unit(&[0.0, 1.0])).unwrap();
        let hits = index.search(&[1.0, 0.0], 2, Some(&[false, true, true]));
        assert_eq!(
            hits.iter().map(|h| index.id(h.row)).collect::<Vec<_>>(),
            vec!["b", "c"]
        );
        assert!(index.search(&[1.0, 0.0], 0, None).is_empty());
    }

    #[test]
    fn wrong_dimensions_are_rejected() {
        let mut index = FlatIndex::new(3);
        assert!(matches!(
            index.push("x", &[1.0]),
            Err(VectorError::Dimension {
                expected: 3,
                found: 1,
                ..
            })
        ));
        assert!(index.search(&[1.0], 3, None).is_empty());
    }
}
