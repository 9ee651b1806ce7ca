//! Issue 42, item 1: one verdict per case, decided where the case is scored and stored on it,
//! read by every surface. A seeded generator builds projects (a small knowledge base with its
//! pattern rules; random semantic, state, pattern and always banks; answer cases with random
//! assertions, thresholds, critical flags, trajectory rules and faithfulness minimums, answered
//! by a scripted product that sometimes fails or reports tool calls and judged by the scripted
//! judge of `examples/answer_judge.rs`, which sometimes answers prose; a project-wide
//! `[verdict] pass_score` or none). Each project runs once, and for every case the verdict its
//! RunLog stores must be what the console, the Markdown and HTML reports, JUnit (a failure
//! exactly when it failed, an error exactly when it errored), the pytest plugin's item, the
//! web UI's case page and the run merged from four shards (`--shard hash:i/4`, `assay runs
//! merge`) show. Then the two contradictions of the issue, as regressions.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::answer_judge::{Stats, Table, router};
use crate::pytest_plugin::{pytest, python, testcases};
use crate::support::{Run, Scratch, repo_path};

/// The generator's seed and how many projects it builds: fixed, so CI runs the same projects.
const SEED: u64 = 0x0042_0001;
const PROJECTS: u64 = 6;

/// SplitMix64: a seed gives the same projects everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True `percent` times in a hundred.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Between `min` and `max` distinct items, in their order.
    fn some<T: Clone>(&mut self, items: &[T], min: usize, max: usize) -> Vec<T> {
        let n = min + self.below(max.min(items.len()) - min + 1);
        let mut chosen: BTreeSet<usize> = BTreeSet::new();
        while chosen.len() < n {
            chosen.insert(self.below(items.len()));
        }
        chosen.into_iter().map(|i| items[i].clone()).collect()
    }
}

/// Knowledge entities: an id and the words of its text.
const TOPICS: [(&str, &str); 8] = [
    ("bikes", "bicycle repair tyre puncture chain"),
    ("garden", "garden soil compost seedlings watering"),
    ("baking", "oven bread flour yeast dough"),
    ("taxes", "invoice receipt deduction filing refund"),
    ("travel", "passport visa luggage flight airport"),
    ("music", "guitar chords tuning strings practice"),
    ("pets", "puppy leash vaccine vet kibble"),
    ("cars", "engine oil brakes mechanic gearbox"),
];

const ALWAYS: [(&str, &[&str]); 3] = [
    ("voice", &["USER", "STAFF"]),
    ("house_rules", &["USER"]),
    ("staff_notes", &["STAFF"]),
];

const HANDLERS: [&str; 3] = ["handler_new", "handler_regular", "handler_unhappy"];

/// Sentences the product replies with, and whether the scripted judge finds each supported.
const SENTENCES: [(&str, bool); 6] = [
    ("The shop opens at nine.", true),
    ("Repairs take two days.", true),
    ("Bring your receipt.", true),
    ("We sell spare tyres.", false),
    ("Delivery is always free.", false),
    ("Call us on Sundays.", false),
];

/// In a reply, this makes the scripted judge answer prose: the case is an error.
const GARBLED: &str = "GARBLED";

/// Words assertions look for.
const WORDS: [&str; 8] = [
    "shop", "nine", "repairs", "receipt", "tyres", "free", "sundays", "refund",
];

/// The judge every project's answer cases are judged by.
fn judge_url() -> String {
    static URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    URL.get_or_init(|| {
        let verdicts: serde_json::Map<String, Value> = SENTENCES
            .iter()
            .map(|(s, supported)| ((*s).to_owned(), Value::Bool(*supported)))
            .collect();
        let table = Table::from_json(&json!({"verdicts": verdicts, "garbage": [GARBLED]}))
            .expect("the judge's table");
        crate::support::serve(router(table, Arc::new(Stats::default())))
    })
    .clone()
}

const ENV: [(&str, &str); 1] = [("OPENAI_API_KEY", "test-key")];

