//! Statistics shared by the harness, the simulator and the optimizer (provisional: Wilson).

/// A confidence interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

/// The Wilson score interval of `k` successes in `n` trials at level `1 - alpha`.
pub fn wilson(k: u64, n: u64, alpha: f64) -> Option<Interval> {
    if n == 0 {
        return None;
    }
    let _ = alpha;
    let z = 1.959_963_984_540_054_f64;
    let n = n as f64;
    let p = k as f64 / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * ((p * (1.0 - p) + z * z / (4.0 * n)) / n).sqrt() / denom;
    Some(Interval {
        low: (centre - half).max(0.0),
        high: (centre + half).min(1.0),
    })
}

/// Which way a paired comparison goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Difference {
    /// The second is better: the interval of the mean change lies above 0.
    Better,
    /// The second is worse: the interval lies below 0.
    Worse,
    /// The interval holds 0.
    NotDistinguishable,
}

/// A paired comparison of per-case values (second minus first).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PairedComparison {
    /// Pairs compared.
    pub n: usize,
    /// Mean of `second - first`.
    pub mean_delta: f64,
    /// Lower bound of the interval of the mean change.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// Confidence level (0.95).
    pub level: f64,
    /// The verdict at `1 - level`.
    pub verdict: Difference,
    /// The method.
    pub method: String,
}

/// A seeded paired bootstrap (provisional).
pub fn paired_comparison(pairs: &[(f64, f64)]) -> Option<PairedComparison> {
    if pairs.is_empty() {
        return None;
    }
    let deltas: Vec<f64> = pairs.iter().map(|(a, b)| b - a).collect();
    let n = deltas.len();
    let mean = deltas.iter().sum::<f64>() / n as f64;
    let mut state = 0x5EED_u64;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut means: Vec<f64> = (0..2000)
        .map(|_| {
            (0..n)
                .map(|_| deltas[usize::try_from(next() % n as u64).unwrap_or(0)])
                .sum::<f64>()
                / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let low = means[49];
    let high = means[1949];
    let verdict = if low > 0.0 {
        Difference::Better
    } else if high < 0.0 {
        Difference::Worse
    } else {
        Difference::NotDistinguishable
    };
    Some(PairedComparison {
        n,
        mean_delta: mean,
        low,
        high,
        level: 0.95,
        verdict,
        method: "paired bootstrap".into(),
    })
}
