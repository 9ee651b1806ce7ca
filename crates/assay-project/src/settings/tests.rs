//! Tests of `settings` (kept apart: the module itself is long).

use super::*;

fn load(text: &str) -> Result<ProjectSettings, DataError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(SETTINGS_FILE), text).unwrap();
    ProjectSettings::load(dir.path())
}

#[test]
fn the_store_is_a_top_level_key() {
    let settings = load("store = \"postgres://assay@db/kb\"\n[gate]\nmin_score = 1\n").unwrap();
    assert_eq!(settings.store.as_deref(), Some("postgres://assay@db/kb"));
    let err = load("store = \" \"\n").unwrap_err().to_string();
    assert!(err.contains("store: must not be empty"), "{err}");
}

#[test]
fn defaults_match_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let s = ProjectSettings::load(dir.path()).unwrap();
    assert_eq!(s.weights, Weights::default());
    assert_eq!(s.min_health, Health::Poor);
    assert_eq!((s.semantic.candidates, s.semantic.top_k), (15, 6));
    assert_eq!(s.semantic.rate_limit_delay, 1.25);
    assert!(s.banks_dir.ends_with("test_banks"));
}

#[test]
fn unknown_keys_are_errors_with_a_location() {
    let e = load("[weights]\nsemantic = 0.5\nstat = 0.2\n").unwrap_err();
    assert_eq!(e.line, Some(3));
    assert!(e.message.contains("unknown field `stat`"), "{e}");
    assert!(e.to_string().contains("assay.toml:3:1: "), "{e}");
}

#[test]
fn the_verdict_pass_score_is_read_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let s = ProjectSettings::load(dir.path()).unwrap();
    assert_eq!(s.verdict.pass_score, None, "no pass score unless set");
    let s = load("[verdict]\npass_score = 80\n").unwrap();
    assert_eq!(s.verdict.pass_score, Some(80));
    assert_eq!(s.recorded["verdict.pass_score"], "80");
    let e = load("[verdict]\npass_score = 101\n").unwrap_err();
    assert!(
        e.message
            .starts_with("verdict.pass_score: must be between 0 and 100"),
        "{e}"
    );
    let e = load("[verdict]\npass_scor = 80\n").unwrap_err();
    assert!(e.message.contains("unknown field `pass_scor`"), "{e}");
}

#[test]
fn the_removed_junit_pass_score_names_what_replaced_it() {
    let e = load("[gate]\nmin_score = 1\n\n[report]\njunit_pass_score = 50\n").unwrap_err();
    assert_eq!(e.line, Some(5), "{e}");
    assert!(
        e.message
            .starts_with("report.junit_pass_score: `[report] junit_pass_score` was removed"),
        "{e}"
    );
    assert!(e.message.contains("`pass_score = N`"), "{e}");
    let e = load("[report]\n").unwrap_err();
    assert_eq!(e.line, Some(1), "{e}");
    assert!(e.message.contains("`[verdict] pass_score`"), "{e}");
}

