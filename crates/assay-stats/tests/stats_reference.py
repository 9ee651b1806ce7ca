#!/usr/bin/env python3
"""Reference values for assay_stats (assay_core::stats), from the libraries people check statistics with.

Reads one JSON object on stdin (the fixed data of crates/assay-stats/tests/it/stats_reference.rs)
and writes one JSON object on stdout with, for every input, what these give:

* Wilson: statsmodels.stats.proportion.proportion_confint(method="wilson")
* McNemar: statsmodels.stats.contingency_tables.mcnemar, exact below 25 discordant pairs and
  chi-square with continuity correction from there on, as assay_stats::mcnemar chooses
* Cohen's kappa: sklearn.metrics.cohen_kappa_score, weights=None and weights="quadratic" (the
  latter with labels = every integer from the lowest to the highest score)
* Spearman: scipy.stats.spearmanr
* mean absolute error and the confusion table: sklearn.metrics
* the seeded bootstrap: reimplemented here with the same generator and the same steps as the
  crate docs of assay_stats spell out (so the numbers must be identical), and, as a
  loose sanity check of the interval, scipy.stats.bootstrap(method="percentile") with its own
  generator

Run by the Rust test with the test virtualenv's Python (scripts/ci-setup installs the pinned
scipy, statsmodels and scikit-learn there).
"""

import json
import math
import sys

import numpy as np
from scipy import stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix, mean_absolute_error
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

MASK = (1 << 64) - 1
MCNEMAR_EXACT_BELOW = 25


class SplitMix64:
    """SplitMix64 whose state starts at the seed, as assay_stats::SplitMix64."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next_u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        """The high 64 bits of next_u64() * n."""
        return (self.next_u64() * n) >> 64


def left_sum(values):
    """Left-to-right double additions from 0 (not sum(): Python 3.12 compensates it)."""
    acc = 0.0
    for v in values:
        acc += v
    return acc


def round_half_away(x):
    """Rust's f64::round for x >= 0 (Python's round() rounds halves to even)."""
    f = math.floor(x)
    return int(f) + (1 if x - f >= 0.5 else 0)


def bootstrap(values, resamples, seed, alpha):
    """Estimate, percentile interval and p-value, step by step as the Rust module docs say."""
    n = len(values)
    rng = SplitMix64(seed)
    means = []
    for _ in range(resamples):
        acc = 0.0
        for _ in range(n):
            acc += values[rng.below(n)]
        means.append(acc / n)
    means.sort()
    last = resamples - 1

    def at(q):
        return means[min(last, round_half_away(q * last))]

    below = sum(1 for m in means if m <= 0.0)
    above = sum(1 for m in means if m >= 0.0)
    return {
        "estimate": left_sum(values) / n,
        "low": at(alpha / 2.0),
        "high": at(1.0 - alpha / 2.0),
        "p_value": min(1.0, 2 * min(below, above) / resamples),
    }


def scipy_percentile(values, resamples, seed, alpha):
    res = stats.bootstrap(
        (np.asarray(values),),
        np.mean,
        n_resamples=resamples,
        method="percentile",
        confidence_level=1.0 - alpha,
        rng=np.random.default_rng(seed),
    )
    return [float(res.confidence_interval.low), float(res.confidence_interval.high)]


def main():
    data = json.load(sys.stdin)
    out = {}

    out["wilson"] = [
        [float(x) for x in proportion_confint(c["k"], c["n"], alpha=c["alpha"], method="wilson")]
        for c in data["wilson"]
    ]

    mc = []
    for c in data["mcnemar"]:
        a, b = c["a_only"], c["b_only"]
        r = mcnemar([[0, a], [b, 0]], exact=a + b < MCNEMAR_EXACT_BELOW, correction=True)
        mc.append({"statistic": float(r.statistic), "p_value": float(r.pvalue)})
    out["mcnemar"] = mc

    kappa = []
    for c in data["kappa"]:
        x, y = c["x"], c["y"]
        entry = {"plain": float(cohen_kappa_score(x, y))}
        if all(isinstance(v, int) for v in x + y):
            labels = list(range(min(x + y), max(x + y) + 1))
            entry["quadratic"] = float(
                cohen_kappa_score(x, y, weights="quadratic", labels=labels)
            )
        kappa.append(entry)
    out["kappa"] = kappa

    out["spearman"] = [float(stats.spearmanr(c["x"], c["y"]).statistic) for c in data["spearman"]]
    out["mae"] = [float(mean_absolute_error(c["x"], c["y"])) for c in data["mae"]]
    out["confusion"] = [
        confusion_matrix(c["x"], c["y"], labels=c["labels"]).tolist() for c in data["confusion"]
    ]

    boot = []
    for c in data["bootstrap"]:
        if c["paired"]:
            values = [b - a for a, b in c["pairs"]]
        else:
            values = c["values"]
        r = bootstrap(values, c["resamples"], c["seed"], c["alpha"])
        r["scipy_percentile"] = scipy_percentile(values, c["resamples"], c["seed"], c["alpha"])
        boot.append(r)
    out["bootstrap"] = boot

    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
