//! The answer judge's claim verdicts measured against people (`assay judge agree` with
//! `judge: claims`): a labels file holds contexts and claims, each claim with a person's call on
//! whether the contexts support it (and, optionally, which context's entity does); the judge
//! gives its verdicts on the same claims ([`AnswerJudge::verify_claims`], the call behind
//! faithfulness), and [`assay_core::agreement`] measures how far they agree.
//!
//! ```yaml
//! judge: claims
//! items:
//!   - id: plot-fees
//!     contexts:
//!       - {entity: plot-fees, text: "A plot costs 40 euros a year, paid in March."}
//!     claims:
//!       - {claim: A plot costs 40 euros a year., supported: true, entity: plot-fees}
//!       - {claim: The fee is paid in May., supported: false}
//! ```
//!
//! Each claim is one item of the measurement, named `id#n` (its item's id and its number, from
//! 1): the criterion `supported` (true/false) gets Cohen's kappa, the agreement share and the
//! confusion table, and a claim's verdict is its `supported` call, so "too lenient" lists the
//! claims the judge supported and the person did not. Where the person named the entity, the
//! share of claims whose entity the judge names too is reported beside ([`EntityAgreement`]).
//!
//! An item whose judge reply cannot be used (after [`assay_providers::ask_structured`]'s
//! corrective turns) is an error of each of its claims, listed and left out of the measures;
//! never a verdict.

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use assay_core::agreement::{
    AgreementReport, Criterion, JudgeSample, JudgedItem, ReportHead, Scale,
    report as measure_report,
};
use assay_core::answer::{ClaimVerdict, ContextItem};
use assay_kb::datafile::{self, DataError};
use assay_providers::{ChatModel, ChatRequest, ChatResponse, ModelCheck, ProviderError};
use serde::{Deserialize, Serialize};

use super::judge::AnswerJudge;

/// The one criterion of claim labels: whether the contexts support the claim.
pub const CRITERION: &str = "supported";

/// A labels file for the answer judge's claim verdicts: contexts and claims people judged,
/// on which `assay judge agree` asks the judge for its own verdicts and compares.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct LabelsFile {
    /// The JSON Schema the file follows, for editors that complete and check it (`assay
    /// schema`); assay itself does not read it.
    #[serde(rename = "$schema", default, skip_serializing)]
    #[allow(dead_code)]
    schema: Option<String>,
    /// Which judge the labels are for: `claims` (the answer judge's claim verdicts, behind
    /// faithfulness).
    judge: String,
    /// The labelled items: contexts and the claims judged against them.
    items: Vec<ItemConfig>,
}

/// Contexts and the claims a person judged against them.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ItemConfig {
    /// The item's id, unique in the file; its claims are named `id#1`, `id#2`, … in the
    /// output.
    id: String,
    /// The context passages, in rank order, as the judge is shown them.
    contexts: Vec<ContextConfig>,
    /// The claims, each with the person's verdict.
    claims: Vec<ClaimConfig>,
    /// Free text for the people reading the file; assay does not read it.
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

/// One context passage.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ContextConfig {
    /// The knowledge-base entity the passage comes from (optional; a claim's `entity` must be
    /// one of these).
    #[serde(default)]
    entity: Option<String>,
    /// The passage's text.
    text: String,
}

/// One claim and the person's verdict on it.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct ClaimConfig {
    /// The claim: one statement of one fact.
    claim: String,
    /// Whether the contexts state the claim or it follows directly from them (your own
    /// knowledge does not count).
    supported: bool,
    /// For a supported claim, optionally: the entity of the context that supports it.
    #[serde(default)]
    entity: Option<String>,
    /// Free text for the people reading the file; assay does not read it.
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
}

/// The JSON Schema of a labels file for the answer judge's claim verdicts (`assay schema
/// claim-labels`).
pub fn labels_schema() -> schemars::Schema {
    let mut schema = schemars::schema_for!(LabelsFile);
    assay_core::schema::set_const(&mut schema, "judge", "claims");
    schema
}

