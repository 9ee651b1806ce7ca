"""Table and cross-check for bench/embed/run.sh.

Usage: python report.py RESULTS.jsonl ASSAY_FIRST3.json OUT.md

RESULTS.jsonl: one JSON line per run (embed_bench, tagged engine "assay"; st_bench.py,
engine "sentence-transformers"), with "threads" and "round". For each thread count the best
round of each engine is reported, and the ratio of the medians over the rounds beside the
ratio of the bests (on a shared machine one quiet round can decide a best). ASSAY_FIRST3.json is `assay embed --json` on the first 3
sentences; each must be within cosine MIN_COSINE of sentence-transformers' embedding of the
same sentence (every round's). Prints the Markdown it writes to OUT.md; exits 1 when the
cross-check fails.
"""

import json
import math
import os
import statistics
import sys
import time

MIN_COSINE = 0.999


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb)


def main() -> None:
    results_path, first_path, out_path = sys.argv[1:4]
    with open(results_path) as f:
        results = [json.loads(line) for line in f if line.strip()]
    with open(first_path) as f:
        assay_first = json.load(f)["embeddings"]

    st = [r for r in results if r["engine"] == "sentence-transformers"]
    rust = [r for r in results if r["engine"] == "assay"]
    threads = sorted({r["threads"] for r in results})
    rows = []
    for t in threads:
        s = max((r["sentences_per_second"] for r in st if r["threads"] == t), default=None)
        a = max((r["sentences_per_second"] for r in rust if r["threads"] == t), default=None)
        ss = ", ".join(f"{r['sentences_per_second']:.1f}" for r in st if r["threads"] == t)
        aa = ", ".join(f"{r['sentences_per_second']:.1f}" for r in rust if r["threads"] == t)
        ratio = f"{a / s:.2f}×" if a and s else "-"
        sm = [r["sentences_per_second"] for r in st if r["threads"] == t]
        am = [r["sentences_per_second"] for r in rust if r["threads"] == t]
        median = (
            f"{statistics.median(am) / statistics.median(sm):.2f}×" if sm and am else "-"
        )
        rows.append(f"| {t} | {s:,.1f} ({ss}) | {a:,.1f} ({aa}) | {ratio} | {median} |")

    failed = False
    checks = []
    worst = 1.0
    for r in st:
        for i, (va, vs) in enumerate(zip(assay_first, r["first"])):
            c = cosine(va, vs)
            worst = min(worst, c)
            if c < MIN_COSINE:
                failed = True
                checks.append(f"- sentence {i}, {r['threads']} thread(s), round {r['round']}: cosine {c:.6f} < {MIN_COSINE}")
    checks.insert(
        0,
        f"- first {len(assay_first)} sentences, `assay embed` vs sentence-transformers (every run): "
        f"lowest cosine {worst:.6f} ({'ok' if not failed else 'FAILED'}, need ≥ {MIN_COSINE})",
    )

    ref = st[0] if st else {}
    a0 = rust[0] if rust else {}
    md = [
        "# MiniLM embedding throughput: assay (local embedder) vs sentence-transformers (PyTorch CPU)",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs; {ref.get('sentences')} sentences "
        f"({ref.get('tokens')} tokens), batch {ref.get('batch_size')}; torch {ref.get('versions', {}).get('torch')}, "
        f"sentence-transformers {ref.get('versions', {}).get('sentence_transformers')}, "
        f"transformers {ref.get('versions', {}).get('transformers')}; assay embedder {a0.get('embedder')}. "
        f"Best of {max((r['round'] for r in results), default=0)} round(s) (each round's figure in brackets); "
        f"load average at the end {os.getloadavg()[0]:.1f}.",
        "",
        "| threads | sentence-transformers sentences/s | assay sentences/s | ratio (assay / s-t) | ratio of the medians |",
        "|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Padding (tokens in the padded batches, {ref.get('tokens')} real ones): sentence-transformers sorts "
        f"texts by token count before batching: {ref.get('padded_tokens_sorted')} "
        f"(sorting by byte length would give {ref.get('padded_tokens_bytes_sorted', 'n/a')}, input order "
        f"{ref.get('padded_tokens_input_order')}); assay's local embedder also batches by token count but runs each "
        f"text at its own length (no padding): {ref.get('tokens')}.",
        "",
        "Cross-check:",
        "",
        *checks,
        "",
    ]
    text = "\n".join(md)
    with open(out_path, "w") as f:
        f.write(text)
    print(text)
    if failed:
        print("embed bench: the embeddings differ", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
