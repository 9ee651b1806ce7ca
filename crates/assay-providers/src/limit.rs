//! Rate limits: adaptive concurrency and pacing per provider model, for every remote call of
//! the call wrapper ([`crate::CallContext`]).
//!
//! * [`RateLimits`]: the limiters of a run, one per `vendor/model` (an `llm:` prefix is dropped,
//!   so an LLM reranker and a chat role on the same model share one). Contexts that share a
//!   `RateLimits` (every role of a run: [`crate::CallContext::with_limits`]) share their gates.
//! * [`RateHeaders`]: what a response said about the provider's limits: OpenAI's
//!   `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` and Anthropic's
//!   `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}`.
//! * [`RequestCost`]: the tokens a request is expected to use, estimated before it is sent.
//! * [`LimitStatus`]: one limiter's state at a moment (for progress displays and reports).
//!
//! A limiter does three things before a request is sent:
//!
//! 1. **Adaptive concurrency (AIMD).** It starts at the ceiling (the configured concurrency), so
//!    an unlimited provider sees no difference. A 429 (or Anthropic's 529 "overloaded") halves
//!    it (floor 1) once per congestion event: answers to requests sent before the last decrease
//!    do not decrease it again. After as many successes as the limit while callers were waiting
//!    for a slot, it grows by one, up to the ceiling. When the provider's own pace (below) is
//!    what holds callers back, the limit settles at what that pace needs (Little's law, with
//!    headroom); when latency climbs far above its baseline, it is cut by a quarter.
//! 2. **A shared gate.** A 429's `retry-after` closes the gate for the whole model until then
//!    (plus up to 20 % jitter); when the provider gives no rate-limit headers, waiting callers
//!    are then released one by one, spaced by the longest `retry-after` it gave lately (a token
//!    bucket's time for one token; at most 100 ms, widening a little if 429s continue), a
//!    spacing that relaxes with each success. They never all wake at once.
//! 3. **Pacing by the provider's headers.** Each response's `limit`/`remaining`/`reset` give the
//!    bucket's size and refill rate (`(limit - remaining) / reset`); the limiter keeps its own
//!    estimate of what is left (corrected by every response for the requests sent since), and
//!    a request whose requests or tokens are not available waits until they are, so the limit
//!    is respected before the provider has to say so.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::chat::ChatRequest;

// ---------------------------------------------------------------------------------------------
// What the provider says

/// Which of a provider's limits a header describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// Requests per window.
    Requests,
    /// Tokens (input and output together) per window.
    Tokens,
    /// Input tokens per window (Anthropic).
    InputTokens,
    /// Output tokens per window (Anthropic).
    OutputTokens,
}

impl LimitKind {
    /// What is counted: `requests`, `tokens`, `input tokens` or `output tokens`.
    pub fn unit(self) -> &'static str {
        match self {
            LimitKind::Requests => "requests",
            LimitKind::Tokens => "tokens",
            LimitKind::InputTokens => "input tokens",
            LimitKind::OutputTokens => "output tokens",
        }
    }
}

/// One limit as a response described it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitObservation {
    /// Which limit.
    pub kind: LimitKind,
    /// Its size (the most that can be used in one window).
    pub limit: f64,
    /// What was left when the request was admitted.
    pub remaining: f64,
    /// How long until it is fully replenished, if the provider said.
    pub reset: Option<Duration>,
}

/// What one response said about the provider's limits (empty when it said nothing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RateHeaders {
    /// One entry per limit described.
    pub limits: Vec<LimitObservation>,
}

impl RateHeaders {
    /// Whether no limit was described.
    pub fn is_empty(&self) -> bool {
        self.limits.is_empty()
    }
}

/// What a request is expected to use of a provider's token limits, estimated before it is sent
/// (about four characters a token; the provider's own answers correct the estimate of what is
/// left after each response).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestCost {
    /// Input (prompt) tokens.
    pub input_tokens: u64,
    /// Output tokens the request may produce (its `max_tokens`: providers count it when they
    /// admit a request).
    pub output_tokens: u64,
}

impl RequestCost {
    /// The cost of `chars` characters of input and no output.
    pub fn of_text(chars: usize) -> RequestCost {
        RequestCost {
            input_tokens: (chars as u64).div_ceil(4),
            output_tokens: 0,
        }
    }

