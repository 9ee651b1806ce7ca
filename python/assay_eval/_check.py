"""Assertions on a reply from Python: :func:`assay_eval.check`, by ``assay check --json``.

The binary does the checking (the same library that checks the assertions of answer cases,
optimizer cases and simulator scenarios, docs/assertions.md); this module only sends it the
reply and reads back its report.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from typing import Any, Iterable


@dataclasses.dataclass
class AssertionOutcome:
    """One assertion's outcome, as assay reports it."""

    #: Its 0-based position in the list.
    index: int
    #: Its ``type`` as written (``contains``, ``not-refusal``…).
    type: str
    #: ``passed``, ``failed`` or ``error`` (could not be decided: a latency that was not given).
    status: str
    passed: bool
    #: Why, in a few words (``no "Paris"``).
    reason: str
    weight: float
    critical: bool = False
    #: Its ``value`` as written, compact JSON, cut when long (absent for types that take none).
    value: str | None = None

    def name(self) -> str:
        """The assertion as a reader names it: its type and value (``contains "Paris"``)."""
        return f"{self.type} {self.value}" if self.value is not None else self.type


@dataclasses.dataclass
class CheckResult:
    """What ``assay check`` decided about a reply: true when it passed.

    ``assert check(reply, assertions)`` works as is; ``check(...).assert_passed()`` raises an
    :class:`AssertionError` whose message lists the assertions that failed and why.
    """

    #: Whether the set passed: a score at or above the threshold and no critical failure.
    passed: bool
    #: The weighted share of the decided assertions that passed, 0 to 1 (``None`` when none
    #: could be decided).
    score: float | None
    #: The share the score had to reach (1 unless a threshold was given).
    threshold: float
    #: Whether a critical assertion failed.
    critical_failed: bool
    #: How many assertions ended in an error.
    errors: int
    results: list[AssertionOutcome]

    @classmethod
    def from_report(cls, report: dict[str, Any]) -> CheckResult:
        """A result from assay's AssertionReport (the JSON of ``assay check --json``)."""
        fields = {f.name for f in dataclasses.fields(AssertionOutcome)}
        return cls(
            passed=bool(report["passed"]),
            score=report.get("score"),
            threshold=float(report["threshold"]),
            critical_failed=bool(report.get("critical_failed", False)),
            errors=int(report.get("errors", 0)),
            results=[
                AssertionOutcome(**{k: v for k, v in r.items() if k in fields})
                for r in report.get("results", [])
            ],
        )

    def __bool__(self) -> bool:
        return self.passed

    def not_passed(self) -> list[AssertionOutcome]:
        """The assertions that failed, then those that ended in an error."""
        failed = [r for r in self.results if r.status == "failed"]
        return failed + [r for r in self.results if r.status == "error"]

    def summary(self) -> str:
        """A few lines: the verdict with the score and threshold, then each assertion that did
        not pass and why."""
        if self.score is None:
            score = "no assertion could be decided"
        else:
            score = (
                f"{_percent(self.score)} of their weight passed "
                f"(threshold {_percent(self.threshold)})"
            )
        if self.passed:
            head = f"assertions passed: {score}"
        else:
            why = []
            if self.critical_failed:
                why.append("a critical assertion failed")
            if self.score is None or self.score < self.threshold:
                why.append(score)
            head = f"assertions failed: {'; '.join(why) or score}"
        lines = [head]
        for r in self.not_passed():
            critical = ", critical" if r.critical else ""
            lines.append(f"  {r.status}{critical}: {r.name()} ({r.reason})")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def assert_passed(self) -> None:
        """Raises :class:`AssertionError` with :meth:`summary` unless the reply passed."""
        if not self.passed:
            raise AssertionError(self.summary())


def _percent(share: float) -> str:
    return f"{share * 100:.0f}%"


def check(
    reply: str,
    assertions: Iterable[dict[str, Any]],
    *,
    threshold: float | None = None,
    latency_ms: float | None = None,
    cost_usd: float | None = None,
) -> CheckResult:
    """Checks ``reply`` against ``assertions`` (the ``assert`` list of docs/assertions.md)
    with ``assay check --json``.

    ``threshold`` is the weighted share (0 to 1) the assertions must reach (all of it unless
    given); ``latency_ms`` and ``cost_usd`` are what the ``latency`` and ``cost`` assertions
    check (without them those assertions end in an error, neither passing nor failing).

    Raises :class:`ValueError` with assay's words when it refuses the input (an unknown type, a
    bad value: ``assert[1].value: …``), :class:`FileNotFoundError` when the binary cannot be
    found, and :class:`RuntimeError` when it fails otherwise.
    """
    from assay_eval import find_assay_bin

    if not isinstance(reply, str):
        raise TypeError(f"reply must be a str, not {type(reply).__name__}")
    if isinstance(assertions, (str, bytes, dict)):
        raise TypeError("assertions must be a list of assertion objects ({\"type\": …})")
    request: dict[str, Any] = {"reply": reply, "assert": list(assertions)}
    for key, value in (
        ("threshold", threshold),
        ("latency_ms", latency_ms),
        ("cost_usd", cost_usd),
    ):
        if value is not None:
            request[key] = value
    command = [find_assay_bin(), "check", "--json"]
    env = dict(os.environ)
    env.setdefault("NO_COLOR", "1")
    try:
        done = subprocess.run(
            command,
            input=json.dumps(request),
            capture_output=True,
            text=True,
            encoding="utf-8",
            env=env,
            check=False,
        )
    except OSError as e:
        raise RuntimeError(f"cannot start {command[0]}: {e}") from e
    stderr = done.stderr.strip()
    if done.returncode == 2:
        raise ValueError(_without_prefix(stderr) or "assay check refused the input (exit 2)")
    if done.returncode not in (0, 1):
        raise RuntimeError(
            f"assay check exited {done.returncode}: {stderr or '(nothing on stderr)'}"
        )
    try:
        return CheckResult.from_report(json.loads(done.stdout))
    except (ValueError, KeyError, TypeError) as e:
        raise RuntimeError(
            f"cannot read the report of assay check ({e}): {done.stdout.strip()[:500]!r}"
        ) from e


def _without_prefix(stderr: str) -> str:
    """assay's message without the ``error: `` its error lines start with."""
    lines = stderr.splitlines()
    if lines and lines[0].startswith("error: "):
        lines[0] = lines[0][len("error: ") :]
    return "\n".join(lines)
