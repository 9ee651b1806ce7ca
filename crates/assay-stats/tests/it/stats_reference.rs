//! `assay_stats` (also `assay_core::stats`) agrees with the reference libraries on fixed data:
//! statsmodels (Wilson, McNemar), scikit-learn (Cohen's kappa plain and quadratic, mean absolute
//! error, confusion matrix), SciPy (Spearman), to a relative 1e-12; the seeded bootstrap agrees
//! bit for bit with its reimplementation in Python (same generator, same steps) and loosely with
//! `scipy.stats.bootstrap(method="percentile")`. The Python side is `tests/stats_reference.py`.
//!
//! The Python comes from `ASSAY_TEST_PYTHON` (an interpreter), else
//! `$ASSAY_TEST_PYTHON_VENV/bin/python`, else `target/test-venv/bin/python` (made by
//! `scripts/ci-setup`). Without SciPy, statsmodels and scikit-learn there this test fails with
//! that instruction, unless `ASSAY_SKIP_PYTHON_TESTS=1` says to skip it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use assay_stats::{
    BootstrapSettings, Verdict, bootstrap_mean, cohen_kappa, confusion_table, mcnemar,
    mean_absolute_error, paired_bootstrap, quadratic_kappa, spearman, wilson,
};
use serde_json::{Value, json};

/// Agreement with the reference libraries' closed forms: relative error (for a reference
/// below 1e-6 in magnitude, error relative to 1e-6). The differences seen are about 1e-15.
const TOLERANCE: f64 = 1e-12;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> Option<PathBuf> {
    let python = std::env::var_os("ASSAY_TEST_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("ASSAY_TEST_PYTHON_VENV").map(|v| PathBuf::from(v).join("bin/python"))
        })
        .unwrap_or_else(|| workspace().join("target/test-venv/bin/python"));
    let ok = Command::new(&python)
        .args(["-c", "import scipy, statsmodels, sklearn"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    if std::env::var("ASSAY_SKIP_PYTHON_TESTS").as_deref() == Ok("1") {
        eprintln!(
            "skipped: no scipy, statsmodels and scikit-learn at {}",
            python.display()
        );
        return None;
    }
    panic!(
        "scipy, statsmodels or scikit-learn is missing at {}: run scripts/ci-setup (or set ASSAY_TEST_PYTHON_VENV)",
        python.display()
    );
}

/// Runs the reference script on `input` and returns what it printed.
fn reference(python: &Path, input: &Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/stats_reference.py");
    let mut child = Command::new(python)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.to_string().as_bytes()).unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Human scores 0–10 and a judge's, off by −2..2 in a fixed pattern (60 cases, many ties).
fn scores() -> (Vec<i64>, Vec<i64>) {
    let human: Vec<i64> = (0..60).map(|i| (i * 7 + 3) % 11).collect();
    let judge = (0..60)
        .zip(&human)
        .map(|(i, h)| (h + (i * 13) % 5 - 2).clamp(0, 10))
        .collect();
    (human, judge)
}

/// Scores on a scale with unused values in between (only 0, 3, 4, 9, 10).
fn gapped() -> (Vec<i64>, Vec<i64>) {
    let scale = [0, 3, 4, 9, 10];
    let x = (0..30).map(|i| scale[(i * 3) % 5]).collect();
    let y = (0..30).map(|i| scale[(i * 3 + i / 7) % 5]).collect();
    (x, y)
}

fn band(score: i64) -> &'static str {
    match score {
        ..4 => "fail",
        4..7 => "partial",
        _ => "pass",
    }
}

fn floats(v: &[i64]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}

fn zip<A: Clone, B: Clone>(a: &[A], b: &[B]) -> Vec<(A, B)> {
    a.iter().cloned().zip(b.iter().cloned()).collect()
}

/// Continuous paired values, like composite scores of a baseline and a candidate.
fn composite(n: usize, shift: f64, noise: f64) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            let t = i as f64;
            let a = 0.5 + 0.3 * t.sin();
            (a, a + shift + noise * (1.7 * t).cos())
        })
        .collect()
}

/// A bootstrap's data and settings.
struct Resampled<T> {
    data: T,
    resamples: usize,
    seed: u64,
    alpha: f64,
}

impl<T> Resampled<T> {
    fn new(data: T, resamples: usize, seed: u64, alpha: f64) -> Self {
        Resampled {
            data,
            resamples,
            seed,
            alpha,
        }
    }

    fn settings(&self) -> BootstrapSettings {
        BootstrapSettings {
            resamples: self.resamples,
            seed: self.seed,
            alpha: self.alpha,
        }
    }

    fn json(&self, paired: bool) -> Value
    where
        T: serde::Serialize,
    {
        let key = if paired { "pairs" } else { "values" };
        json!({"paired": paired, key: self.data, "resamples": self.resamples, "seed": self.seed, "alpha": self.alpha})
    }
}

struct Checks(Vec<String>);

impl Checks {
    fn close(&mut self, what: &str, ours: f64, theirs: f64) {
        if (ours - theirs).abs() > TOLERANCE * theirs.abs().max(1e-6) {
            self.0
                .push(format!("{what}: assay {ours}, reference {theirs}"));
        }
    }

