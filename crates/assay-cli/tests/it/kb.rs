//! `assay kb …`: the store kept in step with the kb/ files, and edits that write through to them.

use std::collections::BTreeMap;
use std::path::Path;

use assay_core::entity::{Entity, LoadMode};
use assay_kb::datafile::{self, Format};
use serde_json::Value;

use crate::support::{Run, Scratch, assay};

/// Runs `assay kb ARGS --project <scratch>`.
fn kb(p: &Scratch, args: &[&str]) -> Run {
    let mut full = vec!["kb"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--project", p.root.to_str().unwrap()]);
    assay(&full)
}

/// Runs `assay kb ARGS` and expects exit 0.
fn ok(p: &Scratch, args: &[&str]) -> Run {
    let run = kb(p, args);
    assert_eq!(run.code, 0, "{args:?}: {run:?}");
    run
}

/// Runs `assay kb ARGS` and expects exit 2 with an error naming `problem`.
fn rejected(p: &Scratch, args: &[&str], problem: &str) -> Run {
    let run = kb(p, args);
    assert_eq!(run.code, 2, "{args:?}: {run:?}");
    assert!(run.stderr.contains("error: "), "{run:?}");
    assert!(
        run.stderr.contains(problem),
        "expected {problem:?}: {run:?}"
    );
    assert!(!run.stderr.contains("panicked"), "{run:?}");
    run
}

/// The entities of one kb file, in order.
fn entities_in(path: &Path) -> Vec<Entity> {
    datafile::read(path, &mut |_| {}).unwrap()
}

/// Every entity of the scratch project's kb/ folder, as the files define them.
fn file_entities(p: &Scratch) -> Vec<Entity> {
    assay_kb::load_dir(&p.path("kb"))
        .unwrap()
        .kb
        .entities()
        .to_vec()
}

/// Every kb file's bytes, by name.
fn kb_files(p: &Scratch) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(p.path("kb"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn ids(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["entity_id"].as_str().unwrap().to_owned())
        .collect()
}

fn import_line(created: usize, updated: usize, unchanged: usize, deactivated: usize) -> String {
    format!(
        "imported: {created} created, {updated} updated, {unchanged} unchanged, {deactivated} deactivated"
    )
}

fn history(p: &Scratch, id: &str) -> Vec<Value> {
    ok(p, &["history", id, "--json"])
        .json()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn a_second_import_changes_nothing() {
    let p = Scratch::example();
    let n = file_entities(&p).len();
    let first = ok(&p, &["import"]);
    assert!(first.stdout.contains(&import_line(n, 0, 0, 0)), "{first:?}");
    assert!(first.stdout.contains("created: "), "{first:?}");
    // A summary, not one id per entity: eight ids, then how many more.
    let created = first
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("created: "))
        .unwrap();
    assert_eq!(created.matches(", ").count(), 8, "{created}");
    assert!(
        created.ends_with(&format!("… {} more (`assay kb list` has them all)", n - 8)),
        "{created}"
    );
    let second = ok(&p, &["import"]);
    assert_eq!(
        second.stdout.trim_end(),
        import_line(0, 0, n, 0),
        "{second:?}"
    );
}

#[test]
fn editing_a_file_then_importing_versions_the_entity() {
    let p = Scratch::example();
    ok(&p, &["import"]);
    p.edit("kb/handlers.yaml", "priority: 70", "priority: 71");
    let run = ok(&p, &["import"]);
    assert!(
        run.stdout.contains("updated: handler_returning_user"),
        "{run:?}"
    );
    let versions = history(&p, "handler_returning_user");
    assert_eq!(versions.len(), 2);
    assert_eq!(
        versions[1]["changed_fields"],
        serde_json::json!(["priority"])
    );
    assert_eq!(versions[1]["created_by"], "import");
}

#[test]
fn list_filters_match_the_files() {
    let p = Scratch::example();
    let entities = file_entities(&p);
    let active: Vec<&Entity> = entities.iter().filter(|e| e.is_active).collect();
    let all = ok(&p, &["list", "--json"]).json();
    assert_eq!(all.as_array().unwrap().len(), active.len());
    for mode in [LoadMode::Always, LoadMode::State, LoadMode::Situation] {
        let want = active.iter().filter(|e| e.load_mode == mode).count();
        assert!(want > 0, "the example has {mode} entities");
        // Case-insensitive.
        let name = mode.as_str().to_lowercase();
        let got = ok(&p, &["list", "--load-mode", &name, "--json"]).json();
        assert_eq!(got.as_array().unwrap().len(), want, "{mode}");
        assert!(
            got.as_array()
                .unwrap()
                .iter()
                .all(|e| e["load_mode"] == mode.as_str() && e["version"] == 1)
        );
    }
    let handlers = ok(&p, &["list", "--type", "Handler", "--json"]).json();
    let want: Vec<&str> = active
        .iter()
        .filter(|e| e.entity_type.as_str() == "HANDLER")
        .map(|e| e.entity_id.as_str())
        .collect();
    let mut got = ids(&handlers);
    got.sort();
    let mut want_sorted: Vec<String> = want.iter().map(|s| (*s).to_owned()).collect();
    want_sorted.sort();
    assert_eq!(got, want_sorted);

    let clinician = ok(&p, &["list", "--audience", "CLINICIAN", "--json"]).json();
    let want = active
        .iter()
        .filter(|e| e.has_audience("CLINICIAN"))
        .count();
    assert_eq!(clinician.as_array().unwrap().len(), want);
    assert!(ids(&clinician).contains(&"frank_clinician_persona".to_owned()));

    let text = ok(&p, &["list", "--load-mode", "ALWAYS"]);
    assert!(text.stdout.starts_with("entity_id"), "{text:?}");
    assert!(text.stdout.contains("load_mode"), "{text:?}");
    let always = active
        .iter()
        .filter(|e| e.load_mode == LoadMode::Always)
        .count();
    assert!(
        text.stdout.contains(&format!("{always} active entities")),
        "{text:?}"
    );
    assert!(
        ok(&p, &["list", "--inactive", "--json"])
            .json()
            .as_array()
            .unwrap()
            .is_empty()
    );
}

#[test]
fn list_rejects_unknown_filters() {
    let p = Scratch::example();
    let run = rejected(&p, &["list", "--load-mode", "sometimes"], "`sometimes`");
    assert!(run.stderr.contains("ALWAYS, STATE, SITUATION"), "{run:?}");
    let run = rejected(
        &p,
        &["list", "--type", "FACT"],
        "unknown entity type `FACT`",
    );
    assert!(run.stderr.contains("KNOWLEDGE"), "{run:?}");
}

#[test]
fn show_prints_every_field_and_the_version() {
    let p = Scratch::example();
    let doc = ok(&p, &["show", "handler_first_conversation", "--json"]).json();
    assert_eq!(doc["entity_id"], "handler_first_conversation");
    assert_eq!(doc["entity_type"], "HANDLER");
    assert_eq!(doc["load_mode"], "STATE");
    assert_eq!(doc["priority"], 85);
    assert_eq!(doc["version"], 1);
    assert_eq!(doc["previous_version_id"], Value::Null);
    assert_eq!(doc["created_by"], "import");
    assert_eq!(doc["retrieval_count"], 0);
    assert_eq!(doc["embedding"], Value::Null);
    for key in [
        "id",
        "created_at",
        "updated_at",
        "guidance_do",
        "state_conditions",
    ] {
        assert!(doc.get(key).is_some(), "no {key}: {doc}");
    }
    assert!(
        doc["source_file"]
            .as_str()
            .unwrap()
            .ends_with("handlers.yaml")
    );

    let text = ok(&p, &["show", "handler_first_conversation"]);
    for want in [
        "title",
        "First conversation welcome",
        "version",
        "retrieval_count",
    ] {
        assert!(text.stdout.contains(want), "{want}: {text:?}");
    }
    rejected(
        &p,
        &["show", "no_such_entity"],
        "no entity `no_such_entity`",
    );
}

const NEW_ENTITY: &str = "\
entity_id: knowledge_holiday_swaps
entity_type: KNOWLEDGE
title: Swapping holidays with the other parent
keywords: holiday swap, christmas, thanksgiving, trade weekends
load_mode: SITUATION
priority: 60
";

#[test]
fn create_writes_a_new_file_and_a_first_version() {
    let p = Scratch::example();
    let n = file_entities(&p).len();
    p.write("drafts/new.yaml", NEW_ENTITY);
    let run = ok(
        &p,
        &[
            "create",
            "--file",
            p.path("drafts/new.yaml").to_str().unwrap(),
            "--by",
            "alice",
        ],
    );
    assert!(
        run.stdout.contains("created `knowledge_holiday_swaps`"),
        "{run:?}"
    );
    let file = p.path("kb/knowledge_holiday_swaps.yaml");
    let written = entities_in(&file);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].entity_id, "knowledge_holiday_swaps");
    assert_eq!(written[0].priority.get(), 60);

    let import = ok(&p, &["import"]);
    assert_eq!(
        import.stdout.trim_end(),
        import_line(0, 0, n + 1, 0),
        "{import:?}"
    );
    let versions = history(&p, "knowledge_holiday_swaps");
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0]["version"], 1);
    assert_eq!(versions[0]["created_by"], "alice");
    assert!(
        ids(&ok(&p, &["list", "--json"]).json()).contains(&"knowledge_holiday_swaps".to_owned())
    );
}

