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
//! 1. **Slow start, then adaptive concurrency (AIMD).** A cold limiter (nothing remembered from
//!    an earlier run) starts with a window of [`SLOW_START_WINDOW`] requests in flight that
//!    grows by one with each answer, so it doubles with each round of answers, up to the
//!    ceiling (the configured concurrency). Sending is then clocked by answers: when an
//!    unannounced limit runs dry, the first 429 comes back while only a few requests are on
//!    their way, not a whole first wave of the ceiling's worth. Slow start ends at the first
//!    limit signal (a 429 or 529: the limit halves from the window reached), at the ceiling,
//!    or as soon as the provider's headers show room for several ceilings' worth of requests
//!    in every bucket (the provider's limits are far away: an unlimited provider that
//!    describes its limits pays one answer's latency at most). A 429 (or Anthropic's 529 "overloaded") halves
//!    it (floor 1) once per congestion event: answers to requests sent before the last decrease
//!    do not decrease it again. After as many successes as the limit while callers were waiting
//!    for a slot, it grows by one, up to the ceiling. When the provider's own pace (below) is
//!    what holds callers back, the limit settles at what that pace needs (Little's law, with
//!    headroom); when latency climbs far above its baseline, it is cut by a quarter.
//! 2. **A shared gate and a learned pace.** A 429's `retry-after` closes the gate for the whole
//!    model until then (plus up to 20 % jitter). When the provider gives no rate-limit headers,
//!    the limiter learns a pace from its 429s and releases every caller at it, one at a time
//!    (they never all wake when the gate opens): nine tenths of one over the longest
//!    `retry-after` seen (a token bucket's time for one request; at most 100 ms), but at most
//!    what the halved concurrency sends at the latency seen, then additive increase while the
//!    pace holds callers back (about a tenth a second) and a 30 % decrease per congestion
//!    event, never above the rate the provider was seen to admit.
//! 3. **Pacing by the provider's headers.** Each response's `limit`/`remaining`/`reset` give the
//!    bucket's size and refill rate (`(limit - remaining) / reset`); the limiter keeps its own
//!    estimate of what is left (corrected by every response for the requests sent since), and
//!    a request whose requests or tokens are not available waits until they are, so the limit
//!    is respected before the provider has to say so.
//!
//! **Limits shared without a declaration.** [`RateLimits::with_shared`] pools declared groups.
//! Undeclared ones are found, on the same account (base URL and API key, hashed), either way:
//! * a 429 that a limiter did not expect (the limit its provider describes, by headers or
//!   `retry-after`, is well above what it admitted this model, or above the pace it was refused
//!   at), with another model refused within 250 ms;
//! * headers that move together, before any 429: two models whose request buckets have the
//!   same size see `remaining` fall by requests they did not send: one clearly (half as many
//!   again as its own, or more, over 8 answers; or four for each of its own over 3), the other
//!   at least partly (a quarter as many again as its own: a model that sends most of the
//!   requests sees little of the others'). A pool keeps what its members saw, so a model that
//!   notices later joins it.
//!
//! Either pools those models' limiters into one named `shared:auto (<models>)`; callers
//! waiting on the old limiters move to it, and the reports name it beside each model. Logged
//! once at info; [`RateLimits::with_pooling`] turns it off.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::chat::ChatRequest;

mod bucket;
mod memory;
use bucket::Bucket;
pub use memory::{
    LIMIT_MEMORY_VERSION, LearnedBucket, LearnedLimit, LimitMemory,
    MAX_AGE as LIMIT_MEMORY_MAX_AGE, unix_now,
};

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
#[derive(Debug)]
pub struct RateLimits {
    limiters: Mutex<BTreeMap<String, Arc<Limiter>>>,
    /// Models that share one limit (one API key, or a proxy, whose bucket is key-wide): model
    /// → the name of their shared limiter.
    shared: BTreeMap<String, String>,
    /// Whether limiters found to share one limit are pooled without a declaration.
    pooling: bool,
    /// Limiters pooled without a declaration: their old key → the pooled limiter's.
    pooled: Mutex<BTreeMap<String, String>>,
    /// What earlier runs learned: new limiters start from it.
    memory: LimitMemory,
    /// Whether cold limiters start in slow start (see the module documentation).
    slow_start: bool,
}

