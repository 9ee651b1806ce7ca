//! The product under test for the answer bank of `assay run`: the optimizer's target (the
//! built-in chain, a command, an HTTP endpoint, built from `[optimize]` by
//! [`crate::session::build_target`], the same function the optimizer uses) run with the
//! project's production prompts.
//!
//! The production prompts are `prompts/<agent>_system_prompt.txt`, the folder promotion writes
//! ([`crate::promote`]). A project without that folder runs a command or HTTP target with no
//! prompts; the built-in chain cannot run without them.
//!
//! Each answer case becomes one [`TargetRequest`]: the message as the question, the user's
//! state and the pipeline's context (see [`assay_providers::target`]). The reply's final
//! answer is the reply's text; the contexts the target says it used, when it says, are judged
//! instead of the pipeline's, and the tools it says it called are kept, numbered `call-1`,
//! `call-2`, … for the case's trajectory rules. Every [`TargetError`] is an infrastructure error for the bank:
//! the case is recorded as an error, never scored.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use assay_core::answer::ContextItem;
use assay_core::simulation::ToolCallRecord;
use assay_project::HarnessError;
use assay_project::engine::ProviderCalls;
use assay_project::settings::ProjectSettings;
use assay_run::answer::{AnswerAsk, AnswerFactory, AnswerReply, AnswerSystem};

use crate::error::ExperimentError;
use crate::prompts::read_prompt_dir;
use crate::session::{Env, SessionError, build_target};
use crate::target::{Target, TargetContext, TargetError, TargetRequest};

/// The folder of production prompts inside a project.
pub const PRODUCTION_PROMPTS: &str = "prompts";

/// The production prompts of a project, agent → text: `prompts/` as the optimizer reads it,
/// or none when the project has no such folder.
pub fn production_prompts(dir: &Path) -> Result<BTreeMap<String, String>, ExperimentError> {
    let folder = dir.join(PRODUCTION_PROMPTS);
    if !folder.exists() {
        return Ok(BTreeMap::new());
    }
    read_prompt_dir(&folder)
}

/// A [`Target`] answering answer cases with fixed prompts.
#[derive(Debug, Clone)]
pub struct TargetAnswers {
    target: Arc<dyn Target>,
    prompts: BTreeMap<String, String>,
}

impl TargetAnswers {
    /// `target` run with `prompts` (agent → text).
    pub fn new(target: Arc<dyn Target>, prompts: BTreeMap<String, String>) -> TargetAnswers {
        TargetAnswers { target, prompts }
    }

    /// The target `[optimize]` describes, with the project's production prompts
    /// ([`production_prompts`]); its model calls go through `calls` under the role `target`.
    pub fn from_settings(
        settings: &ProjectSettings,
        dir: &Path,
        calls: &ProviderCalls,
        env: Env<'_>,
    ) -> Result<TargetAnswers, SessionError> {
        let prompts = production_prompts(dir)?;
        let kind = settings.optimize.target.as_str();
        if prompts.is_empty() && kind == "chain" {
            return Err(ExperimentError::Usage(format!(
                "{}: the built-in chain target (`[optimize] target = \"{kind}\"`) needs the production prompts, one <agent>_system_prompt.txt per agent; add them, or set `[optimize] target` to \"command\", \"http\", \"worker\" or a function (python:… or node:…) to ask your own product",
                dir.join(PRODUCTION_PROMPTS).display()
            ))
            .into());
        }
        let agents: Vec<String> = prompts.keys().cloned().collect();
        let built = build_target(settings, dir, &agents, calls, env)?;
        Ok(TargetAnswers::new(built.target, prompts))
    }

    /// The target.
    pub fn target(&self) -> &Arc<dyn Target> {
        &self.target
    }

    /// The prompts it runs with.
    pub fn prompts(&self) -> &BTreeMap<String, String> {
        &self.prompts
    }

    /// Checks that every prompt reaches the target ([`Target::dry_check`]), before any case.
    pub async fn dry_check(&self) -> Result<(), TargetError> {
        let agents: Vec<String> = self.prompts.keys().cloned().collect();
        self.target.dry_check(&agents).await
    }

    /// The request one answer case sends.
    pub fn request(ask: &AnswerAsk<'_>) -> TargetRequest {
        TargetRequest {
            question: ask.message.to_owned(),
            files: Vec::new(),
            user_state: Some(ask.user_state.clone()),
            context: Some(
                ask.context
                    .iter()
                    .map(|c| TargetContext {
                        entity: c.entity.clone(),
                        text: c.text.clone(),
                    })
                    .collect(),
            ),
        }
    }
}

#[async_trait::async_trait]
impl AnswerSystem for TargetAnswers {
    fn describe(&self) -> String {
        self.target.describe()
    }