#[test]
fn create_accepts_a_json_object() {
    let p = Scratch::example();
    p.write(
        "drafts/new.json",
        r#"{"entity_id": "script_pickup_delay", "entity_type": "SCRIPT", "title": "Running late to a pickup"}"#,
    );
    ok(
        &p,
        &[
            "create",
            "--file",
            p.path("drafts/new.json").to_str().unwrap(),
        ],
    );
    let doc = ok(&p, &["show", "script_pickup_delay", "--json"]).json();
    assert_eq!(doc["created_by"], "cli");
    assert!(p.path("kb/script_pickup_delay.yaml").is_file());
}

#[test]
fn create_refuses_an_existing_id() {
    let p = Scratch::example();
    p.write(
        "drafts/dup.yaml",
        "entity_id: handler_crisis\nentity_type: HANDLER\ntitle: Another crisis handler\n",
    );
    let before = kb_files(&p);
    let run = rejected(
        &p,
        &[
            "create",
            "--file",
            p.path("drafts/dup.yaml").to_str().unwrap(),
        ],
        "entity `handler_crisis` already exists",
    );
    assert!(run.stderr.contains("handlers.yaml"), "{run:?}");
    assert!(!p.path("kb/handler_crisis.yaml").exists());
    assert_eq!(kb_files(&p), before);
}

