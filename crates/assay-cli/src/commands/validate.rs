//! `assay validate`

use std::path::Path;

use assay_core::bank::BankType;
use assay_project::engine;
use assay_project::project::Project;

use super::{log_warnings, out};
use crate::exit::Exit;

pub fn run(dir: &Path) -> anyhow::Result<Exit> {
    let project = Project::load(dir)?;
    // Draft files (`assay generate`) are read strictly here, though a run reads them only
    // with --include-drafts.
    let (drafts, pending) = assay_run::freshness::check_drafts(&project)?;
    log_warnings(&project.warnings);
    let mut warnings = project.warnings.len();
    // With a database store, the entities the banks and rules name are checked against what
    // the database holds, not the kb/ files.
    let store_check = if project.refs_checked_against_files {
        let refs = project.ref_warnings()?;
        log_warnings(&refs);
        warnings += refs.len();
        None
    } else {
        let store = engine::open_store(&project.settings)?;
        let kb = engine::snapshot(&*store)?;
        let unknown = project.check_entity_refs(&kb, &*store)?;
        log_warnings(&unknown);
        warnings += unknown.len();
        Some((store.location.to_string(), kb.entities().len()))
    };
    let mut text = format!("{}: valid\n", dir.display());
    text.push_str(&format!(
        "  knowledge base  {} entities in {} files\n",
        project.kb.kb.entities().len(),
        project.kb.files.len()
    ));
    if let Some((location, entities)) = &store_check {
        text.push_str(&format!(
            "  store           {entities} entities in {location} (the source of truth)\n"
        ));
    }
    for bank in BankType::ALL {
        text.push_str(&format!(
            "  {:<15} {} cases\n",
            bank.key(),
            project.banks.count(bank)
        ));
    }
    if drafts > 0 {
        text.push_str(&format!(
            "  drafts          {drafts} in test_banks/drafts/ ({pending} pending; `assay run --include-drafts` runs those)\n"
        ));
    }
    if let Some((crisis, keywords)) = project
        .patterns
        .as_deref()
        .map(assay_retrieval::patterns::PatternMatcher::rule_counts)
    {
        text.push_str(&format!(
            "  pattern rules   {crisis} crisis patterns, {keywords} keyword groups\n"
        ));
    }
    text.push_str(&format!(
        "  history files   {}\n",
        project.expectations.files().len()
    ));
    text.push_str(&format!("  warnings        {warnings}\n"));
    out(&text);
    Ok(Exit::Success)
}
