//! The judge on fixed data (a community garden's plot fees), with a scripted judge model whose
//! replies come from a table keyed by the schema asked for and a text the prompt contains. Each
//! expected score is computed by hand from the metric's definition in docs/answers.md.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use assay_core::answer::{ContextItem, Metric};
use assay_providers::{ChatModel, ChatRequest, ChatResponse, ProviderError, Role};
use async_trait::async_trait;
use serde_json::json;

use super::*;

/// One scripted answer: for a request with `schema` whose first user turn contains `needle`,
/// the reply at the attempt's position in `replies` (the last one again after that).
struct Rule {
    schema: &'static str,
    needle: &'static str,
    replies: Vec<String>,
}

#[derive(Default)]
struct ScriptedJudge {
    rules: Vec<Rule>,
    /// Requests seen: (schema, the whole request).
    seen: Mutex<Vec<(String, ChatRequest)>>,
    /// Answer every request with this provider error.
    down: bool,
}

impl fmt::Debug for ScriptedJudge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ScriptedJudge")
    }
}

impl ScriptedJudge {
    fn on(mut self, schema: &'static str, needle: &'static str, reply: &serde_json::Value) -> Self {
        self.rules.push(Rule {
            schema,
            needle,
            replies: vec![reply.to_string()],
        });
        self
    }

    fn on_text(mut self, schema: &'static str, needle: &'static str, replies: &[&str]) -> Self {
        self.rules.push(Rule {
            schema,
            needle,
            replies: replies.iter().map(|r| (*r).to_owned()).collect(),
        });
        self
    }

    fn calls(&self, schema: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _)| s == schema)
            .count()
    }

    fn requests(&self, schema: &str) -> Vec<ChatRequest> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(s, _)| s == schema)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

#[async_trait]
impl ChatModel for ScriptedJudge {
    fn model(&self) -> &'static str {
        "test/scripted-judge"
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let schema = request
            .output_schema
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default();
        self.seen
            .lock()
            .unwrap()
            .push((schema.clone(), request.clone()));
        if self.down {
            return Err(ProviderError::new(ProviderErrorKind::Connection {
                message: "connection refused".into(),
            }));
        }
        let prompt = &request.messages[0].content;
        let attempt = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count();
        let rule = self
            .rules
            .iter()
            .find(|r| r.schema == schema && prompt.contains(r.needle))
            .ok_or_else(|| ProviderError::config(format!("no scripted reply for {schema}")))?;
        let text = rule.replies[attempt.min(rule.replies.len() - 1)].clone();
        Ok(ChatResponse {
            text,
            ..ChatResponse::default()
        })
    }
}

/// Fixed vectors per text.
struct TableEmbedder(BTreeMap<&'static str, Vec<f32>>);

#[async_trait]
impl TextEmbedder for TableEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, String> {
        texts
            .iter()
            .map(|t| {
                self.0
                    .get(t.as_str())
                    .cloned()
                    .ok_or_else(|| format!("no vector for {t:?}"))
            })
            .collect()
    }
}

const QUESTION: &str = "How much is a plot and when do I pay?";
const REPLY: &str = "A plot costs 40 pounds a year. The fee is due by 1 March. You can pay by \
                     card at the gate. The tool shed opens at 8 am.";
const REFERENCE: &str = "A plot costs 40 pounds a year, due by 1 March. Members who pay late \
                         lose their plot.";
const EVASIVE: &str = "I'm not sure, you would have to ask someone else.";

fn contexts() -> Vec<ContextItem> {
    let item = |entity: &str, text: &str| ContextItem {
        entity: Some(entity.to_owned()),
        text: text.to_owned(),
    };
    vec![
        item(
            "plot-fees",
            "Plot fees are 40 pounds a year and are due by 1 March.",
        ),
        item(
            "water-rota",
            "Members water the shared beds on a weekly rota.",
        ),
        item(
            "tool-shed",
            "The tool shed opens at 8 am and closes at dusk.",
        ),
    ]
}

