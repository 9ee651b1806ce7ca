//! `assay check`: the assertions of docs/assertions.md on one reply, outside a run (what
//! `assay_eval.check` in Python calls, so there is one implementation).

use std::io::Read as _;
use std::path::PathBuf;

use assay_core::assertion::{AssertionSet, Output, Status};
use assay_project::HarnessError;
use clap::Args;
use serde_json::Value;

use super::out;
use crate::exit::Exit;

/// `assay check`
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The JSON to check (default: stdin): `{"reply": "…", "assert": [assertion, …]}`, with
    /// optional `"threshold"` (the share of weight that must pass), `"latency_ms"` and
    /// `"cost_usd"` (for the latency and cost assertions).
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,

    /// Print the outcome as JSON (every assertion with its status and reason).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CheckArgs) -> anyhow::Result<Exit> {
    let (name, text) = if let Some(path) = &args.input {
        (
            path.display().to_string(),
            std::fs::read_to_string(path).map_err(|e| HarnessError::io(path, &e))?,
        )
    } else {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| HarnessError::Usage(format!("stdin: cannot read it: {e}")))?;
        ("stdin".to_owned(), text)
    };
    let bad = |field: &str, what: String| HarnessError::Usage(format!("{name}: {field}: {what}"));
    let input: Value = serde_json::from_str(&text).map_err(|e| {
        HarnessError::Usage(format!(
            "{name}: line {}, column {}: not JSON: {e}",
            e.line(),
            e.column()
        ))
    })?;
    let Value::Object(map) = &input else {
        return Err(bad("(top)", "expected an object {\"reply\", \"assert\"}".into()).into());
    };
    for key in map.keys() {
        if !["reply", "assert", "threshold", "latency_ms", "cost_usd"].contains(&key.as_str()) {
            return Err(bad(
                key,
                "unknown key (expected reply, assert, threshold, latency_ms, cost_usd)".into(),
            )
            .into());
        }
    }
    let reply = match map.get("reply") {
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(bad("reply", format!("expected a string, found {other}")).into());
        }
        None => return Err(bad("reply", "missing (the reply to check)".into()).into()),
    };
    let number = |key: &str| -> Result<Option<f64>, HarnessError> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .map(Some)
                .ok_or_else(|| bad(key, format!("expected a number of 0 or more, found {v}"))),
        }
    };
    let threshold = number("threshold")?;
    let list = map
        .get("assert")
        .ok_or_else(|| bad("assert", "missing (a list of assertions)".into()))?;
    let set = AssertionSet::parse(list, threshold, "assert")
        .map_err(|e| HarnessError::Usage(format!("{name}: {e}")))?;
    let report = set.evaluate(&Output {
        text: reply,
        latency_ms: number("latency_ms")?,
        cost_usd: number("cost_usd")?,
    });
    if args.json {
        out(&format!("{:#}\n", serde_json::to_value(&report)?));
    } else {
        let mut text = String::new();
        for r in &report.results {
            let mark = match r.status {
                Status::Passed => "ok  ",
                Status::Failed => "FAIL",
                Status::Error => "ERR ",
            };
            text.push_str(&format!("{mark} {}: {}\n", r.name(), r.reason));
        }
        text.push_str(&format!(
            "{}: {} of {} assertions passed{}\n",
            if report.passed { "passed" } else { "failed" },
            report.results.iter().filter(|r| r.passed).count(),
            report.results.len(),
            if report.critical_failed {
                " (a critical assertion failed)"
            } else {
                ""
            }
        ));
        out(&text);
    }
    Ok(if report.passed {
        Exit::Success
    } else {
        Exit::GateFailed
    })
}
