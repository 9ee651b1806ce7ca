//! `assay init`

use std::path::PathBuf;

use assay_project::init::{Template, init_project};
use clap::Args;

use super::out;
use crate::exit::Exit;

/// `assay init`
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Where to create the project (created if missing; existing files are never overwritten).
    pub dir: PathBuf,

    /// What to start from: `retrieval` (the default: a knowledge base and the four retrieval
    /// banks) or `rag` (an answer bank of assertions and trajectory checks, asked of a Python
    /// function; runs with no key and no model).
    #[arg(long, value_name = "NAME", default_value = "retrieval")]
    pub template: String,
}

pub fn run(args: &InitArgs) -> anyhow::Result<Exit> {
    let dir = &args.dir;
    let template = Template::parse(&args.template)?;
    let written = init_project(dir, template)?;
    let mut text = format!("created a project in {}:\n", dir.display());
    for path in &written {
        text.push_str(&format!("  {}\n", path.display()));
    }
    text.push_str(&format!("\nnext: assay run {}\n", dir.display()));
    if template == Template::Rag {
        text.push_str(&format!(
            "      pytest --assay {}   (with assay-eval installed: one pytest item per case)\n",
            dir.display()
        ));
    }
    out(&text);
    Ok(Exit::Success)
}