#[test]
fn create_rejects_an_invalid_entity() {
    let p = Scratch::example();
    p.write(
        "drafts/bad.yaml",
        "entity_id: knowledge_x\nentity_type: KNOWLEDGE\ntitle: \"  \"\n",
    );
    let before = kb_files(&p);
    rejected(
        &p,
        &[
            "create",
            "--file",
            p.path("drafts/bad.yaml").to_str().unwrap(),
        ],
        "title is empty",
    );
    p.write(
        "drafts/two.yaml",
        &format!("- {}\n- {}", "entity_id: a", "entity_id: b"),
    );
    rejected(
        &p,
        &[
            "create",
            "--file",
            p.path("drafts/two.yaml").to_str().unwrap(),
        ],
        "expected one entity",
    );
    // The id rule (issue 22): an id too long for a file name, in bytes, is refused up front.
    p.write(
        "drafts/long.yaml",
        &format!(
            "entity_id: {}\nentity_type: KNOWLEDGE\ntitle: Long\n",
            "é".repeat(126)
        ),
    );
    rejected(
        &p,
        &[
            "create",
            "--file",
            p.path("drafts/long.yaml").to_str().unwrap(),
        ],
        "252 bytes long; ids are at most 128 bytes",
    );
    assert_eq!(kb_files(&p), before);
}

