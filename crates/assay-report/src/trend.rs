//! The runs over time: each saved run's weighted score and each bank's score, oldest run on
//! the left, as one inline SVG (no script), for the web UI's runs page. Readable from one run
//! (a single point in the middle) to hundreds (lines, with the banks' own points left out).
//! The lines join runs of the whole suite only: a run of part of it (a shard, `--test`,
//! `--topic`, `--changed-since`, a `--banks` subset) or of more (pending drafts) is plotted
//! apart, a hollow point off the line that says why, so it never shows as a dip or a jump.
//!
//! ```
//! use assay_report::trend::{RunKind, TrendMarks, TrendPoint, svg};
//! let run = TrendPoint {
//!     id: "2026-11-25-0915".into(),
//!     timestamp: "2026-11-25T09:15:00Z".into(),
//!     combined: 84.5,
//!     banks: [("semantic".to_owned(), 80.0)].into_iter().collect(),
//!     href: Some("/ui/runs/2026-11-25-0915".into()),
//!     kind: RunKind::Full,
//! };
//! let chart = svg(&[run], &TrendMarks::default());
//! assert!(chart.starts_with("<svg") && chart.contains("weighted 84.5"));
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::common::escape;
use crate::svg::{Plot, Shape, marker};

/// One saved run on the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendPoint {
    /// The run's id (its results file's stamp).
    pub id: String,
    /// When it started (RFC 3339).
    pub timestamp: String,
    /// The weighted score, out of 100.
    pub combined: f64,
    /// Each bank's score that the run has (`semantic`, `state`, `pattern`, `always`).
    pub banks: BTreeMap<String, f64>,
    /// The run's page, when the chart's points link to one.
    pub href: Option<String>,
    /// Whether it ran the whole suite, and so shares the lines.
    pub kind: RunKind,
}

/// How a run stands beside the others on the chart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum RunKind {
    /// A run of the whole suite: on the lines.
    #[default]
    Full,
    /// A run of the whole suite merged from its shards (`assay runs merge`): on the lines, its
    /// tooltip saying so.
    Merged {
        /// How many shards.
        shards: u32,
    },
    /// A run of part of the suite (a shard, a partial run) or of more than it (pending
    /// drafts): its score is not comparable with a whole run's, so it is drawn off the lines,
    /// as a hollow point whose tooltip says why.
    Apart {
        /// Why, in a few words (`partial: --test SEM-01`).
        why: String,
    },
}

impl RunKind {
    fn on_line(&self) -> bool {
        !matches!(self, RunKind::Apart { .. })
    }
}

/// What the chart marks besides the scores.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrendMarks {
    /// The run accepted as the baseline, by id: marked with a dashed vertical line labelled
    /// "accepted". Nothing is marked when no run has this id.
    pub accepted: Option<String>,
}

/// The banks' series: key, shape, colour. The shape tells them apart without colour.
const BANKS: [(&str, Shape, &str); 4] = [
    ("semantic", Shape::Ring, "#0f766e"),
    ("state", Shape::Square, "#b45309"),
    ("pattern", Shape::Diamond, "#7c3aed"),
    ("always", Shape::Cross, "#be185d"),
];

const WEIGHTED: &str = "#1d4ed8";

/// Above this many runs, only the weighted score keeps its points; the banks are lines.
const BANK_POINTS_UP_TO: usize = 60;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 290.0;

/// A timestamp as a tick label: `2026-11-25 09:15` from RFC 3339, else as it is.
fn when(timestamp: &str) -> String {
    match (timestamp.get(..10), timestamp.get(11..16)) {
        (Some(day), Some(time)) if timestamp.as_bytes().get(10) == Some(&b'T') => {
            format!("{day} {time}")
        }
        _ => timestamp.to_owned(),
    }
}

/// A polyline through `points` (pixels), in `colour`, `width` wide.
fn line(out: &mut String, points: &[(f64, f64)], colour: &str, width: f64, class: &str) {
    if points.len() < 2 {
        return;
    }
    let coords: Vec<String> = points
        .iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect();
    let _ = write!(
        out,
        "<polyline class=\"{class}\" points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{width}\" stroke-linejoin=\"round\"/>",
        coords.join(" ")
    );
}

