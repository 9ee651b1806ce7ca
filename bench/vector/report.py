"""Tables and cross-checks for bench/vector/run.sh.

Usage: python report.py RESULTS.jsonl OUT.md

RESULTS.jsonl holds one JSON line per engine run (vector_bench / numpy_bench.py, tagged with
"set", "round" and "engine": assay, assay-thp (the same binary with glibc asked for
transparent huge pages) or numpy). For every data set, each figure is the best over the
rounds. The bandwidth and its bound are the Rust probe's (a sum of every float of the data
array on one core), the best of the assay and assay-thp runs. Prints the Markdown that it
writes to OUT.md; exits 1 when a cross-check fails:

- the two engines' top-15 of the first 3 queries must be the same rows; where they differ,
  every row that one engine has and the other lacks must score within TIE of the other's
  15th score (a tie at float precision, resolved differently by two summation orders);
- each engine's batched search must agree with its single-query search.
"""

import json
import os
import platform
import subprocess
import sys
import time

TIE = 1e-5
GOAL_BOUND = 1.5  # assay single within 1.5x of the bandwidth bound


def best(runs, key):
    values = [r[key] for r in runs if r.get(key) is not None]
    return max(values) if values else None


def huge(runs):
    """Share of the data array in transparent huge pages, over the runs (e.g. "0%", "97%")."""
    values = [r.get("anon_huge_pages_kib") for r in runs]
    if not values or any(v is None for v in values):
        return "-"
    size = runs[0]["rows"] * runs[0]["dim"] * 4 / 1024
    return ", ".join(f"{min(100, 100 * v / size):.0f}%" for v in values)


def fmt(x, digits=1):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def compare(a, b):
    """Compares two engines' top-k of the same queries; returns (ok, note)."""
    notes, ok, identical = [], True, True
    for qi, (ia, sa, ib, sb) in enumerate(zip(a["top_ids"], a["top_scores"], b["top_ids"], b["top_scores"])):
        if ia == ib:
            continue
        identical = False
        if set(ia) == set(ib):
            notes.append(f"query {qi}: same rows, order differs")
            continue
        score_a, score_b = dict(zip(ia, sa)), dict(zip(ib, sb))
        only_a, only_b = set(ia) - set(ib), set(ib) - set(ia)
        ties = all(abs(score_a[r] - sb[-1]) <= TIE for r in only_a) and all(
            abs(score_b[r] - sa[-1]) <= TIE for r in only_b
        )
        if ties:
            notes.append(f"query {qi}: rows {sorted(only_a)} vs {sorted(only_b)} tie at the 15th score")
        else:
            ok = False
            notes.append(f"query {qi}: MISMATCH, assay only {sorted(only_a)}, numpy only {sorted(only_b)}")
    if identical:
        return ok, "identical (same rows, same order)"
    return ok, "; ".join(notes)


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip()
    except OSError:
        rustc = "rustc ?"
    return f"{os.cpu_count()} CPUs ({model}), {platform.system()} {platform.release()}, {rustc}", os.getloadavg()


