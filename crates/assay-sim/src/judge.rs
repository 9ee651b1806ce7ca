//! The judge: a chat model that reads the scenario, the fixture, the criteria and the whole
//! transcript (every tool call with its arguments and result, and the expected-state checks)
//! and scores each criterion with its reasoning, in structured output validated against a
//! schema built from the suite's criteria (temperature 0). It also says whether the simulated
//! user kept to its persona. A reply that does not validate after the corrective retries is an
//! error, never a score.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use assay_core::simulation::{CriterionScore, Judgement, Scale};
use assay_providers::{
    ChatModel, ChatRequest, DEFAULT_STRUCTURED_RETRIES, ProviderError, SchemaCheck, Usage,
    ask_structured,
};
use serde::Deserialize;
use serde_json::{Value, json};

use assay_core::simulation::{CheckResult, CheckStatus, Speaker, Transcript};

use crate::suite::{CriterionConfig, Scenario};

/// Tokens the judge may answer with.
pub const JUDGE_MAX_TOKENS: u32 = 4096;
/// Characters of a tool result shown to the judge.
const RESULT_CHARS: usize = 1500;

#[derive(Debug, Deserialize)]
struct Reply {
    scores: BTreeMap<String, ReplyScore>,
    simulator_kept_persona: bool,
    simulator_issue: String,
    summary: String,
}

#[derive(Debug, Deserialize)]
struct ReplyScore {
    score: f64,
    reasoning: String,
}

/// The verdict schema for these criteria: every criterion required, `pass_fail` ones only 0 or
/// 10, no other keys (so it is valid for strict structured-output modes too).
pub fn schema(criteria: &[CriterionConfig]) -> Value {
    let mut properties = serde_json::Map::new();
    for c in criteria {
        let score = match c.scale {
            Scale::ZeroToTen => json!({"type": "number", "minimum": 0, "maximum": 10}),
            Scale::PassFail => json!({"type": "number", "enum": [0, 10]}),
        };
        properties.insert(
            c.id.clone(),
            json!({"type": "object", "additionalProperties": false,
                   "required": ["score", "reasoning"],
                   "properties": {"score": score, "reasoning": {"type": "string"}}}),
        );
    }
    let ids: Vec<&str> = criteria.iter().map(|c| c.id.as_str()).collect();
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["scores", "simulator_kept_persona", "simulator_issue", "summary"],
        "properties": {
            "scores": {"type": "object", "additionalProperties": false,
                       "required": ids, "properties": properties},
            "simulator_kept_persona": {"type": "boolean"},
            "simulator_issue": {"type": "string"},
            "summary": {"type": "string"}
        }
    })
}

const SYSTEM: &str = "You are a strict, fair evaluator of an AI assistant's conversations. You \
score the ASSISTANT's behaviour against each criterion's rubric, using only evidence in the \
transcript, its tool calls and results, and the state checks. The user in the transcript is \
simulated by another model playing a persona: judge separately whether that simulated user kept \
to its persona (used only the facts it was given, pursued its goal, did not act as the \
assistant). Do not penalise the assistant for the simulated user's mistakes. Answer with the \
JSON object the schema describes and nothing else.";

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!(
            "{}… [{} more characters]",
            &text[..i],
            text[i..].chars().count()
        ),
        None => text.to_owned(),
    }
}

