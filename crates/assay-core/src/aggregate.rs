//! Summarising a run case by case as the cases finish, in memory that does not grow with the
//! number of cases: [`Aggregator`] takes each finished case ([`CaseRecord`]) once and keeps only
//! what the summary and the reports need: counts, sums, per-topic, per-handler and
//! per-pattern-type tallies, the worst few cases of each bank, the critical failures and the
//! errors (both bounded), and a tally of the reasons cases lost points ([`Notable`]). The cases
//! themselves go to the run log (`results/cases_<stamp>.jsonl`) as they finish.
//!
//! [`SemanticResults::from_results`] and its siblings go through the same accumulators, so a
//! run summarised from a list and a run summarised as it streams give the same numbers.
//!
//! ```
//! use assay_core::aggregate::{Aggregator, CaseRecord};
//! use assay_core::runlog::AlwaysCaseResult;
//! use assay_core::scoring::Breakdown;
//! let mut agg = Aggregator::new(10, 0);
//! for (i, score) in [100u32, 0].into_iter().enumerate() {
//!     agg.push(i, CaseRecord::Always(AlwaysCaseResult {
//!         test_id: format!("A{i}"), name: String::new(), user_type: "PARENT".into(),
//!         loaded_entities: vec![], expected_always: vec![], missing: vec![], score,
//!         breakdown: Breakdown::default(), is_hard_fail: score == 0, duration_ms: None,
//!         verdict: None,
//!     }));
//! }
//! let (banks, notable) = agg.finish();
//! assert_eq!(banks.always.unwrap().average_score, 50.0);
//! assert_eq!(notable.imperfect, 1);
//! ```

use std::collections::{BTreeMap, BinaryHeap};

use crate::answer::AnswerCaseResult;
use crate::bank::BankType;
use crate::ir::{IrMetrics, IrSummary};
use crate::runlog::{
    AlwaysCaseResult, AlwaysResults, AnswerResults, BankResults, ExpectationSources, GroupScore,
    Health, PatternCaseResult, PatternResults, RunLog, SemanticCaseResult, SemanticResults,
    StateCaseResult, StateResults, Summary, Weights, round1,
};
use crate::scoring::{Penalty, ScoreDistribution};
use crate::verdict::{Outcome, Rule, VerdictRules, Verdicted};

pub use crate::runlog::CaseRecord;
pub use crate::runlog::notable::{
    ErrorGroup, Notable, OutcomeCounts, ReasonTally, RuleTally, VerdictTally,
};

impl CaseRecord {
    /// Its score, as a run comparison takes it.
    pub fn case_score(&self) -> crate::rundiff::CaseScore {
        if let CaseRecord::Answer(r) = self {
            return crate::rundiff::answer_score(r);
        }
        crate::rundiff::CaseScore {
            bank: self.bank().key().to_owned(),
            test_id: self.test_id().to_owned(),
            score: self.score(),
            is_hard_fail: self.is_hard_fail(),
            is_critical_failure: self.is_critical_failure(),
            error: self.error().map(str::to_owned),
            metrics: BTreeMap::new(),
            verdict: self.verdict().outcome,
        }
    }

    /// Records what a run measured and decided of a freshly scored case: how long it took,
    /// and its verdict under the project's rules.
    pub fn settle(&mut self, duration_ms: f64, rules: &VerdictRules) {
        let took = Some(duration_ms);
        match self {
            CaseRecord::Semantic(r) => {
                r.duration_ms = took;
                r.settle(rules);
            }
            CaseRecord::State(r) => {
                r.duration_ms = took;
                r.settle(rules);
            }
            CaseRecord::Pattern(r) => {
                r.duration_ms = took;
                r.settle(rules);
            }
            CaseRecord::Always(r) => {
                r.duration_ms = took;
                r.settle(rules);
            }
            CaseRecord::Answer(r) => {
                r.duration_ms = took;
                r.settle(rules);
            }
        }
    }
}

/// Integer sums for exact, order-free averages of 0-100 scores.
#[derive(Debug, Clone, Default)]
struct Sums {
    n: usize,
    sum: u64,
    hard: usize,
}

impl Sums {
    fn add(&mut self, score: u32, hard: bool) {
        self.n += 1;
        self.sum += u64::from(score);
        self.hard += usize::from(hard);
    }

    fn average(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            round1(self.sum as f64 / self.n as f64)
        }
    }

    fn group(&self) -> GroupScore {
        GroupScore {
            avg: self.average(),
            tests: self.n,
            hard_fails: self.hard,
        }
    }
}

fn groups(map: BTreeMap<String, Sums>) -> BTreeMap<String, GroupScore> {
    map.into_iter().map(|(k, s)| (k, s.group())).collect()
}

