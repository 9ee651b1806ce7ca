#!/usr/bin/env python3
"""Makes a copy of examples/coparent whose state and pattern banks hold N cases (the example's
cases repeated with new test ids), for measuring `assay run` at scale (bench/scale/run.sh).

Usage: make_project.py SRC DST N [FAIL_EVERY]

With FAIL_EVERY = K, every K-th state case expects a handler it names as not expected (a known
handler that does not fire), so it fails: a run with failing cases among passing ones.
"""
import json
import shutil
import sys
from pathlib import Path

src, dst, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
fail_every = int(sys.argv[4]) if len(sys.argv) > 4 else 0
if dst.exists():
    shutil.rmtree(dst)
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("results", ".assay"))
banks = dst / "test_banks"
# Only the deterministic banks: no embedder, no provider; what is measured is assay itself.
shutil.rmtree(banks / "semantic")
shutil.rmtree(banks / "always")
state = json.loads((banks / "state" / "state_handler_tests.json").read_text())
pattern = json.loads((banks / "pattern" / "pattern_tests.json").read_text())
s_cases, p_cases = state["tests"], pattern["tests"]
half = n // 2
def grow(cases, count, prefix):
    out = []
    for i in range(count):
        c = dict(cases[i % len(cases)])
        c["test_id"] = f"{prefix}-{i:07d}"
        out.append(c)
    return out
state["tests"] = grow(s_cases, half, "S")
failing = 0
if fail_every > 0:
    for i, c in enumerate(state["tests"]):
        if i % fail_every == fail_every - 1 and c.get("not_expected_handlers"):
            c["expected_handlers"] = [c["not_expected_handlers"][0]]
            c["not_expected_handlers"] = c["not_expected_handlers"][1:]
            failing += 1
pattern["tests"] = grow(p_cases, n - half, "P")
(banks / "state" / "state_handler_tests.json").write_text(json.dumps(state))
(banks / "pattern" / "pattern_tests.json").write_text(json.dumps(pattern))
print(f"{dst}: {half} state and {n - half} pattern cases ({failing} made to fail)")
