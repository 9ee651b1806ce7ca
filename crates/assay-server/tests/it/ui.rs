//! The web UI through `app()`: every page renders, injected markup is inert everywhere it is
//! shown, writes need the CSRF token and the admin token, and an edit becomes version 2 with
//! its diff.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use tower::ServiceExt;

use crate::support::Server;

pub(crate) const TOKEN: &str = "s3cret-admin-token";
pub(crate) const INJECT: &str = "<script>alert('xss')</script><img src=x onerror=alert(1)>";

pub(crate) struct Page {
    pub(crate) status: StatusCode,
    pub(crate) headers: axum::http::HeaderMap,
    pub(crate) body: String,
}

pub(crate) async fn send(server: &Server, req: Request<Body>) -> Page {
    let response = server.app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Page {
        status,
        headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub(crate) async fn get(server: &Server, uri: &str, cookie: Option<&str>) -> Page {
    let mut req = Request::builder().uri(uri);
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    send(server, req.body(Body::empty()).unwrap()).await
}

fn form_body(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn enc(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

pub(crate) async fn post(
    server: &Server,
    uri: &str,
    fields: &[(&str, &str)],
    cookie: Option<&str>,
    origin: Option<&str>,
) -> Page {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::HOST, "127.0.0.1:8000")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    if let Some(o) = origin {
        req = req.header(header::ORIGIN, o);
    }
    send(server, req.body(Body::from(form_body(fields))).unwrap()).await
}

/// The CSRF token of a page's forms.
pub(crate) fn csrf(page: &str) -> String {
    let at = page
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    page[at..at + 64].to_owned()
}

/// Signs in and returns the cookie.
pub(crate) async fn sign_in(server: &Server) -> String {
    let login = get(server, "/ui/login", None).await;
    assert_eq!(login.status, StatusCode::OK);
    let token = csrf(&login.body);
    let r = post(
        server,
        "/ui/login",
        &[("csrf", &token), ("token", TOKEN)],
        None,
        Some("http://127.0.0.1:8000"),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let set = r.headers[header::SET_COOKIE].to_str().unwrap().to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    set.split(';').next().unwrap().to_owned()
}

pub(crate) fn assert_inert(page: &Page, what: &str) {
    assert!(
        !page.body.contains("<script>alert") && !page.body.contains("<img src=x"),
        "{what}: injected markup came through:\n{}",
        page.body
    );
}

#[tokio::test]
async fn every_page_renders_read_only_without_a_token() {
    let s = Server::example();
    for uri in [
        "/ui/entities",
        "/ui/entities?entity_type=HANDLER&load_mode=STATE&active=all&page=1",
        "/ui/entities/gray_rock",
        "/ui/entities/gray_rock/history",
        "/ui/entities/gray_rock/edit",
        "/ui/entities/new",
        "/ui/retrieval",
        "/ui/retrieval?query=he+keeps+texting+me+at+midnight&audience=PARENT&top_k=3",
        "/ui/bulk",
        "/ui/stats",
        "/ui/runs",
        "/ui/redteam",
        "/ui/login",
    ] {
        let p = get(&s, uri, None).await;
        assert_eq!(p.status, StatusCode::OK, "{uri}: {}", p.body);
        assert!(p.body.starts_with("<!doctype html>"), "{uri}");
        assert!(p.body.contains("read-only"), "{uri}: says it is read-only");
        let csp = p.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("script-src 'self'"), "{uri}: {csp}");
    }
    let login = get(&s, "/ui/login", None).await;
    assert!(login.body.contains("ASSAY_ADMIN_TOKEN"));
    let retrieval = get(
        &s,
        "/ui/retrieval?query=he+keeps+texting+me+at+midnight",
        None,
    )
    .await;
    for section in ["id=\"selected\"", "id=\"stages\"", "Dropped"] {
        assert!(retrieval.body.contains(section), "{section}");
    }
    let css = get(&s, "/ui/assets/ui.css", None).await;
    assert_eq!(css.status, StatusCode::OK);
    assert!(
        css.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
}

#[tokio::test]
async fn bad_requests_are_clear_html_errors() {
    let s = Server::example();
    let p = get(&s, "/ui/entities/no_such_entity", None).await;
    assert_eq!(p.status, StatusCode::NOT_FOUND);
    assert!(p.body.contains("no entity `no_such_entity`"), "{}", p.body);
    let p = get(&s, "/ui/entities?entity_type=NOPE", None).await;
    assert_eq!(p.status, StatusCode::BAD_REQUEST);
    assert!(p.body.contains("entity_type"));
    let p = get(&s, "/ui/entities?page_size=1000", None).await;
    assert_eq!(p.status, StatusCode::BAD_REQUEST);
    let p = get(&s, "/ui/retrieval?query=x&top_k=0", None).await;
    assert_eq!(p.status, StatusCode::BAD_REQUEST);
    let p = get(&s, "/ui/runs/..%2F..%2Fetc", None).await;
    assert_eq!(p.status, StatusCode::BAD_REQUEST, "{}", p.body);
}

#[tokio::test]
async fn writes_are_refused_without_the_token_or_the_csrf_token() {
    // Read-only: no ASSAY_ADMIN_TOKEN at all.
    let s = Server::example();
    let page = get(&s, "/ui/entities/gray_rock/edit", None).await;
    let token = csrf(&page.body);
    let before = std::fs::read_to_string(s.root.join("kb/knowledge.yaml")).unwrap();
    let fields = [
        ("csrf", token.as_str()),
        ("version", "1"),
        ("title", "changed"),
        ("load_mode", "SITUATION"),
        ("priority", "50"),
        ("audience_types", "PARENT"),
        ("is_active", "true"),
    ];
    let r = post(&s, "/ui/entities/gray_rock/update", &fields, None, None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert!(r.body.contains("read-only"));

    // With a token configured but not signed in.
    let s = Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)]);
    let page = get(&s, "/ui/entities/gray_rock/edit", None).await;
    let token = csrf(&page.body);
    let mut fields = fields;
    fields[0].1 = &token;
    let r = post(&s, "/ui/entities/gray_rock/update", &fields, None, None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);

    // Signed in, but without the CSRF token, with a wrong one, or from another origin.
    let cookie = sign_in(&s).await;
    let mut no_csrf = fields.to_vec();
    no_csrf.remove(0);
    let r = post(
        &s,
        "/ui/entities/gray_rock/update",
        &no_csrf,
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.body);
    assert!(r.body.contains("CSRF"));
    let mut wrong = fields.to_vec();
    let bad = "0".repeat(64);
    wrong[0].1 = &bad;
    let r = post(
        &s,
        "/ui/entities/gray_rock/update",
        &wrong,
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = post(
        &s,
        "/ui/entities/gray_rock/update",
        &fields,
        Some(&cookie),
        Some("https://evil.example"),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // A forged cookie is not a session.
    let r = post(
        &s,
        "/ui/entities/gray_rock/update",
        &fields,
        Some("assay_admin=forged"),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // A wrong admin token does not sign in.
    let login = get(&s, "/ui/login", None).await;
    let r = post(
        &s,
        "/ui/login",
        &[("csrf", &csrf(&login.body)), ("token", "guess")],
        None,
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert!(r.headers.get(header::SET_COOKIE).is_none());
    assert_eq!(
        std::fs::read_to_string(s.root.join("kb/knowledge.yaml")).unwrap(),
        before,
        "nothing was written"
    );
}

#[tokio::test]
async fn an_edit_is_version_two_with_a_field_diff_and_a_stale_edit_is_a_conflict() {
    let s = Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)]);
    let cookie = sign_in(&s).await;
    let page = get(&s, "/ui/entities/gray_rock/edit", Some(&cookie)).await;
    let token = csrf(&page.body);
    let fields = [
        ("csrf", token.as_str()),
        ("version", "1"),
        ("title", "Gray rock, revised"),
        ("load_mode", "SITUATION"),
        ("priority", "77"),
        ("audience_types", "PARENT"),
        ("is_active", "true"),
        ("concept_summary", "Stay boring and brief."),
    ];
    let r = post(
        &s,
        "/ui/entities/gray_rock/update",
        &fields,
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let history = get(&s, "/ui/entities/gray_rock/history", None).await;
    assert!(
        history.body.contains("Version 1 → version 2"),
        "{}",
        history.body
    );
    assert!(history.body.contains("Gray rock, revised"));
    assert!(history.body.contains("<th scope=\"row\">priority</th>"));
    let kb = std::fs::read_to_string(s.root.join("kb/knowledge.yaml")).unwrap();
    assert!(kb.contains("Gray rock, revised"), "written through to kb/");

    // The same form again carries version 1: someone else's save came first.
    let r = post(
        &s,
        "/ui/entities/gray_rock/update",
        &fields,
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.body.contains("version 2"), "{}", r.body);

    // An id too long for a file name (issue 22) is the form's error on the id, not a 500.
    let page = get(&s, "/ui/entities/new", Some(&cookie)).await;
    let token = csrf(&page.body);
    let long = "x".repeat(300);
    let r = post(
        &s,
        "/ui/entities/create",
        &[
            ("csrf", token.as_str()),
            ("entity_id", long.as_str()),
            ("entity_type", "KNOWLEDGE"),
            ("title", "Long"),
            ("load_mode", "SITUATION"),
            ("priority", "50"),
            ("audience_types", "PARENT"),
            ("is_active", "true"),
        ],
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
    assert!(r.body.contains("at most 128 bytes"), "{}", r.body);
    assert!(!s.root.join(format!("kb/{long}.yaml")).exists());
}

#[tokio::test]
async fn injected_markup_is_inert_on_every_page() {
    let s = Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)]);
    let cookie = sign_in(&s).await;
    let page = get(&s, "/ui/entities/new", Some(&cookie)).await;
    let token = csrf(&page.body);
    let title = format!("Title {INJECT}");
    let content = format!("Content {INJECT}");
    let audience = format!("PARENT, {INJECT}");
    let r = post(
        &s,
        "/ui/entities/create",
        &[
            ("csrf", &token),
            ("entity_id", "xss_probe"),
            ("entity_type", "KNOWLEDGE"),
            ("title", &title),
            ("load_mode", "SITUATION"),
            ("priority", "50"),
            ("audience_types", &audience),
            ("is_active", "true"),
            ("concept_summary", &content),
            ("keywords", &content),
        ],
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    // A second version, so the history shows a diff with the injected text on both sides.
    let edit = get(&s, "/ui/entities/xss_probe/edit", Some(&cookie)).await;
    assert_inert(&edit, "edit form");
    let r = post(
        &s,
        "/ui/entities/xss_probe/update",
        &[
            ("csrf", &token),
            ("version", "1"),
            ("title", &format!("{title} 2")),
            ("load_mode", "SITUATION"),
            ("priority", "50"),
            ("audience_types", &audience),
            ("is_active", "true"),
            ("concept_summary", &content),
        ],
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let q = enc(&format!("Title {INJECT}"));
    for uri in [
        "/ui/entities?active=all&page_size=100".to_owned(),
        format!("/ui/entities?q={}", enc(INJECT)),
        "/ui/entities/xss_probe".to_owned(),
        "/ui/entities/xss_probe/history".to_owned(),
        format!("/ui/retrieval?query={q}&audience={}", enc(INJECT)),
        format!("/ui/entities/{}", enc(INJECT)),
    ] {
        let p = get(&s, &uri, Some(&cookie)).await;
        assert_inert(&p, &uri);
        assert!(
            p.body.contains("&lt;script&gt;"),
            "{uri}: the text is shown, escaped"
        );
    }
    assert_inert(&get(&s, "/ui/stats", Some(&cookie)).await, "stats");
    // Re-rendered forms with a validation error echo the input escaped.
    let r = post(
        &s,
        "/ui/entities/create",
        &[
            ("csrf", &token),
            ("entity_id", "xss_probe_2"),
            ("entity_type", "KNOWLEDGE"),
            ("title", &title),
            ("load_mode", "SITUATION"),
            ("priority", "500"),
            ("audience_types", "PARENT"),
            ("state_conditions", INJECT),
        ],
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(r.body.contains("priority"));
    assert_inert(&r, "re-rendered form");
}

#[tokio::test]
async fn runs_dashboard_lists_shows_and_compares_runs_with_run_data_escaped() {
    let s = Server::example();
    let (status, body) = s.get("/cli/test-harness?save_results=true").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let results = s.root.join("results");
    let json = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let first = json
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_start_matches("results_")
        .to_owned();
    // A second run: the first with injected run data and one case made worse.
    let mut log: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let case = &mut log["semantic"]["results"][0];
    case["prompt"] = INJECT.into();
    case["name"] = INJECT.into();
    case["score"] = 10.into();
    case["candidates"][0]["entity_id"] = INJECT.into();
    log["warnings"] = serde_json::json!([INJECT]);
    log["project"] = INJECT.into();
    // A stale case (issue 28): shown with its entity's changed fields, escaped.
    let stale_id = log["state"]["results"][0]["test_id"].clone();
    log["stale"] = serde_json::json!([{
        "bank": "state",
        "test_id": stale_id,
        "entities": [{"entity_id": INJECT, "since_version": 1, "current_version": 2,
            "fields": ["keywords", INJECT], "reference": "provenance"}]
    }]);
    let second = "2099-01-01-0000";
    std::fs::write(
        results.join(format!("results_{second}.json")),
        serde_json::to_string(&log).unwrap(),
    )
    .unwrap();

    let list = get(&s, "/ui/runs", None).await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.body.contains(&first) && list.body.contains(second));
    let detail = get(&s, &format!("/ui/runs/{second}"), None).await;
    assert_eq!(detail.status, StatusCode::OK, "{}", detail.body);
    assert_inert(&detail, "run detail");
    assert!(detail.body.contains("<svg"), "charts");
    let stale = &detail.body[detail
        .body
        .find("<h2 id=\"stale\">Stale cases</h2>")
        .expect("stale")..];
    assert!(
        stale.contains("v1 → v2") && stale.contains("keywords, "),
        "{stale}"
    );
    assert!(
        stale.contains(&format!(
            "/ui/runs/{second}/cases/{}",
            stale_id.as_str().unwrap()
        )),
        "the stale case links to its page: {stale}"
    );
    let diff = get(&s, &format!("/ui/runs/{first}/diff/{second}"), None).await;
    assert_eq!(diff.status, StatusCode::OK, "{}", diff.body);
    assert_inert(&diff, "run diff");
    assert!(diff.body.contains("id=\"worse\""));
    let compare = get(&s, &format!("/ui/runs/compare?a={first}&b={second}"), None).await;
    assert_eq!(compare.status, StatusCode::SEE_OTHER);
}
