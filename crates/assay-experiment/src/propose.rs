//! Reflective prompt proposals (`assay optimize --propose-rounds R`), after GEPA (Agrawal et
//! al., 2025, arXiv 2507.19457): a proposer model reads what one agent's current best prompt
//! did on optimization cases the best combination gets wrong — the whole trace: question,
//! context files, every agent's output in order, the final answer, the expected answer, the
//! grader's scores and reasoning — reflects on what went wrong, and writes a revised prompt
//! for that agent.
//!
//! This module holds the parts that do not run cases: which cases are shown ([`minibatch`]),
//! the request and its structured reply ([`ask`]), the guards ([`guard`]) and the provenance
//! files ([`write_provenance`]). The loop — the minibatch check, the space growing, the
//! journal — is in [`crate::run`].
//!
//! **Guards.** A proposal is refused, with the reason, and never becomes a trial when it is
//! empty, when it is (after trimming) the text of a prompt the agent already has, or when it
//! drops a required marker: `FINAL ANSWER:` whenever the parent prompt has it (any case), and
//! whatever `[optimize.propose.required]` lists for the agent.
//!
//! **Provenance.** A proposal that joins its agent's list is written to
//! `prompt_variations/<agent>/proposed/<experiment>-r<round>-<k>.txt`, so later experiments
//! read it like any variant; every proposal, refused ones included, gets the sidecar
//! `<experiment>-r<round>-<k>.json` (a [`ProposalRecord`] plus the questions shown).

use std::path::{Path, PathBuf};

use assay_core::experiment::{CaseResult, ProposalRecord, ProposalStatus};
use assay_providers::{
    ChatModel, ChatRequest, DEFAULT_STRUCTURED_RETRIES, ProviderError, SchemaCheck, ask_structured,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::cases::LoadedCase;
use crate::prompts::{AgentPrompts, PROPOSED_DIR};
use crate::target::Answered;

/// The marker a final answer follows (GAIA's convention, the chain's finalizer).
pub const FINAL_ANSWER: &str = "FINAL ANSWER:";

/// Characters of one context file or one agent output shown to the proposer.
const SHOWN_CHARS: usize = 3000;

/// Indices (into `results`) of the cases to show a proposer, at most `size`: the cases the
/// parent got wrong (not factually correct, or under the rubric threshold), worst first
/// (incorrect before correct, then the lower composite score, then file order). When more
/// than `size` fail, the window starts `offset × size` further along (wrapping), so
/// successive proposals see different failures. When none fails, the lowest-scoring cases.
pub fn minibatch(results: &[CaseResult], size: usize, offset: usize) -> Vec<usize> {
    let worst_first = |a: &usize, b: &usize| {
        let (x, y) = (&results[*a], &results[*b]);
        x.factually_correct
            .cmp(&y.factually_correct)
            .then(x.composite_score.total_cmp(&y.composite_score))
            .then(x.line.cmp(&y.line))
    };
    let mut failing: Vec<usize> = (0..results.len())
        .filter(|&i| results[i].error.is_none())
        .filter(|&i| !results[i].factually_correct || !results[i].rubric_pass)
        .collect();
    failing.sort_by(worst_first);
    if failing.is_empty() {
        let mut all: Vec<usize> = (0..results.len())
            .filter(|&i| results[i].error.is_none())
            .collect();
        all.sort_by(worst_first);
        all.truncate(size);
        return all;
    }
    if failing.len() <= size {
        return failing;
    }
    let start = (offset * size) % failing.len();
    (0..size)
        .map(|j| failing[(start + j) % failing.len()])
        .collect()
}

/// One case as the proposer sees it.
pub struct Shown<'a> {
    /// The case and its context files.
    pub case: &'a LoadedCase,
    /// How the parent combination did on it.
    pub result: &'a CaseResult,
    /// The agents' outputs on it (the parent's prompts).
    pub trace: &'a Answered,
}

/// The markers a proposal for an agent must keep: `FINAL ANSWER:` when the parent has it, and
/// the configured ones.
pub fn required_markers(parent: &str, configured: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    if parent.to_uppercase().contains(FINAL_ANSWER) {
        out.push(FINAL_ANSWER.to_owned());
    }
    for m in configured {
        if !m.is_empty() && !out.contains(m) {
            out.push(m.clone());
        }
    }
    out
}

/// Why a proposal may not join the agent's list, if it may not (see the module docs).
pub fn guard(text: &str, agent: &AgentPrompts, required: &[String]) -> Result<(), String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty: the proposer returned no prompt".into());
    }
    if let Some(p) = agent.prompts.iter().find(|p| p.text.trim() == t) {
        return Err(format!(
            "a copy of {}'s prompt #{} ({})",
            agent.agent,
            p.index,
            p.file
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
        ));
    }
    let upper = t.to_uppercase();
    let missing: Vec<&str> = required
        .iter()
        .filter(|m| {
            if m.as_str() == FINAL_ANSWER {
                !upper.contains(FINAL_ANSWER)
            } else {
                !t.contains(m.as_str())
            }
        })
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "drops the required output format: {}",
            missing
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(())
}

