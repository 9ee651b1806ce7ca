#!/usr/bin/env python3
"""Recomputes a RunLog's IR metrics with trec_eval (pytrec_eval) and compares them.

Usage: ir_check.py RUNLOG.json [--tolerance 1e-9]

For every semantic case the ranked list is rebuilt from the RunLog alone (the selection in
order, then the other candidates in candidate order, duplicates once, 15 at most), the
judgements from the resolved expectations (primary 2, secondary 1), and trec_eval's
recall_3/6/15, recip_rank and ndcg_cut_3/6/15 are compared with the case's `ir` field, then
their means with the run's `semantic.ir` and each topic's `semantic.topic_ir`. Prints a JSON
summary; exits 1 on any difference above the tolerance, or when nothing was compared.
"""
import argparse
import json
import sys

import pytrec_eval

LIST_LEN = 15
MEASURES = {
    "recall_at_3": "recall_3",
    "recall_at_6": "recall_6",
    "recall_at_15": "recall_15",
    "mrr": "recip_rank",
    "ndcg_at_3": "ndcg_cut_3",
    "ndcg_at_6": "ndcg_cut_6",
    "ndcg_at_15": "ndcg_cut_15",
}


def ranked(case):
    out = []
    for doc in case["selections"] + [c["entity_id"] for c in case["candidates"]]:
        if len(out) == LIST_LEN:
            break
        if doc not in out:
            out.append(doc)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("runlog")
    ap.add_argument("--tolerance", type=float, default=1e-9)
    args = ap.parse_args()
    with open(args.runlog, encoding="utf-8") as f:
        log = json.load(f)
    sem = log["semantic"]
    qrels, run, cases = {}, {}, {}
    problems = []
    for case in sem["results"]:
        if case.get("error") is not None:
            if case.get("ir") is not None:
                problems.append(f"{case['test_id']}: errored case has metrics")
            continue
        exp = case["expectations"]
        judged = {d: 1 for d in exp.get("expected_secondary", [])}
        judged.update({d: 2 for d in exp.get("expected_primary", [])})
        if not judged:
            if case.get("ir") is not None:
                problems.append(f"{case['test_id']}: metrics without relevant entities")
            continue
        if case.get("ir") is None:
            problems.append(f"{case['test_id']}: no metrics")
            continue
        qid = case["test_id"]
        qrels[qid] = judged
        # Distinct descending scores: the order is the list's, with no ties to break.
        run[qid] = {d: float(LIST_LEN - i) for i, d in enumerate(ranked(case))}
        cases[qid] = case
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "recall.3,6,15", "ndcg_cut.3,6,15"})
    got = evaluator.evaluate(run)
    worst = 0.0
    per_case = {}
    for qid, case in cases.items():
        ref = got.get(qid, {})
        per_case[qid] = {}
        for ours, theirs in MEASURES.items():
            value = ref.get(theirs, 0.0)  # trec_eval leaves out a query with an empty run
            per_case[qid][ours] = value
            diff = abs(case["ir"][ours] - value)
            worst = max(worst, diff)
            if diff > args.tolerance:
                problems.append(f"{qid} {ours}: assay {case['ir'][ours]!r}, trec_eval {value!r}")

    def means(ids):
        return {m: sum(per_case[q][m] for q in ids) / len(ids) for m in MEASURES}

    groups = [("run", list(cases), sem.get("ir"))]
    topics = {}
    for qid, case in cases.items():
        for t in case["topics"]:
            topics.setdefault(t, []).append(qid)
    for t, ids in sorted(topics.items()):
        groups.append((f"topic {t}", ids, sem.get("topic_ir", {}).get(t)))
    for name, ids, theirs in groups:
        if theirs is None:
            problems.append(f"{name}: no aggregate in the RunLog")
            continue
        if theirs["cases"] != len(ids):
            problems.append(f"{name}: {theirs['cases']} cases in the RunLog, {len(ids)} here")
        for m, v in means(ids).items():
            diff = abs(theirs[m] - v)
            worst = max(worst, diff)
            if diff > args.tolerance:
                problems.append(f"{name} {m}: assay {theirs[m]!r}, trec_eval {v!r}")
    if not cases:
        problems.append("no case with metrics to compare")
    print(json.dumps({
        "cases": len(cases),
        "topics": len(topics),
        "max_abs_diff": worst,
        "run": means(list(cases)) if cases else None,
        "problems": problems,
    }, indent=2))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
