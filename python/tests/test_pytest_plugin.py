"""The pytest plugin against a stand-in for the binary: every exit code and report shape of
`assay run` (its listing, the lazy run of the selected cases, the shards of pytest-xdist
workers and their merge) and `assay simulate`, without a real project (the real binary is
driven by crates/assay-cli/tests/it/pytest_plugin.rs)."""

from __future__ import annotations

import json
import shutil
import stat
import sys
import textwrap
from pathlib import Path

import pytest

from assay_eval import pytest_plugin as plugin

# Run as `PYTHONPATH=python python -m pytest python/tests` (crates/assay-cli/tests/it/
# pytest_plugin.rs does); the plugin itself is loaded only into the inner sessions.
pytest_plugins = ["pytester"]

# The shapes `assay run --junit` writes (crates/assay-report/src/junit.rs).
JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="assay" tests="4" failures="1" errors="1" time="0.010">
  <testsuite name="semantic" tests="2" failures="0" errors="1" skipped="0" timestamp="t">
    <testcase classname="assay.semantic" name="SEM-1: Works"/>
    <testcase classname="assay.semantic" name="SEM-2: Provider down">
      <error message="embedder: connection refused" type="assay.infrastructure"/>
    </testcase>
  </testsuite>
  <testsuite name="state" tests="2" failures="1" errors="0" skipped="0" timestamp="t">
    <testcase classname="assay.state" name="ST-1: First visit &amp; more" time="0.002">
      <failure message="expected handler did not trigger: `handler_first`; score 0 is under the pass score 80 ([verdict] pass_score)" type="assay.expected_missing">expected handler did not trigger: `handler_first`
score 0 is under the pass score 80 ([verdict] pass_score)
triggered: `handler_returning`
score: 0</failure>
    </testcase>
    <testcase classname="assay.state" name="ST-2"/>
  </testsuite>
</testsuites>
"""

SUMMARY = """assay run: proj (semantic, state)

  combined score  40.0
  health          CRITICAL

failed: 1 of 4 (by the rule that failed them)
  rule                 cases  cases
  expected missing         1  state/ST-1

cases below 100: 1 of 4 (why points were lost)
  reason             cases  most often
  hard fail              1  Expected handler did not trigger: handler_first (1)
"""

# An answer case's failure: the failed assertions, then the reply's start.
ANSWER_JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="assay" tests="2" failures="1" errors="0" time="0.010">
  <testsuite name="answer" tests="2" failures="1" errors="0" skipped="0" timestamp="t">
    <testcase classname="assay.answer" name="A-1: Capital of Spain"/>
    <testcase classname="assay.answer" name="A-2: Capital of France">
      <failure message="assertions passed 50% of their weight, under the threshold 80%: failed `contains &quot;Paris&quot;` (no &quot;Paris&quot;)" type="assay.assertions">assertions passed 50% of their weight, under the threshold 80%: failed `contains &quot;Paris&quot;` (no &quot;Paris&quot;)
reply: Lyon is a lovely city, and the capital of gastronomy…</failure>
    </testcase>
  </testsuite>
</testsuites>
"""

# What `assay run --list --json` prints for JUNIT's cases.
LISTING = json.dumps(
    {
        "cases": [
            {"bank": "semantic", "test_id": "SEM-1"},
            {"bank": "semantic", "test_id": "SEM-2"},
            {"bank": "state", "test_id": "ST-1"},
            {"bank": "state", "test_id": "ST-2"},
        ]
    }
)