/// The settings every generated project shares, and its pass score when it has one.
fn settings(pass_score: Option<u32>) -> String {
    let mut toml = format!(
        "[semantic]\ncandidates = 3\ntop_k = 2\n\n[optimize]\ntarget = \"command\"\ncommand = [\"python3\", \"product.py\"]\ntimeout_seconds = 20\nstateless = true\n\n[providers]\nopenai_base_url = \"{}/v1\"\nmax_retries = 0\n\n[answer]\njudge_model = \"openai/scripted-judge\"\n\n[state.fields]\nvisits = \"integer\"\n",
        judge_url()
    );
    if let Some(score) = pass_score {
        toml.push_str(&format!("\n[verdict]\npass_score = {score}\n"));
    }
    toml
}

fn entity(id: &str, kind: &str, mode: &str, text: &str, audiences: &[&str]) -> Value {
    json!({
        "entity_id": id, "entity_type": kind, "title": id.replace('_', " "),
        "concept_summary": text, "keywords": text.replace(' ', ", "),
        "load_mode": mode, "priority": 50, "audience_types": audiences
    })
}

/// The files every project needs besides its banks: the product, its prompt, and an
/// answer bank's scaffolding.
fn scaffold(p: &Scratch, pass_score: Option<u32>) {
    p.write("assay.toml", &settings(pass_score));
    p.write(
        "product.py",
        &std::fs::read_to_string(repo_path(
            "crates/assay-cli/tests/fixtures/verdicts/product.py",
        ))
        .unwrap(),
    );
    p.write(
        "prompts/answerer_system_prompt.txt",
        "Answer only from the context.\n",
    );
}

fn bank(kind: &str, tests: &[Value]) -> Value {
    json!({"bank_type": kind, "version": "1.0", "tests": tests})
}

