//! Small helpers for the inline SVG charts of the experiment and simulation reports: a plot
//! area with linear scales, axes with their range written out, and the marker shapes that tell
//! series apart without colour (circle, ring, square, diamond, cross).

use std::fmt::Write as _;

use crate::common::escape;

/// A rectangle of `width × height` pixels with margins, mapping data ranges onto it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plot {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub x: (f64, f64),
    pub y: (f64, f64),
}

/// A range that is never empty: a single value gets ±0.5 (or ±5 % of itself) around it.
pub(crate) fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return (0.0, 1.0);
    }
    if (hi - lo).abs() < 1e-12 {
        let pad = (lo.abs() * 0.05).max(0.5);
        return (lo - pad, hi + pad);
    }
    let pad = (hi - lo) * 0.06;
    (lo - pad, hi + pad)
}

/// [`range`], but when every value is a whole number (a count) the ends are whole numbers too,
/// one step outside the data (never below 0 for counts that are not), so the axis labels read
/// as counts.
pub(crate) fn range_of(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let finite: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    let whole = !finite.is_empty() && finite.iter().all(|v| (v - v.round()).abs() < 1e-9);
    if !whole {
        return range(finite.into_iter());
    }
    let lo = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let low = if lo >= 0.0 {
        (lo - 1.0).max(0.0)
    } else {
        lo - 1.0
    };
    (low, hi + 1.0)
}

/// A number for an axis label: integers as integers, else three significant decimals.
pub(crate) fn num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 && v.abs() < 1e12 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

impl Plot {
    pub(crate) fn new(width: f64, height: f64, x: (f64, f64), y: (f64, f64)) -> Plot {
        Plot {
            width,
            height,
            left: 58.0,
            right: 16.0,
            top: 14.0,
            bottom: 40.0,
            x,
            y,
        }
    }

    pub(crate) fn px(&self, v: f64) -> f64 {
        let span = (self.x.1 - self.x.0).max(1e-12);
        self.left + (v - self.x.0) / span * (self.width - self.left - self.right)
    }

    pub(crate) fn py(&self, v: f64) -> f64 {
        let span = (self.y.1 - self.y.0).max(1e-12);
        self.height - self.bottom - (v - self.y.0) / span * (self.height - self.top - self.bottom)
    }

    /// Opens the `<svg>` with an accessible name, and draws the axes with their labels and
    /// the ends of each range as text.
    pub(crate) fn open(
        &self,
        out: &mut String,
        id: &str,
        label: &str,
        x_label: &str,
        y_label: &str,
    ) {
        let (w, h) = (self.width, self.height);
        let _ = write!(
            out,
            "<svg id=\"{}\" role=\"img\" aria-label=\"{}\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" xmlns=\"http://www.w3.org/2000/svg\"><title>{}</title>",
            escape(id),
            escape(label),
            escape(label)
        );
        let (x0, x1) = (self.left, w - self.right);
        let (y0, y1) = (self.top, h - self.bottom);
        let _ = write!(
            out,
            "<rect x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fafbfc\" stroke=\"#c9ced6\"/>",
            x1 - x0,
            y1 - y0
        );
        for (v, anchor) in [(self.x.0, "start"), (self.x.1, "end")] {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\" class=\"tick\">{}</text>",
                self.px(v),
                y1 + 14.0,
                num(v)
            );
        }
        for v in [self.y.0, self.y.1] {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" class=\"tick\">{}</text>",
                x0 - 4.0,
                self.py(v) + 4.0,
                num(v)
            );
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"axis\">{}</text><text transform=\"translate(12 {:.1}) rotate(-90)\" text-anchor=\"middle\" class=\"axis\">{}</text>",
            f64::midpoint(x0, x1),
            h - 6.0,
            escape(x_label),
            f64::midpoint(y0, y1),
            escape(y_label)
        );
    }
}

/// A marker's shape: the series it belongs to is told by its shape as well as its colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A filled circle.
    Dot,
    /// An empty circle.
    Ring,
    /// A filled square.
    Square,
    /// A filled diamond.
    Diamond,
    /// An ×.
    Cross,
}

/// One marker at `(x, y)` with class `class`, radius `r` and a tooltip.
pub(crate) fn marker(
    out: &mut String,
    shape: Shape,
    x: f64,
    y: f64,
    r: f64,
    class: &str,
    tip: &str,
) {
    let tip = escape(tip);
    match shape {
        Shape::Dot => {
            let _ = write!(
                out,
                "<circle class=\"{class}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\"><title>{tip}</title></circle>"
            );
        }
        Shape::Ring => {
            let _ = write!(
                out,
                "<circle class=\"{class}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"none\" stroke-width=\"1.5\"><title>{tip}</title></circle>"
            );
        }
        Shape::Square => {
            let _ = write!(
                out,
                "<rect class=\"{class}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"><title>{tip}</title></rect>",
                x - r,
                y - r,
                2.0 * r,
                2.0 * r
            );
        }
        Shape::Diamond => {
            let _ = write!(
                out,
                "<path class=\"{class}\" d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\"><title>{tip}</title></path>",
                y - r * 1.3,
                x + r * 1.3,
                y + r * 1.3,
                x - r * 1.3
            );
        }
        Shape::Cross => {
            let _ = write!(
                out,
                "<path class=\"{class}\" d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\" stroke-width=\"1.5\"><title>{tip}</title></path>",
                x - r,
                y - r,
                x + r,
                y + r,
                x - r,
                y + r,
                x + r,
                y - r
            );
        }
    }
}

/// A legend entry: the marker and its text, at `(x, y)`.
pub(crate) fn legend(out: &mut String, shape: Shape, x: f64, y: f64, class: &str, text: &str) {
    // `key key-<class>`, not `<class>`: a legend's mark is not one of the chart's points.
    marker(
        out,
        shape,
        x,
        y - 4.0,
        4.5,
        &format!("key key-{class}"),
        text,
    );
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{y:.1}\" class=\"legend\">{}</text>",
        x + 9.0,
        escape(text)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_whole_number_ranges() {
        assert_eq!(range_of([0.0, 8.0].into_iter()), (0.0, 9.0));
        assert_eq!(range_of([3.0, 3.0].into_iter()), (2.0, 4.0));
        let (lo, hi) = range_of([0.2, 0.9].into_iter());
        assert!(lo < 0.2 && hi > 0.9 && lo.fract() != 0.0);
    }

    #[test]
    fn ranges_and_scales() {
        assert_eq!(range([2.0, 2.0].into_iter()), (1.5, 2.5));
        assert_eq!(range(std::iter::empty()), (0.0, 1.0));
        let (lo, hi) = range([0.0, 10.0].into_iter());
        assert!(lo < 0.0 && hi > 10.0);
        let p = Plot::new(200.0, 100.0, (0.0, 10.0), (0.0, 1.0));
        assert!((p.px(0.0) - p.left).abs() < 1e-9);
        assert!((p.px(10.0) - (200.0 - p.right)).abs() < 1e-9);
        assert!(p.py(1.0) < p.py(0.0), "up is larger");
        assert_eq!(num(3.0), "3");
        assert_eq!(num(0.8333), "0.833");
    }
}