fn embedder() -> Arc<dyn TextEmbedder> {
    // Against the question asked [1, 0]: cosines 1, 0 and 3/5.
    Arc::new(TableEmbedder(BTreeMap::from([
        (QUESTION, vec![1.0, 0.0]),
        ("How much does a plot cost?", vec![2.0, 0.0]),
        ("When does the tool shed open?", vec![0.0, 5.0]),
        ("When is the plot fee due?", vec![3.0, 4.0]),
        ("Who can tell me about plots?", vec![1.0, 0.0]),
    ])))
}

const FOUR_CLAIMS: [&str; 4] = [
    "A plot costs 40 pounds a year.",
    "The plot fee is due by 1 March.",
    "The plot fee can be paid by card at the gate.",
    "The tool shed opens at 8 am.",
];

fn verdicts_3_of_4() -> serde_json::Value {
    json!({"verdicts": [
        {"claim_index": 1, "supported": true, "entity": "plot-fees", "reason": "stated"},
        {"claim_index": 2, "supported": true, "entity": "plot-fees", "reason": "stated"},
        {"claim_index": 3, "supported": false, "entity": null, "reason": "no passage on paying"},
        {"claim_index": 4, "supported": true, "entity": "tool-shed", "reason": "stated"}
    ]})
}

/// The garden judge: every metric's calls answered for REPLY and REFERENCE.
fn garden_judge() -> ScriptedJudge {
    ScriptedJudge::default()
        .on("reply_claims", REPLY, &json!({"claims": FOUR_CLAIMS}))
        .on("claim_verdicts", FOUR_CLAIMS[2], &verdicts_3_of_4())
        .on(
            "reply_questions",
            REPLY,
            &json!({"questions": [
                {"question": "How much does a plot cost?", "noncommittal": false},
                {"question": "When does the tool shed open?", "noncommittal": false},
                {"question": "When is the plot fee due?", "noncommittal": false}
            ]}),
        )
        .on(
            "context_usefulness",
            "## Reference",
            &json!({"verdicts": [
                {"rank": 1, "useful": true, "reason": "gives the fee and date"},
                {"rank": 2, "useful": false, "reason": "about watering"},
                {"rank": 3, "useful": true, "reason": "the reference relies on it"}
            ]}),
        )
        .on(
            "context_usefulness",
            "## Reply",
            &json!({"verdicts": [
                {"rank": 1, "useful": false, "reason": "not used"},
                {"rank": 2, "useful": true, "reason": "used"},
                {"rank": 3, "useful": true, "reason": "used"}
            ]}),
        )
        .on(
            "reference_claims",
            REFERENCE,
            &json!({"claims": [
                {"claim": "A plot costs 40 pounds a year.", "attributed": true,
                 "entity": "plot-fees", "reason": "stated"},
                {"claim": "The plot fee is due by 1 March.", "attributed": true,
                 "entity": "plot-fees", "reason": "stated"},
                {"claim": "Members who pay late lose their plot.", "attributed": false,
                 "entity": null, "reason": "no passage says so"}
            ]}),
        )
}

fn judge_with(model: Arc<ScriptedJudge>, embedder: Option<Arc<dyn TextEmbedder>>) -> AnswerJudge {
    AnswerJudge {
        model,
        embedder,
        max_tokens: 800,
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

fn input<'a>(
    reply: &'a str,
    contexts: &'a [ContextItem],
    reference: Option<&'a str>,
) -> JudgeInput<'a> {
    JudgeInput {
        question: QUESTION,
        reply,
        contexts,
        reference,
    }
}

fn close(got: Option<f64>, want: f64) {
    let got = got.expect("a score");
    assert!((got - want).abs() < 1e-12, "{got} != {want}");
}

