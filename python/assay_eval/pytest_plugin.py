"""pytest plugin: assay's cases as pytest items.

``pytest --assay DIR`` lists the project's cases at collection (``assay run DIR --list
--json``, which runs nothing) and turns each into an item:

* ``DIR::<bank>::<test_id>``: one item per bank case. It passes or fails as the case's verdict
  in assay's JUnit says (decided once, where assay scored the case: the same verdict the console,
  the reports and the web UI show), and a failing item's first line names the checks that
  failed it, then the reply's start (answer cases) or what was selected. A case that assay
  could not score (an infrastructure error) is a pytest *error*, apart from the failures; a
  case the run left out (its bank skipped, with assay's warning) is skipped.
* ``DIR::gate``: the quality gate, from the binary's exit code (0 passed, 1 failed). A failing
  gate shows what ``assay run`` printed: the comparison with the baseline, the regression
  gate's verdict and the summary.
* with ``--assay-simulate``: ``DIR::sim::<scenario>[<trial>]`` per simulation run and
  ``DIR::sim::gate``, from ``assay simulate DIR --json`` (run at collection).

The cases run when the first selected item of a project is set up, once per project and
session, after ``-k``, ``-m`` and node ids have selected: ``assay run DIR --junit FILE``, with
``--tests-from FILE`` naming the selected cases unless every case is selected (or only the
gate is). Under pytest-xdist (``-n N``) each worker K runs shard K of N of the selected cases
before it runs any item (``assay run DIR --shard hash:K/N --no-save --no-journal --json --junit …``), every
item reads its outcome from the shards' JUnit files once all N have finished, and the gate item
merges the shards once (``assay runs merge … --project DIR``): the product answers each case
once, whichever worker reports it.

A project that assay refuses at listing (exit 2, bad input) is a collection error carrying
assay's stderr; a run that assay refuses, or that infrastructure errors kept from any verdict
(exit 3 with no report), makes each of the project's items an error with the same words. The
binary is found by :func:`assay_eval.find_assay_bin`. Nothing here re-implements assay's
rules: verdicts, reasons and the gate all come from the binary. See docs/pytest.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterator

import pytest

#: What each exit code of ``assay run`` and ``assay simulate`` means (DESIGN.md).
EXIT_MEANING = {
    0: "passed",
    1: "the quality gate failed",
    2: "bad input or usage",
    3: "infrastructure errors kept cases from a verdict",
}

#: The words `assay run --help` uses for exit 1.
GATE_RULES = "CRITICAL health, below [gate] in assay.toml, or a regression rule broken"

BANKS = ("semantic", "state", "pattern", "always", "answer")

#: How long an item waits for the other pytest-xdist workers' shards, in seconds.
WAIT_ENV = "ASSAY_PYTEST_WAIT_SECONDS"
DEFAULT_WAIT_SECONDS = 3600.0

#: Selected ids shown as ``--test ID`` in the summary; more are shown as a count.
IDS_SHOWN = 10

_STATE = pytest.StashKey["_Session"]()


# --- What the binary reported ------------------------------------------------------------------


@dataclasses.dataclass
class CaseOutcome:
    """One bank case as the binary's JUnit XML reported it."""

    bank: str
    test_id: str
    title: str
    #: ``passed``, ``failed`` or ``error``.
    status: str
    #: assay's message: the checks that failed the case, or the error.
    message: str = ""
    #: the body of a failure: each failed check, then the reply's start (answer cases) or what
    #: was selected, and the score, a line each.
    details: str = ""
    #: how long the case took, in seconds (JUnit's ``time``), when measured.
    seconds: float | None = None

    def failure_text(self) -> str:
        """The text pytest shows for a failing or erroring case: assay's own words."""
        # The first line is what pytest's short summary shows: the checks that failed the case.
        lines = [line.strip() for line in self.details.splitlines() if line.strip()]
        first = self.message or (lines[0] if lines else "")
        rest = [line for line in lines if line != first]
        case = f"{self.test_id}: {self.title}" if self.title else self.test_id
        return "\n".join([first, *rest, f"(case {case})"])


def parse_junit(text: str) -> list[CaseOutcome]:
    """Every case of ``assay run --junit`` output, in the file's order (bank by bank)."""
    root = ET.fromstring(text)
    cases = []
    for suite in root.iter("testsuite"):
        bank = suite.get("name", "")
        for case in suite.iter("testcase"):
            name = case.get("name", "")
            # assay writes `ID: title`, or the ID alone when the case has no title.
            test_id, sep, title = name.partition(": ")
            if not sep:
                test_id, title = name, ""
            failure = case.find("failure")
            error = case.find("error")
            time = case.get("time")
            seconds = float(time) if time else None
            if error is not None:
                outcome = CaseOutcome(bank, test_id, title, "error", error.get("message", ""))
            elif failure is not None:
                outcome = CaseOutcome(
                    bank,
                    test_id,
                    title,
                    "failed",
                    failure.get("message", ""),
                    (failure.text or "").strip(),
                )
            else:
                outcome = CaseOutcome(bank, test_id, title, "passed")
            outcome.seconds = seconds
            cases.append(outcome)
    return cases


@dataclasses.dataclass(frozen=True)
class ListedCase:
    """One case of ``assay run --list --json``: what the run would score, not yet scored."""

    bank: str
    test_id: str