#[derive(Debug, Default)]
struct Distribution(BTreeMap<&'static str, usize>);

impl Distribution {
    fn add(&mut self, score: u32) {
        *self.0.entry(crate::scoring::bucket(score)).or_default() += 1;
    }

    fn finish(&self) -> ScoreDistribution {
        let mut d = ScoreDistribution::of(std::iter::empty());
        for (k, v) in &self.0 {
            d.0.insert((*k).to_owned(), *v);
        }
        d
    }
}

/// What a semantic case leaves for the summary (kept by case index, so sums of IR metrics run
/// in case order whatever order the cases finished in).
#[derive(Debug, Clone)]
struct SemanticEntry {
    score: Option<u32>,
    hard: bool,
    topics: Vec<String>,
    ir: Option<IrMetrics>,
}

/// A case kept for the reports, ordered worst first (lowest score, then first in the run).
#[derive(Debug)]
struct Kept {
    score: u32,
    index: usize,
    record: CaseRecord,
}

impl PartialEq for Kept {
    fn eq(&self, other: &Self) -> bool {
        (self.score, self.index) == (other.score, other.index)
    }
}
impl Eq for Kept {}
impl PartialOrd for Kept {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Kept {
    /// The heap's top is the best of the kept cases: the first to go when a worse one comes.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.score, self.index).cmp(&(other.score, other.index))
    }
}

impl OutcomeCounts {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail => self.failed += 1,
            Outcome::Error => self.errors += 1,
        }
    }
}

impl Notable {
    /// What a RunLog's case lists say, when they are complete (a RunLog read from a file that
    /// predates the run log, or made in memory).
    pub fn of(banks: &BankResults) -> Notable {
        let mut agg = Aggregator::new(0, usize::MAX);
        if let Some(r) = &banks.semantic {
            for (i, c) in r.results.iter().enumerate() {
                agg.tally(i, &CaseRecord::Semantic(c.clone()));
            }
        }
        // Bank by bank in run order: a running count orders cases as their index would.
        for (i, rec) in banks
            .state
            .iter()
            .flat_map(|r| r.results.iter().cloned().map(CaseRecord::State))
            .chain(
                banks
                    .pattern
                    .iter()
                    .flat_map(|r| r.results.iter().cloned().map(CaseRecord::Pattern)),
            )
            .chain(
                banks
                    .always
                    .iter()
                    .flat_map(|r| r.results.iter().cloned().map(CaseRecord::Always)),
            )
            .chain(
                banks
                    .answer
                    .iter()
                    .flat_map(|r| r.results.iter().cloned().map(CaseRecord::Answer)),
            )
            .enumerate()
        {
            agg.tally(i, &rec);
        }
        agg.notable(true)
    }
}

const REASONS: [&str; 7] = [
    "hard fail",
    "false positives",
    "secondary missing",
    "rank violations",
    "wrong handlers",
    "answer metrics",
    "assertions failed",
];

/// A deterministic bank's running totals: sums, the score distribution, sums per group
/// (handler or pattern type).
type BankTotals = (Sums, Distribution, BTreeMap<String, Sums>);

/// One rule's count while cases come: how many it failed, the first of them as
/// `(bank, index, bank/test_id)`, and what it named with how often.
type RuleCount = (
    usize,
    std::collections::BTreeSet<(BankType, usize, String)>,
    BTreeMap<String, usize>,
);

/// Summarises finished cases as they come (see the module docs).
#[derive(Debug)]
pub struct Aggregator {
    listed: usize,
    complete_up_to: usize,
    spilled: bool,
    semantic: Option<Vec<Option<SemanticEntry>>>,
    semantic_seen: bool,
    state: Option<BankTotals>,
    /// The pattern bank's totals and the ids of its critical failures.
    pattern: Option<(BankTotals, Vec<String>)>,
    always: Option<(Sums, bool)>,
    answer: Option<AnswerTotals>,
    /// Every record, in arrival order, while all are kept.
    all: Vec<(usize, CaseRecord)>,
    worst: BTreeMap<BankType, BinaryHeap<Kept>>,
    critical: Vec<(usize, CaseRecord)>,
    errored: Vec<(usize, CaseRecord)>,
    imperfect: usize,
    imperfect_by_bank: BTreeMap<String, usize>,
    touched: [usize; 7],
    named: [BTreeMap<String, usize>; 7],
    errors: Vec<ErrorGroup>,
    error_kinds: BTreeMap<String, usize>,
    verdicts: OutcomeCounts,
    verdicts_by_bank: BTreeMap<String, OutcomeCounts>,
    /// Per rule: cases, the first ids in run order (by bank, then index in the bank: the same
    /// whatever order the cases finished in), and what it named.
    rules: BTreeMap<Rule, RuleCount>,
}

