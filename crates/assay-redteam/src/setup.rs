//! The subject of a run from a project: the matcher and crisis seeds always, the product and
//! the answer cases when a family asks the product, the simulation when a family asks the
//! simulator.

use assay_project::HarnessError;
use assay_project::engine::{self, ProviderCalls};
use assay_project::project::Project;
use assay_run::answer::{AnswerBackend, AnswerFactory};

use crate::agentic::SimSubject;
use crate::attack::{AskCase, Product, Subject};
use crate::family::Family;
use crate::seeds;

/// The models of the simulator's families (else `[simulate]`'s).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimModels {
    /// The model under test (`--model`).
    pub model: Option<String>,
    /// The simulated user's model (`--simulator-model`).
    pub simulator_model: Option<String>,
}

/// The attacker model and what it is asked for (`--attacker-model`, `--questions`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attacker {
    /// The model (`vendor/model`), if any.
    pub model: Option<String>,
    /// Questions to draft per SITUATION entity (0: none).
    pub questions: usize,
}

/// The subject for `families` (empty: every family). With an attacker model (`--attacker-model`,
/// else `[redteam] attacker_model`), its calls through the project's call cache and limits,
/// crisis messages are also rewritten by that model (with `crisis-evasion` among them), and
/// with `attacker.questions` above 0 it drafts that many questions per SITUATION entity, which the
/// answer-channel families ask besides the answer bank's cases. The product is built (and the
/// store synced, the knowledge base embedded) only when one of them asks it and `factory` is given;
/// the simulation is opened and its servers checked only when one of them asks the simulator.
/// A family asked for by name that cannot run is an error here; one that only applies by
/// default is skipped, with why.
pub async fn subject(
    project: &Project,
    families: &[Family],
    embedder_flag: Option<&str>,
    env_lookup: &assay_sim::run::EnvLookup,
    factory: Option<&AnswerFactory>,
    sim_models: &SimModels,
    attacker: &Attacker,
) -> Result<Subject, HarnessError> {
    let attacker_model = attacker.model.as_deref();
    let env: &dyn Fn(&str) -> Option<String> = &**env_lookup;
    let settings = &project.settings;
    let pattern_cases: Vec<_> = project.banks.pattern.iter().map(|c| &c.case).collect();
    let crisis_seeds = project
        .patterns
        .as_deref()
        .map(|m| seeds::crisis_seeds(m, project.rules.as_ref(), &pattern_cases))
        .unwrap_or_default();
    let wants_product = families.is_empty() || families.iter().any(|f| f.needs_product());
    let wants_rewriter = families.is_empty() || families.contains(&Family::CrisisEvasion);
    let questions = if attacker_model.is_some() && wants_product {
        attacker.questions
    } else {
        0
    };
    let model_name = attacker_model.filter(|_| wants_rewriter || questions > 0);
    let factory = factory.filter(|_| {
        wants_product
            && (!project.banks.answer.is_empty() || questions > 0)
            && !settings.optimize.target.is_empty()
    });
    // One call cache, limits and accounting for the attacker model and the product.
    let calls = if model_name.is_some() || factory.is_some() {
        Some(ProviderCalls::open(settings, None, env, true)?)
    } else {
        None
    };
    let model = match (model_name, &calls) {
        (Some(name), Some(calls)) => {
            let model = engine::build_chat_model(settings, name, "the attacker model", env)?;
            Some(calls.chat("attacker", model))
        }
        _ => None,
    };
    let product = match (factory, &calls) {
        (Some(factory), Some(calls)) => {
            let store = engine::open_store_with(settings, env)?;
            engine::sync_kb(&store, project)?;
            let kb = engine::snapshot(&*store)?;
            let (system, context, _) =
                AnswerBackend::product(project, &store, &kb, embedder_flag, calls, env, factory)
                    .await?;
            let mut cases = project
                .banks
                .answer
                .iter()
                .map(|c| {
                    let c = &c.case;
                    AskCase {
                        id: c.test_id.clone(),
                        message: c.message.clone(),
                        user_state: c.user_state.clone(),
                        audience: assay_project::retrieve::audience(
                            c.user_type.as_deref(),
                            &c.user_state,
                        ),
                    }
                })
                .collect::<Vec<_>>();
            if let Some(model) = model.as_deref().filter(|_| questions > 0) {
                cases.extend(drafted_questions(model, kb.entities(), questions).await);
            }
            Some(Product {
                system,
                context,
                cases,
            })
        }
        _ => None,
    };
    let sim = if families.is_empty() || families.iter().any(|f| f.needs_simulator()) {
        let asked = families.iter().any(|f| f.needs_simulator());
        match simulation(
            project,
            env_lookup.clone(),
            sim_models,
            &settings.redteam.protected_state,
        )
        .await
        {
            Ok(sim) => Ok(sim),
            Err(e) if asked => return Err(e),
            Err(e) => Err(e.to_string()),
        }
    } else {
        Err("not asked".into())
    };
    let rewriter = model.filter(|_| wants_rewriter);
    Ok(Subject::new(
        project.patterns.clone(),
        crisis_seeds,
        product,
        settings.redteam.clone(),
    )
    .with_sim(sim)
    .with_rewriter(rewriter))
}

