//! `assay optimize` (the seed's three steps) and `assay evaluate` (step 3 alone): the flags
//! mapped to a request for [`assay_experiment::session`], a progress bar, and the rendering.

use std::io::IsTerminal as _;
use std::path::PathBuf;

use assay_core::experiment::Estimate;
use assay_experiment::run::{self, Progress};
use assay_experiment::session::{self, CaseSource, EvaluateRequest, Observer, OptimizeRequest};
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{command_line, out, runtime};
use crate::exit::Exit;

/// `assay optimize`
#[derive(Debug, Args)]
pub struct OptimizeArgs {
    /// The project directory (prompts/, prompt_variations/, test_data/).
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// The experiment's name: its folder under experiments/.
    #[arg(long, value_name = "NAME")]
    pub experiment_name: String,

    /// Trials of the study (the baseline is trial 0); at least 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000), allow_negative_numbers = true)]
    pub optimization_trials: u64,

    /// A test-case file instead of test_data/optimization/VERSION (files relative to it).
    #[arg(long, value_name = "FILE")]
    pub optimization_test_cases: Option<PathBuf>,

    /// A test-case file instead of test_data/evaluation/VERSION.
    #[arg(long, value_name = "FILE")]
    pub evaluation_test_cases: Option<PathBuf>,

    /// The optimization test-data version (default: latest_optimization in versions.json).
    #[arg(long, value_name = "V")]
    pub optimization_version: Option<String>,

    /// The evaluation test-data version (default: latest_evaluation in versions.json).
    #[arg(long, value_name = "V")]
    pub evaluation_version: Option<String>,

    /// Log the three runs to this MLflow tracking server (else experiments/NAME/tracking/).
    #[arg(long, value_name = "URI")]
    pub mlflow_uri: Option<String>,

    /// The sampler's seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Continue an interrupted experiment from its journal.
    #[arg(long)]
    pub resume: bool,

    /// A hard cap on the spend in USD, checked before each case is dispatched.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,

    /// Score new combinations on a subset first; drop those clearly worse than the best.
    #[arg(long)]
    pub racing: bool,

    /// After the search, R rounds in which a proposer model reads the failed optimization
    /// cases' traces and writes revised prompts that join the study (default [optimize.propose]
    /// rounds, 0).
    #[arg(long, value_name = "R")]
    pub propose_rounds: Option<usize>,

    /// Cases of one trial at once, for stateless targets only (default [optimize]
    /// max_concurrency, 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_concurrency: Option<u64>,

    /// Call cache mode: read-write, off or replay (default [providers] cache).
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,

    /// Keep the study's trials in this PostgreSQL database (postgresql://user@host/db), shared
    /// with `--worker` processes on any machine (default [optimize] storage; none: the local
    /// journal).
    #[arg(long, value_name = "URL")]
    pub storage: Option<String>,

    /// Join the shared experiment of this name (--storage): claim and run its trials
    /// alongside the other workers; the first to finish the last steps writes the report.
    #[arg(long)]
    pub worker: bool,

    #[command(flatten)]
    pub batch: crate::args::BatchArg,

    /// Print the experiment report as JSON on stdout (a worker that does not finish the
    /// study: what it ran).
    #[arg(long)]
    pub json: bool,
}

/// `assay evaluate`
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// The project directory.
    #[arg(default_value = ".")]
    pub dir: PathBuf,

    /// The prompt folder to evaluate (<agent>_system_prompt.txt files).
    #[arg(long, value_name = "DIR")]
    pub prompts: PathBuf,

    /// A name for the logs' folder under experiments/ (default evaluate_<time>).
    #[arg(long, value_name = "NAME")]
    pub experiment_name: Option<String>,

    /// A test-case file instead of test_data/evaluation/VERSION.
    #[arg(long, value_name = "FILE")]
    pub evaluation_test_cases: Option<PathBuf>,

    /// The evaluation test-data version (default: latest_evaluation).
    #[arg(long, value_name = "V")]
    pub evaluation_version: Option<String>,

    /// The bootstrap's seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// A hard cap on the spend in USD.
    #[arg(long, value_name = "USD")]
    pub budget: Option<f64>,

    /// Cases at once, for stateless targets only.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub max_concurrency: Option<u64>,

    /// Call cache mode: read-write, off or replay.
    #[arg(long, value_name = "MODE")]
    pub cache: Option<String>,

    #[command(flatten)]
    pub batch: crate::args::BatchArg,

    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A progress bar on stderr (hidden when stderr is not a terminal or for `--json`).
struct Bar(ProgressBar);