impl Aggregator {
    /// An aggregator that keeps every case while there are at most `complete_up_to` of them
    /// (`usize::MAX`: always, for a run with no run log, whose RunLog must list every case),
    /// and from then on only the worst `listed` of each bank, the critical failures and the
    /// errors (each up to [`Notable::KEPT`]).
    pub fn new(listed: usize, complete_up_to: usize) -> Aggregator {
        Aggregator {
            listed,
            complete_up_to,
            spilled: false,
            semantic: None,
            semantic_seen: false,
            state: None,
            pattern: None,
            always: None,
            answer: None,
            all: Vec::new(),
            worst: BTreeMap::new(),
            critical: Vec::new(),
            errored: Vec::new(),
            imperfect: 0,
            imperfect_by_bank: BTreeMap::new(),
            touched: [0; 7],
            named: Default::default(),
            errors: Vec::new(),
            error_kinds: BTreeMap::new(),
            verdicts: OutcomeCounts::default(),
            verdicts_by_bank: BTreeMap::new(),
            rules: BTreeMap::new(),
        }
    }

    /// Marks a bank as run (so a bank with no case still gets its summary).
    pub fn start(&mut self, bank: BankType, cases: usize) {
        match bank {
            BankType::Semantic => {
                self.semantic_seen = true;
                self.semantic.get_or_insert_with(|| vec![None; cases]);
            }
            BankType::State => {
                self.state.get_or_insert_with(Default::default);
            }
            BankType::Pattern => {
                self.pattern.get_or_insert_with(Default::default);
            }
            BankType::Always => {
                self.always.get_or_insert((Sums::default(), true));
            }
            BankType::Answer => {
                self.answer.get_or_insert_with(Default::default);
            }
        }
    }

    /// Takes one finished case; `index` is its place in its bank's run order.
    pub fn push(&mut self, index: usize, record: CaseRecord) {
        self.start(record.bank(), 0);
        match &record {
            CaseRecord::Semantic(r) => {
                let slots = self.semantic.get_or_insert_with(Vec::new);
                if slots.len() <= index {
                    slots.resize(index + 1, None);
                }
                slots[index] = Some(SemanticEntry {
                    score: r.score,
                    hard: r.is_hard_fail,
                    topics: r.topics.clone(),
                    ir: r.ir,
                });
            }
            CaseRecord::State(r) => {
                let (sums, dist, handlers) = self.state.get_or_insert_with(Default::default);
                sums.add(r.score, r.is_hard_fail);
                dist.add(r.score);
                for h in &r.expected_handlers {
                    handlers
                        .entry(h.clone())
                        .or_default()
                        .add(r.score, r.is_hard_fail);
                }
            }
            CaseRecord::Pattern(r) => {
                let ((sums, dist, types), critical) =
                    self.pattern.get_or_insert_with(Default::default);
                sums.add(r.score, r.is_hard_fail);
                dist.add(r.score);
                types
                    .entry(r.pattern_type.clone())
                    .or_default()
                    .add(r.score, r.is_hard_fail);
                if r.is_critical_failure {
                    critical.push(r.test_id.clone());
                }
            }
            CaseRecord::Always(r) => {
                let (sums, all_passed) = self.always.get_or_insert((Sums::default(), true));
                sums.add(r.score, r.is_hard_fail);
                *all_passed &= r.score == 100;
            }
            CaseRecord::Answer(r) => {
                self.answer.get_or_insert_with(Default::default).add(r);
            }
        }
        self.tally(index, &record);
        self.keep(index, record);
    }

    /// Counts a case's stored verdict; `index` is its place in its bank's run order.
    fn count_verdict(&mut self, index: usize, record: &CaseRecord) {
        let verdict = record.verdict();
        self.verdicts.add(verdict.outcome);
        self.verdicts_by_bank
            .entry(record.bank().key().to_owned())
            .or_default()
            .add(verdict.outcome);
        for rule in verdict.rules() {
            let (cases, ids, named) = self.rules.entry(rule).or_default();
            *cases += 1;
            ids.insert((
                record.bank(),
                index,
                format!("{}/{}", record.bank().key(), record.test_id()),
            ));
            if ids.len() > Notable::IDS {
                ids.pop_last();
            }
            for check in verdict.failed.iter().filter(|c| c.rule == rule) {
                for name in &check.names {
                    *named.entry(name.clone()).or_default() += 1;
                }
            }
        }
    }