    /// The cost of a chat request: its system prompt, turns, tool calls and results, tool and
    /// answer schemas (about four characters a token, four more a turn), and `max_tokens`.
    pub fn of_chat(request: &ChatRequest) -> RequestCost {
        let mut chars = request.system.as_ref().map_or(0, String::len);
        let mut turns = 1u64;
        for message in &request.messages {
            turns += 1;
            chars += message.content.len();
            for call in &message.tool_calls {
                chars += call.name.len() + call.arguments.to_string().len();
            }
            for result in &message.tool_results {
                chars += result.content.len();
            }
        }
        for tool in &request.tools {
            chars += tool.name.len() + tool.description.len() + tool.input_schema.to_string().len();
        }
        if let Some(schema) = &request.output_schema {
            chars += schema.schema.to_string().len();
        }
        RequestCost {
            input_tokens: (chars as u64).div_ceil(4) + 4 * turns,
            output_tokens: u64::from(request.max_tokens),
        }
    }

    /// How much of `kind` one request with this cost uses.
    fn of(self, kind: LimitKind) -> f64 {
        match kind {
            LimitKind::Requests => 1.0,
            LimitKind::Tokens => (self.input_tokens + self.output_tokens) as f64,
            LimitKind::InputTokens => self.input_tokens as f64,
            LimitKind::OutputTokens => self.output_tokens as f64,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Status

/// One model's limiter at a moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LimitStatus {
    /// The `vendor/model` it limits.
    pub model: String,
    /// The concurrency limit now (it settles here).
    pub concurrency: usize,
    /// The lowest it went.
    pub min_concurrency: usize,
    /// The ceiling: the configured concurrency.
    pub ceiling: usize,
    /// Requests in flight now.
    pub in_flight: usize,
    /// Callers waiting now because of a limit (a gate, the provider's pace, or a concurrency
    /// limit below the ceiling).
    pub waiting: usize,
    /// Answers that said "slow down" (429, 529).
    pub throttled: u64,
    /// Time callers spent waiting because of a limit, summed over callers.
    pub wait_ms: u64,
    /// The provider's request rate, per second, when its headers gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_second: Option<f64>,
    /// The provider's token rate, per second, when its headers gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_second: Option<f64>,
}

impl LimitStatus {
    /// Whether callers are being held back by a limit now.
    pub fn held_back(&self) -> bool {
        self.waiting > 0
    }
}

impl fmt::Display for LimitStatus {
    /// `held back by the rate limit of openai/gpt-4o (concurrency 4/16, 12 waiting)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "held back by the rate limit of {} (concurrency {}/{}, {} waiting",
            self.model, self.concurrency, self.ceiling, self.waiting
        )?;
        if let Some(rate) = self.requests_per_second {
            write!(f, ", {rate:.1} requests/s")?;
        }
        f.write_str(")")
    }
}

// ---------------------------------------------------------------------------------------------
// Registry

/// The limiters of a run, one per model. Share one (in an `Arc`) between the contexts of every
/// role of a run, so that roles calling the same model share its limits.
#[derive(Debug, Default)]
pub struct RateLimits {
    limiters: Mutex<BTreeMap<String, Arc<Limiter>>>,
    /// Models that share one limit (one API key, or a proxy, whose bucket is key-wide): model
    /// → the name of their shared limiter.
    shared: BTreeMap<String, String>,
}

impl RateLimits {
    /// No limiter yet.
    pub fn new() -> RateLimits {
        RateLimits::default()
    }

    /// No limiter yet; the models of each group share one limiter, named
    /// `shared:<group> (<models>)`, because the provider counts their requests against one
    /// limit (a key-wide bucket): each model's own limiter would believe it has the whole
    /// bucket, and together they would overrun it. A model in two groups is refused.
    pub fn with_shared(groups: &BTreeMap<String, Vec<String>>) -> Result<RateLimits, String> {
        let mut shared = BTreeMap::new();
        for (name, models) in groups {
            let label = format!("shared:{name} ({})", models.join(", "));
            for model in models {
                let model = model.strip_prefix("llm:").unwrap_or(model);
                if let Some(other) = shared.insert(model.to_owned(), label.clone()) {
                    return Err(format!(
                        "`{model}` is in two shared limits ({other} and {label})"
                    ));
                }
            }
        }
        Ok(RateLimits {
            limiters: Mutex::default(),
            shared,
        })
    }

    /// The limiter key of `model`: its own name, or its shared limit's.
    fn key<'a>(&'a self, model: &'a str) -> &'a str {
        let model = model.strip_prefix("llm:").unwrap_or(model);
        self.shared.get(model).map_or(model, String::as_str)
    }

    /// The limiter of `model` (`llm:` prefix dropped; the shared one where it has one), made
    /// on first use with `ceiling`; a larger ceiling from another context raises it.
    pub(crate) fn limiter(&self, model: &str, ceiling: usize) -> Arc<Limiter> {
        let key = self.key(model);
        let ceiling = ceiling.max(1);
        let mut limiters = self.limiters.lock().unwrap_or_else(PoisonError::into_inner);
        let limiter = limiters
            .entry(key.to_owned())
            .or_insert_with(|| Arc::new(Limiter::new(key, ceiling)));
        limiter.raise_ceiling(ceiling);
        Arc::clone(limiter)
    }

