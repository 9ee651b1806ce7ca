//! The OpenAPI 3.1 document of the API, written by hand (`GET /openapi.json`).

use serde_json::{Value, json};

fn error_response(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    })
}

fn ok(description: &str, schema: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}
    })
}

/// The error responses every running endpoint can give.
fn run_errors(not_found: Option<&str>) -> Vec<(&'static str, Value)> {
    let mut out = vec![(
        "400",
        error_response(
            "A bad request: an unknown query parameter (named in the message), a bad value, or a request the harness rejects.",
        ),
    )];
    if let Some(what) = not_found {
        out.push(("404", error_response(what)));
    }
    out.extend([
        (
            "409",
            error_response(
                "A run or calibration is already in progress; try again when it finishes.",
            ),
        ),
        (
            "422",
            error_response(
                "The project does not load: a bad assay.toml, bank or kb/ file (the message names the file).",
            ),
        ),
        (
            "500",
            error_response("An infrastructure error (a provider, the store, the file system)."),
        ),
    ]);
    out
}

fn responses(success: Value, errors: Vec<(&'static str, Value)>) -> Value {
    let mut map = serde_json::Map::new();
    map.insert("200".into(), success);
    for (code, v) in errors {
        map.insert(code.into(), v);
    }
    Value::Object(map)
}

fn query(name: &str, description: &str, schema: &Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description, "schema": schema})
}

fn path(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": {"type": "string"}})
}

fn boolean(default: bool) -> Value {
    json!({"type": "boolean", "default": default})
}

fn id_list() -> Value {
    json!({"type": "array", "items": {"type": "string"}})
}

