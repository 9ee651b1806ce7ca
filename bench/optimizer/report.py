"""One Markdown table from sampler_bench (JSON lines) and optuna_bench (one JSON line)."""

import json
import sys


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def median_trials(xs, budget):
    """Median with 'not found' counted as beyond the budget."""
    m = median([x if x is not None else budget + 1 for x in xs])
    return f"> {budget}" if m > budget else f"{m:g}"


def main():
    rows = [json.loads(l) for path in sys.argv[1:] for l in open(path) if l.strip()]
    optuna = next(r for r in rows if r["tool"].startswith("optuna"))
    ours = next(r for r in rows if r["tool"] == "assay")
    seeds = len(ours["so_trials_to_optimum"])
    budget = ours["budget"]
    sizes = ["100", "300", "1000"]
    out = []
    out.append(f"| sampler | ms/trial @100 | @300 | @1,000 | 1 objective: trials to the optimum (median; found in) "
               f"| 2 objectives: optimum found in | trials to it (median) | front points found of 12 (median; min) "
               f"| distinct points evaluated (median) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        so = r["so_trials_to_optimum"]
        mo = r["mo_trials_to_optimum"]
        ms = " | ".join(f"{r['overhead_ms_per_trial'][s]:.3f}" for s in sizes)
        out.append(
            f"| {r['tool']} | {ms} | {median_trials(so, budget)}; {sum(x is not None for x in so)}/{seeds} "
            f"| {sum(x is not None for x in mo)}/{seeds} | {median_trials(mo, budget)} "
            f"| {median(r['mo_front_points']):g}; {min(r['mo_front_points'])} "
            f"| {median(r['mo_distinct_points']):g} |"
        )
    ratios = ", ".join(
        f"{s}: {optuna['overhead_ms_per_trial'][s] / ours['overhead_ms_per_trial'][s]:.0f}x" for s in sizes
    )
    out.append("")
    out.append(f"Optuna's time per trial over assay's (goal >= 20x at every size): {ratios}.")
    so_med = median([x if x is not None else budget + 1 for x in ours["so_trials_to_optimum"]])
    mo_all = all(x is not None for x in ours["mo_trials_to_optimum"])
    front_med = median(ours["mo_front_points"])
    fast = all(optuna["overhead_ms_per_trial"][s] >= 20 * ours["overhead_ms_per_trial"][s] for s in sizes)
    out.append(
        f"Goals: overhead {'met' if fast else 'NOT met'}; single objective <= 159 trials "
        f"{'met' if so_med <= 159 else 'NOT met'} ({so_med:g}); two objectives, optimum found "
        f"{'in every seed' if mo_all else 'NOT in every seed'} and >= 10 of 12 front points "
        f"{'met' if front_med >= 10 else 'NOT met'} (median {front_med:g})."
    )
    print("\n".join(out))


if __name__ == "__main__":
    main()
