//! `assay kb tune`: the similarity threshold, the number of first-stage candidates and the
//! hybrid lexical weight, chosen for one embedder on the project's semantic bank with k-fold
//! cross-validation.
//!
//! Every case is ranked once (dense score and lexical score of every SITUATION entity of its
//! audience); a setting is then scored exactly as the semantic bank scores a run without a
//! reranker (000 §6.1: the first `candidates` by score, those at or above the threshold, the
//! best `[semantic] top_k` of them by score + priority bonus), so a grid of settings costs no
//! model call. The cases are split into `folds` folds by a hash of their id; for each fold a
//! setting is chosen on the other folds and scored on the held-out fold, beside the current
//! setting. Among the settings that beat the current one and lose at most [`MAX_GROUP_LOSS`]
//! points against it on every fold they are chosen on, the one-standard-error rule picks the
//! setting nearest the current one (fewest grid steps) whose mean score is within one standard
//! error of the best mean (see [`best`]): a fine grid otherwise fits a few cases and loses
//! elsewhere. The setting written is the one chosen on all folds, and only when the held-out
//! folds support it ([`TuneOutcome::verdict`]: the held-out mean improves and no fold loses more
//! than [`MAX_HELD_OUT_LOSS`] points); otherwise the current setting stays.

use std::fmt::Write as _;
use std::path::Path;

use assay_core::UserState;
use assay_core::bank::ExpectationSet;
use assay_core::entity::DEFAULT_AUDIENCE;
use assay_core::scoring::{ScoreInput, score};
use assay_retrieval::pipeline::RankMode;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::HarnessError;
use assay_project::engine;
use assay_project::project::Project;
use assay_project::settings::{SETTINGS_FILE, TunedConfig};
use assay_run::runners::rank_violations;

/// One setting of the searched parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TuneParams {
    /// Minimum score of a selected entity (`None`: no threshold, as the untuned bank).
    pub score_threshold: Option<f32>,
    /// First-stage candidates.
    pub candidates: usize,
    /// Hybrid lexical weight (0 in dense mode).
    pub lexical_weight: f32,
}

/// Held-out scores of one fold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FoldResult {
    /// Cases in the fold.
    pub cases: usize,
    /// Mean case score with the current setting.
    pub before: f64,
    /// Mean case score with the setting chosen on the other folds.
    pub after: f64,
    /// That setting.
    pub chosen: TuneParams,
}

/// What a tuning found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuneOutcome {
    /// The embedder (`vendor/model`), the key under which `--write` saves.
    pub embedder: String,
    /// `dense` or `hybrid`.
    pub mode: String,
    /// `single` or `multi`.
    pub views: String,
    /// Semantic cases scored.
    pub cases: usize,
    /// The current setting.
    pub current: TuneParams,
    /// The setting best on all cases.
    pub chosen: TuneParams,
    /// Mean case score of all cases with the current and the chosen setting.
    pub all_before: f64,
    /// See `all_before`.
    pub all_after: f64,
    /// Held-out results, one per fold.
    pub folds: Vec<FoldResult>,
}

/// The most a tuning may lose on a held-out fold for its change to be accepted (points of the
/// fold's mean case score).
pub const MAX_HELD_OUT_LOSS: f64 = 2.0;

impl TuneOutcome {
    /// Mean held-out score before and after.
    pub fn held_out(&self) -> (f64, f64) {
        let n: usize = self.folds.iter().map(|f| f.cases).sum();
        let n = n.max(1) as f64;
        let before = self
            .folds
            .iter()
            .map(|f| f.before * f.cases as f64)
            .sum::<f64>();
        let after = self
            .folds
            .iter()
            .map(|f| f.after * f.cases as f64)
            .sum::<f64>();
        (before / n, after / n)
    }

    /// The worst held-out change (after − before) over the folds.
    pub fn worst_fold_change(&self) -> f64 {
        self.folds
            .iter()
            .map(|f| f.after - f.before)
            .fold(f64::INFINITY, f64::min)
    }