FAKE = """\
import json, os, sys
import xml.etree.ElementTree as ET

args = sys.argv[1:]
with open(os.environ["FAKE_ASSAY_SPEC"]) as f:
    specs = json.load(f)


def value(flag):
    return args[args.index(flag) + 1] if flag in args else None


if args[:2] == ["runs", "merge"]:
    kind = "merge"
elif args[0] == "run" and "--list" in args:
    kind = "list"
else:
    kind = args[0]
spec = specs.get(kind, {})
entry = {"args": args}
tests_from = value("--tests-from")
if tests_from:
    with open(tests_from) as f:
        entry["tests_from"] = f.read().splitlines()
if kind == "merge":
    logs = [a for a in args[2:] if a.endswith(".json")]
    entry["merged"] = [json.load(open(path)) for path in logs]
with open(os.environ["FAKE_ASSAY_LOG"], "a") as log:
    log.write(json.dumps(entry) + "\\n")

# The cases the run keeps: those named by --tests-from or --test, then (when the spec says
# "shards") those of --shard hash:i/n, alternately by their place in the whole suite.
junit = specs.get("run", {}).get("junit")
kept = []
if junit is not None:
    root = ET.fromstring(junit)
    wanted = set(entry.get("tests_from", []))
    if "--test" in args:
        wanted.add(value("--test"))
    shard = value("--shard")
    place = 0
    for suite in root.iter("testsuite"):
        for case in list(suite.iter("testcase")):
            test_id = case.get("name").split(": ")[0]
            keep = not wanted or test_id in wanted
            if shard and specs.get("run", {}).get("shards"):
                i, n = map(int, shard.split(":")[1].split("/"))
                keep = keep and place % n == i - 1
            place += 1
            if keep:
                kept.append([suite.get("name"), test_id])
            else:
                suite.remove(case)

if kind == "list":
    if "stdout" not in spec and "exit" not in spec:
        sys.stdout.write(json.dumps({"cases": [{"bank": b, "test_id": t} for b, t in kept]}))
elif kind == "run":
    if "junit" in spec:
        with open(value("--junit"), "w") as out:
            out.write(ET.tostring(root, encoding="unicode"))
    if "--json" in args:
        # A RunLog of sorts: the shard and the cases it ran.
        sys.stdout.write(json.dumps({"shard": value("--shard"), "cases": kept}))
sys.stdout.write(spec.get("stdout", ""))
sys.stderr.write(spec.get("stderr", ""))
sys.exit(spec.get("exit", 0))
"""


