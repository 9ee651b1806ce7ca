//! Where spans go, from the standard `OTEL_*` variables over the project's `[telemetry]` table.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::TelemetryError;

/// The OTLP encoding over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// `http/protobuf` (the default, as in the OpenTelemetry SDKs).
    #[default]
    HttpProtobuf,
    /// `http/json`.
    HttpJson,
}

impl Protocol {
    /// The name the `OTEL_EXPORTER_OTLP_PROTOCOL` variable uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::HttpJson => "http/json",
        }
    }

    fn parse(value: &str, source: &str) -> Result<Protocol, TelemetryError> {
        match value.trim() {
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Ok(Protocol::HttpJson),
            "grpc" => Err(TelemetryError::Config(format!(
                "{source}: `grpc` is not supported; assay exports OTLP over HTTP (http/protobuf or http/json; a collector's port 4318)"
            ))),
            other => Err(TelemetryError::Config(format!(
                "{source}: unknown protocol `{other}` (expected http/protobuf or http/json)"
            ))),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `[telemetry]`: OpenTelemetry export of a run's spans (off unless an endpoint is set here or
/// in `OTEL_EXPORTER_OTLP_ENDPOINT`; the standard `OTEL_*` variables win over this table).
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, default)]
#[schemars(rename = "TelemetryConfig")]
pub struct TableValues {
    /// `false` turns export off even where the variables set an endpoint; `true` with no
    /// endpoint exports to `http://localhost:4318`.
    pub enabled: Option<bool>,
    /// The collector's base URL (`/v1/traces` is appended), e.g. `http://localhost:4318`.
    pub endpoint: Option<String>,
    /// `http/protobuf` (default) or `http/json`.
    pub protocol: Option<String>,
    /// Headers sent with every export, e.g. `{ "x-mlflow-experiment-id" = "1" }`. Keep secrets
    /// in `OTEL_EXPORTER_OTLP_HEADERS` instead.
    pub headers: BTreeMap<String, String>,
    /// The `service.name` of assay's spans (default `assay`).
    pub service_name: Option<String>,
    /// Record message contents: prompts, replies, queries, user states, tool arguments and
    /// results (default false).
    pub capture_content: Option<bool>,
    /// Per export request, in seconds (default 10).
    pub timeout_seconds: Option<f64>,
    /// The share (0 to 1) of the cases that passed a deterministic check whose spans are
    /// exported (default 1: all). Failing cases, errors and model calls are always exported.
    /// `OTEL_TRACES_SAMPLER` (with `OTEL_TRACES_SAMPLER_ARG`) wins over it.
    pub sample_passing: Option<f64>,
}

/// Where and how spans are exported, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportConfig {
    /// The full URL spans are posted to (`…/v1/traces`).
    pub traces_url: String,
    /// What says where the URL came from (a variable or the table), for messages.
    pub source: String,
    /// The encoding.
    pub protocol: Protocol,
    /// Headers sent with every export, besides those `OTEL_EXPORTER_OTLP_HEADERS` names.
    pub headers: BTreeMap<String, String>,
    /// `service.name`.
    pub service_name: String,
    /// Whether message contents are recorded.
    pub capture_content: bool,
    /// Per export request.
    pub timeout: Duration,
    /// Spans the export queue holds (`OTEL_BSP_MAX_QUEUE_SIZE`).
    pub queue_size: usize,
    /// The share of the cases that passed a deterministic check whose spans are exported
    /// (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`, `telemetry.sample_passing`): see
    /// [`crate::CaseSpans`]. Everything else is always exported.
    pub sample_passing: f64,
}

/// The variable that names the collector's base URL.
pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// The variable that names the traces URL itself.
pub const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
const TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
const TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
const TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
const SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
const TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
const QUEUE_SIZE: &str = "OTEL_BSP_MAX_QUEUE_SIZE";
const SAMPLER: &str = "OTEL_TRACES_SAMPLER";
const SAMPLER_ARG: &str = "OTEL_TRACES_SAMPLER_ARG";
/// The variable GenAI instrumentations read to record message contents.
pub const CAPTURE_CONTENT: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

