"""`assay_eval.check` against a stand-in for `assay check --json` (ASSAY_BIN): what it sends,
and each exit code's result or exception."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

import assay_eval
from assay_eval import CheckResult, check

FAKE = """\
import json, os, sys
with open(os.environ["FAKE_ASSAY_LOG"], "a") as log:
    log.write(json.dumps({"args": sys.argv[1:], "stdin": sys.stdin.read()}) + "\\n")
with open(os.environ["FAKE_ASSAY_SPEC"]) as f:
    spec = json.load(f)
sys.stdout.write(spec.get("stdout", ""))
sys.stderr.write(spec.get("stderr", ""))
sys.exit(spec.get("exit", 0))
"""

# The shape of assay's AssertionReport (crates/assay-core/src/assertion.rs).
FAILED = {
    "results": [
        {
            "index": 0,
            "type": "icontains",
            "status": "passed",
            "passed": True,
            "reason": 'has "paris"',
            "weight": 1.0,
            "value": '"paris"',
        },
        {
            "index": 1,
            "type": "not-refusal",
            "status": "failed",
            "passed": False,
            "reason": "the reply declines to answer",
            "weight": 1.0,
            "critical": True,
        },
        {
            "index": 2,
            "type": "latency",
            "status": "error",
            "passed": False,
            "reason": "the latency was not measured",
            "weight": 0.5,
            "value": "5000",
        },
    ],
    "score": 0.5,
    "threshold": 0.75,
    "passed": False,
    "critical_failed": True,
    "errors": 1,
}

PASSED = {
    "results": [
        {
            "index": 0,
            "type": "contains",
            "status": "passed",
            "passed": True,
            "reason": 'has "Paris"',
            "weight": 1.0,
            "value": '"Paris"',
        }
    ],
    "score": 1.0,
    "threshold": 1.0,
    "passed": True,
    "critical_failed": False,
    "errors": 0,
}


class Fake:
    """A stand-in `assay`: answers as told, logs its arguments and stdin."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bin = root / "fake-assay"
        self.bin.write_text(f"#!{sys.executable}\n{FAKE}")
        self.bin.chmod(self.bin.stat().st_mode | stat.S_IXUSR)
        self.spec = root / "fake-spec.json"
        self.log = root / "fake-log.jsonl"
        monkeypatch.setenv("ASSAY_BIN", str(self.bin))
        monkeypatch.setenv("FAKE_ASSAY_SPEC", str(self.spec))
        monkeypatch.setenv("FAKE_ASSAY_LOG", str(self.log))

    def answer(self, exit: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.spec.write_text(json.dumps({"exit": exit, "stdout": stdout, "stderr": stderr}))

    def calls(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Fake:
    return Fake(tmp_path, monkeypatch)


def test_a_passing_reply_is_a_true_result(fake):
    fake.answer(0, json.dumps(PASSED))
    result = check(
        "Paris is the capital.", [{"type": "contains", "value": "Paris"}], latency_ms=1250
    )
    assert isinstance(result, CheckResult)
    assert result
    assert result.passed and result.score == 1.0 and result.threshold == 1.0
    assert result.results[0].name() == 'contains "Paris"'
    assert str(result) == "assertions passed: 100% of their weight passed (threshold 100%)"
    result.assert_passed()
    [call] = fake.calls()
    assert call["args"] == ["check", "--json"]
    # Only what was given is sent.
    assert json.loads(call["stdin"]) == {
        "reply": "Paris is the capital.",
        "assert": [{"type": "contains", "value": "Paris"}],
        "latency_ms": 1250,
    }


def test_a_failing_reply_is_a_false_result_whose_text_lists_what_failed(fake):
    fake.answer(1, json.dumps(FAILED))
    assertions = [
        {"type": "icontains", "value": "paris"},
        {"type": "not-refusal", "critical": True},
        {"type": "latency", "value": 5000, "weight": 0.5},
    ]
    result = check("I cannot say. Paris?", assertions, threshold=0.75, cost_usd=0.01)
    assert not result
    assert result.critical_failed and result.errors == 1 and result.score == 0.5
    assert [r.status for r in result.results] == ["passed", "failed", "error"]
    assert result.results[1].critical and result.results[1].value is None
    assert str(result).splitlines() == [
        "assertions failed: a critical assertion failed; 50% of their weight passed "
        "(threshold 75%)",
        "  failed, critical: not-refusal (the reply declines to answer)",
        "  error: latency 5000 (the latency was not measured)",
    ]
    with pytest.raises(AssertionError) as raised:
        result.assert_passed()
    assert str(raised.value) == str(result)
    sent = json.loads(fake.calls()[0]["stdin"])
    assert sent == {
        "reply": "I cannot say. Paris?",
        "assert": assertions,
        "threshold": 0.75,
        "cost_usd": 0.01,
    }


def test_bad_input_is_a_value_error_with_assays_words(fake):
    fake.answer(2, stderr="error: assert[1].value: `contains` needs a string\n")
    with pytest.raises(ValueError, match=r"^assert\[1\]\.value: `contains` needs a string$"):
        check("x", [{"type": "contains", "value": "x"}, {"type": "contains", "value": 3}])


@pytest.mark.parametrize("code", [3, 101])
def test_another_exit_is_a_runtime_error_with_stderr(fake, code):
    fake.answer(code, stderr="thread 'main' panicked\n")
    with pytest.raises(RuntimeError, match=f"assay check exited {code}: thread 'main' panicked"):
        check("x", [{"type": "is-json"}])


def test_a_report_that_is_not_json_is_a_runtime_error(fake):
    fake.answer(0, "not json")
    with pytest.raises(RuntimeError, match="cannot read the report of assay check"):
        check("x", [{"type": "is-json"}])


def test_a_missing_binary_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("ASSAY_BIN", str(tmp_path / "no-such-assay"))
    with pytest.raises(FileNotFoundError, match="ASSAY_BIN is set to .*no-such-assay"):
        check("x", [{"type": "is-json"}])


def test_the_arguments_are_checked_before_running_anything(fake):
    with pytest.raises(TypeError, match="reply must be a str"):
        check(None, [])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="assertions must be a list"):
        check("x", {"type": "is-json"})  # type: ignore[arg-type]
    assert not fake.log.exists()


def test_the_version_is_a_string():
    assert isinstance(assay_eval.__version__, str) and assay_eval.__version__
    assert "check" in assay_eval.__all__ and "CheckResult" in assay_eval.__all__
