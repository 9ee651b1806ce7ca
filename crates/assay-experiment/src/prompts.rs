//! Prompt lists per agent (OPT-009, INT-002): the production prompt at index 0, the variants
//! after it.
//!
//! * `prompts/<agent>_system_prompt.txt`: the production (baseline) prompt of each agent. The
//!   set of agents is the set of these files, whatever their names.
//! * `prompt_variations/<agent>/*.txt`: the agent's variants, sorted by file name (byte
//!   order), at indices `1..=N`.
//!
//! Errors, all before anything runs: `prompts/` missing or without a prompt file; a prompt file
//! that is empty or only whitespace, unreadable or not UTF-8; a folder in
//! `prompt_variations/` for an agent that has no production prompt ("unknown agent"). Hidden
//! files and folders (`.name`) are skipped; other files that do not follow the naming are
//! skipped with a warning. Prompt text is used exactly as written (a UTF-8 byte-order mark is
//! dropped).
//!
//! [`write_prompt_dir`] and [`read_prompt_dir`] write and read a folder in the production
//! layout (`<agent>_system_prompt.txt`): an experiment's `baseline_prompts/` and
//! `optimized_prompts/`, and `prompts/` itself when prompts are promoted.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::ExperimentError;

/// The suffix of a production prompt file: `<agent>_system_prompt.txt`.
pub const PROMPT_SUFFIX: &str = "_system_prompt.txt";

/// One prompt of an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptFile {
    /// Its index in the agent's list: 0 for the production prompt.
    pub index: usize,
    /// The file it was read from.
    pub file: PathBuf,
    /// The prompt.
    pub text: String,
}

/// An agent's prompts, the production prompt first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentPrompts {
    /// The agent's name (`planner` for `prompts/planner_system_prompt.txt`).
    pub agent: String,
    /// Index 0 is the production prompt, then the variants in file-name order.
    pub prompts: Vec<PromptFile>,
}

/// Every agent's prompt list, sorted by agent name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptLists {
    /// The agents, sorted by name.
    pub agents: Vec<AgentPrompts>,
}

impl PromptLists {
    /// The agent's list, if there is such an agent.
    pub fn agent(&self, agent: &str) -> Option<&AgentPrompts> {
        self.agents
            .binary_search_by(|a| a.agent.as_str().cmp(agent))
            .ok()
            .map(|i| &self.agents[i])
    }

    /// The agent's prompt at `index`, if both exist.
    pub fn get(&self, agent: &str, index: usize) -> Option<&PromptFile> {
        self.agent(agent)?.prompts.get(index)
    }

    /// The prompts a choice of indices picks, agent → text. An agent missing from `indices`
    /// gets its production prompt.
    ///
    /// # Panics
    /// When an index is out of range for its agent or names an agent that does not exist:
    /// indices come from a search space built from these lists (check input with
    /// [`PromptLists::check`] first).
    pub fn choose(&self, indices: &BTreeMap<String, usize>) -> BTreeMap<String, String> {
        if let Err(e) = self.check(indices) {
            panic!("prompt choice out of range: {e}");
        }
        self.agents
            .iter()
            .map(|a| {
                let i = indices.get(&a.agent).copied().unwrap_or(0);
                (a.agent.clone(), a.prompts[i].text.clone())
            })
            .collect()
    }

    /// Checks that every entry of `indices` names an agent and an index it has.
    pub fn check(&self, indices: &BTreeMap<String, usize>) -> Result<(), String> {
        for (agent, &i) in indices {
            let Some(list) = self.agent(agent) else {
                return Err(format!(
                    "unknown agent `{agent}` (agents: {})",
                    self.names().join(", ")
                ));
            };
            if i >= list.prompts.len() {
                return Err(format!(
                    "agent `{agent}` has prompts 0..={}, not {i}",
                    list.prompts.len() - 1
                ));
            }
        }
        Ok(())
    }

    /// The production prompts, agent → text.
    pub fn baseline(&self) -> BTreeMap<String, String> {
        self.agents
            .iter()
            .map(|a| (a.agent.clone(), a.prompts[0].text.clone()))
            .collect()
    }

    /// The agents' names, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.agents.iter().map(|a| a.agent.as_str()).collect()
    }

    /// The number of prompt combinations (the product of the list lengths), saturating.
    pub fn combinations(&self) -> u128 {
        self.agents
            .iter()
            .fold(1u128, |n, a| n.saturating_mul(a.prompts.len() as u128))
    }
}

/// The agent a production prompt file is for: `planner` for `planner_system_prompt.txt`.
pub fn agent_of(file_name: &str) -> Option<&str> {
    file_name
        .strip_suffix(PROMPT_SUFFIX)
        .filter(|a| !a.is_empty())
}