#[test]
fn each_metric_equals_its_hand_computed_value() {
    let model = Arc::new(garden_judge());
    let judge = judge_with(model.clone(), Some(embedder()));
    let ctx = contexts();
    let got = block_on(judge.judge(&input(REPLY, &ctx, Some(REFERENCE)), &Metric::ALL, 3)).unwrap();

    // Faithfulness: 3 of the 4 claims supported = 3/4.
    let f = &got[&Metric::Faithfulness];
    assert_eq!(f.score, Some(3.0 / 4.0));
    assert_eq!(f.note, None);
    let entities: Vec<Option<&str>> = f.claims.iter().map(|c| c.entity.as_deref()).collect();
    assert_eq!(
        entities,
        [
            Some("plot-fees"),
            Some("plot-fees"),
            None,
            Some("tool-shed")
        ]
    );
    assert_eq!(f.claims[2].claim, FOUR_CLAIMS[2]);
    assert!(!f.claims[2].supported);
    assert_eq!(f.claims[2].reason, "no passage on paying");

    // Answer relevancy: cosines 1, 0 and 3/5 with the question asked; mean (1 + 0 + 3/5) / 3
    // = 8/15.
    let r = &got[&Metric::AnswerRelevancy];
    close(r.score, 8.0 / 15.0);
    let sims: Vec<f64> = r.questions.iter().map(|q| q.similarity).collect();
    assert_eq!(sims.len(), 3);
    assert!((sims[0] - 1.0).abs() < 1e-12 && sims[1].abs() < 1e-12);
    assert!((sims[2] - 0.6).abs() < 1e-7, "{sims:?}");
    assert_eq!(r.questions[1].question, "When does the tool shed open?");
    assert!(!r.noncommittal);

    // Context precision: useful at ranks 1 and 3 = (1/1 + 2/3) / 2 = 5/6.
    let p = &got[&Metric::ContextPrecision];
    close(p.score, 5.0 / 6.0);
    assert_eq!(p.note, None);
    let ranks: Vec<(usize, Option<&str>, bool)> = p
        .contexts
        .iter()
        .map(|c| (c.rank, c.entity.as_deref(), c.useful))
        .collect();
    assert_eq!(
        ranks,
        [
            (1, Some("plot-fees"), true),
            (2, Some("water-rota"), false),
            (3, Some("tool-shed"), true)
        ]
    );

    // Context recall: 2 of the reference's 3 claims in the contexts = 2/3.
    let c = &got[&Metric::ContextRecall];
    assert_eq!(c.score, Some(2.0 / 3.0));
    assert_eq!(c.claims[0].entity.as_deref(), Some("plot-fees"));
    assert_eq!(c.claims[2].entity, None);

    // One call per step: extraction, verdicts, questions, usefulness, attribution.
    for schema in [
        "reply_claims",
        "claim_verdicts",
        "reply_questions",
        "context_usefulness",
        "reference_claims",
    ] {
        assert_eq!(model.calls(schema), 1, "{schema}");
    }
}

#[test]
fn the_requests_carry_numbered_contexts_with_entities_and_temperature_zero() {
    let model = Arc::new(garden_judge());
    let judge = judge_with(model.clone(), None);
    let ctx = contexts();
    block_on(judge.judge(
        &input(REPLY, &ctx, Some(REFERENCE)),
        &[Metric::Faithfulness],
        3,
    ))
    .unwrap();
    let verify = &model.requests("claim_verdicts")[0];
    let prompt = &verify.messages[0].content;
    assert!(
        prompt.contains("[1] entity: plot-fees\nPlot fees"),
        "{prompt}"
    );
    assert!(prompt.contains("[3] entity: tool-shed"), "{prompt}");
    assert!(
        prompt.contains("3. The plot fee can be paid by card"),
        "{prompt}"
    );
    assert_eq!(verify.temperature, Some(0.0));
    let schema = &verify.output_schema.as_ref().unwrap().schema;
    let entity = &schema["properties"]["verdicts"]["items"]["properties"]["entity"];
    assert_eq!(
        entity["anyOf"][0]["enum"],
        json!(["plot-fees", "water-rota", "tool-shed"])
    );
}

