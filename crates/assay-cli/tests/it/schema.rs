//! `assay schema` (issue 27): every kind of file a user writes has a JSON Schema generated from
//! the types that read it, a reference page in docs/reference/ that must not drift from it,
//! and examples that an independent validator (Python `jsonschema`) accepts. A wrong type or
//! an unknown field is rejected by both assay and the validator.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::{Scratch, assay, repo_path};

/// The kinds `assay schema` lists.
fn kinds() -> Vec<String> {
    let list = assay(&["schema"]);
    assert_eq!(list.code, 0, "{list:?}");
    list.stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

fn schema(kind: &str) -> Value {
    let r = assay(&["schema", kind]);
    assert_eq!(r.code, 0, "{kind}: {r:?}");
    r.json()
}

#[test]
fn every_kind_of_file_has_a_schema_and_a_reference_page_that_match_the_types() {
    let kinds = kinds();
    for expected in [
        "config",
        "kb",
        "semantic-bank",
        "state-bank",
        "pattern-bank",
        "always-bank",
        "answer-bank",
        "pattern-rules",
        "expectation-history",
        "suite",
        "scenario",
        "judge-labels",
        "grader-labels",
        "optimizer-case",
    ] {
        assert!(kinds.iter().any(|k| k == expected), "{expected}: {kinds:?}");
    }
    let update = std::env::var("ASSAY_UPDATE_REFERENCE").as_deref() == Ok("1");
    let index = std::fs::read_to_string(repo_path("docs/reference/README.md")).unwrap();
    let mut drifted = Vec::new();
    for kind in &kinds {
        let s = schema(kind);
        assert_eq!(
            s["$schema"], "https://json-schema.org/draft/2020-12/schema",
            "{kind}"
        );
        let printed = format!("{}\n", serde_json::to_string_pretty(&s).unwrap());
        let page = assay(&["schema", kind, "--markdown"]).stdout;
        for (path, now) in [
            (format!("docs/reference/schemas/{kind}.json"), printed),
            (format!("docs/reference/{kind}.md"), page),
        ] {
            let file = repo_path(&path);
            let committed = std::fs::read_to_string(&file).unwrap_or_default();
            if committed != now {
                if update {
                    std::fs::write(&file, &now).unwrap();
                } else {
                    drifted.push(path);
                }
            }
        }
        assert!(
            index.contains(&format!("]({kind}.md)")),
            "docs/reference/README.md does not link {kind}.md"
        );
    }
    assert!(
        drifted.is_empty(),
        "these differ from what `assay schema` prints; run scripts/gen-reference: {drifted:?}"
    );

    let bad = assay(&["schema", "semantic-bnk"]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("did you mean `semantic-bank`?"),
        "{}",
        bad.stderr
    );
}

fn python() -> PathBuf {
    let python = crate::support::test_python();
    let ok = Command::new(&python)
        .args(["-c", "import jsonschema, yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "jsonschema or PyYAML is missing at {}: run scripts/ci-setup (or set ASSAY_TEST_PYTHON_VENV)",
        python.display()
    );
    python
}

/// Validates each `(kind, file)` with Python's `jsonschema`; returns each file's errors.
fn validate(checks: &[(String, PathBuf)]) -> Vec<(PathBuf, Vec<String>)> {
    let mut schemas = std::collections::HashMap::new();
    let request: Vec<Value> = checks
        .iter()
        .map(|(kind, file)| {
            let s = schemas.entry(kind.clone()).or_insert_with(|| schema(kind));
            let format = match file.extension().and_then(|e| e.to_str()) {
                Some("yaml" | "yml") => "yaml",
                Some("toml") => "toml",
                Some("jsonl") => "jsonl",
                _ => "json",
            };
            json!({"schema": s, "file": file, "format": format})
        })
        .collect();
    let mut child = Command::new(python())
        .arg(repo_path("crates/assay-cli/tests/validate_schemas.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), &json!({ "checks": request })).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                PathBuf::from(r["file"].as_str().unwrap()),
                r["errors"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e.as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect()
}

fn files_in(dir: &Path, ext: &[&str]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| ext.contains(&e))
        })
        .collect();
    files.sort();
    files
}

/// Every file of every kind the repository holds (reference examples, the example projects,
/// the files `assay init` writes), with its kind.
fn every_example(init: &Path) -> Vec<(String, PathBuf)> {
    let mut checks: Vec<(String, PathBuf)> = Vec::new();
    let mut add = |kind: &str, files: Vec<PathBuf>| {
        assert!(!files.is_empty(), "no {kind} example");
        checks.extend(files.into_iter().map(|f| (kind.to_owned(), f)));
    };
    let reference = repo_path("docs/reference/examples");
    for kind in kinds() {
        add(
            &kind,
            files_in(&reference, &["json", "yaml", "toml", "jsonl"])
                .into_iter()
                .filter(|f| f.file_stem().and_then(|s| s.to_str()) == Some(kind.as_str()))
                .collect(),
        );
    }
    for project in [repo_path("examples/coparent"), init.to_owned()] {
        add("config", vec![project.join("assay.toml")]);
        add(
            "kb",
            files_in(&project.join("kb"), &["yaml", "yml", "json"]),
        );
        let banks = project.join("test_banks");
        add(
            "semantic-bank",
            files_in(&banks.join("semantic"), &["json"]),
        );
        add("state-bank", files_in(&banks.join("state"), &["json"]));
        let pattern = files_in(&banks.join("pattern"), &["json"]);
        let (rules, cases): (Vec<PathBuf>, Vec<PathBuf>) = pattern
            .into_iter()
            .partition(|f| f.ends_with("pattern_rules.json"));
        add("pattern-rules", rules);
        add("pattern-bank", cases);
        add("always-bank", files_in(&banks.join("always"), &["json"]));
    }
    add(
        "expectation-history",
        files_in(
            &repo_path("examples/coparent/test_banks/semantic/history"),
            &["json"],
        ),
    );
    let gaia = repo_path("examples/gaia-mini");
    add("config", vec![gaia.join("assay.toml")]);
    add("grader-labels", files_in(&gaia.join("labels"), &["yaml"]));
    add(
        "optimizer-case",
        ["optimization", "evaluation"]
            .iter()
            .map(|set| gaia.join(format!("test_data/{set}/v1.0.0/test_cases.jsonl")))
            .collect(),
    );
    let sim = repo_path("examples/scout-quest/sim");
    add("suite", vec![sim.join("suite.yaml")]);
    add("scenario", files_in(&sim.join("scenarios"), &["yaml"]));
    add("judge-labels", files_in(&sim.join("labels"), &["yaml"]));
    checks
}

#[test]
fn every_example_of_every_kind_validates_with_an_independent_validator() {
    let dir = tempfile::tempdir().unwrap();
    let init = dir.path().join("fresh");
    let made = assay(&["init", init.to_str().unwrap()]);
    assert_eq!(made.code, 0, "{made:?}");
    let checks = every_example(&init);
    assert!(checks.len() > 30, "{}", checks.len());
    let failed: Vec<_> = validate(&checks)
        .into_iter()
        .filter(|(_, errors)| !errors.is_empty())
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");

    // The files `assay init` writes say which schema they follow, so editors complete them.
    for (file, reference) in [
        ("assay.toml", "#:schema https://"),
        (
            "kb/entities.yaml",
            "# yaml-language-server: $schema=https://",
        ),
        (
            "test_banks/semantic/parent_test_bank.json",
            "\"$schema\": \"https://",
        ),
        (
            "test_banks/pattern/pattern_rules.json",
            "\"$schema\": \"https://",
        ),
    ] {
        let text = std::fs::read_to_string(init.join(file)).unwrap();
        assert!(text.contains(reference), "{file}: {text}");
    }
}

/// The reference examples copied into the places a project keeps them.
fn reference_project() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let p = Scratch::copy_of(dir.path());
    let e = |name: &str| {
        std::fs::read_to_string(repo_path(&format!("docs/reference/examples/{name}"))).unwrap()
    };
    p.write("assay.toml", &e("config.toml"));
    p.write("kb/bikes.yaml", &e("kb.yaml"));
    p.write("test_banks/semantic/bikes.json", &e("semantic-bank.json"));
    p.write(
        "test_banks/semantic/history/expectations_2026-11-28.json",
        &e("expectation-history.json"),
    );
    p.write("test_banks/state/bikes.json", &e("state-bank.json"));
    p.write("test_banks/pattern/bikes.json", &e("pattern-bank.json"));
    p.write(
        "test_banks/pattern/pattern_rules.json",
        &e("pattern-rules.json"),
    );
    p.write("test_banks/always/bikes.json", &e("always-bank.json"));
    p.write("test_banks/answer/bikes.json", &e("answer-bank.json"));
    for bank in ["semantic", "state", "pattern", "answer"] {
        p.write(
            &format!("test_banks/drafts/{bank}/gen-20261128T141500Z.json"),
            &e(&format!("{bank}-drafts.json")),
        );
    }
    p
}

#[test]
fn the_reference_examples_are_a_project_assay_accepts() {
    let p = reference_project();
    let v = p.assay(&["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(v.stdout.contains("warnings        0"), "{}", v.stdout);
}

/// A change to one file that breaks its schema: `(kind, file in the reference project, from,
/// to, what assay's error names)`.
type Breakage = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

#[test]
fn a_wrong_type_or_an_unknown_field_is_rejected_by_assay_and_by_the_validator() {
    let breakages: [Breakage; 18] = [
        (
            "config",
            "assay.toml",
            "top_k = 6",
            "top_k = \"six\"",
            "top_k",
        ),
        (
            "config",
            "assay.toml",
            "[verdict]",
            "[verdcit]",
            "unknown field `verdcit`",
        ),
        (
            "kb",
            "kb/bikes.yaml",
            "  priority: 50",
            "  priority: high",
            "priority",
        ),
        (
            "kb",
            "kb/bikes.yaml",
            "  subtype: maintenance",
            "  subtipe: maintenance",
            "did you mean `subtype`?",
        ),
        (
            "kb",
            "kb/bikes.yaml",
            "days_since_last: {$lte: 30}",
            "days_since_last: {$le: 30}",
            "unknown operator `$le` (did you mean `$lte`?)",
        ),
        (
            "config",
            "assay.toml",
            "rides_after_dark = \"boolean\"",
            "rides_after_dark = \"bool\"",
            "did you mean `boolean`?",
        ),
        (
            "semantic-bank",
            "test_banks/semantic/bikes.json",
            "\"category\": \"one_liner\"",
            "\"category\": 3",
            "category",
        ),
        (
            "semantic-bank",
            "test_banks/semantic/bikes.json",
            "\"topics\": [\"maintenance\"]",
            "\"topic\": [\"maintenance\"]",
            "did you mean `topics`?",
        ),
        (
            "state-bank",
            "test_banks/state/bikes.json",
            "\"name\": \"Night rider\"",
            "\"nmae\": \"Night rider\"",
            "did you mean `name`?",
        ),
        (
            "pattern-bank",
            "test_banks/pattern/bikes.json",
            "\"is_critical\": true\n    },\n    {\n      \"test_id\": \"BIKE-P2\"",
            "\"is_critical\": \"yes\"\n    },\n    {\n      \"test_id\": \"BIKE-P2\"",
            "is_critical",
        ),
        (
            "always-bank",
            "test_banks/always/bikes.json",
            "\"user_type\": \"RIDER\"",
            "\"user_typ\": \"RIDER\"",
            "did you mean `user_type`?",
        ),
        (
            "answer-bank",
            "test_banks/answer/bikes.json",
            "\"minimum\": {\"faithfulness\": 0.8}",
            "\"minimum\": {\"faithfulnes\": 0.8}",
            "faithfulnes",
        ),
        (
            "pattern-rules",
            "test_banks/pattern/pattern_rules.json",
            "\"whole_word\": true",
            "\"whole_words\": true",
            "did you mean `whole_word`?",
        ),
        (
            "expectation-history",
            "test_banks/semantic/history/expectations_2026-11-28.json",
            "\"reviewer\": \"ana\"",
            "\"reviewr\": \"ana\"",
            "did you mean `reviewer`?",
        ),
        (
            "state-drafts",
            "test_banks/drafts/state/gen-20261128T141500Z.json",
            "\"reviewed_by\": \"sam\"",
            "\"reviewd_by\": \"sam\"",
            "reviewd_by",
        ),
        (
            "answer-drafts",
            "test_banks/drafts/answer/gen-20261128T141500Z.json",
            "\"kind\": \"attack\"",
            "\"kind\": \"attacked\"",
            "attacked",
        ),
        (
            "pattern-drafts",
            "test_banks/drafts/pattern/gen-20261128T141500Z.json",
            "\"kind\": \"pattern_miss\"",
            "\"kind\": \"pattern_missed\"",
            "pattern_missed",
        ),
        (
            "expectation-history",
            "test_banks/semantic/history/expectations_2026-11-28.json",
            "\"unchanged_count\": 14",
            "\"unchanged_count\": \"14\"",
            "unchanged_count",
        ),
    ];
    for (kind, file, from, to, names) in breakages {
        let p = reference_project();
        p.edit(file, from, to);
        let r = p.assay(&["validate"]);
        assert_eq!(r.code, 2, "{kind} {to}: {r:?}");
        assert!(
            r.stderr.contains(file.rsplit('/').next().unwrap()) && r.stderr.contains(names),
            "{kind} {to}: {}",
            r.stderr
        );
        let errors = validate(&[(kind.to_owned(), p.path(file))]);
        assert!(
            !errors[0].1.is_empty(),
            "the validator accepted {kind} with {to}"
        );
    }

    // The simulator's and the optimizer's files, through the commands that read them.
    let dir = tempfile::tempdir().unwrap();
    let sim_dir = dir.path().join("sim");
    std::fs::create_dir_all(sim_dir.join("scenarios")).unwrap();
    std::fs::create_dir_all(sim_dir.join("prompts")).unwrap();
    std::fs::create_dir_all(sim_dir.join("fixtures")).unwrap();
    std::fs::write(sim_dir.join("prompts/assistant.md"), "You book repairs.").unwrap();
    std::fs::write(sim_dir.join("fixtures/shop.yaml"), "slots: []\n").unwrap();
    let e = |name: &str| {
        std::fs::read_to_string(repo_path(&format!("docs/reference/examples/{name}"))).unwrap()
    };
    for (kind, file, text, names) in [
        (
            "suite",
            "suite.yaml",
            e("suite.yaml").replace("max_tool_rounds: 6", "max_tool_round: 6"),
            "did you mean `max_tool_rounds`?",
        ),
        (
            "scenario",
            "scenarios/book.yaml",
            e("scenario.yaml").replace("max_turns: 8", "max_turns: eight"),
            "max_turns",
        ),
    ] {
        if kind == "scenario" {
            std::fs::write(sim_dir.join("suite.yaml"), e("suite.yaml")).unwrap();
        }
        std::fs::write(sim_dir.join(file), &text).unwrap();
        let r = assay(&["simulate", dir.path().to_str().unwrap()]);
        assert_eq!(r.code, 2, "{kind}: {r:?}");
        assert!(r.stderr.contains(names), "{kind}: {}", r.stderr);
        let errors = validate(&[(kind.to_owned(), sim_dir.join(file))]);
        assert!(
            !errors[0].1.is_empty(),
            "the validator accepted the broken {kind}"
        );
    }
    std::fs::write(sim_dir.join("scenarios/book.yaml"), e("scenario.yaml")).unwrap();
    for (kind, judge, text, names) in [
        (
            "judge-labels",
            "simulation",
            e("judge-labels.yaml").replace("verdict: pass", "verdikt: pass"),
            "did you mean `verdict`?",
        ),
        (
            "grader-labels",
            "rubric",
            e("grader-labels.yaml").replace("factually_correct: true", "factually_correct: 3"),
            "factually_correct",
        ),
    ] {
        let labels = dir.path().join(format!("{kind}.yaml"));
        std::fs::write(&labels, &text).unwrap();
        let r = assay(&[
            "judge",
            "agree",
            labels.to_str().unwrap(),
            "--project",
            dir.path().to_str().unwrap(),
        ]);
        assert_eq!(r.code, 2, "{kind} ({judge}): {r:?}");
        assert!(r.stderr.contains(names), "{kind}: {}", r.stderr);
        let errors = validate(&[(kind.to_owned(), labels)]);
        assert!(
            !errors[0].1.is_empty(),
            "the validator accepted the broken {kind}"
        );
    }
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        "{\"question\": \"q\", \"files\": [], \"answer\": \"a\", \"anser\": \"b\"}\n",
    )
    .unwrap();
    let read = assay_experiment::cases::load_cases(&cases, dir.path());
    let message = read.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("did you mean `answer`?"), "{message}");
    let errors = validate(&[("optimizer-case".to_owned(), cases)]);
    assert!(
        !errors[0].1.is_empty(),
        "the validator accepted an unknown field"
    );
}

/// A citation of a section of the documents assay was specified from, which users never see.
fn cites_a_spec_section(text: &str) -> Option<String> {
    let re = regex::Regex::new(r"(?i)(seed|spec)\s*0\d\d|\b00\d\s*(§|appendix)|§\s*\d").unwrap();
    re.find(text).map(|m| {
        let start = text[..m.start()].rfind('\n').map_or(0, |i| i + 1);
        let end = text[m.end()..]
            .find('\n')
            .map_or(text.len(), |i| m.end() + i);
        text[start..end].to_owned()
    })
}

/// Every subcommand path under `prefix`, from the help pages' command lists.
pub(crate) fn subcommands(prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut args: Vec<&str> = prefix.iter().map(String::as_str).collect();
    args.push("--help");
    let help = assay(&args);
    assert_eq!(help.code, 0, "{args:?}: {help:?}");
    out.push(prefix.to_vec());
    let Some(list) = help.stdout.split("Commands:\n").nth(1) else {
        return;
    };
    for line in list.lines() {
        if !line.starts_with("  ") || line.starts_with("   ") {
            if line.trim().is_empty() {
                break;
            }
            continue;
        }
        let name = line.split_whitespace().next().unwrap_or_default();
        if name.is_empty() || name == "help" {
            continue;
        }
        let mut next = prefix.to_vec();
        next.push(name.to_owned());
        subcommands(&next, out);
    }
}

#[test]
fn no_help_page_or_document_cites_a_specification_section() {
    assert!(cites_a_spec_section("the layout of spec 000 §2").is_some());
    assert!(cites_a_spec_section("(003 §4 fields)").is_some());
    assert!(cites_a_spec_section("as in seed 001").is_some());
    assert!(cites_a_spec_section("one run of 1,000 cases").is_none());

    let mut paths = Vec::new();
    subcommands(&[], &mut paths);
    assert!(paths.len() > 30, "{}", paths.len());
    let mut found = Vec::new();
    for path in &paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        if let Some(line) = cites_a_spec_section(&assay(&args).stdout) {
            found.push(format!("assay {}: {line}", path.join(" ")));
        }
    }
    let mut docs = vec![repo_path("README.md")];
    for dir in ["docs", "docs/reference"] {
        docs.extend(files_in(&repo_path(dir), &["md"]));
    }
    for example in ["coparent", "gaia-mini", "scout-quest"] {
        let readme = repo_path(&format!("examples/{example}/README.md"));
        if readme.is_file() {
            docs.push(readme);
        }
    }
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        if let Some(line) = cites_a_spec_section(&text) {
            found.push(format!("{}: {line}", doc.display()));
        }
    }
    assert!(found.is_empty(), "{found:#?}");
}

