//! The web UI in a real browser: headless Chromium driven through chromedriver (WebDriver)
//! with fantoccini, against `assay serve` on a scratch copy of the example project. Signs in,
//! creates an entity, edits it, sees version 2 and its diff, runs a retrieval test with the
//! explain view, opens a run and a run diff, and checks that markup injected into an entity
//! never executes. Then, in the same browser session, the optimizer and the simulator: opens an
//! experiment and counts the Pareto chart's front points and finds the baseline, opens a
//! trial, watches a running `assay optimize` (a scripted provider, `examples/prompt_provider.rs`)
//! count its trials up, is refused a promotion while it holds the project lock and without the
//! admin token, promotes with it and reads the history line, opens a simulation report and a
//! transcript, expands a tool call, and compares two reports; markup injected into prompts,
//! questions, answers, turns, tool arguments and results, reasoning and scenario names never
//! runs. Screenshots go to `target/ui-screenshots/` (`scripts/ui-screenshots` reproduces
//! them).
//!
//! Needs Debian's `chromium` and `chromium-driver` (`scripts/ci-setup` installs them); the
//! test fails, never skips, when they are missing.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use crate::support::{Scratch, repo_path};

const TOKEN: &str = "browser-test-token";
/// Markup that would run script if it were ever put into a page unescaped.
const INJECT: &str =
    "<img src=x onerror=\"document.title='pwned';window.__xss=1\"><script>window.__xss=2</script>";

/// Kills a child process when the test ends, passed or not.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The first of `names` on the PATH (or the path in `env`, when set).
fn find_tool(env: &str, names: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn screenshots_dir() -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo_path("target"), PathBuf::from);
    let dir = target.join("ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shot(client: &Client, dir: &Path, name: &str) {
    let png = client.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "{name}: not a PNG");
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

/// Starts chromedriver on a free port and waits until it answers.
fn chromedriver() -> (Kill, String) {
    let driver = find_tool("ASSAY_CHROMEDRIVER", &["chromedriver"]).unwrap_or_else(|| {
        panic!(
            "chromedriver is not installed: run scripts/ci-setup (it installs Debian's chromium and chromium-driver) or set ASSAY_CHROMEDRIVER"
        )
    });
    assert!(
        find_tool(
            "ASSAY_CHROMIUM",
            &["chromium", "chromium-browser", "google-chrome"]
        )
        .is_some(),
        "chromium is not installed: run scripts/ci-setup (it installs Debian's chromium and chromium-driver) or set ASSAY_CHROMIUM"
    );
    let port = free_port();
    let child = Command::new(driver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver starts");
    let url = format!("http://127.0.0.1:{port}");
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "chromedriver did not listen on {url} within 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    (Kill(child), url)
}

/// Starts `assay serve` on a free port with the admin token; returns its base URL.
fn serve(project: &Path) -> (Kill, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assay"))
        .args(["serve", "--port", "0", "--project"])
        .arg(project)
        .env("ASSAY_ADMIN_TOKEN", TOKEN)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:"),
        "binds 127.0.0.1 by default: {line:?}"
    );
    (Kill(child), url)
}

/// The text of the first `css` element. Retries while the page is still changing (a click or a
/// form submit navigates asynchronously, so an element found on the old page can go stale).
async fn text(client: &Client, css: &str) -> String {
    text_containing(client, css, "").await
}