#[test]
fn update_writes_through_to_the_source_file() {
    let p = Scratch::example();
    let path = p.path("kb/handlers.yaml");
    let before = entities_in(&path);
    let others_before = kb_files(&p);
    let target = "handler_returning_user";

    let run = ok(
        &p,
        &["update", target, "--set", "priority=77", "--by", "bob"],
    );
    assert!(run.stdout.contains("version 2"), "{run:?}");
    assert!(run.stdout.contains("changed: priority"), "{run:?}");

    // The file: this entity's priority, and nothing else.
    let after = entities_in(&path);
    assert_eq!(after.len(), before.len());
    for (old, new) in before.iter().zip(&after) {
        if old.entity_id == target {
            assert_eq!(new.priority.get(), 77);
            let mut expected = old.clone();
            expected.priority = new.priority;
            assert_eq!(*new, expected);
        } else {
            assert_eq!(new, old, "{} changed", old.entity_id);
        }
    }
    // The opening comment block is kept; other files are untouched.
    assert!(p.read("kb/handlers.yaml").starts_with("# State handlers"));
    let now = kb_files(&p);
    for (name, bytes) in &others_before {
        if name != "handlers.yaml" {
            assert_eq!(&now[name], bytes, "{name} changed");
        }
    }

    let versions = history(&p, target);
    assert_eq!(versions.len(), 2);
    assert_eq!(
        versions[1]["changed_fields"],
        serde_json::json!(["priority"])
    );
    assert_eq!(versions[1]["created_by"], "bob");
    assert_eq!(versions[1]["entity"]["priority"], 77);
    let text = ok(&p, &["history", target]);
    assert!(text.stdout.contains("priority"), "{text:?}");
    assert!(text.stdout.contains("(created)"), "{text:?}");

    let again = ok(&p, &["update", target, "--set", "priority=77"]);
    assert!(again.stdout.contains("no change"), "{again:?}");
    assert_eq!(history(&p, target).len(), 2);

    let n = file_entities(&p).len();
    let import = ok(&p, &["import"]);
    assert_eq!(
        import.stdout.trim_end(),
        import_line(0, 0, n, 0),
        "{import:?}"
    );
}

#[test]
fn update_clears_an_optional_field_given_null() {
    let p = Scratch::example();
    let path = p.path("kb/handlers.yaml");
    let target = "handler_returning_user";
    let old = entities_in(&path)
        .into_iter()
        .find(|e| e.entity_id == target)
        .unwrap();
    assert!(old.keywords.is_some() && old.concept_summary.is_some());

    // `--set FIELD=null` clears; a field left out stays.
    let run = ok(&p, &["update", target, "--set", "keywords=null"]);
    assert!(run.stdout.contains("changed: keywords"), "{run:?}");
    // And `null` in an update file.
    p.write(
        "drafts/clear.yaml",
        "concept_summary: null
",
    );
    let file = p.path("drafts/clear.yaml");
    let run = ok(&p, &["update", target, "--file", file.to_str().unwrap()]);
    assert!(run.stdout.contains("changed: concept_summary"), "{run:?}");

    let new = entities_in(&path)
        .into_iter()
        .find(|e| e.entity_id == target)
        .unwrap();
    assert_eq!(new.keywords, None);
    assert_eq!(new.concept_summary, None);
    assert_eq!(new.recognition, old.recognition);
    assert_eq!(new.title, old.title);
    let versions = history(&p, target);
    assert_eq!(versions.len(), 3);
    assert_eq!(
        versions[1]["entity"]["concept_summary"],
        old.concept_summary.unwrap().as_str()
    );
    assert_eq!(
        versions[2]["changed_fields"],
        serde_json::json!(["concept_summary"])
    );

    // A required field cannot be cleared: exit 2, a clear message, nothing written.
    let before = kb_files(&p);
    let run = rejected(
        &p,
        &["update", target, "--set", "title=null"],
        "cannot be cleared",
    );
    assert!(run.stderr.contains("--set `title=null`"), "{run:?}");
    p.write("drafts/title.yaml", "title: null\n");
    let file = p.path("drafts/title.yaml");
    let run = rejected(
        &p,
        &["update", target, "--file", file.to_str().unwrap()],
        "cannot be cleared",
    );
    assert!(run.stderr.contains("title.yaml"), "{run:?}");
    assert_eq!(kb_files(&p), before);
    assert_eq!(history(&p, target).len(), 3);
}

