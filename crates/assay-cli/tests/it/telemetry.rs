//! OpenTelemetry export (issue 31): the spans of a run with the LLM reranker as a local OTLP
//! collector receives them (protobuf and JSON), content only with the opt-in, a backend that is
//! down or refuses, bad settings, and the `traceparent` a command or HTTP target receives.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde_json::Value;

use crate::fake_openai::{FakeOpenAi, Faults};
use crate::otel_backends::Span;
use crate::otlp_sink::Sink;
use crate::providers::{KEY, comparable, configure, entity_ids};
use crate::support::Scratch;

/// A project whose semantic bank goes through the fake server's embedder and LLM reranker.
fn reranked() -> (Scratch, FakeOpenAi) {
    let project = Scratch::example();
    let server = FakeOpenAi::start(entity_ids(&project), Faults::default());
    configure(&project, &server, "");
    (project, server)
}

fn run(project: &Scratch, env: &[(&str, &str)]) -> crate::support::Run {
    let mut all = vec![KEY];
    all.extend_from_slice(env);
    project.assay_env(&["run", "--json", "--no-save", "--cache", "off"], &all)
}

fn by_id(spans: &[Span]) -> HashMap<&str, &Span> {
    spans.iter().map(|s| (s.span_id.as_str(), s)).collect()
}

fn parent<'a>(spans: &HashMap<&str, &'a Span>, span: &Span) -> Option<&'a Span> {
    span.parent_span_id.as_deref().map(|p| {
        *spans
            .get(p)
            .unwrap_or_else(|| panic!("{}: parent {p} not exported", span.name))
    })
}

/// The one span without a parent, named `name`, every span in its trace.
fn the_root<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_none())
        .collect();
    assert_eq!(
        roots.len(),
        1,
        "one root: {:?}",
        roots.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let root = roots[0];
    assert_eq!(root.name, name);
    assert!(
        spans.iter().all(|s| s.trace_id == root.trace_id),
        "one trace"
    );
    root
}

/// The checks every run's spans pass: one trace under one `assay run` span; a case span per
/// case with a retrieval span under it whose documents are the case's selection and whose
/// evaluation event is its score; the reranker's chat spans under the semantic retrievals with
/// their token usage; embeddings spans for the embedder.
fn check_run_spans(spans: &[Span], log: &Value) {
    let ids = by_id(spans);
    let root = the_root(spans, "assay run");

    let mut cases = 0;
    for bank in ["semantic", "state", "pattern", "always"] {
        for result in log[bank]["results"].as_array().unwrap() {
            cases += 1;
            let id = result["test_id"].as_str().unwrap();
            let name = format!("case {bank}/{id}");
            let case: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
            assert_eq!(case.len(), 1, "{name}");
            let case = case[0];
            assert_eq!(parent(&ids, case).unwrap().span_id, root.span_id, "{name}");
            assert_eq!(case.attributes["assay.test_id"], id);
            let retrieval: Vec<&Span> = spans
                .iter()
                .filter(|s| s.parent_span_id.as_deref() == Some(&case.span_id))
                .collect();
            assert_eq!(retrieval.len(), 1, "{name}: one retrieval span");
            let retrieval = retrieval[0];
            assert_eq!(retrieval.attributes["gen_ai.operation.name"], "retrieval");
            let documents: Vec<String> = retrieval
                .json_attr("gen_ai.retrieval.documents")
                .unwrap()
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d["id"].as_str().unwrap().to_owned())
                .collect();
            let expected_docs = match bank {
                "semantic" => &result["selections"],
                "state" => &result["triggered_handlers"],
                "pattern" => &result["matched_entities"],
                _ => &result["loaded_entities"],
            };
            let expected_docs: Vec<String> = expected_docs
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_str().unwrap().to_owned())
                .collect();
            assert_eq!(documents, expected_docs, "{name}: documents");
            let events: Vec<_> = retrieval.events_named("gen_ai.evaluation.result").collect();
            assert_eq!(events.len(), 1, "{name}: one evaluation");
            let e = &events[0].attributes;
            assert_eq!(e["gen_ai.evaluation.name"], format!("assay.{bank}"));
            match result["score"].as_f64() {
                Some(score) => assert_eq!(e["gen_ai.evaluation.score.value"], score, "{name}"),
                None => assert_eq!(e["gen_ai.evaluation.score.label"], "error", "{name}"),
            }
            if bank == "semantic" && result["error"].is_null() {
                let chats: Vec<&Span> = spans
                    .iter()
                    .filter(|s| s.parent_span_id.as_deref() == Some(&retrieval.span_id))
                    .collect();
                assert_eq!(
                    chats.len(),
                    1,
                    "{name}: the reranker's call under the retrieval"
                );
                let chat = chats[0];
                assert_eq!(chat.name, "chat gpt-4o-mini");
                assert_eq!(chat.attributes["gen_ai.operation.name"], "chat");
                assert_eq!(chat.attributes["gen_ai.provider.name"], "openai");
                assert_eq!(chat.attributes["gen_ai.request.model"], "gpt-4o-mini");
                assert_eq!(chat.attributes["assay.role"], "reranker");
                assert!(
                    chat.attributes["gen_ai.usage.input_tokens"].as_i64() > Some(0),
                    "{name}"
                );
                assert!(
                    chat.attributes["gen_ai.usage.output_tokens"].as_i64() > Some(0),
                    "{name}"
                );
            }
        }
    }
    assert_eq!(
        spans.iter().filter(|s| s.name.starts_with("case ")).count(),
        cases,
        "a span per case, no more"
    );
    let embeddings: Vec<&Span> = spans
        .iter()
        .filter(|s| s.attributes.get("gen_ai.operation.name") == Some(&Value::from("embeddings")))
        .collect();
    assert!(!embeddings.is_empty(), "the embedder's calls");
    for e in embeddings {
        assert_eq!(
            e.attributes["gen_ai.request.model"],
            "text-embedding-3-small"
        );
        assert_eq!(e.attributes["assay.role"], "embedder");
    }
}

