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
                "The project does not load: a bad assay.toml, bank or kb/ file (the message names the file; code invalid_project), or it has no test banks to run (no test_banks/ folder; code no_test_banks).",
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
                "code": {"type": "string", "enum": ["bad_request", "unauthorized", "forbidden", "read_only", "not_found", "method_not_allowed", "busy", "stale_version", "already_exists", "conflict", "validation_failed", "invalid_project", "no_test_banks", "precondition_required", "infrastructure", "internal"]},
                "field": {"type": "string", "description": "422 only: the field of the request body at fault."}
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
                "verdict": {"type": "string", "enum": ["pass", "fail", "error"], "description": "The case's stored verdict."},
                "is_hard_fail": {"type": "boolean"},
                "error": {"type": ["string", "null"]}
            },
            "required": ["test_id", "score", "verdict", "is_hard_fail", "error"]
        },
        "RunLog": {
            "type": "object",
            "description": "The complete, versioned record of a run (assay_core::runlog::RunLog): schema_version, run_id, timestamp, filters, setup, summary, and per bank (semantic, state, pattern, always) its aggregates and `results`, or null when the bank did not run.",
            "required": ["schema_version", "run_id", "summary"]
        },
        "CaseResult": {
            "type": "object",
            "description": "One case's result as in the RunLog: test_id, score (null on error), breakdown, is_hard_fail, verdict ({outcome: pass|fail|error, failed: the checks that failed it, error}), duration_ms, and the bank's own fields.",
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
            "description": "assay_run::calibrate::CalibrationOutcome.",
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

/// What a KB admin route takes, for its error responses.
#[derive(Clone, Copy)]
struct KbRoute {
    /// A write: the token's 401 and 403.
    write: bool,
    /// An entity id in the path: the unknown id's 404.
    entity: bool,
    /// A JSON body: the malformed body's 400 and the validation 422.
    body: bool,
    /// An edit of a version: the stale version's 409.
    version: bool,
}

/// The error responses of a KB admin route.
fn kb_errors(route: KbRoute) -> Vec<(&'static str, Value)> {
    let KbRoute {
        write,
        entity,
        body,
        version,
    } = route;
    let mut out = vec![(
        "400",
        error_response(if body {
            "A malformed request: an unknown or bad query parameter, or a body that is empty, not JSON, or not a JSON object."
        } else {
            "A bad request: an unknown or bad query parameter (named in the message)."
        }),
    )];
    if write {
        out.push((
            "401",
            error_response("No `Authorization: Bearer <ASSAY_ADMIN_TOKEN>` header."),
        ));
        out.push((
            "403",
            error_response(
                "A wrong token (`forbidden`), or the server was started without ASSAY_ADMIN_TOKEN and is read-only (`read_only`).",
            ),
        ));
    }
    if entity {
        out.push(("404", error_response("No entity has this entity_id.")));
    }
    if version {
        out.push((
            "409",
            error_response(
                "`stale_version`: the edit was made from a version that is no longer current (nothing was written); `conflict`: the entity is in no kb/ file.",
            ),
        ));
    } else if write && body {
        out.push((
            "409",
            error_response("`already_exists`: the entity_id is taken (ids are never reused, even by inactive entities)."),
        ));
    } else if write {
        out.push((
            "409",
            error_response(
                "`conflict`: the entity is inactive, so it has no embedding to regenerate.",
            ),
        ));
    }
    out.push((
        "422",
        error_response(if body {
            "`validation_failed`: the body breaks a rule (a wrong type, an unknown field, priority out of 0-100, an unknown entity_type or load_mode, an empty title, bad state_conditions); `field` names the field. `invalid_project`: the project does not load."
        } else {
            "`invalid_project`: the project does not load (a bad assay.toml or kb/ file; the message names the file)."
        }),
    ));
    out.push((
        "500",
        error_response(
            "An infrastructure error (the store, the file system, an embedding provider).",
        ),
    ));
    out
}

fn header(name: &str, description: &str, required: bool) -> Value {
    json!({"name": name, "in": "header", "required": required, "description": description, "schema": {"type": "string"}})
}

fn bearer() -> Value {
    json!([{"adminToken": []}])
}

fn kb_schemas() -> Value {
    let text = json!({"type": ["string", "null"]});
    let entity_type = json!({"type": "string", "enum": ["PERSONA", "GUARDRAIL", "HANDLER", "KNOWLEDGE", "SCRIPT", "RULE"]});
    let load_mode = json!({"type": "string", "enum": ["ALWAYS", "STATE", "SITUATION"]});
    let priority = json!({"type": "integer", "minimum": 0, "maximum": 100});
    let audiences = json!({"type": "array", "items": {"type": "string"}});
    let conditions = json!({"type": ["object", "null"], "description": "STATE conditions: field → value or operator object (`eq`, `gte`, `$gte`, `in`, …)."});
    let entity_props = json!({
        "entity_id": {"type": "string", "maxLength": 100},
        "entity_type": entity_type,
        "subtype": text,
        "title": {"type": "string"},
        "concept_summary": text,
        "recognition": text,
        "keywords": text,
        "guidance_do": text,
        "guidance_dont": text,
        "examples": text,
        "red_flags": text,
        "load_mode": load_mode,
        "priority": priority,
        "state_conditions": conditions,
        "audience_types": audiences,
        "source_author": text,
        "source_title": text,
        "source_year": {"type": ["integer", "null"]},
        "is_active": {"type": "boolean"},
        "editable_by": {"type": "string", "enum": ["ADMIN", "TRAINER", "HIDDEN"]}
    });
    let mut entity_view_props = entity_props.clone();
    if let Some(p) = entity_view_props.as_object_mut() {
        for (k, v) in [
            (
                "id",
                json!({"type": "string", "description": "The row id of the current version (UUID)."}),
            ),
            ("version", json!({"type": "integer", "minimum": 1})),
            ("previous_version_id", text.clone()),
            (
                "created_at",
                json!({"type": "string", "format": "date-time"}),
            ),
            (
                "updated_at",
                json!({"type": "string", "format": "date-time"}),
            ),
            ("created_by", json!({"type": "string"})),
            ("retrieval_count", json!({"type": "integer"})),
            ("embedding_model", text.clone()),
            (
                "embedding_status",
                json!({"type": "object", "description": "GET one entity only: `{status: fresh | missing | other_model | text_changed}` for the project's embedder; absent when the entity is inactive."}),
            ),
            (
                "source_file",
                json!({"type": ["string", "null"], "description": "The kb/ file that defines the entity."}),
            ),
        ] {
            p.insert(k.into(), v);
        }
    }
    // KBEntityUpdate: these fields of the entity, and the version edited.
    let mut update_props = serde_json::Map::new();
    update_props.insert(
        "expected_version".into(),
        json!({"type": "integer", "minimum": 1, "description": "The version this edit was made from (or the If-Match header); a stale one gets 409."}),
    );
    for field in [
        "title",
        "concept_summary",
        "recognition",
        "keywords",
        "guidance_do",
        "guidance_dont",
        "examples",
        "red_flags",
        "load_mode",
        "priority",
        "state_conditions",
        "audience_types",
        "is_active",
    ] {
        update_props.insert(field.into(), entity_props[field].clone());
    }
    let stage =
        json!({"type": "string", "enum": ["always", "state", "crisis", "keyword", "semantic"]});
    let change = json!({
        "type": "object",
        "properties": {
            "bank": {"type": "string", "enum": ["semantic", "state", "pattern", "always"]},
            "test_id": {"type": "string"},
            "before": {"type": ["integer", "null"]},
            "after": {"type": ["integer", "null"]},
            "delta": {"type": ["integer", "null"]},
            "was_hard_fail": {"type": "boolean"},
            "is_hard_fail": {"type": "boolean"},
            "before_error": {"type": "string"},
            "after_error": {"type": "string"}
        },
        "required": ["bank", "test_id", "before", "after", "delta", "was_hard_fail", "is_hard_fail"]
    });
    let changes = json!({"type": "array", "items": {"$ref": "#/components/schemas/CaseChange"}});
    let headline = json!({
        "type": "object",
        "properties": {
            "run_id": {"type": "string"},
            "timestamp": {"type": "string", "format": "date-time"},
            "combined_score": {"type": "number"},
            "health_status": {"type": "string", "enum": ["CRITICAL", "POOR", "FAIR", "GOOD", "EXCELLENT"]},
            "total_tests": {"type": "integer"},
            "hard_fails": {"type": "integer"},
            "error_count": {"type": "integer"}
        },
        "required": ["run_id", "timestamp", "combined_score", "health_status", "total_tests", "hard_fails", "error_count"]
    });
    json!({
        "EntityCreate": {
            "type": "object",
            "additionalProperties": false,
            "description": "A new entity: its fields. With the embedded store the entity is written to a new file kb/<entity_id>.yaml (letters, digits, `_`, `-` and `.`).",
            "properties": entity_props,
            "required": ["entity_id", "entity_type", "title"]
        },
        "EntityUpdate": {
            "type": "object",
            "additionalProperties": false,
            "description": "A change to an entity: the fields to change (left out: unchanged; null clears an optional field), and the version edited.",
            "properties": update_props
        },
        "Entity": {
            "type": "object",
            "description": "An entity as stored: every field and the current version's metadata.",
            "properties": entity_view_props,
            "required": ["id", "entity_id", "entity_type", "title", "load_mode", "priority", "audience_types", "is_active", "version", "created_at", "updated_at", "created_by", "retrieval_count"]
        },
        "EntityPage": {
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {"$ref": "#/components/schemas/Entity"}},
                "page": {"type": "integer", "minimum": 1},
                "page_size": {"type": "integer", "minimum": 1, "maximum": crate::admin::MAX_PAGE_SIZE},
                "total": {"type": "integer"},
                "pages": {"type": "integer"}
            },
            "required": ["items", "page", "page_size", "total", "pages"]
        },
        "Edit": {
            "type": "object",
            "properties": {
                "changed": {"type": "boolean", "description": "Whether a new version was written."},
                "changed_fields": {"type": "array", "items": {"type": "string"}},
                "unchanged_because": {"type": "string", "enum": ["already_as_asked", "already_inactive", "inactive_outside_files"]},
                "file": {"type": "string", "description": "The kb/ file written."},
                "note": {"type": "string"},
                "entity": {"$ref": "#/components/schemas/Entity"}
            },
            "required": ["changed", "changed_fields", "entity"]
        },
        "Version": {
            "type": "object",
            "properties": {
                "version": {"type": "integer"},
                "id": {"type": "string"},
                "previous_version_id": text,
                "is_current": {"type": "boolean"},
                "is_active": {"type": "boolean"},
                "created_at": {"type": "string", "format": "date-time"},
                "updated_at": {"type": "string", "format": "date-time"},
                "created_by": {"type": "string"},
                "changed_fields": {"type": "array", "items": {"type": "string"}},
                "entity": {"type": "object", "description": "The entity's fields as this version defined them."}
            },
            "required": ["version", "id", "previous_version_id", "is_current", "is_active", "created_at", "updated_at", "created_by", "changed_fields", "entity"]
        },
        "Versions": {
            "type": "object",
            "properties": {
                "entity_id": {"type": "string"},
                "versions": {"type": "array", "items": {"$ref": "#/components/schemas/Version"}}
            },
            "required": ["entity_id", "versions"]
        },
        "Regenerated": {
            "type": "object",
            "properties": {
                "model": {"type": "string"},
                "embedded": {"type": "array", "items": {"type": "string"}},
                "fresh": {"type": "integer", "description": "Active entities whose embedding was fresh and left alone."},
                "views": {"type": "object", "description": "With [retrieval] views = \"multi\": `{embedded, fresh}` for the entities' views."}
            },
            "required": ["model", "embedded", "fresh"]
        },
        "RetrievalTest": {
            "type": "object",
            "description": "The pipeline's trace, as `assay retrieve --explain --json` shows it.",
            "properties": {
                "query": {"type": "string"},
                "audience_type": {"type": "string"},
                "top_k": {"type": "integer"},
                "embedder": {"type": "string"},
                "user_state": {"type": "object", "description": "The user state STATE conditions were checked against."},
                "search": {"type": "object", "description": "How the SITUATION stage searched ([semantic] search).", "properties": {"kind": {"type": "string", "enum": ["exact", "index"]}, "reason": {"type": "string"}, "index": {"type": "string"}, "ef_search": {"type": "integer"}}, "required": ["kind", "reason"]},
                "entities": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "entity_id": {"type": "string"}, "entity_type": entity_type, "title": {"type": "string"},
                        "stage": stage, "also": {"type": "array", "items": stage},
                        "similarity": {"type": "number"}, "priority": {"type": "integer"},
                        "priority_bonus": {"type": "number"}, "final_score": {"type": "number"}, "tokens": {"type": "integer"}
                    }
                }},
                "stages": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"stage": stage, "candidates": {"type": "array", "description": "[entity_id, similarity] pairs, in the stage's order.", "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]}}}
                }},
                "dropped": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "entity_id": {"type": "string"}, "stage": stage,
                        "reason": {"type": "string", "enum": ["threshold", "top_k", "duplicate", "budget", "displaced", "unavailable"]}
                    },
                    "description": "With the reason's own fields: similarity and threshold, kept_as, tokens/used/budget, by."
                }},
                "tokens_used": {"type": "integer"},
                "token_budget": {"type": "integer"},
                "notes": {"type": "array", "items": {"type": "string"}},
                "matches": {"type": "array", "items": {"type": "object"}, "description": "Several views per entity or hybrid ranking: each semantic candidate's view, cosine and lexical score."}
            },
            "required": ["query", "audience_type", "top_k", "embedder", "user_state", "search", "entities", "stages", "dropped", "tokens_used", "token_budget", "notes"]
        },
        "KbStats": {
            "type": "object",
            "properties": {
                "entities": {"type": "integer"},
                "active": {"type": "integer"},
                "inactive": {"type": "integer"},
                "versions": {"type": "integer"},
                "by_type": {"type": "object", "additionalProperties": {"type": "integer"}},
                "by_load_mode": {"type": "object", "additionalProperties": {"type": "integer"}},
                "embeddings": {"type": "object", "properties": {"model": {"type": "string"}, "fresh": {"type": "integer"}, "stale": {"type": "integer"}, "missing": {"type": "integer"}}},
                "total_retrievals": {"type": "integer"},
                "top_retrieved": {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}}
            },
            "required": ["entities", "active", "inactive", "versions", "by_type", "by_load_mode", "embeddings", "total_retrievals", "top_retrieved"]
        },
        "RunEntry": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The results file's stamp: results_<id>.json."},
                "run_id": {"type": "string"},
                "timestamp": {"type": "string", "format": "date-time"},
                "combined_score": {"type": "number"},
                "health_status": {"type": "string", "enum": ["CRITICAL", "POOR", "FAIR", "GOOD", "EXCELLENT"]},
                "total_tests": {"type": "integer"},
                "hard_fails": {"type": "integer"},
                "critical_failures": {"type": "integer"},
                "error_count": {"type": "integer"},
                "banks": {"type": "array", "items": {"type": "string"}},
                "bank_scores": {"type": "object", "additionalProperties": {"type": "number"}, "description": "Each scored bank's score out of 100, by bank."},
                "duration_ms": {"type": "integer", "description": "How long the run took, as the run measured it (wall clock from its start to its end; for a resumed run, from the resume)."},
                "json": {"type": "string"},
                "markdown": {"type": ["string", "null"]},
                "shard": {"type": "string", "description": "The shard of the suite it ran (hash:i/n): part of a run, never a baseline."},
                "partial": {"type": "array", "items": {"type": "string"}, "description": "What made it a partial run (--test, --topic, --changed-since, a --banks subset), as the flags; absent for a run of the whole suite."},
                "drafts": {"type": "integer", "description": "The pending drafts its banks included (--include-drafts), when there were some."},
                "merged": {"type": "integer", "description": "How many shards it was merged from (assay runs merge), when it was."}
            },
            "required": ["id", "run_id", "timestamp", "combined_score", "health_status", "total_tests", "hard_fails", "critical_failures", "error_count", "banks", "bank_scores", "duration_ms", "json", "markdown"]
        },
        "Runs": {
            "type": "object",
            "properties": {"runs": {"type": "array", "items": {"$ref": "#/components/schemas/RunEntry"}}},
            "required": ["runs"]
        },
        "CaseChange": change,
        "RunHeadline": headline,
        "RunDiff": {
            "type": "object",
            "properties": {
                "before": {"$ref": "#/components/schemas/RunHeadline"},
                "after": {"$ref": "#/components/schemas/RunHeadline"},
                "score_delta": {"type": "number"},
                "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
                "better": changes,
                "worse": changes,
                "unchanged": changes,
                "errored": changes,
                "added": changes,
                "removed": changes
            },
            "required": ["before", "after", "score_delta", "counts", "better", "worse", "unchanged", "errored", "added", "removed"]
        }
    })
}

