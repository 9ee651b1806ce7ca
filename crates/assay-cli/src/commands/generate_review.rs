//! `assay generate review` and `assay generate coverage`.

use std::fmt::Write as _;
use std::path::PathBuf;

use assay_generate::review::{
    self, Coverage, EntityDrafts, ListFilter, Outcome, Reviewer, Selection,
};
use assay_project::project::Project;
use clap::Args;

use super::kb::plural;
use super::{log_warnings, out};
use crate::exit::Exit;

/// `assay generate review`
#[derive(Debug, Args)]
pub struct GenerateReviewArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Accept these drafts (test ids, comma-separated, or `all-pending`).
    #[arg(long, value_name = "IDS", conflicts_with_all = ["reject", "edit"])]
    pub accept: Option<String>,

    /// Reject these drafts (test ids, comma-separated); needs --reason.
    #[arg(long, value_name = "IDS", requires = "reason", conflicts_with = "edit")]
    pub reject: Option<String>,

    /// Why the drafts are rejected, or the cases retired.
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,

    /// Confirm that accepted cases still hold after their entities changed (test ids of
    /// cases in a bank's generated.json, comma-separated, or `all-stale`): their provenance
    /// moves to the entities' current versions, so they are no longer reported stale. Each
    /// case must have passed in the latest saved run, made on the knowledge base as it is now.
    #[arg(long, value_name = "IDS", conflicts_with_all = ["accept", "reject", "edit"])]
    pub confirm: Option<String>,

    /// Retire accepted generated cases (test ids of cases in a bank's generated.json,
    /// comma-separated): each is taken out of its bank, and who retired it, when, why and the
    /// case are kept in retired.jsonl beside it. Needs --reason.
    #[arg(
        long,
        value_name = "IDS",
        requires = "reason",
        conflicts_with_all = ["accept", "reject", "edit", "confirm"]
    )]
    pub retire: Option<String>,

    /// Edit one pending draft (its test id); the changes are given with --set.
    #[arg(long, value_name = "ID", requires = "set")]
    pub edit: Option<String>,

    /// A field to change, `field=value` (a JSON value, or text): for example
    /// `prompt=...` or `expected_primary=["a","b"]`. Repeatable.
    #[arg(long, value_name = "FIELD=VALUE")]
    pub set: Vec<String>,

    /// Only drafts made for this entity.
    #[arg(long, value_name = "ID")]
    pub entity: Option<String>,

    /// Who is reviewing (default: ASSAY_USER, else the login name).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,

    /// List every draft, not the first few of each entity.
    #[arg(long)]
    pub all: bool,

    /// Print the drafts as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `assay generate coverage`
#[derive(Debug, Args)]
pub struct GenerateCoverageArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// Count pending drafts as cases too.
    #[arg(long)]
    pub include_drafts: bool,

    /// List every uncovered entity, not the first few.
    #[arg(long)]
    pub all: bool,

    /// Print the coverage as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// How many drafts of each entity the console lists without `--all`.
const PER_ENTITY: usize = 3;
/// How many entities the console lists without `--all`.
const ENTITIES: usize = 10;
/// How many uncovered names of each kind the console lists without `--all`.
const UNCOVERED: usize = 10;