fn clip(text: &str) -> String {
    let n = text.chars().count();
    if n <= SHOWN_CHARS {
        text.to_owned()
    } else {
        let kept: String = text.chars().take(SHOWN_CHARS).collect();
        format!("{kept}\n[… {} more characters]", n - SHOWN_CHARS)
    }
}

const SYSTEM: &str = "You improve the instructions of one agent in a system of language-model \
agents that answer questions together. You are shown the agent's current instructions and \
cases the system got wrong or scored low on, each with everything that happened: the \
question, its files, what every agent wrote in order, the final answer, the answer that was \
expected and the grader's verdict. Work out what the failures have in common and what the \
agent should do differently, then write its complete new instructions. Keep what works; keep \
every output format the instructions require. Write general guidance, not the answers to \
these particular cases. Answer with the JSON object the schema describes and nothing else.";

/// The proposer's prompt for `agent`.
pub fn user_prompt(
    agent: &str,
    parent: &str,
    shown: &[Shown<'_>],
    required: &[String],
    threshold: f64,
) -> String {
    let mut out = format!(
        "# The agent\n{agent}\n\n# Its current instructions\n<instructions>\n{parent}\n</instructions>\n\n# Cases\n"
    );
    for (i, s) in shown.iter().enumerate() {
        let r = s.result;
        out.push_str(&format!(
            "\n## Case {} (line {})\nQuestion: {}\n",
            i + 1,
            r.line,
            r.question
        ));
        for f in &s.case.context {
            out.push_str(&format!("File {}:\n{}\n", f.path, clip(&f.text)));
        }
        if s.trace.steps.is_empty() {
            out.push_str("(the system does not report its agents' outputs)\n");
        }
        for (who, text) in &s.trace.steps {
            let mark = if who == agent { " (this agent)" } else { "" };
            out.push_str(&format!("Output of {who}{mark}:\n{}\n", clip(text)));
        }
        out.push_str(&format!(
            "Final answer: {}\nExpected answer: {}\nFactually correct: {}\n",
            r.output.as_deref().unwrap_or("(none)"),
            r.expected,
            if r.factually_correct { "yes" } else { "no" }
        ));
        match &r.rubric {
            Some(g) => out.push_str(&format!(
                "Grader: overall {:.2} (pass at {threshold:.2}), factuality {:.2}, completeness {:.2}, relevance {:.2}; reasoning: {}\n",
                g.overall, g.factuality, g.completeness, g.relevance, g.reasoning
            )),
            None => out.push_str(&format!("Grader: overall {:.2}\n", r.composite_score)),
        }
    }
    out.push_str("\n# Task\nIn `reasoning`, say what went wrong in these cases and what this agent should change. In `prompt`, write the agent's complete new instructions.");
    if !required.is_empty() {
        out.push_str(&format!(
            " The new instructions must still contain {}.",
            required
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(" and ")
        ));
    }
    out.push('\n');
    out
}

/// The JSON schema of the proposer's reply.
pub fn reply_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["reasoning", "prompt"],
        "properties": {
            "reasoning": {"type": "string"},
            "prompt": {"type": "string"}
        }
    })
}

/// The proposer's reply.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct Reply {
    /// What went wrong and what to change.
    pub reasoning: String,
    /// The new prompt.
    pub prompt: String,
}

/// The request of proposal number `sequence` (its seed, so two proposals from the same
/// cases are two calls and two cache entries).
pub fn request(user: String, max_tokens: u32, sequence: u64) -> ChatRequest {
    let mut r = ChatRequest::new(Some(SYSTEM.to_owned()), user, max_tokens);
    r.temperature = Some(1.0);
    r.seed = Some(sequence);
    r
}

/// Sends a proposal request through the (wrapped) proposer model.
pub async fn ask(model: &dyn ChatModel, request: ChatRequest) -> Result<Reply, ProviderError> {
    let schema = SchemaCheck::new("prompt_proposal", reply_schema())?;
    Ok(
        ask_structured::<Reply>(model, request, &schema, DEFAULT_STRUCTURED_RETRIES, &|_| {
            Ok(())
        })
        .await?
        .value,
    )
}

/// The proposal's file stem: `<experiment>-r<round>-<k>`.
pub fn stem(experiment: &str, round: usize, k: usize) -> String {
    format!("{experiment}-r{round}-{k}")
}

/// `prompt_variations/<agent>/proposed/`.
pub fn proposed_dir(project: &Path, agent: &str) -> PathBuf {
    project
        .join("prompt_variations")
        .join(agent)
        .join(PROPOSED_DIR)
}

