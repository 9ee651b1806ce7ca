//! `assay kb check-index`: the recall of the store's vector index against the exact search.

use std::path::PathBuf;

use assay_kbtools::check_index::{self, CheckOptions, IndexCheck, Rule};
use assay_kbtools::compare;
use assay_project::HarnessError;
use assay_project::engine;
use assay_project::project::Project;
use clap::Args;

use super::{env, out, runtime};
use crate::exit::Exit;

/// `assay kb check-index`
#[derive(Debug, Args)]
pub struct KbCheckIndexArgs {
    /// Messages to search for: one per line, or JSON lines (`.jsonl`: `{"message": …,
    /// "audience"?, "user_state"?, "id"?}`). Default: the semantic bank's prompts.
    #[arg(long, value_name = "FILE")]
    pub messages: Option<PathBuf>,
    /// Nearest entities compared per message (default: [semantic] candidates, the semantic
    /// bank's first stage).
    #[arg(long, value_name = "K")]
    pub k: Option<usize>,
    /// hnsw.ef_search for the index searches (default: [semantic] ef_search).
    #[arg(long, value_name = "N")]
    pub ef_search: Option<u32>,
    /// The mean recall@k below which the check fails (exit 1).
    #[arg(long, default_value_t = assay_kbtools::check_index::DEFAULT_MIN_RECALL, value_name = "R")]
    pub min_recall: f64,
    /// The recall@k below which one message fails the check (exit 1), whatever the mean: the
    /// default 0.5 fails a message for which the index found less than half of the exact
    /// answer; 0 turns the floor off.
    #[arg(long, default_value_t = assay_kbtools::check_index::DEFAULT_MIN_QUERY_RECALL, value_name = "R")]
    pub min_query_recall: f64,
    /// Embedder (`vendor/model`; default: the project's).
    #[arg(long, value_name = "VENDOR/MODEL")]
    pub embedder: Option<String>,
    /// Provider call cache for the embeddings: `read-write`, `off` or `replay` (a miss is an
    /// error; no network); overrides ASSAY_CACHE and assay.toml.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,
    /// How many of the lowest-recall messages the summary shows.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub worst: usize,
    /// Print the whole check, every message included, as JSON.
    #[arg(long)]
    pub json: bool,
}

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
        min_query_recall: args.min_query_recall,
        embedder: args.embedder.clone(),
        cache: args.cache.clone(),
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
            "runs that take their candidates from the index miss exact ones ({}); raise \
             [semantic] ef_search (now {}) or set [semantic] search = \"exact\"",
            failures(&check).join("; "),
            check.ef_search
        );
        return Ok(Exit::GateFailed);
    }
    Ok(Exit::Success)
}

/// The messages below the floor the summary names; the others are counted (`--json` has all).
const BELOW_FLOOR_SHOWN: usize = 20;

/// The rules the check failed, in words.
fn failures(c: &IndexCheck) -> Vec<String> {
    let mut failed = Vec::new();
    if c.failed(Rule::MeanRecall) {
        failed.push(match c.mean_recall {
            Some(mean) => format!(
                "the mean recall@{} is {mean:.4}, below --min-recall {}",
                c.k, c.min_recall
            ),
            None => "no message was measured, so there is no mean recall".to_owned(),
        });
    }
    if c.failed(Rule::QueryRecall) {
        let n = c.below_floor.len();
        failed.push(format!(
            "{n} message{} {} a recall@{} below --min-query-recall {}{}",
            if n == 1 { "" } else { "s" },
            if n == 1 { "has" } else { "have" },
            c.k,
            c.min_query_recall,
            if c.failed(Rule::MeanRecall) {
                String::new()
            } else {
                format!(", though the mean reaches {}", c.min_recall)
            }
        ));
    }
    failed
}

/// `x` with two significant digits below 1, one decimal below 10, none above: never a rounded
/// zero.
fn ratio(x: f64) -> String {
    if x >= 10.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        // Two significant digits: 0.50, 0.050, 0.0050 …
        let (mut decimals, mut bound) = (2usize, 0.1);
        while x > 0.0 && x < bound && decimals < 12 {
            decimals += 1;
            bound /= 10.0;
        }
        format!("{x:.decimals$}")
    }
}