impl Default for RateLimits {
    fn default() -> RateLimits {
        RateLimits {
            limiters: Mutex::default(),
            shared: BTreeMap::new(),
            pooling: true,
            pooled: Mutex::default(),
            memory: LimitMemory::empty(),
            slow_start: true,
        }
    }
}

/// How close two models' 429s must come for them to count as refused together.
const POOL_WINDOW: Duration = Duration::from_millis(250);

impl RateLimits {
    /// No limiter yet.
    pub fn new() -> RateLimits {
        RateLimits::default()
    }

    /// With `pooling` false, models found to share one limit keep their own limiters (see
    /// the module documentation); only declared shared limits pool them.
    #[must_use]
    pub fn with_pooling(mut self, pooling: bool) -> RateLimits {
        self.pooling = pooling;
        self
    }

    /// With `slow_start` false, a cold limiter starts at the ceiling (all the configured
    /// concurrency at once) instead of a window of [`SLOW_START_WINDOW`].
    #[must_use]
    pub fn with_slow_start(mut self, slow_start: bool) -> RateLimits {
        self.slow_start = slow_start;
        self
    }

    /// The limits pooled without a declaration so far: the pooled limiter's name, for each
    /// model in one.
    pub fn pooled(&self) -> BTreeMap<String, String> {
        let pooled = self.pooled.lock().unwrap_or_else(PoisonError::into_inner);
        pooled
            .iter()
            .filter(|(from, _)| !from.starts_with("shared:"))
            .map(|(from, _)| (from.clone(), Self::resolve(&pooled, from)))
            .collect()
    }

    /// Where `key` was pooled to, following pools that were pooled again (a mapping back to
    /// a key already passed ends the walk: the map never holds one, but a cycle must not hang
    /// a run).
    fn resolve(pooled: &BTreeMap<String, String>, key: &str) -> String {
        let mut key = key.to_owned();
        for _ in 0..=pooled.len() {
            match pooled.get(&key) {
                Some(next) if *next != key => key.clone_from(next),
                _ => break,
            }
        }
        key
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
            shared,
            ..RateLimits::default()
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
        let ceiling = ceiling.max(1);
        // The registry first, as `check_pooling` takes them: a model pooled between reading
        // where it went and making its limiter would get a second limiter of its own.
        let mut limiters = self.limiters.lock().unwrap_or_else(PoisonError::into_inner);
        let key = Self::resolve(
            &self.pooled.lock().unwrap_or_else(PoisonError::into_inner),
            self.key(model),
        );
        // A shared limit's models, or the model alone.
        let mut members: Vec<String> = self
            .shared
            .iter()
            .filter(|(_, label)| **label == key)
            .map(|(m, _)| m.clone())
            .collect();
        if members.is_empty() {
            members.push(key.clone());
        }
        let limiter = limiters.entry(key.clone()).or_insert_with(|| {
            let limiter = Limiter::new(&key, members, ceiling);
            if !self.slow_start {
                limiter.lock().window = None;
            }
            // Every member of a shared limit remembers the same buckets: the first found.
            if let Some(learned) = limiter
                .members
                .iter()
                .find_map(|m| self.memory.models.get(m))
            {
                let now = Instant::now();
                let mut state = limiter.lock();
                for (&kind, bucket) in &learned.buckets {
                    state.buckets.insert(kind, Bucket::remembered(bucket, now));
                }
                // What an earlier run learned replaces slow start's probing.
                state.window = None;
                state.remembered_from_refusals = learned.from_refusals;
                drop(state);
                tracing::debug!(
                    model = key,
                    "rate limit: starting from the limit an earlier run learned"
                );
            }
            Arc::new(limiter)
        });
        limiter.raise_ceiling(ceiling);
        Arc::clone(limiter)
    }

