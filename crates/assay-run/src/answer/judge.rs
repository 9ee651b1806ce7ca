//! The grounded-answer judge: the model calls behind each [`Metric`] of an answer case, after
//! Ragas' algorithms (docs/answers.md, "How each metric is computed", says where assay differs).
//!
//! Every call goes through [`ask_structured`] at temperature 0 with a JSON schema and a check
//! of its own (one verdict per claim, per context; entities only from the contexts shown), so a
//! reply that cannot be used is corrected or becomes a [`JudgeFailure`], never a score of 0 or
//! NaN. The formulas are [`assay_core::answer::metrics`]'; this module only gathers verdicts.
//!
//! | metric | calls | verdicts |
//! |---|---|---|
//! | faithfulness | extract the reply's claims, then judge them against the contexts | one per claim, with the supporting entity |
//! | answer relevancy | questions the reply answers, with a noncommittal flag; then embeddings | cosine of each with the question asked |
//! | context precision | usefulness of each context, in rank order, against the reference (else the reply) | one per context |
//! | context recall | split the reference into claims and attribute each to the contexts | one per claim, with the entity |
//!
//! A metric that does not apply (no reference for recall, no contexts, no embedder, a reply
//! with no claims) gets a [`MetricOutcome`] whose score is `None` and whose note says why.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use assay_core::answer::{
    ClaimVerdict, ContextItem, ContextVerdict, GeneratedQuestion, Metric, MetricOutcome, metrics,
};
use assay_providers::{
    ChatModel, ChatRequest, DEFAULT_STRUCTURED_RETRIES, ProviderError, ProviderErrorKind,
    SchemaCheck, ask_structured,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::TextEmbedder;

/// Why a metric has no score: there is no reference answer.
pub const NOTE_NO_REFERENCE: &str = "no reference answer";
/// Why context precision has no score: there is no context to rank.
pub const NOTE_NO_CONTEXT: &str = "no context to judge against";
/// Why every claim is unsupported when there is no context (faithfulness and context recall
/// are then 0: nothing can support a claim, so an answer written without context is not
/// grounded, where it would escape as "does not apply").
pub const REASON_NO_CONTEXT: &str = "no context was given, so nothing supports it";
/// Why faithfulness has no score: the judge found no claim in the reply.
pub const NOTE_NO_CLAIMS: &str = "the reply makes no claims";
/// Why context recall has no score: the judge found no claim in the reference.
pub const NOTE_NO_REFERENCE_CLAIMS: &str = "the reference answer makes no claims";
/// Why answer relevancy has no score: no embedder is configured.
pub const NOTE_NO_EMBEDDER: &str = "no embedder to compare questions with";
/// Why a metric has no score: the reply is empty.
pub const NOTE_EMPTY_REPLY: &str = "the reply is empty";
/// Context precision without a reference: Ragas' "without reference" variant.
pub const NOTE_AGAINST_REPLY: &str =
    "no reference answer: each context was judged against the reply instead";

/// The judge of an answer case's metrics.
#[derive(Clone)]
pub struct AnswerJudge {
    /// The judge model, already wrapped by the caller (cache, limits, accounting).
    pub model: Arc<dyn ChatModel>,
    /// The embedder for answer relevancy; `None`: that metric does not apply (its note says
    /// why).
    pub embedder: Option<Arc<dyn TextEmbedder>>,
    /// The most tokens a judge reply may have.
    pub max_tokens: u32,
}

impl fmt::Debug for AnswerJudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnswerJudge")
            .field("model", &self.model.model())
            .field("embedder", &self.embedder.is_some())
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

/// What the judge looks at for one case.
#[derive(Debug, Clone, Copy)]
pub struct JudgeInput<'a> {
    /// The user's message.
    pub question: &'a str,
    /// The product's reply.
    pub reply: &'a str,
    /// The contexts, in rank order.
    pub contexts: &'a [ContextItem],
    /// The case's reference answer, if any.
    pub reference: Option<&'a str>,
}

