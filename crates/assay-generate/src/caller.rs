//! Every model call of a generation: answered from the journal when an earlier process made
//! it, else checked against the budget, sent through the provider-call wrapper (cache,
//! accounting, limits, timeouts) with its schema, and journaled as soon as it ends.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use assay_providers::{ChatModel, ChatRequest, Price, SchemaCheck, ask_structured_traced};
use serde_json::Value;

use super::journal::{Entry, Journal, Reply};
use crate::HarnessError;

/// One call to make: the prompt, the schema, and a check of the validated object.
pub struct Call<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The user turn.
    pub user: &'a str,
    /// The schema's name (in the request) and the schema.
    pub schema: &'a SchemaCheck,
    /// A check of a valid object beyond the schema (ids that must exist); its error is sent
    /// back to the model as a corrective turn.
    pub check: &'a (dyn Fn(&Value) -> Result<(), String> + Sync),
    /// Estimated input tokens, for the budget.
    pub input_tokens: u64,
    /// The reply's token limit.
    pub max_tokens: u32,
}

/// What a call came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A reply that follows the schema.
    Valid(Value),
    /// No usable reply: why (counted as a rejection, never written).
    Invalid(String),
    /// The call failed (a provider error, a timeout): not journaled, so `--resume` retries it.
    Error(String),
    /// Not made: the budget would be passed.
    OverBudget,
}

/// Calls made, replayed and what they cost.
#[derive(Default)]
pub struct Caller<'a> {
    chat: Option<&'a dyn ChatModel>,
    journal: Option<&'a Journal>,
    price: Option<Price>,
    budget: Option<f64>,
    /// The cost of the calls the journal held when it was opened.
    spent_before: f64,
    /// Cost so far in micro-dollars (this process).
    spent_micros: AtomicU64,
    reserved_micros: Mutex<u64>,
    /// Calls answered by the model in this process.
    pub made: AtomicUsize,
    /// Chat requests sent (corrective turns included).
    pub requests: AtomicUsize,
    /// Calls answered from the journal.
    pub replayed: AtomicUsize,
    /// Calls that failed.
    pub errors: AtomicUsize,
    /// Set once a call was refused for the budget.
    pub budget_hit: AtomicBool,
    /// Told after every call: (calls finished, cost so far).
    progress: Option<&'a (dyn Fn(usize, f64) + Sync)>,
    finished: AtomicUsize,
}

fn micros(usd: f64) -> u64 {
    (usd.max(0.0) * 1e6).round() as u64
}

impl<'a> Caller<'a> {
    /// A caller for `chat`, journaling in `journal`, against `budget` (USD) at `price`.
    pub fn new(
        chat: Option<&'a dyn ChatModel>,
        journal: Option<&'a Journal>,
        price: Option<Price>,
        budget: Option<f64>,
        spent_before: f64,
        progress: Option<&'a (dyn Fn(usize, f64) + Sync)>,
    ) -> Caller<'a> {
        Caller {
            chat,
            journal,
            price,
            budget,
            spent_before,
            progress,
            ..Caller::default()
        }
    }

    /// The key of a call: a digest of the model, the prompt and the schema. It is also the
    /// drafts' `prompt_hash`.
    pub fn key(&self, call: &Call<'_>) -> String {
        let model = self.chat.map_or("", ChatModel::model);
        let schema = call.schema.output_schema();
        super::prompts::digest(&[
            model,
            call.system,
            call.user,
            &schema.name,
            &schema.schema.to_string(),
        ])
    }

    /// The cost of this process's calls so far, in USD (`None` without a price).
    pub fn spent(&self) -> Option<f64> {
        self.price
            .map(|_| self.spent_micros.load(Ordering::SeqCst) as f64 / 1e6)
    }

    fn cost(&self, input: u64, output: u64) -> Option<f64> {
        self.price
            .map(|p| (input as f64 * p.input + output as f64 * p.output) / 1e6)
    }

    fn tick(&self) {
        let done = self.finished.fetch_add(1, Ordering::SeqCst) + 1;
        if let Some(progress) = self.progress {
            progress(done, self.spent().unwrap_or(0.0));
        }
    }

    /// Makes `call` (or answers it from the journal); see [`Outcome`].
    pub async fn ask(&self, call: &Call<'_>) -> Result<(Outcome, String), HarnessError> {
        let key = self.key(call);
        if let Some(entry) = self.journal.and_then(|j| j.get(&key)) {
            self.replayed.fetch_add(1, Ordering::SeqCst);
            self.tick();
            let outcome = match &entry.reply {
                Reply::Valid(v) => Outcome::Valid(v.clone()),
                Reply::Invalid(why) => Outcome::Invalid(why.clone()),
            };
            return Ok((outcome, key));
        }
        let Some(chat) = self.chat else {
            return Ok((Outcome::Error("no model to call (a dry run)".into()), key));
        };
        // The budget, before the call: what is spent, what calls in flight may still spend,
        // and this call's upper bound (its input and a reply as long as its limit).
        let upper = self
            .cost(call.input_tokens, u64::from(call.max_tokens))
            .map_or(0, micros);
        if let Some(budget) = self.budget {
            let mut reserved = self
                .reserved_micros
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let spent = self.spent_micros.load(Ordering::SeqCst) + micros(self.spent_before);
            if spent + *reserved + upper > micros(budget) {
                self.budget_hit.store(true, Ordering::SeqCst);
                return Ok((Outcome::OverBudget, key));
            }
            *reserved += upper;
        }
        let mut request =
            ChatRequest::new(Some(call.system.to_owned()), call.user, call.max_tokens);
        request.temperature = Some(0.7);
        let (result, trace) = ask_structured_traced(chat, request, call.schema, 1, &|value| {
            (call.check)(value).map(|()| value.clone())
        })
        .await;
        if self.budget.is_some() {
            let mut reserved = self
                .reserved_micros
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *reserved = reserved.saturating_sub(upper);
        }
        let usage = trace.usage;
        let cost = self.cost(usage.input_tokens, usage.output_tokens);
        self.spent_micros
            .fetch_add(cost.map_or(0, micros), Ordering::SeqCst);
        self.requests
            .fetch_add(trace.attempts.len(), Ordering::SeqCst);
        // Both replies allowed (the first and one corrective turn) were unusable.
        let exhausted =
            trace.attempts.len() == 2 && trace.attempts.iter().all(|a| a.problem.is_some());
        let reply = match result {
            Ok((value, _)) => Reply::Valid(value),
            Err(_) if exhausted => Reply::Invalid(
                trace
                    .attempts
                    .last()
                    .and_then(|a| a.problem.clone())
                    .unwrap_or_else(|| "the reply was not usable".into()),
            ),
            Err(e) => {
                self.errors.fetch_add(1, Ordering::SeqCst);
                self.tick();
                return Ok((Outcome::Error(format!("{}: {e}", chat.model())), key));
            }
        };
        self.made.fetch_add(1, Ordering::SeqCst);
        if let Some(journal) = self.journal {
            journal.record(&Entry {
                key: key.clone(),
                reply: reply.clone(),
                requests: trace.attempts.len() as u32,
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                cost_usd: cost,
            })?;
        }
        let outcome = match reply {
            Reply::Valid(v) => Outcome::Valid(v),
            Reply::Invalid(why) => Outcome::Invalid(why),
        };
        self.tick();
        Ok((outcome, key))
    }
}