    /// Every limiter's state, by model.
    pub fn status(&self) -> Vec<LimitStatus> {
        let limiters: Vec<Arc<Limiter>> = self
            .limiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        limiters.iter().map(|l| l.status()).collect()
    }

    /// The state of one model's limiter (`llm:` prefix dropped; its shared limit's where it
    /// has one), if it was used.
    pub fn status_of(&self, model: &str) -> Option<LimitStatus> {
        let key = self.key(model);
        let limiter = self
            .limiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .cloned();
        limiter.map(|l| l.status())
    }

    /// The model whose callers are held back by a limit now (the one with the most waiting),
    /// if any: what a progress display shows.
    pub fn held_back(&self) -> Option<LimitStatus> {
        self.status()
            .into_iter()
            .filter(LimitStatus::held_back)
            .max_by_key(|s| s.waiting)
    }
}

// ---------------------------------------------------------------------------------------------
// One limiter

/// Why a request cannot be sent yet, or ever.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Blocked {
    /// The provider's limits would hold it past the call's time bound.
    PastDeadline,
    /// It needs more than the whole limit: no wait can help.
    TooLarge {
        /// Which limit.
        kind: LimitKind,
        /// What the request needs (estimated).
        need: u64,
        /// The provider's whole limit.
        limit: u64,
    },
}

/// How a sent request ended, for [`Limiter::finish`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Outcome {
    /// An answer.
    Success,
    /// "Slow down" (429, 529), with the provider's `retry-after` if it gave one.
    Throttled(Option<Duration>),
    /// Another error (a fault: 5xx, timeout, broken connection, bad request).
    Failed,
}

/// A provider's bucket as the limiter estimates it.
#[derive(Debug, Clone)]
struct Bucket {
    limit: f64,
    /// Seconds to refill from empty (smoothed), when the headers showed it.
    window: Option<f64>,
    /// What is left at `at`.
    level: f64,
    at: Instant,
    /// When the provider said it would be full again (used when the rate is unknown).
    reset_at: Option<Instant>,
    /// Units used by requests sent through this limiter, ever (for corrections).
    spent: f64,
    /// The smoothed need of one request.
    mean_need: f64,
}

impl Bucket {
    fn new(limit: f64, now: Instant) -> Bucket {
        Bucket {
            limit,
            window: None,
            level: limit,
            at: now,
            reset_at: None,
            spent: 0.0,
            mean_need: 0.0,
        }
    }

    /// Units refilled per second, when known.
    fn rate(&self) -> Option<f64> {
        self.window
            .filter(|w| *w > 0.0 && self.limit > 0.0)
            .map(|w| self.limit / w)
    }

    fn available(&self, now: Instant) -> f64 {
        match self.rate() {
            Some(rate) => (self.level
                + rate * now.saturating_duration_since(self.at).as_secs_f64())
            .min(self.limit),
            None if self.reset_at.is_some_and(|t| now >= t) => self.limit,
            None => self.level,
        }
    }

    /// When `need` (at most the whole limit) will be available, with a cushion when the rate is
    /// known: the estimate of a request's size is rough (the provider counts its own way), and
    /// the provider admits a request a little after it was sent, so waiting for a sixth more
    /// than the request needs, plus 5 ms of refill, keeps a request from arriving just short.
    /// The cushion stays in the bucket: it costs one wait, not throughput.
    fn ready_at(&self, now: Instant, need: f64) -> Instant {
        let cushion = self
            .rate()
            .map_or(0.0, |rate| need / 6.0 + rate * CUSHION_DELAY.as_secs_f64());
        let need = (need + cushion).min(self.limit);
        let have = self.available(now);
        if have >= need {
            return now;
        }
        match self.rate() {
            Some(rate) => now + secs((need - have) / rate),
            None => match self.reset_at {
                Some(t) if t > now => t,
                // Nothing says when it refills: do not hold requests on a guess.
                _ => now,
            },
        }
    }

    fn take(&mut self, now: Instant, need: f64) {
        let available = self.available(now);
        if self.rate().is_none() && self.reset_at.is_some_and(|t| now >= t) {
            self.reset_at = None;
        }
        self.level = available - need;
        self.at = now;
        self.spent += need;
        self.mean_need = if self.mean_need == 0.0 {
            need
        } else {
            0.8 * self.mean_need + 0.2 * need
        };
    }