fn schemas() -> Value {
    let summary_props = json!({
        "health_status": {"type": "string", "enum": ["CRITICAL", "POOR", "FAIR", "GOOD", "EXCELLENT"]},
        "combined_score": {"type": "number", "description": "Weighted score of the banks that ran, one decimal."},
        "total_tests": {"type": "integer"},
        "hard_fails": {"type": "integer"},
        "critical_failures": {"type": "array", "items": {"type": "string"}},
        "error_count": {"type": "integer", "description": "Cases an infrastructure error kept from a verdict."},
        "run_id": {"type": "string"},
        "gate_passed": {"type": "boolean", "description": "Whether the run passes the project's [gate]."},
        "saved": {"oneOf": [{"$ref": "#/components/schemas/Saved"}, {"type": "null"}]}
    });
    let summary_required = json!([
        "health_status",
        "combined_score",
        "total_tests",
        "hard_fails",
        "critical_failures",
        "error_count",
        "run_id",
        "gate_passed",
        "saved"
    ]);
    let with = |extra: Value, required: &[&str]| {
        let mut props = summary_props.clone();
        if let (Some(p), Some(e)) = (props.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        let mut req = summary_required.clone();
        if let Some(r) = req.as_array_mut() {
            r.extend(required.iter().map(|s| json!(s)));
        }
        json!({"type": "object", "properties": props, "required": req})
    };
    let usage = json!({"type": "object", "description": "Provider calls, cache hits, tokens, cost and latency per model; present when a provider was called."});
    let run_log = json!({"$ref": "#/components/schemas/RunLog"});
    json!({
        "Error": {
            "type": "object",
            "properties": {
                "error": {"type": "string", "description": "What went wrong."},
                "status": {"type": "integer", "description": "The HTTP status, repeated."},
                "code": {"type": "string", "enum": ["bad_request", "not_found", "method_not_allowed", "busy", "invalid_project", "infrastructure", "internal"]}
            },
            "required": ["error", "status", "code"]
        },
        "Health": {
            "type": "object",
            "properties": {
                "status": {"const": "ok"},
                "version": {"type": "string"},
                "project": {"type": "string"},
                "busy": {"type": "boolean"},
                "current_run": {"oneOf": [{"$ref": "#/components/schemas/RunInfo"}, {"type": "null"}]}
            },
            "required": ["status", "version", "project", "busy", "current_run"]
        },
        "RunInfo": {
            "type": "object",
            "properties": {"started": {"type": "string", "format": "date-time"}, "what": {"type": "string"}},
            "required": ["started", "what"]
        },
        "Saved": {
            "type": "object",
            "properties": {"json": {"type": "string"}, "markdown": {"type": "string"}, "html": {"type": "string"}},
            "required": ["json", "markdown", "html"]
        },
        "Failure": {
            "type": "object",
            "properties": {
                "test_id": {"type": "string"},
                "score": {"type": ["integer", "null"]},
                "is_hard_fail": {"type": "boolean"},
                "error": {"type": ["string", "null"]}
            },
            "required": ["test_id", "score", "is_hard_fail", "error"]
        },
        "RunLog": {
            "type": "object",
            "description": "The complete, versioned record of a run (assay_core::runlog::RunLog): schema_version, run_id, timestamp, filters, setup, summary, and per bank (semantic, state, pattern, always) its aggregates and `results`, or null when the bank did not run.",
            "required": ["schema_version", "run_id", "summary"]
        },
        "CaseResult": {
            "type": "object",
            "description": "One case's result as in the RunLog: test_id, score (null on error), breakdown, is_hard_fail, and the bank's own fields.",
            "required": ["test_id"]
        },
        "Run": with(json!({
            "failures": {
                "type": "object",
                "description": "failures_only=true: per bank that ran, the cases that scored below 100 or errored.",
                "additionalProperties": {"type": "array", "items": {"$ref": "#/components/schemas/Failure"}}
            },
            "usage": usage,
            "run_log": {"allOf": [run_log], "description": "verbose=true: the whole RunLog."}
        }), &[]),
        "Test": with(json!({
            "bank": {"type": "string", "enum": ["semantic", "state", "pattern", "always"]},
            "test_id": {"type": "string"},
            "result": {"$ref": "#/components/schemas/CaseResult"},
            "usage": usage,
            "run_log": {"allOf": [run_log], "description": "debug=true: the whole RunLog."}
        }), &["bank", "test_id", "result"]),
        "Topic": with(json!({
            "topic": {"type": "string"},
            "results": {"type": "array", "items": {"$ref": "#/components/schemas/CaseResult"}},
            "usage": usage
        }), &["topic", "results"]),
        "CalibrationRequest": {
            "type": "object",
            "additionalProperties": false,
            "description": "The same fields as the query parameters; a field may be given in one place only.",
            "properties": {
                "scope": {"type": "string", "enum": ["full", "affected", "single"], "default": "full"},
                "test_ids": {"oneOf": [id_list(), {"type": "string"}]},
                "added_entities": {"oneOf": [id_list(), {"type": "string"}]},
                "kb_version": {"type": "string", "default": "v2.0"},
                "dry_run": {"type": "boolean", "default": true}
            }
        },
        "CalibrationOutcome": {
            "type": "object",
            "description": "assay_harness::calibrate::CalibrationOutcome.",
            "properties": {
                "run_id": {"type": "string"},
                "timestamp": {"type": "string", "format": "date-time"},
                "model": {"type": "string"},
                "scope": {"type": "string", "enum": ["full", "affected", "single"]},
                "trigger": {"type": "string"},
                "kb_version": {"type": "string"},
                "added_entities": {"type": "array", "items": {"type": "string"}},
                "dry_run": {"type": "boolean"},
                "counts": {
                    "type": "object",
                    "properties": {
                        "selected": {"type": "integer"},
                        "changed": {"type": "integer"},
                        "unchanged": {"type": "integer"},
                        "overrides_kept": {"type": "integer"},
                        "errors": {"type": "integer"}
                    }
                },
                "cases": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "test_id": {"type": "string"},
                            "status": {"type": "string", "enum": ["changed", "unchanged", "override_kept", "error"]},
                            "previous": {"type": "object"},
                            "previous_source": {"type": "string"},
                            "proposed": {"type": "object"},
                            "reasoning": {"type": "string"},
                            "error": {"type": "string"},
                            "attempts": {"type": "integer"},
                            "usage": {"type": "object"}
                        },
                        "required": ["test_id", "status"]
                    }
                },
                "usage": {"type": "object"},
                "history_file": {"type": ["string", "null"]},
                "responses_file": {"type": ["string", "null"]},
                "log_file": {"type": ["string", "null"]}
            },
            "required": ["run_id", "timestamp", "model", "scope", "trigger", "dry_run", "counts", "cases"]
        }
    })
}

