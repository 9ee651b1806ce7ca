//! API keys never appear in errors, `Debug` output or logs.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assay_providers::{
    ApiKey, Embedder, EmbedderOptions, EmbedderSpec, InputKind, OpenAiEmbedder, ProviderErrorKind,
    VoyageEmbedder, build_embedder_with_env,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::support::{
    FakeServer, OPENAI_KEY, Reply, VOYAGE_KEY, openai_key, synthesize, texts, voyage_key,
};

/// A tracing subscriber that writes every span and event field, at every level, into a string.
#[derive(Clone, Default)]
struct Capture {
    log: Arc<Mutex<String>>,
    next_id: Arc<AtomicU64>,
}

struct Writer<'a>(&'a mut String);

impl Visit for Writer<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        span.record(&mut Writer(&mut self.log.lock().unwrap()));
        Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, values: &Record<'_>) {
        values.record(&mut Writer(&mut self.log.lock().unwrap()));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut log = self.log.lock().unwrap();
        let _ = write!(
            log,
            "[{} {}] ",
            event.metadata().level(),
            event.metadata().target()
        );
        event.record(&mut Writer(&mut log));
        log.push('\n');
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

fn assert_no_key(text: &str) {
    for key in [VOYAGE_KEY, OPENAI_KEY] {
        assert!(!text.contains(key), "a key leaked into: {text}");
        assert!(
            !text.contains(&key[3..]),
            "part of a key leaked into: {text}"
        );
    }
}

#[test]
fn missing_keys_name_the_variable() {
    let err = build_embedder_with_env(
        &"voyage/voyage-2".parse().unwrap(),
        &EmbedderOptions::default(),
        &|_| None,
    )
    .unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ProviderErrorKind::Auth {
                env_var: "VOYAGE_API_KEY"
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "voyage/voyage-2: missing API key: set the environment variable VOYAGE_API_KEY"
    );
}

#[test]
fn debug_output_of_keys_and_clients_hides_the_key() {
    let options = EmbedderOptions::default();
    let voyage = VoyageEmbedder::new("voyage-2", voyage_key(), &options).unwrap();
    let openai =
        OpenAiEmbedder::new("text-embedding-3-small", Some(openai_key()), &options).unwrap();
    let text = format!(
        "{:?} {:?} {voyage:?} {openai:?} {voyage:#?}",
        voyage_key(),
        openai_key()
    );
    assert_no_key(&text);
    assert!(text.contains("<redacted>"), "{text}");
}

#[tokio::test]
async fn keys_echoed_by_a_server_are_redacted_from_errors_and_logs() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());

    // A hostile or careless server that quotes the Authorization header back, in its error
    // message and in a malformed 200 answer.
    let server = FakeServer::start(|request| {
        let auth = request
            .header("authorization")
            .unwrap_or_default()
            .to_owned();
        if request.inputs().len() == 1 {
            Reply::raw(
                401,
                &format!(r#"{{"error": {{"message": "Incorrect API key provided: {auth}"}}}}"#),
            )
        } else {
            Reply::raw(200, &format!("not json: {auth}"))
        }
    })
    .await;
    let env = |name: &str| match name {
        "VOYAGE_API_KEY" => Some(VOYAGE_KEY.to_string()),
        "OPENAI_API_KEY" => Some(OPENAI_KEY.to_string()),
        _ => None,
    };
    let mut seen = String::new();
    for name in ["voyage/voyage-2", "openai/text-embedding-3-small"] {
        let spec: EmbedderSpec = name.parse().unwrap();
        let embedder = build_embedder_with_env(&spec, &server.options(), &env).unwrap();
        for n in [1, 2] {
            let err = embedder
                .embed(&texts(n), InputKind::Query)
                .await
                .unwrap_err();
            let _ = write!(seen, "{err} {err:?} ");
        }
    }
    assert!(
        seen.contains("Incorrect API key provided: Bearer <redacted>"),
        "{seen}"
    );
    assert!(seen.contains("not json: Bearer <redacted>"), "{seen}");
    assert_no_key(&seen);

    // The server did get the keys: the redaction is ours, not an accident of the fake.
    let auth: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.header("authorization").unwrap().to_owned())
        .collect();
    assert!(
        auth.contains(&format!("Bearer {VOYAGE_KEY}"))
            && auth.contains(&format!("Bearer {OPENAI_KEY}"))
    );

    let log = capture.log.lock().unwrap().clone();
    assert!(
        log.contains("voyage embeddings request") && log.contains("openai embeddings request"),
        "{log}"
    );
    assert_no_key(&log);
}

#[tokio::test]
async fn successful_calls_log_no_key() {
    let capture = Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());
    let server = FakeServer::start(synthesize).await;
    let options = EmbedderOptions {
        timeout: Duration::from_secs(5),
        ..server.options()
    };
    let voyage = VoyageEmbedder::new("voyage-2", ApiKey::new(VOYAGE_KEY), &options).unwrap();
    voyage.embed(&texts(3), InputKind::Document).await.unwrap();
    let log = capture.log.lock().unwrap().clone();
    assert!(log.contains("inputs=3"), "{log}");
    assert_no_key(&log);
}
