//! The answer bank in `assay run` (docs/answers.md): for each [`AnswerCase`], assay's pipeline
//! selects the context, the product (an [`AnswerSystem`]: the optimizer's command, HTTP or
//! built-in chain target) writes the reply, the [`judge::AnswerJudge`] produces each metric's
//! verdicts claim by claim, the deterministic assertions check the reply, the case's
//! `trajectory:` rules check the tool calls the product reports
//! ([`assay_core::trajectory::evaluate_reply`]), and [`assay_core::answer::score_case`] scores
//! it.
//!
//! An infrastructure error (the target failed or timed out, the pipeline failed, a judge's
//! reply could not be parsed after its corrective turns) makes the case an error, recorded
//! with the reason and left out of the averages: never a 0, never NaN. So does a reply the
//! product should not have sent: one longer than `[answer] max_reply_bytes`, a `final_answer`
//! that is not a string, or `contexts` naming an entity the knowledge base does not hold.
//! A result keeps at most [`assay_core::answer::KEPT_REPLY_BYTES`] of the reply and of each
//! context the product sent ([`assay_core::answer::clip`]); assertions and the judge read them
//! whole.
//!
//! A bank whose every case computes no metric (`[answer] metrics = []`, or each case's own
//! `metrics: []`) needs no judge: none is built, no judge's API key is asked for, and the run
//! says no judge was used.

use std::collections::BTreeMap;
use std::sync::Arc;

use assay_core::UserState;
use assay_core::answer::{
    AnswerCase, AnswerCaseResult, ContextItem, ContextSource, Metric, score_case,
};
use assay_core::assertion::Output;

use crate::HarnessError;
pub use assay_project::answer_case::{assertions, validate_case};
use assay_project::engine::ProviderCalls;
use assay_project::settings::ProjectSettings;

pub mod agree;
pub mod context;
pub mod judge;

/// What the product is asked for one answer case.
#[derive(Debug, Clone, Copy)]
pub struct AnswerAsk<'a> {
    /// The user's message.
    pub message: &'a str,
    /// The user's state.
    pub user_state: &'a UserState,
    /// The audience.
    pub audience: &'a str,
    /// The context assay's pipeline selected, in rank order.
    pub context: &'a [ContextItem],
}

/// The product's reply to one answer case.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnswerReply {
    /// The reply's text.
    pub text: String,
    /// The contexts the product says it actually used (judged instead of the pipeline's when
    /// given).
    pub contexts: Option<Vec<ContextItem>>,
    /// How long the product took, in milliseconds.
    pub latency_ms: f64,
    /// What its model calls cost, in US dollars, where known.
    pub cost_usd: Option<f64>,
    /// `(agent, output)` in the order the product's agents ran, when it says.
    pub steps: Vec<(String, String)>,
    /// The tools the product says it called, in order (ids `call-1`, `call-2`, …); `None`
    /// when it does not say. A case's `trajectory:` is checked against them.
    pub tool_calls: Option<Vec<assay_core::simulation::ToolCallRecord>>,
}

/// The product under test for the answer bank.
///
/// An `Err` is an infrastructure error: the case is recorded as an error, never scored.
#[async_trait::async_trait]
pub trait AnswerSystem: Send + Sync {
    /// The product in words (for the run's setup and logs).
    fn describe(&self) -> String;
    /// Whether cases may run concurrently.
    fn stateless(&self) -> bool;
    /// Asks the product.
    async fn respond(&self, ask: &AnswerAsk<'_>) -> Result<AnswerReply, String>;
    /// Stops what the product keeps running between cases (a worker's processes), at the
    /// end of the bank.
    async fn close(&self) {}
}

/// Where an answer case's context comes from: assay's own pipeline, as `assay retrieve`
/// builds it.
#[async_trait::async_trait]
pub trait ContextProvider: Send + Sync {
    /// The context for `message`, in the order the pipeline loads it.
    async fn context(
        &self,
        message: &str,
        user_state: &UserState,
        audience: &str,
    ) -> Result<Vec<ContextItem>, String>;