/// One labelled claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimLabel {
    /// The claim.
    pub claim: String,
    /// The person's verdict.
    pub supported: bool,
    /// The entity the person says supports it (only on a supported claim).
    pub entity: Option<String>,
}

/// One labelled item: contexts and the claims judged against them.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimItem {
    /// The item's id.
    pub id: String,
    /// The contexts, in rank order.
    pub contexts: Vec<ContextItem>,
    /// The claims, in file order.
    pub claims: Vec<ClaimLabel>,
}

impl ClaimItem {
    /// The name of its claim `index` (0-based) in the measurement: `id#n`, from 1.
    pub fn claim_name(&self, index: usize) -> String {
        format!("{}#{}", self.id, index + 1)
    }
}

/// A `judge: claims` labels file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimLabels {
    /// The file.
    pub path: PathBuf,
    /// The items, in file order.
    pub items: Vec<ClaimItem>,
}

impl ClaimLabels {
    /// Claims over all items.
    pub fn claim_count(&self) -> usize {
        self.items.iter().map(|i| i.claims.len()).sum()
    }
}

/// Reads and checks a `judge: claims` labels file. Unknown fields (with the closest known one
/// named), an item without contexts or claims, a repeated id or claim, an empty text, and an
/// `entity` on an unsupported claim or not among the item's contexts are errors naming the
/// file, the line where it is known, and the field.
pub fn load_labels(path: &Path) -> Result<ClaimLabels, DataError> {
    let (format, text) = datafile::read_text(path)?;
    let mut warnings = Vec::new();
    let file: LabelsFile = datafile::parse(path, &text, format, &mut |w| warnings.push(w))?;
    if let Some(w) = warnings.first() {
        return Err(DataError::new(path, w.replace(" (ignored)", "")));
    }
    if file.judge != "claims" {
        return Err(DataError {
            line: datafile::key_line(&text, "judge", 0),
            ..DataError::new(path, format!("judge: `{}` is not `claims`", file.judge))
        });
    }
    if file.items.is_empty() {
        return Err(DataError {
            line: datafile::key_line(&text, "items", 0),
            ..DataError::new(path, "items: no labelled item")
        });
    }
    let mut ids = HashSet::new();
    let mut items = Vec::with_capacity(file.items.len());
    for (i, item) in file.items.into_iter().enumerate() {
        // Every item writes `id` once, and nothing else has that key: the i-th is this item's.
        let at = |message: String| DataError {
            line: datafile::key_line(&text, "id", i),
            ..DataError::new(path, format!("items[{i}]: {message}"))
        };
        let id = item.id.trim().to_owned();
        if id.is_empty() {
            return Err(at("id: must not be empty".into()));
        }
        if id.contains('#') {
            return Err(at(format!(
                "id: `{id}` has a `#`, which names its claims (`{id}#1`); choose another id"
            )));
        }
        if !ids.insert(id.clone()) {
            return Err(at(format!("id: `{id}` is used by an earlier item")));
        }
        if item.contexts.is_empty() {
            return Err(at(format!(
                "contexts: item `{id}` has none; give the passages its claims are judged against"
            )));
        }
        let mut contexts = Vec::with_capacity(item.contexts.len());
        for (k, c) in item.contexts.into_iter().enumerate() {
            if c.text.trim().is_empty() {
                return Err(at(format!("contexts[{k}].text: must not be empty")));
            }
            let entity = c.entity.map(|e| e.trim().to_owned());
            if entity.as_ref().is_some_and(String::is_empty) {
                return Err(at(format!(
                    "contexts[{k}].entity: must not be empty (leave it out when there is none)"
                )));
            }
            contexts.push(ContextItem {
                entity,
                text: c.text,
            });
        }
        let entities: Vec<&str> = contexts
            .iter()
            .filter_map(|c| c.entity.as_deref())
            .collect();
        if item.claims.is_empty() {
            return Err(at(format!(
                "claims: item `{id}` has none; give each claim with your verdict"
            )));
        }
        let mut seen = BTreeSet::new();
        let mut claims = Vec::with_capacity(item.claims.len());
        for (k, c) in item.claims.into_iter().enumerate() {
            let claim = c.claim.trim().to_owned();
            if claim.is_empty() {
                return Err(at(format!("claims[{k}].claim: must not be empty")));
            }
            if !seen.insert(claim.clone()) {
                return Err(at(format!(
                    "claims[{k}].claim: `{claim}` is labelled twice in item `{id}`"
                )));
            }
            if let Some(entity) = &c.entity {
                if !c.supported {
                    return Err(at(format!(
                        "claims[{k}].entity: `{entity}` is given on a claim that is not \
                         supported; only a supported claim has a supporting entity"
                    )));
                }
                if !entities.contains(&entity.trim()) {
                    return Err(at(format!(
                        "claims[{k}].entity: `{entity}` is not among the item's contexts' \
                         entities ({})",
                        if entities.is_empty() {
                            "they name none".to_owned()
                        } else {
                            entities.join(", ")
                        }
                    )));
                }
            }
            claims.push(ClaimLabel {
                claim,
                supported: c.supported,
                entity: c.entity.map(|e| e.trim().to_owned()),
            });
        }
        items.push(ClaimItem {
            id,
            contexts,
            claims,
        });
    }
    Ok(ClaimLabels {
        path: path.to_owned(),
        items,
    })
}