    fn stateless(&self) -> bool {
        self.target.stateless()
    }

    async fn close(&self) {
        self.target.close().await;
    }

    async fn respond(&self, ask: &AnswerAsk<'_>) -> Result<AnswerReply, String> {
        let started = Instant::now();
        let responded = self
            .target
            .respond(&self.prompts, &TargetAnswers::request(ask))
            .await
            .map_err(|e| e.to_string())?;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        Ok(AnswerReply {
            text: responded.answered.final_answer,
            contexts: responded.contexts.map(|used| {
                used.into_iter()
                    .map(|c| ContextItem {
                        entity: c.entity,
                        text: c.text,
                    })
                    .collect()
            }),
            latency_ms,
            cost_usd: None,
            steps: responded.answered.steps,
            tool_calls: responded.tool_calls.map(|calls| {
                calls
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| ToolCallRecord {
                        id: format!("call-{}", i + 1),
                        name: c.name,
                        server: None,
                        arguments: c.arguments,
                        result: c.result.unwrap_or_default(),
                        is_error: c.is_error,
                        duration_ms: 0,
                    })
                    .collect()
            }),
        })
    }
}

/// The answer bank's product: the `[optimize]` target with the production prompts
/// ([`TargetAnswers::from_settings`]).
pub fn answer_system(
    settings: &ProjectSettings,
    dir: &Path,
    calls: &ProviderCalls,
    env: Env<'_>,
) -> Result<Arc<dyn AnswerSystem>, SessionError> {
    Ok(Arc::new(TargetAnswers::from_settings(
        settings, dir, calls, env,
    )?))
}

/// The [`AnswerFactory`] the `assay` binary and the server give a run: [`answer_system`] in
/// the project's folder (`settings.root`).
pub fn factory() -> AnswerFactory {
    AnswerFactory(Arc::new(build_for_run))
}

