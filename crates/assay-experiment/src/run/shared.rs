//! A study shared by several workers (`[optimize] storage = "postgresql://…"`, `assay optimize
//! --worker`): the trials live in PostgreSQL ([`db`]), and any number of processes, on any
//! machines with the same project, work on one experiment.
//!
//! Each worker: joins the study (its journal header must match the one the study was created
//! with); waits for the baseline, which the first worker to ask runs; then claims trials one
//! at a time until every trial is claimed, scoring each on the optimization cases with a
//! heartbeat, and keeps claiming while others run, so a trial whose worker stopped
//! heart-beating (killed, its machine gone) is retried by whoever is still there; finally the
//! first worker to ask runs the finish: it writes the experiment's journal from the storage
//! (the header, the baseline, every trial) and carries on as a resumed single-process
//! experiment would: the proposal rounds, the held-out evaluation and the report (the caller
//! then writes the reports and the tracking runs). The others return what they ran.
//!
//! The sampler of each claim is rebuilt from every trial in the storage, in number order
//! (finished ones with their values, running ones occupied so that no two workers run the
//! same prompts at once), so it conditions on every worker's finished trials.

#[allow(clippy::wildcard_imports)]
use super::*;
use std::time::Duration;

use assay_core::experiment::CaseResult;
use serde::de::DeserializeOwned;

use super::search::{Scored, Scoring, new_study, raw_params, restore, score};

mod db;
use db::{Claim, Elected, Planned, StoredTrial, StudyDb};

/// Where a shared study is kept and how this process takes part.
pub struct SharedStorage<'a> {
    /// The PostgreSQL URL (`[optimize] storage`, `--storage`).
    pub url: &'a str,
    /// How the environment is read (`PGPASSWORD`, `PGUSER`, …).
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// `--worker`: join the experiment (creating it if no worker has yet); otherwise the
    /// experiment must be new, or `--resume` given.
    pub join: bool,
    /// How often a worker touches its heartbeat; after three intervals without one, its
    /// trial or step is taken over.
    pub heartbeat: Duration,
}

/// What one worker's part of a shared study ended with.
#[derive(Debug)]
pub enum SharedOutcome {
    /// This worker ran the finish: the report, as [`optimize`] returns it (`report.json`
    /// written).
    Finished(Box<ExperimentReport>),
    /// Another worker finishes (or finished) the study: what this one did.
    Joined(JoinedStudy),
}

/// This process's name in the storage: `ASSAY_WORKER_NAME`, else `<host>-<pid>`.
fn worker_name(env: &dyn Fn(&str) -> Option<String>) -> String {
    if let Some(name) = env("ASSAY_WORKER_NAME").filter(|n| !n.trim().is_empty()) {
        return name.trim().to_owned();
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| env("HOSTNAME"))
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "worker".to_owned());
    format!("{host}-{}", std::process::id())
}

/// How long a waiting worker sleeps between looks at the storage.
const POLL: Duration = Duration::from_millis(250);

/// Touches a heartbeat every `every` until dropped.
struct Beat(tokio::task::JoinHandle<()>);

impl Drop for Beat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn beat_trial(db: &Arc<StudyDb>, number: usize, every: Duration) -> Beat {
    let db = Arc::clone(db);
    Beat(tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match db.heartbeat(number).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::warn!(
                        "trial {number}: another worker took it over (this one's heartbeat lapsed); its result will stand"
                    );
                    return;
                }
                Err(e) => tracing::warn!("trial {number}: heartbeat: {e}"),
            }
        }
    }))
}

fn beat_step(db: &Arc<StudyDb>, step: &str, every: Duration) -> Beat {
    let db = Arc::clone(db);
    let step = step.to_owned();
    Beat(tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            if let Err(e) = db.step_heartbeat(&step).await {
                tracing::warn!("{step}: heartbeat: {e}");
            }
        }
    }))
}

