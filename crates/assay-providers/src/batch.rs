//! Batch mode: calls nobody waits on (judges, calibration, generation, the LLM reranker, the
//! optimizer's grader, the simulator's judge) sent through the provider's batch API, at its
//! batch price, instead of one request at a time.
//!
//! * [`BatchApi`]: a provider's batch API for one model ([`ChatModel::batch_api`]): submit
//!   requests under custom ids, poll, read the results. OpenAI (`/v1/files` + `/v1/batches`,
//!   `openai/batch.rs`) and Anthropic Message Batches (`anthropic/batch.rs`) have one.
//! * [`Batcher`]: the queue, the submissions, the polls and the journal of one command. Its
//!   [`Batcher::wrap`] turns a chat model into a [`ChatModel`] whose calls wait in the queue:
//!   when no new request came for [`BatchSettings::window`] (or the queue holds
//!   [`BatchSettings::max_requests`]) the queue is submitted as one batch, polled every
//!   [`BatchSettings::poll`], and each call gets its own result, matched by custom id.
//!
//! A request's custom id is its call-cache key ([`crate::cache_key`]): the same request always
//! has the same id, so a batch is never asked the same thing twice, and a result found later is
//! the cache's answer. The call wrapper still looks in the cache first and stores after; the
//! batcher also stores every result of a batch in the cache when the batch ends, before the
//! journal says it ended.
//!
//! The journal (`.assay/batches.jsonl`, append-only, one fsynced line per event) records each
//! batch submitted (provider, base URL, model, batch id, its requests by custom id) and each
//! that ended. A command started again reads it: a request whose custom id is in a batch still
//! pending waits on that batch, polling it, and is never submitted twice.
//!
//! A request that failed inside a batch is that call's error
//! ([`ProviderErrorKind::BatchItem`]: an infrastructure error, never a score). Requests a batch
//! did not run (the batch expired or was cancelled, or could not be submitted) are sent
//! interactively, through the call wrapper's limits and retries, with one line per batch.

mod journal;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::oneshot;

pub use journal::{BatchJournal, JournalBatch};

use crate::call::{BatchMode, CallCache, CallKind, cache_key, current_batch_mode, note_batched};
pub use crate::chat::{BatchApi, BatchPoll, ItemResult};
use crate::chat::{ChatModel, ChatRequest, ChatResponse};
use crate::{ProviderError, ProviderErrorKind};

// ---------------------------------------------------------------------------------------------
// The batcher

/// How batches are made and polled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchSettings {
    /// Time between two polls of a batch.
    pub poll: Duration,
    /// Time without a new request after which the queue is submitted.
    pub window: Duration,
    /// The most requests in one batch.
    pub max_requests: usize,
    /// How many times in a row a submission or poll that failed transiently is tried again
    /// before giving up.
    pub max_retries: u32,
}

impl Default for BatchSettings {
    /// Polls every 30 s, a 2 s window, 10000 requests a batch, 5 retries.
    fn default() -> BatchSettings {
        BatchSettings {
            poll: Duration::from_secs(30),
            window: Duration::from_secs(2),
            max_requests: 10_000,
            max_retries: 5,
        }
    }
}

/// What a waiting call is told.
#[derive(Debug, Clone)]
enum Outcome {
    Answer(ChatResponse),
    Failed { batch: String, message: String },
    NotRun,
}

/// Requests waiting to be submitted, per model (provider, base URL, model).
#[derive(Default)]
struct Queue {
    api: Option<Arc<dyn BatchApi>>,
    items: Vec<(String, ChatRequest)>,
    /// Bumped on every request queued: the flusher submits when it stops moving.
    generation: u64,
    flusher: bool,
}