#[test]
fn without_a_reference_precision_judges_against_the_reply_and_recall_does_not_apply() {
    let judge = judge_with(Arc::new(garden_judge()), Some(embedder()));
    let ctx = contexts();
    let got = block_on(judge.judge(
        &input(REPLY, &ctx, None),
        &[Metric::ContextPrecision, Metric::ContextRecall],
        3,
    ))
    .unwrap();
    // Useful at ranks 2 and 3 = (1/2 + 2/3) / 2 = 7/12.
    let p = &got[&Metric::ContextPrecision];
    close(p.score, 7.0 / 12.0);
    assert_eq!(p.note.as_deref(), Some(NOTE_AGAINST_REPLY));
    let c = &got[&Metric::ContextRecall];
    assert_eq!(c.score, None);
    assert_eq!(c.note.as_deref(), Some("no reference answer"));
    // A blank reference is no reference either.
    let got = block_on(judge.judge(&input(REPLY, &ctx, Some("  ")), &[Metric::ContextRecall], 3))
        .unwrap();
    assert_eq!(
        got[&Metric::ContextRecall].note.as_deref(),
        Some(NOTE_NO_REFERENCE)
    );
}

#[test]
fn a_reply_with_no_claims_has_no_faithfulness_score() {
    let model = Arc::new(ScriptedJudge::default().on(
        "reply_claims",
        "Happy to help",
        &json!({"claims": []}),
    ));
    let judge = judge_with(model.clone(), None);
    let ctx = contexts();
    let got = block_on(judge.judge(
        &input("Happy to help! Anything else?", &ctx, None),
        &[Metric::Faithfulness],
        3,
    ))
    .unwrap();
    let f = &got[&Metric::Faithfulness];
    assert_eq!(f.score, None);
    assert_eq!(f.note.as_deref(), Some("the reply makes no claims"));
    assert_eq!(model.calls("claim_verdicts"), 0);
}

#[test]
fn without_context_nothing_supports_a_claim_and_precision_does_not_apply() {
    // A reply written with no context is not grounded: faithfulness and recall are 0 (every
    // claim unsupported, without asking for verdicts), never "does not apply", which would
    // leave an ungrounded reply out of the score. Precision has nothing to rank.
    let model = Arc::new(garden_judge().on(
        "reply_claims",
        "Members who pay late",
        &json!({"claims": ["A plot costs 40 pounds a year.", "Members who pay late lose their plot."]}),
    ));
    let judge = judge_with(model.clone(), None);
    let got = block_on(judge.judge(&input(REPLY, &[], Some(REFERENCE)), &Metric::ALL, 3)).unwrap();
    let f = &got[&Metric::Faithfulness];
    assert_eq!(f.score, Some(0.0), "{f:?}");
    assert_eq!(f.claims.len(), 4);
    assert!(
        f.claims
            .iter()
            .all(|c| !c.supported && c.entity.is_none() && c.reason == REASON_NO_CONTEXT),
        "{f:?}"
    );
    let r = &got[&Metric::ContextRecall];
    assert_eq!(r.score, Some(0.0), "{r:?}");
    assert_eq!(r.claims.len(), 2);
    assert_eq!(
        got[&Metric::ContextPrecision].note.as_deref(),
        Some(NOTE_NO_CONTEXT)
    );
    assert_eq!(got[&Metric::ContextPrecision].score, None);
    assert_eq!(
        got[&Metric::AnswerRelevancy].note.as_deref(),
        Some(NOTE_NO_EMBEDDER)
    );
    assert_eq!(model.calls("claim_verdicts"), 0, "no verdicts asked for");
    assert_eq!(model.calls("reference_claims"), 0);
    assert_eq!(model.calls("reply_claims"), 2);
}

