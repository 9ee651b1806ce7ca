//! The experiment pages through `app()`: the list with status, trials and verdicts; an
//! experiment's charts (the Pareto front's points counted), sortable trial table, prompt diff,
//! changed cases, usage and promotion; a trial; a running experiment's progress; bad files as
//! clear messages; markup inert everywhere; promotion and rollback behind the token, the CSRF
//! token and the project lock, with the CLI's backup and history.

use axum::http::StatusCode;

use crate::support::Server;
use crate::ui::{INJECT, TOKEN, assert_inert, csrf, get, post, sign_in};
use crate::ui_fixtures::{ExperimentSpec, write_experiment};

const ORIGIN: &str = "http://127.0.0.1:8000";

fn spec(name: &str, trials: usize) -> ExperimentSpec {
    let mut s = ExperimentSpec::new(name, trials);
    INJECT.clone_into(&mut s.inject);
    s
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[tokio::test]
async fn the_list_and_an_experiment_show_status_charts_trials_prompts_and_verdicts() {
    let s = Server::example();
    let done = write_experiment(&s.root, &spec("exp_done", 40));
    let mut running = spec("exp_live", 30);
    running.finished = false;
    write_experiment(&s.root, &running);
    // The running experiment's journal stops at 30 trials of 30 requested, so make it ask for
    // more: a journal of a study still under way.
    let journal = s.root.join("experiments/exp_live/journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    std::fs::write(&journal, text.replacen("\"trials\":30", "\"trials\":50", 1)).unwrap();

    let list = get(&s, "/ui/experiments", None).await;
    assert_eq!(list.status, StatusCode::OK, "{}", list.body);
    assert!(list.body.contains("exp_done") && list.body.contains("exp_live"));
    assert!(list.body.contains("✓ finished"), "{}", list.body);
    assert!(list.body.contains("⏸ interrupted"), "nothing runs it");
    assert!(list.body.contains("40 / 40") && list.body.contains("30 / 50"));
    assert!(list.body.contains("<b>evaluation</b>") && list.body.contains("significant"));
    assert!(list.body.contains("so far"), "the running one: best so far");
    assert!(list.body.contains("$0.1200"), "spend: {}", list.body);
    assert_inert(&list, "experiment list");

    let page = get(&s, "/ui/experiments/exp_done", None).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert_inert(&page, "experiment page");
    // The Pareto chart: one diamond per front trial, the baseline marked by shape and text.
    let pareto = &page.body[page.body.find("id=\"pareto-chart\"").unwrap()..];
    let pareto = &pareto[..pareto.find("</svg>").unwrap()];
    assert_eq!(
        count(pareto, "class=\"front\""),
        done.pareto_front.len(),
        "front points"
    );
    assert!(!done.pareto_front.is_empty());
    assert_eq!(
        count(pareto, "class=\"baseline\""),
        1,
        "the baseline's square"
    );
    assert_eq!(count(pareto, "class=\"key key-front\""), 1, "the legend");
    assert!(pareto.contains(">baseline</text>"));
    assert!(pareto.contains("best (trial"));
    // History: a chart per objective with the best-so-far line.
    assert!(page.body.contains("id=\"history-0\"") && page.body.contains("id=\"history-1\""));
    assert!(page.body.contains("class=\"best-line\""));
    // The trial table: every trial, markers in words, sort links.
    assert_eq!(count(&page.body, "<tr id=\"trial-"), 40);
    for marker in [
        "reused step 1 (baseline)",
        "pruned (racing)",
        "duplicate of #",
        "Pareto front",
        ">best<",
        "racing: kept",
    ] {
        assert!(page.body.contains(marker), "{marker}");
    }
    assert!(
        page.body
            .contains("/ui/experiments/exp_done?sort=value0&amp;desc=1#trials")
    );
    for section in [
        "id=\"comparison\"",
        "id=\"changes-evaluation\"",
        "id=\"changes-optimization\"",
        "id=\"prompts\"",
        "class=\"diff\"",
        "id=\"usage\"",
        "id=\"promotion\"",
        "/ui/experiments/exp_done/promote",
    ] {
        assert!(page.body.contains(section), "{section}");
    }
    // Sorted by the first objective, largest first: the first row holds the largest value.
    let sorted = get(&s, "/ui/experiments/exp_done?sort=value0&desc=1", None).await;
    let best = done
        .trials
        .iter()
        .filter(|t| !t.values.is_empty())
        .map(|t| t.values[0])
        .fold(f64::MIN, f64::max);
    let first_row = &sorted.body[sorted.body.find("<tr id=\"trial-").unwrap()..];
    let first_row = &first_row[..first_row.find("</tr>").unwrap()];
    assert!(
        first_row.contains(&format!(">{best:.0}<")),
        "{best}: {first_row}"
    );
    assert!(sorted.body.contains("aria-sort=\"descending\""));

    // A trial: its prompts (diffed against the baseline) and its cases beside the baseline's.
    let n = done.best_trial.unwrap();
    let trial = get(&s, &format!("/ui/experiments/exp_done/trials/{n}"), None).await;
    assert_eq!(trial.status, StatusCode::OK, "{}", trial.body);
    assert_inert(&trial, "trial page");
    assert!(trial.body.contains(&format!("Trial {n} of")));
    assert!(
        trial.body.contains("Check every fact twice"),
        "{}",
        trial.body
    );
    assert!(trial.body.contains("class=\"cases\""));
    let missing = get(&s, "/ui/experiments/exp_done/trials/999", None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let bad = get(&s, "/ui/experiments/exp_done/trials/x", None).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let none = get(&s, "/ui/experiments/nope", None).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    assert!(none.body.contains("no experiment `nope`"));

    // The journal-only experiment: the record so far, from the journal.
    let live = get(&s, "/ui/experiments/exp_live", None).await;
    assert_eq!(live.status, StatusCode::OK, "{}", live.body);
    assert_inert(&live, "running experiment page");
    assert!(live.body.contains("interrupted") && live.body.contains("--resume"));
    assert!(live.body.contains("id=\"pareto\""));
    assert!(
        !live.body.contains("data-live"),
        "nothing to poll when nothing runs"
    );
}

#[tokio::test]
async fn a_running_experiment_is_told_by_the_project_lock_and_its_progress_polled() {
    let s = Server::example();
    let mut running = spec("exp_live", 20);
    running.finished = false;
    write_experiment(&s.root, &running);
    let journal = s.root.join("experiments/exp_live/journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    std::fs::write(&journal, text.replacen("\"trials\":20", "\"trials\":80", 1)).unwrap();
    // Held for another experiment: this one is not running.
    let other = assay_project::lock::ProjectLock::acquire_for(
        &s.root,
        "optimize",
        Some("exp_other"),
        "assay optimize",
    )
    .unwrap();
    let page = get(&s, "/ui/experiments/exp_live", None).await;
    assert!(page.body.contains("interrupted"), "{}", page.body);
    drop(other);
    let lock = assay_project::lock::ProjectLock::acquire_for(
        &s.root,
        "optimize",
        Some("exp_live"),
        "assay optimize --experiment-name exp_live",
    )
    .unwrap();
    let page = get(&s, "/ui/experiments/exp_live", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("▶ running"), "{}", page.body);
    assert!(
        page.body
            .contains("data-live=\"/ui/experiments/exp_live/live\"")
    );
    assert!(
        page.body
            .contains("<span id=\"trials-done\">20</span> / 80")
    );
    assert!(page.body.contains("id=\"eta\""), "an ETA while it runs");
    let list = get(&s, "/ui/experiments", None).await;
    assert!(list.body.contains("▶ running"));
    let frag = get(&s, "/ui/experiments/exp_live/live", None).await;
    assert_eq!(frag.status, StatusCode::OK);
    assert_eq!(frag.headers["x-experiment-state"], "running");
    assert!(frag.body.contains("<span id=\"trials-done\">20</span>"));
    assert!(!frag.body.contains("<html"), "a fragment, not a page");
    // A new trial line: the fragment counts it.
    let line = text
        .lines()
        .rev()
        .find(|l| l.contains("\"kind\":\"trial\""))
        .unwrap()
        .replacen("\"number\":19", "\"number\":20", 1);
    let mut more = std::fs::read_to_string(&journal).unwrap();
    more.push_str(&line);
    more.push('\n');
    std::fs::write(&journal, more).unwrap();
    let frag = get(&s, "/ui/experiments/exp_live/live", None).await;
    assert!(
        frag.body.contains("<span id=\"trials-done\">21</span>"),
        "{}",
        frag.body
    );
    drop(lock);
    let frag = get(&s, "/ui/experiments/exp_live/live", None).await;
    assert_eq!(frag.headers["x-experiment-state"], "interrupted");
}