#[test]
fn update_from_a_file_keeps_json_files_json() {
    let p = Scratch::example();
    // scripts.yaml → scripts.json, pretty-printed with two spaces.
    let scripts: Value = serde_norway::from_str(&p.read("kb/scripts.yaml")).unwrap();
    std::fs::remove_file(p.path("kb/scripts.yaml")).unwrap();
    p.write(
        "kb/scripts.json",
        &serde_json::to_string_pretty(&scripts).unwrap(),
    );
    let before = entities_in(&p.path("kb/scripts.json"));
    let target = before[1].entity_id.clone();

    p.write(
        "drafts/update.yaml",
        "title: A new title\naudience_types: [PARENT, CLINICIAN]\n",
    );
    let run = ok(
        &p,
        &[
            "update",
            &target,
            "--file",
            p.path("drafts/update.yaml").to_str().unwrap(),
        ],
    );
    assert!(
        run.stdout.contains("changed: title, audience_types"),
        "{run:?}"
    );

    let text = p.read("kb/scripts.json");
    assert!(text.starts_with("[\n  {\n    \""), "{}", &text[..40]);
    let after = entities_in(&p.path("kb/scripts.json"));
    for (old, new) in before.iter().zip(&after) {
        if old.entity_id == target {
            assert_eq!(new.title, "A new title");
            assert_eq!(new.audience_types, ["PARENT", "CLINICIAN"]);
        } else {
            assert_eq!(new, old);
        }
    }
    let doc = ok(&p, &["show", &target, "--json"]).json();
    assert_eq!(doc["version"], 2);
    assert_eq!(doc["title"], "A new title");
}

#[test]
fn update_rejects_unknown_fields_and_bad_values() {
    let p = Scratch::example();
    let before = kb_files(&p);
    let target = "handler_returning_user";
    rejected(
        &p,
        &["update", target, "--set", "priorty=77"],
        "unknown field `priorty`",
    );
    rejected(
        &p,
        &["update", target, "--set", "priority=101"],
        "priority 101 is out of range",
    );
    rejected(&p, &["update", target, "--set", "title="], "title is empty");
    rejected(
        &p,
        &["update", target, "--set", "load_mode=SOMETIMES"],
        "unknown variant `SOMETIMES`",
    );
    rejected(
        &p,
        &["update", target, "--set", "priority"],
        "expected FIELD=VALUE",
    );
    p.write("drafts/bad.yaml", "priority: 60\ncolour: red\n");
    rejected(
        &p,
        &[
            "update",
            target,
            "--file",
            p.path("drafts/bad.yaml").to_str().unwrap(),
        ],
        "unknown field `colour`",
    );
    rejected(
        &p,
        &["update", "no_such_entity", "--set", "priority=1"],
        "no entity `no_such_entity`",
    );
    assert_eq!(kb_files(&p), before);
    assert_eq!(history(&p, target).len(), 1);
}