fn kb_paths() -> Value {
    let id = || path("entity_id", "The entity's entity_id.");
    let if_match = header(
        "If-Match",
        "The version edited, as an entity tag (\"3\"); instead of expected_version.",
        false,
    );
    let editor = header(
        "X-Assay-User",
        "Who makes the change (recorded as created_by; default `api`).",
        false,
    );
    let body = |schema: &str| json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}});
    let page_size = json!({"type": "integer", "minimum": 1, "maximum": crate::admin::MAX_PAGE_SIZE, "default": crate::admin::DEFAULT_PAGE_SIZE});
    let mut update_responses = responses(
        ok(
            "Updated (or unchanged: `changed` false); the ETag header holds the version.",
            "Edit",
        ),
        kb_errors(KbRoute {
            write: true,
            entity: true,
            body: true,
            version: true,
        }),
    );
    update_responses["428"] =
        error_response("`precondition_required`: the update does not say which version it edits.");
    let mut regenerate_all_errors = kb_errors(KbRoute {
        write: true,
        entity: false,
        body: false,
        version: false,
    });
    regenerate_all_errors.retain(|(code, _)| *code != "409");
    json!({
        "/admin/kb/entities": {
            "get": {
                "operationId": "listEntities",
                "summary": "List entities with filters, a page at a time (by priority, highest first, then id).",
                "parameters": [
                    query("entity_type", "Only this type (any case).", &json!({"type": "string"})),
                    query("load_mode", "Only this load mode (any case).", &json!({"type": "string"})),
                    query("is_active", "Active (true) or inactive (false) entities.", &boolean(true)),
                    query("page", "The page, from 1; a page beyond the last is empty.", &json!({"type": "integer", "minimum": 1, "default": 1})),
                    query("page_size", "Entities per page; more than the maximum is a 400.", &page_size)
                ],
                "responses": responses(ok("A page of entities.", "EntityPage"), kb_errors(KbRoute { write: false, entity: false, body: false, version: false }))
            },
            "post": {
                "operationId": "createEntity",
                "summary": "Create an entity (version 1). Needs the admin token.",
                "security": bearer(),
                "parameters": [editor.clone()],
                "requestBody": body("EntityCreate"),
                "responses": responses(ok("Created; the ETag header holds the version.", "Edit"), kb_errors(KbRoute { write: true, entity: false, body: true, version: false }))
            }
        },
        "/admin/kb/entities/{entity_id}": {
            "get": {
                "operationId": "getEntity",
                "summary": "One entity by entity_id (active or not); the ETag header holds its version.",
                "parameters": [id()],
                "responses": responses(ok("The entity.", "Entity"), kb_errors(KbRoute { write: false, entity: true, body: false, version: false }))
            },
            "put": {
                "operationId": "updateEntity",
                "summary": "Update an entity: a new version when anything changes. Needs the admin token and the version edited (expected_version or If-Match; without either: 428).",
                "security": bearer(),
                "parameters": [id(), if_match.clone(), editor.clone()],
                "requestBody": body("EntityUpdate"),
                "responses": update_responses
            },
            "delete": {
                "operationId": "deactivateEntity",
                "summary": "Soft delete: a new version with is_active false (nothing is deleted). Needs the admin token; If-Match optional.",
                "security": bearer(),
                "parameters": [id(), if_match, editor],
                "responses": responses(ok("Deactivated (or already inactive: `changed` false).", "Edit"), kb_errors(KbRoute { write: true, entity: true, body: false, version: true }))
            }
        },
        "/admin/kb/entities/{entity_id}/versions": {
            "get": {
                "operationId": "getEntityVersions",
                "summary": "The entity's version history, oldest first, with the fields each version changed.",
                "parameters": [id()],
                "responses": responses(ok("The versions.", "Versions"), kb_errors(KbRoute { write: false, entity: true, body: false, version: false }))
            }
        },
        "/admin/kb/entities/{entity_id}/regenerate-embedding": {
            "post": {
                "operationId": "regenerateEmbedding",
                "summary": "Re-embed one active entity with the project's embedder. Needs the admin token.",
                "security": bearer(),
                "parameters": [id()],
                "responses": responses(ok("What was embedded.", "Regenerated"), kb_errors(KbRoute { write: true, entity: true, body: false, version: false }))
            }
        },
        "/admin/kb/regenerate-all-embeddings": {
            "post": {
                "operationId": "regenerateAllEmbeddings",
                "summary": "Re-embed every active entity (and, with multi views, every view). Needs the admin token.",
                "security": bearer(),
                "responses": responses(ok("What was embedded.", "Regenerated"), regenerate_all_errors)
            }
        },
        "/admin/kb/retrieval-test": {
            "get": {
                "operationId": "testRetrieval",
                "summary": "Retrieve for a sample message, with every stage of the pipeline: candidates and scores, what was dropped and why.",
                "parameters": [
                    {"name": "query", "in": "query", "required": true, "description": "The message.", "schema": {"type": "string"}},
                    query("audience_type", "The audience.", &json!({"type": "string", "default": "PARENT"})),
                    query("top_k", "SITUATION entities kept (default: the project's [retrieval] top_k).", &json!({"type": "integer", "minimum": 1, "maximum": crate::admin::MAX_TOP_K})),
                    query("user_state", "The user's state, a JSON object (URL-encoded) of the facts STATE conditions read, e.g. {\"days_since_last\": 9} (default: none, so no STATE entity's conditions hold).", &json!({"type": "string", "contentMediaType": "application/json"}))
                ],
                "responses": responses(ok("The retrieval and its trace.", "RetrievalTest"), kb_errors(KbRoute { write: false, entity: false, body: false, version: false }))
            }
        },
        "/admin/kb/stats": {
            "get": {
                "operationId": "getKbStats",
                "summary": "Counts by type and load mode, versions, embedding coverage for the project's embedder, retrievals.",
                "responses": responses(ok("The statistics.", "KbStats"), kb_errors(KbRoute { write: false, entity: false, body: false, version: false }))
            }
        },
        "/runs": {
            "get": {
                "operationId": "listRuns",
                "summary": "The saved runs (results/results_<id>.json), newest first.",
                "responses": responses(ok("The runs.", "Runs"), vec![
                    ("400", error_response("An unknown query parameter.")),
                    ("422", error_response("The project's assay.toml does not load.")),
                ])
            }
        },
        "/runs/{id}": {
            "get": {
                "operationId": "getRun",
                "summary": "One saved run's RunLog.",
                "parameters": [path("id", "The run's id: its results file's stamp (2026-11-25-0915, or 2026-11-25-0915-2).")],
                "responses": responses(ok("The RunLog.", "RunLog"), vec![
                    ("400", error_response("The id is not a run id (nothing outside results/ can be named).")),
                    ("404", error_response("No saved run has this id.")),
                    ("422", error_response("The results file is not a RunLog, or assay.toml does not load.")),
                ])
            }
        },
        "/runs/{id}/cases": {
            "get": {
                "operationId": "getRunCases",
                "summary": "Every case of a saved run as JSON Lines, one {\"bank\", \"result\"} record a line, streamed from the run's run log (a large run's RunLog lists only the worst cases of each bank).",
                "parameters": [
                    path("id", "The run's id."),
                    {"name": "bank", "in": "query", "required": false, "description": "Only this bank's cases: semantic, state, pattern or always.", "schema": {"type": "string", "enum": ["semantic", "state", "pattern", "always"]}}
                ],
                "responses": {
                    "200": {"description": "One case a line.", "content": {"application/x-ndjson": {"schema": {"type": "string"}}}},
                    "400": error_response("The id is not a run id, or the bank is unknown."),
                    "404": error_response("No saved run has this id."),
                    "422": error_response("The results file is not a RunLog, or assay.toml does not load."),
                    "500": error_response("The run's run log is missing.")
                }
            }
        },
        "/runs/{a}/diff/{b}": {
            "get": {
                "operationId": "diffRuns",
                "summary": "Compare run a (before) with run b (after), case by case.",
                "parameters": [path("a", "The earlier run's id."), path("b", "The later run's id.")],
                "responses": responses(ok("The comparison.", "RunDiff"), vec![
                    ("400", error_response("An id is not a run id.")),
                    ("404", error_response("No saved run has one of the ids.")),
                    ("422", error_response("A results file is not a RunLog, or assay.toml does not load.")),
                ])
            }
        }
    })
}