    /// Whether the held-out folds support changing to the chosen setting: it differs from the
    /// current one, the held-out mean improves, and no held-out fold loses more than
    /// [`MAX_HELD_OUT_LOSS`] points. `Err` says why not.
    pub fn verdict(&self) -> Result<(), String> {
        if self.chosen == self.current {
            return Err("no setting beats the current one on the bank".into());
        }
        let (before, after) = self.held_out();
        let worst = self.worst_fold_change();
        if after <= before + 1e-9 {
            return Err(format!(
                "the tuning does not carry over to cases it did not see (held-out mean {before:.1} → {after:.1})"
            ));
        }
        if worst < -MAX_HELD_OUT_LOSS {
            return Err(format!(
                "the tuning lost {:.1} points on a held-out fold (more than {MAX_HELD_OUT_LOSS})",
                -worst
            ));
        }
        Ok(())
    }

    /// Whether [`TuneOutcome::verdict`] accepts the change; only an accepted change is written.
    pub fn accepted(&self) -> bool {
        self.verdict().is_ok()
    }

    /// The values `--write` saves.
    pub fn tuned(&self) -> TunedConfig {
        TunedConfig {
            score_threshold: self.chosen.score_threshold,
            candidates: Some(self.chosen.candidates),
            lexical_weight: (self.mode == "hybrid").then_some(self.chosen.lexical_weight),
        }
    }

    /// A readable report.
    pub fn render(&self) -> String {
        let p = |t: &TuneParams| {
            let threshold = t
                .score_threshold
                .map_or_else(|| "none".to_owned(), |x| format!("{x:.3}"));
            let mut s = format!("threshold {threshold}, candidates {}", t.candidates);
            if self.mode == "hybrid" {
                let _ = write!(s, ", lexical weight {:.2}", t.lexical_weight);
            }
            s
        };
        let mut out = format!(
            "tuning {} ({} mode, {} views) on {} semantic cases, {} folds\n\n",
            self.embedder,
            self.mode,
            self.views,
            self.cases,
            self.folds.len()
        );
        let _ = writeln!(
            out,
            "  fold  cases  before   after  change  chosen on the other folds"
        );
        for (i, f) in self.folds.iter().enumerate() {
            let _ = writeln!(
                out,
                "  {:>4}  {:>5}  {:>6.1}  {:>6.1}  {:>+6.1}  {}",
                i + 1,
                f.cases,
                f.before,
                f.after,
                f.after - f.before,
                p(&f.chosen)
            );
        }
        let (before, after) = self.held_out();
        let _ = writeln!(
            out,
            "\n  held-out mean: {before:.1} → {after:.1} ({:+.1}); worst fold {:+.1}",
            after - before,
            self.worst_fold_change()
        );
        let _ = writeln!(out, "  current: {}", p(&self.current));
        let _ = writeln!(
            out,
            "  chosen:  {} (all cases: {:.1} → {:.1})",
            p(&self.chosen),
            self.all_before,
            self.all_after
        );
        match self.verdict() {
            Ok(()) => {
                let _ = writeln!(out, "  verdict: accepted: the held-out folds support it");
            }
            Err(why) => {
                let _ = writeln!(out, "  verdict: keep the current setting: {why}");
            }
        }
        out
    }
}

/// One ranked entity of a case: dense and lexical scores, priority bonus.
struct Ranked {
    id: String,
    dense: f32,
    lexical: f32,
    bonus: f32,
}

struct CaseRanking {
    test_id: String,
    ranked: Vec<Ranked>,
    expectations: ExpectationSet,
}

fn case_score(case: &CaseRanking, params: &TuneParams, top_k: usize) -> f64 {
    let mut scored: Vec<(f32, &Ranked)> = case
        .ranked
        .iter()
        .map(|r| (r.dense + params.lexical_weight * r.lexical, r))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.id.cmp(&b.1.id)));
    scored.truncate(params.candidates);
    let mut kept: Vec<(f32, &str)> = scored
        .into_iter()
        .filter(|(s, _)| params.score_threshold.is_none_or(|t| *s >= t))
        .map(|(s, r)| (s + r.bonus, r.id.as_str()))
        .collect();
    kept.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    let selections: Vec<String> = kept
        .into_iter()
        .take(top_k)
        .map(|(_, id)| id.to_owned())
        .collect();
    let exp = &case.expectations;
    let missing = |want: &[String]| -> Vec<String> {
        want.iter()
            .filter(|e| !selections.contains(e))
            .cloned()
            .collect()
    };
    let input = ScoreInput {
        primary_pass: missing(&exp.expected_primary).is_empty(),
        secondary_missing: missing(&exp.expected_secondary),
        false_positives: exp
            .not_expected
            .iter()
            .filter(|e| selections.contains(e))
            .cloned()
            .collect(),
        rank_violations: rank_violations(&selections, exp),
        wrong_handlers: Vec::new(),
    };
    f64::from(score(&input).score)
}