    fn same(&mut self, what: &str, ours: f64, theirs: f64) {
        if ours != theirs {
            self.0
                .push(format!("{what}: assay {ours}, Python {theirs}"));
        }
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn statistics_agree_with_scipy_statsmodels_and_scikit_learn() {
    let Some(python) = python() else {
        return;
    };
    let (human, judge) = scores();
    let (gx, gy) = gapped();
    let human_bands: Vec<&str> = human.iter().map(|&s| band(s)).collect();
    let judge_bands: Vec<&str> = judge.iter().map(|&s| band(s)).collect();
    let continuous: Vec<(f64, f64)> = (0..45)
        .map(|i| {
            let t = f64::from(i);
            (
                ((i * 37) % 101) as f64 / 10.0,
                (0.3 * t).sin() * 5.0 + f64::from(i % 4),
            )
        })
        .collect();
    let reversed: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i), f64::from(-i * i))).collect();

    let wilson_cases: [(usize, usize, f64); 11] = [
        (0, 10, 0.05),
        (1, 10, 0.05),
        (8, 10, 0.05),
        (10, 10, 0.05),
        (37, 50, 0.05),
        (3, 7, 0.01),
        (450, 1000, 0.1),
        (1, 1, 0.05),
        (17, 40, 0.2),
        (5, 23, 0.001),
        (999_999, 1_000_000, 0.05),
    ];
    let mcnemar_cases: [(usize, usize); 13] = [
        (0, 0),
        (9, 1),
        (1, 9),
        (3, 12),
        (0, 24),
        (10, 14),
        (12, 13),
        (10, 20),
        (30, 12),
        (0, 25),
        (100, 130),
        (400, 460),
        (13, 13),
    ];
    let agreement: Vec<f64> = human_bands
        .iter()
        .zip(&judge_bands)
        .map(|(h, j)| f64::from(u8::from(h == j)))
        .collect();
    let spread: Vec<f64> = (0..15).map(|i| (f64::from(i) * 0.7).cos() + 0.2).collect();
    let paired_cases = [
        Resampled::new(composite(40, 0.05, 0.1), 10_000, 42, 0.05),
        Resampled::new(composite(25, 0.0, 0.1), 5_000, u64::MAX, 0.1),
        Resampled::new(composite(8, -0.2, 0.05), 2_000, 0, 0.05),
    ];
    let sample_cases = [
        Resampled::new(agreement, 10_000, 7, 0.05),
        Resampled::new(spread, 3_000, 123_456_789, 0.01),
    ];

    let kappa_cases: Vec<(Value, Value)> = vec![
        (json!(human), json!(judge)),
        (json!(gx), json!(gy)),
        (json!([0, 1, 2, 3]), json!([3, 2, 1, 0])),
        (json!(human_bands), json!(judge_bands)),
    ];
    let spearman_cases: Vec<Vec<(f64, f64)>> = vec![
        zip(&floats(&human), &floats(&judge)),
        continuous.clone(),
        reversed,
        vec![(1.0, 2.0), (3.0, 1.0)],
    ];
    let mae_cases: Vec<Vec<(f64, f64)>> = vec![zip(&floats(&human), &floats(&judge)), continuous];
    let score_labels: Vec<i64> = (0..=10).collect();

    let pairs_json = |p: &[(f64, f64)]| {
        json!({
            "x": p.iter().map(|q| q.0).collect::<Vec<_>>(),
            "y": p.iter().map(|q| q.1).collect::<Vec<_>>(),
        })
    };
    let input = json!({
        "wilson": wilson_cases.iter().map(|&(k, n, alpha)| json!({"k": k, "n": n, "alpha": alpha})).collect::<Vec<_>>(),
        "mcnemar": mcnemar_cases.iter().map(|&(a, b)| json!({"a_only": a, "b_only": b})).collect::<Vec<_>>(),
        "kappa": kappa_cases.iter().map(|(x, y)| json!({"x": x, "y": y})).collect::<Vec<_>>(),
        "spearman": spearman_cases.iter().map(|p| pairs_json(p)).collect::<Vec<_>>(),
        "mae": mae_cases.iter().map(|p| pairs_json(p)).collect::<Vec<_>>(),
        "confusion": [
            json!({"x": human_bands, "y": judge_bands, "labels": ["fail", "partial", "pass"]}),
            json!({"x": human, "y": judge, "labels": score_labels}),
        ],
        "bootstrap": paired_cases
            .iter()
            .map(|case| case.json(true))
            .chain(sample_cases.iter().map(|case| case.json(false)))
            .collect::<Vec<_>>(),
    });
    let refs = reference(&python, &input);
    let mut checks = Checks(Vec::new());

    for (i, &(k, n, alpha)) in wilson_cases.iter().enumerate() {
        let ours = wilson(k, n, alpha).unwrap();
        let theirs = &refs["wilson"][i];
        checks.close(
            &format!("wilson({k}, {n}, {alpha}) low"),
            ours.low,
            num(&theirs[0]),
        );
        checks.close(
            &format!("wilson({k}, {n}, {alpha}) high"),
            ours.high,
            num(&theirs[1]),
        );
    }

    for (i, &(a, b)) in mcnemar_cases.iter().enumerate() {
        let ours = mcnemar(a, b);
        let theirs = &refs["mcnemar"][i];
        if a == b && a + b >= 25 {
            // The one documented difference: statsmodels' corrected statistic for equal counts
            // is (0 − 1)² / n; ours is clamped at 0, so p = 1.
            checks.close(
                "statsmodels' statistic for equal counts",
                num(&theirs["statistic"]),
                1.0 / (a + b) as f64,
            );
            assert_eq!((ours.statistic, ours.p_value), (0.0, 1.0));
            assert!(num(&theirs["p_value"]) > 0.8);
            continue;
        }
        checks.close(
            &format!("mcnemar({a}, {b}) statistic"),
            ours.statistic,
            num(&theirs["statistic"]),
        );
        checks.close(
            &format!("mcnemar({a}, {b}) p"),
            ours.p_value,
            num(&theirs["p_value"]),
        );
    }

    let ints = |v: &Value| -> Vec<i64> { serde_json::from_value(v.clone()).unwrap() };
    for (i, (x, y)) in kappa_cases.iter().enumerate() {
        let theirs = &refs["kappa"][i];
        if x[0].is_string() {
            let x: Vec<String> = serde_json::from_value(x.clone()).unwrap();
            let y: Vec<String> = serde_json::from_value(y.clone()).unwrap();
            let ours = cohen_kappa(&zip(&x, &y)).unwrap();
            checks.close(&format!("kappa {i}"), ours, num(&theirs["plain"]));
            continue;
        }
        let (x, y) = (ints(x), ints(y));
        checks.close(
            &format!("kappa {i}"),
            cohen_kappa(&zip(&x, &y)).unwrap(),
            num(&theirs["plain"]),
        );
        let q = quadratic_kappa(&zip(&floats(&x), &floats(&y))).unwrap();
        checks.close(
            &format!("quadratic kappa {i}"),
            q,
            num(&theirs["quadratic"]),
        );
    }

    for (i, p) in spearman_cases.iter().enumerate() {
        checks.close(
            &format!("spearman {i}"),
            spearman(p).unwrap(),
            num(&refs["spearman"][i]),
        );
    }
    for (i, p) in mae_cases.iter().enumerate() {
        checks.close(
            &format!("mae {i}"),
            mean_absolute_error(p).unwrap(),
            num(&refs["mae"][i]),
        );
    }

    let bands = confusion_table(
        &zip(&human_bands, &judge_bands),
        &["fail", "partial", "pass"],
        &["fail", "partial", "pass"],
    );
    assert_eq!(json!(bands.counts), refs["confusion"][0]);
    let by_score = confusion_table(&zip(&human, &judge), &score_labels, &score_labels);
    assert_eq!(json!(by_score.counts), refs["confusion"][1]);
    assert_eq!((bands.unlisted, by_score.unlisted), (0, 0));

    let mut intervals = Vec::new();
    for (i, case) in paired_cases.iter().enumerate() {
        let ours = paired_bootstrap(&case.data, case.settings()).unwrap();
        let theirs = &refs["bootstrap"][i];
        checks.same(
            &format!("paired bootstrap {i} p"),
            ours.p_value,
            num(&theirs["p_value"]),
        );
        intervals.push((ours.difference, theirs));
    }
    for (i, case) in sample_cases.iter().enumerate() {
        let ours = bootstrap_mean(&case.data, case.settings()).unwrap();
        intervals.push((ours, &refs["bootstrap"][paired_cases.len() + i]));
    }
    for (i, (ours, theirs)) in intervals.iter().enumerate() {
        checks.same(
            &format!("bootstrap {i} estimate"),
            ours.estimate,
            num(&theirs["estimate"]),
        );
        checks.same(&format!("bootstrap {i} low"), ours.low, num(&theirs["low"]));
        checks.same(
            &format!("bootstrap {i} high"),
            ours.high,
            num(&theirs["high"]),
        );
        // SciPy's percentile bootstrap draws its own resamples (and interpolates between
        // order statistics): its ends must be near ours, within a tenth of the interval.
        let (lo, hi) = (
            num(&theirs["scipy_percentile"][0]),
            num(&theirs["scipy_percentile"][1]),
        );
        let slack = 0.1 * (hi - lo);
        if (ours.low - lo).abs() > slack || (ours.high - hi).abs() > slack {
            checks.0.push(format!(
                "bootstrap {i}: [{}, {}] is far from SciPy's [{lo}, {hi}]",
                ours.low, ours.high
            ));
        }
    }
    // The fixed data says what it was built to say.
    let verdicts: Vec<Verdict> = paired_cases
        .iter()
        .map(|case| {
            paired_bootstrap(&case.data, case.settings())
                .unwrap()
                .verdict
        })
        .collect();
    assert_eq!(
        verdicts,
        [Verdict::Better, Verdict::NotDistinguishable, Verdict::Worse]
    );

    assert!(
        checks.0.is_empty(),
        "disagreements:\n{}",
        checks.0.join("\n")
    );
}