    /// Corrects the estimate with what a response said: `remaining` was left when the request
    /// sent at `started` was admitted, when this limiter had spent `spent_then`; since then the
    /// bucket refilled and this limiter spent more.
    fn observe(
        &mut self,
        seen: &LimitObservation,
        now: Instant,
        started: Instant,
        spent_then: f64,
    ) {
        self.limit = seen.limit;
        if let Some(reset) = seen.reset
            && seen.remaining < seen.limit
            && !reset.is_zero()
        {
            let window = reset.as_secs_f64() * seen.limit / (seen.limit - seen.remaining);
            self.window = Some(match self.window {
                Some(old) => 0.7 * old + 0.3 * window,
                None => window,
            });
        }
        let refilled = self.rate().map_or(0.0, |rate| {
            rate * now.saturating_duration_since(started).as_secs_f64()
        });
        let since = (self.spent - spent_then).max(0.0);
        self.level = (seen.remaining + refilled - since).min(self.limit);
        self.at = now;
        self.reset_at = seen.reset.map(|r| now + r);
    }
}

/// The refill time kept as a cushion (see [`Bucket::ready_at`]).
const CUSHION_DELAY: Duration = Duration::from_millis(5);

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::from_secs(86_400))
}

/// A request admitted by a [`Limiter`]: what it spent, for corrections when it is answered.
#[derive(Debug, Clone)]
pub(crate) struct Ticket {
    started: Instant,
    /// Its sequence number.
    seq: u64,
    spent: BTreeMap<LimitKind, f64>,
}

/// Why callers wait now.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wait {
    /// For a slot: the concurrency limit is reached.
    Slot,
    /// Until an instant: the gate, the spacing, or a bucket (then the request rate it implies).
    Until(Instant, Option<f64>),
}

#[derive(Debug)]
struct State {
    ceiling: usize,
    limit: f64,
    min_limit: f64,
    in_flight: usize,
    waiting: usize,
    /// A caller found every slot taken since the last change.
    saturated: bool,
    /// Successes since the last change.
    successes: usize,
    /// Requests sent up to this one (by sequence number) do not lower the limit again.
    last_decrease: Option<u64>,
    /// Requests sent so far (the sequence number of the last).
    sent: u64,
    /// The gate: nothing starts before this.
    not_before: Option<Instant>,
    /// Between starts while throttled without headers; relaxes with each success.
    spacing: Duration,
    /// The longest `retry-after` seen lately: a token bucket's is at most the time between two
    /// of its tokens, so this approaches it.
    hint_max: Duration,
    next_start: Option<Instant>,
    buckets: BTreeMap<LimitKind, Bucket>,
    /// The request rate the provider's pace allowed when it last held a caller back.
    paced_rate: Option<f64>,
    latency: Option<f64>,
    latency_base: Option<f64>,
    throttled: u64,
    waited: Duration,
}

impl State {
    fn cap(&self) -> usize {
        (self.limit.floor() as usize).clamp(1, self.ceiling)
    }

    /// Starts a request now, or says what it waits for.
    fn try_start(
        &mut self,
        now: Instant,
        cost: RequestCost,
        must_fit: bool,
    ) -> Result<Result<Ticket, Wait>, Blocked> {
        for (&kind, bucket) in &self.buckets {
            let need = cost.of(kind);
            if must_fit && need > bucket.limit {
                return Err(Blocked::TooLarge {
                    kind,
                    need: need.ceil() as u64,
                    limit: bucket.limit as u64,
                });
            }
        }
        if self.in_flight >= self.cap() {
            self.saturated = true;
            return Ok(Err(Wait::Slot));
        }
        let mut ready = now;
        let mut paced = None;
        if let Some(t) = self.not_before {
            ready = ready.max(t);
        }
        if !self.spacing.is_zero()
            && let Some(t) = self.next_start
            && t > ready
        {
            ready = t;
            paced = Some(1.0 / self.spacing.as_secs_f64());
        }
        for (&kind, bucket) in &self.buckets {
            let need = cost.of(kind);
            if need <= 0.0 {
                continue;
            }
            let t = bucket.ready_at(now, need);
            if t > ready {
                ready = t;
                paced = bucket.rate().map(|r| r / need.min(bucket.limit).max(1.0));
            }
        }
        if ready > now {
            return Ok(Err(Wait::Until(ready, paced)));
        }
        self.in_flight += 1;
        self.sent += 1;
        if !self.spacing.is_zero() {
            self.next_start = Some(now + self.spacing);
        }
        let mut spent = BTreeMap::new();
        for (&kind, bucket) in &mut self.buckets {
            let need = cost.of(kind).min(bucket.limit);
            bucket.take(now, need);
            spent.insert(kind, bucket.spent);
        }
        Ok(Ok(Ticket {
            started: now,
            seq: self.sent,
            spent,
        }))
    }