/// A metric that could not be computed: a judge reply unusable after its corrective turns, or
/// a provider (chat or embedder) error. The case is an error, never a score.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{metric}: {reason}")]
pub struct JudgeFailure {
    /// The metric being computed.
    pub metric: Metric,
    /// What failed, in words (the step and the provider's or the check's message).
    pub reason: String,
    /// Whether a provider failed (an HTTP or embedder error) rather than the judge's replies
    /// being unusable.
    pub is_provider: bool,
}

impl JudgeFailure {
    fn new(metric: Metric, step: &str, error: &ProviderError) -> JudgeFailure {
        JudgeFailure {
            metric,
            reason: format!("{step}: {error}"),
            is_provider: !matches!(error.kind(), ProviderErrorKind::Malformed { .. }),
        }
    }
}

impl AnswerJudge {
    /// Computes each metric in `metrics` (answer relevancy reads `relevancy_questions`
    /// questions off the reply, at least one).
    ///
    /// `Err` when a judge reply cannot be used after [`ask_structured`]'s corrective turns, or
    /// a provider fails; the failure names the metric and what failed (the first one, in the
    /// order of `metrics`). Metrics that do not apply get a score of `None` and a note.
    pub async fn judge(
        &self,
        input: &JudgeInput<'_>,
        metrics: &[Metric],
        relevancy_questions: usize,
    ) -> Result<BTreeMap<Metric, MetricOutcome>, JudgeFailure> {
        let mut wanted: Vec<Metric> = Vec::with_capacity(metrics.len());
        for m in metrics {
            if !wanted.contains(m) {
                wanted.push(*m);
            }
        }
        let outcomes = futures_util::future::join_all(
            wanted
                .iter()
                .map(|&m| self.metric(m, input, relevancy_questions)),
        )
        .await;
        let mut out = BTreeMap::new();
        for (metric, outcome) in wanted.into_iter().zip(outcomes) {
            out.insert(metric, outcome?);
        }
        Ok(out)
    }

