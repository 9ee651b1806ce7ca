//! Every provider call of a run goes through one [`ProviderCalls`]: one call cache in one mode,
//! retries and limits from `[providers]`, one accounting (declared prices first).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use assay_core::runlog::RateLimitRecord;
use assay_providers::{
    Accounting, AccountingSnapshot, BatchSettings, Batcher, CacheMode, CallCache, CallContext,
    CallPolicy, ChatModel, Embedder, Guarded, LimitMemory, RateLimits, Reranker,
};

use super::{ASSAY_CACHE, batch_mode, batches_path, cache_path, limits_path};
use crate::HarnessError;
use crate::settings::ProjectSettings;

/// Every provider call of a run goes through here: one call cache (`.assay/cache.db`) in one
/// mode, retries and limits from `[providers]`, and one accounting of calls, tokens, cost and
/// latency.
#[derive(Debug)]
pub struct ProviderCalls {
    cache: Option<Arc<CallCache>>,
    mode: CacheMode,
    accounting: Arc<Accounting>,
    /// One rate limiter per model, shared by every role: roles calling the same model share
    /// its limits.
    limits: Arc<RateLimits>,
    /// Where the limits learned are kept between runs, and what was read from there: written
    /// back when this is dropped, if the run learned something new (remote runs only).
    memory: Option<(PathBuf, LimitMemory)>,
    max_retries: u32,
    max_wait: Duration,
    backoff: (Duration, Duration),
    concurrency: usize,
    reranker_interval: Duration,
    /// Batch mode (`[providers] batch`, `--batch`): the queue, polls and journal of the
    /// provider batches.
    batcher: Option<Arc<Batcher>>,
}

/// The roles whose calls nobody waits on, sent in provider batches in batch mode: judges
/// (the answer bank's and the simulator's), calibration, generation and the optimizer's
/// grader (the LLM reranker too, see [`ProviderCalls::reranker`]). The product under test, the
/// simulated user, the optimizer's proposer and the red team's attacker are interactive.
pub const BATCH_ROLES: &[&str] = &["judge", "calibrator", "generator", "grader"];

/// Reads the limits earlier runs learned; a missing, unreadable or damaged file is nothing
/// learned (it is assay's own state, rewritten at the end of the run), with a warning naming
/// it. Every value is bounded ([`LimitMemory::current`]): an entry out of bounds is dropped,
/// with one warning naming the file and each entry, and learned again; the file never fails a
/// call.
fn read_memory(path: &Path) -> LimitMemory {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return LimitMemory::empty(),
        Err(e) => {
            tracing::warn!(
                "{}: cannot read the remembered rate limits ({e}); starting without them",
                path.display()
            );
            return LimitMemory::empty();
        }
    };
    match serde_json::from_str::<LimitMemory>(&text) {
        Ok(memory) => {
            let (memory, dropped) = memory.current(assay_providers::limit::unix_now());
            if !dropped.is_empty() {
                tracing::warn!(
                    "{}: ignored {} remembered rate limit{} out of bounds ({}); {} learned again this run",
                    path.display(),
                    dropped.len(),
                    if dropped.len() == 1 { "" } else { "s" },
                    dropped.join("; "),
                    if dropped.len() == 1 {
                        "it is"
                    } else {
                        "they are"
                    }
                );
            }
            memory
        }
        Err(e) => {
            tracing::warn!(
                "{}: the remembered rate limits are damaged ({e}); starting without them",
                path.display()
            );
            LimitMemory::empty()
        }
    }
}

impl Drop for ProviderCalls {
    /// Keeps what the run learned about the providers' limits for the next run (atomically;
    /// a failure is a warning: the run's results do not depend on it).
    fn drop(&mut self) {
        let Some((path, read)) = &self.memory else {
            return;
        };
        let learned = self.limits.learned();
        if learned.models.is_empty() || &learned == read {
            return;
        }
        let written = serde_json::to_vec_pretty(&learned)
            .map_err(std::io::Error::other)
            .and_then(|bytes| {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent)?;
                }
                crate::results::write_replace(path, &bytes)
            });
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "cannot keep the rate limits this run learned");
        }
    }
}