    /// Counts a case in the verdicts, reasons, errors and imperfect cases.
    fn tally(&mut self, index: usize, record: &CaseRecord) {
        self.count_verdict(index, record);
        if let Some(message) = record.error() {
            let message = &message.to_owned();
            let test_id = record.test_id();
            let kinds = self.error_kinds.len();
            *self.error_kinds.entry(message.clone()).or_default() += 1;
            match self.errors.iter_mut().find(|g| &g.message == message) {
                Some(g) => {
                    g.count += 1;
                    if g.test_ids.len() < Notable::IDS {
                        g.test_ids.push(test_id.to_owned());
                    }
                }
                None if kinds < Notable::GROUPS => self.errors.push(ErrorGroup {
                    message: message.clone(),
                    count: 1,
                    test_ids: vec![test_id.to_owned()],
                }),
                None => {}
            }
        }
        let imperfect = record.score().is_some_and(|s| s < 100) || record.is_critical_failure();
        if !imperfect {
            return;
        }
        self.imperfect += 1;
        *self
            .imperfect_by_bank
            .entry(record.bank().key().to_owned())
            .or_default() += 1;
        let b = record.breakdown();
        let names = |p: Option<&Penalty<String>>| p.map(|p| p.items.clone());
        // A semantic hard fail is named by the expected entities it lost (its reason names
        // each with the detail, which would make every case its own group).
        let hard_fail = |b: &crate::scoring::Breakdown| -> Vec<String> {
            match record {
                CaseRecord::Semantic(r) if !r.lost.is_empty() => r
                    .lost
                    .iter()
                    .filter(|l| r.expectations.expected_primary.contains(&l.entity_id))
                    .map(|l| match l.lost_at {
                        crate::runlog::LostAt::NotRetrieved => {
                            format!("{} not retrieved", l.entity_id)
                        }
                        crate::runlog::LostAt::DroppedByReranker => {
                            format!("{} not selected", l.entity_id)
                        }
                    })
                    .collect(),
                // An answer case by what failed it, so cases that fail alike group together.
                CaseRecord::Answer(r) => answer_failures(r),
                _ => b.reason.clone().into_iter().collect(),
            }
        };
        let (low_metrics, failed_assertions) = match record {
            CaseRecord::Answer(r) => answer_shortfalls(r),
            _ => (None, None),
        };
        let hits: [Option<Vec<String>>; 7] = [
            (b.primary_fail == Some(true)).then(|| hard_fail(b)),
            names(b.false_positives.as_ref()),
            names(b.secondary_missing.as_ref()),
            b.rank_violations.as_ref().map(|p| {
                p.items
                    .iter()
                    .map(|v| format!("{} too low", v.expected_higher))
                    .collect()
            }),
            names(b.wrong_handlers.as_ref()),
            low_metrics,
            failed_assertions,
        ];
        for (i, items) in hits.into_iter().enumerate() {
            let Some(items) = items else { continue };
            self.touched[i] += 1;
            for item in items {
                *self.named[i].entry(item).or_default() += 1;
            }
        }
    }

    fn keep(&mut self, index: usize, record: CaseRecord) {
        if !self.spilled {
            self.all.push((index, record));
            if self.all.len() > self.complete_up_to {
                self.spilled = true;
                for (i, r) in std::mem::take(&mut self.all) {
                    self.keep_notable(i, r);
                }
            }
            return;
        }
        self.keep_notable(index, record);
    }

    fn keep_notable(&mut self, index: usize, record: CaseRecord) {
        let critical = record.is_critical_failure();
        let errored = record.score().is_none();
        if critical {
            if self.critical.len() < Notable::KEPT {
                self.critical.push((index, record));
            }
            return;
        }
        if errored {
            if self.errored.len() < Notable::KEPT {
                self.errored.push((index, record));
            }
            return;
        }
        let score = record.score().unwrap_or(0);
        if score >= 100 || self.listed == 0 {
            return;
        }
        let heap = self.worst.entry(record.bank()).or_default();
        heap.push(Kept {
            score,
            index,
            record,
        });
        if heap.len() > self.listed {
            heap.pop();
        }
    }

    fn notable(&self, complete: bool) -> Notable {
        let reasons = REASONS
            .iter()
            .enumerate()
            .filter(|(i, _)| self.touched[*i] > 0)
            .map(|(i, label)| {
                let mut named: Vec<(String, usize)> =
                    self.named[i].iter().map(|(k, v)| (k.clone(), *v)).collect();
                // Most often first, then by name, so the order is the same however the cases
                // arrived.
                named.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                let distinct = named.len();
                named.truncate(Notable::NAMED);
                ReasonTally {
                    reason: (*label).to_owned(),
                    cases: self.touched[i],
                    named,
                    distinct,
                }
            })
            .collect();
        let mut errors = self.errors.clone();
        errors.sort_by_key(|e| std::cmp::Reverse(e.count));
        let rules: Vec<RuleTally> = self
            .rules
            .iter()
            .map(|(rule, (cases, ids, named))| {
                let mut named: Vec<(String, usize)> =
                    named.iter().map(|(k, v)| (k.clone(), *v)).collect();
                named.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                let distinct = named.len();
                named.truncate(Notable::NAMED);
                RuleTally {
                    rule: *rule,
                    cases: *cases,
                    test_ids: ids.iter().map(|(_, _, id)| id.clone()).collect(),
                    named,
                    distinct,
                }
            })
            .collect();
        Notable {
            verdicts: Some(VerdictTally {
                all: self.verdicts,
                by_bank: self.verdicts_by_bank.clone(),
                rules,
            }),
            imperfect: self.imperfect,
            imperfect_by_bank: self.imperfect_by_bank.clone(),
            reasons,
            errors,
            error_kinds: self.error_kinds.len(),
            complete,
        }
    }