    /// Verdicts on `claims` against `contexts`, one per claim in order (used by faithfulness
    /// after extraction, and by `assay judge agree` on human-labelled claims). A verdict's
    /// entity is one of the contexts' entities, and only a supported claim keeps one.
    pub async fn verify_claims(
        &self,
        claims: &[String],
        contexts: &[ContextItem],
    ) -> Result<Vec<ClaimVerdict>, JudgeFailure> {
        if claims.is_empty() {
            return Ok(Vec::new());
        }
        let entities = entities(contexts);
        let check = SchemaCheck::new(
            "claim_verdicts",
            json!({
                "type": "object", "additionalProperties": false, "required": ["verdicts"],
                "properties": {"verdicts": {"type": "array", "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["claim_index", "supported", "entity", "reason"],
                    "properties": {
                        "claim_index": {"type": "integer", "minimum": 1},
                        "supported": {"type": "boolean"},
                        "entity": entity_schema(&entities),
                        "reason": {"type": "string"}
                    }}}}
            }),
        )
        .map_err(|e| JudgeFailure::new(Metric::Faithfulness, "the verdict schema", &e))?;
        let mut user = String::new();
        section(&mut user, "Contexts", &render_contexts(contexts));
        section(&mut user, "Claims", &render_claims(claims));
        user.push_str(&format!(
            "Give exactly one verdict for each of the {} claims, by its number.",
            claims.len()
        ));
        let n = claims.len();
        let reply: VerdictsReply = self
            .ask(VERIFY_SYSTEM, user, &check, &|r: &VerdictsReply| {
                check_indices(r.verdicts.iter().map(|v| v.claim_index), n, "claim")?;
                for v in &r.verdicts {
                    check_entity(v.entity.as_deref(), &entities)?;
                }
                Ok(())
            })
            .await
            .map_err(|e| JudgeFailure::new(Metric::Faithfulness, "judging the claims", &e))?;
        let mut by_index: BTreeMap<usize, Verdict> = reply
            .verdicts
            .into_iter()
            .map(|v| (v.claim_index, v))
            .collect();
        Ok(claims
            .iter()
            .enumerate()
            .map(|(i, claim)| {
                let v = by_index.remove(&(i + 1)).unwrap_or_default();
                ClaimVerdict {
                    claim: claim.clone(),
                    supported: v.supported,
                    entity: v.entity.filter(|_| v.supported),
                    reason: v.reason.trim().to_owned(),
                }
            })
            .collect())
    }

    /// The claims a text makes (a reply, or a reference with no context to attribute it to),
    /// asked for with the extraction prompt.
    async fn claims_of(&self, text: &str, question: &str) -> Result<Vec<String>, ProviderError> {
        let check = SchemaCheck::new(
            "reply_claims",
            json!({
                "type": "object", "additionalProperties": false, "required": ["claims"],
                "properties": {"claims": {"type": "array", "items": {"type": "string"}}}
            }),
        )?;
        let mut user = String::new();
        section(&mut user, "Question", question);
        section(&mut user, "Reply", text);
        user.push_str("List the reply's claims.");
        let reply: ClaimsReply = self
            .ask(EXTRACT_SYSTEM, user, &check, &|r: &ClaimsReply| {
                no_blank(r.claims.iter().map(String::as_str), "claim")
            })
            .await?;
        Ok(reply.claims.iter().map(|c| c.trim().to_owned()).collect())
    }

    async fn metric(
        &self,
        metric: Metric,
        input: &JudgeInput<'_>,
        relevancy_questions: usize,
    ) -> Result<MetricOutcome, JudgeFailure> {
        match metric {
            Metric::Faithfulness => self.faithfulness(input).await,
            Metric::AnswerRelevancy => self.answer_relevancy(input, relevancy_questions).await,
            Metric::ContextPrecision => self.context_precision(input).await,
            Metric::ContextRecall => self.context_recall(input).await,
        }
    }

    async fn faithfulness(&self, input: &JudgeInput<'_>) -> Result<MetricOutcome, JudgeFailure> {
        if input.reply.trim().is_empty() {
            return Ok(not_applicable(NOTE_EMPTY_REPLY));
        }
        let claims = self
            .claims_of(input.reply, input.question)
            .await
            .map_err(|e| {
                JudgeFailure::new(Metric::Faithfulness, "extracting the reply's claims", &e)
            })?;
        if claims.is_empty() {
            return Ok(not_applicable(NOTE_NO_CLAIMS));
        }
        let verdicts = if input.contexts.is_empty() {
            unsupported(&claims)
        } else {
            self.verify_claims(&claims, input.contexts).await?
        };
        let supported: Vec<bool> = verdicts.iter().map(|v| v.supported).collect();
        Ok(MetricOutcome {
            score: metrics::faithfulness(&supported),
            claims: verdicts,
            ..MetricOutcome::default()
        })
    }

    async fn answer_relevancy(
        &self,
        input: &JudgeInput<'_>,
        questions: usize,
    ) -> Result<MetricOutcome, JudgeFailure> {
        const M: Metric = Metric::AnswerRelevancy;
        if input.reply.trim().is_empty() {
            return Ok(not_applicable(NOTE_EMPTY_REPLY));
        }
        let Some(embedder) = &self.embedder else {
            return Ok(not_applicable(NOTE_NO_EMBEDDER));
        };
        let n = questions.max(1);
        let check = SchemaCheck::new(
            "reply_questions",
            json!({
                "type": "object", "additionalProperties": false, "required": ["questions"],
                "properties": {"questions": {"type": "array", "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["question", "noncommittal"],
                    "properties": {"question": {"type": "string"},
                                   "noncommittal": {"type": "boolean"}}}}}
            }),
        )
        .map_err(|e| JudgeFailure::new(M, "the questions schema", &e))?;
        let mut user = String::new();
        section(&mut user, "Reply", input.reply);
        user.push_str(&format!(
            "Write exactly {n} question(s) that this reply answers, each with its noncommittal \
             flag."
        ));
        let reply: QuestionsReply = self
            .ask(RELEVANCY_SYSTEM, user, &check, &|r: &QuestionsReply| {
                if r.questions.len() != n {
                    return Err(format!(
                        "{} question(s) were given, but exactly {n} were asked for",
                        r.questions.len()
                    ));
                }
                no_blank(r.questions.iter().map(|q| q.question.as_str()), "question")
            })
            .await
            .map_err(|e| JudgeFailure::new(M, "reading questions off the reply", &e))?;
        let generated: Vec<String> = reply
            .questions
            .iter()
            .map(|q| q.question.trim().to_owned())
            .collect();
        // Ragas: the reply is noncommittal when every sample says so.
        let noncommittal = reply.questions.iter().all(|q| q.noncommittal);
        let mut texts = Vec::with_capacity(n + 1);
        texts.push(input.question.to_owned());
        texts.extend(generated.iter().cloned());
        let vectors = embedder.embed(&texts).await.map_err(|e| JudgeFailure {
            metric: M,
            reason: format!("embedding the questions: {e}"),
            is_provider: true,
        })?;
        if vectors.len() != texts.len() {
            return Err(JudgeFailure {
                metric: M,
                reason: format!(
                    "embedding the questions: {} vector(s) for {} text(s)",
                    vectors.len(),
                    texts.len()
                ),
                is_provider: true,
            });
        }
        let asked = &vectors[0];
        let questions: Vec<GeneratedQuestion> = generated
            .into_iter()
            .zip(&vectors[1..])
            .map(|(question, v)| GeneratedQuestion {
                question,
                similarity: assay_providers::cosine_f64(asked, v),
            })
            .collect();
        let similarities: Vec<f64> = questions.iter().map(|q| q.similarity).collect();
        Ok(MetricOutcome {
            score: metrics::answer_relevancy(&similarities, noncommittal),
            questions,
            noncommittal,
            ..MetricOutcome::default()
        })
    }

    async fn context_precision(
        &self,
        input: &JudgeInput<'_>,
    ) -> Result<MetricOutcome, JudgeFailure> {
        const M: Metric = Metric::ContextPrecision;
        if input.contexts.is_empty() {
            return Ok(not_applicable(NOTE_NO_CONTEXT));
        }
        let reference = input.reference.filter(|r| !r.trim().is_empty());
        if reference.is_none() && input.reply.trim().is_empty() {
            return Ok(not_applicable(NOTE_EMPTY_REPLY));
        }
        let n = input.contexts.len();
        let check = SchemaCheck::new(
            "context_usefulness",
            json!({
                "type": "object", "additionalProperties": false, "required": ["verdicts"],
                "properties": {"verdicts": {"type": "array", "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["rank", "useful", "reason"],
                    "properties": {"rank": {"type": "integer", "minimum": 1},
                                   "useful": {"type": "boolean"},
                                   "reason": {"type": "string"}}}}}
            }),
        )
        .map_err(|e| JudgeFailure::new(M, "the usefulness schema", &e))?;
        let mut user = String::new();
        section(&mut user, "Question", input.question);
        match reference {
            Some(r) => section(&mut user, "Reference", r),
            None => section(&mut user, "Reply", input.reply),
        }
        section(&mut user, "Contexts", &render_contexts(input.contexts));
        user.push_str(&format!(
            "Give exactly one verdict for each of the {n} contexts, by its rank, on whether it \
             was useful in arriving at the {}.",
            if reference.is_some() {
                "reference answer"
            } else {
                "reply"
            }
        ));
        let reply: UsefulnessReply = self
            .ask(PRECISION_SYSTEM, user, &check, &|r: &UsefulnessReply| {
                check_indices(r.verdicts.iter().map(|v| v.rank), n, "context")
            })
            .await
            .map_err(|e| JudgeFailure::new(M, "judging each context's usefulness", &e))?;
        let mut by_rank: BTreeMap<usize, Usefulness> =
            reply.verdicts.into_iter().map(|v| (v.rank, v)).collect();
        let contexts: Vec<ContextVerdict> = input
            .contexts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let v = by_rank.remove(&(i + 1)).unwrap_or_default();
                ContextVerdict {
                    rank: i + 1,
                    entity: c.entity.clone(),
                    useful: v.useful,
                    reason: v.reason.trim().to_owned(),
                }
            })
            .collect();
        let useful: Vec<bool> = contexts.iter().map(|c| c.useful).collect();
        Ok(MetricOutcome {
            score: metrics::context_precision(&useful),
            note: reference.is_none().then(|| NOTE_AGAINST_REPLY.to_owned()),
            contexts,
            ..MetricOutcome::default()
        })
    }

    async fn context_recall(&self, input: &JudgeInput<'_>) -> Result<MetricOutcome, JudgeFailure> {
        const M: Metric = Metric::ContextRecall;
        let Some(reference) = input.reference.filter(|r| !r.trim().is_empty()) else {
            return Ok(not_applicable(NOTE_NO_REFERENCE));
        };
        if input.contexts.is_empty() {
            // Nothing to attribute to: the reference's claims, each not found.
            let claims = self
                .claims_of(reference, input.question)
                .await
                .map_err(|e| JudgeFailure::new(M, "splitting the reference into claims", &e))?;
            if claims.is_empty() {
                return Ok(not_applicable(NOTE_NO_REFERENCE_CLAIMS));
            }
            let verdicts = unsupported(&claims);
            let found: Vec<bool> = verdicts.iter().map(|v| v.supported).collect();
            return Ok(MetricOutcome {
                score: metrics::context_recall(&found),
                claims: verdicts,
                ..MetricOutcome::default()
            });
        }
        let entities = entities(input.contexts);
        let check = SchemaCheck::new(
            "reference_claims",
            json!({
                "type": "object", "additionalProperties": false, "required": ["claims"],
                "properties": {"claims": {"type": "array", "items": {
                    "type": "object", "additionalProperties": false,
                    "required": ["claim", "attributed", "entity", "reason"],
                    "properties": {"claim": {"type": "string"},
                                   "attributed": {"type": "boolean"},
                                   "entity": entity_schema(&entities),
                                   "reason": {"type": "string"}}}}}
            }),
        )
        .map_err(|e| JudgeFailure::new(M, "the attribution schema", &e))?;
        let mut user = String::new();
        section(&mut user, "Question", input.question);
        section(&mut user, "Reference", reference);
        section(&mut user, "Contexts", &render_contexts(input.contexts));
        user.push_str(
            "Split the reference answer into claims and say of each whether the contexts hold it.",
        );
        let reply: AttributionReply = self
            .ask(RECALL_SYSTEM, user, &check, &|r: &AttributionReply| {
                no_blank(r.claims.iter().map(|c| c.claim.as_str()), "claim")?;
                for c in &r.claims {
                    check_entity(c.entity.as_deref(), &entities)?;
                }
                Ok(())
            })
            .await
            .map_err(|e| {
                JudgeFailure::new(M, "attributing the reference's claims to the contexts", &e)
            })?;
        if reply.claims.is_empty() {
            return Ok(not_applicable(NOTE_NO_REFERENCE_CLAIMS));
        }
        let claims: Vec<ClaimVerdict> = reply
            .claims
            .into_iter()
            .map(|c| ClaimVerdict {
                claim: c.claim.trim().to_owned(),
                supported: c.attributed,
                entity: c.entity.filter(|_| c.attributed),
                reason: c.reason.trim().to_owned(),
            })
            .collect();
        let found: Vec<bool> = claims.iter().map(|c| c.supported).collect();
        Ok(MetricOutcome {
            score: metrics::context_recall(&found),
            claims,
            ..MetricOutcome::default()
        })
    }

    /// One structured call at temperature 0, tagged with the judge's model name on failure.
    async fn ask<T: DeserializeOwned>(
        &self,
        system: &str,
        user: String,
        check: &SchemaCheck,
        valid: &(dyn Fn(&T) -> Result<(), String> + Sync),
    ) -> Result<T, ProviderError> {
        let mut request = ChatRequest::new(Some(system.to_owned()), user, self.max_tokens);
        request.temperature = Some(0.0);
        ask_structured::<T>(
            self.model.as_ref(),
            request,
            check,
            DEFAULT_STRUCTURED_RETRIES,
            valid,
        )
        .await
        .map(|s| s.value)
        .map_err(|e| {
            if e.model().is_some() {
                e
            } else {
                e.with_model(self.model.model().to_owned())
            }
        })
    }
}