class Fake:
    """A stand-in `assay` (ASSAY_BIN): answers each subcommand as told, logs its arguments.

    `run --list` lists the cases of the `run` answer's JUnit unless told otherwise; `run`
    writes that JUnit, keeping the cases `--tests-from` names; `runs merge` answers as
    `merge` says and logs the shard files it read."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = root / "fake-assay"
        self.bin.write_text(f"#!{sys.executable}\n{FAKE}")
        self.bin.chmod(self.bin.stat().st_mode | stat.S_IXUSR)
        self.spec = root / "fake-spec.json"
        self.log = root / "fake-log.jsonl"
        monkeypatch.setenv("ASSAY_BIN", str(self.bin))
        monkeypatch.setenv("FAKE_ASSAY_SPEC", str(self.spec))
        monkeypatch.setenv("FAKE_ASSAY_LOG", str(self.log))
        self.answer()

    def answer(self, **spec: dict) -> None:
        self.spec.write_text(json.dumps(spec))

    def entries(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def calls(self) -> list[list[str]]:
        return [e["args"] for e in self.entries()]

    def runs(self) -> list[dict]:
        """The `assay run` calls that ran cases (not the listings)."""
        return [e for e in self.entries() if e["args"][0] == "run" and "--list" not in e["args"]]


@pytest.fixture
def fake(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Fake:
    (pytester.path / "proj" / "test_banks").mkdir(parents=True)
    return Fake(pytester.path, monkeypatch)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(
        "-p",
        "assay_eval.pytest_plugin",
        "-p",
        "no:cacheprovider",
        # In process, the plugin is already imported by this module.
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        *args,
    )


def has_lines(result: pytest.RunResult, *patterns: str) -> None:
    """Each pattern (fnmatch) matches some line, in any order."""
    for pattern in patterns:
        result.stdout.fnmatch_lines([pattern])


def test_junit_is_read_case_by_case():
    cases = plugin.parse_junit(JUNIT)
    assert [(c.bank, c.test_id, c.status) for c in cases] == [
        ("semantic", "SEM-1", "passed"),
        ("semantic", "SEM-2", "error"),
        ("state", "ST-1", "failed"),
        ("state", "ST-2", "passed"),
    ]
    st1 = cases[2]
    assert st1.title == "First visit & more"
    assert st1.seconds == 0.002
    # assay's words: the failed checks first (the line pytest's short summary shows), then
    # each check and what came back, a line each.
    assert st1.failure_text().splitlines() == [
        "expected handler did not trigger: `handler_first`; "
        "score 0 is under the pass score 80 ([verdict] pass_score)",
        "expected handler did not trigger: `handler_first`",
        "score 0 is under the pass score 80 ([verdict] pass_score)",
        "triggered: `handler_returning`",
        "score: 0",
        "(case ST-1: First visit & more)",
    ]
    assert cases[3].title == ""
    assert cases[3].seconds is None


def test_the_console_summary_drops_the_case_listing():
    assert plugin.console_summary(SUMMARY).splitlines()[-1] == "  health          CRITICAL"
    assert plugin.console_summary("no listing\n") == "no listing"


def test_cases_map_to_items_and_errors_apart(pytester, fake):
    fake.answer(run={"junit": JUNIT, "exit": 3, "stdout": SUMMARY, "stderr": "WARN slow\n"})
    result = run(pytester, "--assay", "proj", "-rA")
    # The infrastructure error of a case, and the gate without a verdict, are pytest errors.
    result.assert_outcomes(passed=2, failed=1, errors=2)
    has_lines(
        result,
        "PASSED proj::semantic::SEM-1",
        "ERROR proj::semantic::SEM-2 - Failed: assay could not score this case*",
        "FAILED proj::state::ST-1 - Failed: expected handler did not trigger*",
        "PASSED proj::state::ST-2",
        "ERROR proj::gate - Failed: no gate verdict: 1 case(s) could not be scored*",
    )
    result.stdout.fnmatch_lines(["*embedder: connection refused*"])
    # Each run of the binary in the summary, with its warnings.
    result.stdout.fnmatch_lines(["assay run */proj: exit 3 (infrastructure errors*", "  WARN slow"])
    # Listed at collection, run once at the first item: every case selected, so no filter.
    assert [c[:2] for c in fake.calls()] == [["run", str(pytester.path / "proj")]] * 2
    assert "--list" in fake.calls()[0]
    [ran] = fake.runs()
    assert "--tests-from" not in ran["args"] and "--test" not in ran["args"]


def test_a_failed_gate_fails_the_session_with_assays_words(pytester, fake):
    ok = JUNIT.replace(
        '<error message="embedder: connection refused" type="assay.infrastructure"/>', ""
    )
    fake.answer(
        run={
            "junit": ok,
            "exit": 1,
            "stdout": SUMMARY,
            "stderr": "ERROR the run regressed against the baseline: state/ST-1\n",
        }
    )
    result = run(pytester, "--assay", "proj", "--assay-baseline", "accepted", "-m", "assay_gate")
    result.assert_outcomes(failed=1, deselected=4)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "the run regressed against the baseline: state/ST-1",
            "assay run exited 1: the quality gate failed",
            "  health          CRITICAL",
        ]
    )
    assert "expected missing" not in result.stdout.str(), "the failed cases by rule are left out"
    # The gate alone selected: the whole run, with the baseline.
    [ran] = fake.runs()
    call = ran["args"]
    assert call[:2] == ["run", str(pytester.path / "proj")]
    assert call[-2:] == ["--baseline", "accepted"]
    assert "--tests-from" not in call


def test_a_health_gate_says_what_exit_1_means(pytester, fake):
    fake.answer(
        run={
            "junit": JUNIT.split("<testsuite name")[0] + "</testsuites>",
            "exit": 1,
            "stdout": SUMMARY,
        }
    )
    result = run(pytester, "--assay", "proj")
    result.assert_outcomes(failed=1)
    assert (
        "the quality gate failed (CRITICAL health, below [gate] in assay.toml, "
        "or a regression rule broken)" in result.stdout.lines
    )


@pytest.mark.parametrize(
    ("code", "stderr"),
    [
        (2, "error: test_banks/state/a.json:3:5: unknown field `expected_handler`"),
        (3, "error: cannot open the store: connection refused"),
        (101, "thread 'main' panicked"),
    ],
)
def test_a_refused_listing_is_a_collection_error_with_assays_stderr(pytester, fake, code, stderr):
    fake.answer(list={"exit": code, "stderr": stderr + "\n"})
    result = run(pytester, "--assay", "proj")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*ERROR collecting*", f"*proj: assay exited {code} (*) and reported no cases", stderr]
    )
    result.assert_outcomes(errors=1)
    assert fake.runs() == [], "nothing runs after a collection error"


@pytest.mark.parametrize(
    ("code", "stderr"),
    [
        (2, "error: --tests-from: no case has the id `ST-9`"),
        (3, "error: cannot open the store: connection refused"),
        (101, "thread 'main' panicked"),
    ],
)
def test_a_run_with_no_verdict_makes_every_item_of_the_project_an_error(
    pytester, fake, code, stderr
):
    # The listing works; the run reports nothing (no JUnit).
    fake.answer(list={"stdout": LISTING}, run={"exit": code, "stderr": stderr + "\n"})
    result = run(pytester, "--assay", "proj", "-rE")
    result.assert_outcomes(errors=5)
    for item in ("semantic::SEM-1", "semantic::SEM-2", "state::ST-1", "state::ST-2", "gate"):
        result.stdout.fnmatch_lines([f"ERROR proj::{item} - Failed: assay exited {code} *"])
    result.stdout.fnmatch_lines([stderr])
    assert "During handling of the above exception" not in result.stdout.str()
    assert len(fake.runs()) == 1, "the run is not tried again item by item"


def test_a_missing_binary_is_a_collection_error(pytester, fake, monkeypatch):
    monkeypatch.setenv("ASSAY_BIN", str(pytester.path / "no-such-assay"))
    monkeypatch.setenv("PATH", str(pytester.path))
    result = run(pytester, "--assay", "proj")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*ERROR collecting*"])


def test_args_pass_through_and_k_selects(pytester, fake):
    fake.answer(run={"junit": JUNIT, "exit": 3})
    result = run(
        pytester,
        "--assay",
        "proj",
        "--assay-args",
        "--banks state --shard 'hash:1/4'",
        "-k",
        "ST-2",
    )
    result.assert_outcomes(passed=1, deselected=4)
    listing, ran = fake.entries()
    # The listing gets the same arguments as the run, so the items are the run's cases.
    assert listing["args"][2:4] == ["--list", "--json"]
    assert listing["args"][-4:] == ["--banks", "state", "--shard", "hash:1/4"]
    assert ran["args"][-4:] == ["--banks", "state", "--shard", "hash:1/4"]
    # Only the selected case runs.
    assert ran["tests_from"] == ["ST-2"]
    # The summary shows the selection as the ids, not the scratch file.
    result.stdout.fnmatch_lines(["assay run */proj --test ST-2 --banks state --shard hash:1/4: *"])


def test_k_runs_only_the_selected_case_and_a_failure_shows_the_checks_and_the_reply(
    pytester, fake
):
    fake.answer(run={"junit": ANSWER_JUNIT, "exit": 0})
    result = run(pytester, "--assay", "proj", "-k", "A-2")
    result.assert_outcomes(failed=1, deselected=2)
    [ran] = fake.runs()
    assert ran["tests_from"] == ["A-2"]
    assert "--baseline" not in ran["args"]
    lines = result.stdout.lines
    at = lines.index(
        'assertions passed 50% of their weight, under the threshold 80%: failed `contains "Paris"` '
        '(no "Paris")'
    )
    assert lines[at + 1 : at + 3] == [
        "reply: Lyon is a lovely city, and the capital of gastronomy…",
        "(case A-2: Capital of France)",
    ]


def test_a_selected_case_the_run_left_out_is_skipped_with_assays_warning(pytester, fake):
    # The answer bank is listed, but the run skips it (no product to ask).
    listing = {
        "cases": [
            {"bank": "semantic", "test_id": "SEM-1"},
            {"bank": "semantic", "test_id": "SEM-2"},
            {"bank": "answer", "test_id": "A-1"},
        ]
    }
    fake.answer(
        list={"stdout": json.dumps(listing)},
        run={
            "junit": JUNIT.split('<testsuite name="state"')[0] + "</testsuites>",
            "stderr": " WARN the answer bank needs [answer] target in assay.toml: skipped\n",
        },
    )
    result = run(pytester, "--assay", "proj", "-rs", "-k", "A-1 or SEM-1")
    result.assert_outcomes(passed=1, skipped=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            "SKIPPED [[]1[]] proj:1: assay did not run this answer case: the answer bank needs "
            "[[]answer[]] target in assay.toml: skipped"
        ]
    )
    [ran] = fake.runs()
    assert ran["tests_from"] == ["SEM-1", "A-1"]


def test_the_gate_of_a_partial_run_says_so(pytester, fake):
    fake.answer(run={"junit": JUNIT, "exit": 1, "stdout": SUMMARY})
    result = run(pytester, "--assay", "proj", "-k", "ST-2 or gate")
    result.assert_outcomes(passed=1, failed=1, deselected=3)
    assert "(gate of a partial run: 1 of 4 cases selected)" in result.stdout.lines
    [ran] = fake.runs()
    assert ran["tests_from"] == ["ST-2"]


def test_a_repeated_id_is_matched_case_by_case(pytester, fake):
    repeated = JUNIT.replace('name="ST-2"', 'name="ST-1: Again"')
    fake.answer(run={"junit": repeated, "exit": 3})
    result = run(pytester, "--assay", "proj", "-rA", "-k", "ST-1")
    result.assert_outcomes(passed=1, failed=1, deselected=3)
    has_lines(result, "FAILED proj::state::ST-1 - *", "PASSED proj::state::ST-1[[]2[]]")
    [ran] = fake.runs()
    assert ran["tests_from"] == ["ST-1"]


def test_a_project_runs_once_however_often_it_is_named(pytester, fake):
    fake.answer(run={"junit": JUNIT, "exit": 3})
    pytester.makeini("[pytest]\nassay_projects = proj\n")
    pytester.makepyfile(
        test_evals="""
        import pytest
        pytestmark = pytest.mark.assay_project("proj")
        def test_plain():
            pass
        """
    )
    result = run(pytester, "--assay", "proj", "--assay", "./proj/", "--collect-only", "-q")
    # Collecting lists the cases once and runs nothing.
    [call] = fake.calls()
    assert "--list" in call
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids == [
        "test_evals.py::test_plain",
        "proj::semantic::SEM-1",
        "proj::semantic::SEM-2",
        "proj::state::ST-1",
        "proj::state::ST-2",
        "proj::gate",
    ]


def test_the_marker_puts_a_project_under_its_module(pytester, fake):
    fake.answer(run={"junit": JUNIT, "exit": 3})
    pytester.mkdir("tests")
    pytester.path.joinpath("tests", "test_evals.py").write_text(
        textwrap.dedent(
            """
            import pytest
            pytestmark = pytest.mark.assay_project("../proj", name="coach", args="--banks state")
            """
        )
    )
    result = run(pytester, "tests", "--collect-only", "-q")
    assert "tests/test_evals.py::coach::state::ST-1" in result.stdout.lines
    assert fake.calls()[0][-2:] == ["--banks", "state"]


def test_a_project_named_twice_runs_once(pytester, fake):
    fake.answer(run={"junit": JUNIT, "exit": 3})
    pytester.makeini("[pytest]\nassay_projects = proj\n")
    result = run(pytester, "--assay", "proj", "--assay", "./proj/")
    result.assert_outcomes(passed=2, failed=1, errors=2)
    assert len(fake.runs()) == 1


SIM_REPORT = {
    "pass_threshold": 7.0,
    "runs": [
        {
            "scenario_id": "chore",
            "scenario_name": "Daily chore",
            "repeat": 1,
            "verdict": "pass",
            "overall": 8.0,
        },
        {
            "scenario_id": "chore",
            "scenario_name": "Daily chore",
            "repeat": 2,
            "verdict": "fail",
            "failed_by": "check",
            "judge_verdict": "pass",
            "reason": "failed check `two chores logged` (chores_today: length 0, expected 2)",
            "overall": 8.0,
        },
        {
            "scenario_id": "email",
            "scenario_name": "Email",
            "repeat": 1,
            "verdict": "fail",
            "failed_by": "judge",
            "overall": 5.5,
            "judgement": {
                "summary": "Wrote the email for him.",
                "scores": [
                    {"id": "a", "name": "Accuracy", "score": 9, "reasoning": "Right."},
                    {
                        "id": "s",
                        "name": "Socratic method",
                        "score": 2,
                        "reasoning": "Did the work.",
                    },
                ],
            },
        },
        {
            "scenario_id": "mcp",
            "scenario_name": "MCP",
            "repeat": 1,
            "verdict": "error",
            "error": "MCP server exited",
        },
        {
            "scenario_id": "persona",
            "scenario_name": "Persona",
            "repeat": 1,
            "verdict": "simulator_fault",
            "judgement": {"simulator_issue": "spoke as the assistant", "scores": []},
        },
        {
            "scenario_id": "flip",
            "scenario_name": "Flip",
            "repeat": 1,
            "verdict": "uncertain",
            "reason": "2 of 3 samples pass",
        },
    ],
    "gate": {"passed": False, "implicit": False, "reasons": ["pass rate 33% < 80%"]},
}


def test_simulation_runs_are_items(pytester, fake):
    (pytester.path / "proj" / "sim").mkdir()
    (pytester.path / "proj" / "sim" / "suite.yaml").write_text("name: x\n")
    fake.answer(
        run={"junit": JUNIT.replace("errors=", "x=").split("<testsuite name")[0] + "</testsuites>"},
        simulate={"exit": 3, "stdout": json.dumps(SIM_REPORT)},
    )
    result = run(
        pytester,
        "--assay",
        "proj",
        "--assay-simulate",
        "--assay-simulate-args",
        "--repeat 2",
        "-rA",
    )
    result.assert_outcomes(passed=2, failed=2, errors=2, skipped=2)
    has_lines(
        result,
        "PASSED proj::gate",
        "PASSED proj::sim::chore[[]1[]]",
        "FAILED proj::sim::chore[[]2[]] - Failed: FAIL (check): failed*",
        "FAILED proj::sim::email[[]1[]] - Failed: FAIL (judge): overall 5.5/10*",
        "SKIPPED [[]1[]] proj*: persona #1: simulated user at fault (not counted): spoke as *",
        "SKIPPED [[]1[]] proj*: flip #1: uncertain (the judge's samples disagree; not counted)*",
        "ERROR proj::sim::mcp[[]1[]] - Failed: ERROR: MCP server exited",
        "ERROR proj::sim::gate - Failed: no gate verdict: 1 run(s) ended in an error*",
    )
    lines = result.stdout.lines
    assert (
        "FAIL (check): failed check `two chores logged` (chores_today: length 0, expected 2) "
        "(the judge said pass); overall 8.0/10, pass threshold 7.0"
    ) in lines
    assert "(run chore #2: Daily chore)" in lines
    assert "Judge: Wrote the email for him." in lines
    # Weakest criterion first.
    at = lines.index("  Socratic method 2/10: Did the work.")
    assert lines[at + 1] == "  Accuracy 9/10: Right."
    assert "gate: FAILED (pass rate 33% < 80%)" in lines
    assert [c[:3] for c in fake.calls()][1] == ["simulate", str(pytester.path / "proj"), "--json"]
    assert fake.calls()[1][-2:] == ["--repeat", "2"]


def test_a_simulation_that_reports_nothing_is_a_collection_error(pytester, fake):
    (pytester.path / "proj" / "sim").mkdir()
    (pytester.path / "proj" / "sim" / "suite.yaml").write_text("name: x\n")
    fake.answer(
        run={"junit": "<testsuites/>"},
        simulate={"exit": 2, "stderr": "error: sim/suite.yaml:3: unknown field `gat`\n"},
    )
    result = run(pytester, "--assay", "proj", "--assay-simulate")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*unknown field `gat`*"])


def test_a_marker_without_a_directory_is_a_collection_error(pytester, fake):
    pytester.makepyfile(test_evals="import pytest\npytestmark = pytest.mark.assay_project()\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*pytest.mark.assay_project needs the project directory*"])
    assert fake.calls() == []


def test_a_simulation_baseline_regression_fails_the_simulation_gate(pytester, fake):
    (pytester.path / "proj" / "sim").mkdir()
    (pytester.path / "proj" / "sim" / "suite.yaml").write_text("name: x\n")
    report = {
        "pass_threshold": 7.0,
        "runs": [{"scenario_id": "a", "scenario_name": "A", "repeat": 1, "verdict": "pass"}],
        "gate": {"passed": True, "implicit": True},
        "baseline": {
            "label": "sim/reports/old.json",
            "passed": False,
            "reasons": ["per-scenario mean overall fell: -1.20 (95% CI -2.00 to -0.40)"],
            "comparison": {"warnings": ["judged by another judge"]},
        },
    }
    fake.answer(run={"junit": "<testsuites/>"}, simulate={"exit": 1, "stdout": json.dumps(report)})
    result = run(pytester, "--assay", "proj", "--assay-simulate", "-k", "sim")
    result.assert_outcomes(passed=1, failed=1, deselected=1)
    lines = result.stdout.lines
    at = lines.index("compared with sim/reports/old.json: REGRESSED")
    assert lines[at + 1 :][:6] == [
        "assay simulate exited 1: a scored run failed, or the gate failed, or --baseline found a "
        "significant regression",
        "",
        "gate (no `gate:` in the suite: every scored run must pass): passed",
        "compared with sim/reports/old.json: REGRESSED",
        "  per-scenario mean overall fell: -1.20 (95% CI -2.00 to -0.40)",
        "  warning: judged by another judge",
    ]


def test_the_root_folder_as_a_project_is_named_by_its_folder(pytester, fake):
    (pytester.path / "test_banks").mkdir()
    fake.answer(run={"junit": JUNIT, "exit": 3})
    result = run(pytester, "--assay", ".", "--collect-only", "-q")
    assert f"{pytester.path.name}::state::ST-1" in result.stdout.lines


PYTHON_DIR = Path(plugin.__file__).resolve().parents[1]


def run_xdist(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, *args: str):
    """pytest with pytest-xdist, in a subprocess (its workers are processes anyway)."""
    pytest.importorskip("xdist")
    # The plugins by name, as in the repository's own runs (crates/assay-cli/tests/it).
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTHONPATH", str(PYTHON_DIR))
    return pytester.runpytest_subprocess(
        "-p",
        "xdist.plugin",
        "-p",
        "assay_eval.pytest_plugin",
        "-p",
        "no:cacheprovider",
        *args,
    )


def test_xdist_workers_run_a_shard_each_and_the_gate_merges_them_once(
    pytester, fake, monkeypatch
):
    fake.answer(
        run={"junit": JUNIT, "exit": 3, "shards": True},
        merge={
            "exit": 1,
            "stdout": SUMMARY,
            "stderr": "ERROR the run regressed against the baseline: state/ST-1\n",
        },
    )
    result = run_xdist(
        pytester, monkeypatch, "-n", "2", "--assay", "proj", "--assay-baseline", "accepted", "-rA"
    )
    # The same outcomes as one run gives, the gate from the merge.
    result.assert_outcomes(passed=2, failed=2, errors=1)
    has_lines(
        result,
        "*PASSED proj::semantic::SEM-1",
        "*ERROR proj::semantic::SEM-2 - Failed: assay could not score this case*",
        "*FAILED proj::state::ST-1 - Failed: expected handler did not trigger*",
        "*PASSED proj::state::ST-2",
        "*FAILED proj::gate - Failed: the run regressed against the baseline: state/ST-1",
    )
    assert "assay runs merge exited 1: the quality gate failed" in result.stdout.lines
    shards = fake.runs()
    assert sorted(r["args"][r["args"].index("--shard") + 1] for r in shards) == [
        "hash:1/2",
        "hash:2/2",
    ]
    for r in shards:
        assert "--no-save" in r["args"] and "--json" in r["args"] and "--junit" in r["args"]
        # --shard and --baseline do not go together: the baseline is the merge's.
        assert "--baseline" not in r["args"] and "tests_from" not in r
    [merge] = [e for e in fake.entries() if e["args"][:2] == ["runs", "merge"]]
    args = merge["args"]
    logs = [a for a in args[2:] if a.endswith(".json")]
    assert [Path(log).name for log in logs] == ["shard-1.json", "shard-2.json"]
    assert args[2 + len(logs) :] == [
        "--project",
        str(pytester.path / "proj"),
        "--baseline",
        "accepted",
    ]
    # The product answered each case once, across the workers.
    ran = sorted(tuple(c) for shard in merge["merged"] for c in shard["cases"])
    assert ran == [
        ("semantic", "SEM-1"),
        ("semantic", "SEM-2"),
        ("state", "ST-1"),
        ("state", "ST-2"),
    ]
    # Each worker's runs of the binary in the controller's summary; the shared folder is gone.
    result.stdout.fnmatch_lines(["assay run */proj --shard hash:1/2 --no-save --no-journal --json: exit 3 *"])
    result.stdout.fnmatch_lines(["assay run */proj --shard hash:2/2 --no-save --no-journal --json: exit 3 *"])
    result.stdout.fnmatch_lines(["assay runs merge */shard-1.json */shard-2.json --project *"])
    assert not Path(logs[0]).parent.exists()


def test_xdist_with_k_shards_only_the_selected_cases(pytester, fake, monkeypatch):
    fake.answer(run={"junit": JUNIT, "exit": 0, "shards": True})
    result = run_xdist(pytester, monkeypatch, "-n", "2", "--assay", "proj", "-k", "ST-1 or SEM-1")
    # (The workers deselect; pytest-xdist's controller counts no deselected items.)
    result.assert_outcomes(passed=1, failed=1)
    shards = fake.runs()
    assert len(shards) == 2
    assert [r["tests_from"] for r in shards] == [["SEM-1", "ST-1"]] * 2
    # No gate selected: nothing to merge.
    assert not [c for c in fake.calls() if c[0] == "runs"]


def test_xdist_a_refused_shard_makes_every_item_an_error(pytester, fake, monkeypatch):
    fake.answer(
        run={
            "junit": JUNIT,
            "exit": 2,
            "stderr": "error: --embedder: unknown vendor `nope`\n",
            "shards": True,
        }
    )
    result = run_xdist(pytester, monkeypatch, "-n", "2", "--assay", "proj")
    result.assert_outcomes(errors=5)
    result.stdout.fnmatch_lines(["*error: --embedder: unknown vendor `nope`*"])
    assert not [c for c in fake.calls() if c[0] == "runs"], "no merge without every shard"


def test_a_worker_knows_its_shard_from_pytest_xdist():
    class Config:
        workerinput = {"workerid": "gw1", "workercount": 3, "testrunuid": "abc"}

    worker = plugin.XdistWorker.of(Config())
    assert (worker.shard, worker.count, worker.run_id) == (2, 3, "abc")
    # A restarted worker's id is past the shards: it runs none.
    Config.workerinput = {"workerid": "gw3", "workercount": 3, "testrunuid": "abc"}
    assert plugin.XdistWorker.of(Config()).shard == 0
    # Not a worker (the controller, or no pytest-xdist), whatever the environment says.
    assert plugin.XdistWorker.of(object()) is None


def test_a_shard_that_never_finishes_is_named_after_the_wait(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_PYTEST_WAIT_SECONDS", "0.3")
    worker = plugin.XdistWorker(shard=1, count=2, run_id=f"test-{tmp_path.name}")
    spec = plugin.ProjectSpec(dir=tmp_path / "proj")
    folder = worker.folder(spec)
    folder.mkdir(parents=True)
    try:
        (folder / "shard-1.done").write_text(json.dumps({"exit": 0, "stderr": "", "command": []}))
        with pytest.raises(plugin.AssayRunError) as raised:
            plugin.read_shards(spec, worker, plugin.Selection(None, 4, 4))
        assert str(raised.value).startswith(
            "waited 0.3 s for shard 2 of 2 (pytest-xdist worker gw1 runs "
            "`assay run --shard hash:2/2`): "
        )
        assert str(raised.value).endswith(
            "shard-2.done is not there; set ASSAY_PYTEST_WAIT_SECONDS to wait longer"
        )
    finally:
        shutil.rmtree(worker.root)