/// The sidecar: the record and the questions shown.
#[derive(Debug, Serialize)]
struct Sidecar<'a> {
    experiment: &'a str,
    #[serde(flatten)]
    record: &'a ProposalRecord,
    questions_shown: Vec<&'a str>,
}

/// Writes a proposal's prompt file (accepted ones) and its sidecar, atomically; returns the
/// prompt file's path relative to the project (accepted ones).
pub fn write_provenance(
    project: &Path,
    experiment: &str,
    record: &ProposalRecord,
    questions: &[&str],
) -> std::io::Result<Option<String>> {
    let dir = proposed_dir(project, &record.agent);
    std::fs::create_dir_all(&dir)?;
    let stem = stem(experiment, record.round, record.k);
    let sidecar = Sidecar {
        experiment,
        record,
        questions_shown: questions.to_vec(),
    };
    let json = serde_json::to_vec_pretty(&sidecar).map_err(std::io::Error::other)?;
    assay_harness::results::write_replace(&dir.join(format!("{stem}.json")), &json)?;
    if matches!(record.status, ProposalStatus::Accepted { .. }) {
        let file = dir.join(format!("{stem}.txt"));
        assay_harness::results::write_replace(&file, record.text.as_bytes())?;
        let rel = file.strip_prefix(project).unwrap_or(&file);
        return Ok(Some(rel.display().to_string().replace('\\', "/")));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::PromptFile;
    use crate::stats::tests::result;

    #[test]
    fn the_minibatch_is_the_worst_failures_in_turn_else_the_lowest_scores() {
        let rs = vec![
            result(1, true, 1.0),
            result(2, false, 0.4),
            result(3, false, 0.2),
            result(4, true, 0.5),
            result(5, false, 0.2),
        ];
        assert_eq!(minibatch(&rs, 2, 0), vec![2, 4]);
        assert_eq!(minibatch(&rs, 2, 1), vec![1, 3]);
        assert_eq!(minibatch(&rs, 5, 7), vec![2, 4, 1, 3]);
        let fine = vec![result(1, true, 1.0), result(2, true, 0.9)];
        assert_eq!(minibatch(&fine, 1, 0), vec![1]);
    }

    fn agent() -> AgentPrompts {
        AgentPrompts {
            agent: "finalizer".into(),
            prompts: vec![PromptFile {
                index: 0,
                file: "prompts/finalizer_system_prompt.txt".into(),
                text: "Answer. End with FINAL ANSWER: <answer>\n".into(),
            }],
        }
    }

    #[test]
    fn guards_refuse_empty_copies_and_dropped_formats() {
        let a = agent();
        let req = required_markers(&a.prompts[0].text, &["<<json>>".into()]);
        assert_eq!(req, vec![FINAL_ANSWER.to_owned(), "<<json>>".to_owned()]);
        assert!(guard("  \n", &a, &req).unwrap_err().contains("empty"));
        assert!(
            guard("Answer. End with FINAL ANSWER: <answer>", &a, &req)
                .unwrap_err()
                .contains("copy of finalizer's prompt #0")
        );
        let e = guard("Answer with units. <<json>>", &a, &req).unwrap_err();
        assert!(e.contains("`FINAL ANSWER:`") && !e.contains("json"), "{e}");
        assert!(guard("Units. final answer: x <<json>>", &a, &req).is_ok());
    }

    #[test]
    fn the_prompt_shows_the_whole_trace() {
        let case = LoadedCase {
            case: crate::cases::TestCase {
                line: 3,
                question: "How far?".into(),
                files: vec!["notes.txt".into()],
                answer: "5 km".into(),
                correctness: None,
                pattern: None,
            },
            context: vec![crate::cases::ContextFile {
                path: "notes.txt".into(),
                text: "It is five kilometres.".into(),
            }],
        };
        let mut r = result(3, false, 0.2);
        r.question = "How far?".into();
        r.expected = "5 km".into();
        let trace = Answered {
            final_answer: "b".into(),
            steps: vec![
                ("planner".into(), "plan".into()),
                ("finalizer".into(), "FINAL ANSWER: 5".into()),
            ],
        };
        let shown = [Shown {
            case: &case,
            result: &r,
            trace: &trace,
        }];
        let p = user_prompt(
            "finalizer",
            "Be brief.",
            &shown,
            &[FINAL_ANSWER.into()],
            0.8,
        );
        for needle in [
            "Be brief.",
            "How far?",
            "It is five kilometres.",
            "Output of planner:\nplan",
            "Output of finalizer (this agent):",
            "Expected answer: 5 km",
            "Factually correct: no",
            "`FINAL ANSWER:`",
        ] {
            assert!(p.contains(needle), "{needle} in {p}");
        }
    }
}