#[test]
fn a_run_exports_its_cases_retrievals_and_reranker_calls_and_its_results_do_not_change() {
    let (project, _server) = reranked();
    let plain = run(&project, &[]);
    assert!(matches!(plain.code, 0 | 1), "{plain:?}");

    let sink = Sink::start();
    let traced = run(&project, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &sink.endpoint)]);
    assert_eq!(traced.code, plain.code, "{traced:?}");
    assert_eq!(comparable(traced.json()), comparable(plain.json()));
    assert!(!traced.stderr.contains("telemetry"), "{}", traced.stderr);
    let spans = sink.spans();
    assert!(
        sink.content_types()
            .iter()
            .all(|c| c == "application/x-protobuf"),
        "{:?}",
        sink.content_types()
    );
    check_run_spans(&spans, &traced.json());
    // No message content without the opt-in.
    for s in &spans {
        for key in [
            "gen_ai.retrieval.query.text",
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "assay.user_state",
        ] {
            assert!(
                !s.attributes.contains_key(key),
                "{}: {key} without the opt-in",
                s.name
            );
        }
    }
    let root = spans.iter().find(|s| s.name == "assay run").unwrap();
    assert_eq!(root.attributes["assay.command"], "assay run");
}

/// The names of the case spans received, and those whose verdict is fail or error.
fn case_spans(spans: &[Span]) -> (Vec<String>, Vec<String>) {
    let mut all = Vec::new();
    let mut failing = Vec::new();
    for s in spans.iter().filter(|s| s.name.starts_with("case ")) {
        all.push(s.name.clone());
        if matches!(
            s.attributes
                .get("assay.case.verdict")
                .and_then(Value::as_str),
            Some("fail" | "error")
        ) {
            failing.push(s.name.clone());
        }
    }
    all.sort();
    failing.sort();
    (all, failing)
}

#[test]
fn the_sampler_thins_out_passing_cases_and_keeps_every_failure_and_model_call() {
    let (project, _server) = reranked();
    // One state case made to fail: it expects a handler it also names as not expected.
    let mut bank: Value =
        serde_json::from_str(&project.read("test_banks/state/state_handler_tests.json")).unwrap();
    let case = &mut bank["tests"][0];
    let wrong = case["not_expected_handlers"][0].clone();
    case["expected_handlers"] = serde_json::json!([wrong]);
    project.write_json("test_banks/state/state_handler_tests.json", &bank);
    // A first run embeds the knowledge base; the runs compared below read it back.
    let first = run(&project, &[]);
    assert!(matches!(first.code, 0 | 1), "{first:?}");

    let all_on = Sink::start();
    let full = run(
        &project,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &all_on.endpoint)],
    );
    assert!(matches!(full.code, 0 | 1), "{full:?}");
    let full_spans = all_on.spans();
    check_run_spans(&full_spans, &full.json());
    let (every_case, failing) = case_spans(&full_spans);
    assert!(!failing.is_empty(), "the run has failing cases");
    let chats = |spans: &[Span]| {
        spans
            .iter()
            .filter(|s| {
                matches!(
                    s.attributes
                        .get("gen_ai.operation.name")
                        .and_then(Value::as_str),
                    Some("chat" | "embeddings")
                )
            })
            .count()
    };

    // always_off: no passing deterministic case, but every failing one and every case with a
    // model call (the semantic bank's reranker), each under its parents.
    let off = Sink::start();
    let sampled = run(
        &project,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &off.endpoint),
            ("OTEL_TRACES_SAMPLER", "parentbased_always_off"),
        ],
    );
    assert_eq!(sampled.code, full.code, "{sampled:?}");
    assert_eq!(comparable(sampled.json()), comparable(full.json()));
    let spans = off.spans();
    let ids = by_id(&spans);
    the_root(&spans, "assay run");
    for s in &spans {
        parent(&ids, s);
    }
    let (kept, kept_failing) = case_spans(&spans);
    assert_eq!(kept_failing, failing, "every failing case");
    let semantic: Vec<&String> = every_case
        .iter()
        .filter(|n| n.starts_with("case semantic/"))
        .collect();
    let expected: std::collections::BTreeSet<&String> =
        failing.iter().chain(semantic.iter().copied()).collect();
    assert_eq!(
        kept.iter().collect::<std::collections::BTreeSet<_>>(),
        expected,
        "failing cases and cases with model calls, nothing else"
    );
    assert_eq!(chats(&spans), chats(&full_spans), "every model call");

    // A ratio: some passing deterministic cases, not all.
    let half = Sink::start();
    let ratio = run(
        &project,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &half.endpoint),
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
        ],
    );
    assert_eq!(ratio.code, full.code, "{ratio:?}");
    let (kept, kept_failing) = case_spans(&half.spans());
    assert_eq!(kept_failing, failing);
    let passing_deterministic = every_case.len() - expected.len();
    let kept_passing = kept.len() - expected.len();
    assert!(
        kept_passing > 0 && kept_passing < passing_deterministic,
        "{kept_passing} of {passing_deterministic} passing deterministic cases kept at 0.5"
    );

    let bad = project.assay_env(
        &["run", "--no-save"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            ("OTEL_TRACES_SAMPLER", "traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "half"),
        ],
    );
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("OTEL_TRACES_SAMPLER_ARG"),
        "{}",
        bad.stderr
    );
}