    fn set_limit(&mut self, model: &str, limit: f64, why: &'static str) {
        let old = self.cap();
        self.limit = limit.clamp(1.0, self.ceiling as f64);
        self.min_limit = self.min_limit.min(self.limit);
        self.successes = 0;
        self.saturated = false;
        let new = self.cap();
        if new != old {
            tracing::info!(
                model,
                concurrency = new,
                was = old,
                ceiling = self.ceiling,
                why,
                "rate limit: concurrency changed"
            );
        }
    }

    fn finish(
        &mut self,
        model: &str,
        ticket: &Ticket,
        outcome: Outcome,
        headers: Option<&RateHeaders>,
        now: Instant,
        unit: f64,
    ) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(headers) = headers {
            for seen in &headers.limits {
                if !(seen.limit.is_finite() && seen.limit > 0.0 && seen.remaining.is_finite()) {
                    continue;
                }
                let bucket = self
                    .buckets
                    .entry(seen.kind)
                    .or_insert_with(|| Bucket::new(seen.limit, now));
                if (bucket.limit - seen.limit).abs() > f64::EPSILON {
                    tracing::info!(
                        model,
                        limit = seen.limit,
                        was = bucket.limit,
                        unit = seen.kind.unit(),
                        "rate limit: the provider's limit changed"
                    );
                }
                let spent_then = ticket
                    .spent
                    .get(&seen.kind)
                    .copied()
                    .unwrap_or(bucket.spent);
                bucket.observe(seen, now, ticket.started, spent_then);
            }
        }
        let latency = now.saturating_duration_since(ticket.started).as_secs_f64();
        match outcome {
            Outcome::Success => {
                self.successes += 1;
                // Relax with each success: a provider that gave no headers is found again by its
                // 429s, and a stray 429 slows nothing for long.
                self.spacing = if self.spacing < Duration::from_millis(1) {
                    Duration::ZERO
                } else {
                    self.spacing.mul_f64(0.9)
                };
                self.hint_max = self.hint_max.mul_f64(0.995);
                let ewma = self.latency.map_or(latency, |l| 0.8 * l + 0.2 * latency);
                self.latency = Some(ewma);
                let base = match self.latency_base {
                    Some(b) if ewma < b => ewma,
                    Some(b) => b + 0.01 * (ewma - b),
                    None => ewma,
                };
                self.latency_base = Some(base);
                let cap = self.cap();
                // When the provider's pace holds callers back, keep as many in flight as that
                // pace needs (Little's law), with headroom.
                let pace_target = self
                    .paced_rate
                    .take()
                    .map(|rate| (1.5 * rate * ewma).ceil() + 1.0);
                if let Some(target) = pace_target.filter(|t| *t < self.limit) {
                    self.set_limit(model, target, "settled at the provider's pace");
                } else if self.saturated && self.successes >= cap && cap < self.ceiling {
                    self.set_limit(model, self.limit.floor() + 1.0, "calls succeed");
                } else if pace_target.is_none()
                    && ewma > 4.0 * base
                    && self.successes >= 2 * cap
                    && cap > 1
                {
                    self.set_limit(model, self.limit * 0.75, "latency climbs");
                    self.latency_base = Some(ewma);
                }
            }
            Outcome::Throttled(retry_after) => {
                self.throttled += 1;
                // One congestion event: the answers to requests sent before its first 429 was
                // known do not lower the limit (or widen the spacing) again.
                let fresh = self.last_decrease.is_none_or(|seq| ticket.seq > seq);
                if fresh {
                    self.last_decrease = Some(self.sent);
                    self.set_limit(model, self.limit * 0.5, "the provider said slow down");
                }
                let paced_by_headers = self.buckets.values().any(|b| b.rate().is_some());
                let hint = retry_after.unwrap_or_else(|| {
                    (self.spacing * 2).clamp(Duration::from_millis(100), Duration::from_secs(5))
                });
                let gate = now + hint + hint.mul_f64(0.2 * unit.clamp(0.0, 1.0));
                self.not_before = Some(self.not_before.map_or(gate, |t| t.max(gate)));
                if !paced_by_headers {
                    // Space starts by the longest retry-after seen lately (a token bucket's
                    // time between tokens), at most 100 ms (a whole-second retry-after says
                    // when to try again, not how fast); if 429s come anyway, a little more each
                    // event, up to four times that and at most 250 ms. The concurrency limit
                    // does the rest.
                    if let Some(h) = retry_after {
                        self.hint_max = self.hint_max.max(h);
                    }
                    let base = if self.hint_max.is_zero() {
                        Duration::from_millis(50)
                    } else {
                        self.hint_max.min(Duration::from_millis(100))
                    };
                    let most = (base * 4).min(Duration::from_millis(250));
                    self.spacing = if fresh && self.spacing >= base {
                        self.spacing.mul_f64(1.25).min(most)
                    } else {
                        self.spacing.max(base)
                    }
                    .max(Duration::from_millis(1));
                }
                tracing::debug!(
                    model,
                    retry_after_ms = retry_after.map(|d| d.as_millis() as u64),
                    gate_ms = gate.saturating_duration_since(now).as_millis() as u64,
                    spacing_ms = self.spacing.as_millis() as u64,
                    "rate limit: throttled"
                );
            }
            Outcome::Failed => {}
        }
    }
}

