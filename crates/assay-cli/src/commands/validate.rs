//! `assay validate`

use std::path::Path;

use assay_core::bank::BankType;
use assay_harness::project::Project;

use super::{log_warnings, out};
use crate::exit::Exit;

pub fn run(dir: &Path) -> anyhow::Result<Exit> {
    let project = Project::load(dir)?;
    log_warnings(&project.warnings);
    let mut text = format!("{}: valid\n", dir.display());
    text.push_str(&format!(
        "  knowledge base  {} entities in {} files\n",
        project.kb.kb.entities().len(),
        project.kb.files.len()
    ));
    for bank in BankType::ALL {
        text.push_str(&format!(
            "  {:<15} {} cases\n",
            bank.key(),
            project.banks.count(bank)
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
    text.push_str(&format!("  warnings        {}\n", project.warnings.len()));
    out(&text);
    Ok(Exit::Success)
}