fn mean_score(cases: &[&CaseRanking], params: &TuneParams, top_k: usize) -> f64 {
    if cases.is_empty() {
        return 0.0;
    }
    cases
        .iter()
        .map(|c| case_score(c, params, top_k))
        .sum::<f64>()
        / cases.len() as f64
}

/// The grid's values: thresholds (`None` first, then 0 to 0.8 by 0.025), candidates (`top_k`
/// to 30) and lexical weights (0 to 1.5; only 0 in dense mode).
struct Axes {
    thresholds: Vec<Option<f32>>,
    candidates: Vec<usize>,
    weights: Vec<f32>,
}

impl Axes {
    fn new(top_k: usize, hybrid: bool) -> Axes {
        let thresholds: Vec<Option<f32>> = std::iter::once(None)
            .chain((0..=32).map(|i| Some(i as f32 * 0.025)))
            .collect();
        let mut candidates: Vec<usize> = [top_k, 10, 15, 20, 30]
            .into_iter()
            .filter(|c| *c >= top_k)
            .collect();
        candidates.sort_unstable();
        candidates.dedup();
        let weights: Vec<f32> = if hybrid {
            vec![0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5]
        } else {
            vec![0.0]
        };
        Axes {
            thresholds,
            candidates,
            weights,
        }
    }

    /// Every setting, weights outermost, thresholds innermost.
    fn grid(&self) -> Vec<TuneParams> {
        let mut out = Vec::new();
        for &w in &self.weights {
            for &c in &self.candidates {
                for &t in &self.thresholds {
                    out.push(TuneParams {
                        score_threshold: t,
                        candidates: c,
                        lexical_weight: w,
                    });
                }
            }
        }
        out
    }

    /// How far apart two settings are, in grid steps summed over the three axes (a value off
    /// the grid counts at its nearest grid value; no threshold is the step below 0).
    fn steps(&self, a: &TuneParams, b: &TuneParams) -> usize {
        fn nearest<T: Copy>(values: &[T], x: T, gap: impl Fn(T, T) -> f64) -> usize {
            (0..values.len())
                .min_by(|&i, &j| gap(values[i], x).total_cmp(&gap(values[j], x)))
                .unwrap_or(0)
        }
        let threshold = |t: Option<f32>| {
            nearest(&self.thresholds, t, |u, v| match (u, v) {
                (None, None) => 0.0,
                (Some(u), Some(v)) => f64::from((u - v).abs()),
                _ => f64::INFINITY,
            })
        };
        let candidates =
            |c: usize| nearest(&self.candidates, c, |u, v| (u as f64 - v as f64).abs());
        let weight = |w: f32| nearest(&self.weights, w, |u, v| f64::from((u - v).abs()));
        threshold(a.score_threshold).abs_diff(threshold(b.score_threshold))
            + candidates(a.candidates).abs_diff(candidates(b.candidates))
            + weight(a.lexical_weight).abs_diff(weight(b.lexical_weight))
    }
}

/// The most a chosen setting may lose, against the current one, on any group of the cases it
/// is chosen on.
pub const MAX_GROUP_LOSS: f64 = 0.0;