/// The OpenAPI 3.1 document of every route in [`crate::routes`].
pub fn document() -> Value {
    let mut doc = base_document();
    if let (Some(paths), Value::Object(kb)) = (doc["paths"].as_object_mut(), kb_paths()) {
        paths.extend(kb);
    }
    if let (Some(paths), Value::Object(traces)) =
        (doc["paths"].as_object_mut(), crate::traces::openapi_paths())
    {
        paths.extend(traces);
    }
    if let (Some(paths), Value::Object(drafts)) = (
        doc["paths"].as_object_mut(),
        crate::ui::drafts::openapi_paths(),
    ) {
        paths.extend(drafts);
    }
    if let (Some(schemas), Value::Object(kb)) =
        (doc["components"]["schemas"].as_object_mut(), kb_schemas())
    {
        schemas.extend(kb);
    }
    doc["components"]["securitySchemes"] = json!({
        "adminToken": {"type": "http", "scheme": "bearer", "description": "ASSAY_ADMIN_TOKEN, as the server was started with. Without it the KB admin API is read-only."}
    });
    doc
}

fn base_document() -> Value {
    let banks = json!({"type": "string", "default": "all", "description": "all, or a comma-separated list of semantic, state, pattern, always"});
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "assay API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Run assay's test banks and calibrate expectations over HTTP, edit the knowledge base (under /admin/kb/), and read saved runs (/runs). One run or calibration at a time; errors are JSON. KB writes need the admin token (Authorization: Bearer <ASSAY_ADMIN_TOKEN>); everything else has no authentication: bind it to localhost."
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