#[test]
fn json_export_with_content_opted_in_carries_queries_and_messages() {
    let (project, _server) = reranked();
    let sink = Sink::start();
    let traced = run(
        &project,
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &sink.endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
            ("OTEL_SERVICE_NAME", "assay-ci"),
        ],
    );
    assert!(matches!(traced.code, 0 | 1), "{traced:?}");
    assert!(
        sink.content_types().iter().all(|c| c == "application/json"),
        "{:?}",
        sink.content_types()
    );
    let log = traced.json();
    let spans = sink.spans();
    check_run_spans(&spans, &log);
    let ids = by_id(&spans);
    let prompts: BTreeMap<&str, &str> = log["semantic"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["test_id"].as_str().unwrap(),
                r["prompt"].as_str().unwrap(),
            )
        })
        .collect();
    for s in spans.iter().filter(|s| s.name == "retrieval situation") {
        let case = parent(&ids, s).unwrap();
        let id = case.attributes["assay.test_id"].as_str().unwrap();
        assert_eq!(s.attributes["gen_ai.retrieval.query.text"], prompts[id]);
    }
    // The reranker's call names the query it ranked for.
    for chat in spans.iter().filter(|s| s.name == "chat gpt-4o-mini") {
        let case = parent(&ids, parent(&ids, chat).unwrap()).unwrap();
        let id = case.attributes["assay.test_id"].as_str().unwrap();
        assert_eq!(chat.attributes["gen_ai.retrieval.query.text"], prompts[id]);
    }
    assert!(
        spans
            .iter()
            .any(|s| s.name == "retrieval state" && s.attributes.contains_key("assay.user_state"))
    );
}

/// A collector that is down, or that refuses every export: the run's results and exit code
/// are those of a run without export, and the loss is one warning (and its count at the end).
#[test]
fn a_backend_that_is_down_or_refuses_costs_a_warning_never_the_run() {
    let (project, _server) = reranked();
    let plain = run(&project, &[]);
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        format!("http://127.0.0.1:{port}")
    };
    let refusing = Sink::refusing(503);
    for endpoint in [closed.as_str(), refusing.endpoint.as_str()] {
        let traced = run(&project, &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)]);
        assert_eq!(traced.code, plain.code, "{endpoint}: {traced:?}");
        assert_eq!(
            comparable(traced.json()),
            comparable(plain.json()),
            "{endpoint}"
        );
        let warnings: Vec<&str> = traced
            .stderr
            .lines()
            .filter(|l| l.contains("telemetry:"))
            .collect();
        assert_eq!(
            warnings.len(),
            2,
            "{endpoint}: the first failure and the count:\n{}",
            traced.stderr
        );
        assert!(
            warnings[0].contains("cannot export") && warnings[0].contains("the run goes on"),
            "{}",
            warnings[0]
        );
        assert!(
            warnings[1].contains("did not reach") && warnings[1].contains("unaffected"),
            "{}",
            warnings[1]
        );
    }
    assert!(
        !refusing.content_types().is_empty(),
        "the refusing collector was asked"
    );
}

#[test]
fn bad_telemetry_settings_are_exit_2_naming_the_variable_or_the_field() {
    let project = Scratch::example();
    let bad = project.assay_env(
        &["run", "--no-save"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ],
    );
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && bad.stderr.contains("grpc"),
        "{}",
        bad.stderr
    );
    let bad = project.assay_env(
        &["run", "--no-save"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")],
    );
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("OTEL_EXPORTER_OTLP_ENDPOINT"),
        "{}",
        bad.stderr
    );

    let settings = project.read("assay.toml");
    project.write(
        "assay.toml",
        &format!(
            "{settings}\n[telemetry]\nendpoint = \"http://127.0.0.1:9\"\nprotocol = \"http/xml\"\n"
        ),
    );
    for args in [&["run", "--no-save"][..], &["validate"][..]] {
        let bad = project.assay(args);
        assert_eq!(bad.code, 2, "{args:?}: {bad:?}");
        assert!(
            bad.stderr.contains("assay.toml") && bad.stderr.contains("telemetry.protocol"),
            "{}",
            bad.stderr
        );
    }
    project.write(
        "assay.toml",
        &format!("{settings}\n[telemetry]\nendpiont = \"http://127.0.0.1:9\"\n"),
    );
    let bad = project.assay(&["validate"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("telemetry") && bad.stderr.contains("endpiont"),
        "{}",
        bad.stderr
    );
    assert!(project.results().is_empty(), "nothing written");
}