def parse_listing(stdout: str) -> list[ListedCase]:
    """The cases of ``assay run --list --json`` (``{"cases": [{"bank", "test_id"}, …]}``), in
    the binary's order; :class:`ValueError` when it printed something else."""
    listing = json.loads(stdout)
    if not isinstance(listing, dict) or not isinstance(listing.get("cases"), list):
        raise ValueError('expected {"cases": [{"bank": …, "test_id": …}, …]}')
    return [ListedCase(str(c["bank"]), str(c["test_id"])) for c in listing["cases"]]


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which of a project's cases the session selected."""

    #: The selected test ids in the listing's order, or ``None`` for the whole run (every case
    #: selected, or only the gate).
    ids: list[str] | None
    #: Case items selected, of ``total`` listed.
    selected: int
    total: int

    def partial(self) -> bool:
        return self.ids is not None


@dataclasses.dataclass
class Invocation:
    """One run of the binary: its command line, exit code and output."""

    command: list[str]
    exit_code: int
    stdout: str
    stderr: str
    #: The ids in the file ``--tests-from`` names, when the command has one.
    ids: list[str] | None = None

    def meaning(self) -> str:
        return EXIT_MEANING.get(self.exit_code, "assay stopped abnormally")

    def name(self) -> str:
        """``assay run``, ``assay runs merge``…: the subcommand, as messages name it."""
        words = [w for w in self.command[1:3] if not w.startswith("-") and "/" not in w]
        if words[:1] == ["runs"]:
            return "assay " + " ".join(words[:2])
        return "assay " + (words[0] if words else "")

    def shown(self) -> str:
        """The command line, without the scratch files the plugin reads (``--junit FILE``;
        ``--tests-from FILE`` shown as the ids it holds)."""
        words = ["assay", *self.command[1:]]
        if "--junit" in words:
            at = words.index("--junit")
            del words[at : at + 2]
        if "--tests-from" in words and self.ids is not None:
            at = words.index("--tests-from")
            if len(self.ids) <= IDS_SHOWN:
                words[at : at + 2] = [w for i in self.ids for w in ("--test", i)]
            else:
                words[at + 1] = f"({len(self.ids)} selected ids)"
        return shlex.join(words)

    def refusal(self) -> str:
        """The error for a run that gave no verdict at all."""
        stderr = self.stderr.strip() or "(nothing on stderr)"
        return (
            f"assay exited {self.exit_code} ({self.meaning()}) and reported no cases\n"
            f"  command: {self.shown()}\n{stderr}"
        )

    def record(self) -> dict[str, Any]:
        """What a pytest-xdist worker sends the controller for its summary (no stdout)."""
        return {
            "command": self.command,
            "exit_code": self.exit_code,
            "stderr": self.stderr,
            "ids": self.ids,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Invocation:
        return cls(
            list(record["command"]),
            int(record["exit_code"]),
            "",
            str(record.get("stderr", "")),
            record.get("ids"),
        )


@dataclasses.dataclass
class BankRun:
    """The cases of a project as assay scored them, and the gate from an exit code: that of
    ``assay run``, or of ``assay runs merge`` when pytest-xdist workers ran shards."""

    invocation: Invocation
    cases: list[CaseOutcome]
    selection: Selection | None = None
    #: What the runs that scored the cases said on stderr (every shard's, under pytest-xdist);
    #: the invocation's when not given.
    stderr: str | None = None

    def find(self, bank: str, test_id: str, occurrence: int = 1) -> CaseOutcome | None:
        """The ``occurrence``-th case (from 1) of ``test_id`` in ``bank``, if the run has it."""
        found = [c for c in self.cases if c.bank == bank and c.test_id == test_id]
        return found[occurrence - 1] if len(found) >= occurrence else None

    def warnings(self) -> list[str]:
        """assay's warnings on stderr, without their level."""
        said = self.invocation.stderr if self.stderr is None else self.stderr
        lines = [line.strip() for line in said.splitlines()]
        return [line[len("WARN ") :].strip() for line in lines if line.startswith("WARN ")]

    def missing_text(self, bank: str) -> str:
        """Why a selected case has no result: the run left it out (its bank skipped)."""
        warnings = self.warnings()
        if warnings:
            return f"assay did not run this {bank} case: " + "; ".join(warnings)
        return f"assay did not run this {bank} case (its bank was left out of the run)"

    def gate_status(self) -> str:
        return {0: "passed", 1: "failed"}.get(self.invocation.exit_code, "error")

    def gate_text(self) -> str:
        """Why the gate failed (or gave no verdict), in what ``assay run`` (or ``assay runs
        merge``) printed."""
        inv = self.invocation
        said = inv.stderr.strip().splitlines()
        verdicts = [line[len("ERROR ") :] for line in said if line.startswith("ERROR ")]
        rest = [line for line in said if not line.startswith("ERROR ")]
        if inv.exit_code == 1:
            # The first line is what pytest's short summary shows: assay's verdict when it
            # printed one (a broken regression rule), else what exit 1 means.
            head = [
                "; ".join(verdicts) or f"the quality gate failed ({GATE_RULES})",
                f"{inv.name()} exited 1: the quality gate failed",
            ]
        else:
            errors = sum(1 for c in self.cases if c.status == "error")
            why = f"{inv.name()} exited {inv.exit_code}: {inv.meaning()}"
            head = [
                f"no gate verdict: {errors} case(s) could not be scored ({why})"
                if errors
                else f"no gate verdict ({why})",
                *verdicts,
            ]
        sel = self.selection
        if sel is not None and sel.partial():
            head.append(f"(gate of a partial run: {sel.selected} of {sel.total} cases selected)")
        return _blocks("\n".join(head), console_summary(inv.stdout), "\n".join(rest))


def _blocks(*blocks: str) -> str:
    """The blocks that have text, a blank line between them."""
    return "\n\n".join(b for b in blocks if b.strip())


def console_summary(stdout: str) -> str:
    """The summary ``assay run`` printed, without what it says case by case (the items show
    it): from the failed cases by rule on."""
    lines = stdout.rstrip().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(("failed: ", "cases below ", "failures:")):
            lines = lines[:i]
            break
    return "\n".join(lines).strip("\n")


@dataclasses.dataclass
class SimRunOutcome:
    """One simulation run (scenario × trial) from ``assay simulate --json``."""

    scenario_id: str
    repeat: int
    #: ``passed``, ``failed``, ``error`` or ``skipped`` (simulator at fault, uncertain).
    status: str
    text: str


def _score(value: Any) -> str:
    return "–" if value is None else f"{value:.1f}"


def sim_run_outcome(run: dict[str, Any], pass_threshold: Any) -> SimRunOutcome:
    """A run of the simulation report as a pytest outcome, worded as assay's reports word it."""
    verdict = run.get("verdict", "error")
    scenario = run.get("scenario_id", "?")
    repeat = int(run.get("repeat", 1))
    head = f"{scenario} #{repeat}: {run.get('scenario_name', '')}".rstrip(": ")
    judgement = run.get("judgement") or {}
    reason = run.get("reason") or ""
    if verdict == "pass":
        return SimRunOutcome(scenario, repeat, "passed", "")
    if verdict == "error":
        return SimRunOutcome(
            scenario, repeat, "error", f"ERROR: {run.get('error') or ''}\n(run {head})"
        )
    if verdict == "simulator_fault":
        issue = judgement.get("simulator_issue", "")
        return SimRunOutcome(
            scenario,
            repeat,
            "skipped",
            f"{scenario} #{repeat}: simulated user at fault (not counted): {issue}",
        )
    if verdict == "uncertain":
        return SimRunOutcome(
            scenario,
            repeat,
            "skipped",
            f"{scenario} #{repeat}: uncertain (the judge's samples disagree; not counted): "
            f"{reason}",
        )
    cause = run.get("failed_by")
    # The first line is what pytest's short summary shows: the verdict and why.
    judge = run.get("judge_verdict")
    why = []
    if reason:
        said = f" (the judge said {judge})" if cause == "check" and judge else ""
        why.append(f"{reason}{said}")
    why.append(f"overall {_score(run.get('overall'))}/10, pass threshold {_score(pass_threshold)}")
    lines = [f"FAIL ({cause or 'judge'}): {'; '.join(why)}", f"(run {head})"]
    if judgement.get("summary"):
        lines.append(f"Judge: {judgement['summary']}")
    scores = sorted(judgement.get("scores", []), key=lambda s: s.get("score", 0))
    for s in scores:
        lines.append(
            f"  {s.get('name', s.get('id', '?'))} {s.get('score', 0):.0f}/10: "
            f"{' '.join(str(s.get('reasoning', '')).split())}"
        )
    return SimRunOutcome(scenario, repeat, "failed", "\n".join(lines))


@dataclasses.dataclass
class SimRun:
    """``assay simulate`` on one project."""

    invocation: Invocation
    runs: list[SimRunOutcome]
    gate_lines: list[str]

    def gate_status(self) -> str:
        return {0: "passed", 1: "failed"}.get(self.invocation.exit_code, "error")

    def gate_text(self) -> str:
        """The gate's and the baseline's lines, as ``assay simulate`` words them."""
        inv = self.invocation
        if inv.exit_code == 1:
            # The first line is what pytest's short summary shows: the failed rule, if any.
            failed = [line for line in self.gate_lines if "FAILED" in line or "REGRESSED" in line]
            head = [
                *failed[:1],
                "assay simulate exited 1: a scored run failed, or the gate failed, "
                "or --baseline found a significant regression",
            ]
        else:
            errors = sum(1 for r in self.runs if r.status == "error")
            head = [
                f"no gate verdict: {errors} run(s) ended in an error "
                f"(assay simulate exited {inv.exit_code}: {inv.meaning()})"
            ]
        return _blocks("\n".join(head), "\n".join(self.gate_lines), inv.stderr.strip())


def parse_sim_report(report: dict[str, Any]) -> tuple[list[SimRunOutcome], list[str]]:
    """The runs and the gate's lines of a simulation report (``assay simulate --json``)."""
    threshold = report.get("pass_threshold")
    runs = [sim_run_outcome(r, threshold) for r in report.get("runs", [])]
    lines = []
    gate = report.get("gate")
    if gate:
        rule = (
            "gate (no `gate:` in the suite: every scored run must pass): "
            if gate.get("implicit")
            else "gate: "
        )
        reasons = gate.get("reasons") or []
        why = f" ({'; '.join(reasons)})" if reasons else ""
        lines.append(f"{rule}{'passed' if gate.get('passed') else 'FAILED'}{why}")
    baseline = report.get("baseline")
    if baseline:
        verdict = "no significant regression" if baseline.get("passed") else "REGRESSED"
        lines.append(f"compared with {baseline.get('label', 'the baseline')}: {verdict}")
        lines.extend(f"  {r}" for r in baseline.get("reasons") or [])
        warnings = (baseline.get("comparison") or {}).get("warnings") or []
        lines.extend(f"  warning: {w}" for w in warnings)
    return runs, lines


# --- Running the binary --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ProjectSpec:
    """What to run on one project."""

    dir: Path
    args: tuple[str, ...] = ()
    baseline: str | None = None
    simulate: bool = False
    simulate_args: tuple[str, ...] = ()


class AssayRunError(Exception):
    """The binary gave no verdict (exit 2, or 3 with no report): a collection error at
    listing, an error of each of the project's items at the run."""


def _assay_bin() -> str:
    try:
        from assay_eval import find_assay_bin
    except ImportError as e:  # pragma: no cover - the package ships both modules
        raise AssayRunError(f"cannot import assay_eval.find_assay_bin: {e}") from e
    try:
        return find_assay_bin()
    except Exception as e:  # noqa: BLE001 - whatever it raises, the user needs its words
        raise AssayRunError(f"cannot find the assay binary: {e}") from e


def _invoke(command: list[str], ids: list[str] | None = None) -> Invocation:
    env = dict(os.environ)
    env.setdefault("NO_COLOR", "1")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, encoding="utf-8", env=env, check=False
        )
    except OSError as e:
        raise AssayRunError(f"cannot start {command[0]}: {e}") from e
    return Invocation(command, done.returncode, done.stdout, done.stderr, ids)


