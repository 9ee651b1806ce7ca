//! `assay kb check-index`: the recall of the store's vector index against the exact search.

use assay_harness::HarnessError;
use assay_harness::check_index::{self, CheckOptions, IndexCheck};
use assay_harness::compare;
use assay_harness::engine;
use assay_harness::project::Project;

use super::{env, out, runtime};
use crate::args::KbCheckIndexArgs;
use crate::exit::Exit;

pub fn run(project: &Project, args: &KbCheckIndexArgs) -> anyhow::Result<Exit> {
    let messages = if let Some(path) = &args.messages {
        compare::read_messages(path)?
    } else {
        let messages = compare::bank_messages(project);
        if messages.is_empty() {
            return Err(HarnessError::Usage(
                "the project has no semantic cases to check the index with; give --messages FILE"
                    .into(),
            )
            .into());
        }
        messages
    };
    let options = CheckOptions {
        k: args.k,
        ef_search: args.ef_search,
        min_recall: args.min_recall,
        embedder: args.embedder.clone(),
    };
    let store = engine::open_store(&project.settings)?;
    let rt = runtime()?;
    let check = rt.block_on(check_index::check_index(
        project, &store, &messages, &options, &env,
    ))?;
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&check)?));
    } else {
        out(&render(&check, args.worst));
    }
    if !check.passes() {
        tracing::warn!(
            "the index's mean recall@{} is {}, below {}: runs that take their candidates from it \
             miss that share of the exact ones; raise [semantic] ef_search (now {}) or set \
             [semantic] search = \"exact\"",
            check.k,
            check
                .mean_recall
                .map_or_else(|| "unmeasured".to_owned(), |r| format!("{r:.3}")),
            check.min_recall,
            check.ef_search
        );
        return Ok(Exit::GateFailed);
    }
    Ok(Exit::Success)
}

/// The summary: what was measured, the mean and lowest recall, the time of each search, then
/// the messages with the lowest recall.
fn render(c: &IndexCheck, worst: usize) -> String {
    let mut text = format!(
        "recall@{} of {} (ef_search {}) against the exact search\n  store:    {}\n  embedder: {}\n  entities: {} active SITUATION\n  messages: {}",
        c.k, c.index, c.ef_search, c.store, c.embedder, c.entities, c.messages
    );
    if c.errors > 0 {
        text.push_str(&format!(
            " ({} could not be searched; see --json)",
            c.errors
        ));
    }
    text.push_str("\n\n");
    match (c.mean_recall, c.lowest_recall) {
        (Some(mean), Some(lowest)) => {
            let verdict = if c.passes() { "at least" } else { "BELOW" };
            text.push_str(&format!(
                "mean recall@{}: {mean:.4} ({verdict} {}), lowest {lowest:.3}, over {} messages\n",
                c.k, c.min_recall, c.measured
            ));
        }
        _ => text.push_str("no message had entities to find\n"),
    }
    let speedup = if c.index_ms > 0.0 {
        format!(" ({:.1}x)", c.exact_ms / c.index_ms)
    } else {
        String::new()
    };
    text.push_str(&format!(
        "time a search: index {:.2} ms, exact {:.2} ms{speedup}\n",
        c.index_ms, c.exact_ms
    ));
    if c.exact_fallbacks > 0 {
        text.push_str(&format!(
            "index searches answered by the exact search instead: {}\n",
            c.exact_fallbacks
        ));
    }
    let missing: Vec<_> = c
        .worst()
        .into_iter()
        .filter(|q| q.recall.is_some_and(|r| r < 1.0))
        .take(worst)
        .collect();
    if !missing.is_empty() {
        text.push_str(&format!("\nlowest {}:\n", missing.len()));
        for q in missing {
            text.push_str(&format!(
                "  {}: {:.3}, missed {}\n",
                q.id,
                q.recall.unwrap_or_default(),
                q.missed.join(", ")
            ));
        }
    }
    text
}
