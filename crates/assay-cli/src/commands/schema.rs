//! `assay schema [KIND] [--markdown]`: the JSON Schema (draft 2020-12) of every kind of file a
//! user writes, generated from the types that read them, and the reference page of each
//! (docs/reference/ holds both, and a test fails when they drift from what this prints).

use assay_core::bank::{AlwaysCase, BankFile, PatternCase, PatternRules, SemanticCase, StateCase};
use assay_core::draft::DraftBank;
use assay_core::entity::Entity;
use assay_core::tracecheck::{DraftFile, FlatSpan};
use assay_project::HarnessError;
use assay_project::expectations::HistoryFile;
use assay_project::settings::ProjectConfig;
use assay_report::reference::{PageInfo, page};
use serde_json::Value;

use super::out;
use crate::exit::Exit;

/// Where the schemas are published, for the `$schema` references in the files `assay init`
/// writes (editors fetch them from here; a copy is in docs/reference/schemas/).
pub const SCHEMA_BASE: &str =
    "https://raw.githubusercontent.com/assay-eval/assay/main/docs/reference/schemas";

/// One kind of file.
pub struct Kind {
    pub info: PageInfo<'static>,
    schema: fn() -> schemars::Schema,
}

macro_rules! example {
    ($file:literal) => {
        include_str!(concat!("../../../../docs/reference/examples/", $file))
    };
}