#[tokio::test]
async fn bad_experiment_files_are_clear_messages_never_500() {
    let s = Server::example();
    let mut torn = spec("torn", 10);
    torn.finished = false;
    write_experiment(&s.root, &torn);
    let journal = s.root.join("experiments/torn/journal.jsonl");
    let mut text = std::fs::read_to_string(&journal).unwrap();
    text.push_str("{\"kind\":\"trial\",\"trial\":{\"numb");
    std::fs::write(&journal, &text).unwrap();
    let p = get(&s, "/ui/experiments/torn", None).await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.body);
    assert!(
        p.body
            .contains("is incomplete (an interrupted write) and was ignored")
    );

    std::fs::create_dir_all(s.root.join("experiments/future")).unwrap();
    s.write(
        "experiments/future/report.json",
        "{\"schema_version\": 99, \"name\": \"future\"}",
    );
    let p = get(&s, "/ui/experiments/future", None).await;
    assert_eq!(p.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", p.body);
    assert!(
        p.body.contains("version 99; this assay reads version 1"),
        "{}",
        p.body
    );

    let mut broken = spec("broken", 5);
    broken.finished = false;
    write_experiment(&s.root, &broken);
    let journal = s.root.join("experiments/broken/journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[2] = "this is not json";
    std::fs::write(&journal, lines.join("\n") + "\n").unwrap();
    let p = get(&s, "/ui/experiments/broken", None).await;
    assert_eq!(p.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(p.body.contains("journal.jsonl:3"), "{}", p.body);

    s.write("experiments/junk/report.json", "{not json");
    let p = get(&s, "/ui/experiments/junk", None).await;
    assert_eq!(p.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(p.body.contains("not JSON"));
    std::fs::create_dir_all(s.root.join("experiments/empty")).unwrap();
    let p = get(&s, "/ui/experiments/empty", None).await;
    assert_eq!(p.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(p.body.contains("neither report.json nor journal.jsonl"));

    // The list still lists them all, each bad one with its message.
    let list = get(&s, "/ui/experiments", None).await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(count(&list.body, "✗ unreadable"), 4, "{}", list.body);
    assert!(list.body.contains("torn"));
}

#[tokio::test]
async fn promotion_needs_the_token_and_csrf_refuses_under_the_lock_and_writes_the_history() {
    let s = Server::with_env(&[("ASSAY_ADMIN_TOKEN", TOKEN)]);
    write_experiment(&s.root, &spec("exp1", 25));
    let prompt = s.root.join("prompts/planner_system_prompt.txt");
    let before = std::fs::read_to_string(&prompt).unwrap();

    // Signed out: the review shows the diff, the verdict, and disabled buttons.
    let review = get(&s, "/ui/experiments/exp1/promote", None).await;
    assert_eq!(review.status, StatusCode::OK, "{}", review.body);
    assert_inert(&review, "promotion review");
    assert!(review.body.contains("class=\"diff\""));
    assert!(review.body.contains("+++ b/prompts/"), "{}", review.body);
    assert!(review.body.contains("id=\"evidence\""));
    assert!(review.body.contains("sign in"));
    assert!(review.body.contains("disabled>Promote</button>"));
    let token = csrf(&review.body);
    let digest = {
        let at = review.body.find("name=\"reviewed\" value=\"").unwrap() + 23;
        review.body[at..at + 16].to_owned()
    };
    let fields = [
        ("csrf", token.as_str()),
        ("action", "promote"),
        ("reviewed", digest.as_str()),
    ];
    let r = post(
        &s,
        "/ui/experiments/exp1/promote",
        &fields,
        None,
        Some(ORIGIN),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.body);
    assert_eq!(std::fs::read_to_string(&prompt).unwrap(), before);

    let cookie = sign_in(&s).await;
    // A wrong CSRF token, or another origin: refused.
    let bad = [
        ("csrf", "0".repeat(64)),
        ("action", "promote".into()),
        ("reviewed", digest.clone()),
    ];
    let bad: Vec<(&str, &str)> = bad.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let r = post(
        &s,
        "/ui/experiments/exp1/promote",
        &bad,
        Some(&cookie),
        Some(ORIGIN),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = post(
        &s,
        "/ui/experiments/exp1/promote",
        &fields,
        Some(&cookie),
        Some("http://evil.example"),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);

    // The project lock held (an optimize running): refused, nothing written.
    let lock =
        assay_project::lock::ProjectLock::acquire(&s.root, "optimize", "assay optimize").unwrap();
    let held = get(&s, "/ui/experiments/exp1/promote", Some(&cookie)).await;
    assert!(held.body.contains("id=\"lock-held\""));
    let r = post(
        &s,
        "/ui/experiments/exp1/promote",
        &fields,
        Some(&cookie),
        Some(ORIGIN),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{}", r.body);
    assert!(r.body.contains("holds the lock"), "{}", r.body);
    assert_eq!(std::fs::read_to_string(&prompt).unwrap(), before);
    assert!(!s.root.join(".assay/prompt-history.jsonl").exists());
    drop(lock);

    // A diff other than the one reviewed: refused.
    let stale = [
        ("csrf", token.as_str()),
        ("action", "promote"),
        ("reviewed", "0123456789abcdef"),
    ];
    let r = post(
        &s,
        "/ui/experiments/exp1/promote",
        &stale,
        Some(&cookie),
        Some(ORIGIN),
    )
    .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(r.body.contains("changed since the diff was shown"));

    // Promote: backup, new prompts, a history line.
    let r = post(
        &s,
        "/ui/experiments/exp1/promote",
        &fields,
        Some(&cookie),
        Some(ORIGIN),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    let after = std::fs::read_to_string(&prompt).unwrap();
    assert_ne!(after, before);
    let history = std::fs::read_to_string(s.root.join(".assay/prompt-history.jsonl")).unwrap();
    assert_eq!(history.lines().count(), 1);
    assert!(
        history.contains("\"action\":\"promote\"") && history.contains("\"experiment\":\"exp1\"")
    );
    let backups: Vec<_> = std::fs::read_dir(s.root.join(".assay/prompt-backups"))
        .unwrap()
        .collect();
    assert_eq!(backups.len(), 1);
    let done = get(
        &s,
        "/ui/experiments/exp1/promote?done=promoted",
        Some(&cookie),
    )
    .await;
    assert!(done.body.contains("Promoted:"));
    assert!(done.body.contains("id=\"history-table\""));
    assert!(
        done.body.contains("<td>promote</td><td>exp1</td>"),
        "{}",
        done.body
    );

    // Roll back: the baseline restored, a second line and a second backup.
    let review = get(&s, "/ui/experiments/exp1/promote", Some(&cookie)).await;
    let at = review.body.find("value=\"rollback\"").unwrap();
    let rest = &review.body[at..];
    let d = rest.find("name=\"reviewed\" value=\"").unwrap() + 23;
    let digest = rest[d..d + 16].to_owned();
    let fields = [
        ("csrf", token.as_str()),
        ("action", "rollback"),
        ("reviewed", digest.as_str()),
    ];
    let r = post(
        &s,
        "/ui/experiments/exp1/promote",
        &fields,
        Some(&cookie),
        Some(ORIGIN),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    assert_eq!(std::fs::read_to_string(&prompt).unwrap(), before);
    let history = std::fs::read_to_string(s.root.join(".assay/prompt-history.jsonl")).unwrap();
    assert_eq!(history.lines().count(), 2);
    assert_eq!(
        std::fs::read_dir(s.root.join(".assay/prompt-backups"))
            .unwrap()
            .count(),
        2
    );
}

#[tokio::test]
async fn a_read_only_server_refuses_promotion() {
    let s = Server::example();
    write_experiment(&s.root, &spec("exp1", 8));
    let review = get(&s, "/ui/experiments/exp1/promote", None).await;
    assert!(review.body.contains("Read-only"));
    let token = csrf(&review.body);
    let r = post(
        &s,
        "/ui/experiments/exp1/promote",
        &[("csrf", &token), ("action", "promote"), ("reviewed", "x")],
        None,
        Some(ORIGIN),
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
}
