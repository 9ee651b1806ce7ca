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

/// The `rag` template: an answer bank of assertions and trajectory checks asked of a Python
/// function, with a lexical embedder: it runs with no key and no model.
const RAG_FILES: [(&str, &str); 7] = [
    ("assay.toml", include_str!("../templates/rag/assay.toml")),
    (
        "kb/helpdesk.yaml",
        include_str!("../templates/rag/kb/helpdesk.yaml"),
    ),
    (
        "test_banks/answer/helpdesk.json",
        include_str!("../templates/rag/test_banks/answer/helpdesk.json"),
    ),
    (
        "helpdesk/__init__.py",
        include_str!("../templates/rag/helpdesk/__init__.py"),
    ),
    (
        "helpdesk/bot.py",
        include_str!("../templates/rag/helpdesk/bot.py"),
    ),
    ("pytest.ini", include_str!("../templates/rag/pytest.ini")),
    ("README.md", include_str!("../templates/rag/README.md")),
];

/// What `assay init` starts a project from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    /// A knowledge base and the four retrieval banks (the default).
    Retrieval,
    /// An answer bank asked of a Python function.
    Rag,
}

impl Template {
    /// `retrieval` or `rag`.
    pub fn parse(name: &str) -> Result<Template, HarnessError> {
        match name {
            "retrieval" => Ok(Template::Retrieval),
            "rag" => Ok(Template::Rag),
            other => Err(HarnessError::Usage(format!(
                "--template: unknown template `{other}` (expected retrieval or rag)"
            ))),
        }
    }

    fn files(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Template::Retrieval => &FILES,
            Template::Rag => &RAG_FILES,
        }
    }
}

/// Creates a project from `template` in `dir` (which may exist, but must not hold any file
/// `init` writes). Returns the files written.
pub fn init_project(dir: &Path, template: Template) -> Result<Vec<PathBuf>, HarnessError> {
    let history =
        (template == Template::Retrieval).then(|| dir.join("test_banks/semantic/history"));
    let clashes: Vec<String> = template
        .files()
        .iter()
        .map(|(rel, _)| dir.join(rel))
        .chain(history.clone())
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
    for (rel, text) in template.files() {
        let path = dir.join(rel);
        let parent = path.parent().unwrap_or(dir);
        std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
        write_new(&path, text.as_bytes()).map_err(|e| HarnessError::io(&path, &e))?;
        written.push(path);
    }
    if let Some(history) = history {
        std::fs::create_dir_all(&history).map_err(|e| HarnessError::io(&history, &e))?;
    }
    let gitignore = dir.join(".gitignore");
    if !gitignore.exists() {
        let ignored: &[u8] = match template {
            Template::Retrieval => b".assay/\n",
            Template::Rag => b".assay/\nresults/\n__pycache__/\n",
        };
        write_new(&gitignore, ignored).map_err(|e| HarnessError::io(&gitignore, &e))?;
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
        let files = init_project(dir.path(), Template::Retrieval).unwrap();
        assert_eq!(files.len(), 8);
        let project = Project::load(dir.path()).unwrap();
        assert!(project.warnings.is_empty(), "{:?}", project.warnings);
        assert_eq!(project.banks.state.len(), 2);
        assert!(matches!(
            init_project(dir.path(), Template::Retrieval),
            Err(HarnessError::Usage(_))
        ));
    }

    #[test]
    fn the_rag_template_loads_cleanly_with_its_answer_bank() {
        let dir = tempfile::tempdir().unwrap();
        let files = init_project(dir.path(), Template::Rag).unwrap();
        assert_eq!(files.len(), RAG_FILES.len() + 1, "and .gitignore");
        let project = Project::load(dir.path()).unwrap();
        assert!(project.warnings.is_empty(), "{:?}", project.warnings);
        assert_eq!(project.banks.answer.len(), 4);
        assert_eq!(
            project.settings.optimize.target,
            "python:helpdesk.bot:answer"
        );
        assert!(Template::parse("other").is_err());
    }
}
