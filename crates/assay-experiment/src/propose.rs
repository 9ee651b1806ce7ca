//! Reflective prompt proposals (`assay optimize --propose-rounds R`), after GEPA (Agrawal et
//! al., 2025, arXiv 2507.19457): a proposer model reads what one agent's current best prompt
//! did on optimization cases the best combination gets wrong — the whole trace: question,
//! context files, every agent's output in order, the final answer, the expected answer, the
//! grader's scores and reasoning — reflects on what went wrong, and writes a revised prompt
//! for that agent.
//!
//! This module holds the parts that do not run cases: which cases are shown ([`minibatch`]),
//! which agent a round revises ([`Selector`], [`blame_prompt`], [`ask_blame`], [`choose`]),
//! the request and its structured reply ([`ask`]), the guards ([`guard`]) and the provenance
//! files ([`write_provenance`]). The loop — the minibatch check, the space growing, the
//! journal — is in [`crate::run`].
//!
//! **Which agent.** With `selector = "blame"` (the default) a round starts with one more
//! structured call to the proposer: it is shown every agent's input and output on each
//! failing case the round's first proposal will see, and names per case the agent whose
//! output went wrong first, with a reason. The votes are counted among the agents that may
//! be revised; the most named wins, ties go to the one earlier in the chain. When the call
//! fails, its reply does not parse, no case fails or no vote names an agent that may be
//! revised, the round falls back to the next agent in name order and the record says why.
//! `selector = "all"` revises every agent that may be revised, each in its own proposal.
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assay_core::experiment::{
    AgentChoice, BlameVote, CaseResult, ChoiceRule, ProposalRecord, ProposalStatus,
};
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

