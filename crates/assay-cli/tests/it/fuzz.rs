//! A bounded mutation fuzzer over every parser of a file people write: knowledge-base files,
//! test banks, pattern rules, `assay.toml`, simulator suites and scenarios, and the optimizer's
//! JSONL test cases. Inputs are the bundled examples, mutated (bytes changed, spans cut or
//! doubled, tokens that parsers trip on inserted, lines swapped), a few thousand a run.
//!
//! Two properties must hold for every mutated file:
//! * **no panic**: a loader answers `Ok` or an error, whatever the bytes;
//! * **nothing invalid is silently accepted**: an independent reading of the text (serde_json,
//!   serde_norway and toml parsing it as a plain value) decides whether it is well-formed; a
//!   loader that accepts text those reject, or accepts it with fewer records than it holds, or
//!   with a number that is not finite, fails the test.
//!
//! The run is seeded and bounded: `ASSAY_FUZZ_SEED` (default fixed) and `ASSAY_FUZZ_SECS`
//! (seconds per target, default 3). An input that breaks a property is saved under
//! `target/fuzz-findings/` and named in the failure; make it a regression test.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Scratch, repo_path};

/// xorshift64*: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            usize::try_from(self.next() % n as u64).unwrap_or(0)
        }
    }
}

/// Tokens that parsers and validators trip on.
const TOKENS: &[&str] = &[
    "}{",
    ",",
    "]",
    "[",
    "{",
    "}",
    ": ",
    "\n- ",
    "\n",
    " garbage",
    "1e308",
    "1.0e308",
    "-1",
    "-0.0",
    ".nan",
    ".inf",
    "-.inf",
    "nan",
    "inf",
    "NaN",
    "null",
    "~",
    "\"\"",
    "\"x\"",
    "[]",
    "{}",
    "../../../../etc/hostname",
    "/etc/hostname",
    "\u{feff}",
    "\t",
    "\"",
    "'",
    "#",
    "&a ",
    "*a",
    "!!binary ",
    "99999999999999999999999",
    "0x10",
    "true",
    "   ",
    "\\u0000",
    "é",
    "<script>",
    "$gte",
    "$in",
    "(?i)",
    "(",
    "\\",
    "---\n",
    "...\n",
    "? ",
    "|\n  ",
    ">\n  ",
    "=",
    "[[x]]",
    "\"\"\"",
];

fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut text = seed.to_owned();
    for _ in 0..=rng.below(3) {
        // Work on char boundaries so the text stays UTF-8 (the loaders' own UTF-8 errors are
        // covered elsewhere); byte-level damage comes from the tokens.
        let bounds: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        let at = bounds[rng.below(bounds.len())];
        let end =
            bounds[(bounds.partition_point(|&b| b < at) + 1 + rng.below(24)).min(bounds.len() - 1)];
        match rng.below(7) {
            0 => {
                let token = TOKENS[rng.below(TOKENS.len())];
                text.insert_str(at, token);
            }
            1 => {
                text.replace_range(at..end, "");
            }
            2 => {
                let span = text[at..end].to_owned();
                text.insert_str(end, &span);
            }
            3 => {
                let c = char::from(b' ' + u8::try_from(rng.below(95)).unwrap_or(0));
                text.replace_range(
                    at..end.min(at + text[at..].chars().next().map_or(0, char::len_utf8)),
                    &c.to_string(),
                );
            }
            4 => {
                // Swap two lines.
                let mut lines: Vec<&str> = text.split('\n').collect();
                if lines.len() > 1 {
                    let (a, b) = (rng.below(lines.len()), rng.below(lines.len()));
                    lines.swap(a, b);
                }
                text = lines.join("\n");
            }
            5 => {
                // A line gets text after it (a second record, a comma, words).
                let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
                let i = rng.below(lines.len());
                let tail = ["{}", " x", ",", "}{\"a\": 1}", " # note", " 1"][rng.below(6)];
                lines[i].push_str(tail);
                text = lines.join("\n");
            }
            _ => {
                // A long token (ids and names beyond any file-name limit).
                let token = if rng.below(2) == 0 { "é" } else { "x" };
                text.insert_str(at, &token.repeat(100 + rng.below(200)));
            }
        }
    }
    text
}

/// What a target says of one input.
enum Verdict {
    /// The loader refused it.
    Refused,
    /// The loader accepted it, and everything checked holds.
    Accepted,
    /// The loader accepted it, but it is not valid: why.
    WronglyAccepted(String),
}

struct Target<'a> {
    name: &'static str,
    /// The file under the scratch project that is mutated.
    file: &'a str,
    /// Loads the scratch project after `file` was written.
    check: &'a dyn Fn(&Path, &str) -> Verdict,
}

