//! `assay traces check`: production retrieval spans checked against a copy of the example, and
//! the receiver of `assay serve` (`POST /v1/traces`) feeding it.

use std::io::{Read, Write};

use serde_json::{Value, json};

use crate::data::redact;
use crate::support::{Run, Scratch, assay, serve};

fn docs(ids: &[&str]) -> String {
    serde_json::to_string(&ids.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()).unwrap()
}

const ALWAYS: [&str; 3] = [
    "core_behavioral_guardrails",
    "frank_parent_persona",
    "user_context",
];

fn flat(span: &str, query: &str, ids: &[&str]) -> String {
    let mut all: Vec<&str> = ALWAYS.to_vec();
    all.extend_from_slice(ids);
    json!({
        "trace_id": format!("aa{span}"),
        "span_id": span,
        "name": "retrieve",
        "attributes": {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.query.text": query,
            "gen_ai.retrieval.documents": docs(&all),
        }
    })
    .to_string()
}

/// The trace file of the test: one span that matches, one missing an entity, one serving an
/// inactive entity, one (an OTLP export line, documents as an array of key-value lists)
/// serving an unknown id, a crisis query with no handler, then a line that is not JSON, a span
/// whose documents cannot be read, and a chat span.
fn trace_file() -> String {
    let kv = |id: &str| json!({"kvlistValue": {"values": [{"key": "id", "value": {"stringValue": id}}, {"key": "score", "value": {"doubleValue": 0.5}}]}});
    let mut unknown_docs: Vec<Value> = ALWAYS.iter().map(|id| kv(id)).collect();
    unknown_docs.extend(
        [
            "gray_rock",
            "parental_alienation",
            "cooperative_coparenting",
            "retired_entity_v1",
        ]
        .map(kv),
    );
    let export = json!({"resourceSpans": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "coach"}}]},
    "scopeSpans": [{"spans": [{"traceId": "AA04", "spanId": "04", "name": "retrieve", "attributes": [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "retrieval"}},
        {"key": "gen_ai.retrieval.query.text", "value": {"stringValue": "he keeps baiting me trying to get a reaction"}},
        {"key": "gen_ai.retrieval.documents", "value": {"arrayValue": {"values": unknown_docs}}}
    ]}]}]}]});
    let bad_docs = json!({"trace_id": "aa07", "span_id": "07", "attributes": {
        "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "hello",
        "gen_ai.retrieval.documents": "[{\"score\": 0.4}]"}});
    let chat = json!({"trace_id": "aa08", "span_id": "08", "name": "chat", "attributes": {"gen_ai.operation.name": "chat"}});
    [
        flat(
            "01",
            "he keeps baiting me trying to get a reaction",
            &[
                "gray_rock",
                "parental_alienation",
                "cooperative_coparenting",
            ],
        ),
        flat(
            "02",
            "she sent me another nasty email what do i say",
            &["biff_response", "badmouthing_response"],
        ),
        flat(
            "03",
            "my ex badmouths me to the kids",
            &[
                "badmouthing_response",
                "new_partner_introduction",
                "stepparent_role",
                "parallel_parenting",
            ],
        ),
        export.to_string(),
        flat("05", "i want to end it", &["documentation_practices"]),
        "{not json".to_owned(),
        bad_docs.to_string(),
        chat.to_string(),
    ]
    .join("\n")
        + "\n"
}

/// `assay traces check ARGS --project <the scratch project>`.
fn check(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["traces", "check"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--project", p.root.to_str().unwrap()]);
    assay(&full)
}

fn project() -> Scratch {
    let p = Scratch::example();
    let off = assay(&[
        "kb",
        "deactivate",
        "parallel_parenting",
        "--project",
        p.root.to_str().unwrap(),
    ]);
    assert_eq!(off.code, 0, "{off:?}");
    p.write("traces/prod.jsonl", &trace_file());
    p
}

fn disagreements(report: &Value) -> Vec<(String, String, String)> {
    report["spans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["disagreements"].as_array().unwrap().iter().map(move |d| {
                (
                    s["span_id"].as_str().unwrap().to_owned(),
                    d["kind"].as_str().unwrap().to_owned(),
                    d["entity_id"].as_str().unwrap().to_owned(),
                )
            })
        })
        .collect()
}