#[derive(Default)]
struct State {
    queues: HashMap<String, Queue>,
    /// Who waits for which custom id.
    waiters: HashMap<String, Vec<oneshot::Sender<Outcome>>>,
    /// The batch each submitted custom id is in, while the batch is pending.
    in_batch: HashMap<String, String>,
    /// Pending batches by id (from the journal or submitted now).
    pending: HashMap<String, JournalBatch>,
    /// Batches being polled by this process.
    polling: HashSet<String>,
}

/// The batch queue, submissions, polls and journal of one command (see the module docs).
pub struct Batcher {
    inner: Arc<Inner>,
}

struct Inner {
    settings: BatchSettings,
    journal: Option<BatchJournal>,
    cache: Option<Arc<CallCache>>,
    state: Mutex<State>,
}

impl fmt::Debug for Batcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batcher")
            .field("settings", &self.inner.settings)
            .field("journal", &self.inner.journal)
            .finish_non_exhaustive()
    }
}

impl Batcher {
    /// A batcher with `settings` that records its batches in the journal at `journal` (read
    /// first: batches an earlier command left pending are polled, not submitted again) and
    /// stores the results of ended batches in `cache`.
    pub fn open(
        settings: BatchSettings,
        journal: Option<PathBuf>,
        cache: Option<Arc<CallCache>>,
    ) -> Result<Batcher, ProviderError> {
        let mut state = State::default();
        let journal = match journal {
            Some(path) => {
                let (journal, pending) = BatchJournal::open(path)?;
                for batch in pending {
                    if !batch.requests.is_empty() {
                        tracing::info!(
                            "batch {} ({}, {} requests) is still pending from an earlier run; its requests wait on it",
                            batch.batch_id,
                            batch.model,
                            batch.requests.len()
                        );
                    }
                    for (id, _) in &batch.requests {
                        state.in_batch.insert(id.clone(), batch.batch_id.clone());
                    }
                    state.pending.insert(batch.batch_id.clone(), batch);
                }
                Some(journal)
            }
            None => None,
        };
        Ok(Batcher {
            inner: Arc::new(Inner {
                settings,
                journal,
                cache,
                state: Mutex::new(state),
            }),
        })
    }

