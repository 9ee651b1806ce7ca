//! Draft test cases from production spans: one semantic-bank case per chosen span, with where
//! it came from, in a draft file of its own (never a bank: a person reviews a draft, then
//! copies its `case` into a bank).

use std::path::{Path, PathBuf};

use assay_core::bank::SemanticCase;
use assay_core::tracecheck::{DisagreementKind, DraftCase, DraftFile, DraftProvenance, SpanCheck};

use crate::HarnessError;
use crate::project::Project;

/// The draft case of a checked span. `expected_primary` is what assay selects by pattern rules
/// and semantic search (its ALWAYS and STATE entities are not the semantic bank's business);
/// `not_expected` is what production returned and assay does not select (extra, inactive and
/// unknown ids; the unknown ones also in `known_missing`, so the case loads).
pub fn draft(span: &SpanCheck) -> DraftCase {
    let expected_primary: Vec<String> = span
        .assay
        .iter()
        .filter(|e| matches!(e.stage.as_str(), "semantic" | "crisis" | "keyword"))
        .map(|e| e.entity_id.clone())
        .collect();
    let of_kind = |kinds: &[DisagreementKind]| -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for d in &span.disagreements {
            if kinds.contains(&d.kind) && !ids.contains(&d.entity_id) {
                ids.push(d.entity_id.clone());
            }
        }
        ids
    };
    let not_expected = of_kind(&[
        DisagreementKind::Extra,
        DisagreementKind::Inactive,
        DisagreementKind::Unknown,
    ]);
    let known_missing = of_kind(&[DisagreementKind::Unknown]);
    let short: String = span.span_id.chars().take(16).collect();
    DraftCase {
        case: SemanticCase {
            test_id: format!("TRACE-{short}"),
            name: format!("Production query from trace {}", span.trace_id),
            category: "production_trace".into(),
            topics: Vec::new(),
            prompt: span.query.clone(),
            expected_primary,
            expected_secondary: Vec::new(),
            not_expected,
            rank_check: Vec::new(),
            user_state: span.user_state.clone().unwrap_or_default(),
            known_missing,
        },
        provenance: DraftProvenance {
            trace_id: span.trace_id.clone(),
            span_id: span.span_id.clone(),
            file: span.position.file.clone(),
            line: span.position.line,
            path: span.position.path.clone(),
            audience: span.audience.clone(),
            production: span.production.clone(),
            assay_selects: span.assay.clone(),
            disagreements: span.disagreements.clone(),
        },
    }
}

/// The draft file of `spans`, created now.
pub fn draft_file(spans: &[&SpanCheck]) -> DraftFile {
    DraftFile {
        draft_type: "semantic".into(),
        created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        description: "Draft semantic cases made from production retrieval spans by `assay traces check`. Review each case's expectations, then copy its `case` into a semantic bank.".into(),
        drafts: spans.iter().map(|s| draft(s)).collect(),
    }
}

/// Writes `file` to `path` atomically. Refuses a path that exists (drafts never overwrite a
/// file) and one inside the project's test banks (a run would read it as a bank).
pub fn write(path: &Path, project: &Project, file: &DraftFile) -> Result<(), HarnessError> {
    let absolute = |p: &Path| -> PathBuf {
        let p = if p.is_absolute() {
            p.to_owned()
        } else {
            std::env::current_dir().map_or_else(|_| p.to_owned(), |d| d.join(p))
        };
        // The folder may not exist yet: canonicalise the longest part that does.
        let mut base = p.clone();
        let mut rest = Vec::new();
        while !base.exists() {
            let Some(name) = base.file_name().map(std::ffi::OsStr::to_owned) else {
                break;
            };
            rest.push(name);
            if !base.pop() {
                break;
            }
        }
        let mut out = base.canonicalize().unwrap_or(base);
        out.extend(rest.iter().rev());
        out
    };
    let banks = absolute(&project.settings.banks_dir);
    if absolute(path).starts_with(&banks) {
        return Err(HarnessError::Usage(format!(
            "--drafts {}: inside the test banks ({}), which a run reads; write drafts elsewhere and copy the reviewed cases in",
            path.display(),
            project.settings.banks_dir.display()
        )));
    }
    if path.exists() {
        return Err(HarnessError::Usage(format!(
            "--drafts {}: the file exists; drafts never overwrite a file",
            path.display()
        )));
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
    }
    let mut text = serde_json::to_string_pretty(file)
        .map_err(|e| HarnessError::Infrastructure(format!("drafts: {e}")))?;
    text.push('\n');
    crate::results::write_new(path, text.as_bytes()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            HarnessError::Usage(format!(
                "--drafts {}: the file exists; drafts never overwrite a file",
                path.display()
            ))
        } else {
            HarnessError::io(path, &e)
        }
    })
}