    /// After a 429 that `limiter` did not expect (it believed it had room): when other models
    /// on the same account (base URL and API key) were refused within [`POOL_WINDOW`] of it,
    /// they share one limit nobody declared; pools them into one limiter, named
    /// `shared:auto (<models>)`, and says so once.
    pub(crate) fn check_pooling(&self, limiter: &Arc<Limiter>) {
        if !self.pooling {
            return;
        }
        let limiter = limiter.current();
        let (account, at, drained) = {
            let s = limiter.lock();
            (s.account, s.last_throttle, s.drained_bucket())
        };
        let Some(account) = account else {
            return;
        };
        let mut limiters = self.limiters.lock().unwrap_or_else(PoisonError::into_inner);
        let partners: Vec<Arc<Limiter>> = limiters
            .values()
            .filter(|l| !Arc::ptr_eq(l, &limiter))
            .filter(|l| {
                let s = l.lock();
                let refused_together = at.is_some_and(|at| {
                    s.last_throttle.is_some_and(|t| {
                        at.saturating_duration_since(t) <= POOL_WINDOW
                            && t.saturating_duration_since(at) <= POOL_WINDOW
                    })
                });
                // Both see their request bucket drained by others (this one clearly, the other
                // at least partly), and it is the same size.
                let drained_together = drained.is_some_and(|limit| {
                    s.partly_drained_bucket()
                        .is_some_and(|other| (other - limit).abs() <= f64::EPSILON)
                });
                s.merged.is_none()
                    && s.account == Some(account)
                    && (refused_together || drained_together)
            })
            .cloned()
            .collect();
        if partners.is_empty() {
            return;
        }
        let mut group = vec![Arc::clone(&limiter)];
        group.extend(partners);
        let mut members: Vec<String> = group.iter().flat_map(|l| l.members.clone()).collect();
        members.sort();
        members.dedup();
        let key = format!("shared:auto ({})", members.join(", "));
        // A group that adds no model (a stale limiter of a model already pooled) is not a new
        // pool: its key would map to itself.
        if group.iter().any(|l| l.model == key) {
            return;
        }
        let pooled = Arc::new(Limiter::pool(&key, members.clone(), &group));
        let mut map = self.pooled.lock().unwrap_or_else(PoisonError::into_inner);
        for l in &group {
            limiters.remove(&l.model);
            map.insert(l.model.clone(), key.clone());
            l.lock().merged = Some(Arc::clone(&pooled));
        }
        limiters.insert(key.clone(), pooled);
        drop(map);
        drop(limiters);
        for l in &group {
            l.changed.notify_waiters();
        }
        tracing::info!(
            limiter = key,
            models = members.join(", "),
            "rate limit: these models were refused together while their own limiters had \
             room, or their request buckets drain together, so the provider counts them \
             against one limit; pooling them into one \
             limiter (declare it in [providers.shared_limits], or set \
             providers.pool_shared_limits = false if this is wrong)"
        );
    }

    /// The limiters now (a copy of the list, so that none is locked while the registry is).
    fn all(&self) -> Vec<Arc<Limiter>> {
        self.limiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Every limiter's state, by model.
    pub fn status(&self) -> Vec<LimitStatus> {
        self.all().iter().map(|l| l.status()).collect()
    }

    /// The state of one model's limiter (`llm:` prefix dropped; its shared limit's where it
    /// has one, or the one it was pooled into), if it was used.
    pub fn status_of(&self, model: &str) -> Option<LimitStatus> {
        let key = Self::resolve(
            &self.pooled.lock().unwrap_or_else(PoisonError::into_inner),
            self.key(model),
        );
        let limiter = self
            .limiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
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

/// The window (requests in flight) a cold limiter starts with: see the module documentation.
pub const SLOW_START_WINDOW: usize = 4;

/// Slow start ends when every bucket the headers describe has room for this many ceilings'
/// worth of requests.
const SLOW_START_ROOM: f64 = 4.0;

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
    /// The learned pace it was sent at (requests a second), if one held it.
    pace: Option<f64>,
}

/// The request rate learned from a provider's 429s when its headers give none: a token bucket
/// of one that releases callers at `rate`.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// Requests a second.
    rate: f64,
    /// The earliest the next request may start.
    next: Instant,
}

/// Why callers wait now.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Wait {
    /// For a slot: the concurrency limit is reached.
    Slot,
    /// Until an instant: the gate, the learned pace, or a bucket (then the request rate it implies).
    Until(Instant, Option<f64>),
}