/// Chat models sharing one call context: one concurrency limit for all of them
/// ([`ProviderCalls::chat_group`]).
#[derive(Debug, Clone)]
pub struct ChatGroup {
    context: Arc<CallContext>,
    /// Batch mode: the batcher and the context of the group's batched roles.
    batch: Option<(Arc<Batcher>, Arc<CallContext>)>,
}

impl ChatGroup {
    /// Wraps a chat model into the group, for `role` (`user`, `assistant`, `judge`, …: what
    /// its telemetry spans name). In batch mode a role of [`BATCH_ROLES`] waits in provider
    /// batches instead, outside the group's limit.
    pub fn chat(&self, role: &'static str, inner: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
        if let Some((batcher, context)) = &self.batch
            && BATCH_ROLES.contains(&role)
            && let Some(batched) = batcher.wrap(Arc::clone(&inner))
        {
            return Guarded::chat_as(batched, context.clone(), role);
        }
        Guarded::chat_as(inner, self.context.clone(), role)
    }
}

impl ProviderCalls {
    /// Opens the cache in the mode `--cache` > `ASSAY_CACHE` > `[providers] cache` names; only
    /// when `remote` (some provider of the run is called over the network: in-process models
    /// are never cached), though the mode is checked either way.
    pub fn open(
        settings: &ProjectSettings,
        flag: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        remote: bool,
    ) -> Result<ProviderCalls, HarnessError> {
        let from_env = env(ASSAY_CACHE).filter(|v| !v.trim().is_empty());
        let (name, source) = match (flag, from_env) {
            (Some(f), _) => (f.to_owned(), "--cache"),
            (None, Some(e)) => (e, ASSAY_CACHE),
            (None, None) => (
                settings.providers.cache.clone(),
                "assay.toml [providers] cache",
            ),
        };
        let mode: CacheMode = name.trim().parse().map_err(|_| {
            HarnessError::Usage(format!(
                "{source}: unknown cache mode `{name}` (expected read-write, off or replay)"
            ))
        })?;
        let cache = if mode == CacheMode::Off || !remote {
            None
        } else {
            let path = cache_path(settings);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
            }
            Some(Arc::new(CallCache::open(&path).map_err(|e| {
                HarnessError::Infrastructure(format!("{}: {e}", path.display()))
            })?))
        };
        let batcher = if batch_mode(settings, env)? && remote && mode != CacheMode::Replay {
            let p = &settings.providers;
            let batch = BatchSettings {
                poll: Duration::try_from_secs_f64(p.batch_poll_seconds)
                    .unwrap_or(Duration::from_secs(30)),
                window: Duration::try_from_secs_f64(p.batch_window_seconds)
                    .unwrap_or(Duration::from_secs(2)),
                max_requests: p.batch_max_requests,
                ..BatchSettings::default()
            };
            let path = batches_path(settings);
            let batcher = Batcher::open(batch, Some(path.clone()), cache.clone())
                .map_err(|e| HarnessError::Infrastructure(format!("{}: {e}", path.display())))?;
            Some(Arc::new(batcher))
        } else {
            None
        };
        let memory = (remote && settings.providers.remember_limits).then(|| {
            let path = limits_path(settings);
            let read = read_memory(&path);
            (path, read)
        });
        Ok(ProviderCalls {
            cache,
            mode,
            accounting: Arc::new(Accounting::with_prices(
                settings
                    .providers
                    .prices
                    .iter()
                    .map(|(m, p)| (m.clone(), p.price()))
                    .collect(),
            )),
            // Checked when the settings were read; a conflict here cannot happen.
            limits: Arc::new(
                RateLimits::with_shared(&settings.providers.shared_limits)
                    .map_err(HarnessError::Usage)?
                    .with_pooling(settings.providers.pool_shared_limits)
                    .with_slow_start(settings.providers.slow_start)
                    .with_memory(
                        memory
                            .as_ref()
                            .map_or_else(LimitMemory::empty, |(_, m)| m.clone()),
                    ),
            ),
            memory,
            max_retries: settings.providers.max_retries,
            max_wait: Duration::try_from_secs_f64(settings.providers.max_wait_seconds)
                .unwrap_or(Duration::from_secs(600)),
            backoff: (
                Duration::try_from_secs_f64(settings.providers.retry_backoff_seconds)
                    .unwrap_or(Duration::from_millis(500)),
                Duration::try_from_secs_f64(settings.providers.max_backoff_seconds)
                    .unwrap_or(Duration::from_secs(20)),
            ),
            concurrency: settings.providers.max_concurrency,
            reranker_interval: Duration::from_secs_f64(settings.semantic.rate_limit_delay),
            batcher,
        })
    }

    /// The price of `model`: declared in `[providers.prices]`, else built-in.
    pub fn price(&self, model: &str) -> Option<assay_providers::Price> {
        self.accounting.price_of(model)
    }

    /// The cache mode.
    pub fn mode(&self) -> CacheMode {
        self.mode
    }

    fn context(&self, min_interval: Duration) -> Arc<CallContext> {
        self.context_with(min_interval, self.concurrency)
    }

    fn context_with(&self, min_interval: Duration, concurrency: usize) -> Arc<CallContext> {
        Arc::new(self.make_context(min_interval, concurrency))
    }

    fn make_context(&self, min_interval: Duration, concurrency: usize) -> CallContext {
        let policy = CallPolicy {
            min_interval,
            concurrency,
            max_retries: self.max_retries,
            max_wait: self.max_wait,
            initial_backoff: self.backoff.0,
            max_backoff: self.backoff.1,
            ..CallPolicy::default()
        };
        let context =
            CallContext::new(policy, self.accounting.clone()).with_limits(Arc::clone(&self.limits));
        match &self.cache {
            Some(cache) => context.with_cache(cache.clone(), self.mode),
            None => context,
        }
    }

    /// Shares `other`'s rate limiters: roles whose calls are accounted apart (the optimizer's
    /// target and grader) but may call the same model share its limits.
    pub fn sharing_limits_with(mut self, other: &ProviderCalls) -> ProviderCalls {
        self.limits = Arc::clone(&other.limits);
        self
    }

    /// Wraps an embedder.
    pub fn embedder(&self, inner: Box<dyn Embedder>) -> Arc<dyn Embedder> {
        Guarded::embedder(Arc::from(inner), self.context(Duration::ZERO))
    }

    /// Wraps a reranker; its calls start at least `[semantic] rate_limit_delay` apart. In
    /// batch mode an LLM reranker's model waits in provider batches instead.
    pub fn reranker(&self, inner: Arc<dyn Reranker>) -> Arc<dyn Reranker> {
        if let Some(batcher) = &self.batcher
            && let Some(batched) = inner.with_chat(&|chat| batcher.wrap(chat))
        {
            return Guarded::reranker(batched, self.batch_context());
        }
        Guarded::reranker(inner, self.context(self.reranker_interval))
    }

    /// Wraps a chat model for `role` (`calibrator`, `grader`, `target`, `proposer`, `judge`:
    /// what its telemetry spans name). In batch mode a role of [`BATCH_ROLES`] waits in
    /// provider batches.
    pub fn chat(&self, role: &'static str, inner: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
        if let Some(batcher) = &self.batcher
            && BATCH_ROLES.contains(&role)
            && let Some(batched) = batcher.wrap(Arc::clone(&inner))
        {
            return Guarded::chat_as(batched, self.batch_context(), role);
        }
        Guarded::chat_as(inner, self.context(Duration::ZERO), role)
    }

    /// Whether calls of the batch roles go through provider batches.
    pub fn is_batched(&self) -> bool {
        self.batcher.is_some()
    }

    /// The context of batched roles: requests a batch did not run are sent interactively under
    /// the usual limits.
    fn batch_context(&self) -> Arc<CallContext> {
        Arc::new(
            self.make_context(Duration::ZERO, self.concurrency)
                .batched(),
        )
    }

    /// A group of chat models that share one limit of `concurrency` calls in flight (and the
    /// cache and accounting): the roles of one workflow, such as a simulation's user, model
    /// under test and judge, whose calls together are what the provider sees.
    pub fn chat_group(&self, concurrency: usize) -> ChatGroup {
        ChatGroup {
            context: self.context_with(Duration::ZERO, concurrency.max(1)),
            batch: self
                .batcher
                .as_ref()
                .map(|b| (Arc::clone(b), self.batch_context())),
        }
    }

    /// Calls, cache hits, tokens, cost and latency so far, per model.
    pub fn usage(&self) -> AccountingSnapshot {
        self.accounting.snapshot()
    }

    /// The rate limiters of the calls, one per model: [`RateLimits::held_back`] says whether
    /// callers wait on one now (for a progress display).
    pub fn limits(&self) -> Arc<RateLimits> {
        Arc::clone(&self.limits)
    }

    /// How the providers' rate limits shaped the calls, per remote model that was sent
    /// requests: for the RunLog and the other reports.
    pub fn rate_limit_records(&self) -> Vec<RateLimitRecord> {
        rate_limit_records(&self.usage())
    }

    /// The usage as text, one line per remote model that was called or answered from the
    /// cache (empty when none was).
    pub fn usage_report(&self) -> String {
        let snapshot = self.usage();
        let mut out = String::new();
        for (model, s) in &snapshot.models {
            // In-process models (the built-in embedder, a local model) send nothing and cost
            // nothing: only providers that were called, or answered from the cache, are listed.
            if s.requests == 0 && s.cache_hits == 0 && s.errors == 0 {
                continue;
            }
            if out.is_empty() {
                out.push_str(&format!("Provider calls (cache {}):\n", self.mode));
            }
            let cost = s
                .cost_usd
                .map_or_else(|| "cost unknown".to_owned(), |c| format!("${c:.4}"));
            let batch = if s.batch_calls > 0 {
                format!(" ({} answered by batch, at the batch price)", s.batch_calls)
            } else {
                String::new()
            };
            out.push_str(&format!(
                "  {model}: {} calls{batch}, {} cached, {} requests, {} retries, {} errors, {} in / {} out tokens, {cost}, {} ms max latency\n",
                s.calls, s.cache_hits, s.requests, s.retries, s.errors, s.input_tokens, s.output_tokens, s.latency_ms_max
            ));
            // Only when a limit showed itself: a run that was never held back reads as before.
            if let Some(r) = s
                .rate_limit
                .as_ref()
                .filter(|r| s.throttled > 0 || r.wait_ms > 0 || r.min_concurrency < r.ceiling)
            {
                out.push_str(&format!(
                    "    rate limits: {} answered 429/529 (no retry spent), {:.1} s held back, concurrency settled at {} of {} (lowest {}){}\n",
                    s.throttled,
                    r.wait_ms as f64 / 1000.0,
                    r.concurrency,
                    r.ceiling,
                    r.min_concurrency,
                    r.limiter
                        .as_ref()
                        .map(|l| format!(", limit shared as {l}"))
                        .unwrap_or_default()
                ));
            }
        }
        out
    }
}

/// How the providers' rate limits shaped the calls in `snapshot`, per remote model that was
/// sent requests.
pub fn rate_limit_records(snapshot: &AccountingSnapshot) -> Vec<RateLimitRecord> {
    snapshot
        .models
        .iter()
        .filter(|(_, s)| s.requests > 0)
        .filter_map(|(model, s)| {
            s.rate_limit.as_ref().map(|r| RateLimitRecord {
                model: model.clone(),
                requests: s.requests,
                throttled: s.throttled,
                wait_ms: r.wait_ms,
                concurrency: r.concurrency,
                min_concurrency: r.min_concurrency,
                ceiling: r.ceiling,
                limiter: r.limiter.clone(),
            })
        })
        .collect()
}