def _with(args: tuple[str, ...], *flags: str) -> list[str]:
    """The flags the user's arguments do not already hold (clap refuses a flag given twice)."""
    return [f for f in flags if f not in args]


def list_cases(spec: ProjectSpec) -> list[ListedCase]:
    """``assay run DIR --list --json ARGS``: the cases a run would score, none run."""
    command = [_assay_bin(), "run", str(spec.dir), "--list", *_with(spec.args, "--json")]
    inv = _invoke(command + list(spec.args))
    if inv.exit_code != 0:
        raise AssayRunError(inv.refusal())
    try:
        return parse_listing(inv.stdout)
    except (ValueError, KeyError, TypeError) as e:
        raise AssayRunError(
            f"cannot read the cases `{inv.shown()}` listed ({e}): {inv.stdout.strip()[:300]!r}"
        ) from e


def _tests_from(selection: Selection, scratch: Path) -> list[str]:
    """``--tests-from FILE`` (one selected id a line) for a partial run, else nothing."""
    if selection.ids is None:
        return []
    fd, path = tempfile.mkstemp(prefix="assay-tests-", suffix=".txt", dir=scratch)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("".join(f"{i}\n" for i in selection.ids))
    return ["--tests-from", path]


def run_banks(spec: ProjectSpec, scratch: Path, selection: Selection) -> BankRun:
    """``assay run DIR --junit FILE [--tests-from FILE] [--baseline SPEC] ARGS``, its cases and
    its exit code."""
    fd, junit = tempfile.mkstemp(prefix="assay-", suffix=".xml", dir=scratch)
    os.close(fd)
    os.unlink(junit)
    command = [_assay_bin(), "run", str(spec.dir), "--junit", junit]
    command += _tests_from(selection, scratch)
    if spec.baseline:
        command += ["--baseline", spec.baseline]
    command += list(spec.args)
    inv = _invoke(command, selection.ids)
    written = Path(junit)
    if inv.exit_code not in (0, 1, 3) or not written.is_file():
        raise AssayRunError(inv.refusal())
    try:
        cases = parse_junit(written.read_text(encoding="utf-8"))
    except ET.ParseError as e:
        raise AssayRunError(f"cannot read assay's JUnit XML {junit}: {e}") from e
    return BankRun(inv, cases, selection)