/// The production file name of an agent's prompt.
pub fn prompt_file_name(agent: &str) -> String {
    format!("{agent}{PROMPT_SUFFIX}")
}

/// Reads a prompt file: UTF-8, not empty or only whitespace; a byte-order mark is dropped.
fn read_prompt(path: &Path) -> Result<String, ExperimentError> {
    let bytes = std::fs::read(path)
        .map_err(|e| ExperimentError::data(path, format!("cannot read prompt file: {e}")))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| ExperimentError::data(path, "prompt file is not UTF-8 text"))?;
    let text = match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_owned(),
        None => text,
    };
    if text.trim().is_empty() {
        return Err(ExperimentError::data(
            path,
            "prompt file is empty (or only whitespace)",
        ));
    }
    Ok(text)
}

/// The entries of a folder, sorted by file name, hidden ones left out.
fn sorted_entries(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>, ExperimentError> {
    let read = std::fs::read_dir(dir)
        .map_err(|e| ExperimentError::data(dir, format!("cannot read folder: {e}")))?;
    let mut out = Vec::new();
    for entry in read {
        let entry =
            entry.map_err(|e| ExperimentError::data(dir, format!("cannot read folder: {e}")))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            tracing::warn!(
                "{}: skipping {:?}: the name is not UTF-8",
                dir.display(),
                entry.file_name()
            );
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let is_dir = path.is_dir();
        out.push((name.to_owned(), path, is_dir));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Reads a folder of `<agent>_system_prompt.txt` files, agent → text. A folder with no prompt
/// file, or an empty prompt file, is an error; other files are skipped with a warning.
pub fn read_prompt_dir(dir: &Path) -> Result<BTreeMap<String, String>, ExperimentError> {
    Ok(read_prompt_files(dir)?
        .into_iter()
        .map(|(agent, (_, text))| (agent, text))
        .collect())
}

/// Like [`read_prompt_dir`], keeping each prompt's file.
fn read_prompt_files(dir: &Path) -> Result<BTreeMap<String, (PathBuf, String)>, ExperimentError> {
    if !dir.is_dir() {
        return Err(ExperimentError::data(
            dir,
            format!("prompt folder not found (expected <agent>{PROMPT_SUFFIX} files in it)"),
        ));
    }
    let mut prompts = BTreeMap::new();
    for (name, path, is_dir) in sorted_entries(dir)? {
        match agent_of(&name) {
            Some(agent) if !is_dir => {
                let text = read_prompt(&path)?;
                prompts.insert(agent.to_owned(), (path, text));
            }
            _ => tracing::warn!(
                "{}: skipping `{name}`: not a prompt file (<agent>{PROMPT_SUFFIX})",
                dir.display()
            ),
        }
    }
    if prompts.is_empty() {
        return Err(ExperimentError::data(
            dir,
            format!("no prompt files (expected <agent>{PROMPT_SUFFIX})"),
        ));
    }
    Ok(prompts)
}

/// The folder, inside an agent's variants, where the optimizer writes the prompts it proposed
/// (`prompt_variations/<agent>/proposed/<experiment>-r<round>-<k>.txt`).
pub const PROPOSED_DIR: &str = "proposed";

/// Loads every agent's prompt list from a project: `prompts/` and `prompt_variations/`
/// (proposed prompts included, after the hand-written variants).
pub fn load_prompt_lists(project: &Path) -> Result<PromptLists, ExperimentError> {
    load_prompt_lists_for(project, None)
}

/// Whether a proposed prompt's file was written by experiment `name`.
pub fn proposed_by(file_name: &str, name: &str) -> bool {
    file_name
        .strip_prefix(name)
        .and_then(|rest| rest.strip_prefix("-r"))
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// [`load_prompt_lists`] for experiment `experiment`: the prompts it proposed itself are left
/// out (they join its lists during the run, and `--resume` must see the lists it started
/// with). Variants are the `.txt` files of `prompt_variations/<agent>/` in file-name order,
/// then those of its `proposed/` folder in file-name order.
pub fn load_prompt_lists_for(
    project: &Path,
    experiment: Option<&str>,
) -> Result<PromptLists, ExperimentError> {
    let baseline = read_prompt_files(&project.join("prompts"))?;
    let mut variants: BTreeMap<String, Vec<PromptFile>> = BTreeMap::new();
    let var_dir = project.join("prompt_variations");
    if var_dir.is_dir() {
        for (name, path, is_dir) in sorted_entries(&var_dir)? {
            if !is_dir {
                tracing::warn!(
                    "{}: skipping `{name}`: variants go in prompt_variations/<agent>/",
                    var_dir.display()
                );
                continue;
            }
            if !baseline.contains_key(&name) {
                let agents: Vec<&str> = baseline.keys().map(String::as_str).collect();
                return Err(ExperimentError::data(
                    &path,
                    format!(
                        "unknown agent `{name}` in variants: there is no prompts/{} (agents: {})",
                        prompt_file_name(&name),
                        agents.join(", ")
                    ),
                ));
            }
            let mut list = Vec::new();
            let mut files = sorted_entries(&path)?;
            let proposed = path.join(PROPOSED_DIR);
            if proposed.is_dir() {
                files.retain(|(file, _, _)| file != PROPOSED_DIR);
                files.extend(
                    sorted_entries(&proposed)?
                        .into_iter()
                        .filter(|(file, _, _)| {
                            // Sidecars are the proposals' records, not prompts.
                            !Path::new(file)
                                .extension()
                                .is_some_and(|x| x.eq_ignore_ascii_case("json"))
                                && !experiment.is_some_and(|x| proposed_by(file, x))
                        }),
                );
            }
            for (file, fpath, is_dir) in files {
                let is_txt = Path::new(&file)
                    .extension()
                    .is_some_and(|x| x.eq_ignore_ascii_case("txt"));
                if is_dir || !is_txt {
                    tracing::warn!(
                        "{}: skipping `{file}`: variants are .txt files",
                        path.display()
                    );
                    continue;
                }
                let text = read_prompt(&fpath)?;
                list.push(PromptFile {
                    index: list.len() + 1,
                    file: fpath,
                    text,
                });
            }
            variants.insert(name, list);
        }
    }
    let agents = baseline
        .into_iter()
        .map(|(agent, (file, text))| {
            let mut prompts = vec![PromptFile {
                index: 0,
                file,
                text,
            }];
            prompts.extend(variants.remove(&agent).unwrap_or_default());
            for p in &prompts[1..] {
                if p.text == prompts[0].text {
                    tracing::warn!(
                        "{}: the same text as the production prompt of `{agent}`",
                        p.file.display()
                    );
                }
            }
            AgentPrompts { agent, prompts }
        })
        .collect();
    Ok(PromptLists { agents })
}

/// Writes `prompts` (agent → text) into `dir` as `<agent>_system_prompt.txt` files, each
/// atomically (a temporary file renamed into place), creating `dir` if needed. Files of other
/// agents are left alone. Returns the files written.
pub fn write_prompt_dir(
    dir: &Path,
    prompts: &BTreeMap<String, String>,
) -> Result<Vec<PathBuf>, ExperimentError> {
    std::fs::create_dir_all(dir).map_err(|e| ExperimentError::write(dir, &e))?;
    let mut written = Vec::with_capacity(prompts.len());
    for (agent, text) in prompts {
        let path = dir.join(prompt_file_name(agent));
        assay_project::results::write_replace(&path, text.as_bytes())
            .map_err(|e| ExperimentError::write(&path, &e))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposed_prompts_follow_the_hand_written_ones_except_the_experiments_own() {
        let dir = project(&[
            ("prompts/planner_system_prompt.txt", "base"),
            ("prompt_variations/planner/b.txt", "b"),
            ("prompt_variations/planner/proposed/exp-r1-1.txt", "mine"),
            ("prompt_variations/planner/proposed/exp-r1-1.json", "{}"),
            ("prompt_variations/planner/proposed/exp2-r1-1.txt", "other"),
            ("prompt_variations/planner/proposed/a.txt", "hand-placed"),
        ]);
        let texts = |lists: &PromptLists| -> Vec<String> {
            lists.agents[0]
                .prompts
                .iter()
                .map(|p| p.text.clone())
                .collect()
        };
        let all = load_prompt_lists(dir.path()).unwrap();
        assert_eq!(texts(&all), ["base", "b", "hand-placed", "mine", "other"]);
        let for_exp = load_prompt_lists_for(dir.path(), Some("exp")).unwrap();
        assert_eq!(texts(&for_exp), ["base", "b", "hand-placed", "other"]);
        assert!(proposed_by("exp-r12-3.txt", "exp") && !proposed_by("exp-rx.txt", "exp"));
        assert!(!proposed_by("exp2-r1-1.txt", "exp"));
    }

    fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let p = dir.path().join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    fn err(files: &[(&str, &str)]) -> String {
        let dir = project(files);
        load_prompt_lists(dir.path())
            .unwrap_err()
            .to_string()
            .replace(&dir.path().display().to_string(), "DIR")
    }

    #[test]
    fn lists_baseline_then_sorted_variants() {
        let dir = project(&[
            ("prompts/planner_system_prompt.txt", "plan"),
            ("prompts/finalizer_system_prompt.txt", "\u{feff}final"),
            ("prompts/README.md", "notes"),
            ("prompt_variations/planner/v2.txt", "plan v2"),
            ("prompt_variations/planner/v1.txt", "plan v1"),
            ("prompt_variations/planner/.v0.txt.swp", "x"),
            ("prompt_variations/planner/notes.md", "x"),
        ]);
        let lists = load_prompt_lists(dir.path()).unwrap();
        assert_eq!(lists.names(), ["finalizer", "planner"]);
        let planner = lists.agent("planner").unwrap();
        let texts: Vec<_> = planner.prompts.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(texts, ["plan", "plan v1", "plan v2"]);
        let idx: Vec<_> = planner.prompts.iter().map(|p| p.index).collect();
        assert_eq!(idx, [0, 1, 2]);
        assert!(
            planner.prompts[1]
                .file
                .ends_with("prompt_variations/planner/v1.txt")
        );
        assert_eq!(lists.agent("finalizer").unwrap().prompts.len(), 1);
        assert_eq!(lists.baseline()["finalizer"], "final");
        assert_eq!(lists.combinations(), 3);

        let choice = BTreeMap::from([("planner".to_owned(), 2)]);
        let chosen = lists.choose(&choice);
        assert_eq!(chosen["planner"], "plan v2");
        assert_eq!(chosen["finalizer"], "final");
        assert!(
            lists
                .check(&BTreeMap::from([("planner".to_owned(), 3)]))
                .is_err()
        );
        assert!(
            lists
                .check(&BTreeMap::from([("critic".to_owned(), 0)]))
                .is_err()
        );
        assert_eq!(lists.get("planner", 1).unwrap().text, "plan v1");
        assert!(lists.get("planner", 3).is_none());
    }

    #[test]
    fn no_variations_folder_is_fine() {
        let dir = project(&[("prompts/a_system_prompt.txt", "a")]);
        let lists = load_prompt_lists(dir.path()).unwrap();
        assert_eq!(lists.agents[0].prompts.len(), 1);
    }

    #[test]
    fn unknown_agent_in_variants() {
        let e = err(&[
            ("prompts/planner_system_prompt.txt", "plan"),
            ("prompt_variations/planer/v1.txt", "typo"),
        ]);
        assert_eq!(
            e,
            "DIR/prompt_variations/planer: unknown agent `planer` in variants: there is no \
             prompts/planer_system_prompt.txt (agents: planner)"
        );
    }

    #[test]
    fn empty_prompt_files_are_errors() {
        let e = err(&[("prompts/planner_system_prompt.txt", " \n\t\n")]);
        assert_eq!(
            e,
            "DIR/prompts/planner_system_prompt.txt: prompt file is empty (or only whitespace)"
        );
        let e = err(&[
            ("prompts/planner_system_prompt.txt", "plan"),
            ("prompt_variations/planner/v1.txt", ""),
        ]);
        assert_eq!(
            e,
            "DIR/prompt_variations/planner/v1.txt: prompt file is empty (or only whitespace)"
        );
    }

    #[test]
    fn missing_or_empty_prompts_folder() {
        let e = err(&[]);
        assert!(e.starts_with("DIR/prompts: prompt folder not found"), "{e}");
        let e = err(&[("prompts/notes.txt", "x")]);
        assert!(e.starts_with("DIR/prompts: no prompt files"), "{e}");
    }

    #[test]
    fn write_then_read_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("exp/optimized_prompts");
        let prompts = BTreeMap::from([
            ("planner".to_owned(), "plan\n".to_owned()),
            ("expert".to_owned(), "know".to_owned()),
        ]);
        let written = write_prompt_dir(&out, &prompts).unwrap();
        assert_eq!(written.len(), 2);
        assert!(out.join("planner_system_prompt.txt").is_file());
        assert_eq!(read_prompt_dir(&out).unwrap(), prompts);
        // Rewriting replaces; no temporary files are left.
        let again = BTreeMap::from([("planner".to_owned(), "plan 2".to_owned())]);
        write_prompt_dir(&out, &again).unwrap();
        assert_eq!(read_prompt_dir(&out).unwrap()["planner"], "plan 2");
        assert_eq!(std::fs::read_dir(&out).unwrap().count(), 2);
    }

    #[test]
    fn agent_names() {
        assert_eq!(
            agent_of("critic_planner_system_prompt.txt"),
            Some("critic_planner")
        );
        assert_eq!(agent_of("_system_prompt.txt"), None);
        assert_eq!(agent_of("planner.txt"), None);
    }
}