/// The setting chosen on `groups` (each group a fold), against `current`:
///
/// 1. eligible: settings whose mean score beats `current` and that lose at most
///    [`MAX_GROUP_LOSS`] points against it on every group;
/// 2. the best: the eligible setting with the highest mean score;
/// 3. the one-standard-error rule (as in cross-validated model selection): among eligible
///    settings whose mean is within one standard error of the best's (the error of the
///    best's per-case gain over `current`), the one fewest grid steps from `current`, then
///    the higher mean, then the grid's order. A fine grid otherwise picks whichever far
///    corner happens to fit these cases best, and loses on cases it has not seen.
///
/// `current` when nothing is eligible.
fn best(
    groups: &[Vec<&CaseRanking>],
    axes: &Axes,
    current: &TuneParams,
    top_k: usize,
) -> TuneParams {
    let all: Vec<&CaseRanking> = groups.iter().flatten().copied().collect();
    let baseline: Vec<f64> = groups
        .iter()
        .map(|g| mean_score(g, current, top_k))
        .collect();
    let current_mean = mean_score(&all, current, top_k);
    let eligible: Vec<(TuneParams, f64)> = axes
        .grid()
        .into_iter()
        .map(|p| (p, mean_score(&all, &p, top_k)))
        .filter(|(p, mean)| {
            *mean > current_mean + 1e-9
                && groups
                    .iter()
                    .zip(&baseline)
                    .all(|(g, b)| mean_score(g, p, top_k) >= b - MAX_GROUP_LOSS)
        })
        .collect();
    let Some(&(top, top_mean)) =
        eligible
            .iter()
            .fold(None, |acc: Option<&(TuneParams, f64)>, e| match acc {
                Some(a) if a.1 >= e.1 - 1e-9 => Some(a),
                _ => Some(e),
            })
    else {
        return *current;
    };
    let gains: Vec<f64> = all
        .iter()
        .map(|c| case_score(c, &top, top_k) - case_score(c, current, top_k))
        .collect();
    let error = standard_error(&gains);
    eligible
        .iter()
        .filter(|(_, mean)| *mean >= top_mean - error - 1e-9)
        .min_by(|(a, a_mean), (b, b_mean)| {
            axes.steps(a, current)
                .cmp(&axes.steps(b, current))
                .then(b_mean.total_cmp(a_mean))
        })
        .map_or(top, |(p, _)| *p)
}

/// The standard error of the mean of `values` (0 for fewer than two).
fn standard_error(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (variance / n).sqrt()
}

fn fold_of(test_id: &str, folds: usize) -> usize {
    let h = Sha256::digest(test_id.as_bytes());
    (u64::from_le_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]) % folds as u64) as usize
}