#[test]
fn a_reply_that_is_never_json_is_an_error_naming_the_metric_never_a_zero() {
    let model = Arc::new(garden_judge().on_text(
        "reply_claims",
        "GARBLED",
        &["Sure! The reply makes some claims about plots."],
    ));
    let judge = judge_with(model.clone(), Some(embedder()));
    let ctx = contexts();
    let reply = "GARBLED. A plot costs 40 pounds a year.";
    let err =
        block_on(judge.judge(&input(reply, &ctx, Some(REFERENCE)), &Metric::ALL, 3)).unwrap_err();
    assert_eq!(err.metric, Metric::Faithfulness);
    assert!(!err.is_provider);
    let text = err.to_string();
    assert!(
        text.starts_with("faithfulness: extracting the reply's claims: test/scripted-judge:"),
        "{text}"
    );
    assert!(
        text.contains("no JSON object") && text.contains("3 attempt"),
        "{text}"
    );
    // The first try and two corrective turns.
    assert_eq!(
        model.calls("reply_claims"),
        1 + DEFAULT_STRUCTURED_RETRIES as usize
    );
}

#[test]
fn a_verdict_for_claim_7_of_3_is_rejected_and_then_an_error() {
    let claims = ["Claim one.", "Claim two.", "Claim three."].map(str::to_owned);
    let bad = json!({"verdicts": [
        {"claim_index": 1, "supported": true, "entity": "plot-fees", "reason": "r"},
        {"claim_index": 2, "supported": true, "entity": "plot-fees", "reason": "r"},
        {"claim_index": 7, "supported": false, "entity": null, "reason": "r"}
    ]});
    let model = Arc::new(ScriptedJudge::default().on("claim_verdicts", "Claim one.", &bad));
    let judge = judge_with(model.clone(), None);
    let err = block_on(judge.verify_claims(&claims, &contexts())).unwrap_err();
    assert_eq!(err.metric, Metric::Faithfulness);
    assert!(!err.is_provider);
    assert!(
        err.reason.contains("judging the claims")
            && err
                .reason
                .contains("a verdict for claim 7, but there are only 3 claims"),
        "{err}"
    );
    assert_eq!(model.calls("claim_verdicts"), 3);
    // The corrective turn told the model what was wrong.
    let last = model.requests("claim_verdicts").pop().unwrap();
    assert!(
        last.messages[2].content.contains("claim 7"),
        "{:?}",
        last.messages
    );
}

#[test]
fn an_entity_outside_the_contexts_is_corrected() {
    let claims = ["Claim one.".to_owned()];
    let model = Arc::new(ScriptedJudge::default().on_text(
        "claim_verdicts",
        "Claim one.",
        &[
            r#"{"verdicts": [{"claim_index": 1, "supported": true, "entity": "made-up", "reason": "r"}]}"#,
            r#"{"verdicts": [{"claim_index": 1, "supported": true, "entity": "tool-shed", "reason": "r"}]}"#,
        ],
    ));
    let judge = judge_with(model.clone(), None);
    let got = block_on(judge.verify_claims(&claims, &contexts())).unwrap();
    assert_eq!(got[0].entity.as_deref(), Some("tool-shed"));
    let second = model.requests("claim_verdicts").pop().unwrap();
    assert!(
        second.messages[2].content.contains("made-up"),
        "{:?}",
        second.messages
    );
}

#[test]
fn an_unsupported_claim_keeps_no_entity_and_contexts_without_entities_take_null() {
    let claims = ["Claim one.".to_owned()];
    let ctx = [ContextItem {
        entity: None,
        text: "A passage from the product's own retriever.".into(),
    }];
    let model = Arc::new(ScriptedJudge::default().on(
        "claim_verdicts",
        "Claim one.",
        &json!({"verdicts": [{"claim_index": 1, "supported": true, "entity": null, "reason": "r"}]}),
    ));
    let judge = judge_with(model.clone(), None);
    let got = block_on(judge.verify_claims(&claims, &ctx)).unwrap();
    assert!(got[0].supported && got[0].entity.is_none());
    let request = &model.requests("claim_verdicts")[0];
    assert!(request.messages[0].content.contains("[1] entity: (none)"));
}

