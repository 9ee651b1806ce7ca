//! What the report says beside the numbers: how a tie for the best trial was broken, and the
//! cases where the correctness rule and the grader disagree.

use std::collections::BTreeMap;

use assay_core::experiment::{CaseResult, ExperimentReport, TrialOutcome, TrialRecord};

/// How the best trial was chosen when other completed trials (with other prompts) have its
/// value of the first objective: which rule broke the tie.
pub fn tie_note(
    trials: &[TrialRecord],
    directions: &[String],
    best: Option<usize>,
) -> Option<String> {
    let best = trials.iter().find(|t| Some(t.number) == best)?;
    let first = *best.values.first()?;
    let tied: Vec<&TrialRecord> = trials
        .iter()
        .filter(|t| {
            t.outcome == TrialOutcome::Complete
                && t.number != best.number
                && t.values.first().is_some_and(|v| (v - first).abs() < 1e-12)
        })
        .collect();
    if tied.is_empty() {
        return None;
    }
    let name = |i: usize| {
        directions
            .get(i)
            .map_or("the objective", |d| {
                d.split_whitespace().last().unwrap_or(d)
            })
            .to_owned()
    };
    // A few trial numbers, then how many more: a large study can tie dozens of trials.
    let list = |n: &[usize]| {
        let shown: Vec<String> = n.iter().take(5).map(ToString::to_string).collect();
        match n.len().saturating_sub(5) {
            0 => shown.join(", "),
            more => format!("{} and {more} more", shown.join(", ")),
        }
    };
    let tied_numbers: Vec<usize> = tied.iter().map(|t| t.number).collect();
    let same_everywhere: Vec<usize> = tied
        .iter()
        .filter(|t| {
            t.values.len() == best.values.len()
                && t.values
                    .iter()
                    .zip(&best.values)
                    .all(|(a, b)| (a - b).abs() < 1e-12)
        })
        .map(|t| t.number)
        .collect();
    let mut note = format!(
        "trial {} ties with trial{} {} on {} ({}); ",
        best.number,
        if tied_numbers.len() == 1 { "" } else { "s" },
        list(&tied_numbers),
        name(0),
        format_value(first)
    );
    if same_everywhere.len() == tied.len() {
        note.push_str(&format!(
            "they tie on every objective, so the earliest trial ({}) is the best",
            best.number
        ));
    } else {
        let rest: Vec<String> = (1..directions.len()).map(name).collect();
        note.push_str(&format!(
            "the tie is broken by {}, then by the earliest trial",
            rest.join(", then ")
        ));
        if !same_everywhere.is_empty() {
            note.push_str(&format!(
                " (trial{} {} tie{} on every objective)",
                if same_everywhere.len() == 1 { "" } else { "s" },
                list(&same_everywhere),
                if same_everywhere.len() == 1 { "s" } else { "" }
            ));
        }
    }
    Some(note)
}

fn format_value(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// Where the correctness rule and the grader disagree: the baseline, every trial, the
/// evaluation steps; one entry per distinct answer to a case (the first step that gave it, and
/// how many others did too).
pub(super) fn all_disagreements(
    report: &ExperimentReport,
) -> Vec<assay_core::experiment::Disagreement> {
    use assay_core::experiment::disagreements;
    let mut steps: Vec<(&str, String, &[CaseResult])> = vec![(
        "optimization",
        "baseline".to_owned(),
        &report.baseline.cases,
    )];
    for t in report
        .trials
        .iter()
        .filter(|t| t.outcome != TrialOutcome::Duplicate)
    {
        steps.push(("optimization", format!("trial {}", t.number), &t.cases));
    }
    for step in [&report.evaluation, &report.evaluation_baseline]
        .into_iter()
        .flatten()
    {
        steps.push(("evaluation", step.step.clone(), &step.cases));
    }
    let mut out: Vec<assay_core::experiment::Disagreement> = Vec::new();
    let mut seen: BTreeMap<(&str, usize, String), usize> = BTreeMap::new();
    for (set, step, cases) in steps {
        for d in disagreements(&step, cases) {
            if let Some(&i) = seen.get(&(set, d.line, d.output.clone())) {
                out[i].repeats += 1;
            } else {
                seen.insert((set, d.line, d.output.clone()), out.len());
                out.push(d);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(number: usize, values: [f64; 2]) -> TrialRecord {
        TrialRecord {
            number,
            params: BTreeMap::new(),
            outcome: TrialOutcome::Complete,
            values: values.to_vec(),
            duplicate_of: None,
            metrics: None,
            cases: Vec::new(),
            note: None,
            origin: "tpe".into(),
            duration_s: 0.0,
            worker: None,
            retried: Vec::new(),
        }
    }

    #[test]
    fn a_tie_names_a_few_trials_and_the_rule_that_broke_it() {
        let directions = [
            "maximize factually_correct_count".to_owned(),
            "maximize average_composite_score".to_owned(),
        ];
        let trials = vec![
            trial(0, [3.0, 0.5]),
            trial(1, [3.0, 0.9]),
            trial(2, [2.0, 1.0]),
        ];
        let note = tie_note(&trials, &directions, Some(1)).unwrap();
        assert_eq!(
            note,
            "trial 1 ties with trial 0 on factually_correct_count (3); the tie is broken by average_composite_score, then by the earliest trial"
        );
        assert_eq!(tie_note(&trials, &directions, Some(2)), None);
        let many: Vec<TrialRecord> = (0..12).map(|n| trial(n, [0.0, 0.2])).collect();
        let note = tie_note(&many, &directions, Some(0)).unwrap();
        assert!(
            note.starts_with(
                "trial 0 ties with trials 1, 2, 3, 4, 5 and 6 more on factually_correct_count (0)"
            ),
            "{note}"
        );
        assert!(
            note.ends_with("the earliest trial (0) is the best"),
            "{note}"
        );
    }
}