fn ids(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn reviewer(args: &GenerateReviewArgs) -> Reviewer {
    let by = args
        .by
        .clone()
        .unwrap_or_else(|| assay_run::accepted::default_user(&super::env));
    Reviewer::now(&by)
}

pub fn review(args: &GenerateReviewArgs) -> anyhow::Result<Exit> {
    let root = args.dir.as_path();
    let action = if let Some(accept) = &args.accept {
        let selection = if accept.trim() == "all-pending" {
            Selection::AllPending {
                entity: args.entity.clone(),
            }
        } else {
            Selection::Ids(ids(accept))
        };
        Some((
            "accepted",
            review::accept(root, &selection, &reviewer(args), &super::env)?,
        ))
    } else if let Some(reject) = &args.reject {
        let reason = args.reason.as_deref().unwrap_or_default();
        Some((
            "rejected",
            review::reject(root, &ids(reject), reason, &reviewer(args))?,
        ))
    } else if let Some(confirm) = &args.confirm {
        let which = if confirm.trim() == "all-stale" {
            review::Confirm::AllStale
        } else {
            review::Confirm::Ids(ids(confirm))
        };
        Some((
            "confirmed",
            review::confirm(root, &which, &reviewer(args), &super::env)?,
        ))
    } else if let Some(retire) = &args.retire {
        let reason = args.reason.as_deref().unwrap_or_default();
        Some((
            "retired",
            review::retire(root, &ids(retire), reason, &reviewer(args))?,
        ))
    } else if let Some(id) = &args.edit {
        let sets = review::parse_sets(&args.set)?;
        Some(("edited", review::edit(root, id, &sets, &reviewer(args))?))
    } else {
        None
    };
    if let Some((verb, outcome)) = action {
        if args.json {
            out(&format!("{}\n", serde_json::to_string_pretty(&outcome)?));
        } else {
            out(&outcome_text(verb, &outcome));
        }
        return Ok(Exit::Success);
    }
    let entries = review::all_entries(root)?;
    let counts = review::counts(&entries);
    let filter = ListFilter {
        entity: args.entity.clone(),
        reviewed: args.all,
    };
    let mut groups = review::group(entries, &filter);
    // The listed findings, checked against the knowledge base and rules as they are now.
    let mut listed: Vec<&mut review::DraftEntry> = groups
        .iter_mut()
        .flat_map(|g| g.drafts.iter_mut())
        .collect();
    super::current_thread_runtime()?.block_on(review::recheck_findings(
        root,
        &mut listed,
        &super::env,
    ));
    if args.json {
        let body = serde_json::json!({"counts": counts, "entities": groups});
        out(&format!("{}\n", serde_json::to_string_pretty(&body)?));
    } else {
        let mut text = format!(
            "drafts: {} pending ({}), {} accepted, {} rejected\n",
            counts.pending,
            plural(counts.findings, "finding"),
            counts.accepted,
            counts.rejected
        );
        text.push_str(&list_text(&groups, args.all));
        out(&text);
    }
    Ok(Exit::Success)
}

fn outcome_text(verb: &str, o: &Outcome) -> String {
    let noun = if matches!(verb, "confirmed" | "retired") {
        "case"
    } else {
        "draft"
    };
    let mut text = format!("{verb} {}: ", plural(o.test_ids.len(), noun));
    let shown: Vec<&str> = o.test_ids.iter().take(10).map(String::as_str).collect();
    text.push_str(&shown.join(", "));
    if o.test_ids.len() > shown.len() {
        let _ = write!(text, ", … and {} more", o.test_ids.len() - shown.len());
    }
    text.push('\n');
    for f in &o.bank_files {
        let _ = writeln!(text, "  bank: {}", f.display());
    }
    for f in &o.draft_files {
        let _ = writeln!(text, "  drafts: {}", f.display());
    }
    if let Some(note) = o.note.as_ref().filter(|_| verb == "edited") {
        let _ = writeln!(text, "  {note}");
    }
    if let Some(reason) = o.note.as_ref().filter(|_| verb == "retired") {
        let _ = writeln!(
            text,
            "  reason: {reason} (kept with the case in retired.jsonl beside the bank)"
        );
    }
    text
}

fn list_text(groups: &[EntityDrafts], all: bool) -> String {
    let mut text = String::new();
    let entity_limit = if all { usize::MAX } else { ENTITIES };
    let per_entity = if all { usize::MAX } else { PER_ENTITY };
    for g in groups.iter().take(entity_limit) {
        let _ = writeln!(
            text,
            "{} ({}, {})",
            g.entity_id,
            plural(g.drafts.len(), "draft"),
            plural(g.findings, "finding")
        );
        for d in g.drafts.iter().take(per_entity) {
            let mut summary: String = d.summary.chars().take(80).collect();
            if d.summary.chars().count() > 80 {
                summary.push('…');
            }
            let _ = write!(text, "  {} [{}] {}", d.test_id, d.bank, summary);
            if all {
                let _ = write!(text, " ({})", d.status.as_str());
            }
            text.push('\n');
            if let Some(f) = &d.finding {
                let _ = writeln!(
                    text,
                    "    FINDING {}: {} (intended: {})",
                    f.kind.as_str(),
                    f.explanation,
                    f.intended
                );
                if let Some(now) = &d.finding_now {
                    let _ = writeln!(text, "      {}", finding_now_text(now));
                }
            }
        }
        if g.drafts.len() > per_entity {
            let _ = writeln!(text, "  … and {} more", g.drafts.len() - per_entity);
        }
    }
    if groups.len() > entity_limit {
        let _ = writeln!(text, "… and {} more entities", groups.len() - entity_limit);
    }
    if !all && (groups.iter().any(|g| g.drafts.len() > per_entity) || groups.len() > entity_limit) {
        text.push_str("(every draft: --all or --json)\n");
    }
    text
}

/// What a finding's check against the current system says, in words.
fn finding_now_text(now: &review::FindingNow) -> String {
    let observed = if now.observed.is_empty() {
        "nothing".to_owned()
    } else {
        now.observed.join(", ")
    };
    match now.status {
        review::FindingStatus::FixedSince => format!(
            "fixed since: the current knowledge base and rules do what the draft intends (now: {observed})"
        ),
        review::FindingStatus::Holds => format!("still holds (now: {observed})"),
        review::FindingStatus::Unchecked => format!(
            "not checked again: {}",
            now.note.as_deref().unwrap_or("unknown")
        ),
    }
}

pub fn coverage(args: &GenerateCoverageArgs) -> anyhow::Result<Exit> {
    let project = Project::load(&args.dir)?;
    log_warnings(&project.warnings);
    let c = review::coverage(&project, args.include_drafts)?;
    if args.json {
        out(&format!("{}\n", serde_json::to_string_pretty(&c)?));
    } else {
        out(&coverage_text(&c, args.all));
    }
    Ok(Exit::Success)
}

fn names(text: &mut String, label: &str, ids: &[String], all: bool) {
    let limit = if all { usize::MAX } else { UNCOVERED };
    let _ = write!(text, "{label}: {}", ids.len());
    if !ids.is_empty() {
        let shown: Vec<&str> = ids.iter().take(limit).map(String::as_str).collect();
        let _ = write!(text, " ({}", shown.join(", "));
        if ids.len() > shown.len() {
            let _ = write!(text, ", … and {} more", ids.len() - shown.len());
        }
        text.push(')');
    }
    text.push('\n');
}

fn coverage_text(c: &Coverage, all: bool) -> String {
    let mut text = format!(
        "coverage of {} entities{}\n",
        c.entities.len(),
        if c.include_drafts {
            " (pending drafts counted)"
        } else {
            ""
        }
    );
    names(
        &mut text,
        "SITUATION entities without a semantic case",
        &c.situations_without_semantic,
        all,
    );
    names(
        &mut text,
        "STATE handlers without a state case",
        &c.handlers_without_state,
        all,
    );
    let rules: Vec<String> = c
        .rules_without_pattern
        .iter()
        .map(|r| format!("{} → {}", r.rule, r.entities.join("+")))
        .collect();
    names(
        &mut text,
        "pattern rules without a pattern case",
        &rules,
        all,
    );
    names(
        &mut text,
        "ALWAYS entities without an always case",
        &c.always_without_case,
        all,
    );
    let untested = c.entities.iter().filter(|e| e.total() == 0).count();
    let _ = writeln!(
        text,
        "entities named by no case: {untested} of {}",
        c.entities.len()
    );
    if all {
        text.push_str("cases per entity (semantic/state/pattern/always):\n");
        for e in &c.entities {
            let _ = writeln!(
                text,
                "  {} {}/{}/{}/{}",
                e.entity_id, e.semantic, e.state, e.pattern, e.always
            );
        }
    } else {
        text.push_str("(cases per entity: --all or --json)\n");
    }
    text
}
