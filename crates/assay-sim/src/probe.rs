//! One conversation at a time, changed on purpose and never judged: what `assay redteam`'s
//! simulator families (`tool-injection`, `agency`) run.
//!
//! [`Probe::open`] reads the settings and `sim/`, builds the model under test and the simulated
//! user (flags > `[simulate]` > defaults, as `assay simulate` does) behind one call limit, and
//! makes a scratch folder, removed when the probe is dropped. [`Probe::converse`] runs one
//! scenario once, as `assay simulate` runs it (its setup, its own servers and database, its
//! expected-state and trajectory checks), with the simulated user's persona replaced and/or
//! every tool result rewritten on its way to the model under test, and returns the run with its
//! transcript. No judge reads it: the caller decides by evidence.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use assay_core::simulation::ScenarioRun;
use assay_project::HarnessError;
use assay_project::engine::{ProviderCalls, build_chat_model};
use assay_project::settings::ProjectSettings;

use crate::run::{EnvLookup, SimModels, SimOptions, ToolTap};
use crate::scratch::RunScratch;
use crate::session::SessionError;
use crate::suite::Suite;

/// What a probe is opened with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeRequest {
    /// The project directory (with `sim/suite.yaml`).
    pub project: PathBuf,
    /// The model under test (else `[simulate] model`).
    pub model: Option<String>,
    /// The simulated user's model (else `[simulate] simulator_model`).
    pub simulator_model: Option<String>,
    /// Model calls in flight (else `[simulate] concurrency`).
    pub concurrency: Option<usize>,
}

/// A simulation opened for single, altered conversations.
pub struct Probe {
    suite: Suite,
    models: SimModels,
    concurrency: usize,
    env: EnvLookup,
    scratch: RunScratch,
    /// Keeps the call cache and the accounting open while the probe lives.
    _calls: ProviderCalls,
    next: AtomicUsize,
}

impl Probe {
    /// Reads the project's settings and `sim/` and builds the two models; nothing runs yet.
    pub fn open(request: &ProbeRequest, env: EnvLookup) -> Result<Probe, SessionError> {
        let dir = request.project.as_path();
        let settings = ProjectSettings::load(dir)?;
        let suite = crate::load(dir)?;
        let model = request
            .model
            .clone()
            .or_else(|| settings.simulate.model.clone())
            .ok_or_else(|| {
                HarnessError::Usage(
                    "the simulator's red-team families need the model under test: --model (or [simulate] model in assay.toml)"
                        .into(),
                )
            })?;
        let simulator = request
            .simulator_model
            .clone()
            .unwrap_or_else(|| settings.simulate.simulator_model.clone());
        let concurrency = request
            .concurrency
            .unwrap_or(settings.simulate.concurrency)
            .max(1);
        let lookup = |name: &str| env(name);
        let assistant = build_chat_model(&settings, &model, "--model", &lookup)?;
        let simulator_model =
            build_chat_model(&settings, &simulator, "--simulator-model", &lookup)?;
        let calls = ProviderCalls::open(&settings, None, &lookup, true)?;
        let group = calls.chat_group(concurrency);
        let user = group.chat("user", simulator_model);
        let models = SimModels {
            assistant_price: calls.price(assistant.model()),
            simulator_price: calls.price(user.model()),
            assistant: group.chat("assistant", assistant),
            // Never called: a probe's runs are not judged.
            judge: user.clone(),
            simulator: user,
        };
        let scratch_root = dir.join(".assay").join("sim");
        let scratch = RunScratch::create(&scratch_root, false).map_err(|e| {
            HarnessError::Infrastructure(format!(
                "cannot make a scratch folder under {}: {e}",
                scratch_root.display()
            ))
        })?;
        Ok(Probe {
            suite,
            models,
            concurrency,
            env,
            scratch,
            _calls: calls,
            next: AtomicUsize::new(0),
        })
    }

    /// The suite.
    pub fn suite(&self) -> &Suite {
        &self.suite
    }

    /// The model under test's name.
    pub fn model(&self) -> &str {
        self.models.assistant.model()
    }

    fn options(&self, tap: Option<ToolTap>) -> SimOptions {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        SimOptions {
            repeat: 1,
            concurrency: self.concurrency,
            runs_in_flight: 1,
            work_root: self.scratch.dir().join(format!("probe-{n}")),
            keep_workdirs: false,
            judge_samples: 1,
            env: self.env.clone(),
            on_finished: None,
            ready: None,
            tool_tap: tap,
            judge: false,
        }
    }

    /// Checks the suite's servers and tools as `assay simulate` does before its first model
    /// call (bad input, exit 2; a server that cannot start, exit 3).
    pub async fn preflight(&self) -> Result<(), SessionError> {
        crate::preflight(&self.suite, &self.options(None))
            .await
            .map_err(crate::session::preflight_error)
    }

    /// Runs scenario `id` once, with `persona` in place of its own and every tool result passed
    /// through `tap`. The run's `error` is set when the conversation could not take place (a
    /// server or a model failed); its verdict is not decided (no judge).
    pub async fn converse(
        &self,
        id: &str,
        persona: Option<String>,
        tap: Option<ToolTap>,
    ) -> Result<ScenarioRun, String> {
        let Some(scenario) = self.suite.scenarios.iter().find(|s| s.config.id == id) else {
            return Err(format!("no scenario `{id}`"));
        };
        let mut scenario = scenario.clone();
        if let Some(persona) = persona {
            scenario.config.persona_prompt = persona;
        }
        let options = self.options(tap);
        let report = crate::simulate(&self.suite, &self.models, &options, &[&scenario]).await;
        report
            .runs
            .into_iter()
            .next()
            .ok_or_else(|| format!("scenario `{id}` did not run"))
    }
}