    /// The batches still pending (submitted, not seen to end), by id.
    pub fn pending(&self) -> Vec<String> {
        let state = self.inner.lock();
        let mut ids: Vec<String> = state.pending.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// `inner` with its calls sent in batches, or `None` when its provider has no batch API.
    pub fn wrap(&self, inner: Arc<dyn ChatModel>) -> Option<Arc<dyn ChatModel>> {
        let api = inner.batch_api()?;
        Some(Arc::new(BatchedChat {
            inner,
            api,
            batcher: Arc::clone(&self.inner),
        }))
    }
}

/// The custom id of `request` to `model`: its call-cache key (64 hex digits, which both APIs
/// accept: `^[a-zA-Z0-9_-]{1,64}$`).
pub fn custom_id(model: &str, request: &ChatRequest) -> String {
    let value = serde_json::to_value(request).unwrap_or(Value::Null);
    cache_key(CallKind::Chat, model, &value)
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A response the cache holds for custom id `id` (the cache key).
    fn cached(&self, id: &str) -> Option<ChatResponse> {
        let json = self.cache.as_ref()?.get(id).ok()??;
        serde_json::from_str(&json).ok()
    }

    /// Registers a waiter for `id`: on the batch it is pending in, on a request already
    /// queued, or on a new entry of the queue. `Err` with the cached answer when there is one.
    fn enqueue(
        self: &Arc<Self>,
        api: &Arc<dyn BatchApi>,
        id: String,
        request: &ChatRequest,
    ) -> Result<oneshot::Receiver<Outcome>, ChatResponse> {
        let (tx, rx) = oneshot::channel();
        let mut state = self.lock();
        // Under the lock: a batch that ends stores its results before it lets its waiters go.
        if let Some(hit) = self.cached(&id) {
            return Err(hit);
        }
        let waiting = state.waiters.contains_key(&id);
        state.waiters.entry(id.clone()).or_default().push(tx);
        if let Some(batch) = state.in_batch.get(&id).cloned() {
            let same_place = state
                .pending
                .get(&batch)
                .is_some_and(|b| b.provider == api.provider() && b.base_url == api.base_url());
            if same_place {
                if state.polling.insert(batch.clone()) {
                    let requests = state.pending.get(&batch).map(|b| b.requests.clone());
                    let this = Arc::clone(self);
                    let api = Arc::clone(api);
                    tokio::spawn(async move {
                        this.poll_until_done(api, batch, requests.unwrap_or_default())
                            .await;
                    });
                }
                return Ok(rx);
            }
            state.in_batch.remove(&id);
        }
        if waiting {
            // The same request is queued or in flight: it is answered once, for both.
            return Ok(rx);
        }
        let key = format!(
            "{}\u{0}{}\u{0}{}",
            api.provider(),
            api.base_url(),
            api.model()
        );
        let max = self.settings.max_requests.max(1);
        let queue = state.queues.entry(key.clone()).or_default();
        queue.api.get_or_insert_with(|| Arc::clone(api));
        queue.items.push((id, request.clone()));
        queue.generation += 1;
        if queue.items.len() >= max {
            let items = std::mem::take(&mut queue.items);
            let this = Arc::clone(self);
            let api = Arc::clone(api);
            tokio::spawn(async move { this.submit_and_poll(api, items).await });
        } else if !queue.flusher {
            queue.flusher = true;
            let this = Arc::clone(self);
            tokio::spawn(async move { this.flush_when_quiet(key).await });
        }
        Ok(rx)
    }

    /// Submits the queue `key` once no request joined it for the window.
    async fn flush_when_quiet(self: Arc<Self>, key: String) {
        loop {
            let seen = self.lock().queues.get(&key).map_or(0, |q| q.generation);
            tokio::time::sleep(self.settings.window).await;
            let taken = {
                let mut state = self.lock();
                let Some(queue) = state.queues.get_mut(&key) else {
                    return;
                };
                if queue.generation != seen && !queue.items.is_empty() {
                    None
                } else {
                    queue.flusher = false;
                    Some((std::mem::take(&mut queue.items), queue.api.clone()))
                }
            };
            match taken {
                None => {}
                Some((items, Some(api))) if !items.is_empty() => {
                    self.submit_and_poll(api, items).await;
                    return;
                }
                Some(_) => return,
            }
        }
    }

    /// Submits `items` as one batch, journals it, and polls it until it ends.
    async fn submit_and_poll(
        self: Arc<Self>,
        api: Arc<dyn BatchApi>,
        items: Vec<(String, ChatRequest)>,
    ) {
        let mut tries = 0u32;
        let submitted = loop {
            match api.submit(&items).await {
                Ok(id) => break Ok(id),
                Err(e) if e.is_retryable() && tries < self.settings.max_retries => {
                    tries += 1;
                    let wait = e
                        .retry_after()
                        .unwrap_or(Duration::from_secs(1) * 2u32.pow(tries.min(6)));
                    tracing::debug!(model = api.model(), error = %e, "submitting a batch failed; trying again");
                    tokio::time::sleep(wait.min(Duration::from_secs(60))).await;
                }
                Err(e) => break Err(e),
            }
        };
        let batch_id = match submitted {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(
                    "{}: a batch of {} request(s) could not be submitted ({e}); sending them interactively",
                    api.model(),
                    items.len()
                );
                let mut state = self.lock();
                for (id, _) in &items {
                    resolve(&mut state, id, &Outcome::NotRun);
                }
                return;
            }
        };
        let batch = JournalBatch {
            provider: api.provider().to_owned(),
            base_url: api.base_url().to_owned(),
            model: api.model().to_owned(),
            batch_id: batch_id.clone(),
            requests: items,
        };
        if let Some(journal) = &self.journal
            && let Err(e) = journal.submitted(&batch)
        {
            tracing::warn!(
                "{}: cannot journal batch {batch_id} ({e}); an interrupted run will not find it",
                journal.path().display()
            );
        }
        tracing::info!(
            "{}: submitted batch {batch_id} of {} request(s)",
            api.model(),
            batch.requests.len()
        );
        let requests = batch.requests.clone();
        {
            let mut state = self.lock();
            for (id, _) in &requests {
                state.in_batch.insert(id.clone(), batch_id.clone());
            }
            state.pending.insert(batch_id.clone(), batch);
            state.polling.insert(batch_id.clone());
        }
        self.poll_until_done(api, batch_id, requests).await;
    }