    /// Why `entity` is not an entity the knowledge base holds (with the closest id that is),
    /// or `None` when it is: what a product's `contexts` are checked against.
    fn unknown_entity(&self, entity: &str) -> Option<String>;
}

/// Embeds texts for answer relevancy (the project's embedder, through the call wrapper).
#[async_trait::async_trait]
pub trait TextEmbedder: Send + Sync {
    /// One vector per text, in order.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String>;
}

/// `[answer]` as a run uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct AnswerConfig {
    /// The metrics computed by default.
    pub metrics: Vec<Metric>,
    /// Minimum score per metric (a case's own `minimum` wins).
    pub minimum: BTreeMap<Metric, f64>,
    /// How metrics and assertions weigh in a case's score.
    pub weights: assay_core::answer::ScoreWeights,
    /// Questions the judge reads off a reply for answer relevancy (Ragas' `strictness`).
    pub relevancy_questions: usize,
    /// Cases in flight at once (for a stateless product).
    pub concurrency: usize,
}

impl Default for AnswerConfig {
    fn default() -> Self {
        AnswerConfig {
            metrics: Metric::ALL.to_vec(),
            minimum: BTreeMap::new(),
            weights: assay_core::answer::ScoreWeights::default(),
            relevancy_questions: 3,
            concurrency: 4,
        }
    }
}

/// Builds the product for a run from the project's settings and the run's call wrapper (so
/// the product's model calls share the run's limits, cache and accounting). The caller supplies
/// it: the `assay` binary and the server build the `[optimize]` target with `assay-experiment`,
/// which sits above this crate.
#[derive(Clone)]
pub struct AnswerFactory(pub Arc<AnswerBuild>);

/// What an [`AnswerFactory`] calls.
pub type AnswerBuild = dyn Fn(
        &ProjectSettings,
        &ProviderCalls,
        &dyn Fn(&str) -> Option<String>,
    ) -> Result<Arc<dyn AnswerSystem>, HarnessError>
    + Send
    + Sync;

impl std::fmt::Debug for AnswerFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerFactory(..)")
    }
}

impl PartialEq for AnswerFactory {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Everything the answer bank needs: the product, the context, the judge and the settings.
#[derive(Clone)]
pub struct AnswerBackend {
    /// The product.
    pub system: Arc<dyn AnswerSystem>,
    /// The pipeline's context.
    pub context: Arc<dyn ContextProvider>,
    /// The judge of the metrics; `None` when no case computes a metric.
    pub judge: Option<judge::AnswerJudge>,
    /// The settings.
    pub config: AnswerConfig,
}

impl AnswerBackend {
    /// The product and the judge, in words (the run's setup; what a resumed run must match).
    pub fn describe(&self) -> String {
        match &self.judge {
            Some(judge) => format!(
                "{}, judged by {}",
                self.system.describe(),
                judge.model.model()
            ),
            None => format!(
                "{}, no judge (every metric is off: assertions and trajectory only)",
                self.system.describe()
            ),
        }
    }

    /// Whether any of `cases` computes a metric (its own `metrics`, else `[answer] metrics`):
    /// only then is a judge built.
    pub fn needs_judge<'a>(
        default: &[Metric],
        cases: impl IntoIterator<Item = &'a AnswerCase>,
    ) -> bool {
        cases
            .into_iter()
            .any(|c| !c.metrics.as_deref().unwrap_or(default).is_empty())
    }

