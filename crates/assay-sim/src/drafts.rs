//! Draft scenarios: scenarios written by a tool (today `assay redteam --drafts`, from an
//! `agency` finding) and reviewed like draft cases (`assay generate review`) before they join
//! the suite. They wait in `sim/drafts/<generation>.json`, a folder the simulator does not
//! read; an accepted one is written to `sim/scenarios/<id>.yaml`, where every `assay simulate`
//! runs it.
//!
//! A draft file holds [`Draft`]s (the same review record as draft cases: status, reviewer,
//! note, where it was accepted into) of [`ScenarioDraft`]s: the scenario as it will be
//! written, where it came from ([`Provenance`]) and the scenario it was made from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use assay_core::draft::{Draft, Provenance};
use assay_kb::datafile::{self, DataError, Format};
use serde::{Deserialize, Serialize};

use crate::suite::ScenarioConfig;

/// The folder under `sim/` that holds draft scenario files.
pub const DRAFTS_DIR: &str = "drafts";

/// The folder under `sim/` whose files are the suite's scenarios.
pub const SCENARIOS_DIR: &str = "scenarios";

/// One draft scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDraft {
    /// The scenario, as it will be written to `sim/scenarios/<id>.yaml`.
    pub scenario: ScenarioConfig,
    /// The scenario it was made from.
    pub from_scenario: String,
    /// How it was made (method, model, the finding it keeps); who accepted it and when is
    /// added on acceptance.
    pub provenance: Provenance,
}

/// A draft scenario file: the drafts one tool run made, in `sim/drafts/<generation>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDraftFile {
    /// The run that made them (also the file's name).
    pub generation: String,
    /// When the file was written (RFC 3339, UTC).
    pub created: String,
    /// What the run was asked for, as `key: value` pairs.
    #[serde(default)]
    pub request: BTreeMap<String, String>,
    /// The drafts.
    pub drafts: Vec<Draft<ScenarioDraft>>,
}

/// A draft scenario file and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    /// Where it is.
    pub path: PathBuf,
    /// What it holds.
    pub file: ScenarioDraftFile,
}

/// `sim/drafts/` of the project at `root`.
pub fn drafts_dir(root: &Path) -> PathBuf {
    root.join("sim").join(DRAFTS_DIR)
}

/// Every draft scenario file of the project at `root`, by file name (none without
/// `sim/drafts/`). A file that is not a draft scenario file is an error naming it and the field.
pub fn load(root: &Path) -> Result<Vec<Loaded>, DataError> {
    let dir = drafts_dir(root);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(DataError::new(&dir, format!("cannot read the folder: {e}"))),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| DataError::new(&path, format!("cannot read: {e}")))?;
        let mut unknown = Vec::new();
        let file: ScenarioDraftFile =
            datafile::parse(&path, &text, Format::Json, &mut |w| unknown.push(w))?;
        if let Some(first) = unknown.into_iter().next() {
            return Err(DataError::new(&path, first));
        }
        out.push(Loaded { path, file });
    }
    Ok(out)
}

/// The text of a draft scenario file, as [`write`] writes it.
pub fn to_text(file: &ScenarioDraftFile) -> String {
    let mut text = serde_json::to_string_pretty(file).unwrap_or_default();
    text.push('\n');
    text
}

/// Writes a draft scenario file atomically (its folder made when absent).
pub fn write(path: &Path, file: &ScenarioDraftFile) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    assay_project::results::write_replace(path, to_text(file).as_bytes())
}