/// The OpenAPI 3.1 document of every route in [`crate::routes`].
pub fn document() -> Value {
    let banks = json!({"type": "string", "default": "all", "description": "all, or a comma-separated list of semantic, state, pattern, always"});
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "assay API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Run assay's test banks and calibrate expectations over HTTP (spec 000 §7). One run or calibration at a time; errors are JSON. There is no authentication: bind it to localhost."
        },
        "paths": {
            "/health": {
                "get": {
                    "operationId": "health",
                    "summary": "Whether the server is up, and busy.",
                    "responses": {"200": ok("Up.", "Health")}
                }
            },
            "/cli/test-harness": {
                "get": {
                    "operationId": "runTestHarness",
                    "summary": "Run the test banks.",
                    "parameters": [
                        query("banks", "Which banks to run.", &banks),
                        query("verbose", "Add the whole RunLog (`run_log`).", &boolean(false)),
                        query("failures_only", "Add the failed cases per bank (`failures`).", &boolean(false)),
                        query("save_results", "Save results/results_<stamp>.json and results/report_<stamp>.md.", &boolean(true))
                    ],
                    "responses": responses(ok("The run's summary.", "Run"), run_errors(None))
                }
            },
            "/cli/test-harness/test/{test_id}": {
                "get": {
                    "operationId": "runSingleTest",
                    "summary": "Run one case, in whichever bank holds it. Nothing is saved.",
                    "parameters": [
                        path("test_id", "The case's test_id."),
                        query("debug", "Add the whole RunLog (`run_log`).", &boolean(false))
                    ],
                    "responses": responses(ok("The case's result.", "Test"), run_errors(Some("No bank has a case with this test_id.")))
                }
            },
            "/cli/test-harness/topic/{topic}": {
                "get": {
                    "operationId": "runByTopic",
                    "summary": "Run the semantic cases with a topic. Nothing is saved.",
                    "parameters": [path("topic", "The topic.")],
                    "responses": responses(ok("The cases' results.", "Topic"), run_errors(Some("No semantic case has this topic.")))
                }
            },
            "/cli/calibrate": {
                "post": {
                    "operationId": "calibrateTests",
                    "summary": "Calibrate semantic expectations with the [calibration] model. A dry run (the default) writes nothing.",
                    "parameters": [
                        query("scope", "full, affected (cases that mention an added entity) or single (the cases in test_ids).", &json!({"type": "string", "enum": ["full", "affected", "single"], "default": "full"})),
                        query("test_ids", "For scope single; repeated and/or comma-separated.", &id_list()),
                        query("added_entities", "For scope affected; repeated and/or comma-separated.", &id_list()),
                        query("kb_version", "The knowledge-base version recorded.", &json!({"type": "string", "default": "v2.0"})),
                        query("dry_run", "Ask the model and report, but write nothing.", &boolean(true))
                    ],
                    "requestBody": {
                        "required": false,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/CalibrationRequest"}}}
                    },
                    "responses": responses(ok("The calibration's outcome.", "CalibrationOutcome"), run_errors(None))
                }
            },
            "/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "summary": "This document.",
                    "responses": {"200": {"description": "The OpenAPI 3.1 document.", "content": {"application/json": {}}}}
                }
            }
        },
        "components": {"schemas": schemas()}
    })
}