fn triple(span: &str, kind: &str, id: &str) -> (String, String, String) {
    (span.to_owned(), kind.to_owned(), id.to_owned())
}

#[test]
fn traces_check_finds_each_disagreement_exactly() {
    let p = project();
    let file = p.path("traces/prod.jsonl");
    let run = check(&p, &[file.to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert_eq!(report["checked"], 5, "{report:#}");
    assert_eq!(report["agreeing"], 1);
    assert_eq!(report["disagreeing"], 4);
    assert_eq!(report["other_spans"], 1);
    assert_eq!(
        disagreements(&report),
        [
            triple("02", "missing", "medium_response_time"),
            triple("03", "inactive", "parallel_parenting"),
            triple("04", "unknown", "retired_entity_v1"),
            triple("05", "crisis_unhandled", "handler_crisis"),
            triple("05", "missing", "handler_crisis"),
            triple("05", "missing", "rule_crisis_detection"),
        ]
    );
    let crisis = &report["spans"][4]["disagreements"][0];
    assert_eq!(
        crisis["entities"],
        json!(["handler_crisis", "rule_crisis_detection"])
    );
    assert!(crisis["pattern"].as_str().unwrap().contains("end it"));
    assert_eq!(
        report["spans"][3]["position"]["path"],
        "resourceSpans[0].scopeSpans[0].spans[0]"
    );
    assert_eq!(report["spans"][3]["position"]["line"], 4);
    assert_eq!(
        report["by_kind"],
        json!({"missing": 3, "unknown": 1, "inactive": 1, "crisis_unhandled": 1})
    );
    assert_eq!(report["by_entity"][0]["entity_id"], "handler_crisis");
    assert_eq!(report["by_entity"][0]["total"], 2);
    // The malformed ones: reported with their position, the rest still checked.
    let problems: Vec<String> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}|{}|{}",
                p["position"]["line"],
                p["attribute"].as_str().unwrap_or("-"),
                p["message"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        problems,
        [
            "6|-|not valid JSON at column 2: key must be a string",
            "7|gen_ai.retrieval.documents|[0]: `id`: missing",
        ]
    );

    let console = check(&p, &[file.to_str().unwrap()]);
    assert_eq!(console.code, 1, "{console:?}");
    insta::assert_snapshot!("traces_check_console", redact(&console.stdout, &p.root));
}

#[test]
fn traces_check_exit_codes() {
    let p = project();
    let text = trace_file();
    let lines: Vec<&str> = text.lines().collect();
    p.write("agree.jsonl", &format!("{}\n", lines[0]));
    let ok = check(&p, &[p.path("agree.jsonl").to_str().unwrap()]);
    assert_eq!(ok.code, 0, "{ok:?}");
    assert!(ok.stdout.contains("1 agree, 0 disagree"), "{}", ok.stdout);

    // Bad input: a path that is not there, a file with no span in it, no retrieval span.
    let missing = check(&p, &[p.path("nope.jsonl").to_str().unwrap()]);
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("nope.jsonl"), "{}", missing.stderr);
    p.write("garbage.jsonl", "{not json\n[1, 2]\n");
    let garbage = check(&p, &[p.path("garbage.jsonl").to_str().unwrap()]);
    assert_eq!(garbage.code, 2, "{garbage:?}");
    assert!(
        garbage
            .stderr
            .contains("garbage.jsonl: no span could be read from it"),
        "{}",
        garbage.stderr
    );
    assert!(
        garbage.stderr.contains("garbage.jsonl:1: not valid JSON"),
        "{}",
        garbage.stderr
    );
    p.write("chat.jsonl", &format!("{}\n", lines[7]));
    let chat = check(&p, &[p.path("chat.jsonl").to_str().unwrap()]);
    assert_eq!(chat.code, 2, "{chat:?}");
    assert!(
        chat.stderr.contains("none a retrieval span"),
        "{}",
        chat.stderr
    );
    // A flat line with a misspelt field names it.
    p.write(
        "typo.jsonl",
        "{\"trace_id\": \"a\", \"span_id\": \"b\", \"atributes\": {}}\n",
    );
    let typo = check(&p, &[p.path("typo.jsonl").to_str().unwrap()]);
    assert_eq!(typo.code, 2, "{typo:?}");
    assert!(
        typo.stderr.contains("typo.jsonl:1") && typo.stderr.contains("atributes"),
        "{}",
        typo.stderr
    );
    let stages = check(
        &p,
        &[
            p.path("agree.jsonl").to_str().unwrap(),
            "--stages",
            "semantc",
        ],
    );
    assert_eq!(stages.code, 2, "{stages:?}");
    assert!(
        stages.stderr.contains("did you mean `semantic`?"),
        "{}",
        stages.stderr
    );

    // Only the search's stages: the ALWAYS entities production lacks are not missing.
    p.write("search.jsonl", &format!("{}\n", json!({"trace_id": "ab", "span_id": "cd", "attributes": {
        "gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "he keeps baiting me trying to get a reaction",
        "gen_ai.retrieval.documents": docs(&["gray_rock", "parental_alienation", "cooperative_coparenting"])}})));
    let search = check(
        &p,
        &[
            p.path("search.jsonl").to_str().unwrap(),
            "--stages",
            "semantic,crisis,keyword",
        ],
    );
    assert_eq!(search.code, 0, "{search:?}");
    let all = check(&p, &[p.path("search.jsonl").to_str().unwrap()]);
    assert_eq!(all.code, 1, "{all:?}");
}

