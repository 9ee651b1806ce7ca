//! The call wrapper: the one place that owns what every provider call needs besides its wire
//! format — a minimum delay between call starts, a concurrency limit, the provider's rate limits
//! (adaptive concurrency and pacing, [`crate::limit`]), retries with backoff, the record/replay
//! cache, and token/cost accounting.
//!
//! * [`CallPolicy`]: limits, retry settings and the time bound of a call.
//! * [`CallCache`]: a content-addressed SQLite cache of responses ([`CacheMode`] says how it is
//!   used).
//! * [`Accounting`]: per-model counters; [`Accounting::snapshot`] gives a serialisable
//!   [`AccountingSnapshot`].
//! * [`CallContext`]: the above for one provider role (chat, embedder, reranker); wrappers that
//!   share a context share its limits, and contexts that share a [`RateLimits`] share one
//!   limiter per model.
//! * [`Guarded`]: wraps an `Arc<dyn ChatModel>`, `Arc<dyn Embedder>` or `Arc<dyn Reranker>` so
//!   that every call goes through a context.
//!
//! One call through a wrapper: look the request up in the cache (a hit returns at once, with
//! `usage.requests` 0; in [`CacheMode::Replay`] a miss is a [`ProviderErrorKind::ReplayMiss`]
//! error and nothing is sent); otherwise wait for a concurrency permit, for the minimum interval
//! since the previous start and for the model's rate limiter (its adaptive concurrency, its gate
//! and the provider's pace), send, and on an error try again: after a 429 or 529 ("slow down")
//! when the limiter lets it go, without spending a retry; after a fault (5xx, timeout, broken
//! connection, garbled answer) after a backoff, at most [`CallPolicy::max_retries`] times; all
//! within [`CallPolicy::max_wait`]. Store a success in the cache (errors never are); account for
//! it all.
//!
//! ```
//! use std::sync::Arc;
//! use assay_providers::{
//!     Accounting, CacheMode, CallContext, CallPolicy, Guarded, HashedNgramEmbedder, InputKind,
//! };
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let dir = tempfile::tempdir().unwrap();
//! let accounting = Arc::new(Accounting::default());
//! let ctx = CallContext::open(
//!     CallPolicy::default(),
//!     Arc::clone(&accounting),
//!     &dir.path().join(".assay/cache.db"),
//!     CacheMode::ReadWrite,
//! )?;
//! let embedder = Guarded::embedder(Arc::new(HashedNgramEmbedder::new()), Arc::new(ctx));
//! embedder.embed(&["custody schedule".to_string()], InputKind::Query).await?;
//! let snapshot = accounting.snapshot();
//! assert_eq!(snapshot.models["builtin/hashed-ngrams"].calls, 1);
//! # Ok::<(), assay_providers::ProviderError>(())
//! # }).unwrap();
//! ```

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::chat::{ChatModel, ChatRequest, ChatResponse, Role};
use crate::embed::{Embedder, Embeddings, InputKind, Usage};
use crate::http::observing;
use crate::limit::{Blocked, Outcome, RateLimits, RequestCost};
use crate::rerank::{RerankDocument, Reranker, Reranking};
use crate::text::excerpt;
use crate::{ProviderError, ProviderErrorKind};

mod accounting;
mod scope;
use accounting::CallRecord;
pub use accounting::{
    Accounting, AccountingSnapshot, BATCH_PRICE_FACTOR, ModelStats, Price, RateLimitStats, price,
    price_with,
};
pub(crate) use scope::{BatchMode, current_batch_mode, note_batched};

// ---------------------------------------------------------------------------------------------
// Policy

/// Limits and retry settings for the calls of one [`CallContext`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallPolicy {
    /// The least time between the starts of two requests (shared by every task using the
    /// context); zero for none.
    pub min_interval: Duration,
    /// The most requests in flight at once (0 is taken as 1).
    pub concurrency: usize,
    /// How many times a fault (5xx, timeout, broken connection, garbled answer) is retried.
    /// Answers that say "slow down" (429, 529) are not faults: they wait for the rate limiter
    /// and do not spend these.
    pub max_retries: u32,
    /// The backoff ceiling before the first retry; it doubles on each retry ("full jitter": the
    /// wait is uniform in `[0, ceiling)`).
    pub initial_backoff: Duration,
    /// The largest backoff ceiling.
    pub max_backoff: Duration,
    /// The longest a server's `retry-after` is honoured; longer requests wait this long.
    pub max_retry_after: Duration,
    /// The most time one call may take, attempts and waits for rate limits included; a call
    /// still held back then fails with [`ProviderErrorKind::RateLimited`].
    pub max_wait: Duration,
}

impl Default for CallPolicy {
    /// No minimum interval, 4 concurrent requests, 4 retries, backoff 0.5 s doubling to 20 s,
    /// `retry-after` honoured up to 60 s, 600 s at most per call.
    fn default() -> CallPolicy {
        CallPolicy {
            min_interval: Duration::ZERO,
            concurrency: 4,
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
            max_wait: Duration::from_secs(600),
        }
    }
}