#[derive(Debug, Deserialize)]
struct ClaimsReply {
    claims: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Verdict {
    claim_index: usize,
    supported: bool,
    entity: Option<String>,
    reason: String,
}

#[derive(Debug, Deserialize)]
struct VerdictsReply {
    verdicts: Vec<Verdict>,
}

#[derive(Debug, Deserialize)]
struct Question {
    question: String,
    noncommittal: bool,
}

#[derive(Debug, Deserialize)]
struct QuestionsReply {
    questions: Vec<Question>,
}

#[derive(Debug, Default, Deserialize)]
struct Usefulness {
    rank: usize,
    useful: bool,
    reason: String,
}

#[derive(Debug, Deserialize)]
struct UsefulnessReply {
    verdicts: Vec<Usefulness>,
}

#[derive(Debug, Deserialize)]
struct Attribution {
    claim: String,
    attributed: bool,
    entity: Option<String>,
    reason: String,
}

#[derive(Debug, Deserialize)]
struct AttributionReply {
    claims: Vec<Attribution>,
}

fn not_applicable(note: &str) -> MetricOutcome {
    MetricOutcome {
        note: Some(note.to_owned()),
        ..MetricOutcome::default()
    }
}

/// The contexts' distinct entity ids, in rank order.
fn entities(contexts: &[ContextItem]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    contexts
        .iter()
        .filter_map(|c| c.entity.clone())
        .filter(|e| seen.insert(e.clone()))
        .collect()
}

/// An entity field: one of `entities`, or null.
fn entity_schema(entities: &[String]) -> Value {
    if entities.is_empty() {
        json!({"type": "null"})
    } else {
        json!({"anyOf": [{"type": "string", "enum": entities}, {"type": "null"}]})
    }
}

fn check_entity(entity: Option<&str>, entities: &[String]) -> Result<(), String> {
    match entity {
        Some(e) if !entities.iter().any(|known| known == e) => Err(format!(
            "entity `{e}` is not among the contexts' entities ({})",
            if entities.is_empty() {
                "they name none: use null".to_owned()
            } else {
                entities.join(", ")
            }
        )),
        _ => Ok(()),
    }
}

/// Each of `1..=n` exactly once.
fn check_indices(found: impl Iterator<Item = usize>, n: usize, what: &str) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    for i in found {
        if i == 0 || i > n {
            return Err(format!(
                "a verdict for {what} {i}, but there are only {n} {what}s, numbered 1 to {n}"
            ));
        }
        if !seen.insert(i) {
            return Err(format!("two verdicts for {what} {i}: give exactly one"));
        }
    }
    let missing: Vec<String> = (1..=n)
        .filter(|i| !seen.contains(i))
        .map(|i| i.to_string())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "no verdict for {what}(s) {}: give one for each of the {n}",
            missing.join(", ")
        ))
    }
}