    /// Builds the answer bank's backend for a run: the product from `factory`, the context
    /// from the project's pipeline (embeddings brought up to date, as `assay retrieve` does),
    /// the judge `[answer] judge_model` and answer relevancy's embedder, every call behind
    /// `calls`. No judge is built (and no judge's key needed) when no case of the bank computes
    /// a metric.
    pub async fn build(
        project: &assay_project::project::Project,
        store: &assay_project::engine::OpenStore,
        kb: &dyn assay_kb::KnowledgeBase,
        embedder_flag: Option<&str>,
        calls: &ProviderCalls,
        env: &dyn Fn(&str) -> Option<String>,
        factory: &AnswerFactory,
    ) -> Result<AnswerBackend, HarnessError> {
        use assay_project::engine;
        let settings = &project.settings;
        let system = (factory.0)(settings, calls, env)?;
        let wants_judge = AnswerBackend::needs_judge(
            &settings.answer.metrics,
            project.banks.answer.iter().map(|c| &c.case),
        );
        let model = if wants_judge {
            let raw = engine::build_chat_model(
                settings,
                &settings.answer.judge_model,
                "[answer] judge_model",
                env,
            )?;
            Some(calls.chat("judge", raw))
        } else {
            None
        };
        let (pipeline, embedder) =
            pipeline_context(project, store, kb, embedder_flag, calls, env).await?;
        let a = &settings.answer;
        Ok(AnswerBackend {
            system,
            context: pipeline,
            judge: model.map(|model| judge::AnswerJudge {
                model,
                embedder: Some(Arc::new(context::QueryEmbedder(embedder))),
                max_tokens: a.judge_max_tokens,
            }),
            config: AnswerConfig {
                metrics: a.metrics.clone(),
                minimum: a.minimum.clone(),
                weights: a.score_weights(),
                relevancy_questions: a.relevancy_questions,
                concurrency: a.concurrency,
            },
        })
    }
}

impl AnswerBackend {
    /// The product from `factory` and the context of the project's pipeline (embeddings
    /// brought up to date, as `assay retrieve` does), without a judge: what the red team asks.
    /// Also the embedder, behind `calls`.
    pub async fn product(
        project: &assay_project::project::Project,
        store: &assay_project::engine::OpenStore,
        kb: &dyn assay_kb::KnowledgeBase,
        embedder_flag: Option<&str>,
        calls: &ProviderCalls,
        env: &dyn Fn(&str) -> Option<String>,
        factory: &AnswerFactory,
    ) -> Result<
        (
            Arc<dyn AnswerSystem>,
            Arc<dyn ContextProvider>,
            Arc<dyn assay_providers::Embedder>,
        ),
        HarnessError,
    > {
        let system = (factory.0)(&project.settings, calls, env)?;
        let (context, embedder) =
            pipeline_context(project, store, kb, embedder_flag, calls, env).await?;
        Ok((system, context, embedder))
    }
}

/// The project's pipeline as the context of answer cases, and its embedder behind `calls`.
async fn pipeline_context(
    project: &assay_project::project::Project,
    store: &assay_project::engine::OpenStore,
    kb: &dyn assay_kb::KnowledgeBase,
    embedder_flag: Option<&str>,
    calls: &ProviderCalls,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Arc<dyn ContextProvider>, Arc<dyn assay_providers::Embedder>), HarnessError> {
    use assay_project::engine;
    let settings = &project.settings;
    let choice = engine::choose_embedder(settings, embedder_flag, env)?;
    let embedder = calls.embedder(engine::build_embedder(&choice)?);
    let config = engine::retrieval_config(settings, &choice);
    let (pipeline, _, _) =
        engine::prepare_search_pipeline(store, kb, project, embedder.as_ref(), config).await?;
    let context: Arc<dyn ContextProvider> = Arc::new(context::PipelineContext {
        pipeline: Arc::new(pipeline),
        embedder: embedder.clone(),
    });
    Ok((context, embedder))
}

/// Runs one answer case: context, reply, judge, assertions, score (see the module docs). Never
/// fails: an infrastructure error is the result's `error`.
pub async fn run_case(backend: &AnswerBackend, case: &AnswerCase) -> AnswerCaseResult {
    let mut result = AnswerCaseResult {
        test_id: case.test_id.clone(),
        name: case.name.clone(),
        topics: case.topics.clone(),
        message: case.message.clone(),
        reference: case.reference.clone(),
        is_critical: case.is_critical,
        ..AnswerCaseResult::default()
    };
    if let Err(e) = run_into(backend, case, &mut result).await {
        result.error = Some(e);
    }
    score_case(&mut result, &backend.config.weights);
    result
}

