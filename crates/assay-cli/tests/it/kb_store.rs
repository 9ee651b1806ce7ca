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
    assay_harness::project::Project::load(&crate::support::example())
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

#[cfg(feature = "postgres")]
mod postgres {
    use super::{code, kb, redact_urls};
    use crate::support::Scratch;

    /// A new database on the test server (see crates/assay-kb/tests/it/backend.rs), and its URL.
    fn database() -> String {
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
}
