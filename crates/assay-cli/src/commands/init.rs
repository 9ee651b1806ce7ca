//! `assay init`

use std::path::{Path, PathBuf};

use assay_project::init::init_project;
use clap::Args;

use super::out;
use crate::exit::Exit;

/// `assay init`
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to create the project (created if missing; existing files are never overwritten).
    pub dir: PathBuf,
}

pub fn run(dir: &Path) -> anyhow::Result<Exit> {
    let written = init_project(dir)?;
    let mut text = format!("created a project in {}:\n", dir.display());
    for path in &written {
        text.push_str(&format!("  {}\n", path.display()));
    }
    text.push_str(&format!("\nnext: assay run {}\n", dir.display()));
    out(&text);
    Ok(Exit::Success)
}