    /// The banks' summaries with their case lists (every case when all were kept, else the
    /// kept ones in run order), and what the reports show besides.
    pub fn finish(mut self) -> (BankResults, Notable) {
        let notable = self.notable(!self.spilled);
        let mut lists: BTreeMap<BankType, Vec<(usize, CaseRecord)>> = BTreeMap::new();
        let kept: Vec<(usize, CaseRecord)> = if self.spilled {
            let mut v: Vec<(usize, CaseRecord)> = std::mem::take(&mut self.critical);
            v.append(&mut self.errored);
            for (_, heap) in std::mem::take(&mut self.worst) {
                v.extend(heap.into_iter().map(|k| (k.index, k.record)));
            }
            v
        } else {
            std::mem::take(&mut self.all)
        };
        for (i, r) in kept {
            lists.entry(r.bank()).or_default().push((i, r));
        }
        for list in lists.values_mut() {
            list.sort_by_key(|(i, _)| *i);
        }
        let mut take = |bank: BankType| lists.remove(&bank).unwrap_or_default().into_iter();
        let mut banks = BankResults::default();
        if let Some(entries) = self.semantic.filter(|_| self.semantic_seen) {
            let results: Vec<SemanticCaseResult> = take(BankType::Semantic)
                .filter_map(|(_, r)| match r {
                    CaseRecord::Semantic(r) => Some(r),
                    _ => None,
                })
                .collect();
            banks.semantic = Some(semantic_summary(entries.into_iter().flatten(), results));
        }
        if let Some((sums, dist, handlers)) = self.state {
            banks.state = Some(StateResults {
                tests_run: sums.n,
                average_score: sums.average(),
                hard_fails: sums.hard,
                score_distribution: dist.finish(),
                handler_scores: groups(handlers),
                results: take(BankType::State)
                    .filter_map(|(_, r)| match r {
                        CaseRecord::State(r) => Some(r),
                        _ => None,
                    })
                    .collect(),
            });
        }
        if let Some(((sums, dist, types), critical)) = self.pattern {
            banks.pattern = Some(PatternResults {
                tests_run: sums.n,
                average_score: sums.average(),
                hard_fails: sums.hard,
                score_distribution: dist.finish(),
                pattern_type_scores: groups(types),
                critical_failures: critical,
                results: take(BankType::Pattern)
                    .filter_map(|(_, r)| match r {
                        CaseRecord::Pattern(r) => Some(r),
                        _ => None,
                    })
                    .collect(),
            });
        }
        if let Some((sums, all_passed)) = self.always {
            banks.always = Some(AlwaysResults {
                tests_run: sums.n,
                average_score: sums.average(),
                all_passed,
                hard_fails: sums.hard,
                results: take(BankType::Always)
                    .filter_map(|(_, r)| match r {
                        CaseRecord::Always(r) => Some(r),
                        _ => None,
                    })
                    .collect(),
            });
        }
        if let Some(totals) = self.answer {
            let results = take(BankType::Answer)
                .filter_map(|(_, r)| match r {
                    CaseRecord::Answer(r) => Some(r),
                    _ => None,
                })
                .collect();
            banks.answer = Some(totals.finish(results));
        }
        (banks, notable)
    }
}

/// What failed an answer case, one name per kind of failure: `faithfulness below minimum`,
/// `critical refusal`, `assertions under threshold`.
fn answer_failures(r: &AnswerCaseResult) -> Vec<String> {
    let mut out: Vec<String> = r
        .metrics
        .iter()
        .filter(|(_, o)| o.below_minimum())
        .map(|(m, _)| format!("{m} below minimum"))
        .collect();
    if let Some(a) = &r.assertions {
        out.extend(
            a.results
                .iter()
                .filter(|x| x.critical && x.status == crate::assertion::Status::Failed)
                .map(|x| format!("critical {}", x.kind)),
        );
        if !a.passed && !a.critical_failed {
            out.push("assertions under threshold".to_owned());
        }
    }
    out
}

/// The metrics of an answer case under 1, and its failed assertions by type (`None` when
/// there are none).
fn answer_shortfalls(r: &AnswerCaseResult) -> (Option<Vec<String>>, Option<Vec<String>>) {
    let low: Vec<String> = r
        .metrics
        .iter()
        .filter(|(_, o)| o.score.is_some_and(|s| s < 1.0))
        .map(|(m, _)| m.as_str().to_owned())
        .collect();
    let failed: Vec<String> = r
        .assertions
        .iter()
        .flat_map(|a| &a.results)
        .filter(|x| x.status == crate::assertion::Status::Failed)
        .map(|x| x.kind.clone())
        .collect();
    (
        (!low.is_empty()).then_some(low),
        (!failed.is_empty()).then_some(failed),
    )
}

