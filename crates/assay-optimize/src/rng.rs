//! SplitMix64: the study's only source of randomness.
//!
//! Written here rather than taken from `rand` so that a study's draws depend on nothing but its
//! seed and history: `rand`'s value streams for `random_range` and friends have changed between
//! releases, and a `--resume`d study must ask for exactly what an uninterrupted one would.
//! SplitMix64 (Steele, Lea and Flood, 2014) passes BigCrush, needs 8 bytes of state and is a
//! handful of instructions; it is not cryptographic, which a sampler does not need.

/// A SplitMix64 generator.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix64(u64);

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl SplitMix64 {
    /// The stream for trial `number` of a study seeded with `seed`: each trial draws from its
    /// own stream, so what a trial asks for depends on (seed, number, history) only.
    pub(crate) fn for_trial(seed: u64, number: usize) -> Self {
        Self(mix(
            seed ^ mix((number as u64).wrapping_add(1).wrapping_mul(GOLDEN))
        ))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` without modulo bias (Lemire's multiply-and-reject). `n` must be > 0.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let n = n as u64;
        loop {
            let m = u128::from(self.next_u64()) * u128::from(n);
            let low = m as u64;
            if low < n && low < n.wrapping_neg() % n {
                continue;
            }
            return (m >> 64) as usize;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SplitMix64;

    #[test]
    fn below_is_uniform_enough_and_in_range() {
        let mut rng = SplitMix64::for_trial(7, 0);
        let mut counts = [0usize; 5];
        for _ in 0..50_000 {
            counts[rng.below(5)] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        let x = rng.next_f64();
        assert!((0.0..1.0).contains(&x));
    }

    #[test]
    fn streams_differ_by_seed_and_trial() {
        let a = SplitMix64::for_trial(1, 0).next_u64();
        assert_eq!(a, SplitMix64::for_trial(1, 0).next_u64());
        assert_ne!(a, SplitMix64::for_trial(1, 1).next_u64());
        assert_ne!(a, SplitMix64::for_trial(2, 0).next_u64());
    }
}
