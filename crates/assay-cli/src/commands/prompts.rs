//! `assay prompts promote|rollback`: change production prompts after human review
//! (seed 001 DEPLOY-003..008).
//!
//! Both take the project lock, show the experiment's evidence (promote) and a unified diff of
//! what would change in `prompts/`, and write only with `--yes`: the production prompts are
//! backed up first, then replaced atomically.

use std::fmt::Write as _;
use std::path::Path;

use assay_experiment::promote::{self, Action};
use assay_experiment::prompts::load_prompt_lists;
use clap::Subcommand;

use super::{command_line, out};
use crate::exit::Exit;

/// `assay prompts …`
#[derive(Debug, Subcommand)]
pub enum PromptsCommand {
    /// Load and validate the prompt lists the optimizer searches: each agent's production
    /// prompt (index 0) and its variants from prompt_variations/<agent>/ (1..N).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Install an experiment's optimized_prompts/ into prompts/ (after human review).
    ///
    /// Prints the evidence the experiment recorded and a unified diff; writes only with --yes.
    Promote {
        /// The experiment (a folder under experiments/).
        #[arg(value_name = "EXPERIMENT")]
        experiment: String,
        /// Apply the change (without it, only show it).
        #[arg(long)]
        yes: bool,
    },
    /// Restore production prompts from an experiment's baseline_prompts/.
    ///
    /// `EXPERIMENT`: the prompts that were in production when that experiment started.
    /// `baseline`: the baseline_prompts/ of the experiment promoted most recently (from
    /// .assay/prompt-history.jsonl), i.e. undo the last promotion. To go back to an earlier
    /// experiment's optimized prompts, promote that experiment again.
    Rollback {
        /// An experiment, or `baseline`.
        #[arg(value_name = "EXPERIMENT|baseline")]
        target: String,
        /// Apply the change (without it, only show it).
        #[arg(long)]
        yes: bool,
    },
}

pub fn run(project: &Path, command: &PromptsCommand) -> anyhow::Result<Exit> {
    let (action, target, yes) = match command {
        PromptsCommand::List { json } => return list(project, *json),
        PromptsCommand::Promote { experiment, yes } => (Action::Promote, experiment, *yes),
        PromptsCommand::Rollback { target, yes } => (Action::Rollback, target, *yes),
    };
    let change = promote::change(project, target, action, yes, None, &command_line())?;
    let (experiment, plan) = (&change.experiment, &change.plan);
    let rel = |p: &Path| p.strip_prefix(project).unwrap_or(p).display().to_string();

    let mut text = format!(
        "{} {}: {} of {} prompts change (from {})",
        action.as_str(),
        experiment,
        plan.changes.len(),
        plan.changes.len() + plan.unchanged.len(),
        rel(&plan.source),
    );
    if !plan.untouched.is_empty() {
        let _ = write!(
            text,
            "; not in the source, left as they are: {}",
            plan.untouched.join(", ")
        );
    }
    text.push('\n');
    if action == Action::Promote {
        match &change.summary {
            Some(summary) => {
                text.push('\n');
                text.push_str(summary.trim_end());
                text.push('\n');
            }
            None => text.push_str(
                "no held-out comparison recorded for this experiment: review its report before promoting\n",
            ),
        }
    }
    if plan.is_empty() {
        text.push_str("nothing to change: prompts/ already holds these prompts\n");
        out(&text);
        return Ok(Exit::Success);
    }
    text.push('\n');
    text.push_str(&plan.unified_diff());
    text.push('\n');
    let Some(applied) = &change.applied else {
        text.push_str("nothing changed; run again with --yes to apply\n");
        out(&text);
        return Ok(Exit::Success);
    };
    if let Some(backup) = &applied.backup {
        let _ = writeln!(text, "backed up the production prompts to {}/", rel(backup));
    }
    let _ = writeln!(
        text,
        "wrote {} prompts to prompts/ (logged in {})",
        applied.written.len(),
        promote::HISTORY_FILE
    );
    out(&text);
    Ok(Exit::Success)
}

/// `assay prompts list`: the prompt lists per agent, validated.
fn list(project: &Path, json: bool) -> anyhow::Result<Exit> {
    let lists = load_prompt_lists(project)?;
    let rel = |p: &Path| p.strip_prefix(project).unwrap_or(p).display().to_string();
    if json {
        let agents: Vec<serde_json::Value> = lists
            .agents
            .iter()
            .map(|a| {
                serde_json::json!({
                    "agent": a.agent,
                    "prompts": a.prompts.iter().map(|p| serde_json::json!({
                        "index": p.index,
                        "file": rel(&p.file),
                        "chars": p.text.chars().count(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "agents": agents,
            "combinations": lists.combinations().to_string(),
        });
        out(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
        return Ok(Exit::Success);
    }
    let mut text = format!(
        "{} agents, {} prompt combinations\n",
        lists.agents.len(),
        lists.combinations()
    );
    let width = lists
        .agents
        .iter()
        .map(|a| a.agent.len())
        .max()
        .unwrap_or(0);
    for a in &lists.agents {
        let variants = a.prompts.len() - 1;
        let _ = writeln!(
            text,
            "  {:width$}  {} prompts: {}{}",
            a.agent,
            a.prompts.len(),
            rel(&a.prompts[0].file),
            if variants == 0 {
                String::new()
            } else {
                format!(" + {variants} variants in prompt_variations/{}/", a.agent)
            }
        );
    }
    out(&text);
    Ok(Exit::Success)
}