def main() -> None:
    results_path, out_path = sys.argv[1], sys.argv[2]
    with open(results_path) as f:
        results = [json.loads(line) for line in f if line.strip()]
    sets = list(dict.fromkeys(r["set"] for r in results))

    failed = False
    wall_rows, cpu_rows, eff_rows, checks, goals = [], [], [], [], []
    numpy_info = ""
    for s in sets:
        a = [r for r in results if r["set"] == s and r["engine"] == "assay"]
        t = [r for r in results if r["set"] == s and r["engine"] == "assay-thp"]
        n = [r for r in results if r["set"] == s and r["engine"] == "numpy"]
        if not a or not n:
            print(f"{s}: missing a run", file=sys.stderr)
            failed = True
            continue
        if not numpy_info and n[0].get("blas"):
            blas = n[0]["blas"][0]
            numpy_info = (
                f"numpy {n[0]['numpy']}, {blas.get('internal_api')} {blas.get('version')} "
                f"({blas.get('architecture')} kernels, {blas.get('num_threads')} thread)"
            )
        rows, dim = a[0]["rows"], a[0]["dim"]
        nbytes = rows * dim * 4
        label = f"{rows:,} × {dim} ({nbytes / 1e9:.2f} GB)"

        def line(suffix):
            ns, nb = best(n, "single_qps" + suffix), best(n, "batch_qps" + suffix)
            as_, ab = best(a, "single_qps" + suffix), best(a, "batch_qps" + suffix)
            ts = best(t, "single_qps" + suffix)
            bw = best(a + t, "bandwidth_gbs" + suffix)
            bound = bw * 1e9 / nbytes if bw else None
            pct = 100 * as_ / bound if bound and as_ else None
            tpct = 100 * ts / bound if bound and ts else None
            ratio_s = as_ / ns if as_ and ns else None
            ratio_b = ab / nb if ab and nb else None
            row = (
                f"| {label} | {fmt(ns)} / {fmt(nb)} | {fmt(as_)} / {fmt(ab)} | {fmt(ratio_s, 2)}× | "
                f"{fmt(ratio_b, 2)}× | {fmt(bw, 2)} | {fmt(bound)} | {fmt(pct, 0)}% | "
                f"{fmt(ts)} ({fmt(tpct, 0)}%) |"
            )
            eff = (
                f"| {label} | {fmt(best(n, 'single_qps' + suffix) and best(n, 'single_qps' + suffix) * nbytes / 1e9, 2)} | "
                f"{fmt(as_ and as_ * nbytes / 1e9, 2)} | {fmt(ts and ts * nbytes / 1e9, 2)} | "
                f"{fmt(best(a, 'bandwidth_gbs' + suffix), 2)} | {fmt(best(t, 'bandwidth_gbs' + suffix), 2)} | "
                f"{fmt(best(n, 'bandwidth_gbs' + suffix), 2)} | {huge(a)} / {huge(t)} / {huge(n)} |"
            )
            return row, ratio_s, pct, tpct, eff

        row, ratio_s, pct, tpct, eff = line("")
        wall_rows.append(row)
        eff_rows.append(eff)
        cpu_rows.append(line("_cpu")[0])

        for r in a + t:
            if not r["batch_matches_single"]:
                failed = True
                checks.append(f"- {s} round {r['round']}: {r['engine']} search_batch differs from search")
        for r in n:
            if not r["batch_matches_single"]:
                failed = True
                checks.append(f"- {s} round {r['round']}: numpy batched top-15 differs from per-query")
        for ra in a + t:
            for rn in n:
                if ra["round"] != rn["round"]:
                    continue
                ok, note = compare(ra, rn)
                failed |= not ok
                checks.append(f"- {label}, round {ra['round']}, {ra['engine']} vs numpy: top-15 of queries 0-2 {note}")
        thp_note = f"; with huge pages (assay-thp) {fmt(tpct, 0)}%" if tpct else ""
        goals.append(
            f"- {label}: assay single / numpy single = {fmt(ratio_s, 2)}× "
            f"({'met' if ratio_s and ratio_s >= 1 else 'missed'}); assay single = {fmt(pct, 0)}% of the "
            f"bandwidth bound ({'met' if pct and pct >= 100 / GOAL_BOUND else 'missed'}, goal ≥ {100 / GOAL_BOUND:.0f}%){thp_note}"
        )

    header = (
        "| data set | numpy q/s (single / batched) | assay q/s (single / batched) | ratio single | "
        "ratio batched | bandwidth GB/s | bandwidth bound q/s | assay single % of bound | "
        "assay-thp single q/s (% of bound) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    desc, load = machine()
    rounds = max(r["round"] for r in results)
    repeat = results[0]["repeat"]
    md = [
        "# Vector search: assay FlatIndex vs numpy (one thread)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M')}, {desc}; {numpy_info}. "
        f"100 queries, top-15, best of {repeat} passes × {rounds} round(s); load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.",
        "",
        "Queries/s from wall-clock time. Ratios are assay / numpy. The bandwidth is the Rust probe's "
        "(sum of the data array on one core, best of the assay and assay-thp runs); bound = bandwidth / "
        "data size (one pass per query). assay-thp is the same binary run with "
        "GLIBC_TUNABLES=glibc.malloc.hugetlb=1 (transparent huge pages for the data, as numpy asks for).",
        "",
        header,
        *wall_rows,
        "",
        "The same from each thread's CPU time (leaves out time spent waiting for a core on a busy machine):",
        "",
        header,
        *cpu_rows,
        "",
        "Read rates in GB/s, wall clock: single-query scans (queries/s × data size) and the sum probes "
        "(assay, assay-thp: the Rust probe; numpy: `X.sum()`):",
        "",
        "| data set | numpy single | assay single | assay-thp single | probe assay | probe assay-thp | numpy sum | "
        "in huge pages: assay / assay-thp / numpy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *eff_rows,
        "",
        "Cross-checks:",
        "",
        *checks,
        "",
        "Goals (≥ numpy on one core; within 1.5× of the bandwidth bound), wall-clock figures:",
        "",
        *goals,
        "",
    ]
    text = "\n".join(md)
    with open(out_path, "w") as f:
        f.write(text)
    print(text)
    if failed:
        print("vector bench: a cross-check failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