    /// Polls batch `batch_id` until it ends, stores its answers in the cache, journals its end
    /// and lets its waiters go.
    async fn poll_until_done(
        self: Arc<Self>,
        api: Arc<dyn BatchApi>,
        batch_id: String,
        requests: Vec<(String, ChatRequest)>,
    ) {
        let mut failures = 0u32;
        let (status, results) = loop {
            match api.poll(&batch_id).await {
                Ok(BatchPoll::Pending(status)) => {
                    failures = 0;
                    tracing::debug!(model = api.model(), batch = %batch_id, status, "batch pending");
                }
                Ok(BatchPoll::Ended { status, results }) => break (status, results),
                Err(e) if e.is_retryable() && failures < self.settings.max_retries => {
                    failures += 1;
                    tracing::debug!(model = api.model(), batch = %batch_id, error = %e, "polling a batch failed; trying again");
                }
                Err(e) if e.status() == Some(404) => {
                    // The provider does not know the batch (another account or server): its
                    // requests are sent interactively, and the journal forgets it.
                    tracing::warn!(
                        "{}: batch {batch_id} is unknown to the provider ({e}); {} request(s) sent interactively",
                        api.model(),
                        requests.len()
                    );
                    self.end(&batch_id, "unknown", &requests, HashMap::new());
                    return;
                }
                Err(e) => {
                    // The batch may still end: it stays pending in the journal, and the next
                    // command polls it again.
                    let message = format!("cannot poll batch {batch_id}: {e}");
                    tracing::warn!("{}: {message}", api.model());
                    let mut state = self.lock();
                    state.polling.remove(&batch_id);
                    for (id, _) in &requests {
                        resolve(
                            &mut state,
                            id,
                            &Outcome::Failed {
                                batch: batch_id.clone(),
                                message: message.clone(),
                            },
                        );
                    }
                    return;
                }
            }
            tokio::time::sleep(self.settings.poll).await;
        };
        let by_id: HashMap<&str, &ChatRequest> =
            requests.iter().map(|(id, r)| (id.as_str(), r)).collect();
        let mut outcomes: HashMap<String, Outcome> = HashMap::new();
        for (id, result) in results {
            let Some(request) = by_id.get(id.as_str()) else {
                continue;
            };
            let outcome = match result {
                ItemResult::Answer(answer) => match api.parse(answer, request) {
                    Ok(response) => Outcome::Answer(response),
                    Err(e) => Outcome::Failed {
                        batch: batch_id.clone(),
                        message: e.to_string(),
                    },
                },
                ItemResult::Failed(message) => Outcome::Failed {
                    batch: batch_id.clone(),
                    message,
                },
                ItemResult::NotRun => Outcome::NotRun,
            };
            outcomes.insert(id, outcome);
        }
        // Answers go to the cache before the journal says the batch ended: an interrupted
        // command finds them there.
        if let Some(cache) = &self.cache {
            for (id, outcome) in &outcomes {
                if let Outcome::Answer(response) = outcome {
                    let stored = serde_json::to_string(response)
                        .map_err(|e| ProviderError::malformed(e.to_string()))
                        .and_then(|json| {
                            cache.put(
                                id,
                                CallKind::Chat,
                                api.model(),
                                &format!("batch {batch_id}"),
                                &json,
                            )
                        });
                    if let Err(e) = stored {
                        tracing::warn!(model = api.model(), error = %e, "cannot store a batch answer in the call cache");
                    }
                }
            }
        }
        let not_run = requests
            .iter()
            .filter(|(id, _)| {
                !matches!(
                    outcomes.get(id),
                    Some(Outcome::Answer(_) | Outcome::Failed { .. })
                )
            })
            .count();
        let failed = outcomes
            .values()
            .filter(|o| matches!(o, Outcome::Failed { .. }))
            .count();
        if not_run > 0 {
            tracing::warn!(
                "{}: batch {batch_id} {status}; {not_run} request(s) sent interactively",
                api.model()
            );
        } else {
            tracing::info!(
                "{}: batch {batch_id} {status}: {} answered, {failed} failed",
                api.model(),
                requests.len() - failed
            );
        }
        self.end(&batch_id, &status, &requests, outcomes);
    }