impl ExportConfig {
    /// Resolves export from the variables (`env`) over `table`. `None` when export is off: no
    /// endpoint anywhere, `OTEL_SDK_DISABLED=true`, `OTEL_TRACES_EXPORTER=none`, or `enabled =
    /// false` in the table. A wrong value is an error naming the variable or the field
    /// (`telemetry.<field>`).
    pub fn resolve(
        table: &TableValues,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<ExportConfig>, TelemetryError> {
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if var(SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
            || var(TRACES_EXPORTER).is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
            || table.enabled == Some(false)
        {
            return Ok(None);
        }
        if let Some(exporter) = var(TRACES_EXPORTER)
            && !exporter.trim().eq_ignore_ascii_case("otlp")
        {
            return Err(TelemetryError::Config(format!(
                "{TRACES_EXPORTER}: unknown exporter `{}` (assay exports `otlp`, or `none`)",
                exporter.trim()
            )));
        }
        let (traces_url, source) = if let Some(url) = var(TRACES_ENDPOINT) {
            (url.trim().to_owned(), TRACES_ENDPOINT.to_owned())
        } else if let Some(base) = var(ENDPOINT) {
            (join_traces(&base), ENDPOINT.to_owned())
        } else if let Some(base) = table.endpoint.as_deref().filter(|e| !e.trim().is_empty()) {
            (
                join_traces(base),
                "assay.toml: telemetry.endpoint".to_owned(),
            )
        } else if table.enabled == Some(true) {
            // On with no endpoint: the standard default, a collector on this machine.
            (
                join_traces("http://localhost:4318"),
                "assay.toml: telemetry.enabled (the default endpoint)".to_owned(),
            )
        } else {
            return Ok(None);
        };
        check_url(&traces_url, &source)?;

        let protocol = match (var(TRACES_PROTOCOL), var(PROTOCOL), &table.protocol) {
            (Some(p), _, _) => Protocol::parse(&p, TRACES_PROTOCOL)?,
            (None, Some(p), _) => Protocol::parse(&p, PROTOCOL)?,
            (None, None, Some(p)) => Protocol::parse(p, "assay.toml: telemetry.protocol")?,
            (None, None, None) => Protocol::default(),
        };

        let mut headers = table.headers.clone();
        for name in [HEADERS, TRACES_HEADERS] {
            if let Some(list) = var(name) {
                headers.extend(parse_headers(&list, name)?);
            }
        }

        let timeout = match (var(TRACES_TIMEOUT), var(TIMEOUT), table.timeout_seconds) {
            (Some(ms), _, _) => millis(&ms, TRACES_TIMEOUT)?,
            (None, Some(ms), _) => millis(&ms, TIMEOUT)?,
            (None, None, Some(s)) => Duration::try_from_secs_f64(s)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    TelemetryError::Config(format!(
                        "assay.toml: telemetry.timeout_seconds: {s} is not a positive number of seconds"
                    ))
                })?,
            (None, None, None) => Duration::from_secs(10),
        };

        let capture_content = match var(CAPTURE_CONTENT) {
            Some(v) => parse_bool(&v, CAPTURE_CONTENT)?,
            None => table.capture_content.unwrap_or(false),
        };
        let queue_size = match var(QUEUE_SIZE) {
            Some(n) => n
                .trim()
                .parse::<usize>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    TelemetryError::Config(format!(
                        "{QUEUE_SIZE}: `{}` is not a positive number of spans",
                        n.trim()
                    ))
                })?,
            None => crate::export::DEFAULT_QUEUE,
        };
        let sample_passing = match var(SAMPLER) {
            Some(name) => sampler_ratio(&name, var(SAMPLER_ARG).as_deref())?,
            None => match table.sample_passing {
                Some(r) if (0.0..=1.0).contains(&r) => r,
                Some(r) => {
                    return Err(TelemetryError::Config(format!(
                        "assay.toml: telemetry.sample_passing: {r} is not a share between 0 and 1"
                    )));
                }
                None => 1.0,
            },
        };
        let service_name = var(SERVICE_NAME)
            .or_else(|| table.service_name.clone())
            .unwrap_or_else(|| "assay".to_owned());

        Ok(Some(ExportConfig {
            traces_url,
            source,
            protocol,
            headers,
            service_name,
            capture_content,
            timeout,
            queue_size,
            sample_passing,
        }))
    }
}

/// The share of passing deterministic cases a standard sampler (`OTEL_TRACES_SAMPLER`) keeps.
/// The sampler decides those cases alone: the evidence a run must not lose (failing cases,
/// errors, model calls) is exported whatever it says, so `parentbased_*` and the plain samplers
/// mean the same here. `traceidratio` without an argument keeps all, as the specification says.
fn sampler_ratio(name: &str, arg: Option<&str>) -> Result<f64, TelemetryError> {
    match name.trim() {
        "always_on" | "parentbased_always_on" => Ok(1.0),
        "always_off" | "parentbased_always_off" => Ok(0.0),
        "traceidratio" | "parentbased_traceidratio" => match arg {
            None => Ok(1.0),
            Some(a) => a
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| {
                    TelemetryError::Config(format!(
                        "{SAMPLER_ARG}: `{}` is not a ratio between 0 and 1 (for {SAMPLER}={})",
                        a.trim(),
                        name.trim()
                    ))
                }),
        },
        other => Err(TelemetryError::Config(format!(
            "{SAMPLER}: `{other}` is not a sampler assay supports (always_on, always_off, traceidratio, or their parentbased_ forms)"
        ))),
    }
}