#[derive(Debug)]
struct State {
    ceiling: usize,
    limit: f64,
    /// Slow start's window while it lasts (see the module documentation): at most this many
    /// requests in flight, one more with each answer.
    window: Option<f64>,
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
    /// The pace learned from 429s when the headers give none.
    pace: Option<Pace>,
    /// A caller waited for the pace since the last success.
    pace_held: bool,
    /// The longest `retry-after` seen lately: a token bucket's is at most the time between two
    /// of its tokens, so this approaches it.
    hint_max: Duration,
    /// When the provider last refused a request.
    last_throttle: Option<Instant>,
    /// When it first did.
    first_throttle: Option<Instant>,
    /// The `retry-after`s seen.
    hints: u32,
    /// When the answered requests started since the first 429, over the last second: the rate
    /// the provider admits this limiter's requests at.
    admitted: VecDeque<Instant>,
    /// The account (base URL and key, hashed) the requests went to.
    account: Option<u64>,
    /// Pooled into this limiter: callers go there.
    merged: Option<Arc<Limiter>>,
    /// Requests the provider's `remaining` counted that this limiter did not send (what its
    /// estimate of the request bucket lost at each correction, summed; requests that arrive out
    /// of order cancel out), and the responses that said: see [`State::sees_other_users`].
    foreign: f64,
    observed: u32,
    /// Set once the request bucket was seen drained by requests this limiter did not send.
    sees_other_users: bool,
    /// When the first request was sent, and the answers to requests sent before the first
    /// 429: with the pace, the size of the burst the provider allowed (for [`LimitMemory`]).
    first_sent: Option<Instant>,
    admitted_early: u32,
    /// The answers to requests sent since the first 429, and when the last came: the rate the
    /// provider admitted while it limited (for [`LimitMemory`]).
    admitted_after: u32,
    last_admitted: Option<Instant>,
    /// Its buckets were remembered from 429s alone ([`LearnedLimit::from_refusals`]).
    remembered_from_refusals: bool,
    /// A 429 came while a remembered bucket paced it.
    refused_under_memory: bool,
    buckets: BTreeMap<LimitKind, Bucket>,
    /// The request rate the provider's pace allowed when it last held a caller back.
    paced_rate: Option<f64>,
    latency: Option<f64>,
    latency_base: Option<f64>,
    throttled: u64,
    waited: Duration,
}

impl State {
    /// The size of the provider's request bucket, when its headers showed it drained by
    /// requests this limiter did not send: evidence that others share it.
    fn drained_bucket(&self) -> Option<f64> {
        self.request_bucket_size().filter(|_| self.sees_other_users)
    }

    /// The size of the provider's request bucket when its headers show it drained by requests
    /// this limiter did not send at all, if less than [`State::drained_bucket`] asks (a quarter
    /// as many again as its own, at least 2): a model that sends most of a shared bucket's
    /// requests sees little of the others', so it is the partner of one that sees a lot.
    fn partly_drained_bucket(&self) -> Option<f64> {
        let partly = self.foreign >= (0.25 * f64::from(self.observed)).max(2.0);
        self.request_bucket_size()
            .filter(|_| self.sees_other_users || partly)
    }

    fn request_bucket_size(&self) -> Option<f64> {
        self.buckets.get(&LimitKind::Requests).map(|b| b.limit)
    }

    fn cap(&self) -> usize {
        let limit = self.window.map_or(self.limit, |w| w.min(self.limit));
        (limit.floor() as usize).clamp(1, self.ceiling)
    }

    /// Ends slow start: at the first limit signal the window reached becomes the limit (which
    /// the signal then halves); otherwise the limit stands.
    fn end_slow_start(&mut self, model: &str, signal: bool, why: &'static str) {
        let Some(window) = self.window.take() else {
            return;
        };
        if signal {
            self.limit = self.limit.min(window.max(1.0));
        }
        tracing::debug!(
            model,
            window,
            concurrency = self.cap(),
            why,
            "rate limit: slow start ended"
        );
    }

    /// Whether a bucket the provider's headers describe has less left than a window's worth of
    /// requests: the limit is near, whoever else drains it.
    fn headers_show_low(&self, now: Instant, window: f64) -> bool {
        self.buckets.iter().any(|(&kind, b)| {
            let per = if kind == LimitKind::Requests {
                1.0
            } else {
                b.mean_need.max(1.0)
            };
            !b.remembered && b.available(now) < window * per
        })
    }