/// The chart of `points`, given oldest first: the weighted score as a thick line with a point
/// per run (each a link to the run's page when it has one, with the run, its time and every
/// score as its tooltip), each bank's score as a thin line (broken where a run of the whole
/// suite did not run the bank), the score axis from 0 to 100, the first and last run's times
/// under the axis. The lines join the runs of the whole suite; a run plotted apart
/// ([`RunKind::Apart`]) is a hollow point off them, in the legend as such.
pub fn svg(points: &[TrendPoint], marks: &TrendMarks) -> String {
    let n = points.len();
    let mut plot = Plot::new(WIDTH, HEIGHT, (-0.5, n.max(1) as f64 - 0.5), (0.0, 100.0));
    plot.top = 40.0;
    plot.bottom = 46.0;
    plot.left = 44.0;
    let label = format!(
        "Weighted score and each bank's score of the last {n} saved run{}, oldest first",
        if n == 1 { "" } else { "s" }
    );
    let mut out = format!(
        "<svg id=\"runs-trend\" role=\"img\" aria-label=\"{}\" width=\"{WIDTH:.0}\" height=\"{HEIGHT:.0}\" viewBox=\"0 0 {WIDTH:.0} {HEIGHT:.0}\" style=\"max-width:100%;height:auto\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"11\" font-family=\"system-ui,sans-serif\"><title>{}</title>",
        escape(&label),
        escape(&label)
    );
    let (x0, x1) = (plot.left, WIDTH - plot.right);
    let (y0, y1) = (plot.top, HEIGHT - plot.bottom);
    let _ = write!(
        out,
        "<rect x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fafbfc\" stroke=\"#c9ced6\"/>",
        x1 - x0,
        y1 - y0
    );
    for v in [0.0, 25.0, 50.0, 75.0, 100.0] {
        let y = plot.py(v);
        let _ = write!(
            out,
            "<line x1=\"{x0:.1}\" y1=\"{y:.1}\" x2=\"{x1:.1}\" y2=\"{y:.1}\" stroke=\"#e3e6ea\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#57606a\" class=\"tick\">{v:.0}</text>",
            x0 - 4.0,
            y + 4.0
        );
    }
    let _ = write!(
        out,
        "<text transform=\"translate(12 {:.1}) rotate(-90)\" text-anchor=\"middle\" fill=\"#57606a\" class=\"axis\">score</text>",
        f64::midpoint(y0, y1)
    );
    // The time axis: the first and the last run's times at the ends (one run: under it).
    let tick_y = y1 + 15.0;
    match points {
        [] => {}
        [only] => {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{tick_y:.1}\" text-anchor=\"middle\" fill=\"#57606a\" class=\"tick\">{}</text>",
                plot.px(0.0),
                escape(&when(&only.timestamp))
            );
        }
        [first, .., last] => {
            let _ = write!(
                out,
                "<text x=\"{x0:.1}\" y=\"{tick_y:.1}\" text-anchor=\"start\" fill=\"#57606a\" class=\"tick\">{}</text><text x=\"{x1:.1}\" y=\"{tick_y:.1}\" text-anchor=\"end\" fill=\"#57606a\" class=\"tick\">{}</text>",
                escape(&when(&first.timestamp)),
                escape(&when(&last.timestamp))
            );
        }
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#57606a\" class=\"axis\">saved runs, oldest → newest ({n})</text>",
        f64::midpoint(x0, x1),
        HEIGHT - 8.0
    );
    if let Some(accepted) = &marks.accepted
        && let Some(i) = points.iter().position(|p| &p.id == accepted)
    {
        let x = plot.px(i as f64);
        let _ = write!(
            out,
            "<g class=\"accepted\"><line x1=\"{x:.1}\" y1=\"{y0:.1}\" x2=\"{x:.1}\" y2=\"{y1:.1}\" stroke=\"#1f7a3a\" stroke-dasharray=\"4 3\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#1f7a3a\">accepted</text></g>",
            y0 - 3.0
        );
    }

    // The legend, above the plot: the weighted score, then the banks any run has.
    let present: Vec<&(&str, Shape, &str)> = BANKS
        .iter()
        .filter(|(key, _, _)| points.iter().any(|p| p.banks.contains_key(*key)))
        .collect();
    let mut lx = x0;
    let ly = 20.0;
    let mut key = |out: &mut String, shape: Shape, colour: &str, text: &str, class: &str| {
        let _ = write!(
            out,
            "<g class=\"key key-{class}\" fill=\"{colour}\" stroke=\"{colour}\">"
        );
        marker(out, shape, lx + 4.0, ly - 4.0, 4.5, "key", text);
        let _ = write!(
            out,
            "</g><text x=\"{:.1}\" y=\"{ly:.1}\" fill=\"#1d2127\" class=\"legend\">{}</text>",
            lx + 13.0,
            escape(text)
        );
        lx += 13.0 + 7.0 * text.len() as f64 + 18.0;
    };
    key(&mut out, Shape::Dot, WEIGHTED, "weighted score", "weighted");
    for (bank, shape, colour) in &present {
        key(&mut out, *shape, colour, bank, bank);
    }
    if points.iter().any(|p| !p.kind.on_line()) {
        key(
            &mut out,
            Shape::Ring,
            WEIGHTED,
            "not a whole run (off the line)",
            "apart",
        );
    }

    // Each bank: a thin line, broken where a run did not run it; points while few.
    let bank_points = n <= BANK_POINTS_UP_TO;
    for (bank, shape, colour) in &present {
        let _ = write!(
            out,
            "<g class=\"series series-{bank}\" fill=\"{colour}\" stroke=\"{colour}\">"
        );
        let mut run: Vec<(f64, f64)> = Vec::new();
        for (i, p) in points.iter().enumerate().filter(|(_, p)| p.kind.on_line()) {
            if let Some(v) = p.banks.get(*bank) {
                run.push((plot.px(i as f64), plot.py(v.clamp(0.0, 100.0))));
            } else {
                line(&mut out, &run, colour, 1.25, "line");
                run.clear();
            }
        }
        line(&mut out, &run, colour, 1.25, "line");
        if bank_points {
            for (i, p) in points.iter().enumerate().filter(|(_, p)| p.kind.on_line()) {
                if let Some(v) = p.banks.get(*bank) {
                    marker(
                        &mut out,
                        *shape,
                        plot.px(i as f64),
                        plot.py(v.clamp(0.0, 100.0)),
                        3.0,
                        "point",
                        &format!("run {} · {bank} {v:.1}", p.id),
                    );
                }
            }
        }
        out.push_str("</g>");
    }

    // The weighted score on top: a thick line and a point per run, linked to the run.
    let _ = write!(
        out,
        "<g class=\"series series-weighted\" fill=\"{WEIGHTED}\" stroke=\"{WEIGHTED}\">"
    );
    let xy: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .map(|(i, p)| (plot.px(i as f64), plot.py(p.combined.clamp(0.0, 100.0))))
        .collect();
    let joined: Vec<(f64, f64)> = points
        .iter()
        .zip(&xy)
        .filter(|(p, _)| p.kind.on_line())
        .map(|(_, xy)| *xy)
        .collect();
    line(&mut out, &joined, WEIGHTED, 2.5, "line");
    let r = if n <= BANK_POINTS_UP_TO { 4.5 } else { 2.5 };
    let point = |out: &mut String, p: &TrendPoint, (x, y): (f64, f64), shape, class: &str| {
        let mut tip = format!(
            "run {} · {} · weighted {:.1}",
            p.id,
            when(&p.timestamp),
            p.combined
        );
        for (bank, v) in &p.banks {
            let _ = write!(tip, " · {bank} {v:.1}");
        }
        match &p.kind {
            RunKind::Full => {}
            RunKind::Merged { shards } => {
                let _ = write!(tip, " · merged from {shards} shards");
            }
            RunKind::Apart { why } => {
                let _ = write!(tip, " · {why}: not comparable with a whole run");
            }
        }
        if let Some(href) = &p.href {
            let _ = write!(out, "<a href=\"{}\">", escape(href));
        }
        marker(out, shape, x, y, r, class, &tip);
        if p.href.is_some() {
            out.push_str("</a>");
        }
    };
    for (p, xy) in points.iter().zip(&xy) {
        match p.kind {
            RunKind::Full => point(&mut out, p, *xy, Shape::Dot, "point"),
            RunKind::Merged { .. } => point(&mut out, p, *xy, Shape::Dot, "point merged"),
            RunKind::Apart { .. } => {}
        }
    }
    out.push_str("</g>");
    // The runs that are not whole runs: hollow, dashed, off the line.
    if points.iter().any(|p| !p.kind.on_line()) {
        let _ = write!(
            out,
            "<g class=\"series series-apart\" fill=\"{WEIGHTED}\" stroke=\"{WEIGHTED}\" stroke-dasharray=\"2 1.5\">"
        );
        for (p, xy) in points.iter().zip(&xy) {
            if !p.kind.on_line() {
                point(&mut out, p, *xy, Shape::Ring, "point apart");
            }
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(i: usize, combined: f64, banks: &[(&str, f64)]) -> TrendPoint {
        TrendPoint {
            id: format!("2026-11-{:02}-0915", i % 28 + 1),
            timestamp: format!("2026-11-{:02}T09:15:00Z", i % 28 + 1),
            combined,
            banks: banks.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
            href: Some(format!("/ui/runs/{i}")),
            kind: RunKind::Full,
        }
    }

    #[test]
    fn one_run_is_one_point_in_the_middle_with_its_time() {
        let chart = svg(
            &[point(0, 81.0, &[("semantic", 75.0)])],
            &TrendMarks::default(),
        );
        assert_eq!(chart.matches("class=\"point\"").count(), 2, "{chart}");
        assert!(chart.contains("2026-11-01 09:15"), "{chart}");
        assert!(!chart.contains("<polyline"), "no line through one point");
        assert!(chart.contains("href=\"/ui/runs/0\""));
        assert!(chart.contains("cx=\"394.0\""), "centred: {chart}");
        assert!(!chart.contains("accepted"));
    }

    #[test]
    fn many_runs_keep_the_weighted_points_and_draw_the_banks_as_lines() {
        let points: Vec<TrendPoint> = (0..200)
            .map(|i| {
                let banks: &[(&str, f64)] = if i % 50 == 7 {
                    &[("semantic", 70.0)]
                } else {
                    &[("semantic", 70.0), ("state", 90.0)]
                };
                point(i, 60.0 + (i % 30) as f64, banks)
            })
            .collect();
        let chart = svg(&points, &TrendMarks::default());
        assert_eq!(chart.matches("class=\"point\"").count(), 200);
        // The state line breaks at each run without it: 4 gaps, 5 pieces; one semantic line
        // and one weighted line.
        assert_eq!(chart.matches("<polyline").count(), 5 + 1 + 1, "{chart}");
        assert!(chart.contains("key-state") && chart.contains("key-semantic"));
        assert!(
            !chart.contains("key-pattern"),
            "banks no run has are not in the legend"
        );
    }

    #[test]
    fn the_accepted_run_is_marked_and_text_is_escaped() {
        let mut a = point(0, 50.0, &[]);
        a.id = "<b>".into();
        let b = point(1, 60.0, &[]);
        let marks = TrendMarks {
            accepted: Some("<b>".into()),
        };
        let chart = svg(&[a, b], &marks);
        assert!(chart.contains("class=\"accepted\""));
        assert!(chart.contains("run &lt;b&gt;") && !chart.contains("<b>"));
    }

    #[test]
    fn a_partial_run_is_plotted_apart_and_a_merged_run_on_the_line() {
        // Three whole runs at 80 and, between them, a --test run at 10 (one failing case) and
        // a merged run: the weighted line joins the three whole runs and the merged one only.
        let mut points: Vec<TrendPoint> = [80.0, 10.0, 80.0, 80.0, 80.0]
            .iter()
            .enumerate()
            .map(|(i, v)| point(i, *v, &[("semantic", *v)]))
            .collect();
        points[1].kind = RunKind::Apart {
            why: "partial: --test SEM-01".into(),
        };
        points[3].kind = RunKind::Merged { shards: 3 };
        let chart = svg(&points, &TrendMarks::default());
        let polyline = |series: &str| {
            let group = &chart[chart.find(&format!("series-{series}\"")).unwrap()..];
            let group = &group[..group.find("</g>").unwrap()];
            let at = group.find("points=\"").unwrap() + 8;
            group[at..at + group[at..].find('"').unwrap()].to_owned()
        };
        let y80 = format!("{:.1}", 40.0 + (290.0 - 46.0 - 40.0) * 0.2);
        for series in ["weighted", "semantic"] {
            let line = polyline(series);
            let ys: Vec<&str> = line
                .split(' ')
                .map(|xy| xy.split(',').nth(1).unwrap())
                .collect();
            assert_eq!(ys, vec![y80.as_str(); 4], "{series}: {line}");
        }
        // The partial run: a hollow point of its own, its tooltip saying why, in the legend.
        let apart = &chart[chart.find("series-apart").expect("an apart series")..];
        assert_eq!(apart.matches("class=\"point apart\"").count(), 1, "{apart}");
        assert!(apart.contains("fill=\"none\""), "hollow: {apart}");
        assert!(
            apart.contains("partial: --test SEM-01: not comparable with a whole run"),
            "{apart}"
        );
        assert!(chart.contains("key-apart") && chart.contains("not a whole run (off the line)"));
        // The merged run is marked, on the line.
        assert_eq!(chart.matches("class=\"point merged\"").count(), 1);
        assert!(chart.contains("merged from 3 shards"));
        // Its bank score is not drawn as a semantic point either.
        assert_eq!(
            chart.matches("semantic 10.0").count(),
            1,
            "only in the partial run's own tooltip"
        );
    }

    #[test]
    fn whole_runs_only_draw_no_apart_series() {
        let chart = svg(
            &[point(0, 70.0, &[]), point(1, 75.0, &[])],
            &TrendMarks::default(),
        );
        assert!(!chart.contains("series-apart") && !chart.contains("key-apart"));
    }
}