#[test]
fn a_context_verdict_out_of_range_fails_context_precision() {
    let model = Arc::new(ScriptedJudge::default().on(
        "context_usefulness",
        REFERENCE,
        &json!({"verdicts": [
            {"rank": 1, "useful": true, "reason": "r"},
            {"rank": 2, "useful": true, "reason": "r"},
            {"rank": 4, "useful": true, "reason": "r"}
        ]}),
    ));
    let judge = judge_with(model, None);
    let ctx = contexts();
    let err = block_on(judge.judge(
        &input(REPLY, &ctx, Some(REFERENCE)),
        &[Metric::ContextPrecision],
        3,
    ))
    .unwrap_err();
    assert_eq!(err.metric, Metric::ContextPrecision);
    assert!(
        err.reason
            .contains("a verdict for context 4, but there are only 3 contexts"),
        "{err}"
    );
}

#[test]
fn an_evasive_reply_scores_zero_relevancy_and_is_flagged() {
    let model = Arc::new(ScriptedJudge::default().on(
        "reply_questions",
        EVASIVE,
        &json!({"questions": [
            {"question": "Who can tell me about plots?", "noncommittal": true},
            {"question": "How much does a plot cost?", "noncommittal": true}
        ]}),
    ));
    let judge = judge_with(model.clone(), Some(embedder()));
    let got = block_on(judge.judge(
        &input(EVASIVE, &contexts(), None),
        &[Metric::AnswerRelevancy],
        2,
    ))
    .unwrap();
    let r = &got[&Metric::AnswerRelevancy];
    assert_eq!(r.score, Some(0.0));
    assert!(r.noncommittal);
    assert_eq!(r.questions.len(), 2);
    let prompt = &model.requests("reply_questions")[0].messages[0].content;
    assert!(prompt.contains("exactly 2 question(s)"), "{prompt}");
}

#[test]
fn the_wrong_number_of_questions_is_rejected() {
    let model = Arc::new(ScriptedJudge::default().on(
        "reply_questions",
        REPLY,
        &json!({"questions": [{"question": "How much does a plot cost?", "noncommittal": false}]}),
    ));
    let judge = judge_with(model, Some(embedder()));
    let err = block_on(judge.judge(
        &input(REPLY, &contexts(), None),
        &[Metric::AnswerRelevancy],
        3,
    ))
    .unwrap_err();
    assert_eq!(err.metric, Metric::AnswerRelevancy);
    assert!(
        err.reason
            .contains("1 question(s) were given, but exactly 3 were asked for"),
        "{err}"
    );
}

#[test]
fn provider_and_embedder_errors_are_provider_failures() {
    let model = Arc::new(ScriptedJudge {
        down: true,
        ..ScriptedJudge::default()
    });
    let judge = judge_with(model, None);
    let err = block_on(judge.judge(
        &input(REPLY, &contexts(), Some(REFERENCE)),
        &[Metric::ContextRecall],
        3,
    ))
    .unwrap_err();
    assert_eq!(err.metric, Metric::ContextRecall);
    assert!(err.is_provider);
    assert!(err.reason.contains("connection refused"), "{err}");

    // The embedder has no vector for this question.
    let judge = judge_with(Arc::new(garden_judge()), Some(embedder()));
    let mut i = input(REPLY, &[], None);
    i.question = "Something else entirely?";
    let err = block_on(judge.judge(&i, &[Metric::AnswerRelevancy], 3)).unwrap_err();
    assert_eq!(err.metric, Metric::AnswerRelevancy);
    assert!(err.is_provider);
    assert!(err.reason.starts_with("embedding the questions: "), "{err}");
}

#[test]
fn indices_must_cover_each_claim_exactly_once() {
    assert_eq!(check_indices([2, 1, 3].into_iter(), 3, "claim"), Ok(()));
    let dup = check_indices([1, 1, 3].into_iter(), 3, "claim").unwrap_err();
    assert!(dup.contains("two verdicts for claim 1"), "{dup}");
    let missing = check_indices([1].into_iter(), 3, "claim").unwrap_err();
    assert!(
        missing.contains("no verdict for claim(s) 2, 3"),
        "{missing}"
    );
    let zero = check_indices([0].into_iter(), 1, "claim").unwrap_err();
    assert!(zero.contains("claim 0"), "{zero}");
}