/// The prefix of the ids of drafted questions (`q-<entity>-<n>`), which no answer case has.
pub const QUESTION_PREFIX: &str = "q-";

/// `n` questions per active SITUATION entity, drafted by `model` (in entity order), as cases to
/// ask: id `q-<entity>-<k>`, no user state, the entity's first audience. An entity the model
/// wrote nothing for is skipped with a warning.
async fn drafted_questions(
    model: &dyn assay_providers::ChatModel,
    entities: &[assay_core::entity::Entity],
    n: usize,
) -> Vec<AskCase> {
    let mut out = Vec::new();
    for e in entities
        .iter()
        .filter(|e| e.is_active && e.load_mode == assay_core::entity::LoadMode::Situation)
    {
        match crate::rewrite::questions(model, e, n).await {
            Ok(questions) => {
                let user_state = assay_core::UserState::new();
                let audience = assay_project::retrieve::audience(
                    e.audience_types.first().map(String::as_str),
                    &user_state,
                );
                for (k, message) in questions.into_iter().enumerate() {
                    out.push(AskCase {
                        id: format!("{QUESTION_PREFIX}{}-{}", e.entity_id, k + 1),
                        message,
                        user_state: user_state.clone(),
                        audience: audience.clone(),
                    });
                }
            }
            Err(why) => tracing::warn!("no question drafted for {}: {why}", e.entity_id),
        }
    }
    out
}

/// The project's simulation, opened and preflighted, or why it cannot be.
async fn simulation(
    project: &Project,
    env: assay_sim::run::EnvLookup,
    models: &SimModels,
    protected: &[String],
) -> Result<SimSubject, HarnessError> {
    let root = &project.settings.root;
    if !root.join("sim").join("suite.yaml").is_file() {
        return Err(HarnessError::Usage(format!(
            "the simulator's families need a conversation suite: {} has no sim/suite.yaml (docs/simulate.md)",
            root.display()
        )));
    }
    let request = assay_sim::probe::ProbeRequest {
        project: root.clone(),
        model: models.model.clone(),
        simulator_model: models.simulator_model.clone(),
        concurrency: None,
    };
    let probe = assay_sim::probe::Probe::open(&request, env).map_err(session_error)?;
    crate::agentic::check_protected(protected, probe.suite()).map_err(HarnessError::Usage)?;
    probe.preflight().await.map_err(session_error)?;
    Ok(SimSubject::new(probe))
}

fn session_error(e: assay_sim::session::SessionError) -> HarnessError {
    use assay_sim::session::SessionError;
    match e {
        SessionError::Harness(h) => h,
        SessionError::Data(d) | SessionError::Suite(assay_sim::SuiteError::Data(d)) => {
            HarnessError::Data(d)
        }
        SessionError::Save(s) => HarnessError::Infrastructure(s.to_string()),
    }
}

/// The product's description for the run's header.
pub fn describe(subject: &Subject) -> String {
    subject
        .product
        .as_ref()
        .map_or_else(|| "none".to_owned(), |p| p.system.describe())
}