/// Runs `step` once for the whole study: here when this worker is elected, else waits for
/// the worker that is and reads its result back.
async fn once<T, F, Fut>(
    db: &Arc<StudyDb>,
    step: &str,
    storage: &SharedStorage<'_>,
    run: F,
) -> Result<T, RunError>
where
    T: Serialize + DeserializeOwned,
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<T, RunError>>,
{
    let stale = 3.0 * storage.heartbeat.as_secs_f64();
    let mut run = Some(run);
    let mut told = false;
    loop {
        match db.elect(step, stale).await? {
            Elected::Me { took_over } => {
                if let Some(w) = took_over {
                    tracing::warn!("{step}: worker {w} stopped heart-beating; this one runs it");
                }
                let Some(run) = run.take() else {
                    return Err(RunError::Storage(format!("{step}: elected twice")));
                };
                let beat = beat_step(db, step, storage.heartbeat);
                let result = run().await;
                drop(beat);
                let result = match result {
                    Ok(r) => r,
                    Err(e) => {
                        db.halt(&format!("{step}: {e}")).await?;
                        return Err(e);
                    }
                };
                let value = serde_json::to_value(&result)
                    .map_err(|e| RunError::Storage(format!("{step}: {e}")))?;
                db.step_done(step, &value).await?;
                return Ok(result);
            }
            Elected::Done(value) => {
                return serde_json::from_value(value)
                    .map_err(|e| RunError::Storage(format!("{step}: the stored result: {e}")));
            }
            Elected::Other(worker) => {
                if !told {
                    tracing::info!("{step}: worker {worker} runs it; waiting");
                    told = true;
                }
                tokio::time::sleep(POLL).await;
            }
        }
    }
}

/// The study of every row: finished trials as they ended, the others occupied.
fn rebuilt(x: &Experiment<'_>, rows: &[StoredTrial]) -> Result<Study, RunError> {
    let mut study = new_study(x)?;
    for row in rows {
        if row.number != study.trials().len() {
            return Err(RunError::Storage(format!(
                "trial {} follows trial {} in the storage: the numbers must run without a gap",
                row.number,
                study.trials().len().saturating_sub(1)
            )));
        }
        match &row.record {
            Some(record) if row.state == "done" => {
                restore(&mut study, x.lists, record)?;
            }
            _ => {
                study.restore(
                    raw_params(x.lists, &row.params)?,
                    TrialState::Running,
                    &[],
                    Origin::Added,
                )?;
            }
        }
    }
    Ok(study)
}

/// The best finished trial's cases (a duplicate's: its original's), for racing.
fn best_cases(
    x: &Experiment<'_>,
    rows: &[StoredTrial],
) -> Result<Option<Vec<CaseResult>>, RunError> {
    let study = rebuilt(x, rows)?;
    let Some(best) = study.best_by_priority().map(|t| t.number) else {
        return Ok(None);
    };
    let record = |n: usize| rows.get(n).and_then(|r| r.record.as_ref());
    Ok(record(best).map(|r| {
        r.duplicate_of
            .and_then(record)
            .map_or_else(|| r.cases.clone(), |o| o.cases.clone())
    }))
}

/// Chooses the next trial's parameters from every row (see the module documentation); a
/// duplicate of a finished trial is finished at once with its values.
fn plan(x: &Experiment<'_>, rows: &[StoredTrial], worker: &str) -> Result<Planned, RunError> {
    let mut study = rebuilt(x, rows)?;
    let asked = study.ask()?;
    let params = named(x.lists, &asked.params);
    let origin = origin_name(asked.origin);
    let finished = match asked.duplicate_of {
        Some(earlier) => {
            study.tell_duplicate(asked.number)?;
            Some(TrialRecord {
                values: study
                    .trial(asked.number)
                    .map(|t| t.values.clone())
                    .unwrap_or_default(),
                duplicate_of: Some(earlier),
                metrics: rows
                    .get(earlier)
                    .and_then(|r| r.record.as_ref())
                    .and_then(|r| r.metrics),
                worker: Some(worker.to_owned()),
                ..blank(
                    &asked,
                    params.clone(),
                    TrialOutcome::Duplicate,
                    Instant::now(),
                )
            })
        }
        None => None,
    };
    Ok(Planned {
        params,
        origin,
        finished,
    })
}

/// Writes the experiment's journal as one process would have: the header the study was
/// created with, the baseline and every trial, in number order.
fn write_journal(
    layout: &Layout,
    header: &JournalHeader,
    baseline: &StepResult,
    trials: &[TrialRecord],
) -> Result<(), RunError> {
    let path = layout.journal();
    let mut text = serde_json::to_vec(header).map_err(|e| RunError::io(&path, &e))?;
    text.push(b'\n');
    let entries = std::iter::once(JournalEntry::Baseline {
        step: baseline.clone(),
    })
    .chain(
        trials
            .iter()
            .map(|t| JournalEntry::Trial { trial: t.clone() }),
    );
    for entry in entries {
        let line = JournalLine { entry, usage: None };
        serde_json::to_writer(&mut text, &line).map_err(|e| RunError::io(&path, &e))?;
        text.push(b'\n');
    }
    assay_project::results::write_replace(&path, &text).map_err(|e| RunError::io(&path, &e))
}