def run_simulation(spec: ProjectSpec) -> SimRun:
    """``assay simulate DIR --json ARGS``, its runs and its gate."""
    command = [_assay_bin(), "simulate", str(spec.dir), "--json", *spec.simulate_args]
    inv = _invoke(command)
    report = None
    if inv.exit_code in (0, 1, 3):
        try:
            report = json.loads(inv.stdout)
        except ValueError:
            report = None
    if not isinstance(report, dict):
        raise AssayRunError(inv.refusal())
    runs, gate_lines = parse_sim_report(report)
    return SimRun(inv, runs, gate_lines)


# --- pytest-xdist: a shard per worker, one merge -------------------------------------------------


@dataclasses.dataclass(frozen=True)
class XdistWorker:
    """This session as a pytest-xdist worker: which shard it runs, of how many, in which run."""

    #: The shard this worker runs, from 1 (worker ``gw0`` runs shard 1); 0 when its id is not
    #: one of the first ``count`` (a restarted worker), which runs none.
    shard: int
    count: int
    #: The id the controller gave the whole test run, shared by its workers.
    run_id: str

    @classmethod
    def of(cls, config: pytest.Config) -> XdistWorker | None:
        """The worker this session is, or ``None`` outside pytest-xdist (and on its controller).

        Read from ``config.workerinput`` (what ``PYTEST_XDIST_WORKER``,
        ``PYTEST_XDIST_WORKER_COUNT`` and ``PYTEST_XDIST_TESTRUNUID`` are set from) rather than
        the environment, which a pytest session started inside a worker's test inherits."""
        info = getattr(config, "workerinput", None)
        if not isinstance(info, dict):
            return None
        workerid = str(info.get("workerid") or os.environ.get("PYTEST_XDIST_WORKER", ""))
        count = int(info.get("workercount") or os.environ.get("PYTEST_XDIST_WORKER_COUNT", 1))
        run_id = str(info.get("testrunuid") or os.environ.get("PYTEST_XDIST_TESTRUNUID", ""))
        number = workerid[2:] if workerid.startswith("gw") else ""
        shard = int(number) + 1 if number.isdigit() and int(number) < count else 0
        return cls(shard, count, run_id or "unknown")

    @property
    def root(self) -> Path:
        """The folder the workers share: the shards' JUnit, RunLog and done files."""
        return Path(tempfile.gettempdir()) / f"assay-pytest-{self.run_id}"

    def folder(self, spec: ProjectSpec) -> Path:
        """The shared folder of one project's shards."""
        return self.root / project_key(spec)


def project_key(spec: ProjectSpec) -> str:
    """A folder name for a project's run, the same in every worker."""
    what = json.dumps([str(spec.dir), list(spec.args), spec.baseline])
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in spec.dir.name) or "project"
    return f"{name}-{hashlib.sha256(what.encode('utf-8')).hexdigest()[:12]}"


