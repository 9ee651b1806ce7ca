#!/usr/bin/env bash
# The worker target against the command target (issue 44): the same instant Python function
# answers N answer cases (default 1,000), once behind `target = "command"` (a Python process
# per case) and once behind `target = "python:bench_bot:answer"` (one long-lived worker), in
# one run of this script, best of REPEAT (default 3) each. No model, no judge, no network:
# what is timed is assay plus the product's start-up and the exchange. Prints one JSON line
# with both times and their ratio; exits 1 when the verdicts differ.
#
# Usage: bash bench/worker/run.sh   (ASSAY=path/to/assay, N=1000, REPEAT=3, PYTHON=python3)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
assay="${ASSAY:-$root/target/release/assay}"
[[ -x "$assay" ]] || assay="$root/target/debug/assay"
n="${N:-1000}"
repeat="${REPEAT:-3}"
python="${PYTHON:-python3}"
out="$root/bench/out/worker"
rm -rf "$out"
mkdir -p "$out"
cd "$out"

"$assay" init project --template rag >/dev/null
cd project
rm -rf helpdesk test_banks/answer/helpdesk.json
# An instant product: the reply names the question's number.
cat > bench_bot.py <<'PY'
def answer(question, context, user_state):
    return "Answer to " + question
PY
cat > adapter.py <<'PY'
import json, sys
from bench_bot import answer
req = json.load(sys.stdin)
if req.get("dry_run"):
    import hashlib
    print(json.dumps({"prompt_sha256": {k: hashlib.sha256(v.encode()).hexdigest() for k, v in req["prompts"].items()}}))
else:
    print(json.dumps({"final_answer": answer(req["question"], req.get("context", []), req.get("user_state", {}))}))
PY
"$python" - "$n" <<'PY'
import json, sys
n = int(sys.argv[1])
tests = [{"test_id": f"B-{i}", "name": f"case {i}", "message": f"question {i} about the workshop",
          "user_state": {"user_type": "CUSTOMER"},
          "assert": [{"type": "contains", "value": f"question {i} "}]} for i in range(n)]
json.dump({"bank_type": "ANSWER", "version": "1.0", "tests": tests},
          open("test_banks/answer/bench.json", "w"))
PY
sed -e 's|^target = .*|target = "python:bench_bot:answer"|' assay.toml > assay.toml.worker
sed -e 's|^target = .*|target = "command"\ncommand = ["'"$python"'", "adapter.py"]|' assay.toml.worker > assay.toml.command
# Both run as many cases at once: [answer] concurrency (4) with stateless = true, and 4
# workers for the worker target.
sed -i 's|^workers = 1 |workers = 4 |' assay.toml.worker
"$assay" run . --no-save >/dev/null 2>&1 || true   # import and embed once, outside the timings

best() {  # best wall seconds of $repeat runs of `assay run` with assay.toml.$1
  cp "assay.toml.$1" assay.toml
  local best=""
  for _ in $(seq "$repeat"); do
    local t0 t1
    t0=$(date +%s.%N)
    "$assay" run . --no-save --no-journal --json > "run-$1.json" 2>"err-$1.txt" || true
    t1=$(date +%s.%N)
    best=$(echo "$t0 $t1 $best" | awk '{d=$2-$1; if ($3=="" || d<$3) print d; else print $3}')
  done
  echo "$best"
}
command_s=$(best command)
worker_s=$(best worker)
verdicts() { "$python" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(sorted((c["test_id"], c["score"], c.get("error")) for c in d["answer"]["results"])))' "$1"; }
same=true
[[ "$(verdicts run-command.json)" == "$(verdicts run-worker.json)" ]] || same=false
passed=$("$python" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sum(1 for c in d["answer"]["results"] if c.get("error") is None and not c.get("is_hard_fail") and c["score"] == 100))' run-worker.json)
echo "{\"cases\": $n, \"command_s\": $command_s, \"worker_s\": $worker_s, \"ratio\": $(echo "$command_s $worker_s" | awk '{printf "%.1f", $1/$2}'), \"passed\": $passed, \"same_verdicts\": $same}"
$same