/// The answer bank's running totals.
#[derive(Debug, Default)]
struct AnswerTotals {
    sums: Sums,
    run: usize,
    errors: usize,
    dist: Distribution,
    topics: BTreeMap<String, Sums>,
    /// Per metric: the sum of scores, how many cases had one, how many did not apply.
    metrics: BTreeMap<crate::answer::Metric, (f64, usize, usize)>,
    critical: Vec<String>,
}

impl AnswerTotals {
    fn add(&mut self, r: &AnswerCaseResult) {
        self.run += 1;
        let Some(score) = r.score else {
            self.errors += 1;
            return;
        };
        self.sums.add(score, r.is_hard_fail);
        self.dist.add(score);
        for t in &r.topics {
            self.topics
                .entry(t.clone())
                .or_default()
                .add(score, r.is_hard_fail);
        }
        for (metric, outcome) in &r.metrics {
            let e = self.metrics.entry(*metric).or_default();
            match outcome.score {
                Some(s) => {
                    e.0 += s;
                    e.1 += 1;
                }
                None => e.2 += 1,
            }
        }
        if r.is_critical_failure {
            self.critical.push(r.test_id.clone());
        }
    }

    fn finish(self, results: Vec<AnswerCaseResult>) -> AnswerResults {
        AnswerResults {
            tests_run: self.run,
            errors: self.errors,
            average_score: self.sums.average(),
            hard_fails: self.sums.hard,
            score_distribution: self.dist.finish(),
            topic_scores: groups(self.topics),
            metrics: self
                .metrics
                .into_iter()
                .map(|(m, (sum, n, not_applicable))| {
                    (
                        m,
                        crate::runlog::MetricSummary {
                            mean: (n > 0).then(|| (sum / n as f64 * 1000.0).round() / 1000.0),
                            cases: n,
                            not_applicable,
                        },
                    )
                })
                .collect(),
            critical_failures: self.critical,
            results,
        }
    }
}

/// The semantic summary of entries in case order.
fn semantic_summary(
    entries: impl Iterator<Item = SemanticEntry>,
    results: Vec<SemanticCaseResult>,
) -> SemanticResults {
    let mut sums = Sums::default();
    let mut errors = 0;
    let mut dist = Distribution::default();
    let mut topics: BTreeMap<String, Sums> = BTreeMap::new();
    let mut ir: Vec<IrMetrics> = Vec::new();
    let mut topic_ir: BTreeMap<String, Vec<IrMetrics>> = BTreeMap::new();
    let mut run = 0;
    for e in entries {
        run += 1;
        let Some(score) = e.score else {
            errors += 1;
            continue;
        };
        sums.add(score, e.hard);
        dist.add(score);
        for t in &e.topics {
            topics.entry(t.clone()).or_default().add(score, e.hard);
        }
        if let Some(m) = e.ir {
            ir.push(m);
            for t in &e.topics {
                topic_ir.entry(t.clone()).or_default().push(m);
            }
        }
    }
    SemanticResults {
        tests_run: run,
        errors,
        average_score: sums.average(),
        hard_fails: sums.hard,
        score_distribution: dist.finish(),
        topic_scores: groups(topics),
        ir: IrSummary::of(&ir),
        topic_ir: topic_ir
            .into_iter()
            .filter_map(|(t, ms)| IrSummary::of(&ms).map(|s| (t, s)))
            .collect(),
        repeats: 1,
        average_interval: None,
        unstable: Vec::new(),
        results,
    }
}

impl SemanticResults {
    /// Aggregates case results (in case order).
    pub fn from_results(results: Vec<SemanticCaseResult>) -> SemanticResults {
        let entries: Vec<SemanticEntry> = results
            .iter()
            .map(|r| SemanticEntry {
                score: r.score,
                hard: r.is_hard_fail,
                topics: r.topics.clone(),
                ir: r.ir,
            })
            .collect();
        semantic_summary(entries.into_iter(), results)
    }
}

impl StateResults {
    /// Aggregates case results.
    pub fn from_results(results: Vec<StateCaseResult>) -> StateResults {
        let mut agg = Aggregator::new(0, usize::MAX);
        agg.start(BankType::State, results.len());
        for (i, r) in results.into_iter().enumerate() {
            agg.push(i, CaseRecord::State(r));
        }
        agg.finish().0.state.unwrap_or_else(unreachable_state)
    }
}

impl PatternResults {
    /// Aggregates case results.
    pub fn from_results(results: Vec<PatternCaseResult>) -> PatternResults {
        let mut agg = Aggregator::new(0, usize::MAX);
        agg.start(BankType::Pattern, results.len());
        for (i, r) in results.into_iter().enumerate() {
            agg.push(i, CaseRecord::Pattern(r));
        }
        agg.finish().0.pattern.unwrap_or_else(unreachable_pattern)
    }
}