#[test]
fn deactivate_hides_the_entity_and_keeps_it() {
    let p = Scratch::example();
    let target = "gray_rock";
    let source = p.path("kb/knowledge.yaml");
    assert!(
        entities_in(&source).iter().any(|e| e.entity_id == target),
        "the example defines {target} in knowledge.yaml"
    );
    let run = ok(&p, &["deactivate", target, "--by", "carol"]);
    assert!(run.stdout.contains("deactivated"), "{run:?}");
    assert!(run.stdout.contains("version 2"), "{run:?}");

    assert!(!ids(&ok(&p, &["list", "--json"]).json()).contains(&target.to_owned()));
    let inactive = ok(&p, &["list", "--inactive", "--json"]).json();
    assert_eq!(ids(&inactive), [target]);
    assert_eq!(inactive[0]["is_active"], false);
    let all = ok(&p, &["list", "--all", "--json"]).json();
    assert_eq!(all.as_array().unwrap().len(), file_entities(&p).len());

    let versions = history(&p, target);
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0]["is_active"], true);
    assert_eq!(versions[1]["is_active"], false);
    assert_eq!(
        versions[1]["changed_fields"],
        serde_json::json!(["is_active"])
    );
    assert_eq!(versions[1]["created_by"], "carol");
    assert!(
        entities_in(&source)
            .iter()
            .any(|e| e.entity_id == target && !e.is_active)
    );

    let n = file_entities(&p).len();
    let import = ok(&p, &["import"]);
    assert_eq!(
        import.stdout.trim_end(),
        import_line(0, 0, n, 0),
        "{import:?}"
    );
    let again = ok(&p, &["deactivate", target]);
    assert!(again.stdout.contains("already inactive"), "{again:?}");

    // Reactivating is an update.
    ok(&p, &["update", target, "--set", "is_active=true"]);
    assert!(ids(&ok(&p, &["list", "--json"]).json()).contains(&target.to_owned()));
}

