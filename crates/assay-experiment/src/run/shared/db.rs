//! The tables of a study shared by several workers, in PostgreSQL.
//!
//! * `assay_studies`: one row per experiment name, with the journal header every worker must
//!   match and, once a worker halted the study, why.
//! * `assay_trials`: one row per trial number. A claim (see [`StudyDb::claim`]) runs in one
//!   transaction that locks the study's row, so two workers never take the same number: it
//!   first hands back trials whose worker stopped heart-beating (`waiting`, retried under the
//!   same number), then asks the sampler, rebuilt from every row, for the next number. A
//!   running trial's row is touched by its worker's heartbeat; a finished one holds its
//!   record.
//! * `assay_steps`: the steps that must run once (the baseline, the finish: proposal rounds,
//!   evaluation, report, tracking): the first worker to insert a step's row runs it; a step
//!   whose worker stopped heart-beating is taken over.
//!
//! Times are the database's (`now()`), so workers' clocks need not agree.

use std::collections::BTreeMap;

use assay_core::experiment::TrialRecord;
use serde_json::Value;
use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls};

use super::super::RunError;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS assay_studies (
    name text PRIMARY KEY,
    header jsonb NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    halted text
);
CREATE TABLE IF NOT EXISTS assay_trials (
    study text NOT NULL REFERENCES assay_studies (name) ON DELETE CASCADE,
    number integer NOT NULL,
    params jsonb NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'waiting', 'done')),
    worker text,
    attempts integer NOT NULL DEFAULT 1,
    heartbeat timestamptz NOT NULL DEFAULT now(),
    failures jsonb NOT NULL DEFAULT '[]'::jsonb,
    origin text NOT NULL DEFAULT 'tpe',
    record jsonb,
    PRIMARY KEY (study, number)
);
CREATE TABLE IF NOT EXISTS assay_spend (
    study text NOT NULL REFERENCES assay_studies (name) ON DELETE CASCADE,
    worker text NOT NULL,
    session text NOT NULL,
    spent double precision NOT NULL DEFAULT 0,
    updated timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (study, worker, session)
);
CREATE TABLE IF NOT EXISTS assay_steps (
    study text NOT NULL REFERENCES assay_studies (name) ON DELETE CASCADE,
    step text NOT NULL,
    worker text NOT NULL,
    state text NOT NULL CHECK (state IN ('running', 'done')),
    heartbeat timestamptz NOT NULL DEFAULT now(),
    result jsonb,
    PRIMARY KEY (study, step)
);
";

/// One trial's row.
#[derive(Debug, Clone)]
pub(crate) struct StoredTrial {
    pub(crate) number: usize,
    pub(crate) params: BTreeMap<String, usize>,
    /// `running`, `waiting` (its worker stopped; to be retried) or `done`.
    pub(crate) state: String,
    pub(crate) record: Option<TrialRecord>,
}

/// What the sampler, rebuilt from every row, chose for the next number.
pub(crate) struct Planned {
    pub(crate) params: BTreeMap<String, usize>,
    /// How the sampler chose them, in words.
    pub(crate) origin: String,
    /// A trial finished at once (a duplicate of an earlier one).
    pub(crate) finished: Option<TrialRecord>,
}

/// What a claim got.
pub(crate) enum Claim {
    /// A new trial, asked now: this worker runs it (unless `finished`, a duplicate).
    New {
        number: usize,
        params: BTreeMap<String, usize>,
        origin: String,
        finished: bool,
    },
    /// A trial whose worker stopped heart-beating: this worker runs it again.
    Retry {
        number: usize,
        params: BTreeMap<String, usize>,
        origin: String,
        failures: Vec<String>,
    },
    /// Every trial is claimed; `unfinished` are still running or waiting.
    Exhausted { unfinished: usize },
    /// A worker halted the study.
    Halted(String),
}

/// What an election said.
pub(crate) enum Elected {
    /// This worker runs the step (`took_over`: from one that stopped heart-beating).
    Me { took_over: Option<String> },
    /// Another worker runs it.
    Other(String),
    /// It ran: its result.
    Done(Value),
}

/// A connection to the study's tables, as one worker.
pub(crate) struct StudyDb {
    client: Mutex<Client>,
    study: String,
    pub(crate) worker: String,
    /// This process among the worker's (a worker restarted under the same name spends anew).
    session: String,
    /// The database, for messages (no password).
    pub(crate) target: String,
}

fn store_error(target: &str, e: &impl std::fmt::Display) -> RunError {
    RunError::Storage(format!("{target}: {e}"))
}

fn decode_params(value: &Value) -> Result<BTreeMap<String, usize>, String> {
    serde_json::from_value(value.clone()).map_err(|e| format!("bad parameters {value}: {e}"))
}

