//! How often assay's 95 % intervals cover the truth (bench/statistics): a scripted judge scores
//! simulated runs as a known true score plus seeded Gaussian noise of a known size, the
//! simulation reports are compared exactly as `assay simulate compare` compares them
//! ([`assay_core::simulation::compare_reports`]), and we count how often each interval holds
//! the true value over many seeded simulations.
//!
//! ```text
//! cargo run --release -p assay-core --example interval_coverage -- \
//!     [--simulations 200] [--scenarios 10] [--repeats 5] [--noise 1.0] [--seed 1]
//!     [--same-truth yes]
//! ```
//!
//! Each simulation draws its scenarios' true scores uniformly in [4, 9] and each run's judged
//! score as truth + N(0, noise²) (not clipped to 0-10, so the truth is exactly the mean). It
//! reports the coverage of:
//! * the report's mean overall score (bootstrap within scenarios) of the true mean;
//! * each scenario's mean (Student's t over its repeats) of its true score;
//! * the pass rate's Wilson interval of the true pass probability (a run passes at 7);
//! * the paired comparison of two reports of the same model (different noise): how often it
//!   wrongly says "better" or "worse" (should be about 5 %), over all scenarios and on some
//!   scenario (Welch, Holm-corrected: at most about 5 %).

use assay_core::simulation::{
    Judgement, SIM_SCHEMA_VERSION, ScenarioRun, ScenarioSummary, SimReport, SimSummary, Verdict,
    compare_reports,
};
use assay_core::stats::{SplitMix64, Verdict as Difference};

struct Args {
    simulations: usize,
    scenarios: usize,
    repeats: u32,
    noise: f64,
    seed: u64,
    /// Every scenario with the same true score (for Wilson's nominal coverage).
    same_truth: bool,
}