#[test]
fn export_round_trips() {
    let p = Scratch::example();
    let n = file_entities(&p).len();
    let json = ok(&p, &["export", "--format", "json"]).json();
    let entities: Vec<Entity> = serde_json::from_value(json).unwrap();
    assert_eq!(entities.len(), n);

    let out = p.path("export.yaml");
    let run = ok(&p, &["export", "-o", out.to_str().unwrap()]);
    assert!(
        run.stdout.contains(&format!("wrote {n} entities")),
        "{run:?}"
    );
    let yaml: Vec<Entity> = datafile::parse(
        &out,
        &std::fs::read_to_string(&out).unwrap(),
        Format::Yaml,
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(yaml, entities);

    rejected(&p, &["export", "--format", "xml"], "unknown format `xml`");
    let inside = p.path("kb/all.json");
    rejected(
        &p,
        &["export", "--format", "json", "-o", inside.to_str().unwrap()],
        "would define every entity twice",
    );
    assert!(!inside.exists());
}

#[test]
fn embed_then_stats() {
    let p = Scratch::example();
    let active = file_entities(&p).iter().filter(|e| e.is_active).count();
    let stats = ok(&p, &["stats", "--json"]).json();
    assert_eq!(stats["active"], active);
    assert_eq!(stats["embeddings"]["missing"], active);
    assert_eq!(stats["embeddings"]["model"], "builtin/hashed-ngrams");

    let first = ok(&p, &["embed"]);
    assert!(
        first.stdout.starts_with(&format!(
            "embedded {active} entities with builtin/hashed-ngrams (0 already fresh)"
        )),
        "{first:?}"
    );
    let second = ok(&p, &["embed"]);
    assert!(
        second.stdout.starts_with(&format!(
            "embedded 0 entities with builtin/hashed-ngrams ({active} already fresh)"
        )),
        "{second:?}"
    );
    let one = ok(&p, &["embed", "handler_crisis"]);
    assert!(one.stdout.starts_with("embedded 1 entity"), "{one:?}");

    let stats = ok(&p, &["stats", "--json"]).json();
    assert_eq!(stats["embeddings"]["fresh"], active);
    assert_eq!(stats["embeddings"]["missing"], 0);
    let by_mode: usize = stats["by_load_mode"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap() as usize)
        .sum();
    assert_eq!(by_mode, active);
    let text = ok(&p, &["stats"]);
    assert!(text.stdout.contains(&format!("{active} fresh")), "{text:?}");

    // An edit makes the embedding stale; the next embed picks up just that one.
    ok(
        &p,
        &[
            "update",
            "handler_crisis",
            "--set",
            "keywords=crisis, emergency",
        ],
    );
    let doc = ok(&p, &["show", "handler_crisis", "--json"]).json();
    assert_eq!(doc["embedding"]["staleness"]["status"], "text_changed");
    let third = ok(&p, &["embed"]);
    assert!(third.stdout.starts_with("embedded 1 entity"), "{third:?}");

    rejected(
        &p,
        &["embed", "no_such_entity"],
        "no entity `no_such_entity`",
    );
    rejected(&p, &["embed", "--embedder", "nope"], "nope");
}

#[test]
fn tune_reports_held_out_folds_and_writes_only_when_asked() {
    let p = Scratch::example_dense();
    let before = p.read("assay.toml");
    let run = p.assay(&["kb", "tune", "--folds", "4", "--json"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc = run.json();
    assert_eq!(doc["embedder"], "builtin/hashed-ngrams");
    assert_eq!(doc["folds"].as_array().unwrap().len(), 4);
    assert_eq!(doc["cases"], 94);
    // The current setting scores the bank as `assay run` does (76.2 for the example).
    assert!(
        (doc["all_before"].as_f64().unwrap() - 76.17).abs() < 0.01,
        "{doc}"
    );
    assert!(doc["all_after"].as_f64().unwrap() >= doc["all_before"].as_f64().unwrap());
    assert_eq!(doc["written"], false);
    assert_eq!(
        doc["accepted"].as_bool().unwrap(),
        doc["verdict"] == "accepted",
        "{doc}"
    );
    assert_eq!(
        p.read("assay.toml"),
        before,
        "nothing written without --write"
    );

    let run = p.assay(&["kb", "tune", "--write"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("held-out mean"), "{}", run.stdout);
    assert!(
        run.stdout.contains("verdict: accepted"),
        "written only when the held-out folds support it: {}",
        run.stdout
    );
    let after = p.read("assay.toml");
    assert!(after.starts_with(&before), "{after}");
    assert!(
        after.contains("[retrieval.tuned.\"builtin/hashed-ngrams\"]"),
        "{after}"
    );
    // The next run uses the tuned values.
    let run = p.assay(&["run", "--banks", "semantic", "--json", "--no-save"]);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    let setup = run.json()["setup"].to_string();
    assert!(setup.contains("threshold"), "{setup}");
}

/// The lines of `before` that `after` replaced: after the lines both start with and before
/// the lines both end with (0-based, end exclusive), and the lines that replace them.
fn replaced_lines<'a>(before: &'a str, after: &'a str) -> (std::ops::Range<usize>, Vec<&'a str>) {
    let (b, a): (Vec<&str>, Vec<&str>) = (
        before.split_inclusive('\n').collect(),
        after.split_inclusive('\n').collect(),
    );
    let head = b.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let tail = b[head..]
        .iter()
        .rev()
        .zip(a[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (head..b.len() - tail, a[head..a.len() - tail].to_vec())
}

/// The lines (0-based, end exclusive) of the YAML list item of `entity` in `text`: from its
/// `- entity_id:` line to the line before the next item's comments and blank lines.
fn yaml_item_lines(text: &str, entity: &str) -> std::ops::Range<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| *l == format!("- entity_id: {entity}"))
        .unwrap();
    let mut end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("- "))
        .map_or(lines.len(), |n| start + 1 + n);
    while end > start + 1 && (lines[end - 1].trim().is_empty() || lines[end - 1].starts_with('#')) {
        end -= 1;
    }
    start..end
}

#[test]
fn issue_42_update_of_a_yaml_entity_rewrites_only_its_lines() {
    let p = Scratch::example();
    let target = "handler_returning_user";
    let before = p.read("kb/handlers.yaml");
    let flow = before
        .lines()
        .filter(|l| l.contains("audience_types: ["))
        .count();
    assert!(flow > 2, "the file writes its audience lists in flow style");
    ok(&p, &["update", target, "--set", "priority=77"]);
    let after = p.read("kb/handlers.yaml");
    // A diff of the file shows nothing outside the entity's own lines.
    let (replaced, with) = replaced_lines(&before, &after);
    let item = yaml_item_lines(&before, target);
    assert!(
        replaced.start >= item.start && replaced.end <= item.end,
        "lines {replaced:?} changed, the entity is {item:?}:\n{}",
        with.concat()
    );
    assert!(with.iter().any(|l| l.trim() == "priority: 77"), "{with:?}");
    // The other entities' flow lists stay flow (the edited one may be written in block style).
    let item_flow = before.lines().collect::<Vec<_>>()[item]
        .iter()
        .filter(|l| l.contains("audience_types: ["))
        .count();
    assert_eq!(
        after
            .lines()
            .filter(|l| l.contains("audience_types: ["))
            .count(),
        flow - item_flow + usize::from(with.iter().any(|l| l.contains("audience_types: [")))
    );
    // And it reads back as the edit: this entity's priority, nothing else.
    let old = entities_in_text(&before, Format::Yaml);
    let new = entities_in(&p.path("kb/handlers.yaml"));
    for (o, n) in old.iter().zip(&new) {
        if o.entity_id == target {
            assert_eq!(n.priority.get(), 77);
        } else {
            assert_eq!(o, n);
        }
    }
}

fn entities_in_text(text: &str, format: Format) -> Vec<Entity> {
    datafile::parse(Path::new("kb"), text, format, &mut |_| {}).unwrap()
}

#[test]
fn issue_42_update_of_a_json_entity_rewrites_only_its_lines() {
    let p = Scratch::example();
    // scripts.yaml → scripts.json as a person might write it: an entity a line, except the
    // second, written over several lines with four spaces and a list on one line.
    let scripts: Vec<Value> = serde_norway::from_str(&p.read("kb/scripts.yaml")).unwrap();
    assert!(scripts.len() >= 3);
    std::fs::remove_file(p.path("kb/scripts.yaml")).unwrap();
    let mut text = String::from("[\n");
    for (i, e) in scripts.iter().enumerate() {
        if i > 0 {
            text.push_str(",\n");
        }
        if i == 1 {
            let obj = e.as_object().unwrap();
            let fields: Vec<String> = obj
                .iter()
                .map(|(k, v)| format!("    \"{k}\": {}", serde_json::to_string(v).unwrap()))
                .collect();
            text.push_str(&format!("  {{\n{}\n  }}", fields.join(",\n")));
        } else {
            text.push_str(&format!("  {}", serde_json::to_string(e).unwrap()));
        }
    }
    text.push_str("\n]\n");
    p.write("kb/scripts.json", &text);
    let first = scripts[0]["entity_id"].as_str().unwrap().to_owned();
    let second = scripts[1]["entity_id"].as_str().unwrap().to_owned();

    // One line for the first entity: only that line changes, still one line.
    let r = ok(&p, &["update", &first, "--set", "priority=77"]);
    assert!(r.stdout.contains("changed: priority"), "{r:?}");
    let after = p.read("kb/scripts.json");
    let (replaced, with) = replaced_lines(&text, &after);
    assert_eq!(replaced, 1..2, "{after}");
    assert_eq!(with.len(), 1, "{with:?}");
    assert!(with[0].contains("\"priority\":77"), "{with:?}");

    // The multi-line entity: only its lines, in its four-space style.
    let before = after;
    let r = ok(
        &p,
        &[
            "update",
            &second,
            "--set",
            "audience_types=[\"PARENT\",\"CLINICIAN\"]",
        ],
    );
    assert!(r.stdout.contains("changed: audience_types"), "{r:?}");
    let after = p.read("kb/scripts.json");
    let (replaced, with) = replaced_lines(&before, &after);
    let lines: Vec<&str> = before.lines().collect();
    let start = lines.iter().position(|l| *l == "  {").unwrap();
    let end = start
        + lines[start..]
            .iter()
            .position(|l| l.starts_with("  }"))
            .unwrap()
        + 1;
    assert!(
        replaced.start >= start && replaced.end <= end,
        "lines {replaced:?} changed, the entity is {start}..{end}"
    );
    assert!(
        with.iter()
            .all(|l| l.starts_with("    ") || l.starts_with("  }")),
        "{with:?}"
    );
    let new = entities_in(&p.path("kb/scripts.json"));
    let old = entities_in_text(&text, Format::Json);
    for (o, n) in old.iter().zip(&new) {
        if o.entity_id == first {
            assert_eq!(n.priority.get(), 77);
        } else if o.entity_id == second {
            assert_eq!(n.audience_types, ["PARENT", "CLINICIAN"]);
        } else {
            assert_eq!(o, n);
        }
    }
}