/// The judge's prompt.
pub fn prompt(
    criteria: &[CriterionConfig],
    scenario: &Scenario,
    assistant_system_prompt: &str,
    fixture: Option<&Value>,
    transcript: &Transcript,
    checks: &[CheckResult],
) -> String {
    let c = &scenario.config;
    let mut p = String::new();
    let _ = writeln!(
        p,
        "# Scenario: {} ({})\n{}\n",
        c.name,
        c.id,
        c.description.trim()
    );
    let _ = writeln!(
        p,
        "## The simulated user's persona\n{}\n",
        c.persona_prompt.trim()
    );
    let _ = writeln!(
        p,
        "## The assistant's system prompt\n{}\n",
        assistant_system_prompt.trim()
    );
    if let Some(fixture) = fixture {
        let _ = writeln!(
            p,
            "## The fixture (the user profile the assistant's tools serve)\n```json\n{}\n```\n",
            serde_json::to_string_pretty(fixture).unwrap_or_default()
        );
    }
    let _ = writeln!(p, "## Criteria (score each 0-10)");
    for criterion in criteria {
        let weight = scenario.weights.get(&criterion.id).copied().unwrap_or(0.0);
        let scale = match criterion.scale {
            Scale::ZeroToTen => "0-10",
            Scale::PassFail => "pass/fail: 10 = pass, 0 = fail",
        };
        let _ = writeln!(
            p,
            "### `{}`: {} ({scale}; weight {weight:.2})\n{}\n",
            criterion.id,
            criterion.display_name(),
            criterion.rubric.trim()
        );
    }
    let _ = writeln!(p, "## Transcript");
    for turn in &transcript.turns {
        let who = match turn.role {
            Speaker::User => "USER (simulated)",
            Speaker::Assistant => "ASSISTANT",
        };
        for call in &turn.tool_calls {
            let _ = writeln!(
                p,
                "[tool call] {}({}) -> {}{}",
                call.name,
                call.arguments,
                if call.is_error { "ERROR: " } else { "" },
                cut(&call.result, RESULT_CHARS)
            );
        }
        let _ = writeln!(p, "{who}: {}\n", turn.content.trim());
    }
    let _ = writeln!(p, "(The conversation ended by {}.)\n", transcript.ended_by);
    if !checks.is_empty() {
        let _ = writeln!(p, "## State checks after the conversation");
        for check in checks {
            let status = match check.status {
                CheckStatus::Passed => "passed",
                CheckStatus::Failed => "FAILED",
                CheckStatus::Error => "could not be evaluated",
            };
            let _ = writeln!(p, "- {}: {status}", check.name);
            for d in &check.details {
                let _ = writeln!(p, "  - {d}");
            }
        }
        p.push('\n');
    }
    let _ = write!(
        p,
        "Score every criterion with its reasoning (cite turns or tool calls), say whether the \
         simulated user kept to its persona (and if not, what it did: `simulator_issue`, else an \
         empty string), and give a one-paragraph `summary`."
    );
    p
}

/// Bumped whenever the judge's prompt layout changes in a way that can change verdicts; part
/// of [`version`].
const PROMPT_LAYOUT: &str = "judge-prompt-2";