/// A row of `number, params, state, record` (in that order, first).
fn stored(row: &tokio_postgres::Row) -> Result<StoredTrial, RunError> {
    let record: Option<Value> = row.get(3);
    Ok(StoredTrial {
        number: usize::try_from(row.get::<_, i32>(0)).unwrap_or_default(),
        params: decode_params(&row.get(1)).map_err(RunError::Storage)?,
        state: row.get(2),
        record: record
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| RunError::Storage(format!("a trial's record: {e}")))?,
    })
}

impl StudyDb {
    /// Connects to `url` as `worker` for the study `study`, creating the tables if needed.
    pub(crate) async fn connect(
        url: &str,
        env: &dyn Fn(&str) -> Option<String>,
        study: &str,
        worker: &str,
    ) -> Result<StudyDb, RunError> {
        let config = assay_kb::store::connection_config(url, env)
            .map_err(|e| RunError::Usage(format!("optimize.storage: {e}")))?;
        let target = format!(
            "the study storage {}@{}/{}",
            config.get_user().unwrap_or_default(),
            config
                .get_hosts()
                .first()
                .map(|h| match h {
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                })
                .unwrap_or_default(),
            config.get_dbname().unwrap_or_default()
        );
        let (mut client, connection) = config
            .connect(NoTls)
            .await
            .map_err(|e| store_error(&target, &e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::warn!("study storage: the connection ended: {e}");
            }
        });
        // Two workers starting together must not both create the tables.
        let tx = client
            .transaction()
            .await
            .map_err(|e| store_error(&target, &e))?;
        tx.execute("SELECT pg_advisory_xact_lock(727001)", &[])
            .await
            .map_err(|e| store_error(&target, &e))?;
        tx.batch_execute(SCHEMA)
            .await
            .map_err(|e| store_error(&target, &e))?;
        tx.commit().await.map_err(|e| store_error(&target, &e))?;
        let session = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        Ok(StudyDb {
            client: Mutex::new(client),
            study: study.to_owned(),
            worker: worker.to_owned(),
            session,
            target,
        })
    }

    fn err(&self, e: &impl std::fmt::Display) -> RunError {
        store_error(&self.target, e)
    }

    /// Whether the study's finish ran.
    pub(crate) async fn finished(&self) -> Result<bool, RunError> {
        let c = self.client.lock().await;
        Ok(c.query_opt(
            "SELECT 1 FROM assay_steps WHERE study = $1 AND step = 'finish' AND state = 'done'",
            &[&self.study],
        )
        .await
        .map_err(|e| self.err(&e))?
        .is_some())
    }

    /// Creates the study with `header`, or returns the header it was created with.
    pub(crate) async fn join(&self, header: &Value) -> Result<Option<Value>, RunError> {
        let c = self.client.lock().await;
        let created = c
            .query_opt(
                "INSERT INTO assay_studies (name, header) VALUES ($1, $2)
                 ON CONFLICT (name) DO NOTHING RETURNING name",
                &[&self.study, header],
            )
            .await
            .map_err(|e| self.err(&e))?;
        if created.is_some() {
            return Ok(None);
        }
        let row = c
            .query_one(
                "SELECT header FROM assay_studies WHERE name = $1",
                &[&self.study],
            )
            .await
            .map_err(|e| self.err(&e))?;
        Ok(Some(row.get(0)))
    }

    /// Claims the next trial (see the module documentation). `plan` sees every row, in number
    /// order, and chooses the parameters of the next number.
    pub(crate) async fn claim(
        &self,
        total: usize,
        stale_after: f64,
        plan: impl FnOnce(&[StoredTrial]) -> Result<Planned, RunError>,
    ) -> Result<Claim, RunError> {
        let mut c = self.client.lock().await;
        let tx = c.transaction().await.map_err(|e| self.err(&e))?;
        let study = tx
            .query_opt(
                "SELECT halted FROM assay_studies WHERE name = $1 FOR UPDATE",
                &[&self.study],
            )
            .await
            .map_err(|e| self.err(&e))?
            .ok_or_else(|| RunError::Storage(format!("the study `{}` is gone", self.study)))?;
        if let Some(halted) = study.get::<_, Option<String>>(0) {
            return Ok(Claim::Halted(halted));
        }
        let reaped = tx
            .query(
                "UPDATE assay_trials SET state = 'waiting',
                     failures = failures || jsonb_build_array(format(
                         'attempt %s by %s stopped heart-beating (last at %s)',
                         attempts, worker, to_char(heartbeat AT TIME ZONE 'UTC',
                         'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')))
                 WHERE study = $1 AND state = 'running'
                   AND heartbeat < now() - make_interval(secs => $2)
                 RETURNING number, worker",
                &[&self.study, &stale_after],
            )
            .await
            .map_err(|e| self.err(&e))?;
        for row in &reaped {
            tracing::warn!(
                "study {}: trial {}: worker {} stopped heart-beating; the trial is retried",
                self.study,
                row.get::<_, i32>(0),
                row.get::<_, Option<String>>(1).unwrap_or_default()
            );
        }
        if let Some(row) = tx
            .query_opt(
                "UPDATE assay_trials SET state = 'running', worker = $2,
                     attempts = attempts + 1, heartbeat = now()
                 WHERE study = $1 AND number = (
                     SELECT number FROM assay_trials WHERE study = $1 AND state = 'waiting'
                     ORDER BY number LIMIT 1)
                 RETURNING number, params, failures, origin",
                &[&self.study, &self.worker],
            )
            .await
            .map_err(|e| self.err(&e))?
        {
            tx.commit().await.map_err(|e| self.err(&e))?;
            let failures: Value = row.get(2);
            return Ok(Claim::Retry {
                number: usize::try_from(row.get::<_, i32>(0)).unwrap_or_default(),
                params: decode_params(&row.get(1)).map_err(RunError::Storage)?,
                failures: serde_json::from_value(failures).unwrap_or_default(),
                origin: row.get(3),
            });
        }
        let rows = tx
            .query(
                "SELECT number, params, state, record FROM assay_trials
                 WHERE study = $1 ORDER BY number",
                &[&self.study],
            )
            .await
            .map_err(|e| self.err(&e))?;
        let stored = rows.iter().map(stored).collect::<Result<Vec<_>, _>>()?;
        if stored.len() >= total {
            tx.commit().await.map_err(|e| self.err(&e))?;
            return Ok(Claim::Exhausted {
                unfinished: stored.iter().filter(|t| t.state != "done").count(),
            });
        }
        let number = stored.len();
        let planned = plan(&stored)?;
        let params = serde_json::to_value(&planned.params).map_err(|e| self.err(&e))?;
        let finished = planned.finished.is_some();
        let record = planned
            .finished
            .map(|r| serde_json::to_value(r).map_err(|e| self.err(&e)))
            .transpose()?;
        let n = i32::try_from(number).map_err(|e| self.err(&e))?;
        tx.execute(
            "INSERT INTO assay_trials (study, number, params, state, worker, record, origin)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &self.study,
                &n,
                &params,
                &if finished { "done" } else { "running" },
                &self.worker,
                &record,
                &planned.origin,
            ],
        )
        .await
        .map_err(|e| self.err(&e))?;
        tx.commit().await.map_err(|e| self.err(&e))?;
        Ok(Claim::New {
            number,
            params: planned.params,
            origin: planned.origin,
            finished,
        })
    }

    /// Records that this process has spent `usd` so far (it only grows) and returns what every
    /// other process of the study recorded: the budget is the study's.
    pub(crate) async fn spend(&self, usd: f64) -> Result<f64, RunError> {
        let c = self.client.lock().await;
        c.execute(
            "INSERT INTO assay_spend (study, worker, session, spent) VALUES ($1, $2, $3, $4)
             ON CONFLICT (study, worker, session)
             DO UPDATE SET spent = GREATEST(assay_spend.spent, EXCLUDED.spent), updated = now()",
            &[&self.study, &self.worker, &self.session, &usd],
        )
        .await
        .map_err(|e| self.err(&e))?;
        let row = c
            .query_one(
                "SELECT COALESCE(SUM(spent), 0)::float8 FROM assay_spend
                 WHERE study = $1 AND NOT (worker = $2 AND session = $3)",
                &[&self.study, &self.worker, &self.session],
            )
            .await
            .map_err(|e| self.err(&e))?;
        Ok(row.get(0))
    }

    /// Touches a running trial's heartbeat; false when this worker no longer holds it.
    pub(crate) async fn heartbeat(&self, number: usize) -> Result<bool, RunError> {
        let n = i32::try_from(number).map_err(|e| self.err(&e))?;
        let c = self.client.lock().await;
        let touched = c
            .execute(
                "UPDATE assay_trials SET heartbeat = now()
                 WHERE study = $1 AND number = $2 AND worker = $3 AND state = 'running'",
                &[&self.study, &n, &self.worker],
            )
            .await
            .map_err(|e| self.err(&e))?;
        Ok(touched == 1)
    }

    /// Records a finished trial; false when this worker no longer held it (another took it
    /// over after this one's heartbeat lapsed: its result stands).
    pub(crate) async fn finish(&self, record: &TrialRecord) -> Result<bool, RunError> {
        let n = i32::try_from(record.number).map_err(|e| self.err(&e))?;
        let value = serde_json::to_value(record).map_err(|e| self.err(&e))?;
        let c = self.client.lock().await;
        let updated = c
            .execute(
                "UPDATE assay_trials SET state = 'done', record = $4, heartbeat = now()
                 WHERE study = $1 AND number = $2 AND worker = $3 AND state = 'running'",
                &[&self.study, &n, &self.worker, &value],
            )
            .await
            .map_err(|e| self.err(&e))?;
        Ok(updated == 1)
    }

    /// Adds finished trials this worker ran outside the claims (a proposal round's), after the
    /// rows there are; trials already there are left.
    pub(crate) async fn add_finished(&self, records: &[TrialRecord]) -> Result<(), RunError> {
        let c = self.client.lock().await;
        for record in records {
            let n = i32::try_from(record.number).map_err(|e| self.err(&e))?;
            let params = serde_json::to_value(&record.params).map_err(|e| self.err(&e))?;
            let value = serde_json::to_value(record).map_err(|e| self.err(&e))?;
            c.execute(
                "INSERT INTO assay_trials (study, number, params, state, worker, record)
                 VALUES ($1, $2, $3, 'done', $4, $5) ON CONFLICT DO NOTHING",
                &[&self.study, &n, &params, &self.worker, &value],
            )
            .await
            .map_err(|e| self.err(&e))?;
        }
        Ok(())
    }

    /// Every trial's row, in number order.
    pub(crate) async fn trials(&self) -> Result<Vec<(StoredTrial, Vec<String>)>, RunError> {
        let c = self.client.lock().await;
        let rows = c
            .query(
                "SELECT number, params, state, record, failures FROM assay_trials
                 WHERE study = $1 ORDER BY number",
                &[&self.study],
            )
            .await
            .map_err(|e| self.err(&e))?;
        rows.iter()
            .map(|row| {
                let failures: Value = row.get(4);
                Ok((
                    stored(row)?,
                    serde_json::from_value(failures).unwrap_or_default(),
                ))
            })
            .collect()
    }

    /// Halts the study for every worker (the first reason stays).
    pub(crate) async fn halt(&self, reason: &str) -> Result<(), RunError> {
        let c = self.client.lock().await;
        c.execute(
            "UPDATE assay_studies SET halted = coalesce(halted, $2) WHERE name = $1",
            &[&self.study, &reason],
        )
        .await
        .map_err(|e| self.err(&e))?;
        Ok(())
    }

    /// Whether this worker runs `step` (see [`Elected`]).
    pub(crate) async fn elect(&self, step: &str, stale_after: f64) -> Result<Elected, RunError> {
        let c = self.client.lock().await;
        if c.query_opt(
            "INSERT INTO assay_steps (study, step, worker, state) VALUES ($1, $2, $3, 'running')
             ON CONFLICT DO NOTHING RETURNING step",
            &[&self.study, &step, &self.worker],
        )
        .await
        .map_err(|e| self.err(&e))?
        .is_some()
        {
            return Ok(Elected::Me { took_over: None });
        }
        if let Some(row) = c
            .query_opt(
                "UPDATE assay_steps AS s SET worker = $3, heartbeat = now()
                 FROM assay_steps AS old
                 WHERE s.study = $1 AND s.step = $2 AND s.state = 'running'
                   AND s.heartbeat < now() - make_interval(secs => $4)
                   AND old.study = s.study AND old.step = s.step
                 RETURNING old.worker",
                &[&self.study, &step, &self.worker, &stale_after],
            )
            .await
            .map_err(|e| self.err(&e))?
        {
            return Ok(Elected::Me {
                took_over: Some(row.get(0)),
            });
        }
        let row = c
            .query_one(
                "SELECT state, worker, result FROM assay_steps WHERE study = $1 AND step = $2",
                &[&self.study, &step],
            )
            .await
            .map_err(|e| self.err(&e))?;
        let state: String = row.get(0);
        Ok(if state == "done" {
            Elected::Done(row.get::<_, Option<Value>>(2).unwrap_or(Value::Null))
        } else {
            Elected::Other(row.get(1))
        })
    }

    /// Touches the heartbeat of a step this worker runs.
    pub(crate) async fn step_heartbeat(&self, step: &str) -> Result<(), RunError> {
        let c = self.client.lock().await;
        c.execute(
            "UPDATE assay_steps SET heartbeat = now()
             WHERE study = $1 AND step = $2 AND worker = $3",
            &[&self.study, &step, &self.worker],
        )
        .await
        .map_err(|e| self.err(&e))?;
        Ok(())
    }

    /// Marks a step this worker ran done, with its result.
    pub(crate) async fn step_done(&self, step: &str, result: &Value) -> Result<(), RunError> {
        let c = self.client.lock().await;
        c.execute(
            "UPDATE assay_steps SET state = 'done', result = $4, heartbeat = now()
             WHERE study = $1 AND step = $2 AND worker = $3",
            &[&self.study, &step, &self.worker, result],
        )
        .await
        .map_err(|e| self.err(&e))?;
        Ok(())
    }
}
