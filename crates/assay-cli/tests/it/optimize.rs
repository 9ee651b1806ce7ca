//! `assay optimize` end to end: the real binary against a local OpenAI-compatible server whose
//! answers depend on the injected prompts (`examples/prompt_provider.rs`): a case is answered
//! right only when enough agents' system prompts carry the `[[GOOD]]` marker, so the best
//! combination is known (every agent's variant 2) and the test checks the optimizer finds it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::prompt_provider::{PromptStats, prompt_router};
use crate::support::Scratch;

pub(crate) struct Provider {
    pub(crate) url: String,
    pub(crate) stats: Arc<PromptStats>,
}

pub(crate) fn provider(latency: Duration) -> Provider {
    let stats = Arc::new(PromptStats::default());
    let url = crate::support::serve(prompt_router(latency, stats.clone()));
    Provider { url, stats }
}

const AGENTS: [&str; 3] = ["planner", "expert", "finalizer"];
const ENV: [(&str, &str); 1] = [("OPENAI_API_KEY", "test-key")];

/// Three agents with three prompts each (27 combinations): index 1 is a plain variant, index 2
/// carries the marker. Optimization cases need 3, 1, 2 and 3 marked agents; evaluation cases
/// likewise.
pub(crate) fn project(provider: &Provider, extra: &str) -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let s = Scratch::copy_of(dir.path());
    for a in AGENTS {
        s.write(
            &format!("prompts/{a}_system_prompt.txt"),
            &format!("You are the {a}. Be brief.\n"),
        );
        s.write(
            &format!("prompt_variations/{a}/v1.txt"),
            &format!("You are the {a}. Be thorough.\n"),
        );
        s.write(
            &format!("prompt_variations/{a}/v2.txt"),
            &format!("[[GOOD]] You are the {a}. Check every fact.\n"),
        );
    }
    let line = |q: &str, key: &str, d: u32| {
        format!(
            "{{\"question\": \"{q} [key:{key}] [d:{d}]\", \"files\": [], \"answer\": \"{key}\"}}\n"
        )
    };
    s.write(
        "cases/opt.jsonl",
        &[
            line("Capital of France?", "Paris", 3),
            line("Largest planet?", "Jupiter", 1),
            line("Author of Hamlet?", "Shakespeare", 2),
            line("Chemical symbol of gold?", "Au", 3),
        ]
        .concat(),
    );
    s.write(
        "cases/context/notes.txt",
        "Mount Kilimanjaro is the tallest mountain in Africa.\n",
    );
    s.write(
        "cases/eval.jsonl",
        &[line("Tallest mountain in Africa?", "Kilimanjaro", 3), line("Boiling point of water in C?", "100", 2), line("Red planet?", "Mars", 1)].concat().replace(
            "\"Tallest mountain in Africa? [key:Kilimanjaro] [d:3]\", \"files\": []",
            "\"Tallest mountain in Africa? [key:Kilimanjaro] [d:3]\", \"files\": [\"context/notes.txt\"]",
        ),
    );
    s.write(
        "assay.toml",
        &format!(
            "[providers]\nopenai_base_url = \"{}/v1\"\nmax_retries = 1\n\n[optimize]\nmodel = \"openai/fake-agent\"\ngrader_model = \"openai/fake-grader\"\nchain = [\"planner\", \"expert\", \"finalizer\"]\n{extra}",
            provider.url
        ),
    );
    s
}

pub(crate) fn args<'a>(name: &'a str, trials: &'a str) -> Vec<&'a str> {
    vec![
        "optimize",
        "--experiment-name",
        name,
        "--optimization-trials",
        trials,
        "--optimization-test-cases",
        "cases/opt.jsonl",
        "--evaluation-test-cases",
        "cases/eval.jsonl",
        "--json",
    ]
}

pub(crate) fn run_in(s: &Scratch, a: &[&str]) -> crate::support::Run {
    // Relative case paths resolve against the project directory.
    s.assay_env(a, &ENV)
}