#[test]
fn traces_check_writes_drafts_once_and_never_into_the_banks() {
    let p = project();
    let file = p.path("traces/prod.jsonl");
    let drafts = p.path("drafts/from-prod.json");
    let run = check(
        &p,
        &[file.to_str().unwrap(), "--drafts", drafts.to_str().unwrap()],
    );
    assert_eq!(run.code, 1, "{run:?}");
    let text = std::fs::read_to_string(&drafts).unwrap();
    let parsed: assay_core::tracecheck::DraftFile = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed.draft_type, "semantic");
    let ids: Vec<&str> = parsed
        .drafts
        .iter()
        .map(|d| d.provenance.span_id.as_str())
        .collect();
    assert_eq!(ids, ["02", "03", "04", "05"]);
    let unknown = &parsed.drafts[2].case;
    assert_eq!(unknown.test_id, "TRACE-04");
    assert_eq!(unknown.not_expected, ["retired_entity_v1"]);
    assert_eq!(unknown.known_missing, ["retired_entity_v1"]);
    assert_eq!(
        unknown.expected_primary,
        [
            "gray_rock",
            "parental_alienation",
            "cooperative_coparenting"
        ]
    );
    let crisis = &parsed.drafts[3];
    assert_eq!(
        crisis.case.expected_primary[..2],
        ["handler_crisis", "rule_crisis_detection"]
    );
    assert_eq!(crisis.provenance.file, file.to_str().unwrap());
    assert_eq!(crisis.provenance.line, Some(5));

    // Never overwritten, never inside the banks.
    let again = check(
        &p,
        &[file.to_str().unwrap(), "--drafts", drafts.to_str().unwrap()],
    );
    assert_eq!(again.code, 2, "{again:?}");
    assert!(
        again.stderr.contains("drafts never overwrite a file"),
        "{}",
        again.stderr
    );
    assert_eq!(std::fs::read_to_string(&drafts).unwrap(), text);
    let bank = p.path("test_banks/semantic/drafts.json");
    let banks = check(
        &p,
        &[file.to_str().unwrap(), "--drafts", bank.to_str().unwrap()],
    );
    assert_eq!(banks.code, 2, "{banks:?}");
    assert!(!bank.exists());

    // Any span, agreeing or not, by id.
    let one = p.path("one.json");
    let chosen = check(
        &p,
        &[
            file.to_str().unwrap(),
            "--drafts",
            one.to_str().unwrap(),
            "--span",
            "01",
        ],
    );
    assert_eq!(chosen.code, 1, "{chosen:?}");
    let parsed: assay_core::tracecheck::DraftFile =
        serde_json::from_str(&std::fs::read_to_string(&one).unwrap()).unwrap();
    assert_eq!(parsed.drafts.len(), 1);
    assert!(parsed.drafts[0].provenance.disagreements.is_empty());
}

