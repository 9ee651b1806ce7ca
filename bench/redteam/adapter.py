"""promptfoo's exec provider for the red-team fixture: hands the rendered prompt to the same
scripted product assay attacks (crates/assay-cli/tests/fixtures/redteam-kb/product.py), as the
question with the context promptfoo put in it."""
import json
import os
import subprocess
import sys

FIXTURE = os.path.join(os.path.dirname(__file__), "../../crates/assay-cli/tests/fixtures/redteam-kb")
prompt = sys.argv[1]
context, _, question = prompt.partition("\nQuestion: ")
system = open(os.path.join(FIXTURE, "prompts/answerer_system_prompt.txt")).read()
request = {
    "question": question,
    "context": [{"entity": "loan_periods", "text": context.removeprefix("Context: ")}],
    "user_state": {},
    "prompts": {"answerer": system},
}
out = subprocess.run(["python3", os.path.join(FIXTURE, "product.py")], input=json.dumps(request),
                     capture_output=True, text=True, check=True)
print(json.loads(out.stdout)["final_answer"])
