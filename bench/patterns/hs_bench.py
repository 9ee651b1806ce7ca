#!/usr/bin/env python3
"""Hyperscan anchor for the pattern-matcher benchmark.

Usage: hs_bench.py RULES.json CORPUS.txt [--mode c|py-block|py-concat] [--repeat N]

Compiles the rules with Hyperscan in block mode (see hs_rules.py for how each rule becomes an
expression and which flags it gets), outside the timing, then times matching every message of
the corpus, best of N passes (default 3). Prints one JSON line of the same shape as
``pattern_bench`` (assay) with the same checksum (FNV-1a 64 over each message's sorted entity
ids joined by ``,`` plus ``\\n``), so the answers are compared message by message.

Modes:

- ``c`` (the anchor): libhs called from C (``hs_bench.c``, built here with ``cc -O2 -lhs``;
  Debian: ``apt-get install libhyperscan-dev``), one ``hs_scan`` per message: no Python in the
  timed loop.
- ``c-concat``: the same, but the whole corpus in one buffer, messages separated by NUL bytes
  (see ``py-concat``), one ``hs_scan`` call: no per-call overhead, but every occurrence is
  reported; slower than ``c`` on the large set (82 k against 155 k msgs/s).
- ``py-block``: the PyPI package ``hyperscan`` (libhs bundled in its wheel), one
  ``Database.scan`` per message; Python's call and callback overhead is in the timing.
- ``py-concat``: the same package, all messages joined by NUL bytes and scanned in one call,
  each match mapped back to its message by its end offset (no pattern here can match a NUL
  byte, and ``\\b`` sees NUL as a non-word character like a message's edge). Every occurrence is
  reported (single-match would stop after the first message), so the callback runs more often.
"""

import argparse
import bisect
import json
import os
import subprocess
import sys
import time

import hs_rules

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MASK = 0xFFFFFFFFFFFFFFFF
HERE = os.path.dirname(os.path.abspath(__file__))


def fnv1a(h, data):
    for b in data:
        h ^= b
        h = (h * FNV_PRIME) & MASK
    return h


def checksum_of(answers):
    h, total = FNV_OFFSET, 0
    for ids in answers:
        total += len(ids)
        h = fnv1a(h, (",".join(sorted(ids)) + "\n").encode("utf-8"))
    return f"{h:016x}", total


def read_messages(path):
    with open(path, encoding="utf-8", newline="") as f:
        messages = f.read().split("\n")
    if messages and messages[-1] == "":
        messages.pop()
    return messages


def compile_db(expressions, single_match):
    import hyperscan

    add = hs_rules.SINGLEMATCH if single_match else 0
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(
        expressions=[e.encode("utf-8") for e in expressions],
        ids=list(range(len(expressions))),
        flags=[hs_rules.flags_for(e) | add for e in expressions],
    )
    return db


def run_py_block(expressions, entities, messages, repeat):
    start = time.perf_counter()
    db = compile_db(expressions, single_match=True)
    build = time.perf_counter() - start
    encoded = [m.encode("utf-8") for m in messages]
    scan = db.scan

    def one_pass():
        answers = []
        append = answers.append
        for data in encoded:
            hits = []
            scan(data, match_event_handler=lambda i, f, t, fl, ctx: hits.append(i))
            found = set()
            for i in hits:
                found.update(entities[i])
            append(found)
        return answers

    answers = one_pass()
    best = min(timed(one_pass) for _ in range(repeat))
    return answers, best, build


def run_py_concat(expressions, entities, messages, repeat):
    start = time.perf_counter()
    db = compile_db(expressions, single_match=False)
    build = time.perf_counter() - start
    encoded = [m.encode("utf-8") for m in messages]
    ends, at = [], 0
    for data in encoded:
        at += len(data)
        ends.append(at)  # offset of the NUL after this message
        at += 1
    joined = b"\0".join(encoded)

    def one_pass():
        answers = [None] * len(encoded)
        seen = set()
        add = seen.add
        # (message, expression) pairs: a match ending at `to` lies in the message whose NUL is
        # the first at or after `to`.
        db.scan(joined, match_event_handler=lambda i, f, to, fl, ctx: add((to, i)))
        for to, i in seen:
            m = bisect.bisect_left(ends, to)
            found = answers[m]
            if found is None:
                found = answers[m] = set()
            found.update(entities[i])
        return [a or () for a in answers]

    answers = one_pass()
    best = min(timed(one_pass) for _ in range(repeat))
    return answers, best, build


def timed(f):
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def run_c(args, expressions, entities, out_dir):
    exe = os.path.join(out_dir, "hs_bench")
    src = os.path.join(HERE, "hs_bench.c")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        subprocess.run(["cc", "-O2", "-o", exe, src, "-lhs"], check=True)
    tsv = os.path.join(out_dir, os.path.basename(args.rules) + ".hs.tsv")
    hs_rules.write_tsv(tsv, expressions, entities)
    line = subprocess.run(
        [exe, tsv, args.corpus, "--repeat", str(args.repeat), "--rules-name", args.rules]
        + (["--concat"] if args.mode == "c-concat" else []),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(line)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("rules")
    p.add_argument("corpus")
    p.add_argument("--mode", choices=["c", "c-concat", "py-block", "py-concat"], default="c")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out-dir", default=os.path.join(HERE, "..", "out"))
    args = p.parse_args()

    expressions, entities, (n_crisis, n_groups) = hs_rules.load(args.rules)
    if args.mode in ("c", "c-concat"):
        d = run_c(args, expressions, entities, args.out_dir)
    else:
        messages = read_messages(args.corpus)
        run = run_py_block if args.mode == "py-block" else run_py_concat
        answers, best, build = run(expressions, entities, messages, args.repeat)
        checksum, total = checksum_of(answers)
        import hyperscan

        d = {
            "engine": f"hyperscan-{args.mode}",
            "hyperscan": hyperscan.__version__,
            "rules": args.rules,
            "expressions": len(expressions),
            "messages": len(messages),
            "seconds": best,
            "messages_per_second": len(messages) / best,
            "matched_entity_total": total,
            "checksum": checksum,
            "build_seconds": build,
            "repeat": args.repeat,
        }
    d["crisis_rules"], d["keyword_groups"] = n_crisis, n_groups
    print(json.dumps(d, separators=(",", ":")))


if __name__ == "__main__":
    sys.exit(main())