/// How often the judge names the entity a person named as a claim's support.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntityAgreement {
    /// Claims compared: those the person supported with an entity named and the judge
    /// supported in every sample.
    pub n: usize,
    /// Of those, the claims where every sample named the person's entity.
    pub agreed: usize,
    /// `agreed / n`; none when `n` is 0.
    pub share: Option<f64>,
    /// The claims where it named another entity, or none.
    pub mismatches: Vec<EntityMismatch>,
}

/// A claim on whose supporting entity the judge and the person differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityMismatch {
    /// The claim's name (`id#n`).
    pub item: String,
    /// The person's entity.
    pub human: String,
    /// The entities the judge named across its samples, in order, without repeats (`null`
    /// where a sample named none).
    pub judge: Vec<Option<String>>,
}

/// The agreement of the answer judge's claim verdicts with people: the shared measurement
/// ([`AgreementReport`], kind `claims`) and, where people named entities, the entities'
/// agreement. In JSON the report's fields, with `entity` beside them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClaimsAgreement {
    /// The shared measurement.
    #[serde(flatten)]
    pub report: AgreementReport,
    /// The supporting entities' agreement, when a person named any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity: Option<EntityAgreement>,
}

impl ClaimsAgreement {
    /// The agreement for a terminal: the shared rendering, then the entities' line.
    pub fn console(&self) -> String {
        let mut out = assay_report::agreement::console(&self.report);
        if let Some(e) = &self.entity {
            let _ = write!(
                out,
                "  supporting entity: the judge named yours on {} of {} claim(s)",
                e.agreed, e.n
            );
            if let Some(share) = e.share {
                let _ = write!(out, " ({:.0}%)", share * 100.0);
            }
            let _ = writeln!(
                out,
                " (claims you named an entity for and it supported in every sample)"
            );
            for m in &e.mismatches {
                let judge: Vec<&str> = m
                    .judge
                    .iter()
                    .map(|j| j.as_deref().unwrap_or("none"))
                    .collect();
                let _ = writeln!(
                    out,
                    "    {}: yours {} → the judge's {}",
                    m.item,
                    m.human,
                    judge.join(" / ")
                );
            }
        }
        out
    }
}

/// The judge's model with a sampling seed set on every request (none for sample 0): each
/// sample is its own call, and its own entry in the call cache. It also keeps the first
/// request's instructions and schema name, for the judge's version (the schema's body lists
/// the item's entities, which differ between items).
#[derive(Debug)]
struct Sampled {
    inner: Arc<dyn ChatModel>,
    seed: Option<u64>,
    seen: Arc<Mutex<Option<String>>>,
}