/// The judge's version: the first 16 hex digits of a SHA-256 over everything that shapes its
/// verdicts besides the transcript: the instructions, the prompt layout, the answer schema,
/// and the suite's criteria (ids, names, scales, rubrics, default weights), each scenario's
/// weights and the pass threshold. Reports carry it; comparisons warn when two differ.
pub fn version(suite: &crate::suite::Suite) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    let mut add = |part: &str| {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    };
    add(SYSTEM);
    add(PROMPT_LAYOUT);
    add(&schema(suite.criteria()).to_string());
    for c in suite.criteria() {
        add(&c.id);
        add(c.display_name());
        add(&c.scale.to_string());
        add(&c.rubric);
        add(&c.weight.to_string());
    }
    for scenario in &suite.scenarios {
        add(&scenario.config.id);
        for (id, w) in &scenario.weights {
            add(id);
            add(&w.to_string());
        }
    }
    add(&suite.config.pass_threshold.to_string());
    let digest = h.finalize();
    digest.iter().take(8).fold(String::new(), |mut out, b| {
        use std::fmt::Write as _;
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// Which of several judge samples a call is: sample 0 asks as a single judge would; later
/// samples list the criteria in another order (a seeded shuffle) and carry a seed, so each is
/// its own call (and its own cache entry) and order effects show up as disagreement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// 0-based.
    pub index: u32,
    /// How many samples in all.
    pub of: u32,
}

impl Sample {
    /// Sample `index` of `of`.
    pub fn new(index: u32, of: u32) -> Sample {
        Sample { index, of }
    }

    /// One judge, as without `--judge-samples`.
    pub fn single() -> Sample {
        Sample { index: 0, of: 1 }
    }

    /// The criteria in this sample's order.
    fn order(self, criteria: &[CriterionConfig]) -> Vec<&CriterionConfig> {
        let mut order: Vec<&CriterionConfig> = criteria.iter().collect();
        if self.index > 0 {
            // Fisher-Yates with splitmix64, seeded by the sample: the same order every run.
            let mut state = 0x9E37_79B9_7F4A_7C15_u64.wrapping_mul(u64::from(self.index) + 1);
            for i in (1..order.len()).rev() {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^= z >> 31;
                let j = usize::try_from(z % (i as u64 + 1)).unwrap_or(0);
                order.swap(i, j);
            }
        }
        order
    }
}

/// Asks the judge, validates the reply, and weighs the scores.
#[allow(clippy::too_many_arguments)]
pub async fn judge(
    model: &dyn ChatModel,
    criteria: &[CriterionConfig],
    scenario: &Scenario,
    assistant_system_prompt: &str,
    fixture: Option<&Value>,
    transcript: &Transcript,
    checks: &[CheckResult],
    sample: Sample,
) -> Result<(Judgement, Usage), ProviderError> {
    let ordered: Vec<CriterionConfig> = sample.order(criteria).into_iter().cloned().collect();
    let check = SchemaCheck::new("verdict", schema(&ordered))?;
    let mut request = ChatRequest::new(
        Some(SYSTEM.to_owned()),
        prompt(
            &ordered,
            scenario,
            assistant_system_prompt,
            fixture,
            transcript,
            checks,
        ),
        JUDGE_MAX_TOKENS,
    );
    if sample.index > 0 {
        request.seed = Some(u64::from(sample.index));
    }
    let answer = ask_structured::<Reply>(
        model,
        request,
        &check,
        DEFAULT_STRUCTURED_RETRIES,
        &|reply| {
            if reply.scores.values().any(|s| s.reasoning.trim().is_empty()) {
                return Err("every score needs its reasoning".to_owned());
            }
            Ok(())
        },
    )
    .await
    .map_err(|e| {
        if e.model().is_some() {
            e
        } else {
            e.with_model(model.model().to_owned())
        }
    })?;
    let reply = answer.value;
    let mut scores = Vec::with_capacity(criteria.len());
    let mut overall = 0.0;
    for c in criteria {
        // The schema requires every criterion.
        let Some(s) = reply.scores.get(&c.id) else {
            continue;
        };
        let weight = scenario.weights.get(&c.id).copied().unwrap_or(0.0);
        overall += weight * s.score;
        scores.push(CriterionScore {
            id: c.id.clone(),
            name: c.display_name().to_owned(),
            scale: c.scale,
            score: s.score,
            weight,
            reasoning: s.reasoning.trim().to_owned(),
        });
    }
    Ok((
        Judgement {
            scores,
            overall,
            simulator_kept_persona: reply.simulator_kept_persona,
            simulator_issue: reply.simulator_issue.trim().to_owned(),
            summary: reply.summary.trim().to_owned(),
            calls: answer.calls,
        },
        answer.usage,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn criteria() -> Vec<CriterionConfig> {
        serde_json::from_value(json!([
            {"id": "accuracy", "weight": 0.5, "rubric": "r"},
            {"id": "ypt", "scale": "pass_fail", "weight": 0.5, "rubric": "r"}
        ]))
        .unwrap()
    }

    #[test]
    fn the_schema_requires_every_criterion_and_limits_pass_fail() {
        let check = SchemaCheck::new("verdict", schema(&criteria())).unwrap();
        let good = r#"{"scores": {"accuracy": {"score": 7.5, "reasoning": "ok"},
                                  "ypt": {"score": 10, "reasoning": "cc'd"}},
                       "simulator_kept_persona": true, "simulator_issue": "", "summary": "s"}"#;
        assert!(check.parse::<Reply>(good, &|_| Ok(())).is_ok());
        for bad in [
            good.replace("\"score\": 10", "\"score\": 5"),
            good.replace("7.5", "11"),
            good.replace(
                r#""ypt": {"score": 10, "reasoning": "cc'd"}"#,
                r#""extra": 1"#,
            ),
            good.replace("\"simulator_kept_persona\": true, ", ""),
        ] {
            assert!(check.parse::<Reply>(&bad, &|_| Ok(())).is_err(), "{bad}");
        }
    }
}
