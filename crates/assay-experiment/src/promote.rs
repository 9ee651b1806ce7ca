//! Promotion and rollback of production prompts after human review (seed 001 DEPLOY-003..008).
//!
//! A change is planned first ([`plan`]): the prompt folder to install (an experiment's
//! `optimized_prompts/` or `baseline_prompts/`) is compared with `prompts/`, file by file, and
//! [`PromotionPlan::unified_diff`] shows exactly what would change. Nothing is written until
//! [`apply`] is called (the CLI asks for `--yes`). Applying:
//!
//! 1. backs up every production prompt file (`prompts/*_system_prompt.txt`) into a new folder
//!    `.assay/prompt-backups/<stamp>/` (never overwritten: a second change in the same second
//!    gets `<stamp>-2`);
//! 2. writes each changed prompt atomically (temporary file, then rename); prompts of agents the
//!    source does not have are left alone;
//! 3. appends a line to `.assay/prompt-history.jsonl` (what was installed from where, and the
//!    backup), which `assay prompts rollback baseline` reads.
//!
//! [`change`] is the whole operation as `assay prompts promote|rollback` and the web UI both
//! carry it out: the project lock ([`assay_project::lock::ProjectLock`]) is held around plan
//! and apply, so nothing else changes `prompts/` in between; a caller that showed a diff for
//! review passes its [`diff_digest`], and the change is refused when the plan moved on since.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ExperimentError;
use crate::prompts::{prompt_file_name, read_prompt_dir};

/// The production prompts, relative to the project.
pub const PROMPTS_DIR: &str = "prompts";
/// The experiments, relative to the project.
pub const EXPERIMENTS_DIR: &str = "experiments";
/// Backups of replaced prompts, relative to the project.
pub const BACKUP_DIR: &str = ".assay/prompt-backups";
/// The log of promotions and rollbacks, relative to the project.
pub const HISTORY_FILE: &str = ".assay/prompt-history.jsonl";

/// Which prompts of an experiment to install.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Install the experiment's `optimized_prompts/`.
    Promote,
    /// Install the experiment's `baseline_prompts/`.
    Rollback,
}

impl Action {
    /// The experiment's folder this action installs from.
    pub fn source_folder(self) -> &'static str {
        match self {
            Action::Promote => "optimized_prompts",
            Action::Rollback => "baseline_prompts",
        }
    }

    /// `promote` or `rollback`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Promote => "promote",
            Action::Rollback => "rollback",
        }
    }
}

/// One production prompt that would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptChange {
    /// The agent.
    pub agent: String,
    /// The production file (`prompts/<agent>_system_prompt.txt`).
    pub file: PathBuf,
    /// Its text now; `None` when the file does not exist yet.
    pub old: Option<String>,
    /// Its text after the change.
    pub new: String,
}

/// What a promotion or rollback would do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionPlan {
    /// What kind of change.
    pub action: Action,
    /// The experiment.
    pub experiment: String,
    /// The folder the prompts come from.
    pub source: PathBuf,
    /// The prompts that would change, by agent.
    pub changes: Vec<PromptChange>,
    /// Agents whose production prompt is already the same.
    pub unchanged: Vec<String>,
    /// Agents with a production prompt that the source does not have (left alone).
    pub untouched: Vec<String>,
}

impl PromotionPlan {
    /// Whether nothing would change.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The change as a unified diff (`--- a/prompts/<file>` / `+++ b/prompts/<file>`), one
    /// section per changed file; empty when nothing changes.
    pub fn unified_diff(&self) -> String {
        let mut out = String::new();
        for c in &self.changes {
            let name = prompt_file_name(&c.agent);
            let old = c.old.as_deref().unwrap_or("");
            let old_header = if c.old.is_some() {
                format!("a/{PROMPTS_DIR}/{name}")
            } else {
                "/dev/null".to_owned()
            };
            let diff = similar::TextDiff::from_lines(old, c.new.as_str());
            let text = diff
                .unified_diff()
                .context_radius(3)
                .missing_newline_hint(true)
                .header(&old_header, &format!("b/{PROMPTS_DIR}/{name}"))
                .to_string();
            out.push_str(&text);
            if !out.ends_with('\n') {
                out.push('\n');
            }
        }
        out
    }
}

