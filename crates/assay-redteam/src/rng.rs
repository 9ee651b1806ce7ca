//! The seeded generator every attempt draws from: SplitMix64, written here so that an
//! attempt's id, seed and family give the same attack in every assay version that keeps the
//! payload library's version (a crate's generator may change its stream between releases).

/// SplitMix64 (Steele, Lea and Flood, 2014).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator of attempt `index` of `family` in a run seeded with `seed`.
    pub fn for_attempt(seed: u64, family: &str, index: usize) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in family.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let mut rng = Rng(seed ^ h ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        rng.next_u64();
        rng
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// One of `items` (not empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn the_stream_is_fixed() {
        // SplitMix64's reference output for state 0 after one step.
        let mut r = Rng(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        let a: Vec<u64> = (0..3)
            .map(|_| Rng::for_attempt(7, "leakage", 3).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            Rng::for_attempt(7, "leakage", 3).next_u64(),
            Rng::for_attempt(7, "leakage", 4).next_u64()
        );
    }
}