/// The W3C trace context of each case's span reaches a command target in `TRACEPARENT` and an
/// HTTP target in the `traceparent` header: the product's spans join assay's trace.
#[test]
fn command_and_http_targets_receive_the_case_span_as_traceparent() {
    let p = crate::optimize::provider(std::time::Duration::ZERO);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("target.py");
    let log = dir.path().join("traceparents.log");
    // The optimizer's scripted target, which also writes down the trace context it was given.
    let recording = crate::optimize::PY_TARGET
        .replace(
            "def answer(req):\n",
            "def answer(req, tp=None):\n    import os\n    with open(os.environ['TP_LOG'], 'a') as f:\n        f.write(json.dumps({'dry': bool(req.get('dry_run')), 'question': req.get('question'), 'tp': tp if tp is not None else os.environ.get('TRACEPARENT')}) + '\\n')\n",
        )
        .replace(
            "answer(json.loads(body))",
            "answer(json.loads(body), self.headers.get('traceparent') or '')",
        );
    std::fs::write(&script, recording).unwrap();
    let path = script.display().to_string();
    let log_path = log.display().to_string();

    let (_server, url) = crate::optimize::serve_target(&path, &[("TP_LOG", &log_path)]);

    for (name, target) in [
        (
            "cmd",
            format!("target = \"command\"\ncommand = [\"python3\", \"{path}\"]\n"),
        ),
        ("web", format!("target = \"http\"\nurl = \"{url}\"\n")),
    ] {
        let _ = std::fs::remove_file(&log);
        let sink = Sink::start();
        let s = crate::optimize::project(&p, &target);
        let run = s.assay_env(
            &crate::optimize::args(name, "2"),
            &[
                ("OPENAI_API_KEY", "test-key"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", &sink.endpoint),
                ("TP_LOG", &log_path),
            ],
        );
        assert_eq!(run.code, 0, "{name}: {run:?}");
        let spans = sink.spans();
        let trace = &spans
            .iter()
            .find(|s| s.name == "assay optimize")
            .unwrap()
            .trace_id;
        let case_spans: HashMap<&str, &Span> = spans
            .iter()
            .filter(|s| s.name.starts_with("case line "))
            .map(|s| (s.span_id.as_str(), s))
            .collect();
        let calls: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let answered: Vec<&Value> = calls.iter().filter(|c| c["dry"] == false).collect();
        assert!(answered.len() >= 4, "{name}: {calls:?}");
        for call in answered {
            let tp = call["tp"]
                .as_str()
                .unwrap_or_else(|| panic!("{name}: no trace context: {call}"));
            let parts: Vec<&str> = tp.split('-').collect();
            assert_eq!(parts.len(), 4, "{name}: {tp}");
            assert_eq!(parts[0], "00");
            assert_eq!(parts[1], trace, "{name}: the run's trace");
            let case = case_spans
                .get(parts[2])
                .unwrap_or_else(|| panic!("{name}: {tp} names no case span"));
            // The case span of the question the target was asked.
            let question = call["question"].as_str().unwrap();
            let evaluated = case
                .events_named("gen_ai.evaluation.result")
                .next()
                .unwrap();
            assert_eq!(
                evaluated.attributes["gen_ai.evaluation.name"], "assay.correct",
                "{question}"
            );
        }
        let headers = sink.headers();
        assert!(
            headers.iter().all(|h| h.get("traceparent").is_none()),
            "assay sends no context to the collector"
        );
    }
}

/// The model each of a simulation's roles calls, as `--model` and the other flags name it.
fn sim_models(models: &[&str; 6]) -> BTreeMap<&'static str, String> {
    let model = |flag: &str| {
        let at = models.iter().position(|m| *m == flag).unwrap();
        models[at + 1].to_owned()
    };
    BTreeMap::from([
        ("assistant", model("--model")),
        ("user", model("--simulator-model")),
        ("judge", model("--evaluator-model")),
    ])
}

/// The evaluation events a simulation run's conversation span must carry: each check (`check:
/// <name>`, its status, its details), each criterion the judge scored (its id, score and
/// reasoning), and the run's own (`assay.simulation`: overall score, verdict, error or reason).
fn expected_evaluations(run: &Value) -> Vec<Value> {
    fn event(
        name: &str,
        score: Option<f64>,
        label: Option<&str>,
        explanation: Option<&str>,
    ) -> Value {
        let mut e = serde_json::Map::new();
        e.insert("gen_ai.evaluation.name".into(), name.into());
        if let Some(score) = score {
            e.insert("gen_ai.evaluation.score.value".into(), score.into());
        }
        if let Some(label) = label {
            e.insert("gen_ai.evaluation.score.label".into(), label.into());
        }
        if let Some(explanation) = explanation.filter(|e| !e.is_empty()) {
            e.insert("gen_ai.evaluation.explanation".into(), explanation.into());
        }
        Value::Object(e)
    }
    let mut out = Vec::new();
    for check in run["checks"].as_array().into_iter().flatten() {
        let details: Vec<&str> = check["details"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| d.as_str().unwrap())
            .collect();
        out.push(event(
            &format!("check: {}", check["name"].as_str().unwrap()),
            None,
            check["status"].as_str(),
            Some(&details.join("; ")),
        ));
    }
    for c in run["judgement"]["scores"].as_array().into_iter().flatten() {
        out.push(event(
            c["id"].as_str().unwrap(),
            c["score"].as_f64(),
            None,
            c["reasoning"].as_str(),
        ));
    }
    let explanation = run["error"].as_str().or_else(|| run["reason"].as_str());
    out.push(event(
        "assay.simulation",
        run["overall"].as_f64(),
        run["verdict"].as_str(),
        explanation,
    ));
    out
}