async fn run_into(
    backend: &AnswerBackend,
    case: &AnswerCase,
    result: &mut AnswerCaseResult,
) -> Result<(), String> {
    let assertions = assertions(case)?;
    let audience = assay_project::retrieve::audience(case.user_type.as_deref(), &case.user_state);
    let mut context = backend
        .context
        .context(&case.message, &case.user_state, &audience)
        .await
        .map_err(|e| format!("retrieving the context: {e}"))?;
    assay_core::answer::apply_plants(&mut context, &case.plant);
    let reply = backend
        .system
        .respond(&AnswerAsk {
            message: &case.message,
            user_state: &case.user_state,
            audience: &audience,
            context: &context,
        })
        .await
        .map_err(|e| format!("the product failed: {e}"))?;
    result.reply = Some(assay_core::answer::clip(&reply.text));
    result.latency_ms = Some((reply.latency_ms * 10.0).round() / 10.0);
    result.cost_usd = reply.cost_usd;
    if let Some(used) = &reply.contexts {
        // A context the product says it used must be one the knowledge base holds: one it
        // cannot be told apart from (an entity renamed, retired or made up) is never judged.
        for (i, c) in used.iter().enumerate() {
            if let Some(why) = c
                .entity
                .as_deref()
                .and_then(|e| backend.context.unknown_entity(e))
            {
                result.contexts = clipped(used);
                result.contexts_from = ContextSource::Target;
                return Err(format!("the product's reply: contexts[{i}].entity: {why}"));
            }
        }
    }
    (result.contexts, result.contexts_from) = match reply.contexts {
        Some(used) => (used, ContextSource::Target),
        None => (context, ContextSource::Pipeline),
    };
    if let Some(set) = &assertions {
        result.assertions = Some(set.evaluate(&Output {
            text: &reply.text,
            latency_ms: Some(reply.latency_ms),
            cost_usd: reply.cost_usd,
        }));
    }
    if let Some(rules) = &case.trajectory {
        result.trajectory = assay_core::trajectory::evaluate_reply(
            rules,
            &case.message,
            &reply.text,
            reply.tool_calls.as_deref(),
        );
    }
    let metrics: Vec<Metric> = case
        .metrics
        .clone()
        .unwrap_or_else(|| backend.config.metrics.clone());
    if metrics.is_empty() {
        keep_clipped(result);
        return Ok(());
    }
    let Some(judge) = &backend.judge else {
        keep_clipped(result);
        return Err(format!(
            "judge: the case computes {} but this run built no judge",
            metrics
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    };
    let input = judge::JudgeInput {
        question: &case.message,
        reply: &reply.text,
        contexts: &result.contexts,
        reference: case.reference.as_deref(),
    };
    let judged = judge
        .judge(&input, &metrics, backend.config.relevancy_questions)
        .await;
    keep_clipped(result);
    let mut outcomes = judged.map_err(|e| format!("judge: {e}"))?;
    for (metric, outcome) in &mut outcomes {
        outcome.minimum = case
            .minimum
            .get(metric)
            .or_else(|| backend.config.minimum.get(metric))
            .copied();
    }
    result.metrics = outcomes;
    Ok(())
}

/// The contexts as a result keeps them: each text clipped ([`assay_core::answer::clip`]).
fn clipped(contexts: &[ContextItem]) -> Vec<ContextItem> {
    contexts
        .iter()
        .map(|c| ContextItem {
            entity: c.entity.clone(),
            text: assay_core::answer::clip(&c.text),
        })
        .collect()
}

/// Clips the contexts a result keeps, once the judge has read them whole (a context the
/// product sent can be as long as its reply).
fn keep_clipped(result: &mut AnswerCaseResult) {
    if result.contexts_from == ContextSource::Target {
        result.contexts = clipped(&result.contexts);
    }
}

#[cfg(test)]
#[path = "trajectory_tests.rs"]
mod trajectory_tests;

#[cfg(test)]
#[path = "reply_tests.rs"]
mod reply_tests;