def _write_atomically(path: Path, text: str) -> None:
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temporary, path)


def run_shard(
    spec: ProjectSpec, worker: XdistWorker, selection: Selection, scratch: Path
) -> Invocation:
    """``assay run DIR --shard hash:K/N --no-save --no-journal --json --junit shard-K.xml [--tests-from
    FILE] ARGS``: the shard's JUnit and RunLog (``shard-K.json``) in the shared folder, then
    ``shard-K.done`` (``{"exit", "stderr", "command", "ids"}``, or ``{"error"}`` when the binary
    could not run), written last and atomically: what the other workers wait for."""
    folder = worker.folder(spec)
    folder.mkdir(parents=True, exist_ok=True)
    k, n = worker.shard, worker.count
    done: dict[str, Any]
    inv = None
    try:
        if "--shard" in spec.args or any(a.startswith("--shard=") for a in spec.args):
            raise AssayRunError(
                "--shard is in the assay arguments: under pytest-xdist the plugin shards the run "
                "itself, one shard per worker; remove it (or run without -n)"
            )
        command = [_assay_bin(), "run", str(spec.dir), "--shard", f"hash:{k}/{n}"]
        command += _with(spec.args, "--no-save", "--no-journal", "--json")
        command += ["--junit", str(folder / f"shard-{k}.xml")]
        command += _tests_from(selection, scratch)
        command += list(spec.args)
        inv = _invoke(command, selection.ids)
        (folder / f"shard-{k}.json").write_text(inv.stdout, encoding="utf-8")
        done = {"exit": inv.exit_code, "stderr": inv.stderr, "command": command}
        done["ids"] = selection.ids
        # The RunLog is in its file; the summary needs only the command and stderr.
        inv = dataclasses.replace(inv, stdout="")
    except Exception as e:  # noqa: BLE001 - the other workers must hear of it, not wait
        done = {"error": str(e) if isinstance(e, AssayRunError) else f"{type(e).__name__}: {e}"}
    _write_atomically(folder / f"shard-{k}.done", json.dumps(done))
    if inv is None:
        raise AssayRunError(done["error"])
    return inv


def _wait_seconds() -> float:
    try:
        return float(os.environ.get(WAIT_ENV, DEFAULT_WAIT_SECONDS))
    except ValueError:
        return DEFAULT_WAIT_SECONDS


def read_shards(spec: ProjectSpec, worker: XdistWorker, selection: Selection) -> BankRun:
    """Every shard's cases, once all N workers have run theirs (polled every 0.1 s, for
    ``ASSAY_PYTEST_WAIT_SECONDS`` at most)."""
    folder = worker.folder(spec)
    shards = range(1, worker.count + 1)
    limit = _wait_seconds()
    deadline = time.monotonic() + limit
    while True:
        missing = [k for k in shards if not (folder / f"shard-{k}.done").is_file()]
        if not missing:
            break
        if time.monotonic() >= deadline:
            k = missing[0]
            raise AssayRunError(
                f"waited {limit:g} s for shard {k} of {worker.count} (pytest-xdist worker "
                f"gw{k - 1} runs `assay run --shard hash:{k}/{worker.count}`): "
                f"{folder / f'shard-{k}.done'} is not there; set {WAIT_ENV} to wait longer"
            )
        time.sleep(0.1)
    cases: list[CaseOutcome] = []
    invocations = []
    for k in shards:
        done = json.loads((folder / f"shard-{k}.done").read_text(encoding="utf-8"))
        if "error" in done:
            raise AssayRunError(f"shard {k} of {worker.count}: {done['error']}")
        inv = Invocation(done["command"], int(done["exit"]), "", done["stderr"], done.get("ids"))
        junit = folder / f"shard-{k}.xml"
        if inv.exit_code not in (0, 1, 3) or not junit.is_file():
            raise AssayRunError(inv.refusal())
        try:
            cases += parse_junit(junit.read_text(encoding="utf-8"))
        except ET.ParseError as e:
            raise AssayRunError(f"cannot read assay's JUnit XML {junit}: {e}") from e
        invocations.append(inv)
    stderr = "\n".join(inv.stderr for inv in invocations)
    return BankRun(invocations[0], cases, selection, stderr=stderr)


def merge_shards(spec: ProjectSpec, worker: XdistWorker) -> Invocation:
    """``assay runs merge shard-1.json … shard-N.json --project DIR [--baseline SPEC]
    [--no-save]``: the gate of the whole (selected) run."""
    folder = worker.folder(spec)
    logs = [str(folder / f"shard-{k}.json") for k in range(1, worker.count + 1)]
    command = [_assay_bin(), "runs", "merge", *logs, "--project", str(spec.dir)]
    if spec.baseline:
        command += ["--baseline", spec.baseline]
    if "--no-save" in spec.args:
        command.append("--no-save")
    return _invoke(command)


# --- A pytest session's runs ----------------------------------------------------------------------


def _remember(cache: dict[Any, Any], key: Any, make: Any) -> Any:
    """``cache[key]``, made once by ``make()``; an :class:`AssayRunError` is kept and raised
    again to every later caller."""
    if key not in cache:
        try:
            cache[key] = make()
        except AssayRunError as e:
            cache[key] = e
    found = cache[key]
    if isinstance(found, AssayRunError):
        raise found
    return found