    /// Whether the provider's headers show room for [`SLOW_START_ROOM`] ceilings' worth of
    /// requests in every bucket they describe (false when they describe none).
    fn headers_show_room(&self, now: Instant) -> bool {
        let ceiling = self.ceiling as f64;
        !self.buckets.is_empty()
            && self.buckets.iter().all(|(&kind, b)| {
                let per = if kind == LimitKind::Requests {
                    1.0
                } else {
                    b.mean_need.max(1.0)
                };
                !b.remembered && b.available(now) >= SLOW_START_ROOM * ceiling * per
            })
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
        // The learned pace holds only where the headers give no rate: theirs is better.
        let header_paced = self.buckets.values().any(|b| b.rate().is_some());
        if !header_paced
            && let Some(p) = &self.pace
            && p.next > ready
        {
            ready = p.next;
            paced = Some(p.rate);
            self.pace_held = true;
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
        self.first_sent.get_or_insert(now);
        let mut pace = None;
        if !header_paced && let Some(p) = &mut self.pace {
            p.next = p.next.max(now) + secs(1.0 / p.rate);
            pace = Some(p.rate);
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
            pace,
        }))
    }

    /// The rate (requests a second) the provider admitted this limiter's requests at over the
    /// last second since its first 429, when there is enough to tell.
    fn admitted_rate(&mut self, now: Instant) -> Option<f64> {
        let first = self.first_throttle?;
        let from = first.max(now.checked_sub(Duration::from_secs(1)).unwrap_or(first));
        while self.admitted.front().is_some_and(|t| *t < from) {
            self.admitted.pop_front();
        }
        // Requests started in the last latency are not answered yet.
        let latency = secs(self.latency.unwrap_or(0.0));
        let span = now
            .checked_sub(latency)
            .map_or(0.0, |t| t.saturating_duration_since(from).as_secs_f64());
        (span >= 0.25 && self.admitted.len() >= 4).then(|| self.admitted.len() as f64 / span)
    }

    /// The request rate the provider's limit allows in all, as it describes it: its headers'
    /// rates, or one over the longest `retry-after` (a token bucket's time for one request)
    /// once three were seen.
    fn implied_rate(&self) -> Option<f64> {
        let by_headers = self
            .buckets
            .iter()
            .filter_map(|(&kind, b)| {
                let per = if kind == LimitKind::Requests {
                    1.0
                } else {
                    b.mean_need
                };
                b.rate().filter(|_| per > 0.0).map(|r| r / per)
            })
            .reduce(f64::min);
        by_headers.or_else(|| {
            (self.hints >= 3 && self.hint_max < Duration::from_secs(1) && !self.hint_max.is_zero())
                .then(|| 1.0 / self.hint_max.as_secs_f64())
        })
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

    /// Records how a request ended; whether it showed a limit shared with others: a 429 this
    /// limiter did not expect (it believed it had room: the headers paced it, or its learned
    /// pace was below the pace of the last refusal), or headers showing its request bucket
    /// drained by requests it did not send (the first time, then every 4 answers).
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &mut self,
        model: &str,
        ticket: &Ticket,
        outcome: Outcome,
        headers: Option<&RateHeaders>,
        account: Option<u64>,
        now: Instant,
        unit: f64,
    ) -> bool {
        self.in_flight = self.in_flight.saturating_sub(1);
        if account.is_some() {
            self.account = account;
        }
        let mut unexpected = false;
        let mut counted = false;
        if let Some(headers) = headers {
            for seen in &headers.limits {
                if !(seen.limit.is_finite() && seen.limit > 0.0 && seen.remaining.is_finite()) {
                    continue;
                }
                // A bucket made now did not count the request this answers: no drift to read.
                let known = self.buckets.contains_key(&seen.kind);
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
                let expected = bucket.available(now);
                bucket.observe(seen, now, ticket.started, spent_then);
                if known && seen.kind == LimitKind::Requests {
                    self.foreign += expected - bucket.level;
                    self.observed += 1;
                    counted = true;
                }
            }
            // Headers that move with other users: the bucket drains by requests this limiter
            // did not send, steadily (at least half as many again as its own, over 8 answers),
            // or plainly (four for each of its own, over 3: a model that starts while others
            // drain the bucket).
            let observed = f64::from(self.observed);
            if !self.sees_other_users
                && ((self.observed >= 8 && self.foreign >= (0.5 * observed).max(4.0))
                    || (self.observed >= 3 && self.foreign >= 4.0 * observed))
            {
                self.sees_other_users = true;
                unexpected = true;
                tracing::debug!(
                    model,
                    foreign = self.foreign,
                    observed = self.observed,
                    "rate limit: the provider's request bucket drains faster than this model uses it"
                );
            } else if self.sees_other_users && counted && self.observed.is_multiple_of(4) {
                // Still drained by others: look for them again every 4 answers (a partner
                // may show it only now).
                unexpected = true;
            }
        }
        let latency = now.saturating_duration_since(ticket.started).as_secs_f64();
        match outcome {
            Outcome::Success => {
                self.successes += 1;
                if let Some(window) = self.window.as_mut() {
                    *window += 1.0;
                    let window = *window;
                    if window >= self.limit.min(self.ceiling as f64) {
                        self.end_slow_start(model, false, "the window reached the ceiling");
                    } else if self.headers_show_room(now) {
                        self.end_slow_start(model, false, "the headers show room");
                    } else if self.headers_show_low(now, window) {
                        // A limit signal without a refusal: the window stops where it is.
                        self.limit = self.limit.min(window);
                        self.end_slow_start(
                            model,
                            false,
                            "the headers show the bucket running low",
                        );
                    }
                }
                if self.first_throttle.is_none_or(|t| ticket.started < t) {
                    self.admitted_early += 1;
                } else {
                    self.admitted_after += 1;
                    self.last_admitted = Some(now);
                }
                if self.first_throttle.is_some_and(|t| ticket.started >= t) {
                    self.admitted.push_back(ticket.started);
                }
                // Additive increase of the learned pace while it holds callers back: about a
                // tenth a second (a tenth of the rate over `rate` successes), to find room the
                // provider has again.
                if self.pace_held
                    && let Some(p) = &mut self.pace
                {
                    p.rate *= 1.0 + 0.1 / p.rate.max(1.0);
                }
                self.pace_held = false;
                // A request bucket remembered from 429s alone that holds callers back and has
                // not been refused under: it may be below the provider's rate now (the pace it
                // came from runs under it), so it grows 2 % a success until a 429 says stop.
                if self.remembered_from_refusals
                    && !self.refused_under_memory
                    && self.paced_rate.is_some()
                    && let Some(bucket) = self.buckets.get_mut(&LimitKind::Requests)
                    && bucket.remembered
                    && let Some(rate) = bucket.rate()
                {
                    bucket.window = Some(bucket.limit / (rate * 1.02));
                }
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
                self.end_slow_start(model, true, "the provider said slow down");
                if self.buckets.values().any(|b| b.remembered) {
                    self.refused_under_memory(model, retry_after, ticket, now);
                }
                self.last_throttle = Some(now);
                self.first_throttle.get_or_insert(now);
                if let Some(h) = retry_after {
                    self.hint_max = self.hint_max.max(h);
                    self.hints += 1;
                }
                // One congestion event: the answers to requests sent before its first 429 was
                // known do not lower the limit (or slow the pace) again.
                let fresh = self.last_decrease.is_none_or(|seq| ticket.seq > seq);
                if fresh {
                    self.last_decrease = Some(self.sent);
                    self.set_limit(model, self.limit * 0.5, "the provider said slow down");
                }
                let paced_by_headers = self.buckets.values().any(|b| b.rate().is_some());
                let hint = retry_after.unwrap_or(Duration::from_millis(100));
                let gate = now + hint + hint.mul_f64(0.2 * unit.clamp(0.0, 1.0));
                self.not_before = Some(self.not_before.map_or(gate, |t| t.max(gate)));
                let admitted = self.admitted_rate(now);
                // Evidence of a limit shared with other models: the provider's limit refills
                // far faster than it admits this limiter's requests, and it refused them anyway.
                // (or, without enough answers to measure that yet, refused while its learned
                // pace was well below that limit).
                // An admitted rate held down by this limiter's own concurrency (as after slow
                // start's first refusal, at a small window) says nothing about other users.
                let own = self
                    .latency
                    .filter(|l| *l > 0.0)
                    .map(|l| self.cap() as f64 / l);
                if fresh && let Some(implied) = self.implied_rate() {
                    unexpected |= admitted.is_some_and(|a| {
                        implied >= 1.6 * a && own.is_some_and(|own| own >= 1.6 * a)
                    }) || ticket.pace.is_some_and(|p| p <= 0.7 * implied);
                }
                if !paced_by_headers {
                    // Learn the pace from retry-after alone: a token bucket's retry-after is at
                    // most its time for one request, so the longest one seen lately is about
                    // one over its rate (at most 100 ms: a whole-second retry-after says when
                    // to try again, not how fast). Start at nine tenths of that; then each
                    // congestion event takes 30 % off (multiplicative decrease, to below the
                    // rate the provider was seen to admit) and each success adds a little (see
                    // above): all callers are released at this pace, one at a time, never
                    // together when the gate opens. A retry-after far shorter than one
                    // request's time (the bucket had partly refilled) would say a pace faster
                    // than the provider admitted before it refused: the estimate is at most
                    // what the halved concurrency sends at the latency seen.
                    let one = if self.hint_max.is_zero() {
                        Duration::from_millis(50)
                    } else {
                        self.hint_max.min(Duration::from_millis(100))
                    };
                    let mut estimate = 0.9 / one.as_secs_f64().max(1e-3);
                    if let Some(latency) = self.latency.filter(|l| *l > 0.0) {
                        // The concurrency just halved, at the latency seen.
                        estimate = estimate.min(self.cap() as f64 / latency);
                    }
                    match &mut self.pace {
                        None => {
                            self.pace = Some(Pace {
                                rate: estimate,
                                next: gate,
                            });
                        }
                        Some(p) => {
                            if fresh && ticket.pace.is_some() {
                                let mut rate = p.rate * 0.7;
                                if let Some(admitted) = admitted {
                                    rate = rate.min(0.95 * admitted);
                                }
                                p.rate = rate.max(0.05);
                            } else if ticket.pace.is_none() {
                                // Refusals of the first wave refine the first estimate.
                                p.rate = p.rate.min(estimate);
                            }
                            p.next = p.next.max(gate);
                        }
                    }
                }
                tracing::debug!(
                    model,
                    retry_after_ms = retry_after.map(|d| d.as_millis() as u64),
                    seq = ticket.seq,
                    sent = self.sent,
                    gate_ms = gate.saturating_duration_since(now).as_millis() as u64,
                    pace = self.pace.map(|p| p.rate),
                    "rate limit: throttled"
                );
            }
            Outcome::Failed => {}
        }
        unexpected
    }
}

