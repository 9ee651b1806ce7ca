//! The semantic bank's IR metrics (recall@k, MRR, nDCG@k) agree with trec_eval's, through
//! `pytrec_eval` (`bench/retrieval/ir_check.py`), to 1e-9, on the example's runs.
//!
//! The Python comes from `ASSAY_TEST_PYTHON` (default `target/test-venv/bin/python`, made by
//! `scripts/ci-setup`). Without it these tests fail with that instruction, unless
//! `ASSAY_SKIP_PYTHON_TESTS=1` says to skip them.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::Scratch;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> Option<PathBuf> {
    let python = std::env::var_os("ASSAY_TEST_PYTHON").map_or_else(
        || workspace().join("target/test-venv/bin/python"),
        PathBuf::from,
    );
    let ok = Command::new(&python)
        .args(["-c", "import pytrec_eval"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    if std::env::var("ASSAY_SKIP_PYTHON_TESTS").as_deref() == Ok("1") {
        eprintln!("skipped: no pytrec_eval at {}", python.display());
        return None;
    }
    panic!(
        "pytrec_eval is missing at {}: run scripts/ci-setup (or set ASSAY_TEST_PYTHON)",
        python.display()
    );
}

/// Runs the example's semantic bank with `extra` flags and checks its metrics with trec_eval.
fn check(extra: &[&str]) -> serde_json::Value {
    let Some(python) = python() else {
        return serde_json::Value::Null;
    };
    // With MiniLM, a copy of the example whose store already holds the embeddings.
    let p = match extra {
        ["--embedder", model] => Scratch::example_embedded(model, false),
        _ => Scratch::example(),
    };
    let mut args = vec!["run", "--banks", "semantic", "--json", "--no-save"];
    args.extend_from_slice(extra);
    let run = p.assay(&args);
    assert!(run.code == 0 || run.code == 1, "{run:?}");
    let log = run.json();
    let ir = &log["semantic"]["ir"];
    assert!(ir["cases"].as_u64().unwrap() > 80, "{ir}");
    p.write("runlog.json", &run.stdout);
    let out = Command::new(python)
        .arg(workspace().join("bench/retrieval/ir_check.py"))
        .arg(p.path("runlog.json"))
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "trec_eval disagrees:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["cases"], ir["cases"]);
    assert!(report["topics"].as_u64().unwrap() > 10);
    report
}

#[test]
fn ir_metrics_agree_with_trec_eval_builtin() {
    check(&[]);
}

#[test]
fn ir_metrics_agree_with_trec_eval_minilm() {
    let Some(model) = crate::quality::minilm() else {
        return;
    };
    check(&["--embedder", &model]);
}
