"""The pytest plugin against a stand-in for the binary: every exit code and report shape of
`assay run` and `assay simulate`, without a real project (the real binary is driven by
crates/assay-cli/tests/it/pytest_plugin.rs)."""

from __future__ import annotations

import json
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

FAKE = """\
import json, os, sys
args = sys.argv[1:]
with open(os.environ["FAKE_ASSAY_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
with open(os.environ["FAKE_ASSAY_SPEC"]) as f:
    spec = json.load(f)[args[0]]
if "junit" in spec:
    with open(args[args.index("--junit") + 1], "w") as out:
        out.write(spec["junit"])
sys.stdout.write(spec.get("stdout", ""))
sys.stderr.write(spec.get("stderr", ""))
sys.exit(spec.get("exit", 0))
"""


class Fake:
    """A stand-in `assay` (ASSAY_BIN): answers each subcommand as told, logs its arguments."""

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

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


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
    [call] = fake.calls()
    assert call[:2] == ["run", str(pytester.path / "proj")]
    assert call[-2:] == ["--baseline", "accepted"]


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
def test_no_verdict_is_a_collection_error_with_assays_stderr(pytester, fake, code, stderr):
    fake.answer(run={"exit": code, "stderr": stderr + "\n"})
    result = run(pytester, "--assay", "proj")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        ["*ERROR collecting*", f"*proj: assay exited {code} (*) and reported no cases", stderr]
    )
    result.assert_outcomes(errors=1)


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
    [call] = fake.calls()
    assert call[-4:] == ["--banks", "state", "--shard", "hash:1/4"]


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
    assert len(fake.calls()) == 1
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