#[async_trait::async_trait]
impl ChatModel for Sampled {
    fn model(&self) -> &str {
        self.inner.model()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        {
            let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
            if seen.is_none() {
                *seen = Some(format!(
                    "{}\n{}",
                    request.system.as_deref().unwrap_or_default(),
                    request
                        .output_schema
                        .as_ref()
                        .map_or("", |s| s.name.as_str())
                ));
            }
        }
        if self.seed.is_none() {
            return self.inner.chat(request).await;
        }
        let mut request = request.clone();
        request.seed = self.seed;
        self.inner.chat(&request).await
    }

    async fn check_model(&self) -> Result<ModelCheck, ProviderError> {
        self.inner.check_model().await
    }
}

/// Has `judge` give its verdicts on every labelled item's claims again (`samples` times each,
/// each sample with its own seed) and measures the agreement. The judge's relevancy embedder
/// is not used. An item whose judge call fails is an error of each of its claims.
pub async fn agree(judge: &AnswerJudge, labels: &ClaimLabels, samples: u32) -> ClaimsAgreement {
    let samples = samples.max(1);
    let seen = Arc::new(Mutex::new(None));
    let judges: Vec<AnswerJudge> = (0..samples)
        .map(|k| AnswerJudge {
            model: Arc::new(Sampled {
                inner: judge.model.clone(),
                seed: (k > 0).then_some(u64::from(k)),
                seen: seen.clone(),
            }),
            embedder: None,
            max_tokens: judge.max_tokens,
        })
        .collect();
    let asks = labels.items.iter().map(|item| {
        let judges = &judges;
        async move {
            let claims: Vec<String> = item.claims.iter().map(|c| c.claim.clone()).collect();
            let calls = judges
                .iter()
                .map(|j| j.verify_claims(&claims, &item.contexts));
            let out: Result<Vec<Vec<ClaimVerdict>>, String> = futures_util::future::join_all(calls)
                .await
                .into_iter()
                .map(|r| r.map_err(|e| e.to_string()))
                .collect();
            (item, out)
        }
    });
    let (mut judged, mut errors) = (Vec::new(), Vec::new());
    let mut entity = EntityAgreement {
        n: 0,
        agreed: 0,
        share: None,
        mismatches: Vec::new(),
    };
    let mut any_entity = false;
    for (item, result) in futures_util::future::join_all(asks).await {
        let sampled = match result {
            Ok(s) => s,
            Err(e) => {
                for k in 0..item.claims.len() {
                    errors.push(format!("{}: {e}", item.claim_name(k)));
                }
                continue;
            }
        };
        for (k, label) in item.claims.iter().enumerate() {
            let name = item.claim_name(k);
            // verify_claims gives one verdict per claim, in order; a shorter list is a judge
            // failure of this claim, never a verdict.
            let verdicts: Option<Vec<&ClaimVerdict>> = sampled.iter().map(|s| s.get(k)).collect();
            let Some(verdicts) = verdicts else {
                errors.push(format!("{name}: the judge gave no verdict for this claim"));
                continue;
            };
            let score = |b: bool| if b { 1.0 } else { 0.0 };
            judged.push(JudgedItem {
                item: name.clone(),
                human: [(CRITERION.to_owned(), score(label.supported))]
                    .into_iter()
                    .collect(),
                human_verdict: Some(label.supported),
                samples: verdicts
                    .iter()
                    .map(|v| JudgeSample {
                        scores: [(CRITERION.to_owned(), score(v.supported))]
                            .into_iter()
                            .collect(),
                        passes: v.supported,
                    })
                    .collect(),
            });
            let Some(human) = &label.entity else {
                continue;
            };
            any_entity = true;
            if !verdicts.iter().all(|v| v.supported) {
                continue;
            }
            entity.n += 1;
            if verdicts.iter().all(|v| v.entity.as_ref() == Some(human)) {
                entity.agreed += 1;
            } else {
                let mut named: Vec<Option<String>> = Vec::new();
                for v in &verdicts {
                    if !named.contains(&v.entity) {
                        named.push(v.entity.clone());
                    }
                }
                entity.mismatches.push(EntityMismatch {
                    item: name,
                    human: human.clone(),
                    judge: named,
                });
            }
        }
    }
    entity.share = (entity.n > 0).then(|| entity.agreed as f64 / entity.n as f64);
    let version = seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_deref()
        .map_or_else(
            || "unknown".to_owned(),
            |seen| assay_project::hash::digest(&[seen]),
        );
    let report = measure_report(
        ReportHead {
            kind: "claims".into(),
            judge_model: judge.model.model().to_owned(),
            judge_version: version,
            labels: labels.path.display().to_string(),
            samples,
            unscored: 0,
        },
        &[Criterion::new(CRITERION, Scale::Boolean)],
        &judged,
        errors,
    );
    ClaimsAgreement {
        report,
        entity: any_entity.then_some(entity),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    const OK: &str = "\
judge: claims
items:
  - id: fees
    contexts:
      - entity: plot-fees
        text: A plot costs 40 euros a year, paid in March.
      - entity: tool-shed
        text: The tool shed opens at 8.
    claims:
      - claim: A plot costs 40 euros a year.
        supported: true
        entity: plot-fees
      - claim: The fee is paid in May.
        supported: false
  - id: shed
    contexts:
      - text: The tool shed opens at 8.
    claims:
      - claim: The shed opens at 8.
        supported: true
";

    #[test]
    fn labels_are_read_in_order_and_checked_strictly() {
        let (_d, p) = write("labels.yaml", OK);
        let l = load_labels(&p).unwrap();
        assert_eq!(l.claim_count(), 3);
        assert_eq!(l.items[0].claim_name(1), "fees#2");
        assert_eq!(l.items[0].claims[0].entity.as_deref(), Some("plot-fees"));
        assert_eq!(l.items[1].contexts[0].entity, None);
        for (text, line, needles) in [
            (
                OK.replace("        supported: false\n", "        suported: false\n"),
                Some(14),
                vec!["unknown field `suported`", "did you mean `supported`?"],
            ),
            (
                OK.replace("  - id: shed", "  - id: fees"),
                Some(15),
                vec!["items[1]: id: `fees` is used by an earlier item"],
            ),
            (
                OK.replace(
                    "    claims:\n      - claim: The shed opens at 8.\n        supported: true\n",
                    "    claims: []\n",
                ),
                Some(15),
                vec!["items[1]: claims: item `shed` has none"],
            ),
            (
                OK.replace("judge: claims", "judge: rubric"),
                Some(1),
                vec!["judge: `rubric` is not `claims`"],
            ),
            (
                OK.replace(
                    "entity: plot-fees\n        text: A",
                    "entity: plot-fee\n        text: A",
                ),
                Some(3),
                vec![
                    "items[0]: claims[0].entity: `plot-fees` is not among",
                    "plot-fee, tool-shed",
                ],
            ),
            (
                OK.replace(
                    "        supported: false\n",
                    "        supported: false\n        entity: tool-shed\n",
                ),
                Some(3),
                vec!["claims[1].entity: `tool-shed` is given on a claim that is not supported"],
            ),
            (
                OK.replace("The fee is paid in May.", "A plot costs 40 euros a year."),
                Some(3),
                vec!["claims[1].claim", "labelled twice in item `fees`"],
            ),
            (
                OK.replace(
                    "      - text: The tool shed opens at 8.\n",
                    "      - text: \" \"\n",
                ),
                Some(15),
                vec!["items[1]: contexts[0].text: must not be empty"],
            ),
            (
                OK.replace("id: shed", "id: shed#2"),
                Some(15),
                vec!["has a `#`"],
            ),
            (
                "judge: claims\nitems: []\n".to_owned(),
                Some(2),
                vec!["items: no labelled item"],
            ),
            (
                OK.replace(
                    "        supported: true\n",
                    "        supported: yes please\n",
                ),
                None,
                vec!["supported"],
            ),
        ] {
            let (_d, p) = write("labels.yaml", &text);
            let e = load_labels(&p).unwrap_err();
            let shown = e.to_string();
            assert!(shown.contains("labels.yaml"), "{shown}");
            for needle in needles {
                assert!(shown.contains(needle), "{needle}: {shown}");
            }
            if line.is_some() {
                assert_eq!(e.line, line, "{shown}");
            }
        }
    }

    #[test]
    fn json_labels_name_the_line_of_the_item() {
        let text = r#"{"judge": "claims", "items": [
  {"id": "a", "contexts": [{"text": "x"}], "claims": [{"claim": "x", "supported": true}]},
  {"id": "a", "contexts": [{"text": "y"}], "claims": [{"claim": "y", "supported": true}]}
]}"#;
        let (_d, p) = write("labels.json", text);
        let e = load_labels(&p).unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        assert!(
            e.to_string().contains("`a` is used by an earlier item"),
            "{e}"
        );
    }

    /// A judge that supports a claim when its text contains `yes` (naming the first context's
    /// entity, or `other` in the text's place when the claim says `other`), flips `flip` claims
    /// on seeded samples, answers prose to `GARBLED`, and records each request's seed.
    #[derive(Debug, Default)]
    struct Scripted {
        seeds: Mutex<Vec<Option<u64>>>,
    }

    #[async_trait::async_trait]
    impl ChatModel for Scripted {
        fn model(&self) -> &'static str {
            "test/claims-judge"
        }
        async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
            self.seeds.lock().unwrap().push(request.seed);
            let prompt = &request.messages[0].content;
            if prompt.contains("GARBLED") {
                return Ok(ChatResponse {
                    text: "I think they are mostly fine.".into(),
                    ..ChatResponse::default()
                });
            }
            let claims = prompt.split("## Claims\n").nth(1).unwrap();
            let first_entity = prompt
                .split("] entity: ")
                .nth(1)
                .and_then(|r| r.lines().next())
                .filter(|e| *e != "(none)")
                .map(str::to_owned);
            let verdicts: Vec<serde_json::Value> = claims
                .lines()
                .map_while(|l| l.split_once(". "))
                .map(|(n, claim)| {
                    let mut yes = claim.contains("yes");
                    if claim.contains("flip") && request.seed.is_some() {
                        yes = !yes;
                    }
                    let entity = if !yes {
                        None
                    } else if claim.contains("other") {
                        Some("tool-shed".to_owned())
                    } else {
                        first_entity.clone()
                    };
                    serde_json::json!({"claim_index": n.parse::<usize>().unwrap(),
                        "supported": yes, "entity": entity, "reason": "scripted"})
                })
                .collect();
            Ok(ChatResponse {
                text: serde_json::json!({ "verdicts": verdicts }).to_string(),
                ..ChatResponse::default()
            })
        }
    }

    fn judge(model: Arc<Scripted>) -> AnswerJudge {
        AnswerJudge {
            model,
            embedder: None,
            max_tokens: 512,
        }
    }

    const SIX: &str = "\
judge: claims
items:
  - id: a
    contexts:
      - {entity: plot-fees, text: Plots cost 40 euros.}
      - {entity: tool-shed, text: The shed opens at 8.}
    claims:
      - {claim: yes one, supported: true, entity: plot-fees}
      - {claim: yes other, supported: true, entity: plot-fees}
      - {claim: yes three, supported: true}
  - id: b
    contexts:
      - {entity: tool-shed, text: The shed opens at 8.}
    claims:
      - {claim: no four, supported: false}
      - {claim: no five, supported: false}
      - {claim: yes six, supported: false}
