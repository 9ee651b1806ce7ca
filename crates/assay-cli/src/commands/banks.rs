//! `assay banks migrate`

use std::path::Path;

use assay_project::migrate::{Migration, migrate_banks};
use assay_project::settings::ProjectSettings;
use clap::Subcommand;

use super::out;
use crate::args::ProjectArg;
use crate::exit::Exit;

/// `assay banks …`
#[derive(Debug, Subcommand)]
pub enum BanksCommand {
    /// Add `bank_type` and `version` to pre-V2 bank files in place (originals kept as .bak).
    Migrate(ProjectArg),
}

pub fn migrate(dir: &Path) -> anyhow::Result<Exit> {
    let settings = ProjectSettings::load(dir)?;
    let outcomes = migrate_banks(&settings.banks_dir)?;
    let mut text = String::new();
    for o in &outcomes {
        match o {
            Migration::Current(path) => text.push_str(&format!("current   {}\n", path.display())),
            Migration::Migrated {
                path,
                backup,
                added,
            } => text.push_str(&format!(
                "migrated  {} (added {}; original kept as {})\n",
                path.display(),
                added.join(", "),
                backup.display()
            )),
        }
    }
    if outcomes.is_empty() {
        text.push_str("no bank files found\n");
    }
    out(&text);
    Ok(Exit::Success)
}
