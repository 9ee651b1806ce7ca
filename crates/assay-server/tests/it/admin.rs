//! The KB admin API (`/admin/kb/…`): every endpoint, the token rule, the stale-version 409,
//! paging limits, bad input, and edits that write through to the kb/ files.

use std::path::Path;

use assay_core::entity::Entity;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{Server, assert_error};

const TOKEN: &str = "s3cret-token";

fn admin() -> Server {
    Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)])
}

fn bearer() -> (&'static str, String) {
    ("authorization", format!("Bearer {TOKEN}"))
}

/// Every entity the scratch project's kb/ files define.
fn file_entities(server: &Server) -> Vec<Entity> {
    assay_kb::load_dir(&server.root.join("kb"))
        .unwrap()
        .kb
        .entities()
        .to_vec()
}

fn entities_in(path: &Path) -> Vec<Entity> {
    assay_kb::datafile::read(path, &mut |_| {}).unwrap()
}

fn kb_files(server: &Server) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    server
        .files()
        .into_iter()
        .filter(|(p, _)| p.starts_with("kb"))
        .collect()
}

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["entity_id"].as_str().unwrap().to_owned())
        .collect()
}

const NEW: &str = r#"{"entity_id": "knowledge_holiday_swaps", "entity_type": "KNOWLEDGE",
  "title": "Swapping holidays with the other parent",
  "keywords": "holiday swap, christmas, thanksgiving, trade weekends", "priority": 60}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_the_api_is_read_only() {
    let server = Server::example();
    assert!(server.state.read_only());
    let before = kb_files(&server);
    let (status, page) = server.get("/admin/kb/entities").await;
    assert_eq!(status, StatusCode::OK, "{page:#}");
    let writes = [
        (Method::POST, "/admin/kb/entities", Some(NEW)),
        (
            Method::PUT,
            "/admin/kb/entities/gray_rock",
            Some(r#"{"priority": 1, "expected_version": 1}"#),
        ),
        (Method::DELETE, "/admin/kb/entities/gray_rock", None),
        (
            Method::POST,
            "/admin/kb/entities/gray_rock/regenerate-embedding",
            None,
        ),
        (Method::POST, "/admin/kb/regenerate-all-embeddings", None),
    ];
    for (method, uri, body) in writes {
        // A token does not help: the server has none to compare it with.
        let got = server
            .request_with(method.clone(), uri, body, &[bearer()])
            .await;
        assert_error(&got, StatusCode::FORBIDDEN, "read-only");
        assert_eq!(got.1["code"], "read_only", "{method} {uri}");
    }
    assert_eq!(kb_files(&server), before);
    let (_, versions) = server.get("/admin/kb/entities/gray_rock/versions").await;
    assert_eq!(versions["versions"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_need_the_right_bearer_token() {
    let server = admin();
    assert!(!server.state.read_only());
    let before = kb_files(&server);
    let uri = "/admin/kb/entities";
    let response = server.raw(Method::POST, uri, Some(NEW), &[]).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response.headers()["www-authenticate"],
        "Bearer realm=\"assay-admin\""
    );
    let got = server.request_with(Method::POST, uri, Some(NEW), &[]).await;
    assert_error(&got, StatusCode::UNAUTHORIZED, "Authorization: Bearer");
    let basic = [("authorization", format!("Basic {TOKEN}"))];
    let got = server
        .request_with(Method::POST, uri, Some(NEW), &basic)
        .await;
    assert_error(&got, StatusCode::UNAUTHORIZED, "admin token");
    for wrong in [
        format!("Bearer {TOKEN}x"),
        "Bearer s3cret".to_owned(),
        "Bearer  ".to_owned() + &TOKEN[..TOKEN.len() - 1],
    ] {
        let got = server
            .request_with(Method::POST, uri, Some(NEW), &[("authorization", wrong)])
            .await;
        assert_error(&got, StatusCode::FORBIDDEN, "not the admin token");
        assert_eq!(got.1["code"], "forbidden");
    }
    assert_eq!(kb_files(&server), before);
    let (status, body) = server
        .request_with(Method::POST, uri, Some(NEW), &[bearer()])
        .await;
    assert_eq!(status, StatusCode::OK, "{body:#}");
    // Reads never need it.
    let (status, _) = server.get("/admin/kb/stats").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_filters_and_pages() {
    let server = Server::example();
    let entities = file_entities(&server);
    let active = entities.iter().filter(|e| e.is_active).count();
    let (status, page) = server.get("/admin/kb/entities").await;
    assert_eq!(status, StatusCode::OK, "{page:#}");
    assert_eq!(page["total"], active);
    assert_eq!(page["page"], 1);
    assert_eq!(page["page_size"], 20);
    assert_eq!(page["items"].as_array().unwrap().len(), active.min(20));
    assert_eq!(page["pages"], active.div_ceil(20));
    let first = &page["items"][0];
    for key in [
        "id",
        "entity_id",
        "entity_type",
        "title",
        "load_mode",
        "priority",
        "audience_types",
        "version",
        "created_at",
        "updated_at",
        "created_by",
        "source_file",
    ] {
        assert!(first.get(key).is_some(), "{key} missing: {first:#}");
    }

    // Pages cover the list exactly once, in order.
    let mut seen = Vec::new();
    for n in 1..=active.div_ceil(7) {
        let (_, p) = server
            .get(&format!("/admin/kb/entities?page={n}&page_size=7"))
            .await;
        seen.extend(ids(&p));
    }
    assert_eq!(
        seen,
        ids(&server.get("/admin/kb/entities?page_size=100").await.1)
    );
    let (status, beyond) = server.get("/admin/kb/entities?page=99").await;
    assert_eq!(status, StatusCode::OK);
    assert!(beyond["items"].as_array().unwrap().is_empty());

    let handlers = entities
        .iter()
        .filter(|e| e.is_active && e.entity_type.as_str() == "HANDLER")
        .count();
    let (_, p) = server.get("/admin/kb/entities?entity_type=handler").await;
    assert_eq!(p["total"], handlers);
    let (_, p) = server.get("/admin/kb/entities?load_mode=ALWAYS").await;
    assert!(
        p["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["load_mode"] == "ALWAYS")
    );
    let (_, p) = server.get("/admin/kb/entities?is_active=false").await;
    assert_eq!(p["total"], entities.len() - active);

    for (query, needle) in [
        (
            "page_size=101",
            "`page_size`: 101 is out of range (1 to 100)",
        ),
        ("page_size=0", "`page_size`: 0 is out of range"),
        ("page=0", "`page`: 0 is out of range"),
        ("page=two", "`page`: expected a whole number"),
        ("entity_type=FACT", "unknown entity type `FACT`"),
        ("load_mode=SOMETIMES", "unknown load mode `SOMETIMES`"),
        ("is_active=maybe", "`is_active`"),
        ("audience=PARENT", "unknown query parameter `audience`"),
        ("page=1&page=2", "more than once"),
    ] {
        let got = server.get(&format!("/admin/kb/entities?{query}")).await;
        assert_error(&got, StatusCode::BAD_REQUEST, needle);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_shows_one_entity_with_its_version() {
    let server = Server::example();
    let response = server
        .raw(Method::GET, "/admin/kb/entities/handler_crisis", None, &[])
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["etag"], "\"1\"");
    let (status, e) = server.get("/admin/kb/entities/handler_crisis").await;
    assert_eq!(status, StatusCode::OK);
    let file = file_entities(&server)
        .into_iter()
        .find(|e| e.entity_id == "handler_crisis")
        .unwrap();
    assert_eq!(e["title"], file.title);
    assert_eq!(e["entity_type"], "HANDLER");
    assert_eq!(e["version"], 1);
    assert_eq!(e["created_by"], "import");
    assert!(e["previous_version_id"].is_null());
    assert!(
        e["source_file"]
            .as_str()
            .unwrap()
            .ends_with("kb/handlers.yaml"),
        "{e:#}"
    );
    assert_eq!(e["embedding_status"]["status"], "missing");

    let got = server.get("/admin/kb/entities/no_such_entity").await;
    assert_error(&got, StatusCode::NOT_FOUND, "no entity `no_such_entity`");
    let got = server
        .get("/admin/kb/entities/no_such_entity/versions")
        .await;
    assert_error(&got, StatusCode::NOT_FOUND, "no entity `no_such_entity`");
    let got = server.get("/admin/kb/entities/handler_crisis?x=1").await;
    assert_error(&got, StatusCode::BAD_REQUEST, "unknown query parameter `x`");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_and_history_write_through_to_the_files() {
    let server = admin();
    let n = file_entities(&server).len();
    let auth = [bearer(), ("x-assay-user", "alice".to_owned())];

    let (status, created) = server
        .request_with(Method::POST, "/admin/kb/entities", Some(NEW), &auth)
        .await;
    assert_eq!(status, StatusCode::OK, "{created:#}");
    assert_eq!(created["changed"], true);
    assert_eq!(created["entity"]["version"], 1);
    assert_eq!(created["entity"]["created_by"], "alice");
    let file = server.root.join("kb/knowledge_holiday_swaps.yaml");
    assert_eq!(created["file"], file.display().to_string());
    let written = entities_in(&file);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].priority.get(), 60);
    assert_eq!(file_entities(&server).len(), n + 1);

    // An update of one field in a shared file: that field of that entity, nothing else.
    let handlers = server.root.join("kb/handlers.yaml");
    let before = entities_in(&handlers);
    let others: Vec<_> = kb_files(&server)
        .into_iter()
        .filter(|(p, _)| !p.ends_with("handlers.yaml"))
        .collect();
    let target = "handler_returning_user";
    let (status, updated) = server
        .request_with(
            Method::PUT,
            &format!("/admin/kb/entities/{target}"),
            Some(r#"{"priority": 77, "expected_version": 1}"#),
            &[bearer()],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{updated:#}");
    assert_eq!(updated["changed_fields"], json!(["priority"]));
    assert_eq!(updated["entity"]["version"], 2);
    assert_eq!(updated["entity"]["priority"], 77);
    assert_eq!(updated["entity"]["created_by"], "api");
    assert_eq!(updated["file"], handlers.display().to_string());
    let after = entities_in(&handlers);
    assert_eq!(after.len(), before.len());
    for (old, new) in before.iter().zip(&after) {
        let mut expected = old.clone();
        if old.entity_id == target {
            expected.priority = assay_core::entity::Priority::new(77).unwrap();
        }
        assert_eq!(*new, expected);
    }
    assert!(
        std::fs::read_to_string(&handlers)
            .unwrap()
            .starts_with("# State handlers")
    );
    let now: Vec<_> = kb_files(&server)
        .into_iter()
        .filter(|(p, _)| !p.ends_with("handlers.yaml"))
        .collect();
    assert_eq!(now, others);

    // Clearing an optional field with null, through If-Match.
    let (status, cleared) = server
        .request_with(
            Method::PUT,
            &format!("/admin/kb/entities/{target}"),
            Some(r#"{"keywords": null}"#),
            &[bearer(), ("if-match", "\"2\"".to_owned())],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{cleared:#}");
    assert!(cleared["entity"].get("keywords").is_none_or(Value::is_null));
    assert_eq!(
        entities_in(&handlers)
            .iter()
            .find(|e| e.entity_id == target)
            .unwrap()
            .keywords,
        None
    );
    // The same values again: no new version.
    let (status, same) = server
        .request_with(
            Method::PUT,
            &format!("/admin/kb/entities/{target}"),
            Some(r#"{"priority": 77, "expected_version": 3}"#),
            &[bearer()],
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(same["changed"], false);
    assert_eq!(same["unchanged_because"], "already_as_asked");

    let (status, history) = server
        .get(&format!("/admin/kb/entities/{target}/versions"))
        .await;
    assert_eq!(status, StatusCode::OK);
    let versions = history["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 3);
    assert_eq!(versions[0]["version"], 1);
    assert_eq!(versions[0]["is_current"], false);
    assert_eq!(versions[1]["changed_fields"], json!(["priority"]));
    assert_eq!(versions[1]["entity"]["priority"], 77);
    assert_eq!(versions[2]["changed_fields"], json!(["keywords"]));
    assert_eq!(versions[2]["is_current"], true);
    assert_eq!(versions[2]["previous_version_id"], versions[1]["id"]);

    // The files and the store agree: a fresh import changes nothing.
    let project = assay_project::project::Project::load(&server.root).unwrap();
    let store = assay_project::engine::open_store(&project.settings).unwrap();
    let report = assay_project::engine::import_kb(&*store, &project).unwrap();
    assert!(
        report.created.is_empty() && report.updated.is_empty() && report.deactivated.is_empty(),
        "{report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_version_is_a_409_and_writes_nothing() {
    let server = admin();
    let uri = "/admin/kb/entities/gray_rock";
    let (status, first) = server
        .request_with(
            Method::PUT,
            uri,
            Some(r#"{"title": "Gray rock, by editor A", "expected_version": 1}"#),
            &[bearer()],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{first:#}");
    let files = kb_files(&server);
    // Editor B loaded version 1 too.
    let got = server
        .request_with(
            Method::PUT,
            uri,
            Some(r#"{"title": "Gray rock, by editor B", "expected_version": 1}"#),
            &[bearer()],
        )
        .await;
    assert_error(&got, StatusCode::CONFLICT, "is at version 2, not version 1");
    assert_eq!(got.1["code"], "stale_version");
    let got = server
        .request_with(
            Method::PUT,
            uri,
            Some(r#"{"title": "B"}"#),
            &[bearer(), ("if-match", "\"1\"".to_owned())],
        )
        .await;
    assert_eq!(got.1["code"], "stale_version", "{:#}", got.1);
    // A delete made from an old version is refused the same way.
    let got = server
        .request_with(
            Method::DELETE,
            uri,
            None,
            &[bearer(), ("if-match", "\"1\"".to_owned())],
        )
        .await;
    assert_error(&got, StatusCode::CONFLICT, "not version 1");
    assert_eq!(kb_files(&server), files);
    let (_, e) = server.get(uri).await;
    assert_eq!(e["title"], "Gray rock, by editor A");
    assert_eq!(e["version"], 2);

    // An update must say which version it edits.
    let got = server
        .request_with(Method::PUT, uri, Some(r#"{"title": "C"}"#), &[bearer()])
        .await;
    assert_error(
        &got,
        StatusCode::PRECONDITION_REQUIRED,
        "carries the version it edits",
    );
    let got = server
        .request_with(
            Method::PUT,
            uri,
            Some(r#"{"title": "C", "expected_version": 2}"#),
            &[bearer(), ("if-match", "\"3\"".to_owned())],
        )
        .await;
    assert_error(&got, StatusCode::BAD_REQUEST, "disagree");
    assert_eq!(kb_files(&server), files);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_the_field_and_nothing_is_written() {
    let server = admin();
    let before = kb_files(&server);
    let put = "/admin/kb/entities/handler_returning_user";
    let post = "/admin/kb/entities";
    /// Method, path, body, status, a part of the message, the field named.
    type Case<'a> = (
        Method,
        &'a str,
        &'a str,
        StatusCode,
        &'a str,
        Option<&'a str>,
    );
    let cases: [Case<'_>; 14] = [
        (
            Method::PUT,
            put,
            "{",
            StatusCode::BAD_REQUEST,
            "invalid JSON body",
            None,
        ),
        (
            Method::PUT,
            put,
            "",
            StatusCode::BAD_REQUEST,
            "needs a JSON object",
            None,
        ),
        (
            Method::PUT,
            put,
            "[1, 2]",
            StatusCode::BAD_REQUEST,
            "not an array",
            None,
        ),
        (
            Method::POST,
            post,
            "{\"entity_id\": ",
            StatusCode::BAD_REQUEST,
            "invalid JSON body",
            None,
        ),
        (
            Method::PUT,
            put,
            r#"{"priorty": 77, "expected_version": 1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown field `priorty`",
            Some("priorty"),
        ),
        (
            Method::PUT,
            put,
            r#"{"priority": 101, "expected_version": 1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "priority 101 is out of range",
            Some("priority"),
        ),
        (
            Method::PUT,
            put,
            r#"{"priority": "high", "expected_version": 1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid type",
            Some("priority"),
        ),
        (
            Method::PUT,
            put,
            r#"{"title": "", "expected_version": 1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "title is empty",
            Some("title"),
        ),
        (
            Method::PUT,
            put,
            r#"{"title": null, "expected_version": 1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "cannot be cleared",
            Some("title"),
        ),
        (
            Method::PUT,
            put,
            r#"{"load_mode": "SOMETIMES", "expected_version": 1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown variant `SOMETIMES`",
            Some("load_mode"),
        ),
        (
            Method::PUT,
            put,
            r#"{"state_conditions": {"days": {"$gtee": 7}}, "expected_version": 1}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown operator `$gtee`",
            Some("state_conditions"),
        ),
        (
            Method::POST,
            post,
            r#"{"entity_id": "x", "entity_type": "FACT", "title": "X"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown variant `FACT`",
            Some("entity_type"),
        ),
        (
            Method::POST,
            post,
            r#"{"entity_id": "../escape", "entity_type": "KNOWLEDGE", "title": "X"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "entity_id `../escape`: must not start with `.`",
            Some("entity_id"),
        ),
        (
            Method::POST,
            post,
            r#"{"entity_id": "x", "entity_type": "KNOWLEDGE", "title": "X", "colour": "red"}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown field `colour`",
            Some("colour"),
        ),
    ];
    for (method, uri, body, status, needle, field) in cases {
        let got = server
            .request_with(method.clone(), uri, Some(body), &[bearer()])
            .await;
        assert_error(&got, status, needle);
        assert_eq!(got.1["field"].as_str(), field, "{body}: {:#}", got.1);
    }
    // Ids too long to name a file (issue 22: these were a 500 "File name too long"), and ids
    // with characters outside the rule: a 422 naming the field, nothing written.
    for (id, needle) in [
        ("x".repeat(300), "300 bytes long; ids are at most 128 bytes"),
        ("é".repeat(126), "252 bytes long; ids are at most 128 bytes"),
        ("a b".to_owned(), "' ' is not allowed"),
        ("a/b".to_owned(), "'/' is not allowed"),
    ] {
        let body = serde_json::json!({"entity_id": id, "entity_type": "KNOWLEDGE", "title": "X"});
        let got = server
            .request_with(Method::POST, post, Some(&body.to_string()), &[bearer()])
            .await;
        assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, needle);
        assert_eq!(got.1["field"], "entity_id", "{:#}", got.1);
    }
    // A taken id (active, in a file) is a 409 naming the file.
    let got = server
        .request_with(
            Method::POST,
            post,
            Some(
                r#"{"entity_id": "handler_crisis", "entity_type": "HANDLER", "title": "Another"}"#,
            ),
            &[bearer()],
        )
        .await;
    assert_error(
        &got,
        StatusCode::CONFLICT,
        "entity `handler_crisis` already exists",
    );
    assert!(got.1["error"].as_str().unwrap().contains("handlers.yaml"));
    assert_eq!(got.1["code"], "already_exists");
    // Unknown ids.
    let got = server
        .request_with(
            Method::PUT,
            "/admin/kb/entities/no_such_entity",
            Some(r#"{"priority": 1, "expected_version": 1}"#),
            &[bearer()],
        )
        .await;
    assert_error(&got, StatusCode::NOT_FOUND, "no entity `no_such_entity`");
    let got = server
        .request_with(
            Method::DELETE,
            "/admin/kb/entities/no_such_entity",
            None,
            &[bearer()],
        )
        .await;
    assert_error(&got, StatusCode::NOT_FOUND, "no entity");
    assert_eq!(kb_files(&server), before);
    let (_, history) = server
        .get("/admin/kb/entities/handler_returning_user/versions")
        .await;
    assert_eq!(history["versions"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_deactivates_and_keeps_the_entity() {
    let server = admin();
    let active = file_entities(&server)
        .iter()
        .filter(|e| e.is_active)
        .count();
    let uri = "/admin/kb/entities/gray_rock";
    let (status, gone) = server
        .request_with(Method::DELETE, uri, None, &[bearer()])
        .await;
    assert_eq!(status, StatusCode::OK, "{gone:#}");
    assert_eq!(gone["changed_fields"], json!(["is_active"]));
    assert_eq!(gone["entity"]["is_active"], false);
    assert_eq!(gone["entity"]["version"], 2);
    assert!(
        entities_in(&server.root.join("kb/knowledge.yaml"))
            .iter()
            .any(|e| e.entity_id == "gray_rock" && !e.is_active)
    );
    let (_, page) = server.get("/admin/kb/entities?page_size=100").await;
    assert_eq!(page["total"], active - 1);
    assert!(!ids(&page).contains(&"gray_rock".to_owned()));
    let (_, inactive) = server.get("/admin/kb/entities?is_active=false").await;
    assert_eq!(ids(&inactive), ["gray_rock"]);
    let (status, e) = server.get(uri).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(e["is_active"], false);

    let (status, again) = server
        .request_with(Method::DELETE, uri, None, &[bearer()])
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["changed"], false);
    assert_eq!(again["unchanged_because"], "already_inactive");
    // Reactivating is an update.
    let (status, back) = server
        .request_with(
            Method::PUT,
            uri,
            Some(r#"{"is_active": true, "expected_version": 2}"#),
            &[bearer()],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{back:#}");
    assert_eq!(back["entity"]["version"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_regenerate_and_stats_count_them() {
    let server = admin();
    let active = file_entities(&server)
        .iter()
        .filter(|e| e.is_active)
        .count();
    let (status, stats) = server.get("/admin/kb/stats").await;
    assert_eq!(status, StatusCode::OK, "{stats:#}");
    assert_eq!(stats["active"], active);
    assert_eq!(stats["embeddings"]["model"], "builtin/hashed-ngrams");
    assert_eq!(stats["embeddings"]["missing"], active);

    let (status, all) = server
        .request_with(
            Method::POST,
            "/admin/kb/regenerate-all-embeddings",
            None,
            &[bearer()],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{all:#}");
    assert_eq!(all["model"], "builtin/hashed-ngrams");
    assert_eq!(all["embedded"].as_array().unwrap().len(), active);
    let (_, stats) = server.get("/admin/kb/stats").await;
    assert_eq!(stats["embeddings"]["fresh"], active);
    assert_eq!(stats["embeddings"]["missing"], 0);

    let (status, one) = server
        .request_with(
            Method::POST,
            "/admin/kb/entities/handler_crisis/regenerate-embedding",
            None,
            &[bearer()],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{one:#}");
    assert_eq!(one["embedded"], json!(["handler_crisis"]));
    let (_, e) = server.get("/admin/kb/entities/handler_crisis").await;
    assert_eq!(e["embedding_status"]["status"], "fresh");
    assert_eq!(e["embedding_model"], "builtin/hashed-ngrams");

    let got = server
        .request_with(
            Method::POST,
            "/admin/kb/entities/no_such_entity/regenerate-embedding",
            None,
            &[bearer()],
        )
        .await;
    assert_error(&got, StatusCode::NOT_FOUND, "no entity `no_such_entity`");
    server
        .request_with(
            Method::DELETE,
            "/admin/kb/entities/gray_rock",
            None,
            &[bearer()],
        )
        .await;
    let got = server
        .request_with(
            Method::POST,
            "/admin/kb/entities/gray_rock/regenerate-embedding",
            None,
            &[bearer()],
        )
        .await;
    assert_error(&got, StatusCode::CONFLICT, "inactive");
    let (_, stats) = server.get("/admin/kb/stats").await;
    assert_eq!(stats["inactive"], 1);
    assert!(stats["versions"].as_u64().unwrap() > stats["entities"].as_u64().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieval_test_shows_every_stage_and_every_drop() {
    let server = Server::example();
    let (status, r) = server
        .get("/admin/kb/retrieval-test?query=he%20keeps%20texting%20me%20at%20midnight%20and%20I%20feel%20unsafe&top_k=2")
        .await;
    assert_eq!(status, StatusCode::OK, "{r:#}");
    assert_eq!(r["audience_type"], "PARENT");
    assert_eq!(r["top_k"], 2);
    assert_eq!(r["embedder"], "builtin/hashed-ngrams");
    let entities = r["entities"].as_array().unwrap();
    assert!(!entities.is_empty(), "{r:#}");
    for e in entities {
        for key in ["entity_id", "stage", "similarity", "final_score", "tokens"] {
            assert!(e.get(key).is_some(), "{key}: {e:#}");
        }
    }
    let semantic = entities.iter().filter(|e| e["stage"] == "semantic").count();
    assert!(semantic <= 2, "{r:#}");
    let stages: Vec<&str> = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert!(
        stages.contains(&"always") && stages.contains(&"semantic"),
        "{stages:?}"
    );
    let semantic_candidates = r["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "semantic")
        .unwrap()["candidates"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!semantic_candidates.is_empty(), "{r:#}");
    assert!(semantic_candidates.iter().all(|c| c[1].is_number()));
    // Candidates beyond top_k are dropped, each with its reason and score.
    let dropped = r["dropped"].as_array().unwrap();
    assert!(
        dropped
            .iter()
            .any(|d| d["reason"] == "top_k" && d["similarity"].is_number()),
        "{r:#}"
    );
    for d in dropped {
        assert!(d["reason"].is_string() && d["stage"].is_string(), "{d:#}");
    }
    assert!(r["tokens_used"].as_u64().unwrap() <= r["token_budget"].as_u64().unwrap());

    let (_, default_k) = server
        .get("/admin/kb/retrieval-test?query=pickup%20late")
        .await;
    assert_eq!(default_k["top_k"], 5);
    for (query, needle) in [
        ("", "`query` is required"),
        ("query=%20", "`query` is required"),
        ("query=x&top_k=0", "`top_k`: 0 is out of range"),
        ("query=x&top_k=51", "`top_k`: 51 is out of range (1 to 50)"),
        ("query=x&k=3", "unknown query parameter `k`"),
    ] {
        let got = server
            .get(&format!("/admin/kb/retrieval-test?{query}"))
            .await;
        assert_error(&got, StatusCode::BAD_REQUEST, needle);
    }
}

/// Issue 20: the admin API's retrieval test takes the user's state, as the web UI's does, so
/// STATE entities can be tried; a state that is not a JSON object is a 400 naming the parameter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieval_test_takes_a_user_state() {
    let server = Server::example();
    let state_ids = |r: &serde_json::Value| -> Vec<String> {
        r["stages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stage"] == "state")
            .unwrap()["candidates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c[0].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, plain) = server
        .get("/admin/kb/retrieval-test?query=hello%20again")
        .await;
    assert_eq!(status, StatusCode::OK, "{plain:#}");
    assert!(
        !state_ids(&plain).contains(&"handler_returning_user".to_owned()),
        "{plain:#}"
    );
    assert_eq!(plain["user_state"], serde_json::json!({}));
    assert_eq!(plain["search"]["kind"], "exact", "{plain:#}");

    // {"is_first_conversation": false, "days_since_last": 9}, URL-encoded.
    let state = "%7B%22is_first_conversation%22%3A%20false%2C%20%22days_since_last%22%3A%209%7D";
    let (status, r) = server
        .get(&format!(
            "/admin/kb/retrieval-test?query=hello%20again&user_state={state}"
        ))
        .await;
    assert_eq!(status, StatusCode::OK, "{r:#}");
    assert_eq!(state_ids(&r), ["handler_returning_user"], "{r:#}");
    assert!(
        r["entities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["entity_id"] == "handler_returning_user" && e["stage"] == "state"),
        "{r:#}"
    );
    assert_eq!(r["user_state"]["days_since_last"], 9);

    for (param, needle) in [
        ("user_state=%5B1%5D", "`user_state`: expected a JSON object"),
        ("user_state=%7B", "`user_state`: not valid JSON"),
    ] {
        let got = server
            .get(&format!("/admin/kb/retrieval-test?query=x&{param}"))
            .await;
        assert_error(&got, StatusCode::BAD_REQUEST, needle);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_kb_file_is_a_422_naming_it() {
    let server = admin();
    server.append("kb/handlers.yaml", "\n- entity_id: [broken\n");
    let got = server.get("/admin/kb/entities").await;
    assert_error(&got, StatusCode::UNPROCESSABLE_ENTITY, "handlers.yaml");
    assert_eq!(got.1["code"], "invalid_project");
}
