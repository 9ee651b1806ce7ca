//! `assay run`

use std::io::IsTerminal;

use anyhow::Context;
use assay_core::bank::BankType;
use assay_harness::HarnessError;
use assay_harness::project::Project;
use assay_harness::results;
use assay_harness::run::{RunRequest, gate_passed, run as run_banks};

use super::{log_warnings, out};
use crate::args::RunArgs;
use crate::exit::Exit;
use crate::progress::Bar;

fn parse_banks(spec: &str) -> Result<Vec<BankType>, HarnessError> {
    let spec = spec.trim();
    if spec.is_empty() || spec.eq_ignore_ascii_case("all") {
        return Ok(Vec::new());
    }
    spec.split(',')
        .map(|b| {
            let b = b.trim().to_ascii_lowercase();
            BankType::from_key(&b).ok_or_else(|| {
                HarnessError::Usage(format!(
                    "--banks: unknown bank `{b}` (expected all, or a list of semantic, state, pattern, always)"
                ))
            })
        })
        .collect()
}

pub fn run(args: &RunArgs) -> anyhow::Result<Exit> {
    let request = RunRequest {
        banks: parse_banks(&args.banks)?,
        test: args.test.clone(),
        topic: args.topic.clone(),
    };
    let project = Project::load(&args.dir)?;
    log_warnings(&project.warnings);

    let show_progress =
        !args.json && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
    let mut bar = Bar::new(show_progress);
    let log = run_banks(&project, &request, None, &mut bar)?;
    for w in log.warnings.iter().skip(project.warnings.len()) {
        tracing::warn!("{w}");
    }

    let json = assay_report::json(&log);
    let saved = if args.no_save {
        None
    } else {
        let markdown = assay_report::markdown::render(&log);
        let dir = &project.settings.results_dir;
        let saved = results::save(dir, &results::stamp(&log.timestamp), &json, &markdown)
            .with_context(|| format!("cannot save results in {}", dir.display()))
            .map_err(|e| HarnessError::Infrastructure(format!("{e:#}")))?;
        Some(saved)
    };
    if let Some(path) = &args.junit {
        let xml = assay_report::junit::render(&log, project.settings.report.junit_pass_score);
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| HarnessError::io(parent, &e))?;
        }
        results::write_replace(path, xml.as_bytes()).map_err(|e| HarnessError::io(path, &e))?;
    }

    if args.json {
        out(&json);
    } else {
        let mut text = assay_report::console::render(&log, args.failures_only);
        if let Some(s) = &saved {
            text.push_str(&format!(
                "\nsaved {} and {}\n",
                s.json.display(),
                s.markdown.display()
            ));
        }
        out(&text);
    }

    Ok(if log.summary.error_count > 0 {
        Exit::Infrastructure
    } else if gate_passed(&log, &project.settings) {
        Exit::Success
    } else {
        Exit::GateFailed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banks_parse() {
        assert_eq!(parse_banks("all").unwrap(), vec![]);
        assert_eq!(
            parse_banks("state, Pattern").unwrap(),
            vec![BankType::State, BankType::Pattern]
        );
        assert!(
            parse_banks("state,stats")
                .unwrap_err()
                .to_string()
                .contains("unknown bank `stats`")
        );
    }
}