/// The folder of an experiment, checked to exist.
pub fn experiment_dir(project: &Path, experiment: &str) -> Result<PathBuf, ExperimentError> {
    if experiment.is_empty() || experiment.starts_with('.') || experiment.contains(['/', '\\']) {
        return Err(ExperimentError::Usage(format!(
            "`{experiment}` is not an experiment name (a folder name under {EXPERIMENTS_DIR}/)"
        )));
    }
    let dir = project.join(EXPERIMENTS_DIR).join(experiment);
    if !dir.is_dir() {
        let known = list_experiments(project);
        return Err(ExperimentError::Usage(format!(
            "no experiment `{experiment}` ({} not found; experiments: {})",
            dir.display(),
            if known.is_empty() {
                "none yet".to_owned()
            } else {
                known.join(", ")
            }
        )));
    }
    Ok(dir)
}

/// The experiments' names, sorted.
pub fn list_experiments(project: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(project.join(EXPERIMENTS_DIR))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Promotion copies what the optimizer wrote: a prompt file (or the folder) that is a symbolic
/// link, which could lead anywhere on the machine, is refused, naming it and its target.
fn refuse_links(source: &Path) -> Result<(), ExperimentError> {
    let link = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
    let refuse = |p: &Path| {
        let to = std::fs::read_link(p).map_or_else(|_| "?".to_owned(), |t| t.display().to_string());
        ExperimentError::data(
            p,
            format!(
                "is a symbolic link (to {to}): promotion copies only files the optimizer wrote; replace it with the file itself"
            ),
        )
    };
    if link(source) {
        return Err(refuse(source));
    }
    let entries =
        std::fs::read_dir(source).map_err(|e| ExperimentError::data(source, e.to_string()))?;
    for entry in entries.flatten() {
        if link(&entry.path()) {
            return Err(refuse(&entry.path()));
        }
    }
    Ok(())
}

/// Plans installing an experiment's prompts (`optimized_prompts/` for [`Action::Promote`],
/// `baseline_prompts/` for [`Action::Rollback`]) into `prompts/`.
pub fn plan(
    project: &Path,
    experiment: &str,
    action: Action,
) -> Result<PromotionPlan, ExperimentError> {
    let dir = experiment_dir(project, experiment)?;
    let source = dir.join(action.source_folder());
    if !source.is_dir() {
        return Err(ExperimentError::Usage(format!(
            "experiment `{experiment}` has no {}/ ({}); {}",
            action.source_folder(),
            source.display(),
            match action {
                Action::Promote => "has its optimization finished?",
                Action::Rollback => "it was not started by `assay optimize`",
            }
        )));
    }
    refuse_links(&source)?;
    let new = read_prompt_dir(&source)?;
    let prompts_dir = project.join(PROMPTS_DIR);
    let current: BTreeMap<String, String> = if prompts_dir.is_dir() {
        read_prompt_dir(&prompts_dir).unwrap_or_default()
    } else {
        BTreeMap::new()
    };
    let mut changes = Vec::new();
    let mut unchanged = Vec::new();
    for (agent, text) in &new {
        match current.get(agent) {
            Some(old) if old == text => unchanged.push(agent.clone()),
            old => changes.push(PromptChange {
                agent: agent.clone(),
                file: prompts_dir.join(prompt_file_name(agent)),
                old: old.cloned(),
                new: text.clone(),
            }),
        }
    }
    let untouched = current
        .keys()
        .filter(|a| !new.contains_key(*a))
        .cloned()
        .collect();
    Ok(PromotionPlan {
        action,
        experiment: experiment.to_owned(),
        source,
        changes,
        unchanged,
        untouched,
    })
}

/// One line of `.assay/prompt-history.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// When (RFC 3339, UTC).
    pub at: String,
    /// Promote or rollback.
    pub action: Action,
    /// The experiment whose prompts were installed.
    pub experiment: String,
    /// The folder they came from, relative to the project.
    pub source: String,
    /// The agents whose prompt changed.
    pub changed: Vec<String>,
    /// Where the replaced prompts were backed up, relative to the project.
    pub backup: Option<String>,
}