#[test]
fn the_optimizer_finds_the_known_best_combination_in_all_three_steps() {
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    let run = run_in(&s, &args("exp1", "27"));
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    // Exhaustive: the whole space (27) fits the budget.
    assert!(
        report["search_mode"]
            .as_str()
            .unwrap()
            .contains("exhaustive"),
        "{}",
        report["search_mode"]
    );
    assert_eq!(report["trials"].as_array().unwrap().len(), 27);
    assert_eq!(
        report["trials"][0]["params"],
        serde_json::json!({"expert": 0, "finalizer": 0, "planner": 0})
    );
    assert_eq!(
        report["best_params"],
        serde_json::json!({"expert": 2, "finalizer": 2, "planner": 2})
    );
    assert_eq!(report["baseline"]["metrics"]["factually_correct_count"], 0);
    let best = report["best_trial"].as_u64().unwrap() as usize;
    assert_eq!(
        report["trials"][best]["metrics"]["factually_correct_count"],
        4
    );
    // Step 3: the best prompts answer every held-out case; the baseline none.
    assert_eq!(
        report["evaluation"]["metrics"]["factually_correct_count"],
        3
    );
    assert_eq!(
        report["evaluation_baseline"]["metrics"]["factually_correct_count"],
        0
    );
    assert_eq!(report["comparisons"].as_array().unwrap().len(), 2);
    assert!(
        report["comparisons"][1]["significance"]["verdict"]
            .as_str()
            .unwrap()
            .contains("3 cases are too few")
    );
    for a in AGENTS {
        let text = s.read(&format!(
            "experiments/exp1/optimized_prompts/{a}_system_prompt.txt"
        ));
        assert!(text.contains("[[GOOD]]"), "{a}: {text}");
        let base = s.read(&format!(
            "experiments/exp1/baseline_prompts/{a}_system_prompt.txt"
        ));
        assert!(base.contains("Be brief"));
    }
    for log in [
        "baseline_run.log",
        "optimization_run.log",
        "evaluation_run.log",
    ] {
        assert!(
            s.path(&format!("experiments/exp1/logs/{log}")).exists(),
            "{log}"
        );
    }
    assert!(s.path("experiments/exp1/logs/error_logs").is_dir());
    let md = s.read("experiments/exp1/report.md");
    assert!(md.contains("## Baseline vs optimized") && md.contains("### Pareto front"));
    // The self-contained HTML report: the page's content, no script.
    let html = s.read("experiments/exp1/report.html");
    assert!(html.starts_with("<!doctype html>") && !html.contains("<script"));
    let front = report["pareto_front"].as_array().unwrap().len();
    let chart = &html[html.find("id=\"pareto-chart\"").unwrap()..];
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert_eq!(chart.matches("class=\"front\"").count(), front);
    assert!(
        html.contains("[[GOOD]]"),
        "the best prompts, diffed against the baseline"
    );
    // Each journal line records the usage since the line before.
    let journal = s.read("experiments/exp1/journal.jsonl");
    assert!(journal.lines().skip(1).all(|l| l.contains("\"usage\":{")));
    // Local tracking: the three runs.
    for r in ["exp1_baseline", "exp1_optimize", "exp1_eval"] {
        let v: Value =
            serde_json::from_str(&s.read(&format!("experiments/exp1/tracking/{r}.json"))).unwrap();
        assert_eq!(v["name"], r);
    }
    // Trial 0 reused step 1; the chain's calls: baseline 4 cases × 3 agents, 26 trials, eval 2 × 3
    // cases, all answered from the server at most once per distinct request.
    let agent_calls = p.stats.agent.load(Ordering::SeqCst);
    let naive = (27 + 1) * 4 * 3 + 2 * 3 * 3;
    assert!(
        agent_calls < naive as u64,
        "{agent_calls} agent calls, naive {naive}"
    );
    // The Optuna journal: one create-study line and one create-trial per trial.
    let journal = s.read("experiments/exp1/optuna_journal.log");
    assert_eq!(
        journal
            .lines()
            .filter(|l| l.contains("\"op_code\":4"))
            .count(),
        27
    );
}

#[test]
fn a_second_optimize_is_refused_while_the_first_runs_and_a_killed_run_leaves_no_stale_lock() {
    let p = provider(Duration::from_millis(40));
    let s = project(&p, "");
    let a = args("slow", "27");
    let mut first = s.spawn(&a, &ENV);
    let journal = s.path("experiments/slow/journal.jsonl");
    let start = Instant::now();
    while !journal.exists() && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = run_in(&s, &args("other", "3"));
    assert_eq!(second.code, 2, "{second:?}");
    let pid = first.id().to_string();
    assert!(second.stderr.contains(&pid), "{second:?}");
    assert!(second.stderr.contains("optimize"), "{second:?}");
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    // The killed holder's lock.json is still there: the OS lock, not the file, decides.
    assert!(s.path(".assay/lock.json").exists());
    let third = run_in(&s, &args("third", "2"));
    assert_eq!(third.code, 0, "{third:?}");
}