fn budget() -> Duration {
    let secs = std::env::var("ASSAY_FUZZ_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(3.0);
    Duration::from_secs_f64(secs)
}

fn seed() -> u64 {
    std::env::var("ASSAY_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_A55A_1234_0022)
}

fn findings_dir() -> PathBuf {
    repo_path("target/fuzz-findings")
}

/// Runs `target` for the time budget; returns (inputs tried, inputs refused, findings).
fn fuzz(scratch: &Scratch, target: &Target<'_>, rng: &mut Rng) -> (usize, usize, Vec<String>) {
    let original = scratch.read(target.file);
    // The unmutated file must load: otherwise every mutation is trivially refused.
    assert!(
        matches!((target.check)(scratch.root(), &original), Verdict::Accepted),
        "{}: the seed file {} does not load",
        target.name,
        target.file
    );
    let start = Instant::now();
    let (mut tried, mut refused) = (0, 0);
    let mut findings = Vec::new();
    while start.elapsed() < budget() || tried < 50 {
        let text = mutate(rng, &original);
        scratch.write(target.file, &text);
        tried += 1;
        let outcome = catch_unwind(AssertUnwindSafe(|| (target.check)(scratch.root(), &text)));
        let problem = match outcome {
            Err(panic) => Some(format!(
                "panicked: {}",
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default()
            )),
            Ok(Verdict::WronglyAccepted(why)) => Some(format!("accepted an invalid file: {why}")),
            Ok(Verdict::Refused) => {
                refused += 1;
                None
            }
            Ok(Verdict::Accepted) => None,
        };
        if let Some(problem) = problem {
            let dir = findings_dir();
            let _ = std::fs::create_dir_all(&dir);
            let name = Path::new(target.file)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let saved = dir.join(format!("{}-{}-{name}", target.name, findings.len()));
            let _ = std::fs::write(&saved, &text);
            findings.push(format!("{problem} (input saved as {})", saved.display()));
            if findings.len() >= 5 {
                break;
            }
        }
    }
    scratch.write(target.file, &original);
    (tried, refused, findings)
}

fn json_ok(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok()
}

fn yaml_value(text: &str) -> Option<serde_norway::Value> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    serde_norway::from_str::<serde_norway::Value>(text).ok()
}

fn yaml_finite(value: &serde_norway::Value) -> bool {
    match value {
        serde_norway::Value::Number(n) => n.as_f64().is_none_or(f64::is_finite),
        serde_norway::Value::Sequence(s) => s.iter().all(yaml_finite),
        serde_norway::Value::Mapping(m) => m.values().all(yaml_finite),
        serde_norway::Value::Tagged(t) => yaml_finite(&t.value),
        _ => true,
    }
}

fn kb_check(root: &Path, text: &str) -> Verdict {
    match assay_kb::load_dir(&root.join("kb")) {
        Err(_) => Verdict::Refused,
        Ok(loaded) => {
            if yaml_value(text).is_none() {
                return Verdict::WronglyAccepted("the kb file is not YAML".into());
            }
            for e in loaded.kb.entities() {
                if let Err(e) = assay_kb::check_entity_id(&e.entity_id) {
                    return Verdict::WronglyAccepted(format!("an id breaks the rule: {e}"));
                }
                if e.title.trim().is_empty() {
                    return Verdict::WronglyAccepted("an empty title".into());
                }
            }
            Verdict::Accepted
        }
    }
}

fn bank_check(root: &Path, text: &str) -> Verdict {
    let mut warn = |_: String| {};
    match assay_project::banks::load_banks(&root.join("test_banks"), &mut warn) {
        Err(_) => Verdict::Refused,
        Ok(_) if !json_ok(text) => Verdict::WronglyAccepted("the bank is not JSON".into()),
        Ok(_) => Verdict::Accepted,
    }
}

fn project_check(root: &Path, text: &str, json: bool) -> Verdict {
    match assay_project::project::Project::load(root) {
        Err(_) => Verdict::Refused,
        Ok(_) if json && !json_ok(text) => {
            Verdict::WronglyAccepted("the rules are not JSON".into())
        }
        Ok(_) => Verdict::Accepted,
    }
}

fn settings_check(root: &Path, text: &str) -> Verdict {
    match assay_project::settings::ProjectSettings::load(root) {
        Err(_) => Verdict::Refused,
        Ok(settings) => {
            let Ok(table) = text.parse::<toml::Table>() else {
                return Verdict::WronglyAccepted("assay.toml is not TOML".into());
            };
            fn finite(v: &toml::Value) -> bool {
                match v {
                    toml::Value::Float(f) => f.is_finite(),
                    toml::Value::Array(a) => a.iter().all(finite),
                    toml::Value::Table(t) => t.values().all(finite),
                    _ => true,
                }
            }
            if !finite(&toml::Value::Table(table)) {
                return Verdict::WronglyAccepted("a number is not finite".into());
            }
            let w = settings.weights;
            if !(w.semantic + w.state + w.pattern + w.always).is_finite() {
                return Verdict::WronglyAccepted("the weights' sum is not finite".into());
            }
            Verdict::Accepted
        }
    }
}

fn sim_check(root: &Path, text: &str) -> Verdict {
    match assay_sim::load(root) {
        Err(_) => Verdict::Refused,
        Ok(suite) => {
            let Some(value) = yaml_value(text) else {
                return Verdict::WronglyAccepted("the file is not YAML".into());
            };
            if !yaml_finite(&value) {
                return Verdict::WronglyAccepted("a number is not finite".into());
            }
            for s in &suite.scenarios {
                let sum: f64 = s.weights.values().sum();
                if !(sum - 1.0).abs().lt(&1e-6) || s.weights.values().any(|w| !w.is_finite()) {
                    return Verdict::WronglyAccepted(format!(
                        "scenario `{}`: weights {:?} do not sum to 1",
                        s.config.id, s.weights
                    ));
                }
            }
            if suite.system_prompt.trim().is_empty() {
                return Verdict::WronglyAccepted("an empty system prompt".into());
            }
            let real_root = std::fs::canonicalize(root).unwrap();
            if let Some((fixture, _)) = &suite.fixture
                && !std::fs::canonicalize(fixture).is_ok_and(|p| p.starts_with(&real_root))
            {
                return Verdict::WronglyAccepted(format!(
                    "a fixture outside the project: {}",
                    fixture.display()
                ));
            }
            Verdict::Accepted
        }
    }
}

const CASES: &str = "test_data/optimization/v1.0.0/test_cases.jsonl";

fn cases_check(root: &Path, text: &str) -> Verdict {
    let jsonl = root.join(CASES);
    match assay_experiment::cases::load_cases(&jsonl, jsonl.parent().unwrap()) {
        Err(_) => Verdict::Refused,
        Ok(set) => {
            let text = text.strip_prefix('\u{feff}').unwrap_or(text);
            // A byte-order mark at the start of a line (files joined with `cat`) hides nothing.
            let lines: Vec<&str> = text
                .lines()
                .map(|l| l.strip_prefix('\u{feff}').unwrap_or(l))
                .filter(|l| !l.trim().is_empty())
                .collect();
            if let Some(bad) = lines
                .iter()
                .find(|l| !serde_json::from_str::<Value>(l).is_ok_and(|v| v.is_object()))
            {
                return Verdict::WronglyAccepted(format!(
                    "a line that is not one JSON object: {bad}"
                ));
            }
            if set.cases.len() != lines.len() {
                return Verdict::WronglyAccepted(format!(
                    "{} lines but {} cases",
                    lines.len(),
                    set.cases.len()
                ));
            }
            Verdict::Accepted
        }
    }
}

#[test]
fn parsers_survive_mutated_example_files_and_accept_nothing_invalid() {
    let mut rng = Rng(seed() | 1);
    let coparent = Scratch::example();
    let scout = Scratch::copy_of(&repo_path("examples/scout-quest"));
    let gaia = Scratch::copy_of(&repo_path("examples/gaia-mini"));
    let targets: Vec<(&Scratch, Target<'_>)> = vec![
        (
            &coparent,
            Target {
                name: "kb",
                file: "kb/knowledge.yaml",
                check: &kb_check,
            },
        ),
        (
            &coparent,
            Target {
                name: "semantic-bank",
                file: "test_banks/semantic/parent_test_bank.json",
                check: &bank_check,
            },
        ),
        (
            &coparent,
            Target {
                name: "state-bank",
                file: "test_banks/state/state_handler_tests.json",
                check: &bank_check,
            },
        ),
        (
            &coparent,
            Target {
                name: "pattern-rules",
                file: "test_banks/pattern/pattern_rules.json",
                check: &|root, text| project_check(root, text, true),
            },
        ),
        (
            &coparent,
            Target {
                name: "settings",
                file: "assay.toml",
                check: &settings_check,
            },
        ),
        (
            &scout,
            Target {
                name: "sim-suite",
                file: "sim/suite.yaml",
                check: &sim_check,
            },
        ),
        (
            &scout,
            Target {
                name: "sim-scenario",
                file: "sim/scenarios/daily_chore.yaml",
                check: &sim_check,
            },
        ),
        (
            &gaia,
            Target {
                name: "optimizer-cases",
                file: CASES,
                check: &cases_check,
            },
        ),
    ];
    let mut report = Vec::new();
    let mut all_findings = Vec::new();
    for (scratch, target) in &targets {
        let (tried, refused, findings) = fuzz(scratch, target, &mut rng);
        report.push(format!(
            "{}: {tried} inputs, {refused} refused, {} findings",
            target.name,
            findings.len()
        ));
        // Most mutations break something: a target that refuses almost nothing is not being
        // exercised (or accepts anything).
        assert!(
            refused * 5 >= tried,
            "{}: only {refused} of {tried} refused",
            target.name
        );
        all_findings.extend(
            findings
                .into_iter()
                .map(|f| format!("{}: {f}", target.name)),
        );
    }
    eprintln!("{}", report.join("\n"));
    assert!(all_findings.is_empty(), "{}", all_findings.join("\n"));
}
