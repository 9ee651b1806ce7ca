//! The RunLog: the complete, versioned record of a run (000 §6.5), and its parts: the banks'
//! results, the summary and health (`results`), what was run and the stale cases (`filters`),
//! the notable cases and verdict tallies ([`notable`]), one case as the run log holds it
//! ([`CaseRecord`]), the comparison with a baseline ([`diff`]). Plain data: the folds that fill
//! it are in [`crate::aggregate`], the comparisons in [`crate::rundiff`].
//!
//! Its top level keeps the seed's result keys — `summary`, `semantic`, `state`, `pattern`,
//! `always` — with `null` for a bank that was not run. Reports only read it.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod case;
pub mod diff;
mod filters;
pub mod notable;
mod results;

pub use crate::ratelimit::RateLimitRecord;
pub use case::CaseRecord;
pub use filters::{ChangedSince, RunFilters, StaleCase, StaleChange, StaleEntity, StaleReference};
pub use results::{
    AlwaysCaseResult, AlwaysResults, AnswerResults, BankResults, Candidate, CrisisMatch,
    ExpectationSources, GroupScore, Health, KeywordMatch, LostAt, LostEntity, MetricSummary,
    PatternCaseResult, PatternResults, SemanticCaseResult, SemanticResults, StateCaseResult,
    StateResults, Summary, Weights, round1,
};

/// The RunLog schema version; changes are additive only. Version 2 added `settings`, `kb`
/// and `baseline`: what a comparison with a later run needs. Version 3 added the run log
/// (`cases`: every case in `results/cases_<stamp>.jsonl`, the RunLog's lists then holding the
/// worst cases only) and `notable`. Version 4 added each case's `verdict` (pass, fail with the
/// checks that failed it, or error) and `duration_ms`, and `notable.verdicts`; a case read
/// from an older file gets its verdict as it is read ([`crate::verdict::filled`]).
pub const SCHEMA_VERSION: u32 = 4;

/// The oldest RunLog a baseline comparison accepts: older runs do not record their settings
/// and knowledge base, so a comparison could not say why results differ.
pub const BASELINE_OLDEST: u32 = 2;

/// Stale cases a RunLog lists at most (the rest are counted in `stale_more`).
pub const STALE_LISTED: usize = 2_000;

/// The complete record of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunLog {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The assay version that made it.
    pub assay_version: String,
    /// Unique run id.
    pub run_id: String,
    /// The project directory, as given.
    pub project: String,
    /// When the run started (RFC 3339, UTC).
    pub timestamp: String,
    /// Wall-clock duration.
    pub duration_ms: u64,
    /// What was selected.
    pub filters: RunFilters,
    /// The systems under test, described (for example the semantic pipeline's embedder and
    /// reranker).
    #[serde(default)]
    pub setup: BTreeMap<String, String>,
    /// Aggregates, score and health.
    pub summary: Summary,
    /// `null` when not run.
    pub semantic: Option<SemanticResults>,
    /// `null` when not run.
    pub state: Option<StateResults>,
    /// `null` when not run.
    pub pattern: Option<PatternResults>,
    /// `null` when not run.
    pub always: Option<AlwaysResults>,
    /// The answer bank; absent when not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerResults>,
    /// Warnings raised while loading (unknown fields, unknown entities, pre-V2 banks).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The project settings that shape results (`assay.toml`'s `[weights]`, `[semantic]`,
    /// `[retrieval]`, `[embedder]` and `[gate]`, as dotted keys with their values as written).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// What the knowledge base held.
    #[serde(default)]
    pub kb: diff::KbFingerprint,
    /// The comparison with a baseline run (`assay run --baseline`), unchanged cases left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Box<diff::RunDiff>>,
    /// Where every case is, when the banks' `results` hold only the worst of each bank (a run
    /// saved with its run log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases: Option<CaseLog>,
    /// What the summary shows besides the numbers (cases below 100, why, errors by message);
    /// absent in RunLogs before version 3, where [`RunLog::notable`] computes it.
    #[serde(default, rename = "notable", skip_serializing_if = "Option::is_none")]
    pub notable_cases: Option<notable::Notable>,
    /// How the providers' rate limits shaped the calls, per remote model that was sent
    /// requests (absent when none was).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<RateLimitRecord>,
    /// The shard of the suite this run ran (`assay run --shard hash:i/n`); absent in a run of
    /// the whole suite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardRun>,
    /// The shards this run was merged from (`assay runs merge`); absent in a run made in one
    /// piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merged: Option<MergedRun>,
    /// The cases of this run that name an entity edited since their reference point (the
    /// version their provenance records, else the accepted run), with the fields that changed:
    /// the first [`STALE_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<StaleCase>,
    /// Stale cases beyond those `stale` lists.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stale_more: usize,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// What a shard's run records so that its shards can be merged and checked: which shard, and
/// which suite it is a shard of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRun {
    /// Which shard of how many.
    pub shard: crate::shard::Shard,
    /// The cases of the whole suite (every shard together) the run's selection holds.
    pub suite_cases: usize,
    /// A digest (16 hex digits) of the whole suite's case ids in run order: shards of one
    /// suite share it.
    pub suite: String,
    /// SHA-256 (hex) of this shard's cases as saved: every case record (`{"bank", "result"}`,
    /// one line of a run log) serialised as JSON and ended by a newline, in the order the
    /// saved run gives them back (its lists bank by bank, or its run log). Recorded when the
    /// run is saved, whether its cases are listed or streamed; `assay runs merge` computes it
    /// again and refuses a shard whose cases changed since (absent in shards saved before it
    /// was recorded, which a merge refuses too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases_sha256: Option<String>,
}

/// Where a merged run came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedRun {
    /// How many shards the suite was split into.
    pub count: u32,
    /// The suite's digest, as every shard recorded it.
    pub suite: String,
    /// The shards, in shard order.
    pub shards: Vec<MergedShard>,
}

/// One shard of a merged run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergedShard {
    /// Which shard (from 1).
    pub index: u32,
    /// Its run id.
    pub run_id: String,
    /// When it started.
    pub timestamp: String,
    /// Its cases.
    pub cases: usize,
    /// Its wall-clock duration.
    pub duration_ms: u64,
}

/// The run log of a saved run: one JSON line per case (`{"bank": …, "result": …}`) after a
/// header line, in the order the cases finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaseLog {
    /// Its file name, beside the RunLog (`cases_<stamp>.jsonl`).
    pub file: String,
    /// Cases it holds.
    pub count: usize,
    /// SHA-256 (hex) of the file as saved: readers check it, so a run log changed afterwards
    /// is an error, never believed (absent in run logs saved before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

impl RunLog {
    /// Whether the banks' `results` hold every case (else the worst of each bank, the rest
    /// being in the run log, [`RunLog::cases`]).
    pub fn is_complete(&self) -> bool {
        self.notable_cases.as_ref().is_none_or(|n| n.complete)
    }
}

#[cfg(test)]
mod tests;