";

    /// Five of six claims agree: kappa by hand is (5/6 − 1/2) / (1 − 1/2) = 2/3 (the person
    /// supports 3 of 6, the judge 4 of 6: chance agreement 1/2 · 4/6 + 1/2 · 2/6 = 1/2).
    #[tokio::test]
    async fn kappa_agreement_and_entities_are_measured_per_claim() {
        let (_d, path) = write("labels.yaml", SIX);
        let labels = load_labels(&path).unwrap();
        let model = Arc::new(Scripted::default());
        let a = agree(&judge(model.clone()), &labels, 1).await;
        let r = &a.report;
        assert_eq!((r.kind.as_str(), r.items, r.samples), ("claims", 6, 1));
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.judge_version.len(), 16);
        let crit = &r.measurement.criteria[0];
        assert_eq!(
            (crit.id.as_str(), crit.n, crit.kappa_weights.as_str()),
            ("supported", 6, "none")
        );
        assert!((crit.kappa.unwrap() - 2.0 / 3.0).abs() < 1e-12, "{crit:?}");
        assert!((crit.agreement - 5.0 / 6.0).abs() < 1e-12);
        let verdicts = r.measurement.verdicts.as_ref().unwrap();
        assert_eq!(verdicts.judge_too_lenient, ["b#3"]);
        assert!(verdicts.judge_too_strict.is_empty());
        assert_eq!(r.measurement.disagreements[0].item, "b#3");
        let entity = a.entity.as_ref().unwrap();
        assert_eq!((entity.n, entity.agreed, entity.share), (2, 1, Some(0.5)));
        assert_eq!(
            entity.mismatches,
            [EntityMismatch {
                item: "a#2".into(),
                human: "plot-fees".into(),
                judge: vec![Some("tool-shed".into())],
            }]
        );
        assert_eq!(
            *model.seeds.lock().unwrap(),
            [None, None],
            "one call per item"
        );
        let text = a.console();
        assert!(text.contains("claims judge"), "{text}");
        assert!(
            text.contains("the judge named yours on 1 of 2 claim(s) (50%)"),
            "{text}"
        );
        assert!(
            text.contains("a#2: yours plot-fees → the judge's tool-shed"),
            "{text}"
        );
        let json = serde_json::to_value(&a).unwrap();
        assert_eq!(json["kind"], "claims");
        assert_eq!(json["entity"]["agreed"], 1);
    }

    #[tokio::test]
    async fn samples_are_seeded_and_flipping_claims_are_uncertain() {
        let text = SIX.replace("yes three", "yes flip three");
        let (_d, p) = write("labels.yaml", &text);
        let labels = load_labels(&p).unwrap();
        let model = Arc::new(Scripted::default());
        let a = agree(&judge(model.clone()), &labels, 3).await;
        let mut seeds = model.seeds.lock().unwrap().clone();
        seeds.sort();
        assert_eq!(seeds, [None, None, Some(1), Some(1), Some(2), Some(2)]);
        let c = a.report.consistency.as_ref().unwrap();
        assert_eq!(c.uncertain, ["a#3"]);
        assert_eq!(a.report.flip_share, Some(1.0 / 6.0));
        let v = a.report.measurement.verdicts.as_ref().unwrap();
        assert_eq!(v.n, 5, "the flipping claim is left out of the verdicts");
        // Its score is the majority of its samples (supported once of three): not supported.
        let item = a.report.per_item.iter().find(|i| i.item == "a#3").unwrap();
        assert_eq!(item.scores[0].1, (1.0, 0.0));
    }

    #[tokio::test]
    async fn an_unusable_judge_reply_is_an_error_of_each_claim_never_a_verdict() {
        let text = SIX.replace("no four", "no GARBLED four");
        let (_d, p) = write("labels.yaml", &text);
        let labels = load_labels(&p).unwrap();
        let a = agree(&judge(Arc::new(Scripted::default())), &labels, 1).await;
        let r = &a.report;
        assert_eq!(r.errors.len(), 3, "{:?}", r.errors);
        assert!(
            r.errors[0].starts_with("b#1: faithfulness: judging the claims"),
            "{:?}",
            r.errors
        );
        assert_eq!(r.items, 6, "3 judged, 3 errors");
        assert_eq!(r.measurement.criteria[0].n, 3);
        assert!(r.per_item.iter().all(|i| i.item.starts_with("a#")));
    }
}