/// Sends one HTTP/1.1 request and returns the status and body.
fn http(
    base: &str,
    path: &str,
    content_type: &str,
    token: Option<&str>,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {content_type}\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let status_line = String::from_utf8_lossy(&answer[..split]).into_owned();
    let status = status_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    (status, answer[split + 4..].to_vec())
}

#[test]
fn traces_received_by_serve_are_checked_by_the_cli() {
    let p = project();
    let state = assay_server::AppState::with_env(
        p.root.clone(),
        std::sync::Arc::new(|name: &str| {
            (name == "ASSAY_ADMIN_TOKEN").then(|| "s3cret".to_owned())
        }),
    );
    let base = serve(assay_server::app(state));
    let export = trace_file().lines().nth(3).unwrap().to_owned();
    let (status, _) = http(
        &base,
        "/v1/traces",
        "application/json",
        None,
        export.as_bytes(),
    );
    assert_eq!(status, 401);
    let (status, body) = http(
        &base,
        "/v1/traces",
        "application/json",
        Some("s3cret"),
        export.as_bytes(),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), json!({}));

    let run = check(&p, &[p.path(".assay/traces").to_str().unwrap(), "--json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    assert_eq!(
        disagreements(&report),
        [triple("04", "unknown", "retired_entity_v1")]
    );
    assert!(
        report["files"][0].as_str().unwrap().contains("received-"),
        "{report:#}"
    );
}

#[test]
fn traces_check_sends_drafts_to_review() {
    use assay_core::bank::SemanticCase;
    use assay_core::draft::{DraftBank, GenerationMethod};
    let p = project();
    let file = p.path("traces/prod.jsonl");
    let file = file.to_str().unwrap();
    let run = check(&p, &[file, "--to-review"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("Draft cases: 4 written to test_banks/drafts/semantic/gen-"),
        "{}",
        run.stdout
    );
    let dir = p.path("test_banks/drafts/semantic");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let bank: DraftBank<SemanticCase> =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    let ids: Vec<&str> = bank
        .drafts
        .iter()
        .map(|d| d.case.test_id.as_str())
        .collect();
    assert_eq!(ids, ["TRACE-02", "TRACE-03", "TRACE-04", "TRACE-05"]);
    let unknown = &bank.drafts[2].case;
    let prov = unknown.provenance.as_ref().unwrap();
    assert_eq!(prov.method, GenerationMethod::Trace);
    assert_eq!(prov.generation.as_deref(), Some(bank.generation.as_str()));
    // Every entity the case names that the knowledge base holds, at its version; the unknown
    // id production served has none.
    assert_eq!(
        prov.entity_versions.keys().collect::<Vec<_>>(),
        [
            "cooperative_coparenting",
            "gray_rock",
            "parental_alienation"
        ]
    );
    assert!(
        prov.variant
            .as_deref()
            .unwrap()
            .contains("unknown retired_entity_v1"),
        "{prov:?}"
    );

    // Review sees them like generated drafts, and accepts one into the bank.
    let listed = p.assay(&["generate", "review", "--json"]);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert_eq!(listed.json()["counts"]["pending"], 4, "{}", listed.stdout);
    let accepted = p.assay(&["generate", "review", "--accept", "TRACE-02", "--by", "ana"]);
    assert_eq!(accepted.code, 0, "{accepted:?}");
    let generated = p.json("test_banks/semantic/generated.json");
    assert_eq!(generated["tests"][0]["test_id"], "TRACE-02");
    assert_eq!(generated["tests"][0]["provenance"]["method"], "trace");

    // The same spans checked again are not drafted twice.
    let again = check(&p, &[file, "--to-review"]);
    assert_eq!(again.code, 1, "{again:?}");
    assert!(
        again
            .stdout
            .contains("Draft cases: none written; 4 spans skipped"),
        "{}",
        again.stdout
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);

    // --span needs a place to draft to.
    let lone = check(&p, &[file, "--span", "02"]);
    assert_eq!(lone.code, 2, "{lone:?}");
    assert!(lone.stderr.contains("--to-review"), "{}", lone.stderr);
}

/// Sends a GET with a bearer token and returns the status and body.
fn http_get(base: &str, path: &str, token: Option<&str>) -> (u16, Vec<u8>) {
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let split = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&answer[..split]).into_owned();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = answer[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    (status, body)
}

/// A chunked HTTP/1.1 body, joined.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(String::from_utf8_lossy(&raw[..end]).trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[end + 2..end + 2 + size]);
        raw = &raw[end + 2 + size + 2..];
    }
}