/// Tunes the project's retrieval for the chosen embedder (`--embedder` > `ASSAY_EMBEDDER` >
/// `assay.toml` > built-in) with `folds`-fold cross-validation.
pub async fn tune(
    project: &Project,
    embedder_flag: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    folds: usize,
) -> Result<TuneOutcome, HarnessError> {
    if folds < 2 {
        return Err(HarnessError::Usage("--folds: at least 2".into()));
    }
    let settings = &project.settings;
    if project.banks.semantic.len() < folds {
        return Err(HarnessError::Usage(format!(
            "tuning needs at least {folds} semantic cases, the project has {}",
            project.banks.semantic.len()
        )));
    }
    let store = engine::open_store_with(settings, env)?;
    engine::sync_kb(&store, project)?;
    let kb = engine::snapshot(&*store)?;
    let choice = engine::choose_embedder(settings, embedder_flag, env)?;
    let embedder = engine::build_embedder(&choice)?;
    let config = engine::retrieval_config(settings, &choice);
    let hybrid = config.mode == RankMode::Hybrid;
    let priority_weight = config.priority_weight;
    let current = TuneParams {
        score_threshold: engine::tuned_for(settings, &choice).and_then(|t| t.score_threshold),
        candidates: engine::semantic_candidates(settings, &choice),
        lexical_weight: if hybrid { config.lexical_weight } else { 0.0 },
    };
    let (pipeline, _) =
        engine::prepare_pipeline(&*store, &kb, project, embedder.as_ref(), config).await?;
    let prompts: Vec<String> = project
        .banks
        .semantic
        .iter()
        .map(|l| l.case.prompt.clone())
        .collect();
    let queries = engine::embed_queries(embedder.as_ref(), &prompts).await;
    let mut cases = Vec::new();
    for located in &project.banks.semantic {
        let case = &located.case;
        let query = match queries.get(&case.prompt) {
            Some(Ok(q)) => q,
            Some(Err(e)) => return Err(HarnessError::Infrastructure(e.clone())),
            None => continue,
        };
        let audience = audience_of(&case.user_state);
        let ranked = pipeline
            .rank(query, &case.prompt, audience, pipeline.indexed())
            .map_err(|e| HarnessError::Infrastructure(e.to_string()))?
            .into_iter()
            .map(|h| Ranked {
                bonus: f32::from(pipeline.priority(&h.entity_id).unwrap_or(0)) / 100.0
                    * priority_weight,
                lexical: h.lexical.unwrap_or(0.0),
                dense: h.dense,
                id: h.entity_id,
            })
            .collect();
        cases.push(CaseRanking {
            test_id: case.test_id.clone(),
            ranked,
            expectations: project.expectations.resolve(case).expectations,
        });
    }
    let top_k = settings.semantic.top_k;
    let axes = Axes::new(top_k, hybrid);
    let mut results = Vec::with_capacity(folds);
    let groups: Vec<Vec<&CaseRanking>> = (0..folds)
        .map(|f| {
            cases
                .iter()
                .filter(|c| fold_of(&c.test_id, folds) == f)
                .collect()
        })
        .collect();
    for fold in 0..folds {
        let held = &groups[fold];
        let train: Vec<Vec<&CaseRanking>> = groups
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != fold)
            .map(|(_, g)| g.clone())
            .collect();
        let chosen = best(&train, &axes, &current, top_k);
        results.push(FoldResult {
            cases: held.len(),
            before: mean_score(held, &current, top_k),
            after: mean_score(held, &chosen, top_k),
            chosen,
        });
    }
    let all: Vec<&CaseRanking> = cases.iter().collect();
    let chosen = best(&groups, &axes, &current, top_k);
    Ok(TuneOutcome {
        embedder: choice.spec.to_string(),
        mode: settings.retrieval.mode.clone(),
        views: settings.retrieval.views.clone(),
        cases: cases.len(),
        current,
        all_before: mean_score(&all, &current, top_k),
        all_after: mean_score(&all, &chosen, top_k),
        chosen,
        folds: results,
    })
}

fn audience_of(state: &UserState) -> &str {
    state
        .get("user_type")
        .and_then(|v| v.as_str())
        .unwrap_or(DEFAULT_AUDIENCE)
}

/// Writes `tuned` into `<root>/assay.toml` as `[retrieval.tuned."<embedder>"]`, replacing
/// that table if it is there and leaving the rest of the file as it was (comments included).
pub fn write_tuned(root: &Path, embedder: &str, tuned: &TunedConfig) -> Result<(), HarnessError> {
    let path = root.join(SETTINGS_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(HarnessError::io(&path, &e)),
    };
    let name = toml_key(embedder);
    let header = format!("[retrieval.tuned.{name}]");
    let mut out = String::new();
    let mut skipping = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            skipping = trimmed.replace(' ', "") == header.replace(' ', "");
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    while out.ends_with("\n\n") {
        out.pop();
    }
    if !out.is_empty() {
        out.push('\n');
    }
    let body = toml::to_string(tuned)
        .map_err(|e| HarnessError::Infrastructure(format!("encoding the tuned values: {e}")))?;
    let _ = write!(
        out,
        "{header}\n# written by `assay kb tune --write`\n{body}"
    );
    // Check that the result still parses before replacing the file.
    toml::from_str::<assay_project::settings::ProjectConfig>(&out).map_err(|e| {
        HarnessError::Infrastructure(format!("the tuned assay.toml would not parse: {e}"))
    })?;
    assay_project::results::write_replace(&path, out.as_bytes())
        .map_err(|e| HarnessError::io(&path, &e))?;
    Ok(())
}