/// The summary: what was measured, the mean and lowest recall, the time of each search, then
/// the messages below the floor (or, when none is, those with the lowest recall) and the
/// verdict.
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
            let verdict = if c.failed(Rule::MeanRecall) {
                "BELOW"
            } else {
                "at least"
            };
            text.push_str(&format!(
                "mean recall@{}: {mean:.4} ({verdict} {}), lowest {lowest:.3}, over {} messages\n",
                c.k, c.min_recall, c.measured
            ));
        }
        _ => text.push_str("no message had entities to find\n"),
    }
    if c.index_ms > 0.0 && c.exact_ms > 0.0 {
        let speed = c.exact_ms / c.index_ms;
        let how = if speed >= 1.0 {
            format!("the index is {}× as fast", ratio(speed))
        } else {
            format!(
                "{}×: the index is slower than the exact scan here, at {} entities",
                ratio(speed),
                c.entities
            )
        };
        text.push_str(&format!(
            "time a search: index {:.2} ms, exact {:.2} ms ({how})\n",
            c.index_ms, c.exact_ms
        ));
    } else {
        text.push_str(&format!(
            "time a search: index {:.2} ms, exact {:.2} ms\n",
            c.index_ms, c.exact_ms
        ));
    }
    if c.exact_fallbacks > 0 {
        text.push_str(&format!(
            "index searches answered by the exact search instead: {}\n",
            c.exact_fallbacks
        ));
    }
    let below = c.below_floor();
    if below.is_empty() {
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
    } else {
        text.push_str(&format!(
            "\nbelow the floor of {} (--min-query-recall), lowest first:\n",
            c.min_query_recall
        ));
        for q in below.iter().take(BELOW_FLOOR_SHOWN) {
            let instead = if q.instead.is_empty() {
                "nothing else".to_owned()
            } else {
                q.instead.join(", ")
            };
            text.push_str(&format!(
                "  {}: {:.3} ({:?}); missed {}; the index returned instead {instead}\n",
                q.id,
                q.recall.unwrap_or_default(),
                q.message,
                q.missed.join(", ")
            ));
        }
        if below.len() > BELOW_FLOOR_SHOWN {
            text.push_str(&format!(
                "  and {} more (--json lists them all)\n",
                below.len() - BELOW_FLOOR_SHOWN
            ));
        }
    }
    let failed = failures(c);
    if failed.is_empty() {
        text.push_str(&format!(
            "\npassed: the mean recall@{} reaches {} and no message is below {}\n",
            c.k, c.min_recall, c.min_query_recall
        ));
    } else {
        text.push_str(&format!("\nFAILED: {}\n", failed.join("; ")));
    }
    text
}

#[cfg(test)]
mod tests {
    use assay_kbtools::check_index::{IndexCheck, QueryRecall, Rule};

    use super::{ratio, render};

    /// Issue 32: the summary names the messages below the floor (up to a bound), with what the
    /// index returned instead, and says which rule failed though the mean passes.
    #[test]
    fn the_summary_names_the_messages_below_the_floor() {
        let query = |i: usize, recall: f64| QueryRecall {
            id: format!("q{i}"),
            message: format!("message {i}"),
            audience: "PARENT".into(),
            recall: Some(recall),
            exact: vec!["a".into(), "b".into()],
            missed: if recall < 1.0 {
                vec!["a".into(), "b".into()]
            } else {
                Vec::new()
            },
            instead: if recall < 1.0 {
                vec!["x".into(), "y".into()]
            } else {
                Vec::new()
            },
            error: None,
        };
        let mut queries: Vec<QueryRecall> = (0..2000).map(|i| query(i, 1.0)).collect();
        queries.extend((2000..2022).map(|i| query(i, 0.0)));
        let check = IndexCheck {
            store: "postgres://db".into(),
            index: "PostgreSQL HNSW".into(),
            embedder: "builtin/hashed-ngrams".into(),
            k: 2,
            ef_search: 100,
            entities: 200_000,
            min_recall: 0.98,
            min_query_recall: 0.5,
            messages: queries.len(),
            measured: queries.len(),
            errors: 0,
            mean_recall: Some(2000.0 / 2022.0),
            lowest_recall: Some(0.0),
            exact_ms: 2.0,
            index_ms: 40.0,
            exact_fallbacks: 0,
            below_floor: (2000..2022).map(|i| format!("q{i}")).collect(),
            failed: vec![Rule::QueryRecall],
            queries,
        };
        let text = render(&check, 5);
        assert!(
            text.contains("\n  q2000: 0.000 (\"message 2000\"); missed a, b; the index returned instead x, y\n"),
            "{text}"
        );
        assert!(text.contains("\n  q2019: "), "{text}");
        assert!(!text.contains("\n  q2020: "), "{text}");
        assert!(
            text.contains("\n  and 2 more (--json lists them all)\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "(0.050×: the index is slower than the exact scan here, at 200000 entities)"
            ),
            "{text}"
        );
        assert!(
            text.contains("\nFAILED: 22 messages have a recall@2 below --min-query-recall 0.5, though the mean reaches 0.98\n"),
            "{text}"
        );
    }

    #[test]
    fn a_speed_ratio_is_never_a_rounded_zero() {
        assert_eq!(ratio(0.05), "0.050");
        assert_eq!(ratio(0.0012), "0.0012");
        assert_eq!(ratio(0.5), "0.50");
        assert_eq!(ratio(2.345), "2.3");
        assert_eq!(ratio(42.4), "42");
    }
}