/// What [`apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The backup of the production prompts as they were (none when `prompts/` was empty).
    pub backup: Option<PathBuf>,
    /// The files written.
    pub written: Vec<PathBuf>,
}

/// Carries out a plan: backup, atomic writes, a history line. A plan with no changes writes
/// nothing. The plan must be fresh (made under the same project lock).
pub fn apply(project: &Path, plan: &PromotionPlan) -> Result<Applied, ExperimentError> {
    if plan.is_empty() {
        return Ok(Applied {
            backup: None,
            written: Vec::new(),
        });
    }
    let now = chrono::Utc::now();
    let prompts_dir = project.join(PROMPTS_DIR);
    let current = if prompts_dir.is_dir() {
        read_prompt_dir(&prompts_dir).unwrap_or_default()
    } else {
        BTreeMap::new()
    };
    let backup = if current.is_empty() {
        None
    } else {
        let dir = new_backup_dir(project, &now.format("%Y-%m-%dT%H%M%SZ").to_string())?;
        for (agent, text) in &current {
            let path = dir.join(prompt_file_name(agent));
            assay_project::results::write_new(&path, text.as_bytes())
                .map_err(|e| ExperimentError::write(&path, &e))?;
        }
        Some(dir)
    };
    let changed: BTreeMap<String, String> = plan
        .changes
        .iter()
        .map(|c| (c.agent.clone(), c.new.clone()))
        .collect();
    let written = crate::prompts::write_prompt_dir(&prompts_dir, &changed)?;
    let rel = |p: &Path| p.strip_prefix(project).unwrap_or(p).display().to_string();
    let entry = HistoryEntry {
        at: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        action: plan.action,
        experiment: plan.experiment.clone(),
        source: rel(&plan.source),
        changed: changed.keys().cloned().collect(),
        backup: backup.as_deref().map(rel),
    };
    append_history(project, &entry)?;
    tracing::info!(
        action = plan.action.as_str(),
        experiment = plan.experiment,
        changed = entry.changed.len(),
        "production prompts changed"
    );
    Ok(Applied { backup, written })
}

