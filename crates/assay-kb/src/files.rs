//! Loading a project's `kb/` folder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use assay_core::entity::{Entity, LoadMode};

use crate::datafile::{self, DataError, Format};
use crate::{InvalidEntity, KbError, MemoryKb, check_entity};

/// A loaded and validated knowledge base, with where each entity came from.
#[derive(Debug, Clone)]
pub struct LoadedKb {
    /// The entities.
    pub kb: MemoryKb,
    /// The file each entity was read from, by id.
    pub sources: HashMap<String, PathBuf>,
    /// The entity files read, in order.
    pub files: Vec<PathBuf>,
    /// Warnings (unknown fields, suspicious entities).
    pub warnings: Vec<String>,
    /// What the files held when they were read ([`fingerprint`]): a writer that holds the
    /// knowledge-base lock compares it with the files as they are now before it trusts what was
    /// loaded earlier.
    pub fingerprint: u64,
}

/// A digest of the entity files under `dir` (their paths and bytes, in order): equal for two
/// reads when no entity file was added, removed or changed in between. Stable within one
/// process only (it is never stored).
pub fn fingerprint(dir: &Path) -> Result<u64, DataError> {
    if !dir.exists() {
        return Ok(Digest::default().finish());
    }
    let mut digest = Digest::default();
    for file in entity_files(dir)? {
        let bytes = std::fs::read(&file)
            .map_err(|e| DataError::new(&file, format!("cannot read file: {e}")))?;
        digest.add(&file, &bytes);
    }
    Ok(digest.finish())
}

#[derive(Default)]
struct Digest(std::hash::DefaultHasher);

impl Digest {
    fn add(&mut self, path: &Path, bytes: &[u8]) {
        use std::hash::Hash as _;
        path.hash(&mut self.0);
        bytes.hash(&mut self.0);
    }

    fn finish(&self) -> u64 {
        std::hash::Hasher::finish(&self.0)
    }
}