pub(crate) fn trials_of(v: &Value) -> Vec<(Value, Value)> {
    v["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["params"].clone(), t["values"].clone()))
        .collect()
}

#[test]
fn resume_after_kill_finishes_with_the_same_result_as_an_uninterrupted_run() {
    let server = provider(Duration::from_millis(15));
    let scratch = project(&server, "");
    let mut first = scratch.spawn(&args("res", "14"), &ENV);
    let journal = scratch.path("experiments/res/journal.jsonl");
    let start = Instant::now();
    loop {
        let lines = std::fs::read_to_string(&journal)
            .map_or(0, |t| t.matches("\"kind\":\"trial\"").count());
        if lines >= 4 || start.elapsed() > Duration::from_secs(120) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let again = run_in(&scratch, &args("res", "14"));
    assert_eq!(
        again.code, 2,
        "without --resume an existing experiment is refused: {again:?}"
    );
    assert!(again.stderr.contains("--resume"), "{again:?}");
    let mut resume = args("res", "14");
    resume.push("--resume");
    let resumed = run_in(&scratch, &resume);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    let fresh_project = project(&server, "");
    let fresh = run_in(&fresh_project, &args("res", "14"));
    assert_eq!(fresh.code, 0, "{fresh:?}");
    let (resumed, fresh) = (resumed.json(), fresh.json());
    assert_eq!(trials_of(&resumed), trials_of(&fresh));
    assert_eq!(resumed["best_params"], fresh["best_params"]);
    assert_eq!(
        resumed["evaluation"]["metrics"],
        fresh["evaluation"]["metrics"]
    );
}

#[test]
fn bad_optimize_input_is_exit_2_and_writes_nothing() {
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    for trials in ["0", "-1"] {
        let run = run_in(&s, &args("bad", trials));
        assert_eq!(run.code, 2, "{run:?}");
    }
    s.write(
        "cases/broken.jsonl",
        "{\"question\": \"q\", \"files\": []}\n",
    );
    let mut a = args("bad", "3");
    a[6] = "cases/broken.jsonl";
    let run = run_in(&s, &a);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("broken.jsonl:1") && run.stderr.contains("`answer`"),
        "{run:?}"
    );
    s.write(
        "assay.toml",
        "[optimize]\ndirections = [\"maximize vibes\"]\n",
    );
    let run = run_in(&s, &args("bad", "3"));
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("unknown metric `vibes`"), "{run:?}");
    assert!(!s.path("experiments").exists());
}

#[test]
fn a_command_target_whose_prompts_do_not_arrive_fails_the_dry_check_before_any_call() {
    let p = provider(Duration::ZERO);
    let s = project(
        &p,
        "target = \"command\"\ncommand = [\"python3\", \"-c\", \"import json,sys; json.load(sys.stdin); print(json.dumps({'prompt_sha256': {}}))\"]\n",
    );
    let run = run_in(&s, &args("cmd", "2"));
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("do not reach the target"), "{run:?}");
    assert_eq!(
        p.stats.agent.load(Ordering::SeqCst) + p.stats.grader.load(Ordering::SeqCst),
        0
    );
}

fn venv_python() -> std::path::PathBuf {
    let python = crate::support::test_python();
    assert!(
        std::process::Command::new(&python)
            .args(["-c", "import mlflow, optuna"])
            .status()
            .is_ok_and(|s| s.success()),
        "{} lacks mlflow or optuna: run scripts/ci-setup",
        python.display()
    );
    python
}

