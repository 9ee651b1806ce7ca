//! OpenTelemetry export for the commands that call models or run cases: on when the `OTEL_*`
//! variables or the project's `[telemetry]` table name an endpoint (see docs/telemetry.md).

use std::path::Path;

use anyhow::Context as _;
use assay_project::HarnessError;
use assay_project::settings::ProjectSettings;
use opentelemetry::KeyValue;

/// Where spans go for the project in `dir`: its `[telemetry]` table under the variables. A
/// project whose settings cannot be read counts as having no table: the command itself
/// reports that error. A wrong telemetry setting is a usage error (exit 2).
fn config(dir: &Path) -> anyhow::Result<Option<assay_telemetry::ExportConfig>> {
    let table = ProjectSettings::load(dir)
        .map(|settings| settings.telemetry)
        .unwrap_or_default();
    Ok(assay_telemetry::ExportConfig::resolve(&table, &super::env)
        .map_err(|e| HarnessError::Usage(e.to_string()))?)
}

/// Turns export on for a server (no command span: one per run it makes); whether it is on.
pub fn install(dir: &Path) -> anyhow::Result<bool> {
    let Some(config) = config(dir)? else {
        return Ok(false);
    };
    assay_telemetry::install(config).map_err(|e| HarnessError::Usage(e.to_string()))?;
    Ok(true)
}

/// Starts export for `command` on the project in `dir`, with the command's span as the root of
/// its trace; `None` when export is off.
pub fn start(dir: &Path, command: &str) -> anyhow::Result<Option<assay_telemetry::Command>> {
    let Some(config) = config(dir)? else {
        return Ok(None);
    };
    let project = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_owned());
    let command_span = assay_telemetry::start(
        config,
        command,
        vec![
            KeyValue::new("assay.command", command.to_owned()),
            KeyValue::new("assay.project", project.display().to_string()),
        ],
    )
    .map_err(|e| HarnessError::Usage(e.to_string()))
    .context("telemetry")?;
    Ok(Some(command_span))
}