/// The checks every simulation's spans pass, against its report: one trace under one `assay
/// simulate` span; a conversation span per run under it, carrying the run's checks, criteria and
/// verdict as evaluation events; under each, the chat spans of the three roles (their models and
/// token usage) and an `execute_tool` span per tool call of the run's transcript; tool arguments,
/// results and messages only with `content`. Returns the number of chat spans per role.
fn check_simulation_spans(
    spans: &[Span],
    report: &Value,
    models: &BTreeMap<&str, String>,
    content: bool,
) -> BTreeMap<String, u64> {
    let ids = by_id(spans);
    let root = the_root(spans, "assay simulate");
    assert_eq!(root.attributes["assay.command"], "assay simulate");

    let runs = crate::simulate::runs(report);
    let scenarios = report["scenarios"].as_array().unwrap().len();
    let repeat = report["scenarios"][0]["runs"].as_u64().unwrap() as usize;
    assert_eq!(runs.len(), scenarios * repeat, "scenarios × repeats");
    let conversations: Vec<&Span> = spans
        .iter()
        .filter(|s| s.attributes.get("gen_ai.operation.name") == Some(&Value::from("invoke_agent")))
        .collect();
    assert_eq!(
        conversations.len(),
        runs.len(),
        "a conversation span per run, no more"
    );

    let mut roles: BTreeMap<String, u64> = BTreeMap::new();
    let mut tools_seen = 0;
    for run in runs {
        let (scenario, repeat) = (
            run["scenario_id"].as_str().unwrap(),
            run["repeat"].as_u64().unwrap(),
        );
        let name = format!("conversation {scenario} #{repeat}");
        let conversation: Vec<&&Span> = conversations.iter().filter(|s| s.name == name).collect();
        assert_eq!(conversation.len(), 1, "{name}");
        let conversation = conversation[0];
        assert_eq!(
            parent(&ids, conversation).unwrap().span_id,
            root.span_id,
            "{name}"
        );
        let a = &conversation.attributes;
        assert_eq!(
            a["gen_ai.conversation.id"],
            format!("{scenario}#{repeat}"),
            "{name}"
        );
        assert_eq!(a["assay.scenario"], scenario, "{name}");
        assert_eq!(a["assay.repeat"], repeat, "{name}");
        assert_eq!(a["assay.verdict"], run["verdict"], "{name}");

        // Its verdicts, as the report has them.
        let events: Vec<Value> = conversation
            .events_named("gen_ai.evaluation.result")
            .map(|e| Value::Object(e.attributes.clone()))
            .collect();
        assert_eq!(
            events,
            expected_evaluations(run),
            "{name}: evaluation events"
        );
        assert!(
            !run["checks"].as_array().is_none_or(Vec::is_empty) || scenario == "off_topic",
            "{name}: has checks"
        );

        let children: Vec<&Span> = spans
            .iter()
            .filter(|s| s.parent_span_id.as_deref() == Some(&conversation.span_id))
            .collect();
        // The three roles' calls, with their models and usage.
        let mut here: BTreeMap<String, u64> = BTreeMap::new();
        for chat in children
            .iter()
            .filter(|s| s.attributes["gen_ai.operation.name"] == "chat")
        {
            let role = chat.attributes["assay.role"].as_str().unwrap();
            let (vendor, model) = models[role].split_once('/').unwrap();
            assert_eq!(chat.name, format!("chat {model}"), "{name}: {role}");
            assert_eq!(
                chat.attributes["gen_ai.request.model"], model,
                "{name}: {role}"
            );
            assert_eq!(
                chat.attributes["gen_ai.provider.name"], vendor,
                "{name}: {role}"
            );
            assert!(
                chat.attributes["gen_ai.usage.input_tokens"].as_i64() > Some(0),
                "{name}: {role}"
            );
            assert!(
                chat.attributes["gen_ai.usage.output_tokens"].as_i64() > Some(0),
                "{name}: {role}"
            );
            assert_eq!(chat.status, "UNSET", "{name}: {role}");
            for key in ["gen_ai.input.messages", "gen_ai.output.messages"] {
                assert_eq!(
                    chat.attributes.contains_key(key),
                    content,
                    "{name}: {role}: {key}"
                );
            }
            *here.entry(role.to_owned()).or_default() += 1;
        }
        let turns = run["transcript"]["turns"].as_array().unwrap();
        let said = |role: &str| turns.iter().filter(|t| t["role"] == role).count() as u64;
        assert!(
            here.get("assistant").copied().unwrap_or(0) >= said("assistant"),
            "{name}: {here:?}"
        );
        // The simulated user wrote every user turn but the scenario's opening message.
        assert!(
            here.get("user").copied().unwrap_or(0) >= said("user") - 1,
            "{name}: {here:?}"
        );
        assert!(here.contains_key("user"), "{name}: {here:?}");
        assert_eq!(here.get("judge"), Some(&1), "{name}: the judge once");
        for (role, n) in &here {
            *roles.entry(role.clone()).or_default() += n;
        }
        let roles_here = here;

        // A tool span per tool call, with the transcript's names, ids and servers.
        let calls = crate::simulate::tool_calls(run);
        let mut expected: Vec<(String, String, String)> = calls
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap().to_owned(),
                    c["id"].as_str().unwrap().to_owned(),
                    c["server"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let tool_spans: Vec<&&Span> = children
            .iter()
            .filter(|s| s.attributes["gen_ai.operation.name"] == "execute_tool")
            .collect();
        let mut got: Vec<(String, String, String)> = tool_spans
            .iter()
            .map(|s| {
                let a = &s.attributes;
                assert_eq!(
                    s.name,
                    format!("execute_tool {}", a["gen_ai.tool.name"].as_str().unwrap())
                );
                (
                    a["gen_ai.tool.name"].as_str().unwrap().to_owned(),
                    a["gen_ai.tool.call.id"].as_str().unwrap().to_owned(),
                    a["assay.mcp.server"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        expected.sort();
        got.sort();
        assert_eq!(got, expected, "{name}: tool spans");
        tools_seen += got.len();
        for s in &tool_spans {
            let id = s.attributes["gen_ai.tool.call.id"].as_str().unwrap();
            let call = calls.iter().find(|c| c["id"] == id).unwrap();
            assert_eq!(
                s.status == "ERROR",
                call["is_error"] == true,
                "{name}: {id}"
            );
            match s.attributes.get("gen_ai.tool.call.arguments") {
                Some(args) if content => assert_eq!(
                    serde_json::from_str::<Value>(args.as_str().unwrap()).unwrap(),
                    call["arguments"],
                    "{name}: {id}"
                ),
                None if !content => {}
                other => panic!("{name}: {id}: arguments {other:?} with content {content}"),
            }
            match s.attributes.get("gen_ai.tool.call.result") {
                Some(result) if content => assert_eq!(result, &call["result"], "{name}: {id}"),
                None if !content => {}
                other => panic!("{name}: {id}: result {other:?} with content {content}"),
            }
        }
        let chats: u64 = roles_here.values().sum();
        assert!(
            children.len() == tool_spans.len() + chats as usize,
            "{name}: only chat and tool spans under the conversation: {:?}",
            children.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
    }
    assert!(tools_seen > 0, "the simulation called tools");
    // Every chat and tool span is under a conversation.
    for s in spans {
        let op = s
            .attributes
            .get("gen_ai.operation.name")
            .and_then(Value::as_str);
        if matches!(op, Some("chat" | "execute_tool")) {
            let p = parent(&ids, s).unwrap();
            assert_eq!(
                p.attributes["gen_ai.operation.name"], "invoke_agent",
                "{}",
                s.name
            );
        }
    }
    roles
}

/// A simulation report without its times and without the scripted provider's tool call ids
/// (drawn from its request counter, so they differ from one simulation to the next).
fn sim_comparable(report: &Value) -> Value {
    let mut r = crate::simulate::stable(report);
    for run in r["runs"].as_array_mut().unwrap() {
        for turn in run["transcript"]["turns"].as_array_mut().unwrap() {
            for call in turn["tool_calls"].as_array_mut().into_iter().flatten() {
                call.as_object_mut().unwrap().remove("id");
            }
        }
    }
    r
}

/// Where two JSON values differ, as paths (for a readable failure).
fn differences(a: &Value, b: &Value) -> Vec<String> {
    fn walk(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                    let (va, vb) = (
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                    );
                    walk(va, vb, &format!("{path}.{k}"), out);
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                    walk(va, vb, &format!("{path}[{i}]"), out);
                }
            }
            _ if a != b => out.push(format!("{path}: {a} != {b}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(a, b, "", &mut out);
    out
}

/// A simulation with real MCP tool calls, in both wire formats (Anthropic over protobuf,
/// OpenAI over JSON with content opted in): a conversation span per run with its verdicts, the
/// three roles' calls and the tool calls under it; its report unchanged by export.
#[test]
fn a_simulation_exports_conversations_tool_calls_and_verdicts() {
    use std::sync::atomic::Ordering;
    let provider = crate::simulate::provider(crate::sim_provider::Behaviour::default());
    let scratch = crate::simulate::project(&provider);
    for (models, protocol, content) in [
        (crate::simulate::ANTHROPIC, "http/protobuf", false),
        (crate::simulate::OPENAI, "http/json", true),
    ] {
        let args = [
            &models[..],
            &[
                "--scenarios",
                "daily_chore,goal_change,off_topic",
                "--repeat",
                "2",
                "--cache",
                "off",
                "--json",
            ],
        ]
        .concat();
        let plain = crate::simulate::simulate(&scratch, &args, &[]);
        assert_eq!(plain.code, 0, "{plain:?}");

        let sink = Sink::start();
        let requests = |p: &crate::simulate::Provider| {
            let s = &p.stats;
            [&s.assistant, &s.simulator, &s.judge].map(|a| a.load(Ordering::SeqCst))
        };
        let before = requests(&provider);
        let mut env = vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
        ];
        if content {
            env.push(("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"));
        }
        let traced = crate::simulate::simulate(&scratch, &args, &env);
        assert_eq!(traced.code, 0, "{protocol}: {traced:?}");
        assert!(!traced.stderr.contains("telemetry"), "{}", traced.stderr);
        let after = requests(&provider);
        let report = traced.json();
        assert_eq!(
            differences(&sim_comparable(&report), &sim_comparable(&plain.json())),
            Vec::<String>::new(),
            "{protocol}: the report does not change with export"
        );
        let wanted = if protocol == "http/json" {
            "application/json"
        } else {
            "application/x-protobuf"
        };
        assert!(
            sink.content_types().iter().all(|c| c == wanted),
            "{:?}",
            sink.content_types()
        );
        let spans = sink.spans();
        let roles = check_simulation_spans(&spans, &report, &sim_models(&models), content);
        // A chat span for every request the provider answered, per role.
        let made: Vec<u64> = before.iter().zip(after).map(|(b, a)| a - b).collect();
        let spanned: Vec<u64> = ["assistant", "user", "judge"]
            .map(|r| roles.get(r).copied().unwrap_or(0))
            .to_vec();
        assert_eq!(
            spanned, made,
            "{protocol}: chat spans per role (assistant, user, judge)"
        );
    }
}

/// A tool call the simulator refuses before any MCP server sees it (a tool nobody offers) is an
/// `execute_tool` span too, failed, with no server.
#[test]
fn a_refused_tool_call_is_a_failed_execute_tool_span() {
    let provider = crate::simulate::provider(crate::sim_provider::Behaviour::default());
    let scratch = crate::simulate::project(&provider);
    let prompt = scratch.read("sim/prompts/coach_system_prompt.md");
    scratch.write(
        "sim/prompts/coach_system_prompt.md",
        &format!("{prompt}\nCALL_MISSING_TOOL\n"),
    );
    let sink = Sink::start();
    let args = [
        &crate::simulate::ANTHROPIC[..],
        &["--scenarios", "daily_chore", "--cache", "off", "--json"],
    ]
    .concat();
    let out = crate::simulate::simulate(
        &scratch,
        &args,
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", sink.endpoint.as_str())],
    );
    assert!(matches!(out.code, 0 | 1), "{out:?}");
    let report = out.json();
    let refused: Vec<Value> = crate::simulate::runs(&report)
        .iter()
        .flat_map(|run| crate::simulate::tool_calls(run))
        .filter(|c| c["name"] == "teleport")
        .cloned()
        .collect();
    assert!(
        !refused.is_empty(),
        "the scripted assistant called teleport"
    );
    let spans = sink.spans();
    let teleports: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == "execute_tool teleport")
        .collect();
    assert_eq!(teleports.len(), refused.len(), "a span per refused call");
    for (span, call) in teleports.iter().zip(&refused) {
        assert_eq!(call["is_error"], true);
        assert!(
            call["result"].as_str().unwrap().contains("Unknown tool"),
            "{call}"
        );
        assert_eq!(span.status, "ERROR");
        assert_eq!(span.attributes["error.type"], "unknown_tool");
        assert_eq!(span.attributes["gen_ai.tool.call.id"], call["id"]);
        assert!(
            !span.attributes.contains_key("assay.mcp.server"),
            "{span:?}"
        );
    }
}

/// The spans of one trace: the one whose root is named `root`.
fn trace_of(spans: &[Span], root: &str) -> Vec<Span> {
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name == root && s.parent_span_id.is_none())
        .collect();
    assert_eq!(roots.len(), 1, "one `{root}` trace: {roots:?}");
    let trace = &roots[0].trace_id;
    spans
        .iter()
        .filter(|s| &s.trace_id == trace)
        .cloned()
        .collect()
}

/// The telemetry warnings a command printed.
fn telemetry_warnings(kind: &str, command: &str, out: &crate::support::Run) -> Vec<String> {
    out.stderr
        .lines()
        .filter(|l| l.contains("telemetry"))
        .map(|l| format!("{kind}: assay {command}: {l}"))
        .collect()
}

/// A run with the LLM reranker and a simulation with MCP tool calls, exported over OTLP/HTTP
/// protobuf to a real MLflow and a real Arize Phoenix (the project named in
/// `OTEL_RESOURCE_ATTRIBUTES`), read back through their own APIs: every span each backend stores
/// passes the checks the local collector's do (names, parents, GenAI attributes, token usage,
/// documents, evaluation events), and each stores as many spans as the collector received.
/// Fails (never skips) when the backends' virtualenvs are missing: run scripts/ci-setup.
#[test]
fn real_backends_receive_genai_spans() {
    let started = std::time::Instant::now();
    std::thread::scope(|scope| {
        // Both servers start (about 15 s each) while the expected spans are counted locally.
        let mlflow = scope.spawn(crate::otel_backends::start_mlflow);
        let phoenix = scope.spawn(crate::otel_backends::start_phoenix);

        let (project, _server) = reranked();
        // The first run imports and embeds the knowledge base; the runs after it make the same
        // calls, and so the same spans, each time.
        let warm = run(&project, &[]);
        assert!(matches!(warm.code, 0 | 1), "{warm:?}");
        let sim_provider = crate::simulate::provider(crate::sim_provider::Behaviour::default());
        let sim_project = crate::simulate::project(&sim_provider);
        let models = crate::simulate::ANTHROPIC;
        let sim_args = [
            &models[..],
            &[
                "--scenarios",
                "daily_chore,goal_change,off_topic",
                "--cache",
                "off",
                "--json",
            ],
        ]
        .concat();
        let simulate = |env: &[(&str, &str)]| {
            let out = crate::simulate::simulate(&sim_project, &sim_args, env);
            assert_eq!(out.code, 0, "{out:?}");
            out
        };
        // The same exports to the local collector: what each backend must hold.
        let sink = Sink::start();
        let local = run(&project, &[("OTEL_EXPORTER_OTLP_ENDPOINT", &sink.endpoint)]);
        check_run_spans(&sink.spans(), &local.json());
        let run_spans = sink.spans().len();
        let sink = Sink::start();
        let local = simulate(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &sink.endpoint)]);
        check_simulation_spans(&sink.spans(), &local.json(), &sim_models(&models), false);
        let sim_spans = sink.spans().len();
        eprintln!(
            "real_backends_receive_genai_spans: {run_spans} run spans, {sim_spans} simulation spans ({:?})",
            started.elapsed()
        );

        let backends = [mlflow.join().unwrap(), phoenix.join().unwrap()];
        eprintln!(
            "real_backends_receive_genai_spans: backends up ({:?})",
            started.elapsed()
        );
        let mut exported = Vec::new();
        let mut warnings = Vec::new();
        for backend in &backends {
            let mut env = backend.otlp_env();
            if backend.kind == "phoenix" {
                env.push((
                    "OTEL_RESOURCE_ATTRIBUTES".to_owned(),
                    "openinference.project.name=assay-otel".to_owned(),
                ));
            }
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let log = run(&project, &env);
            assert!(matches!(log.code, 0 | 1), "{}: {log:?}", backend.kind);
            warnings.extend(telemetry_warnings(backend.kind, "run", &log));
            let report = simulate(&env);
            warnings.extend(telemetry_warnings(backend.kind, "simulate", &report));
            exported.push((log.json(), report.json()));
        }
        for (backend, (log, report)) in backends.iter().zip(&exported) {
            let kind = backend.kind;
            let spans = backend.wait_for_spans(run_spans + sim_spans, Duration::from_mins(3));
            eprintln!(
                "real_backends_receive_genai_spans: {kind} holds them ({:?})",
                started.elapsed()
            );
            assert_eq!(
                spans.len(),
                run_spans + sim_spans,
                "{kind}: every span, once"
            );
            if kind == "phoenix" {
                assert!(
                    spans.iter().all(|s| s.project == "assay-otel"),
                    "{kind}: the project"
                );
            }

            let run_trace = trace_of(&spans, "assay run");
            assert_eq!(run_trace.len(), run_spans, "{kind}");
            check_run_spans(&run_trace, log);
            // The retrievals' evaluations carry their label too.
            for r in run_trace
                .iter()
                .filter(|s| s.name.starts_with("retrieval "))
            {
                let e = &r
                    .events_named("gen_ai.evaluation.result")
                    .next()
                    .unwrap()
                    .attributes;
                assert!(
                    e["gen_ai.evaluation.score.label"].is_string(),
                    "{kind}: {r:?}"
                );
            }
            // Semantic documents come back with their scores.
            let ids = by_id(&run_trace);
            let semantic = run_trace
                .iter()
                .find(|s| {
                    s.name == "retrieval situation"
                        && s.json_attr("gen_ai.retrieval.documents")
                            .is_some_and(|d| d != serde_json::json!([]))
                })
                .unwrap_or_else(|| panic!("{kind}: no semantic retrieval"));
            let case = parent(&ids, semantic).unwrap();
            assert!(
                case.name.starts_with("case semantic/"),
                "{kind}: {}",
                case.name
            );
            let docs = semantic.json_attr("gen_ai.retrieval.documents").unwrap();
            assert!(
                docs.as_array()
                    .unwrap()
                    .iter()
                    .all(|d| d["score"].is_number()),
                "{kind}: {docs}"
            );

            let sim_trace = trace_of(&spans, "assay simulate");
            assert_eq!(sim_trace.len(), sim_spans, "{kind}");
            let roles = check_simulation_spans(&sim_trace, report, &sim_models(&models), false);
            assert_eq!(
                roles.keys().collect::<Vec<_>>(),
                ["assistant", "judge", "user"],
                "{kind}"
            );
        }
        // Last, so that a failure here comes after every span was found stored: assay must not
        // report spans lost that the backend received.
        assert!(
            warnings.is_empty(),
            "telemetry warnings although every span arrived:\n{}",
            warnings.join("\n")
        );
    });
    eprintln!("real_backends_receive_genai_spans: {:?}", started.elapsed());
}