/// The limiter of one model: see the module documentation.
#[derive(Debug)]
pub(crate) struct Limiter {
    model: String,
    state: Mutex<State>,
    changed: Notify,
}

/// A request admitted by [`Limiter::acquire`]; dropping it without [`Permit::finish`] (the call
/// was cancelled) frees its slot.
pub(crate) struct Permit {
    limiter: Arc<Limiter>,
    ticket: Option<Ticket>,
    /// Time the caller waited because of a limit.
    pub(crate) waited: Duration,
}

impl Permit {
    /// Records how the request ended and what its response said about the limits.
    pub(crate) fn finish(mut self, outcome: Outcome, headers: Option<&RateHeaders>, unit: f64) {
        if let Some(ticket) = self.ticket.take() {
            self.limiter.finish(&ticket, outcome, headers, unit);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.limiter.finish(&ticket, Outcome::Failed, None, 0.0);
        }
    }
}

/// Counts a caller as held back by a limit while it lives (made with the count raised).
struct Waiting<'a>(&'a Limiter);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.waiting = state.waiting.saturating_sub(1);
    }
}

impl Limiter {
    fn new(model: &str, ceiling: usize) -> Limiter {
        Limiter {
            model: model.to_owned(),
            state: Mutex::new(State {
                ceiling,
                limit: ceiling as f64,
                min_limit: ceiling as f64,
                in_flight: 0,
                waiting: 0,
                saturated: false,
                successes: 0,
                last_decrease: None,
                sent: 0,
                not_before: None,
                spacing: Duration::ZERO,
                hint_max: Duration::ZERO,
                next_start: None,
                buckets: BTreeMap::new(),
                paced_rate: None,
                latency: None,
                latency_base: None,
                throttled: 0,
                waited: Duration::ZERO,
            }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn raise_ceiling(&self, ceiling: usize) {
        let mut state = self.lock();
        if ceiling > state.ceiling {
            // Still at the old ceiling: nothing has lowered it, so start at the new one.
            if state.limit >= state.ceiling as f64 {
                state.limit = ceiling as f64;
                state.min_limit = state.min_limit.max(state.limit);
            }
            state.ceiling = ceiling;
        }
    }

    /// Waits until a request of `cost` may be sent, at the latest until `deadline`. With
    /// `must_fit` (the provider already refused this request), a request larger than a whole
    /// limit is an error; otherwise it waits for a full bucket and is sent for the provider to
    /// decide (the estimate is rough).
    pub(crate) async fn acquire(
        self: &Arc<Limiter>,
        cost: RequestCost,
        deadline: Instant,
        must_fit: bool,
    ) -> Result<Permit, Blocked> {
        let mut waited = Duration::ZERO;
        loop {
            let (wait, notified, held) = {
                let mut state = self.lock();
                let now = Instant::now();
                match state.try_start(now, cost, must_fit)? {
                    Ok(ticket) => {
                        state.waited += waited;
                        drop(state);
                        return Ok(Permit {
                            limiter: Arc::clone(self),
                            ticket: Some(ticket),
                            waited,
                        });
                    }
                    Err(wait) => {
                        if let Wait::Until(t, rate) = wait {
                            if rate.is_some() {
                                state.paced_rate = rate;
                            }
                            if t > deadline {
                                return Err(Blocked::PastDeadline);
                            }
                        }
                        // Waiting for a slot counts as held back only below the ceiling: at the
                        // ceiling it is the configured concurrency doing its job.
                        let held = match wait {
                            Wait::Slot => state.cap() < state.ceiling,
                            Wait::Until(..) => true,
                        }
                        .then(|| {
                            state.waiting += 1;
                            Waiting(self)
                        });
                        (wait, self.changed.notified(), held)
                    }
                }
            };
            let started = Instant::now();
            let until = match wait {
                Wait::Slot => deadline,
                Wait::Until(t, _) => t,
            };
            tokio::select! {
                () = notified => {}
                () = tokio::time::sleep_until(until) => {}
            }
            if held.is_some() {
                waited += started.elapsed();
            }
            drop(held);
            if matches!(wait, Wait::Slot) && Instant::now() >= deadline {
                return Err(Blocked::PastDeadline);
            }
        }
    }

    fn finish(&self, ticket: &Ticket, outcome: Outcome, headers: Option<&RateHeaders>, unit: f64) {
        {
            let mut state = self.lock();
            state.finish(&self.model, ticket, outcome, headers, Instant::now(), unit);
        }
        self.changed.notify_waiters();
    }

    /// The state now.
    pub(crate) fn status(&self) -> LimitStatus {
        let state = self.lock();
        let rate = |kind| state.buckets.get(&kind).and_then(Bucket::rate);
        LimitStatus {
            model: self.model.clone(),
            concurrency: state.cap(),
            min_concurrency: (state.min_limit.floor() as usize).clamp(1, state.ceiling),
            ceiling: state.ceiling,
            in_flight: state.in_flight,
            waiting: state.waiting,
            throttled: state.throttled,
            wait_ms: u64::try_from(state.waited.as_millis()).unwrap_or(u64::MAX),
            requests_per_second: rate(LimitKind::Requests),
            tokens_per_second: rate(LimitKind::Tokens).or(rate(LimitKind::InputTokens)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_of_a_shared_limit_share_one_limiter() {
        let groups: BTreeMap<String, Vec<String>> = [(
            "team_key".to_owned(),
            vec!["openai/a".to_owned(), "openai/b".to_owned()],
        )]
        .into_iter()
        .collect();
        let limits = RateLimits::with_shared(&groups).unwrap();
        let a = limits.limiter("openai/a", 4);
        let b = limits.limiter("llm:openai/b", 4);
        let c = limits.limiter("openai/c", 4);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(limits.status().len(), 2);
        assert_eq!(
            limits.status_of("openai/b").unwrap().model,
            "shared:team_key (openai/a, openai/b)"
        );
        let twice: BTreeMap<String, Vec<String>> = [
            ("x".to_owned(), vec!["openai/a".to_owned()]),
            ("y".to_owned(), vec!["openai/a".to_owned()]),
        ]
        .into_iter()
        .collect();
        let e = RateLimits::with_shared(&twice).unwrap_err();
        assert!(e.contains("`openai/a` is in two shared limits"), "{e}");
    }

    fn seen(kind: LimitKind, limit: f64, remaining: f64, reset_ms: u64) -> RateHeaders {
        RateHeaders {
            limits: vec![LimitObservation {
                kind,
                limit,
                remaining,
                reset: Some(Duration::from_millis(reset_ms)),
            }],
        }
    }

    fn cost(input: u64, output: u64) -> RequestCost {
        RequestCost {
            input_tokens: input,
            output_tokens: output,
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(3600)
    }

    #[tokio::test(start_paused = true)]
    async fn starts_at_the_ceiling_and_halves_once_per_congestion_event() {
        let limits = RateLimits::new();
        let l = limits.limiter("llm:openai/m", 16);
        let permits: Vec<Permit> = {
            let mut v = Vec::new();
            for _ in 0..16 {
                v.push(l.acquire(cost(10, 10), far(), false).await.unwrap());
            }
            v
        };
        assert_eq!(limits.status_of("openai/m").unwrap().in_flight, 16);
        // Every one of the 16 is refused: one congestion event, one halving.
        for p in permits {
            p.finish(
                Outcome::Throttled(Some(Duration::from_millis(100))),
                None,
                0.0,
            );
        }
        let s = limits.status_of("openai/m").unwrap();
        assert_eq!((s.concurrency, s.min_concurrency, s.throttled), (8, 8, 16));
        // A request sent after the decrease and refused halves it again.
        tokio::time::advance(Duration::from_millis(200)).await;
        let p = l.acquire(cost(10, 10), far(), false).await.unwrap();
        p.finish(Outcome::Throttled(None), None, 0.0);
        assert_eq!(limits.status_of("openai/m").unwrap().concurrency, 4);
    }

    #[tokio::test(start_paused = true)]
    async fn grows_back_by_one_per_window_of_successes_while_saturated() {
        let limits = RateLimits::new();
        let l = limits.limiter("openai/m", 4);
        l.lock().limit = 1.0;
        for expected in [2, 3, 4, 4] {
            // Saturate: one in flight, a second caller would have to wait.
            let cap = l.status().concurrency;
            let mut permits = Vec::new();
            for _ in 0..cap {
                permits.push(l.acquire(cost(1, 1), far(), false).await.unwrap());
            }
            assert!(matches!(
                l.lock().try_start(Instant::now(), cost(1, 1), false),
                Ok(Err(Wait::Slot))
            ));
            for p in permits {
                p.finish(Outcome::Success, None, 0.0);
            }
            assert_eq!(l.status().concurrency, expected);
        }
        // Unsaturated successes do not raise it: no evidence it would help.
        {
            let mut state = l.lock();
            state.limit = 2.0;
            state.saturated = false;
        }
        for _ in 0..10 {
            l.acquire(cost(1, 1), far(), false)
                .await
                .unwrap()
                .finish(Outcome::Success, None, 0.0);
        }
        assert_eq!(l.status().concurrency, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_gate_releases_waiters_one_at_a_time() {
        let limits = Arc::new(RateLimits::new());
        let l = limits.limiter("openai/m", 8);
        let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
        p.finish(
            Outcome::Throttled(Some(Duration::from_millis(50))),
            None,
            0.0,
        );
        let start = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..4 {
            let l = Arc::clone(&l);
            tasks.push(tokio::spawn(async move {
                let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
                let at = Instant::now();
                p.finish(Outcome::Success, None, 0.0);
                at
            }));
        }
        let mut starts = Vec::new();
        for t in tasks {
            starts.push(t.await.unwrap() - start);
        }
        starts.sort();
        // The gate (50 ms, jitter 0 here) then one start per spacing, not all at once.
        assert_eq!(starts[0], Duration::from_millis(50));
        for pair in starts.windows(2) {
            assert!(pair[1] > pair[0], "{starts:?}");
        }
        assert!(
            starts[3] >= Duration::from_millis(50 + 3 * 30),
            "{starts:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn headers_pace_requests_before_the_limit_is_hit() {
        let limits = RateLimits::new();
        let l = limits.limiter("openai/m", 16);
        // 10 requests per second, 5 left after the first: the rate is (10 - 5) / 0.5 s.
        let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
        p.finish(
            Outcome::Success,
            Some(&seen(LimitKind::Requests, 10.0, 5.0, 500)),
            0.0,
        );
        let s = l.status();
        assert!(
            (s.requests_per_second.unwrap() - 10.0).abs() < 1e-6,
            "{s:?}"
        );
        let start = Instant::now();
        for _ in 0..15 {
            l.acquire(cost(1, 1), far(), false)
                .await
                .unwrap()
                .finish(Outcome::Success, None, 0.0);
        }
        // 4 at once (the 5th would eat into the cushion of a sixth of a request plus 5 ms of
        // refill), then 11 more at 10 a second, the first of them as soon as the cushion is
        // there: 1/6 + 0.05 of a request = 21.7 ms, then 10 x 100 ms.
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(1015) && took <= Duration::from_millis(1030),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_larger_than_the_token_limit_fails_once_refused() {
        let limits = RateLimits::new();
        let l = limits.limiter("anthropic/m", 4);
        let p = l.acquire(cost(900, 300), far(), false).await.unwrap();
        p.finish(
            Outcome::Throttled(None),
            Some(&seen(LimitKind::Tokens, 1000.0, 1000.0, 0)),
            0.0,
        );
        let err = l.acquire(cost(900, 300), far(), true).await.err().unwrap();
        assert_eq!(
            err,
            Blocked::TooLarge {
                kind: LimitKind::Tokens,
                need: 1200,
                limit: 1000
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_past_the_deadline_fails_at_once() {
        let limits = RateLimits::new();
        let l = limits.limiter("openai/m", 4);
        let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
        p.finish(Outcome::Throttled(Some(Duration::from_secs(30))), None, 0.0);
        let start = Instant::now();
        let err = l
            .acquire(cost(1, 1), start + Duration::from_secs(10), false)
            .await
            .err()
            .unwrap();
        assert_eq!(err, Blocked::PastDeadline);
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_permit_frees_its_slot() {
        let limits = RateLimits::new();
        let l = limits.limiter("openai/m", 1);
        let p = l.acquire(cost(1, 1), far(), false).await.unwrap();
        assert_eq!(l.status().in_flight, 1);
        drop(p);
        assert_eq!(l.status().in_flight, 0);
        let _p = l.acquire(cost(1, 1), far(), false).await.unwrap();
    }

    #[test]
    fn costs() {
        let c = RequestCost::of_chat(&ChatRequest::new(Some("x".repeat(40)), "y".repeat(40), 100));
        assert_eq!((c.input_tokens, c.output_tokens), (20 + 8, 100));
        assert_eq!(c.of(LimitKind::Tokens), 128.0);
        assert_eq!(c.of(LimitKind::Requests), 1.0);
        assert_eq!(RequestCost::of_text(9).input_tokens, 3);
    }

    #[test]
    fn registry_keys_drop_the_llm_prefix_and_raise_ceilings() {
        let limits = RateLimits::new();
        let a = limits.limiter("llm:anthropic/m", 4);
        let b = limits.limiter("anthropic/m", 16);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.status().ceiling, 16);
        assert_eq!(a.status().concurrency, 16);
        assert_eq!(limits.status().len(), 1);
        assert!(limits.held_back().is_none());
    }
}