/// One worker's part of a shared study: see the module documentation.
pub async fn optimize_shared(
    x: &Experiment<'_>,
    storage: &SharedStorage<'_>,
) -> Result<SharedOutcome, RunError> {
    let options = x.options;
    if options.trials == 0 {
        return Err(RunError::Usage(
            "--optimization-trials: must be at least 1".into(),
        ));
    }
    let layout = Layout::new(x.project, &options.name);
    for dir in [layout.logs(), layout.error_logs()] {
        std::fs::create_dir_all(&dir).map_err(|e| RunError::io(&dir, &e))?;
    }
    let worker = worker_name(storage.env);
    let db = Arc::new(StudyDb::connect(storage.url, storage.env, &options.name, &worker).await?);
    let mut header = x.header();
    header.started = Some(chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    let value = serde_json::to_value(&header).map_err(|e| RunError::Storage(e.to_string()))?;
    if let Some(stored) = db.join(&value).await? {
        let stored: JournalHeader = serde_json::from_value(stored).map_err(|e| {
            RunError::Storage(format!(
                "{}: the study `{}` has a header this assay cannot read: {e}",
                db.target, options.name
            ))
        })?;
        // A running study is joined (workers may start in any order); a finished one is
        // read back only when asked.
        if !storage.join && !options.resume && db.finished().await? {
            return Err(RunError::Usage(format!(
                "experiment `{}` in {} is finished: choose another --experiment-name (--resume reads it back)",
                options.name, db.target
            )));
        }
        let diffs = header_differences(&stored, &header);
        if !diffs.is_empty() {
            return Err(RunError::Usage(format!(
                "{}: cannot join the study `{}`: the {} differ from the study's; start a new experiment",
                db.target,
                options.name,
                diffs.join(", ")
            )));
        }
        header = stored;
        tracing::info!(
            "joined the study `{}` in {} as worker {worker}",
            options.name,
            db.target
        );
    } else {
        tracing::info!(
            "created the study `{}` in {} as worker {worker}",
            options.name,
            db.target
        );
    }
    let baseline_prompts = x.lists.baseline();
    write_prompt_dir(&layout.baseline_prompts(), &baseline_prompts)?;
    let runner = x.runner();
    let zeros = x.zeros();

    // Step 1, once.
    let baseline: StepResult = once(&db, "baseline", storage, || {
        run_step(
            &runner,
            &layout,
            "baseline",
            "baseline",
            zeros.clone(),
            &baseline_prompts,
            x.optimization,
        )
    })
    .await?;

    // Step 2: trials, claimed one at a time.
    let stale = 3.0 * storage.heartbeat.as_secs_f64();
    let n_cases = x.optimization.set.len();
    runner
        .services
        .progress
        .start("optimization", (options.trials * n_cases) as u64);
    let mut log = StepLog::open(&layout, "optimization")?;
    log.line(&format!(
        "study `{}` shared in {} as worker {worker}: {} trials in all",
        options.name, db.target, options.trials
    ));
    let mut mine = Vec::new();
    let mut waiting = false;
    loop {
        // The budget is the study's: what every worker spent, then whether one more case fits
        // (before claiming, so that no trial is left claimed and not run).
        sync_spend(&db, x).await?;
        if let Err(e) = runner.check_budget() {
            runner
                .services
                .progress
                .finish("optimization", "over budget");
            return Err(e);
        }
        let claim = db
            .claim(options.trials, stale, |rows| plan(x, rows, &worker))
            .await?;
        let (number, params, origin, failures) = match claim {
            Claim::Halted(reason) => {
                runner.services.progress.finish("optimization", "halted");
                return Err(RunError::Storage(format!(
                    "the study `{}` was halted by a worker: {reason}",
                    options.name
                )));
            }
            Claim::Exhausted { unfinished: 0 } => break,
            Claim::Exhausted { unfinished } => {
                if !waiting {
                    log.line(&format!(
                        "every trial is claimed; waiting for {unfinished} to finish (and retrying any whose worker stops)"
                    ));
                    waiting = true;
                }
                tokio::time::sleep(POLL).await;
                continue;
            }
            Claim::New {
                number,
                finished: true,
                ..
            } => {
                log.line(&format!(
                    "trial {number}: the same prompts as an earlier trial: its values are reused"
                ));
                runner
                    .services
                    .progress
                    .advance(n_cases as u64, &runner.note(&format!("trial {number}")));
                mine.push(number);
                continue;
            }
            Claim::New {
                number,
                params,
                origin,
                ..
            } => (number, params, origin, Vec::new()),
            Claim::Retry {
                number,
                params,
                origin,
                failures,
            } => {
                log.line(&format!(
                    "trial {number}: retried here ({})",
                    failures.join("; ")
                ));
                (number, params, origin, failures)
            }
        };
        let best = if options.racing.is_some() {
            let rows: Vec<StoredTrial> = db.trials().await?.into_iter().map(|(t, _)| t).collect();
            best_cases(x, &rows)?
        } else {
            None
        };
        let asked = Asked {
            number,
            params: raw_params(x.lists, &params)?,
            duplicate_of: None,
            origin: Origin::Added,
        };
        let beat = beat_trial(&db, number, storage.heartbeat);
        let scored = score(
            &Scoring {
                x,
                runner: &runner,
                layout: &layout,
                lists: x.lists,
                baseline: &baseline,
                best_cases: best.as_deref(),
            },
            &mut log,
            &asked,
            params,
            None,
            Instant::now(),
        )
        .await;
        drop(beat);
        let (mut record, halted) = match scored? {
            Scored::Complete(r) | Scored::Pruned(r) => (r, None),
            Scored::Failed(r, halted) => (r, Some(halted)),
        };
        record.origin = origin;
        record.worker = Some(worker.clone());
        record.retried = failures;
        if db.finish(&record).await? {
            mine.push(number);
        } else {
            log.line(&format!(
                "trial {number}: another worker took it over while this one ran it; its result stands"
            ));
        }
        if let Some(halted) = halted {
            db.halt(&halted.to_string()).await?;
            runner.services.progress.finish("optimization", "halted");
            return Err(halted);
        }
    }
    runner
        .services
        .progress
        .finish("optimization", &format!("{} trials here", mine.len()));
    // What this worker's last trial cost, for the finisher's budget (and, on the finisher,
    // what the others spent).
    sync_spend(&db, x).await?;

    // The finish, once: the rest of the experiment as a resumed single process.
    let finisher = match db.elect("finish", stale).await? {
        Elected::Other(finisher) => Some(finisher),
        Elected::Done(_) => None,
        Elected::Me { took_over } => {
            if let Some(w) = took_over {
                tracing::warn!("finish: worker {w} stopped heart-beating; this one runs it");
            }
            return finish(x, &db, &layout, &header, &baseline, worker, storage).await;
        }
    };
    Ok(SharedOutcome::Joined(JoinedStudy {
        name: options.name.clone(),
        worker,
        trials: mine,
        finisher,
    }))
}

/// Records this worker's spend in the study's storage and reads the others'.
async fn sync_spend(db: &StudyDb, x: &Experiment<'_>) -> Result<(), RunError> {
    let mine = super::spent(&(x.services.usage)());
    let others = db.spend(mine).await?;
    x.services.others_spent.set(others);
    Ok(())
}

/// The finish, on the elected worker: the experiment's journal written from the storage, then
/// the rest as a resumed single process (proposal rounds, evaluation, report.json); trials the
/// rounds add join the storage.
async fn finish(
    x: &Experiment<'_>,
    db: &Arc<StudyDb>,
    layout: &Layout,
    header: &JournalHeader,
    baseline: &StepResult,
    worker: String,
    storage: &SharedStorage<'_>,
) -> Result<SharedOutcome, RunError> {
    let options = x.options;
    let beat = beat_step(db, "finish", storage.heartbeat);
    let rows = db.trials().await?;
    let known = rows.len();
    let trials: Vec<TrialRecord> = rows
        .into_iter()
        .map(|(t, retried)| {
            t.record.map(|mut r| {
                if r.retried.is_empty() {
                    r.retried = retried;
                }
                r
            })
        })
        .collect::<Option<_>>()
        .ok_or_else(|| RunError::Storage("a trial without a record at the finish".into()))?;
    write_journal(layout, header, baseline, &trials)?;
    let resumed = Options {
        resume: true,
        ..options.clone()
    };
    let whole = Experiment {
        project: x.project,
        lists: x.lists,
        optimization: x.optimization,
        evaluation: x.evaluation,
        options: &resumed,
        services: x.services,
    };
    let result = optimize(&whole).await;
    drop(beat);
    let mut report = match result {
        Ok(r) => r,
        Err(e) => {
            db.halt(&format!("finish: {e}")).await?;
            return Err(e);
        }
    };
    // Trials the finish added (the proposal rounds') join the storage too.
    for t in &mut report.trials {
        if t.number >= known && t.worker.is_none() {
            t.worker = Some(worker.clone());
        }
    }
    db.add_finished(&report.trials[known.min(report.trials.len())..])
        .await?;
    let json = serde_json::to_vec_pretty(&report).map_err(|e| RunError::io(&layout.dir, &e))?;
    let path = layout.dir.join(REPORT_JSON);
    assay_project::results::write_replace(&path, &json).map_err(|e| RunError::io(&path, &e))?;
    db.step_done(
        "finish",
        &serde_json::json!({ "worker": worker, "best_trial": report.best_trial }),
    )
    .await?;
    Ok(SharedOutcome::Finished(Box::new(report)))
}