/// Waits (up to 20 s) until the first `css` element's text contains `needle`, and returns that
/// text. Fails with the last text seen, or the last WebDriver error, when it never does.
async fn text_containing(client: &Client, css: &str, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let last = match client.find(Locator::Css(css)).await {
            Ok(element) => match element.text().await {
                Ok(text) if text.contains(needle) => return text,
                Ok(text) => format!("its text was {text:?}"),
                Err(e) => format!("reading it failed: {e}"),
            },
            Err(e) => format!("no `{css}` on the page: {e}"),
        };
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "`{css}` never contained {needle:?} within 20 s; {last}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Nothing injected ran: no changed title, no global set, no alert open.
async fn assert_nothing_ran(client: &Client, page: &str) {
    let state = client
        .execute(
            "return [document.title, typeof window.__xss, document.querySelectorAll('img[src=x]').length, document.querySelectorAll('main script').length];",
            vec![],
        )
        .await
        .unwrap();
    assert_ne!(state[0], "pwned", "{page}: the injected onerror ran");
    assert_eq!(state[1], "undefined", "{page}: injected script ran");
    assert_eq!(state[2], 0, "{page}: an injected <img> was created");
    assert_eq!(state[3], 0, "{page}: an injected <script> element exists");
    assert!(
        client.get_alert_text().await.is_err(),
        "{page}: an alert is open"
    );
}

fn run_assay(project: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_assay"))
        .arg("run")
        .arg(project)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "assay run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A WebDriver session in headless Chromium, at 1280×900.
async fn browser(driver_url: &str) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]}),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(driver_url)
        .await
        .expect("a WebDriver session in headless Chromium")
}

#[test]
fn the_ui_in_headless_chromium() {
    let (_driver, driver_url) = chromedriver();
    let project = Scratch::example();
    run_assay(&project.root);
    let (_server, base) = serve(&project.root);
    let dir = screenshots_dir();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = browser(&driver_url).await;
        journey(&client, &base, &project.root, &dir).await;
        lab(&client, &base, &project.root, &dir).await;
        let _ = client.close().await;
    });
}