const READ_BACK: &str = r#"
import json, sys, urllib.request
base = sys.argv[1] + "/api/2.0/mlflow"
def post(ep, body):
    r = urllib.request.Request(f"{base}/{ep}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(r))
exp = json.load(urllib.request.urlopen(f"{base}/experiments/get-by-name?experiment_name=" + sys.argv[2]))
eid = exp["experiment"]["experiment_id"]
runs = post("runs/search", {"experiment_ids": [eid], "max_results": 10})["runs"]
out = {}
for r in runs:
    name = r["info"]["run_name"]
    out[name] = {m["key"]: m["value"] for m in r["data"].get("metrics", [])}
    out[name]["_params"] = len(r["data"].get("params", []))
import optuna
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
storage = JournalStorage(JournalFileBackend(sys.argv[3]))
study = optuna.load_study(study_name=sys.argv[2], storage=storage)
out["_optuna"] = {"trials": len(study.trials), "complete": len([t for t in study.trials if t.state.name == "COMPLETE"]),
                  "first_params": study.trials[0].params, "best": [t.number for t in study.best_trials]}
print(json.dumps(out))
"#;

#[test]
fn tracking_to_a_real_mlflow_server_and_an_optuna_journal_optuna_reads() {
    let python = venv_python();
    let server = crate::otel_backends::start_mlflow();
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    let mut a = args("mlexp", "6");
    a.extend(["--mlflow-uri", &server.endpoint]);
    let run = run_in(&s, &a);
    assert_eq!(run.code, 0, "{run:?}");
    let journal = s.path("experiments/mlexp/optuna_journal.log");
    let out = std::process::Command::new(&python)
        .args(["-c", READ_BACK, &server.endpoint, "mlexp"])
        .arg(&journal)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in ["mlexp_baseline", "mlexp_optimize", "mlexp_eval"] {
        assert!(v[r]["factually_correct_count"].is_number(), "{r}: {v}");
        assert!(v[r]["_params"].as_u64().unwrap() > 5, "{r}: {v}");
    }
    assert_eq!(v["mlexp_baseline"]["factually_correct_count"], 0.0);
    assert_eq!(v["_optuna"]["trials"], 6);
    assert_eq!(
        v["_optuna"]["first_params"],
        serde_json::json!({"expert": 0, "finalizer": 0, "planner": 0})
    );
}

#[test]
fn evaluate_scores_a_prompt_folder_against_the_production_prompts_on_held_out_cases() {
    // Step 3 alone: a folder with every agent's marked prompt answers all three held-out cases;
    // the production prompts (the paired baseline) none.
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    for a in AGENTS {
        s.write(
            &format!("candidate/{a}_system_prompt.txt"),
            &format!("[[GOOD]] You are the {a}. Check every fact.\n"),
        );
    }
    let run = run_in(
        &s,
        &[
            "evaluate",
            "--prompts",
            "candidate",
            "--evaluation-test-cases",
            "cases/eval.jsonl",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let v = run.json();
    assert_eq!(
        v["evaluation"]["metrics"]["factually_correct_count"], 3,
        "{v}"
    );
    assert_eq!(
        v["evaluation_baseline"]["metrics"]["factually_correct_count"], 0,
        "{v}"
    );
    assert!(p.stats.agent.load(Ordering::SeqCst) > 0);

    // A folder that lacks an agent's prompt is bad input, refused before any call.
    let before = p.stats.agent.load(Ordering::SeqCst);
    std::fs::remove_file(s.path("candidate/expert_system_prompt.txt")).unwrap();
    let missing = run_in(
        &s,
        &[
            "evaluate",
            "--prompts",
            "candidate",
            "--evaluation-test-cases",
            "cases/eval.jsonl",
        ],
    );
    assert_eq!(missing.code, 2, "{missing:?}");
    assert!(missing.stderr.contains("expert"), "{}", missing.stderr);
    assert_eq!(p.stats.agent.load(Ordering::SeqCst), before);
}

#[test]
fn a_budget_smaller_than_one_case_stops_before_any_model_call() {
    // A declared price for the agents' model: the estimate gives a cost per case, and
    // `--budget` is checked before each dispatch.
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    s.edit(
        "assay.toml",
        "max_retries = 1\n",
        "max_retries = 1\n\n[providers.prices]\n\"openai/fake-agent\" = { input = 0.25, output = 2.0 }\n",
    );
    // The grader is not priced: the cap could not be enforced, so it is refused up front.
    let mut a = args("tight", "5");
    a.extend(["--budget", "0.0000001"]);
    let unpriced = run_in(&s, &a);
    assert_eq!(unpriced.code, 2, "{unpriced:?}");
    assert!(
        unpriced.stderr.contains("no known price"),
        "{}",
        unpriced.stderr
    );

    s.edit(
        "assay.toml",
        "[providers.prices]\n",
        "[providers.prices]\n\"openai/fake-grader\" = 3\n",
    );
    let run = run_in(&s, &a);
    assert_eq!(
        run.code, 3,
        "the budget halts the run as an infrastructure stop: {run:?}"
    );
    assert!(run.stderr.contains("--budget"), "{}", run.stderr);
    assert_eq!(
        p.stats.agent.load(Ordering::SeqCst),
        0,
        "nothing was dispatched over the budget"
    );
}

#[test]
fn racing_prunes_clearly_worse_combinations_on_half_the_cases() {
    // Eight cases that any one marked agent answers: every combination with a marked prompt
    // answers all of them, every combination without one answers none. Once a marked
    // combination is the best (trial 2 in the exhaustive order), each unmarked one is clearly
    // worse on the first half of the cases and is dropped without the second half.
    let p = provider(Duration::ZERO);
    let s = project(&p, "");
    let line = |q: &str, key: &str| {
        format!(
            "{{\"question\": \"{q} [key:{key}] [d:1]\", \"files\": [], \"answer\": \"{key}\"}}\n"
        )
    };
    let facts = [
        ("Capital of France?", "Paris"),
        ("Largest planet?", "Jupiter"),
        ("Author of Hamlet?", "Shakespeare"),
        ("Chemical symbol of gold?", "Au"),
        ("Capital of Japan?", "Tokyo"),
        ("Smallest prime?", "2"),
        ("Longest river in Africa?", "Nile"),
        ("Closest star to Earth?", "Sun"),
    ];
    s.write(
        "cases/opt.jsonl",
        &facts.iter().map(|(q, k)| line(q, k)).collect::<String>(),
    );
    let mut a = args("race", "27");
    a.push("--racing");
    let run = run_in(&s, &a);
    assert_eq!(run.code, 0, "{run:?}");
    let report = run.json();
    let trials = report["trials"].as_array().unwrap();
    let marked = |t: &Value| t["params"].as_object().unwrap().values().any(|v| v == 2);
    let pruned: Vec<&Value> = trials.iter().filter(|t| t["outcome"] == "pruned").collect();
    // The unmarked combinations after the best appeared: all of {0,1}^3 but the baseline
    // (trial 0) and trial 1 (no better combination known yet).
    assert_eq!(
        pruned.len(),
        6,
        "{:?}",
        pruned.iter().map(|t| &t["params"]).collect::<Vec<_>>()
    );
    for t in &pruned {
        assert!(!marked(t), "a good combination was pruned: {t}");
        assert_eq!(t["cases"].as_array().unwrap().len(), 4, "{t}");
        assert!(
            t["note"].as_str().is_some_and(|n| n.contains("best")),
            "{t}"
        );
    }
    for t in trials.iter().filter(|t| marked(t)) {
        assert_eq!(t["outcome"], "complete", "{t}");
        assert_eq!(t["metrics"]["factually_correct_count"], 8, "{t}");
    }
    let best = report["best_trial"].as_u64().unwrap() as usize;
    assert_eq!(trials[best]["metrics"]["factually_correct_count"], 8);
}

/// A system under test outside assay, in Python: it answers a case right when at least `d` of
/// the prompts it received carry the marker (`[[GOOD]]`), and answers the dry run with each
/// prompt's SHA-256. As a command (JSON on stdin and stdout) or, with `--serve`, as an HTTP
/// endpoint (POST, the same JSON; the port is printed first).
pub(crate) const PY_TARGET: &str = r#"
import hashlib, json, re, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

def answer(req):
    prompts = req["prompts"]
    if req.get("dry_run"):
        return {"prompt_sha256": {a: hashlib.sha256(p.encode()).hexdigest() for a, p in prompts.items()}}
    q = req["question"]
    key = re.search(r"\[key:([^\]]+)\]", q).group(1)
    need = int(re.search(r"\[d:(\d+)\]", q).group(1))
    good = sum("[[GOOD]]" in p for p in prompts.values())
    return {"final_answer": key if good >= need else "not sure"}

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        out = json.dumps(answer(json.loads(body))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *args):
        pass

if len(sys.argv) > 1 and sys.argv[1] == "--serve":
    server = HTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()
else:
    print(json.dumps(answer(json.load(sys.stdin))))
"#;

/// Starts the target script at `path` as an HTTP target (`--serve`), with `env`: the process
/// (killed when dropped) and its URL.
pub(crate) fn serve_target(path: &str, env: &[(&str, &str)]) -> (Child, String) {
    use std::io::BufRead;
    let mut server = std::process::Command::new("python3")
        .args([path, "--serve"])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let url = format!("http://127.0.0.1:{}/answer", port.trim());
    (Child(server), url)
}

pub(crate) struct Child(pub(crate) std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn command_and_http_targets_receive_the_prompts_and_the_optimizer_finds_the_best() {
    let p = provider(Duration::ZERO);
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), PY_TARGET).unwrap();
    let path = script.path().display().to_string();

    let (_server, url) = serve_target(&path, &[]);

    for (name, target) in [
        (
            "cmd",
            format!("target = \"command\"\ncommand = [\"python3\", \"{path}\"]\n"),
        ),
        ("web", format!("target = \"http\"\nurl = \"{url}\"\n")),
    ] {
        let s = project(&p, &target);
        let run = run_in(&s, &args(name, "27"));
        assert_eq!(run.code, 0, "{name}: {run:?}");
        let report = run.json();
        assert_eq!(
            report["best_params"],
            serde_json::json!({"expert": 2, "finalizer": 2, "planner": 2}),
            "{name}"
        );
        assert_eq!(
            report["evaluation"]["metrics"]["factually_correct_count"], 3,
            "{name}"
        );
        assert_eq!(
            report["evaluation_baseline"]["metrics"]["factually_correct_count"], 0,
            "{name}"
        );
    }
    // The chain's model was never called: the targets answered; only the grader was.
    assert_eq!(p.stats.agent.load(Ordering::SeqCst), 0);
    assert!(p.stats.grader.load(Ordering::SeqCst) > 0);
}

/// Issue 18: the bundled gaia-mini grader labels, measured against the scripted grader (which
/// gives 1.0 when the answer contains the expected one, else 0.2): the measure of a grader
/// whose calls on correctness match the labels exactly, and whose 0-1 scores are coarser.
#[test]
fn the_example_grader_labels_measure_the_llm_rubric_grader() {
    let p = provider(Duration::ZERO);
    let s = Scratch::copy_of(&crate::support::repo_path("examples/gaia-mini"));
    let toml = s.read("assay.toml").replace(
        "grader_model = \"anthropic/claude-sonnet-4-6\"",
        "grader_model = \"openai/fake-grader\"",
    );
    s.write(
        "assay.toml",
        &format!("{toml}\n[providers]\nopenai_base_url = \"{}/v1\"\n", p.url),
    );
    let root = s.root.to_str().unwrap().to_owned();
    let labels = s.path("labels/grader_labels.yaml");
    let run = crate::support::assay_env(
        &[
            "judge",
            "agree",
            labels.to_str().unwrap(),
            "--project",
            &root,
            "--json",
        ],
        &ENV,
    );
    assert_eq!(run.code, 0, "{run:?}");
    let a = run.json();
    assert_eq!(
        (a["kind"].as_str(), a["items"].as_u64()),
        (Some("rubric"), Some(10))
    );
    let criterion = |id: &str| {
        a["measurement"]["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("no {id}: {a}"))
            .clone()
    };
    // The scripted grader's correctness calls are the labels' (containment), so plain kappa 1.
    assert_eq!(criterion("factually_correct")["kappa"], 1.0);
    assert_eq!(criterion("factually_correct")["kappa_weights"], "none");
    // Its overall is 1.0 or 0.2 where the labels say 1.0 or 0.1-0.2: all within a point of ten.
    assert_eq!(criterion("overall")["agreement"], 1.0);
    let v = &a["measurement"]["verdicts"];
    assert_eq!(
        (v["n"].as_u64(), v["agreement"].as_f64()),
        (Some(10), Some(1.0))
    );
    assert_eq!(a["judge_version"].as_str().unwrap().len(), 16);
    assert_eq!(
        p.stats.grader.load(std::sync::atomic::Ordering::SeqCst),
        10,
        "one grading a label"
    );
}
