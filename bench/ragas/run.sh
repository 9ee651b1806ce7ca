#!/usr/bin/env bash
# assay's grounded-answer metrics against Ragas 0.2.15 on the same rows, both driven by one
# scripted judge table (bench/ragas/README.md).
#
# Usage: [RAGAS_PYTHON=/path/to/python] [NO_BUILD=1] bench/ragas/run.sh [ROWS.json]
#   RAGAS_PYTHON  a Python with ragas 0.2.15 installed; by default target/ragas-venv, created
#                 (with pip, from PyPI) when missing.
# Writes bench/out/ragas/{assay,ragas}.json and ragas.md, prints the table, and exits 1 when a
# score differs (|assay - ragas| > 1e-9) other than by a documented difference of definition.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROWS="${1:-bench/ragas/rows.json}"
OUT=bench/out/ragas
mkdir -p "$OUT"

# Ragas 0.2.15 imports `langchain_community.chat_models.vertexai`, which langchain-community
# 0.4 removed: the 0.3 line of langchain is pinned with it.
RAGAS_REQUIREMENTS=(ragas==0.2.15 "langchain<0.4" "langchain-core<0.4" "langchain-community<0.4"
  "langchain-openai<0.4")
if [[ -z "${RAGAS_PYTHON:-}" ]]; then
  VENV=target/ragas-venv
  if ! "$VENV/bin/python" -c 'import ragas' 2>/dev/null; then
    echo "installing ragas 0.2.15 into $VENV (once)" >&2
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q "${RAGAS_REQUIREMENTS[@]}" >&2
  fi
  RAGAS_PYTHON="$VENV/bin/python"
fi
version="$("$RAGAS_PYTHON" -c 'import ragas; print(ragas.__version__)')"
if [[ "$version" != 0.2.15 ]]; then
  echo "warning: ragas $version, not 0.2.15: its prompts may have changed" >&2
fi

[[ "${NO_BUILD:-0}" == 1 ]] || cargo build -q -p assay-cli --example answer_metrics >&2
target/debug/examples/answer_metrics "$ROWS" >"$OUT/assay.json"
RAGAS_DO_NOT_TRACK=true "$RAGAS_PYTHON" bench/ragas/ragas_side.py "$ROWS" >"$OUT/ragas.json"

python3 - "$ROWS" "$OUT" <<'PY'
import json, sys

rows_path, out = sys.argv[1], sys.argv[2]
rows = {r["id"]: r for r in json.load(open(rows_path))["rows"]}
assay = {r["id"]: r for r in json.load(open(f"{out}/assay.json"))["rows"]}
ragas = {r["id"]: r for r in json.load(open(f"{out}/ragas.json"))["rows"]}
METRICS = ["faithfulness", "answer_relevancy", "context_precision", "context_recall"]
TOLERANCE = 1e-9
# Where assay says "does not apply" and Ragas gives a number, by definition
# (docs/answers.md, "How each metric is computed"): with no context Ragas judges against an
# empty text and scores 0.
BY_DEFINITION = {"no context to judge against": "Ragas scores a case with no context 0"}

def show(x):
    return "n/a" if x is None else f"{x:.4f}".rstrip("0").rstrip(".") if x not in (0, 1) else str(int(x))

lines = ["| row | " + " | ".join(METRICS) + " |", "|---" * (len(METRICS) + 1) + "|"]
notes, failures = [], []
counts = {"equal": 0, "both n/a": 0, "by definition": 0, "DIFFER": 0}
for rid, row in rows.items():
    a, r = assay.get(rid), ragas.get(rid)
    if a is None or r is None or "error" in a:
        failures.append(f"{rid}: " + (a or {}).get("error", "missing on one side"))
        continue
    cells = []
    for m in METRICS:
        am, rm = a["metrics"][m], r["metrics"][m]
        x, y = am["score"], rm["score"]
        if x is not None and y is not None and abs(x - y) <= TOLERANCE:
            kind, cell = "equal", f"{show(x)} = {show(y)}"
        elif x is None and y is None:
            kind, cell = "both n/a", "n/a = NaN" if "NaN" in rm["note"] else "n/a = not run"
            notes.append(f"- {rid} / {m}: assay \"{am['note']}\"; Ragas: {rm['note']}")
        elif x is None and y is not None and am["note"] in BY_DEFINITION and not row.get("contexts"):
            kind, cell = "by definition", f"n/a ≠ {show(y)} ‡"
            notes.append(f"- {rid} / {m}: ‡ assay \"{am['note']}\"; {BY_DEFINITION[am['note']]}")
        else:
            kind, cell = "DIFFER", f"**{show(x)} ≠ {show(y)}**"
            failures.append(f"{rid} / {m}: assay {x} ({am['note']}), Ragas {y} ({rm['note']})")
        counts[kind] += 1
        cells.append(cell)
    lines.append(f"| {rid} | " + " | ".join(cells) + " |")

report = "\n".join(lines)
report += "\n\nEach cell: assay = Ragas (|difference| ≤ 1e-9). " + ", ".join(
    f"{v} {k}" for k, v in counts.items()) + ".\n"
if notes:
    report += "\n" + "\n".join(notes) + "\n"
if failures:
    report += "\nDisagreements:\n" + "\n".join(f"- {f}" for f in failures) + "\n"
open(f"{out}/ragas.md", "w").write(report)
print(report)
sys.exit(1 if failures else 0)
PY