class _Session:
    """Per pytest session: each project's listing and runs (once each), the projects collected
    so far, each run of the binary for the summary."""

    def __init__(self, worker: XdistWorker | None = None) -> None:
        self._scratch: Path | None = None
        self.worker = worker
        self.listings: dict[ProjectSpec, list[ListedCase] | AssayRunError] = {}
        self.bank_runs: dict[ProjectSpec, BankRun | AssayRunError] = {}
        self.gates: dict[ProjectSpec, BankRun | AssayRunError] = {}
        self.sim_runs: dict[ProjectSpec, SimRun | AssayRunError] = {}
        self.collected: set[Path] = set()
        self.order: list[Invocation] = []
        #: The workers' shared folders (on the pytest-xdist controller), removed at the end.
        self.shared: set[str] = set()

    @property
    def scratch(self) -> Path:
        """A folder for the binary's JUnit files and the selected ids, made when first
        needed."""
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="assay-pytest-"))
        return self._scratch

    def listing(self, spec: ProjectSpec) -> list[ListedCase]:
        return _remember(self.listings, spec, lambda: list_cases(spec))

    def selection(self, spec: ProjectSpec, session: pytest.Session) -> Selection:
        """The project's cases among the session's final items (after ``-k``, ``-m``, node
        ids): the whole run when every case is selected, or none is (the gate alone)."""
        listed = self.listing(spec)
        chosen = [i for i in session.items if isinstance(i, AssayCase) and i.bank_spec == spec]
        selected = len({i.nodeid for i in chosen})
        if not chosen or selected >= len(listed):
            return Selection(None, len(listed), len(listed))
        wanted = {i.test_id for i in chosen}
        ids = list(dict.fromkeys(c.test_id for c in listed if c.test_id in wanted))
        return Selection(ids, selected, len(listed))

    def banks(self, spec: ProjectSpec, session: pytest.Session) -> BankRun:
        """The project's cases as assay scored them: run now (on the first item that asks),
        or, under pytest-xdist, read from every worker's shard."""

        def make() -> BankRun:
            selection = self.selection(spec, session)
            if self.worker is not None:
                return read_shards(spec, self.worker, selection)
            run = run_banks(spec, self.scratch, selection)
            self.order.append(run.invocation)
            return run

        return _remember(self.bank_runs, spec, make)

    def gate(self, spec: ProjectSpec, session: pytest.Session) -> BankRun:
        """The run whose exit code is the project's gate: ``assay run``'s, or under
        pytest-xdist the merge of the shards (made once, by the worker that runs the gate)."""
        worker = self.worker
        if worker is None:
            return self.banks(spec, session)

        def make() -> BankRun:
            shards = self.banks(spec, session)
            merged = merge_shards(spec, worker)
            self.order.append(merged)
            return BankRun(merged, shards.cases, shards.selection, stderr=shards.stderr)

        return _remember(self.gates, spec, make)

    def run_shards(self, session: pytest.Session) -> None:
        """This worker's shard of each project that has a selected item (every worker runs
        one, whatever items the controller then gives it)."""
        worker = self.worker
        if worker is None or worker.shard == 0:
            return
        for spec, listed in list(self.listings.items()):
            if isinstance(listed, AssayRunError):
                continue
            if not any(getattr(i, "bank_spec", None) == spec for i in session.items):
                continue
            try:
                self.order.append(
                    run_shard(spec, worker, self.selection(spec, session), self.scratch)
                )
            except AssayRunError:
                # In the shard's done file: every item of the project reports it.
                pass

    def simulation(self, spec: ProjectSpec) -> SimRun:
        def make() -> SimRun:
            run = run_simulation(spec)
            self.order.append(run.invocation)
            return run

        return _remember(self.sim_runs, spec, make)

    def close(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        for folder in self.shared:
            shutil.rmtree(folder, ignore_errors=True)


# --- pytest's side -------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("assay", "assay (test harness for LLM and RAG apps)")
    group.addoption(
        "--assay",
        action="append",
        dest="assay_dirs",
        default=[],
        metavar="DIR",
        help="collect the cases of the assay project DIR (repeatable); runs `assay run` once, on "
        "the selected cases",
    )
    group.addoption(
        "--assay-baseline",
        dest="assay_baseline",
        default=None,
        metavar="SPEC",
        help="compare with a saved run (`accepted`, `latest`, a run id or a results JSON): "
        "passed to `assay run --baseline` (to `assay runs merge` under pytest-xdist); the "
        "DIR::gate item carries the verdict",
    )
    group.addoption(
        "--assay-args",
        dest="assay_args",
        default=None,
        metavar="ARGS",
        help='extra arguments for `assay run`, one string (e.g. "--banks state --no-save")',
    )
    group.addoption(
        "--assay-simulate",
        dest="assay_simulate",
        action="store_true",
        default=None,
        help="also run `assay simulate` on projects with sim/suite.yaml: one item per run",
    )
    group.addoption(
        "--assay-simulate-args",
        dest="assay_simulate_args",
        default=None,
        metavar="ARGS",
        help='extra arguments for `assay simulate`, one string (e.g. "--model openai/gpt-4o")',
    )
    parser.addini(
        "assay_projects",
        type="paths",
        default=[],
        help="assay project directories to collect (relative to the ini file)",
    )
    parser.addini("assay_args", default="", help="extra arguments for `assay run`")
    parser.addini("assay_baseline", default="", help="`--baseline` for `assay run`")
    parser.addini("assay_simulate", type="bool", default=False, help="also run `assay simulate`")
    parser.addini("assay_simulate_args", default="", help="extra arguments for `assay simulate`")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "assay_project(dir, *, args=None, baseline=None, simulate=None, simulate_args=None, "
        "name=None): collect the cases of an assay project under this test module "
        "(dir relative to the module's folder)",
    )
    config.addinivalue_line("markers", "assay: an item made from an assay case or gate")
    config.addinivalue_line("markers", "assay_gate: assay's quality gate of a project")
    config.stash[_STATE] = _Session(XdistWorker.of(config))


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(_STATE, None)
    if state is not None:
        state.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Iterator[None]:
    """Under pytest-xdist, each worker runs its shard of every project before it runs any item
    (all workers at once); the items then wait for the other shards."""
    state = session.config.stash.get(_STATE, None)
    stopped = session.testsfailed and not session.config.option.continue_on_collection_errors
    if state is not None and not session.config.option.collectonly and not stopped:
        state.run_shards(session)
    yield


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker sends its runs of the binary, and its shared folder, to the
    controller."""
    config = session.config
    output = getattr(config, "workeroutput", None)
    state = config.stash.get(_STATE, None)
    if output is None or state is None or state.worker is None:
        return
    output["assay"] = {
        "invocations": [inv.record() for inv in state.order],
        "shared": str(state.worker.root),
    }


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """The pytest-xdist controller hears what a worker ran, for the summary."""
    state = node.config.stash.get(_STATE, None)
    sent = (getattr(node, "workeroutput", None) or {}).get("assay")
    if state is None or not sent:
        return
    state.order += [Invocation.from_record(r) for r in sent.get("invocations", [])]
    if sent.get("shared"):
        state.shared.add(sent["shared"])


def _args(text: str | None) -> tuple[str, ...]:
    return tuple(shlex.split(text)) if text else ()


def _session_defaults(config: pytest.Config) -> dict[str, Any]:
    opt = config.option
    simulate = opt.assay_simulate
    if simulate is None:
        simulate = bool(config.getini("assay_simulate"))
    return {
        "args": _args(
            opt.assay_args if opt.assay_args is not None else config.getini("assay_args")
        ),
        "baseline": opt.assay_baseline or config.getini("assay_baseline") or None,
        "simulate": simulate,
        "simulate_args": _args(
            opt.assay_simulate_args
            if opt.assay_simulate_args is not None
            else config.getini("assay_simulate_args")
        ),
    }


def _node_id(config: pytest.Config, path: Path, typed: str) -> str:
    """The project's path from pytest's root folder (its name when it is the root folder), or
    as typed when it lies outside."""
    try:
        relative = path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return typed.rstrip("/\\") or typed
    return path.name if relative in ("", ".") else relative


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """Adds the projects: those of the command line and ini file under the session, those a
    module names with ``pytest.mark.assay_project`` under that module."""
    outcome = yield
    # Cheap for every other collector: the plugin is loaded in every session of an environment
    # where assay-eval is installed.
    if isinstance(collector, (pytest.Session, pytest.Module)):
        rep = outcome.get_result()
        if rep.outcome == "passed" and isinstance(rep.result, list):
            _add_projects(collector, rep.result)


def _add_projects(collector: pytest.Collector, result: list[Any]) -> None:
    config = collector.config
    state = config.stash[_STATE]
    if isinstance(collector, pytest.Session):
        defaults = _session_defaults(config)
        typed = [(d, config.invocation_params.dir / d) for d in config.option.assay_dirs]
        typed += [(str(p), Path(p)) for p in config.getini("assay_projects")]
        for text, path in typed:
            path = path.resolve()
            if path in state.collected:
                continue
            state.collected.add(path)
            spec = ProjectSpec(dir=path, **defaults)
            result.append(
                AssayProject.from_parent(
                    collector,
                    name=_node_id(config, path, text),
                    path=path,
                    nodeid=_node_id(config, path, text),
                    spec=spec,
                )
            )
    elif isinstance(collector, pytest.Module):
        for mark in collector.iter_markers("assay_project"):
            if not mark.args:
                result.append(_MarkerError.from_parent(collector, name="assay_project"))
                continue
            path = (collector.path.parent / str(mark.args[0])).resolve()
            if path in state.collected:
                continue
            state.collected.add(path)
            defaults = _session_defaults(config)
            kw = dict(mark.kwargs)
            spec = ProjectSpec(
                dir=path,
                args=_args(kw["args"]) if kw.get("args") is not None else defaults["args"],
                baseline=kw.get("baseline", defaults["baseline"]),
                simulate=(
                    bool(kw["simulate"]) if kw.get("simulate") is not None else defaults["simulate"]
                ),
                simulate_args=(
                    _args(kw["simulate_args"])
                    if kw.get("simulate_args") is not None
                    else defaults["simulate_args"]
                ),
            )
            result.append(
                AssayProject.from_parent(
                    collector, name=kw.get("name") or path.name, path=path, spec=spec
                )
            )


class _MarkerError(pytest.Collector):
    """A module's ``assay_project`` marker without a directory: a collection error."""

    def collect(self) -> Iterator[pytest.Item]:
        raise self.CollectError(
            "pytest.mark.assay_project needs the project directory, e.g. "
            'pytest.mark.assay_project("../my-project")'
        )