/// `base` + `/v1/traces`, as the OTLP specification builds a signal's URL from
/// `OTEL_EXPORTER_OTLP_ENDPOINT`.
fn join_traces(base: &str) -> String {
    format!("{}/v1/traces", base.trim().trim_end_matches('/'))
}

fn check_url(url: &str, source: &str) -> Result<(), TelemetryError> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    match rest {
        Some(rest)
            if !rest.is_empty() && !rest.starts_with('/') && !url.contains(char::is_whitespace) =>
        {
            Ok(())
        }
        _ => Err(TelemetryError::Config(format!(
            "{source}: `{url}` is not an http:// or https:// URL with a host"
        ))),
    }
}

/// `key1=value1,key2=value2`, values percent-decoded (the OTLP exporter variables' form).
fn parse_headers(list: &str, source: &str) -> Result<BTreeMap<String, String>, TelemetryError> {
    let mut out = BTreeMap::new();
    for (i, pair) in list.split(',').enumerate() {
        if pair.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = pair.split_once('=') else {
            return Err(TelemetryError::Config(format!(
                "{source}: entry {} `{}` is not key=value",
                i + 1,
                pair.trim()
            )));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(TelemetryError::Config(format!(
                "{source}: entry {} has an empty header name",
                i + 1
            )));
        }
        out.insert(key.to_owned(), percent_decode(value.trim()));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn millis(value: &str, source: &str) -> Result<Duration, TelemetryError> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| {
            TelemetryError::Config(format!(
                "{source}: `{}` is not a positive number of milliseconds",
                value.trim()
            ))
        })
}