impl AlwaysResults {
    /// Aggregates case results.
    pub fn from_results(results: Vec<AlwaysCaseResult>) -> AlwaysResults {
        let mut agg = Aggregator::new(0, usize::MAX);
        agg.start(BankType::Always, results.len());
        for (i, r) in results.into_iter().enumerate() {
            agg.push(i, CaseRecord::Always(r));
        }
        agg.finish().0.always.unwrap_or(AlwaysResults {
            tests_run: 0,
            average_score: 0.0,
            all_passed: true,
            hard_fails: 0,
            results: Vec::new(),
        })
    }
}

impl SemanticResults {
    /// Records that each case ran `repeats` times: the average's interval over the repeats
    /// and the unstable cases.
    pub fn with_repeats(mut self, repeats: u32) -> SemanticResults {
        self.repeats = repeats.max(1);
        if self.repeats > 1 {
            let groups: Vec<Vec<f64>> = self
                .results
                .iter()
                .map(|r| {
                    r.repeat_scores
                        .iter()
                        .filter_map(|s| s.map(f64::from))
                        .collect::<Vec<f64>>()
                })
                .filter(|g| g.len() >= 2)
                .collect();
            let refs: Vec<&[f64]> = groups.iter().map(Vec::as_slice).collect();
            self.average_interval = crate::stats::stratified_bootstrap_mean(
                &refs,
                crate::stats::BootstrapSettings::default(),
            );
            self.unstable = self
                .results
                .iter()
                .filter(|r| r.unstable)
                .map(|r| r.test_id.clone())
                .collect();
        }
        self
    }

    fn scored(&self) -> usize {
        self.tests_run - self.errors
    }
}

impl BankResults {
    /// `(bank, average, scored cases, hard fails)` for each bank that ran.
    fn components(&self) -> Vec<(BankType, f64, usize, usize)> {
        let mut out = Vec::new();
        if let Some(r) = &self.semantic {
            out.push((
                BankType::Semantic,
                r.average_score,
                r.scored(),
                r.hard_fails,
            ));
        }
        if let Some(r) = &self.state {
            out.push((BankType::State, r.average_score, r.tests_run, r.hard_fails));
        }
        if let Some(r) = &self.pattern {
            out.push((
                BankType::Pattern,
                r.average_score,
                r.tests_run,
                r.hard_fails,
            ));
        }
        if let Some(r) = &self.always {
            out.push((BankType::Always, r.average_score, r.tests_run, r.hard_fails));
        }
        if let Some(r) = &self.answer {
            out.push((
                BankType::Answer,
                r.average_score,
                r.tests_run - r.errors,
                r.hard_fails,
            ));
        }
        out
    }

    /// Summarises the banks (000 §6.5), leaving banks that did not run, or had no scored case,
    /// out of the weighted score and renormalising the remaining weights.
    pub fn summarize(&self, weights: &Weights, sources: Option<ExpectationSources>) -> Summary {
        let components = self.components();
        // The four retrieval banks always have a key; the answer bank only when it ran.
        let mut component_scores: BTreeMap<String, Option<f64>> = BankType::RETRIEVAL
            .iter()
            .chain(self.answer.as_ref().map(|_| &BankType::Answer))
            .map(|b| (b.key().to_owned(), None))
            .collect();
        let weighted: Vec<(BankType, f64)> = components
            .iter()
            .filter(|(_, _, scored, _)| *scored > 0)
            .map(|(b, avg, _, _)| (*b, *avg))
            .collect();
        for (bank, avg) in &weighted {
            component_scores.insert(bank.key().to_owned(), Some(*avg));
        }
        let total_weight: f64 = weighted.iter().map(|(b, _)| weights.get(*b)).sum();
        let (combined, used) = if total_weight > 0.0 {
            let combined = weighted
                .iter()
                .map(|(b, avg)| avg * weights.get(*b))
                .sum::<f64>()
                / total_weight;
            let used = weighted
                .iter()
                .map(|(b, _)| (b.key().to_owned(), weights.get(*b) / total_weight))
                .collect();
            (combined, used)
        } else {
            (0.0, BTreeMap::new())
        };
        let hard_fail_count = components.iter().map(|c| c.3).sum();
        let critical_failures: Vec<String> = self
            .pattern
            .iter()
            .flat_map(|p| p.critical_failures.iter().cloned())
            .chain(
                self.answer
                    .iter()
                    .flat_map(|a| a.critical_failures.iter().cloned()),
            )
            .collect();
        let total_tests = self.semantic.as_ref().map_or(0, |r| r.tests_run)
            + self.state.as_ref().map_or(0, |r| r.tests_run)
            + self.pattern.as_ref().map_or(0, |r| r.tests_run)
            + self.always.as_ref().map_or(0, |r| r.tests_run)
            + self.answer.as_ref().map_or(0, |r| r.tests_run);
        Summary {
            total_tests,
            combined_score: round1(combined),
            hard_fail_count,
            health_status: Health::assess(!critical_failures.is_empty(), combined, hard_fail_count),
            critical_failures,
            component_scores,
            weights: used,
            expectation_sources: sources,
            error_count: self.semantic.as_ref().map_or(0, |r| r.errors)
                + self.answer.as_ref().map_or(0, |r| r.errors),
        }
    }
}

