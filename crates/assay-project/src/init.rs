//! `assay init`: scaffolds a small project that runs as it is.

use std::path::{Path, PathBuf};

use crate::HarnessError;
use crate::results::write_new;

const FILES: [(&str, &str); 7] = [
    ("assay.toml", include_str!("../templates/assay.toml")),
    (
        "kb/entities.yaml",
        include_str!("../templates/entities.yaml"),
    ),
    (
        "test_banks/semantic/parent_test_bank.json",
        include_str!("../templates/semantic_bank.json"),
    ),
    (
        "test_banks/state/state_handler_tests.json",
        include_str!("../templates/state_bank.json"),
    ),
    (
        "test_banks/pattern/pattern_tests.json",
        include_str!("../templates/pattern_bank.json"),
    ),
    (
        "test_banks/pattern/pattern_rules.json",
        include_str!("../templates/pattern_rules.json"),
    ),
    (
        "test_banks/always/always_load_tests.json",
        include_str!("../templates/always_bank.json"),
    ),
];

/// Creates a project in `dir` (which may exist, but must not hold any file `init` writes).
/// Returns the files written.
pub fn init_project(dir: &Path) -> Result<Vec<PathBuf>, HarnessError> {
    let clashes: Vec<String> = FILES
        .iter()
        .map(|(rel, _)| dir.join(rel))
        .chain([dir.join("test_banks/semantic/history")])
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if !clashes.is_empty() {
        return Err(HarnessError::Usage(format!(
            "refusing to overwrite existing files: {}",
            clashes.join(", ")
        )));
    }
    let mut written = Vec::new();
    for (rel, text) in FILES {
        let path = dir.join(rel);
        let parent = path.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
        write_new(&path, text.as_bytes()).map_err(|e| HarnessError::io(&path, &e))?;
        written.push(path);
    }
    let history = dir.join("test_banks/semantic/history");
    std::fs::create_dir_all(&history).map_err(|e| HarnessError::io(&history, &e))?;
    let gitignore = dir.join(".gitignore");
    if !gitignore.exists() {
        write_new(&gitignore, b".assay/\n").map_err(|e| HarnessError::io(&gitignore, &e))?;
        written.push(gitignore);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::Project;

    #[test]
    fn scaffold_loads_cleanly_and_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let files = init_project(dir.path()).unwrap();
        assert_eq!(files.len(), 8);
        let project = Project::load(dir.path()).unwrap();
        assert!(project.warnings.is_empty(), "{:?}", project.warnings);
        assert_eq!(project.banks.state.len(), 2);
        assert!(matches!(
            init_project(dir.path()),
            Err(HarnessError::Usage(_))
        ));
    }
}