fn no_blank<'a>(texts: impl Iterator<Item = &'a str>, what: &str) -> Result<(), String> {
    for (i, t) in texts.enumerate() {
        if t.trim().is_empty() {
            return Err(format!("{what} {} is empty", i + 1));
        }
    }
    Ok(())
}

/// A prompt section: `## Heading`, the text, a blank line. The scripted judge server
/// (`crates/assay-cli/examples/answer_judge.rs`) reads prompts by these headings.
fn section(out: &mut String, heading: &str, text: &str) {
    out.push_str("## ");
    out.push_str(heading);
    out.push('\n');
    out.push_str(text.trim());
    out.push_str("\n\n");
}

/// `[rank] entity: id` then the text, for each context.
fn render_contexts(contexts: &[ContextItem]) -> String {
    let mut out = String::new();
    for (i, c) in contexts.iter().enumerate() {
        if i > 0 {
            out.push_str("\n\n");
        }
        out.push_str(&format!(
            "[{}] entity: {}\n{}",
            i + 1,
            c.entity.as_deref().unwrap_or("(none)"),
            c.text.trim()
        ));
    }
    out
}

/// `n. claim`, one a line.
fn render_claims(claims: &[String]) -> String {
    claims
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}. {}", i + 1, c.replace('\n', " ")))
        .collect::<Vec<_>>()
        .join("\n")
}