/// A digest of a plan's unified diff (16 hex digits of SHA-256): what a reviewer saw, so that
/// [`change`] can refuse to apply a plan that differs from it.
pub fn diff_digest(plan: &PromotionPlan) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(plan.unified_diff().as_bytes())
        .iter()
        .take(8)
        .fold(String::new(), |mut s, b| {
            use std::fmt::Write as _;
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// What [`change`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The experiment whose prompts were (or would be) installed (`baseline` resolved).
    pub experiment: String,
    /// The plan.
    pub plan: PromotionPlan,
    /// For a promotion: the experiment's evidence ([`promotion_summary`]), when it has some.
    pub summary: Option<String>,
    /// What was written, when `apply` was asked and the plan was not empty.
    pub applied: Option<Applied>,
}

/// A promotion or rollback, as `assay prompts promote|rollback` and the web UI carry it out:
/// takes the project lock (refused, naming the holder, while an optimize, evaluate or other
/// prompt change holds it), resolves `target` (`baseline` for a rollback means the experiment
/// promoted last), plans, and with `apply` backs up and writes ([`apply`]). With
/// `reviewed = Some(digest)` (the [`diff_digest`] of the plan the user reviewed) the change is
/// refused when the plan differs now. `command_line` describes the lock's holder.
pub fn change(
    project: &Path,
    target: &str,
    action: Action,
    apply: bool,
    reviewed: Option<&str>,
    command_line: &str,
) -> Result<Change, ExperimentError> {
    let operation = format!("prompts {}", action.as_str());
    let _lock = assay_project::lock::ProjectLock::acquire(project, &operation, command_line)?;
    let experiment = if action == Action::Rollback && target == "baseline" {
        let e = last_promoted(project)?;
        tracing::info!("`baseline`: the baseline prompts of {e}, the experiment promoted last");
        e
    } else {
        target.to_owned()
    };
    let plan = plan(project, &experiment, action)?;
    if let Some(digest) = reviewed
        && diff_digest(&plan) != digest
    {
        return Err(ExperimentError::Conflict(format!(
            "the prompts to {} changed since the diff was shown (prompts/ or experiments/{experiment}/ was changed): review the new diff",
            action.as_str()
        )));
    }
    let summary = match action {
        Action::Promote => promotion_summary(&experiment_dir(project, &experiment)?),
        Action::Rollback => None,
    };
    let applied = if apply && !plan.is_empty() {
        Some(self::apply(project, &plan)?)
    } else {
        None
    };
    Ok(Change {
        experiment,
        plan,
        summary,
        applied,
    })
}

/// A new, empty backup folder named after `stamp` (`<stamp>`, `<stamp>-2`, …).
fn new_backup_dir(project: &Path, stamp: &str) -> Result<PathBuf, ExperimentError> {
    let root = project.join(BACKUP_DIR);
    std::fs::create_dir_all(&root).map_err(|e| ExperimentError::write(&root, &e))?;
    for n in 1..10_000 {
        let name = if n == 1 {
            stamp.to_owned()
        } else {
            format!("{stamp}-{n}")
        };
        let dir = root.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(ExperimentError::write(&dir, &e)),
        }
    }
    Err(ExperimentError::Write {
        path: root,
        message: format!("no free backup folder name for {stamp}"),
    })
}

fn append_history(project: &Path, entry: &HistoryEntry) -> Result<(), ExperimentError> {
    let path = project.join(HISTORY_FILE);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ExperimentError::write(dir, &e))?;
    }
    let mut line = serde_json::to_string(entry).unwrap_or_default();
    line.push('\n');
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| ExperimentError::write(&path, &e))?;
    f.write_all(line.as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| ExperimentError::write(&path, &e))
}

/// The promotions and rollbacks so far, oldest first (none when there is no history file).
/// A last line that does not parse (a crash mid-append) is dropped with a warning; any other
/// line that does not parse is an error naming it: the history never silently loses a line.
pub fn history(project: &Path) -> Result<Vec<HistoryEntry>, ExperimentError> {
    let path = project.join(HISTORY_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ExperimentError::data(&path, format!("cannot read: {e}"))),
    };
    let (entries, torn) = assay_run::journal::parse_entries(&text, 1).map_err(|e| match e {
        assay_run::journal::JournalLinesError::Entry { line, message } => {
            ExperimentError::at_line(&path, line, format!("not a history entry: {message}"))
        }
        other => ExperimentError::data(&path, format!("{other:?}")),
    })?;
    if let Some((line, message)) = torn {
        tracing::warn!(
            "{}:{line}: the last line is incomplete (an interrupted write) and is ignored: {message}",
            path.display()
        );
    }
    Ok(entries)
}

/// The experiment `assay prompts rollback baseline` means: the one whose prompts were promoted
/// most recently (its `baseline_prompts/` are what production had before).
pub fn last_promoted(project: &Path) -> Result<String, ExperimentError> {
    history(project)?
        .into_iter()
        .rev()
        .find(|e| e.action == Action::Promote)
        .map(|e| e.experiment)
        .ok_or_else(|| {
            ExperimentError::Usage(format!(
                "no promotion recorded in {HISTORY_FILE}, so `baseline` names no experiment: \
                 pass the experiment whose baseline_prompts/ to restore (`assay prompts \
                 rollback EXPERIMENT`; experiments: {})",
                {
                    let known = list_experiments(project);
                    if known.is_empty() {
                        "none yet".to_owned()
                    } else {
                        known.join(", ")
                    }
                }
            ))
        })
}