#[test]
fn state_fields_are_typed_with_their_errors_located() {
    let s = load("[state.fields]\nage = \"integer\"\n").unwrap();
    assert_eq!(
        s.state.get("age"),
        Some(&assay_core::state_fields::FieldType::Integer)
    );
    let e = load("[state.fields]\nage = \"int\"\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
    assert!(e.message.contains("did you mean `integer`?"), "{e}");
    let e =
        load("[gate]\nmin_score = 1.0\n[state.fields]\nlast_rating = \"string\"\n").unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(
        e.message
            .contains("`last_rating` is a built-in field of type integer"),
        "{e}"
    );
    let e = load("[state]\nfeilds = {}\n").unwrap_err();
    assert!(e.message.contains("did you mean `fields`?"), "{e}");
}

#[test]
fn max_metric_drop_is_a_share() {
    let dir = tempfile::tempdir().unwrap();
    let s = ProjectSettings::load(dir.path()).unwrap();
    assert_eq!(s.regression.max_metric_drop, DEFAULT_MAX_METRIC_DROP);
    let s = load("[gate]\nmax_metric_drop = 0.25\n").unwrap();
    assert_eq!(s.regression.max_metric_drop, 0.25);
    for bad in ["1.5", "-0.1", "10"] {
        let e = load(&format!("[gate]\nmax_metric_drop = {bad}\n")).unwrap_err();
        assert!(
            e.message
                .starts_with("gate.max_metric_drop: must be a share"),
            "{e}"
        );
    }
}

#[test]
fn bad_values_are_errors() {
    assert!(
        load("[gate]\nmin_health = \"SO-SO\"\n")
            .unwrap_err()
            .message
            .contains("unknown health")
    );
    assert!(
        load("[weights]\nstate = -1\n")
            .unwrap_err()
            .message
            .contains("weights.state")
    );
    assert!(
        load("[semantic]\ntop_k = 20\n")
            .unwrap_err()
            .message
            .contains("top_k")
    );
}

#[test]
fn numbers_that_are_not_finite_are_bad_input() {
    for (text, key, line) in [
        (
            "[providers]\ntimeout_seconds = inf\n",
            "providers.timeout_seconds",
            2,
        ),
        ("[gate]\nmin_score = nan\n", "gate.min_score", 2),
        (
            "[retrieval]\npriority_weight = -inf\n",
            "retrieval.priority_weight",
            2,
        ),
    ] {
        let e = load(text).unwrap_err();
        assert!(
            e.message
                .starts_with(&format!("{key}: must be a finite number")),
            "{e}"
        );
        assert_eq!(e.line, Some(line), "{e}");
    }
    let e = load("[weights]\nsemantic = 1e308\nstate = 1e308\npattern = 1e308\n").unwrap_err();
    assert!(
        e.message.contains("add up to more than a number can hold"),
        "{e}"
    );
}

#[test]
fn shared_limits_are_checked() {
    let ok = load("[providers.shared_limits]\nkey = [\"openai/a\", \"openai/b\"]\n").unwrap();
    assert_eq!(ok.providers.shared_limits["key"], ["openai/a", "openai/b"]);
    for (text, message) in [
        (
            "[providers.shared_limits]\nkey = [\"openai/a\"]\n",
            "providers.shared_limits.key: a shared limit needs two models or more",
        ),
        (
            "[providers.shared_limits]\nkey = [\"openai/a\", \"gpt\"]\n",
            "providers.shared_limits.key: `gpt`: name the model as vendor/model",
        ),
        (
            "[providers.shared_limits]\nx = [\"openai/a\", \"openai/b\"]\ny = [\"openai/b\", \"openai/c\"]\n",
            "providers.shared_limits: `openai/b` is in two shared limits",
        ),
    ] {
        let e = load(text).unwrap_err();
        assert!(e.message.starts_with(message), "{text}: {e}");
    }
}

#[test]
fn search_settings_are_checked() {
    let s = load("").unwrap();
    assert_eq!(s.semantic.search, "auto");
    assert_eq!(s.semantic.index_min_entities, INDEX_MIN_ENTITIES);
    assert_eq!(s.semantic.ef_search, DEFAULT_EF_SEARCH);
    let s = load("[semantic]\nsearch = \"index\"\nef_search = 64\n[retrieval]\nmode = \"dense\"\n")
        .unwrap();
    assert_eq!(
        (s.semantic.search.as_str(), s.semantic.ef_search),
        ("index", 64)
    );
    for (text, message) in [
        (
            "[semantic]\nsearch = \"hnsw\"\n",
            "semantic.search: unknown value `hnsw`",
        ),
        (
            "[semantic]\nef_search = 0\n",
            "semantic.ef_search: must be between 1 and 1000",
        ),
        (
            "[semantic]\nef_search = 5000\n",
            "semantic.ef_search: must be between 1 and 1000",
        ),
        (
            "[semantic]\nsearch = \"index\"\n",
            "semantic.search: `index` needs [retrieval] mode = \"dense\" (found `hybrid`)",
        ),
        (
            "[semantic]\nsearch = \"index\"\n[retrieval]\nmode = \"dense\"\nviews = \"multi\"\n",
            "semantic.search: `index` needs [retrieval] views = \"single\"",
        ),
    ] {
        let e = load(text).unwrap_err();
        assert!(e.message.starts_with(message), "{text}: {e}");
    }
    // A negative count is a type error, placed at the value (line 2, column 22) and
    // naming the key.
    let e = load("[semantic]\nindex_min_entities = -1\n").unwrap_err();
    assert!(
        e.to_string()
            .contains("assay.toml:2:22: semantic.index_min_entities: invalid value: integer `-1`"),
        "{e}"
    );
}

#[test]
fn paths_are_relative_to_the_project() {
    let s = load("[paths]\nkb = \"knowledge\"\n").unwrap();
    assert!(s.kb_dir.ends_with("knowledge"));
}

#[test]
fn batch_settings_are_read_and_bad_values_name_their_field() {
    let s = load("[providers]\nbatch = true\nbatch_poll_seconds = 5\n").unwrap();
    assert!(s.providers.batch);
    assert_eq!(s.providers.batch_poll_seconds, 5.0);
    assert_eq!(s.providers.batch_max_requests, 10_000);
    for (text, field) in [
        ("batch_poll_seconds = 0", "providers.batch_poll_seconds"),
        (
            "batch_window_seconds = -1",
            "providers.batch_window_seconds",
        ),
        ("batch_max_requests = 0", "providers.batch_max_requests"),
        ("batch_max_requests = 60000", "providers.batch_max_requests"),
    ] {
        let e = load(&format!("[providers]\n{text}\n")).unwrap_err();
        assert!(e.message.starts_with(field), "{text}: {e}");
    }
    let env = |on: &'static str| {
        move |name: &str| (name == crate::engine::ASSAY_BATCH).then(|| on.to_owned())
    };
    assert!(crate::engine::batch_mode(&s, &env("")).unwrap());
    assert!(!crate::engine::batch_mode(&s, &env("0")).unwrap());
    let off = load("").unwrap();
    assert!(crate::engine::batch_mode(&off, &env("true")).unwrap());
    let e = crate::engine::batch_mode(&off, &env("maybe")).unwrap_err();
    assert!(e.to_string().contains("ASSAY_BATCH"), "{e}");
}