// The prompts. Each system prompt states the task; the user turn carries the material in
// `## ` sections and ends with the instruction for this case.

const EXTRACT_SYSTEM: &str = "You split an assistant's reply into claims. A claim is a short \
statement of one fact that a reader understands without the rest of the reply: replace pronouns \
and phrases such as \"it\", \"they\" or \"that day\" with what they refer to, using the question \
when needed. Cover every fact the reply states, in the reply's order, and do not add facts of \
your own. Greetings, thanks, offers of further help and questions back to the user state no \
fact: leave them out. A reply that states no fact has no claims (an empty list). Answer with \
only the JSON object the schema describes.";

const VERIFY_SYSTEM: &str = "You check claims against context passages. Each passage is \
numbered by rank and names the entity it comes from after `entity:`. A claim is supported only \
when the passages state it or it follows directly from what they state; your own knowledge does \
not count, and a claim that the passages contradict or do not mention is not supported. Give \
one verdict per claim, with the claim's number as `claim_index`: `supported`; `entity`, the \
entity of the passage that supports it, written exactly as after `entity:` (null when the claim \
is not supported or that passage names none); and `reason`, one sentence. Answer with only the \
JSON object the schema describes.";

const RELEVANCY_SYSTEM: &str = "You read an assistant's reply and write the questions a user \
could have asked to get exactly this reply. Write each question as that user would, each one \
different, and answerable by the reply alone. For each, set `noncommittal` to true when the \
reply is evasive, vague or ambiguous, or declines to answer (\"I don't know\", \"I am not sure\", \
\"I can't help with that\"), and to false when it commits to an answer. Answer with only the \
JSON object the schema describes.";