impl CallPolicy {
    /// The wait before retry number `retry` (1 for the first) when the server gave no
    /// `retry-after`: `unit` (uniform in `[0, 1)`) times `min(max_backoff, initial_backoff *
    /// 2^(retry-1))`.
    pub fn backoff(&self, retry: u32, unit: f64) -> Duration {
        let factor = 2f64.powi(i32::try_from(retry.saturating_sub(1)).unwrap_or(i32::MAX));
        let ceiling = self
            .initial_backoff
            .mul_f64(factor.min(1e9))
            .min(self.max_backoff);
        ceiling.mul_f64(unit.clamp(0.0, 1.0))
    }

    /// The wait before retry number `retry` after `error`: its `retry-after` (capped at
    /// [`CallPolicy::max_retry_after`]) when it has one, else [`CallPolicy::backoff`].
    pub fn wait_after(&self, error: &ProviderError, retry: u32, unit: f64) -> Duration {
        match error.retry_after() {
            Some(wait) => wait.min(self.max_retry_after),
            None => self.backoff(retry, unit),
        }
    }
}

/// Whether `error` says "slow down" rather than "something broke": HTTP 429 (unless it is about
/// an exhausted quota or balance, which waiting does not fix) and Anthropic's 529 "overloaded".
/// The wrapper retries these when the model's rate limiter lets it, without spending
/// [`CallPolicy::max_retries`].
pub fn is_throttle(error: &ProviderError) -> bool {
    match error.kind() {
        ProviderErrorKind::Http {
            status: 429,
            message,
            ..
        } => {
            let message = message.to_ascii_lowercase();
            !(message.contains("quota") || message.contains("credit balance"))
        }
        ProviderErrorKind::Http { status: 529, .. } => true,
        _ => false,
    }
}

/// Whether the wrapper tries `error` again: what [`ProviderError::is_retryable`] says, plus
/// malformed 2xx answers (a proxy or a flaky server cut the body), unless an inner layer already
/// gave up after retrying.
pub fn is_transient(error: &ProviderError) -> bool {
    error.attempts().is_none()
        && (error.is_retryable() || matches!(error.kind(), ProviderErrorKind::Malformed { .. }))
}

// ---------------------------------------------------------------------------------------------
// Cache

/// How a [`CallContext`] uses its [`CallCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CacheMode {
    /// No cache: every call goes to the provider.
    Off,
    /// Answer from the cache when it has the request, else call and record (the default).
    #[default]
    ReadWrite,
    /// Answer only from the cache; a miss is an error and nothing is sent (for CI).
    Replay,
}

impl CacheMode {
    /// The name: `off`, `read-write` or `replay`.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheMode::Off => "off",
            CacheMode::ReadWrite => "read-write",
            CacheMode::Replay => "replay",
        }
    }
}

impl fmt::Display for CacheMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for CacheMode {
    type Err = ProviderError;

    fn from_str(s: &str) -> Result<CacheMode, ProviderError> {
        match s {
            "off" => Ok(CacheMode::Off),
            "read-write" => Ok(CacheMode::ReadWrite),
            "replay" => Ok(CacheMode::Replay),
            other => Err(ProviderError::config(format!(
                "invalid cache mode `{other}`; expected off, read-write or replay"
            ))),
        }
    }
}

/// What kind of provider call a cache entry or an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// [`ChatModel::chat`].
    Chat,
    /// [`Embedder::embed_with_usage`].
    Embed,
    /// [`Reranker::rerank`].
    Rerank,
}

impl CallKind {
    /// `chat`, `embed` or `rerank`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Chat => "chat",
            CallKind::Embed => "embed",
            CallKind::Rerank => "rerank",
        }
    }
}