/// One generated project.
fn generate(seed: u64) -> Scratch {
    let mut rng = Rng(seed);
    let p = Scratch::empty();
    scaffold(
        &p,
        *rng.pick(&[None, None, None, Some(60), Some(80), Some(95)]),
    );
    let topics = rng.some(&TOPICS, 5, 6);
    let topic_ids: Vec<String> = topics.iter().map(|(t, _)| format!("topic_{t}")).collect();

    // The knowledge base and the pattern rules.
    let mut kb: Vec<Value> = topics
        .iter()
        .map(|(t, words)| {
            entity(
                &format!("topic_{t}"),
                "KNOWLEDGE",
                "SITUATION",
                words,
                &["USER", "STAFF"],
            )
        })
        .collect();
    for (id, audiences) in ALWAYS {
        kb.push(entity(id, "PERSONA", "ALWAYS", "who we are", audiences));
    }
    let conditions = [
        json!({"visits": {"eq": 0}}),
        json!({"visits": {"gte": 5}}),
        json!({"last_rating": {"lte": 2}}),
    ];
    for (id, condition) in HANDLERS.iter().zip(conditions) {
        let mut e = entity(id, "HANDLER", "STATE", "a handler", &["USER", "STAFF"]);
        e["state_conditions"] = condition;
        kb.push(e);
    }
    kb.push(entity(
        "handler_crisis",
        "HANDLER",
        "SITUATION",
        "someone in danger",
        &["USER", "STAFF"],
    ));
    p.write_json("kb/generated.json", &Value::Array(kb));
    let keyword_topics = rng.some(&topics, 1, 3);
    p.write_json(
        "test_banks/pattern/pattern_rules.json",
        &json!({
            "crisis_patterns": [{"pattern": "(want|going) to (vanish|give up)", "entities": ["handler_crisis"], "is_critical": true}],
            "keyword_boosts": keyword_topics.iter().map(|(t, words)| json!({
                "keywords": [words.split(' ').next().unwrap()], "entity": format!("topic_{t}")
            })).collect::<Vec<_>>()
        }),
    );

    // Semantic cases: a topic's words, expecting that topic most of the time.
    let semantic: Vec<Value> = (0..4 + rng.below(3))
        .map(|i| {
            let (t, words) = *rng.pick(&topics);
            let words: Vec<&str> = words.split(' ').collect();
            let prompt = rng.some(&words, 2, 3).join(" ");
            let primary = if rng.chance(70) {
                format!("topic_{t}")
            } else {
                rng.pick(&topic_ids).clone()
            };
            let others: Vec<String> = topic_ids.iter().filter(|x| **x != primary).cloned().collect();
            let secondary = rng.some(&others, 0, 1);
            let unwanted: Vec<String> = others
                .iter()
                .filter(|x| !secondary.contains(x))
                .cloned()
                .collect();
            json!({
                "test_id": format!("SEM-{i}"), "name": format!("semantic {i}"), "category": "one_liner",
                "topics": [t], "prompt": format!("help with {prompt}"),
                "expected_primary": [primary], "expected_secondary": secondary,
                "not_expected": rng.some(&unwanted, 0, 1), "user_state": {"user_type": "USER"}
            })
        })
        .collect();
    p.write_json(
        "test_banks/semantic/generated.json",
        &bank("SEMANTIC", &semantic),
    );

    // State cases over three handlers' conditions.
    let handlers: Vec<String> = HANDLERS.iter().map(|h| (*h).to_owned()).collect();
    let state: Vec<Value> = (0..3 + rng.below(3))
        .map(|i| {
            let expected = rng.some(&handlers, 1, 2);
            let rest: Vec<String> = handlers
                .iter()
                .filter(|h| !expected.contains(h))
                .cloned()
                .collect();
            json!({
                "test_id": format!("ST-{i}"), "name": format!("state {i}"),
                "user_state": {"user_type": "USER", "visits": rng.pick(&[0, 2, 7]),
                               "last_rating": rng.pick(&[json!(1), json!(4), Value::Null])},
                "expected_handlers": expected, "not_expected_handlers": rng.some(&rest, 0, 1)
            })
        })
        .collect();
    p.write_json("test_banks/state/generated.json", &bank("STATE", &state));

    // Pattern cases: crises matched or missed, negatives that do or do not raise an alarm,
    // keywords found or not; critical or not.
    let pattern: Vec<Value> = (0..3 + rng.below(3))
        .map(|i| {
            let critical = rng.chance(60);
            let (kind, prompt, expected, unwanted) = match rng.below(3) {
                0 => (
                    "crisis",
                    *rng.pick(&["i want to vanish", "i want to travel", "going to give up"]),
                    vec!["handler_crisis".to_owned()],
                    vec![],
                ),
                1 => (
                    "negative",
                    *rng.pick(&["going to give up sugar", "i want to bake bread"]),
                    vec![],
                    vec!["handler_crisis".to_owned()],
                ),
                _ => {
                    let (t, words) = rng.pick(&topics);
                    let word = words.split(' ').next().unwrap();
                    (
                        "keyword",
                        *rng.pick(&[word, "nothing to see"]),
                        vec![format!("topic_{t}")],
                        vec![],
                    )
                }
            };
            json!({
                "test_id": format!("PAT-{i}"), "name": format!("pattern {i}"), "prompt": prompt,
                "expected_matches": expected, "expected_secondary": [],
                "not_expected_matches": unwanted, "pattern_type": kind, "is_critical": critical
            })
        })
        .collect();
    p.write_json(
        "test_banks/pattern/generated.json",
        &bank("PATTERN", &pattern),
    );

    // Always cases: an audience and what it must load.
    let always_ids: Vec<String> = ALWAYS.iter().map(|(a, _)| (*a).to_owned()).collect();
    let always: Vec<Value> = (0..2 + rng.below(2))
        .map(|i| {
            json!({
                "test_id": format!("AL-{i}"), "name": format!("always {i}"),
                "user_type": rng.pick(&["USER", "STAFF"]), "user_state": {},
                "expected_always": rng.some(&always_ids, 1, 2)
            })
        })
        .collect();
    p.write_json("test_banks/always/generated.json", &bank("ALWAYS", &always));

    // Answer cases and the product's replies to them.
    let mut replies = serde_json::Map::new();
    let answer: Vec<Value> = (0..3 + rng.below(3))
        .map(|i| {
            let message = format!("Question {i} about {}?", rng.pick(&topics).0);
            let sentences: Vec<&str> = rng
                .some(&SENTENCES, 1, 3)
                .into_iter()
                .map(|(s, _)| s)
                .collect();
            let mut reply = sentences.join(" ");
            let faithfulness = rng.chance(50);
            if faithfulness && rng.chance(15) {
                reply.push_str(&format!(" {GARBLED}."));
            }
            let mut entry = json!({"reply": reply, "fail": rng.chance(12)});
            let tools = ["lookup", "renew"];
            if rng.chance(60) {
                let called: Vec<Value> = rng
                    .some(&tools, 0, 2)
                    .into_iter()
                    .map(|t| json!({"name": t, "arguments": {}, "result": "ok"}))
                    .collect();
                entry["tool_calls"] = Value::Array(called);
            }
            replies.insert(message.clone(), entry);
            let mut case = json!({
                "test_id": format!("ANS-{i}"), "name": format!("answer {i}"), "message": message,
                "user_state": {"user_type": "USER"}, "is_critical": rng.chance(20),
                "metrics": if faithfulness { json!(["faithfulness"]) } else { json!([]) }
            });
            if faithfulness && rng.chance(60) {
                case["minimum"] = json!({"faithfulness": rng.pick(&[0.4, 0.6, 0.9])});
            }
            let asserts: Vec<Value> = (0..rng.below(5))
                .map(|_| {
                    let mut a = json!({
                        "type": rng.pick(&["contains", "icontains", "not-icontains"]),
                        "value": rng.pick(&WORDS)
                    });
                    if rng.chance(15) {
                        a["critical"] = json!(true);
                    }
                    a
                })
                .collect();
            if !asserts.is_empty() {
                case["assert"] = Value::Array(asserts);
                if let Some(t) = rng.pick(&[None, Some(0.5), Some(0.75), Some(1.0)]) {
                    case["assert_threshold"] = json!(t);
                }
            }
            if rng.chance(35) {
                let tool = rng.pick(&tools);
                let mut rule = if rng.chance(50) {
                    json!({"tools_used": [tool]})
                } else {
                    json!({"tools_not_used": [tool]})
                };
                if rng.chance(30) {
                    rule["advisory"] = json!(true);
                }
                case["trajectory"] = rule;
            }
            case
        })
        .collect();
    p.write_json("test_banks/answer/generated.json", &bank("ANSWER", &answer));
    p.write_json("replies.json", &Value::Object(replies));
    p
}