fn parse_bool(value: &str, source: &str) -> Result<bool, TelemetryError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        other => Err(TelemetryError::Config(format!(
            "{source}: `{other}` is not true or false"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_standard_sampler_variables_set_the_share_of_passing_cases() {
        let on = [(ENDPOINT, "http://collector:4318")];
        let ratio = |vars: &[(&str, &str)], table: &TableValues| {
            let mut all = on.to_vec();
            all.extend_from_slice(vars);
            ExportConfig::resolve(table, &env(&all)).map(|c| c.unwrap().sample_passing)
        };
        let plain = TableValues::default();
        assert_eq!(ratio(&[], &plain).unwrap(), 1.0);
        assert_eq!(ratio(&[(SAMPLER, "always_off")], &plain).unwrap(), 0.0);
        assert_eq!(
            ratio(&[(SAMPLER, "parentbased_always_on")], &plain).unwrap(),
            1.0
        );
        assert_eq!(ratio(&[(SAMPLER, "traceidratio")], &plain).unwrap(), 1.0);
        assert_eq!(
            ratio(
                &[(SAMPLER, "parentbased_traceidratio"), (SAMPLER_ARG, "0.01")],
                &plain
            )
            .unwrap(),
            0.01
        );
        let table = TableValues {
            sample_passing: Some(0.25),
            ..TableValues::default()
        };
        assert_eq!(ratio(&[], &table).unwrap(), 0.25);
        assert_eq!(ratio(&[(SAMPLER, "always_on")], &table).unwrap(), 1.0);

        let err = ratio(&[(SAMPLER, "traceidratio"), (SAMPLER_ARG, "1.5")], &plain)
            .unwrap_err()
            .to_string();
        assert!(err.contains(SAMPLER_ARG) && err.contains("1.5"), "{err}");
        let err = ratio(&[(SAMPLER, "xray")], &plain).unwrap_err().to_string();
        assert!(err.contains(SAMPLER) && err.contains("xray"), "{err}");
        let bad = TableValues {
            sample_passing: Some(-0.1),
            ..TableValues::default()
        };
        let err = ratio(&[], &bad).unwrap_err().to_string();
        assert!(err.contains("telemetry.sample_passing"), "{err}");
    }

    #[test]
    fn off_without_an_endpoint() {
        let none = ExportConfig::resolve(&TableValues::default(), &env(&[])).unwrap();
        assert_eq!(none, None);
    }

    #[test]
    fn the_base_endpoint_gets_the_traces_path_and_the_signal_one_does_not() {
        let c = ExportConfig::resolve(
            &TableValues::default(),
            &env(&[(ENDPOINT, "http://collector:4318/")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.traces_url, "http://collector:4318/v1/traces");
        assert_eq!(c.protocol, Protocol::HttpProtobuf);
        assert_eq!(c.service_name, "assay");
        assert!(!c.capture_content);
        assert_eq!(c.timeout, Duration::from_secs(10));

        let c = ExportConfig::resolve(
            &TableValues::default(),
            &env(&[
                (ENDPOINT, "http://collector:4318"),
                (TRACES_ENDPOINT, "http://other:9/custom"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.traces_url, "http://other:9/custom");
        assert_eq!(c.source, TRACES_ENDPOINT);
    }

    #[test]
    fn variables_win_over_the_table() {
        let table = TableValues {
            endpoint: Some("http://table:4318".into()),
            protocol: Some("http/protobuf".into()),
            headers: [("x-a".to_owned(), "1".to_owned())].into(),
            service_name: Some("from-table".into()),
            capture_content: Some(true),
            timeout_seconds: Some(2.5),
            ..TableValues::default()
        };
        let c = ExportConfig::resolve(&table, &env(&[])).unwrap().unwrap();
        assert_eq!(c.traces_url, "http://table:4318/v1/traces");
        assert_eq!(c.source, "assay.toml: telemetry.endpoint");
        assert_eq!(c.timeout, Duration::from_millis(2500));
        assert!(c.capture_content);
        let c = ExportConfig::resolve(
            &table,
            &env(&[
                (ENDPOINT, "http://env:4318"),
                (PROTOCOL, "http/json"),
                (HEADERS, "x-a=2,x-b=a%20b"),
                (SERVICE_NAME, "svc"),
                (CAPTURE_CONTENT, "false"),
                (TIMEOUT, "1500"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.traces_url, "http://env:4318/v1/traces");
        assert_eq!(c.protocol, Protocol::HttpJson);
        assert_eq!(c.headers["x-a"], "2");
        assert_eq!(c.headers["x-b"], "a b");
        assert_eq!(c.service_name, "svc");
        assert!(!c.capture_content);
        assert_eq!(c.timeout, Duration::from_millis(1500));
    }

    #[test]
    fn disabled_by_variable_or_table() {
        let on = [(ENDPOINT, "http://x:4318")];
        for extra in [(SDK_DISABLED, "true"), (TRACES_EXPORTER, "none")] {
            let vars = [on[0], extra];
            assert_eq!(
                ExportConfig::resolve(&TableValues::default(), &env(&vars)).unwrap(),
                None
            );
        }
        let table = TableValues {
            enabled: Some(false),
            ..TableValues::default()
        };
        assert_eq!(ExportConfig::resolve(&table, &env(&on)).unwrap(), None);
        let table = TableValues {
            enabled: Some(true),
            ..TableValues::default()
        };
        let c = ExportConfig::resolve(&table, &env(&[])).unwrap().unwrap();
        assert_eq!(c.traces_url, "http://localhost:4318/v1/traces");
    }

    #[test]
    fn bad_values_name_their_source() {
        let err = |vars: &[(&str, &str)], table: &TableValues| {
            ExportConfig::resolve(table, &env(vars))
                .unwrap_err()
                .to_string()
        };
        let t = TableValues::default();
        let e = err(&[(ENDPOINT, "collector:4318")], &t);
        assert!(e.starts_with(ENDPOINT) && e.contains("not an http"), "{e}");
        let e = err(&[(ENDPOINT, "http://x"), (PROTOCOL, "grpc")], &t);
        assert!(
            e.starts_with(PROTOCOL) && e.contains("not supported"),
            "{e}"
        );
        let e = err(&[(ENDPOINT, "http://x"), (HEADERS, "novalue")], &t);
        assert!(e.contains(HEADERS) && e.contains("key=value"), "{e}");
        let e = err(&[(ENDPOINT, "http://x"), (TIMEOUT, "soon")], &t);
        assert!(e.contains(TIMEOUT), "{e}");
        let e = err(&[(ENDPOINT, "http://x"), (QUEUE_SIZE, "0")], &t);
        assert!(e.contains(QUEUE_SIZE), "{e}");
        let e = err(&[(ENDPOINT, "http://x"), (TRACES_EXPORTER, "zipkin")], &t);
        assert!(e.contains("zipkin"), "{e}");
        let table = TableValues {
            endpoint: Some("http://x".into()),
            protocol: Some("http/xml".into()),
            ..TableValues::default()
        };
        let e = err(&[], &table);
        assert!(
            e.starts_with("assay.toml: telemetry.protocol") && e.contains("http/xml"),
            "{e}"
        );
        let table = TableValues {
            endpoint: Some("http://x".into()),
            timeout_seconds: Some(-1.0),
            ..TableValues::default()
        };
        assert!(err(&[], &table).contains("telemetry.timeout_seconds"));
    }
}