/// The OpenTelemetry Python SDK's OTLP/HTTP exporter, gzip-compressed as
/// `OTEL_EXPORTER_OTLP_COMPRESSION=gzip` makes it, exporting two retrieval spans, then the same
/// batch again (as it retries one whose answer it did not get).
const SDK_EXPORT: &str = r#"
import json, sys
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

memory = InMemorySpanExporter()
provider = TracerProvider(resource=Resource.create({"service.name": "coach"}))
provider.add_span_processor(SimpleSpanProcessor(memory))
tracer = provider.get_tracer("coach")
for query, ids in json.loads(sys.argv[1]):
    with tracer.start_as_current_span("retrieve") as span:
        span.set_attribute("gen_ai.operation.name", "retrieval")
        span.set_attribute("gen_ai.retrieval.query.text", query)
        span.set_attribute("gen_ai.retrieval.documents", json.dumps([{"id": i} for i in ids]))
spans = memory.get_finished_spans()
exporter = OTLPSpanExporter()
results = [exporter.export(spans).name for _ in range(2)]
print(json.dumps({"compression": exporter._compression.value, "results": results, "spans": len(spans)}))
"#;

/// Issue 42: the OpenTelemetry Python SDK exporting gzip (`OTEL_EXPORTER_OTLP_COMPRESSION=gzip`)
/// to `assay serve`: its spans are stored and checked; the batch sent twice is counted once;
/// the check needs the token.
#[test]
fn gzip_from_the_python_sdk_is_stored_once_and_checked_with_the_token() {
    let p = project();
    let state = assay_server::AppState::with_env(
        p.root.clone(),
        std::sync::Arc::new(|name: &str| {
            (name == "ASSAY_ADMIN_TOKEN").then(|| "s3cret".to_owned())
        }),
    );
    let base = serve(assay_server::app(state));
    let mut ids: Vec<&str> = ALWAYS.to_vec();
    ids.push("gray_rock");
    let spans = json!([
        ["he keeps baiting me trying to get a reaction", ids],
        ["how do I plan the holidays with my ex", ALWAYS],
    ]);
    let python = crate::support::test_python();
    let out = std::process::Command::new(&python)
        .args(["-c", SDK_EXPORT, &spans.to_string()])
        .env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", format!("{base}/v1/traces"))
        .env("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cret")
        .env("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_SDK_DISABLED")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run scripts/ci-setup, which installs the OpenTelemetry SDK and its OTLP/HTTP exporter)",
                python.display()
            )
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        said,
        json!({"compression": "gzip", "results": ["SUCCESS", "SUCCESS"], "spans": 2}),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Stored once: two lines, however often the batch came.
    let dir = p.path(".assay/traces");
    let lines: usize = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    assert_eq!(lines, 2);

    // Checked, with the token only.
    let (status, body) = http_get(&base, "/traces/check", None);
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&body));
    let error: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(error["code"], "unauthorized");
    let (status, _) = http_get(&base, "/traces/check", Some("wrong"));
    assert_eq!(status, 403);
    let (status, body) = http_get(&base, "/traces/check", Some("s3cret"));
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let report: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(report["checked"], 2, "{report:#}");
    let queries: Vec<&str> = report["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["query"].as_str().unwrap_or_default())
        .collect();
    assert!(
        queries.contains(&"he keeps baiting me trying to get a reaction"),
        "{report:#}"
    );
}