impl RunLog {
    /// What the summary shows besides the numbers: recorded with the run, or computed from
    /// the case lists of a RunLog that predates it (whose lists are complete).
    pub fn notable(&self) -> crate::aggregate::Notable {
        self.notable_cases
            .clone()
            .unwrap_or_else(|| self.notable_of_lists())
    }

    fn notable_of_lists(&self) -> crate::aggregate::Notable {
        crate::aggregate::Notable::of(&BankResults {
            semantic: self.semantic.clone(),
            state: self.state.clone(),
            pattern: self.pattern.clone(),
            always: self.always.clone(),
            answer: self.answer.clone(),
        })
    }

    /// The cases by verdict: recorded with the run, or counted from the case lists of a
    /// RunLog that predates verdicts (each case's verdict filled as it was read).
    pub fn verdicts(&self) -> crate::aggregate::VerdictTally {
        self.notable_cases
            .as_ref()
            .and_then(|n| n.verdicts.clone())
            .or_else(|| self.notable_of_lists().verdicts)
            .unwrap_or_default()
    }
}

// `start` always creates the bank's summary, so these are never reached; they keep the
// functions total without a panic.
fn unreachable_state() -> StateResults {
    StateResults {
        tests_run: 0,
        average_score: 0.0,
        hard_fails: 0,
        score_distribution: ScoreDistribution::of(std::iter::empty()),
        handler_scores: BTreeMap::new(),
        results: Vec::new(),
    }
}

fn unreachable_pattern() -> PatternResults {
    PatternResults {
        tests_run: 0,
        average_score: 0.0,
        hard_fails: 0,
        score_distribution: ScoreDistribution::of(std::iter::empty()),
        pattern_type_scores: BTreeMap::new(),
        critical_failures: Vec::new(),
        results: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scoring::Breakdown;

    fn state(id: &str, score: u32, handler: &str) -> StateCaseResult {
        StateCaseResult {
            test_id: id.into(),
            name: String::new(),
            user_state: crate::UserState::new(),
            triggered_handlers: vec![],
            expected_handlers: vec![handler.into()],
            not_expected_handlers: vec![],
            primary_pass: score == 100,
            wrong_handlers: vec![],
            score,
            breakdown: Breakdown::default(),
            is_hard_fail: score == 0,
            duration_ms: None,
            verdict: None,
        }
    }

    #[test]
    fn streaming_keeps_the_worst_and_the_numbers_of_all() {
        let mut agg = Aggregator::new(2, 3);
        agg.start(BankType::State, 6);
        for (i, s) in [100, 40, 0, 90, 100, 40].into_iter().enumerate() {
            agg.push(i, CaseRecord::State(state(&format!("S{i}"), s, "h")));
        }
        let (banks, notable) = agg.finish();
        let st = banks.state.unwrap();
        assert_eq!(
            (st.tests_run, st.hard_fails, st.average_score),
            (6, 1, 61.7)
        );
        let ids: Vec<&str> = st.results.iter().map(|r| r.test_id.as_str()).collect();
        assert_eq!(ids, ["S1", "S2"], "the two worst, in run order");
        assert_eq!(notable.imperfect, 4);
        assert!(!notable.complete);
        assert_eq!(st.handler_scores["h"].tests, 6);
        // The same cases summarised from a list give the same numbers.
        let listed = StateResults::from_results(
            [100, 40, 0, 90, 100, 40]
                .into_iter()
                .enumerate()
                .map(|(i, s)| state(&format!("S{i}"), s, "h"))
                .collect(),
        );
        assert_eq!(
            (
                listed.average_score,
                listed.hard_fails,
                &listed.score_distribution
            ),
            (st.average_score, st.hard_fails, &st.score_distribution)
        );
        assert_eq!(listed.results.len(), 6);
    }

    #[test]
    fn a_small_run_is_listed_whole() {
        let mut agg = Aggregator::new(1, 10);
        agg.start(BankType::State, 3);
        for (i, s) in [100, 40, 0].into_iter().enumerate() {
            agg.push(i, CaseRecord::State(state(&format!("S{i}"), s, "h")));
        }
        let (banks, notable) = agg.finish();
        assert_eq!(banks.state.unwrap().results.len(), 3);
        assert!(notable.complete);
    }
}