/// The object schema `node` stands for: `$ref`s followed into `$defs`, an `Option`'s `anyOf`
/// (or `oneOf`, `allOf`) taken to its object part.
fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
    if let Some(r) = node.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap();
        return resolve(root, &root["$defs"][name]);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(part) = node
            .get(key)
            .and_then(Value::as_array)
            .and_then(|parts| parts.iter().find(|p| p.get("type") != Some(&json!("null"))))
        {
            return resolve(root, part);
        }
    }
    node
}

/// The settings table `[a.b]` names in the schema of `assay.toml`, if there is one: a
/// property at each step, or an entry of a map (`[providers.prices]`'s `additionalProperties`).
fn table<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut node = resolve(root, root);
    for part in path.split('.') {
        let next = node
            .get("properties")
            .and_then(|p| p.get(part))
            .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?;
        node = resolve(root, next);
    }
    Some(node)
}

fn keys(node: &Value) -> Vec<String> {
    node.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// Issue 42: every `[table]`, `[table] key` and `[table.sub] key` a help page names is a
/// setting `assay schema config` has (help once named `[calibrate] model` and `[provider]
/// concurrency`, which do not exist).
#[test]
fn every_setting_a_help_page_names_exists() {
    let config = schema("config");
    // A word after a table that is prose, not a key ("[gate] in assay.toml").
    const PROSE: [&str; 16] = [
        "in", "and", "or", "is", "are", "the", "a", "of", "for", "to", "with", "when", "if", "as",
        "from", "table",
    ];
    let mention =
        regex::Regex::new(r"\[([a-z_]+(?:\.[a-z_]+)*)\]('s)?(?:[ \t]*\n?[ \t]*([a-z_]+))?")
            .unwrap();
    let mut paths = Vec::new();
    subcommands(&[], &mut paths);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for path in &paths {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = assay(&args).stdout;
        for m in mention.captures_iter(&help) {
            let name = &m[1];
            let page = format!("assay {} --help", path.join(" "));
            let Some(node) = table(&config, name) else {
                let tables = keys(resolve(&config, &config));
                wrong.push(format!(
                    "{page}: [{name}] is no settings table (tables: {tables:?})"
                ));
                continue;
            };
            checked += 1;
            let key = m.get(3).map(|k| k.as_str());
            if let Some(key) = key.filter(|k| m.get(2).is_none() && !PROSE.contains(k)) {
                let known = keys(node);
                let map = node
                    .get("additionalProperties")
                    .is_some_and(Value::is_object);
                if !map && !known.iter().any(|k| k == key) {
                    wrong.push(format!(
                        "{page}: [{name}] {key} is no setting ([{name}] has {known:?})"
                    ));
                }
            }
        }
    }
    assert!(
        checked >= 15,
        "only {checked} mentions found: the pattern misses them"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");

    // The check itself: the two settings the help once named are refused by it.
    for (name, key) in [
        ("calibrate", None),
        ("provider", None),
        ("calibration", Some("model")),
    ] {
        let found = table(&config, name);
        match key {
            None => assert!(found.is_none(), "[{name}] exists"),
            Some(key) => assert!(keys(found.unwrap()).iter().any(|k| k == key)),
        }
    }
    assert!(!keys(table(&config, "generate").unwrap()).contains(&"max_calls".to_owned()));
}