class AssayProject(pytest.Collector):
    """One assay project: its banks' cases, its gate and, when asked, its simulation."""

    def __init__(self, *, spec: ProjectSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        self.add_marker("assay")

    def collect(self) -> Iterator[pytest.Item | pytest.Collector]:
        state = self.config.stash[_STATE]
        spec = self.spec
        # A simulation-only project (sim/ and no test_banks/) runs no banks when simulating.
        banks = not (
            spec.simulate
            and not (spec.dir / "test_banks").exists()
            and (spec.dir / "sim" / "suite.yaml").is_file()
        )
        try:
            if banks:
                by_bank: dict[str, list[ListedCase]] = {}
                for case in state.listing(spec):
                    by_bank.setdefault(case.bank, []).append(case)
                for bank in sorted(by_bank, key=lambda b: (BANKS + (b,)).index(b)):
                    yield AssayBank.from_parent(self, name=bank, cases=by_bank[bank], spec=spec)
                yield AssayGate.from_parent(self, name="gate", spec=spec)
            if spec.simulate and (spec.dir / "sim" / "suite.yaml").is_file():
                yield AssaySimulation.from_parent(self, name="sim", run=state.simulation(spec))
        except AssayRunError as e:
            raise self.CollectError(f"{spec.dir}: {e}") from e

    def reportinfo(self):
        return self.path, None, self.name


class AssayBank(pytest.Collector):
    """One bank's cases."""

    def __init__(self, *, cases: list[ListedCase], spec: ProjectSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cases = cases
        self.spec = spec

    def collect(self) -> Iterator[pytest.Item]:
        seen: dict[str, int] = {}
        for case in self.cases:
            seen[case.test_id] = seen.get(case.test_id, 0) + 1
            n = seen[case.test_id]
            # A bank that repeats an id still gets an item per case.
            name = case.test_id if n == 1 else f"{case.test_id}[{n}]"
            yield AssayCase.from_parent(
                self, name=name, listed=case, occurrence=n, spec=self.spec
            )


class _AssayItem(pytest.Item):
    def reportinfo(self):
        # The project's folder; a line, since pytest places a skip by its item's line.
        return self.path, 0, self.nodeid


def _run_or_fail(get: Any) -> Any:
    """What ``get()`` returns; a run that gave no verdict fails the item (an error, at setup)."""
    try:
        return get()
    except AssayRunError as e:
        message = str(e)
    # Outside the handler, so that pytest shows assay's words once, not a chain of exceptions.
    pytest.fail(message, pytrace=False)


class AssayCase(_AssayItem):
    """One bank case; its outcome comes from assay's JUnit XML once the project has run."""

    def __init__(
        self, *, listed: ListedCase, occurrence: int, spec: ProjectSpec, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.bank = listed.bank
        self.test_id = listed.test_id
        #: Which case of this id in its bank (from 1), when the bank repeats an id.
        self.occurrence = occurrence
        self.bank_spec = spec
        self.case: CaseOutcome | None = None

    def setup(self) -> None:
        state = self.config.stash[_STATE]
        spec = self.bank_spec
        run = _run_or_fail(lambda: state.banks(spec, self.session))
        case = run.find(self.bank, self.test_id, self.occurrence)
        if case is None:
            skip = pytest.skip.Exception(run.missing_text(self.bank))
            # Reported where the item is, as a skip mark's would be, not in this file.
            skip._use_item_location = True
            raise skip
        self.case = case
        if case.title:
            self.user_properties.append(("assay.title", case.title))
        if case.seconds is not None:
            # The case's own duration as assay measured it (the item itself takes no time).
            self.user_properties.append(("assay.time", f"{case.seconds:.3f}"))
        # An infrastructure error is a pytest error (at setup), kept apart from failures.
        if case.status == "error":
            pytest.fail(
                "assay could not score this case (infrastructure error):\n" + case.failure_text(),
                pytrace=False,
            )

    def runtest(self) -> None:
        if self.case is not None and self.case.status == "failed":
            pytest.fail(self.case.failure_text(), pytrace=False)


class AssayGate(_AssayItem):
    """A gate: the exit code of ``assay run`` or ``assay runs merge`` (a project's banks), or of
    ``assay simulate`` (its simulation)."""

    def __init__(
        self, *, spec: ProjectSpec | None = None, run: SimRun | None = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        #: The project whose banks this gate judges (``None`` for a simulation's gate).
        self.bank_spec = spec
        self.run: BankRun | SimRun | None = run
        self.add_marker("assay_gate")

    def setup(self) -> None:
        if self.run is None and self.bank_spec is not None:
            state = self.config.stash[_STATE]
            spec = self.bank_spec
            self.run = _run_or_fail(lambda: state.gate(spec, self.session))
        if self.run is not None and self.run.gate_status() == "error":
            pytest.fail(self.run.gate_text(), pytrace=False)

    def runtest(self) -> None:
        if self.run is not None and self.run.gate_status() == "failed":
            pytest.fail(self.run.gate_text(), pytrace=False)


class AssaySimulation(pytest.Collector):
    """A project's simulation: one item per scenario run, and the simulation's gate."""

    def __init__(self, *, run: SimRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run

    def collect(self) -> Iterator[pytest.Item]:
        for outcome in self.run.runs:
            yield AssaySimItem.from_parent(
                self, name=f"{outcome.scenario_id}[{outcome.repeat}]", outcome=outcome
            )
        yield AssayGate.from_parent(self, name="gate", run=self.run)


class AssaySimItem(_AssayItem):
    """One simulation run (scenario × trial)."""

    def __init__(self, *, outcome: SimRunOutcome, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.outcome = outcome
        if outcome.status == "skipped":
            # As a mark, so that pytest reports the item, not this file, as where it skipped.
            self.add_marker(pytest.mark.skip(reason=outcome.text))

    def setup(self) -> None:
        if self.outcome.status == "error":
            pytest.fail(self.outcome.text, pytrace=False)

    def runtest(self) -> None:
        if self.outcome.status == "failed":
            pytest.fail(self.outcome.text, pytrace=False)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Each run of the binary in a line, with what it said on stderr (warnings)."""
    state = config.stash.get(_STATE, None)
    if state is None or not state.order:
        return
    terminalreporter.section("assay")
    for inv in state.order:
        terminalreporter.write_line(f"{inv.shown()}: exit {inv.exit_code} ({inv.meaning()})")
        for line in inv.stderr.strip().splitlines()[:20]:
            terminalreporter.write_line(f"  {line}")
