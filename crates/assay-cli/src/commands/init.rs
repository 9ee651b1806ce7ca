//! `assay init`

use std::path::Path;

use assay_project::init::init_project;

use super::out;
use crate::exit::Exit;

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