/// Every case's stored verdict in a saved RunLog, by `bank/test_id`.
fn stored(log: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for b in ["semantic", "state", "pattern", "always", "answer"] {
        for c in log[b]["results"].as_array().into_iter().flatten() {
            let key = format!("{b}/{}", c["test_id"].as_str().unwrap());
            let verdict = c["verdict"].clone();
            assert!(verdict.is_object(), "{key} has no stored verdict: {c}");
            out.insert(key, verdict);
        }
    }
    out
}

fn outcome(verdict: &Value) -> &str {
    verdict["outcome"].as_str().unwrap()
}

/// The three files `assay run` (or `runs merge`) saved, from its "saved A, B and C" line.
fn saved_files(run: &Run) -> (String, String, String) {
    let line = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("saved "))
        .unwrap_or_else(|| panic!("nothing saved: {run:?}"));
    let (json, rest) = line.split_once(", ").unwrap();
    let (md, html) = rest.split_once(" and ").unwrap();
    (json.to_owned(), md.to_owned(), html.to_owned())
}

/// What the console's `--failures-only` summary shows: each case it lists as failed, and each
/// errored case, by id; and its counts line.
fn console_verdicts(stdout: &str) -> (BTreeSet<String>, BTreeSet<String>, String) {
    let mut failed = BTreeSet::new();
    let mut errored = BTreeSet::new();
    let mut section = "";
    let mut after_group = false;
    for line in stdout.lines() {
        if !line.starts_with(' ') {
            section = line;
            continue;
        }
        if section.starts_with("failures:") {
            let words: Vec<&str> = line.split_whitespace().collect();
            assert!(words.contains(&"failed"), "not a failure: {line}");
            failed.insert(words[0].to_owned());
        } else if section.starts_with("errors (not scored)") {
            if line.contains(" × ") {
                after_group = true;
            } else if after_group {
                errored.extend(line.split(", ").map(|id| id.trim().to_owned()));
                after_group = false;
            }
        }
    }
    let counts = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("cases"))
        .unwrap_or_default()
        .trim()
        .to_owned();
    (failed, errored, counts)
}

