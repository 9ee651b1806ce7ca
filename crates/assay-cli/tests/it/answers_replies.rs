//! Issue 42: a product's reply is believed only as far as it can be checked. The branch
//! library's helpdesk (`tests/fixtures/answer-kb`) with a product that floods 100 MB, answers
//! `{"final_answer": 42}`, or says it used a context the knowledge base lacks: each is an
//! error of its case with the reason (exit 3), the results stay small and assay's memory
//! stays bounded. And a bank that computes no metric needs no judge and no key.

use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};

use crate::answers::{Library, case, library};

/// Answers by the question's first word: a flood of 100 MB, a number, a context that names no
/// entity of the knowledge base, else a plain grounded reply.
const PRODUCT: &str = r#"
import json, sys
request = json.load(sys.stdin)
question = request["question"]
if question.startswith("Flood"):
    chunk = "x" * (1 << 20)
    try:
        sys.stdout.write('{"final_answer": "')
        for _ in range(100):
            sys.stdout.write(chunk)
        sys.stdout.write('"}\n')
        sys.stdout.flush()
    except BrokenPipeError:
        sys.exit(0)
elif question.startswith("Number"):
    print(json.dumps({"final_answer": 42}))
elif question.startswith("Unknown"):
    print(json.dumps({"final_answer": "Books are lent for three weeks.",
                      "contexts": [{"entity": "loan_period", "text": "Books are lent for three weeks."}]}))
else:
    print(json.dumps({"final_answer": "Books are lent for three weeks."}))
"#;

fn bank(lib: &Library) {
    let case = |id: &str, message: &str| {
        json!({"test_id": id, "name": id, "message": message,
               "user_state": {"user_type": "PATRON"}, "metrics": [],
               "assert": [{"type": "contains", "value": "three weeks"}]})
    };
    lib.scratch.write_json(
        "test_banks/answer/library.json",
        &json!({"bank_type": "ANSWER", "version": "1.0", "tests": [
            case("LIB-FLOOD", "Flood me with text about loans."),
            case("LIB-NUMBER", "Number of weeks I can keep a book?"),
            case("LIB-UNKNOWN", "Unknown context: how long can I keep a book?"),
            case("LIB-PLAIN", "How long can I keep a book I borrowed?"),
        ]}),
    );
    lib.scratch.write("product.py", PRODUCT);
}

/// The peak resident memory of a process (`VmHWM`, kB), while it lives.
fn peak_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[test]
fn a_flood_a_number_and_an_unknown_context_are_errors_with_bounded_memory() {
    let lib = library();
    bank(&lib);
    let out = lib.scratch.path("run.out");
    let err = lib.scratch.path("run.err");
    let mut child = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args([
            "run",
            lib.scratch.root().to_str().unwrap(),
            "--banks",
            "answer",
            "--json",
        ])
        .env("OPENAI_API_KEY", "test-key")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .stdout(Stdio::from(std::fs::File::create(&out).unwrap()))
        .stderr(Stdio::from(std::fs::File::create(&err).unwrap()))
        .spawn()
        .unwrap();
    // VmHWM is the process's own peak (the product's memory is not in it); the last reading
    // before it exits is its peak over the run.
    let mut peak = 0;
    let status = loop {
        if let Some(kb) = peak_kb(child.id()) {
            peak = peak.max(kb);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let stdout = std::fs::read_to_string(&out).unwrap();
    let stderr = std::fs::read_to_string(&err).unwrap();
    assert_eq!(status.code(), Some(3), "errors, not a verdict: {stderr}");
    assert!(peak > 0, "the peak was read");
    assert!(peak < 100 * 1024, "peak RSS {peak} kB, 100 MB or more");

    let log: Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        stdout.len() < 1 << 20,
        "the RunLog is {} bytes",
        stdout.len()
    );
    let error = |id: &str| {
        let c = case(&log, id);
        assert!(c.get("score").is_none_or(Value::is_null), "{c}");
        c["error"].as_str().unwrap_or_default().to_owned()
    };
    let flood = error("LIB-FLOOD");
    assert!(
        flood.contains("the product failed")
            && flood
                .contains("the reply is longer than 1048576 bytes (`[answer] max_reply_bytes`)"),
        "{flood}"
    );
    let number = error("LIB-NUMBER");
    assert!(
        number.contains("`final_answer` must be a string (the reply's text), got a number: 42"),
        "{number}"
    );
    let unknown = error("LIB-UNKNOWN");
    assert_eq!(
        unknown,
        "the product's reply: contexts[0].entity: `loan_period` is not an active entity of the knowledge base (did you mean `loan_periods`?)"
    );
    assert!(case(&log, "LIB-UNKNOWN")["contexts_from"] == "target");
    let plain = case(&log, "LIB-PLAIN");
    assert_eq!(plain["score"], 100, "{plain}");
    assert_eq!(log["answer"]["errors"], 3, "{}", log["answer"]);

    // Every saved file is small: none holds the flood.
    for entry in std::fs::read_dir(lib.scratch.path("results")).unwrap() {
        let path = entry.unwrap().path();
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size < 1 << 20, "{} is {size} bytes", path.display());
    }
    assert_eq!(
        lib.stats.received.load(Ordering::SeqCst),
        0,
        "no judge call"
    );
}

#[test]
fn a_bank_with_every_metric_off_needs_no_judge_and_says_so() {
    let lib = library();
    bank(&lib);
    // The default judge (anthropic/…), no key for it, and no metric anywhere.
    let toml = lib
        .scratch
        .read("assay.toml")
        .replace("judge_model = \"openai/scripted-judge\"", "metrics = []");
    lib.scratch.write("assay.toml", &toml);
    lib.scratch.write_json(
        "test_banks/answer/library.json",
        &json!({"bank_type": "ANSWER", "version": "1.0", "tests": [
            {"test_id": "LIB-PLAIN", "message": "How long can I keep a book I borrowed?",
             "user_state": {"user_type": "PATRON"},
             "assert": [{"type": "contains", "value": "three weeks"}]}
        ]}),
    );
    let run = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args([
            "run",
            lib.scratch.root().to_str().unwrap(),
            "--banks",
            "answer",
            "--json",
        ])
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let log: Value = serde_json::from_slice(&run.stdout).unwrap();
    let setup = log["setup"]["answer"].as_str().unwrap();
    assert!(
        setup.ends_with("no judge (every metric is off: assertions and trajectory only)"),
        "{setup}"
    );
    assert!(!log.to_string().contains("judged by"), "{log}");
    assert_eq!(case(&log, "LIB-PLAIN")["score"], 100);

    // One case that asks for a metric brings the judge back, and with it its key.
    lib.scratch.write_json(
        "test_banks/answer/library.json",
        &json!({"bank_type": "ANSWER", "version": "1.0", "tests": [
            {"test_id": "LIB-PLAIN", "message": "How long can I keep a book I borrowed?",
             "user_state": {"user_type": "PATRON"}, "metrics": ["faithfulness"]}
        ]}),
    );
    let run = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args([
            "run",
            lib.scratch.root().to_str().unwrap(),
            "--banks",
            "answer",
        ])
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
}
