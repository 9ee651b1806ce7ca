//! How a provider's rate limits shaped the calls to one model ([`RateLimitRecord`]), as the
//! RunLog, the simulation report and the experiment report record it. A leaf.

use serde::{Deserialize, Serialize};

/// How a provider's rate limits shaped the calls to one model: the 429s it answered, the time
/// callers were held back, and the concurrency the adaptive limit settled at. Recorded in the
/// RunLog, the simulation report and the experiment report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitRecord {
    /// `vendor/model` (or `llm:vendor/model` for an LLM reranker).
    pub model: String,
    /// HTTP requests sent.
    pub requests: u64,
    /// Answers that said "slow down" (HTTP 429, or Anthropic's 529).
    pub throttled: u64,
    /// Milliseconds callers were held back by a limit, summed over calls.
    pub wait_ms: u64,
    /// The concurrency limit it settled at (at the end).
    pub concurrency: usize,
    /// The lowest the limit went.
    pub min_concurrency: usize,
    /// The ceiling: the configured concurrency.
    pub ceiling: usize,
    /// The limiter the model's calls were counted against, when it is not the model's own: a
    /// shared limit declared in `[providers.shared_limits]` (`shared:<name> (<models>)`), or
    /// one found by refusals that came together and pooled (`shared:auto (<models>)`). The
    /// other figures are the model's own; the concurrency is the shared limiter's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limiter: Option<String>,
}

impl RateLimitRecord {
    /// Whether a limit showed itself: an answer said slow down, a caller was held back, or
    /// the concurrency went below the ceiling.
    pub fn limited(&self) -> bool {
        self.throttled > 0 || self.wait_ms > 0 || self.min_concurrency < self.ceiling
    }

    /// The share of requests answered 429/529, in percent.
    pub fn throttled_percent(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.throttled as f64 * 100.0 / self.requests as f64
        }
    }
}