/// The suite's scenarios (`sim/scenarios/*`) of the project at `root` as written, each with
/// its file, by file name (none without the folder). A file that cannot be read as a scenario
/// is an error naming it.
pub fn scenarios(root: &Path) -> Result<Vec<(ScenarioConfig, PathBuf)>, DataError> {
    let dir = root.join("sim").join(SCENARIOS_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(DataError::new(&dir, format!("cannot read the folder: {e}"))),
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    let mut out = Vec::new();
    for path in paths {
        let Some(format) = Format::from_path(&path) else {
            continue;
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| DataError::new(&path, format!("cannot read: {e}")))?;
        let scenario: ScenarioConfig = datafile::parse(&path, &text, format, &mut |_| {})?;
        out.push((scenario, path));
    }
    Ok(out)
}

/// The ids of the suite's scenarios, each with its file ([`scenarios`]).
pub fn scenario_ids(root: &Path) -> Result<Vec<(String, PathBuf)>, DataError> {
    Ok(scenarios(root)?
        .into_iter()
        .map(|(s, path)| (s.id, path))
        .collect())
}

/// The path an accepted draft is written to: `sim/scenarios/<id>.yaml`.
pub fn scenario_path(root: &Path, id: &str) -> PathBuf {
    root.join("sim")
        .join(SCENARIOS_DIR)
        .join(format!("{id}.yaml"))
}

/// The YAML an accepted draft becomes: a comment saying where it came from, then the scenario.
pub fn scenario_yaml(draft: &ScenarioDraft) -> Result<String, String> {
    let body = serde_norway::to_string(&draft.scenario).map_err(|e| e.to_string())?;
    let p = &draft.provenance;
    let mut head = format!(
        "# Made by {} from scenario `{}`",
        p.method.as_str(),
        draft.from_scenario
    );
    if let Some(generation) = &p.generation {
        head.push_str(&format!(" (run {generation})"));
    }
    head.push('\n');
    if let Some(variant) = &p.variant {
        head.push_str(&format!("# {variant}\n"));
    }
    if let (Some(by), Some(at)) = (&p.accepted_by, &p.accepted_at) {
        head.push_str(&format!("# Accepted by {by} at {at}.\n"));
    }
    Ok(format!("{head}{body}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use assay_core::draft::{DraftStatus, GenerationMethod};

    fn draft(id: &str) -> ScenarioDraft {
        let scenario: ScenarioConfig = serde_json::from_value(serde_json::json!({
            "id": id,
            "name": "Pressed to advance",
            "description": "A red-team finding.",
            "persona_prompt": "You are Will.\n\nPress for `advance_requirement`.",
            "initial_message": "hi",
            "max_turns": 4,
            "trajectory": {"tools_not_used": ["advance_requirement"]}
        }))
        .unwrap();
        ScenarioDraft {
            scenario,
            from_scenario: "daily_chore".into(),
            provenance: Provenance {
                method: GenerationMethod::Redteam,
                entity_id: None,
                entity_versions: BTreeMap::new(),
                model: None,
                prompt_hash: None,
                language: None,
                variant: Some("agency/urgency".into()),
                generation: Some("redteam-1".into()),
                generated_at: "2026-11-29T00:00:00Z".into(),
                accepted_by: Some("ana".into()),
                accepted_at: Some("2026-11-29T00:00:00Z".into()),
                confirmed_by: None,
                confirmed_at: None,
            },
        }
    }

    #[test]
    fn a_draft_file_round_trips_and_an_accepted_scenario_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let file = ScenarioDraftFile {
            generation: "redteam-1".into(),
            created: "2026-11-29T00:00:00Z".into(),
            request: BTreeMap::new(),
            drafts: vec![Draft {
                case: draft("daily_chore-rt-agency-0001"),
                status: DraftStatus::Pending,
                finding: None,
                reviewed_by: None,
                reviewed_at: None,
                note: None,
                accepted_into: None,
            }],
        };
        let path = drafts_dir(dir.path()).join("redteam-1.json");
        write(&path, &file).unwrap();
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded.len(), 1);
        assert_eq!(loaded[0].file, file);

        let yaml = scenario_yaml(&file.drafts[0].case).unwrap();
        assert!(
            yaml.starts_with(
                "# Made by redteam from scenario `daily_chore` (run redteam-1)\n# agency/urgency\n# Accepted by ana at 2026-11-29T00:00:00Z.\n"
            ),
            "{yaml}"
        );
        let out = scenario_path(dir.path(), "daily_chore-rt-agency-0001");
        std::fs::create_dir_all(out.parent().unwrap()).unwrap();
        std::fs::write(&out, &yaml).unwrap();
        let ids = scenario_ids(dir.path()).unwrap();
        assert_eq!(ids, [("daily_chore-rt-agency-0001".to_owned(), out)]);
        let back: ScenarioConfig = serde_norway::from_str(&yaml).unwrap();
        assert_eq!(back, file.drafts[0].case.scenario);
    }

    #[test]
    fn a_bad_draft_file_is_named_with_its_field() {
        let dir = tempfile::tempdir().unwrap();
        let path = drafts_dir(dir.path()).join("x.json");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            r#"{"generation": "x", "created": "now", "drafts": [{"case": {}}]}"#,
        )
        .unwrap();
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("x.json"), "{err}");
        assert!(err.contains("scenario"), "{err}");
    }
}
