//! Draft test cases from production spans: one semantic-bank case per chosen span, with where
//! it came from, in a draft file of its own (never a bank: a person reviews a draft, then
//! copies its `case` into a bank).

use std::path::{Path, PathBuf};

use assay_core::bank::SemanticCase;
use assay_core::tracecheck::{DisagreementKind, DraftCase, DraftFile, DraftProvenance, SpanCheck};

use crate::HarnessError;
use assay_project::project::Project;

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
            provenance: Some(assay_core::draft::Provenance {
                method: assay_core::draft::GenerationMethod::Trace,
                entity_id: None,
                entity_versions: std::collections::BTreeMap::new(),
                model: None,
                prompt_hash: None,
                language: None,
                variant: Some(format!("trace {} span {}", span.trace_id, span.span_id)),
                generation: None,
                generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                accepted_by: None,
                accepted_at: None,
                confirmed_by: None,
                confirmed_at: None,
            }),
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
    assay_project::results::write_new(path, text.as_bytes()).map_err(|e| {
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

/// What [`to_review`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ToReview {
    /// The draft file written, when any span was new.
    pub file: Option<PathBuf>,
    /// Drafts written.
    pub written: usize,
    /// Spans left out because a bank or a draft file already holds their case's test id.
    pub skipped: Vec<String>,
}

/// Writes the draft cases of `spans` into the project's drafts, a new file
/// `test_banks/drafts/semantic/<generation>.json`, where `assay generate review` lists,
/// accepts, edits or rejects them like generated drafts. Each case's provenance records the
/// trace, the span and, in `entity_versions`, the current version (`version`) of each entity it
/// names, so an edit of one makes the accepted case stale. A span whose case's test id a bank or
/// an earlier draft file holds (the same span checked again) is skipped and counted.
pub fn to_review(
    project: &Project,
    spans: &[&SpanCheck],
    version: &dyn Fn(&str) -> Option<u32>,
) -> Result<ToReview, HarnessError> {
    use assay_core::bank::{BankType, Case as _};
    use assay_core::draft::{Draft, DraftBank, DraftStatus};

    let banks_dir = &project.settings.banks_dir;
    let existing = assay_project::drafts::load_drafts(banks_dir)?;
    let mut taken: std::collections::HashSet<String> = project
        .banks
        .semantic
        .iter()
        .map(|c| c.case.test_id.clone())
        .chain(project.banks.state.iter().map(|c| c.case.test_id.clone()))
        .chain(project.banks.pattern.iter().map(|c| c.case.test_id.clone()))
        .chain(project.banks.always.iter().map(|c| c.case.test_id.clone()))
        .chain(
            existing
                .semantic
                .iter()
                .flat_map(|l| l.file.drafts.iter().map(|d| d.case.test_id.clone())),
        )
        .collect();
    let now = chrono::Utc::now();
    let generation = assay_project::drafts::new_generation_id(now);
    let mut out = ToReview {
        file: None,
        written: 0,
        skipped: Vec::new(),
    };
    let mut drafts = Vec::new();
    for span in spans {
        let mut case = draft(span).case;
        if !taken.insert(case.test_id.clone()) {
            out.skipped.push(case.test_id);
            continue;
        }
        let named: Vec<String> = case
            .expects()
            .into_iter()
            .chain(case.excludes())
            .cloned()
            .collect();
        if let Some(p) = case.provenance.as_mut() {
            p.generation = Some(generation.clone());
            p.entity_versions = named
                .iter()
                .filter_map(|id| version(id).map(|v| (id.clone(), v)))
                .collect();
            p.entity_id = case.expected_primary.first().cloned();
            let kinds: Vec<String> = span
                .disagreements
                .iter()
                .map(|d| format!("{} {}", d.kind.as_str(), d.entity_id))
                .collect();
            if !kinds.is_empty() {
                p.variant = Some(format!(
                    "trace {} span {}: {}",
                    span.trace_id,
                    span.span_id,
                    kinds.join(", ")
                ));
            }
        }
        drafts.push(Draft {
            case,
            status: DraftStatus::Pending,
            finding: None,
            reviewed_by: None,
            reviewed_at: None,
            note: None,
            accepted_into: None,
        });
    }
    if drafts.is_empty() {
        return Ok(out);
    }
    out.written = drafts.len();
    let file = DraftBank {
        schema: None,
        bank_type: BankType::Semantic,
        generation: generation.clone(),
        created: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        request: std::collections::BTreeMap::from([(
            "source".to_owned(),
            "assay traces check --to-review".to_owned(),
        )]),
        drafts,
    };
    let dir = assay_project::drafts::drafts_dir(banks_dir, BankType::Semantic);
    let mut path = dir.join(format!("{generation}.json"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{generation}-{n}.json"));
        n += 1;
    }
    assay_project::drafts::write_draft_bank(&path, &file)?;
    out.file = Some(path);
    Ok(out)
}
