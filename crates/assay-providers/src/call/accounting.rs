//! Prices (the built-in list and the ones a project declares) and the per-model accounting of
//! calls, requests, tokens, latency, rate limits and cost.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::embed::Usage;
use crate::limit::LimitStatus;

/// What the batch APIs charge, as a share of the interactive price (both OpenAI and Anthropic
/// bill batches at half price).
pub const BATCH_PRICE_FACTOR: f64 = 0.5;

/// Prices of a model in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
}

/// The built-in price list (USD per million tokens, list prices as published in 2025; check
/// the vendors' pages before relying on them). Keys are `vendor/model`; a dated snapshot such as
/// `anthropic/claude-haiku-4-5-20251001` or `openai/gpt-4o-2024-08-06` takes its base model's
/// price.
const PRICES: &[(&str, f64, f64)] = &[
    ("anthropic/claude-opus-4-1", 15.0, 75.0),
    ("anthropic/claude-opus-4", 15.0, 75.0),
    ("anthropic/claude-sonnet-4-5", 3.0, 15.0),
    ("anthropic/claude-sonnet-4", 3.0, 15.0),
    ("anthropic/claude-3-7-sonnet", 3.0, 15.0),
    ("anthropic/claude-haiku-4-5", 1.0, 5.0),
    ("anthropic/claude-3-5-haiku", 0.8, 4.0),
    ("anthropic/claude-3-haiku", 0.25, 1.25),
    ("openai/gpt-5", 1.25, 10.0),
    ("openai/gpt-5-mini", 0.25, 2.0),
    ("openai/gpt-5-nano", 0.05, 0.4),
    ("openai/gpt-4.1", 2.0, 8.0),
    ("openai/gpt-4.1-mini", 0.4, 1.6),
    ("openai/gpt-4.1-nano", 0.1, 0.4),
    ("openai/gpt-4o", 2.5, 10.0),
    ("openai/gpt-4o-mini", 0.15, 0.6),
    ("openai/text-embedding-3-small", 0.02, 0.0),
    ("openai/text-embedding-3-large", 0.13, 0.0),
    ("openai/text-embedding-ada-002", 0.1, 0.0),
    ("voyage/voyage-3.5", 0.06, 0.0),
    ("voyage/voyage-3.5-lite", 0.02, 0.0),
    ("voyage/voyage-3-large", 0.18, 0.0),
    ("voyage/voyage-3", 0.06, 0.0),
    ("voyage/voyage-3-lite", 0.02, 0.0),
    ("voyage/voyage-2", 0.1, 0.0),
    ("voyage/rerank-2.5", 0.05, 0.0),
    ("voyage/rerank-2.5-lite", 0.02, 0.0),
    ("voyage/rerank-2", 0.05, 0.0),
    ("voyage/rerank-2-lite", 0.02, 0.0),
];

/// The built-in price of `model` (`vendor/model`; an `llm:` prefix is ignored), or `None` for
/// a model not in the list (local servers behind `openai/`, fine-tunes, new models). In-process
/// embedders (`builtin/`, `local/`, `hf/`) cost nothing: `Some` zero price.
pub fn price(model: &str) -> Option<Price> {
    let model = model.strip_prefix("llm:").unwrap_or(model);
    if ["builtin/", "local/", "hf/"]
        .iter()
        .any(|p| model.starts_with(p))
    {
        return Some(Price {
            input: 0.0,
            output: 0.0,
        });
    }
    let snapshot_of = |base: &str| {
        model
            .strip_prefix(base)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|date| {
                !date.is_empty() && date.chars().all(|c| c.is_ascii_digit() || c == '-')
            })
    };
    PRICES
        .iter()
        .find(|(name, _, _)| *name == model)
        .or_else(|| PRICES.iter().find(|(name, _, _)| snapshot_of(name)))
        .map(|&(_, input, output)| Price { input, output })
}

/// The price of `model`: the one `declared` gives it (by its `vendor/model` name, an `llm:`
/// prefix ignored), else the built-in [`price`].
pub fn price_with(declared: &BTreeMap<String, Price>, model: &str) -> Option<Price> {
    let bare = model.strip_prefix("llm:").unwrap_or(model);
    declared.get(bare).copied().or_else(|| price(model))
}

/// What the calls to one model cost and did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelStats {
    /// Calls made through a wrapper (cache hits included).
    pub calls: u64,
    /// Calls answered from the cache.
    pub cache_hits: u64,
    /// HTTP requests sent (each failed attempt counts as one; 0 for in-process models).
    pub requests: u64,
    /// Attempts that were retries.
    pub retries: u64,
    /// Calls that ended in an error (replay misses included).
    pub errors: u64,
    /// Input tokens of calls sent to the provider (cache hits cost nothing and add none).
    pub input_tokens: u64,
    /// Output tokens of calls sent to the provider.
    pub output_tokens: u64,
    /// Total wall time of the calls not answered from the cache, retries and waits included.
    pub latency_ms_total: u64,
    /// The longest such call.
    pub latency_ms_max: u64,
    /// The tokens priced with the built-in list ([`price`]); `None` when the model is not in it.
    /// Tokens of calls a provider batch answered are priced at [`BATCH_PRICE_FACTOR`].
    pub cost_usd: Option<f64>,
    /// Calls a provider batch answered (batch mode); their tokens are also counted apart.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batch_calls: u64,
    /// Input tokens of the calls a batch answered (part of `input_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batch_input_tokens: u64,
    /// Output tokens of the calls a batch answered (part of `output_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batch_output_tokens: u64,
    /// Answers that said "slow down" (HTTP 429, 529); each is also a request and a retry.
    #[serde(default)]
    pub throttled: u64,
    /// How the provider's rate limits shaped the calls (remote models only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimitStats>,
}

