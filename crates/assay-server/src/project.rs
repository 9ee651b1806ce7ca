//! What a served folder holds, and the project as the server reads it.
//!
//! `assay serve` serves a folder whatever it holds: test banks, a knowledge base, saved runs,
//! the prompt optimizer's experiments, simulation reports, or none of them yet. Each page
//! shows what is there, or says which command fills it; only the harness routes (a run, a
//! case, a topic, a calibration) need the test banks, and they answer 422 `no_test_banks`
//! without them ([`require_test_banks`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use assay_kb::LoadedKb;
use assay_project::HarnessError;
use assay_project::banks::Banks;
use assay_project::engine;
use assay_project::expectations::ExpectationLoader;
use assay_project::project::Project;
use assay_project::settings::ProjectSettings;

use crate::error::ApiError;

/// What a project folder holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Contents {
    /// The folder.
    pub dir: PathBuf,
    /// It has a test-banks folder (`test_banks/`, or `[paths] banks` in `assay.toml`).
    pub test_banks: bool,
    /// It has a knowledge base: a `kb/` folder, or a database store (`store =`/`ASSAY_STORE`)
    /// that holds the knowledge base itself.
    pub kb: bool,
    /// Saved runs (`results/results_<stamp>.json`).
    pub runs: usize,
    /// The prompt optimizer's experiments (`experiments/*/`).
    pub experiments: usize,
    /// Saved simulation reports (`sim/reports/report_<stamp>.json`).
    pub simulations: usize,
}

