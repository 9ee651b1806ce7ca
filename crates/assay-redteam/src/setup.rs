//! The subject of a run from a project: the matcher and crisis seeds always, the product and
//! the answer cases when a family asks the product.

use assay_project::HarnessError;
use assay_project::engine::{self, ProviderCalls};
use assay_project::project::Project;
use assay_run::answer::{AnswerBackend, AnswerFactory};

use crate::attack::{AskCase, Product, Subject};
use crate::family::Family;
use crate::seeds;

/// The subject for `families` (empty: every family). The product is built (and the store
/// synced, the knowledge base embedded) only when one of them asks it and `factory` is given.
pub async fn subject(
    project: &Project,
    families: &[Family],
    embedder_flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    factory: Option<&AnswerFactory>,
) -> Result<Subject, HarnessError> {
    let settings = &project.settings;
    let pattern_cases: Vec<_> = project.banks.pattern.iter().map(|c| &c.case).collect();
    let crisis_seeds = project
        .patterns
        .as_deref()
        .map(|m| seeds::crisis_seeds(m, project.rules.as_ref(), &pattern_cases))
        .unwrap_or_default();
    let wants_product = families.is_empty() || families.iter().any(|f| f.needs_product());
    let product = match factory {
        Some(factory)
            if wants_product
                && !project.banks.answer.is_empty()
                && !settings.optimize.target.is_empty() =>
        {
            let store = engine::open_store_with(settings, env)?;
            engine::sync_kb(&store, project)?;
            let kb = engine::snapshot(&*store)?;
            let calls = ProviderCalls::open(settings, None, env, true)?;
            let (system, context, _) =
                AnswerBackend::product(project, &store, &kb, embedder_flag, &calls, env, factory)
                    .await?;
            let cases = project
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
                .collect();
            Some(Product {
                system,
                context,
                cases,
            })
        }
        _ => None,
    };
    Ok(Subject::new(
        project.patterns.clone(),
        crisis_seeds,
        product,
        settings.redteam.clone(),
    ))
}

/// The product's description for the run's header.
pub fn describe(subject: &Subject) -> String {
    subject
        .product
        .as_ref()
        .map_or_else(|| "none".to_owned(), |p| p.system.describe())
}