fn args() -> Args {
    let mut a = Args {
        simulations: 200,
        scenarios: 10,
        repeats: 5,
        noise: 1.0,
        seed: 1,
        same_truth: false,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let value = pair.get(1).map_or("", String::as_str);
        match pair[0].as_str() {
            "--simulations" => a.simulations = value.parse().unwrap_or(a.simulations),
            "--scenarios" => a.scenarios = value.parse().unwrap_or(a.scenarios),
            "--repeats" => a.repeats = value.parse().unwrap_or(a.repeats),
            "--noise" => a.noise = value.parse().unwrap_or(a.noise),
            "--seed" => a.seed = value.parse().unwrap_or(a.seed),
            "--same-truth" => a.same_truth = value == "yes",
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn uniform(rng: &mut SplitMix64) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// A standard normal draw (Box-Muller).
fn normal(rng: &mut SplitMix64) -> f64 {
    let u1 = uniform(rng).max(f64::MIN_POSITIVE);
    let u2 = uniform(rng);
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Φ(x), the standard normal CDF.
fn phi(x: f64) -> f64 {
    0.5 * assay_core::stats::erfc(-x / std::f64::consts::SQRT_2)
}

const THRESHOLD: f64 = 7.0;

fn report(truths: &[f64], repeats: u32, noise: f64, rng: &mut SplitMix64) -> SimReport {
    let mut runs = Vec::new();
    let mut scenarios = Vec::new();
    for (s, truth) in truths.iter().enumerate() {
        let id = format!("s{s:02}");
        let scores: Vec<f64> = (0..repeats).map(|_| truth + noise * normal(rng)).collect();
        let passed = scores.iter().filter(|x| **x >= THRESHOLD).count() as u32;
        for (k, score) in scores.iter().enumerate() {
            runs.push(ScenarioRun {
                scenario_id: id.clone(),
                scenario_name: id.clone(),
                repeat: k as u32 + 1,
                verdict: if *score >= THRESHOLD {
                    Verdict::Pass
                } else {
                    Verdict::Fail
                },
                failed_by: None,
                judge_verdict: None,
                reason: None,
                overall: Some(*score),
                judgement: Some(Judgement {
                    scores: Vec::new(),
                    overall: *score,
                    simulator_kept_persona: true,
                    simulator_issue: String::new(),
                    summary: String::new(),
                    calls: 1,
                }),
                judge_samples: Vec::new(),
                checks: Vec::new(),
                error: None,
                warnings: Vec::new(),
                transcript: None,
                duration_ms: 0,
            });
        }
        scenarios.push(ScenarioSummary {
            id: id.clone(),
            name: id,
            runs: repeats,
            scored: repeats,
            passed,
            mean: Some(scores.iter().sum::<f64>() / f64::from(repeats)),
            stddev: None,
            min: None,
            max: None,
            pass_all: None,
        });
    }
    let passed = runs.iter().filter(|r| r.verdict == Verdict::Pass).count() as u32;
    let total = runs.len() as u32;
    SimReport {
        schema_version: SIM_SCHEMA_VERSION,
        suite: "coverage".into(),
        model: "scripted".into(),
        simulator_model: "scripted".into(),
        evaluator_model: "scripted-noisy-judge".into(),
        generated_at: String::new(),
        pass_threshold: THRESHOLD,
        repeat: repeats,
        concurrency: 1,
        runs_in_flight: 1,
        duration_ms: 0,
        summary: SimSummary {
            runs: total,
            passed,
            failed: total - passed,
            simulator_fault: 0,
            errors: 0,
            failed_by_check: 0,
            failed_by_judge: total - passed,
            judge_passed_failed_check: 0,
            uncertain: 0,
            mean_overall: None,
            pass_rate: Some(f64::from(passed) / f64::from(total)),
            pass_rate_interval: None,
            pass_all_scenarios: None,
        },
        gate: None,
        scenarios,
        criteria: Vec::new(),
        runs,
        usage: Vec::new(),
        judge: None,
        baseline: None,
        rate_limits: Vec::new(),
        shard: None,
        merged: None,
    }
}

fn main() {
    let a = args();
    let mut rng = SplitMix64::new(a.seed);
    let (mut overall_hits, mut scenario_hits, mut scenario_total) = (0usize, 0usize, 0usize);
    let (mut wilson_hits, mut false_alarms, mut pairs) = (0usize, 0usize, 0usize);
    let mut scenario_alarms = 0usize;
    for _ in 0..a.simulations {
        let shared = 4.0 + 5.0 * uniform(&mut rng);
        let truths: Vec<f64> = (0..a.scenarios)
            .map(|_| {
                if a.same_truth {
                    shared
                } else {
                    4.0 + 5.0 * uniform(&mut rng)
                }
            })
            .collect();
        let true_mean = truths.iter().sum::<f64>() / truths.len() as f64;
        let true_pass = truths
            .iter()
            .map(|t| phi((t - THRESHOLD) / a.noise))
            .sum::<f64>()
            / truths.len() as f64;
        let first = report(&truths, a.repeats, a.noise, &mut rng);
        let second = report(&truths, a.repeats, a.noise, &mut rng);
        let c = compare_reports(&[("a".into(), &first), ("b".into(), &second)]);
        let r = &c.reports[0];
        if r.mean_overall
            .as_ref()
            .is_some_and(|i| i.contains(true_mean))
        {
            overall_hits += 1;
        }
        if r.pass_rate.as_ref().is_some_and(|i| i.contains(true_pass)) {
            wilson_hits += 1;
        }
        for (row, truth) in c.scenarios.iter().zip(&truths) {
            if let Some(Some(cell)) = row.cells.first()
                && let Some(i) = &cell.interval
            {
                scenario_total += 1;
                if i.contains(*truth) {
                    scenario_hits += 1;
                }
            }
        }
        if !c.pairs[0].worse_scenarios().is_empty()
            || c.pairs[0]
                .scenarios
                .iter()
                .chain(&c.pairs[0].scenario_pass_rates)
                .any(|(_, s)| s.verdict == Difference::Better)
        {
            scenario_alarms += 1;
        }
        if let Some(o) = c.pairs[0].overall.as_ref() {
            pairs += 1;
            if o.verdict != Difference::NotDistinguishable {
                false_alarms += 1;
            }
        }
    }
    let pct = |hits: usize, of: usize| 100.0 * hits as f64 / of.max(1) as f64;
    println!(
        "{} simulations × {} scenarios × {} repeats, judge noise sd {}",
        a.simulations, a.scenarios, a.repeats, a.noise
    );
    println!(
        "mean overall (bootstrap within scenarios, n = {}): covers the true mean in {:.1}%",
        a.scenarios * a.repeats as usize,
        pct(overall_hits, a.simulations)
    );
    println!(
        "pass rate (Wilson, n = {}): covers the true pass probability in {:.1}%",
        a.scenarios * a.repeats as usize,
        pct(wilson_hits, a.simulations)
    );
    println!(
        "scenario means (Student t, n = {}): cover the true score in {:.1}% of {}",
        a.repeats,
        pct(scenario_hits, scenario_total),
        scenario_total
    );
    println!(
        "the same model twice: \"better\" or \"worse\" in {:.1}% of {} paired comparisons (expected about 5%)",
        pct(false_alarms, pairs),
        pairs
    );
    println!(
        "the same model twice: some scenario called better or worse (Welch on scores, Fisher on pass rates, Holm-corrected) in {:.1}% of {} simulations (expected at most about 5%)",
        pct(scenario_alarms, a.simulations),
        a.simulations
    );
}
