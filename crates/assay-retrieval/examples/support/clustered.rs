//! Clustered unit vectors for the vector-search benchmarks (`store_bench` in this crate and
//! `hnsw_runs_bench` in assay-cli include this file, so both measure the same vectors): random
//! unit centroids, then rows that are a centroid plus Gaussian noise of expected norm 0.6 shaped
//! by a power-law spectrum, normalised. Seeded SplitMix64, the same on every machine.

/// SplitMix64: small, fast, and the same on every machine.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1).
    pub fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let (u, v) = (self.unit(), self.unit());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

pub fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v.iter_mut() {
            *x /= norm;
        }
    }
}

/// The standard deviation of each dimension: `sqrt(λ_i)` with variances `λ_i ∝ i^-decay`
/// summing to 1 (`decay` 0: every dimension alike, `1/sqrt(dim)`).
pub fn spectrum(dim: usize, decay: f64) -> Vec<f64> {
    let variances: Vec<f64> = (1..=dim).map(|i| (i as f64).powf(-decay)).collect();
    let total: f64 = variances.iter().sum();
    variances.iter().map(|v| (v / total).sqrt()).collect()
}

/// `count` random unit centroids, their coordinates drawn with the same `scale`.
pub fn centroids(count: usize, scale: &[f64], seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng(seed ^ 0xC3A5_C85C_97CB_3127);
    (0..count)
        .map(|_| {
            let mut c: Vec<f32> = scale.iter().map(|s| (s * rng.normal()) as f32).collect();
            normalise(&mut c);
            c
        })
        .collect()
}

/// Rows one after another: each picks a centroid, adds noise shaped by `scale`, normalises.
pub struct Generator<'a> {
    pub scale: &'a [f64],
    pub centroids: &'a [Vec<f32>],
    pub rng: Rng,
}

impl Generator<'_> {
    /// Writes the next row into `v` (`scale.len()` long).
    pub fn next_row(&mut self, v: &mut [f32]) {
        let pick = (self.rng.next() % self.centroids.len() as u64) as usize;
        let centroid = &self.centroids[pick];
        for ((x, c), s) in v.iter_mut().zip(centroid).zip(self.scale) {
            *x = c + (0.6 * s * self.rng.normal()) as f32;
        }
        normalise(v);
    }
}

/// `rows` rows of a [`Generator`] seeded with `seed`, row after row in one buffer.
#[allow(dead_code)] // store_bench's; hnsw_runs_bench streams rows instead
pub fn generate(rows: usize, centroids: &[Vec<f32>], scale: &[f64], seed: u64) -> Vec<f32> {
    let mut g = Generator {
        scale,
        centroids,
        rng: Rng(seed),
    };
    let mut data = vec![0f32; rows * scale.len()];
    for row in data.chunks_mut(scale.len()) {
        g.next_row(row);
    }
    data
}
