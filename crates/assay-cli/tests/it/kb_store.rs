//! Choosing the store (`store =` in assay.toml, `ASSAY_STORE`) and the dual-read check
//! `assay kb compare`, on SQLite and on a real PostgreSQL with pgvector (started by
//! `scripts/test-pg-up`; see crates/assay-kb/tests/it/backend.rs).

use crate::support::{Run, Scratch};

/// Runs `assay kb ARGS --project <scratch>` with `env`.
fn kb(p: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut full = vec!["kb"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--project", p.root.to_str().unwrap()]);
    crate::support::assay_env(&full, env)
}

fn code(run: &Run, expected: i32) {
    assert_eq!(run.code, expected, "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
}

/// The number of semantic cases of the example project.
fn example_semantic_cases() -> usize {
    assay_project::project::Project::load(&crate::support::example())
        .unwrap()
        .banks
        .semantic
        .len()
}

/// The summary with the temporary folder replaced.
fn redact(text: &str, p: &Scratch) -> String {
    text.replace(p.root.to_str().unwrap(), "<project>")
}

/// Replaces every `postgres://…` with a fixed text.
#[cfg(feature = "postgres")]
fn redact_urls(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("postgres://") {
        out.push_str(&rest[..at]);
        let end = rest[at..]
            .find(char::is_whitespace)
            .map_or(rest.len(), |e| at + e);
        out.push_str("postgres://<server>/<database>");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn two_copies_of_a_store_compare_identical_and_an_edit_shows() {
    let p = Scratch::example();
    code(&kb(&p, &["import"], &[]), 0);
    std::fs::copy(p.path(".assay/kb.db"), p.path("other.db")).unwrap();

    let same = kb(
        &p,
        &[
            "compare",
            "--store",
            ".assay/kb.db",
            "--store",
            "sqlite:other.db",
        ],
        &[],
    );
    code(&same, 0);
    let cases = example_semantic_cases();
    assert!(
        same.stdout
            .contains(&format!("compared {cases} messages retrieved")),
        "{same:?}"
    );
    assert!(
        same.stdout.contains(&format!("identical: {cases}\n")),
        "{same:?}"
    );

    // Deactivate an entity the bank retrieves in the copy only (ASSAY_STORE picks the copy).
    let update = kb(
        &p,
        &["deactivate", "gray_rock"],
        &[("ASSAY_STORE", "sqlite:other.db")],
    );
    code(&update, 0);
    let differ = kb(
        &p,
        &["compare", "--store", ".assay/kb.db", "--store", "other.db"],
        &[],
    );
    code(&differ, 1);
    assert!(differ.stdout.contains("only in A: gray_rock"), "{differ:?}");
    insta::assert_snapshot!("kb_compare_differ", redact(&differ.stdout, &p));

    let json = kb(
        &p,
        &[
            "compare",
            "--store",
            ".assay/kb.db",
            "--store",
            "other.db",
            "--json",
        ],
        &[],
    );
    code(&json, 1);
    let doc = json.json();
    assert_eq!(doc["total"], cases);
    let messages = doc["messages"].as_array().unwrap();
    assert_eq!(messages.len(), cases);
    assert!(
        messages
            .iter()
            .any(|m| m["outcome"] == "entities" && m["only_a"] == serde_json::json!(["gray_rock"]))
    );
}

#[test]
fn bad_compare_input_is_refused_with_exit_2() {
    let p = Scratch::example();
    let one = kb(&p, &["compare", "--store", ".assay/kb.db"], &[]);
    code(&one, 2);
    assert!(one.stderr.contains("give exactly two stores"), "{one:?}");
    p.write(
        "messages.jsonl",
        "{\"message\": \"hi\"}\n{\"mesage\": \"x\"}\n",
    );
    let file = p.path("messages.jsonl");
    let bad = kb(
        &p,
        &[
            "compare",
            "--store",
            "a.db",
            "--store",
            "b.db",
            "--messages",
            file.to_str().unwrap(),
        ],
        &[],
    );
    code(&bad, 2);
    assert!(bad.stderr.contains("messages.jsonl:2"), "{bad:?}");
    assert!(
        !p.path("a.db").exists() && !p.path("b.db").exists(),
        "nothing written"
    );
    let kind = kb(
        &p,
        &["compare", "--store", "mysql://h/db", "--store", "b.db"],
        &[],
    );
    code(&kind, 2);
    assert!(kind.stderr.contains("unknown kind of store"), "{kind:?}");
}

#[test]
fn a_password_in_the_store_url_is_refused_and_not_printed() {
    let p = Scratch::example();
    let run = kb(
        &p,
        &["list"],
        &[("ASSAY_STORE", "postgres://ann:hunter2@127.0.0.1:1/kb")],
    );
    code(&run, 2);
    assert!(
        run.stderr.contains("ASSAY_STORE: ") || run.stderr.contains("contains a password"),
        "{run:?}"
    );
    assert!(run.stderr.contains("PGPASSWORD"), "{run:?}");
    assert!(
        !run.stderr.contains("hunter2") && !run.stdout.contains("hunter2"),
        "{run:?}"
    );

    p.edit(
        "assay.toml",
        "",
        "store = \"postgres://ann:hunter2@127.0.0.1:1/kb\"\n",
    );
    let run = kb(&p, &["list"], &[]);
    code(&run, 2);
    assert!(run.stderr.contains("contains a password"), "{run:?}");
    assert!(!run.stderr.contains("hunter2"), "{run:?}");
}

/// A semantic case of a RunLog: `(test_id, candidates with their similarities, selections)`.
type SemanticResult = (String, Vec<(String, f64)>, Vec<String>);

/// Every semantic case of a RunLog, by test id.
fn semantic_results(log: &serde_json::Value) -> Vec<SemanticResult> {
    let mut out: Vec<_> = log["semantic"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let candidates = r["candidates"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| {
                    (
                        c["entity_id"].as_str().unwrap().to_owned(),
                        c["similarity"].as_f64().unwrap(),
                    )
                })
                .collect();
            let selections = r["selections"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect();
            (
                r["test_id"].as_str().unwrap().to_owned(),
                candidates,
                selections,
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The example's semantic bank, run as JSON (nothing saved).
fn semantic_run(p: &Scratch, env: &[(&str, &str)]) -> Run {
    p.assay_env(&["run", "--banks", "semantic", "--json", "--no-save"], env)
}

/// Issue 20: a run records which search its semantic stage used. SQLite has no vector index, so
/// `auto` (the default) searches exactly and says why; `index` is refused there, as bad input.
#[test]
fn a_run_records_its_search_and_sqlite_has_no_index() {
    let p = Scratch::example_dense();
    let run = semantic_run(&p, &[]);
    code(&run, 0);
    let log = run.json();
    assert_eq!(
        log["setup"]["semantic_search"], "exact",
        "{:#}",
        log["setup"]
    );
    let detail = log["setup"]["semantic_search_detail"].as_str().unwrap();
    assert!(
        detail.starts_with("[semantic] search = \"auto\": the store ")
            && detail.ends_with("has no vector index (only a PostgreSQL store has one)"),
        "{detail}"
    );

    p.edit(
        "assay.toml",
        "[retrieval]",
        "[semantic]\nsearch = \"index\"\n\n[retrieval]",
    );
    let refused = semantic_run(&p, &[]);
    code(&refused, 2);
    assert!(
        refused
            .stderr
            .contains("[semantic] search = \"index\": the store "),
        "{refused:?}"
    );
    assert!(
        refused.stderr.contains("has no vector index"),
        "{refused:?}"
    );

    // check-index has nothing to check on SQLite.
    let check = kb(&p, &["check-index"], &[]);
    code(&check, 2);
    assert!(
        check.stderr.contains("has no vector index to check"),
        "{check:?}"
    );
}

/// Issue 20: the search settings are checked when the project loads: a bad value is bad input
/// (exit 2) naming the field, and `index` with hybrid ranking is refused before anything runs.
#[test]
fn bad_search_settings_are_refused_naming_the_field() {
    for (settings, needle) in [
        (
            "[semantic]\nsearch = \"hnsw\"\n",
            "semantic.search: unknown value `hnsw` (expected auto, exact or index)",
        ),
        (
            "[semantic]\nef_search = 0\n",
            "semantic.ef_search: must be between 1 and 1000",
        ),
        (
            "[semantic]\nsearch = \"index\"\n",
            "semantic.search: `index` needs [retrieval] mode = \"dense\"",
        ),
    ] {
        let p = Scratch::example();
        let toml = p.read("assay.toml");
        p.write("assay.toml", &format!("{toml}\n{settings}"));
        let run = semantic_run(&p, &[]);
        code(&run, 2);
        assert!(run.stderr.contains("assay.toml"), "{run:?}");
        assert!(run.stderr.contains(needle), "{settings}: {run:?}");
        let validate = p.assay(&["validate"]);
        code(&validate, 2);
        assert!(validate.stderr.contains(needle), "{validate:?}");
    }
}

#[cfg(feature = "postgres")]
pub(crate) mod postgres {
    use super::{code, kb, redact_urls, semantic_results, semantic_run};
    use crate::support::Scratch;

    /// A new database on the test server (see crates/assay-kb/tests/it/backend.rs), and its URL.
    pub(crate) fn database() -> String {
        let file = crate::support::repo_path("target/test-pg/url");
        let admin = std::env::var("ASSAY_TEST_PG_URL").unwrap_or_else(|_| {
            std::fs::read_to_string(&file)
                .unwrap_or_else(|e| {
                    panic!(
                        "the PostgreSQL store tests need a server ({}: {e}): start one with \
                         `scripts/test-pg-up` (scripts/ci-setup does it)",
                        file.display()
                    )
                })
                .trim()
                .to_owned()
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let name = format!("assay_cli_{}", std::process::id())
            + &format!(
                "_{}",
                COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            );
        rt.block_on(async {
            let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "cannot reach the PostgreSQL test server at {admin}: {e}; start it with \
                         `scripts/test-pg-up`"
                    )
                });
            tokio::spawn(connection);
            client
                .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
                .await
                .unwrap();
            client
                .batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
        });
        let (base, _) = admin.rsplit_once('/').unwrap();
        format!("{base}/{name}")
    }

    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    #[test]
    fn postgres_selects_what_sqlite_selects_on_the_example() {
        let p = Scratch::example();
        let url = database();
        let pg = [("ASSAY_STORE", url.as_str())];
        code(&kb(&p, &["import"], &[]), 0);
        let imported = kb(&p, &["import"], &pg);
        code(&imported, 0);
        assert!(imported.stdout.contains("created"), "{imported:?}");

        let cases = super::example_semantic_cases();
        let same = kb(
            &p,
            &["compare", "--store", ".assay/kb.db", "--store", &url],
            &[],
        );
        code(&same, 0);
        assert!(
            same.stdout.contains(&format!("identical: {cases}\n")),
            "{same:?}"
        );
        let (server, database) = url
            .strip_prefix("postgres://")
            .and_then(|rest| rest.rsplit_once('/'))
            .unwrap();
        assert!(
            same.stdout
                .contains(&format!("  B: postgres://{server}/{database}\n")),
            "{same:?}"
        );

        // A database store is the source of truth: commands do not re-import kb/ over it, and
        // edits change the database alone.
        let files_before = p.read("kb/knowledge.yaml");
        code(&kb(&p, &["deactivate", "gray_rock"], &pg), 0);
        assert_eq!(
            p.read("kb/knowledge.yaml"),
            files_before,
            "kb/ files untouched"
        );
        let listed = kb(&p, &["show", "gray_rock", "--json"], &pg);
        code(&listed, 0);
        assert_eq!(
            listed.json()["is_active"],
            false,
            "not re-imported from kb/"
        );
        let history = kb(&p, &["history", "gray_rock", "--json"], &pg);
        code(&history, 0);
        assert_eq!(history.json().as_array().unwrap().len(), 2);

        let differ = kb(
            &p,
            &["compare", "--store", ".assay/kb.db", "--store", &url],
            &[],
        );
        code(&differ, 1);
        assert!(differ.stdout.contains("only in A: gray_rock"), "{differ:?}");
        assert!(
            redact_urls(&differ.stdout).contains("  B: postgres://<server>/<database>\n"),
            "{differ:?}"
        );

        // `assay kb import` brings the files back in, as a new version.
        code(&kb(&p, &["import"], &pg), 0);
        let again = kb(
            &p,
            &["compare", "--store", ".assay/kb.db", "--store", &url],
            &[],
        );
        code(&again, 0);
    }

    #[test]
    fn an_unreachable_server_is_an_infrastructure_error() {
        let p = Scratch::example();
        let run = kb(
            &p,
            &["list"],
            &[("ASSAY_STORE", "postgres://nobody@127.0.0.1:1/kb")],
        );
        code(&run, 3);
        assert!(
            run.stderr
                .contains("cannot connect to postgres://nobody@127.0.0.1:1/kb"),
            "{run:?}"
        );
    }

    /// Issue 20: with a PostgreSQL store, a run whose semantic stage takes its candidates from
    /// the HNSW index selects exactly what the exact path selects on the example: the same
    /// candidates with the same similarities, the same selections, case by case, as the exact
    /// search on the same database and on SQLite. `kb check-index` measures a recall of 1 there.
    #[test]
    fn hnsw_runs_select_what_exact_runs_select_on_the_example() {
        let p = Scratch::example_dense();
        let url = database();
        let pg = [("ASSAY_STORE", url.as_str())];
        code(&kb(&p, &["import"], &pg), 0);

        let sqlite = semantic_run(&p, &[]);
        code(&sqlite, 0);
        let sqlite = sqlite.json();
        assert_eq!(sqlite["setup"]["semantic_search"], "exact");

        let auto = semantic_run(&p, &pg);
        code(&auto, 0);
        let auto = auto.json();
        assert_eq!(
            auto["setup"]["semantic_search"], "exact",
            "{:#}",
            auto["setup"]
        );
        let detail = auto["setup"]["semantic_search_detail"].as_str().unwrap();
        assert!(
            detail.contains("active SITUATION entities, fewer than index_min_entities (100000)"),
            "{detail}"
        );

        let toml = p.read("assay.toml");
        p.write(
            "assay.toml",
            &format!("{toml}\n[semantic]\nsearch = \"index\"\n"),
        );
        let index = semantic_run(&p, &pg);
        code(&index, 0);
        let index = index.json();
        assert_eq!(
            index["setup"]["semantic_search"], "index",
            "{:#}",
            index["setup"]
        );
        let detail = index["setup"]["semantic_search_detail"].as_str().unwrap();
        assert!(
            detail.starts_with("index (PostgreSQL HNSW (pgvector ")
                && detail.contains("ef_search 400)")
                && detail.ends_with(" searches, 0 answered by the exact search"),
            "{detail}"
        );
        assert!(
            index["setup"]["semantic"]
                .as_str()
                .unwrap()
                .contains("candidates from index (PostgreSQL HNSW"),
            "{:#}",
            index["setup"]
        );

        let cases = super::example_semantic_cases();
        let want = semantic_results(&sqlite);
        assert_eq!(want.len(), cases);
        assert!(want.iter().all(|(_, c, _)| !c.is_empty()));
        assert_eq!(
            semantic_results(&auto),
            want,
            "exact on PostgreSQL = exact on SQLite"
        );
        assert_eq!(
            semantic_results(&index),
            want,
            "index on PostgreSQL = exact"
        );
        assert_eq!(
            index["semantic"]["average_score"],
            sqlite["semantic"]["average_score"]
        );

        // A warm-up searches the index once per case before the run: what it cost is in the
        // setup, the run's own searches are counted alone, and nothing it selects changes.
        let searched = |log: &serde_json::Value| {
            log["setup"]["semantic_search_detail"]
                .as_str()
                .unwrap()
                .rsplit("; ")
                .next()
                .unwrap()
                .to_owned()
        };
        let toml = p.read("assay.toml");
        p.write("assay.toml", &format!("{toml}warm_up = true\n"));
        let warmed = semantic_run(&p, &pg);
        code(&warmed, 0);
        let warmed = warmed.json();
        let cost = warmed["setup"]["semantic_warm_up"].as_str().unwrap();
        assert!(
            cost.starts_with(&format!(
                "{} searches through the index in ",
                super::example_semantic_cases()
            )) && cost.ends_with(" ms before the run"),
            "{cost}"
        );
        assert_eq!(searched(&warmed), searched(&index));
        assert_eq!(semantic_results(&warmed), semantic_results(&index));
        // Without an index there is nothing to warm, and the setup says so.
        p.edit("assay.toml", "search = \"index\"", "search = \"exact\"");
        let exact = semantic_run(&p, &pg);
        code(&exact, 0);
        assert_eq!(
            exact.json()["setup"]["semantic_warm_up"],
            "skipped: the search is exact, and only an index has pages to warm"
        );
        p.write("assay.toml", &toml);

        // The index's recall against the exact search, on the bank's prompts: all of it.
        let check = kb(&p, &["check-index", "--json"], &pg);
        code(&check, 0);
        let report = check.json();
        assert_eq!(report["k"], 15);
        assert_eq!(report["ef_search"], 400);
        assert_eq!(report["messages"], cases);
        assert_eq!(report["measured"], cases);
        assert_eq!(report["mean_recall"], 1.0);
        assert_eq!(report["exact_fallbacks"], 0);
        assert_eq!(report["min_query_recall"], 0.5);
        assert_eq!(report["below_floor"], serde_json::json!([]));
        assert_eq!(report["failed"], serde_json::json!([]));
        assert_eq!(report["queries"][0]["instead"], serde_json::json!([]));
        // The index is exact here: a floor of 1 holds every message to all of the exact answer,
        // and passes.
        let text = kb(
            &p,
            &["check-index", "--k", "5", "--min-query-recall", "1"],
            &pg,
        );
        code(&text, 0);
        assert!(
            text.stdout
                .contains("\npassed: the mean recall@5 reaches 0.98 and no message is below 1\n"),
            "{text:?}"
        );
        // The speed is printed as a ratio, never a rounded zero.
        assert!(!text.stdout.contains("(0.0x)"), "{text:?}");
        assert!(text.stdout.contains("×"), "{text:?}");
        assert!(
            text.stdout.starts_with("recall@5 of PostgreSQL HNSW"),
            "{text:?}"
        );
        assert!(
            text.stdout.contains(&format!(
                "mean recall@5: 1.0000 (at least 0.98), lowest 1.000, over {cases} messages"
            )),
            "{text:?}"
        );
    }

    /// Issue 20: `kb check-index` on a file of messages, and its verdict: a message whose
    /// audience has no entity is left out of the mean; a check that measured nothing, or whose
    /// mean is below --min-recall, fails (exit 1); bad options are bad input (exit 2).
    #[test]
    fn check_index_reads_messages_and_fails_without_a_measure() {
        let p = Scratch::example_dense();
        let url = database();
        let pg = [("ASSAY_STORE", url.as_str())];
        code(&kb(&p, &["import"], &pg), 0);
        p.write(
            "messages.jsonl",
            "{\"id\": \"a\", \"message\": \"he keeps texting me at midnight\"}\n\
             {\"id\": \"b\", \"message\": \"pickup was late again\", \"audience\": \"NOBODY\"}\n",
        );
        let file = p.path("messages.jsonl");
        let file = file.to_str().unwrap();
        let check = kb(&p, &["check-index", "--messages", file, "--json"], &pg);
        code(&check, 0);
        let report = check.json();
        assert_eq!(report["messages"], 2);
        assert_eq!(report["measured"], 1, "{report:#}");
        assert_eq!(report["queries"][0]["id"], "a");
        assert_eq!(report["queries"][0]["recall"], 1.0);
        assert_eq!(report["queries"][0]["exact"].as_array().unwrap().len(), 15);
        assert!(report["queries"][1].get("recall").is_none(), "{report:#}");

        p.write(
            "nobody.jsonl",
            "{\"message\": \"hello\", \"audience\": \"NOBODY\"}\n",
        );
        let nobody = p.path("nobody.jsonl");
        let none = kb(
            &p,
            &["check-index", "--messages", nobody.to_str().unwrap()],
            &pg,
        );
        code(&none, 1);
        assert!(
            none.stdout.contains("no message had entities to find"),
            "{none:?}"
        );
        assert!(
            none.stdout
                .contains("FAILED: no message was measured, so there is no mean recall"),
            "{none:?}"
        );

        // The in-process embedder is never cached: a replay needs nothing recorded.
        let replay = kb(
            &p,
            &["check-index", "--messages", file, "--cache", "replay"],
            &pg,
        );
        code(&replay, 0);

        for (args, needle) in [
            (
                ["--min-recall", "1.5"],
                "--min-recall: must be between 0 and 1",
            ),
            (
                ["--ef-search", "5000"],
                "--ef-search: must be between 1 and 1000",
            ),
            (["--k", "0"], "--k: must be at least 1"),
            (
                ["--min-query-recall", "1.5"],
                "--min-query-recall: must be between 0 and 1",
            ),
            (
                ["--cache", "sometimes"],
                "--cache: unknown cache mode `sometimes`",
            ),
        ] {
            let mut all = vec!["check-index", "--messages", file];
            all.extend(args);
            let bad = kb(&p, &all, &pg);
            code(&bad, 2);
            assert!(bad.stderr.contains(needle), "{bad:?}");
        }
    }

    /// Issue 32: `kb check-index` embeds through the call cache as `assay run` does: with a
    /// remote embedder, a replay with nothing recorded fails naming the cache, and a replay of a
    /// recorded check measures the same recall without a request.
    #[test]
    fn check_index_replays_its_embeddings_from_the_call_cache() {
        use crate::fake_openai::{FakeOpenAi, Faults};
        const KEY: (&str, &str) = ("OPENAI_API_KEY", "sk-test-0123456789abcdef");
        let p = Scratch::example_dense();
        let server = FakeOpenAi::start(Vec::new(), Faults::default());
        let toml = p.read("assay.toml");
        p.write(
            "assay.toml",
            &format!(
                "{toml}\n[embedder]\nmodel = \"openai/text-embedding-3-small\"\nopenai_base_url = \"{0}\"\n\n[providers]\nopenai_base_url = \"{0}\"\n",
                server.base_url
            ),
        );
        let url = database();
        let env = [("ASSAY_STORE", url.as_str()), KEY];
        code(&kb(&p, &["import"], &env[..1]), 0);

        let missed = kb(&p, &["check-index", "--cache", "replay"], &env);
        code(&missed, 3);
        assert!(
            missed.stderr.contains("no recorded answer for this")
                && missed.stderr.contains("in replay mode"),
            "{missed:?}"
        );
        assert_eq!(server.requests(), 0, "replay made network calls");

        let recorded = kb(&p, &["check-index", "--json"], &env);
        code(&recorded, 0);
        let calls = server.requests();
        assert!(calls > 0);
        let replayed = kb(&p, &["check-index", "--json", "--cache", "replay"], &env);
        code(&replayed, 0);
        assert_eq!(server.requests(), calls, "replay made network calls");
        let (recorded, replayed) = (recorded.json(), replayed.json());
        assert_eq!(replayed["embedder"], "openai/text-embedding-3-small");
        assert_eq!(replayed["measured"], super::example_semantic_cases());
        assert_eq!(replayed["mean_recall"], recorded["mean_recall"]);
        assert_eq!(replayed["queries"], recorded["queries"]);
    }

    /// Issue 20: with the database as the source of truth, the entities the banks name are
    /// checked against the store's knowledge base, not the kb/ files: an entity made in the
    /// database alone is known, one in the files alone is not.
    #[test]
    fn entity_references_are_checked_against_the_database() {
        let p = Scratch::example_dense();
        let url = database();
        let pg = [("ASSAY_STORE", url.as_str())];
        code(&kb(&p, &["import"], &pg), 0);
        p.write(
            "db_only.yaml",
            "entity_id: db_only\nentity_type: KNOWLEDGE\ntitle: Made in the database\n",
        );
        let file = p.path("db_only.yaml");
        code(
            &kb(&p, &["create", "--file", file.to_str().unwrap()], &pg),
            0,
        );
        // A kb/ file gains an entity the database never imported.
        let knowledge = p.read("kb/knowledge.yaml");
        p.write(
            "kb/knowledge.yaml",
            &format!("{knowledge}\n- entity_id: files_only\n  entity_type: KNOWLEDGE\n  title: Only in the files\n"),
        );
        // A case names both.
        let bank = "test_banks/semantic/parent_test_bank.json";
        let mut doc = p.json(bank);
        doc["tests"][0]["expected_secondary"] = serde_json::json!(["db_only", "files_only"]);
        p.write_json(bank, &doc);

        // A name the source of truth lacks is a mistake in the tests: exit 2 before anything runs.
        let files = p.assay(&["validate"]);
        code(&files, 2);
        assert!(
            files
                .stderr
                .contains("an entity that the knowledge base does not have")
                && files.stderr.contains("unknown entity `db_only`"),
            "{files:?}"
        );
        assert!(!files.stderr.contains("`files_only`"), "{files:?}");

        let db = p.assay_env(&["validate"], &pg);
        code(&db, 2);
        assert!(!db.stderr.contains("`db_only`"), "{db:?}");
        assert!(
            db.stderr
                .contains("an entity that the store's knowledge base does not have")
                && db.stderr.contains("unknown entity `files_only`"),
            "{db:?}"
        );

        let run = semantic_run(&p, &pg);
        code(&run, 2);
        assert!(
            run.stderr.contains("unknown entity `files_only`"),
            "{run:?}"
        );
        assert!(!run.stderr.contains("`db_only`"), "{run:?}");
        assert!(p.results().is_empty(), "nothing written");
    }
}