/// A short account of the experiment's evidence that the optimized prompts are better, shown
/// by `assay prompts promote` before it asks: the paired comparison on the held-out cases
/// (McNemar, bootstrap) and whether the gain is significant. `None` when the experiment has no
/// such comparison (yet).
///
/// The experiment record and the statistics belong to the optimize run (`assay_experiment`'s
/// run and stats modules, written by `assay optimize`); this is the one place promotion reads
/// them.
pub fn promotion_summary(experiment_dir: &Path) -> Option<String> {
    use std::fmt::Write as _;
    let report = crate::run::read_report(experiment_dir)?;
    if report.comparisons.is_empty() {
        return None;
    }
    let mut s = String::new();
    for c in &report.comparisons {
        let _ = writeln!(
            s,
            "{} set ({} paired cases): baseline {}/{} correct, composite {:.3} → optimized {}/{} correct, composite {:.3}\n  {}",
            c.set,
            c.significance.pairs,
            c.baseline.factually_correct_count,
            c.baseline.cases,
            c.baseline.average_composite_score,
            c.optimized.factually_correct_count,
            c.optimized.cases,
            c.optimized.average_composite_score,
            c.significance.verdict
        );
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        let w = |rel: &str, text: &str| {
            let f = p.join(rel);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, text).unwrap();
        };
        w(
            "prompts/planner_system_prompt.txt",
            "Plan.\nStep by step.\n",
        );
        w("prompts/finalizer_system_prompt.txt", "Answer briefly.\n");
        w("prompts/expert_system_prompt.txt", "Know things.\n");
        w(
            "experiments/exp1/baseline_prompts/planner_system_prompt.txt",
            "Plan.\nStep by step.\n",
        );
        w(
            "experiments/exp1/baseline_prompts/finalizer_system_prompt.txt",
            "Answer briefly.\n",
        );
        w(
            "experiments/exp1/optimized_prompts/planner_system_prompt.txt",
            "Plan.\nThink first.\n",
        );
        w(
            "experiments/exp1/optimized_prompts/finalizer_system_prompt.txt",
            "Answer briefly.\n",
        );
        dir
    }

    #[test]
    fn a_prompt_that_is_a_symbolic_link_out_of_the_project_is_never_promoted() {
        let dir = project();
        let p = dir.path();
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret.txt");
        std::fs::write(&secret, "ssh-rsa AAAA the key\n").unwrap();
        let link = p.join("experiments/exp1/optimized_prompts/planner_system_prompt.txt");
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let e = plan(p, "exp1", Action::Promote).unwrap_err().to_string();
        assert!(
            e.contains("planner_system_prompt.txt") && e.contains("is a symbolic link (to "),
            "{e}"
        );
        assert!(!e.contains("ssh-rsa"), "{e}");
        // Nor a folder that is one.
        std::fs::remove_file(&link).unwrap();
        let folder = p.join("experiments/exp1/optimized_prompts");
        std::fs::remove_dir_all(&folder).unwrap();
        std::os::unix::fs::symlink(outside.path(), &folder).unwrap();
        let e = plan(p, "exp1", Action::Promote).unwrap_err().to_string();
        assert!(e.contains("is a symbolic link"), "{e}");
    }

    #[test]
    fn plan_diff_apply_and_rollback() {
        let dir = project();
        let p = dir.path();
        let plan = plan(p, "exp1", Action::Promote).unwrap();
        assert_eq!(plan.changes.len(), 1);
        assert_eq!(plan.unchanged, ["finalizer"]);
        assert_eq!(plan.untouched, ["expert"]);
        assert_eq!(
            plan.unified_diff(),
            "--- a/prompts/planner_system_prompt.txt\n\
             +++ b/prompts/planner_system_prompt.txt\n\
             @@ -1,2 +1,2 @@\n Plan.\n-Step by step.\n+Think first.\n"
        );
        // Planning wrote nothing.
        assert!(!p.join(".assay").exists());

        let applied = apply(p, &plan).unwrap();
        assert_eq!(applied.written.len(), 1);
        assert_eq!(
            std::fs::read_to_string(p.join("prompts/planner_system_prompt.txt")).unwrap(),
            "Plan.\nThink first.\n"
        );
        let backup = applied.backup.unwrap();
        assert_eq!(
            std::fs::read_to_string(backup.join("planner_system_prompt.txt")).unwrap(),
            "Plan.\nStep by step.\n"
        );
        assert!(
            backup.join("expert_system_prompt.txt").is_file(),
            "the whole set is backed up"
        );
        assert_eq!(last_promoted(p).unwrap(), "exp1");

        let back = super::plan(p, "exp1", Action::Rollback).unwrap();
        assert_eq!(back.changes.len(), 1);
        let applied = apply(p, &back).unwrap();
        assert_ne!(
            applied.backup,
            Some(backup),
            "every change gets its own backup"
        );
        assert_eq!(
            std::fs::read_to_string(p.join("prompts/planner_system_prompt.txt")).unwrap(),
            "Plan.\nStep by step.\n"
        );
        let h = history(p).unwrap();
        assert_eq!(h.len(), 2);
        assert_eq!(h[1].action, Action::Rollback);
        assert_eq!(h[0].source, "experiments/exp1/optimized_prompts");
        // Nothing left to change: an empty plan writes nothing.
        let again = super::plan(p, "exp1", Action::Rollback).unwrap();
        assert!(again.is_empty());
        assert!(again.unified_diff().is_empty());
        assert_eq!(apply(p, &again).unwrap().written.len(), 0);
        assert_eq!(history(p).unwrap().len(), 2);
    }

    #[test]
    fn the_history_drops_only_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        std::fs::create_dir_all(p.join(".assay")).unwrap();
        let line = r#"{"at":"2026-11-25T10:00:00Z","action":"promote","experiment":"e","source":"s","changed":["a"],"backup":null}"#;
        std::fs::write(
            p.join(HISTORY_FILE),
            format!("{line}\n{line}\n{{\"at\": \"2026"),
        )
        .unwrap();
        assert_eq!(
            history(p).unwrap().len(),
            2,
            "a torn last line is an interrupted append"
        );
        std::fs::write(p.join(HISTORY_FILE), format!("{line}\nnot json\n{line}\n")).unwrap();
        let e = history(p).unwrap_err().to_string();
        assert!(
            e.contains("prompt-history.jsonl:2: not a history entry"),
            "{e}"
        );
        std::fs::write(p.join(HISTORY_FILE), format!("{line} trailing\n{line}\n")).unwrap();
        let e = history(p).unwrap_err().to_string();
        assert!(
            e.contains("prompt-history.jsonl:1: not a history entry"),
            "{e}"
        );
    }

    #[test]
    fn new_agents_diff_from_dev_null() {
        let dir = project();
        let p = dir.path();
        std::fs::write(
            p.join("experiments/exp1/optimized_prompts/critic_system_prompt.txt"),
            "Check.\n",
        )
        .unwrap();
        let plan = plan(p, "exp1", Action::Promote).unwrap();
        let diff = plan.unified_diff();
        assert!(
            diff.starts_with("--- /dev/null\n+++ b/prompts/critic_system_prompt.txt\n"),
            "{diff}"
        );
    }

    #[test]
    fn unknown_experiments_and_missing_folders() {
        let dir = project();
        let p = dir.path();
        let e = plan(p, "exp9", Action::Promote).unwrap_err().to_string();
        assert!(e.starts_with("no experiment `exp9`"), "{e}");
        assert!(e.ends_with("experiments: exp1)"), "{e}");
        assert!(plan(p, "../x", Action::Promote).is_err());
        std::fs::create_dir_all(p.join("experiments/exp2")).unwrap();
        let e = plan(p, "exp2", Action::Promote).unwrap_err().to_string();
        assert!(e.contains("has no optimized_prompts/"), "{e}");
        let e = last_promoted(p).unwrap_err().to_string();
        assert!(e.contains("no promotion recorded"), "{e}");
    }
}