impl Bar {
    fn new(show: bool) -> Bar {
        let bar = ProgressBar::with_draw_target(
            Some(0),
            if show {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {pos}/{len} cases, {elapsed} (eta {eta}) {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        Bar(bar)
    }
}

impl Progress for Bar {
    fn start(&self, step: &str, units: u64) {
        self.0.reset();
        self.0.set_length(units);
        self.0.set_position(0);
        self.0.set_prefix(step.to_owned());
    }
    fn advance(&self, n: u64, note: &str) {
        self.0.set_message(note.to_owned());
        self.0.inc(n);
    }
    fn finish(&self, step: &str, summary: &str) {
        self.0.set_length(0);
        self.0.set_position(0);
        self.0.set_message(String::new());
        self.0.println(format!("{step}: {summary}"));
    }
}

fn say(text: &str) {
    super::err(&format!("{text}\n"));
}

fn show_estimate(e: &Estimate) {
    say(&assay_report::experiment::estimate_text(e));
}

fn warn(w: &str) {
    tracing::warn!("{w}");
}

fn observer(bar: &Bar) -> Observer<'_> {
    Observer {
        progress: bar,
        estimate: &show_estimate,
        warning: &warn,
    }
}

pub fn optimize(args: &OptimizeArgs) -> anyhow::Result<Exit> {
    let request = OptimizeRequest {
        project: args.dir.clone(),
        name: args.experiment_name.clone(),
        trials: args.optimization_trials as usize,
        seed: args.seed,
        resume: args.resume,
        budget: args.budget,
        racing: args.racing,
        max_concurrency: args.max_concurrency.map(|n| n as usize),
        optimization: CaseSource {
            file: args.optimization_test_cases.clone(),
            version: args.optimization_version.clone(),
        },
        evaluation: CaseSource {
            file: args.evaluation_test_cases.clone(),
            version: args.evaluation_version.clone(),
        },
        cache: args.cache.clone(),
        mlflow_uri: args.mlflow_uri.clone(),
        propose_rounds: args.propose_rounds,
        storage: args.storage.clone(),
        worker: args.worker,
        command_line: command_line(),
    };
    let bar = Bar::new(!args.json && std::io::stderr().is_terminal());
    let done = runtime()?.block_on(session::optimize(
        &request,
        &args.batch.env(),
        &observer(&bar),
    ))?;
    bar.0.finish_and_clear();
    let done = match done {
        session::OptimizeDone::Finished(done) => done,
        session::OptimizeDone::Joined(joined) => {
            if args.json {
                out(&format!("{}\n", serde_json::to_string_pretty(&joined)?));
            } else {
                out(&joined_text(&joined));
            }
            return Ok(Exit::Success);
        }
    };
    if args.json {
        out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&done.report)?
        ));
    } else {
        out(&assay_report::experiment::console(
            &done.report,
            Some(&done.files.report_md.display().to_string()),
        ));
    }
    Ok(Exit::Success)
}

/// What a worker that does not finish the study ran, in one or two lines.
fn joined_text(joined: &run::JoinedStudy) -> String {
    let numbers: Vec<String> = joined.trials.iter().map(ToString::to_string).collect();
    let shown = if numbers.len() > 20 {
        format!("{}, … ({} in all)", numbers[..20].join(", "), numbers.len())
    } else {
        numbers.join(", ")
    };
    let finish = match &joined.finisher {
        Some(w) => format!("worker {w} runs the evaluation and writes the report"),
        None => {
            "the study is finished; its report is in the finishing worker's experiments/ folder"
                .to_owned()
        }
    };
    format!(
        "experiment {}: worker {} ran {} trial{} ({shown}); {finish}\n",
        joined.name,
        joined.worker,
        joined.trials.len(),
        if joined.trials.len() == 1 { "" } else { "s" },
    )
}

pub fn evaluate(args: &EvaluateArgs) -> anyhow::Result<Exit> {
    let request = EvaluateRequest {
        project: args.dir.clone(),
        prompts: args.prompts.clone(),
        name: args.experiment_name.clone(),
        seed: args.seed,
        budget: args.budget,
        max_concurrency: args.max_concurrency.map(|n| n as usize),
        evaluation: CaseSource {
            file: args.evaluation_test_cases.clone(),
            version: args.evaluation_version.clone(),
        },
        cache: args.cache.clone(),
        command_line: command_line(),
    };
    let bar = Bar::new(!args.json && std::io::stderr().is_terminal());
    let done = runtime()?.block_on(session::evaluate(
        &request,
        &args.batch.env(),
        &observer(&bar),
    ))?;
    bar.0.finish_and_clear();
    if args.json {
        let v = serde_json::json!({"evaluation": done.evaluation, "evaluation_baseline": done.baseline, "comparison": done.comparison, "usage": done.usage});
        out(&format!("{}\n", serde_json::to_string_pretty(&v)?));
    } else {
        out(&format!(
            "evaluation ({} cases): prompts {} vs baseline {}\n{}\n",
            done.evaluation.data.cases,
            run::metrics_line(&done.evaluation.metrics),
            run::metrics_line(&done.baseline.metrics),
            done.comparison.significance.verdict
        ));
    }
    Ok(Exit::Success)
}