fn build_for_run(
    settings: &ProjectSettings,
    calls: &ProviderCalls,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Arc<dyn AnswerSystem>, HarnessError> {
    answer_system(settings, &settings.root, calls, env).map_err(harness_error)
}

/// A session error as the run reports it, keeping its exit code (2 bad input, 3
/// infrastructure).
fn harness_error(e: SessionError) -> HarnessError {
    match e {
        SessionError::Harness(e) => e,
        SessionError::Experiment(ExperimentError::Data(e)) => HarnessError::Data(e),
        other if other.is_infrastructure() => HarnessError::Infrastructure(other.to_string()),
        other => HarnessError::Usage(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use assay_core::UserState;

    use super::*;
    use crate::target::CommandTarget;

    fn env(_: &str) -> Option<String> {
        None
    }

    fn command_target(py: &str) -> Arc<dyn Target> {
        Arc::new(CommandTarget {
            command: vec!["python3".into(), "-c".into(), py.into()],
            dir: std::env::temp_dir(),
            timeout: Duration::from_secs(10),
            stateless: true,
            max_reply_bytes: crate::target::DEFAULT_MAX_REPLY_BYTES,
        })
    }

    fn state() -> UserState {
        serde_json::json!({"plan": "pro"})
            .as_object()
            .cloned()
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn a_case_reaches_the_target_and_its_reply_becomes_the_answer() {
        // Answers with the prompt, the state and the context it was sent, and says which
        // context it used.
        let py = r#"
import sys, json
r = json.load(sys.stdin)
used = [c for c in r["context"] if c.get("entity") == "refunds"]
print(json.dumps({
    "final_answer": r["prompts"]["bot"] + "/" + r["question"] + "/" + r["user_state"]["plan"] + "/" + used[0]["text"],
    "trace": [{"agent": "bot", "output": "thinking"}],
    "contexts": used,
    "tool_calls": [{"name": "find_order", "arguments": {"id": 7}, "result": "found"},
                   {"name": "refund", "arguments": "{\"id\": 7}", "is_error": True}],
}))
"#;
        let answers = TargetAnswers::new(
            command_target(py),
            BTreeMap::from([("bot".to_owned(), "B".to_owned())]),
        );
        let context = [
            ContextItem {
                entity: Some("shipping".into()),
                text: "Ships in 2 days.".into(),
            },
            ContextItem {
                entity: Some("refunds".into()),
                text: "Refunds within 30 days.".into(),
            },
        ];
        let user_state = state();
        let ask = AnswerAsk {
            message: "Can I get a refund?",
            user_state: &user_state,
            audience: "customer",
            context: &context,
        };
        let reply = answers.respond(&ask).await.unwrap();
        assert_eq!(
            reply.text,
            "B/Can I get a refund?/pro/Refunds within 30 days."
        );
        assert_eq!(reply.contexts, Some(vec![context[1].clone()]));
        assert_eq!(reply.steps, vec![("bot".to_owned(), "thinking".to_owned())]);
        let calls = reply.tool_calls.unwrap();
        let got: Vec<(&str, &str, &serde_json::Value, &str, bool)> = calls
            .iter()
            .map(|c| {
                (
                    c.id.as_str(),
                    c.name.as_str(),
                    &c.arguments,
                    c.result.as_str(),
                    c.is_error,
                )
            })
            .collect();
        let id = serde_json::json!({"id": 7});
        assert_eq!(
            got,
            [
                ("call-1", "find_order", &id, "found", false),
                ("call-2", "refund", &id, "", true)
            ]
        );
        assert!(reply.latency_ms > 0.0);
        assert_eq!(reply.cost_usd, None);
        assert!(answers.stateless());
    }

    #[tokio::test]
    async fn a_target_failure_is_an_error_not_a_reply() {
        let answers = TargetAnswers::new(
            command_target("import sys; sys.stdin.read(); print('not json')"),
            BTreeMap::new(),
        );
        let user_state = UserState::new();
        let ask = AnswerAsk {
            message: "Hi",
            user_state: &user_state,
            audience: "customer",
            context: &[],
        };
        let e = answers.respond(&ask).await.unwrap_err();
        assert!(e.contains("bad reply"), "{e}");
    }

    #[test]
    fn the_request_carries_the_state_and_the_context_in_rank_order() {
        let context = [
            ContextItem {
                entity: None,
                text: "first".into(),
            },
            ContextItem {
                entity: Some("b".into()),
                text: "second".into(),
            },
        ];
        let user_state = state();
        let ask = AnswerAsk {
            message: "Q",
            user_state: &user_state,
            audience: "customer",
            context: &context,
        };
        let r = TargetAnswers::request(&ask);
        assert_eq!(r.question, "Q");
        assert_eq!(r.user_state.as_ref(), Some(&user_state));
        let got: Vec<(Option<&str>, &str)> = r
            .context
            .iter()
            .flatten()
            .map(|c| (c.entity.as_deref(), c.text.as_str()))
            .collect();
        assert_eq!(got, vec![(None, "first"), (Some("b"), "second")]);
    }

    fn settings_with(dir: &Path, toml: &str) -> ProjectSettings {
        std::fs::write(dir.join("assay.toml"), toml).unwrap();
        ProjectSettings::load(dir).unwrap()
    }

    #[test]
    fn production_prompts_are_the_prompts_folder_or_none() {
        let dir = tempfile::tempdir().unwrap();
        assert!(production_prompts(dir.path()).unwrap().is_empty());
        let prompts = BTreeMap::from([("planner".to_owned(), "Plan.".to_owned())]);
        crate::prompts::write_prompt_dir(&dir.path().join(PRODUCTION_PROMPTS), &prompts).unwrap();
        assert_eq!(production_prompts(dir.path()).unwrap(), prompts);
    }

    #[test]
    fn the_chain_needs_prompts_and_a_command_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings_with(dir.path(), "");
        let calls = ProviderCalls::open(&settings, Some("off"), &env, true).unwrap();
        let e = TargetAnswers::from_settings(&settings, dir.path(), &calls, &env).unwrap_err();
        assert!(
            e.to_string().contains("needs the production prompts"),
            "{e}"
        );
        assert!(!e.is_infrastructure());
        let e = (factory().0)(&settings, &calls, &env).err().unwrap();
        assert!(
            matches!(&e, HarnessError::Usage(m) if m.contains("needs the production prompts")),
            "{e}"
        );
        // A prompt folder that is there but holds no prompt is bad input, naming the folder.
        std::fs::create_dir(dir.path().join(PRODUCTION_PROMPTS)).unwrap();
        let e = (factory().0)(&settings, &calls, &env).err().unwrap();
        assert!(
            matches!(&e, HarnessError::Data(d) if d.path.ends_with(PRODUCTION_PROMPTS)),
            "{e}"
        );
        std::fs::remove_dir(dir.path().join(PRODUCTION_PROMPTS)).unwrap();

        let settings = settings_with(
            dir.path(),
            "[optimize]\ntarget = \"command\"\ncommand = [\"python3\", \"bot.py\"]\n",
        );
        let answers = TargetAnswers::from_settings(&settings, dir.path(), &calls, &env).unwrap();
        assert!(answers.prompts().is_empty());
        let built = (factory().0)(&settings, &calls, &env).unwrap();
        assert_eq!(built.describe(), answers.describe());
        assert!(
            answers.describe().contains("python3 bot.py"),
            "{}",
            answers.describe()
        );
    }
}
