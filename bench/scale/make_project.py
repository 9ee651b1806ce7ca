#!/usr/bin/env python3
"""Makes a copy of examples/coparent whose state and pattern banks hold N cases (the example's
cases repeated with new test ids), for measuring `assay run` at scale (bench/scale/run.sh).

Usage: make_project.py SRC DST N
"""
import json
import shutil
import sys
from pathlib import Path

src, dst, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
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
pattern["tests"] = grow(p_cases, n - half, "P")
(banks / "state" / "state_handler_tests.json").write_text(json.dumps(state))
(banks / "pattern" / "pattern_tests.json").write_text(json.dumps(pattern))
print(f"{dst}: {half} state and {n - half} pattern cases")