/// A TOML key: quoted, with `"` and `\` escaped.
fn toml_key(key: &str) -> String {
    format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranked(id: &str, dense: f32, lexical: f32) -> Ranked {
        Ranked {
            id: id.into(),
            dense,
            lexical,
            bonus: 0.0,
        }
    }

    fn case(primary: &str, not_expected: &[&str], ranked: Vec<Ranked>) -> CaseRanking {
        CaseRanking {
            test_id: primary.into(),
            ranked,
            expectations: ExpectationSet {
                expected_primary: vec![primary.into()],
                not_expected: not_expected.iter().map(|s| (*s).to_owned()).collect(),
                ..ExpectationSet::default()
            },
        }
    }

    #[test]
    fn a_setting_is_scored_as_the_bank_scores_it() {
        let c = case(
            "want",
            &["bad"],
            vec![
                ranked("bad", 0.5, 0.0),
                ranked("want", 0.3, 1.0),
                ranked("x", 0.1, 0.0),
            ],
        );
        let p = |t: Option<f32>, c: usize, w: f32| TuneParams {
            score_threshold: t,
            candidates: c,
            lexical_weight: w,
        };
        // top 1 of 1 candidate: `bad` only → hard fail (0)
        assert_eq!(case_score(&c, &p(None, 1, 0.0), 1), 0.0);
        // both selected: a false positive costs 20
        assert_eq!(case_score(&c, &p(None, 3, 0.0), 2), 80.0);
        // the lexical weight lifts `want` above `bad`
        assert_eq!(case_score(&c, &p(None, 1, 0.5), 1), 100.0);
        // a threshold of 0.4 drops `want` (0.3) but keeps `bad`
        assert_eq!(case_score(&c, &p(Some(0.4), 3, 0.0), 2), 0.0);
    }

    /// Cases for the one-standard-error rule, `top_k` 2: `a` cases need a threshold above 0.30
    /// to drop a false positive, `b` cases one above 0.45, and `same` cases score 100 anyway.
    fn threshold_cases(a: usize, b: usize, same: usize) -> Vec<CaseRanking> {
        let mut cases = Vec::new();
        for i in 0..a {
            let mut c = case(
                "want",
                &["bad"],
                vec![ranked("want", 0.6, 0.0), ranked("bad", 0.3, 0.0)],
            );
            c.test_id = format!("A-{i}");
            cases.push(c);
        }
        for i in 0..b {
            let mut c = case(
                "want",
                &["bad"],
                vec![ranked("want", 0.6, 0.0), ranked("bad", 0.45, 0.0)],
            );
            c.test_id = format!("B-{i}");
            cases.push(c);
        }
        for i in 0..same {
            let mut c = case("want", &[], vec![ranked("want", 0.9, 0.0)]);
            c.test_id = format!("S-{i}");
            cases.push(c);
        }
        cases
    }

    fn choose(cases: &[CaseRanking]) -> TuneParams {
        let groups: Vec<Vec<&CaseRanking>> = vec![
            cases.iter().step_by(2).collect(),
            cases.iter().skip(1).step_by(2).collect(),
        ];
        let current = TuneParams {
            score_threshold: None,
            candidates: 2,
            lexical_weight: 0.0,
        };
        best(&groups, &Axes::new(2, false), &current, 2)
    }

    #[test]
    fn the_nearest_setting_within_one_standard_error_of_the_best_is_chosen() {
        // One `b` case: a threshold above 0.45 scores 100 on all, 0.325 loses 20 on that one
        // case (0.95 points of mean), less than the standard error (~2.2): the nearer wins.
        let chosen = choose(&threshold_cases(10, 1, 10));
        assert_eq!(chosen.candidates, 2, "{chosen:?}");
        let t = chosen.score_threshold.unwrap();
        assert!((t - 0.325).abs() < 1e-6, "{chosen:?}");
        // Ten `b` cases: 0.325 is 6.7 points behind, beyond the error: the best wins (the
        // first grid threshold above 0.45).
        let chosen = choose(&threshold_cases(10, 10, 10));
        let t = chosen.score_threshold.unwrap();
        assert!(t > 0.45 && t < 0.475, "{chosen:?}");
        // Nothing beats the current setting: it stays.
        assert_eq!(choose(&threshold_cases(0, 0, 6)).score_threshold, None);
    }

    #[test]
    fn steps_count_grid_positions_and_the_standard_error_is_of_the_mean() {
        let axes = Axes::new(6, true);
        let p = |t: Option<f32>, c: usize, w: f32| TuneParams {
            score_threshold: t,
            candidates: c,
            lexical_weight: w,
        };
        assert_eq!(axes.steps(&p(None, 6, 0.3), &p(None, 6, 0.3)), 0);
        assert_eq!(axes.steps(&p(None, 6, 0.3), &p(Some(0.0), 6, 0.3)), 1);
        assert_eq!(
            axes.steps(&p(Some(0.25), 6, 0.3), &p(Some(0.2), 15, 0.75)),
            2 + 2 + 3
        );
        assert!((standard_error(&[1.0, 3.0]) - 1.0).abs() < 1e-12);
        assert!(standard_error(&[5.0]).abs() < 1e-12);
    }

    #[test]
    fn only_a_change_the_held_out_folds_support_is_accepted() {
        let p = |t: Option<f32>| TuneParams {
            score_threshold: t,
            candidates: 6,
            lexical_weight: 0.3,
        };
        let fold = |before: f64, after: f64| FoldResult {
            cases: 20,
            before,
            after,
            chosen: p(Some(0.25)),
        };
        let outcome = |folds: Vec<FoldResult>, chosen: TuneParams| TuneOutcome {
            embedder: "builtin/hashed-ngrams".into(),
            mode: "hybrid".into(),
            views: "single".into(),
            cases: 20 * folds.len(),
            current: p(None),
            chosen,
            all_before: 80.0,
            all_after: 85.0,
            folds,
        };
        let good = outcome(vec![fold(80.0, 84.0), fold(90.0, 89.0)], p(Some(0.25)));
        assert_eq!(good.verdict(), Ok(()));
        let lost = outcome(vec![fold(80.0, 90.0), fold(90.0, 87.5)], p(Some(0.25)));
        let why = lost.verdict().unwrap_err();
        assert!(why.contains("lost 2.5 points"), "{why}");
        let flat = outcome(vec![fold(80.0, 81.0), fold(90.0, 89.0)], p(Some(0.25)));
        let why = flat.verdict().unwrap_err();
        assert!(why.contains("held-out mean 85.0 → 85.0"), "{why}");
        let same = outcome(vec![fold(80.0, 84.0)], p(None));
        assert!(same.verdict().unwrap_err().contains("no setting beats"));
        assert!(lost.render().contains("verdict: keep the current setting"));
        assert!(good.render().contains("verdict: accepted"));
    }

    #[test]
    fn folds_are_stable_and_spread() {
        let ids: Vec<String> = (0..100).map(|i| format!("CASE-{i}")).collect();
        let mut counts = [0usize; 5];
        for id in &ids {
            counts[fold_of(id, 5)] += 1;
            assert_eq!(fold_of(id, 5), fold_of(id, 5));
        }
        assert!(counts.iter().all(|c| *c >= 10), "{counts:?}");
    }

    #[test]
    fn writing_replaces_only_the_embedder_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(SETTINGS_FILE);
        std::fs::write(
            &path,
            "# my settings\n[gate]\nmin_health = \"POOR\"\n\n[retrieval.tuned.\"builtin/hashed-ngrams\"]\ncandidates = 6\n\n[verdict]\npass_score = 90\n",
        )
        .unwrap();
        let tuned = TunedConfig {
            score_threshold: Some(0.25),
            candidates: Some(15),
            lexical_weight: None,
        };
        write_tuned(dir.path(), "builtin/hashed-ngrams", &tuned).unwrap();
        write_tuned(dir.path(), "builtin/hashed-ngrams", &tuned).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("# my settings\n[gate]"), "{text}");
        assert!(text.contains("pass_score = 90"), "{text}");
        assert_eq!(text.matches("[retrieval.tuned.").count(), 1, "{text}");
        let settings = assay_project::settings::ProjectSettings::load(dir.path()).unwrap();
        assert_eq!(settings.retrieval.tuned["builtin/hashed-ngrams"], tuned);
        assert_eq!(settings.verdict.pass_score, Some(90));
    }
}