/// Every kind, in the order `assay schema` lists them.
pub fn kinds() -> Vec<Kind> {
    vec![
        Kind {
            info: PageInfo {
                kind: "config",
                title: "Project settings",
                files: "assay.toml",
                format: "TOML",
                summary: "A project's settings: where its files are, how the banks are weighted and gated, which embedder, reranker and store it uses, how providers are called, and the settings of calibration, simulation and optimization. Every key is optional. A key assay does not know is an error, with the closest known key named.",
                example: example!("config.toml"),
                example_lang: "toml",
            },
            schema: || schemars::schema_for!(ProjectConfig),
        },
        Kind {
            info: PageInfo {
                kind: "kb",
                title: "Knowledge-base file",
                files: "kb/*.yaml, kb/*.yml, kb/*.json",
                format: "YAML or JSON",
                summary: "A list of knowledge-base entities: the pieces of guidance the assistant's context can be given, each with how it is loaded (always, by the user's state, by semantic search or a pattern rule), for which audiences, and at what priority. Every file under kb/ is read, and entity ids are unique across all of them.",
                example: example!("kb.yaml"),
                example_lang: "yaml",
            },
            schema: || schemars::schema_for!(Vec<Entity>),
        },
        Kind {
            info: PageInfo {
                kind: "semantic-bank",
                title: "Semantic test bank",
                files: "test_banks/semantic/*.json",
                format: "JSON",
                summary: "Cases for semantic retrieval: a user's message and the entities that must be selected for it (a missing primary one is a hard fail; each missing secondary one costs 10 points), must not be (20 points each), and in which order (10 points a violation). Every entity a case names must exist in the knowledge base, or be listed in the case's `known_missing`.",
                example: example!("semantic-bank.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(BankFile<SemanticCase>),
        },
        Kind {
            info: PageInfo {
                kind: "state-bank",
                title: "State test bank",
                files: "test_banks/state/*.json",
                format: "JSON",
                summary: "Cases for STATE handlers: a user's state and the handlers it must trigger (one that does not is a hard fail) and must not (20 points each).",
                example: example!("state-bank.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(BankFile<StateCase>),
        },
        Kind {
            info: PageInfo {
                kind: "pattern-bank",
                title: "Pattern test bank",
                files: "test_banks/pattern/*.json (every file but the rules)",
                format: "JSON",
                summary: "Cases for the pattern rules: a message and the entities the crisis patterns and keyword groups must bring in and must not. A failed case marked `is_critical` is a critical failure, which makes the run's health CRITICAL.",
                example: example!("pattern-bank.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(BankFile<PatternCase>),
        },
        Kind {
            info: PageInfo {
                kind: "always-bank",
                title: "Always test bank",
                files: "test_banks/always/*.json",
                format: "JSON",
                summary: "Cases for ALWAYS entities: an audience and the entities every message of it must load.",
                example: example!("always-bank.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(BankFile<AlwaysCase>),
        },
        Kind {
            info: PageInfo {
                kind: "answer-bank",
                title: "Answer test bank",
                files: "test_banks/answer/*.json",
                format: "JSON",
                summary: "Cases for the product's own replies: a user's message (and state), optionally a reference answer and deterministic assertions. The product (the `[optimize]` target) answers each from the context assay's pipeline selects; a judge then scores faithfulness, answer relevancy, context precision and context recall claim by claim (docs/answers.md). A critical assertion that fails fails the case whatever the judge says; a metric under its `minimum` fails it too. A judge reply that cannot be parsed makes the case an error, left out of the averages.",
                example: example!("answer-bank.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(BankFile<assay_core::answer::AnswerCase>),
        },
        Kind {
            info: PageInfo {
                kind: "pattern-rules",
                title: "Pattern rules",
                files: "test_banks/pattern/pattern_rules.json",
                format: "JSON",
                summary: "The rules of the pipeline's pattern stage: crisis regexes, whose entities come first in the context, and keyword groups that bring an entity in by name. Every entity a rule names must exist in the knowledge base.",
                example: example!("pattern-rules.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(PatternRules),
        },
        Kind {
            info: PageInfo {
                kind: "expectation-history",
                title: "Expectation history",
                files: "test_banks/semantic/history/expectations_*.json",
                format: "JSON",
                summary: "What calibration changed in the semantic cases' expectations, and the overrides people recorded. `assay calibrate` and `assay expectations override` write these files and never change one once written; a case's expectations are its bank's, then the newest calibration's, then the newest human override's, which wins over everything.",
                example: example!("expectation-history.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(HistoryFile),
        },
        Kind {
            info: PageInfo {
                kind: "suite",
                title: "Simulation suite",
                files: "sim/suite.yaml",
                format: "YAML or JSON",
                summary: "The conversation simulator's suite: the system prompt of the model under test, the MCP servers whose tools it may call, the steps around each scenario run, the criteria the judge scores a transcript on, and the gate over the whole run. Paths are relative to sim/.",
                example: example!("suite.yaml"),
                example_lang: "yaml",
            },
            schema: assay_sim::suite::suite_schema,
        },
        Kind {
            info: PageInfo {
                kind: "scenario",
                title: "Simulation scenario",
                files: "sim/scenarios/*.yaml",
                format: "YAML or JSON",
                summary: "One scenario: who the simulated user is and what they want, how the conversation opens and may end, the criteria's weights for it, and the checks of the tools' state afterwards, which decide over the judge where they apply.",
                example: example!("scenario.yaml"),
                example_lang: "yaml",
            },
            schema: assay_sim::suite::scenario_schema,
        },
        Kind {
            info: PageInfo {
                kind: "judge-labels",
                title: "Labels for the simulator's judge",
                files: "any .yaml or .json file, e.g. sim/labels/judge_labels.yaml",
                format: "YAML or JSON",
                summary: "Transcripts people scored, for `assay judge agree`, which asks the judge again and reports how well it agrees with them. `assay judge template REPORT` writes one to fill in; items left unscored are skipped and counted.",
                example: example!("judge-labels.yaml"),
                example_lang: "yaml",
            },
            schema: assay_sim::agree::labels_schema,
        },
        Kind {
            info: PageInfo {
                kind: "grader-labels",
                title: "Labels for the optimizer's grader",
                files: "any .yaml or .json file, e.g. labels/grader_labels.yaml",
                format: "YAML or JSON",
                summary: "Answers people graded, for `assay judge agree`, which asks the optimizer's llm-rubric grader again and reports how well it agrees with them.",
                example: example!("grader-labels.yaml"),
                example_lang: "yaml",
            },
            schema: assay_experiment::agree::labels_schema,
        },
        Kind {
            info: PageInfo {
                kind: "claim-labels",
                title: "Labels for the answer judge's claim verdicts",
                files: "any .yaml or .json file, e.g. labels/claim_labels.yaml",
                format: "YAML or JSON",
                summary: "Claims people checked against context passages, for `assay judge agree`, which asks the answer bank's judge (`[answer] judge_model`) for its verdicts on the same claims, the call behind faithfulness, and reports how well it agrees with them. Each claim is one item of the measurement, named `id#n`; where you name the entity that supports a claim, the share of claims on which the judge names the same one is reported too.",
                example: example!("claim-labels.yaml"),
                example_lang: "yaml",
            },
            schema: assay_run::answer::agree::labels_schema,
        },
        Kind {
            info: PageInfo {
                kind: "optimizer-case",
                title: "Optimizer test case",
                files: "test_data/optimization/*.jsonl, test_data/evaluation/*.jsonl (one case a line)",
                format: "JSON Lines: one JSON object a line; the schema is a line's",
                summary: "The cases the prompt optimizer scores prompt variants on: a question, the context files it needs, and the expected answer, with how an answer is judged correct where it differs from the project's rule.",
                example: example!("optimizer-case.jsonl"),
                example_lang: "json",
            },
            schema: assay_experiment::cases::case_line_schema,
        },
        Kind {
            info: PageInfo {
                kind: "trace-span",
                title: "Trace span (JSON Lines)",
                files: ".assay/traces/received-*.jsonl, any *.jsonl of spans (one span a line)",
                format: "JSON Lines: one JSON object a line; the schema is a line's",
                summary: "One span in assay's flat form: its ids, name and attributes by name. `assay serve` writes the retrieval spans it receives at /v1/traces this way, and `assay traces check` reads it beside OTLP JSON exports (a line may also hold a whole export, or an OTLP span object). A retrieval span has `gen_ai.operation.name` = `retrieval`, the query in `gen_ai.retrieval.query.text` and the documents production returned in `gen_ai.retrieval.documents` (a JSON string or an array of `{id, score}`), and optionally `assay.user_state` (a JSON object in a string) and `assay.audience`. A field assay does not know is an error naming it; see docs/traces.md.",
                example: example!("trace-span.jsonl"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(FlatSpan),
        },
        Kind {
            info: PageInfo {
                kind: "trace-drafts",
                title: "Draft cases from traces",
                files: "the FILE of assay traces check --drafts FILE",
                format: "JSON",
                summary: "Draft test cases made from production retrieval spans: each a semantic-bank case (the query, what assay selects by pattern rules and semantic search as expected, what production returned that assay does not select as not expected, the user state) and its provenance (trace and span ids, the file and line it was read from, what production returned, what assay selects, where they disagreed). assay never reads this file in a run: review a case, then copy its `case` into a semantic bank.",
                example: example!("trace-drafts.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(DraftFile),
        },
        Kind {
            info: PageInfo {
                kind: "semantic-drafts",
                title: "Semantic drafts",
                files: "test_banks/drafts/semantic/*.json",
                format: "JSON",
                summary: "Draft cases written by `assay generate`: messages a model wrote for a SITUATION entity (or a pair of related ones), each with the entity it was written for as the expected primary and the secondaries the calibrator proposed. A draft whose intended entity the pipeline does not select is a finding (`retrieval_gap` or `overlap`). Every case carries its provenance (how it was made, from which entity versions, by which model and prompt). A run ignores drafts unless given `--include-drafts`; `assay generate review` accepts a draft into `test_banks/semantic/generated.json`, edits it or rejects it, and records who did so and when. assay writes these files; an unknown field is an error.",
                example: example!("semantic-drafts.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(DraftBank<SemanticCase>),
        },
        Kind {
            info: PageInfo {
                kind: "state-drafts",
                title: "State drafts",
                files: "test_banks/drafts/state/*.json",
                format: "JSON",
                summary: "Draft cases written by `assay generate`: user states on each side of every boundary of each STATE handler's condition, derived without a model, each expecting the handler to trigger or not. Every case carries its provenance (how it was made, from which entity versions, by which model and prompt). A run ignores drafts unless given `--include-drafts`; `assay generate review` accepts a draft into `test_banks/state/generated.json`, edits it or rejects it, and records who did so and when. assay writes these files; an unknown field is an error.",
                example: example!("state-drafts.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(DraftBank<StateCase>),
        },
        Kind {
            info: PageInfo {
                kind: "pattern-drafts",
                title: "Pattern drafts",
                files: "test_banks/drafts/pattern/*.json",
                format: "JSON",
                summary: "Draft cases written by `assay generate`: messages a model wrote to fire each crisis pattern and keyword group, and look-alikes that must not. Each is run through the real matcher; where the matcher disagrees with the intent, the draft is a finding (`pattern_miss` or `pattern_false_alarm`) that keeps the intended expectations. Every case carries its provenance (how it was made, from which entity versions, by which model and prompt). A run ignores drafts unless given `--include-drafts`; `assay generate review` accepts a draft into `test_banks/pattern/generated.json`, edits it or rejects it, and records who did so and when. assay writes these files; an unknown field is an error.",
                example: example!("pattern-drafts.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(DraftBank<PatternCase>),
        },
        Kind {
            info: PageInfo {
                kind: "answer-drafts",
                title: "Answer drafts",
                files: "test_banks/drafts/answer/*.json",
                format: "JSON",
                summary: "Draft cases written by `assay redteam --drafts`: each attack that worked on the product (an injection in the message or in the context, a leak of the user's state or of a staff-only note) as an answer case that sends the same message and user state, plants the same entity texts in the context (`plant`), and fails critically when the attack's evidence comes back (`not-icontains` of the canary, the system prompt's marker or the exfiltration host; `tools_not_used` of the tool it induced). Each draft is a finding of kind `attack`. A run ignores drafts unless given `--include-drafts`; `assay generate review` accepts a draft into `test_banks/answer/generated.json`, edits it or rejects it, and records who did so and when. assay writes these files; an unknown field is an error.",
                example: example!("answer-drafts.json"),
                example_lang: "json",
            },
            schema: || schemars::schema_for!(DraftBank<assay_core::answer::AnswerCase>),
        },
    ]
}

/// A kind's schema, as JSON, titled with the kind's name.
pub fn schema_of(kind: &Kind) -> Value {
    let mut value = (kind.schema)().to_value();
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "$id".to_owned(),
            Value::String(format!("{SCHEMA_BASE}/{}.json", kind.info.kind)),
        );
    }
    value
}

pub fn run(kind: Option<&str>, markdown: bool) -> anyhow::Result<Exit> {
    let all = kinds();
    let Some(name) = kind else {
        let mut text = String::from(
            "kinds of file (`assay schema KIND` prints one's JSON Schema, --markdown its reference page):\n",
        );
        for k in &all {
            text.push_str(&format!(
                "  {:<20} {}  ({})\n",
                k.info.kind, k.info.title, k.info.files
            ));
        }
        out(&text);
        return Ok(Exit::Success);
    };
    let Some(k) = all.iter().find(|k| k.info.kind == name) else {
        let near = assay_core::text::closest(name, all.iter().map(|k| k.info.kind))
            .map(|n| format!(" (did you mean `{n}`?)"))
            .unwrap_or_default();
        return Err(HarnessError::Usage(format!(
            "unknown kind `{name}`{near}; `assay schema` lists them"
        ))
        .into());
    };
    let schema = schema_of(k);
    if markdown {
        out(&page(&k.info, &schema));
    } else {
        out(&format!("{}\n", serde_json::to_string_pretty(&schema)?));
    }
    Ok(Exit::Success)
}