/// The entity files of a `kb/` folder: every `.json`, `.yaml` and `.yml` file below it, sorted.
fn entity_files(dir: &Path) -> Result<Vec<PathBuf>, DataError> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d)
            .map_err(|e| DataError::new(&d, format!("cannot read knowledge-base folder: {e}")))?;
        for entry in entries {
            let path = entry.map_err(|e| DataError::new(&d, e.to_string()))?.path();
            if path.is_dir() {
                stack.push(path);
            } else if Format::from_path(&path).is_some() {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Reads and validates every entity file under `dir`.
///
/// Errors name the file, and the line, column and field where the parser knows them:
/// malformed JSON/YAML, a missing required field, a bad enum value, a priority out of range,
/// a duplicate `entity_id` (naming both files), an unknown condition operator (naming the
/// entity, the field and the operator).
pub fn load_dir(dir: &Path) -> Result<LoadedKb, KbError> {
    let files = entity_files(dir)?;
    let mut warnings = Vec::new();
    let mut entities: Vec<Entity> = Vec::new();
    let mut sources: HashMap<String, PathBuf> = HashMap::new();
    let mut digest = Digest::default();
    for file in &files {
        let (format, text) = datafile::read_text(file)?;
        digest.add(file, text.as_bytes());
        let batch: Vec<Entity> = datafile::parse(file, &text, format, &mut |w| warnings.push(w))?;
        for (i, entity) in batch.into_iter().enumerate() {
            validate(file, &text, i, &entity, &mut warnings)?;
            if let Some(first) = sources.get(&entity.entity_id) {
                return Err(DataError::new(
                    file,
                    format!(
                        "[{i}]: duplicate entity_id `{}` (first defined in {})",
                        entity.entity_id,
                        first.display()
                    ),
                )
                .into());
            }
            sources.insert(entity.entity_id.clone(), file.clone());
            entities.push(entity);
        }
    }
    Ok(LoadedKb {
        kb: MemoryKb::new(entities)?,
        sources,
        files,
        warnings,
        fingerprint: digest.finish(),
    })
}

fn validate(
    file: &Path,
    text: &str,
    index: usize,
    e: &Entity,
    warnings: &mut Vec<String>,
) -> Result<(), DataError> {
    let conditions = check_entity(e).map_err(|problem| match problem {
        InvalidEntity::EmptyId | InvalidEntity::BadId { .. } => {
            DataError::new(file, format!("[{index}]: {problem}"))
        }
        InvalidEntity::Conditions(ref c) => DataError {
            line: datafile::entry_line(
                text,
                ("entity_id", &e.entity_id),
                &["state_conditions", c.field()],
            ),
            ..DataError::new(file, format!("[{index}] `{}`: {problem}", e.entity_id))
        },
        InvalidEntity::EmptyTitle => {
            DataError::new(file, format!("[{index}] `{}`: {problem}", e.entity_id))
        }
    })?;
    if e.audience_types.is_empty() {
        warnings.push(format!(
            "{}: entity `{}` has no audience_types and is never loaded",
            file.display(),
            e.entity_id
        ));
    }
    match (conditions, e.load_mode) {
        (Some(conditions), _) => {
            if e.load_mode != LoadMode::State {
                warnings.push(format!(
                    "{}: entity `{}` has state_conditions but load_mode {}; they are ignored",
                    file.display(),
                    e.entity_id,
                    e.load_mode
                ));
            } else if conditions.is_empty() {
                warnings.push(format!(
                    "{}: STATE entity `{}` has empty state_conditions and never triggers",
                    file.display(),
                    e.entity_id
                ));
            }
        }
        (None, LoadMode::State) => warnings.push(format!(
            "{}: STATE entity `{}` has no state_conditions and never triggers",
            file.display(),
            e.entity_id
        )),
        (None, _) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KnowledgeBase;

    fn kb_dir(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        dir
    }

    #[test]
    fn loads_json_and_yaml() {
        let dir = kb_dir(&[
            (
                "a.json",
                r#"[{"entity_id":"x","entity_type":"KNOWLEDGE","title":"X"}]"#,
            ),
            (
                "b.yaml",
                "- entity_id: h\n  entity_type: HANDLER\n  title: H\n  load_mode: STATE\n  state_conditions:\n    n: {gte: 1}\n",
            ),
            ("notes.txt", "ignored"),
        ]);
        let loaded = load_dir(dir.path()).unwrap();
        assert_eq!(loaded.kb.entities().len(), 2);
        assert!(loaded.kb.contains("h").unwrap());
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }

    #[test]
    fn duplicate_across_files_names_both() {
        let e = r#"[{"entity_id":"x","entity_type":"KNOWLEDGE","title":"X"}]"#;
        let dir = kb_dir(&[("a.json", e), ("b.json", e)]);
        let err = load_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("b.json: [0]: duplicate entity_id `x` (first defined in"),
            "{err}"
        );
        assert!(err.contains("a.json)"), "{err}");
    }

    #[test]
    fn unknown_operator_names_entity_and_operator() {
        let dir = kb_dir(&[(
            "h.json",
            r#"[{"entity_id":"handler_x","entity_type":"HANDLER","title":"X","load_mode":"STATE","state_conditions":{"days":{"$gtee":7}}}]"#,
        )]);
        let err = load_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("`handler_x`: state_conditions: field `days`: unknown operator `$gtee` (did you mean `$gte`?)"),
            "{err}"
        );
        let dir = kb_dir(&[(
            "h.yaml",
            "- entity_id: other\n  entity_type: RULE\n  title: O\n- entity_id: handler_x\n  entity_type: HANDLER\n  title: X\n  load_mode: STATE\n  state_conditions:\n    days_since_last:\n      ge: 7\n",
        )]);
        let err = load_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("h.yaml:9: [1] `handler_x`: state_conditions: field `days_since_last`: unknown operator `ge` (did you mean `gte`?)"),
            "{err}"
        );
    }

    #[test]
    fn bad_enum_has_a_location() {
        let dir = kb_dir(&[(
            "a.yaml",
            "- entity_id: x\n  entity_type: FACT\n  title: X\n",
        )]);
        let err = load_dir(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("a.yaml:2:")
                && err.contains("entity_type: unknown value `FACT`; expected one of `PERSONA`"),
            "{err}"
        );
    }

    #[test]
    fn state_entity_without_conditions_warns() {
        let dir = kb_dir(&[(
            "a.json",
            r#"[{"entity_id":"h","entity_type":"HANDLER","title":"H","load_mode":"STATE"}]"#,
        )]);
        let loaded = load_dir(dir.path()).unwrap();
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(loaded.warnings[0].contains("never triggers"));
    }

    #[test]
    fn an_unknown_entity_field_is_an_error_naming_the_closest() {
        let dir = kb_dir(&[(
            "a.json",
            r#"[{"entity_id":"h","entity_type":"HANDLER","title":"H","colour":"red","guidance_dont":"x","guidence_do":"y"}]"#,
        )]);
        let err = load_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("a.json:1:"), "{err}");
        assert!(
            err.contains("[0]: unknown field `colour`; expected one of `entity_id`"),
            "{err}"
        );
    }
}