impl<'a> Shown<'a> {
    /// Each traced case (case, result, trace) as the proposer sees it.
    pub fn all(traced: &'a [(LoadedCase, CaseResult, Answered)]) -> Vec<Shown<'a>> {
        traced
            .iter()
            .map(|(case, result, trace)| Shown {
                case,
                result,
                trace,
            })
            .collect()
    }
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

/// Which agents a round's proposals revise (`[optimize.propose] selector`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selector {
    /// The agent the failing traces blame (see the module docs).
    #[default]
    Blame,
    /// Every agent that may be revised, each in its own proposal (GEPA's `all`).
    All,
}

impl Selector {
    /// The selector named in the settings (`blame` or `all`).
    pub fn parse(name: &str) -> Option<Selector> {
        match name {
            "blame" => Some(Selector::Blame),
            "all" => Some(Selector::All),
            _ => None,
        }
    }
}

/// Whether the case failed (what a proposal is written to fix).
pub fn failing(result: &CaseResult) -> bool {
    result.error.is_none() && (!result.factually_correct || !result.rubric_pass)
}

const BLAME_SYSTEM: &str = "You find which agent is at fault in a system of language-model \
agents that answer questions together, each agent reading the question, its files and the \
outputs of the agents before it. You are shown cases the system got wrong, each with every \
agent's instructions, input and output in the order they ran, the final answer and the answer \
that was expected. For each case, name the agent whose output went wrong first: the earliest \
output that is wrong, misses what the later agents needed, or loses what the expected answer \
requires. Give a short reason. Answer with the JSON object the schema describes and nothing \
else.";

/// The blame request's system text when the target reports no trace: the agents'
/// instructions and the failing cases only.
const BLAME_UNTRACED_SYSTEM: &str = "You find which agent is most likely at fault in a system \
of language-model agents that answer questions together, each agent reading the question, its \
files and the outputs of the agents before it. Their outputs were not recorded: you are shown \
each agent's instructions, in the order the agents run, and cases the system got wrong, each \
with its question, the final answer and the answer that was expected. For each case, name the \
agent whose instructions most likely led to the wrong answer: the earliest agent whose \
instructions miss, mislead or lose what the expected answer requires. Give a short reason. \
Answer with the JSON object the schema describes and nothing else.";

/// The blame request's prompt: each case's whole trace, every agent's instructions (`prompts`),
/// what it read and what it wrote, in order. When no case has a trace (the target reports no
/// agent outputs), every agent's instructions once, in `chain` order, then the cases.
pub fn blame_prompt(
    shown: &[Shown<'_>],
    prompts: &BTreeMap<String, String>,
    chain: &[String],
) -> String {
    let mut out = String::new();
    if untraced(shown) {
        out.push_str("# Agents, in the order they run\n");
        for (i, who) in chain.iter().enumerate() {
            out.push_str(&format!(
                "\n## {}. {who}\n<instructions>\n{}\n</instructions>\n",
                i + 1,
                clip(prompts.get(who).map_or("", String::as_str).trim())
            ));
        }
        out.push('\n');
    }
    out.push_str("# Cases\n");
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
        for (j, (who, text)) in s.trace.steps.iter().enumerate() {
            let input = if j == 0 {
                "the question and its files".to_owned()
            } else {
                let before: Vec<&str> =
                    s.trace.steps[..j].iter().map(|(w, _)| w.as_str()).collect();
                format!(
                    "the question, its files and the outputs of {}",
                    before.join(", ")
                )
            };
            out.push_str(&format!(
                "### Step {}: {who}\nInstructions of {who}:\n<instructions>\n{}\n</instructions>\nInput: {input}\nOutput of {who}:\n{}\n",
                j + 1,
                clip(prompts.get(who).map_or("", String::as_str).trim()),
                clip(text)
            ));
        }
        out.push_str(&format!(
            "Final answer: {}\nExpected answer: {}\nFactually correct: {}\n",
            r.output.as_deref().unwrap_or("(none)"),
            r.expected,
            if r.factually_correct { "yes" } else { "no" }
        ));
    }
    out.push_str(&format!(
        "\n# Task\nFor each of the {} cases, in `cases`, give its number (`case`), the agent whose output went wrong first (`agent`) and why (`reason`).\n",
        shown.len()
    ));
    out
}

/// The JSON schema of the blame reply; `agents` are the names allowed.
pub fn blame_schema(agents: &[String]) -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["cases"],
        "properties": {
            "cases": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["case", "agent", "reason"],
                    "properties": {
                        "case": {"type": "integer"},
                        "agent": {"type": "string", "enum": agents},
                        "reason": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// The blame reply.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct BlameReply {
    /// One verdict per case shown.
    pub cases: Vec<BlameCase>,
}

/// One case's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct BlameCase {
    /// The case's number in the request (1-based).
    pub case: usize,
    /// The agent whose output went wrong first.
    pub agent: String,
    /// Why.
    pub reason: String,
}

/// Whether no shown case has a trace (the target reports no agent outputs).
fn untraced(shown: &[Shown<'_>]) -> bool {
    shown.iter().all(|s| s.trace.steps.is_empty())
}

/// Asks the (wrapped) proposer which agent each shown case's failure starts with; returns one
/// vote per case, by the case's line. `chain` names the agents of the traces (without traces:
/// every agent, in the order they run).
pub async fn ask_blame(
    model: &dyn ChatModel,
    shown: &[Shown<'_>],
    prompts: &BTreeMap<String, String>,
    chain: &[String],
    max_tokens: u32,
    round: usize,
) -> Result<Vec<BlameVote>, ProviderError> {
    let schema = SchemaCheck::new("agent_blame", blame_schema(chain))?;
    let system = if untraced(shown) {
        BLAME_UNTRACED_SYSTEM
    } else {
        BLAME_SYSTEM
    };
    let mut request = ChatRequest::new(
        Some(system.to_owned()),
        blame_prompt(shown, prompts, chain),
        max_tokens,
    );
    request.temperature = Some(0.0);
    request.seed = Some(round as u64);
    let n = shown.len();
    let check = |reply: &BlameReply| -> Result<(), String> {
        let mut seen = vec![false; n];
        for c in &reply.cases {
            if c.case == 0 || c.case > n {
                return Err(format!(
                    "case {} does not exist: the cases are 1 to {n}",
                    c.case
                ));
            }
            if !chain.contains(&c.agent) {
                return Err(format!("`{}` is not an agent of the system", c.agent));
            }
            seen[c.case - 1] = true;
        }
        match seen.iter().position(|s| !s) {
            Some(i) => Err(format!("case {} has no verdict", i + 1)),
            None => Ok(()),
        }
    };
    let reply =
        ask_structured::<BlameReply>(model, request, &schema, DEFAULT_STRUCTURED_RETRIES, &check)
            .await?
            .value;
    let mut votes: Vec<BlameVote> = Vec::with_capacity(n);
    for c in reply.cases {
        let line = shown[c.case - 1].result.line;
        if votes.iter().all(|v| v.line != line) {
            votes.push(BlameVote {
                line,
                agent: c.agent,
                reason: c.reason.trim().to_owned(),
            });
        }
    }
    Ok(votes)
}

/// The agents the votes name among `allowed`, most named first, ties by position in `chain`
/// (agents not in the chain after, by name), with their counts.
pub fn tally(votes: &[BlameVote], allowed: &[String], chain: &[String]) -> Vec<(String, usize)> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for v in votes.iter().filter(|v| allowed.contains(&v.agent)) {
        match counts.iter_mut().find(|(a, _)| *a == v.agent) {
            Some((_, n)) => *n += 1,
            None => counts.push((v.agent.clone(), 1)),
        }
    }
    let position = |a: &str| chain.iter().position(|c| c == a).unwrap_or(usize::MAX);
    counts.sort_by(|(a, x), (b, y)| y.cmp(x).then(position(a).cmp(&position(b))).then(a.cmp(b)));
    counts
}

fn vote_counts(votes: &[BlameVote]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for v in votes {
        *counts.entry(v.agent.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(a, n)| format!("{a} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The agents a round's `count` proposals revise, each with why: `blame` is the blame call's
/// outcome (`Err` with why it gave none), `allowed` the agents that may be revised in name
/// order, `chain` the order they run in, `turn` the round-robin position of the round's first
/// proposal (used only when falling back).
pub fn choose(
    selector: Selector,
    blame: Result<Vec<BlameVote>, String>,
    allowed: &[String],
    chain: &[String],
    count: usize,
    turn: usize,
) -> Vec<(String, AgentChoice)> {
    if allowed.is_empty() {
        return Vec::new();
    }
    if selector == Selector::All {
        let mut order: Vec<&String> = chain.iter().filter(|a| allowed.contains(a)).collect();
        order.extend(allowed.iter().filter(|a| !chain.contains(a)));
        return (0..count)
            .map(|k| {
                let choice = AgentChoice {
                    rule: ChoiceRule::All,
                    votes: Vec::new(),
                    why: "all agents (selector all)".into(),
                };
                (order[k % order.len()].clone(), choice)
            })
            .collect();
    }
    if allowed.len() == 1 {
        let choice = AgentChoice {
            rule: ChoiceRule::Only,
            votes: Vec::new(),
            why: format!("the only agent that may be revised ({})", allowed[0]),
        };
        return (0..count)
            .map(|_| (allowed[0].clone(), choice.clone()))
            .collect();
    }
    // The fallback goes round the agents in the order they run (agents outside the chain
    // after, by name): a failure shows late but often starts early.
    let mut in_chain_order: Vec<&String> = chain.iter().filter(|a| allowed.contains(a)).collect();
    in_chain_order.extend(allowed.iter().filter(|a| !chain.contains(a)));
    let fallback = |votes: Vec<BlameVote>, why: String| -> Vec<(String, AgentChoice)> {
        (0..count)
            .map(|k| {
                let choice = AgentChoice {
                    rule: ChoiceRule::RoundRobin,
                    votes: votes.clone(),
                    why: format!("round-robin fallback: {why}"),
                };
                (
                    in_chain_order[(turn + k) % in_chain_order.len()].clone(),
                    choice,
                )
            })
            .collect()
    };
    let votes = match blame {
        Ok(votes) => votes,
        Err(why) => return fallback(Vec::new(), why),
    };
    let ranked = tally(&votes, allowed, chain);
    if ranked.is_empty() {
        let why = if votes.is_empty() {
            "the blame call gave no votes".to_owned()
        } else {
            format!(
                "no failing case blamed an agent that may be revised (votes: {})",
                vote_counts(&votes)
            )
        };
        return fallback(votes, why);
    }
    (0..count)
        .map(|k| {
            let (agent, n) = &ranked[k % ranked.len()];
            let reason = votes
                .iter()
                .find(|v| v.agent == *agent)
                .map_or("", |v| v.reason.as_str());
            let tie = ranked
                .iter()
                .filter(|(_, m)| m == n)
                .count()
                > 1;
            let why = format!(
                "named first in {n} of {} failing cases (votes: {}){}; the proposer's reason: {reason}",
                votes.len(),
                vote_counts(&votes),
                if tie { ", a tie broken by chain order" } else { "" }
            );
            let choice = AgentChoice {
                rule: ChoiceRule::Blame,
                votes: votes.clone(),
                why,
            };
            (agent.clone(), choice)
        })
        .collect()
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
    assay_project::results::write_replace(&dir.join(format!("{stem}.json")), &json)?;
    if matches!(record.status, ProposalStatus::Accepted { .. }) {
        let file = dir.join(format!("{stem}.txt"));
        assay_project::results::write_replace(&file, record.text.as_bytes())?;
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
                assert: None,
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

    fn vote(line: usize, agent: &str) -> BlameVote {
        BlameVote {
            line,
            agent: agent.into(),
            reason: format!("{agent} went wrong on {line}"),
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn blame_votes_are_counted_among_the_allowed_agents_ties_by_chain_order() {
        let chain = names(&["planner", "expert", "finalizer"]);
        let allowed = names(&["expert", "finalizer", "planner"]);
        let votes = [
            vote(1, "finalizer"),
            vote(2, "expert"),
            vote(3, "finalizer"),
        ];
        assert_eq!(
            tally(&votes, &allowed, &chain),
            vec![("finalizer".into(), 2), ("expert".into(), 1)]
        );
        // A tie goes to the agent earlier in the chain, not in name order.
        let tie = [vote(1, "finalizer"), vote(2, "planner")];
        assert_eq!(tally(&tie, &allowed, &chain)[0], ("planner".into(), 1));
        // Votes for an agent that may not be revised do not count.
        let only = names(&["expert", "finalizer"]);
        let votes = [vote(1, "planner"), vote(2, "planner"), vote(3, "finalizer")];
        assert_eq!(tally(&votes, &only, &chain), vec![("finalizer".into(), 1)]);
        let picked = choose(Selector::Blame, Ok(votes.to_vec()), &only, &chain, 2, 0);
        assert_eq!(picked.len(), 2);
        assert!(picked.iter().all(|(a, _)| a == "finalizer"));
        let c = &picked[0].1;
        assert_eq!(c.rule, ChoiceRule::Blame);
        assert_eq!(c.votes.len(), 3);
        assert!(
            c.why
                .starts_with("named first in 1 of 3 failing cases (votes: finalizer 1, planner 2)")
                && c.why
                    .ends_with("the proposer's reason: finalizer went wrong on 3"),
            "{}",
            c.why
        );
    }

    #[test]
    fn blame_falls_back_to_round_robin_with_the_reason_and_all_takes_every_agent() {
        let chain = names(&["planner", "expert", "finalizer"]);
        let allowed = names(&["expert", "finalizer", "planner"]);
        // The call failed: the next agents in the order they run (not by name), from the
        // round's turn.
        let picked = choose(
            Selector::Blame,
            Err("the blame call to p failed: no JSON".into()),
            &allowed,
            &chain,
            2,
            4,
        );
        let agents: Vec<&str> = picked.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(agents, ["expert", "finalizer"]);
        let first = choose(Selector::Blame, Err("x".into()), &allowed, &chain, 1, 0);
        assert_eq!(
            first[0].0, "planner",
            "the chain's first agent, not the first name"
        );
        assert_eq!(picked[0].1.rule, ChoiceRule::RoundRobin);
        assert_eq!(
            picked[0].1.why,
            "round-robin fallback: the blame call to p failed: no JSON"
        );
        // Votes only for agents that may not be revised: a fallback that keeps them.
        let only = names(&["expert", "finalizer"]);
        let picked = choose(
            Selector::Blame,
            Ok(vec![vote(1, "planner")]),
            &only,
            &chain,
            1,
            0,
        );
        assert_eq!(picked[0].0, "expert");
        assert_eq!(picked[0].1.votes.len(), 1);
        assert!(
            picked[0]
                .1
                .why
                .contains("no failing case blamed an agent that may be revised (votes: planner 1)"),
            "{}",
            picked[0].1.why
        );
        // One agent allowed: nothing to choose, and said so.
        let one = choose(
            Selector::Blame,
            Err(String::new()),
            &names(&["expert"]),
            &chain,
            1,
            3,
        );
        assert_eq!(one[0].0, "expert");
        assert_eq!(one[0].1.rule, ChoiceRule::Only);
        // `all`: every allowed agent once per proposal slot.
        let all = choose(Selector::All, Err(String::new()), &allowed, &allowed, 3, 0);
        let agents: Vec<&str> = all.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(agents, ["expert", "finalizer", "planner"]);
        assert_eq!(all[0].1.why, "all agents (selector all)");
    }

    #[test]
    fn the_blame_prompt_shows_every_agents_instructions_input_and_output() {
        let case = LoadedCase {
            case: crate::cases::TestCase {
                line: 4,
                question: "How far?".into(),
                files: vec![],
                answer: "5 km".into(),
                correctness: None,
                pattern: None,
                assert: None,
            },
            context: vec![],
        };
        let mut r = result(4, false, 0.2);
        r.question = "How far?".into();
        r.expected = "5 km".into();
        let trace = Answered {
            final_answer: "5".into(),
            steps: vec![
                ("planner".into(), "plan it".into()),
                ("finalizer".into(), "FINAL ANSWER: 5".into()),
            ],
        };
        let shown = [Shown {
            case: &case,
            result: &r,
            trace: &trace,
        }];
        let prompts: BTreeMap<String, String> = [
            ("planner".to_owned(), "Plan.".to_owned()),
            ("finalizer".to_owned(), "Answer.".to_owned()),
        ]
        .into();
        let chain = names(&["planner", "finalizer"]);
        let p = blame_prompt(&shown, &prompts, &chain);
        assert!(!p.contains("# Agents, in the order they run"), "{p}");
        for needle in [
            "## Case 1 (line 4)",
            "### Step 1: planner\nInstructions of planner:\n<instructions>\nPlan.\n</instructions>\nInput: the question and its files\nOutput of planner:\nplan it",
            "### Step 2: finalizer",
            "Input: the question, its files and the outputs of planner",
            "Expected answer: 5 km",
        ] {
            assert!(p.contains(needle), "{needle} in {p}");
        }
        let schema = blame_schema(&names(&["planner", "finalizer"]));
        assert_eq!(
            schema["properties"]["cases"]["items"]["properties"]["agent"]["enum"],
            json!(["planner", "finalizer"])
        );

        // Without a trace: every agent's instructions once, in the order they run (not by
        // name), then the cases with their answers.
        let untraced = Answered {
            final_answer: "5".into(),
            steps: vec![],
        };
        let shown = [Shown {
            case: &case,
            result: &r,
            trace: &untraced,
        }];
        let p = blame_prompt(&shown, &prompts, &chain);
        let planner = p.find("## 1. planner\n<instructions>\nPlan.").expect(&p);
        let finalizer = p
            .find("## 2. finalizer\n<instructions>\nAnswer.")
            .expect(&p);
        assert!(
            planner < finalizer && finalizer < p.find("# Cases").unwrap(),
            "{p}"
        );
        assert!(
            p.contains("Expected answer: 5 km") && !p.contains("### Step"),
            "{p}"
        );
    }
}