/// What the Markdown report says of each case it lists: `passed`, `fail` or `error`.
fn markdown_verdicts(md: &str) -> BTreeMap<String, &'static str> {
    let heading = regex::Regex::new(
        r"(?m)^### ([A-Z]+-\d+)(?:: [^\n]*?)? — [^\n]* · (passed|\*\*FAILED\*\*|error)",
    )
    .unwrap();
    let mut out = BTreeMap::new();
    for c in heading.captures_iter(md) {
        let v = match &c[2] {
            "passed" => "pass",
            "error" => "error",
            _ => "fail",
        };
        let before = out.insert(c[1].to_owned(), v);
        assert!(
            before.is_none_or(|b| b == v),
            "{} shown twice, differently",
            &c[1]
        );
    }
    // The errors section: `- **ID**` (and the bank for other banks than semantic).
    if let Some(at) = md.find("## ⚠️ Errors") {
        let end = md[at + 3..].find("\n## ").map_or(md.len(), |e| at + 3 + e);
        let item = regex::Regex::new(r"(?m)^- \*\*([A-Z]+-\d+)\*\*").unwrap();
        for c in item.captures_iter(&md[at..end]) {
            let before = out.insert(c[1].to_owned(), "error");
            assert!(
                before.is_none_or(|b| b == "error"),
                "{} errored and not",
                &c[1]
            );
        }
    }
    out
}

/// What the HTML report says of each case it shows: its section's `data-verdict`, and the
/// errors list's.
fn html_verdicts(html: &str) -> BTreeMap<String, String> {
    let section = regex::Regex::new(
        r#"<section class="case" id="case-([A-Z]+-\d+)" data-bank="\w+"><h3>.*?data-verdict="(\w+)""#,
    )
    .unwrap();
    let errored = regex::Regex::new(
        r#"<li data-bank="\w+" data-verdict="error"><strong>([A-Z]+-\d+)</strong>"#,
    )
    .unwrap();
    let shown = section
        .captures_iter(html)
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .chain(
            errored
                .captures_iter(html)
                .map(|c| (c[1].to_owned(), "error".to_owned())),
        );
    let mut out = BTreeMap::new();
    for (id, verdict) in shown {
        if let Some(before) = out.insert(id.clone(), verdict.clone()) {
            assert_eq!(before, verdict, "{id} shown twice, differently");
        }
    }
    out
}

/// A page of the web UI (HTTP/1.0: one plain body, never chunked).
fn get(base: &str, path: &str) -> (u16, String) {
    let addr = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_owned());
    (status, body)
}

/// The run's id as the web UI names it: its results file's stamp.
fn run_id(json_path: &str) -> String {
    Path::new(json_path)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .trim_start_matches("results_")
        .trim_end_matches(".json")
        .to_owned()
}

/// What was seen across the projects, so the test shows it exercised every kind of verdict.
#[derive(Default)]
struct Seen {
    outcomes: BTreeMap<String, usize>,
    rules: BTreeSet<String>,
}

