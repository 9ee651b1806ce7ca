//! The worker pool against small scripted workers (Python from the system, as the other
//! process tests use): replies by id, the product's errors, garbage, deaths, timeouts,
//! restarts and the start-up failures that stop restarting.

use std::collections::BTreeMap;

use super::*;
use crate::target::{Target, TargetRequest};

/// A worker that answers `echo:<question>`; a question `die` makes it exit, `garbage` makes
/// it print a line that is not a reply, `slow` sleeps 3 s, `fail` answers with an error, and
/// `pid` answers its process id.
const SCRIPT: &str = r#"
import json, os, sys, time
for line in sys.stdin:
    req = json.loads(line)
    q = req.get("question", "")
    if req.get("dry_run"):
        import hashlib
        h = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in req["prompts"].items()}
        out = {"id": req["id"], "prompt_sha256": h}
    elif q == "die":
        sys.stderr.write("dying on purpose\n"); sys.stderr.flush()
        os._exit(7)
    elif q == "garbage":
        print("hello, this is not JSON", flush=True)
        continue
    elif q == "slow":
        time.sleep(3)
        out = {"id": req["id"], "final_answer": "late"}
    elif q == "fail":
        out = {"id": req["id"], "error": "ValueError: no such thing"}
    elif q == "pid":
        out = {"id": req["id"], "final_answer": str(os.getpid())}
    else:
        out = {"id": req["id"], "final_answer": "echo:" + q, "contexts": [{"text": "c"}]}
    sys.stdout.write(json.dumps(out) + "\n"); sys.stdout.flush()
"#;

fn python() -> String {
    std::env::var("ASSAY_TEST_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn pool(workers: usize, script: &str, timeout_ms: u64) -> WorkerTarget {
    WorkerTarget::new(
        "worker `test`".into(),
        vec![python(), "-c".into(), script.into()],
        std::env::temp_dir(),
        workers,
        Duration::from_millis(timeout_ms),
        true,
        1 << 20,
    )
}

async fn ask(t: &WorkerTarget, q: &str) -> Result<String, TargetError> {
    t.respond(&BTreeMap::new(), &TargetRequest::question(q, &[]))
        .await
        .map(|r| r.answered.final_answer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_answers_many_requests_by_id() {
    let t = pool(1, SCRIPT, 10_000);
    for i in 0..20 {
        assert_eq!(
            ask(&t, &format!("q{i}")).await.unwrap(),
            format!("echo:q{i}")
        );
    }
    assert_eq!(t.starts(), 1, "one process for every request");
    let r = t
        .respond(&BTreeMap::new(), &TargetRequest::question("x", &[]))
        .await
        .unwrap();
    assert_eq!(r.contexts.unwrap()[0].text, "c");
    t.dry_check(&["a".into(), "b".into()]).await.unwrap();
    Target::close(&t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_spread_over_the_workers() {
    let t = Arc::new(pool(3, SCRIPT, 10_000));
    let mut pids = std::collections::BTreeSet::new();
    let asks: Vec<_> = (0..9)
        .map(|_| {
            let t = Arc::clone(&t);
            tokio::spawn(async move { ask(&t, "pid").await.unwrap() })
        })
        .collect();
    for a in asks {
        pids.insert(a.await.unwrap());
    }
    assert!(
        pids.len() >= 2,
        "concurrent requests use several workers: {pids:?}"
    );
    assert_eq!(t.starts(), 3);
    Target::close(&*t).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_products_error_fails_only_its_request() {
    let t = pool(1, SCRIPT, 10_000);
    let e = ask(&t, "fail").await.unwrap_err();
    assert!(e.is_infrastructure());
    assert!(e.to_string().contains("ValueError: no such thing"), "{e}");
    assert_eq!(ask(&t, "after").await.unwrap(), "echo:after");
    assert_eq!(t.starts(), 1, "an error reply keeps the worker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_dies_fails_its_request_with_stderr_and_is_restarted() {
    let t = pool(1, SCRIPT, 10_000);
    assert_eq!(ask(&t, "before").await.unwrap(), "echo:before");
    let e = ask(&t, "die").await.unwrap_err().to_string();
    assert!(e.contains("it exited"), "{e}");
    assert!(e.contains("dying on purpose"), "stderr kept: {e}");
    assert_eq!(ask(&t, "after").await.unwrap(), "echo:after");
    assert_eq!(t.starts(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_on_stdout_stops_the_worker_and_fails_only_what_it_held() {
    let t = pool(1, SCRIPT, 10_000);
    assert_eq!(ask(&t, "before").await.unwrap(), "echo:before");
    let e = ask(&t, "garbage").await.unwrap_err().to_string();
    assert!(e.contains("not a reply"), "{e}");
    assert!(e.contains("hello, this is not JSON"), "{e}");
    assert_eq!(ask(&t, "after").await.unwrap(), "echo:after");
    assert_eq!(t.starts(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_timeout_errors_and_the_next_gets_a_fresh_worker() {
    let t = pool(1, SCRIPT, 500);
    let e = ask(&t, "slow").await.unwrap_err();
    assert!(e.is_unreachable(), "{e}");
    assert!(e.to_string().contains("timed out after"), "{e}");
    assert_eq!(ask(&t, "after").await.unwrap(), "echo:after");
    assert_eq!(t.starts(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_start_is_not_started_for_every_request() {
    let t = pool(
        1,
        "import sys; sys.stderr.write('ImportError: no module named bot\\n'); sys.exit(2)",
        10_000,
    );
    for _ in 0..3 {
        let e = ask(&t, "q").await.unwrap_err().to_string();
        assert!(e.contains("no module named bot"), "{e}");
    }
    let e = ask(&t, "q").await.unwrap_err().to_string();
    assert!(e.contains("not started again"), "{e}");
    assert!(e.contains("no module named bot"), "the reason stays: {e}");
    assert!(t.starts() <= 4, "{}", t.starts());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_over_the_cap_is_refused() {
    let mut t = pool(
        1,
        "import sys, json\nfor l in sys.stdin:\n r = json.loads(l)\n print(json.dumps({'id': r['id'], 'final_answer': 'x' * 5000}), flush=True)",
        10_000,
    );
    t.max_reply_bytes = 1000;
    let e = ask(&t, "q").await.unwrap_err().to_string();
    assert!(e.contains("longer than 1000 bytes"), "{e}");
}

#[test]
fn function_targets_parse_and_refuse_bad_specs() {
    let p = FunctionTarget::parse("python:bot.answers:answer")
        .unwrap()
        .unwrap();
    assert_eq!(p.language, "python");
    let cmd = p.command(Path::new("."), Some("py"));
    assert_eq!(cmd[0], "py");
    assert_eq!(cmd[1], "-c");
    assert_eq!(cmd[3], "bot.answers:answer");
    assert!(
        FunctionTarget::parse("python:bot.answers")
            .unwrap()
            .unwrap_err()
            .contains("package.module:function")
    );
    assert!(FunctionTarget::parse("python:bot-x:f").unwrap().is_err());
    let n = FunctionTarget::parse("node:./src/bot.js#answer")
        .unwrap()
        .unwrap();
    let cmd = n.command(Path::new("."), Some("nodejs"));
    assert_eq!(cmd.last().map(String::as_str), Some("./src/bot.js#answer"));
    assert!(FunctionTarget::parse("node:#answer").unwrap().is_err());
    assert!(FunctionTarget::parse("node:./bot.js#").unwrap().is_err());
    assert!(FunctionTarget::parse("command").is_none());
}
