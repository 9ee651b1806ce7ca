//! `assay kb compare --store A --store B`: the dual-read check (003 §7 phase 3).

use std::path::PathBuf;

use assay_kbtools::compare::{self, Comparison, MessageComparison, Outcome};
use assay_project::HarnessError;
use assay_project::engine;
use assay_project::project::Project;
use clap::Args;

use super::{env, out, runtime};
use crate::exit::Exit;

/// `assay kb compare`
#[derive(Debug, Args)]
pub struct KbCompareArgs {
    /// A store, twice (A then B): `postgres://user@host:port/db` (password from PGPASSWORD or
    /// a pgpass file), or an SQLite file (`sqlite:PATH` or a path, relative to the project).
    #[arg(long = "store", value_name = "STORE", required = true, num_args = 1)]
    pub stores: Vec<String>,
    /// Messages to retrieve: one per line, or JSON lines (`.jsonl`: `{"message": …,
    /// "audience"?, "user_state"?, "id"?}`). Default: the semantic bank's prompts.
    #[arg(long, value_name = "FILE")]
    pub messages: Option<PathBuf>,
    /// Embedder (`vendor/model`; default: the project's).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,
    /// How many differing messages the summary shows.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub worst: usize,
    /// Print every message's comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(project: &Project, args: &KbCompareArgs) -> anyhow::Result<Exit> {
    let [a, b] = args.stores.as_slice() else {
        return Err(HarnessError::Usage(format!(
            "--store: give exactly two stores (A and B), found {}",
            args.stores.len()
        ))
        .into());
    };
    let messages = if let Some(path) = &args.messages {
        compare::read_messages(path)?
    } else {
        let messages = compare::bank_messages(project);
        if messages.is_empty() {
            return Err(HarnessError::Usage(
                "the project has no semantic cases to compare with; give --messages FILE".into(),
            )
            .into());
        }
        messages
    };
    let root = &project.settings.root;
    let store_a = engine::open_store_at(a, root)?;
    let store_b = engine::open_store_at(b, root)?;
    let rt = runtime()?;
    let comparison = rt.block_on(compare::compare(
        project,
        &store_a,
        &store_b,
        &messages,
        args.embedder.as_deref(),
        &env,
    ))?;
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&comparison)?));
    } else {
        out(&render(&comparison, args.worst));
    }
    // 1 when the selections differ; 3 when some messages could not be retrieved at all.
    Ok(if comparison.order + comparison.entities > 0 {
        Exit::GateFailed
    } else if comparison.errors > 0 {
        Exit::Infrastructure
    } else {
        Exit::Success
    })
}

/// The summary: counts, then the worst few differences.
fn render(c: &Comparison, worst: usize) -> String {
    let mut text = format!(
        "compared {} retrieved from two stores with {}\n  A: {}\n  B: {}\n\n",
        plural(c.total, "message"),
        c.embedder,
        c.a,
        c.b
    );
    text.push_str(&format!("identical: {}\n", c.identical));
    let differ = c.order + c.entities;
    text.push_str(&format!(
        "differ:    {differ} ({} in the entities selected, {} in their order only)\n",
        c.entities, c.order
    ));
    if c.errors > 0 {
        text.push_str(&format!(
            "errors:    {} (not retrieved; see --json)\n",
            c.errors
        ));
    }
    let differing = c.worst();
    if !differing.is_empty() {
        let shown = differing.len().min(worst);
        text.push_str(&format!("\nworst {shown} of {differ}:\n"));
        for m in differing.iter().take(worst) {
            text.push_str(&format!("  {}: {}\n", m.id, describe(m)));
        }
    }
    if differ > 0 || c.errors > 0 {
        text.push_str("\nevery message, with both selections: --json\n");
    }
    text
}

fn describe(m: &MessageComparison) -> String {
    let from = m
        .first_difference
        .map(|p| format!(" (from position {p})"))
        .unwrap_or_default();
    match m.outcome {
        Outcome::Order => format!("same entities, another order{from}"),
        Outcome::Entities => {
            let mut parts = Vec::new();
            if !m.only_a.is_empty() {
                parts.push(format!("only in A: {}", m.only_a.join(", ")));
            }
            if !m.only_b.is_empty() {
                parts.push(format!("only in B: {}", m.only_b.join(", ")));
            }
            format!("{}{from}", parts.join("; "))
        }
        Outcome::Identical | Outcome::Error => String::new(),
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}