/// The cache key of a request: the hex SHA-256 of the canonical JSON (object keys sorted, no
/// whitespace) of `{"v": 1, "kind": kind, "model": model, "request": request}`.
///
/// `request` holds only what changes the answer: for chat the whole [`ChatRequest`]; for
/// embeddings `{"texts", "input_kind"}`; for reranking `{"query", "documents", "top_k"}`.
pub fn cache_key(kind: CallKind, model: &str, request: &Value) -> String {
    let material = json!({"v": 1, "kind": kind.as_str(), "model": model, "request": request});
    let mut canonical = String::new();
    write_canonical(&material, &mut canonical);
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().fold(String::with_capacity(64), |mut hex, b| {
        use fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

/// Writes `value` as JSON with object keys sorted, recursively.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A content-addressed cache of provider responses in a SQLite file (WAL mode).
///
/// One table, `calls(key, kind, model, description, response, created_at)`: `key` is
/// [`cache_key`], `response` the JSON of the response, `description` a short human excerpt of
/// the request, `created_at` Unix seconds. The schema version is SQLite's `user_version`
/// ([`CallCache::SCHEMA_VERSION`]); a file from a newer version is refused. Safe to share
/// between tasks of one process (one connection behind a mutex; queries are small and quick, so
/// they run on the calling task).
pub struct CallCache {
    path: PathBuf,
    conn: Mutex<rusqlite::Connection>,
}

impl fmt::Debug for CallCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallCache")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl CallCache {
    /// The schema version this code writes.
    pub const SCHEMA_VERSION: i64 = 1;

    /// Opens (creating it and its folder if needed) the cache at `path`, e.g. `.assay/cache.db`.
    pub fn open(path: &Path) -> Result<CallCache, ProviderError> {
        let err = |message: String| {
            ProviderError::new(ProviderErrorKind::Cache {
                path: path.to_owned(),
                message,
            })
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| err(format!("cannot create its folder: {e}")))?;
        }
        let conn = rusqlite::Connection::open(path).map_err(|e| err(e.to_string()))?;
        let setup = || -> rusqlite::Result<i64> {
            conn.busy_timeout(Duration::from_secs(10))?;
            conn.pragma_update(None, "journal_mode", "wal")?;
            conn.pragma_update(None, "synchronous", "normal")?;
            let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
            if version == 0 {
                conn.execute_batch(
                    "BEGIN;
                     CREATE TABLE IF NOT EXISTS calls (
                         key TEXT PRIMARY KEY NOT NULL,
                         kind TEXT NOT NULL,
                         model TEXT NOT NULL,
                         description TEXT NOT NULL,
                         response TEXT NOT NULL,
                         created_at INTEGER NOT NULL
                     );
                     PRAGMA user_version = 1;
                     COMMIT;",
                )?;
                return Ok(Self::SCHEMA_VERSION);
            }
            Ok(version)
        };
        let version = setup().map_err(|e| err(e.to_string()))?;
        if version != Self::SCHEMA_VERSION {
            return Err(err(format!(
                "schema version {version} is not the supported {}; delete the file to start a new cache",
                Self::SCHEMA_VERSION
            )));
        }
        Ok(CallCache {
            path: path.to_owned(),
            conn: Mutex::new(conn),
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn error(&self, e: &rusqlite::Error) -> ProviderError {
        ProviderError::new(ProviderErrorKind::Cache {
            path: self.path.clone(),
            message: e.to_string(),
        })
    }

    /// The stored response (JSON) for `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<String>, ProviderError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        let mut statement = conn
            .prepare_cached("SELECT response FROM calls WHERE key = ?1")
            .map_err(|e| self.error(&e))?;
        let mut rows = statement.query([key]).map_err(|e| self.error(&e))?;
        match rows.next().map_err(|e| self.error(&e))? {
            Some(row) => row.get(0).map(Some).map_err(|e| self.error(&e)),
            None => Ok(None),
        }
    }

    /// Stores `response` (JSON) under `key`, replacing any earlier entry.
    pub fn put(
        &self,
        key: &str,
        kind: CallKind,
        model: &str,
        description: &str,
        response: &str,
    ) -> Result<(), ProviderError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.prepare_cached(
            "INSERT OR REPLACE INTO calls (key, kind, model, description, response, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .and_then(|mut s| s.execute((key, kind.as_str(), model, description, response, now)))
        .map_err(|e| self.error(&e))?;
        Ok(())
    }

    /// How many responses are stored.
    pub fn len(&self) -> Result<usize, ProviderError> {
        let conn = self.conn.lock().unwrap_or_else(PoisonError::into_inner);
        conn.query_row("SELECT COUNT(*) FROM calls", [], |r| r.get::<_, i64>(0))
            .map(|n| usize::try_from(n).unwrap_or(0))
            .map_err(|e| self.error(&e))
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> Result<bool, ProviderError> {
        Ok(self.len()? == 0)
    }
}

// ---------------------------------------------------------------------------------------------
// Context

/// Policy, cache, cache mode and accounting for one provider role. Wrap it in an `Arc` and
/// give it to [`Guarded`]; every wrapper sharing a context shares its concurrency limit and
/// minimum interval.
pub struct CallContext {
    policy: CallPolicy,
    cache: Option<Arc<CallCache>>,
    mode: CacheMode,
    accounting: Arc<Accounting>,
    limits: Arc<RateLimits>,
    permits: Semaphore,
    next_start: tokio::sync::Mutex<Option<Instant>>,
    rng: Mutex<u64>,
    /// Calls go through the batch queue of the batched models they reach.
    batched: bool,
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("policy", &self.policy)
            .field("cache", &self.cache)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl CallContext {
    /// A context without a cache (mode [`CacheMode::Off`]) that accounts into `accounting`.
    pub fn new(policy: CallPolicy, accounting: Arc<Accounting>) -> CallContext {
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0x9e37_79b9, |d| d.as_nanos() as u64);
        CallContext {
            permits: Semaphore::new(policy.concurrency.max(1)),
            policy,
            cache: None,
            mode: CacheMode::Off,
            accounting,
            limits: Arc::new(RateLimits::new()),
            next_start: tokio::sync::Mutex::new(None),
            rng: Mutex::new(seed),
            batched: false,
        }
    }

    /// A context with the cache at `cache_path` (opened, or created, unless `mode` is
    /// [`CacheMode::Off`]). To share one cache file between contexts, open a [`CallCache`]
    /// once and use [`CallContext::with_cache`].
    pub fn open(
        policy: CallPolicy,
        accounting: Arc<Accounting>,
        cache_path: &Path,
        mode: CacheMode,
    ) -> Result<CallContext, ProviderError> {
        let context = CallContext::new(policy, accounting);
        if mode == CacheMode::Off {
            return Ok(context);
        }
        Ok(context.with_cache(Arc::new(CallCache::open(cache_path)?), mode))
    }

    /// Uses `cache` in `mode`.
    pub fn with_cache(mut self, cache: Arc<CallCache>, mode: CacheMode) -> CallContext {
        self.cache = Some(cache);
        self.mode = mode;
        self
    }

    /// Uses `limits` (shared with other contexts, so that roles calling the same model share
    /// one limiter) instead of a registry of its own.
    pub fn with_limits(mut self, limits: Arc<RateLimits>) -> CallContext {
        self.limits = limits;
        self
    }

    /// Batch mode: calls that reach a model wrapped by a [`crate::Batcher`] wait in its queue,
    /// free of this context's concurrency limit, minimum interval and rate limiter, and are
    /// accounted at the batch price; requests a batch did not run are sent interactively,
    /// under those limits.
    pub fn batched(mut self) -> CallContext {
        self.batched = true;
        self
    }

    /// Whether calls go through batch queues ([`CallContext::batched`]).
    pub fn is_batched(&self) -> bool {
        self.batched
    }

    /// The rate limiters this context's calls go through.
    pub fn limits(&self) -> &Arc<RateLimits> {
        &self.limits
    }

    /// Seeds the backoff jitter (for reproducible tests; the default seed is the clock).
    pub fn with_seed(self, seed: u64) -> CallContext {
        *self.rng.lock().unwrap_or_else(PoisonError::into_inner) = seed;
        self
    }

    /// The policy.
    pub fn policy(&self) -> &CallPolicy {
        &self.policy
    }

    /// The cache mode ([`CacheMode::Off`] when there is no cache).
    pub fn mode(&self) -> CacheMode {
        if self.cache.is_some() {
            self.mode
        } else {
            CacheMode::Off
        }
    }

    /// The accounting this context records into.
    pub fn accounting(&self) -> &Arc<Accounting> {
        &self.accounting
    }

    /// A uniform number in `[0, 1)` (SplitMix64).
    fn jitter(&self) -> f64 {
        let mut state = self.rng.lock().unwrap_or_else(PoisonError::into_inner);
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Waits until `min_interval` has passed since the previous start, and claims this start.
    async fn wait_for_turn(&self) {
        if self.policy.min_interval.is_zero() {
            return;
        }
        let mut next = self.next_start.lock().await;
        if let Some(at) = *next {
            tokio::time::sleep_until(at).await;
        }
        *next = Some(Instant::now() + self.policy.min_interval);
    }

    /// One call: cache lookup, then (if `remote`) limits and retries around `send`, then cache
    /// store and accounting.
    async fn run<T, F, Fut>(&self, call: Call<'_>, mut send: F) -> Result<T, ProviderError>
    where
        T: Metered + Serialize + DeserializeOwned,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        let cache = match (&self.cache, self.mode) {
            (Some(cache), CacheMode::ReadWrite | CacheMode::Replay)
                if call.remote && call.cached =>
            {
                Some(cache)
            }
            _ => None,
        };
        let key = cache.map(|_| cache_key(call.kind, call.model, &call.request));
        if let (Some(cache), Some(key)) = (cache, &key) {
            if let Some(mut hit) = lookup::<T>(cache, key, &call) {
                hit.usage_mut().requests = 0;
                self.accounting.record(
                    call.model,
                    &CallRecord {
                        cache_hit: true,
                        ..CallRecord::default()
                    },
                );
                tracing::debug!(model = call.model, call = call.kind.as_str(), key = %&key[..12], "cache hit");
                return Ok(hit);
            }
            if self.mode == CacheMode::Replay {
                self.accounting.record(
                    call.model,
                    &CallRecord {
                        error: true,
                        ..CallRecord::default()
                    },
                );
                return Err(ProviderError::new(ProviderErrorKind::ReplayMiss {
                    call: call.kind.as_str(),
                    key: key[..12].to_owned(),
                    request: call.description.clone(),
                })
                .with_model(call.model));
            }
        }

        let started = Instant::now();
        // Batch mode: the call waits in the batch queue, without the limits of interactive
        // calls (hundreds may wait in one batch); a request the batch did not run is sent
        // interactively below.
        let mut early = None;
        let mut batched = false;
        if self.batched && call.remote {
            let (result, answered, fallback) = scope::scoped(BatchMode::Batch, send()).await;
            match result {
                Err(_) if fallback => {}
                other => {
                    batched = answered > 0;
                    early = Some(other);
                }
            }
        }
        // The time bound of a call counts from here: a batch may take hours, and what it did
        // not run is then sent interactively under the bound.
        let deadline = Instant::now() + self.policy.max_wait;
        let limiter = (call.remote && early.is_none())
            .then(|| self.limits.limiter(call.model, self.policy.concurrency));
        let mut attempt = u32::from(early.is_some());
        let mut faults = 0u32;
        let mut throttled = 0u32;
        let mut waited = Duration::ZERO;
        let result = match early {
            Some(result) => result,
            None => {
                scope::scoped(BatchMode::Interactive, async {
                    loop {
                        attempt += 1;
                        let result = if let Some(limiter) = &limiter {
                            let _slot = self.permits.acquire().await.ok();
                            self.wait_for_turn().await;
                            let permit =
                                match limiter.acquire(call.cost, deadline, throttled > 0).await {
                                    Ok(permit) => permit,
                                    Err(blocked) => {
                                        // Nothing was sent this time.
                                        attempt -= 1;
                                        break Err(self.blocked(blocked, started, throttled));
                                    }
                                };
                            waited += permit.waited;
                            let (result, seen) = observing(send()).await;
                            let outcome = match &result {
                                Ok(_) => Outcome::Success,
                                Err(e) if is_throttle(e) => Outcome::Throttled(
                                    e.retry_after().map(|d| d.min(self.policy.max_retry_after)),
                                ),
                                Err(_) => Outcome::Failed,
                            };
                            let unexpected = permit.finish(
                                outcome,
                                seen.headers.as_ref(),
                                seen.account,
                                self.jitter(),
                            );
                            if unexpected {
                                // A 429 the limiter did not expect, or a bucket drained by others: is
                                // another model on the same account refused, or drained, together with it
                                // (a key-wide limit nobody declared)?
                                self.limits.check_pooling(limiter);
                            }
                            result
                        } else {
                            send().await
                        };
                        match result {
                            Ok(value) => break Ok(value),
                            Err(e) if call.remote && is_throttle(&e) && e.attempts().is_none() => {
                                throttled += 1;
                                if Instant::now() >= deadline {
                                    break Err(self.blocked(
                                        Blocked::PastDeadline,
                                        started,
                                        throttled,
                                    ));
                                }
                                // Not a fault: the limiter's gate and pace hold the next attempt.
                                tracing::debug!(
                                    model = call.model,
                                    call = call.kind.as_str(),
                                    attempt,
                                    error = %e,
                                    "the provider said slow down; waiting for its rate limit"
                                );
                            }
                            Err(e)
                                if call.remote
                                    && faults < self.policy.max_retries
                                    && is_transient(&e) =>
                            {
                                faults += 1;
                                let wait = self.policy.wait_after(&e, faults, self.jitter());
                                if Instant::now() + wait > deadline {
                                    break Err(e);
                                }
                                tracing::warn!(
                                    model = call.model,
                                    call = call.kind.as_str(),
                                    attempt,
                                    wait_ms = wait.as_millis() as u64,
                                    error = %e,
                                    "provider call failed; retrying"
                                );
                                tokio::time::sleep(wait).await;
                            }
                            Err(e) => break Err(e),
                        }
                    }
                })
                .await
                .0
            }
        };
        let latency = started.elapsed();
        let mut record = CallRecord {
            batch: batched,
            attempts: attempt,
            latency: Some(latency),
            throttled,
            waited,
            limit: limiter.as_ref().map(|l| l.status()),
            ..CallRecord::default()
        };
        match result {
            Ok(value) => {
                record.usage = value.usage();
                self.accounting.record(call.model, &record);
                tracing::debug!(
                    model = call.model,
                    call = call.kind.as_str(),
                    attempts = attempt,
                    latency_ms = latency.as_millis() as u64,
                    input_tokens = record.usage.input_tokens,
                    output_tokens = record.usage.output_tokens,
                    "provider call"
                );
                if let (Some(cache), Some(key)) = (cache, &key) {
                    let stored = serde_json::to_string(&value)
                        .map_err(|e| ProviderError::malformed(e.to_string()))
                        .and_then(|json| {
                            cache.put(key, call.kind, call.model, &call.description, &json)
                        });
                    if let Err(e) = stored {
                        tracing::warn!(model = call.model, error = %e, "cannot store a response in the call cache");
                    }
                }
                Ok(value)
            }
            Err(e) => {
                record.error = true;
                self.accounting.record(call.model, &record);
                tracing::debug!(
                    model = call.model,
                    call = call.kind.as_str(),
                    attempts = attempt,
                    error = %e,
                    "provider call failed"
                );
                let e = if e.model().is_some() {
                    e
                } else {
                    e.with_model(call.model)
                };
                Err(if call.remote && e.attempts().is_none() {
                    e.with_attempts(attempt.max(1))
                } else {
                    e
                })
            }
        }
    }

    /// The error of a call its rate limiter will not let go.
    fn blocked(&self, blocked: Blocked, started: Instant, throttled: u32) -> ProviderError {
        match blocked {
            Blocked::PastDeadline => ProviderError::new(ProviderErrorKind::RateLimited {
                waited: Duration::from_millis(
                    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                ),
                bound: self.policy.max_wait,
                throttled,
            }),
            Blocked::TooLarge { kind, need, limit } => {
                ProviderError::new(ProviderErrorKind::TooLarge {
                    need,
                    limit,
                    unit: kind.unit(),
                })
            }
        }
    }
}

/// The cached response for `key`, if there is a readable one.
fn lookup<T: DeserializeOwned>(cache: &CallCache, key: &str, call: &Call<'_>) -> Option<T> {
    match cache.get(key) {
        Ok(Some(json)) => match serde_json::from_str(&json) {
            Ok(value) => Some(value),
            Err(e) => {
                tracing::warn!(model = call.model, error = %e, "unreadable call cache entry; ignoring it");
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(model = call.model, error = %e, "call cache lookup failed");
            None
        }
    }
}

/// What [`CallContext::run`] needs to know about a call.
struct Call<'a> {
    kind: CallKind,
    model: &'a str,
    /// The request's meaningful fields, for the cache key.
    request: Value,
    /// A short human description (cache entries, replay-miss errors).
    description: String,
    /// Remote: cached, rate limited and retried. In-process models are only accounted.
    remote: bool,
    /// Whether [`CallContext::run`] looks the call up in the cache and stores its answer (the
    /// embedder caches per text itself).
    cached: bool,
    /// What it is expected to use of the provider's token limits.
    cost: RequestCost,
}

/// A response that carries a [`Usage`].
trait Metered {
    fn usage(&self) -> Usage;
    fn usage_mut(&mut self) -> &mut Usage;
}

impl Metered for ChatResponse {
    fn usage(&self) -> Usage {
        self.usage
    }
    fn usage_mut(&mut self) -> &mut Usage {
        &mut self.usage
    }
}

impl Metered for Reranking {
    fn usage(&self) -> Usage {
        self.usage
    }
    fn usage_mut(&mut self) -> &mut Usage {
        &mut self.usage
    }
}

/// [`Embeddings`] as the cache stores them.
#[derive(Serialize, Deserialize)]
struct StoredEmbeddings {
    vectors: Vec<Vec<f32>>,
    usage: Usage,
}

impl Metered for StoredEmbeddings {
    fn usage(&self) -> Usage {
        self.usage
    }
    fn usage_mut(&mut self) -> &mut Usage {
        &mut self.usage
    }
}

/// The first `n` words of `text`, quoted, with `…` when cut.
fn first_words(text: &str, n: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = words[..words.len().min(n)].join(" ");
    out = excerpt(&out, 80);
    if words.len() > n && !out.ends_with('…') {
        out.push('…');
    }
    format!("{out:?}")
}

// ---------------------------------------------------------------------------------------------
// Wrappers

/// Wraps providers so that every call goes through a [`CallContext`].
#[derive(Debug, Clone, Copy)]
pub struct Guarded;

impl Guarded {
    /// `inner` with retries, limits, cache and accounting from `ctx`.
    pub fn chat(inner: Arc<dyn ChatModel>, ctx: Arc<CallContext>) -> Arc<dyn ChatModel> {
        Arc::new(GuardedChat {
            inner,
            ctx,
            role: None,
        })
    }

    /// [`Guarded::chat`] for one of assay's roles (`judge`, `target`, …), which its telemetry
    /// spans name (`assay.role`).
    pub fn chat_as(
        inner: Arc<dyn ChatModel>,
        ctx: Arc<CallContext>,
        role: &'static str,
    ) -> Arc<dyn ChatModel> {
        Arc::new(GuardedChat {
            inner,
            ctx,
            role: Some(role),
        })
    }

    /// `inner` with retries, limits, cache and accounting from `ctx`; in-process embedders
    /// (`builtin/`, `local/`, `hf/`) are only accounted (no cache, limits or retries). Remote
    /// embeddings are cached per text (model, input kind, text); the texts a call misses are
    /// sent in one call, which is one retry unit.
    pub fn embedder(inner: Arc<dyn Embedder>, ctx: Arc<CallContext>) -> Arc<dyn Embedder> {
        Arc::new(GuardedEmbedder {
            remote: !["builtin/", "local/", "hf/"]
                .iter()
                .any(|p| inner.model().starts_with(p)),
            inner,
            ctx,
            dimension: OnceLock::new(),
        })
    }

    /// `inner` with retries, limits, cache and accounting from `ctx`. An [`crate::LlmReranker`]
    /// re-asks its model itself; once it gives up, its error is not retried again here.
    pub fn reranker(inner: Arc<dyn Reranker>, ctx: Arc<CallContext>) -> Arc<dyn Reranker> {
        Arc::new(GuardedReranker { inner, ctx })
    }
}

/// Ends a provider call's span with its usage, or its error.
fn end_call_span<T: Metered>(
    span: &assay_telemetry::Span,
    result: &Result<T, ProviderError>,
    remote: bool,
) {
    match result {
        Ok(answer) => {
            let usage = answer.usage();
            assay_telemetry::genai::usage(span, usage.input_tokens, usage.output_tokens);
            // The wrapper zeroes the requests of an answer from the cache.
            if remote && usage.requests == 0 {
                span.set(assay_telemetry::genai::CACHE_HIT, true);
            }
        }
        Err(e) => span.fail(e.kind_name(), e.to_string()),
    }
    span.end();
}

#[derive(Debug)]
struct GuardedChat {
    inner: Arc<dyn ChatModel>,
    ctx: Arc<CallContext>,
    role: Option<&'static str>,
}

#[async_trait]
impl ChatModel for GuardedChat {
    fn model(&self) -> &str {
        self.inner.model()
    }

    /// The wrapped model's check, neither cached nor counted (it is no chat call).
    async fn check_model(&self) -> Result<crate::chat::ModelCheck, ProviderError> {
        self.inner.check_model().await
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let prompt = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .or(request.messages.last())
            .map_or("", |m| m.content.as_str());
        let call = Call {
            kind: CallKind::Chat,
            model: self.inner.model(),
            request: serde_json::to_value(request)
                .map_err(|e| ProviderError::config(e.to_string()))?,
            description: format!("prompt {}", first_words(prompt, 8)),
            remote: true,
            cached: true,
            cost: RequestCost::of_chat(request),
        };
        let span = assay_telemetry::genai::provider_call("chat", self.inner.model(), self.role);
        if span.is_recording() {
            span.set(
                assay_telemetry::genai::MAX_TOKENS,
                i64::from(request.max_tokens),
            );
            if let Some(t) = request.temperature {
                span.set(assay_telemetry::genai::TEMPERATURE, f64::from(t));
            }
            assay_telemetry::genai::content(&span, assay_telemetry::genai::INPUT_MESSAGES, || {
                serde_json::json!({"system": request.system, "messages": request.messages})
                    .to_string()
            });
        }
        let result =
            assay_telemetry::in_span(&span, self.ctx.run(call, || self.inner.chat(request))).await;
        if let Ok(answer) = &result {
            assay_telemetry::genai::content(&span, assay_telemetry::genai::OUTPUT_MESSAGES, || {
                serde_json::json!({"text": answer.text, "tool_calls": answer.tool_calls})
                    .to_string()
            });
        }
        end_call_span(&span, &result, true);
        result
    }
}

#[derive(Debug)]
struct GuardedEmbedder {
    inner: Arc<dyn Embedder>,
    ctx: Arc<CallContext>,
    remote: bool,
    dimension: OnceLock<usize>,
}

#[async_trait]
impl Embedder for GuardedEmbedder {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn dimension(&self) -> Option<usize> {
        self.inner
            .dimension()
            .or_else(|| self.dimension.get().copied())
    }

    async fn embed_with_usage(
        &self,
        texts: &[String],
        kind: InputKind,
    ) -> Result<Embeddings, ProviderError> {
        if texts.is_empty() {
            return self.inner.embed_with_usage(texts, kind).await;
        }
        let model = self.inner.model();
        // Remote embeddings are cached per text, so that a batch with one new text calls the
        // provider for that text only (and a replay misses only it).
        let cache = match (&self.ctx.cache, self.ctx.mode) {
            (Some(cache), CacheMode::ReadWrite | CacheMode::Replay) if self.remote => Some(cache),
            _ => None,
        };
        let keys: Vec<String> = match cache {
            Some(_) => texts
                .iter()
                .map(|t| {
                    cache_key(
                        CallKind::Embed,
                        model,
                        &json!({"text": t, "input_kind": kind.as_str()}),
                    )
                })
                .collect(),
            None => Vec::new(),
        };
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
        if let Some(cache) = cache {
            for (slot, key) in vectors.iter_mut().zip(&keys) {
                *slot = cache
                    .get(key)
                    .ok()
                    .flatten()
                    .and_then(|json| serde_json::from_str::<Vec<f32>>(&json).ok());
            }
        }
        let missing: Vec<usize> = (0..texts.len()).filter(|&i| vectors[i].is_none()).collect();
        let mut usage = Usage::default();
        if missing.is_empty() {
            self.ctx.accounting.record(
                model,
                &CallRecord {
                    cache_hit: true,
                    ..CallRecord::default()
                },
            );
        } else if cache.is_some() && self.ctx.mode == CacheMode::Replay {
            self.ctx.accounting.record(
                model,
                &CallRecord {
                    error: true,
                    ..CallRecord::default()
                },
            );
            let first = missing[0];
            return Err(ProviderError::new(ProviderErrorKind::ReplayMiss {
                call: CallKind::Embed.as_str(),
                key: keys[first][..12].to_owned(),
                request: format!(
                    "{} of {} {} text(s) not recorded, the first {}",
                    missing.len(),
                    texts.len(),
                    kind.as_str(),
                    first_words(&texts[first], 8)
                ),
            })
            .with_model(model));
        } else {
            let todo: Vec<String> = missing.iter().map(|&i| texts[i].clone()).collect();
            let call = Call {
                kind: CallKind::Embed,
                model,
                request: Value::Null,
                description: format!(
                    "{} {} text(s) starting {}",
                    todo.len(),
                    kind.as_str(),
                    first_words(&todo[0], 8)
                ),
                remote: self.remote,
                cached: false,
                cost: RequestCost::of_text(todo.iter().map(String::len).sum()),
            };
            let span = assay_telemetry::genai::provider_call("embeddings", model, Some("embedder"));
            span.set("assay.embeddings.texts", assay_telemetry::count(todo.len()));
            let fresh = assay_telemetry::in_span(
                &span,
                self.ctx.run(call, || async {
                    let e = self.inner.embed_with_usage(&todo, kind).await?;
                    Ok(StoredEmbeddings {
                        vectors: e.vectors,
                        usage: e.usage,
                    })
                }),
            )
            .await;
            end_call_span(&span, &fresh, self.remote);
            let fresh = fresh?;
            if fresh.vectors.len() != todo.len() {
                return Err(ProviderError::malformed(format!(
                    "{} vectors for {} texts",
                    fresh.vectors.len(),
                    todo.len()
                ))
                .with_model(model));
            }
            usage = fresh.usage;
            for (&i, vector) in missing.iter().zip(fresh.vectors) {
                if let Some(cache) = cache {
                    let stored = serde_json::to_string(&vector)
                        .map_err(|e| ProviderError::malformed(e.to_string()))
                        .and_then(|json| {
                            cache.put(
                                &keys[i],
                                CallKind::Embed,
                                model,
                                &format!("{} text {}", kind.as_str(), first_words(&texts[i], 8)),
                                &json,
                            )
                        });
                    if let Err(e) = stored {
                        tracing::warn!(model, error = %e, "cannot store an embedding in the call cache");
                    }
                }
                vectors[i] = Some(vector);
            }
        }
        let vectors: Vec<Vec<f32>> = vectors.into_iter().flatten().collect();
        if vectors.len() != texts.len() {
            return Err(ProviderError::malformed(format!(
                "{} vectors for {} texts",
                vectors.len(),
                texts.len()
            ))
            .with_model(model));
        }
        if let Some(first) = vectors.first() {
            let _ = self.dimension.set(first.len());
        }
        Ok(Embeddings { vectors, usage })
    }
}

#[derive(Debug)]
struct GuardedReranker {
    inner: Arc<dyn Reranker>,
    ctx: Arc<CallContext>,
}

#[async_trait]
impl Reranker for GuardedReranker {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn rerank(
        &self,
        query: &str,
        documents: &[RerankDocument],
        top_k: usize,
    ) -> Result<Reranking, ProviderError> {
        self.rerank_sample(query, documents, top_k, 0).await
    }

    fn is_stochastic(&self) -> bool {
        self.inner.is_stochastic()
    }

    async fn rerank_sample(
        &self,
        query: &str,
        documents: &[RerankDocument],
        top_k: usize,
        sample: u32,
    ) -> Result<Reranking, ProviderError> {
        if documents.is_empty() || top_k == 0 {
            return self
                .inner
                .rerank_sample(query, documents, top_k, sample)
                .await;
        }
        // A repeat's sample is part of the cache key (sample 0 keys as a plain call always did).
        let mut request = json!({"query": query, "documents": documents, "top_k": top_k});
        if sample > 0 && self.inner.is_stochastic() {
            request["sample"] = json!(sample);
        }
        let call = Call {
            kind: CallKind::Rerank,
            model: self.inner.model(),
            request,
            description: format!(
                "query {}, {} documents, top {top_k}",
                first_words(query, 8),
                documents.len()
            ),
            remote: true,
            cached: true,
            cost: self.inner.request_cost(query, documents, top_k),
        };
        let span = assay_telemetry::genai::provider_call(
            self.inner.operation(),
            self.inner.model(),
            Some("reranker"),
        );
        assay_telemetry::genai::content(&span, assay_telemetry::genai::QUERY_TEXT, || {
            query.to_owned()
        });
        let reranking = assay_telemetry::in_span(
            &span,
            self.ctx.run(call, || {
                self.inner.rerank_sample(query, documents, top_k, sample)
            }),
        )
        .await;
        if let Ok(r) = &reranking {
            assay_telemetry::genai::documents(
                &span,
                r.order
                    .iter()
                    .filter_map(|o| documents.get(o.index).map(|d| (d.id.as_str(), o.score))),
            );
        }
        end_call_span(&span, &reranking, true);
        let reranking = reranking?;
        // A cache entry is trusted only as far as the contract: valid, distinct, at most top_k.
        let mut seen = std::collections::HashSet::new();
        if reranking.order.len() > top_k
            || reranking
                .order
                .iter()
                .any(|r| r.index >= documents.len() || !seen.insert(r.index))
        {
            return Err(ProviderError::malformed(
                "the reranking breaks the contract (index out of range, repeated, or more than top_k)",
            )
            .with_model(self.inner.model()));
        }
        Ok(reranking)
    }
}

#[cfg(test)]
mod tests;