#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How a model's rate limits shaped its calls (see [`crate::limit`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateLimitStats {
    /// The concurrency limit when the last call ended: where it settled.
    pub concurrency: usize,
    /// The lowest it went.
    pub min_concurrency: usize,
    /// The ceiling: the configured concurrency.
    pub ceiling: usize,
    /// Time calls spent held back by a limit (the gate after a 429, the provider's pace, a
    /// concurrency limit below the ceiling), summed over calls.
    pub wait_ms: u64,
    /// The limiter the calls were counted against when it is not the model's own (a shared
    /// limit, declared or pooled; see [`crate::limit`]): its name at the last call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limiter: Option<String>,
}

/// A copy of the accounting at one moment, by model name (sorted).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AccountingSnapshot {
    /// Per `vendor/model` (or `llm:vendor/model`) name.
    pub models: BTreeMap<String, ModelStats>,
    /// The sum of the known costs; `None` when no model has a known price. Models with
    /// `cost_usd: None` are not in it.
    pub total_cost_usd: Option<f64>,
}

/// Per-model counters, shared by the wrappers of one or more [`CallContext`]s.
#[derive(Debug, Default)]
pub struct Accounting {
    models: Mutex<BTreeMap<String, ModelStats>>,
    /// Prices the user declared (`[providers.prices]`), ahead of the built-in list.
    declared: BTreeMap<String, Price>,
}

/// What one wrapped call did, for [`Accounting`].
#[derive(Debug, Default)]
pub(super) struct CallRecord {
    pub(super) cache_hit: bool,
    /// A provider batch answered it (batch price).
    pub(super) batch: bool,
    pub(super) attempts: u32,
    pub(super) error: bool,
    pub(super) usage: Usage,
    pub(super) latency: Option<Duration>,
    /// Answers that said "slow down".
    pub(super) throttled: u32,
    /// Time held back by a limit.
    pub(super) waited: Duration,
    /// The model's limiter when the call ended.
    pub(super) limit: Option<LimitStatus>,
}

impl Accounting {
    /// Counters that price `declared` models at the declared price (a local model declared
    /// free costs 0) and the rest by [`price`].
    pub fn with_prices(declared: BTreeMap<String, Price>) -> Accounting {
        Accounting {
            models: Mutex::default(),
            declared,
        }
    }

    /// The price of `model`: declared, else built-in.
    pub fn price_of(&self, model: &str) -> Option<Price> {
        price_with(&self.declared, model)
    }

    pub(super) fn record(&self, model: &str, call: &CallRecord) {
        let mut models = self.models.lock().unwrap_or_else(PoisonError::into_inner);
        let stats = models.entry(model.to_owned()).or_default();
        stats.calls += 1;
        if call.cache_hit {
            stats.cache_hits += 1;
        }
        if call.error {
            stats.errors += 1;
        }
        let failed_attempts = if call.error {
            call.attempts
        } else {
            call.attempts.saturating_sub(1)
        };
        stats.requests += u64::from(failed_attempts) + u64::from(call.usage.requests);
        stats.retries += u64::from(call.attempts.saturating_sub(1));
        stats.input_tokens += call.usage.input_tokens;
        stats.output_tokens += call.usage.output_tokens;
        if call.batch {
            stats.batch_calls += 1;
            stats.batch_input_tokens += call.usage.input_tokens;
            stats.batch_output_tokens += call.usage.output_tokens;
        }
        if let Some(latency) = call.latency {
            let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
            stats.latency_ms_total += ms;
            stats.latency_ms_max = stats.latency_ms_max.max(ms);
        }
        stats.throttled += u64::from(call.throttled);
        if let Some(limit) = &call.limit {
            let rate = stats.rate_limit.get_or_insert(RateLimitStats {
                min_concurrency: limit.min_concurrency,
                ..RateLimitStats::default()
            });
            rate.concurrency = limit.concurrency;
            rate.min_concurrency = rate.min_concurrency.min(limit.min_concurrency);
            rate.ceiling = limit.ceiling;
            rate.wait_ms += u64::try_from(call.waited.as_millis()).unwrap_or(u64::MAX);
            rate.limiter =
                (limit.model != model.trim_start_matches("llm:")).then(|| limit.model.clone());
        }
    }

    /// The counters so far, with costs.
    pub fn snapshot(&self) -> AccountingSnapshot {
        let mut models = self
            .models
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut total = None;
        for (name, stats) in &mut models {
            stats.cost_usd = price_with(&self.declared, name).map(|p| {
                let full =
                    stats.input_tokens as f64 * p.input + stats.output_tokens as f64 * p.output;
                let batched = stats.batch_input_tokens as f64 * p.input
                    + stats.batch_output_tokens as f64 * p.output;
                (full - batched * (1.0 - BATCH_PRICE_FACTOR)) / 1e6
            });
            if let Some(cost) = stats.cost_usd {
                *total.get_or_insert(0.0) += cost;
            }
        }
        AccountingSnapshot {
            models,
            total_cost_usd: total,
        }
    }
}
