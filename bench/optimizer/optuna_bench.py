"""Optuna's TPESampler on the synthetic objectives of crates/assay-optimize/examples/sampler_bench.rs.

Prints one JSON object (same keys as the Rust example). Knobs (environment): SEEDS (20),
BUDGET (1000 trials), OVERHEAD_REPS (3; the 1,000-trial size runs once per rep as well).
"""

import itertools
import json
import os
import time

import optuna
from optuna.samplers import TPESampler

optuna.logging.set_verbosity(optuna.logging.WARNING)

# Keep in step with sampler_bench.rs.
A = [
    [0, 12, 20, 26],
    [0, 2, 4, 1],
    [3, 0, 4, 2],
    [1, 5, 0, 3],
    [2, 2, 6, 3],
    [0, 1, 2, 3],
    [8, 3, 5, 0],
]
B = [
    [30, 24, 14, 0],
    [4, 2, 0, 1],
    [2, 1, 4, 3],
    [3, 6, 2, 0],
    [5, 1, 7, 6],
    [3, 1, 0, 4],
    [6, 4, 0, 2],
]
NAMES = [f"agent{i}" for i in range(7)]


def f(table, p):
    return float(sum(row[c] for row, c in zip(table, p)))


def truth():
    pts = list(itertools.product(range(4), repeat=7))
    best = max(f(A, p) for p in pts)
    argmax = [p for p in pts if f(A, p) == best]
    assert len(argmax) == 1, "objective 1 must have a unique optimum"
    vals = [(f(A, p), f(B, p)) for p in pts]
    # Sweep for the 2-D front: sort by objective 1 descending, keep strict objective-2 records.
    order = sorted(range(len(pts)), key=lambda i: (-vals[i][0], -vals[i][1]))
    front, best2, i = set(), float("-inf"), 0
    while i < len(order):
        j = i
        while j < len(order) and vals[order[j]][0] == vals[order[i]][0]:
            j += 1
        top = vals[order[i]][1]  # the best objective 2 at this objective-1 level
        if top > best2:
            for k in range(i, j):
                if vals[order[k]][1] == top:
                    front.add(pts[order[k]])
            best2 = top
        i = j
    assert len(front) == 12, f"the true Pareto front must have 12 points, got {len(front)}"
    assert argmax[0] in front
    return argmax[0], front


def run(objectives, seed, budget, stop_at=None):
    directions = ["maximize"] * objectives
    study = optuna.create_study(directions=directions, sampler=TPESampler(seed=seed))
    study.enqueue_trial({n: 0 for n in NAMES})
    asked = []
    for _ in range(budget):
        trial = study.ask()
        p = tuple(trial.suggest_categorical(n, [0, 1, 2, 3]) for n in NAMES)
        asked.append(p)
        if stop_at is not None and p == stop_at:
            break
        v = [f(A, p), f(B, p)][:objectives]
        study.tell(trial, v if objectives > 1 else v[0])
    return asked


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main():
    seeds = int(os.environ.get("SEEDS", 20))
    budget = int(os.environ.get("BUDGET", 1000))
    reps = int(os.environ.get("OVERHEAD_REPS", 3))
    optimum, front = truth()
    overhead = {}
    for n in (100, 300, 1000):
        times = []
        for r in range(reps):
            t = time.perf_counter()
            run(2, r, n)
            times.append((time.perf_counter() - t) * 1000 / n)
        overhead[str(n)] = median(times)
    so, mo_found, mo_front, mo_evals = [], [], [], []
    for seed in range(seeds):
        asked = run(1, seed, budget, stop_at=optimum)
        so.append(len(asked) if asked[-1] == optimum else None)
        asked = run(2, seed, budget)
        mo_found.append(asked.index(optimum) + 1 if optimum in asked else None)
        mo_front.append(len({p for p in asked if p in front}))
        mo_evals.append(len(set(asked)))  # distinct points (Optuna also re-evaluates repeats)
    print(json.dumps({
        "tool": f"optuna {optuna.__version__}",
        "budget": budget,
        "overhead_ms_per_trial": overhead,
        "so_trials_to_optimum": so,
        "mo_trials_to_optimum": mo_found,
        "mo_front_points": mo_front,
        "mo_distinct_points": mo_evals,
    }))


if __name__ == "__main__":
    main()
