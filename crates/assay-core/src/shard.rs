//! Splitting a suite across machines: `--shard hash:i/n` keeps the cases whose stable id hashes
//! to shard `i` of `n` (1-based, as cargo-nextest's `--partition hash:m/n` and Playwright's
//! `--shard=i/n` count). A case's shard depends on its own id and `n` only, so adding or
//! removing a case moves no other case to another shard.
//!
//! The hash is FNV-1a (64 bits) of the key's UTF-8 bytes, finished with SplitMix64's mixer so
//! that ids differing in their last character spread evenly; it is written out here, so every
//! platform and every version of assay puts a case in the same shard.
//!
//! ```
//! use assay_core::shard::Shard;
//! let shard = Shard::parse("hash:2/4").unwrap();
//! assert_eq!((shard.index, shard.count), (2, 4));
//! assert_eq!(shard.to_string(), "hash:2/4");
//! let kept = (0..1000).filter(|i| shard.contains(&format!("state/S{i}"))).count();
//! assert!((200..300).contains(&kept));
//! assert!(Shard::parse("hash:5/4").is_err());
//! ```

use serde::{Deserialize, Serialize};

/// One shard of `count`: the cases whose key hashes to `index` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Shard {
    /// Which shard, from 1 to `count`.
    pub index: u32,
    /// How many shards the suite is split into.
    pub count: u32,
}

impl Shard {
    /// The most shards a suite may be split into.
    pub const MAX: u32 = 10_000;

    /// Parses `hash:i/n` (also `i/n`, hash being the only method). The error says what is
    /// wrong in words a command-line flag can show after its name.
    pub fn parse(spec: &str) -> Result<Shard, String> {
        let spec = spec.trim();
        let rest = match spec.split_once(':') {
            Some(("hash", rest)) => rest,
            Some((method, _)) => {
                return Err(format!(
                    "unknown sharding method `{method}` in `{spec}` (expected `hash:i/n`, e.g. hash:1/4)"
                ));
            }
            None => spec,
        };
        let Some((i, n)) = rest.split_once('/') else {
            return Err(format!(
                "`{spec}` is not of the form hash:i/n (e.g. hash:1/4)"
            ));
        };
        let number = |s: &str, what: &str| {
            s.trim().parse::<u32>().map_err(|_| {
                format!("`{spec}`: the {what} `{s}` is not a whole number (expected hash:i/n, e.g. hash:1/4)")
            })
        };
        let (index, count) = (number(i, "shard")?, number(n, "shard count")?);
        if count == 0 || count > Self::MAX {
            return Err(format!(
                "`{spec}`: the shard count must be from 1 to {}",
                Self::MAX
            ));
        }
        if index == 0 || index > count {
            return Err(format!(
                "`{spec}`: the shard must be from 1 to {count} (shards count from 1)"
            ));
        }
        Ok(Shard { index, count })
    }

    /// The shard (1-based) that `key` belongs to when the suite is split into `count`.
    pub fn of(key: &str, count: u32) -> u32 {
        let count = u64::from(count.max(1));
        (hash(key) % count) as u32 + 1
    }

    /// Whether the case with stable key `key` belongs to this shard.
    pub fn contains(&self, key: &str) -> bool {
        Self::of(key, self.count) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "hash:{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Shard::parse(s)
    }
}

/// FNV-1a over the bytes, then SplitMix64's finaliser.
fn hash(key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_forms_and_rejects_the_rest() {
        assert_eq!(Shard::parse("hash:1/1"), Ok(Shard { index: 1, count: 1 }));
        assert_eq!(Shard::parse("3/8"), Ok(Shard { index: 3, count: 8 }));
        for bad in [
            "hash:0/4",
            "hash:5/4",
            "hash:1/0",
            "count:1/2",
            "hash:a/2",
            "1-2",
            "",
        ] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert!(
            Shard::parse("hash:0/4")
                .unwrap_err()
                .contains("from 1 to 4")
        );
        assert!(Shard::parse("rr:1/2").unwrap_err().contains("`rr`"));
    }

    #[test]
    fn every_key_is_in_exactly_one_shard() {
        for n in [1u32, 2, 3, 4, 7] {
            for i in 0..200 {
                let key = format!("semantic/SEM-{i:04}");
                let holders = (1..=n)
                    .filter(|&k| Shard { index: k, count: n }.contains(&key))
                    .count();
                assert_eq!(holders, 1, "{key} in {holders} of {n}");
            }
        }
    }

    #[test]
    fn the_hash_is_fixed_and_spreads_evenly() {
        // Pinned: a case must land in the same shard on every platform and version.
        assert_eq!(
            Shard::of("state/STATE-001", 4),
            Shard::of("state/STATE-001", 4)
        );
        let pinned: Vec<u32> = ["a", "b", "state/S1", "semantic/SEM-001"]
            .iter()
            .map(|k| Shard::of(k, 4))
            .collect();
        assert_eq!(pinned, PINNED);
        let mut counts = [0usize; 4];
        for i in 0..10_000 {
            counts[Shard::of(&format!("pattern/P{i}"), 4) as usize - 1] += 1;
        }
        for c in counts {
            assert!((2_300..2_700).contains(&c), "{counts:?}");
        }
    }

    const PINNED: [u32; 4] = [1, 2, 1, 3];
}