async fn journey(client: &Client, base: &str, project: &Path, dir: &Path) {
    // The entity list, read before signing in.
    client.goto(&format!("{base}/ui/entities")).await.unwrap();
    assert!(text(client, "h1").await.contains("Entities"));
    shot(client, dir, "01-entities").await;

    // Sign in with the admin token.
    client.goto(&format!("{base}/ui/login")).await.unwrap();
    client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    client
        .find(Locator::Css("main form button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    text_containing(client, "header .who", "admin").await;

    // Create an entity, with markup in its title and content.
    client
        .goto(&format!("{base}/ui/entities/new"))
        .await
        .unwrap();
    let form = client.form(Locator::Css("main form")).await.unwrap();
    form.set_by_name("entity_id", "browser_probe")
        .await
        .unwrap();
    form.set_by_name("title", &format!("Bedtime handovers {INJECT}"))
        .await
        .unwrap();
    form.set_by_name(
        "concept_summary",
        &format!("Handing the children over at bedtime without an argument. {INJECT}"),
    )
    .await
    .unwrap();
    form.set_by_name("keywords", "bedtime, handover, pickup, evening")
        .await
        .unwrap();
    shot(client, dir, "02-create").await;
    form.submit().await.unwrap();
    text_containing(client, "main", "Created.").await;
    let url = client.current_url().await.unwrap();
    assert!(url.path().ends_with("/ui/entities/browser_probe"), "{url}");
    assert_nothing_ran(client, "entity detail").await;

    // Edit it: version 2.
    client
        .goto(&format!("{base}/ui/entities/browser_probe/edit"))
        .await
        .unwrap();
    let form = client.form(Locator::Css("main form")).await.unwrap();
    form.set_by_name("priority", "80").await.unwrap();
    form.set_by_name(
        "concept_summary",
        &format!("Handing the children over at bedtime calmly and on time. {INJECT}"),
    )
    .await
    .unwrap();
    shot(client, dir, "03-edit").await;
    form.submit().await.unwrap();
    text_containing(client, "main", "Saved as a new version.").await;

    // The history shows version 2 and the field-by-field diff.
    client
        .goto(&format!("{base}/ui/entities/browser_probe/history"))
        .await
        .unwrap();
    text_containing(client, "#diff", "Version 1 → version 2").await;
    let diff = text(client, "table.diff").await;
    assert!(diff.contains("priority") && diff.contains("80"), "{diff}");
    assert!(diff.contains("concept_summary"), "{diff}");
    assert_nothing_ran(client, "history").await;
    shot(client, dir, "04-history-diff").await;
    let kb = std::fs::read_to_string(project.join("kb/browser_probe.yaml")).unwrap();
    assert!(kb.contains("priority: 80"), "written through to kb/: {kb}");

    // A retrieval test with the explain view.
    client.goto(&format!("{base}/ui/retrieval")).await.unwrap();
    let form = client.form(Locator::Css("main form")).await.unwrap();
    form.set_by_name("query", "my ex is late for the bedtime handover again")
        .await
        .unwrap();
    form.set_by_name("top_k", "5").await.unwrap();
    form.submit().await.unwrap();
    let explain = text_containing(client, "#explain", "Stages").await;
    assert!(text(client, "#stages").await.contains("semantic"));
    assert!(
        explain.contains("browser_probe"),
        "the new entity is among the candidates: {explain}"
    );
    assert_nothing_ran(client, "retrieval test").await;
    shot(client, dir, "05-retrieval-explain").await;

    // A second run after the edit, then the runs dashboard: a run and the diff of the two.
    run_assay(project);
    client.goto(&format!("{base}/ui/runs")).await.unwrap();
    let rows = client
        .find_all(Locator::Css("#runs tbody tr"))
        .await
        .unwrap()
        .len();
    assert!(rows >= 2, "both runs are listed, found {rows}");
    let points = client
        .find_all(Locator::Css("#runs-trend .series-weighted .point"))
        .await
        .unwrap()
        .len();
    assert_eq!(points, rows, "a point per run on the chart");
    let wraps: Value = client
        .execute(
            "return [...document.querySelectorAll('#runs td.id, #runs td.when')].filter(c => { const r = document.createRange(); r.selectNodeContents(c); return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1 || getComputedStyle(c).whiteSpace !== 'nowrap'; }).length;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(wraps, 0, "ids and timestamps stay on one line");
    shot(client, dir, "06-runs").await;
    client
        .find(Locator::Css("#runs tbody tr:first-child td:first-child a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    text_containing(client, ".report h1", "Run").await;
    let report = text(client, ".report").await;
    assert!(report.contains("Summary") && report.contains("Score distribution"));
    assert!(
        client
            .find_all(Locator::Css(".report svg"))
            .await
            .unwrap()
            .len()
            >= 2,
        "histogram and topic bars"
    );
    shot(client, dir, "07-run-detail").await;
    // A case id on the run's page opens the case.
    click(client, ".report a[href*='/cases/']").await;
    text_containing(client, "h1", "Case").await;
    let case = text(client, "#case").await;
    assert!(
        case.contains("bank") && case.contains("expected") && case.contains("came back"),
        "{case}"
    );
    shot(client, dir, "07b-run-case").await;
    client.goto(&format!("{base}/ui/runs")).await.unwrap();
    client
        .find(Locator::Css("#compare button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    text_containing(client, "main", "Weighted score").await;
    for section in ["#worse", "#better"] {
        client.find(Locator::Css(section)).await.unwrap();
    }
    shot(client, dir, "08-run-diff").await;

    // Stats and bulk pages render; a keyboard user can reach search with "/".
    client.goto(&format!("{base}/ui/stats")).await.unwrap();
    shot(client, dir, "09-stats").await;
    client.goto(&format!("{base}/ui/entities")).await.unwrap();
    client
        .find(Locator::Css("body"))
        .await
        .unwrap()
        .send_keys("/")
        .await
        .unwrap();
    let focused: Value = client
        .execute("return document.activeElement.name;", vec![])
        .await
        .unwrap();
    assert_eq!(focused, "q", "`/` focuses the search field");
    client
        .goto(&format!("{base}/ui/entities?q=browser_probe&active=all"))
        .await
        .unwrap();
    assert_nothing_ran(client, "entity list").await;
}

/// `assay serve` on a folder holding only an experiment and a simulation report: both pages
/// render, and the runs and knowledge-base pages show their empty states.
#[test]
fn a_folder_without_test_banks_in_headless_chromium() {
    let (_driver, driver_url) = chromedriver();
    let (_lab, root) = crate::serve::lab_only();
    let (_server, base) = serve(&root);
    let dir = screenshots_dir();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = browser(&driver_url).await;
        let c = &client;
        c.goto(&format!("{base}/ui/experiments")).await.unwrap();
        text_containing(c, "#experiments", "exp_lab").await;
        click(c, "#experiments tbody tr:first-child a").await;
        text_containing(c, ".report h1", "exp_lab").await;
        shot(c, &dir, "30-lab-experiment").await;
        c.goto(&format!("{base}/ui/simulations")).await.unwrap();
        text_containing(c, "#simulations", "20261125_093000").await;
        click(c, "#simulations tbody tr:first-child td:nth-child(2) a").await;
        text_containing(c, ".report h1", "Simulation").await;
        shot(c, &dir, "31-lab-simulation").await;
        c.goto(&format!("{base}/ui/runs")).await.unwrap();
        let runs = text_containing(c, "#empty-runs", "No runs yet").await;
        assert!(runs.contains("assay run"), "{runs}");
        shot(c, &dir, "32-lab-runs-empty").await;
        c.goto(&format!("{base}/ui/entities")).await.unwrap();
        let kb = text_containing(c, "#empty-kb", "No knowledge base yet").await;
        assert!(kb.contains("assay init"), "{kb}");
        let holds = text(c, "#holds").await;
        assert!(
            holds.contains("1 experiment, 1 simulation report"),
            "{holds}"
        );
        shot(c, &dir, "33-lab-entities-empty").await;
        let _ = client.close().await;
    });
}

/// Waits (up to 60 s) until the number in the first `css` element is above `floor`.
async fn number_above(client: &Client, css: &str, floor: u64) -> u64 {
    let start = Instant::now();
    loop {
        if let Ok(e) = client.find(Locator::Css(css)).await
            && let Ok(t) = e.text().await
            && let Ok(n) = t.trim().parse::<u64>()
            && n > floor
        {
            return n;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "`{css}` never rose above {floor} within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn click(client: &Client, css: &str) {
    client
        .find(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no `{css}`: {e}"))
        .click()
        .await
        .unwrap_or_else(|e| panic!("clicking `{css}`: {e}"));
}

/// Accepts the confirmation a form with `data-confirm` asks for, when it is open.
async fn accept_confirm(client: &Client) {
    let start = Instant::now();
    while client.get_alert_text().await.is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no confirmation was asked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.accept_alert().await.unwrap();
}

/// A running `assay optimize` against the scripted provider, slowed down (400 ms a call; most
/// later calls come from the cache) so that it is still running while its trials are watched
/// and a promotion is refused under its lock; its stderr goes to `log` (an artefact beside the screenshots).
fn start_optimize(project: &Path, log: &Path) -> Kill {
    let stats = std::sync::Arc::new(crate::prompt_provider::PromptStats::default());
    let url = crate::support::serve(crate::prompt_provider::prompt_router(
        Duration::from_millis(400),
        stats,
    ));
    let toml = std::fs::read_to_string(project.join("assay.toml")).unwrap();
    std::fs::write(
        project.join("assay.toml"),
        format!(
            "{toml}\n[providers]\nopenai_base_url = \"{url}/v1\"\nmax_retries = 1\n\n[optimize]\nmodel = \"openai/fake-agent\"\ngrader_model = \"openai/fake-grader\"\nchain = [\"planner\", \"expert\", \"finalizer\"]\n"
        ),
    )
    .unwrap();
    let line = |q: &str, key: &str| {
        format!(
            "{{\"question\": \"{q} [key:{key}] [d:1]\", \"files\": [], \"answer\": \"{key}\"}}\n"
        )
    };
    std::fs::create_dir_all(project.join("cases")).unwrap();
    std::fs::write(
        project.join("cases/opt.jsonl"),
        [
            line("Capital of France?", "Paris"),
            line("Largest planet?", "Jupiter"),
            line("Red planet?", "Mars"),
        ]
        .concat(),
    )
    .unwrap();
    std::fs::write(
        project.join("cases/eval.jsonl"),
        [
            line("Author of Hamlet?", "Shakespeare"),
            line("Symbol of gold?", "Au"),
        ]
        .concat(),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_assay"))
        .arg("optimize")
        .arg(project)
        .args([
            "--experiment-name",
            "exp_running",
            "--optimization-trials",
            "60",
            "--optimization-test-cases",
            "cases/opt.jsonl",
            "--evaluation-test-cases",
            "cases/eval.jsonl",
        ])
        .env("OPENAI_API_KEY", "test-key")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let journal = project.join("experiments/exp_running/journal.jsonl");
    let start = Instant::now();
    while !journal.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "assay optimize did not start its journal within 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Kill(child)
}

/// The optimizer's experiments and the simulator's reports, in the same browser session.
async fn lab(client: &Client, base: &str, project: &Path, dir: &Path) {
    use crate::ui_fixtures::{ExperimentSpec, SimulationSpec, write_experiment, write_simulation};
    let mut spec = ExperimentSpec::new("exp_fixture", 40);
    INJECT.clone_into(&mut spec.inject);
    let report = write_experiment(project, &spec);
    for (stamp, model, seed) in [
        ("20261125_093000", "anthropic/coach-a", 1),
        ("20261126_093000", "openai/coach-b", 5),
    ] {
        let mut sim = SimulationSpec::new(stamp, 6, 4, 10);
        INJECT.clone_into(&mut sim.inject);
        model.clone_into(&mut sim.model);
        sim.seed = seed;
        write_simulation(project, &sim);
    }

    // An experiment: the Pareto chart with every front point, the baseline marked.
    client
        .goto(&format!("{base}/ui/experiments"))
        .await
        .unwrap();
    text_containing(client, "#experiments", "exp_fixture").await;
    assert_nothing_ran(client, "experiment list").await;
    shot(client, dir, "10-experiments").await;
    client
        .goto(&format!("{base}/ui/experiments/exp_fixture"))
        .await
        .unwrap();
    text_containing(client, ".report h1", "exp_fixture").await;
    let front = client
        .find_all(Locator::Css("#pareto-chart .front"))
        .await
        .unwrap()
        .len();
    assert_eq!(front, report.pareto_front.len(), "the front's points");
    assert_eq!(
        client
            .find_all(Locator::Css("#pareto-chart .baseline"))
            .await
            .unwrap()
            .len(),
        1,
        "the baseline's mark"
    );
    assert!(text(client, "#pareto-chart").await.contains("baseline"));
    assert_nothing_ran(client, "experiment page").await;
    shot(client, dir, "11-experiment").await;

    // A trial, from the table.
    click(
        client,
        "#trial-table tbody tr:nth-child(2) td:first-child a",
    )
    .await;
    text_containing(client, ".report h1", "Trial 1 of").await;
    assert!(text(client, ".report").await.contains("Prompts"));
    assert_nothing_ran(client, "trial page").await;
    shot(client, dir, "12-trial").await;

    // A running experiment: its trial count rises on the page without a reload.
    let optimize = start_optimize(project, &dir.join("13-optimize.log"));
    client
        .goto(&format!("{base}/ui/experiments/exp_running"))
        .await
        .unwrap();
    text_containing(client, "#live", "running").await;
    let first: u64 = text(client, "#trials-done").await.trim().parse().unwrap();
    client
        .execute(
            "document.body.setAttribute('data-marker', 'same-page');",
            vec![],
        )
        .await
        .unwrap();
    let later = number_above(client, "#trials-done", first).await;
    let marker: Value = client
        .execute("return document.body.getAttribute('data-marker');", vec![])
        .await
        .unwrap();
    assert_eq!(marker, "same-page", "updated in place, not reloaded");
    assert!(later > first);
    shot(client, dir, "13-running-experiment").await;

    // Promotion is refused while the running optimize holds the project lock.
    client
        .goto(&format!("{base}/ui/experiments/exp_fixture/promote"))
        .await
        .unwrap();
    text_containing(client, "#lock-held", "lock").await;
    click(client, "#promote button[type=submit]").await;
    accept_confirm(client).await;
    text_containing(client, "main", "holds the lock").await;
    shot(client, dir, "14-promote-refused-locked").await;
    drop(optimize);

    // Refused without the admin token: the button is disabled, and a forced post gets 401.
    client.delete_all_cookies().await.unwrap();
    client
        .goto(&format!("{base}/ui/experiments/exp_fixture/promote"))
        .await
        .unwrap();
    text_containing(client, "main", "not signed in").await;
    let disabled: Value = client
        .execute(
            "return document.querySelector('#promote button[type=submit]').disabled;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(disabled, true);
    client
        .execute(
            "var f = document.querySelector('#promote form'); f.querySelector('button').disabled = false; f.submit();",
            vec![],
        )
        .await
        .unwrap();
    text_containing(client, "main", "sign in with the admin token").await;
    let before =
        std::fs::read_to_string(project.join("prompts/planner_system_prompt.txt")).unwrap();

    // With the token: promoted, and the history says so.
    client.goto(&format!("{base}/ui/login")).await.unwrap();
    client
        .find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    click(client, "main form button[type=submit]").await;
    text_containing(client, "header .who", "admin").await;
    client
        .goto(&format!("{base}/ui/experiments/exp_fixture/promote"))
        .await
        .unwrap();
    text_containing(client, "#promote", "Promote").await;
    shot(client, dir, "15-promote-review").await;
    click(client, "#promote button[type=submit]").await;
    accept_confirm(client).await;
    text_containing(client, "main", "Promoted:").await;
    let history = text_containing(client, "#history-table", "exp_fixture").await;
    assert!(history.contains("promote"), "{history}");
    assert_ne!(
        std::fs::read_to_string(project.join("prompts/planner_system_prompt.txt")).unwrap(),
        before,
        "the production prompt changed"
    );
    assert_nothing_ran(client, "promotion").await;
    shot(client, dir, "16-promoted-history").await;

    // A simulation report, a transcript with a tool call opened, and a comparison.
    client
        .goto(&format!("{base}/ui/simulations"))
        .await
        .unwrap();
    text_containing(client, "#simulations", "20261126_093000").await;
    assert_nothing_ran(client, "simulation list").await;
    shot(client, dir, "17-simulations").await;
    click(client, "#simulations tbody tr:last-child td:nth-child(2) a").await;
    text_containing(client, ".report h1", "Simulation").await;
    assert!(text(client, "#heatmap").await.contains("Goal progress"));
    assert_nothing_ran(client, "simulation report").await;
    shot(client, dir, "18-simulation-report").await;
    click(client, "#run-table tbody tr:first-child a").await;
    text_containing(client, ".conversation", "Simulated user").await;
    let args = client.find(Locator::Css("#call-1 pre.args")).await.unwrap();
    assert!(!args.is_displayed().await.unwrap(), "closed at first");
    click(client, "#call-1 summary").await;
    assert!(args.is_displayed().await.unwrap(), "opened by a click");
    assert!(args.text().await.unwrap().contains("Mow the lawn"));
    assert!(text(client, ".judging").await.contains("Goal progress"));
    assert_nothing_ran(client, "transcript").await;
    shot(client, dir, "19-transcript").await;
    client
        .goto(&format!("{base}/ui/simulations"))
        .await
        .unwrap();
    for cb in client
        .find_all(Locator::Css("#simulations input[name=r]"))
        .await
        .unwrap()
    {
        cb.click().await.unwrap();
    }
    click(client, "#compare-form button[type=submit]").await;
    let table = text_containing(client, "#comparison", "anthropic/coach-a").await;
    assert!(table.contains("openai/coach-b"), "{table}");
    text_containing(client, "main", "Verdicts").await;
    assert_nothing_ran(client, "comparison").await;
    shot(client, dir, "20-compare").await;
}