impl Contents {
    /// Looks at the folder `dir` (its `assay.toml`, when it has one, says where things are):
    /// an error when the folder does not exist or its `assay.toml` does not load.
    pub fn survey(
        dir: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Contents, HarnessError> {
        if !dir.is_dir() {
            return Err(HarnessError::Usage(format!(
                "project directory `{}` does not exist",
                dir.display()
            )));
        }
        let settings = ProjectSettings::load(dir)?;
        let is_run = |e: &std::fs::DirEntry| {
            e.file_name().to_str().is_some_and(|n| {
                n.strip_prefix("results_")
                    .and_then(|n| n.strip_suffix(".json"))
                    .is_some_and(|id| assay_run::runs::check_run_id(id).is_ok())
            })
        };
        let runs = std::fs::read_dir(&settings.results_dir).map_or(0, |rd| {
            rd.filter_map(Result::ok).filter(|e| is_run(e)).count()
        });
        Ok(Contents {
            dir: dir.to_owned(),
            test_banks: settings.banks_dir.is_dir(),
            kb: has_kb(&settings, env),
            runs,
            experiments: assay_experiment::promote::list_experiments(dir).len(),
            simulations: assay_sim::report::list(dir).len(),
        })
    }

    /// What the folder holds, in words: `test banks, a knowledge base, 3 saved runs`, or
    /// `nothing assay reads yet`.
    pub fn describe(&self) -> String {
        let plural = |n: usize, one: &str, many: &str| {
            if n == 1 {
                format!("1 {one}")
            } else {
                format!("{n} {many}")
            }
        };
        let mut parts = Vec::new();
        if self.test_banks {
            parts.push("test banks".to_owned());
        }
        if self.kb {
            parts.push("a knowledge base".to_owned());
        }
        if self.runs > 0 {
            parts.push(plural(self.runs, "saved run", "saved runs"));
        }
        if self.experiments > 0 {
            parts.push(plural(self.experiments, "experiment", "experiments"));
        }
        if self.simulations > 0 {
            parts.push(plural(
                self.simulations,
                "simulation report",
                "simulation reports",
            ));
        }
        if parts.is_empty() {
            "nothing assay reads yet (no test banks, knowledge base, runs, experiments or simulation reports)".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// Whether the project has a knowledge base: a `kb/` folder, or a database store, which holds
/// the knowledge base itself.
pub fn has_kb(settings: &ProjectSettings, env: &dyn Fn(&str) -> Option<String>) -> bool {
    settings.kb_dir.is_dir()
        || engine::store_setting(settings, env)
            .0
            .is_some_and(|store| engine::is_database(&store))
}

/// [`has_kb`] for the folder `dir`, with the process environment (true when its `assay.toml`
/// does not load: the page that asks then shows that error itself).
pub fn has_kb_dir(dir: &Path) -> bool {
    ProjectSettings::load(dir).map_or(true, |settings| {
        has_kb(&settings, &|name| std::env::var(name).ok())
    })
}

/// What a harness route says when the project has no test banks.
pub fn no_test_banks(settings: &ProjectSettings) -> String {
    format!(
        "this project has no test banks (no folder {}): running the banks, one case or a topic, and calibrating need them; `assay init DIR` makes a project with test banks",
        settings.banks_dir.display()
    )
}

/// Refuses, with 422 `no_test_banks`, a project without test banks (before anything loads it).
pub fn require_test_banks(dir: &Path) -> Result<(), ApiError> {
    if !dir.is_dir() {
        return Err(HarnessError::Usage(format!(
            "project directory `{}` does not exist",
            dir.display()
        ))
        .into());
    }
    let settings = ProjectSettings::load(dir).map_err(HarnessError::from)?;
    if settings.banks_dir.is_dir() {
        Ok(())
    } else {
        Err(ApiError::new(
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "no_test_banks",
            no_test_banks(&settings),
        ))
    }
}

/// The project at `dir` as the pages read it: loaded and validated whole
/// ([`Project::load`]) when it has test banks; without them, its settings and knowledge base
/// with no banks (a knowledge base that is not tested yet, or a folder of experiments or
/// simulation reports), so the knowledge-base pages still work.
pub fn load(dir: &Path) -> Result<Project, HarnessError> {
    if !dir.is_dir() {
        return Err(HarnessError::Usage(format!(
            "project directory `{}` does not exist",
            dir.display()
        )));
    }
    let settings = ProjectSettings::load(dir)?;
    if settings.banks_dir.is_dir() {
        return Project::load(dir);
    }
    let kb = if settings.kb_dir.is_dir() {
        assay_kb::load_dir(&settings.kb_dir)?
    } else {
        LoadedKb {
            kb: assay_kb::MemoryKb::default(),
            sources: HashMap::new(),
            files: Vec::new(),
            warnings: Vec::new(),
            fingerprint: assay_kb::fingerprint(&settings.kb_dir).unwrap_or_default(),
        }
    };
    let warnings = kb.warnings.clone();
    Ok(Project {
        settings,
        kb,
        banks: Banks::default(),
        patterns: None,
        rules: None,
        rules_file: None,
        expectations: ExpectationLoader::default(),
        warnings,
        entity_refs: Vec::new(),
        refs_checked_against_files: true,
        state_uses: assay_project::typed_state::StateUses::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_folder_holds_nothing_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let c = Contents::survey(dir.path(), &|_| None).unwrap();
        assert!(!c.test_banks && !c.kb);
        assert_eq!((c.runs, c.experiments, c.simulations), (0, 0, 0));
        assert!(c.describe().starts_with("nothing"), "{}", c.describe());
        assert!(Contents::survey(&dir.path().join("nope"), &|_| None).is_err());
        let e = require_test_banks(dir.path()).unwrap_err();
        assert_eq!(e.code, "no_test_banks");
        assert_eq!(e.status, axum::http::StatusCode::UNPROCESSABLE_ENTITY);
        let p = load(dir.path()).unwrap();
        assert_eq!(p.banks.count(assay_core::bank::BankType::Semantic), 0);
    }

    #[test]
    fn contents_are_described() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("kb")).unwrap();
        std::fs::create_dir_all(dir.path().join("experiments/a")).unwrap();
        std::fs::create_dir_all(dir.path().join("results")).unwrap();
        std::fs::write(
            dir.path().join("results/results_2026-11-25-0915.json"),
            "{}",
        )
        .unwrap();
        std::fs::write(dir.path().join("results/notes.json"), "{}").unwrap();
        let c = Contents::survey(dir.path(), &|_| None).unwrap();
        assert_eq!(
            c.describe(),
            "a knowledge base, 1 saved run, 1 experiment",
            "{c:?}"
        );
    }
}
