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