const PRECISION_SYSTEM: &str = "You judge context passages that a retrieval pipeline ranked for \
a question. For each passage, by its rank, say whether it was useful in arriving at the answer \
given (the reference answer, or else the reply): `useful` is true when the passage states \
something the answer relies on, false when it is off the subject or adds nothing the answer \
uses. Give a one-sentence `reason`. Judge each passage on its own, whatever its rank. Answer \
with only the JSON object the schema describes.";

const RECALL_SYSTEM: &str = "You compare a reference answer with context passages. Each passage \
is numbered by rank and names the entity it comes from after `entity:`. Split the reference \
answer into claims: short statements of one fact each, understandable alone (pronouns replaced \
by what they refer to), covering everything it states, in order. For each claim set \
`attributed` to true when the passages state it or it follows directly from them, false \
otherwise (your own knowledge does not count); `entity`, the entity of the passage it comes \
from, written exactly as after `entity:` (null when not attributed or that passage names none); \
and `reason`, one sentence. Answer with only the JSON object the schema describes.";

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;

/// Every claim unsupported, because there is no context to support it.
fn unsupported(claims: &[String]) -> Vec<ClaimVerdict> {
    claims
        .iter()
        .map(|claim| ClaimVerdict {
            claim: claim.clone(),
            supported: false,
            entity: None,
            reason: REASON_NO_CONTEXT.to_owned(),
        })
        .collect()
}