/// One project through every surface.
fn check_project(p: &Scratch, python: Option<&Path>, seen: &mut Seen) {
    let junit = p.path("junit.xml").display().to_string();
    let run = p.assay_env(&["run", "--junit", junit.as_str(), "--failures-only"], &ENV);
    assert!(matches!(run.code, 0 | 1 | 3), "{run:?}");
    let (json_path, md_path, html_path) = saved_files(&run);
    let log: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(log["notable"]["complete"], true);
    let cases = stored(&log);
    let verdict_of = |key: &str| outcome(&cases[key]).to_owned();
    for v in cases.values() {
        *seen.outcomes.entry(outcome(v).to_owned()).or_default() += 1;
        for c in v["failed"].as_array().into_iter().flatten() {
            seen.rules.insert(c["rule"].as_str().unwrap().to_owned());
        }
        // A failure names the checks that failed it; only a failure does.
        assert_eq!(
            v["failed"].as_array().is_some_and(|f| !f.is_empty()),
            outcome(v) == "fail",
            "{v}"
        );
    }
    let count = |o: &str| cases.values().filter(|v| outcome(v) == o).count();
    let (passed, failed, errors) = (count("pass"), count("fail"), count("error"));
    assert_eq!(
        log["summary"]["error_count"], errors,
        "errors are the error verdicts"
    );

    // The console.
    let (console_failed, console_errored, counts) = console_verdicts(&run.stdout);
    assert_eq!(
        counts,
        format!(
            "{}: {passed} passed, {failed} failed, {errors} errors ({} hard fails)",
            cases.len(),
            log["summary"]["hard_fail_count"]
        ),
        "{}",
        run.stdout
    );
    for key in cases.keys() {
        let id = key.split_once('/').unwrap().1;
        let shown = if console_failed.contains(id) {
            "fail"
        } else if console_errored.contains(id) {
            "error"
        } else {
            "pass"
        };
        assert_eq!(shown, verdict_of(key), "console, {key}:\n{}", run.stdout);
    }

    // The Markdown and HTML reports.
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(
        md.contains(&format!(
            "**Verdicts:** {passed} passed, {failed} failed, {errors} errors"
        )),
        "{md}"
    );
    let md_shown = markdown_verdicts(&md);
    let html = std::fs::read_to_string(&html_path).unwrap();
    let html_shown = html_verdicts(&html);
    for key in cases.keys() {
        let id = key.split_once('/').unwrap().1;
        let v = verdict_of(key);
        assert_eq!(
            md_shown.get(id).copied().unwrap_or("pass"),
            v,
            "Markdown, {key}:\n{md}"
        );
        assert_eq!(
            html_shown.get(id).map_or("pass", String::as_str),
            v,
            "HTML, {key}"
        );
        if v != "pass" {
            assert!(md_shown.contains_key(id), "Markdown does not list {key}");
            assert!(html_shown.contains_key(id), "HTML does not list {key}");
        }
    }

    // JUnit: a failure exactly when the case failed, an error exactly when it errored, the
    // failed checks as the message, and the case's own duration as its time.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let junit_cases = testcases(&xml);
    assert_eq!(junit_cases.len(), cases.len());
    let time = regex::Regex::new(r#"<testcase [^>]*time="\d+\.\d{3}""#).unwrap();
    assert_eq!(
        time.find_iter(&xml).count(),
        cases.len(),
        "a time each: {xml}"
    );
    for c in &junit_cases {
        let bank = c.classname.strip_prefix("assay.").unwrap();
        let id = c.name.split(": ").next().unwrap();
        let key = format!("{bank}/{id}");
        let shown = match c.outcome.as_str() {
            "failure" => "fail",
            "error" => "error",
            _ => "pass",
        };
        assert_eq!(shown, verdict_of(&key), "JUnit, {key}: {c:?}");
        if shown == "fail" {
            let checks: Vec<&str> = cases[&key]["failed"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["message"].as_str().unwrap())
                .collect();
            assert_eq!(c.message, checks.join("; "), "JUnit message, {key}");
        }
    }

    // The pytest plugin: its own run of the project, one item per case.
    if let Some(python) = python {
        let dir = p.root().parent().unwrap();
        let out = pytest(
            python,
            dir,
            &["--assay", "project", "--junitxml", "pytest.xml", "-q"],
            &ENV,
        );
        let items = testcases(&std::fs::read_to_string(dir.join("pytest.xml")).unwrap());
        for key in cases.keys() {
            let (bank, id) = key.split_once('/').unwrap();
            let item = items
                .iter()
                .find(|i| i.classname == format!("project.{bank}") && i.name == id)
                .unwrap_or_else(|| panic!("no pytest item for {key}: {out:?}"));
            let shown = match item.outcome.as_str() {
                "failure" => "fail",
                "error" => "error",
                "passed" => "pass",
                other => panic!("{key}: {other}"),
            };
            assert_eq!(shown, verdict_of(key), "pytest, {key}: {item:?}");
            if shown == "fail" {
                let first = cases[key]["failed"][0]["message"].as_str().unwrap();
                assert!(item.message.contains(first), "pytest, {key}: {item:?}");
            }
        }
    }

    // The web UI's case page of the saved run.
    let state = assay_server::AppState::with_env(p.root.clone(), Arc::new(|_: &str| None));
    let base = crate::support::serve(assay_server::app(state));
    let run_id = run_id(&json_path);
    let shown = regex::Regex::new(r#"<dd id="verdict" data-verdict="(\w+)""#).unwrap();
    for key in cases.keys() {
        let id = key.split_once('/').unwrap().1;
        let (status, page) = get(&base, &format!("/ui/runs/{run_id}/cases/{id}"));
        assert_eq!(status, 200, "UI, {key}: {page}");
        let v = shown
            .captures(&page)
            .unwrap_or_else(|| panic!("UI, {key}: no verdict on the page"));
        assert_eq!(&v[1], verdict_of(key), "UI, {key}");
    }
    let (status, page) = get(&base, &format!("/ui/runs/{run_id}"));
    assert_eq!(status, 200);
    assert_eq!(
        html_verdicts(&page),
        html_shown,
        "the UI's run page is the report's"
    );

    // Four shards, merged: every case keeps the verdict it was stored with.
    let mut shard_files = Vec::new();
    for i in 1..=4 {
        let spec = format!("hash:{i}/4");
        let shard = p.assay_env(&["run", "--shard", spec.as_str()], &ENV);
        assert!(matches!(shard.code, 0 | 3), "{spec}: {shard:?}");
        shard_files.push(saved_files(&shard).0);
    }
    let root = p.root().display().to_string();
    let mut args = vec!["runs", "merge", "--project", root.as_str()];
    args.extend(shard_files.iter().map(String::as_str));
    let merged = crate::support::assay_env(&args, &ENV);
    assert_eq!(merged.code, run.code, "{merged:?}");
    let merged_log: Value =
        serde_json::from_str(&std::fs::read_to_string(saved_files(&merged).0).unwrap()).unwrap();
    assert_eq!(stored(&merged_log), cases, "the merged run's verdicts");
    assert_eq!(
        merged_log["notable"]["verdicts"], log["notable"]["verdicts"],
        "the merged run's counts by verdict and rule"
    );
}

#[test]
fn every_surface_shows_the_verdict_the_runlog_stores() {
    let python = python();
    let mut seen = Seen::default();
    for n in 0..PROJECTS {
        let p = generate(SEED.wrapping_add(n));
        check_project(&p, python.as_deref(), &mut seen);
    }
    // The projects exercised every outcome and the rules of every bank.
    for o in ["pass", "fail", "error"] {
        assert!(
            seen.outcomes.get(o).is_some_and(|n| *n > 0),
            "no {o}: {:?}",
            seen.outcomes
        );
    }
    for rule in [
        "expected_missing",
        "assertion",
        "assertion_threshold",
        "metric_minimum",
        "trajectory",
        "pass_score",
    ] {
        assert!(seen.rules.contains(rule), "no {rule}: {:?}", seen.rules);
    }
    assert!(
        seen.rules.contains("missed_crisis") || seen.rules.contains("false_alarm"),
        "no critical failure: {:?}",
        seen.rules
    );
}

/// The issue's two contradictions: an answer case that misses its `assert_threshold` (three
/// of four assertions, 75) and one that meets it (threshold 0.7, the same 75).
fn contradictions(pass_score: Option<u32>) -> Scratch {
    let p = Scratch::empty();
    scaffold(&p, pass_score);
    p.write_json(
        "kb/kb.json",
        &json!([entity(
            "topic_shop",
            "KNOWLEDGE",
            "SITUATION",
            "shop opening hours",
            &["USER"]
        )]),
    );
    let asserts = json!([{"type": "contains", "value": "shop"}, {"type": "contains", "value": "nine"},
                         {"type": "icontains", "value": "opens"}, {"type": "contains", "value": "Sunday"}]);
    let case = |id: &str, threshold: f64| {
        json!({"test_id": id, "name": id, "message": "When does the shop open?", "metrics": [],
               "user_state": {"user_type": "USER"}, "assert": asserts, "assert_threshold": threshold})
    };
    p.write_json(
        "test_banks/answer/shop.json",
        &bank("ANSWER", &[case("MISSED", 0.8), case("MET", 0.7)]),
    );
    p.write_json(
        "replies.json",
        &json!({"When does the shop open?": {"reply": "The shop opens at nine."}}),
    );
    p
}

/// `(JUnit outcome, pytest outcome)` of each case of a contradictions project, after checking
/// that both show the RunLog's verdict.
fn junit_and_pytest(p: &Scratch) -> BTreeMap<String, (String, String)> {
    let junit = p.path("junit.xml").display().to_string();
    let run = p.assay_env(&["run", "--junit", junit.as_str(), "--json"], &ENV);
    assert_eq!(run.code, 0, "{run:?}");
    let log = run.json();
    let scores: Vec<u64> = log["answer"]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["score"].as_u64().unwrap())
        .collect();
    assert_eq!(scores, [75, 75], "three assertions of four pass");
    let mut out = BTreeMap::new();
    for c in testcases(&std::fs::read_to_string(&junit).unwrap()) {
        out.insert(
            c.name.split(": ").next().unwrap().to_owned(),
            (c.outcome, String::new()),
        );
    }
    if let Some(python) = python() {
        let dir = p.root().parent().unwrap();
        let _ = pytest(
            &python,
            dir,
            &["--assay", "project", "--junitxml", "pytest.xml", "-q"],
            &ENV,
        );
        for item in testcases(&std::fs::read_to_string(dir.join("pytest.xml")).unwrap()) {
            if let Some(o) = out.get_mut(&item.name) {
                o.1 = item.outcome;
            }
        }
    } else {
        for o in out.values_mut() {
            o.1.clone_from(&o.0);
        }
    }
    out
}

#[test]
fn a_missed_assert_threshold_fails_everywhere_whatever_the_pass_score() {
    for pass_score in [None, Some(50)] {
        let shown = junit_and_pytest(&contradictions(pass_score));
        assert_eq!(
            shown["MISSED"],
            ("failure".to_owned(), "failure".to_owned()),
            "pass score {pass_score:?}"
        );
    }
}

#[test]
fn a_met_threshold_at_75_passes_unless_the_project_sets_a_pass_score_above_it() {
    let shown = junit_and_pytest(&contradictions(None));
    assert_eq!(shown["MET"], ("passed".to_owned(), "passed".to_owned()));
    let strict = contradictions(Some(80));
    let shown = junit_and_pytest(&strict);
    assert_eq!(shown["MET"], ("failure".to_owned(), "failure".to_owned()));
    let junit = strict.read("junit.xml");
    assert!(
        junit.contains("message=\"score 75 is under the pass score 80 ([verdict] pass_score)\""),
        "{junit}"
    );
}

#[test]
fn the_removed_junit_pass_score_is_bad_input_naming_its_replacement() {
    let p = contradictions(None);
    let toml = p.read("assay.toml");
    p.write(
        "assay.toml",
        &format!("{toml}\n[report]\njunit_pass_score = 50\n"),
    );
    let run = p.assay_env(&["run", "--no-save"], &ENV);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("report.junit_pass_score: `[report] junit_pass_score` was removed"),
        "{run:?}"
    );
    assert!(
        run.stderr.contains("`[verdict]` `pass_score = N`"),
        "{run:?}"
    );
    assert!(p.results().is_empty(), "nothing written");
}