/// The limiter of one model: see the module documentation.
#[derive(Debug)]
pub(crate) struct Limiter {
    model: String,
    /// The models it limits: `model` alone, or those of a shared limit.
    members: Vec<String>,
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
    /// Returns whether it showed a limit shared with other users: a 429 the limiter did not
    /// expect, or headers showing its bucket drained by others (the first time, then every 4
    /// answers while they still show it).
    pub(crate) fn finish(
        mut self,
        outcome: Outcome,
        headers: Option<&RateHeaders>,
        account: Option<u64>,
        unit: f64,
    ) -> bool {
        self.ticket.take().is_some_and(|ticket| {
            self.limiter
                .finish(&ticket, outcome, headers, account, unit)
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.limiter
                .finish(&ticket, Outcome::Failed, None, None, 0.0);
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
    fn new(model: &str, members: Vec<String>, ceiling: usize) -> Limiter {
        Limiter {
            model: model.to_owned(),
            members,
            state: Mutex::new(State {
                ceiling,
                limit: ceiling as f64,
                window: (ceiling > SLOW_START_WINDOW).then_some(SLOW_START_WINDOW as f64),
                min_limit: ceiling as f64,
                in_flight: 0,
                waiting: 0,
                saturated: false,
                successes: 0,
                last_decrease: None,
                sent: 0,
                not_before: None,
                pace: None,
                pace_held: false,
                hint_max: Duration::ZERO,
                last_throttle: None,
                first_throttle: None,
                hints: 0,
                admitted: VecDeque::new(),
                account: None,
                merged: None,
                foreign: 0.0,
                observed: 0,
                sees_other_users: false,
                first_sent: None,
                admitted_early: 0,
                admitted_after: 0,
                last_admitted: None,
                remembered_from_refusals: false,
                refused_under_memory: false,
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

    /// One limiter for `group`, which share one limit: it starts from what they learned (the
    /// highest ceiling, the provider's buckets and the latest gate, the fastest learned pace:
    /// each estimated the whole limit).
    fn pool(key: &str, members: Vec<String>, group: &[Arc<Limiter>]) -> Limiter {
        let ceiling = group.iter().map(|l| l.lock().ceiling).max().unwrap_or(1);
        let pooled = Limiter::new(key, members, ceiling);
        {
            let mut state = pooled.lock();
            // In slow start while every member is, with their windows together.
            state.window = group
                .iter()
                .map(|l| l.lock().window)
                .sum::<Option<f64>>()
                .filter(|w| *w < ceiling as f64);
            for l in group {
                let s = l.lock();
                state.limit = state.limit.min(s.limit.max(1.0));
                state.min_limit = state.min_limit.min(s.min_limit);
                state.not_before = state.not_before.max(s.not_before);
                state.hint_max = state.hint_max.max(s.hint_max);
                state.account = state.account.or(s.account);
                state.last_throttle = state.last_throttle.max(s.last_throttle);
                state.throttled += s.throttled;
                state.waited += s.waited;
                if state.buckets.is_empty() {
                    state.buckets.clone_from(&s.buckets);
                }
                if let Some(p) = s.pace {
                    state.pace = Some(match state.pace {
                        Some(q) => Pace {
                            rate: q.rate + p.rate,
                            next: q.next.max(p.next),
                        },
                        None => p,
                    });
                }
                state.first_throttle = state.first_throttle.max(s.first_throttle);
                state.first_sent = match (state.first_sent, s.first_sent) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                state.admitted_early += s.admitted_early;
                state.admitted_after += s.admitted_after;
                state.last_admitted = state.last_admitted.max(s.last_admitted);
                state.hints += s.hints;
                state.latency = state.latency.or(s.latency);
                state.latency_base = state.latency_base.or(s.latency_base);
                // What a member saw of other users stays seen: a model that notices later
                // finds the pool as its partner.
                state.sees_other_users |= s.sees_other_users;
            }
            // Each member paced itself by the whole limit, or by its share of it: together,
            // at most the whole limit.
            if let Some(implied) = state.implied_rate()
                && let Some(p) = &mut state.pace
            {
                p.rate = p.rate.min(0.9 * implied);
            }
        }
        pooled
    }

    /// This limiter, or the one it was pooled into.
    fn current(self: &Arc<Limiter>) -> Arc<Limiter> {
        let mut limiter = Arc::clone(self);
        loop {
            let next = limiter.lock().merged.clone();
            match next {
                Some(next) => limiter = next,
                None => return limiter,
            }
        }
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
        let mut this = Arc::clone(self);
        loop {
            let (wait, notified, held) = {
                let mut state = this.lock();
                if let Some(next) = state.merged.clone() {
                    drop(state);
                    this = next;
                    continue;
                }
                let now = Instant::now();
                match state.try_start(now, cost, must_fit)? {
                    Ok(ticket) => {
                        state.waited += waited;
                        drop(state);
                        return Ok(Permit {
                            limiter: Arc::clone(&this),
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
                            Waiting(&this)
                        });
                        (wait, this.changed.notified(), held)
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

    fn finish(
        &self,
        ticket: &Ticket,
        outcome: Outcome,
        headers: Option<&RateHeaders>,
        account: Option<u64>,
        unit: f64,
    ) -> bool {
        let unexpected = {
            let mut state = self.lock();
            state.finish(
                &self.model,
                ticket,
                outcome,
                headers,
                account,
                Instant::now(),
                unit,
            )
        };
        self.changed.notify_waiters();
        unexpected
    }

    /// The state now.
    pub(crate) fn status(&self) -> LimitStatus {
        let state = self.lock();
        if let Some(next) = state.merged.clone() {
            drop(state);
            return next.status();
        }
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
mod tests;