    /// Journals the end of batch `batch_id` and tells its waiters their outcomes (not run when
    /// `outcomes` has none).
    fn end(
        &self,
        batch_id: &str,
        status: &str,
        requests: &[(String, ChatRequest)],
        mut outcomes: HashMap<String, Outcome>,
    ) {
        if let Some(journal) = &self.journal
            && let Err(e) = journal.finished(batch_id, status)
        {
            tracing::warn!(
                "{}: cannot journal the end of batch {batch_id} ({e})",
                journal.path().display()
            );
        }
        let mut state = self.lock();
        state.pending.remove(batch_id);
        state.polling.remove(batch_id);
        for (id, _) in requests {
            if state.in_batch.get(id).is_some_and(|b| b == batch_id) {
                state.in_batch.remove(id);
            }
            let outcome = outcomes.remove(id).unwrap_or(Outcome::NotRun);
            resolve(&mut state, id, &outcome);
        }
    }
}

/// Tells every waiter of `id` its outcome.
fn resolve(state: &mut State, id: &str, outcome: &Outcome) {
    for waiter in state.waiters.remove(id).unwrap_or_default() {
        let _ = waiter.send(outcome.clone());
    }
}

/// A chat model whose calls wait in a [`Batcher`]'s queue.
struct BatchedChat {
    inner: Arc<dyn ChatModel>,
    api: Arc<dyn BatchApi>,
    batcher: Arc<Inner>,
}

impl fmt::Debug for BatchedChat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchedChat")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ChatModel for BatchedChat {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn check_model(&self) -> Result<crate::chat::ModelCheck, ProviderError> {
        self.inner.check_model().await
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let mode = current_batch_mode();
        if mode == Some(BatchMode::Interactive) {
            return self.inner.chat(request).await;
        }
        let id = custom_id(self.inner.model(), request);
        let waiter = match self.batcher.enqueue(&self.api, id, request) {
            Ok(waiter) => waiter,
            Err(mut cached) => {
                // Answered by a batch of an earlier command, and paid for there.
                cached.usage = crate::Usage::default();
                return Ok(cached);
            }
        };
        let outcome = waiter.await.unwrap_or(Outcome::NotRun);
        match outcome {
            Outcome::Answer(response) => {
                note_batched(true);
                Ok(response)
            }
            Outcome::Failed { batch, message } => Err(ProviderError::new(
                ProviderErrorKind::BatchItem { batch, message },
            )
            .with_model(self.inner.model())
            .with_attempts(1)),
            Outcome::NotRun if mode.is_some() => {
                note_batched(false);
                Err(ProviderError::new(ProviderErrorKind::BatchNotRun)
                    .with_model(self.inner.model())
                    .with_attempts(1))
            }
            // No call wrapper to send it again: send it here.
            Outcome::NotRun => self.inner.chat(request).await,
        }
    }
}
