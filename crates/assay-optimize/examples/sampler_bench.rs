//! The sampler half of `bench/optimizer/`: per-trial overhead and sample efficiency on the
//! synthetic objectives that `bench/optimizer/optuna_bench.py` runs through Optuna.
//!
//! Prints one JSON object per sampler variant on stdout: `assay` (the defaults), `assay-no-dedup`
//! (`avoid_duplicates: false`, i.e. Optuna's behaviour) and `random` (uniform, repeats allowed).
//! Every study enqueues the baseline (all zeros) as trial 0, as the seed does. A repeat counts
//! as a trial (Optuna evaluates it again; assay reuses the values). Knobs (environment):
//! `SEEDS` (20), `BUDGET` (1000 trials), `OVERHEAD_REPS` (5).

#![allow(clippy::print_stdout)]

use std::collections::HashSet;
use std::time::Instant;

use assay_optimize::{Direction, SamplerSettings, SearchSpace, Study};

/// Per-parameter scores of objective 1 (`A`) and objective 2 (`B`); both maximised. Keep in
/// step with `optuna_bench.py`. Parameters 0 and 1 trade the objectives off (4 × 3
/// non-dominated choices, parameter 0 on a coarser scale, parameter 1's fourth choice
/// dominated); parameters 2-6 have one choice best for both, by margins of 1 to 3.
const A: [[f64; 4]; 7] = [
    [0.0, 12.0, 20.0, 26.0],
    [0.0, 2.0, 4.0, 1.0],
    [3.0, 0.0, 4.0, 2.0],
    [1.0, 5.0, 0.0, 3.0],
    [2.0, 2.0, 6.0, 3.0],
    [0.0, 1.0, 2.0, 3.0],
    [8.0, 3.0, 5.0, 0.0],
];
const B: [[f64; 4]; 7] = [
    [30.0, 24.0, 14.0, 0.0],
    [4.0, 2.0, 0.0, 1.0],
    [2.0, 1.0, 4.0, 3.0],
    [3.0, 6.0, 2.0, 0.0],
    [5.0, 1.0, 7.0, 6.0],
    [3.0, 1.0, 0.0, 4.0],
    [6.0, 4.0, 0.0, 2.0],
];

fn f(table: &[[f64; 4]; 7], p: &[usize]) -> f64 {
    p.iter().zip(table).map(|(&c, row)| row[c]).sum()
}

fn space() -> SearchSpace {
    (0..7).fold(SearchSpace::new(), |s, i| {
        s.with_param(format!("agent{i}"), 4).expect("valid space")
    })
}

fn all_points() -> Vec<Vec<usize>> {
    (0..4usize.pow(7))
        .map(|mut i| {
            let mut p = vec![0; 7];
            for slot in p.iter_mut().rev() {
                *slot = i % 4;
                i /= 4;
            }
            p
        })
        .collect()
}

/// The unique maximiser of objective 1 and the true Pareto front, by enumeration.
fn truth() -> (Vec<usize>, HashSet<Vec<usize>>) {
    let pts = all_points();
    let best = pts.iter().map(|p| f(&A, p)).fold(f64::MIN, f64::max);
    let argmax: Vec<_> = pts.iter().filter(|p| f(&A, p) == best).collect();
    assert_eq!(argmax.len(), 1, "objective 1 must have a unique optimum");
    let vals: Vec<(f64, f64)> = pts.iter().map(|p| (f(&A, p), f(&B, p))).collect();
    let front: HashSet<Vec<usize>> = pts
        .iter()
        .zip(&vals)
        .filter(|(_, v)| {
            !vals
                .iter()
                .any(|o| o.0 >= v.0 && o.1 >= v.1 && (o.0 > v.0 || o.1 > v.1))
        })
        .map(|(p, _)| p.clone())
        .collect();
    assert_eq!(front.len(), 12, "the true Pareto front must have 12 points");
    assert!(front.contains(argmax[0]));
    (argmax[0].clone(), front)
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn new_study(objectives: usize, seed: u64, settings: &SamplerSettings) -> Study {
    let dirs = vec![Direction::Maximize; objectives];
    let mut s = Study::with_settings(space(), dirs, seed, settings.clone()).expect("valid study");
    s.enqueue(vec![0; 7]).expect("valid baseline");
    s
}

/// Runs `budget` trials; returns every trial's parameters and the number of evaluations
/// (distinct points: repeats reuse the earlier values).
fn run(
    objectives: usize,
    seed: u64,
    settings: &SamplerSettings,
    budget: usize,
    stop_at: Option<&[usize]>,
) -> (Vec<Vec<usize>>, usize) {
    let mut s = new_study(objectives, seed, settings);
    let mut evaluations = 0;
    let mut asked = Vec::with_capacity(budget);
    for _ in 0..budget {
        let a = s.ask().expect("ask");
        asked.push(a.params.clone());
        if stop_at == Some(a.params.as_slice()) {
            break;
        }
        if a.duplicate_of.is_some() {
            s.tell_duplicate(a.number).expect("duplicate");
        } else {
            evaluations += 1;
            let v = [f(&A, &a.params), f(&B, &a.params)];
            s.tell(a.number, &v[..objectives]).expect("tell");
        }
    }
    (asked, evaluations)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    }
}

fn main() {
    let seeds = env("SEEDS", 20) as u64;
    let budget = env("BUDGET", 1000);
    let reps = env("OVERHEAD_REPS", 5);
    let (optimum, front) = truth();
    let variants = [
        ("assay", SamplerSettings::default()),
        (
            "assay-no-dedup",
            SamplerSettings {
                avoid_duplicates: false,
                ..SamplerSettings::default()
            },
        ),
        (
            "random",
            SamplerSettings {
                n_startup_trials: usize::MAX,
                avoid_duplicates: false,
                ..SamplerSettings::default()
            },
        ),
    ];
    for (name, settings) in &variants {
        let mut overhead = Vec::new();
        for n in [100, 300, 1000] {
            let times: Vec<f64> = (0..reps as u64)
                .map(|r| {
                    let t = Instant::now();
                    std::hint::black_box(run(2, r, settings, n, None));
                    t.elapsed().as_secs_f64() * 1000.0 / n as f64
                })
                .collect();
            overhead.push(format!("\"{n}\": {:.5}", median(times)));
        }
        let mut so = Vec::new();
        let mut mo_found = Vec::new();
        let mut mo_front = Vec::new();
        let mut mo_evals = Vec::new();
        for seed in 0..seeds {
            let (asked, _) = run(1, seed, settings, budget, Some(&optimum));
            so.push(if asked.last() == Some(&optimum) {
                asked.len().to_string()
            } else {
                "null".into()
            });
            let (asked, evals) = run(2, seed, settings, budget, None);
            let pos = asked.iter().position(|p| *p == optimum);
            mo_found.push(pos.map_or("null".into(), |p| (p + 1).to_string()));
            let hit: HashSet<&Vec<usize>> = asked.iter().filter(|p| front.contains(*p)).collect();
            mo_front.push(hit.len().to_string());
            mo_evals.push(evals.to_string());
        }
        println!(
            "{{\"tool\": \"{name}\", \"budget\": {budget}, \"overhead_ms_per_trial\": {{{}}}, \"so_trials_to_optimum\": [{}], \"mo_trials_to_optimum\": [{}], \"mo_front_points\": [{}], \"mo_distinct_points\": [{}]}}",
            overhead.join(", "),
            so.join(", "),
            mo_found.join(", "),
            mo_front.join(", "),
            mo_evals.join(", ")
        );
    }
}
